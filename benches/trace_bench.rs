//! Benchmark of the trace readers through the real `mur` binary.
//!
//! Generates (1) a 1,000,000-event trace and times `mur trace report` on it, with the child's
//! peak resident memory from `getrusage(RUSAGE_CHILDREN)`; (2) a 1,000-turn session and times
//! `mur trace show` on it. Targets: report ≤ 2 s and ≤ 100 MiB, show ≤ 200 ms (issue 6);
//! report ≤ 0.6 s (issue 14).
//!
//! Next to the report's figure it prints the floor, measured the same way in the same run: a
//! plain parse of the same bytes by this process — the file read through a `BufReader` one
//! line at a time (`read_until` into one reused buffer) and each line deserialised by
//! serde_json into a minimal typed struct, `{ event_type: &str }` borrowed. That is the least
//! a typed reader of these lines does (find each line, check it is JSON, read every key as
//! text to find the one it wants), so it is the honest floor for "parse the same bytes". It
//! also prints the same loop into `serde::de::IgnoredAny`, which only checks the syntax (keys
//! are not even read as text): a lower bound no reader that reads fields can reach with serde.
//! The report's reader takes plain lines apart with its own scanner and leaves the others to
//! serde (`src/trace/scan.rs`), and parses a trace this large on two cores
//! (`src/trace/two_cores.rs`; the floor is one core's), so it can come in under the serde floor.
//!
//! This machine has two cores, often shared with other work, so one run says little: the
//! report and the floors run `RUNS` times each (7 unless `TRACE_BENCH_RUNS` says otherwise),
//! interleaved so that they see the same load, and the verdicts are on the medians (min and max
//! are printed too). Run with `cargo bench --bench trace_bench`; a missed target exits 1.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SESSION: &str = "ses_0193c0ffee0070008000000000001000";

/// Appends trace lines with fresh event ids and increasing timestamps.
struct Lines {
    w: BufWriter<File>,
    n: u64,
    ts: u64,
}

impl Lines {
    fn line(&mut self, kind: &str, parent: &str, rest: &str) {
        self.n += 1;
        self.ts += 3;
        let (n, ts) = (self.n, self.ts);
        writeln!(
            self.w,
            "{{\"event_type\":\"{kind}\",\"event_id\":\"evt_0193c0ffee007000{n:016x}\",\"parent_id\":{parent},\"session_id\":\"{SESSION}\",\"timestamp\":{ts}{rest}}}"
        )
        .unwrap();
    }
}

/// Write a realistic session trace with about `events` lines: per turn an inference line (with
/// wire hashes), a tool call and, for shell tools, a shell line; at most `max_turns` turns.
/// Returns (events, turns).
fn write_trace(path: &Path, events: usize, max_turns: u64) -> (usize, u64) {
    const T0: u64 = 1_795_992_735_682;
    let file = File::create(path).expect("create trace");
    let mut l = Lines {
        w: BufWriter::with_capacity(1 << 20, file),
        n: 0,
        ts: T0,
    };
    l.line(
        "session_start",
        "null",
        ",\"capsule_name\":\"bench\",\"capsule_version\":\"0.1.0\",\"model\":\"claude-sonnet-5\",\"max_turns\":null,\"capabilities\":[\"shell\"],\"tools_declared\":[\"bash\",\"grep\",\"tool-edit\"],\"runtime_artifacts\":[],\"resumed_from\":null,\"context_id\":null",
    );
    l.line(
        "task_start",
        "\"evt_root\"",
        ",\"task_id\":\"tsk_1\",\"source\":\"task_md\"",
    );
    let tools = ["bash", "grep", "tool-edit"];
    let mut turn = 0u64;
    let (mut input, mut output, mut calls, mut shells) = (0u64, 0u64, 0u64, 0u64);
    while (l.n as usize) < events.saturating_sub(3) && turn + 1 < max_turns {
        let tool = tools[(turn % 3) as usize];
        let (i, o) = (1000 + turn % 977, 40 + turn % 61);
        input += i;
        output += o;
        l.line("inference", "\"evt_task\"", &format!(
            ",\"turn\":{turn},\"task_id\":\"tsk_1\",\"input_tokens\":{i},\"output_tokens\":{o},\"decision\":\"tool_call\",\"stop_reason\":\"tool_call\",\"tool_name\":\"{tool}\",\"max_output_tokens\":8192,\"system_sha\":\"bc5a00c088ace5367fbf58979d36c2119bdb2723e7b00727cbb8b2bdd965bf2e\",\"tools_sha\":\"a9d0fff5f7b14e0e98ce9de18a4f1c2352bd26059836ec88ed6190a56a5792e2\",\"response_sha\":\"dbdf4f178a4c9c32f74d7133ec8545ece197a1bd5f6a18cf599fd50b2e7fe9d6\""
        ));
        calls += 1;
        l.line("tool_call", "\"evt_inf\"", &format!(
            ",\"turn\":{turn},\"task_id\":\"tsk_1\",\"tool_name\":\"{tool}\",\"tool_call_id\":\"toolu_{turn}\",\"input\":{{\"command\":\"cargo test --workspace -- --nocapture {turn}\"}},\"input_bytes\":52,\"output_bytes\":{},\"duration_ms\":{},\"status\":\"{}\"",
            200 + turn % 5000, turn % 400, if turn % 50 == 0 { "error" } else { "ok" }
        ));
        if tool == "bash" {
            shells += 1;
            l.line("shell", "\"evt_inf\"", &format!(
                ",\"turn\":{turn},\"task_id\":\"tsk_1\",\"binary\":\"/usr/bin/bash\",\"command\":\"cargo test {turn}\",\"exit_code\":{},\"stdout_bytes\":100,\"stderr_bytes\":0,\"duration_ms\":{}",
                turn % 7 / 6, turn % 390
            ));
        }
        turn += 1;
    }
    l.line("inference", "\"evt_task\"", &format!(",\"turn\":{turn},\"task_id\":\"tsk_1\",\"input_tokens\":10,\"output_tokens\":1,\"decision\":\"end_turn\",\"tool_name\":null"));
    l.line(
        "task_end",
        "\"evt_task\"",
        ",\"task_id\":\"tsk_1\",\"exit_status\":\"ok\"",
    );
    l.line("session_end", "\"evt_root\"", &format!(
        ",\"total_turns\":{},\"total_input_tokens\":{},\"total_output_tokens\":{},\"total_tool_calls\":{calls},\"total_shell_calls\":{shells},\"duration_ms\":{},\"exit_status\":\"ok\"",
        turn + 1, input + 10, output + 1, l.ts - T0
    ));
    l.w.flush().unwrap();
    (l.n as usize, turn + 1)
}

/// Run `mur <args>` once, discard its output, return its wall time.
fn time_mur(args: &[&str]) -> Duration {
    let start = Instant::now();
    let status = Command::new(env!("CARGO_BIN_EXE_mur"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .status()
        .expect("run mur");
    let took = start.elapsed();
    assert!(status.success(), "mur {args:?} failed");
    took
}

/// The least a typed reader reads of a line: which event it is.
#[derive(serde::Deserialize)]
struct Minimal<'a> {
    #[serde(borrow)]
    #[allow(dead_code)]
    event_type: &'a str,
}

/// The plain parse of `path`: one line at a time through a `BufReader`, each line handed to
/// `parse` (serde_json into some type). Returns the wall time and the number of lines.
fn time_plain_parse(path: &Path, parse: impl Fn(&[u8])) -> (Duration, usize) {
    let start = Instant::now();
    let mut input = BufReader::new(File::open(path).expect("open trace"));
    let mut line = Vec::new();
    let mut lines = 0;
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line).expect("read trace") == 0 {
            break;
        }
        parse(&line);
        lines += 1;
    }
    (start.elapsed(), lines)
}

/// Median, min and max of some timings.
struct Spread {
    runs: usize,
    median: Duration,
    min: Duration,
    max: Duration,
}

impl Spread {
    fn of(mut times: Vec<Duration>) -> Spread {
        times.sort();
        Spread {
            runs: times.len(),
            median: times[times.len() / 2],
            min: times[0],
            max: times[times.len() - 1],
        }
    }

    fn secs(&self) -> String {
        format!(
            "{:.3} s (median of {}; min {:.3}, max {:.3})",
            self.median.as_secs_f64(),
            self.runs,
            self.min.as_secs_f64(),
            self.max.as_secs_f64()
        )
    }
}

/// Largest resident set of any child waited for so far, in bytes.
fn children_peak_rss() -> u64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we own.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    assert_eq!(rc, 0);
    usage.ru_maxrss as u64 * 1024 // kilobytes on Linux
}

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut failed = false;

    let big = dir.path().join("big.trace.jsonl");
    let t = Instant::now();
    let (events, turns) = write_trace(&big, 1_000_000, u64::MAX);
    let size = std::fs::metadata(&big).unwrap().len();
    println!(
        "generated {events} events ({turns} turns, {:.0} MiB) in {:.2?}",
        size as f64 / 1048576.0,
        t.elapsed()
    );
    let big_s = big.to_str().unwrap();
    let runs: usize = std::env::var("TRACE_BENCH_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(7);
    let (mut report, mut typed, mut ignored) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        report.push(time_mur(&["trace", "report", big_s]));
        let (took, lines) = time_plain_parse(&big, |line| {
            serde_json::from_slice::<Minimal>(line).expect("a trace line");
        });
        assert_eq!(lines, events);
        typed.push(took);
        let (took, _) = time_plain_parse(&big, |line| {
            serde_json::from_slice::<serde::de::IgnoredAny>(line).expect("a JSON line");
        });
        ignored.push(took);
    }
    let rss = children_peak_rss();
    let (report, typed, ignored) = (Spread::of(report), Spread::of(typed), Spread::of(ignored));
    let ok = report.median <= Duration::from_secs(2) && rss <= 100 * 1024 * 1024;
    let fast = report.median <= Duration::from_millis(600);
    failed |= !ok || !fast;
    println!(
        "mur trace report, 1,000,000 events: {}, peak RSS {:.1} MiB  [target ≤ 2 s, ≤ 100 MiB: {}; ≤ 0.6 s: {}]",
        report.secs(),
        rss as f64 / 1048576.0,
        if ok { "met" } else { "MISSED" },
        if fast { "met" } else { "MISSED" }
    );
    println!(
        "  floor, plain parse of the same bytes (BufReader lines, serde_json into {{event_type: &str}}): {}; report/floor {:.2}",
        typed.secs(),
        report.median.as_secs_f64() / typed.median.as_secs_f64()
    );
    println!(
        "  the same loop into serde::de::IgnoredAny (syntax only): {}",
        ignored.secs()
    );

    let small = dir.path().join("turns.trace.jsonl");
    let (events, turns) = write_trace(&small, usize::MAX, 1_000);
    let small_s = small.to_str().unwrap();
    let show = Spread::of(
        (0..runs)
            .map(|_| time_mur(&["trace", "show", small_s]))
            .collect(),
    );
    let ok = show.median <= Duration::from_millis(200);
    failed |= !ok;
    println!(
        "mur trace show, {turns}-turn session ({events} events): {:.1} ms (median of {runs}; min {:.1}, max {:.1})  [target ≤ 200 ms: {}]",
        show.median.as_secs_f64() * 1000.0,
        show.min.as_secs_f64() * 1000.0,
        show.max.as_secs_f64() * 1000.0,
        if ok { "met" } else { "MISSED" }
    );
    if failed {
        std::process::exit(1);
    }
}
