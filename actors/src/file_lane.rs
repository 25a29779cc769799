//! The lanes sessions' file work runs on: creating folders, staged files, trace files and
//! results (trace *lines* are written by their own thread, see [`crate::trace`]).
//!
//! That work can block for milliseconds on a busy disk, so it never runs on a runtime thread
//! (every session sharing that thread would wait). Nor does it get a thread per job: when
//! thousands of children start at once, hundreds of threads creating entries in the same
//! `children/` folder spend their time on that folder's lock, on the allocator and on context
//! switches, not on the disk. So each lane is a queue that runs at most [`PER_LANE`] jobs at
//! once, on threads the two lanes share ([`crate::workers`]; a one-session run needs one): under
//! a backlog a thread goes from one job to the next without sleeping, where tokio's blocking
//! pool (with a semaphore bounding it) paid a thread wake-up and a task wake-up per job.
//!
//! Two lanes, so that a session that is finishing (and will free its memory) never queues
//! behind thousands of sessions that are starting: [`Lane::Begin`] for a session's folder,
//! staged files and trace file, [`Lane::End`] for its result file.
//!
//! Flushes (`fsync`, [`crate::durable`]) take no lane: one can take seconds, and a queue of
//! creates must not wait behind it.
//!
//! A process that runs one session on one thread ([`crate::solo`]) has no lanes: its jobs run
//! where they are awaited.

use crate::record_error::RecordError;
use crate::workers::Workers;
use tokio::sync::oneshot;

/// How many jobs of one lane run at once in the whole process.
pub const PER_LANE: usize = 2;

/// Both lanes' threads: `End` is lane 0, served first by a free thread, `Begin` lane 1.
static FILES: Workers<2> = Workers::new("mur-files", [PER_LANE, PER_LANE]);

/// Which queue a file job waits in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// A session setting up: its folders, staged files and trace file.
    Begin,
    /// A session finishing: its result file.
    End,
}

/// Run `job` on `lane`'s threads, after the jobs queued before it; `Err` only if the job
/// panicked or the lane could not start a thread.
pub async fn run<T, F>(lane: Lane, job: F) -> Result<T, RecordError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let stopped = |cause: String| RecordError::Stopped {
        what: "a file job",
        cause,
    };
    if crate::solo::on() {
        return std::panic::catch_unwind(std::panic::AssertUnwindSafe(job))
            .map_err(|panic| stopped(format!("it panicked: {}", panic_text(&*panic))));
    }
    let (tx, rx) = oneshot::channel();
    let task = Box::new(move || {
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
        let _ = tx.send(ran.map_err(|panic| panic_text(&*panic)));
    });
    FILES
        .push(index(lane), task)
        .map_err(|e| stopped(format!("no thread could start for it: {e}")))?;
    match rx.await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(panic)) => Err(stopped(format!("it panicked: {panic}"))),
        Err(_) => Err(stopped("it ended without an answer".into())),
    }
}

fn index(lane: Lane) -> usize {
    match lane {
        Lane::End => 0,
        Lane::Begin => 1,
    }
}

/// The message a panic carried, when it is text.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn at_most_lanes_jobs_run_at_once() {
        let running = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let jobs: Vec<_> = (0..16)
            .map(|_| {
                let (running, peak) = (running.clone(), peak.clone());
                tokio::spawn(run(Lane::Begin, move || {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_millis(5));
                    running.fetch_sub(1, Ordering::SeqCst);
                }))
            })
            .collect();
        for j in jobs {
            j.await.unwrap().unwrap();
        }
        assert!(peak.load(Ordering::SeqCst) <= PER_LANE);
    }

    #[tokio::test]
    async fn a_panicking_job_is_an_error_not_a_panic() {
        let r: Result<(), RecordError> = run(Lane::End, || panic!("boom")).await;
        assert!(matches!(
            r,
            Err(RecordError::Stopped {
                what: "a file job",
                ..
            })
        ));
    }
}
