//! Live delivery of one invocation's events to the runtime's
//! [`EventSink`]: what happened before the sandbox starts, then every event
//! the sandbox's log keeps as it is kept, then — in the report — only what
//! was not delivered yet. A host streaming events (`wop serve`'s
//! `text/event-stream`) sees each one once, in the report's order.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use wop_core::events::{Event, EventSink};
use wop_core::logbuf::Tap;
use wop_core::model::RunContext;

/// The sink of one invocation and how many of its events it has seen.
pub(super) struct Live {
    sink: Arc<dyn EventSink>,
    run_id: String,
    node_id: String,
    delivered: AtomicUsize,
}

impl Live {
    pub(super) fn new(sink: Arc<dyn EventSink>, ctx: &RunContext) -> Arc<Self> {
        Arc::new(Self {
            sink,
            run_id: ctx.run_id.clone(),
            node_id: ctx.node_id.clone(),
            delivered: AtomicUsize::new(0),
        })
    }

    fn emit(&self, event: &Event) {
        self.sink.emit(&self.run_id, &self.node_id, event);
        self.delivered.fetch_add(1, Ordering::Relaxed);
    }

    /// Delivers `events` now (they are the report's first events).
    pub(super) fn deliver(&self, events: &[Event]) {
        for e in events {
            self.emit(e);
        }
    }

    /// A tap for the sandbox's log: each kept event is delivered at once.
    pub(super) fn tap(self: &Arc<Self>) -> Tap {
        let me = self.clone();
        Tap::new(move |e| me.emit(e))
    }

    /// Delivers what `events` (the report's) holds past what was already
    /// delivered: the delivered events are its prefix, in order.
    pub(super) fn finish(&self, events: &[Event]) {
        let skip = self.delivered.load(Ordering::Relaxed).min(events.len());
        for e in &events[skip..] {
            self.sink.emit(&self.run_id, &self.node_id, e);
        }
    }
}
