//! `mur list`: the artifacts installed for this project, with version, role, platforms, store,
//! origin and trust.
//!
//! The columns start with the original Murmur's four (`NAME VERSION RUNTIME PLATFORMS`, a
//! dash for a platform-independent payload); `--all` (project and global stores, the
//! original's flag) is what `mur list` shows anyway; `--json` prints the rows as JSON.
//!
//! Rows come from the project store, the global store, and `murmur.lock` pins a runtime pull
//! fetched from a source (those are held in no store). Origin and trust come from the pin: an
//! artifact in a store is the operator's unless the lock pins that version with
//! `origin: runtime`. Runtime-provided tools are never in a store or the lock, so never listed.

use std::path::Path;

use super::config::murmur_home;
use super::install::find_project_root;
use super::lock::{read_lock, Lock, Origin};
use super::store::Store;
use crate::diagnostic::Diagnostic;

/// One row of `mur list`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListRow {
    /// Full name.
    pub name: String,
    /// Version.
    pub version: String,
    /// `tool`, `skill`, `hook`, `driver`, `capsule`.
    pub runtime: String,
    /// Platform tags of the payloads held (`linux-x86_64`); empty for an untagged one.
    pub platforms: Vec<String>,
    /// `project`, `global`, or `-` (pinned, held in no store).
    pub store: String,
    /// `operator` or `runtime`.
    pub origin: String,
    /// `trusted` or `untrusted`.
    pub trust: String,
}

/// The rows for the project at or above `cwd` (global store only with `global` or outside a
/// project).
pub fn list_rows(cwd: &Path, global: bool) -> Result<Vec<ListRow>, Diagnostic> {
    let home = murmur_home()?;
    let project = if global { None } else { find_project_root(cwd) };
    let lock = match &project {
        Some(p) => read_lock(p)?,
        None => Lock::default(),
    };
    let mut stores = Vec::new();
    if let Some(p) = &project {
        stores.push((Store::project(p), "project"));
    }
    stores.push((Store::global(&home), "global"));
    let mut rows = Vec::new();
    for (store, label) in &stores {
        for name in store.names() {
            for v in store.versions(&name) {
                let origin = lock
                    .entry(&name)
                    .filter(|e| e.resolved_version == v.version)
                    .map(|e| e.origin)
                    .unwrap_or(Origin::Operator);
                rows.push(ListRow {
                    name: name.to_string(),
                    runtime: v
                        .meta
                        .as_ref()
                        .map(|m| m.artifact_runtime.clone())
                        .unwrap_or_else(|| "?".into()),
                    platforms: v.payloads.iter().flatten().cloned().collect(),
                    version: v.version,
                    store: label.to_string(),
                    origin: origin.as_str().into(),
                    trust: origin.trust().into(),
                });
            }
        }
    }
    for e in &lock.entries {
        let held = rows
            .iter()
            .any(|r| r.name == e.name.as_str() && r.version == e.resolved_version);
        if !held && e.origin == Origin::Runtime {
            rows.push(ListRow {
                name: e.name.to_string(),
                version: e.resolved_version.clone(),
                runtime: "-".into(),
                platforms: Vec::new(),
                store: "-".into(),
                origin: e.origin.as_str().into(),
                trust: e.origin.trust().into(),
            });
        }
    }
    Ok(rows)
}

/// Formats rows as columns separated by two spaces.
pub fn format_rows(rows: &[ListRow]) -> String {
    if rows.is_empty() {
        return "No artifacts found.\n".into();
    }
    let header = [
        "NAME",
        "VERSION",
        "RUNTIME",
        "PLATFORMS",
        "STORE",
        "ORIGIN",
        "TRUST",
    ];
    let platforms: Vec<String> = rows
        .iter()
        .map(|r| match r.platforms.as_slice() {
            [] => "—".to_string(),
            p => p.join(", "),
        })
        .collect();
    let cells: Vec<[&str; 7]> = rows
        .iter()
        .zip(&platforms)
        .map(|(r, p)| {
            [
                r.name.as_str(),
                &r.version,
                &r.runtime,
                p,
                &r.store,
                &r.origin,
                &r.trust,
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for c in &cells {
        for (w, s) in widths.iter_mut().zip(c) {
            *w = (*w).max(s.chars().count());
        }
    }
    let mut out = String::new();
    for line in std::iter::once(header).chain(cells) {
        let mut s = String::new();
        for (i, cell) in line.iter().enumerate() {
            if i + 1 == line.len() {
                s.push_str(cell);
            } else {
                s.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            }
        }
        out.push_str(s.trim_end());
        out.push('\n');
    }
    out
}

/// The rows as a JSON array of objects, one per row, with the columns as keys.
pub fn rows_json(rows: &[ListRow]) -> serde_json::Value {
    rows.iter()
        .map(|r| {
            serde_json::json!({
                "name": r.name,
                "version": r.version,
                "runtime": r.runtime,
                "platforms": r.platforms,
                "store": r.store,
                "origin": r.origin,
                "trust": r.trust,
            })
        })
        .collect()
}

/// `mur list [-g | --all] [--json]`: returns the exit code.
pub fn run_list(global: bool, json: bool) -> i32 {
    let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
    match list_rows(&cwd, global) {
        Ok(rows) if json => {
            crate::outln!("{}", rows_json(&rows));
            0
        }
        Ok(rows) => {
            crate::out!("{}", format_rows(&rows));
            0
        }
        Err(d) => {
            crate::errln!("{d}");
            1
        }
    }
}
