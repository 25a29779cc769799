//! A session that carries on from a recorded one: a replay (`mur replay`) or a resume
//! (`mur resume`).
//!
//! The kernel does not read traces. The `mur` crate rebuilds what a recorded session reached
//! (its conversation, its counters, the calls it had not finished) and hands it over as a
//! [`Continuation`] inside the [`SessionSpec`](crate::spec::SessionSpec). A fresh session has
//! the default: no link, no seed, no playback.

use std::sync::Arc;

use serde_json::Value;

use crate::model::Message;
use crate::protocol::{CallRequest, Dispatched};
use crate::session::Totals;

/// How a session relates to a recorded one.
#[derive(Clone, Default)]
pub struct Continuation {
    /// `session_start.replay_of`: the session this one replays.
    pub replay_of: Option<String>,
    /// `session_start.resumed_from`: the session this one continues.
    pub resumed_from: Option<String>,
    /// Where the conversation starts instead of the bare task.
    pub seed: Option<Arc<Seed>>,
    /// Answers every tool call from the recording instead of running it.
    pub playback: Option<Arc<dyn ToolPlayback>>,
    /// A replay's outcome schedule: entry `k` is how many delegation outcomes the recorded
    /// model had read before its model call `k`. The session delivers no more than that before
    /// call `k`, and waits for outcomes still running until it has that many, so outcomes land
    /// where the recording has them whatever the timing. Past its end: no limit.
    pub outcomes_before: Option<Vec<u32>>,
}

/// The state a resumed session starts from.
#[derive(Clone, Debug, Default)]
pub struct Seed {
    /// The whole conversation so far, the task first.
    pub messages: Vec<Message>,
    /// Counters of the recorded session: the new `session_end` adds its own to them.
    pub totals: Totals,
    /// Calls to make before the next model call: tool calls of the last turn that have no
    /// recorded result, then delegations that were still running.
    pub pending: Vec<SeedCall>,
    /// The model had ended its turn and the session was waiting for delegations: after the
    /// seed's calls it waits again (spending nothing) instead of calling the model.
    pub waiting: bool,
}

/// One call a resumed session makes before its next model call.
#[derive(Clone, Debug)]
pub struct SeedCall {
    /// The provider's call id (for a re-delegation, an id the runtime made up).
    pub id: String,
    /// The tool name.
    pub name: String,
    /// The input.
    pub input: Value,
    /// The turn it belongs to.
    pub turn: u32,
    /// Set when this re-delegates a delegation that was still running (`dlg_…` of the old
    /// one): its result is not a tool message of the model's (the model already holds the
    /// old one's) but a note, and the trace gets a `delegation_restarted` line.
    pub redelegates: Option<String>,
}

/// Plays recorded tool results back (`mur replay --tools recorded`).
pub trait ToolPlayback: Send + Sync {
    /// The recorded answer to `call`, as the Dispatcher would have produced it. A call the
    /// recording does not hold is answered with a refusal naming it.
    fn answer(&self, call: CallRequest) -> Dispatched;

    /// The user messages the runtime injected before model call `turn` (delegation outcomes):
    /// with no child running, the recording says what the model was told.
    fn injected(&self, turn: u32) -> Vec<String> {
        let _ = turn;
        Vec::new()
    }
}
