//! `text/event-stream` on the invoke API is live: each event reaches the
//! client while the node is still running, not with the outcome.

use super::*;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// A tool provider that answers its one request only once `release`
/// fires: until then the node is blocked inside its tool call.
async fn held_provider() -> (String, oneshot::Sender<()>) {
    let (url, _arrived, release) = held_provider_signalling().await;
    (url, release)
}

/// [`held_provider`], also saying when the request has arrived.
async fn held_provider_signalling() -> (String, oneshot::Receiver<()>, oneshot::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/charge", listener.local_addr().unwrap());
    let (release, released) = oneshot::channel::<()>();
    let (arrive, arrived) = oneshot::channel::<()>();
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        // Headers, then Content-Length bytes of body.
        loop {
            let n = s.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the provider's client went away");
            buf.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&buf).to_ascii_lowercase();
            if let Some(end) = text.find("\r\n\r\n") {
                let len = text
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                if buf.len() >= end + 4 + len {
                    break;
                }
            }
        }
        let _ = arrive.send(());
        let _ = released.await;
        let body = r#"{"ok":true}"#;
        let resp = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        s.write_all(resp.as_bytes()).await.unwrap();
    });
    (url, arrived, release)
}

/// Starts a service (`serve.toml` lines `cfg`) whose `tool-call` node
/// calls the provider at `url` (with a 60 s tool timeout) and sends it,
/// on a raw connection with the extra header lines `headers`, an
/// invocation of run `run_id`.
async fn send_held_call(url: &str, run_id: &str, headers: &str, cfg: &str) -> (Running, TcpStream) {
    let policy = super::mcp::tool_call_policy(url).replace("timeoutMs = 3000", "timeoutMs = 60000");
    let s = start(&policy, &serve_toml(cfg), &["tool-call"]).await;
    let body = json!({"typeId": "wop.samples.tool-call",
                      "inputs": {"tool": "payments:charge", "arguments": {"amount": 5}},
                      "nodeContext": {"runId": run_id, "nodeId": "charge"}})
    .to_string();
    let mut stream = TcpStream::connect(s.addr).await.unwrap();
    let head = format!(
        "POST /host/wop/invocations HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n{headers}Authorization: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        s.addr,
        bearer(TOKEN),
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    (s, stream)
}

/// The node logs and calls a tool whose provider holds its answer until
/// the client has *received* the `agent.tool-called` event. If events were
/// sent only at the end, the provider would never be released and the
/// call would fail at its timeout (`outcome` would not be `completed`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_stream_while_the_node_runs() {
    let (url, release) = held_provider().await;
    // A long tool timeout: only live delivery lets the call complete.
    let (s, mut stream) =
        send_held_call(&url, "wf/stream-1", "Accept: text/event-stream\r\n", "").await;

    // Read until the tool call shows up in the stream, then release it.
    let mut got = Vec::new();
    let mut chunk = [0u8; 8192];
    let mut release = Some(release);
    loop {
        let n = stream.read(&mut chunk).await.unwrap();
        if n == 0 {
            break;
        }
        got.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&got);
        if release.is_some() && text.contains("event: agent.tool-called") {
            assert!(
                !text.contains("event: outcome"),
                "the outcome came before the provider answered: {text}"
            );
            let _ = release.take().map(|r| r.send(()));
        }
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    assert!(
        release.is_none(),
        "agent.tool-called never streamed: {text}"
    );
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("{needle} missing: {text}"))
    };
    // In order: the node's log line, the call, its return, the outcome.
    assert!(at("calling tool") < at("event: agent.tool-called"));
    assert!(at("event: agent.tool-called") < at("event: agent.tool-returned"));
    assert!(at("event: agent.tool-returned") < at("event: outcome"));
    let outcome: Value = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .next_back()
        .and_then(|l| serde_json::from_str(l).ok())
        .expect("an outcome frame");
    assert_eq!(outcome["outcome"], "completed", "{outcome}");
    // Each event once: the live ones are not repeated at the end.
    assert_eq!(
        text.matches("event: agent.tool-called").count(),
        1,
        "{text}"
    );
    assert_eq!(
        text.matches("event: log.appended").count(),
        outcome["events"].as_array().map_or(0, |e| e
            .iter()
            .filter(|e| e["type"] == "log.appended")
            .count()),
        "{text}"
    );
    s.stop().await;
}

/// A client that goes away mid-invocation does not cancel it: the node,
/// blocked in its tool call when the client's connection closes, finishes
/// once the provider answers, and its effect is recorded as completed.
/// (The invocation runs on the client's connection task; when that task
/// is dropped, the rest of it moves to a task of its own.) And clients
/// that go away cannot pile up abandoned invocations: the abandoned one
/// keeps its `maxInFlight` permit, so with one permit the next caller is
/// refused (503) until it ends, and the permit comes back after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_does_not_cancel_its_invocation() {
    let (url, arrived, release) = held_provider_signalling().await;
    let (s, stream) = send_held_call(&url, "wf-gone-1", "", "maxInFlight = 1").await;
    arrived.await.unwrap();
    // The node is inside its tool call: the client goes away.
    drop(stream);
    let effects = || async {
        req(
            s.addr,
            "GET",
            "/runs/wf-gone-1/effects",
            &[("authorization", bearer(TOKEN).as_str())],
            b"",
        )
        .await
        .json()
    };
    let v = effects().await;
    assert_eq!(v["effects"][0]["state"], "claimed", "{v}");
    let another = json!({"typeId": "wop.samples.tool-call",
                         "inputs": {"tool": "payments:charge", "arguments": {"amount": 1}}});
    let r = post_json(s.addr, "/host/wop/invocations", TOKEN, &another).await;
    assert_eq!(r.status, 503, "the abandoned invocation gave up its permit");
    assert_eq!(
        req(s.addr, "GET", "/healthz", &[], b"").await.json()["inFlight"],
        1
    );
    release.send(()).unwrap();
    // Wait (bounded) for the abandoned invocation to finish on its own.
    let mut last = Value::Null;
    for _ in 0..600 {
        last = effects().await;
        if last["effects"][0]["state"] == "completed" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(last["effects"][0]["state"], "completed", "{last}");
    let mut in_flight = Value::Null;
    for _ in 0..600 {
        in_flight = req(s.addr, "GET", "/healthz", &[], b"").await.json()["inFlight"].clone();
        if in_flight == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(in_flight, 0, "the permit never came back");
    s.stop().await;
}
