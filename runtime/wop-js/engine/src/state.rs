//! The engine's one piece of state: the QuickJS runtime and context with
//! the pack loaded, set at build time and carried into every instance by
//! the snapshot.

use crate::exports::openwop::node_pack::node::{NodeInfo, PackInfo};
use rquickjs::{Context, Object, Persistent, Runtime};
use std::cell::RefCell;

pub(crate) struct State {
    /// Owned here so the runtime lives as long as the context.
    #[allow(dead_code)]
    pub(crate) runtime: Runtime,
    pub(crate) context: Context,
    /// The prelude's internal object: `dispatch`, `advanceTimers`.
    pub(crate) internal: Persistent<Object<'static>>,
    pub(crate) info: PackInfo,
}

thread_local! {
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
}

/// Stores the state (build time, once).
pub(crate) fn set(state: State) {
    STATE.with(|s| *s.borrow_mut() = Some(state));
}

/// Runs `f` with the state; `None` if the engine was never initialized
/// (an engine that was not built by `wop`).
pub(crate) fn with<R>(f: impl FnOnce(&State) -> R) -> Option<R> {
    STATE.with(|s| s.borrow().as_ref().map(f))
}

/// `describe()`: the manifest's identity, recorded at build time.
pub(crate) fn describe() -> PackInfo {
    with(|s| s.info.clone()).unwrap_or_else(|| PackInfo {
        name: String::new(),
        version: String::new(),
        nodes: Vec::<NodeInfo>::new(),
    })
}
