//! Runtime overhead per turn, the whole loop: `cargo bench --bench turn_bench`.
//!
//! A real session (Supervisor, Session, Dispatcher, trace on disk) talks to the
//! fake provider on loopback through the real OpenAI driver (Chat Completions, JSON replies).
//! Each turn the model calls a tool the capsule does not have (the refusal needs no subprocess,
//! so no tool's own time is counted) and the next turn follows. Per turn, the overhead is the
//! loop's own time (from one reply's arrival to the next request's start: trace lines, dispatch,
//! history) plus the driver's time on the call less the server's own time for the request.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use fake_provider::builders::openai;
use fake_provider::{FakeProvider, Reply};
use mur_actors::model::{InferError, InferReply, InferRequest, ModelDriver, RetrySink};
use mur_actors::session::ExitStatus;
use mur_actors::spec::{Grants, SessionPaths, SessionSpec};
use mur_actors::supervisor::{Supervisor, SupervisorArgs, SupervisorMsg};
use ractor::Actor;

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

async fn run(turns: usize, dir: &std::path::Path) {
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
    let (sup, h) = Actor::spawn(None, Supervisor, SupervisorArgs::default())
        .await
        .unwrap();
    let rx = ractor::call!(sup, |reply| SupervisorMsg::StartRoot {
        spec: Box::new(spec),
        reply
    })
    .unwrap()
    .unwrap();
    let report = rx.await.unwrap();
    sup.stop(None);
    let _ = h.await;
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
    overhead.sort_by(f64::total_cmp);
    loop_only.sort_by(f64::total_cmp);
    println!(
        "{turns} turns: runtime overhead per turn p50 {:.0} µs, p99 {:.0} µs (of which the loop itself p50 {:.0} µs; the rest is the driver's HTTP and JSON work)",
        pct(&overhead, 0.5),
        pct(&overhead, 0.99),
        pct(&loop_only, 0.5)
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    rt.block_on(async {
        run(50, dir.path()).await;
        run(300, dir.path()).await;
    });
}
