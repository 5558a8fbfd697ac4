//! The host services of the protocol's JavaScript `ctx` (`callAI`,
//! `db.sql.query`, …) that a pack's code names. Each is reachable only
//! when the operator maps it to a tool; `wop inspect` shows which are.
//! The names are the prelude's own list (`engine/js/prelude_ctx.js`), so
//! this and the engine never disagree.

use crate::Source;
use std::sync::OnceLock;

/// The prelude file that declares `const SERVICES = [ … ];`.
const PRELUDE_CTX: &str = include_str!("../engine/js/prelude_ctx.js");

/// Every host service name the engine knows, in the prelude's order.
pub fn service_names() -> &'static [&'static str] {
    static NAMES: OnceLock<Vec<&'static str>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let Some(start) = PRELUDE_CTX.find("const SERVICES = [") else {
            return Vec::new();
        };
        let body = &PRELUDE_CTX[start..];
        let body = &body[..body.find("];").unwrap_or(body.len())];
        body.split('\'').skip(1).step_by(2).collect()
    })
}

/// The services the pack's code names, read from its source text (`?.`
/// read as `.`): `.callAI(` names `callAI`, `.callAI.embeddings(` names
/// `callAI.embeddings` only. A name on a branch never taken is listed too.
pub fn referenced_services(source: &Source) -> Vec<&'static str> {
    let texts: Vec<String> = source
        .files
        .values()
        .map(|s| s.replace("?.", "."))
        .collect();
    service_names()
        .iter()
        .copied()
        .filter(|name| {
            let needle = format!(".{name}");
            texts.iter().any(|t| {
                t.match_indices(&needle).any(|(at, _)| {
                    let next = t[at + needle.len()..].chars().next();
                    !next.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == '.')
                })
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(text: &str) -> Source {
        let mut s = Source::new("./index.mjs");
        s.add("index.mjs", text.as_bytes().to_vec()).unwrap();
        s
    }

    #[test]
    fn the_prelude_list_is_read() {
        let names = service_names();
        assert!(names.len() > 100, "{names:?}");
        assert!(names.contains(&"callAI") && names.contains(&"db.sql.query"));
    }

    #[test]
    fn named_services_are_found_and_prefixes_are_not() {
        let s = src(
            "export async function a(ctx) { if (typeof ctx.callAI !== 'function') throw 1; \
             await ctx?.db?.sql?.query('x'); return ctx.callAI.embeddings([]); }\n\
             const o = { callAIx: 1 }; o.storage.blob.getter;",
        );
        assert_eq!(
            referenced_services(&s),
            vec!["callAI", "callAI.embeddings", "db.sql.query"]
        );
        assert!(referenced_services(&src("export const nodes = {};")).is_empty());
    }
}
