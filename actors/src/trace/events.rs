//! Every trace line the kernel writes, built in one place from typed facts.
//!
//! [`EventType`] names each kind of line once: the writers build lines of these types only, and
//! the readers in `mur trace` (the summary, the progress view, replay's recording) match on
//! [`EventType::parse`] instead of spelling the names. The constructors below fix each line's
//! keys and their order (the order upstream writes them), so a line written in several places
//! (`delegation` by the Session and by a plan's capsule step, `task_failed` by a failed turn
//! and by a crash) cannot drift between its writers, and a reader of this file sees a line's
//! whole shape at once. A plan's own lines are built in [`crate::plan::events`], beside the
//! plan state they need; the peer plane's in `mur`'s `peer` module.

use std::path::Path;

use serde::Serialize;
use serde_json::{json, Value};

use super::TraceEvent;
use crate::grants::Grants;
use crate::ids;
use crate::model::{InferError, RetryNote, StopReason, Usage};
use crate::spec::ContainmentFacts;
use crate::text::{path_text, truncate};
use crate::tool::ShellFacts;
use crate::totals::Totals;

/// Every kind of trace line `mur` writes: the writers build lines of these types only, and the
/// readers in `mur trace` match on them, so a name is spelled once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// `session_start`: a session began: its capsule, model, grants and containment.
    SessionStart,
    /// `session_end`: a session ended: its exit status and totals.
    SessionEnd,
    /// `task_start`: a task was handed to the session.
    TaskStart,
    /// `task_end`: the task ended: its status and the agent's answer.
    TaskEnd,
    /// `task_failed`: the task failed (driver error, malformed reply, runtime error, crash).
    TaskFailed,
    /// `task_canceled`: the task was canceled, and in which phase.
    TaskCanceled,
    /// `task_continued`: a waiting session went on after its children's outcomes.
    TaskContinued,
    /// `inference`: one model call and its reply (or its error).
    Inference,
    /// `inference_retry`: a model call failed and is tried again.
    InferenceRetry,
    /// `tool_call`: a tool call and its result.
    ToolCall,
    /// `skill_call`: a skill call and its result.
    SkillCall,
    /// `shell`: the command a shell tool ran.
    Shell,
    /// `call_denied`: a hook refused a call before it ran.
    CallDenied,
    /// `artifact_pulled`: an artifact was added to the session (at start, or pulled at runtime).
    ArtifactPulled,
    /// `tools_refreshed`: the tool array offered to the model changed.
    ToolsRefreshed,
    /// `user_message`: a message injected into the conversation (a child's outcome).
    UserMessage,
    /// `body`: a captured request or reply body (content capture).
    Body,
    /// `delegation`: a delegation ended (or was refused).
    Delegation,
    /// `delegation_start`: a delegation's child started.
    DelegationStart,
    /// `delegation_restarted`: a delegation's child was restarted by its supervision policy.
    DelegationRestarted,
    /// `plan_start`: a submitted plan began.
    PlanStart,
    /// `plan_step_start`: a plan step began.
    PlanStepStart,
    /// `plan_step`: a plan step ended.
    PlanStep,
    /// `plan_end`: a plan ended.
    PlanEnd,
    /// `peer_handle_mint`: a peer file handle was minted (or the mint refused).
    PeerHandleMint,
    /// `peer_handle_redeem`: a peer redeemed a file handle this process shares.
    PeerHandleRedeem,
    /// `peer_file_fetch`: a file was fetched from a peer (or the fetch refused).
    PeerFileFetch,
}

impl EventType {
    /// Every type, in the order a session's trace usually holds them.
    pub const ALL: [EventType; 27] = [
        EventType::SessionStart,
        EventType::SessionEnd,
        EventType::TaskStart,
        EventType::TaskEnd,
        EventType::TaskFailed,
        EventType::TaskCanceled,
        EventType::TaskContinued,
        EventType::Inference,
        EventType::InferenceRetry,
        EventType::ToolCall,
        EventType::SkillCall,
        EventType::Shell,
        EventType::CallDenied,
        EventType::ArtifactPulled,
        EventType::ToolsRefreshed,
        EventType::UserMessage,
        EventType::Body,
        EventType::Delegation,
        EventType::DelegationStart,
        EventType::DelegationRestarted,
        EventType::PlanStart,
        EventType::PlanStepStart,
        EventType::PlanStep,
        EventType::PlanEnd,
        EventType::PeerHandleMint,
        EventType::PeerHandleRedeem,
        EventType::PeerFileFetch,
    ];

    /// The `event_type` string of its lines.
    pub const fn as_str(self) -> &'static str {
        match self {
            EventType::SessionStart => "session_start",
            EventType::SessionEnd => "session_end",
            EventType::TaskStart => "task_start",
            EventType::TaskEnd => "task_end",
            EventType::TaskFailed => "task_failed",
            EventType::TaskCanceled => "task_canceled",
            EventType::TaskContinued => "task_continued",
            EventType::Inference => "inference",
            EventType::InferenceRetry => "inference_retry",
            EventType::ToolCall => "tool_call",
            EventType::SkillCall => "skill_call",
            EventType::Shell => "shell",
            EventType::CallDenied => "call_denied",
            EventType::ArtifactPulled => "artifact_pulled",
            EventType::ToolsRefreshed => "tools_refreshed",
            EventType::UserMessage => "user_message",
            EventType::Body => "body",
            EventType::Delegation => "delegation",
            EventType::DelegationStart => "delegation_start",
            EventType::DelegationRestarted => "delegation_restarted",
            EventType::PlanStart => "plan_start",
            EventType::PlanStepStart => "plan_step_start",
            EventType::PlanStep => "plan_step",
            EventType::PlanEnd => "plan_end",
            EventType::PeerHandleMint => "peer_handle_mint",
            EventType::PeerHandleRedeem => "peer_handle_redeem",
            EventType::PeerFileFetch => "peer_file_fetch",
        }
    }

    /// The type named `event_type`, or `None` for a line `mur` does not write (a reader skips
    /// it, as it skips an unknown field).
    pub fn parse(event_type: &str) -> Option<Self> {
        // A `match`, not a scan of `ALL`: the readers call this once per line of traces of a
        // million lines (`mur trace report`).
        Some(match event_type {
            "session_start" => EventType::SessionStart,
            "session_end" => EventType::SessionEnd,
            "task_start" => EventType::TaskStart,
            "task_end" => EventType::TaskEnd,
            "task_failed" => EventType::TaskFailed,
            "task_canceled" => EventType::TaskCanceled,
            "task_continued" => EventType::TaskContinued,
            "inference" => EventType::Inference,
            "inference_retry" => EventType::InferenceRetry,
            "tool_call" => EventType::ToolCall,
            "skill_call" => EventType::SkillCall,
            "shell" => EventType::Shell,
            "call_denied" => EventType::CallDenied,
            "artifact_pulled" => EventType::ArtifactPulled,
            "tools_refreshed" => EventType::ToolsRefreshed,
            "user_message" => EventType::UserMessage,
            "body" => EventType::Body,
            "delegation" => EventType::Delegation,
            "delegation_start" => EventType::DelegationStart,
            "delegation_restarted" => EventType::DelegationRestarted,
            "plan_start" => EventType::PlanStart,
            "plan_step_start" => EventType::PlanStepStart,
            "plan_step" => EventType::PlanStep,
            "plan_end" => EventType::PlanEnd,
            "peer_handle_mint" => EventType::PeerHandleMint,
            "peer_handle_redeem" => EventType::PeerHandleRedeem,
            "peer_file_fetch" => EventType::PeerFileFetch,
            _ => return None,
        })
    }
}

impl std::fmt::Display for EventType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The facts of a started child, for its `delegation_start` line.
pub struct DelegationStart<'a> {
    /// `dlg_…`.
    pub delegation_id: &'a str,
    /// Full capsule name.
    pub capsule: &'a str,
    /// Version.
    pub version: &'a str,
    /// The child's `ses_…`.
    pub child_session_id: &'a str,
    /// The child's work folder.
    pub child_workdir: &'a Path,
    /// The child's records folder.
    pub child_records_dir: &'a Path,
    /// The node it runs on (`mur node`); `None`, and no `node` key, in this process.
    pub node: Option<&'a str>,
}

/// `session_start`'s `effective_grants`, written straight from the grants (a `json!` object
/// built a map with a hashed key per member, per child).
#[derive(Serialize)]
struct EffectiveGrants<'a> {
    shell_allow: &'a [String],
    spawn_allow: &'a [String],
    plan_submit: bool,
    peer_fetch_allow: &'a [String],
    network_allow: &'a [String],
}

/// `delegation_start`, hanging off the parent's `session_start`.
pub fn delegation_start(session_event: &str, d: &DelegationStart<'_>) -> TraceEvent {
    let line = TraceEvent::new(EventType::DelegationStart, Some(session_event))
        .with("delegation_id", d.delegation_id)
        .with("capsule", d.capsule)
        .with("version", d.version)
        .with("child_session_id", d.child_session_id)
        .with("child_workdir", path_text(d.child_workdir))
        .with("child_records_dir", path_text(d.child_records_dir));
    with_node(line, d.node)
}

/// `line` with the `node` a remote child ran on; unchanged for a child of this process.
fn with_node(line: TraceEvent, node: Option<&str>) -> TraceEvent {
    match node {
        Some(n) => line.with("node", n),
        None => line,
    }
}

/// The facts of a delegation's end, for its `delegation` line.
pub struct DelegationEnd<'a> {
    /// Full capsule name (or what the model asked for, when refused).
    pub capsule: &'a str,
    /// Version.
    pub version: &'a str,
    /// `dlg_…`; `None` when nothing started.
    pub delegation_id: Option<&'a str>,
    /// The child's `ses_…`; `None` when nothing started.
    pub child_session_id: Option<&'a str>,
    /// From start to end (0 when refused).
    pub duration_ms: u64,
    /// `ok|error|crashed|terminated|refused`, or a plan step's `completed|failed|timed_out`.
    pub outcome: &'a str,
    /// Why it ended so (`null` when it answered).
    pub reason: Option<&'a str>,
    /// The child's usage `(input_tokens, output_tokens, turns)`, when it ran as a session's
    /// delegation; a refusal and a plan step's line carry none.
    pub usage: Option<(u64, u64, u32)>,
    /// The node it ran on; `None`, and no `node` key, in this process.
    pub node: Option<&'a str>,
}

/// A `delegation` line's `usage`, in this order (written straight, not through a `json!` map).
#[derive(Serialize)]
struct DelegationUsage {
    input_tokens: u64,
    output_tokens: u64,
    turns: u32,
}

/// `delegation`, hanging off the parent's `session_start`.
pub fn delegation(session_event: &str, d: &DelegationEnd<'_>) -> TraceEvent {
    let line = TraceEvent::new(EventType::Delegation, Some(session_event))
        .with("capsule", d.capsule)
        .with("version", d.version)
        .with("delegation_id", d.delegation_id)
        .with("child_session_id", d.child_session_id)
        .with("duration_ms", d.duration_ms)
        .with("outcome", d.outcome)
        .with("reason", d.reason);
    let line = with_node(line, d.node);
    match d.usage {
        Some((input_tokens, output_tokens, turns)) => line.with(
            "usage",
            DelegationUsage {
                input_tokens,
                output_tokens,
                turns,
            },
        ),
        None => line,
    }
}

/// `task_failed`, hanging off `task_start`; the reason is cut to 2,000 bytes.
pub fn task_failed(
    task_event: &str,
    task_id: &str,
    turn: u32,
    cause: &str,
    reason: &str,
) -> TraceEvent {
    TraceEvent::new(EventType::TaskFailed, Some(task_event))
        .with("task_id", task_id)
        .with("turn", turn)
        .with("cause", cause)
        .with("reason", truncate(reason, 2000))
}

/// Where a session's line hangs, and the task and turn it belongs to: the facts most lines
/// share.
#[derive(Clone, Copy)]
pub struct At<'a> {
    /// The event the line hangs off (`session_start`, `task_start` or the turn's `inference`).
    pub parent: &'a str,
    /// `tsk_…`.
    pub task_id: &'a str,
    /// The turn the line belongs to.
    pub turn: u32,
}

/// The facts of a session's start, for its `session_start` line (the root of its trace).
pub struct SessionStart<'a> {
    /// Full capsule name.
    pub capsule_name: &'a str,
    /// Its version.
    pub capsule_version: &'a str,
    /// The model id.
    pub model: &'a str,
    /// `max_turns`, when bounded.
    pub max_turns: Option<u32>,
    /// The capability areas granted (`network`, `shell`, …).
    pub capabilities: &'a [&'static str],
    /// The tools offered at start, by name.
    pub tools_declared: &'a [&'a str],
    /// Containment asked for and achieved.
    pub containment: &'a ContainmentFacts,
    /// The grants in force.
    pub grants: &'a Grants,
    /// Where the system prompt came from.
    pub system_prompt_source: &'static str,
    /// The operator prompt's hash, when there is one.
    pub system_prompt_sha256: Option<String>,
    /// The model driver's name.
    pub driver: &'a str,
    /// `tool_refresh` policy.
    pub tool_refresh: &'a str,
    /// The session this one resumes.
    pub resumed_from: Option<&'a str>,
    /// The session this one replays.
    pub replay_of: Option<&'a str>,
    /// What a resumed session starts counting from.
    pub resumed_totals: Option<Totals>,
    /// The work folder (written under content capture only).
    pub workdir: Option<&'a Path>,
    /// `(parent_session_id, delegation_id)` of a delegated child.
    pub spawned_by: Option<(&'a str, &'a str)>,
}

/// `session_start`: the first line of every trace, with no parent; `event_id` was minted
/// when the session started (its other lines hang off it).
pub fn session_start(event_id: &str, s: &SessionStart<'_>) -> TraceEvent {
    let g = s.grants;
    TraceEvent::minted(EventType::SessionStart, event_id.to_string(), None)
        .with("capsule_name", s.capsule_name)
        .with("capsule_version", s.capsule_version)
        .with("model", s.model)
        .with("max_turns", s.max_turns)
        .with("capabilities", s.capabilities)
        .with("tools_declared", s.tools_declared)
        .with("containment_declared", &s.containment.declared)
        .with("containment_achieved", &s.containment.achieved)
        .with("workdir_exec", s.containment.workdir_exec)
        .with(
            "effective_grants",
            EffectiveGrants {
                shell_allow: &g.shell_allow,
                spawn_allow: &g.spawn_allow,
                plan_submit: g.plan_submit,
                peer_fetch_allow: &g.peer_fetch_allow,
                network_allow: &g.network_allow,
            },
        )
        .with("system_prompt_source", s.system_prompt_source)
        .with("system_prompt_sha256", &s.system_prompt_sha256)
        .with("driver", s.driver)
        .with("tool_refresh", s.tool_refresh)
        .with("runtime_artifacts", Vec::<Value>::new())
        .with("resumed_from", s.resumed_from)
        .with_opt("replay_of", s.replay_of)
        .with_opt(
            "resumed_totals",
            s.resumed_totals.map(|t| {
                json!({"turns": t.turns, "input_tokens": t.input_tokens, "output_tokens": t.output_tokens, "tool_calls": t.tool_calls, "shell_calls": t.shell_calls})
            }),
        )
        .with_opt("workdir", s.workdir.map(path_text))
        .with("context_id", Value::Null)
        .with_opt("spawned_by", s.spawned_by.map(|(parent, _)| parent))
        .with_opt("delegation_id", s.spawned_by.map(|(_, delegation)| delegation))
}

/// The ids of a task's `task_start` line, minted when the session started.
pub struct TaskIds<'a> {
    /// The `session_start` line's id (the parent).
    pub session_event: &'a str,
    /// The line's own id.
    pub task_event: &'a str,
    /// `tsk_…`.
    pub task_id: &'a str,
}

/// `task_start`: the task handed to the session (its text under content capture only).
pub fn task_start(t: &TaskIds<'_>, task: &str, content: bool) -> TraceEvent {
    let task_id = t.task_id;
    TraceEvent::minted(
        EventType::TaskStart,
        t.task_event.to_string(),
        Some(t.session_event),
    )
    .with("task_id", task_id)
    .with("context_id", ids::mint("ctx_"))
    .with("source", "task_md")
    .with("origin", "user")
    .with("trust", "trusted")
    .with("lane", "user")
    .with("message_parts_bytes", task.len())
    .with_opt("task", content.then_some(task))
}

/// `task_canceled`: the task was canceled during `phase` (`inference`, `turn`, `delegation`).
pub fn task_canceled(at: At<'_>, phase: &str, reason: &str) -> TraceEvent {
    TraceEvent::new(EventType::TaskCanceled, Some(at.parent))
        .with("task_id", at.task_id)
        .with("turn", at.turn)
        .with("phase", phase)
        .with("reason", reason)
}

/// `inference_retry`: a failed model call that the driver tries again.
pub fn inference_retry(at: At<'_>, note: &RetryNote) -> TraceEvent {
    TraceEvent::new(EventType::InferenceRetry, Some(at.parent))
        .with("turn", at.turn)
        .with("task_id", at.task_id)
        .with("attempt", note.attempt)
        .with("max_retries", note.max_retries)
        .with("reason", note.reason)
        .with_opt("provider_status", note.provider_status)
        .with("error", truncate(&note.error, 2000))
        .with("delay_ms", note.delay_ms)
        .with_opt("retry_after_ms", note.retry_after_ms)
        .with("charged_tokens", 0)
}

/// The facts of a model reply, for its `inference` line.
pub struct Inference<'a> {
    /// Input tokens counted (the provider's figure, else the estimate).
    pub input_tokens: u64,
    /// Output tokens counted (same rule).
    pub output_tokens: u64,
    /// `tool_call`, `end_turn` or `text`.
    pub decision: &'static str,
    /// The reply's stop reason.
    pub stop_reason: &'a StopReason,
    /// The first tool the reply calls.
    pub tool_name: Option<&'a str>,
    /// What the provider reported.
    pub usage: &'a Usage,
    /// The output cap the call was sent with.
    pub max_output_tokens: u32,
    /// How many attempts the call took.
    pub attempts: u32,
}

/// `inference`: one counted model call. Hashes and the response are added by the caller, as
/// its capture level says.
pub fn inference(at: At<'_>, i: &Inference<'_>) -> TraceEvent {
    TraceEvent::new(EventType::Inference, Some(at.parent))
        .with("turn", at.turn)
        .with("task_id", at.task_id)
        .with("input_tokens", i.input_tokens)
        .with("output_tokens", i.output_tokens)
        .with("decision", i.decision)
        .with("stop_reason", i.stop_reason.as_str())
        .with("tool_name", i.tool_name)
        .with_opt("input_tokens_actual", i.usage.input_tokens)
        .with_opt("output_tokens_actual", i.usage.output_tokens)
        .with_opt("cached_tokens", i.usage.cached_tokens)
        .with_opt("cache_write_tokens", i.usage.cache_write_tokens)
        .with_opt("thinking_tokens", i.usage.thinking_tokens)
        .with("max_output_tokens", i.max_output_tokens)
        .with_opt("attempts", (i.attempts > 1).then_some(i.attempts))
}

/// `inference` for a model call that failed: not counted, `decision: error`.
pub fn inference_failed(at: At<'_>, err: &InferError) -> TraceEvent {
    TraceEvent::new(EventType::Inference, Some(at.parent))
        .with("turn", at.turn)
        .with("task_id", at.task_id)
        .with("decision", "error")
        .with("stop_reason", "error")
        .with("tool_name", Value::Null)
        .with("error_code", err.kind.as_str())
        .with("error", truncate(&err.message, 2000))
        .with_opt("provider_status", err.provider_status)
        .with_opt("attempts", (err.attempts > 1).then_some(err.attempts))
        .with_opt("retry_stopped", err.retry_stopped.as_deref())
}

/// The facts of an added artifact, for its `artifact_pulled` line.
pub struct ArtifactPulled<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its version.
    pub version: &'a str,
    /// Its runtime (`bash`, `python`, …).
    pub runtime: &'a str,
    /// `runtime` for a pull by the model, else where it was declared.
    pub origin: &'a str,
    /// The pulling session (a runtime pull only).
    pub session_id: &'a str,
    /// Where it came from.
    pub fetched_from: &'a str,
    /// Its owner, when known.
    pub owner_id: Option<u64>,
}

/// `artifact_pulled`, hanging off `session_start`: a runtime pull is `untrusted`.
pub fn artifact_pulled(session_event: &str, a: &ArtifactPulled<'_>) -> TraceEvent {
    let runtime = a.origin == "runtime";
    TraceEvent::new(EventType::ArtifactPulled, Some(session_event))
        .with("name", a.name)
        .with("version", a.version)
        .with("runtime", a.runtime)
        .with("origin", a.origin)
        .with("session", runtime.then_some(a.session_id))
        .with("trust", if runtime { "untrusted" } else { "trusted" })
        .with("fetched_from", a.fetched_from)
        .with_opt("owner_id", a.owner_id)
}

/// `tools_refreshed`: the tool array offered to the model changed (the agent pulled or
/// removed a tool).
pub fn tools_refreshed(at: At<'_>, added: &[&str], removed: &[&str], tools: &[&str]) -> TraceEvent {
    TraceEvent::new(EventType::ToolsRefreshed, Some(at.parent))
        .with("turn", at.turn)
        .with("task_id", at.task_id)
        .with("trigger", "agent")
        .with("added", added)
        .with("removed", removed)
        .with("tools", tools)
}

/// The facts of a refusal by a hook, for its `call_denied` line.
pub struct CallDenied<'a> {
    /// `on-tool-call` or `on-shell`.
    pub event: &'a str,
    /// The hook that refused.
    pub hook: &'a str,
    /// The tool name, or the resolved binary.
    pub target: &'a str,
    /// Its reason.
    pub reason: &'a str,
    /// `(tool_call_id, output)`, under content capture.
    pub content: Option<(&'a str, &'a str)>,
}

/// `call_denied`, hanging off the turn: nothing ran.
pub fn call_denied(at: At<'_>, d: &CallDenied<'_>) -> TraceEvent {
    TraceEvent::new(EventType::CallDenied, Some(at.parent))
        .with("turn", at.turn)
        .with("task_id", at.task_id)
        .with("event", d.event)
        .with("hook_name", d.hook)
        .with("target", d.target)
        .with("reason", truncate(d.reason, 2000))
        .with_opt("tool_call_id", d.content.map(|(id, _)| id))
        .with_opt("output", d.content.map(|(_, output)| output))
}

/// How a call ended, for its `tool_call` or `skill_call` line.
pub struct CallEnd<'a> {
    /// The output (under content capture only).
    pub output: Option<&'a str>,
    /// Bytes of output.
    pub output_bytes: u64,
    /// Wall time of the call.
    pub duration_ms: u64,
    /// `ok` or `error`.
    pub status: &'static str,
    /// The refusal, when the call was refused before it ran.
    pub error: Option<&'a str>,
}

/// `skill_call`, hanging off the turn (its id under content capture only).
pub fn skill_call(at: At<'_>, skill: &str, id: Option<&str>, end: &CallEnd<'_>) -> TraceEvent {
    TraceEvent::new(EventType::SkillCall, Some(at.parent))
        .with("turn", at.turn)
        .with("task_id", at.task_id)
        .with("skill_name", skill)
        .with_opt("tool_call_id", id)
        .with_opt("output", end.output)
        .with("output_bytes", end.output_bytes)
        .with("duration_ms", end.duration_ms)
        .with("status", end.status)
        .with_opt("error", end.error)
}

/// The call a `tool_call` line records (its input with handles redacted).
pub struct ToolCall<'a, I: Serialize> {
    /// The tool.
    pub name: &'a str,
    /// The provider's call id.
    pub id: &'a str,
    /// The input, as the line shows it.
    pub input: I,
    /// Bytes of the input as the model sent it.
    pub input_bytes: usize,
}

/// `tool_call`, hanging off the turn.
pub fn tool_call<I: Serialize>(at: At<'_>, call: ToolCall<'_, I>, end: &CallEnd<'_>) -> TraceEvent {
    TraceEvent::new(EventType::ToolCall, Some(at.parent))
        .with("turn", at.turn)
        .with("task_id", at.task_id)
        .with("tool_name", call.name)
        .with("tool_call_id", call.id)
        .with("input", call.input)
        .with("input_bytes", call.input_bytes)
        .with_opt("output", end.output)
        .with("output_bytes", end.output_bytes)
        .with("duration_ms", end.duration_ms)
        .with("status", end.status)
        .with_opt("error", end.error)
}

/// `shell`, after its `tool_call`: the command a shell tool ran (`command` as the line shows
/// it, handles redacted).
pub fn shell(at: At<'_>, sh: &ShellFacts, command: &str, duration_ms: u64) -> TraceEvent {
    TraceEvent::new(EventType::Shell, Some(at.parent))
        .with("turn", at.turn)
        .with("task_id", at.task_id)
        .with("binary", &sh.binary)
        .with("command", command)
        .with("exit_code", sh.exit_code)
        .with("stdout_bytes", sh.stdout_bytes)
        .with("stderr_bytes", sh.stderr_bytes)
        .with("duration_ms", duration_ms)
}

/// `delegation_restarted`, hanging off `session_start`: a resumed session delegated again
/// what was still running when it stopped.
pub fn delegation_restarted(
    session_event: &str,
    previous: &str,
    delegation_id: Option<&str>,
    resumed_from: Option<&str>,
) -> TraceEvent {
    TraceEvent::new(EventType::DelegationRestarted, Some(session_event))
        .with("previous_delegation_id", previous)
        .with("delegation_id", delegation_id)
        .with("resumed_from", resumed_from)
}

/// `body`, hanging off `session_start`: a captured body (`system` or `tools`), once per hash.
pub fn body(session_event: &str, kind: &str, sha256: &str, body: &str) -> TraceEvent {
    TraceEvent::new(EventType::Body, Some(session_event))
        .with("kind", kind)
        .with("sha256", sha256)
        .with("body", body)
}

/// `user_message`: a message the runtime wrote into the conversation (content capture).
pub fn user_message(at: At<'_>, delegations: &[&str], text: &str) -> TraceEvent {
    TraceEvent::new(EventType::UserMessage, Some(at.parent))
        .with("turn", at.turn)
        .with("task_id", at.task_id)
        .with("delegations", delegations)
        .with("text", text)
}

/// `task_continued`: a waiting session goes on with its children's outcomes.
pub fn task_continued(
    at: At<'_>,
    continuation: u32,
    delegations: &[&str],
    waited_ms: u64,
    turns_remaining: Option<u32>,
) -> TraceEvent {
    TraceEvent::new(EventType::TaskContinued, Some(at.parent))
        .with("task_id", at.task_id)
        .with("continuation_number", continuation)
        .with("delegations", delegations)
        .with("member_calls", Vec::<Value>::new())
        .with("waited_ms", waited_ms)
        .with("turns_remaining", turns_remaining)
}

/// `task_end`: the task's status and counters.
pub fn task_end(at: At<'_>, exit_status: &str, duration_ms: u64, t: &Totals) -> TraceEvent {
    TraceEvent::new(EventType::TaskEnd, Some(at.parent))
        .with("task_id", at.task_id)
        .with("exit_status", exit_status)
        .with("duration_ms", duration_ms)
        .with("turns", t.turns)
        .with("input_tokens", t.input_tokens)
        .with("output_tokens", t.output_tokens)
        .with("tool_calls", t.tool_calls)
        .with("shell_calls", t.shell_calls)
        .with("reopen_count", 0)
}

/// `session_end`, hanging off `session_start`: the session's totals, and its children's usage
/// when it delegated.
pub fn session_end(
    session_event: &str,
    exit_status: &str,
    duration_ms: u64,
    t: &Totals,
    delegated: (u64, u64),
) -> TraceEvent {
    let end = TraceEvent::new(EventType::SessionEnd, Some(session_event))
        .with("total_turns", t.turns)
        .with("total_input_tokens", t.input_tokens)
        .with("total_output_tokens", t.output_tokens)
        .with("total_tool_calls", t.tool_calls)
        .with("total_shell_calls", t.shell_calls)
        .with("duration_ms", duration_ms)
        .with("exit_status", exit_status);
    if delegated == (0, 0) {
        return end;
    }
    end.with("delegated_input_tokens", delegated.0)
        .with("delegated_output_tokens", delegated.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_is_spelled_once_and_parses_back() {
        let names: std::collections::BTreeSet<&str> =
            EventType::ALL.iter().map(|t| t.as_str()).collect();
        assert_eq!(names.len(), EventType::ALL.len(), "a name is used twice");
        for t in EventType::ALL {
            assert_eq!(EventType::parse(t.as_str()), Some(t));
            assert_eq!(t.to_string(), t.as_str());
        }
        assert_eq!(EventType::parse("artifact_removed"), None);
        assert_eq!(EventType::parse("Session_Start"), None);
    }

    /// The recorded traces (ours in the fixtures, and the original Murmur's in the conformance
    /// folder) hold only lines whose type the readers know.
    #[test]
    fn every_recorded_trace_line_has_a_known_type() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files = Vec::new();
        let mut dirs = vec![
            root.join("tests/fixtures/traces"),
            root.join("../shared/conformance/traces"),
        ];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "jsonl") {
                    files.push(path);
                }
            }
        }
        assert!(files.len() >= 8, "found {files:?}");
        let mut seen = std::collections::HashSet::new();
        for file in files {
            for (n, line) in std::fs::read_to_string(&file).unwrap().lines().enumerate() {
                // A fixture of a killed run ends in a torn line, which readers skip too.
                let Ok(v) = serde_json::from_str::<Value>(line) else {
                    continue;
                };
                let kind = v["event_type"].as_str().unwrap_or_default();
                let t = EventType::parse(kind);
                assert!(
                    t.is_some(),
                    "{}:{}: unknown {kind:?}",
                    file.display(),
                    n + 1
                );
                seen.extend(t);
            }
        }
        assert!(seen.contains(&EventType::DelegationStart) && seen.contains(&EventType::Shell));
    }

    #[test]
    fn a_refusal_and_an_outcome_share_keys_and_order() {
        let refused = delegation(
            "evt_s",
            &DelegationEnd {
                capsule: "acme/x",
                version: "0.1.0",
                delegation_id: None,
                child_session_id: None,
                duration_ms: 0,
                outcome: "refused",
                reason: Some("no"),
                usage: None,
                node: None,
            },
        );
        let keys: Vec<String> = refused.fields().keys().cloned().collect();
        assert_eq!(
            keys,
            [
                "capsule",
                "version",
                "delegation_id",
                "child_session_id",
                "duration_ms",
                "outcome",
                "reason"
            ]
        );
        let ok = delegation(
            "evt_s",
            &DelegationEnd {
                capsule: "acme/x",
                version: "0.1.0",
                delegation_id: Some("dlg_1"),
                child_session_id: Some("ses_c"),
                duration_ms: 5,
                outcome: "ok",
                reason: None,
                usage: Some((1, 2, 3)),
                node: Some("n1"),
            },
        );
        let keys: Vec<String> = ok.fields().keys().cloned().collect();
        assert_eq!(keys.last().map(String::as_str), Some("usage"));
        assert_eq!(ok.field("node"), Some(json!("n1")));
        assert_eq!(
            ok.field("usage"),
            Some(json!({"input_tokens": 1, "output_tokens": 2, "turns": 3}))
        );
        assert_eq!(ok.field("reason"), Some(Value::Null));
        // The line's own text, in the order the original writes it.
        assert!(ok.to_line("ses_p").ends_with(
            r#""usage":{"input_tokens":1,"output_tokens":2,"turns":3}}
"#
        ));
    }

    #[test]
    fn session_start_writes_the_grants_and_paths_as_they_are() {
        use std::os::unix::ffi::OsStrExt;
        let grants = Grants {
            shell_allow: vec!["bash".into(), "git".into()],
            spawn_allow: vec!["acme/leaf".into()],
            plan_submit: true,
            network_allow: vec!["api.example.com".into()],
            ..Grants::default()
        };
        let workdir = Path::new(std::ffi::OsStr::from_bytes(b"/w/caf\xe9"));
        let line = session_start(
            "evt_s",
            &SessionStart {
                capsule_name: "acme/x",
                capsule_version: "0.1.0",
                model: "m",
                max_turns: None,
                capabilities: &[],
                tools_declared: &[],
                containment: &ContainmentFacts::default(),
                grants: &grants,
                system_prompt_source: "none",
                system_prompt_sha256: None,
                driver: "d",
                tool_refresh: "compaction",
                resumed_from: None,
                replay_of: None,
                resumed_totals: None,
                workdir: Some(workdir),
                spawned_by: None,
            },
        )
        .to_line("ses_x");
        assert!(
            line.contains(r#","effective_grants":{"shell_allow":["bash","git"],"spawn_allow":["acme/leaf"],"plan_submit":true,"peer_fetch_allow":[],"network_allow":["api.example.com"]},"#),
            "{line}"
        );
        // A folder whose name is not UTF-8 reads as its display.
        assert!(line.contains(",\"workdir\":\"/w/caf\u{fffd}\","), "{line}");
    }
}
