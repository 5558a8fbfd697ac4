//! The pack bundle `wop` writes to the engine's stdin at build time.

use serde_json::Value;
use std::collections::BTreeMap;

/// What the engine is built with: the pack's identity (for `describe`) and
/// its module sources.
pub(crate) struct Bundle {
    pub(crate) name: String,
    pub(crate) version: String,
    /// `(typeId, version)` of every node the manifest declares.
    pub(crate) nodes: Vec<(String, String)>,
    /// The entry module's path inside the pack (`index.mjs`).
    pub(crate) entry: String,
    /// Module path inside the pack → source.
    pub(crate) files: BTreeMap<String, String>,
}

fn text(v: &Value, key: &str) -> Result<String, String> {
    v.get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| format!("bundle: `{key}` must be a string"))
}

impl Bundle {
    /// Parses the bundle JSON (`{name, version, nodes: [{typeId, version}],
    /// entry, files: {path: source}}`).
    pub(crate) fn parse(bytes: &[u8]) -> Result<Self, String> {
        let v: Value = serde_json::from_slice(bytes).map_err(|e| format!("bundle: {e}"))?;
        let mut nodes = Vec::new();
        for n in v
            .get("nodes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            nodes.push((text(n, "typeId")?, text(n, "version")?));
        }
        let mut files = BTreeMap::new();
        if let Some(map) = v.get("files").and_then(Value::as_object) {
            for (k, src) in map {
                let src = src
                    .as_str()
                    .ok_or_else(|| format!("bundle: files.{k} must be a string"))?;
                files.insert(k.clone(), src.to_owned());
            }
        }
        Ok(Self {
            name: text(&v, "name")?,
            version: text(&v, "version")?,
            nodes,
            entry: text(&v, "entry")?,
            files,
        })
    }
}
