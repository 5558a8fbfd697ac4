//! What a pack may import: the capability names, and the classification of
//! a component's import names into allowed, escape attempts and denials.
//! Pure: no wasmtime types.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// An `openwop:node-pack` interface a pack can be granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Capability {
    /// `log`: structured logging (base: always granted).
    Log,
    /// `clock`: the host-controlled clock (base: always granted).
    Clock,
    /// `random`: seeded randomness (base: always granted).
    Random,
    /// `tools`: tool calls through the gate.
    Tools,
    /// `http`: SSRF-guarded fetch.
    Http,
    /// `mcp`: the MCP client.
    Mcp,
    /// `variables`: `openwop_variable_get`/`openwop_variable_set` (ABI v1
    /// core modules only; see `docs/decisions/0003-abi-v1.md`).
    Variables,
    /// `channels`: `openwop_channel_read`/`openwop_channel_write` (ABI v1
    /// core modules only).
    Channels,
    /// `interrupt`: `openwop_interrupt`, suspending the node (ABI v1 core
    /// modules only).
    Interrupt,
}

impl Capability {
    /// Capabilities every pack has without asking.
    pub const BASE: [Capability; 3] = [Capability::Log, Capability::Clock, Capability::Random];

    /// The WIT interface name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Log => "log",
            Self::Clock => "clock",
            Self::Random => "random",
            Self::Tools => "tools",
            Self::Http => "http",
            Self::Mcp => "mcp",
            Self::Variables => "variables",
            Self::Channels => "channels",
            Self::Interrupt => "interrupt",
        }
    }

    fn from_interface(name: &str) -> Option<Self> {
        Some(match name {
            "log" => Self::Log,
            "clock" => Self::Clock,
            "random" => Self::Random,
            "tools" => Self::Tools,
            "http" => Self::Http,
            "mcp" => Self::Mcp,
            _ => return None,
        })
    }

    /// Whether every pack has this capability without a grant.
    pub fn is_base(self) -> bool {
        Self::BASE.contains(&self)
    }
}

/// The protocol's escape kinds (`details.escapeKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum EscapeKind {
    /// Filesystem outside a granted root.
    HostFs,
    /// Host environment variables.
    HostEnv,
    /// Sockets or HTTP outside safe-fetch.
    Network,
    /// Spawning or signalling processes.
    HostProcess,
}

impl EscapeKind {
    /// The protocol string, e.g. `network-escape`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::HostFs => "host-fs-escape",
            Self::HostEnv => "host-env-leak",
            Self::Network => "network-escape",
            Self::HostProcess => "host-process-escape",
        }
    }
}

/// The verdict on one import name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImportVerdict {
    /// Linked with no ambient authority (WASI basics) or a base capability.
    Allowed,
    /// Allowed because the pack requested and the operator granted it.
    Granted(Capability),
    /// An openwop capability the pack may have but was not given.
    NotGranted(Capability),
    /// A host facility that would escape the sandbox.
    Escape(EscapeKind),
    /// Something this runtime does not provide at all.
    Unknown,
}

/// WASI 0.2 interfaces linked with no ambient authority: no preopens unless
/// the operator grants one directory, empty environment and arguments,
/// closed stdin, captured stdout/stderr, host-supplied clocks and random.
const WASI_ALLOWED: &[&str] = &[
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:clocks/wall-clock",
    "wasi:clocks/monotonic-clock",
    "wasi:random/random",
    "wasi:random/insecure",
    "wasi:random/insecure-seed",
    "wasi:filesystem/types",
    "wasi:filesystem/preopens",
];

/// The WIT package whose interfaces packs may import.
pub const OPENWOP_PACKAGE: &str = "openwop:node-pack";

/// Splits `ns:pkg/iface@ver` into (`ns:pkg/iface`, `ver`).
fn split_version(name: &str) -> (&str, Option<&str>) {
    match name.split_once('@') {
        Some((n, v)) => (n, Some(v)),
        None => (name, None),
    }
}

/// Judges one component import name against the effective grants.
pub fn classify_import(name: &str, granted: &BTreeSet<Capability>) -> ImportVerdict {
    let (base, version) = split_version(name);
    if let Some(iface) = base
        .strip_prefix(OPENWOP_PACKAGE)
        .and_then(|r| r.strip_prefix('/'))
    {
        if !version.is_some_and(|v| v.starts_with("0.1.")) {
            return ImportVerdict::Unknown;
        }
        if iface == "types" {
            return ImportVerdict::Allowed;
        }
        return match Capability::from_interface(iface) {
            Some(c) if c.is_base() => ImportVerdict::Allowed,
            Some(c) if granted.contains(&c) => ImportVerdict::Granted(c),
            Some(c) => ImportVerdict::NotGranted(c),
            None => ImportVerdict::Unknown,
        };
    }
    let ns_pkg = base.split('/').next().unwrap_or(base);
    match ns_pkg {
        "wasi:sockets" | "wasi:http" => return ImportVerdict::Escape(EscapeKind::Network),
        "wasi:process" => return ImportVerdict::Escape(EscapeKind::HostProcess),
        _ => {}
    }
    if WASI_ALLOWED.contains(&base) && version.is_some_and(|v| v.starts_with("0.2.")) {
        return ImportVerdict::Allowed;
    }
    ImportVerdict::Unknown
}

/// The effective capability set: base ∪ (requested ∩ granted).
pub fn effective(requested: &[Capability], granted: &[Capability]) -> BTreeSet<Capability> {
    let mut out: BTreeSet<Capability> = Capability::BASE.into_iter().collect();
    out.extend(requested.iter().filter(|c| granted.contains(c)).copied());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use Capability::*;
    use ImportVerdict as V;

    #[test]
    fn import_table() {
        let granted: BTreeSet<_> = [Log, Clock, Random, Tools].into_iter().collect();
        let cases: &[(&str, ImportVerdict)] = &[
            ("openwop:node-pack/log@0.1.0", V::Allowed),
            ("openwop:node-pack/types@0.1.0", V::Allowed),
            ("openwop:node-pack/tools@0.1.0", V::Granted(Tools)),
            ("openwop:node-pack/tools@0.1.7", V::Granted(Tools)),
            ("openwop:node-pack/http@0.1.0", V::NotGranted(Http)),
            ("openwop:node-pack/mcp@0.1.0", V::NotGranted(Mcp)),
            ("openwop:node-pack/tools@0.2.0", V::Unknown),
            ("openwop:node-pack/tools", V::Unknown),
            ("openwop:node-pack/shell@0.1.0", V::Unknown),
            ("wasi:cli/environment@0.2.6", V::Allowed),
            ("wasi:filesystem/preopens@0.2.0", V::Allowed),
            ("wasi:io/streams@0.2.3", V::Allowed),
            ("wasi:io/streams@0.3.0", V::Unknown),
            ("wasi:sockets/tcp@0.2.0", V::Escape(EscapeKind::Network)),
            (
                "wasi:sockets/ip-name-lookup@0.2.0",
                V::Escape(EscapeKind::Network),
            ),
            (
                "wasi:http/outgoing-handler@0.2.0",
                V::Escape(EscapeKind::Network),
            ),
            (
                "wasi:process/spawn@0.1.0",
                V::Escape(EscapeKind::HostProcess),
            ),
            ("wasi:keyvalue/store@0.2.0", V::Unknown),
            ("evil:pkg/iface", V::Unknown),
            ("", V::Unknown),
        ];
        for (name, want) in cases {
            assert_eq!(&classify_import(name, &granted), want, "{name}");
        }
    }

    #[test]
    fn effective_needs_both_request_and_grant() {
        let e = effective(&[Tools, Http], &[Tools, Mcp]);
        assert!(e.contains(&Tools));
        assert!(!e.contains(&Http));
        assert!(!e.contains(&Mcp));
        assert!(e.contains(&Log));
    }
}
