//! `pack.json`: the OpenWOP node-pack manifest plus our `x-wop` block.
//! Parsing and validation are pure; every error names the JSON path of the
//! offending field.

pub mod abi;
pub mod requires;
pub mod runnable;

use crate::capability::Capability;
use crate::error::LoadError;
use crate::limits::LimitRequest;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;

/// The vendor hatch key that holds `wop`'s own manifest block.
pub const VENDOR_KEY: &str = "x-wop";

/// A validated manifest.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// Pack name (unique per runtime).
    pub name: String,
    /// Pack version.
    pub version: String,
    /// `engines.openwop` range.
    pub openwop: String,
    /// The node types the pack implements.
    pub nodes: Vec<NodeDecl>,
    /// `runtime`.
    pub runtime: RuntimeDecl,
    /// Our block (`x-wop`).
    pub wop: WopBlock,
}

/// One entry of `nodes[]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeDecl {
    /// The node type id, unique within the pack.
    pub type_id: String,
    /// The node type's version.
    pub version: String,
    /// Protocol category (free text here).
    pub category: String,
    /// Protocol role (free text here).
    pub role: String,
    /// Secrets the node needs (`requiresSecrets`, `requiredCredentials`):
    /// the host attaches them on the way out; a node whose secrets the
    /// operator does not provide fails before it runs
    /// (`credential_unavailable`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires_secrets: Vec<crate::secrets::SecretRequirement>,
    /// `configSchemaRef`: a JSON Schema file in the pack for the node's
    /// config, checked at admission ([`crate::pack::schema`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_schema_ref: Option<String>,
    /// `inputSchemaRef`: the same for its inputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema_ref: Option<String>,
}

/// The runtime language of a pack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Language {
    /// A WebAssembly component against `openwop:node-pack`.
    WasmComponent,
    /// A core module following the WASM ABI v1.
    Wasm,
    /// The protocol's JavaScript packs (`format: esm`): ES modules that
    /// `wop` builds into a component (the QuickJS engine of `wop-js`).
    Javascript,
}

/// `runtime`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeDecl {
    /// `runtime.language`.
    pub language: Language,
    /// `runtime.entry`: a relative path inside the pack directory.
    pub entry: String,
    /// `runtime.requires[]`: the platform primitives the pack declares it
    /// needs (the protocol's closed vocabulary; [`crate::manifest::requires`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<String>,
}

/// `x-wop`: integrity, requested capabilities and limits.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WopBlock {
    /// Lowercase hex sha256 of the entry file.
    pub sha256: String,
    /// Capabilities the pack requests beyond the base set.
    #[serde(default)]
    pub capabilities: Vec<Capability>,
    /// Tool ids the pack intends to call.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Limit requests (clamped to the operator's ceilings).
    #[serde(default)]
    pub limits: LimitRequest,
    /// Destinations the pack asks to reach with safe-fetch, as
    /// `[scheme://]host[:port]` patterns (see [`crate::egress::allow`]).
    /// Only those the operator also grants are reachable.
    #[serde(default)]
    pub egress: Vec<String>,
    /// MCP servers (and optionally tools) the pack uses through `ctx.mcp`,
    /// e.g. `{"servers": ["everything"], "tools": ["everything/echo"]}`.
    /// Only what the operator also grants (`[packs.<name>] mcp`) is usable.
    #[serde(default, skip_serializing_if = "crate::mcp::McpRequest::is_empty")]
    pub mcp: crate::mcp::McpRequest,
}

fn err(path: impl Into<String>, message: impl Into<String>) -> LoadError {
    LoadError::validation(path, message)
}

/// An optional `…SchemaRef`: a relative path inside the pack.
fn schema_ref(n: &Value, key: &str, path: &str) -> Result<Option<String>, LoadError> {
    match n.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => {
            let p = format!("{path}.{key}");
            check_relative_path(s, &p)?;
            Ok(Some(s.clone()))
        }
        Some(_) => Err(err(format!("{path}.{key}"), "must be a string")),
    }
}

fn req_str<'a>(v: &'a Value, key: &str, path: &str) -> Result<&'a str, LoadError> {
    let p = format!("{path}.{key}");
    match v.get(key) {
        None => Err(err(p, "is required")),
        Some(Value::String(s)) if s.trim().is_empty() => Err(err(p, "must not be empty")),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(err(p, "must be a string")),
    }
}

/// Longest node type id.
pub const MAX_TYPE_ID_BYTES: usize = 128;

/// Whether `s` is a valid node type id: 1 to 128 of `[A-Za-z0-9._-]`, the
/// rule MCP sets for tool names (type ids are served as MCP tool names and
/// shown by clients).
pub fn valid_type_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_TYPE_ID_BYTES
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Whether `s` is a valid pack name (lowercase letters, digits, `-._@/`;
/// no empty, `.` or `..` segment between slashes).
pub fn valid_name(s: &str) -> bool {
    s.len() <= 214
        && s.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '@')
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-._@/".contains(c))
        // `@scope/name` is one name, never a path that climbs.
        && s.split('/').all(|seg| !matches!(seg, "" | "." | ".."))
}

/// Whether `s` is a semantic version: `MAJOR.MINOR.PATCH`, then an
/// optional `-pre.release` and `+build`, whose identifiers are non-empty
/// runs of `[0-9A-Za-z-]` (so a version is never a path, a URL or markup:
/// it is used in file names and registry paths).
pub fn valid_version(s: &str) -> bool {
    let (main, build) = match s.split_once('+') {
        Some((m, b)) => (m, Some(b)),
        None => (s, None),
    };
    let (core, pre) = match main.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (main, None),
    };
    let idents = |t: &str| {
        s.len() <= 256
            && t.split('.')
                .all(|i| !i.is_empty() && i.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
    };
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        && pre.is_none_or(idents)
        && build.is_none_or(idents)
}

/// Semantic-version precedence (SemVer 2.0.0 §11) of two versions that
/// [`valid_version`] accepts: MAJOR, MINOR, PATCH numerically; a
/// pre-release is lower than its release; pre-release identifiers compare
/// numerically when both are digits, else as ASCII, numeric below
/// alphanumeric, fewer below more; build metadata is ignored. `None` when
/// either is not a version.
pub fn compare_versions(a: &str, b: &str) -> Option<std::cmp::Ordering> {
    use std::cmp::Ordering;
    fn split(v: &str) -> Option<(Vec<&str>, Option<&str>)> {
        if !valid_version(v) {
            return None;
        }
        let main = v.split_once('+').map_or(v, |(m, _)| m);
        let (core, pre) = match main.split_once('-') {
            Some((c, p)) => (c, Some(p)),
            None => (main, None),
        };
        Some((core.split('.').collect(), pre))
    }
    /// Two digit strings by value, without overflow.
    fn numeric(x: &str, y: &str) -> Ordering {
        let (x, y) = (x.trim_start_matches('0'), y.trim_start_matches('0'));
        x.len().cmp(&y.len()).then_with(|| x.cmp(y))
    }
    let (ca, pa) = split(a)?;
    let (cb, pb) = split(b)?;
    for (x, y) in ca.iter().zip(&cb) {
        match numeric(x, y) {
            Ordering::Equal => {}
            o => return Some(o),
        }
    }
    Some(match (pa, pb) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Greater,
        (Some(_), None) => Ordering::Less,
        (Some(pa), Some(pb)) => {
            let digits = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
            let (ia, ib): (Vec<&str>, Vec<&str>) =
                (pa.split('.').collect(), pb.split('.').collect());
            let mut out = ia.len().cmp(&ib.len());
            for (x, y) in ia.iter().zip(&ib) {
                let o = match (digits(x), digits(y)) {
                    (true, true) => numeric(x, y),
                    (true, false) => Ordering::Less,
                    (false, true) => Ordering::Greater,
                    (false, false) => x.cmp(y),
                };
                if o != Ordering::Equal {
                    out = o;
                    break;
                }
            }
            out
        }
    })
}

/// Checks that a manifest path stays inside the pack directory, lexically.
/// (Symlinks are handled by opening through a `cap-std` `Dir`.)
pub fn check_relative_path(path: &str, json_path: &str) -> Result<(), LoadError> {
    if path.is_empty() {
        return Err(err(json_path, "must not be empty"));
    }
    if path.starts_with('/') || path.starts_with('\\') || path.contains(':') {
        return Err(err(
            json_path,
            format!("`{path}` must be a relative path inside the pack directory"),
        ));
    }
    if path.split(['/', '\\']).any(|seg| seg == "..") {
        return Err(err(
            json_path,
            format!("`{path}` must not contain `..`: it would leave the pack directory"),
        ));
    }
    Ok(())
}

impl Manifest {
    /// Parses and validates `pack.json` bytes.
    ///
    /// Bytes the canonical form cannot represent exactly (a repeated
    /// member name, an integer beyond ±(2^53−1) or another number it would
    /// change, a lone surrogate: [`crate::json::ijson`]) are refused first, with
    /// [`LoadError::NotCanonical`], so nothing is verified or run that the
    /// signature would not bind.
    pub fn parse(bytes: &[u8]) -> Result<Manifest, LoadError> {
        crate::json::ijson::check(bytes).map_err(|f| LoadError::NotCanonical {
            path: f.path,
            reason: f.violation.reason(),
            message: f.message,
        })?;
        let v: Value = serde_json::from_slice(bytes)
            .map_err(|e| err("$", format!("pack.json is not valid JSON: {e}")))?;
        if !v.is_object() {
            return Err(err("$", "pack.json must be a JSON object"));
        }
        // Kind and runtime language: what can run here, decided in one
        // place (an absent `kind` is `node`, the protocol's rule).
        crate::manifest::runnable::judge(&v)?;
        let name = req_str(&v, "name", "$")?;
        if !valid_name(name) {
            return Err(err(
                "$.name",
                format!("`{name}` must be lowercase letters, digits and `-._@/`"),
            ));
        }
        let version = req_str(&v, "version", "$")?;
        if !valid_version(version) {
            return Err(err(
                "$.version",
                format!("`{version}` is not a semantic version (MAJOR.MINOR.PATCH)"),
            ));
        }
        let engines = v
            .get("engines")
            .ok_or_else(|| err("$.engines", "is required"))?;
        let openwop = req_str(engines, "openwop", "$.engines")?.to_owned();

        let nodes_v = match v.get("nodes") {
            Some(Value::Array(a)) if a.is_empty() => {
                return Err(err("$.nodes", "must list at least one node"));
            }
            Some(Value::Array(a)) => a,
            Some(_) => return Err(err("$.nodes", "must be an array")),
            None => return Err(err("$.nodes", "is required")),
        };
        let mut nodes = Vec::with_capacity(nodes_v.len());
        let mut seen = BTreeSet::new();
        for (i, n) in nodes_v.iter().enumerate() {
            let p = format!("$.nodes[{i}]");
            if !n.is_object() {
                return Err(err(p, "must be an object"));
            }
            let type_id = req_str(n, "typeId", &p)?;
            if !valid_type_id(type_id) {
                let shown: String = type_id
                    .chars()
                    .take(40)
                    .map(|c| if c.is_control() { '?' } else { c })
                    .collect();
                return Err(LoadError::TypeId {
                    path: format!("{p}.typeId"),
                    message: format!(
                        "`{shown}` ({} bytes) is not a node type id: 1 to {MAX_TYPE_ID_BYTES} of `A-Z a-z 0-9 . _ -` (what MCP allows in a tool name)",
                        type_id.len()
                    ),
                });
            }
            if !seen.insert(type_id.to_owned()) {
                return Err(err(
                    format!("{p}.typeId"),
                    format!("`{type_id}` is listed twice"),
                ));
            }
            let nv = req_str(n, "version", &p)?;
            if !valid_version(nv) {
                return Err(err(
                    format!("{p}.version"),
                    format!("`{nv}` is not a semantic version"),
                ));
            }
            nodes.push(NodeDecl {
                type_id: type_id.to_owned(),
                version: nv.to_owned(),
                category: req_str(n, "category", &p)?.to_owned(),
                role: req_str(n, "role", &p)?.to_owned(),
                requires_secrets: crate::secrets::requirement::parse_node(n, &p)?,
                config_schema_ref: schema_ref(n, "configSchemaRef", &p)?,
                input_schema_ref: schema_ref(n, "inputSchemaRef", &p)?,
            });
        }

        let rt = v
            .get("runtime")
            .ok_or_else(|| err("$.runtime", "is required"))?;
        let language = match req_str(rt, "language", "$.runtime")? {
            "wasm-component" => Language::WasmComponent,
            "wasm" => Language::Wasm,
            "javascript" => Language::Javascript,
            other => {
                return Err(LoadError::Unsupported(
                    crate::manifest::runnable::unsupported_language(other),
                ));
            }
        };
        if language == Language::WasmComponent {
            match rt.get("format") {
                None => {}
                Some(Value::String(f)) if f == "wasm-component" => {}
                Some(_) => {
                    return Err(err(
                        "$.runtime.format",
                        "must be `wasm-component` for a wasm-component pack",
                    ));
                }
            }
        }
        if language == Language::Javascript {
            match rt.get("format") {
                None => {}
                Some(Value::String(f)) if f == "esm" => {}
                Some(_) => {
                    return Err(err(
                        "$.runtime.format",
                        "must be `esm` (or absent) for a `javascript` pack: ES modules are what this host builds",
                    ));
                }
            }
        }
        if language == Language::Wasm {
            match rt.get("format") {
                None => {}
                Some(Value::String(f)) if f == "wasm" => {}
                Some(_) => {
                    return Err(err(
                        "$.runtime.format",
                        "must be `wasm` (or absent) for a `wasm` (ABI v1 core module) pack",
                    ));
                }
            }
            if let Some(w) = rt.get("wasm") {
                match w.get("abiVersion") {
                    None => {}
                    Some(Value::Number(n)) => match n.as_i64() {
                        Some(v) if crate::manifest::abi::SUPPORTED_ABI_VERSIONS.contains(&v) => {}
                        Some(v) => {
                            return Err(LoadError::AbiVersion {
                                version: v,
                                supported: crate::manifest::abi::supported_versions(),
                            });
                        }
                        None => {
                            return Err(err(
                                "$.runtime.wasm.abiVersion",
                                "must be an integer ABI version",
                            ));
                        }
                    },
                    Some(_) => {
                        return Err(err(
                            "$.runtime.wasm.abiVersion",
                            "must be an integer ABI version",
                        ));
                    }
                }
            }
        }
        let entry = req_str(rt, "entry", "$.runtime")?;
        check_relative_path(entry, "$.runtime.entry")?;
        let requires = crate::manifest::requires::parse(rt.get("requires"))?;

        // A JavaScript pack (the registry's) needs no `x-wop`: its
        // component is built here and its capabilities derived from its code.
        let wop_v = match v.get(VENDOR_KEY) {
            Some(w) => w,
            None if language == Language::Javascript => &Value::Null,
            None => {
                return Err(err(
                    format!("$.{VENDOR_KEY}"),
                    "is required: it holds the entry's sha256 and the capabilities the pack requests",
                ));
            }
        };
        let wop: WopBlock = if wop_v.is_null() {
            WopBlock::default()
        } else {
            serde_path_to_error::deserialize(wop_v).map_err(|e| {
                let inner = e.path().to_string();
                let p = if inner == "." || inner.is_empty() {
                    format!("$.{VENDOR_KEY}")
                } else {
                    format!("$.{VENDOR_KEY}.{inner}")
                };
                err(p, e.into_inner().to_string())
            })?
        };
        if let Err((field, message)) = wop.limits.validate() {
            return Err(err(format!("$.{VENDOR_KEY}.limits.{field}"), message));
        }
        if let Err((i, e)) = crate::egress::allow::parse_all(&wop.egress) {
            return Err(err(format!("$.{VENDOR_KEY}.egress[{i}]"), e));
        }
        if let Err((at, e)) = wop.mcp.validate() {
            return Err(err(format!("$.{VENDOR_KEY}.mcp.{at}"), e));
        }
        let js_without_sha = language == Language::Javascript && wop.sha256.is_empty();
        if !js_without_sha
            && (wop.sha256.len() != 64
                || !wop
                    .sha256
                    .chars()
                    .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)))
        {
            return Err(err(
                format!("$.{VENDOR_KEY}.sha256"),
                "must be the lowercase hex sha256 of the entry file (64 characters)",
            ));
        }

        Ok(Manifest {
            name: name.to_owned(),
            version: version.to_owned(),
            openwop,
            nodes,
            runtime: RuntimeDecl {
                language,
                entry: entry.to_owned(),
                requires,
            },
            wop,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn good() -> Value {
        json!({
            "kind": "node", "name": "hello", "version": "0.1.0",
            "engines": {"openwop": ">=1.0.0"},
            "nodes": [{"typeId": "wop.samples.hello", "version": "0.1.0", "category": "transform", "role": "worker"}],
            "runtime": {"language": "wasm-component", "entry": "hello.wasm", "format": "wasm-component"},
            "x-wop": {"sha256": "a".repeat(64), "capabilities": ["log"]}
        })
    }

    fn path_of(v: Value) -> String {
        match Manifest::parse(v.to_string().as_bytes()) {
            Err(LoadError::Validation { path, .. }) => path,
            other => panic!("expected a validation error, got {other:?}"),
        }
    }

    #[test]
    fn good_manifest_parses() {
        let m = Manifest::parse(good().to_string().as_bytes()).unwrap();
        assert_eq!(m.name, "hello");
        assert_eq!(m.nodes[0].type_id, "wop.samples.hello");
        assert_eq!(m.wop.capabilities, vec![Capability::Log]);
    }

    #[test]
    fn each_broken_field_is_named() {
        type Mutate = Box<dyn Fn(&mut Value)>;
        let cases: Vec<(&str, Mutate)> = vec![
            ("$.kind", Box::new(|v| v["kind"] = json!(7))),
            ("$.name", Box::new(|v| v["name"] = json!("Bad Name"))),
            ("$.version", Box::new(|v| v["version"] = json!("1.0"))),
            (
                "$.engines",
                Box::new(|v| {
                    v.as_object_mut().unwrap().remove("engines");
                }),
            ),
            ("$.engines.openwop", Box::new(|v| v["engines"] = json!({}))),
            ("$.nodes", Box::new(|v| v["nodes"] = json!([]))),
            (
                "$.nodes[0].typeId",
                Box::new(|v| v["nodes"][0]["typeId"] = json!(7)),
            ),
            (
                "$.nodes[0].role",
                Box::new(|v| {
                    v["nodes"][0].as_object_mut().unwrap().remove("role");
                }),
            ),
            (
                "$.nodes[1].typeId",
                Box::new(|v| {
                    let n = v["nodes"][0].clone();
                    v["nodes"].as_array_mut().unwrap().push(n);
                }),
            ),
            (
                "$.runtime.entry",
                Box::new(|v| v["runtime"]["entry"] = json!("../outside.wasm")),
            ),
            (
                "$.runtime.entry",
                Box::new(|v| v["runtime"]["entry"] = json!("/etc/passwd")),
            ),
            (
                "$.runtime.format",
                Box::new(|v| v["runtime"]["format"] = json!("core")),
            ),
            (
                "$.x-wop",
                Box::new(|v| {
                    v.as_object_mut().unwrap().remove("x-wop");
                }),
            ),
            (
                "$.x-wop.sha256",
                Box::new(|v| v["x-wop"]["sha256"] = json!("ABC")),
            ),
            (
                "$.x-wop.capabilities[0]",
                Box::new(|v| v["x-wop"]["capabilities"] = json!(["sockets"])),
            ),
            (
                "$.x-wop.limits.fuel",
                Box::new(|v| v["x-wop"]["limits"] = json!({"fuel": "lots"})),
            ),
            (
                "$.x-wop.egress[1]",
                Box::new(|v| v["x-wop"]["egress"] = json!(["api.example.com", "ftp://x.example"])),
            ),
            (
                "$.x-wop.egress",
                Box::new(|v| v["x-wop"]["egress"] = json!("api.example.com")),
            ),
            (
                "$.x-wop.mcp.tools[0]",
                Box::new(|v| v["x-wop"]["mcp"] = json!({"servers": ["ev"], "tools": ["other/x"]})),
            ),
            (
                "$.x-wop.mcp.servers[0]",
                Box::new(|v| v["x-wop"]["mcp"] = json!({"servers": ["Ev"]})),
            ),
            (
                "$.x-wop.mcp.surprise",
                Box::new(|v| v["x-wop"]["mcp"] = json!({"surprise": 1})),
            ),
            (
                "$.x-wop.surprise",
                Box::new(|v| v["x-wop"]["surprise"] = json!(1)),
            ),
        ];
        for (want, mutate) in cases {
            let mut v = good();
            mutate(&mut v);
            assert_eq!(path_of(v), want);
        }
    }

    #[test]
    fn names_never_climb() {
        for ok in ["hello", "vendor.acme.fetch", "@scope/name", "a..b"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["a/../../x", "a/./b", "a//b", "a/", "../x", "A"] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn versions_are_semver_and_never_paths() {
        for ok in ["1.0.0", "0.1.0-rc.1", "1.0.0+build.7", "1.0.0-alpha-2+x.y"] {
            assert!(valid_version(ok), "{ok}");
        }
        for bad in [
            "1.0",
            "1.0.0-",
            "1.0.0-../../etc",
            "1.0.0-a/b",
            "1.0.0+x..y",
            "1.0.0-a b",
            "v1.0.0",
        ] {
            assert!(!valid_version(bad), "{bad}");
        }
    }

    #[test]
    fn version_precedence() {
        use std::cmp::Ordering::{Equal as E, Greater as G, Less as L};
        let cases: &[(&str, &str, Option<std::cmp::Ordering>)] = &[
            ("1.0.0", "1.0.0", Some(E)),
            ("1.0.0", "1.0.1", Some(L)),
            ("1.2.0", "1.10.0", Some(L)),
            ("2.0.0", "1.99.99", Some(G)),
            ("1.0.0-alpha", "1.0.0", Some(L)),
            ("1.0.0", "1.0.0-rc.1", Some(G)),
            ("1.0.0-alpha", "1.0.0-alpha.1", Some(L)),
            ("1.0.0-alpha.1", "1.0.0-alpha.beta", Some(L)),
            ("1.0.0-beta.2", "1.0.0-beta.11", Some(L)),
            ("1.0.0-rc.1", "1.0.0-beta.11", Some(G)),
            ("1.0.0+build.1", "1.0.0+build.2", Some(E)),
            ("1.0.0-rc.1+x", "1.0.0-rc.1", Some(E)),
            (
                "99999999999999999999999.0.0",
                "99999999999999999999998.0.0",
                Some(G),
            ),
            ("01.0.0", "1.0.0", Some(E)),
            ("1.0", "1.0.0", None),
            ("1.0.0", "latest", None),
        ];
        for (a, b, want) in cases {
            assert_eq!(compare_versions(a, b), *want, "{a} vs {b}");
        }
    }

    #[test]
    fn non_canonical_manifests_are_refused_before_anything_else() {
        // Each is otherwise a good manifest.
        let text = good().to_string();
        let cases = [
            (
                text.replacen("\"kind\"", "\"name\":\"decoy\",\"kind\"", 1),
                "duplicate-member",
                "$.name",
            ),
            (
                text.replacen(
                    "\"capabilities\":[\"log\"]",
                    "\"capabilities\":[\"log\"],\"limits\":{\"fuel\":18446744073709551615}",
                    1,
                ),
                "unsafe-integer",
                "$.x-wop.limits.fuel",
            ),
            (
                text.replacen("\"hello\"", "\"hel\\ud800lo\"", 1),
                "lone-surrogate",
                "$.name",
            ),
        ];
        for (doc, reason, path) in cases {
            match Manifest::parse(doc.as_bytes()) {
                Err(LoadError::NotCanonical {
                    reason: r, path: p, ..
                }) => {
                    assert_eq!((r, p.as_str()), (reason, path), "{doc}")
                }
                other => panic!("{doc}: expected NotCanonical, got {other:?}"),
            }
        }
    }

    #[test]
    fn type_ids_are_checked_with_their_path() {
        for bad in [
            "x\"><svg/onload=alert(1)>".to_owned(),
            "a\nb".to_owned(),
            String::new(),
            "a".repeat(129),
            "a b".to_owned(),
            "é".to_owned(),
        ] {
            let mut v = good();
            v["nodes"][0]["typeId"] = json!(bad);
            match Manifest::parse(v.to_string().as_bytes()) {
                Err(LoadError::TypeId { path, .. }) => assert_eq!(path, "$.nodes[0].typeId"),
                // The empty id is refused as empty first.
                Err(LoadError::Validation { path, .. }) if bad.is_empty() => {
                    assert_eq!(path, "$.nodes[0].typeId")
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
        let mut v = good();
        v["nodes"][0]["typeId"] = json!("a".repeat(128));
        assert!(Manifest::parse(v.to_string().as_bytes()).is_ok());
        let e = {
            let mut v = good();
            v["nodes"][0]["typeId"] = json!("x<y");
            Manifest::parse(v.to_string().as_bytes()).unwrap_err()
        };
        assert_eq!(e.code().as_str(), "invalid_type_id");
    }

    #[test]
    fn kind_absent_is_node_and_other_kinds_are_their_own_code() {
        let mut v = good();
        v.as_object_mut().unwrap().remove("kind");
        assert!(Manifest::parse(v.to_string().as_bytes()).is_ok());
        v["kind"] = json!("workflow-chain");
        let e = Manifest::parse(v.to_string().as_bytes()).unwrap_err();
        assert_eq!(e.code().as_str(), "unsupported_pack_kind", "{e}");
    }

    #[test]
    fn other_languages_are_unsupported() {
        let mut v = good();
        v["runtime"]["language"] = json!("python");
        assert!(matches!(
            Manifest::parse(v.to_string().as_bytes()),
            Err(LoadError::Unsupported(_))
        ));
    }
}
