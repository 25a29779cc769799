//! The typed view of one trace line.
//!
//! A trace line is a flat JSON object: the envelope (`event_type`, `event_id`, `parent_id`,
//! `session_id`, `timestamp`) and the fields of its event type. Rather than one Rust type per
//! event, [`Event`] is a single flat record of every field the views read, each optional and
//! each lenient (a field of an unexpected shape reads as absent). Unknown keys are skipped by
//! serde without being stored, so a line costs only what the views use.
//!
//! An event borrows its strings from the line it was read from (a string with escapes is the
//! exception: it has to be unescaped into its own buffer), so reading a million lines allocates
//! nothing per line for the fields a view only compares or counts. The tool call `input` is the
//! one field a view keeps whole; its type `I` says whether it is kept (`serde_json::Value`) or
//! only checked ([`lenient::Checked`]).
//!
//! A line that is valid UTF-8 (every line a writer produces) is parsed from a `str`, so
//! serde_json does not check each string again; any other from the bytes, as before.

use std::borrow::Cow;

use serde::Deserialize;

use super::lenient::{self, ToolInput, Usage};

/// One trace line, as far as the `mur trace` views need it: strings borrowed from the line
/// (`'a`), the tool input read as `I`.
#[derive(Debug, PartialEq, Deserialize)]
#[serde(default, bound(deserialize = "I: Deserialize<'de>"))]
pub struct Event<'a, I = serde_json::Value> {
    /// The event discriminator (`session_start`, `inference`, `tool_call`, …).
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub event_type: Option<Cow<'a, str>>,
    /// `ses_…` id of the session that wrote the line.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub session_id: Option<Cow<'a, str>>,
    /// Unix milliseconds.
    #[serde(deserialize_with = "lenient::int")]
    pub timestamp: Option<i64>,

    // session_start
    /// `session_start.capsule_name`.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub capsule_name: Option<Cow<'a, str>>,
    /// `session_start.capsule_version`.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub capsule_version: Option<Cow<'a, str>>,
    /// `session_start.model` (also on hook inference lines).
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub model: Option<Cow<'a, str>>,
    /// `session_start.max_turns` (absent or null: no cap).
    #[serde(deserialize_with = "lenient::int")]
    pub max_turns: Option<i64>,
    /// `session_start.tools_declared`: the tool names offered to the model.
    #[serde(deserialize_with = "lenient::strings")]
    pub tools_declared: Option<Vec<String>>,
    /// `session_start.containment_declared`: the floor asked for.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub containment_declared: Option<Cow<'a, str>>,
    /// `session_start.containment_achieved`: what the session's commands ran under.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub containment_achieved: Option<Cow<'a, str>>,
    /// `session_start.spawned_by`: the parent session of a delegated child.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub spawned_by: Option<Cow<'a, str>>,
    /// `delegation_id` on `session_start` (child), `delegation_start` and `delegation`.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub delegation_id: Option<Cow<'a, str>>,

    // turn-level
    /// Zero-based turn number.
    #[serde(deserialize_with = "lenient::int")]
    pub turn: Option<i64>,
    /// `tsk_…` id of the task the line belongs to.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub task_id: Option<Cow<'a, str>>,
    /// Input tokens of an inference call, or a task's / child's input total.
    #[serde(deserialize_with = "lenient::int")]
    pub input_tokens: Option<i64>,
    /// Output tokens of an inference call, or a task's / child's output total.
    #[serde(deserialize_with = "lenient::int")]
    pub output_tokens: Option<i64>,
    /// `tool_call | end_turn | text | error`.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub decision: Option<Cow<'a, str>>,
    /// Tool named by an inference decision or run by a `tool_call`.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub tool_name: Option<Cow<'a, str>>,
    /// `hook:<name>` on hook inference lines; `runtime|operator` on pulls and skills.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub origin: Option<Cow<'a, str>>,
    /// Failure code of an inference call.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub error_code: Option<Cow<'a, str>>,
    /// HTTP status the provider answered with.
    #[serde(deserialize_with = "lenient::int")]
    pub provider_status: Option<i64>,
    /// The runtime's own failure text for a call it could not run.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub error: Option<Cow<'a, str>>,

    // tool_call / shell / skill_call
    /// The tool input as the model supplied it.
    pub input: Option<I>,
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
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub status: Option<Cow<'a, str>>,
    /// `shell.binary`.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub binary: Option<Cow<'a, str>>,
    /// `shell.command`.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub command: Option<Cow<'a, str>>,
    /// `shell.exit_code`.
    #[serde(deserialize_with = "lenient::int")]
    pub exit_code: Option<i64>,
    /// `skill_call.skill_name`.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub skill_name: Option<Cow<'a, str>>,

    // artifact_pulled / tools_refreshed
    /// Full name of a pulled artifact.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub name: Option<Cow<'a, str>>,
    /// Version of a pulled artifact or a delegated capsule.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub version: Option<Cow<'a, str>>,
    /// `tool|skill`.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub runtime: Option<Cow<'a, str>>,
    /// `trusted|untrusted`.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub trust: Option<Cow<'a, str>>,
    /// `project store | global store | github:<owner>/<repo>`.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub fetched_from: Option<Cow<'a, str>>,
    /// GitHub owner id of the scope a pull came from.
    #[serde(deserialize_with = "lenient::int")]
    pub owner_id: Option<i64>,
    /// `compaction|agent|immediate`.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub trigger: Option<Cow<'a, str>>,
    /// Tools added by a refresh.
    #[serde(deserialize_with = "lenient::strings")]
    pub added: Option<Vec<String>>,
    /// Tools removed by a refresh.
    #[serde(deserialize_with = "lenient::strings")]
    pub removed: Option<Vec<String>>,

    // call_denied / failures / retries
    /// `call_denied.event`: `on-shell|on-tool-call`.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub event: Option<Cow<'a, str>>,
    /// Hook that decided.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub hook_name: Option<Cow<'a, str>>,
    /// What was denied.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub target: Option<Cow<'a, str>>,
    /// Why (denials, failures, retries, delegations).
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub reason: Option<Cow<'a, str>>,
    /// `task_failed.cause`.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub cause: Option<Cow<'a, str>>,
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
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub capsule: Option<Cow<'a, str>>,
    /// `ses_…` id of a delegated child.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub child_session_id: Option<Cow<'a, str>>,
    /// The child's work folder.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub child_workdir: Option<Cow<'a, str>>,
    /// The child's records folder (its `trace.jsonl` lives there).
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub child_records_dir: Option<Cow<'a, str>>,
    /// `ok|error|crashed|terminated|refused|…`.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub outcome: Option<Cow<'a, str>>,
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
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub plan_id: Option<Cow<'a, str>>,
    /// `plan_start.step_count`.
    #[serde(deserialize_with = "lenient::int")]
    pub step_count: Option<i64>,
    /// `plan_step*.step_id`.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub step_id: Option<Cow<'a, str>>,
    /// `plan_step*.kind`: `tool|shell|capsule`.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub kind: Option<Cow<'a, str>>,

    // task_end / session_end
    /// Exit status of a task or of the session.
    #[serde(borrow, deserialize_with = "lenient::string")]
    pub exit_status: Option<Cow<'a, str>>,
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

impl<I> Default for Event<'_, I> {
    fn default() -> Self {
        Event {
            event_type: None,
            session_id: None,
            timestamp: None,
            capsule_name: None,
            capsule_version: None,
            model: None,
            max_turns: None,
            tools_declared: None,
            containment_declared: None,
            containment_achieved: None,
            spawned_by: None,
            delegation_id: None,
            turn: None,
            task_id: None,
            input_tokens: None,
            output_tokens: None,
            decision: None,
            tool_name: None,
            origin: None,
            error_code: None,
            provider_status: None,
            error: None,
            input: None,
            input_bytes: None,
            output_bytes: None,
            duration_ms: None,
            status: None,
            binary: None,
            command: None,
            exit_code: None,
            skill_name: None,
            name: None,
            version: None,
            runtime: None,
            trust: None,
            fetched_from: None,
            owner_id: None,
            trigger: None,
            added: None,
            removed: None,
            event: None,
            hook_name: None,
            target: None,
            reason: None,
            cause: None,
            attempt: None,
            max_retries: None,
            delay_ms: None,
            capsule: None,
            child_session_id: None,
            child_workdir: None,
            child_records_dir: None,
            outcome: None,
            usage: None,
            delegations: None,
            waited_ms: None,
            plan_id: None,
            step_count: None,
            step_id: None,
            kind: None,
            exit_status: None,
            total_turns: None,
            total_input_tokens: None,
            total_output_tokens: None,
            total_tool_calls: None,
            total_shell_calls: None,
        }
    }
}

impl<I> Event<'_, I> {
    /// The event type, or `""` when the line had none.
    pub fn kind(&self) -> &str {
        self.event_type.as_deref().unwrap_or("")
    }
}

impl Event<'_> {
    /// A non-negative integer field as `u64` (absent or negative: 0).
    pub fn n(v: Option<i64>) -> u64 {
        v.map(|x| x.max(0) as u64).unwrap_or(0)
    }
}

impl<'a, I: ToolInput> Event<'a, I> {
    /// Parse one trace line (its newline may be included).
    pub fn parse(line: &'a [u8]) -> Result<Self, serde_json::Error> {
        let mut ev = Event::default();
        ev.parse_from(line)?;
        Ok(ev)
    }

    /// Parse one trace line with serde_json from its bytes alone: what a line means, which
    /// [`Event::parse`] gives faster. For tests and fuzzing, which hold the two to agreeing.
    pub fn parse_with_serde(line: &'a [u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(line)
    }

    /// Parse one trace line into this event, in place of what it held (on an error, a default
    /// event).
    ///
    /// From a `str` when the line is valid UTF-8 (so serde_json does not check each string
    /// again; it reads the same either way), from the bytes otherwise.
    pub fn parse_from(&mut self, line: &'a [u8]) -> Result<(), serde_json::Error> {
        let again = match std::str::from_utf8(line) {
            Ok(text) => serde_json::from_str(text),
            Err(_) => serde_json::from_slice(line),
        };
        let (ev, result) = match again {
            Ok(ev) => (ev, Ok(())),
            Err(e) => (Event::default(), Err(e)),
        };
        *self = ev;
        result
    }
}
