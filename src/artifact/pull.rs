//! One in-session pull: choose the version, fetch and check the payload, stage it, pin it.
//!
//! A pull from the stores reads the project store, then the global store; with
//! `from: [stores, sources]` a version no store holds is fetched from the scope's GitHub source
//! and written to no store. Nothing is written until every check has passed; the lock pin is
//! the last write, made under the cross-process lock, and a failure there removes the staged
//! folder again.

use mur_actors::artifact_error::{ArtifactError, ArtifactErrorKind};
use mur_actors::registry::{ArtifactRequest, Pulled};
use mur_actors::tool::ToolOrigin;
use serde_json::json;

use super::config::Source;
use super::decls::{pattern_list, tool_decl_for};
use super::github::{GithubClient, SourceError};
use super::index::{Fit, Index, IndexArtifact};
use super::lock::{read_lock, update_lock, Lock, LockEntry, LockUpdateError, Origin, PinHash};
use super::payload::{unpack, PackedManifest, Payload};
use super::service::PullService;
use super::stage::stage_payload;
use super::store::{Store, StoreVersion, Stored};
use super::version::compare_versions;
use crate::manifest::names::{check_version, reserved_tool_names_list};
use crate::manifest::{
    is_reserved_tool_name, ArtifactName, ArtifactRuntime, Implementation, InstallCap,
};

/// Where a candidate version is held.
#[derive(Clone, Debug)]
pub(super) enum Held {
    /// `stores[i]`.
    Store(usize),
    /// The scope's source.
    Source,
}

/// A version a pull could take.
#[derive(Clone, Debug)]
pub(super) struct Candidate {
    pub version: String,
    pub held: Held,
    /// `Err(reason)` when it does not fit this mur.
    pub fit: Result<(), String>,
}

/// The E-CAP-013 sentence for an artifact claiming a runtime-provided tool name.
pub fn reserved_sentence(name: &ArtifactName) -> String {
    format!(
        "artifact '{name}' has the tool name '{}', which collides with a tool the runtime provides itself; the reserved names are {}",
        name.tool_name(),
        reserved_tool_names_list()
    )
}

/// Whether a store version fits this mur, judged as a pull judges it: the sidecar first, then
/// what the payload declares (`payload::peek`: its packed name and version, its packaging, the
/// program or `skill.md` it names), so a listing never offers what the pull would refuse. The
/// bytes' hash is the pull's to check. `Ok` carries the payload's role word.
pub(super) fn store_fit(
    store: &Store,
    name: &ArtifactName,
    v: &StoreVersion,
) -> Result<&'static str, String> {
    if v.meta
        .as_ref()
        .is_some_and(|m| m.runtime == "wasm" && m.artifact_runtime != "capsule")
    {
        return Err(wasm_reason(name, &v.version));
    }
    if !v.has_host_payload() {
        return Err(no_payload_reason(name, &v.version));
    }
    let bytes = store
        .peek_bytes(name, &v.version)?
        .ok_or_else(|| no_payload_reason(name, &v.version))?;
    let manifest =
        super::payload::peek(&bytes, &format!("{name}@{} ({})", v.version, store.label()))?;
    if let Some(why) = packs_another(name, &v.version, store.label(), &manifest) {
        return Err(why);
    }
    if let PackedManifest::Artifact(m) = &manifest {
        if m.runtime == ArtifactRuntime::Tool && m.implementation == Implementation::Wasm {
            return Err(wasm_reason(name, &v.version));
        }
    }
    Ok(manifest.role())
}

/// The refusal of a payload whose packed manifest names another artifact or version.
fn packs_another(
    name: &ArtifactName,
    v: &str,
    from: &str,
    manifest: &PackedManifest,
) -> Option<String> {
    (manifest.name() != name.name() || manifest.version() != v).then(|| {
        format!(
            "{name}@{v} ({from}) packs '{}@{}' in its murmur.yaml, not {}@{v}",
            manifest.name(),
            manifest.version(),
            name.name()
        )
    })
}

fn wasm_reason(name: &ArtifactName, v: &str) -> String {
    format!("'{name}@{v}' is a WebAssembly component; this mur runs native tools and skills")
}

fn no_payload_reason(name: &ArtifactName, v: &str) -> String {
    format!(
        "'{name}@{v}' has no payload for {}",
        super::version::host_platform()
    )
}

/// Whether an index version fits this mur.
pub(super) fn index_fit(name: &ArtifactName, v: &super::index::IndexVersion) -> Result<(), String> {
    match v.fit() {
        Fit::Fits => Ok(()),
        Fit::Wasm => Err(wasm_reason(name, &v.version)),
        Fit::NoPayloadFor(_) => Err(no_payload_reason(name, &v.version)),
    }
}

/// The tier check: a tool must be admitted by `install.tool`, a skill by `install.skill`;
/// anything else is never pullable. `from` describes where the role was read.
pub(super) fn check_tier(
    install: &InstallCap,
    name: &ArtifactName,
    role: &str,
    from: &str,
) -> Result<(), ArtifactError> {
    let (list, key) = match role {
        "tool" => (&install.tool, "tool"),
        "skill" => (&install.skill, "skill"),
        other => {
            return Err(ArtifactError::new(ArtifactErrorKind::NotGranted, format!(
                "'{name}' is a '{other}' artifact ({from}); capabilities.install grants only skills and tools"
            )))
        }
    };
    if list.iter().any(|p| p.matches(name)) {
        Ok(())
    } else {
        Err(ArtifactError::new(
            ArtifactErrorKind::NotGranted,
            format!(
                "'{name}' is a {key}, and capabilities.install.{key} does not name it ({key}: {})",
                pattern_list(list)
            ),
        ))
    }
}

/// The E-REG-010 refusal when `owner` contradicts what is known about `name`'s scope.
pub(super) fn owner_refusal(
    lock: &Lock,
    src: Option<&Source>,
    name: &ArtifactName,
    version: &str,
    from: &str,
    owner: u64,
) -> Result<(), ArtifactError> {
    if let Some(expected) = src.and_then(Source::expected_owner) {
        if expected != owner {
            return Err(ArtifactError::new(ArtifactErrorKind::NotFetched, format!(
                "[E-REG-010] {name}@{version} ({from}) records GitHub account id {owner} as the owner of scope '{}', but the murmur scope belongs to account id {expected}; hint: check MUR_GITHUB_API_BASE / MUR_GITHUB_API and registry.api_base, which point mur at this server",
                name.scope()
            )));
        }
    }
    if let Some((recorded, entry)) = lock.owner_conflict(name.scope(), owner) {
        return Err(ArtifactError::new(ArtifactErrorKind::NotFetched, format!(
            "[E-REG-010] {name}@{version} ({from}) records GitHub account id {owner} as the owner of scope '{}', and murmur.lock records owner id {recorded} for it (entry {entry}); hint: the account was renamed or re-registered, or the repository changed hands; if you trust the new owner, delete the scope's entries from murmur.lock and pull again",
            name.scope()
        )));
    }
    Ok(())
}

/// What was fetched, checked, before staging.
pub(super) struct Fetched {
    pub(super) bytes_sha: String,
    pub(super) platform: Option<String>,
    pub(super) payload: Payload,
    pub(super) fetched_from: String,
    pub(super) owner_id: Option<u64>,
}

impl PullService {
    /// The versions of `name` the stores hold (only `version` when one is asked for, so a pull
    /// of one version judges only that one), project store first.
    pub(super) fn store_candidates(
        &self,
        name: &ArtifactName,
        version: Option<&str>,
    ) -> Vec<Candidate> {
        let mut out = Vec::new();
        for (i, store) in self.stores.iter().enumerate() {
            for v in store.versions(name) {
                if version.is_some_and(|want| want != v.version) {
                    continue;
                }
                out.push(Candidate {
                    fit: store_fit(store, name, &v).map(|_| ()),
                    version: v.version,
                    held: Held::Store(i),
                });
            }
        }
        out
    }

    pub(super) async fn pull_one(
        &self,
        install: &InstallCap,
        request: &ArtifactRequest,
        text: &str,
    ) -> Result<Pulled, ArtifactError> {
        let (name_text, version) = match text.split_once('@') {
            Some((n, v)) => (n, Some(v)),
            None => (text, None),
        };
        let name = ArtifactName::parse(name_text).map_err(|e| match e.hint {
            Some(h) => {
                ArtifactError::new(ArtifactErrorKind::NotGranted, format!("{}; {h}", e.message))
            }
            None => ArtifactError::new(ArtifactErrorKind::NotGranted, e.message.to_string()),
        })?;
        if let Some(v) = version {
            if check_version(v).is_err() {
                return Err(ArtifactError::new(ArtifactErrorKind::NotGranted, format!(
                    "'{v}' is not an artifact version (it must be one path segment); capabilities.install reaches only what the session's registry holds under '{name}'"
                )));
            }
        }
        if is_reserved_tool_name(name.tool_name()) {
            return Err(ArtifactError::new(
                ArtifactErrorKind::NotGranted,
                format!("[E-CAP-013] {}", reserved_sentence(&name)),
            ));
        }
        let admitted = install
            .tool
            .iter()
            .chain(&install.skill)
            .any(|p| p.matches(&name));
        if !admitted {
            return Err(ArtifactError::new(
                ArtifactErrorKind::NotGranted,
                format!(
                    "'{name}' matches no capabilities.install entry (skill: {}; tool: {})",
                    pattern_list(&install.skill),
                    pattern_list(&install.tool)
                ),
            ));
        }
        if let Some(role) = self.declared_role(&name).filter(|r| !r.is_model_visible()) {
            return Err(ArtifactError::new(ArtifactErrorKind::NotGranted, format!(
                "'{name}' is a '{role}' artifact (murmur.yaml); capabilities.install grants only skills and tools"
            )));
        }
        if let Some(other) = self.holder(&request.session_id, &name) {
            return Err(ArtifactError::new(ArtifactErrorKind::NotGranted, format!(
                "'{name}' has the tool name '{}', which '{other}' already holds in this session; remove that one first or pull another artifact",
                name.tool_name()
            )));
        }
        let lock = read_lock(&self.project_dir).map_err(|d| lock_unreadable(&d))?;

        let (chosen, src, index_art, client) = self.choose(install, &name, version).await?;
        let fetched = self
            .fetch(
                install,
                &lock,
                &name,
                &chosen,
                src.as_ref(),
                index_art.as_ref(),
                client.as_ref(),
            )
            .await?;
        let version = chosen.version.clone();
        let hash = PinHash::for_payload(&fetched.bytes_sha, fetched.platform.as_deref());
        if let Some(conflict) = lock.conflict_with(&name, &version, &hash) {
            return Err(lock_conflict(&name, &conflict));
        }

        // Every check passed: stage, then pin.
        let pin = LockEntry {
            name: name.clone(),
            resolved_version: version.clone(),
            sha256: hash.clone(),
            origin: Origin::Runtime,
            session: Some(request.session_id.clone()),
            owner_id: fetched.owner_id,
        };
        self.hold(request, &name, &version, fetched, |lock| {
            if let Some(conflict) = lock.conflict_with(&name, &version, &hash) {
                return Err(lock_conflict(&name, &conflict));
            }
            lock.upsert(pin);
            Ok(lock
                .entry(&name)
                .map(|e| e.origin)
                .unwrap_or(Origin::Runtime))
        })
    }

    /// The writes of a pull whose every check passed: stage the payload under the session's
    /// `tools/<tool>/`, apply `pin` to `murmur.lock` under the cross-process lock (it returns
    /// the entry's origin; a refusal, or a failure to write, removes the staged folder again),
    /// and build the tool the session holds. `pull-artifact` and a resume's restore
    /// ([`PullService::restore`]) both end here.
    pub(super) fn hold(
        &self,
        request: &ArtifactRequest,
        name: &ArtifactName,
        version: &str,
        fetched: Fetched,
        pin: impl FnOnce(&mut Lock) -> Result<Origin, ArtifactError>,
    ) -> Result<Pulled, ArtifactError> {
        let dir = stage_payload(&request.records_dir, name, &fetched.payload).map_err(|e| {
            ArtifactError::new(
                ArtifactErrorKind::NotFetched,
                format!("cannot stage {name}@{version}: {e}"),
            )
        })?;
        let origin = match update_lock(&self.project_dir, pin) {
            Ok(o) => o,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(lock_refusal(e));
            }
        };
        let tool_origin = match origin {
            Origin::Operator => ToolOrigin::Operator,
            Origin::Runtime => ToolOrigin::Pulled,
        };
        let Some(tool) = tool_decl_for(name, &fetched.payload, &dir, tool_origin, self.deadline)
        else {
            return Err(ArtifactError::new(
                ArtifactErrorKind::NotGranted,
                format!("'{name}' is not a skill or tool"),
            ));
        };
        self.remember(&request.session_id, name);
        let runtime = fetched.payload.manifest.role().to_string();
        let result = json!({
            "artifact": name.to_string(),
            "fetched_from": fetched.fetched_from,
            "runtime": runtime,
            "tool_name": name.tool_name(),
            "version": version,
        });
        Ok(Pulled {
            result,
            tool,
            name: name.to_string(),
            version: version.to_string(),
            runtime,
            fetched_from: fetched.fetched_from,
            owner_id: fetched.owner_id,
            origin: origin.as_str().to_string(),
        })
    }

    /// Picks the version to pull and where from.
    async fn choose(
        &self,
        install: &InstallCap,
        name: &ArtifactName,
        version: Option<&str>,
    ) -> Result<
        (
            Candidate,
            Option<Source>,
            Option<IndexArtifact>,
            Option<GithubClient>,
        ),
        ArtifactError,
    > {
        let stored = self.store_candidates(name, version);
        let from_sources = install.from_sources();
        let src = if from_sources {
            self.sources.source_for(name.scope())
        } else {
            None
        };
        let no_source_tail = |subject: &str| -> String {
            if !from_sources {
                format!("{subject}, and capabilities.install.from is [stores], so this capsule fetches from no source")
            } else {
                format!(
                    "{subject}, and no source serves the '{}' scope",
                    name.scope()
                )
            }
        };
        if let Some(v) = version {
            if let Some(c) = stored.into_iter().next() {
                return Ok((c, None, None, None));
            }
            let Some(src) = src else {
                return Err(ArtifactError::new(
                    ArtifactErrorKind::NotFound,
                    no_source_tail(&format!(
                        "'{name}@{v}' is in neither the project store nor the global store"
                    ))
                    .to_string(),
                ));
            };
            let client = self
                .client()
                .map_err(|e| ArtifactError::new(ArtifactErrorKind::NotFetched, e.to_string()))?;
            let index = client
                .index(&src)
                .await
                .map_err(|e| ArtifactError::new(ArtifactErrorKind::NotFetched, format!("{e}")))?;
            let label = src.label();
            let Some(art) = index.artifact(name.name()) else {
                return Err(ArtifactError::new(ArtifactErrorKind::NotFound, format!(
                    "'{name}@{v}' is in neither store, and the index of {label} lists no artifact '{}'",
                    name.name()
                )));
            };
            let Some(iv) = art.version(v) else {
                return Err(ArtifactError::new(
                    ArtifactErrorKind::NotFound,
                    format!(
                    "'{name}@{v}' is in neither store, and the index of {label} lists {name} at {}",
                    art.version_list().join(", ")
                ),
                ));
            };
            let cand = Candidate {
                version: v.to_string(),
                held: Held::Source,
                fit: index_fit(name, iv),
            };
            let art = art.clone();
            return Ok((cand, Some(src), Some(art), Some(client)));
        }

        let mut cands = stored;
        let mut source_note = None;
        let mut index: Option<(Index, GithubClient)> = None;
        if let Some(src) = &src {
            match self.client() {
                Ok(client) => match client.index(src).await {
                    Ok(i) => index = Some((i, client)),
                    Err(e) => source_note = Some(e.to_string()),
                },
                Err(e) => source_note = Some(e),
            }
        }
        let art = index
            .as_ref()
            .and_then(|(i, _)| i.artifact(name.name()).cloned());
        if let Some(a) = &art {
            for iv in &a.versions {
                cands.push(Candidate {
                    version: iv.version.clone(),
                    held: Held::Source,
                    fit: index_fit(name, iv),
                });
            }
        }
        if cands.is_empty() {
            if let Some(note) = source_note {
                return Err(ArtifactError::new(
                    ArtifactErrorKind::NotFetched,
                    note.to_string(),
                ));
            }
            let subject =
                format!("no version of '{name}' is in the project store or the global store");
            return Err(match &src {
                Some(s) => ArtifactError::new(
                    ArtifactErrorKind::NotFound,
                    format!(
                        "{subject}, and the index of {} lists no artifact '{}'",
                        s.label(),
                        name.name()
                    ),
                ),
                None => ArtifactError::new(
                    ArtifactErrorKind::NotFound,
                    no_source_tail(&subject).to_string(),
                ),
            });
        }
        // Newest first; on equal versions a store (listed first) wins.
        cands.sort_by(|a, b| compare_versions(&b.version, &a.version));
        let Some(best) = cands.iter().find(|c| c.fit.is_ok()).cloned() else {
            let mut places: Vec<&str> = vec!["the project store", "the global store"];
            let label = src.as_ref().map(|s| s.label());
            if let Some(l) = &label {
                places.push(l);
            }
            let why = cands[0].fit.clone().err().unwrap_or_default();
            return Err(ArtifactError::new(
                ArtifactErrorKind::DoesNotFit,
                format!(
                    "no version of '{name}' in {} fits this mur; the newest: {why}",
                    places.join(", ")
                ),
            ));
        };
        let (client, art) = match best.held {
            Held::Source => (index.map(|(_, c)| c), art),
            Held::Store(_) => (None, None),
        };
        Ok((best, src, art, client))
    }

    /// Reads or downloads the chosen payload and checks hash, tier, fit and owner.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn fetch(
        &self,
        install: &InstallCap,
        lock: &Lock,
        name: &ArtifactName,
        chosen: &Candidate,
        src: Option<&Source>,
        art: Option<&IndexArtifact>,
        client: Option<&GithubClient>,
    ) -> Result<Fetched, ArtifactError> {
        let v = &chosen.version;
        let (bytes, sha, platform, from, owner) = match chosen.held {
            Held::Store(i) => {
                let store = &self.stores[i];
                let Stored {
                    bytes,
                    sha256,
                    platform,
                    meta,
                    ..
                } = store
                    .get(name, v)
                    .map_err(|e| ArtifactError::new(ArtifactErrorKind::NotFetched, e.to_string()))?
                    .ok_or_else(|| {
                        chosen
                            .fit
                            .clone()
                            .err()
                            .map(|w| {
                                ArtifactError::new(ArtifactErrorKind::DoesNotFit, w.to_string())
                            })
                            .unwrap_or_else(|| {
                                ArtifactError::new(
                                    ArtifactErrorKind::NotFound,
                                    format!("'{name}@{v}' is no longer in the {}", store.label()),
                                )
                            })
                    })?;
                let owner = meta.and_then(|m| m.owner_id);
                (bytes, sha256, platform, store.label().to_string(), owner)
            }
            Held::Source => {
                let (Some(src), Some(art), Some(client)) = (src, art, client) else {
                    return Err(ArtifactError::new(
                        ArtifactErrorKind::NotFetched,
                        format!("no source answered for {name}@{v}"),
                    ));
                };
                let label = src.label();
                check_tier(install, name, &art.runtime, &format!("{label}'s index"))?;
                let iv = art.version(v).ok_or_else(|| {
                    ArtifactError::new(
                        ArtifactErrorKind::NotFound,
                        format!("the index of {label} does not list {name}@{v}"),
                    )
                })?;
                if let Err(why) = &chosen.fit {
                    return Err(ArtifactError::new(
                        ArtifactErrorKind::DoesNotFit,
                        why.to_string(),
                    ));
                }
                let owner = client.owner_id(src).await.map_err(|e| {
                    ArtifactError::new(ArtifactErrorKind::NotFetched, format!("{e}"))
                })?;
                owner_refusal(lock, Some(src), name, v, &label, owner)?;
                let asset = iv.host_asset().ok_or_else(|| {
                    ArtifactError::new(
                        ArtifactErrorKind::DoesNotFit,
                        no_payload_reason(name, v).to_string(),
                    )
                })?;
                let bytes = client
                    .fetch_file(src, &iv.release, &asset.file, &asset.sha256)
                    .await
                    .map_err(|e| match e {
                        SourceError::Integrity(detail) => ArtifactError::new(ArtifactErrorKind::NotFetched, format!(
                            "artifact integrity check failed for {name}@{v}: the reported hash does not match the bytes ({detail})"
                        )),
                        other => ArtifactError::new(ArtifactErrorKind::NotFetched, format!("{other}")),
                    })?;
                let sha = super::store::sha256_hex(&bytes);
                (bytes, sha, asset.platform.clone(), label, Some(owner))
            }
        };
        let payload = unpack(&bytes, &format!("{name}@{v} ({from})"))
            .map_err(|e| ArtifactError::new(ArtifactErrorKind::NotFetched, e.to_string()))?;
        if let Some(why) = packs_another(name, v, &from, &payload.manifest) {
            return Err(ArtifactError::new(
                ArtifactErrorKind::NotFetched,
                why.to_string(),
            ));
        }
        let packaging = format!("{} payload", payload.manifest.kind());
        check_tier(install, name, payload.manifest.role(), &packaging)?;
        if let PackedManifest::Artifact(m) = &payload.manifest {
            if m.runtime == ArtifactRuntime::Tool && m.implementation == Implementation::Wasm {
                return Err(ArtifactError::new(
                    ArtifactErrorKind::DoesNotFit,
                    wasm_reason(name, v).to_string(),
                ));
            }
        }
        if matches!(chosen.held, Held::Store(_)) {
            if let Some(owner) = owner {
                owner_refusal(lock, None, name, v, &from, owner)?;
            }
        }
        Ok(Fetched {
            bytes_sha: sha,
            platform,
            payload,
            fetched_from: from,
            owner_id: owner,
        })
    }
}

fn lock_conflict(name: &ArtifactName, conflict: &str) -> ArtifactError {
    ArtifactError::new(
        ArtifactErrorKind::Lock,
        format!("murmur.lock conflict for '{name}': {conflict} — refusing to override a pinned artifact at runtime"),
    )
}

/// A failed `murmur.lock` update as a refusal: the change's own refusal, or the lock's error.
pub(super) fn lock_refusal(e: LockUpdateError<ArtifactError>) -> ArtifactError {
    match e {
        LockUpdateError::Refused(refusal) => refusal,
        LockUpdateError::Invalid(d) => lock_unreadable(&d),
        LockUpdateError::Write(s) => ArtifactError::new(
            ArtifactErrorKind::Lock,
            format!("failed to write murmur.lock: {s}"),
        ),
    }
}

/// `murmur.lock` could not be read.
pub(super) fn lock_unreadable(d: &crate::diagnostic::Diagnostic) -> ArtifactError {
    ArtifactError::new(
        ArtifactErrorKind::Lock,
        format!("failed to read murmur.lock: {}", d.message),
    )
}
