//! The OpenAI Responses API (`POST {endpoint}/responses`), used by `gpt-5`-style models.
//!
//! Requests are stateless (`store: false` unless `driver.config.store` says otherwise): the whole
//! history goes out as `input` items each call (the body is written by `super::openai_request`). Replies are one `response` object, or a stream
//! of typed events whose terminal event (`response.completed` / `.incomplete` / `.failed`)
//! carries the whole response, which is what is parsed; the text deltas before it are kept
//! only in case a server sends a terminal event whose `output` is empty.

use mur_actors::model::{ContentBlock, InferErrorKind, InferReply, StopReason, Usage};
use serde_json::{json, Value};

use super::body::{count, StreamAssembler};
use super::http::provider_message;
use super::openai_reply::arguments;
use super::retry::Failure;
use super::sse::SseEvent;

/// Parses a `response` object (the JSON reply, or the one a terminal stream event carries).
pub(crate) fn parse_response(url: &str, v: &Value) -> Result<InferReply, Failure> {
    let said = |v: &Value| provider_message(json!({"error": v}).to_string().as_bytes());
    if let Some(e) = v.get("error").filter(|e| !e.is_null()) {
        return Err(Failure::fatal(
            InferErrorKind::Driver,
            format!("{url} answered with an error: {}", said(e)),
        ));
    }
    let Some(output) = v.get("output").and_then(Value::as_array) else {
        return Err(Failure::malformed(format!(
            "the reply from {url} is JSON but not a Responses API object (no 'output' array)"
        )));
    };
    let mut text = String::new();
    let mut thinking = String::new();
    let mut calls = Vec::new();
    for item in output {
        match item.get("type").and_then(Value::as_str) {
            Some("message") => {
                for part in item
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    match part.get("type").and_then(Value::as_str) {
                        Some("output_text") => {
                            text.push_str(part.get("text").and_then(Value::as_str).unwrap_or(""))
                        }
                        Some("refusal") => {
                            return Err(Failure::fatal(
                                InferErrorKind::Driver,
                                format!(
                                    "the model declined to answer: {}",
                                    part.get("refusal").and_then(Value::as_str).unwrap_or("")
                                ),
                            ))
                        }
                        _ => {}
                    }
                }
            }
            Some("function_call") => calls.push(ContentBlock::ToolCall {
                id: item
                    .get("call_id")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                name: item
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                input: arguments(item.get("arguments")),
            }),
            Some("reasoning") => {
                for s in item
                    .get("summary")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if let Some(t) = s.get("text").and_then(Value::as_str) {
                        thinking.push_str(t);
                    }
                }
            }
            _ => {}
        }
    }
    let stop_reason = match v.get("status").and_then(Value::as_str) {
        None | Some("completed") if !calls.is_empty() => StopReason::ToolCall,
        None | Some("completed") => StopReason::EndTurn,
        Some("incomplete") => {
            let reason = v
                .pointer("/incomplete_details/reason")
                .and_then(Value::as_str)
                .unwrap_or("unknown");
            if reason == "max_output_tokens" {
                StopReason::MaxTokens
            } else {
                return Err(Failure::fatal(
                    InferErrorKind::Driver,
                    format!("the response from {url} is incomplete: {reason}"),
                ));
            }
        }
        Some("failed") => {
            return Err(Failure::fatal(
                InferErrorKind::Driver,
                format!("the response from {url} failed"),
            ))
        }
        Some(other) => {
            return Err(Failure::malformed(format!(
                "the reply from {url} has an unsupported status '{other}'"
            )))
        }
    };
    let mut usage = Usage::default();
    if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
        usage.input_tokens = count(u, "input_tokens");
        usage.output_tokens = count(u, "output_tokens");
        usage.cached_tokens = u
            .get("input_tokens_details")
            .and_then(|d| count(d, "cached_tokens"));
        usage.thinking_tokens = u
            .get("output_tokens_details")
            .and_then(|d| count(d, "reasoning_tokens"));
    }
    let mut content = Vec::new();
    if !thinking.is_empty() {
        content.push(ContentBlock::Thinking {
            text: thinking,
            signature: None,
        });
    }
    if !text.is_empty() {
        content.push(ContentBlock::Text { text });
    }
    content.extend(calls);
    Ok(InferReply {
        stop_reason,
        content,
        usage,
        attempts: 1,
    })
}

/// Assembles a reply from Responses API stream events.
pub(crate) struct ResponsesStream {
    url: String,
    text: String,
    done: Option<Result<InferReply, Failure>>,
}

impl ResponsesStream {
    /// A fresh assembler for a reply from `url`.
    pub(crate) fn new(url: &str) -> ResponsesStream {
        ResponsesStream {
            url: url.to_string(),
            text: String::new(),
            done: None,
        }
    }
}

impl StreamAssembler for ResponsesStream {
    fn on_event(&mut self, event: SseEvent) -> Result<bool, Failure> {
        if event.data.trim() == "[DONE]" {
            return Ok(self.done.is_some());
        }
        let v: Value = serde_json::from_str(&event.data).map_err(|e| {
            Failure::malformed(format!(
                "the event stream from {} sent an event whose data is not JSON ({e})",
                self.url
            ))
        })?;
        let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "response.output_text.delta" => {
                self.text
                    .push_str(v.get("delta").and_then(Value::as_str).unwrap_or(""));
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                let response = v.get("response").cloned().unwrap_or(Value::Null);
                if kind == "response.failed" {
                    let why = response
                        .get("error")
                        .filter(|e| !e.is_null())
                        .map(|e| provider_message(json!({"error": e}).to_string().as_bytes()))
                        .unwrap_or_else(|| "no reason given".into());
                    return Err(Failure::fatal(
                        InferErrorKind::Driver,
                        format!("the response from {} failed: {why}", self.url),
                    ));
                }
                let mut parsed = parse_response(&self.url, &response);
                if let Ok(reply) = &mut parsed {
                    if reply.content.is_empty() && !self.text.is_empty() {
                        reply.content.push(ContentBlock::Text {
                            text: std::mem::take(&mut self.text),
                        });
                    }
                }
                self.done = Some(parsed);
                return Ok(true);
            }
            "error" => {
                return Err(Failure::fatal(
                    InferErrorKind::Driver,
                    format!(
                        "the event stream from {} reported an error: {}",
                        self.url,
                        provider_message(event.data.as_bytes())
                    ),
                ))
            }
            _ => {}
        }
        Ok(false)
    }

    fn finish(self, _terminal: bool, events: usize) -> Result<InferReply, Failure> {
        match self.done {
            Some(result) => result,
            None => Err(Failure::malformed(format!(
                "the event stream from {} ended before the reply was complete \
                 (no response.completed after {events} events)",
                self.url
            ))),
        }
    }
}
