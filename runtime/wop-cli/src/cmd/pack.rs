//! `wop pack`: assemble a runnable pack directory from a pack.json template
//! and a built component (copies the component, fills in `x-wop.sha256`);
//! or, for a JavaScript pack in the protocol's format, build its component
//! exactly as `wop install` will (the source is the pack: nothing to copy).
//! `--tgz` writes the protocol's archive.

use crate::common::{Failure, exit, rejected, usage};
use crate::output;
use anyhow::Context;
use clap::Args;
use serde_json::Value;
use std::path::PathBuf;
use wop_runtime::{Runtime, RuntimeConfig};

/// `wop pack` arguments.
#[derive(Args)]
pub(crate) struct PackArgs {
    /// The pack's source directory, holding the pack.json template.
    pub(crate) src: PathBuf,
    /// The built component, e.g. target/wasm32-wasip2/release/my_pack.wasm.
    /// Without it, a JavaScript pack (`runtime.language: javascript`) is
    /// built as install builds it; any other `src` is an assembled pack
    /// directory to archive (with `--tgz`).
    #[arg(long)]
    pub(crate) wasm: Option<PathBuf>,
    /// Where to write the pack directory (it becomes <out>/<name>/) and
    /// the archive.
    #[arg(long, default_value = "dist")]
    pub(crate) out: PathBuf,
    /// Also write the protocol's archive, `<out>/<name>-<version>.tgz`
    /// (sign the directory first with `wop sign` to include its signature).
    #[arg(long)]
    pub(crate) tgz: bool,
}

pub(crate) async fn pack(a: PackArgs) -> Result<u8, Failure> {
    if a.wasm.is_none() && is_javascript(&a.src)? {
        let code = build_javascript(&a.src).await?;
        if a.tgz && code == 0 {
            return archive(&a.src, &a.out);
        }
        return Ok(code);
    }
    let Some(wasm) = a.wasm.clone() else {
        if !a.tgz {
            return Err(usage(anyhow::anyhow!(
                "give --wasm <component> to assemble a pack, or --tgz to archive the pack directory {}",
                a.src.display()
            )));
        }
        return archive(&a.src, &a.out);
    };
    let code = assemble(&a, &wasm).await?;
    if a.tgz && code == 0 {
        let name = crate::cmd::pack::name_of(&a.src)?;
        return archive(&a.out.join(name), &a.out);
    }
    Ok(code)
}

fn archive(dir: &std::path::Path, out: &std::path::Path) -> Result<u8, Failure> {
    let (path, integrity) = crate::cmd::pack_tgz::write(dir, out)?;
    println!(
        "archived {} -> {} ({integrity})",
        dir.display(),
        path.display()
    );
    Ok(0)
}

/// Reads a file of the pack source like every pack file
/// (`wop_core::packfile`): a regular file, not followed if a symlink, not
/// waited on if a FIFO, at most `cap` bytes (checked before reading).
fn read_bounded(path: &std::path::Path, cap: u64) -> Result<Vec<u8>, Failure> {
    wop_core::packfile::read_path(path, cap).map_err(|r| {
        usage(anyhow::anyhow!(
            "{}",
            r.into_load_error("$", &path.display().to_string())
        ))
    })
}

/// Whether `src/pack.json` is a JavaScript pack (`runtime.language`).
fn is_javascript(src: &std::path::Path) -> Result<bool, Failure> {
    let text = read_bounded(
        &src.join("pack.json"),
        wop_core::packfile::MAX_MANIFEST_BYTES,
    )?;
    let v: Value = serde_json::from_slice(&text)
        .with_context(|| format!("{}/pack.json is not valid JSON", src.display()))
        .map_err(usage)?;
    Ok(v["runtime"]["language"] == "javascript")
}

/// Builds a JavaScript pack's component the way `wop install` and `wop run`
/// do (same engine, same cache), and shows what it can reach.
async fn build_javascript(src: &std::path::Path) -> Result<u8, Failure> {
    let rt = Runtime::new(&RuntimeConfig::new())?;
    match crate::progress::compiling(src, rt.inspect_pack(src)).await {
        Ok(insp) => {
            println!("built {} (component sha256 {})", src.display(), insp.sha256);
            output::print_inspection(&insp);
            Ok(if insp.refusal.is_some() {
                exit::PACK_REJECTED
            } else {
                0
            })
        }
        Err(e) => Err(rejected(src, &e, false)),
    }
}

fn name_of(src: &std::path::Path) -> Result<String, Failure> {
    let text = read_bounded(
        &src.join("pack.json"),
        wop_core::packfile::MAX_MANIFEST_BYTES,
    )?;
    let v: Value = serde_json::from_slice(&text)?;
    v["name"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| usage(anyhow::anyhow!("{}: $.name is required", src.display())))
}

async fn assemble(a: &PackArgs, wasm_path: &std::path::Path) -> Result<u8, Failure> {
    use sha2::Digest;
    let template = a.src.join("pack.json");
    let text = read_bounded(&template, wop_core::packfile::MAX_MANIFEST_BYTES)?;
    let mut manifest: Value = serde_json::from_slice(&text)
        .with_context(|| format!("{} is not valid JSON", template.display()))
        .map_err(usage)?;
    let name = manifest["name"]
        .as_str()
        .ok_or_else(|| {
            usage(anyhow::anyhow!(
                "{}: $.name is required",
                template.display()
            ))
        })?
        .to_owned();
    if !wop_runtime::manifest::valid_name(&name) {
        return Err(usage(anyhow::anyhow!(
            "{}: $.name `{name}` must be lowercase letters, digits and `-._@/` (no `..` segment)",
            template.display()
        )));
    }
    let entry = manifest["runtime"]["entry"]
        .as_str()
        .ok_or_else(|| {
            usage(anyhow::anyhow!(
                "{}: $.runtime.entry is required",
                template.display()
            ))
        })?
        .to_owned();
    wop_runtime::manifest::check_relative_path(&entry, "$.runtime.entry").map_err(usage)?;
    let wasm = read_bounded(wasm_path, wop_core::packfile::MAX_ENTRY_BYTES)?;
    let sha = hex::encode(sha2::Sha256::digest(&wasm));
    match manifest.get_mut("x-wop") {
        Some(Value::Object(block)) => {
            block.insert("sha256".to_owned(), Value::String(sha.clone()));
        }
        _ => {
            return Err(usage(anyhow::anyhow!(
                "{}: $.x-wop is required (it holds the sha256 and the capabilities the pack requests)",
                template.display()
            )));
        }
    }
    let dir = a.out.join(&name);
    let entry_path = dir.join(&entry);
    if let Some(parent) = entry_path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&entry_path, &wasm)?;
    std::fs::write(
        dir.join("pack.json"),
        serde_json::to_string_pretty(&manifest)? + "\n",
    )?;
    let rt = Runtime::new(&RuntimeConfig::new())?;
    match crate::progress::compiling(&dir, rt.inspect_pack(&dir)).await {
        Ok(insp) => {
            println!("packed {} (sha256 {sha})", dir.display());
            output::print_inspection(&insp);
            Ok(if insp.refusal.is_some() {
                exit::PACK_REJECTED
            } else {
                0
            })
        }
        Err(e) => Err(rejected(&dir, &e, false)),
    }
}
