//! Shell tools: one per binary in `capabilities.shell.allow`.
//!
//! Input is `{"command": …}`. Interpreters (`bash`, `sh`, …) get `-c <command>`; any other binary
//! gets the command split like a shell would split it, without expansion. The cwd is the work
//! folder, stdin is empty, and a non-zero exit code is data for the model, not an error. Only a
//! failure to start (binary missing, bad quoting) is a tool error. The process runs in its own
//! process group and the whole group is killed when the call is canceled or passes its deadline.
//! Plan shell steps come in as an argv and run the same way.

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use mur_actors::provided::INTERPRETERS;
use mur_actors::tool::{
    ArgvRun, ExecError, ExecErrorKind, ExecOutput, ExecRequest, ExecResult, ExecStatus, ShellFacts,
    ToolExecutor, ToolKind,
};
use serde_json::Value;

use super::capture::{capture, Captured};

/// Runs shell tools, each command inside the session's sandbox.
pub struct ShellExecutor {
    /// Commands still running after this are killed.
    pub deadline: Duration,
    /// The session's sandbox.
    pub sandbox: std::sync::Arc<crate::contain::Sandbox>,
}

/// Find `binary` on `PATH`, as an absolute path.
pub fn which(binary: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(binary))
        .find(|p| is_executable(p))
}

/// [`which`] for many names at once: past a few dozen names, each `PATH` folder is listed once
/// instead of probed once per name, so a manifest granting thousands of binaries costs one pass
/// over `PATH`, not thousands. Same answers as [`which`], in the order given.
pub fn which_all<'a>(binaries: impl ExactSizeIterator<Item = &'a str>) -> Vec<Option<PathBuf>> {
    const PROBE_EACH_UP_TO: usize = 64;
    if binaries.len() <= PROBE_EACH_UP_TO {
        return binaries.map(which).collect();
    }
    let Some(path) = std::env::var_os("PATH") else {
        return binaries.map(|_| None).collect();
    };
    // Every name on PATH, with the folders holding it in PATH order.
    let mut held: std::collections::HashMap<std::ffi::OsString, Vec<PathBuf>> =
        std::collections::HashMap::new();
    for dir in std::env::split_paths(&path) {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            held.entry(e.file_name()).or_default().push(dir.clone());
        }
    }
    binaries
        .map(|b| {
            held.get(std::ffi::OsStr::new(b))?
                .iter()
                .map(|dir| dir.join(b))
                .find(|p| is_executable(p))
        })
        .collect()
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

fn not_installed(binary: &str) -> String {
    format!(
        "binary '{binary}' is not installed on this machine (not found on PATH): capabilities.shell.allow grants it, but it cannot run; install it or remove it from the allow list"
    )
}

/// What one finished (or killed) command left.
struct Finished {
    out: Captured,
    err: Captured,
    code: i32,
    /// Set when the deadline killed it.
    killed_after: Option<u64>,
}

impl ShellExecutor {
    /// Start `program args…` in `workdir` and wait for it, capturing both streams.
    async fn spawn(
        &self,
        program: &Path,
        args: &[String],
        workdir: &Path,
        records_dir: &Path,
    ) -> Result<Finished, String> {
        let mut cmd = self
            .sandbox
            .command(program, workdir, crate::contain::Profile::Shell)
            .map_err(|e| {
                format!(
                    "shell execution failed: cannot contain {}: {e}",
                    program.display()
                )
            })?;
        let start = |e: std::io::Error| {
            format!(
                "shell execution failed: cannot start {}: {e}",
                program.display()
            )
        };
        let mut child = cmd.args(args).map_err(start)?.spawn().map_err(start)?;
        let stamp = mur_actors::ids::mint("");
        let logs = records_dir.join("logs");
        let stdout = capture(
            child.stdout.take().expect("piped stdout"),
            logs.join(format!("shell-{stamp}.stdout")),
        );
        let stderr = capture(
            child.stderr.take().expect("piped stderr"),
            logs.join(format!("shell-{stamp}.stderr")),
        );
        let run = async { tokio::join!(stdout, stderr, child.wait()) };
        Ok(match tokio::time::timeout(self.deadline, run).await {
            Ok((out, err, status)) => Finished {
                out,
                err,
                code: status.ok().flatten().unwrap_or(-1),
                killed_after: None,
            },
            Err(_) => Finished {
                out: Captured::default(),
                err: Captured::default(),
                code: -1,
                killed_after: Some(self.deadline.as_secs()),
            },
        })
    }
}

/// Build the `Stdout:`/`Stderr:` result text.
fn render(display: &str, f: &Finished) -> String {
    let (out, err) = (&f.out, &f.err);
    let mut text = format!(
        "$ {display}\nExit code: {}\nStdout:\n{}\nStderr:\n{}",
        f.code,
        out.text(),
        err.text()
    );
    if let Some(secs) = f.killed_after {
        text.push_str(&format!(
            "\n\nThe command was still running after {secs} s and was killed."
        ));
    }
    if out.truncated() || err.truncated() {
        let spooled: Vec<String> = [out, err]
            .iter()
            .filter_map(|c| c.spooled.as_ref().map(|p| p.display().to_string()))
            .collect();
        if spooled.is_empty() {
            text.push_str("\n\nOutput truncated.");
        } else {
            text.push_str(&format!(
                "\n\nOutput truncated. Full output written to {}",
                spooled.join(" and ")
            ));
        }
    }
    text
}

#[async_trait]
impl ToolExecutor for ShellExecutor {
    async fn execute(&self, request: ExecRequest) -> ExecResult {
        let ToolKind::Shell { binary } = &request.tool.kind else {
            return Err(ExecError::new(
                ExecErrorKind::Misrouted,
                format!("tool '{}' is not a shell tool", request.tool.name),
            ));
        };
        let command = match request.input.get("command") {
            Some(Value::String(c)) if !c.trim().is_empty() => c.clone(),
            _ => {
                return Err(ExecError::new(
                    ExecErrorKind::BadInput,
                    "shell tool input must include a non-empty 'command' string",
                ))
            }
        };
        let resolved = which(binary)
            .ok_or_else(|| ExecError::new(ExecErrorKind::NotInstalled, not_installed(binary)))?;
        let (args, display) = if INTERPRETERS.contains(&binary.as_str()) {
            (vec!["-c".to_string(), command.clone()], command.clone())
        } else {
            match shlex::split(&command) {
                Some(a) => (a, format!("{binary} {command}")),
                None => {
                    return Err(ExecError::new(ExecErrorKind::BadInput, format!(
                        "shell command parsing failed: the arguments for '{binary}' have an unclosed quote or a trailing backslash"
                    )))
                }
            }
        };
        let f = self
            .spawn(&resolved, &args, &request.workdir, &request.records_dir)
            .await
            .map_err(|e| ExecError::new(ExecErrorKind::CannotStart, e))?;
        Ok(ExecOutput {
            status: ExecStatus::Passed,
            text: render(&display, &f),
            note: None,
            shell: Some(ShellFacts {
                binary: resolved.display().to_string(),
                command,
                exit_code: f.code,
                stdout_bytes: f.out.total,
                stderr_bytes: f.err.total,
            }),
        })
    }

    async fn run_argv(
        &self,
        argv: Vec<String>,
        workdir: PathBuf,
        records_dir: PathBuf,
    ) -> Result<ArgvRun, ExecError> {
        let Some((binary, args)) = argv.split_first() else {
            return Err(ExecError::new(
                ExecErrorKind::BadInput,
                "shell command is empty",
            ));
        };
        let resolved = which(binary)
            .ok_or_else(|| ExecError::new(ExecErrorKind::NotInstalled, not_installed(binary)))?;
        let f = self
            .spawn(&resolved, args, &workdir, &records_dir)
            .await
            .map_err(|e| ExecError::new(ExecErrorKind::CannotStart, e))?;
        Ok(ArgvRun {
            exit_code: f.code,
            stdout: f.out.text(),
            stderr: f.err.text(),
        })
    }
}
