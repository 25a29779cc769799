//! `mur doctor`: validate a manifest without running it.
//!
//! Prints every diagnostic on stderr in the shared `error[CODE]:` / `warning[CODE]:` form and a
//! one-line verdict on stdout, so a script can rely on the exit code (0 ok or warnings only,
//! 1 errors) and a person can read what to fix.

use std::path::{Path, PathBuf};

use super::{load, MANIFEST_FILE};

/// Validate the manifest at `path` (default `./murmur.yaml`; a directory means its
/// `murmur.yaml`), print every diagnostic, return the process exit code.
pub fn run(path: Option<&Path>) -> i32 {
    let path = match path {
        None => PathBuf::from(MANIFEST_FILE),
        Some(p) if p.is_dir() => p.join(MANIFEST_FILE),
        Some(p) => p.to_path_buf(),
    };
    let label = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| MANIFEST_FILE.to_string());
    match load(&path) {
        Ok(loaded) => {
            // What `mur run` decides about containment, for a session in the default layout.
            let base = loaded.dir.join("workdir");
            let decision = crate::contain::decide::decide(
                &loaded.manifest,
                Path::new(&label),
                &base.join("ses_doctor"),
                &base.join(".murmur").join("ses_doctor"),
                None,
            );
            // The files the manifest names, read as `mur run` reads them.
            let named = loaded
                .manifest
                .inference
                .as_ref()
                .and_then(|i| i.system_prompt_file.clone())
                .map(|rel| ("inference.system_prompt_file", loaded.resolve(&rel)));
            let decision = named
                .and_then(|(field, file)| {
                    // A missing file is `mur run`'s to refuse (upstream's doctor accepts it); one
                    // that exists but is no regular file, or too large, is reported here.
                    crate::files::read_capped(&file, crate::files::TEXT_CAP)
                        .err()
                        .filter(|e| !e.not_found())
                        .map(|e| {
                            crate::diagnostic::Diagnostic::error(
                                if e.not_found() {
                                    "E-IO-001"
                                } else {
                                    "E-IO-003"
                                },
                                format!(
                                    "{label}: {field} names {}, which cannot be read: {e}",
                                    file.display()
                                ),
                            )
                        })
                })
                .map_or(decision, Err);
            let decision = match decision {
                Ok(d) => d,
                Err(d) => {
                    for w in &loaded.warnings {
                        eprintln!("{w}");
                    }
                    eprintln!("{d}");
                    eprintln!("{label}: 1 error; fix it and run mur doctor again");
                    return 1;
                }
            };
            let mut warnings = loaded.warnings.clone();
            warnings.extend(decision.warnings);
            for w in &warnings {
                eprintln!("{w}");
            }
            let m = &loaded.manifest;
            let verdict = match warnings.len() {
                0 => "ok".to_string(),
                1 => "ok, 1 warning".to_string(),
                n => format!("ok, {n} warnings"),
            };
            println!("{label}: {verdict} — {} v{}", m.name, m.version);
            let p = &decision.policy;
            let host = crate::contain::host::host();
            println!(
                "  containment: declared {}, achieved {} (this host can give {})",
                p.declared.as_str(),
                p.achieved.as_str(),
                crate::contain::host_level(host).as_str()
            );
            for line in crate::contain::host_report(host) {
                println!("    {line}");
            }
            for problem in m.launch_problems() {
                println!(
                    "  note: mur run will refuse this capsule: {}",
                    problem.message
                );
            }
            0
        }
        Err(diags) => {
            for d in &diags {
                eprintln!("{d}");
            }
            let errors = diags.iter().filter(|d| d.is_error()).count();
            let noun = if errors == 1 { "error" } else { "errors" };
            eprintln!("{label}: {errors} {noun}; fix them and run mur doctor again");
            1
        }
    }
}
