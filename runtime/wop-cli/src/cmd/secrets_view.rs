//! `wop inspect`'s secrets section: what each node declares
//! (`requiresSecrets`) against what the operator provides and grants
//! (`[secrets.<id>]`, `[packs.<name>] secrets`). Never a value: only where
//! each credential may go and how it is attached.

use serde_json::{Value, json};
use wop_runtime::{Inspection, Policy};

/// One row per (node, declared secret).
pub(crate) fn view(insp: &Inspection, policy: &Policy) -> Value {
    let granted = policy.grant(&insp.manifest.name).secrets;
    let rows: Vec<Value> = insp
        .manifest
        .nodes
        .iter()
        .flat_map(|n| n.requires_secrets.iter().map(move |r| (n, r)))
        .map(|(n, r)| {
            let spec = policy.secrets.get(&r.id);
            let state = match (granted.contains(&r.id), spec) {
                (false, _) => "not granted",
                (true, None) => "not configured",
                (true, Some(_)) => "provided",
            };
            json!({
                "typeId": n.type_id,
                "id": r.id,
                "kind": r.kind,
                "provider": r.provider,
                "scope": r.scope,
                "state": state,
                "attach": spec.map(|s| s.attach.clone().unwrap_or_else(|| "bearer".to_owned())),
                "audiences": spec.map(|s| &s.audiences),
                "tools": spec.map(|s| &s.tools),
                "mcpServers": spec.map(|s| &s.mcp_servers),
                "tenantValues": spec.map(|s| s.tenants.keys().collect::<Vec<_>>()),
            })
        })
        .collect();
    Value::Array(rows)
}

/// The human form.
pub(crate) fn print(v: &Value) {
    let rows = v.as_array().map(Vec::as_slice).unwrap_or(&[]);
    if rows.is_empty() {
        println!("secrets: none declared");
        return;
    }
    println!("secrets (declared by nodes vs provided by the operator; values never shown)");
    let list = |x: &Value| match x.as_array() {
        Some(a) if !a.is_empty() => a
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(", "),
        _ => "-".to_owned(),
    };
    for r in rows {
        println!(
            "  {:<24} {:<16} {:<15} attach={} audiences={} tools={} mcp={}{}",
            r["typeId"].as_str().unwrap_or(""),
            r["id"].as_str().unwrap_or(""),
            r["state"].as_str().unwrap_or(""),
            r["attach"].as_str().unwrap_or("-"),
            list(&r["audiences"]),
            list(&r["tools"]),
            list(&r["mcpServers"]),
            match r["scope"].as_str() {
                Some(s) => format!(" scope={s} (values for: {})", list(&r["tenantValues"])),
                None => String::new(),
            }
        );
    }
}
