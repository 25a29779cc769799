//! Folding a trace into a [`Summary`]: everything the views print, in one streaming pass.
//!
//! Views never hold the events themselves: the reader hands each line to [`Builder::push`],
//! which updates counters and, at the detail level asked for, keeps one row per turn. Totals
//! come from `session_end` when it exists and from the lines otherwise, so a trace cut short
//! (a killed run, a run still going) still reads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::diagnostic::Diagnostic;

use super::event::Event;
use super::lenient::Usage;
use super::reader::TraceReader;

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
    /// Every tool-call latency (ms), for percentiles; kept at [`Detail::Totals`] only.
    #[serde(skip)]
    pub latencies: Vec<u32>,
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

/// Read a whole trace into a [`Summary`], streaming.
///
/// `E-TRC-001` for an empty trace, a trace with no `session_start`, or a corrupt line before the
/// last; `E-IO-*` when the file cannot be read.
pub fn load(path: &Path, detail: Detail) -> Result<Summary, Diagnostic> {
    let mut reader = TraceReader::open(path)?;
    let mut b = Builder::new(path, detail);
    for ev in &mut reader {
        b.push(ev?);
    }
    b.summary.torn_last_line = reader.torn_last_line;
    b.finish()
}

/// Incremental fold of events into a [`Summary`].
pub struct Builder {
    summary: Summary,
    detail: Detail,
    lines: u64,
    saw_start: bool,
    end_totals: Option<Totals>,
    /// Notes about the next turn (a retry or a tool refresh is written before its inference).
    pending: Vec<String>,
}

impl Builder {
    /// A builder for the trace at `path`.
    pub fn new(path: &Path, detail: Detail) -> Self {
        Builder {
            summary: Summary {
                path: path.to_path_buf(),
                ..Summary::default()
            },
            detail,
            lines: 0,
            saw_start: false,
            end_totals: None,
            pending: Vec::new(),
        }
    }

    fn note_next_turn(&mut self, text: String) {
        if self.detail != Detail::Totals {
            self.pending.push(text);
        }
    }

    fn note(&mut self, text: String) {
        if self.detail == Detail::Totals {
            return;
        }
        match self.summary.turns.last_mut() {
            Some(t) => t.notes.push(text),
            None => self.summary.preamble.push(text),
        }
    }

    /// Take one event into account.
    pub fn push(&mut self, ev: Event) {
        self.lines += 1;
        let s = &mut self.summary;
        if s.first_timestamp.is_none() {
            s.first_timestamp = ev.timestamp;
        }
        if ev.timestamp.is_some() {
            s.last_timestamp = ev.timestamp;
        }
        if s.session_id.is_empty() {
            if let Some(id) = &ev.session_id {
                s.session_id = id.clone();
            }
        }
        s.last_event = ev.event_type.clone();
        match ev.kind() {
            "session_start" => self.session_start(ev),
            "task_start" => s.tasks += 1,
            "task_continued" => {
                let n = ev.delegations.as_ref().map_or(0, Vec::len);
                let text = format!(
                    "continued with {n} delegation outcome{}{}",
                    if n == 1 { "" } else { "s" },
                    ev.waited_ms
                        .map(|w| format!(" (waited {})", super::format::duration(w.max(0) as u64)))
                        .unwrap_or_default()
                );
                self.note_next_turn(text);
            }
            kind if kind.starts_with("peer_") => {
                let key = format!("{kind} {}", ev.outcome.as_deref().unwrap_or("ok"));
                *s.peer.entry(key).or_default() += 1;
            }
            "inference" => self.inference(ev),
            "tool_call" => self.tool_call(ev),
            "shell" => self.shell(ev),
            "skill_call" => {
                s.skill_calls += 1;
                let name = ev.skill_name.unwrap_or_default();
                self.note(format!("skill {name}"));
            }
            "artifact_pulled" => {
                let p = Pull {
                    name: ev.name.unwrap_or_else(|| "?".into()),
                    version: ev.version.unwrap_or_else(|| "?".into()),
                    runtime: ev.runtime.unwrap_or_else(|| "tool".into()),
                    origin: ev.origin.unwrap_or_else(|| "runtime".into()),
                    trust: ev.trust.unwrap_or_else(|| "untrusted".into()),
                    fetched_from: ev.fetched_from,
                    owner_id: ev.owner_id,
                };
                let text = format!("pulled {}@{} ({}/{})", p.name, p.version, p.origin, p.trust);
                s.pulls.push(p);
                self.note(text);
            }
            "tools_refreshed" => {
                let r = Refresh {
                    turn: ev.turn,
                    trigger: ev.trigger.unwrap_or_default(),
                    added: ev.added.unwrap_or_default(),
                    removed: ev.removed.unwrap_or_default(),
                };
                let text = format!("tools refreshed ({}){}", r.trigger, change_list(&r));
                s.refreshes.push(r);
                self.note_next_turn(text);
            }
            "call_denied" => {
                let d = Denial {
                    turn: ev.turn,
                    event: ev.event,
                    hook_name: ev.hook_name,
                    target: ev.target,
                    reason: ev.reason,
                };
                let text = format!(
                    "denied {} by {}: {}",
                    d.target.as_deref().unwrap_or("?"),
                    d.hook_name.as_deref().unwrap_or("policy"),
                    d.reason.as_deref().unwrap_or("no reason given")
                );
                s.denials.push(d);
                self.note(text);
            }
            "inference_retry" => {
                let r = Retry {
                    turn: ev.turn,
                    attempt: ev.attempt,
                    max_retries: ev.max_retries,
                    reason: ev.reason,
                    provider_status: ev.provider_status,
                    delay_ms: ev.delay_ms,
                    error: ev.error,
                };
                let text = format!("retry {}", retry_text(&r));
                s.retries.push(r);
                self.note_next_turn(text);
            }
            "task_failed" => {
                let f = Failure {
                    turn: ev.turn,
                    cause: ev.cause,
                    reason: ev.reason,
                };
                let text = format!(
                    "task failed: {}{}",
                    f.cause.as_deref().unwrap_or("unknown cause"),
                    f.reason
                        .as_deref()
                        .map(|r| format!(" — {r}"))
                        .unwrap_or_default()
                );
                s.failures.push(f);
                self.note(text);
            }
            "plan_start" => {
                let id = ev.plan_id.unwrap_or_default();
                let text = format!(
                    "plan {id} started ({} steps)",
                    ev.step_count.map_or("?".into(), |n| n.to_string())
                );
                s.plans.push(Plan {
                    plan_id: id,
                    step_count: ev.step_count,
                    ..Plan::default()
                });
                self.note(text);
            }
            "plan_step" => {
                let step = PlanStep {
                    step_id: ev.step_id.unwrap_or_default(),
                    kind: ev.kind,
                    status: ev.status,
                    duration_ms: ev.duration_ms.map(|d| d.max(0) as u64),
                };
                let plan = plan_for(&mut s.plans, ev.plan_id);
                plan.steps.push(step);
            }
            "plan_end" => {
                let id = ev.plan_id.clone();
                let plan = plan_for(&mut s.plans, ev.plan_id);
                plan.outcome = ev.outcome.clone().or(ev.status.clone());
                let text = format!(
                    "plan {} {}",
                    id.unwrap_or_default(),
                    plan.outcome.as_deref().unwrap_or("ended")
                );
                self.note(text);
            }
            "delegation_start" => {
                let turn = s.turns.last().map(|t| t.turn);
                let d = Delegation {
                    delegation_id: ev.delegation_id,
                    capsule: ev.capsule.unwrap_or_else(|| "?".into()),
                    version: ev.version,
                    child_session_id: ev.child_session_id,
                    child_workdir: ev.child_workdir,
                    child_records_dir: ev.child_records_dir,
                    usage: ev.usage,
                    turn,
                    ..Delegation::default()
                };
                let text = format!(
                    "delegated to {} ({})",
                    d.capsule,
                    d.child_session_id.as_deref().unwrap_or("no child")
                );
                s.delegations.push(d);
                self.note(text);
            }
            "delegation" => self.delegation(ev),
            "task_end" => {}
            "session_end" => {
                s.ended = true;
                s.status = ev.exit_status;
                s.duration_ms = ev.duration_ms.map(|d| d.max(0) as u64);
                self.end_totals = Some(Totals {
                    turns: Event::n(ev.total_turns),
                    input_tokens: Event::n(ev.total_input_tokens),
                    output_tokens: Event::n(ev.total_output_tokens),
                    tool_calls: Event::n(ev.total_tool_calls),
                    shell_calls: Event::n(ev.total_shell_calls),
                });
            }
            _ => {}
        }
    }

    fn session_start(&mut self, ev: Event) {
        let s = &mut self.summary;
        if self.saw_start {
            return; // a resumed launch: keep the first identity
        }
        self.saw_start = true;
        if let Some(id) = ev.session_id {
            s.session_id = id;
        }
        s.capsule = ev.capsule_name;
        s.capsule_version = ev.capsule_version;
        s.model = ev.model;
        s.max_turns = ev.max_turns;
        s.tools_declared = ev.tools_declared.unwrap_or_default();
        s.spawned_by = ev.spawned_by;
        s.delegation_id = ev.delegation_id;
    }

    fn inference(&mut self, ev: Event) {
        let s = &mut self.summary;
        if ev.origin.as_deref().is_some_and(|o| o.starts_with("hook:")) {
            s.hook_inferences += 1;
            return;
        }
        let input = ev.input_tokens.map(|x| x.max(0) as u64);
        let output = ev.output_tokens.map(|x| x.max(0) as u64);
        s.counted.input_tokens += input.unwrap_or(0);
        s.counted.output_tokens += output.unwrap_or(0);
        let decision = ev.decision.unwrap_or_else(|| "?".into());
        if decision == "error" {
            s.failed_inferences += 1;
        } else {
            s.counted.turns += 1;
        }
        if self.detail >= Detail::Turns {
            s.turns.push(Turn {
                task: s.tasks,
                turn: ev.turn.unwrap_or(s.turns.len() as i64),
                decision,
                tool_name: ev.tool_name,
                input_tokens: input,
                output_tokens: output,
                error_code: ev.error_code,
                provider_status: ev.provider_status,
                before: std::mem::take(&mut self.pending),
                ..Turn::default()
            });
        }
    }

    fn tool_call(&mut self, ev: Event) {
        let s = &mut self.summary;
        let tool = ev.tool_name.unwrap_or_else(|| "?".into());
        let ok = ev.status.as_deref() == Some("ok");
        let ms = ev.duration_ms.map(|d| d.max(0) as u64);
        s.counted.tool_calls += 1;
        s.tool_calls.count += 1;
        if ok {
            s.tool_calls.ok += 1;
        } else {
            s.tool_calls.error += 1;
        }
        s.tool_calls.total_ms += ms.unwrap_or(0);
        s.tool_calls.max_ms = s.tool_calls.max_ms.max(ms.unwrap_or(0));
        let out_bytes = ev.output_bytes.map(|b| b.max(0) as u64);
        if let Some(stats) = s.tools.get_mut(&tool) {
            add_call(stats, ok, ms, out_bytes);
        } else {
            let mut stats = NameStats::default();
            add_call(&mut stats, ok, ms, out_bytes);
            s.tools.insert(tool.clone(), stats);
        }
        if self.detail == Detail::Totals {
            s.latencies
                .push(ms.unwrap_or(0).min(u64::from(u32::MAX)) as u32);
            return;
        }
        let call = Call {
            tool,
            status: ev.status.unwrap_or_else(|| "?".into()),
            duration_ms: ms,
            input_bytes: ev.input_bytes.map(|b| b.max(0) as u64),
            output_bytes: out_bytes,
            exit_code: None,
            error: ev.error,
            input: if self.detail == Detail::Full {
                ev.input
            } else {
                None
            },
        };
        match s.turns.last_mut() {
            Some(t) => t.calls.push(call),
            None => s.turns.push(Turn {
                task: s.tasks,
                turn: ev.turn.unwrap_or(0),
                decision: "?".into(),
                calls: vec![call],
                ..Turn::default()
            }),
        }
    }

    fn shell(&mut self, ev: Event) {
        let s = &mut self.summary;
        s.counted.shell_calls += 1;
        s.shell.count += 1;
        s.shell.total_ms += Event::n(ev.duration_ms);
        let code = ev.exit_code.unwrap_or(-1);
        if code != 0 {
            s.shell.failed += 1;
        }
        *s.shell.exit_codes.entry(code).or_default() += 1;
        if let Some(call) = s
            .turns
            .last_mut()
            .and_then(|t| t.calls.iter_mut().rev().find(|c| c.exit_code.is_none()))
        {
            call.exit_code = Some(code);
        }
    }

    fn delegation(&mut self, ev: Event) {
        let s = &mut self.summary;
        let existing = ev.delegation_id.as_ref().and_then(|id| {
            s.delegations
                .iter_mut()
                .find(|d| d.delegation_id.as_ref() == Some(id))
        });
        let d = match existing {
            Some(d) => d,
            None => {
                let turn = s.turns.last().map(|t| t.turn);
                s.delegations.push(Delegation {
                    delegation_id: ev.delegation_id.clone(),
                    capsule: ev.capsule.clone().unwrap_or_else(|| "?".into()),
                    version: ev.version.clone(),
                    child_session_id: ev.child_session_id.clone(),
                    turn,
                    ..Delegation::default()
                });
                s.delegations.last_mut().expect("just pushed")
            }
        };
        d.outcome = Some(ev.outcome.unwrap_or_else(|| "unknown".into()));
        d.reason = ev.reason;
        d.duration_ms = ev.duration_ms.map(|x| x.max(0) as u64);
        if ev.usage.is_some() {
            d.usage = ev.usage;
        }
        if d.child_session_id.is_none() {
            d.child_session_id = ev.child_session_id;
        }
        let text = format!(
            "delegation to {} ended: {}{}",
            d.capsule,
            d.outcome.as_deref().unwrap_or("?"),
            d.reason
                .as_deref()
                .map(|r| format!(" — {r}"))
                .unwrap_or_default()
        );
        self.note(text);
    }

    /// Check the trace was a session and return its summary.
    pub fn finish(mut self) -> Result<Summary, Diagnostic> {
        for text in std::mem::take(&mut self.pending) {
            self.note(text);
        }
        let s = &mut self.summary;
        if self.lines == 0 {
            return Err(Diagnostic::error(
                "E-TRC-001",
                format!(
                    "{}: trace file is empty (incomplete or zero-event session)",
                    s.path.display()
                ),
            )
            .with_hint("the session wrote no events; it may have failed before it started"));
        }
        if !self.saw_start {
            return Err(Diagnostic::error(
                "E-TRC-001",
                format!("{}: no session_start event found", s.path.display()),
            )
            .with_hint("this file does not look like a mur session trace"));
        }
        if s.session_id.is_empty() {
            s.session_id = s
                .path
                .parent()
                .and_then(Path::file_name)
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
        }
        match self.end_totals {
            Some(t) => s.totals = t,
            None => {
                s.totals = s.counted;
                for d in &s.delegations {
                    if let Some(u) = d.usage {
                        s.totals.input_tokens += u.input_tokens;
                        s.totals.output_tokens += u.output_tokens;
                    }
                }
                if let (Some(a), Some(b)) = (s.first_timestamp, s.last_timestamp) {
                    s.duration_ms = Some((b - a).max(0) as u64);
                }
            }
        }
        Ok(self.summary)
    }
}

fn add_call(stats: &mut NameStats, ok: bool, ms: Option<u64>, out_bytes: Option<u64>) {
    stats.calls += 1;
    if !ok {
        stats.errors += 1;
    }
    stats.total_ms += ms.unwrap_or(0);
    stats.max_ms = stats.max_ms.max(ms.unwrap_or(0));
    stats.output_bytes += out_bytes.unwrap_or(0);
}

fn plan_for(plans: &mut Vec<Plan>, id: Option<String>) -> &mut Plan {
    let id = id.unwrap_or_default();
    if let Some(i) = plans.iter().rposition(|p| p.plan_id == id) {
        return &mut plans[i];
    }
    plans.push(Plan {
        plan_id: id,
        ..Plan::default()
    });
    plans.last_mut().expect("just pushed")
}

/// `  +a +b  -c` for a refresh (empty when nothing changed).
pub fn change_list(r: &Refresh) -> String {
    let mut out = String::new();
    for a in &r.added {
        out.push_str(&format!("  +{a}"));
    }
    for x in &r.removed {
        out.push_str(&format!("  -{x}"));
    }
    out
}

/// One-line description of a retry: `attempt 1/3  HTTP 429  (status)  after 500ms`.
pub fn retry_text(r: &Retry) -> String {
    let mut out = format!(
        "attempt {}/{}",
        r.attempt.map_or("?".into(), |a| a.to_string()),
        r.max_retries.map_or("?".into(), |a| a.to_string())
    );
    if let Some(st) = r.provider_status {
        out.push_str(&format!("  HTTP {st}"));
    }
    if let Some(reason) = &r.reason {
        out.push_str(&format!("  ({reason})"));
    }
    if let Some(d) = r.delay_ms {
        out.push_str(&format!(
            "  after {}",
            super::format::duration(d.max(0) as u64)
        ));
    }
    out
}
