//! Reading Anthropic replies: one JSON message, or the `message_start` … `message_stop` stream.

use std::borrow::Cow;

use mur_actors::model::{ContentBlock, InferErrorKind, InferReply, StopReason, Usage};
use serde::Deserialize;
use serde_json::Value;

use super::body::{count, StreamAssembler};
use super::http::provider_message;
use super::retry::Failure;
use super::sse::SseEvent;
use super::strict::{skips_like_value, Obj};

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

/// A `content_block_delta` event of the common shape, read typed: the event a stream sends for
/// every piece of text, tool input or thinking. Anything else (another event type, a member of
/// an unexpected type, a duplicate key) is read as a `Value`, which stays the definition; the
/// hostile-input harness decodes every Anthropic body both ways (`super::strict` for why the
/// reading is strict).
#[derive(Deserialize)]
struct BlockDelta<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    index: Option<u64>,
    #[serde(default, borrow)]
    delta: Option<Obj<DeltaPiece<'a>>>,
}

#[derive(Deserialize)]
struct DeltaPiece<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    partial_json: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    thinking: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    signature: Option<Cow<'a, str>>,
}

impl DeltaPiece<'_> {
    /// The member `key` of the delta, `""` if absent (as the `Value` reading's `piece`).
    fn piece(&self, key: &str) -> &str {
        let member = match key {
            "text" => &self.text,
            "partial_json" => &self.partial_json,
            "thinking" => &self.thinking,
            _ => &self.signature,
        };
        member.as_deref().unwrap_or("")
    }
}

/// Assembles a reply from Anthropic stream events as they arrive.
pub(crate) struct AnthropicStream {
    url: String,
    /// Whether `content_block_delta` events of the common shape are read typed before the
    /// `Value` reading; off only to check the two agree.
    typed: bool,
    blocks: Vec<(u64, Block)>,
    usage: Usage,
    stop: Option<String>,
}

impl AnthropicStream {
    /// A fresh assembler for a reply from `url`.
    pub(crate) fn new(url: &str) -> AnthropicStream {
        AnthropicStream {
            url: url.to_string(),
            typed: true,
            blocks: Vec::new(),
            usage: Usage::default(),
            stop: None,
        }
    }

    /// An assembler that reads every event as a `Value`: the definition the typed reading is
    /// checked against.
    pub(crate) fn value_only(url: &str) -> AnthropicStream {
        AnthropicStream {
            typed: false,
            ..AnthropicStream::new(url)
        }
    }

    /// Appends a delta of type `kind` to block `index`; `piece` reads the delta's members.
    fn delta<'p>(
        &mut self,
        index: u64,
        kind: Option<&str>,
        piece: impl Fn(&str) -> &'p str,
    ) -> Result<(), Failure> {
        match (self.block(index)?, kind) {
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
        Ok(())
    }

    /// Takes in `data` if it is a `content_block_delta` of the common shape; `None` leaves it to
    /// the `Value` reading.
    fn typed_delta(&mut self, data: &str) -> Option<Result<(), Failure>> {
        if !skips_like_value(data) {
            return None;
        }
        let Obj(event) = serde_json::from_str::<Obj<BlockDelta>>(data).ok()?;
        if event.kind != "content_block_delta" {
            return None;
        }
        let delta = event.delta.map(|d| d.0);
        let kind = delta.as_ref().and_then(|d| d.kind.as_deref());
        let piece = |key: &str| delta.as_ref().map_or("", |d| d.piece(key));
        Some(self.delta(event.index.unwrap_or(0), kind, piece))
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
        // Only a delta is read typed: other events (a handful per reply) skip the attempt when
        // their name says what they are.
        let maybe_delta = event
            .event
            .as_deref()
            .is_none_or(|e| e == "content_block_delta");
        if self.typed && maybe_delta {
            if let Some(done) = self.typed_delta(&event.data) {
                return done.map(|()| false);
            }
        }
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
                self.delta(index, delta.get("type").and_then(Value::as_str), piece)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drivers::{check_readings_agree, ReplyApi};

    /// An event stream of `(event, data)` pairs.
    fn stream(events: &[(&str, &str)]) -> String {
        events
            .iter()
            .map(|(e, d)| format!("event: {e}\ndata: {d}\n\n"))
            .collect()
    }

    fn agree(events: &[(&str, &str)]) {
        let body = stream(events);
        let sse = "text/event-stream";
        check_readings_agree(ReplyApi::AnthropicMessages, sse, [body.as_bytes()]);
        let cut: Vec<&[u8]> = body.as_bytes().chunks(5).collect();
        check_readings_agree(ReplyApi::AnthropicMessages, sse, cut);
    }

    const START: (&str, &str) = (
        "message_start",
        r#"{"type":"message_start","message":{"usage":{"input_tokens":12}}}"#,
    );
    const END: [(&str, &str); 2] = [
        (
            "message_delta",
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}"#,
        ),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ];

    #[test]
    fn common_deltas_are_read_typed_and_streams_decode_as_the_value_reading_decodes_them() {
        let deltas = [
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Plan."}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"c2ln"}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hel"}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"lo \u00e9\n"}}"#,
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"comm"}}"#,
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"and\": \"ls\"}"}}"#,
        ];
        let mut s = AnthropicStream::new("http://x");
        s.blocks = vec![
            (
                0,
                Block::Thinking {
                    text: String::new(),
                    signature: None,
                },
            ),
            (1, Block::Text(String::new())),
            (
                2,
                Block::Tool {
                    id: "t".into(),
                    name: "bash".into(),
                    json: String::new(),
                    start_input: None,
                },
            ),
        ];
        for d in deltas {
            assert!(
                matches!(s.typed_delta(d), Some(Ok(()))),
                "not read typed: {d}"
            );
        }
        let mut events = vec![START];
        events.push(("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#));
        events.push((
            "content_block_start",
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
        ));
        events.push(("content_block_start", r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"bash","input":{}}}"#));
        events.extend(deltas.iter().map(|d| ("content_block_delta", *d)));
        events.extend(END);
        agree(&events);
    }

    #[test]
    fn odd_deltas_go_to_the_value_reading_and_streams_still_decode_alike() {
        let text_block = (
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        );
        let odd = [
            r#"{"index":0,"delta":{"type":"text_delta","text":"named by the event only"}}"#,
            r#"{"type":"content_block_delta","index":"0","delta":{"type":"text_delta","text":"x"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":7}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":"text"}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a","text":"b"}}"#,
            r#"["content_block_delta",0]"#,
        ];
        let mut s = AnthropicStream::new("http://x");
        s.blocks = vec![(0, Block::Text(String::new()))];
        for d in odd {
            assert!(
                s.typed_delta(d).is_none(),
                "an odd delta was read typed: {d}"
            );
        }
        let mut events = vec![START, text_block];
        events.extend(odd.iter().map(|d| ("content_block_delta", *d)));
        events.extend(END);
        agree(&events);
        // A delta for a block never started fails alike, typed or not.
        let early =
            r#"{"type":"content_block_delta","index":5,"delta":{"type":"text_delta","text":"x"}}"#;
        agree(&[
            START,
            text_block,
            ("content_block_delta", early),
            END[0],
            END[1],
        ]);
        agree(&[
            START,
            text_block,
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":null}"#,
            ),
            END[0],
            END[1],
        ]);
    }
}
