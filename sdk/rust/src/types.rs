//! The node request, its outcome and the pack description.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::bindings::exports::openwop::node_pack::node as wit;
use crate::error::{NodeError, codes};

/// Which node invocation this is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeContext {
    /// The run this invocation belongs to.
    pub run_id: String,
    /// The node (in the workflow) being executed.
    pub node_id: String,
    /// The tenant the run belongs to.
    pub tenant_id: String,
    /// Attempt number, starting at 1 and growing with each retry.
    pub attempt: u32,
    /// The node type invoked (one of the pack's [`NodeInfo::type_id`]s).
    pub type_id: String,
}

/// One node invocation's request.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Which invocation this is.
    pub context: NodeContext,
    /// The node's inputs.
    pub inputs: Value,
    /// The node's static configuration (`{}` if none).
    pub config: Value,
    /// When re-invoked after [`Outcome::Suspended`]: the resume value.
    pub resume: Option<Value>,
}

impl Request {
    /// Deserialize [`Request::inputs`] into `T`; a mismatch becomes a
    /// `validation_error`.
    pub fn inputs_as<T: DeserializeOwned>(&self) -> Result<T, NodeError> {
        T::deserialize(&self.inputs)
            .map_err(|e| NodeError::validation(format!("invalid inputs: {e}")))
    }

    /// Deserialize [`Request::config`] into `T`; a mismatch becomes a
    /// `validation_error`.
    pub fn config_as<T: DeserializeOwned>(&self) -> Result<T, NodeError> {
        T::deserialize(&self.config)
            .map_err(|e| NodeError::validation(format!("invalid config: {e}")))
    }

    /// Deserialize [`Request::resume`] into `T` (`None` when this is not a
    /// resumption); a mismatch becomes a `validation_error`.
    pub fn resume_as<T: DeserializeOwned>(&self) -> Result<Option<T>, NodeError> {
        self.resume
            .as_ref()
            .map(|r| {
                T::deserialize(r)
                    .map_err(|e| NodeError::validation(format!("invalid resume value: {e}")))
            })
            .transpose()
    }

    pub(crate) fn from_wit(request: wit::Request) -> Result<Self, NodeError> {
        let parse = |what: &str, json: &str| {
            serde_json::from_str::<Value>(json)
                .map_err(|e| NodeError::validation(format!("{what} is not valid JSON: {e}")))
        };
        let c = request.context;
        Ok(Self {
            context: NodeContext {
                run_id: c.run_id,
                node_id: c.node_id,
                tenant_id: c.tenant_id,
                attempt: c.attempt,
                type_id: c.type_id,
            },
            inputs: parse("inputs", &request.inputs)?,
            config: parse("config", &request.config)?,
            resume: request
                .resume
                .as_deref()
                .map(|r| parse("resume", r))
                .transpose()?,
        })
    }
}

/// How an invocation ended, when it did not fail.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The node finished with this output.
    Completed(Value),
    /// The node waits for outside input; the value describes the interrupt.
    /// The runtime re-invokes the node with [`Request::resume`] set.
    Suspended(Value),
}

impl Outcome {
    /// A completed outcome with `output` serialized to JSON.
    ///
    /// Returns a `Result` so it can end an `invoke` body directly; it fails
    /// (with `internal_error`) only if `output`'s `Serialize` impl fails.
    pub fn completed(output: impl Serialize) -> Result<Self, NodeError> {
        to_value(output).map(Self::Completed)
    }

    /// A suspended outcome with `interrupt` serialized to JSON; see
    /// [`Outcome::completed`] for the `Result`.
    pub fn suspended(interrupt: impl Serialize) -> Result<Self, NodeError> {
        to_value(interrupt).map(Self::Suspended)
    }

    pub(crate) fn into_wit(self) -> wit::Outcome {
        match self {
            Self::Completed(v) => wit::Outcome::Completed(v.to_string()),
            Self::Suspended(v) => wit::Outcome::Suspended(v.to_string()),
        }
    }
}

fn to_value(value: impl Serialize) -> Result<Value, NodeError> {
    serde_json::to_value(value).map_err(|e| {
        NodeError::new(
            codes::INTERNAL_ERROR,
            format!("output is not serializable as JSON: {e}"),
        )
    })
}

/// One node type a pack implements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// The node's `typeId`, e.g. `acme.greeter`.
    pub type_id: String,
    /// The node type's version.
    pub version: String,
}

/// A pack's self-description, checked by the runtime against `pack.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackInfo {
    /// The pack's name.
    pub name: String,
    /// The pack's version.
    pub version: String,
    /// The node types it implements.
    pub nodes: Vec<NodeInfo>,
}

impl PackInfo {
    /// A pack description with no node types yet.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
            nodes: Vec::new(),
        }
    }

    /// Add a node type.
    #[must_use]
    pub fn node(mut self, type_id: impl Into<String>, version: impl Into<String>) -> Self {
        self.nodes.push(NodeInfo {
            type_id: type_id.into(),
            version: version.into(),
        });
        self
    }

    pub(crate) fn into_wit(self) -> wit::PackInfo {
        wit::PackInfo {
            name: self.name,
            version: self.version,
            nodes: self
                .nodes
                .into_iter()
                .map(|n| wit::NodeInfo {
                    type_id: n.type_id,
                    version: n.version,
                })
                .collect(),
        }
    }
}
