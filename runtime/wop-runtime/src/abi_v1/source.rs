//! Reading an ABI v1 pack from disk (a directory with `pack.json`, or a
//! bare `.wasm` with no manifest) and resolving its grants and limits.

use std::collections::BTreeSet;
use std::path::Path;
use wop_core::capability::{Capability, effective};
use wop_core::error::LoadError;
use wop_core::limits::Limits;
use wop_core::manifest::{Language, Manifest, NodeDecl, RuntimeDecl, WopBlock};
use wop_core::policy::Policy;

/// What was read from disk.
pub(super) struct Source {
    pub manifest: Option<Manifest>,
    pub bytes: Vec<u8>,
    pub sha256: String,
}

/// Whether `path` is a directory (a pack directory) rather than a file
/// (a bare module). Symlinks to directories count as directories; what a
/// non-directory is, the bounded reader decides when it reads it.
pub(super) fn is_dir(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_dir())
}

pub(super) fn read_source(path: &Path, policy: &Policy) -> Result<Source, LoadError> {
    if !is_dir(path) {
        // A bare module has no pack.json to sign (decision 0009). Its
        // identity is the name it declares (`openwop_pack_name`), known
        // only after identification, where `pack::check_bare` judges it
        // (decision 0016). Refused here already, before a byte is read,
        // when no name could escape the requirement, or its file name
        // names a pack that requires one.
        let file = path.display().to_string();
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if wop_core::pack::signature_required_for_all(policy)
            || wop_core::pack::signature_required(policy, &stem)
        {
            return Err(LoadError::Signature {
                reason: "missing",
                key_id: None,
                message: format!(
                    "{file} is a bare core module (no pack.json, so no signature), and the policy requires a signature"
                ),
            });
        }
        use sha2::Digest;
        let bytes = wop_core::packfile::read_path(path, wop_core::packfile::MAX_ENTRY_BYTES)
            .map_err(|r| r.into_load_error(&file, &file))?;
        let sha256 = hex::encode(sha2::Sha256::digest(&bytes));
        return Ok(Source {
            manifest: None,
            bytes,
            sha256,
        });
    }
    let (manifest, bytes, sha256) = wop_core::pack::read_pack_trusted(path, policy)?;
    if manifest.runtime.language != Language::Wasm {
        return Err(LoadError::Unsupported(
            "not a `wasm` (ABI v1) pack".to_owned(),
        ));
    }
    Ok(Source {
        manifest: Some(manifest),
        bytes,
        sha256,
    })
}

/// Grants, limits and the (possibly still empty) manifest for a source.
pub(super) struct Resolved {
    pub manifest: Manifest,
    pub requested: Vec<Capability>,
    pub granted: Vec<Capability>,
    pub effective: BTreeSet<Capability>,
    pub limits: Limits,
    pub clamps: Vec<wop_core::limits::Clamp>,
    /// Shown by `wop inspect`; ABI v1 has no fetch import, so it is unused.
    pub egress: wop_core::pack::EgressView,
}

pub(super) fn resolve(policy: &Policy, src: &Source, path: &Path) -> Resolved {
    let bare = src.manifest.is_none();
    let manifest = match &src.manifest {
        Some(m) => m.clone(),
        // Replaced by the module's own name and node ids once it is
        // identified; until then the file stem stands in.
        None => bare_manifest(
            &path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
            &[],
            path,
            &src.sha256,
        ),
    };
    let r = wop_core::pack::resolve(policy, &manifest);
    if bare {
        // No manifest, no request: the base capabilities and the ceilings.
        return Resolved {
            manifest,
            requested: Vec::new(),
            granted: Vec::new(),
            effective: effective(&[], &[]),
            limits: policy.limits(),
            clamps: Vec::new(),
            egress: r.egress,
        };
    }
    Resolved {
        requested: manifest.wop.capabilities.clone(),
        manifest,
        granted: r.granted,
        effective: r.effective,
        limits: r.limits,
        clamps: r.clamps,
        egress: r.egress,
    }
}

pub(super) fn bare_manifest(name: &str, ids: &[String], path: &Path, sha256: &str) -> Manifest {
    Manifest {
        name: name.to_owned(),
        version: "0.0.0".to_owned(),
        openwop: ">=1.0.0".to_owned(),
        nodes: ids
            .iter()
            .map(|t| NodeDecl {
                type_id: t.clone(),
                version: "0.0.0".to_owned(),
                category: "unspecified".to_owned(),
                role: "worker".to_owned(),
                requires_secrets: Vec::new(),
                config_schema_ref: None,
                input_schema_ref: None,
            })
            .collect(),
        runtime: RuntimeDecl {
            language: Language::Wasm,
            entry: path
                .file_name()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
            requires: Vec::new(),
        },
        wop: WopBlock {
            sha256: sha256.to_owned(),
            ..Default::default()
        },
    }
}
