//! Recordings `mur replay` and `mur resume` refuse, each with a sentence saying what is missing
//! or what changed, and what to do.

use mur_actors::spec::SessionSpec;
use serde_json::Value;

use crate::diagnostic::Diagnostic;
use crate::manifest::LoadedManifest;

use super::recording::Recording;

/// A recording without content capture holds hashes, not replies: refused.
pub fn needs_content(rec: &Recording, command: &str) -> Result<(), Diagnostic> {
    let replies_missing = rec
        .turns
        .iter()
        .any(|t| t.reply.as_ref().is_some_and(|_| !rec.has_content));
    if replies_missing || (!rec.has_content && !rec.turns.is_empty()) {
        return Err(Diagnostic::error(
            "E-RPL-001",
            format!(
                "{}: session {} was recorded without trace.capture: content, so its trace holds no model replies and no tool results to {command} from",
                rec.path.display(),
                rec.session_id
            ),
        )
        .with_hint("set trace: {capture: content} in murmur.yaml and run the capsule again"));
    }
    Ok(())
}

/// The manifest must be the recorded capsule's.
pub fn same_capsule(rec: &Recording, loaded: &LoadedManifest) -> Result<(), Diagnostic> {
    let m = &loaded.manifest;
    if m.name != rec.capsule_name || m.version != rec.capsule_version {
        return Err(Diagnostic::error(
            "E-RPL-002",
            format!(
                "{} is capsule {} v{}, and session {} ran {} v{}",
                loaded.path.display(),
                m.name,
                m.version,
                rec.session_id,
                rec.capsule_name,
                rec.capsule_version
            ),
        )
        .with_hint("pass --manifest with the manifest the session ran"));
    }
    Ok(())
}

fn strings(v: Option<&Value>) -> Vec<String> {
    let mut out: Vec<String> = v
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// What differs, in ways that matter, between the recorded session and `spec` (grants, driver,
/// tools), one sentence each; empty when nothing does.
pub fn changes(rec: &Recording, spec: &SessionSpec) -> Vec<String> {
    let mut out = Vec::new();
    let grants = rec.start.get("effective_grants");
    let g = &spec.grants;
    let lists: [(&str, &Vec<String>); 4] = [
        ("shell_allow", &g.shell_allow),
        ("spawn_allow", &g.spawn_allow),
        ("peer_fetch_allow", &g.peer_fetch_allow),
        ("network_allow", &g.network_allow),
    ];
    for (key, now) in lists {
        let was = strings(grants.and_then(|o| o.get(key)));
        let mut now = now.clone();
        now.sort();
        if was != now {
            out.push(format!(
                "grants: {key} was [{}] and is now [{}]",
                was.join(", "),
                now.join(", ")
            ));
        }
    }
    let was_plan = grants
        .and_then(|o| o.get("plan_submit"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if was_plan != g.plan_submit {
        out.push(format!(
            "grants: plan_submit was {was_plan} and is now {}",
            g.plan_submit
        ));
    }
    if let Some(was) = rec.start.get("driver").and_then(Value::as_str) {
        if was != spec.driver.name() {
            out.push(format!(
                "driver: was {was} and is now {}",
                spec.driver.name()
            ));
        }
    }
    let was = strings(rec.start.get("tools_declared"));
    let mut now: Vec<String> = spec.tools.iter().map(|t| t.name.clone()).collect();
    now.sort();
    if was != now {
        let added: Vec<&str> = now
            .iter()
            .filter(|t| !was.contains(t))
            .map(String::as_str)
            .collect();
        let removed: Vec<&str> = was
            .iter()
            .filter(|t| !now.contains(t))
            .map(String::as_str)
            .collect();
        out.push(
            "tools: added [".to_string()
                + &added.join(", ")
                + "], removed ["
                + &removed.join(", ")
                + "]",
        );
    }
    out
}
