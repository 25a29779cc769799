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

use crate::artifact_error::ArtifactError;
use crate::tool::ToolDecl;

/// A pull, removal or listing a session asks for, in the tool's own input shape.
#[derive(Clone, Debug)]
pub struct ArtifactRequest {
    /// The session asking (recorded in runtime pins).
    pub session_id: String,
    /// The session's records folder (where a pulled payload is staged: `tools/<name>/`).
    pub records_dir: std::path::PathBuf,
    /// The tool input (`{"artifact": …}`).
    pub input: Value,
}

/// What a successful `pull-artifact` call produced.
#[derive(Clone, Debug)]
pub enum PullOutcome {
    /// A pattern was listed; nothing was pulled. The value is the tool's result JSON.
    Listing(Value),
    /// One artifact was pulled, pinned and staged.
    Pulled(Box<Pulled>),
}

/// One pulled artifact.
#[derive(Clone, Debug)]
pub struct Pulled {
    /// The tool's result JSON (`{"artifact", "fetched_from", "runtime", "tool_name", "version"}`).
    pub result: Value,
    /// The tool the session holds from its next turn (origin `Runtime`).
    pub tool: ToolDecl,
    /// Full name.
    pub name: String,
    /// Version pulled.
    pub version: String,
    /// `tool` or `skill`.
    pub runtime: String,
    /// `project store`, `global store` or `github:<owner>/<repo>`.
    pub fetched_from: String,
    /// The scope owner's GitHub id, when known.
    pub owner_id: Option<u64>,
    /// `runtime`, or `operator` when the operator had already pinned that version.
    pub origin: String,
}

/// One removed artifact.
#[derive(Clone, Debug)]
pub struct Removed {
    /// The tool's result JSON (`{"artifact", "removed": true}`).
    pub result: Value,
    /// The bare tool name that leaves the inventory.
    pub tool_name: String,
}

/// What resolves and pins artifacts. Implemented by the `mur` crate over stores and sources.
#[async_trait]
pub trait ArtifactSource: Send + Sync {
    /// `pull-artifact`: list a pattern or pull one artifact and pin it. `Err` is the refusal
    /// (`not-granted`, `not-found`, `does-not-fit`, `not-fetched`, …), and means nothing was
    /// written.
    async fn pull(&self, request: ArtifactRequest) -> Result<PullOutcome, ArtifactError>;
    /// `remove-artifact`: drop a pulled artifact and its pin. `Err` is the refusal
    /// (`not-removable`, …).
    async fn remove(&self, request: ArtifactRequest) -> Result<Removed, ArtifactError>;
}

/// Messages the [`Registry`] takes. Each carries the asking capsule's own service (its install
/// grant decides what it may pull); the Registry's part is to run them one at a time.
pub enum RegistryMsg {
    /// Pull (or list) for a session.
    Pull {
        /// The capsule's pull service.
        service: Arc<dyn ArtifactSource>,
        /// What the session asked.
        request: ArtifactRequest,
        /// The answer.
        reply: RpcReplyPort<Result<PullOutcome, ArtifactError>>,
    },
    /// Remove for a session.
    Remove {
        /// The capsule's pull service.
        service: Arc<dyn ArtifactSource>,
        /// What the session asked.
        request: ArtifactRequest,
        /// The answer.
        reply: RpcReplyPort<Result<Removed, ArtifactError>>,
    },
}

/// The process-wide registry actor.
pub struct Registry;

// Local-only: ractor's `cluster` feature (on for `mur node`) wants every message type named;
// this one never crosses a node.
impl ractor::Message for RegistryMsg {}

#[async_trait]
impl Actor for Registry {
    type Msg = RegistryMsg;
    type State = ();
    type Arguments = ();

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        _args: (),
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: RegistryMsg,
        _state: &mut (),
    ) -> Result<(), ActorProcessingErr> {
        // One request at a time, for every session of the process: this await is what makes
        // the process a single writer of murmur.lock.
        match msg {
            RegistryMsg::Pull {
                service,
                request,
                reply,
            } => {
                let _ = reply.send(service.pull(request).await);
            }
            RegistryMsg::Remove {
                service,
                request,
                reply,
            } => {
                let _ = reply.send(service.remove(request).await);
            }
        }
        Ok(())
    }
}
