//! What the views read: the [`Summary`] of one session and its rows.
//!
//! Plain data, filled by [`super::summary::Builder`] in one pass over a trace and serialised
//! as is for `--json`. Counters are always kept; per-turn rows only at the [`Detail`] asked for.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use super::lenient::Usage;

/// How much of a trace to keep beyond its counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Detail {
    /// Counters only (reports over huge traces).
    Totals,
    /// One row per turn with its calls, without tool inputs (diff).
    Turns,
    /// Turn rows with each call's input (show, steps).
    Full,
}

/// What one session's trace says, ready to print.
#[derive(Debug, Default, Serialize)]
pub struct Summary {
    /// The trace file read.
    pub path: PathBuf,
    /// `ses_…` id.
    pub session_id: String,
    /// Capsule name from `session_start`.
    pub capsule: Option<String>,
    /// Capsule version from `session_start`.
    pub capsule_version: Option<String>,
    /// Model from `session_start`.
    pub model: Option<String>,
    /// Turn cap (`None`: no cap).
    pub max_turns: Option<i64>,
    /// Tool names offered to the model at start.
    pub tools_declared: Vec<String>,
    /// `containment_declared` and `containment_achieved`, when the trace records them.
    pub containment: Option<Containment>,
    /// Parent session of a delegated child.
    pub spawned_by: Option<String>,
    /// Delegation that started this session, for a child.
    pub delegation_id: Option<String>,
    /// `session_end.exit_status`; `None` when the trace has no `session_end`.
    pub status: Option<String>,
    /// True when the trace has a `session_end`.
    pub ended: bool,
    /// `session_end.duration_ms`, or first-to-last timestamp for an unended trace.
    pub duration_ms: Option<u64>,
    /// Timestamp of the first line (Unix ms).
    pub first_timestamp: Option<i64>,
    /// Timestamp of the last line (Unix ms).
    pub last_timestamp: Option<i64>,
    /// Type of the last line read.
    pub last_event: Option<String>,
    /// Turns, tokens and calls (from `session_end` when present).
    pub totals: Totals,
    /// The same, counted from the lines.
    pub counted: Totals,
    /// Number of `task_start` lines.
    pub tasks: u64,
    /// Tool calls by outcome.
    pub tool_calls: CallStats,
    /// Tool calls by tool name.
    pub tools: BTreeMap<String, NameStats>,
    /// Shell calls.
    pub shell: ShellStats,
    /// Number of `skill_call` lines.
    pub skill_calls: u64,
    /// Inference calls made for hooks (not turns).
    pub hook_inferences: u64,
    /// Failed inference calls (recorded on their turn, not counted as turns).
    pub failed_inferences: u64,
    /// One row per turn (empty at [`Detail::Totals`]).
    pub turns: Vec<Turn>,
    /// Notes about events before the first turn.
    pub preamble: Vec<String>,
    /// `artifact_pulled` lines.
    pub pulls: Vec<Pull>,
    /// `tools_refreshed` lines.
    pub refreshes: Vec<Refresh>,
    /// `call_denied` lines.
    pub denials: Vec<Denial>,
    /// `inference_retry` lines.
    pub retries: Vec<Retry>,
    /// `task_failed` lines.
    pub failures: Vec<Failure>,
    /// Plans submitted with `submit-plan`.
    pub plans: Vec<Plan>,
    /// Delegations, in the order they started.
    pub delegations: Vec<Delegation>,
    /// Peer-plane events (`peer_*`) counted by `<event type> <outcome>`.
    pub peer: BTreeMap<String, u64>,
    /// True when a torn last line was skipped.
    pub torn_last_line: bool,
    /// True when a token count no provider reports (over [`ABSURD_TOKENS`]) was read: totals
    /// are then added up saturating, and the views say so.
    pub absurd_tokens: bool,
    /// Token counts the provider reported (`*_tokens_actual`), over the turns that carry them.
    pub provider_tokens: ProviderTokens,
    /// Model calls whose `input_tokens`/`output_tokens` are the runtime's estimate: no
    /// provider count beside them, or one that differs (upstream writes its estimate in
    /// `input_tokens` and the provider's count in `input_tokens_actual`).
    pub estimated_turns: u64,
    /// Every tool-call latency (ms), for percentiles; kept at [`Detail::Totals`] only.
    #[serde(skip)]
    pub latencies: Vec<u32>,
}

impl Summary {
    /// The fields naming a session and how it ended, first in every `--json` entry that lists
    /// sessions (`diff`, `report`).
    pub fn header_json(&self) -> serde_json::Map<String, serde_json::Value> {
        use serde_json::json;
        [
            ("session_id", json!(self.session_id)),
            ("path", json!(self.path)),
            ("capsule", json!(self.capsule)),
            ("version", json!(self.capsule_version)),
            ("status", json!(self.status)),
            ("ended", json!(self.ended)),
            ("duration_ms", json!(self.duration_ms)),
            ("totals", json!(self.totals)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }
}

/// A token count of one call above this is no provider's: a crafted or corrupt trace.
pub const ABSURD_TOKENS: u64 = 1_000_000_000_000;

/// What the provider itself counted, over the model calls that report it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ProviderTokens {
    /// Model calls with a provider count.
    pub turns: u64,
    /// Their input tokens, as the provider counted them.
    pub input_tokens: u64,
    /// Their output tokens, as the provider counted them.
    pub output_tokens: u64,
}

/// The note the views print for a trace with [`Summary::absurd_tokens`].
pub const ABSURD_TOKENS_NOTE: &str =
    "token counts above 10^12 (no provider reports such numbers) were read; totals are capped, not exact";

/// How a session's commands were contained, from its `session_start`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Containment {
    /// The floor asked for.
    pub declared: String,
    /// What the commands ran under.
    pub achieved: String,
}

/// Turn, token and call totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Counted turns.
    pub turns: u64,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// `tool_call` lines.
    pub tool_calls: u64,
    /// `shell` lines.
    pub shell_calls: u64,
}

/// Tool calls by outcome.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct CallStats {
    /// Calls.
    pub count: u64,
    /// Calls with `status: ok`.
    pub ok: u64,
    /// Other calls.
    pub error: u64,
    /// Sum of `duration_ms`.
    pub total_ms: u64,
    /// Largest `duration_ms`.
    pub max_ms: u64,
}

/// Calls to one tool.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct NameStats {
    /// Calls.
    pub calls: u64,
    /// Calls that did not end `ok`.
    pub errors: u64,
    /// Sum of `duration_ms`.
    pub total_ms: u64,
    /// Largest `duration_ms`.
    pub max_ms: u64,
    /// Sum of result sizes.
    pub output_bytes: u64,
}

/// Shell calls.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ShellStats {
    /// `shell` lines.
    pub count: u64,
    /// Lines with a non-zero exit code.
    pub failed: u64,
    /// Sum of `duration_ms`.
    pub total_ms: u64,
    /// Count per exit code.
    pub exit_codes: BTreeMap<i64, u64>,
}

/// One turn of the agent loop: an `inference` line and what followed it.
#[derive(Debug, Default, Serialize)]
pub struct Turn {
    /// Which task the turn belongs to (1-based count of `task_start` lines so far).
    pub task: u64,
    /// `turn` as written (zero-based, per task).
    pub turn: i64,
    /// `tool_call|end_turn|text|error`.
    pub decision: String,
    /// Tool the model chose, if any.
    pub tool_name: Option<String>,
    /// Input tokens of the call.
    pub input_tokens: Option<u64>,
    /// Output tokens of the call.
    pub output_tokens: Option<u64>,
    /// The provider's input count, when it reported one (`input_tokens_actual`).
    pub input_tokens_actual: Option<u64>,
    /// The provider's output count, when it reported one (`output_tokens_actual`).
    pub output_tokens_actual: Option<u64>,
    /// Failure code of a failed call.
    pub error_code: Option<String>,
    /// HTTP status of a failed call.
    pub provider_status: Option<i64>,
    /// Tool calls made on this turn.
    pub calls: Vec<Call>,
    /// Events written just before this turn's inference (retries, tool refreshes), as notes.
    pub before: Vec<String>,
    /// Other events on this turn, as one-line notes (pulls, refusals, delegations, …).
    pub notes: Vec<String>,
}

/// One tool call (a `tool_call` line, with its `shell` line's exit code).
#[derive(Debug, Default, Serialize)]
pub struct Call {
    /// Tool name.
    pub tool: String,
    /// `ok|error`.
    pub status: String,
    /// Wall time.
    pub duration_ms: Option<u64>,
    /// Input size.
    pub input_bytes: Option<u64>,
    /// Result size.
    pub output_bytes: Option<u64>,
    /// Exit code, for shell tools.
    pub exit_code: Option<i64>,
    /// The runtime's failure text.
    pub error: Option<String>,
    /// The input (kept at [`Detail::Full`]).
    pub input: Option<serde_json::Value>,
}

/// An artifact the session pulled at runtime.
#[derive(Debug, Default, Serialize)]
pub struct Pull {
    /// Full name.
    pub name: String,
    /// Version.
    pub version: String,
    /// `tool|skill`.
    pub runtime: String,
    /// `runtime|operator`.
    pub origin: String,
    /// `untrusted|trusted`.
    pub trust: String,
    /// Where it came from.
    pub fetched_from: Option<String>,
    /// Owner id of the scope.
    pub owner_id: Option<i64>,
}

/// A change of the tool list.
#[derive(Debug, Default, Serialize)]
pub struct Refresh {
    /// Turn whose inference first saw the new list.
    pub turn: Option<i64>,
    /// `agent|compaction|immediate`.
    pub trigger: String,
    /// Tools added.
    pub added: Vec<String>,
    /// Tools removed.
    pub removed: Vec<String>,
}

/// A call refused by a policy hook.
#[derive(Debug, Default, Serialize)]
pub struct Denial {
    /// Turn.
    pub turn: Option<i64>,
    /// `on-tool-call|on-shell`.
    pub event: Option<String>,
    /// Hook that denied.
    pub hook_name: Option<String>,
    /// What was denied.
    pub target: Option<String>,
    /// Why.
    pub reason: Option<String>,
}

/// A retried inference call.
#[derive(Debug, Default, Serialize)]
pub struct Retry {
    /// Turn.
    pub turn: Option<i64>,
    /// 1-based attempt.
    pub attempt: Option<i64>,
    /// Retry budget.
    pub max_retries: Option<i64>,
    /// `status|connection|driver`.
    pub reason: Option<String>,
    /// HTTP status.
    pub provider_status: Option<i64>,
    /// Backoff before the next attempt.
    pub delay_ms: Option<i64>,
    /// What went wrong.
    pub error: Option<String>,
}

/// A task that failed.
#[derive(Debug, Default, Serialize)]
pub struct Failure {
    /// Turn.
    pub turn: Option<i64>,
    /// Failure cause.
    pub cause: Option<String>,
    /// Failure text.
    pub reason: Option<String>,
}

/// A plan submitted with `submit-plan`.
#[derive(Debug, Default, Serialize)]
pub struct Plan {
    /// Plan id.
    pub plan_id: String,
    /// Steps declared.
    pub step_count: Option<i64>,
    /// Steps that finished, in order.
    pub steps: Vec<PlanStep>,
    /// `completed|failed`, or `None` while running.
    pub outcome: Option<String>,
}

/// One finished plan step.
#[derive(Debug, Default, Serialize)]
pub struct PlanStep {
    /// Step id.
    pub step_id: String,
    /// `tool|shell|capsule`.
    pub kind: Option<String>,
    /// `success|failed|skipped`.
    pub status: Option<String>,
    /// Wall time.
    pub duration_ms: Option<u64>,
}

/// One delegation as the parent recorded it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Delegation {
    /// `dlg_…` id (`None` for a refused delegation).
    pub delegation_id: Option<String>,
    /// Delegated capsule.
    pub capsule: String,
    /// Its version.
    pub version: Option<String>,
    /// The child's session id.
    pub child_session_id: Option<String>,
    /// The child's work folder.
    pub child_workdir: Option<String>,
    /// The child's records folder.
    pub child_records_dir: Option<String>,
    /// `ok|error|crashed|terminated|refused|…`; `None` while in flight.
    pub outcome: Option<String>,
    /// Why it ended so.
    pub reason: Option<String>,
    /// Wall time.
    pub duration_ms: Option<u64>,
    /// Token usage the parent recorded.
    pub usage: Option<Usage>,
    /// Turn of the `delegate-task` call.
    pub turn: Option<i64>,
}
