//! Small named pools of long-lived threads with first-in, first-out queues: where the kernel's
//! blocking file work runs ([`crate::file_lane`], [`crate::durable`]).
//!
//! Why not tokio's blocking pool: a `spawn_blocking` job wakes an idle pool thread (a futex
//! wake and a context switch), and that thread goes back to sleep when the job is done, so a
//! lane that runs ten thousand children's jobs two at a time paid a sleep and a wake-up per job
//! (with the semaphore that bounded it, a task wake-up more). Here a thread that finishes a job
//! takes the next one from the queue without sleeping, and pushing a job costs a system call
//! only when a thread is asleep waiting for work.
//!
//! A pool has `N` queues (lanes), each with its own bound on the jobs of that lane running at
//! once; a free thread serves the lowest-numbered lane that has a job and room. So the lanes
//! share their threads (a run with one session needs one thread for its setup and its end)
//! while a lane never waits behind another lane's backlog.
//!
//! Threads start as work arrives, up to the sum of the lanes' bounds, and are never stopped: a
//! pool a run never uses costs nothing. They run at batch priority ([`batch_priority`]), as the
//! trace thread does: creating a child's files must not preempt the runtime thread that is
//! starting the next child.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

/// One job for a pool's threads.
pub type Task = Box<dyn FnOnce() + Send>;

/// A pool of threads named `name` serving `N` lanes; lane `i` runs at most `caps[i]` jobs at
/// once, each lane's jobs in the order they were pushed.
pub struct Workers<const N: usize> {
    name: &'static str,
    caps: [usize; N],
    queue: Mutex<Queue<N>>,
    ready: Condvar,
}

struct Queue<const N: usize> {
    jobs: [VecDeque<Task>; N],
    running: [usize; N],
    /// Threads waiting on `ready`.
    idle: usize,
    /// Of those, how many were notified and have not woken yet.
    woken: usize,
    threads: usize,
}

impl<const N: usize> Workers<N> {
    /// A pool that starts no thread until its first job.
    pub const fn new(name: &'static str, caps: [usize; N]) -> Self {
        Workers {
            name,
            caps,
            queue: Mutex::new(Queue {
                jobs: [const { VecDeque::new() }; N],
                running: [0; N],
                idle: 0,
                woken: 0,
                threads: 0,
            }),
            ready: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queue<N>> {
        // A job runs outside the lock, so a panic never leaves the queue half-changed.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queue `task` on `lane`; a thread runs it once the lane's jobs pushed before it have
    /// started and the lane has room. A new thread starts when none is free to take it and the
    /// bounds allow. `Err` (the task dropped, not run) only when the pool has no thread and none
    /// could start.
    pub fn push(&'static self, lane: usize, task: Task) -> std::io::Result<()> {
        let mut q = self.lock();
        q.jobs[lane].push_back(task);
        if q.running[lane] >= self.caps[lane] {
            // A thread running one of this lane's jobs takes it when that job is done.
            return Ok(());
        }
        if q.idle > q.woken {
            q.woken += 1;
            drop(q);
            self.ready.notify_one();
            return Ok(());
        }
        if q.threads < self.caps.iter().sum() {
            let spawned = std::thread::Builder::new()
                .name(self.name.into())
                .spawn(move || {
                    batch_priority();
                    self.work()
                });
            match spawned {
                Ok(_) => q.threads += 1,
                Err(e) if q.threads == 0 => {
                    q.jobs[lane].pop_back();
                    return Err(e);
                }
                // The threads already running take it.
                Err(_) => {}
            }
        }
        Ok(())
    }

    /// The lowest lane with a job waiting and room to run it.
    fn next(&self, q: &mut Queue<N>) -> Option<(usize, Task)> {
        let lane = (0..N).find(|&l| q.running[l] < self.caps[l] && !q.jobs[l].is_empty())?;
        let task = q.jobs[lane].pop_front()?;
        q.running[lane] += 1;
        Some((lane, task))
    }

    fn work(&self) -> ! {
        let mut q = self.lock();
        loop {
            match self.next(&mut q) {
                Some((lane, task)) => {
                    drop(q);
                    // A job that panics loses only itself: the thread, and its lane's place,
                    // carry on (the panic hook has printed it).
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(task));
                    q = self.lock();
                    q.running[lane] -= 1;
                }
                None => {
                    q.idle += 1;
                    q = self.ready.wait(q).unwrap_or_else(|p| p.into_inner());
                    q.idle -= 1;
                    q.woken = q.woken.saturating_sub(1);
                }
            }
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
        static POOL: Workers<1> = Workers::new("mur-test-workers", [1]);
        let (tx, rx) = mpsc::channel();
        for i in 0..100 {
            let tx = tx.clone();
            POOL.push(0, Box::new(move || tx.send(i).unwrap())).unwrap();
        }
        let got: Vec<i32> = rx.iter().take(100).collect();
        assert_eq!(got, (0..100).collect::<Vec<_>>());
        assert_eq!(POOL.lock().threads, 1);
    }

    #[test]
    fn busy_threads_are_joined_by_new_ones_up_to_the_bound() {
        static POOL: Workers<1> = Workers::new("mur-test-workers", [3]);
        let (release, hold) = mpsc::channel::<()>();
        let hold = Arc::new(Mutex::new(hold));
        let started = Arc::new(AtomicUsize::new(0));
        let (done_tx, done) = mpsc::channel();
        for _ in 0..6 {
            let (hold, started, done_tx) = (hold.clone(), started.clone(), done_tx.clone());
            POOL.push(
                0,
                Box::new(move || {
                    started.fetch_add(1, Ordering::SeqCst);
                    let _ = hold.lock().unwrap().recv();
                    done_tx.send(()).unwrap();
                }),
            )
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

    #[test]
    fn a_lane_at_its_bound_does_not_hold_up_another_lane() {
        static POOL: Workers<2> = Workers::new("mur-test-workers", [1, 1]);
        let (release, hold) = mpsc::channel::<()>();
        let (started_tx, started) = mpsc::channel::<()>();
        // Lane 1 is busy with a job that waits, and more of its jobs queue behind it.
        POOL.push(
            1,
            Box::new(move || {
                started_tx.send(()).unwrap();
                let _ = hold.recv();
            }),
        )
        .unwrap();
        started.recv().unwrap();
        for _ in 0..3 {
            POOL.push(1, Box::new(|| {})).unwrap();
        }
        // A lane-0 job still runs, on the second thread, while lane 1 is held.
        let (done_tx, done) = mpsc::channel();
        POOL.push(0, Box::new(move || done_tx.send(()).unwrap()))
            .unwrap();
        done.recv().unwrap();
        assert_eq!(POOL.lock().jobs[1].len(), 3);
        release.send(()).unwrap();
    }

    #[test]
    fn a_job_that_panics_leaves_the_thread_and_its_lane_working() {
        static POOL: Workers<1> = Workers::new("mur-test-workers", [1]);
        POOL.push(0, Box::new(|| panic!("a job's bug"))).unwrap();
        let (tx, rx) = mpsc::channel();
        POOL.push(0, Box::new(move || tx.send(()).unwrap()))
            .unwrap();
        // Without the fix the only thread is gone and this would wait forever: fail instead.
        rx.recv_timeout(std::time::Duration::from_secs(60))
            .expect("the job after the panic ran");
        assert_eq!(POOL.lock().threads, 1);
    }
}
