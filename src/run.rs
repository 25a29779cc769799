//! `mur run`: load the manifest, build the root session, launch it, report.

use std::path::{Path, PathBuf};

use mur_actors::session::ExitStatus;
use mur_actors::supervisor::{SupervisorArgs, DEFAULT_MAX_CHILDREN, DEFAULT_MAX_DEPTH};

use crate::capsule::{self, Placement};
use crate::children::ManifestResolver;
use crate::diagnostic::Diagnostic;
use crate::launch::{self, Header};
use crate::manifest::{self, MANIFEST_FILE};
use crate::runtime::Threads;
use mur_actors::spec::SessionSpec;

/// What `mur run` does, one line: its description in `mur --help` and in its own help.
/// (`mur`'s subcommands are built lazily, so the command and its options both carry it.)
pub const ABOUT: &str =
    "Run a capsule: start it as a tree of actors and print its status when it ends";

/// Options of `mur run`.
#[derive(Debug, Clone, clap::Args)]
#[command(about = ABOUT)]
pub struct RunArgs {
    /// The capsule: a murmur.yaml, or a folder holding one (default ./murmur.yaml).
    #[arg(value_name = "MANIFEST")]
    pub manifest_pos: Option<PathBuf>,
    /// The capsule's manifest (same as the positional argument).
    #[arg(long, value_name = "PATH", conflicts_with = "manifest_pos")]
    pub manifest: Option<PathBuf>,
    /// The task: a file to read, `-` for stdin, or the task text itself.
    #[arg(long, value_name = "FILE_OR_TEXT")]
    pub task: Option<String>,
    /// The work folder; records then go to ~/.murmur/records/<D>/<session>/.
    #[arg(long, value_name = "D")]
    pub workdir: Option<PathBuf>,
    /// Raise the containment floor (the higher of this and capabilities.containment holds);
    /// a floor this host cannot give is refused before anything runs.
    #[arg(long, value_name = "LEVEL", value_parser = clap::builder::PossibleValuesParser::new(crate::manifest::Containment::WORDS))]
    pub containment: Option<String>,
    /// Print the workdir, manifest and driver lines (repeat for debug logs).
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Deepest delegation allowed below this capsule.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_DEPTH)]
    pub max_depth: u32,
    /// Most live sub-capsules one session may hold at once.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CHILDREN)]
    pub max_children: u32,
    /// Print one JSON object when the run ends (session, status, paths, totals, usage)
    /// instead of the status lines; diagnostics still go to stderr.
    #[arg(long)]
    pub json: bool,
    /// Print nothing but errors: no startup or status lines, no warnings (the exit code and
    /// the records say how the run went).
    #[arg(short, long, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Where sub-capsules may run besides this machine.
    #[command(flatten)]
    pub cluster: crate::cluster::RunNodes,
}

impl RunArgs {
    /// The manifest file to read.
    pub fn manifest_path(&self) -> PathBuf {
        let p = self
            .manifest
            .clone()
            .or_else(|| self.manifest_pos.clone())
            .unwrap_or_else(|| PathBuf::from(MANIFEST_FILE));
        if p.is_dir() {
            p.join(MANIFEST_FILE)
        } else {
            p
        }
    }
}

/// The longest path Linux accepts.
pub const PATH_MAX: usize = 4096;

/// What one level of delegation adds to a path: `/children/ses_<32 hex>`.
pub const CHILD_LEVEL_BYTES: usize = "/children/ses_".len() + 32;

/// Room kept below the deepest records folder for what sessions write there
/// (`work/tools/<a 100-character name>/murmur.yaml`, logs).
const LEAF_ROOM: usize = 256;

/// How many levels of delegation fit below `records` before a path passes [`PATH_MAX`].
pub fn deepest_delegation(records: &Path) -> u32 {
    let used = records.as_os_str().len() + LEAF_ROOM;
    (PATH_MAX.saturating_sub(used) / CHILD_LEVEL_BYTES) as u32
}

/// A `--task` value a user meant as a file: one word ending in `.md` or `.txt`, or a path (a
/// `/` among only the characters of file names). Sent as text, a typo would become the model's
/// whole task.
fn looks_like_a_file(task: &str) -> bool {
    let lower = task.to_ascii_lowercase();
    let path_chars = task
        .chars()
        .all(|c| c.is_alphanumeric() || "._-/~+@".contains(c));
    !task.contains(char::is_whitespace)
        && (lower.ends_with(".md") || lower.ends_with(".txt") || (task.contains('/') && path_chars))
}

/// The exit code of a usage error (as clap gives for a bad argument).
pub const USAGE_ERROR: i32 = 2;

/// Read the task: `-` reads stdin, an existing file is read, a word that looks like a missing
/// file is refused (E-RUN-062, a usage error), anything else is the task text itself.
pub fn read_task(task: Option<&str>, manifest_dir: &Path) -> Result<String, Diagnostic> {
    let Some(task) = task else {
        let beside = manifest_dir.join("task.md");
        return match crate::files::read_text(&beside, crate::files::TEXT_CAP) {
            Ok(t) => non_empty(t, &beside.display().to_string()),
            Err(e) if !e.not_found() => Err(Diagnostic::error(
                "E-IO-003",
                format!("cannot read the task file {}: {e}", beside.display()),
            )),
            Err(_) => Err(
                Diagnostic::error("E-RUN-002", "no task: nothing to send to the model").with_hint(
                    "pass --task with a file or the task text, or put a task.md beside murmur.yaml",
                ),
            ),
        };
    };
    if task == "-" {
        let mut text = String::new();
        use std::io::Read;
        std::io::stdin()
            .take(crate::files::TEXT_CAP + 1)
            .read_to_string(&mut text)
            .map_err(|e| {
                Diagnostic::error("E-IO-003", format!("cannot read the task from stdin: {e}"))
            })?;
        if text.len() as u64 > crate::files::TEXT_CAP {
            return Err(Diagnostic::error(
                "E-IO-003",
                format!(
                    "the task on stdin is larger than {} bytes",
                    crate::files::TEXT_CAP
                ),
            ));
        }
        return non_empty(text, "stdin");
    }
    let path = Path::new(task);
    if path.is_file() {
        let text = crate::files::read_text(path, crate::files::TEXT_CAP).map_err(|e| {
            Diagnostic::error(
                "E-IO-003",
                format!("cannot read the task file {}: {e}", path.display()),
            )
        })?;
        return non_empty(text, &path.display().to_string());
    }
    if looks_like_a_file(task) {
        return Err(Diagnostic::error(
            "E-RUN-062",
            format!("--task '{task}' looks like a file name, and there is no such file here"),
        )
        .with_hint(format!(
            "check the path (it is read from {}), or pass the task text itself, or - to read it from stdin",
            std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_else(|_| "this folder".into())
        )));
    }
    non_empty(task.to_string(), "--task")
}

fn non_empty(text: String, origin: &str) -> Result<String, Diagnostic> {
    if text.trim().is_empty() {
        return Err(Diagnostic::error(
            "E-RUN-002",
            format!("the task from {origin} is empty; nothing was sent to the model"),
        )
        .with_hint("write what the capsule should do in the task"));
    }
    Ok(text)
}

fn fail(args: &RunArgs, diags: &[Diagnostic]) -> i32 {
    if args.json {
        let errors: Vec<_> = diags.iter().map(Diagnostic::to_json).collect();
        crate::outln!(
            "{}",
            serde_json::json!({"session": null, "status": "failed", "diagnostics": errors})
        );
    } else if !args.quiet {
        crate::outln!("status:  failed");
    }
    for d in diags {
        crate::errln!("{d}");
    }
    1
}

/// The `--json` object of a run that started a session.
fn report_json(
    report: &mur_actors::session::SessionReport,
    records: &Path,
    error: Option<&Diagnostic>,
) -> String {
    let t = &report.totals;
    serde_json::json!({
        "session": report.session_id,
        "status": report.exit_status.as_str(),
        "records": records.display().to_string(),
        "result": records.join("out/result.txt").display().to_string(),
        "trace": records.join("trace.jsonl").display().to_string(),
        "duration_ms": report.duration_ms,
        "totals": {"turns": t.turns, "tool_calls": t.tool_calls, "shell_calls": t.shell_calls},
        "usage": {"input_tokens": t.input_tokens, "output_tokens": t.output_tokens},
        "diagnostics": error.map(|d| vec![d.to_json()]).unwrap_or_default(),
    })
    .to_string()
}

/// A `mur run` whose manifest, task and root session are ready: what is left needs the async
/// runtime (nodes to connect to, the tree to run).
pub struct Prepared {
    args: RunArgs,
    spec: SessionSpec,
    header: Header,
    /// The capsule's folder (its stores).
    dir: PathBuf,
}

impl Prepared {
    /// The runtime the run needs (see [`crate::runtime`]): one thread for a capsule that
    /// cannot delegate, one per core for one that can.
    pub fn threads(&self) -> Threads {
        if self.spec.grants.spawn_allow.is_empty() {
            Threads::One
        } else {
            Threads::PerCore
        }
    }
}

/// Everything `mur run` does before it needs the async runtime: read the manifest and the
/// task, build the root session. `Err` is the exit code of a run refused before it started.
pub fn prepare(args: RunArgs) -> Result<Prepared, i32> {
    let path = args.manifest_path();
    let loaded = match manifest::load(&path) {
        Ok(l) => l,
        Err(diags) => return Err(fail(&args, &diags)),
    };
    // Which namespaces a command can get (the kernel making a user and a PID namespace: about
    // 0.3 ms) is probed on a thread of its own, while the run starts, for a capsule that may run
    // commands, and that thread then cleans up what killed runs left; a capsule that cannot run
    // a command pays for neither.
    if loaded.manifest.may_run_commands() {
        crate::contain::host::before_commands();
    }
    for w in loaded.warnings.iter().filter(|_| !args.quiet) {
        crate::errln!("{w}");
    }
    let task = match read_task(args.task.as_deref(), &loaded.dir) {
        Ok(t) => t,
        Err(d) if d.code == "E-RUN-062" => {
            fail(&args, &[d]);
            return Err(USAGE_ERROR);
        }
        Err(d) => return Err(fail(&args, &[d])),
    };
    let workdir = match &args.workdir {
        Some(d) => match std::path::absolute(d) {
            Ok(a) => Some(a),
            Err(e) => {
                return Err(fail(
                    &args,
                    &[Diagnostic::error(
                        "E-IO-001",
                        format!("--workdir {}: {e}", d.display()),
                    )],
                ))
            }
        },
        None => None,
    };
    let dir = std::path::absolute(&loaded.dir).unwrap_or_else(|_| loaded.dir.clone());
    let mut place = Placement::root(&dir, workdir.as_deref());
    let deepest = deepest_delegation(&place.paths.records_dir);
    if args.max_depth > deepest {
        return Err(fail(&args, &[Diagnostic::error(
            "E-RUN-060",
            format!(
                "--max-depth {} cannot be held here: each level of delegation nests a child's records {CHILD_LEVEL_BYTES} bytes deeper below {}, and paths stop at {PATH_MAX} bytes, so at most {deepest} levels fit",
                args.max_depth,
                place.paths.records_dir.display()
            ),
        )
        .with_hint(format!("pass --max-depth {deepest} or less, or run from a shorter folder"))]));
    }
    place.floor = args
        .containment
        .as_deref()
        .and_then(crate::contain::Level::parse);
    let spec = match capsule::session_spec(&loaded, task, place) {
        Ok((spec, warnings)) => {
            for w in warnings.iter().filter(|_| !args.quiet) {
                crate::errln!("{w}");
            }
            spec
        }
        Err(d) => return Err(fail(&args, &[d])),
    };
    let m = &loaded.manifest;
    let header = Header {
        verbose: args.verbose > 0,
        quiet: args.json || args.quiet,
        manifest: format!("{} v{}", m.name, m.version),
        // Seed 001 prints the driver as its package name: `murmur-driver-anthropic`.
        driver: format!("{} ({})", spec.driver.name().replace('/', "-"), spec.model),
    };
    Ok(Prepared {
        args,
        spec,
        header,
        dir,
    })
}

/// Run a prepared `mur run` to its end; returns the exit code.
pub async fn launch(prepared: Prepared) -> i32 {
    // One session on one thread: its file jobs and trace writes run where they are asked for.
    if prepared.threads() == Threads::One {
        mur_actors::solo::enable();
    }
    let Prepared {
        args,
        spec,
        header,
        dir,
    } = prepared;
    // Sub-capsules come from this project's stores (and the global one), by name and version.
    let project = dir.clone();
    let resolver = ManifestResolver::new(Box::new(move |name: &str, version: &str| {
        let name = crate::manifest::ArtifactName::parse(name).map_err(|e| e.to_string())?;
        crate::artifact::find_capsule(&project, &name, version)
    }));
    let placer = match crate::cluster::placer_for(&args.cluster, &dir, args.quiet).await {
        Ok(p) => p,
        Err(d) => return fail(&args, &[d]),
    };
    let sup = SupervisorArgs {
        resolver: Some(std::sync::Arc::new(resolver)),
        max_depth: args.max_depth,
        max_children: args.max_children,
        placer,
    };
    let records = spec.paths.records_dir.clone();
    match launch::launch(spec, &header, sup).await {
        Ok(report) => {
            let problem = report_problem(&report, &records);
            if args.json {
                crate::outln!("{}", report_json(&report, &records, problem.as_ref()));
            }
            match problem {
                None => 0,
                Some(d) => {
                    crate::errln!("{d}");
                    1
                }
            }
        }
        Err(d) => fail(&args, &[d]),
    }
}

/// What `mur run` (and `mur resume`) report about a finished session: its records' error
/// (E-RUN-007, …), else E-RUN-040 when the task did not complete, with a hint that works from
/// any folder; `None` when it ended `ok`.
pub fn report_problem(
    report: &mur_actors::session::SessionReport,
    records: &std::path::Path,
) -> Option<Diagnostic> {
    if let Some(e) = &report.trace_error {
        return Some(Diagnostic::error(e.code(), e.to_string()));
    }
    if report.exit_status == ExitStatus::Ok {
        return None;
    }
    Some(
        Diagnostic::error(
            "E-RUN-040",
            format!(
                "the task did not complete ({}): {}",
                report.exit_status.as_str(),
                first_line(&report.result)
            ),
        )
        .with_hint(format!(
            "read {} and `mur trace show {}`",
            records.join("out/result.txt").display(),
            // A path works from any folder; the id alone only beside the capsule.
            records.join("trace.jsonl").display()
        )),
    )
}

/// The first line of `text`, cut to 300 bytes.
pub fn first_line(text: &str) -> String {
    mur_actors::text::truncate(text.lines().next().unwrap_or(""), 300)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// `mur run`'s arguments, as the CLI parses them.
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn prepared(capabilities: &str) -> (tempfile::TempDir, Prepared) {
        let dir = tempfile::tempdir().unwrap();
        let manifest = format!(
            "name: t\nversion: \"0.1.0\"\nartifacts:\n  - name: mur/driver-script\n    version: \"0.1.0\"\n    runtime: driver\n    config:\n      script: script.yaml\n{capabilities}inference:\n  transport: http\n  model: scripted\n  driver:\n    artifact: mur/driver-script\n"
        );
        std::fs::write(dir.path().join("murmur.yaml"), manifest).unwrap();
        std::fs::write(dir.path().join("script.yaml"), "turns:\n  - say: done\n").unwrap();
        let cli = Cli::parse_from([
            "mur".as_ref(),
            dir.path().as_os_str(),
            "--task".as_ref(),
            "hi".as_ref(),
        ]);
        let prepared = prepare(cli.run).unwrap_or_else(|code| panic!("refused: exit {code}"));
        (dir, prepared)
    }

    #[test]
    fn a_capsule_that_cannot_delegate_runs_on_one_thread_one_that_can_on_a_worker_per_core() {
        let (_dir, leaf) = prepared("capabilities:\n  shell:\n    allow: [bash]\n");
        assert_eq!(leaf.threads(), Threads::One);
        let (_dir, parent) = prepared("capabilities:\n  spawn:\n    allow: [local/worker]\n");
        assert_eq!(parent.threads(), Threads::PerCore);
    }
}
