//! What a replay found: the first divergence, and how it prints (text with a unified diff, or
//! one JSON object).

use serde_json::{json, Value};

/// Where the replayed run first differs from the recording.
#[derive(Clone, Debug, PartialEq)]
pub struct Divergence {
    /// The session it happened in (the replay's id) and the one it replays.
    pub session: String,
    /// The recorded session.
    pub replay_of: String,
    /// The turn: of the tool call whose result differs, or of the model call whose request
    /// differs.
    pub turn: u32,
    /// What differs.
    pub kind: Kind,
}

/// The kinds of divergence.
#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    /// A tool's result differs from the recorded one.
    ToolResult {
        /// Tool name.
        tool: String,
        /// The call id.
        tool_call_id: String,
        /// The input the model gave.
        input: Value,
        /// Recorded text.
        recorded: String,
        /// What the tool returned now.
        replayed: String,
    },
    /// The request's system prompt or tool array differs (`system` or `tools`).
    Request {
        /// `system` or `tools`.
        part: &'static str,
        /// The recorded body (empty when the trace does not hold it).
        recorded: String,
        /// What the runtime sends now.
        replayed: String,
    },
    /// The run took another path: more or fewer model calls or tool calls than recorded.
    Path {
        /// A sentence saying what differs.
        what: String,
    },
}

impl Divergence {
    /// The text `mur replay` prints.
    pub fn render(&self) -> String {
        let mut out = String::new();
        match &self.kind {
            Kind::ToolResult {
                tool,
                input,
                recorded,
                replayed,
                ..
            } => {
                out.push_str(&format!(
                    "replay: diverged at turn {}: the result of {tool} differs\n",
                    self.turn
                ));
                out.push_str(&format!("tool:  {tool}\n"));
                out.push_str(&format!("input: {input}\n"));
                out.push_str(&unified(recorded, replayed));
            }
            Kind::Request {
                part,
                recorded,
                replayed,
            } => {
                let what = if *part == "system" {
                    "system prompt"
                } else {
                    "tool array"
                };
                out.push_str(&format!(
                    "replay: diverged at turn {}: the runtime now sends another {what} than the recorded one\n",
                    self.turn
                ));
                out.push_str(&unified(&pretty(recorded), &pretty(replayed)));
            }
            Kind::Path { what } => {
                out.push_str(&format!("replay: diverged at turn {}: {what}\n", self.turn));
            }
        }
        out
    }

    /// The `--json` object.
    pub fn json(&self) -> Value {
        let mut v = json!({
            "status": "diverged",
            "session": self.session,
            "replay_of": self.replay_of,
            "turn": self.turn,
        });
        let o = v.as_object_mut().expect("an object");
        match &self.kind {
            Kind::ToolResult {
                tool,
                tool_call_id,
                input,
                recorded,
                replayed,
            } => {
                o.insert("kind".into(), "tool_result".into());
                o.insert("tool".into(), tool.as_str().into());
                o.insert("tool_call_id".into(), tool_call_id.as_str().into());
                o.insert("input".into(), input.clone());
                o.insert("recorded".into(), recorded.as_str().into());
                o.insert("replayed".into(), replayed.as_str().into());
                o.insert("diff".into(), unified(recorded, replayed).into());
            }
            Kind::Request {
                part,
                recorded,
                replayed,
            } => {
                o.insert("kind".into(), format!("request_{part}").into());
                o.insert("recorded".into(), recorded.as_str().into());
                o.insert("replayed".into(), replayed.as_str().into());
                o.insert(
                    "diff".into(),
                    unified(&pretty(recorded), &pretty(replayed)).into(),
                );
            }
            Kind::Path { what } => {
                o.insert("kind".into(), "path".into());
                o.insert("what".into(), what.as_str().into());
            }
        }
        v
    }
}

/// A JSON body pretty-printed (keys in their order), or the text itself when it is not JSON.
fn pretty(body: &str) -> String {
    match serde_json::from_str::<Value>(body) {
        Ok(v @ (Value::Array(_) | Value::Object(_))) => {
            serde_json::to_string_pretty(&v).unwrap_or_else(|_| body.to_string())
        }
        _ => body.to_string(),
    }
}

/// Lines beyond which the diff stops looking for a common part (it prints both sides whole).
const DIFF_LINES: usize = 4000;

/// A unified diff of `a` (recorded) against `b` (replayed), three lines of context.
pub fn unified(a: &str, b: &str) -> String {
    let a: Vec<&str> = a.lines().collect();
    let b: Vec<&str> = b.lines().collect();
    let ops = if a.len() * b.len() <= DIFF_LINES * DIFF_LINES / 4 {
        lcs_ops(&a, &b)
    } else {
        let mut ops: Vec<Op> = a.iter().map(|_| Op::Del).collect();
        ops.extend(b.iter().map(|_| Op::Add));
        ops
    };
    let mut out = String::from("--- recorded\n+++ replayed\n");
    // Walk the ops, cutting hunks around changes.
    let (mut i, mut j) = (0usize, 0usize);
    let mut rows: Vec<(char, &str, usize, usize)> = Vec::new();
    for op in &ops {
        match op {
            Op::Same => {
                rows.push((' ', a[i], i, j));
                i += 1;
                j += 1;
            }
            Op::Del => {
                rows.push(('-', a[i], i, j));
                i += 1;
            }
            Op::Add => {
                rows.push(('+', b[j], i, j));
                j += 1;
            }
        }
    }
    const CONTEXT: usize = 3;
    let changed: Vec<usize> = rows
        .iter()
        .enumerate()
        .filter(|(_, r)| r.0 != ' ')
        .map(|(n, _)| n)
        .collect();
    if changed.is_empty() {
        return out;
    }
    let mut start = 0;
    while start < changed.len() {
        let mut end = start;
        while end + 1 < changed.len() && changed[end + 1] - changed[end] <= 2 * CONTEXT {
            end += 1;
        }
        let from = changed[start].saturating_sub(CONTEXT);
        let to = (changed[end] + CONTEXT + 1).min(rows.len());
        let hunk = &rows[from..to];
        let a_len = hunk.iter().filter(|r| r.0 != '+').count();
        let b_len = hunk.iter().filter(|r| r.0 != '-').count();
        let a_start = hunk.first().map(|r| r.2).unwrap_or(0);
        let b_start = hunk.first().map(|r| r.3).unwrap_or(0);
        out.push_str(&format!(
            "@@ -{} +{} @@\n",
            range(a_start, a_len),
            range(b_start, b_len)
        ));
        for r in hunk {
            out.push(r.0);
            out.push_str(r.1);
            out.push('\n');
        }
        start = end + 1;
    }
    out
}

fn range(start: usize, len: usize) -> String {
    match len {
        0 => format!("{start},0"),
        1 => format!("{}", start + 1),
        n => format!("{},{n}", start + 1),
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Same,
    Del,
    Add,
}

/// The edit script of a longest common subsequence of lines.
fn lcs_ops(a: &[&str], b: &[&str]) -> Vec<Op> {
    let (n, m) = (a.len(), b.len());
    let mut t = vec![0u32; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            t[at(i, j)] = if a[i] == b[j] {
                t[at(i + 1, j + 1)] + 1
            } else {
                t[at(i + 1, j)].max(t[at(i, j + 1)])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut ops = Vec::with_capacity(n + m);
    while i < n && j < m {
        if a[i] == b[j] {
            ops.push(Op::Same);
            i += 1;
            j += 1;
        } else if t[at(i + 1, j)] >= t[at(i, j + 1)] {
            ops.push(Op::Del);
            i += 1;
        } else {
            ops.push(Op::Add);
            j += 1;
        }
    }
    ops.extend(std::iter::repeat_n(Op::Del, n - i));
    ops.extend(std::iter::repeat_n(Op::Add, m - j));
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_line_gets_a_hunk_with_context() {
        let d = unified("a\nb\nc\nd\n", "a\nb\nX\nd\n");
        assert_eq!(
            d,
            "--- recorded\n+++ replayed\n@@ -1,4 +1,4 @@\n a\n b\n-c\n+X\n d\n"
        );
    }

    #[test]
    fn identical_texts_have_no_hunk() {
        assert_eq!(unified("a\n", "a\n"), "--- recorded\n+++ replayed\n");
    }
}
