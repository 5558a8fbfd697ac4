//! Each tenant's share of a store (decisions 0054 and 0055).
//!
//! A tenant decides how large its effect records are: a keyed invocation
//! records its whole response, an effectful tool call its result (up to
//! `maxResultBytes`, MiBs); and every invocation it starts records its
//! usage (a record of up to 8 KiB, its run's roll-up and ledger). Without
//! a share, one tenant could fill the store until the disk reserve
//! (decision 0053) refuses every tenant's new claims. [`TenantShare`]
//! wraps a local store (sled, memory) and counts, per tenant, the bytes
//! (keys and values) of
//!
//! - its **claimed** records: effect records (`effect/<id>`, attributed
//!   by the record's `tenantId`) and their listing entries
//!   (`run/<tenant>/…`). A write that would create one of those keys for a
//!   tenant holding its share is refused with [`StoreError::OverShare`] (a
//!   kind of full) and the tenant's own figures; a claim and its listing
//!   entry are checked as one, so a refused claim writes neither;
//! - its **recorded** usage: usage records (`usage/<tenant>/…`), run
//!   roll-ups (`rollup/run/<tenant>/…`) and ledgers (`ledger/<tenant>/…`).
//!   These are never refused here (an invocation that ran records what it
//!   cost); instead the caller asks [`TenantShare::admits`] before it
//!   starts an invocation, which refuses a tenant holding its share.
//!
//! What it leaves alone:
//!
//! - **replacements** (settling a claim, a takeover, a roll-up's update)
//!   always go ahead, so that a claim admitted under the share can record
//!   what it did;
//! - **a write that could not change anything** is answered as before (a
//!   swap that would fail reports the current value; a put of the stored
//!   value succeeds), so a replay of a recorded claim is answered; it is
//!   listed in its run (one listing entry, ~100 bytes) while the entry
//!   fits the share or is there already, and otherwise goes unlisted (a
//!   tenant replaying one record from ever new runs would grow the store
//!   past its share, an entry each);
//! - **removals** (retention, the meter's bound) always go ahead and give
//!   the bytes back;
//! - **other records** (the packs' all-time roll-ups, one per tenant and
//!   pack) are not counted.
//!
//! A tenant passes its share by at most what the invocations and claims
//! it has in flight write. The counts live in this process: they are
//! rebuilt by a scan of the counted keys when the share is opened, and
//! kept exact by reading a key's old value before a put or a remove (not
//! for usage records, whose keys are new each time). Writers racing on
//! one key can leave a count off by a record until the next open. Only
//! for a store one process writes (sled locks its directory; the memory
//! store is the process's): executors sharing PostgreSQL would each count
//! only their own writes.

use super::{CasResult, KvStore, ShareRefusal, StoreError, StoreRoom};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Where effect records live (`effect/<effectId>`).
const EFFECTS: &str = "effect/";
/// Where their listing entries live (`run/<tenant>/<run>/<effectId>`).
const LISTINGS: &str = "run/";
/// Where usage records live (`usage/<tenant>/<run>/<ms>-<pid>-<seq>`):
/// each key is written once.
const USAGE: &str = "usage/";
/// What every invocation records, keyed `<prefix><tenant>/…`: counted,
/// never refused ([`TenantShare::admits`] is asked before).
const RECORDED: [&str; 3] = [USAGE, "rollup/run/", "ledger/"];
/// Keys read per page when counting at open.
const PAGE: usize = 512;

/// The tenant a record of `key` = `value` counts against, as its escaped
/// key segment ([`crate::keys::part`]); `None` for records no share
/// counts.
fn tenant_of(key: &str, value: &[u8]) -> Option<String> {
    let keyed = RECORDED.into_iter().chain([LISTINGS]);
    if let Some(rest) = keyed.filter_map(|p| key.strip_prefix(p)).next() {
        return rest.split_once('/').map(|(t, _)| t.to_owned());
    }
    if key.starts_with(EFFECTS) {
        #[derive(serde::Deserialize)]
        struct Tenant {
            #[serde(rename = "tenantId")]
            tenant_id: String,
        }
        let t: Tenant = serde_json::from_slice(value).ok()?;
        return Some(crate::keys::part(&t.tenant_id));
    }
    None
}

/// Whether a new `key` is a claim the share refuses (else a record of
/// what an admitted invocation did).
fn claimed(key: &str) -> bool {
    key.starts_with(EFFECTS) || key.starts_with(LISTINGS)
}

/// Whether records of `key` are counted (a remove reads them first).
fn is_counted(key: &str) -> bool {
    claimed(key) || RECORDED.iter().any(|p| key.starts_with(p))
}

fn size(key: &str, value: &[u8]) -> u64 {
    u64::try_from(key.len() + value.len()).unwrap_or(u64::MAX)
}

/// A local store whose effect records are shared out between tenants.
pub struct TenantShare {
    inner: Arc<dyn KvStore>,
    share: u64,
    /// Bytes each tenant (escaped) holds, reservations of writes in
    /// flight included.
    held: Mutex<HashMap<String, u64>>,
    refused: AtomicU64,
}

impl TenantShare {
    /// Wraps `inner`, giving each tenant `share` bytes of records, after
    /// counting what each already holds (one scan of the counted keys).
    pub async fn open(inner: Arc<dyn KvStore>, share: u64) -> Result<TenantShare, StoreError> {
        let mut held: HashMap<String, u64> = HashMap::new();
        for prefix in [EFFECTS, LISTINGS].into_iter().chain(RECORDED) {
            let end = crate::keys::prefix_end(prefix);
            let mut start = prefix.to_owned();
            loop {
                let page = inner.scan_range(&start, end.as_deref(), PAGE).await?;
                for (k, v) in &page {
                    if let Some(t) = tenant_of(k, v) {
                        *held.entry(t).or_default() += size(k, v);
                    }
                }
                match page.last() {
                    Some((k, _)) if page.len() == PAGE => start = format!("{k}\0"),
                    _ => break,
                }
            }
        }
        Ok(TenantShare {
            inner,
            share,
            held: Mutex::new(held),
            refused: AtomicU64::new(0),
        })
    }

    /// The same counts with another share (e.g. one computed from what
    /// the tenants hold now, [`total`](Self::total)).
    pub fn with_share(mut self, share: u64) -> Self {
        self.share = share;
        self
    }

    /// Each tenant's share, in bytes.
    pub fn share(&self) -> u64 {
        self.share
    }

    /// Bytes of counted records all tenants hold.
    pub fn total(&self) -> u64 {
        self.counts().values().sum()
    }

    /// Bytes of counted records `tenant` holds.
    pub fn held(&self, tenant: &str) -> u64 {
        let t = crate::keys::part(tenant);
        self.counts().get(&t).copied().unwrap_or(0)
    }

    /// The bytes each tenant holds, by its escaped id
    /// ([`crate::keys::part`]), for operators.
    pub fn tenants(&self) -> Vec<(String, u64)> {
        let counts = self.counts();
        counts.iter().map(|(t, b)| (t.clone(), *b)).collect()
    }

    /// Writes refused because their tenant held its share.
    pub fn refused_writes(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Whether `tenant` may start an invocation, which records its usage:
    /// refused, with its figures, once it holds its share. Its recorded
    /// keyed requests still replay (they record nothing new).
    pub fn admits(&self, tenant: &str) -> Result<(), StoreError> {
        let now = self.held(tenant);
        if now < self.share {
            return Ok(());
        }
        let message = format!(
            "tenant `{tenant}` holds {now} bytes of records in the store (effect records, usage \
             records, ledgers and roll-ups), its share of {} bytes (maxStoreBytesPerTenant), so \
             it can start no invocation that would record more; its recorded keyed requests \
             still replay. Records past the retention are deleted every retentionPurgeMinutes, \
             or ask the operator for a larger share",
            self.share
        );
        Err(self.refuse(self.over_share(message, tenant, now, None)))
    }

    /// The refusal of `tenant`, which holds `held` bytes (and wanted
    /// `needed` more), with its figures.
    fn over_share(
        &self,
        message: String,
        tenant: &str,
        held: u64,
        needed: Option<u64>,
    ) -> StoreError {
        StoreError::OverShare(Box::new(ShareRefusal {
            message,
            tenant: tenant.to_owned(),
            held_bytes: held,
            needed_bytes: needed,
            share_bytes: self.share,
        }))
    }

    fn counts(&self) -> MutexGuard<'_, HashMap<String, u64>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes `bytes` of `tenant`'s share for a new key, or says why not.
    /// When the store itself has no room for new keys, its own refusal
    /// is the one to report: the write goes on to meet it.
    fn reserve(&self, tenant: &str, bytes: u64) -> Result<(), StoreError> {
        let mut c = self.counts();
        let held = c.entry(tenant.to_owned()).or_default();
        if held.saturating_add(bytes) > self.share && !self.inner.room().is_some_and(|r| r.is_low())
        {
            let now = *held;
            let message = format!(
                "tenant `{tenant}` holds {now} bytes of records in the store and this one needs {bytes} \
                 more, past its share of {} bytes (maxStoreBytesPerTenant); records past the \
                 retention are deleted every retentionPurgeMinutes, or ask the operator for a \
                 larger share",
                self.share
            );
            return Err(self.over_share(message, tenant, now, Some(bytes)));
        }
        *held += bytes;
        Ok(())
    }

    /// Gives back `bytes` (a reservation not used, a record removed).
    fn release(&self, tenant: &str, bytes: u64) {
        if let Some(h) = self.counts().get_mut(tenant) {
            *h = h.saturating_sub(bytes);
        }
    }

    /// Counts a replacement's change of size.
    fn resize(&self, tenant: &str, old: u64, new: u64) {
        if new >= old {
            *self.counts().entry(tenant.to_owned()).or_default() += new - old;
        } else {
            self.release(tenant, old - new);
        }
    }

    /// A put of a counted key: a new key takes `tenant`'s share (refused
    /// past it when `checked`), a replacement counts its change of size,
    /// and writing the stored value again changes nothing.
    async fn put_counted(
        &self,
        tenant: &str,
        key: &str,
        value: Vec<u8>,
        checked: bool,
    ) -> Result<(), StoreError> {
        let next = size(key, &value);
        match self.inner.get(key).await? {
            Some(old) if old == value => Ok(()),
            Some(old) => {
                self.inner.put(key, value).await?;
                self.resize(tenant, size(key, &old), next);
                Ok(())
            }
            None => {
                if checked {
                    self.reserve(tenant, next).map_err(|e| self.refuse(e))?;
                } else {
                    self.resize(tenant, 0, next);
                }
                let r = self.inner.put(key, value).await;
                if r.is_err() {
                    self.release(tenant, next);
                }
                r
            }
        }
    }

    fn refuse(&self, e: StoreError) -> StoreError {
        self.refused.fetch_add(1, Ordering::Relaxed);
        e
    }
}

#[async_trait::async_trait]
impl KvStore for TenantShare {
    async fn compare_and_swap(
        &self,
        key: &str,
        expected: Option<&[u8]>,
        new: Option<Vec<u8>>,
    ) -> Result<CasResult, StoreError> {
        // The expected value first: a settle's is the small pending record.
        let counted = expected.or(new.as_deref()).and_then(|v| tenant_of(key, v));
        let Some(tenant) = counted else {
            return self.inner.compare_and_swap(key, expected, new).await;
        };
        let old = expected.map_or(0, |v| size(key, v));
        let next = new.as_deref().map_or(0, |v| size(key, v));
        if expected.is_none() && new.is_some() && claimed(key) {
            if let Err(refused) = self.reserve(&tenant, next) {
                // A swap that would fail writes nothing: answer it.
                let current = self.inner.get(key).await?;
                if current.is_some() {
                    return Ok(Err(current));
                }
                return Err(self.refuse(refused));
            }
            let r = self.inner.compare_and_swap(key, expected, new).await;
            if !matches!(r, Ok(Ok(()))) {
                self.release(&tenant, next);
            }
            return r;
        }
        let r = self.inner.compare_and_swap(key, expected, new).await?;
        if r.is_ok() {
            self.resize(&tenant, old, next);
        }
        Ok(r)
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.get(key).await
    }

    async fn put(&self, key: &str, value: Vec<u8>) -> Result<(), StoreError> {
        match tenant_of(key, &value) {
            // Written once each: no old value to read.
            Some(tenant) if key.starts_with(USAGE) => {
                let bytes = size(key, &value);
                self.inner.put(key, value).await?;
                self.resize(&tenant, 0, bytes);
                Ok(())
            }
            Some(tenant) => self.put_counted(&tenant, key, value, claimed(key)).await,
            None => self.inner.put(key, value).await,
        }
    }

    async fn remove(&self, key: &str) -> Result<(), StoreError> {
        if !is_counted(key) {
            return self.inner.remove(key).await;
        }
        self.remove_returning(key).await.map(drop)
    }

    async fn remove_returning(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let old = self.inner.remove_returning(key).await?;
        if let Some(old) = &old
            && is_counted(key)
            && let Some(t) = tenant_of(key, old)
        {
            self.release(&t, size(key, old));
        }
        Ok(old)
    }

    async fn scan_prefix(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.inner.scan_prefix(prefix, limit).await
    }

    async fn scan_range(
        &self,
        start: &str,
        end: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.inner.scan_range(start, end, limit).await
    }

    async fn scan_range_keys(
        &self,
        start: &str,
        end: Option<&str>,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        self.inner.scan_range_keys(start, end, limit).await
    }

    async fn remove_unchanged(
        &self,
        pairs: Vec<(String, Vec<u8>)>,
    ) -> Result<Vec<String>, StoreError> {
        let sizes: HashMap<String, (Option<String>, u64)> = pairs
            .iter()
            .map(|(k, v)| (k.clone(), (tenant_of(k, v), size(k, v))))
            .collect();
        let gone = self.inner.remove_unchanged(pairs).await?;
        for k in &gone {
            if let Some((Some(t), bytes)) = sizes.get(k) {
                self.release(t, *bytes);
            }
        }
        Ok(gone)
    }

    /// An effect claim's first write (its listing entry, then the claim),
    /// checked against the share as one: a claim past it writes nothing,
    /// not even its listing entry, unless it is a replay, which is
    /// answered, and listed in its run while the entry (~100 bytes) fits
    /// the share.
    async fn put_then_insert(
        &self,
        marker: &str,
        marker_value: Vec<u8>,
        key: &str,
        value: Vec<u8>,
    ) -> Result<CasResult, StoreError> {
        let Some(tenant) = tenant_of(marker, &marker_value) else {
            self.put(marker, marker_value).await?;
            return self.compare_and_swap(key, None, Some(value)).await;
        };
        let claim = size(key, &value);
        let listed = size(marker, &marker_value);
        if let Err(refused) = self.reserve(&tenant, claim.saturating_add(listed)) {
            return match self.inner.get(key).await? {
                Some(current) => {
                    // A replay is answered, and listed in this run if the
                    // entry fits the share (or is there already). Past
                    // it, a replay from a new run goes unlisted: listed,
                    // each new run would grow the store by an entry.
                    if self.reserve(&tenant, listed).is_ok() {
                        let put = self.put_counted(&tenant, marker, marker_value, false);
                        let put = put.await;
                        self.release(&tenant, listed);
                        put?;
                    }
                    Ok(Err(Some(current)))
                }
                None => Err(self.refuse(refused)),
            };
        }
        // The listing entry's bytes, taken with the claim's, are given
        // back once its put has counted it (or found it written).
        let put = self.put_counted(&tenant, marker, marker_value, false).await;
        self.release(&tenant, listed);
        if let Err(e) = put {
            self.release(&tenant, claim);
            return Err(e);
        }
        let r = self.inner.compare_and_swap(key, None, Some(value)).await;
        if !matches!(r, Ok(Ok(()))) {
            self.release(&tenant, claim);
        }
        r
    }

    fn failed_swap_reads_free(&self) -> bool {
        self.inner.failed_swap_reads_free()
    }

    /// The inner store's room, with the writes this share refused.
    fn room(&self) -> Option<StoreRoom> {
        let mut room = self.inner.room()?;
        room.share_refused_writes += self.refused_writes();
        Some(room)
    }

    fn failure(&self) -> Option<String> {
        self.inner.failure()
    }

    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
}

#[cfg(test)]
mod tests;
