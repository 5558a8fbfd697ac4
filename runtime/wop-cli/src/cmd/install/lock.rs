//! `pack-lock.json`, the protocol's lockfile (`lockfileVersion: 1`): each
//! installed pack's name, exact version, the integrity of its archive and
//! where it came from. Sorted by name, 2-space indent, one trailing
//! newline, so the same installs write the same bytes.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// One locked pack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Locked {
    pub name: String,
    pub version: String,
    /// `sha256-<base64>` of the archive.
    pub integrity: String,
    /// The archive's URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved: Option<String>,
    /// For a JavaScript pack: the component `wop` built from it at install.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<LockedComponent>,
}

/// The component built from a JavaScript pack (a `wop` extension of the
/// protocol's lockfile; other hosts ignore it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LockedComponent {
    /// Lowercase hex sha256 of the component's bytes.
    pub sha256: String,
    /// sha256 over the engine and the pack's module sources: the same id
    /// always builds the same bytes.
    pub build_id: String,
    /// The JavaScript engine, `wop-js/<sha256 of its bytes>`.
    pub engine: String,
}

/// The lockfile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Lock {
    pub lockfile_version: u32,
    pub generated_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<String>,
    pub packs: Vec<Locked>,
}

impl Lock {
    /// The lockfile at `path`, or an empty one.
    pub(crate) fn read(path: &Path) -> Result<Lock, String> {
        match std::fs::read(path) {
            Ok(b) => {
                let l: Lock = serde_json::from_slice(&b)
                    .map_err(|e| format!("{}: not a pack-lock.json: {e}", path.display()))?;
                if l.lockfile_version != 1 {
                    return Err(format!(
                        "{}: lockfileVersion {} is not supported (1 is)",
                        path.display(),
                        l.lockfile_version
                    ));
                }
                Ok(l)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Lock {
                lockfile_version: 1,
                generated_at: String::new(),
                registry: None,
                packs: Vec::new(),
            }),
            Err(e) => Err(format!("cannot read {}: {e}", path.display())),
        }
    }

    /// The locked entry for `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&Locked> {
        self.packs.iter().find(|p| p.name == name)
    }

    /// Records `entry` (replacing the pack's previous one).
    pub(crate) fn put(&mut self, entry: Locked) {
        self.packs.retain(|p| p.name != entry.name);
        self.packs.push(entry);
        self.packs
            .sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.version.cmp(&b.version)));
    }

    /// Writes it (atomically: a temporary file renamed over it).
    pub(crate) fn write(&mut self, path: &Path, now: &str) -> Result<(), String> {
        now.clone_into(&mut self.generated_at);
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())? + "\n";
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, path).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}
