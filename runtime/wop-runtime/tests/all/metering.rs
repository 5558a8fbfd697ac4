//! Usage records, cost, budgets and bounds through the real runtime.

use super::*;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use wop_runtime::metering::{RunBounds, RunBudget, UsageScope};
use wop_runtime::store::{KvStore, SledStore};
use wop_runtime::tools::{
    RegisteredTool, SafetyTier, ToolCall, ToolDescriptor, ToolFailure, ToolProvider, ToolSource,
};
use wop_runtime::{Outcome, RunContext};

struct Count(Arc<AtomicU32>);

#[async_trait::async_trait]
impl ToolProvider for Count {
    async fn call(&self, _: ToolCall) -> Result<Value, ToolFailure> {
        Ok(json!({"n": self.0.fetch_add(1, Ordering::SeqCst) + 1}))
    }
}

fn counter() -> (RegisteredTool, Arc<AtomicU32>) {
    let n = Arc::new(AtomicU32::new(0));
    (
        RegisteredTool {
            descriptor: ToolDescriptor::new(
                "crm:read",
                ToolSource::HostExtension,
                SafetyTier::Read,
            ),
            tenants: None,
            rate: None,
            timeout: std::time::Duration::from_secs(2),
            provider: Arc::new(Count(n.clone())),
        },
        n,
    )
}

const GRANT: &str = "[packs.tool-call]\ncapabilities = [\"tools\"]\ntools = [\"crm:*\"]\n";

fn rt(policy: &str, store: Option<Arc<dyn KvStore>>, tool: Option<RegisteredTool>) -> Runtime {
    let mut cfg = RuntimeConfig::new();
    cfg.policy(Policy::from_toml(policy).unwrap());
    if let Some(s) = store {
        cfg.effect_store(s);
    }
    if let Some(t) = tool {
        cfg.tool(t);
    }
    Runtime::new(&cfg).unwrap()
}

fn call(
    run: &str,
    node: &str,
    inputs: Value,
    budget: Option<RunBudget>,
    bounds: Option<RunBounds>,
) -> InvokeRequest {
    let mut r = InvokeRequest::new("wop.samples.tool-call", inputs);
    r.context = RunContext {
        run_id: run.into(),
        node_id: node.into(),
        tenant_id: "t".into(),
        attempt: 1,
    };
    r.budget = budget;
    r.bounds = bounds;
    r
}

/// Budget and cap events, by name (and cap kind).
fn budget_trail(r: &InvocationReport) -> Vec<String> {
    r.events
        .iter()
        .filter_map(|e| match e {
            Event::CapBreached { kind, .. } => Some(format!("cap.breached:{kind}")),
            e if e.name().starts_with("budget.") => Some(e.name().to_owned()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn breakdown_adds_up_and_rollups_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let policy = format!(
        "{GRANT}[prices]\ncurrency = \"EUR\"\nperMillionFuel = 2.0\nperToolCall = 0.5\nperInvocation = 0.01\n"
    );
    let (tool, _) = counter();
    let sled: Arc<dyn KvStore> = Arc::new(SledStore::open(dir.path()).unwrap());
    let wop = rt(&policy, Some(sled.clone()), Some(tool));
    load(&wop, "tool-call").await;
    load(&wop, "hello").await;
    let r = wop
        .invoke(call(
            "run-u",
            "n1",
            json!({"tool": "crm:read", "repeat": 3}),
            None,
            None,
        ))
        .await;
    assert!(r.outcome.is_ok(), "{:?}", r.outcome);
    let u = &r.usage;
    let fuel_sum: u64 = u
        .host_call_breakdown
        .iter()
        .map(|c| c.fuel_before)
        .sum::<u64>()
        + u.fuel_after_last_call;
    assert_eq!(fuel_sum, u.fuel_consumed, "{:?}", u.host_call_breakdown);
    let wall_sum: u64 = u.host_call_breakdown.iter().map(|c| c.wall_us).sum();
    assert!(wall_sum <= u.wall_time_us);
    let tools: Vec<_> = u
        .host_call_breakdown
        .iter()
        .filter(|c| c.interface == "tools")
        .collect();
    assert_eq!(tools.len() as u64, u.host_calls["tools"]);
    assert!(
        tools
            .iter()
            .all(|c| c.target.as_deref() == Some("crm:read"))
    );
    assert_eq!(u.tool_calls, 3);
    assert_eq!(u.loop_iterations, 3);
    assert_eq!(u.currency, "EUR");
    let expected = 2.0 * u.fuel_consumed as f64 / 1e6 + 3.0 * 0.5 + 0.01;
    assert!((u.cost - expected).abs() < 1e-9, "{} vs {expected}", u.cost);

    // The same tenant's run: a run id names a run within a tenant.
    let mut h = InvokeRequest::new("wop.samples.hello", json!({}));
    h.context.run_id = "run-u".into();
    h.context.tenant_id = "t".into();
    let h = wop.invoke(h).await;
    let mut other = InvokeRequest::new("wop.samples.hello", json!({}));
    other.context.run_id = "run-v".into();
    other.context.tenant_id = "t".into();
    let other = wop.invoke(other).await;

    let check =
        |by_run: &std::collections::BTreeMap<String, wop_runtime::metering::Rollup>,
         by_pack: &std::collections::BTreeMap<String, wop_runtime::metering::Rollup>| {
            let run = &by_run["run-u"];
            assert_eq!(run.invocations, 2);
            assert_eq!(run.fuel, r.usage.fuel_consumed + h.usage.fuel_consumed);
            assert!((run.cost - (r.usage.cost + h.usage.cost)).abs() < 1e-9);
            assert_eq!(run.tool_calls, 3);
            let hello = &by_pack["hello@0.1.0"];
            assert_eq!(hello.invocations, 2);
            assert_eq!(
                hello.fuel,
                h.usage.fuel_consumed + other.usage.fuel_consumed
            );
        };
    let (by_run, by_pack) = wop
        .usage_rollup(UsageScope::Tenant("t"), None)
        .await
        .unwrap();
    check(&by_run, &by_pack);
    drop(wop);
    drop(sled);
    // A restart: a new runtime on the same store sees the same roll-ups.
    let again = rt(
        &policy,
        Some(Arc::new(SledStore::open(dir.path()).unwrap())),
        None,
    );
    let (by_run, by_pack) = again
        .usage_rollup(UsageScope::Tenant("t"), None)
        .await
        .unwrap();
    check(&by_run, &by_pack);
    let run_v = UsageScope::Run {
        tenant: "t",
        run: "run-v",
    };
    let (only, _) = again.usage_rollup(run_v, Some("hello")).await.unwrap();
    assert_eq!(only.len(), 1);
    let (all, _) = again.usage_rollup(UsageScope::All, None).await.unwrap();
    assert!(all.contains_key("t/run-u"), "{all:?}");
}

#[tokio::test]
async fn tool_call_budget_refuses_before_performing() {
    let (tool, n) = counter();
    let wop = rt(GRANT, None, Some(tool));
    load(&wop, "tool-call").await;
    let budget = Some(RunBudget {
        max_tool_calls: Some(2),
        threshold_percent: Some(50),
        ..Default::default()
    });
    let mut trail = Vec::new();
    let mut last = None;
    for i in 0..3 {
        let r = wop
            .invoke(call(
                "run-b",
                &format!("n{i}"),
                json!({"tool": "crm:read"}),
                budget,
                None,
            ))
            .await;
        trail.extend(budget_trail(&r));
        last = Some(r);
    }
    let r = last.unwrap();
    let e = r.outcome.as_ref().unwrap_err();
    assert_eq!(e.code, "budget_exhausted");
    assert_eq!(e.detail("dimension"), Some(&json!("tool-calls")));
    assert_eq!(
        n.load(Ordering::SeqCst),
        2,
        "the refused call was never performed"
    );
    assert_eq!(trail.iter().filter(|t| *t == "budget.reserved").count(), 1);
    assert_eq!(trail[0], "budget.reserved");
    assert_eq!(
        trail
            .iter()
            .filter(|t| *t == "budget.threshold-crossed")
            .count(),
        1
    );
    let ex = trail.iter().position(|t| t == "budget.exhausted").unwrap();
    assert_eq!(trail[ex + 1], "cap.breached:budget-tool-calls");
    let th = trail
        .iter()
        .position(|t| t == "budget.threshold-crossed")
        .unwrap();
    assert!(trail[..th].contains(&"budget.consumed".to_owned()));
    assert!(th < ex);

    // The run is exhausted: the next invocation is refused before it runs.
    let r = wop
        .invoke(call(
            "run-b",
            "n9",
            json!({"tool": "crm:read"}),
            budget,
            None,
        ))
        .await;
    let e = r.outcome.as_ref().unwrap_err();
    assert_eq!(e.code, "budget_exhausted");
    assert_eq!(breaches(&r), vec!["budget-tool-calls"]);
    assert_eq!(n.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn cost_budget_refuses_the_call_that_would_exceed_it() {
    let (tool, n) = counter();
    let policy = format!("{GRANT}[prices]\nperToolCall = 1.0\n");
    let wop = rt(&policy, None, Some(tool));
    load(&wop, "tool-call").await;
    let budget = Some(RunBudget {
        max_cost_usd: Some(1.5),
        ..Default::default()
    });
    let r = wop
        .invoke(call(
            "run-c",
            "n",
            json!({"tool": "crm:read", "repeat": 3}),
            budget,
            None,
        ))
        .await;
    let e = r.outcome.as_ref().unwrap_err();
    assert_eq!(e.code, "budget_exhausted");
    assert_eq!(e.detail("dimension"), Some(&json!("cost")));
    assert_eq!(n.load(Ordering::SeqCst), 1);
    let trail = budget_trail(&r);
    let ex = trail.iter().position(|t| t == "budget.exhausted").unwrap();
    assert_eq!(trail[ex + 1], "cap.breached:budget-cost");
}

#[tokio::test]
async fn fuel_budget_stops_the_invocation_that_runs_past_it() {
    let wop = rt("", None, None);
    load(&wop, "hello").await;
    let probe = wop
        .invoke(InvokeRequest::new("wop.samples.hello", json!({})))
        .await;
    let one = probe.usage.fuel_consumed;
    let budget = Some(RunBudget {
        max_fuel: Some(one + one / 2),
        threshold_percent: Some(50),
        ..Default::default()
    });
    let mut req = InvokeRequest::new("wop.samples.hello", json!({}));
    req.context.run_id = "run-f".into();
    req.budget = budget;
    let a = wop.invoke(req.clone()).await;
    assert!(a.outcome.is_ok());
    let trail_a = budget_trail(&a);
    assert_eq!(trail_a.first().map(String::as_str), Some("budget.reserved"));
    assert!(trail_a.contains(&"budget.threshold-crossed".to_owned()));
    let b = wop.invoke(req.clone()).await;
    let e = b.outcome.as_ref().unwrap_err();
    assert_eq!(e.code, "budget_exhausted");
    assert_eq!(e.detail("dimension"), Some(&json!("fuel")));
    assert_eq!(breaches(&b), vec!["budget-fuel"]);
    assert_eq!(
        b.usage.fuel_consumed,
        one / 2,
        "stopped exactly at the budget"
    );
    let trail_b = budget_trail(&b);
    assert!(
        trail_b.contains(&"budget.exhausted".to_owned()),
        "{trail_b:?}"
    );
}

#[tokio::test]
async fn interrupt_on_exhaustion_is_refused_explicitly() {
    let wop = rt("", None, None);
    load(&wop, "hello").await;
    let mut req = InvokeRequest::new("wop.samples.hello", json!({}));
    req.budget = Some(RunBudget {
        on_exhaustion: wop_runtime::metering::OnExhaustion::Interrupt,
        ..Default::default()
    });
    let e = wop.invoke(req).await.outcome.unwrap_err();
    assert_eq!(e.code, "validation_error");
    assert!(e.message.contains("not supported"), "{e}");
}

#[tokio::test]
async fn loop_bound_stops_the_packs_own_loop() {
    let (tool, n) = counter();
    let wop = rt(GRANT, None, Some(tool));
    load(&wop, "tool-call").await;
    let bounds = Some(RunBounds {
        max_loop_iterations: Some(3),
        run_timeout_ms: None,
    });
    let r = wop
        .invoke(call(
            "run-l",
            "agent",
            json!({"tool": "crm:read", "repeat": 10}),
            None,
            bounds,
        ))
        .await;
    let e = r.outcome.as_ref().unwrap_err();
    assert_eq!(e.code, "loop_limit_exceeded");
    let Some(Event::CapBreached {
        kind,
        limit,
        observed,
        node_id,
    }) = r.events.last()
    else {
        panic!("{:?}", r.events)
    };
    assert_eq!(
        (kind.as_str(), *limit, *observed, node_id.as_str()),
        ("loop-iterations", 3, 4, "agent")
    );
    assert_eq!(
        n.load(Ordering::SeqCst),
        3,
        "the 4th round was never performed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_timeout_spans_invocations() {
    let wop = rt(
        "[limits]\nfuel = 1000000000000000\nwallClockMs = 20000\n",
        None,
        None,
    );
    load(&wop, "spin").await;
    let bounds = Some(RunBounds {
        max_loop_iterations: None,
        run_timeout_ms: Some(300),
    });
    let mut req = InvokeRequest::new("wop.testing.spin", json!({}));
    req.context.run_id = "run-t".into();
    req.bounds = bounds;
    let a = wop.invoke(req.clone()).await;
    let e = a.outcome.as_ref().unwrap_err();
    assert_eq!(e.code, "run_timeout");
    assert_eq!(breaches(&a), vec!["run-duration"]);
    let b = wop.invoke(req).await;
    assert_eq!(b.outcome.as_ref().unwrap_err().code, "run_timeout");
    assert_eq!(breaches(&b), vec!["run-duration"]);
    assert_eq!(b.usage.fuel_consumed, 0, "refused before running");
}

/// Issue 25: many concurrent invocations of one run, each spinning, under
/// the two conditions in which a deadline used to slip: the fast (TSC)
/// clock the call hook reads does not advance on this thread (quanta
/// compares a TSC that is behind its calibration point as equal to it: a
/// vCPU whose TSC lags the one it was calibrated on reads a stopped clock),
/// and the async timer cannot run because the scheduler never stops while a
/// task is runnable (`event_interval` = `u32::MAX`, the extreme of a busy
/// worker). Every invocation must still end with `run_timeout`: the
/// deadline is checked against the OS's monotonic clock at least once per
/// fuel-yield interval, whatever the fast clock or the timer do. Before
/// the fix, each admitted invocation ran to its fuel ceiling
/// (`sandbox_timeout`).
///
/// No timing assertion: 100 M fuel cannot run in 1 ms on any CPU, so the
/// run's 1 ms ends first; what is asserted is which limit stopped each one.
#[test]
fn run_timeout_binds_every_concurrent_invocation_when_clock_and_timer_stall() {
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .event_interval(u32::MAX)
        .build()
        .unwrap();
    let (stalled, _mock) = quanta::Clock::mock();
    let codes = quanta::with_clock(&stalled, || {
        tokio.block_on(async {
            let wop = rt(
                "[limits]\nfuel = 100000000\nwallClockMs = 20000\n",
                None,
                None,
            );
            load(&wop, "spin").await;
            let tasks: Vec<_> = (0..16)
                .map(|_| {
                    let wop = wop.clone();
                    tokio::spawn(async move {
                        let mut req = InvokeRequest::new("wop.testing.spin", json!({}));
                        req.context.run_id = "run-shared".into();
                        req.bounds = Some(RunBounds {
                            max_loop_iterations: None,
                            run_timeout_ms: Some(1),
                        });
                        let r = wop.invoke(req).await;
                        let e = r.outcome.unwrap_err();
                        (
                            e.code,
                            e.message,
                            breaches(&InvocationReport {
                                outcome: Ok(Outcome::Completed {
                                    output: json!(null),
                                }),
                                events: r.events,
                                usage: r.usage,
                            }),
                        )
                    })
                })
                .collect();
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await.unwrap());
            }
            out
        })
    });
    for (code, message, breaches) in &codes {
        assert_eq!(code, "run_timeout", "{message}");
        assert_eq!(breaches, &vec!["run-duration".to_owned()], "{message}");
    }
}

#[tokio::test]
async fn input_scaled_fuel_fits_small_and_large_inputs() {
    let tmp = tempfile::tempdir().unwrap();
    let items = |n: usize| json!({"items": (0..n).map(|i| json!({"a": n - i, "b": "x"})).collect::<Vec<_>>(), "select": ["a"], "sortBy": "a"});
    let wop = rt("", None, None);
    load(&wop, "transform").await;
    let small = wop
        .invoke(InvokeRequest::new("wop.samples.transform", items(2)))
        .await;
    let large = wop
        .invoke(InvokeRequest::new("wop.samples.transform", items(400)))
        .await;
    let (s, l) = (small.usage.fuel_consumed, large.usage.fuel_consumed);
    assert!(l > 4 * s, "fuel grows with the input ({s} vs {l})");
    // A fixed budget tight for the small input fails the large one ...
    let fixed = copy_pack("transform", tmp.path());
    let edit = |dir: &Path, limits: Value| {
        let p = dir.join("pack.json");
        let mut m: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        m["x-wop"]["limits"] = limits;
        std::fs::write(&p, m.to_string()).unwrap();
    };
    edit(&fixed, json!({"fuel": s * 2}));
    let wop = rt("", None, None);
    wop.load_pack(&fixed).await.unwrap();
    assert!(
        wop.invoke(InvokeRequest::new("wop.samples.transform", items(2)))
            .await
            .outcome
            .is_ok()
    );
    let e = wop
        .invoke(InvokeRequest::new("wop.samples.transform", items(400)))
        .await
        .outcome
        .unwrap_err();
    assert_eq!(e.code, "sandbox_timeout");
    // ... while base + perItem × items fits both.
    let per_item = l / 400 * 2;
    edit(
        &fixed,
        json!({"fuel": s * 2, "fuelPerItem": per_item, "itemsPointer": "/items"}),
    );
    let wop = rt("", None, None);
    wop.load_pack(&fixed).await.unwrap();
    for n in [2, 400] {
        let r = wop
            .invoke(InvokeRequest::new("wop.samples.transform", items(n)))
            .await;
        assert!(
            matches!(r.outcome, Ok(Outcome::Completed { .. })),
            "{n}: {:?}",
            r.outcome
        );
        assert_eq!(
            r.usage.fuel_limit,
            (s * 2 + per_item * n as u64).min(r.usage.fuel_limit.max(1))
        );
    }
}

#[tokio::test]
async fn core_module_packs_share_budgets_usage_and_run_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let sled: Arc<dyn KvStore> = Arc::new(SledStore::open(dir.path()).unwrap());
    let wop = rt("", Some(sled), None);
    load(&wop, "hello-abi").await;
    let mut req = InvokeRequest::new("wop.samples.hello-abi", json!({"name": "Ada"}));
    req.context.run_id = "run-abi".into();
    let ok = wop.invoke(req.clone()).await;
    assert!(ok.outcome.is_ok(), "{:?}", ok.outcome);
    let run_abi = UsageScope::Run {
        tenant: "default",
        run: "run-abi",
    };
    let (by_run, by_pack) = wop.usage_rollup(run_abi, None).await.unwrap();
    assert_eq!(by_run["run-abi"].invocations, 1);
    assert_eq!(by_pack["hello-abi@0.1.0"].fuel, ok.usage.fuel_consumed);

    req.context.run_id = "run-abi-tight".into();
    req.budget = Some(RunBudget {
        max_fuel: Some(ok.usage.fuel_consumed / 2),
        ..Default::default()
    });
    let r = wop.invoke(req).await;
    let e = r.outcome.as_ref().unwrap_err();
    assert_eq!(e.code, "budget_exhausted");
    assert_eq!(e.detail("dimension"), Some(&json!("fuel")));
    let trail = budget_trail(&r);
    let ex = trail.iter().position(|t| t == "budget.exhausted").unwrap();
    assert_eq!(trail[ex + 1], "cap.breached:budget-fuel", "{trail:?}");
}

#[tokio::test]
async fn the_breakdown_can_be_switched_off_without_changing_fuel() {
    let on = rt("", None, None);
    let off = rt("[metering]\nhostCallBreakdown = false\n", None, None);
    load(&on, "hello").await;
    load(&off, "hello").await;
    let a = on
        .invoke(InvokeRequest::new("wop.samples.hello", json!({})))
        .await;
    let b = off
        .invoke(InvokeRequest::new("wop.samples.hello", json!({})))
        .await;
    assert_eq!(a.usage.host_call_breakdown.len(), 1);
    assert!(b.usage.host_call_breakdown.is_empty());
    assert_eq!(
        a.usage.fuel_consumed, b.usage.fuel_consumed,
        "metering is unaffected"
    );
    assert_eq!(b.usage.host_calls["log"], 1);
}

/// hello in tenant `t`'s run `run`.
fn hello(run: &str) -> InvokeRequest {
    let mut r = InvokeRequest::new("wop.samples.hello", json!({"name": "Ada"}));
    r.context = RunContext {
        run_id: run.into(),
        node_id: "n".into(),
        tenant_id: "t".into(),
        attempt: 1,
    };
    r
}

/// The default in-memory store keeps a bounded amount of usage: with the
/// bound at its floor (one full run: 1,000 records and its roll-up), 700
/// real invocations of hello, each a new run (1,400 entries unbounded),
/// leave at most 1,001 usage records and run roll-ups; the newest run is
/// whole, the oldest forgotten, and the pack's roll-up counts all 700.
#[tokio::test]
async fn the_in_memory_stores_usage_stays_within_its_bound() {
    let store = Arc::new(wop_runtime::store::MemoryStore::new());
    let mut cfg = RuntimeConfig::new();
    cfg.effect_store(store.clone()).usage_entries(Some(1));
    let wop = Runtime::new(&cfg).unwrap();
    load(&wop, "hello").await;
    for i in 0..700 {
        assert!(wop.invoke(hello(&format!("run-{i}"))).await.outcome.is_ok());
    }
    wop.flush_usage().await.unwrap();
    let records = store.scan_prefix("usage/", usize::MAX).await.unwrap();
    let rollups = store.scan_prefix("rollup/run/", usize::MAX).await.unwrap();
    let entries = records.len() + rollups.len();
    assert!((900..=1001).contains(&entries), "{entries} entries");
    let newest = UsageScope::Run {
        tenant: "t",
        run: "run-699",
    };
    assert_eq!(wop.usage(newest, None).await.unwrap().len(), 1);
    let oldest = UsageScope::Run {
        tenant: "t",
        run: "run-0",
    };
    assert!(wop.usage(oldest, None).await.unwrap().is_empty());
    let (_, by_pack) = wop.usage_rollup(UsageScope::All, None).await.unwrap();
    let hello: u64 = by_pack.values().map(|r| r.invocations).sum();
    assert_eq!(hello, 700);
}

/// One tenant flooding the bounded store with new runs forgets its own
/// runs, not another tenant's (decision 0045): a quiet tenant's one run,
/// recorded before 700 new runs of another tenant, keeps its record.
#[tokio::test]
async fn a_tenant_flooding_the_bounded_store_forgets_its_own_runs() {
    let store = Arc::new(wop_runtime::store::MemoryStore::new());
    let mut cfg = RuntimeConfig::new();
    cfg.effect_store(store.clone()).usage_entries(Some(1));
    let wop = Runtime::new(&cfg).unwrap();
    load(&wop, "hello").await;
    let mut quiet = hello("quiet-run");
    quiet.context.tenant_id = "quiet".into();
    assert!(wop.invoke(quiet).await.outcome.is_ok());
    for i in 0..700 {
        assert!(wop.invoke(hello(&format!("run-{i}"))).await.outcome.is_ok());
    }
    wop.flush_usage().await.unwrap();
    let quiet = UsageScope::Run {
        tenant: "quiet",
        run: "quiet-run",
    };
    assert_eq!(wop.usage(quiet, None).await.unwrap().len(), 1);
    let oldest = UsageScope::Run {
        tenant: "t",
        run: "run-0",
    };
    assert!(wop.usage(oldest, None).await.unwrap().is_empty());
    let entries = store.scan_prefix("usage/", usize::MAX).await.unwrap().len()
        + store
            .scan_prefix("rollup/run/", usize::MAX)
            .await
            .unwrap()
            .len();
    assert!(entries <= 1001, "{entries} entries");
}

/// A bounded in-memory store that is full refuses a budgeted run's new
/// ledger with `effect_store_full` before the node runs; a run without a
/// budget still runs (its usage is not kept), and nothing grows the store
/// past its capacity (decision 0046).
#[tokio::test]
async fn a_full_memory_store_refuses_a_new_ledger_with_its_own_code() {
    let store = Arc::new(wop_runtime::store::MemoryStore::with_capacity(1 << 20));
    store.put("filler", vec![0; (1 << 20) - 200]).await.unwrap();
    let kv: Arc<dyn KvStore> = store.clone();
    let wop = rt(GRANT, Some(kv), None);
    load(&wop, "hello").await;
    let mut budgeted = hello("budgeted");
    budgeted.budget = Some(RunBudget {
        max_fuel: Some(1_000_000_000),
        ..Default::default()
    });
    let r = wop.invoke(budgeted).await;
    let e = r.outcome.as_ref().unwrap_err();
    assert_eq!(e.code, "effect_store_full", "{e:?}");
    assert!(e.message.contains("did not run"), "{}", e.message);
    assert!(
        e.message.starts_with("the run's ledger (its budget, bounds and usage so far) could not be opened in the usage store"),
        "{}",
        e.message
    );
    assert!(wop.invoke(hello("free")).await.outcome.is_ok());
    wop.flush_usage().await.ok();
    assert!(store.bytes() <= 1 << 20, "{} bytes", store.bytes());
}

/// A pack's effectful tool call past its tenant's share of the store
/// (`TenantShare`, decision 0054) is not performed, and the pack gets the
/// refusal with the share's figures in `details` (as `wop serve`'s own
/// refusals carry them), which the `tool-call` pack fails the node with.
#[tokio::test]
async fn a_claim_past_the_tenants_share_is_refused_with_its_figures() {
    const SHARE: u64 = 64;
    let share = wop_runtime::store::TenantShare::open(
        Arc::new(wop_runtime::store::MemoryStore::new()),
        SHARE,
    )
    .await
    .unwrap();
    let kv: Arc<dyn KvStore> = Arc::new(share);
    let n = Arc::new(AtomicU32::new(0));
    let write = RegisteredTool {
        descriptor: ToolDescriptor::new("crm:write", ToolSource::HostExtension, SafetyTier::Write),
        tenants: None,
        rate: None,
        timeout: std::time::Duration::from_secs(2),
        provider: Arc::new(Count(n.clone())),
    };
    let wop = rt(GRANT, Some(kv), Some(write));
    load(&wop, "tool-call").await;
    let r = wop
        .invoke(call("r1", "n", json!({"tool": "crm:write"}), None, None))
        .await;
    let e = r.outcome.as_ref().unwrap_err();
    assert_eq!(e.code, "effect_store_full", "{e:?}");
    assert!(
        e.message.contains("maxStoreBytesPerTenant"),
        "{}",
        e.message
    );
    let d = e.details.clone().unwrap_or_default();
    assert_eq!(d.get("tenant"), Some(&json!("t")), "{d:?}");
    assert_eq!(
        d.get("maxStoreBytesPerTenant"),
        Some(&json!(SHARE)),
        "{d:?}"
    );
    assert_eq!(d.get("heldBytes"), Some(&json!(0)), "{d:?}");
    let needed = d.get("neededBytes").and_then(Value::as_u64);
    assert!(needed.is_some_and(|b| b > SHARE), "{d:?}");
    assert!(d.get("effectId").is_some_and(Value::is_string), "{d:?}");
    assert_eq!(n.load(Ordering::SeqCst), 0, "the effect was not performed");
}

/// Retention (what `wop effects purge` and `wop serve`'s hourly purge
/// run): a usage record and a run roll-up from before the retention go; a
/// run invoked now keeps its record and roll-up, and its ledger; the
/// pack's all-time roll-up stays.
#[tokio::test]
async fn usage_past_the_retention_is_purged_and_nothing_newer() {
    let store = Arc::new(wop_runtime::store::MemoryStore::new());
    let kv: Arc<dyn KvStore> = store.clone();
    let wop = rt(GRANT, Some(kv.clone()), None);
    load(&wop, "hello").await;
    // 15 days ago, in the meter's own layout.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let old_ms = now_ms - 15 * 86_400_000;
    kv.put(
        &format!("usage/t/old/{old_ms:013}-1-0"),
        br#"{"runId":"old","tenantId":"t"}"#.to_vec(),
    )
    .await
    .unwrap();
    let rollup = format!(r#"{{"tenantId":"t","runId":"old","recordsKept":1,"lastAtMs":{old_ms}}}"#);
    kv.put("rollup/run/t/old", rollup.into_bytes())
        .await
        .unwrap();
    let mut r = hello("new");
    r.budget = Some(RunBudget {
        max_fuel: Some(1_000_000_000),
        ..Default::default()
    });
    assert!(wop.invoke(r).await.outcome.is_ok());
    assert_eq!(
        wop.purge_usage().await.unwrap(),
        2,
        "the old record and roll-up"
    );
    assert!(store.get("rollup/run/t/old").await.unwrap().is_none());
    let new = UsageScope::Run {
        tenant: "t",
        run: "new",
    };
    assert_eq!(wop.usage(new, None).await.unwrap().len(), 1);
    assert!(wop.ledger("t", "new").await.unwrap().is_some());
    let (by_run, by_pack) = wop.usage_rollup(UsageScope::All, None).await.unwrap();
    assert_eq!(by_run.len(), 1, "{by_run:?}");
    assert_eq!(by_pack.values().map(|r| r.invocations).sum::<u64>(), 1);
    assert_eq!(wop.purge_usage().await.unwrap(), 0, "nothing twice");
}
