//! The lanes sessions' file work runs on: creating folders, staged files, trace files and
//! results (trace *lines* are written by their own thread, see [`crate::trace`]).
//!
//! That work can block for milliseconds on a busy disk, so it never runs on a runtime thread
//! (every session sharing that thread would wait). Nor does it get a blocking-pool thread per
//! job: when thousands of children start at once, hundreds of threads creating entries in the
//! same `children/` folder spend their time on that folder's lock, on the allocator and on
//! context switches, not on the disk. So a job waits for a permit of its [`Lane`], then runs on
//! the blocking pool.
//!
//! Two lanes, so that a session that is finishing (and will free its memory) never queues
//! behind thousands of sessions that are starting: [`Lane::Begin`] for a session's folder,
//! staged files and trace file, [`Lane::End`] for its result file.
//!
//! Flushes (`fsync`, [`crate::durable`]) take no lane: one can take seconds, and a queue of
//! creates must not wait behind it.

use crate::record_error::RecordError;
use tokio::sync::Semaphore;

/// How many jobs of one lane run at once in the whole process.
pub const PER_LANE: usize = 2;

static BEGIN: Semaphore = Semaphore::const_new(PER_LANE);
static END: Semaphore = Semaphore::const_new(PER_LANE);

/// Which queue a file job waits in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// A session setting up: its folders, staged files and trace file.
    Begin,
    /// A session finishing: its result file.
    End,
}

/// Run `job` on the blocking pool once `lane` has a free permit; `Err` only if the job
/// panicked.
pub async fn run<T, F>(lane: Lane, job: F) -> Result<T, RecordError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let permits = match lane {
        Lane::Begin => &BEGIN,
        Lane::End => &END,
    };
    // The semaphores are never closed, so acquiring cannot fail; if it ever did, run unbounded.
    let _permit = permits.acquire().await.ok();
    tokio::task::spawn_blocking(job)
        .await
        .map_err(|e| RecordError::Stopped {
            what: "a file job",
            cause: e.to_string(),
        })
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
