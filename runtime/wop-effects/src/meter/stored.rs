//! How roll-ups and usage records are encoded, keyed and bounded in the store.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use wop_core::budget::*;
use wop_core::model::Usage;

/// A run's roll-up record (`rollup/run/<tenant>/<run>`). Absent fields
/// read as their defaults (the stored form leaves them out).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RunRollup {
    /// The tenant the run belongs to (in full).
    pub tenant_id: String,
    /// The run id (in full).
    pub run_id: String,
    /// Per `pack@version`.
    pub by_pack: BTreeMap<String, Rollup>,
    /// Per-invocation usage records kept for this run.
    pub records_kept: u64,
    /// Last recorded invocation (ms since the Unix epoch).
    pub last_at_ms: u64,
}

impl RunRollup {
    /// The run's total over all packs.
    pub fn total(&self, currency: &str) -> Rollup {
        let mut t = Rollup {
            currency: currency.to_owned(),
            ..Default::default()
        };
        for r in self.by_pack.values() {
            add_rollup(&mut t, r);
        }
        t
    }

    /// Invocations recorded for this run.
    pub fn invocations(&self) -> u64 {
        self.by_pack.values().map(|r| r.invocations).sum()
    }
}

/// One shard of a pack's roll-up (`rollup/pack/<pack@version>/<shard>`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PackShard {
    pub(super) pack: String,
    pub(super) pack_version: String,
    pub(super) rollup: Rollup,
}

/// A stored usage record: the (bounded) usage plus what was cut.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct StoredUsage {
    #[serde(flatten)]
    pub(super) usage: Usage,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(super) host_call_breakdown_dropped: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl StoredUsage {
    /// JSON without the fields that hold their default (zero, empty):
    /// typically half the bytes of a small invocation's usage.
    /// Written straight from the struct (`compact.rs`); the same JSON as
    /// [`encode_tree`](Self::encode_tree), which stays as the fallback.
    pub(super) fn encode(&self) -> Vec<u8> {
        let Some(mut out) = super::compact::to_vec(&self.usage) else {
            return self.encode_tree();
        };
        if self.host_call_breakdown_dropped != 0 {
            out.pop(); // the closing brace
            if out.len() > 1 {
                out.push(b',');
            }
            out.extend_from_slice(
                format!(
                    "\"hostCallBreakdownDropped\":{}}}",
                    self.host_call_breakdown_dropped
                )
                .as_bytes(),
            );
        }
        out
    }

    /// [`encode`](Self::encode) through a JSON tree.
    pub(super) fn encode_tree(&self) -> Vec<u8> {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        drop_defaults(&mut v);
        serde_json::to_vec(&v).unwrap_or_default()
    }

    /// Reads [`encode`](Self::encode)'s form (and full records of older
    /// versions): absent fields take their defaults.
    pub(super) fn decode(bytes: &[u8]) -> Option<StoredUsage> {
        let stored: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(bytes).ok()?;
        serde_json::from_value(with_defaults(
            serde_json::to_value(StoredUsage::default()).ok()?,
            stored,
        ))
        .ok()
    }
}

/// How a roll-up record is stored.
pub(super) trait Record: Sized {
    fn encode(&self) -> Vec<u8>;
    fn decode(bytes: &[u8]) -> Option<Self>;
}

impl Record for PackShard {
    fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
    fn decode(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok()
    }
}

/// Removes the fields of `v` (an object) that hold their default.
fn drop_defaults(v: &mut serde_json::Value) {
    if let serde_json::Value::Object(m) = v {
        m.retain(|_, x| !is_default_json(x));
    }
}

/// `defaults` (an object) overlaid with the fields of `v`.
fn with_defaults(
    defaults: serde_json::Value,
    v: serde_json::Map<String, serde_json::Value>,
) -> serde_json::Value {
    let mut full = defaults;
    if let serde_json::Value::Object(base) = &mut full {
        base.extend(v);
    }
    full
}

impl Record for RunRollup {
    /// Compact: default-valued fields are left out, in the record and in
    /// each per-pack roll-up. Written straight from the struct (no JSON
    /// tree): this runs on every recorded invocation.
    fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(&CompactRun(self)).unwrap_or_default()
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok()
    }
}

/// [`RunRollup`] serialized without its default-valued fields.
struct CompactRun<'a>(&'a RunRollup);

impl Serialize for CompactRun<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let r = self.0;
        let mut m = s.serialize_map(None)?;
        if !r.tenant_id.is_empty() {
            m.serialize_entry("tenantId", &r.tenant_id)?;
        }
        if !r.run_id.is_empty() {
            m.serialize_entry("runId", &r.run_id)?;
        }
        if !r.by_pack.is_empty() {
            let packs: BTreeMap<&str, CompactRollup<'_>> = r
                .by_pack
                .iter()
                .map(|(k, v)| (k.as_str(), CompactRollup(v)))
                .collect();
            m.serialize_entry("byPack", &packs)?;
        }
        if r.records_kept != 0 {
            m.serialize_entry("recordsKept", &r.records_kept)?;
        }
        if r.last_at_ms != 0 {
            m.serialize_entry("lastAtMs", &r.last_at_ms)?;
        }
        m.end()
    }
}

/// [`Rollup`] serialized without its zero fields.
struct CompactRollup<'a>(&'a Rollup);

impl Serialize for CompactRollup<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let r = self.0;
        let mut m = s.serialize_map(None)?;
        for (k, v) in [
            ("invocations", r.invocations),
            ("fuel", r.fuel),
            ("wallTimeUs", r.wall_time_us),
            ("toolCalls", r.tool_calls),
            ("effectClaims", r.effect_claims),
            ("egressBytes", r.egress_bytes),
            ("logBytes", r.log_bytes),
        ] {
            if v != 0 {
                m.serialize_entry(k, &v)?;
            }
        }
        if r.cost != 0.0 {
            m.serialize_entry("cost", &r.cost)?;
        }
        if !r.currency.is_empty() {
            m.serialize_entry("currency", &r.currency)?;
        }
        m.end()
    }
}

fn is_default_json(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Number(n) => n.as_f64() == Some(0.0),
        serde_json::Value::String(s) => s.is_empty(),
        serde_json::Value::Array(a) => a.is_empty(),
        serde_json::Value::Object(o) => o.is_empty(),
        serde_json::Value::Null => true,
        serde_json::Value::Bool(b) => !b,
    }
}

pub(super) fn add_rollup(to: &mut Rollup, r: &Rollup) {
    to.invocations += r.invocations;
    to.fuel += r.fuel;
    to.wall_time_us += r.wall_time_us;
    to.tool_calls += r.tool_calls;
    to.effect_claims += r.effect_claims;
    to.egress_bytes += r.egress_bytes;
    to.log_bytes += r.log_bytes;
    to.cost += r.cost;
    if to.currency.is_empty() {
        to.currency = r.currency.clone();
    }
}

/// `s` cut to at most `max` bytes (on a char boundary), marked with `…`;
/// in place (nothing is allocated when `s` fits, the usual case).
pub(super) fn cut(s: &mut String, max: usize) {
    if s.len() <= max {
        return;
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s.push('…');
}

pub(super) fn pack_label(u: &Usage) -> String {
    format!("{}@{}", u.pack, u.pack_version)
}
