//! Running one step: substitute its references, dispatch it through the [`StepRunner`], retry
//! it while it fails and attempts remain.
//!
//! Each attempt re-reads its references (they cannot change within a wave, but a reference that
//! is not ready fails the attempt like any other failure). Tool steps take the plan's tool lock
//! for the length of one attempt, so tool calls reach the session one at a time while shell and
//! capsule steps of the same wave run beside them.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use serde_json::{json, Value};
use tokio::sync::Mutex;

use super::model::{StepDef, StepKind, StepResult, StepStatus};
use super::refs::{self, Settled};
use super::{task, words, StepOutcome, StepRunner};

/// One step's verdict and the facts its `plan_step` line needs.
#[derive(Clone, Debug)]
pub struct Ran {
    /// How it settled (before `on_error` is applied).
    pub result: StepResult,
    /// Attempts made (retries + 1 at most).
    pub attempts: u32,
    /// Wall time over every attempt.
    pub duration_ms: u64,
    /// A tool step's interpolated input, as last dispatched.
    pub input: Option<Value>,
}

/// What one step needs from the plan around it.
pub struct StepEnv<'a> {
    /// Results settled before this step's wave began.
    pub settled: &'a Settled,
    /// The session's side of every dispatch.
    pub runner: &'a dyn StepRunner,
    /// Held for one tool dispatch at a time.
    pub tool_lock: &'a Mutex<()>,
}

/// Run `step` up to `retries + 1` times, stopping at the first attempt that does not fail.
/// `dispatched` counts attempts that reached the runner (read when a cancel cuts the step short).
pub async fn run_with_retries(step: &StepDef, env: &StepEnv<'_>, dispatched: &AtomicU32) -> Ran {
    let started = Instant::now();
    let attempts = step.retries.saturating_add(1);
    let mut attempt = 0;
    loop {
        attempt += 1;
        let (result, input) = run_once(step, env, dispatched).await;
        if result.status != StepStatus::Failed || attempt >= attempts {
            return Ran {
                result,
                attempts: attempt,
                duration_ms: started.elapsed().as_millis() as u64,
                input,
            };
        }
    }
}

async fn run_once(
    step: &StepDef,
    env: &StepEnv<'_>,
    dispatched: &AtomicU32,
) -> (StepResult, Option<Value>) {
    let mut input = step.input.clone();
    if let Err(error) = refs::interpolate(&mut input, env.settled) {
        return (StepResult::failed(&step.id, error.to_string()), None);
    }
    let kind = match step.kind() {
        Ok(kind) => kind,
        Err(error) => return (StepResult::failed(&step.id, error.to_string()), None),
    };
    match kind {
        StepKind::Tool => {
            // A step with no input calls the tool with an empty object, as the model would.
            if input.is_null() {
                input = json!({});
            }
            let tool = step.tool.as_deref().unwrap_or_default();
            let _one_at_a_time = env.tool_lock.lock().await;
            dispatched.fetch_add(1, Ordering::SeqCst);
            let outcome = env.runner.run_tool(tool, input.clone()).await;
            (settle(&step.id, outcome), Some(input))
        }
        StepKind::Shell => {
            let argv = words::split(step.shell.as_deref().unwrap_or_default());
            if argv.is_empty() {
                return (StepResult::failed(&step.id, "shell command is empty"), None);
            }
            dispatched.fetch_add(1, Ordering::SeqCst);
            (settle(&step.id, env.runner.run_shell(argv).await), None)
        }
        StepKind::Capsule => {
            let task = match task::task_text(&input) {
                Ok(task) => task,
                Err(error) => return (StepResult::failed(&step.id, error.to_string()), None),
            };
            let capsule = step.capsule.as_deref().unwrap_or_default();
            dispatched.fetch_add(1, Ordering::SeqCst);
            let outcome = env
                .runner
                .run_capsule(capsule, step.capsule_version(), &task)
                .await;
            (settle(&step.id, outcome), None)
        }
    }
}

fn settle(step_id: &str, outcome: StepOutcome) -> StepResult {
    match outcome {
        StepOutcome::Success { output } => StepResult {
            step_id: step_id.to_string(),
            status: StepStatus::Success,
            output: Some(output),
            error: None,
        },
        StepOutcome::Failed { error } => StepResult::failed(step_id, error),
    }
}
