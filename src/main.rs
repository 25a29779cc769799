//! The `mur` command line.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;

use clap::{CommandFactory, Parser, Subcommand};
use mur::runtime::Threads;
use tracing_subscriber::fmt::writer::BoxMakeWriter;

/// mur: run Murmur capsules on an actor runtime.
#[derive(Debug, Parser)]
#[command(name = "mur", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Colour: auto (a terminal, unless NO_COLOR is set; CLICOLOR_FORCE forces it), always,
    /// never.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "auto",
        value_name = "WHEN"
    )]
    color: mur::output::ColorChoice,
}

// Each subcommand's arguments are built only when it is the one being parsed (or when help,
// completions or the man page need them all): every `mur` run built every command's
// arguments to parse one command's (a scripted run 57 k instructions, `--version` 87 k). A
// command whose options are a struct takes its description from that struct's `ABOUT`: built
// later, the struct's own `about` would replace the variant's.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
enum Command {
    #[command(
        about = mur::run::ABOUT,
        after_help = "Examples:\n  mur run examples/hello --task \"Say hello\" -v\n  mur run . --task task.md --workdir .\n  echo \"Fix the failing test\" | mur run --task -"
    )]
    Run(mur::run::RunArgs),
    #[command(
        about = mur::cluster::node::ABOUT,
        after_help = "Examples:\n  MUR_CLUSTER_COOKIE=s3cret mur node --listen 0.0.0.0:7420\n  mur node --listen 127.0.0.1:0 --cookie-file ~/.murmur/cookie --capacity 16"
    )]
    Node(mur::cluster::node::NodeArgs),
    /// Validate a murmur.yaml without running it and print every diagnostic.
    #[command(
        after_help = "Examples:\n  mur doctor\n  mur doctor examples/hello/murmur.yaml\n  mur doctor --strict   # exit 1 exactly when mur run would refuse\n  mur doctor --json"
    )]
    Doctor {
        /// The manifest (default ./murmur.yaml).
        manifest: Option<PathBuf>,
        /// Print one JSON object (file, ok, strict, diagnostics, notes, containment).
        #[arg(long)]
        json: bool,
        /// Also run every check `mur run` makes before a session starts (keys, driver,
        /// artifacts installed and pinned, containment, folders) and exit 1 exactly when run
        /// would refuse. Without it doctor judges the manifest alone, as the original does.
        #[arg(long)]
        strict: bool,
    },
    #[command(
        about = mur::replay::ABOUT,
        after_help = "Examples:\n  mur replay\n  mur replay @2 --tools recorded\n  mur replay 3e4b --json"
    )]
    Replay(mur::replay::ReplayArgs),
    #[command(
        about = mur::resume::ABOUT,
        after_help = "Examples:\n  mur resume\n  mur resume 3e4b -v\n  mur resume @2 --force"
    )]
    Resume(mur::resume::ResumeArgs),
    /// Read session traces.
    #[command(
        subcommand,
        after_help = "Examples:\n  mur trace show\n  mur trace steps ses_01a2…\n  mur trace diff ses_A ses_B"
    )]
    Trace(mur::trace::cli::TraceCommand),
    /// Pack a folder (murmur.yaml + payload) into a .mur.zip.
    #[command(
        after_help = "Examples:\n  mur build tool-edit/package\n  mur build tool-edit/package -o tool-edit-0.2.0.mur.zip"
    )]
    Build {
        /// The folder to pack.
        dir: PathBuf,
        /// Where to write it (default ./<name>-<version>[-<platform>].mur.zip).
        #[arg(short = 'o', long = "output")]
        output: Option<PathBuf>,
    },
    /// Install artifacts into the project store (or -g the global store) and pin them.
    #[command(
        after_help = "Examples:\n  mur install\n  mur install murmur/tool-edit@0.2.0\n  mur install ./tool-edit-0.2.0.mur.zip\n  mur install github:murmur-nexus/default-artifacts@v0.25.0"
    )]
    Install {
        /// scope/name[@version], github:owner/repo@tag, or ./file.mur.zip; none = all declared.
        reference: Option<String>,
        /// Use the global store (~/.murmur/artifacts) and write no lock.
        #[arg(short = 'g', long = "global")]
        global: bool,
        /// Print one JSON object (installed, failed) instead of a line per artifact.
        #[arg(long)]
        json: bool,
    },
    /// List installed artifacts with version, runtime, platforms, store, origin and trust.
    #[command(after_help = "Examples:\n  mur list\n  mur list -g\n  mur list --json")]
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
    /// Print a shell completion script.
    #[command(
        after_help = "Examples:\n  mur completions bash > ~/.local/share/bash-completion/completions/mur\n  mur completions zsh > \"${fpath[1]}/_mur\"\n  mur completions fish > ~/.config/fish/completions/mur.fish"
    )]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Explain a diagnostic code: its cause, an example and the fix.
    #[command(after_help = "Examples:\n  mur explain E-RUN-008\n  mur explain w-sec-019")]
    Explain {
        /// The code, e.g. E-RUN-008.
        code: String,
    },
    /// Print the man page (roff).
    #[command(after_help = "Example:\n  mur man > ~/.local/share/man/man1/mur.1")]
    Man,
}

/// Logs go to stderr: warnings by default, `-v` mur's info, `-vv` mur's debug, `-vvv` every
/// library's debug; `RUST_LOG` overrides. No ANSI codes unless `--color` allows them.
///
/// With live progress on the terminal (`progress`), log lines are printed above the spinners,
/// and below `-vv` the kernel's one-line-per-event logs are left out: the progress lines are
/// those events.
fn init_logs(verbose: u8, progress: Option<indicatif::MultiProgress>) {
    // -v and -vv are mur's own events; -vvv adds every library's debug lines.
    let default = match verbose {
        0 => "warn",
        1 => "warn,mur=info,mur_actors=info",
        2 => "warn,mur=debug,mur_actors=debug",
        _ => "debug",
    };
    let default = if progress.is_some() && verbose <= 1 {
        format!("{default},mur_actors::session=off")
    } else {
        default.to_string()
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let writer = match progress {
        Some(multi) => BoxMakeWriter::new(mur::progress::LogWriter(multi)),
        None => BoxMakeWriter::new(std::io::stderr),
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(mur::output::color_stderr())
        // A log line that cannot be written (stderr closed) is dropped; the default would
        // report it with eprintln!, which panics on that same closed stderr.
        .log_internal_errors(false)
        .with_target(false)
        .try_init();
}

/// Run a command that needs the async runtime; its exit code. When it is done, everything it
/// owes is done (lines written, records flushed, output printed): no command of a tool call
/// outlives the process, and idle runtime threads are not waited for on the way out.
///
/// The command comes boxed: a command's future is tens of KiB, and held by value it made
/// `main`'s and this function's stack frames 56 and 37 KiB, each page of them touched (and
/// faulted in) on every start, whatever the command.
fn on_runtime(threads: Threads, command: Pin<Box<dyn Future<Output = i32>>>) -> i32 {
    let rt = match mur::runtime::build(threads) {
        Ok(rt) => rt,
        Err(e) => {
            mur::errln!("error[E-RUN-001]: cannot start the async runtime: {e}");
            return 1;
        }
    };
    let code = rt.block_on(command);
    mur::contain::spawn::end_of_process();
    rt.shutdown_background();
    code
}

/// Run a command whose sessions' capsules are read later (hosted children, a recorded tree)
/// on a worker per core: the host's namespaces are probed beside its start, as `mur run` does
/// for a capsule that may run commands.
fn with_commands(command: Pin<Box<dyn Future<Output = i32>>>) -> i32 {
    init_logs(0, None);
    mur::contain::host::before_commands();
    let code = on_runtime(Threads::PerCore, command);
    mur::contain::host::after_commands();
    code
}

fn main() {
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
    mur::output::set_color(cli.color);
    let code = match cli.command {
        Command::Run(args) => {
            let progress = mur::progress::wanted(args.quiet).then(mur::progress::start);
            init_logs(args.verbose, progress);
            let code = match mur::run::prepare(args) {
                Ok(run) => on_runtime(run.threads(), Box::pin(mur::run::launch(run))),
                Err(code) => code,
            };
            mur::contain::host::after_commands();
            code
        }
        Command::Node(args) => with_commands(Box::pin(mur::cluster::node::run(args))),
        Command::Replay(args) => with_commands(Box::pin(mur::replay::run(args))),
        Command::Resume(args) => with_commands(Box::pin(mur::resume::run(args))),
        Command::Doctor {
            manifest,
            json,
            strict,
        } => mur::manifest::doctor::run(manifest.as_deref(), json, strict),
        Command::Trace(cmd) => mur::trace::cli::run(cmd),
        Command::Build { dir, output } => mur::artifact::build::run_build(&dir, output.as_deref()),
        Command::Install {
            reference,
            global,
            json,
        } => mur::artifact::install_cmd::run_install(reference.as_deref(), global, json),
        Command::List { global, json, .. } => mur::artifact::list::run_list(global, json),
        Command::Completions { shell } => {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "mur", &mut out);
            mur::out!("{}", String::from_utf8_lossy(&out));
            0
        }
        Command::Explain { code } => mur::explain::run(&code),
        Command::Man => {
            let mut out = Vec::new();
            match clap_mangen::Man::new(Cli::command()).render(&mut out) {
                Ok(()) => {
                    mur::out!("{}", String::from_utf8_lossy(&out));
                    0
                }
                Err(e) => {
                    mur::errln!("error[E-IO-003]: cannot render the man page: {e}");
                    1
                }
            }
        }
    };
    exit(code)
}

/// End the process with `code` once what it printed is out, without the C library's exit
/// handlers: by now every file `mur` writes is closed and its trace lines are written (the
/// commands wait for that), and what is left to run at exit is the allocator returning its
/// free pages to the kernel, one `madvise` each (about 0.2 ms of a one-turn run) for an
/// address space the kernel is about to drop whole.
fn exit(code: i32) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: `_exit` ends the process; nothing runs after it that could observe a half state.
    unsafe { libc::_exit(code.clamp(0, 255)) }
}
