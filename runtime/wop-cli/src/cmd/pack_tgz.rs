//! `wop pack --tgz`: the protocol's archive of a pack directory —
//! `pack.json`, the entry, every ES module of a JavaScript pack, each
//! node's `configSchemaRef` / `inputSchemaRef` / `outputSchemaRef` file,
//! `keys/pack.json.sig` when signed, and a `README.md` / `LICENSE` if
//! present — deterministic (sorted, mtime 0, mode 644), named
//! `<name>-<version>.tgz`, with its integrity string.

use crate::common::{Failure, exit, usage};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use wop_core::packfile::{MAX_ENTRY_BYTES, MAX_MANIFEST_BYTES, MAX_SIG_BYTES, read_path};

/// Writes the archive of the pack directory `dir` into `out`; returns its
/// path and integrity.
pub(crate) fn write(dir: &Path, out: &Path) -> Result<(PathBuf, String), Failure> {
    let read = |rel: &str, cap: u64| {
        read_path(&dir.join(rel), cap).map_err(|r| Failure {
            code: exit::PACK_REJECTED,
            error: anyhow::anyhow!("{}", r.into_load_error(rel, rel)),
        })
    };
    let manifest_bytes = read("pack.json", MAX_MANIFEST_BYTES)?;
    let manifest = wop_core::manifest::Manifest::parse(&manifest_bytes).map_err(|e| Failure {
        code: exit::PACK_REJECTED,
        error: anyhow::anyhow!("{}: {e}", dir.join("pack.json").display()),
    })?;
    let mut files = BTreeMap::new();
    let entry = manifest.runtime.entry.trim_start_matches("./").to_owned();
    files.insert(entry.clone(), read(&entry, MAX_ENTRY_BYTES)?);
    files.insert("pack.json".to_owned(), manifest_bytes);
    if manifest.runtime.language == wop_core::manifest::Language::Javascript {
        let modules = wop_core::pack::read_module_sources(dir).map_err(|e| Failure {
            code: exit::PACK_REJECTED,
            error: anyhow::anyhow!("{}: {e}", dir.display()),
        })?;
        files.extend(modules);
    }
    // Schema files, as the manifest names them (outputSchemaRef too: the
    // host does not check outputs, but the pack ships them).
    let raw: serde_json::Value = serde_json::from_slice(&files["pack.json"])?;
    for (i, node) in raw["nodes"].as_array().into_iter().flatten().enumerate() {
        for key in ["configSchemaRef", "inputSchemaRef", "outputSchemaRef"] {
            let Some(rel) = node.get(key).and_then(serde_json::Value::as_str) else {
                continue;
            };
            let rel = rel.trim_start_matches("./");
            wop_core::manifest::check_relative_path(rel, &format!("$.nodes[{i}].{key}")).map_err(
                |e| Failure {
                    code: exit::PACK_REJECTED,
                    error: anyhow::anyhow!("{e}"),
                },
            )?;
            files.insert(rel.to_owned(), read(rel, wop_core::pack::MAX_SCHEMA_BYTES)?);
        }
    }
    let sig = wop_core::trust::protocol::SIG_PATH;
    if dir.join(sig).is_file() {
        files.insert(sig.to_owned(), read(sig, MAX_SIG_BYTES)?);
    }
    for extra in ["README.md", "LICENSE"] {
        if dir.join(extra).is_file() {
            files.insert(extra.to_owned(), read(extra, MAX_MANIFEST_BYTES)?);
        }
    }
    let bytes = wop_core::archive::write_tgz(&files).map_err(usage)?;
    std::fs::create_dir_all(out)?;
    let path = out.join(format!("{}-{}.tgz", manifest.name, manifest.version));
    std::fs::write(&path, &bytes)?;
    Ok((path, wop_core::archive::integrity(&bytes)))
}
