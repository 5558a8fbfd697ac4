//! `wop new <lang> <name>`: the scaffold's files, its refusals, and the
//! JavaScript scaffold (the protocol's format, no toolchain) run by `wop`,
//! by plain Node as the reference engine would, and packed into the
//! protocol's archive. sdk/verify-samples.sh builds and runs every
//! language's scaffold in CI.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const LANGS: [&str; 4] = ["rust", "js", "python", "c"];

fn wop(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wop"))
        .args(args)
        .env_remove("WOP_REPO")
        .output()
        .expect("run wop")
}

fn new(lang: &str, name: &str, dir: &Path) -> Output {
    // `--` so that a name starting with `-` reaches `wop new` as a name.
    wop(&["new", "--dir", dir.to_str().unwrap(), "--", lang, name])
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn scaffolds_every_language() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = repo_root().display().to_string();
    for lang in LANGS {
        let name = format!("demo-{lang}");
        let o = new(lang, &name, tmp.path());
        assert_eq!(o.status.code(), Some(0), "{lang}: {}", stderr(&o));
        let dir = tmp.path().join(&name);
        if lang == "js" {
            // The protocol's format: no build step, no x-wop.
            for f in [
                "pack.json",
                "index.mjs",
                "schemas/hello.input.json",
                "README.md",
                ".gitignore",
            ] {
                assert!(dir.join(f).is_file(), "js: {f} missing");
            }
            assert!(!dir.join("build.sh").exists());
            let text = std::fs::read(dir.join("pack.json")).unwrap();
            let m = wop_runtime::manifest::Manifest::parse(&text).unwrap();
            assert_eq!(
                m.runtime.language,
                wop_runtime::manifest::Language::Javascript
            );
            let v: Value = serde_json::from_slice(&text).unwrap();
            assert!(v.get("x-wop").is_none(), "{v}");
            assert_eq!(v["runtime"]["entry"], "./index.mjs");
            let src = std::fs::read_to_string(dir.join("index.mjs")).unwrap();
            assert!(src.contains(&format!("'{name}.hello': hello")), "{src}");
            let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
            assert!(
                readme.contains(&format!("wop run {name} {name}.hello")),
                "{readme}"
            );
            continue;
        }
        let source = match lang {
            "rust" => "src/lib.rs",
            "js" => "pack.js",
            "python" => "pack.py",
            _ => "pack.c",
        };
        for f in ["pack.json", "build.sh", "README.md", ".gitignore", source] {
            assert!(dir.join(f).is_file(), "{lang}: {f} missing");
        }
        let text = std::fs::read(dir.join("pack.json")).unwrap();
        let m: Value = serde_json::from_slice(&text).unwrap();
        // The runtime's own manifest validation accepts it once `wop pack`
        // has filled in the sha256.
        let mut packed = m.clone();
        packed["x-wop"]["sha256"] = Value::String("0".repeat(64));
        wop_runtime::manifest::Manifest::parse(&serde_json::to_vec(&packed).unwrap()).unwrap();
        assert_eq!(m["name"], name.as_str());
        assert_eq!(m["kind"], "node");
        assert_eq!(m["nodes"][0]["typeId"], format!("{name}.hello"));
        assert_eq!(m["runtime"]["entry"], format!("{name}.wasm"));
        assert_eq!(m["x-wop"]["capabilities"], serde_json::json!(["log"]));

        let src = std::fs::read_to_string(dir.join(source)).unwrap();
        assert!(src.contains(&format!("{name}.hello")), "{lang}: {src}");
        assert!(src.contains("Hello, "), "{lang}: {src}");
        let build = std::fs::read_to_string(dir.join("build.sh")).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join("build.sh"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o111, 0o111, "{lang}: build.sh is not executable");
        }
        if lang == "rust" {
            assert!(build.contains("--target wasm32-wasip2"), "{build}");
            assert!(build.contains("pack \"$here\""), "{build}");
            let cargo = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
            assert!(
                cargo.contains(&format!("path = \"{repo}/sdk/rust\"")),
                "{cargo}"
            );
            assert!(cargo.contains("[workspace]"), "{cargo}");
        } else {
            // The same build path as the samples: the repository's sdk/<lang>/build.sh.
            assert!(build.contains(&format!("default_repo='{repo}'")), "{build}");
            assert!(
                build.contains(&format!("\"$repo/sdk/{lang}/build.sh\"")),
                "{build}"
            );
        }
        let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
        assert!(
            readme.contains(&format!("wop run dist/{name} {name}.hello")),
            "{readme}"
        );
    }
}

#[test]
fn never_overwrites() {
    let tmp = tempfile::tempdir().unwrap();
    let o = new("js", "taken", tmp.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let marker = tmp.path().join("taken").join("index.mjs");
    std::fs::write(&marker, "// mine").unwrap();
    for lang in LANGS {
        let o = new(lang, "taken", tmp.path());
        assert_eq!(o.status.code(), Some(2), "{lang}: usage error");
        assert!(stderr(&o).contains("already exists"), "{}", stderr(&o));
    }
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "// mine");
    // A file in the way is refused too.
    std::fs::write(tmp.path().join("file"), "x").unwrap();
    let o = new("c", "file", tmp.path());
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("file")).unwrap(),
        "x"
    );
}

#[test]
fn refuses_bad_names_languages_and_repos() {
    let tmp = tempfile::tempdir().unwrap();
    for bad in [
        "", "My-Pack", "my_pack", "1pack", "-pack", "pack-", "a--b", "../up", "a/b", "a.b", "pâck",
    ] {
        let o = new("js", bad, tmp.path());
        assert_eq!(o.status.code(), Some(2), "`{bad}` must be refused");
        assert!(
            stderr(&o).contains("invalid pack name"),
            "`{bad}`: {}",
            stderr(&o)
        );
    }
    let long = "a".repeat(65);
    assert_eq!(new("js", &long, tmp.path()).status.code(), Some(2));
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "nothing written"
    );

    let o = new("go", "ok-name", tmp.path());
    assert_eq!(
        o.status.code(),
        Some(2),
        "unknown language: clap usage error"
    );

    let not_repo = tmp.path().join("nowhere");
    let o = wop(&[
        "new",
        "js",
        "ok-name",
        "--dir",
        tmp.path().to_str().unwrap(),
        "--repo",
        not_repo.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("not a wop repository"),
        "{}",
        stderr(&o)
    );
    assert!(!tmp.path().join("ok-name").exists());
}

fn wop_json(args: &[&str], data: &Path) -> (Option<i32>, Value) {
    let o = Command::new(env!("CARGO_BIN_EXE_wop"))
        .args(args)
        .env("WOP_DATA_DIR", data)
        .env("WOP_CACHE_DIR", data.join("cache"))
        .output()
        .unwrap();
    let doc = serde_json::from_slice(&o.stdout).unwrap_or_else(|_| {
        panic!(
            "not JSON: {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            stderr(&o)
        )
    });
    (o.status.code(), doc)
}

/// The JavaScript scaffold runs under `wop` with no toolchain, gives the
/// same output under plain Node (how the reference engine calls a node),
/// has its input schema enforced, and `wop pack --tgz` builds it as install
/// does and writes an archive `wop run` runs.
#[test]
fn js_scaffold_runs_under_wop_and_node_and_packs() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let o = new("js", "scaffold-e2e", tmp.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let dir = tmp.path().join("scaffold-e2e");
    let d = dir.to_str().unwrap();
    let (code, doc) = wop_json(
        &[
            "run",
            d,
            "scaffold-e2e.hello",
            "--input",
            r#"{"name":"Ada"}"#,
            "--json",
        ],
        &data,
    );
    assert_eq!(code, Some(0), "{doc}");
    assert_eq!(
        doc["outcome"]["output"],
        serde_json::json!({"greeting": "Hello, Ada!"})
    );
    assert_eq!(doc["usage"]["pack"], "scaffold-e2e");
    assert!(
        doc["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["type"] == "log.appended"),
        "{doc}"
    );

    // Plain Node, the way the reference engine loads a pack.
    let script = format!(
        "const m = await import({:?}); const r = await m.nodes['scaffold-e2e.hello']({{ inputs: {{ name: 'Ada' }}, log: {{ info() {{}} }} }}); console.log(JSON.stringify(r));",
        format!("file://{}", dir.join("index.mjs").display())
    );
    match Command::new("node")
        .args(["--input-type=module", "-e", &script])
        .output()
    {
        Ok(n) => {
            assert!(n.status.success(), "{}", stderr(&n));
            let r: Value = serde_json::from_slice(&n.stdout).unwrap();
            assert_eq!(r["status"], "success");
            assert_eq!(
                r["outputs"], doc["outcome"]["output"],
                "Node and wop differ"
            );
        }
        Err(e) => panic!("`node` is needed for this test (apt-get install nodejs): {e}"),
    }

    // Its schema, before anything runs.
    let (code, doc) = wop_json(
        &[
            "run",
            d,
            "scaffold-e2e.hello",
            "--input",
            r#"{"name":7}"#,
            "--json",
        ],
        &data,
    );
    assert_eq!(code, Some(4), "{doc}");
    assert_eq!(doc["outcome"]["error"]["code"], "validation_error");
    assert_eq!(
        doc["outcome"]["error"]["details"]["path"], "$.inputs.name",
        "{doc}"
    );

    // wop pack: built as install builds it, then the protocol's archive.
    let out = tmp.path().join("dist");
    let o = Command::new(env!("CARGO_BIN_EXE_wop"))
        .args(["pack", d, "--tgz", "--out", out.to_str().unwrap()])
        .env("WOP_DATA_DIR", &data)
        .env("WOP_CACHE_DIR", data.join("cache"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).into_owned() + &stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(
        text.contains("built ") && text.contains("component sha256"),
        "{text}"
    );
    let tgz = out.join("scaffold-e2e-0.1.0.tgz");
    assert!(tgz.is_file(), "{text}");
    let (code, doc) = wop_json(
        &[
            "run",
            tgz.to_str().unwrap(),
            "scaffold-e2e.hello",
            "--input",
            r#"{"name":"Bo"}"#,
            "--json",
        ],
        &data,
    );
    assert_eq!(code, Some(0), "{doc}");
    assert_eq!(doc["outcome"]["output"]["greeting"], "Hello, Bo!");
}
