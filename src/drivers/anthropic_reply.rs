//! Reading Anthropic replies: one JSON message, or the `message_start` … `message_stop` stream.

use mur_actors::model::{ContentBlock, InferErrorKind, InferReply, StopReason, Usage};
use serde_json::Value;

use super::body::{count, StreamAssembler};
use super::http::provider_message;
use super::retry::Failure;
use super::sse::SseEvent;

/// Maps an Anthropic `stop_reason` to the neutral one; unknown values are errors.
fn stop_reason(url: &str, s: &str) -> Result<StopReason, Failure> {
    match s {
        "end_turn" | "stop_sequence" => Ok(StopReason::EndTurn),
        "tool_use" => Ok(StopReason::ToolCall),
        "max_tokens" => Ok(StopReason::MaxTokens),
        "refusal" => Err(Failure::fatal(
            InferErrorKind::Driver,
            format!("the model declined to answer (stop_reason 'refusal' from {url})"),
        )),
        other => Err(Failure::malformed(format!(
            "the reply from {url} has an unsupported stop_reason '{other}'"
        ))),
    }
}

/// Copies the usage members Anthropic reported; absent ones stay absent.
fn merge_usage(usage: &mut Usage, v: &Value) {
    if let Some(n) = count(v, "input_tokens") {
        usage.input_tokens = Some(n);
    }
    if let Some(n) = count(v, "output_tokens") {
        usage.output_tokens = Some(n);
    }
    if let Some(n) = count(v, "cache_read_input_tokens") {
        usage.cached_tokens = Some(n);
    }
    if let Some(n) = count(v, "cache_creation_input_tokens") {
        usage.cache_write_tokens = Some(n);
    }
}

/// Parses tool input JSON; text that is not JSON is kept as a string so the runtime can answer
/// the model with a tool error instead of failing the task.
fn tool_input(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(Default::default());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()))
}

/// Parses a non-streamed Messages API reply.
pub(crate) fn parse_message(url: &str, v: Value) -> Result<InferReply, Failure> {
    if v.get("type").and_then(Value::as_str) == Some("error") {
        return Err(Failure::fatal(
            InferErrorKind::Driver,
            format!(
                "{url} answered with an error: {}",
                provider_message(v.to_string().as_bytes())
            ),
        ));
    }
    let Some(blocks) = v.get("content").and_then(Value::as_array) else {
        return Err(Failure::malformed(format!(
            "the reply from {url} is JSON but not an Anthropic message (no 'content' array)"
        )));
    };
    let Some(stop) = v.get("stop_reason").and_then(Value::as_str) else {
        return Err(Failure::malformed(format!(
            "the reply from {url} has no stop_reason"
        )));
    };
    let stop_reason = stop_reason(url, stop)?;
    let mut content = Vec::new();
    for b in blocks {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => {
                let text = b.get("text").and_then(Value::as_str).unwrap_or("");
                if !text.is_empty() {
                    content.push(ContentBlock::text(text));
                }
            }
            Some("tool_use") => content.push(ContentBlock::ToolCall {
                id: str_of(b, "id"),
                name: str_of(b, "name"),
                input: b
                    .get("input")
                    .cloned()
                    .unwrap_or_else(|| Value::Object(Default::default())),
            }),
            Some("thinking") => {
                let text = str_of(b, "thinking");
                if !text.is_empty() {
                    content.push(ContentBlock::Thinking {
                        text,
                        signature: b
                            .get("signature")
                            .and_then(Value::as_str)
                            .map(str::to_string),
                    });
                }
            }
            _ => {}
        }
    }
    let mut usage = Usage::default();
    if let Some(u) = v.get("usage") {
        merge_usage(&mut usage, u);
    }
    Ok(InferReply {
        stop_reason,
        content,
        usage,
        attempts: 1,
    })
}

fn str_of(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}

/// One content block being streamed.
enum Block {
    Text(String),
    Tool {
        id: String,
        name: String,
        json: String,
        start_input: Option<Value>,
    },
    Thinking {
        text: String,
        signature: Option<String>,
    },
    Ignored,
}

/// Assembles a reply from Anthropic stream events as they arrive.
pub(crate) struct AnthropicStream {
    url: String,
    blocks: Vec<(u64, Block)>,
    usage: Usage,
    stop: Option<String>,
}

impl AnthropicStream {
    /// A fresh assembler for a reply from `url`.
    pub(crate) fn new(url: &str) -> AnthropicStream {
        AnthropicStream {
            url: url.to_string(),
            blocks: Vec::new(),
            usage: Usage::default(),
            stop: None,
        }
    }

    fn block(&mut self, index: u64) -> Result<&mut Block, Failure> {
        let url = &self.url;
        match self.blocks.iter_mut().find(|(i, _)| *i == index) {
            Some((_, b)) => Ok(b),
            None => Err(Failure::malformed(format!(
                "the event stream from {url} sent a delta for content block {index}, which was never started"
            ))),
        }
    }
}

impl StreamAssembler for AnthropicStream {
    fn on_event(&mut self, event: SseEvent) -> Result<bool, Failure> {
        let data: Value = serde_json::from_str(&event.data).map_err(|e| {
            Failure::malformed(format!(
                "the event stream from {} sent an event whose data is not JSON ({e})",
                self.url
            ))
        })?;
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or(event.event)
            .unwrap_or_default();
        match kind.as_str() {
            "message_start" => {
                if let Some(u) = data.pointer("/message/usage") {
                    merge_usage(&mut self.usage, u);
                }
            }
            "content_block_start" => {
                let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
                let cb = data.get("content_block").cloned().unwrap_or(Value::Null);
                let block = match cb.get("type").and_then(Value::as_str) {
                    Some("text") => Block::Text(str_of(&cb, "text")),
                    Some("tool_use") => Block::Tool {
                        id: str_of(&cb, "id"),
                        name: str_of(&cb, "name"),
                        json: String::new(),
                        start_input: cb.get("input").cloned(),
                    },
                    Some("thinking") => Block::Thinking {
                        text: str_of(&cb, "thinking"),
                        signature: None,
                    },
                    _ => Block::Ignored,
                };
                self.blocks.retain(|(i, _)| *i != index);
                self.blocks.push((index, block));
            }
            "content_block_delta" => {
                let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
                let delta = data.get("delta").cloned().unwrap_or(Value::Null);
                let piece = |k: &str| delta.get(k).and_then(Value::as_str).unwrap_or("");
                match (
                    self.block(index)?,
                    delta.get("type").and_then(Value::as_str),
                ) {
                    (Block::Text(t), Some("text_delta")) => t.push_str(piece("text")),
                    (Block::Tool { json, .. }, Some("input_json_delta")) => {
                        json.push_str(piece("partial_json"))
                    }
                    (Block::Thinking { text, .. }, Some("thinking_delta")) => {
                        text.push_str(piece("thinking"))
                    }
                    (Block::Thinking { signature, .. }, Some("signature_delta")) => {
                        signature
                            .get_or_insert_with(String::new)
                            .push_str(piece("signature"));
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(s) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop = Some(s.to_string());
                }
                if let Some(u) = data.get("usage") {
                    merge_usage(&mut self.usage, u);
                }
            }
            "message_stop" => return Ok(true),
            "error" => {
                let said = provider_message(event.data.as_bytes());
                let message = format!(
                    "the event stream from {} reported an error: {said}",
                    self.url
                );
                let transient = matches!(
                    data.pointer("/error/type").and_then(Value::as_str),
                    Some("overloaded_error" | "api_error" | "rate_limit_error")
                );
                return Err(if transient {
                    Failure::Transient {
                        reason: "driver",
                        status: None,
                        message,
                        retry_after_ms: None,
                    }
                } else {
                    Failure::fatal(InferErrorKind::Driver, message)
                });
            }
            _ => {}
        }
        Ok(false)
    }

    fn finish(mut self, _terminal: bool, events: usize) -> Result<InferReply, Failure> {
        let Some(stop) = self.stop.take() else {
            return Err(Failure::malformed(format!(
                "the event stream from {} ended before the reply was complete \
                 (no stop_reason after {events} events)",
                self.url
            )));
        };
        let stop_reason = stop_reason(&self.url, &stop)?;
        self.blocks.sort_by_key(|(i, _)| *i);
        let mut content = Vec::new();
        for (_, b) in self.blocks {
            match b {
                Block::Text(t) if !t.is_empty() => content.push(ContentBlock::Text { text: t }),
                Block::Tool {
                    id,
                    name,
                    json,
                    start_input,
                } => {
                    let input = if json.trim().is_empty() {
                        start_input.unwrap_or_else(|| Value::Object(Default::default()))
                    } else {
                        tool_input(&json)
                    };
                    content.push(ContentBlock::ToolCall { id, name, input });
                }
                Block::Thinking { text, signature } if !text.is_empty() => {
                    content.push(ContentBlock::Thinking { text, signature })
                }
                _ => {}
            }
        }
        Ok(InferReply {
            stop_reason,
            content,
            usage: self.usage,
            attempts: 1,
        })
    }
}
