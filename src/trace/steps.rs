//! `mur trace steps`: what the agent did, one turn at a time.
//!
//! Each turn is one line (`turn N  <decision>  <tool>`), followed by its tool calls and, in
//! stream order, the other things that happened on it (pulls, refusals, delegations, retries).
//! `--verbose` adds a short quote of each call's input: the first string found in it.

use std::fmt::Write;

use serde_json::{json, Value};

use super::format::{opt_duration, truncate, Style};
use super::summary::{Call, Summary};

/// Longest input quote under `--verbose`.
pub const INPUT_SUMMARY: usize = 60;

/// Render `mur trace steps`.
pub fn render(s: &Summary, verbose: bool, st: &Style) -> String {
    let mut o = String::new();
    let turns = s.totals.turns;
    let tasks = if s.tasks > 0 {
        format!("{} task{}, ", s.tasks, if s.tasks == 1 { "" } else { "s" })
    } else {
        String::new()
    };
    let _ = writeln!(
        o,
        "{}  ({tasks}{turns} turn{})",
        st.bold(&format!("Session {}", s.session_id)),
        if turns == 1 { "" } else { "s" }
    );
    for note in &s.preamble {
        let _ = writeln!(o, "  · {note}");
    }
    let mut task = 0;
    for t in &s.turns {
        if s.tasks > 1 && t.task != task {
            task = t.task;
            let _ = writeln!(o, "  {}", st.bold(&format!("task {task}")));
        }
        let mut line = format!("  turn {}  {}", t.turn, t.decision);
        if t.decision == "error" {
            if let Some(code) = &t.error_code {
                line.push_str(&format!("  {code}"));
            }
            if let Some(h) = t.provider_status {
                line.push_str(&format!("  HTTP {h}"));
            }
        } else if let Some(tool) = &t.tool_name {
            line.push_str(&format!("  {tool}"));
        }
        let _ = writeln!(o, "{line}");
        for note in &t.before {
            let _ = writeln!(o, "    · {note}");
        }
        for c in &t.calls {
            let mut row = format!(
                "    {}  {}  {}",
                c.tool,
                opt_duration(c.duration_ms),
                st.mark(c.status == "ok")
            );
            if let Some(code) = c.exit_code {
                row.push_str(&format!("  exit {code}"));
            }
            if verbose {
                if let Some(q) = input_summary(c) {
                    row.push_str("  ");
                    row.push_str(&st.dim(&q));
                }
            }
            let _ = writeln!(o, "{row}");
        }
        for note in &t.notes {
            let _ = writeln!(o, "    · {note}");
        }
    }
    if !s.ended {
        let _ = writeln!(
            o,
            "  {}",
            st.yellow(&format!(
                "… no session_end (last event: {})",
                s.last_event.as_deref().unwrap_or("none")
            ))
        );
    }
    o
}

/// The `--json` document: one object per turn.
pub fn json(s: &Summary, verbose: bool) -> Value {
    let turns: Vec<Value> = s
        .turns
        .iter()
        .map(|t| {
            let calls: Vec<Value> = t
                .calls
                .iter()
                .map(|c| {
                    let mut v = json!({
                        "tool": c.tool,
                        "status": c.status,
                        "duration_ms": c.duration_ms,
                        "exit_code": c.exit_code,
                    });
                    if verbose {
                        v["input_summary"] = json!(input_summary(c));
                    }
                    v
                })
                .collect();
            json!({
                "task": t.task,
                "turn": t.turn,
                "decision": t.decision,
                "tool_name": t.tool_name,
                "input_tokens": t.input_tokens,
                "output_tokens": t.output_tokens,
                "calls": calls,
                "before": t.before,
                "notes": t.notes,
            })
        })
        .collect();
    json!({
        "session_id": s.session_id,
        "tasks": s.tasks,
        "turns": s.totals.turns,
        "ended": s.ended,
        "steps": turns,
    })
}

/// The first string leaf of a call's input, quoted and cut to [`INPUT_SUMMARY`] characters.
pub fn input_summary(c: &Call) -> Option<String> {
    let text = first_string(c.input.as_ref()?)?;
    let cut = truncate(text, INPUT_SUMMARY);
    serde_json::to_string(&cut).ok()
}

fn first_string(v: &Value) -> Option<&str> {
    match v {
        Value::String(s) => Some(s),
        Value::Array(items) => items.iter().find_map(first_string),
        Value::Object(map) => map.values().find_map(first_string),
        _ => None,
    }
}
