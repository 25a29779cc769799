//! The [`Session`] actor: one capsule (or sub-capsule) and its turn loop.
//!
//! The Session owns the conversation, the held tool array and the task's counters. Nothing it
//! does blocks its mailbox for long: the model call runs in a spawned task whose reply comes back
//! as [`SessionMsg::InferDone`], tool calls go to the [`Dispatcher`] and come back as
//! [`SessionMsg::ToolDone`], so a `Cancel` (Ctrl-C) or a status query is handled while either is
//! in flight. Every step is written to the session's [`TraceLog`] as it happens; at the end
//! the root syncs the filesystem once (see [`crate::trace`]), and `session_end` totals are the
//! line counts.

mod children;
mod end;
mod turn;

use turn::start_infer;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};

use crate::delegation::{ChildTable, DelegationOutcome};
use crate::dispatcher::{Dispatcher, DispatcherArgs, DispatcherMsg};
use crate::durable::{self, RecordSync, SessionRecords};
use crate::file_lane::{self, Lane};
use crate::ids;
use crate::inventory::Inventory;
use crate::model::{
    ContentBlock, History, InferError, InferReply, InferRequest, Message, RetryNote, RetrySink,
    ToolSpec,
};
use crate::prompt;
use crate::protocol::{CallRequest, Dispatched};
use crate::record_error::RecordError;
use crate::spec::{Capture, SessionSpec};
use crate::staging;
use crate::supervisor::SupervisorMsg;
use crate::task::OwnedTask;
use crate::text::{sha256_hex, truncate};
use crate::trace::events;
use crate::trace::{EventType, TraceEvent, TraceLog};
use crate::trace_writer::{TraceWriterMsg, TraceWriterSlot};

/// The counters, re-exported where they have always been named.
pub use crate::totals::Totals;

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
    /// Set when the records (the trace, the result file) could not be written or synced.
    pub trace_error: Option<RecordError>,
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
    /// The session's trace cannot be written (sent by the
    /// [`TraceWriter`](crate::trace_writer::TraceWriter)): the task ends `failed`, since nothing
    /// it does from now on would be recorded.
    TraceFailed {
        /// What failed, naming the file.
        error: RecordError,
    },
    /// A tool call waits for a dispatcher this session has not started yet.
    StartDispatcher,
    /// The task ended and the children it canceled have reported, or did not in time: report
    /// and stop.
    Drained,
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
    /// The tree's record flushes: the session hands its records to it when it ends, and the
    /// root waits for the whole tree's.
    pub records: RecordSync,
    /// Where a failure to write this session's trace is reported.
    pub trace_writer: TraceWriterSlot,
}

/// The session actor.
pub struct Session;

/// Where a session is in its life. Each variant holds what is valid in it, so what may happen
/// next is a `match` on this one value (see each handler).
pub(super) enum Life {
    /// No model call yet: the task is empty or `max_turns` is 0 (decided at `Begin`).
    Starting,
    /// A model call is in flight (the first one goes out before the files are staged).
    Inferring {
        /// The call's task, held for its drop: leaving this state aborts the call.
        _call: OwnedTask,
    },
    /// The turn's tool calls run one at a time; `queue` holds those not yet dispatched.
    Calling {
        /// Calls of this turn still to run, in the model's order.
        queue: VecDeque<CallRequest>,
    },
    /// The model ended its turn while delegations still run: spending nothing until their
    /// outcomes are in, then one continuation.
    Waiting {
        /// Since when.
        since: Instant,
    },
    /// The task's end is decided; its `Finish` message is queued behind what the mailbox
    /// already holds, and turn messages are dropped.
    Ending {
        /// How it ends.
        status: ExitStatus,
    },
    /// Ended; the report waits for the children it canceled to end (or for 5 s).
    Draining {
        /// The report, held until then.
        report: Box<SessionReport>,
    },
    /// Reported (or crashed). Late answers are dropped.
    Ended {
        /// How it ended.
        status: ExitStatus,
    },
}

impl Life {
    /// True once the task's end is decided: no model or tool call starts any more.
    fn is_over(&self) -> bool {
        self.exit_status().is_some()
    }

    /// How the task ended, once that is decided.
    fn exit_status(&self) -> Option<ExitStatus> {
        match self {
            Life::Ending { status } | Life::Ended { status } => Some(*status),
            Life::Draining { report } => Some(report.exit_status),
            Life::Starting
            | Life::Inferring { .. }
            | Life::Calling { .. }
            | Life::Waiting { .. } => None,
        }
    }
}

/// The session's state.
pub struct SessionState {
    spec: SessionSpec,
    trace: TraceLog,
    /// Where the session is in its life.
    life: Life,
    /// Started with the session when it holds tools, else at its first tool call.
    dispatcher: Option<ActorRef<DispatcherMsg>>,
    /// For a dispatcher started later.
    registry: Option<ActorRef<crate::registry::RegistryMsg>>,
    /// Who hears the report; taken when it is sent (a crash sends none: ractor tells).
    report_to: Option<ReportSink>,
    system: Arc<str>,
    /// The tools the session holds (shared with its Dispatcher).
    inventory: Inventory,
    /// The inventory's version `offered` was built from.
    offered_version: u64,
    /// The tool array the model is offered, built from the inventory.
    offered: Arc<Vec<ToolSpec>>,
    messages: History,
    /// Serialized bytes of system + tools + messages, for the token estimate.
    payload_bytes: usize,
    tools_sha: Option<String>,
    system_sha: Option<String>,
    task_id: String,
    session_event: String,
    task_event: String,
    turn_event: String,
    turn: u32,
    totals: Totals,
    /// Tokens of children already added into `totals`.
    delegated: (u64, u64),
    started: Instant,
    children: ChildTable,
    supervisor: Option<ActorRef<SupervisorMsg>>,
    continuations: u32,
    /// Bytes of the serialized tool array (part of `payload_bytes`).
    tools_bytes: usize,
    /// The tree's record flushes.
    record_sync: RecordSync,
    /// What this session leaves to be flushed when it ends (the folders it made are added by
    /// staging).
    records: SessionRecords,
    /// A resumed session waits for its re-delegations before its next model call.
    seed_waits: bool,
    /// Delegation outcomes shown to the model so far (a replay's schedule counts them).
    outcomes_delivered: u32,
    /// Hashes of the `body` lines written (`trace.capture: content`): each body once.
    bodies: Vec<String>,
    /// Calls a resumed session makes before its next model call (taken at `Begin`).
    seed_calls: Vec<crate::continuation::SeedCall>,
    /// Ids of re-delegations among them: their results are notes, not tool messages.
    redelegations: std::collections::HashMap<String, String>,
}

/// What a session's end flushes: its records folder, less its children's folders and a work
/// folder inside it.
fn own_records(paths: &crate::spec::SessionPaths) -> SessionRecords {
    let dir = paths.records_dir.clone();
    let mut skip = vec![dir.join("children")];
    if paths.workdir != dir && paths.workdir.starts_with(&dir) {
        skip.push(paths.workdir.clone());
    }
    SessionRecords {
        skip,
        ..SessionRecords::new(dir, &[])
    }
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

/// The result text of a task that used all its turns.
pub fn max_turns_text(max: u32) -> String {
    format!(
        "error: max_turns exceeded: the task used all {max} inference turns inference.max_turns allows (turn 0 to turn {})",
        max.saturating_sub(1)
    )
}

impl SessionState {
    /// Where a line about the task hangs: off `task_start`, at `turn`.
    pub(super) fn on_task(&self, turn: u32) -> events::At<'_> {
        events::At {
            parent: &self.task_event,
            task_id: &self.task_id,
            turn,
        }
    }

    /// Where a line about a call hangs: off its turn's `inference`, at `turn`.
    pub(super) fn on_turn(&self, turn: u32) -> events::At<'_> {
        events::At {
            parent: &self.turn_event,
            task_id: &self.task_id,
            turn,
        }
    }

    pub(super) fn emit(&self, event: TraceEvent) {
        log_event(&self.spec.session_id, &event);
        self.trace.append(event);
    }

    /// Create the session's folders, staged files and trace file: one job on the
    /// [`file_lane`].
    pub(super) async fn stage(&mut self) -> Result<(), RecordError> {
        let paths = self.spec.paths.clone();
        let tools = self.spec.tools.clone();
        let task = self
            .spec
            .spawned_by
            .is_none()
            .then(|| self.spec.task.clone());
        let capsule = self.spec.capsule_name.clone();
        let trace = self.trace.clone();
        let owns_workdir = self.spec.owns_workdir;
        let sync = self.record_sync.clone();
        let work = move || {
            // Only the records' folders are flushed at the end; the work folder is the
            // commands'. A session holding no tool runs no command: its work folder is never
            // made.
            let fails = |make: fn(PathBuf, String) -> RecordError, path: &PathBuf| {
                let path = path.clone();
                move |e: std::io::Error| make(path, e.to_string())
            };
            let create = |path, cause| RecordError::Create { path, cause };
            let stage = |path, cause| RecordError::Stage { path, cause };
            let made = durable::create_dirs(&paths.records_dir)
                .map_err(fails(create, &paths.records_dir))?;
            sync.note_made(&paths.records_dir);
            if paths.workdir != paths.records_dir && !tools.is_empty() {
                std::fs::create_dir_all(&paths.workdir).map_err(fails(create, &paths.workdir))?;
            }
            staging::stage(&paths.records_dir, &tools, task.as_deref(), &capsule)
                .map_err(fails(stage, &paths.records_dir))?;
            if owns_workdir && !tools.is_empty() {
                staging::link_tools(&paths.workdir, &paths.records_dir)
                    .map_err(fails(stage, &paths.workdir))?;
            }
            trace.create().map(|()| made)
        };
        let made = file_lane::run(Lane::Begin, work)
            .await
            .unwrap_or_else(Err)?;
        self.records.gained = SessionRecords::new(self.records.dir.clone(), &made).gained;
        Ok(())
    }

    pub(super) fn push_message(&mut self, message: Message) {
        self.payload_bytes += json_len(&message);
        self.messages.push(message);
    }

    /// Push the model's answer, whose content was already written as `content_json` bytes of
    /// JSON (for `response_sha`): its size is known without writing it a second time.
    pub(super) fn push_answer(&mut self, content: Vec<ContentBlock>, content_json: usize) {
        self.payload_bytes += assistant_json_len(content_json);
        self.messages.push(Message::Assistant { content });
    }
}

/// [`json_len`] of `Message::Assistant` whose content is `content_json` bytes of JSON: the
/// tagged wrapper around it (a test pins the two together).
fn assistant_json_len(content_json: usize) -> usize {
    r#"{"role":"assistant","content":}"#.len() + content_json
}

/// The length of `value` written as JSON, counted without keeping the bytes (the token
/// estimate needs only the size of each message, once).
fn json_len(value: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => 0,
    }
}

/// Start a session's Dispatcher, linked under it.
async fn spawn_dispatcher(
    session: &ActorRef<SessionMsg>,
    spec: &SessionSpec,
    inventory: &Inventory,
    trace: &TraceLog,
    session_event: &str,
    supervisor: Option<ActorRef<SupervisorMsg>>,
    registry: Option<ActorRef<crate::registry::RegistryMsg>>,
) -> Result<ActorRef<DispatcherMsg>, String> {
    let (dispatcher, _) = Actor::spawn_linked(
        None,
        Dispatcher,
        DispatcherArgs {
            gate: spec.gate.clone(),
            session_id: spec.session_id.clone(),
            depth: spec.depth,
            supervisor,
            registry,
            artifacts: spec.artifacts.clone(),
            trace: trace.clone(),
            session_event: session_event.to_string(),
            delegation_deadline: spec.delegation_deadline,
            session: session.clone(),
            tools: inventory.clone(),
            grants: spec.grants.clone(),
            executors: spec.executors.clone(),
            paths: spec.paths.clone(),
        },
        session.get_cell(),
    )
    .await
    .map_err(|e| format!("cannot start the dispatcher: {e}"))?;
    Ok(dispatcher)
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

// Local-only: ractor's `cluster` feature (on for `mur node`) wants every message type named;
// this one never crosses a node.
impl ractor::Message for SessionMsg {}

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
        let spec = args.spec;
        let inventory = Inventory::new(spec.tools.iter().cloned());
        let system: Arc<str> = prompt::system_prompt(&spec).into();
        let tools: Arc<Vec<ToolSpec>> = Arc::new(inventory.specs());
        let seed = spec.continuation.seed.clone();
        let messages = match &seed {
            Some(seed) if !seed.messages.is_empty() => History::from(seed.messages.clone()),
            _ => History::from(vec![Message::user_text(spec.task.clone())]),
        };
        let seed_calls = seed.as_ref().map(|s| s.pending.clone()).unwrap_or_default();
        // The first model call goes out before anything else is set up (trace writer,
        // dispatcher, hashes, files): a delegated child starts thinking at once. `Begin` is
        // queued first, so it (staging) is handled before that call's answer.
        myself.send_message(SessionMsg::Begin)?;
        let first_turn = seed.as_ref().map_or(0, |s| s.totals.turns);
        let first_call = (!spec.task.trim().is_empty()
            && spec.max_turns.is_none_or(|max| first_turn < max)
            && seed_calls.is_empty())
        .then(|| {
            start_infer(
                myself.clone(),
                spec.driver.clone(),
                InferRequest {
                    model: spec.model.clone(),
                    max_tokens: spec.max_tokens,
                    system: system.clone(),
                    messages: messages.clone(),
                    tools: tools.clone(),
                    prompt_cache_key: Some(cache_key(&spec.capsule_name, &spec.capsule_version)),
                },
                first_turn,
            )
        });
        let paths = &spec.paths;
        let trace = TraceLog::new(
            paths.records_dir.join("trace.jsonl"),
            spec.session_id.clone(),
        );
        let (slot, me, id) = (args.trace_writer, myself.clone(), spec.session_id.clone());
        trace.on_failure(move |error| {
            slot.report(TraceWriterMsg::WriteFailed {
                session_id: id,
                owner: Some(me),
                error,
            })
        });
        // The first lines are built in `post_start`, off the path of whoever started this
        // session (a parent's `delegate-task` answer waits for this function): their ids are
        // minted now, since the dispatcher and the state name them.
        let session_event = ids::mint("evt_");
        let task_id = ids::mint("tsk_");
        let task_event = ids::mint("evt_");
        // A session holding no tool (a pure sub-agent) gets its dispatcher only if its model
        // calls a tool anyway (to be refused): one actor less per child until then.
        let dispatcher = if spec.tools.is_empty() {
            None
        } else {
            Some(
                spawn_dispatcher(
                    &myself,
                    &spec,
                    &inventory,
                    &trace,
                    &session_event,
                    args.supervisor.clone(),
                    args.registry.clone(),
                )
                .await?,
            )
        };
        Ok(SessionState {
            life: match first_call {
                Some(call) => Life::Inferring { _call: call },
                None => Life::Starting,
            },
            // Set by `post_start`.
            system_sha: None,
            tools_sha: None,
            payload_bytes: 0,
            tools_bytes: 0,
            system,
            inventory,
            offered_version: 0,
            offered: tools,
            messages,
            trace,
            dispatcher,
            registry: args.registry,
            report_to: Some(args.report),
            task_id,
            session_event,
            turn_event: task_event.clone(),
            task_event,
            turn: first_turn,
            totals: seed.as_ref().map(|s| s.totals).unwrap_or_default(),
            delegated: (0, 0),
            started: Instant::now(),
            children: ChildTable::default(),
            supervisor: args.supervisor,
            continuations: 0,
            record_sync: args.records,
            records: own_records(&spec.paths),
            bodies: Vec::new(),
            outcomes_delivered: 0,
            seed_waits: seed.as_ref().is_some_and(|s| s.waiting),
            seed_calls,
            redelegations: Default::default(),
            spec,
        })
    }

    /// The session's first two lines and what its turns reuse (hashes, the payload's size),
    /// built in the session's own task before it handles any message: nothing is appended
    /// to its trace before them.
    async fn post_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut SessionState,
    ) -> Result<(), ActorProcessingErr> {
        let spec = &state.spec;
        let tools_json = serde_json::to_vec(&*state.offered).unwrap_or_default();
        let hashes = spec.capture != Capture::None;
        let tools_declared: Vec<&str> = state.offered.iter().map(|t| t.name.as_str()).collect();
        let capabilities = capability_names(spec);
        let start = events::session_start(
            &state.session_event,
            &events::SessionStart {
                capsule_name: &spec.capsule_name,
                capsule_version: &spec.capsule_version,
                model: &spec.model,
                max_turns: spec.max_turns,
                capabilities: &capabilities,
                tools_declared: &tools_declared,
                containment: &spec.containment,
                grants: &spec.grants,
                system_prompt_source: spec.system_prompt_source,
                system_prompt_sha256: spec
                    .operator_prompt
                    .as_deref()
                    .map(|p| sha256_hex(p.as_bytes())),
                driver: spec.driver.name(),
                tool_refresh: &spec.tool_refresh,
                resumed_from: spec.continuation.resumed_from.as_deref(),
                replay_of: spec.continuation.replay_of.as_deref(),
                resumed_totals: spec
                    .continuation
                    .resumed_from
                    .as_ref()
                    .and(spec.continuation.seed.as_ref())
                    .map(|s| s.totals),
                workdir: (spec.capture == Capture::Content).then_some(spec.paths.workdir.as_path()),
                spawned_by: spec
                    .spawned_by
                    .as_ref()
                    .map(|s| (s.parent_session_id.as_str(), s.delegation_id.as_str())),
            },
        );
        log_event(&spec.session_id, &start);
        state.trace.append(start);
        let task = events::task_start(
            &events::TaskIds {
                session_event: &state.session_event,
                task_event: &state.task_event,
                task_id: &state.task_id,
            },
            &spec.task,
            spec.capture == Capture::Content,
        );
        log_event(&spec.session_id, &task);
        state.trace.append(task);
        state.payload_bytes = state.system.len()
            + tools_json.len()
            + state.messages.iter().map(json_len).sum::<usize>();
        state.tools_bytes = tools_json.len();
        state.system_sha = hashes.then(|| sha256_hex(state.system.as_bytes()));
        state.tools_sha = hashes.then(|| sha256_hex(&tools_json));
        Ok(())
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
                    state: match state.life {
                        Life::Ended { .. } => "ended",
                        _ => "running",
                    },
                    exit_status: state.life.exit_status().map(ExitStatus::as_str),
                    turns: state.totals.turns,
                });
            }
            SessionMsg::Finish { status, text } => {
                if let Life::Ending { .. } = state.life {
                    state.finish(&myself, status, text).await;
                }
            }
            SessionMsg::Cancel { reason } => {
                let phase = match &state.life {
                    Life::Inferring { .. } => "inference",
                    Life::Waiting { .. } => "delegation",
                    Life::Starting | Life::Calling { .. } => "turn",
                    Life::Ending { .. } | Life::Draining { .. } | Life::Ended { .. } => {
                        return Ok(())
                    }
                };
                state.emit(events::task_canceled(
                    state.on_task(state.turn),
                    phase,
                    &reason,
                ));
                state
                    .finish(
                        &myself,
                        ExitStatus::Canceled,
                        format!("error: task canceled: {reason}"),
                    )
                    .await;
            }
            SessionMsg::Drained => state.drained(&myself).await,
            SessionMsg::ChildOutcome(o) => state.child_outcome(&myself, *o),
            SessionMsg::DelegationDeadline { delegation_id } => {
                state.deadline_passed(&myself, &delegation_id)
            }
            SessionMsg::StartDispatcher => {
                if state.dispatcher.is_none() && !state.life.is_over() {
                    let started = spawn_dispatcher(
                        &myself,
                        &state.spec,
                        &state.inventory,
                        &state.trace,
                        &state.session_event,
                        state.supervisor.clone(),
                        state.registry.clone(),
                    )
                    .await;
                    match started {
                        Ok(d) => {
                            state.dispatcher = Some(d);
                            state.dispatch_next(&myself);
                        }
                        Err(e) => state.fail(&myself, "runtime_error", &e),
                    }
                }
            }
            SessionMsg::Crash(text) => {
                if let Life::Ended { .. } = state.life {
                    return Ok(());
                }
                let reason = format!("the session crashed: {text}");
                state.emit(events::task_failed(
                    &state.task_event,
                    &state.task_id,
                    state.turn,
                    "runtime_error",
                    &reason,
                ));
                let _ = state
                    .close(ExitStatus::Failed, format!("error: {reason}"))
                    .await;
                // No report: whoever supervises this session learns of the crash from ractor.
                state.report_to = None;
                return Err(reason.into());
            }
            SessionMsg::TraceFailed { error } => {
                if !state.life.is_over() {
                    // Its own line is lost with the others; the report carries the error.
                    state.fail(&myself, "runtime_error", &error.to_string());
                }
            }
            SessionMsg::Begin => state.begin(&myself).await,
            SessionMsg::InferDone { turn, result } => {
                // Only the call in flight is answered; once the task's end is decided, a late
                // answer is dropped.
                if let Life::Inferring { .. } = state.life {
                    state.life = Life::Calling {
                        queue: VecDeque::new(),
                    };
                    match result {
                        Ok(reply) => state.on_reply(&myself, turn, reply),
                        Err(e) => state.on_infer_error(&myself, turn, e),
                    }
                }
            }
            SessionMsg::Retry { turn, note } => {
                if let Life::Inferring { .. } = state.life {
                    state.emit(events::inference_retry(state.on_task(turn), &note))
                }
            }
            SessionMsg::ToolDone(d) => {
                if let Life::Calling { .. } = state.life {
                    state.on_tool_done(&myself, *d)
                }
            }
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
            let from_dispatcher =
                state.dispatcher.as_ref().map(|d| d.get_id()) == Some(who.get_id());
            if from_dispatcher {
                if !state.life.is_over() {
                    state.fail(
                        &myself,
                        "runtime_error",
                        &format!("the dispatcher failed: {err}"),
                    );
                }
                return Ok(());
            }
            let error = truncate(&err.to_string(), 2000);
            match state.children.by_actor(who.get_id()).map(str::to_string) {
                Some(dlg) => state.child_crashed(&myself, &dlg, error),
                // Its start is not recorded yet (the delegate-task answer is still queued
                // behind this higher-priority event): settled when it is.
                None => state.children.crashed_before_known(who.get_id(), error),
            }
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

/// One log line per trace line: lifecycle events (session, delegation, pull, plan) at info,
/// refusals at warn, the rest (each model call, tool call, shell command) at debug. The fields
/// are formatted only when the level is enabled, so a run without `-v` pays a level check.
fn log_event(session: &str, event: &TraceEvent) {
    use tracing::Level;
    // Nothing below `warn` is logged by default: read no field back for nothing.
    if !tracing::enabled!(Level::WARN) {
        return;
    }
    let info = tracing::enabled!(Level::INFO);
    if !info && event.event_type != EventType::CallDenied {
        return;
    }
    let fields = event.fields();
    let level = match event.event_type {
        EventType::SessionStart
        | EventType::SessionEnd
        | EventType::DelegationStart
        | EventType::Delegation
        | EventType::ArtifactPulled
        | EventType::PlanStart
        | EventType::PlanEnd => Level::INFO,
        EventType::CallDenied => Level::WARN,
        // A failed or refused call stands out at -v, beside the lifecycle lines.
        EventType::ToolCall | EventType::SkillCall
            if fields.get("status").and_then(|v| v.as_str()) == Some("error") =>
        {
            Level::INFO
        }
        _ => Level::DEBUG,
    };
    let summary = || {
        const KEYS: [&str; 17] = [
            "capsule_name",
            "turn",
            "tool_name",
            "binary",
            "status",
            "exit_status",
            "outcome",
            "capsule",
            "name",
            "version",
            "exit_code",
            "decision",
            "attempts",
            "duration_ms",
            "error",
            "reason",
            "total_tokens",
        ];
        let mut out = String::new();
        for k in KEYS {
            match fields.get(k) {
                None | Some(serde_json::Value::Null) => {}
                Some(serde_json::Value::String(v)) => {
                    out.push_str(&format!(" {k}={}", truncate(v, 200)))
                }
                Some(v) => out.push_str(&format!(" {k}={v}")),
            }
        }
        out
    };
    match level {
        Level::INFO => tracing::info!("{session} {}{}", event.event_type, summary()),
        Level::WARN => tracing::warn!("{session} {}{}", event.event_type, summary()),
        _ => tracing::debug!("{session} {}{}", event.event_type, summary()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_answers_size_is_its_wrapper_around_the_content_written_once() {
        let answers = [
            vec![],
            vec![ContentBlock::Text {
                text: "é \"quoted\"\n".into(),
            }],
            vec![
                ContentBlock::Text { text: "a".into() },
                ContentBlock::ToolCall {
                    id: "call_1".into(),
                    name: "bash".into(),
                    input: json!({"command": "ls", "n": [1, 2.5, null]}),
                },
            ],
        ];
        for content in answers {
            let written = serde_json::to_vec(&content).unwrap().len();
            assert_eq!(
                assistant_json_len(written),
                json_len(&Message::Assistant { content }),
            );
        }
    }
}
