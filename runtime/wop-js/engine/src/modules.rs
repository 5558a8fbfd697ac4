//! Module resolution: relative modules inside the pack and the shimmed
//! `node:*` modules — nothing else, at build time or (`import()`) at run
//! time. Every source that can ever load is in the bundle or in this file.

use rquickjs::loader::{ImportAttributes, Loader, Resolver};
use rquickjs::module::Declared;
use rquickjs::{Ctx, Error, Module, Result};
use std::collections::BTreeMap;
use std::rc::Rc;

/// The `node:*` modules the prelude provides (specifier → source).
const NODE_MODULES: &[(&str, &str)] = &[
    ("node:crypto", include_str!("../js/node_crypto.mjs")),
    (
        "node:dns/promises",
        include_str!("../js/node_dns_promises.mjs"),
    ),
];

/// Bare names Node resolves to the same modules.
const ALIASES: &[(&str, &str)] = &[
    ("crypto", "node:crypto"),
    ("dns/promises", "node:dns/promises"),
];

/// Shared between resolver and loader: the pack's files.
#[derive(Clone)]
pub(crate) struct PackModules {
    files: Rc<BTreeMap<String, String>>,
}

impl PackModules {
    pub(crate) fn new(files: BTreeMap<String, String>) -> Self {
        Self {
            files: Rc::new(files),
        }
    }

    fn refuse(&self, name: &str, why: String) -> Error {
        Error::new_resolving_message("", name, why)
    }
}

fn shimmed_list() -> String {
    NODE_MODULES
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Joins `rel` onto the directory of `base`, refusing to leave the pack.
fn join(base: &str, rel: &str) -> Option<String> {
    let mut parts: Vec<&str> = base.split('/').collect();
    parts.pop();
    for seg in rel.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            s => parts.push(s),
        }
    }
    Some(parts.join("/"))
}

impl Resolver for PackModules {
    fn resolve<'js>(
        &mut self,
        _ctx: &Ctx<'js>,
        base: &str,
        name: &str,
        _attributes: Option<ImportAttributes<'js>>,
    ) -> Result<String> {
        if let Some((_, to)) = ALIASES.iter().find(|(from, _)| *from == name) {
            return Ok((*to).to_owned());
        }
        if NODE_MODULES.iter().any(|(n, _)| *n == name) {
            return Ok(name.to_owned());
        }
        if name.starts_with("./") || name.starts_with("../") {
            if let Some(path) = join(base, name)
                && self.files.contains_key(&path)
            {
                return Ok(path);
            }
            return Err(self.refuse(
                name,
                format!(
                    "js_import_not_allowed: `{name}` (imported by {base}) is not a file inside the pack (a pack imports its own modules and {})",
                    shimmed_list()
                ),
            ));
        }
        Err(self.refuse(
            name,
            format!(
                "js_import_not_allowed: `{name}` (imported by {base}) is neither a relative module inside the pack nor one of the modules this sandbox provides ({})",
                shimmed_list()
            ),
        ))
    }
}

impl Loader for PackModules {
    fn load<'js>(
        &mut self,
        ctx: &Ctx<'js>,
        name: &str,
        _attributes: Option<ImportAttributes<'js>>,
    ) -> Result<Module<'js, Declared>> {
        if let Some((_, src)) = NODE_MODULES.iter().find(|(n, _)| *n == name) {
            return Module::declare(ctx.clone(), name, *src);
        }
        match self.files.get(name) {
            Some(src) => Module::declare(ctx.clone(), name, src.as_str()),
            None => Err(Error::new_loading_message(
                name,
                "js_import_not_allowed: not a file inside the pack",
            )),
        }
    }
}
