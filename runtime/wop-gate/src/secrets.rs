//! The operator's credentials, read once from where `[secrets.<id>]` says
//! (`env:NAME`, `file:PATH`), held in zeroed-on-drop memory, and resolved
//! for one invocation: the node's declared secrets that the operator
//! grants its pack, each with the value for the invocation's tenant.
//! A value that cannot be read is not an error at start (the operator is
//! warned); a node that needs it fails with `credential_unavailable`.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::sync::Arc;
use wop_core::manifest::{Language, Manifest};
use wop_core::policy::Policy;
use wop_core::secrets::{
    Credential, Credentials, SecretRequirement, SecretScope, SecretSpec, Source,
};
use zeroize::Zeroizing;

/// Largest secret file read.
const MAX_FILE_BYTES: u64 = 64 << 10;

/// A value, or why it cannot be had (never containing the value).
type Resolved = Result<Arc<Credential>, String>;

#[derive(Debug)]
struct Entry {
    shared: Option<Resolved>,
    tenants: BTreeMap<String, Resolved>,
}

/// Why a node's secret is not available; the message says what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    /// The secret id.
    pub secret: String,
    /// For people (never the value).
    pub message: String,
}

/// Every credential of the policy, by id.
#[derive(Debug, Default)]
pub struct SecretStore {
    entries: BTreeMap<String, Entry>,
}

fn read_source(text: &str) -> Result<Zeroizing<String>, String> {
    match Source::parse(text) {
        Source::Env(name) => std::env::var(name)
            .map(Zeroizing::new)
            .map_err(|_| format!("the environment variable {name} is not set (or not UTF-8)")),
        Source::File(path) => {
            let f = std::fs::File::open(path)
                .map_err(|e| format!("cannot open {path}: {}", e.kind()))?;
            let mut buf = Zeroizing::new(String::new());
            f.take(MAX_FILE_BYTES + 1)
                .read_to_string(&mut buf)
                .map_err(|e| format!("cannot read {path} as UTF-8 text: {}", e.kind()))?;
            if buf.len() as u64 > MAX_FILE_BYTES {
                return Err(format!("{path} is larger than {MAX_FILE_BYTES} bytes"));
            }
            let trimmed = buf.strip_suffix('\n').unwrap_or(&buf);
            let trimmed = trimmed.strip_suffix('\r').unwrap_or(trimmed);
            Ok(Zeroizing::new(trimmed.to_owned()))
        }
        Source::Inline(v) => Ok(Zeroizing::new(v.to_owned())),
    }
}

fn resolve_one(id: &str, spec: &SecretSpec, source: &str) -> Resolved {
    let value = read_source(source)?;
    Credential::new(id, spec, value).map(Arc::new)
}

impl SecretStore {
    /// Reads every value the policy names.
    pub fn load(policy: &Policy) -> SecretStore {
        let entries = policy
            .secrets
            .iter()
            .map(|(id, spec)| {
                let shared = spec.value.as_deref().map(|v| resolve_one(id, spec, v));
                let tenants = spec
                    .tenants
                    .iter()
                    .map(|(t, v)| (t.clone(), resolve_one(id, spec, v)))
                    .collect();
                (id.clone(), Entry { shared, tenants })
            })
            .collect();
        SecretStore { entries }
    }

    /// Values that could not be read, for a warning at start.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (id, e) in &self.entries {
            if let Some(Err(why)) = &e.shared {
                out.push(format!("secrets.{id}.value: {why}"));
            }
            for (t, r) in &e.tenants {
                if let Err(why) = r {
                    out.push(format!("secrets.{id}.tenants.{t}: {why}"));
                }
            }
        }
        out
    }

    /// The credentials of one invocation of the node `type_id` of the pack
    /// `manifest` describes, for `tenant`: the node's declared secrets
    /// that `policy` grants the pack, each resolved; or the first one that
    /// is not available. A JavaScript pack declares none: each of its
    /// nodes may have what the operator granted the pack (it asks for one
    /// by id at run time, `ctx.secrets.resolve`). An unknown node has none.
    pub fn for_node(
        &self,
        manifest: &Manifest,
        type_id: &str,
        policy: &Policy,
        tenant: &str,
    ) -> Result<Credentials, Unavailable> {
        let Some(node) = manifest.nodes.iter().find(|n| n.type_id == type_id) else {
            return Ok(Credentials::default());
        };
        let granted = policy
            .packs
            .get(&manifest.name)
            .map_or(&[][..], |g| g.secrets.as_slice());
        let derived: Vec<SecretRequirement>;
        let reqs = if node.requires_secrets.is_empty()
            && manifest.runtime.language == Language::Javascript
        {
            derived = granted
                .iter()
                .map(|id| SecretRequirement::granted(id))
                .collect();
            &derived
        } else {
            &node.requires_secrets
        };
        self.resolve(&manifest.name, granted, reqs, tenant)
    }

    /// The credentials of one invocation of a node of `pack` declaring
    /// `reqs`, for `tenant`, or the first one that is not available.
    fn resolve(
        &self,
        pack: &str,
        granted: &[String],
        reqs: &[SecretRequirement],
        tenant: &str,
    ) -> Result<Credentials, Unavailable> {
        if reqs.is_empty() {
            return Ok(Credentials::default());
        }
        let mut list = Vec::with_capacity(reqs.len());
        for r in reqs {
            let id = r.id.as_str();
            let unavailable = |message: String| Unavailable {
                secret: id.to_owned(),
                message,
            };
            if !granted.iter().any(|g| g == id) {
                return Err(unavailable(format!(
                    "the node needs secret `{id}`, which the operator has not granted to pack \
                     `{pack}` (add it to `secrets` in {}, the policy given with --policy)",
                    wop_core::error::packs_table(pack)
                )));
            }
            let Some(entry) = self.entries.get(id) else {
                return Err(unavailable(format!(
                    "the node needs secret `{id}`, and the operator policy has no [secrets.{id}]"
                )));
            };
            let resolved = match (r.scope, entry.tenants.get(tenant)) {
                (Some(s @ (SecretScope::User | SecretScope::Run)), _) => {
                    return Err(unavailable(format!(
                        "the node needs a per-{} value of secret `{id}`; this host provides \
                         operator and per-tenant values only",
                        s.as_str()
                    )));
                }
                (_, Some(per_tenant)) => per_tenant,
                (Some(SecretScope::Tenant), None) => {
                    return Err(unavailable(format!(
                        "the node needs a per-tenant value of secret `{id}`, and there is none \
                         for this tenant (add it under [secrets.{id}.tenants])"
                    )));
                }
                (None, None) => match &entry.shared {
                    Some(r) => r,
                    None => {
                        return Err(unavailable(format!(
                            "secret `{id}` has no value for this tenant (its [secrets.{id}] has \
                             per-tenant values only)"
                        )));
                    }
                },
            };
            match resolved {
                Ok(c) => list.push(c.clone()),
                Err(why) => {
                    return Err(unavailable(format!("secret `{id}` is not usable: {why}")));
                }
            }
        }
        Ok(Credentials::new(list))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wop_core::secrets::SecretKind;

    fn req(id: &str, scope: Option<SecretScope>) -> SecretRequirement {
        SecretRequirement {
            id: id.to_owned(),
            kind: SecretKind::ApiKey,
            provider: None,
            scope,
        }
    }

    #[test]
    fn resolution_follows_grant_configuration_tenant_and_scope() {
        let policy = Policy::from_toml(
            "[secrets.shared]\nvalue = \"shared-value-123\"\naudiences = [\"a.example\"]\n\
             [secrets.per]\ntenants = { acme = \"acme-value-123\" }\naudiences = [\"a.example\"]\n\
             [secrets.gone]\nvalue = \"file:/definitely/not/here\"\naudiences = [\"a.example\"]\n",
        )
        .unwrap();
        let store = SecretStore::load(&policy);
        let all: Vec<String> = ["shared", "per", "gone"].map(String::from).to_vec();
        let ok = |reqs: &[SecretRequirement], tenant: &str| {
            store
                .resolve("p", &all, reqs, tenant)
                .map(|c| c.iter().map(|c| c.id().to_owned()).collect::<Vec<_>>())
        };
        assert_eq!(ok(&[req("shared", None)], "x").unwrap(), ["shared"]);
        assert_eq!(
            ok(&[req("per", Some(SecretScope::Tenant))], "acme").unwrap(),
            ["per"]
        );
        let why = |reqs: &[SecretRequirement], tenant: &str| ok(reqs, tenant).unwrap_err().message;
        assert!(
            why(&[req("per", Some(SecretScope::Tenant))], "globex")
                .contains("[secrets.per.tenants]")
        );
        assert!(why(&[req("per", None)], "globex").contains("per-tenant values only"));
        // A per-user secret is never served a tenant's value.
        assert!(why(&[req("per", Some(SecretScope::User))], "acme").contains("per-user"));
        let e = store
            .resolve("p", &["nope".to_owned()], &[req("nope", None)], "acme")
            .unwrap_err();
        assert!(e.message.contains("no [secrets.nope]"), "{}", e.message);
        let e = store
            .resolve("p", &[], &[req("shared", None)], "x")
            .unwrap_err();
        assert!(e.message.contains("has not granted"), "{}", e.message);
        let e = why(&[req("gone", None)], "x");
        assert!(
            e.contains("is not usable: cannot open /definitely/not/here"),
            "{e}"
        );
        assert_eq!(store.problems().len(), 1);
        // Nothing declared: nothing resolved, nothing read.
        assert!(ok(&[], "x").unwrap().is_empty());
        // No message carries a value.
        for m in store.problems() {
            assert!(!m.contains("value-123"), "{m}");
        }
    }
}
