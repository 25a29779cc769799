//! The `submit-plan` engine: validate a plan of steps, run it in waves, report every step.
//!
//! The engine owns the plan contract (format, validation sentences, scheduling, conditions,
//! references, `on_error`, retries, the result JSON and the `plan_*` trace lines) and nothing
//! else: every step is dispatched through a [`StepRunner`] the session implements, so a plan's
//! tool and shell steps pass the same decision point as a direct call (grants, policy hooks,
//! fence) and its capsule steps use the same delegation path as `delegate-task`. The engine is a
//! plain async function, not an actor: the session runs it in a task of its own, its steps are
//! futures joined on that task, and a cancel reaches it through a watch channel.
//!
//! Deviations from upstream, on purpose (each documented where it lives):
//! - a dependency cycle is refused before anything runs (same sentence);
//! - a capsule step must name a capsule of `capabilities.spawn.allow`, checked up front;
//! - a capsule step may carry `"version"` (default `0.1.0`, upstream's fixed value);
//! - when a wave holds a failing `on_error: fail` step, the other steps of that wave (which did
//!   run) are still reported.

mod condition;
mod error;
pub use error::PlanError;
mod events;
mod model;
mod refs;
mod result;
mod schedule;
mod step;
mod task;
mod validate;
mod words;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use tokio::sync::watch;

pub use model::{
    PlanDef, StepDef, StepKind, StepResult, StepStatus, DEFAULT_CAPSULE_VERSION, NOT_A_PLAN,
    PLAN_STEP_ID,
};
pub use schedule::{CANCELLED, CANCELLED_BEFORE};
pub use validate::{BLOCKED, MAX_STEP_RETRIES};

use events::{EndLine, PlanTrace};
use result::Counts;

/// What a plan step asks the session to do; the session answers through the same decision
/// point as a direct call (grants, fence, policy hooks).
#[async_trait::async_trait]
pub trait StepRunner: Send + Sync {
    /// Run one of the session's own tools with this input (tool steps; one at a time).
    /// Success carries the tool's unfenced result text; failure the tool's summary or data, or a
    /// refusal sentence (e.g. a policy hook's), or `tool step failed`.
    async fn run_tool(&self, tool: &str, input: Value) -> StepOutcome;
    /// Run one shell step: `argv[0]` is the binary (already checked against shell.allow).
    /// Success iff exit code 0 (output = stdout); otherwise the error is stderr, or
    /// `exit code <n>` when stderr is blank.
    async fn run_shell(&self, argv: Vec<String>) -> StepOutcome;
    /// Delegate `task` to the capsule (bare name) at `version` and wait for its outcome.
    /// Success carries the child's (bounded) answer; anything else fails with its reason.
    async fn run_capsule(&self, capsule: &str, version: &str, task: &str) -> StepOutcome;
    /// Emit one trace line (plan_start, plan_step_start, plan_step, plan_end).
    fn trace(&self, event: crate::trace::TraceEvent);
}

/// How one dispatch of a step ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepOutcome {
    /// It succeeded; `output` is what `$<step>.output` reads.
    Success {
        /// The step's output text.
        output: String,
    },
    /// It failed; `error` is reported (and retried while attempts remain).
    Failed {
        /// Why, in words the model can act on.
        error: String,
    },
}

/// What the validator needs to know about the session.
#[derive(Clone, Debug, Default)]
pub struct PlanContext {
    /// Every tool name in the session's tool array (shell binaries and runtime tools included);
    /// a tool step must name one of them.
    pub tools: Vec<String>,
    /// `capabilities.shell.allow`; a shell step's binary must be one of them.
    pub shell_allow: Vec<String>,
    /// Bare names from `capabilities.spawn.allow`; a capsule step must name one of them.
    pub capsules: Vec<String>,
    /// The event `plan_start` hangs off (the `submit-plan` call's trace event).
    pub parent_event: String,
}

/// The plan's answer to the session.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanReport {
    /// True iff every step settled without stopping the plan (the tool result passes).
    pub completed: bool,
    /// True iff a cancel ended the plan.
    pub canceled: bool,
    /// `{plan_id, completed, canceled, failed_step, steps: [{step_id, status, output, error}]}`.
    pub data: Value,
    /// `Plan '<id>': <n> steps, <a> succeeded, <b> failed, <c> skipped` (or `… was cancelled: …`).
    pub summary: String,
}

impl PlanReport {
    /// The text the model reads (to be fenced once, under `tool:submit-plan`): `data` as compact
    /// JSON.
    pub fn text(&self) -> String {
        self.data.to_string()
    }

    fn refused(plan_id: &str, steps_total: usize, step_id: &str, error: &PlanError) -> Self {
        let results = vec![StepResult::failed(step_id, error.to_string())];
        PlanReport {
            completed: false,
            canceled: false,
            data: result::data(plan_id, false, false, Some(step_id), &results),
            summary: result::summary(plan_id, steps_total, Counts::of(&results), false),
        }
    }
}

/// Run the plan in a `submit-plan` input (`{"plan": {...}}`) against the session behind
/// `runner`, until it completes, stops on a failure, or `cancel` turns `true`.
///
/// Never panics and never errs: an input that holds no plan, or a plan that breaks a rule, is
/// the single failed step result naming the rule (step `plan` for the former).
pub async fn run_plan(
    input: &Value,
    ctx: &PlanContext,
    runner: Arc<dyn StepRunner>,
    mut cancel: watch::Receiver<bool>,
) -> PlanReport {
    let started = Instant::now();
    let mut trace = PlanTrace::new(runner.clone(), &ctx.parent_event);
    let plan = match model::parse_input(input) {
        Ok(plan) => plan,
        Err(error) => {
            trace.end(EndLine {
                outcome: "failed",
                failed_step: Some(PLAN_STEP_ID),
                steps_total: 0,
                counts: Counts::default(),
                duration_ms: started.elapsed().as_millis() as u64,
                reason: Some(&error.to_string()),
            });
            return PlanReport::refused("", 0, PLAN_STEP_ID, &error);
        }
    };
    // The plan is described before it is judged: a refusal reads best beside the steps it names.
    trace.start(&plan);
    if let Err(refusal) = validate::validate(&plan, ctx) {
        trace.end(EndLine {
            outcome: "failed",
            failed_step: Some(&refusal.step_id),
            steps_total: plan.steps.len(),
            counts: Counts::default(),
            duration_ms: started.elapsed().as_millis() as u64,
            reason: Some(&refusal.error.to_string()),
        });
        return PlanReport::refused(&plan.id, plan.steps.len(), &refusal.step_id, &refusal.error);
    }

    let run = schedule::execute(&plan, runner.as_ref(), &trace, &mut cancel).await;
    let counts = Counts::of(&run.results);
    let completed = !run.canceled && run.failed_step.is_none();
    let outcome = match (run.canceled, completed) {
        (true, _) => "canceled",
        (false, true) => "completed",
        (false, false) => "failed",
    };
    trace.end(EndLine {
        outcome,
        failed_step: run.failed_step.as_deref(),
        steps_total: plan.steps.len(),
        counts,
        duration_ms: started.elapsed().as_millis() as u64,
        reason: run.canceled.then_some(CANCELLED),
    });
    PlanReport {
        completed,
        canceled: run.canceled,
        data: result::data(
            &plan.id,
            completed,
            run.canceled,
            run.failed_step.as_deref(),
            &run.results,
        ),
        summary: result::summary(&plan.id, plan.steps.len(), counts, run.canceled),
    }
}
