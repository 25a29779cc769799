//! Policy hooks: native hook artifacts bound `on-tool-call` (or `on-shell`) with
//! `commit_policy: deny`, asked before every call runs.
//!
//! A hook is a program: it reads one event as JSON on stdin and answers `{"decision":"none"}`
//! (proceed) or `{"decision":"deny","reason":"…"}` on stdout. Hooks only narrow: there is no
//! "permit". They fail closed: a hook that crashes, times out, or answers anything else refuses
//! the call, with a reason that says so. Hooks are asked in declaration order; the first refusal
//! wins. Shell-allowlist calls go to `on-shell` hooks, every other call (`pull-artifact` and the
//! other runtime-provided tools included) to `on-tool-call` hooks.

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use mur_actors::gate::CallGate;
use mur_actors::protocol::{CallRequest, Denied};
use serde_json::{json, Value};

use super::process::{answer_json, NoAnswer};

/// How long a hook may take to decide.
pub const HOOK_DEADLINE: Duration = Duration::from_secs(30);

/// One policy hook.
#[derive(Clone, Debug)]
pub struct PolicyHook {
    /// The hook's full artifact name (what refusals name).
    pub name: String,
    /// The staged executable.
    pub entrypoint: PathBuf,
    /// Decides on `on-tool-call` events.
    pub on_tool_call: bool,
    /// Decides on `on-shell` events.
    pub on_shell: bool,
}

/// The gate built from a capsule's policy hooks.
pub struct HookGate {
    /// Hooks in declaration order.
    pub hooks: Vec<PolicyHook>,
    /// `capabilities.shell.allow` (calls to these are `on-shell` events).
    pub shell_allow: Vec<String>,
    /// Tools answered by native artifacts (they win over a same-named shell binary).
    pub native_tools: Vec<String>,
    /// Where the hook runs.
    pub workdir: PathBuf,
    /// Where its oversized output goes.
    pub records_dir: PathBuf,
    /// The session's sandbox (a hook reads its event and writes nothing of the project).
    pub sandbox: std::sync::Arc<crate::contain::Sandbox>,
}

/// What one hook said.
enum Verdict {
    Proceed,
    Deny(String),
}

impl HookGate {
    async fn ask(&self, hook: &PolicyHook, event: &Value) -> Result<Verdict, String> {
        let cmd = self.sandbox.command(
            &hook.entrypoint,
            &self.workdir,
            crate::contain::Profile::Hook(hook.entrypoint.clone()),
        )?;
        let answered = answer_json(
            cmd,
            &self.records_dir,
            "hook",
            &event.to_string(),
            HOOK_DEADLINE,
        )
        .await
        .map_err(|e| match e {
            NoAnswer::Start(e) => format!("cannot start {}: {e}", hook.entrypoint.display()),
            NoAnswer::Deadline => {
                format!("it did not answer within {} s", HOOK_DEADLINE.as_secs())
            }
        })?;
        let answer: Value = serde_json::from_slice(&answered.out.head)
            .map_err(|e| format!("its answer is not JSON (exit code {}): {e}", answered.code))?;
        match answer.get("decision").and_then(Value::as_str) {
            Some("none") => Ok(Verdict::Proceed),
            Some("deny") => Ok(Verdict::Deny(
                answer
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .trim()
                    .to_string(),
            )),
            other => Err(format!(
                "it answered decision {:?}; a policy hook answers \"none\" or \"deny\"",
                other.unwrap_or("(missing)")
            )),
        }
    }
}

#[async_trait]
impl CallGate for HookGate {
    async fn decide(&self, call: &CallRequest, turn: u32) -> Option<Denied> {
        let shell =
            self.shell_allow.contains(&call.name) && !self.native_tools.contains(&call.name);
        let (event, target, body) = if shell {
            let binary = super::shell::which(&call.name)
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| call.name.clone());
            let command = call
                .input
                .get("command")
                .and_then(Value::as_str)
                .unwrap_or("");
            (
                "on-shell",
                binary.clone(),
                json!({"event": "on-shell", "turn": turn, "binary": binary, "command": command,
                       "input": call.input, "outcome": "none"}),
            )
        } else {
            (
                "on-tool-call",
                call.name.clone(),
                json!({"event": "on-tool-call", "turn": turn, "tool-name": call.name,
                       "input-bytes": call.input.to_string().len(), "input": call.input,
                       "outcome": "none"}),
            )
        };
        for hook in &self.hooks {
            let bound = if shell {
                hook.on_shell
            } else {
                hook.on_tool_call
            };
            if !bound {
                continue;
            }
            let reason = match self.ask(hook, &body).await {
                Ok(Verdict::Proceed) => continue,
                Ok(Verdict::Deny(r)) if r.is_empty() => format!(
                    "policy hook '{}' refused this call from '{event}' but returned an empty reason",
                    hook.name
                ),
                Ok(Verdict::Deny(r)) => r,
                Err(e) => format!(
                    "policy hook '{}' failed at the '{event}' decision point: {e}",
                    hook.name
                ),
            };
            return Some(Denied {
                hook: hook.name.clone(),
                event: event.to_string(),
                target,
                reason,
            });
        }
        None
    }
}
