//! Small named pools of long-lived threads, each with one first-in, first-out queue: where the
//! kernel's blocking file work runs ([`crate::file_lane`], [`crate::durable`]).
//!
//! Why not tokio's blocking pool: a `spawn_blocking` job wakes an idle pool thread (a futex
//! wake and a context switch), and that thread goes back to sleep when the job is done, so a
//! lane that runs ten thousand children's jobs two at a time paid a sleep and a wake-up per job
//! (with the semaphore that bounded it, a task wake-up more). Here a thread that finishes a job
//! takes the next one from the queue without sleeping, and pushing a job costs a system call
//! only when a thread is asleep waiting for work.
//!
//! Threads start as work arrives, up to the pool's bound, and are never stopped: a pool a run
//! never uses costs nothing. They run at batch priority ([`batch_priority`]), as the trace thread
//! does: creating a child's files must not preempt the runtime thread that is starting the next
//! child.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

/// One job for a pool's threads.
pub type Task = Box<dyn FnOnce() + Send>;

/// A pool of at most `max` threads named `name`, taking jobs in the order they were pushed.
pub struct Workers {
    name: &'static str,
    max: usize,
    queue: Mutex<Queue>,
    ready: Condvar,
}

struct Queue {
    jobs: VecDeque<Task>,
    /// Threads waiting on `ready`.
    idle: usize,
    threads: usize,
}

impl Workers {
    /// A pool that starts no thread until its first job.
    pub const fn new(name: &'static str, max: usize) -> Self {
        Workers {
            name,
            max,
            queue: Mutex::new(Queue {
                jobs: VecDeque::new(),
                idle: 0,
                threads: 0,
            }),
            ready: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        // A job runs outside the lock, so a panic never leaves the queue half-changed.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queue `task`; a thread runs it once the jobs pushed before it have started. A new
    /// thread starts when none is idle and the bound allows. `Err` (the task dropped, not run)
    /// only when the pool has no thread and none could start.
    pub fn push(&'static self, task: Task) -> std::io::Result<()> {
        let mut q = self.lock();
        q.jobs.push_back(task);
        if q.idle > 0 {
            drop(q);
            self.ready.notify_one();
            return Ok(());
        }
        if q.threads < self.max {
            let spawned = std::thread::Builder::new()
                .name(self.name.into())
                .spawn(move || {
                    batch_priority();
                    self.work()
                });
            match spawned {
                Ok(_) => q.threads += 1,
                Err(e) if q.threads == 0 => {
                    q.jobs.pop_back();
                    return Err(e);
                }
                // The threads already running take it.
                Err(_) => {}
            }
        }
        Ok(())
    }

    fn work(&self) -> ! {
        loop {
            let task = {
                let mut q = self.lock();
                loop {
                    if let Some(task) = q.jobs.pop_front() {
                        break task;
                    }
                    q.idle += 1;
                    q = self.ready.wait(q).unwrap_or_else(|p| p.into_inner());
                    q.idle -= 1;
                }
            };
            task();
        }
    }
}

/// Background work (writing traces, creating session files, flushing) must not preempt a
/// runtime thread when its thread wakes up (on two cores that costs a turn milliseconds).
/// `SCHED_BATCH` says so to Linux, for the calling thread; failing to set it is harmless.
pub fn batch_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: sched_setscheduler only reads the struct we pass; pid 0 is the calling thread.
    unsafe {
        let param = libc::sched_param { sched_priority: 0 };
        let _ = libc::sched_setscheduler(0, libc::SCHED_BATCH, &param);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{mpsc, Arc};

    #[test]
    fn jobs_run_in_order_on_at_most_max_threads() {
        static POOL: Workers = Workers::new("mur-test-workers", 1);
        let (tx, rx) = mpsc::channel();
        for i in 0..100 {
            let tx = tx.clone();
            POOL.push(Box::new(move || tx.send(i).unwrap())).unwrap();
        }
        let got: Vec<i32> = rx.iter().take(100).collect();
        assert_eq!(got, (0..100).collect::<Vec<_>>());
        assert_eq!(POOL.lock().threads, 1);
    }

    #[test]
    fn busy_threads_are_joined_by_new_ones_up_to_the_bound() {
        static POOL: Workers = Workers::new("mur-test-workers", 3);
        let (release, hold) = mpsc::channel::<()>();
        let hold = Arc::new(Mutex::new(hold));
        let started = Arc::new(AtomicUsize::new(0));
        let (done_tx, done) = mpsc::channel();
        for _ in 0..6 {
            let (hold, started, done_tx) = (hold.clone(), started.clone(), done_tx.clone());
            POOL.push(Box::new(move || {
                started.fetch_add(1, Ordering::SeqCst);
                let _ = hold.lock().unwrap().recv();
                done_tx.send(()).unwrap();
            }))
            .unwrap();
        }
        for _ in 0..6 {
            release.send(()).unwrap();
        }
        for _ in 0..6 {
            done.recv().unwrap();
        }
        assert_eq!(started.load(Ordering::SeqCst), 6);
        assert_eq!(POOL.lock().threads, 3);
    }
}
