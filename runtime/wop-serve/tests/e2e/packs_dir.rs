//! `wop serve`'s packs directory (issue 19, decision 0016): two packs that
//! declare one name are both refused at start and listed in
//! `refusedPacks`; the others are served.

use super::*;
use serde_json::json;
use wop_serve::{ServeConfig, ServeOptions, Server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_packs_declaring_one_name_are_both_refused_at_start() {
    let d = tempfile::tempdir().unwrap();
    // Two directories holding the `hello` pack under other names, and an
    // unrelated pack.
    for (link, target) in [
        ("a", "hello"),
        ("b-copy", "hello"),
        ("transform", "transform"),
    ] {
        std::os::unix::fs::symlink(pack_path(target), d.path().join(link)).unwrap();
    }
    let mut opts = ServeOptions::new("127.0.0.1:0".parse().unwrap());
    opts.policy(wop_runtime::Policy::from_toml("").unwrap())
        .packs_dir(d.path())
        .config(ServeConfig::from_toml(&serve_toml("")).unwrap());
    let server = Server::bind(opts).await.unwrap();
    let refused = server.refused().to_vec();
    assert_eq!(refused.len(), 2, "{refused:?}");
    for (r, dir) in refused.iter().zip(["a", "b-copy"]) {
        assert_eq!(
            r["dir"],
            json!(d.path().join(dir).display().to_string()),
            "{r}"
        );
        assert_eq!(r["code"], "pack_validation_failed", "{r}");
        assert_eq!(r["details"]["reason"], "duplicate-name", "{r}");
        assert_eq!(r["details"]["name"], "hello", "{r}");
        assert!(r["message"].as_str().unwrap().contains("`hello`"), "{r}");
    }
    assert_eq!(server.node_types(), ["wop.samples.transform"]);
    let addr = server.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async move {
        let _ = rx.await;
    }));
    let h = req(addr, "GET", "/healthz", &[], b"").await.json();
    assert_eq!(h["refusedPacks"], 2, "{h}");
    assert_eq!(h["packs"], 1, "{h}");
    let r = post_json(
        addr,
        "/host/wop/invocations",
        TOKEN,
        &json!({"typeId": "wop.samples.hello", "inputs": {"name": "Ada"}}),
    )
    .await;
    assert_eq!(r.status, 404, "{:?}", String::from_utf8_lossy(&r.body));
    let _ = tx.send(());
    task.await.unwrap().unwrap();
}
