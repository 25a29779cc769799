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

/// Validate the manifest at `path` (default `./murmur.yaml`; a directory means its
/// `murmur.yaml`), print every diagnostic, return the process exit code.
pub fn run(path: Option<&Path>) -> i32 {
    let path = path.unwrap_or(Path::new(MANIFEST_FILE));
    match check(path) {
        Ok(Checked {
            label,
            loaded,
            decision,
        }) => {
            // The declared artifacts, as `mur run` resolves them. One not installed yet is
            // a note (the manifest is fine; `mur install` fetches it); one installed that
            // this runtime cannot run, or that does not match its pin, is an error.
            let missing = match crate::artifact::check_declared(&loaded) {
                Ok(()) => None,
                Err(d) if d.code == "E-RUN-008" => Some(d),
                Err(d) => {
                    crate::errln!("{d}");
                    crate::errln!("{label}: 1 error; fix it and run mur doctor again");
                    return 1;
                }
            };
            let warnings = &decision.warnings;
            for w in warnings {
                crate::errln!("{w}");
            }
            let m = &loaded.manifest;
            let verdict = match warnings.len() {
                0 => "ok".to_string(),
                1 => "ok, 1 warning".to_string(),
                n => format!("ok, {n} warnings"),
            };
            crate::outln!("{label}: {verdict} — {} v{}", m.name, m.version);
            let p = &decision.policy;
            let host = crate::contain::host::host();
            crate::outln!(
                "  containment: declared {}, achieved {} (this host can give {})",
                p.declared.as_str(),
                p.achieved.as_str(),
                crate::contain::host_level(host).as_str()
            );
            for line in crate::contain::host_report(host) {
                crate::outln!("    {line}");
            }
            for problem in m.launch_problems() {
                crate::outln!(
                    "  note: mur run will refuse this capsule: {}",
                    problem.message
                );
            }
            if let Some(d) = missing {
                crate::outln!("  note: mur run will refuse this capsule: {}", d.message);
            }
            0
        }
        Err(Failed { label, diagnostics }) => {
            for d in &diagnostics {
                crate::errln!("{d}");
            }
            let errors = diagnostics.iter().filter(|d| d.is_error()).count();
            let noun = if errors == 1 { "error" } else { "errors" };
            let them = if errors == 1 { "it" } else { "them" };
            crate::errln!("{label}: {errors} {noun}; fix {them} and run mur doctor again");
            1
        }
    }
}
