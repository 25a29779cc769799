//! A recorded session as `mur replay` and `mur resume` need it: every model reply, every tool
//! result the model saw, the bodies the hashes name, the delegations, read from one
//! `trace.jsonl` written under `trace.capture: content`.
//!
//! Lines are read whole; a torn last line (a killed `mur`) is dropped, a damaged line anywhere
//! else is an error naming the file and the line. Unknown events and keys are ignored.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use mur_actors::model::{ContentBlock, InferReply, StopReason, Usage};
use mur_actors::trace::EventType;
use serde_json::Value;

use crate::diagnostic::Diagnostic;

/// The largest trace a replay or resume reads.
pub const TRACE_CAP: u64 = 1 << 30;

/// One tool call of a recorded turn and the result the model saw.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    /// The provider's call id.
    pub id: String,
    /// The tool name.
    pub name: String,
    /// The input the model gave.
    pub input: Value,
    /// The text the model read (`None`: not recorded, the call never finished).
    pub output: Option<String>,
    /// The model saw `is_error: true`.
    pub is_error: bool,
    /// `tool_call`, `skill_call` or `call_denied`.
    pub line: &'static str,
    /// The `shell` line that followed it, if any.
    pub shell: Option<Value>,
    /// The runtime's refusal text (`error`), when it could not run the call.
    pub error: Option<String>,
    /// `output_bytes` of its line.
    pub output_bytes: u64,
}

/// One recorded model call.
#[derive(Clone, Debug, PartialEq)]
pub struct Turn {
    /// 0-based.
    pub turn: u32,
    /// `system_sha`.
    pub system_sha: Option<String>,
    /// `tools_sha`.
    pub tools_sha: Option<String>,
    /// The reply, as received (`None` when the call failed).
    pub reply: Option<InferReply>,
    /// A failed call: `(error_code, error)`.
    pub error: Option<(String, String)>,
    /// Its tool calls in the order the model listed them (from the reply; results filled in
    /// from the lines that followed).
    pub calls: Vec<Call>,
    /// `input_tokens` and `output_tokens` the line counted.
    pub tokens: (u64, u64),
}

/// One delegation the session started.
#[derive(Clone, Debug, PartialEq)]
pub struct Delegation {
    /// `dlg_…`.
    pub id: String,
    /// Full capsule name.
    pub capsule: String,
    /// Version.
    pub version: String,
    /// The child's `ses_…`.
    pub child_session_id: String,
    /// The child's records folder (its trace).
    pub child_records_dir: PathBuf,
    /// The terminal `delegation` line's outcome; `None` while it was still running.
    pub outcome: Option<String>,
    /// The child's usage as the terminal line gave it: (input, output).
    pub tokens: (u64, u64),
}

/// A user message the runtime injected (`user_message`): before model call `turn`.
#[derive(Clone, Debug, PartialEq)]
pub struct Injected {
    /// The model call it precedes.
    pub turn: u32,
    /// The text.
    pub text: String,
    /// The delegations whose outcomes it carries.
    pub delegations: Vec<String>,
}

/// A change to the artifacts a session held, as its trace records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArtifactChange {
    /// An `artifact_pulled` line: the artifact's full name.
    Pulled(String),
    /// A `remove-artifact` call that answered `"removed": true`: the artifact's full name.
    Removed(String),
}

/// The artifact a `remove-artifact` result says it removed: the runtime's own answer, a fenced
/// `{"artifact", "removed": true}` on the line after the fence's opening.
fn removed_artifact(output: &str) -> Option<String> {
    let v: Value = serde_json::from_str(output.lines().nth(1)?).ok()?;
    (v.get("removed") == Some(&Value::Bool(true)))
        .then(|| text(&v, "artifact"))
        .flatten()
}

/// A recorded session.
#[derive(Clone, Debug, Default)]
pub struct Recording {
    /// The trace file.
    pub path: PathBuf,
    /// Its records folder.
    pub dir: PathBuf,
    /// `ses_…`.
    pub session_id: String,
    /// `capsule_name`.
    pub capsule_name: String,
    /// `capsule_version`.
    pub capsule_version: String,
    /// The whole `session_start` line.
    pub start: serde_json::Map<String, Value>,
    /// The work folder it ran in (`session_start.workdir`).
    pub workdir: Option<PathBuf>,
    /// The task (`task_start.task`, else the records' `task.md`).
    pub task: Option<String>,
    /// Bodies by sha256 (`body` lines).
    pub bodies: HashMap<String, String>,
    /// Model calls, in order (failed ones included).
    pub turns: Vec<Turn>,
    /// User messages the runtime injected.
    pub injected: Vec<Injected>,
    /// Delegations, in the order they started.
    pub delegations: Vec<Delegation>,
    /// `session_end.exit_status`, when the session ended.
    pub exit_status: Option<String>,
    /// The session's counters, from its own lines: turns, input and output tokens, tool calls,
    /// shell calls (delegated tokens included, as the session counted them). A resumed
    /// session's `session_start.resumed_totals` are not in them.
    pub totals: mur_actors::session::Totals,
    /// The last line was torn and dropped.
    pub torn: bool,
    /// Some line carried content (a `body` line or an `inference.response`).
    pub has_content: bool,
    /// Every `artifact_pulled` line.
    pub pulled: Vec<serde_json::Map<String, Value>>,
    /// The pulls and removals the session made, in trace order (full artifact names): what it
    /// held at its end is every pull not removed after it.
    pub artifact_changes: Vec<ArtifactChange>,
    /// Results of calls this trace holds no reply for (a resumed session finishing the calls
    /// of the session it resumed).
    pub orphans: Vec<Call>,
}

impl Recording {
    /// The replies of counted turns only (failed calls left out): turn `k` of the
    /// conversation is `counted()[k]`.
    pub fn counted(&self) -> impl Iterator<Item = &Turn> {
        self.turns.iter().filter(|t| t.reply.is_some())
    }

    /// The model call the runtime makes as its `k`-th (0-based): the `k`-th counted turn, or
    /// the failed call that ended the session there.
    pub fn call(&self, k: usize) -> Option<&Turn> {
        let mut seen = 0;
        for t in &self.turns {
            if t.reply.is_none() {
                if seen == k {
                    return Some(t);
                }
                continue;
            }
            if seen == k {
                return Some(t);
            }
            seen += 1;
        }
        None
    }

    /// Entry `k`: how many delegation outcomes the model had read before its model call `k`
    /// (the replay's schedule, so that outcomes land where they did whatever the timing).
    pub fn outcome_schedule(&self) -> Vec<u32> {
        let mut out = Vec::new();
        let mut seen = 0u32;
        for k in 0..self.counted().count() as u32 {
            seen += self
                .injected
                .iter()
                .filter(|m| m.turn == k)
                .map(|m| m.delegations.len() as u32)
                .sum::<u32>();
            out.push(seen);
        }
        out
    }

    /// How many tool calls the session made (tool, skill and denied calls with a result).
    pub fn call_count(&self) -> usize {
        self.turns
            .iter()
            .flat_map(|t| &t.calls)
            .filter(|c| c.output.is_some())
            .count()
    }
}

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

fn num(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

/// The neutral stop reason of a recorded `stop_reason`.
pub fn stop_reason(s: &str) -> StopReason {
    match s {
        "end_turn" => StopReason::EndTurn,
        "tool_call" => StopReason::ToolCall,
        "max_tokens" => StopReason::MaxTokens,
        other => StopReason::Other(other.to_string()),
    }
}

/// Read `path` (a `trace.jsonl`).
pub fn read(path: &Path) -> Result<Recording, Diagnostic> {
    let bytes = crate::files::read_capped(path, TRACE_CAP).map_err(|e| {
        Diagnostic::error("E-IO-001", format!("cannot read {}: {e}", path.display()))
    })?;
    let path = &std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut rec = Recording {
        path: path.to_path_buf(),
        dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
        ..Recording::default()
    };
    let lines: Vec<&[u8]> = bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .collect();
    let last = lines.len().saturating_sub(1);
    // Tool calls awaiting their result line, by id.
    for (n, line) in lines.iter().enumerate() {
        let v: Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(_) if n == last && !bytes.ends_with(b"\n") => {
                rec.torn = true;
                break;
            }
            Err(e) => {
                return Err(Diagnostic::error(
                    "E-TRC-001",
                    format!("{}:{}: not a trace line: {e}", path.display(), n + 1),
                ))
            }
        };
        push(&mut rec, &v);
    }
    if rec.session_id.is_empty() {
        return Err(Diagnostic::error(
            "E-TRC-001",
            format!("{}: no session_start event found", path.display()),
        ));
    }
    if rec.task.is_none() {
        rec.task = std::fs::read_to_string(rec.dir.join("task.md")).ok();
    }
    Ok(rec)
}

fn push(rec: &mut Recording, v: &Value) {
    let kind = v.get("event_type").and_then(Value::as_str).unwrap_or("");
    match EventType::parse(kind) {
        Some(EventType::SessionStart) => {
            rec.session_id = text(v, "session_id").unwrap_or_default();
            rec.capsule_name = text(v, "capsule_name").unwrap_or_default();
            rec.capsule_version = text(v, "capsule_version").unwrap_or_default();
            rec.workdir = text(v, "workdir").map(PathBuf::from);
            rec.start = v.as_object().cloned().unwrap_or_default();
        }
        Some(EventType::TaskStart) => {
            if let Some(t) = text(v, "task") {
                rec.task = Some(t);
            }
        }
        Some(EventType::Body) => {
            if let (Some(sha), Some(body)) = (text(v, "sha256"), text(v, "body")) {
                rec.bodies.insert(sha, body);
                rec.has_content = true;
            }
        }
        Some(EventType::Inference) => {
            let turn = num(v, "turn").unwrap_or(0) as u32;
            let tokens = (
                num(v, "input_tokens").unwrap_or(0),
                num(v, "output_tokens").unwrap_or(0),
            );
            let mut t = Turn {
                turn,
                system_sha: text(v, "system_sha"),
                tools_sha: text(v, "tools_sha"),
                reply: None,
                error: None,
                calls: Vec::new(),
                tokens,
            };
            if text(v, "decision").as_deref() == Some("error") {
                t.error = Some((
                    text(v, "error_code").unwrap_or_else(|| "driver_error".into()),
                    text(v, "error").unwrap_or_default(),
                ));
            } else {
                rec.totals.turns = rec.totals.turns.saturating_add(1);
                rec.totals.input_tokens = rec.totals.input_tokens.saturating_add(tokens.0);
                rec.totals.output_tokens = rec.totals.output_tokens.saturating_add(tokens.1);
                let content: Option<Vec<ContentBlock>> = v
                    .get("response")
                    .and_then(Value::as_str)
                    .and_then(|r| serde_json::from_str(r).ok());
                if content.is_some() {
                    rec.has_content = true;
                }
                let content = content.unwrap_or_default();
                t.calls = content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::ToolCall { id, name, input } => Some(Call {
                            id: id.clone(),
                            name: name.clone(),
                            input: input.clone(),
                            output: None,
                            is_error: false,
                            line: "tool_call",
                            shell: None,
                            error: None,
                            output_bytes: 0,
                        }),
                        _ => None,
                    })
                    .collect();
                t.reply = Some(InferReply {
                    stop_reason: stop_reason(&text(v, "stop_reason").unwrap_or_default()),
                    content,
                    usage: Usage {
                        input_tokens: num(v, "input_tokens_actual"),
                        output_tokens: num(v, "output_tokens_actual"),
                        cached_tokens: num(v, "cached_tokens"),
                        cache_write_tokens: num(v, "cache_write_tokens"),
                        thinking_tokens: num(v, "thinking_tokens"),
                    },
                    attempts: 1,
                });
            }
            rec.turns.push(t);
        }
        Some(EventType::ToolCall) | Some(EventType::SkillCall) | Some(EventType::CallDenied) => {
            if kind == "tool_call" {
                rec.totals.tool_calls = rec.totals.tool_calls.saturating_add(1);
            }
            let Some(id) = text(v, "tool_call_id") else {
                return;
            };
            let found = rec
                .turns
                .iter_mut()
                .rev()
                .flat_map(|t| t.calls.iter_mut())
                .any(|c| c.id == id && c.output.is_none());
            if !found {
                rec.orphans.push(Call {
                    id: id.clone(),
                    name: text(v, "tool_name")
                        .or_else(|| text(v, "skill_name"))
                        .unwrap_or_default(),
                    input: v.get("input").cloned().unwrap_or(Value::Null),
                    output: None,
                    is_error: false,
                    line: "tool_call",
                    shell: None,
                    error: None,
                    output_bytes: 0,
                });
            }
            let Some(call) = rec
                .turns
                .iter_mut()
                .rev()
                .flat_map(|t| t.calls.iter_mut())
                .find(|c| c.id == id && c.output.is_none())
                .or(rec.orphans.last_mut().filter(|c| c.id == id))
            else {
                return;
            };
            call.output = text(v, "output");
            call.is_error = kind == "call_denied" || text(v, "status").as_deref() == Some("error");
            call.line = match kind {
                "skill_call" => "skill_call",
                "call_denied" => "call_denied",
                _ => "tool_call",
            };
            call.error = text(v, "error");
            call.output_bytes = num(v, "output_bytes").unwrap_or(0);
            if kind == "tool_call" && call.name == "remove-artifact" && !call.is_error {
                if let Some(name) = call.output.as_deref().and_then(removed_artifact) {
                    rec.artifact_changes.push(ArtifactChange::Removed(name));
                }
            }
        }
        Some(EventType::Shell) => {
            rec.totals.shell_calls = rec.totals.shell_calls.saturating_add(1);
            if let Some(call) = rec
                .turns
                .last_mut()
                .and_then(|t| t.calls.iter_mut().rev().find(|c| c.output.is_some()))
            {
                call.shell = Some(v.clone());
            }
        }
        Some(EventType::UserMessage) => rec.injected.push(Injected {
            turn: num(v, "turn").unwrap_or(0) as u32,
            text: text(v, "text").unwrap_or_default(),
            delegations: v
                .get("delegations")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|d| d.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
        }),
        Some(EventType::DelegationStart) => rec.delegations.push(Delegation {
            id: text(v, "delegation_id").unwrap_or_default(),
            capsule: text(v, "capsule").unwrap_or_default(),
            version: text(v, "version").unwrap_or_default(),
            child_session_id: text(v, "child_session_id").unwrap_or_default(),
            child_records_dir: text(v, "child_records_dir")
                .map(PathBuf::from)
                .unwrap_or_default(),
            outcome: None,
            tokens: (0, 0),
        }),
        Some(EventType::Delegation) => {
            let id = text(v, "delegation_id").unwrap_or_default();
            let usage = v.get("usage").cloned().unwrap_or(Value::Null);
            let tokens = (
                num(&usage, "input_tokens").unwrap_or(0),
                num(&usage, "output_tokens").unwrap_or(0),
            );
            if let Some(d) = rec.delegations.iter_mut().find(|d| d.id == id) {
                d.outcome = text(v, "outcome");
                d.tokens = tokens;
                // The session added the child's usage to its own when the outcome settled.
                rec.totals.input_tokens = rec.totals.input_tokens.saturating_add(tokens.0);
                rec.totals.output_tokens = rec.totals.output_tokens.saturating_add(tokens.1);
            }
        }
        Some(EventType::ArtifactPulled) => {
            if let Some(name) = text(v, "name") {
                rec.artifact_changes.push(ArtifactChange::Pulled(name));
            }
            if let Some(o) = v.as_object() {
                rec.pulled.push(o.clone());
            }
        }
        Some(EventType::SessionEnd) => rec.exit_status = text(v, "exit_status"),
        _ => {}
    }
}
