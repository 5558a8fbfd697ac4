//! A run's effect listing, read a page at a time.
//!
//! A tenant chooses its run ids and can record thousands of effects under
//! one run (64 per invocation, any number of invocations), each record
//! holding a result of up to `maxResultBytes`. So a listing is never read
//! whole: a page is at most [`MAX_PAGE`] entries of the run's index, and
//! each entry's record is read once and decoded without its payloads.
//! A store returns a record whole, payloads included, so a page also ends
//! once it has read [`PAGE_READ_BYTES`] of records: what one request costs
//! the host does not grow with the results a tenant chose to store.

use super::record::{EffectState, EffectSummary, Keying};
use super::{EffectError, Effects, key};
use serde::Deserialize;

/// Most effects in one page of a run's listing.
pub const MAX_PAGE: usize = 1000;

/// Bytes of records a page reads before it ends (with a `next`), whatever
/// its limit: at most this plus one record per request (a page always
/// holds at least one entry, so a listing always moves on).
pub const PAGE_READ_BYTES: usize = 8 << 20;

/// One page of a run's effects, by effect id.
#[derive(Debug, Clone, PartialEq)]
pub struct RunEffects {
    /// The effects of this page.
    pub effects: Vec<EffectSummary>,
    /// The effect id to continue after (`after`), when the run may list
    /// more; `None` at the end of the listing.
    pub next: Option<String>,
}

/// What a listing reads of a record: everything but its payloads, which
/// the decoder skips without building them.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Listed {
    effect_id: String,
    tenant_id: String,
    node_id: String,
    attempt: u32,
    tool_id: String,
    keying: Keying,
    state: EffectState,
    updated_at_ms: u64,
}

impl Effects {
    /// Up to `limit` (at most [`MAX_PAGE`], at least 1) of the effects of
    /// `tenant`'s run `run_id`, by effect id, starting after the effect id
    /// `after` (a page's [`RunEffects::next`]). Never another tenant's run
    /// of the same id, whatever `after` holds: the scan stays within the
    /// run's index range, and a record of another tenant is skipped. The
    /// page ends early, with a `next`, once it has read
    /// [`PAGE_READ_BYTES`] of records.
    pub async fn list_run_page(
        &self,
        tenant: &str,
        run_id: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<RunEffects, EffectError> {
        let limit = limit.clamp(1, MAX_PAGE);
        let prefix = crate::keys::run_index_prefix(tenant, run_id);
        let end = crate::keys::prefix_end(&prefix);
        let start = match after {
            Some(a) => format!("{prefix}{a}\0"),
            None => prefix.clone(),
        };
        let entries = self.kv.scan_range(&start, end.as_deref(), limit).await?;
        let ids: Vec<&str> = entries
            .iter()
            .filter_map(|(k, _)| k.strip_prefix(&prefix))
            .collect();
        let mut next = match entries.len() == limit {
            true => ids.last().map(|id| (*id).to_owned()),
            false => None,
        };
        let mut effects = Vec::with_capacity(ids.len());
        let (mut read, mut last) = (0usize, None);
        for id in ids {
            if read >= PAGE_READ_BYTES {
                // Continue after the last entry read (listed or skipped).
                next = last.map(str::to_owned);
                break;
            }
            last = Some(id);
            let k = key(id);
            let Some(bytes) = self.kv.get(&k).await? else {
                continue; // purged since the index was read
            };
            read = read.saturating_add(bytes.len());
            let r: Listed = serde_json::from_slice(&bytes).map_err(|e| EffectError::Corrupt {
                key: k,
                message: e.to_string(),
            })?;
            if r.tenant_id != tenant {
                continue;
            }
            effects.push(EffectSummary {
                effect_id: r.effect_id,
                node_id: r.node_id,
                attempt: r.attempt,
                tool_id: r.tool_id,
                keying: r.keying,
                state: r.state,
                at: r.updated_at_ms,
            });
        }
        Ok(RunEffects { effects, next })
    }

    /// Every effect of `tenant`'s run `run_id`, by effect id (never another
    /// tenant's run of the same id), read a page at a time. For a local
    /// store (`wop effects`); a service lists a page per request
    /// ([`list_run_page`](Self::list_run_page)).
    pub async fn list_run(
        &self,
        tenant: &str,
        run_id: &str,
    ) -> Result<Vec<EffectSummary>, EffectError> {
        let mut out = Vec::new();
        let mut after = None;
        loop {
            let page = self
                .list_run_page(tenant, run_id, after.as_deref(), MAX_PAGE)
                .await?;
            out.extend(page.effects);
            match page.next {
                Some(n) => after = Some(n),
                None => return Ok(out),
            }
        }
    }
}
