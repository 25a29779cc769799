//! The parent's end of the cluster: the nodes it may place children on, the children it has
//! there, and the edge actor their ends arrive at.
//!
//! [`Cluster`] is shared by the placer (which adds children), the edge actor (which settles
//! them when their node reports an end) and the node-event watcher (which settles every child
//! of a node that is lost). A child is settled exactly once, by whichever comes first: its
//! entry is taken out of the map by the one that settles it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::artifact::store::Stored;
use mur_actors::durable::{RecordSync, SessionRecords};
use mur_actors::session::{ExitStatus, ReportSink, SessionMsg, SessionReport};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use ractor_cluster::NodeServerMessage;

use super::records;
use super::wire::{pack_fetched, EdgeMsg, EndReport, FetchRequest, Fetched, HostMsg};

/// One node the parent may use.
pub struct NodeEntry {
    /// The address as given (`--nodes`).
    pub given: String,
    /// The address connected to.
    pub addr: SocketAddr,
    /// The node's name (its hello).
    pub name: String,
    /// ractor_cluster's id of the current session to it.
    pub node_id: u64,
    /// Its host actor, through that session.
    pub host: ActorRef<HostMsg>,
    /// Its `--capacity`.
    pub capacity: u32,
    /// Children this parent has there (started or starting).
    pub live: u32,
    /// Connected; a node that is down takes no new children.
    pub up: bool,
}

/// One child running on a node.
pub struct RemoteChild {
    /// The node's name.
    pub node: String,
    /// The child's records folder here (where its trace copy goes).
    pub records_dir: PathBuf,
    /// Its records folder on the node, once it started.
    pub remote_records: Option<String>,
    /// Where its report goes.
    pub report: ReportSink,
    /// Its local stand-in.
    pub standin: ActorRef<SessionMsg>,
    /// Its tree's record flushes: the copy written here is submitted to them.
    pub records: RecordSync,
}

/// The parent's view of the cluster.
pub struct Cluster {
    /// This process's node name.
    pub name: String,
    /// ractor_cluster's node server of this process.
    pub server: ActorRef<NodeServerMessage>,
    /// How long a disconnected node may take to come back.
    pub grace: Duration,
    /// TLS for every connection to a node (`--tls-ca`); `None`: plain TCP.
    pub tls: Option<tokio_rustls::TlsConnector>,
    /// The nodes connected at start, by name.
    pub nodes: Mutex<Vec<NodeEntry>>,
    /// Children on nodes, by session id.
    pub children: Mutex<HashMap<String, RemoteChild>>,
    /// The project whose stores the capsules sent to nodes come from.
    pub project: PathBuf,
    /// Those capsules, read once per name and version.
    pub archives: Mutex<HashMap<(String, String), Arc<Stored>>>,
}

impl Cluster {
    /// Lock the node list.
    pub fn nodes(&self) -> std::sync::MutexGuard<'_, Vec<NodeEntry>> {
        self.nodes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Lock the children map.
    pub fn children(&self) -> std::sync::MutexGuard<'_, HashMap<String, RemoteChild>> {
        self.children.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A capsule's archive from the project's stores (or the global one), read once per name
    /// and version: what a child placed on a node runs, and what a child there delegates to.
    pub async fn archive(&self, capsule: &str, version: &str) -> Result<Arc<Stored>, String> {
        let key = (capsule.to_string(), version.to_string());
        let cached = self
            .archives
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .cloned();
        if let Some(a) = cached {
            return Ok(a);
        }
        let name = crate::manifest::ArtifactName::parse(capsule).map_err(|e| e.to_string())?;
        let (project, version) = (self.project.clone(), version.to_string());
        let archive = tokio::task::spawn_blocking(move || {
            crate::artifact::stored_capsule(&project, &name, &version)
        })
        .await
        .map_err(|e| e.to_string())??;
        let archive = Arc::new(archive);
        self.archives
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, archive.clone());
        Ok(archive)
    }

    /// Children running on nodes now.
    pub fn remote_live(&self) -> usize {
        self.nodes().iter().map(|n| n.live as usize).sum()
    }

    /// One fewer child on `node`.
    pub fn release(&self, node: &str) {
        if let Some(n) = self.nodes().iter_mut().find(|n| n.name == node) {
            n.live = n.live.saturating_sub(1);
        }
    }

    /// Take a child's entry out, to settle it (only the first taker gets it).
    pub fn take(&self, session_id: &str) -> Option<RemoteChild> {
        let taken = self.children().remove(session_id);
        if let Some(c) = &taken {
            self.release(&c.node);
        }
        taken
    }

    /// Cancel a remote child through its node's current session.
    pub fn cancel(&self, session_id: &str, reason: &str) {
        let node = self.children().get(session_id).map(|c| c.node.clone());
        let Some(node) = node else {
            return;
        };
        if let Some(n) = self.nodes().iter().find(|n| n.name == node && n.up) {
            let _ = n
                .host
                .send_message(HostMsg::Cancel(session_id.to_string(), reason.to_string()));
        }
    }

    /// Settle one child from its node's report: copy its trace, then hand on the outcome (or,
    /// for a crash, fail its stand-in, which the parent sees as the child crashing).
    pub async fn settle_ended(&self, end: EndReport, trace: Vec<u8>) {
        let Some(child) = self.take(&end.session_id) else {
            return;
        };
        let dir = child.records_dir.clone();
        let (left_at, parts) = (end.trace_left_at.clone(), end.traces.clone());
        let written = tokio::task::spawn_blocking(move || {
            records::write_copies(&dir, &parts, &trace, left_at.as_deref())
        })
        .await;
        if let Ok(Err(e)) = written {
            tracing::warn!(
                "cannot copy the trace of {} into {}: {e}",
                end.session_id,
                child.records_dir.display()
            );
        }
        // Flushed with the tree's records: the root's end waits for it, as for a local child.
        child
            .records
            .submit(SessionRecords::new(child.records_dir.clone(), &[]));
        match &end.crashed {
            Some(why) => {
                let _ = child.standin.send_message(SessionMsg::Crash(format!(
                    "the sub-capsule crashed on node {}: {why}",
                    child.node
                )));
            }
            None => {
                (child.report)(end.to_report());
                child.standin.stop(None);
            }
        }
    }

    /// Settle every child of a node that is lost: each ends `error`, reason `node lost`, and
    /// its records folder says it is incomplete.
    pub async fn node_lost(&self, node: &str, why: &str) {
        if let Some(n) = self.nodes().iter_mut().find(|n| n.name == node) {
            n.up = false;
        }
        let ids: Vec<String> = self
            .children()
            .iter()
            .filter(|(_, c)| c.node == node)
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            let Some(child) = self.take(&id) else {
                continue;
            };
            let text = format!(
                "node lost: node {node} {why}; the session's trace is incomplete{}",
                child
                    .remote_records
                    .as_deref()
                    .map(|r| format!(" (what the node wrote is at {node}:{r})"))
                    .unwrap_or_default()
            );
            let dir = child.records_dir.clone();
            let note = text.clone();
            let _ =
                tokio::task::spawn_blocking(move || records::mark_incomplete(&dir, &note)).await;
            child
                .records
                .submit(SessionRecords::new(child.records_dir.clone(), &[]));
            (child.report)(SessionReport {
                session_id: id,
                exit_status: ExitStatus::Failed,
                result: format!("error: {text}"),
                totals: Default::default(),
                duration_ms: 0,
                trace_error: None,
            });
            child.standin.stop(None);
        }
    }
}

/// The edge actor: where nodes send children's ends.
pub struct Edge;

#[ractor::async_trait]
impl Actor for Edge {
    type Msg = EdgeMsg;
    type State = Arc<Cluster>;
    type Arguments = Arc<Cluster>;

    async fn pre_start(
        &self,
        myself: ActorRef<EdgeMsg>,
        cluster: Arc<Cluster>,
    ) -> Result<Arc<Cluster>, ActorProcessingErr> {
        ractor::pg::join(
            super::wire::edge_group(&cluster.name),
            vec![myself.get_cell()],
        );
        Ok(cluster)
    }

    async fn handle(
        &self,
        _myself: ActorRef<EdgeMsg>,
        msg: EdgeMsg,
        cluster: &mut Arc<Cluster>,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            EdgeMsg::Ended(json, trace) => match serde_json::from_str::<EndReport>(&json) {
                Ok(end) => {
                    let cluster = cluster.clone();
                    // Off the mailbox: the copy is file work, and ends arrive by the thousand.
                    tokio::spawn(async move { cluster.settle_ended(end, trace).await });
                }
                Err(e) => tracing::warn!("a node sent a malformed end: {e}"),
            },
            EdgeMsg::Fetch(json, reply) => {
                let cluster = cluster.clone();
                // Off the mailbox too: a store read.
                tokio::spawn(async move {
                    let answer = match serde_json::from_str::<FetchRequest>(&json) {
                        Ok(req) => match cluster.archive(&req.capsule, &req.version).await {
                            Ok(a) => pack_fetched(
                                &Fetched::Found {
                                    sha256: a.sha256.clone(),
                                },
                                &a.bytes,
                            ),
                            Err(why) => pack_fetched(&Fetched::Refused(why), &[]),
                        },
                        Err(e) => pack_fetched(
                            &Fetched::Refused(format!("a malformed fetch request: {e}")),
                            &[],
                        ),
                    };
                    let _ = reply.send(answer);
                });
            }
        }
        Ok(())
    }
}
