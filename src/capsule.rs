//! Turning a loaded manifest into a [`SessionSpec`]: the one place that decides what a capsule
//! runs with, for the root session of `mur run` and for delegated children alike.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use mur_actors::gate::CallGate;
use mur_actors::model::ModelDriver;
use mur_actors::provided;
use mur_actors::registry::ArtifactSource;
use mur_actors::spec::{Grants, SessionPaths, SessionSpec, SpawnedBy};
use mur_actors::tool::{ToolDecl, ToolKind};

use crate::artifact;
use crate::contain;
use crate::diagnostic::Diagnostic;
use crate::drivers::script::ScriptDriver;
use crate::manifest::{self, BuiltinDriver, LoadedManifest, Manifest};
use crate::tools::hooks::{HookGate, PolicyHook};

/// Default output cap per model call when `inference.max_tokens` is absent.
pub const DEFAULT_MAX_TOKENS: u32 = 8192;

/// Where a session's files go, and who started it.
#[derive(Clone, Debug)]
pub struct Placement {
    /// `ses_…`.
    pub session_id: String,
    /// Work and records folders.
    pub paths: SessionPaths,
    /// Depth in the delegation tree.
    pub depth: u32,
    /// Set for children.
    pub spawned_by: Option<SpawnedBy>,
    /// The containment floor from outside the manifest: `--containment` for the root, the
    /// parent's floor for a child.
    pub floor: Option<contain::Level>,
    /// The runtime made the work folder (not `--workdir`).
    pub owns_workdir: bool,
}

/// Where records of sessions run with `--workdir D` go: `~/.murmur/records/<D>/` (the absolute
/// path of `D` mirrored below it), outside the tree their commands may write.
pub fn records_root_for(workdir: &Path) -> Option<PathBuf> {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
    let rel = workdir.strip_prefix("/").unwrap_or(workdir);
    Some(PathBuf::from(home).join(".murmur/records").join(rel))
}

impl Placement {
    /// The root session's folders. By default the work folder is `<manifest dir>/workdir/<ses>/`
    /// and records go to `<manifest dir>/workdir/.murmur/<ses>/`, beside it. With `--workdir D`
    /// the work folder is `D` and records go to `~/.murmur/records/<D>/<ses>/` (or, when that
    /// lies inside `D` or there is no `HOME`, to `D/.murmur/<ses>/`, which caps containment at
    /// advisory). Records are never inside a tree a command may write.
    pub fn root(manifest_dir: &Path, workdir: Option<&Path>) -> Placement {
        let session_id = mur_actors::ids::session_id();
        let paths = match workdir {
            Some(d) => {
                let records_dir = records_root_for(d)
                    .filter(|r| !r.starts_with(d))
                    .unwrap_or_else(|| d.join(".murmur"))
                    .join(&session_id);
                SessionPaths {
                    workdir: d.to_path_buf(),
                    records_dir,
                }
            }
            None => {
                let base = manifest_dir.join("workdir");
                SessionPaths {
                    workdir: base.join(&session_id),
                    records_dir: base.join(".murmur").join(&session_id),
                }
            }
        };
        Placement {
            session_id,
            paths,
            depth: 0,
            spawned_by: None,
            floor: None,
            owns_workdir: workdir.is_none(),
        }
    }
}

/// The grants a manifest declares, in the kernel's terms.
pub fn grants(m: &Manifest) -> Grants {
    let caps = &m.capabilities;
    Grants {
        shell_allow: m.shell_binaries().to_vec(),
        spawn_allow: caps
            .spawn
            .as_ref()
            .map(|s| s.allow.iter().map(|n| n.to_string()).collect())
            .unwrap_or_default(),
        plan_submit: caps.plan_submit(),
        peer_fetch_allow: caps
            .peer_fetch
            .as_ref()
            .map(|p| p.allow.clone())
            .unwrap_or_default(),
        peer_files_export: m.exports.as_ref().is_some_and(|e| e.peer_files.is_some()),
        install: caps.install.is_some(),
        network_allow: caps
            .network
            .as_ref()
            .map(|n| n.allow.clone())
            .unwrap_or_default(),
        install_tool: caps
            .install
            .as_ref()
            .map(|i| i.tool.iter().map(|p| p.to_string()).collect())
            .unwrap_or_default(),
        install_skill: caps
            .install
            .as_ref()
            .map(|i| i.skill.iter().map(|p| p.to_string()).collect())
            .unwrap_or_default(),
        install_sources: caps.install.as_ref().is_some_and(|i| i.from_sources()),
        workdir_exec: caps.filesystem.as_ref().is_some_and(|f| f.workdir_exec),
        unix_sockets: caps.network.as_ref().is_some_and(|n| n.unix_sockets),
        containment_floor: None,
    }
}

/// Build the model driver the manifest names.
pub fn driver(loaded: &LoadedManifest) -> Result<Arc<dyn ModelDriver>, Diagnostic> {
    let m = &loaded.manifest;
    let Some(decl) = m.driver() else {
        return Err(Diagnostic::error(
            "E-MAN-003",
            format!(
                "{}: invalid inference config for 'inference': a capsule needs an inference block naming a driver to run",
                loaded.path.display()
            ),
        )
        .with_hint("add inference: {transport: http, model: …, driver: {artifact: mur/driver-script}} and declare the driver in artifacts:"));
    };
    match decl.builtin_driver() {
        Some(BuiltinDriver::Script) => {
            let Some(rel) = decl.script_path() else {
                return Err(Diagnostic::error(
                    "E-MAN-003",
                    format!(
                        "{}: invalid artifact config for 'artifacts[{}].config.script': the scripted driver needs the path of its script",
                        loaded.path.display(),
                        decl.index
                    ),
                )
                .with_hint("add config: {script: script.yaml} to the mur/driver-script entry"));
            };
            let path = loaded.resolve(&rel);
            let driver = ScriptDriver::from_file(&path).map_err(|e| {
                Diagnostic::error("E-IO-001", e).with_hint(format!(
                    "artifacts[{}].config.script names it; see docs/scripted-model.md for the format",
                    decl.index
                ))
            })?;
            Ok(Arc::new(driver))
        }
        Some(BuiltinDriver::Anthropic) | Some(BuiltinDriver::OpenAi) => http_driver(loaded, decl),
        None => Err(Diagnostic::error(
            "E-RUN-006",
            format!(
                "driver '{}' is not built into mur; mur runs {}",
                decl.name,
                BuiltinDriver::NAMES.join(", ")
            ),
        )),
    }
}

/// Build `murmur/driver-anthropic` or `murmur/driver-openai` from the manifest: the endpoint
/// and key from the entry's `gateway:` (`${NAME}` from the environment or `.env`), retries from
/// `inference.retry`, provider options from `inference.driver.config`.
fn http_driver(
    loaded: &LoadedManifest,
    decl: &manifest::ArtifactDecl,
) -> Result<Arc<dyn ModelDriver>, Diagnostic> {
    let m = &loaded.manifest;
    let inference = m.inference.as_ref().expect("a driver implies inference");
    let Some(gateway) = &decl.gateway else {
        return Err(Diagnostic::error(
            "E-CAP-018",
            format!(
                "{}: artifact '{}' needs a gateway: with an endpoint and an api_key (or keyless: true)",
                loaded.path.display(),
                decl.name
            ),
        ));
    };
    let api_key = manifest::env::resolve_gateway_key(decl, &loaded.dir)?;
    let mut cfg =
        crate::drivers::HttpDriverConfig::new(decl.name.as_str(), &gateway.endpoint, api_key);
    cfg.retry = crate::drivers::RetryPolicy {
        max_retries: inference.retry.max_retries,
        initial_delay_ms: inference.retry.initial_delay_ms,
        max_delay_ms: inference.retry.max_delay_ms,
    };
    let mut options = inference.driver_config.clone();
    // Timeouts are the runtime's, not the provider's: take them out before the driver checks
    // its own keys.
    if let Some(map) = options.as_object_mut() {
        for (key, slot) in [
            ("connect_timeout_secs", &mut cfg.connect_timeout),
            ("request_timeout_secs", &mut cfg.request_timeout),
        ] {
            if let Some(v) = map.remove(key) {
                match v.as_u64().filter(|n| *n > 0) {
                    Some(n) => *slot = std::time::Duration::from_secs(n),
                    None => {
                        return Err(Diagnostic::error(
                            "E-MAN-003",
                            format!(
                                "{}: invalid inference config for 'inference.driver.config.{key}': must be a positive number of seconds",
                                loaded.path.display()
                            ),
                        ))
                    }
                }
            }
        }
    }
    if !options.is_null() && options.as_object().is_none_or(|m| !m.is_empty()) {
        cfg.driver_config = Some(options);
    }
    let built = match decl.builtin_driver() {
        Some(BuiltinDriver::Anthropic) => crate::drivers::anthropic(cfg),
        _ => crate::drivers::openai(cfg),
    };
    built.map_err(|e| Diagnostic::error("E-MAN-003", format!("{}: {e}", loaded.path.display())))
}

/// Everything `mur run` (or a delegation) needs to start this capsule, and the warnings the
/// launch decided (containment: W-SEC-005, W-SEC-009, W-SEC-011) for the caller to print.
pub fn session_spec(
    loaded: &LoadedManifest,
    task: String,
    place: Placement,
) -> Result<(SessionSpec, Vec<Diagnostic>), Diagnostic> {
    check_launchable(loaded)?;
    let driver = driver(loaded)?;
    session_spec_with(loaded, driver, task, place)
}

/// What stops a valid manifest from starting here: a transport or driver `mur` does not run.
/// (Declared artifacts that are not installed are found when they are staged: `E-RUN-008`.)
pub fn check_launchable(loaded: &LoadedManifest) -> Result<(), Diagnostic> {
    let m = &loaded.manifest;
    if let Some(problem) = m.launch_problems().into_iter().next() {
        return Err(problem);
    }
    Ok(())
}

/// [`session_spec`] with a driver already built (delegations reuse one per capsule).
pub fn session_spec_with(
    loaded: &LoadedManifest,
    driver: Arc<dyn ModelDriver>,
    task: String,
    place: Placement,
) -> Result<(SessionSpec, Vec<Diagnostic>), Diagnostic> {
    let m = &loaded.manifest;
    let Some(inference) = m.inference.as_ref() else {
        return Err(Diagnostic::error(
            "E-MAN-003",
            format!(
                "{}: invalid inference config for 'inference': a capsule needs an inference block to run",
                loaded.path.display()
            ),
        ));
    };
    let (operator_prompt, source) = system_prompt(loaded)?;
    let mut grants = grants(m);
    // Containment is decided before anything is staged: a refusal leaves nothing behind.
    let decision = contain::decide::decide(
        m,
        &loaded.path,
        &place.paths.workdir,
        &place.paths.records_dir,
        place.floor,
    )?;
    let policy = decision.policy;
    grants.containment_floor = Some(policy.declared.as_str().to_string());
    let containment = mur_actors::spec::ContainmentFacts {
        declared: policy.declared.as_str().into(),
        achieved: policy.achieved.as_str().into(),
        workdir_exec: policy.workdir_exec,
    };
    let sandbox = Arc::new(contain::Sandbox::new(
        policy,
        place.paths.workdir.clone(),
        contain::scratch_dir(&place.session_id),
    ));
    // Declared artifacts, checked against their pins and extracted into the session's tools/.
    let staged = artifact::stage_declared(loaded, &place.paths.records_dir)?;
    let mut tools: Vec<ToolDecl> = provided::provided_tools(&grants)
        .into_iter()
        // An artifact named like a shell binary wins: the shell manifest yields.
        .filter(|p| !staged.tools.iter().any(|t| t.name == p.name))
        .collect();
    tools.extend(staged.tools.iter().cloned());
    let http = inference.transport == manifest::Transport::Http;
    let artifacts: Option<Arc<dyn ArtifactSource>> = match &m.capabilities.install {
        Some(install) if http => {
            tools.push(artifact::pull_tool_decl(install));
            tools.push(artifact::remove_tool_decl(install));
            Some(Arc::new(pull_service(loaded)?))
        }
        _ => None,
    };
    let gate = policy_gate(&staged, &grants, &place.paths, &sandbox);
    let mut executors = crate::tools::executors(m.capabilities.limits.deadline(), sandbox);
    let peer =
        crate::peer::peer_executors(m, &place.session_id, &place.paths.workdir).map_err(|e| {
            Diagnostic::error(
                "E-RUN-001",
                format!("cannot draw the key that signs peer-file handles: {e}"),
            )
        })?;
    executors.runtime.extend(peer);
    let spec = SessionSpec {
        session_id: place.session_id,
        capsule_name: m.name.clone(),
        capsule_version: m.version.clone(),
        model: inference.model.clone(),
        driver,
        max_turns: inference.max_turns,
        max_tokens: inference.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        operator_prompt,
        system_prompt_source: source,
        tools,
        grants,
        task,
        paths: place.paths,
        executors,
        capture: m.trace.capture,
        tool_refresh: match inference.tool_refresh {
            manifest::ToolRefresh::Immediate => "immediate".into(),
            _ => "compaction".into(),
        },
        spawned_by: place.spawned_by,
        depth: place.depth,
        delegation_deadline: Duration::from_secs(m.lifecycle.delegation_deadline_secs),
        gate,
        artifacts,
        containment,
        owns_workdir: place.owns_workdir,
        continuation: Default::default(),
    };
    Ok((spec, decision.warnings))
}

/// The capsule's pull service (`pull-artifact`, `remove-artifact`), its pulled tools run
/// under `capabilities.limits.deadline_seconds`.
pub fn pull_service(loaded: &LoadedManifest) -> Result<artifact::PullService, Diagnostic> {
    Ok(artifact::PullService::for_manifest(loaded)?
        .with_deadline(loaded.manifest.capabilities.limits.deadline()))
}

/// The gate of the capsule's policy hooks (`commit_policy: deny`), if it declares any.
fn policy_gate(
    staged: &artifact::StagedArtifacts,
    grants: &Grants,
    paths: &SessionPaths,
    sandbox: &Arc<contain::Sandbox>,
) -> Option<Arc<dyn CallGate>> {
    let hooks: Vec<PolicyHook> = staged
        .hooks
        .iter()
        .filter(|h| h.commit_policy == "deny")
        // Staging refused every other hook (`ArtifactManifest::unsupported`), so each one
        // here is a deny hook bound to calls.
        .map(|h| PolicyHook {
            name: h.name.clone(),
            entrypoint: h.entrypoint.clone(),
            on_tool_call: h.bindings.iter().any(|b| b == "on-tool-call"),
            on_shell: h.bindings.iter().any(|b| b == "on-shell"),
        })
        .filter(|h| h.on_tool_call || h.on_shell)
        .collect();
    if hooks.is_empty() {
        return None;
    }
    Some(Arc::new(HookGate {
        hooks,
        shell_allow: grants.shell_allow.clone(),
        native_tools: staged
            .tools
            .iter()
            .filter(|t| matches!(t.kind, ToolKind::Native { .. }))
            .map(|t| t.name.clone())
            .collect(),
        workdir: paths.workdir.clone(),
        records_dir: paths.records_dir.clone(),
        sandbox: sandbox.clone(),
    }))
}

/// The operator's system prompt and where it came from (`manifest` or `none`).
fn system_prompt(loaded: &LoadedManifest) -> Result<(Option<String>, &'static str), Diagnostic> {
    let Some(inf) = loaded.manifest.inference.as_ref() else {
        return Ok((None, "none"));
    };
    if let Some(text) = &inf.system_prompt {
        return Ok((Some(text.clone()), "manifest"));
    }
    if let Some(rel) = &inf.system_prompt_file {
        let path: PathBuf = loaded.resolve(rel);
        let text = crate::files::read_text(&path, crate::files::TEXT_CAP).map_err(|e| {
            Diagnostic::error(
                if e.not_found() {
                    "E-IO-001"
                } else {
                    "E-IO-003"
                },
                format!(
                    "{}: inference.system_prompt_file names {}, which cannot be read: {e}",
                    loaded.path.display(),
                    path.display()
                ),
            )
        })?;
        return Ok((Some(text), "manifest"));
    }
    Ok((None, "none"))
}
