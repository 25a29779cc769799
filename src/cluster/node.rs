//! `mur node`: a process that hosts child sessions for parents on other machines.
//!
//! It binds `--listen` itself (so port 0 gives a real port to print, and the address is
//! exactly the one asked for) and hands every accepted connection to ractor_cluster's node
//! server, which runs the cookie handshake and the session. (The node server also opens a
//! listener of its own; it is bound to 127.0.0.1 on a free port and is just as
//! cookie-protected.) The host actor ([`super::host`]) does the work. A parent whose
//! connection stays gone for the grace period has its children canceled, so nothing it
//! started runs on unattended. SIGINT or SIGTERM cancels every child, waits for their ends to
//! be sent, and exits.

use std::path::PathBuf;
use std::time::Duration;

use ractor::Actor;
use ractor_cluster::node::NodeServerSessionInformation;
use ractor_cluster::{NodeEventSubscription, NodeServer, NodeServerMessage};

use super::host::{Host, HostArgs, HostBook};
use super::wire::{edge_group, MAX_FRAME_BYTES};
use super::{cookie, ClusterError};
use crate::diagnostic::Diagnostic;

/// How long a peer may be gone before what depends on it is given up: a node's children of a
/// parent that is gone are canceled, a parent's children on a node that is gone end `node
/// lost` (sooner when the node's port refuses connections: nothing listens there any more).
pub const GRACE: Duration = Duration::from_secs(10);

/// What `mur node` does, one line: its description in `mur --help` and in its own help.
/// (`mur`'s subcommands are built lazily, so the command and its options both carry it.)
pub const ABOUT: &str = "Host sub-capsules for `mur run --nodes` parents on other machines";

/// Options of `mur node`.
#[derive(Debug, Clone, clap::Args)]
#[command(about = ABOUT)]
pub struct NodeArgs {
    /// Where to listen, HOST:PORT (port 0 picks a free port; the first line says which).
    #[arg(long, value_name = "HOST:PORT")]
    pub listen: String,
    /// A file whose first line is the cluster cookie (else MUR_CLUSTER_COOKIE).
    #[arg(long, value_name = "F")]
    pub cookie_file: Option<PathBuf>,
    /// Most child sessions live at once (default: the number of cores).
    #[arg(long, value_name = "N")]
    pub capacity: Option<u32>,
    /// The node's name (default: <hostname>-<port>).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Where children's records and work folders go (default: ~/.murmur/node/<name>).
    #[arg(long, value_name = "D")]
    pub dir: Option<PathBuf>,
    /// Accept only TLS connections, with this PEM certificate chain (needs --tls-key).
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

/// The number of cores, the default `--capacity` and `mur run --max-local`.
pub fn cores() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

/// This machine's host name.
pub fn hostname() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

/// Run `mur node`; returns the exit code.
pub async fn run(args: NodeArgs) -> i32 {
    match serve(args).await {
        Ok(()) => 0,
        Err(d) => {
            crate::errln!("{d}");
            1
        }
    }
}

async fn serve(args: NodeArgs) -> Result<(), Diagnostic> {
    let cookie = cookie::load(args.cookie_file.as_deref()).map_err(|e| e.diagnostic())?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => {
            Some(super::tls::acceptor(cert, key).map_err(|e| e.diagnostic())?)
        }
        _ => None,
    };
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .map_err(|e| {
            ClusterError::Listen {
                addr: args.listen.clone(),
                why: e.to_string(),
            }
            .diagnostic()
        })?;
    let local = listener.local_addr().map_err(|e| {
        ClusterError::Listen {
            addr: args.listen.clone(),
            why: e.to_string(),
        }
        .diagnostic()
    })?;
    let host_name = hostname();
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| format!("{host_name}-{}", local.port()));
    let dir = match &args.dir {
        Some(d) => std::path::absolute(d).unwrap_or_else(|_| d.clone()),
        None => crate::artifact::config::murmur_home()?
            .join("node")
            .join(&name),
    };
    std::fs::create_dir_all(&dir).map_err(|e| {
        Diagnostic::error("E-IO-002", format!("cannot create {}: {e}", dir.display()))
    })?;
    crate::launch::raise_nofile_limit();
    let server = start_server(cookie, &name, &host_name).await?;
    let book = HostBook::default();
    let host_args = HostArgs {
        name: name.clone(),
        capacity: args.capacity.unwrap_or_else(cores),
        dir,
        grace: GRACE,
        book: book.clone(),
    };
    let (host, host_handle) = Actor::spawn(None, Host, host_args)
        .await
        .map_err(|e| ClusterError::Server(e.to_string()).diagnostic())?;
    let _ = server.send_message(NodeServerMessage::SubscribeToEvents {
        id: "mur-node".into(),
        subscription: Box::new(ParentWatch { book: book.clone() }),
    });
    crate::outln!("node: {name} listening on {local}");
    let accept = tokio::spawn(accept_loop(listener, server.clone(), tls));
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
    }
    accept.abort();
    for group in book.parents() {
        book.cancel_children_of(&group);
    }
    // Each canceled child ends, writes its last lines and sends its end; wait for that, a
    // bounded time.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !book.parents().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    host.stop(None);
    let _ = host_handle.await;
    server.stop(None);
    mur_actors::trace::written_all().await;
    Ok(())
}

/// Start ractor_cluster's node server for `name` (a node, or a parent's end of the cluster).
pub async fn start_server(
    cookie: String,
    name: &str,
    host_name: &str,
) -> Result<ractor::ActorRef<NodeServerMessage>, Diagnostic> {
    let server = NodeServer::new(
        0,
        cookie,
        name.to_string(),
        host_name.to_string(),
        None,
        Some(ractor_cluster::node::NodeConnectionMode::Isolated),
    )
    .with_listen_addr(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST))
    .with_max_inbound_frame_size(MAX_FRAME_BYTES);
    let (server, _) = Actor::spawn(None, server, ())
        .await
        .map_err(|e| ClusterError::Server(e.to_string()).diagnostic())?;
    Ok(server)
}

/// Hand every accepted connection to the node server (after its TLS handshake, when the node
/// has a certificate: each in a task of its own, so a slow peer holds up no other).
pub async fn accept_loop(
    listener: tokio::net::TcpListener,
    server: ractor::ActorRef<NodeServerMessage>,
    tls: Option<tokio_rustls::TlsAcceptor>,
) {
    loop {
        let (stream, peer_addr) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let Ok(local_addr) = stream.local_addr() else {
            continue;
        };
        let Some(acceptor) = tls.clone() else {
            opened(
                &server,
                ractor_cluster::NetworkStream::Raw {
                    peer_addr,
                    local_addr,
                    stream,
                },
            );
            continue;
        };
        let server = server.clone();
        tokio::spawn(async move {
            let handshake = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream));
            match handshake.await {
                Ok(Ok(stream)) => opened(
                    &server,
                    ractor_cluster::NetworkStream::TlsServer {
                        peer_addr,
                        local_addr,
                        stream,
                    },
                ),
                Ok(Err(e)) => tracing::warn!("TLS handshake with {peer_addr} failed: {e}"),
                Err(_) => tracing::warn!("no TLS handshake from {peer_addr} within 10 s"),
            }
        });
    }
}

fn opened(server: &ractor::ActorRef<NodeServerMessage>, stream: ractor_cluster::NetworkStream) {
    let _ = server.send_message(NodeServerMessage::ConnectionOpened {
        stream: Box::new(stream),
        is_server: true,
    });
}

/// Cancels the children of a parent whose connection stays gone for the grace period.
struct ParentWatch {
    book: HostBook,
}

impl NodeEventSubscription for ParentWatch {
    fn node_session_opened(&self, _ses: NodeServerSessionInformation) {}

    fn node_session_authenticated(&self, _ses: NodeServerSessionInformation) {}

    fn node_session_disconnected(&self, ses: NodeServerSessionInformation) {
        let Some(peer) = ses.peer_name else {
            return;
        };
        let group = edge_group(&peer.name);
        let book = self.book.clone();
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + GRACE;
            while tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(250)).await;
                if !ractor::pg::get_members(&group).is_empty() {
                    return; // it came back
                }
            }
            book.cancel_children_of(&group);
        });
    }
}
