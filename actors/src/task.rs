//! Tasks an actor spawns for work that must not block its mailbox (a model call, a tool call).
//!
//! Two rules hold for both, so they live in one helper: a panic inside the task is caught and
//! handed to the owner as a message (never a hang waiting for an answer that will not come),
//! and the task dies with its owner. An [`OwnedTask`] aborts on drop, which also covers an actor
//! that is killed (a killed actor skips `post_stop`, but its state is still dropped).

use std::future::Future;

use futures::FutureExt;
use tokio::task::JoinHandle;

/// A spawned task that is aborted when this handle is dropped.
#[derive(Debug)]
pub struct OwnedTask(JoinHandle<()>);

impl Drop for OwnedTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Spawn `work`; if it panics, `on_panic` runs with the panic's message instead.
pub fn spawn_guarded<F, P>(work: F, on_panic: P) -> OwnedTask
where
    F: Future<Output = ()> + Send + 'static,
    P: FnOnce(String) + Send + 'static,
{
    OwnedTask(tokio::spawn(async move {
        if let Err(panic) = std::panic::AssertUnwindSafe(work).catch_unwind().await {
            on_panic(panic_message(&*panic));
        }
    }))
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
