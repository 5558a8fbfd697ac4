//! `runtime.requires[]`: the platform primitives a pack declares it needs
//! (the protocol's closed vocabulary). A declaration, not a grant: a pack
//! whose requirement the operator does not grant is refused at install and
//! at load with `pack_runtime_requirement_unmet` (`unmet[]`); an unknown
//! token is `invalid_manifest` ([`crate::manifest::requires`]).
//!
//! What grants each primitive here:
//!
//! | token | granted when |
//! | --- | --- |
//! | `clock`, `crypto` | always (every pack gets `clock` and `random`) |
//! | `net.dns`, `net.outbound` | the `http` capability and an `egress` grant |
//! | `fs.read` | a `filesystem` grant |
//! | `fs.write` | a `filesystem` grant with `readOnly = false` |
//! | `env.read`, `subprocess` | never (no pack gets them) |

use crate::capability::Capability;
use crate::error::LoadError;
use crate::manifest::Manifest;
use crate::policy::Policy;

/// Whether the operator grants `token` to `pack`.
fn granted(policy: &Policy, pack: &str, token: &str) -> bool {
    let g = policy.packs.get(pack);
    match token {
        "clock" | "crypto" => true,
        "net.dns" | "net.outbound" => {
            g.is_some_and(|g| g.capabilities.contains(&Capability::Http) && !g.egress.is_empty())
        }
        "fs.read" => g.is_some_and(|g| g.filesystem.is_some()),
        "fs.write" => g.is_some_and(|g| g.filesystem.as_ref().is_some_and(|f| !f.read_only)),
        _ => false,
    }
}

/// Refuses `manifest` when the policy does not grant all it requires.
pub fn check(policy: &Policy, manifest: &Manifest) -> Result<(), LoadError> {
    let unmet: Vec<String> = manifest
        .runtime
        .requires
        .iter()
        .filter(|t| !granted(policy, &manifest.name, t))
        .cloned()
        .collect();
    if unmet.is_empty() {
        return Ok(());
    }
    let pack = &manifest.name;
    Err(LoadError::RequirementUnmet {
        advice: format!(
            "grant them under {} in the policy given with --policy (net.*: `capabilities = [\"http\"]` and `egress`; fs.*: `filesystem`); env.read and subprocess are never granted",
            crate::error::packs_table(pack)
        ),
        manifest: format!("{pack}@{}", manifest.version),
        unmet,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(requires: &str) -> Result<Manifest, LoadError> {
        let text = format!(
            r#"{{"kind":"node","name":"p","version":"1.0.0","engines":{{"openwop":">=1.0.0"}},
            "nodes":[{{"typeId":"p.a","version":"1.0.0","category":"c","role":"worker"}}],
            "runtime":{{"language":"wasm-component","entry":"p.wasm","requires":{requires}}},
            "x-wop":{{"sha256":"{}"}}}}"#,
            "a".repeat(64)
        );
        Manifest::parse(text.as_bytes())
    }

    #[test]
    fn requirements_are_checked_against_grants() {
        let m = manifest(r#"["clock","net.outbound","fs.write"]"#).unwrap();
        let none = Policy::default();
        match check(&none, &m).unwrap_err() {
            LoadError::RequirementUnmet {
                unmet, manifest, ..
            } => {
                assert_eq!(unmet, ["net.outbound", "fs.write"]);
                assert_eq!(manifest, "p@1.0.0");
            }
            e => panic!("{e}"),
        }
        let dir = std::env::temp_dir();
        let granted = Policy::from_toml(&format!(
            "[packs.p]\ncapabilities = [\"http\"]\negress = [\"api.example.com\"]\n[packs.p.filesystem]\npath = \"{}\"\nreadOnly = false\n",
            dir.display()
        ))
        .unwrap();
        check(&granted, &m).unwrap();
        let env = manifest(r#"["env.read"]"#).unwrap();
        assert!(check(&granted, &env).is_err());
        assert!(check(&none, &manifest("[]").unwrap()).is_ok());
    }
}
