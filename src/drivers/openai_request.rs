//! The OpenAI request bodies (Chat Completions and Responses), written straight to bytes.
//!
//! The translation rules are in `super::openai`'s module doc; how the history's encoding is
//! kept between calls, and why, is in `super::encode`. On both surfaces each neutral message
//! becomes its own wire items (none are merged, nothing is marked), so every message is kept
//! once encoded. The system prompt is not part of the kept bytes (Chat sends it as the first
//! message, Responses as `instructions`): it is written each call.

use mur_actors::model::{ContentBlock, InferRequest, Message, ToolSpec};
use serde::ser::SerializeSeq;
use serde::{Serialize, Serializer};
use serde_json::value::{to_raw_value, RawValue};
use serde_json::Value;

use super::encode::{close_object, description, key, open_object, Arguments, Joined, Prefix};
use super::openai::OpenAiOptions;
use super::request_body::RequestBody;

/// The shape key of a kept Chat Completions history (no option changes a message's bytes).
#[derive(Clone, Copy, PartialEq, Eq)]
struct ChatShape;

/// The shape key of a kept Responses history (no option changes an item's bytes).
#[derive(Clone, Copy, PartialEq, Eq)]
struct ResponsesShape;

/// Runs `write` with the history's kept prefix, forgetting it if the writing failed.
fn with_prefix<K>(
    req: &InferRequest,
    write: impl FnOnce(&mut Prefix<K>, &[Message]) -> serde_json::Result<RequestBody>,
) -> serde_json::Result<RequestBody>
where
    K: PartialEq + Send + 'static,
{
    req.messages
        .with_encoding(|prefix: &mut Prefix<K>, messages| {
            let result = write(prefix, messages);
            if result.is_err() {
                prefix.reset();
            }
            result
        })
}

// ---- Chat Completions ----

#[derive(Serialize)]
struct ChatHead<'a> {
    model: &'a str,
    max_completion_tokens: u32,
}

#[derive(Serialize)]
struct ChatRest<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'a str>,
    stream: bool,
    stream_options: StreamOptions,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// The system message: its text is the prompt's kept encoding (`encode::Kept`).
#[derive(Serialize)]
struct ChatSystem<'a> {
    role: &'static str,
    content: &'a RawValue,
}

/// One Chat Completions message.
#[derive(Serialize)]
#[serde(untagged)]
enum ChatMessage<'a> {
    /// `user`, or `assistant` without tool calls (the system message is [`ChatSystem`]).
    Text {
        role: &'static str,
        content: Joined<'a>,
    },
    /// `assistant` with tool calls; `content` is `null` when there is no text.
    Calls {
        role: &'static str,
        content: Option<Joined<'a>>,
        tool_calls: ChatCalls<'a>,
    },
    /// A tool result.
    Tool {
        role: &'static str,
        tool_call_id: &'a str,
        content: Joined<'a>,
    },
}

/// The tool calls of an assistant message, as `{id, type, function: {name, arguments}}`.
struct ChatCalls<'a>(&'a [ContentBlock]);

#[derive(Serialize)]
struct ChatCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: ChatFunction<'a>,
}

#[derive(Serialize)]
struct ChatFunction<'a> {
    name: &'a str,
    arguments: Arguments<'a>,
}

impl Serialize for ChatCalls<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(tool_calls(self.0).map(|(id, name, input)| ChatCall {
            id,
            kind: "function",
            function: ChatFunction {
                name,
                arguments: Arguments(input),
            },
        }))
    }
}

/// The `(id, name, input)` of each tool call block.
fn tool_calls(content: &[ContentBlock]) -> impl Iterator<Item = (&str, &str, &Value)> {
    content.iter().filter_map(|b| match b {
        ContentBlock::ToolCall { id, name, input } => Some((id.as_str(), name.as_str(), input)),
        _ => None,
    })
}

/// The tool array as `{type: function, function: {name, description?, parameters}}`.
struct ChatTools<'a>(&'a [ToolSpec]);

#[derive(Serialize)]
struct ChatTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: FunctionDef<'a>,
}

#[derive(Serialize)]
struct FunctionDef<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    parameters: &'a Value,
}

impl Serialize for ChatTools<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for t in self.0 {
            seq.serialize_element(&ChatTool {
                kind: "function",
                function: FunctionDef {
                    name: &t.name,
                    description: description(&t.description),
                    parameters: &t.parameters,
                },
            })?;
        }
        seq.end()
    }
}

/// The Chat Completions message for one neutral message.
fn chat_message(m: &Message) -> ChatMessage<'_> {
    match m {
        Message::User { content } => ChatMessage::Text {
            role: "user",
            content: Joined(content),
        },
        Message::Assistant { content } => {
            let text = Joined(content);
            if tool_calls(content).next().is_none() {
                ChatMessage::Text {
                    role: "assistant",
                    content: text,
                }
            } else {
                ChatMessage::Calls {
                    role: "assistant",
                    content: (!text.is_empty()).then_some(text),
                    tool_calls: ChatCalls(content),
                }
            }
        }
        Message::Tool {
            tool_call_id,
            content,
            ..
        } => ChatMessage::Tool {
            role: "tool",
            tool_call_id,
            content: Joined(content),
        },
    }
}

/// The Chat Completions request body for `req`.
pub(super) fn chat_body(
    req: &InferRequest,
    opts: &OpenAiOptions,
) -> serde_json::Result<RequestBody> {
    with_prefix(req, |prefix: &mut Prefix<ChatShape>, messages| {
        prefix.check(ChatShape, messages.len());
        for m in &messages[prefix.covered..] {
            serde_json::to_writer(prefix.done.item(), &chat_message(m))?;
        }
        prefix.covered = messages.len();

        let mut body = prefix.body_buffer();
        let out = &mut body.out;
        open_object(
            out,
            &ChatHead {
                model: &req.model,
                max_completion_tokens: req.max_tokens,
            },
        )?;
        key(out, "messages");
        out.push(b'[');
        if let Some(content) = prefix.system.string(&req.system)? {
            serde_json::to_writer(
                &mut *out,
                &ChatSystem {
                    role: "system",
                    content,
                },
            )?;
            if !prefix.done.is_empty() {
                out.push(b',');
            }
        }
        body.lend(prefix.done.lend_all());
        body.out.push(b']');
        let tools = prefix
            .tools
            .member(&req.tools, false, |t| to_raw_value(&ChatTools(t)))?;
        let rest = ChatRest {
            tools,
            prompt_cache_key: req.prompt_cache_key.as_deref(),
            reasoning_effort: opts.reasoning_effort.as_deref(),
            stream: true,
            stream_options: StreamOptions {
                include_usage: true,
            },
        };
        close_object(&mut body.out, &rest)?;
        let body = body.finish();
        prefix.wrote(&body);
        Ok(body)
    })
}

// ---- Responses ----

#[derive(Serialize)]
struct ResponsesHead<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    instructions: Option<&'a RawValue>,
}

#[derive(Serialize)]
struct ResponsesRest<'a> {
    max_output_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<Reasoning<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<TextOptions<'a>>,
    store: bool,
    stream: bool,
}

#[derive(Serialize)]
struct Reasoning<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    effort: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<&'static str>,
}

#[derive(Serialize)]
struct TextOptions<'a> {
    verbosity: &'a str,
}

/// A user input item: `{role, content: [{type: input_text, text}]}` (it has no `type`).
#[derive(Serialize)]
struct UserItem<'a> {
    role: &'static str,
    content: [TextPart<'a>; 1],
}

/// The other input items: an assistant message, a function call, its output.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum TypedItem<'a> {
    Message {
        role: &'static str,
        content: [TextPart<'a>; 1],
    },
    FunctionCall {
        call_id: &'a str,
        name: &'a str,
        arguments: Arguments<'a>,
    },
    FunctionCallOutput {
        call_id: &'a str,
        output: Joined<'a>,
    },
}

#[derive(Serialize)]
struct TextPart<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: Joined<'a>,
}

/// The tool array as `{type: function, name, description?, parameters}`.
struct ResponsesTools<'a>(&'a [ToolSpec]);

#[derive(Serialize)]
struct ResponsesTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    parameters: &'a Value,
}

impl Serialize for ResponsesTools<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for t in self.0 {
            seq.serialize_element(&ResponsesTool {
                kind: "function",
                name: &t.name,
                description: description(&t.description),
                parameters: &t.parameters,
            })?;
        }
        seq.end()
    }
}

/// Writes the input items of one neutral message (an assistant message may give several, or
/// none).
fn write_items(prefix: &mut Prefix<ResponsesShape>, m: &Message) -> serde_json::Result<()> {
    let part = &mut prefix.done;
    match m {
        Message::User { content } => {
            let item = UserItem {
                role: "user",
                content: [TextPart {
                    kind: "input_text",
                    text: Joined(content),
                }],
            };
            serde_json::to_writer(part.item(), &item)
        }
        Message::Assistant { content } => {
            let text = Joined(content);
            if !text.is_empty() {
                let item = TypedItem::Message {
                    role: "assistant",
                    content: [TextPart {
                        kind: "output_text",
                        text,
                    }],
                };
                serde_json::to_writer(part.item(), &item)?;
            }
            for (call_id, name, input) in tool_calls(content) {
                let item = TypedItem::FunctionCall {
                    call_id,
                    name,
                    arguments: Arguments(input),
                };
                serde_json::to_writer(part.item(), &item)?;
            }
            Ok(())
        }
        Message::Tool {
            tool_call_id,
            content,
            ..
        } => {
            let item = TypedItem::FunctionCallOutput {
                call_id: tool_call_id,
                output: Joined(content),
            };
            serde_json::to_writer(part.item(), &item)
        }
    }
}

/// The Responses API request body for `req`.
pub(super) fn responses_body(
    req: &InferRequest,
    opts: &OpenAiOptions,
) -> serde_json::Result<RequestBody> {
    with_prefix(req, |prefix: &mut Prefix<ResponsesShape>, messages| {
        prefix.check(ResponsesShape, messages.len());
        for m in &messages[prefix.covered..] {
            write_items(prefix, m)?;
        }
        prefix.covered = messages.len();

        let mut body = prefix.body_buffer();
        let head = ResponsesHead {
            model: &req.model,
            instructions: prefix.system.string(&req.system)?,
        };
        open_object(&mut body.out, &head)?;
        key(&mut body.out, "input");
        body.out.push(b'[');
        body.lend(prefix.done.lend_all());
        body.out.push(b']');
        let reasoning = Reasoning {
            effort: opts.reasoning_effort.as_deref(),
            summary: opts.thinking.then_some("auto"),
        };
        let tools = prefix
            .tools
            .member(&req.tools, false, |t| to_raw_value(&ResponsesTools(t)))?;
        let rest = ResponsesRest {
            max_output_tokens: req.max_tokens,
            tools,
            prompt_cache_key: req.prompt_cache_key.as_deref(),
            reasoning: (reasoning.effort.is_some() || reasoning.summary.is_some())
                .then_some(reasoning),
            text: opts
                .verbosity
                .as_deref()
                .map(|verbosity| TextOptions { verbosity }),
            store: opts.store,
            stream: true,
        };
        close_object(&mut body.out, &rest)?;
        let body = body.finish();
        prefix.wrote(&body);
        Ok(body)
    })
}
