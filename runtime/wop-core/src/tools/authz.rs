//! Authorization: two layers, fail closed. Pure.
//!
//! 1. **The pack**: the tool must be declared in the pack's manifest
//!    (`x-wop.tools`) *and* granted by the operator (`[packs.<name>] tools`).
//!    Checked first, before the registry is consulted, so an untrusted pack
//!    learns nothing about tools outside its own declaration.
//! 2. **The tool exists and is visible** to the caller's tenant; otherwise
//!    `not_found` — an unknown tool and a hidden one are indistinguishable.
//! 3. **The principal**: its scopes must cover the tool's `auth.scopes`.
//!
//! Any error while evaluating (a malformed grant pattern, an invalid
//! descriptor) denies.

use crate::tools::Catalogued;

/// Why a call was denied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denial {
    /// The pack's manifest does not declare the tool.
    NotDeclared,
    /// The operator did not grant the tool to the pack.
    NotGranted,
    /// No such tool for this caller (unknown, or not visible to the tenant).
    NotFound,
    /// The principal lacks these scopes.
    MissingScopes {
        /// All scopes the tool requires.
        required: Vec<String>,
        /// The ones the principal lacks.
        missing: Vec<String>,
    },
    /// The decision could not be evaluated.
    PolicyError(String),
}

/// Matches a grant pattern: an exact id, `*`, or a prefix ending in `*`
/// (`crm:*`). Anything else with a `*` is a malformed pattern.
pub fn pattern_matches(pattern: &str, tool_id: &str) -> Result<bool, String> {
    match pattern.find('*') {
        None => Ok(pattern == tool_id),
        Some(i) if i == pattern.len() - 1 => Ok(tool_id.starts_with(&pattern[..i])),
        Some(_) => Err(format!(
            "grant pattern `{pattern}` is malformed: `*` may only end a pattern"
        )),
    }
}

fn any_match(patterns: &[String], tool_id: &str) -> Result<bool, String> {
    for p in patterns {
        if pattern_matches(p, tool_id)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The pack layer alone (used for catalog filtering too).
pub fn pack_allows(declared: &[String], granted: &[String], tool_id: &str) -> Result<(), Denial> {
    if !any_match(declared, tool_id).map_err(Denial::PolicyError)? {
        return Err(Denial::NotDeclared);
    }
    if !any_match(granted, tool_id).map_err(Denial::PolicyError)? {
        return Err(Denial::NotGranted);
    }
    Ok(())
}

/// The full decision for one call.
pub fn authorize(
    declared: &[String],
    granted: &[String],
    tool: Option<&impl Catalogued>,
    tool_id: &str,
    tenant: &str,
    scopes: &[String],
) -> Result<(), Denial> {
    pack_allows(declared, granted, tool_id)?;
    let tool = match tool {
        Some(t) if t.visible_to(tenant) => t,
        _ => return Err(Denial::NotFound),
    };
    tool.descriptor().validate().map_err(Denial::PolicyError)?;
    principal_allows(tool, scopes)
}

/// The principal layer alone.
pub fn principal_allows(tool: &impl Catalogued, scopes: &[String]) -> Result<(), Denial> {
    let required = tool.descriptor().required_scopes();
    let missing: Vec<String> = required
        .iter()
        .filter(|r| !scopes.contains(r))
        .cloned()
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Denial::MissingScopes {
            required: required.to_vec(),
            missing,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{SafetyTier, ToolAuth, ToolDescriptor, ToolSource};

    struct RegisteredTool {
        descriptor: ToolDescriptor,
        tenants: Option<Vec<String>>,
    }
    impl Catalogued for RegisteredTool {
        fn descriptor(&self) -> &ToolDescriptor {
            &self.descriptor
        }
        fn tenants(&self) -> Option<&[String]> {
            self.tenants.as_deref()
        }
    }

    fn tool(id: &str, scopes: &[&str], tenants: Option<&[&str]>) -> RegisteredTool {
        let mut d = ToolDescriptor::new(id, ToolSource::HostExtension, SafetyTier::Write);
        d.auth = Some(ToolAuth {
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            credential_ref: false,
        });
        RegisteredTool {
            descriptor: d,
            tenants: tenants.map(|t| t.iter().map(|s| s.to_string()).collect()),
        }
    }

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn decision_table() {
        let t = tool("crm:update", &["crm.write"], Some(&["acme"]));
        let bad = {
            let mut b = tool("nocolon", &[], None);
            b.descriptor.tool_id = "nocolon".into();
            b
        };
        use Denial::*;
        type Case<'a> = (
            &'a [&'a str],
            &'a [&'a str],
            Option<&'a RegisteredTool>,
            &'a str,
            &'a str,
            &'a [&'a str],
            Result<(), Denial>,
        );
        let cases: Vec<Case> = vec![
            (
                &["crm:update"],
                &["crm:update"],
                Some(&t),
                "crm:update",
                "acme",
                &["crm.write"],
                Ok(()),
            ),
            (
                &["crm:*"],
                &["*"],
                Some(&t),
                "crm:update",
                "acme",
                &["crm.write", "x"],
                Ok(()),
            ),
            (
                &[],
                &["crm:update"],
                Some(&t),
                "crm:update",
                "acme",
                &["crm.write"],
                Err(NotDeclared),
            ),
            (
                &["crm:update"],
                &[],
                Some(&t),
                "crm:update",
                "acme",
                &["crm.write"],
                Err(NotGranted),
            ),
            (
                &["crm:update"],
                &["crm:read"],
                Some(&t),
                "crm:update",
                "acme",
                &["crm.write"],
                Err(NotGranted),
            ),
            // Undeclared is decided before existence: nothing leaks.
            (&[], &[], None, "crm:ghost", "acme", &[], Err(NotDeclared)),
            (
                &["crm:ghost"],
                &["crm:ghost"],
                None,
                "crm:ghost",
                "acme",
                &[],
                Err(NotFound),
            ),
            // Another tenant's tool is indistinguishable from a missing one.
            (
                &["crm:update"],
                &["crm:update"],
                Some(&t),
                "crm:update",
                "other",
                &["crm.write"],
                Err(NotFound),
            ),
            (
                &["crm:update"],
                &["crm:update"],
                Some(&t),
                "crm:update",
                "acme",
                &[],
                Err(MissingScopes {
                    required: s(&["crm.write"]),
                    missing: s(&["crm.write"]),
                }),
            ),
            (
                &["crm:*x"],
                &["*"],
                Some(&t),
                "crm:update",
                "acme",
                &["crm.write"],
                Err(PolicyError(
                    "grant pattern `crm:*x` is malformed: `*` may only end a pattern".into(),
                )),
            ),
        ];
        for (i, (declared, granted, tool, id, tenant, scopes, want)) in
            cases.into_iter().enumerate()
        {
            let got = authorize(&s(declared), &s(granted), tool, id, tenant, &s(scopes));
            assert_eq!(got, want, "case {i}");
        }
        let got = authorize(&s(&["*"]), &s(&["*"]), Some(&bad), "nocolon", "acme", &[]);
        assert!(matches!(got, Err(PolicyError(_))), "{got:?}");
    }
}
