//! A process that runs one session on one thread: where its file work and trace writes run.
//!
//! The file lanes ([`crate::file_lane`]) and the trace thread ([`crate::trace`]) exist for a
//! process full of sessions: file work must not block a runtime thread other sessions share,
//! and ten thousand children's lines are best written by one thread, in batches. A `mur run` of
//! a capsule that cannot delegate has one session on one thread (`Threads::One`), which waits
//! for each of its file jobs and its trace's sync anyway. For it, handing each job to another
//! thread and back costs more than the job: three thread starts and eight wake-ups across
//! cores, about 0.5 ms of a 4 ms run on a 2-core VM, where an idle core can take a millisecond
//! to wake. So in solo mode a file job runs on the thread that awaits it, and trace lines are
//! written on the runtime thread once the task that appended them yields (still one write for
//! all the lines a step appends; see `trace::writer`).
//!
//! The mode is set once, before the first session starts, and never cleared.

use std::sync::atomic::{AtomicBool, Ordering};

static SOLO: AtomicBool = AtomicBool::new(false);

/// Run this process's file jobs and trace writes on the threads that ask for them: call it
/// before the first session starts, and only in a process that runs one session on a
/// current-thread runtime.
pub fn enable() {
    SOLO.store(true, Ordering::Relaxed);
}

/// Whether [`enable`] was called.
pub(crate) fn on() -> bool {
    SOLO.load(Ordering::Relaxed)
}
