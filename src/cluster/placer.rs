//! Placement: which children leave this machine, and for which node.
//!
//! Policy: a child runs here while fewer than `--max-local` children of the tree live here;
//! past that it goes to the connected node with the lowest load (live children over
//! capacity) that has room, ties to the first given. With no such node it runs here after all:
//! `--max-local` is where spilling starts, not a cap. The node answers only once the child
//! holds its task, so `delegate-task` returns as it does for a local child. A node that cannot
//! be reached for the start, or is at capacity, gets the child back here; a node that refuses
//! it (its pin, its grants) is the delegation's refusal.

use std::sync::Arc;
use std::time::Duration;

use mur_actors::placement::{ChildPlacer, Offer, Placed};
use ractor::{Actor, ActorRef};

use super::edge::{Cluster, RemoteChild};
use super::standin::{StandIn, StandInArgs};
use super::wire::{to_json, HostMsg, StartAnswer, StartRequest, PROTOCOL_VERSION};

/// How long a node may take to start a child.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The placer `mur run --nodes` gives the Supervisor.
pub struct Placer {
    cluster: Arc<Cluster>,
    max_local: usize,
}

impl Placer {
    /// A placer over `cluster`, spilling past `max_local` live children.
    pub fn new(cluster: Arc<Cluster>, max_local: usize) -> Placer {
        Placer { cluster, max_local }
    }

    /// The node to use and its host, reserving a slot there; `None`: run here.
    fn choose(&self, live_in_tree: usize) -> Option<(String, ActorRef<HostMsg>)> {
        let here = live_in_tree.saturating_sub(self.cluster.remote_live());
        if here < self.max_local {
            return None;
        }
        let mut nodes = self.cluster.nodes();
        let best = nodes
            .iter_mut()
            .filter(|n| n.up && n.live < n.capacity)
            .min_by(|a, b| {
                let load = |n: &super::edge::NodeEntry| n.live as f64 / n.capacity.max(1) as f64;
                load(a).total_cmp(&load(b))
            })?;
        best.live += 1;
        Some((best.name.clone(), best.host.clone()))
    }
}

#[async_trait::async_trait]
impl ChildPlacer for Placer {
    async fn place(&self, offer: Offer) -> Placed {
        let Some((node, host)) = self.choose(offer.live_in_tree) else {
            return here(offer);
        };
        let r = &offer.request;
        let archive = match self.cluster.archive(&r.capsule, &r.version).await {
            Ok(a) => a,
            Err(why) => {
                self.cluster.release(&node);
                return Placed::Refused(why);
            }
        };
        let start = StartRequest {
            protocol: PROTOCOL_VERSION,
            edge_group: super::wire::edge_group(&self.cluster.name),
            capsule: r.capsule.clone(),
            version: r.version.clone(),
            sha256: archive.sha256.clone(),
            task: r.task.clone(),
            session_id: r.session_id.clone(),
            delegation_id: r.delegation_id.clone(),
            parent_session_id: r.parent_session_id.clone(),
            parent_grants: r.parent_grants.clone(),
            depth: r.depth,
            max_depth: offer.max_depth,
            max_children: offer.max_children,
        };
        let args = StandInArgs {
            session_id: r.session_id.clone(),
            capsule: (r.capsule.clone(), r.version.clone()),
            cluster: self.cluster.clone(),
        };
        let standin = match Actor::spawn_linked(None, StandIn, args, offer.parent.clone()).await {
            Ok((a, _)) => a,
            Err(e) => {
                self.cluster.release(&node);
                return Placed::Refused(format!("cannot start a stand-in for the child: {e}"));
            }
        };
        // Registered before the start goes out: a quick child's end may arrive before the
        // node's answer does.
        let session_id = r.session_id.clone();
        let records_dir = r.paths.records_dir.clone();
        let Offer {
            request,
            spec,
            live_in_tree,
            parent,
            report,
            records,
            max_depth,
            max_children,
        } = offer;
        self.cluster.children().insert(
            session_id.clone(),
            RemoteChild {
                node: node.clone(),
                records_dir,
                remote_records: None,
                report,
                standin: standin.clone(),
                records: records.clone(),
            },
        );
        let answer = host
            .call(
                |reply| HostMsg::Start(to_json(&start), archive.bytes.clone(), reply),
                Some(START_TIMEOUT),
            )
            .await;
        let refusal = match answer {
            Ok(ractor::rpc::CallResult::Success(json)) => {
                match serde_json::from_str::<StartAnswer>(&json) {
                    Ok(StartAnswer::Started { records_dir }) => {
                        if let Some(c) = self.cluster.children().get_mut(&session_id) {
                            c.remote_records = Some(records_dir);
                        }
                        return Placed::There {
                            child: standin,
                            node,
                        };
                    }
                    Ok(StartAnswer::Refused(why)) => Some(why),
                    Ok(StartAnswer::Full(_)) => None,
                    Err(e) => Some(format!("node {node} answered the start with {e}")),
                }
            }
            // Not reached, or no answer in time: the child runs here instead (and, should the
            // node have started it after all, is canceled there).
            _ => {
                let _ = host.send_message(HostMsg::Cancel(
                    session_id.clone(),
                    "the parent stopped waiting for this child to start; it runs elsewhere".into(),
                ));
                None
            }
        };
        standin.stop(None);
        let Some(child) = self.cluster.take(&session_id) else {
            // Settled meanwhile (its node was lost): the outcome is on its way.
            return Placed::Refused(format!("node {node} was lost while the child started"));
        };
        match refusal {
            Some(why) => Placed::Refused(why),
            None => here(Offer {
                request,
                spec,
                live_in_tree,
                parent,
                report: child.report,
                records,
                max_depth,
                max_children,
            }),
        }
    }
}

/// Run the offered child in this process.
fn here(offer: Offer) -> Placed {
    Placed::Here {
        spec: Box::new(offer.spec),
        report: offer.report,
    }
}
