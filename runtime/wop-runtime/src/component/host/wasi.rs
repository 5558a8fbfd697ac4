//! WASI 0.2 with no ambient authority.
//!
//! Linked: io (stream writes enter the sandbox like every host call),
//! clocks, random, cli (empty env and args, closed stdin, captured
//! stdout/stderr), filesystem (no preopens unless the operator
//! grants one directory). Not linked at all: sockets and ip-name-lookup —
//! a pack importing them is refused at load, and even if that check were
//! bypassed instantiation would fail for lack of the import.

use super::stdio::CapturedStdio;
use super::streams::{HasStreams, Streams};
use crate::component::state::HostState;
use wasmtime::component::{HasData, Linker, ResourceTable};
use wasmtime_wasi::cli::{WasiCli, WasiCliView};
use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView};
use wasmtime_wasi::filesystem::{WasiFilesystem, WasiFilesystemView};
use wasmtime_wasi::p2::bindings as b;
use wasmtime_wasi::random::WasiRandom;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};
use wop_core::events::LogStream;
use wop_core::logbuf::SharedLog;
use wop_core::policy::FsGrant;
use wop_core::replay::{ReplayRng, Seed};

/// Where a granted directory appears inside the pack.
pub const GUEST_DATA_DIR: &str = "/data";

/// Largest `wasi:random` request served (larger traps).
const MAX_RANDOM_BYTES: u64 = 1 << 20;

struct HasIo;
impl HasData for HasIo {
    type Data<'a> = &'a mut ResourceTable;
}

pub(crate) fn add_to_linker(l: &mut Linker<HostState>) -> wasmtime::Result<()> {
    use wasmtime_wasi_io::bindings::wasi::io;
    io::error::add_to_linker::<HostState, HasIo>(l, |t| &mut t.table)?;
    io::poll::add_to_linker::<HostState, HasIo>(l, |t| &mut t.table)?;
    // Writes enter the sandbox (counted, charged per byte): streams.rs.
    io::streams::add_to_linker::<HostState, HasStreams>(l, |t| Streams {
        table: &mut t.table,
        sb: &mut t.sb,
    })?;
    b::clocks::wall_clock::add_to_linker::<HostState, WasiClocks>(l, HostState::clocks)?;
    b::clocks::monotonic_clock::add_to_linker::<HostState, WasiClocks>(l, HostState::clocks)?;
    b::filesystem::types::add_to_linker::<HostState, WasiFilesystem>(l, HostState::filesystem)?;
    b::filesystem::preopens::add_to_linker::<HostState, WasiFilesystem>(l, HostState::filesystem)?;
    b::random::random::add_to_linker::<HostState, WasiRandom>(l, |t| t.wasi.get().random())?;
    b::random::insecure::add_to_linker::<HostState, WasiRandom>(l, |t| t.wasi.get().random())?;
    b::random::insecure_seed::add_to_linker::<HostState, WasiRandom>(l, |t| t.wasi.get().random())?;
    b::cli::exit::add_to_linker::<HostState, WasiCli>(l, HostState::cli)?;
    b::cli::environment::add_to_linker::<HostState, WasiCli>(l, HostState::cli)?;
    b::cli::stdin::add_to_linker::<HostState, WasiCli>(l, HostState::cli)?;
    b::cli::stdout::add_to_linker::<HostState, WasiCli>(l, HostState::cli)?;
    b::cli::stderr::add_to_linker::<HostState, WasiCli>(l, HostState::cli)?;
    b::cli::terminal_input::add_to_linker::<HostState, WasiCli>(l, HostState::cli)?;
    b::cli::terminal_output::add_to_linker::<HostState, WasiCli>(l, HostState::cli)?;
    b::cli::terminal_stdin::add_to_linker::<HostState, WasiCli>(l, HostState::cli)?;
    b::cli::terminal_stdout::add_to_linker::<HostState, WasiCli>(l, HostState::cli)?;
    b::cli::terminal_stderr::add_to_linker::<HostState, WasiCli>(l, HostState::cli)?;
    Ok(())
}

/// A replayable wall clock for WASI, aligned with the `clock` interface.
struct WallClock {
    start_ms: u64,
    reads: std::sync::atomic::AtomicU64,
}

impl wasmtime_wasi::HostWallClock for WallClock {
    fn resolution(&self) -> std::time::Duration {
        std::time::Duration::from_millis(1)
    }
    fn now(&self) -> std::time::Duration {
        let n = self
            .reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        std::time::Duration::from_millis(self.start_ms + n)
    }
}

/// A replayable monotonic clock: starts at 0, one microsecond per read.
struct MonoClock {
    reads: std::sync::atomic::AtomicU64,
}

impl wasmtime_wasi::HostMonotonicClock for MonoClock {
    fn resolution(&self) -> u64 {
        1_000
    }
    fn now(&self) -> u64 {
        1_000
            * self
                .reads
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }
}

/// One invocation's WASI context, built when the pack first uses WASI.
///
/// Most packs never call WASI during an invocation (a Rust or JavaScript
/// hello talks only to the `openwop` interfaces), and the context's
/// building (three seed derivations, random generators, boxed streams and
/// clocks) was ~4 % of such an invocation's CPU. Built later from the
/// same seed and log it is the same context: the generators and the clocks
/// depend only on the seed, and nothing reads them before the first WASI
/// call. A granted directory is opened at once ([`Wasi::new`]), so that a
/// directory that cannot be opened still fails the invocation's set-up.
pub(crate) struct Wasi {
    built: Option<WasiCtx>,
    seed: Seed,
    log: SharedLog,
}

impl Wasi {
    /// The WASI context of an invocation with `seed` and `log`: built now
    /// when `fs` grants a directory (its opening can fail), else on first use.
    pub(crate) fn new(
        seed: &Seed,
        log: &SharedLog,
        fs: Option<&FsGrant>,
    ) -> wasmtime::Result<Self> {
        let built = match fs {
            Some(fs) => {
                let mut b = builder(seed, log);
                let perms = if fs.read_only {
                    FsPerms::ReadOnly
                } else {
                    FsPerms::ReadWrite
                };
                b.preopened_dir(&fs.path, GUEST_DATA_DIR, perms)?;
                Some(b.build())
            }
            None => None,
        };
        Ok(Wasi {
            built,
            seed: *seed,
            log: log.clone(),
        })
    }

    /// The context, built now if this is the invocation's first WASI use.
    pub(crate) fn get(&mut self) -> &mut WasiCtx {
        let Wasi { built, seed, log } = self;
        built.get_or_insert_with(|| builder(seed, log).build())
    }
}

/// The WASI context of one invocation, but for a granted directory:
/// captured stdio, replayable randomness and clocks, no network.
fn builder(seed: &Seed, log: &SharedLog) -> WasiCtxBuilder {
    let mut b = WasiCtxBuilder::new();
    b.stdout(CapturedStdio {
        stream: LogStream::Stdout,
        log: log.clone(),
    })
    .stderr(CapturedStdio {
        stream: LogStream::Stderr,
        log: log.clone(),
    })
    .secure_random(ReplayRng::new(seed.derive("wasi:random")))
    .insecure_random(ReplayRng::new(seed.derive("wasi:insecure")))
    .insecure_random_seed(seed.derive("wasi:seed").as_u128())
    .max_random_size(MAX_RANDOM_BYTES)
    .wall_clock(WallClock {
        start_ms: seed.clock_start_ms(),
        reads: Default::default(),
    })
    .monotonic_clock(MonoClock {
        reads: Default::default(),
    })
    .allow_tcp(false)
    .allow_udp(false)
    .allow_ip_name_lookup(false)
    .socket_addr_check(|_, _| Box::pin(async { false }));
    b
}
