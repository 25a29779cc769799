//! `mur doctor`: validate a manifest without running it.
//!
//! Prints every diagnostic on stderr in the shared `error[CODE]:` / `warning[CODE]:` form and a
//! one-line verdict on stdout, so a script can rely on the exit code (0 ok or warnings only,
//! 1 errors) and a person can read what to fix.

use std::path::Path;

use crate::contain::decide::Decision;
use crate::diagnostic::Diagnostic;

use super::{load, LoadedManifest, MANIFEST_FILE};

/// What `mur doctor` found in a manifest that loads.
pub struct Checked {
    /// The manifest's file name, as messages name it.
    pub label: String,
    /// The manifest, its folder and its load warnings.
    pub loaded: LoadedManifest,
    /// What `mur run` would decide about containment, with its warnings.
    pub decision: Decision,
}

/// Why a manifest does not pass: its file name and every diagnostic (errors first).
pub struct Failed {
    /// The manifest's file name, as messages name it.
    pub label: String,
    /// The errors, then any warnings.
    pub diagnostics: Vec<Diagnostic>,
}

/// Checks the manifest at `path` (a directory means its `murmur.yaml`) as `mur run` would,
/// printing nothing: the YAML and every field, the files it names, and the containment decision.
pub fn check(path: &Path) -> Result<Checked, Failed> {
    let path = if path.is_dir() {
        path.join(MANIFEST_FILE)
    } else {
        path.to_path_buf()
    };
    let label = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| MANIFEST_FILE.to_string());
    let loaded = match load(&path) {
        Ok(loaded) => loaded,
        Err(diagnostics) => return Err(Failed { label, diagnostics }),
    };
    // What `mur run` decides about containment, for a session in the default layout.
    let base = loaded.dir.join("workdir");
    let decision = crate::contain::decide::decide(
        &loaded.manifest,
        Path::new(&label),
        &base.join("ses_doctor"),
        &base.join(".murmur").join("ses_doctor"),
        None,
    );
    // The files the manifest names, read as `mur run` reads them. A missing file is
    // `mur run`'s to refuse (upstream's doctor accepts it); one that exists but is no regular
    // file, or too large, is reported here.
    let named = loaded
        .manifest
        .inference
        .as_ref()
        .and_then(|i| i.system_prompt_file.clone())
        .map(|rel| ("inference.system_prompt_file", loaded.resolve(&rel)));
    let unreadable = named.and_then(|(field, file)| {
        crate::files::read_capped(&file, crate::files::TEXT_CAP)
            .err()
            .filter(|e| !e.not_found())
            .map(|e| {
                Diagnostic::error(
                    "E-IO-003",
                    format!(
                        "{label}: {field} names {}, which cannot be read: {e}",
                        file.display()
                    ),
                )
            })
    });
    match unreadable.map_or(decision, Err) {
        Ok(mut decision) => {
            let mut warnings = loaded.warnings.clone();
            warnings.append(&mut decision.warnings);
            decision.warnings = warnings;
            Ok(Checked {
                label,
                loaded,
                decision,
            })
        }
        Err(d) => {
            // The load's warnings first, as they were found, then the error.
            let mut diagnostics = loaded.warnings;
            diagnostics.push(d);
            Err(Failed { label, diagnostics })
        }
    }
}

/// What `mur doctor` found, before it is printed as text or JSON.
struct Report {
    label: String,
    /// `name vversion` when the manifest loaded.
    capsule: Option<(String, String)>,
    /// Errors and warnings, in order.
    diagnostics: Vec<Diagnostic>,
    /// What `mur run` would refuse though the manifest is valid.
    notes: Vec<String>,
    /// Declared and achieved containment, and what the host can give.
    containment: Option<(String, String, String)>,
}

impl Report {
    fn ok(&self) -> bool {
        !self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

fn examine(path: &Path) -> Report {
    match check(path) {
        Ok(Checked {
            label,
            loaded,
            decision,
        }) => {
            let m = &loaded.manifest;
            let mut report = Report {
                label,
                capsule: Some((m.name.clone(), m.version.clone())),
                diagnostics: Vec::new(),
                notes: Vec::new(),
                containment: None,
            };
            // The declared artifacts, as `mur run` resolves them. One not installed yet is
            // a note (the manifest is fine; `mur install` fetches it); one installed that
            // this runtime cannot run, or that does not match its pin, is an error.
            let missing = match crate::artifact::check_declared(&loaded) {
                Ok(()) => None,
                Err(d) if d.code == "E-RUN-008" => Some(d),
                Err(d) => {
                    report.diagnostics.push(d);
                    return report;
                }
            };
            report.diagnostics.extend(decision.warnings.iter().cloned());
            let p = &decision.policy;
            let host = crate::contain::host::host();
            report.containment = Some((
                p.declared.as_str().to_string(),
                p.achieved.as_str().to_string(),
                crate::contain::host_level(host).as_str().to_string(),
            ));
            report
                .notes
                .extend(m.launch_problems().into_iter().map(|d| d.message));
            report.notes.extend(missing.map(|d| d.message));
            report
        }
        Err(Failed { label, diagnostics }) => Report {
            label,
            capsule: None,
            diagnostics,
            notes: Vec::new(),
            containment: None,
        },
    }
}

/// Validate the manifest at `path` (default `./murmur.yaml`; a directory means its
/// `murmur.yaml`), print every diagnostic (or, with `json`, one JSON object on stdout), and
/// return the process exit code: 1 when there is an error.
pub fn run(path: Option<&Path>, json: bool) -> i32 {
    let path = path.unwrap_or(Path::new(MANIFEST_FILE));
    let report = examine(path);
    let code = if report.ok() { 0 } else { 1 };
    if json {
        let (name, version) = report.capsule.clone().unzip();
        let containment = report
            .containment
            .as_ref()
            .map(|(d, a, h)| serde_json::json!({"declared": d, "achieved": a, "host_can_give": h}));
        crate::outln!(
            "{}",
            serde_json::json!({
                "file": report.label,
                "ok": report.ok(),
                "name": name,
                "version": version,
                "diagnostics": report.diagnostics.iter().map(Diagnostic::to_json).collect::<Vec<_>>(),
                "notes": report.notes,
                "containment": containment,
            })
        );
        return code;
    }
    for d in &report.diagnostics {
        crate::errln!("{d}");
    }
    let label = &report.label;
    if !report.ok() {
        let errors = report.diagnostics.iter().filter(|d| d.is_error()).count();
        let noun = if errors == 1 { "error" } else { "errors" };
        let them = if errors == 1 { "it" } else { "them" };
        crate::errln!("{label}: {errors} {noun}; fix {them} and run mur doctor again");
        return code;
    }
    let warnings = report.diagnostics.len();
    let verdict = match warnings {
        0 => "ok".to_string(),
        1 => "ok, 1 warning".to_string(),
        n => format!("ok, {n} warnings"),
    };
    let (name, version) = report.capsule.clone().unwrap_or_default();
    crate::outln!("{label}: {verdict} — {name} v{version}");
    if let Some((declared, achieved, can)) = &report.containment {
        crate::outln!(
            "  containment: declared {declared}, achieved {achieved} (this host can give {can})"
        );
        for line in crate::contain::host_report(crate::contain::host::host()) {
            crate::outln!("    {line}");
        }
    }
    for note in &report.notes {
        crate::outln!("  note: mur run will refuse this capsule: {note}");
    }
    code
}
