//! Joining the cluster from `mur run --nodes`: the parent's node server, its edge, the
//! connection to each node, and what happens when one drops.
//!
//! Each address is tried once at start, all at once. A node that cannot be used (unreachable,
//! a handshake that fails, as a different cookie does, no host actor, another protocol
//! version) is a warning, and the run goes on with the others and this machine: a cluster
//! with one node down still runs. Later, a node whose connection drops takes no new children;
//! it is lost (its children end `error`, reason `node lost`) when its port refuses
//! connections (its process is gone) or when it has not come back within the grace period.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ractor::{Actor, ActorRef};
use ractor_cluster::node::NodeServerSessionInformation;
use ractor_cluster::{NodeEventSubscription, NodeServerMessage};
use tokio::sync::oneshot;

use super::edge::{Cluster, Edge, NodeEntry};
use super::wire::{Hello, HostMsg, HOST_GROUP, PROTOCOL_VERSION};
use super::ClusterError;
use crate::diagnostic::Diagnostic;
use tokio_rustls::TlsConnector;

/// How long a connection may take to open.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the handshake and the hello may take.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How a connection's handshake ended.
enum Handshake {
    /// Authenticated and synchronized.
    Ready(u64),
    /// Closed first.
    Closed,
}

type Waiters = Arc<Mutex<HashMap<String, oneshot::Sender<Handshake>>>>;

/// The parent's cluster, joined, and the nodes that could not be used.
pub struct Joined {
    /// The cluster (the connected nodes, the edge).
    pub cluster: Arc<Cluster>,
    /// One warning per node that is unavailable.
    pub unavailable: Vec<ClusterError>,
}

/// Start this process's end of the cluster and connect to `addrs`.
pub async fn join(
    addrs: &[String],
    cookie: String,
    grace: Duration,
    tls: Option<TlsConnector>,
    project: &std::path::Path,
) -> Result<Joined, Diagnostic> {
    let host_name = super::node::hostname();
    let name = format!(
        "mur-run-{host_name}-{}-{}",
        std::process::id(),
        &uuid::Uuid::now_v7().simple().to_string()[24..]
    );
    let server = super::node::start_server(cookie, &name, &host_name).await?;
    let cluster = Arc::new(Cluster {
        name,
        server: server.clone(),
        grace,
        tls: tls.clone(),
        nodes: Mutex::new(Vec::new()),
        children: Mutex::new(HashMap::new()),
        project: project.to_path_buf(),
        archives: Mutex::new(HashMap::new()),
    });
    Actor::spawn(None, Edge, cluster.clone())
        .await
        .map_err(|e| ClusterError::Server(e.to_string()).diagnostic())?;
    let waiters: Waiters = Arc::default();
    let _ = server.send_message(NodeServerMessage::SubscribeToEvents {
        id: "mur-run".into(),
        subscription: Box::new(Watch {
            cluster: cluster.clone(),
            waiters: waiters.clone(),
        }),
    });
    let tries = addrs
        .iter()
        .map(|a| connect_one(&server, &waiters, a.clone(), tls.as_ref()));
    let mut unavailable = Vec::new();
    for (given, result) in addrs.iter().zip(futures::future::join_all(tries).await) {
        match result {
            Ok(entry) => cluster.nodes().push(entry),
            Err(why) => unavailable.push(ClusterError::Unavailable {
                addr: given.clone(),
                why,
            }),
        }
    }
    Ok(Joined {
        cluster,
        unavailable,
    })
}

/// Connect to one node, authenticate, find its host and say hello.
async fn connect_one(
    server: &ActorRef<NodeServerMessage>,
    waiters: &Waiters,
    given: String,
    tls: Option<&TlsConnector>,
) -> Result<NodeEntry, String> {
    let addr = tokio::net::lookup_host(&given)
        .await
        .map_err(|e| format!("cannot resolve the address: {e}"))?
        .next()
        .ok_or("the address resolves to nothing")?;
    let node_id = open(server, waiters, (addr, &given), tls).await?;
    let host = find_host(node_id)
        .await
        .ok_or("it answers the cluster handshake but runs no mur host (is it a `mur node`?)")?;
    let hello = host
        .call(
            |reply| HostMsg::Hello(String::new(), reply),
            Some(HANDSHAKE_TIMEOUT),
        )
        .await;
    let hello: Hello = match hello {
        Ok(ractor::rpc::CallResult::Success(json)) => serde_json::from_str(&json).map_err(|e| {
            format!("its hello is not mur cluster protocol {PROTOCOL_VERSION}: {e}")
        })?,
        _ => return Err("it did not answer hello".into()),
    };
    if hello.protocol != PROTOCOL_VERSION {
        return Err(format!(
            "it speaks mur cluster protocol {}, this mur speaks {PROTOCOL_VERSION}",
            hello.protocol
        ));
    }
    Ok(NodeEntry {
        given,
        addr,
        name: hello.name,
        node_id,
        host,
        capacity: hello.capacity,
        live: 0,
        up: true,
    })
}

/// Open a connection to `addr` and wait for its handshake; the session's node id.
async fn open(
    server: &ActorRef<NodeServerMessage>,
    waiters: &Waiters,
    (addr, given): (SocketAddr, &str),
    tls: Option<&TlsConnector>,
) -> Result<u64, String> {
    let (tx, rx) = oneshot::channel();
    waiters
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(addr.to_string(), tx);
    let result = async {
        dial(server, addr, given, tls).await.map_err(|e| e.to_string())?;
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, rx).await {
            Ok(Ok(Handshake::Ready(node_id))) => Ok(node_id),
            Ok(_) => Err("the connection closed during the handshake (is the cookie the same on both sides? is it a mur node?)".to_string()),
            Err(_) => Err(format!("no handshake within {HANDSHAKE_TIMEOUT:?} (is it a mur node?)")),
        }
    }
    .await;
    waiters
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&addr.to_string());
    result
}

/// The host actor of the node behind session `node_id` (its process group is synchronized by
/// the time the session is ready; a short wait covers the join arriving just after).
async fn find_host(node_id: u64) -> Option<ActorRef<HostMsg>> {
    for _ in 0..40 {
        let found = ractor::pg::get_members(&HOST_GROUP.to_string())
            .into_iter()
            .find(|c| !c.get_id().is_local() && c.get_id().node() == node_id);
        if let Some(cell) = found {
            return Some(cell.into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

/// Watches node sessions: finishes handshakes at start, and notices nodes that drop.
struct Watch {
    cluster: Arc<Cluster>,
    waiters: Waiters,
}

impl Watch {
    fn waiter(&self, peer: &str) -> Option<oneshot::Sender<Handshake>> {
        self.waiters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(peer)
    }
}

impl NodeEventSubscription for Watch {
    fn node_session_opened(&self, _ses: NodeServerSessionInformation) {}

    fn node_session_authenticated(&self, _ses: NodeServerSessionInformation) {}

    fn node_session_ready(&self, ses: NodeServerSessionInformation) {
        if let Some(tx) = self.waiter(&ses.peer_addr) {
            let _ = tx.send(Handshake::Ready(ses.node_id));
            return;
        }
        // A node that dropped came back: take children again.
        let cluster = self.cluster.clone();
        tokio::spawn(async move {
            let Some(host) = find_host(ses.node_id).await else {
                return;
            };
            if let Some(n) = cluster
                .nodes()
                .iter_mut()
                .find(|n| n.addr.to_string() == ses.peer_addr)
            {
                n.node_id = ses.node_id;
                n.host = host;
                n.up = true;
            }
        });
    }

    fn node_session_disconnected(&self, ses: NodeServerSessionInformation) {
        if let Some(tx) = self.waiter(&ses.peer_addr) {
            let _ = tx.send(Handshake::Closed);
            return;
        }
        let dropped = {
            let mut nodes = self.cluster.nodes();
            nodes
                .iter_mut()
                .find(|n| n.up && n.node_id == ses.node_id)
                .map(|n| {
                    n.up = false;
                    (n.name.clone(), (n.addr, n.given.clone()))
                })
        };
        if let Some((name, at)) = dropped {
            tokio::spawn(watch_lost(self.cluster.clone(), name, at));
        }
    }
}

/// A node's connection dropped: reconnect until it is back, its port refuses (its process is
/// gone), or the grace period is over; then settle its children `node lost`.
async fn watch_lost(cluster: Arc<Cluster>, name: String, (addr, given): (SocketAddr, String)) {
    let deadline = tokio::time::Instant::now() + cluster.grace;
    let why = loop {
        let up = || cluster.nodes().iter().any(|n| n.name == name && n.up);
        if up() {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            break format!(
                "({addr}) disconnected and did not come back within {:?}",
                cluster.grace
            );
        }
        match dial(&cluster.server, addr, &given, cluster.tls.as_ref()).await {
            Err(Dial::Refused) => {
                break format!("({addr}) is gone: its port refuses connections");
            }
            Ok(()) => {
                // The watcher marks it up when the handshake is done.
                for _ in 0..20 {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    if up() {
                        return;
                    }
                }
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    };
    cluster.node_lost(&name, &why).await;
}

/// Why a connection could not be opened.
#[derive(Debug)]
enum Dial {
    /// Nothing listens there.
    Refused,
    /// Anything else: the sentence.
    Failed(String),
}

impl std::fmt::Display for Dial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dial::Refused => write!(f, "unreachable: connection refused"),
            Dial::Failed(why) => write!(f, "{why}"),
        }
    }
}

/// Open a connection to the node at `addr` (TLS when `tls` is given, its certificate checked
/// for the host of `given`) and hand it to the node server, which runs the handshake.
async fn dial(
    server: &ActorRef<NodeServerMessage>,
    addr: SocketAddr,
    given: &str,
    tls: Option<&TlsConnector>,
) -> Result<(), Dial> {
    let stream =
        match tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(addr)).await {
            Err(_) => {
                return Err(Dial::Failed(format!(
                    "unreachable: no connection within {CONNECT_TIMEOUT:?}"
                )))
            }
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                return Err(Dial::Refused)
            }
            Ok(Err(e)) => return Err(Dial::Failed(format!("unreachable: {e}"))),
            Ok(Ok(s)) => s,
        };
    let _ = stream.set_nodelay(true);
    let local_addr = stream
        .local_addr()
        .map_err(|e| Dial::Failed(e.to_string()))?;
    let stream = match tls {
        None => ractor_cluster::NetworkStream::Raw {
            peer_addr: addr,
            local_addr,
            stream,
        },
        Some(connector) => {
            let name = super::tls::server_name(given).map_err(Dial::Failed)?;
            let stream = tokio::time::timeout(HANDSHAKE_TIMEOUT, connector.connect(name, stream))
                .await
                .map_err(|_| {
                    Dial::Failed(format!("no TLS handshake within {HANDSHAKE_TIMEOUT:?}"))
                })?
                .map_err(|e| Dial::Failed(format!("the TLS handshake failed: {e}")))?;
            ractor_cluster::NetworkStream::TlsClient {
                peer_addr: addr,
                local_addr,
                stream,
            }
        }
    };
    server
        .send_message(NodeServerMessage::ConnectionOpened {
            stream: Box::new(stream),
            is_server: false,
        })
        .map_err(|e| Dial::Failed(e.to_string()))
}
