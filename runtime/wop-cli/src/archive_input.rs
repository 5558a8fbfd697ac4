//! Packs given as a `.tgz` (the protocol's archive): unpacked, under the
//! caps and path rules of `wop_core::archive`, into a fresh private
//! temporary directory that the command then reads like any pack
//! directory. Only regular files are written, each under a checked
//! relative path, so nothing in the archive can point outside it.

use crate::common::{Failure, exit};
use std::path::{Path, PathBuf};
use wop_runtime::LoadError;

/// Largest archive file read.
const MAX_ARCHIVE_BYTES: u64 = 300 << 20;

/// A pack directory: the path given, or an archive unpacked (kept until
/// this is dropped).
pub(crate) struct PackInput {
    dir: PathBuf,
    integrity: Option<String>,
    _tmp: Option<tempfile::TempDir>,
}

impl PackInput {
    /// The directory to read.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The protocol's integrity string of the archive, when the input was
    /// one.
    pub(crate) fn integrity(&self) -> Option<&str> {
        self.integrity.as_deref()
    }
}

/// Whether `path` names an archive rather than a directory.
pub(crate) fn is_archive(path: &Path) -> bool {
    path.is_file()
        && path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with(".tgz") || n.ends_with(".tar.gz"))
}

/// The refusal of an archive, as a load error with its own code
/// (`pack_too_large`, `pack_archive_invalid`, `pack_archive_corrupt`) and
/// `details.reason`.
pub(crate) fn refusal(path: &Path, e: &wop_core::archive::ArchiveError) -> LoadError {
    e.clone().into_load_error(&path.display().to_string())
}

/// Reads an archive file (bounded) and unpacks it.
pub(crate) fn read_archive_file(path: &Path) -> Result<Vec<u8>, LoadError> {
    wop_core::packfile::read_path(path, MAX_ARCHIVE_BYTES)
        .map_err(|r| r.into_load_error("$", &path.display().to_string()))
}

/// Writes `files` (checked relative paths) under `dir`.
pub(crate) fn unpack_into(
    dir: &Path,
    files: &std::collections::BTreeMap<String, Vec<u8>>,
) -> std::io::Result<()> {
    for (rel, data) in files {
        let target = dir.join(rel);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let mut o = std::fs::OpenOptions::new();
        o.write(true).create_new(true);
        std::io::Write::write_all(&mut o.open(&target)?, data)?;
    }
    Ok(())
}

/// `path` as a pack directory: itself, or the archive it names unpacked.
pub(crate) fn open(path: &Path, json: bool) -> Result<PackInput, Failure> {
    if !is_archive(path) {
        return Ok(PackInput {
            dir: path.to_path_buf(),
            integrity: None,
            _tmp: None,
        });
    }
    let bytes = read_archive_file(path).map_err(|e| crate::common::rejected(path, &e, json))?;
    let files = wop_core::archive::read_tgz(&bytes)
        .map_err(|e| crate::common::rejected(path, &refusal(path, &e), json))?;
    let tmp = tempfile::Builder::new().prefix("wop-pack-").tempdir()?;
    unpack_into(tmp.path(), &files).map_err(|e| Failure {
        code: exit::INTERNAL,
        error: anyhow::anyhow!("cannot unpack {}: {e}", path.display()),
    })?;
    Ok(PackInput {
        dir: tmp.path().to_path_buf(),
        integrity: Some(wop_core::archive::integrity(&bytes)),
        _tmp: Some(tmp),
    })
}
