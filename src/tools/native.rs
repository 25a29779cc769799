//! Native tool artifacts: a program that reads `{"data": "<input as a JSON string>",
//! "log_path": null}` on stdin (the original Murmur's envelope, so a tool written for it runs
//! here unchanged) and writes `{"status": "passed"|"failed", "summary": …, "data": …}` on
//! stdout. As the original does, a reply that is not that object is still read: empty stdout
//! or plain text takes its status from the exit code. docs/tools.md is the full protocol.
//!
//! The program runs in the work folder with its own process group; past its deadline
//! (`capabilities.limits.deadline_seconds`, default 600 s) the group is killed and the call fails.

use async_trait::async_trait;
use mur_actors::tool::{
    ExecError, ExecErrorKind, ExecOutput, ExecRequest, ExecResult, ExecStatus, ToolExecutor,
    ToolKind,
};
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
            return Err(ExecError::new(
                ExecErrorKind::Misrouted,
                format!("tool '{name}' is not a native tool"),
            ));
        };
        let input = envelope(&request.input);
        let cmd = self
            .sandbox
            .command(
                entrypoint,
                &request.workdir,
                crate::contain::Profile::Native(entrypoint.clone()),
            )
            .map_err(|e| {
                ExecError::new(
                    ExecErrorKind::CannotStart,
                    format!("tool '{name}' cannot start: {e}"),
                )
            })?;
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
                Some(why) if e.kind() == std::io::ErrorKind::PermissionDenied => ExecError::new(
                    ExecErrorKind::CannotStart,
                    format!("tool '{name}' cannot start: {why}"),
                ),
                _ => ExecError::new(
                    ExecErrorKind::CannotStart,
                    format!("tool '{name}' cannot start ({}): {e}", entrypoint.display()),
                ),
            },
            NoAnswer::Deadline => ExecError::new(
                ExecErrorKind::Deadline,
                format!(
                    "tool '{name}' was still running after {} s and was killed (capabilities.limits.deadline_seconds)",
                    deadline.as_secs()
                ),
            ),
        })?;
        if answered.out.truncated() {
            return Err(ExecError::new(
                ExecErrorKind::Failed,
                format!(
                    "tool '{name}' wrote more than {} bytes on stdout; its reply was not read",
                    super::capture::STREAM_CAP
                ),
            ));
        }
        let (status, text) = read_reply(name, &answered);
        Ok(ExecOutput {
            status,
            text,
            note: None,
            shell: None,
        })
    }
}

/// What a native tool reads on stdin: the input as one JSON string under `data`, and no log
/// file (`log_path` is always null here), on one line ending in a newline (so a line reader such
/// as the shell's `read` sees a whole line).
pub fn envelope(input: &Value) -> String {
    let mut line = json!({ "data": input.to_string(), "log_path": Value::Null }).to_string();
    line.push('\n');
    line
}

/// The status and the text the model reads, from what the tool printed.
fn read_reply(name: &str, answered: &super::process::Answered) -> (ExecStatus, String) {
    let by_exit = if answered.code == 0 {
        ExecStatus::Passed
    } else {
        ExecStatus::Failed
    };
    let out = &answered.out.head;
    if out.iter().all(u8::is_ascii_whitespace) {
        let err = answered.err.text();
        let text = if err.trim().is_empty() {
            format!("native tool '{name}' exited with code {}", answered.code)
        } else {
            mur_actors::text::truncate(err.trim(), 4000)
        };
        return (by_exit, text);
    }
    let Ok(reply) = serde_json::from_slice::<Reply>(out) else {
        // Plain text (or JSON without a status): the text is the answer.
        return (by_exit, answered.out.text());
    };
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
    (status, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_envelope_is_the_original_murmurs() {
        assert_eq!(
            envelope(&json!({"path": "a.txt", "n": 1})),
            r#"{"data":"{\"path\":\"a.txt\",\"n\":1}","log_path":null}"#.to_string() + "\n"
        );
    }
}
