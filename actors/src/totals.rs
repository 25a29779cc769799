//! A session's counters, a leaf: the Session keeps them, the trace lines and the reports carry
//! them, and a resumed session starts from them.

/// Counters that end up in `task_end` and `session_end`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Counted `inference` lines.
    pub turns: u32,
    /// Input tokens (provider figure when reported, else the runtime's estimate).
    pub input_tokens: u64,
    /// Output tokens (same rule).
    pub output_tokens: u64,
    /// `tool_call` lines.
    pub tool_calls: u32,
    /// `shell` lines.
    pub shell_calls: u32,
}
