//! Effects: identity, the durable claim, and its state machine.
//!
//! Every call that can change the world is guarded by an atomic claim in a
//! [`KvStore`]: insert-if-absent, durable before the effect fires. The
//! record lives under `effect/<effectId>` (the id binds the tenant); an
//! index entry `run/<tenant>/<runId>/<effectId>` lists a tenant's run's
//! effects ([`crate::keys`]).
//!
//! States: `claimed` (someone is performing it, under a lease) →
//! `completed` (outcome recorded; later callers get it replayed) or
//! `released` (nothing was sent; a retry may claim again) or `escaped` (the
//! outcome is unknown: the owner died or the provider never answered, and
//! the tool is not idempotent — never re-fired automatically; an operator
//! resolves it).

use crate::store::{KvStore, StoreError};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

mod identity;
mod listing;
mod record;

pub use identity::{activity_id, business_id, request_digest};
pub use listing::{MAX_PAGE, PAGE_READ_BYTES, RunEffects};
pub use record::{EffectRecord, EffectState, EffectSummary, Keying, Owner};

/// Milliseconds since the Unix epoch.
pub use wop_core::time::now_ms;

/// What the caller must do after [`Effects::begin`].
#[derive(Debug, Clone, PartialEq)]
pub enum Begin {
    /// We hold the claim: perform the call, then `complete`/`release`.
    /// `resend` is true when re-sending an orphaned idempotent effect.
    Perform {
        /// The record as claimed (pass back to complete/release).
        claimed: Box<EffectRecord>,
        /// Re-send of an orphaned claim (idempotent tools only).
        resend: bool,
    },
    /// Already completed with the same request: the recorded outcome.
    Replay(Box<EffectRecord>),
    /// Same identity, different request.
    Mismatch {
        /// The stored digest.
        stored: String,
    },
    /// Claimed by a live owner; did not finish within the wait.
    InFlight {
        /// When the owner's lease runs out (ms since epoch).
        lease_expires_at_ms: u64,
    },
    /// The outcome is unknown (owner died or provider never answered) and
    /// the tool is not idempotent: refuse; an operator must resolve it.
    UnknownOutcome(Box<EffectRecord>),
}

/// What a new claim is about.
#[derive(Debug, Clone)]
pub struct ClaimRequest {
    /// The identity.
    pub effect_id: String,
    /// How it was derived.
    pub keying: Keying,
    /// Tenant.
    pub tenant_id: String,
    /// Run.
    pub run_id: String,
    /// Node.
    pub node_id: String,
    /// Attempt.
    pub attempt: u32,
    /// Tool.
    pub tool_id: String,
    /// Request digest.
    pub digest: String,
    /// Whether an orphaned claim may be re-sent (replay policy idempotent).
    pub idempotent: bool,
}

/// Errors of the effect store.
#[derive(Debug, thiserror::Error)]
pub enum EffectError {
    /// The backend failed.
    #[error("effect store: {0}")]
    Store(#[from] StoreError),
    /// A record could not be decoded.
    #[error("effect store holds a corrupt record for {key}: {message}")]
    Corrupt {
        /// The key.
        key: String,
        /// Why.
        message: String,
    },
    /// Contention did not settle.
    #[error("effect {0} is changing too fast; retry")]
    Contended(String),
    /// An operator action was not applicable.
    #[error("{0}")]
    Invalid(String),
}

impl EffectError {
    /// Whether the store refused a write for want of room
    /// ([`StoreError::Full`]).
    pub fn is_store_full(&self) -> bool {
        matches!(self, EffectError::Store(e) if e.is_full())
    }

    /// The figures of a refusal for the tenant's share of the store, if
    /// it is one.
    pub fn share_refusal(&self) -> Option<&crate::store::ShareRefusal> {
        match self {
            EffectError::Store(e) => e.share_refusal(),
            _ => None,
        }
    }
}

/// Timing knobs of the claim protocol.
#[derive(Debug, Clone, Copy)]
pub struct EffectTimings {
    /// How long a claim's lease lasts.
    pub lease: Duration,
    /// How long to wait for a live in-flight claim before `idempotency_in_flight`.
    pub in_flight_wait: Duration,
    /// Poll interval while waiting.
    pub poll: Duration,
}

/// The effect store: claims and their lifecycle on a [`KvStore`].
#[derive(Clone)]
pub struct Effects {
    kv: Arc<dyn KvStore>,
    executor: String,
}

const MAX_CAS_ROUNDS: usize = 64;

fn key(effect_id: &str) -> String {
    format!("effect/{effect_id}")
}

fn index_key(tenant: &str, run_id: &str, effect_id: &str) -> String {
    format!(
        "{}{effect_id}",
        crate::keys::run_index_prefix(tenant, run_id)
    )
}

impl Effects {
    /// Effects on `kv`, claimed as executor `executor`.
    pub fn new(kv: Arc<dyn KvStore>, executor: impl Into<String>) -> Self {
        Self {
            kv,
            executor: executor.into(),
        }
    }

    /// This executor's id.
    pub fn executor(&self) -> &str {
        &self.executor
    }

    /// The backing store.
    pub fn kv(&self) -> &Arc<dyn KvStore> {
        &self.kv
    }

    fn decode(k: &str, bytes: &[u8]) -> Result<EffectRecord, EffectError> {
        serde_json::from_slice(bytes).map_err(|e| EffectError::Corrupt {
            key: k.to_owned(),
            message: e.to_string(),
        })
    }

    fn encode(r: &EffectRecord) -> Vec<u8> {
        serde_json::to_vec(r).unwrap_or_default()
    }

    /// Reads one record.
    pub async fn get(&self, effect_id: &str) -> Result<Option<EffectRecord>, EffectError> {
        let k = key(effect_id);
        match self.kv.get(&k).await? {
            Some(b) => Ok(Some(Self::decode(&k, &b)?)),
            None => Ok(None),
        }
    }

    /// Claims the effect or tells the caller what happened to it before.
    /// `deadline` bounds the wait for an in-flight claim.
    pub async fn begin(
        &self,
        req: &ClaimRequest,
        t: EffectTimings,
        deadline: std::time::Instant,
    ) -> Result<Begin, EffectError> {
        let k = key(&req.effect_id);
        let lease_ms = u64::try_from(t.lease.as_millis()).unwrap_or(u64::MAX);
        let fresh = |now: u64| EffectRecord {
            effect_id: req.effect_id.clone(),
            tenant_id: req.tenant_id.clone(),
            run_id: req.run_id.clone(),
            node_id: req.node_id.clone(),
            attempt: req.attempt,
            tool_id: req.tool_id.clone(),
            keying: req.keying,
            state: EffectState::Claimed,
            owner: Some(Owner {
                executor: self.executor.clone(),
                lease_expires_at_ms: now.saturating_add(lease_ms),
            }),
            request_digest: req.digest.clone(),
            result: None,
            error: None,
            sends: 1,
            created_at_ms: now,
            updated_at_ms: now,
        };
        // The common case first, without reading: the run's index entry and
        // the claim in one store call (one statement on PostgreSQL). The
        // index entry is written whether or not the claim is ours, and
        // before it.
        let first = fresh(now_ms());
        let mut known = match self
            .kv
            .put_then_insert(
                &index_key(&req.tenant_id, &req.run_id, &req.effect_id),
                Vec::new(),
                &k,
                Self::encode(&first),
            )
            .await?
        {
            Ok(()) => {
                return Ok(Begin::Perform {
                    claimed: Box::new(first),
                    resend: false,
                });
            }
            Err(current) => Some(current),
        };
        let wait_until = std::time::Instant::now() + t.in_flight_wait;
        let wait_until = wait_until.min(deadline);
        // Only lost compare-and-swaps count against MAX_CAS_ROUNDS: waiting
        // for a live owner is bounded by `wait_until` alone (it used to
        // share the count and give up after 64 polls, before the wait).
        let mut lost = 0;
        loop {
            if lost >= MAX_CAS_ROUNDS {
                return Err(EffectError::Contended(req.effect_id.clone()));
            }
            let now = now_ms();
            let owner = Some(Owner {
                executor: self.executor.clone(),
                lease_expires_at_ms: now.saturating_add(lease_ms),
            });
            // The value the first write lost to, then a fresh read.
            let current = match known.take() {
                Some(v) => v,
                None => self.kv.get(&k).await?,
            };
            let Some(bytes) = current else {
                let rec = fresh(now);
                match self
                    .kv
                    .compare_and_swap(&k, None, Some(Self::encode(&rec)))
                    .await?
                {
                    Ok(()) => {
                        return Ok(Begin::Perform {
                            claimed: Box::new(rec),
                            resend: false,
                        });
                    }
                    Err(current) => {
                        lost += 1;
                        known = Some(current);
                        continue;
                    }
                }
            };
            let rec = Self::decode(&k, &bytes)?;
            if rec.request_digest != req.digest {
                return Ok(Begin::Mismatch {
                    stored: rec.request_digest,
                });
            }
            let take = |mut r: EffectRecord, resend: bool| {
                r.state = EffectState::Claimed;
                r.owner = owner.clone();
                r.attempt = req.attempt;
                r.sends += 1;
                r.error = None;
                r.updated_at_ms = now;
                (r, resend)
            };
            let next = match rec.state {
                EffectState::Completed => return Ok(Begin::Replay(Box::new(rec))),
                EffectState::Escaped => return Ok(Begin::UnknownOutcome(Box::new(rec))),
                EffectState::Released => take(rec.clone(), false),
                EffectState::Claimed => {
                    let lease = rec.owner.as_ref().map_or(0, |o| o.lease_expires_at_ms);
                    if now < lease {
                        if std::time::Instant::now() >= wait_until {
                            return Ok(Begin::InFlight {
                                lease_expires_at_ms: lease,
                            });
                        }
                        tokio::time::sleep(t.poll).await;
                        continue;
                    }
                    if req.idempotent {
                        take(rec.clone(), true)
                    } else {
                        let mut r = rec.clone();
                        r.state = EffectState::Escaped;
                        r.owner = None;
                        r.error = Some(serde_json::json!({
                            "reason": "owner-lost",
                            "message": "the executor holding this claim stopped before recording an outcome",
                        }));
                        r.updated_at_ms = now;
                        match self
                            .kv
                            .compare_and_swap(&k, Some(&bytes), Some(Self::encode(&r)))
                            .await?
                        {
                            Ok(()) => return Ok(Begin::UnknownOutcome(Box::new(r))),
                            Err(current) => {
                                lost += 1;
                                known = Some(current);
                                continue;
                            }
                        }
                    }
                }
            };
            let (r, resend) = next;
            match self
                .kv
                .compare_and_swap(&k, Some(&bytes), Some(Self::encode(&r)))
                .await?
            {
                Ok(()) => {
                    return Ok(Begin::Perform {
                        claimed: Box::new(r),
                        resend,
                    });
                }
                Err(current) => {
                    lost += 1;
                    known = Some(current);
                }
            }
        }
    }

    async fn transition(
        &self,
        claimed: &EffectRecord,
        f: impl FnOnce(&mut EffectRecord),
    ) -> Result<bool, EffectError> {
        let k = key(&claimed.effect_id);
        let mut next = claimed.clone();
        f(&mut next);
        next.owner = None;
        next.updated_at_ms = now_ms();
        let swapped = self
            .kv
            .compare_and_swap(&k, Some(&Self::encode(claimed)), Some(Self::encode(&next)))
            .await?;
        if swapped.is_err() {
            tracing::warn!(effect = %claimed.effect_id, "claim changed hands before the outcome was recorded (lease expired?)");
        }
        Ok(swapped.is_ok())
    }

    /// Records the outcome of a performed effect (success or an answered
    /// failure). Returns false if our claim was lost meanwhile.
    pub async fn complete(
        &self,
        claimed: &EffectRecord,
        outcome: Result<Value, Value>,
    ) -> Result<bool, EffectError> {
        self.transition(claimed, |r| {
            r.state = EffectState::Completed;
            match outcome {
                Ok(v) => r.result = Some(v),
                Err(e) => r.error = Some(e),
            }
        })
        .await
    }

    /// Releases a claim whose call was certainly not sent.
    pub async fn release(&self, claimed: &EffectRecord) -> Result<bool, EffectError> {
        self.transition(claimed, |r| {
            r.state = EffectState::Released;
            r.sends = r.sends.saturating_sub(1);
        })
        .await
    }

    /// Gives up a claim whose outcome is unknown for an idempotent tool:
    /// the record stays `claimed` with an expired lease, so the next attempt
    /// re-sends under the same key (the provider dedupes).
    pub async fn abandon(&self, claimed: &EffectRecord) -> Result<bool, EffectError> {
        let k = key(&claimed.effect_id);
        let mut next = claimed.clone();
        next.owner = Some(Owner {
            executor: self.executor.clone(),
            lease_expires_at_ms: 0,
        });
        next.updated_at_ms = now_ms();
        Ok(self
            .kv
            .compare_and_swap(&k, Some(&Self::encode(claimed)), Some(Self::encode(&next)))
            .await?
            .is_ok())
    }

    /// Marks an effect whose outcome is unknown (sent, never answered).
    pub async fn escape(&self, claimed: &EffectRecord, error: Value) -> Result<bool, EffectError> {
        self.transition(claimed, |r| {
            r.state = EffectState::Escaped;
            r.error = Some(error);
        })
        .await
    }

    /// Operator resolution of a claimed or escaped effect as `completed` or
    /// `released`.
    pub async fn resolve(
        &self,
        effect_id: &str,
        to: EffectState,
    ) -> Result<EffectRecord, EffectError> {
        if !matches!(to, EffectState::Completed | EffectState::Released) {
            return Err(EffectError::Invalid(
                "an effect can be resolved only as completed or released".to_owned(),
            ));
        }
        let k = key(effect_id);
        for _ in 0..MAX_CAS_ROUNDS {
            let Some(bytes) = self.kv.get(&k).await? else {
                return Err(EffectError::Invalid(format!("no effect {effect_id}")));
            };
            let mut r = Self::decode(&k, &bytes)?;
            if !matches!(r.state, EffectState::Claimed | EffectState::Escaped) {
                return Err(EffectError::Invalid(format!(
                    "effect {effect_id} is {:?}; only claimed or escaped effects need resolving",
                    r.state
                )));
            }
            r.state = to;
            r.owner = None;
            r.updated_at_ms = now_ms();
            if to == EffectState::Completed {
                r.error = None;
                r.result
                    .get_or_insert(serde_json::json!({"resolvedBy": "operator"}));
            }
            if self
                .kv
                .compare_and_swap(&k, Some(&bytes), Some(Self::encode(&r)))
                .await?
                .is_ok()
            {
                return Ok(r);
            }
        }
        Err(EffectError::Contended(effect_id.to_owned()))
    }

    /// Deletes completed and released records (and their index entries)
    /// last changed before `older_than_ms`. Claimed and escaped records are
    /// kept: they need attention. Returns how many were purged.
    ///
    /// Reads the records in pages (of 512), never all at once.
    pub async fn purge(&self, older_than_ms: u64) -> Result<usize, EffectError> {
        const PAGE: usize = 512;
        let mut n = 0;
        let mut start = "effect/".to_owned();
        loop {
            let page = self.kv.scan_range(&start, Some("effect0"), PAGE).await?;
            let full = page.len() == PAGE;
            if let Some((last, _)) = page.last() {
                start = format!("{last}\0");
            }
            // A page's finished, old records in one compare-and-delete (a
            // record changed meanwhile stays), then their listing entries
            // (always empty values).
            let mut doomed = Vec::new();
            let mut listed = std::collections::HashMap::new();
            for (k, bytes) in page {
                let r = Self::decode(&k, &bytes)?;
                if matches!(r.state, EffectState::Completed | EffectState::Released)
                    && r.updated_at_ms < older_than_ms
                {
                    listed.insert(k.clone(), index_key(&r.tenant_id, &r.run_id, &r.effect_id));
                    doomed.push((k, bytes));
                }
            }
            if !doomed.is_empty() {
                let gone = self.kv.remove_unchanged(doomed).await?;
                n += gone.len();
                let entries = gone
                    .iter()
                    .filter_map(|k| listed.remove(k))
                    .map(|i| (i, Vec::new()))
                    .collect();
                self.kv.remove_unchanged(entries).await?;
            }
            if !full {
                return Ok(n);
            }
        }
    }
}

#[cfg(test)]
mod tests;
