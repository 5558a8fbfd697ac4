//! One registry of node types over both pack kinds: typeId → loaded pack.
//! A typeId belongs to one pack; loading a pack again replaces its earlier
//! load; a typeId already registered by another pack (of either kind)
//! refuses the load.

use crate::abi_v1::CoreModulePack;
use crate::bindings::NodePackPre;
use crate::runtime::PackSummary;
use crate::state::HostState;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock, RwLockReadGuard};
use wop_core::error::LoadError;
use wop_core::pack::Inspection;

/// A loaded component pack, ready to instantiate.
pub(crate) struct ComponentPack {
    pub inspection: Inspection,
    pub pre: NodePackPre<HostState>,
}

/// What runs a loaded pack's nodes.
pub(crate) enum PackKind {
    /// A WebAssembly component (`wasm-component`).
    Component(ComponentPack),
    /// A WASM ABI v1 core module (`wasm`).
    AbiV1(CoreModulePack),
}

impl PackKind {
    /// The load-time inspection (manifest, grants, limits).
    pub(crate) fn inspection(&self) -> &Inspection {
        match self {
            Self::Component(p) => &p.inspection,
            Self::AbiV1(p) => &p.inspection,
        }
    }

    /// The summary shown to hosts.
    pub(crate) fn summary(&self) -> PackSummary {
        let i = self.inspection();
        let m = &i.manifest;
        PackSummary {
            name: m.name.clone(),
            version: m.version.clone(),
            type_ids: m.nodes.iter().map(|n| n.type_id.clone()).collect(),
            capabilities: i.effective.clone(),
            limits: i.limits,
        }
    }

    fn name(&self) -> &str {
        &self.inspection().manifest.name
    }
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
        let summary = pack.summary();
        let mut packs = match self.packs.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        for t in &summary.type_ids {
            if let Some(other) = packs.get(t).filter(|p| p.name() != summary.name) {
                return Err(LoadError::validation(
                    "$.nodes",
                    format!(
                        "typeId `{t}` is already registered by pack `{}`",
                        other.name()
                    ),
                ));
            }
        }
        packs.retain(|_, p| p.name() != summary.name);
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
            if !seen.insert(p.name().to_owned()) {
                continue;
            }
            match p.as_ref() {
                PackKind::Component(_) => components.push(p.summary()),
                PackKind::AbiV1(_) => modules.push(p.summary()),
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
            .filter(|p| matches!(p.as_ref(), PackKind::AbiV1(_)) == abi_v1)
            .map(|p| p.name().to_owned())
            .collect();
        names.into_iter().collect()
    }
}
