//! One registry of node types over both pack kinds: typeId → loaded pack.
//! A typeId belongs to one pack; loading a pack again replaces its earlier
//! load; a typeId already registered by another pack (of either kind)
//! refuses the load.

use crate::kind::PackKind;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock, RwLockReadGuard};
use wop_core::capability::Capability;
use wop_core::error::LoadError;
use wop_core::limits::Limits;

/// A summary of a loaded pack.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PackSummary {
    /// Pack name.
    pub name: String,
    /// Pack version.
    pub version: String,
    /// The node types it registered.
    pub type_ids: Vec<String>,
    /// Effective capabilities.
    pub capabilities: BTreeSet<Capability>,
    /// Effective limits.
    pub limits: Limits,
    /// A JavaScript pack: the host services its code names
    /// ([`wop_core::pack::Inspection::services`]).
    pub services: Vec<String>,
}

impl PackSummary {
    fn of(pack: &PackKind) -> Self {
        let i = pack.inspection();
        let m = &i.manifest;
        Self {
            name: m.name.clone(),
            version: m.version.clone(),
            type_ids: m.nodes.iter().map(|n| n.type_id.clone()).collect(),
            capabilities: i.effective.clone(),
            limits: i.limits,
            services: i.services.clone(),
        }
    }
}

fn name(pack: &PackKind) -> &str {
    &pack.inspection().manifest.name
}

/// typeId → pack.
#[derive(Default)]
pub(crate) struct Registry {
    packs: RwLock<BTreeMap<String, Arc<PackKind>>>,
}

impl Registry {
    fn read(&self) -> RwLockReadGuard<'_, BTreeMap<String, Arc<PackKind>>> {
        match self.packs.read() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// The pack implementing `type_id`.
    pub(crate) fn get(&self, type_id: &str) -> Option<Arc<PackKind>> {
        self.read().get(type_id).cloned()
    }

    /// Registers a pack's typeIds, replacing an earlier load of the same
    /// pack; refuses a typeId another pack already registered.
    pub(crate) fn register(&self, pack: PackKind) -> Result<PackSummary, LoadError> {
        let summary = PackSummary::of(&pack);
        let mut packs = match self.packs.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        for t in &summary.type_ids {
            if let Some(other) = packs.get(t).filter(|p| name(p) != summary.name) {
                return Err(LoadError::validation(
                    "$.nodes",
                    format!(
                        "typeId `{t}` is already registered by pack `{}`",
                        name(other)
                    ),
                ));
            }
        }
        packs.retain(|_, p| name(p) != summary.name);
        let pack = Arc::new(pack);
        for t in &summary.type_ids {
            packs.insert(t.clone(), pack.clone());
        }
        Ok(summary)
    }

    /// Summaries of the loaded packs, components first, each pack once.
    pub(crate) fn summaries(&self) -> Vec<PackSummary> {
        let packs = self.read();
        let mut seen = BTreeSet::new();
        let mut components = Vec::new();
        let mut modules = Vec::new();
        for p in packs.values() {
            if !seen.insert(name(p).to_owned()) {
                continue;
            }
            if p.is_abi_v1() {
                modules.push(PackSummary::of(p));
            } else {
                components.push(PackSummary::of(p));
            }
        }
        components.extend(modules);
        components
    }

    /// Names of the loaded packs of one kind (for the capability document).
    pub(crate) fn names(&self, abi_v1: bool) -> Vec<String> {
        let packs = self.read();
        let names: BTreeSet<String> = packs
            .values()
            .filter(|p| p.is_abi_v1() == abi_v1)
            .map(|p| name(p).to_owned())
            .collect();
        names.into_iter().collect()
    }
}
