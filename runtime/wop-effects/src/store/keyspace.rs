//! The store's key layout version, and the upgrade from the layout before
//! tenants were part of every per-run key (version 1, wop ≤ 0.1 of
//! 2026-12-01) to the current one ([`crate::keys`], version 2).
//!
//! Version 1 keyed per-run records by run id alone: `ledger/<run>`,
//! `rollup/run/<run>`, `usage/<run>/<…>`, `run/<run>/<effectId>`. The
//! upgrade moves each record under its tenant:
//!
//! - usage records and effect listing entries carry their tenant (the usage
//!   record's `tenantId`, the effect record's `tenantId`): moved as they are;
//! - ledgers and run roll-ups do not: they are moved under the tenant the
//!   run's usage records or effects name, when exactly one tenant used that
//!   run id; otherwise (no trace of the run, or several tenants shared the
//!   id — the defect this layout fixes) they are deleted and counted in
//!   [`Upgrade::dropped`]. A deleted ledger means that run's budget and
//!   run clock start afresh; effect records (the dedupe that matters) are
//!   never touched: their keys already bind the tenant.
//!
//! Each step is idempotent (write the new key, then delete the old one) and
//! recognises records already in the new layout, so executors sharing a
//! PostgreSQL store may run it at the same time, and a crash half-way is
//! finished by the next start. [`crate::store::open`] runs it; an embedder
//! that builds a store itself calls [`upgrade`] once before use.

use crate::keys;
use crate::store::{KvStore, StoreError};
use std::collections::{BTreeMap, BTreeSet};

/// The layout this code writes.
pub const VERSION: u64 = 2;

/// Where the layout version is recorded.
pub const MARKER: &str = "meta/keyspace";

/// What an upgrade moved.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Upgrade {
    /// Effect listing entries moved under their tenant.
    pub effect_index: usize,
    /// Usage records moved.
    pub usage_records: usize,
    /// Ledgers moved.
    pub ledgers: usize,
    /// Run roll-ups moved.
    pub run_rollups: usize,
    /// Ledgers and roll-ups deleted: their run's tenant was unknown or
    /// ambiguous.
    pub dropped: usize,
}

/// The version recorded in `kv` (`None`: no marker).
pub async fn version(kv: &dyn KvStore) -> Result<Option<u64>, StoreError> {
    Ok(kv
        .get(MARKER)
        .await?
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v.get("version").and_then(serde_json::Value::as_u64)))
}

/// Brings `kv` to [`VERSION`]. Returns `None` if it already was there,
/// else what was moved. Refuses a store written by a newer layout.
pub async fn upgrade(kv: &dyn KvStore) -> Result<Option<Upgrade>, StoreError> {
    match version(kv).await? {
        Some(v) if v == VERSION => return Ok(None),
        Some(v) if v > VERSION => {
            return Err(StoreError::Unavailable(format!(
                "this store's key layout is version {v}, newer than this wop understands ({VERSION}); use a newer wop"
            )));
        }
        _ => {}
    }
    let mut up = Upgrade::default();
    let mut tenants: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();

    // Effect listing entries: `run/<run>/<effectId>` → under the effect
    // record's tenant and run.
    for (k, _) in scan_all(kv, "run/").await? {
        let Some((_, effect_id)) = k.rsplit_once('/') else {
            continue;
        };
        let Some(bytes) = kv.get(&format!("effect/{effect_id}")).await? else {
            continue;
        };
        let Some((tenant, run)) = tenant_and_run(&bytes) else {
            continue;
        };
        tenants
            .entry(run.clone())
            .or_default()
            .insert(tenant.clone());
        let new = format!("{}{effect_id}", keys::run_index_prefix(&tenant, &run));
        if new != k {
            kv.put(&new, Vec::new()).await?;
            kv.remove(&k).await?;
            up.effect_index += 1;
        }
    }

    // Usage records: `usage/<run>/<at>` (two slashes) → under their tenant.
    for (k, v) in scan_all(kv, "usage/").await? {
        if k.matches('/').count() != 2 {
            continue; // already `usage/<tenant>/<run>/<at>`
        }
        // The stored form leaves out empty fields.
        let tenant = json_str(&v, "tenantId").unwrap_or_default();
        let run = json_str(&v, "runId").unwrap_or_default();
        let Some((_, at)) = k.rsplit_once('/') else {
            continue;
        };
        tenants
            .entry(run.clone())
            .or_default()
            .insert(tenant.clone());
        kv.put(
            &format!("{}{at}", keys::usage_prefix(&tenant, Some(&run))),
            v,
        )
        .await?;
        kv.remove(&k).await?;
        up.usage_records += 1;
    }

    // The run's one tenant, if it had exactly one.
    let only = |run: &str| -> Option<String> {
        let set = tenants.get(run)?;
        (set.len() == 1)
            .then(|| set.iter().next().cloned())
            .flatten()
    };

    // Ledgers: old keys are `ledger/<runId>` verbatim.
    for (k, v) in scan_all(kv, "ledger/").await? {
        let Some(run) = json_str(&v, "runId") else {
            continue;
        };
        if k != format!("ledger/{run}") {
            continue; // already `ledger/<tenant>/<run>`
        }
        match only(&run) {
            Some(t) => {
                kv.put(&keys::ledger(&t, &run), v).await?;
                up.ledgers += 1;
            }
            None => up.dropped += 1,
        }
        kv.remove(&k).await?;
    }

    // Run roll-ups: `rollup/run/<run>` (two slashes).
    for (k, v) in scan_all(kv, "rollup/run/").await? {
        if k.matches('/').count() != 2 {
            continue;
        }
        let Some(run) = json_str(&v, "runId") else {
            continue;
        };
        match only(&run) {
            Some(t) => {
                let v = with_tenant(&v, &t).unwrap_or(v);
                kv.put(&keys::run_rollup(&t, &run), v).await?;
                up.run_rollups += 1;
            }
            None => up.dropped += 1,
        }
        kv.remove(&k).await?;
    }

    let marker = serde_json::to_vec(&serde_json::json!({"version": VERSION})).unwrap_or_default();
    // Another executor may have finished first: either way the layout is current.
    let _ = kv.compare_and_swap(MARKER, None, Some(marker)).await?;
    if up != Upgrade::default() {
        tracing::info!(
            effect_index = up.effect_index,
            usage_records = up.usage_records,
            ledgers = up.ledgers,
            run_rollups = up.run_rollups,
            dropped = up.dropped,
            "effect store upgraded to the per-tenant key layout"
        );
    }
    Ok(Some(up))
}

/// Every pair under `prefix`, read in pages of 512.
async fn scan_all(kv: &dyn KvStore, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
    const PAGE: usize = 512;
    let mut out = Vec::new();
    let mut start = prefix.to_owned();
    loop {
        let page = kv.scan_range(&start, None, PAGE).await?;
        let full = page.len() == PAGE;
        let mut done = !full;
        for (k, v) in page {
            if !k.starts_with(prefix) {
                done = true;
                break;
            }
            start = format!("{k}\0");
            out.push((k, v));
        }
        if done {
            return Ok(out);
        }
    }
}

fn json_str(bytes: &[u8], field: &str) -> Option<String> {
    serde_json::from_slice::<serde_json::Value>(bytes)
        .ok()?
        .get(field)?
        .as_str()
        .map(str::to_owned)
}

fn tenant_and_run(bytes: &[u8]) -> Option<(String, String)> {
    Some((json_str(bytes, "tenantId")?, json_str(bytes, "runId")?))
}

fn with_tenant(bytes: &[u8], tenant: &str) -> Option<Vec<u8>> {
    let mut v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    v.as_object_mut()?
        .insert("tenantId".into(), serde_json::json!(tenant));
    serde_json::to_vec(&v).ok()
}

#[cfg(test)]
mod tests;
