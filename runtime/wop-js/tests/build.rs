//! Building JavaScript packs: deterministic bytes, and every kind of bad
//! source refused at build time with its own code and its position.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use wop_js::{Identity, JsBuildError, Source, build};

fn identity(nodes: &[&str]) -> Identity {
    Identity {
        name: "t.js".into(),
        version: "1.0.0".into(),
        nodes: nodes
            .iter()
            .map(|n| ((*n).to_owned(), "1.0.0".to_owned()))
            .collect(),
    }
}

fn source(files: &[(&str, &str)]) -> Source {
    let mut s = Source::new("./index.mjs");
    for (p, src) in files {
        s.add(p, src.as_bytes().to_vec()).unwrap();
    }
    s
}

fn refused(nodes: &[&str], files: &[(&str, &str)]) -> JsBuildError {
    match build(&identity(nodes), &source(files)) {
        Ok(_) => panic!("built: {files:?}"),
        Err(e) => e,
    }
}

const GOOD: &str = r#"
import { helper } from './lib/helper.mjs';
import { createHash } from 'node:crypto';
export const nodes = { 't.js.a': async (ctx) => ({ status: 'success', outputs: { v: helper(ctx.inputs.x), h: createHash('sha256').update('x').digest('hex') } }) };
export default nodes;
"#;

#[test]
fn the_same_pack_builds_the_same_bytes_and_another_pack_other_bytes() {
    let files = [
        ("index.mjs", GOOD),
        (
            "lib/helper.mjs",
            "export const helper = (x) => String(x).repeat(2);",
        ),
    ];
    let a = build(&identity(&["t.js.a"]), &source(&files)).unwrap();
    let b = build(&identity(&["t.js.a"]), &source(&files)).unwrap();
    assert_eq!(a, b, "two builds of one pack differ");
    let changed = [
        ("index.mjs", GOOD),
        (
            "lib/helper.mjs",
            "export const helper = (x) => String(x).repeat(3);",
        ),
    ];
    let c = build(&identity(&["t.js.a"]), &source(&changed)).unwrap();
    assert_ne!(a, c);
    assert_eq!(
        wop_js::build_id(&identity(&["t.js.a"]), &source(&files)),
        wop_js::build_id(&identity(&["t.js.a"]), &source(&files))
    );
    assert_ne!(
        wop_js::build_id(&identity(&["t.js.a"]), &source(&files)),
        wop_js::build_id(&identity(&["t.js.a"]), &source(&changed))
    );
}

#[test]
fn a_syntax_error_is_refused_with_file_and_line() {
    let e = refused(
        &["t.js.a"],
        &[(
            "index.mjs",
            "export const nodes = {\n  'a': async (ctx) => {\n    return {;\n  }\n};\n",
        )],
    );
    assert_eq!(e.code(), "js_syntax_error", "{e}");
    assert!(e.message().contains("index.mjs:3"), "{e}");
}

#[test]
fn imports_outside_the_pack_and_the_shimmed_modules_are_refused() {
    for (spec, what) in [
        ("node:child_process", "node:child_process"),
        ("fs", "`fs`"),
        ("../outside.mjs", "../outside.mjs"),
        ("https://example.com/x.mjs", "https://example.com/x.mjs"),
        ("./missing.mjs", "./missing.mjs"),
    ] {
        let src = format!(
            "import x from '{spec}';\nexport const nodes = {{ 't.js.a': async () => x }};\n"
        );
        let e = refused(&["t.js.a"], &[("index.mjs", &src)]);
        assert_eq!(e.code(), "js_import_not_allowed", "{spec}: {e}");
        assert!(e.message().contains(what), "{spec}: {e}");
        assert!(e.message().contains("node:crypto"), "{spec}: {e}");
    }
}

#[test]
fn a_declared_node_that_is_not_exported_is_refused_by_name() {
    let e = refused(
        &["t.js.a", "t.js.missing"],
        &[
            ("index.mjs", GOOD),
            ("lib/helper.mjs", "export const helper = (x) => x;"),
        ],
    );
    assert_eq!(e.code(), "js_node_not_exported", "{e}");
    assert!(
        e.message().contains("t.js.missing") && !e.message().contains("t.js.a,"),
        "{e}"
    );
    let e = refused(&["t.js.a"], &[("index.mjs", "export default {};\n")]);
    assert_eq!(e.code(), "js_node_not_exported", "{e}");
}

#[test]
fn failing_top_level_code_is_refused() {
    let e = refused(
        &["t.js.a"],
        &[(
            "index.mjs",
            "throw Object.assign(new Error('boom at load'), {code: 'x'});\nexport const nodes = {};\n",
        )],
    );
    assert_eq!(e.code(), "js_module_failed", "{e}");
    assert!(e.message().contains("boom at load"), "{e}");
}

#[test]
fn an_endless_loop_at_top_level_ends_at_the_build_fuel() {
    let e = refused(
        &["t.js.a"],
        &[("index.mjs", "while (true) {}\nexport const nodes = {};\n")],
    );
    assert_eq!(e.code(), "js_build_limit", "{e}");
    assert!(e.message().contains("fuel"), "{e}");
}

#[test]
fn top_level_host_calls_and_eval_fail_the_build() {
    // A host call at load time traps (the pack's code reaches the host
    // only inside an invocation).
    let e = refused(
        &["t.js.a"],
        &[(
            "index.mjs",
            "crypto.getRandomValues(new Uint8Array(4));\nexport const nodes = {};\n",
        )],
    );
    assert_eq!(e.code(), "js_build_limit", "{e}");
    assert!(e.message().contains("called the host"), "{e}");
    // eval does not exist once the prelude has run.
    let e = refused(
        &["t.js.a"],
        &[("index.mjs", "eval('1');\nexport const nodes = {};\n")],
    );
    assert_eq!(e.code(), "js_module_failed", "{e}");
}

#[test]
fn sources_are_bounded_and_must_be_utf8() {
    let mut s = Source::new("index.mjs");
    let e = s.add("index.mjs", vec![0xff, 0xfe]).unwrap_err();
    assert_eq!(e.code(), "js_bundle_invalid");
    let mut s = Source::new("index.mjs");
    let e = s
        .add("index.mjs", vec![b' '; wop_js::MAX_SOURCE_BYTES + 1])
        .unwrap_err();
    assert_eq!(e.code(), "js_bundle_invalid");
}

#[test]
fn top_level_allocation_is_capped_so_a_component_cannot_grow_past_the_build_memory() {
    // 100 MiB held at load would be snapshotted into the component (and the
    // cache) if the build let it grow: the build's 64 MiB refuses it.
    let e = refused(
        &["t.js.a"],
        &[(
            "index.mjs",
            "globalThis.keep = new Uint8Array(100 * 1024 * 1024).fill(1);\nexport const nodes = { 't.js.a': async () => ({ status: 'success', outputs: {} }) };\n",
        )],
    );
    assert!(
        ["js_build_limit", "js_module_failed"].contains(&e.code()),
        "{e}"
    );
}
