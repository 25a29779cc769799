//! `$<step>.output` / `$<step>.status` references.
//!
//! A reference is a whole JSON string that starts with `$`, at any depth of a step's `input`
//! (object values and array items, never object keys), or an operand of an `if` condition. It is
//! replaced by the referenced step's output or status string at dispatch time, against the
//! results settled before the step's wave began. The step id is everything between the `$` and
//! the *last* dot, so ids may themselves contain dots.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::error::PlanError;
use super::model::StepResult;

/// The settled results a reference can read, by step id.
pub type Settled = HashMap<String, StepResult>;

/// Split `$<step>.<field>` into its parts; `None` when the text is not of that shape.
pub fn parse(text: &str) -> Option<(&str, &str)> {
    text.strip_prefix('$')?.rsplit_once('.')
}

/// Every `$…` string in `value`, depth first, in document order.
pub fn collect(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) if s.starts_with('$') => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| collect(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect(v, out)),
        _ => {}
    }
}

/// Check a reference against the plan's step ids (validation, before anything runs).
///
/// Text without a dot (`$HOME`) is not checked here; it fails when the step runs, as upstream.
pub fn check(reference: &str, ids: &HashSet<&str>) -> Result<(), PlanError> {
    let Some((step, field)) = parse(reference) else {
        return Ok(());
    };
    if !ids.contains(step) {
        return Err(PlanError::UnknownReference(reference.to_string()));
    }
    if field != "output" && field != "status" {
        return Err(PlanError::UnknownReferenceField(field.to_string()));
    }
    Ok(())
}

/// The value `reference` stands for now, or why it cannot be read.
pub fn resolve(reference: &str, settled: &Settled) -> Result<String, PlanError> {
    let Some((step, field)) = parse(reference) else {
        return Err(PlanError::InvalidReference(reference.to_string()));
    };
    let Some(result) = settled.get(step) else {
        return Err(PlanError::ReferenceNotReady(reference.to_string()));
    };
    match field {
        "output" => result
            .output
            .clone()
            .ok_or_else(|| PlanError::ReferenceNoOutput(reference.to_string())),
        "status" => Ok(result.status.as_str().to_string()),
        other => Err(PlanError::UnsupportedReferenceField(other.to_string())),
    }
}

/// Replace every reference in `value` (any depth) by what it stands for.
pub fn interpolate(value: &mut Value, settled: &Settled) -> Result<(), PlanError> {
    match value {
        Value::String(s) if s.starts_with('$') => *s = resolve(s, settled)?,
        Value::Array(items) => {
            for v in items {
                interpolate(v, settled)?;
            }
        }
        Value::Object(map) => {
            for v in map.values_mut() {
                interpolate(v, settled)?;
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::model::StepStatus;
    use super::*;
    use serde_json::json;

    fn settled() -> Settled {
        let mut s = Settled::new();
        s.insert(
            "a".into(),
            StepResult {
                step_id: "a".into(),
                status: StepStatus::Success,
                output: Some("hello".into()),
                error: None,
            },
        );
        s.insert("b.c".into(), StepResult::failed("b.c", "boom"));
        s
    }

    #[test]
    fn references_are_replaced_at_any_depth_but_keys_are_not() {
        let mut v =
            json!({"x": "$a.output", "$a.output": [1, {"y": ["$b.c.status", "plain $a.output"]}]});
        interpolate(&mut v, &settled()).unwrap();
        assert_eq!(
            v,
            json!({"x": "hello", "$a.output": [1, {"y": ["failed", "plain $a.output"]}]})
        );
    }

    #[test]
    fn runtime_errors_name_the_reference() {
        let s = settled();
        assert_eq!(
            resolve("$z.output", &s).unwrap_err().to_string(),
            "reference '$z.output' is not ready"
        );
        assert_eq!(
            resolve("$b.c.output", &s).unwrap_err().to_string(),
            "reference '$b.c.output' has no output"
        );
        assert_eq!(
            resolve("$HOME", &s).unwrap_err().to_string(),
            "invalid reference '$HOME'"
        );
        assert_eq!(
            resolve("$a.size", &s).unwrap_err().to_string(),
            "unsupported reference field 'size'"
        );
    }

    #[test]
    fn validation_names_unknown_steps_and_fields() {
        let ids: HashSet<&str> = ["a"].into_iter().collect();
        assert_eq!(check("$a.output", &ids), Ok(()));
        assert_eq!(check("$HOME", &ids), Ok(()));
        let unknown = check("$q.output", &ids).unwrap_err();
        assert_eq!(unknown, PlanError::UnknownReference("$q.output".into()));
        assert_eq!(unknown.code(), "unknown_reference");
        assert_eq!(unknown.to_string(), "unknown reference '$q.output'");
        assert_eq!(
            check("$a.stdout", &ids).unwrap_err().to_string(),
            "unknown reference field 'stdout'"
        );
    }
}
