//! `mur trace show|steps|diff|report`.

use clap::Subcommand;

/// The `mur trace` subcommands.
#[derive(Debug, Subcommand)]
pub enum TraceCommand {
    /// Print the full trace of a session.
    Show {
        /// Session address: none (newest), @N, id suffix, full id, or a trace.jsonl path.
        session: Option<String>,
    },
}

/// Run one `mur trace` subcommand; returns the exit code.
pub fn run(_cmd: TraceCommand) -> i32 {
    eprintln!("mur trace: not implemented yet");
    1
}
