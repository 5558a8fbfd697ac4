//! The console's sign-in sessions, in memory: a random id (the cookie's
//! value) → the operator who signed in, until when. Bounded: expired
//! sessions are dropped on each sign-in, and beyond [`MAX_SESSIONS`] the
//! oldest goes.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use wop_runtime::Principal;

/// How long a session lasts (the cookie's `Max-Age` too).
pub(super) const TTL: Duration = Duration::from_secs(8 * 3600);
/// Sessions kept at most (the oldest is dropped beyond).
const MAX_SESSIONS: usize = 1024;

/// Console sessions: random id → who signed in, until when.
#[derive(Default)]
pub(crate) struct Sessions {
    map: Mutex<HashMap<String, (Principal, Instant)>>,
}

impl Sessions {
    /// A new session for `p`: its id, 64 hex digits.
    pub(super) fn open(&self, p: Principal) -> String {
        let id = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        if let Ok(mut m) = self.map.lock() {
            let now = Instant::now();
            m.retain(|_, (_, until)| *until > now);
            if m.len() >= MAX_SESSIONS
                && let Some(oldest) = m
                    .iter()
                    .min_by_key(|(_, (_, t))| *t)
                    .map(|(k, _)| k.clone())
            {
                m.remove(&oldest);
            }
            m.insert(id.clone(), (p, now + TTL));
        }
        id
    }

    /// Who signed in under `id`, if the session is still open.
    pub(super) fn get(&self, id: &str) -> Option<Principal> {
        let m = self.map.lock().ok()?;
        m.get(id)
            .filter(|(_, until)| *until > Instant::now())
            .map(|(p, _)| p.clone())
    }

    /// Ends the session `id` (sign-out).
    pub(super) fn close(&self, id: &str) {
        if let Ok(mut m) = self.map.lock() {
            m.remove(id);
        }
    }
}
