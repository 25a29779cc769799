//! The [`TraceLog`] handle and the one thread that writes every trace file of the process.
//!
//! A session's lines come from several places (the session, its dispatcher, the plan engine,
//! tool executors), so the writer is a handle they share. `append` never touches the disk: it
//! adds the line to the file's buffer and, if the buffer was empty, queues the file for the
//! trace thread. That thread writes each file's buffered lines with one `write(2)` and answers
//! sync barriers. Files are created by the session's setup job on the file lane
//! ([`TraceLog::create`]), with its folder; lines appended before that wait in the buffer. So:
//!
//! - emitting a line costs a lock and a copy, never a syscall on a runtime thread, and the
//!   emitter's work (a parent handing out 10,000 delegations) is not slowed by the disk;
//! - a busy file's lines are batched: one write for all lines appended since the last one;
//! - one thread, not one actor per session: an actor per trace cost ~7 KiB of memory and a task
//!   wake-up per line; ten thousand live children write through the same thread;
//! - lines of one file are written in the order they were appended.
//!
//! The price: a write or reopen that blocks (a stalled network filesystem, heavy dirty-page
//! throttling) delays the lines of every session behind it; sessions themselves wait only at
//! their end, for their sync barrier.
//!
//! In a process that runs one session on one thread ([`crate::solo`]) there is no trace thread:
//! a file's buffered lines are written on the runtime thread, by a task queued at the first
//! line since the last write (so every line a step appends still goes out in one write, once
//! the step yields and the tasks it woke have run: a model request is not held up by the
//! writes), and a sync barrier writes what is left on the caller. Writes of one file
//! hold its `writing` lock, which keeps its lines in order whoever writes them.
//!
//! Descriptors are bounded: at most [`MAX_OPEN`] trace files are open at once, and never more
//! than a quarter of the process's open-file limit (read when the thread starts). Past that, the
//! trace thread closes a file not written recently (a clock: every write marks its file, the
//! sweep spares a marked file once) and reopens it for appending at its next line, so ten
//! thousand live sessions never exhaust the open-file limit, whatever it is.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use tokio::sync::oneshot;

use super::TraceEvent;
use crate::record_error::RecordError;

/// How durable [`TraceLog::sync`] makes the lines appended so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Written to the kernel (survives the process, not a power loss).
    Written,
    /// `fdatasync` of this file.
    File,
}

/// The only writer of one `trace.jsonl`: a cheap handle, cloned into everything that emits the
/// session's lines.
#[derive(Clone)]
pub struct TraceLog {
    inner: Arc<TraceFile>,
}

/// One trace file: where it goes, and its state shared with the trace thread.
struct TraceFile {
    path: PathBuf,
    session_id: String,
    state: Mutex<State>,
    /// Held while lines are taken from the buffer and written, in solo mode (where more than
    /// one thread may write the file).
    writing: Mutex<()>,
}

#[derive(Default)]
struct State {
    /// Whole lines appended and not yet written.
    buffer: Vec<u8>,
    /// The file is in the trace thread's queue (its buffer will be written).
    queued: bool,
    /// The open file, while it is open.
    file: Option<Arc<File>>,
    /// The file was created (if it is not open now, the trace thread closed it to save a
    /// descriptor and reopens it for the next line).
    created: bool,
    /// Counted among the open files of the trace thread's clock.
    in_clock: bool,
    /// Written since the clock's sweep last passed it.
    referenced: bool,
    /// The first error met; lines after it are dropped and every sync reports it.
    error: Option<RecordError>,
    /// Told the first error, once (the session's way to the [`crate::trace_writer::TraceWriter`]).
    on_failure: Option<FailureHook>,
}

/// Called once with the first write error of a trace file.
type FailureHook = Box<dyn FnOnce(RecordError) + Send>;

/// At most this many trace files are open at once (1024; tests lower it).
static MAX_OPEN: AtomicUsize = AtomicUsize::new(1024);

/// The trace thread's open files, oldest first, for closing the least recently written.
struct Clock {
    ring: VecDeque<Weak<TraceFile>>,
    /// A quarter of the soft open-file limit: the rest is for everything else.
    fd_room: usize,
}

impl Clock {
    fn new() -> Self {
        let mut fd_room = usize::MAX;
        #[cfg(unix)]
        // SAFETY: getrlimit only writes the struct we pass.
        unsafe {
            let mut lim = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0
                && lim.rlim_cur != libc::RLIM_INFINITY
            {
                fd_room = (lim.rlim_cur as usize / 4).max(16);
            }
        }
        Clock {
            ring: VecDeque::new(),
            fd_room,
        }
    }
}

impl Clock {
    /// Count `tf` as open, then close files until at most [`MAX_OPEN`] are.
    fn admit(&mut self, tf: &Arc<TraceFile>) {
        self.ring.push_back(Arc::downgrade(tf));
        let cap = MAX_OPEN.load(Ordering::Relaxed).min(self.fd_room).max(1);
        // Each entry is spared at most once per sweep, so this ends.
        let mut budget = 2 * self.ring.len();
        while self.ring.len() > cap && budget > 0 {
            budget -= 1;
            let Some(weak) = self.ring.pop_front() else {
                break;
            };
            // A dropped file's descriptor is already closed.
            let Some(other) = weak.upgrade() else {
                continue;
            };
            let mut state = other.lock();
            if state.file.is_none() {
                state.in_clock = false;
            } else if state.referenced {
                state.referenced = false;
                drop(state);
                self.ring.push_back(weak);
            } else {
                // Closed once no sync still holds a clone.
                state.file = None;
                state.in_clock = false;
            }
        }
    }
}

/// Work for the trace thread.
enum Job {
    /// Write the file's buffered lines, if the file exists (else its creator queues this again).
    Write(Arc<TraceFile>),
    /// Every line appended before this job is written (the file is created here if lines wait
    /// and nothing created it yet): answer with the file, or the first error.
    Barrier {
        file: Arc<TraceFile>,
        reply: oneshot::Sender<Result<Option<Arc<File>>, RecordError>>,
    },
    /// Every job queued before this one is done.
    Drain(oneshot::Sender<()>),
}

/// The trace thread's queue, started on first use.
fn trace_thread() -> &'static Mutex<mpsc::Sender<Job>> {
    static QUEUE: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();
    QUEUE.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        let spawned = std::thread::Builder::new()
            .name("mur-trace".into())
            .spawn(move || {
                crate::workers::batch_priority();
                let mut clock = Clock::new();
                for job in rx {
                    run(job, &mut clock);
                }
            });
        if let Err(e) = spawned {
            // Without the thread, every job is answered by its dropped reply: syncs report it.
            tracing::error!("cannot start the trace thread: {e}");
        }
        Mutex::new(tx)
    })
}

fn send(job: Job) {
    if crate::solo::on() {
        return solo::run(job);
    }
    let queue = trace_thread().lock().unwrap_or_else(|p| p.into_inner());
    // A send fails only if the thread could not start; the sync that follows reports it.
    let _ = queue.send(job);
}

/// Create (or open for appending) a trace file, and its folder if that is missing. The folder
/// is usually there already (the session's setup job made it): trying the file first saves a
/// failing `mkdir` and a `stat` per session.
fn open_trace(path: &Path) -> std::io::Result<File> {
    let open = || {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    };
    match open() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            open()
        }
        opened => opened,
    }
}

/// On the trace thread: do one job.
fn run(job: Job, clock: &mut Clock) {
    match job {
        Job::Write(tf) => tf.write_buffer(clock),
        Job::Drain(reply) => {
            let _ = reply.send(());
        }
        Job::Barrier { file: tf, reply } => {
            tf.create_if_lines_wait();
            tf.write_buffer(clock);
            let file = tf.open_file(clock);
            let state = tf.lock();
            let answer = match &state.error {
                Some(e) => Err(e.clone()),
                None => Ok(file),
            };
            let _ = reply.send(answer);
        }
    }
}

impl TraceFile {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Nothing half-done is left behind a panic while the lock is held.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// On the trace thread: the open file, reopened for appending if the clock closed it;
    /// `None` if it was never created (its creator queues the lines again) or failed.
    fn open_file(self: &Arc<Self>, clock: &mut Clock) -> Option<Arc<File>> {
        let reopen = {
            let mut state = self.lock();
            if state.error.is_some() || !state.created {
                return None;
            }
            state.referenced = true;
            match &state.file {
                Some(f) if state.in_clock => return Some(f.clone()),
                Some(_) => false,
                None => true,
            }
        };
        if reopen {
            self.reopen()?;
        }
        let file = {
            let mut state = self.lock();
            state.in_clock = true;
            state.file.clone()
        };
        clock.admit(self);
        file
    }

    /// Open the created file again for appending (after the clock closed it); `None` when that
    /// failed (the error is the file's first).
    fn reopen(&self) -> Option<Arc<File>> {
        let opened = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path);
        match opened {
            Ok(f) => {
                let f = Arc::new(f);
                self.lock().file = Some(f.clone());
                Some(f)
            }
            Err(e) => {
                self.fail(e);
                None
            }
        }
    }

    /// Create the file if lines wait for it and nothing created it yet (a barrier, or a solo
    /// write, before the session's setup job ran).
    fn create_if_lines_wait(&self) {
        let never_created = {
            let state = self.lock();
            !state.created && !state.buffer.is_empty() && state.error.is_none()
        };
        if never_created {
            let _ = self.create();
        }
    }

    /// The file's first error (`cause` describes the failure if none was recorded).
    fn first_error(&self, cause: &str) -> RecordError {
        self.lock()
            .error
            .clone()
            .unwrap_or_else(|| RecordError::TraceWrite {
                path: self.path.clone(),
                cause: cause.into(),
            })
    }

    /// On the trace thread: write the buffered lines, if the file was created.
    fn write_buffer(self: &Arc<Self>, clock: &mut Clock) {
        {
            let mut state = self.lock();
            state.queued = false;
            if state.buffer.is_empty() || !state.created {
                return;
            }
        }
        let Some(file) = self.open_file(clock) else {
            return;
        };
        let buffer = std::mem::take(&mut self.lock().buffer);
        if !buffer.is_empty() {
            if let Err(e) = (&*file).write_all(&buffer) {
                self.fail(e);
            }
        }
    }

    /// Create the file and its folder (blocking), unless it exists or an earlier attempt
    /// failed; then have the waiting lines written. Answers the first error.
    fn create(&self) -> Result<(), RecordError> {
        {
            let state = self.lock();
            if let Some(e) = &state.error {
                return Err(e.clone());
            }
            if state.created {
                return Ok(());
            }
        }
        let opened = open_trace(&self.path);
        let mut state = self.lock();
        match opened {
            Ok(f) => {
                // Another creator may have won meanwhile; its file stays.
                if !state.created {
                    state.file = Some(Arc::new(f));
                    state.created = true;
                }
                Ok(())
            }
            Err(e) => {
                drop(state);
                self.fail(e);
                Err(self.first_error("the file could not be created"))
            }
        }
    }

    /// Off the trace thread: create the file, then queue the waiting lines for writing.
    fn create_and_queue(self: &Arc<Self>) -> Result<(), RecordError> {
        self.create()?;
        let mut state = self.lock();
        if !state.buffer.is_empty() && !state.queued {
            state.queued = true;
            drop(state);
            send(Job::Write(self.clone()));
        }
        Ok(())
    }

    fn fail(&self, e: std::io::Error) {
        let mut state = self.lock();
        state.buffer.clear();
        if state.error.is_some() {
            return;
        }
        let error = RecordError::TraceWrite {
            path: self.path.clone(),
            cause: e.to_string(),
        };
        state.error = Some(error.clone());
        let hook = state.on_failure.take();
        drop(state);
        if let Some(tell) = hook {
            tell(error);
        }
    }
}

impl TraceLog {
    /// A writer for `path` whose lines all belong to `session_id`; costs no I/O until the first
    /// line.
    pub fn new(path: PathBuf, session_id: String) -> Self {
        TraceLog {
            inner: Arc::new(TraceFile {
                path,
                session_id,
                state: Mutex::new(State::default()),
                writing: Mutex::new(()),
            }),
        }
    }

    /// Have `tell` called once, with the error, if writing this file ever fails (at once, if
    /// it already has).
    pub fn on_failure(&self, tell: impl FnOnce(RecordError) + Send + 'static) {
        let mut state = self.inner.lock();
        match state.error.clone() {
            Some(error) => {
                drop(state);
                tell(error);
            }
            None => state.on_failure = Some(Box::new(tell)),
        }
    }

    /// Append one event as one line; the trace thread writes it.
    pub fn append(&self, event: TraceEvent) {
        super::observe::notify(&self.inner.session_id, &event);
        let mut state = self.inner.lock();
        if state.error.is_some() {
            return;
        }
        event.write_line(&self.inner.session_id, &mut state.buffer);
        // Until the file exists its lines wait here: whoever creates it queues them (its
        // setup job, or a sync barrier), so the trace thread is not woken for nothing.
        if !state.queued && state.created {
            state.queued = true;
            drop(state);
            send(Job::Write(self.inner.clone()));
        }
    }

    /// Create the file and its folder now, blocking (call it from a file-lane job, such as a
    /// session's setup); lines appended before are then written. Answers the first error.
    pub fn create(&self) -> Result<(), RecordError> {
        self.inner.create_and_queue()
    }

    /// Wait until every line appended so far is written. Answers the file, if it exists, or
    /// the first error.
    async fn barrier(&self) -> Result<Option<Arc<File>>, RecordError> {
        let (reply, answer) = oneshot::channel();
        send(Job::Barrier {
            file: self.inner.clone(),
            reply,
        });
        answer.await.unwrap_or_else(|_| {
            Err(RecordError::Stopped {
                what: "the trace thread",
                cause: "it is not running".into(),
            })
        })
    }

    /// Make every line appended so far durable to the given degree; answers the first error
    /// met. An `fdatasync` runs on the blocking pool, never on a runtime thread or the trace
    /// thread.
    pub async fn sync(&self, durability: Durability) -> Result<(), RecordError> {
        let file = match self.barrier().await? {
            Some(f) if durability != Durability::Written => f,
            _ => return Ok(()),
        };
        let path = self.inner.path.clone();
        tokio::task::spawn_blocking(move || file.sync_data())
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()))
            .map_err(|cause| RecordError::TraceSync { path, cause })
    }
}

/// Wait until every line appended anywhere in the process so far is written (the end of
/// `mur run` calls it, so lines of sessions that ended after the root reported are not lost when
/// the process exits).
pub async fn written_all() {
    let (reply, done) = oneshot::channel();
    send(Job::Drain(reply));
    let _ = done.await;
}

/// [`written_all`] for a thread outside the runtime (the record flushers): blocks until every
/// line appended anywhere in the process so far is written.
pub fn written_all_blocking() {
    let (reply, done) = oneshot::channel();
    send(Job::Drain(reply));
    let _ = done.blocking_recv();
}

/// The trace's jobs in solo mode ([`crate::solo`]), on the threads that send them.
mod solo {
    use super::*;

    /// Files with lines waiting for the queued write task.
    static WAITING: Mutex<Vec<Arc<TraceFile>>> = Mutex::new(Vec::new());

    pub(super) fn run(job: Job) {
        match job {
            Job::Write(tf) => later(tf),
            Job::Barrier { file, reply } => {
                let _ = reply.send(file.write_here());
            }
            Job::Drain(reply) => {
                write_waiting();
                let _ = reply.send(());
            }
        }
    }

    /// Have `tf`'s lines written once the task that appended them yields: by a task on the
    /// runtime (queued with the first file that waits), or at once off any runtime.
    ///
    /// The task yields once before it writes, so the tasks the step woke run first: a turn's
    /// reply, its tool call and the next model request go out before the write system calls,
    /// which then overlap the wait for the model instead of delaying the request (turn_bench:
    /// the loop's own time per turn 26 → 21 µs). The lines still reach the file in the same
    /// turn, and a barrier or a drain writes whatever still waits.
    fn later(tf: Arc<TraceFile>) {
        let first = {
            let mut waiting = WAITING.lock().unwrap_or_else(|p| p.into_inner());
            waiting.push(tf);
            waiting.len() == 1
        };
        if first {
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => drop(rt.spawn(async {
                    tokio::task::yield_now().await;
                    write_waiting()
                })),
                Err(_) => write_waiting(),
            }
        }
    }

    /// Write every waiting file's lines.
    fn write_waiting() {
        let files = std::mem::take(&mut *WAITING.lock().unwrap_or_else(|p| p.into_inner()));
        for tf in files {
            let _ = tf.write_here();
        }
    }

    impl TraceFile {
        /// Write the buffered lines on this thread (creating the file first if lines wait and
        /// nothing created it); answers the open file, `None` if it was never created, or the
        /// first error.
        pub(super) fn write_here(self: &Arc<Self>) -> Result<Option<Arc<File>>, RecordError> {
            let _writing = self.writing.lock().unwrap_or_else(|p| p.into_inner());
            self.create_if_lines_wait();
            let (file, buffer) = {
                let mut state = self.lock();
                state.queued = false;
                if let Some(e) = &state.error {
                    return Err(e.clone());
                }
                if !state.created {
                    return Ok(None);
                }
                (state.file.clone(), std::mem::take(&mut state.buffer))
            };
            let file = match file {
                Some(f) => f,
                None => match self.reopen() {
                    Some(f) => f,
                    None => return Err(self.first_error("the file could not be reopened")),
                },
            };
            if !buffer.is_empty() {
                if let Err(e) = (&*file).write_all(&buffer) {
                    self.fail(e);
                    return Err(self.first_error("the write failed"));
                }
            }
            Ok(Some(file))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::EventType;
    use serde_json::Value;

    #[tokio::test]
    async fn writer_appends_whole_lines_in_order_and_syncs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/trace.jsonl");
        let w = TraceLog::new(path.clone(), "ses_1".into());
        // The first lines arrive before the file exists; they are written first, in order.
        for i in 0..3 {
            w.append(TraceEvent::new(EventType::Inference, None).with("turn", i));
        }
        let other = w.clone();
        other.append(TraceEvent::new(EventType::Inference, None).with("turn", 3));
        assert_eq!(w.sync(Durability::File).await, Ok(()));
        w.append(TraceEvent::new(EventType::Inference, None).with("turn", 4));
        assert_eq!(w.sync(Durability::Written).await, Ok(()));
        assert_eq!(turns_in(&path), vec![0, 1, 2, 3, 4]);
    }

    #[tokio::test]
    async fn a_trace_that_cannot_be_created_is_reported_by_create_and_sync() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("blocker"), "a file, not a folder").unwrap();
        let path = dir.path().join("blocker/trace.jsonl");
        let w = TraceLog::new(path.clone(), "ses_1".into());
        w.append(TraceEvent::new(EventType::SessionStart, None));
        let err = w.create().unwrap_err();
        assert!(
            matches!(&err, RecordError::TraceWrite { path: p, .. } if p == &path),
            "{err:?}"
        );
        assert!(err.to_string().starts_with("trace write failed: "), "{err}");
        assert_eq!(w.sync(Durability::Written).await, Err(err));
    }

    /// The `turn` of every line of a trace file, in order.
    fn turns_in(path: &Path) -> Vec<u64> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["turn"]
                    .as_u64()
                    .unwrap()
            })
            .collect()
    }

    /// Descriptors open on files under `dir`.
    fn open_under(dir: &Path) -> usize {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|target| target.starts_with(dir))
            .count()
    }

    #[tokio::test]
    async fn at_most_max_open_files_stay_open_and_every_line_lands() {
        // Other tests in this binary may see their files closed and reopened meanwhile: that
        // is invisible to them, which is the point.
        MAX_OPEN.store(2, Ordering::Relaxed);
        let dir = tempfile::tempdir().unwrap();
        let writers: Vec<TraceLog> = (0..6)
            .map(|i| {
                TraceLog::new(
                    dir.path().join(format!("s{i}/trace.jsonl")),
                    format!("ses_{i}"),
                )
            })
            .collect();
        for w in &writers {
            w.create().unwrap();
        }
        for round in 0..3 {
            for w in &writers {
                w.append(TraceEvent::new(EventType::Inference, None).with("turn", round));
            }
        }
        written_all().await;
        let open = open_under(dir.path());
        for w in &writers {
            assert_eq!(w.sync(Durability::File).await, Ok(()));
        }
        MAX_OPEN.store(1024, Ordering::Relaxed);
        assert!(open <= 2, "{open} trace files open, at most 2 allowed");
        for i in 0..6 {
            let path = dir.path().join(format!("s{i}/trace.jsonl"));
            assert_eq!(turns_in(&path), vec![0, 1, 2], "file {i}");
        }
    }

    #[tokio::test]
    async fn a_writer_with_no_lines_touches_no_disk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("never/trace.jsonl");
        let w = TraceLog::new(path.clone(), "ses_1".into());
        assert_eq!(w.sync(Durability::File).await, Ok(()));
        assert!(!dir.path().join("never").exists());
    }
}
