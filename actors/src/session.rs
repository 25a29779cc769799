//! The [`Session`] actor: one capsule (or sub-capsule) and its turn loop.
//!
//! The Session owns the conversation, the held tool array and the task's counters. Nothing it
//! does blocks its mailbox for long: the model call runs in a spawned task whose reply comes back
//! as [`SessionMsg::InferDone`], tool calls go to the [`Dispatcher`] and come back as
//! [`SessionMsg::ToolDone`], so a `Cancel` (Ctrl-C) or a status query is handled while either is
//! in flight. Every step is written to the session's [`TraceWriter`] as it happens; the trace is
//! fsynced at task end and session end, and `session_end` totals are the line counts.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::task::JoinHandle;

use crate::delegation::{outcome_text, ChildTable, DelegationOutcome, OutcomeStatus};
use crate::dispatcher::{
    CallKind, CallRequest, CallResult, Dispatched, Dispatcher, DispatcherArgs, DispatcherMsg,
    Effect,
};
use crate::ids;
use crate::model::{
    ContentBlock, InferError, InferReply, InferRequest, Message, RetryNote, RetrySink, StopReason,
    ToolSpec,
};
use crate::prompt;
use crate::spec::{Capture, SessionSpec};
use crate::staging;
use crate::supervisor::SupervisorMsg;
use crate::tool::ExecStatus;
use crate::trace::{Durability, TraceEvent, TraceMsg, TraceWriter, TraceWriterArgs};

/// How a session ended (`task_end.exit_status`, `session_end.exit_status`, `status:` of `mur run`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    /// The model answered.
    Ok,
    /// The task failed (driver error, malformed reply, runtime error).
    Failed,
    /// `inference.max_turns` ran out.
    MaxTurnsReached,
    /// Canceled (Ctrl-C, or the parent ended).
    Canceled,
}

impl ExitStatus {
    /// The trace and CLI spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ExitStatus::Ok => "ok",
            ExitStatus::Failed => "failed",
            ExitStatus::MaxTurnsReached => "max_turns_reached",
            ExitStatus::Canceled => "canceled",
        }
    }
}

/// Counters that end up in `task_end` and `session_end`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Counted `inference` lines.
    pub turns: u32,
    /// Input tokens (provider figure when reported, else the runtime's estimate).
    pub input_tokens: u64,
    /// Output tokens (same rule).
    pub output_tokens: u64,
    /// `tool_call` lines.
    pub tool_calls: u32,
    /// `shell` lines.
    pub shell_calls: u32,
}

/// What a finished session reports to whoever started it.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionReport {
    /// `ses_…`.
    pub session_id: String,
    /// How it ended.
    pub exit_status: ExitStatus,
    /// The text written to `out/result.txt`.
    pub result: String,
    /// Counters.
    pub totals: Totals,
    /// Wall time.
    pub duration_ms: u64,
    /// Set when the trace could not be written or synced.
    pub trace_error: Option<String>,
}

/// A session's state as the door reports it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SessionStatus {
    /// `ses_…`.
    pub session_id: String,
    /// Capsule name.
    pub name: String,
    /// Capsule version.
    pub version: String,
    /// `running` or `ended`.
    pub state: &'static str,
    /// Set once ended.
    pub exit_status: Option<&'static str>,
    /// Turns so far.
    pub turns: u32,
}

/// Messages the [`Session`] takes.
pub enum SessionMsg {
    /// Start the first turn (sent to itself once staged).
    Begin,
    /// The model call of `turn` finished.
    InferDone {
        /// The turn.
        turn: u32,
        /// The driver's answer.
        result: Result<InferReply, InferError>,
    },
    /// The driver is retrying a call of `turn`.
    Retry {
        /// The turn.
        turn: u32,
        /// What failed and how long it waits.
        note: RetryNote,
    },
    /// A tool call finished.
    ToolDone(Box<Dispatched>),
    /// End the task now, `canceled`.
    Cancel {
        /// Why (shown in the result).
        reason: String,
    },
    /// Report the session's status.
    Describe(RpcReplyPort<SessionStatus>),
    /// A delegation ended: the background-task message from a child (or its synthesized end).
    ChildOutcome(Box<DelegationOutcome>),
    /// A delegation's deadline passed; end the child if it still runs.
    DelegationDeadline {
        /// `dlg_…`.
        delegation_id: String,
    },
    /// The driver panicked: the session crashes (its parent sees `crashed`).
    Crash(String),
    /// Children did not report in time after the task ended: stop anyway.
    DrainTimeout,
    /// End the task with this status and result (queued by the session itself, so it is
    /// handled after every message already in the mailbox).
    Finish {
        /// How the task ended.
        status: ExitStatus,
        /// The result text for `out/result.txt`.
        text: String,
    },
}

/// Called once with the report when the session ends.
pub type ReportSink = Box<dyn FnOnce(SessionReport) + Send>;

/// Arguments to start a [`Session`].
pub struct SessionArgs {
    /// What to run.
    pub spec: SessionSpec,
    /// Who hears the outcome.
    pub report: ReportSink,
    /// The process's Supervisor (for delegations); `None` runs without delegation.
    pub supervisor: Option<ActorRef<SupervisorMsg>>,
    /// The process's Registry (for pulls); `None` runs without pulls.
    pub registry: Option<ActorRef<crate::registry::RegistryMsg>>,
}

/// The session actor.
pub struct Session;

/// The session's state.
pub struct SessionState {
    spec: SessionSpec,
    trace: ActorRef<TraceMsg>,
    dispatcher: ActorRef<DispatcherMsg>,
    report: Option<ReportSink>,
    system: Arc<str>,
    tools: Arc<Vec<ToolSpec>>,
    messages: Arc<Vec<Message>>,
    /// Serialized bytes of system + tools + messages, for the token estimate.
    payload_bytes: usize,
    tools_sha: Option<String>,
    system_sha: Option<String>,
    task_id: String,
    session_event: String,
    task_event: String,
    turn_event: String,
    turn: u32,
    pending: VecDeque<CallRequest>,
    in_flight: Option<JoinHandle<()>>,
    totals: Totals,
    /// Tokens of children already added into `totals`.
    delegated: (u64, u64),
    started: Instant,
    ended: Option<ExitStatus>,
    children: ChildTable,
    supervisor: Option<ActorRef<SupervisorMsg>>,
    /// Set while the model ended its turn and the task waits for outcomes (since when).
    waiting: Option<Instant>,
    continuations: u32,
    /// The task ended; the actor stops when the listed children have reported.
    draining: bool,
    /// A pull or removal changed the inventory since the last model call.
    refresh_tools: bool,
    /// Bytes of the serialized tool array (part of `payload_bytes`).
    tools_bytes: usize,
    /// The first model call was sent from `pre_start`.
    first_call_sent: bool,
}

/// Forwards a driver's retry notes to the session as messages.
struct SessionRetrySink {
    session: ActorRef<SessionMsg>,
    turn: u32,
}

impl RetrySink for SessionRetrySink {
    fn retrying(&self, note: RetryNote) {
        let _ = self.session.send_message(SessionMsg::Retry {
            turn: self.turn,
            note,
        });
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn estimate_tokens(bytes: usize) -> u64 {
    bytes.div_ceil(4) as u64
}

/// The result text of a task that used all its turns.
pub fn max_turns_text(max: u32) -> String {
    format!(
        "error: max_turns exceeded: the task used all {max} inference turns inference.max_turns allows (turn 0 to turn {})",
        max.saturating_sub(1)
    )
}

impl SessionState {
    fn emit(&self, event: TraceEvent) {
        let _ = self.trace.send_message(TraceMsg::Append(event));
    }

    /// Create the session's folders and staged files.
    fn stage(&self) -> Result<(), String> {
        let paths = &self.spec.paths;
        let dirs: &[&std::path::PathBuf] = if paths.workdir == paths.records_dir {
            &[&paths.records_dir]
        } else {
            &[&paths.records_dir, &paths.workdir]
        };
        for dir in dirs {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        staging::stage(
            &paths.records_dir,
            &self.spec.tools,
            &self.spec.task,
            &self.spec.capsule_name,
        )
        .map_err(|e| format!("cannot stage {}: {e}", paths.records_dir.display()))
    }

    fn push_message(&mut self, message: Message) {
        self.payload_bytes += serde_json::to_vec(&message).map(|v| v.len()).unwrap_or(0);
        Arc::make_mut(&mut self.messages).push(message);
    }

    fn start_turn(&mut self, myself: &ActorRef<SessionMsg>) {
        let settled = self.children.take_settled();
        self.deliver(settled);
        self.refresh_tool_array();
        if let Some(max) = self.spec.max_turns {
            if self.totals.turns >= max {
                self.finish_later(myself, ExitStatus::MaxTurnsReached, max_turns_text(max));
                return;
            }
        }
        let request = InferRequest {
            model: self.spec.model.clone(),
            max_tokens: self.spec.max_tokens,
            system: self.system.to_string(),
            messages: self.messages.clone(),
            tools: self.tools.clone(),
            prompt_cache_key: Some(cache_key(
                &self.spec.capsule_name,
                &self.spec.capsule_version,
            )),
        };
        let turn = self.totals.turns;
        self.turn = turn;
        self.in_flight = Some(spawn_infer(
            myself.clone(),
            self.spec.driver.clone(),
            request,
            turn,
        ));
    }

    /// Queue the end of the task; the actual finish runs in the handler (it awaits fsync).
    fn finish_later(&mut self, myself: &ActorRef<SessionMsg>, status: ExitStatus, text: String) {
        self.ended = Some(status);
        let _ = myself.send_message(SessionMsg::Finish { status, text });
    }

    fn fail(&mut self, myself: &ActorRef<SessionMsg>, cause: &str, reason: &str) {
        self.emit(
            TraceEvent::new("task_failed", Some(&self.task_event))
                .with("task_id", &self.task_id)
                .with("turn", self.turn)
                .with("cause", cause)
                .with("reason", truncate(reason, 2000)),
        );
        self.finish_later(myself, ExitStatus::Failed, format!("error: {reason}"));
    }

    fn on_reply(&mut self, myself: &ActorRef<SessionMsg>, turn: u32, reply: InferReply) {
        let response = serde_json::to_vec(&reply.content).unwrap_or_default();
        let estimate_in = estimate_tokens(self.payload_bytes);
        let estimate_out = estimate_tokens(response.len());
        let input_tokens = reply.usage.input_tokens.unwrap_or(estimate_in);
        let output_tokens = reply.usage.output_tokens.unwrap_or(estimate_out);
        self.totals.turns += 1;
        self.totals.input_tokens += input_tokens;
        self.totals.output_tokens += output_tokens;
        let calls: Vec<(String, String, Value)> = reply
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolCall { id, name, input } => {
                    Some((id.clone(), name.clone(), input.clone()))
                }
                _ => None,
            })
            .collect();
        let decision = match reply.stop_reason {
            StopReason::ToolCall => "tool_call",
            StopReason::EndTurn => "end_turn",
            _ => "text",
        };
        let mut ev = TraceEvent::new("inference", Some(&self.task_event))
            .with("turn", turn)
            .with("task_id", &self.task_id)
            .with("input_tokens", input_tokens)
            .with("output_tokens", output_tokens)
            .with("decision", decision)
            .with("stop_reason", reply.stop_reason.as_str())
            .with("tool_name", calls.first().map(|c| c.1.as_str()))
            .with_opt("input_tokens_actual", reply.usage.input_tokens)
            .with_opt("output_tokens_actual", reply.usage.output_tokens)
            .with_opt("cached_tokens", reply.usage.cached_tokens)
            .with_opt("cache_write_tokens", reply.usage.cache_write_tokens)
            .with_opt("thinking_tokens", reply.usage.thinking_tokens)
            .with("max_output_tokens", self.spec.max_tokens)
            .with_opt("attempts", (reply.attempts > 1).then_some(reply.attempts));
        if self.spec.capture != Capture::None {
            ev = ev
                .with("system_sha", &self.system_sha)
                .with("tools_sha", &self.tools_sha)
                .with("response_sha", sha256_hex(&response));
        }
        self.turn_event = ev.event_id.clone();
        self.emit(ev);
        match reply.stop_reason {
            StopReason::ToolCall => {
                if calls.is_empty() {
                    self.fail(
                        myself,
                        "malformed_response",
                        "response stop_reason=tool_call but no tool_call blocks were present",
                    );
                    return;
                }
                self.push_message(Message::Assistant {
                    content: reply.content,
                });
                for (seq, (id, name, input)) in calls.into_iter().enumerate() {
                    self.pending.push_back(CallRequest {
                        seq,
                        turn,
                        id,
                        name,
                        input,
                        parent_event: self.turn_event.clone(),
                    });
                }
                self.dispatch_next(myself);
            }
            StopReason::EndTurn | StopReason::MaxTokens => {
                let mut text = reply
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::Text { text } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                if reply.stop_reason == StopReason::MaxTokens {
                    text.push_str(&format!(
                        "\n\n[truncated at the inference.max_tokens output cap of {} tokens — this is a fragment, not a finished answer]",
                        self.spec.max_tokens
                    ));
                }
                self.push_message(Message::Assistant {
                    content: reply.content,
                });
                let turns_left = self
                    .spec
                    .max_turns
                    .is_none_or(|max| self.totals.turns < max);
                if self.children.outstanding() > 0 && turns_left {
                    // Wait, spending nothing, and continue once with every outcome.
                    self.waiting = Some(Instant::now());
                } else if self.children.has_settled() && turns_left {
                    self.waiting = Some(Instant::now());
                    self.continue_with_outcomes(myself);
                } else {
                    self.finish_later(myself, ExitStatus::Ok, text);
                }
            }
            StopReason::Other(s) => {
                self.fail(
                    myself,
                    "malformed_response",
                    &format!("unsupported stop_reason '{s}'"),
                );
            }
        }
    }

    fn on_infer_error(&mut self, myself: &ActorRef<SessionMsg>, turn: u32, err: InferError) {
        self.emit(
            TraceEvent::new("inference", Some(&self.task_event))
                .with("turn", turn)
                .with("task_id", &self.task_id)
                .with("decision", "error")
                .with("stop_reason", "error")
                .with("tool_name", Value::Null)
                .with("error_code", err.kind.as_str())
                .with("error", truncate(&err.message, 2000))
                .with_opt("provider_status", err.provider_status)
                .with_opt("attempts", (err.attempts > 1).then_some(err.attempts))
                .with_opt("retry_stopped", err.retry_stopped.as_deref()),
        );
        self.fail(myself, err.kind.as_str(), &err.message);
    }

    /// Write the terminal `delegation` line of one outcome.
    fn delegation_line(&self, o: &DelegationOutcome, reason: Option<&str>) {
        self.emit(
            TraceEvent::new("delegation", Some(&self.session_event))
                .with("capsule", &o.capsule)
                .with("version", &o.version)
                .with("delegation_id", &o.delegation_id)
                .with("child_session_id", &o.child_session_id)
                .with("duration_ms", o.duration_ms)
                .with("outcome", o.status.as_str())
                .with("reason", reason.or(o.detail.as_deref()))
                .with(
                    "usage",
                    json!({"input_tokens": o.totals.input_tokens, "output_tokens": o.totals.output_tokens, "turns": o.totals.turns}),
                ),
        );
    }

    /// Show settled outcomes to the model: one user message, before the next model call.
    fn deliver(&mut self, settled: Vec<DelegationOutcome>) {
        if settled.is_empty() {
            return;
        }
        let texts: Vec<String> = settled
            .iter()
            .map(|o| {
                self.delegation_line(o, None);
                outcome_text(o)
            })
            .collect();
        self.push_message(Message::user_text(texts.join("\n\n")));
    }

    /// The model ended its turn and every outcome is in: continue the task once with all of them.
    fn continue_with_outcomes(&mut self, myself: &ActorRef<SessionMsg>) {
        let Some(since) = self.waiting.take() else {
            return;
        };
        let settled = self.children.take_settled();
        self.continuations += 1;
        let ids: Vec<&str> = settled.iter().map(|o| o.delegation_id.as_str()).collect();
        self.emit(
            TraceEvent::new("task_continued", Some(&self.task_event))
                .with("task_id", &self.task_id)
                .with("continuation_number", self.continuations)
                .with("delegations", &ids)
                .with("member_calls", Vec::<String>::new())
                .with("waited_ms", since.elapsed().as_millis() as u64)
                .with(
                    "turns_remaining",
                    self.spec
                        .max_turns
                        .map(|m| m.saturating_sub(self.totals.turns)),
                ),
        );
        self.deliver(settled);
        self.start_turn(myself);
    }

    /// A pull or removal changed the inventory: record it, and offer the new tool array from
    /// the next model call (with a `tools_refreshed` line before it).
    fn tools_changed(&mut self, change: crate::dispatcher::ToolsChange) {
        if let Some(p) = change.pulled {
            self.emit(
                TraceEvent::new("artifact_pulled", Some(&self.session_event))
                    .with("name", &p.name)
                    .with("version", &p.version)
                    .with("runtime", &p.runtime)
                    .with("origin", &p.origin)
                    .with(
                        "session",
                        (p.origin == "runtime").then_some(&self.spec.session_id),
                    )
                    .with(
                        "trust",
                        if p.origin == "runtime" {
                            "untrusted"
                        } else {
                            "trusted"
                        },
                    )
                    .with("fetched_from", &p.fetched_from)
                    .with_opt("owner_id", p.owner_id),
            );
            self.spec.tools.retain(|t| t.name != p.tool.name);
            self.spec.tools.push(p.tool);
        }
        if let Some(name) = change.removed {
            self.spec.tools.retain(|t| t.name != name);
            // A removed artifact hands its name back to a same-named shell binary.
            if self.spec.grants.shell_allow.contains(&name) {
                self.spec.tools.push(crate::provided::shell_tool(&name));
            }
        }
        self.spec.tools.sort_by(|a, b| a.name.cmp(&b.name));
        self.refresh_tools = true;
    }

    /// Rebuild the held tool array if the agent changed it; writes `tools_refreshed` when the
    /// array the model is sent differs.
    fn refresh_tool_array(&mut self) {
        if !std::mem::take(&mut self.refresh_tools) {
            return;
        }
        let tools: Vec<ToolSpec> = self.spec.tools.iter().map(|t| t.spec()).collect();
        if tools == *self.tools {
            return;
        }
        let before: std::collections::BTreeSet<&str> =
            self.tools.iter().map(|t| t.name.as_str()).collect();
        let after: std::collections::BTreeSet<&str> =
            tools.iter().map(|t| t.name.as_str()).collect();
        let added: Vec<&str> = after.difference(&before).copied().collect();
        let removed: Vec<&str> = before.difference(&after).copied().collect();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        self.emit(
            TraceEvent::new("tools_refreshed", Some(&self.task_event))
                .with("turn", self.totals.turns)
                .with("task_id", &self.task_id)
                .with("trigger", "agent")
                .with("added", &added)
                .with("removed", &removed)
                .with("tools", &names),
        );
        let json = serde_json::to_vec(&tools).unwrap_or_default();
        self.payload_bytes =
            self.payload_bytes + json.len() - self.tools_bytes.min(self.payload_bytes);
        self.tools_bytes = json.len();
        if self.tools_sha.is_some() {
            self.tools_sha = Some(sha256_hex(&json));
        }
        self.tools = Arc::new(tools);
    }

    /// A child's outcome message (or a synthesized one) arrived.
    fn child_outcome(&mut self, myself: &ActorRef<SessionMsg>, o: DelegationOutcome) {
        if self.ended.is_some() {
            // Draining: the task ended, the child has now ended too.
            self.children.settle(o);
            if self.draining && self.report.is_none() && self.children.running().is_empty() {
                myself.stop(None);
            }
            return;
        }
        self.on_outcome(myself, o);
    }

    /// A delegation settled (answered, crashed, or ended by its deadline).
    fn on_outcome(&mut self, myself: &ActorRef<SessionMsg>, outcome: DelegationOutcome) {
        let tokens = (outcome.totals.input_tokens, outcome.totals.output_tokens);
        if !self.children.settle(outcome) {
            return;
        }
        self.totals.input_tokens += tokens.0;
        self.totals.output_tokens += tokens.1;
        self.delegated.0 += tokens.0;
        self.delegated.1 += tokens.1;
        if self.waiting.is_some() && self.children.outstanding() == 0 {
            self.continue_with_outcomes(myself);
        }
    }

    fn dispatch_next(&mut self, myself: &ActorRef<SessionMsg>) {
        match self.pending.pop_front() {
            Some(call) => {
                let _ = self.dispatcher.send_message(DispatcherMsg::Dispatch(call));
            }
            None => self.start_turn(myself),
        }
    }

    fn on_tool_done(&mut self, myself: &ActorRef<SessionMsg>, d: Dispatched) {
        if let Some(Effect::CallDenied(denied)) = &d.effect {
            // Nothing ran: no tool_call or shell line, only the refusal.
            self.emit(
                TraceEvent::new("call_denied", Some(&self.turn_event))
                    .with("turn", d.request.turn)
                    .with("task_id", &self.task_id)
                    .with("event", &denied.event)
                    .with("hook_name", &denied.hook)
                    .with("target", &denied.target)
                    .with("reason", truncate(&denied.reason, 2000)),
            );
            let text = d.text().to_string();
            self.push_message(Message::Tool {
                tool_call_id: d.request.id,
                is_error: true,
                content: vec![ContentBlock::Text { text }],
            });
            self.dispatch_next(myself);
            return;
        }
        let input_bytes = serde_json::to_vec(&d.request.input)
            .map(|v| v.len())
            .unwrap_or(0);
        let (status, output_bytes, error, shell) = match &d.result {
            CallResult::Ran {
                status,
                output_bytes,
                shell,
                ..
            } => (
                if *status == ExecStatus::Passed {
                    "ok"
                } else {
                    "error"
                },
                *output_bytes,
                None,
                shell.clone(),
            ),
            CallResult::Refused { text } => ("error", 0, Some(truncate(text, 2000)), None),
        };
        let content = self.spec.capture == Capture::Content;
        let ev = if d.kind == CallKind::Skill {
            TraceEvent::new("skill_call", Some(&self.turn_event))
                .with("turn", d.request.turn)
                .with("task_id", &self.task_id)
                .with("skill_name", &d.request.name)
                .with("output_bytes", output_bytes)
                .with("duration_ms", d.duration_ms)
                .with("status", status)
                .with_opt("error", error)
        } else {
            self.totals.tool_calls += 1;
            TraceEvent::new("tool_call", Some(&self.turn_event))
                .with("turn", d.request.turn)
                .with("task_id", &self.task_id)
                .with("tool_name", &d.request.name)
                .with("tool_call_id", &d.request.id)
                .with("input", crate::provided::redact_handles(&d.request.input))
                .with("input_bytes", input_bytes)
                .with_opt(
                    "output",
                    content.then(|| crate::provided::redact_handles_text(d.text())),
                )
                .with("output_bytes", output_bytes)
                .with("duration_ms", d.duration_ms)
                .with("status", status)
                .with_opt("error", error)
        };
        self.emit(ev);
        if let Some(sh) = shell {
            self.totals.shell_calls += 1;
            self.emit(
                TraceEvent::new("shell", Some(&self.turn_event))
                    .with("turn", d.request.turn)
                    .with("task_id", &self.task_id)
                    .with("binary", &sh.binary)
                    .with("command", crate::provided::redact_handles_text(&sh.command))
                    .with("exit_code", sh.exit_code)
                    .with("stdout_bytes", sh.stdout_bytes)
                    .with("stderr_bytes", sh.stderr_bytes)
                    .with("duration_ms", d.duration_ms),
            );
        }
        let is_error = d.is_error();
        let Dispatched {
            request,
            result,
            effect,
            ..
        } = d;
        match effect {
            Some(Effect::DelegationStarted {
                started,
                capsule,
                version,
            }) => {
                self.emit(
                    TraceEvent::new("delegation_start", Some(&self.session_event))
                        .with("delegation_id", &started.delegation_id)
                        .with("capsule", &capsule)
                        .with("version", &version)
                        .with("child_session_id", &started.session_id)
                        .with("child_workdir", started.workdir.display().to_string())
                        .with(
                            "child_records_dir",
                            started.records_dir.display().to_string(),
                        ),
                );
                self.children.started(&started, &capsule, &version);
                let delegation_id = started.delegation_id.clone();
                myself.send_after(self.spec.delegation_deadline, move || {
                    SessionMsg::DelegationDeadline { delegation_id }
                });
            }
            Some(Effect::DelegationRefused {
                capsule,
                version,
                reason,
            }) => self.emit(
                TraceEvent::new("delegation", Some(&self.session_event))
                    .with("capsule", capsule)
                    .with("version", version)
                    .with("delegation_id", Value::Null)
                    .with("child_session_id", Value::Null)
                    .with("duration_ms", 0)
                    .with("outcome", "refused")
                    .with("reason", reason),
            ),
            Some(Effect::ToolsChanged(change)) => self.tools_changed(*change),
            Some(Effect::CallDenied(_)) | None => {}
        }
        let text = match result {
            CallResult::Ran { text, .. } | CallResult::Refused { text } => text,
        };
        self.push_message(Message::Tool {
            tool_call_id: request.id,
            is_error,
            content: vec![ContentBlock::Text { text }],
        });
        self.dispatch_next(myself);
    }

    /// End children still running, writing each delegation's terminal line with `reason`.
    fn end_children(&mut self, status: ExitStatus) {
        let reason = match status {
            ExitStatus::Canceled => "the delegating task was cancelled".to_string(),
            ExitStatus::Ok => {
                "the delegating task had no inference turn left to read this outcome".to_string()
            }
            other => format!(
                "the delegating task ended {} before this sub-capsule finished",
                other.as_str()
            ),
        };
        for (dlg, child) in self.children.running() {
            if let Some(o) =
                self.children
                    .synthesize(&dlg, OutcomeStatus::Terminated, reason.clone())
            {
                self.delegation_line(&o, Some(&reason));
            }
            let _ = child.send_message(SessionMsg::Cancel {
                reason: "the parent ended this delegation".into(),
            });
            self.draining = true;
        }
        // Outcomes that arrived but were never shown to the model still get their line.
        for o in self.children.take_settled() {
            self.delegation_line(&o, None);
        }
    }

    /// Write the task's last lines and sync the trace; returns the report.
    async fn close(&mut self, status: ExitStatus, text: String) -> SessionReport {
        self.ended = Some(status);
        self.waiting = None;
        if let Some(h) = self.in_flight.take() {
            h.abort();
        }
        let _ = self.dispatcher.send_message(DispatcherMsg::CancelAll);
        self.end_children(status);
        let out = self.spec.paths.records_dir.join("out");
        let mut trace_error = std::fs::create_dir_all(&out)
            .and_then(|_| std::fs::write(out.join("result.txt"), &text))
            .err()
            .map(|e| format!("cannot write {}: {e}", out.join("result.txt").display()));
        let duration_ms = self.started.elapsed().as_millis() as u64;
        let t = self.totals;
        self.emit(
            TraceEvent::new("task_end", Some(&self.task_event))
                .with("task_id", &self.task_id)
                .with("exit_status", status.as_str())
                .with("duration_ms", duration_ms)
                .with("turns", t.turns)
                .with("input_tokens", t.input_tokens)
                .with("output_tokens", t.output_tokens)
                .with("tool_calls", t.tool_calls)
                .with("shell_calls", t.shell_calls)
                .with("reopen_count", 0),
        );
        let mut end = TraceEvent::new("session_end", Some(&self.session_event))
            .with("total_turns", t.turns)
            .with("total_input_tokens", t.input_tokens)
            .with("total_output_tokens", t.output_tokens)
            .with("total_tool_calls", t.tool_calls)
            .with("total_shell_calls", t.shell_calls)
            .with("duration_ms", duration_ms)
            .with("exit_status", status.as_str());
        if self.delegated != (0, 0) {
            end = end
                .with("delegated_input_tokens", self.delegated.0)
                .with("delegated_output_tokens", self.delegated.1);
        }
        self.emit(end);
        // The root syncs the filesystem once (covering every child's trace); children only
        // make sure their lines are written.
        let durability = if self.spec.spawned_by.is_none() {
            Durability::Filesystem
        } else {
            Durability::Written
        };
        match ractor::call!(self.trace, |r| TraceMsg::Sync(durability, r)) {
            Ok(Err(e)) => {
                trace_error.get_or_insert(e);
            }
            Err(e) => {
                trace_error.get_or_insert(format!("trace writer stopped: {e}"));
            }
            Ok(Ok(())) => {}
        }
        SessionReport {
            session_id: self.spec.session_id.clone(),
            exit_status: status,
            result: text,
            totals: t,
            duration_ms,
            trace_error,
        }
    }

    /// End the task, report, and stop (once children still running have reported).
    async fn finish(&mut self, myself: &ActorRef<SessionMsg>, status: ExitStatus, text: String) {
        let report = self.close(status, text).await;
        if let Some(sink) = self.report.take() {
            sink(report);
        }
        if self.draining {
            myself.send_after(std::time::Duration::from_secs(5), || {
                SessionMsg::DrainTimeout
            });
        } else {
            myself.stop(None);
        }
    }
}

/// Run one model call in a task of its own; its answer comes back as `InferDone` (or `Crash`
/// when the driver panics), so the Session's mailbox never waits on a model.
fn spawn_infer(
    me: ActorRef<SessionMsg>,
    driver: Arc<dyn crate::model::ModelDriver>,
    request: InferRequest,
    turn: u32,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let sink = SessionRetrySink {
            session: me.clone(),
            turn,
        };
        let call = std::panic::AssertUnwindSafe(driver.infer(&request, &sink));
        match futures::FutureExt::catch_unwind(call).await {
            Ok(result) => {
                drop(request);
                let _ = me.send_message(SessionMsg::InferDone { turn, result });
            }
            Err(panic) => {
                let text = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "the model driver panicked".into());
                let _ = me.send_message(SessionMsg::Crash(text));
            }
        }
    })
}

/// `<name>:<version>`, shortened to 64 chars with a digest when longer.
pub fn cache_key(name: &str, version: &str) -> String {
    let key = format!("{name}:{version}");
    if key.len() <= 64 {
        return key;
    }
    let digest = sha256_hex(key.as_bytes());
    let mut head: String = key.chars().take(47).collect();
    head.push(':');
    head.push_str(&digest[..16]);
    head
}

/// Cut `s` to at most `max` bytes on a char boundary.
pub fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

#[ractor::async_trait]
impl Actor for Session {
    type Msg = SessionMsg;
    type State = SessionState;
    type Arguments = SessionArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: SessionArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let mut spec = args.spec;
        spec.tools.sort_by(|a, b| a.name.cmp(&b.name));
        let system: Arc<str> = prompt::system_prompt(&spec).into();
        let tools: Arc<Vec<ToolSpec>> = Arc::new(spec.tools.iter().map(|t| t.spec()).collect());
        let first = Message::user_text(spec.task.clone());
        let messages = Arc::new(vec![first]);
        // The first model call goes out before anything else is set up (trace writer,
        // dispatcher, hashes, files): a delegated child starts thinking at once. `Begin` is
        // queued first, so it (staging) is handled before that call's answer.
        myself.send_message(SessionMsg::Begin)?;
        let in_flight = (!spec.task.trim().is_empty() && spec.max_turns != Some(0)).then(|| {
            spawn_infer(
                myself.clone(),
                spec.driver.clone(),
                InferRequest {
                    model: spec.model.clone(),
                    max_tokens: spec.max_tokens,
                    system: system.to_string(),
                    messages: messages.clone(),
                    tools: tools.clone(),
                    prompt_cache_key: Some(cache_key(&spec.capsule_name, &spec.capsule_version)),
                },
                0,
            )
        });
        let paths = &spec.paths;
        let (trace, _) = Actor::spawn_linked(
            None,
            TraceWriter,
            TraceWriterArgs {
                path: paths.records_dir.join("trace.jsonl"),
                session_id: spec.session_id.clone(),
            },
            myself.get_cell(),
        )
        .await
        .map_err(|e| format!("cannot start the trace writer: {e}"))?;
        let tools_json = serde_json::to_vec(&*tools).unwrap_or_default();
        let hashes = spec.capture != Capture::None;
        let tools_declared: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        let capabilities = capability_names(&spec);
        let start = TraceEvent::new("session_start", None)
            .with("capsule_name", &spec.capsule_name)
            .with("capsule_version", &spec.capsule_version)
            .with("model", &spec.model)
            .with("max_turns", spec.max_turns)
            .with("capabilities", capabilities)
            .with("tools_declared", &tools_declared)
            .with(
                "effective_grants",
                json!({
                    "shell_allow": spec.grants.shell_allow,
                    "spawn_allow": spec.grants.spawn_allow,
                    "plan_submit": spec.grants.plan_submit,
                    "peer_fetch_allow": spec.grants.peer_fetch_allow,
                    "network_allow": spec.grants.network_allow,
                }),
            )
            .with("system_prompt_source", spec.system_prompt_source)
            .with(
                "system_prompt_sha256",
                spec.operator_prompt
                    .as_deref()
                    .map(|p| sha256_hex(p.as_bytes())),
            )
            .with("driver", spec.driver.name())
            .with("tool_refresh", &spec.tool_refresh)
            .with("runtime_artifacts", Vec::<Value>::new())
            .with("resumed_from", Value::Null)
            .with("context_id", Value::Null)
            .with_opt(
                "spawned_by",
                spec.spawned_by.as_ref().map(|s| &s.parent_session_id),
            )
            .with_opt(
                "delegation_id",
                spec.spawned_by.as_ref().map(|s| &s.delegation_id),
            );
        let session_event = start.event_id.clone();
        let _ = trace.send_message(TraceMsg::Append(start));
        let task_id = ids::mint("tsk_");
        let task = TraceEvent::new("task_start", Some(&session_event))
            .with("task_id", &task_id)
            .with("context_id", ids::mint("ctx_"))
            .with("source", "task_md")
            .with("origin", "user")
            .with("trust", "trusted")
            .with("lane", "user")
            .with("message_parts_bytes", spec.task.len());
        let task_event = task.event_id.clone();
        let _ = trace.send_message(TraceMsg::Append(task));
        let (dispatcher, _) = Actor::spawn_linked(
            None,
            Dispatcher,
            DispatcherArgs {
                gate: spec.gate.clone(),
                session_id: spec.session_id.clone(),
                depth: spec.depth,
                supervisor: args.supervisor.clone(),
                registry: args.registry.clone(),
                artifacts: spec.artifacts.clone(),
                trace: trace.clone(),
                session_event: session_event.clone(),
                delegation_deadline: spec.delegation_deadline,
                session: myself.clone(),
                tools: spec.tools.clone(),
                grants: spec.grants.clone(),
                executors: spec.executors.clone(),
                paths: spec.paths.clone(),
            },
            myself.get_cell(),
        )
        .await
        .map_err(|e| format!("cannot start the dispatcher: {e}"))?;

        let payload_bytes = system.len()
            + tools_json.len()
            + serde_json::to_vec(&messages[0])
                .map(|v| v.len())
                .unwrap_or(0);
        let first_call_sent = in_flight.is_some();
        Ok(SessionState {
            first_call_sent,
            system_sha: hashes.then(|| sha256_hex(system.as_bytes())),
            tools_sha: hashes.then(|| sha256_hex(&tools_json)),
            system,
            tools,
            messages,
            payload_bytes,
            trace,
            dispatcher,
            report: Some(args.report),
            task_id,
            session_event,
            turn_event: task_event.clone(),
            task_event,
            turn: 0,
            pending: VecDeque::new(),
            in_flight,
            totals: Totals::default(),
            delegated: (0, 0),
            started: Instant::now(),
            ended: None,
            children: ChildTable::default(),
            supervisor: args.supervisor,
            waiting: None,
            continuations: 0,
            draining: false,
            refresh_tools: false,
            tools_bytes: tools_json.len(),
            spec,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: SessionMsg,
        state: &mut SessionState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SessionMsg::Describe(reply) => {
                let _ = reply.send(SessionStatus {
                    session_id: state.spec.session_id.clone(),
                    name: state.spec.capsule_name.clone(),
                    version: state.spec.capsule_version.clone(),
                    state: if state.report.is_some() {
                        "running"
                    } else {
                        "ended"
                    },
                    exit_status: state.ended.map(ExitStatus::as_str),
                    turns: state.totals.turns,
                });
            }
            SessionMsg::Finish { status, text } => {
                if state.report.is_some() {
                    state.finish(&myself, status, text).await;
                }
            }
            SessionMsg::Cancel { reason } => {
                if state.report.is_none() || state.ended.is_some() {
                    return Ok(());
                }
                let phase = if state.in_flight.is_some() {
                    "inference"
                } else if state.waiting.is_some() {
                    "delegation"
                } else {
                    "turn"
                };
                state.emit(
                    TraceEvent::new("task_canceled", Some(&state.task_event))
                        .with("task_id", &state.task_id)
                        .with("turn", state.turn)
                        .with("phase", phase)
                        .with("reason", &reason),
                );
                state
                    .finish(
                        &myself,
                        ExitStatus::Canceled,
                        format!("error: task canceled: {reason}"),
                    )
                    .await;
            }
            SessionMsg::DrainTimeout => {
                if state.report.is_none() {
                    myself.stop(None);
                }
            }
            SessionMsg::ChildOutcome(o) => state.child_outcome(&myself, *o),
            SessionMsg::DelegationDeadline { delegation_id } => {
                if state.ended.is_some() {
                    return Ok(());
                }
                if let Some(child) = state.children.running_child(&delegation_id).cloned() {
                    let secs = state.spec.delegation_deadline.as_secs_f64();
                    let _ = child.send_message(SessionMsg::Cancel {
                        reason: "the delegation deadline passed".into(),
                    });
                    if let Some(o) = state.children.synthesize(
                        &delegation_id,
                        OutcomeStatus::Terminated,
                        format!("still running at the delegation deadline of {secs} s (lifecycle.delegation_deadline_secs); it was ended"),
                    ) {
                        state.on_outcome(&myself, o);
                    }
                }
            }
            SessionMsg::Crash(text) => {
                if state.report.is_none() {
                    return Ok(());
                }
                let reason = format!("the session crashed: {text}");
                state.emit(
                    TraceEvent::new("task_failed", Some(&state.task_event))
                        .with("task_id", &state.task_id)
                        .with("turn", state.turn)
                        .with("cause", "runtime_error")
                        .with("reason", truncate(&reason, 2000)),
                );
                let _ = state
                    .close(ExitStatus::Failed, format!("error: {reason}"))
                    .await;
                // No report: whoever supervises this session learns of the crash from ractor.
                state.report = None;
                return Err(reason.into());
            }
            _ if state.ended.is_some() => {
                // The task is over; late answers are dropped.
            }
            SessionMsg::Begin => {
                // The first model call goes out before the disk is touched; the files are
                // staged while it is in flight (no tool runs before its reply is handled).
                if state.spec.task.trim().is_empty() {
                    let _ = state.stage();
                    state.fail(&myself, "runtime_error", "the task is empty; nothing was sent to the model (pass --task with a file or text)");
                    return Ok(());
                }
                if !state.first_call_sent {
                    state.start_turn(&myself);
                }
                if let Err(e) = state.stage() {
                    if let Some(h) = state.in_flight.take() {
                        h.abort();
                    }
                    state.fail(&myself, "runtime_error", &e);
                }
            }
            SessionMsg::InferDone { turn, result } => {
                state.in_flight = None;
                match result {
                    Ok(reply) => state.on_reply(&myself, turn, reply),
                    Err(e) => state.on_infer_error(&myself, turn, e),
                }
            }
            SessionMsg::Retry { turn, note } => state.emit(
                TraceEvent::new("inference_retry", Some(&state.task_event))
                    .with("turn", turn)
                    .with("task_id", &state.task_id)
                    .with("attempt", note.attempt)
                    .with("max_retries", note.max_retries)
                    .with("reason", note.reason)
                    .with_opt("provider_status", note.provider_status)
                    .with("error", truncate(&note.error, 2000))
                    .with("delay_ms", note.delay_ms)
                    .with_opt("retry_after_ms", note.retry_after_ms)
                    .with("charged_tokens", 0),
            ),
            SessionMsg::ToolDone(d) => state.on_tool_done(&myself, *d),
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut SessionState,
    ) -> Result<(), ActorProcessingErr> {
        if let SupervisionEvent::ActorFailed(who, err) = event {
            if state.report.is_some() && who.get_id() == state.dispatcher.get_id() {
                state.fail(
                    &myself,
                    "runtime_error",
                    &format!("the dispatcher failed: {err}"),
                );
                return Ok(());
            }
            let Some(dlg) = state.children.by_actor(who.get_id()).map(str::to_string) else {
                return Ok(());
            };
            if let Some(o) = state.children.synthesize(
                &dlg,
                OutcomeStatus::Crashed,
                truncate(&err.to_string(), 2000),
            ) {
                if let Some(sup) = &state.supervisor {
                    let _ = sup.send_message(SupervisorMsg::ChildGone {
                        session_id: o.child_session_id.clone(),
                    });
                }
                state.child_outcome(&myself, o);
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut SessionState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(h) = state.in_flight.take() {
            h.abort();
        }
        Ok(())
    }
}

fn capability_names(spec: &SessionSpec) -> Vec<&'static str> {
    let g = &spec.grants;
    let mut out = Vec::new();
    if !g.network_allow.is_empty() {
        out.push("network");
    }
    if !g.shell_allow.is_empty() {
        out.push("shell");
    }
    if !g.spawn_allow.is_empty() {
        out.push("spawn");
    }
    if g.plan_submit {
        out.push("plan");
    }
    if g.install {
        out.push("install");
    }
    if !g.peer_fetch_allow.is_empty() || g.peer_files_export {
        out.push("peer");
    }
    out
}
