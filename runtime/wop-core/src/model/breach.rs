//! What a `cap.breached` event says was breached: one typed kind per
//! limit, serialized as the protocol's string (`wasm-fuel`, ...). Code
//! that reacts to a breach matches the kind, never its string.

use serde::{Deserialize, Serialize};

/// The `kind` of a `cap.breached` event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BreachKind {
    /// `wasm-fuel`: the invocation's fuel.
    WasmFuel,
    /// `wasm-execution-time`: the invocation's wall clock.
    WasmExecutionTime,
    /// `wasm-memory`: linear memory.
    WasmMemory,
    /// `wasm-table`: table elements.
    WasmTable,
    /// `host-arg-bytes`: the data passed into one host call.
    HostArgBytes,
    /// `random-bytes`: one request for random bytes.
    RandomBytes,
    /// `resource-entries`: the resource table.
    ResourceEntries,
    /// `output-bytes`: the whole outcome.
    OutputBytes,
    /// `host-reentrancy`: host → guest → host nesting.
    HostReentrancy,
    /// `loop-iterations`: the pack's own loop (`maxLoopIterations`).
    LoopIterations,
    /// `run-duration`: the run's wall clock (`runTimeoutMs`).
    RunDuration,
    /// `budget-tool-calls`: the run's tool-call budget.
    BudgetToolCalls,
    /// `budget-fuel`: the run's fuel budget.
    BudgetFuel,
    /// `budget-cost`: the run's cost budget.
    BudgetCost,
    /// `effect-records`: the effectful calls one invocation may record
    /// (`effects.maxRecordsPerInvocation`).
    EffectRecords,
    /// `effect-record-bytes`: the result bytes one invocation's effect
    /// records may hold (`effects.maxRecordBytesPerInvocation`).
    EffectRecordBytes,
    /// `tool-result-bytes`: one tool result (`effects.maxResultBytes`).
    ToolResultBytes,
}

impl BreachKind {
    /// The protocol string, e.g. `wasm-fuel`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::WasmFuel => "wasm-fuel",
            Self::WasmExecutionTime => "wasm-execution-time",
            Self::WasmMemory => "wasm-memory",
            Self::WasmTable => "wasm-table",
            Self::HostArgBytes => "host-arg-bytes",
            Self::RandomBytes => "random-bytes",
            Self::ResourceEntries => "resource-entries",
            Self::OutputBytes => "output-bytes",
            Self::HostReentrancy => "host-reentrancy",
            Self::LoopIterations => "loop-iterations",
            Self::RunDuration => "run-duration",
            Self::BudgetToolCalls => "budget-tool-calls",
            Self::BudgetFuel => "budget-fuel",
            Self::BudgetCost => "budget-cost",
            Self::EffectRecords => "effect-records",
            Self::EffectRecordBytes => "effect-record-bytes",
            Self::ToolResultBytes => "tool-result-bytes",
        }
    }
}

impl std::fmt::Display for BreachKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for BreachKind {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for BreachKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialized_as_the_protocol_string() {
        for k in [
            BreachKind::WasmFuel,
            BreachKind::WasmExecutionTime,
            BreachKind::HostArgBytes,
            BreachKind::BudgetToolCalls,
            BreachKind::BudgetCost,
            BreachKind::RunDuration,
            BreachKind::EffectRecords,
            BreachKind::EffectRecordBytes,
            BreachKind::ToolResultBytes,
        ] {
            let json = serde_json::to_value(k).map_err(|e| e.to_string());
            assert_eq!(json, Ok(serde_json::Value::String(k.as_str().to_owned())));
            let back: Result<BreachKind, _> = serde_json::from_value(serde_json::json!(k.as_str()));
            assert_eq!(back.ok(), Some(k));
        }
        assert!(serde_json::from_str::<BreachKind>("\"no-such-kind\"").is_err());
    }
}
