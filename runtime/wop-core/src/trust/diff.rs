//! What a new version of a pack requests beyond an old one (`wop diff`,
//! and the `pack_capability_escalation` check on load).

use crate::limits::LimitRequest;
use crate::manifest::Manifest;
use serde::Serialize;

/// One thing the new version requests that the old one did not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Addition {
    /// `capability`, `tool`, `egress`, `mcp-server`, `mcp-tool`,
    /// `mcp-resource`, `secret`, `limit`.
    pub kind: &'static str,
    /// What is added (a capability name, tool id, destination, …; for a
    /// limit, `name: old -> new`).
    pub item: String,
}

impl std::fmt::Display for Addition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind, self.item)
    }
}

/// Everything `new` requests beyond `old`, in a stable order. (A manifest
/// cannot request a filesystem: only the operator grants a directory, so
/// an upgrade cannot escalate it.)
pub fn additions(old: &Manifest, new: &Manifest) -> Vec<Addition> {
    let mut out = Vec::new();
    let (o, n) = (&old.wop, &new.wop);
    for c in &n.capabilities {
        if !o.capabilities.contains(c) {
            out.push(add("capability", c.as_str()));
        }
    }
    for (kind, olds, news) in [
        ("tool", &o.tools, &n.tools),
        ("egress", &o.egress, &n.egress),
        ("mcp-server", &o.mcp.servers, &n.mcp.servers),
    ] {
        for x in news {
            if !olds.contains(x) {
                out.push(add(kind, x));
            }
        }
    }
    // An empty tool list asks for every tool of the requested servers.
    let every_tool = |t: &[String]| t.is_empty();
    if !n.mcp.servers.is_empty() || !n.mcp.tools.is_empty() {
        if every_tool(&n.mcp.tools) && !every_tool(&o.mcp.tools) {
            out.push(add("mcp-tool", "* (every tool of the requested servers)"));
        } else if !every_tool(&o.mcp.tools) {
            for t in &n.mcp.tools {
                if !o.mcp.tools.contains(t) {
                    out.push(add("mcp-tool", t));
                }
            }
        }
    }
    for (server, patterns) in &n.mcp.resources {
        let olds = o.mcp.resources.get(server);
        for p in patterns {
            if !olds.is_some_and(|v| v.contains(p)) {
                out.push(add("mcp-resource", &format!("{server}: {p}")));
            }
        }
    }
    // A secret a node newly declares: it would have the host send a
    // credential on its behalf.
    let declared = |m: &Manifest| -> Vec<(String, String)> {
        m.nodes
            .iter()
            .flat_map(|node| {
                node.requires_secrets
                    .iter()
                    .map(|r| (node.type_id.clone(), r.id.clone()))
            })
            .collect()
    };
    let old_secrets = declared(old);
    for (type_id, id) in declared(new) {
        if !old_secrets.contains(&(type_id.clone(), id.clone())) {
            out.push(add("secret", &format!("{type_id}: {id}")));
        }
    }
    limit_additions(&o.limits, &n.limits, &mut out);
    out
}

fn add(kind: &'static str, item: &str) -> Addition {
    Addition {
        kind,
        item: item.to_owned(),
    }
}

/// A limit request grows when it rises, or when it is dropped (no request
/// means the operator's ceiling, the most there is).
fn limit_additions(o: &LimitRequest, n: &LimitRequest, out: &mut Vec<Addition>) {
    for (name, old, new) in [
        ("memoryBytes", o.memory_bytes, n.memory_bytes),
        ("fuel", o.fuel, n.fuel),
        ("wallClockMs", o.wall_clock_ms, n.wall_clock_ms),
        ("outputBytes", o.output_bytes, n.output_bytes),
        (
            "fuelPerInputByte",
            o.fuel_per_input_byte,
            n.fuel_per_input_byte,
        ),
        ("fuelPerItem", o.fuel_per_item, n.fuel_per_item),
    ] {
        let show = |v: Option<u64>| v.map_or_else(|| "ceiling".to_owned(), |v| v.to_string());
        let grows = match (old, new) {
            (Some(a), Some(b)) => b > a,
            (Some(_), None) => true,
            (None, _) => false,
        };
        // Input-scaled fuel: absent means none, so any new value grows.
        let scaled = matches!(name, "fuelPerInputByte" | "fuelPerItem");
        let grows = if scaled {
            new.unwrap_or(0) > old.unwrap_or(0)
        } else {
            grows
        };
        if grows {
            let (a, b) = if scaled {
                (old.unwrap_or(0).to_string(), new.unwrap_or(0).to_string())
            } else {
                (show(old), show(new))
            };
            out.push(Addition {
                kind: "limit",
                item: format!("{name}: {a} -> {b}"),
            });
        }
    }
}
