//! Attribution of fuel and wall time to host calls, and the loop count.

use quanta::Instant;

/// Longest target (tool id, destination) kept per breakdown record.
pub(crate) const MAX_TARGET_BYTES: usize = wop_core::limits::MAX_TOOL_ID_BYTES;

/// Most host-call records kept per invocation (the rest are aggregated).
pub(crate) const MAX_CALL_RECORDS: usize = 4096;

/// Attribution of fuel and wall time to host calls, and usage counters.
///
/// Cheap on purpose: the call hook (which runs on every host transition,
/// libcalls included) only stores the fuel counter; the clock is read and a
/// record is kept only for the `openwop` calls our host functions label.
#[derive(Debug, Default)]
pub(crate) struct CallMeter {
    /// Set by the call hook on every host entry: fuel remaining, and when.
    pub pending: Option<(u64, Instant)>,
    /// The open, labeled host call.
    open: Option<(OpenCall, Instant)>,
    /// Fuel remaining at the last recorded host call (initially the limit).
    pub mark: u64,
    /// Recorded calls.
    records: Vec<OpenCall>,
    /// Tool-call rounds of the pack's own loop.
    pub loop_iterations: u64,
}

/// A host call being or having been recorded (no allocation for plain calls).
#[derive(Debug, Clone)]
struct OpenCall {
    interface: &'static str,
    target: Option<String>,
    fuel_before: u64,
    wall_us: u64,
}

impl CallMeter {
    pub(crate) fn new(fuel_limit: u64) -> Self {
        Self {
            mark: fuel_limit,
            ..Default::default()
        }
    }

    /// Labels the host call the hook just entered as ours.
    pub(crate) fn open(&mut self, interface: &'static str) {
        let Some((fuel, at)) = self.pending.take() else {
            return;
        };
        let rec = OpenCall {
            interface,
            target: None,
            fuel_before: self.mark.saturating_sub(fuel),
            wall_us: 0,
        };
        self.mark = fuel;
        self.open = Some((rec, at));
    }

    /// Names the target of the open call (a tool id, a destination).
    /// A pack-chosen target is cut to [`MAX_TARGET_BYTES`] first: the
    /// breakdown never holds more than that per record.
    pub(crate) fn target(&mut self, t: &str) {
        if let Some((rec, _)) = &mut self.open {
            rec.target = Some(wop_core::logbuf::cut(t, MAX_TARGET_BYTES));
        }
    }

    /// Called by the hook when a host call returns (at `now`).
    pub(crate) fn close(&mut self, now: Instant) {
        self.pending = None;
        if let Some((mut rec, at)) = self.open.take() {
            rec.wall_us =
                u64::try_from(now.saturating_duration_since(at).as_micros()).unwrap_or(u64::MAX);
            if self.records.len() < MAX_CALL_RECORDS {
                self.records.push(rec);
            } else if let Some(last) = self.records.last_mut() {
                // Past the cap: fold into the last record so sums stay exact.
                last.fuel_before += rec.fuel_before;
                last.wall_us += rec.wall_us;
                last.interface = "(aggregated)";
                last.target = None;
            }
        }
    }

    /// The recorded calls, for the usage report.
    pub(crate) fn records(&self) -> Vec<wop_core::model::HostCallRecord> {
        self.records
            .iter()
            .map(|r| wop_core::model::HostCallRecord {
                interface: r.interface.to_owned(),
                target: r.target.clone(),
                fuel_before: r.fuel_before,
                wall_us: r.wall_us,
            })
            .collect()
    }
}
