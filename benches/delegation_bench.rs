//! Delegation on the actor tree, measured: `cargo bench --bench delegation_bench`.
//!
//! 1. Fan-out: one parent delegates to N children (default 10,000) in one turn; each child
//!    answers in one scripted turn; the parent waits and continues once with every outcome.
//!    Reports wall time, outcomes delivered, and the process's peak RSS. It runs twice: with
//!    the session folders under `TMPDIR` (a disk, usually) and under `/dev/shm` (tmpfs), so the
//!    runtime's own figure is visible next to what the disk adds. Each run also prints its
//!    floor: the same folders and files made on one thread, on the same filesystem.
//! 2. Latency: delegate-task call → the child's first model call, one delegation per turn,
//!    p50/p99 over 1,000 delegations. Its floor, printed beside it: ractor's own cost for a
//!    message to an actor that starts a linked actor, until that actor's `pre_start` runs.
//! 3. A depth-8 chain: each capsule delegates to the next; end-to-end time.
//!
//! The real kernel, real trace files on disk, real drivers behind the driver trait: the parent
//! and children play scripted turns, timed by a thin wrapper around the driver.
//!
//! Knobs: `MUR_BENCH_CHILDREN` (default 10000), `MUR_BENCH_PHASES` (any of
//! `fan-out,latency,chain`), `MUR_BENCH_CHILD_DELAY_MS` (children wait before answering, so all
//! are alive at once; in the latency phase, no child's run or end then falls between a
//! delegation and its child's first call, which is the path alone), `TMPDIR` (where the
//! session folders go: the disk matters, see docs/architecture.md on ext4),
//! `MUR_BENCH_SAMPLES` (delegations of the latency phase, default 1000: the p50 is the same at
//! 200 and at 3000, so a turn's cost does not grow with the parent's history),
//! `MUR_BENCH_THREADS=one` (a current-thread runtime instead of a worker per core: the latency
//! stays in the same range on one thread, so it is mostly the path's own work, not wake-ups
//! across workers).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use mur::drivers::script::ScriptDriver;
use mur_actors::delegation::{CapsuleResolver, ChildRequest};
use mur_actors::model::{
    joined_text, ContentBlock, InferError, InferReply, InferRequest, Message, ModelDriver,
    RetrySink,
};
use mur_actors::provided;
use mur_actors::session::{ExitStatus, SessionReport};
use mur_actors::spec::{Grants, SessionPaths, SessionSpec, SpawnedBy};
use mur_actors::supervisor::SupervisorArgs;

/// Records when each child made its first model call (keyed by its task).
#[derive(Default)]
struct Clock {
    child_first_call: Mutex<HashMap<String, Instant>>,
    parent_reply: Mutex<HashMap<String, Instant>>,
}

/// A driver wrapper that notes the time of the first call of each session.
struct Timed {
    inner: Arc<dyn ModelDriver>,
    clock: Arc<Clock>,
    parent: bool,
}

fn first_text(m: &[Message]) -> String {
    m.first()
        .map(|m| joined_text(m.content()))
        .unwrap_or_default()
}

#[async_trait]
impl ModelDriver for Timed {
    fn name(&self) -> &str {
        self.inner.name()
    }
    async fn infer(&self, r: &InferRequest, s: &dyn RetrySink) -> Result<InferReply, InferError> {
        if !self.parent && r.messages.len() == 1 {
            let now = Instant::now();
            self.clock
                .child_first_call
                .lock()
                .unwrap()
                .insert(first_text(&r.messages), now);
        }
        let reply = self.inner.infer(r, s).await?;
        if self.parent {
            for b in &reply.content {
                if let ContentBlock::ToolCall { input, .. } = b {
                    if let Some(t) = input.get("task").and_then(|t| t.as_str()) {
                        self.clock
                            .parent_reply
                            .lock()
                            .unwrap()
                            .insert(t.to_string(), Instant::now());
                    }
                }
            }
        }
        Ok(reply)
    }
}

fn spec(
    name: &str,
    driver: Arc<dyn ModelDriver>,
    grants: Grants,
    session_id: String,
    paths: SessionPaths,
    task: String,
) -> SessionSpec {
    SessionSpec::new(
        session_id,
        name,
        driver,
        grants,
        task,
        paths,
        mur::tools::executors(
            Duration::from_secs(60),
            std::sync::Arc::new(mur::contain::Sandbox::uncontained(std::env::temp_dir())),
        ),
    )
}

/// Children by full name: a shared driver each (built once, like the store resolver does).
struct Children {
    drivers: HashMap<String, (Arc<dyn ModelDriver>, Grants)>,
}

#[async_trait]
impl CapsuleResolver for Children {
    async fn resolve(
        &self,
        r: &ChildRequest,
    ) -> Result<SessionSpec, mur_actors::delegation::DelegationError> {
        let (driver, grants) = self.drivers.get(&r.capsule).ok_or_else(|| {
            mur_actors::delegation::DelegationError::new(
                mur_actors::delegation::DelegationErrorKind::NotResolved,
                format!("no capsule {}", r.capsule),
            )
        })?;
        let mut s = spec(
            provided::bare(&r.capsule),
            driver.clone(),
            grants.clone(),
            r.session_id.clone(),
            r.paths.clone(),
            r.task.clone(),
        );
        s.depth = r.depth;
        s.spawned_by = Some(SpawnedBy {
            parent_session_id: r.parent_session_id.clone(),
            delegation_id: r.delegation_id.clone(),
        });
        Ok(s)
    }
}

fn script(text: &str) -> Arc<dyn ModelDriver> {
    Arc::new(ScriptDriver::from_str(text, Path::new("bench.yaml")).unwrap())
}

async fn run(root: SessionSpec, children: Children, max_depth: u32) -> SessionReport {
    let args = SupervisorArgs {
        resolver: Some(Arc::new(children)),
        max_depth,
        max_children: 100_000,
        placer: None,
    };
    // The kernel's test kit starts the tree, waits for the root's report and stops it.
    mur_actors::testkit::run(root, args).await
}

fn root_paths(dir: &Path) -> (String, SessionPaths) {
    let id = mur_actors::ids::session_id();
    let d = dir.join(&id);
    (
        id,
        SessionPaths {
            workdir: d.clone(),
            records_dir: d,
        },
    )
}

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

/// The filesystem type holding `dir` (from /proc/mounts; the disk decides much of the
/// fan-out's time), with `no journal` for an ext4 mounted without one.
fn filesystem_of(dir: &Path) -> String {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let best = mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 2 && dir.starts_with(f[1])).then(|| (f[0], f[1], f[2]))
        })
        .max_by_key(|(_, point, _)| point.len());
    match best {
        Some((dev, _, "ext4")) => {
            let name = dev.rsplit('/').next().unwrap_or(dev);
            let journal = std::fs::read_to_string(format!("/sys/fs/ext4/{name}/journal_task"))
                .map(|t| !t.trim().is_empty() && t.trim() != "<none>")
                .unwrap_or(true);
            if journal {
                "ext4".into()
            } else {
                "ext4, no journal".into()
            }
        }
        Some((_, _, kind)) => kind.to_string(),
        None => "unknown filesystem".into(),
    }
}

/// The fan-out's file floor: the folders and files `n` children leave (each a folder with
/// `trace.jsonl` of five lines, `out/result.txt`; the parent's trace gains two lines per child),
/// made on one thread with nothing else running. The runtime's fan-out cannot beat this.
fn file_floor(n: usize, dir: &Path) -> Duration {
    use std::io::Write;
    let root = dir.join("floor");
    let children = root.join("children");
    std::fs::create_dir_all(&children).unwrap();
    let child_trace = vec![b'x'; 2_500];
    let parent_lines = vec![b'x'; 900];
    let started = Instant::now();
    let mut parent = std::fs::File::create(root.join("trace.jsonl")).unwrap();
    for i in 0..n {
        let d = children.join(format!("ses_{i:032}"));
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("trace.jsonl"), &child_trace).unwrap();
        std::fs::create_dir(d.join("out")).unwrap();
        std::fs::write(d.join("out/result.txt"), b"done job").unwrap();
        parent.write_all(&parent_lines).unwrap();
    }
    started.elapsed()
}

/// The latency's floor: what ractor itself takes for the two things a delegation cannot do
/// without, a message to a running actor and an actor started from it. A `Spawner` actor gets
/// the send time, spawns a `Probe` linked under it, and the probe's `pre_start` takes the
/// time. The same runtime and samples as the measured phase, one spawn at a time.
async fn actor_floor(samples: usize) -> (Duration, Duration) {
    use ractor::{Actor, ActorProcessingErr, ActorRef};
    struct Spawner;
    struct Probe;
    struct Go(Instant, tokio::sync::oneshot::Sender<Duration>);
    impl ractor::Message for Go {}
    #[ractor::async_trait]
    impl Actor for Probe {
        type Msg = ();
        type State = ();
        type Arguments = (Instant, tokio::sync::oneshot::Sender<Duration>);
        async fn pre_start(
            &self,
            _: ActorRef<()>,
            (sent, tx): Self::Arguments,
        ) -> Result<(), ActorProcessingErr> {
            let _ = tx.send(sent.elapsed());
            Ok(())
        }
    }
    #[ractor::async_trait]
    impl Actor for Spawner {
        type Msg = Go;
        type State = ();
        type Arguments = ();
        async fn pre_start(&self, _: ActorRef<Go>, _: ()) -> Result<(), ActorProcessingErr> {
            Ok(())
        }
        async fn handle(
            &self,
            myself: ActorRef<Go>,
            Go(sent, tx): Go,
            _: &mut (),
        ) -> Result<(), ActorProcessingErr> {
            // Stopped once started: its end runs beside the next sample, as children's do.
            if let Ok((probe, _)) =
                Actor::spawn_linked(None, Probe, (sent, tx), myself.get_cell()).await
            {
                probe.stop(None);
            }
            Ok(())
        }
        async fn handle_supervisor_evt(
            &self,
            _: ActorRef<Go>,
            _: ractor::SupervisionEvent,
            _: &mut (),
        ) -> Result<(), ActorProcessingErr> {
            Ok(())
        }
    }
    let (spawner, handle) = Actor::spawn(None, Spawner, ()).await.unwrap();
    let mut lat = Vec::with_capacity(samples);
    for _ in 0..samples {
        let (tx, rx) = tokio::sync::oneshot::channel();
        spawner.send_message(Go(Instant::now(), tx)).unwrap();
        lat.push(rx.await.unwrap());
    }
    spawner.stop(None);
    let _ = handle.await;
    lat.sort();
    (percentile(&lat, 0.5), percentile(&lat, 0.99))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// The children's script: one answer, after `MUR_BENCH_CHILD_DELAY_MS` if set (then every
/// child is alive at once, which shows the memory a live child costs).
fn leaf_script() -> String {
    match std::env::var("MUR_BENCH_CHILD_DELAY_MS") {
        Ok(ms) => format!("turns:\n  - say: 'done {{{{task}}}}'\n    delay_ms: {ms}\n"),
        Err(_) => "turns:\n  - say: 'done {{task}}'\n".to_string(),
    }
}

async fn fan_out(n: usize, dir: &Path) {
    let mut calls = String::from("turns:\n  - call:\n");
    for i in 0..n {
        calls.push_str(&format!(
            "      - {{tool: delegate-task, input: {{capsule: leaf, version: '0.1.0', task: 'job {i}'}}}}\n"
        ));
    }
    calls.push_str("  - say: waiting\n  - say: 'all in'\n");
    let grants = Grants {
        spawn_allow: vec!["bench/leaf".into()],
        ..Grants::default()
    };
    let children = Children {
        drivers: HashMap::from([(
            "bench/leaf".to_string(),
            (script(&leaf_script()), Grants::default()),
        )]),
    };
    let floor = file_floor(n, dir);
    let (id, paths) = root_paths(dir);
    let records = paths.records_dir.clone();
    let root = spec("fan", script(&calls), grants, id, paths, "fan out".into());
    let started = Instant::now();
    let report = run(root, children, 8).await;
    let wall = started.elapsed();
    assert_eq!(report.exit_status, ExitStatus::Ok, "{}", report.result);
    let trace = std::fs::read_to_string(records.join("trace.jsonl")).unwrap();
    let ok = trace
        .lines()
        .filter(|l| l.contains("\"event_type\":\"delegation\"") && l.contains("\"outcome\":\"ok\""))
        .count();
    println!(
        "fan-out: {n} children, {ok} outcomes ok delivered, wall {:.0} ms, process peak RSS {:.0} MiB",
        wall.as_secs_f64() * 1000.0,
        peak_rss_mib()
    );
    assert_eq!(ok, n, "every outcome delivered");
    println!(
        "  floor: creating the same folders and files on one thread, {:.0} ms",
        floor.as_secs_f64() * 1000.0
    );
    // Where the time went, from the parent's own trace (millisecond timestamps).
    let ts = |kind: &str, last: bool| {
        let mut it = trace
            .lines()
            .filter(|l| l.contains(&format!("\"event_type\":\"{kind}\"")))
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|v| v["timestamp"].as_u64());
        if last {
            it.next_back()
        } else {
            it.next()
        }
    };
    if let (Some(t0), Some(started), Some(cont), Some(end)) = (
        ts("session_start", false),
        ts("delegation_start", true),
        ts("task_continued", false),
        ts("session_end", true),
    ) {
        println!(
            "  phases: all {n} started after {} ms, all outcomes in after {} ms, done after {} ms",
            started - t0,
            cont - t0,
            end - t0
        );
    }
}

async fn latency(samples: usize, dir: &Path) {
    let clock = Arc::new(Clock::default());
    let mut turns = String::from("turns:\n");
    for i in 0..samples {
        turns.push_str(&format!(
            "  - call: [{{tool: delegate-task, input: {{capsule: leaf, version: '0.1.0', task: 'probe {i}'}}}}]\n"
        ));
    }
    turns.push_str("  - say: waiting\n  - say: done\n");
    let parent: Arc<dyn ModelDriver> = Arc::new(Timed {
        inner: script(&turns),
        clock: clock.clone(),
        parent: true,
    });
    let leaf: Arc<dyn ModelDriver> = Arc::new(Timed {
        inner: script(&leaf_script()),
        clock: clock.clone(),
        parent: false,
    });
    let children = Children {
        drivers: HashMap::from([("bench/leaf".to_string(), (leaf, Grants::default()))]),
    };
    let grants = Grants {
        spawn_allow: vec!["bench/leaf".into()],
        ..Grants::default()
    };
    let (id, paths) = root_paths(dir);
    let root = spec("probe", parent, grants, id, paths, "probe".into());
    let report = run(root, children, 8).await;
    assert_eq!(report.exit_status, ExitStatus::Ok, "{}", report.result);
    let mut lat: Vec<Duration> = {
        let sent = clock.parent_reply.lock().unwrap();
        let first = clock.child_first_call.lock().unwrap();
        sent.iter()
            .filter_map(|(task, t0)| first.get(task).map(|t1| t1.duration_since(*t0)))
            .collect()
    };
    lat.sort();
    println!(
        "delegate-task → child's first model call: {} samples, p50 {:.0} µs, p99 {:.0} µs",
        lat.len(),
        percentile(&lat, 0.5).as_secs_f64() * 1e6,
        percentile(&lat, 0.99).as_secs_f64() * 1e6
    );
    let (p50, p99) = actor_floor(samples).await;
    println!(
        "  floor: a message to an actor that starts a linked actor, until its pre_start runs: p50 {:.0} µs, p99 {:.0} µs",
        p50.as_secs_f64() * 1e6,
        p99.as_secs_f64() * 1e6
    );
}

async fn chain(depth: u32, dir: &Path) {
    let mut drivers = HashMap::new();
    for level in 1..=depth {
        let next = level + 1;
        let text = if level == depth {
            "turns:\n  - say: 'bottom reached'\n".to_string()
        } else {
            format!(
                "turns:\n  - call: [{{tool: delegate-task, input: {{capsule: level-{next}, version: '0.1.0', task: 'go'}}}}]\n  - say: waiting\n  - say: 'level {level} saw: {{{{last}}}}'\n"
            )
        };
        let grants = if level == depth {
            Grants::default()
        } else {
            Grants {
                spawn_allow: vec![format!("bench/level-{next}")],
                ..Grants::default()
            }
        };
        drivers.insert(format!("bench/level-{level}"), (script(&text), grants));
    }
    let grants = Grants {
        spawn_allow: vec!["bench/level-1".into()],
        ..Grants::default()
    };
    let root_script = "turns:\n  - call: [{tool: delegate-task, input: {capsule: level-1, version: '0.1.0', task: 'go'}}]\n  - say: waiting\n  - say: 'root saw: {{last}}'\n";
    let (id, paths) = root_paths(dir);
    let root = spec("root", script(root_script), grants, id, paths, "go".into());
    let started = Instant::now();
    let report = run(root, Children { drivers }, depth).await;
    assert_eq!(report.exit_status, ExitStatus::Ok, "{}", report.result);
    assert!(report.result.contains("bottom reached"));
    println!(
        "depth-{depth} chain: end to end {:.1} ms",
        started.elapsed().as_secs_f64() * 1000.0
    );
}

fn main() {
    let n: usize = std::env::var("MUR_BENCH_CHILDREN")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let rt = if std::env::var("MUR_BENCH_THREADS").as_deref() == Ok("one") {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap()
    };
    mur::launch::raise_nofile_limit();
    let dir = tempfile::tempdir().unwrap();
    let fs = filesystem_of(dir.path());
    let where_ = || {
        println!("session folders in {} ({fs})", dir.path().display());
        if fs == "ext4, no journal" {
            println!(
                "  note: without a journal, ext4 scans past every inode freed in the last minutes \
                 on each create; a run soon after deleting many files (a previous run's, a test \
                 suite's) is several times slower (docs/architecture.md, \"The disk, measured\")"
            );
        }
    };
    let phases =
        std::env::var("MUR_BENCH_PHASES").unwrap_or_else(|_| "fan-out,latency,chain".into());

    let on = |p: &str| phases.split(',').any(|x| x.trim() == p);
    rt.block_on(async {
        if on("fan-out") {
            // tmpfs first: its peak RSS is its own (the figure is the process's high-water mark).
            let shm = Path::new("/dev/shm");
            if !dir.path().starts_with(shm) && filesystem_of(shm) == "tmpfs" {
                if let Ok(mem) = tempfile::tempdir_in(shm) {
                    println!("session folders in {} (tmpfs)", mem.path().display());
                    fan_out(n, mem.path()).await;
                }
            }
            where_();
            fan_out(n, dir.path()).await;
        }
        if !on("fan-out") {
            where_();
        }
        if on("latency") {
            latency(
                std::env::var("MUR_BENCH_SAMPLES")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(1000),
                dir.path(),
            )
            .await;
        }
        if on("chain") {
            chain(8, dir.path()).await;
        }
    });
}
