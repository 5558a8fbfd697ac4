//! `GET /metrics` scraped by a real Prometheus server (Debian's
//! `prometheus`, started here on loopback), queried through its HTTP API
//! (issue 20): after N honest invocations, M denials and K fuel runaways,
//! the counters by outcome code are exactly N, M and K. The alert rules
//! OPERATIONS.md documents load in its `promtool`.
//!
//! Needs `prometheus` on PATH (`.ci/run` installs it); without it the test
//! says SKIPPED, unless `WOP_REQUIRE_PROMETHEUS` is set (CI), then it fails.

use super::*;
use serde_json::json;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn prometheus() -> Option<std::path::PathBuf> {
    let found = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("prometheus"))
            .find(|c| c.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("WOP_REQUIRE_PROMETHEUS").is_none(),
            "prometheus is not installed: apt-get install prometheus (Debian)"
        );
        eprintln!("SKIPPED: no `prometheus` on PATH (apt-get install prometheus)");
    }
    found
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One Prometheus query's result, as `label value → sample value`.
async fn query(prom: SocketAddr, q: &str, by: &str) -> std::collections::BTreeMap<String, f64> {
    let path = format!("/api/v1/query?query={}", percent_encode(q));
    let r = req(prom, "GET", &path, &[], b"").await;
    let v = r.json();
    let mut out = std::collections::BTreeMap::new();
    for s in v["data"]["result"].as_array().into_iter().flatten() {
        let label = s["metric"][by].as_str().unwrap_or("").to_owned();
        let value: f64 = s["value"][1].as_str().unwrap_or("0").parse().unwrap_or(0.0);
        out.insert(label, value);
    }
    out
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_exact_counts_by_outcome_code() {
    let Some(bin) = prometheus() else { return };
    let policy =
        "[limits]\nfuel = 5000000\n\n[packs.tool-call]\ncapabilities = [\"tools\"]\ntools = []\n";
    let s = start(policy, &serve_toml(""), &["hello", "tool-call", "spin"]).await;
    // Without the operator scope: refused.
    let r = req(
        s.addr,
        "GET",
        "/metrics",
        &[("Authorization", &bearer(OTHER_TOKEN))],
        b"",
    )
    .await;
    assert_eq!(r.status, 403);
    let r = req(s.addr, "GET", "/metrics", &[], b"").await;
    assert_eq!(r.status, 401);

    let (n, m, k) = (7, 4, 3);
    let call = |body: Value| async move {
        let r = post_json(s.addr, "/host/wop/invocations", TOKEN, &body).await;
        assert_eq!(r.status, 200);
        r.json()
    };
    for i in 0..n {
        let v =
            call(json!({"typeId": "wop.samples.hello", "inputs": {"name": format!("n{i}")}})).await;
        assert_eq!(v["outcome"], "completed");
    }
    for _ in 0..m {
        let v = call(json!({"typeId": "wop.samples.tool-call", "inputs": {"tool": "admin:drop"}}))
            .await;
        assert_eq!(v["error"]["code"], "forbidden");
    }
    for _ in 0..k {
        let v = call(json!({"typeId": "wop.testing.spin", "inputs": {}})).await;
        assert_eq!(v["error"]["code"], "sandbox_timeout");
    }

    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    std::fs::write(
        dir.path().join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: wop\n    metrics_path: /metrics\n    authorization:\n      type: Bearer\n      credentials: {TOKEN}\n    static_configs:\n      - targets: ['{}']\n",
            s.addr
        ),
    )
    .unwrap();
    let child = Command::new(bin)
        .arg(format!(
            "--config.file={}",
            dir.path().join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _guard = wop_testkit::ChildGuard(child);
    let prom: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();

    // Poll until Prometheus has scraped (a guard against hanging, not a
    // timing assertion).
    let q = r#"sum by (code) (wop_invocations_total{tenant="acme"})"#;
    let end = Instant::now() + Duration::from_secs(90);
    let by_code = loop {
        if tokio::net::TcpStream::connect(prom).await.is_ok() {
            let got = query(prom, q, "code").await;
            if !got.is_empty() {
                break got;
            }
        }
        assert!(Instant::now() < end, "Prometheus never scraped /metrics");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(by_code.get("completed"), Some(&f64::from(n)), "{by_code:?}");
    assert_eq!(by_code.get("forbidden"), Some(&f64::from(m)), "{by_code:?}");
    assert_eq!(
        by_code.get("sandbox_timeout"),
        Some(&f64::from(k)),
        "{by_code:?}"
    );
    assert_eq!(by_code.len(), 3, "{by_code:?}");
    // And the other families are there, with bounded labels.
    let breaches = query(prom, "sum by (kind) (wop_cap_breached_total)", "kind").await;
    assert_eq!(
        breaches.get("wasm-fuel"),
        Some(&f64::from(k)),
        "{breaches:?}"
    );
    let tools = query(prom, "sum by (tool, status) (wop_tool_calls_total)", "tool").await;
    assert_eq!(
        tools.get("other"),
        Some(&f64::from(m)),
        "an unknown tool id is folded: {tools:?}"
    );
    let up = query(prom, "up", "job").await;
    assert_eq!(up.get("wop"), Some(&1.0));
    s.stop().await;
}

/// The series `/metrics` shows now (sample lines).
async fn series(addr: SocketAddr) -> Vec<String> {
    let r = req(
        addr,
        "GET",
        "/metrics",
        &[("Authorization", &bearer(TOKEN))],
        b"",
    )
    .await;
    assert_eq!(r.status, 200);
    String::from_utf8(r.body)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// The value of the sample line that starts with `prefix`.
fn sample(lines: &[String], prefix: &str) -> f64 {
    lines
        .iter()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no `{prefix}` in {lines:?}"))
}

/// Issue 33, item 1: a pack with only the `tools` capability calls
/// `tools.call` with 10,000 distinct ids of its choosing — MCP ids of
/// servers the policy does not configure (`mcp:s<n>/x`) and of tools no
/// catalog lists on one it does (`mcp:files/t<n>`) — through the real
/// service: `/metrics` has exactly the series it had before, and every
/// call is counted under a label from the configuration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pack_chosen_tool_ids_do_not_add_series() {
    let policy = "[packs.id-flood]\ncapabilities = [\"tools\"]\ntools = [\"crm:*\"]\n\n\
                  [mcp.servers.files]\ntransport = \"stdio\"\ncommand = \"/bin/false\"\n";
    let s = start(policy, &serve_toml(""), &["id-flood"]).await;
    let flood = |prefix: &'static str, from: u64, calls: u64| async move {
        let body = json!({"typeId": "wop.testing.id-flood", "inputs": {
            "mode": "ids", "prefix": prefix, "suffix": "/x", "from": from, "calls": calls}});
        let r = post_json(s.addr, "/host/wop/invocations", TOKEN, &body).await;
        assert_eq!(r.status, 200);
        let v = r.json();
        assert_eq!(v["outcome"], "completed", "{v}");
        assert_eq!(v["output"]["errors"], calls, "every call refused: {v}");
    };
    // One call of each shape first, so every family the flood touches
    // exists before counting.
    flood("mcp:s", 0, 1).await;
    flood("mcp:files/t", 0, 1).await;
    let before = series(s.addr).await;
    const PER: u64 = 1_000;
    for i in 0..5 {
        flood("mcp:s", 1 + i * PER, PER).await;
        flood("mcp:files/t", 1 + i * PER, PER).await;
    }
    let after = series(s.addr).await;
    assert_eq!(
        after.len(),
        before.len(),
        "10,000 pack-chosen ids added series: {:?}",
        after
            .iter()
            .filter(|l| !before
                .iter()
                .any(|b| b.split(' ').next() == l.split(' ').next()))
            .take(5)
            .collect::<Vec<_>>()
    );
    let other = r#"wop_tool_calls_total{tool="other",status="forbidden"}"#;
    let files = r#"wop_tool_calls_total{tool="mcp:files/*",status="forbidden"}"#;
    assert_eq!(sample(&after, other) - sample(&before, other), 5_000.0);
    assert_eq!(sample(&after, files) - sample(&before, files), 5_000.0);
    assert!(after.iter().all(|l| !l.contains("mcp:s")), "{after:?}");
    // The configured labels are still themselves, not `other`.
    let mine = r#"wop_invocations_total{pack="id-flood",node_type="wop.testing.id-flood",tenant="acme",code="completed"}"#;
    assert_eq!(sample(&after, mine), 12.0);
    s.stop().await;
}

/// The alert rules OPERATIONS.md gives operators load in Prometheus
/// (`promtool check rules`), and the share's alert fires for a tenant past
/// 80 % of its share and not for one below it, the failed store's once
/// the store has failed (`promtool test rules`).
#[test]
fn the_documented_alert_rules_load_and_the_share_alert_fires() {
    let Some(bin) = prometheus() else { return };
    let promtool = bin.with_file_name("promtool");
    let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/OPERATIONS.md");
    let text = std::fs::read_to_string(docs).unwrap();
    let start = text.find("```yaml\ngroups:").expect("the rules block") + "```yaml\n".len();
    let len = text[start..].find("```").expect("its end");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rules.yml"), &text[start..start + len]).unwrap();
    std::fs::write(
        dir.path().join("test.yml"),
        r#"rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'wop_store_tenant_bytes{tenant="acme",job="wop"}'
        values: '900+0x5'
      - series: 'wop_store_tenant_bytes{tenant="globex",job="wop"}'
        values: '100+0x5'
      - series: 'wop_store_tenant_share_bytes{job="wop"}'
        values: '1000+0x5'
      - series: 'wop_store_failed{backend="sled",job="wop"}'
        values: '0 0 1 1 1 1'
    alert_rule_test:
      - eval_time: 2m
        alertname: WopTenantNearShare
        exp_alerts:
          - exp_labels: {tenant: acme, job: wop}
      - eval_time: 1m
        alertname: WopStoreFailed
        exp_alerts: []
      - eval_time: 3m
        alertname: WopStoreFailed
        exp_alerts:
          - exp_labels: {backend: sled, job: wop}
"#,
    )
    .unwrap();
    for args in [
        ["check", "rules", "rules.yml"],
        ["test", "rules", "test.yml"],
    ] {
        let out = Command::new(&promtool)
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "promtool {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
