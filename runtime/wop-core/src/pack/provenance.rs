//! A pack's provenance under the operator's policy: whether a signature
//! is required for its name, and the signature judged before anything
//! else about the pack ([`provenance`]); a bare ABI v1 module, which has
//! no signature, judged on the name it declares ([`check_bare`]).

use super::approval::check_escalation;
use crate::error::LoadError;
use crate::manifest::Manifest;
use crate::policy::Policy;
use crate::trust::{SigFailure, SigFile, TrustVerdict, signed_name, verify};

/// The provenance of a `pack.json` under `policy`, before anything else
/// about it is judged: its name (for the keys' namespaces) and signature.
pub fn provenance(
    policy: &Policy,
    raw_manifest: &[u8],
    sig: Option<SigFile<'_>>,
) -> Result<(String, TrustVerdict), LoadError> {
    let name = signed_name(raw_manifest)?;
    let verdict = verify(
        &policy.trust,
        &name,
        signature_required(policy, &name),
        raw_manifest,
        sig,
    )?;
    Ok((name, verdict))
}

/// Whether a signature is required for **every** pack name: globally, with
/// no pack exempted (`[packs.<name>] requireSignature = false`). A bare
/// core module can then be refused before its name is known.
pub fn signature_required_for_all(policy: &Policy) -> bool {
    policy.trust.require_signature
        && !policy
            .packs
            .values()
            .any(|g| g.require_signature == Some(false))
}

/// The provenance check of a bare ABI v1 module, on the name it declares
/// (`openwop_pack_name`), not its file name: it has no `pack.json` and so
/// no signature, so it is refused when the policy requires one for that
/// name; and it is held to the approval of that name like any version
/// (`manifest` is the one synthesized from the module's exports).
pub fn check_bare(policy: &Policy, manifest: &Manifest, file: &str) -> Result<(), LoadError> {
    let name = &manifest.name;
    if signature_required(policy, name) {
        return Err(LoadError::Signature {
            reason: SigFailure::Missing.as_str(),
            key_id: None,
            message: format!(
                "{file} is a bare core module declaring pack `{name}` (openwop_pack_name); it has no pack.json and so no signature, and the policy requires a signature for `{name}`: ship it as a signed pack directory (wop pack, wop sign)"
            ),
        });
    }
    check_escalation(policy, manifest)
}

/// Whether `policy` requires a signature for the pack `name`.
pub fn signature_required(policy: &Policy, name: &str) -> bool {
    policy
        .packs
        .get(name)
        .and_then(|g| g.require_signature)
        .unwrap_or(policy.trust.require_signature)
}
