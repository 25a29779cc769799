//! Why a plan, or one of its steps, cannot go on: one enum, with a code per rule.
//!
//! The text of each variant is the sentence upstream writes (the model and `plan_end.reason`
//! read it as it always was); the code names the rule, so the kernel and its tests tell the
//! refusals apart without comparing sentences.

use std::fmt;

use super::model::NOT_A_PLAN;
use super::validate::{BLOCKED, MAX_STEP_RETRIES};

/// What is wrong with a plan, a step, or a reference in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanError {
    /// `submit-plan` without a `plan` object.
    NotAPlan,
    /// The `plan` object does not have the plan's shape.
    Unparsable(String),
    /// Two steps share an id.
    DuplicateStep(String),
    /// A step declares none of `tool`, `shell`, `capsule`.
    NoKind,
    /// A step declares more than one of them.
    ManyKinds,
    /// `on_error` is not `fail`, `skip` or `continue`.
    BadOnError(String),
    /// A step asks for more than [`MAX_STEP_RETRIES`] retries.
    TooManyRetries(u32),
    /// `depends_on` names no step of the plan.
    UnknownDependency(String),
    /// A dependency cycle (or a missing dependency) blocks a step for ever.
    Blocked,
    /// A step calls `submit-plan`.
    NestedPlan,
    /// A step calls a tool a plan may not call.
    NotCallable(String),
    /// A step calls a tool the session does not hold.
    NotInstalled(String),
    /// A shell step with no command.
    EmptyShell,
    /// A shell step's binary is not granted.
    BinaryNotAllowed(String),
    /// A capsule step's capsule is not granted.
    CapsuleNotAllowed(String),
    /// A capsule step's input is not a task text.
    BadTask(String),
    /// `$<step>.<field>` names no step of the plan.
    UnknownReference(String),
    /// `$<step>.<field>` with a field other than `output` or `status`.
    UnknownReferenceField(String),
    /// A reference read with a field other than `output` or `status` (when it runs).
    UnsupportedReferenceField(String),
    /// A `$…` string that is not a reference.
    InvalidReference(String),
    /// A reference to a step not settled yet.
    ReferenceNotReady(String),
    /// A reference to the output of a step that has none.
    ReferenceNoOutput(String),
    /// A condition clause that is not `<operand> <op> <operand>`.
    UnsupportedCondition(String),
    /// A condition operand that is neither quoted nor a reference.
    UnsupportedOperand(String),
}

impl PlanError {
    /// The rule's code.
    pub fn code(&self) -> &'static str {
        match self {
            PlanError::NotAPlan => "not_a_plan",
            PlanError::Unparsable(_) => "unparsable",
            PlanError::DuplicateStep(_) => "duplicate_step",
            PlanError::NoKind => "no_kind",
            PlanError::ManyKinds => "many_kinds",
            PlanError::BadOnError(_) => "bad_on_error",
            PlanError::TooManyRetries(_) => "too_many_retries",
            PlanError::UnknownDependency(_) => "unknown_dependency",
            PlanError::Blocked => "blocked",
            PlanError::NestedPlan => "nested_plan",
            PlanError::NotCallable(_) => "not_callable",
            PlanError::NotInstalled(_) => "not_installed",
            PlanError::EmptyShell => "empty_shell",
            PlanError::BinaryNotAllowed(_) => "binary_not_allowed",
            PlanError::CapsuleNotAllowed(_) => "capsule_not_allowed",
            PlanError::BadTask(_) => "bad_task",
            PlanError::UnknownReference(_) => "unknown_reference",
            PlanError::UnknownReferenceField(_) => "unknown_reference_field",
            PlanError::UnsupportedReferenceField(_) => "unsupported_reference_field",
            PlanError::InvalidReference(_) => "invalid_reference",
            PlanError::ReferenceNotReady(_) => "reference_not_ready",
            PlanError::ReferenceNoOutput(_) => "reference_no_output",
            PlanError::UnsupportedCondition(_) => "unsupported_condition",
            PlanError::UnsupportedOperand(_) => "unsupported_operand",
        }
    }
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanError::NotAPlan => f.write_str(NOT_A_PLAN),
            PlanError::Unparsable(why) => write!(f, "failed to parse plan JSON: {why}"),
            PlanError::DuplicateStep(id) => write!(f, "duplicate step id '{id}'"),
            PlanError::NoKind => f.write_str("step must declare exactly one of tool, shell, or capsule"),
            PlanError::ManyKinds => f.write_str("step declares more than one of tool, shell, or capsule"),
            PlanError::BadOnError(policy) => write!(f, "invalid on_error policy '{policy}'"),
            PlanError::TooManyRetries(n) => write!(
                f,
                "retries {n} is more than {MAX_STEP_RETRIES}, the most a step may ask for"
            ),
            PlanError::UnknownDependency(dep) => write!(f, "unknown dependency '{dep}'"),
            PlanError::Blocked => f.write_str(BLOCKED),
            PlanError::NestedPlan => f.write_str(
                "a plan step cannot submit another plan: 'submit-plan' is not callable from inside a plan",
            ),
            PlanError::NotCallable(tool) => write!(f, "'{tool}' is not callable from inside a plan"),
            PlanError::NotInstalled(tool) => write!(f, "tool '{tool}' is not installed"),
            PlanError::EmptyShell => f.write_str("shell command is empty"),
            PlanError::BinaryNotAllowed(b) => {
                write!(f, "binary '{b}' is not in capabilities.shell.allow")
            }
            PlanError::CapsuleNotAllowed(c) => {
                write!(f, "capsule '{c}' is not in capabilities.spawn.allow")
            }
            PlanError::BadTask(why) => f.write_str(why),
            PlanError::UnknownReference(r) => write!(f, "unknown reference '{r}'"),
            PlanError::UnknownReferenceField(field) => {
                write!(f, "unknown reference field '{field}'")
            }
            PlanError::UnsupportedReferenceField(field) => {
                write!(f, "unsupported reference field '{field}'")
            }
            PlanError::InvalidReference(r) => write!(f, "invalid reference '{r}'"),
            PlanError::ReferenceNotReady(r) => write!(f, "reference '{r}' is not ready"),
            PlanError::ReferenceNoOutput(r) => write!(f, "reference '{r}' has no output"),
            PlanError::UnsupportedCondition(c) => {
                write!(f, "unsupported condition expression '{c}'")
            }
            PlanError::UnsupportedOperand(t) => write!(f, "unsupported condition operand '{t}'"),
        }
    }
}

impl std::error::Error for PlanError {}
