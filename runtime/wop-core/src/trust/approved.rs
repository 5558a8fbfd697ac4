//! Approved manifests (decision 0009): the version of a pack the operator
//! approved, named by `[packs.<name>] approved`, against which a new
//! version's requests are compared.

use crate::manifest::Manifest;

/// Reads an approved manifest: `path` is a `pack.json` or a directory
/// holding one.
///
/// Read like every pack file ([`crate::files::packfile`]): a regular file, not
/// followed if a symlink, opened without blocking, at most
/// [`crate::files::packfile::MAX_MANIFEST_BYTES`] bytes (checked before reading).
pub fn read_approved(path: &std::path::Path) -> Result<Manifest, String> {
    let file = if path.is_dir() {
        path.join("pack.json")
    } else {
        path.to_path_buf()
    };
    let bytes =
        crate::files::packfile::read_path(&file, crate::files::packfile::MAX_MANIFEST_BYTES)
            .map_err(|r| {
                format!(
                    "cannot read {}: {}",
                    file.display(),
                    r.into_load_error("$", &file.display().to_string())
                )
            })?;
    Manifest::parse(&bytes).map_err(|e| format!("{}: {e}", file.display()))
}
