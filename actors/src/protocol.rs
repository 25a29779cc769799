//! The payloads the Session and its Dispatcher exchange about one tool call: the request, its
//! answer, and what else the call changed. They live apart from both actors (and from the
//! policy gate, which reads a request too), so none of them imports another for a data type.

use serde_json::Value;

use crate::delegation::StartedChild;
use crate::registry::Pulled;
use crate::tool::{ExecStatus, ShellFacts};

/// One call the Session wants run.
#[derive(Clone, Debug)]
pub struct CallRequest {
    /// Position of the call in its turn (0-based).
    pub seq: usize,
    /// The turn the call belongs to.
    pub turn: u32,
    /// The provider's call id.
    pub id: String,
    /// The tool name the model used.
    pub name: String,
    /// The model's input.
    pub input: Value,
    /// The trace event the call hangs off (its turn's `inference` line).
    pub parent_event: String,
}

/// Which trace line a call produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallKind {
    /// `tool_call` (then `shell` when the call ran a command).
    Tool,
    /// `skill_call`.
    Skill,
}

/// What happened to a call.
#[derive(Clone, Debug, PartialEq)]
pub enum CallResult {
    /// The tool ran; `text` is what the model reads (fenced, note after the fence).
    Ran {
        /// Passed or failed.
        status: ExecStatus,
        /// Model-facing text.
        text: String,
        /// Bytes of the unfenced result.
        output_bytes: u64,
        /// Present for shell commands.
        shell: Option<ShellFacts>,
    },
    /// The runtime refused or could not run the call; `text` is its own words, unfenced.
    Refused {
        /// The refusal sentence.
        text: String,
    },
}

/// Something a call changed in the session beyond its result text, for the Session to record.
#[derive(Clone, Debug)]
pub enum Effect {
    /// `delegate-task` started a child.
    DelegationStarted {
        /// The child.
        started: StartedChild,
        /// Full capsule name.
        capsule: String,
        /// Version.
        version: String,
    },
    /// A policy hook refused the call; nothing ran.
    CallDenied(Denied),
    /// A pull added an artifact (already in the session's inventory): the Session records it
    /// with an `artifact_pulled` line. A removal needs no line of its own.
    Pulled(Box<Pulled>),
    /// `delegate-task` was refused; nothing started.
    DelegationRefused {
        /// Full capsule name (or what the model asked for).
        capsule: String,
        /// Version asked for.
        version: String,
        /// The refusal sentence.
        reason: String,
    },
}

/// The Dispatcher's answer to one [`CallRequest`].
#[derive(Clone, Debug)]
pub struct Dispatched {
    /// The request it answers.
    pub request: CallRequest,
    /// Which trace line it produces.
    pub kind: CallKind,
    /// The outcome.
    pub result: CallResult,
    /// Wall time of the call.
    pub duration_ms: u64,
    /// What else the call changed.
    pub effect: Option<Effect>,
}

impl Dispatched {
    /// The text the model reads.
    pub fn text(&self) -> &str {
        match &self.result {
            CallResult::Ran { text, .. } | CallResult::Refused { text } => text,
        }
    }

    /// True when the model sees `is_error: true`.
    pub fn is_error(&self) -> bool {
        match &self.result {
            CallResult::Ran { status, .. } => *status != ExecStatus::Passed,
            CallResult::Refused { .. } => true,
        }
    }
}

/// A policy hook's refusal of one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denied {
    /// The hook that refused.
    pub hook: String,
    /// `on-tool-call` or `on-shell`.
    pub event: String,
    /// The tool name, or the resolved binary for shell calls.
    pub target: String,
    /// Its reason (or the runtime's, when the hook failed: fail closed).
    pub reason: String,
}
