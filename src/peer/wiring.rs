//! Building a session's two peer tools from its manifest.
//!
//! The tools exist exactly when their grants do (seed 000): `share-file` with
//! `exports.peer_files`, `fetch-peer-file` with `capabilities.peer_fetch.allow`. Building the
//! `share-file` executor registers the session's export with the door; the registration lasts
//! as long as the executor, which the session's actors hold until they stop.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use mur_actors::tool::{RuntimeTool, ToolExecutor};

use super::fetch::FetchPeerFile;
use super::handle::Key;
use super::registry::Export;
use super::share::ShareFile;
use crate::manifest::Manifest;

/// The peer executors of one session, by tool name (`share-file`, `fetch-peer-file`).
pub type PeerTools = HashMap<String, Arc<dyn ToolExecutor>>;

/// The peer tools `m` grants to session `session_id` working in `workdir`.
pub fn peer_executors(
    m: &Manifest,
    session_id: &str,
    workdir: &Path,
) -> std::io::Result<PeerTools> {
    let mut out: PeerTools = HashMap::new();
    if let Some(pf) = m.exports.as_ref().and_then(|e| e.peer_files.as_ref()) {
        let export = Export {
            session_id: session_id.to_string(),
            name: m.name.clone(),
            root: workdir.join(&pf.root),
            max_bytes: pf.max_bytes,
            max_ttl: pf.ttl(),
            key: Key::random()?,
            trace: Mutex::new(None),
        };
        out.insert(
            RuntimeTool::ShareFile.name().into(),
            Arc::new(ShareFile::new(export)),
        );
    }
    if let Some(pf) = m.capabilities.peer_fetch.as_ref() {
        out.insert(
            RuntimeTool::FetchPeerFile.name().into(),
            Arc::new(FetchPeerFile {
                session_id: session_id.to_string(),
                name: m.name.clone(),
                allow: pf.allow.clone(),
            }),
        );
    }
    Ok(out)
}
