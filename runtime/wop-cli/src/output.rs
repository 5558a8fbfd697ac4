//! Human-readable output for reports and inspections.

use wop_runtime::{Event, Inspection, InvocationReport, Outcome};

pub(crate) fn print_report(r: &InvocationReport) {
    match &r.outcome {
        Ok(Outcome::Completed { output }) => {
            println!("completed");
            println!("  output: {}", pretty(output));
        }
        Ok(Outcome::Suspended { interrupt }) => {
            println!("suspended");
            println!("  interrupt: {}", pretty(interrupt));
        }
        Err(e) => {
            println!("failed: {} ({:?})", e.code, e.source);
            println!("  {}", e.message);
            if let Some(d) = &e.details {
                println!("  details: {d}");
            }
        }
    }
    print_events(&r.events, "");
    let u = &r.usage;
    println!("usage (run {}, node {})", u.run_id, u.node_id);
    println!(
        "  fuel {} / {}   wall {:.2} ms (instantiate {:.2} ms)   peak memory {} / {}",
        u.fuel_consumed,
        u.fuel_limit,
        u.wall_time_us as f64 / 1000.0,
        u.instantiate_time_us as f64 / 1000.0,
        bytes(u.peak_memory_bytes),
        bytes(u.memory_limit_bytes)
    );
    if !u.host_calls.is_empty() {
        let calls: Vec<String> = u
            .host_calls
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        println!("  host calls: {}", calls.join(" "));
    }
    if u.log_bytes_dropped > 0 {
        println!(
            "  log: {} kept, {} dropped past the cap",
            bytes(u.log_bytes),
            bytes(u.log_bytes_dropped)
        );
    }
}

pub(crate) fn print_events(events: &[Event], indent: &str) {
    if events.is_empty() {
        return;
    }
    println!("{indent}events ({})", events.len());
    const SHOW: usize = 12;
    for e in events.iter().take(SHOW) {
        match e {
            Event::LogAppended {
                level,
                message,
                stream,
                fields,
            } => match fields {
                Some(f) => println!("{indent}  log.appended  [{level:?} {stream:?}] {message} {f}"),
                None => println!("{indent}  log.appended  [{level:?} {stream:?}] {message}"),
            },
            Event::CapBreached {
                kind,
                limit,
                observed,
                node_id,
            } => println!(
                "{indent}  cap.breached  kind={kind} limit={limit} observed={observed} node={node_id}"
            ),
            Event::ToolCalled {
                tool_name,
                call_id,
                args_hash,
                principal,
                ..
            } => println!(
                "{indent}  agent.tool-called  {tool_name} call={call_id} principal={principal} argsHash={}…",
                &args_hash[..args_hash.len().min(12)]
            ),
            Event::ToolReturned {
                tool_name,
                status,
                duration_ms,
                error,
                replayed,
                ..
            } => {
                let mut line =
                    format!("{indent}  agent.tool-returned {tool_name} status={status:?}");
                if let Some(d) = duration_ms {
                    line.push_str(&format!(" durationMs={d}"));
                }
                if *replayed {
                    line.push_str(" replayed");
                }
                if let Some(code) = error.as_ref().and_then(|e| e["code"].as_str()) {
                    line.push_str(&format!(" error={code}"));
                }
                println!("{line}");
            }
            Event::EgressDecided {
                decision,
                destination,
                reason,
                credential_id,
                cause,
            } => {
                let credential = credential_id
                    .as_ref()
                    .map(|c| format!(" credential={c}"))
                    .unwrap_or_default();
                let cause = cause
                    .as_ref()
                    .filter(|c| *c != reason)
                    .map(|c| format!(" ({c})"))
                    .unwrap_or_default();
                println!(
                    "{indent}  egress.decided  {decision} {destination}{credential} reason={reason}{cause}"
                )
            }
            other => {
                let mut v = serde_json::to_value(other).unwrap_or_default();
                if let Some(m) = v.as_object_mut() {
                    m.remove("type");
                }
                println!("{indent}  {}  {v}", other.name());
            }
        }
    }
    if events.len() > SHOW {
        println!(
            "{indent}  … {} more (use --json for all)",
            events.len() - SHOW
        );
    }
}

pub(crate) fn print_inspection(i: &Inspection) {
    let m = &i.manifest;
    println!("pack {}@{}  ({})", m.name, m.version, i.dir.display());
    if m.runtime.language == wop_core::manifest::Language::Javascript {
        println!(
            "  entry {} (JavaScript, built here)  component sha256 {}",
            m.runtime.entry, i.sha256
        );
    } else {
        println!("  entry {}  sha256 {}", m.runtime.entry, i.sha256);
    }
    println!("nodes");
    for n in &m.nodes {
        println!(
            "  {}@{}  category={} role={}",
            n.type_id, n.version, n.category, n.role
        );
    }
    println!("imports");
    for imp in &i.imports {
        println!("  {:<14} {}", imp.verdict, imp.name);
    }
    let caps = |c: &[wop_runtime::Capability]| {
        if c.is_empty() {
            "-".to_owned()
        } else {
            c.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(", ")
        }
    };
    println!("capabilities");
    println!("  requested  {}", caps(&i.requested));
    println!("  granted    {}", caps(&i.granted));
    println!(
        "  effective  {}",
        caps(&i.effective.iter().copied().collect::<Vec<_>>())
    );
    match &i.filesystem {
        Some(fs) => println!(
            "  filesystem {} at {} ({})",
            fs.path.display(),
            wop_runtime::GUEST_DATA_DIR,
            if fs.read_only {
                "read-only"
            } else {
                "read-write"
            }
        ),
        None => println!("  filesystem none"),
    }
    print_egress(&i.egress);
    let l = &i.limits;
    println!("limits per invocation");
    println!(
        "  memory {}  fuel {}  wall clock {} ms  output {}  log {}",
        bytes(l.memory_bytes),
        l.fuel,
        l.wall_clock_ms,
        bytes(l.output_bytes),
        bytes(l.log_bytes)
    );
    for c in &i.clamps {
        println!(
            "  clamped: {} requested {} → granted {}",
            c.limit, c.requested, c.granted
        );
    }
    match &i.refusal {
        Some(e) => println!("verdict: REFUSED — {}", e.message),
        None => println!("verdict: loadable"),
    }
}

/// The loud warning shown whenever the test-only loopback switch is on.
pub(crate) const LOOPBACK_WARNING: &str = "WARNING: [egress] allowLoopback = true — TEST-ONLY: packs can reach THIS MACHINE (127.0.0.0/8, ::1) through safe-fetch. Never enable it in production.";

fn print_egress(e: &wop_runtime::EgressView) {
    let list = |v: &[String]| {
        if v.is_empty() {
            "-".to_owned()
        } else {
            v.join(", ")
        }
    };
    println!("egress (safe-fetch)");
    println!("  requested  {}", list(&e.requested));
    println!("  granted    {}", list(&e.granted));
    println!(
        "  redirects  {}",
        if e.max_redirects == 0 {
            "not followed".to_owned()
        } else {
            format!("up to {} hops, each re-validated", e.max_redirects)
        }
    );
    if e.allow_loopback {
        println!("  !!! {LOOPBACK_WARNING}");
    }
}

fn pretty(v: &serde_json::Value) -> String {
    let s = v.to_string();
    if s.len() > 400 {
        format!("{}… ({} bytes)", &s[..s.floor_char_boundary(400)], s.len())
    } else {
        s
    }
}

pub(crate) fn bytes(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64)
    } else if n >= 1 << 10 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} B")
    }
}
