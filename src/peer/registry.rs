//! The process-wide map from session id to that session's export state, which the door reads
//! to answer a redeem.
//!
//! A session that declares `exports.peer_files` registers when its `share-file` executor is
//! built and is removed when that executor is dropped (the [`Registration`] guard), which happens
//! when the session's actors stop: every handle dies with its session, and thousands of sessions
//! coming and going leave nothing behind. The door's address is kept here too, because one
//! process has one door and both tools need its port to name their own session.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, LazyLock, Mutex, RwLock};

use mur_actors::tool::TraceSink;

use super::handle::Key;

/// What the door needs to serve one session's handles.
pub struct Export {
    /// The minting session.
    pub session_id: String,
    /// Its capsule name (the card name).
    pub name: String,
    /// The export root, absolute (`<workdir>/<exports.peer_files.root>`).
    pub root: PathBuf,
    /// `exports.peer_files.max_bytes`.
    pub max_bytes: u64,
    /// `exports.peer_files.max_ttl`, default applied.
    pub max_ttl: std::time::Duration,
    /// The session's signing key (memory only).
    pub key: Key,
    /// Where redeem lines go: the sink of the session's latest `share-file` call, so a redeem is
    /// traced in the minting session's trace. Unset until the first mint (nothing to redeem).
    pub trace: Mutex<Option<TraceSink>>,
}

impl Export {
    /// Write one line to the session's trace, if it has minted anything yet.
    pub fn emit(&self, event: mur_actors::trace::TraceEvent) {
        let sink = self.trace.lock().expect("peer trace sink").clone();
        if let Some(sink) = sink {
            sink(event);
        }
    }
}

/// Session id → export state.
#[derive(Default)]
pub struct PeerRegistry {
    sessions: RwLock<HashMap<String, Arc<Export>>>,
}

/// Removes its session from the registry when dropped.
pub struct Registration {
    session_id: String,
    registry: &'static PeerRegistry,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.registry
            .sessions
            .write()
            .expect("peer registry")
            .remove(&self.session_id);
    }
}

impl PeerRegistry {
    /// Add (or replace) a session's export; it stays until the guard is dropped.
    pub fn register(&'static self, export: Arc<Export>) -> Registration {
        let session_id = export.session_id.clone();
        self.sessions
            .write()
            .expect("peer registry")
            .insert(session_id.clone(), export);
        Registration {
            session_id,
            registry: self,
        }
    }

    /// The export of a live session.
    pub fn lookup(&self, session_id: &str) -> Option<Arc<Export>> {
        self.sessions
            .read()
            .expect("peer registry")
            .get(session_id)
            .cloned()
    }

    /// How many sessions are registered.
    pub fn len(&self) -> usize {
        self.sessions.read().expect("peer registry").len()
    }

    /// True when no session is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

static REGISTRY: LazyLock<PeerRegistry> = LazyLock::new(PeerRegistry::default);
static DOOR_PORT: RwLock<Option<u16>> = RwLock::new(None);

/// The registry of this process.
pub fn global() -> &'static PeerRegistry {
    &REGISTRY
}

/// Record the port of this process's door (called when the door opens).
pub fn set_door_port(port: u16) {
    *DOOR_PORT.write().expect("door port") = Some(port);
}

/// The port of this process's door, once it is open.
pub fn door_port() -> Option<u16> {
    *DOOR_PORT.read().expect("door port")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn export(id: &str) -> Arc<Export> {
        Arc::new(Export {
            session_id: id.into(),
            name: "x".into(),
            root: PathBuf::from("/nonexistent"),
            max_bytes: 1,
            max_ttl: std::time::Duration::from_secs(1),
            key: Key::random().unwrap(),
            trace: Mutex::new(None),
        })
    }

    #[test]
    fn thousands_of_sessions_leave_nothing_behind() {
        let before = global().len();
        let guards: Vec<Registration> = (0..5000)
            .map(|i| global().register(export(&format!("ses_reg_test_{i}"))))
            .collect();
        assert!(global().lookup("ses_reg_test_4999").is_some());
        assert_eq!(global().len(), before + 5000);
        drop(guards);
        assert!(global().lookup("ses_reg_test_4999").is_none());
        assert_eq!(global().len(), before);
    }
}
