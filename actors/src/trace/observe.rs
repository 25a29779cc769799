//! One optional watcher of every trace line, as it is appended: the CLI's live progress.
//!
//! The kernel writes lines; what a person sees while they are written is the CLI's business.
//! So the CLI may install one [`Observer`] for the process, and [`super::TraceLog::append`]
//! shows it each event before buffering it. Without one (a piped run, every test but the
//! terminal's) an append pays one atomic load.

use std::sync::OnceLock;

use super::TraceEvent;

/// Sees every trace line of the process as it is appended. Called on the emitter's thread
/// (often a runtime thread): it must return at once, handing the event on rather than
/// drawing or writing anything itself.
pub trait Observer: Send + Sync + 'static {
    /// `event` is about to be written to the trace of `session_id`.
    fn line(&self, session_id: &str, event: &TraceEvent);
}

static OBSERVER: OnceLock<Box<dyn Observer>> = OnceLock::new();

/// Install the process's observer; `false` (and `observer` dropped) if one is already set.
pub fn set_observer(observer: Box<dyn Observer>) -> bool {
    OBSERVER.set(observer).is_ok()
}

/// Show `event` to the observer, if there is one.
#[inline]
pub(super) fn notify(session_id: &str, event: &TraceEvent) {
    if let Some(o) = OBSERVER.get() {
        o.line(session_id, event);
    }
}
