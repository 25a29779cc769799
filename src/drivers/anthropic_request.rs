//! The Messages API request body, written straight to bytes.
//!
//! The translation rules are in `super::anthropic`'s module doc; how the history's encoding is
//! kept between calls, and why, is in `super::encode`. Two Anthropic specifics shape the cache:
//! consecutive tool results become one `user` message, so only messages up to the last non-tool
//! one are kept (the trailing results are written fresh each call, as the `tail`); and the
//! prompt-cache marker goes on the last text / tool_use / tool_result block of the whole
//! conversation, so blocks are stored unmarked, with the offset of the last cacheable one, and
//! the marker is spliced in when the body is written.

use mur_actors::model::{ContentBlock, InferRequest, Message, ToolSpec};
use serde::ser::SerializeSeq;
use serde::{Serialize, Serializer};
use serde_json::Value;

use super::encode::{close_object, description, is_false, key, open_object, Part, Prefix};
use super::request_body::{BodyWriter, RequestBody};

/// What the message bytes depend on besides the messages: signed thinking blocks go back only
/// when thinking is on.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Shape {
    thinking: bool,
}

/// What is inserted before the closing `}` of the block that carries the prompt-cache marker.
const CACHE_MARK: &[u8] = br#","cache_control":{"type":"ephemeral"}"#;

/// The options of the request body (from `driver.config`).
pub(super) struct BodyOptions {
    /// Mark the system prompt, the last tool and the last block for the prompt cache.
    pub(super) prompt_cache: bool,
    /// Ask for extended thinking, and send signed thinking blocks back.
    pub(super) thinking: bool,
    /// The thinking budget asked for (kept below `max_tokens`).
    pub(super) thinking_budget: u32,
}

/// `{"type": "ephemeral"}`: the prompt-cache marker.
#[derive(Serialize)]
struct Ephemeral {
    #[serde(rename = "type")]
    kind: &'static str,
}

const EPHEMERAL: Ephemeral = Ephemeral { kind: "ephemeral" };

#[derive(Serialize)]
struct Head<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<[SystemBlock<'a>; 1]>,
}

#[derive(Serialize)]
struct SystemBlock<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    /// The prompt's kept encoding (`encode::Kept`).
    text: &'a serde_json::value::RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<Ephemeral>,
}

#[derive(Serialize)]
struct Rest<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<&'a serde_json::value::RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<ThinkingConfig>,
    stream: bool,
}

#[derive(Serialize)]
struct ThinkingConfig {
    #[serde(rename = "type")]
    kind: &'static str,
    budget_tokens: u32,
}

/// The tool array, the last entry cache-marked when the prompt cache is on.
struct Tools<'a> {
    specs: &'a [ToolSpec],
    cache: bool,
}

#[derive(Serialize)]
struct ToolDef<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<Ephemeral>,
}

impl Serialize for Tools<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.specs.len()))?;
        let last = self.specs.len().saturating_sub(1);
        for (i, t) in self.specs.iter().enumerate() {
            seq.serialize_element(&ToolDef {
                name: &t.name,
                description: description(&t.description),
                input_schema: &t.parameters,
                cache_control: (self.cache && i == last).then_some(EPHEMERAL),
            })?;
        }
        seq.end()
    }
}

/// One content block on the wire (unmarked; the marker is spliced in).
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: ToolInput<'a>,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    ToolResult {
        tool_use_id: &'a str,
        #[serde(skip_serializing_if = "ResultTexts::is_empty")]
        content: ResultTexts<'a>,
        #[serde(skip_serializing_if = "is_false")]
        is_error: bool,
    },
}

impl<'a> Block<'a> {
    /// The wire block for a neutral one; `None` for what is not sent (empty text, unsigned
    /// thinking, any thinking while thinking is off).
    fn of(block: &'a ContentBlock, shape: Shape) -> Option<Block<'a>> {
        match block {
            ContentBlock::Text { text } if text.is_empty() => None,
            ContentBlock::Text { text } => Some(Block::Text { text }),
            ContentBlock::ToolCall { id, name, input } => Some(Block::ToolUse {
                id,
                name,
                input: match input {
                    Value::Object(_) => ToolInput::Object(input),
                    other => ToolInput::Raw {
                        raw_arguments: other,
                    },
                },
            }),
            ContentBlock::Thinking {
                text,
                signature: Some(signature),
            } if shape.thinking => Some(Block::Thinking {
                thinking: text,
                signature,
            }),
            ContentBlock::Thinking { .. } => None,
        }
    }

    /// Whether the prompt-cache marker may sit on this block.
    fn cacheable(&self) -> bool {
        !matches!(self, Block::Thinking { .. })
    }
}

/// A tool call's input: the object itself, or a non-object wrapped as `raw_arguments` (the
/// API wants an object).
#[derive(Serialize)]
#[serde(untagged)]
enum ToolInput<'a> {
    Object(&'a Value),
    Raw { raw_arguments: &'a Value },
}

/// The non-empty text blocks of a tool result, as `text` blocks.
struct ResultTexts<'a>(&'a [ContentBlock]);

#[derive(Serialize)]
struct TextBlock<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

impl<'a> ResultTexts<'a> {
    fn texts(&self) -> impl Iterator<Item = &'a str> {
        self.0.iter().filter_map(|b| match b {
            ContentBlock::Text { text } if !text.is_empty() => Some(text.as_str()),
            _ => None,
        })
    }

    fn is_empty(&self) -> bool {
        self.texts().next().is_none()
    }
}

impl Serialize for ResultTexts<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.texts().map(|text| TextBlock { kind: "text", text }))
    }
}

/// Writes one wire message of `role` holding `blocks`; nothing when there is no block.
fn write_message<'a>(
    part: &mut Part,
    role: &str,
    blocks: impl Iterator<Item = Block<'a>>,
) -> serde_json::Result<()> {
    let mut open = false;
    for block in blocks {
        let out = if open {
            let out = part.buf();
            out.push(b',');
            out
        } else {
            open = true;
            let out = part.item();
            out.extend_from_slice(b"{\"role\":\"");
            out.extend_from_slice(role.as_bytes());
            out.extend_from_slice(b"\",\"content\":[");
            out
        };
        serde_json::to_writer(&mut *out, &block)?;
        if block.cacheable() {
            part.mark_last();
        }
    }
    if open {
        part.buf().extend_from_slice(b"]}");
    }
    Ok(())
}

/// Writes a run of tool messages as one `user` message of `tool_result` blocks.
fn write_results(part: &mut Part, results: &[Message]) -> serde_json::Result<()> {
    write_message(
        part,
        "user",
        results.iter().filter_map(|m| match m {
            Message::Tool {
                tool_call_id,
                is_error,
                content,
            } => Some(Block::ToolResult {
                tool_use_id: tool_call_id,
                content: ResultTexts(content),
                is_error: *is_error,
            }),
            _ => None,
        }),
    )
}

/// Writes `messages` as wire messages into `part`; a run of tool results becomes one `user`
/// message, so a run at the end is complete only if no more results can follow it.
fn write_messages(part: &mut Part, messages: &[Message], shape: Shape) -> serde_json::Result<()> {
    let mut results_from = None;
    for (i, m) in messages.iter().enumerate() {
        let (role, content) = match m {
            Message::Tool { .. } => {
                results_from.get_or_insert(i);
                continue;
            }
            Message::User { content } => ("user", content),
            Message::Assistant { content } => ("assistant", content),
        };
        if let Some(from) = results_from.take() {
            write_results(part, &messages[from..i])?;
        }
        write_message(
            part,
            role,
            content.iter().filter_map(|b| Block::of(b, shape)),
        )?;
    }
    if let Some(from) = results_from {
        write_results(part, &messages[from..])?;
    }
    Ok(())
}

/// Brings `prefix` up to date with `messages`: the new messages up to the last non-tool one
/// appended to the kept part, the trailing tool results (if any) written fresh as the tail.
fn update(
    prefix: &mut Prefix<Shape>,
    messages: &[Message],
    shape: Shape,
) -> serde_json::Result<()> {
    prefix.check(shape, messages.len());
    // Everything up to the last non-tool message is final; a trailing run of tool results may
    // still be joined by more, so it is written fresh.
    let keep = messages
        .iter()
        .rposition(|m| !matches!(m, Message::Tool { .. }))
        .map_or(0, |i| i + 1);
    if keep < prefix.covered {
        // Cannot happen to a history that only grows; start over rather than trust it.
        prefix.reset();
        prefix.check(shape, messages.len());
    }
    write_messages(&mut prefix.done, &messages[prefix.covered..keep], shape)?;
    prefix.covered = keep;
    write_messages(&mut prefix.tail, &messages[keep..], shape)
}

/// Writes the message array's items (kept part, then tail, both lent) into `body`, the cache
/// marker on the last cacheable block when `mark` is set.
fn write_history(body: &mut BodyWriter, prefix: &Prefix<Shape>, mark: bool) {
    // The marker goes after the last cacheable block: the tail's if it has one, else the
    // kept part's.
    let (done_at, tail_at) = match (mark, prefix.tail.mark, prefix.done.mark) {
        (true, Some(t), _) => (None, Some(t)),
        (true, None, Some(d)) => (Some(d), None),
        _ => (None, None),
    };
    lend_marked(body, &prefix.done, done_at);
    if !prefix.done.is_empty() && !prefix.tail.is_empty() {
        body.out.push(b',');
    }
    lend_marked(body, &prefix.tail, tail_at);
}

/// Lends `part`'s bytes to `body`, with the cache marker written at `at` when given.
fn lend_marked(body: &mut BodyWriter, part: &Part, at: Option<usize>) {
    let len = part.bytes.len();
    match at.filter(|at| *at <= len) {
        Some(at) => {
            body.lend(part.lend(0, at));
            body.out.extend_from_slice(CACHE_MARK);
            body.lend(part.lend(at, len));
        }
        None => body.lend(part.lend_all()),
    }
}

/// The Messages API request body for `req`.
pub(super) fn body(req: &InferRequest, opts: &BodyOptions) -> serde_json::Result<RequestBody> {
    let shape = Shape {
        thinking: opts.thinking,
    };
    req.messages
        .with_encoding(|prefix: &mut Prefix<Shape>, messages| {
            let result = write_body(req, opts, prefix, messages, shape);
            if result.is_err() {
                prefix.reset();
            }
            result
        })
}

fn write_body(
    req: &InferRequest,
    opts: &BodyOptions,
    prefix: &mut Prefix<Shape>,
    messages: &[Message],
    shape: Shape,
) -> serde_json::Result<RequestBody> {
    update(prefix, messages, shape)?;
    let mut body = prefix.body_buffer();
    let head = Head {
        model: &req.model,
        max_tokens: req.max_tokens,
        system: prefix.system.string(&req.system)?.map(|text| {
            [SystemBlock {
                kind: "text",
                text,
                cache_control: opts.prompt_cache.then_some(EPHEMERAL),
            }]
        }),
    };
    open_object(&mut body.out, &head)?;
    key(&mut body.out, "messages");
    body.out.push(b'[');
    write_history(&mut body, prefix, opts.prompt_cache);
    body.out.push(b']');
    let tools = prefix
        .tools
        .member(&req.tools, opts.prompt_cache, |specs| {
            serde_json::value::to_raw_value(&Tools {
                specs,
                cache: opts.prompt_cache,
            })
        })?;
    let rest = Rest {
        tools,
        thinking: opts.thinking.then(|| ThinkingConfig {
            kind: "enabled",
            budget_tokens: opts
                .thinking_budget
                .min(req.max_tokens.saturating_sub(1))
                .max(1),
        }),
        stream: true,
    };
    close_object(&mut body.out, &rest)?;
    let body = body.finish();
    prefix.wrote(&body);
    Ok(body)
}
