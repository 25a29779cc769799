//! The `mur install` command: argument parsing to exit code, and the no-argument form that
//! installs everything `murmur.yaml` declares and reports each failure.

use std::path::PathBuf;

use super::install::Installer;
use super::install_ref::{parse_ref, InstallRef};
use super::lock::read_lock;
use crate::diagnostic::Diagnostic;
use crate::manifest::MANIFEST_FILE;

/// What the no-argument `mur install` did.
pub struct Declared {
    /// How many artifacts were installed (or found installed) and pinned.
    pub installed: usize,
    /// Each one that failed, with why.
    pub failed: Vec<(String, Diagnostic)>,
    /// The built-in drivers declared (nothing to fetch for them).
    pub built_in: Vec<String>,
}

/// Installs everything `murmur.yaml` declares.
pub async fn install_declared(inst: &mut Installer) -> Result<Declared, Vec<Diagnostic>> {
    let Some(project) = inst.project.clone() else {
        return Err(vec![Diagnostic::error(
            "E-IO-001",
            "no project root found (no murmur.yaml in current or parent directories)",
        )]);
    };
    let loaded = crate::manifest::load(&project.join(MANIFEST_FILE))?;
    read_lock(&project).map_err(|d| vec![d])?;
    let wanted: Vec<_> = loaded.manifest.installable_artifacts().cloned().collect();
    let mut ok = 0;
    let mut failed = Vec::new();
    for a in &wanted {
        match inst.install_name(&a.name, Some(&a.version)).await {
            Ok(()) => ok += 1,
            Err(d) => failed.push((format!("{}@{}", a.name, a.version), d)),
        }
    }
    // The built-in drivers are never fetched: mur needs nothing of them. The original Murmur
    // runs them from its store and refuses a lock that does not pin them, so when a store
    // already holds the declared version (the original's `mur install` put it there), pin it
    // as the original would; a repository both runtimes use then runs in both.
    for a in loaded.manifest.artifacts.iter().filter(|a| {
        a.source.is_none() && a.builtin_driver().is_some() && a.name.scope() == "murmur"
    }) {
        if inst.holds(&a.name, &a.version) {
            match inst.install_name(&a.name, Some(&a.version)).await {
                Ok(()) => ok += 1,
                Err(d) => failed.push((format!("{}@{}", a.name, a.version), d)),
            }
        }
    }
    let built_in = loaded
        .manifest
        .artifacts
        .iter()
        .filter(|a| a.builtin_driver().is_some())
        .map(|a| a.name.to_string())
        .collect();
    Ok(Declared {
        installed: ok,
        failed,
        built_in,
    })
}

/// What one `mur install` did, for `--json`.
#[derive(Default)]
struct Outcome {
    installed: Vec<serde_json::Value>,
    failed: Vec<serde_json::Value>,
    note: Option<String>,
}

impl Outcome {
    /// Records and prints one failure; returns the exit code 1.
    fn fail(&mut self, artifact: Option<&str>, d: &Diagnostic) -> i32 {
        crate::errln!("{d}");
        self.record(artifact, d);
        1
    }

    /// Records one failure for `--json` (printed by the caller).
    fn record(&mut self, artifact: Option<&str>, d: &Diagnostic) {
        let mut v = d.to_json();
        v["artifact"] = serde_json::json!(artifact);
        self.failed.push(v);
    }

    /// The exit code of a one-reference install.
    fn settle(&mut self, reference: Option<&str>, result: Result<(), Diagnostic>) -> i32 {
        match result {
            Ok(()) => 0,
            Err(d) => self.fail(reference, &d),
        }
    }

    /// Reports the no-argument install; returns its exit code.
    fn declared(&mut self, result: Result<Declared, Vec<Diagnostic>>, json: bool) -> i32 {
        let d = match result {
            Err(diags) => {
                for d in diags.iter().filter(|d| d.is_error()) {
                    self.fail(None, d);
                }
                return 1;
            }
            Ok(d) => d,
        };
        let n = d.installed;
        if d.failed.is_empty() {
            let line = if n > 0 {
                format!("installed {n} artifact{}", if n == 1 { "" } else { "s" })
            } else if d.built_in.is_empty() {
                "No artifacts in manifest.".to_string()
            } else {
                format!(
                    "Nothing to install: murmur.yaml declares only {} built into mur, which need{} no fetching.",
                    d.built_in.join(", "),
                    if d.built_in.len() == 1 { "s" } else { "" }
                )
            };
            if !json {
                crate::outln!("{line}");
            }
            if n == 0 {
                self.note = Some(line);
            }
            return 0;
        }
        crate::errln!(
            "{} of {} artifacts failed to install:",
            d.failed.len(),
            n + d.failed.len()
        );
        for (what, e) in &d.failed {
            crate::errln!("  {what}:");
            for line in e.to_string().lines() {
                crate::errln!("    {line}");
            }
            self.record(Some(what), e);
        }
        1
    }
}

/// `mur install [REF] [-g] [--json]`: returns the exit code.
pub fn run_install(reference: Option<&str>, global: bool, json: bool) -> i32 {
    let mut outcome = Outcome::default();
    let code = install(reference, global, json, &mut outcome);
    if json {
        crate::outln!(
            "{}",
            serde_json::json!({
                "ok": code == 0,
                "installed": outcome.installed,
                "failed": outcome.failed,
                "note": outcome.note,
            })
        );
    }
    code
}

fn install(reference: Option<&str>, global: bool, json: bool, out: &mut Outcome) -> i32 {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let d = Diagnostic::error("E-IO-003", format!("cannot start the async runtime: {e}"));
            return out.fail(None, &d);
        }
    };
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    rt.block_on(async move {
        let parsed = match reference.map(parse_ref).transpose() {
            Ok(r) => r,
            Err(d) => return out.fail(reference, &d),
        };
        let mut inst = match Installer::new(&cwd, global) {
            Ok(i) => i,
            Err(d) => return out.fail(reference, &d),
        };
        inst.quiet = json;
        let code = match parsed {
            Some(InstallRef::Name(n, v)) => {
                out.settle(reference, inst.install_name(&n, v.as_deref()).await)
            }
            Some(InstallRef::File(p)) => out.settle(reference, inst.install_file(&p)),
            Some(InstallRef::Github { owner, repo, tag }) => out.settle(
                reference,
                inst.install_github(&owner, &repo, &tag).await.map(|_| ()),
            ),
            None if global => {
                let d = Diagnostic::error("E-IO-003", "mur install -g needs an artifact reference");
                out.fail(None, &d);
                2
            }
            None => {
                let declared = install_declared(&mut inst).await;
                out.declared(declared, json)
            }
        };
        out.installed = std::mem::take(&mut inst.installed);
        code
    })
}
