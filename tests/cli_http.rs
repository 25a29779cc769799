//! `mur run` against real HTTP model APIs, served by the fake provider on 127.0.0.1: the seed's
//! manifests run unchanged but for the endpoint; keys come from `.env` and never reach a trace;
//! retries are traced; a rejected key fails at once.

mod common;

use common::*;
use fake_provider::builders::openai;
use fake_provider::{secret_digest, FakeProvider, Reply};
use serde_json::json;

fn seed_manifest(driver: &str, endpoint: &str, key: &str, model: &str) -> String {
    format!(
        "name: coding-agent
version: \"0.1.0\"

artifacts:
  - name: murmur/{driver}
    version: \"0.19.0\"
    runtime: driver
    gateway:
      endpoint: {endpoint}
      api_key: ${{{key}}}

capabilities:
  shell:
    allow:
      - git
      - bash

inference:
  transport: http
  model: {model}
  retry:
    max_retries: 2
    initial_delay_ms: 5
    max_delay_ms: 20
  driver:
    artifact: murmur/{driver}
"
    )
}

async fn run_blocking(p: &Project, args: &'static [&'static str]) -> std::process::Output {
    let dir = p.path().to_path_buf();
    tokio::task::spawn_blocking(move || {
        mur()
            .args(args)
            .current_dir(dir)
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_anthropic_seed_manifest_runs_a_tool_turn_with_the_key_from_dotenv() {
    let fake = FakeProvider::start([
        Reply::json(json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-5",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "echo from-the-shell"}}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 120, "output_tokens": 15}
        })),
        Reply::json(json!({
            "id": "msg_2", "type": "message", "role": "assistant", "model": "claude-sonnet-5",
            "content": [{"type": "text", "text": "The shell said hello."}],
            "stop_reason": "end_turn", "usage": {"input_tokens": 200, "output_tokens": 7}
        })),
    ])
    .await
    .unwrap();
    let p = Project::new();
    p.write(
        "murmur.yaml",
        &seed_manifest(
            "driver-anthropic",
            &fake.endpoint(),
            "ANTHROPIC_API_KEY",
            "claude-sonnet-5",
        ),
    );
    p.write(".env", "ANTHROPIC_API_KEY=sk-ant-test-123\n");
    let out = run_blocking(&p, &["run", "--task", "say hello", "-v"]).await;
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("driver: murmur-driver-anthropic (claude-sonnet-5)"));
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].path, "/v1/messages");
    assert_eq!(
        reqs[0].header("x-api-key"),
        Some(secret_digest("sk-ant-test-123").as_str())
    );
    // The second request carries the fenced shell result as a tool_result block.
    let second = reqs[1].body.clone().unwrap().to_string();
    assert!(
        second.contains("<untrusted-content source=tool:bash>"),
        "{second}"
    );
    assert!(second.contains("from-the-shell"));
    let s = &p.sessions()[0];
    assert_eq!(
        std::fs::read_to_string(s.join("out/result.txt")).unwrap(),
        "The shell said hello."
    );
    let raw = std::fs::read_to_string(s.join("trace.jsonl")).unwrap();
    assert!(
        !raw.contains("sk-ant-test-123"),
        "the key never reaches the trace"
    );
    let t = trace(&s.join("trace.jsonl"));
    let inf: Vec<_> = t
        .iter()
        .filter(|l| l["event_type"] == "inference")
        .collect();
    assert_eq!(inf[0]["input_tokens_actual"], 120);
    assert_eq!(inf[1]["output_tokens_actual"], 7);
    assert_eq!(t.last().unwrap()["total_input_tokens"], 320);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_openai_seed_manifest_retries_a_429_and_records_it() {
    let fake = FakeProvider::start([
        Reply::status_with_headers(
            429,
            &[("retry-after-ms", "10")],
            json!({"error": {"message": "slow down", "type": "rate_limit"}}),
        ),
        Reply::json(openai::chat_text("done after a retry")),
    ])
    .await
    .unwrap();
    let p = Project::new();
    p.write(
        "murmur.yaml",
        &seed_manifest(
            "driver-openai",
            &fake.openai_endpoint(),
            "OPENAI_API_KEY",
            "o3-mini-high",
        ),
    );
    p.write(".env", "OPENAI_API_KEY=sk-openai-test\n");
    let out = run_blocking(&p, &["run", "--task", "go"]).await;
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(fake.requests().len(), 2);
    assert_eq!(fake.requests()[0].path, "/v1/chat/completions");
    let s = &p.sessions()[0];
    let t = trace(&s.join("trace.jsonl"));
    let retry = t
        .iter()
        .find(|l| l["event_type"] == "inference_retry")
        .expect("a retry line");
    assert_eq!(retry["attempt"], 1);
    assert_eq!(retry["reason"], "status");
    assert_eq!(retry["provider_status"], 429);
    assert_eq!(retry["retry_after_ms"], 10);
    let inf = t.iter().find(|l| l["event_type"] == "inference").unwrap();
    assert_eq!(inf["attempts"], 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rejected_key_fails_at_once_and_a_missing_variable_is_named() {
    let fake = FakeProvider::start([Reply::status(
        401,
        json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
    )])
    .await
    .unwrap();
    let p = Project::new();
    p.write(
        "murmur.yaml",
        &seed_manifest(
            "driver-anthropic",
            &fake.endpoint(),
            "ANTHROPIC_API_KEY",
            "claude-sonnet-5",
        ),
    );
    p.write(".env", "ANTHROPIC_API_KEY=sk-bad\n");
    let out = run_blocking(&p, &["run", "--task", "go"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).ends_with("status:  failed\n"));
    assert_eq!(fake.requests().len(), 1, "401 is not retried");
    let s = &p.sessions()[0];
    let t = trace(&s.join("trace.jsonl"));
    let failed = t.iter().find(|l| l["event_type"] == "task_failed").unwrap();
    assert_eq!(failed["cause"], "credential_rejected");
    assert!(!std::fs::read_to_string(s.join("trace.jsonl"))
        .unwrap()
        .contains("sk-bad"));

    std::fs::remove_file(p.path().join(".env")).unwrap();
    let out = run_blocking(&p, &["run", "--task", "go"]).await;
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("ANTHROPIC_API_KEY"), "{err}");
    assert_eq!(p.sessions().len(), 1, "no session started without a key");
}
