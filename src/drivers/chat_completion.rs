//! The common shape of a whole `chat.completion` reply, and of a streamed
//! `chat.completion.chunk`, read into borrowed structs.
//!
//! Why: reading a reply into a `serde_json::Value` first builds a map per object (a `String` per
//! key, a hash of it, an allocation per member), then walks the tree and drops it. For the small
//! reply of a tool-calling turn that was ~6 µs of a turn's overhead on this machine, and ~12 µs
//! with the cold caches a real turn has; a streamed reply paid it for every chunk. Here the reply
//! is read straight into structs that borrow its strings, and only the neutral reply is built.
//!
//! The `Value` reading in `openai_reply` stays the definition: it accepts odd shapes leniently (a
//! member of the wrong type reads as absent, a duplicate key keeps the last value, an error
//! member fails the call) and writes every error message. This reading is strict instead: it
//! answers only when every member it looks at has the type it expects and the reply succeeded,
//! and returns `None` for anything else, which sends the body to the `Value` reading. Whenever
//! it answers, its reply is the one the `Value` reading gives (checked over odd bodies by
//! `tests` here and by the hostile-input harness, `crate::hostile::reply`, which decodes every
//! Chat Completions body both ways, whole and streamed). A chunk is read the same way: the typed
//! reading answers [`chunk`] or hands the event to `ChatStream`'s `Value` reading.
//!
//! Strictness needs care where serde is lenient: see `super::strict`.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use mur_actors::model::{ContentBlock, InferReply, Usage};
use serde::de::{IgnoredAny, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::Value;

use super::openai_reply::{content, stop_reason};
use super::strict::{skips_like_value, Member, Obj};

#[derive(Deserialize)]
struct Completion<'a> {
    /// Any non-null error hands the body to the `Value` reading, which reports it.
    #[serde(default)]
    error: Option<IgnoredAny>,
    #[serde(borrow)]
    choices: Vec<Obj<Choice<'a>>>,
    #[serde(default)]
    usage: Option<Obj<UsageIn>>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(borrow)]
    message: Obj<Message<'a, Call<'a>>>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

/// A reply's `message`, or a chunk's `delta` (`C` is how their tool calls are sent: whole, or
/// in fragments).
#[derive(Deserialize)]
#[serde(bound(deserialize = "C: Deserialize<'de>"))]
struct Message<'a, C> {
    #[serde(default, borrow)]
    content: Option<Text<'a>>,
    #[serde(default, borrow)]
    reasoning_content: Member<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning: Member<Cow<'a, str>>,
    #[serde(default)]
    tool_calls: Option<Vec<Obj<C>>>,
}

impl<'a, C> Message<'a, C> {
    /// The reasoning text, as `openai_reply::reasoning_text` picks it: `reasoning_content`,
    /// unless absent, then `reasoning`.
    fn reasoning(&mut self) -> Option<Cow<'a, str>> {
        let content = std::mem::take(&mut self.reasoning_content);
        match (content, std::mem::take(&mut self.reasoning)) {
            (Member::Is(r), _) | (Member::Absent, Member::Is(r)) => Some(r),
            _ => None,
        }
    }
}

#[derive(Deserialize)]
struct Call<'a> {
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    function: Option<Obj<Function<'a>>>,
}

#[derive(Deserialize)]
struct Function<'a> {
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    /// Kept as its JSON text: a string (the usual case) or, from some servers, an object.
    #[serde(default, borrow)]
    arguments: Option<&'a RawValue>,
}

#[derive(Deserialize)]
pub(crate) struct UsageIn {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<Obj<PromptDetails>>,
    #[serde(default)]
    completion_tokens_details: Option<Obj<CompletionDetails>>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct CompletionDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

impl UsageIn {
    /// Prompt, completion, cached and reasoning tokens, as reported.
    pub(crate) fn counts(self) -> [Option<u64>; 4] {
        [
            self.prompt_tokens,
            self.completion_tokens,
            self.prompt_tokens_details.and_then(|d| d.0.cached_tokens),
            self.completion_tokens_details
                .and_then(|d| d.0.reasoning_tokens),
        ]
    }
}

/// A `content` member: a string, or an array of parts.
pub(crate) enum Text<'a> {
    Plain(Cow<'a, str>),
    Parts(Vec<Obj<TextPart<'a>>>),
}

#[derive(Deserialize)]
pub(crate) struct TextPart<'a> {
    #[serde(default, borrow, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct TextVisitor<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for TextVisitor<'a> {
            type Value = Text<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or an array of parts")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Text<'a>, E> {
                Ok(Text::Plain(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Text<'a>, E> {
                Ok(Text::Plain(Cow::Owned(s.to_string())))
            }
            fn visit_string<E>(self, s: String) -> Result<Text<'a>, E> {
                Ok(Text::Plain(Cow::Owned(s)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Text<'a>, A::Error> {
                let mut parts = Vec::new();
                while let Some(part) = seq.next_element()? {
                    parts.push(part);
                }
                Ok(Text::Parts(parts))
            }
        }
        d.deserialize_any(TextVisitor(PhantomData))
    }
}

impl Text<'_> {
    /// The text, as `openai_reply::content_text` joins it.
    fn joined(self) -> String {
        match self {
            Text::Plain(s) => s.into_owned(),
            parts => {
                let mut out = String::new();
                parts.push_onto(&mut out);
                out
            }
        }
    }

    /// Appends the text to `out` (a stream's text so far), without building it first.
    pub(crate) fn push_onto(&self, out: &mut String) {
        match self {
            Text::Plain(s) => out.push_str(s),
            Text::Parts(parts) => parts
                .iter()
                .filter(|p| p.0.kind.as_deref() == Some("text"))
                .filter_map(|p| p.0.text.as_deref())
                .for_each(|t| out.push_str(t)),
        }
    }
}

/// Tool call arguments as `openai_reply::arguments` reads them, from their JSON text.
fn arguments(raw: Option<&RawValue>) -> Option<Value> {
    let Some(raw) = raw else {
        return Some(Value::Object(Default::default()));
    };
    if raw.get().starts_with('"') {
        let text: Cow<str> = serde_json::from_str(raw.get()).ok()?;
        if text.trim().is_empty() {
            return Some(Value::Object(Default::default()));
        }
        return Some(
            serde_json::from_str(&text).unwrap_or_else(|_| Value::String(text.into_owned())),
        );
    }
    serde_json::from_str(raw.get()).ok()
}

/// Sets the counts reported (`[prompt, completion, cached, reasoning]`); absent ones leave
/// `usage` as it was.
pub(crate) fn merge_counts(usage: &mut Usage, counts: [Option<u64>; 4]) {
    let [prompt, completion, cached, reasoning] = counts;
    let fields = [
        (&mut usage.input_tokens, prompt),
        (&mut usage.output_tokens, completion),
        (&mut usage.cached_tokens, cached),
        (&mut usage.thinking_tokens, reasoning),
    ];
    for (field, n) in fields {
        if n.is_some() {
            *field = n;
        }
    }
}

/// One `chat.completion.chunk` of the common shape: what a stream assembler takes from it.
pub(crate) struct Chunk<'a> {
    /// The usage counts it reports, if it has a `usage` object.
    pub(crate) usage: Option<[Option<u64>; 4]>,
    /// Its first choice of index 0, if any.
    pub(crate) choice: Option<ChunkChoice<'a>>,
}

/// The parts of a chunk's choice an assembler appends.
pub(crate) struct ChunkChoice<'a> {
    /// Text to append.
    pub(crate) text: Option<Text<'a>>,
    /// Reasoning to append.
    pub(crate) reasoning: Option<Cow<'a, str>>,
    /// Tool call fragments.
    pub(crate) calls: Vec<CallFragment<'a>>,
    /// The finish reason, once sent.
    pub(crate) finish_reason: Option<Cow<'a, str>>,
}

/// A fragment of a streamed tool call; absent members are empty.
pub(crate) struct CallFragment<'a> {
    /// Which call it continues (its position in the chunk if absent).
    pub(crate) index: u64,
    pub(crate) id: Cow<'a, str>,
    pub(crate) name: Cow<'a, str>,
    pub(crate) arguments: Cow<'a, str>,
}

#[derive(Deserialize)]
struct ChunkIn<'a> {
    #[serde(default)]
    error: Option<IgnoredAny>,
    #[serde(default)]
    usage: Option<Obj<UsageIn>>,
    #[serde(default, borrow)]
    choices: Option<Vec<Obj<ChunkChoiceIn<'a>>>>,
}

#[derive(Deserialize)]
struct ChunkChoiceIn<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default, borrow)]
    delta: Option<Obj<Message<'a, CallDelta<'a>>>>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct CallDelta<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    function: Option<Obj<FunctionDelta<'a>>>,
}

#[derive(Deserialize)]
struct FunctionDelta<'a> {
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    arguments: Option<Cow<'a, str>>,
}

/// The chunk `data` holds, when it is a `chat.completion.chunk` of the common shape without an
/// error; `None` hands it to `ChatStream`'s `Value` reading.
pub(crate) fn chunk(data: &str) -> Option<Chunk<'_>> {
    if !skips_like_value(data) {
        return None;
    }
    let Obj(chunk) = serde_json::from_str::<Obj<ChunkIn>>(data).ok()?;
    if chunk.error.is_some() {
        return None;
    }
    let choice = chunk
        .choices
        .into_iter()
        .flatten()
        .map(|c| c.0)
        .find(|c| c.index.unwrap_or(0) == 0)
        .map(|c| {
            let delta = c.delta.map(|d| d.0);
            let (text, reasoning, calls) = match delta {
                None => (None, None, Vec::new()),
                Some(mut d) => {
                    let calls = d
                        .tool_calls
                        .take()
                        .into_iter()
                        .flatten()
                        .enumerate()
                        .map(|(pos, Obj(tc))| {
                            let (name, arguments) = match tc.function {
                                Some(Obj(f)) => {
                                    (f.name.unwrap_or_default(), f.arguments.unwrap_or_default())
                                }
                                None => (Cow::Borrowed(""), Cow::Borrowed("")),
                            };
                            CallFragment {
                                index: tc.index.unwrap_or(pos as u64),
                                id: tc.id.unwrap_or_default(),
                                name,
                                arguments,
                            }
                        })
                        .collect();
                    let reasoning = d.reasoning();
                    (d.content, reasoning, calls)
                }
            };
            ChunkChoice {
                text,
                reasoning,
                calls,
                finish_reason: c.finish_reason,
            }
        });
    Some(Chunk {
        usage: chunk.usage.map(|u| u.0.counts()),
        choice,
    })
}

/// The reply `body` holds, when it is a successful `chat.completion` of the common shape;
/// `None` hands it to the `Value` reading (`openai_reply::parse_chat`).
///
/// The body must be UTF-8 and pass [`skips_like_value`]: serde_json skips a member nobody
/// reads (`object`, `model`, ...) without all the checks the `Value` reading makes (the
/// fuzzer found bytes that are not UTF-8 in `object`, answered here and refused there).
pub(crate) fn parse(url: &str, body: &[u8]) -> Option<InferReply> {
    let body = std::str::from_utf8(body).ok()?;
    if !skips_like_value(body) {
        return None;
    }
    let Obj(reply) = serde_json::from_str::<Obj<Completion>>(body).ok()?;
    if reply.error.is_some() {
        return None;
    }
    let Obj(choice) = reply.choices.into_iter().next()?;
    let Obj(mut message) = choice.message;
    let mut calls = Vec::new();
    for (i, Obj(call)) in message.tool_calls.take().into_iter().flatten().enumerate() {
        let (name, input) = match call.function {
            Some(Obj(f)) => (f.name.unwrap_or_default(), arguments(f.arguments)?),
            None => (Cow::Borrowed(""), arguments(None)?),
        };
        calls.push(ContentBlock::ToolCall {
            id: match call.id {
                Some(id) if !id.is_empty() => id.into_owned(),
                _ => format!("call_{i}"),
            },
            name: name.into_owned(),
            input,
        });
    }
    let stop_reason = stop_reason(url, choice.finish_reason.as_deref(), !calls.is_empty()).ok()?;
    let mut usage = Usage::default();
    if let Some(Obj(u)) = reply.usage {
        merge_counts(&mut usage, u.counts());
    }
    let thinking = message.reasoning().map(Cow::into_owned).unwrap_or_default();
    Some(InferReply {
        stop_reason,
        content: content(
            thinking,
            message.content.map(Text::joined).unwrap_or_default(),
            calls,
        ),
        usage,
        attempts: 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drivers::openai_reply::parse_chat;
    use crate::drivers::ReplyApi;

    const URL: &str = "http://127.0.0.1:1/v1/chat/completions";

    /// What the `Value` reading makes of `body`: the reply, or its error's text.
    fn by_value(body: &str) -> Result<InferReply, String> {
        let v: Value = serde_json::from_str(body).map_err(|e| e.to_string())?;
        parse_chat(URL, v).map_err(|f| format!("{f:?}"))
    }

    fn tool_call_reply(message: &str) -> String {
        format!(
            r#"{{"id":"c","object":"chat.completion","choices":[{{"index":0,"finish_reason":"tool_calls","message":{message}}}],"usage":{{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}}}"#
        )
    }

    #[test]
    fn common_replies_are_read_here_exactly_as_the_value_reading_reads_them() {
        let common = [
            tool_call_reply(
                r#"{"role":"assistant","content":null,"tool_calls":[{"id":"call_7","type":"function","function":{"name":"noop","arguments":"{\"n\": 1}"}}]}"#,
            ),
            tool_call_reply(
                r#"{"role":"assistant","content":"Let me look.","tool_calls":[{"id":"a","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}},{"id":"","function":{"name":"read","arguments":""}}]}"#,
            ),
            r#"{"choices":[{"finish_reason":"stop","message":{"role":"assistant","content":"Done.\nBye \u00e9","reasoning_content":"Think."}}],"usage":{"prompt_tokens":3,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":1},"completion_tokens_details":{"reasoning_tokens":1}}}"#.to_string(),
            r#"{"choices":[{"finish_reason":"length","message":{"content":[{"type":"text","text":"a"},{"type":"image","text":"x"},{"type":"text","text":"b"}]}}]}"#.to_string(),
            r#"{"choices":[{"finish_reason":"stop","message":{"content":"<think>plan</think>answer","reasoning":"r"}}],"error":null}"#.to_string(),
            r#"{"choices":[{"message":{"tool_calls":[{"function":{"name":"f","arguments":{"k":[1,2.5]}}}]}}]}"#.to_string(),
            r#"{"choices":[{"message":{"tool_calls":[{"id":"x","function":{"name":"f","arguments":"not json"}}]}}]}"#.to_string(),
        ];
        for body in &common {
            let fast = parse(URL, body.as_bytes());
            assert!(fast.is_some(), "the common shape was not read here: {body}");
            assert_eq!(fast.map(Ok), Some(by_value(body)), "{body}");
        }
    }

    #[test]
    fn odd_replies_go_to_the_value_reading_or_agree_with_it() {
        let odd = [
            r#"[[{"message":{"content":"positional"}}]]"#.to_string(),
            r#"{"choices":[["x"]]}"#.to_string(),
            r#"{"choices":[{"message":["a","b"]}]}"#.to_string(),
            r#"{"choices":[{"message":null}]}"#.to_string(),
            r#"{"choices":[{"finish_reason":"stop"}]}"#.to_string(),
            r#"{"choices":[]}"#.to_string(),
            r#"{"choices":[{"message":{"content":"a","content":"b"}}]}"#.to_string(),
            r#"{"choices":[{"message":{"content":7}}]}"#.to_string(),
            r#"{"choices":[{"message":{"content":"x","reasoning_content":null,"reasoning":"hidden"}}]}"#.to_string(),
            r#"{"choices":[{"message":{"content":"x","reasoning_content":5}}]}"#.to_string(),
            r#"{"choices":[{"message":{"tool_calls":[{"id":3,"function":{"name":"f"}}]}}]}"#.to_string(),
            r#"{"choices":[{"message":{"tool_calls":[{"function":null}]}}]}"#.to_string(),
            r#"{"choices":[{"message":{"tool_calls":[{"function":"f"}]}}]}"#.to_string(),
            r#"{"choices":[{"message":{"tool_calls":{"id":"x"}}}]}"#.to_string(),
            r#"{"choices":[{"finish_reason":"content_filter","message":{"content":"x"}}]}"#.to_string(),
            r#"{"choices":[{"finish_reason":"weird","message":{"content":"x"}}]}"#.to_string(),
            r#"{"choices":[{"finish_reason":1,"message":{"content":"x"}}]}"#.to_string(),
            r#"{"error":{"message":"overloaded","type":"server_error"},"choices":[{"message":{}}]}"#.to_string(),
            r#"{"choices":[{"message":{}}],"usage":{"prompt_tokens":-1}}"#.to_string(),
            r#"{"choices":[{"message":{}}],"usage":{"prompt_tokens":2.0}}"#.to_string(),
            r#"{"choices":[{"message":{}}],"usage":7}"#.to_string(),
            r#"{"choices":[{"message":{}}],"usage":{"prompt_tokens_details":3}}"#.to_string(),
            r#"{"choices":[{"message":{"content":[{"type":"text","text":"a"},"b"]}}]}"#.to_string(),
            r#"{"choices":[{"message":{}}]} trailing"#.to_string(),
        ];
        let mut answered = 0;
        for body in &odd {
            if let Some(fast) = parse(URL, body.as_bytes()) {
                answered += 1;
                assert_eq!(Ok(fast), by_value(body), "{body}");
            }
        }
        // Most of these must fall through: a strict reading that answered them would have had
        // to copy the Value reading's leniency, and would be a second definition to keep true.
        assert!(answered <= 3, "{answered} odd bodies were read here");
    }

    /// An event stream of `data` payloads, ended by `[DONE]`.
    fn stream(data: &[&str]) -> String {
        let mut out: String = data.iter().map(|d| format!("data: {d}\n\n")).collect();
        out.push_str("data: [DONE]\n\n");
        out
    }

    fn agree(data: &[&str]) {
        let body = stream(data);
        // Whole, and split inside every event.
        crate::drivers::check_readings_agree(
            ReplyApi::OpenAiChat,
            "text/event-stream",
            [body.as_bytes()],
        );
        let cut: Vec<&[u8]> = body.as_bytes().chunks(7).collect();
        crate::drivers::check_readings_agree(ReplyApi::OpenAiChat, "text/event-stream", cut);
    }

    #[test]
    fn common_chunks_are_read_here_and_streams_decode_as_the_value_reading_decodes_them() {
        let common = [
            r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":null}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"bash","arguments":""}}]},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"comma"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","function":{"name":"pull","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"nd\": \"pwd\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"Hel","reasoning_content":"think "}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"lo"}],"reasoning":"r"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":120,"completion_tokens":30,"prompt_tokens_details":{"cached_tokens":64}}}"#,
        ];
        for data in common {
            assert!(
                chunk(data).is_some(),
                "the common chunk was not read here: {data}"
            );
        }
        agree(&common);
        agree(&[
            r#"{"choices":[{"delta":{"content":"<think>plan</think>answer"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"name":"f"}},{"function":{"name":"g"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":null,"finish_reason":"stop"}],"usage":null}"#,
        ]);
    }

    #[test]
    fn odd_chunks_go_to_the_value_reading_and_streams_still_decode_alike() {
        let odd = [
            r#"[{"choices":[]}]"#,
            r#"{"choices":[{"index":"0","delta":{"content":"x"}}]}"#,
            r#"{"choices":[{"index":1,"delta":{"content":"other choice"}},{"delta":{"content":"mine"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":7}}]}"#,
            r#"{"choices":[{"index":0,"delta":"text"}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"x","reasoning_content":null,"reasoning":"hidden"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":-1,"id":3}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":{"k":1}}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":["x"]}}]}"#,
            r#"{"choices":{"index":0}}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"a","content":"b"}}]}"#,
            r#"{"usage":{"prompt_tokens":1.5}}"#,
            r#"{"usage":7}"#,
            r#"{"choices":[{"index":0,"finish_reason":5}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        ];
        for data in &odd[..odd.len() - 1] {
            // Two are well-formed and answered here (a null `reasoning_content` hiding
            // `reasoning`; a first choice of another index); the rest go to `Value`.
            if !(data.contains("hidden") || data.contains("other choice")) {
                assert!(chunk(data).is_none(), "an odd chunk was read here: {data}");
            }
        }
        agree(&odd);
        // An error chunk fails the stream the same way whichever reading saw the chunks before.
        agree(&[
            r#"{"choices":[{"index":0,"delta":{"content":"x"}}]}"#,
            r#"{"error":{"message":"overloaded","type":"server_error"}}"#,
        ]);
        agree(&[
            r#"{"choices":[{"index":0,"delta":{"content":"x"}}]}"#,
            "not json",
        ]);
    }
}
