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

pub mod grant;
pub mod sections;

pub use crate::limits::LimitsSection;
pub use grant::{FsGrant, PackGrant};
pub use sections::{
    DEFAULT_MAX_RECORD_BYTES_PER_INVOCATION, DEFAULT_MAX_RESULT_BYTES, EffectsSection,
    LEASE_MARGIN_MS, MeteringSection, RunsSection, ToolSpec,
};

use crate::error::ConfigError;
use crate::limits::Limits;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

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
