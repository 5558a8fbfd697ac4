//! What a build reads from a pack: its identity (for `describe`) and its
//! module sources, bounded; and the bundle the engine reads on stdin.

use crate::error::JsBuildError;
use serde_json::json;
use std::collections::BTreeMap;

/// At most this many module files in a pack.
pub const MAX_FILES: usize = 256;
/// At most this many bytes of module source in a pack.
pub const MAX_SOURCE_BYTES: usize = 4 << 20;

/// The manifest's identity: `describe()` returns it.
#[derive(Debug, Clone)]
pub struct Identity {
    /// Pack name.
    pub name: String,
    /// Pack version.
    pub version: String,
    /// `(typeId, version)` of each declared node.
    pub nodes: Vec<(String, String)>,
}

/// A pack's ES modules: path inside the pack (`/`-separated, no `./`) →
/// source.
#[derive(Debug, Clone, Default)]
pub struct Source {
    /// The entry module (`runtime.entry` without its `./`).
    pub entry: String,
    /// Every module file.
    pub files: BTreeMap<String, String>,
}

impl Source {
    /// An empty source with entry `entry` (leading `./` removed).
    pub fn new(entry: &str) -> Self {
        Self {
            entry: entry.trim_start_matches("./").to_owned(),
            files: BTreeMap::new(),
        }
    }

    /// Adds a module file, enforcing the caps and UTF-8.
    pub fn add(&mut self, path: &str, bytes: Vec<u8>) -> Result<(), JsBuildError> {
        if self.files.len() >= MAX_FILES {
            return Err(JsBuildError::Bundle(format!(
                "the pack has more than {MAX_FILES} module files"
            )));
        }
        let total: usize = self.files.values().map(String::len).sum::<usize>() + bytes.len();
        if total > MAX_SOURCE_BYTES {
            return Err(JsBuildError::Bundle(format!(
                "the pack's module sources exceed {} MiB",
                MAX_SOURCE_BYTES >> 20
            )));
        }
        let text = String::from_utf8(bytes).map_err(|e| {
            JsBuildError::Bundle(format!(
                "{path} is not UTF-8 (byte {})",
                e.utf8_error().valid_up_to()
            ))
        })?;
        self.files
            .insert(path.trim_start_matches("./").to_owned(), text);
        Ok(())
    }
}

/// The bundle JSON (deterministic: maps are sorted).
pub(crate) fn bundle(identity: &Identity, source: &Source) -> Vec<u8> {
    let nodes: Vec<_> = identity
        .nodes
        .iter()
        .map(|(t, v)| json!({"typeId": t, "version": v}))
        .collect();
    json!({
        "name": identity.name,
        "version": identity.version,
        "nodes": nodes,
        "entry": source.entry,
        "files": source.files,
    })
    .to_string()
    .into_bytes()
}

/// The host interfaces a pack's code can reach, read from its source text:
/// `log`, `clock` and `random` always (console, Date, crypto); `http` if it
/// names `fetch` in any case (`fetch(`, `globalThis.fetch`, a `safeFetch`
/// wrapper, `ctx.http`); `mcp` if it names `.mcp`; `tools` if it uses a
/// host service. Over-reaching is harmless (shown before any grant; the
/// grants decide); missing one would refuse a granted pack at its call.
/// `ctx.secrets` needs none: its handles are spent by safe-fetch.
pub fn derived_capabilities(source: &Source) -> Vec<&'static str> {
    let any = |needles: &[&str]| {
        source
            .files
            .values()
            .any(|s| needles.iter().any(|n| s.contains(n)))
    };
    let mut caps = vec!["log", "clock", "random"];
    if any(&["fetch", "Fetch", ".http"]) {
        caps.push("http");
    }
    if any(&[".mcp"]) {
        caps.push("mcp");
    }
    if any(&[
        ".callAI",
        ".db.",
        ".storage.",
        ".fs.",
        ".kanban.",
        ".chat.",
        ".a2a.",
        ".aiEnvelope",
    ]) {
        caps.push("tools");
    }
    caps
}
