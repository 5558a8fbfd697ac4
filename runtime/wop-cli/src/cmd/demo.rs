//! `wop demo`: the main job on the embedded default. Extracts the bundled
//! sample packs and walks through what the sandbox does, step by step.

use crate::common::{Failure, exit};
use crate::output::{bytes, print_events};
use clap::Args;
use serde_json::{Value, json};
use std::path::Path;
use wop_runtime::{InvokeRequest, Policy, Runtime, RuntimeConfig};

/// `wop demo` arguments.
#[derive(Args)]
pub(crate) struct DemoArgs {
    /// Print one JSON document per step instead of the story.
    #[arg(long)]
    pub(crate) json: bool,
}

const STORY_POLICY: &str = r#"
[limits]
memoryBytes = 33554432   # 32 MiB
fuel = 400000000         # stops a runaway loop in well under a second
wallClockMs = 10000

[packs.tool-call]
capabilities = ["log", "tools"]
"#;

const WALL_CLOCK_POLICY: &str = r#"
[limits]
fuel = 1000000000000000  # effectively unlimited fuel ...
wallClockMs = 250        # ... so the wall clock is what stops the loop
"#;

struct Step<'a> {
    title: &'a str,
    pack: &'a str,
    type_id: &'a str,
    inputs: Value,
    expect: &'a str,
}

pub(crate) async fn demo(json_out: bool) -> Result<u8, Failure> {
    let dir = tempfile::tempdir()?;
    for (name, manifest, wasm) in wop_test_packs::embedded() {
        let d = dir.path().join(name);
        std::fs::create_dir_all(&d)?;
        std::fs::write(d.join("pack.json"), manifest)?;
        std::fs::write(d.join(format!("{name}.wasm")), wasm)?;
    }
    let cache = crate::common::default_cache_dir();
    let make = |policy: &str| -> Result<Runtime, Failure> {
        let mut cfg = RuntimeConfig::new();
        cfg.policy(Policy::from_toml(policy)?);
        if let Some(c) = &cache {
            cfg.cache_dir(c);
        }
        Ok(Runtime::new(&cfg)?)
    };
    let story = make(STORY_POLICY)?;
    let wall = make(WALL_CLOCK_POLICY)?;
    let mut failures = 0;
    let mut docs = Vec::new();

    if !json_out {
        println!("wop demo — untrusted node packs in a fresh, metered, deny-by-default sandbox");
        println!(
            "policy: 32 MiB memory, 400M fuel, 10 s wall clock; only `tool-call` may import `tools`\n"
        );
    }

    let steps = [
        Step {
            title: "1. A good pack: greets, logs, and reports what it cost",
            pack: "hello",
            type_id: "wop.samples.hello",
            inputs: json!({"name": "Ada"}),
            expect: "completed",
        },
        Step {
            title: "2. A denied capability: the pack asks for a tool nobody granted",
            pack: "tool-call",
            type_id: "wop.samples.tool-call",
            inputs: json!({"tool": "payments:charge", "arguments": {"amount": 100}}),
            expect: "forbidden",
        },
        Step {
            title: "3. A runaway loop, stopped by fuel",
            pack: "spin",
            type_id: "wop.testing.spin",
            inputs: json!({}),
            expect: "sandbox_timeout",
        },
        Step {
            title: "4. A memory bomb, stopped at the memory cap",
            pack: "memory-bomb",
            type_id: "wop.testing.memory-bomb",
            inputs: json!({}),
            expect: "sandbox_memory_exceeded",
        },
    ];
    for s in &steps {
        failures += run_step(&story, dir.path(), s, json_out, &mut docs).await?;
    }
    failures += run_step(
        &wall,
        dir.path(),
        &Step {
            title: "5. The same loop with unlimited fuel, stopped by the 250 ms wall clock",
            pack: "spin",
            type_id: "wop.testing.spin",
            inputs: json!({}),
            expect: "sandbox_timeout",
        },
        json_out,
        &mut docs,
    )
    .await?;

    // 6. Refused before running.
    for (title, pack) in [
        (
            "6. An escape attempt: a pack importing wasi:sockets is refused before it runs",
            "sockets",
        ),
        (
            "7. An ungranted interface: a pack importing `http` without a grant is refused",
            "ungranted",
        ),
    ] {
        let before = story.stats().instantiations;
        let res = story.load_pack(&dir.path().join(pack)).await;
        let after = story.stats().instantiations;
        match res {
            Ok(_) => {
                failures += 1;
                if !json_out {
                    println!("{title}\n  UNEXPECTED: the pack loaded\n");
                }
            }
            Err(e) => {
                let err = e.to_node_error();
                if json_out {
                    docs.push(json!({"step": title, "loaded": false, "error": err, "instancesCreated": after - before}));
                } else {
                    println!("{title}");
                    println!("  refused: {}", err.code);
                    println!("  {}", err.message);
                    if let Some(d) = &err.details {
                        println!("  details: {d}");
                    }
                    println!(
                        "  instances created while loading it: {} (its code never ran)\n",
                        after - before
                    );
                }
            }
        }
    }

    if json_out {
        println!("{}", serde_json::to_string_pretty(&docs)?);
    } else {
        let st = story.stats();
        println!(
            "runtime: {} compilations, {} disk-cache hits, {} instances created and dropped",
            st.cache.compilations + wall.stats().cache.compilations,
            st.cache.disk_hits + wall.stats().cache.disk_hits,
            st.instantiations + wall.stats().instantiations
        );
        if failures == 0 {
            println!("every step behaved as expected.");
        } else {
            println!("{failures} step(s) did NOT behave as expected.");
        }
    }
    Ok(if failures == 0 { 0 } else { exit::NODE_FAILED })
}

async fn run_step(
    rt: &Runtime,
    dir: &Path,
    s: &Step<'_>,
    json_out: bool,
    docs: &mut Vec<Value>,
) -> Result<u32, Failure> {
    if let Err(e) = rt.load_pack(&dir.join(s.pack)).await {
        return Err(Failure {
            code: exit::PACK_REJECTED,
            error: anyhow::anyhow!("bundled pack {} did not load: {e}", s.pack),
        });
    }
    let report = rt
        .invoke(InvokeRequest::new(s.type_id, s.inputs.clone()))
        .await;
    let got = match &report.outcome {
        Ok(_) => "completed".to_owned(),
        Err(e) => e.code.clone(),
    };
    let ok = got == s.expect;
    if json_out {
        docs.push(json!({"step": s.title, "expected": s.expect, "report": report}));
        return Ok(u32::from(!ok));
    }
    println!("{}", s.title);
    println!(
        "  $ wop run {} {} --input '{}'",
        s.pack, s.type_id, s.inputs
    );
    match &report.outcome {
        Ok(o) => println!("  outcome: {}", serde_json::to_string(o)?),
        Err(e) => {
            println!("  outcome: failed with {} — {}", e.code, e.message);
            if let Some(d) = &e.details {
                println!("  details: {d}");
            }
        }
    }
    print_events(&report.events, "  ");
    let u = &report.usage;
    println!(
        "  usage: fuel {}  wall {:.1} ms  peak memory {}  host calls {:?}",
        u.fuel_consumed,
        u.wall_time_us as f64 / 1000.0,
        bytes(u.peak_memory_bytes),
        u.host_calls
    );
    if !ok {
        println!("  UNEXPECTED: wanted {}, got {got}", s.expect);
    }
    println!();
    Ok(u32::from(!ok))
}
