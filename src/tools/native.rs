//! Native tool artifacts: a program that reads `{"data": <input>}` on stdin and writes
//! `{"status": "passed"|"failed", "summary": …, "data": …}` on stdout.
//!
//! The program runs in the work folder with its own process group; past its deadline
//! (`capabilities.limits.deadline_seconds`, default 600 s) the group is killed and the call fails.

use async_trait::async_trait;
use mur_actors::tool::{ExecOutput, ExecRequest, ExecResult, ExecStatus, ToolExecutor, ToolKind};
use serde::Deserialize;
use serde_json::{json, Value};

use super::process::{answer_json, NoAnswer};

/// Runs native tool artifacts, each call inside the session's sandbox.
pub struct NativeExecutor {
    /// The session's sandbox.
    pub sandbox: std::sync::Arc<crate::contain::Sandbox>,
}

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
        let input = json!({ "data": request.input }).to_string();
        let cmd = self
            .sandbox
            .command(
                entrypoint,
                &request.workdir,
                crate::contain::Profile::Native(entrypoint.clone()),
            )
            .map_err(|e| format!("tool '{name}' cannot start: {e}"))?;
        let answered = answer_json(
            cmd,
            &request.records_dir,
            name,
            &input,
            *deadline,
        )
        .await
        .map_err(|e| match e {
            NoAnswer::Start(e) => match self.sandbox.ungranted_interpreter(entrypoint) {
                Some(why) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                    format!("tool '{name}' cannot start: {why}")
                }
                _ => format!("tool '{name}' cannot start ({}): {e}", entrypoint.display()),
            },
            NoAnswer::Deadline => format!(
                "tool '{name}' was still running after {} s and was killed (capabilities.limits.deadline_seconds)",
                deadline.as_secs()
            ),
        })?;
        if answered.out.truncated() {
            return Err(format!(
                "tool '{name}' wrote more than {} bytes on stdout; its reply was not read",
                super::capture::STREAM_CAP
            ));
        }
        let reply: Reply = serde_json::from_slice(&answered.out.head).map_err(|e| {
            format!(
                "tool '{name}' did not answer with the tool protocol (exit code {}): {e}; stderr: {}",
                answered.code,
                mur_actors::session::truncate(answered.err.text().trim(), 500)
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
