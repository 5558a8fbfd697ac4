//! Host names and address classes, below the URL layer: `host::normalize`
//! (IDNA, trailing dots, numeric look-alikes), `judge_name`, egress
//! patterns, and the IPv4/IPv6 address classes with every embedding form.
//!
//! Checks: never panics; normalization is idempotent and its names are
//! lowercase ASCII DNS names that `url` reads as the same domain; an IPv6
//! address that embeds an IPv4 one is never more permitted than that IPv4
//! address; an address the classifier forbids is never permitted (except
//! loopback with the test switch).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use wop_core::egress::addr::{Forbidden, classify, classify_v4, embedded_ipv4, permitted};
use wop_core::egress::allow::Pattern;
use wop_core::egress::host::{HostName, judge_name, normalize};

fuzz_target!(|data: &[u8]| {
    addresses(data);
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = Pattern::parse(text);
    let _ = judge_name(text);
    let Ok(h) = normalize(text) else {
        return;
    };
    assert_eq!(normalize(&h.canonical()), Ok(h.clone()), "{text:?}");
    match &h {
        HostName::Name(n) => {
            assert!(!n.is_empty() && n.len() <= 253, "{n:?}");
            assert!(
                n.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b)),
                "{n:?}"
            );
            // What URL parsers make of the name: the same domain (or a
            // refusal), never an IP address we did not judge as one.
            if let Ok(u) = url::Url::parse(&format!("https://{n}/")) {
                match u.host() {
                    Some(url::Host::Domain(d)) => assert_eq!(d, n, "{text:?}"),
                    other => panic!("`{n}` is a name to us but {other:?} to url"),
                }
            }
        }
        HostName::Ip(ip) => {
            let _ = permitted(*ip, false);
        }
    }
});

fn addresses(data: &[u8]) {
    if let Ok(b) = <[u8; 16]>::try_from(data.get(..16).unwrap_or_default()) {
        let v6 = Ipv6Addr::from(b);
        let verdict = classify(IpAddr::V6(v6));
        if let Some(v4) = embedded_ipv4(v6)
            && let Err(f) = classify_v4(v4)
        {
            assert!(
                verdict.is_err(),
                "{v6} embeds {v4} ({f:?}) but is permitted"
            );
        }
        check_permitted(IpAddr::V6(v6), verdict);
    }
    if let Ok(b) = <[u8; 4]>::try_from(data.get(..4).unwrap_or_default()) {
        let v4 = Ipv4Addr::from(b);
        let verdict = classify(IpAddr::V4(v4));
        check_permitted(IpAddr::V4(v4), verdict);
        // The same address in every IPv6 embedding form is judged alike.
        for v6 in [v4.to_ipv6_mapped(), v4.to_ipv6_compatible()] {
            if verdict.is_err() {
                assert!(classify(IpAddr::V6(v6)).is_err(), "{v6} embeds {v4}");
            }
        }
    }
}

fn check_permitted(ip: IpAddr, verdict: Result<(), Forbidden>) {
    assert_eq!(permitted(ip, false), verdict, "{ip}");
    match verdict {
        Err(Forbidden::Loopback) | Ok(()) => assert!(permitted(ip, true).is_ok(), "{ip}"),
        Err(f) => assert_eq!(permitted(ip, true), Err(f), "{ip}"),
    }
}
