//! WASI 0.2 with no ambient authority.
//!
//! Linked: io (stream writes enter the sandbox like every host call),
//! clocks, random, cli (empty env and args, closed stdin, captured
//! stdout/stderr), filesystem (no preopens unless the operator
//! grants one directory). Not linked at all: sockets and ip-name-lookup —
//! a pack importing them is refused at load, and even if that check were
//! bypassed instantiation would fail for lack of the import. The context
//! itself (built on first use) is [`super::wasi_ctx`].

use super::streams::{HasStreams, Streams};
use crate::component::state::HostState;
use wasmtime::component::{HasData, Linker, ResourceTable};
use wasmtime_wasi::cli::{WasiCli, WasiCliView};
use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView};
use wasmtime_wasi::filesystem::{WasiFilesystem, WasiFilesystemView};
use wasmtime_wasi::p2::bindings as b;
use wasmtime_wasi::random::WasiRandom;

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
