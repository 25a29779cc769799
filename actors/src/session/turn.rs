//! The turn loop of a [`Session`](super::Session): one model call, its tool calls one at a
//! time, the next model call; the tool array refreshed when a pull or removal changed it.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use ractor::ActorRef;
use serde_json::Value;

use super::{
    cache_key, max_turns_text, ExitStatus, Life, SessionMsg, SessionRetrySink, SessionState,
};
use crate::dispatcher::DispatcherMsg;
use crate::model::{ContentBlock, InferError, InferReply, InferRequest, Message, StopReason};
use crate::protocol::{CallKind, CallRequest, CallResult, Dispatched, Effect};
use crate::registry::Pulled;
use crate::spec::Capture;
use crate::task::OwnedTask;
use crate::text::{estimate_tokens, sha256_hex, truncate};
use crate::tool::ExecStatus;
use crate::trace::events::{self, DelegationEnd, DelegationStart};

impl SessionState {
    /// `Begin`: stage the files while the first model call (sent from `pre_start`) is in
    /// flight; no tool runs before its reply is handled. With no first call, start the turn
    /// now (it ends the task at once when `max_turns` is 0).
    pub(super) async fn begin(&mut self, myself: &ActorRef<SessionMsg>) {
        match self.life {
            Life::Starting | Life::Inferring { .. } => {}
            // Canceled before it began: nothing to stage for.
            _ => return,
        }
        if self.spec.task.trim().is_empty() {
            let _ = self.stage().await;
            self.fail(myself, "runtime_error", "the task is empty; nothing was sent to the model (pass --task with a file or text)");
            return;
        }
        if let Life::Starting = self.life {
            if self.seed_calls.is_empty() {
                self.start_turn(myself);
            } else {
                self.take_seed_calls(myself);
            }
        }
        if let Err(e) = self.stage().await {
            self.fail(myself, "runtime_error", &e.to_string());
        }
    }

    /// Deliver settled outcomes, then send the next model call (or end at `max_turns`).
    pub(super) fn start_turn(&mut self, myself: &ActorRef<SessionMsg>) {
        if std::mem::take(&mut self.seed_waits) && self.children.outstanding() > 0 {
            // A resumed session that was waiting for delegations waits for them again.
            self.life = Life::Waiting {
                since: Instant::now(),
            };
            return;
        }
        if self.waits_for_schedule() {
            // A replay: the recorded model read outcomes still running here before this call.
            self.life = Life::Waiting {
                since: Instant::now(),
            };
            return;
        }
        let settled = self.take_deliverable();
        self.deliver(settled);
        if let Some(playback) = self.spec.continuation.playback.clone() {
            for text in playback.injected(self.totals.turns) {
                self.push_user(text, &[]);
            }
        }
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
            system: self.system.clone(),
            messages: self.messages.clone(),
            tools: self.offered.clone(),
            prompt_cache_key: Some(cache_key(
                &self.spec.capsule_name,
                &self.spec.capsule_version,
            )),
        };
        let turn = self.totals.turns;
        self.turn = turn;
        self.life = Life::Inferring {
            _call: start_infer(myself.clone(), self.spec.driver.clone(), request, turn),
        };
    }

    pub(super) fn on_reply(&mut self, myself: &ActorRef<SessionMsg>, turn: u32, reply: InferReply) {
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
        let mut ev = events::inference(
            self.on_task(turn),
            &events::Inference {
                input_tokens,
                output_tokens,
                decision,
                stop_reason: &reply.stop_reason,
                tool_name: calls.first().map(|c| c.1.as_str()),
                usage: &reply.usage,
                max_output_tokens: self.spec.max_tokens,
                attempts: reply.attempts,
            },
        );
        if self.spec.capture != Capture::None {
            ev = ev
                .with("system_sha", &self.system_sha)
                .with("tools_sha", &self.tools_sha)
                .with("response_sha", sha256_hex(&response));
        }
        if self.spec.capture == Capture::Content {
            self.write_bodies();
            // The reply as received: its blocks (the bytes `response_sha` hashes); the stop
            // reason and usage are fields of the line already.
            ev = ev.with("response", String::from_utf8_lossy(&response));
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
                self.push_answer(reply.content, response.len());
                let queue = calls
                    .into_iter()
                    .enumerate()
                    .map(|(seq, (id, name, input))| CallRequest {
                        seq,
                        turn,
                        id,
                        name,
                        input,
                        parent_event: self.turn_event.clone(),
                    })
                    .collect();
                self.life = Life::Calling { queue };
                self.dispatch_next(myself);
            }
            StopReason::EndTurn | StopReason::MaxTokens => {
                let mut text = crate::model::joined_text(&reply.content);
                if reply.stop_reason == StopReason::MaxTokens {
                    text.push_str(&format!(
                        "\n\n[truncated at the inference.max_tokens output cap of {} tokens — this is a fragment, not a finished answer]",
                        self.spec.max_tokens
                    ));
                }
                self.push_answer(reply.content, response.len());
                let turns_left = self
                    .spec
                    .max_turns
                    .is_none_or(|max| self.totals.turns < max);
                if self.children.outstanding() > 0 && turns_left {
                    // Wait, spending nothing, and continue once with every outcome.
                    self.life = Life::Waiting {
                        since: Instant::now(),
                    };
                } else if turns_left
                    && (self.children.has_settled()
                        || self
                            .spec
                            .continuation
                            .playback
                            .as_ref()
                            .is_some_and(|p| !p.injected(self.totals.turns).is_empty()))
                {
                    self.life = Life::Waiting {
                        since: Instant::now(),
                    };
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

    pub(super) fn on_infer_error(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        turn: u32,
        err: InferError,
    ) {
        self.emit(events::inference_failed(self.on_task(turn), &err));
        self.fail(myself, err.kind.as_str(), &err.message);
    }

    /// A pull added an artifact: record it. (The inventory changed where the call ran; the
    /// new tool array is offered from the next model call, with a `tools_refreshed` line.)
    pub(super) fn pulled(&mut self, p: Pulled) {
        self.emit(events::artifact_pulled(
            &self.session_event,
            &events::ArtifactPulled {
                name: &p.name,
                version: &p.version,
                runtime: &p.runtime,
                origin: &p.origin,
                session_id: &self.spec.session_id,
                fetched_from: &p.fetched_from,
                owner_id: p.owner_id,
            },
        ));
    }

    /// Rebuild the held tool array if the agent changed it; writes `tools_refreshed` when the
    /// array the model is sent differs.
    pub(super) fn refresh_tool_array(&mut self) {
        let version = self.inventory.version();
        if version == self.offered_version {
            return;
        }
        self.offered_version = version;
        let tools = self.inventory.specs();
        if tools == *self.offered {
            return;
        }
        let before: std::collections::BTreeSet<&str> =
            self.offered.iter().map(|t| t.name.as_str()).collect();
        let after: std::collections::BTreeSet<&str> =
            tools.iter().map(|t| t.name.as_str()).collect();
        let added: Vec<&str> = after.difference(&before).copied().collect();
        let removed: Vec<&str> = before.difference(&after).copied().collect();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        self.emit(events::tools_refreshed(
            self.on_task(self.totals.turns),
            &added,
            &removed,
            &names,
        ));
        let json = serde_json::to_vec(&tools).unwrap_or_default();
        self.payload_bytes =
            self.payload_bytes + json.len() - self.tools_bytes.min(self.payload_bytes);
        self.tools_bytes = json.len();
        if self.tools_sha.is_some() {
            self.tools_sha = Some(sha256_hex(&json));
        }
        self.offered = Arc::new(tools);
    }

    /// Send the turn's next tool call to the Dispatcher, or the next model call once none is
    /// left. Only while calling: a call never starts after the task's end is decided.
    pub(super) fn dispatch_next(&mut self, myself: &ActorRef<SessionMsg>) {
        let Life::Calling { queue } = &mut self.life else {
            return;
        };
        if let Some(playback) = self.spec.continuation.playback.clone() {
            // `mur replay --tools recorded`: nothing runs, the recording answers.
            match queue.pop_front() {
                Some(call) => {
                    let d = playback.answer(call);
                    let _ = myself.send_message(SessionMsg::ToolDone(Box::new(d)));
                }
                None => self.start_turn(myself),
            }
            return;
        }
        match (queue.pop_front(), &self.dispatcher) {
            (Some(call), Some(dispatcher)) => {
                let _ = dispatcher.send_message(DispatcherMsg::Dispatch(call));
            }
            (Some(call), None) => {
                // Started on demand; the call waits at the head of the queue.
                queue.push_front(call);
                let _ = myself.send_message(SessionMsg::StartDispatcher);
            }
            (None, _) => self.start_turn(myself),
        }
    }

    pub(super) fn on_tool_done(&mut self, myself: &ActorRef<SessionMsg>, mut d: Dispatched) {
        if let Some(Effect::CallDenied(denied)) = &d.effect {
            // Nothing ran: no tool_call or shell line, only the refusal.
            let content = self.spec.capture == Capture::Content;
            self.emit(events::call_denied(
                self.on_turn(d.request.turn),
                &events::CallDenied {
                    event: &denied.event,
                    hook: &denied.hook,
                    target: &denied.target,
                    reason: &denied.reason,
                    content: content.then(|| (d.request.id.as_str(), d.text())),
                },
            ));
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
        let output = if d.kind == CallKind::Skill {
            content.then(|| Cow::Borrowed(d.text()))
        } else {
            content.then(|| Cow::Owned(crate::provided::redact_handles_text(d.text())))
        };
        let end = events::CallEnd {
            output: output.as_deref(),
            output_bytes,
            duration_ms: d.duration_ms,
            status,
            error: error.as_deref(),
        };
        let at = self.on_turn(d.request.turn);
        let ev = if d.kind == CallKind::Skill {
            events::skill_call(
                at,
                &d.request.name,
                content.then_some(d.request.id.as_str()),
                &end,
            )
        } else {
            events::tool_call(
                at,
                events::ToolCall {
                    name: &d.request.name,
                    id: &d.request.id,
                    input: crate::provided::redact_handles(&d.request.input),
                    input_bytes,
                },
                &end,
            )
        };
        if d.kind != CallKind::Skill {
            self.totals.tool_calls += 1;
        }
        // A pull's `artifact_pulled` line comes before its `tool_call` line, as upstream
        // writes them.
        match d.effect.take() {
            Some(Effect::Pulled(p)) => self.pulled(*p),
            other => d.effect = other,
        }
        self.emit(ev);
        if let Some(sh) = shell {
            self.totals.shell_calls += 1;
            self.emit(events::shell(
                self.on_turn(d.request.turn),
                &sh,
                &crate::provided::redact_handles_text(&sh.command),
                d.duration_ms,
            ));
        }
        let is_error = d.is_error();
        let Dispatched {
            request,
            result,
            effect,
            ..
        } = d;
        let mut new_delegation = None;
        match effect {
            Some(Effect::DelegationStarted {
                started,
                capsule,
                version,
            }) => {
                self.emit(events::delegation_start(
                    &self.session_event,
                    &DelegationStart {
                        delegation_id: &started.delegation_id,
                        capsule: &capsule,
                        version: &version,
                        child_session_id: &started.session_id,
                        child_workdir: &started.workdir,
                        child_records_dir: &started.records_dir,
                        node: started.node.as_deref(),
                    },
                ));
                self.children.started(&started, &capsule, &version);
                if let Some(error) = self.children.take_early_crash(started.child.get_id()) {
                    // It crashed before this answer reached the session.
                    self.child_crashed(myself, &started.delegation_id, error);
                }
                let delegation_id = started.delegation_id.clone();
                new_delegation = Some(delegation_id.clone());
                myself.send_after(self.spec.delegation_deadline, move || {
                    SessionMsg::DelegationDeadline { delegation_id }
                });
            }
            Some(Effect::DelegationRefused {
                capsule,
                version,
                reason,
            }) => self.emit(events::delegation(
                &self.session_event,
                &DelegationEnd {
                    capsule: &capsule,
                    version: &version,
                    delegation_id: None,
                    child_session_id: None,
                    duration_ms: 0,
                    outcome: "refused",
                    reason: Some(&reason),
                    usage: None,
                    node: None,
                },
            )),
            // A tools change was taken (and recorded) before the tool_call line, above.
            Some(Effect::Pulled(_)) | Some(Effect::CallDenied(_)) | None => {}
        }
        let text = match result {
            CallResult::Ran { text, .. } | CallResult::Refused { text } => text,
        };
        if let Some(old) = self.redelegations.remove(&request.id) {
            // A resumed session delegated again what was still running: the model holds the
            // old delegation's result already; it hears of the new one as a note.
            let new = new_delegation;
            self.emit(events::delegation_restarted(
                &self.session_event,
                &old,
                new.as_deref(),
                self.spec.continuation.resumed_from.as_deref(),
            ));
            let note = format!("[resume] delegation {old} was still running when the session stopped; it was delegated again: {text}");
            self.push_user(note, &[]);
            self.dispatch_next(myself);
            return;
        }
        self.push_message(Message::Tool {
            tool_call_id: request.id,
            is_error,
            content: vec![ContentBlock::Text { text }],
        });
        self.dispatch_next(myself);
    }
}

impl SessionState {
    /// Write the `body` lines (system prompt, tool array) this turn's hashes name and the
    /// trace does not hold yet: each body once, before the first line that names it.
    fn write_bodies(&mut self) {
        if self
            .system_sha
            .as_ref()
            .is_some_and(|s| !self.bodies.contains(s))
        {
            let sha = self.system_sha.clone().unwrap_or_default();
            self.emit(events::body(
                &self.session_event,
                "system",
                &sha,
                &self.system,
            ));
            self.bodies.push(sha);
        }
        if self
            .tools_sha
            .as_ref()
            .is_some_and(|s| !self.bodies.contains(s))
        {
            let sha = self.tools_sha.clone().unwrap_or_default();
            let json = serde_json::to_vec(&*self.offered).unwrap_or_default();
            self.emit(events::body(
                &self.session_event,
                "tools",
                &sha,
                &String::from_utf8_lossy(&json),
            ));
            self.bodies.push(sha);
        }
    }

    /// Push a user message the runtime wrote (outcomes, notes); under `trace.capture:
    /// content` it is recorded as a `user_message` line, so a resume can rebuild it.
    pub(super) fn push_user(&mut self, text: String, delegations: &[&str]) {
        if self.spec.capture == Capture::Content {
            self.emit(events::user_message(
                self.on_task(self.totals.turns),
                delegations,
                &text,
            ));
        }
        self.push_message(Message::user_text(text));
    }

    /// A resumed session's first step: the calls its last turn had not finished, and the
    /// delegations to start again, before its next model call.
    pub(super) fn take_seed_calls(&mut self, myself: &ActorRef<SessionMsg>) {
        let mut queue = VecDeque::new();
        for (seq, c) in std::mem::take(&mut self.seed_calls).into_iter().enumerate() {
            if let Some(old) = &c.redelegates {
                self.redelegations.insert(c.id.clone(), old.clone());
            }
            queue.push_back(CallRequest {
                seq,
                turn: c.turn,
                id: c.id,
                name: c.name,
                input: c.input,
                parent_event: self.task_event.clone(),
            });
        }
        self.life = Life::Calling { queue };
        self.dispatch_next(myself);
    }
}

/// Start one model call: it runs here up to its first wait (the request goes out at once,
/// [`crate::task::start_guarded`]), the rest in a task of its own; its answer comes back as
/// `InferDone` (or `Crash` when the driver panics), so the Session's mailbox never waits on a
/// model.
pub(super) fn start_infer(
    me: ActorRef<SessionMsg>,
    driver: Arc<dyn crate::model::ModelDriver>,
    request: InferRequest,
    turn: u32,
) -> OwnedTask {
    let crashed = me.clone();
    crate::task::start_guarded(
        async move {
            let sink = SessionRetrySink {
                session: me.clone(),
                turn,
            };
            let result = driver.infer(&request, &sink).await;
            drop(request);
            let _ = me.send_message(SessionMsg::InferDone { turn, result });
        },
        move |why| {
            let _ = crashed.send_message(SessionMsg::Crash(why));
        },
    )
}
