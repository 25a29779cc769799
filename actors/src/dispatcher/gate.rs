//! The policy gate: what decides on a call before it runs.

use super::*;

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

/// Decides on every call before it runs (policy hooks bound `on-tool-call` with
/// `commit_policy: deny`). Implementations fail closed: any error is a refusal.
#[async_trait::async_trait]
pub trait CallGate: Send + Sync {
    /// `None` lets the call proceed; `Some` refuses it.
    async fn decide(&self, call: &CallRequest, turn: u32) -> Option<Denied>;
}
