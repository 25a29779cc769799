//! The `mur` command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mur: run Murmur capsules on an actor runtime.
#[derive(Debug, Parser)]
#[command(name = "mur", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validate a murmur.yaml without running it and print every diagnostic.
    Doctor {
        /// The manifest (default ./murmur.yaml).
        manifest: Option<PathBuf>,
    },
    /// Read session traces.
    #[command(subcommand)]
    Trace(mur::trace::cli::TraceCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Doctor { manifest } => mur::manifest::doctor::run(manifest.as_deref()),
        Command::Trace(cmd) => mur::trace::cli::run(cmd),
    };
    ExitCode::from(code.clamp(0, 255) as u8)
}
