//! The wave scheduler.
//!
//! A wave is every unsettled step whose dependencies have all settled (with any status) and
//! whose condition holds, found by scanning the steps in declaration order. A step whose
//! condition is false settles `skipped` during the scan, without running, so a later step that
//! depends on it can join the same wave. The wave's steps then run together (futures joined on
//! this task: no threads); tool steps take turns on the tool lock. When the wave is done its
//! results settle in declaration order, `on_error` applied:
//!
//! - `fail`: the step stays `failed` and the plan stops after this wave; steps never reached are
//!   absent from the report.
//! - `skip`: the step is recorded `skipped`, keeping its error.
//! - `continue`: the step stays `failed`; its dependents still run.
//!
//! A condition that cannot be evaluated fails its step and stops the plan at once. A cancel
//! (the watch turning `true`) stops everything: finished steps keep their results, running ones
//! are dropped (their runner futures are cancel-safe) and reported failed, and every step not
//! yet dispatched is reported `skipped` with the cancel as its reason.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use futures::stream::{FuturesUnordered, StreamExt};
use tokio::sync::{watch, Mutex};

use super::condition;
use super::events::{PlanTrace, StepLine};
use super::model::{PlanDef, StepDef, StepKind, StepResult, StepStatus};
use super::refs::Settled;
use super::step::{self, Ran, StepEnv};
use super::validate::BLOCKED;
use super::StepRunner;

/// `plan_end.reason` (and the plan's answer) when the task running the plan is cancelled.
pub const CANCELLED: &str = "the task running this plan was cancelled";

/// The error of a step the cancel found not yet dispatched.
pub const CANCELLED_BEFORE: &str = "the task running this plan was cancelled before this step ran";

/// What a run of the scheduler settled.
#[derive(Clone, Debug, Default)]
pub struct Execution {
    /// Results in settlement order.
    pub results: Vec<StepResult>,
    /// The step that stopped the plan.
    pub failed_step: Option<String>,
    /// True when a cancel ended the run.
    pub canceled: bool,
}

/// The results settled so far, by id and in order.
#[derive(Default)]
struct Ledger {
    settled: Settled,
    order: Vec<String>,
}

impl Ledger {
    fn has(&self, id: &str) -> bool {
        self.settled.contains_key(id)
    }

    fn insert(&mut self, result: StepResult) {
        self.order.push(result.step_id.clone());
        self.settled.insert(result.step_id.clone(), result);
    }

    fn into_results(mut self) -> Vec<StepResult> {
        self.order
            .iter()
            .filter_map(|id| self.settled.remove(id))
            .collect()
    }
}

/// Run a validated `plan` to its end, its cancel, or its first stopping failure.
pub async fn execute(
    plan: &PlanDef,
    runner: &dyn StepRunner,
    trace: &PlanTrace,
    cancel: &mut watch::Receiver<bool>,
) -> Execution {
    let mut ledger = Ledger::default();
    let mut failed_step: Option<String> = None;
    let mut canceled = false;
    let tool_lock = Mutex::new(());

    while ledger.order.len() < plan.steps.len() && failed_step.is_none() {
        if *cancel.borrow() {
            canceled = true;
            break;
        }
        let mut ready: Vec<&StepDef> = Vec::new();
        let mut progressed = false;
        for step in &plan.steps {
            if ledger.has(&step.id) || !step.depends_on.iter().all(|d| ledger.has(d)) {
                continue;
            }
            match condition::evaluate(step.condition.as_deref(), &ledger.settled) {
                Ok(true) => ready.push(step),
                Ok(false) => {
                    let skipped = StepResult {
                        step_id: step.id.clone(),
                        status: StepStatus::Skipped,
                        output: None,
                        error: None,
                    };
                    trace.step(undispatched_line(step, &skipped));
                    ledger.insert(skipped);
                    progressed = true;
                }
                Err(error) => {
                    let failed = StepResult::failed(&step.id, error.to_string());
                    trace.step(undispatched_line(step, &failed));
                    ledger.insert(failed);
                    failed_step = Some(step.id.clone());
                    break;
                }
            }
        }
        if failed_step.is_some() {
            break;
        }
        if ready.is_empty() {
            if progressed {
                continue;
            }
            // Unreachable for a validated plan (cycles are refused up front); kept so a bug
            // can never spin this loop.
            if let Some(step) = plan.steps.iter().find(|s| !ledger.has(&s.id)) {
                let failed = StepResult::failed(&step.id, BLOCKED);
                trace.step(undispatched_line(step, &failed));
                ledger.insert(failed);
                failed_step = Some(step.id.clone());
            }
            break;
        }

        for step in &ready {
            trace.step_start(step);
        }
        let wave_started = Instant::now();
        let (finished, dispatched, cut_short) =
            run_wave(&ready, &ledger.settled, runner, &tool_lock, cancel).await;

        for ((step, ran), dispatched) in ready.iter().zip(finished).zip(&dispatched) {
            let (settled, stops, attempts, duration_ms, input) = match ran {
                Some(ran) => {
                    let (settled, stops) = apply_on_error(step, ran.result);
                    (settled, stops, ran.attempts, ran.duration_ms, ran.input)
                }
                None => match dispatched.load(Ordering::SeqCst) {
                    0 => (skipped_by_cancel(step), false, 0, 0, None),
                    n => {
                        let ended = StepResult::failed(&step.id, ended_by_cancel(step));
                        let ms = wave_started.elapsed().as_millis() as u64;
                        (ended, false, n, ms, None)
                    }
                },
            };
            trace.step(StepLine {
                step,
                status: settled.status,
                attempts,
                duration_ms,
                error: settled.error.as_deref(),
                input: input.as_ref(),
            });
            if stops && failed_step.is_none() {
                failed_step = Some(step.id.clone());
            }
            ledger.insert(settled);
        }
        if cut_short {
            canceled = true;
            break;
        }
    }

    if canceled {
        for step in &plan.steps {
            if !ledger.has(&step.id) {
                let skipped = skipped_by_cancel(step);
                trace.step(undispatched_line(step, &skipped));
                ledger.insert(skipped);
            }
        }
    }
    Execution {
        results: ledger.into_results(),
        failed_step,
        canceled,
    }
}

/// Run one wave's steps together; each finished step's [`Ran`] in `ready` order (`None` for a
/// step the cancel cut short), the dispatch counters, and whether the cancel came.
async fn run_wave(
    ready: &[&StepDef],
    settled: &Settled,
    runner: &dyn StepRunner,
    tool_lock: &Mutex<()>,
    cancel: &mut watch::Receiver<bool>,
) -> (Vec<Option<Ran>>, Vec<AtomicU32>, bool) {
    let env = StepEnv {
        settled,
        runner,
        tool_lock,
    };
    let dispatched: Vec<AtomicU32> = ready.iter().map(|_| AtomicU32::new(0)).collect();
    let mut finished: Vec<Option<Ran>> = vec![None; ready.len()];
    let mut cut_short = false;
    {
        let env = &env;
        let mut running: FuturesUnordered<_> = ready
            .iter()
            .zip(&dispatched)
            .enumerate()
            .map(|(i, (step, counter))| async move {
                (i, step::run_with_retries(step, env, counter).await)
            })
            .collect();
        loop {
            tokio::select! {
                biased;
                _ = cancelled(cancel) => {
                    cut_short = true;
                    break;
                }
                next = running.next() => match next {
                    Some((i, ran)) => finished[i] = Some(ran),
                    None => break,
                },
            }
        }
    }
    (finished, dispatched, cut_short)
}

/// Resolves once the watch reads `true`; never, if its sender is gone while it reads `false`.
async fn cancelled(cancel: &mut watch::Receiver<bool>) {
    loop {
        if *cancel.borrow_and_update() {
            return;
        }
        if cancel.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// The settled form of a failed step under its `on_error`, and whether it stops the plan.
fn apply_on_error(step: &StepDef, result: StepResult) -> (StepResult, bool) {
    if result.status != StepStatus::Failed {
        return (result, false);
    }
    match step.on_error.as_str() {
        "skip" => (
            StepResult {
                status: StepStatus::Skipped,
                output: None,
                ..result
            },
            false,
        ),
        "continue" => (result, false),
        _ => (result, true),
    }
}

fn skipped_by_cancel(step: &StepDef) -> StepResult {
    StepResult {
        step_id: step.id.clone(),
        status: StepStatus::Skipped,
        output: None,
        error: Some(CANCELLED_BEFORE.to_string()),
    }
}

fn ended_by_cancel(step: &StepDef) -> String {
    let what = match step.kind() {
        Ok(StepKind::Capsule) => "sub-capsule",
        Ok(StepKind::Shell) => "command",
        _ => "tool call",
    };
    format!("{CANCELLED}; this step's {what} was ended with it")
}

fn undispatched_line<'a>(step: &'a StepDef, result: &'a StepResult) -> StepLine<'a> {
    StepLine {
        step,
        status: result.status,
        attempts: 0,
        duration_ms: 0,
        error: result.error.as_deref(),
        input: None,
    }
}
