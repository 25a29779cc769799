//! A session's delegations as it sees them: outcomes shown to the model before its next call,
//! the single continuation after the model ended its turn, children ended with the task.

use ractor::ActorRef;

use super::{ExitStatus, Life, SessionMsg, SessionState};
use crate::delegation::{outcome_text, DelegationOutcome, OutcomeStatus};
use crate::durable::SessionRecords;
use crate::supervisor::SupervisorMsg;
use crate::trace::events::{self, DelegationEnd};

impl SessionState {
    /// Write the terminal `delegation` line of one outcome.
    pub(super) fn delegation_line(&self, o: &DelegationOutcome, reason: Option<&str>) {
        self.emit(events::delegation(
            &self.session_event,
            &DelegationEnd {
                capsule: &o.capsule,
                version: &o.version,
                delegation_id: Some(&o.delegation_id),
                child_session_id: Some(&o.child_session_id),
                duration_ms: o.duration_ms,
                outcome: o.status.as_str(),
                reason: reason.or(o.detail.as_deref()),
                usage: Some((
                    o.totals.input_tokens,
                    o.totals.output_tokens,
                    o.totals.turns,
                )),
                node: o.node.as_deref(),
            },
        ));
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
        self.outcomes_delivered += settled.len() as u32;
        self.push_user(texts.join("\n\n"), &ids);
    }

    /// The outcomes the next model call may read: every settled one, or under a replay's
    /// schedule ([`crate::continuation::Continuation::outcomes_before`]) no more than the
    /// recording had delivered by then.
    pub(super) fn take_deliverable(&mut self) -> Vec<DelegationOutcome> {
        match self.scheduled() {
            None => self.children.take_settled(),
            Some(want) => {
                let n = want.saturating_sub(self.outcomes_delivered);
                self.children.take_settled_at_most(n as usize)
            }
        }
    }

    /// The recorded count of outcomes read before the next model call, under a schedule.
    fn scheduled(&self) -> Option<u32> {
        let schedule = self.spec.continuation.outcomes_before.as_ref()?;
        schedule.get(self.totals.turns as usize).copied()
    }

    /// Under a schedule: the outcomes the next model call must read are all in.
    pub(super) fn schedule_met(&self) -> bool {
        self.scheduled().is_some_and(|want| {
            self.outcomes_delivered + self.children.settled_count() as u32 >= want
        })
    }

    /// Under a schedule: the next model call waits for outcomes still running.
    pub(super) fn waits_for_schedule(&self) -> bool {
        self.scheduled().is_some() && !self.schedule_met() && self.children.outstanding() > 0
    }

    /// The model ended its turn and every outcome is in: continue the task once with all of them.
    pub(super) fn continue_with_outcomes(&mut self, myself: &ActorRef<SessionMsg>) {
        let Life::Waiting { since } = self.life else {
            return;
        };
        let settled = self.take_deliverable();
        self.continuations += 1;
        let ids: Vec<&str> = settled.iter().map(|o| o.delegation_id.as_str()).collect();
        self.emit(events::task_continued(
            self.on_task(self.turn),
            self.continuations,
            &ids,
            since.elapsed().as_millis() as u64,
            self.spec
                .max_turns
                .map(|m| m.saturating_sub(self.totals.turns)),
        ));
        self.deliver(settled);
        self.start_turn(myself);
    }

    /// A child's outcome message (or a synthesized one) arrived.
    pub(super) fn child_outcome(&mut self, myself: &ActorRef<SessionMsg>, o: DelegationOutcome) {
        match self.life {
            Life::Draining { .. } => {
                // The task ended; a child it canceled has now ended too.
                self.children.settle(o);
                self.drained_if_all_ended(myself);
            }
            Life::Ending { .. } | Life::Ended { .. } => {
                // Its `delegation` line is written when the task closes (or was already).
                self.children.settle(o);
            }
            Life::Starting
            | Life::Inferring { .. }
            | Life::Calling { .. }
            | Life::Waiting { .. } => self.on_outcome(myself, o),
        }
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
        if matches!(self.life, Life::Waiting { .. })
            && (self.children.outstanding() == 0 || self.schedule_met())
        {
            self.continue_with_outcomes(myself);
        }
    }

    /// The task ended and waits for its children: once every one has ended, report.
    fn drained_if_all_ended(&self, myself: &ActorRef<SessionMsg>) {
        if matches!(self.life, Life::Draining { .. }) && self.children.all_ended() {
            let _ = myself.send_message(SessionMsg::Drained);
        }
    }

    /// A child's actor died (a panic): its delegation settles `crashed` (or, ended by its
    /// deadline already, has ended now). Its records were never flushed by the child itself:
    /// its whole folder is, once every line it appended is written.
    pub(super) fn child_crashed(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        delegation_id: &str,
        error: String,
    ) {
        let crashed = self
            .children
            .synthesize(delegation_id, OutcomeStatus::Crashed, error);
        let (records_dir, session_id) = match (&crashed, self.children.ended(delegation_id)) {
            (Some(o), _) => (o.child_records_dir.clone(), o.child_session_id.clone()),
            (None, Some(e)) => (e.records_dir, e.child_session_id),
            (None, None) => return,
        };
        let mut records = SessionRecords::new(records_dir, &[]);
        records.drain_first = true;
        self.record_sync.submit(records);
        if let Some(sup) = &self.supervisor {
            let _ = sup.send_message(SupervisorMsg::ChildGone { session_id });
        }
        match crashed {
            Some(o) => self.child_outcome(myself, o),
            None => self.drained_if_all_ended(myself),
        }
    }

    /// A delegation's deadline passed: end its child if it still runs, and settle it
    /// `terminated`.
    pub(super) fn deadline_passed(&mut self, myself: &ActorRef<SessionMsg>, delegation_id: &str) {
        if self.life.is_over() {
            return;
        }
        let Some(child) = self.children.running_child(delegation_id).cloned() else {
            return;
        };
        let secs = self.spec.delegation_deadline.as_secs_f64();
        let _ = child.send_message(SessionMsg::Cancel {
            reason: "the delegation deadline passed".into(),
        });
        let ending = self.children.ending_of(delegation_id);
        if let Some(o) = self.children.synthesize(
            delegation_id,
            OutcomeStatus::Terminated,
            format!("still running at the delegation deadline of {secs} s (lifecycle.delegation_deadline_secs); it was ended"),
        ) {
            self.on_outcome(myself, o);
        }
        // Settled now; the task's end still waits for the child's own (its trace whole).
        if let Some(e) = ending {
            self.children.wait_for_end(delegation_id, e);
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
        }
        // Outcomes that arrived but were never shown to the model still get their line.
        for o in self.children.take_settled() {
            self.delegation_line(&o, None);
        }
    }
}
