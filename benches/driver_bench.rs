//! Driver overhead per call against the fake provider on loopback.
//!
//! For each call the client-side wall time is measured around `ModelDriver::infer`, and the
//! fake provider's own time for that request (reading the body, building the reply) is
//! subtracted: what is left is what the driver costs (serialising the request, HTTP, SSE
//! parsing, assembling the reply) plus loopback latency. p50/p99 are printed per case.
//!
//! When `python3` can import `agents` (the OpenAI Agents SDK), the same measurement is made for
//! `benches/python/agents_overhead.py` against the same server, for comparison.
//!
//! `cargo bench --bench driver_bench` (env `BENCH_N`, default 2000 calls per case).

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fake_provider::{FakeProvider, Fallback};
use mur::drivers::{self, HttpDriverConfig};
use mur_actors::model::{ContentBlock, InferRequest, Message, ModelDriver, NoRetrySink, ToolSpec};
use serde_json::json;

fn request(model: &str, turns: usize, tools: usize) -> InferRequest {
    let mut messages = vec![Message::user_text("List the files and summarise them.")];
    for i in 0..turns {
        messages.push(Message::Assistant {
            content: vec![ContentBlock::ToolCall {
                id: format!("call_{i}"),
                name: "bash".into(),
                input: json!({"command": format!("cat file-{i}.txt")}),
            }],
        });
        messages.push(Message::Tool {
            tool_call_id: format!("call_{i}"),
            is_error: false,
            content: vec![ContentBlock::text(format!(
                "<untrusted-content source=tool:bash>\n{}\n</untrusted-content>",
                "line of output ".repeat(40)
            ))],
        });
    }
    let tools = (0..tools)
        .map(|i| ToolSpec {
            name: format!("tool-{i}"),
            description: Some("A tool that does a thing with its input.".into()),
            parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}}),
        })
        .collect();
    InferRequest {
        model: model.into(),
        max_tokens: 1024,
        system: "You are a test.".into(),
        messages: messages.into(),
        tools: Arc::new(tools),
        prompt_cache_key: None,
    }
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn report(label: &str, totals_us: &[f64], server_us: &[f64]) {
    let mut total = totals_us.to_vec();
    let mut over: Vec<f64> = totals_us
        .iter()
        .zip(server_us)
        .map(|(t, s)| t - s)
        .collect();
    total.sort_by(f64::total_cmp);
    over.sort_by(f64::total_cmp);
    println!(
        "{label:<44} n={:<5} total p50 {:>8.1} µs p99 {:>8.1} µs | overhead p50 {:>8.1} µs p99 {:>8.1} µs",
        total.len(),
        pct(&total, 0.5),
        pct(&total, 0.99),
        pct(&over, 0.5),
        pct(&over, 0.99)
    );
}

async fn bench_driver(
    fake: &FakeProvider,
    label: &str,
    d: &dyn ModelDriver,
    req: &InferRequest,
    n: usize,
) {
    for _ in 0..n.min(200) {
        d.infer(req, &NoRetrySink).await.expect("warm-up call");
    }
    let before = fake.requests().len();
    let mut totals = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        d.infer(req, &NoRetrySink).await.expect("bench call");
        totals.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let server: Vec<f64> = fake.requests()[before..]
        .iter()
        .map(|r| r.handled.as_secs_f64() * 1e6)
        .collect();
    report(label, &totals, &server);
}

fn python_has_agents() -> bool {
    Command::new("python3")
        .args(["-c", "import agents"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

async fn bench_python(fake: &FakeProvider, mode: &str, n: usize) {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/benches/python/agents_overhead.py"
    );
    let warmup = n.min(100);
    let before = fake.requests().len();
    let endpoint = fake.openai_endpoint();
    let (w, m) = (warmup.to_string(), n.to_string());
    let mode_owned = mode.to_string();
    let out = tokio::task::spawn_blocking(move || {
        Command::new("python3")
            .args([script, &endpoint, &w, &m, &mode_owned])
            .output()
    })
    .await
    .expect("join")
    .expect("run python3");
    if !out.status.success() {
        println!(
            "python {mode}: failed: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        );
        return;
    }
    let totals: Vec<f64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    let reqs = fake.requests();
    let measured = &reqs[before + warmup..];
    if measured.len() != totals.len() {
        println!(
            "python {mode}: {} calls made {} requests; cannot pair them, skipping",
            totals.len(),
            measured.len()
        );
        return;
    }
    let server: Vec<f64> = measured
        .iter()
        .map(|r| r.handled.as_secs_f64() * 1e6)
        .collect();
    report(&format!("python openai-agents ({mode})"), &totals, &server);
}

fn main() {
    let n: usize = std::env::var("BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let fake = FakeProvider::start_on("127.0.0.1:0", [], Some(Fallback::Text("ok".into())))
            .await
            .expect("fake provider");
        let cfg = |artifact: &str, endpoint: String| {
            let mut c = HttpDriverConfig::new(artifact, &endpoint, Some("bench-key".into()));
            c.request_timeout = Duration::from_secs(30);
            c
        };
        let anthropic = drivers::anthropic(cfg("murmur/driver-anthropic", fake.endpoint())).unwrap();
        let openai = drivers::openai(cfg("murmur/driver-openai", fake.openai_endpoint())).unwrap();
        println!("driver overhead per call (client time minus the fake server's own time), loopback:");
        let small = |m: &str| request(m, 0, 0);
        let big = |m: &str| request(m, 20, 12);
        bench_driver(&fake, "anthropic SSE, 1 message", anthropic.as_ref(), &small("claude-haiku-4-5"), n).await;
        bench_driver(&fake, "anthropic SSE, 41 messages, 12 tools", anthropic.as_ref(), &big("claude-haiku-4-5"), n).await;
        bench_driver(&fake, "openai chat SSE, 1 message", openai.as_ref(), &small("bench-model"), n).await;
        bench_driver(&fake, "openai chat SSE, 41 messages, 12 tools", openai.as_ref(), &big("bench-model"), n).await;
        bench_driver(&fake, "openai responses SSE, 1 message", openai.as_ref(), &small("gpt-5"), n).await;
        if python_has_agents() {
            let pn = n.min(1000);
            bench_python(&fake, "client", pn).await;
            bench_python(&fake, "agents", pn).await;
        } else {
            println!("python3 cannot import agents (pip install openai-agents): skipping the SDK comparison");
        }
    });
}
