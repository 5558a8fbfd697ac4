//! One classification of sandbox failures into the protocol's vocabulary,
//! shared by every pack kind (components and ABI v1 core modules). Pure:
//! the wasmtime adapter turns a trap into a [`Fault`] first.

use crate::budget::Dimension;
use crate::error::{ErrorCode, NodeError};
use crate::model::breach::BreachKind;
use crate::model::events::Event;
use serde_json::Value;

/// What stopped an invocation, as observed by the host.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// The fuel budget ran out.
    Fuel {
        /// Fuel granted.
        limit: u64,
        /// Fuel consumed (equals `limit`).
        consumed: u64,
    },
    /// The wall clock ran out.
    WallClock {
        /// The limit in milliseconds.
        limit_ms: u64,
        /// Elapsed milliseconds when the invocation was stopped.
        elapsed_ms: u64,
    },
    /// Linear memory growth past the cap (total over all memories).
    Memory {
        /// The cap in bytes.
        limit: u64,
        /// The size the pack tried to reach.
        observed: u64,
    },
    /// Table growth past the cap.
    Table {
        /// The cap in elements.
        limit: u64,
        /// The size the pack tried to reach.
        observed: u64,
    },
    /// A host-side cap (a log line, an argument, resource entries, output).
    HostCap {
        /// The `cap.breached` kind, e.g. `output-bytes`.
        kind: BreachKind,
        /// The cap.
        limit: u64,
        /// What the pack tried.
        observed: u64,
    },
    /// A call to a host capability that was not granted (fails closed).
    CapabilityDenied {
        /// The capability, e.g. `tools` or `openwop_variable_get`.
        capability: String,
    },
    /// A host call re-entered the guest, which called back into the host
    /// deeper than the ABI needs (e.g. `openwop_alloc` calling an import
    /// that calls `openwop_alloc` again). Bounded per invocation so one
    /// pack cannot take every fiber stack of the process.
    Reentrancy {
        /// The deepest nesting allowed.
        limit: u64,
        /// The nesting the pack attempted.
        observed: u64,
    },
    /// The pack's own loop ran too many rounds of host tool calls.
    LoopLimit {
        /// `maxLoopIterations`.
        limit: u64,
        /// The round that was refused.
        observed: u64,
    },
    /// The run's wall clock (`runTimeoutMs`) ran out.
    RunTimeout {
        /// `runTimeoutMs`.
        limit_ms: u64,
        /// Elapsed run time when stopped.
        elapsed_ms: u64,
    },
    /// A run budget dimension ran out during the invocation.
    Budget {
        /// The budget dimension (`details.dimension`; `cap.breached` kind
        /// `budget-<dimension>`).
        dimension: Dimension,
        /// What was left of the budget.
        limit: u64,
        /// What was consumed.
        observed: u64,
    },
    /// An out-of-bounds memory access.
    OutOfBounds,
    /// The guest exhausted its stack.
    StackOverflow,
    /// Any other trap (`unreachable` from a guest panic, bad canonical ABI
    /// data, integer faults, ...).
    Trap {
        /// A short stable name of the trap kind.
        kind: String,
        /// The trap's message.
        message: String,
    },
}

/// A classified failure: the node error and, when a limit was hit, the
/// `cap.breached` event.
#[derive(Debug, Clone, PartialEq)]
pub struct Classified {
    /// The error the node fails with.
    pub error: NodeError,
    /// The `cap.breached` event, if a limit was breached.
    pub breach: Option<Event>,
}

fn breach(kind: BreachKind, limit: u64, observed: u64, node_id: &str) -> Option<Event> {
    Some(Event::CapBreached {
        kind,
        limit,
        observed,
        node_id: node_id.to_owned(),
    })
}

/// Classifies a fault for the node `node_id`.
pub fn classify(fault: &Fault, node_id: &str) -> Classified {
    use ErrorCode::*;
    let (code, message, details, brk) = match fault {
        Fault::Fuel { limit, consumed } => (
            SandboxTimeout,
            format!(
                "the pack used its whole fuel budget ({limit} units) and was stopped; raise limits.fuel if this work is legitimate"
            ),
            crate::details! {"cause" => "fuel", "limit" => limit, "observed" => consumed},
            breach(BreachKind::WasmFuel, *limit, *consumed, node_id),
        ),
        Fault::WallClock {
            limit_ms,
            elapsed_ms,
        } => (
            SandboxTimeout,
            format!("the pack ran past its wall-clock limit of {limit_ms} ms and was stopped"),
            crate::details! {"cause" => "wall-clock", "limitMs" => limit_ms, "elapsedMs" => elapsed_ms},
            breach(
                BreachKind::WasmExecutionTime,
                *limit_ms,
                *elapsed_ms,
                node_id,
            ),
        ),
        Fault::Memory { limit, observed } => (
            SandboxMemoryExceeded,
            format!(
                "the pack tried to grow its memory to {observed} bytes, past the cap of {limit} bytes"
            ),
            crate::details! {"cause" => "memory-growth", "limit" => limit, "observed" => observed},
            breach(BreachKind::WasmMemory, *limit, *observed, node_id),
        ),
        Fault::Table { limit, observed } => (
            SandboxMemoryExceeded,
            format!(
                "the pack tried to grow a table to {observed} elements, past the cap of {limit}"
            ),
            crate::details! {"cause" => "table-growth", "limit" => limit, "observed" => observed},
            breach(BreachKind::WasmTable, *limit, *observed, node_id),
        ),
        Fault::HostCap {
            kind,
            limit,
            observed,
        } => (
            SandboxInvocationError,
            format!("the pack exceeded a host-side cap: {kind} {observed} > {limit}"),
            crate::details! {"cause" => kind.as_str(), "limit" => limit, "observed" => observed},
            breach(*kind, *limit, *observed, node_id),
        ),
        Fault::Reentrancy { limit, observed } => (
            SandboxInvocationError,
            format!(
                "the pack re-entered the host {observed} levels deep through a guest callback; the limit is {limit}"
            ),
            crate::details! {"cause" => "host-reentrancy", "limit" => limit, "observed" => observed},
            breach(BreachKind::HostReentrancy, *limit, *observed, node_id),
        ),
        Fault::LoopLimit { limit, observed } => (
            LoopLimitExceeded,
            format!(
                "the pack's own loop made {observed} rounds of host tool calls; the limit is {limit} (maxLoopIterations)"
            ),
            crate::details! {"limit" => limit, "observed" => observed},
            breach(BreachKind::LoopIterations, *limit, *observed, node_id),
        ),
        Fault::RunTimeout {
            limit_ms,
            elapsed_ms,
        } => (
            RunTimeout,
            format!("the run ran past its {limit_ms} ms limit (runTimeoutMs)"),
            crate::details! {"limitMs" => limit_ms, "elapsedMs" => elapsed_ms},
            breach(BreachKind::RunDuration, *limit_ms, *elapsed_ms, node_id),
        ),
        Fault::Budget {
            dimension,
            limit,
            observed,
        } => (
            BudgetExhausted,
            format!("the run's {} budget is exhausted", dimension.as_str()),
            crate::details! {"dimension" => dimension.as_str(), "limit" => limit, "observed" => observed},
            breach(dimension.breach_kind(), *limit, *observed, node_id),
        ),
        Fault::CapabilityDenied { capability } => (
            SandboxCapabilityDenied,
            format!("the pack called host capability `{capability}`, which was not granted"),
            crate::details! {"requestedCapability" => capability},
            None,
        ),
        Fault::OutOfBounds => (
            SandboxMemoryExceeded,
            "the pack accessed memory out of bounds".to_owned(),
            crate::details! {"cause" => "out-of-bounds", "trapKind" => "memory-out-of-bounds"},
            None,
        ),
        Fault::StackOverflow => (
            SandboxInvocationError,
            "the pack exhausted its call stack".to_owned(),
            crate::details! {"trapKind" => "stack-overflow"},
            None,
        ),
        Fault::Trap { kind, message } => (
            SandboxInvocationError,
            format!("the pack trapped: {message}"),
            crate::details! {"trapKind" => kind},
            None,
        ),
    };
    Classified {
        error: NodeError::runtime(code, message, details),
        breach: brk,
    }
}

/// The `details` of a classified error as JSON (for reports).
pub fn details_json(c: &Classified) -> Value {
    c.error.details.clone().unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        let cases = [
            (
                Fault::Fuel {
                    limit: 10,
                    consumed: 10,
                },
                "sandbox_timeout",
                Some("wasm-fuel"),
            ),
            (
                Fault::WallClock {
                    limit_ms: 5,
                    elapsed_ms: 6,
                },
                "sandbox_timeout",
                Some("wasm-execution-time"),
            ),
            (
                Fault::Memory {
                    limit: 1,
                    observed: 2,
                },
                "sandbox_memory_exceeded",
                Some("wasm-memory"),
            ),
            (
                Fault::Table {
                    limit: 1,
                    observed: 2,
                },
                "sandbox_memory_exceeded",
                Some("wasm-table"),
            ),
            (
                Fault::HostCap {
                    kind: BreachKind::OutputBytes,
                    limit: 1,
                    observed: 2,
                },
                "sandbox_invocation_error",
                Some("output-bytes"),
            ),
            (Fault::OutOfBounds, "sandbox_memory_exceeded", None),
            (
                Fault::Reentrancy {
                    limit: 1,
                    observed: 2,
                },
                "sandbox_invocation_error",
                Some("host-reentrancy"),
            ),
            (
                Fault::LoopLimit {
                    limit: 2,
                    observed: 3,
                },
                "loop_limit_exceeded",
                Some("loop-iterations"),
            ),
            (
                Fault::RunTimeout {
                    limit_ms: 2,
                    elapsed_ms: 3,
                },
                "run_timeout",
                Some("run-duration"),
            ),
            (
                Fault::Budget {
                    dimension: crate::budget::Dimension::Fuel,
                    limit: 2,
                    observed: 2,
                },
                "budget_exhausted",
                Some("budget-fuel"),
            ),
            (
                Fault::CapabilityDenied {
                    capability: "tools".into(),
                },
                "sandbox_capability_denied",
                None,
            ),
            (Fault::StackOverflow, "sandbox_invocation_error", None),
            (
                Fault::Trap {
                    kind: "unreachable".into(),
                    message: "x".into(),
                },
                "sandbox_invocation_error",
                None,
            ),
        ];
        for (fault, code, kind) in cases {
            let c = classify(&fault, "n1");
            assert_eq!(c.error.code, code, "{fault:?}");
            assert_eq!(c.error.source, crate::error::FailureSource::Runtime);
            match (&c.breach, kind) {
                (
                    Some(Event::CapBreached {
                        kind: k, node_id, ..
                    }),
                    Some(want),
                ) => {
                    assert_eq!(k, want);
                    assert_eq!(node_id, "n1");
                }
                (None, None) => {}
                other => panic!("{fault:?}: {other:?}"),
            }
        }
        let c = classify(
            &Fault::Fuel {
                limit: 10,
                consumed: 10,
            },
            "n",
        );
        assert_eq!(c.error.detail("cause"), Some(&serde_json::json!("fuel")));
        let c = classify(
            &Fault::WallClock {
                limit_ms: 1,
                elapsed_ms: 1,
            },
            "n",
        );
        assert_eq!(
            c.error.detail("cause"),
            Some(&serde_json::json!("wall-clock"))
        );
    }
}
