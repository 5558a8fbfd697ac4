//! What a client sends to invoke a node (`InvokeRequest` JSON: inputs,
//! config, context, principal, run budget and bounds — the service's invoke
//! API and `wop run`), with a run ledger, through budget validation and
//! `admission::admit` under a pack's input-scaled fuel request; then the
//! ledger's threshold and exhaustion bookkeeping.
//!
//! Input: a JSON object `{"request": …, "ledger": …, "limits": …, "now": …}`
//! (each part optional; `limits` is a manifest's `x-wop.limits`).
//!
//! Checks: never panics; an admitted invocation never gets more fuel than
//! the operator's ceiling or the budget's remainder, nor more wall clock
//! than the pack's limit or the run's remainder; a spent budget or clock is
//! refused.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use wop_core::admission::{AdmissionInput, admit};
use wop_core::budget::{Dimension, Ledger};
use wop_core::limits::{LimitRequest, Limits};
use wop_core::model::{InvokeRequest, Usage};

fuzz_target!(|data: &[u8]| {
    let Ok(v) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let part = |k: &str| v.get(k).cloned().unwrap_or(Value::Null);
    let Ok(req) = serde_json::from_value::<InvokeRequest>(part("request")) else {
        return;
    };
    let budget = req.budget.unwrap_or_default();
    if budget.validate().is_err() {
        return;
    }
    let mut ledger = serde_json::from_value::<Ledger>(part("ledger"))
        .unwrap_or_else(|_| Ledger::new(&req.context.run_id, budget));
    let request = serde_json::from_value::<LimitRequest>(part("limits")).unwrap_or_default();
    if request.validate().is_err() {
        return;
    }
    let now_ms = part("now").as_u64().unwrap_or(ledger.started_at_ms);
    let bounds = req.bounds.unwrap_or_default();
    let ceiling = Limits::default();
    let (limits, _) = ceiling.apply(&request);
    let input = AdmissionInput {
        ledger: &ledger,
        bounds: &bounds,
        limits,
        request: &request,
        fuel_ceiling: ceiling.fuel,
        inputs: &req.inputs,
        now_ms,
    };
    if let Ok(a) = admit(input) {
        assert!(a.limits.fuel <= ceiling.fuel, "{a:?}");
        assert!(ledger.exhausted.is_none());
        if let Some(left) = ledger.fuel_left() {
            assert!(left > 0 && a.limits.fuel <= left, "{a:?} {left}");
        }
        assert!(a.limits.wall_clock_ms <= limits.wall_clock_ms, "{a:?}");
        if let Some(run_ms) = bounds.run_timeout_ms {
            let elapsed = now_ms.saturating_sub(ledger.started_at_ms);
            assert!(elapsed < run_ms, "admitted past the run timeout");
            assert!(a.limits.wall_clock_ms <= run_ms - elapsed, "{a:?}");
        }
    }
    // The ledger's own bookkeeping with what an invocation used.
    let usage = Usage {
        fuel_consumed: ledger.consumed.fuel,
        ..Default::default()
    };
    let _ = wop_core::budget::Prices::default().invocation_cost(&usage);
    let mut events = Vec::new();
    ledger.cross_thresholds(&mut events);
    ledger.exhaust(Dimension::Fuel, 1.0, "node-1", &mut events);
    let _ = ledger.consumed_event();
});
