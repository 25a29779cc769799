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
    /// Run a capsule: start it as a tree of actors and print its status when it ends.
    Run(mur::run::RunArgs),
    /// Validate a murmur.yaml without running it and print every diagnostic.
    Doctor {
        /// The manifest (default ./murmur.yaml).
        manifest: Option<PathBuf>,
    },
    /// Read session traces.
    #[command(subcommand)]
    Trace(mur::trace::cli::TraceCommand),
}

/// Logs go to stderr: warnings by default, `-v` info, `-vv` debug; `RUST_LOG` overrides.
fn init_logs(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Run(args) => {
            init_logs(args.verbose);
            let rt = match tokio::runtime::Runtime::new() {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("error[E-RUN-001]: cannot start the async runtime: {e}");
                    return ExitCode::from(1);
                }
            };
            rt.block_on(mur::run::run(args))
        }
        Command::Doctor { manifest } => mur::manifest::doctor::run(manifest.as_deref()),
        Command::Trace(cmd) => mur::trace::cli::run(cmd),
    };
    ExitCode::from(code.clamp(0, 255) as u8)
}
