//! The [`TraceWriter`] actor: where the trace thread's write errors become supervision events.
//!
//! Lines are not sent through this actor: each session appends to its [`TraceLog`] handle
//! (a lock and a copy) and one thread writes every file in batches (see [`crate::trace`]); a
//! mailbox hop per line would cost more than the write. What the actor owns is what must not
//! be lost when the disk fails. When a write, a create or a reopen of a trace file fails (disk
//! full, EIO, a removed folder), the thread sends [`TraceWriterMsg::WriteFailed`] here, and the
//! actor tells the session that owns the file, which ends `failed` at once with the error
//! naming the file (`mur run` prints it as `error[E-RUN-007]`), instead of running on with a
//! trace that keeps nothing. The Supervisor spawns it linked and starts a new one if it dies;
//! trace files reach whichever is current through a shared [`TraceWriterSlot`].
//!
//! [`TraceLog`]: crate::trace::TraceLog

use std::sync::{Arc, Mutex};

use ractor::{Actor, ActorProcessingErr, ActorRef};

use crate::record_error::RecordError;
use crate::session::SessionMsg;

/// Messages the [`TraceWriter`] takes.
pub enum TraceWriterMsg {
    /// The trace thread could not write a session's trace; its later lines are dropped.
    WriteFailed {
        /// The session whose trace it is.
        session_id: String,
        /// The session to end, when one watches the file.
        owner: Option<ActorRef<SessionMsg>>,
        /// What failed, naming the file.
        error: RecordError,
    },
}

/// The trace-writer actor (one per Supervisor).
pub struct TraceWriter;

/// The current [`TraceWriter`], shared by the Supervisor (which replaces it after a restart)
/// and every trace file of its tree (which reports to it).
#[derive(Clone, Default)]
pub struct TraceWriterSlot(Arc<Mutex<Option<ActorRef<TraceWriterMsg>>>>);

impl TraceWriterSlot {
    /// Point the slot at `writer`.
    pub fn set(&self, writer: ActorRef<TraceWriterMsg>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(writer);
    }

    /// Report a failed trace to the current writer. From any thread; a slot with no writer
    /// (the kernel run without a Supervisor) only logs.
    pub fn report(&self, msg: TraceWriterMsg) {
        let writer = self.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        match writer {
            Some(w) => {
                if let Err(e) = w.send_message(msg) {
                    tracing::error!("the trace writer is gone: {e}");
                }
            }
            None => {
                let TraceWriterMsg::WriteFailed { error, .. } = msg;
                tracing::error!("{error}");
            }
        }
    }
}

// Local-only: ractor's `cluster` feature (on for `mur node`) wants every message type named;
// this one never crosses a node.
impl ractor::Message for TraceWriterMsg {}

#[ractor::async_trait]
impl Actor for TraceWriter {
    type Msg = TraceWriterMsg;
    type State = ();
    type Arguments = ();

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        _: (),
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: TraceWriterMsg,
        _state: &mut (),
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            TraceWriterMsg::WriteFailed {
                session_id,
                owner,
                error,
            } => {
                tracing::error!(session = %session_id, "{error}");
                if let Some(session) = owner {
                    // A session that already ended ignores it: its end reports the error.
                    let _ = session.send_message(SessionMsg::TraceFailed { error });
                }
            }
        }
        Ok(())
    }
}
