//! `mur replay --tools recorded`: every tool call answered from the recording, nothing run.

use std::sync::Arc;

use mur_actors::continuation::ToolPlayback;
use mur_actors::protocol::{CallKind, CallRequest, CallResult, Dispatched};
use mur_actors::tool::{ExecStatus, ShellFacts};

use super::recording::Recording;

/// Plays a recording's tool results back.
pub struct RecordedTools {
    rec: Arc<Recording>,
}

impl RecordedTools {
    /// Playback of `rec`.
    pub fn new(rec: Arc<Recording>) -> RecordedTools {
        RecordedTools { rec }
    }
}

impl ToolPlayback for RecordedTools {
    fn injected(&self, turn: u32) -> Vec<String> {
        self.rec
            .injected
            .iter()
            .filter(|m| m.turn == turn)
            .map(|m| m.text.clone())
            .collect()
    }

    fn answer(&self, call: CallRequest) -> Dispatched {
        let found = self
            .rec
            .counted()
            .filter(|t| t.turn == call.turn)
            .flat_map(|t| &t.calls)
            .find(|c| c.id == call.id && c.name == call.name && c.output.is_some());
        let Some(c) = found else {
            let text = format!(
                "replay: the recording holds no result for the call {} ({}) of turn {}",
                call.id, call.name, call.turn
            );
            return Dispatched {
                request: call,
                kind: CallKind::Tool,
                result: CallResult::Refused { text },
                duration_ms: 0,
                effect: None,
            };
        };
        let text = c.output.clone().unwrap_or_default();
        let shell = c.shell.as_ref().map(|s| ShellFacts {
            binary: s["binary"].as_str().unwrap_or_default().to_string(),
            command: s["command"].as_str().unwrap_or_default().to_string(),
            exit_code: s["exit_code"].as_i64().unwrap_or(0) as i32,
            stdout_bytes: s["stdout_bytes"].as_u64().unwrap_or(0),
            stderr_bytes: s["stderr_bytes"].as_u64().unwrap_or(0),
        });
        let kind = if c.line == "skill_call" {
            CallKind::Skill
        } else {
            CallKind::Tool
        };
        let result = if c.error.is_some() || c.line == "call_denied" {
            CallResult::Refused { text }
        } else {
            CallResult::Ran {
                status: if c.is_error {
                    ExecStatus::Failed
                } else {
                    ExecStatus::Passed
                },
                text,
                output_bytes: c.output_bytes,
                shell,
            }
        };
        Dispatched {
            request: call,
            kind,
            result,
            duration_ms: 0,
            effect: None,
        }
    }
}
