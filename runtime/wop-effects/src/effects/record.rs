//! What the store keeps of one effect: its record (identity, state,
//! owner, outcome, counts) and the summary that lists a run's effects.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How an effect's identity was derived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Keying {
    /// From a key the pack supplied: (tenant, tool, key) only.
    BusinessIdentity,
    /// From the call's position: (tenant, run, node, ordinal, tool).
    ActivityRecipe,
}

/// The lifecycle state of an effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EffectState {
    /// Being performed under a lease.
    Claimed,
    /// Performed; the outcome is recorded.
    Completed,
    /// Not performed; may be claimed again.
    Released,
    /// Outcome unknown; needs an operator.
    Escaped,
}

/// Who holds a claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Owner {
    /// The executor instance.
    pub executor: String,
    /// When the lease runs out (ms since the Unix epoch).
    pub lease_expires_at_ms: u64,
}

/// The stored record. Holds a digest of the request, never the arguments
/// or credentials.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EffectRecord {
    /// The effect identity.
    pub effect_id: String,
    /// Tenant.
    pub tenant_id: String,
    /// Run that first claimed it.
    pub run_id: String,
    /// Node that first claimed it.
    pub node_id: String,
    /// Attempt of the latest claim.
    pub attempt: u32,
    /// The tool.
    pub tool_id: String,
    /// How the identity was derived.
    pub keying: Keying,
    /// Current state.
    pub state: EffectState,
    /// The claim holder (while claimed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<Owner>,
    /// JCS SHA-256 of `{toolId, arguments}`.
    pub request_digest: String,
    /// The recorded result (completed, success).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// The recorded error (completed with an answered failure, or escaped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
    /// Times the effect was sent to the provider.
    pub sends: u32,
    /// Created (ms since epoch).
    pub created_at_ms: u64,
    /// Last change (ms since epoch).
    pub updated_at_ms: u64,
}

/// One line of a run's effect listing: never payloads or credentials.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EffectSummary {
    /// The effect identity.
    pub effect_id: String,
    /// Node.
    pub node_id: String,
    /// Attempt.
    pub attempt: u32,
    /// The tool (the protocol's `providerKey`).
    pub tool_id: String,
    /// Keying.
    pub keying: Keying,
    /// State.
    pub state: EffectState,
    /// Last change (ms since epoch).
    pub at: u64,
}

impl From<&EffectRecord> for EffectSummary {
    fn from(r: &EffectRecord) -> Self {
        Self {
            effect_id: r.effect_id.clone(),
            node_id: r.node_id.clone(),
            attempt: r.attempt,
            tool_id: r.tool_id.clone(),
            keying: r.keying,
            state: r.state,
            at: r.updated_at_ms,
        }
    }
}
