//! `mur trace diff`: two sessions side by side, and where they first went different ways.
//!
//! The table compares what a user checks for a regression — turns, duration, tokens, tool
//! calls (overall and by tool), shell calls and the outcome — with a signed delta. Then the
//! runs are walked turn by turn: the first turn whose decision, tools or tool inputs differ is
//! the divergence point, shown with what each run did there.

use std::collections::BTreeSet;
use std::fmt::Write;

use serde_json::{json, Value};

use super::format::{self, opt_duration, thousands, truncate, Style};
use super::show::{capsule_text, status_text};
use super::summary::{Summary, Turn};

const METRIC: usize = 22;
const RUN: usize = 16;

/// Where two runs first differ.
#[derive(Debug, PartialEq, Eq)]
pub enum Divergence {
    /// Same decisions, tools and inputs on every turn.
    None {
        /// Turns compared.
        turns: usize,
    },
    /// They differ at this turn index (0-based position in the runs).
    At {
        /// Position of the turn.
        index: usize,
        /// What run A did there (`None`: it had ended).
        a: Option<String>,
        /// What run B did there.
        b: Option<String>,
    },
}

/// Find the first turn where `a` and `b` differ.
pub fn divergence(a: &Summary, b: &Summary) -> Divergence {
    let n = a.turns.len().max(b.turns.len());
    for i in 0..n {
        let (ta, tb) = (a.turns.get(i), b.turns.get(i));
        let same = match (ta, tb) {
            (Some(x), Some(y)) => signature(x, true) == signature(y, true),
            _ => false,
        };
        if !same {
            let with_input = match (ta, tb) {
                (Some(x), Some(y)) => signature(x, false) == signature(y, false),
                _ => false,
            };
            return Divergence::At {
                index: i,
                a: ta.map(|t| describe(t, with_input)),
                b: tb.map(|t| describe(t, with_input)),
            };
        }
    }
    Divergence::None { turns: n }
}

fn signature(t: &Turn, inputs: bool) -> (String, Vec<(String, Option<String>)>) {
    let calls = t
        .calls
        .iter()
        .map(|c| {
            (
                c.tool.clone(),
                if inputs {
                    c.input.as_ref().map(Value::to_string)
                } else {
                    None
                },
            )
        })
        .collect();
    (t.decision.clone(), calls)
}

fn describe(t: &Turn, with_input: bool) -> String {
    let mut out = format!("turn {}  {}", t.turn, t.decision);
    if t.calls.is_empty() {
        if let Some(tool) = &t.tool_name {
            out.push_str(&format!("  {tool}"));
        }
    }
    for c in &t.calls {
        out.push_str(&format!("  {}", c.tool));
        if with_input {
            if let Some(input) = &c.input {
                out.push_str(&format!(" {}", truncate(&input.to_string(), 80)));
            }
        }
    }
    out
}

/// Render `mur trace diff` for runs A and B.
pub fn render(a: &Summary, b: &Summary, st: &Style) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "Run A: {}  {}", a.session_id, capsule_text(a));
    let _ = writeln!(o, "Run B: {}  {}", b.session_id, capsule_text(b));
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "{}",
        st.bold(&format!(
            "{:<METRIC$}{:<RUN$}{:<RUN$}{}",
            "Metric", "Run A", "Run B", "Delta"
        ))
    );
    let _ = writeln!(
        o,
        "{} {} {} {}",
        "─".repeat(METRIC - 1),
        "─".repeat(RUN - 1),
        "─".repeat(RUN - 1),
        "─".repeat(26)
    );
    let (ta, tb) = (&a.totals, &b.totals);
    let rows: Vec<(String, String, String, String)> = vec![
        count_row("turns", ta.turns, tb.turns),
        (
            "duration".into(),
            opt_duration(a.duration_ms),
            opt_duration(b.duration_ms),
            match (a.duration_ms, b.duration_ms) {
                (Some(x), Some(y)) if x == y => "=".into(),
                (Some(x), Some(y)) if y > x => format!("+{}", format::duration(y - x)),
                (Some(x), Some(y)) => format!("-{}", format::duration(x - y)),
                _ => "—".into(),
            },
        ),
        count_row("input tokens", ta.input_tokens, tb.input_tokens),
        count_row("output tokens", ta.output_tokens, tb.output_tokens),
        count_row("tool calls", ta.tool_calls, tb.tool_calls),
        (
            "tool success rate".into(),
            rate(a),
            rate(b),
            if rate(a) == rate(b) {
                "=".into()
            } else {
                "—".into()
            },
        ),
        count_row("shell calls", ta.shell_calls, tb.shell_calls),
        (
            "exit status".into(),
            short_status(a),
            short_status(b),
            if short_status(a) == short_status(b) {
                "=".into()
            } else {
                "differs".into()
            },
        ),
    ];
    for (m, x, y, d) in rows {
        let _ = writeln!(o, "{m:<METRIC$}{x:<RUN$}{y:<RUN$}{d}");
    }
    let names: BTreeSet<&String> = a.tools.keys().chain(b.tools.keys()).collect();
    if !names.is_empty() {
        let _ = writeln!(o, "\n{}", st.heading("Tools"));
        for name in names {
            let x = a.tools.get(name).map_or(0, |n| n.calls);
            let y = b.tools.get(name).map_or(0, |n| n.calls);
            let (m, xs, ys, d) = count_row(&format!("  {name}"), x, y);
            let _ = writeln!(o, "{m:<METRIC$}{xs:<RUN$}{ys:<RUN$}{d}");
        }
    }
    let _ = writeln!(o, "\n{}", st.heading("Divergence"));
    match divergence(a, b) {
        Divergence::None { turns } => {
            let _ = writeln!(
                o,
                "none: both runs made the same decisions and tool calls over {turns} turn{}",
                if turns == 1 { "" } else { "s" }
            );
        }
        Divergence::At {
            index,
            a: da,
            b: db,
        } => {
            let _ = writeln!(o, "first divergence at step {}:", index + 1);
            let _ = writeln!(o, "  A: {}", da.unwrap_or_else(|| "(run ended)".into()));
            let _ = writeln!(o, "  B: {}", db.unwrap_or_else(|| "(run ended)".into()));
        }
    }
    o
}

/// The `--json` document.
pub fn json(a: &Summary, b: &Summary) -> Value {
    let div = match divergence(a, b) {
        Divergence::None { turns } => json!({"diverges": false, "turns_compared": turns}),
        Divergence::At { index, a, b } => {
            json!({"diverges": true, "turn_position": index, "a": a, "b": b})
        }
    };
    let side = |s: &Summary| {
        let mut v = s.header_json();
        v.insert("tool_calls".into(), json!(s.tool_calls));
        v.insert("tools".into(), json!(s.tools));
        Value::Object(v)
    };
    json!({"a": side(a), "b": side(b), "divergence": div})
}

fn count_row(metric: &str, x: u64, y: u64) -> (String, String, String, String) {
    let delta = if x == y {
        "=".to_string()
    } else if y > x {
        format!("+{}", thousands(y - x))
    } else {
        format!("-{}", thousands(x - y))
    };
    (metric.to_string(), thousands(x), thousands(y), delta)
}

fn rate(s: &Summary) -> String {
    if s.tool_calls.count == 0 {
        "—".into()
    } else {
        format!(
            "{:.1}%",
            s.tool_calls.ok as f64 * 100.0 / s.tool_calls.count as f64
        )
    }
}

fn short_status(s: &Summary) -> String {
    if s.ended {
        status_text(s)
    } else {
        "no session_end".into()
    }
}
