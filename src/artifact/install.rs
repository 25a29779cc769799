//! `mur install`: fetch artifacts into a store and pin them in `murmur.lock` as `operator`.
//!
//! Forms: no argument (everything `murmur.yaml` declares, except built-in drivers and
//! `source:` skills), `<scope>/<name>[@<version>]`, `github:<owner>/<repo>@<tag>` (every
//! `.mur.zip` of that release), and a path to a `.mur.zip` (filed as `local/<name>`). `-g`
//! writes to the global store and pins nothing. An artifact is fully checked (hash, owner id,
//! version, lock conflict) before anything is written; an existing `origin: runtime` pin is
//! adopted as `operator`, and the command says so.

use std::path::{Path, PathBuf};

use super::config::{murmur_home, Source, SourcesConfig};
use super::github::{GithubClient, SourceError};
use super::index::{parse_index, INDEX_ASSET};
use super::install_ref::platform_of_file;
use super::lock::{read_lock, update_lock, Lock, LockEntry, LockUpdateError, Origin, PinHash};
use super::payload::{unpack, Payload};
use super::pull::{index_fit, store_fit};
use super::store::{sha256_hex, Store};
use super::version::{compare_versions, host_platform};
use crate::diagnostic::Diagnostic;
use crate::manifest::{ArtifactName, MANIFEST_FILE};

/// One artifact ready to be filed.
struct Ready {
    name: ArtifactName,
    bytes: Vec<u8>,
    payload: Payload,
    platform: Option<String>,
    from: String,
    owner_id: Option<u64>,
    /// Already in the target store: do not rewrite it.
    in_target: bool,
}

/// What an install works with.
pub struct Installer {
    /// The project folder (holding murmur.yaml), unless `-g` outside a project.
    pub project: Option<PathBuf>,
    /// Write to the global store and pin nothing.
    pub global: bool,
    project_store: Option<Store>,
    global_store: Store,
    sources: SourcesConfig,
    client: Option<GithubClient>,
    /// Print nothing per artifact (`--json` prints [`Installer::installed`] at the end).
    pub quiet: bool,
    /// Each artifact filed and pinned, in order: `{artifact, version, from,
    /// adopted_from_session}`.
    pub installed: Vec<serde_json::Value>,
}

/// The nearest folder at or above `start` holding `murmur.yaml`.
pub fn find_project_root(start: &Path) -> Option<PathBuf> {
    let start = std::path::absolute(start).ok()?;
    start
        .ancestors()
        .find(|d| d.join(MANIFEST_FILE).is_file())
        .map(Path::to_path_buf)
}

fn reg006(e: SourceError) -> Diagnostic {
    match e {
        SourceError::NotFound(s) => Diagnostic::error("E-REG-001", s),
        SourceError::Integrity(s) => Diagnostic::error("E-REG-002", s),
        SourceError::Unreachable(s) => Diagnostic::error("E-REG-006", s)
            .with_hint("check the network, MUR_GITHUB_API_BASE / MUR_GITHUB_API / registry.api_base, and GITHUB_TOKEN"),
        SourceError::Index(e) => Diagnostic::error("E-IDX-002", e.message()).with_hint(e.hint()),
    }
}

impl Installer {
    /// An installer for the current folder (`-g`: global store, no lock).
    pub fn new(cwd: &Path, global: bool) -> Result<Installer, Diagnostic> {
        let home = murmur_home()?;
        let project = find_project_root(cwd);
        if project.is_none() && !global {
            return Err(Diagnostic::error(
                "E-IO-001",
                "no project root found (no murmur.yaml in current or parent directories)",
            )
            .with_hint("use `mur install -g <ref>` to install into the global store"));
        }
        Ok(Installer {
            project_store: project.as_deref().map(Store::project),
            project,
            global,
            global_store: Store::global(&home),
            sources: SourcesConfig::load(&home)?,
            client: None,
            quiet: false,
            installed: Default::default(),
        })
    }

    fn target(&self) -> &Store {
        match (&self.project_store, self.global) {
            (Some(p), false) => p,
            _ => &self.global_store,
        }
    }

    fn client(&mut self) -> Result<&GithubClient, Diagnostic> {
        if self.client.is_none() {
            let c = GithubClient::new(&self.sources.api_base)
                .map_err(|e| Diagnostic::error("E-REG-006", e))?;
            self.client = Some(c);
        }
        Ok(self.client.as_ref().expect("set above"))
    }

    fn lock(&self) -> Result<Lock, Diagnostic> {
        match (&self.project, self.global) {
            (Some(p), false) => read_lock(p),
            _ => Ok(Lock::default()),
        }
    }

    fn source_for(&self, name: &ArtifactName, version: Option<&str>) -> Result<Source, Diagnostic> {
        let what = match version {
            Some(v) => format!("{name}@{v}"),
            None => name.to_string(),
        };
        if name.scope() == "local" {
            return Err(Diagnostic::error(
                "E-REG-001",
                format!("artifact {what} is not in the store"),
            )
            .with_hint(format!(
                "install it from its file: mur install ./{}-{}.mur.zip",
                name.name(),
                version.unwrap_or("<version>")
            )));
        }
        self.sources.source_for(name.scope()).ok_or_else(|| {
            Diagnostic::error(
                "E-REG-008",
                format!("no source serves the '{}' scope, so {what} cannot be looked up", name.scope()),
            )
            .with_hint(format!(
                "name its GitHub repository in ~/.murmur/config.yaml:\n  registry:\n    sources:\n      - repo: {}/<repo>\n        token: \"${{GITHUB_TOKEN}}\"",
                name.scope()
            ))
        })
    }

    fn check_owner(
        lock: &Lock,
        src: Option<&Source>,
        name: &ArtifactName,
        owner: u64,
        from: &str,
    ) -> Result<(), Diagnostic> {
        let hint = "the account was renamed or re-registered, or the repository changed hands; if you trust it, delete the scope's entries from murmur.lock and install again";
        if let Some(expected) = src.and_then(Source::expected_owner) {
            if expected != owner {
                return Err(Diagnostic::error(
                    "E-REG-010",
                    format!("could not resolve {name}: {from} is owned by GitHub account id {owner}, but the murmur scope belongs to account id {expected}"),
                )
                .with_hint("MUR_GITHUB_API_BASE, MUR_GITHUB_API or registry.api_base points mur at a server that is not GitHub's"));
            }
        }
        if let Some((recorded, entry)) = lock.owner_conflict(name.scope(), owner) {
            return Err(Diagnostic::error(
                "E-REG-010",
                format!("could not resolve {name}: the owner of scope '{}' has changed: {from} is now owned by GitHub account id {owner}, and murmur.lock records owner id {recorded} (entry {entry})", name.scope()),
            )
            .with_hint(hint));
        }
        Ok(())
    }

    /// Resolves `name[@version]`: target store, then the other store, then the scope's source.
    /// True when the target store or the global store holds a payload of `name@version` for
    /// this host (installing it then checks its bytes).
    pub fn holds(&self, name: &ArtifactName, version: &str) -> bool {
        [self.target(), &self.global_store].iter().any(|s| {
            s.versions(name)
                .iter()
                .any(|v| v.version == version && v.has_host_payload())
        })
    }

    async fn resolve(
        &mut self,
        name: &ArtifactName,
        version: Option<&str>,
    ) -> Result<Ready, Diagnostic> {
        let lock = self.lock()?;
        if let Some(v) = version {
            if ["latest", "stable", "edge"].contains(&v.to_ascii_lowercase().as_str()) {
                return Err(Diagnostic::error(
                    "E-REG-004",
                    format!("version '{v}' is reserved and names no single version of {name}"),
                ));
            }
            crate::manifest::names::check_version(v).map_err(|why| {
                Diagnostic::error("E-IO-003", format!("version of {name}: {why}"))
            })?;
            let mut stores: Vec<(&Store, bool)> = vec![(self.target(), true)];
            if !self.global {
                stores.push((&self.global_store, false));
            }
            for (store, in_target) in stores {
                let hit = store.get(name, v).map_err(|e| {
                    Diagnostic::error("E-REG-002", e).with_hint(format!(
                        "delete {} and install again",
                        store.version_dir(name, v).display()
                    ))
                })?;
                if let Some(s) = hit {
                    let payload = unpack(&s.bytes, &s.path.display().to_string())
                        .map_err(|e| Diagnostic::error("E-IO-003", e))?;
                    if let Some(owner) = s.meta.as_ref().and_then(|m| m.owner_id) {
                        Self::check_owner(&lock, None, name, owner, store.label())?;
                    }
                    return Ok(Ready {
                        name: name.clone(),
                        platform: s.platform.clone(),
                        from: store.label().to_string(),
                        owner_id: s.meta.and_then(|m| m.owner_id),
                        bytes: s.bytes,
                        payload,
                        in_target,
                    });
                }
            }
        } else if name.scope() == "local" || self.sources.source_for(name.scope()).is_none() {
            // No source to ask: the newest fitting version the stores hold.
            let mut best: Option<String> = None;
            for store in [self.target(), &self.global_store] {
                for sv in store.versions(name) {
                    if store_fit(store, name, &sv).is_ok()
                        && best
                            .as_ref()
                            .is_none_or(|b| compare_versions(&sv.version, b).is_gt())
                    {
                        best = Some(sv.version.clone());
                    }
                }
            }
            if let Some(v) = best {
                return Box::pin(self.resolve(name, Some(&v))).await;
            }
        }
        let src = self.source_for(name, version)?;
        let label = src.label();
        let client = self.client()?;
        let owner = client.owner_id(&src).await.map_err(reg006)?;
        Self::check_owner(&lock, Some(&src), name, owner, &label)?;
        let index = client.index(&src).await.map_err(|e| match e {
            SourceError::NotFound(s) => Diagnostic::error("E-IDX-002", s).with_hint(format!(
                "its publisher makes one with `mur index <dir> --repo {} --release <tag>` and uploads {INDEX_ASSET} to that release",
                src.repo
            )),
            other => reg006(other),
        })?;
        let art = index.artifact(name.name()).ok_or_else(|| {
            Diagnostic::error(
                "E-REG-001",
                format!("the index of {label} lists no artifact '{}'", name.name()),
            )
        })?;
        let iv = match version {
            Some(v) => {
                let iv = art.version(v).ok_or_else(|| {
                    Diagnostic::error(
                        "E-REG-001",
                        format!(
                            "the index of {label} lists no version {v} of {name}; it lists {}",
                            art.version_list().join(", ")
                        ),
                    )
                })?;
                index_fit(name, iv).map_err(|why| Diagnostic::error("E-REG-001", why))?;
                iv
            }
            None => {
                let mut vs: Vec<_> = art.versions.iter().collect();
                vs.sort_by(|a, b| compare_versions(&b.version, &a.version));
                match vs.iter().copied().find(|iv| index_fit(name, iv).is_ok()) {
                    Some(iv) => iv,
                    None => {
                        let why = vs
                            .first()
                            .map(|iv| index_fit(name, iv).err().unwrap_or_default())
                            .unwrap_or_else(|| "it lists no version".into());
                        return Err(Diagnostic::error(
                            "E-REG-001",
                            format!("no version of {name} in {label} fits this mur: {why}"),
                        ));
                    }
                }
            }
        };
        let asset = iv.host_asset().ok_or_else(|| {
            Diagnostic::error(
                "E-REG-001",
                format!(
                    "{name}@{} has no payload for {}",
                    iv.version,
                    host_platform()
                ),
            )
        })?;
        let bytes = client
            .fetch_file(&src, &iv.release, &asset.file, &asset.sha256)
            .await
            .map_err(|e| match e {
                SourceError::Integrity(d) => Diagnostic::error(
                    "E-REG-002",
                    format!(
                        "artifact integrity check failed for {name}@{}: {d}",
                        iv.version
                    ),
                ),
                other => reg006(other),
            })?;
        let payload = unpack(&bytes, &format!("{} ({label})", asset.file))
            .map_err(|e| Diagnostic::error("E-IO-003", e))?;
        if payload.manifest.version() != iv.version {
            return Err(Diagnostic::error(
                "E-REG-002",
                format!(
                    "{} ({label}) packs version {}, but its index says {}",
                    asset.file,
                    payload.manifest.version(),
                    iv.version
                ),
            ));
        }
        Ok(Ready {
            name: name.clone(),
            bytes,
            payload,
            platform: asset.platform.clone(),
            from: label,
            owner_id: Some(owner),
            in_target: false,
        })
    }

    /// Files and pins one resolved artifact; prints what happened.
    fn commit(&mut self, r: Ready) -> Result<(), Diagnostic> {
        let version = r.payload.manifest.version().to_string();
        if r.payload.manifest.name() != r.name.name() {
            return Err(Diagnostic::error(
                "E-REG-002",
                format!("artifact {}@{version} declares name '{}' in its murmur.yaml, so it cannot be filed as {}", r.name, r.payload.manifest.name(), r.name),
            )
            .with_hint(format!("install it as {}/{}", r.name.scope(), r.payload.manifest.name())));
        }
        let sha = sha256_hex(&r.bytes);
        let hash = PinHash::for_payload(&sha, r.platform.as_deref());
        let pin_project = self.project.as_ref().filter(|_| !self.global);
        if pin_project.is_some() {
            if let Some(c) = self.lock()?.conflict_with(&r.name, &version, &hash) {
                return Err(conflict(&r.name, &c));
            }
        }
        if !r.in_target {
            self.target()
                .put(
                    &r.name,
                    &r.bytes,
                    &r.payload,
                    r.platform.as_deref(),
                    r.owner_id,
                )
                .map_err(|e| Diagnostic::error("E-IO-003", e))?;
        }
        let mut adopted = None;
        if let Some(project) = pin_project {
            let pin = LockEntry {
                name: r.name.clone(),
                resolved_version: version.clone(),
                sha256: hash.clone(),
                origin: Origin::Operator,
                session: None,
                owner_id: r.owner_id,
            };
            adopted = update_lock(project, |lock| {
                if let Some(c) = lock.conflict_with(&r.name, &version, &hash) {
                    return Err(c);
                }
                Ok(lock
                    .upsert(pin)
                    .filter(|p| p.origin == Origin::Runtime)
                    .and_then(|p| p.session))
            })
            .map_err(|e| match e {
                LockUpdateError::Invalid(d) => d,
                LockUpdateError::Refused(c) => conflict(&r.name, &c),
                LockUpdateError::Write(s) => {
                    Diagnostic::error("E-IO-003", format!("failed to write murmur.lock: {s}"))
                }
            })?;
        }
        self.installed.push(serde_json::json!({
            "artifact": r.name.to_string(),
            "version": version,
            "from": r.from,
            "adopted_from_session": adopted,
        }));
        if !self.quiet {
            crate::outln!("Installed {}@{version} from {}", r.name, r.from);
            if let Some(ses) = adopted {
                crate::outln!("Adopted {}@{version} as operator-declared (it was pulled at runtime by session {ses})", r.name);
            }
        }
        Ok(())
    }

    /// Installs `scope/name[@version]`.
    pub async fn install_name(
        &mut self,
        name: &ArtifactName,
        version: Option<&str>,
    ) -> Result<(), Diagnostic> {
        let r = self.resolve(name, version).await?;
        self.commit(r)
    }

    /// Installs a `.mur.zip` file as `local/<packed name>`.
    pub fn install_file(&mut self, path: &Path) -> Result<(), Diagnostic> {
        let bytes = crate::files::read_capped(path, crate::files::ARCHIVE_CAP).map_err(|e| {
            let code = if e.not_found() {
                "E-IO-001"
            } else {
                "E-IO-003"
            };
            Diagnostic::error(code, format!("cannot read {}: {e}", path.display()))
        })?;
        let payload = unpack(&bytes, &path.display().to_string())
            .map_err(|e| Diagnostic::error("E-IO-003", e))?;
        let name = ArtifactName::from_parts("local", payload.manifest.name()).map_err(|e| {
            Diagnostic::error("E-BLD-001", format!("{}: {}", path.display(), e.message))
        })?;
        let platform = platform_of_file(path.file_name().and_then(|f| f.to_str()).unwrap_or(""));
        self.commit(Ready {
            name,
            bytes,
            payload,
            platform,
            from: path.display().to_string(),
            owner_id: None,
            in_target: false,
        })
    }

    /// Installs every `.mur.zip` asset of `github:<owner>/<repo>@<tag>`.
    pub async fn install_github(
        &mut self,
        owner: &str,
        repo: &str,
        tag: &str,
    ) -> Result<usize, Diagnostic> {
        let src = self.sources.source_for_repo(owner, repo);
        if src.scope != "murmur"
            && (src.scope == "local"
                || crate::manifest::names::check_name_part(&src.scope).is_err())
        {
            return Err(Diagnostic::error(
                "E-REG-007",
                format!("github:{owner}/{repo}: the owner '{owner}' cannot be a scope (reserved or not a valid name)"),
            ));
        }
        if src.scope == "murmur"
            && !src
                .repo
                .eq_ignore_ascii_case(super::config::MURMUR_SCOPE_REPO)
        {
            return Err(Diagnostic::error("E-REG-007", format!("github:{owner}/{repo}: the scope 'murmur' is reserved for murmur-nexus/default-artifacts")));
        }
        let lock = self.lock()?;
        let label = src.label();
        let client = self.client()?;
        let owner_id = client.owner_id(&src).await.map_err(reg006)?;
        let release = client.release(&src, Some(tag)).await.map_err(reg006)?;
        let digests = match release.assets.iter().find(|a| a.name == INDEX_ASSET) {
            Some(a) => {
                // A release install takes the release's assets as they are; an index this mur
                // cannot read (schema 1, as real releases carry) only adds no digests to check.
                let b = client.download(&src, a).await.map_err(reg006)?;
                parse_index(&b, &format!("{label} (release {tag})")).ok()
            }
            None => None,
        };
        let host = host_platform();
        let mut picked: Vec<&super::github::ReleaseAsset> = Vec::new();
        for a in release
            .assets
            .iter()
            .filter(|a| a.name.ends_with(".mur.zip"))
        {
            match platform_of_file(&a.name) {
                Some(p) if p != host => continue,
                _ => picked.push(a),
            }
        }
        // Prefer the host-tagged file over the untagged one of the same artifact.
        let names: Vec<String> = picked.iter().map(|a| a.name.clone()).collect();
        picked.retain(|a| {
            platform_of_file(&a.name).is_some()
                || !names.contains(&a.name.replace(".mur.zip", &format!("-{host}.mur.zip")))
        });
        if picked.is_empty() {
            return Err(Diagnostic::error(
                "E-REG-001",
                format!("{label} release {tag} has no .mur.zip asset for {host}"),
            ));
        }
        let mut ready = Vec::new();
        for a in picked {
            let bytes = client.download(&src, a).await.map_err(reg006)?;
            let sha = sha256_hex(&bytes);
            let recorded = digests
                .as_ref()
                .and_then(|i| {
                    i.artifacts
                        .iter()
                        .flat_map(|x| &x.versions)
                        .flat_map(|v| &v.assets)
                        .find(|x| x.file == a.name)
                })
                .map(|x| x.sha256.to_ascii_lowercase());
            if recorded.as_ref().is_some_and(|r| *r != sha) {
                return Err(Diagnostic::error("E-REG-002", format!("artifact integrity check failed for {} ({label}): the bytes do not match the sha256 its index records", a.name)));
            }
            let payload = unpack(&bytes, &format!("{} ({label})", a.name))
                .map_err(|e| Diagnostic::error("E-IO-003", e))?;
            let name = ArtifactName::from_parts(&src.scope, payload.manifest.name())
                .map_err(|e| Diagnostic::error("E-REG-007", e.message))?;
            Self::check_owner(&lock, Some(&src), &name, owner_id, &label)?;
            ready.push(Ready {
                name,
                bytes,
                payload,
                platform: platform_of_file(&a.name),
                from: label.clone(),
                owner_id: Some(owner_id),
                in_target: false,
            });
        }
        ready.sort_by(|a, b| a.name.cmp(&b.name));
        let n = ready.len();
        for r in ready {
            self.commit(r)?;
        }
        Ok(n)
    }
}

fn conflict(name: &ArtifactName, c: &str) -> Diagnostic {
    Diagnostic::error(
        "E-REG-005",
        format!("murmur.lock conflict for '{name}': {c}"),
    )
    .with_hint(
        "for an intentional upgrade, remove the stale entry from murmur.lock and install again",
    )
}
