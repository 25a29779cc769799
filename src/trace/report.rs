//! `mur trace report`: usage over one session or the last N.
//!
//! Reports read traces with counters only ([`super::summary::Detail::Totals`]), so a million-line trace costs
//! a pass over the file and a few counters, not memory per line. The report covers token usage,
//! tool calls by name, latency (session, tool-call percentiles, shell, retries), exit statuses,
//! and each delegated child's usage read from its own trace.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::{json, Value};

use super::format::{self, bytes, opt_duration, short_id, thousands, Style};
use super::show::capsule_text;
use super::summary::{NameStats, Summary, Totals};
use super::tree::{self, Node};

/// The figures of a report over several sessions.
pub struct Report<'a> {
    /// The sessions, newest first as selected.
    pub sessions: &'a [Summary],
    /// Sum of their totals.
    pub totals: Totals,
    /// Tool calls by name across sessions.
    pub tools: BTreeMap<String, NameStats>,
    /// Every tool-call latency, sorted.
    pub latencies: Vec<u32>,
    /// Each session's delegation tree.
    pub trees: Vec<Vec<Node>>,
}

impl<'a> Report<'a> {
    /// Aggregate `sessions` (loaded at [`super::summary::Detail::Totals`]).
    pub fn new(sessions: &'a mut [Summary]) -> Report<'a> {
        let mut totals = Totals::default();
        let mut tools: BTreeMap<String, NameStats> = BTreeMap::new();
        let mut latencies = Vec::new();
        for s in sessions.iter_mut() {
            totals.turns = totals.turns.saturating_add(s.totals.turns);
            totals.input_tokens = totals.input_tokens.saturating_add(s.totals.input_tokens);
            totals.output_tokens = totals.output_tokens.saturating_add(s.totals.output_tokens);
            totals.tool_calls = totals.tool_calls.saturating_add(s.totals.tool_calls);
            totals.shell_calls = totals.shell_calls.saturating_add(s.totals.shell_calls);
            for (name, n) in &s.tools {
                let t = tools.entry(name.clone()).or_default();
                t.calls = t.calls.saturating_add(n.calls);
                t.errors = t.errors.saturating_add(n.errors);
                t.total_ms = t.total_ms.saturating_add(n.total_ms);
                t.max_ms = t.max_ms.max(n.max_ms);
                t.output_bytes = t.output_bytes.saturating_add(n.output_bytes);
            }
            latencies.append(&mut s.latencies);
        }
        latencies.sort_unstable();
        let sessions: &'a [Summary] = sessions;
        let trees = sessions.iter().map(tree::build).collect();
        Report {
            sessions,
            totals,
            tools,
            latencies,
            trees,
        }
    }

    fn percentile(&self, p: f64) -> Option<u64> {
        if self.latencies.is_empty() {
            return None;
        }
        let idx = ((self.latencies.len() - 1) as f64 * p).round() as usize;
        Some(u64::from(self.latencies[idx]))
    }

    fn exit_statuses(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for s in self.sessions {
            let key = match (&s.status, s.ended) {
                (Some(st), true) => st.clone(),
                (None, true) => "unknown".into(),
                _ => "no session_end".into(),
            };
            *out.entry(key).or_default() += 1;
        }
        out
    }

    /// Render the report.
    pub fn render(&self, st: &Style) -> String {
        let mut o = String::new();
        let n = self.sessions.len();
        let _ = writeln!(o, "Sessions:   {n}");
        for s in self.sessions {
            let _ = writeln!(
                o,
                "  {}  {}  {}  {}  {} turn{}  {} in / {} out",
                s.session_id,
                capsule_text(s),
                st.status(if s.ended {
                    s.status.as_deref().unwrap_or("unknown")
                } else {
                    "no session_end"
                }),
                opt_duration(s.duration_ms),
                thousands(s.totals.turns),
                if s.totals.turns == 1 { "" } else { "s" },
                thousands(s.totals.input_tokens),
                thousands(s.totals.output_tokens)
            );
        }
        let t = &self.totals;
        let _ = writeln!(o, "\n{}", st.heading("Tokens"));
        let _ = writeln!(o, "input:      {}", thousands(t.input_tokens));
        let _ = writeln!(o, "output:     {}", thousands(t.output_tokens));
        let _ = writeln!(
            o,
            "total:      {}",
            thousands(t.input_tokens.saturating_add(t.output_tokens))
        );
        if self.sessions.iter().any(|s| s.absurd_tokens) {
            let _ = writeln!(
                o,
                "note:       {}",
                crate::trace::record::ABSURD_TOKENS_NOTE
            );
        }
        let _ = writeln!(o, "turns:      {}", thousands(t.turns));
        if t.turns > 0 {
            let _ = writeln!(
                o,
                "per turn:   avg {} in / {} out",
                thousands(t.input_tokens / t.turns.max(1)),
                thousands(t.output_tokens / t.turns.max(1))
            );
        }

        let _ = writeln!(o, "\n{}", st.heading("Tool calls"));
        let calls: u64 = self.tools.values().map(|n| n.calls).sum();
        let errors: u64 = self.tools.values().map(|n| n.errors).sum();
        if calls == 0 {
            let _ = writeln!(o, "count:      0");
        } else {
            let _ = writeln!(
                o,
                "count:      {}  ({} ok, {} error)  success {:.1}%",
                thousands(calls),
                thousands(calls - errors),
                thousands(errors),
                (calls - errors) as f64 * 100.0 / calls as f64
            );
            let width = self
                .tools
                .keys()
                .map(|k| k.chars().count())
                .max()
                .unwrap_or(0)
                .max(4);
            let _ = writeln!(
                o,
                "  {:<width$}  {:>8}  {:>6}  {:>8}  {:>8}  {:>10}",
                "NAME", "CALLS", "ERRORS", "AVG", "MAX", "OUTPUT"
            );
            for (name, s) in &self.tools {
                let _ = writeln!(
                    o,
                    "  {name:<width$}  {:>8}  {:>6}  {:>8}  {:>8}  {:>10}",
                    thousands(s.calls),
                    thousands(s.errors),
                    format::duration(s.total_ms / s.calls.max(1)),
                    format::duration(s.max_ms),
                    bytes(s.output_bytes)
                );
            }
        }

        let _ = writeln!(o, "\n{}", st.heading("Latency"));
        let durations: Vec<u64> = self.sessions.iter().filter_map(|s| s.duration_ms).collect();
        if !durations.is_empty() {
            let sum = durations.iter().fold(0u64, |a, &d| a.saturating_add(d));
            let _ = writeln!(
                o,
                "session:    avg {}  min {}  max {}",
                format::duration(sum / durations.len() as u64),
                format::duration(*durations.iter().min().unwrap_or(&0)),
                format::duration(*durations.iter().max().unwrap_or(&0))
            );
        }
        if let (Some(p50), Some(p95), Some(max)) = (
            self.percentile(0.5),
            self.percentile(0.95),
            self.latencies.last(),
        ) {
            let sum: u64 = self.latencies.iter().map(|&x| u64::from(x)).sum();
            let _ = writeln!(
                o,
                "tool call:  avg {}  p50 {}  p95 {}  max {}",
                format::duration(sum / self.latencies.len() as u64),
                format::duration(p50),
                format::duration(p95),
                format::duration(u64::from(*max))
            );
        } else {
            let _ = writeln!(o, "tool call:  —");
        }
        let shell_count: u64 = self.sessions.iter().map(|s| s.shell.count).sum();
        if shell_count > 0 {
            let shell_ms = self
                .sessions
                .iter()
                .fold(0u64, |a, s| a.saturating_add(s.shell.total_ms));
            let failed: u64 = self.sessions.iter().map(|s| s.shell.failed).sum();
            let _ = writeln!(
                o,
                "shell:      avg {}  ({} call{}, {} non-zero exit)",
                format::duration(shell_ms / shell_count.max(1)),
                thousands(shell_count),
                if shell_count == 1 { "" } else { "s" },
                thousands(failed)
            );
        }
        // Plan steps run their commands inside the plan: no `shell` line, so counted here.
        let steps: Vec<&crate::trace::record::PlanStep> = self
            .sessions
            .iter()
            .flat_map(|s| &s.plans)
            .flat_map(|p| &p.steps)
            .collect();
        if !steps.is_empty() {
            let mut kinds: std::collections::BTreeMap<&str, u64> = Default::default();
            for st in &steps {
                *kinds.entry(st.kind.as_deref().unwrap_or("?")).or_default() += 1;
            }
            let by_kind: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
            let count = |status: &str| {
                steps
                    .iter()
                    .filter(|st| st.status.as_deref() == Some(status))
                    .count()
            };
            let _ = writeln!(
                o,
                "plan steps: {} ({}; {} failed, {} skipped)",
                thousands(steps.len() as u64),
                by_kind.join(", "),
                count("failed"),
                count("skipped")
            );
        }
        let retries: usize = self.sessions.iter().map(|s| s.retries.len()).sum();
        if retries > 0 {
            let delay: i64 = self
                .sessions
                .iter()
                .flat_map(|s| &s.retries)
                .filter_map(|r| r.delay_ms)
                .fold(0i64, |a, d| a.saturating_add(d));
            let _ = writeln!(
                o,
                "retries:    {retries}  (waited {})",
                format::duration(delay.max(0) as u64)
            );
        }

        let _ = writeln!(o, "\n{}", st.heading("Exit status"));
        for (status, count) in self.exit_statuses() {
            let _ = writeln!(
                o,
                "  {:<24} {count}  ({:.1}%)",
                status,
                count as f64 * 100.0 / n.max(1) as f64
            );
        }

        if self.trees.iter().any(|t| !t.is_empty()) {
            let _ = writeln!(o, "\n{}", st.heading("Per-child usage"));
            let (mut cin, mut cout) = (0u64, 0u64);
            for (s, tree) in self.sessions.iter().zip(&self.trees) {
                if tree.is_empty() {
                    continue;
                }
                let _ = writeln!(o, "{}  {}", short_id(&s.session_id), capsule_text(s));
                super::show::tree_rows(&mut o, tree, "", st);
                sum_tree(tree, &mut cin, &mut cout);
            }
            let _ = writeln!(
                o,
                "children:   {} in / {} out",
                thousands(cin),
                thousands(cout)
            );
        }
        o
    }

    /// The `--json` document.
    pub fn json(&self) -> Value {
        let sessions: Vec<Value> = self
            .sessions
            .iter()
            .map(|s| {
                let mut v = s.header_json();
                v.insert("retries".into(), json!(s.retries.len()));
                Value::Object(v)
            })
            .collect();
        let (mut cin, mut cout) = (0u64, 0u64);
        for tree in &self.trees {
            sum_tree(tree, &mut cin, &mut cout);
        }
        json!({
            "sessions": sessions,
            "totals": self.totals,
            "tools": self.tools,
            "latency_ms": {
                "tool_p50": self.percentile(0.5),
                "tool_p95": self.percentile(0.95),
                "tool_max": self.latencies.last(),
            },
            "exit_status": self.exit_statuses(),
            "children": self.trees,
            "children_tokens": {"input_tokens": cin, "output_tokens": cout},
        })
    }
}

fn sum_tree(nodes: &[Node], input: &mut u64, output: &mut u64) {
    for n in nodes {
        // A child's totals already include its own children's usage (SPEC §6: usage rolls
        // up); only descend when the child's trace could not be read.
        if let Some((i, o)) = n.tokens() {
            *input = input.saturating_add(i);
            *output = output.saturating_add(o);
        } else {
            sum_tree(&n.children, input, output);
        }
    }
}
