//! `mur resume SESSION`: continue a session that ended `failed` or `canceled`, or was killed
//! and has no `session_end`, from its last complete turn.
//!
//! Id policy: a resume is a new session (a new `ses_…`, its own records folder and trace) whose
//! `session_start` says `resumed_from: <old id>` and carries `resumed_totals`, the counters it
//! starts from; its `session_end` totals add up both. The old trace is never written again, so
//! a resume can itself be resumed, and a recorded session stays what it was. The work folder is
//! the old session's: the files its finished turns made are where its conversation says.
//!
//! The conversation is rebuilt from the trace ([`seed`]); the kernel starts from it
//! ([`mur_actors::continuation::Seed`]): calls whose result was not recorded run first, then
//! delegations whose outcome the model never read are delegated again (a
//! `delegation_restarted` line says so), then the next model call goes out, live.

pub mod seed;

use std::path::PathBuf;
use std::sync::Arc;

use mur_actors::supervisor::{SupervisorArgs, DEFAULT_MAX_CHILDREN, DEFAULT_MAX_DEPTH};

use crate::capsule::{self, Placement};
use crate::children::ManifestResolver;
use crate::diagnostic::Diagnostic;
use crate::launch::{self, Header};
use crate::manifest;
use crate::replay::{self, refuse};

/// What `mur resume` does, one line: its description in `mur --help` and in its own help.
/// (`mur`'s subcommands are built lazily, so the command and its options both carry it.)
pub const ABOUT: &str = "Continue a session that failed, was canceled or was killed, from its last complete turn (needs trace.capture: content)";

/// Options of `mur resume`.
#[derive(Debug, Clone, clap::Args)]
#[command(about = ABOUT)]
pub struct ResumeArgs {
    /// Session address: none (newest), @N, 4+ trailing id characters, full id, or a trace.jsonl path.
    pub session: Option<String>,
    /// The folder the session was run in (as `mur run --workdir D`, or ./workdir).
    #[arg(long, value_name = "D")]
    pub workdir: Option<PathBuf>,
    /// The capsule's manifest (default ./murmur.yaml, or a folder holding one).
    #[arg(long, value_name = "PATH")]
    pub manifest: Option<PathBuf>,
    /// Resume even though the manifest's grants, driver or tools changed since the session ran.
    #[arg(long)]
    pub force: bool,
    /// Print the workdir, manifest and driver lines.
    #[arg(short, long)]
    pub verbose: bool,
    /// Print one JSON object when the run ends instead of the status lines.
    #[arg(long)]
    pub json: bool,
}

/// Run `mur resume`; returns the exit code.
pub async fn run(args: ResumeArgs) -> i32 {
    match resume(&args).await {
        Ok(code) => code,
        Err(d) => {
            if args.json {
                crate::outln!(
                    "{}",
                    serde_json::json!({"status": "failed", "diagnostics": [d.to_json()]})
                );
            } else {
                crate::outln!("status:  failed");
            }
            crate::errln!("{d}");
            1
        }
    }
}

async fn resume(args: &ResumeArgs) -> Result<i32, Diagnostic> {
    let rec = replay::open(args.session.as_deref(), args.workdir.as_ref())?;
    refuse::needs_content(&rec, "resume")?;
    if let Some(parent) = rec.start.get("spawned_by").and_then(|v| v.as_str()) {
        return Err(Diagnostic::error(
            "E-RPL-003",
            format!(
                "session {} is a delegated child of {parent}: resume its root session, which delegates again what was still running",
                rec.session_id
            ),
        ));
    }
    if let Some(status @ ("ok" | "max_turns_reached")) = rec.exit_status.as_deref() {
        return Err(Diagnostic::error(
            "E-RPL-003",
            format!(
                "session {} ended {status}: there is nothing left to resume",
                rec.session_id
            ),
        )
        .with_hint(
            "mur run the capsule with a new task, or mur replay the session to run it again",
        ));
    }
    let path = replay::manifest_path(args.manifest.as_ref());
    let loaded = manifest::load(&path).map_err(|mut d| d.remove(0))?;
    refuse::same_capsule(&rec, &loaded)?;
    let rebuilt = seed::rebuild(&rec)?;
    let task = rec.task.clone().unwrap_or_default();
    let workdir = match &args.workdir {
        Some(d) => Some(std::path::absolute(d).map_err(|e| {
            Diagnostic::error("E-IO-001", format!("--workdir {}: {e}", d.display()))
        })?),
        None => None,
    };
    let dir = std::path::absolute(&loaded.dir).unwrap_or_else(|_| loaded.dir.clone());
    let mut place = Placement::root(&dir, workdir.as_deref());
    if let (None, Some(old)) = (&workdir, &rec.workdir) {
        // Carry on in the folder the finished turns worked in.
        place.paths.workdir = old.clone();
        place.owns_workdir = false;
    }
    let (mut spec, warnings) = capsule::session_spec(&loaded, task, place)?;
    let changes = refuse::changes(&rec, &spec);
    if !changes.is_empty() && !args.force {
        return Err(Diagnostic::error(
            "E-RPL-002",
            format!(
                "{} changed since session {} ran: {}",
                loaded.path.display(),
                rec.session_id,
                changes.join("; ")
            ),
        )
        .with_hint("undo the change, or pass --force to resume with the manifest as it is now"));
    }
    for w in &warnings {
        crate::errln!("{w}");
    }
    let restored = restore_pulled(&loaded, &rec.session_id, &rebuilt, &mut spec).await?;
    let from_turn = rebuilt.seed.totals.turns;
    spec.continuation.resumed_from = Some(rec.session_id.clone());
    spec.continuation.seed = Some(Arc::new(rebuilt.seed));
    if !args.json {
        crate::outln!("resumed: {} (from turn {from_turn})", rec.session_id);
        for p in &restored {
            crate::outln!("holding again: {p} (pulled by the session, as murmur.lock pins it)");
        }
        for d in &rebuilt.redelegated {
            crate::outln!("delegating again: {d} (still running when the session stopped)");
        }
    }
    let project = dir.clone();
    let resolver = ManifestResolver::new(Box::new(move |name: &str, version: &str| {
        let name = crate::manifest::ArtifactName::parse(name).map_err(|e| e.to_string())?;
        crate::artifact::find_capsule(&project, &name, version)
    }));
    let sup = SupervisorArgs {
        resolver: Some(Arc::new(resolver)),
        max_depth: DEFAULT_MAX_DEPTH,
        max_children: DEFAULT_MAX_CHILDREN,
        placer: None,
    };
    let m = &loaded.manifest;
    let header = Header {
        verbose: args.verbose,
        quiet: args.json,
        manifest: format!("{} v{}", m.name, m.version),
        driver: format!("{} ({})", spec.driver.name().replace('/', "-"), spec.model),
    };
    let records = spec.paths.records_dir.clone();
    let report = launch::launch(spec, &header, sup).await?;
    let t = &report.totals;
    if args.json {
        crate::outln!(
            "{}",
            serde_json::json!({
                "session": report.session_id,
                "resumed_from": rec.session_id,
                "status": report.exit_status.as_str(),
                "records": records.display().to_string(),
                "totals": {"turns": t.turns, "tool_calls": t.tool_calls, "shell_calls": t.shell_calls},
                "usage": {"input_tokens": t.input_tokens, "output_tokens": t.output_tokens},
            })
        );
    }
    match crate::run::report_problem(&report, &records) {
        Some(d) => {
            crate::errln!("{d}");
            Ok(1)
        }
        None => Ok(0),
    }
}

/// Holds again every artifact the recorded session had pulled and not removed, from a store at
/// exactly the version and sha256 `murmur.lock` pins (see [`crate::artifact::PullService`]'s
/// `restore`): each is checked before any is staged or any pin changes, so a resume refused
/// here writes nothing. The restored tools join `spec.tools`, and the service that holds them
/// becomes the session's, so a `remove-artifact` of one works. Returns `name@version` of each.
async fn restore_pulled(
    loaded: &manifest::LoadedManifest,
    old: &str,
    rebuilt: &seed::Rebuilt,
    spec: &mut mur_actors::spec::SessionSpec,
) -> Result<Vec<String>, Diagnostic> {
    let m = &loaded.manifest;
    let mut names = Vec::new();
    for full in &rebuilt.pulled {
        let name = manifest::ArtifactName::parse(full).map_err(|e| {
            Diagnostic::error(
                "E-RPL-004",
                format!(
                    "session {old} pulled '{full}', which is not an artifact name: {}",
                    e.message
                ),
            )
        })?;
        // Declared since: the manifest's own entry holds it.
        if !m.artifacts.iter().any(|a| a.name == name) {
            names.push(name);
        }
    }
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let refused = |why: mur_actors::artifact_error::ArtifactError| {
        Diagnostic::error("E-RPL-004", format!("cannot resume session {old}: {why}")).with_hint(
            "put the pinned version back in the project or global store (`mur install <its .mur.zip>`), or restore its murmur.lock entry; a resume holds a pulled tool only as the lock pinned it",
        )
    };
    let service = Arc::new(crate::capsule::pull_service(loaded)?);
    for name in &names {
        service.check_restore(name).await.map_err(refused)?;
    }
    let request = mur_actors::registry::ArtifactRequest {
        session_id: spec.session_id.clone(),
        records_dir: spec.paths.records_dir.clone(),
        input: serde_json::Value::Null,
    };
    let mut restored = Vec::new();
    for name in &names {
        let p = service
            .restore(&request, name, &rebuilt.chain)
            .await
            .map_err(refused)?;
        spec.tools.retain(|t| t.name != p.tool.name);
        spec.tools.push(p.tool);
        restored.push(format!("{}@{}", p.name, p.version));
    }
    if spec.artifacts.is_some() {
        spec.artifacts = Some(service);
    }
    Ok(restored)
}
