//! Session addresses: which `trace.jsonl` a `mur trace` argument names.
//!
//! Seed 001 lists the spellings: nothing (the newest session), `@N` counting back from the
//! newest, the last 4 or more characters of an id, the full id, or a path to a `trace.jsonl`.
//! Sessions are found from a work folder in every layout `mur` has written: records in
//! `<workdir>/.murmur/ses_<id>/` (the default, `<manifest dir>/workdir`, since records moved out
//! of the work folders), in `~/.murmur/records/<workdir>/ses_<id>/` (a run given `--workdir`),
//! and the older layout where a session's folder `<workdir>/ses_<id>/` held its trace. Ids are UUIDv7, so sorting names sorts sessions by start time. A full id or a
//! suffix that names no top-level session is also looked up among delegated children
//! (`children/ses_<id>/`), so an id printed in a delegation tree can be opened directly.

use std::path::{Path, PathBuf};

use crate::diagnostic::Diagnostic;

/// File name of a session's trace inside its records folder.
pub const TRACE_FILE: &str = "trace.jsonl";

/// Shortest id suffix accepted as an address.
pub const MIN_SUFFIX: usize = 4;

/// How deep [`resolve`] looks through `children/` folders for an id.
const MAX_CHILD_DEPTH: usize = 16;

/// One session folder found in a work folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionDir {
    /// `ses_…` id (the folder name).
    pub id: String,
    /// The session's records folder (holds `trace.jsonl`).
    pub dir: PathBuf,
}

impl SessionDir {
    /// Path of the session's `trace.jsonl`.
    pub fn trace(&self) -> PathBuf {
        self.dir.join(TRACE_FILE)
    }
}

/// Resolve a session address to the `trace.jsonl` it names.
///
/// `address` is `None` (newest), `@N`, an id suffix of 4+ characters, a full `ses_` id, or a path
/// (anything with a `/` or ending in `.jsonl`; a session folder also works). `workdir` is where
/// session folders live (`./workdir` unless the user said otherwise). Errors are `E-TRC-002`
/// (no such session, ambiguous, bad ordinal) or `E-IO-001` (a named file that does not exist).
pub fn resolve(address: Option<&str>, workdir: &Path) -> Result<PathBuf, Diagnostic> {
    let address = address.map(str::trim).unwrap_or("@1");
    if !address.starts_with('@') && (address.contains('/') || address.ends_with(".jsonl")) {
        return literal_path(Path::new(address));
    }
    if let Some(n) = address.strip_prefix('@') {
        let n: usize = n.parse().map_err(|_| {
            Diagnostic::error(
                "E-TRC-002",
                format!("invalid ordinal '{address}' — expected @1, @2, ..."),
            )
        })?;
        if n == 0 {
            return Err(Diagnostic::error(
                "E-TRC-002",
                "ordinal must be @1 or higher",
            ));
        }
        let all = sessions(workdir)?;
        return match all.get(n - 1) {
            Some(s) => existing_trace(s),
            None => Err(Diagnostic::error(
                "E-TRC-002",
                format!(
                    "@{n} is out of range — workdir has {} session{}",
                    all.len(),
                    plural(all.len())
                ),
            )
            .with_hint(candidate_hint(workdir, &all))),
        };
    }
    let full = address.starts_with("ses_") && address.len() == 36;
    if !full && address.chars().count() < MIN_SUFFIX {
        return Err(Diagnostic::error(
            "E-TRC-002",
            format!("session address '{address}' is too short"),
        )
        .with_hint(format!(
            "give the last {MIN_SUFFIX} or more characters of a session id, @N, the full id, or a path to a trace.jsonl"
        )));
    }
    let top = sessions(workdir)?;
    let wanted = address.to_ascii_lowercase();
    let matches = |s: &SessionDir| {
        if full {
            s.id == address
        } else {
            s.id.to_ascii_lowercase().ends_with(&wanted)
        }
    };
    let mut found: Vec<SessionDir> = top.iter().filter(|s| matches(s)).cloned().collect();
    if found.is_empty() {
        let mut children = Vec::new();
        for s in &top {
            descendants(&s.dir, 0, &mut children);
        }
        found = children.into_iter().filter(|s| matches(s)).collect();
    }
    match found.len() {
        1 => existing_trace(&found[0]),
        0 if full => Err(Diagnostic::error(
            "E-TRC-002",
            format!("session {address} not found in {}", workdir.display()),
        )
        .with_hint(candidate_hint(workdir, &top))),
        0 => Err(Diagnostic::error(
            "E-TRC-002",
            format!(
                "no session found matching suffix '{address}' in {}",
                workdir.display()
            ),
        )
        .with_hint(candidate_hint(workdir, &top))),
        n => {
            found.sort_by(|a, b| a.id.cmp(&b.id));
            let mut msg =
                format!("ambiguous: '{address}' matches {n} sessions — provide more characters");
            for s in &found {
                msg.push_str("\n  ");
                msg.push_str(&s.id);
            }
            Err(Diagnostic::error("E-TRC-002", msg)
                .with_hint("give more characters of the id, or the full id"))
        }
    }
}

/// The session folders of a work folder, newest first, from every layout
/// (`<workdir>/.murmur/ses_*`, `~/.murmur/records/<workdir>/ses_*`, and `<workdir>/ses_*` when
/// it holds a trace: a work folder of the current layout holds none).
///
/// A work folder that does not exist or holds no session is `E-TRC-002`.
pub fn sessions(workdir: &Path) -> Result<Vec<SessionDir>, Diagnostic> {
    let murmur = workdir.join(".murmur");
    // Records of `~/.murmur/records/<workdir>/` (this mur's `--workdir` runs, and every run of
    // the original Murmur 0.8, which mirrors the canonical path) outlive the work folder.
    let absolute = std::path::absolute(workdir).unwrap_or_else(|_| workdir.to_path_buf());
    let mut roots: Vec<PathBuf> = crate::capsule::records_root_for(&absolute)
        .into_iter()
        .collect();
    if let Ok(canonical) = std::fs::canonicalize(&absolute) {
        if canonical != absolute {
            roots.extend(crate::capsule::records_root_for(&canonical));
        }
    }
    if !workdir.is_dir() && !roots.iter().any(|r| r.is_dir()) {
        return Err(Diagnostic::error(
            "E-TRC-002",
            format!("no sessions found: workdir {} does not exist", workdir.display()),
        )
        .with_hint(
            "run a capsule first, or pass --workdir <dir> naming the folder that holds your session folders",
        ));
    }
    let mut out = Vec::new();
    scan(&murmur, &mut out);
    for root in &roots {
        scan(root, &mut out);
    }
    let mut old = Vec::new();
    scan(workdir, &mut old);
    // A work folder (current layout) has no trace beside it; its records were found above.
    out.extend(old.into_iter().filter(|s| s.trace().is_file()));
    out.sort_by(|a, b| b.id.cmp(&a.id));
    out.dedup_by(|a, b| a.id == b.id);
    if out.is_empty() {
        return Err(Diagnostic::error(
            "E-TRC-002",
            format!("no sessions found in workdir at {}", workdir.display()),
        )
        .with_hint(
            "run a capsule first, or pass --workdir <dir> naming the folder that holds your session folders",
        ));
    }
    Ok(out)
}

/// The `n` newest sessions' trace paths (fewer if the work folder holds fewer). A path may
/// not exist yet (a session that failed before writing its trace): callers reading several
/// sessions decide whether to skip it.
pub fn newest(workdir: &Path, n: usize) -> Result<Vec<PathBuf>, Diagnostic> {
    Ok(sessions(workdir)?
        .iter()
        .take(n)
        .map(SessionDir::trace)
        .collect())
}

fn scan(dir: &Path, out: &mut Vec<SessionDir>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with("ses_") && entry.path().is_dir() {
            out.push(SessionDir {
                id: name.to_string(),
                dir: entry.path(),
            });
        }
    }
}

fn descendants(dir: &Path, depth: usize, out: &mut Vec<SessionDir>) {
    if depth >= MAX_CHILD_DEPTH {
        return;
    }
    let mut kids = Vec::new();
    scan(&dir.join("children"), &mut kids);
    for kid in kids {
        descendants(&kid.dir, depth + 1, out);
        out.push(kid);
    }
}

fn literal_path(path: &Path) -> Result<PathBuf, Diagnostic> {
    let file = if path.is_dir() {
        path.join(TRACE_FILE)
    } else {
        path.to_path_buf()
    };
    if file.is_file() {
        Ok(file)
    } else {
        Err(Diagnostic::error(
            "E-IO-001",
            format!("trace file not found: {}", file.display()),
        )
        .with_hint("a path address must name a trace.jsonl (or the session folder holding it)"))
    }
}

fn existing_trace(s: &SessionDir) -> Result<PathBuf, Diagnostic> {
    let file = s.trace();
    if file.is_file() {
        Ok(file)
    } else {
        Err(Diagnostic::error(
            "E-IO-001",
            format!("trace file not found: {}", file.display()),
        )
        .with_hint(format!(
            "session {} has no trace; it may have failed before writing one",
            s.id
        )))
    }
}

fn candidate_hint(workdir: &Path, all: &[SessionDir]) -> String {
    const SHOWN: usize = 10;
    if all.is_empty() {
        return format!("no sessions in {}", workdir.display());
    }
    let mut hint = format!("sessions in {}, newest first:", workdir.display());
    for (i, s) in all.iter().take(SHOWN).enumerate() {
        hint.push_str(&format!("\n    @{:<3} {}", i + 1, s.id));
    }
    if all.len() > SHOWN {
        hint.push_str(&format!("\n    … and {} more", all.len() - SHOWN));
    }
    hint
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
