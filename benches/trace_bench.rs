//! Benchmark of the trace readers through the real `mur` binary.
//!
//! Generates (1) a 1,000,000-event trace and times `mur trace report` on it, with the child's
//! peak resident memory from `getrusage(RUSAGE_CHILDREN)`; (2) a 1,000-turn session and times
//! `mur trace show` on it. Targets (issue 6): report ≤ 2 s and ≤ 100 MiB; show ≤ 200 ms.
//! Run with `cargo bench --bench trace_bench`; figures are printed, and a missed target exits 1.

use std::fs::File;
use std::io::{BufWriter, Write};
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

/// Run `mur <args>`, discard its output, return wall time (best of `runs`).
fn time_mur(args: &[&str], runs: usize) -> Duration {
    let mut best = Duration::MAX;
    for _ in 0..runs {
        let start = Instant::now();
        let status = Command::new(env!("CARGO_BIN_EXE_mur"))
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .status()
            .expect("run mur");
        let took = start.elapsed();
        assert!(status.success(), "mur {args:?} failed");
        best = best.min(took);
    }
    best
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
    let took = time_mur(&["trace", "report", big_s], 3);
    let rss = children_peak_rss();
    let ok = took <= Duration::from_secs(2) && rss <= 100 * 1024 * 1024;
    failed |= !ok;
    println!(
        "mur trace report, 1,000,000 events: {:.3} s (best of 3), peak RSS {:.1} MiB  [target ≤ 2 s, ≤ 100 MiB: {}]",
        took.as_secs_f64(),
        rss as f64 / 1048576.0,
        if ok { "met" } else { "MISSED" }
    );

    let small = dir.path().join("turns.trace.jsonl");
    let (events, turns) = write_trace(&small, usize::MAX, 1_000);
    let took = time_mur(&["trace", "show", small.to_str().unwrap()], 5);
    let ok = took <= Duration::from_millis(200);
    failed |= !ok;
    println!(
        "mur trace show, {turns}-turn session ({events} events): {:.1} ms (best of 5)  [target ≤ 200 ms: {}]",
        took.as_secs_f64() * 1000.0,
        if ok { "met" } else { "MISSED" }
    );
    if failed {
        std::process::exit(1);
    }
}
