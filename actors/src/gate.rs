//! The policy gate: the seam through which something outside the kernel (policy hooks, in the
//! `mur` crate) decides on every call before it runs, as [`crate::model`] is the seam for models
//! and [`crate::tool`] for executors.

use crate::protocol::{CallRequest, Denied};

/// Decides on every call before it runs (policy hooks bound `on-tool-call` with
/// `commit_policy: deny`). Implementations fail closed: any error is a refusal.
#[async_trait::async_trait]
pub trait CallGate: Send + Sync {
    /// `None` lets the call proceed; `Some` refuses it.
    async fn decide(&self, call: &CallRequest, turn: u32) -> Option<Denied>;
}
