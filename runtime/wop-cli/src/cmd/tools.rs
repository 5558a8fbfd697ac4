//! `wop tools`: list the tools a principal may see.

use crate::common::{Common, Failure, runtime_without_store};
use clap::Args;
use wop_runtime::Principal;

/// `wop tools` arguments.
#[derive(Args)]
pub(crate) struct ToolsArgs {
    /// Principal id.
    #[arg(long, default_value = "core.system")]
    pub(crate) principal: String,
    /// Principal scopes (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub(crate) scopes: Vec<String>,
    #[arg(long, default_value = "default")]
    pub(crate) tenant: String,
    /// Also list the tools of the policy's MCP servers (`[mcp.servers]`,
    /// source `mcp`); contacts (and for stdio, starts) each server.
    #[arg(long)]
    pub(crate) mcp: bool,
    #[command(flatten)]
    pub(crate) common: Common,
}

pub(crate) async fn tools(a: ToolsArgs) -> Result<u8, Failure> {
    let rt = runtime_without_store(&a.common)?;
    let p = Principal {
        id: a.principal,
        tenant: a.tenant.clone(),
        scopes: a.scopes,
    };
    let mut list = rt.catalog(&p, &a.tenant);
    if a.mcp {
        let gw = wop_runtime::gate::mcp::McpGateway::new(rt.policy().mcp.servers.clone())
            .map_err(|e| Failure::from(anyhow::anyhow!("policy [mcp]: {e}")))?;
        let (tools, failed) = gw.catalog(&p.scopes).await;
        for (id, e) in failed {
            eprintln!("warning: MCP server {id}: {} ({e})", e.code());
        }
        list.extend(tools);
        gw.hub().shutdown().await;
    }
    if a.common.json {
        println!("{}", serde_json::to_string_pretty(&list)?);
    } else if list.is_empty() {
        println!("no tools visible to {} in tenant {}", p.id, a.tenant);
    } else {
        for t in list {
            println!(
                "{:<32} {:<6} {}",
                t.tool_id,
                serde_json::to_value(t.safety_tier)?.as_str().unwrap_or(""),
                t.title.unwrap_or_default()
            );
        }
    }
    Ok(0)
}
