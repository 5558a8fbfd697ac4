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

/// Signs in through `POST /console/login` with `headers` added; the
/// `Set-Cookie` answered.
async fn sign_in(addr: SocketAddr, headers: &[(&str, &str)]) -> String {
    let mut h = vec![("Content-Type", "application/x-www-form-urlencoded")];
    h.extend_from_slice(headers);
    let r = req(
        addr,
        "POST",
        "/console/login",
        &h,
        format!("token={TOKEN}").as_bytes(),
    )
    .await;
    assert_eq!(r.status, 303, "{}", String::from_utf8_lossy(&r.body));
    r.header("set-cookie").unwrap().to_owned()
}

/// Whether `cookie` (as a `Cookie` header) with `headers` opens the
/// dashboard rather than the sign-in form.
async fn signed_in(addr: SocketAddr, cookie: &str, headers: &[(&str, &str)]) -> bool {
    let mut h = vec![("Cookie", cookie)];
    h.extend_from_slice(headers);
    let r = req(addr, "GET", "/console", &h, b"").await;
    assert_eq!(r.status, 200);
    !String::from_utf8_lossy(&r.body).contains("Sign in")
}

/// Issue 33, item 8: behind a TLS-terminating proxy the console's session
/// cookie is `__Host-wop_console` with `Secure` and `Path=/` — when
/// `serve.toml` says `behindTls`, or when a configured trusted proxy sends
/// `X-Forwarded-Proto: https`; the header from any other peer changes
/// nothing. Through the real server (no browser needed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_cookie_is_secure_over_tls() {
    const XFP: (&str, &str) = ("X-Forwarded-Proto", "https");
    let plain = |c: &str| {
        c.starts_with("wop_console=")
            && !c.contains("Secure")
            && c.contains("HttpOnly; SameSite=Strict; Path=/console;")
    };
    let secure = |c: &str| {
        c.starts_with("__Host-wop_console=")
            && c.contains("; Secure; HttpOnly; SameSite=Strict; Path=/;")
            && !c.contains("Domain")
    };
    let pair = |set: &str| set.split(';').next().unwrap().to_owned();

    // No proxy trusted: the header is a client's word, ignored.
    let s = start("", &serve_toml(""), &["hello"]).await;
    let c = sign_in(s.addr, &[XFP]).await;
    assert!(plain(&c), "{c}");
    assert!(signed_in(s.addr, &pair(&c), &[]).await);
    s.stop().await;

    // A trusted proxy elsewhere: the loopback peer is not it.
    let s = start(
        "",
        &serve_toml("trustedProxies = [\"10.0.0.0/8\", \"fd00::/8\"]"),
        &["hello"],
    )
    .await;
    let c = sign_in(s.addr, &[XFP]).await;
    assert!(plain(&c), "{c}");
    s.stop().await;

    // The proxy is the peer: its `X-Forwarded-Proto: https` is believed.
    let s = start(
        "",
        &serve_toml("trustedProxies = [\"127.0.0.0/8\"]"),
        &["hello"],
    )
    .await;
    let c = sign_in(s.addr, &[XFP]).await;
    assert!(secure(&c), "{c}");
    let session = pair(&c);
    assert!(signed_in(s.addr, &session, &[XFP]).await);
    // The same session under the plain name is not a session: over TLS
    // only the `__Host-` cookie is read, and over plain HTTP only the
    // plain one.
    let id = session.split_once('=').unwrap().1;
    assert!(!signed_in(s.addr, &format!("wop_console={id}"), &[XFP]).await);
    assert!(!signed_in(s.addr, &session, &[]).await);
    // Without the header, or with `http`, it is plain HTTP.
    assert!(plain(&sign_in(s.addr, &[]).await));
    assert!(plain(
        &sign_in(s.addr, &[("X-Forwarded-Proto", "http")]).await
    ));
    // Sign-out clears the `__Host-` cookie with the same attributes.
    let r = req(
        s.addr,
        "POST",
        "/console/logout",
        &[("Cookie", &session), XFP],
        b"",
    )
    .await;
    let cleared = r.header("set-cookie").unwrap().to_owned();
    assert!(
        secure(&cleared) && cleared.contains("Max-Age=0"),
        "{cleared}"
    );
    assert!(!signed_in(s.addr, &session, &[XFP]).await);
    s.stop().await;

    // `behindTls`: always.
    let s = start("", &serve_toml("behindTls = true"), &["hello"]).await;
    let c = sign_in(s.addr, &[]).await;
    assert!(secure(&c), "{c}");
    s.stop().await;
}
