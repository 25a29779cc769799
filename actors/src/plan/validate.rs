//! Every rule a plan must pass before any of its steps runs.
//!
//! A plan is refused whole, never half-run: the first broken rule becomes the plan's single
//! failed step result, named after the step that broke it. Rules are checked in upstream's
//! order (per step: id, kind and target, `on_error`; then per step: dependencies and references),
//! then two rules of ours: a dependency cycle is refused here, with upstream's sentence, instead of
//! being discovered after the steps outside the cycle have already run; and a step may ask for at
//! most [`MAX_STEP_RETRIES`] retries (upstream takes any `u32`, so one failing step asking for four
//! billion ran until the session's deadline: found by the plan fuzzer).

use std::collections::{HashMap, HashSet};

use crate::tool::RuntimeTool;

use super::condition;
use super::error::PlanError;
use super::model::{PlanDef, StepDef, StepKind};
use super::refs;
use super::task;
use super::words;
use super::PlanContext;

/// The sentence for a plan whose steps can never all become ready.
pub const BLOCKED: &str = "plan is blocked by a dependency cycle or missing dependency";

/// The most retries one step may ask for (the HTTP drivers' `max_retries` bound, too).
pub const MAX_STEP_RETRIES: u32 = 20;

/// Upstream's session-changing tools this runtime does not offer: refused in a plan by name
/// all the same, as upstream refuses them. The runtime tools say so themselves
/// ([`RuntimeTool::plan_may_call`]).
const UPSTREAM_NOT_IN_PLAN: [&str; 2] = ["switch-driver", "end-without-answer"];

/// A refused plan: the step to blame and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The step id (the failed step of the report).
    pub step_id: String,
    /// The broken rule.
    pub error: PlanError,
}

fn refuse(step: &StepDef, error: PlanError) -> Refusal {
    Refusal {
        step_id: step.id.clone(),
        error,
    }
}

/// Check `plan` against the session described by `ctx`.
pub fn validate(plan: &PlanDef, ctx: &PlanContext) -> Result<(), Refusal> {
    let mut ids: HashSet<&str> = HashSet::new();
    for step in &plan.steps {
        if !ids.insert(step.id.as_str()) {
            return Err(refuse(step, PlanError::DuplicateStep(step.id.clone())));
        }
        check_target(step, ctx).map_err(|e| refuse(step, e))?;
        if !matches!(step.on_error.as_str(), "fail" | "skip" | "continue") {
            return Err(refuse(step, PlanError::BadOnError(step.on_error.clone())));
        }
        if step.retries > MAX_STEP_RETRIES {
            return Err(refuse(step, PlanError::TooManyRetries(step.retries)));
        }
    }
    for step in &plan.steps {
        if let Some(dep) = step.depends_on.iter().find(|d| !ids.contains(d.as_str())) {
            return Err(refuse(step, PlanError::UnknownDependency(dep.clone())));
        }
        let mut found = Vec::new();
        refs::collect(&step.input, &mut found);
        if let Some(cond) = &step.condition {
            found.extend(condition::references(cond));
        }
        for reference in &found {
            refs::check(reference, &ids).map_err(|e| refuse(step, e))?;
        }
    }
    if let Some(step) = first_blocked(plan) {
        return Err(refuse(step, PlanError::Blocked));
    }
    Ok(())
}

/// The kind rule and the rule for what the step names (tool held, binary allowed, capsule
/// allowed and its task text well shaped).
fn check_target(step: &StepDef, ctx: &PlanContext) -> Result<(), PlanError> {
    match step.kind()? {
        StepKind::Tool => {
            let tool = step.tool.as_deref().unwrap_or_default();
            let runtime = RuntimeTool::parse(tool);
            if runtime == Some(RuntimeTool::SubmitPlan) {
                return Err(PlanError::NestedPlan);
            }
            if UPSTREAM_NOT_IN_PLAN.contains(&tool) || runtime.is_some_and(|t| !t.plan_may_call()) {
                return Err(PlanError::NotCallable(tool.to_string()));
            }
            if !ctx.tools.iter().any(|t| t == tool) {
                return Err(PlanError::NotInstalled(tool.to_string()));
            }
        }
        StepKind::Shell => {
            let argv = words::split(step.shell.as_deref().unwrap_or_default());
            let Some(binary) = argv.first() else {
                return Err(PlanError::EmptyShell);
            };
            if !ctx.shell_allow.iter().any(|b| b == binary) {
                return Err(PlanError::BinaryNotAllowed(binary.to_string()));
            }
        }
        StepKind::Capsule => {
            let capsule = step.capsule.as_deref().unwrap_or_default();
            if !ctx.capsules.iter().any(|c| c == capsule) {
                return Err(PlanError::CapsuleNotAllowed(capsule.to_string()));
            }
            task::task_text(&step.input)?;
        }
    }
    Ok(())
}

/// The first step (in declaration order) that can never become ready because it sits on, or
/// behind, a dependency cycle. Assumes every dependency names a step of the plan.
fn first_blocked(plan: &PlanDef) -> Option<&StepDef> {
    let mut waiting: HashMap<&str, usize> = plan
        .steps
        .iter()
        .map(|s| (s.id.as_str(), distinct(&s.depends_on)))
        .collect();
    let mut ready: Vec<&str> = waiting
        .iter()
        .filter(|(_, n)| **n == 0)
        .map(|(id, _)| *id)
        .collect();
    let mut done: HashSet<&str> = HashSet::new();
    while let Some(id) = ready.pop() {
        if !done.insert(id) {
            continue;
        }
        for step in &plan.steps {
            if step.depends_on.iter().any(|d| d == id) {
                let n = waiting.entry(step.id.as_str()).or_default();
                *n = n.saturating_sub(1);
                if *n == 0 {
                    ready.push(step.id.as_str());
                }
            }
        }
    }
    plan.steps.iter().find(|s| !done.contains(s.id.as_str()))
}

fn distinct(deps: &[String]) -> usize {
    deps.iter().collect::<HashSet<_>>().len()
}
