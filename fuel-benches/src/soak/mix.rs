//! What the soak sends: the weighted mix of honest and hostile kinds, each
//! with the one answer it must get, and the packs and policy they need.
//!
//! The same table drives both modes: [`Call::Invoke`] and [`Call::Replay`]
//! go through `Runtime::invoke` (library) or `POST /host/wop/invocations`
//! (serve); [`Call::Load`] is library-only; [`Call::Mcp`] and
//! [`Call::Raw`] are serve-only.

use serde_json::Value;

/// The answer a kind must get.
#[derive(Debug, Clone, Copy)]
pub enum Expect {
    /// Completed, and the output passes the check.
    Completed(fn(&Value) -> bool),
    /// Failed (or refused at load) with exactly this code.
    Failed(&'static str),
    /// Serve only: this HTTP status (for requests the service refuses
    /// before any invocation).
    Status(u16),
    /// Serve only: this HTTP status, or the connection reset while the
    /// client was still sending a body the service refused to read (it
    /// answers and closes without draining; the client may see the reset
    /// before the answer).
    Refused(u16),
}

/// One invocation's request.
#[derive(Debug, Clone, Copy)]
pub struct Invoke {
    /// The node type.
    pub type_id: &'static str,
    /// The inputs, from the invocation's sequence number.
    pub inputs: fn(u64) -> Value,
    /// `config`, `budget` and `bounds` as a JSON object text (`""`: none).
    pub extra: &'static str,
}

impl Invoke {
    /// `extra` parsed (an empty object when unset or invalid).
    pub fn extra(&self) -> serde_json::Map<String, Value> {
        match serde_json::from_str(self.extra) {
            Ok(Value::Object(m)) => m,
            _ => serde_json::Map::new(),
        }
    }
}

/// How a kind is sent.
#[derive(Debug, Clone, Copy)]
pub enum Call {
    /// One invocation in a run of its own.
    Invoke(Invoke),
    /// The same invocation twice in one run: the second must replay the
    /// first's claimed tool effect (equal outputs; the tool is not called
    /// again).
    Replay(Invoke),
    /// Library only: `Runtime::load_pack` of this (refused) testing pack.
    Load(&'static str),
    /// Serve only: `POST /mcp` `tools/call` of the node type.
    Mcp(Invoke),
    /// Serve only: `POST <path>` with this body, from a hostile client.
    Raw {
        /// The route.
        path: &'static str,
        /// The body.
        body: fn() -> Vec<u8>,
    },
}

/// One kind of invocation in the mix.
#[derive(Debug, Clone, Copy)]
pub struct Kind {
    /// Short name (the tally's row).
    pub name: &'static str,
    /// Honest (an ordinary pack doing its job) or hostile.
    pub honest: bool,
    /// Relative frequency.
    pub weight: u32,
    /// What is sent.
    pub call: Call,
    /// The one acceptable answer.
    pub expect: Expect,
}

impl Kind {
    /// Whether the library mode sends it.
    pub fn in_library(&self) -> bool {
        !matches!(self.call, Call::Mcp(_) | Call::Raw { .. })
    }
    /// Whether the serve mode sends it.
    pub fn in_serve(&self) -> bool {
        !matches!(self.call, Call::Load(_))
    }
}

/// Component packs (from `wop_test_packs`) loaded at start.
pub const COMPONENT_PACKS: [&str; 14] = [
    "hello",
    "transform",
    "tool-call",
    "kernels",
    "static-counter",
    "spin",
    "memory-bomb",
    "deep-recursion",
    "huge-output",
    "panic",
    "heavy-print",
    "id-flood",
    "fetch",
    "hello-abi",
];

/// The operator policy: ceilings as in `tests/all/hostile.rs`, grants for
/// the packs that call tools, fetch or keep variables, and the operator
/// tools (HTTP tools on the kv service at `kv_base`, a node-pack tool).
pub fn policy(kv_base: &str) -> String {
    format!(
        r#"[limits]
memoryBytes = 33554432
fuel = 300000000
wallClockMs = 5000
outputBytes = 1048576
logBytes = 65536

[packs.tool-call]
capabilities = ["tools"]
tools = ["kv:*", "xf:*"]

[packs.id-flood]
capabilities = ["tools"]
tools = ["crm:*"]

[packs.fetch]
capabilities = ["http"]
egress = ["api.example.invalid"]

[packs.abi-kv]
capabilities = ["variables"]

[packs.abi-reenter]
capabilities = ["variables"]

[[tools]]
id = "kv:get"
url = "{kv_base}/get"
safetyTier = "read"

[[tools]]
id = "kv:put"
url = "{kv_base}/put"
safetyTier = "write"

[[tools]]
id = "kv:slow"
url = "{kv_base}/slow"
safetyTier = "read"
timeoutMs = 100

[[tools]]
id = "kv:admin"
url = "{kv_base}/put"
safetyTier = "write"
scopes = ["kv.admin"]

[[tools]]
id = "xf:sort"
packType = "wop.samples.transform"
safetyTier = "read"
"#
    )
}

/// Picks kinds by weight with a small deterministic generator (xorshift).
#[derive(Debug, Clone)]
pub struct Picker {
    cumulative: Vec<u64>,
    state: u64,
}

impl Picker {
    /// A picker over `kinds` seeded with `seed`.
    pub fn new(kinds: &[Kind], seed: u64) -> Picker {
        let mut acc = 0u64;
        let cumulative = kinds
            .iter()
            .map(|k| {
                acc += u64::from(k.weight.max(1));
                acc
            })
            .collect();
        Picker {
            cumulative,
            state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
        }
    }

    /// The index of the next kind.
    pub fn pick(&mut self) -> usize {
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state = x;
        let total = self.cumulative.last().copied().unwrap_or(1).max(1);
        let r = x % total;
        self.cumulative.partition_point(|&c| c <= r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::soak::kinds::{MIX, for_mode};

    #[test]
    fn every_kind_is_sent_and_picked() {
        for library in [true, false] {
            let kinds = for_mode(library);
            let mut seen = vec![0u32; kinds.len()];
            let mut p = Picker::new(&kinds, 7);
            for _ in 0..200_000 {
                if let Some(n) = seen.get_mut(p.pick()) {
                    *n += 1;
                }
            }
            assert!(seen.iter().all(|&n| n > 0), "{seen:?}");
        }
        assert!(MIX.iter().all(|k| k.in_library() || k.in_serve()));
        let names: std::collections::BTreeSet<_> = MIX.iter().map(|k| k.name).collect();
        assert_eq!(names.len(), MIX.len(), "kind names are unique");
    }
}
