//! The effect store's figures on `/metrics`, read at scrape time: its
//! room (free space, reserve, refusals; decision 0053) and what each
//! tenant holds of its share (`maxStoreBytesPerTenant`, decisions 0054,
//! 0055), so an operator can alert before a tenant is refused.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use wop_runtime::store::StoreRoom;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreLabel {
    backend: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TenantLabel {
    tenant: String,
}

/// What the store says at scrape time.
pub(crate) struct StoreScrape {
    /// Its backend (`sled`, `memory`, `postgres`).
    pub backend: &'static str,
    /// Its room, if it knows it.
    pub room: Option<StoreRoom>,
    /// With a share: each tenant's share, and the bytes each tenant
    /// (its escaped id) holds.
    pub share: Option<(u64, Vec<(String, u64)>)>,
    /// It has failed and serves nothing until the process is restarted
    /// (a sled store after an I/O error; decision 0056).
    pub failed: bool,
}

/// The store's gauges.
pub(crate) struct StoreMetrics {
    free: Family<StoreLabel, Gauge>,
    reserve: Family<StoreLabel, Gauge>,
    refused: Family<StoreLabel, Gauge>,
    share_refused: Family<StoreLabel, Gauge>,
    tenant_bytes: Family<TenantLabel, Gauge>,
    share_bytes: Gauge,
    failed: Family<StoreLabel, Gauge>,
}

fn gauge_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl StoreMetrics {
    /// Registers the store's gauges in `registry`.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let mut family = |name: &str, help: &str| {
            let f = Family::<StoreLabel, Gauge>::default();
            registry.register(name, help, f.clone());
            f
        };
        let free = family(
            "store_free_bytes",
            "Bytes the effect store can still grow by (a sled store: free space on its disk; a bounded in-memory store: what is left of memoryStoreBytes)",
        );
        let reserve = family(
            "store_reserve_bytes",
            "Of the free bytes, what is kept back: below it new claims, ledgers and usage records are refused with effect_store_full (diskReserveBytes)",
        );
        let refused = family(
            "store_refused_writes",
            "Effect store writes refused for want of room since start",
        );
        let share_refused = family(
            "store_share_refused_writes",
            "New effect claims and invocations refused since start because their tenant held its share of the store (maxStoreBytesPerTenant)",
        );
        let failed = family(
            "store_failed",
            "1 once the effect store has failed and serves no operation until the process is restarted (a sled store after an I/O error: the cause is in the log); /healthz answers 503 meanwhile",
        );
        let tenant_bytes = Family::<TenantLabel, Gauge>::default();
        registry.register(
            "store_tenant_bytes",
            "Bytes of records each tenant holds in the store (effect records, usage records, run roll-ups, ledgers), counted against its share (maxStoreBytesPerTenant); tenants no longer configured are summed as other",
            tenant_bytes.clone(),
        );
        let share_bytes = Gauge::default();
        registry.register(
            "store_tenant_share_bytes",
            "Each tenant's share of the store (maxStoreBytesPerTenant, or its default); absent without a share",
            share_bytes.clone(),
        );
        StoreMetrics {
            failed,
            free,
            reserve,
            refused,
            share_refused,
            tenant_bytes,
            share_bytes,
        }
    }

    /// Sets the gauges from `s`, each tenant under the label `label`
    /// gives it (tenants sharing a label, e.g. `other` for those no
    /// longer configured, are summed); each `configured` tenant has a
    /// series from the start, so the series do not change with traffic.
    pub(crate) fn set<'a>(
        &self,
        s: &StoreScrape,
        configured: impl IntoIterator<Item = &'a String>,
        label: impl Fn(&str) -> String,
    ) {
        let backend = StoreLabel {
            backend: s.backend.to_owned(),
        };
        self.failed.get_or_create(&backend).set(i64::from(s.failed));
        if let Some(room) = s.room {
            for (f, v) in [
                (&self.free, room.free_bytes),
                (&self.reserve, room.reserve_bytes),
                (&self.refused, room.refused_writes),
                (&self.share_refused, room.share_refused_writes),
            ] {
                f.get_or_create(&backend).set(gauge_of(v));
            }
        }
        let Some((share, held)) = &s.share else {
            return;
        };
        self.share_bytes.set(gauge_of(*share));
        let mut by_label: BTreeMap<String, u64> =
            configured.into_iter().map(|t| (t.clone(), 0)).collect();
        for (tenant, bytes) in held {
            let sum = by_label.entry(label(tenant)).or_default();
            *sum = sum.saturating_add(*bytes);
        }
        for (tenant, bytes) in by_label {
            let label = TenantLabel { tenant };
            self.tenant_bytes.get_or_create(&label).set(gauge_of(bytes));
        }
    }
}
