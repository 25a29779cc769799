//! A session's delegations as it sees them: outcomes shown to the model before its next call,
//! the single continuation after the model ended its turn, children ended with the task.

use super::*;

impl SessionState {
    /// Write the terminal `delegation` line of one outcome.
    pub(super) fn delegation_line(&self, o: &DelegationOutcome, reason: Option<&str>) {
        self.emit(
            TraceEvent::new("delegation", Some(&self.session_event))
                .with("capsule", &o.capsule)
                .with("version", &o.version)
                .with("delegation_id", &o.delegation_id)
                .with("child_session_id", &o.child_session_id)
                .with("duration_ms", o.duration_ms)
                .with("outcome", o.status.as_str())
                .with("reason", reason.or(o.detail.as_deref()))
                .with(
                    "usage",
                    json!({"input_tokens": o.totals.input_tokens, "output_tokens": o.totals.output_tokens, "turns": o.totals.turns}),
                ),
        );
    }

    /// Show settled outcomes to the model: one user message, before the next model call.
    pub(super) fn deliver(&mut self, settled: Vec<DelegationOutcome>) {
        if settled.is_empty() {
            return;
        }
        let texts: Vec<String> = settled
            .iter()
            .map(|o| {
                self.delegation_line(o, None);
                outcome_text(o)
            })
            .collect();
        let ids: Vec<&str> = settled.iter().map(|o| o.delegation_id.as_str()).collect();
        self.push_user(texts.join("\n\n"), &ids);
    }

    /// The model ended its turn and every outcome is in: continue the task once with all of them.
    pub(super) fn continue_with_outcomes(&mut self, myself: &ActorRef<SessionMsg>) {
        let Some(since) = self.waiting.take() else {
            return;
        };
        let settled = self.children.take_settled();
        self.continuations += 1;
        let ids: Vec<&str> = settled.iter().map(|o| o.delegation_id.as_str()).collect();
        self.emit(
            TraceEvent::new("task_continued", Some(&self.task_event))
                .with("task_id", &self.task_id)
                .with("continuation_number", self.continuations)
                .with("delegations", &ids)
                .with("member_calls", Vec::<String>::new())
                .with("waited_ms", since.elapsed().as_millis() as u64)
                .with(
                    "turns_remaining",
                    self.spec
                        .max_turns
                        .map(|m| m.saturating_sub(self.totals.turns)),
                ),
        );
        self.deliver(settled);
        self.start_turn(myself);
    }

    /// A child's outcome message (or a synthesized one) arrived.
    pub(super) fn child_outcome(&mut self, myself: &ActorRef<SessionMsg>, o: DelegationOutcome) {
        if self.ended.is_some() {
            // Draining: the task ended, the child has now ended too.
            self.children.settle(o);
            if self.draining && self.children.running().is_empty() {
                let _ = myself.send_message(SessionMsg::Drained);
            }
            return;
        }
        self.on_outcome(myself, o);
    }

    /// A delegation settled (answered, crashed, or ended by its deadline).
    pub(super) fn on_outcome(&mut self, myself: &ActorRef<SessionMsg>, outcome: DelegationOutcome) {
        let tokens = (outcome.totals.input_tokens, outcome.totals.output_tokens);
        if !self.children.settle(outcome) {
            return;
        }
        self.totals.input_tokens += tokens.0;
        self.totals.output_tokens += tokens.1;
        self.delegated.0 += tokens.0;
        self.delegated.1 += tokens.1;
        if self.waiting.is_some() && self.children.outstanding() == 0 {
            self.continue_with_outcomes(myself);
        }
    }

    /// End children still running, writing each delegation's terminal line with `reason`.
    pub(super) fn end_children(&mut self, status: ExitStatus) {
        let reason = match status {
            ExitStatus::Canceled => "the delegating task was cancelled".to_string(),
            ExitStatus::Ok => {
                "the delegating task had no inference turn left to read this outcome".to_string()
            }
            other => format!(
                "the delegating task ended {} before this sub-capsule finished",
                other.as_str()
            ),
        };
        for (dlg, child) in self.children.running() {
            if let Some(o) =
                self.children
                    .synthesize(&dlg, OutcomeStatus::Terminated, reason.clone())
            {
                self.delegation_line(&o, Some(&reason));
            }
            let _ = child.send_message(SessionMsg::Cancel {
                reason: "the parent ended this delegation".into(),
            });
            self.draining = true;
        }
        // Outcomes that arrived but were never shown to the model still get their line.
        for o in self.children.take_settled() {
            self.delegation_line(&o, None);
        }
    }
}
