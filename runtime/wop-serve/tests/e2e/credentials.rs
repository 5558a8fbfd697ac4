//! Credentials through `wop serve` (issue 21): the host attaches its own
//! credential on the way out and never the caller's bearer token; neither
//! value appears in anything the service answers — the invocation (JSON
//! and event stream), usage, effects, `/metrics` or the console.

use super::*;
use serde_json::json;
use wop_testkit::{Mode, Server as Upstream};

const API: &str = "sk-serve-API-5c0ffee9d1";

fn policy(audience: &Upstream, tool: &Upstream, secret_file: &str) -> String {
    format!(
        r#"[egress]
allowLoopback = true

[[tools]]
id = "creds:echo"
url = "{tool}"
safetyTier = "write"

[[tools]]
id = "creds:other"
url = "{tool}"
safetyTier = "read"

[secrets.api]
value = "file:{secret_file}"
audiences = ["http://{aud}"]
tools = ["creds:echo"]

[secrets.tenant-key]
tenants = {{ acme = "file:{secret_file}" }}
audiences = ["http://{aud}"]
attach = "header:x-api-key"

[packs.exfil]
capabilities = ["log", "http", "tools", "mcp"]
tools = ["creds:*"]
egress = ["http://127.0.0.1:*"]
secrets = ["api", "tenant-key"]
"#,
        tool = tool.url("/tool"),
        aud = audience.addr,
    )
}

fn absent(what: &str, bytes: &[u8]) {
    for needle in [API, TOKEN] {
        assert!(
            !bytes.windows(needle.len()).any(|w| w == needle.as_bytes()),
            "{what} contains {needle}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_attaches_its_credential_never_the_callers_and_shows_neither() {
    let audience = Upstream::start(Mode::EchoHeaders).await;
    let outsider = Upstream::start(Mode::EchoHeaders).await;
    let tool = Upstream::start(Mode::EchoHeaders).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("api");
    std::fs::write(&file, API).unwrap();
    let store = wop_serve::StoreChoice::Spec(dir.path().join("effects").display().to_string());
    let s = start_on(
        &policy(&audience, &tool, &file.display().to_string()),
        &serve_toml(""),
        &["exfil"],
        store,
    )
    .await;
    assert!(s.refused.is_empty(), "{:?}", s.refused);
    let attempts = json!([
        {"fetch": {"url": audience.url("/in")}},
        {"fetch": {"url": outsider.url("/out")}},
        {"tool": {"id": "creds:echo", "arguments": {}}},
        {"tool": {"id": "creds:other", "arguments": {}}},
    ]);
    let body = json!({"typeId": "wop.testing.exfil", "inputs": {"attempts": attempts},
                      "nodeContext": {"runId": "cred-run", "nodeId": "n"}});
    let plain = post_json(s.addr, "/host/wop/invocations", TOKEN, &body).await;
    assert_eq!(plain.json()["outcome"], "completed", "{:?}", plain.json());
    let auth = bearer(TOKEN);
    let streamed = req(
        s.addr,
        "POST",
        "/host/wop/invocations",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", &auth),
            ("Accept", "text/event-stream"),
        ],
        body.to_string().as_bytes(),
    )
    .await;
    assert_eq!(streamed.status, 200);

    // Where it went: the host's credential to its audience (twice: two
    // invocations) and to the tool it lists; the caller's token nowhere.
    let authz = |u: &Upstream| -> Vec<Option<String>> {
        u.requests()
            .iter()
            .map(|r| r.headers.get("authorization").cloned())
            .collect()
    };
    let host = Some(format!("Bearer {API}"));
    assert_eq!(authz(&audience), vec![host.clone(), host.clone()]);
    assert_eq!(authz(&outsider), vec![None, None]);
    // creds:echo (a write) fired once: the second invocation replayed it.
    assert_eq!(authz(&tool), vec![host.clone(), None, None]);
    for u in [&audience, &outsider, &tool] {
        for r in u.requests() {
            let seen = format!("{r:?}");
            assert!(
                !seen.contains(TOKEN),
                "the caller's token went upstream: {seen}"
            );
        }
    }

    // What the service shows: nothing of either value.
    absent("the invocation", &plain.body);
    absent("the event stream", &streamed.body);
    assert!(
        String::from_utf8_lossy(&plain.body).contains("[redacted:api]"),
        "the echoes were redacted"
    );
    for path in [
        "/metrics",
        "/console",
        "/host/wop/usage?run=cred-run",
        "/runs/cred-run/effects",
    ] {
        let r = get(s.addr, TOKEN, path).await;
        assert_eq!(
            r.status,
            200,
            "{path}: {}",
            String::from_utf8_lossy(&r.body)
        );
        absent(path, &r.body);
    }

    // Another tenant has no value of the per-tenant secret.
    let other = json!({"typeId": "wop.testing.exfil-tenant", "inputs": {"attempts": []}});
    let r = post_json(s.addr, "/host/wop/invocations", OTHER_TOKEN, &other).await;
    assert_eq!(
        r.json()["error"]["code"],
        "credential_unavailable",
        "{:?}",
        r.json()
    );
    s.stop().await;
}
