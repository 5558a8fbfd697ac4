//! Enforces the memory/table/instance caps and records what was observed.

use wasmtime::ResourceLimiter;
use wop_core::classify::Fault;
use wop_core::limits::Limits;

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
    /// The breach, if one happened.
    pub breach: Option<Fault>,
}

impl Limiter {
    pub(crate) fn new(l: &Limits) -> Self {
        Self {
            memory_cap: l.memory_bytes,
            table_cap: l.table_elements.min(wop_core::limits::MAX_TABLE_ELEMENTS),
            instances: usize::try_from(l.instances).unwrap_or(usize::MAX),
            memories_and_tables: usize::try_from(l.memories_and_tables).unwrap_or(usize::MAX),
            memory_total: 0,
            memory_peak: 0,
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
