//! The pack kinds behind one dispatch. Each kind lives in its own folder
//! (`component/`, `abi_v1/`) and answers the same three calls: `inspect`
//! (judge without running), `load` (ready to instantiate) and `invoke`
//! (one node invocation in a fresh sandbox, with the [`RunEnv`] the facade
//! admitted). A third kind is one more folder and one more variant here.

use crate::abi_v1::{self, AbiV1Pack};
use crate::component::{self, ComponentPack, Components};
use crate::env::{LoadEnv, RunEnv};
use std::path::Path;
use wop_core::error::LoadError;
use wop_core::model::{InvocationReport, InvokeRequest};
use wop_core::pack::Inspection;

/// What a kind keeps from one load to the next (the component linker and
/// compile cache); a kind that keeps nothing has no field.
pub(crate) struct Kinds {
    /// Component packs.
    pub components: Components,
}

/// A loaded pack of either kind.
pub(crate) enum PackKind {
    /// A WebAssembly component (`wasm-component`). Both variants are
    /// boxed: each holds a kilobyte-sized inspection.
    Component(Box<ComponentPack>),
    /// A WASM ABI v1 core module (`wasm`).
    AbiV1(Box<AbiV1Pack>),
}

impl PackKind {
    /// Validates the pack at `dir` and judges its imports; nothing of a
    /// pack directory runs (a bare ABI v1 module is identified in a
    /// sandbox, see [`abi_v1::inspect`]).
    pub(crate) async fn inspect(
        dir: &Path,
        env: &LoadEnv<'_>,
        kinds: &Kinds,
    ) -> Result<Inspection, LoadError> {
        if abi_v1::is_abi_v1_pack(dir)? {
            abi_v1::inspect(dir, env).await
        } else {
            component::inspect(dir, env, &kinds.components).await
        }
    }

    /// Loads the pack at `dir`, ready to instantiate: refused before any
    /// of its code runs if an import is not granted, then its own
    /// description checked against the manifest.
    pub(crate) async fn load(
        dir: &Path,
        env: &LoadEnv<'_>,
        kinds: &Kinds,
    ) -> Result<PackKind, LoadError> {
        if abi_v1::is_abi_v1_pack(dir)? {
            abi_v1::load(dir, env)
                .await
                .map(|p| Self::AbiV1(Box::new(p)))
        } else {
            let components = &kinds.components;
            component::load(dir, env, components)
                .await
                .map(|p| Self::Component(Box::new(p)))
        }
    }

    /// Runs one node invocation in a fresh sandbox.
    pub(crate) async fn invoke(&self, req: &InvokeRequest, env: &RunEnv<'_>) -> InvocationReport {
        match self {
            Self::Component(p) => p.invoke(req, env).await,
            Self::AbiV1(p) => p.invoke(req, env).await,
        }
    }

    /// The load-time inspection (manifest, grants, limits).
    pub(crate) fn inspection(&self) -> &Inspection {
        match self {
            Self::Component(p) => &p.inspection,
            Self::AbiV1(p) => &p.inspection,
        }
    }

    /// The config and input schemas of node `type_id`, if it has any.
    pub(crate) fn schemas(&self, type_id: &str) -> Option<&wop_core::schema::NodeSchemas> {
        match self {
            Self::Component(p) => p.schemas.get(type_id),
            Self::AbiV1(_) => None,
        }
    }

    /// Whether this is an ABI v1 core-module pack.
    pub(crate) fn is_abi_v1(&self) -> bool {
        matches!(self, Self::AbiV1(_))
    }
}
