//! The session turn_bench and replay_bench time (included by both with `#[path]`): a real
//! session on the fake provider through the real OpenAI driver, each turn a call to a tool the
//! capsule does not hold, and its overhead per turn measured from the driver's side.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use fake_provider::builders::openai;
use fake_provider::{FakeProvider, Reply};
use mur_actors::model::{InferError, InferReply, InferRequest, ModelDriver, RetrySink};
use mur_actors::session::ExitStatus;
use mur_actors::spec::{Capture, Grants, SessionPaths, SessionSpec};
use mur_actors::supervisor::SupervisorArgs;

/// Notes when each call starts and ends.
pub struct Timed {
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

/// The `p` quantile of sorted values.
pub fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// What one session measured, in µs.
pub struct Figures {
    /// p50 of the overhead per turn.
    pub p50: f64,
    /// p99 of the overhead per turn.
    pub p99: f64,
    /// p50 of the loop's own part.
    pub loop_p50: f64,
    /// p50 of the first and of the last 50 turns.
    pub first: f64,
    /// See `first`.
    pub last: f64,
    /// The median size of the session's request bodies, in bytes.
    pub body_len: usize,
    /// The median size of the bodies of the first and of the last 50 requests (what `first`
    /// and `last` paid to send), in bytes.
    pub first_body_len: usize,
    /// See `first_body_len`.
    pub last_body_len: usize,
}

/// The median.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    pct(&v, 0.5)
}

/// The runtimes a measured session runs on: the session's own, as `mur run` builds it for this
/// capsule (it cannot delegate: one thread, [`mur::runtime::Threads::One`]), and one thread
/// beside it for the fake provider, as a provider runs apart from `mur`.
pub struct Runtimes {
    /// Where the session runs.
    pub session: tokio::runtime::Runtime,
    /// Where the fake provider answers.
    pub provider: tokio::runtime::Runtime,
}

impl Runtimes {
    /// Both runtimes. `MUR_BENCH_THREADS=per-core` runs the session on a worker per core
    /// instead (what a capsule that can delegate gets), to compare the two. On one thread the
    /// session's file jobs and trace writes run where they are asked for, as in `mur run`
    /// ([`mur_actors::solo`]); sessions here run one at a time.
    pub fn new() -> Self {
        let threads = match std::env::var("MUR_BENCH_THREADS").as_deref() {
            Ok("per-core") => mur::runtime::Threads::PerCore,
            _ => mur::runtime::Threads::One,
        };
        if threads == mur::runtime::Threads::One {
            mur_actors::solo::enable();
        }
        Runtimes {
            session: mur::runtime::build(threads).unwrap(),
            provider: tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap(),
        }
    }

    /// One session of `turns` turns recorded with `capture`, its records under `dir`.
    pub fn run(&self, turns: usize, dir: &std::path::Path, capture: Capture) -> Figures {
        let provider = self.provider.handle().clone();
        self.session.block_on(run(turns, dir, capture, &provider))
    }
}

/// One session of `turns` turns recorded with `capture`, its records under `dir`, the fake
/// provider on `provider`.
pub async fn run(
    turns: usize,
    dir: &std::path::Path,
    capture: Capture,
    provider: &tokio::runtime::Handle,
) -> Figures {
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
    let fake = fake_provider(script, provider).await;
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
    spec.capture = capture;
    let report = mur_actors::testkit::run(spec, SupervisorArgs::default()).await;
    assert_eq!(report.exit_status, ExitStatus::Ok, "{}", report.result);
    let calls = driver.calls.lock().unwrap().clone();
    let requests = fake.requests();
    let server: Vec<Duration> = requests.iter().map(|r| r.handled).collect();
    let sizes: Vec<usize> = requests
        .iter()
        .filter_map(|r| {
            let (_, len) = r.headers.iter().find(|(k, _)| k == "content-length")?;
            len.parse().ok()
        })
        .collect();
    let median_len = |s: &[usize]| {
        let mut s = s.to_vec();
        s.sort_unstable();
        s.get(s.len() / 2).copied().unwrap_or(0)
    };
    let body_len = median_len(&sizes);
    let edge = 50.min(sizes.len());
    let (first_body_len, last_body_len) = (
        median_len(&sizes[..edge]),
        median_len(&sizes[sizes.len() - edge..]),
    );
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
        body_len,
        first_body_len,
        last_body_len,
    }
}

/// The fake provider on `provider`, answering with `script`, keeping no bodies.
async fn fake_provider(script: Vec<Reply>, provider: &tokio::runtime::Handle) -> FakeProvider {
    let fake = provider
        .spawn(FakeProvider::start(script))
        .await
        .unwrap()
        .unwrap();
    fake.keep_bodies(false);
    fake
}

/// The transport's floor, measured the way a turn's overhead is: `requests` POSTs of a JSON
/// body of `body_len` bytes to the fake provider on `provider`, each answered with the tool call
/// a turn gets, through a client built as the driver builds its own (`mur::tls::client_builder`,
/// on this runtime), the server's own time netted out. No session, no encoding, no parsing: what
/// loopback HTTP between two runtimes costs on this machine. p50 in µs.
pub async fn transport_floor(
    requests: usize,
    body_len: usize,
    provider: &tokio::runtime::Handle,
) -> f64 {
    let reply = openai::chat_tool_calls(&[("call_0", "noop", "{\"n\": 1}")]);
    let script: Vec<Reply> = (0..requests).map(|_| Reply::json(reply.clone())).collect();
    let fake = fake_provider(script, provider).await;
    let url = format!("{}/chat/completions", fake.openai_endpoint());
    let client = mur::tls::client_builder(&url).build().unwrap();
    let body = bytes::Bytes::from(format!(
        "{{\"pad\":\"{}\"}}",
        "x".repeat(body_len.saturating_sub(10))
    ));
    let mut took = Vec::with_capacity(requests);
    for _ in 0..requests {
        let start = Instant::now();
        let resp = client
            .post(&url)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await
            .unwrap();
        let _ = resp.bytes().await.unwrap();
        took.push(start.elapsed());
    }
    let server = fake.requests();
    let mut net: Vec<f64> = took
        .iter()
        .zip(&server)
        .map(|(t, r)| t.saturating_sub(r.handled).as_secs_f64() * 1e6)
        .collect();
    net.sort_by(f64::total_cmp);
    pct(&net, 0.5)
}
