//! `wop capabilities`: the runtime's capability document as JSON —
//! `nodePackRuntimes` (`wasm` = ABI v1 core modules, `wasmComponent`) and
//! `sandbox` (RFC 0008 §H, RFC 0035 §A).

use crate::common::{Common, Failure, exit, rejected, runtime_without_store};
use clap::Args;
use std::path::PathBuf;

/// `wop capabilities` arguments.
#[derive(Args)]
pub(crate) struct CapabilitiesArgs {
    /// Packs to load first, so they show under `loadedPacks` (directories
    /// or bare `.wasm` core modules).
    packs: Vec<PathBuf>,
    #[command(flatten)]
    common: Common,
}

/// Prints the capability document (always JSON).
pub(crate) async fn capabilities(a: CapabilitiesArgs) -> Result<u8, Failure> {
    let rt = runtime_without_store(&a.common)?;
    for p in &a.packs {
        if let Err(e) = rt.load_pack(p).await {
            let f = rejected(p, &e, false);
            return Err(Failure {
                code: exit::PACK_REJECTED,
                error: f.error,
            });
        }
    }
    println!("{}", serde_json::to_string_pretty(&rt.capabilities())?);
    Ok(0)
}
