//! Host work is paid for in fuel per byte (`FUEL_PER_HOST_BYTE`) on every
//! path a pack can make the host move bytes, here the two charged last:
//! WASI stdout writes and `ctx.mcp` results. The `host-bytes` testing pack
//! keeps its own work independent of those bytes, so the difference in
//! fuel is what the host charged.

use super::mcp::{fake_stdio, skip};
use super::*;
use serde_json::json;
use wop_runtime::{FUEL_PER_HOST_BYTE, Outcome};

const TYPE: &str = "wop.testing.host-bytes";

/// The bytes the pack reports and the fuel the invocation consumed.
async fn run(rt: &Runtime, inputs: Value) -> (u64, u64) {
    let r = invoke(rt, TYPE, inputs).await;
    let Ok(Outcome::Completed { output }) = &r.outcome else {
        panic!("{:?}", r.outcome)
    };
    let bytes = output["bytes"].as_u64().unwrap();
    (bytes, r.usage.fuel_consumed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdout_writes_are_charged_per_byte() {
    let rt = runtime("[packs.host-bytes]\ncapabilities = [\"mcp\"]\n");
    load(&rt, "host-bytes").await;
    let mut written = Vec::new();
    for n in [100_000u64, 200_000] {
        let (_, wrote) = run(&rt, json!({"via": "stdout", "bytes": n})).await;
        let (_, built) = run(&rt, json!({"via": "none", "bytes": n})).await;
        // Writing costs at least its bytes more than only building them.
        assert!(
            wrote >= built + n * FUEL_PER_HOST_BYTE,
            "{n} bytes: written {wrote}, built only {built}"
        );
        written.push(wrote);
    }
    assert!(
        written[1] >= written[0] + 100_000 * FUEL_PER_HOST_BYTE,
        "{written:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_results_are_charged_per_byte() {
    if skip("mcp_results_are_charged_per_byte") {
        return;
    }
    let script = fake_stdio();
    let rt = runtime(&format!(
        r#"
[mcp.servers.fake]
transport = "stdio"
command = "python3"
args = ["{script}", "legacy"]
tiers = {{ pad = "read" }}

[packs.host-bytes]
capabilities = ["mcp"]
mcp = ["fake/pad"]
"#
    ));
    let dir = tempfile::tempdir().unwrap();
    let p = copy_pack("host-bytes", dir.path());
    let path = p.join("pack.json");
    let mut m: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    m["x-wop"]["mcp"] = json!({"servers": ["fake"]});
    std::fs::write(&path, m.to_string()).unwrap();
    rt.load_pack(&p).await.unwrap();
    // The same arguments' size each time: only the result grows (the
    // server pads it), and the pack never parses it.
    let pad = |n: u64| {
        json!({"via": "mcp", "server": "fake", "tool": "pad",
               "arguments": format!("{{\"bytes\":{n:>7}}}")})
    };
    let (small, small_fuel) = run(&rt, pad(1_000)).await;
    let (large, large_fuel) = run(&rt, pad(201_000)).await;
    assert!(large >= small + 200_000, "{small} → {large} result bytes");
    assert!(
        large_fuel >= small_fuel + (large - small) * FUEL_PER_HOST_BYTE,
        "{small} result bytes: {small_fuel} fuel; {large}: {large_fuel}"
    );
}
