//! Provider-shaped bodies and event streams, so tests script replies in one line.
//!
//! Shapes follow the public Anthropic Messages and OpenAI Chat Completions / Responses APIs.

/// Anthropic Messages API bodies.
pub mod anthropic {
    use serde_json::{json, Value};

    use crate::{Reply, SseEvent};

    /// A non-streaming message with one text block.
    pub fn text(text: &str) -> Value {
        json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "test-model",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 11, "output_tokens": 7}
        })
    }

    /// A non-streaming message asking for one tool call.
    pub fn tool_use(id: &str, name: &str, input: Value) -> Value {
        json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "test-model",
            "content": [{"type": "tool_use", "id": id, "name": name, "input": input}],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 11, "output_tokens": 7}
        })
    }

    /// A provider error body (`{"type":"error","error":{type,message}}`) with a status.
    pub fn error(status: u16, kind: &str, message: &str) -> Reply {
        Reply::status(
            status,
            json!({"type": "error", "error": {"type": kind, "message": message}}),
        )
    }

    /// `message_start` with seeded usage.
    pub fn message_start(input_tokens: u64) -> SseEvent {
        SseEvent::named(
            "message_start",
            json!({"type": "message_start", "message": {
                "id": "msg_1", "type": "message", "role": "assistant", "model": "test-model",
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": input_tokens, "output_tokens": 1}}}),
        )
    }

    /// `message_delta` carrying the stop reason and cumulative output usage, then `message_stop`.
    pub fn message_end(stop_reason: &str, output_tokens: u64) -> Vec<SseEvent> {
        vec![
            SseEvent::named(
                "message_delta",
                json!({"type": "message_delta",
                       "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                       "usage": {"output_tokens": output_tokens}}),
            ),
            SseEvent::named("message_stop", json!({"type": "message_stop"})),
        ]
    }

    /// A text block at `index` streamed in `parts`.
    pub fn text_block(index: u64, parts: &[&str]) -> Vec<SseEvent> {
        let mut out = vec![SseEvent::named(
            "content_block_start",
            json!({"type": "content_block_start", "index": index,
                   "content_block": {"type": "text", "text": ""}}),
        )];
        for p in parts {
            out.push(SseEvent::named(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index,
                       "delta": {"type": "text_delta", "text": p}}),
            ));
        }
        out.push(SseEvent::named(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        out
    }

    /// A tool_use block at `index` whose input JSON arrives in `fragments`.
    pub fn tool_use_block(index: u64, id: &str, name: &str, fragments: &[&str]) -> Vec<SseEvent> {
        let mut out = vec![SseEvent::named(
            "content_block_start",
            json!({"type": "content_block_start", "index": index,
                   "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        )];
        for f in fragments {
            out.push(SseEvent::named(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index,
                       "delta": {"type": "input_json_delta", "partial_json": f}}),
            ));
        }
        out.push(SseEvent::named(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        out
    }

    /// A whole streamed text answer: start, one text block, end_turn, stop.
    pub fn text_stream(parts: &[&str]) -> Vec<SseEvent> {
        let mut out = vec![message_start(11)];
        out.extend(text_block(0, parts));
        out.extend(message_end("end_turn", 7));
        out
    }
}

/// OpenAI Chat Completions and Responses API bodies.
pub mod openai {
    use serde_json::{json, Value};

    use crate::{Reply, SseEvent};

    /// A `chat.completion` with one text answer.
    pub fn chat_text(text: &str) -> Value {
        json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "test-model",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
        })
    }

    /// A `chat.completion` asking for tool calls; each is `(id, name, arguments string)`.
    pub fn chat_tool_calls(calls: &[(&str, &str, &str)]) -> Value {
        let calls: Vec<Value> = calls
            .iter()
            .map(|(id, name, args)| {
                json!({"id": id, "type": "function",
                       "function": {"name": name, "arguments": args}})
            })
            .collect();
        json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "test-model",
            "choices": [{"index": 0, "finish_reason": "tool_calls",
                         "message": {"role": "assistant", "content": null, "tool_calls": calls}}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
        })
    }

    /// One `chat.completion.chunk` event with the given choice delta and finish reason.
    pub fn chunk(delta: Value, finish_reason: Option<&str>) -> SseEvent {
        SseEvent::data(
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                   "model": "test-model",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]})
            .to_string(),
        )
    }

    /// The trailing usage chunk (`choices: []`) that `stream_options.include_usage` asks for.
    pub fn usage_chunk(prompt: u64, completion: u64, cached: u64) -> SseEvent {
        SseEvent::data(
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                   "model": "test-model", "choices": [],
                   "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                             "total_tokens": prompt + completion,
                             "prompt_tokens_details": {"cached_tokens": cached}}})
            .to_string(),
        )
    }

    /// `data: [DONE]`.
    pub fn done() -> SseEvent {
        SseEvent::data("[DONE]")
    }

    /// A whole streamed text answer in `parts`, with a usage chunk and `[DONE]`.
    pub fn chat_text_stream(parts: &[&str]) -> Vec<SseEvent> {
        let mut out = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
        for p in parts {
            out.push(chunk(json!({"content": p}), None));
        }
        out.push(chunk(json!({}), Some("stop")));
        out.push(usage_chunk(11, 7, 0));
        out.push(done());
        out
    }

    /// An OpenAI-shaped error body with a status.
    pub fn error(status: u16, kind: &str, message: &str) -> Reply {
        Reply::status(
            status,
            json!({"error": {"message": message, "type": kind, "param": null, "code": null}}),
        )
    }

    /// A completed Responses API object with one text message.
    pub fn responses_text(text: &str) -> Value {
        json!({
            "id": "resp_1", "object": "response", "status": "completed", "model": "gpt-5",
            "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": text, "annotations": []}]}],
            "usage": {"input_tokens": 11, "output_tokens": 7,
                      "input_tokens_details": {"cached_tokens": 0}}
        })
    }

    /// A completed Responses API object with one function call.
    pub fn responses_function_call(call_id: &str, name: &str, arguments: &str) -> Value {
        json!({
            "id": "resp_1", "object": "response", "status": "completed", "model": "gpt-5",
            "output": [{"type": "function_call", "id": "fc_1", "call_id": call_id, "name": name,
                        "arguments": arguments, "status": "completed"}],
            "usage": {"input_tokens": 11, "output_tokens": 7}
        })
    }

    /// A Responses API event stream for a text answer in `parts`.
    pub fn responses_text_stream(parts: &[&str]) -> Vec<SseEvent> {
        let ev = |t: &str, v: Value| SseEvent::named(t, v);
        let mut out = vec![ev(
            "response.created",
            json!({"type": "response.created",
                   "response": {"id": "resp_1", "status": "in_progress", "output": []}}),
        )];
        for p in parts {
            out.push(ev(
                "response.output_text.delta",
                json!({"type": "response.output_text.delta", "output_index": 0,
                       "content_index": 0, "delta": p}),
            ));
        }
        out.push(ev(
            "response.completed",
            json!({"type": "response.completed", "response": responses_text(&parts.concat())}),
        ));
        out
    }
}
