//! The [`Supervisor`]: the root of a `mur run` process's actor tree.
//!
//! It spawns the root Session (linked, so a crash reaches it as a supervision event rather than
//! killing the process), keeps the id → actor map the HTTP door looks sessions up in, owns the
//! door itself (stopped when the Supervisor stops), and turns Ctrl-C into a `Cancel` for every
//! live session. Sessions are temporary: nothing is ever restarted.

use std::collections::HashMap;
use std::net::SocketAddr;

use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use tokio::sync::oneshot;

use crate::session::{ExitStatus, Session, SessionArgs, SessionMsg, SessionReport, Totals};
use crate::spec::SessionSpec;

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
}

/// The root actor of a `mur run` process.
pub struct Supervisor;

/// The Supervisor's state.
#[derive(Default)]
pub struct SupervisorState {
    sessions: HashMap<String, ActorRef<SessionMsg>>,
    by_actor: HashMap<ActorId, String>,
    root: Option<String>,
    root_report: Option<oneshot::Sender<SessionReport>>,
    door: Option<Door>,
}

impl SupervisorState {
    fn deliver_root(&mut self, report: SessionReport) {
        if Some(&report.session_id) == self.root.as_ref() {
            if let Some(tx) = self.root_report.take() {
                let _ = tx.send(report);
            }
        }
    }
}

#[ractor::async_trait]
impl Actor for Supervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = ();

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        _args: (),
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(SupervisorState::default())
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
                let me = myself.clone();
                let args = SessionArgs {
                    spec: *spec,
                    report: Box::new(move |r| {
                        let _ = me.send_message(SupervisorMsg::Ended(Box::new(r)));
                    }),
                };
                match Actor::spawn_linked(None, Session, args, myself.get_cell()).await {
                    Ok((session, _)) => {
                        let (tx, rx) = oneshot::channel();
                        state.by_actor.insert(session.get_id(), session_id.clone());
                        state.sessions.insert(session_id.clone(), session);
                        state.root = Some(session_id);
                        state.root_report = Some(tx);
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
                for s in state.sessions.values() {
                    let _ = s.send_message(SessionMsg::Cancel {
                        reason: reason.clone(),
                    });
                }
            }
            SupervisorMsg::Ended(report) => state.deliver_root(*report),
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        let (cell, failure) = match event {
            SupervisionEvent::ActorTerminated(cell, _, _) => (cell, None),
            SupervisionEvent::ActorFailed(cell, err) => (cell, Some(err.to_string())),
            _ => return Ok(()),
        };
        if let Some(id) = state.by_actor.remove(&cell.get_id()) {
            state.sessions.remove(&id);
            // A session that panicked still produces an outcome. (A clean stop always reports
            // first; its report may still be queued behind this higher-priority event.)
            if failure.is_some() && state.root_report.is_some() && state.root.as_ref() == Some(&id)
            {
                state.deliver_root(SessionReport {
                    session_id: id,
                    exit_status: ExitStatus::Failed,
                    result: format!(
                        "error: the session crashed: {}",
                        failure.unwrap_or_default()
                    ),
                    totals: Totals::default(),
                    duration_ms: 0,
                    trace_error: None,
                });
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

/// The sentence for a session that could not start (its `pre_start` error, unwrapped).
fn spawn_error_text(e: &ractor::SpawnErr) -> String {
    match e {
        ractor::SpawnErr::StartupFailed(inner) => inner.to_string(),
        other => other.to_string(),
    }
}
