//! The kernel's trace lines that more than one part of it writes, built in one place.
//!
//! A `delegation` line is written by the Session (an outcome, a refusal) and by a plan's capsule
//! step; a `delegation_start` by both too; a `task_failed` by a failed turn and by a crash. Each
//! is built here from typed facts, so its keys and their order cannot drift between writers.
//! (Lines with a single writer are still built where they are written, and the readers in
//! `mur trace` still spell event types as literals: the rest of issue 11's item 8.)

use std::path::Path;

use serde_json::json;

use super::TraceEvent;
use crate::text::truncate;

/// The `event_type` of the lines built here.
pub mod event_type {
    /// The task failed (driver error, malformed reply, runtime error, crash).
    pub const TASK_FAILED: &str = "task_failed";
    /// A delegation's child started.
    pub const DELEGATION_START: &str = "delegation_start";
    /// A delegation ended (or was refused).
    pub const DELEGATION: &str = "delegation";
}

/// The facts of a started child, for its `delegation_start` line.
pub struct DelegationStart<'a> {
    /// `dlg_…`.
    pub delegation_id: &'a str,
    /// Full capsule name.
    pub capsule: &'a str,
    /// Version.
    pub version: &'a str,
    /// The child's `ses_…`.
    pub child_session_id: &'a str,
    /// The child's work folder.
    pub child_workdir: &'a Path,
    /// The child's records folder.
    pub child_records_dir: &'a Path,
    /// The node it runs on (`mur node`); `None`, and no `node` key, in this process.
    pub node: Option<&'a str>,
}

/// `delegation_start`, hanging off the parent's `session_start`.
pub fn delegation_start(session_event: &str, d: &DelegationStart<'_>) -> TraceEvent {
    let line = TraceEvent::new(event_type::DELEGATION_START, Some(session_event))
        .with("delegation_id", d.delegation_id)
        .with("capsule", d.capsule)
        .with("version", d.version)
        .with("child_session_id", d.child_session_id)
        .with("child_workdir", d.child_workdir.display().to_string())
        .with(
            "child_records_dir",
            d.child_records_dir.display().to_string(),
        );
    with_node(line, d.node)
}

/// `line` with the `node` a remote child ran on; unchanged for a child of this process.
fn with_node(line: TraceEvent, node: Option<&str>) -> TraceEvent {
    match node {
        Some(n) => line.with("node", n),
        None => line,
    }
}

/// The facts of a delegation's end, for its `delegation` line.
pub struct DelegationEnd<'a> {
    /// Full capsule name (or what the model asked for, when refused).
    pub capsule: &'a str,
    /// Version.
    pub version: &'a str,
    /// `dlg_…`; `None` when nothing started.
    pub delegation_id: Option<&'a str>,
    /// The child's `ses_…`; `None` when nothing started.
    pub child_session_id: Option<&'a str>,
    /// From start to end (0 when refused).
    pub duration_ms: u64,
    /// `ok|error|crashed|terminated|refused`, or a plan step's `completed|failed|timed_out`.
    pub outcome: &'a str,
    /// Why it ended so (`null` when it answered).
    pub reason: Option<&'a str>,
    /// The child's usage `(input_tokens, output_tokens, turns)`, when it ran as a session's
    /// delegation; a refusal and a plan step's line carry none.
    pub usage: Option<(u64, u64, u32)>,
    /// The node it ran on; `None`, and no `node` key, in this process.
    pub node: Option<&'a str>,
}

/// `delegation`, hanging off the parent's `session_start`.
pub fn delegation(session_event: &str, d: &DelegationEnd<'_>) -> TraceEvent {
    let line = TraceEvent::new(event_type::DELEGATION, Some(session_event))
        .with("capsule", d.capsule)
        .with("version", d.version)
        .with("delegation_id", d.delegation_id)
        .with("child_session_id", d.child_session_id)
        .with("duration_ms", d.duration_ms)
        .with("outcome", d.outcome)
        .with("reason", d.reason);
    let line = with_node(line, d.node);
    match d.usage {
        Some((input_tokens, output_tokens, turns)) => line.with(
            "usage",
            json!({"input_tokens": input_tokens, "output_tokens": output_tokens, "turns": turns}),
        ),
        None => line,
    }
}

/// `task_failed`, hanging off `task_start`; the reason is cut to 2,000 bytes.
pub fn task_failed(
    task_event: &str,
    task_id: &str,
    turn: u32,
    cause: &str,
    reason: &str,
) -> TraceEvent {
    TraceEvent::new(event_type::TASK_FAILED, Some(task_event))
        .with("task_id", task_id)
        .with("turn", turn)
        .with("cause", cause)
        .with("reason", truncate(reason, 2000))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn a_refusal_and_an_outcome_share_keys_and_order() {
        let refused = delegation(
            "evt_s",
            &DelegationEnd {
                capsule: "acme/x",
                version: "0.1.0",
                delegation_id: None,
                child_session_id: None,
                duration_ms: 0,
                outcome: "refused",
                reason: Some("no"),
                usage: None,
                node: None,
            },
        );
        let keys: Vec<String> = refused.fields().keys().cloned().collect();
        assert_eq!(
            keys,
            [
                "capsule",
                "version",
                "delegation_id",
                "child_session_id",
                "duration_ms",
                "outcome",
                "reason"
            ]
        );
        let ok = delegation(
            "evt_s",
            &DelegationEnd {
                capsule: "acme/x",
                version: "0.1.0",
                delegation_id: Some("dlg_1"),
                child_session_id: Some("ses_c"),
                duration_ms: 5,
                outcome: "ok",
                reason: None,
                usage: Some((1, 2, 3)),
                node: Some("n1"),
            },
        );
        let keys: Vec<String> = ok.fields().keys().cloned().collect();
        assert_eq!(keys.last().map(String::as_str), Some("usage"));
        assert_eq!(ok.field("node"), Some(json!("n1")));
        assert_eq!(
            ok.field("usage"),
            Some(json!({"input_tokens": 1, "output_tokens": 2, "turns": 3}))
        );
        assert_eq!(ok.field("reason"), Some(Value::Null));
    }
}
