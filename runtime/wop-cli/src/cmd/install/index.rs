//! What a registry serves, read (DESIGN.md §8): the discovery document's
//! `endpoints` templates and `signingKeys[]`, and a pack index's
//! `versions[]` rows; and the choice of a version (pure).

use serde_json::Value;
use wop_runtime::manifest::compare_versions;

/// The discovery document's parts a client uses.
#[derive(Debug, Clone)]
pub(crate) struct Discovery {
    /// `endpoints.packMetadata`, e.g. `/v1/packs/{name}/index.json`.
    pub pack_metadata: String,
    /// `endpoints.versionTarball`.
    pub version_tarball: Option<String>,
    /// `endpoints.publicKey`, e.g. `/keys/{keyId}.pub`.
    pub public_key: Option<String>,
    /// `signingKeys[]`: (keyId, publicKeyUrl, permittedNamespaces).
    pub keys: Vec<(String, Option<String>, Vec<String>)>,
}

/// Reads a discovery document.
pub(crate) fn discovery(v: &Value) -> Result<Discovery, String> {
    let e = &v["endpoints"];
    let s = |k: &str| e[k].as_str().map(str::to_owned);
    let pack_metadata =
        s("packMetadata").ok_or("the discovery document has no endpoints.packMetadata")?;
    let keys = v["signingKeys"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|k| {
                    let id = k["keyId"].as_str()?.to_owned();
                    let url = k["publicKeyUrl"].as_str().map(str::to_owned);
                    let ns = k["permittedNamespaces"]
                        .as_array()
                        .map(|n| {
                            n.iter()
                                .filter_map(|x| x.as_str().map(str::to_owned))
                                .collect()
                        })
                        .unwrap_or_default();
                    Some((id, url, ns))
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Discovery {
        pack_metadata,
        version_tarball: s("versionTarball"),
        public_key: s("publicKey"),
        keys,
    })
}

/// Fills `{name}`, `{version}`, `{keyId}` in an endpoint template.
pub(crate) fn fill(template: &str, vars: &[(&str, &str)]) -> String {
    vars.iter().fold(template.to_owned(), |t, (k, v)| {
        t.replace(&format!("{{{k}}}"), v)
    })
}

/// One `versions[]` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Row {
    pub version: String,
    pub tarball_url: Option<String>,
    pub integrity: String,
    pub deprecated: bool,
    pub yanked: bool,
}

/// The rows of a pack index.
pub(crate) fn rows(v: &Value) -> Result<Vec<Row>, String> {
    let list = v["versions"]
        .as_array()
        .ok_or("the pack index has no versions[]")?;
    list.iter()
        .map(|r| {
            let version = r["version"]
                .as_str()
                .ok_or("a version row has no version")?;
            if !wop_runtime::manifest::valid_version(version) {
                return Err(format!(
                    "the pack index lists `{}`, which is not a version",
                    &version[..version.floor_char_boundary(60)]
                ));
            }
            let integrity = r["integrity"]
                .as_str()
                .ok_or_else(|| format!("version {version} has no integrity"))?;
            Ok(Row {
                version: version.to_owned(),
                tarball_url: r["tarballUrl"].as_str().map(str::to_owned),
                integrity: integrity.to_owned(),
                deprecated: r["deprecated"].as_bool().unwrap_or(false)
                    || r["versionDeprecated"].as_bool().unwrap_or(false),
                yanked: r["yanked"].as_bool().unwrap_or(false),
            })
        })
        .collect()
}

/// Why no version was chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NoVersion {
    /// The pinned version is not in the index.
    NotFound(String),
    /// Every version is yanked (only an exact pin installs one).
    AllYanked,
}

/// The version to install: the exact pin (even yanked), else the highest
/// version that is not yanked.
pub(crate) fn choose<'a>(rows: &'a [Row], pin: Option<&str>) -> Result<&'a Row, NoVersion> {
    if let Some(p) = pin {
        return rows
            .iter()
            .find(|r| r.version == p)
            .ok_or_else(|| NoVersion::NotFound(p.to_owned()));
    }
    rows.iter()
        .filter(|r| !r.yanked)
        .filter(|r| compare_versions(&r.version, &r.version).is_some())
        .max_by(|a, b| {
            compare_versions(&a.version, &b.version).unwrap_or(std::cmp::Ordering::Equal)
        })
        .ok_or(NoVersion::AllYanked)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(v: &str, yanked: bool) -> Row {
        Row {
            version: v.to_owned(),
            tarball_url: None,
            integrity: "sha256-x".to_owned(),
            deprecated: false,
            yanked,
        }
    }

    #[test]
    fn the_highest_unyanked_version_unless_pinned() {
        let rows = vec![
            row("1.2.0", false),
            row("1.10.0", true),
            row("1.9.1", false),
        ];
        assert_eq!(choose(&rows, None).unwrap().version, "1.9.1");
        assert_eq!(choose(&rows, Some("1.10.0")).unwrap().version, "1.10.0");
        assert_eq!(
            choose(&rows, Some("2.0.0")),
            Err(NoVersion::NotFound("2.0.0".into()))
        );
        assert_eq!(
            choose(&[row("1.0.0", true)], None),
            Err(NoVersion::AllYanked)
        );
        assert_eq!(
            fill(
                "/v1/packs/{name}/-/{version}.tgz",
                &[("name", "a.b"), ("version", "1.0.0")]
            ),
            "/v1/packs/a.b/-/1.0.0.tgz"
        );
    }
}
