//! The WASM ABI v1 versions this runtime runs (RFC 0008), in one place for
//! the manifest validator, the loader and the capability document.

/// The ABI versions this runtime runs.
pub const SUPPORTED_ABI_VERSIONS: [i64; 1] = [1];

/// [`SUPPORTED_ABI_VERSIONS`] as a list (for errors and documents).
pub fn supported_versions() -> Vec<u32> {
    SUPPORTED_ABI_VERSIONS
        .iter()
        .filter_map(|v| u32::try_from(*v).ok())
        .collect()
}
