//! Delegation across machines, measured on loopback: `cargo bench --bench cluster_bench`.
//!
//! Real processes: two `mur node`s on 127.0.0.1:0 and a `mur run --nodes … --max-local 0`
//! root on the scripted model; children answer in one scripted turn.
//!
//! 1. Latency: the root's `delegate-task` call → the remote child's first model call, p50 and
//!    p99 over `MUR_BENCH_LATENCY_N` delegations (default 200), from the traces (the parent's
//!    `tool_call` start, the child's first `inference` line: millisecond timestamps, one
//!    machine's clock).
//! 2. Fan-out: `MUR_BENCH_CHILDREN` children (default 1,000) over the two nodes, against the
//!    same fan-out run locally: wall time of `mur run`, and the peak RSS of each process (the
//!    root's from `wait4`, each node's `VmHWM` after the run).
//!
//! Session folders go under `TMPDIR` (docs/architecture.md says what an ext4 without a journal
//! adds); the nodes' under the same temporary folder.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use serde_json::Value;

const MUR: &str = env!("CARGO_BIN_EXE_mur");
const COOKIE: &str = "bench-cookie";

struct Node {
    child: Child,
    addr: String,
}

impl Node {
    fn start(home: &Path, label: &str, capacity: usize) -> Node {
        let mut child = Command::new(MUR)
            .args(["node", "--listen", "127.0.0.1:0", "--capacity"])
            .arg(capacity.to_string())
            .arg("--dir")
            .arg(home.join(label))
            .env("MUR_CLUSTER_COOKIE", COOKIE)
            .env("HOME", home)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start mur node");
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let addr = first.trim().rsplit(' ').next().unwrap().to_string();
        Node { child, addr }
    }

    /// Peak resident memory so far, KiB.
    fn peak_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A project whose root delegates to `n` children in one turn (one call at a time).
fn project(dir: &Path, n: usize) {
    let manifest = |name: &str, caps: &str| {
        format!("name: {name}\nversion: \"0.1.0\"\nartifacts:\n  - name: mur/driver-script\n    version: \"0.1.0\"\n    runtime: driver\n    config:\n      script: script.yaml\n{caps}inference:\n  transport: http\n  model: scripted\n  driver:\n    artifact: mur/driver-script\n")
    };
    std::fs::create_dir_all(dir.join("worker")).unwrap();
    std::fs::write(
        dir.join("murmur.yaml"),
        manifest(
            "fanout",
            "capabilities:\n  spawn:\n    allow: [local/worker]\n",
        ),
    )
    .unwrap();
    std::fs::write(dir.join("worker/murmur.yaml"), manifest("worker", "")).unwrap();
    std::fs::write(dir.join("worker/script.yaml"), "turns:\n  - say: done\n").unwrap();
    let call = serde_json::json!({"tool": "delegate-task", "input": {"capsule": "worker", "version": "0.1.0", "task": "work"}});
    let script = serde_json::json!({"turns": [
        {"call": vec![call; n]},
        {"say": "waiting"},
        {"say": "all reported"},
    ]});
    std::fs::write(dir.join("script.yaml"), script.to_string()).unwrap();
    run(Command::new(MUR)
        .args(["build", "worker", "-o", "w.mur.zip"])
        .current_dir(dir));
    run(Command::new(MUR)
        .args(["install", "./w.mur.zip"])
        .current_dir(dir)
        .env("HOME", dir));
}

/// Run the root (with `nodes`, or locally); wall time in seconds and its peak RSS in KiB.
fn run_root(dir: &Path, nodes: &[&Node]) -> (f64, u64) {
    let mut cmd = Command::new(MUR);
    cmd.args(["run", "-q", "--task", "go", "--max-children", "100000"])
        .current_dir(dir)
        .env("HOME", dir)
        .env("MUR_CLUSTER_COOKIE", COOKIE)
        .stdout(Stdio::null());
    if !nodes.is_empty() {
        let addrs: Vec<&str> = nodes.iter().map(|n| n.addr.as_str()).collect();
        cmd.args(["--nodes", &addrs.join(","), "--max-local", "0"]);
    }
    let started = Instant::now();
    // Reaped by the wait4 below (which also gives its rusage), not by Child::wait.
    #[allow(clippy::zombie_processes)]
    let child = cmd.spawn().unwrap();
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it for the child we started.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child's pid, with pointers to live locals.
    unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    let wall = started.elapsed().as_secs_f64();
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "mur run failed"
    );
    (wall, usage.ru_maxrss as u64)
}

fn root_records(dir: &Path) -> PathBuf {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("workdir/.murmur"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("trace.jsonl").is_file())
        .collect();
    v.sort();
    v.pop().expect("a root session")
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// delegate-task start → child's first inference line, ms, per delegation.
fn latencies(root: &Path) -> Vec<u64> {
    let t = lines(&root.join("trace.jsonl"));
    let calls: Vec<u64> = t
        .iter()
        .filter(|l| l["event_type"] == "tool_call" && l["tool_name"] == "delegate-task")
        .map(|l| l["timestamp"].as_u64().unwrap() - l["duration_ms"].as_u64().unwrap())
        .collect();
    let children: Vec<String> = t
        .iter()
        .filter(|l| l["event_type"] == "delegation_start")
        .map(|l| l["child_session_id"].as_str().unwrap().to_string())
        .collect();
    let mut out: Vec<u64> = calls
        .iter()
        .zip(&children)
        .map(|(start, child)| {
            let ct = lines(&root.join("children").join(child).join("trace.jsonl"));
            let first = ct
                .iter()
                .find(|l| l["event_type"] == "inference")
                .expect("the child's first model call")["timestamp"]
                .as_u64()
                .unwrap();
            first.saturating_sub(*start)
        })
        .collect();
    out.sort_unstable();
    out
}

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let n_latency = knob("MUR_BENCH_LATENCY_N", 200);
    let n_fan = knob("MUR_BENCH_CHILDREN", 1000);
    let tmp = tempfile::tempdir().unwrap();

    // 1. Latency.
    let dir = tmp.path().join("latency");
    project(&dir, n_latency);
    {
        let (a, b) = (
            Node::start(&dir, "node-a", n_latency),
            Node::start(&dir, "node-b", n_latency),
        );
        run_root(&dir, &[&a, &b]);
    }
    let l = latencies(&root_records(&dir));
    println!(
        "remote delegate-task → child's first model call ({} delegations over 2 nodes): p50 {} ms, p99 {} ms, max {} ms",
        l.len(),
        percentile(&l, 0.5),
        percentile(&l, 0.99),
        l.last().unwrap()
    );

    // 2. Fan-out, remote then local.
    let dir = tmp.path().join("remote");
    project(&dir, n_fan);
    let (a, b) = (
        Node::start(&dir, "node-a", n_fan),
        Node::start(&dir, "node-b", n_fan),
    );
    let (wall, root_kib) = run_root(&dir, &[&a, &b]);
    println!(
        "fan-out of {n_fan} over 2 nodes: wall {wall:.2} s; peak RSS: root {} MiB, node a {} MiB, node b {} MiB",
        root_kib / 1024,
        a.peak_kib() / 1024,
        b.peak_kib() / 1024
    );
    drop((a, b));
    let dir = tmp.path().join("local");
    project(&dir, n_fan);
    let (wall, root_kib) = run_root(&dir, &[]);
    println!(
        "fan-out of {n_fan} in one process: wall {wall:.2} s; peak RSS {} MiB",
        root_kib / 1024
    );
}
