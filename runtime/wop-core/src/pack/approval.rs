//! An upgrade judged against the version the operator approved
//! (`[packs.<name>] approved`, decision 0009): never older unless allowed
//! (`pack_version_rollback`), never asking for more
//! (`pack_capability_escalation`).

use crate::error::LoadError;
use crate::manifest::Manifest;
use crate::policy::Policy;
use crate::trust::{diff, read_approved};

/// Refuses `manifest` when the policy approved another version of this
/// pack (`[packs.<name>] approved`) and `manifest` is older than it
/// (`pack_version_rollback`, unless `allowRollback`) or requests more
/// (`pack_capability_escalation`).
pub fn check_escalation(policy: &Policy, manifest: &Manifest) -> Result<(), LoadError> {
    let Some(grant) = policy.packs.get(&manifest.name) else {
        return Ok(());
    };
    let Some(path) = grant.approved.as_ref() else {
        return Ok(());
    };
    let approved = read_approved(path).map_err(|e| {
        LoadError::validation(format!("policy packs.{}.approved", manifest.name), e)
    })?;
    check_rollback(&approved, manifest, grant.allow_rollback)?;
    let adds = diff::additions(&approved, manifest);
    if adds.is_empty() {
        return Ok(());
    }
    Err(LoadError::Escalation {
        pack: manifest.name.clone(),
        version: manifest.version.clone(),
        approved_version: approved.version,
        additions: adds.iter().map(ToString::to_string).collect(),
    })
}

/// Refuses `manifest` when its version is lower than the approved one and
/// the operator did not allow a rollback. A version that cannot be
/// compared (the manifests were validated, so only a hand-made approved
/// file) is a rollback too: fail closed.
pub fn check_rollback(
    approved: &Manifest,
    manifest: &Manifest,
    allow: bool,
) -> Result<(), LoadError> {
    let older = !matches!(
        crate::manifest::compare_versions(&manifest.version, &approved.version),
        Some(std::cmp::Ordering::Equal | std::cmp::Ordering::Greater)
    );
    if older && !allow {
        return Err(LoadError::Rollback {
            pack: manifest.name.clone(),
            version: manifest.version.clone(),
            approved_version: approved.version.clone(),
        });
    }
    Ok(())
}
