//! `wop new <lang> <name>`: scaffold a pack source directory — `pack.json`,
//! a `hello` node in the chosen language (the twin of the `hello` samples),
//! a `build.sh` that goes through the same build path as the samples
//! (`sdk/<lang>/build.sh`, or `cargo build --target wasm32-wasip2` +
//! `wop pack` for Rust) and a README with the next steps.

use crate::common::{Failure, usage};
use anyhow::Context;
use clap::{Args, ValueEnum};
use std::path::{Path, PathBuf};

mod templates;

use templates::{build_script, cargo_toml, manifest, readme, readme_js, source};

/// The languages `wop new` scaffolds.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Lang {
    /// Rust with `wop-sdk` (sdk/rust).
    Rust,
    /// JavaScript in the protocol's pack format (index.mjs; `wop` builds it, no toolchain).
    Js,
    /// Python (componentize-py, sdk/python).
    Python,
    /// C (clang + wasi-libc, sdk/c).
    C,
}

impl Lang {
    fn id(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Js => "js",
            Lang::Python => "python",
            Lang::C => "c",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Lang::Rust => "Rust",
            Lang::Js => "JavaScript",
            Lang::Python => "Python",
            Lang::C => "C",
        }
    }
}

/// `wop new` arguments.
#[derive(Args)]
pub(crate) struct NewArgs {
    /// The pack's language.
    pub(crate) lang: Lang,
    /// The pack name: lowercase letters, digits and `-`, starting with a
    /// letter. Also the directory created and the node's typeId prefix
    /// (`<name>.hello`).
    pub(crate) name: String,
    /// Create `<dir>/<name>/` (default: the current directory).
    #[arg(long, default_value = ".")]
    pub(crate) dir: PathBuf,
    /// The wop repository whose `sdk/` builds the pack. Default: $WOP_REPO,
    /// else the checkout this `wop` was built from (if it is still there).
    #[arg(long)]
    pub(crate) repo: Option<PathBuf>,
}

/// Why a pack name is refused, if it is.
fn name_problem(name: &str) -> Option<&'static str> {
    let Some(first) = name.chars().next() else {
        return Some("is empty");
    };
    if name.len() > 64 {
        return Some("is longer than 64 characters");
    }
    if !first.is_ascii_lowercase() {
        return Some("must start with a lowercase letter");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        return Some("may hold only lowercase letters, digits and `-`");
    }
    if name.ends_with('-') || name.contains("--") {
        return Some("must not end with `-` or hold `--`");
    }
    None
}

/// The wop repository holding `sdk/`: `--repo`, `$WOP_REPO`, else the
/// checkout this binary was built from when it still has `sdk/`.
fn repo_root(flag: Option<&Path>) -> Result<Option<PathBuf>, Failure> {
    let explicit = flag
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("WOP_REPO").map(PathBuf::from));
    if let Some(r) = explicit {
        if !r.join("sdk").is_dir() {
            return Err(usage(anyhow::anyhow!(
                "{} is not a wop repository (no sdk/ directory in it)",
                r.display()
            )));
        }
        return Ok(Some(std::path::absolute(&r)?));
    }
    let built_from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    Ok(built_from
        .join("sdk")
        .is_dir()
        .then(|| std::fs::canonicalize(&built_from).ok())
        .flatten())
}

/// `s` as a single-quoted bash word.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `s` as a TOML basic string.
fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One file of the scaffold: its path under the pack directory, its text,
/// and whether it is executable.
struct File {
    path: &'static str,
    text: String,
    executable: bool,
}

impl File {
    fn new(path: &'static str, text: String) -> Self {
        File {
            path,
            text,
            executable: false,
        }
    }
}

/// The files of a scaffold, relative to the pack directory.
fn files(lang: Lang, name: &str, repo: Option<&Path>) -> Result<Vec<File>, Failure> {
    let repo_str = match repo {
        Some(r) => Some(r.to_str().ok_or_else(|| {
            usage(anyhow::anyhow!(
                "the repository path {} is not UTF-8",
                r.display()
            ))
        })?),
        None => None,
    };
    let mut out = vec![File::new("pack.json", manifest(lang, name)?)];
    out.extend(source(lang, name));
    if lang == Lang::Js {
        out.push(File::new("README.md", readme_js(name)));
        out.push(File::new(".gitignore", "dist/\n".to_owned()));
        return Ok(out);
    }
    if lang == Lang::Rust {
        out.push(File::new("Cargo.toml", cargo_toml(name, repo)?));
    }
    out.push(File {
        path: "build.sh",
        text: build_script(lang, name, repo_str),
        executable: true,
    });
    out.push(File::new("README.md", readme(lang, name, repo_str)));
    let ignore = match lang {
        Lang::Rust => "dist/\ntarget/\n",
        Lang::Python => "dist/\n__pycache__/\n",
        _ => "dist/\n",
    };
    out.push(File::new(".gitignore", ignore.to_owned()));
    Ok(out)
}

fn write_file(dir: &Path, f: &File) -> anyhow::Result<()> {
    let path = dir.join(f.path);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(&path, &f.text).with_context(|| format!("cannot write {}", path.display()))?;
    if f.executable {
        make_executable(&path)?;
    }
    Ok(())
}

#[cfg(unix)]
fn make_executable(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("cannot make {} executable", path.display()))
}

#[cfg(not(unix))]
fn make_executable(_path: &Path) -> anyhow::Result<()> {
    Ok(())
}

/// `wop new`: writes `<dir>/<name>/`, refusing to touch an existing path.
pub(crate) fn new(a: NewArgs) -> Result<u8, Failure> {
    if let Some(why) = name_problem(&a.name) {
        return Err(usage(anyhow::anyhow!(
            "invalid pack name `{}`: it {why} (lowercase letters, digits and `-`, starting with a letter)",
            a.name
        )));
    }
    let repo = repo_root(a.repo.as_deref())?;
    let files = files(a.lang, &a.name, repo.as_deref())?;
    let dir = a.dir.join(&a.name);
    if dir.symlink_metadata().is_ok() {
        return Err(usage(anyhow::anyhow!(
            "{} already exists; wop new never overwrites (pick another name or --dir)",
            dir.display()
        )));
    }
    std::fs::create_dir_all(&a.dir)
        .with_context(|| format!("cannot create {}", a.dir.display()))?;
    match std::fs::create_dir(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(usage(anyhow::anyhow!(
                "{} already exists; wop new never overwrites (pick another name or --dir)",
                dir.display()
            )));
        }
        Err(e) => {
            return Err(anyhow::Error::new(e)
                .context(format!("cannot create {}", dir.display()))
                .into());
        }
    }
    for f in &files {
        write_file(&dir, f)?;
    }
    println!(
        "created {} ({} pack `{}`, node `{}.hello`):",
        dir.display(),
        a.lang.title(),
        a.name,
        a.name
    );
    for f in &files {
        println!("  {}", f.path);
    }
    if a.lang == Lang::Js {
        println!(
            "next: wop run {} {}.hello --input '{{\"name\":\"Ada\"}}'",
            dir.display(),
            a.name
        );
        return Ok(0);
    }
    if repo.is_none() && a.lang != Lang::Rust {
        eprintln!(
            "wop: note: no wop repository found; set WOP_REPO to your checkout before ./build.sh"
        );
    }
    if repo.is_none() && a.lang == Lang::Rust {
        eprintln!(
            "wop: note: no wop repository found; fix the wop-sdk path in {}",
            dir.join("Cargo.toml").display()
        );
    }
    println!(
        "next: cd {} && ./build.sh && wop run dist/{} {}.hello --input '{{\"name\":\"Ada\"}}'",
        dir.display(),
        a.name,
        a.name
    );
    Ok(0)
}
