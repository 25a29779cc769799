//! The typed view of one trace line.
//!
//! A trace line is a flat JSON object: the envelope (`event_type`, `event_id`, `parent_id`,
//! `session_id`, `timestamp`) and the fields of its event type. Rather than one Rust type per
//! event, [`Event`] is a single flat record of every field the views read, each optional and
//! each lenient (a field of an unexpected shape reads as absent). Unknown keys are skipped by
//! serde without being stored, so a line costs only what the views use.

use serde::Deserialize;

use super::lenient::{self, Usage};

/// One trace line, as far as the `mur trace` views need it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Event {
    /// The event discriminator (`session_start`, `inference`, `tool_call`, …).
    #[serde(deserialize_with = "lenient::string")]
    pub event_type: Option<String>,
    /// `ses_…` id of the session that wrote the line.
    #[serde(deserialize_with = "lenient::string")]
    pub session_id: Option<String>,
    /// Unix milliseconds.
    #[serde(deserialize_with = "lenient::int")]
    pub timestamp: Option<i64>,

    // session_start
    /// `session_start.capsule_name`.
    #[serde(deserialize_with = "lenient::string")]
    pub capsule_name: Option<String>,
    /// `session_start.capsule_version`.
    #[serde(deserialize_with = "lenient::string")]
    pub capsule_version: Option<String>,
    /// `session_start.model` (also on hook inference lines).
    #[serde(deserialize_with = "lenient::string")]
    pub model: Option<String>,
    /// `session_start.max_turns` (absent or null: no cap).
    #[serde(deserialize_with = "lenient::int")]
    pub max_turns: Option<i64>,
    /// `session_start.tools_declared`: the tool names offered to the model.
    #[serde(deserialize_with = "lenient::strings")]
    pub tools_declared: Option<Vec<String>>,
    /// `session_start.containment_declared`: the floor asked for.
    #[serde(deserialize_with = "lenient::string")]
    pub containment_declared: Option<String>,
    /// `session_start.containment_achieved`: what the session's commands ran under.
    #[serde(deserialize_with = "lenient::string")]
    pub containment_achieved: Option<String>,
    /// `session_start.spawned_by`: the parent session of a delegated child.
    #[serde(deserialize_with = "lenient::string")]
    pub spawned_by: Option<String>,
    /// `delegation_id` on `session_start` (child), `delegation_start` and `delegation`.
    #[serde(deserialize_with = "lenient::string")]
    pub delegation_id: Option<String>,

    // turn-level
    /// Zero-based turn number.
    #[serde(deserialize_with = "lenient::int")]
    pub turn: Option<i64>,
    /// `tsk_…` id of the task the line belongs to.
    #[serde(deserialize_with = "lenient::string")]
    pub task_id: Option<String>,
    /// Input tokens of an inference call, or a task's / child's input total.
    #[serde(deserialize_with = "lenient::int")]
    pub input_tokens: Option<i64>,
    /// Output tokens of an inference call, or a task's / child's output total.
    #[serde(deserialize_with = "lenient::int")]
    pub output_tokens: Option<i64>,
    /// `tool_call | end_turn | text | error`.
    #[serde(deserialize_with = "lenient::string")]
    pub decision: Option<String>,
    /// Tool named by an inference decision or run by a `tool_call`.
    #[serde(deserialize_with = "lenient::string")]
    pub tool_name: Option<String>,
    /// `hook:<name>` on hook inference lines; `runtime|operator` on pulls and skills.
    #[serde(deserialize_with = "lenient::string")]
    pub origin: Option<String>,
    /// Failure code of an inference call.
    #[serde(deserialize_with = "lenient::string")]
    pub error_code: Option<String>,
    /// HTTP status the provider answered with.
    #[serde(deserialize_with = "lenient::int")]
    pub provider_status: Option<i64>,
    /// The runtime's own failure text for a call it could not run.
    #[serde(deserialize_with = "lenient::string")]
    pub error: Option<String>,

    // tool_call / shell / skill_call
    /// The tool input as the model supplied it.
    pub input: Option<serde_json::Value>,
    /// Size of the input in bytes.
    #[serde(deserialize_with = "lenient::int")]
    pub input_bytes: Option<i64>,
    /// Size of the result in bytes.
    #[serde(deserialize_with = "lenient::int")]
    pub output_bytes: Option<i64>,
    /// Wall time of a call, a task, a session or a delegation.
    #[serde(deserialize_with = "lenient::int")]
    pub duration_ms: Option<i64>,
    /// `ok|error` on calls; `success|failed|skipped` on plan steps.
    #[serde(deserialize_with = "lenient::string")]
    pub status: Option<String>,
    /// `shell.binary`.
    #[serde(deserialize_with = "lenient::string")]
    pub binary: Option<String>,
    /// `shell.command`.
    #[serde(deserialize_with = "lenient::string")]
    pub command: Option<String>,
    /// `shell.exit_code`.
    #[serde(deserialize_with = "lenient::int")]
    pub exit_code: Option<i64>,
    /// `skill_call.skill_name`.
    #[serde(deserialize_with = "lenient::string")]
    pub skill_name: Option<String>,

    // artifact_pulled / tools_refreshed
    /// Full name of a pulled artifact.
    #[serde(deserialize_with = "lenient::string")]
    pub name: Option<String>,
    /// Version of a pulled artifact or a delegated capsule.
    #[serde(deserialize_with = "lenient::string")]
    pub version: Option<String>,
    /// `tool|skill`.
    #[serde(deserialize_with = "lenient::string")]
    pub runtime: Option<String>,
    /// `trusted|untrusted`.
    #[serde(deserialize_with = "lenient::string")]
    pub trust: Option<String>,
    /// `project store | global store | github:<owner>/<repo>`.
    #[serde(deserialize_with = "lenient::string")]
    pub fetched_from: Option<String>,
    /// GitHub owner id of the scope a pull came from.
    #[serde(deserialize_with = "lenient::int")]
    pub owner_id: Option<i64>,
    /// `compaction|agent|immediate`.
    #[serde(deserialize_with = "lenient::string")]
    pub trigger: Option<String>,
    /// Tools added by a refresh.
    #[serde(deserialize_with = "lenient::strings")]
    pub added: Option<Vec<String>>,
    /// Tools removed by a refresh.
    #[serde(deserialize_with = "lenient::strings")]
    pub removed: Option<Vec<String>>,

    // call_denied / failures / retries
    /// `call_denied.event`: `on-shell|on-tool-call`.
    #[serde(deserialize_with = "lenient::string")]
    pub event: Option<String>,
    /// Hook that decided.
    #[serde(deserialize_with = "lenient::string")]
    pub hook_name: Option<String>,
    /// What was denied.
    #[serde(deserialize_with = "lenient::string")]
    pub target: Option<String>,
    /// Why (denials, failures, retries, delegations).
    #[serde(deserialize_with = "lenient::string")]
    pub reason: Option<String>,
    /// `task_failed.cause`.
    #[serde(deserialize_with = "lenient::string")]
    pub cause: Option<String>,
    /// `inference_retry.attempt` (1-based).
    #[serde(deserialize_with = "lenient::int")]
    pub attempt: Option<i64>,
    /// `inference_retry.max_retries`.
    #[serde(deserialize_with = "lenient::int")]
    pub max_retries: Option<i64>,
    /// `inference_retry.delay_ms`.
    #[serde(deserialize_with = "lenient::int")]
    pub delay_ms: Option<i64>,

    // delegation
    /// Full name of a delegated capsule.
    #[serde(deserialize_with = "lenient::string")]
    pub capsule: Option<String>,
    /// `ses_…` id of a delegated child.
    #[serde(deserialize_with = "lenient::string")]
    pub child_session_id: Option<String>,
    /// The child's work folder.
    #[serde(deserialize_with = "lenient::string")]
    pub child_workdir: Option<String>,
    /// The child's records folder (its `trace.jsonl` lives there).
    #[serde(deserialize_with = "lenient::string")]
    pub child_records_dir: Option<String>,
    /// `ok|error|crashed|terminated|refused|…`.
    #[serde(deserialize_with = "lenient::string")]
    pub outcome: Option<String>,
    /// Per-delegation token usage, when the parent recorded it.
    #[serde(deserialize_with = "lenient::usage")]
    pub usage: Option<Usage>,

    // task_continued
    /// `task_continued.delegations`: the delegations whose outcomes the task resumed with.
    #[serde(deserialize_with = "lenient::strings")]
    pub delegations: Option<Vec<String>>,
    /// `task_continued.waited_ms`.
    #[serde(deserialize_with = "lenient::int")]
    pub waited_ms: Option<i64>,

    // plans
    /// `plan_*.plan_id`.
    #[serde(deserialize_with = "lenient::string")]
    pub plan_id: Option<String>,
    /// `plan_start.step_count`.
    #[serde(deserialize_with = "lenient::int")]
    pub step_count: Option<i64>,
    /// `plan_step*.step_id`.
    #[serde(deserialize_with = "lenient::string")]
    pub step_id: Option<String>,
    /// `plan_step*.kind`: `tool|shell|capsule`.
    #[serde(deserialize_with = "lenient::string")]
    pub kind: Option<String>,

    // task_end / session_end
    /// Exit status of a task or of the session.
    #[serde(deserialize_with = "lenient::string")]
    pub exit_status: Option<String>,
    /// `session_end.total_turns`.
    #[serde(deserialize_with = "lenient::int")]
    pub total_turns: Option<i64>,
    /// `session_end.total_input_tokens`.
    #[serde(deserialize_with = "lenient::int")]
    pub total_input_tokens: Option<i64>,
    /// `session_end.total_output_tokens`.
    #[serde(deserialize_with = "lenient::int")]
    pub total_output_tokens: Option<i64>,
    /// `session_end.total_tool_calls`.
    #[serde(deserialize_with = "lenient::int")]
    pub total_tool_calls: Option<i64>,
    /// `session_end.total_shell_calls`.
    #[serde(deserialize_with = "lenient::int")]
    pub total_shell_calls: Option<i64>,
}

impl Event {
    /// The event type, or `""` when the line had none.
    pub fn kind(&self) -> &str {
        self.event_type.as_deref().unwrap_or("")
    }

    /// A non-negative integer field as `u64` (absent or negative: 0).
    pub fn n(v: Option<i64>) -> u64 {
        v.map(|x| x.max(0) as u64).unwrap_or(0)
    }
}
