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
    /// Pack a folder (murmur.yaml + payload) into a .mur.zip.
    Build {
        /// The folder to pack.
        dir: PathBuf,
        /// Where to write it (default ./<name>-<version>[-<platform>].mur.zip).
        #[arg(short = 'o', long = "output")]
        output: Option<PathBuf>,
    },
    /// Install artifacts into the project store (or -g the global store) and pin them.
    Install {
        /// scope/name[@version], github:owner/repo@tag, or ./file.mur.zip; none = all declared.
        reference: Option<String>,
        /// Use the global store (~/.murmur/artifacts) and write no lock.
        #[arg(short = 'g', long = "global")]
        global: bool,
    },
    /// List installed artifacts with version, runtime, platforms, store, origin and trust.
    List {
        /// Only the global store.
        #[arg(short = 'g', long = "global", conflicts_with = "all")]
        global: bool,
        /// The project store and the global store (what `mur list` shows in a project; the
        /// original Murmur's flag for it).
        #[arg(long)]
        all: bool,
        /// Print the rows as a JSON array.
        #[arg(long)]
        json: bool,
    },
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
    // A panic inside a session (say, a driver bug) is a crash of that session, reported as an
    // outcome; one log line says where, instead of a backtrace on the user's terminal.
    std::panic::set_hook(Box::new(|info| {
        if tracing::dispatcher::has_been_set() {
            tracing::error!("a session crashed: {info}");
        } else {
            mur::errln!("mur: internal error: {info}");
        }
    }));
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Run(args) => {
            init_logs(args.verbose);
            let rt = match tokio::runtime::Runtime::new() {
                Ok(rt) => rt,
                Err(e) => {
                    mur::errln!("error[E-RUN-001]: cannot start the async runtime: {e}");
                    return ExitCode::from(1);
                }
            };
            rt.block_on(mur::run::run(args))
        }
        Command::Doctor { manifest } => mur::manifest::doctor::run(manifest.as_deref()),
        Command::Trace(cmd) => mur::trace::cli::run(cmd),
        Command::Build { dir, output } => mur::artifact::build::run_build(&dir, output.as_deref()),
        Command::Install { reference, global } => {
            mur::artifact::install_cmd::run_install(reference.as_deref(), global)
        }
        Command::List { global, json, .. } => mur::artifact::list::run_list(global, json),
    };
    ExitCode::from(code.clamp(0, 255) as u8)
}
