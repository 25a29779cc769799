//! `mur trace show|steps|diff|report`: argument parsing and dispatch.
//!
//! Every subcommand takes session addresses ([`super::address::resolve`]) and `--workdir`
//! (default `./workdir`), prints plain text when piped and colour on a terminal, and has a
//! `--json` form for scripts. Failures print as diagnostics on stderr and exit 1.

use std::path::{Path, PathBuf};

use clap::Subcommand;

use crate::diagnostic::Diagnostic;

use super::address;
use super::format::Style;
use super::report::Report;
use super::summary::{self, Detail, Summary};
use super::{diff, show, steps};

/// Work folder searched for session folders when `--workdir` is not given.
pub const DEFAULT_WORKDIR: &str = "workdir";

/// The `mur trace` subcommands. Their arguments are built only for the one being parsed, as
/// `mur`'s own subcommands' are (main.rs).
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum TraceCommand {
    /// Print the full trace of a session: header, turns, tool calls, pulls, delegations.
    Show {
        /// Session address: none (newest), @N, 4+ trailing id characters, full id, or a trace.jsonl path.
        session: Option<String>,
        /// Folder holding the session folders (default ./workdir; a `mur run --workdir` folder works too).
        #[arg(long, value_name = "DIR")]
        workdir: Option<PathBuf>,
        /// Print one JSON document instead of text.
        #[arg(long)]
        json: bool,
        /// Print a recorded body instead: system, tools, response (with --turn), or a sha256.
        #[arg(long, value_name = "SELECTOR", conflicts_with = "json")]
        body: Option<String>,
        /// The 0-based turn whose body --body prints.
        #[arg(long, value_name = "N")]
        turn: Option<u32>,
    },
    /// Turn-by-turn summary of what the agent did.
    Steps {
        /// Session address (see `mur trace show`).
        session: Option<String>,
        /// Add a truncated summary of each tool's input.
        #[arg(short, long)]
        verbose: bool,
        /// Folder holding the session folders (default ./workdir).
        #[arg(long, value_name = "DIR")]
        workdir: Option<PathBuf>,
        /// Print one JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Compare two sessions (default: the two most recent, @2 against @1).
    Diff {
        /// Two session addresses: before and after.
        #[arg(value_name = "SESSION", num_args = 0..=2)]
        sessions: Vec<String>,
        /// Folder holding the session folders (default ./workdir).
        #[arg(long, value_name = "DIR")]
        workdir: Option<PathBuf>,
        /// Print one JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Token usage, tool calls by name, latency and per-child usage over sessions.
    Report {
        /// Session addresses (default: the newest session).
        #[arg(value_name = "SESSION")]
        sessions: Vec<String>,
        /// Report over the N most recent sessions instead.
        #[arg(long, value_name = "N", conflicts_with = "sessions")]
        last: Option<usize>,
        /// Folder holding the session folders (default ./workdir).
        #[arg(long, value_name = "DIR")]
        workdir: Option<PathBuf>,
        /// Print one JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// What a successful subcommand prints.
#[derive(Debug, Default)]
pub struct Output {
    /// Text (or JSON) for stdout.
    pub stdout: String,
    /// Warnings for stderr (sessions a report skipped).
    pub warnings: Vec<Diagnostic>,
}

impl From<String> for Output {
    fn from(stdout: String) -> Self {
        Output {
            stdout,
            warnings: Vec::new(),
        }
    }
}

/// Run one `mur trace` subcommand; returns the exit code.
pub fn run(cmd: TraceCommand) -> i32 {
    match execute(cmd, &Style::for_stdout()) {
        Ok(out) => {
            for w in &out.warnings {
                crate::errln!("{w}");
            }
            crate::out!("{}", out.stdout);
            0
        }
        Err(diags) => {
            for d in diags {
                crate::errln!("{d}");
            }
            1
        }
    }
}

/// Run a subcommand and return what it prints, or its diagnostics.
pub fn execute(cmd: TraceCommand, st: &Style) -> Result<Output, Vec<Diagnostic>> {
    let dir = |w: Option<PathBuf>| w.unwrap_or_else(|| PathBuf::from(DEFAULT_WORKDIR));
    match cmd {
        TraceCommand::Show {
            session,
            workdir,
            json,
            body,
            turn,
        } => {
            if let Some(selector) = body {
                let path = address::resolve(session.as_deref(), &dir(workdir)).map_err(one)?;
                // The bytes as sent or received: their sha256 is the recorded hash.
                return Ok(super::body::body(&path, &selector, turn)
                    .map_err(one)?
                    .into());
            }
            if turn.is_some() {
                return Err(one(Diagnostic::error(
                    "E-TRC-001",
                    "--turn has no meaning without --body",
                )));
            }
            let s = open(session.as_deref(), &dir(workdir), Detail::Full).map_err(one)?;
            Ok(if json {
                to_json(&show::json(&s))
            } else {
                show::render(&s, st)
            }
            .into())
        }
        TraceCommand::Steps {
            session,
            verbose,
            workdir,
            json,
        } => {
            let s = open(session.as_deref(), &dir(workdir), Detail::Full).map_err(one)?;
            Ok(if json {
                to_json(&steps::json(&s, verbose))
            } else {
                steps::render(&s, verbose, st)
            }
            .into())
        }
        TraceCommand::Diff {
            sessions,
            workdir,
            json,
        } => {
            let workdir = dir(workdir);
            let (before, after) = match sessions.as_slice() {
                [] => ("@2".to_string(), "@1".to_string()),
                [a, b] => (a.clone(), b.clone()),
                other => {
                    return Err(vec![Diagnostic::error(
                        "E-TRC-002",
                        format!(
                            "mur trace diff expects 0 or 2 arguments, got {}. Usage: mur trace diff [<before> <after>]",
                            other.len()
                        ),
                    )])
                }
            };
            let a = open(Some(&before), &workdir, Detail::Full).map_err(|d| label("before", d));
            let b = open(Some(&after), &workdir, Detail::Full).map_err(|d| label("after", d));
            match (a, b) {
                (Ok(a), Ok(b)) => Ok(if json {
                    to_json(&diff::json(&a, &b))
                } else {
                    diff::render(&a, &b, st)
                }
                .into()),
                (a, b) => Err(a.err().into_iter().chain(b.err()).collect()),
            }
        }
        TraceCommand::Report {
            sessions,
            last,
            workdir,
            json,
        } => {
            let workdir = dir(workdir);
            let paths = match last {
                Some(0) => {
                    return Err(vec![Diagnostic::error(
                        "E-TRC-002",
                        "--last must be at least 1",
                    )])
                }
                Some(n) => address::newest(&workdir, n).map_err(one)?,
                None if sessions.is_empty() => {
                    vec![address::resolve(None, &workdir).map_err(one)?]
                }
                None => sessions
                    .iter()
                    .map(|a| address::resolve(Some(a), &workdir))
                    .collect::<Result<_, _>>()
                    .map_err(one)?,
            };
            // Sessions named one by one must all read; a `--last N` sweep skips the ones that
            // cannot (a run that failed before writing, a damaged file) and says so.
            let mut loaded = Vec::new();
            let mut skipped = Vec::new();
            for p in &paths {
                match summary::load(p, Detail::Totals) {
                    Ok(s) => loaded.push(s),
                    Err(d) if last.is_some() => skipped.push(d),
                    Err(d) => return Err(vec![d]),
                }
            }
            if loaded.is_empty() {
                let mut all = skipped;
                all.push(Diagnostic::error(
                    "E-TRC-001",
                    "no readable sessions to report — every trace is empty or damaged",
                ));
                return Err(all);
            }
            let warnings = skipped
                .into_iter()
                .map(|d| {
                    let mut w = Diagnostic::warning(d.code, format!("skipped: {}", d.message));
                    w.hint = None;
                    w
                })
                .collect();
            let report = Report::new(&mut loaded);
            Ok(Output {
                stdout: if json {
                    to_json(&report.json())
                } else {
                    report.render(st)
                },
                warnings,
            })
        }
    }
}

/// Resolve an address and read its trace.
fn open(address: Option<&str>, workdir: &Path, detail: Detail) -> Result<Summary, Diagnostic> {
    let path = address::resolve(address, workdir)?;
    summary::load(&path, detail)
}

fn one(d: Diagnostic) -> Vec<Diagnostic> {
    vec![d]
}

fn label(side: &str, mut d: Diagnostic) -> Diagnostic {
    d.message = format!("{side}: {}", d.message);
    d
}

fn to_json(v: &serde_json::Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_else(|_| "null".into());
    s.push('\n');
    s
}
