//! Where a gate call's audit events go, as they happen.
//!
//! A session records into the invocation's bounded log at once, so a host
//! streaming the log (a tap) shows `agent.tool-called` while the tool is
//! still running; tests and buffered paths collect into a `Vec`.

use wop_core::events::Event;
use wop_core::logbuf::{SharedLog, with_log};

/// Receives a call's audit events in order.
pub trait Audit: Send + std::fmt::Debug {
    /// One event.
    fn push(&mut self, event: Event);

    /// Several events, in order.
    fn extend(&mut self, events: Vec<Event>) {
        for e in events {
            self.push(e);
        }
    }
}

impl Audit for Vec<Event> {
    fn push(&mut self, event: Event) {
        Vec::push(self, event);
    }
}

/// Records each event in an invocation's bounded log when it happens.
#[derive(Debug)]
pub struct LogAudit<'a>(pub &'a SharedLog);

impl Audit for LogAudit<'_> {
    fn push(&mut self, event: Event) {
        with_log(self.0, |l| l.record(event));
    }
}
