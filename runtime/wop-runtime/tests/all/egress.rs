//! Safe-fetch through the real path: the `fetch` sample pack → runtime →
//! egress guard → gate → guarded client, against loopback test servers that
//! count their accepted connections, with a fake resolver that maps test
//! names to loopback, private, metadata, mixed and rebinding answers.
//!
//! Network rule: nothing here may send a packet anywhere but loopback. No
//! fake answer contains only public addresses, and every public address
//! appears only next to a forbidden one (the whole answer is refused).

use super::*;
use serde_json::json;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use wop_runtime::egress::Resolver;
use wop_runtime::events::ToolStatus;
use wop_runtime::{NodeError, Outcome, RunContext};
use wop_testkit::{Mode, Server};

/// Maps names to a sequence of answers (the last one repeats) and records
/// every query.
#[derive(Default)]
struct FakeDns {
    answers: Mutex<HashMap<String, Vec<Vec<IpAddr>>>>,
    queries: Mutex<Vec<String>>,
}

impl FakeDns {
    fn new(table: &[(&str, &[&str])]) -> Arc<Self> {
        let d = FakeDns::default();
        for (name, addrs) in table {
            d.set(name, &[addrs]);
        }
        Arc::new(d)
    }

    fn set(&self, name: &str, seq: &[&[&str]]) {
        let seq: Vec<Vec<IpAddr>> = seq
            .iter()
            .map(|a| a.iter().map(|s| s.parse().unwrap()).collect())
            .collect();
        // Safety belt for the network rule: an answer that could be
        // accepted must be loopback only.
        for a in &seq {
            let all_public = a
                .iter()
                .all(|ip| wop_runtime::egress::addr::classify(*ip).is_ok());
            assert!(
                a.is_empty() || !all_public,
                "{name}: a test answer must never be all-public"
            );
        }
        self.answers.lock().unwrap().insert(name.to_owned(), seq);
    }

    fn queries(&self, name: &str) -> usize {
        self.queries
            .lock()
            .unwrap()
            .iter()
            .filter(|q| *q == name)
            .count()
    }

    fn total_queries(&self) -> usize {
        self.queries.lock().unwrap().len()
    }
}

#[async_trait::async_trait]
impl Resolver for FakeDns {
    async fn resolve(&self, name: &str) -> Result<Vec<IpAddr>, String> {
        let n = {
            let mut q = self.queries.lock().unwrap();
            q.push(name.to_owned());
            q.iter().filter(|x| *x == name).count()
        };
        let g = self.answers.lock().unwrap();
        match g.get(name) {
            Some(seq) => Ok(seq[(n - 1).min(seq.len() - 1)].clone()),
            None => Err("NXDOMAIN".to_owned()),
        }
    }
}

const DNS: &[(&str, &[&str])] = &[
    ("api.test", &["127.0.0.1"]),
    ("loopback.test", &["127.0.0.1"]),
    ("loopback6.test", &["::1"]),
    ("private.test", &["10.0.0.5"]),
    ("private172.test", &["172.16.5.4"]),
    ("private192.test", &["192.168.0.10"]),
    ("metadata.test", &["169.254.169.254"]),
    ("linklocal.test", &["169.254.10.1"]),
    ("cgnat.test", &["100.64.0.1"]),
    ("zero.test", &["0.0.0.0"]),
    ("mixed.test", &["93.184.216.34", "10.0.0.1"]),
    ("mixedlo.test", &["127.0.0.1", "10.0.0.1"]),
    ("mixed6.test", &["2606:4700::1", "fd00::1"]),
    ("mapped.test", &["::ffff:10.0.0.1"]),
    ("nat64.test", &["64:ff9b::a9fe:a9fe"]),
    ("sixtofour.test", &["2002:a9fe:a9fe::1"]),
    ("teredo.test", &["2001:0:4136:e378:8000:63bf:80ff:fffe"]),
    ("ula.test", &["fd12:3456::1"]),
    ("linklocal6.test", &["fe80::1"]),
    ("multicast.test", &["224.0.0.251"]),
    ("xn--bcher-kva.test", &["10.0.0.1"]),
    ("empty.test", &[]),
];

fn rt_with(policy: &str, dns: Arc<FakeDns>) -> Runtime {
    let mut cfg = RuntimeConfig::new();
    cfg.policy(Policy::from_toml(policy).expect("policy"))
        .resolver(dns);
    Runtime::new(&cfg).expect("runtime")
}

fn fetch_req(inputs: Value, run: &str, node: &str, attempt: u32) -> InvokeRequest {
    let mut r = InvokeRequest::new("wop.samples.fetch", inputs);
    r.context = RunContext {
        run_id: run.into(),
        node_id: node.into(),
        tenant_id: "acme".into(),
        attempt,
    };
    r
}

async fn fetch(rt: &Runtime, inputs: Value) -> InvocationReport {
    rt.invoke(fetch_req(inputs, "run-egress", "n1", 1)).await
}

fn failure(r: &InvocationReport) -> &NodeError {
    match &r.outcome {
        Err(e) => e,
        Ok(o) => panic!("expected a failure, got {o:?}"),
    }
}

fn decisions(r: &InvocationReport) -> Vec<(String, String, String)> {
    r.events
        .iter()
        .filter_map(|e| match e {
            Event::EgressDecided {
                decision,
                destination,
                reason,
                cause,
                ..
            } => Some((
                decision.clone(),
                destination.clone(),
                cause.clone().unwrap_or_else(|| reason.clone()),
            )),
            _ => None,
        })
        .collect()
}

/// (status, durationMs present, tool name) of every `agent.tool-returned`.
fn returned(r: &InvocationReport) -> Vec<(ToolStatus, bool, String)> {
    r.events
        .iter()
        .filter_map(|e| match e {
            Event::ToolReturned {
                status,
                duration_ms,
                tool_name,
                ..
            } => Some((*status, duration_ms.is_some(), tool_name.clone())),
            _ => None,
        })
        .collect()
}

/// What a corpus case must end with.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// Refused before the gate performed anything: `egress_denied` with
    /// this reason, an `egress.decided denied`, the audit pair with status
    /// `forbidden` and no `durationMs`.
    Denied(&'static str),
    /// Refused before the gate, with another code (`upstream_unavailable`).
    Refused(&'static str, &'static str),
    /// Refused on a redirect hop: the first request was performed (to the
    /// redirecting server); the hop's decision is a deny with this reason.
    HopDenied(&'static str),
}

struct Case {
    name: String,
    inputs: Value,
    expect: Expect,
    /// Servers that must see no connection (forbidden targets).
    untouched: Vec<Server>,
}

fn case(name: &str, url: &str, expect: Expect) -> Case {
    Case {
        name: name.to_owned(),
        inputs: json!({"url": url}),
        expect,
        untouched: Vec::new(),
    }
}

async fn run_cases(rt: &Runtime, cases: Vec<Case>, guard: &Server) -> usize {
    let n = cases.len();
    for c in cases {
        let before = guard.connections();
        let r = fetch(rt, c.inputs.clone()).await;
        let e = failure(&r);
        let reason = e.details.as_ref().map(|d| d["reason"].clone());
        let (code, want_reason) = match c.expect {
            Expect::Denied(w) | Expect::HopDenied(w) => ("egress_denied", w),
            Expect::Refused(code, w) => (code, w),
        };
        assert_eq!(e.code, code, "{}: {e:?}", c.name);
        assert_eq!(reason, Some(json!(want_reason)), "{}: {e:?}", c.name);
        let ds = decisions(&r);
        let ret = returned(&r);
        match c.expect {
            Expect::Denied(_) | Expect::Refused(..) => {
                assert_eq!(ds.len(), 1, "{}: {ds:?}", c.name);
                assert_eq!(ds[0].0, "denied", "{}", c.name);
                assert_eq!(ds[0].2, want_reason, "{}", c.name);
                assert_eq!(ret.len(), 1, "{}: {ret:?}", c.name);
                let want_status = if code == "egress_denied" {
                    ToolStatus::Forbidden
                } else {
                    ToolStatus::Error
                };
                assert_eq!(ret[0].0, want_status, "{}", c.name);
                assert!(!ret[0].1, "{}: never performed, so no durationMs", c.name);
                assert!(ret[0].2.starts_with("http:"), "{}: {}", c.name, ret[0].2);
            }
            Expect::HopDenied(_) => {
                let last = ds.last().unwrap();
                assert_eq!(last.0, "denied", "{}: {ds:?}", c.name);
                assert_eq!(last.2, want_reason, "{}", c.name);
                assert!(
                    e.details.as_ref().unwrap()["redirectHop"].as_u64().unwrap() >= 1,
                    "{}",
                    c.name
                );
                assert!(
                    ret.iter().all(|r| r.1),
                    "{}: the first hop was performed",
                    c.name
                );
            }
        }
        assert_eq!(
            guard.connections(),
            before,
            "{}: the guard server was reached",
            c.name
        );
        for s in &c.untouched {
            assert_eq!(
                s.connections(),
                0,
                "{}: a forbidden target was reached",
                c.name
            );
        }
        // Also: the audit event carries the transport.
        assert!(
            r.events.iter().any(|e| matches!(
                e,
                Event::ToolCalled {
                    transport: wop_runtime::events::Transport::Http,
                    ..
                }
            )),
            "{}",
            c.name
        );
    }
    n
}

fn open_policy(extra: &str) -> String {
    format!(
        r#"
[egress]
maxRedirects = 3
{extra}

[packs.fetch]
capabilities = ["http"]
egress = ["*", "*:*", "http://*", "http://*:*"]
"#
    )
}

/// The address and name corpus, loopback switch OFF: every form of every
/// forbidden class, with an allow-list that allows everything, so only the
/// SSRF guard stands in the way.
fn ssrf_cases(p: u16) -> Vec<Case> {
    use Expect::*;
    let b = |s: &str| s.to_owned();
    let list: Vec<(String, String, Expect)> = vec![
        // IPv4 literal forms of loopback (the guard server listens there)
        (
            b("dotted"),
            format!("http://127.0.0.1:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("short"),
            format!("http://127.1:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("decimal"),
            format!("http://2130706433:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("hex"),
            format!("http://0x7f000001:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("hex-dotted"),
            format!("http://0x7f.0.0.1:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("octal"),
            format!("http://0177.0.0.1:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("octal-padded"),
            format!("http://0177.0000.0000.0001:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("zero-padded"),
            format!("http://127.000.000.001:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("trailing-dot-ip"),
            format!("http://127.0.0.1.:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("other-loopback"),
            format!("http://127.45.6.7:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("ideographic-dots"),
            format!("http://127。0。0。1:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("fullwidth-digits"),
            format!("http://１２７.０.０.１:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("https-literal"),
            format!("https://127.0.0.1:{p}/"),
            Denied("ssrf-blocked"),
        ),
        // unspecified
        (b("zero"), format!("http://0:{p}/"), Denied("ssrf-blocked")),
        (
            b("0.0.0.0"),
            format!("http://0.0.0.0:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("v6-unspecified"),
            format!("http://[::]:{p}/"),
            Denied("ssrf-blocked"),
        ),
        // other IPv4 classes
        (
            b("metadata-ip"),
            b("http://169.254.169.254/latest/meta-data/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("metadata-decimal"),
            b("http://2852039166/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("link-local"),
            b("http://169.254.1.1/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("rfc1918-10"),
            b("http://10.0.0.1/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("rfc1918-172"),
            b("http://172.16.0.1/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("rfc1918-192"),
            b("http://192.168.1.1/"),
            Denied("ssrf-blocked"),
        ),
        (b("cgnat"), b("http://100.64.0.1/"), Denied("ssrf-blocked")),
        (
            b("alibaba-metadata"),
            b("http://100.100.100.200/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("ietf-192.0.0"),
            b("http://192.0.0.8/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("benchmark"),
            b("http://198.18.0.1/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("documentation"),
            b("http://192.0.2.1/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("multicast"),
            b("http://224.0.0.1/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("broadcast"),
            b("http://255.255.255.255/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("reserved-240"),
            b("http://240.0.0.1/"),
            Denied("ssrf-blocked"),
        ),
        // IPv6 literals and every IPv4-embedding form
        (
            b("v6-loopback"),
            format!("http://[::1]:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("v4-mapped"),
            format!("http://[::ffff:127.0.0.1]:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("v4-mapped-hex"),
            format!("http://[::ffff:7f00:1]:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("v4-mapped-metadata"),
            b("http://[::ffff:169.254.169.254]/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("v4-translated"),
            b("http://[::ffff:0:10.0.0.1]/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("v4-compatible"),
            format!("http://[::127.0.0.1]:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("nat64"),
            format!("http://[64:ff9b::127.0.0.1]:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("nat64-metadata"),
            b("http://[64:ff9b::a9fe:a9fe]/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("6to4"),
            format!("http://[2002:7f00:1::1]:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("6to4-private"),
            b("http://[2002:a00:1::1]/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("teredo"),
            format!("http://[2001:0:4136:e378:8000:63bf:80ff:fffe]:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("v6-link-local"),
            b("http://[fe80::1]/"),
            Denied("ssrf-blocked"),
        ),
        (b("v6-ula"), b("http://[fc00::1]/"), Denied("ssrf-blocked")),
        (
            b("aws-metadata-v6"),
            b("http://[fd00:ec2::254]/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("v6-site-local"),
            b("http://[fec0::1]/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("v6-multicast"),
            b("http://[ff02::1]/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("v6-documentation"),
            b("http://[2001:db8::1]/"),
            Denied("ssrf-blocked"),
        ),
        // userinfo and parser tricks
        (
            b("userinfo"),
            format!("http://allowed.test@127.0.0.1:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("userinfo-pass"),
            format!("http://api.test:x@127.0.0.1:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("fragment-at"),
            format!("http://127.0.0.1:{p}#@api.test/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("backslash"),
            format!("http://loopback.test\\@api.test:{p}/"),
            Denied("ssrf-blocked"),
        ),
        // forbidden names (never resolved)
        (
            b("localhost"),
            format!("http://localhost:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("LOCALHOST"),
            format!("http://LOCALHOST:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("localhost-dot"),
            format!("http://localhost.:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("sub.localhost"),
            format!("http://api.localhost:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("fullwidth-localhost"),
            format!("http://ｌｏｃａｌｈｏｓｔ:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("gcp-metadata"),
            b("http://metadata.google.internal/computeMetadata/v1/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("gcp-metadata-dot"),
            b("http://metadata.google.internal./"),
            Denied("ssrf-blocked"),
        ),
        (
            b("gcp-metadata-upper"),
            b("http://METADATA.GOOGLE.INTERNAL/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("metadata-short"),
            b("http://metadata/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("aws-instance-data"),
            b("http://instance-data.ec2.internal/"),
            Denied("ssrf-blocked"),
        ),
        // names whose answers are forbidden (fake resolver)
        (
            b("dns-loopback"),
            format!("http://loopback.test:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("dns-loopback-upper"),
            format!("http://LOOPBACK.TEST:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("dns-loopback-dot"),
            format!("http://loopback.test.:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("dns-loopback6"),
            format!("http://loopback6.test:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("dns-private"),
            b("http://private.test/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("dns-private-172"),
            b("http://private172.test/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("dns-private-192"),
            b("http://private192.test/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("dns-metadata"),
            b("http://metadata.test/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("dns-link-local"),
            b("http://linklocal.test/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("dns-cgnat"),
            b("http://cgnat.test/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("dns-zero"),
            b("http://zero.test/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("dns-mixed-public-private"),
            b("http://mixed.test/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("dns-mixed-loopback-private"),
            format!("http://mixedlo.test:{p}/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("dns-mixed-v6"),
            b("http://mixed6.test/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("dns-mapped"),
            b("http://mapped.test/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("dns-nat64"),
            b("http://nat64.test/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("dns-6to4"),
            b("http://sixtofour.test/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("dns-teredo"),
            b("http://teredo.test/"),
            Denied("ssrf-blocked"),
        ),
        (b("dns-ula"), b("http://ula.test/"), Denied("ssrf-blocked")),
        (
            b("dns-v6-link-local"),
            b("http://linklocal6.test/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("dns-multicast"),
            b("http://multicast.test/"),
            Denied("ssrf-blocked"),
        ),
        (b("idna"), b("http://bücher.test/"), Denied("ssrf-blocked")),
        (
            b("idna-upper"),
            b("http://BÜCHER.TEST/"),
            Denied("ssrf-blocked"),
        ),
        (
            b("dns-empty"),
            b("http://empty.test/"),
            Refused("upstream_unavailable", "dns"),
        ),
        (
            b("dns-nxdomain"),
            b("http://nowhere.test/"),
            Refused("upstream_unavailable", "dns"),
        ),
    ];
    list.into_iter().map(|(n, u, e)| case(&n, &u, e)).collect()
}

/// Allow-list, scheme, method, header and size refusals (loopback switch
/// ON, so only the allow-list and the request checks stand in the way).
fn allow_cases(p: u16) -> Vec<Case> {
    use Expect::*;
    let mut v = vec![
        case(
            "not-granted-name",
            &format!("http://other.test:{p}/"),
            Denied("not-allowed"),
        ),
        case(
            "wrong-port",
            "https://secure.test:8443/",
            Denied("not-allowed"),
        ),
        case(
            "suffix-trick",
            &format!("http://api.test.evil.test:{p}/"),
            Denied("not-allowed"),
        ),
        case(
            "prefix-trick",
            &format!("http://evilapi.test:{p}/"),
            Denied("not-allowed"),
        ),
        case("https-only-host", "http://secure.test/", Denied("scheme")),
        case(
            "literal-not-granted",
            &format!("http://127.0.0.1:{p}/"),
            Denied("not-allowed"),
        ),
        case("ftp", "ftp://api.test/", Denied("scheme")),
        case("file", "file:///etc/passwd", Denied("scheme")),
        case("data", "data:text/plain,hello", Denied("scheme")),
        case("gopher", "gopher://api.test:70/", Denied("scheme")),
        case("relative", "/relative/path", Denied("invalid-url")),
        case(
            "localhost-still-refused",
            &format!("http://localhost:{p}/"),
            Denied("ssrf-blocked"),
        ),
        case(
            "zero-still-refused",
            &format!("http://0.0.0.0:{p}/"),
            Denied("ssrf-blocked"),
        ),
    ];
    let url = format!("http://api.test:{p}/");
    for (name, header) in [
        ("host-header", "Host"),
        ("connection-upgrade", "Connection"),
        ("upgrade-header", "Upgrade"),
        ("proxy-authorization", "Proxy-Authorization"),
        ("transfer-encoding", "Transfer-Encoding"),
        ("te", "TE"),
        ("content-length", "Content-Length"),
        ("idempotency-key-header", "Idempotency-Key"),
    ] {
        v.push(Case {
            name: name.to_owned(),
            inputs: json!({"url": url, "headers": {header: "upgrade"}}),
            expect: Denied("header"),
            untouched: Vec::new(),
        });
    }
    v.push(Case {
        name: "header-crlf".to_owned(),
        inputs: json!({"url": url, "headers": {"x-a": "v\r\nHost: evil"}}),
        expect: Denied("header"),
        untouched: Vec::new(),
    });
    for m in ["CONNECT", "TRACE"] {
        v.push(Case {
            name: format!("method-{m}"),
            inputs: json!({"url": url, "method": m}),
            expect: Denied("method"),
            untouched: Vec::new(),
        });
    }
    v.push(Case {
        name: "request-body-too-large".to_owned(),
        inputs: json!({"url": url, "method": "POST", "body": "x".repeat(5000)}),
        expect: Denied("body-too-large"),
        untouched: Vec::new(),
    });
    v
}

fn redirect_raw(location: &str) -> Mode {
    Mode::Raw(format!(
        "HTTP/1.1 302 Found\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    ))
}

/// Redirects to each forbidden class, loopback switch ON: the first hop
/// reaches a redirecting loopback server through an allowed name; every
/// next hop is re-validated and refused before any connection.
async fn redirect_cases(guard: &Server) -> Vec<Case> {
    use Expect::*;
    let gp = guard.addr.port();
    let targets: Vec<(&str, String, Expect)> = vec![
        (
            "to-private-ip",
            "http://10.0.0.1/".into(),
            HopDenied("ssrf-blocked"),
        ),
        (
            "to-metadata-ip",
            "http://169.254.169.254/latest/meta-data/".into(),
            HopDenied("ssrf-blocked"),
        ),
        (
            "to-metadata-name",
            "http://metadata.google.internal/".into(),
            HopDenied("ssrf-blocked"),
        ),
        (
            "to-localhost",
            format!("http://localhost:{gp}/"),
            HopDenied("ssrf-blocked"),
        ),
        (
            "to-zero",
            format!("http://0.0.0.0:{gp}/"),
            HopDenied("ssrf-blocked"),
        ),
        (
            "to-mapped-v6",
            "http://[::ffff:a9fe:a9fe]/".into(),
            HopDenied("ssrf-blocked"),
        ),
        (
            "to-ula",
            "http://[fd00::1]/".into(),
            HopDenied("ssrf-blocked"),
        ),
        (
            "to-private-name",
            "http://private.test/".into(),
            HopDenied("ssrf-blocked"),
        ),
        (
            "to-mixed-name",
            "http://mixed.test/".into(),
            HopDenied("ssrf-blocked"),
        ),
        (
            "to-loopback-literal-not-granted",
            format!("http://127.0.0.1:{gp}/"),
            HopDenied("not-allowed"),
        ),
        (
            "to-unlisted-host",
            format!("http://other.test:{gp}/"),
            HopDenied("not-allowed"),
        ),
        ("to-file", "file:///etc/passwd".into(), HopDenied("scheme")),
        (
            "to-gopher",
            "gopher://api.test/".into(),
            HopDenied("scheme"),
        ),
    ];
    let mut v = Vec::new();
    for (name, loc, expect) in targets {
        let r = Server::start(redirect_raw(&loc)).await;
        v.push(Case {
            name: format!("redirect-{name}"),
            inputs: json!({"url": format!("http://api.test:{}/start", r.addr.port())}),
            expect,
            untouched: vec![guard.clone()],
        });
    }
    // A redirect loop: refused after maxRedirects hops.
    let r = Server::start(redirect_raw("/again")).await;
    v.push(Case {
        name: "redirect-loop".to_owned(),
        inputs: json!({"url": format!("http://api.test:{}/", r.addr.port())}),
        expect: HopDenied("redirect"),
        untouched: vec![guard.clone()],
    });
    v
}

fn switch_policy(extra_grants: &str) -> String {
    format!(
        r#"
[egress]
allowLoopback = true
maxRedirects = 3
maxRequestBytes = 4096
timeoutMs = 5000

[packs.fetch]
capabilities = ["http"]
egress = ["http://api.test:*", "secure.test", "http://rebind.test:*" {extra_grants}]
"#
    )
}

#[tokio::test]
async fn hostile_corpus_is_refused_and_nothing_forbidden_is_reached() {
    // Listens on 127.0.0.1: every loopback form in the corpus points at it.
    let guard = Server::start(Mode::Ok).await;
    let p = guard.addr.port();

    let dns = FakeDns::new(DNS);
    let rt = rt_with(&open_policy(""), dns.clone());
    load(&rt, "fetch").await;
    let ssrf = ssrf_cases(p);
    let n1 = run_cases(&rt, ssrf, &guard).await;
    // Forbidden names never reach the resolver; literals never do either.
    assert_eq!(dns.queries("localhost"), 0);
    assert_eq!(dns.queries("metadata.google.internal"), 0);
    assert_eq!(
        dns.queries("xn--bcher-kva.test"),
        2,
        "IDNA names resolve in ASCII form"
    );
    assert_eq!(
        dns.queries("loopback.test"),
        4,
        "case, trailing dot and `\\` tricks normalized"
    );

    let dns2 = FakeDns::new(DNS);
    // private.test and mixed.test are granted so that redirect hops to
    // them are judged by their (forbidden) answers, not the allow-list.
    let rt2 = rt_with(
        &switch_policy(r#", "http://private.test", "http://mixed.test""#),
        dns2.clone(),
    );
    load(&rt2, "fetch").await;
    let n2 = run_cases(&rt2, allow_cases(p), &guard).await;
    assert_eq!(
        dns2.total_queries(),
        0,
        "refused before any name was resolved"
    );

    // Redirect hops (the "api.test" first hop is allowed by the switch).
    let cases = redirect_cases(&guard).await;
    let n3 = run_cases(&rt2, cases, &guard).await;
    assert_eq!(
        dns2.queries("private.test"),
        1,
        "a redirect target name is resolved and judged"
    );
    assert_eq!(
        guard.connections(),
        0,
        "no corpus case reached the loopback server"
    );
    let total = n1 + n2 + n3;
    eprintln!(
        "safe-fetch hostile corpus: {n1} address/name + {n2} allow-list/request + {n3} redirect = {total} cases"
    );
    assert!(total >= 60, "{total}");
}

#[tokio::test]
async fn allowed_fetch_returns_the_body_through_the_gate() {
    let s = Server::start(Mode::Status(200, "hello egress".to_owned())).await;
    let dns = FakeDns::new(DNS);
    let rt = rt_with(&switch_policy(""), dns.clone());
    load(&rt, "fetch").await;
    let url = format!("http://api.test:{}/path?q=1", s.addr.port());
    let r = fetch(&rt, json!({"url": url, "showBody": true, "headers": {"accept": "text/plain", "authorization": "Bearer s3cret"}})).await;
    let Ok(Outcome::Completed { output }) = &r.outcome else {
        panic!("{:?}", r.outcome)
    };
    assert_eq!(output["status"], 200);
    assert_eq!(output["body"], "hello egress");
    assert_eq!(output["bodyLength"], 12);
    assert_eq!(output["headers"]["content-type"], "application/json");
    assert_eq!(s.count(), 1);
    let seen = &s.requests()[0];
    assert!(seen.line.starts_with("GET /path?q=1 "), "{}", seen.line);
    assert_eq!(
        seen.headers.get("authorization").map(String::as_str),
        Some("Bearer s3cret")
    );
    assert!(
        !seen.headers.contains_key("idempotency-key"),
        "GET is a read: no effect key"
    );
    assert_eq!(dns.queries("api.test"), 1);

    let dest = format!("api.test:{}", s.addr.port());
    assert_eq!(
        decisions(&r),
        vec![("allowed".to_owned(), dest, "ok".to_owned())]
    );
    assert_eq!(
        returned(&r),
        vec![(ToolStatus::Ok, true, "http:api.test".to_owned())]
    );
    // The audit event hides the secret header in argsHash computation and
    // names the transport.
    assert!(r.events.iter().any(|e| matches!(e,
        Event::ToolCalled { tool_name, transport: wop_runtime::events::Transport::Http, .. }
            if tool_name == "http:api.test")));
    let json = serde_json::to_string(&r.events).unwrap();
    assert!(!json.contains("s3cret"), "no secret in events");
    assert!(
        !json.contains("path?q=1"),
        "events carry the authority only"
    );
    assert!(json.contains("\"type\":\"egress.decided\""), "{json}");
}

#[tokio::test]
async fn a_rebinding_name_is_resolved_once_and_the_validated_address_is_used() {
    let s = Server::start(Mode::Ok).await;
    let dns = FakeDns::new(DNS);
    // First answer loopback (allowed by the switch), every later answer private.
    dns.set("rebind.test", &[&["127.0.0.1"], &["10.0.0.1"]]);
    let rt = rt_with(&switch_policy(""), dns.clone());
    load(&rt, "fetch").await;
    let r = fetch(
        &rt,
        json!({"url": format!("http://rebind.test:{}/", s.addr.port())}),
    )
    .await;
    assert!(
        matches!(r.outcome, Ok(Outcome::Completed { .. })),
        "{:?}",
        r.outcome
    );
    assert_eq!(dns.queries("rebind.test"), 1, "no second lookup");
    assert_eq!(s.connections(), 1);
    // The next fetch resolves again and now gets the private answer.
    let r = fetch(
        &rt,
        json!({"url": format!("http://rebind.test:{}/", s.addr.port())}),
    )
    .await;
    assert_eq!(
        failure(&r).details.as_ref().unwrap()["reason"],
        "ssrf-blocked"
    );
    assert_eq!(s.connections(), 1);
}

#[tokio::test]
async fn oversized_responses_are_cut_off() {
    let big = "x".repeat(5000);
    let with_length = Server::start(Mode::Status(200, big.clone())).await;
    let streamed = Server::start(Mode::Raw(format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\n{big}"
    )))
    .await;
    let rt = rt_with(
        &switch_policy("").replace(
            "timeoutMs = 5000",
            "timeoutMs = 5000\nmaxResponseBytes = 1000",
        ),
        FakeDns::new(DNS),
    );
    load(&rt, "fetch").await;
    for s in [&with_length, &streamed] {
        let r = fetch(
            &rt,
            json!({"url": format!("http://api.test:{}/", s.addr.port())}),
        )
        .await;
        let e = failure(&r);
        assert_eq!(e.code, "egress_denied", "{e:?}");
        let d = e.details.as_ref().unwrap();
        assert_eq!(d["reason"], "body-too-large");
        assert_eq!(d["direction"], "response");
        assert_eq!(d["limit"], 1000);
        assert_eq!(s.count(), 1);
    }
}

#[tokio::test]
async fn a_slow_response_times_out_with_upstream_unavailable() {
    let s = Server::start(Mode::Hang).await;
    let rt = rt_with(
        &switch_policy("").replace("timeoutMs = 5000", "timeoutMs = 300"),
        FakeDns::new(DNS),
    );
    load(&rt, "fetch").await;
    let r = fetch(
        &rt,
        json!({"url": format!("http://api.test:{}/", s.addr.port())}),
    )
    .await;
    let e = failure(&r);
    assert_eq!(e.code, "upstream_unavailable", "{e:?}");
    assert_eq!(e.details.as_ref().unwrap()["reason"], "timeout");
    assert_eq!(s.count(), 1);
}

#[tokio::test]
async fn the_fetch_timeout_is_clamped_to_the_invocation_wall_clock() {
    let s = Server::start(Mode::Hang).await;
    // Fetch timeout 30 s (default), wall clock 2 s: the fetch gives up
    // first and the pack reports it; the invocation does not time out.
    let policy =
        switch_policy("").replace("timeoutMs = 5000\n", "") + "\n[limits]\nwallClockMs = 2000\n";
    let rt = rt_with(&policy, FakeDns::new(DNS));
    load(&rt, "fetch").await;
    let r = fetch(
        &rt,
        json!({"url": format!("http://api.test:{}/", s.addr.port())}),
    )
    .await;
    let e = failure(&r);
    assert_eq!(e.code, "upstream_unavailable", "{e:?}");
    assert!(breaches(&r).is_empty(), "{:?}", breaches(&r));
}

#[tokio::test]
async fn a_post_is_claimed_once_and_sent_with_the_effect_id() {
    let s = Server::start(Mode::Ok).await;
    let rt = rt_with(&switch_policy(""), FakeDns::new(DNS));
    load(&rt, "fetch").await;
    let inputs = json!({"url": format!("http://api.test:{}/charge", s.addr.port()), "method": "POST", "body": "{\"amount\":5}", "headers": {"content-type": "application/json"}});
    let first = rt
        .invoke(fetch_req(inputs.clone(), "run-pay", "charge", 1))
        .await;
    let Ok(Outcome::Completed { output }) = &first.outcome else {
        panic!("{:?}", first.outcome)
    };
    assert_eq!(output["status"], 200);
    // A retry of the same node (attempt 2) replays; it does not re-send.
    let second = rt.invoke(fetch_req(inputs, "run-pay", "charge", 2)).await;
    assert_eq!(second.outcome, first.outcome);
    assert_eq!(s.count(), 1, "one request for two runs of the node");
    let effect = |r: &InvocationReport| {
        r.events.iter().find_map(|e| match e {
            Event::ToolReturned {
                effect_id,
                replayed,
                duration_ms,
                ..
            } => Some((effect_id.clone().unwrap(), *replayed, duration_ms.is_some())),
            _ => None,
        })
    };
    let (id1, replayed1, performed1) = effect(&first).unwrap();
    let (id2, replayed2, performed2) = effect(&second).unwrap();
    assert_eq!(id1, id2);
    assert!(!replayed1 && performed1);
    assert!(replayed2 && !performed2);
    assert_eq!(
        s.distinct_keys(),
        vec![id1.clone()],
        "the effect id is the Idempotency-Key"
    );
    assert_eq!(s.requests()[0].body, "{\"amount\":5}");
    let effects = rt.effects("acme", "run-pay").await.unwrap();
    assert_eq!(effects.len(), 1);
    assert_eq!(effects[0].effect_id, id1);
}

#[tokio::test]
async fn upgrades_are_refused() {
    let s = Server::start(Mode::Raw(
        "HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: websocket\r\n\r\n"
            .to_owned(),
    ))
    .await;
    let rt = rt_with(&switch_policy(""), FakeDns::new(DNS));
    load(&rt, "fetch").await;
    let r = fetch(
        &rt,
        json!({"url": format!("http://api.test:{}/", s.addr.port())}),
    )
    .await;
    let e = failure(&r);
    assert_eq!(e.code, "egress_denied", "{e:?}");
    assert_eq!(e.details.as_ref().unwrap()["reason"], "upgrade");
}

#[tokio::test]
async fn redirects_are_returned_unless_the_operator_allows_following() {
    let target = Server::start(Mode::Ok).await;
    let loc = format!("http://api.test:{}/next", target.addr.port());
    let r1 = Server::start(redirect_raw(&loc)).await;
    let url = format!("http://api.test:{}/", r1.addr.port());

    // Default: not followed; the pack sees the 302 and its Location.
    let rt = rt_with(
        &switch_policy("").replace("maxRedirects = 3", ""),
        FakeDns::new(DNS),
    );
    load(&rt, "fetch").await;
    let r = fetch(&rt, json!({"url": url})).await;
    let Ok(Outcome::Completed { output }) = &r.outcome else {
        panic!("{:?}", r.outcome)
    };
    assert_eq!(output["status"], 302);
    assert_eq!(output["headers"]["location"], loc);
    assert_eq!(target.connections(), 0);

    // Allowed: followed, the hop re-validated (an allow decision per hop).
    let rt = rt_with(&switch_policy(""), FakeDns::new(DNS));
    load(&rt, "fetch").await;
    let r = fetch(&rt, json!({"url": url})).await;
    let Ok(Outcome::Completed { output }) = &r.outcome else {
        panic!("{:?}", r.outcome)
    };
    assert_eq!(output["status"], 200);
    assert_eq!(target.count(), 1);
    let ds = decisions(&r);
    assert_eq!(ds.len(), 2, "{ds:?}");
    assert_eq!(ds[1].2, "redirect");
    // The hop's decision is reported before the call's tool-returned.
    let pos = |name: &str| r.events.iter().position(|e| e.name() == name).unwrap();
    assert!(
        r.events
            .iter()
            .rposition(|e| e.name() == "egress.decided")
            .unwrap()
            < pos("agent.tool-returned")
    );
}

#[tokio::test]
async fn http_needs_the_capability_and_a_grant() {
    // No capability grant: refused at load (the import gate).
    let rt = rt_with("", FakeDns::new(DNS));
    let e = rt.load_pack(&pack("fetch")).await.unwrap_err();
    assert!(e.to_string().contains("http"), "{e}");

    // Capability but no egress grant: every destination is not-allowed.
    let s = Server::start(Mode::Ok).await;
    let rt = rt_with(
        "[egress]\nallowLoopback = true\n[packs.fetch]\ncapabilities = [\"http\"]\n",
        FakeDns::new(DNS),
    );
    load(&rt, "fetch").await;
    let r = fetch(
        &rt,
        json!({"url": format!("http://api.test:{}/", s.addr.port())}),
    )
    .await;
    assert_eq!(
        failure(&r).details.as_ref().unwrap()["reason"],
        "not-allowed"
    );
    assert_eq!(s.connections(), 0);
}

#[tokio::test]
async fn a_pack_importing_wasi_http_is_refused_at_load() {
    let s = Server::start(Mode::Ok).await;
    let rt = rt_with(
        &open_policy("allowLoopback = true").replace("[packs.fetch]", "[packs.wasi-http]"),
        FakeDns::new(DNS),
    );
    let e = rt.load_pack(&pack("wasi-http")).await.unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("wasi:http/"), "{msg}");
    assert!(
        msg.contains("network-escape") || format!("{e:?}").contains("network-escape"),
        "{e:?}"
    );
    let insp = rt.inspect_pack(&pack("wasi-http")).await.unwrap();
    assert!(
        insp.imports
            .iter()
            .any(|i| i.name.starts_with("wasi:http/outgoing-handler")
                && i.verdict == "escape:network-escape"),
        "{:?}",
        insp.imports
    );
    assert_eq!(s.connections(), 0);
}
