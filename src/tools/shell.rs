//! Shell tools: one per binary in `capabilities.shell.allow`.
//!
//! Input is `{"command": …}`. Interpreters (`bash`, `sh`, …) get `-c <command>`; any other binary
//! gets the command split like a shell would split it, without expansion. The cwd is the work
//! folder, stdin is empty, and a non-zero exit code is data for the model, not an error. Only a
//! failure to start (binary missing, bad quoting) is a tool error. The process runs in its own
//! process group and the whole group is killed when the call is canceled or passes its deadline.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use async_trait::async_trait;
use mur_actors::provided::INTERPRETERS;
use mur_actors::tool::{
    ExecOutput, ExecRequest, ExecResult, ExecStatus, ShellFacts, ToolExecutor, ToolKind,
};
use serde_json::Value;

use super::capture::{capture, Captured};
use super::process::GroupGuard;

/// Runs shell tools.
pub struct ShellExecutor {
    /// Commands still running after this are killed.
    pub deadline: Duration,
}

/// Find `binary` on `PATH`, as an absolute path.
pub fn which(binary: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(binary))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Build the `Stdout:`/`Stderr:` result text.
fn render(display: &str, code: i32, out: &Captured, err: &Captured, killed: Option<u64>) -> String {
    let mut text = format!(
        "$ {display}\nExit code: {code}\nStdout:\n{}\nStderr:\n{}",
        out.text(),
        err.text()
    );
    if let Some(secs) = killed {
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
            return Err(format!("tool '{}' is not a shell tool", request.tool.name));
        };
        let command = match request.input.get("command") {
            Some(Value::String(c)) if !c.trim().is_empty() => c.clone(),
            _ => return Err("shell tool input must include a non-empty 'command' string".into()),
        };
        let Some(resolved) = which(binary) else {
            return Err(format!(
                "binary '{binary}' is not installed on this machine (not found on PATH): capabilities.shell.allow grants it, but it cannot run; install it or remove it from the allow list"
            ));
        };
        let interpreter = INTERPRETERS.contains(&binary.as_str());
        let (args, display) = if interpreter {
            (vec!["-c".to_string(), command.clone()], command.clone())
        } else {
            match shlex::split(&command) {
                Some(a) => (a, format!("{binary} {command}")),
                None => {
                    return Err(format!(
                        "shell command parsing failed: the arguments for '{binary}' have an unclosed quote or a trailing backslash"
                    ))
                }
            }
        };
        let mut cmd = tokio::process::Command::new(&resolved);
        cmd.args(&args)
            .current_dir(&request.workdir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| {
            format!(
                "shell execution failed: cannot start {}: {e}",
                resolved.display()
            )
        })?;
        let _group = GroupGuard::new(child.id());
        let stamp = mur_actors::ids::mint("");
        let logs = request.records_dir.join("logs");
        let stdout = capture(
            child.stdout.take().expect("piped stdout"),
            logs.join(format!("shell-{stamp}.stdout")),
        );
        let stderr = capture(
            child.stderr.take().expect("piped stderr"),
            logs.join(format!("shell-{stamp}.stderr")),
        );
        let run = async {
            let (out, err, status) = tokio::join!(stdout, stderr, child.wait());
            (out, err, status)
        };
        let (out, err, code, killed) = match tokio::time::timeout(self.deadline, run).await {
            Ok((out, err, status)) => {
                let code = status.ok().and_then(|s| s.code()).unwrap_or(-1);
                (out, err, code, None)
            }
            Err(_) => (
                Captured::default(),
                Captured::default(),
                -1,
                Some(self.deadline.as_secs()),
            ),
        };
        let text = render(&display, code, &out, &err, killed);
        Ok(ExecOutput {
            status: ExecStatus::Passed,
            text,
            note: None,
            shell: Some(ShellFacts {
                binary: resolved.display().to_string(),
                command,
                exit_code: code,
                stdout_bytes: out.total,
                stderr_bytes: err.total,
            }),
        })
    }
}
