//! How an invocation ended and everything it produced: the [`Outcome`] of
//! a node that did not fail, and the [`InvocationReport`] with its events
//! and usage.

use super::events::Event;
use super::usage::Usage;
use crate::error::NodeError;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How a node finished when it did not fail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "lowercase")]
pub enum Outcome {
    /// Finished with an output.
    Completed {
        /// The node's output.
        output: Value,
    },
    /// Waiting for outside input.
    Suspended {
        /// What the node waits for.
        interrupt: Value,
    },
}

/// Everything an invocation produced.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InvocationReport {
    /// The outcome, or why the node failed.
    #[serde(serialize_with = "ser_outcome")]
    pub outcome: Result<Outcome, NodeError>,
    /// Events in order (`log.appended`, `cap.breached`, ...).
    pub events: Vec<Event>,
    /// What it consumed.
    pub usage: Usage,
}

/// The fields an invocation's outcome gives an object: `outcome` and then
/// `output`, `interrupt` or `error`, exactly as in [`InvocationReport`].
/// For responses that flatten them beside fields of their own
/// (`#[serde(flatten)]`) instead of nesting the report.
#[derive(Debug, Clone, Copy)]
pub struct OutcomeFields<'a>(pub &'a Result<Outcome, NodeError>);

impl Serialize for OutcomeFields<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ser_outcome(self.0, s)
    }
}

fn ser_outcome<S: serde::Serializer>(
    o: &Result<Outcome, NodeError>,
    s: S,
) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    #[serde(tag = "outcome", rename_all = "lowercase")]
    enum Failed<'a> {
        Failed { error: &'a NodeError },
    }
    match o {
        Ok(ok) => ok.serialize(s),
        Err(error) => Failed::Failed { error }.serialize(s),
    }
}
