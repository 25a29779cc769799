//! Reading Chat Completions replies: one `chat.completion`, or a stream of chunks.

use mur_actors::model::{ContentBlock, InferErrorKind, InferReply, StopReason, Usage};
use serde_json::Value;

use super::body::{count, StreamAssembler};
use super::chat_completion::{self, merge_counts, Chunk};
use super::http::provider_message;
use super::retry::Failure;
use super::sse::SseEvent;

/// Parses tool call arguments: a JSON string that should hold an object.
///
/// Empty means `{}`; text that is not JSON is kept as a JSON string (see the module docs of
/// `openai`); an object sent directly (some servers) is taken as is.
pub(crate) fn arguments(v: Option<&Value>) -> Value {
    match v {
        Some(Value::String(raw)) if raw.trim().is_empty() => Value::Object(Default::default()),
        Some(Value::String(raw)) => {
            serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.clone()))
        }
        Some(Value::Null) | None => Value::Object(Default::default()),
        Some(other) => other.clone(),
    }
}

/// Maps a `finish_reason`; `stop` with tool calls is a tool call turn.
pub(crate) fn stop_reason(
    url: &str,
    reason: Option<&str>,
    has_calls: bool,
) -> Result<StopReason, Failure> {
    match reason {
        None | Some("stop") if has_calls => Ok(StopReason::ToolCall),
        None | Some("stop") => Ok(StopReason::EndTurn),
        Some("tool_calls" | "function_call") => Ok(StopReason::ToolCall),
        Some("length") => Ok(StopReason::MaxTokens),
        Some("content_filter") => Err(Failure::fatal(
            InferErrorKind::Driver,
            format!("the provider's content filter stopped the answer (finish_reason 'content_filter' from {url})"),
        )),
        Some(other) => Err(Failure::malformed(format!(
            "the reply from {url} has an unsupported finish_reason '{other}'"
        ))),
    }
}

/// Copies the usage members reported; absent ones stay absent.
fn merge_usage(usage: &mut Usage, v: &Value) {
    let detail = |key: &str, member: &str| v.get(key).and_then(|d| count(d, member));
    merge_counts(
        usage,
        [
            count(v, "prompt_tokens"),
            count(v, "completion_tokens"),
            detail("prompt_tokens_details", "cached_tokens"),
            detail("completion_tokens_details", "reasoning_tokens"),
        ],
    );
}

/// Text of a `content` member: a string, or an array of `{type: text, text}` parts.
fn content_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

fn reasoning_text(v: &Value) -> Option<&str> {
    v.get("reasoning_content")
        .or_else(|| v.get("reasoning"))
        .and_then(Value::as_str)
}

fn error_failure(url: &str, v: &Value) -> Option<Failure> {
    match v.get("error") {
        None | Some(Value::Null) => None,
        Some(_) => Some(Failure::fatal(
            InferErrorKind::Driver,
            format!(
                "{url} answered with an error: {}",
                provider_message(v.to_string().as_bytes())
            ),
        )),
    }
}

/// Splits `<think>…</think>` spans (how some local servers return reasoning) out of the text.
/// An unclosed `<think>` runs to the end (the answer was cut inside its reasoning).
fn split_think(text: &str) -> (String, String) {
    let (mut thinking, mut rest) = (String::new(), String::new());
    let mut s = text;
    while let Some(start) = s.find("<think>") {
        rest.push_str(&s[..start]);
        let after = &s[start + "<think>".len()..];
        match after.find("</think>") {
            Some(end) => {
                thinking.push_str(&after[..end]);
                s = &after[end + "</think>".len()..];
            }
            None => {
                thinking.push_str(after);
                s = "";
            }
        }
    }
    rest.push_str(s);
    (thinking.trim().to_string(), rest.trim_start().to_string())
}

/// Assembles the neutral content: thinking, then text, then tool calls.
pub(crate) fn content(
    thinking: String,
    text: String,
    calls: Vec<ContentBlock>,
) -> Vec<ContentBlock> {
    let (thinking, text) = if text.contains("<think>") {
        let (inline, rest) = split_think(&text);
        (format!("{thinking}{inline}"), rest)
    } else {
        (thinking, text)
    };
    let mut out = Vec::new();
    if !thinking.is_empty() {
        out.push(ContentBlock::Thinking {
            text: thinking,
            signature: None,
        });
    }
    if !text.is_empty() {
        out.push(ContentBlock::Text { text });
    }
    out.extend(calls);
    out
}

/// Parses a non-streamed `chat.completion`.
pub(crate) fn parse_chat(url: &str, v: Value) -> Result<InferReply, Failure> {
    if let Some(f) = error_failure(url, &v) {
        return Err(f);
    }
    let Some(choice) = v
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
    else {
        return Err(Failure::malformed(format!(
            "the reply from {url} has no choices"
        )));
    };
    let Some(message) = choice.get("message") else {
        return Err(Failure::malformed(format!(
            "the reply from {url} has a choice without a message"
        )));
    };
    let calls: Vec<ContentBlock> = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| {
            calls
                .iter()
                .enumerate()
                .map(|(i, c)| ContentBlock::ToolCall {
                    id: c
                        .get("id")
                        .and_then(Value::as_str)
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .unwrap_or_else(|| format!("call_{i}")),
                    name: c
                        .pointer("/function/name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    input: arguments(c.pointer("/function/arguments")),
                })
                .collect()
        })
        .unwrap_or_default();
    let reason = choice.get("finish_reason").and_then(Value::as_str);
    let stop_reason = stop_reason(url, reason, !calls.is_empty())?;
    let mut usage = Usage::default();
    if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
        merge_usage(&mut usage, u);
    }
    Ok(InferReply {
        stop_reason,
        content: content(
            reasoning_text(message).unwrap_or("").to_string(),
            content_text(message.get("content")),
            calls,
        ),
        usage,
        attempts: 1,
    })
}

/// A tool call being streamed, keyed by its `index`.
struct PartialCall {
    index: u64,
    id: String,
    name: String,
    arguments: String,
}

/// Assembles a reply from `chat.completion.chunk` events.
pub(crate) struct ChatStream {
    url: String,
    /// Whether whole replies and chunks of the common shape are read typed
    /// (`super::chat_completion`) before the `Value` reading; off only to check the two agree.
    typed: bool,
    text: String,
    thinking: String,
    calls: Vec<PartialCall>,
    finish: Option<String>,
    usage: Usage,
}

impl ChatStream {
    /// A fresh assembler for a reply from `url`.
    pub(crate) fn new(url: &str) -> ChatStream {
        ChatStream {
            url: url.to_string(),
            typed: true,
            text: String::new(),
            thinking: String::new(),
            calls: Vec::new(),
            finish: None,
            usage: Usage::default(),
        }
    }

    /// An assembler that reads everything as a `Value`: the definition the typed reading is
    /// checked against.
    pub(crate) fn value_only(url: &str) -> ChatStream {
        ChatStream {
            typed: false,
            ..ChatStream::new(url)
        }
    }

    /// Appends a tool call fragment to the call of `index` (a new one if none has it yet): the
    /// first non-empty id and name stick, arguments are concatenated.
    fn call_delta(&mut self, index: u64, id: &str, name: &str, arguments: &str) {
        let at = match self.calls.iter().position(|c| c.index == index) {
            Some(i) => i,
            None => {
                self.calls.push(PartialCall {
                    index,
                    id: String::new(),
                    name: String::new(),
                    arguments: String::new(),
                });
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[at];
        if call.id.is_empty() {
            call.id = id.to_string();
        }
        if call.name.is_empty() {
            call.name = name.to_string();
        }
        call.arguments.push_str(arguments);
    }

    /// Takes in a chunk the typed reading answered.
    fn take_chunk(&mut self, chunk: Chunk<'_>) {
        if let Some(counts) = chunk.usage {
            merge_counts(&mut self.usage, counts);
        }
        let Some(choice) = chunk.choice else {
            return;
        };
        if let Some(text) = &choice.text {
            text.push_onto(&mut self.text);
        }
        if let Some(r) = &choice.reasoning {
            self.thinking.push_str(r);
        }
        for c in &choice.calls {
            self.call_delta(c.index, &c.id, &c.name, &c.arguments);
        }
        if let Some(f) = choice.finish_reason {
            self.finish = Some(f.into_owned());
        }
    }
}

impl StreamAssembler for ChatStream {
    fn parse_json_fast(&self, body: &[u8]) -> Option<InferReply> {
        self.typed
            .then(|| chat_completion::parse(&self.url, body))
            .flatten()
    }

    fn on_event(&mut self, event: SseEvent) -> Result<bool, Failure> {
        if event.data.trim() == "[DONE]" {
            return Ok(true);
        }
        if let Some(chunk) = self
            .typed
            .then(|| chat_completion::chunk(&event.data))
            .flatten()
        {
            self.take_chunk(chunk);
            return Ok(false);
        }
        let v: Value = serde_json::from_str(&event.data).map_err(|e| {
            Failure::malformed(format!(
                "the event stream from {} sent a chunk that is not JSON ({e})",
                self.url
            ))
        })?;
        if let Some(f) = error_failure(&self.url, &v) {
            return Err(f);
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            merge_usage(&mut self.usage, u);
        }
        let Some(choice) = v
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.iter().find(|c| count(c, "index").unwrap_or(0) == 0))
        else {
            return Ok(false);
        };
        if let Some(delta) = choice.get("delta") {
            self.text.push_str(&content_text(delta.get("content")));
            if let Some(r) = reasoning_text(delta) {
                self.thinking.push_str(r);
            }
            for (pos, tc) in delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let index = count(tc, "index").unwrap_or(pos as u64);
                let s = |p: &str| tc.pointer(p).and_then(Value::as_str).unwrap_or("");
                self.call_delta(
                    index,
                    s("/id"),
                    s("/function/name"),
                    s("/function/arguments"),
                );
            }
        }
        if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(f.to_string());
        }
        Ok(false)
    }

    fn finish(self, _terminal: bool, events: usize) -> Result<InferReply, Failure> {
        let Some(finish) = self.finish else {
            return Err(Failure::malformed(format!(
                "the event stream from {} ended before the reply was complete \
                 (no finish_reason after {events} events)",
                self.url
            )));
        };
        let mut calls = self.calls;
        calls.sort_by_key(|c| c.index);
        let calls: Vec<ContentBlock> = calls
            .into_iter()
            .map(|c| ContentBlock::ToolCall {
                id: if c.id.is_empty() {
                    format!("call_{}", c.index)
                } else {
                    c.id
                },
                name: c.name,
                input: arguments(Some(&Value::String(c.arguments))),
            })
            .collect();
        let stop_reason = stop_reason(&self.url, Some(&finish), !calls.is_empty())?;
        Ok(InferReply {
            stop_reason,
            content: content(self.thinking, self.text, calls),
            usage: self.usage,
            attempts: 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::split_think;

    #[test]
    fn think_spans_are_split_from_the_answer() {
        let split = |t: &str| split_think(t);
        assert_eq!(
            split("<think>\nPlan it.\n</think>\n\nThe answer."),
            ("Plan it.".to_string(), "The answer.".to_string())
        );
        assert_eq!(
            split("A <think>x</think>B"),
            ("x".to_string(), "A B".to_string())
        );
        assert_eq!(
            split("<think>cut off mid-thought"),
            ("cut off mid-thought".to_string(), String::new())
        );
        assert_eq!(split("plain"), (String::new(), "plain".to_string()));
    }
}
