//! Build time: load the bundle, the prelude and the pack.
//! A failure prints one line `wop-js-init-error: <code>: <message>` on
//! stderr (which `wop` turns into its error) and aborts.

use crate::bundle::Bundle;
use crate::exports::openwop::node_pack::node::{NodeInfo, PackInfo};
use crate::modules::PackModules;
use crate::state::{self, State};
use rquickjs::{CaughtError, Context, Ctx, Function, Module, Object, Persistent, Runtime, Value};
use std::io::Read;

include!(concat!(env!("OUT_DIR"), "/prelude.rs"));

/// QuickJS's own stack limit, below the 1 MiB wasm shadow stack, so deep
/// recursion is a catchable `RangeError` instead of a trap.
const MAX_STACK: usize = 512 * 1024;

/// Bytes an invocation may allocate before QuickJS's first collection.
const GC_HEADROOM: usize = 8 << 20;

pub(crate) fn run() {
    if let Err(msg) = load() {
        eprintln!("wop-js-init-error: {msg}");
        std::process::abort();
    }
}

/// `code: message` from a caught JavaScript error, with its position.
fn describe(code: &str, what: &str, e: CaughtError<'_>) -> String {
    match e {
        CaughtError::Exception(ex) => {
            let file = ex.get::<_, Option<String>>("fileName").ok().flatten();
            let line = ex.get::<_, Option<i32>>("lineNumber").ok().flatten();
            let at = match (file, line, ex.stack().as_deref().and_then(first_frame)) {
                (Some(f), Some(l), _) => format!(" at {f}:{l}"),
                (_, _, Some(frame)) => format!(" at {frame}"),
                (Some(f), None, None) => format!(" at {f}"),
                _ => String::new(),
            };
            let msg = ex.message().unwrap_or_default();
            // The resolver's refusals carry their own code.
            if let Some(rest) = msg.find("js_import_not_allowed: ").map(|i| &msg[i..]) {
                return format!("{rest}{at}");
            }
            format!("{code}: {what}{at}: {msg}")
        }
        CaughtError::Value(v) => format!("{code}: {what}: threw {v:?}"),
        CaughtError::Error(e) => {
            let s = e.to_string();
            match s.find("js_import_not_allowed: ") {
                Some(i) => s[i..].to_owned(),
                None => format!("{code}: {what}: {s}"),
            }
        }
    }
}

/// `file:line:column` of the first frame of a QuickJS stack
/// (`    at index.mjs:3:13` or `    at f (index.mjs:3:13)`).
fn first_frame(stack: &str) -> Option<String> {
    let line = stack
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("at "))?;
    let frame = line
        .rsplit_once('(')
        .map_or(&line[3..], |(_, r)| r.trim_end_matches(')'));
    Some(frame.to_owned())
}

fn load() -> Result<(), String> {
    let mut input = Vec::new();
    std::io::stdin()
        .read_to_end(&mut input)
        .map_err(|e| format!("js_bundle_invalid: cannot read the bundle: {e}"))?;
    let bundle = Bundle::parse(&input).map_err(|e| format!("js_bundle_invalid: {e}"))?;
    let runtime = Runtime::new().map_err(|e| format!("js_engine_failed: {e}"))?;
    runtime.set_max_stack_size(MAX_STACK);
    let modules = PackModules::new(bundle.files.clone());
    runtime.set_loader(modules.clone(), modules);
    let context = Context::full(&runtime).map_err(|e| format!("js_engine_failed: {e}"))?;
    let internal = context.with(|ctx| load_pack(&ctx, &bundle))?;
    // Collect once now, and let an invocation allocate GC_HEADROOM more
    // before the first collection: every instance starts from this heap,
    // so a collection due right after the snapshot would run on every call.
    runtime.run_gc();
    let used = usize::try_from(runtime.memory_usage().malloc_size).unwrap_or(0);
    runtime.set_gc_threshold(used + GC_HEADROOM);
    state::set(State {
        runtime,
        context,
        internal,
        info: PackInfo {
            name: bundle.name,
            version: bundle.version,
            nodes: bundle
                .nodes
                .into_iter()
                .map(|(type_id, version)| NodeInfo { type_id, version })
                .collect(),
        },
    });
    Ok(())
}

fn caught<'js, T>(ctx: &Ctx<'js>, r: rquickjs::Result<T>) -> Result<T, CaughtError<'js>> {
    rquickjs::CatchResultExt::catch(r, ctx)
}

fn load_pack(ctx: &Ctx<'_>, bundle: &Bundle) -> Result<Persistent<Object<'static>>, String> {
    let internal = crate::native::install(ctx).map_err(|e| format!("js_engine_failed: {e}"))?;
    ctx.globals()
        .set("__wop", internal.clone())
        .map_err(|e| format!("js_engine_failed: {e}"))?;
    for (name, src) in PRELUDE {
        let mut opts = rquickjs::context::EvalOptions::default();
        opts.global = true;
        opts.strict = false;
        opts.filename = Some((*name).to_owned());
        caught(ctx, ctx.eval_with_options::<Value, _>(*src, opts))
            .map_err(|e| describe("js_prelude_failed", name, e))?;
    }
    // Before the pack's own code runs (the prelude's intrinsics are still
    // its own): whether the source names any host service at all.
    let note: Function = internal
        .get("noteSource")
        .map_err(|e| format!("js_prelude_failed: no noteSource: {e}"))?;
    for src in bundle.files.values() {
        caught(ctx, note.call::<_, ()>((src.as_str(),)))
            .map_err(|e| describe("js_prelude_failed", "noteSource", e))?;
    }
    let entry = &bundle.entry;
    let src = bundle
        .files
        .get(entry)
        .ok_or_else(|| format!("js_bundle_invalid: the entry `{entry}` is not in the pack"))?;
    let declared = caught(
        ctx,
        Module::declare(ctx.clone(), entry.as_str(), src.as_str()),
    )
    .map_err(|e| describe("js_syntax_error", entry, e))?;
    let (module, done) =
        caught(ctx, declared.eval()).map_err(|e| describe("js_module_failed", entry, e))?;
    caught(ctx, done.finish::<()>()).map_err(|e| describe("js_module_failed", entry, e))?;
    let ns = caught(ctx, module.namespace()).map_err(|e| describe("js_module_failed", entry, e))?;
    let set_pack: Function = internal
        .get("setPack")
        .map_err(|e| format!("js_prelude_failed: no setPack: {e}"))?;
    caught(ctx, set_pack.call::<_, Value>((ns.clone(),)))
        .map_err(|e| describe("js_no_node_exports", entry, e))?;
    check_exports(ctx, &internal, &ns, bundle)?;
    Ok(Persistent::save(ctx, internal))
}

/// Every node the manifest declares must have a handler, by the prelude's
/// own lookup (`hasHandler(typeId)`).
fn check_exports(
    ctx: &Ctx<'_>,
    internal: &Object<'_>,
    _ns: &Object<'_>,
    bundle: &Bundle,
) -> Result<(), String> {
    let Ok(has) = internal.get::<_, Function>("hasHandler") else {
        return Ok(());
    };
    let missing: Vec<&str> = bundle
        .nodes
        .iter()
        .filter(|(t, _)| !matches!(caught(ctx, has.call::<_, bool>((t.as_str(),))), Ok(true)))
        .map(|(t, _)| t.as_str())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(format!(
        "js_node_not_exported: the manifest declares {} that {} does not export ({}); export them as `export const nodes = {{ \"<typeId>\": handler }}`",
        if missing.len() == 1 {
            "a node"
        } else {
            "nodes"
        },
        bundle.entry,
        missing.join(", ")
    ))
}
