//! WASM ABI v1 core-module packs (`runtime.language: "wasm"`) through the
//! real runtime: our own WAT fixtures for every sandbox class, both (ptr,
//! len) encodings, replay, hostile ABI data, and the Rust-built sample.

use super::*;
use serde_json::json;
use sha2::Digest;
use wop_runtime::replay::{ReplayRng, Seed};
use wop_runtime::{Outcome, RunContext};

const PREFIX: &str = r#"{"outcome":"completed","output":"#;

/// A WAT module implementing the ABI around a configurable invoke body.
#[derive(Clone)]
struct Fx {
    version: i32,
    packed: bool,
    imported_memory: bool,
    name: &'static str,
    type_id: &'static str,
    /// Short names of ABI imports: `log`, `now_ms`, `random`,
    /// `variable_get`, `variable_set`, `channel_read`, `channel_write`,
    /// `interrupt`. Pair-returning ones get a multi-value wrapper `$<name>`.
    abi: Vec<&'static str>,
    /// Raw imports placed first (escape attempts, odd imports).
    raw_imports: String,
    /// Extra data segments / globals / functions.
    extra: String,
    /// Body of `openwop_node_invoke` (params `$idx $ptr $len`); return
    /// with `(call $ret <ptr> <len>)`.
    invoke: String,
    /// Body of `openwop_free` (params `$p $n`).
    free: String,
}

impl Fx {
    fn new(name: &'static str, type_id: &'static str, invoke: &str) -> Self {
        Fx {
            version: 1,
            packed: false,
            imported_memory: false,
            name,
            type_id,
            abi: Vec::new(),
            raw_imports: String::new(),
            extra: String::new(),
            invoke: invoke.to_owned(),
            free: String::new(),
        }
    }
    fn packed(mut self) -> Self {
        self.packed = true;
        self
    }
    fn abi(mut self, names: &[&'static str]) -> Self {
        self.abi.extend_from_slice(names);
        self
    }

    fn wat(&self) -> String {
        let pair = if self.packed { "i64" } else { "i32 i32" };
        let ret_body = if self.packed {
            "(i64.or (i64.extend_i32_u (local.get 0)) (i64.shl (i64.extend_i32_u (local.get 1)) (i64.const 32)))"
        } else {
            "(local.get 0) (local.get 1)"
        };
        let mut imports = self.raw_imports.clone();
        if self.imported_memory {
            imports.push_str("(import \"env\" \"memory\" (memory 1))\n");
        }
        let mut wrappers = String::new();
        for a in &self.abi {
            let full = format!("openwop_{a}");
            match *a {
                "log" => imports.push_str(&format!(
                    "(import \"openwop\" \"{full}\" (func $log (param i32 i32 i32)))\n"
                )),
                "now_ms" => imports.push_str(&format!(
                    "(import \"openwop\" \"{full}\" (func $now_ms (result i64)))\n"
                )),
                "random" => imports.push_str(&format!(
                    "(import \"openwop\" \"{full}\" (func $random (param i32 i32)))\n"
                )),
                "variable_set" | "channel_write" => imports.push_str(&format!(
                    "(import \"openwop\" \"{full}\" (func ${a} (param i32 i32 i32 i32) (result i32)))\n"
                )),
                _ => {
                    imports.push_str(&format!(
                        "(import \"openwop\" \"{full}\" (func $i_{a} (param i32 i32) (result {pair})))\n"
                    ));
                    let call = format!("(call $i_{a} (local.get 0) (local.get 1))");
                    let body = if self.packed {
                        format!("(call $unpack {call})")
                    } else {
                        call
                    };
                    wrappers.push_str(&format!(
                        "(func ${a} (param i32 i32) (result i32 i32) {body})\n"
                    ));
                }
            }
        }
        let memory = if self.imported_memory {
            String::new()
        } else {
            "(memory (export \"memory\") 1)".to_owned()
        };
        let esc = |s: &str| s.replace('"', "\\\"");
        format!(
            r#"(module
  {imports}
  {memory}
  (global $bump (mut i32) (i32.const 4096))
  (global $calls (mut i32) (i32.const 0))
  (data (i32.const 16) "{name}")
  (data (i32.const 64) "{type_id}")
  (data (i32.const 128) "{prefix}")
  (data (i32.const 192) "0123456789abcdef")
  {extra}
  {wrappers}
  (func $unpack (param i64) (result i32 i32)
    (i32.wrap_i64 (local.get 0))
    (i32.wrap_i64 (i64.shr_u (local.get 0) (i64.const 32))))
  (func $ret (param i32 i32) (result {pair}) {ret_body})
  (func $alloc (export "openwop_alloc") (param $n i32) (result i32)
    (local $p i32) (local $end i32)
    (local.set $p (global.get $bump))
    (local.set $end (i32.add (local.get $p) (local.get $n)))
    (if (i32.gt_u (local.get $end) (i32.mul (memory.size) (i32.const 65536)))
      (then
        (if (i32.eq
              (memory.grow (i32.add (i32.shr_u (i32.sub (local.get $end) (i32.mul (memory.size) (i32.const 65536))) (i32.const 16)) (i32.const 1)))
              (i32.const -1))
          (then unreachable))))
    (global.set $bump (local.get $end))
    (local.get $p))
  (func $respond_raw (param $p i32) (param $n i32) (result i32 i32)
    (local $out i32) (local $total i32)
    (local.set $total (i32.add (i32.const {plen1}) (local.get $n)))
    (local.set $out (call $alloc (local.get $total)))
    (memory.copy (local.get $out) (i32.const 128) (i32.const {plen}))
    (memory.copy (i32.add (local.get $out) (i32.const {plen})) (local.get $p) (local.get $n))
    (i32.store8 (i32.add (local.get $out) (i32.sub (local.get $total) (i32.const 1))) (i32.const 125))
    (local.get $out) (local.get $total))
  (func $hex (param $src i32) (param $n i32) (param $dst i32)
    (local $i i32) (local $b i32)
    (block $done (loop $l
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (local.set $b (i32.load8_u (i32.add (local.get $src) (local.get $i))))
      (i32.store8 (i32.add (local.get $dst) (i32.shl (local.get $i) (i32.const 1)))
        (i32.load8_u (i32.add (i32.const 192) (i32.shr_u (local.get $b) (i32.const 4)))))
      (i32.store8 (i32.add (local.get $dst) (i32.add (i32.shl (local.get $i) (i32.const 1)) (i32.const 1)))
        (i32.load8_u (i32.add (i32.const 192) (i32.and (local.get $b) (i32.const 15)))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $l))))
  (func (export "openwop_abi_version") (result i32) (i32.const {version}))
  (func (export "openwop_pack_name") (result {pair}) (call $ret (i32.const 16) (i32.const {name_len})))
  (func (export "openwop_node_count") (result i32) (i32.const 1))
  (func (export "openwop_node_id_at") (param i32) (result {pair}) (call $ret (i32.const 64) (i32.const {tid_len})))
  (func (export "openwop_free") (param $p i32) (param $n i32) {free})
  (func (export "openwop_node_invoke") (param $idx i32) (param $ptr i32) (param $len i32) (result {pair})
    {invoke})
)"#,
            name = self.name,
            type_id = self.type_id,
            prefix = esc(PREFIX),
            extra = self.extra,
            version = self.version,
            name_len = self.name.len(),
            tid_len = self.type_id.len(),
            free = self.free,
            invoke = self.invoke,
            plen = PREFIX.len(),
            plen1 = PREFIX.len() + 1,
        )
    }

    fn wasm(&self) -> Vec<u8> {
        wat::parse_str(self.wat()).unwrap_or_else(|e| panic!("{e}\n{}", self.wat()))
    }
}

const ECHO: &str = "(call $ret (call $respond_raw (local.get $ptr) (local.get $len)))";

/// Writes a pack directory (pack.json with `language: "wasm"`) for `fx`.
fn write_pack(root: &Path, fx: &Fx, caps: &[&str]) -> PathBuf {
    write_pack_bytes(
        root,
        fx.name,
        fx.type_id,
        &fx.wasm(),
        caps,
        json!({"abiVersion": 1}),
    )
}

fn write_pack_bytes(
    root: &Path,
    name: &str,
    type_id: &str,
    wasm: &[u8],
    caps: &[&str],
    wasm_block: Value,
) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("module.wasm"), wasm).unwrap();
    let manifest = json!({
        "kind": "node", "name": name, "version": "1.0.0",
        "engines": {"openwop": ">=1.0.0"},
        "nodes": [{"typeId": type_id, "version": "1.0.0", "category": "transform", "role": "worker"}],
        "runtime": {"language": "wasm", "entry": "module.wasm", "format": "wasm", "wasm": wasm_block},
        "x-wop": {"sha256": hex::encode(sha2::Sha256::digest(wasm)), "capabilities": caps}
    });
    std::fs::write(dir.join("pack.json"), manifest.to_string()).unwrap();
    dir
}

fn code(r: &InvocationReport) -> String {
    match &r.outcome {
        Err(e) => e.code.clone(),
        Ok(o) => panic!("expected a failure, got {o:?}"),
    }
}

fn output(r: &InvocationReport) -> Value {
    match &r.outcome {
        Ok(Outcome::Completed { output }) => output.clone(),
        other => panic!("expected completed, got {other:?} (events {:?})", r.events),
    }
}

fn instantiations(rt: &Runtime) -> u64 {
    rt.stats().instantiations
}

fn req(type_id: &str, inputs: Value, run: &str, node: &str, attempt: u32) -> InvokeRequest {
    let mut r = InvokeRequest::new(type_id, inputs);
    r.context = RunContext {
        run_id: run.to_owned(),
        node_id: node.to_owned(),
        tenant_id: "acme".to_owned(),
        attempt,
    };
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_in_both_encodings_gives_the_same_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime("");
    let multi = Fx::new("echo-multi", "test.echo-multi", ECHO);
    let packed = Fx::new("echo-packed", "test.echo-packed", ECHO).packed();
    for fx in [&multi, &packed] {
        let s = rt
            .load_pack(&write_pack(tmp.path(), fx, &[]))
            .await
            .unwrap();
        assert_eq!(s.type_ids, vec![fx.type_id.to_owned()]);
    }
    let inputs = json!({"name": "Ada", "n": [1, 2, 3]});
    let a = rt
        .invoke(req("test.echo-multi", inputs.clone(), "r1", "n1", 3))
        .await;
    let b = rt
        .invoke(req("test.echo-packed", inputs.clone(), "r1", "n1", 3))
        .await;
    let (a, b) = (output(&a), output(&b));
    assert_eq!(a, b);
    // The request envelope the module saw (RFC 0008 §D).
    assert_eq!(
        a,
        json!({
            "abiVersion": 1,
            "nodeContext": {"runId": "r1", "nodeId": "n1", "tenantId": "acme", "attempt": 3,
                            "configurable": {}, "agent": null},
            "inputs": inputs,
        })
    );
    let names: Vec<String> = rt.packs().into_iter().map(|p| p.name).collect();
    assert!(names.contains(&"echo-multi".to_owned()), "{names:?}");
    let doc = serde_json::to_value(rt.capabilities()).unwrap();
    assert_eq!(
        doc["nodePackRuntimes"]["wasm"]["loadedPacks"],
        json!(["echo-multi", "echo-packed"])
    );
}

/// Reads a variable and a channel, writes both, and reports the status
/// codes (two digits each) followed by the value read back.
fn vars_fx(name: &'static str, type_id: &'static str) -> Fx {
    let extra = r#"
  (data (i32.const 512) "greeting")   ;; key, 8
  (data (i32.const 528) "\"hi\"")     ;; valid JSON value, 4
  (data (i32.const 536) "{x")         ;; invalid JSON, 2
  (data (i32.const 544) "nochan")     ;; unknown channel, 6
  (data (i32.const 552) "inbox")      ;; channel, 5
  (func $digits (param $s i32) (param $at i32)
    (i32.store8 (local.get $at) (i32.add (i32.const 48) (i32.div_u (local.get $s) (i32.const 10))))
    (i32.store8 (i32.add (local.get $at) (i32.const 1)) (i32.add (i32.const 48) (i32.rem_u (local.get $s) (i32.const 10)))))
"#;
    // Builds `[<var before>,"<4 statuses>",<var after>,<channel after>]`.
    let invoke = r#"
    (local $p i32) (local $n i32) (local $q i32)
    (i32.store8 (i32.const 1000) (i32.const 91))
    (call $variable_get (i32.const 512) (i32.const 8))
    (local.set $n) (local.set $p)
    (if (i32.eqz (local.get $n))
      (then (i32.store (i32.const 1001) (i32.const 0x6c6c756e)) (local.set $n (i32.const 4)))
      (else (memory.copy (i32.const 1001) (local.get $p) (local.get $n))))
    (local.set $q (i32.add (i32.const 1001) (local.get $n)))
    (i32.store8 (local.get $q) (i32.const 44))
    (i32.store8 (i32.add (local.get $q) (i32.const 1)) (i32.const 34))
    (call $digits (call $variable_set (i32.const 512) (i32.const 8) (i32.const 528) (i32.const 4)) (i32.add (local.get $q) (i32.const 2)))
    (call $digits (call $variable_set (i32.const 512) (i32.const 8) (i32.const 536) (i32.const 2)) (i32.add (local.get $q) (i32.const 4)))
    (call $digits (call $channel_write (i32.const 544) (i32.const 6) (i32.const 528) (i32.const 4)) (i32.add (local.get $q) (i32.const 6)))
    (call $digits (call $channel_write (i32.const 552) (i32.const 5) (i32.const 528) (i32.const 4)) (i32.add (local.get $q) (i32.const 8)))
    (i32.store8 (i32.add (local.get $q) (i32.const 10)) (i32.const 34))
    (i32.store8 (i32.add (local.get $q) (i32.const 11)) (i32.const 44))
    (local.set $q (i32.add (local.get $q) (i32.const 12)))
    (call $variable_get (i32.const 512) (i32.const 8))
    (local.set $n) (local.set $p)
    (memory.copy (local.get $q) (local.get $p) (local.get $n))
    (local.set $q (i32.add (local.get $q) (local.get $n)))
    (i32.store8 (local.get $q) (i32.const 44))
    (call $channel_read (i32.const 552) (i32.const 5))
    (local.set $n) (local.set $p)
    (memory.copy (i32.add (local.get $q) (i32.const 1)) (local.get $p) (local.get $n))
    (local.set $q (i32.add (i32.add (local.get $q) (i32.const 1)) (local.get $n)))
    (i32.store8 (local.get $q) (i32.const 93))
    (call $ret (call $respond_raw (i32.const 1000) (i32.sub (i32.add (local.get $q) (i32.const 1)) (i32.const 1000))))"#;
    let mut fx = Fx::new(name, type_id, invoke).abi(&[
        "variable_get",
        "variable_set",
        "channel_read",
        "channel_write",
    ]);
    fx.extra = extra.to_owned();
    fx
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn granted_capabilities_work_with_abi_status_codes_in_both_encodings() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime(
        r#"
[packs.vars-multi]
capabilities = ["variables", "channels"]
[packs.vars-packed]
capabilities = ["variables", "channels"]
"#,
    );
    let multi = vars_fx("vars-multi", "test.vars-multi");
    let packed = vars_fx("vars-packed", "test.vars-packed").packed();
    let caps = ["variables", "channels"];
    rt.load_pack(&write_pack(tmp.path(), &multi, &caps))
        .await
        .unwrap();
    rt.load_pack(&write_pack(tmp.path(), &packed, &caps))
        .await
        .unwrap();
    let mut outs = Vec::new();
    for t in ["test.vars-multi", "test.vars-packed"] {
        let mut r = InvokeRequest::new(t, json!({}));
        r.config = json!({"variables": {"greeting": "hello"}, "channels": {"inbox": []}});
        let rep = rt.invoke(r).await;
        outs.push(output(&rep));
        assert_eq!(rep.usage.host_calls.get("variables"), Some(&4));
        assert_eq!(rep.usage.host_calls.get("channels"), Some(&3));
    }
    assert_eq!(outs[0], outs[1]);
    // before; statuses: set ok (0), invalid JSON (10), unknown channel
    // (11), channel ok (0); after: the variable and the channel as written.
    assert_eq!(outs[0], json!(["hello", "00101100", "hi", "hi"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ungranted_capability_is_denied_before_the_module_runs() {
    let tmp = tempfile::tempdir().unwrap();
    // Requested in the manifest but not granted by the operator.
    let rt = runtime("");
    let fx = vars_fx("vars-denied", "test.vars-denied");
    let before = instantiations(&rt);
    let e = rt
        .load_pack(&write_pack(tmp.path(), &fx, &["variables", "channels"]))
        .await
        .unwrap_err();
    let ne = e.to_node_error();
    assert_eq!(ne.code, "sandbox_capability_denied");
    assert_eq!(
        ne.detail("requestedCapability"),
        Some(&json!("openwop_variable_get"))
    );
    assert!(ne.message.contains("variables"), "{}", ne.message);
    assert!(
        ne.message.contains("under [packs.vars-denied]") && ne.message.contains("--policy"),
        "names the pack's policy table: {}",
        ne.message
    );
    assert_eq!(instantiations(&rt), before, "the module must never run");
    assert!(rt.packs().is_empty());
    let r = invoke(&rt, "test.vars-denied", json!({})).await;
    assert_eq!(code(&r), "not_found");

    // The same import in a bare module: base capabilities only.
    let path = tmp.path().join("bare-vars.wasm");
    std::fs::write(&path, fx.wasm()).unwrap();
    let e = rt.load_pack(&path).await.unwrap_err();
    assert_eq!(e.to_node_error().code, "sandbox_capability_denied");
    assert_eq!(instantiations(&rt), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_escape_kinds_are_refused_before_instantiation() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime("");
    // Each module has a start function that traps: if it ever ran, the
    // load would fail differently (and the instantiation counter moves).
    let cases = [
        (
            "esc-fs",
            r#"(import "wasi_snapshot_preview1" "path_open" (func (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))"#,
            "host-fs-escape",
        ),
        (
            "esc-env",
            r#"(import "wasi_snapshot_preview1" "environ_get" (func (param i32 i32) (result i32)))
               (import "wasi_snapshot_preview1" "sock_send" (func (param i32 i32 i32 i32 i32) (result i32)))"#,
            "host-env-leak",
        ),
        (
            "esc-net",
            r#"(import "wasi_snapshot_preview1" "sock_accept" (func (param i32 i32 i32) (result i32)))"#,
            "network-escape",
        ),
        (
            "esc-proc",
            r#"(import "wasi_snapshot_preview1" "proc_raise" (func (param i32) (result i32)))"#,
            "host-process-escape",
        ),
        (
            "esc-spawn",
            r#"(import "env" "posix_spawn" (func (param i32) (result i32)))"#,
            "host-process-escape",
        ),
    ];
    let before = instantiations(&rt);
    for (name, imports, kind) in cases {
        let mut fx = Fx::new(name, "test.escape", ECHO).abi(&["log"]);
        fx.raw_imports = imports.to_owned();
        fx.extra = "(func $boom unreachable) (start $boom)".to_owned();
        let e = rt
            .load_pack(&write_pack(tmp.path(), &fx, &[]))
            .await
            .unwrap_err()
            .to_node_error();
        assert_eq!(e.code, "sandbox_escape_attempt", "{name}: {e:?}");
        assert_eq!(e.detail("escapeKind"), Some(&json!(kind)), "{name}");
        // Inspection shows the verdicts in declaration order.
        let insp = rt.inspect_pack(&tmp.path().join(name)).await.unwrap();
        assert_eq!(insp.imports[0].verdict, format!("escape:{kind}"), "{name}");
        assert_eq!(
            insp.refusal.as_ref().map(|r| r.code.as_str()),
            Some("sandbox_escape_attempt")
        );
    }
    assert_eq!(instantiations(&rt), before, "no escaping module ever ran");
    assert!(rt.packs().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_out_of_bounds_and_growth_past_the_cap() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime("[limits]\nmemoryBytes = 2097152\n");
    let oob = Fx::new(
        "oob",
        "test.oob",
        "(i32.store (i32.const 0x7ffffff0) (i32.const 1)) (call $ret (i32.const 0) (i32.const 0))",
    );
    let grow = "(drop (memory.grow (i32.const 64))) (call $ret (i32.const 0) (i32.const 0))";
    let own = Fx::new("grow-own", "test.grow-own", grow);
    let mut imported = Fx::new("grow-imported", "test.grow-imported", grow);
    imported.imported_memory = true;
    // Within the cap the imported memory grows fine (its maximum is the cap).
    let mut fits = Fx::new(
        "grow-fits",
        "test.grow-fits",
        &format!("(drop (memory.grow (i32.const 16))) {ECHO}"),
    );
    fits.imported_memory = true;
    for fx in [&oob, &own, &imported, &fits] {
        rt.load_pack(&write_pack(tmp.path(), fx, &[]))
            .await
            .unwrap();
    }
    let r = invoke(&rt, "test.oob", json!({})).await;
    assert_eq!(code(&r), "sandbox_memory_exceeded");
    let e = r.outcome.as_ref().unwrap_err();
    assert_eq!(e.detail("cause"), Some(&json!("out-of-bounds")));
    for t in ["test.grow-own", "test.grow-imported"] {
        let r = invoke(&rt, t, json!({})).await;
        assert_eq!(code(&r), "sandbox_memory_exceeded", "{t}");
        assert_eq!(breaches(&r), vec!["wasm-memory"], "{t}");
        let e = r.outcome.as_ref().unwrap_err();
        assert_eq!(e.detail("limit"), Some(&json!(2097152)), "{t}");
    }
    let r = invoke(&rt, "test.grow-fits", json!({})).await;
    output(&r);
    assert!(r.usage.peak_memory_bytes >= 17 * 65536);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tight_loop_stops_at_the_wall_clock() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime("[limits]\nwallClockMs = 300\nfuel = 1000000000000\n");
    let fx = Fx::new(
        "spin-core",
        "test.spin-core",
        "(loop $l (br $l)) (call $ret (i32.const 0) (i32.const 0))",
    );
    rt.load_pack(&write_pack(tmp.path(), &fx, &[]))
        .await
        .unwrap();
    let r = invoke(&rt, "test.spin-core", json!({})).await;
    assert_eq!(code(&r), "sandbox_timeout");
    assert_eq!(breaches(&r), vec!["wasm-execution-time"]);
    // The host is fine afterwards.
    let echo = Fx::new("echo-after", "test.echo-after", ECHO);
    rt.load_pack(&write_pack(tmp.path(), &echo, &[]))
        .await
        .unwrap();
    output(&invoke(&rt, "test.echo-after", json!({})).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn global_state_does_not_survive_between_invocations() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime("");
    let fx = Fx::new(
        "counter",
        "test.counter",
        "(global.set $calls (i32.add (global.get $calls) (i32.const 1)))
         (i32.store8 (i32.const 900) (i32.add (i32.const 48) (global.get $calls)))
         (call $ret (call $respond_raw (i32.const 900) (i32.const 1)))",
    );
    rt.load_pack(&write_pack(tmp.path(), &fx, &[]))
        .await
        .unwrap();
    for _ in 0..3 {
        assert_eq!(
            output(&invoke(&rt, "test.counter", json!({})).await),
            json!(1)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsupported_abi_version_is_refused_and_never_registered() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime("");
    let mut fx = Fx::new("abi-999", "test.abi-999", ECHO);
    fx.version = 999;
    // The manifest must not claim a version either way for this check.
    let dir = write_pack_bytes(tmp.path(), fx.name, fx.type_id, &fx.wasm(), &[], json!({}));
    let e = rt.load_pack(&dir).await.unwrap_err().to_node_error();
    assert_eq!(e.code, "unsupported_abi_version");
    assert_eq!(e.detail("abiVersion"), Some(&json!(999)));
    assert!(rt.packs().is_empty());
    assert_eq!(
        code(&invoke(&rt, "test.abi-999", json!({})).await),
        "not_found"
    );

    // The version is read first: a module with nothing but the version
    // export is refused for its version, not for its missing exports.
    let only = wat::parse_str(
        r#"(module (func (export "openwop_abi_version") (result i32) (i32.const 999)))"#,
    )
    .unwrap();
    let dir = write_pack_bytes(
        tmp.path(),
        "abi-only",
        "test.abi-only",
        &only,
        &[],
        json!({}),
    );
    let e = rt.load_pack(&dir).await.unwrap_err().to_node_error();
    assert_eq!(e.code, "unsupported_abi_version");

    // A manifest declaring an unsupported ABI is refused before compiling.
    let dir = write_pack_bytes(
        tmp.path(),
        "abi-decl",
        "test.abi-decl",
        &Fx::new("abi-decl", "test.abi-decl", ECHO).wasm(),
        &[],
        json!({"abiVersion": 2}),
    );
    let e = rt.load_pack(&dir).await.unwrap_err().to_node_error();
    assert_eq!(e.code, "unsupported_abi_version");
    assert!(rt.packs().is_empty());
}

fn replay_fx() -> Fx {
    Fx::new(
        "replay-core",
        "test.replay-core",
        "(i64.store (i32.const 1024) (call $now_ms))
         (call $random (i32.const 1032) (i32.const 16))
         (i32.store8 (i32.const 1100) (i32.const 34))
         (call $hex (i32.const 1024) (i32.const 24) (i32.const 1101))
         (i32.store8 (i32.const 1149) (i32.const 34))
         (call $ret (call $respond_raw (i32.const 1100) (i32.const 50)))",
    )
    .abi(&["now_ms", "random"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn now_ms_and_random_replay_per_run_node_attempt() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime("");
    rt.load_pack(&write_pack(tmp.path(), &replay_fx(), &[]))
        .await
        .unwrap();
    let run = |attempt| {
        rt.invoke(req(
            "test.replay-core",
            json!({}),
            "run-7",
            "node-3",
            attempt,
        ))
    };
    let a = output(&run(1).await);
    let b = output(&run(1).await);
    let c = output(&run(2).await);
    assert_eq!(
        a, b,
        "the same attempt sees the same clock and random bytes"
    );
    assert_ne!(a, c, "another attempt sees different ones");
    // And they are the host's replay streams for that (run, node, attempt).
    let bytes = hex::decode(a.as_str().unwrap()).unwrap();
    let seed = Seed::new("run-7", "node-3", 1);
    let now = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    assert_eq!(now, seed.clock_start_ms());
    let mut want = [0u8; 16];
    ReplayRng::new(seed.derive("openwop:random")).fill(&mut want);
    assert_eq!(&bytes[8..], &want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_abi_data_never_crashes_the_host() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime("[limits]\nmemoryBytes = 4194304\n");
    let mut bad_utf8 = Fx::new(
        "bad-utf8",
        "test.bad-utf8",
        "(call $ret (i32.const 600) (i32.const 2))",
    );
    bad_utf8.extra = r#"(data (i32.const 600) "\ff\fe")"#.to_owned();
    let mut trapping_free = Fx::new("bad-free", "test.bad-free", ECHO);
    trapping_free.free = "unreachable".to_owned();
    let mut bad_log = Fx::new(
        "bad-log",
        "test.bad-log",
        "(call $log (i32.const 2) (i32.const 65000) (i32.const 100000)) (call $ret (i32.const 0) (i32.const 0))",
    )
    .abi(&["log"]);
    bad_log.extra = String::new();
    let mut bad_random = Fx::new(
        "bad-random",
        "test.bad-random",
        "(call $random (i32.const 0) (i32.const 1000000)) (call $ret (i32.const 0) (i32.const 0))",
    )
    .abi(&["random"]);
    bad_random.extra = String::new();
    let cases: Vec<(Fx, &str, &str)> = vec![
        (
            Fx::new(
                "past-memory",
                "test.past-memory",
                "(call $ret (i32.const 0x7fff0000) (i32.const 10))",
            ),
            "sandbox_invocation_error",
            "invalid-abi",
        ),
        (
            Fx::new(
                "len-4gib",
                "test.len-4gib",
                "(call $ret (i32.const 16) (i32.const -1))",
            )
            .packed(),
            "sandbox_invocation_error",
            "invalid-abi",
        ),
        (
            Fx::new(
                "len-4gib-mv",
                "test.len-4gib-mv",
                "(call $ret (i32.const 16) (i32.const -1))",
            ),
            "sandbox_invocation_error",
            "invalid-abi",
        ),
        (
            Fx::new(
                "no-response",
                "test.no-response",
                "(call $ret (i32.const 0) (i32.const 0))",
            ),
            "sandbox_invocation_error",
            "invalid-abi",
        ),
        (
            Fx::new(
                "not-json",
                "test.not-json",
                "(call $ret (i32.const 16) (i32.const 5))",
            ),
            "sandbox_invocation_error",
            "invalid-response",
        ),
        (bad_utf8, "sandbox_invocation_error", "invalid-response"),
        (trapping_free, "sandbox_invocation_error", "free-trapped"),
        (bad_log, "sandbox_invocation_error", "invalid-abi"),
        (bad_random, "sandbox_invocation_error", "random-bytes"),
    ];
    for (fx, want_code, kind) in &cases {
        rt.load_pack(&write_pack(tmp.path(), fx, &[]))
            .await
            .unwrap();
        let r = invoke(&rt, fx.type_id, json!({})).await;
        assert_eq!(code(&r), *want_code, "{}: {:?}", fx.name, r.outcome);
        let e = r.outcome.as_ref().unwrap_err();
        let got = e
            .detail("trapKind")
            .or_else(|| e.detail("cause"))
            .cloned()
            .unwrap_or_default();
        assert_eq!(got, json!(kind), "{}: {e:?}", fx.name);
    }
    // The host is intact: a good module still runs.
    let echo = Fx::new("echo-ok", "test.echo-ok", ECHO);
    rt.load_pack(&write_pack(tmp.path(), &echo, &[]))
        .await
        .unwrap();
    output(&invoke(&rt, "test.echo-ok", json!({"x": 1})).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_suspends_and_resume_value_is_supplied_on_reinvocation() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime("[packs.asker]\ncapabilities = [\"interrupt\"]\n");
    for packed in [false, true] {
        let mut fx = Fx::new(
            "asker",
            "test.asker",
            "(call $interrupt (i32.const 700) (i32.const 18))
             (call $ret (call $respond_raw))",
        )
        .abi(&["interrupt"]);
        fx.packed = packed;
        fx.extra = r#"(data (i32.const 700) "{\"ask\":\"approve?\"}")"#.to_owned();
        rt.load_pack(&write_pack(tmp.path(), &fx, &["interrupt"]))
            .await
            .unwrap();
        let first = invoke(&rt, "test.asker", json!({})).await;
        assert_eq!(
            first.outcome,
            Ok(Outcome::Suspended {
                interrupt: json!({"ask": "approve?"})
            })
        );
        let mut again = InvokeRequest::new("test.asker", json!({}));
        again.resume = Some(json!({"approved": true}));
        let second = rt.invoke(again).await;
        assert_eq!(output(&second), json!({"approved": true}));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bare_module_synthesizes_its_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime("");
    let fx = Fx::new("bare-echo", "test.bare-echo", ECHO).packed();
    let path = tmp.path().join("whatever.wasm");
    std::fs::write(&path, fx.wasm()).unwrap();
    let insp = rt.inspect_pack(&path).await.unwrap();
    assert_eq!(insp.manifest.name, "bare-echo");
    assert_eq!(insp.manifest.nodes[0].type_id, "test.bare-echo");
    assert!(insp.refusal.is_none());
    let s = rt.load_pack(&path).await.unwrap();
    assert_eq!(s.name, "bare-echo");
    assert_eq!(s.limits, rt.policy().limits());
    let out = output(&invoke(&rt, "test.bare-echo", json!({"a": 1})).await);
    assert_eq!(out["inputs"], json!({"a": 1}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn integrity_and_manifest_agreement_are_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime("");
    let fx = Fx::new("tamper", "test.tamper", ECHO);
    let dir = write_pack(tmp.path(), &fx, &[]);
    let mut bytes = std::fs::read(dir.join("module.wasm")).unwrap();
    bytes.extend_from_slice(&[0, 1, 2]); // a custom-section-free tail breaks the hash
    std::fs::write(dir.join("module.wasm"), &bytes).unwrap();
    let e = rt.load_pack(&dir).await.unwrap_err().to_node_error();
    assert_eq!(e.code, "pack_integrity_mismatch");
    // The module's own name must match pack.json.
    let other = Fx::new("other-name", "test.tamper", ECHO);
    let dir = write_pack_bytes(
        tmp.path(),
        "tamper2",
        "test.tamper",
        &other.wasm(),
        &[],
        json!({}),
    );
    let e = rt.load_pack(&dir).await.unwrap_err().to_node_error();
    assert_eq!(e.code, "pack_validation_failed");
    assert!(e.message.contains("other-name"), "{}", e.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_sample_pack_greets_and_logs_at_info() {
    let rt = runtime("");
    load(&rt, "hello-abi").await;
    let r = invoke(&rt, "wop.samples.hello-abi", json!({"name": "Ada"})).await;
    assert_eq!(output(&r), json!({"greeting": "Hello, Ada!"}));
    assert!(matches!(
        &r.events[0],
        Event::LogAppended { level: wop_runtime::LogLevel::Info, message, .. } if message == "Hello, Ada!"
    ));
    assert_eq!(r.usage.pack, "hello-abi");
    assert!(r.usage.fuel_consumed > 0);
    let insp = rt.inspect_pack(&pack("hello-abi")).await.unwrap();
    assert_eq!(insp.imports[0].name, "openwop.openwop_log");
    assert_eq!(insp.imports[0].verdict, "allowed");
}
