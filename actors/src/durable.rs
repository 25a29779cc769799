//! Durability of a run's records: every file and folder the runtime wrote for a delegation tree
//! reaches stable storage before its root reports, and nothing else is flushed.
//!
//! Why not `syncfs(2)`: it flushes every process's dirty data on the filesystem. On a disk other
//! jobs write to, one such call took 44 ms of a 91 ms run. Here each session, when it ends,
//! hands its records folder to [`RecordSync::submit`]; when the root ends, [`RecordSync::settle`]
//! `fdatasync`s each file of the tree, `fsync`s each of its folders and each folder that gained
//! a session's folder as an entry (`children/`, `.murmur/`), and waits once for all of them.
//!
//! Batching, so that ten thousand children cost about one barrier's worth of waiting:
//!
//! - as a session ends, a worker lists its records and starts their writeback
//!   (`sync_file_range(SYNC_FILE_RANGE_WRITE)`: the data goes to the disk while the run goes
//!   on, and nothing waits for it); a few at once ([`LISTINGS`]), beside sessions still
//!   starting on the same cores;
//! - the `fsync`s themselves wait for the root's end, then run [`WORKERS`] at once (the block
//!   layer merges the cache flushes of concurrent `fsync`s; one thread alone measured 5×
//!   slower for 8,000 files on this disk, and 96 at once flushed a 10,000-child tree's 40,000
//!   entries in 0.42–0.44 s where 16 took 0.57–0.67 s, three alternated rounds each on fresh
//!   folders). Flushing while siblings are still being created
//!   stalls them: on ext4 an `fsync` writes the inode-table block its neighbours share and the
//!   folder they are created in (measured: the fan-out's last child started 1.5 s later);
//! - each folder is flushed once per settle, however many sessions gained entries in it.
//!
//! What is covered: a session's records folder and everything in it (trace, `out/result.txt`,
//! staged tools, `task.md`, `MURMUR.md`, `logs/`), except its children's folders (each child
//! submits its own) and a work folder inside it (the commands' files, not ours). The lock file
//! is synced where it is written (`murmur.lock` goes through a synced temporary and a rename).

use crate::record_error::RecordError;
use std::collections::HashSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::workers::Workers;

use tokio::sync::oneshot;

/// Flushes that run at once, at most.
pub const WORKERS: usize = 96;

/// Listings (and their writeback starts) that run at once, at most: they run while the tree's
/// sessions are still starting, on the same cores (with 96 at once, as many as the flushes,
/// the last of 10,000 children started ~0.3 s later, the mean of six runs against sixteen).
const LISTINGS: usize = 4;

/// The records of one delegation tree that must be durable before its root reports: a cheap
/// handle, shared by every session of the tree.
#[derive(Clone, Default)]
pub struct RecordSync {
    inner: Arc<Tree>,
}

/// One tree's outstanding flushes.
#[derive(Default)]
struct Tree {
    state: Mutex<TreeState>,
}

#[derive(Default)]
struct TreeState {
    /// Jobs submitted and not finished.
    outstanding: usize,
    /// Files listed (their writeback started), to `fdatasync` when the root settles.
    files: Vec<PathBuf>,
    /// Folders listed or that gained entries, to `fsync` when the root settles.
    folders: HashSet<PathBuf>,
    /// Folders found to be in memory (tmpfs, ramfs) holding a session's records folder: the
    /// next session whose folder is made in one is known to be in memory too, without asking
    /// the kernel on a worker (a folder made inside another is on its filesystem; nothing is
    /// mounted on a folder the runtime has just made).
    in_memory: HashSet<PathBuf>,
    /// Folders found to be on a disk by [`RecordSync::note_made`] (asked once each).
    on_disk: HashSet<PathBuf>,
    /// The first error met; every later settle reports it too.
    error: Option<RecordError>,
    /// Woken when `outstanding` reaches zero.
    waiters: Vec<oneshot::Sender<()>>,
}

/// Paths per flush job at settle, at most: enough to keep the queue's overhead small for a tree
/// of ten thousand sessions; fewer paths are spread over every worker, one or a few each, so
/// that their waits overlap (on a disk another job is writing to, one `fdatasync` waited 2 to
/// 70 ms behind that job's writes: eight in a row cost the sum, eight at once about the
/// longest).
const BATCH: usize = 64;

/// How many paths each flush job takes when `n` are to be flushed.
fn per_job(n: usize) -> usize {
    n.div_ceil(WORKERS).clamp(1, BATCH)
}

/// What one session leaves to be flushed.
#[derive(Clone, Debug, Default)]
pub struct SessionRecords {
    /// The records folder: it and everything in it is flushed.
    pub dir: PathBuf,
    /// Folders inside `dir` left out (children's records, a work folder).
    pub skip: Vec<PathBuf>,
    /// Folders outside `dir` that gained an entry when the session made its folders.
    pub gained: Vec<PathBuf>,
    /// Wait until every trace line appended anywhere so far is written before flushing: for a
    /// session that crashed and never synced its own trace.
    pub drain_first: bool,
}

impl SessionRecords {
    /// The records of a session whose records folder is `dir`, after it made the folders
    /// `created` (outermost first, as [`create_dirs`] answers): the folders that gained an
    /// entry are `dir`'s parent (the folder is always new, whoever made it) and each created
    /// folder's parent.
    pub fn new(dir: PathBuf, created: &[PathBuf]) -> Self {
        let mut gained: Vec<PathBuf> = Vec::new();
        for c in created.iter().chain(std::iter::once(&dir)) {
            if let Some(parent) = c.parent() {
                if !parent.starts_with(&dir) && !gained.iter().any(|g| g == parent) {
                    gained.push(parent.to_path_buf());
                }
            }
        }
        SessionRecords {
            dir,
            gained,
            ..SessionRecords::default()
        }
    }
}

/// Flush, now, the folders that gained entries when `created` was made (what
/// [`create_dirs`] answered), except the last one's parent, which its session's end covers:
/// for the front end that makes a root's folders before the session starts. Blocking.
pub fn flush_made(created: &[PathBuf]) -> Result<(), RecordError> {
    let Some((_, outer)) = created.split_last() else {
        return Ok(());
    };
    for dir in outer {
        if let Some(parent) = dir.parent() {
            sync_folder(parent)?;
        }
    }
    Ok(())
}

impl RecordSync {
    /// A handle for a new tree.
    pub fn new() -> Self {
        RecordSync::default()
    }

    /// Learn, on the file thread that has just made the records folder `dir`, whether the
    /// folder holding it is in memory (one `statfs` per folder, then remembered): a session
    /// there then submits nothing at its end, so a run on a tmpfs never starts a flush worker.
    /// Blocking.
    pub fn note_made(&self, dir: &Path) {
        let Some(parent) = dir.parent() else {
            return;
        };
        {
            let state = self.inner.lock();
            if state.in_memory.contains(parent) || state.on_disk.contains(parent) {
                return;
            }
        }
        let memory = in_memory(parent);
        let mut state = self.inner.lock();
        if memory {
            state.in_memory.insert(parent.to_path_buf());
        } else {
            state.on_disk.insert(parent.to_path_buf());
        }
    }

    /// List `records` and start their writeback in the background; [`RecordSync::settle`]
    /// flushes them.
    pub fn submit(&self, records: SessionRecords) {
        {
            let mut state = self.inner.lock();
            if records
                .dir
                .parent()
                .is_some_and(|p| state.in_memory.contains(p))
            {
                return;
            }
            state.outstanding += 1;
        }
        self.push(Work::List(records));
    }

    fn push(&self, work: Work) {
        push(Job {
            work,
            tree: self.inner.clone(),
        });
    }

    /// Flush everything submitted so far and wait until it is durable; answers the first
    /// error met.
    pub async fn settle(&self) -> Result<(), RecordError> {
        loop {
            self.outstanding_done().await;
            let paths: Vec<Flush> = {
                let mut state = self.inner.lock();
                let files = std::mem::take(&mut state.files)
                    .into_iter()
                    .map(Flush::File);
                let folders: Vec<PathBuf> = state.folders.drain().collect();
                let paths: Vec<Flush> = files
                    .chain(folders.into_iter().map(Flush::Folder))
                    .collect();
                state.outstanding += paths.len().div_ceil(per_job(paths.len()));
                paths
            };
            if paths.is_empty() {
                break;
            }
            for batch in paths.chunks(per_job(paths.len())) {
                self.push(Work::Flush(batch.to_vec()));
            }
        }
        match &self.inner.lock().error {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Wait until no submitted flush is outstanding.
    async fn outstanding_done(&self) {
        let wait = {
            let mut state = self.inner.lock();
            if state.outstanding == 0 {
                None
            } else {
                let (tx, rx) = oneshot::channel();
                state.waiters.push(tx);
                Some(rx)
            }
        };
        if let Some(rx) = wait {
            // The sender is dropped only after `outstanding` reached zero.
            let _ = rx.await;
        }
    }
}

impl Tree {
    fn lock(&self) -> MutexGuard<'_, TreeState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn finished(&self, error: Option<RecordError>, listed: Listed) {
        let mut state = self.lock();
        state.files.extend(listed.files);
        state.folders.extend(listed.folders);
        state.outstanding = state.outstanding.saturating_sub(1);
        if state.error.is_none() {
            state.error = error;
        }
        if state.outstanding == 0 {
            for w in state.waiters.drain(..) {
                let _ = w.send(());
            }
        }
    }
}

/// `path` is on a filesystem held in memory (tmpfs, ramfs), where a flush is a no-op: listing
/// and flushing ten thousand children's records there only costs the run CPU. Answers false
/// when it cannot tell (the records are then flushed).
fn in_memory(path: &Path) -> bool {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::ffi::OsStrExt;
        const TMPFS_MAGIC: i64 = 0x0102_1994;
        const RAMFS_MAGIC: i64 = 0x8584_58f6;
        let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
            return false;
        };
        // SAFETY: an all-zero statfs is a valid value for statfs to fill in.
        let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
        // SAFETY: statfs reads the path and writes only the struct we pass.
        if unsafe { libc::statfs(c.as_ptr(), &mut fs) } != 0 {
            return false;
        }
        let kind = fs.f_type as i64;
        kind == TMPFS_MAGIC || kind == RAMFS_MAGIC
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = path;
        false
    }
}

/// Create `dir` and any missing parents, like `create_dir_all`, with no extra system call;
/// answers the folders it created, outermost first (what a flush must cover).
pub fn create_dirs(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut created = Vec::new();
    make(dir, &mut created)?;
    Ok(created)
}

fn make(dir: &Path, created: &mut Vec<PathBuf>) -> std::io::Result<()> {
    match std::fs::create_dir(dir) {
        Ok(()) => {
            created.push(dir.to_path_buf());
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) else {
                return Err(e);
            };
            make(parent, created)?;
            match std::fs::create_dir(dir) {
                Ok(()) => {
                    created.push(dir.to_path_buf());
                    Ok(())
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

/// One flush for one tree.
struct Job {
    work: Work,
    tree: Arc<Tree>,
}

/// What a [`Job`] does.
enum Work {
    /// List a session's records and start their writeback.
    List(SessionRecords),
    /// Flush these files and folders.
    Flush(Vec<Flush>),
}

/// One path to flush.
#[derive(Clone)]
enum Flush {
    /// `fdatasync`.
    File(PathBuf),
    /// `fsync`.
    Folder(PathBuf),
}

/// What listing a session's records found.
#[derive(Default)]
struct Listed {
    files: Vec<PathBuf>,
    folders: Vec<PathBuf>,
}

/// The process's flush workers, started as work arrives: flushes in lane 0 (served first), at
/// most [`WORKERS`] at once; listings in lane 1, at most [`LISTINGS`].
static POOL: Workers<2> = Workers::new("mur-sync", [WORKERS, LISTINGS]);

/// Queue `job` for the flush workers; with no worker at all the flush cannot run: say so
/// rather than hang.
fn push(job: Job) {
    let tree = job.tree.clone();
    let lane = match job.work {
        Work::Flush(_) => 0,
        Work::List(_) => 1,
    };
    if let Err(e) = POOL.push(lane, Box::new(move || run(job))) {
        let error = RecordError::Stopped {
            what: "the flush worker",
            cause: format!("it could not start: {e}"),
        };
        tree.finished(Some(error), Listed::default());
    }
}

fn run(job: Job) {
    let mut listed = Listed::default();
    let error = match job.work {
        // Nothing in memory outlives the machine: there is nothing to flush (nor the
        // folders it gained, on the same filesystem).
        Work::List(records) if in_memory(&records.dir) => {
            if let Some(parent) = records.dir.parent() {
                job.tree.lock().in_memory.insert(parent.to_path_buf());
            }
            None
        }
        Work::List(records) => {
            if records.drain_first {
                crate::trace::written_all_blocking();
            }
            listed.folders.extend(records.gained);
            list(&records.dir, &records.skip, &mut listed).err()
        }
        // Every path is flushed, whatever failed before it; the first error is kept.
        Work::Flush(paths) => paths.iter().fold(None, |first, p| {
            let result = match p {
                Flush::File(f) => sync_file(f),
                Flush::Folder(f) => sync_folder(f),
            };
            first.or(result.err())
        }),
    };
    job.tree.finished(error, listed);
}

/// List every file and folder under `dir` (itself included), leaving out `skip`, and start
/// each file's writeback. A missing entry is nothing to flush; answers the first other error,
/// naming the path.
fn list(dir: &Path, skip: &[PathBuf], listed: &mut Listed) -> Result<(), RecordError> {
    let mut first: Option<RecordError> = None;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        let entries = match std::fs::read_dir(&folder) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                first.get_or_insert(RecordError::Flush {
                    path: folder.clone(),
                    cause: e.to_string(),
                });
                continue;
            }
        };
        for entry in entries.flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() && !skip.iter().any(|s| s == &path) => pending.push(path),
                Ok(t) if t.is_dir() => {}
                Ok(t) if t.is_file() => {
                    start_writeback(&path);
                    listed.files.push(path);
                }
                _ => {}
            }
        }
        listed.folders.push(folder);
    }
    first.map_or(Ok(()), Err)
}

/// Ask the kernel to start writing `path`'s dirty data now, without waiting (Linux); the
/// `fdatasync` at settle then finds it written or under way. A failure here is harmless: the
/// `fdatasync` does the work.
fn start_writeback(path: &Path) {
    #[cfg(target_os = "linux")]
    if let Ok(f) = File::open(path) {
        use std::os::fd::AsRawFd;
        // SAFETY: sync_file_range only reads the descriptor, which `f` keeps open.
        unsafe {
            libc::sync_file_range(f.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = path;
}

fn sync_file(path: &Path) -> Result<(), RecordError> {
    observe(path);
    match File::open(path).and_then(|f| f.sync_data()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(RecordError::Flush {
            path: path.to_path_buf(),
            cause: e.to_string(),
        }),
    }
}

fn sync_folder(path: &Path) -> Result<(), RecordError> {
    observe(path);
    match File::open(path).and_then(|f| f.sync_all()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(RecordError::Flush {
            path: path.to_path_buf(),
            cause: e.to_string(),
        }),
    }
}

#[cfg(test)]
static OBSERVED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Tests see every path flushed.
fn observe(_path: &Path) {
    #[cfg(test)]
    OBSERVED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(_path.to_path_buf());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A temporary folder on a disk (flushes are skipped in memory): the system's, unless it
    /// is a tmpfs, else one beside the test binary.
    fn on_disk() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        if !in_memory(tmp.path()) {
            return tmp;
        }
        let exe = std::env::current_exe().unwrap();
        tempfile::tempdir_in(exe.parent().unwrap()).unwrap()
    }

    #[tokio::test]
    async fn records_in_memory_are_not_flushed_and_their_siblings_not_even_queued() {
        let shm = Path::new("/dev/shm");
        if !shm.is_dir() || !in_memory(shm) {
            return;
        }
        let tmp = tempfile::tempdir_in(shm).unwrap();
        let sync = RecordSync::new();
        for (i, name) in ["children/ses_1", "children/ses_2"].iter().enumerate() {
            let dir = tmp.path().join(name);
            let made = create_dirs(&dir).unwrap();
            std::fs::write(dir.join("trace.jsonl"), "{}\n").unwrap();
            sync.submit(SessionRecords::new(dir, &made));
            if i == 1 {
                // Its folder is made in one already found in memory: no worker is asked.
                assert_eq!(sync.inner.lock().outstanding, 0);
            }
            assert_eq!(sync.settle().await, Ok(()));
        }
        assert_eq!(observed_under(tmp.path()), Vec::<PathBuf>::new());
        // A folder on a disk is still listed and flushed.
        let disk = on_disk();
        let dir = disk.path().join("ses_3");
        let made = create_dirs(&dir).unwrap();
        sync.submit(SessionRecords::new(dir.clone(), &made));
        assert_eq!(sync.settle().await, Ok(()));
        assert!(observed_under(disk.path()).contains(&dir));
    }

    #[tokio::test]
    async fn a_folder_noted_in_memory_when_made_queues_no_flush_and_one_on_disk_still_flushes() {
        let shm = Path::new("/dev/shm");
        if !shm.is_dir() || !in_memory(shm) {
            return;
        }
        let tmp = tempfile::tempdir_in(shm).unwrap();
        let sync = RecordSync::new();
        let dir = tmp.path().join("ses_1");
        let made = create_dirs(&dir).unwrap();
        sync.note_made(&dir);
        sync.submit(SessionRecords::new(dir, &made));
        // Even the first session there asks no worker.
        assert_eq!(sync.inner.lock().outstanding, 0);
        assert_eq!(sync.settle().await, Ok(()));
        assert_eq!(observed_under(tmp.path()), Vec::<PathBuf>::new());
        let disk = on_disk();
        let dir = disk.path().join("ses_2");
        let made = create_dirs(&dir).unwrap();
        sync.note_made(&dir);
        sync.submit(SessionRecords::new(dir.clone(), &made));
        assert_eq!(sync.settle().await, Ok(()));
        assert!(observed_under(disk.path()).contains(&dir));
    }

    fn observed_under(dir: &Path) -> Vec<PathBuf> {
        let mut seen: Vec<PathBuf> = OBSERVED
            .lock()
            .unwrap()
            .iter()
            .filter(|p| p.starts_with(dir))
            .cloned()
            .collect();
        seen.sort();
        seen
    }

    #[test]
    fn few_paths_spread_over_every_worker_and_many_go_in_batches() {
        assert_eq!(per_job(0), 1);
        assert_eq!(per_job(6), 1);
        assert_eq!(per_job(WORKERS * 3), 3);
        assert_eq!(per_job(40_000), BATCH);
    }

    #[test]
    fn create_dirs_answers_what_it_made_outermost_first() {
        let tmp = tempfile::tempdir().unwrap();
        let leaf = tmp.path().join("a/b/c");
        let made = create_dirs(&leaf).unwrap();
        let expected: Vec<PathBuf> = ["a", "a/b", "a/b/c"]
            .iter()
            .map(|p| tmp.path().join(p))
            .collect();
        assert_eq!(made, expected);
        assert!(leaf.is_dir());
        assert_eq!(create_dirs(&leaf).unwrap(), Vec::<PathBuf>::new());
        std::fs::write(tmp.path().join("file"), "x").unwrap();
        assert!(create_dirs(&tmp.path().join("file")).is_err());
        assert!(create_dirs(&tmp.path().join("file/below")).is_err());
    }

    #[test]
    fn the_folders_that_gained_entries_are_the_parents_of_what_was_made() {
        let root = PathBuf::from("/r");
        let made = vec![
            root.join("children"),
            root.join("children/ses_1"),
            root.join("children/ses_1/out"),
        ];
        let records = SessionRecords::new(root.join("children/ses_1"), &made);
        assert_eq!(records.gained, vec![root.clone(), root.join("children")]);
        // Its folder is always new: its parent gained it, whoever made it.
        let records = SessionRecords::new(root.join("children/ses_2"), &[]);
        assert_eq!(records.gained, vec![root.join("children")]);
    }

    #[tokio::test]
    async fn settle_waits_for_every_file_and_folder_of_each_session_and_nothing_else() {
        let tmp = on_disk();
        let base = tmp.path().join("records");
        let sync = RecordSync::new();
        let mut sessions = Vec::new();
        for i in 0..40 {
            let dir = base.join(format!("children/ses_{i}"));
            let made = create_dirs(&dir.join("out")).unwrap();
            std::fs::write(dir.join("trace.jsonl"), "{}\n").unwrap();
            std::fs::write(dir.join("out/result.txt"), "ok").unwrap();
            create_dirs(&dir.join("work/src")).unwrap();
            std::fs::write(dir.join("work/src/main.rs"), "fn main() {}").unwrap();
            let mut records = SessionRecords::new(dir.clone(), &made);
            records.skip.push(dir.join("work"));
            sessions.push(dir);
            sync.submit(records);
        }
        assert_eq!(sync.settle().await, Ok(()));
        let seen = observed_under(tmp.path());
        for dir in &sessions {
            for p in [
                dir.clone(),
                dir.join("trace.jsonl"),
                dir.join("out"),
                dir.join("out/result.txt"),
            ] {
                assert!(seen.contains(&p), "{} was not synced", p.display());
            }
            assert!(!seen.iter().any(|p| p.starts_with(dir.join("work"))));
        }
        assert!(seen.contains(&base.join("children")));
        assert!(seen.contains(&base));
        // The shared folder is flushed once, when the tree settles.
        let shared = seen.iter().filter(|p| **p == base.join("children")).count();
        assert_eq!(shared, 1);
    }

    #[tokio::test]
    async fn a_flush_that_fails_is_reported_by_settle_naming_the_path() {
        let tmp = on_disk();
        // A records "folder" that is a file: it cannot be listed (root included).
        let dir = tmp.path().join("ses_1");
        std::fs::write(&dir, "not a folder").unwrap();
        let sync = RecordSync::new();
        sync.submit(SessionRecords::new(dir.clone(), &[]));
        let err = sync.settle().await.unwrap_err();
        assert!(
            matches!(&err, RecordError::Flush { path, .. } if path == &dir),
            "{err:?}"
        );
        assert!(err.to_string().starts_with("cannot sync "), "{err}");
        // Later settles keep reporting it.
        assert_eq!(sync.settle().await, Err(err));
    }

    #[tokio::test]
    async fn settle_with_nothing_submitted_answers_at_once() {
        assert_eq!(RecordSync::new().settle().await, Ok(()));
    }
}
