//! `murmur/driver-anthropic` against the real fake provider on loopback: the exact request it
//! sends, streamed and JSON replies, usage, stop reasons, and bad replies.

mod driver_common;

use std::time::Duration;

use driver_common::*;
use fake_provider::builders::anthropic;
use fake_provider::{secret_digest, FakeProvider, Reply, SseEvent};
use mur::drivers::{self, HttpDriverConfig};
use mur_actors::model::{ContentBlock, InferErrorKind, NoRetrySink, StopReason, Usage};
use serde_json::json;

fn driver(fake: &FakeProvider) -> std::sync::Arc<dyn mur_actors::model::ModelDriver> {
    drivers::anthropic(config("murmur/driver-anthropic", &fake.endpoint())).unwrap()
}

#[tokio::test]
async fn sends_the_golden_request_and_reads_a_stream_that_pauses() {
    let fake = FakeProvider::start([Reply::Sse {
        events: anthropic::text_stream(&["Two files", ": a.txt and ", "b.txt."]),
        pause: Some((3, Duration::from_millis(150))),
        cut_after: None,
    }])
    .await
    .unwrap();
    let d = driver(&fake);
    assert_eq!(d.name(), "murmur/driver-anthropic");
    let reply = bounded(d.infer(
        &conversation("claude-sonnet-4-5", json!({"name": "x"})),
        &NoRetrySink,
    ))
    .await
    .unwrap();
    assert_eq!(reply.stop_reason, StopReason::EndTurn);
    assert_eq!(
        reply.content,
        vec![ContentBlock::text("Two files: a.txt and b.txt.")]
    );
    assert_eq!(
        reply.usage,
        Usage {
            input_tokens: Some(11),
            output_tokens: Some(7),
            ..Usage::default()
        }
    );
    assert_eq!(reply.attempts, 1);
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(r.header_count("x-api-key"), 1);
    assert_eq!(r.header("x-api-key"), Some(secret_digest(KEY).as_str()));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert!(!r.raw_body.contains(KEY));
    assert_golden("anthropic-request.txt", &r.golden(fake.port()));
}

#[tokio::test]
async fn reads_a_json_tool_use_reply_with_cache_usage() {
    let mut body = anthropic::tool_use("toolu_1", "bash", json!({"command": "ls -la"}));
    body["usage"] = json!({"input_tokens": 5, "output_tokens": 9,
                           "cache_read_input_tokens": 1200, "cache_creation_input_tokens": 30});
    let fake = FakeProvider::start([Reply::json(body)]).await.unwrap();
    let reply = bounded(driver(&fake).infer(&simple("claude-haiku-4-5", "hi"), &NoRetrySink))
        .await
        .unwrap();
    assert_eq!(reply.stop_reason, StopReason::ToolCall);
    assert_eq!(
        reply.content,
        vec![ContentBlock::ToolCall {
            id: "toolu_1".into(),
            name: "bash".into(),
            input: json!({"command": "ls -la"})
        }]
    );
    assert_eq!(
        reply.usage,
        Usage {
            input_tokens: Some(5),
            output_tokens: Some(9),
            cached_tokens: Some(1200),
            cache_write_tokens: Some(30),
            thinking_tokens: None,
        }
    );
    // No tools, and a system prompt that is trimmed.
    let body = fake.requests()[0].body.clone().unwrap();
    assert!(body.get("tools").is_none());
    assert_eq!(body["system"][0]["text"], "You are a test.");
    assert_eq!(body["stream"], true);
}

#[tokio::test]
async fn assembles_streamed_thinking_and_tool_input_split_in_fragments() {
    let mut events = vec![anthropic::message_start(40)];
    events.push(SseEvent::named(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0,
               "content_block": {"type": "thinking", "thinking": ""}}),
    ));
    for d in [
        json!({"type": "thinking_delta", "thinking": "Need to "}),
        json!({"type": "thinking_delta", "thinking": "list."}),
        json!({"type": "signature_delta", "signature": "sig-abc"}),
    ] {
        events.push(SseEvent::named(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": d}),
        ));
    }
    events.push(SseEvent {
        event: None,
        data: "{\"type\": \"ping\"}".into(),
    });
    events.extend(anthropic::tool_use_block(
        1,
        "toolu_9",
        "bash",
        &["{\"comm", "and\": \"echo ", "é\"}"],
    ));
    events.extend(anthropic::message_end("tool_use", 23));
    let fake = FakeProvider::start([Reply::sse(events)]).await.unwrap();
    let reply = bounded(driver(&fake).infer(&simple("claude-sonnet-4-5", "go"), &NoRetrySink))
        .await
        .unwrap();
    assert_eq!(reply.stop_reason, StopReason::ToolCall);
    assert_eq!(
        reply.content,
        vec![
            ContentBlock::Thinking {
                text: "Need to list.".into(),
                signature: Some("sig-abc".into())
            },
            ContentBlock::ToolCall {
                id: "toolu_9".into(),
                name: "bash".into(),
                input: json!({"command": "echo é"})
            }
        ]
    );
    assert_eq!(reply.usage.input_tokens, Some(40));
    assert_eq!(reply.usage.output_tokens, Some(23), "message_delta wins");
}

async fn one_json(
    body: serde_json::Value,
) -> Result<mur_actors::model::InferReply, mur_actors::model::InferError> {
    let fake = FakeProvider::start([Reply::json(body)]).await.unwrap();
    let r = bounded(driver(&fake).infer(&simple("m", "x"), &NoRetrySink)).await;
    assert_eq!(fake.requests().len(), 1, "bad replies are not retried");
    r
}

#[tokio::test]
async fn maps_every_stop_reason_and_refuses_unknown_ones() {
    let with_stop = |s: &str| {
        let mut b = anthropic::text("partial");
        b["stop_reason"] = json!(s);
        b
    };
    assert_eq!(
        one_json(with_stop("max_tokens")).await.unwrap().stop_reason,
        StopReason::MaxTokens
    );
    assert_eq!(
        one_json(with_stop("stop_sequence"))
            .await
            .unwrap()
            .stop_reason,
        StopReason::EndTurn
    );
    let e = one_json(with_stop("banana")).await.unwrap_err();
    assert_eq!(e.kind, InferErrorKind::Malformed);
    assert!(
        e.message
            .ends_with("/v1/messages has an unsupported stop_reason 'banana'"),
        "{}",
        e.message
    );
    let e = one_json(with_stop("refusal")).await.unwrap_err();
    assert_eq!(e.kind, InferErrorKind::Driver);
    assert!(
        e.message.starts_with("the model declined to answer"),
        "{}",
        e.message
    );
    let mut b = anthropic::text("x");
    b.as_object_mut().unwrap().remove("stop_reason");
    let e = one_json(b).await.unwrap_err();
    assert!(e.message.ends_with("has no stop_reason"), "{}", e.message);
    let e = one_json(json!({"hello": "world"})).await.unwrap_err();
    assert!(
        e.message.contains("not an Anthropic message"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn a_stream_that_ends_early_is_a_clear_malformed_error() {
    let mut events = vec![anthropic::message_start(3)];
    events.extend(anthropic::text_block(0, &["half an ans"]));
    let fake = FakeProvider::start([Reply::sse(events)]).await.unwrap();
    let e = bounded(driver(&fake).infer(&simple("m", "x"), &NoRetrySink))
        .await
        .unwrap_err();
    assert_eq!(e.kind, InferErrorKind::Malformed);
    assert_eq!(
        e.message,
        format!(
            "the event stream from {}/v1/messages ended before the reply was complete (no stop_reason after 4 events)",
            fake.endpoint()
        )
    );
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn garbage_and_broken_json_bodies_are_malformed_not_panics() {
    let fake = FakeProvider::start([
        Reply::garbage(200, "<html><body>Bad gateway</body></html>"),
        Reply::Text {
            status: 200,
            content_type: "application/json".into(),
            headers: vec![],
            body: "{\"id\": \"msg_1\", \"content\": [".into(),
        },
        Reply::sse(vec![SseEvent::data("not json at all")]),
    ])
    .await
    .unwrap();
    let d = driver(&fake);
    let e = bounded(d.infer(&simple("m", "x"), &NoRetrySink))
        .await
        .unwrap_err();
    assert_eq!(e.kind, InferErrorKind::Malformed);
    assert!(
        e.message.contains("is neither JSON nor an event stream (content-type 'text/html'); it starts with '<html><body>Bad gateway</body></html>'"),
        "{}",
        e.message
    );
    let e = bounded(d.infer(&simple("m", "x"), &NoRetrySink))
        .await
        .unwrap_err();
    assert_eq!(e.kind, InferErrorKind::Malformed);
    assert!(e.message.contains("is not valid JSON"), "{}", e.message);
    let e = bounded(d.infer(&simple("m", "x"), &NoRetrySink))
        .await
        .unwrap_err();
    assert!(e.message.contains("data is not JSON"), "{}", e.message);
    assert_eq!(fake.requests().len(), 3);
}

#[tokio::test]
async fn driver_config_turns_on_thinking_and_beta_and_off_caching() {
    let fake = FakeProvider::start([Reply::json(anthropic::text("ok"))])
        .await
        .unwrap();
    let mut cfg = config("murmur/driver-anthropic", &fake.endpoint());
    cfg.driver_config = Some(
        json!({"thinking": "enabled", "thinking_budget_tokens": 5000,
                                    "prompt_cache": false,
                                    "beta_features": ["a-2025", "b-2026"]}),
    );
    let d = drivers::anthropic(cfg).unwrap();
    let mut req = simple("claude-sonnet-4-5", "x");
    req.max_tokens = 3000;
    bounded(d.infer(&req, &NoRetrySink)).await.unwrap();
    let r = &fake.requests()[0];
    assert_eq!(r.header("anthropic-beta"), Some("a-2025,b-2026"));
    let body = r.body.clone().unwrap();
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 2999})
    );
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "You are a test."}])
    );
    assert!(!r.raw_body.contains("cache_control"));
}

#[test]
fn bad_configs_are_refused_with_the_reason() {
    let e = drivers::anthropic(HttpDriverConfig::new(
        "murmur/driver-anthropic",
        "http://api.example.com",
        Some(KEY.into()),
    ))
    .err()
    .unwrap();
    assert_eq!(
        e,
        "murmur/driver-anthropic: gateway.endpoint 'http://api.example.com' uses plain http:// to a \
         non-loopback host 'api.example.com'; use https://, or http:// only to localhost/127.0.0.1/[::1]"
    );
    let mut cfg =
        HttpDriverConfig::new("murmur/driver-anthropic", "https://api.anthropic.com", None);
    cfg.driver_config = Some(json!({"thinkng": "enabled"}));
    let e = drivers::anthropic(cfg).err().unwrap();
    assert!(
        e.contains("unrecognised inference.driver.config key(s): thinkng"),
        "{e}"
    );
    let cfg = HttpDriverConfig::new(
        "murmur/driver-anthropic",
        "https://api.anthropic.com",
        Some("bad\nkey".into()),
    );
    let e = drivers::anthropic(cfg).err().unwrap();
    assert!(
        e.contains("cannot be sent in an HTTP header") && !e.contains("bad\nkey"),
        "{e}"
    );
}

#[test]
fn debug_output_never_shows_the_key() {
    let d = mur::drivers::AnthropicDriver::new(&HttpDriverConfig::new(
        "murmur/driver-anthropic",
        "https://api.anthropic.com",
        Some(KEY.into()),
    ))
    .unwrap();
    let shown = format!("{d:?}");
    assert!(!shown.contains(KEY), "{shown}");
    assert!(shown.contains("api.anthropic.com"));
}
