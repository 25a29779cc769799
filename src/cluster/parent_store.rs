//! A node's view of one parent's stores: how a child hosted here delegates further.
//!
//! A node has nothing installed. The capsule of a child it hosts comes with the start; a
//! capsule that child delegates to is fetched from the same parent when first asked for
//! ([`EdgeMsg::Fetch`]), checked against the sha256 the parent's store pins it to, extracted
//! once under the node's folder, and from then on resolved like any capsule: its manifest
//! loaded once, its grants checked against the delegating session's. The grandchild runs here,
//! in the child's own tree (its Supervisor, its records folder, its flush), so it is canceled,
//! bounded and traced as a local grandchild is, and its trace goes home with the child's.
//!
//! One store per parent: two parents may hold different bytes under one name and version.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use mur_actors::delegation::{CapsuleResolver, ChildRequest, DelegationError, DelegationErrorKind};
use mur_actors::spec::SessionSpec;
use ractor::ActorRef;

use super::placer::START_TIMEOUT;
use super::wire::{to_json, unpack_fetched, EdgeMsg, FetchRequest, Fetched};
use crate::children::ManifestResolver;

/// Extracted capsules by (full name, version).
type Extracted = Arc<Mutex<HashMap<(String, String), PathBuf>>>;

/// One parent's capsules, as a node resolves them.
pub struct ParentStore {
    /// The node's name, for sentences.
    node: String,
    /// The parent's edge group: where fetches go.
    edge_group: String,
    /// `<node dir>/capsules`.
    capsules: PathBuf,
    extracted: Extracted,
    /// Resolves what was extracted (the manifest cache, the grant checks).
    inner: ManifestResolver,
    /// One fetch at a time: a fan-out of grandchildren of one capsule fetches it once.
    fetching: tokio::sync::Mutex<()>,
}

impl ParentStore {
    /// The store of the parent whose edge group is `edge_group`, extracting under
    /// `capsules`.
    pub fn new(node: &str, edge_group: &str, capsules: PathBuf) -> ParentStore {
        let extracted: Extracted = Arc::default();
        let seen = extracted.clone();
        let inner = ManifestResolver::new(Box::new(move |name: &str, version: &str| {
            seen.lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&(name.to_string(), version.to_string()))
                .cloned()
                .ok_or_else(|| format!("capsule {name}@{version} was not fetched"))
        }));
        ParentStore {
            node: node.to_string(),
            edge_group: edge_group.to_string(),
            capsules,
            extracted,
            inner,
            fetching: tokio::sync::Mutex::new(()),
        }
    }

    fn has(&self, capsule: &str, version: &str) -> bool {
        self.extracted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(&(capsule.to_string(), version.to_string()))
    }

    /// Check `bytes` against `sha256` and extract them (once) as `capsule@version`; both off
    /// the runtime threads (an archive may be megabytes).
    pub async fn add(
        &self,
        capsule: &str,
        version: &str,
        sha256: &str,
        bytes: Vec<u8>,
    ) -> Result<(), String> {
        let dest = capsule_dir(&self.capsules, capsule, version, sha256)?;
        let what = format!("{capsule}@{version}");
        let (d, pin, node) = (dest.clone(), sha256.to_string(), self.node.clone());
        tokio::task::spawn_blocking(move || {
            let actual = mur_actors::text::sha256_hex(&bytes);
            if actual != pin {
                return Err(format!(
                    "delegation refused by node {node}: the artifact of '{what}' does not match its pin (pinned sha256 {pin}, the bytes received hash to {actual})"
                ));
            }
            crate::artifact::extract_capsule(&bytes, &what, &format!("{what} from the parent"), &d)
        })
        .await
        .map_err(|e| e.to_string())??;
        self.extracted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((capsule.to_string(), version.to_string()), dest);
        Ok(())
    }

    /// Fetch `capsule@version` from the parent, unless it is here already.
    async fn fetch(&self, capsule: &str, version: &str) -> Result<(), String> {
        let _one = self.fetching.lock().await;
        if self.has(capsule, version) {
            return Ok(());
        }
        let unreachable = || {
            format!(
                "node {}: the parent that placed this session is unreachable, so '{capsule}@{version}' cannot be fetched from its stores",
                self.node
            )
        };
        let edge: ActorRef<EdgeMsg> = ractor::pg::get_members(&self.edge_group)
            .into_iter()
            .next()
            .ok_or_else(unreachable)?
            .into();
        let request = to_json(&FetchRequest {
            capsule: capsule.to_string(),
            version: version.to_string(),
        });
        let reply = match edge
            .call(|r| EdgeMsg::Fetch(request, r), Some(START_TIMEOUT))
            .await
        {
            Ok(ractor::rpc::CallResult::Success(bytes)) => bytes,
            _ => return Err(unreachable()),
        };
        match unpack_fetched(&reply)? {
            (Fetched::Found { sha256 }, archive) => {
                self.add(capsule, version, &sha256, archive.to_vec()).await
            }
            (Fetched::Refused(why), _) => Err(format!(
                "node {}: the parent cannot send '{capsule}@{version}': {why}",
                self.node
            )),
        }
    }
}

#[async_trait]
impl CapsuleResolver for ParentStore {
    async fn resolve(&self, r: &ChildRequest) -> Result<SessionSpec, DelegationError> {
        if !self.has(&r.capsule, &r.version) {
            self.fetch(&r.capsule, &r.version)
                .await
                .map_err(|why| DelegationError::new(DelegationErrorKind::NotResolved, why))?;
        }
        self.inner.resolve(r).await
    }
}

/// Where `capsule@version` with pin `sha256` is extracted: by scope, name, version and pin.
pub fn capsule_dir(
    capsules: &Path,
    capsule: &str,
    version: &str,
    sha256: &str,
) -> Result<PathBuf, String> {
    let name = crate::manifest::ArtifactName::parse(capsule).map_err(|e| e.to_string())?;
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+' | '_');
    if version.is_empty() || version.starts_with('.') || !version.chars().all(plain) {
        return Err(format!("'{version}' is not a capsule version"));
    }
    let pin = sha256.get(..16).unwrap_or(sha256);
    Ok(capsules
        .join(name.scope())
        .join(name.name())
        .join(format!("{version}-{pin}")))
}
