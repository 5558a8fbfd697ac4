//! Pack archives as the protocol's registry publishes them (DESIGN.md §8):
//! a deterministic USTAR `.tgz` — sorted entries, mtime 0, mode 644, owner
//! 0, regular files only — with `pack.json` at the root, the artifact at
//! `runtime.entry` and `keys/pack.json.sig`.
//!
//! Reading is for hostile bytes: only regular files (and directories,
//! which are skipped) under plain relative paths; no absolute path, `..`,
//! link, device or sparse entry; a cap on the number of entries, on each
//! entry's declared size (checked before anything is read) and on the
//! decompressed total, so a gzip bomb or a million-entry archive stops
//! early with bounded memory. Everything is in memory; nothing touches a
//! file system here.

use crate::error::ErrorCode;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::io::Read;
use std::rc::Rc;

/// Most entries an archive may hold. Real registry packs hold up to 119
/// (`core.openwop.data` 1.2.x); the bound on memory is the byte caps
/// below, not this count.
pub const MAX_ENTRIES: usize = 1024;
/// Largest decompressed archive (all entries and tar headers).
pub const MAX_TOTAL_BYTES: u64 = crate::files::packfile::MAX_ENTRY_BYTES + (8 << 20);
/// Longest path segment of an entry (Linux `NAME_MAX`): a longer one
/// could not be unpacked, so it is refused before anything is written.
pub const MAX_SEGMENT_BYTES: usize = 255;
/// Longest entry path.
pub const MAX_PATH_BYTES: usize = 1024;

/// Why an archive was refused: a code, `details.reason` and, for a cap,
/// the cap and what was seen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ArchiveError {
    /// `pack_too_large` (`too-large`, `too-many-entries`,
    /// `entry-too-large`), `pack_archive_invalid` (`absolute-path`,
    /// `parent-path`, `bad-path`, `path-too-long`, `link`,
    /// `special-file`, `duplicate`) or `pack_archive_corrupt` (`not-gzip`,
    /// `not-tar`, `gzip-truncated`, `gzip-trailer`, `trailing-bytes`).
    pub code: ErrorCode,
    /// `details.reason`.
    pub reason: &'static str,
    /// The cap that was passed, if one was.
    pub limit: Option<u64>,
    /// What was seen against that cap.
    pub observed: Option<u64>,
    /// For people.
    pub message: String,
}

impl ArchiveError {
    /// As a load error about the archive `file`.
    pub fn into_load_error(self, file: &str) -> crate::error::LoadError {
        crate::error::LoadError::Archive {
            code: self.code,
            file: file.to_owned(),
            reason: self.reason,
            limit: self.limit,
            observed: self.observed,
            message: format!("{file}: {}", self.message),
        }
    }
}

fn code_of(reason: &str) -> ErrorCode {
    match reason {
        "too-large" | "too-many-entries" | "entry-too-large" => ErrorCode::PackTooLarge,
        "not-gzip" | "not-tar" | "gzip-truncated" | "gzip-trailer" | "trailing-bytes" => {
            ErrorCode::PackArchiveCorrupt
        }
        _ => ErrorCode::PackArchiveInvalid,
    }
}

fn refuse(reason: &'static str, message: impl Into<String>) -> ArchiveError {
    ArchiveError {
        code: code_of(reason),
        reason,
        limit: None,
        observed: None,
        message: message.into(),
    }
}

fn over(reason: &'static str, limit: u64, observed: u64, message: String) -> ArchiveError {
    ArchiveError {
        limit: Some(limit),
        observed: Some(observed),
        ..refuse(reason, message)
    }
}

/// Counts decompressed bytes and fails past the cap (a gzip bomb stops
/// here, whatever the tar layer asks for).
struct Capped<R> {
    inner: R,
    left: u64,
    tripped: Rc<Cell<bool>>,
    /// Set when the gzip layer itself failed (damaged data, a trailer
    /// that does not check, a stream cut short), as opposed to the tar
    /// layer above it.
    gzip_failed: Rc<Cell<bool>>,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let want = buf
            .len()
            .min(usize::try_from(self.left + 1).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want]).inspect_err(|_| {
            self.gzip_failed.set(true);
        })?;
        if n as u64 > self.left {
            self.tripped.set(true);
            return Err(std::io::Error::other("archive too large"));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// Checks an entry path: relative, `/`-separated, no empty, `.` or `..`
/// segment, no backslash or NUL. Returns it normalized (no trailing `/`).
pub fn check_entry_path(p: &str) -> Result<String, ArchiveError> {
    let t = p.strip_prefix("./").unwrap_or(p);
    let t = t.strip_suffix('/').unwrap_or(t);
    if t.starts_with('/') {
        return Err(refuse(
            "absolute-path",
            format!("entry `{}` has an absolute path", shown(p)),
        ));
    }
    if t.is_empty() || t.contains(['\\', '\0']) || t.contains("//") {
        return Err(refuse(
            "bad-path",
            format!("entry `{}` has an invalid path", shown(p)),
        ));
    }
    if t.len() > MAX_PATH_BYTES {
        return Err(over(
            "path-too-long",
            MAX_PATH_BYTES as u64,
            t.len() as u64,
            format!(
                "entry `{}…` has a path of {} bytes; the limit is {MAX_PATH_BYTES}",
                shown(p),
                t.len()
            ),
        ));
    }
    for seg in t.split('/') {
        if seg.len() > MAX_SEGMENT_BYTES {
            return Err(over(
                "path-too-long",
                MAX_SEGMENT_BYTES as u64,
                seg.len() as u64,
                format!(
                    "entry `{}…` has a path segment of {} bytes; the limit is {MAX_SEGMENT_BYTES} (a file name longer than that cannot be unpacked)",
                    shown(p),
                    seg.len()
                ),
            ));
        }
        if seg == ".." {
            return Err(refuse(
                "parent-path",
                format!("entry `{}` would leave the pack directory", shown(p)),
            ));
        }
        if seg == "." || seg.is_empty() {
            return Err(refuse(
                "bad-path",
                format!("entry `{}` has an invalid path", shown(p)),
            ));
        }
    }
    Ok(t.to_owned())
}

fn shown(p: &str) -> &str {
    &p[..p.floor_char_boundary(120)]
}

/// The regular files of a `.tgz`, by normalized path.
pub fn read_tgz(bytes: &[u8]) -> Result<BTreeMap<String, Vec<u8>>, ArchiveError> {
    read_tgz_capped(
        bytes,
        MAX_ENTRIES,
        crate::files::packfile::MAX_ENTRY_BYTES,
        MAX_TOTAL_BYTES,
    )
}

/// [`read_tgz`] with explicit caps.
///
/// The gzip stream is read to its end, past the tar end-of-archive
/// blocks, so that its trailer is checked (CRC-32 and length): a stream
/// cut short, a trailer that does not match, or any byte after the first
/// gzip member is `pack_archive_corrupt`.
pub fn read_tgz_capped(
    bytes: &[u8],
    max_entries: usize,
    max_entry: u64,
    max_total: u64,
) -> Result<BTreeMap<String, Vec<u8>>, ArchiveError> {
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return Err(refuse(
            "not-gzip",
            "the archive is not gzip-compressed (.tgz)",
        ));
    }
    let tripped = Rc::new(Cell::new(false));
    let gzip_failed = Rc::new(Cell::new(false));
    let capped = Capped {
        inner: flate2::bufread::GzDecoder::new(bytes),
        left: max_total,
        tripped: tripped.clone(),
        gzip_failed: gzip_failed.clone(),
    };
    let too_large = |seen: u64| {
        over(
            "too-large",
            max_total,
            seen,
            format!("the archive decompresses to more than {max_total} bytes"),
        )
    };
    let gzip_error = |e: &std::io::Error| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            refuse(
                "gzip-truncated",
                format!("the gzip stream ends before its end (cut short): {e}"),
            )
        } else {
            refuse(
                "gzip-trailer",
                format!(
                    "the gzip stream is damaged (its data or CRC-32/length trailer does not check): {e}"
                ),
            )
        }
    };
    let broken = |e: std::io::Error| {
        if tripped.get() {
            too_large(max_total.saturating_add(1))
        } else if gzip_failed.get() {
            gzip_error(&e)
        } else {
            refuse("not-tar", format!("the archive is not a valid tar.gz: {e}"))
        }
    };
    let mut archive = tar::Archive::new(capped);
    let mut out: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut count = 0usize;
    for entry in archive.entries().map_err(broken)? {
        let mut entry = entry.map_err(broken)?;
        count += 1;
        if count > max_entries {
            return Err(over(
                "too-many-entries",
                max_entries as u64,
                count as u64,
                format!("the archive has more than {max_entries} entries"),
            ));
        }
        let raw_path = entry.path_bytes();
        let path = String::from_utf8_lossy(&raw_path).into_owned();
        let kind = entry.header().entry_type();
        if kind.is_dir() {
            // The root itself (`.`, `./`), as `tar -C dir .` writes it.
            if !matches!(path.as_str(), "." | "./") {
                check_entry_path(&path)?;
            }
            continue;
        }
        if kind.is_symlink() || kind.is_hard_link() {
            return Err(refuse(
                "link",
                format!(
                    "entry `{}` is a link; a pack archive holds regular files only",
                    shown(&path)
                ),
            ));
        }
        if !kind.is_file() {
            return Err(refuse(
                "special-file",
                format!(
                    "entry `{}` is not a regular file (device, fifo, sparse or other); a pack archive holds regular files only",
                    shown(&path)
                ),
            ));
        }
        let path = check_entry_path(&path)?;
        let size = entry.header().size().map_err(broken)?;
        if size > max_entry {
            return Err(over(
                "entry-too-large",
                max_entry,
                size,
                format!("entry `{path}` declares {size} bytes; the cap is {max_entry}"),
            ));
        }
        let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0).min(1 << 20));
        (&mut entry)
            .take(size)
            .read_to_end(&mut data)
            .map_err(broken)?;
        if out.contains_key(&path) {
            return Err(refuse("duplicate", format!("entry `{path}` appears twice")));
        }
        out.insert(path, data);
    }
    if tripped.get() {
        return Err(too_large(max_total.saturating_add(1)));
    }
    // The rest of the tar stream (the second end block, record padding)
    // and the gzip trailer, still under the decompressed cap.
    let mut capped = archive.into_inner();
    std::io::copy(&mut capped, &mut std::io::sink()).map_err(|e| {
        if tripped.get() {
            too_large(max_total.saturating_add(1))
        } else {
            gzip_error(&e)
        }
    })?;
    let rest = capped.inner.into_inner();
    if !rest.is_empty() {
        return Err(over(
            "trailing-bytes",
            0,
            rest.len() as u64,
            format!(
                "{} bytes follow the end of the gzip stream; a pack archive is exactly one gzip member",
                rest.len()
            ),
        ));
    }
    Ok(out)
}

/// A deterministic `.tgz` of `files` (path → bytes): USTAR, sorted by
/// path, mtime 0, mode 0644, uid/gid 0, no owner names, gzip with no
/// timestamp or file name.
pub fn write_tgz(files: &BTreeMap<String, Vec<u8>>) -> Result<Vec<u8>, ArchiveError> {
    let gz = flate2::GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), flate2::Compression::best());
    let mut b = tar::Builder::new(gz);
    b.mode(tar::HeaderMode::Deterministic);
    for (path, data) in files {
        let path = check_entry_path(path)?;
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_mode(0o644);
        h.set_mtime(0);
        h.set_uid(0);
        h.set_gid(0);
        h.set_size(data.len() as u64);
        b.append_data(&mut h, &path, data.as_slice())
            .map_err(|e| refuse("bad-path", format!("cannot add `{path}`: {e}")))?;
    }
    let gz = b
        .into_inner()
        .map_err(|e| refuse("not-tar", format!("cannot finish the archive: {e}")))?;
    gz.finish()
        .map_err(|e| refuse("not-gzip", format!("cannot compress the archive: {e}")))
}

/// The protocol's integrity string of archive bytes:
/// `sha256-` + base64 of the raw SHA-256.
pub fn integrity(bytes: &[u8]) -> String {
    use base64::Engine as _;
    use sha2::Digest as _;
    format!(
        "sha256-{}",
        base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(bytes))
    )
}

#[cfg(test)]
mod tests;
