//! Children of a replayed tree: each delegation is answered from the recorded child's own
//! trace.
//!
//! The replayed parent asks for a child with a capsule, a version and a task; the recorded
//! parent's `delegation_start` lines name the children it had, and each child's trace holds its
//! task. The first recorded child with the same capsule, version and task, not taken yet, is the
//! one replayed. A delegation the recording does not hold is refused with a sentence saying so:
//! the parent's model reads the refusal, and the comparison of that tool result reports it.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use mur_actors::delegation::{CapsuleResolver, ChildRequest, DelegationError, DelegationErrorKind};
use mur_actors::spec::SessionSpec;

use super::driver::{Places, ReplayDriver, ReplayLog};
use super::playback::RecordedTools;
use super::recording::{self, Recording};
use crate::children::ManifestResolver;

/// Resolves children like `mur run` does, with replay drivers in place of their models.
pub struct ReplayResolver {
    inner: ManifestResolver,
    log: Arc<ReplayLog>,
    /// Replaying session id → its recording.
    tree: Mutex<HashMap<String, Arc<Recording>>>,
    /// Recorded child sessions already replayed.
    taken: Mutex<HashSet<String>>,
    recorded_tools: bool,
}

impl ReplayResolver {
    /// A resolver over `inner`, starting from the root session `root_id` replaying `root`.
    pub fn new(
        inner: ManifestResolver,
        log: Arc<ReplayLog>,
        root_id: &str,
        root: Arc<Recording>,
        recorded_tools: bool,
    ) -> ReplayResolver {
        let mut tree = HashMap::new();
        tree.insert(root_id.to_string(), root);
        ReplayResolver {
            inner,
            log,
            tree: Mutex::new(tree),
            taken: Mutex::new(HashSet::new()),
            recorded_tools,
        }
    }

    fn recorded_child(&self, r: &ChildRequest) -> Result<Arc<Recording>, String> {
        let parent = self
            .tree
            .lock()
            .map_err(|_| "replay: the resolver failed".to_string())?
            .get(&r.parent_session_id)
            .cloned()
            .ok_or_else(|| {
                format!(
                    "replay: session {} has no recording to replay its delegations from",
                    r.parent_session_id
                )
            })?;
        let mut taken = self
            .taken
            .lock()
            .map_err(|_| "replay: the resolver failed".to_string())?;
        for d in &parent.delegations {
            if d.capsule != r.capsule
                || d.version != r.version
                || taken.contains(&d.child_session_id)
            {
                continue;
            }
            let child = match recording::read(&d.child_records_dir.join("trace.jsonl")) {
                Ok(c) => c,
                Err(_) => continue,
            };
            if child.task.as_deref() == Some(r.task.as_str()) {
                taken.insert(d.child_session_id.clone());
                return Ok(Arc::new(child));
            }
        }
        Err(format!(
            "replay: the recording of {} holds no delegation to {}@{} with this task",
            parent.session_id, r.capsule, r.version
        ))
    }
}

#[async_trait]
impl CapsuleResolver for ReplayResolver {
    async fn resolve(&self, r: &ChildRequest) -> Result<SessionSpec, DelegationError> {
        let child = self
            .recorded_child(r)
            .map_err(|why| DelegationError::new(DelegationErrorKind::NotResolved, why))?;
        let mut spec = self.inner.resolve(r).await?;
        let driver = ReplayDriver::new(child.clone(), self.log.clone());
        driver.bind(
            &r.session_id,
            if self.recorded_tools {
                Places {
                    workdir: child.workdir.clone(),
                    records: Some(child.dir.clone()),
                }
            } else {
                Places {
                    workdir: Some(r.paths.workdir.clone()),
                    records: Some(r.paths.records_dir.clone()),
                }
            },
        );
        spec.driver = Arc::new(driver);
        spec.continuation.replay_of = Some(child.session_id.clone());
        spec.continuation.outcomes_before = Some(child.outcome_schedule());
        if self.recorded_tools {
            spec.continuation.playback = Some(Arc::new(RecordedTools::new(child.clone())));
        }
        if let Ok(mut tree) = self.tree.lock() {
            tree.insert(r.session_id.clone(), child);
        }
        Ok(spec)
    }
}
