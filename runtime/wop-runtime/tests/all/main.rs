//! Integration tests: real packs (built from sample-packs/ by the
//! wop-test-packs build script) through the real runtime.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod abi_v1;
mod cache;
mod credentials;
mod egress;
mod filesystem;
mod fuel_per_byte;
mod gate;
mod generated_modules;
mod hardening;
mod hardening_limits;
mod hardening_outcome;
mod hardening_store;
mod hostile;
mod idle_stacks;
mod manifest;
mod mcp;
mod metering;
mod packfiles;
mod replay;
mod samples;
mod traces;
mod trust;

use serde_json::Value;
use std::path::{Path, PathBuf};
use wop_runtime::{Event, InvocationReport, InvokeRequest, Policy, Runtime, RuntimeConfig};

/// A runtime with `policy` (TOML) and no disk cache.
pub fn runtime(policy: &str) -> Runtime {
    let mut cfg = RuntimeConfig::new();
    cfg.policy(Policy::from_toml(policy).expect("policy"));
    Runtime::new(&cfg).expect("runtime")
}

/// The assembled pack directory of a sample or testing pack.
pub fn pack(name: &str) -> PathBuf {
    wop_test_packs::pack_dir(name)
}

/// Loads `name` into `rt`, panicking with the load error.
pub async fn load(rt: &Runtime, name: &str) {
    if let Err(e) = rt.load_pack(&pack(name)).await {
        panic!("loading {name}: {e}");
    }
}

pub async fn invoke(rt: &Runtime, type_id: &str, inputs: Value) -> InvocationReport {
    rt.invoke(InvokeRequest::new(type_id, inputs)).await
}

/// The `cap.breached` kinds in a report.
pub fn breaches(r: &InvocationReport) -> Vec<String> {
    r.events
        .iter()
        .filter_map(|e| match e {
            Event::CapBreached { kind, .. } => Some(kind.to_string()),
            _ => None,
        })
        .collect()
}

/// The log lines in a report.
pub fn logs(r: &InvocationReport) -> Vec<String> {
    r.events
        .iter()
        .filter_map(|e| match e {
            Event::LogAppended { message, .. } => Some(message.clone()),
            _ => None,
        })
        .collect()
}

/// Copies a pack directory so a test can modify it.
pub fn copy_pack(name: &str, to: &Path) -> PathBuf {
    let dst = to.join(name);
    std::fs::create_dir_all(&dst).unwrap();
    for e in std::fs::read_dir(pack(name)).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
    }
    dst
}
