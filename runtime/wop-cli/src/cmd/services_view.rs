//! `wop inspect`'s host-services section, for a JavaScript pack: the
//! services of the protocol's `ctx` its code names (`callAI`,
//! `db.sql.query`, …) against the tools the operator mapped them to
//! (`[packs."<name>"] services`). An unmapped service is absent from the
//! pack's `ctx`, as on a reference host without it.

use serde_json::{Value, json};
use wop_runtime::{Inspection, Policy};

/// One row per named service: `{name, tool}` (`tool` null when unmapped).
pub(crate) fn view(insp: &Inspection, policy: &Policy) -> Value {
    let mapped = policy.grant(&insp.manifest.name).services;
    Value::Array(
        insp.services
            .iter()
            .map(|s| json!({"name": s, "tool": mapped.get(s)}))
            .collect(),
    )
}

/// The human form: nothing for a pack whose code names no service.
pub(crate) fn print(v: &Value, pack: &str) {
    let rows = v.as_array().map(Vec::as_slice).unwrap_or(&[]);
    if rows.is_empty() {
        return;
    }
    println!("host services (named by the code; each runs as the tool the operator maps it to)");
    let mut unmapped = Vec::new();
    for r in rows {
        let name = r["name"].as_str().unwrap_or("");
        match r["tool"].as_str() {
            Some(t) => println!("  {name:<28} -> {t}"),
            None => {
                println!("  {name:<28}    not mapped: absent from ctx");
                unmapped.push(format!("\"{name}\" = \"<tool id>\""));
            }
        }
    }
    if !unmapped.is_empty() {
        println!(
            "  to map them: under [packs.\"{pack}\"] in the policy, services = {{ {} }} (and capabilities = [\"tools\"])",
            unmapped.join(", ")
        );
    }
}
