//! Embeds the prelude files in the order `js/ORDER` lists them.
use std::fmt::Write as _;
use std::{env, fs, path::PathBuf};

fn main() {
    let dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap_or_default()).join("js");
    println!("cargo:rerun-if-changed={}", dir.display());
    let order = fs::read_to_string(dir.join("ORDER")).unwrap_or_default();
    let mut out = String::from(
        "/// The prelude files, in evaluation order.\npub(crate) const PRELUDE: &[(&str, &str)] = &[\n",
    );
    for name in order
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let path = dir.join(name);
        println!("cargo:rerun-if-changed={}", path.display());
        let _ = writeln!(
            out,
            "    ({name:?}, include_str!({:?})),",
            path.display().to_string()
        );
    }
    out.push_str("];\n");
    let dest = PathBuf::from(env::var("OUT_DIR").unwrap_or_default()).join("prelude.rs");
    if let Err(e) = fs::write(&dest, out) {
        println!("cargo:warning=cannot write {}: {e}", dest.display());
    }
}
