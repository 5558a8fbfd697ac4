//! The WASI preview 1 the engine sees at build time, and only then: stdin
//! is the bundle, stderr is captured (the engine's error line), the clock
//! is fixed and random bytes are zero, so the snapshot is the same bytes
//! on every machine. Nothing else exists (no files, no environment).

use wasmtime::{Caller, Extern, Linker};

/// The store's data during the build.
pub(crate) struct BuildIo {
    pub(crate) stdin: Vec<u8>,
    pub(crate) read: usize,
    pub(crate) stderr: Vec<u8>,
    pub(crate) limits: wasmtime::StoreLimits,
}

/// Cap on captured stderr.
const MAX_STDERR: usize = 64 * 1024;
const ERRNO_SUCCESS: i32 = 0;
const ERRNO_BADF: i32 = 8;
const ERRNO_FAULT: i32 = 21;
const ERRNO_NOSYS: i32 = 52;
/// 2026-01-01T00:00:00Z: the fixed build-time clock.
const FIXED_NANOS: u64 = 1_767_225_600_000_000_000;

fn memory(c: &mut Caller<'_, BuildIo>) -> Option<wasmtime::Memory> {
    match c.get_export("memory") {
        Some(Extern::Memory(m)) => Some(m),
        _ => None,
    }
}

fn write_u32(c: &mut Caller<'_, BuildIo>, at: i32, v: u32) -> bool {
    write_bytes(c, at, &v.to_le_bytes())
}

fn write_bytes(c: &mut Caller<'_, BuildIo>, at: i32, bytes: &[u8]) -> bool {
    match memory(c) {
        Some(m) => m.write(c, at as u32 as usize, bytes).is_ok(),
        None => false,
    }
}

fn read_bytes(c: &mut Caller<'_, BuildIo>, at: i32, len: u32) -> Option<Vec<u8>> {
    let m = memory(c)?;
    let mut buf = vec![0; len as usize];
    m.read(&*c, at as u32 as usize, &mut buf).ok()?;
    Some(buf)
}

/// `(ptr, len)` pairs of an iovec array.
fn iovecs(c: &mut Caller<'_, BuildIo>, iovs: i32, n: i32) -> Option<Vec<(i32, u32)>> {
    let raw = read_bytes(c, iovs, (n as u32).checked_mul(8)?)?;
    Some(
        raw.chunks_exact(8)
            .map(|ch| {
                let p = i32::from_le_bytes([ch[0], ch[1], ch[2], ch[3]]);
                let l = u32::from_le_bytes([ch[4], ch[5], ch[6], ch[7]]);
                (p, l)
            })
            .collect(),
    )
}

/// Defines the engine's preview 1 imports on `linker`.
pub(crate) fn add(linker: &mut Linker<BuildIo>) -> wasmtime::Result<()> {
    const M: &str = "wasi_snapshot_preview1";
    linker.func_wrap(
        M,
        "fd_read",
        |mut c: Caller<'_, BuildIo>, fd: i32, iovs: i32, n: i32, nread: i32| -> i32 {
            if fd != 0 {
                return ERRNO_BADF;
            }
            let Some(vs) = iovecs(&mut c, iovs, n) else {
                return ERRNO_FAULT;
            };
            let mut total = 0u32;
            for (p, l) in vs {
                let (start, len) = (c.data().read, c.data().stdin.len());
                let take = (l as usize).min(len - start);
                let chunk = c.data().stdin[start..start + take].to_vec();
                if !write_bytes(&mut c, p, &chunk) {
                    return ERRNO_FAULT;
                }
                c.data_mut().read += take;
                total += take as u32;
                if take < l as usize {
                    break;
                }
            }
            if write_u32(&mut c, nread, total) {
                ERRNO_SUCCESS
            } else {
                ERRNO_FAULT
            }
        },
    )?;
    linker.func_wrap(
        M,
        "fd_write",
        |mut c: Caller<'_, BuildIo>, fd: i32, iovs: i32, n: i32, nwritten: i32| -> i32 {
            if fd != 1 && fd != 2 {
                return ERRNO_BADF;
            }
            let Some(vs) = iovecs(&mut c, iovs, n) else {
                return ERRNO_FAULT;
            };
            let mut total = 0u32;
            for (p, l) in vs {
                let Some(bytes) = read_bytes(&mut c, p, l) else {
                    return ERRNO_FAULT;
                };
                let room = MAX_STDERR.saturating_sub(c.data().stderr.len());
                c.data_mut()
                    .stderr
                    .extend_from_slice(&bytes[..bytes.len().min(room)]);
                total += l;
            }
            if write_u32(&mut c, nwritten, total) {
                ERRNO_SUCCESS
            } else {
                ERRNO_FAULT
            }
        },
    )?;
    linker.func_wrap(M, "fd_close", |_: Caller<'_, BuildIo>, _fd: i32| -> i32 {
        ERRNO_SUCCESS
    })?;
    linker.func_wrap(
        M,
        "fd_seek",
        |_: Caller<'_, BuildIo>, _fd: i32, _o: i64, _w: i32, _r: i32| -> i32 { ERRNO_NOSYS },
    )?;
    linker.func_wrap(
        M,
        "fd_fdstat_get",
        |mut c: Caller<'_, BuildIo>, fd: i32, out: i32| -> i32 {
            if !(0..=2).contains(&fd) {
                return ERRNO_BADF;
            }
            // filetype character_device (2), no flags, no rights needed.
            let mut stat = [0u8; 24];
            stat[0] = 2;
            if write_bytes(&mut c, out, &stat) {
                ERRNO_SUCCESS
            } else {
                ERRNO_FAULT
            }
        },
    )?;
    linker.func_wrap(
        M,
        "environ_sizes_get",
        |mut c: Caller<'_, BuildIo>, count: i32, size: i32| -> i32 {
            if write_u32(&mut c, count, 0) && write_u32(&mut c, size, 0) {
                ERRNO_SUCCESS
            } else {
                ERRNO_FAULT
            }
        },
    )?;
    linker.func_wrap(
        M,
        "environ_get",
        |_: Caller<'_, BuildIo>, _a: i32, _b: i32| -> i32 { ERRNO_SUCCESS },
    )?;
    linker.func_wrap(
        M,
        "clock_time_get",
        |mut c: Caller<'_, BuildIo>, _id: i32, _prec: i64, out: i32| -> i32 {
            if write_bytes(&mut c, out, &FIXED_NANOS.to_le_bytes()) {
                ERRNO_SUCCESS
            } else {
                ERRNO_FAULT
            }
        },
    )?;
    linker.func_wrap(
        M,
        "random_get",
        |mut c: Caller<'_, BuildIo>, buf: i32, len: i32| -> i32 {
            if len as u32 > 1 << 20 {
                return ERRNO_FAULT;
            }
            let zeros = vec![0u8; len as u32 as usize];
            if write_bytes(&mut c, buf, &zeros) {
                ERRNO_SUCCESS
            } else {
                ERRNO_FAULT
            }
        },
    )?;
    linker.func_wrap(
        M,
        "proc_exit",
        |_: Caller<'_, BuildIo>, code: i32| -> wasmtime::Result<()> {
            Err(wasmtime::format_err!(
                "the engine exited with status {code}"
            ))
        },
    )?;
    Ok(())
}
