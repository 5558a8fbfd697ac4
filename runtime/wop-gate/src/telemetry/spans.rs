//! One invocation's trace, as the gate sees it: the invocation's span
//! context (host calls are its children) and where the finished spans of
//! its host calls are collected ([`TraceSite`]); each gate call starts and
//! ends one of them. The runtime adds the invocation's own span and hands
//! them all to the exporter ([`super::otlp`]).

use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use wop_core::trace::{Attr, Span, TraceContext};

thread_local! {
    /// This thread's id generator: ChaCha12 (a CSPRNG, as the W3C trace
    /// context asks ids to be random), seeded once from the OS. Three
    /// `getrandom` syscalls per traced invocation before; none now.
    static IDS: RefCell<StdRng> = RefCell::new(StdRng::from_seed(seed()));
}

/// 32 bytes from the OS; without OS randomness, from the clock, the
/// thread and a counter: still unique enough for a trace, and tracing
/// must never fail a call.
fn seed() -> [u8; 32] {
    let mut seed = [0u8; 32];
    if getrandom::fill(&mut seed).is_err() {
        static SEEDS: AtomicU64 = AtomicU64::new(0);
        let thread = {
            use std::hash::{Hash as _, Hasher as _};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            std::thread::current().id().hash(&mut h);
            h.finish()
        };
        let parts = [
            now_ns(),
            u64::from(std::process::id()),
            SEEDS.fetch_add(1, Ordering::Relaxed),
            thread,
        ];
        for (chunk, p) in seed.chunks_mut(8).zip(parts) {
            chunk.copy_from_slice(&p.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes());
        }
    }
    seed
}

/// Random bytes from this thread's generator, never all zero.
fn random_id<const N: usize>() -> [u8; N] {
    let mut id = [0u8; N];
    IDS.with(|rng| {
        let mut rng = rng.borrow_mut();
        while id == [0; N] {
            rng.fill_bytes(&mut id);
        }
    });
    id
}

/// A fresh random span id (never all zero).
pub fn new_span_id() -> [u8; 8] {
    random_id()
}

/// A fresh random trace id (never all zero).
pub fn new_trace_id() -> [u8; 16] {
    random_id()
}

/// Nanoseconds since the Unix epoch.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The trace of one invocation.
#[derive(Debug, Clone)]
pub struct TraceSite {
    /// The trace and the invocation's span (the parent of host calls).
    pub ctx: TraceContext,
    /// The finished spans of its host calls.
    pub spans: Arc<Mutex<Vec<Span>>>,
}

impl TraceSite {
    /// Records a finished span (bounded: a pack making millions of calls
    /// keeps the first [`MAX_SPANS`]).
    pub fn record(&self, span: Span) {
        if !self.ctx.sampled {
            return;
        }
        let mut g = match self.spans.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if g.len() < MAX_SPANS {
            g.push(span);
        }
    }

    /// Takes the recorded spans.
    pub fn take(&self) -> Vec<Span> {
        let mut g = match self.spans.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        std::mem::take(&mut *g)
    }
}

/// Most host-call spans one invocation keeps.
pub const MAX_SPANS: usize = 4096;

/// A host call's span, started.
#[derive(Debug, Clone)]
pub(crate) struct Started {
    pub site: TraceSite,
    pub span_id: [u8; 8],
    pub start_ns: u64,
}

impl Started {
    pub(crate) fn begin(site: &TraceSite) -> Started {
        Started {
            site: site.clone(),
            span_id: new_span_id(),
            start_ns: now_ns(),
        }
    }

    /// The `traceparent` the call carries on to what it reaches.
    pub(crate) fn traceparent(&self) -> String {
        self.site.ctx.child(self.span_id).header()
    }

    /// Records the finished span of the call of `tool_id`.
    pub(crate) fn end(
        &self,
        tool_id: &str,
        call_id: &str,
        attrs: Vec<(&'static str, Attr)>,
        error: Option<String>,
    ) {
        let mut attributes = vec![
            ("openwop.tool_name", Attr::str(tool_id)),
            ("openwop.call_id", Attr::str(call_id)),
        ];
        attributes.extend(attrs);
        self.site.record(Span {
            trace_id: self.site.ctx.trace_id,
            span_id: self.span_id,
            parent: Some(self.site.ctx.span_id),
            name: wop_core::trace::activity_span_name(tool_id).to_owned(),
            start_ns: self.start_ns,
            end_ns: now_ns(),
            client: true,
            attributes,
            error,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ids are never zero and never repeat, within a thread and across
    /// threads (each seeds its own generator).
    #[test]
    fn ids_are_non_zero_and_distinct_across_threads() {
        let ids = |n| {
            (0..n)
                .map(|_| (new_trace_id(), new_span_id()))
                .collect::<Vec<_>>()
        };
        let mut all = ids(1000);
        let others: Vec<_> = (0..4)
            .map(|_| std::thread::spawn(move || ids(1000)))
            .collect();
        for t in others {
            all.extend(t.join().unwrap());
        }
        assert!(all.iter().all(|(t, s)| *t != [0; 16] && *s != [0; 8]));
        let traces: std::collections::HashSet<_> = all.iter().map(|(t, _)| *t).collect();
        let spans: std::collections::HashSet<_> = all.iter().map(|(_, s)| *s).collect();
        assert_eq!((traces.len(), spans.len()), (5000, 5000));
    }

    #[test]
    fn an_invocation_keeps_at_most_max_spans() {
        let site = TraceSite {
            ctx: TraceContext {
                trace_id: new_trace_id(),
                span_id: new_span_id(),
                sampled: true,
            },
            spans: Default::default(),
        };
        for i in 0..MAX_SPANS + 100 {
            Started::begin(&site).end("crm:read", &format!("c{i}"), Vec::new(), None);
        }
        let spans = site.take();
        assert_eq!(spans.len(), MAX_SPANS);
        assert!(spans.iter().all(|s| s.parent == Some(site.ctx.span_id)));
        assert!(site.take().is_empty());
    }
}
