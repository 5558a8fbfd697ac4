use super::decide::{self, Verdict, reason};
use super::*;
use crate::egress::allow::{Dest, Scheme};
use crate::egress::host::normalize;
use crate::policy::Policy;
use std::sync::Arc;
use zeroize::Zeroizing;

fn cred(id: &str, toml_spec: &str) -> Arc<Credential> {
    let spec: SecretSpec = toml::from_str(toml_spec).unwrap();
    Arc::new(Credential::new(id, &spec, Zeroizing::new(format!("value-of-{id}-0123"))).unwrap())
}

fn dest(host: &str) -> normalize_out::H {
    normalize_out::H(normalize(host).unwrap())
}

mod normalize_out {
    pub struct H(pub crate::egress::host::HostName);
}

fn at<'a>(h: &'a normalize_out::H, scheme: Scheme, port: u16) -> Dest<'a> {
    Dest {
        scheme,
        host: &h.0,
        port,
    }
}

#[test]
fn policy_secrets_are_validated_by_name() {
    let ok = Policy::from_toml(
        "[secrets.stripe]\nvalue = \"env:STRIPE\"\naudiences = [\"api.stripe.com\"]\n\
         [packs.pay]\nsecrets = [\"stripe\"]\n",
    )
    .unwrap();
    assert_eq!(ok.grant("pay").secrets, ["stripe"]);
    assert!(ok.secret_warnings().unwrap().is_empty());
    for (policy, needle) in [
        (
            "[packs.pay]\nsecrets = [\"nope\"]\n",
            "packs.pay.secrets[0]: no [secrets.nope]",
        ),
        (
            "[secrets.s]\nvalue = \"env:X\"\n",
            "secrets.s: the audience is empty",
        ),
        (
            "[secrets.s]\naudiences = [\"a.example\"]\n",
            "secrets.s: give `value`",
        ),
        (
            "[secrets.s]\nvalue = \"env:X\"\naudiences = [\"*\"]\n",
            "secrets.s.audiences[0]",
        ),
        (
            "[secrets.s]\nvalue = \"env:X\"\naudiences = [\"a.example\"]\nattach = \"header:Host\"\n",
            "secrets.s.attach",
        ),
        (
            "[secrets.s]\nvalue = \"env:X\"\ntools = [\"billing:charge\"]\n",
            "`billing:charge` is not an HTTP tool",
        ),
        (
            "[secrets.s]\nvalue = \"env:X\"\nmcpServers = [\"ev\"]\n",
            "no [mcp.servers.ev]",
        ),
        (
            "[mcp.servers.ev]\ntransport = \"stdio\"\ncommand = \"node\"\n\
             [secrets.s]\nvalue = \"env:X\"\nmcpServers = [\"ev\"]\n",
            "is a stdio server",
        ),
        (
            "[secrets.s]\nvalue = \"env:X\"\naudiences = [\"a.example\"]\nexpiresAt = \"tomorrow\"\n",
            "secrets.s.expiresAt",
        ),
        (
            "[secrets.s]\nvalue = \"env:X\"\naudiences = [\"a.example\"]\nvalu = 1\n",
            "valu",
        ),
        (
            "[secrets.\"bad id\"]\nvalue = \"env:X\"\naudiences = [\"a.example\"]\n",
            "the id must be",
        ),
        (
            "[secrets.s]\nvalue = \"env:\"\naudiences = [\"a.example\"]\n",
            "`env:` needs a variable name",
        ),
        (
            "[[tools]]\nid = \"b:c\"\nurl = \"http://127.0.0.1:1/\"\nsafetyTier = \"read\"\n\
             [secrets.s]\nvalue = \"env:X\"\ntools = [\"b:c\"]\n\
             [secrets.t]\nvalue = \"env:Y\"\ntools = [\"b:c\"]\n",
            "are both attached to `b:c` as `authorization`",
        ),
    ] {
        let e = Policy::from_toml(policy).unwrap_err().to_string();
        assert!(e.contains(needle), "{policy}\n→ {e}");
    }
    let inline = Policy::from_toml(
        "[secrets.s]\nvalue = \"sk-inline-value\"\naudiences = [\"a.example\"]\n",
    )
    .unwrap();
    let w = inline.secret_warnings().unwrap();
    assert_eq!(w.len(), 1);
    assert!(w[0].contains("use `env:NAME` or `file:PATH`"), "{w:?}");
    assert!(!w[0].contains("sk-inline-value"), "{w:?}");
}

#[test]
fn manifest_requirements_parse_and_refuse_bad_entries() {
    let node = serde_json::json!({
        "requiresSecrets": [
            {"id": "openai", "kind": "ai-provider", "provider": "openai", "scope": "tenant"}
        ],
        "requiredCredentials": [{"key": "github"}]
    });
    let r = requirement::parse_node(&node, "$.nodes[0]").unwrap();
    assert_eq!(r.len(), 2);
    assert_eq!(r[0].scope, Some(SecretScope::Tenant));
    assert_eq!(r[1].kind, SecretKind::Custom);
    for (bad, path) in [
        (
            serde_json::json!({"requiresSecrets": [{"id": "a"}]}),
            "kind",
        ),
        (
            serde_json::json!({"requiresSecrets": [{"kind": "api-key"}]}),
            "id",
        ),
        (
            serde_json::json!({"requiresSecrets": [{"id": "a b", "kind": "api-key"}]}),
            "id",
        ),
        (
            serde_json::json!({"requiresSecrets": [{"id": "a", "kind": "password"}]}),
            "kind",
        ),
        (
            serde_json::json!({"requiresSecrets": [{"id": "a", "kind": "api-key", "scope": "global"}]}),
            "scope",
        ),
        (
            serde_json::json!({"requiresSecrets": [{"id": "a", "kind": "api-key"}], "requiredCredentials": [{"key": "a"}]}),
            "declared twice",
        ),
        (
            serde_json::json!({"requiresSecrets": {}}),
            "must be an array",
        ),
    ] {
        let e = requirement::parse_node(&bad, "$.nodes[0]")
            .unwrap_err()
            .to_string();
        assert!(e.contains(path), "{bad} → {e}");
    }
}

#[test]
fn first_request_attaches_in_audience_and_refuses_named_outsiders() {
    let stripe = cred("stripe", "audiences = [\"api.stripe.com\"]");
    let loose = cred(
        "loose",
        "audiences = [\"api.other.com\"]\nattach = \"header:x-api-key\"\noutOfAudience = \"downgrade\"",
    );
    let creds = Credentials::new(vec![stripe, loose]);
    let api = dest("api.stripe.com");
    let evil = dest("evil.example");

    // Auto: only the in-audience credential, and nothing for others.
    let p = decide::first_request(&creds, &[], &at(&api, Scheme::Https, 443), "/v1", 0);
    assert_eq!(p.attach.len(), 1);
    assert_eq!(p.attach[0].id(), "stripe");
    assert!(p.refused.is_none());
    let p = decide::first_request(&creds, &[], &at(&api, Scheme::Http, 80), "/", 0);
    assert!(
        p.attach.is_empty() && p.decisions.is_empty(),
        "http is not https"
    );
    let p = decide::first_request(&creds, &[], &at(&evil, Scheme::Https, 443), "/", 0);
    assert!(p.attach.is_empty() && p.decisions.is_empty());

    // Named outside the audience: deny (default) or downgrade.
    let p = decide::first_request(
        &creds,
        &["stripe".into()],
        &at(&evil, Scheme::Https, 443),
        "/",
        0,
    );
    assert!(p.refused.is_some());
    assert_eq!(p.decisions.last().unwrap().verdict, Verdict::Denied);
    assert_eq!(p.decisions.last().unwrap().reason, reason::OUT_OF_AUDIENCE);
    let p = decide::first_request(
        &creds,
        &["loose".into()],
        &at(&evil, Scheme::Https, 443),
        "/",
        0,
    );
    assert!(p.refused.is_none() && p.attach.is_empty());
    assert_eq!(p.decisions[0].verdict, Verdict::Downgraded);

    // Named but not this node's: fail closed.
    let p = decide::first_request(
        &creds,
        &["other".into()],
        &at(&api, Scheme::Https, 443),
        "/",
        0,
    );
    assert_eq!(p.decisions[0].reason, reason::PROVENANCE_UNEVALUABLE);
    assert!(p.refused.is_some());
}

#[test]
fn a_path_prefix_audience_is_never_attached_to_a_path_that_is_not_plain() {
    let v1 = cred("v1", "audiences = [\"api.example.com/v1\"]");
    let loose = cred(
        "loose",
        "audiences = [\"api.example.com/v1\"]\nattach = \"header:x-api-key\"\noutOfAudience = \"downgrade\"",
    );
    let api = dest("api.example.com");
    let d = at(&api, Scheme::Https, 443);
    for raw in [
        "/v1/..%2Fadmin%2Fx",
        "/v1/..;/admin/x",
        "/v1/%5C..%5Cadmin/x",
    ] {
        // Unnamed or named, deny: refused, with its own cause.
        for named in [vec![], vec!["v1".to_owned()]] {
            let creds = Credentials::new(vec![v1.clone()]);
            let p = decide::first_request(&creds, &named, &d, raw, 0);
            assert!(p.attach.is_empty(), "{raw}");
            assert!(p.refused.is_some(), "{raw}");
            let last = p.decisions.last().unwrap();
            assert_eq!(
                (last.verdict, last.reason, last.cause),
                (
                    Verdict::Denied,
                    reason::POLICY_DENIED,
                    Some(decide::cause::PATH_NOT_PLAIN)
                ),
                "{raw}"
            );
            assert_eq!(p.refusal_reason(), "path-not-plain");
        }
        // Downgrade: sent without it.
        let creds = Credentials::new(vec![loose.clone()]);
        let p = decide::first_request(&creds, &[], &d, raw, 0);
        assert!(p.attach.is_empty() && p.refused.is_none(), "{raw}");
        assert_eq!(p.decisions[0].verdict, Verdict::Downgraded);
        // A same-origin redirect to it: not carried.
        let p = decide::hop(std::slice::from_ref(&v1), true, &d, raw, 0);
        assert!(p.attach.is_empty() && p.refused.is_some(), "{raw}");
        assert_eq!(p.refusal_reason(), "path-not-plain");
    }
    let creds = Credentials::new(vec![v1.clone()]);
    let p = decide::first_request(&creds, &[], &d, "/v1/admin/x", 0);
    assert_eq!(p.attach.len(), 1);
    assert_eq!(p.refusal_reason(), "ok");
}

#[test]
fn expired_credentials_are_denied_and_hops_keep_them_on_origin_only() {
    let old = cred(
        "old",
        "audiences = [\"api.example.com\"]\nexpiresAt = \"2020-01-01T00:00:00Z\"",
    );
    let creds = Credentials::new(vec![old.clone()]);
    let api = dest("api.example.com");
    let now = crate::time::now_ms();
    let p = decide::first_request(&creds, &[], &at(&api, Scheme::Https, 443), "/", now);
    assert_eq!(p.decisions[0].reason, reason::EXPIRED);
    assert!(p.refused.is_some());

    let fresh = cred("fresh", "audiences = [\"api.example.com\"]");
    let attached = vec![fresh];
    let p = decide::hop(&attached, true, &at(&api, Scheme::Https, 443), "/next", now);
    assert_eq!(p.attach.len(), 1);
    let other = dest("cdn.example.com");
    let p = decide::hop(&attached, false, &at(&other, Scheme::Https, 443), "/", now);
    assert!(p.refused.is_some());
    assert_eq!(p.decisions[0].reason, reason::POLICY_DENIED);
}

#[test]
fn conflicting_credentials_are_refused_and_tools_match_by_id() {
    let a = cred("a", "audiences = [\"api.example.com\"]\ntools = []");
    let b = cred("b", "audiences = [\"*.example.com\"]");
    let creds = Credentials::new(vec![a, b]);
    let api = dest("api.example.com");
    let p = decide::first_request(&creds, &[], &at(&api, Scheme::Https, 443), "/", 0);
    assert!(
        p.refused
            .unwrap()
            .contains("would both set `authorization`")
    );
    let p = decide::first_request(&creds, &["b".into()], &at(&api, Scheme::Https, 443), "/", 0);
    assert!(p.refused.is_none());
    assert_eq!(p.attach[0].id(), "b");

    let t = cred("t", "tools = [\"billing:charge\"]\nmcpServers = [\"pay\"]");
    assert!(t.for_tool("billing:charge"));
    assert!(t.for_tool("mcp:pay/charge"));
    assert!(!t.for_tool("mcp:payments/charge"));
    assert!(!t.for_tool("billing:refund"));
}

#[test]
fn short_or_malformed_values_are_refused_without_echoing_them() {
    let spec: SecretSpec = toml::from_str("audiences = [\"a.example\"]").unwrap();
    for v in ["tiny1", "has\nnewline-in-it", " padded-value "] {
        let e = Credential::new("s", &spec, Zeroizing::new(v.into())).unwrap_err();
        assert!(!e.contains(v.trim()), "{e}");
    }
    let basic: SecretSpec =
        toml::from_str("audiences = [\"a.example\"]\nattach = \"basic\"").unwrap();
    assert!(Credential::new("s", &basic, Zeroizing::new("no-colon-here".into())).is_err());
}
