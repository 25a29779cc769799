//! Runtime overhead per turn, the whole loop: `cargo bench --bench turn_bench`.
//!
//! A real session (Supervisor, Session, Dispatcher, trace on disk) talks to the
//! fake provider on loopback through the real OpenAI driver (Chat Completions, JSON replies).
//! Each turn the model calls a tool the capsule does not have (the refusal needs no subprocess,
//! so no tool's own time is counted) and the next turn follows. Per turn, the overhead is the
//! loop's own time (from one reply's arrival to the next request's start: trace lines, dispatch,
//! history) plus the driver's time on the call less the server's own time for the request.
//!
//! A turn must cost the same late in a session as early: the figures of a 50-turn and a
//! 300-turn session are compared (target: p50 at 300 / p50 at 50 ≤ 1.2, and ≤ 30 µs of overhead
//! per turn), and so are the first and last 50 turns of the 300-turn one. The sessions run
//! `BENCH_ROUNDS` times (default 3), alternating, and the median of each figure is reported, so
//! one noisy run on a shared machine does not decide. The fake provider reads every body but
//! neither parses nor keeps it ([`FakeProvider::keep_bodies`]): parsed and kept, 300 turns of
//! bodies cost the server ~0.8 ms a request at the end and grow the process by ~100 MB, and
//! part of that shows up in the client's figures (fresh pages, a colder cache on shared cores)
//! rather than in the server's netted-out time.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use fake_provider::builders::openai;
use fake_provider::{FakeProvider, Reply};
use mur_actors::model::{InferError, InferReply, InferRequest, ModelDriver, RetrySink};
use mur_actors::session::ExitStatus;
use mur_actors::spec::{Grants, SessionPaths, SessionSpec};
use mur_actors::supervisor::SupervisorArgs;

/// Notes when each call starts and ends.
struct Timed {
    inner: Arc<dyn ModelDriver>,
    calls: Mutex<Vec<(Instant, Instant)>>,
}

#[async_trait]
impl ModelDriver for Timed {
    fn name(&self) -> &str {
        self.inner.name()
    }
    async fn infer(&self, r: &InferRequest, s: &dyn RetrySink) -> Result<InferReply, InferError> {
        let start = Instant::now();
        let reply = self.inner.infer(r, s).await;
        self.calls.lock().unwrap().push((start, Instant::now()));
        reply
    }
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// What one session measured, in µs.
struct Figures {
    p50: f64,
    p99: f64,
    loop_p50: f64,
    /// p50 of the first and of the last 50 turns.
    first: f64,
    last: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    pct(&v, 0.5)
}

async fn run(turns: usize, dir: &std::path::Path) -> Figures {
    let mut script: Vec<Reply> = (0..turns)
        .map(|i| {
            Reply::json(openai::chat_tool_calls(&[(
                &format!("call_{i}"),
                "noop",
                "{\"n\": 1}",
            )]))
        })
        .collect();
    script.push(Reply::json(openai::chat_text("done")));
    let fake = FakeProvider::start(script).await.unwrap();
    fake.keep_bodies(false);
    let mut cfg =
        mur::drivers::HttpDriverConfig::new("murmur/driver-openai", &fake.openai_endpoint(), None);
    cfg.retry.max_retries = 0;
    let driver = Arc::new(Timed {
        inner: mur::drivers::openai(cfg).unwrap(),
        calls: Mutex::new(Vec::new()),
    });
    let id = mur_actors::ids::session_id();
    let records = dir.join(&id);
    let grants = Grants {
        shell_allow: vec!["bash".into()],
        ..Grants::default()
    };
    let paths = SessionPaths {
        workdir: records.clone(),
        records_dir: records,
    };
    let mut spec = SessionSpec::new(
        id,
        "turns",
        driver.clone(),
        grants,
        "Call noop until told otherwise.".into(),
        paths,
        mur::tools::executors(
            Duration::from_secs(60),
            std::sync::Arc::new(mur::contain::Sandbox::uncontained(std::env::temp_dir())),
        ),
    );
    spec.model = "gpt-4.1".into();
    spec.operator_prompt = Some("You are a benchmark.".into());
    spec.system_prompt_source = "manifest";
    let report = mur_actors::testkit::run(spec, SupervisorArgs::default()).await;
    assert_eq!(report.exit_status, ExitStatus::Ok, "{}", report.result);
    let calls = driver.calls.lock().unwrap().clone();
    let server: Vec<Duration> = fake.requests().iter().map(|r| r.handled).collect();
    let mut overhead: Vec<f64> = Vec::new();
    let mut loop_only: Vec<f64> = Vec::new();
    for i in 1..calls.len() {
        let gap = calls[i].0.duration_since(calls[i - 1].1);
        let driver_time = (calls[i].1 - calls[i].0).saturating_sub(server[i]);
        loop_only.push(gap.as_secs_f64() * 1e6);
        overhead.push((gap + driver_time).as_secs_f64() * 1e6);
    }
    let window = 50.min(overhead.len());
    let first = median(overhead[..window].to_vec());
    let last = median(overhead[overhead.len() - window..].to_vec());
    overhead.sort_by(f64::total_cmp);
    loop_only.sort_by(f64::total_cmp);
    Figures {
        p50: pct(&overhead, 0.5),
        p99: pct(&overhead, 0.99),
        loop_p50: pct(&loop_only, 0.5),
        first,
        last,
    }
}

fn main() {
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3)
        .max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (mut short, mut long) = (Vec::new(), Vec::new());
    rt.block_on(async {
        for _ in 0..rounds {
            short.push(run(50, dir.path()).await);
            long.push(run(300, dir.path()).await);
        }
    });
    for (turns, runs) in [(50, &short), (300, &long)] {
        let fig = |f: fn(&Figures) -> f64| median(runs.iter().map(f).collect());
        println!(
            "{turns} turns: runtime overhead per turn p50 {:.0} µs, p99 {:.0} µs (of which the loop itself p50 {:.0} µs; the rest is the driver's HTTP and JSON work); median of {rounds} runs",
            fig(|f| f.p50),
            fig(|f| f.p99),
            fig(|f| f.loop_p50),
        );
    }
    let p50 = |runs: &[Figures]| median(runs.iter().map(|f| f.p50).collect());
    let (at_50, at_300) = (p50(&short), p50(&long));
    let first = median(long.iter().map(|f| f.first).collect());
    let last = median(long.iter().map(|f| f.last).collect());
    println!(
        "p50 at 300 turns / p50 at 50 turns = {:.2} (target ≤ 1.2); within the 300-turn session, last 50 turns / first 50 = {:.2} ({last:.0} µs / {first:.0} µs)",
        at_300 / at_50,
        last / first
    );
    println!(
        "overhead per turn p50 at 300 turns {:.3} ms (target ≤ 0.03 ms)",
        at_300 / 1000.0
    );
}
