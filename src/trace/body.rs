//! `mur trace show --body system|tools|response|<sha256> [--turn N]`: the bodies a trace
//! recorded under `trace.capture: content`, printed as they were sent or received.
//!
//! The system prompt and the tool array are `body` lines, each written once, named by the
//! `system_sha` / `tools_sha` of the `inference` lines that used them; a reply is the
//! `response` field of its `inference` line (the bytes `response_sha` hashes).

use std::path::Path;

use crate::diagnostic::Diagnostic;
use crate::replay::recording;
use mur_actors::trace::EventType;

/// The body `selector` names (`system`, `tools`, `response` with `turn`, or a sha256 or an
/// 8+ hex prefix of one) in the trace at `path`.
pub fn body(path: &Path, selector: &str, turn: Option<u32>) -> Result<String, Diagnostic> {
    let rec = recording::read(path)?;
    let missing = |what: String| {
        Diagnostic::error("E-TRC-001", format!("{}: {what}", path.display()))
            .with_hint("bodies are recorded under trace: {capture: content} in murmur.yaml")
    };
    match selector {
        "system" | "tools" | "response" => {
            let Some(n) = turn else {
                return Err(Diagnostic::error(
                    "E-TRC-001",
                    format!("--body {selector} needs --turn N (the 0-based model call)"),
                ));
            };
            let Some(t) = rec.counted().find(|t| t.turn == n) else {
                return Err(missing(format!(
                    "turn {n} is not in this trace (it has {} counted turn(s))",
                    rec.counted().count()
                )));
            };
            let sha = match selector {
                "system" => t.system_sha.as_deref(),
                "tools" => t.tools_sha.as_deref(),
                _ => None,
            };
            if selector == "response" {
                return response_text(path, n)
                    .ok_or_else(|| missing(format!("turn {n} has no recorded response")));
            }
            sha.and_then(|s| rec.bodies.get(s).cloned()).ok_or_else(|| {
                missing(format!("the {selector} body of turn {n} is not recorded"))
            })
        }
        sha if sha.len() >= 8 && sha.chars().all(|c| c.is_ascii_hexdigit()) => {
            let hits: Vec<&String> = rec.bodies.keys().filter(|k| k.starts_with(sha)).collect();
            match hits.as_slice() {
                [one] => Ok(rec.bodies[*one].clone()),
                [] => Err(missing(format!("no recorded body has sha256 {sha}…"))),
                many => Err(Diagnostic::error(
                    "E-TRC-001",
                    format!("ambiguous: '{sha}' starts {} bodies — give more characters", many.len()),
                )),
            }
        }
        other => Err(Diagnostic::error(
            "E-TRC-001",
            format!("--body '{other}': expected system, tools, response or a sha256 (8+ hex characters)"),
        )),
    }
}

/// The `response` field of the counted `inference` line of `turn`.
fn response_text(path: &Path, turn: u32) -> Option<String> {
    let bytes = crate::files::read_capped(path, recording::TRACE_CAP).ok()?;
    bytes.split(|b| *b == b'\n').find_map(|line| {
        let v: serde_json::Value = serde_json::from_slice(line).ok()?;
        (v["event_type"] == EventType::Inference.as_str()
            && v["turn"] == turn
            && v["decision"] != "error")
            .then(|| v["response"].as_str().map(str::to_string))
            .flatten()
    })
}
