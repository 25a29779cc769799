//! Tasks an actor spawns for work that must not block its mailbox (a model call, a tool call).
//!
//! Two rules hold for both, so they live in one helper: a panic inside the task is caught and
//! handed to the owner as a message (never a hang waiting for an answer that will not come),
//! and the task dies with its owner. An [`OwnedTask`] aborts on drop, which also covers an actor
//! that is killed (a killed actor skips `post_stop`, but its state is still dropped).
//!
//! A model call is *started* ([`start_guarded`]): it runs on the caller's turn up to its first
//! wait, and only the rest becomes a task. A new task is queued behind whatever the caller does
//! next: a delegated child's first model call started ~20 µs after its session was set up that
//! way, ~2 µs started in place. Tool calls are spawned: started in place, a delegation's
//! `delegate-task` reached the child's first model call later, not sooner (p50 24–33 against
//! 17–26 µs, alternated in one binary), the Dispatcher's turn being longer.

use std::future::Future;
use std::task::{Context, Poll, Waker};

use futures::FutureExt;
use tokio::task::JoinHandle;

/// A spawned task that is aborted when this handle is dropped (`None`: the work finished
/// where it started, see [`start_guarded`]).
#[derive(Debug)]
pub struct OwnedTask(Option<JoinHandle<()>>);

impl Drop for OwnedTask {
    fn drop(&mut self) {
        if let Some(task) = &self.0 {
            task.abort();
        }
    }
}

/// Spawn `work`; if it panics, `on_panic` runs with the panic's message instead.
pub fn spawn_guarded<F, P>(work: F, on_panic: P) -> OwnedTask
where
    F: Future<Output = ()> + Send + 'static,
    P: FnOnce(String) + Send + 'static,
{
    OwnedTask(Some(tokio::spawn(guarded(work, on_panic))))
}

/// [`spawn_guarded`], except that `work` first runs here, on the caller's turn, up to its first
/// wait, and only what is left is spawned. The work must not block: it runs inside the
/// caller's turn, as its own task would.
pub fn start_guarded<F, P>(work: F, on_panic: P) -> OwnedTask
where
    F: Future<Output = ()> + Send + 'static,
    P: FnOnce(String) + Send + 'static,
{
    let mut task = Box::pin(guarded(work, on_panic));
    // A waker that does nothing is enough: if the work waits, the spawned task polls it again
    // at once, which registers that task's own waker with whatever it waits on.
    let mut cx = Context::from_waker(Waker::noop());
    match task.as_mut().poll(&mut cx) {
        Poll::Ready(()) => OwnedTask(None),
        Poll::Pending => OwnedTask(Some(tokio::spawn(task))),
    }
}

/// `work`, with a panic inside it handed to `on_panic`.
async fn guarded<F, P>(work: F, on_panic: P)
where
    F: Future<Output = ()>,
    P: FnOnce(String),
{
    if let Err(panic) = std::panic::AssertUnwindSafe(work).catch_unwind().await {
        on_panic(panic_message(&*panic));
    }
}

/// The text of a caught panic (`panic!("…")` payloads), or a placeholder.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "no message".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_reaches_the_owner_as_its_message() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let _task = spawn_guarded(async { panic!("boom {}", 7) }, move |why| {
            let _ = tx.send(why);
        });
        assert_eq!(rx.await.unwrap(), "boom 7");
    }

    #[tokio::test]
    async fn started_work_runs_to_its_first_wait_at_once_and_the_rest_in_its_own_task() {
        let (step_tx, step_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = tokio::sync::oneshot::channel::<u32>();
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        let _task = start_guarded(
            async move {
                step_tx.send("started").unwrap();
                let n = go_rx.await.unwrap();
                let _ = done_tx.send(n + 1);
            },
            |_| {},
        );
        // Before this task yields even once, the work has run up to its wait.
        assert_eq!(step_rx.try_recv(), Ok("started"));
        go_tx.send(41).unwrap();
        assert_eq!(done_rx.await.unwrap(), 42);
    }

    #[tokio::test]
    async fn started_work_that_panics_reaches_the_owner_and_finished_work_spawns_nothing() {
        let (tx, rx) = std::sync::mpsc::channel();
        let task = start_guarded(async { panic!("boom at start") }, move |why| {
            tx.send(why).unwrap();
        });
        assert_eq!(rx.try_recv().unwrap(), "boom at start");
        assert!(task.0.is_none());
        assert!(start_guarded(async {}, |_| {}).0.is_none());
    }

    #[tokio::test]
    async fn dropping_the_handle_ends_the_task() {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = spawn_guarded(
            async move {
                let _keep = tx;
                std::future::pending::<()>().await;
            },
            |_| {},
        );
        drop(task);
        // The sender is dropped with the aborted task: the receiver sees it closed.
        assert!(rx.await.is_err());
    }
}
