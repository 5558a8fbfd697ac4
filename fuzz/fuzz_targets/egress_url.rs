//! safe-fetch's pure checks on what a pack asks to fetch: URL parsing,
//! scheme/host/address judgement and the allow-list (requested ∩
//! granted patterns), then the method, headers and a resolver answer.
//!
//! Checks: never panics; an accepted target is exactly what is connected
//! to — a name is normalized, not forbidden and equal to the URL's host
//! up to a trailing dot (the name the resolver is pinned under), an IP
//! literal is a permitted
//! address; the target matches both lists; `*.suffix` never matches the
//! suffix itself or a name that merely ends with it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::net::IpAddr;
use wop_core::egress::addr::permitted;
use wop_core::egress::allow::{AllowList, Dest, Pattern, Scheme};
use wop_core::egress::host::{HostName, judge_name, normalize};
use wop_core::egress::{check_answer, check_headers, check_method, check_url, parse_url};

/// The input, one item a line (readable seeds): the URL first, then
/// `r<pattern>` (requested), `g<pattern>` (granted), `m<method>`,
/// `h<name>:<value>`, `a<ip>` (a resolver answer), `L` (allow loopback),
/// `S` (add [`SEED_PATTERNS`] to both lists; also when neither has one).
#[derive(Debug, Default)]
struct Input {
    url: String,
    requested: Vec<String>,
    granted: Vec<String>,
    allow_loopback: bool,
    seeds: bool,
    method: String,
    headers: Vec<(String, String)>,
    answer: Vec<IpAddr>,
}

impl Input {
    fn parse(text: &str) -> Input {
        let mut lines = text.split('\n');
        let mut i = Input {
            url: lines.next().unwrap_or_default().to_owned(),
            method: "GET".to_owned(),
            ..Default::default()
        };
        for l in lines {
            let Some(c) = l.chars().next() else { continue };
            let rest = &l[c.len_utf8()..];
            match c {
                'r' => i.requested.push(rest.to_owned()),
                'g' => i.granted.push(rest.to_owned()),
                'm' => i.method = rest.to_owned(),
                'h' => {
                    let (n, v) = rest.split_once(':').unwrap_or((rest, ""));
                    i.headers.push((n.to_owned(), v.to_owned()));
                }
                'a' => i.answer.extend(rest.parse::<IpAddr>().ok()),
                'L' => i.allow_loopback = true,
                'S' => i.seeds = true,
                _ => {}
            }
        }
        if i.requested.is_empty() && i.granted.is_empty() {
            i.seeds = true;
        }
        i
    }
}

const SEED_PATTERNS: &[&str] = &[
    "api.example.com",
    "*.example.org",
    "http://plain.example.net:8080",
    "*:*",
    "[2001:db8::1]:443",
    "93.184.216.34",
];

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let input = Input::parse(text);
    let parse = |v: &[String]| -> Vec<Pattern> {
        let seeds = SEED_PATTERNS
            .iter()
            .filter(|_| input.seeds)
            .map(|s| s.to_string());
        v.iter()
            .cloned()
            .chain(seeds)
            .filter_map(|p| Pattern::parse(&p).ok())
            .collect()
    };
    let requested = parse(&input.requested);
    let granted = parse(&input.granted);
    for p in requested.iter().chain(&granted) {
        // A pattern re-parses from its own text.
        assert_eq!(Pattern::parse(p.as_str()).as_ref(), Ok(p));
    }
    let allow = AllowList::new(requested.clone(), granted.clone());
    let _ = check_method(&input.method);
    let _ = check_headers(&input.headers);
    let answer = &input.answer;
    if check_answer("example.com", answer, input.allow_loopback).is_ok() {
        assert!(!answer.is_empty());
        for ip in answer {
            assert!(permitted(*ip, input.allow_loopback).is_ok(), "{ip}");
        }
    }

    let Ok(url) = parse_url(&input.url) else {
        return;
    };
    let Ok(t) = check_url(&url, &allow, input.allow_loopback) else {
        return;
    };
    assert!(matches!(url.scheme(), "http" | "https"));
    match &t.host {
        HostName::Name(n) => {
            assert!(judge_name(n).is_ok(), "{n}");
            assert_eq!(normalize(n), Ok(t.host.clone()), "normalization is stable");
            // The resolver is pinned under the URL's host text: the same
            // name, up to one trailing dot (a fully qualified name).
            let pinned = url.host_str().map(|h| h.strip_suffix('.').unwrap_or(h));
            assert_eq!(pinned, Some(n.as_str()), "judged vs pinned name");
        }
        HostName::Ip(ip) => {
            assert!(permitted(*ip, input.allow_loopback).is_ok(), "{ip}");
            let literal = match url.host() {
                Some(url::Host::Ipv4(v4)) => Some(IpAddr::V4(v4)),
                Some(url::Host::Ipv6(v6)) => Some(IpAddr::V6(v6)),
                _ => None,
            };
            // A name that normalizes to an address is judged as that
            // address; the connection then goes to a resolver that has
            // nothing pinned for it (fails closed).
            if let Some(l) = literal {
                assert_eq!(l, *ip);
            }
        }
    }
    let dest = Dest {
        scheme: t.scheme,
        host: &t.host,
        port: t.port,
    };
    assert!(requested.iter().any(|p| p.matches(&dest)));
    assert!(granted.iter().any(|p| p.matches(&dest)));
    assert_eq!(Some(t.port), url.port_or_known_default());
    for p in requested.iter().chain(&granted) {
        check_below(p, &dest);
    }
    let _ = (t.authority(), t.tool_id(), Scheme::Https.default_port());
});

/// `*.suffix` matches `x.suffix` only.
fn check_below(p: &Pattern, d: &Dest<'_>) {
    let text = p.as_str().trim();
    let host_part = text.split_once("://").map_or(text, |(_, r)| r);
    let Some(suffix) = host_part.strip_prefix("*.") else {
        return;
    };
    let suffix = suffix.rsplit_once(':').map_or(suffix, |(h, _)| h);
    if !p.matches(d) {
        return;
    }
    let (HostName::Name(n), Ok(HostName::Name(s))) = (d.host, normalize(suffix)) else {
        panic!("`{text}` matched {:?}", d.host);
    };
    assert!(
        n.len() > s.len() + 1 && n.ends_with(&format!(".{s}")),
        "`{text}` matched `{n}`"
    );
}
