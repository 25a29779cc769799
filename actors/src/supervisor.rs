//! The [`Supervisor`]: the root of a `mur run` process's actor tree.
//!
//! It spawns the root Session (linked, so a crash reaches it as a supervision event rather than
//! killing the process), keeps the id → actor map the HTTP door looks sessions up in, owns the
//! door itself (stopped when the Supervisor stops), and turns Ctrl-C into a `Cancel` for every
//! live session. Sessions are temporary: none is ever restarted. The one actor it restarts is
//! the [`TraceWriter`], which holds no state a restart could lose.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use tokio::sync::oneshot;

use crate::delegation::{
    CapsuleResolver, ChildRequest, DelegationError, DelegationErrorKind, DelegationOutcome,
    OutcomeStatus, StartedChild,
};
use crate::durable::{RecordSync, SessionRecords};
use crate::placement::{ChildPlacer, Offer, Placed};
use crate::registry::{Registry, RegistryMsg};
use crate::session::{ExitStatus, Session, SessionArgs, SessionMsg, SessionReport, Totals};
use crate::spec::SessionSpec;
use crate::text::truncate;
use crate::trace_writer::{TraceWriter, TraceWriterSlot};

/// How a crashed root's report begins (`result`): what tells a crash from a failure to a
/// process that hosts the session for a parent elsewhere (`mur node`).
pub const CRASHED_PREFIX: &str = "error: the session crashed: ";

/// Default for `mur run --max-depth`: how deep a delegation tree may grow.
pub const DEFAULT_MAX_DEPTH: u32 = 8;
/// Default for `mur run --max-children`: live sub-capsules one session may hold at once.
pub const DEFAULT_MAX_CHILDREN: u32 = 10_000;

/// How the Supervisor is configured.
#[derive(Clone)]
pub struct SupervisorArgs {
    /// Builds child specs for `delegate-task`; `None` refuses every delegation.
    pub resolver: Option<Arc<dyn CapsuleResolver>>,
    /// Deepest allowed child (root = 0).
    pub max_depth: u32,
    /// Most live children per session.
    pub max_children: u32,
    /// Offered every resolved child first (`mur run --nodes`); `None` runs every child here.
    pub placer: Option<Arc<dyn ChildPlacer>>,
}

impl Default for SupervisorArgs {
    fn default() -> Self {
        SupervisorArgs {
            resolver: None,
            max_depth: DEFAULT_MAX_DEPTH,
            max_children: DEFAULT_MAX_CHILDREN,
            placer: None,
        }
    }
}

/// The process's one loopback listener, as the Supervisor holds it.
pub struct Door {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Stops the listener (called when the Supervisor stops).
    pub stop: Box<dyn FnOnce() + Send>,
}

/// Messages the [`Supervisor`] takes.
pub enum SupervisorMsg {
    /// Start the root session; the reply carries where its report will arrive.
    StartRoot {
        /// What to run.
        spec: Box<SessionSpec>,
        /// Answers once the session is staged and running (or could not start).
        reply: RpcReplyPort<Result<oneshot::Receiver<SessionReport>, String>>,
    },
    /// Hand the Supervisor the door to own.
    AttachDoor(Door),
    /// Find a live session by id (the door's lookup).
    Lookup {
        /// `ses_…`; `None` means the root.
        session_id: Option<String>,
        /// The session, if live.
        reply: RpcReplyPort<Option<ActorRef<SessionMsg>>>,
    },
    /// Cancel every live session (Ctrl-C).
    Shutdown {
        /// Why, recorded in each trace.
        reason: String,
    },
    /// A session finished and reported.
    Ended(Box<SessionReport>),
    /// Start a child session for a delegation, linked under its parent session.
    SpawnChild {
        /// What to start.
        request: Box<ChildRequest>,
        /// The delegating session (the child's supervisor in the tree, and its outcome's target).
        parent: ActorRef<SessionMsg>,
        /// Where the outcome goes instead, when a plan step waits for it.
        waiter: Option<oneshot::Sender<DelegationOutcome>>,
        /// Answers once the child holds its task, or with the refusal sentence.
        reply: RpcReplyPort<Result<StartedChild, DelegationError>>,
    },
    /// A child started (sent by the spawning task, to update the maps).
    ChildUp {
        /// Its session id.
        session_id: String,
        /// Its parent's session id.
        parent_session_id: String,
        /// The actor.
        actor: ActorRef<SessionMsg>,
    },
    /// A child ended without reporting (it crashed): forget it.
    ChildGone {
        /// Its session id.
        session_id: String,
    },
}

/// The root actor of a `mur run` process.
pub struct Supervisor;

/// The Supervisor's state.
pub struct SupervisorState {
    args: SupervisorArgs,
    registry: ActorRef<RegistryMsg>,
    sessions: HashMap<String, ActorRef<SessionMsg>>,
    by_actor: HashMap<ActorId, String>,
    /// child session id → parent session id, for the live-children count.
    parents: HashMap<String, String>,
    /// parent session id → live children (started or starting).
    live: HashMap<String, u32>,
    root: Option<String>,
    root_report: Option<oneshot::Sender<SessionReport>>,
    /// The root's records folder, flushed here if the root crashes.
    root_records: Option<std::path::PathBuf>,
    /// The root was delegated by a parent in another process (`mur node`): its records are
    /// copied into the parent's, which flushes them; here a crash only waits for its lines.
    root_hosted: bool,
    door: Option<Door>,
    /// The tree's record flushes, shared by every session it starts.
    records: RecordSync,
    /// The trace-writer actor, as every session's trace reaches it.
    trace_writer: TraceWriterSlot,
    /// Its id, to know its supervision events.
    trace_writer_id: ActorId,
}

impl SupervisorState {
    fn forget(&mut self, session_id: &str) {
        self.sessions.remove(session_id);
        if let Some(parent) = self.parents.remove(session_id) {
            if let Some(n) = self.live.get_mut(&parent) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.live.remove(&parent);
                }
            }
        }
    }

    fn deliver_root(&mut self, report: SessionReport) {
        if Some(&report.session_id) == self.root.as_ref() {
            if let Some(tx) = self.root_report.take() {
                let _ = tx.send(report);
            }
        }
    }
}

// Local-only: ractor's `cluster` feature (on for `mur node`) wants every message type named;
// this one never crosses a node.
impl ractor::Message for SupervisorMsg {}

#[ractor::async_trait]
impl Actor for Supervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = SupervisorArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: SupervisorArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let (registry, _) = Actor::spawn_linked(None, Registry, (), myself.get_cell()).await?;
        let trace_writer = TraceWriterSlot::default();
        let (writer, _) = Actor::spawn_linked(None, TraceWriter, (), myself.get_cell()).await?;
        let trace_writer_id = writer.get_id();
        trace_writer.set(writer);
        Ok(SupervisorState {
            trace_writer,
            trace_writer_id,
            args,
            registry,
            sessions: HashMap::new(),
            by_actor: HashMap::new(),
            parents: HashMap::new(),
            live: HashMap::new(),
            root: None,
            root_report: None,
            root_records: None,
            root_hosted: false,
            door: None,
            records: RecordSync::new(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: SupervisorMsg,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SupervisorMsg::StartRoot { spec, reply } => {
                let session_id = spec.session_id.clone();
                let records_dir = spec.paths.records_dir.clone();
                state.root_hosted = spec.spawned_by.is_some();
                let me = myself.clone();
                let args = SessionArgs {
                    spec: *spec,
                    report: Box::new(move |r| {
                        let _ = me.send_message(SupervisorMsg::Ended(Box::new(r)));
                    }),
                    supervisor: Some(myself.clone()),
                    registry: Some(state.registry.clone()),
                    records: state.records.clone(),
                    trace_writer: state.trace_writer.clone(),
                };
                match Actor::spawn_linked(None, Session, args, myself.get_cell()).await {
                    Ok((session, _)) => {
                        let (tx, rx) = oneshot::channel();
                        state.by_actor.insert(session.get_id(), session_id.clone());
                        state.sessions.insert(session_id.clone(), session);
                        state.root = Some(session_id);
                        state.root_report = Some(tx);
                        state.root_records = Some(records_dir);
                        let _ = reply.send(Ok(rx));
                    }
                    Err(e) => {
                        let _ = reply.send(Err(spawn_error_text(&e)));
                    }
                }
            }
            SupervisorMsg::AttachDoor(door) => state.door = Some(door),
            SupervisorMsg::Lookup { session_id, reply } => {
                let id = session_id.or_else(|| state.root.clone());
                let _ = reply.send(id.and_then(|id| state.sessions.get(&id).cloned()));
            }
            SupervisorMsg::Shutdown { reason } => {
                // The root cancels its children itself, so each delegation gets its terminal
                // line in the parent's trace with the parent's reason.
                if let Some(root) = state.root.as_ref().and_then(|id| state.sessions.get(id)) {
                    let _ = root.send_message(SessionMsg::Cancel { reason });
                }
            }
            SupervisorMsg::Ended(report) => {
                state.forget(&report.session_id);
                state.deliver_root(*report);
            }
            SupervisorMsg::ChildGone { session_id } => state.forget(&session_id),
            SupervisorMsg::ChildUp {
                session_id,
                parent_session_id,
                actor,
            } => {
                // A child that already ended (and was forgotten) must not be re-added.
                if state.parents.get(&session_id) == Some(&parent_session_id) {
                    state.sessions.insert(session_id, actor);
                }
            }
            SupervisorMsg::SpawnChild {
                request,
                parent,
                waiter,
                reply,
            } => {
                if let Some(refusal) = check_bounds(state, &request) {
                    let _ = reply.send(Err(refusal));
                    return Ok(());
                }
                let Some(resolver) = state.args.resolver.clone() else {
                    let _ = reply.send(Err(DelegationError::new(
                        DelegationErrorKind::Unavailable,
                        "delegation is not available in this process: no capsule resolver",
                    )));
                    return Ok(());
                };
                *state
                    .live
                    .entry(request.parent_session_id.clone())
                    .or_default() += 1;
                state.parents.insert(
                    request.session_id.clone(),
                    request.parent_session_id.clone(),
                );
                // Resolve and start off the mailbox: thousands of children start concurrently.
                let shared = TreeShared {
                    registry: state.registry.clone(),
                    records: state.records.clone(),
                    trace_writer: state.trace_writer.clone(),
                    placer: state.args.placer.clone(),
                    live_in_tree: state.parents.len().saturating_sub(1),
                    bounds: (state.args.max_depth, state.args.max_children),
                };
                tokio::spawn(start_child(
                    myself.clone(),
                    shared,
                    resolver,
                    *request,
                    parent,
                    waiter,
                    reply,
                ));
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        if let SupervisionEvent::ActorFailed(cell, err) = &event {
            if cell.get_id() == state.registry.get_id() {
                tracing::error!("the registry actor failed: {err}");
            }
        }
        if let SupervisionEvent::ActorFailed(cell, _)
        | SupervisionEvent::ActorTerminated(cell, ..) = &event
        {
            if cell.get_id() == state.trace_writer_id {
                // Trace files report to the slot: the new writer hears every later failure.
                tracing::error!("the trace writer stopped; starting a new one");
                let (writer, _) =
                    Actor::spawn_linked(None, TraceWriter, (), myself.get_cell()).await?;
                state.trace_writer_id = writer.get_id();
                state.trace_writer.set(writer);
                return Ok(());
            }
        }
        let (cell, failure) = match event {
            SupervisionEvent::ActorTerminated(cell, _, _) => (cell, None),
            SupervisionEvent::ActorFailed(cell, err) => (cell, Some(err.to_string())),
            _ => return Ok(()),
        };
        if let Some(id) = state.by_actor.remove(&cell.get_id()) {
            state.forget(&id);
            // A session that panicked still produces an outcome. (A clean stop always reports
            // first; its report may still be queued behind this higher-priority event.)
            if failure.is_some() && state.root.as_ref() == Some(&id) {
                if let Some(tx) = state.root_report.take() {
                    let mut report = SessionReport {
                        session_id: id,
                        exit_status: ExitStatus::Failed,
                        result: format!("{CRASHED_PREFIX}{}", failure.unwrap_or_default()),
                        totals: Totals::default(),
                        duration_ms: 0,
                        trace_error: None,
                    };
                    // A hosted root (on `mur node`) ends as it would had it not crashed: its
                    // lines written, its records flushed by the parent that copies them. Its
                    // end must not wait for this disk: the parent's delegation deadline runs.
                    if state.root_hosted {
                        tokio::spawn(async move {
                            crate::trace::written_all().await;
                            let _ = tx.send(report);
                        });
                        return Ok(());
                    }
                    // It never flushed its records: the whole tree is flushed (once every line
                    // it appended is written) before the report leaves.
                    if let Some(dir) = state.root_records.clone() {
                        let mut records = SessionRecords::new(dir, &[]);
                        records.drain_first = true;
                        state.records.submit(records);
                    }
                    let sync = state.records.clone();
                    tokio::spawn(async move {
                        if let Err(e) = sync.settle().await {
                            report.trace_error = Some(e);
                        }
                        let _ = tx.send(report);
                    });
                }
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(door) = state.door.take() {
            (door.stop)();
        }
        Ok(())
    }
}

fn check_bounds(state: &SupervisorState, r: &ChildRequest) -> Option<DelegationError> {
    let bounds = |why: String| Some(DelegationError::new(DelegationErrorKind::Bounds, why));
    if r.depth > state.args.max_depth {
        return bounds(format!(
            "delegation refused: '{}' would run at depth {} of the delegation tree, and mur run --max-depth allows {}; raise --max-depth or delegate from a shallower capsule",
            r.capsule, r.depth, state.args.max_depth
        ));
    }
    let live = state.live.get(&r.parent_session_id).copied().unwrap_or(0);
    if live >= state.args.max_children {
        return bounds(format!(
            "delegation refused: this session already has {live} live sub-capsules, the most mur run --max-children allows; wait for an outcome or raise --max-children"
        ));
    }
    None
}

/// What every session of the tree shares: the Registry for pulls, the tree's record flushes.
struct TreeShared {
    registry: ActorRef<RegistryMsg>,
    records: RecordSync,
    trace_writer: TraceWriterSlot,
    /// Where children may run besides here.
    placer: Option<Arc<dyn ChildPlacer>>,
    /// The tree's other live children when this one was asked for.
    live_in_tree: usize,
    /// `--max-depth` and `--max-children`, for a child placed elsewhere.
    bounds: (u32, u32),
}

/// Resolve the child's spec, spawn it under its parent, and answer the delegate-task call.
async fn start_child(
    supervisor: ActorRef<SupervisorMsg>,
    shared: TreeShared,
    resolver: Arc<dyn CapsuleResolver>,
    request: ChildRequest,
    parent: ActorRef<SessionMsg>,
    waiter: Option<oneshot::Sender<DelegationOutcome>>,
    reply: RpcReplyPort<Result<StartedChild, DelegationError>>,
) {
    let gone = |sup: &ActorRef<SupervisorMsg>| {
        let _ = sup.send_message(SupervisorMsg::ChildGone {
            session_id: request.session_id.clone(),
        });
    };
    let spec = match resolver.resolve(&request).await {
        Ok(spec) => spec,
        Err(text) => {
            gone(&supervisor);
            let _ = reply.send(Err(text));
            return;
        }
    };
    let paths = spec.paths.clone();
    let (capsule, version) = (request.capsule.clone(), request.version.clone());
    let delegation_id = request.delegation_id.clone();
    let to_parent = parent.clone();
    let sup = supervisor.clone();
    let report: crate::session::ReportSink = Box::new(move |r: SessionReport| {
        let status = match r.exit_status {
            ExitStatus::Ok => OutcomeStatus::Ok,
            _ => OutcomeStatus::Error,
        };
        let outcome = DelegationOutcome {
            delegation_id,
            capsule,
            version,
            child_session_id: r.session_id.clone(),
            status,
            answer: r.result.clone(),
            detail: (status != OutcomeStatus::Ok).then(|| failure_detail(&r)),
            duration_ms: r.duration_ms,
            totals: r.totals,
            child_workdir: paths.workdir.clone(),
            child_records_dir: paths.records_dir.clone(),
            // Filled from the parent's table, which knows where the child was placed.
            node: None,
        };
        match waiter {
            Some(w) => {
                let _ = w.send(outcome);
            }
            None => {
                let _ = to_parent.send_message(SessionMsg::ChildOutcome(Box::new(outcome)));
            }
        }
        let _ = sup.send_message(SupervisorMsg::Ended(Box::new(r)));
    });
    let (spec, report) = match shared.placer.clone() {
        None => (spec, report),
        Some(placer) => {
            let offer = Offer {
                request: request.clone(),
                spec,
                live_in_tree: shared.live_in_tree,
                parent: parent.get_cell(),
                report,
                records: shared.records.clone(),
                max_depth: shared.bounds.0,
                max_children: shared.bounds.1,
            };
            match placer.place(offer).await {
                Placed::Here { spec, report } => (*spec, report),
                Placed::There { child, node } => {
                    child_up(&supervisor, &request, child.clone());
                    let _ = reply.send(Ok(started(&request, child, Some(node))));
                    return;
                }
                Placed::Refused(text) => {
                    gone(&supervisor);
                    let _ = reply.send(Err(DelegationError::new(
                        DelegationErrorKind::Refused,
                        text,
                    )));
                    return;
                }
            }
        }
    };
    let args = SessionArgs {
        spec,
        report,
        supervisor: Some(supervisor.clone()),
        registry: Some(shared.registry),
        records: shared.records,
        trace_writer: shared.trace_writer,
    };
    match Actor::spawn_linked(None, Session, args, parent.get_cell()).await {
        Ok((child, _)) => {
            child_up(&supervisor, &request, child.clone());
            let _ = reply.send(Ok(started(&request, child, None)));
        }
        Err(e) => {
            gone(&supervisor);
            let _ = reply.send(Err(DelegationError::new(
                DelegationErrorKind::CannotStart,
                format!(
                    "the sub-capsule '{}@{}' could not start: {}",
                    request.capsule,
                    request.version,
                    spawn_error_text(&e)
                ),
            )));
        }
    }
}

/// Tell the Supervisor a child runs (to put it in the door's map).
fn child_up(
    supervisor: &ActorRef<SupervisorMsg>,
    request: &ChildRequest,
    actor: ActorRef<SessionMsg>,
) {
    let _ = supervisor.send_message(SupervisorMsg::ChildUp {
        session_id: request.session_id.clone(),
        parent_session_id: request.parent_session_id.clone(),
        actor,
    });
}

/// What `delegate-task` answers for a child that holds its task.
fn started(
    request: &ChildRequest,
    child: ActorRef<SessionMsg>,
    node: Option<String>,
) -> StartedChild {
    StartedChild {
        delegation_id: request.delegation_id.clone(),
        session_id: request.session_id.clone(),
        workdir: request.paths.workdir.clone(),
        records_dir: request.paths.records_dir.clone(),
        child,
        node,
    }
}

/// The sentence for a session that could not start (its `pre_start` error, unwrapped).
fn spawn_error_text(e: &ractor::SpawnErr) -> String {
    match e {
        ractor::SpawnErr::StartupFailed(inner) => inner.to_string(),
        other => other.to_string(),
    }
}

/// Why a child did not end `ok`, for its parent: its status, and for a failure the reason it
/// failed with (a child that could not make its folders has no trace to read it from).
fn failure_detail(r: &SessionReport) -> String {
    let status = r.exit_status.as_str();
    match r.result.strip_prefix("error: ") {
        Some(reason) if r.exit_status == ExitStatus::Failed => {
            format!("the sub-capsule ended {status}: {}", truncate(reason, 1000))
        }
        _ => format!("the sub-capsule ended {status}"),
    }
}
