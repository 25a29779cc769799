//! The [`Dispatcher`]: routes one tool call to whatever answers it.
//!
//! Precedence (seed 000, SPEC §5): runtime-provided tools first (answered before any allowlist,
//! and refused with a sentence naming the missing declaration when their grant is absent), then a
//! native artifact, then a shell binary (re-checked against `capabilities.shell.allow` here, at
//! dispatch, not only at staging), then a skill, then the refusal
//! `tool '<name>' is not declared in manifest allowlist` (or, for a tool `remove-artifact` took
//! away, the original Murmur's `tool '<name>' was removed from this session; it can no longer
//! be called`). Successful results are fenced here, so
//! every path to the model goes through one fence.
//!
//! Calls run in a spawned task so the Dispatcher's mailbox stays free: a `CancelAll` aborts the
//! running call, and the executor's subprocess dies with its future. The Dispatcher needs no
//! cleanup of its own: it is killed with its Session (ractor kills a stopping actor's linked
//! children, skipping their `post_stop`), and its state, the running call's [`OwnedTask`]
//! included, is dropped then, which aborts the call.

use std::sync::Arc;
use std::time::Instant;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde_json::Value;
use tokio::sync::watch;

mod delegate;
mod plan_steps;
mod table;

use delegate::delegate;
pub use delegate::DelegateCtx;
pub use table::{missing_required, Route, ToolTable};

use crate::artifact_error::{ArtifactError, ArtifactErrorKind};
use crate::fence;
use crate::gate::CallGate;
use crate::inventory::Inventory;
use crate::plan::{run_plan, PlanContext};
use crate::protocol::{CallKind, CallRequest, CallResult, Dispatched, Effect};
use crate::provided::bare;
use crate::registry::{ArtifactRequest, ArtifactSource, PullOutcome, RegistryMsg};
use crate::session::SessionMsg;
use crate::spec::{Grants, SessionPaths};
use crate::supervisor::SupervisorMsg;
use crate::task::OwnedTask;
use crate::tool::{ExecRequest, ExecStatus, Executors, RuntimeTool, ToolOrigin};
use crate::trace::TraceLog;
use plan_steps::PlanSteps;

/// What the Dispatcher is running. Calls run one at a time, so this is the whole story of its
/// life: `CancelAll` is a `match` on it.
enum Running {
    /// No call since the last cancel (or ever).
    Idle,
    /// A call's task, held for its drop: dropping it aborts the call, and its subprocess dies
    /// with it.
    Call {
        /// The call's task.
        _task: OwnedTask,
    },
    /// A plan's task and the channel that asks it to wind down (its `plan_end` says why).
    Plan {
        /// The plan's task (held for its drop, as for a call).
        _task: OwnedTask,
        /// Set to true to cancel the plan.
        cancel: watch::Sender<bool>,
    },
}

/// Messages the [`Dispatcher`] takes.
pub enum DispatcherMsg {
    /// Run one call; the answer goes to the session as [`SessionMsg::ToolDone`].
    Dispatch(CallRequest),
    /// Abort the call in flight (task canceled).
    CancelAll,
}

/// Arguments to start a [`Dispatcher`].
pub struct DispatcherArgs {
    /// The process Registry (pulls, the lock); `None` refuses pulls.
    pub registry: Option<ActorRef<RegistryMsg>>,
    /// The capsule's pull service.
    pub artifacts: Option<Arc<dyn ArtifactSource>>,
    /// Policy hooks deciding on every call before it runs; `None` when the capsule has none.
    pub gate: Option<Arc<dyn CallGate>>,
    /// The session's id (a delegation's parent).
    pub session_id: String,
    /// The session's depth in the delegation tree.
    pub depth: u32,
    /// The process Supervisor, which starts children; `None` refuses delegations.
    pub supervisor: Option<ActorRef<SupervisorMsg>>,
    /// The session's trace writer (plan and plan-delegation lines).
    pub trace: TraceLog,
    /// The session's `session_start` event id.
    pub session_event: String,
    /// `lifecycle.delegation_deadline_secs`, for plan capsule steps that wait.
    pub delegation_deadline: std::time::Duration,
    /// The session it answers.
    pub session: ActorRef<SessionMsg>,
    /// The session's tools: its one inventory, shared with the Session.
    pub tools: Inventory,
    /// The session's grants.
    pub grants: Grants,
    /// Executors per tool kind.
    pub executors: Executors,
    /// Work and records folders.
    pub paths: SessionPaths,
}

/// The per-session dispatch actor.
pub struct Dispatcher;

/// The Dispatcher's state.
pub struct DispatcherState {
    registry: Option<ActorRef<RegistryMsg>>,
    artifacts: Option<Arc<dyn ArtifactSource>>,
    gate: Option<Arc<dyn CallGate>>,
    table: Arc<ToolTable>,
    delegation: DelegateCtx,
    trace: TraceLog,
    session_event: String,
    session: ActorRef<SessionMsg>,
    running: Running,
}

/// The work one call does once admitted, and, for a plan, how to ask it to wind down.
struct Work {
    answer: futures::future::BoxFuture<'static, Dispatched>,
    cancel: Option<watch::Sender<bool>>,
}

impl Work {
    /// Work whose answer is ready (a refusal, or a call that needs no task).
    fn now(answer: futures::future::BoxFuture<'static, Dispatched>) -> Work {
        Work {
            answer,
            cancel: None,
        }
    }
}

impl DispatcherState {
    /// The work one call does once admitted: a future that produces its answer. Refusals that
    /// need no work are ready futures; tools, delegations and plans run when awaited.
    fn work(&mut self, request: CallRequest, started: Instant) -> Work {
        use futures::FutureExt;
        let elapsed = move || started.elapsed().as_millis() as u64;
        let refused = move |kind, text: String, request: CallRequest| Dispatched {
            request,
            kind,
            result: CallResult::Refused { text },
            duration_ms: elapsed(),
            effect: None,
        };
        if !request.input.is_object() {
            // A driver keeps arguments it could not parse as a raw string: answer the model
            // with a tool error so it can try again.
            let raw = match &request.input {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let text = format!(
                "'{}' expects a JSON object as its input; the arguments sent were not one: {}",
                request.name,
                crate::text::truncate(&raw, 200)
            );
            return Work::now(
                futures::future::ready(refused(CallKind::Tool, text, request)).boxed(),
            );
        }
        let (tool, kind) = match self.table.route(&request.name) {
            Route::Refuse(text) => {
                return Work::now(
                    futures::future::ready(refused(CallKind::Tool, text, request)).boxed(),
                )
            }
            Route::Runtime(name) => {
                if let Some(text) = self.table.runtime_refusal(name, &request.input) {
                    return Work::now(
                        futures::future::ready(refused(CallKind::Tool, text, request)).boxed(),
                    );
                }
                return match name {
                    RuntimeTool::DelegateTask => {
                        let ctx = self.delegation.clone();
                        Work::now(
                            async move {
                                let (result, effect) = delegate(&ctx, &request.input).await;
                                Dispatched {
                                    request,
                                    kind: CallKind::Tool,
                                    result,
                                    duration_ms: elapsed(),
                                    effect,
                                }
                            }
                            .boxed(),
                        )
                    }
                    RuntimeTool::SubmitPlan => self.plan(request, started),
                    RuntimeTool::PullArtifact | RuntimeTool::RemoveArtifact => {
                        Work::now(self.artifact(name, request, started))
                    }
                    // Answered by an edge executor when the embedder provides one (see
                    // `ToolTable::route`); without one there is nothing to run.
                    RuntimeTool::ShareFile | RuntimeTool::FetchPeerFile => {
                        let text = format!("'{}' is granted by this capsule's manifest, but this build of mur does not run it yet", name.name());
                        Work::now(
                            futures::future::ready(refused(CallKind::Tool, text, request)).boxed(),
                        )
                    }
                };
            }
            Route::Exec(tool, kind) => (tool, kind),
        };
        if let Some(text) = missing_required(&tool, &request.input) {
            return Work::now(futures::future::ready(refused(kind, text, request)).boxed());
        }
        let executor = self.table.executor(&tool);
        let exec = ExecRequest {
            session_id: self.delegation.session_id.clone(),
            trace: ToolTable::sink(&self.trace, &request.parent_event),
            tool: tool.clone(),
            input: request.input.clone(),
            workdir: self.table.paths.workdir.clone(),
            records_dir: self.table.paths.records_dir.clone(),
        };
        Work::now(
            async move {
                let result = match executor.execute(exec).await {
                    Ok(out) => {
                        let source = match kind {
                            CallKind::Skill => format!("skill:{}", tool.name),
                            _ => format!("tool:{}", tool.name),
                        };
                        // Operator skills are trusted guidance; everything else is fenced.
                        let fenced = kind != CallKind::Skill || tool.origin == ToolOrigin::Pulled;
                        let text = if fenced {
                            fence::fence_with_note(&source, &out.text, out.note.as_deref())
                        } else {
                            out.text.clone()
                        };
                        CallResult::Ran {
                            status: out.status,
                            output_bytes: out.text.len() as u64,
                            text,
                            shell: out.shell,
                        }
                    }
                    Err(e) => CallResult::Refused { text: e.message },
                };
                Dispatched {
                    request,
                    kind,
                    result,
                    duration_ms: elapsed(),
                    effect: None,
                }
            }
            .boxed(),
        )
    }

    /// A `pull-artifact` / `remove-artifact` call: the Registry runs it with this capsule's
    /// service; a change reaches this Dispatcher's table at once (a removed tool is refused
    /// from the next call) and the Session's tool array from the next turn.
    fn artifact(
        &mut self,
        tool: RuntimeTool,
        request: CallRequest,
        started: Instant,
    ) -> futures::future::BoxFuture<'static, Dispatched> {
        use futures::FutureExt;
        let name = tool.name();
        let (Some(registry), Some(service)) = (self.registry.clone(), self.artifacts.clone())
        else {
            let text = format!("'{name}' is not available in this process");
            return futures::future::ready(Dispatched {
                request,
                kind: CallKind::Tool,
                result: CallResult::Refused { text },
                duration_ms: 0,
                effect: None,
            })
            .boxed();
        };
        let asked = ArtifactRequest {
            session_id: self.delegation.session_id.clone(),
            records_dir: self.table.paths.records_dir.clone(),
            input: request.input.clone(),
        };
        let held = self.table.tools.clone();
        // A removed artifact hands its name back to a same-named shell binary it may run.
        let shell_allow = self.table.grants.shell_allow.clone();
        async move {
            let source = format!("tool:{name}");
            let (result, effect) = if tool == RuntimeTool::PullArtifact {
                let answer = ractor::call!(registry, |reply| RegistryMsg::Pull {
                    service,
                    request: asked,
                    reply
                });
                match answer {
                    Ok(Ok(PullOutcome::Listing(v))) => (ran(&source, &v, None), None),
                    Ok(Ok(PullOutcome::Pulled(p))) => {
                        let note = format!("{} is in your tool list from your next turn.", p.tool.name);
                        // The next call is routed to it, the next model call offered it.
                        held.add(p.tool.clone());
                        (
                            ran(&source, &p.result, Some(&note)),
                            Some(Effect::Pulled(p)),
                        )
                    }
                    Ok(Err(refusal)) => (refused(refusal), None),
                    Err(e) => (
                        refused(ArtifactError::new(
                            ArtifactErrorKind::NotFetched,
                            format!("the registry did not answer: {e}"),
                        )),
                        None,
                    ),
                }
            } else {
                let answer = ractor::call!(registry, |reply| RegistryMsg::Remove {
                    service,
                    request: asked,
                    reply
                });
                match answer {
                    // Another session's pin: nothing left this session's tool list.
                    Ok(Ok(r)) if r.result.get("removed") == Some(&Value::Bool(false)) => {
                        (ran(&source, &r.result, None), None)
                    }
                    Ok(Ok(r)) => {
                        let note = format!(
                            "{} is gone from your tool list from your next turn; a call to it is refused.",
                            r.tool_name
                        );
                        let instead = shell_allow
                            .contains(&r.tool_name)
                            .then(|| crate::provided::shell_tool(&r.tool_name));
                        held.remove(&r.tool_name, instead);
                        (
                            ran(&source, &r.result, Some(&note)),
                            None,
                        )
                    }
                    Ok(Err(refusal)) => (refused(refusal), None),
                    Err(e) => (
                        refused(ArtifactError::new(
                            ArtifactErrorKind::NotRemovable,
                            format!("the registry did not answer: {e}"),
                        )),
                        None,
                    ),
                }
            };
            Dispatched {
                request,
                kind: CallKind::Tool,
                result,
                duration_ms: started.elapsed().as_millis() as u64,
                effect,
            }
        }
        .boxed()
    }

    /// A `submit-plan` call: the plan runs on the session's own tool table.
    fn plan(&mut self, request: CallRequest, started: Instant) -> Work {
        use futures::FutureExt;
        let (tx, rx) = watch::channel(false);
        let table = self.table.clone();
        let ctx = PlanContext {
            tools: table.tools.names(),
            shell_allow: table.grants.shell_allow.clone(),
            capsules: table
                .grants
                .spawn_allow
                .iter()
                .map(|c| bare(c).to_string())
                .collect(),
            parent_event: request.parent_event.clone(),
        };
        let runner = Arc::new(PlanSteps {
            table,
            delegation: self.delegation.clone(),
            trace: self.trace.clone(),
            session_event: self.session_event.clone(),
        });
        let answer = async move {
            let report = run_plan(&request.input, &ctx, runner, rx).await;
            let text = report.text();
            Dispatched {
                request,
                kind: CallKind::Tool,
                result: CallResult::Ran {
                    status: if report.completed {
                        ExecStatus::Passed
                    } else {
                        ExecStatus::Failed
                    },
                    output_bytes: text.len() as u64,
                    text: fence::fence("tool:submit-plan", &text),
                    shell: None,
                },
                duration_ms: started.elapsed().as_millis() as u64,
                effect: None,
            }
        }
        .boxed();
        Work {
            answer,
            cancel: Some(tx),
        }
    }
}

/// A passed runtime tool's JSON result, fenced, with an optional note after the fence.
/// A refused pull or removal, as the model reads it.
fn refused(refusal: ArtifactError) -> CallResult {
    CallResult::Refused {
        text: refusal.to_string(),
    }
}

fn ran(source: &str, data: &Value, note: Option<&str>) -> CallResult {
    let text = data.to_string();
    CallResult::Ran {
        status: ExecStatus::Passed,
        output_bytes: text.len() as u64,
        text: fence::fence_with_note(source, &text, note),
        shell: None,
    }
}

// Local-only: ractor's `cluster` feature (on for `mur node`) wants every message type named;
// this one never crosses a node.
impl ractor::Message for DispatcherMsg {}

#[ractor::async_trait]
impl Actor for Dispatcher {
    type Msg = DispatcherMsg;
    type State = DispatcherState;
    type Arguments = DispatcherArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: DispatcherArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let delegation = DelegateCtx {
            session_id: args.session_id,
            depth: args.depth,
            supervisor: args.supervisor,
            session: args.session.clone(),
            spawn_allow: args.grants.spawn_allow.clone(),
            parent_grants: args.grants.clone(),
            records_dir: args.paths.records_dir.clone(),
            deadline: args.delegation_deadline,
        };
        Ok(DispatcherState {
            table: Arc::new(ToolTable {
                tools: args.tools,
                grants: args.grants,
                executors: args.executors,
                paths: args.paths,
            }),
            delegation,
            trace: args.trace,
            session_event: args.session_event,
            session: args.session,
            running: Running::Idle,
            gate: args.gate,
            registry: args.registry,
            artifacts: args.artifacts,
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: DispatcherMsg,
        state: &mut DispatcherState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            DispatcherMsg::CancelAll => {
                match &state.running {
                    // A plan winds down itself (its plan_end says why).
                    Running::Plan { cancel, .. } => {
                        let _ = cancel.send(true);
                    }
                    // Dropping it aborts the task; the executor's subprocess dies with it.
                    Running::Call { .. } => state.running = Running::Idle,
                    Running::Idle => {}
                }
            }
            DispatcherMsg::Dispatch(request) => {
                let started = Instant::now();
                let gate = state.gate.clone();
                // Only a policy hook reads the call before its work (which owns it) runs.
                let gated = gate.as_ref().map(|_| request.clone());
                let crash_report = request.clone();
                let Work { answer, cancel } = state.work(request, started);
                let session = state.session.clone();
                let call = async move {
                    if let (Some(gate), Some(request)) = (gate, gated) {
                        let turn = request.turn;
                        if let Some(denied) = gate.decide(&request, turn).await {
                            let d = Dispatched {
                                request,
                                kind: CallKind::Tool,
                                result: CallResult::Refused {
                                    text: format!(
                                        "Refused by policy hook '{}': {}\n\nThis call did not run. Retrying it unchanged will be refused again.",
                                        denied.hook, denied.reason
                                    ),
                                },
                                duration_ms: started.elapsed().as_millis() as u64,
                                effect: Some(Effect::CallDenied(denied)),
                            };
                            let _ = session.send_message(SessionMsg::ToolDone(Box::new(d)));
                            return;
                        }
                    }
                    let d = answer.await;
                    let _ = session.send_message(SessionMsg::ToolDone(Box::new(d)));
                };
                let session = state.session.clone();
                // A panic in a call (an executor's bug) is the call's error, never a hang.
                let task = crate::task::spawn_guarded(call, move |why| {
                    let name = &crash_report.name;
                    tracing::error!(tool = %name, call = %crash_report.id, "tool call panicked: {why}");
                    let text = format!(
                        "tool '{name}' failed inside the runtime (it panicked: {why}); the call did not complete"
                    );
                    let d = Dispatched {
                        request: crash_report,
                        kind: CallKind::Tool,
                        result: CallResult::Refused { text },
                        duration_ms: started.elapsed().as_millis() as u64,
                        effect: None,
                    };
                    let _ = session.send_message(SessionMsg::ToolDone(Box::new(d)));
                });
                // Replacing what ran before drops it: a plan's cancel channel never outlives
                // its plan, so a cancel reaches the call that runs now.
                state.running = match cancel {
                    Some(cancel) => Running::Plan {
                        _task: task,
                        cancel,
                    },
                    None => Running::Call { _task: task },
                };
            }
        }
        Ok(())
    }
}
