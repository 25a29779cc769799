//! `lifecycle:` and `trace:`: how long things may take and what the trace keeps.
//!
//! Only a few of these settings change what `mur` does today (the delegation deadline, the
//! capture level); the rest are parsed so that upstream manifests load and typos are caught.

use super::reader::{Block, Ctx};

/// Default time a delegation may run before the parent gives up on it, in seconds.
pub const DEFAULT_DELEGATION_DEADLINE_SECS: u64 = 600;

/// `lifecycle:`.
#[derive(Clone, Debug, PartialEq)]
pub struct Lifecycle {
    /// `delegation_deadline_secs` (default 600).
    pub delegation_deadline_secs: u64,
    /// `task_acceptance`: none | single | queue.
    pub task_acceptance: Option<String>,
    /// `after_task`: exit | sleep.
    pub after_task: Option<String>,
    /// `queue_depth` for `task_acceptance: queue`.
    pub queue_depth: Option<u64>,
    /// `input_timeout_secs`.
    pub input_timeout_secs: Option<u64>,
    /// `conversation`: stateless | threaded.
    pub conversation: Option<String>,
    /// `max_task_reopens`.
    pub max_task_reopens: Option<u64>,
    /// `shell_grace_secs`: how long a canceled command gets before it is killed.
    pub shell_grace_secs: Option<u64>,
    /// `deadline_notice_secs`.
    pub deadline_notice_secs: Option<u64>,
    /// `keep_working` as written.
    pub keep_working: serde_json::Value,
    /// `done_check` as written.
    pub done_check: serde_json::Value,
}

impl Default for Lifecycle {
    fn default() -> Self {
        Lifecycle {
            delegation_deadline_secs: DEFAULT_DELEGATION_DEADLINE_SECS,
            task_acceptance: None,
            after_task: None,
            queue_depth: None,
            input_timeout_secs: None,
            conversation: None,
            max_task_reopens: None,
            shell_grace_secs: None,
            deadline_notice_secs: None,
            keep_working: serde_json::Value::Null,
            done_check: serde_json::Value::Null,
        }
    }
}

/// `trace:`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TraceConfig {
    /// `capture` (default meta).
    pub capture: Capture,
    /// `retain` as written.
    pub retain: serde_json::Value,
}

/// How much of each call the trace keeps (`trace.capture`): the kernel's own setting.
pub use mur_actors::spec::Capture;

const LIFECYCLE_KEYS: &[&str] = &[
    "task_acceptance",
    "after_task",
    "queue_depth",
    "input_timeout_secs",
    "conversation",
    "max_task_reopens",
    "shell_grace_secs",
    "delegation_deadline_secs",
    "deadline_notice_secs",
    "keep_working",
    "done_check",
];

pub(crate) fn parse_lifecycle(ctx: &mut Ctx, top: &Block<'_>) -> Lifecycle {
    let mut l = Lifecycle::default();
    let Some(b) = top.child(ctx, "lifecycle", LIFECYCLE_KEYS) else {
        return l;
    };
    if let Some(n) = b.positive(ctx, "delegation_deadline_secs") {
        l.delegation_deadline_secs = n;
    }
    l.task_acceptance = b.word(ctx, "task_acceptance", &["none", "single", "queue"]);
    l.after_task = b.word(ctx, "after_task", &["exit", "sleep"]);
    l.queue_depth = b.u64(ctx, "queue_depth");
    if l.task_acceptance.as_deref() == Some("queue") && l.queue_depth == Some(0) {
        b.invalid(
            ctx,
            "queue_depth",
            "0 leaves task_acceptance: queue no room for a waiting task",
        );
    }
    l.input_timeout_secs = b.positive(ctx, "input_timeout_secs");
    l.conversation = b.word(ctx, "conversation", &["stateless", "threaded"]);
    l.max_task_reopens = b.u64(ctx, "max_task_reopens");
    l.shell_grace_secs = b.u64(ctx, "shell_grace_secs");
    l.deadline_notice_secs = b.positive(ctx, "deadline_notice_secs");
    if let Some(k) = b.child(ctx, "keep_working", &["message", "limit"]) {
        let _ = k.str(ctx, "message");
        let _ = k.positive(ctx, "limit");
        l.keep_working = b.json(ctx, "keep_working").unwrap_or_default();
    }
    if let Some(d) = b.child(ctx, "done_check", &["command", "limit", "timeout_secs"]) {
        let _ = d.str(ctx, "command");
        let _ = d.positive(ctx, "limit");
        let _ = d.positive(ctx, "timeout_secs");
        l.done_check = b.json(ctx, "done_check").unwrap_or_default();
    }
    l
}

pub(crate) fn parse_trace(ctx: &mut Ctx, top: &Block<'_>) -> TraceConfig {
    let mut t = TraceConfig::default();
    let Some(b) = top.child(ctx, "trace", &["capture", "retain"]) else {
        return t;
    };
    t.capture = match b
        .word(ctx, "capture", &["none", "meta", "content"])
        .as_deref()
    {
        Some("none") => Capture::None,
        Some("content") => Capture::Content,
        _ => Capture::Meta,
    };
    if let Some(r) = b.child(ctx, "retain", &["max_sessions", "max_age"]) {
        let _ = r.positive(ctx, "max_sessions");
        t.retain = b.json(ctx, "retain").unwrap_or_default();
    }
    t
}
