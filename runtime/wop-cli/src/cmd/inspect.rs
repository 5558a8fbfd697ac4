//! `wop inspect`: a pack's nodes, imports, requested vs granted capabilities and limits.

use crate::cmd::probe;
use crate::common::{Common, Failure, exit, rejected, runtime_without_store};
use crate::output;
use clap::Args;
use std::path::PathBuf;

/// `wop inspect` arguments.
#[derive(Args)]
pub(crate) struct InspectArgs {
    /// The pack directory, or a bare ABI v1 `.wasm`.
    pub(crate) pack_dir: PathBuf,
    #[command(flatten)]
    pub(crate) common: Common,
}

pub(crate) async fn inspect(a: InspectArgs) -> Result<u8, Failure> {
    let rt = runtime_without_store(&a.common)?;
    let input = crate::archive_input::open(&a.pack_dir, a.common.json)?;
    let insp = match crate::progress::compiling(&a.pack_dir, rt.inspect_pack(input.dir())).await {
        Ok(i) => i,
        Err(e) => return Err(rejected(&a.pack_dir, &e, a.common.json)),
    };
    let note = probe::bare_note(&a.pack_dir);
    let mcp = mcp_view(&insp, rt.policy());
    let trust = crate::cmd::trust::verdict_line(input.dir(), rt.policy());
    let secrets = crate::cmd::secrets_view::view(&insp, rt.policy());
    let services = crate::cmd::services_view::view(&insp, rt.policy());
    if a.common.json {
        let mut v = serde_json::to_value(&insp)?;
        if let Some(o) = v.as_object_mut() {
            o.insert("mcp".to_owned(), mcp);
            o.insert("secrets".to_owned(), secrets);
            o.insert("services".to_owned(), services);
            o.insert("trust".to_owned(), serde_json::Value::String(trust.clone()));
        }
        if let (Some(n), Some(o)) = (note, v.as_object_mut()) {
            o.insert(
                "integrity".to_owned(),
                serde_json::Value::String(n.to_owned()),
            );
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        output::print_inspection(&insp);
        print_mcp(&mcp);
        crate::cmd::secrets_view::print(&secrets);
        crate::cmd::services_view::print(&services, &insp.manifest.name);
        println!("trust: {trust}");
        if let Some(n) = note {
            println!("note: {n}");
        }
    }
    Ok(if insp.refusal.is_some() {
        exit::PACK_REJECTED
    } else {
        0
    })
}

/// MCP servers and tools: requested by the manifest (`x-wop.mcp`) vs
/// granted by the operator (`[packs.<name>] mcp`), per requested server.
fn mcp_view(insp: &wop_runtime::Inspection, policy: &wop_runtime::Policy) -> serde_json::Value {
    let req = &insp.manifest.wop.mcp;
    let granted = policy.grant(&insp.manifest.name).mcp;
    let configured = &policy.mcp.servers;
    let servers: Vec<serde_json::Value> = req
        .servers
        .iter()
        .map(|id| {
            let grants: Vec<&String> = granted
                .iter()
                .filter(|g| g.split('/').next() == Some(id.as_str()))
                .collect();
            let tools: Vec<&String> = req
                .tools
                .iter()
                .filter(|t| t.split('/').next() == Some(id.as_str()))
                .collect();
            let cfg = configured.get(id);
            let state = match (grants.is_empty(), cfg) {
                (true, _) => "not granted",
                (false, None) => "not configured",
                (false, Some(_)) => "usable",
            };
            serde_json::json!({
                "serverId": id,
                "transport": cfg.map(|c| c.transport.as_str()),
                "toolsRequested": if tools.is_empty() { serde_json::json!("*") } else { serde_json::json!(tools) },
                "granted": grants,
                "tiers": cfg.map(|c| &c.tiers),
                "state": state,
            })
        })
        .collect();
    serde_json::json!({"servers": servers, "grantedNotRequested": granted
        .iter()
        .filter(|g| !req.servers.iter().any(|s| g.split('/').next() == Some(s.as_str())))
        .collect::<Vec<_>>()})
}

fn print_mcp(v: &serde_json::Value) {
    let servers = v["servers"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    if servers.is_empty() {
        println!("mcp: no servers requested");
        return;
    }
    println!("mcp (requested vs granted)");
    for s in servers {
        let list = |k: &str| match &s[k] {
            serde_json::Value::Array(a) if a.is_empty() => "-".to_owned(),
            serde_json::Value::Array(a) => a
                .iter()
                .filter_map(|x| x.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            other => other.as_str().unwrap_or("-").to_owned(),
        };
        println!(
            "  {:<16} {:<15} transport={} tools requested={} granted={}",
            s["serverId"].as_str().unwrap_or(""),
            s["state"].as_str().unwrap_or(""),
            s["transport"].as_str().unwrap_or("-"),
            list("toolsRequested"),
            list("granted"),
        );
    }
}
