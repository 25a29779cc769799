//! Where a delegated child runs: the one hook through which a child may leave this process.
//!
//! The kernel knows nothing of networks. When the Supervisor has a [`ChildPlacer`] (`mur run
//! --nodes`, in `src/cluster/`), every resolved child is offered to it first: it either hands
//! the child back to run here ([`Placed::Here`]) or starts it elsewhere and returns a local
//! actor that stands for it ([`Placed::There`]). That stand-in is linked under the parent
//! Session like any child, takes the same `SessionMsg::Cancel`, and ends the same ways: the
//! report sink it was given (an outcome), or a failure (a `crashed` outcome). So deadlines,
//! cancels, injection and the continuation need no second code path.

use async_trait::async_trait;
use ractor::{ActorCell, ActorRef};

use crate::delegation::ChildRequest;
use crate::durable::RecordSync;
use crate::session::{ReportSink, SessionMsg};
use crate::spec::SessionSpec;

/// What a placer is offered: one resolved child (its grants already checked by the resolver).
pub struct Offer {
    /// The delegation as the parent asked for it.
    pub request: ChildRequest,
    /// The child's spec, as it would run here.
    pub spec: SessionSpec,
    /// Children of the whole tree live in this process right now (started or starting), not
    /// counting this one: the placer keeps its own count of those it sent away.
    pub live_in_tree: usize,
    /// The parent Session's cell: a stand-in must be linked under it.
    pub parent: ActorCell,
    /// Where the child's report goes (its outcome to the parent, its end to the Supervisor).
    pub report: ReportSink,
    /// The tree's record flushes: what a placer writes here for the child (the copy of a
    /// remote child's trace) is submitted to it, so the root's closing flush covers it.
    pub records: RecordSync,
    /// The tree's `--max-depth`, which bounds the child's own delegations wherever it runs.
    pub max_depth: u32,
    /// The tree's `--max-children`, per session wherever it runs.
    pub max_children: u32,
}

/// A placer's answer.
pub enum Placed {
    /// Run it in this process, as if there were no placer.
    Here {
        /// The spec, handed back.
        spec: Box<SessionSpec>,
        /// The report sink, handed back.
        report: ReportSink,
    },
    /// It runs elsewhere; `child` is its local stand-in, linked under the parent.
    There {
        /// The stand-in actor (cancel it to cancel the child).
        child: ActorRef<SessionMsg>,
        /// Where it runs, for the trace's `node` field.
        node: String,
    },
    /// It could not start where it was sent, and will not start here either: the refusal
    /// sentence `delegate-task` answers with.
    Refused(String),
}

/// Decides where each child runs.
#[async_trait]
pub trait ChildPlacer: Send + Sync {
    /// Place one child.
    async fn place(&self, offer: Offer) -> Placed;
}
