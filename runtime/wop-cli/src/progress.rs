//! A progress line on stderr while a pack loads (compiling a JavaScript or
//! Python component takes seconds): `⠹ compiling js-hello (1.7 MB)… 4.1 s`,
//! redrawn every 100 ms and cleared when the load finishes. Only when
//! stderr is a terminal, and only once the load has taken longer than
//! [`DELAY`] (a compile-cache hit shows nothing), so JSON and CI output
//! never change.

use std::future::Future;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long a load runs before the progress line appears.
const DELAY: Duration = Duration::from_millis(300);
/// Spinner frames.
const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
/// Erase the current terminal line and return to its start.
const CLEAR: &str = "\r\x1b[2K";

/// Awaits `load` (which compiles the pack at `pack`), showing a progress
/// line on stderr while it runs if stderr is a terminal.
pub(crate) async fn compiling<F: Future>(pack: &Path, load: F) -> F::Output {
    if !std::io::stderr().is_terminal() {
        return load.await;
    }
    let label = label(pack);
    let shown = Arc::new(AtomicBool::new(false));
    let ticker = tokio::spawn(tick(label, Instant::now(), shown.clone()));
    let out = load.await;
    ticker.abort();
    // Wait for the ticker to stop so that no frame lands after the clear.
    let _cancelled = ticker.await;
    if shown.load(Ordering::SeqCst) {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "{CLEAR}");
        let _ = err.flush();
    }
    out
}

async fn tick(label: String, start: Instant, shown: Arc<AtomicBool>) {
    tokio::time::sleep(DELAY).await;
    let mut frame = 0usize;
    loop {
        {
            let mut err = std::io::stderr().lock();
            let _ = write!(
                err,
                "{CLEAR}{} compiling {label}… {:.1} s",
                FRAMES[frame % FRAMES.len()],
                start.elapsed().as_secs_f64()
            );
            let _ = err.flush();
        }
        shown.store(true, Ordering::SeqCst);
        frame = frame.wrapping_add(1);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `name (size)` of the pack: the manifest's name and the entry's size, or
/// the file name and size of a bare `.wasm`; the path when unreadable.
fn label(pack: &Path) -> String {
    let fallback = || pack.display().to_string();
    if pack.is_file() {
        let name = pack
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(fallback);
        return match std::fs::metadata(pack) {
            Ok(m) => format!("{name} ({})", size(m.len())),
            Err(_) => name,
        };
    }
    // The bounded, no-follow reader, as at load.
    let manifest = wop_runtime::pack::read_manifest_bytes(pack)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
    let Some(m) = manifest else {
        return fallback();
    };
    let name = m["name"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(fallback);
    let bytes = m["runtime"]["entry"]
        .as_str()
        .and_then(|e| std::fs::metadata(pack.join(e)).ok())
        .map(|md| md.len());
    match bytes {
        Some(b) => format!("{name} ({})", size(b)),
        None => name,
    }
}

/// Bytes as `12.3 MB` / `35 KB` (decimal units).
fn size(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.0} KB", b / 1e3)
    } else {
        format!("{bytes} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_the_build_logs() {
        assert_eq!(size(512), "512 B");
        assert_eq!(size(34_722), "35 KB");
        assert_eq!(size(1_736_631), "1.7 MB");
        assert_eq!(size(18_921_173), "18.9 MB");
    }

    #[test]
    fn label_names_the_pack_and_its_component() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("pack.json"),
            r#"{"name":"js-hello","runtime":{"entry":"js-hello.wasm"}}"#,
        )
        .unwrap();
        std::fs::write(d.path().join("js-hello.wasm"), vec![0u8; 2_500_000]).unwrap();
        assert_eq!(label(d.path()), "js-hello (2.5 MB)");
        assert_eq!(
            label(&d.path().join("js-hello.wasm")),
            "js-hello.wasm (2.5 MB)"
        );
    }
}
