//! [`SessionSpec`]: everything a Session needs to run, decided before it starts.
//!
//! The `mur` crate turns a manifest (and for children, a store entry) into a spec; the kernel
//! never reads YAML. A spec is immutable once the session starts.

use std::path::PathBuf;
use std::sync::Arc;

use crate::model::ModelDriver;
use crate::tool::{Executors, ToolDecl};

pub use crate::grants::Grants;

/// How a session's commands are contained, as its `session_start` line reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainmentFacts {
    /// The floor asked for (`advisory|scoped|sealed`).
    pub declared: String,
    /// What the session's commands run under.
    pub achieved: String,
    /// `capabilities.filesystem.workdir_exec`.
    pub workdir_exec: bool,
}

impl Default for ContainmentFacts {
    /// An embedder that contains nothing: advisory.
    fn default() -> Self {
        ContainmentFacts {
            declared: "advisory".into(),
            achieved: "advisory".into(),
            workdir_exec: false,
        }
    }
}

/// Where a session keeps its files.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionPaths {
    /// The accessible work folder: cwd of every command.
    pub workdir: PathBuf,
    /// The records folder: `trace.jsonl`, `tools/`, `out/`, `MURMUR.md`, `task.md`. Never
    /// inside `workdir`, so no contained command can reach it.
    pub records_dir: PathBuf,
}

/// How much of the conversation the trace keeps (`trace.capture`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Capture {
    /// No wire hashes.
    None,
    /// Hashes of what was sent and received (default).
    #[default]
    Meta,
    /// Hashes plus tool outputs in the trace.
    Content,
}

/// Who delegated to this session, for the child's `session_start`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpawnedBy {
    /// The parent's session id.
    pub parent_session_id: String,
    /// The `dlg_…` id of the delegation.
    pub delegation_id: String,
}

/// Everything one Session runs with.
#[derive(Clone)]
pub struct SessionSpec {
    /// `ses_…`.
    pub session_id: String,
    /// Capsule `name`.
    pub capsule_name: String,
    /// Capsule `version`.
    pub capsule_version: String,
    /// `inference.model`.
    pub model: String,
    /// The driver answering inference calls.
    pub driver: Arc<dyn ModelDriver>,
    /// `inference.max_turns`; `None` is no cap.
    pub max_turns: Option<u32>,
    /// Output cap per call.
    pub max_tokens: u32,
    /// The operator's system prompt (manifest or file), if any.
    pub operator_prompt: Option<String>,
    /// `manifest`, `cli` or `none`.
    pub system_prompt_source: &'static str,
    /// The inventory: every tool the model is offered, in any order (sorted at start).
    pub tools: Vec<ToolDecl>,
    /// The grants.
    pub grants: Grants,
    /// The task text, the first user message verbatim.
    pub task: String,
    /// Where the session's files go.
    pub paths: SessionPaths,
    /// The executors for shell, native and skill tools.
    pub executors: Executors,
    /// `trace.capture`.
    pub capture: Capture,
    /// `inference.tool_refresh` (`compaction` or `immediate`).
    pub tool_refresh: String,
    /// Set for delegated children.
    pub spawned_by: Option<SpawnedBy>,
    /// Depth in the delegation tree (the root is 0).
    pub depth: u32,
    /// How long a delegation may run before this session ends it
    /// (`lifecycle.delegation_deadline_secs`).
    pub delegation_deadline: std::time::Duration,
    /// Policy hooks deciding on every call; `None` when the capsule declares none.
    pub gate: Option<Arc<dyn crate::gate::CallGate>>,
    /// The capsule's pull service (`capabilities.install`); `None` without the grant.
    pub artifacts: Option<Arc<dyn crate::registry::ArtifactSource>>,
    /// How its commands are contained (reported in `session_start`).
    pub containment: ContainmentFacts,
    /// The runtime made the work folder for this session (not `--workdir`): staging links
    /// `tools/` there, so the model finds `tools/<name>/murmur.yaml` in its own folder.
    pub owns_workdir: bool,
    /// A replay or a resume of a recorded session; the default for a fresh one.
    pub continuation: crate::continuation::Continuation,
}

impl SessionSpec {
    /// A spec for embedding the kernel directly (tests, benches, other front ends): the
    /// runtime-provided tools its `grants` give, version `0.1.0`, model `scripted`, no turn
    /// cap, an 8192-token output cap, no system prompt, `meta` capture, the root of its tree,
    /// a 600 s delegation deadline, no policy hooks and no pulls. Fields are public: change
    /// what differs.
    pub fn new(
        session_id: String,
        capsule_name: &str,
        driver: Arc<dyn ModelDriver>,
        grants: Grants,
        task: String,
        paths: SessionPaths,
        executors: Executors,
    ) -> SessionSpec {
        SessionSpec {
            session_id,
            capsule_name: capsule_name.to_string(),
            capsule_version: "0.1.0".into(),
            model: "scripted".into(),
            driver,
            max_turns: None,
            max_tokens: 8192,
            operator_prompt: None,
            system_prompt_source: "none",
            tools: crate::provided::provided_tools(&grants),
            grants,
            task,
            paths,
            executors,
            capture: Capture::Meta,
            tool_refresh: "compaction".into(),
            spawned_by: None,
            depth: 0,
            delegation_deadline: std::time::Duration::from_secs(600),
            gate: None,
            artifacts: None,
            containment: ContainmentFacts::default(),
            owns_workdir: false,
            continuation: Default::default(),
        }
    }
}

impl std::fmt::Debug for SessionSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionSpec")
            .field("session_id", &self.session_id)
            .field("capsule", &self.capsule_name)
            .field("version", &self.capsule_version)
            .field("driver", &self.driver.name())
            .finish_non_exhaustive()
    }
}
