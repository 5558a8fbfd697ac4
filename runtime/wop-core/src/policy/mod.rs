//! The operator policy: one TOML file with limits and per-pack grants.
//!
//! Every field is enforced or rejected: unknown keys are errors that name
//! the key, so a typo never silently weakens the sandbox.
//!
//! ```toml
//! [limits]                 # ceilings for every invocation (camelCase keys)
//! memoryBytes = 67108864
//! fuel = 10000000000
//! wallClockMs = 30000
//!
//! [packs.tool-call]        # grants for the pack named `tool-call`
//! capabilities = ["log", "tools"]
//!
//! [packs.fs-probe.filesystem]
//! path = "/srv/wop/data"   # mounted in the pack as /data
//! readOnly = true
//! ```

use crate::capability::Capability;
use crate::error::ConfigError;
use crate::limits::Limits;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `[mcp]` (the MCP room, also at this path).
pub use crate::mcp;

/// The operator policy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Ceilings for every invocation. Missing keys keep their defaults.
    #[serde(default)]
    pub limits: LimitsSection,
    /// Grants per pack name. A pack not listed gets the base capabilities
    /// (`log`, `clock`, `random`) and nothing else.
    #[serde(default)]
    pub packs: BTreeMap<String, PackGrant>,
    /// Operator-declared tools: HTTP endpoints and node-pack tools.
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// Effect-claim settings.
    #[serde(default)]
    pub effects: EffectsSection,
    /// Safe-fetch settings for every pack (`[egress]`); destinations are
    /// granted per pack (`[packs.<name>] egress`).
    #[serde(default)]
    pub egress: crate::egress::EgressSection,
    /// The price table that turns usage into cost.
    #[serde(default)]
    pub prices: crate::budget::Prices,
    /// Default budget and bounds for runs that do not bring their own.
    #[serde(default)]
    pub runs: RunsSection,
    /// Metering switches.
    #[serde(default)]
    pub metering: MeteringSection,
    /// MCP servers packs may use through `ctx.mcp` (`[mcp.servers.<id>]`);
    /// granted per pack (`[packs.<name>] mcp`).
    #[serde(default)]
    pub mcp: mcp::McpSection,
    /// Signed packs: trusted keys and whether signatures are required
    /// (`[trust]`; decision 0009).
    #[serde(default)]
    pub trust: crate::trust::TrustSection,
    /// Credentials the host holds for packs (`[secrets.<id>]`); granted
    /// per pack (`[packs.<name>] secrets`), attached on the way out.
    #[serde(default)]
    pub secrets: BTreeMap<String, crate::secrets::SecretSpec>,
}

/// `[metering]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeteringSection {
    /// Record the per-host-call breakdown (fuel before each call, wall time
    /// inside it). Default true; costs ≈ 190 ns per host call (decision 0005).
    pub host_call_breakdown: Option<bool>,
}

/// `[runs]`: the default budget and bounds of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunsSection {
    /// See [`crate::model::RunBudget::max_tool_calls`].
    pub max_tool_calls: Option<u64>,
    /// See [`crate::model::RunBudget::max_fuel`].
    pub max_fuel: Option<u64>,
    /// See [`crate::model::RunBudget::max_cost_usd`].
    pub max_cost_usd: Option<f64>,
    /// See [`crate::model::RunBudget::threshold_percent`].
    pub threshold_percent: Option<u8>,
    /// Only `fail` is supported.
    #[serde(default)]
    pub on_exhaustion: crate::model::OnExhaustion,
    /// See [`crate::model::RunBounds::max_loop_iterations`].
    pub max_loop_iterations: Option<u32>,
    /// See [`crate::model::RunBounds::run_timeout_ms`].
    pub run_timeout_ms: Option<u64>,
}

impl RunsSection {
    /// The default budget.
    pub fn budget(&self) -> crate::model::RunBudget {
        crate::model::RunBudget {
            max_tool_calls: self.max_tool_calls,
            max_fuel: self.max_fuel,
            max_cost_usd: self.max_cost_usd,
            threshold_percent: self.threshold_percent,
            on_exhaustion: self.on_exhaustion,
        }
    }

    /// The default bounds.
    pub fn bounds(&self) -> crate::model::RunBounds {
        crate::model::RunBounds {
            max_loop_iterations: self.max_loop_iterations,
            run_timeout_ms: self.run_timeout_ms,
        }
    }
}

/// One `[[tools]]` entry: exactly one of `url` (an operator HTTP tool) or
/// `packType` (a node of a loaded pack).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolSpec {
    /// `<scope>:<id>`.
    pub id: String,
    /// Operator endpoint (HTTP tool). Loopback/private allowed: operator-trusted.
    pub url: Option<String>,
    /// HTTP method (default POST).
    pub method: Option<String>,
    /// Node type of a loaded pack (node-pack tool).
    pub pack_type: Option<String>,
    /// Safety tier.
    pub safety_tier: crate::tools::SafetyTier,
    /// Replay policy (default: `idempotent` for HTTP tools is NOT assumed;
    /// unset means the tier decides whether calls are effects).
    pub replay_policy: Option<crate::tools::ReplayPolicy>,
    /// Scopes the principal must hold.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Tenants that may see the tool (default: all).
    pub tenants: Option<Vec<String>>,
    /// Per-call timeout in ms (default 10 000; clamped to the caller's
    /// remaining wall clock).
    pub timeout_ms: Option<u64>,
    /// Rate limit per (principal, tool).
    pub rate_limit: Option<crate::ratelimit::RateSpec>,
    /// Catalog title.
    pub title: Option<String>,
    /// Catalog description.
    pub description: Option<String>,
    /// JSON Schema of the arguments.
    pub input_schema: Option<serde_json::Value>,
}

/// How much longer than the wall-clock ceiling an effect claim's lease
/// must be (what an invocation spends around its sandbox: admission,
/// recording).
pub const LEASE_MARGIN_MS: u64 = 1_000;

/// `[effects]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EffectsSection {
    /// Claim lease in ms (default: the wall-clock ceiling + 5 s). Must be
    /// at least the wall-clock ceiling + [`LEASE_MARGIN_MS`]: a claim must
    /// outlive the longest call it guards (every call, and a whole node
    /// invocation claimed by `wop serve`, ends by the wall clock), or a
    /// call still running would be taken over as abandoned.
    pub lease_ms: Option<u64>,
    /// How long a duplicate waits for an in-flight claim before
    /// `idempotency_in_flight` (default 2000 ms).
    pub in_flight_wait_ms: Option<u64>,
    /// Days completed/released records are kept (default and minimum 14).
    pub retention_days: Option<u64>,
    /// Largest tool result recorded and returned, in bytes (default 1 MiB).
    pub max_result_bytes: Option<u64>,
    /// Most effectful calls (claimed or replayed) one invocation may make,
    /// so one invocation can grow the effect store by at most this many
    /// records of at most `maxResultBytes` each (default 64; 0 refuses
    /// every effectful call).
    pub max_records_per_invocation: Option<u32>,
    /// Most result bytes one invocation's effect records may hold, all
    /// records together (the recorded result or error of each effectful
    /// call, claimed or replayed alike). An effectful call is refused
    /// before it is sent when the bytes recorded so far plus one result of
    /// up to `maxResultBytes` would pass it. Default
    /// [`DEFAULT_MAX_RECORD_BYTES_PER_INVOCATION`] (4 MiB), or 4 ×
    /// `maxResultBytes` if that is larger (room for four whole results);
    /// must be at least `maxResultBytes`.
    pub max_record_bytes_per_invocation: Option<u64>,
    /// Maximum nesting of node-pack tools (default 3).
    pub max_tool_depth: Option<u32>,
    /// Where effects, budgets and usage live when `--store` is not given: a
    /// sled directory or a `postgres://` URL, or `env:NAME` to read either
    /// from the environment variable `NAME` (keeps a database password out
    /// of the policy file).
    pub store: Option<String>,
}

/// The default of `effects.maxResultBytes`: 1 MiB.
pub const DEFAULT_MAX_RESULT_BYTES: u64 = 1 << 20;

/// The default of `effects.maxRecordBytesPerInvocation`: 4 MiB.
pub const DEFAULT_MAX_RECORD_BYTES_PER_INVOCATION: u64 = 4 << 20;

impl EffectsSection {
    /// `maxResultBytes`, or its default.
    pub fn max_result_bytes(&self) -> u64 {
        self.max_result_bytes.unwrap_or(DEFAULT_MAX_RESULT_BYTES)
    }

    /// `maxRecordBytesPerInvocation`, or its default: 4 MiB, or 4 ×
    /// `maxResultBytes` if that is larger (four whole results fit).
    pub fn max_record_bytes_per_invocation(&self) -> u64 {
        self.max_record_bytes_per_invocation.unwrap_or_else(|| {
            DEFAULT_MAX_RECORD_BYTES_PER_INVOCATION.max(self.max_result_bytes().saturating_mul(4))
        })
    }

    /// The store `store` names, with `env:NAME` read from the environment;
    /// `None` when unset. The error names the missing variable.
    pub fn store_spec(&self) -> Result<Option<String>, String> {
        let Some(raw) = self.store.as_deref() else {
            return Ok(None);
        };
        let spec = match raw.strip_prefix("env:") {
            Some(name) => std::env::var(name).map_err(|_| {
                format!("[effects] store = \"env:{name}\" but the environment variable {name} is not set")
            })?,
            None => raw.to_owned(),
        };
        if spec.trim().is_empty() {
            return Err(
                "[effects] store is empty: give a directory or a postgres:// URL".to_owned(),
            );
        }
        Ok(Some(spec))
    }
}

/// `[limits]`: the same fields as [`Limits`], each optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LimitsSection {
    /// See [`Limits::memory_bytes`].
    pub memory_bytes: Option<u64>,
    /// See [`Limits::fuel`].
    pub fuel: Option<u64>,
    /// See [`Limits::wall_clock_ms`].
    pub wall_clock_ms: Option<u64>,
    /// See [`Limits::table_elements`].
    pub table_elements: Option<u64>,
    /// See [`Limits::instances`].
    pub instances: Option<u64>,
    /// See [`Limits::memories_and_tables`].
    pub memories_and_tables: Option<u64>,
    /// See [`Limits::output_bytes`].
    pub output_bytes: Option<u64>,
    /// See [`Limits::log_bytes`].
    pub log_bytes: Option<u64>,
    /// See [`Limits::log_line_bytes`].
    pub log_line_bytes: Option<u64>,
    /// See [`Limits::resource_entries`].
    pub resource_entries: Option<u64>,
    /// See [`Limits::host_arg_bytes`].
    pub host_arg_bytes: Option<u64>,
}

/// Grants for one pack.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PackGrant {
    /// Capabilities (openwop interfaces) granted beyond the base set. The
    /// pack gets those it also requests in its manifest.
    #[serde(default)]
    pub capabilities: Vec<Capability>,
    /// One host directory mounted as the pack's only preopen, at `/data`.
    pub filesystem: Option<FsGrant>,
    /// Tool ids (or `prefix:*` patterns) the pack may call, if its manifest
    /// also declares them.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Destinations safe-fetch may reach, as `[scheme://]host[:port]`
    /// patterns (`api.example.com`, `*.example.com`, `http://host:8080`;
    /// see [`crate::egress::allow`]). Effective only for hosts the pack's
    /// manifest also requests (`x-wop.egress`).
    #[serde(default)]
    pub egress: Vec<String>,
    /// MCP servers and tools the pack may use, if its manifest also
    /// requests them (`x-wop.mcp`): a server id (every tool),
    /// `<server>/<tool>`, `<server>/*` or `<server>/<prefix>*`.
    #[serde(default)]
    pub mcp: Vec<String>,
    /// MCP resources the pack may read, per server: URI patterns (an exact
    /// URI, or `prefix*`), effective only for URIs its manifest also
    /// requests (`x-wop.mcp.resources`). A tool grant never allows a read;
    /// by default nothing is readable.
    #[serde(default)]
    pub mcp_resources: BTreeMap<String, Vec<String>>,
    /// Host services of the protocol's JavaScript `ctx` (`callAI`,
    /// `db.sql.query`, `storage.kv.get`, …) mapped to tool ids, for a
    /// JavaScript pack: `ctx.<service>(args)` becomes a gated call of that
    /// tool (this mapping declares and grants it for the pack; the `tools`
    /// capability is still needed). An unmapped service fails with
    /// `not_found`, naming the line that would map it.
    #[serde(default)]
    pub services: BTreeMap<String, String>,
    /// Secrets (`[secrets.<id>]`) the pack's nodes may use, if a node also
    /// declares them (`requiresSecrets`). The host attaches them; the
    /// pack never sees a value.
    #[serde(default)]
    pub secrets: Vec<String>,
    /// Require a trusted signature for this pack (overrides
    /// `[trust] requireSignature`).
    pub require_signature: Option<bool>,
    /// The approved version's `pack.json` (a file, or a pack directory
    /// holding one). A version that requests more than it is refused with
    /// `pack_capability_escalation` until this points at that version; a
    /// lower version is refused with `pack_version_rollback` unless
    /// `allowRollback` is set.
    pub approved: Option<PathBuf>,
    /// Load a version lower than the approved one (default `false`: a
    /// rollback is refused with `pack_version_rollback`).
    #[serde(default)]
    pub allow_rollback: bool,
}

/// A directory granted to a pack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FsGrant {
    /// The host directory. It must exist.
    pub path: PathBuf,
    /// Read-only unless set to `false`.
    #[serde(default = "yes")]
    pub read_only: bool,
}

fn yes() -> bool {
    true
}

/// Upper bounds that keep the pooling allocator's reservations sane.
const MAX_MEMORY_BYTES: u64 = 4 << 30;
const MIN_INSTANCES: u64 = 64;

impl Policy {
    /// Parses a policy from TOML text. Errors name the offending key.
    pub fn from_toml(text: &str) -> Result<Policy, ConfigError> {
        let p: Policy = toml::from_str(text).map_err(|e| ConfigError::Policy(e.to_string()))?;
        p.validate()?;
        Ok(p)
    }

    /// Reads and parses a policy file.
    pub fn from_file(path: &Path) -> Result<Policy, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::Io(format!("cannot read policy {}: {e}", path.display())))?;
        Self::from_toml(&text).map_err(|e| ConfigError::Policy(format!("{}: {e}", path.display())))
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let l = self.limits();
        if l.memory_bytes > MAX_MEMORY_BYTES {
            return Err(ConfigError::Policy(format!(
                "limits.memoryBytes = {} is above the supported maximum {MAX_MEMORY_BYTES}",
                l.memory_bytes
            )));
        }
        if l.table_elements > crate::limits::MAX_TABLE_ELEMENTS {
            return Err(ConfigError::Policy(format!(
                "limits.tableElements = {} is above the engine's maximum {} (the most elements \
                 any table can have)",
                l.table_elements,
                crate::limits::MAX_TABLE_ELEMENTS
            )));
        }
        if l.instances < MIN_INSTANCES {
            return Err(ConfigError::Policy(format!(
                "limits.instances = {} is below {MIN_INSTANCES}; componentized runtimes need more instances than that",
                l.instances
            )));
        }
        for (field, v) in [("fuel", l.fuel), ("wallClockMs", l.wall_clock_ms)] {
            if v == 0 {
                return Err(ConfigError::Policy(format!(
                    "limits.{field} must be greater than 0"
                )));
            }
        }
        if let Some(lease) = self.effects.lease_ms {
            let least = l.wall_clock_ms.saturating_add(LEASE_MARGIN_MS);
            if lease < least {
                return Err(ConfigError::Policy(format!(
                    "effects.leaseMs = {lease} is shorter than limits.wallClockMs ({}) + {LEASE_MARGIN_MS}: \
                     a claim could expire while the call it guards is still running, and be taken over; \
                     set leaseMs to at least {least} (or lower limits.wallClockMs)",
                    l.wall_clock_ms
                )));
            }
        }
        let mut ids = std::collections::BTreeSet::new();
        for (i, t) in self.tools.iter().enumerate() {
            let at = format!("tools[{i}] (`{}`)", t.id);
            if !ids.insert(&t.id) {
                return Err(ConfigError::Policy(format!(
                    "{at}: the id is declared twice"
                )));
            }
            match (&t.url, &t.pack_type) {
                (Some(_), None) | (None, Some(_)) => {}
                _ => {
                    return Err(ConfigError::Policy(format!(
                        "{at}: set exactly one of `url` (an HTTP tool) or `packType` (a node-pack tool)"
                    )));
                }
            }
            if t.pack_type.is_some() && t.method.is_some() {
                return Err(ConfigError::Policy(format!(
                    "{at}: `method` applies only to HTTP tools"
                )));
            }
            if let Some(r) = &t.rate_limit {
                r.validate()
                    .map_err(|e| ConfigError::Policy(format!("{at}.rateLimit: {e}")))?;
            }
        }
        self.prices.validate().map_err(ConfigError::Policy)?;
        self.runs
            .budget()
            .validate()
            .map_err(|e| ConfigError::Policy(format!("runs: {e}")))?;
        if let Some(d) = self.effects.retention_days
            && d < 14
        {
            return Err(ConfigError::Policy(format!(
                "effects.retentionDays = {d}: effect records must be kept at least 14 days"
            )));
        }
        if let Some(b) = self.effects.max_record_bytes_per_invocation
            && b < self.effects.max_result_bytes()
        {
            return Err(ConfigError::Policy(format!(
                "effects.maxRecordBytesPerInvocation = {b} is smaller than effects.maxResultBytes = {}: one result would not fit; raise maxRecordBytesPerInvocation or lower maxResultBytes",
                self.effects.max_result_bytes()
            )));
        }
        self.mcp.validate().map_err(ConfigError::Policy)?;
        self.trust.validate().map_err(ConfigError::Policy)?;
        self.egress
            .validate(self.effects.max_result_bytes())
            .map_err(ConfigError::Policy)?;
        self.secret_warnings()?;
        for (name, grant) in &self.packs {
            for (i, s) in grant.secrets.iter().enumerate() {
                if !self.secrets.contains_key(s) {
                    return Err(ConfigError::Policy(format!(
                        "packs.{name}.secrets[{i}]: no [secrets.{s}] in this policy"
                    )));
                }
            }
            if let Err((i, e)) = crate::egress::allow::parse_all(&grant.egress) {
                return Err(ConfigError::Policy(format!(
                    "packs.{name}.egress[{i}]: {e}"
                )));
            }
            mcp::validate_grants(&grant.mcp)
                .map_err(|e| ConfigError::Policy(format!("packs.{name}.mcp{e}")))?;
            mcp::validate_resource_grants(&grant.mcp_resources)
                .map_err(|e| ConfigError::Policy(format!("packs.{name}.mcpResources{e}")))?;
            for p in &grant.tools {
                crate::tools::authz::pattern_matches(p, "x:y")
                    .map_err(|e| ConfigError::Policy(format!("packs.{name}.tools: {e}")))?;
            }
            if let Some(a) = &grant.approved {
                crate::trust::read_approved(a)
                    .map_err(|e| ConfigError::Policy(format!("packs.{name}.approved: {e}")))?;
            }
            if let Some(fs) = &grant.filesystem
                && !fs.path.is_dir()
            {
                return Err(ConfigError::Policy(format!(
                    "packs.{name}.filesystem.path = {} is not an existing directory",
                    fs.path.display()
                )));
            }
        }
        Ok(())
    }

    /// Checks `[secrets]` against the tools and MCP servers it names;
    /// returns what an operator should be warned about (values written
    /// into the policy file itself).
    pub fn secret_warnings(&self) -> Result<Vec<String>, ConfigError> {
        let http_tools: Vec<&str> = self
            .tools
            .iter()
            .filter(|t| t.url.is_some())
            .map(|t| t.id.as_str())
            .collect();
        let mcp_http: BTreeMap<&str, bool> = self
            .mcp
            .servers
            .iter()
            .map(|(id, s)| {
                (
                    id.as_str(),
                    s.transport == mcp::McpTransportKind::StreamableHttp,
                )
            })
            .collect();
        let mut warnings = Vec::new();
        // (tool or `mcp:<server>`, header) → the secret attached as it.
        let mut attached_as: BTreeMap<(String, String), &str> = BTreeMap::new();
        for (id, spec) in &self.secrets {
            warnings.extend(
                spec.validate(id, &http_tools, &mcp_http)
                    .map_err(ConfigError::Policy)?,
            );
            let header = spec
                .attach()
                .map_err(ConfigError::Policy)?
                .header_name()
                .to_owned();
            let targets = spec
                .tools
                .iter()
                .cloned()
                .chain(spec.mcp_servers.iter().map(|s| format!("mcp:{s}")));
            for t in targets {
                if let Some(other) = attached_as.insert((t.clone(), header.clone()), id) {
                    return Err(ConfigError::Policy(format!(
                        "secrets.{id} and secrets.{other} are both attached to `{t}` as `{header}`; \
                         one request cannot carry both"
                    )));
                }
            }
        }
        Ok(warnings)
    }

    /// The effective ceilings: defaults overridden by `[limits]`.
    pub fn limits(&self) -> Limits {
        let d = Limits::default();
        let s = &self.limits;
        Limits {
            memory_bytes: s.memory_bytes.unwrap_or(d.memory_bytes),
            fuel: s.fuel.unwrap_or(d.fuel),
            wall_clock_ms: s.wall_clock_ms.unwrap_or(d.wall_clock_ms),
            table_elements: s.table_elements.unwrap_or(d.table_elements),
            instances: s.instances.unwrap_or(d.instances),
            memories_and_tables: s.memories_and_tables.unwrap_or(d.memories_and_tables),
            output_bytes: s.output_bytes.unwrap_or(d.output_bytes),
            log_bytes: s.log_bytes.unwrap_or(d.log_bytes),
            log_line_bytes: s.log_line_bytes.unwrap_or(d.log_line_bytes),
            resource_entries: s.resource_entries.unwrap_or(d.resource_entries),
            host_arg_bytes: s.host_arg_bytes.unwrap_or(d.host_arg_bytes),
        }
    }

    /// The grant for a pack name (empty if none).
    pub fn grant(&self, pack: &str) -> PackGrant {
        self.packs.get(pack).cloned().unwrap_or_default()
    }

    /// What the operator grants `pack` on MCP servers (`mcp` tools and
    /// `mcpResources`).
    pub fn mcp_grant(&self, pack: &str) -> mcp::McpGrant {
        let g = self.grant(pack);
        mcp::McpGrant {
            tools: g.mcp,
            resources: g.mcp_resources,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effects_store_spec_forms() {
        let spec = |raw: &str| {
            EffectsSection {
                store: Some(raw.to_owned()),
                ..Default::default()
            }
            .store_spec()
        };
        assert_eq!(EffectsSection::default().store_spec(), Ok(None));
        assert_eq!(
            spec("/srv/wop/effects"),
            Ok(Some("/srv/wop/effects".to_owned()))
        );
        assert!(spec("  ").unwrap_err().contains("empty"));
        let e = spec("env:WOP_TEST_SURELY_UNSET_VARIABLE").unwrap_err();
        assert!(
            e.contains("WOP_TEST_SURELY_UNSET_VARIABLE is not set"),
            "{e}"
        );
    }

    #[test]
    fn a_lease_shorter_than_the_longest_call_is_refused() {
        for (policy, ok) in [
            (
                "[limits]\nwallClockMs = 500\n[effects]\nleaseMs = 1500\n",
                true,
            ),
            (
                "[limits]\nwallClockMs = 500\n[effects]\nleaseMs = 1499\n",
                false,
            ),
            ("[effects]\nleaseMs = 300\n", false),
            ("[effects]\n", true),
        ] {
            let r = Policy::from_toml(policy);
            assert_eq!(r.is_ok(), ok, "{policy}: {r:?}");
            if let Err(e) = r {
                assert!(e.to_string().contains("set leaseMs to at least"), "{e}");
            }
        }
    }

    #[test]
    fn the_record_byte_budget_holds_one_result_at_least() {
        let p = Policy::from_toml("").unwrap();
        assert_eq!(p.effects.max_record_bytes_per_invocation(), 4 << 20);
        let p = Policy::from_toml("[effects]\nmaxResultBytes = 8388608\n").unwrap();
        assert_eq!(p.effects.max_record_bytes_per_invocation(), 32 << 20);
        let p = Policy::from_toml("[effects]\nmaxRecordBytesPerInvocation = 2097152\n").unwrap();
        assert_eq!(p.effects.max_record_bytes_per_invocation(), 2 << 20);
        let e = Policy::from_toml(
            "[effects]\nmaxResultBytes = 2097152\nmaxRecordBytesPerInvocation = 1048576\n",
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("maxRecordBytesPerInvocation = 1048576"),
            "{e}"
        );
    }

    #[test]
    fn unknown_keys_are_rejected_by_name() {
        let e = Policy::from_toml("[limits]\nmemroyBytes = 5\n").unwrap_err();
        assert!(e.to_string().contains("memroyBytes"), "{e}");
        let e = Policy::from_toml("[packs.a]\ncapabilites = []\n").unwrap_err();
        assert!(e.to_string().contains("capabilites"), "{e}");
        let e = Policy::from_toml("[packs.a]\ncapabilities = [\"sockets\"]\n").unwrap_err();
        assert!(e.to_string().contains("sockets"), "{e}");
        let e = Policy::from_toml("[runs]\nonExhaustion = \"interrupt\"\n").unwrap_err();
        assert!(e.to_string().contains("not supported"), "{e}");
        let e = Policy::from_toml("[prices]\nperToolCall = -1.0\n").unwrap_err();
        assert!(e.to_string().contains("perToolCall"), "{e}");
    }

    #[test]
    fn limits_override_defaults_and_are_checked() {
        let p = Policy::from_toml("[limits]\nfuel = 5\n").unwrap();
        assert_eq!(p.limits().fuel, 5);
        assert_eq!(p.limits().memory_bytes, Limits::default().memory_bytes);
        assert!(Policy::from_toml("[limits]\ninstances = 16\n").is_err());
        assert!(Policy::from_toml("[limits]\nwallClockMs = 0\n").is_err());
        assert!(Policy::from_toml("[limits]\nmemoryBytes = 99999999999\n").is_err());
    }

    #[test]
    fn egress_keys_are_checked() {
        let p = Policy::from_toml(
            "[egress]\nallowLoopback = true\nmaxRedirects = 2\n[packs.fetch]\negress = [\"*.example.com\", \"http://api.example.org:8080\"]\n",
        )
        .unwrap();
        assert!(p.egress.settings().allow_loopback);
        assert_eq!(p.grant("fetch").egress.len(), 2);
        let e = Policy::from_toml("[egress]\nallowLoopbak = true\n").unwrap_err();
        assert!(e.to_string().contains("allowLoopbak"), "{e}");
        let e = Policy::from_toml("[packs.a]\negress = [\"ftp://x.example\"]\n").unwrap_err();
        assert!(e.to_string().contains("packs.a.egress[0]"), "{e}");
        let e = Policy::from_toml("[egress]\nmaxRedirects = 99\n").unwrap_err();
        assert!(e.to_string().contains("maxRedirects"), "{e}");
        let e = Policy::from_toml("[egress]\nmaxResponseBytes = 4194304\n").unwrap_err();
        assert!(e.to_string().contains("maxResultBytes"), "{e}");
    }

    #[test]
    fn mcp_section_and_grants_are_checked() {
        let p = Policy::from_toml(
            "[mcp.servers.ev]\ntransport = \"stdio\"\ncommand = \"node\"\ntiers = { echo = \"pure\" }\nrateLimit = { capacity = 2, refillPerSec = 1.0 }\n[packs.m]\ncapabilities = [\"mcp\"]\nmcp = [\"ev/echo\"]\n",
        )
        .unwrap();
        assert_eq!(p.grant("m").mcp, vec!["ev/echo".to_string()]);
        assert_eq!(p.mcp.servers["ev"].tier_of("echo"), mcp::ToolTier::Pure);
        let e = Policy::from_toml("[mcp.servers.ev]\ntransport = \"stdio\"\n").unwrap_err();
        assert!(e.to_string().contains("mcp.servers.ev.command"), "{e}");
        let e = Policy::from_toml("[mcp]\nserverz = {}\n").unwrap_err();
        assert!(e.to_string().contains("serverz"), "{e}");
        let e = Policy::from_toml("[packs.m]\nmcpResources = { ev = [\"a*b\"] }\n").unwrap_err();
        assert!(e.to_string().contains("packs.m.mcpResources.ev[0]"), "{e}");
        let p = Policy::from_toml(
            "[packs.m]\nmcp = [\"ev\"]\nmcpResources = { ev = [\"test://x/*\"] }\n",
        )
        .unwrap();
        assert_eq!(p.mcp_grant("m").resources["ev"], ["test://x/*"]);
        let e = Policy::from_toml("[packs.m]\nmcp = [\"ev/a*b\"]\n").unwrap_err();
        assert!(e.to_string().contains("packs.m.mcp[0]"), "{e}");
    }

    #[test]
    fn filesystem_grant_must_exist() {
        let e = Policy::from_toml("[packs.a.filesystem]\npath = \"/definitely/not/here\"\n")
            .unwrap_err();
        assert!(e.to_string().contains("packs.a.filesystem.path"), "{e}");
    }
}
