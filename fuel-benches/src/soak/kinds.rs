//! The mix table: every kind the soak sends, its weight and the one
//! answer it must get (types in [`super::mix`]).
//!
//! An expected answer must not depend on how fast the machine is: where
//! two limits could stop a kind, either one of them cannot be reached
//! first on any machine, or both report the same code (issue 25).
//! - `fuel-spin`, `abi-spin`, `log-flood`: fuel or the 5 s wall clock,
//!   both `sandbox_timeout`.
//! - `run-timeout`: a 2 ms run timeout against a 300 M fuel ceiling. The
//!   spin pack's loop burns fuel at up to ~50 units/ns once its yields are
//!   resumed in place (decision 0039): 300 M in ~6 ms on this machine,
//!   so the run timeout was 10 ms until the fuel ceiling began to win it.
//!   The deadline is checked on the OS clock at every fuel yield (decision
//!   0013), so neither a busy scheduler nor a lagging TSC lets the fuel
//!   ceiling decide. A run whose ledger takes longer than 2 ms to open is
//!   refused at admission — also `run_timeout`.
//! - `budget-fuel`: a 5 M fuel budget (about a millisecond of CPU) against
//!   the 5 s wall clock.
//! - `tool-slow`: the tool's 100 ms timeout against a 3 s upstream and the
//!   5 s wall clock.
//! - `print-flood`, `megabyte-tool-ids`: complete in a few hundred
//!   milliseconds at worst under the soak's load, an order of magnitude
//!   inside the 5 s wall clock.

use super::mix::{Call, Expect, Invoke, Kind};
use serde_json::{Value, json};

fn items(n: u64) -> Value {
    Value::Array(
        (0..5)
            .map(|i| json!({"a": (n + i * 7) % 11, "b": format!("x{i}")}))
            .collect(),
    )
}

const fn inv(type_id: &'static str, inputs: fn(u64) -> Value, extra: &'static str) -> Invoke {
    Invoke {
        type_id,
        inputs,
        extra,
    }
}

const fn honest(name: &'static str, weight: u32, call: Call, check: fn(&Value) -> bool) -> Kind {
    Kind {
        name,
        honest: true,
        weight,
        call,
        expect: Expect::Completed(check),
    }
}

const fn hostile(name: &'static str, weight: u32, call: Call, expect: Expect) -> Kind {
    Kind {
        name,
        honest: false,
        weight,
        call,
        expect,
    }
}

use Call::{Invoke as I, Load, Mcp, Raw, Replay};
use Expect::{Completed, Failed, Refused, Status};

const HELLO: Invoke = inv("wop.samples.hello", |_| json!({"name": "soak"}), "");
const VARS: &str = r#"{"config": {"variables": {"k": "v"}}}"#;

/// The mix. Weights are relative; honest kinds are ~70 % of invocations,
/// hostile ones most of the CPU.
pub const MIX: &[Kind] = &[
    // Honest.
    honest("hello", 20, I(HELLO), |o| o["greeting"] == "Hello, soak!"),
    honest(
        "transform",
        5,
        I(inv(
            "wop.samples.transform",
            |n| json!({"items": items(n), "sortBy": "a"}),
            "",
        )),
        |o| o["count"] == 5,
    ),
    honest(
        "kv-put",
        8,
        I(inv(
            "wop.samples.tool-call",
            |n| json!({"tool": "kv:put", "arguments": {"key": format!("k{}", n % 64), "value": n}}),
            "",
        )),
        |o| o["result"]["ok"] == true,
    ),
    honest(
        "kv-get",
        8,
        I(inv(
            "wop.samples.tool-call",
            |n| json!({"tool": "kv:get", "arguments": {"key": format!("k{}", n % 64)}}),
            "",
        )),
        |o| o["result"]["ok"] == true,
    ),
    honest(
        "kv-put-replay",
        3,
        Replay(inv(
            "wop.samples.tool-call",
            |n| json!({"tool": "kv:put", "arguments": {"key": format!("r{}", n % 64), "value": n}}),
            "",
        )),
        |o| o["result"]["ok"] == true,
    ),
    honest(
        "pack-tool",
        4,
        I(inv(
            "wop.samples.tool-call",
            |n| json!({"tool": "xf:sort", "arguments": {"items": items(n), "sortBy": "a"}}),
            "",
        )),
        |o| o["result"]["count"] == 5,
    ),
    honest(
        "list-tools",
        2,
        I(inv("wop.samples.tool-call", |_| json!({"list": true}), "")),
        |o| o["tools"].as_array().is_some_and(|t| t.len() >= 3),
    ),
    honest(
        "log-heavy",
        5,
        I(inv(
            "wop.testing.kernels",
            |_| json!({"kernel": "noop-log", "n": 2000}),
            "",
        )),
        |o| o["result"] == 2000,
    ),
    honest(
        "fib",
        4,
        I(inv(
            "wop.testing.kernels",
            |_| json!({"kernel": "fib", "n": 18}),
            "",
        )),
        |o| o["result"] == 2584,
    ),
    honest(
        "abi-hello",
        5,
        I(inv(
            "wop.samples.hello-abi",
            |_| json!({"name": "soak"}),
            "",
        )),
        |o| o["greeting"] == "Hello, soak!",
    ),
    honest(
        "abi-kv",
        4,
        I(inv("soak.abi-kv", |_| json!({}), VARS)),
        |o| *o == json!(0),
    ),
    honest(
        "fresh-state",
        3,
        I(inv("wop.testing.static-counter", |_| json!({}), "")),
        |o| o["count"] == 1,
    ),
    honest("mcp-hello", 3, Mcp(HELLO), |o| {
        o["greeting"] == "Hello, soak!"
    }),
    // Hostile: the sandbox's limits.
    hostile(
        "fuel-spin",
        2,
        I(inv("wop.testing.spin", |_| json!({}), "")),
        Failed("sandbox_timeout"),
    ),
    hostile(
        "run-timeout",
        2,
        I(inv(
            "wop.testing.spin",
            |_| json!({}),
            r#"{"bounds": {"runTimeoutMs": 2}}"#,
        )),
        Failed("run_timeout"),
    ),
    hostile(
        "budget-fuel",
        2,
        I(inv(
            "wop.testing.spin",
            |_| json!({}),
            r#"{"budget": {"maxFuel": 5000000}}"#,
        )),
        Failed("budget_exhausted"),
    ),
    hostile(
        "memory-bomb",
        2,
        I(inv("wop.testing.memory-bomb", |_| json!({}), "")),
        Failed("sandbox_memory_exceeded"),
    ),
    hostile(
        "stack-overflow",
        2,
        I(inv("wop.testing.deep-recursion", |_| json!({}), "")),
        Failed("sandbox_invocation_error"),
    ),
    hostile(
        "shadow-stack",
        1,
        I(inv(
            "wop.testing.deep-recursion",
            |_| json!({"mode": "shadow"}),
            "",
        )),
        Failed("sandbox_memory_exceeded"),
    ),
    hostile(
        "output-cap",
        2,
        I(inv(
            "wop.testing.huge-output",
            |_| json!({"bytes": 2_000_000}),
            "",
        )),
        Failed("sandbox_invocation_error"),
    ),
    hostile(
        "error-cap",
        1,
        I(inv(
            "wop.testing.huge-output",
            |_| json!({"bytes": 2_000_000, "in": "details"}),
            "",
        )),
        Failed("sandbox_invocation_error"),
    ),
    hostile(
        "guest-panic",
        2,
        I(inv("wop.testing.panic", |_| json!({}), "")),
        Failed("sandbox_invocation_error"),
    ),
    hostile(
        "print-flood",
        2,
        I(inv(
            "wop.testing.heavy-print",
            |_| json!({"lines": 5000}),
            "",
        )),
        Completed(|o| o["printed"] == 5000),
    ),
    hostile(
        "log-flood",
        1,
        I(inv(
            "wop.testing.id-flood",
            |_| json!({"mode": "log", "logBytes": 1 << 20}),
            "",
        )),
        Failed("sandbox_timeout"),
    ),
    hostile(
        "megabyte-tool-ids",
        1,
        I(inv(
            "wop.testing.id-flood",
            |_| json!({"mode": "tools", "calls": 10, "idBytes": 1_000_000}),
            "",
        )),
        Completed(|o| o["errors"] == 10 && o["codes"] == json!(["validation_error"])),
    ),
    // Hostile: the gate and egress.
    hostile(
        "tool-ungranted",
        2,
        I(inv(
            "wop.samples.tool-call",
            |_| json!({"tool": "admin:drop"}),
            "",
        )),
        Failed("forbidden"),
    ),
    hostile(
        "tool-no-scope",
        1,
        I(inv(
            "wop.samples.tool-call",
            |_| json!({"tool": "kv:admin", "arguments": {"key": "a"}}),
            "",
        )),
        Failed("forbidden"),
    ),
    hostile(
        "tool-unknown",
        1,
        I(inv(
            "wop.samples.tool-call",
            |_| json!({"tool": "kv:nope"}),
            "",
        )),
        Failed("not_found"),
    ),
    hostile(
        "tool-slow",
        1,
        I(inv(
            "wop.samples.tool-call",
            |_| json!({"tool": "kv:slow"}),
            "",
        )),
        Failed("upstream_unavailable"),
    ),
    hostile(
        "loop-limit",
        1,
        I(inv(
            "wop.samples.tool-call",
            |_| json!({"tool": "kv:get", "arguments": {"key": "k1"}, "repeat": 10}),
            r#"{"bounds": {"maxLoopIterations": 3}}"#,
        )),
        Failed("loop_limit_exceeded"),
    ),
    hostile(
        "egress-denied",
        2,
        I(inv(
            "wop.samples.fetch",
            |_| json!({"url": "http://169.254.169.254/latest/meta-data/"}),
            "",
        )),
        Failed("egress_denied"),
    ),
    // Hostile: ABI v1 modules built from WAT.
    hostile(
        "abi-reenter",
        1,
        I(inv("soak.abi-reenter", |_| json!({}), VARS)),
        Failed("sandbox_invocation_error"),
    ),
    hostile(
        "abi-spin",
        1,
        I(inv("soak.abi-spin", |_| json!({}), "")),
        Failed("sandbox_timeout"),
    ),
    hostile(
        "abi-grow",
        1,
        I(inv("soak.abi-grow", |_| json!({}), "")),
        Failed("sandbox_memory_exceeded"),
    ),
    // Hostile: refused at load (library only).
    hostile(
        "load-sockets",
        1,
        Load("sockets"),
        Failed("sandbox_escape_attempt"),
    ),
    hostile(
        "load-ungranted",
        1,
        Load("ungranted"),
        Failed("sandbox_capability_denied"),
    ),
    // Hostile: clients of the service (serve only).
    hostile(
        "mcp-memory-bomb",
        1,
        Mcp(inv("wop.testing.memory-bomb", |_| json!({}), "")),
        Failed("sandbox_memory_exceeded"),
    ),
    hostile(
        "http-bad-json",
        1,
        Raw {
            path: "/host/wop/invocations",
            body: || br#"{"typeId": "wop.samples.hello", "inputs": {"#.to_vec(),
        },
        Status(400),
    ),
    hostile(
        "http-unknown-type",
        1,
        Raw {
            path: "/host/wop/invocations",
            body: || br#"{"typeId": "soak.nope", "inputs": {}}"#.to_vec(),
        },
        Status(404),
    ),
    hostile(
        "http-deep-json",
        1,
        Raw {
            path: "/host/wop/invocations",
            body: || {
                let mut b = br#"{"typeId": "wop.samples.hello", "inputs": "#.to_vec();
                b.extend(std::iter::repeat_n(b'[', 200));
                b.extend(std::iter::repeat_n(b']', 200));
                b.push(b'}');
                b
            },
        },
        Status(400),
    ),
    hostile(
        "http-huge-body",
        1,
        Raw {
            path: "/host/wop/invocations",
            body: || {
                let mut b = br#"{"typeId": "wop.samples.hello", "inputs": {"name": ""#.to_vec();
                b.extend(std::iter::repeat_n(b'x', 2 << 20));
                b.extend_from_slice(br#""}}"#);
                b
            },
        },
        Refused(413),
    ),
];

/// The kinds a mode sends.
pub fn for_mode(library: bool) -> Vec<Kind> {
    MIX.iter()
        .filter(|k| {
            if library {
                k.in_library()
            } else {
                k.in_serve()
            }
        })
        .copied()
        .collect()
}
