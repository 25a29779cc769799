//! `mur doctor`: validate a manifest without running it.
//!
//! Prints every diagnostic on stderr in the shared `error[CODE]:` / `warning[CODE]:` form and a
//! one-line verdict on stdout, so a script can rely on the exit code (0 ok or warnings only,
//! 1 errors) and a person can read what to fix.
//!
//! Two verdicts, on purpose. By default doctor judges the *manifest*, as the original Murmur's
//! doctor does (the conformance corpus holds its verdicts): an unset `${KEY}` or an artifact not
//! installed yet is a note, since the file is right and the machine is not ready. With
//! `--strict` it judges *this machine*: it runs every check `mur run` makes before a session
//! starts, through the same code (the driver with its key, the script, the system prompt
//! file, containment, the declared artifacts against the stores and `murmur.lock`, the depth
//! of delegation the path allows, a records folder it can create), and exits 1 exactly when
//! `mur run` would refuse, with the diagnostic run would print. What a later delegation would
//! meet (a sub-capsule with no installed version) is a note: run starts anyway.

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

/// The first refusal `mur run` would give this capsule before its session starts (run stops
/// at its first), found by the code run uses: the delegation depth its records path allows,
/// the driver (its key, its script), containment, the declared artifacts staged against the
/// stores and `murmur.lock`. The session is placed in a temporary folder laid out as run lays
/// it out (`workdir/ses_…`, `workdir/.murmur/ses_…`), so nothing is written to the project;
/// whether run could create the real folders is checked apart.
pub fn launch_refusal(loaded: &LoadedManifest) -> Option<Diagnostic> {
    let dir = std::path::absolute(&loaded.dir).unwrap_or_else(|_| loaded.dir.clone());
    let real = crate::capsule::Placement::root(&dir, None);
    let deepest = crate::run::deepest_delegation(&real.paths.records_dir);
    let depth = mur_actors::supervisor::DEFAULT_MAX_DEPTH;
    if depth > deepest {
        return Some(Diagnostic::error(
            "E-RUN-060",
            format!(
                "--max-depth {depth} cannot be held here: each level of delegation nests a child's records {} bytes deeper below {}, and paths stop at {} bytes, so at most {deepest} levels fit",
                crate::run::CHILD_LEVEL_BYTES,
                real.paths.records_dir.display(),
                crate::run::PATH_MAX,
            ),
        ));
    }
    let scratch = match tempfile::Builder::new().prefix("mur-doctor-").tempdir() {
        Ok(t) => t,
        Err(e) => {
            return Some(Diagnostic::error(
                "E-IO-002",
                format!("cannot make a temporary folder to check the launch in: {e}"),
            ))
        }
    };
    let place = crate::capsule::Placement::root(scratch.path(), None);
    if let Err(d) = crate::capsule::session_spec(loaded, "mur doctor --strict".into(), place) {
        return Some(d);
    }
    // `mur run` creates <manifest dir>/workdir/.murmur/<session>/: the nearest folder that
    // exists on that path must let it.
    let target = real.paths.records_dir;
    let mut existing = target.as_path();
    while !existing.exists() {
        match existing.parent() {
            Some(p) => existing = p,
            None => break,
        }
    }
    if !writable(existing) {
        return Some(
            Diagnostic::error(
                "E-IO-002",
                format!(
                    "cannot create {}: {} is not writable",
                    target.display(),
                    existing.display()
                ),
            )
            .with_hint(format!(
                "the session folder {} must be creatable and writable; pass --workdir to put it elsewhere",
                target.display()
            )),
        );
    }
    None
}

/// Whether this process may create entries in `dir`.
fn writable(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: access only reads the NUL-terminated path we pass.
    unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) == 0 }
}

/// Notes for `--strict` about what delegations would meet: each capsule `capabilities.spawn`
/// allows with no version installed in the project's or the global store.
fn delegation_notes(loaded: &LoadedManifest) -> Vec<String> {
    let Some(spawn) = &loaded.manifest.capabilities.spawn else {
        return Vec::new();
    };
    let dir = std::path::absolute(&loaded.dir).unwrap_or_else(|_| loaded.dir.clone());
    let mut stores = vec![crate::artifact::store::Store::project(&dir)];
    if let Ok(home) = crate::artifact::config::murmur_home() {
        stores.push(crate::artifact::store::Store::global(&home));
    }
    spawn
        .allow
        .iter()
        .filter(|name| stores.iter().all(|s| s.versions(name).is_empty()))
        .map(|name| {
            format!(
                "a delegation to {name} will be refused: no version of it is installed (mur build its folder, then mur install the .mur.zip)"
            )
        })
        .collect()
}

fn examine(path: &Path, strict: bool) -> Report {
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
            if strict {
                // What run refuses is an error here, with run's own words.
                report.diagnostics.extend(launch_refusal(&loaded));
                report.notes.extend(delegation_notes(&loaded));
                return report;
            }
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
/// return the process exit code: 1 when there is an error. With `strict`, also every check
/// `mur run` makes before a session starts ([`launch_refusal`]): 1 exactly when run would
/// refuse.
pub fn run(path: Option<&Path>, json: bool, strict: bool) -> i32 {
    let path = path.unwrap_or(Path::new(MANIFEST_FILE));
    let report = examine(path, strict);
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
                "strict": strict,
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
        if strict {
            crate::outln!("  note: {note}");
        } else {
            crate::outln!("  note: mur run will refuse this capsule: {note}");
        }
    }
    if strict {
        crate::outln!("  ready: mur run would start this capsule here");
    }
    code
}
