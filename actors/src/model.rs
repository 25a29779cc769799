//! The model seam: the neutral conversation types and the [`ModelDriver`] trait.
//!
//! Every driver (the scripted one, Anthropic, OpenAI) translates between these neutral shapes and
//! its provider's wire format. The Session never sees a provider format, so the turn loop is the
//! same whatever answers it. The shapes follow upstream Murmur's neutral driver contract: messages
//! with `text` / `tool_call` / `thinking` blocks, tool results as `role: tool` messages, and a
//! reply with a `stop_reason` and optional `usage`.

use std::any::Any;
use std::sync::{Arc, Mutex, TryLockError};

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

/// The conversation of one session: messages that only ever grow at the end, shared cheaply,
/// with a slot where a model driver keeps its wire encoding of them between calls.
///
/// Why the slot lives here and not in the driver: a driver may serve many sessions at once
/// (`Arc<dyn ModelDriver>` shared by children), and a cache inside it would have to tell their
/// histories apart and evict them. Kept inside the history's own allocation, an encoding can
/// only ever describe *these* messages, and it is freed with them.
///
/// Why the encoding can be trusted: the only way to change a `History` is [`History::push`].
/// When the history is not shared, the message is appended in place (the encoded prefix stays
/// exact); when it is shared, the pusher gets a fresh copy with an empty slot, and every other
/// holder keeps the unchanged messages it had. So the messages a slot sits next to never
/// change, they only grow at the end. There is deliberately no way to edit or remove a
/// message: a future compaction must build a new `History` (with an empty slot).
///
/// `Clone` is a reference count; a shared history costs no copy until someone pushes to it.
#[derive(Clone, Default)]
pub struct History(Arc<HistoryInner>);

#[derive(Default)]
struct HistoryInner {
    messages: Vec<Message>,
    /// One driver's encoding state (its type says whose); see [`History::with_encoding`].
    encoding: Mutex<Option<Box<dyn Any + Send>>>,
}

impl History {
    /// Appends a message. In place when this is the only handle to the history; otherwise the
    /// messages are copied first (and the copy starts with an empty encoding slot), so other
    /// holders never see a change.
    pub fn push(&mut self, message: Message) {
        match Arc::get_mut(&mut self.0) {
            Some(inner) => inner.messages.push(message),
            None => {
                let mut messages = Vec::with_capacity(self.0.messages.len() + 1);
                messages.extend_from_slice(&self.0.messages);
                messages.push(message);
                self.0 = Arc::new(HistoryInner {
                    messages,
                    encoding: Mutex::new(None),
                });
            }
        }
    }

    /// Runs `encode` with the messages and the encoding state of type `T` kept with them.
    ///
    /// The state is whatever the last call with the same `T` left (or `T::default()` the first
    /// time, or after a call with another type replaced it: two encoders sharing one history
    /// take turns, correctly but without reuse). Since the messages only grow at the end, a
    /// state that records "the first `n` messages encode to these bytes" stays true. If another
    /// call holds the slot at that moment, or one panicked inside it, `encode` gets a fresh
    /// default state instead (never a half-written one): the slot is a cache, never a source of
    /// truth, and the lock is never waited on.
    pub fn with_encoding<T, R>(&self, encode: impl FnOnce(&mut T, &[Message]) -> R) -> R
    where
        T: Any + Send + Default,
    {
        let messages = &self.0.messages[..];
        let mut slot = match self.0.encoding.try_lock() {
            Ok(slot) => slot,
            Err(TryLockError::Poisoned(poisoned)) => {
                let mut slot = poisoned.into_inner();
                *slot = None;
                self.0.encoding.clear_poison();
                slot
            }
            Err(TryLockError::WouldBlock) => return encode(&mut T::default(), messages),
        };
        if !slot.as_ref().is_some_and(|s| s.is::<T>()) {
            *slot = Some(Box::new(T::default()));
        }
        match slot.as_mut().and_then(|s| s.downcast_mut::<T>()) {
            Some(state) => encode(state, messages),
            None => encode(&mut T::default(), messages),
        }
    }
}

impl From<Vec<Message>> for History {
    fn from(messages: Vec<Message>) -> History {
        History(Arc::new(HistoryInner {
            messages,
            encoding: Mutex::new(None),
        }))
    }
}

impl std::ops::Deref for History {
    type Target = [Message];

    fn deref(&self) -> &[Message] {
        &self.0.messages
    }
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.messages.iter()).finish()
    }
}

impl Serialize for History {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.messages.serialize(serializer)
    }
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
    /// The conversation so far. Shared so a turn costs no copy of the history, and carrying
    /// the driver's encoding of it so a turn costs no re-encoding either ([`History`]).
    pub messages: History,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An encoding state that records which messages it saw.
    #[derive(Default)]
    struct Seen(Vec<String>);

    fn texts(messages: &[Message]) -> Vec<String> {
        messages.iter().map(|m| joined_text(m.content())).collect()
    }

    /// Records the messages in the slot; returns what the slot held before.
    fn record(h: &History) -> Vec<String> {
        h.with_encoding(|seen: &mut Seen, messages| std::mem::replace(&mut seen.0, texts(messages)))
    }

    #[test]
    fn a_push_to_an_unshared_history_keeps_its_slot() {
        let mut h = History::from(vec![Message::user_text("a")]);
        assert!(record(&h).is_empty());
        h.push(Message::user_text("b"));
        assert_eq!(record(&h), ["a"]);
        assert_eq!(texts(&h), ["a", "b"]);
    }

    #[test]
    fn a_push_to_a_shared_history_copies_it_with_an_empty_slot() {
        let mut h = History::from(vec![Message::user_text("a")]);
        record(&h);
        let other = h.clone();
        h.push(Message::user_text("b"));
        assert_eq!(texts(&other), ["a"], "the other holder sees no change");
        assert_eq!(record(&other), ["a"], "and keeps its slot");
        assert!(record(&h).is_empty(), "the copy starts with an empty slot");
        assert_eq!(texts(&h), ["a", "b"]);
    }

    #[test]
    fn a_slot_of_another_type_is_replaced() {
        let h = History::from(vec![Message::user_text("a")]);
        record(&h);
        h.with_encoding(|n: &mut u32, _| *n += 1);
        assert!(record(&h).is_empty());
    }

    #[test]
    fn a_busy_slot_gives_a_fresh_state_and_a_panic_clears_it() {
        let h = History::from(vec![Message::user_text("a")]);
        record(&h);
        // Reentered while held: the inner call gets a fresh state, never waits.
        let inner = h.with_encoding(|_: &mut Seen, _| record(&h));
        assert!(inner.is_empty());
        assert_eq!(record(&h), ["a"]);
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            h.with_encoding(|seen: &mut Seen, _| {
                seen.0.push("half-written".into());
                panic!("encoder failed");
            })
        }));
        assert!(panicked.is_err());
        assert!(record(&h).is_empty(), "a slot a panic left is forgotten");
        assert_eq!(record(&h), ["a"]);
    }

    #[test]
    fn a_history_serializes_as_its_messages() {
        let h = History::from(vec![Message::user_text("a")]);
        assert_eq!(
            serde_json::to_string(&h).unwrap(),
            serde_json::to_string(&*h.0.messages).unwrap()
        );
    }
}
