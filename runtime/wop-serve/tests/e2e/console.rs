//! The console in a real browser (issue 20): Debian's headless Chromium,
//! driven by the pinned playwright-core (tests/browser), signs in with an
//! operator token and finds the loaded packs, recent invocations with their
//! codes, the cost chart drawn, and one run's effects; the session cookie
//! is HttpOnly and SameSite=Strict, and the token is nowhere in the page. A
//! screenshot is kept at target/console.png.
//!
//! Needs `chromium` and `node` (runtime/wop-serve/tests/setup.sh); without
//! them SKIPPED, unless `WOP_REQUIRE_BROWSER` is set (CI).

use super::*;
use serde_json::json;
use std::path::PathBuf;

fn ready() -> bool {
    let browser = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/browser/node_modules/playwright-core");
    let chromium = std::path::Path::new("/usr/bin/chromium").exists();
    let ok = browser.exists() && chromium;
    if !ok {
        assert!(
            std::env::var_os("WOP_REQUIRE_BROWSER").is_none(),
            "the console test needs chromium and playwright-core: bash runtime/wop-serve/tests/setup.sh"
        );
        eprintln!(
            "SKIPPED: no chromium or playwright-core (bash runtime/wop-serve/tests/setup.sh)"
        );
    }
    ok
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_in_headless_chromium() {
    if !ready() {
        return;
    }
    let upstream = wop_testkit::Server::start(wop_testkit::Mode::Ok).await;
    let policy = format!(
        "[prices]\ncurrency = \"EUR\"\nperMillionFuel = 2.0\n\n[packs.tool-call]\ncapabilities = [\"tools\"]\ntools = [\"crm:*\"]\n\n[[tools]]\nid = \"crm:write\"\nurl = \"{}\"\nsafetyTier = \"write\"\n",
        upstream.url("/w")
    );
    let s = start(&policy, &serve_toml(""), &["hello", "tool-call"]).await;
    for i in 0..3 {
        let r = post_json(
            s.addr,
            "/host/wop/invocations",
            TOKEN,
            &json!({"typeId": "wop.samples.hello", "inputs": {"name": format!("c{i}")}}),
        )
        .await;
        assert_eq!(r.json()["outcome"], "completed");
    }
    let r = post_json(
        s.addr,
        "/host/wop/invocations",
        TOKEN,
        &json!({"typeId": "wop.samples.tool-call", "inputs": {"tool": "crm:write"},
                "nodeContext": {"runId": "console-run", "nodeId": "n"}}),
    )
    .await;
    assert_eq!(r.json()["outcome"], "completed");
    let r = post_json(
        s.addr,
        "/host/wop/invocations",
        TOKEN,
        &json!({"typeId": "wop.samples.hello", "inputs": {"name": 7}}),
    )
    .await;
    assert_eq!(r.json()["error"]["code"], "validation_error");

    // Without a session or token: the sign-in form, no data.
    let r = req(s.addr, "GET", "/console", &[], b"").await;
    let page = String::from_utf8_lossy(&r.body).to_string();
    assert!(page.contains("Sign in") && !page.contains("wop.samples.hello"));
    // A token without the operator scope cannot sign in.
    let r = req(
        s.addr,
        "POST",
        "/console/login",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        format!("token={OTHER_TOKEN}").as_bytes(),
    )
    .await;
    assert_eq!(r.status, 403);

    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let shot = dir.join("../../target/console.png");
    let out = tokio::process::Command::new("node")
        .arg(dir.join("tests/browser/console.mjs"))
        .arg(format!("http://localhost:{}", s.addr.port()))
        .arg(TOKEN)
        .arg(&shot)
        .arg("console-run")
        .arg("acme")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(v["beforeLogin"], 1, "{v}");
    let packs: Vec<&str> = v["packs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(packs, ["hello", "tool-call"], "{v}");
    // Each pack's provenance: unsigned here, and the policy requires none.
    assert_eq!(
        v["provenance"],
        json!([
            "unsigned (no signature required)",
            "unsigned (no signature required)"
        ]),
        "{v}"
    );
    let codes: Vec<&str> = v["codes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(codes[0], "validation_error", "most recent first: {v}");
    assert_eq!(
        codes.iter().filter(|c| **c == "completed").count(),
        4,
        "{v}"
    );
    assert!(v["series"].as_u64().unwrap() >= 2, "one line per pack: {v}");
    assert_eq!(v["points"], 60, "a point per minute: {v}");
    assert!(
        v["chartWidth"].as_f64().unwrap() > 600.0,
        "drawn at laptop width: {v}"
    );
    assert_eq!(v["effects"], 1, "the run's effect: {v}");
    assert_eq!(v["cookie"][0]["httpOnly"], true);
    assert_eq!(v["cookie"][0]["sameSite"], "Strict");
    assert_eq!(v["tokenInPage"], false);
    assert!(shot.exists());
    s.stop().await;
}
