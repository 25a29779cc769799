//! `tool-edit`: a native tool for mur. Reads `{"data": "<input as a JSON string>", "log_path": …}`
//! on stdin (the envelope both runtimes send; a `data` that is already an object is read too)
//! and answers `{"status", "summary", "data"}` on stdout. The input is
//! `{"path", "edits": [{"old", "new"}]}`.
//!
//! Edits apply in order, each to the result of the one before; each `old` must match exactly
//! once. All or nothing: if one fails, the file is unchanged and the error names its position,
//! from 1. `path` is relative to the work folder; an absolute path (or one leaving it) is refused.

use std::io::Read;
use std::path::{Component, Path};

use serde_json::{json, Value};

fn fail(summary: String) -> Value {
    json!({"status": "failed", "summary": summary, "data": null})
}

/// The tool input inside the envelope: `data` holds it as a JSON string (or, from older
/// runtimes, as the object itself).
fn input_of(envelope: &Value) -> Result<Value, String> {
    match &envelope["data"] {
        Value::String(s) => serde_json::from_str(s).map_err(|e| format!("data is not JSON: {e}")),
        Value::Null => Err("stdin has no 'data'".into()),
        v => Ok(v.clone()),
    }
}

fn run(envelope: &Value) -> Value {
    let data = match input_of(envelope) {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    let data = &data;
    let Some(path) = data["path"].as_str() else {
        return fail("input needs a 'path' string".into());
    };
    let rel = Path::new(path);
    if rel.is_absolute() || rel.components().any(|c| matches!(c, Component::ParentDir)) {
        return fail(format!("'{path}' is refused: the path must stay inside the work folder"));
    }
    let Some(edits) = data["edits"].as_array() else {
        return fail("input needs an 'edits' list of {old, new}".into());
    };
    let mut text = match std::fs::read_to_string(rel) {
        Ok(t) => t,
        Err(e) => return fail(format!("cannot read '{path}': {e}")),
    };
    for (i, edit) in edits.iter().enumerate() {
        let (Some(old), Some(new)) = (edit["old"].as_str(), edit["new"].as_str()) else {
            return fail(format!("edit {}: needs 'old' and 'new' strings; the file is unchanged", i + 1));
        };
        match text.matches(old).count() {
            1 => text = text.replacen(old, new, 1),
            0 => return fail(format!("edit {}: 'old' does not occur in '{path}'; the file is unchanged", i + 1)),
            n => return fail(format!("edit {}: 'old' occurs {n} times in '{path}'; it must match exactly once; the file is unchanged", i + 1)),
        }
    }
    if let Err(e) = std::fs::write(rel, &text) {
        return fail(format!("cannot write '{path}': {e}"));
    }
    let summary = format!("Applied {} edit{} to {path}", edits.len(), if edits.len() == 1 { "" } else { "s" });
    json!({"status": "passed", "summary": summary, "data": summary})
}

fn main() {
    let mut raw = String::new();
    let answer = match std::io::stdin().read_to_string(&mut raw) {
        Ok(_) => match serde_json::from_str::<Value>(&raw) {
            Ok(input) => run(&input),
            Err(e) => fail(format!("stdin is not JSON: {e}")),
        },
        Err(e) => fail(format!("cannot read stdin: {e}")),
    };
    println!("{answer}");
}
