//! Staging artifacts into a session's folder at launch, and locating capsule artifacts for
//! delegation.
//!
//! Every declared tool, skill and hook (not the built-in drivers, not `source:` skills) must be
//! in a store at its declared version; its bytes are checked against the `murmur.lock` pin when
//! there is one, and it is extracted into `<records>/tools/<tool name>/`. Everything is resolved
//! and checked before anything is extracted, so a launch that fails leaves no half-staged
//! folder. Reserved tool names are refused first, before anything is resolved.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use mur_actors::tool::{ToolDecl, ToolOrigin};

use super::config::murmur_home;
use super::decls::tool_decl_for;
use super::lock::{read_lock, Origin, PinHash};
use super::payload::{unpack, PackedManifest, Payload};
use super::pull::reserved_sentence;
use super::store::Store;
use crate::diagnostic::Diagnostic;
use crate::manifest::{
    is_reserved_tool_name, ArtifactDecl, ArtifactName, ArtifactRuntime, LoadedManifest,
};

/// A hook staged for the session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StagedHook {
    /// Full name.
    pub name: String,
    /// The staged program (`tools/<name>/bin/<name>`).
    pub entrypoint: PathBuf,
    /// Events it is bound to (`on-tool-call`, `on-shell`).
    pub bindings: Vec<String>,
    /// Its `commit_policy` (`deny`: staging refuses the others).
    pub commit_policy: String,
}

/// What [`stage_declared`] staged.
#[derive(Clone, Debug, Default)]
pub struct StagedArtifacts {
    /// Tools and skills the model is offered.
    pub tools: Vec<ToolDecl>,
    /// Hooks the runtime calls.
    pub hooks: Vec<StagedHook>,
}

/// Extracts `payload` into `<records>/tools/<tool name>/` (built beside it and renamed in,
/// replacing an older copy). Returns the folder.
pub fn stage_payload(
    records_dir: &Path,
    name: &ArtifactName,
    payload: &Payload,
) -> std::io::Result<PathBuf> {
    let tools = records_dir.join("tools");
    std::fs::create_dir_all(&tools)?;
    let dest = tools.join(name.tool_name());
    let tmp = tools.join(format!(
        ".tmp-{}-{}",
        name.tool_name(),
        uuid::Uuid::now_v7().simple()
    ));
    if let Err(e) = payload.extract_to(&tmp) {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    if dest.exists() {
        std::fs::remove_dir_all(&dest)?;
    }
    std::fs::rename(&tmp, &dest).inspect_err(|_| {
        let _ = std::fs::remove_dir_all(&tmp);
    })?;
    Ok(dest)
}

/// A declared artifact found in a store, its bytes checked against the lock.
type Resolved<'a> = (&'a ArtifactDecl, Payload, ToolOrigin);

/// Checks, without staging anything, what [`stage_declared`] checks: every declared artifact
/// is in a store at its version, matches its pin, and is one this runtime can run. `mur doctor`
/// reports what this finds.
pub fn check_declared(loaded: &LoadedManifest) -> Result<(), Diagnostic> {
    resolve_declared(loaded).map(|_| ())
}

/// Stages every declared tool, skill and hook of `loaded` into `records_dir`.
pub fn stage_declared(
    loaded: &LoadedManifest,
    records_dir: &Path,
) -> Result<StagedArtifacts, Diagnostic> {
    let resolved = resolve_declared(loaded)?;
    let m = &loaded.manifest;
    let deadline = m.capabilities.limits.deadline();
    let mut out = StagedArtifacts::default();
    for (a, payload, origin) in resolved {
        let dir = stage_payload(records_dir, &a.name, &payload).map_err(|e| {
            Diagnostic::error(
                "E-IO-002",
                format!(
                    "cannot stage {} into {}: {e}",
                    a.name,
                    records_dir.join("tools").display()
                ),
            )
        })?;
        let PackedManifest::Artifact(am) = &payload.manifest else {
            continue;
        };
        if a.runtime == ArtifactRuntime::Hook || am.runtime == ArtifactRuntime::Hook {
            out.hooks.push(StagedHook {
                name: a.name.to_string(),
                entrypoint: dir.join(payload.native_entry()),
                bindings: am.binding.iter().map(|b| b.as_str().to_string()).collect(),
                commit_policy: am.commit_policy.as_str().to_string(),
            });
        } else if let Some(t) = tool_decl_for(&a.name, &payload, &dir, origin, deadline) {
            out.tools.push(t);
        }
    }
    Ok(out)
}

/// Finds every declared artifact in the stores and checks it; nothing is written.
fn resolve_declared(loaded: &LoadedManifest) -> Result<Vec<Resolved<'_>>, Diagnostic> {
    let m = &loaded.manifest;
    for a in &m.artifacts {
        if is_reserved_tool_name(a.tool_name()) {
            return Err(
                Diagnostic::error("E-CAP-013", reserved_sentence(&a.name)).with_hint(
                    "rename the artifact, or drop it if the runtime's own tool is what you wanted",
                ),
            );
        }
    }
    let wanted: Vec<_> = m
        .installable_artifacts()
        .filter(|a| a.runtime != ArtifactRuntime::Driver)
        .collect();
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let project = &loaded.dir;
    let home = murmur_home()?;
    let stores = [Store::project(project), Store::global(&home)];
    // What each store holds, listed once: a manifest declaring thousands of artifacts costs
    // two folder listings, not a failed open per artifact and store.
    let held: Vec<std::collections::HashSet<ArtifactName>> = stores
        .iter()
        .map(|s| s.names().into_iter().collect())
        .collect();
    let lock = read_lock(project)?;
    let system_prompt = m
        .inference
        .as_ref()
        .and_then(|i| i.system_prompt_artifact.as_ref());

    let mut missing = Vec::new();
    let mut resolved = Vec::new();
    for a in wanted {
        let (name, version) = (&a.name, &a.version);
        let pin = lock.entry(name);
        if let Some(p) = pin.filter(|p| p.origin == Origin::Runtime) {
            let role = if matches!(a.runtime, ArtifactRuntime::Hook | ArtifactRuntime::Driver) {
                Some(format!("runtime: {}", a.runtime))
            } else if a.gateway.is_some() {
                Some("a gateway: block".to_string())
            } else if system_prompt == Some(name) {
                Some("inference.system_prompt_artifact".to_string())
            } else {
                None
            };
            if let Some(role) = role {
                return Err(Diagnostic::error(
                    "E-RUN-043",
                    format!(
                        "murmur.lock pins '{name}@{}' from a runtime pull by session {}, and murmur.yaml declares it with {role}, which only an operator-declared pin may carry",
                        p.resolved_version,
                        p.session.as_deref().unwrap_or("?")
                    ),
                )
                .with_hint(format!("run `mur install {name}@{}` to adopt the pin as operator-declared", p.resolved_version)));
            }
        }
        if let Some(p) = pin.filter(|p| &p.resolved_version != version) {
            return Err(Diagnostic::error(
                "E-RUN-003",
                format!(
                    "murmur.lock pins '{name}@{}', but murmur.yaml declares {name}@{version}",
                    p.resolved_version
                ),
            )
            .with_hint(format!(
                "run `mur install` to pin {name}@{version}, or declare the pinned version"
            )));
        }
        let mut found = None;
        for (store, held) in stores.iter().zip(&held) {
            if !held.contains(name) {
                continue;
            }
            match store.get(name, version) {
                Ok(Some(s)) => {
                    found = Some(s);
                    break;
                }
                Ok(None) => {}
                Err(e) => {
                    return Err(Diagnostic::error("E-REG-002", e).with_hint(
                        "the store copy is damaged: run `mur install` to fetch it again",
                    ))
                }
            }
        }
        let Some(stored) = found else {
            missing.push(format!("{name}@{version}"));
            continue;
        };
        if let Some(p) = pin {
            match p.sha256.hash_for(stored.platform.as_deref()) {
                Some(h) if h == stored.sha256 => {}
                Some(_) => return Err(Diagnostic::error(
                    "E-REG-002",
                    format!("artifact integrity check failed for {name}@{version}"),
                )
                .with_hint(
                    "artifact on disk does not match murmur.lock — re-publish or delete the lock",
                )),
                None => {
                    let tags = match &p.sha256 {
                        PinHash::Any(_) => "a platform-independent payload".to_string(),
                        PinHash::Platforms(m) => m
                            .iter()
                            .map(|(k, _)| k.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    };
                    return Err(Diagnostic::error(
                        "E-RUN-003",
                        format!(
                            "murmur.lock has no sha256 for '{name}' on platform {} — it pins {tags}",
                            stored.platform.as_deref().unwrap_or("any")
                        ),
                    )
                    .with_hint("run `mur install` on this host"));
                }
            }
        }
        let payload = unpack(&stored.bytes, &stored.path.display().to_string())
            .map_err(|e| Diagnostic::error("E-IO-003", e))?;
        if payload.manifest.name() != name.name() || payload.manifest.version() != version {
            return Err(Diagnostic::error(
                "E-REG-002",
                format!(
                    "{} packs '{}@{}', not {}@{version}",
                    stored.path.display(),
                    payload.manifest.name(),
                    payload.manifest.version(),
                    name.name()
                ),
            ));
        }
        let origin = match pin.map(|p| p.origin) {
            Some(Origin::Runtime) => ToolOrigin::Pulled,
            _ => ToolOrigin::Operator,
        };
        resolved.push((a, payload, origin));
    }
    let unsupported: Vec<String> = resolved
        .iter()
        .filter_map(|(a, payload, _)| {
            let why = match &payload.manifest {
                PackedManifest::Artifact(am) => am.unsupported()?,
                PackedManifest::Capsule(_) => "it packs a capsule, which is delegated to through capabilities.spawn.allow, not declared in artifacts:".to_string(),
            };
            Some(format!("{}@{} ({}): {why}", a.name, a.version, payload.manifest.role()))
        })
        .collect();
    if !unsupported.is_empty() {
        return Err(Diagnostic::error(
            "E-RUN-061",
            format!(
                "murmur.yaml declares {} this mur cannot run, and a declared artifact is never skipped: {}",
                if unsupported.len() == 1 { "an artifact" } else { "artifacts" },
                unsupported.join("; ")
            ),
        )
        .with_hint("remove the entry from artifacts:, or replace it with a native build of the same artifact"));
    }
    if !missing.is_empty() {
        return Err(Diagnostic::error(
            "E-RUN-008",
            format!("missing artifacts: {}", missing.join(", ")),
        )
        .with_hint("run `mur install` to install all manifest dependencies"));
    }
    Ok(resolved)
}

type CapsuleKey = (PathBuf, String, String);

fn capsule_cache() -> &'static Mutex<HashMap<CapsuleKey, PathBuf>> {
    static CACHE: OnceLock<Mutex<HashMap<CapsuleKey, PathBuf>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The folder holding the extracted `murmur.yaml` of capsule artifact `name@version`, from the
/// project store or the global store. Extracted once per content hash under
/// `<project>/.murmur/capsules/<scope>/<name>/<version>-<sha>/` and remembered in-process, so
/// thousands of delegations to one capsule extract (and hash) it once.
pub fn find_capsule(
    project_dir: &Path,
    name: &ArtifactName,
    version: &str,
) -> Result<PathBuf, String> {
    let key = (
        project_dir.to_path_buf(),
        name.to_string(),
        version.to_string(),
    );
    if let Some(p) = capsule_cache()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&key)
    {
        if p.join("murmur.yaml").is_file() {
            return Ok(p.clone());
        }
    }
    let stored = stored_capsule(project_dir, name, version)?;
    let dest = project_dir
        .join(".murmur")
        .join("capsules")
        .join(name.scope())
        .join(name.name())
        .join(format!("{version}-{}", &stored.sha256[..16]));
    extract_capsule(
        &stored.bytes,
        &format!("{name}@{version}"),
        &stored.path.display().to_string(),
        &dest,
    )?;
    capsule_cache()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key, dest.clone());
    Ok(dest)
}

/// The stored `.mur.zip` of capsule artifact `name@version` (project store first, then the
/// global one), its bytes checked against the sha256 its store records: what `mur run --nodes`
/// sends to a node, with that hash as the pin the node checks.
pub fn stored_capsule(
    project_dir: &Path,
    name: &ArtifactName,
    version: &str,
) -> Result<super::store::Stored, String> {
    let home = murmur_home().map_err(|d| d.message)?;
    let stores = [Store::project(project_dir), Store::global(&home)];
    for s in &stores {
        if let Some(hit) = s.get(name, version)? {
            return Ok(hit);
        }
    }
    Err(format!("capsule {name}@{version} is in neither the project store nor the global store; install it with `mur install {name}@{version}`"))
}

/// Extract capsule archive `bytes` (`what`, read from `origin`) into `dest`, unless a
/// `murmur.yaml` is there already: through a temporary sibling and a rename, so a second
/// process extracting the same capsule keeps the first one's folder.
pub fn extract_capsule(bytes: &[u8], what: &str, origin: &str, dest: &Path) -> Result<(), String> {
    if dest.join("murmur.yaml").is_file() {
        return Ok(());
    }
    let payload = unpack(bytes, origin)?;
    if !matches!(payload.manifest, PackedManifest::Capsule(_)) {
        return Err(format!(
            "{what} is a {} artifact, not a capsule",
            payload.manifest.role()
        ));
    }
    let parent = dest.parent().unwrap_or(dest);
    std::fs::create_dir_all(parent)
        .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    let tmp = parent.join(format!(".tmp-{}", uuid::Uuid::now_v7().simple()));
    payload
        .extract_to(&tmp)
        .map_err(|e| format!("cannot extract {what} into {}: {e}", tmp.display()))?;
    if std::fs::rename(&tmp, dest).is_err() {
        // Another process extracted it first: keep theirs.
        let _ = std::fs::remove_dir_all(&tmp);
        if !dest.join("murmur.yaml").is_file() {
            return Err(format!("cannot extract {what} into {}", dest.display()));
        }
    }
    Ok(())
}
