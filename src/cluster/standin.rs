//! A remote child's local stand-in: the actor its parent Session holds for it.
//!
//! Linked under the parent like a local child, it takes the messages a parent sends a child
//! (`Cancel`, from a deadline, the parent's end or Ctrl-C) and forwards them to the node. It
//! ends the ways a child ends: stopped once the child's outcome was handed on (the parent
//! ignores a stop), or failed with the reason when the child crashed on its node (the parent
//! settles it `crashed`, as for a local panic).

use std::sync::Arc;

use mur_actors::session::{SessionMsg, SessionStatus};
use ractor::{Actor, ActorProcessingErr, ActorRef};

use super::edge::Cluster;

/// Who a stand-in stands for.
pub struct StandInArgs {
    /// The child's session id.
    pub session_id: String,
    /// Its capsule name and version (for the door's status).
    pub capsule: (String, String),
    /// Where to send cancels.
    pub cluster: Arc<Cluster>,
}

/// The stand-in actor.
pub struct StandIn;

#[ractor::async_trait]
impl Actor for StandIn {
    type Msg = SessionMsg;
    type State = StandInArgs;
    type Arguments = StandInArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<SessionMsg>,
        args: StandInArgs,
    ) -> Result<StandInArgs, ActorProcessingErr> {
        Ok(args)
    }

    async fn handle(
        &self,
        _myself: ActorRef<SessionMsg>,
        msg: SessionMsg,
        state: &mut StandInArgs,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SessionMsg::Cancel { reason } => state.cluster.cancel(&state.session_id, &reason),
            SessionMsg::Crash(why) => return Err(why.into()),
            SessionMsg::Describe(reply) => {
                let _ = reply.send(SessionStatus {
                    session_id: state.session_id.clone(),
                    name: state.capsule.0.clone(),
                    version: state.capsule.1.clone(),
                    state: "running",
                    exit_status: None,
                    turns: 0,
                });
            }
            // The rest are a Session's own (its turn loop, its trace); none reach a stand-in.
            _ => {}
        }
        Ok(())
    }
}
