//! Admission: whether one invocation may start, and with which limits.
//!
//! One pure function ([`admit`]) over the run's ledger, its bounds, the
//! pack's limits and limit request, the inputs and the time: it refuses a
//! run whose budget or clock is spent, scales fuel with the input, clamps
//! fuel to the budget's remainder and the wall clock to the run's, and
//! says which run-level limit now binds ([`Binding`]) so that a stop is
//! reported as what actually caused it. Shared by every pack kind.

use crate::budget::{Dimension, Ledger, RunBounds};
use crate::limits::{LimitRequest, Limits};
use crate::run::classify::Fault;
use serde_json::Value;

/// Which run-level limit binds the invocation's fuel and wall clock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Binding {
    /// Fuel granted is the run budget's remaining fuel (not the ceiling).
    pub fuel_budget: Option<u64>,
    /// The deadline is the run's remaining time: (runTimeoutMs, elapsed before start).
    pub run_timeout: Option<(u64, u64)>,
}

impl Binding {
    /// Re-reads a fuel or wall-clock stop as the run-level limit that
    /// actually bound it (budget fuel, run timeout).
    pub fn apply(&self, fault: Fault) -> Fault {
        match (fault, self.fuel_budget, self.run_timeout) {
            (Fault::Fuel { consumed, .. }, Some(left), _) => Fault::Budget {
                dimension: Dimension::Fuel,
                limit: left,
                observed: consumed,
            },
            (Fault::WallClock { elapsed_ms, .. }, _, Some((limit_ms, before_ms))) => {
                Fault::RunTimeout {
                    limit_ms,
                    elapsed_ms: before_ms.saturating_add(elapsed_ms),
                }
            }
            (f, _, _) => f,
        }
    }
}

/// Everything admission looks at.
#[derive(Debug, Clone, Copy)]
pub struct AdmissionInput<'a> {
    /// The run's ledger (budget fixed at its first invocation, consumption).
    pub ledger: &'a Ledger,
    /// The run's bounds.
    pub bounds: &'a RunBounds,
    /// The pack's effective limits (ceilings ∩ manifest request).
    pub limits: Limits,
    /// The pack's limit request (for input-scaled fuel).
    pub request: &'a LimitRequest,
    /// The operator's fuel ceiling (scaled fuel is clamped to it).
    pub fuel_ceiling: u64,
    /// The node's inputs.
    pub inputs: &'a Value,
    /// Now, in milliseconds since the epoch.
    pub now_ms: u64,
}

/// An admitted invocation: its limits and what binds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admitted {
    /// The limits this invocation runs under.
    pub limits: Limits,
    /// Which run-level limit binds fuel and wall clock.
    pub binding: Binding,
}

/// Admits one invocation, or says which run-level limit refuses it.
pub fn admit(a: AdmissionInput<'_>) -> Result<Admitted, Fault> {
    let ledger = a.ledger;
    if let Some(d) = ledger.exhausted {
        return Err(Fault::Budget {
            dimension: d,
            limit: ledger.limit_of(d).unwrap_or(0.0).ceil() as u64,
            observed: ledger.used_of(d).ceil() as u64,
        });
    }
    let mut limits = a.limits;
    if let Some(f) = a.request.scaled_fuel(a.fuel_ceiling, a.inputs) {
        limits.fuel = f;
    }
    let mut binding = Binding::default();
    if let Some(left) = ledger.fuel_left() {
        if left == 0 {
            return Err(Fault::Budget {
                dimension: Dimension::Fuel,
                limit: ledger.budget.max_fuel.unwrap_or(0),
                observed: ledger.consumed.fuel,
            });
        }
        if left < limits.fuel {
            limits.fuel = left;
            binding.fuel_budget = Some(left);
        }
    }
    if let Some(run_ms) = a.bounds.run_timeout_ms {
        let elapsed = a.now_ms.saturating_sub(ledger.started_at_ms);
        let left = run_ms.saturating_sub(elapsed);
        if left == 0 {
            return Err(Fault::RunTimeout {
                limit_ms: run_ms,
                elapsed_ms: elapsed,
            });
        }
        if left < limits.wall_clock_ms {
            limits.wall_clock_ms = left;
            binding.run_timeout = Some((run_ms, elapsed));
        }
    }
    Ok(Admitted { limits, binding })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;
    use crate::model::RunBudget;
    use serde_json::json;

    fn ledger(max_fuel: Option<u64>, used_fuel: u64, started: u64) -> Ledger {
        let mut l = Ledger::new(
            "r",
            RunBudget {
                max_fuel,
                ..Default::default()
            },
        );
        l.started_at_ms = started;
        l.consumed.fuel = used_fuel;
        l
    }

    fn input<'a>(
        l: &'a Ledger,
        b: &'a RunBounds,
        r: &'a LimitRequest,
        inputs: &'a Value,
        now: u64,
    ) -> AdmissionInput<'a> {
        AdmissionInput {
            ledger: l,
            bounds: b,
            limits: Limits {
                fuel: 1_000,
                wall_clock_ms: 500,
                ..Limits::default()
            },
            request: r,
            fuel_ceiling: 10_000,
            inputs,
            now_ms: now,
        }
    }

    #[test]
    fn admission_table() {
        let none = RunBounds::default();
        let timed = RunBounds {
            run_timeout_ms: Some(1_000),
            ..Default::default()
        };
        let plain = LimitRequest::default();
        let scaled = LimitRequest {
            fuel: Some(100),
            fuel_per_item: Some(10),
            items_pointer: Some("/items".into()),
            ..Default::default()
        };
        let inputs = json!({"items": [1, 2, 3]});
        let huge = json!({"items": vec![0; 5000]});
        // (ledger, bounds, request, inputs, now) → (fuel, wall, binding) or the fault's kind
        type Want = Result<(u64, u64, Binding), &'static str>;
        let cases: Vec<(Ledger, &RunBounds, &LimitRequest, &Value, u64, Want)> = vec![
            // No budget, no bounds: the pack's limits.
            (
                ledger(None, 0, 0),
                &none,
                &plain,
                &inputs,
                0,
                Ok((1_000, 500, Binding::default())),
            ),
            // Input-scaled fuel: 100 + 3 × 10.
            (
                ledger(None, 0, 0),
                &none,
                &scaled,
                &inputs,
                0,
                Ok((130, 500, Binding::default())),
            ),
            // ... clamped to the operator's ceiling.
            (
                ledger(None, 0, 0),
                &none,
                &scaled,
                &huge,
                0,
                Ok((10_000, 500, Binding::default())),
            ),
            // A fuel budget with more left than the limit does not bind.
            (
                ledger(Some(5_000), 1_000, 0),
                &none,
                &plain,
                &inputs,
                0,
                Ok((1_000, 500, Binding::default())),
            ),
            // ... with less left, it binds.
            (
                ledger(Some(5_000), 4_900, 0),
                &none,
                &plain,
                &inputs,
                0,
                Ok((
                    100,
                    500,
                    Binding {
                        fuel_budget: Some(100),
                        run_timeout: None,
                    },
                )),
            ),
            // Spent fuel budget: refused.
            (
                ledger(Some(5_000), 5_000, 0),
                &none,
                &plain,
                &inputs,
                0,
                Err("budget-fuel"),
            ),
            // The run clock with time to spare does not bind.
            (
                ledger(None, 0, 1_000),
                &timed,
                &plain,
                &inputs,
                1_100,
                Ok((1_000, 500, Binding::default())),
            ),
            // ... with less than the wall clock left, it binds.
            (
                ledger(None, 0, 1_000),
                &timed,
                &plain,
                &inputs,
                1_800,
                Ok((
                    1_000,
                    200,
                    Binding {
                        fuel_budget: None,
                        run_timeout: Some((1_000, 800)),
                    },
                )),
            ),
            // Run time spent: refused.
            (
                ledger(None, 0, 1_000),
                &timed,
                &plain,
                &inputs,
                2_000,
                Err("run-duration"),
            ),
        ];
        for (i, (l, b, r, inp, now, want)) in cases.into_iter().enumerate() {
            let got = admit(input(&l, b, r, inp, now));
            match (got, want) {
                (Ok(a), Ok((fuel, wall, binding))) => {
                    assert_eq!(
                        (a.limits.fuel, a.limits.wall_clock_ms, a.binding),
                        (fuel, wall, binding),
                        "case {i}"
                    );
                }
                (Err(f), Err(kind)) => {
                    let c = crate::run::classify::classify(&f, "n");
                    assert!(
                        matches!(&c.breach, Some(crate::model::events::Event::CapBreached { kind: k, .. }) if k == kind),
                        "case {i}: {c:?}"
                    );
                }
                (got, want) => panic!("case {i}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn an_exhausted_ledger_refuses_whatever_the_dimension() {
        let mut l = ledger(None, 0, 0);
        l.budget.max_tool_calls = Some(3);
        l.consumed.tool_calls = 3;
        l.exhausted = Some(Dimension::ToolCalls);
        let b = RunBounds::default();
        let r = LimitRequest::default();
        let f = admit(input(&l, &b, &r, &json!({}), 0)).unwrap_err();
        assert_eq!(
            f,
            Fault::Budget {
                dimension: Dimension::ToolCalls,
                limit: 3,
                observed: 3
            }
        );
    }

    #[test]
    fn binding_rereads_stops() {
        let b = Binding {
            fuel_budget: Some(7),
            run_timeout: Some((1_000, 900)),
        };
        assert!(matches!(
            b.apply(Fault::Fuel {
                limit: 7,
                consumed: 7
            }),
            Fault::Budget { limit: 7, .. }
        ));
        assert_eq!(
            b.apply(Fault::WallClock {
                limit_ms: 100,
                elapsed_ms: 101
            }),
            Fault::RunTimeout {
                limit_ms: 1_000,
                elapsed_ms: 1_001
            }
        );
        assert_eq!(
            Binding::default().apply(Fault::OutOfBounds),
            Fault::OutOfBounds
        );
    }
}
