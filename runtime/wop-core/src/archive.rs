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

use std::cell::Cell;
use std::collections::BTreeMap;
use std::io::Read;
use std::rc::Rc;

/// Most entries an archive may hold.
pub const MAX_ENTRIES: usize = 64;
/// Largest decompressed archive (all entries and tar headers).
pub const MAX_TOTAL_BYTES: u64 = crate::packfile::MAX_ENTRY_BYTES + (8 << 20);

/// Why an archive was refused (`details.reason`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ArchiveError {
    /// `not-gzip`, `not-tar`, `too-large`, `too-many-entries`,
    /// `entry-too-large`, `absolute-path`, `parent-path`, `bad-path`,
    /// `link`, `special-file`, `duplicate`.
    pub reason: &'static str,
    /// For people.
    pub message: String,
}

fn refuse(reason: &'static str, message: impl Into<String>) -> ArchiveError {
    ArchiveError {
        reason,
        message: message.into(),
    }
}

/// Counts decompressed bytes and fails past the cap (a gzip bomb stops
/// here, whatever the tar layer asks for).
struct Capped<R> {
    inner: R,
    left: u64,
    tripped: Rc<Cell<bool>>,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let want = buf
            .len()
            .min(usize::try_from(self.left + 1).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
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
    for seg in t.split('/') {
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
        crate::packfile::MAX_ENTRY_BYTES,
        MAX_TOTAL_BYTES,
    )
}

/// [`read_tgz`] with explicit caps.
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
    let capped = Capped {
        inner: flate2::read::GzDecoder::new(bytes),
        left: max_total,
        tripped: tripped.clone(),
    };
    let too_large = || {
        refuse(
            "too-large",
            format!("the archive decompresses to more than {max_total} bytes"),
        )
    };
    let broken = |e: std::io::Error| {
        if tripped.get() {
            too_large()
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
            return Err(refuse(
                "too-many-entries",
                format!("the archive has more than {max_entries} entries"),
            ));
        }
        let raw_path = entry.path_bytes();
        let path = String::from_utf8_lossy(&raw_path).into_owned();
        let kind = entry.header().entry_type();
        if kind.is_dir() {
            check_entry_path(&path)?;
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
            return Err(refuse(
                "entry-too-large",
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
        return Err(too_large());
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
