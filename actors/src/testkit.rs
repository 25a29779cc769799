//! A kit for running the kernel without the `mur` crate: an in-memory model, in-memory tool
//! executors, and a way to run a tree and read its trace. The kernel's own tests
//! (`actors/tests/`) and the benches use it; it has no dependency beyond the kernel's.
//!
//! The model is a real [`ModelDriver`]: the Session cannot tell it from an HTTP one. Like the
//! `mur` crate's scripted driver it is stateless: the reply it plays is chosen by the number of
//! assistant messages already in the conversation, so the same replies give the same run. A
//! conversation is written as a list of [`Reply`] values, one per model turn:
//!
//! ```
//! use mur_actors::testkit::{Replies, Reply};
//! use serde_json::json;
//!
//! let model = Replies::new([
//!     Reply::call("bash", json!({"command": "ls"})),
//!     Reply::say("the folder is empty"),
//! ]);
//! ```

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::grants::Grants;
use crate::model::{
    ContentBlock, InferError, InferErrorKind, InferReply, InferRequest, Message, ModelDriver,
    RetrySink, StopReason, Usage,
};
use crate::session::SessionReport;
use crate::spec::{SessionPaths, SessionSpec};
use crate::supervisor::{Supervisor, SupervisorArgs, SupervisorMsg};
use crate::tool::{ExecOutput, ExecRequest, ExecResult, ExecStatus, Executors, ToolExecutor};

/// One model turn.
#[derive(Clone, Debug)]
pub enum Reply {
    /// End the turn with this text.
    Say(String),
    /// Call these tools, in order: `(tool name, input)`.
    Call(Vec<(String, Value)>),
    /// Fail the call with this message (a driver error).
    Fail(String),
    /// Panic inside the driver: the session crashes.
    Panic(String),
    /// Never answer (until canceled).
    Hang,
    /// Wait this long, then play the inner reply.
    After(Duration, Box<Reply>),
}

impl Reply {
    /// End the turn with `text`.
    pub fn say(text: impl Into<String>) -> Reply {
        Reply::Say(text.into())
    }

    /// Call one tool.
    pub fn call(tool: &str, input: Value) -> Reply {
        Reply::Call(vec![(tool.to_string(), input)])
    }

    /// Play `self` after `ms` milliseconds.
    pub fn after_ms(self, ms: u64) -> Reply {
        Reply::After(Duration::from_millis(ms), Box::new(self))
    }
}

/// The in-memory model: plays its replies in order; past the last it fails the call.
#[derive(Clone, Debug)]
pub struct Replies {
    turns: Arc<Vec<Reply>>,
}

impl Replies {
    /// A model that plays `turns`.
    pub fn new(turns: impl IntoIterator<Item = Reply>) -> Replies {
        Replies {
            turns: Arc::new(turns.into_iter().collect()),
        }
    }

    /// The same, behind the driver trait.
    pub fn driver(self) -> Arc<dyn ModelDriver> {
        Arc::new(self)
    }
}

#[async_trait]
impl ModelDriver for Replies {
    fn name(&self) -> &str {
        "mur/testkit"
    }

    async fn infer(
        &self,
        request: &InferRequest,
        _retries: &dyn RetrySink,
    ) -> Result<InferReply, InferError> {
        let turn = request
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let mut reply = self.turns.get(turn).cloned().ok_or_else(|| {
            InferError::new(
                InferErrorKind::Driver,
                format!("the test model has no reply for turn {turn}"),
            )
        })?;
        loop {
            match reply {
                Reply::After(wait, next) => {
                    tokio::time::sleep(wait).await;
                    reply = *next;
                }
                Reply::Hang => std::future::pending::<()>().await,
                Reply::Panic(why) => panic!("{why}"),
                Reply::Fail(why) => return Err(InferError::new(InferErrorKind::Driver, why)),
                Reply::Say(text) => {
                    return Ok(answer(
                        StopReason::EndTurn,
                        vec![ContentBlock::Text { text }],
                    ))
                }
                Reply::Call(calls) => {
                    let blocks = calls
                        .into_iter()
                        .enumerate()
                        .map(|(i, (name, input))| ContentBlock::ToolCall {
                            id: format!("call_{turn}_{i}"),
                            name,
                            input,
                        })
                        .collect();
                    return Ok(answer(StopReason::ToolCall, blocks));
                }
            }
        }
    }
}

fn answer(stop_reason: StopReason, content: Vec<ContentBlock>) -> InferReply {
    InferReply {
        stop_reason,
        content,
        usage: Usage {
            input_tokens: Some(10),
            output_tokens: Some(5),
            ..Usage::default()
        },
        attempts: 1,
    }
}

/// One call an in-memory executor answered.
#[derive(Clone, Debug, PartialEq)]
pub struct SeenCall {
    /// The tool's name.
    pub tool: String,
    /// The model's input.
    pub input: Value,
}

/// An in-memory executor: answers every call `<tool> ran` (passed), or hangs when told to,
/// and remembers each call it saw.
#[derive(Clone, Default)]
pub struct Canned {
    seen: Arc<Mutex<Vec<SeenCall>>>,
    hang: bool,
}

impl Canned {
    /// An executor that answers at once.
    pub fn new() -> Canned {
        Canned::default()
    }

    /// An executor whose calls never return (until the call is aborted).
    pub fn hanging() -> Canned {
        Canned {
            hang: true,
            ..Canned::default()
        }
    }

    /// The calls seen so far, in order.
    pub fn seen(&self) -> Vec<SeenCall> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// This executor for every kind of tool.
    pub fn executors(&self) -> Executors {
        let me: Arc<dyn ToolExecutor> = Arc::new(self.clone());
        Executors {
            shell: me.clone(),
            native: me.clone(),
            skill: me,
            runtime: Default::default(),
        }
    }
}

#[async_trait]
impl ToolExecutor for Canned {
    async fn execute(&self, request: ExecRequest) -> ExecResult {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(SeenCall {
                tool: request.tool.name.clone(),
                input: request.input.clone(),
            });
        if self.hang {
            std::future::pending::<()>().await;
        }
        Ok(ExecOutput {
            status: ExecStatus::Passed,
            text: format!("{} ran", request.tool.name),
            note: None,
            shell: None,
        })
    }
}

/// A root spec for `model` under `dir` (records and work in `dir/<session id>`), with
/// `grants` and `executors`; the rest as [`SessionSpec::new`] sets it.
pub fn root_spec(
    dir: &Path,
    model: Arc<dyn ModelDriver>,
    grants: Grants,
    executors: Executors,
) -> SessionSpec {
    let id = crate::ids::session_id();
    let records = dir.join(&id);
    SessionSpec::new(
        id,
        "kit",
        model,
        grants,
        "the task".into(),
        SessionPaths {
            workdir: records.clone(),
            records_dir: records,
        },
        executors,
    )
}

/// A tree started on a fresh Supervisor: send it messages, then wait for its report.
pub struct Tree {
    /// The Supervisor.
    pub supervisor: ractor::ActorRef<SupervisorMsg>,
    handle: tokio::task::JoinHandle<()>,
    report: tokio::sync::oneshot::Receiver<SessionReport>,
    records: PathBuf,
}

impl Tree {
    /// Start `root` under a new Supervisor configured with `args`.
    pub async fn start(root: SessionSpec, args: SupervisorArgs) -> Tree {
        let records = root.paths.records_dir.clone();
        let (supervisor, handle) = ractor::Actor::spawn(None, Supervisor, args)
            .await
            .expect("the supervisor starts");
        let report = ractor::call!(supervisor, |reply| SupervisorMsg::StartRoot {
            spec: Box::new(root),
            reply
        })
        .expect("the supervisor answers")
        .expect("the root session starts");
        Tree {
            supervisor,
            handle,
            report,
            records,
        }
    }

    /// The root's records folder.
    pub fn records(&self) -> &Path {
        &self.records
    }

    /// Wait (at most 60 s) until the root's trace holds an `event_type` line: a wait for an
    /// event, not a guess at how long it takes.
    pub async fn wait_for_line(&self, event_type: &str) {
        let path = self.records.join("trace.jsonl");
        let needle = format!("\"event_type\":\"{event_type}\"");
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !std::fs::read_to_string(&path).is_ok_and(|t| t.contains(&needle)) {
            assert!(
                std::time::Instant::now() < deadline,
                "no {event_type} line in {} after 60 s",
                path.display()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Wait (at most 60 s) until the root's trace, read whole, satisfies `done`.
    pub async fn wait_until(&self, done: impl Fn(&[Value]) -> bool) {
        let path = self.records.join("trace.jsonl");
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            // A line being written may be torn: read only whole ones.
            let lines: Vec<Value> = std::fs::read_to_string(&path)
                .unwrap_or_default()
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect();
            if done(&lines) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{} never got there in 60 s",
                path.display()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Ctrl-C: cancel the tree.
    pub fn cancel(&self, reason: &str) {
        let _ = self.supervisor.send_message(SupervisorMsg::Shutdown {
            reason: reason.into(),
        });
    }

    /// Wait (at most 60 s) for the root's report, then stop the tree.
    pub async fn report(self) -> SessionReport {
        let report = tokio::time::timeout(Duration::from_secs(60), self.report)
            .await
            .expect("the tree ended within 60 s")
            .expect("the root reported");
        self.supervisor.stop(None);
        let _ = self.handle.await;
        report
    }
}

/// Children by full capsule name, each played by its own in-memory model, with no grants and
/// the given executors.
pub struct ChildModels {
    models: std::collections::HashMap<String, Replies>,
    executors: Executors,
}

impl ChildModels {
    /// Resolve `acme/<name>`-style full names to their models.
    pub fn new(
        models: impl IntoIterator<Item = (&'static str, Replies)>,
        executors: Executors,
    ) -> ChildModels {
        ChildModels {
            models: models
                .into_iter()
                .map(|(name, model)| (name.to_string(), model))
                .collect(),
            executors,
        }
    }
}

#[async_trait]
impl crate::delegation::CapsuleResolver for ChildModels {
    async fn resolve(
        &self,
        r: &crate::delegation::ChildRequest,
    ) -> Result<SessionSpec, crate::delegation::DelegationError> {
        let model = self.models.get(&r.capsule).ok_or_else(|| {
            crate::delegation::DelegationError::new(
                crate::delegation::DelegationErrorKind::NotResolved,
                format!("capsule '{}@{}' is not in any store", r.capsule, r.version),
            )
        })?;
        let mut spec = SessionSpec::new(
            r.session_id.clone(),
            crate::provided::bare(&r.capsule),
            model.clone().driver(),
            Grants::default(),
            r.task.clone(),
            r.paths.clone(),
            self.executors.clone(),
        );
        spec.depth = r.depth;
        spec.spawned_by = Some(crate::spec::SpawnedBy {
            parent_session_id: r.parent_session_id.clone(),
            delegation_id: r.delegation_id.clone(),
        });
        Ok(spec)
    }
}

/// Run `root` to its end on a fresh Supervisor and return its report.
pub async fn run(root: SessionSpec, args: SupervisorArgs) -> SessionReport {
    Tree::start(root, args).await.report().await
}

/// The lines of a trace file, parsed.
pub fn trace_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).expect("a whole JSON line"))
        .collect()
}

/// The event types of trace lines, in order.
pub fn event_types(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .map(|l| l["event_type"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// A child actor that takes every message and does nothing: the stand-in a test placer
/// returns, or a child to record in a [`ChildTable`](crate::delegation::ChildTable).
pub struct Idle;

#[ractor::async_trait]
impl ractor::Actor for Idle {
    type Msg = crate::session::SessionMsg;
    type State = ();
    type Arguments = ();

    async fn pre_start(
        &self,
        _myself: ractor::ActorRef<Self::Msg>,
        _args: (),
    ) -> Result<(), ractor::ActorProcessingErr> {
        Ok(())
    }
}
