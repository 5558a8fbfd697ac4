//! Host-held credentials through the real path: the hostile `exfil`
//! testing pack → runtime → gate → safe-fetch / HTTP tool / MCP over HTTP,
//! against loopback servers that record (and reflect) every header they
//! receive. The credential must arrive where its audience says, nowhere
//! else, and never come back to the pack, its events, its usage or the
//! effect store.

use super::*;
use serde_json::json;
use std::sync::Arc;
use wop_runtime::store::{KvStore, SledStore};
use wop_runtime::{ErrorCode, NodeError, Outcome, RunContext};
use wop_testkit::{Mode, Server};

const API: &str = "sk-test-API-7f3a9c1e5b";
const ACME: &str = "acme-tenant-key-41d2e8";
const GLOBEX: &str = "globex-tenant-key-93bb01";

/// Loopback servers: two reflecting endpoints (one in the audience), a
/// redirector in the audience pointing at the outsider, an encoded
/// responder, and HTTP tool endpoints.
struct World {
    audience: Server,
    outsider: Server,
    redirector: Server,
    encoded: Server,
    tool_echo: Server,
    tool_other: Server,
    tool_reject: Server,
    dir: tempfile::TempDir,
}

impl World {
    async fn start() -> World {
        let outsider = Server::start(Mode::EchoHeaders).await;
        let redirect = format!(
            "HTTP/1.1 302 Found\r\nlocation: {}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            outsider.url("/reflect")
        );
        let encoded = "HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: 4\r\nconnection: close\r\n\r\n\x1f\u{8b}\x08\x00";
        let dir = tempfile::tempdir().unwrap();
        for (name, value) in [("api", API), ("acme", ACME), ("globex", GLOBEX)] {
            std::fs::write(dir.path().join(name), format!("{value}\n")).unwrap();
        }
        World {
            audience: Server::start(Mode::EchoHeaders).await,
            outsider,
            redirector: Server::start(Mode::Raw(redirect)).await,
            encoded: Server::start(Mode::Raw(encoded.to_owned())).await,
            tool_echo: Server::start(Mode::EchoHeaders).await,
            tool_other: Server::start(Mode::EchoHeaders).await,
            tool_reject: Server::start(Mode::Status(
                401,
                format!("{{\"error\": \"invalid key {API}\"}}"),
            ))
            .await,
            dir,
        }
    }

    fn file(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// The policy; `api_extra` goes into `[secrets.api]`, `mcp` is an
    /// `[mcp.servers.py]` body (or empty).
    fn policy(&self, api_extra: &str, mcp: &str) -> String {
        self.policy_with(api_extra, mcp, &[])
    }

    /// The policy, with `more` audiences for `[secrets.api]`.
    fn policy_with(&self, api_extra: &str, mcp: &str, more: &[String]) -> String {
        let origin = |s: &Server| format!("\"http://{}\"", s.addr);
        let more: String = more.iter().map(|a| format!(", \"{a}\"")).collect();
        let mcp_grant = if mcp.is_empty() {
            ""
        } else {
            "mcp = [\"py/whoami\", \"py-plain/whoami\"]"
        };
        let mcp_secret = if mcp.is_empty() {
            ""
        } else {
            "mcpServers = [\"py\"]"
        };
        let mcp_section = if mcp.is_empty() {
            String::new()
        } else {
            format!("[mcp.servers.py]\n{mcp}\n[mcp.servers.py-plain]\n{mcp}\n")
        };
        format!(
            r#"
[egress]
allowLoopback = true
maxRedirects = 3

[[tools]]
id = "creds:echo"
url = "{echo}"
safetyTier = "write"

[[tools]]
id = "creds:other"
url = "{other}"
safetyTier = "read"

[[tools]]
id = "creds:reject"
url = "{reject}"
safetyTier = "read"

{mcp_section}
[secrets.api]
value = "file:{api_file}"
audiences = [{aud}, {redir}, {enc}{more}]
tools = ["creds:echo", "creds:reject"]
{mcp_secret}
{api_extra}

[secrets.tenant-key]
tenants = {{ acme = "file:{acme}", globex = "file:{globex}" }}
audiences = [{aud}]
attach = "header:X-Api-Key"

[packs.exfil]
capabilities = ["log", "http", "tools", "mcp"]
tools = ["creds:*"]
egress = ["http://127.0.0.1:*"]
{mcp_grant}
secrets = ["api", "tenant-key"]
"#,
            echo = self.tool_echo.url("/tool"),
            other = self.tool_other.url("/tool"),
            reject = self.tool_reject.url("/tool"),
            api_file = self.file("api"),
            acme = self.file("acme"),
            globex = self.file("globex"),
            aud = origin(&self.audience),
            redir = origin(&self.redirector),
            enc = origin(&self.encoded),
        )
    }
}

async fn runtime_with(policy: &str, store: Option<Arc<dyn KvStore>>) -> Runtime {
    runtime_traced(policy, store, None).await
}

/// With traces exported to `collector`, when given.
async fn runtime_traced(
    policy: &str,
    store: Option<Arc<dyn KvStore>>,
    collector: Option<&Server>,
) -> Runtime {
    let mut cfg = RuntimeConfig::new();
    cfg.policy(Policy::from_toml(policy).expect("policy"));
    if let Some(s) = store {
        cfg.effect_store(s);
    }
    if let Some(c) = collector {
        cfg.otlp(wop_runtime::gate::telemetry::otlp::Config {
            endpoint: c.url("/v1/traces"),
            headers: Vec::new(),
            sampler: Default::default(),
        });
    }
    let rt = Runtime::new(&cfg).expect("runtime");
    rt.load_pack(&pack("exfil")).await.expect("load exfil");
    rt
}

fn invocation(type_id: &str, tenant: &str, run: &str, attempts: Value) -> InvokeRequest {
    let mut r = InvokeRequest::new(type_id, json!({ "attempts": attempts }));
    r.context = RunContext {
        run_id: run.into(),
        node_id: "n1".into(),
        tenant_id: tenant.into(),
        attempt: 1,
    };
    r
}

async fn exfil(rt: &Runtime, tenant: &str, attempts: Value) -> InvocationReport {
    rt.invoke(invocation(
        "wop.testing.exfil",
        tenant,
        "run-cred",
        attempts,
    ))
    .await
}

fn saw(r: &InvocationReport) -> Vec<Value> {
    match &r.outcome {
        Ok(Outcome::Completed { output }) => output["saw"].as_array().unwrap().clone(),
        other => panic!("expected a completed node, got {other:?}"),
    }
}

fn failure(r: &InvocationReport) -> &NodeError {
    match &r.outcome {
        Err(e) => e,
        Ok(o) => panic!("expected a failure, got {o:?}"),
    }
}

fn fetch(url: String) -> Value {
    json!({"fetch": {"url": url}})
}

fn fetch_with(url: String, headers: Value) -> Value {
    json!({"fetch": {"url": url, "headers": headers}})
}

/// The `authorization` header of every request `s` received.
fn authorizations(s: &Server) -> Vec<Option<String>> {
    s.requests()
        .iter()
        .map(|r| r.headers.get("authorization").cloned())
        .collect()
}

/// (decision, credentialId, reason) of every credential decision.
fn credential_decisions(r: &InvocationReport) -> Vec<(String, String, String)> {
    r.events
        .iter()
        .filter_map(|e| match e {
            Event::EgressDecided {
                decision,
                credential_id: Some(c),
                reason,
                ..
            } => Some((decision.clone(), c.clone(), reason.clone())),
            _ => None,
        })
        .collect()
}

fn assert_absent(what: &str, haystack: &[u8]) {
    for value in [API, ACME, GLOBEX] {
        let found = haystack.windows(value.len()).any(|w| w == value.as_bytes());
        assert!(!found, "{what} contains the credential value {value}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn safe_fetch_attaches_only_in_the_audience_and_never_across_origins() {
    let w = World::start().await;
    let rt = runtime_with(&w.policy("", ""), None).await;
    let r = exfil(
        &rt,
        "acme",
        json!([
            fetch(w.audience.url("/in")),
            fetch(w.outsider.url("/out")),
            fetch(w.redirector.url("/go")),
            fetch_with(w.outsider.url("/named"), json!({"x-wop-credential": "api"})),
            fetch_with(
                w.audience.url("/ranged"),
                json!({"accept-encoding": "gzip", "range": "bytes=0-4", "authorization": "Bearer mine"})
            ),
            fetch(w.encoded.url("/z")),
            fetch_with(w.audience.url("/ghost"), json!({"x-wop-credential": "ghost"})),
        ]),
    )
    .await;
    let saw = saw(&r);

    // In the audience: the credential arrived (replacing the pack's own
    // Authorization), unencoded and whole.
    let got = authorizations(&w.audience);
    assert_eq!(got[0].as_deref(), Some(format!("Bearer {API}").as_str()));
    let ranged = &w.audience.requests()[1];
    assert_eq!(
        ranged.headers.get("authorization").map(String::as_str),
        Some(format!("Bearer {API}").as_str())
    );
    assert_eq!(ranged.headers["accept-encoding"], "identity");
    assert!(
        !ranged.headers.contains_key("range"),
        "{:?}",
        ranged.headers
    );
    // The request naming a credential it does not have was never sent.
    assert_eq!(w.audience.count(), 2, "{:?}", w.audience.requests());
    // The per-tenant credential of another node was not attached here.
    assert!(!ranged.headers.contains_key("x-api-key"));

    // Outside the audience: only the plain request arrived, without it;
    // neither the redirect nor the named request reached the outsider.
    assert_eq!(authorizations(&w.outsider), vec![None]);
    assert_eq!(w.outsider.requests()[0].line, "GET /out HTTP/1.1");
    assert_eq!(saw[2]["error"]["code"], "egress_denied", "{}", saw[2]);
    assert_eq!(saw[2]["error"]["details"]["reason"], "policy-denied");
    assert_eq!(saw[3]["error"]["code"], "egress_denied", "{}", saw[3]);
    assert_eq!(saw[3]["error"]["details"]["reason"], "out-of-audience");
    assert_eq!(
        saw[5]["error"]["details"]["reason"], "encoded-response",
        "{}",
        saw[5]
    );
    assert_eq!(
        saw[6]["error"]["details"]["reason"],
        "provenance-unevaluable"
    );

    // The echo came back redacted, with the length of what was returned.
    assert!(
        saw[0]["body"].as_str().unwrap().contains("[redacted:api]"),
        "{}",
        saw[0]
    );
    let len = saw[0]["headers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h[0] == "content-length")
        .map(|h| h[1].as_str().unwrap().parse::<usize>().unwrap());
    assert_eq!(len, Some(saw[0]["bodyLength"].as_u64().unwrap() as usize));

    // egress.decided names the credential, never its value.
    let d = credential_decisions(&r);
    assert!(
        d.contains(&("allowed".into(), "api".into(), "ok".into())),
        "{d:?}"
    );
    assert!(
        d.contains(&("denied".into(), "api".into(), "policy-denied".into())),
        "{d:?}"
    );
    assert!(
        d.contains(&("denied".into(), "api".into(), "out-of-audience".into())),
        "{d:?}"
    );
    assert!(
        d.contains(&(
            "denied".into(),
            "ghost".into(),
            "provenance-unevaluable".into()
        )),
        "{d:?}"
    );
    assert_absent(
        "the report",
        serde_json::to_string(&r.events).unwrap().as_bytes(),
    );
    assert_absent("the outcome", format!("{:?}", r.outcome).as_bytes());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_downgrade_policy_sends_out_of_audience_requests_without_the_credential() {
    let w = World::start().await;
    let rt = runtime_with(&w.policy("outOfAudience = \"downgrade\"", ""), None).await;
    let r = exfil(
        &rt,
        "acme",
        json!([
            fetch(w.redirector.url("/go")),
            fetch_with(w.outsider.url("/named"), json!({"x-wop-credential": "api"})),
        ]),
    )
    .await;
    let saw = saw(&r);
    assert_eq!(saw[0]["status"], 200, "{}", saw[0]);
    assert_eq!(saw[1]["status"], 200, "{}", saw[1]);
    // The redirector got it; the outsider got both requests, without it.
    assert_eq!(
        authorizations(&w.redirector),
        vec![Some(format!("Bearer {API}"))]
    );
    assert_eq!(authorizations(&w.outsider), vec![None, None]);
    let d = credential_decisions(&r);
    assert!(
        d.contains(&("downgraded".into(), "api".into(), "policy-denied".into())),
        "{d:?}"
    );
    assert!(
        d.contains(&("downgraded".into(), "api".into(), "out-of-audience".into())),
        "{d:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_tools_carry_the_credential_only_when_listed_and_echoes_are_redacted() {
    let w = World::start().await;
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn KvStore> = Arc::new(SledStore::open(&dir.path().join("effects")).unwrap());
    let collector = Server::start(Mode::Ok).await;
    let rt = runtime_traced(&w.policy("", ""), Some(store.clone()), Some(&collector)).await;
    let r = exfil(
        &rt,
        "acme",
        json!([
            {"tool": {"id": "creds:echo", "arguments": {"x": 1}}},
            {"tool": {"id": "creds:other", "arguments": {}}},
            {"tool": {"id": "creds:reject", "arguments": {}}},
            {"fetch": {"url": w.audience.url("/post"), "method": "POST"}},
        ]),
    )
    .await;
    let saw = saw(&r);
    assert_eq!(
        authorizations(&w.tool_echo),
        vec![Some(format!("Bearer {API}"))]
    );
    assert_eq!(authorizations(&w.tool_other), vec![None]);
    assert_eq!(
        authorizations(&w.tool_reject),
        vec![Some(format!("Bearer {API}"))]
    );
    // What the echo tool returned reached the pack redacted; so did the
    // error that quoted the key.
    assert_eq!(
        saw[0]["result"]["headers"]["authorization"], "Bearer [redacted:api]",
        "{}",
        saw[0]
    );
    assert_eq!(saw[2]["error"]["code"], "validation_error", "{}", saw[2]);
    assert!(saw[2].to_string().contains("[redacted:api]"), "{}", saw[2]);
    let d = credential_decisions(&r);
    assert_eq!(
        d.iter().filter(|x| x.0 == "allowed").count(),
        3,
        "two tools and the fetch: {d:?}"
    );

    // Nothing the host kept holds the value: the report, the usage, and
    // every byte of the effect store's files (effects and usage records).
    assert_absent(
        "the events",
        serde_json::to_string(&r.events).unwrap().as_bytes(),
    );
    assert_absent("the outcome", format!("{:?}", r.outcome).as_bytes());
    assert_absent(
        "the usage",
        serde_json::to_string(&r.usage).unwrap().as_bytes(),
    );
    // And the trace export (every span of the invocation and its calls).
    rt.flush_traces(std::time::Duration::from_secs(10)).await;
    let exported: String = collector
        .requests()
        .iter()
        .map(|r| r.body.clone())
        .collect();
    assert!(exported.contains("openwop.activity.tool"), "{exported}");
    assert_absent("the trace export", exported.as_bytes());
    drop(rt);
    drop(store);
    let mut files = vec![dir.path().to_path_buf()];
    let mut read = 0;
    while let Some(p) = files.pop() {
        if p.is_dir() {
            files.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        } else {
            let bytes = std::fs::read(&p).unwrap();
            read += bytes.len();
            assert_absent(&format!("effect store file {}", p.display()), &bytes);
        }
    }
    assert!(read > 0, "the effect store wrote nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_without_its_secret_fails_before_it_runs_and_tenants_get_their_own() {
    let w = World::start().await;
    let rt = runtime_with(&w.policy("", ""), None).await;
    let tenant = |t: &str| {
        invocation(
            "wop.testing.exfil-tenant",
            t,
            &format!("run-{t}"),
            json!([fetch(w.audience.url("/t"))]),
        )
    };
    // Each tenant's value, only to its own invocation.
    let a = rt.invoke(tenant("acme")).await;
    let g = rt.invoke(tenant("globex")).await;
    saw(&a);
    saw(&g);
    let keys: Vec<Option<String>> = w
        .audience
        .requests()
        .iter()
        .map(|r| r.headers.get("x-api-key").cloned())
        .collect();
    assert_eq!(keys, vec![Some(ACME.to_owned()), Some(GLOBEX.to_owned())]);
    // `api` is declared by another node of the pack: not attached here.
    assert_eq!(authorizations(&w.audience), vec![None, None]);

    // A tenant with no value: refused before the pack ran.
    let before = w.audience.count();
    let r = rt.invoke(tenant("initech")).await;
    let e = failure(&r);
    assert_eq!(e.code, ErrorCode::CredentialUnavailable.as_str(), "{e:?}");
    assert_eq!(e.details.as_ref().unwrap()["secretId"], "tenant-key");
    assert!(
        e.message.contains("[secrets.tenant-key.tenants]"),
        "{}",
        e.message
    );
    assert!(r.events.is_empty(), "nothing ran: {:?}", r.events);
    assert_eq!(w.audience.count(), before);

    // A node that declares no secret gets none attached.
    let r = rt
        .invoke(invocation(
            "wop.testing.exfil-bare",
            "acme",
            "run-bare",
            json!([fetch(w.audience.url("/bare"))]),
        ))
        .await;
    saw(&r);
    let last = w.audience.requests().pop().unwrap();
    assert!(!last.headers.contains_key("authorization"));
    assert!(!last.headers.contains_key("x-api-key"));

    // Not granted to the pack, and a value that cannot be read.
    let ungranted = w.policy("", "").replace(
        "secrets = [\"api\", \"tenant-key\"]",
        "secrets = [\"tenant-key\"]",
    );
    let rt2 = runtime_with(&ungranted, None).await;
    let e = failure(&exfil(&rt2, "acme", json!([])).await).clone();
    assert_eq!(e.code, "credential_unavailable");
    assert!(
        e.message
            .contains("needs secret `api`, which the operator has not granted to pack `exfil`"),
        "{}",
        e.message
    );
    std::fs::remove_file(w.dir.path().join("api")).unwrap();
    let rt3 = runtime_with(&w.policy("", ""), None).await;
    let e = failure(&exfil(&rt3, "acme", json!([])).await).clone();
    assert_eq!(e.code, "credential_unavailable");
    assert!(
        e.message.contains("is not usable: cannot open"),
        "{}",
        e.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_credential_is_denied_not_sent() {
    let w = World::start().await;
    let rt = runtime_with(&w.policy("expiresAt = \"2020-01-01T00:00:00Z\"", ""), None).await;
    let r = exfil(
        &rt,
        "acme",
        json!([fetch(w.audience.url("/x")), {"tool": {"id": "creds:echo"}}]),
    )
    .await;
    let saw = saw(&r);
    for s in &saw {
        assert_eq!(s["error"]["code"], "egress_denied", "{s}");
        assert_eq!(s["error"]["details"]["reason"], "expired", "{s}");
    }
    assert_eq!(w.audience.count(), 0);
    assert_eq!(w.tool_echo.count(), 0);
    let d = credential_decisions(&r);
    assert_eq!(d.len(), 2, "{d:?}");
    assert!(
        d.iter().all(|x| x.0 == "denied" && x.2 == "expired"),
        "{d:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_over_http_carries_the_credential_and_its_echo_is_redacted() {
    if super::mcp::skip("mcp_over_http_carries_the_credential_and_its_echo_is_redacted") {
        return;
    }
    let (_server, port) = wop_testkit::start_python_mcp_http();
    let w = World::start().await;
    let server = format!(
        "transport = \"streamable-http\"\nurl = \"http://127.0.0.1:{port}/mcp\"\ntimeoutMs = 20000\ntiers = {{ whoami = \"read\", auth_log = \"read\" }}"
    );
    let rt = runtime_with(&w.policy("", &server), None).await;
    let r = exfil(
        &rt,
        "acme",
        json!([
            {"mcp": {"server": "py", "tool": "whoami", "arguments": {}}},
            {"mcp": {"server": "py-plain", "tool": "whoami", "arguments": {}}},
        ]),
    )
    .await;
    let saw = saw(&r);
    let text = saw[0].to_string();
    assert!(text.contains("Bearer [redacted:api]"), "{text}");
    // The same server under an id the credential does not list: nothing
    // attached (the server reports no Authorization at all).
    assert!(!saw[1].to_string().contains("Bearer"), "{}", saw[1]);
    assert_absent(
        "the events",
        serde_json::to_string(&r.events).unwrap().as_bytes(),
    );
    let d = credential_decisions(&r);
    assert_eq!(d, vec![("allowed".into(), "api".into(), "ok".into())]);

    // What the server received, read without any credential in play: the
    // `mcp` sample pack on a runtime with no secrets.
    let plain = super::runtime(&format!(
        "[mcp.servers.py]\n{server}\n[packs.mcp]\ncapabilities = [\"log\", \"mcp\"]\nmcp = [\"py/auth_log\"]\n"
    ));
    plain.load_pack(&pack("mcp")).await.unwrap();
    let mut req = InvokeRequest::new(
        "wop.samples.mcp",
        json!({"server": "py", "tool": "auth_log", "arguments": {}}),
    );
    req.context.run_id = "run-auth-log".into();
    let log = plain.invoke(req).await;
    let out = match &log.outcome {
        Ok(Outcome::Completed { output }) => output.to_string(),
        other => panic!("{other:?}"),
    };
    assert!(out.contains(&format!("Bearer {API}")), "{out}");
    assert_eq!(
        out.matches("Bearer").count(),
        1,
        "only the call through `py` carried it: {out}"
    );
}

/// Whether `haystack` holds a credential value in any ASCII case: a URL
/// parser lowercases a value that comes back as a host name.
fn assert_absent_any_case(what: &str, haystack: &[u8]) {
    let hay = haystack.to_ascii_lowercase();
    for value in [API, ACME, GLOBEX] {
        let v = value.to_ascii_lowercase();
        let found = hay.windows(v.len()).any(|w| w == v.as_bytes());
        assert!(
            !found,
            "{what} contains the credential value {value} (in some case)"
        );
    }
}

fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// The value of response header `name` in what the pack saw.
fn header<'a>(saw: &'a Value, name: &str) -> Option<&'a str> {
    saw["headers"]
        .as_array()?
        .iter()
        .find(|h| h[0] == name)
        .and_then(|h| h[1].as_str())
}

/// Issue 33 item 2: an answer the host cannot search for the credential (a
/// compressed one) is refused whichever header says so, in whichever
/// instance and list element: `Transfer-Encoding: gzip, chunked`, or
/// `Content-Encoding: identity` followed by `Content-Encoding: gzip`.
/// Chunked framing alone is no encoding: that answer is read and redacted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credentialed_answer_under_any_encoding_is_refused() {
    // Long and repetitive enough that deflate compresses rather than
    // storing it.
    let echoed = format!(
        "{{\"authorization\":\"Bearer {API}\",\"pad\":\"{}\"}}",
        "ab".repeat(200)
    );
    let packed = gzip(echoed.as_bytes());
    // Compressed, the echo hides the value from a byte search.
    assert!(!packed.windows(API.len()).any(|w| w == API.as_bytes()));
    let mut te = format!(
        "HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\nconnection: close\r\n\r\n{:x}\r\n",
        packed.len()
    )
    .into_bytes();
    te.extend_from_slice(&packed);
    te.extend_from_slice(b"\r\n0\r\n\r\n");
    let mut ce = format!(
        "HTTP/1.1 200 OK\r\ncontent-encoding: identity\r\ncontent-encoding: gzip\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        packed.len()
    )
    .into_bytes();
    ce.extend_from_slice(&packed);
    let chunked = format!(
        "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-encoding: identity\r\nconnection: close\r\n\r\n{:x}\r\n{echoed}\r\n0\r\n\r\n",
        echoed.len()
    );
    let te = Server::start(Mode::RawBytes(te)).await;
    let ce = Server::start(Mode::RawBytes(ce)).await;
    let chunked = Server::start(Mode::Raw(chunked)).await;
    let w = World::start().await;
    let more: Vec<String> = [&te, &ce, &chunked]
        .iter()
        .map(|s| format!("http://{}", s.addr))
        .collect();
    let rt = runtime_with(&w.policy_with("", "", &more), None).await;
    let r = exfil(
        &rt,
        "acme",
        json!([
            fetch(te.url("/te")),
            fetch(ce.url("/ce")),
            fetch(chunked.url("/chunked"))
        ]),
    )
    .await;
    let saw = saw(&r);
    // Each request carried the credential...
    for s in [&te, &ce, &chunked] {
        assert_eq!(authorizations(s), vec![Some(format!("Bearer {API}"))]);
    }
    // ...and neither compressed answer came back.
    for (i, header) in [(0, "Transfer-Encoding"), (1, "Content-Encoding")] {
        assert_eq!(saw[i]["error"]["code"], "egress_denied", "{}", saw[i]);
        assert_eq!(
            saw[i]["error"]["details"]["reason"], "encoded-response",
            "{}",
            saw[i]
        );
        assert_eq!(saw[i]["error"]["details"]["header"], header, "{}", saw[i]);
    }
    assert_eq!(saw[2]["status"], 200, "{}", saw[2]);
    assert!(
        saw[2]["body"]
            .as_str()
            .unwrap()
            .contains("Bearer [redacted:api]"),
        "{}",
        saw[2]
    );
    assert_absent("the outcome", format!("{:?}", r.outcome).as_bytes());
}

/// Issue 33 item 3: with an audience path prefix of `/v1`, a path that
/// starts with `/v1/` but is not plain — which a decoding server or proxy
/// serves as `/admin/x` — never gets the credential: the request is
/// refused (`path-not-plain`), named or not. The plain path inside the
/// prefix gets it; a path outside it goes without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_prefix_audience_takes_only_plain_paths() {
    let w = World::start().await;
    let scoped = Server::start(Mode::EchoHeaders).await;
    let policy = w.policy_with("", "", &[format!("http://{}/v1", scoped.addr)]);
    let rt = runtime_with(&policy, None).await;
    let r = exfil(
        &rt,
        "acme",
        json!([
            fetch(scoped.url("/v1/..%2Fadmin%2Fx")),
            fetch(scoped.url("/v1/..;/admin/x")),
            fetch(scoped.url("/v1/%5C..%5Cadmin/x")),
            fetch_with(
                scoped.url("/v1/..%2Fadmin%2Fx"),
                json!({"x-wop-credential": "api"})
            ),
            fetch(scoped.url("/v1/admin/x")),
            fetch(scoped.url("/admin/x")),
        ]),
    )
    .await;
    let saw = saw(&r);
    for s in &saw[..4] {
        assert_eq!(s["error"]["code"], "egress_denied", "{s}");
        assert_eq!(s["error"]["details"]["reason"], "path-not-plain", "{s}");
    }
    let got: Vec<(String, Option<String>)> = scoped
        .requests()
        .iter()
        .map(|q| (q.line.clone(), q.headers.get("authorization").cloned()))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "GET /v1/admin/x HTTP/1.1".to_owned(),
                Some(format!("Bearer {API}"))
            ),
            ("GET /admin/x HTTP/1.1".to_owned(), None),
        ]
    );
    let refused = r
        .events
        .iter()
        .filter(|e| {
            matches!(e, Event::EgressDecided {
                decision, reason, cause: Some(c), credential_id: Some(id), ..
            } if decision == "denied" && reason == "policy-denied" && c == "path-not-plain" && id == "api")
        })
        .count();
    assert_eq!(refused, 4, "{:?}", r.events);
}

/// Collects the events streamed to a caller.
#[derive(Default)]
struct Collect(std::sync::Mutex<Vec<Event>>);

impl wop_runtime::EventSink for Collect {
    fn emit(&self, _run: &str, _node: &str, event: &Event) {
        self.0.lock().unwrap().push(event.clone());
    }
}

/// Issue 33 item 4: an audience that redirects to
/// `ftp://<credential>.invalid:1/` puts the value (lowercased by the URL
/// parser) into the refused hop's destination. Every event of a
/// credentialed invocation is redacted, in any case, in the report and in
/// what is streamed to the caller; so is the pack's error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credential_a_redirect_names_as_a_host_never_reaches_the_events() {
    let w = World::start().await;
    let bounce = format!(
        "HTTP/1.1 302 Found\r\nlocation: ftp://{API}.invalid:1/\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    );
    let bouncer = Server::start(Mode::Raw(bounce)).await;
    let policy = w.policy_with("", "", &[format!("http://{}", bouncer.addr)]);
    let rt = runtime_with(&policy, None).await;
    let streamed = Arc::new(Collect::default());
    let req = invocation(
        "wop.testing.exfil",
        "acme",
        "run-bounce",
        json!([fetch(bouncer.url("/go"))]),
    );
    let r = rt.invoke_streaming(req, streamed.clone()).await;
    let saw = saw(&r);
    assert_eq!(
        authorizations(&bouncer),
        vec![Some(format!("Bearer {API}"))]
    );
    assert_eq!(saw[0]["error"]["details"]["reason"], "scheme", "{}", saw[0]);
    let hop = r.events.iter().find_map(|e| match e {
        Event::EgressDecided {
            destination,
            cause: Some(c),
            ..
        } if c == "scheme" => Some(destination.clone()),
        _ => None,
    });
    assert_eq!(
        hop.as_deref(),
        Some("[redacted:api].invalid:1"),
        "{:?}",
        r.events
    );
    let streamed = streamed.0.lock().unwrap().clone();
    assert_eq!(streamed, r.events);
    assert_absent_any_case("the events", &serde_json::to_vec(&r.events).unwrap());
    assert_absent_any_case(
        "the streamed events",
        &serde_json::to_vec(&streamed).unwrap(),
    );
    assert_absent_any_case("the outcome", format!("{:?}", r.outcome).as_bytes());
}

/// Issue 33 item 5: the headers of a credentialed answer describe only the
/// body returned. A `HEAD` of an echo endpoint has no `Content-Length`
/// (it was the echo's, credential included); digests, `Content-Range` and,
/// for a body not returned, `ETag` are taken out; a `GET`'s length is the
/// returned body's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credentialed_answer_never_tells_the_credential_length() {
    let w = World::start().await;
    let described = Server::start(Mode::Raw(
        "HTTP/1.1 200 OK\r\ncontent-length: 57\r\ncontent-range: bytes 0-56/57\r\n\
         etag: \"39-5f1a\"\r\ncontent-md5: Q2hlY2sgSW50ZWdyaXR5IQ==\r\n\
         digest: sha-256=X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=\r\n\
         content-digest: sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:\r\n\
         repr-digest: sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:\r\n\
         x-kept: 1\r\nconnection: close\r\n\r\n"
            .to_owned(),
    ))
    .await;
    let policy = w.policy_with("", "", &[format!("http://{}", described.addr)]);
    let rt = runtime_with(&policy, None).await;
    let head = |url: String| json!({"fetch": {"url": url, "method": "HEAD"}});
    let r = exfil(
        &rt,
        "acme",
        json!([
            head(w.audience.url("/echo")),
            head(described.url("/d")),
            fetch(w.audience.url("/get")),
        ]),
    )
    .await;
    let saw = saw(&r);
    let carried = Some(format!("Bearer {API}"));
    assert_eq!(authorizations(&w.audience), vec![carried.clone(), carried]);
    assert_eq!(w.audience.requests()[0].line, "HEAD /echo HTTP/1.1");
    assert_eq!(saw[0]["status"], 200, "{}", saw[0]);
    assert_eq!(header(&saw[0], "content-length"), None, "{}", saw[0]);
    for name in [
        "content-length",
        "content-range",
        "etag",
        "content-md5",
        "digest",
        "content-digest",
        "repr-digest",
    ] {
        assert_eq!(header(&saw[1], name), None, "{name}: {}", saw[1]);
    }
    assert_eq!(header(&saw[1], "x-kept"), Some("1"), "{}", saw[1]);
    let len = header(&saw[2], "content-length").map(|l| l.parse::<u64>().unwrap());
    assert_eq!(len, saw[2]["bodyLength"].as_u64(), "{}", saw[2]);
}

/// Issue 33 item 6: a pack cannot choose the trace context a destination
/// sees. `traceparent`, `tracestate` and other tracers' propagation
/// headers set by the pack are refused (`trace-context`) and never sent;
/// the destination receives only the host's own `traceparent` (`baggage`
/// parents nothing and passes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pack_cannot_choose_the_trace_context_a_destination_sees() {
    const PACK_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    let w = World::start().await;
    let collector = Server::start(Mode::Ok).await;
    let rt = runtime_traced(&w.policy("", ""), None, Some(&collector)).await;
    let r = exfil(
        &rt,
        "acme",
        json!([
            fetch_with(
                w.outsider.url("/tp"),
                json!({"traceparent": format!("00-{PACK_TRACE}-00f067aa0ba902b7-01")})
            ),
            fetch_with(w.outsider.url("/ts"), json!({"tracestate": "pack=chosen"})),
            fetch_with(
                w.outsider.url("/b3"),
                json!({"b3": format!("{PACK_TRACE}-00f067aa0ba902b7-1")})
            ),
            fetch_with(w.outsider.url("/xb3"), json!({"X-B3-TraceId": PACK_TRACE})),
            fetch_with(w.outsider.url("/bag"), json!({"baggage": "k=v"})),
        ]),
    )
    .await;
    let saw = saw(&r);
    for s in &saw[..4] {
        assert_eq!(s["error"]["code"], "egress_denied", "{s}");
        assert_eq!(s["error"]["details"]["reason"], "trace-context", "{s}");
    }
    assert_eq!(saw[4]["status"], 200, "{}", saw[4]);
    let got = w.outsider.requests();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].line, "GET /bag HTTP/1.1");
    assert_eq!(got[0].headers["baggage"], "k=v");
    let tp = &got[0].headers["traceparent"];
    assert!(
        tp.starts_with("00-") && !tp.contains(PACK_TRACE),
        "the host's own context: {tp}"
    );
    assert!(!got[0].headers.contains_key("tracestate"));
}
