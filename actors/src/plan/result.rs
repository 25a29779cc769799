//! The report a plan returns to the model: the result JSON and its one-line summary.
//!
//! Steps appear in the order they settled (a wave's steps in declaration order), each with
//! `output` and `error` present as `null` when absent, so every step result has the same four
//! keys. Step outputs are not fenced one by one: the whole report is fenced once, as the result
//! of `submit-plan`.

use serde_json::{json, Map, Value};

use super::model::{StepResult, StepStatus};

/// How many results settled with each status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// `success`.
    pub succeeded: usize,
    /// `failed`.
    pub failed: usize,
    /// `skipped`.
    pub skipped: usize,
}

impl Counts {
    /// Count `results` by status.
    pub fn of(results: &[StepResult]) -> Self {
        let mut c = Counts::default();
        for r in results {
            match r.status {
                StepStatus::Success => c.succeeded += 1,
                StepStatus::Failed => c.failed += 1,
                StepStatus::Skipped => c.skipped += 1,
            }
        }
        c
    }
}

/// The result JSON: `{plan_id, completed, canceled, failed_step, steps: [{step_id, status,
/// output, error}]}`.
pub fn data(
    plan_id: &str,
    completed: bool,
    canceled: bool,
    failed_step: Option<&str>,
    results: &[StepResult],
) -> Value {
    let steps: Vec<Value> = results
        .iter()
        .map(|r| {
            let mut m = Map::new();
            m.insert("step_id".into(), json!(r.step_id));
            m.insert("status".into(), json!(r.status.as_str()));
            m.insert("output".into(), json!(r.output));
            m.insert("error".into(), json!(r.error));
            Value::Object(m)
        })
        .collect();
    let mut m = Map::new();
    m.insert("plan_id".into(), json!(plan_id));
    m.insert("completed".into(), json!(completed));
    m.insert("canceled".into(), json!(canceled));
    m.insert("failed_step".into(), json!(failed_step));
    m.insert("steps".into(), Value::Array(steps));
    Value::Object(m)
}

/// `Plan '<id>': <n> steps, <a> succeeded, <b> failed, <c> skipped`, or
/// `Plan '<id>' was cancelled: …` with the same counts. `<n>` is the number of steps the plan
/// declared; the counts are over the results reported.
pub fn summary(plan_id: &str, steps_total: usize, counts: Counts, canceled: bool) -> String {
    let head = if canceled {
        format!("Plan '{plan_id}' was cancelled")
    } else {
        format!("Plan '{plan_id}'")
    };
    format!(
        "{head}: {steps_total} steps, {} succeeded, {} failed, {} skipped",
        counts.succeeded, counts.failed, counts.skipped
    )
}
