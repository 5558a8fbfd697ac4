//! Enforces the memory/table/instance caps and records what was observed,
//! and checks the tables a binary declares before it is compiled.
//!
//! Tables have one limit: `limits.tableElements`, at most
//! [`MAX_TABLE_ELEMENTS`] (what the engine's pool holds per table). Growth
//! past it is `sandbox_memory_exceeded` (`cause: table-growth`) with
//! `cap.breached{wasm-table}`; a declared minimum past it refuses the pack
//! at load with the same code (`cause: table-size`); the largest table
//! reached is `usage.peakTableElements`.

use wasmtime::ResourceLimiter;
use wop_core::classify::Fault;
use wop_core::error::{ErrorCode, LoadError};
use wop_core::limits::{Limits, MAX_TABLE_ELEMENTS};

/// Enforces the memory/table/instance caps and records what was observed.
#[derive(Debug)]
pub(crate) struct Limiter {
    memory_cap: u64,
    table_cap: u64,
    instances: usize,
    memories_and_tables: usize,
    /// Current total linear memory over all memories.
    pub memory_total: u64,
    /// Highest total linear memory reached.
    pub memory_peak: u64,
    /// Most elements any one table reached.
    pub table_peak: u64,
    /// The breach, if one happened.
    pub breach: Option<Fault>,
}

impl Limiter {
    pub(crate) fn new(l: &Limits) -> Self {
        Self {
            memory_cap: l.memory_bytes,
            table_cap: table_cap(l),
            instances: usize::try_from(l.instances).unwrap_or(usize::MAX),
            memories_and_tables: usize::try_from(l.memories_and_tables).unwrap_or(usize::MAX),
            memory_total: 0,
            memory_peak: 0,
            table_peak: 0,
            breach: None,
        }
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let grow = (desired as u64).saturating_sub(current as u64);
        let total = self.memory_total.saturating_add(grow);
        if total > self.memory_cap {
            self.breach.get_or_insert(Fault::Memory {
                limit: self.memory_cap,
                observed: total,
            });
            return Err(wasmtime::Error::msg(format!(
                "linear memory cap exceeded: {total} > {}",
                self.memory_cap
            )));
        }
        self.memory_total = total;
        self.memory_peak = self.memory_peak.max(total);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired as u64 > self.table_cap {
            self.breach.get_or_insert(Fault::Table {
                limit: self.table_cap,
                observed: desired as u64,
            });
            return Err(wasmtime::Error::msg(format!(
                "table cap exceeded: {desired} > {}",
                self.table_cap
            )));
        }
        self.table_peak = self.table_peak.max(desired as u64);
        Ok(true)
    }

    fn instances(&self) -> usize {
        self.instances
    }
    fn tables(&self) -> usize {
        self.memories_and_tables
    }
    fn memories(&self) -> usize {
        self.memories_and_tables
    }
}

/// The table limit of `l`: `tableElements`, never above what the engine
/// holds.
pub(crate) fn table_cap(l: &Limits) -> u64 {
    l.table_elements.min(MAX_TABLE_ELEMENTS)
}

/// Refuses a binary (a core module, or a component with every core module
/// nested in it) that declares a table whose minimum is above `cap`: it
/// could never be instantiated, so it gets the table limit's code at load
/// rather than a compile error. Malformed binaries pass: compilation
/// reports them.
pub(crate) fn check_declared_tables(bytes: &[u8], cap: u64) -> Result<(), LoadError> {
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        let Ok(wasmparser::Payload::TableSection(tables)) = payload else {
            continue;
        };
        for table in tables.into_iter().flatten() {
            let declared = table.ty.initial;
            if declared > cap {
                return Err(LoadError::Limit {
                    code: ErrorCode::SandboxMemoryExceeded,
                    cause: "table-size",
                    limit: cap,
                    observed: declared,
                    message: format!(
                        "the pack declares a table of {declared} elements; the limit is {cap} \
                         (limits.tableElements)"
                    ),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn declared_tables_are_checked_in_modules_and_components() {
        let module = |n: u32| wat::parse_str(format!("(module (table {n} funcref))")).unwrap();
        assert!(check_declared_tables(&module(10), 10).is_ok());
        let e = check_declared_tables(&module(11), 10).unwrap_err();
        assert_eq!(e.code(), ErrorCode::SandboxMemoryExceeded);
        assert_eq!(e.details()["cause"], "table-size");
        assert_eq!(e.details()["observed"], 11);
        let component = wat::parse_str("(component (core module (table 11 funcref)))").unwrap();
        assert!(check_declared_tables(&component, 10).is_err());
        assert!(check_declared_tables(b"not wasm", 10).is_ok());
    }
}
