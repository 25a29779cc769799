//! The [`Dispatcher`]: routes one tool call to whatever answers it.
//!
//! Precedence (seed 000, SPEC §5): runtime-provided tools first (answered before any allowlist,
//! and refused with a sentence naming the missing declaration when their grant is absent), then a
//! native artifact, then a shell binary (re-checked against `capabilities.shell.allow` here, at
//! dispatch, not only at staging), then a skill, then the refusal
//! `tool '<name>' is not declared in manifest allowlist`. Successful results are fenced here, so
//! every path to the model goes through one fence.
//!
//! Calls run in a spawned task so the Dispatcher's mailbox stays free: a `CancelAll` aborts the
//! running call, and the executor's subprocess dies with its future.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde_json::Value;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use crate::delegation::{ChildRequest, DelegationOutcome, StartedChild};
use crate::fence;
use crate::ids;
use crate::plan::{run_plan, PlanContext};
use crate::plan_steps::PlanSteps;
use crate::provided::bare;
use crate::registry::{ArtifactRequest, ArtifactSource, PullOutcome, Pulled, RegistryMsg};
use crate::session::SessionMsg;
use crate::spec::{Grants, SessionPaths};
use crate::supervisor::SupervisorMsg;
use crate::tool::{
    ExecRequest, ExecStatus, Executors, ShellFacts, ToolDecl, ToolExecutor, ToolKind, ToolOrigin,
    RUNTIME_TOOLS,
};
use crate::trace::TraceMsg;

/// One call the Session wants run.
#[derive(Clone, Debug)]
pub struct CallRequest {
    /// Position of the call in its turn (0-based).
    pub seq: usize,
    /// The turn the call belongs to.
    pub turn: u32,
    /// The provider's call id.
    pub id: String,
    /// The tool name the model used.
    pub name: String,
    /// The model's input.
    pub input: Value,
    /// The trace event the call hangs off (its turn's `inference` line).
    pub parent_event: String,
}

/// Which trace line a call produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallKind {
    /// `tool_call`.
    Tool,
    /// `tool_call` then `shell`.
    Shell,
    /// `skill_call`.
    Skill,
}

/// What happened to a call.
#[derive(Clone, Debug, PartialEq)]
pub enum CallResult {
    /// The tool ran; `text` is what the model reads (fenced, note after the fence).
    Ran {
        /// Passed or failed.
        status: ExecStatus,
        /// Model-facing text.
        text: String,
        /// Bytes of the unfenced result.
        output_bytes: u64,
        /// Present for shell commands.
        shell: Option<ShellFacts>,
    },
    /// The runtime refused or could not run the call; `text` is its own words, unfenced.
    Refused {
        /// The refusal sentence.
        text: String,
    },
}

/// Something a call changed in the session beyond its result text, for the Session to record.
#[derive(Clone, Debug)]
pub enum Effect {
    /// `delegate-task` started a child.
    DelegationStarted {
        /// The child.
        started: StartedChild,
        /// Full capsule name.
        capsule: String,
        /// Version.
        version: String,
    },
    /// A policy hook refused the call; nothing ran.
    CallDenied(Denied),
    /// A pull or removal changed the inventory.
    ToolsChanged(Box<ToolsChange>),
    /// `delegate-task` was refused; nothing started.
    DelegationRefused {
        /// Full capsule name (or what the model asked for).
        capsule: String,
        /// Version asked for.
        version: String,
        /// The refusal sentence.
        reason: String,
    },
}

/// The Dispatcher's answer to one [`CallRequest`].
#[derive(Clone, Debug)]
pub struct Dispatched {
    /// The request it answers.
    pub request: CallRequest,
    /// Which trace line it produces.
    pub kind: CallKind,
    /// The outcome.
    pub result: CallResult,
    /// Wall time of the call.
    pub duration_ms: u64,
    /// What else the call changed.
    pub effect: Option<Effect>,
}

impl Dispatched {
    /// The text the model reads.
    pub fn text(&self) -> &str {
        match &self.result {
            CallResult::Ran { text, .. } | CallResult::Refused { text } => text,
        }
    }

    /// True when the model sees `is_error: true`.
    pub fn is_error(&self) -> bool {
        match &self.result {
            CallResult::Ran { status, .. } => *status != ExecStatus::Passed,
            CallResult::Refused { .. } => true,
        }
    }
}

/// Messages the [`Dispatcher`] takes.
pub enum DispatcherMsg {
    /// Run one call; the answer goes to the session as [`SessionMsg::ToolDone`].
    Dispatch(CallRequest),
    /// Abort the call in flight (task canceled).
    CancelAll,
    /// A pull or removal changed what the session holds: route calls accordingly from now on.
    ToolsChanged {
        /// A tool the session now holds.
        added: Option<ToolDecl>,
        /// A tool (by name) it no longer holds.
        removed: Option<String>,
    },
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
    pub trace: ActorRef<TraceMsg>,
    /// The session's `session_start` event id.
    pub session_event: String,
    /// `lifecycle.delegation_deadline_secs`, for plan capsule steps that wait.
    pub delegation_deadline: std::time::Duration,
    /// The session it answers.
    pub session: ActorRef<SessionMsg>,
    /// The held inventory.
    pub tools: Vec<ToolDecl>,
    /// The session's grants.
    pub grants: Grants,
    /// Executors per tool kind.
    pub executors: Executors,
    /// Work and records folders.
    pub paths: SessionPaths,
}

/// The per-session dispatch actor.
pub struct Dispatcher;

/// What a call can be routed to: the held tools, the grants and the executors. Shared with a
/// running plan, whose steps route through the same table.
pub struct ToolTable {
    tools: HashMap<String, Arc<ToolDecl>>,
    grants: Grants,
    executors: Executors,
    paths: SessionPaths,
}

/// The Dispatcher's state.
pub struct DispatcherState {
    registry: Option<ActorRef<RegistryMsg>>,
    artifacts: Option<Arc<dyn ArtifactSource>>,
    myself: Option<ActorRef<DispatcherMsg>>,
    gate: Option<Arc<dyn CallGate>>,
    table: Arc<ToolTable>,
    delegation: DelegateCtx,
    trace: ActorRef<TraceMsg>,
    session_event: String,
    session: ActorRef<SessionMsg>,
    running: Option<JoinHandle<()>>,
    plan_cancel: Option<watch::Sender<bool>>,
}

/// Where a call goes.
#[derive(Clone)]
pub enum Route {
    /// A runtime-provided tool.
    Runtime(&'static str),
    /// An executor runs it.
    Exec(Arc<ToolDecl>, CallKind),
    /// Refused with this sentence.
    Refuse(String),
}

impl ToolTable {
    /// The session's folders.
    pub fn paths(&self) -> &SessionPaths {
        &self.paths
    }

    /// The session's grants.
    pub fn grants(&self) -> &Grants {
        &self.grants
    }

    /// Decide where `name` goes, in precedence order.
    pub fn route(&self, name: &str) -> Route {
        if let Some(rt) = RUNTIME_TOOLS.iter().find(|t| **t == name) {
            // Held (so granted) and answered by an edge executor: run it like any tool.
            if let Some(t) = self.tools.get(name) {
                if self.executors.runtime.contains_key(name) {
                    return Route::Exec(t.clone(), CallKind::Tool);
                }
            }
            return Route::Runtime(rt);
        }
        let held = self.tools.get(name);
        if let Some(t) = held {
            if matches!(t.kind, ToolKind::Native { .. }) {
                return Route::Exec(t.clone(), CallKind::Tool);
            }
        }
        if self.grants.shell_allow.iter().any(|b| b == name) {
            let decl = match held {
                Some(t) if matches!(t.kind, ToolKind::Shell { .. }) => t.clone(),
                _ => Arc::new(ToolDecl {
                    name: name.to_string(),
                    full_name: None,
                    version: "0.0.0".into(),
                    description: String::new(),
                    input_schema: serde_json::json!({"type":"object"}),
                    kind: ToolKind::Shell {
                        binary: name.to_string(),
                    },
                    origin: ToolOrigin::Provided,
                }),
            };
            return Route::Exec(decl, CallKind::Shell);
        }
        match held {
            Some(t) if matches!(t.kind, ToolKind::Skill { .. }) => {
                Route::Exec(t.clone(), CallKind::Skill)
            }
            Some(t) if matches!(t.kind, ToolKind::Shell { .. }) => Route::Refuse(format!(
                "binary '{name}' is not in capabilities.shell.allow"
            )),
            _ => Route::Refuse(format!(
                "tool '{name}' is not declared in manifest allowlist"
            )),
        }
    }

    /// The answer of a runtime-provided tool whose grant is absent, or `None` when granted.
    pub fn runtime_refusal(&self, tool: &str, input: &Value) -> Option<String> {
        let artifact = input
            .get("artifact")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let missing = match tool {
            "share-file" if !self.grants.peer_files_export => {
                "'share-file' needs an exports.peer_files block in murmur.yaml; this capsule declares none".to_string()
            }
            "fetch-peer-file" if self.grants.peer_fetch_allow.is_empty() => {
                "'fetch-peer-file' needs a capabilities.peer_fetch.allow list in murmur.yaml; this capsule declares none".to_string()
            }
            "delegate-task" if self.grants.spawn_allow.is_empty() => {
                "'delegate-task' needs a capabilities.spawn.allow list in murmur.yaml; this capsule declares none".to_string()
            }
            "submit-plan" if !self.grants.plan_submit => {
                "'submit-plan' needs a capabilities.plan.submit: true declaration in murmur.yaml; this capsule declares none".to_string()
            }
            "pull-artifact" if !self.grants.install => format!(
                "not-granted: this capsule declares no capabilities.install, so pulling '{artifact}' is refused"
            ),
            "remove-artifact" if !self.grants.install => format!(
                "not-granted: this capsule declares no capabilities.install, so removing '{artifact}' is refused"
            ),
            _ => return None,
        };
        Some(missing)
    }

    /// The executor for a tool.
    pub fn executor(&self, tool: &ToolDecl) -> Arc<dyn ToolExecutor> {
        match &tool.kind {
            ToolKind::Shell { .. } => self.executors.shell.clone(),
            ToolKind::Skill { .. } => self.executors.skill.clone(),
            ToolKind::Runtime => self
                .executors
                .runtime
                .get(&tool.name)
                .cloned()
                .unwrap_or_else(|| self.executors.native.clone()),
            ToolKind::Native { .. } => self.executors.native.clone(),
        }
    }

    /// A trace sink for calls whose lines hang off `parent`.
    pub fn sink(trace: &ActorRef<TraceMsg>, parent: &str) -> crate::tool::TraceSink {
        let trace = trace.clone();
        let parent = parent.to_string();
        Arc::new(move |mut e: crate::trace::TraceEvent| {
            if e.parent_id.is_none() {
                e.parent_id = Some(parent.clone());
            }
            let _ = trace.send_message(TraceMsg::Append(e));
        })
    }
}

impl DispatcherState {
    /// The work one call does once admitted: a future that produces its answer. Refusals that
    /// need no work are ready futures; tools, delegations and plans run when awaited.
    fn work(
        &mut self,
        request: CallRequest,
        started: Instant,
    ) -> futures::future::BoxFuture<'static, Dispatched> {
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
                crate::session::truncate(&raw, 200)
            );
            return futures::future::ready(refused(CallKind::Tool, text, request)).boxed();
        }
        let (tool, kind) = match self.table.route(&request.name) {
            Route::Refuse(text) => {
                return futures::future::ready(refused(CallKind::Tool, text, request)).boxed()
            }
            Route::Runtime(name) => {
                if let Some(text) = self.table.runtime_refusal(name, &request.input) {
                    return futures::future::ready(refused(CallKind::Tool, text, request)).boxed();
                }
                return match name {
                    "delegate-task" => {
                        let ctx = self.delegation.clone();
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
                        .boxed()
                    }
                    "submit-plan" => self.plan(request, started),
                    "pull-artifact" | "remove-artifact" => self.artifact(name, request, started),
                    _ => {
                        let text = format!("'{name}' is granted by this capsule's manifest, but this build of mur does not run it yet");
                        futures::future::ready(refused(CallKind::Tool, text, request)).boxed()
                    }
                };
            }
            Route::Exec(tool, kind) => (tool, kind),
        };
        if let Some(text) = missing_required(&tool, &request.input) {
            return futures::future::ready(refused(kind, text, request)).boxed();
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
        async move {
            let result = match executor.execute(exec).await {
                Ok(out) => {
                    let source = match kind {
                        CallKind::Skill => format!("skill:{}", tool.name),
                        _ => format!("tool:{}", tool.name),
                    };
                    // Operator skills are trusted guidance; everything else is fenced.
                    let fenced = kind != CallKind::Skill || tool.origin == ToolOrigin::Runtime;
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
                Err(text) => CallResult::Refused { text },
            };
            Dispatched {
                request,
                kind,
                result,
                duration_ms: elapsed(),
                effect: None,
            }
        }
        .boxed()
    }

    /// A `pull-artifact` / `remove-artifact` call: the Registry runs it with this capsule's
    /// service; a change reaches this Dispatcher's table at once (a removed tool is refused
    /// from the next call) and the Session's tool array from the next turn.
    fn artifact(
        &mut self,
        name: &'static str,
        request: CallRequest,
        started: Instant,
    ) -> futures::future::BoxFuture<'static, Dispatched> {
        use futures::FutureExt;
        let (Some(registry), Some(service), Some(me)) = (
            self.registry.clone(),
            self.artifacts.clone(),
            self.myself.clone(),
        ) else {
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
        async move {
            let source = format!("tool:{name}");
            let (result, effect) = if name == "pull-artifact" {
                let answer = ractor::call!(registry, |reply| RegistryMsg::Pull {
                    service,
                    request: asked,
                    reply
                });
                match answer {
                    Ok(Ok(PullOutcome::Listing(v))) => (ran(&source, &v, None), None),
                    Ok(Ok(PullOutcome::Pulled(p))) => {
                        let note = format!("{} is in your tool list from your next turn.", p.tool.name);
                        let _ = me.send_message(DispatcherMsg::ToolsChanged {
                            added: Some(p.tool.clone()),
                            removed: None,
                        });
                        (
                            ran(&source, &p.result, Some(&note)),
                            Some(Effect::ToolsChanged(Box::new(ToolsChange {
                                pulled: Some(*p),
                                removed: None,
                            }))),
                        )
                    }
                    Ok(Err(text)) => (CallResult::Refused { text }, None),
                    Err(e) => (
                        CallResult::Refused {
                            text: format!("not-fetched: the registry did not answer: {e}"),
                        },
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
                        let _ = me.send_message(DispatcherMsg::ToolsChanged {
                            added: None,
                            removed: Some(r.tool_name.clone()),
                        });
                        (
                            ran(&source, &r.result, Some(&note)),
                            Some(Effect::ToolsChanged(Box::new(ToolsChange {
                                pulled: None,
                                removed: Some(r.tool_name),
                            }))),
                        )
                    }
                    Ok(Err(text)) => (CallResult::Refused { text }, None),
                    Err(e) => (
                        CallResult::Refused {
                            text: format!("not-removable: the registry did not answer: {e}"),
                        },
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
    fn plan(
        &mut self,
        request: CallRequest,
        started: Instant,
    ) -> futures::future::BoxFuture<'static, Dispatched> {
        use futures::FutureExt;
        let (tx, rx) = watch::channel(false);
        self.plan_cancel = Some(tx);
        let table = self.table.clone();
        let ctx = PlanContext {
            tools: table.tools.keys().cloned().collect(),
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
        async move {
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
        .boxed()
    }
}

/// A passed runtime tool's JSON result, fenced, with an optional note after the fence.
fn ran(source: &str, data: &Value, note: Option<&str>) -> CallResult {
    let text = data.to_string();
    CallResult::Ran {
        status: ExecStatus::Passed,
        output_bytes: text.len() as u64,
        text: fence::fence_with_note(source, &text, note),
        shell: None,
    }
}

/// What a pull or removal changed in the session's inventory.
#[derive(Clone, Debug)]
pub struct ToolsChange {
    /// The pulled artifact (its tool joins the inventory).
    pub pulled: Option<Pulled>,
    /// The tool name that leaves the inventory.
    pub removed: Option<String>,
}

/// A policy hook's refusal of one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denied {
    /// The hook that refused.
    pub hook: String,
    /// `on-tool-call` or `on-shell`.
    pub event: String,
    /// The tool name, or the resolved binary for shell calls.
    pub target: String,
    /// Its reason (or the runtime's, when the hook failed: fail closed).
    pub reason: String,
}

/// Decides on every call before it runs (policy hooks bound `on-tool-call` with
/// `commit_policy: deny`). Implementations fail closed: any error is a refusal.
#[async_trait::async_trait]
pub trait CallGate: Send + Sync {
    /// `None` lets the call proceed; `Some` refuses it.
    async fn decide(&self, call: &CallRequest, turn: u32) -> Option<Denied>;
}

/// The refusal for input missing fields the tool's schema requires, if any.
pub fn missing_required(tool: &ToolDecl, input: &Value) -> Option<String> {
    let required = tool.input_schema.get("required")?.as_array()?;
    let missing: Vec<&str> = required
        .iter()
        .filter_map(Value::as_str)
        .filter(|k| input.get(*k).is_none_or(Value::is_null))
        .collect();
    if missing.is_empty() {
        return None;
    }
    let quoted: Vec<String> = missing.iter().map(|k| format!("\"{k}\"")).collect();
    let all: Vec<&str> = required.iter().filter_map(Value::as_str).collect();
    Some(format!(
        "{}: missing required field(s) {}\n\nThis call did not run. {}'s input_schema requires: {}.",
        tool.name,
        quoted.join(", "),
        tool.name,
        all.join(", ")
    ))
}

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
                tools: args
                    .tools
                    .into_iter()
                    .map(|t| (t.name.clone(), Arc::new(t)))
                    .collect(),
                grants: args.grants,
                executors: args.executors,
                paths: args.paths,
            }),
            delegation,
            trace: args.trace,
            session_event: args.session_event,
            session: args.session,
            running: None,
            plan_cancel: None,
            gate: args.gate,
            registry: args.registry,
            artifacts: args.artifacts,
            myself: Some(_myself),
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: DispatcherMsg,
        state: &mut DispatcherState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            DispatcherMsg::ToolsChanged { added, removed } => {
                let mut tools = state.table.tools.clone();
                if let Some(name) = removed {
                    tools.remove(&name);
                }
                if let Some(t) = added {
                    tools.insert(t.name.clone(), Arc::new(t));
                }
                // Copy on write: a plan still running keeps the table it started with.
                state.table = Arc::new(ToolTable {
                    tools,
                    grants: state.table.grants.clone(),
                    executors: state.table.executors.clone(),
                    paths: state.table.paths.clone(),
                });
            }
            DispatcherMsg::CancelAll => {
                if let Some(tx) = state.plan_cancel.take() {
                    // A plan winds down itself (its plan_end says why).
                    let _ = tx.send(true);
                } else if let Some(h) = state.running.take() {
                    h.abort();
                }
            }
            DispatcherMsg::Dispatch(request) => {
                let started = Instant::now();
                let work = state.work(request.clone(), started);
                let gate = state.gate.clone();
                let session = state.session.clone();
                let turn = request.turn;
                state.running = Some(tokio::spawn(async move {
                    if let Some(gate) = gate {
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
                    let d = work.await;
                    let _ = session.send_message(SessionMsg::ToolDone(Box::new(d)));
                }));
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut DispatcherState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(h) = state.running.take() {
            h.abort();
        }
        Ok(())
    }
}

/// What a delegation needs to know about the delegating session.
#[derive(Clone)]
pub struct DelegateCtx {
    session_id: String,
    depth: u32,
    supervisor: Option<ActorRef<SupervisorMsg>>,
    session: ActorRef<SessionMsg>,
    spawn_allow: Vec<String>,
    parent_grants: Grants,
    records_dir: std::path::PathBuf,
    deadline: std::time::Duration,
}

impl DelegateCtx {
    /// The full name `spawn.allow` grants for a bare (or full) capsule name.
    pub fn full_name(&self, capsule: &str) -> Option<&str> {
        self.spawn_allow
            .iter()
            .find(|f| bare(f) == capsule || f.as_str() == capsule)
            .map(String::as_str)
    }

    /// The delegating session's id.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// How long a waiting plan step gives a child.
    pub fn deadline(&self) -> std::time::Duration {
        self.deadline
    }

    /// Ask the Supervisor for a child of this session. With `waiter`, the child's outcome goes
    /// there (a plan step waiting for it) instead of to the session.
    pub async fn start(
        &self,
        full: &str,
        version: &str,
        task: &str,
        waiter: Option<oneshot::Sender<DelegationOutcome>>,
    ) -> Result<StartedChild, String> {
        let Some(supervisor) = &self.supervisor else {
            return Err("delegation is not available in this process".into());
        };
        let session_id = ids::session_id();
        let records = self.records_dir.join("children").join(&session_id);
        let request = ChildRequest {
            capsule: full.to_string(),
            version: version.to_string(),
            task: task.to_string(),
            session_id,
            delegation_id: ids::mint("dlg_"),
            parent_session_id: self.session_id.clone(),
            parent_grants: self.parent_grants.clone(),
            paths: SessionPaths {
                workdir: records.clone(),
                records_dir: records,
            },
            depth: self.depth + 1,
        };
        let answer = ractor::call!(supervisor, |reply| SupervisorMsg::SpawnChild {
            request: Box::new(request),
            parent: self.session.clone(),
            waiter,
            reply
        });
        match answer {
            Ok(r) => r,
            Err(e) => Err(format!("the runtime did not answer: {e}")),
        }
    }

    /// Tell the Supervisor a child is gone without a report (a crash seen by a waiting step).
    pub fn forget(&self, session_id: &str) {
        if let Some(sup) = &self.supervisor {
            let _ = sup.send_message(SupervisorMsg::ChildGone {
                session_id: session_id.to_string(),
            });
        }
    }

    /// The names this session may delegate to, bare.
    pub fn bare_names(&self) -> Vec<&str> {
        self.spawn_allow.iter().map(|f| bare(f)).collect()
    }
}

fn required_str<'a>(input: &'a Value, key: &str) -> Result<&'a str, String> {
    match input.get(key).and_then(Value::as_str) {
        Some(s) if !s.trim().is_empty() => Ok(s),
        _ => Err(format!("'delegate-task' requires a non-empty '{key}'")),
    }
}

/// Run one `delegate-task` call: validate, ask the Supervisor for the child, answer.
async fn delegate(ctx: &DelegateCtx, input: &Value) -> (CallResult, Option<Effect>) {
    let asked_capsule = input.get("capsule").and_then(Value::as_str).unwrap_or("");
    let asked_version = input.get("version").and_then(Value::as_str).unwrap_or("");
    let refused = |reason: String, capsule: String| {
        (
            CallResult::Refused {
                text: reason.clone(),
            },
            Some(Effect::DelegationRefused {
                capsule,
                version: asked_version.to_string(),
                reason,
            }),
        )
    };
    if !input.is_object() {
        return refused(
            "'delegate-task' expects a JSON object as its input".into(),
            asked_capsule.into(),
        );
    }
    let fields = (
        required_str(input, "capsule"),
        required_str(input, "version"),
        required_str(input, "task"),
    );
    let (capsule, version, task) = match fields {
        (Ok(c), Ok(v), Ok(t)) => (c, v, t),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
            return refused(e, asked_capsule.into())
        }
    };
    let Some(full) = ctx.full_name(capsule).map(str::to_string) else {
        return refused(
            format!(
                "'{capsule}' is not in capabilities.spawn.allow; this capsule may delegate to: {}",
                ctx.bare_names().join(", ")
            ),
            capsule.into(),
        );
    };
    match ctx.start(&full, version, task, None).await {
        Ok(started) => {
            let data = serde_json::json!({
                "delegation_id": started.delegation_id,
                "session_id": started.session_id,
                "capsule": bare(&full),
                "version": version,
                "status": "started",
                "child_workdir": started.workdir.display().to_string(),
            });
            (
                CallResult::Ran {
                    status: ExecStatus::Passed,
                    output_bytes: data.to_string().len() as u64,
                    text: fence::fence("tool:delegate-task", &data.to_string()),
                    shell: None,
                },
                Some(Effect::DelegationStarted {
                    started,
                    capsule: full,
                    version: version.to_string(),
                }),
            )
        }
        Err(reason) => refused(reason, full),
    }
}
