//! Native tool artifacts: a program that reads `{"data": <input>}` on stdin and writes
//! `{"status": "passed"|"failed", "summary": …, "data": …}` on stdout.
//!
//! The program runs in the work folder with its own process group; past its deadline
//! (`capabilities.limits.deadline_seconds`, default 600 s) the group is killed and the call fails.

use std::process::Stdio;

use async_trait::async_trait;
use mur_actors::tool::{ExecOutput, ExecRequest, ExecResult, ExecStatus, ToolExecutor, ToolKind};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;

use super::capture::capture;
use super::process::GroupGuard;

/// Runs native tool artifacts.
pub struct NativeExecutor;

/// What a native tool prints on stdout.
#[derive(Debug, Deserialize)]
struct Reply {
    status: String,
    #[serde(default)]
    summary: Option<String>,
    #[serde(default)]
    data: Option<Value>,
}

#[async_trait]
impl ToolExecutor for NativeExecutor {
    async fn execute(&self, request: ExecRequest) -> ExecResult {
        let name = &request.tool.name;
        let ToolKind::Native {
            entrypoint,
            deadline,
        } = &request.tool.kind
        else {
            return Err(format!("tool '{name}' is not a native tool"));
        };
        let mut child = tokio::process::Command::new(entrypoint)
            .current_dir(&request.workdir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("tool '{name}' cannot start ({}): {e}", entrypoint.display()))?;
        let _group = GroupGuard::new(child.id());
        let input = json!({ "data": request.input }).to_string();
        let mut stdin = child.stdin.take().expect("piped stdin");
        let logs = request.records_dir.join("logs");
        let stamp = mur_actors::ids::mint("");
        let out = capture(
            child.stdout.take().expect("piped stdout"),
            logs.join(format!("{name}-{stamp}.stdout")),
        );
        let err = capture(
            child.stderr.take().expect("piped stderr"),
            logs.join(format!("{name}-{stamp}.stderr")),
        );
        let run = async {
            let write = async {
                let _ = stdin.write_all(input.as_bytes()).await;
                drop(stdin);
            };
            let ((), out, err, status) = tokio::join!(write, out, err, child.wait());
            (out, err, status)
        };
        let (out, err, status) = tokio::time::timeout(*deadline, run).await.map_err(|_| {
            format!(
                "tool '{name}' was still running after {} s and was killed (capabilities.limits.deadline_seconds)",
                deadline.as_secs()
            )
        })?;
        if out.truncated() {
            return Err(format!(
                "tool '{name}' wrote more than {} bytes on stdout; its reply was not read",
                super::capture::STREAM_CAP
            ));
        }
        let reply: Reply = serde_json::from_slice(&out.head).map_err(|e| {
            let code = status.ok().and_then(|s| s.code()).unwrap_or(-1);
            format!(
                "tool '{name}' did not answer with the tool protocol (exit code {code}): {e}; stderr: {}",
                mur_actors::session::truncate(err.text().trim(), 500)
            )
        })?;
        let text = match (reply.data, reply.summary) {
            (Some(Value::String(s)), _) => s,
            (Some(Value::Null) | None, Some(s)) => s,
            (Some(v), _) => v.to_string(),
            (None, None) => "tool returned no data".to_string(),
        };
        let status = match reply.status.as_str() {
            "passed" => ExecStatus::Passed,
            _ => ExecStatus::Failed,
        };
        Ok(ExecOutput {
            status,
            text,
            note: None,
            shell: None,
        })
    }
}
