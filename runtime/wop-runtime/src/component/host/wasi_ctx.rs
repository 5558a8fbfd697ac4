//! One invocation's WASI context: captured stdio, replayable randomness
//! and clocks, no network, at most the one directory the operator
//! granted; built when the pack first uses WASI ([`Wasi`]). What is
//! linked is in [`super::wasi`].

use super::stdio::CapturedStdio;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};
use wop_core::events::LogStream;
use wop_core::logbuf::SharedLog;
use wop_core::policy::FsGrant;
use wop_core::replay::{ReplayRng, Seed};

/// Where a granted directory appears inside the pack.
pub const GUEST_DATA_DIR: &str = "/data";

/// Largest `wasi:random` request served (larger traps).
const MAX_RANDOM_BYTES: u64 = 1 << 20;

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
/// Many packs never call WASI during an invocation (the Rust hello talks
/// only to the `openwop` interfaces), and the context's
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
