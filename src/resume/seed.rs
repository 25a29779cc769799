//! Rebuilding where a recorded session stood, for `mur resume`: its conversation up to the last
//! complete turn, its counters, the calls it had not finished and the delegations whose outcome
//! its model never read.
//!
//! A session that was itself resumed holds only what it added: the conversation before it is
//! rebuilt from the session it names in `resumed_from` (a folder beside it), and so on back.

use std::collections::HashSet;

use mur_actors::continuation::{Seed, SeedCall};
use mur_actors::delegation::{outcome_text, DelegationOutcome, OutcomeStatus};
use mur_actors::model::{ContentBlock, Message};
use mur_actors::session::Totals;
use serde_json::Value;

use crate::diagnostic::Diagnostic;
use crate::replay::recording::{self, ArtifactChange, Call, Recording};

/// How many `resumed_from` links a rebuild follows.
const MAX_CHAIN: usize = 64;

/// What a resume starts from.
#[derive(Debug, Default)]
pub struct Rebuilt {
    /// The kernel's seed: conversation, counters, calls to make first.
    pub seed: Seed,
    /// Delegations started again (`dlg_…` of the old ones).
    pub redelegated: Vec<String>,
    /// The artifacts the session had pulled and not removed (full names, in the order pulled),
    /// across the sessions it resumed: the resume holds them again.
    pub pulled: Vec<String>,
    /// The recorded session's id, then the ids of the sessions it resumed, newest first.
    pub chain: Vec<String>,
}

fn add(a: Totals, b: Totals) -> Totals {
    Totals {
        turns: a.turns.saturating_add(b.turns),
        input_tokens: a.input_tokens.saturating_add(b.input_tokens),
        output_tokens: a.output_tokens.saturating_add(b.output_tokens),
        tool_calls: a.tool_calls.saturating_add(b.tool_calls),
        shell_calls: a.shell_calls.saturating_add(b.shell_calls),
    }
}

fn carried(rec: &Recording) -> Totals {
    let Some(t) = rec.start.get("resumed_totals") else {
        return Totals::default();
    };
    let n = |k: &str| t.get(k).and_then(Value::as_u64).unwrap_or(0);
    Totals {
        turns: n("turns") as u32,
        input_tokens: n("input_tokens"),
        output_tokens: n("output_tokens"),
        tool_calls: n("tool_calls") as u32,
        shell_calls: n("shell_calls") as u32,
    }
}

fn result_message(c: &Call) -> Message {
    Message::Tool {
        tool_call_id: c.id.clone(),
        is_error: c.is_error,
        content: vec![ContentBlock::text(c.output.clone().unwrap_or_default())],
    }
}

/// The state `rec` reached.
pub fn rebuild(rec: &Recording) -> Result<Rebuilt, Diagnostic> {
    rebuild_at(rec, 0)
}

fn rebuild_at(rec: &Recording, depth: usize) -> Result<Rebuilt, Diagnostic> {
    let mut messages = Vec::new();
    let mut pending: Vec<SeedCall> = Vec::new();
    let mut redelegated = Vec::new();
    let mut pulled: Vec<String> = Vec::new();
    let mut chain = vec![rec.session_id.clone()];
    match rec.start.get("resumed_from").and_then(Value::as_str) {
        Some(prev) if depth < MAX_CHAIN => {
            let path = rec.dir.with_file_name(prev).join("trace.jsonl");
            let before = recording::read(&path).map_err(|d| {
                Diagnostic::error(
                    "E-RPL-001",
                    format!(
                        "{}: session {} resumed {prev}, whose trace cannot be read: {}",
                        rec.path.display(),
                        rec.session_id,
                        d.message
                    ),
                )
            })?;
            let base = rebuild_at(&before, depth + 1)?;
            messages = base.seed.messages;
            redelegated = base.redelegated;
            pulled = base.pulled;
            chain.extend(base.chain);
            // The calls it had not finished, finished (or not) by this session.
            for c in base.seed.pending {
                match rec
                    .orphans
                    .iter()
                    .find(|o| o.id == c.id && o.output.is_some())
                {
                    // A re-delegation's result is a note, recorded as a user_message.
                    Some(_) if c.redelegates.is_some() => {}
                    Some(done) => messages.push(result_message(done)),
                    None => pending.push(c),
                }
            }
        }
        Some(_) => {
            return Err(Diagnostic::error(
                "E-RPL-001",
                format!(
                    "{}: more than {MAX_CHAIN} resumes in a row; resume a session nearer the start",
                    rec.path.display()
                ),
            ))
        }
        None => {
            let task = rec.task.clone().ok_or_else(|| {
                Diagnostic::error(
                    "E-RPL-001",
                    format!(
                        "{}: the recording holds no task (no task_start.task and no task.md beside it)",
                        rec.path.display()
                    ),
                )
            })?;
            messages.push(Message::user_text(task));
        }
    }
    for change in &rec.artifact_changes {
        match change {
            ArtifactChange::Pulled(name) => {
                pulled.retain(|n| n != name);
                pulled.push(name.clone());
            }
            ArtifactChange::Removed(name) => pulled.retain(|n| n != name),
        }
    }
    let injected_at = |turn: u32, messages: &mut Vec<Message>| {
        for m in rec.injected.iter().filter(|m| m.turn == turn) {
            messages.push(Message::user_text(m.text.clone()));
        }
    };
    let counted: Vec<_> = rec.counted().collect();
    for t in &counted {
        injected_at(t.turn, &mut messages);
        let reply = t.reply.as_ref().expect("counted turns have replies");
        messages.push(Message::Assistant {
            content: reply.content.clone(),
        });
        for c in &t.calls {
            match &c.output {
                Some(_) => messages.push(result_message(c)),
                // Recorded without its result: treated as not done, run again first.
                None => pending.push(SeedCall {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    input: c.input.clone(),
                    turn: t.turn,
                    redelegates: None,
                }),
            }
        }
    }
    // Turn numbers go on across resumes.
    let next = carried(rec).turns + counted.len() as u32;
    injected_at(next, &mut messages);
    // Delegations whose outcome the model never read are started again.
    let delivered: HashSet<&str> = rec
        .injected
        .iter()
        .flat_map(|m| m.delegations.iter().map(String::as_str))
        .collect();
    let calls: Vec<&Call> = rec
        .turns
        .iter()
        .flat_map(|t| &t.calls)
        .chain(&rec.orphans)
        .filter(|c| c.name == "delegate-task")
        .collect();
    let mut totals = add(carried(rec), rec.totals);
    for d in &rec.delegations {
        if delivered.contains(d.id.as_str()) {
            continue;
        }
        // Finished on its own (not ended with its parent): its recorded outcome is delivered.
        if d.outcome.as_deref() != Some("terminated") {
            if let Some(o) = finished_outcome(d) {
                totals.input_tokens += o.totals.input_tokens;
                totals.output_tokens += o.totals.output_tokens;
                messages.push(Message::user_text(outcome_text(&o)));
                continue;
            }
        }
        let Some(call) = calls.iter().find(|c| {
            c.output
                .as_deref()
                .is_some_and(|o| o.contains(d.id.as_str()))
        }) else {
            continue;
        };
        redelegated.push(d.id.clone());
        pending.push(SeedCall {
            id: format!("resume_{}", d.id),
            name: "delegate-task".into(),
            input: call.input.clone(),
            turn: next,
            redelegates: Some(d.id.clone()),
        });
    }
    // The model had ended its turn with delegations running: the session was waiting.
    let waiting = !pending.is_empty()
        && pending.iter().all(|c| c.redelegates.is_some())
        && counted
            .last()
            .and_then(|t| t.reply.as_ref())
            .is_some_and(|r| r.stop_reason == mur_actors::model::StopReason::EndTurn);
    Ok(Rebuilt {
        seed: Seed {
            messages,
            totals,
            pending,
            waiting,
        },
        redelegated,
        pulled,
        chain,
    })
}

/// The outcome of a delegation whose child ended on its own (its trace has a `session_end`),
/// as the parent's model would have read it.
fn finished_outcome(d: &recording::Delegation) -> Option<DelegationOutcome> {
    let child = recording::read(&d.child_records_dir.join("trace.jsonl")).ok()?;
    let status = match child.exit_status.as_deref()? {
        "ok" => OutcomeStatus::Ok,
        _ => OutcomeStatus::Error,
    };
    let answer =
        std::fs::read_to_string(d.child_records_dir.join("out/result.txt")).unwrap_or_default();
    Some(DelegationOutcome {
        delegation_id: d.id.clone(),
        capsule: d.capsule.clone(),
        version: d.version.clone(),
        child_session_id: d.child_session_id.clone(),
        status,
        answer,
        detail: None,
        duration_ms: 0,
        totals: child.totals,
        child_workdir: child.workdir.clone().unwrap_or_default(),
        child_records_dir: d.child_records_dir.clone(),
        node: None,
    })
}
