//! The [`Registry`]: the one actor that resolves artifacts and writes `murmur.lock`.
//!
//! Every lock mutation in a process goes through this actor's mailbox, one at a time, so two
//! sessions pulling at the same moment can never lose each other's pin. The stores, sources and
//! the lock file format live in the `mur` crate behind [`ArtifactSource`]; the Registry only
//! serializes access to them.

use std::sync::Arc;

use async_trait::async_trait;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::Value;

/// A pull, removal or listing a session asks for, in the tool's own input shape.
#[derive(Clone, Debug)]
pub struct ArtifactRequest {
    /// The session asking (recorded in runtime pins).
    pub session_id: String,
    /// The tool input (`{"artifact": …}`).
    pub input: Value,
}

/// What resolves and pins artifacts. Implemented by the `mur` crate over stores and sources.
#[async_trait]
pub trait ArtifactSource: Send + Sync {
    /// `pull-artifact`: list a pattern or pull one artifact and pin it. `Ok` is the tool's
    /// result JSON; `Err` is the refusal text (`not-granted: …`, `not-found: …`).
    async fn pull(&self, request: ArtifactRequest) -> Result<Value, String>;
    /// `remove-artifact`: drop a pulled artifact and its pin.
    async fn remove(&self, request: ArtifactRequest) -> Result<Value, String>;
}

/// Messages the [`Registry`] takes.
pub enum RegistryMsg {
    /// Pull (or list) for a session.
    Pull(ArtifactRequest, RpcReplyPort<Result<Value, String>>),
    /// Remove for a session.
    Remove(ArtifactRequest, RpcReplyPort<Result<Value, String>>),
}

/// The process-wide registry actor.
pub struct Registry;

#[async_trait]
impl Actor for Registry {
    type Msg = RegistryMsg;
    type State = Arc<dyn ArtifactSource>;
    type Arguments = Arc<dyn ArtifactSource>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        source: Arc<dyn ArtifactSource>,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(source)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: RegistryMsg,
        source: &mut Arc<dyn ArtifactSource>,
    ) -> Result<(), ActorProcessingErr> {
        // One request at a time: this await is what makes the lock single-writer.
        match msg {
            RegistryMsg::Pull(req, reply) => {
                let _ = reply.send(source.pull(req).await);
            }
            RegistryMsg::Remove(req, reply) => {
                let _ = reply.send(source.remove(req).await);
            }
        }
        Ok(())
    }
}
