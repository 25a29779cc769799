//! Delegation across machines: `mur node` hosts child sessions for parents elsewhere, and
//! `mur run --nodes` places children on such nodes.
//!
//! Everything on the wire is ractor_cluster's: its node server and sessions (framing, the
//! cookie handshake, keep-alive pings), its remote actors and its process groups. Two actors
//! are remote-capable, each with one enum of typed messages ([`wire`]): the node's [`host`]
//! (start and cancel a child, say hello), joined to the group [`wire::HOST_GROUP`], and the
//! parent's [`edge`] (a child ended), joined to a group named after the parent. The kernel
//! only sees the [`mur_actors::placement::ChildPlacer`] hook ([`placer`]) and a local stand-in
//! actor for each remote child ([`standin`]), so a remote child settles exactly as a local one
//! does; on the node, a child delegates through its parent's stores ([`parent_store`]).
//! docs/cluster.md has the design, the placement policy and the security notes.

pub mod config;
pub mod connect;
pub mod cookie;
pub mod edge;
pub mod error;
pub mod host;
pub mod node;
pub mod parent_store;
pub mod placer;
pub mod records;
pub mod standin;
pub mod tls;
pub mod wire;

pub use error::ClusterError;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use mur_actors::placement::ChildPlacer;

use crate::diagnostic::Diagnostic;

/// The cluster options of `mur run`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RunNodes {
    /// Place sub-capsules on these `mur node`s too, HOST:PORT,… (default: `nodes:` in
    /// ~/.murmur/config.yaml).
    #[arg(long, value_name = "ADDR,…", value_delimiter = ',')]
    pub nodes: Vec<String>,
    /// Sub-capsules that run on this machine before others go to nodes (default: the number
    /// of cores).
    #[arg(long, value_name = "N")]
    pub max_local: Option<u32>,
    /// A file whose first line is the cluster cookie (else MUR_CLUSTER_COOKIE).
    #[arg(long, value_name = "F")]
    pub cookie_file: Option<PathBuf>,
    /// Connect to nodes with TLS, trusting the certificates in this PEM file.
    #[arg(long, value_name = "PEM")]
    pub tls_ca: Option<PathBuf>,
}

/// The placer of a `mur run` with nodes (`None` without): the cookie read, every node tried,
/// one warning printed per node that cannot be used (unless `quiet`).
pub async fn placer_for(
    opts: &RunNodes,
    project: &Path,
    quiet: bool,
) -> Result<Option<Arc<dyn ChildPlacer>>, Diagnostic> {
    let nodes = if opts.nodes.is_empty() {
        let home = crate::artifact::config::murmur_home()?;
        config::nodes(&home).map_err(|e| e.diagnostic())?
    } else {
        opts.nodes.clone()
    };
    if nodes.is_empty() {
        return Ok(None);
    }
    let cookie = cookie::load(opts.cookie_file.as_deref()).map_err(|e| {
        e.diagnostic()
            .with_hint("mur run --nodes needs the cookie its nodes were started with")
    })?;
    let tls = match &opts.tls_ca {
        Some(ca) => Some(tls::connector(ca).map_err(|e| e.diagnostic())?),
        None => None,
    };
    let joined = connect::join(&nodes, cookie, node::GRACE, tls, project).await?;
    for w in joined.unavailable.iter().filter(|_| !quiet) {
        crate::errln!("{}", w.diagnostic());
    }
    let max_local = opts.max_local.unwrap_or_else(node::cores) as usize;
    Ok(Some(Arc::new(placer::Placer::new(
        joined.cluster,
        max_local,
    ))))
}
