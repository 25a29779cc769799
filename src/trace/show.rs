//! `mur trace show`: the whole session, readable.
//!
//! Sections in order: Session (the header: capsule, model, status, duration, tokens), Turns
//! (each turn with its tool calls and their sizes), Tool calls, Pulled at runtime (seed 001's
//! exact row format), Shell calls, then only when present Retries, Denied calls, Failed,
//! Plans and the delegation tree (each child's capsule, status, duration and tokens, read from
//! the child's own trace).

use std::fmt::Write;

use super::format::{self, bytes, opt_duration, thousands, truncate, Style};
use super::summary::{Call, Summary};
use super::tree::{self, Node};

/// Longest tool-input excerpt on a call row.
const INPUT_EXCERPT: usize = 120;

/// Render `mur trace show` for one session (reads child traces for the delegation tree).
pub fn render(s: &Summary, st: &Style) -> String {
    let tree = tree::build(s);
    render_with_tree(s, &tree, st)
}

/// The `--json` document: the summary and the delegation tree.
pub fn json(s: &Summary) -> serde_json::Value {
    let tree = tree::build(s);
    serde_json::json!({ "session": s, "delegation_tree": tree })
}

/// The status line of a session: its exit status, or how an unended trace stopped.
pub fn status_text(s: &Summary) -> String {
    match (&s.status, s.ended) {
        (Some(st), true) => st.clone(),
        (None, true) => "unknown".to_string(),
        _ => format!(
            "ended without a session_end (last event: {}{})",
            s.last_event.as_deref().unwrap_or("none"),
            s.last_timestamp
                .map(|t| format!(" at {}", format::timestamp(t)))
                .unwrap_or_default()
        ),
    }
}

/// `capsule v1.0` or `?`.
pub fn capsule_text(s: &Summary) -> String {
    match (&s.capsule, &s.capsule_version) {
        (Some(c), Some(v)) => format!("{c} v{v}"),
        (Some(c), None) => c.clone(),
        _ => "?".to_string(),
    }
}

fn render_with_tree(s: &Summary, tree: &[Node], st: &Style) -> String {
    let mut o = String::new();
    let w = &mut o;
    let _ = writeln!(w, "{}", st.heading("Session"));
    let _ = writeln!(w, "session:    {}", s.session_id);
    if let Some(parent) = &s.spawned_by {
        let _ = writeln!(
            w,
            "spawned by: {parent}{}",
            s.delegation_id
                .as_ref()
                .map(|d| format!(" (delegation {d})"))
                .unwrap_or_default()
        );
    }
    let _ = writeln!(w, "capsule:    {}", capsule_text(s));
    let _ = writeln!(w, "model:      {}", s.model.as_deref().unwrap_or("—"));
    let status = status_text(s);
    let _ = writeln!(
        w,
        "status:     {}",
        if s.ended {
            st.status(&status)
        } else {
            st.yellow(&status)
        }
    );
    let _ = writeln!(
        w,
        "duration:   {}{}",
        opt_duration(s.duration_ms),
        if s.ended {
            ""
        } else {
            "  (first to last event)"
        }
    );
    let t = &s.totals;
    let _ = writeln!(
        w,
        "tokens:     {} in / {} out  ({} total{})",
        thousands(t.input_tokens),
        thousands(t.output_tokens),
        thousands(t.input_tokens.saturating_add(t.output_tokens)),
        token_source(s)
    );
    let p = &s.provider_tokens;
    if p.turns > 0 && s.estimated_turns > 0 {
        let calls = s.counted.turns + s.failed_inferences;
        let _ = writeln!(
            w,
            "provider:   {} in / {} out  (its own count, on {} of {calls} model calls)",
            thousands(p.input_tokens),
            thousands(p.output_tokens),
            p.turns
        );
    }
    if !s.tools_declared.is_empty() {
        let _ = writeln!(w, "tools:      {}", s.tools_declared.join(", "));
    }
    if let Some(c) = &s.containment {
        let _ = writeln!(w, "containment: {} → {}", c.declared, c.achieved);
    }
    if !s.ended {
        let _ = writeln!(
            w,
            "totals:     counted from the lines (the trace has no session_end)"
        );
    }
    if s.absurd_tokens {
        let _ = writeln!(
            w,
            "note:       {}",
            crate::trace::record::ABSURD_TOKENS_NOTE
        );
    }
    if s.torn_last_line {
        let _ = writeln!(
            w,
            "note:       the last line was torn (a run still writing, or killed) and was skipped"
        );
    }

    let _ = writeln!(w, "\n{}", st.heading("Turns"));
    let cap = s.max_turns.map_or("no cap".to_string(), |m| m.to_string());
    let _ = writeln!(w, "count:      {}  (max: {cap})", t.turns);
    for note in &s.preamble {
        let _ = writeln!(w, "  · {note}");
    }
    let mut task = 0;
    for turn in &s.turns {
        if s.tasks > 1 && turn.task != task {
            task = turn.task;
            let _ = writeln!(w, "  {}", st.bold(&format!("task {task}")));
        }
        let mut line = format!("  turn {}  {}", turn.turn, turn.decision);
        if let Some(code) = &turn.error_code {
            line.push_str(&format!("  {code}"));
        }
        if let Some(h) = turn.provider_status {
            line.push_str(&format!("  HTTP {h}"));
        }
        line.push_str(&turn_tokens(turn));
        let _ = writeln!(w, "{line}");
        for note in &turn.before {
            let _ = writeln!(w, "    · {note}");
        }
        for call in &turn.calls {
            let _ = writeln!(w, "    {}", call_row(call, st));
            if let Some(err) = &call.error {
                let _ = writeln!(w, "      error: {}", truncate(err, 200));
            }
        }
        for note in &turn.notes {
            let _ = writeln!(w, "    · {note}");
        }
    }

    let _ = writeln!(w, "\n{}", st.heading("Tool calls"));
    let c = &s.tool_calls;
    if c.count == 0 {
        let _ = writeln!(w, "count:      0");
    } else {
        let _ = writeln!(
            w,
            "count:      {}  ({} ok, {} error)  success {:.1}%",
            c.count,
            c.ok,
            c.error,
            c.ok as f64 * 100.0 / c.count as f64
        );
        let _ = writeln!(
            w,
            "latency:    avg {}",
            format::duration(c.total_ms / c.count)
        );
        let width = s.tools.keys().map(|k| k.chars().count()).max().unwrap_or(0);
        for (name, n) in &s.tools {
            let _ = writeln!(
                w,
                "  {name:<width$}  {} call{}  {} error{}  avg {}",
                n.calls,
                if n.calls == 1 { "" } else { "s" },
                n.errors,
                if n.errors == 1 { "" } else { "s" },
                format::duration(n.total_ms / n.calls.max(1))
            );
        }
    }

    if !s.pulls.is_empty() {
        let _ = writeln!(w, "\n{}", st.heading("Pulled at runtime"));
        for p in &s.pulls {
            let _ = writeln!(
                w,
                "  {}@{}  {}  {}{}",
                p.name,
                p.version,
                p.runtime,
                st.yellow(&format!("{}/{}", p.origin, p.trust)),
                p.fetched_from
                    .as_ref()
                    .map(|f| format!("  from {f}"))
                    .unwrap_or_default()
            );
        }
    }

    let _ = writeln!(w, "\n{}", st.heading("Shell calls"));
    let _ = writeln!(w, "count:      {}", s.shell.count);
    if s.shell.count > 0 {
        let ok = s.shell.exit_codes.get(&0).copied().unwrap_or(0);
        let mut codes = format!("{ok} ok");
        if s.shell.failed > 0 {
            let failed: Vec<String> = s
                .shell
                .exit_codes
                .iter()
                .filter(|(code, _)| **code != 0)
                .map(|(code, n)| format!("{n}× exit {code}"))
                .collect();
            codes.push_str(&format!(
                ", {} failed ({})",
                s.shell.failed,
                failed.join(", ")
            ));
        }
        let _ = writeln!(w, "exit codes: {codes}");
        let _ = writeln!(
            w,
            "latency:    avg {}",
            format::duration(s.shell.total_ms / s.shell.count.max(1))
        );
    }

    if !s.retries.is_empty() {
        let _ = writeln!(w, "\n{}", st.heading("Retries"));
        for r in &s.retries {
            let _ = writeln!(
                w,
                "  turn {}  {}",
                r.turn.map_or("?".into(), |t| t.to_string()),
                super::summary::retry_text(r)
            );
            if let Some(e) = &r.error {
                let _ = writeln!(w, "    {}", truncate(e, 200));
            }
        }
    }

    if !s.denials.is_empty() {
        let _ = writeln!(w, "\n{}", st.heading("Denied calls"));
        for d in &s.denials {
            let _ = writeln!(
                w,
                "  turn {}  {}  {}  {}",
                d.turn.map_or("?".into(), |t| t.to_string()),
                d.target.as_deref().unwrap_or("?"),
                d.event.as_deref().unwrap_or("on-tool-call"),
                d.hook_name.as_deref().unwrap_or("policy")
            );
            if let Some(r) = &d.reason {
                let _ = writeln!(w, "    reason: {}", truncate(r, 200));
            }
        }
    }

    if !s.failures.is_empty() {
        let _ = writeln!(w, "\n{}", st.heading("Failed"));
        for f in &s.failures {
            let _ = writeln!(
                w,
                "  task_failed  {}{}",
                st.red(f.cause.as_deref().unwrap_or("unknown")),
                f.turn.map(|t| format!("  at turn {t}")).unwrap_or_default()
            );
            if let Some(r) = &f.reason {
                let _ = writeln!(w, "    reason: {}", truncate(r, 400));
            }
        }
    }

    if !s.plans.is_empty() {
        let _ = writeln!(w, "\n{}", st.heading("Plans"));
        for p in &s.plans {
            let _ = writeln!(
                w,
                "  plan {}  {} steps  {}",
                p.plan_id,
                p.step_count.map_or("?".into(), |n| n.to_string()),
                p.outcome
                    .as_deref()
                    .map(|o| st.status(o))
                    .unwrap_or_else(|| st.yellow("running"))
            );
            for step in &p.steps {
                let _ = writeln!(
                    w,
                    "    {}  {}  {}  {}",
                    step.step_id,
                    step.kind.as_deref().unwrap_or("?"),
                    st.status(step.status.as_deref().unwrap_or("?")),
                    opt_duration(step.duration_ms)
                );
            }
        }
    }

    if !s.peer.is_empty() {
        let _ = writeln!(w, "\n{}", st.heading("Peer files"));
        for (what, n) in &s.peer {
            let _ = writeln!(w, "  {what}  {n}");
        }
    }

    if !tree.is_empty() {
        let _ = writeln!(w, "\n{}", st.heading("Delegations"));
        let _ = writeln!(
            w,
            "{}  {}  {}  {}  {} in / {} out",
            capsule_text(s),
            s.session_id,
            st.status(s.status.as_deref().unwrap_or("running")),
            opt_duration(s.duration_ms),
            thousands(t.input_tokens),
            thousands(t.output_tokens)
        );
        tree_rows(w, tree, "", st);
    }
    o
}

/// One row per delegation, drawn as a tree under `prefix`.
pub fn tree_rows(w: &mut String, nodes: &[Node], prefix: &str, st: &Style) {
    for (i, n) in nodes.iter().enumerate() {
        let last = i + 1 == nodes.len();
        let (branch, cont) = if last {
            ("└─ ", "   ")
        } else {
            ("├─ ", "│  ")
        };
        let d = &n.delegation;
        let name = match &d.version {
            Some(v) => format!("{}@{v}", d.capsule),
            None => d.capsule.clone(),
        };
        let outcome = d.outcome.as_deref().unwrap_or("in flight");
        let mut row = format!(
            "{prefix}{branch}{name}  {}  {}  {}",
            d.child_session_id.as_deref().unwrap_or("(no child)"),
            st.status(outcome),
            opt_duration(n.duration_ms())
        );
        match n.tokens() {
            Some((i, o)) => row.push_str(&format!("  {} in / {} out", thousands(i), thousands(o))),
            None => row.push_str("  —"),
        }
        if let Some(c) = &n.child {
            if let Some(cs) = &c.status {
                if cs != outcome {
                    row.push_str(&format!("  (child status: {cs})"));
                }
            } else if n.problem.is_none() {
                row.push_str("  (child trace has no session_end)");
            }
        }
        let _ = writeln!(w, "{row}");
        let detail = format!("{prefix}{cont}");
        if let Some(r) = &d.reason {
            let _ = writeln!(w, "{detail}  reason: {}", truncate(r, 200));
        }
        if let Some(p) = &n.problem {
            let _ = writeln!(w, "{detail}  {}", st.yellow(p));
        }
        tree_rows(w, &n.children, &detail, st);
    }
}

fn call_row(c: &Call, st: &Style) -> String {
    let mut row = format!(
        "{}  {}  {}",
        c.tool,
        opt_duration(c.duration_ms),
        st.mark(c.status == "ok")
    );
    if let Some(code) = c.exit_code {
        row.push_str(&format!("  exit {code}"));
    }
    if c.input_bytes.is_some() || c.output_bytes.is_some() {
        row.push_str(&format!(
            "  {} in → {} out",
            c.input_bytes.map_or("?".into(), bytes),
            c.output_bytes.map_or("?".into(), bytes)
        ));
    }
    if let Some(input) = &c.input {
        row.push_str("  ");
        row.push_str(&st.dim(&truncate(&input.to_string(), INPUT_EXCERPT)));
    }
    row
}

/// Whose count the header's tokens are: `, counted by the provider`, `, estimated`, or how
/// many of the model calls were estimated. An estimate is the runtime's, from the bytes sent
/// and received; a provider count is what the provider's reply said.
fn token_source(s: &Summary) -> String {
    let calls = s.counted.turns + s.failed_inferences;
    match (s.provider_tokens.turns, s.estimated_turns) {
        (_, 0) if calls == 0 => String::new(),
        (0, _) => ", estimated".into(),
        (_, 0) => ", counted by the provider".into(),
        (_, e) if e >= calls => ", estimated".into(),
        (_, e) => format!(", estimated on {e} of {calls} model calls"),
    }
}

/// A turn's tokens: `  100 in / 10 out` when the provider counted them, `  ~1,029 in / ~49
/// out` when the runtime estimated them, both when the trace carries both (upstream's).
fn turn_tokens(turn: &crate::trace::record::Turn) -> String {
    let (i, o) = (turn.input_tokens, turn.output_tokens);
    let (ai, ao) = (turn.input_tokens_actual, turn.output_tokens_actual);
    let n = |v: Option<u64>| thousands(v.unwrap_or(0));
    let has_actual = ai.is_some() || ao.is_some();
    if !has_actual {
        if i.is_none() && o.is_none() {
            return String::new();
        }
        return format!("  ~{} in / ~{} out", n(i), n(o));
    }
    let agree = i.is_none_or(|x| Some(x) == ai) && o.is_none_or(|x| Some(x) == ao);
    if agree {
        format!("  {} in / {} out", n(ai), n(ao))
    } else {
        format!(
            "  {} in / {} out  (estimated ~{} / ~{})",
            n(ai),
            n(ao),
            n(i),
            n(o)
        )
    }
}
