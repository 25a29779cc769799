//! The tool seam: what a session holds ([`ToolDecl`]) and how a call runs ([`ToolExecutor`]).
//!
//! The kernel decides *whether* and *where* a call goes (grants, precedence, fencing); executors
//! in the `mur` crate decide *how* it runs (a subprocess, a native artifact, a skill's text).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::model::ToolSpec;

/// The tools the runtime answers itself. Their names are reserved: no artifact may take them.
pub const RUNTIME_TOOLS: [&str; 6] = [
    "share-file",
    "fetch-peer-file",
    "delegate-task",
    "submit-plan",
    "pull-artifact",
    "remove-artifact",
];

/// Who put a tool in the session, which decides how it is labelled and trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolOrigin {
    /// Written by the runtime itself (shell binaries, runtime-provided tools).
    Provided,
    /// Declared in murmur.yaml by the operator.
    Operator,
    /// Pulled by the capsule while it ran: untrusted.
    Runtime,
}

/// How a held tool is executed.
#[derive(Clone, Debug, PartialEq)]
pub enum ToolKind {
    /// One binary from `capabilities.shell.allow`.
    Shell {
        /// The bare binary name.
        binary: String,
    },
    /// A native tool artifact: a program speaking the stdin/stdout JSON protocol.
    Native {
        /// The staged executable.
        entrypoint: PathBuf,
        /// Wall-clock limit for one call.
        deadline: Duration,
    },
    /// A skill: its `skill.md` text is the result.
    Skill {
        /// The staged `skill.md`.
        path: PathBuf,
    },
    /// A tool the runtime answers itself (one of [`RUNTIME_TOOLS`]).
    Runtime,
}

/// One tool in a session's inventory.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolDecl {
    /// The bare name the model sees.
    pub name: String,
    /// Full artifact name (`scope/name`) for artifacts; `None` for runtime-written tools.
    pub full_name: Option<String>,
    /// `0.0.0` for runtime-written tools.
    pub version: String,
    /// What the model is told the tool does.
    pub description: String,
    /// JSON Schema of the input.
    pub input_schema: Value,
    /// How it runs.
    pub kind: ToolKind,
    /// Who put it there.
    pub origin: ToolOrigin,
}

/// The marker that opens the description of a tool the capsule pulled itself.
pub const RUNTIME_ORIGIN_MARKER: &str = "[origin: runtime, trust: untrusted]";

impl ToolDecl {
    /// The entry of the tool array the model is sent.
    pub fn spec(&self) -> ToolSpec {
        let description = if self.origin == ToolOrigin::Runtime {
            format!("{RUNTIME_ORIGIN_MARKER} {}", self.description.trim())
        } else {
            self.description.trim().to_string()
        };
        ToolSpec {
            name: self.name.clone(),
            description: (!description.is_empty()).then_some(description),
            parameters: self.input_schema.clone(),
        }
    }

    /// True for skills (traced as `skill_call`, not counted as tool calls).
    pub fn is_skill(&self) -> bool {
        matches!(self.kind, ToolKind::Skill { .. })
    }
}

/// One call handed to an executor.
#[derive(Clone)]
pub struct ExecRequest {
    /// The session making the call.
    pub session_id: String,
    /// The held tool.
    pub tool: Arc<ToolDecl>,
    /// The model's input object.
    pub input: Value,
    /// The accessible work folder (cwd of subprocesses).
    pub workdir: PathBuf,
    /// The session's records folder (full outputs, logs).
    pub records_dir: PathBuf,
    /// Where the executor writes trace lines of its own (`peer_handle_mint`, …); lines without a
    /// parent hang off the call's turn.
    pub trace: TraceSink,
}

/// Appends trace lines to the calling session's trace.
pub type TraceSink = Arc<dyn Fn(crate::trace::TraceEvent) + Send + Sync>;

/// A sink that drops every line (for calls made outside a session).
pub fn no_trace() -> TraceSink {
    Arc::new(|_| {})
}

/// Whether the tool reported success.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecStatus {
    /// The tool ran and passed (a shell command with any exit code).
    Passed,
    /// The tool ran and reported failure; the model sees `is_error: true`.
    Failed,
}

/// Facts about one shell command, for the `shell` trace line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShellFacts {
    /// Absolute path the binary resolved to (or the bare name).
    pub binary: String,
    /// The command (for interpreters: the `-c` script; else the arguments).
    pub command: String,
    /// Exit code (`-1` when killed by a signal).
    pub exit_code: i32,
    /// Bytes the command wrote to stdout (all of them, not the capped part).
    pub stdout_bytes: u64,
    /// Bytes the command wrote to stderr.
    pub stderr_bytes: u64,
}

/// What a tool that ran produced.
#[derive(Clone, Debug, PartialEq)]
pub struct ExecOutput {
    /// Passed or failed.
    pub status: ExecStatus,
    /// The result text, unfenced (the kernel fences it).
    pub text: String,
    /// A runtime note appended after the fence, on its own line.
    pub note: Option<String>,
    /// Present for shell commands.
    pub shell: Option<ShellFacts>,
}

/// The result of one execution: output, or the runtime's own refusal/failure text (unfenced).
pub type ExecResult = Result<ExecOutput, String>;

/// What a command run from an argv (a plan's shell step) produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgvRun {
    /// Exit code (`-1` when killed).
    pub exit_code: i32,
    /// Stdout (capped, lossy).
    pub stdout: String,
    /// Stderr (capped, lossy).
    pub stderr: String,
}

/// Runs one kind of tool. Implementations must be cancel-safe: a canceled call drops the future,
/// and any subprocess must die with it.
#[async_trait]
pub trait ToolExecutor: Send + Sync {
    /// Run one call.
    async fn execute(&self, request: ExecRequest) -> ExecResult;

    /// Run `argv` directly in `workdir` (plan shell steps). Only shell executors support it.
    async fn run_argv(
        &self,
        argv: Vec<String>,
        workdir: PathBuf,
        records_dir: PathBuf,
    ) -> Result<ArgvRun, String> {
        let _ = (workdir, records_dir);
        Err(format!(
            "'{}' cannot run as a plan shell step",
            argv.first().map(String::as_str).unwrap_or("")
        ))
    }
}

/// The executors a session dispatches to, one per kind of tool.
#[derive(Clone)]
pub struct Executors {
    /// Shell binaries.
    pub shell: Arc<dyn ToolExecutor>,
    /// Native tool artifacts.
    pub native: Arc<dyn ToolExecutor>,
    /// Skills.
    pub skill: Arc<dyn ToolExecutor>,
    /// Runtime-provided tools answered by the edges (`share-file`, `fetch-peer-file`), by name.
    pub runtime: std::collections::HashMap<String, Arc<dyn ToolExecutor>>,
}
