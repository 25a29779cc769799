//! The model seam: the neutral conversation types and the [`ModelDriver`] trait.
//!
//! Every driver (the scripted one, Anthropic, OpenAI) translates between these neutral shapes and
//! its provider's wire format. The Session never sees a provider format, so the turn loop is the
//! same whatever answers it. The shapes follow upstream Murmur's neutral driver contract: messages
//! with `text` / `tool_call` / `thinking` blocks, tool results as `role: tool` messages, and a
//! reply with a `stop_reason` and optional `usage`.

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One block of message content.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// The model asks for one tool call.
    ToolCall {
        /// Provider's call id, echoed back in the tool result.
        id: String,
        /// The tool name the model saw.
        name: String,
        /// The arguments, a JSON object (or whatever the model sent).
        input: Value,
    },
    /// Reasoning text some providers return; sent back verbatim to the same driver.
    Thinking {
        /// The reasoning text.
        text: String,
        /// Provider signature that must accompany the block when sent back.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text { text: text.into() }
    }
}

/// One message of the conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    /// The task, a continuation, or outcomes the runtime injects.
    User {
        /// The content blocks.
        content: Vec<ContentBlock>,
    },
    /// What the model answered, stored as the driver returned it.
    Assistant {
        /// The content blocks.
        content: Vec<ContentBlock>,
    },
    /// The result of one tool call.
    Tool {
        /// The `id` of the `tool_call` block this answers.
        tool_call_id: String,
        /// True when the call failed or was refused.
        is_error: bool,
        /// The result text (fenced when the tool ran).
        content: Vec<ContentBlock>,
    },
}

impl Message {
    /// A user message holding one text block.
    pub fn user_text(text: impl Into<String>) -> Self {
        Message::User {
            content: vec![ContentBlock::text(text)],
        }
    }

    /// The message's blocks, whatever its role.
    pub fn content(&self) -> &[ContentBlock] {
        match self {
            Message::User { content } | Message::Assistant { content } => content,
            Message::Tool { content, .. } => content,
        }
    }
}

/// The text blocks of `content` joined with `\n` (tool calls and results left out): what a
/// model's answer says, or what a driver without block support sends.
pub fn joined_text(content: &[ContentBlock]) -> String {
    content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One entry of the tool array offered to the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The bare tool name.
    pub name: String,
    /// What the tool does; omitted when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the input object.
    pub parameters: Value,
}

/// One inference call, in neutral form.
#[derive(Clone, Debug, Serialize)]
pub struct InferRequest {
    /// `inference.model`.
    pub model: String,
    /// Output cap for this call.
    pub max_tokens: u32,
    /// The whole system prompt (runtime block + operator prompt). Shared: the same every turn.
    pub system: Arc<str>,
    /// The conversation so far. Shared so a turn costs no copy of the history.
    pub messages: Arc<Vec<Message>>,
    /// The held tool array. Shared: byte-identical between refreshes.
    pub tools: Arc<Vec<ToolSpec>>,
    /// Key for provider prompt caches (`<name>:<version>[:<context>]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_cache_key: Option<String>,
}

/// Why the model stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The model answered; the task is done.
    EndTurn,
    /// The model asked for tool calls.
    ToolCall,
    /// The output cap cut the answer; still a completion.
    MaxTokens,
    /// Anything else the provider said, verbatim; the task fails `malformed_response`.
    Other(String),
}

impl StopReason {
    /// The neutral spelling written to the trace's `stop_reason`.
    pub fn as_str(&self) -> &str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::ToolCall => "tool_call",
            StopReason::MaxTokens => "max_tokens",
            StopReason::Other(s) => s,
        }
    }
}

/// Token counts the provider reported. Absent means "not reported", never zero.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens billed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Completion tokens billed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Prompt tokens read from a cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    /// Prompt tokens written to a cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// Reasoning tokens (a subset of output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_tokens: Option<u64>,
}

/// A successful inference reply.
#[derive(Clone, Debug, PartialEq)]
pub struct InferReply {
    /// Why the model stopped.
    pub stop_reason: StopReason,
    /// The blocks, stored verbatim as the assistant message.
    pub content: Vec<ContentBlock>,
    /// What the provider reported.
    pub usage: Usage,
    /// How many HTTP attempts the call took (1 without retries).
    pub attempts: u32,
}

/// Why an inference call failed; maps onto `task_failed.cause` and `inference.error_code`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InferErrorKind {
    /// 401/403: the key was rejected. Never retried.
    CredentialRejected,
    /// The provider or transport failed (after retries).
    Driver,
    /// The reply could not be understood.
    Malformed,
}

impl InferErrorKind {
    /// The trace spelling (`credential_rejected`, `driver_error`, `malformed_response`).
    pub fn as_str(self) -> &'static str {
        match self {
            InferErrorKind::CredentialRejected => "credential_rejected",
            InferErrorKind::Driver => "driver_error",
            InferErrorKind::Malformed => "malformed_response",
        }
    }
}

/// A failed inference call. The message never contains a credential.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct InferError {
    /// The class of failure.
    pub kind: InferErrorKind,
    /// A sentence for the trace and the user.
    pub message: String,
    /// The last HTTP status seen, if any.
    pub provider_status: Option<u16>,
    /// How many attempts were made.
    pub attempts: u32,
    /// Why retrying stopped (`max_retries`, `retry_after`), when the last failure was transient.
    pub retry_stopped: Option<String>,
}

impl InferError {
    /// A failure of the given kind with no HTTP detail.
    pub fn new(kind: InferErrorKind, message: impl Into<String>) -> Self {
        InferError {
            kind,
            message: message.into(),
            provider_status: None,
            attempts: 1,
            retry_stopped: None,
        }
    }
}

/// One retry a driver is about to make; the Session writes it as an `inference_retry` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryNote {
    /// The attempt that failed, 1-based.
    pub attempt: u32,
    /// `inference.retry.max_retries`.
    pub max_retries: u32,
    /// `status`, `connection` or `driver`.
    pub reason: &'static str,
    /// HTTP status of the failed attempt.
    pub provider_status: Option<u16>,
    /// What went wrong (no secrets).
    pub error: String,
    /// How long the driver waits before the next attempt.
    pub delay_ms: u64,
    /// What the provider asked for, when it did.
    pub retry_after_ms: Option<u64>,
}

/// Where a driver reports retries while a call is in flight.
pub trait RetrySink: Send + Sync {
    /// Called once per retry, before the wait.
    fn retrying(&self, note: RetryNote);
}

/// A retry sink that drops every note.
pub struct NoRetrySink;

impl RetrySink for NoRetrySink {
    fn retrying(&self, _note: RetryNote) {}
}

/// A model driver: turns one neutral request into one neutral reply.
///
/// Implementations retry transient failures themselves (reporting each through `retries`) and
/// must be cancel-safe: the Session drops the future when the task is canceled.
#[async_trait]
pub trait ModelDriver: Send + Sync {
    /// The driver's name for `mur run -v` (`murmur/driver-anthropic`, `mur/driver-script`).
    fn name(&self) -> &str;

    /// Make one inference call.
    async fn infer(
        &self,
        request: &InferRequest,
        retries: &dyn RetrySink,
    ) -> Result<InferReply, InferError>;
}
