//! `murmur/driver-openai` against the real fake provider: Chat Completions (streamed and JSON,
//! tool calls with string arguments, malformed arguments), the Responses API, bad replies.

mod driver_common;

use driver_common::*;
use fake_provider::builders::openai;
use fake_provider::{secret_digest, FakeProvider, Reply};
use mur::drivers::{self, HttpDriverConfig};
use mur_actors::model::{ContentBlock, InferErrorKind, NoRetrySink, StopReason, Usage};
use serde_json::{json, Value};

fn driver(fake: &FakeProvider) -> std::sync::Arc<dyn mur_actors::model::ModelDriver> {
    drivers::openai(config("murmur/driver-openai", &fake.openai_endpoint())).unwrap()
}

async fn one(
    reply: Reply,
    model: &str,
) -> (
    FakeProvider,
    Result<mur_actors::model::InferReply, mur_actors::model::InferError>,
) {
    let fake = FakeProvider::start([reply]).await.unwrap();
    let r = bounded(driver(&fake).infer(&simple(model, "x"), &NoRetrySink)).await;
    (fake, r)
}

#[tokio::test]
async fn sends_the_golden_chat_request_and_assembles_streamed_tool_calls() {
    let events = vec![
        openai::chunk(json!({"role": "assistant", "content": null}), None),
        openai::chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                                             "function": {"name": "bash", "arguments": ""}}]}),
            None,
        ),
        openai::chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"comma"}}]}),
            None,
        ),
        openai::chunk(
            json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
                                             "function": {"name": "pull-artifact", "arguments": "{}"}}]}),
            None,
        ),
        openai::chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "nd\": \"pwd\"}"}}]}),
            None,
        ),
        openai::chunk(json!({}), Some("tool_calls")),
        openai::usage_chunk(120, 30, 64),
        openai::done(),
    ];
    let fake = FakeProvider::start([Reply::sse(events)]).await.unwrap();
    let d = driver(&fake);
    assert_eq!(d.name(), "murmur/driver-openai");
    // The second call of the history carries malformed arguments kept as a raw string.
    let req = conversation("gpt-4.1", Value::String("{\"name\": oops".into()));
    let reply = bounded(d.infer(&req, &NoRetrySink)).await.unwrap();
    assert_eq!(reply.stop_reason, StopReason::ToolCall);
    assert_eq!(
        reply.content,
        vec![
            ContentBlock::ToolCall {
                id: "call_a".into(),
                name: "bash".into(),
                input: json!({"command": "pwd"})
            },
            ContentBlock::ToolCall {
                id: "call_b".into(),
                name: "pull-artifact".into(),
                input: json!({})
            },
        ]
    );
    assert_eq!(
        reply.usage,
        Usage {
            input_tokens: Some(120),
            output_tokens: Some(30),
            cached_tokens: Some(64),
            ..Usage::default()
        }
    );
    let r = &fake.requests()[0];
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.header_count("authorization"), 1);
    assert_eq!(
        r.header("authorization"),
        Some(secret_digest(&format!("Bearer {KEY}")).as_str())
    );
    assert!(!r.raw_body.contains(KEY));
    // The raw string goes back verbatim as the arguments string.
    let body = r.body.clone().unwrap();
    assert_eq!(
        body["messages"][2]["tool_calls"][1]["function"]["arguments"],
        "{\"name\": oops"
    );
    assert_golden("openai-chat-request.txt", &r.golden(fake.port()));
}

#[tokio::test]
async fn reads_a_json_text_reply_with_usage() {
    let (fake, r) = one(
        Reply::json(openai::chat_text("Hello there.")),
        "llama3.1:8b",
    )
    .await;
    let reply = r.unwrap();
    assert_eq!(reply.stop_reason, StopReason::EndTurn);
    assert_eq!(reply.content, vec![ContentBlock::text("Hello there.")]);
    assert_eq!(reply.usage.input_tokens, Some(11));
    assert_eq!(reply.usage.output_tokens, Some(7));
    assert_eq!(reply.usage.cached_tokens, None, "not reported, so absent");
    let body = fake.requests()[0].body.clone().unwrap();
    assert_eq!(
        body["messages"],
        json!([{"role": "system", "content": "You are a test."},
                                        {"role": "user", "content": "x"}])
    );
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["max_completion_tokens"], 1024);
}

#[tokio::test]
async fn malformed_arguments_become_a_string_input_not_a_crash() {
    let (_f, r) = one(
        Reply::json(openai::chat_tool_calls(&[
            ("call_1", "bash", "{\"command\": \"ls"),
            ("call_2", "bash", ""),
        ])),
        "gpt-4.1",
    )
    .await;
    let reply = r.unwrap();
    assert_eq!(reply.stop_reason, StopReason::ToolCall);
    assert_eq!(
        reply.content,
        vec![
            ContentBlock::ToolCall {
                id: "call_1".into(),
                name: "bash".into(),
                input: Value::String("{\"command\": \"ls".into())
            },
            ContentBlock::ToolCall {
                id: "call_2".into(),
                name: "bash".into(),
                input: json!({})
            },
        ]
    );
}

#[tokio::test]
async fn finish_reasons_map_and_bad_ones_are_errors() {
    let with_finish = |f: Value| {
        let mut b = openai::chat_text("part");
        b["choices"][0]["finish_reason"] = f;
        Reply::json(b)
    };
    assert_eq!(
        one(with_finish(json!("length")), "m")
            .await
            .1
            .unwrap()
            .stop_reason,
        StopReason::MaxTokens
    );
    assert_eq!(
        one(with_finish(json!(null)), "m")
            .await
            .1
            .unwrap()
            .stop_reason,
        StopReason::EndTurn
    );
    let (_f, r) = one(with_finish(json!("content_filter")), "m").await;
    let e = r.unwrap_err();
    assert_eq!(e.kind, InferErrorKind::Driver);
    assert!(
        e.message
            .starts_with("the provider's content filter stopped the answer"),
        "{}",
        e.message
    );
    let (fake, r) = one(with_finish(json!("sideways")), "m").await;
    let e = r.unwrap_err();
    assert_eq!(e.kind, InferErrorKind::Malformed);
    assert_eq!(
        e.message,
        format!(
            "the reply from {}/chat/completions has an unsupported finish_reason 'sideways'",
            fake.openai_endpoint()
        )
    );
    // Some local servers say "stop" while returning tool calls.
    let mut b = openai::chat_tool_calls(&[("c", "bash", "{}")]);
    b["choices"][0]["finish_reason"] = json!("stop");
    assert_eq!(
        one(Reply::json(b), "m").await.1.unwrap().stop_reason,
        StopReason::ToolCall
    );
}

#[tokio::test]
async fn empty_choices_and_truncated_streams_are_malformed() {
    let mut b = openai::chat_text("x");
    b["choices"] = json!([]);
    let (fake, r) = one(Reply::json(b), "m").await;
    let e = r.unwrap_err();
    assert_eq!(e.kind, InferErrorKind::Malformed);
    assert_eq!(
        e.message,
        format!(
            "the reply from {}/chat/completions has no choices",
            fake.openai_endpoint()
        )
    );
    assert_eq!(fake.requests().len(), 1);

    let events = vec![
        openai::chunk(json!({"content": "Hel"}), None),
        openai::chunk(json!({"content": "lo"}), None),
    ];
    let (fake, r) = one(Reply::sse(events), "m").await;
    let e = r.unwrap_err();
    assert_eq!(e.kind, InferErrorKind::Malformed);
    assert_eq!(
        e.message,
        format!(
            "the event stream from {}/chat/completions ended before the reply was complete (no finish_reason after 2 events)",
            fake.openai_endpoint()
        )
    );
}

#[tokio::test]
async fn streamed_text_with_reasoning_content_and_think_tags_split_across_chunks() {
    let events = vec![
        openai::chunk(
            json!({"role": "assistant", "reasoning_content": "Think"}),
            None,
        ),
        openai::chunk(json!({"reasoning_content": "ing."}), None),
        openai::chunk(json!({"content": "<thi"}), None),
        openai::chunk(json!({"content": "nk>More.</think>\n\nAnswer"}), None),
        openai::chunk(json!({"content": "."}), Some("stop")),
        openai::done(),
    ];
    let (_f, r) = one(Reply::sse(events), "qwen3").await;
    let reply = r.unwrap();
    assert_eq!(
        reply.content,
        vec![
            ContentBlock::Thinking {
                text: "Thinking.More.".into(),
                signature: None
            },
            ContentBlock::text("Answer."),
        ]
    );
    assert_eq!(
        reply.usage,
        Usage::default(),
        "no usage chunk, so nothing reported"
    );
}

#[tokio::test]
async fn gpt5_uses_the_responses_api() {
    let fake = FakeProvider::start([
        Reply::sse(openai::responses_text_stream(&["Hi ", "there."])),
        Reply::json(openai::responses_function_call(
            "call_7",
            "bash",
            "{\"command\":\"ls\"}",
        )),
    ])
    .await
    .unwrap();
    let d = driver(&fake);
    let req = conversation("gpt-5", json!({"name": "x"}));
    let reply = bounded(d.infer(&req, &NoRetrySink)).await.unwrap();
    assert_eq!(reply.stop_reason, StopReason::EndTurn);
    assert_eq!(reply.content, vec![ContentBlock::text("Hi there.")]);
    assert_eq!(reply.usage.input_tokens, Some(11));
    let r = &fake.requests()[0];
    assert_eq!(r.path, "/v1/responses");
    assert_golden("openai-responses-request.txt", &r.golden(fake.port()));
    let reply = bounded(d.infer(&simple("gpt-5.1", "x"), &NoRetrySink))
        .await
        .unwrap();
    assert_eq!(reply.stop_reason, StopReason::ToolCall);
    assert_eq!(
        reply.content,
        vec![ContentBlock::ToolCall {
            id: "call_7".into(),
            name: "bash".into(),
            input: json!({"command": "ls"})
        }]
    );
}

#[tokio::test]
async fn responses_incomplete_and_failed() {
    let mut b = openai::responses_text("cut");
    b["status"] = json!("incomplete");
    b["incomplete_details"] = json!({"reason": "max_output_tokens"});
    let (_f, r) = one(Reply::json(b.clone()), "gpt-5").await;
    assert_eq!(r.unwrap().stop_reason, StopReason::MaxTokens);
    b["incomplete_details"] = json!({"reason": "content_filter"});
    let (_f, r) = one(Reply::json(b), "gpt-5").await;
    assert!(r
        .unwrap_err()
        .message
        .ends_with("/responses is incomplete: content_filter"));
    let events = vec![fake_provider::SseEvent::named(
        "response.failed",
        json!({"type": "response.failed", "response": {"id": "r", "status": "failed",
               "error": {"code": "server_error", "message": "boom"}, "output": []}}),
    )];
    let (_f, r) = one(Reply::sse(events), "gpt-5").await;
    let e = r.unwrap_err();
    assert!(
        e.message.ends_with("/responses failed: server_error: boom"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn keyless_gateways_send_no_authorization() {
    let fake = FakeProvider::start([Reply::json(openai::chat_text("ok"))])
        .await
        .unwrap();
    let mut cfg = config("murmur/driver-openai", &fake.openai_endpoint());
    cfg.api_key = None;
    let d = drivers::openai(cfg).unwrap();
    bounded(d.infer(&simple("llama", "x"), &NoRetrySink))
        .await
        .unwrap();
    assert_eq!(fake.requests()[0].header_count("authorization"), 0);
}

#[tokio::test]
async fn driver_config_picks_the_api_and_forwards_dials() {
    let fake = FakeProvider::start([Reply::json(openai::responses_text("ok"))])
        .await
        .unwrap();
    let mut cfg = config("murmur/driver-openai", &fake.openai_endpoint());
    cfg.driver_config = Some(json!({"api": "responses", "reasoning_effort": "low",
                                    "thinking": "enabled", "verbosity": "high", "store": true}));
    let d = drivers::openai(cfg).unwrap();
    bounded(d.infer(&simple("local-model", "x"), &NoRetrySink))
        .await
        .unwrap();
    let r = &fake.requests()[0];
    assert_eq!(r.path, "/v1/responses");
    let body = r.body.clone().unwrap();
    assert_eq!(
        body["reasoning"],
        json!({"effort": "low", "summary": "auto"})
    );
    assert_eq!(body["text"], json!({"verbosity": "high"}));
    assert_eq!(body["store"], true);
    let mut cfg = HttpDriverConfig::new("murmur/driver-openai", "https://api.openai.com/v1", None);
    cfg.driver_config = Some(json!({"api": "completions"}));
    assert_eq!(
        drivers::openai(cfg).err().unwrap(),
        "murmur/driver-openai: inference.driver.config.api must be chat or responses, not 'completions'"
    );
}

#[tokio::test]
async fn the_fake_providers_fallback_answers_every_api_in_its_own_shape() {
    let fake = FakeProvider::start_on(
        "127.0.0.1:0",
        [],
        Some(fake_provider::Fallback::Text("canned".into())),
    )
    .await
    .unwrap();
    let openai = driver(&fake);
    let anthropic =
        drivers::anthropic(config("murmur/driver-anthropic", &fake.endpoint())).unwrap();
    for (d, model) in [
        (&openai, "llama"),
        (&openai, "gpt-5"),
        (&anthropic, "claude-haiku-4-5"),
    ] {
        let reply = bounded(d.infer(&simple(model, "x"), &NoRetrySink))
            .await
            .unwrap();
        assert_eq!(reply.content, vec![ContentBlock::text("canned")], "{model}");
        assert_eq!(reply.stop_reason, StopReason::EndTurn);
    }
    let paths: Vec<String> = fake.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(
        paths,
        ["/v1/chat/completions", "/v1/responses", "/v1/messages"]
    );
}

#[tokio::test]
async fn requests_past_the_script_get_a_418_naming_them() {
    let fake = FakeProvider::start([]).await.unwrap();
    let e = bounded(driver(&fake).infer(&simple("m", "x"), &NoRetrySink))
        .await
        .unwrap_err();
    assert_eq!(e.provider_status, Some(418));
    assert!(
        e.message
            .ends_with("fake-provider: no scripted reply for request #0 (/v1/chat/completions)"),
        "{}",
        e.message
    );
}
