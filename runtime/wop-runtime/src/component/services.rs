//! The host services of the protocol's JavaScript `ctx` (`ctx.callAI`,
//! `ctx.db.sql.query`, …), as the operator mapped them to tools
//! (`[packs."<name>"] services`). The engine calls them as the tool
//! `service:<name>` with the JSON array of the call's arguments; this table
//! turns that into the mapped tool and its arguments, or says which policy
//! line would map it. The mapping was decided at load; this only looks up.

use std::collections::BTreeMap;

/// The tool id prefix the JavaScript engine gives a host service.
pub(crate) const PREFIX: &str = "service:";

/// `ctx.secrets.resolve`: not mapped to a tool; the gate session answers
/// it with an opaque handle (`wop_core::secrets::handle`).
pub(crate) const SECRETS_RESOLVE: &str = "service:secrets.resolve";

/// `ctx.triggerData`: not mapped to a tool; the host answers with the
/// run's trigger payload from the invocation (`null` when it has none).
pub(crate) const RUN_TRIGGER_DATA: &str = "service:run.triggerData";

/// Which services exist in this pack's `ctx`: the host answers with the
/// JSON array of the mapped names, so an unmapped service is absent (as on
/// a reference host without it) and a pack's feature detection works.
pub(crate) const RUN_SERVICES: &str = "service:run.services";

/// One pack's service → tool table.
#[derive(Debug, Default)]
pub(crate) struct Services {
    pack: String,
    map: BTreeMap<String, String>,
    /// The mapped names as a JSON array (the answer to `run.services`).
    names: String,
}

impl Services {
    pub(crate) fn new(pack: &str, map: BTreeMap<String, String>) -> Self {
        let names = serde_json::Value::from(map.keys().cloned().collect::<Vec<_>>()).to_string();
        Self {
            pack: pack.to_owned(),
            map,
            names,
        }
    }

    /// The mapped service names, as a JSON array.
    pub(crate) fn names_json(&self) -> &str {
        if self.names.is_empty() {
            "[]"
        } else {
            &self.names
        }
    }

    /// The mapped tool ids (declared and granted for the pack).
    pub(crate) fn tools(&self) -> impl Iterator<Item = &String> {
        self.map.values()
    }

    /// The tool for `service`, or a message naming the line that maps it.
    pub(crate) fn resolve(&self, service: &str) -> Result<&str, String> {
        match self.map.get(service) {
            Some(t) => Ok(t),
            None => {
                let shown = wop_core::logbuf::cut(service, 64);
                Err(format!(
                    "ctx.{shown} is a host service of the reference engine that this host provides only through a tool the operator maps; add under [packs.\"{}\"] in the policy: services = {{ \"{shown}\" = \"<tool id>\" }} (and capabilities = [\"tools\"])",
                    self.pack
                ))
            }
        }
    }
}

/// A service call's arguments (the JSON array of what the pack passed) as
/// the tool's: the one object when there is exactly one, else `{"args": […]}`.
pub(crate) fn arguments(args: serde_json::Value) -> serde_json::Value {
    match args {
        serde_json::Value::Array(mut a) if a.len() == 1 && a[0].is_object() => a.remove(0),
        other => serde_json::json!({ "args": other }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn mapped_unmapped_and_arguments() {
        let s = Services::new(
            "core.ai",
            BTreeMap::from([("callAI".to_owned(), "acme.llm".to_owned())]),
        );
        assert_eq!(s.resolve("callAI"), Ok("acme.llm"));
        let e = s.resolve("db.sql.query").unwrap_err();
        assert!(
            e.contains("[packs.\"core.ai\"]") && e.contains("\"db.sql.query\" = \"<tool id>\""),
            "{e}"
        );
        assert_eq!(
            arguments(json!([{"prompt": "hi"}])),
            json!({"prompt": "hi"})
        );
        assert_eq!(arguments(json!(["a", 2])), json!({"args": ["a", 2]}));
        assert_eq!(arguments(json!([])), json!({"args": []}));
    }
}
