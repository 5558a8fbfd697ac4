//! Per-invocation limits: the operator's ceilings, a pack's requests, and
//! the effective values (requests clamped to ceilings). Pure data.

use serde::{Deserialize, Serialize};

/// Limits applied to one invocation. Every field is enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Limits {
    /// Maximum linear memory per memory, in bytes. Default 64 MiB.
    pub memory_bytes: u64,
    /// Fuel (deterministic instruction budget) per invocation. Default 10^10.
    pub fuel: u64,
    /// Wall clock per invocation, in milliseconds. Default 30 s.
    pub wall_clock_ms: u64,
    /// Maximum elements per table. Default 100 000.
    pub table_elements: u64,
    /// Maximum core/component instances per invocation (>= 64: componentized
    /// Python needs more than 16). Default 128.
    pub instances: u64,
    /// Maximum memories and tables per invocation. Default 128.
    pub memories_and_tables: u64,
    /// Maximum size of the node's output JSON, in bytes. Default 4 MiB.
    pub output_bytes: u64,
    /// Maximum bytes of log text (log interface + stdout + stderr) kept per
    /// invocation; the rest is dropped and counted. Default 256 KiB.
    pub log_bytes: u64,
    /// Maximum size of one log message, in bytes. Default 16 KiB.
    pub log_line_bytes: u64,
    /// Maximum number of host resources (streams, handles) a pack may hold
    /// at once. Default 1024.
    pub resource_entries: u64,
    /// Maximum size of one string or list a pack passes into a host call
    /// (tool arguments, fetch bodies), in bytes. Default 1 MiB.
    pub host_arg_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_bytes: 64 << 20,
            fuel: 10_000_000_000,
            wall_clock_ms: 30_000,
            table_elements: MAX_TABLE_ELEMENTS,
            instances: 128,
            memories_and_tables: 128,
            output_bytes: 4 << 20,
            log_bytes: 256 << 10,
            log_line_bytes: 16 << 10,
            resource_entries: 1024,
            host_arg_bytes: 1 << 20,
        }
    }
}

/// What a pack's manifest may request (`x-wop.limits`). Each request is
/// clamped to the operator's ceiling; a request can only tighten a limit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LimitRequest {
    /// Requested memory cap in bytes.
    pub memory_bytes: Option<u64>,
    /// Requested fuel per invocation.
    pub fuel: Option<u64>,
    /// Requested wall clock in milliseconds.
    pub wall_clock_ms: Option<u64>,
    /// Requested output cap in bytes.
    pub output_bytes: Option<u64>,
    /// Input-scaled fuel: `fuel` (the base) + this × the size of the
    /// inputs JSON in bytes, clamped to the operator's ceiling.
    pub fuel_per_input_byte: Option<u64>,
    /// Input-scaled fuel: + this × the number of items of the array at
    /// `itemsPointer` in the inputs.
    pub fuel_per_item: Option<u64>,
    /// JSON pointer (RFC 6901) to the inputs array counted by `fuelPerItem`.
    pub items_pointer: Option<String>,
}

impl LimitRequest {
    /// Checks that scaling fields come with a base and a pointer.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let scaled = self.fuel_per_input_byte.is_some() || self.fuel_per_item.is_some();
        if scaled && self.fuel.is_none() {
            return Err(("fuel", "input-scaled fuel needs a base `fuel`".to_owned()));
        }
        if self.fuel_per_item.is_some() != self.items_pointer.is_some() {
            return Err((
                "itemsPointer",
                "`fuelPerItem` and `itemsPointer` go together".to_owned(),
            ));
        }
        if let Some(p) = &self.items_pointer
            && !(p.is_empty() || p.starts_with('/'))
        {
            return Err((
                "itemsPointer",
                format!("`{p}` is not a JSON pointer (it must start with `/`)"),
            ));
        }
        Ok(())
    }

    /// The fuel for one invocation with `inputs`: the base plus the scaled
    /// parts, clamped to `ceiling`. `None` when the request does not scale.
    pub fn scaled_fuel(&self, ceiling: u64, inputs: &serde_json::Value) -> Option<u64> {
        if self.fuel_per_input_byte.is_none() && self.fuel_per_item.is_none() {
            return None;
        }
        let base = self.fuel.unwrap_or(0);
        let bytes = crate::json::size::text_len(inputs) as u64;
        let items = self
            .items_pointer
            .as_deref()
            .and_then(|p| inputs.pointer(p))
            .and_then(serde_json::Value::as_array)
            .map_or(0, |a| a.len() as u64);
        let fuel = base
            .saturating_add(self.fuel_per_input_byte.unwrap_or(0).saturating_mul(bytes))
            .saturating_add(self.fuel_per_item.unwrap_or(0).saturating_mul(items));
        Some(fuel.min(ceiling))
    }
}

/// One limit whose request was clamped, for `wop inspect`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Clamp {
    /// The limit's name.
    pub limit: &'static str,
    /// What the pack asked for.
    pub requested: u64,
    /// What it got.
    pub granted: u64,
}

impl Limits {
    /// Applies a pack's request: each requested value is taken if it is
    /// within the ceiling (`self`), otherwise the ceiling is kept and the
    /// clamp is reported.
    pub fn apply(&self, req: &LimitRequest) -> (Limits, Vec<Clamp>) {
        let mut out = *self;
        let mut clamps = Vec::new();
        let mut one = |name: &'static str, slot: &mut u64, ask: Option<u64>| {
            if let Some(ask) = ask {
                if ask <= *slot {
                    *slot = ask;
                } else {
                    clamps.push(Clamp {
                        limit: name,
                        requested: ask,
                        granted: *slot,
                    });
                }
            }
        };
        one("memoryBytes", &mut out.memory_bytes, req.memory_bytes);
        one("fuel", &mut out.fuel, req.fuel);
        one("wallClockMs", &mut out.wall_clock_ms, req.wall_clock_ms);
        one("outputBytes", &mut out.output_bytes, req.output_bytes);
        (out, clamps)
    }
}

/// The most elements one table can ever have: the engine's pool reserves
/// this many per table, and `limits.tableElements` is clamped to it (one
/// value, enforced by the store limiter with `cap.breached` `wasm-table`).
pub const MAX_TABLE_ELEMENTS: u64 = 100_000;

/// Longest tool id a pack may pass to a host call, in bytes.
pub const MAX_TOOL_ID_BYTES: usize = 512;
/// Longest URL a pack may pass to `http.safe-fetch`, in bytes.
pub const MAX_URL_BYTES: usize = 8192;
/// Longest header name a pack may pass to `http.safe-fetch`, in bytes.
pub const MAX_HEADER_NAME_BYTES: usize = 256;
/// Longest MCP server id or tool name a pack may pass, in bytes.
pub const MAX_MCP_NAME_BYTES: usize = 256;

/// Checks a pack-supplied identifier against its length cap **before** it
/// is stored, echoed into an event or hashed. The error names what was too
/// long and the cap, never echoes the value.
pub fn check_identifier(what: &str, value: &str, cap: usize) -> Result<(), String> {
    if value.len() > cap {
        return Err(format!(
            "the {what} is {} bytes long; the longest accepted is {cap} bytes",
            value.len()
        ));
    }
    Ok(())
}

/// `[limits]`: the same fields as [`Limits`], each optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LimitsSection {
    /// See [`Limits::memory_bytes`].
    pub memory_bytes: Option<u64>,
    /// See [`Limits::fuel`].
    pub fuel: Option<u64>,
    /// See [`Limits::wall_clock_ms`].
    pub wall_clock_ms: Option<u64>,
    /// See [`Limits::table_elements`].
    pub table_elements: Option<u64>,
    /// See [`Limits::instances`].
    pub instances: Option<u64>,
    /// See [`Limits::memories_and_tables`].
    pub memories_and_tables: Option<u64>,
    /// See [`Limits::output_bytes`].
    pub output_bytes: Option<u64>,
    /// See [`Limits::log_bytes`].
    pub log_bytes: Option<u64>,
    /// See [`Limits::log_line_bytes`].
    pub log_line_bytes: Option<u64>,
    /// See [`Limits::resource_entries`].
    pub resource_entries: Option<u64>,
    /// See [`Limits::host_arg_bytes`].
    pub host_arg_bytes: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fuel_scales_with_inputs_and_is_clamped() {
        let r = LimitRequest {
            fuel: Some(1000),
            fuel_per_input_byte: Some(2),
            fuel_per_item: Some(100),
            items_pointer: Some("/items".into()),
            ..Default::default()
        };
        r.validate().unwrap();
        let small = serde_json::json!({"items": [1]});
        let big = serde_json::json!({"items": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]});
        assert_eq!(r.scaled_fuel(u64::MAX, &small), Some(1000 + 2 * 13 + 100));
        assert_eq!(r.scaled_fuel(u64::MAX, &big), Some(1000 + 2 * 32 + 1000));
        assert_eq!(
            r.scaled_fuel(1500, &big),
            Some(1500),
            "clamped to the ceiling"
        );
        assert_eq!(LimitRequest::default().scaled_fuel(9, &big), None);
        let bad = LimitRequest {
            fuel_per_item: Some(1),
            ..Default::default()
        };
        assert!(bad.validate().is_err());
    }

    #[test]
    fn identifiers_are_bounded_without_echo() {
        assert!(check_identifier("tool id", "a:b", MAX_TOOL_ID_BYTES).is_ok());
        let long = "x".repeat(MAX_TOOL_ID_BYTES + 1);
        let e = check_identifier("tool id", &long, MAX_TOOL_ID_BYTES).unwrap_err();
        assert!(e.contains("513 bytes") && !e.contains("xxx"), "{e}");
    }

    #[test]
    fn requests_tighten_but_never_loosen() {
        let ceiling = Limits::default();
        let (l, clamps) = ceiling.apply(&LimitRequest {
            memory_bytes: Some(1 << 20),
            fuel: Some(u64::MAX),
            wall_clock_ms: None,
            output_bytes: Some(0),
            ..Default::default()
        });
        assert_eq!(l.memory_bytes, 1 << 20);
        assert_eq!(l.fuel, ceiling.fuel);
        assert_eq!(l.wall_clock_ms, ceiling.wall_clock_ms);
        assert_eq!(l.output_bytes, 0);
        assert_eq!(
            clamps,
            vec![Clamp {
                limit: "fuel",
                requested: u64::MAX,
                granted: ceiling.fuel
            }]
        );
    }
}
