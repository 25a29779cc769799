//! The task text a `capsule` step hands its sub-capsule.
//!
//! The child receives the text verbatim as its first user message, and nothing on its side
//! parses an envelope, so the step's `input` must *be* the text: a JSON string, or an object
//! whose only key is `"objective"` holding a string. Every other shape is refused before any
//! step of the plan runs (a `$ref` is a string and stays a string once substituted).

use serde_json::Value;

use super::error::PlanError;

const ACCEPTS: &str = "capsule step input must be a string or { \"objective\": \"<text>\" }";

/// The task text for a capsule step's `input`, or the upstream sentence saying why there is none.
pub fn task_text(input: &Value) -> Result<String, PlanError> {
    task_text_or_why(input).map_err(PlanError::BadTask)
}

fn task_text_or_why(input: &Value) -> Result<String, String> {
    match input {
        Value::String(text) => Ok(text.clone()),
        Value::Object(map) => {
            let mut extra: Vec<&str> = map
                .keys()
                .map(String::as_str)
                .filter(|k| *k != "objective")
                .collect();
            if !extra.is_empty() {
                extra.sort_unstable();
                return Err(format!(
                    "capsule step input has keys the child cannot receive: {}; nothing on the receiving side parses a task envelope, so put the whole instruction in \"objective\"",
                    extra.join(", ")
                ));
            }
            match map.get("objective") {
                Some(Value::String(text)) => Ok(text.clone()),
                Some(_) => Err("capsule step input \"objective\" must be a string".to_string()),
                None => Err(ACCEPTS.to_string()),
            }
        }
        Value::Null => Err("capsule step has no input; its input is the task text the child receives, given as a string or as { \"objective\": \"<text>\" }".to_string()),
        Value::Bool(_) => Err(format!("{ACCEPTS}, not a boolean")),
        Value::Number(_) => Err(format!("{ACCEPTS}, not a number")),
        Value::Array(_) => Err(format!("{ACCEPTS}, not an array")),
    }
}

#[cfg(test)]
mod tests {
    use super::task_text;
    use serde_json::json;

    #[test]
    fn the_two_accepted_shapes_pass_verbatim() {
        assert_eq!(task_text(&json!("do it")).unwrap(), "do it");
        assert_eq!(task_text(&json!({"objective": "do it"})).unwrap(), "do it");
        assert_eq!(
            task_text(&json!({"objective": "$a.output"})).unwrap(),
            "$a.output"
        );
    }

    #[test]
    fn every_other_shape_is_refused_by_name() {
        assert_eq!(
            task_text(&json!({"task": "x", "objective": "y", "format": 1})).unwrap_err().to_string(),
            "capsule step input has keys the child cannot receive: format, task; nothing on the receiving side parses a task envelope, so put the whole instruction in \"objective\""
        );
        assert_eq!(
            task_text(&json!({"objective": 3})).unwrap_err().to_string(),
            "capsule step input \"objective\" must be a string"
        );
        assert_eq!(
            task_text(&json!({})).unwrap_err().to_string(),
            "capsule step input must be a string or { \"objective\": \"<text>\" }"
        );
        assert!(task_text(&json!(null))
            .unwrap_err()
            .to_string()
            .starts_with("capsule step has no input;"));
        assert!(task_text(&json!(true))
            .unwrap_err()
            .to_string()
            .ends_with(", not a boolean"));
        assert!(task_text(&json!(1))
            .unwrap_err()
            .to_string()
            .ends_with(", not a number"));
        assert!(task_text(&json!([]))
            .unwrap_err()
            .to_string()
            .ends_with(", not an array"));
    }
}
