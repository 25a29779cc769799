//! [`PullService`]: the in-session pull/remove service behind the kernel's
//! [`ArtifactSource`] seam (seed 001 step 5, session-tools §7).
//!
//! The Registry actor sends every `pull-artifact` and `remove-artifact` call here, one at a
//! time. The service decides in upstream's order (grant → tool name → version → tier and fit →
//! payload hash, owner id → lock conflict) and only then writes: the payload staged under
//! `<records>/tools/<tool>/`, then the `origin: runtime` pin. Any refusal writes nothing and its
//! text starts with `not-granted:`, `not-found:`, `does-not-fit:`, `not-fetched:` or
//! `not-removable:`.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use mur_actors::artifact_error::{ArtifactError, ArtifactErrorKind};
use mur_actors::registry::{ArtifactRequest, ArtifactSource, PullOutcome, Removed};
use mur_actors::tool::RuntimeTool;
use serde_json::Value;

use super::config::{murmur_home, SourcesConfig};
use super::github::GithubClient;
use super::store::Store;
use crate::diagnostic::Diagnostic;
use crate::manifest::{ArtifactName, ArtifactRuntime, InstallCap, LoadedManifest};

/// Default wall-clock limit for one call of a pulled native tool.
pub const DEFAULT_TOOL_DEADLINE: Duration = Duration::from_secs(600);

/// The pull/remove service of one capsule.
pub struct PullService {
    pub(super) install: Option<InstallCap>,
    pub(super) project_dir: PathBuf,
    pub(super) stores: [Store; 2],
    pub(super) sources: SourcesConfig,
    pub(super) declared: Vec<(ArtifactName, ArtifactRuntime)>,
    pub(super) deadline: Duration,
    /// Per session: tool name → full name of what it pulled.
    pub(super) pulled: Mutex<HashMap<String, BTreeMap<String, ArtifactName>>>,
}

impl PullService {
    /// A service for a capsule with grant `install` (None = no `capabilities.install`), whose
    /// project (store and lock) is `project_dir`, with the global store under `home`.
    pub fn new(
        install: Option<InstallCap>,
        project_dir: &Path,
        home: &Path,
        sources: SourcesConfig,
    ) -> PullService {
        PullService {
            install,
            project_dir: project_dir.to_path_buf(),
            stores: [Store::project(project_dir), Store::global(home)],
            sources,
            declared: Vec::new(),
            deadline: DEFAULT_TOOL_DEADLINE,
            pulled: Mutex::new(HashMap::new()),
        }
    }

    /// The artifacts `murmur.yaml` declares (never removable; their tool names are taken).
    pub fn with_declared(mut self, declared: Vec<(ArtifactName, ArtifactRuntime)>) -> Self {
        self.declared = declared;
        self
    }

    /// The deadline pulled native tools run under (`capabilities.limits.deadline_seconds`).
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// The service for a loaded manifest: its grant, its folder as the project, the murmur
    /// home's global store and `config.yaml` sources.
    pub fn for_manifest(loaded: &LoadedManifest) -> Result<PullService, Diagnostic> {
        let home = murmur_home()?;
        let sources = SourcesConfig::load(&home)?;
        let m = &loaded.manifest;
        let declared = m
            .artifacts
            .iter()
            .map(|a| (a.name.clone(), a.runtime))
            .collect();
        let project = std::path::absolute(&loaded.dir).unwrap_or_else(|_| loaded.dir.clone());
        Ok(
            PullService::new(m.capabilities.install.clone(), &project, &home, sources)
                .with_declared(declared),
        )
    }

    pub(super) fn client(&self) -> Result<GithubClient, String> {
        GithubClient::new(&self.sources.api_base)
    }

    /// The declared entry with this full name.
    pub(super) fn declared_role(&self, name: &ArtifactName) -> Option<ArtifactRuntime> {
        self.declared
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, r)| *r)
    }

    /// Another artifact already holding `name`'s tool name in `session`, if any.
    pub(super) fn holder(&self, session: &str, name: &ArtifactName) -> Option<ArtifactName> {
        let tool = name.tool_name();
        if let Some((n, _)) = self
            .declared
            .iter()
            .find(|(n, r)| r.is_model_visible() && n.tool_name() == tool && n != name)
        {
            return Some(n.clone());
        }
        let pulled = self.pulled.lock().unwrap_or_else(|p| p.into_inner());
        pulled
            .get(session)
            .and_then(|m| m.get(tool))
            .filter(|n| *n != name)
            .cloned()
    }

    pub(super) fn remember(&self, session: &str, name: &ArtifactName) {
        self.pulled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(session.to_string())
            .or_default()
            .insert(name.tool_name().to_string(), name.clone());
    }

    pub(super) fn forget(&self, session: &str, tool: &str) -> Option<ArtifactName> {
        self.pulled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(session)
            .and_then(|m| m.remove(tool))
    }

    pub(super) fn pulled_by(&self, session: &str, tool: &str) -> Option<ArtifactName> {
        self.pulled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(session)
            .and_then(|m| m.get(tool).cloned())
    }
}

/// The `artifact` string of a tool input, or the input refusal.
pub(super) fn artifact_arg(tool: &str, input: &Value) -> Result<String, ArtifactError> {
    let bad = |why: String| ArtifactError::new(ArtifactErrorKind::BadInput, why);
    let Value::Object(map) = input else {
        return Err(bad(format!("'{tool}' expects a JSON object as its input")));
    };
    match map.get("artifact").and_then(Value::as_str).map(str::trim) {
        Some(s) if !s.is_empty() => Ok(s.to_string()),
        _ => Err(bad(format!("'{tool}' requires a non-empty 'artifact'"))),
    }
}

#[async_trait]
impl ArtifactSource for PullService {
    async fn pull(&self, request: ArtifactRequest) -> Result<PullOutcome, ArtifactError> {
        let text = artifact_arg(RuntimeTool::PullArtifact.name(), &request.input)?;
        let Some(install) = &self.install else {
            return Err(RuntimeTool::PullArtifact.install_refusal(&request.input));
        };
        if text.ends_with('*') {
            return self.list(install, &text).await.map(PullOutcome::Listing);
        }
        self.pull_one(install, &request, &text)
            .await
            .map(|p| PullOutcome::Pulled(Box::new(p)))
    }

    async fn remove(&self, request: ArtifactRequest) -> Result<Removed, ArtifactError> {
        self.remove_one(&request)
    }
}
