//! The plan's trace lines: `plan_start`, `plan_step_start`, `plan_step`, `plan_end`.
//!
//! `plan_start` hangs off the event the session names (the `submit-plan` call); the step lines
//! and `plan_end` hang off `plan_start`, so a trace reader sees each plan as one subtree. A plan
//! whose input did not parse has no `plan_start`; its `plan_end` hangs off the session's event.
//! A step that settled without being dispatched (a false condition, a cancel) gets a `plan_step`
//! with `attempts: 0` and no `plan_step_start`: a step that did not run must not read like one
//! that did.

use std::sync::Arc;

use serde_json::{json, Value};

use super::model::{PlanDef, StepDef, StepStatus};
use super::result::Counts;
use super::StepRunner;
use crate::trace::{EventType, TraceEvent};

/// Writes one plan's lines through the runner, remembering the `plan_start` id.
pub struct PlanTrace {
    runner: Arc<dyn StepRunner>,
    session_parent: String,
    plan_event: Option<String>,
    plan_id: String,
}

/// The facts of one settled step for its `plan_step` line.
pub struct StepLine<'a> {
    /// The step.
    pub step: &'a StepDef,
    /// How it settled.
    pub status: StepStatus,
    /// Dispatches made (0 when never dispatched).
    pub attempts: u32,
    /// Wall time over all attempts.
    pub duration_ms: u64,
    /// The error it settled with, if any.
    pub error: Option<&'a str>,
    /// The interpolated input of a tool step's last attempt.
    pub input: Option<&'a Value>,
}

/// The facts of the plan's end for its `plan_end` line.
pub struct EndLine<'a> {
    /// `completed`, `failed` or `canceled`.
    pub outcome: &'static str,
    /// The step that stopped the plan.
    pub failed_step: Option<&'a str>,
    /// Steps the plan declared.
    pub steps_total: usize,
    /// Results by status.
    pub counts: Counts,
    /// Wall time of the whole plan.
    pub duration_ms: u64,
    /// Why the plan ended early (validation refusal, cancel).
    pub reason: Option<&'a str>,
}

impl PlanTrace {
    /// A writer for one plan under `session_parent`.
    pub fn new(runner: Arc<dyn StepRunner>, session_parent: &str) -> Self {
        PlanTrace {
            runner,
            session_parent: session_parent.to_string(),
            plan_event: None,
            plan_id: String::new(),
        }
    }

    fn parent(&self) -> &str {
        self.plan_event.as_deref().unwrap_or(&self.session_parent)
    }

    /// `plan_start{plan_id, step_count, steps:[{step_id, kind, depends_on, has_condition}]}`.
    pub fn start(&mut self, plan: &PlanDef) {
        let steps: Vec<Value> = plan
            .steps
            .iter()
            .map(|s| {
                json!({
                    "step_id": s.id,
                    "kind": s.kind_name(),
                    "depends_on": s.depends_on,
                    "has_condition": s.condition.is_some(),
                })
            })
            .collect();
        let event = TraceEvent::new(EventType::PlanStart, Some(&self.session_parent))
            .with("plan_id", &plan.id)
            .with("step_count", plan.steps.len())
            .with("steps", steps);
        self.plan_event = Some(event.event_id.clone());
        self.plan_id = plan.id.clone();
        self.runner.trace(event);
    }

    /// `plan_step_start{plan_id, step_id, kind, depends_on}`.
    pub fn step_start(&self, step: &StepDef) {
        let event = TraceEvent::new(EventType::PlanStepStart, Some(self.parent()))
            .with("plan_id", &self.plan_id)
            .with("step_id", &step.id)
            .with("kind", step.kind_name())
            .with("depends_on", &step.depends_on);
        self.runner.trace(event);
    }

    /// `plan_step{plan_id, step_id, kind, status, attempts, duration_ms, error?, input?}`.
    pub fn step(&self, line: StepLine<'_>) {
        let event = TraceEvent::new(EventType::PlanStep, Some(self.parent()))
            .with("plan_id", &self.plan_id)
            .with("step_id", &line.step.id)
            .with("kind", line.step.kind_name())
            .with("status", line.status.as_str())
            .with("attempts", line.attempts)
            .with("duration_ms", line.duration_ms)
            .with_opt("error", line.error)
            .with_opt("input", line.input);
        self.runner.trace(event);
    }

    /// `plan_end{plan_id, outcome, failed_step?, steps_total, steps_succeeded, steps_failed,
    /// steps_skipped, duration_ms, reason?}`.
    pub fn end(&self, line: EndLine<'_>) {
        let event = TraceEvent::new(EventType::PlanEnd, Some(self.parent()))
            .with("plan_id", &self.plan_id)
            .with("outcome", line.outcome)
            .with_opt("failed_step", line.failed_step)
            .with("steps_total", line.steps_total)
            .with("steps_succeeded", line.counts.succeeded)
            .with("steps_failed", line.counts.failed)
            .with("steps_skipped", line.counts.skipped)
            .with("duration_ms", line.duration_ms)
            .with_opt("reason", line.reason);
        self.runner.trace(event);
    }
}
