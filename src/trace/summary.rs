//! Folding a trace into a [`Summary`]: everything the views print, in one streaming pass.
//!
//! Views never hold the events themselves: the reader hands each line to [`Builder::push`],
//! which updates counters and, at the detail level asked for, keeps one row per turn. Totals
//! come from `session_end` when it exists and from the lines otherwise, so a trace cut short
//! (a killed run, a run still going) still reads.

use std::borrow::Cow;
use std::path::Path;

use crate::diagnostic::Diagnostic;
use mur_actors::trace::EventType;

use super::event::Event;
use super::lenient::{Checked, ToolInput};
use super::reader::TraceReader;
use super::two_cores;

pub use super::record::*;

/// Read a whole trace into a [`Summary`], streaming.
///
/// `E-TRC-001` for an empty trace, a trace with no `session_start`, or a corrupt line before the
/// last; `E-IO-*` when the file cannot be read.
pub fn load(path: &Path, detail: Detail) -> Result<Summary, Diagnostic> {
    let file = super::reader::open(path)?;
    // Only `Full` prints tool inputs; the others check them as strictly and keep nothing, and
    // read a large trace on two cores.
    if detail == Detail::Full {
        return fold::<_, serde_json::Value>(TraceReader::new(path, file), path, detail);
    }
    let len = file.metadata().map_or(0, |m| m.len());
    if two_cores::worth_it(len) {
        return fold_on_two_cores(file, path, detail, two_cores::Split::DEFAULT);
    }
    fold::<_, Checked>(TraceReader::new(path, file), path, detail)
}

/// Fold `input` (named `path`) into a [`Summary`], read and parsed on two cores as `split`
/// says; the same summary, or the same diagnostic, as [`fold`] gives.
pub(crate) fn fold_on_two_cores<R: std::io::Read + Send>(
    input: R,
    path: &Path,
    detail: Detail,
    split: two_cores::Split,
) -> Result<Summary, Diagnostic> {
    let mut b = Builder::new(path, detail);
    b.summary.torn_last_line = two_cores::fold(input, path, split, &mut b)?;
    b.finish()
}

/// Fold the events `reader` reads into a [`Summary`], on this thread.
pub(crate) fn fold<R: std::io::Read, I: ToolInput>(
    mut reader: TraceReader<R>,
    path: &Path,
    detail: Detail,
) -> Result<Summary, Diagnostic> {
    let mut b = Builder::new(path, detail);
    loop {
        let mut ev = Event::<I>::default();
        if !reader.read_event(&mut ev)? {
            break;
        }
        b.push(&mut ev);
    }
    b.summary.torn_last_line = reader.torn_last_line;
    b.finish()
}

/// A borrowed string field as an owned one, for what the summary keeps.
fn own(v: Option<Cow<'_, str>>) -> Option<String> {
    v.map(Cow::into_owned)
}

/// Incremental fold of events into a [`Summary`].
pub struct Builder {
    summary: Summary,
    detail: Detail,
    lines: u64,
    saw_start: bool,
    end_totals: Option<Totals>,
    /// Notes about the next turn (a retry or a tool refresh is written before its inference).
    pending: Vec<String>,
}

impl Builder {
    /// A builder for the trace at `path`.
    pub fn new(path: &Path, detail: Detail) -> Self {
        Builder {
            summary: Summary {
                path: path.to_path_buf(),
                ..Summary::default()
            },
            detail,
            lines: 0,
            saw_start: false,
            end_totals: None,
            pending: Vec::new(),
        }
    }

    fn note_next_turn(&mut self, text: String) {
        if self.detail != Detail::Totals {
            self.pending.push(text);
        }
    }

    fn note(&mut self, text: String) {
        if self.detail == Detail::Totals {
            return;
        }
        match self.summary.turns.last_mut() {
            Some(t) => t.notes.push(text),
            None => self.summary.preamble.push(text),
        }
    }

    /// Take one event into account, taking out of it the fields the summary keeps.
    pub fn push<I: ToolInput>(&mut self, ev: &mut Event<'_, I>) {
        self.lines += 1;
        let s = &mut self.summary;
        if s.first_timestamp.is_none() {
            s.first_timestamp = ev.timestamp;
        }
        if ev.timestamp.is_some() {
            s.last_timestamp = ev.timestamp;
        }
        if s.session_id.is_empty() {
            if let Some(id) = &ev.session_id {
                s.session_id = id.to_string();
            }
        }
        // Every line replaces the last type: reuse its buffer rather than allocate per line.
        match (&mut s.last_event, ev.event_type.as_deref()) {
            (Some(last), Some(kind)) => {
                last.clear();
                last.push_str(kind);
            }
            (last, kind) => *last = kind.map(str::to_owned),
        }
        match EventType::parse(ev.kind()) {
            Some(EventType::SessionStart) => self.session_start(ev),
            Some(EventType::TaskStart) => s.tasks += 1,
            Some(EventType::TaskContinued) => {
                let n = ev.delegations.as_ref().map_or(0, Vec::len);
                let text = format!(
                    "continued with {n} delegation outcome{}{}",
                    if n == 1 { "" } else { "s" },
                    ev.waited_ms
                        .map(|w| format!(" (waited {})", super::format::duration(w.max(0) as u64)))
                        .unwrap_or_default()
                );
                self.note_next_turn(text);
            }
            Some(
                kind @ (EventType::PeerHandleMint
                | EventType::PeerHandleRedeem
                | EventType::PeerFileFetch),
            ) => {
                let key = format!("{kind} {}", ev.outcome.as_deref().unwrap_or("ok"));
                *s.peer.entry(key).or_default() += 1;
            }
            Some(EventType::Inference) => self.inference(ev),
            Some(EventType::ToolCall) => self.tool_call(ev),
            Some(EventType::Shell) => self.shell(ev),
            Some(EventType::SkillCall) => {
                s.skill_calls += 1;
                let name = own(ev.skill_name.take()).unwrap_or_default();
                self.note(format!("skill {name}"));
            }
            Some(EventType::ArtifactPulled) => {
                let p = Pull {
                    name: own(ev.name.take()).unwrap_or_else(|| "?".into()),
                    version: own(ev.version.take()).unwrap_or_else(|| "?".into()),
                    runtime: own(ev.runtime.take()).unwrap_or_else(|| "tool".into()),
                    origin: own(ev.origin.take()).unwrap_or_else(|| "runtime".into()),
                    trust: own(ev.trust.take()).unwrap_or_else(|| "untrusted".into()),
                    fetched_from: own(ev.fetched_from.take()),
                    owner_id: ev.owner_id,
                };
                let text = format!("pulled {}@{} ({}/{})", p.name, p.version, p.origin, p.trust);
                s.pulls.push(p);
                self.note(text);
            }
            Some(EventType::ToolsRefreshed) => {
                let r = Refresh {
                    turn: ev.turn,
                    trigger: own(ev.trigger.take()).unwrap_or_default(),
                    added: ev.added.take().unwrap_or_default(),
                    removed: ev.removed.take().unwrap_or_default(),
                };
                let text = format!("tools refreshed ({}){}", r.trigger, change_list(&r));
                s.refreshes.push(r);
                self.note_next_turn(text);
            }
            Some(EventType::CallDenied) => {
                let d = Denial {
                    turn: ev.turn,
                    event: own(ev.event.take()),
                    hook_name: own(ev.hook_name.take()),
                    target: own(ev.target.take()),
                    reason: own(ev.reason.take()),
                };
                let text = format!(
                    "denied {} by {}: {}",
                    d.target.as_deref().unwrap_or("?"),
                    d.hook_name.as_deref().unwrap_or("policy"),
                    d.reason.as_deref().unwrap_or("no reason given")
                );
                s.denials.push(d);
                self.note(text);
            }
            Some(EventType::InferenceRetry) => {
                let r = Retry {
                    turn: ev.turn,
                    attempt: ev.attempt,
                    max_retries: ev.max_retries,
                    reason: own(ev.reason.take()),
                    provider_status: ev.provider_status,
                    delay_ms: ev.delay_ms,
                    error: own(ev.error.take()),
                };
                let text = format!("retry {}", retry_text(&r));
                s.retries.push(r);
                self.note_next_turn(text);
            }
            Some(EventType::TaskFailed) => {
                let f = Failure {
                    turn: ev.turn,
                    cause: own(ev.cause.take()),
                    reason: own(ev.reason.take()),
                };
                let text = format!(
                    "task failed: {}{}",
                    f.cause.as_deref().unwrap_or("unknown cause"),
                    f.reason
                        .as_deref()
                        .map(|r| format!(" — {r}"))
                        .unwrap_or_default()
                );
                s.failures.push(f);
                self.note(text);
            }
            Some(EventType::PlanStart) => {
                let id = own(ev.plan_id.take()).unwrap_or_default();
                let text = format!(
                    "plan {id} started ({} steps)",
                    ev.step_count.map_or("?".into(), |n| n.to_string())
                );
                s.plans.push(Plan {
                    plan_id: id,
                    step_count: ev.step_count,
                    ..Plan::default()
                });
                self.note(text);
            }
            Some(EventType::PlanStep) => {
                let step = PlanStep {
                    step_id: own(ev.step_id.take()).unwrap_or_default(),
                    kind: own(ev.kind.take()),
                    status: own(ev.status.take()),
                    duration_ms: ev.duration_ms.map(|d| d.max(0) as u64),
                };
                let plan = plan_for(&mut s.plans, own(ev.plan_id.take()));
                plan.steps.push(step);
            }
            Some(EventType::PlanEnd) => {
                let id = own(ev.plan_id.clone());
                let plan = plan_for(&mut s.plans, own(ev.plan_id.take()));
                plan.outcome = own(ev.outcome.clone()).or(own(ev.status.clone()));
                let text = format!(
                    "plan {} {}",
                    id.unwrap_or_default(),
                    plan.outcome.as_deref().unwrap_or("ended")
                );
                self.note(text);
            }
            Some(EventType::DelegationStart) => {
                let turn = s.turns.last().map(|t| t.turn);
                let d = Delegation {
                    delegation_id: own(ev.delegation_id.take()),
                    capsule: own(ev.capsule.take()).unwrap_or_else(|| "?".into()),
                    version: own(ev.version.take()),
                    child_session_id: own(ev.child_session_id.take()),
                    child_workdir: own(ev.child_workdir.take()),
                    child_records_dir: own(ev.child_records_dir.take()),
                    usage: ev.usage,
                    turn,
                    ..Delegation::default()
                };
                let text = format!(
                    "delegated to {} ({})",
                    d.capsule,
                    d.child_session_id.as_deref().unwrap_or("no child")
                );
                s.delegations.push(d);
                self.note(text);
            }
            Some(EventType::Delegation) => self.delegation(ev),
            Some(EventType::TaskEnd) => {}
            Some(EventType::SessionEnd) => {
                s.ended = true;
                s.status = own(ev.exit_status.take());
                s.duration_ms = ev.duration_ms.map(|d| d.max(0) as u64);
                self.end_totals = Some(Totals {
                    turns: Event::n(ev.total_turns),
                    input_tokens: Event::n(ev.total_input_tokens),
                    output_tokens: Event::n(ev.total_output_tokens),
                    tool_calls: Event::n(ev.total_tool_calls),
                    shell_calls: Event::n(ev.total_shell_calls),
                });
            }
            _ => {}
        }
    }

    fn session_start<I: ToolInput>(&mut self, ev: &mut Event<'_, I>) {
        let s = &mut self.summary;
        if self.saw_start {
            return; // a resumed launch: keep the first identity
        }
        self.saw_start = true;
        if let Some(id) = own(ev.session_id.take()) {
            s.session_id = id;
        }
        s.capsule = own(ev.capsule_name.take());
        s.capsule_version = own(ev.capsule_version.take());
        s.model = own(ev.model.take());
        s.max_turns = ev.max_turns;
        s.tools_declared = ev.tools_declared.take().unwrap_or_default();
        s.containment = own(ev.containment_declared.take())
            .zip(own(ev.containment_achieved.take()))
            .map(|(declared, achieved)| crate::trace::record::Containment { declared, achieved });
        s.spawned_by = own(ev.spawned_by.take());
        s.delegation_id = own(ev.delegation_id.take());
    }

    fn inference<I: ToolInput>(&mut self, ev: &mut Event<'_, I>) {
        let s = &mut self.summary;
        if ev.origin.as_deref().is_some_and(|o| o.starts_with("hook:")) {
            s.hook_inferences += 1;
            return;
        }
        let input = ev.input_tokens.map(|x| x.max(0) as u64);
        let output = ev.output_tokens.map(|x| x.max(0) as u64);
        if input
            .max(output)
            .is_some_and(|n| n > crate::trace::record::ABSURD_TOKENS)
        {
            s.absurd_tokens = true;
        }
        s.counted.input_tokens = s.counted.input_tokens.saturating_add(input.unwrap_or(0));
        s.counted.output_tokens = s.counted.output_tokens.saturating_add(output.unwrap_or(0));
        let input_actual = ev.input_tokens_actual.map(|x| x.max(0) as u64);
        let output_actual = ev.output_tokens_actual.map(|x| x.max(0) as u64);
        if input_actual.is_some() || output_actual.is_some() {
            let p = &mut s.provider_tokens;
            p.turns += 1;
            p.input_tokens = p.input_tokens.saturating_add(input_actual.unwrap_or(0));
            p.output_tokens = p.output_tokens.saturating_add(output_actual.unwrap_or(0));
        }
        // This runtime writes the provider's count in `input_tokens` when there is one;
        // upstream always writes its estimate there. A count is the provider's only when
        // the two agree.
        let provider_counted = (input_actual.is_some() || output_actual.is_some())
            && input.is_none_or(|i| Some(i) == input_actual)
            && output.is_none_or(|o| Some(o) == output_actual);
        if (input.is_some() || output.is_some()) && !provider_counted {
            s.estimated_turns += 1;
        }
        if ev.decision.as_deref() == Some("error") {
            s.failed_inferences += 1;
        } else {
            s.counted.turns += 1;
        }
        if self.detail >= Detail::Turns {
            s.turns.push(Turn {
                task: s.tasks,
                turn: ev.turn.unwrap_or(s.turns.len() as i64),
                decision: own(ev.decision.take()).unwrap_or_else(|| "?".into()),
                tool_name: own(ev.tool_name.take()),
                input_tokens: input,
                output_tokens: output,
                input_tokens_actual: input_actual,
                output_tokens_actual: output_actual,
                error_code: own(ev.error_code.take()),
                provider_status: ev.provider_status,
                before: std::mem::take(&mut self.pending),
                ..Turn::default()
            });
        }
    }

    fn tool_call<I: ToolInput>(&mut self, ev: &mut Event<'_, I>) {
        let s = &mut self.summary;
        let tool = ev.tool_name.take().unwrap_or(Cow::Borrowed("?"));
        let ok = ev.status.as_deref() == Some("ok");
        let ms = ev.duration_ms.map(|d| d.max(0) as u64);
        s.counted.tool_calls += 1;
        s.tool_calls.count += 1;
        if ok {
            s.tool_calls.ok += 1;
        } else {
            s.tool_calls.error += 1;
        }
        s.tool_calls.total_ms = s.tool_calls.total_ms.saturating_add(ms.unwrap_or(0));
        s.tool_calls.max_ms = s.tool_calls.max_ms.max(ms.unwrap_or(0));
        let out_bytes = ev.output_bytes.map(|b| b.max(0) as u64);
        if let Some(stats) = s.tools.get_mut(&*tool) {
            add_call(stats, ok, ms, out_bytes);
        } else {
            let mut stats = NameStats::default();
            add_call(&mut stats, ok, ms, out_bytes);
            s.tools.insert(tool.to_string(), stats);
        }
        if self.detail == Detail::Totals {
            s.latencies
                .push(ms.unwrap_or(0).min(u64::from(u32::MAX)) as u32);
            return;
        }
        let call = Call {
            tool: tool.into_owned(),
            status: own(ev.status.take()).unwrap_or_else(|| "?".into()),
            duration_ms: ms,
            input_bytes: ev.input_bytes.map(|b| b.max(0) as u64),
            output_bytes: out_bytes,
            exit_code: None,
            error: own(ev.error.take()),
            input: if self.detail == Detail::Full {
                ev.input.take().and_then(I::into_value)
            } else {
                None
            },
        };
        match s.turns.last_mut() {
            Some(t) => t.calls.push(call),
            None => s.turns.push(Turn {
                task: s.tasks,
                turn: ev.turn.unwrap_or(0),
                decision: "?".into(),
                calls: vec![call],
                ..Turn::default()
            }),
        }
    }

    fn shell<I: ToolInput>(&mut self, ev: &mut Event<'_, I>) {
        let s = &mut self.summary;
        s.counted.shell_calls += 1;
        s.shell.count += 1;
        s.shell.total_ms = s.shell.total_ms.saturating_add(Event::n(ev.duration_ms));
        let code = ev.exit_code.unwrap_or(-1);
        if code != 0 {
            s.shell.failed += 1;
        }
        *s.shell.exit_codes.entry(code).or_default() += 1;
        if let Some(call) = s
            .turns
            .last_mut()
            .and_then(|t| t.calls.iter_mut().rev().find(|c| c.exit_code.is_none()))
        {
            call.exit_code = Some(code);
        }
    }

    fn delegation<I: ToolInput>(&mut self, ev: &mut Event<'_, I>) {
        let s = &mut self.summary;
        let existing = ev.delegation_id.as_deref().and_then(|id| {
            s.delegations
                .iter_mut()
                .find(|d| d.delegation_id.as_deref() == Some(id))
        });
        let d = match existing {
            Some(d) => d,
            None => {
                let turn = s.turns.last().map(|t| t.turn);
                s.delegations.push(Delegation {
                    delegation_id: own(ev.delegation_id.clone()),
                    capsule: own(ev.capsule.clone()).unwrap_or_else(|| "?".into()),
                    version: own(ev.version.clone()),
                    child_session_id: own(ev.child_session_id.clone()),
                    turn,
                    ..Delegation::default()
                });
                s.delegations.last_mut().expect("just pushed")
            }
        };
        d.outcome = Some(own(ev.outcome.take()).unwrap_or_else(|| "unknown".into()));
        d.reason = own(ev.reason.take());
        d.duration_ms = ev.duration_ms.map(|x| x.max(0) as u64);
        if ev.usage.is_some() {
            d.usage = ev.usage;
        }
        if d.child_session_id.is_none() {
            d.child_session_id = own(ev.child_session_id.take());
        }
        let text = format!(
            "delegation to {} ended: {}{}",
            d.capsule,
            d.outcome.as_deref().unwrap_or("?"),
            d.reason
                .as_deref()
                .map(|r| format!(" — {r}"))
                .unwrap_or_default()
        );
        self.note(text);
    }

    /// Check the trace was a session and return its summary.
    pub fn finish(mut self) -> Result<Summary, Diagnostic> {
        for text in std::mem::take(&mut self.pending) {
            self.note(text);
        }
        let s = &mut self.summary;
        if self.lines == 0 && s.torn_last_line {
            return Err(Diagnostic::error(
                "E-TRC-001",
                format!(
                    "{}: no valid lines (its only line is cut off or not a JSON trace event)",
                    s.path.display()
                ),
            )
            .with_hint("a session killed while writing its first line leaves this; otherwise, pass the trace.jsonl of a session"));
        }
        if self.lines == 0 {
            return Err(Diagnostic::error(
                "E-TRC-001",
                format!(
                    "{}: trace file is empty (incomplete or zero-event session)",
                    s.path.display()
                ),
            )
            .with_hint("the session wrote no events; it may have failed before it started"));
        }
        if !self.saw_start {
            return Err(Diagnostic::error(
                "E-TRC-001",
                format!("{}: no session_start event found", s.path.display()),
            )
            .with_hint("this file does not look like a mur session trace"));
        }
        if s.session_id.is_empty() {
            s.session_id = s
                .path
                .parent()
                .and_then(Path::file_name)
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
        }
        match self.end_totals {
            Some(t) => s.totals = t,
            None => {
                s.totals = s.counted;
                for d in &s.delegations {
                    if let Some(u) = d.usage {
                        s.totals.input_tokens =
                            s.totals.input_tokens.saturating_add(u.input_tokens);
                        s.totals.output_tokens =
                            s.totals.output_tokens.saturating_add(u.output_tokens);
                    }
                }
                if let (Some(a), Some(b)) = (s.first_timestamp, s.last_timestamp) {
                    s.duration_ms = Some(b.saturating_sub(a).max(0) as u64);
                }
            }
        }
        Ok(self.summary)
    }
}

fn add_call(stats: &mut NameStats, ok: bool, ms: Option<u64>, out_bytes: Option<u64>) {
    stats.calls += 1;
    if !ok {
        stats.errors += 1;
    }
    stats.total_ms = stats.total_ms.saturating_add(ms.unwrap_or(0));
    stats.max_ms = stats.max_ms.max(ms.unwrap_or(0));
    stats.output_bytes = stats.output_bytes.saturating_add(out_bytes.unwrap_or(0));
}

fn plan_for(plans: &mut Vec<Plan>, id: Option<String>) -> &mut Plan {
    let id = id.unwrap_or_default();
    if let Some(i) = plans.iter().rposition(|p| p.plan_id == id) {
        return &mut plans[i];
    }
    plans.push(Plan {
        plan_id: id,
        ..Plan::default()
    });
    plans.last_mut().expect("just pushed")
}

/// `  +a +b  -c` for a refresh (empty when nothing changed).
pub fn change_list(r: &Refresh) -> String {
    let mut out = String::new();
    for a in &r.added {
        out.push_str(&format!("  +{a}"));
    }
    for x in &r.removed {
        out.push_str(&format!("  -{x}"));
    }
    out
}

/// One-line description of a retry: `attempt 1/3  HTTP 429  (status)  after 500ms`.
pub fn retry_text(r: &Retry) -> String {
    let mut out = format!(
        "attempt {}/{}",
        r.attempt.map_or("?".into(), |a| a.to_string()),
        r.max_retries.map_or("?".into(), |a| a.to_string())
    );
    if let Some(st) = r.provider_status {
        out.push_str(&format!("  HTTP {st}"));
    }
    if let Some(reason) = &r.reason {
        out.push_str(&format!("  ({reason})"));
    }
    if let Some(d) = r.delay_ms {
        out.push_str(&format!(
            "  after {}",
            super::format::duration(d.max(0) as u64)
        ));
    }
    out
}
