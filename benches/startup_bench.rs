//! Start to exit of short `mur` runs, each next to its floor measured the same way in the same
//! run: `cargo bench --bench startup_bench`.
//!
//! Every figure is the median wall time of `MUR_BENCH_ITERS` (default 100) runs of a real
//! process, spawned and waited for by this bench, the six commands (three figures, three floors)
//! taken in turn so that each figure and its floor see the same minutes of the machine; peak RSS
//! is the child's own (`wait4`). Each run is started by a small timer process (this binary
//! again) rather than by the bench itself: a child spawned with `vfork` shares its parent's
//! memory until `exec`, and Linux counts that memory's high-water mark in the child's peak RSS,
//! so the bench's own ~10 MiB would hide any figure below it. The floors are this bench binary
//! re-executed in a floor mode, so they pay for a process of the same kind (this crate's
//! allocator and its first arena's size, src/allocator.rs, included):
//!
//! - `mur --version` against an empty program;
//! - `mur run`, scripted model, one turn, against a bare tokio start (the runtime `mur run` gives
//!   these capsules, which cannot delegate: one thread, `mur::runtime::Threads::One`; it runs
//!   nothing);
//! - `mur run`, one HTTP turn (the OpenAI driver against the fake provider on loopback), against
//!   the same tokio start plus one loopback POST without TLS, answered by the same server.
//!
//! Session folders go to `/dev/shm` when it is a tmpfs (the runtime's own figure), else `TMPDIR`.
//! Targets (issue 14): scripted ≤ 3 ms, HTTP ≤ 5 ms, peak RSS of the HTTP run ≤ 8 MiB.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fake_provider::{FakeProvider, Fallback};

/// Environment variable that turns this binary into one of the floor programs.
const FLOOR: &str = "MUR_STARTUP_FLOOR";
/// Environment variable that turns this binary into the timer: it runs its arguments once and
/// prints the wait status, the wall time in nanoseconds and the child's peak RSS in KiB.
const TIMER: &str = "MUR_STARTUP_TIMER";

fn main() {
    if std::env::var_os(TIMER).is_some() {
        time_one_run();
        return;
    }
    if let Ok(mode) = std::env::var(FLOOR) {
        floor(&mode);
        return;
    }
    let iters: usize = std::env::var("MUR_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let shm = Path::new("/dev/shm");
    let base = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .expect("a temporary folder");
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let fake = rt
        .block_on(FakeProvider::start(Vec::new()))
        .expect("the fake provider starts");
    fake.set_fallback(Some(Fallback::Text("done".into())));
    let endpoint = fake.openai_endpoint();

    let scripted = project(base.path(), "scripted", &scripted_manifest());
    let http = project(base.path(), "http", &http_manifest(&endpoint));
    let built = PathBuf::from(env!("CARGO_BIN_EXE_mur"));
    let (me, mur) = (
        staged(&std::env::current_exe().expect("the bench's own path")),
        staged(&built),
    );
    let (me, mur): (&Path, &Path) = (&me, &mur);

    let floor_cmd = |mode: String| {
        let mut c = Command::new(me);
        c.env(FLOOR, mode);
        c
    };
    let version_cmd = || {
        let mut c = Command::new(mur);
        c.arg("--version");
        c
    };
    let post_floor = format!("post {endpoint}/chat/completions");
    // Every figure and its floor, in the order rows are printed.
    let cases: [(&str, Command); 6] = [
        ("version", version_cmd()),
        ("empty", floor_cmd("empty".into())),
        ("scripted", run_cmd(mur, &scripted)),
        ("tokio", floor_cmd("tokio".into())),
        ("http", run_cmd(mur, &http)),
        ("post", floor_cmd(post_floor)),
    ];
    println!(
        "startup_bench: median of {iters} runs each, the six commands taken in turn, folders in {}",
        base.path().display()
    );
    println!(
        "{:<44} {:>9} {:>9} {:>9} {:>9}",
        "figure", "now", "target", "floor", "peak RSS"
    );
    let [version, empty, one, tokio_start, turn, post] = measure(iters, &cases);
    row("mur --version", &version, None, &empty);
    row(
        "mur run, scripted model, one turn",
        &one,
        Some(3.0),
        &tokio_start,
    );
    row("mur run, one HTTP turn", &turn, Some(5.0), &post);
    println!(
        "peak RSS of the one-HTTP-turn run: {:.1} MiB (target 8 MiB; the POST floor {:.1} MiB)",
        turn.rss_mib, post.rss_mib
    );
    println!("{}", symbol_list_state(&built));
    drop(fake);
}

/// How much of the start-up symbol list (build.rs, `link/`) the measured `mur` still holds: a
/// stale list is what makes the peak RSS grow (docs/architecture.md, start-up), and nothing
/// else shows it. Read with `nm`; said so when it is missing.
fn symbol_list_state(mur: &Path) -> String {
    // The profile's own list: the binary is `target/<profile>/mur` (`--profile dist` too).
    let profile = mur
        .parent()
        .and_then(Path::file_name)
        .and_then(|p| p.to_str())
        .unwrap_or("release");
    let list =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("link/startup-symbols.{profile}.txt"));
    let Ok(text) = std::fs::read_to_string(&list) else {
        return format!("start-up symbol list: {} not found", list.display());
    };
    let nm = match Command::new("nm").arg(mur).output() {
        Ok(out) if out.status.success() => out.stdout,
        _ => return "start-up symbol list: not checked (no `nm` here)".into(),
    };
    let defined: std::collections::HashSet<&[u8]> = nm
        .split(|b| *b == b'\n')
        .filter_map(|line| line.rsplit(|b| *b == b' ').next())
        .collect();
    let names: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    let found = names
        .iter()
        .filter(|n| defined.contains(n.as_bytes()))
        .count();
    let advice = if found == names.len() {
        String::new()
    } else {
        format!("; rerun scripts/startup-symbols.sh {profile}")
    };
    format!(
        "start-up symbol list: {found} of {} names in {}{advice}",
        names.len(),
        mur.display()
    )
}

/// A copy of `binary` made beside it (a fresh name, so two benches do not share one), removed
/// when the returned path is dropped: every binary is measured as a copy, as `cargo install`
/// leaves one. Run from where the linker wrote it, `mur` took 10–40 page faults more per run
/// than a copy of the same file (why is not established; docs/architecture.md, start-up), so
/// how long ago it was linked would decide the figure.
fn staged(binary: &Path) -> tempfile::TempPath {
    let dir = binary.parent().expect("a binary's folder");
    let copy = tempfile::Builder::new()
        .prefix(".startup-bench-")
        .tempfile_in(dir)
        .unwrap_or_else(|e| panic!("cannot make a file in {}: {e}", dir.display()))
        // Closed before it is run: a file open for writing cannot be executed.
        .into_temp_path();
    std::fs::copy(binary, &copy).unwrap_or_else(|e| {
        panic!(
            "cannot copy {} to {}: {e}",
            binary.display(),
            copy.display()
        )
    });
    copy
}

/// One measured command: median wall time and the largest peak RSS over the runs.
struct Figure {
    median_ms: f64,
    rss_mib: f64,
}

fn row(name: &str, now: &Figure, target: Option<f64>, floor: &Figure) {
    let target = target.map_or("-".to_string(), |t| format!("{t:.1} ms"));
    println!(
        "{name:<44} {:>6.2} ms {target:>9} {:>6.2} ms {:>6.1} MiB",
        now.median_ms, floor.median_ms, now.rss_mib
    );
}

/// Run each command `iters` times (after one warm-up round), each to its end, each through the
/// timer, the commands taken in turn: a figure and its floor see the same minutes of this
/// machine. Run one after the other in blocks, a floor taken a minute after its figure had
/// drifted by more than the difference measured (this VM: 2.73 then 1.97 ms for the same
/// floor, a quarter of an hour apart).
fn measure<const N: usize>(iters: usize, cases: &[(&str, Command); N]) -> [Figure; N] {
    let me = std::env::current_exe().expect("the bench's own path");
    let mut times: [Vec<Duration>; N] = std::array::from_fn(|_| Vec::with_capacity(iters));
    let mut rss_kib = [0; N];
    for round in 0..=iters {
        for (i, (_, target)) in cases.iter().enumerate() {
            let (took, maxrss) = time_through_timer(&me, target);
            if round > 0 {
                times[i].push(took);
                rss_kib[i] = rss_kib[i].max(maxrss);
            }
        }
    }
    std::array::from_fn(|i| {
        times[i].sort();
        Figure {
            median_ms: times[i][times[i].len() / 2].as_secs_f64() * 1000.0,
            rss_mib: rss_kib[i] as f64 / 1024.0,
        }
    })
}

/// Run `target` once through the timer: its wall time and peak RSS (KiB).
fn time_through_timer(me: &Path, target: &Command) -> (Duration, i64) {
    let mut cmd = Command::new(me);
    cmd.env(TIMER, "1")
        .arg(target.get_program())
        .args(target.get_args());
    if let Some(dir) = target.get_current_dir() {
        cmd.current_dir(dir);
    }
    for (k, v) in target.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let out = cmd.stdin(Stdio::null()).output().expect("the timer starts");
    let report = String::from_utf8_lossy(&out.stdout);
    let fields: Vec<i64> = report
        .split_whitespace()
        .map(|f| f.parse().expect("the timer prints numbers"))
        .collect();
    let [status, nanos, maxrss] = fields[..] else {
        panic!("the timer printed '{report}' for {target:?}");
    };
    if status != 0 {
        panic!(
            "{target:?} failed (wait status {status}): {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    (Duration::from_nanos(nanos as u64), maxrss)
}

/// The timer: run the command our arguments name, as our only child, and print its wait
/// status, wall time (ns) and peak RSS (KiB).
// The child is reaped by `wait4` (for its own peak RSS), which clippy cannot see.
#[allow(clippy::zombie_processes)]
fn time_one_run() {
    let mut args = std::env::args_os().skip(1);
    let program = args.next().expect("the timer is given a command");
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_remove(TIMER)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    let started = Instant::now();
    let child = cmd.spawn().expect("the command starts");
    let (status, maxrss) = wait4(child.id() as libc::pid_t);
    let took = started.elapsed();
    println!("{status} {} {maxrss}", took.as_nanos());
}

/// Wait for `pid`; answers its wait status and peak RSS (KiB).
fn wait4(pid: libc::pid_t) -> (i32, i64) {
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 writes only the two structs we pass, and `pid` is our own child.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    (status, usage.ru_maxrss)
}

fn run_cmd(mur: &Path, project: &Path) -> Command {
    let mut c = Command::new(mur);
    c.args(["run", "--task", "hi"]).current_dir(project);
    c
}

fn project(base: &Path, name: &str, manifest: &str) -> PathBuf {
    let dir = base.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("murmur.yaml"), manifest).unwrap();
    std::fs::write(dir.join("script.yaml"), "turns:\n  - say: done\n").unwrap();
    dir
}

fn scripted_manifest() -> String {
    "name: one
version: \"0.1.0\"
artifacts:
  - name: mur/driver-script
    version: \"0.1.0\"
    runtime: driver
    config:
      script: script.yaml
inference:
  transport: http
  model: scripted
  driver:
    artifact: mur/driver-script
"
    .to_string()
}

fn http_manifest(endpoint: &str) -> String {
    format!(
        "name: one
version: \"0.1.0\"
artifacts:
  - name: murmur/driver-openai
    version: \"0.19.0\"
    runtime: driver
    gateway:
      endpoint: {endpoint}
      keyless: true
inference:
  transport: http
  model: local-model
  retry:
    max_retries: 0
  driver:
    artifact: murmur/driver-openai
"
    )
}

/// The floor programs.
fn floor(mode: &str) {
    match mode.split_once(' ') {
        None if mode == "empty" => {}
        None if mode == "tokio" => {
            let rt = mur::runtime::build(mur::runtime::Threads::One).expect("a runtime");
            rt.block_on(async {});
        }
        Some(("post", url)) => {
            let rt = mur::runtime::build(mur::runtime::Threads::One).expect("a runtime");
            rt.block_on(async {
                let client = mur::tls::client_builder(url).build().expect("a client");
                let body = r#"{"model":"local-model","messages":[{"role":"user","content":"hi"}]}"#;
                let reply = client
                    .post(url)
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await
                    .expect("the POST is answered");
                let _ = reply.bytes().await.expect("the reply is read");
            });
        }
        _ => panic!("unknown {FLOOR} mode '{mode}'"),
    }
}
