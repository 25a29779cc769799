//! Replay and resume of a long session, and what content capture costs a turn:
//! `cargo bench --bench replay_bench`. Targets (issue 15):
//!
//! - `mur replay SESSION --tools recorded` of a 1,000-turn session: under 1 s. The session is
//!   recorded first by the real `mur` on the scripted model (docs/scripted-model.md) with
//!   `trace.capture: content`, each turn one `bash` call (`echo`), then the replay is timed as a
//!   real process, start to exit (it writes its own session and trace, as a user's does).
//! - Rebuilding the state of that session for a resume: under 200 ms. In-process, the trace read
//!   and [`mur::resume::seed::rebuild`] (what `mur resume` does before its first model call).
//! - Content capture's cost on turn_bench's overhead per turn: at most +10 %. The session
//!   turn_bench times (benches/support/turns.rs), 300 turns, run with `capture: meta` and with
//!   `capture: content`, back to back, `BENCH_ROUNDS` times (default 7); the figure is the median
//!   of each round's content/meta ratio.
//!
//! Every timed figure is the median of `MUR_BENCH_ITERS` runs (default 5).

#[path = "support/turns.rs"]
mod turns;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use mur_actors::spec::Capture;
use turns::median;

const TURNS: usize = 1000;

fn mur() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mur"))
}

/// A project whose one session made `TURNS` turns, each one `bash` call; returns the project.
fn record(base: &Path) -> PathBuf {
    let p = base.join("long");
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(
        p.join("murmur.yaml"),
        "name: long\nversion: \"0.1.0\"\nartifacts:\n  - name: mur/driver-script\n    version: \"0.1.0\"\n    runtime: driver\n    config:\n      script: script.yaml\ncapabilities:\n  shell:\n    allow: [bash]\ntrace:\n  capture: content\ninference:\n  transport: http\n  model: scripted\n  driver:\n    artifact: mur/driver-script\n",
    )
    .unwrap();
    let mut script = String::from("turns:\n");
    for i in 0..TURNS {
        script.push_str(&format!(
            "  - call: [{{tool: bash, input: {{command: \"echo step {i}\"}}}}]\n"
        ));
    }
    script.push_str("  - say: done\n");
    std::fs::write(p.join("script.yaml"), script).unwrap();
    let out = mur()
        .args(["run", "--task", "Take a thousand steps", "-q"])
        .current_dir(&p)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    p
}

fn trace_of(project: &Path) -> PathBuf {
    let mut sessions: Vec<PathBuf> = std::fs::read_dir(project.join("workdir/.murmur"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    sessions.sort();
    sessions[0].join("trace.jsonl")
}

fn main() {
    let iters: usize = std::env::var("MUR_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
        .max(1);
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(7)
        .max(1);
    let base = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let project = record(base.path());
    let trace = trace_of(&project);
    let bytes = std::fs::metadata(&trace).unwrap().len();
    println!(
        "replay_bench: a {TURNS}-turn session recorded with trace.capture: content in {:.1} s ({:.1} MB of trace); medians of {iters} runs",
        started.elapsed().as_secs_f64(),
        bytes as f64 / 1e6
    );

    // Replay with --tools recorded, a real process.
    let mut replay = Vec::new();
    for _ in 0..iters {
        let t = Instant::now();
        let out = mur()
            .args(["replay", trace.to_str().unwrap(), "--tools", "recorded"])
            .current_dir(&project)
            .output()
            .unwrap();
        replay.push(t.elapsed().as_secs_f64());
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success()
                && said.contains(&format!("replay: identical ({} turns", TURNS + 1)),
            "{said}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let replay = median(replay);
    println!(
        "mur replay --tools recorded, {TURNS} turns: {:.3} s (target < 1 s){}",
        replay,
        if replay < 1.0 { "" } else { "  MISSED" }
    );

    // The resume's rebuild, in-process: read the trace, rebuild the conversation.
    let mut rebuild = Vec::new();
    let mut messages = 0;
    for _ in 0..iters {
        let t = Instant::now();
        let rec = mur::replay::recording::read(&trace).unwrap();
        let rebuilt = mur::resume::seed::rebuild(&rec).unwrap();
        rebuild.push(t.elapsed().as_secs_f64() * 1e3);
        messages = rebuilt.seed.messages.len();
    }
    let rebuild = median(rebuild);
    println!(
        "resume rebuild (read the trace + seed::rebuild), {TURNS} turns, {messages} messages: {rebuild:.1} ms (target < 200 ms){}",
        if rebuild < 200.0 { "" } else { "  MISSED" }
    );

    // Content capture on turn_bench's session.
    let runtimes = turns::Runtimes::new();
    let dir = tempfile::tempdir().unwrap();
    let (mut meta, mut content, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let m = runtimes.run(300, dir.path(), Capture::Meta).p50;
        let c = runtimes.run(300, dir.path(), Capture::Content).p50;
        meta.push(m);
        content.push(c);
        ratios.push(c / m);
    }
    let (meta, content) = (median(meta), median(content));
    // Each round's pair ran back to back: the median of their ratios is less at the mercy of
    // a noisy neighbour than the ratio of the two medians.
    let ratio = median(ratios);
    println!(
        "turn_bench overhead per turn p50, 300 turns: capture meta {meta:.1} µs, capture content {content:.1} µs; content/meta per round, median: {:+.1} % (target ≤ +10 %){}; {rounds} rounds",
        (ratio - 1.0) * 100.0,
        if ratio <= 1.10 { "" } else { "  MISSED" }
    );
}
