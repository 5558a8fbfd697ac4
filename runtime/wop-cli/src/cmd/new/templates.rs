//! The text of every file `wop new` writes: the manifest, the `hello`
//! node in each language, the Rust crate's `Cargo.toml`, `build.sh` and the
//! README.

use super::{File, Lang, sh_quote, toml_string};
use crate::common::{Failure, usage};
use std::path::Path;

/// The protocol's own JavaScript pack format (what the registry's packs
/// are): no `x-wop`, no build step; `wop` builds the component itself.
fn manifest_js(name: &str) -> Result<String, Failure> {
    let doc = serde_json::json!({
        "kind": "node",
        "name": name,
        "version": "0.1.0",
        "description": "Greets inputs.name (default \"world\") and logs the greeting. (JavaScript pack scaffolded by `wop new`.)",
        "license": "Apache-2.0",
        "engines": { "openwop": ">=1.0.0" },
        "runtime": { "language": "javascript", "format": "esm", "entry": "./index.mjs" },
        "nodes": [{
            "typeId": format!("{name}.hello"),
            "version": "0.1.0",
            "label": "Hello",
            "category": "transform",
            "role": "worker",
            "description": "Greets inputs.name (default \"world\") and logs the greeting.",
            "inputSchemaRef": "schemas/hello.input.json"
        }]
    });
    Ok(serde_json::to_string_pretty(&doc)? + "\n")
}

pub(super) fn manifest(lang: Lang, name: &str) -> Result<String, Failure> {
    if lang == Lang::Js {
        return manifest_js(name);
    }
    let doc = serde_json::json!({
        "kind": "node",
        "name": name,
        "version": "0.1.0",
        "description": format!("Greets inputs.name (default \"world\") and logs the greeting. ({} pack scaffolded by `wop new`.)", lang.title()),
        "engines": { "openwop": ">=1.0.0" },
        "nodes": [{
            "typeId": format!("{name}.hello"),
            "version": "0.1.0",
            "category": "transform",
            "role": "worker",
            "description": "Greets inputs.name (default \"world\") and logs the greeting."
        }],
        "runtime": {
            "language": "wasm-component",
            "entry": format!("{name}.wasm"),
            "format": "wasm-component"
        },
        "x-wop": { "sha256": "", "capabilities": ["log"], "tools": [] }
    });
    Ok(serde_json::to_string_pretty(&doc)? + "\n")
}

pub(super) fn source(lang: Lang, name: &str) -> Vec<File> {
    let type_id = format!("{name}.hello");
    match lang {
        Lang::Js => vec![
            File::new(
                "index.mjs",
                format!(
                    r#"// `{type_id}`: greets `inputs.name` (default "world") and logs the
// greeting. The protocol's JavaScript pack format: this file runs as it is
// under `wop` (built into a sandboxed, metered component) and under the
// protocol's reference engine. `ctx` reference: sdk/js/README.md.

export async function hello(ctx) {{
  const name = ctx.inputs?.name ?? 'world';
  ctx.log.info('greeting', {{ name }});
  return {{ status: 'success', outputs: {{ greeting: `Hello, ${{name}}!` }} }};
}}

export const nodes = {{ '{type_id}': hello }};
export default nodes;
"#
                ),
            ),
            File::new(
                "schemas/hello.input.json",
                r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "HelloInput",
  "type": "object",
  "properties": {
    "name": { "type": "string", "minLength": 1, "maxLength": 200 }
  },
  "additionalProperties": false
}
"#
                .to_owned(),
            ),
        ],
        Lang::Python => vec![File::new(
            "pack.py",
            format!(
                r#""""`{type_id}`: greets `inputs.name` (default "world") and logs the
greeting at info level. SDK reference: sdk/python/README.md."""

from wop_sdk import Ctx, NodeError, Outcome, Request


def invoke(ctx: Ctx, request: Request) -> Outcome:
    inputs = request.inputs
    if not isinstance(inputs, dict):
        raise NodeError.validation("invalid inputs: expected an object")
    name = inputs.get("name")
    if name is None:
        name = "world"
    if not isinstance(name, str):
        raise NodeError.validation("invalid inputs: `name` must be a string")
    ctx.log.info("greeting", {{"name": name}})
    return Outcome.completed({{"greeting": f"Hello, {{name}}!"}})
"#
            ),
        )],
        Lang::C => vec![File::new(
            "pack.c",
            format!(
                r#"/* `{type_id}`: greets `inputs.name` (default "world") and logs the
 * greeting at info level. SDK reference: sdk/c/README.md. */
#include "wop.h"

bool wop_invoke(const wop_ctx_t *ctx, const wop_request_t *req, wop_outcome_t *out, wop_error_t *err) {{
    if (req->inputs->kind != WOP_JSON_OBJECT) {{
        return wop_error_validation(err, "invalid inputs: expected an object");
    }}
    const wop_json_t *name_v = wop_json_get(req->inputs, "name");
    const char *name = "world";
    if (name_v && !wop_json_is_null(name_v)) {{
        name = wop_json_string(name_v);
        if (!name) return wop_error_validation(err, "invalid inputs: `name` must be a string");
    }}

    wop_buf_t fields = {{0}};
    wop_buf_puts(&fields, "{{\"name\":");
    wop_buf_json_string(&fields, name);
    wop_buf_puts(&fields, "}}");
    wop_log_info(ctx, "greeting", wop_buf_str(&fields));

    wop_buf_t greeting = {{0}};
    wop_buf_printf(&greeting, "Hello, %s!", name);
    wop_buf_t output = {{0}};
    wop_buf_puts(&output, "{{\"greeting\":");
    wop_buf_json_string(&output, wop_buf_str(&greeting));
    wop_buf_puts(&output, "}}");
    return wop_completed(out, wop_buf_str(&output));
}}
"#
            ),
        )],
        Lang::Rust => vec![File::new(
            "src/lib.rs",
            format!(
                r#"//! `{type_id}`: greets `inputs.name` (default "world") and logs the
//! greeting at info level. SDK reference: sdk/rust (`wop-sdk`).

use serde_json::{{Value, json}};
use wop_sdk::{{Ctx, NodeError, Outcome, Pack, PackInfo, Request}};

/// The pack.
struct Hello;

impl Pack for Hello {{
    fn describe() -> PackInfo {{
        PackInfo::new("{name}", "0.1.0").node("{type_id}", "0.1.0")
    }}

    fn invoke(ctx: &Ctx, request: Request) -> Result<Outcome, NodeError> {{
        let Value::Object(inputs) = &request.inputs else {{
            return Err(NodeError::validation("invalid inputs: expected an object"));
        }};
        let name = match inputs.get("name") {{
            None | Some(Value::Null) => "world",
            Some(Value::String(s)) => s.as_str(),
            Some(_) => {{
                return Err(NodeError::validation(
                    "invalid inputs: `name` must be a string",
                ));
            }}
        }};
        ctx.log().info_with("greeting", &json!({{ "name": name }}));
        Outcome::completed(json!({{ "greeting": format!("Hello, {{name}}!") }}))
    }}
}}

wop_sdk::export_pack!(Hello);
"#
            ),
        )],
    }
}

/// `Cargo.toml` of a Rust scaffold: its own workspace, `wop-sdk` by path.
pub(super) fn cargo_toml(name: &str, repo: Option<&Path>) -> Result<String, Failure> {
    let sdk = match repo {
        Some(r) => {
            let p = r.join("sdk").join("rust");
            let s = p.to_str().ok_or_else(|| {
                usage(anyhow::anyhow!(
                    "the repository path {} is not UTF-8",
                    p.display()
                ))
            })?;
            format!("wop-sdk = {{ path = {} }}", toml_string(s))
        }
        None => "# Point this at sdk/rust in your wop checkout.\nwop-sdk = { path = \"../wop/sdk/rust\" }"
            .to_owned(),
    };
    Ok(format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"
publish = false

[lib]
crate-type = ["cdylib"]

[dependencies]
{sdk}
serde_json = "1"

[profile.release]
opt-level = "s"
strip = true

# A workspace of its own, even when created inside another one.
[workspace]
"#
    ))
}

pub(super) fn build_script(lang: Lang, name: &str, repo: Option<&str>) -> String {
    let repo_default = repo.map(sh_quote).unwrap_or_else(|| "''".to_owned());
    let head = format!(
        r#"#!/usr/bin/env bash
# Build this pack: ./build.sh [out-dir]    (default: dist next to this script)
# Result: <out-dir>/{name}/ -- the component and pack.json with x-wop.sha256,
# assembled by `wop pack`. Environment: WOP=/path/to/wop (else `wop` on PATH).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${{1:-$here/dist}}"
"#
    );
    match lang {
        Lang::Rust => format!(
            r#"{head}# cargo build for wasm32-wasip2 (rustup target add wasm32-wasip2), then wop pack.
# The wop CLI: $WOP, else `wop` on PATH, else one built in the wop checkout.
default_repo={repo_default}
repo="${{WOP_REPO:-$default_repo}}"
wop="${{WOP:-}}"
if [[ -z "$wop" ]]; then
  if command -v wop >/dev/null 2>&1; then
    wop=wop
  else
    for c in "$repo/target/release/wop" "$repo/target/debug/wop"; do
      if [[ -n "$repo" && -x "$c" ]]; then wop="$c"; break; fi
    done
  fi
fi
[[ -n "$wop" ]] || {{
  echo "error: the wop CLI was not found: put it on PATH, set WOP=/path/to/wop, or build it in your wop checkout (cargo build -p wop-cli)" >&2
  exit 2
}}
target="${{CARGO_TARGET_DIR:-$here/target}}"
# The wasm target for the toolchain this directory builds with (rustup does
# not add it by itself, e.g. where RUSTUP_AUTO_INSTALL=0).
if command -v rustup >/dev/null 2>&1 \
  && ! (cd "$here" && rustup target list --installed) | grep -qx wasm32-wasip2; then
  echo "build.sh: adding the wasm32-wasip2 target to $(cd "$here" && rustup show active-toolchain | cut -d' ' -f1)" >&2
  (cd "$here" && rustup target add wasm32-wasip2)
fi
(cd "$here" && cargo build --release --target wasm32-wasip2)
"$wop" pack "$here" --wasm "$target/wasm32-wasip2/release/{crate_file}.wasm" --out "$out"
"#,
            crate_file = name.replace('-', "_"),
        ),
        _ => format!(
            r#"{head}# The wop repository's one-command build for {title} (WOP_REPO overrides
# where that repository is; sdk/install-toolchains.sh {lang} installs the toolchain).
default_repo={repo_default}
repo="${{WOP_REPO:-$default_repo}}"
[[ -n "$repo" && -x "$repo/sdk/{lang}/build.sh" ]] || {{
  echo "error: set WOP_REPO to your wop checkout (it holds sdk/{lang}/build.sh)" >&2
  exit 2
}}
exec "$repo/sdk/{lang}/build.sh" "$here" "$out"
"#,
            title = lang.title(),
            lang = lang.id(),
        ),
    }
}

pub(super) fn readme_js(name: &str) -> String {
    format!(
        r#"# {name}

A JavaScript OpenWOP node pack in the protocol's own format, scaffolded by
`wop new js {name}`. One node, `{name}.hello`, greets `inputs.name`
(default "world") and logs the greeting. The same files run under `wop`
(sandboxed and metered) and under the protocol's reference engine.

- `pack.json` — the manifest (`runtime.language: javascript`, entry
  `./index.mjs`); no build step and no `x-wop` block.
- `index.mjs` — the nodes, `export const nodes = {{ '<typeId>': async (ctx) => … }}`.
- `schemas/hello.input.json` — the node's input schema, checked by the host
  before the node runs.

## Run

```sh
wop run {name} {name}.hello --input '{{"name":"Ada"}}'
# completed  output: {{"greeting":"Hello, Ada!"}}
wop inspect {name}    # the capabilities its code can reach, before any grant
```

`wop` builds the pack into a WebAssembly component on first use (cached by
build id). What the code may reach (`fetch`, `ctx.mcp`, host services,
`ctx.secrets`) the operator grants in the policy (`[packs."{name}"]`).

## Publish

```sh
wop sign {name} --key <your key>     # optional: a publisher signature
wop pack {name} --tgz --out dist     # builds it as install will, then dist/{name}-0.1.0.tgz
```

Reference: the `wop` README, "The registry's JavaScript packs".
"#
    )
}

pub(super) fn readme(lang: Lang, name: &str, repo: Option<&str>) -> String {
    let repo_txt = repo.unwrap_or("<your wop checkout>");
    let (files, toolchain, sdk_doc) = match lang {
        Lang::Rust => (
            "`Cargo.toml`, `src/lib.rs`",
            "`rustup target add wasm32-wasip2`".to_owned(),
            format!("{repo_txt}/README.md (\"Write your first pack in five minutes\")"),
        ),
        Lang::Js => (
            "`pack.js`",
            format!("`{repo_txt}/sdk/install-toolchains.sh js`"),
            format!("{repo_txt}/sdk/js/README.md"),
        ),
        Lang::Python => (
            "`pack.py`",
            format!("`{repo_txt}/sdk/install-toolchains.sh python`"),
            format!("{repo_txt}/sdk/python/README.md"),
        ),
        Lang::C => (
            "`pack.c`",
            format!("`{repo_txt}/sdk/install-toolchains.sh c`"),
            format!("{repo_txt}/sdk/c/README.md"),
        ),
    };
    let how = match lang {
        Lang::Rust => "`cargo build --release --target wasm32-wasip2`, then `wop pack`".to_owned(),
        _ => format!(
            "`{repo_txt}/sdk/{}/build.sh` (set `WOP_REPO` to use another checkout)",
            lang.id()
        ),
    };
    format!(
        r#"# {name}

A {title} OpenWOP node pack, scaffolded by `wop new {lang} {name}`. One node,
`{name}.hello`, greets `inputs.name` (default "world") and logs the greeting.

- `pack.json` — the manifest. `x-wop.capabilities` lists the host interfaces
  the pack may use (`log` here; add `clock`, `random`, `tools`, `http`, `mcp`
  as you use them — the operator must also grant them).
- {files} — the node.
- `build.sh` — the one-command build: {how}.

## Build and run

Toolchain (once): {toolchain}. The `wop` CLI on `PATH`, or `WOP=/path/to/wop`.

```sh
./build.sh    # -> dist/{name}/ (component + pack.json with its sha256)
wop inspect dist/{name}    # what the component imports, what the runtime grants
wop run dist/{name} {name}.hello --input '{{"name":"Ada"}}'
# completed  output: {{"greeting":"Hello, Ada!"}}
```

SDK reference: {sdk_doc}.
"#,
        title = lang.title(),
        lang = lang.id(),
    )
}
