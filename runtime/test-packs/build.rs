//! Builds the guest workspace in `sample-packs/` for `wasm32-wasip2` and
//! assembles one directory per pack in `$OUT_DIR/packs/<name>/`:
//! `pack.json` (with `x-wop.sha256` filled in) and `<name>.wasm`.
//!
//! The WASM ABI v1 core-module packs under `sample-packs/abi/` (crates
//! `wop-abi-<name>`) are excluded from that build and built in a second
//! cargo invocation for `wasm32-unknown-unknown` (no WASI).
//!
//! The inner build uses its own target directory (`target/wasm-packs`) so it
//! never waits on the outer build's lock, and runs with the outer build's
//! environment scrubbed (rustflags, wrappers, jobserver, cfg/feature vars)
//! so nothing meant for the host target leaks into the wasm build.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeSet;
use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};

/// The guest target.
const TARGET: &str = "wasm32-wasip2";

/// The target of the ABI v1 core-module packs.
const CORE_TARGET: &str = "wasm32-unknown-unknown";

/// Directory under `sample-packs/` and crate-name prefix of the ABI v1 packs.
const ABI_GROUP: (&str, &str) = ("abi", "wop-abi-");

/// Pack groups: directory under `sample-packs/` and crate-name prefix.
const GROUPS: &[(&str, &str)] = &[("samples", "wop_sample_"), ("testing", "wop_testing_")];

/// Environment variables set by the outer cargo (or the user, for the outer
/// build) that must not reach the inner wasm build.
const SCRUB_EXACT: &[&str] = &[
    "RUSTFLAGS",
    "RUSTDOCFLAGS",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "RUSTC_LINKER",
    "MAKEFLAGS",
    "MFLAGS",
    "OUT_DIR",
    "TARGET",
    "HOST",
    "PROFILE",
    "OPT_LEVEL",
    "DEBUG",
    "NUM_JOBS",
];

/// `CARGO_*` variables the inner build may keep (registry/network/terminal
/// configuration and the cargo binary itself); every other `CARGO_*`
/// variable (`CARGO_ENCODED_RUSTFLAGS`, `CARGO_TARGET_DIR`, `CARGO_BUILD_*`,
/// `CARGO_PROFILE_*`, `CARGO_MAKEFLAGS`, `CARGO_PRIMARY_PACKAGE`,
/// `CARGO_CFG_*`, `CARGO_FEATURE_*`, `CARGO_PKG_*`, ...) is removed.
const KEEP_CARGO: &[&str] = &[
    "CARGO",
    "CARGO_HOME",
    "CARGO_NET_",
    "CARGO_HTTP_",
    "CARGO_REGISTRIES_",
    "CARGO_REGISTRY_",
    "CARGO_SOURCE_",
    "CARGO_TERM_",
];

fn keep_cargo_var(name: &str) -> bool {
    KEEP_CARGO
        .iter()
        .any(|k| name == *k || (k.ends_with('_') && name.starts_with(k)))
}

fn scrubbed(name: &str) -> bool {
    SCRUB_EXACT.contains(&name)
        || name.starts_with("DEP_")
        || name.starts_with("__CARGO")
        || (name.starts_with("CARGO_") && !keep_cargo_var(name))
}

fn main() {
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let repo = manifest_dir
        .parent()
        .and_then(Path::parent)
        .expect("runtime/test-packs lives two levels below the repository root")
        .to_path_buf();
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let guest = repo.join("sample-packs");
    let wasm_target_dir = repo.join("target").join("wasm-packs");

    for path in [
        guest.join("Cargo.toml"),
        guest.join("Cargo.lock"),
        guest.join("samples"),
        guest.join("testing"),
        guest.join(ABI_GROUP.0),
        repo.join("sdk").join("rust"),
        repo.join("wit"),
    ] {
        println!("cargo:rerun-if-changed={}", path.display());
    }

    ensure_target(&rustc, TARGET);
    let abi_names = pack_names(&guest, ABI_GROUP.0);
    if !abi_names.is_empty() {
        ensure_target(&rustc, CORE_TARGET);
    }

    // Build every guest crate except the ABI v1 ones for wasip2.
    let mut cmd = Command::new(&cargo);
    cmd.arg("build")
        .arg("--release")
        .arg("--target")
        .arg(TARGET)
        .arg("--workspace");
    for name in &abi_names {
        cmd.arg("--exclude").arg(format!("{}{name}", ABI_GROUP.1));
    }
    cmd.arg("--manifest-path")
        .arg(guest.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&wasm_target_dir)
        .current_dir(&guest)
        // Cargo reads directives from a build script's stdout; keep the inner
        // cargo's stdout out of it.
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (name, _) in env::vars_os() {
        if let Some(name) = name.to_str()
            && scrubbed(name)
        {
            cmd.env_remove(name);
        }
    }
    run_build(cmd, &cargo, TARGET);
    let wasm_dir = wasm_target_dir.join(TARGET).join("release");

    // The ABI v1 core modules, for wasm32-unknown-unknown.
    if !abi_names.is_empty() {
        let mut cmd = Command::new(&cargo);
        cmd.arg("build")
            .arg("--release")
            .arg("--target")
            .arg(CORE_TARGET);
        for name in &abi_names {
            cmd.arg("-p").arg(format!("{}{name}", ABI_GROUP.1));
        }
        cmd.arg("--manifest-path")
            .arg(guest.join("Cargo.toml"))
            .arg("--target-dir")
            .arg(&wasm_target_dir)
            .current_dir(&guest)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (name, _) in env::vars_os() {
            if let Some(name) = name.to_str()
                && scrubbed(name)
            {
                cmd.env_remove(name);
            }
        }
        run_build(cmd, &cargo, CORE_TARGET);
    }
    let core_dir = wasm_target_dir.join(CORE_TARGET).join("release");

    // Assemble $OUT_DIR/packs/<name>/.
    let packs_dir = out_dir.join("packs");
    if packs_dir.exists() {
        fs::remove_dir_all(&packs_dir).expect("clear $OUT_DIR/packs");
    }
    let mut seen = BTreeSet::new();
    let mut groups: Vec<Vec<String>> = Vec::new();
    let mut embedded = String::new();
    for (group, prefix) in GROUPS {
        let mut names: Vec<String> = fs::read_dir(guest.join(group))
            .unwrap_or_else(|e| panic!("read sample-packs/{group}: {e}"))
            .map(|entry| entry.expect("read_dir entry").path())
            .filter(|p| p.join("Cargo.toml").is_file())
            .map(|p| {
                p.file_name()
                    .expect("dir name")
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        names.sort();
        for name in &names {
            assert!(
                seen.insert(name.clone()),
                "pack name `{name}` is used twice"
            );
            let src = guest.join(group).join(name);
            let wasm = wasm_dir.join(format!("{prefix}{}.wasm", name.replace('-', "_")));
            let (manifest, wasm_file) = assemble(name, &src, &wasm, &packs_dir.join(name));
            writeln!(
                embedded,
                "    ({name:?}, include_bytes!({:?}), include_bytes!({:?})),",
                manifest.display(),
                wasm_file.display()
            )
            .expect("write to String");
        }
        groups.push(names);
    }

    for name in &abi_names {
        assert!(
            seen.insert(name.clone()),
            "pack name `{name}` is used twice"
        );
        let src = guest.join(ABI_GROUP.0).join(name);
        let wasm = core_dir.join(format!(
            "{}{}.wasm",
            ABI_GROUP.1.replace('-', "_"),
            name.replace('-', "_")
        ));
        assemble(name, &src, &wasm, &packs_dir.join(name));
    }

    let list = |names: &[String]| {
        names
            .iter()
            .map(|n| format!("{n:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let generated = format!(
        "/// The sample packs (directories under `sample-packs/samples/`), sorted.\n\
         pub const SAMPLES: &[&str] = &[{}];\n\n\
         /// The adversarial testing packs (directories under\n\
         /// `sample-packs/testing/`), sorted.\n\
         pub const TESTING: &[&str] = &[{}];\n\n\
         /// The WASM ABI v1 core-module packs (directories under\n\
         /// `sample-packs/abi/`, built for wasm32-unknown-unknown), sorted.\n\
         pub const ABI_V1: &[&str] = &[{}];\n\n\
         /// (name, assembled `pack.json`, component bytes) of every pack.\n\
         static EMBEDDED: &[(&str, &[u8], &[u8])] = &[\n{embedded}];\n",
        list(&groups[0]),
        list(&groups[1]),
        list(&abi_names),
    );
    fs::write(out_dir.join("packs.rs"), generated).expect("write $OUT_DIR/packs.rs");
}

/// Runs one inner cargo build, failing with the `rustup` hint.
fn run_build(mut cmd: Command, cargo: &std::ffi::OsStr, target: &str) {
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("could not run {cargo:?} to build the guest packs: {e}"));
    eprint!("{}", String::from_utf8_lossy(&output.stdout));
    if !output.status.success() {
        panic!(
            "building sample-packs for {target} failed ({}); see the cargo output above. \
             If the target is missing, run `rustup target add {target}`.",
            output.status
        );
    }
}

/// The sorted pack directories (holding a Cargo.toml) under `sample-packs/<group>/`.
fn pack_names(guest: &Path, group: &str) -> Vec<String> {
    let Ok(dir) = fs::read_dir(guest.join(group)) else {
        return Vec::new();
    };
    let mut names: Vec<String> = dir
        .map(|entry| entry.expect("read_dir entry").path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .map(|p| {
            p.file_name()
                .expect("dir name")
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

/// Whether the standard library for `target` is installed for `rustc`.
fn target_installed(rustc: &std::ffi::OsStr, target: &str) -> bool {
    let output = Command::new(rustc)
        .args(["--print", "target-libdir", "--target", target])
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .output();
    match output {
        Ok(o) if o.status.success() => {
            let libdir = String::from_utf8_lossy(&o.stdout).trim().to_owned();
            Path::new(&libdir).is_dir()
                && fs::read_dir(&libdir)
                    .map(|mut d| {
                        d.any(|e| {
                            e.is_ok_and(|e| e.file_name().to_string_lossy().starts_with("libcore-"))
                        })
                    })
                    .unwrap_or(false)
        }
        _ => false,
    }
}

/// The rustup toolchain `rustc` belongs to: `RUSTUP_TOOLCHAIN` (set by
/// rustup's proxies for the toolchain they run, including one chosen with
/// `+toolchain`, `rust-toolchain.toml` or the variable itself), else the
/// name of its sysroot directory when that lies in a rustup `toolchains/`
/// directory. `None`: not a rustup toolchain.
fn rustup_toolchain(rustc: &std::ffi::OsStr) -> Option<String> {
    if let Some(t) = env::var("RUSTUP_TOOLCHAIN").ok().filter(|t| !t.is_empty()) {
        return Some(t);
    }
    let o = Command::new(rustc)
        .args(["--print", "sysroot"])
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .output()
        .ok()?;
    let sysroot = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
    let parent = sysroot.parent()?;
    (parent.file_name()? == "toolchains")
        .then(|| {
            sysroot
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .flatten()
}

/// Makes sure the standard library for `target` is installed: when it is
/// missing and rustup is available, runs `rustup target add <target>` for
/// the active toolchain (announced with a cargo warning), so the README's
/// commands work where rustup does not install targets by itself (e.g.
/// `RUSTUP_AUTO_INSTALL=0`). Fails with the exact `rustup` line to run
/// only when that is impossible or fails.
fn ensure_target(rustc: &std::ffi::OsStr, target: &str) {
    if target_installed(rustc, target) {
        return;
    }
    let toolchain = rustup_toolchain(rustc);
    let line = match &toolchain {
        Some(t) => format!("rustup target add --toolchain {t} {target}"),
        None => format!("rustup target add {target}"),
    };
    let rustup = env::var_os("RUSTUP").unwrap_or_else(|| "rustup".into());
    let mut cmd = Command::new(&rustup);
    cmd.args(["target", "add"]);
    if let Some(t) = &toolchain {
        cmd.args(["--toolchain", t]);
    }
    cmd.arg(target)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    println!(
        "cargo:warning=the Rust standard library for {target} is not installed; \
         installing it for the sample packs: `{line}`"
    );
    let why = match cmd.output() {
        Ok(o) if o.status.success() && target_installed(rustc, target) => return,
        Ok(o) if o.status.success() => {
            format!("`{line}` succeeded but {target} is still not installed for this rustc")
        }
        Ok(o) => {
            let stderr = String::from_utf8_lossy(&o.stderr);
            match stderr.trim() {
                "" => format!("`{line}` failed ({})", o.status),
                said => format!("`{line}` failed ({}): {said}", o.status),
            }
        }
        Err(e) => format!("rustup is not available ({e})"),
    };
    panic!(
        "the Rust standard library for {target} is not installed and could not be \
         installed: {why}; run `{line}` and build again"
    );
}

/// Copy one pack into `dest`: the component as `<name>.wasm` and `pack.json`
/// with `x-wop.sha256` set to the component's lowercase hex SHA-256. Returns
/// the two destination paths.
fn assemble(name: &str, src: &Path, wasm: &Path, dest: &Path) -> (PathBuf, PathBuf) {
    let manifest_path = src.join("pack.json");
    let text = fs::read_to_string(&manifest_path)
        .unwrap_or_else(|e| panic!("read {}: {e}", manifest_path.display()));
    let mut manifest: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("parse {}: {e}", manifest_path.display()));
    // A later release of a pack lives beside it as `<name>-v<N>` (e.g.
    // testing/hello-v2 is `hello` 0.2.0, for the upgrade-diff tests).
    let pack_name = match name.rsplit_once("-v") {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => name,
    };
    assert_eq!(
        manifest["name"].as_str(),
        Some(pack_name),
        "{}: `name` must be the pack directory name (without a `-vN` release suffix)",
        manifest_path.display()
    );
    let entry = format!("{name}.wasm");
    assert_eq!(
        manifest["runtime"]["entry"].as_str(),
        Some(entry.as_str()),
        "{}: `runtime.entry` must be `{entry}`",
        manifest_path.display()
    );

    let bytes = fs::read(wasm).unwrap_or_else(|e| panic!("read {}: {e}", wasm.display()));
    let digest = Sha256::digest(&bytes);
    let sha256 = digest.iter().fold(String::with_capacity(64), |mut s, b| {
        write!(s, "{b:02x}").expect("write to String");
        s
    });
    let x_wop = manifest
        .get_mut("x-wop")
        .and_then(serde_json::Value::as_object_mut)
        .unwrap_or_else(|| panic!("{}: missing `x-wop` object", manifest_path.display()));
    x_wop.insert("sha256".to_owned(), serde_json::Value::String(sha256));

    fs::create_dir_all(dest).unwrap_or_else(|e| panic!("create {}: {e}", dest.display()));
    let wasm_dest = dest.join(&entry);
    fs::write(&wasm_dest, &bytes).unwrap_or_else(|e| panic!("write {}: {e}", wasm_dest.display()));
    let manifest_dest = dest.join("pack.json");
    let mut json = serde_json::to_string_pretty(&manifest).expect("serialize pack.json");
    json.push('\n');
    fs::write(&manifest_dest, json)
        .unwrap_or_else(|e| panic!("write {}: {e}", manifest_dest.display()));
    (manifest_dest, wasm_dest)
}
