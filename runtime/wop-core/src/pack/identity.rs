//! What a pack says about itself, checked against its manifest: one check
//! for every pack kind (a component's `describe()`, an ABI v1 module's
//! identification exports). Pure.

use crate::error::LoadError;
use crate::manifest::Manifest;
use std::collections::BTreeSet;

/// A pack's own account of itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described<'a> {
    /// Who gave it, for messages: `describe()`, `the module`.
    pub by: &'a str,
    /// The pack's name.
    pub name: &'a str,
    /// The pack's version (`None`: this kind does not report one).
    pub version: Option<&'a str>,
    /// The node types, each with its version (`None`: not reported).
    pub nodes: Vec<(&'a str, Option<&'a str>)>,
}

/// The manifest and the pack's own account must agree on the name, the
/// version (when reported) and the node types (with their versions, when
/// reported).
pub fn check(manifest: &Manifest, d: &Described<'_>) -> Result<(), LoadError> {
    let by = d.by;
    if d.name != manifest.name {
        return Err(LoadError::validation(
            "$.name",
            format!(
                "pack.json says `{}` but {by} says `{}`",
                manifest.name, d.name
            ),
        ));
    }
    if let Some(v) = d.version
        && v != manifest.version
    {
        return Err(LoadError::validation(
            "$.version",
            format!("pack.json says `{}` but {by} says `{v}`", manifest.version),
        ));
    }
    let versioned = d.nodes.iter().all(|(_, v)| v.is_some());
    let show = |t: &str, v: Option<&str>| match v {
        Some(v) if versioned => format!("{t}@{v}"),
        _ => t.to_owned(),
    };
    let declared: BTreeSet<String> = manifest
        .nodes
        .iter()
        .map(|n| show(&n.type_id, Some(&n.version)))
        .collect();
    let described: BTreeSet<String> = d.nodes.iter().map(|(t, v)| show(t, *v)).collect();
    if declared != described {
        let list = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(", ");
        return Err(LoadError::validation(
            "$.nodes",
            format!(
                "pack.json declares [{}] but {by} reports [{}]",
                list(&declared),
                list(&described)
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::manifest::{Language, NodeDecl, RuntimeDecl, WopBlock};

    fn manifest() -> Manifest {
        let node = |t: &str| NodeDecl {
            type_id: t.to_owned(),
            version: "1.0.0".to_owned(),
            category: "c".to_owned(),
            role: "worker".to_owned(),
            requires_secrets: Vec::new(),
            config_schema_ref: None,
            input_schema_ref: None,
        };
        Manifest {
            name: "p".to_owned(),
            version: "2.0.0".to_owned(),
            openwop: ">=1.0.0".to_owned(),
            nodes: vec![node("t.a"), node("t.b")],
            runtime: RuntimeDecl {
                language: Language::WasmComponent,
                entry: "p.wasm".to_owned(),
                requires: Vec::new(),
            },
            wop: WopBlock::default(),
        }
    }

    fn path_of(r: Result<(), LoadError>) -> Option<String> {
        match r {
            Ok(()) => None,
            Err(LoadError::Validation { path, .. }) => Some(path),
            Err(other) => Some(format!("unexpected {other:?}")),
        }
    }

    #[test]
    fn every_kind_of_disagreement() {
        let m = manifest();
        let v = Some("1.0.0");
        let described = |name, version, nodes| Described {
            by: "describe()",
            name,
            version,
            nodes,
        };
        let cases: Vec<(Described<'_>, Option<&str>)> = vec![
            (
                described("p", Some("2.0.0"), vec![("t.b", v), ("t.a", v)]),
                None,
            ),
            // A kind that reports no versions compares type ids only.
            (
                described("p", None, vec![("t.a", None), ("t.b", None)]),
                None,
            ),
            (
                described("q", Some("2.0.0"), vec![("t.a", v), ("t.b", v)]),
                Some("$.name"),
            ),
            (
                described("p", Some("2.0.1"), vec![("t.a", v), ("t.b", v)]),
                Some("$.version"),
            ),
            (
                described("p", Some("2.0.0"), vec![("t.a", v)]),
                Some("$.nodes"),
            ),
            (
                described("p", Some("2.0.0"), vec![("t.a", v), ("t.b", Some("9"))]),
                Some("$.nodes"),
            ),
            (
                described("p", None, vec![("t.a", None), ("t.c", None)]),
                Some("$.nodes"),
            ),
        ];
        for (i, (d, want)) in cases.into_iter().enumerate() {
            assert_eq!(path_of(check(&m, &d)).as_deref(), want, "case {i}");
        }
        let e = check(&m, &described("p", None, vec![("t.a", None)])).unwrap_err();
        assert!(e.to_string().contains("describe() reports [t.a]"), "{e}");
    }
}
