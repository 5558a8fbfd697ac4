//! Dev-only: the sample and testing node packs, built for `wasm32-wasip2`.
//!
//! The build script compiles the guest workspace in `sample-packs/` (SDK,
//! samples and adversarial testing packs) and assembles one pack directory
//! per pack under [`packs_dir`]:
//!
//! ```text
//! <packs_dir>/<name>/pack.json     # x-wop.sha256 = sha256 of the component
//! <packs_dir>/<name>/<name>.wasm   # the component
//! ```
//!
//! The WASM ABI v1 core-module packs in `sample-packs/abi/` ([`ABI_V1`]) are
//! built for `wasm32-unknown-unknown` and assembled the same way (they are
//! not in [`embedded`]).
//!
//! Tests load packs from [`pack_dir`]; the `wop demo` CLI embeds them all
//! through [`embedded`]. Building this crate needs the `wasm32-wasip2` target
//! (`rustup target add wasm32-wasip2`).

use std::path::{Path, PathBuf};

include!(concat!(env!("OUT_DIR"), "/packs.rs"));

/// The directory holding one assembled directory per pack (`<name>/`).
pub fn packs_dir() -> &'static Path {
    Path::new(concat!(env!("OUT_DIR"), "/packs"))
}

/// The assembled directory of the pack `name` (a name from [`SAMPLES`] or
/// [`TESTING`]): it holds `pack.json` and `<name>.wasm`.
pub fn pack_dir(name: &str) -> PathBuf {
    packs_dir().join(name)
}

/// The component file of the pack `name`: `<pack_dir(name)>/<name>.wasm`.
pub fn wasm_path(name: &str) -> PathBuf {
    pack_dir(name).join(format!("{name}.wasm"))
}

/// Every pack (samples, then testing packs) compiled into this crate, as
/// `(name, pack.json bytes, component bytes)`. The `pack.json` bytes are the
/// assembled manifest, with `x-wop.sha256` matching the component bytes.
pub fn embedded() -> &'static [(&'static str, &'static [u8], &'static [u8])] {
    EMBEDDED
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pack_is_assembled_and_embedded() {
        let names: Vec<&str> = SAMPLES.iter().chain(TESTING).copied().collect();
        assert_eq!(names.len(), embedded().len());
        for (name, (embedded_name, manifest, wasm)) in names.iter().zip(embedded()) {
            assert_eq!(name, embedded_name);
            assert!(pack_dir(name).join("pack.json").is_file());
            assert_eq!(std::fs::read(wasm_path(name)).unwrap(), *wasm);
            let manifest: serde_json::Value = serde_json::from_slice(manifest).unwrap();
            // `<name>-v<N>` is a later release of `<name>` (build.rs).
            let base = match name.rsplit_once("-v") {
                Some((b, n)) if n.bytes().all(|c| c.is_ascii_digit()) => b,
                _ => name,
            };
            assert_eq!(manifest["name"], *base);
            assert_eq!(manifest["x-wop"]["sha256"].as_str().unwrap().len(), 64);
        }
        assert!(SAMPLES.contains(&"hello"));
        assert!(TESTING.contains(&"spin"));
    }
}
