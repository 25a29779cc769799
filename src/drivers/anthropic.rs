//! `murmur/driver-anthropic`: the Anthropic Messages API (`POST {endpoint}/v1/messages`).
//!
//! Translation choices (the neutral shapes are the kernel's, see `mur_actors::model`):
//! - the system prompt is one `text` block marked for the prompt cache, omitted when blank;
//! - tools go out as `{name, description, input_schema}`, the last one cache-marked;
//! - consecutive `tool` messages become one `user` message of `tool_result` blocks (the API wants
//!   every result of a turn together), and a failed or refused call carries `is_error: true`;
//! - `thinking` blocks go back only when `driver.config.thinking` is `enabled` and they carry a
//!   signature (the API refuses unsigned ones);
//! - a `tool_call` whose input is not an object (the model sent malformed JSON earlier, kept as a
//!   string) is sent back as `{"raw_arguments": <string>}`, since the API wants an object;
//! - the request always asks to stream; a plain JSON answer is accepted too.
//!
//! `driver.config` keys: `prompt_cache` (`enabled`/`disabled` or a bool; default enabled),
//! `thinking` (`enabled`/`disabled`), `thinking_budget_tokens` (default 1024, kept below
//! `max_tokens`), `beta_features` (a string or list, sent as `anthropic-beta`). Any other key is
//! refused when the driver is built, so a typo does not silently change nothing.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use mur_actors::model::{
    ContentBlock, InferError, InferReply, InferRequest, Message, ModelDriver, RetrySink, ToolSpec,
};
use serde_json::{json, Map, Value};

use super::anthropic_reply::{parse_message, AnthropicStream};
use super::body::read_reply;
use super::config::{HttpDriverConfig, RetryPolicy};
use super::http::{AuthStyle, Transport};
use super::options::Options;
use super::retry::with_retries;

/// The `anthropic-version` header value.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Options read from `inference.driver.config`.
#[derive(Clone, Debug)]
struct AnthropicOptions {
    prompt_cache: bool,
    thinking: bool,
    thinking_budget: u32,
    beta: Option<String>,
}

impl AnthropicOptions {
    fn parse(artifact: &str, config: Option<&Value>) -> Result<AnthropicOptions, String> {
        let opts = Options::new(
            artifact,
            config,
            &[
                "prompt_cache",
                "thinking",
                "thinking_budget_tokens",
                "beta_features",
            ],
        )?;
        Ok(AnthropicOptions {
            prompt_cache: opts.switch("prompt_cache")?.unwrap_or(true),
            thinking: opts.switch("thinking")?.unwrap_or(false),
            thinking_budget: opts.positive("thinking_budget_tokens")?.unwrap_or(1024),
            beta: opts.string_or_list("beta_features")?,
        })
    }
}

/// The Anthropic driver. Built by [`super::anthropic`].
pub struct AnthropicDriver {
    name: String,
    url: String,
    transport: Transport,
    retry: RetryPolicy,
    options: AnthropicOptions,
}

impl std::fmt::Debug for AnthropicDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicDriver")
            .field("name", &self.name)
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl AnthropicDriver {
    /// Builds the driver; the error names the artifact and what is wrong.
    pub fn new(cfg: &HttpDriverConfig) -> Result<AnthropicDriver, String> {
        let options = AnthropicOptions::parse(&cfg.artifact, cfg.driver_config.as_ref())?;
        let mut extra = vec![("anthropic-version", ANTHROPIC_VERSION.to_string())];
        if let Some(beta) = &options.beta {
            extra.push(("anthropic-beta", beta.clone()));
        }
        let transport = Transport::new(cfg, AuthStyle::XApiKey, &extra)?;
        Ok(AnthropicDriver {
            name: cfg.artifact.clone(),
            url: transport.url("/v1/messages"),
            transport,
            retry: cfg.retry,
            options,
        })
    }

    /// The Messages API request body for a neutral request.
    pub fn request_body(&self, req: &InferRequest) -> Value {
        let cache = self.options.prompt_cache;
        let mut body = Map::new();
        body.insert("model".into(), json!(req.model));
        body.insert("max_tokens".into(), json!(req.max_tokens));
        let system = req.system.trim();
        if !system.is_empty() {
            let mut block = json!({"type": "text", "text": system});
            if cache {
                block["cache_control"] = json!({"type": "ephemeral"});
            }
            body.insert("system".into(), json!([block]));
        }
        let mut messages = self.messages(&req.messages);
        if cache {
            mark_last_cacheable(&mut messages);
        }
        body.insert("messages".into(), Value::Array(messages));
        if !req.tools.is_empty() {
            let mut tools: Vec<Value> = req.tools.iter().map(tool).collect();
            if cache {
                if let Some(last) = tools.last_mut() {
                    last["cache_control"] = json!({"type": "ephemeral"});
                }
            }
            body.insert("tools".into(), Value::Array(tools));
        }
        if self.options.thinking {
            let budget = self
                .options
                .thinking_budget
                .min(req.max_tokens.saturating_sub(1))
                .max(1);
            body.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": budget}),
            );
        }
        body.insert("stream".into(), json!(true));
        Value::Object(body)
    }

    fn messages(&self, messages: &[Message]) -> Vec<Value> {
        let mut out: Vec<Value> = Vec::new();
        let mut results: Vec<Value> = Vec::new();
        for m in messages {
            let (role, content) = match m {
                Message::Tool {
                    tool_call_id,
                    is_error,
                    content,
                } => {
                    results.push(tool_result(tool_call_id, *is_error, content));
                    continue;
                }
                Message::User { content } => ("user", content),
                Message::Assistant { content } => ("assistant", content),
            };
            if !results.is_empty() {
                out.push(json!({"role": "user", "content": std::mem::take(&mut results)}));
            }
            let blocks: Vec<Value> = content.iter().filter_map(|b| self.block(b)).collect();
            if !blocks.is_empty() {
                out.push(json!({"role": role, "content": blocks}));
            }
        }
        if !results.is_empty() {
            out.push(json!({"role": "user", "content": results}));
        }
        out
    }

    fn block(&self, block: &ContentBlock) -> Option<Value> {
        match block {
            ContentBlock::Text { text } if text.is_empty() => None,
            ContentBlock::Text { text } => Some(json!({"type": "text", "text": text})),
            ContentBlock::ToolCall { id, name, input } => {
                let input = match input {
                    Value::Object(_) => input.clone(),
                    other => json!({"raw_arguments": other}),
                };
                Some(json!({"type": "tool_use", "id": id, "name": name, "input": input}))
            }
            ContentBlock::Thinking {
                text,
                signature: Some(sig),
            } if self.options.thinking => {
                Some(json!({"type": "thinking", "thinking": text, "signature": sig}))
            }
            ContentBlock::Thinking { .. } => None,
        }
    }
}

fn tool(spec: &ToolSpec) -> Value {
    let mut t = Map::new();
    t.insert("name".into(), json!(spec.name));
    if let Some(d) = spec.description.as_ref().filter(|d| !d.is_empty()) {
        t.insert("description".into(), json!(d));
    }
    t.insert("input_schema".into(), spec.parameters.clone());
    Value::Object(t)
}

fn tool_result(id: &str, is_error: bool, content: &[ContentBlock]) -> Value {
    let texts: Vec<Value> = content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } if !text.is_empty() => {
                Some(json!({"type": "text", "text": text}))
            }
            _ => None,
        })
        .collect();
    let mut r = json!({"type": "tool_result", "tool_use_id": id});
    if !texts.is_empty() {
        r["content"] = Value::Array(texts);
    }
    if is_error {
        r["is_error"] = json!(true);
    }
    r
}

/// Marks the last text/tool_use/tool_result block of the conversation for the prompt cache.
fn mark_last_cacheable(messages: &mut [Value]) {
    for m in messages.iter_mut().rev() {
        let Some(blocks) = m.get_mut("content").and_then(Value::as_array_mut) else {
            continue;
        };
        for b in blocks.iter_mut().rev() {
            let kind = b.get("type").and_then(Value::as_str).unwrap_or("");
            if matches!(kind, "text" | "tool_use" | "tool_result" | "image") {
                b["cache_control"] = json!({"type": "ephemeral"});
                return;
            }
        }
    }
}

#[async_trait]
impl ModelDriver for AnthropicDriver {
    fn name(&self) -> &str {
        &self.name
    }

    async fn infer(
        &self,
        request: &InferRequest,
        retries: &dyn RetrySink,
    ) -> Result<InferReply, InferError> {
        let body = Bytes::from(self.request_body(request).to_string());
        with_retries(&self.retry, retries, |_| {
            let body = body.clone();
            async move {
                let attempt = async {
                    let resp = self.transport.post(&self.url, body).await?;
                    let stream = AnthropicStream::new(&self.url);
                    read_reply(&self.transport, &self.url, resp, stream, |v| {
                        parse_message(&self.url, v)
                    })
                    .await
                };
                attempt.await.map_err(|f| self.transport.redact_failure(f))
            }
        })
        .await
    }
}

/// Builds `murmur/driver-anthropic` as a kernel driver.
pub fn build(cfg: &HttpDriverConfig) -> Result<Arc<dyn ModelDriver>, String> {
    Ok(Arc::new(AnthropicDriver::new(cfg)?))
}
