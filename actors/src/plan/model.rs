//! The plan as the model submits it, and the result each step settles with.
//!
//! The shapes are parsed leniently where upstream is lenient (unknown step keys are ignored, so a
//! plan written for a newer runtime still loads) and strictly where a wrong type would otherwise
//! be guessed at (`retries: "2"` is a parse error, not two retries).

use serde::Deserialize;
use serde_json::Value;

use super::error::PlanError;

/// The step id a failure carries when no step of the plan is to blame (the input did not parse).
pub const PLAN_STEP_ID: &str = "plan";

/// The capsule version a `capsule` step asks for when it names none (upstream's fixed fallback).
pub const DEFAULT_CAPSULE_VERSION: &str = "0.1.0";

/// The refusal for a `submit-plan` input that holds no plan object.
pub const NOT_A_PLAN: &str = "'submit-plan' requires a 'plan' argument holding a JSON object with an 'id' and a 'steps' array";

/// One submitted plan: an id the model chose and its steps in the order written.
#[derive(Clone, Debug, Deserialize)]
pub struct PlanDef {
    /// The model's name for the plan (only echoed back, never used as a path).
    pub id: String,
    /// The steps, in declaration order (which is also the tie-break order of a wave).
    pub steps: Vec<StepDef>,
}

/// One step as written. Exactly one of `tool`, `shell`, `capsule` must be set; the validator
/// says which rule a step breaks.
#[derive(Clone, Debug, Deserialize)]
pub struct StepDef {
    /// Unique within the plan; what `depends_on` and `$<id>.output` name.
    pub id: String,
    /// A tool the session holds, called with `input`.
    #[serde(default)]
    pub tool: Option<String>,
    /// A command line: first word is the binary (must be in `capabilities.shell.allow`), the
    /// rest its arguments, split like a shell without expansion.
    #[serde(default)]
    pub shell: Option<String>,
    /// The bare name of a capsule to delegate to and wait for.
    #[serde(default)]
    pub capsule: Option<String>,
    /// Tool input, or a capsule step's task (a string or `{"objective": "..."}`).
    #[serde(default)]
    pub input: Value,
    /// Steps that must have settled (with any status) before this one runs.
    #[serde(default)]
    pub depends_on: Vec<String>,
    /// A condition; when it is false the step is skipped without running.
    #[serde(default, rename = "if")]
    pub condition: Option<String>,
    /// `fail` (stop the plan), `skip` (record it skipped) or `continue` (record it failed).
    #[serde(default = "default_on_error")]
    pub on_error: String,
    /// Extra attempts after a failure: attempts = retries + 1.
    #[serde(default)]
    pub retries: u32,
    /// A `capsule` step's exact version; [`DEFAULT_CAPSULE_VERSION`] when absent. (An addition
    /// of ours: upstream plans have no way to choose the version.)
    #[serde(default)]
    pub version: Option<String>,
}

fn default_on_error() -> String {
    "fail".to_string()
}

/// What a step does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// Calls one of the session's tools (one at a time across the plan).
    Tool,
    /// Runs one allowed binary (concurrently with the rest of its wave).
    Shell,
    /// Delegates to a sub-capsule and waits (concurrently with the rest of its wave).
    Capsule,
}

impl StepKind {
    /// The spelling trace lines use: the plan key the author wrote.
    pub fn as_str(self) -> &'static str {
        match self {
            StepKind::Tool => "tool",
            StepKind::Shell => "shell",
            StepKind::Capsule => "capsule",
        }
    }
}

impl StepDef {
    /// The step's kind, or the refusal of a step declaring none or several.
    pub fn kind(&self) -> Result<StepKind, PlanError> {
        let set = [
            self.tool.is_some(),
            self.shell.is_some(),
            self.capsule.is_some(),
        ];
        match set {
            [true, false, false] => Ok(StepKind::Tool),
            [false, true, false] => Ok(StepKind::Shell),
            [false, false, true] => Ok(StepKind::Capsule),
            [false, false, false] => Err(PlanError::NoKind),
            _ => Err(PlanError::ManyKinds),
        }
    }

    /// The kind's trace spelling; `unknown` for a step the validator refuses for its kind.
    pub fn kind_name(&self) -> &'static str {
        self.kind().map(StepKind::as_str).unwrap_or("unknown")
    }

    /// The capsule version this step asks for.
    pub fn capsule_version(&self) -> &str {
        self.version.as_deref().unwrap_or(DEFAULT_CAPSULE_VERSION)
    }
}

/// How a step settled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepStatus {
    /// It ran and succeeded.
    Success,
    /// It failed (after its retries), or could not be started.
    Failed,
    /// Its condition was false, its failure was `on_error: skip`, or the plan was cancelled
    /// before it ran.
    Skipped,
}

impl StepStatus {
    /// The spelling in results, trace lines and `$<id>.status`.
    pub fn as_str(self) -> &'static str {
        match self {
            StepStatus::Success => "success",
            StepStatus::Failed => "failed",
            StepStatus::Skipped => "skipped",
        }
    }
}

/// One settled step, as the model reads it back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepResult {
    /// The step's id (or [`PLAN_STEP_ID`]).
    pub step_id: String,
    /// How it settled.
    pub status: StepStatus,
    /// What it produced, when it succeeded.
    pub output: Option<String>,
    /// Why it failed, was skipped on error, or was cancelled.
    pub error: Option<String>,
}

impl StepResult {
    /// A failed result carrying `error`.
    pub fn failed(step_id: &str, error: impl Into<String>) -> Self {
        StepResult {
            step_id: step_id.to_string(),
            status: StepStatus::Failed,
            output: None,
            error: Some(error.into()),
        }
    }
}

/// Read the plan out of a `submit-plan` input (`{"plan": {...}}`).
///
/// A plan sent as a JSON *string* holding an object is accepted too (models double-encode);
/// anything else is the upstream refusal [`NOT_A_PLAN`], and an object that does not have the
/// plan's shape is `failed to parse plan JSON: <why>`.
pub fn parse_input(input: &Value) -> Result<PlanDef, PlanError> {
    let plan = match input.get("plan") {
        Some(Value::Object(_)) => input["plan"].clone(),
        Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
            Ok(v @ Value::Object(_)) => v,
            _ => return Err(PlanError::NotAPlan),
        },
        _ => return Err(PlanError::NotAPlan),
    };
    serde_json::from_value(plan).map_err(|e| PlanError::Unparsable(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_fill_the_optional_keys() {
        let plan =
            parse_input(&json!({"plan": {"id": "p", "steps": [{"id": "a", "shell": "ls"}]}}))
                .unwrap();
        let step = &plan.steps[0];
        assert_eq!(step.on_error, "fail");
        assert_eq!(step.retries, 0);
        assert!(step.depends_on.is_empty());
        assert_eq!(step.input, Value::Null);
        assert_eq!(step.capsule_version(), "0.1.0");
        assert_eq!(step.kind(), Ok(StepKind::Shell));
    }

    #[test]
    fn non_plans_are_refused_with_the_upstream_sentence() {
        for input in [
            json!(7),
            json!({}),
            json!({"plan": [1]}),
            json!({"plan": "nope"}),
        ] {
            assert_eq!(
                parse_input(&input).unwrap_err().to_string(),
                NOT_A_PLAN,
                "{input}"
            );
        }
        let encoded = json!({"plan": "{\"id\":\"p\",\"steps\":[]}"});
        assert_eq!(parse_input(&encoded).unwrap().id, "p");
    }

    #[test]
    fn shape_errors_name_the_field() {
        let err = parse_input(&json!({"plan": {"steps": []}}))
            .unwrap_err()
            .to_string();
        assert_eq!(err, "failed to parse plan JSON: missing field `id`");
        let err =
            parse_input(&json!({"plan": {"id": "p", "steps": [{"id": "a", "retries": "2"}]}}))
                .unwrap_err()
                .to_string();
        assert!(
            err.starts_with("failed to parse plan JSON: invalid type: string \"2\""),
            "{err}"
        );
    }
}
