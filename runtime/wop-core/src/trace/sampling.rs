//! Which traces are recorded: the OpenTelemetry samplers named by the
//! standard variables `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG`.
//! Pure: the decision depends only on the trace id and the caller's
//! `traceparent`, so every executor of a cluster decides the same way for
//! the same trace.
//!
//! Supported: `always_on`, `always_off`, `traceidratio`,
//! `parentbased_always_on` (the default, as in the OpenTelemetry SDKs),
//! `parentbased_always_off`, `parentbased_traceidratio`. A ratio outside
//! `[0, 1]` or not a number is 1.0 with a warning; an unknown sampler name
//! is the default with a warning (tracing never fails a start).

use crate::trace::TraceContext;

/// A sampler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampler {
    /// Every trace.
    AlwaysOn,
    /// No trace.
    AlwaysOff,
    /// Traces whose id falls under the ratio: the upper 63 bits of the
    /// trace id's last 8 bytes, compared with `ratio × 2⁶³` (the rule the
    /// OpenTelemetry Go and Rust SDKs use, so a collector-side sampler at
    /// the same ratio keeps the same traces).
    TraceIdRatio {
        /// `ratio × 2⁶³`, rounded down.
        bound: u64,
    },
    /// The caller's `sampled` flag when there is a `traceparent`; the root
    /// sampler otherwise.
    ParentBased(Root),
}

/// The root sampler of [`Sampler::ParentBased`] (no parent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Root {
    /// Every new trace.
    AlwaysOn,
    /// No new trace.
    AlwaysOff,
    /// New traces under the ratio (see [`Sampler::TraceIdRatio`]).
    TraceIdRatio {
        /// `ratio × 2⁶³`, rounded down.
        bound: u64,
    },
}

impl Default for Sampler {
    fn default() -> Self {
        Sampler::ParentBased(Root::AlwaysOn)
    }
}

/// `ratio × 2⁶³` for a ratio in `[0, 1]`.
fn bound(ratio: f64) -> u64 {
    if ratio >= 1.0 {
        1 << 63
    } else if ratio > 0.0 {
        // 2⁶³ is exact in f64; the product is below it.
        (ratio * 9_223_372_036_854_775_808.0) as u64
    } else {
        0
    }
}

fn under(bound: u64, trace_id: &[u8; 16]) -> bool {
    let mut low = [0u8; 8];
    low.copy_from_slice(&trace_id[8..]);
    (u64::from_be_bytes(low) >> 1) < bound
}

impl Sampler {
    /// The sampler the two variables name (`None`: unset), and a warning
    /// for an operator when a value was not understood.
    pub fn from_vars(sampler: Option<&str>, arg: Option<&str>) -> (Sampler, Option<String>) {
        let mut warning = None;
        let ratio = || -> (u64, Option<String>) {
            match arg.map(str::trim) {
                None | Some("") => (bound(1.0), None),
                Some(a) => match a.parse::<f64>() {
                    Ok(r) if (0.0..=1.0).contains(&r) => (bound(r), None),
                    _ => (
                        bound(1.0),
                        Some(format!(
                            "OTEL_TRACES_SAMPLER_ARG `{a}` is not a ratio in [0, 1]; sampling every trace"
                        )),
                    ),
                },
            }
        };
        let name = sampler.map(|s| s.trim().to_ascii_lowercase());
        let s = match name.as_deref() {
            None | Some("") | Some("parentbased_always_on") => Sampler::default(),
            Some("always_on") => Sampler::AlwaysOn,
            Some("always_off") => Sampler::AlwaysOff,
            Some("parentbased_always_off") => Sampler::ParentBased(Root::AlwaysOff),
            Some("traceidratio") => {
                let (b, w) = ratio();
                warning = w;
                Sampler::TraceIdRatio { bound: b }
            }
            Some("parentbased_traceidratio") => {
                let (b, w) = ratio();
                warning = w;
                Sampler::ParentBased(Root::TraceIdRatio { bound: b })
            }
            Some(other) => {
                warning = Some(format!(
                    "OTEL_TRACES_SAMPLER `{other}` is not supported (always_on, always_off, \
                     traceidratio, parentbased_always_on, parentbased_always_off, \
                     parentbased_traceidratio); using parentbased_always_on"
                ));
                Sampler::default()
            }
        };
        (s, warning)
    }

    /// Whether the trace `trace_id` is recorded, given the caller's
    /// context (`None`: a new trace).
    pub fn should_sample(&self, parent: Option<&TraceContext>, trace_id: &[u8; 16]) -> bool {
        match (self, parent) {
            (Sampler::AlwaysOn, _) => true,
            (Sampler::AlwaysOff, _) => false,
            (Sampler::TraceIdRatio { bound }, _) => under(*bound, trace_id),
            (Sampler::ParentBased(_), Some(p)) => p.sampled,
            (Sampler::ParentBased(Root::AlwaysOn), None) => true,
            (Sampler::ParentBased(Root::AlwaysOff), None) => false,
            (Sampler::ParentBased(Root::TraceIdRatio { bound }), None) => under(*bound, trace_id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u64) -> [u8; 16] {
        let mut t = [7u8; 16];
        t[8..].copy_from_slice(&n.to_be_bytes());
        t
    }

    fn parent(sampled: bool) -> TraceContext {
        TraceContext {
            trace_id: id(1),
            span_id: [1; 8],
            sampled,
        }
    }

    #[test]
    fn the_default_follows_the_parent_and_samples_new_traces() {
        let (s, w) = Sampler::from_vars(None, None);
        assert_eq!((s, w), (Sampler::ParentBased(Root::AlwaysOn), None));
        assert!(s.should_sample(None, &id(u64::MAX)));
        assert!(s.should_sample(Some(&parent(true)), &id(1)));
        assert!(!s.should_sample(Some(&parent(false)), &id(1)));
    }

    #[test]
    fn a_ratio_keeps_about_that_share_of_ids_and_decides_by_id_alone() {
        let (s, w) = Sampler::from_vars(Some("traceidratio"), Some("0.01"));
        assert_eq!(w, None);
        // Ids spread evenly over the 64-bit space: 1 % of them are kept.
        let n = 100_000u64;
        let step = u64::MAX / n;
        let kept = (0..n)
            .filter(|i| s.should_sample(None, &id(i * step)))
            .count();
        assert!((990..=1_010).contains(&kept), "{kept}");
        // A parent's flag does not matter to a non-parent-based sampler.
        assert!(s.should_sample(Some(&parent(false)), &id(0)));
        assert!(!s.should_sample(Some(&parent(true)), &id(u64::MAX)));
    }

    #[test]
    fn parent_based_ratio_uses_the_ratio_only_for_new_traces() {
        let (s, _) = Sampler::from_vars(Some("ParentBased_TraceIdRatio"), Some(" 0 "));
        assert!(!s.should_sample(None, &id(0)));
        assert!(s.should_sample(Some(&parent(true)), &id(u64::MAX)));
        let (one, _) = Sampler::from_vars(Some("parentbased_traceidratio"), Some("1"));
        assert!(one.should_sample(None, &id(u64::MAX)));
    }

    #[test]
    fn bad_values_warn_and_fall_back() {
        for arg in ["1.5", "-0.1", "abc", "NaN"] {
            let (s, w) = Sampler::from_vars(Some("traceidratio"), Some(arg));
            assert_eq!(s, Sampler::TraceIdRatio { bound: 1 << 63 }, "{arg}");
            assert!(w.is_some_and(|w| w.contains(arg)), "{arg}");
        }
        let (s, w) = Sampler::from_vars(Some("jaeger_remote"), None);
        assert_eq!(s, Sampler::default());
        assert!(w.is_some_and(|w| w.contains("jaeger_remote")));
        let (off, w) = Sampler::from_vars(Some("always_off"), None);
        assert_eq!(w, None);
        assert!(!off.should_sample(Some(&parent(true)), &id(0)));
    }
}
