//! The tool seam: what a session holds ([`ToolDecl`]) and how a call runs ([`ToolExecutor`]).
//!
//! The kernel decides *whether* and *where* a call goes (grants, precedence, fencing); executors
//! in the `mur` crate decide *how* it runs (a subprocess, a native artifact, a skill's text).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::artifact_error::{ArtifactError, ArtifactErrorKind};
use crate::grants::Grants;
use crate::model::ToolSpec;

/// A tool the runtime answers itself. Each knows its name, the grant that makes it exist (seed
/// 000: the grant is the tool's existence), the sentence that refuses it without that grant,
/// and whether a plan step may call it. Their names are reserved: no artifact may take them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RuntimeTool {
    /// `share-file`: mint a handle for one exported file, bound to one peer.
    ShareFile,
    /// `fetch-peer-file`: redeem a peer's handle into `peer-in/`.
    FetchPeerFile,
    /// `delegate-task`: hand one task to a sub-capsule.
    DelegateTask,
    /// `submit-plan`: run a plan of steps.
    SubmitPlan,
    /// `pull-artifact`: fetch, pin and hold a tool while the session runs.
    PullArtifact,
    /// `remove-artifact`: drop a pulled tool.
    RemoveArtifact,
}

impl RuntimeTool {
    /// Every runtime tool, in the order upstream lists them.
    pub const ALL: [RuntimeTool; 6] = [
        RuntimeTool::ShareFile,
        RuntimeTool::FetchPeerFile,
        RuntimeTool::DelegateTask,
        RuntimeTool::SubmitPlan,
        RuntimeTool::PullArtifact,
        RuntimeTool::RemoveArtifact,
    ];

    /// The name the model calls it by.
    pub const fn name(self) -> &'static str {
        match self {
            RuntimeTool::ShareFile => "share-file",
            RuntimeTool::FetchPeerFile => "fetch-peer-file",
            RuntimeTool::DelegateTask => "delegate-task",
            RuntimeTool::SubmitPlan => "submit-plan",
            RuntimeTool::PullArtifact => "pull-artifact",
            RuntimeTool::RemoveArtifact => "remove-artifact",
        }
    }

    /// The runtime tool called `name`, if it is one.
    pub fn parse(name: &str) -> Option<RuntimeTool> {
        RuntimeTool::ALL.into_iter().find(|t| t.name() == name)
    }

    /// True when `grants` hold the declaration this tool needs.
    pub fn granted(self, grants: &Grants) -> bool {
        match self {
            RuntimeTool::ShareFile => grants.peer_files_export,
            RuntimeTool::FetchPeerFile => !grants.peer_fetch_allow.is_empty(),
            RuntimeTool::DelegateTask => !grants.spawn_allow.is_empty(),
            RuntimeTool::SubmitPlan => grants.plan_submit,
            RuntimeTool::PullArtifact | RuntimeTool::RemoveArtifact => grants.install,
        }
    }

    /// The refusal of a call without the grant: it names the declaration that is missing.
    /// `input` gives the artifact a pull or removal asked for.
    pub fn refusal(self, input: &Value) -> String {
        let needs = |declaration: &str| {
            format!(
                "'{}' needs {declaration} in murmur.yaml; this capsule declares none",
                self.name()
            )
        };
        match self {
            RuntimeTool::ShareFile => needs("an exports.peer_files block"),
            RuntimeTool::FetchPeerFile => needs("a capabilities.peer_fetch.allow list"),
            RuntimeTool::DelegateTask => needs("a capabilities.spawn.allow list"),
            RuntimeTool::SubmitPlan => needs("a capabilities.plan.submit: true declaration"),
            RuntimeTool::PullArtifact | RuntimeTool::RemoveArtifact => {
                self.install_refusal(input).to_string()
            }
        }
    }

    /// The refusal of `pull-artifact` or `remove-artifact` when the capsule declares no
    /// `capabilities.install` (`not-granted`), shared by the kernel and the pull service.
    pub fn install_refusal(self, input: &Value) -> ArtifactError {
        let artifact = input
            .get("artifact")
            .and_then(Value::as_str)
            .unwrap_or_default();
        // A pattern lists what may be pulled; it pulls nothing.
        let verb = match self {
            RuntimeTool::RemoveArtifact => "removing",
            _ if artifact.ends_with('*') => "listing",
            _ => "pulling",
        };
        ArtifactError::new(
            ArtifactErrorKind::NotGranted,
            format!(
                "this capsule declares no capabilities.install, so {verb} '{artifact}' is refused"
            ),
        )
    }

    /// False for the tools that change the session's inventory: they run only as a direct
    /// call of the model's turn, never as a plan step.
    pub fn plan_may_call(self) -> bool {
        !matches!(
            self,
            RuntimeTool::PullArtifact | RuntimeTool::RemoveArtifact
        )
    }
}

/// The reserved names of [`RuntimeTool`]s.
pub const RUNTIME_TOOLS: [&str; 6] = [
    RuntimeTool::ShareFile.name(),
    RuntimeTool::FetchPeerFile.name(),
    RuntimeTool::DelegateTask.name(),
    RuntimeTool::SubmitPlan.name(),
    RuntimeTool::PullArtifact.name(),
    RuntimeTool::RemoveArtifact.name(),
];

/// Who put a tool in the session, which decides how it is labelled and trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolOrigin {
    /// Written by the runtime itself (shell binaries, runtime-provided tools).
    Provided,
    /// Declared in murmur.yaml by the operator.
    Operator,
    /// Pulled by the capsule while it ran (`pull-artifact`): untrusted.
    Pulled,
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
    /// A tool the runtime answers itself (a [`RuntimeTool`]), or an edge executor answers for it.
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
        let description = if self.origin == ToolOrigin::Pulled {
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

/// Why a tool call produced no output of its own: the runtime refused it or could not run it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecErrorKind {
    /// The call reached an executor of another kind of tool (a runtime bug, never the model's).
    Misrouted,
    /// The input is not what the tool takes.
    BadInput,
    /// The binary a shell tool runs is not installed.
    NotInstalled,
    /// A policy refuses it (network, exports).
    NotAllowed,
    /// The tool's program could not start.
    CannotStart,
    /// It ran past its deadline and was killed.
    Deadline,
    /// A peer or the door it needs cannot be reached.
    Unreachable,
    /// It ran, and failed in a way that leaves no result (too much output, a bad reply).
    Failed,
}

impl ExecErrorKind {
    /// The code, for logs and tests.
    pub fn code(self) -> &'static str {
        match self {
            ExecErrorKind::Misrouted => "misrouted",
            ExecErrorKind::BadInput => "bad_input",
            ExecErrorKind::NotInstalled => "not_installed",
            ExecErrorKind::NotAllowed => "not_allowed",
            ExecErrorKind::CannotStart => "cannot_start",
            ExecErrorKind::Deadline => "deadline",
            ExecErrorKind::Unreachable => "unreachable",
            ExecErrorKind::Failed => "failed",
        }
    }
}

/// A refused or failed execution: its class and the sentence the model reads (unfenced).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecError {
    /// The class.
    pub kind: ExecErrorKind,
    /// The sentence.
    pub message: String,
}

impl ExecError {
    /// An error of `kind`.
    pub fn new(kind: ExecErrorKind, message: impl Into<String>) -> Self {
        ExecError {
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for ExecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ExecError {}

/// The result of one execution: output, or the runtime's own refusal or failure.
pub type ExecResult = Result<ExecOutput, ExecError>;

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
    ) -> Result<ArgvRun, ExecError> {
        let _ = (workdir, records_dir);
        Err(ExecError::new(
            ExecErrorKind::Misrouted,
            format!(
                "'{}' cannot run as a plan shell step",
                argv.first().map(String::as_str).unwrap_or("")
            ),
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
