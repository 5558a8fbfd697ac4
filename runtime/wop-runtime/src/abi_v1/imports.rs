//! The static import gate for ABI v1 core modules. Pure: no wasmtime
//! types. Every import of the compiled module is judged in declaration
//! order, before anything is instantiated; the first offender decides.
//!
//! | import | verdict |
//! |---|---|
//! | WASI-style `fd_*`, `path_*` (any module but `openwop`) | escape `host-fs-escape` |
//! | `environ_*`, `args_*` | escape `host-env-leak` |
//! | `sock_*` | escape `network-escape` |
//! | `proc_*`, `sched_*`, anything spawning, exec'ing, forking or signalling | escape `host-process-escape` |
//! | `env.memory` (32-bit, unshared) | the host-provided memory, capped |
//! | `openwop.<abi import>` | allowed (base) / granted / not granted |
//! | `openwop.<other>` | granted only by name (probe `--allow`), else denied |
//! | anything else | denied (`sandbox_capability_denied`) |

use std::collections::BTreeSet;
use wop_core::capability::{Capability, EscapeKind};

/// The import module of the ABI's host functions.
pub const OPENWOP_MODULE: &str = "openwop";

/// What kind of entity an import is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportKind {
    /// A function.
    Func,
    /// A linear memory (`shared`/`memory64` flags say which kind).
    Memory {
        /// A 64-bit memory.
        is_64: bool,
        /// A shared memory.
        shared: bool,
    },
    /// A table, global or tag.
    Other,
}

/// The host functions of the ABI (RFC 0008 §C).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AbiImport {
    /// `openwop_log(level, ptr, len)`.
    Log,
    /// `openwop_now_ms() -> i64`.
    NowMs,
    /// `openwop_random(out_ptr, len)`.
    Random,
    /// `openwop_variable_get(key_ptr, key_len) -> (ptr, len)`.
    VariableGet,
    /// `openwop_variable_set(key_ptr, key_len, value_ptr, value_len) -> status`.
    VariableSet,
    /// `openwop_channel_read(name_ptr, name_len) -> (ptr, len)`.
    ChannelRead,
    /// `openwop_channel_write(name_ptr, name_len, value_ptr, value_len) -> status`.
    ChannelWrite,
    /// `openwop_interrupt(payload_ptr, payload_len) -> (ptr, len)`.
    Interrupt,
}

impl AbiImport {
    /// Every ABI import.
    pub const ALL: [AbiImport; 8] = [
        Self::Log,
        Self::NowMs,
        Self::Random,
        Self::VariableGet,
        Self::VariableSet,
        Self::ChannelRead,
        Self::ChannelWrite,
        Self::Interrupt,
    ];

    /// The import's field name in module `openwop`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Log => "openwop_log",
            Self::NowMs => "openwop_now_ms",
            Self::Random => "openwop_random",
            Self::VariableGet => "openwop_variable_get",
            Self::VariableSet => "openwop_variable_set",
            Self::ChannelRead => "openwop_channel_read",
            Self::ChannelWrite => "openwop_channel_write",
            Self::Interrupt => "openwop_interrupt",
        }
    }

    /// Looks an import field name up.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The capability that grants this import (`log`, `clock` and `random`
    /// are base capabilities: always granted to packs).
    pub fn capability(self) -> Capability {
        match self {
            Self::Log => Capability::Log,
            Self::NowMs => Capability::Clock,
            Self::Random => Capability::Random,
            Self::VariableGet | Self::VariableSet => Capability::Variables,
            Self::ChannelRead | Self::ChannelWrite => Capability::Channels,
            Self::Interrupt => Capability::Interrupt,
        }
    }

    /// Whether the import returns a (ptr, len) pair (multi-value or packed).
    pub fn returns_pair(self) -> bool {
        matches!(
            self,
            Self::VariableGet | Self::ChannelRead | Self::Interrupt
        )
    }

    /// The `usage.hostCalls` key.
    pub fn interface(self) -> &'static str {
        match self {
            Self::Log => "log",
            Self::NowMs => "clock",
            Self::Random => "random",
            Self::VariableGet | Self::VariableSet => "variables",
            Self::ChannelRead | Self::ChannelWrite => "channels",
            Self::Interrupt => "interrupt",
        }
    }
}

/// The ABI imports a capability set grants, as field names.
pub fn granted_names(caps: &BTreeSet<Capability>) -> BTreeSet<String> {
    AbiImport::ALL
        .into_iter()
        .filter(|a| caps.contains(&a.capability()))
        .map(|a| a.name().to_owned())
        .collect()
}

/// The capabilities a module's imports ask for (beyond the base set):
/// what a bare `.wasm` without a manifest is taken to request.
pub fn requested_by_imports<'a>(
    imports: impl Iterator<Item = (&'a str, &'a str)>,
) -> Vec<Capability> {
    let mut out = BTreeSet::new();
    for (module, name) in imports {
        if module == OPENWOP_MODULE
            && let Some(a) = AbiImport::from_name(name)
            && !a.capability().is_base()
        {
            out.insert(a.capability());
        }
    }
    out.into_iter().collect()
}

/// The verdict on one core-module import.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AbiV1Verdict {
    /// `env.memory`: provided by the host with the cap as its maximum.
    HostMemory,
    /// An ABI host function that is granted (base or by grant).
    Abi(AbiImport),
    /// A non-ABI `openwop.<name>` function granted by name (probe mode:
    /// the identity function if its type is `(i32) -> i32`).
    Named(String),
    /// An `openwop` import that was not granted; the string is the
    /// requested capability (the import's field name).
    NotGranted(String),
    /// A host facility that would escape the sandbox.
    Escape(EscapeKind),
    /// Anything else: denied; the string is `module.name`.
    Unknown(String),
}

impl AbiV1Verdict {
    /// The verdict string shown by `wop inspect`.
    pub fn label(&self) -> String {
        match self {
            Self::HostMemory => "host-memory".to_owned(),
            Self::Abi(a) if a.capability().is_base() => "allowed".to_owned(),
            Self::Abi(_) | Self::Named(_) => "granted".to_owned(),
            Self::NotGranted(_) => "not-granted".to_owned(),
            Self::Escape(k) => format!("escape:{}", k.as_str()),
            Self::Unknown(_) => "unknown".to_owned(),
        }
    }

    /// Whether this import refuses the module.
    pub fn refuses(&self) -> bool {
        matches!(
            self,
            Self::NotGranted(_) | Self::Escape(_) | Self::Unknown(_)
        )
    }
}

/// Words that mark a function as spawning, exec'ing or signalling.
const PROCESS_WORDS: &[&str] = &[
    "spawn", "exec", "execve", "execv", "execvp", "fork", "vfork", "kill", "signal", "raise",
    "system", "popen", "exit",
];

/// Splits `thread-spawn`, `posix_spawn`, `fd.write` into lowercase words.
fn words(name: &str) -> impl Iterator<Item = String> + '_ {
    name.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
}

/// The escape kind a function import name reveals, if any. Applies to
/// every module except `openwop` (WASI preview 1 under any module name,
/// emscripten-style `env` shims, ...).
pub fn escape_kind(name: &str) -> Option<EscapeKind> {
    let n = name.to_ascii_lowercase();
    if n.starts_with("fd_") || n.starts_with("path_") {
        return Some(EscapeKind::HostFs);
    }
    if n.starts_with("environ_") || n.starts_with("args_") {
        return Some(EscapeKind::HostEnv);
    }
    if n.starts_with("sock_") {
        return Some(EscapeKind::Network);
    }
    if n.starts_with("proc_") || n.starts_with("sched_") {
        return Some(EscapeKind::HostProcess);
    }
    if words(&n).any(|w| PROCESS_WORDS.contains(&w.as_str())) {
        return Some(EscapeKind::HostProcess);
    }
    None
}

/// Judges one import. `granted` holds the `openwop` field names this
/// module may import (from capabilities, or from probe `--allow`).
pub fn judge(
    module: &str,
    name: &str,
    kind: ImportKind,
    granted: &BTreeSet<String>,
) -> AbiV1Verdict {
    let full = || format!("{module}.{name}");
    match kind {
        ImportKind::Memory { is_64, shared } => {
            if module == "env" && name == "memory" && !is_64 && !shared {
                AbiV1Verdict::HostMemory
            } else {
                AbiV1Verdict::Unknown(full())
            }
        }
        ImportKind::Other => AbiV1Verdict::Unknown(full()),
        ImportKind::Func if module == OPENWOP_MODULE => {
            if !granted.contains(name) {
                return AbiV1Verdict::NotGranted(name.to_owned());
            }
            match AbiImport::from_name(name) {
                Some(a) => AbiV1Verdict::Abi(a),
                None => AbiV1Verdict::Named(name.to_owned()),
            }
        }
        ImportKind::Func => match escape_kind(name) {
            Some(k) => AbiV1Verdict::Escape(k),
            None => AbiV1Verdict::Unknown(full()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use AbiV1Verdict as V;
    use EscapeKind::*;

    const F: ImportKind = ImportKind::Func;

    #[test]
    fn gate_table() {
        let caps: BTreeSet<Capability> = Capability::BASE
            .into_iter()
            .chain([Capability::Variables])
            .collect();
        let mut granted = granted_names(&caps);
        granted.insert("host_fetch".to_owned());
        let mem = |is_64, shared| ImportKind::Memory { is_64, shared };
        let cases: &[(&str, &str, ImportKind, AbiV1Verdict)] = &[
            ("wasi_snapshot_preview1", "fd_write", F, V::Escape(HostFs)),
            (
                "wasi_snapshot_preview1",
                "fd_prestat_get",
                F,
                V::Escape(HostFs),
            ),
            ("wasi_snapshot_preview1", "path_open", F, V::Escape(HostFs)),
            ("wasi_unstable", "path_unlink_file", F, V::Escape(HostFs)),
            (
                "wasi_snapshot_preview1",
                "environ_get",
                F,
                V::Escape(HostEnv),
            ),
            (
                "wasi_snapshot_preview1",
                "environ_sizes_get",
                F,
                V::Escape(HostEnv),
            ),
            ("wasi_snapshot_preview1", "args_get", F, V::Escape(HostEnv)),
            (
                "wasi_snapshot_preview1",
                "sock_accept",
                F,
                V::Escape(Network),
            ),
            ("wasi_snapshot_preview1", "sock_send", F, V::Escape(Network)),
            (
                "wasi_snapshot_preview1",
                "proc_exit",
                F,
                V::Escape(HostProcess),
            ),
            (
                "wasi_snapshot_preview1",
                "proc_raise",
                F,
                V::Escape(HostProcess),
            ),
            (
                "wasi_snapshot_preview1",
                "sched_yield",
                F,
                V::Escape(HostProcess),
            ),
            ("wasi", "thread-spawn", F, V::Escape(HostProcess)),
            ("env", "posix_spawn", F, V::Escape(HostProcess)),
            ("env", "execve", F, V::Escape(HostProcess)),
            ("env", "fork", F, V::Escape(HostProcess)),
            ("env", "kill", F, V::Escape(HostProcess)),
            ("env", "system", F, V::Escape(HostProcess)),
            ("env", "fd_write", F, V::Escape(HostFs)),
            (
                "wasi_snapshot_preview1",
                "random_get",
                F,
                V::Unknown("wasi_snapshot_preview1.random_get".into()),
            ),
            (
                "wasi_snapshot_preview1",
                "clock_time_get",
                F,
                V::Unknown("wasi_snapshot_preview1.clock_time_get".into()),
            ),
            (
                "env",
                "executor_hint",
                F,
                V::Unknown("env.executor_hint".into()),
            ),
            ("env", "abort", F, V::Unknown("env.abort".into())),
            ("env", "memory", mem(false, false), V::HostMemory),
            (
                "env",
                "memory",
                mem(true, false),
                V::Unknown("env.memory".into()),
            ),
            (
                "env",
                "memory",
                mem(false, true),
                V::Unknown("env.memory".into()),
            ),
            (
                "other",
                "memory",
                mem(false, false),
                V::Unknown("other.memory".into()),
            ),
            (
                "env",
                "table",
                ImportKind::Other,
                V::Unknown("env.table".into()),
            ),
            ("openwop", "openwop_log", F, V::Abi(AbiImport::Log)),
            ("openwop", "openwop_now_ms", F, V::Abi(AbiImport::NowMs)),
            ("openwop", "openwop_random", F, V::Abi(AbiImport::Random)),
            (
                "openwop",
                "openwop_variable_get",
                F,
                V::Abi(AbiImport::VariableGet),
            ),
            (
                "openwop",
                "openwop_variable_set",
                F,
                V::Abi(AbiImport::VariableSet),
            ),
            (
                "openwop",
                "openwop_channel_read",
                F,
                V::NotGranted("openwop_channel_read".into()),
            ),
            (
                "openwop",
                "openwop_interrupt",
                F,
                V::NotGranted("openwop_interrupt".into()),
            ),
            ("openwop", "host_fetch", F, V::Named("host_fetch".into())),
            ("openwop", "host_exec", F, V::NotGranted("host_exec".into())),
            // `openwop` is judged by grants, never by escape words.
            ("openwop", "fd_write", F, V::NotGranted("fd_write".into())),
        ];
        for (module, name, kind, want) in cases {
            assert_eq!(
                &judge(module, name, *kind, &granted),
                want,
                "{module}.{name}"
            );
        }
    }

    #[test]
    fn labels_and_requests() {
        assert_eq!(V::Abi(AbiImport::Log).label(), "allowed");
        assert_eq!(V::Abi(AbiImport::VariableGet).label(), "granted");
        assert_eq!(V::Escape(Network).label(), "escape:network-escape");
        assert!(V::Unknown("x.y".into()).refuses());
        assert!(!V::HostMemory.refuses());
        let req = requested_by_imports(
            [
                ("openwop", "openwop_log"),
                ("openwop", "openwop_interrupt"),
                ("openwop", "openwop_variable_set"),
                ("env", "openwop_channel_read"),
            ]
            .into_iter(),
        );
        assert_eq!(req, vec![Capability::Variables, Capability::Interrupt]);
        let base: BTreeSet<_> = Capability::BASE.into_iter().collect();
        assert_eq!(
            granted_names(&base).into_iter().collect::<Vec<_>>(),
            vec!["openwop_log", "openwop_now_ms", "openwop_random"]
        );
    }
}
