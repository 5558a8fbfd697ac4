//! Which effect store `wop serve` uses, and opening it with the
//! settings of `serve.toml`.

use crate::config::ServeConfig;
use std::sync::Arc;
use wop_runtime::store::{KvStore, MemoryStore, SledOptions, StoreRoom, TenantShare};

/// The store, and each tenant's share of it when there is one.
pub(crate) type Opened = (Arc<dyn KvStore>, Option<Arc<TenantShare>>);

/// `usageDeferMs` on a store only this process uses (sled, memory).
const DEFAULT_USAGE_DEFER_MS: u64 = 10;

/// Where effect claims, recorded responses and usage live.
#[derive(Clone)]
pub enum StoreChoice {
    /// A sled directory or a `postgres://` URL (`wop_runtime::store::open`).
    Spec(String),
    /// In memory: lost at exit (tests, benchmarks).
    Memory,
    /// A store the embedder built.
    Custom(Arc<dyn KvStore>),
}

impl StoreChoice {
    /// Opens the store: in memory with `memoryStoreBytes`, sled keeping
    /// `diskReserveBytes` free (decision 0053), each tenant's records
    /// within `maxStoreBytesPerTenant` (decisions 0054, 0055); with the
    /// share, when there is one, to ask before an invocation starts.
    pub(crate) async fn open(&self, cfg: &ServeConfig) -> Result<Opened, String> {
        if let StoreChoice::Spec(s) = self
            && wop_runtime::store::is_postgres_url(s)
            && cfg.max_store_bytes_per_tenant.is_some_and(|b| b > 0)
        {
            return Err(
                "maxStoreBytesPerTenant needs a store one process writes (sled or \
                 --memory-store): executors sharing a PostgreSQL store would each count only \
                 their own writes; remove it (or set 0)"
                    .into(),
            );
        }
        let store: Arc<dyn KvStore> = match self {
            StoreChoice::Memory => Arc::new(MemoryStore::with_capacity(cfg.memory_store_bytes)),
            StoreChoice::Spec(s) => {
                let sled = SledOptions {
                    reserve: cfg.disk_reserve_bytes,
                    ..SledOptions::default()
                };
                wop_runtime::store::open_with(s, sled).map_err(|e| e.to_string())?
            }
            StoreChoice::Custom(s) => s.clone(),
        };
        self.shared_out(store, cfg).await
    }

    /// `store` with each tenant's share of its records, when one is set
    /// or due by default.
    async fn shared_out(
        &self,
        store: Arc<dyn KvStore>,
        cfg: &ServeConfig,
    ) -> Result<Opened, String> {
        let set = cfg.max_store_bytes_per_tenant;
        let local = match self {
            StoreChoice::Spec(s) => !wop_runtime::store::is_postgres_url(s),
            StoreChoice::Memory => true,
            StoreChoice::Custom(_) => false,
        };
        let wanted = match set {
            Some(0) => false,
            Some(_) => true,
            None => local && cfg.tenants().len() > 1,
        };
        if !wanted {
            return Ok((store, None));
        }
        let counted = TenantShare::open(store.clone(), u64::MAX)
            .await
            .map_err(|e| format!("cannot count the tenants' records: {e}"))?;
        let share = match set {
            Some(b) => b,
            None => default_share(self, cfg, counted.total(), store.room()),
        };
        tracing::info!(
            share_bytes = share,
            held_bytes = counted.total(),
            "each tenant's records are kept within its share of the store \
             (maxStoreBytesPerTenant)"
        );
        let shared = Arc::new(counted.with_share(share));
        Ok((shared.clone(), Some(shared)))
    }

    /// `usageDeferMs` unless `serve.toml` says: 0 where other executors
    /// may read the same usage (PostgreSQL, a store the embedder built).
    pub(crate) fn usage_defer_ms(&self) -> u64 {
        match self {
            StoreChoice::Spec(s) if wop_runtime::store::is_postgres_url(s) => 0,
            StoreChoice::Custom(_) => 0,
            StoreChoice::Spec(_) | StoreChoice::Memory => DEFAULT_USAGE_DEFER_MS,
        }
    }
}

/// With several tenants and no `maxStoreBytesPerTenant`: three quarters of
/// what the store can hold (`tenant_default`, as for
/// `maxInFlightPerTenant`), so that one tenant always leaves a quarter to
/// the others. A sled
/// store can hold what the tenants hold now plus a quarter of the free
/// space above its reserve: its files took 2.9 to 4 times the bytes of
/// the records written (keyed responses of 400 KB on a 24 and a 128 MiB
/// disk, decision 0054).
fn default_share(
    choice: &StoreChoice,
    cfg: &ServeConfig,
    held: u64,
    room: Option<StoreRoom>,
) -> u64 {
    let capacity = match (choice, room) {
        (StoreChoice::Memory, _) => cfg.memory_store_bytes,
        (_, Some(r)) => held.saturating_add(r.free_bytes.saturating_sub(r.reserve_bytes) / 4),
        (_, None) => return u64::MAX,
    };
    crate::config::tenant_default(capacity, cfg.tenants().len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn room(free: u64, reserve: u64) -> Option<StoreRoom> {
        Some(StoreRoom {
            free_bytes: free,
            reserve_bytes: reserve,
            refused_writes: 0,
            share_refused_writes: 0,
        })
    }

    #[test]
    fn the_default_share_is_three_quarters_of_what_the_store_can_hold() {
        let token = |t: &str, tenant: &str| {
            let sha = crate::config::token_sha256(t);
            format!("[[tokens]]\nsha256 = \"{sha}\"\nprincipal = \"{t}\"\ntenant = \"{tenant}\"\n")
        };
        let two = format!(
            "memoryStoreBytes = 4194304\n{}{}",
            token("a", "acme"),
            token("b", "globex")
        );
        let cfg = ServeConfig::from_toml(&two).expect("two tenants");
        let memory = StoreChoice::Memory;
        assert_eq!(default_share(&memory, &cfg, 0, room(4 << 20, 0)), 3 << 20);
        let sled = StoreChoice::Spec("/var/lib/wop".into());
        // What the tenants hold, plus a quarter of the free space above
        // the reserve.
        assert_eq!(
            default_share(&sled, &cfg, 0, room(80 << 20, 16 << 20)),
            12 << 20
        );
        assert_eq!(
            default_share(&sled, &cfg, 8 << 20, room(80 << 20, 16 << 20)),
            18 << 20
        );
        // Below the reserve: what they hold (the reserve refuses anyway).
        assert_eq!(
            default_share(&sled, &cfg, 4 << 20, room(1 << 20, 16 << 20)),
            3 << 20
        );
        // A store that does not know its room is not shared out.
        assert_eq!(default_share(&sled, &cfg, 0, None), u64::MAX);
    }
}
