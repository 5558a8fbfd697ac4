use super::*;

fn allow(req: &[&str], grant: &[&str]) -> AllowList {
    let p = |v: &[&str]| {
        allow::parse_all(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    };
    AllowList::new(p(req), p(grant))
}

#[test]
fn url_check_table() {
    let all = allow(&["*", "http://*:*", "*:*"], &["*", "http://*:*", "*:*"]);
    let api = allow(
        &["api.example.com", "*.cdn.example.com"],
        &["api.example.com", "*.cdn.example.com"],
    );
    let cases: &[(&str, &AllowList, Result<&str, &str>)] = &[
        ("https://api.example.com/x", &api, Ok("api.example.com")),
        ("https://API.EXAMPLE.COM./x", &api, Ok("api.example.com")),
        ("https://a.cdn.example.com/", &api, Ok("a.cdn.example.com")),
        ("http://api.example.com/x", &api, Err("scheme")),
        ("https://api.example.com:8443/", &api, Err("not-allowed")),
        ("https://other.example.com/", &api, Err("not-allowed")),
        ("ftp://api.example.com/", &api, Err("scheme")),
        ("file:///etc/passwd", &all, Err("scheme")),
        ("data:text/plain,hi", &all, Err("scheme")),
        ("http://127.0.0.1/", &all, Err("ssrf-blocked")),
        ("http://2130706433/", &all, Err("ssrf-blocked")),
        ("http://0x7f000001/", &all, Err("ssrf-blocked")),
        ("http://0177.0.0.1/", &all, Err("ssrf-blocked")),
        ("http://127.1/", &all, Err("ssrf-blocked")),
        ("http://127.0.0.1./", &all, Err("ssrf-blocked")),
        ("http://0/", &all, Err("ssrf-blocked")),
        ("http://[::]/", &all, Err("ssrf-blocked")),
        (
            "http://[::ffff:169.254.169.254]/",
            &all,
            Err("ssrf-blocked"),
        ),
        ("http://user@127.0.0.1/", &all, Err("ssrf-blocked")),
        ("http://localhost/", &all, Err("ssrf-blocked")),
        ("http://a.localhost/", &all, Err("ssrf-blocked")),
        (
            "http://metadata.google.internal./",
            &all,
            Err("ssrf-blocked"),
        ),
        ("http://ｌｏｃａｌｈｏｓｔ/", &all, Err("ssrf-blocked")),
        ("http://127。0。0。1/", &all, Err("ssrf-blocked")),
        ("https://93.184.216.34/", &all, Ok("93.184.216.34")),
        ("http:///nohost", &all, Err("ssrf-blocked")),
        ("not a url", &all, Err("invalid-url")),
        ("http://exa mple.com/", &all, Err("invalid-url")),
    ];
    for (u, a, want) in cases {
        let got = parse_url(u).and_then(|url| check_url(&url, a, false));
        match (got, want) {
            (Ok(t), Ok(host)) => assert_eq!(t.host.canonical(), *host, "{u}"),
            (Err(d), Err(reason)) => assert_eq!(d.reason, *reason, "{u}: {}", d.message),
            (got, want) => panic!("{u}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn answers_are_judged_whole() {
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    assert!(check_answer("a.example", &[ip("93.184.216.34")], false).is_ok());
    assert_eq!(
        check_answer("a.example", &[ip("93.184.216.34"), ip("10.0.0.1")], false)
            .unwrap_err()
            .reason,
        "ssrf-blocked"
    );
    assert_eq!(
        check_answer("a.example", &[], false).unwrap_err().reason,
        "dns"
    );
    assert!(check_answer("a.example", &[ip("127.0.0.1")], true).is_ok());
    assert!(check_answer("a.example", &[ip("127.0.0.1"), ip("10.0.0.1")], true).is_err());
}

#[test]
fn headers_and_methods() {
    let h = |n: &str, v: &str| vec![(n.to_owned(), v.to_owned())];
    assert!(check_headers(&h("accept", "application/json")).is_ok());
    assert!(check_headers(&h("authorization", "Bearer x")).is_ok());
    for bad in [
        "Host",
        "connection",
        "Upgrade",
        "Proxy-Authorization",
        "proxy-anything",
        "transfer-encoding",
        "TE",
        "content-length",
        "keep-alive",
        "idempotency-key",
        "bad header",
    ] {
        assert_eq!(
            check_headers(&h(bad, "x")).unwrap_err().reason,
            "header",
            "{bad}"
        );
    }
    assert!(check_headers(&h("x-a", "line\r\nInjected: 1")).is_err());
    // Trace context is the host's to send.
    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    for bad in [
        "traceparent",
        "TraceParent",
        "tracestate",
        "b3",
        "X-B3-TraceId",
        "x-b3-parentspanid",
        "uber-trace-id",
        "x-datadog-trace-id",
        "x-cloud-trace-context",
        "grpc-trace-bin",
        "x-amzn-trace-id",
    ] {
        let d = check_headers(&h(bad, tp)).unwrap_err();
        assert_eq!(d.reason, "trace-context", "{bad}");
        assert_eq!(d.extra["header"], bad.to_ascii_lowercase());
    }
    assert!(check_headers(&h("baggage", "k=v")).is_ok());
    for ok in ["get", "HEAD", "post", "PUT", "patch", "DELETE", "OPTIONS"] {
        assert!(check_method(ok).is_ok(), "{ok}");
    }
    for bad in ["CONNECT", "TRACE", "BREW", ""] {
        assert_eq!(check_method(bad).unwrap_err().reason, "method", "{bad}");
    }
    assert!(is_read(&check_method("get").unwrap()));
    assert!(!is_read(&check_method("post").unwrap()));
}

#[test]
fn settings_are_validated() {
    let ok = EgressSection::default();
    assert!(ok.validate(1 << 20).is_ok());
    let big = EgressSection {
        max_response_bytes: Some(1 << 20),
        ..Default::default()
    };
    assert!(big.validate(1 << 20).is_err());
    let hops = EgressSection {
        max_redirects: Some(11),
        ..Default::default()
    };
    assert!(hops.validate(1 << 20).is_err());
    let zero = EgressSection {
        timeout_ms: Some(0),
        ..Default::default()
    };
    assert!(zero.validate(1 << 20).is_err());
}
