//! `mur replay SESSION`: run a recorded session again, offline, and name the first place where
//! the run differs from the recording.
//!
//! The capsule runs as `mur run` would run it (same manifest, same staging, same containment),
//! with one change: its model is the replay driver ([`driver`]), which answers every call from
//! the recorded replies and compares each request with the recorded one. Tools run for real by
//! default; `--tools recorded` plays their results back ([`playback`]). Children of a delegation
//! tree are replayed from their own traces ([`children`]). The replay is a session of its own:
//! its trace says `replay_of: <ses_id>`.
//!
//! Layout: [`recording`] reads a trace into what replay and resume need, [`diverge`] renders
//! what a replay found, [`refuse`] decides which recordings cannot be replayed or resumed.

pub mod children;
pub mod diverge;
pub mod driver;
pub mod playback;
pub mod recording;
pub mod refuse;

use std::path::PathBuf;
use std::sync::Arc;

use mur_actors::supervisor::{SupervisorArgs, DEFAULT_MAX_CHILDREN, DEFAULT_MAX_DEPTH};

use crate::capsule::{self, Placement};
use crate::children::ManifestResolver;
use crate::diagnostic::Diagnostic;
use crate::launch::{self, Header};
use crate::manifest::{self, MANIFEST_FILE};

use diverge::{Divergence, Kind};
use driver::{Places, ReplayDriver, ReplayLog};
use recording::Recording;

/// How tools run during a replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ToolsMode {
    /// Run every tool for real and compare its result with the recorded one.
    Run,
    /// Run nothing: play the recorded results back.
    Recorded,
}

/// What `mur replay` does, one line: its description in `mur --help` and in its own help.
/// (`mur`'s subcommands are built lazily, so the command and its options both carry it.)
pub const ABOUT: &str = "Run a recorded session again offline and name the first divergence (needs trace.capture: content)";

/// Options of `mur replay`.
#[derive(Debug, Clone, clap::Args)]
#[command(about = ABOUT)]
pub struct ReplayArgs {
    /// Session address: none (newest), @N, 4+ trailing id characters, full id, or a trace.jsonl path.
    pub session: Option<String>,
    /// The folder sessions were run in (as `mur run --workdir D`, or ./workdir); the replay's
    /// tools run there too.
    #[arg(long, value_name = "D")]
    pub workdir: Option<PathBuf>,
    /// The capsule's manifest (default ./murmur.yaml, or a folder holding one).
    #[arg(long, value_name = "PATH")]
    pub manifest: Option<PathBuf>,
    /// `run` (default): tools run and their results are compared; `recorded`: nothing runs.
    #[arg(long, value_enum, default_value = "run", value_name = "MODE")]
    pub tools: ToolsMode,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The manifest named by `--manifest` (a file or a folder holding one), else ./murmur.yaml.
pub fn manifest_path(arg: Option<&PathBuf>) -> PathBuf {
    let p = arg.cloned().unwrap_or_else(|| PathBuf::from(MANIFEST_FILE));
    if p.is_dir() {
        p.join(MANIFEST_FILE)
    } else {
        p
    }
}

/// Find the session an address names (in the `mur trace` places for `--workdir`) and read it.
pub fn open(session: Option<&str>, workdir: Option<&PathBuf>) -> Result<Recording, Diagnostic> {
    let group = workdir
        .cloned()
        .unwrap_or_else(|| PathBuf::from(crate::trace::cli::DEFAULT_WORKDIR));
    let path = crate::trace::address::resolve(session, &group)?;
    recording::read(&path)
}

fn fail(json: bool, diags: &[Diagnostic]) -> i32 {
    if json {
        let errors: Vec<_> = diags.iter().map(Diagnostic::to_json).collect();
        crate::outln!(
            "{}",
            serde_json::json!({"status": "failed", "diagnostics": errors})
        );
    }
    for d in diags {
        crate::errln!("{d}");
    }
    1
}

/// Run `mur replay`; returns the exit code.
pub async fn run(args: ReplayArgs) -> i32 {
    match replay(&args).await {
        Ok(code) => code,
        Err(d) => fail(args.json, &[d]),
    }
}

async fn replay(args: &ReplayArgs) -> Result<i32, Diagnostic> {
    let rec = Arc::new(open(args.session.as_deref(), args.workdir.as_ref())?);
    refuse::needs_content(&rec, "replay")?;
    let path = manifest_path(args.manifest.as_ref());
    let loaded = manifest::load(&path).map_err(|mut d| d.remove(0))?;
    refuse::same_capsule(&rec, &loaded)?;
    let task = rec.task.clone().ok_or_else(|| {
        Diagnostic::error(
            "E-RPL-001",
            format!(
                "{}: the recording holds no task (no task_start.task and no task.md beside it)",
                rec.path.display()
            ),
        )
    })?;
    let workdir = match &args.workdir {
        Some(d) => Some(std::path::absolute(d).map_err(|e| {
            Diagnostic::error("E-IO-001", format!("--workdir {}: {e}", d.display()))
        })?),
        None => None,
    };
    let dir = std::path::absolute(&loaded.dir).unwrap_or_else(|_| loaded.dir.clone());
    let place = Placement::root(&dir, workdir.as_deref());
    let log = Arc::new(ReplayLog::default());
    let driver = ReplayDriver::new(rec.clone(), log.clone());
    let recorded_tools = args.tools == ToolsMode::Recorded;
    driver.bind(
        &place.session_id,
        if recorded_tools {
            // Played-back results name the recorded folders.
            Places {
                workdir: rec.workdir.clone(),
                records: Some(rec.dir.clone()),
            }
        } else {
            Places {
                workdir: Some(place.paths.workdir.clone()),
                records: Some(place.paths.records_dir.clone()),
            }
        },
    );
    let (mut spec, _warnings) = capsule::session_spec_with(&loaded, Arc::new(driver), task, place)?;
    spec.continuation.replay_of = Some(rec.session_id.clone());
    spec.continuation.outcomes_before = Some(rec.outcome_schedule());
    if recorded_tools {
        spec.continuation.playback = Some(Arc::new(playback::RecordedTools::new(rec.clone())));
    }
    let project = dir.clone();
    let placeholder_log = log.clone();
    let placeholder_rec = rec.clone();
    let inner = ManifestResolver::new(Box::new(move |name: &str, version: &str| {
        let name = crate::manifest::ArtifactName::parse(name).map_err(|e| e.to_string())?;
        crate::artifact::find_capsule(&project, &name, version)
    }))
    // Replaced by each child's own replay driver once its recording is found.
    .with_drivers(Box::new(move |_| {
        Ok(Arc::new(ReplayDriver::new(
            placeholder_rec.clone(),
            placeholder_log.clone(),
        )))
    }));
    let resolver = children::ReplayResolver::new(
        inner,
        log.clone(),
        &spec.session_id,
        rec.clone(),
        recorded_tools,
    );
    let sup = SupervisorArgs {
        resolver: Some(Arc::new(resolver)),
        max_depth: DEFAULT_MAX_DEPTH,
        max_children: DEFAULT_MAX_CHILDREN,
        placer: None,
    };
    let session = spec.session_id.clone();
    let header = Header {
        quiet: true,
        ..Header::default()
    };
    let report = launch::launch(spec, &header, sup).await?;
    let found = log.divergence().or_else(|| {
        // Every call matched; the run must also have ended where the recording did.
        let recorded_turns = rec.counted().count() as u32;
        let end = rec.exit_status.as_deref().unwrap_or("(no session_end)");
        (report.exit_status.as_str() != end || report.totals.turns != recorded_turns).then(|| {
            Divergence {
                session: session.clone(),
                replay_of: rec.session_id.clone(),
                turn: report.totals.turns,
                kind: Kind::Path {
                    what: format!(
                        "the recording ended {end} after {recorded_turns} turn(s), the replay {} after {}",
                        report.exit_status.as_str(),
                        report.totals.turns
                    ),
                },
            }
        })
    });
    match found {
        Some(d) => {
            if args.json {
                crate::outln!("{}", d.json());
            } else {
                crate::out!("{}", d.render());
            }
            Ok(1)
        }
        None => {
            if args.json {
                crate::outln!(
                    "{}",
                    serde_json::json!({
                        "status": "identical",
                        "session": session,
                        "replay_of": rec.session_id,
                        "turns": log.turns(),
                        "tool_calls": log.calls(),
                    })
                );
            } else {
                crate::outln!(
                    "replay: identical ({} turns, {} tool calls)",
                    log.turns(),
                    log.calls()
                );
            }
            Ok(0)
        }
    }
}
