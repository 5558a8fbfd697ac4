//! Tools: the protocol's `ToolDescriptor`, the call handed to a provider
//! and the failures a provider reports. Pure data; who may call what is
//! decided by [`authz`], and the gate crate performs the calls.

pub mod authz;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Which surface backs a tool (protocol `source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolSource {
    /// A node of a loaded pack.
    NodePack,
    /// A workflow exposed as a tool.
    Workflow,
    /// An MCP server tool.
    Mcp,
    /// A connector action (operator HTTP tools are connectors here).
    Connector,
    /// Implemented by the embedder.
    HostExtension,
}

/// How much a tool can change the world (protocol `safetyTier`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SafetyTier {
    /// No external side effects.
    Pure,
    /// Reads external state.
    Read,
    /// Mutates external state.
    Write,
    /// Arbitrary-command class (host-extension only).
    Exec,
}

/// Replay posture (protocol `replayPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReplayPolicy {
    /// Pure, replay-safe.
    Deterministic,
    /// Safe to re-send under the same idempotency key (the provider dedupes).
    Idempotent,
    /// The host must record the observable result.
    NonDeterministic,
}

/// Outbound-network posture (protocol `egress`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Egress {
    /// No egress.
    None,
    /// Through safe-fetch.
    SafeFetch,
    /// Host-proxied.
    HostMediated,
    /// The host owns the egress story.
    HostOwned,
}

/// Whether invocation requires approval (protocol `approval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Approval {
    /// Never.
    Never,
    /// By host policy.
    Conditional,
    /// Always.
    Always,
}

/// Advisory magnitude (protocol `costHint` / `latencyHint`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Hint {
    /// Low.
    Low,
    /// Medium.
    Medium,
    /// High.
    High,
}

/// What the caller must hold (protocol `auth`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolAuth {
    /// Scopes the principal must hold (all of them).
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The tool needs a host-stored credential reference.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub credential_ref: bool,
}

/// The protocol's `ToolDescriptor` (RFC 0078): describes a tool; never
/// carries credentials.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolDescriptor {
    /// `<scope>:<id>`, unique in the catalog.
    pub tool_id: String,
    /// Which surface backs it.
    pub source: ToolSource,
    /// Side-effect class.
    pub safety_tier: SafetyTier,
    /// Human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// One-line summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
    /// JSON Schema of the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Required scopes and credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<ToolAuth>,
    /// Egress posture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<Egress>,
    /// Approval requirement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Approval>,
    /// Replay posture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_policy: Option<ReplayPolicy>,
    /// Advisory cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_hint: Option<Hint>,
    /// Advisory latency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_hint: Option<Hint>,
}

impl ToolDescriptor {
    /// A minimal descriptor.
    pub fn new(tool_id: impl Into<String>, source: ToolSource, safety_tier: SafetyTier) -> Self {
        Self {
            tool_id: tool_id.into(),
            source,
            safety_tier,
            title: None,
            description: None,
            input_schema: None,
            output_schema: None,
            auth: None,
            egress: None,
            approval: None,
            replay_policy: None,
            cost_hint: None,
            latency_hint: None,
        }
    }

    /// Checks the protocol's rules: `<scope>:<id>` form; exec ⇒ host-extension;
    /// schemas are objects.
    pub fn validate(&self) -> Result<(), String> {
        match self.tool_id.split_once(':') {
            Some((scope, id)) if !scope.is_empty() && !id.is_empty() => {}
            _ => {
                return Err(format!(
                    "toolId `{}` must have the form `<scope>:<id>`",
                    self.tool_id
                ));
            }
        }
        if self.tool_id.len() > 256 || self.tool_id.chars().any(char::is_control) {
            return Err(format!(
                "toolId `{}` is too long or has control characters",
                self.tool_id
            ));
        }
        if self.safety_tier == SafetyTier::Exec && self.source != ToolSource::HostExtension {
            return Err(format!(
                "tool `{}`: an exec-tier tool must be host-extension-sourced",
                self.tool_id
            ));
        }
        for (name, s) in [
            ("inputSchema", &self.input_schema),
            ("outputSchema", &self.output_schema),
        ] {
            if s.as_ref().is_some_and(|v| !v.is_object()) {
                return Err(format!(
                    "tool `{}`: {name} must be a JSON object",
                    self.tool_id
                ));
            }
        }
        Ok(())
    }

    /// Scopes a principal needs.
    pub fn required_scopes(&self) -> &[String] {
        self.auth.as_ref().map_or(&[], |a| a.scopes.as_slice())
    }

    /// Whether a call can change the world and must be claimed as an effect:
    /// tier `write`/`exec`, or replay policy `non-deterministic`.
    pub fn is_effect(&self) -> bool {
        matches!(self.safety_tier, SafetyTier::Write | SafetyTier::Exec)
            || self.replay_policy == Some(ReplayPolicy::NonDeterministic)
    }
}

/// One call handed to a tool provider (`wop_gate::ToolProvider`).
#[derive(Debug, Clone)]
pub struct ToolCall {
    /// The tool.
    pub tool_id: String,
    /// The arguments (untrusted: they come from a pack).
    pub arguments: Value,
    /// For effects: the effect identity, to be sent to the provider as its
    /// idempotency key. `None` for reads.
    pub idempotency_key: Option<String>,
    /// The principal on whose behalf the call is made.
    pub principal: crate::model::Principal,
    /// Run context of the calling node.
    pub context: crate::model::RunContext,
    /// How long the provider may take.
    pub timeout: std::time::Duration,
    /// Nesting depth of node-pack tool calls (0 for a top-level node).
    pub depth: u32,
    /// Credentials to attach to this call (the host decided: the tool is
    /// in their audience). A provider that sends a request adds each one's
    /// [`header`](crate::secrets::Credential::header); the gate takes their
    /// values out of whatever the provider returns.
    pub credentials: Vec<std::sync::Arc<crate::secrets::Credential>>,
    /// The W3C `traceparent` of this call's span, when traces are
    /// exported: providers pass it on (a `traceparent` header, MCP
    /// `params._meta.traceparent`, a nested node's parent).
    pub traceparent: Option<String>,
}

/// Why a provider did not return a result.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolFailure {
    /// Protocol code (`upstream_unavailable`, `validation_error`, ...).
    pub code: String,
    /// For people.
    pub message: String,
    /// Machine-readable details.
    pub details: Option<Value>,
    /// Whether anything may have reached the provider. `false` means the
    /// call certainly had no effect (the claim is released and a retry may
    /// claim again); `true` with `definite: false` means the outcome is
    /// unknown.
    pub sent: bool,
    /// The provider answered (the failure itself is the outcome).
    pub definite: bool,
}

impl ToolFailure {
    /// A failure before anything was sent.
    pub fn not_sent(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
            details: None,
            sent: false,
            definite: true,
        }
    }

    /// The provider answered with an error.
    pub fn answered(code: &str, message: impl Into<String>, details: Option<Value>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
            details,
            sent: true,
            definite: true,
        }
    }

    /// Sent, but no answer: the outcome is unknown.
    pub fn unknown(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
            details: None,
            sent: true,
            definite: false,
        }
    }
}

/// What authorization needs to know about a registered tool: its
/// descriptor and which tenants may see it.
pub trait Catalogued {
    /// The descriptor shown in the catalog.
    fn descriptor(&self) -> &ToolDescriptor;
    /// Tenants that may see the tool; `None` = every tenant.
    fn tenants(&self) -> Option<&[String]>;
    /// Whether `tenant` may see this tool.
    fn visible_to(&self, tenant: &str) -> bool {
        self.tenants()
            .is_none_or(|ts| ts.iter().any(|t| t == tenant))
    }
}
