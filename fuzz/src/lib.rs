//! Shared helpers of the wop fuzz targets.

use std::collections::BTreeSet;
use wop_core::capability::Capability;

/// Every capability.
pub const ALL_CAPS: [Capability; 9] = [
    Capability::Log,
    Capability::Clock,
    Capability::Random,
    Capability::Tools,
    Capability::Http,
    Capability::Mcp,
    Capability::Variables,
    Capability::Channels,
    Capability::Interrupt,
];

/// The capabilities whose bit is set in `mask`.
pub fn caps(mask: u16) -> BTreeSet<Capability> {
    ALL_CAPS
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, c)| *c)
        .collect()
}

/// A policy granting `name` everything, with egress and MCP grants (the
/// policy side of targets that fuzz the pack side).
pub const GENEROUS_POLICY: &str = r#"
[limits]
fuel = 1000000
outputBytes = 65536

[egress]
allowLoopback = false

[packs."fuzz.pack"]
capabilities = ["tools", "http", "mcp", "variables", "channels", "interrupt"]
egress = ["api.example.com", "*.example.org:*", "http://plain.example.net:8080", "[2001:db8::1]:443"]
tools = ["crm:*", "http:api.example.com"]
"#;
