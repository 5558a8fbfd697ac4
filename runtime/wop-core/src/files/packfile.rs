//! The one reader for every pack file: `pack.json`, `pack.sig`, the entry
//! and a bare ABI v1 module. Every read of a file a pack author supplied
//! goes through here, before anything else looks at it (the ABI v1
//! detection included), so that no file is read before it is bounded.
//!
//! The rule (decision 0016):
//!
//! - **Regular files only.** The path is looked at without following a
//!   symlink (`lstat`): a symlink, a directory, a FIFO, a socket or a
//!   device is refused before it is opened, each with its own
//!   `details.reason` (`symlink`, `directory`, `fifo`, `socket`,
//!   `device`).
//! - **No blocking open.** The file is opened with `O_NOFOLLOW |
//!   O_NONBLOCK | O_CLOEXEC` through a `cap-std` [`Dir`] (so no path can
//!   leave the pack directory), and the opened descriptor is checked again
//!   with `fstat`: it must be a regular file (a FIFO swapped in between
//!   the two looks is refused, not waited on).
//! - **Size before reading.** The size from `fstat` is checked against the
//!   cap before a byte is read (`too-large`), and the read itself stops at
//!   the cap plus one byte (a file that grows while it is read is refused
//!   the same way).
//!
//! What a file is and what it may be are decided by the pure functions
//! here ([`FileKind`], [`Refusal`]); the three system calls are the only
//! I/O.

use crate::error::LoadError;
use cap_std::fs::{Dir, FileType, FileTypeExt, OpenOptions, OpenOptionsExt};
use std::io::Read;
use std::path::Path;

/// Largest `pack.json` accepted.
pub const MAX_MANIFEST_BYTES: u64 = 1 << 20;
/// Largest `pack.sig` accepted.
pub const MAX_SIG_BYTES: u64 = 64 << 10;
/// Largest entry file (component or core module) accepted.
pub const MAX_ENTRY_BYTES: u64 = 256 << 20;

/// What a path inside a pack directory is, looked at without following it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file: the only kind a pack file may be.
    Regular,
    /// A symbolic link (never followed).
    Symlink,
    /// A directory.
    Directory,
    /// A FIFO (named pipe): opening it for reading could block forever.
    Fifo,
    /// A Unix socket.
    Socket,
    /// A character or block device (`/dev/zero` never ends).
    Device,
    /// Anything else the platform reports.
    Other,
}

impl FileKind {
    /// The kind of a `cap-std` file type.
    pub fn of(t: FileType) -> FileKind {
        if t.is_symlink() {
            FileKind::Symlink
        } else if t.is_dir() {
            FileKind::Directory
        } else if t.is_file() {
            FileKind::Regular
        } else if t.is_fifo() {
            FileKind::Fifo
        } else if t.is_socket() {
            FileKind::Socket
        } else if t.is_char_device() || t.is_block_device() {
            FileKind::Device
        } else {
            FileKind::Other
        }
    }

    /// `details.reason` of a refusal of this kind.
    pub fn reason(self) -> &'static str {
        match self {
            FileKind::Regular => "regular",
            FileKind::Symlink => "symlink",
            FileKind::Directory => "directory",
            FileKind::Fifo => "fifo",
            FileKind::Socket => "socket",
            FileKind::Device => "device",
            FileKind::Other => "not-regular",
        }
    }

    /// For messages: "a symbolic link", "a FIFO (named pipe)", ...
    pub fn describe(self) -> &'static str {
        match self {
            FileKind::Regular => "a regular file",
            FileKind::Symlink => "a symbolic link",
            FileKind::Directory => "a directory",
            FileKind::Fifo => "a FIFO (named pipe)",
            FileKind::Socket => "a socket",
            FileKind::Device => "a device",
            FileKind::Other => "not a regular file",
        }
    }
}

/// Why a pack file was not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// There is no such file.
    Missing(String),
    /// The path is not a regular file.
    NotRegular(FileKind),
    /// The file is larger than its cap (`size` is what `fstat` reported,
    /// or the cap plus one when it grew while being read).
    TooLarge {
        /// Bytes observed.
        size: u64,
        /// The cap.
        cap: u64,
    },
    /// Opening or reading failed otherwise (permissions, I/O).
    Unreadable(String),
}

impl Refusal {
    /// `details.reason`: `missing`, `symlink`, `directory`, `fifo`,
    /// `socket`, `device`, `not-regular`, `too-large` or `unreadable`.
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::Missing(_) => "missing",
            Refusal::NotRegular(k) => k.reason(),
            Refusal::TooLarge { .. } => "too-large",
            Refusal::Unreadable(_) => "unreadable",
        }
    }

    /// The load error for pack file `file`, reported at `path` (a JSON
    /// path such as `$.runtime.entry`, or the file name).
    pub fn into_load_error(self, path: &str, file: &str) -> LoadError {
        let (limit, observed) = match &self {
            Refusal::TooLarge { size, cap } => (Some(*cap), Some(*size)),
            _ => (None, None),
        };
        let message = match &self {
            Refusal::Missing(e) => format!("cannot open `{file}` inside the pack directory: {e}"),
            Refusal::NotRegular(k) => format!(
                "`{file}` is {}, not a regular file; every pack file must be a regular file inside the pack directory (symlinks, FIFOs, sockets, devices and directories are refused): replace it with the file itself",
                k.describe()
            ),
            Refusal::TooLarge { size, cap } => format!(
                "`{file}` is {size} bytes; the limit is {cap} bytes, checked before reading"
            ),
            Refusal::Unreadable(e) => format!("cannot read `{file}`: {e}"),
        };
        LoadError::PackFile {
            path: path.to_owned(),
            file: file.to_owned(),
            reason: self.reason(),
            limit,
            observed,
            message,
        }
    }
}

/// What the bounded reader decides from a file's kind and size (pure).
pub fn admit(kind: FileKind, size: u64, cap: u64) -> Result<(), Refusal> {
    if kind != FileKind::Regular {
        return Err(Refusal::NotRegular(kind));
    }
    if size > cap {
        return Err(Refusal::TooLarge { size, cap });
    }
    Ok(())
}

fn io_refusal(e: std::io::Error) -> Refusal {
    match e.kind() {
        std::io::ErrorKind::NotFound => Refusal::Missing(e.to_string()),
        // O_NOFOLLOW on a symlink that appeared after the first look.
        _ if e.raw_os_error() == Some(libc::ELOOP) => Refusal::NotRegular(FileKind::Symlink),
        _ => Refusal::Unreadable(e.to_string()),
    }
}

/// What `rel` inside `root` is, without following a symlink; `None` when
/// there is nothing there.
pub fn kind_in(root: &Dir, rel: &str) -> Result<Option<FileKind>, Refusal> {
    match root.symlink_metadata(rel) {
        Ok(m) => Ok(Some(FileKind::of(m.file_type()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_refusal(e)),
    }
}

/// Reads the pack file `rel` inside `root` under the rule of this module:
/// a regular file (looked at without following it, then checked again on
/// the opened descriptor), opened without blocking, at most `cap` bytes
/// (checked before reading).
pub fn read_in(root: &Dir, rel: &str, cap: u64) -> Result<Vec<u8>, Refusal> {
    let before = root.symlink_metadata(rel).map_err(io_refusal)?;
    admit(FileKind::of(before.file_type()), before.len(), cap)?;
    let mut opts = OpenOptions::new();
    opts.read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    let file = root.open_with(rel, &opts).map_err(io_refusal)?;
    let meta = file.metadata().map_err(io_refusal)?;
    admit(FileKind::of(meta.file_type()), meta.len(), cap)?;
    let mut out = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.into_std()
        .take(cap.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(io_refusal)?;
    if out.len() as u64 > cap {
        return Err(Refusal::TooLarge {
            size: out.len() as u64,
            cap,
        });
    }
    Ok(out)
}

/// Reads the file at `path` (a bare module) under the same rule: its
/// directory is opened as the root and the file's own name is read with
/// [`read_in`], so a symlink, FIFO or device at `path` is refused.
pub fn read_path(path: &Path, cap: u64) -> Result<Vec<u8>, Refusal> {
    let Some(name) = path.file_name() else {
        return Err(Refusal::NotRegular(FileKind::Directory));
    };
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let root = Dir::open_ambient_dir(parent, cap_std::ambient_authority()).map_err(io_refusal)?;
    let Some(name) = name.to_str() else {
        return Err(Refusal::Unreadable(format!(
            "the file name {name:?} is not UTF-8"
        )));
    };
    read_in(&root, name, cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_table() {
        let cases: &[(FileKind, u64, u64, Result<(), &str>)] = &[
            (FileKind::Regular, 0, 10, Ok(())),
            (FileKind::Regular, 10, 10, Ok(())),
            (FileKind::Regular, 11, 10, Err("too-large")),
            (FileKind::Symlink, 0, 10, Err("symlink")),
            (FileKind::Directory, 0, 10, Err("directory")),
            (FileKind::Fifo, 0, 10, Err("fifo")),
            (FileKind::Socket, 0, 10, Err("socket")),
            (FileKind::Device, 0, 10, Err("device")),
            // The kind is judged before the size: a huge device is a device.
            (FileKind::Device, u64::MAX, 10, Err("device")),
            (FileKind::Other, 0, 10, Err("not-regular")),
        ];
        for (kind, size, cap, want) in cases {
            let got = admit(*kind, *size, *cap).map_err(|r| r.reason());
            assert_eq!(got, *want, "{kind:?} {size} {cap}");
        }
    }

    #[test]
    fn refusals_become_load_errors_with_their_reason() {
        let e = Refusal::TooLarge { size: 11, cap: 10 }.into_load_error("$", "pack.json");
        let d = e.details();
        assert_eq!(e.code(), crate::error::ErrorCode::PackValidationFailed);
        assert_eq!(d["reason"], "too-large");
        assert_eq!(
            (d["limit"].as_u64(), d["observed"].as_u64()),
            (Some(10), Some(11))
        );
        assert_eq!(d["file"], "pack.json");
        let e = Refusal::NotRegular(FileKind::Fifo).into_load_error("$", "pack.json");
        assert_eq!(e.details()["reason"], "fifo");
        assert!(e.to_string().contains("FIFO"), "{e}");
    }
}
