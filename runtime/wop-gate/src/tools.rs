//! Tool providers and the registry (the catalog) of every tool this
//! runtime knows. Who may call what is decided by `wop_core::authz`; the
//! descriptor types are `wop_core::tools`.

use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use wop_core::ratelimit::RateSpec;
pub use wop_core::tools::*;

/// Performs calls of one tool. Embedders implement this for
/// `host-extension` tools; the runtime implements it for operator HTTP
/// tools and node-pack tools.
#[async_trait::async_trait]
pub trait ToolProvider: Send + Sync {
    /// Performs the call. Must respect `call.timeout` and treat
    /// `call.arguments` as hostile.
    async fn call(&self, call: ToolCall) -> Result<Value, ToolFailure>;

    /// Where calls go, `host[:port]`, for `egress.decided` when a
    /// credential is attached (default: unknown, the tool id is shown).
    fn destination(&self) -> Option<String> {
        None
    }
}

/// A tool in the registry.
#[derive(Clone)]
pub struct RegisteredTool {
    /// The descriptor shown in the catalog.
    pub descriptor: ToolDescriptor,
    /// Tenants that may see the tool; `None` = every tenant.
    pub tenants: Option<Vec<String>>,
    /// Rate limit per (principal, tool); `None` = unlimited.
    pub rate: Option<RateSpec>,
    /// Timeout for one call.
    pub timeout: std::time::Duration,
    /// Who performs calls.
    pub provider: Arc<dyn ToolProvider>,
}

impl Catalogued for RegisteredTool {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }
    fn tenants(&self) -> Option<&[String]> {
        self.tenants.as_deref()
    }
}

/// The catalog: every tool this runtime knows, by id.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, RegisteredTool>,
}

impl ToolRegistry {
    /// Adds a tool; fails on an invalid descriptor or a duplicate id.
    pub fn register(&mut self, tool: RegisteredTool) -> Result<(), String> {
        tool.descriptor.validate()?;
        if let Some(r) = &tool.rate {
            r.validate()
                .map_err(|e| format!("tool `{}`: rate limit: {e}", tool.descriptor.tool_id))?;
        }
        let id = tool.descriptor.tool_id.clone();
        if self.tools.contains_key(&id) {
            return Err(format!("tool `{id}` is registered twice"));
        }
        self.tools.insert(id, tool);
        Ok(())
    }

    /// The tool with this id, if any (no authorization applied).
    pub fn get(&self, tool_id: &str) -> Option<&RegisteredTool> {
        self.tools.get(tool_id)
    }

    /// Every tool, sorted by id.
    pub fn all(&self) -> impl Iterator<Item = &RegisteredTool> {
        self.tools.values()
    }
}
