//! The async runtime a command runs on, sized to what the command can do at once.
//!
//! A capsule that cannot delegate has one conversation: its turns are sequential, its tool
//! calls run one at a time, and its commands are processes. On a runtime with a worker per
//! core, each hop of a turn (the model's answer to the Session, the Session to its Dispatcher,
//! the tool's result back) that leaves two tasks runnable wakes a parked worker on the other
//! core, and on an idle machine (a VM above all) that wake-up is the dearest part of the turn.
//! So such a run gets [`Threads::One`]: every task on the thread that drives it. A capsule
//! that can delegate runs its children side by side, one worker per core ([`Threads::PerCore`]).

/// How many threads run tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Threads {
    /// Every task on the calling thread (a current-thread runtime).
    One,
    /// One worker per core (tokio's default, or `TOKIO_WORKER_THREADS`).
    PerCore,
}

/// Build the runtime (I/O, timers and signals enabled).
pub fn build(threads: Threads) -> std::io::Result<tokio::runtime::Runtime> {
    match threads {
        Threads::One => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        Threads::PerCore => tokio::runtime::Runtime::new(),
    }
}
