//! Deciding a session's containment at launch: the floor, what the host achieves, and the rules.
//!
//! Runs before a session starts, so every refusal (E-CAP-003, E-CAP-012, E-CAP-016) leaves
//! nothing behind. Warnings (W-SEC-005 when a command will run less contained than `scoped`,
//! W-SEC-011 for `workdir_exec`, W-SEC-009 for interpreter runtimes) are returned to the caller,
//! which prints each once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use super::env::{stripped_by_backstop, EnvPlan};
use super::host::{host, host_basic, Host};
use super::{floor_problem, fs, host_level, Level, Limits, Policy};
use crate::diagnostic::Diagnostic;
use crate::manifest::gateway::Credential;
use crate::manifest::{env::env_reference, Manifest};

/// Toolchain homes found under the real `HOME`: when a capsule grants one in
/// `shell.interpreter_runtime`, its variable is set so the toolchain is found although the
/// command's `HOME` is its scratch folder.
pub const TOOLCHAIN_HOMES: &[(&str, &str)] = &[
    ("RUSTUP_HOME", ".rustup"),
    ("CARGO_HOME", ".cargo"),
    ("PYENV_ROOT", ".pyenv"),
    ("NVM_DIR", ".nvm"),
];

/// Every granted binary resolved on `PATH` to the file that runs (those not found left out),
/// cached per process: thousands of delegated children of one capsule ask for the same names,
/// and the ones not yet known are looked up together (see [`which_all`]).
///
/// [`which_all`]: crate::tools::shell::which_all
fn resolved_all(binaries: &[String]) -> Vec<PathBuf> {
    static CACHE: OnceLock<Mutex<HashMap<String, Option<PathBuf>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut known = cache.lock().expect("binary cache");
    let missing: Vec<&str> = binaries
        .iter()
        .map(String::as_str)
        .filter(|b| !known.contains_key(*b))
        .collect();
    if !missing.is_empty() {
        let found = crate::tools::shell::which_all(missing.iter().copied());
        for (b, f) in missing.into_iter().zip(found) {
            known.insert(b.to_string(), f.map(|p| super::canonical(&p)));
        }
    }
    binaries
        .iter()
        .filter_map(|b| known.get(b).cloned().flatten())
        .collect()
}

/// The environment plan for these lists, built once per process for each distinct set.
fn env_plan(
    baseline_env: &[String],
    strip_env: &[String],
    gateways: &[String],
    runtime_dirs: &[(PathBuf, bool)],
) -> Result<Arc<EnvPlan>, String> {
    type Key = (Vec<String>, Vec<String>, Vec<String>, Vec<(PathBuf, bool)>);
    static CACHE: OnceLock<Mutex<HashMap<Key, Arc<EnvPlan>>>> = OnceLock::new();
    let key: Key = (
        baseline_env.to_vec(),
        strip_env.to_vec(),
        gateways.to_vec(),
        runtime_dirs.to_vec(),
    );
    let cache = CACHE.get_or_init(Default::default);
    if let Some(hit) = cache.lock().expect("env cache").get(&key) {
        return Ok(hit.clone());
    }
    let mut env = EnvPlan::new(None, baseline_env, strip_env, gateways)?;
    if let Some(home) = std::env::var_os("HOME").map(PathBuf::from) {
        for (var, dir) in TOOLCHAIN_HOMES {
            let path = home.join(dir);
            let granted = runtime_dirs.iter().any(|(p, _)| p == &path);
            // An unset variable is not among those the plan takes from the environment.
            if granted && std::env::var_os(var).is_none() {
                env.add((*var).into(), path.into_os_string());
            }
        }
    }
    let env = Arc::new(env);
    cache.lock().expect("env cache").insert(key, env.clone());
    Ok(env)
}

/// What a launch decided.
#[derive(Debug)]
pub struct Decision {
    /// The policy the session's sandbox enforces.
    pub policy: Policy,
    /// Warnings to print once.
    pub warnings: Vec<Diagnostic>,
}

/// The variables gateways bind with `api_key: ${NAME}`: never passed to a command.
pub fn gateway_names(m: &Manifest) -> Vec<String> {
    m.artifacts
        .iter()
        .filter_map(|a| match a.gateway.as_ref().map(|g| &g.credential) {
            Some(Credential::ApiKey(raw)) => env_reference(raw).map(str::to_string),
            _ => None,
        })
        .collect()
}

/// Decide the containment of a session of `m` whose work folder is `work` and records are
/// `records`; `floor` is the floor from outside the manifest (`--containment`, the parent's).
pub fn decide(
    m: &Manifest,
    label: &Path,
    work: &Path,
    records: &Path,
    floor: Option<Level>,
) -> Result<Decision, Diagnostic> {
    // Only a `sealed` session gives its commands a network namespace of their own, and only
    // `sealed` depends on the namespaces a command can get: the clone probes run here only when
    // the floor may be `sealed` (below that, `achieved` never is). Other sessions' commands
    // read the namespaces when they start (see `host`).
    let sealed = [m.capabilities.containment, floor]
        .into_iter()
        .flatten()
        .max()
        == Some(Level::Sealed);
    let h = if sealed { host() } else { host_basic() };
    decide_on(h, m, label, work, records, floor)
}

/// [`decide`] on a given host reading (tests use made-up hosts).
pub fn decide_on(
    h: &Host,
    m: &Manifest,
    label: &Path,
    work: &Path,
    records: &Path,
    floor: Option<Level>,
) -> Result<Decision, Diagnostic> {
    let file = label.display();
    let caps = &m.capabilities;
    let fsc = caps.filesystem.clone().unwrap_or_default();
    let shell = caps.shell.clone().unwrap_or_default();
    let mut warnings = Vec::new();

    // E-CAP-016: a pass-through of a name the backstop strips.
    let env_allow = caps
        .env
        .as_ref()
        .map(|e| e.allow.clone())
        .unwrap_or_default();
    for (field, list) in [
        ("capabilities.shell.baseline_env", &shell.baseline_env),
        ("capabilities.env.allow", &env_allow),
    ] {
        if let Some(bad) = list.iter().find(|n| stripped_by_backstop(n)) {
            return Err(Diagnostic::error(
                "E-CAP-016",
                format!(
                    "{file}: {field} names '{bad}', a variable the credential backstop strips; credentials never reach a command"
                ),
            )
            .with_hint("pass a credential to the model's driver with gateway.api_key: ${NAME}, never to a tool"));
        }
    }

    // The floor: the manifest's, `--containment`, the parent's; the highest wins. Unset, it is
    // `scoped` where the host can give it (advisory for a capsule that executes its workdir).
    let declared = [caps.containment, floor].into_iter().flatten().max();
    let records_in_work = records.starts_with(work);
    let declared = declared.unwrap_or(if h.can_scope() && !fsc.workdir_exec && !records_in_work {
        Level::Scoped
    } else {
        Level::Advisory
    });
    if let Some(why) = floor_problem(h, declared, fsc.workdir_exec, records_in_work) {
        let hint = if fsc.workdir_exec {
            "drop filesystem.workdir_exec, or declare capabilities.containment: advisory"
        } else {
            "run on a host that has it (`mur doctor` shows what this one enforces), or declare capabilities.containment: advisory"
        };
        return Err(Diagnostic::error("E-CAP-003", format!("{file}: {why}")).with_hint(hint));
    }

    let mut achieved = match host_level(h) {
        Level::Sealed if declared == Level::Sealed => Level::Sealed,
        Level::Sealed => Level::Scoped,
        l => l,
    };
    if fsc.workdir_exec || records_in_work {
        achieved = Level::Advisory;
    }
    if fsc.workdir_exec {
        warnings.push(Diagnostic::warning(
            "W-SEC-011",
            format!(
                "{file}: capabilities.filesystem.workdir_exec: true lets commands execute files in the work folder; containment is advisory at most"
            ),
        ));
    }
    // One W-SEC-005 line when commands run less contained than `scoped` (W-SEC-011 already
    // says why for workdir_exec).
    if achieved == Level::Advisory && !fsc.workdir_exec {
        let missing = if records_in_work {
            "the records folder is inside the work folder".to_string()
        } else {
            h.scoped_missing().unwrap_or_default()
        };
        warnings.push(Diagnostic::warning(
            "W-SEC-005",
            format!(
                "{file}: commands run with advisory containment: {missing}; `mur doctor` shows what this host enforces"
            ),
        ));
    }

    // The writable scope.
    let writable = match fsc.scope.as_deref() {
        None | Some(".") => work.to_path_buf(),
        Some(s) => work.join(s),
    };
    // E-CAP-012: Landlock cannot take write access back below a writable folder.
    for (i, ro) in fsc.read_only.iter().enumerate() {
        let bad = ro.starts_with('/') || ro.split('/').any(|p| p == "..");
        if bad {
            return Err(Diagnostic::error(
                "E-CAP-012",
                format!("{file}: capabilities.filesystem.read_only[{i}] '{ro}' is not a path inside the work folder"),
            ));
        }
        if work.join(ro).starts_with(&writable) && achieved != Level::Advisory {
            return Err(Diagnostic::error(
                "E-CAP-012",
                format!(
                    "{file}: capabilities.filesystem.read_only[{i}] '{ro}' lies inside the writable scope '{}'; the sandbox cannot take write access back from a folder inside it",
                    fsc.scope.as_deref().unwrap_or(".")
                ),
            )
            .with_hint("narrow capabilities.filesystem.scope to the folder the capsule writes: the rest of the work folder is then read-only"));
        }
    }

    // Granted binaries, resolved to the files that run.
    let binaries: Vec<PathBuf> = resolved_all(&shell.allow);
    let runtime_dirs: Vec<(PathBuf, bool)> = shell
        .interpreter_runtime
        .iter()
        .flat_map(|r| r.dirs.iter().map(|d| (d.path.clone(), d.list_dir)))
        .collect();
    if !shell.interpreter_runtime.is_empty() {
        let names: Vec<&str> = shell
            .interpreter_runtime
            .iter()
            .map(|r| r.binary.as_str())
            .collect();
        warnings.push(Diagnostic::warning(
            "W-SEC-009",
            format!(
                "{file}: shell.interpreter_runtime lets {} read and execute {} folder(s) outside the work folder",
                names.join(", "),
                runtime_dirs.len()
            ),
        ));
    }

    let net = caps.network.clone().unwrap_or_default();
    let network = !net.allow.is_empty();
    let connect = if network {
        fs::granted_ports(&net.allow)
    } else {
        Some(Vec::new())
    };

    let env = env_plan(
        &shell.baseline_env,
        &shell.strip_env,
        &gateway_names(m),
        &runtime_dirs,
    )
    .map_err(|e| {
        Diagnostic::error(
            "E-MAN-003",
            format!("{file}: invalid capability config for 'capabilities.shell': {e}"),
        )
    })?;

    let r = &caps.resources;
    if r.cgroup_declared {
        warnings.push(Diagnostic::warning(
            "W-SEC-005",
            format!(
                "{file}: capabilities.resources.cgroup_* limits are not applied: mur does not create cgroups; the per-command rlimits (max_processes, max_open_files, max_file_size_bytes, cpu_seconds, memory_bytes) apply"
            ),
        ));
    }
    let d = Limits::default();
    let limits = Limits {
        max_processes: r.max_processes.unwrap_or(d.max_processes),
        max_open_files: r.max_open_files.unwrap_or(d.max_open_files),
        max_file_size_bytes: r.max_file_size_bytes.unwrap_or(d.max_file_size_bytes),
        cpu_seconds: r.cpu_seconds.unwrap_or(d.cpu_seconds),
        memory_bytes: r.memory_bytes.unwrap_or(d.memory_bytes),
    };

    let policy = Policy {
        declared,
        achieved,
        landlock_abi: h.landlock_abi,
        namespaces: h.namespaces,
        seccomp: h.seccomp,
        private_net: achieved == Level::Sealed && h.net_namespace,
        workdir_exec: fsc.workdir_exec,
        writable,
        staged_tools: records.join("tools"),
        binaries,
        runtime_dirs,
        network,
        connect,
        unix_sockets: net.unix_sockets,
        env,
        limits,
    };
    Ok(Decision { policy, warnings })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contain::host::Namespaces;

    fn manifest(caps: &str) -> Manifest {
        let text = format!("name: t\nversion: \"1\"\ncapabilities:\n{caps}");
        crate::manifest::parse_str(&text)
            .expect("a valid manifest")
            .0
    }

    fn host(abi: i32, ns: Namespaces) -> Host {
        Host {
            landlock_abi: abi,
            namespaces: Some(ns),
            seccomp: true,
            net_namespace: ns != Namespaces::None,
        }
    }

    fn on(h: &Host, caps: &str, floor: Option<Level>) -> Result<Decision, Diagnostic> {
        decide_on(
            h,
            &manifest(caps),
            Path::new("murmur.yaml"),
            Path::new("/p/workdir/ses_x"),
            Path::new("/p/workdir/.murmur/ses_x"),
            floor,
        )
    }

    const SHELL: &str = "  shell:\n    allow: [bash]\n";

    #[test]
    fn a_glob_that_does_not_parse_is_refused_at_launch_naming_it() {
        let m = manifest("  shell:\n    allow: [ls]\n    strip_env: [\"FOO_[\"]\n");
        let err = decide_on(
            &host(6, Namespaces::UserPid),
            &m,
            Path::new("murmur.yaml"),
            Path::new("/w"),
            Path::new("/r"),
            None,
        )
        .unwrap_err();
        assert_eq!(err.code, "E-MAN-003");
        assert!(
            err.message.contains("'FOO_[' is not a valid glob"),
            "{}",
            err.message
        );
    }

    #[test]
    fn the_default_floor_is_scoped_where_the_host_can_give_it() {
        let d = on(&host(7, Namespaces::UserPid), SHELL, None).unwrap();
        assert_eq!(
            (d.policy.declared, d.policy.achieved),
            (Level::Scoped, Level::Scoped)
        );
        assert!(d.warnings.is_empty());
        // A host that could seal still achieves scoped unless sealed is asked for.
        let d = on(&host(7, Namespaces::UserPid), SHELL, Some(Level::Sealed)).unwrap();
        assert_eq!(d.policy.achieved, Level::Sealed);
        assert!(d.policy.private_net);
    }

    #[test]
    fn only_a_sealed_launch_reads_the_namespaces_others_leave_them_to_the_first_command() {
        let d = decide(
            &manifest(SHELL),
            Path::new("murmur.yaml"),
            Path::new("/p/workdir/ses_x"),
            Path::new("/p/workdir/.murmur/ses_x"),
            None,
        )
        .unwrap();
        assert_eq!(d.policy.namespaces, None);
        assert_eq!(d.policy.namespaces(), super::super::host::namespaces());
        // A made-up host's reading is the policy's.
        let d = on(&host(7, Namespaces::Pid), SHELL, None).unwrap();
        assert_eq!(d.policy.namespaces(), Namespaces::Pid);
    }

    #[test]
    fn a_host_without_landlock_runs_advisory_with_one_warning_and_refuses_a_floor() {
        let h = host(0, Namespaces::None);
        let d = on(&h, SHELL, None).unwrap();
        assert_eq!(
            (d.policy.declared, d.policy.achieved),
            (Level::Advisory, Level::Advisory)
        );
        let codes: Vec<&str> = d.warnings.iter().map(|w| w.code.as_str()).collect();
        assert_eq!(codes, ["W-SEC-005"]);
        for floor in [Level::Scoped, Level::Sealed] {
            let e = on(&h, SHELL, Some(floor)).unwrap_err();
            assert_eq!(e.code, "E-CAP-003");
            assert!(
                e.message.contains("Landlock is not available"),
                "{}",
                e.message
            );
        }
        // The manifest's own floor is refused the same way.
        let e = on(&h, &format!("  containment: scoped\n{SHELL}"), None).unwrap_err();
        assert_eq!(e.code, "E-CAP-003");
    }

    #[test]
    fn an_old_abi_names_the_missing_version() {
        let e = on(&host(3, Namespaces::UserPid), SHELL, Some(Level::Scoped)).unwrap_err();
        assert!(
            e.message.contains("Landlock ABI 3 cannot restrict TCP"),
            "{}",
            e.message
        );
        let e = on(&host(5, Namespaces::UserPid), SHELL, Some(Level::Sealed)).unwrap_err();
        assert!(
            e.message.contains("Landlock ABI 5 cannot scope signals"),
            "{}",
            e.message
        );
        let e = on(&host(7, Namespaces::None), SHELL, Some(Level::Sealed)).unwrap_err();
        assert!(e.message.contains("own PID namespace"), "{}", e.message);
    }

    #[test]
    fn records_inside_the_work_folder_cap_the_level() {
        let h = host(7, Namespaces::UserPid);
        let m = manifest(SHELL);
        let (w, r) = (Path::new("/p/wd"), Path::new("/p/wd/.murmur/ses_x"));
        let d = decide_on(&h, &m, Path::new("murmur.yaml"), w, r, None).unwrap();
        assert_eq!(d.policy.achieved, Level::Advisory);
        let e = decide_on(&h, &m, Path::new("murmur.yaml"), w, r, Some(Level::Scoped)).unwrap_err();
        assert!(
            e.message.contains("records folder would be inside"),
            "{}",
            e.message
        );
    }

    #[test]
    fn ports_follow_network_allow() {
        let h = host(7, Namespaces::UserPid);
        let d = on(
            &h,
            "  network:\n    allow: [\"https://api.example.com\", \"localhost:8080\"]\n",
            None,
        )
        .unwrap();
        assert!(d.policy.network);
        assert_eq!(d.policy.connect, Some(vec![443, 8080]));
        let d = on(&h, SHELL, None).unwrap();
        assert!(!d.policy.network);
        assert_eq!(d.policy.connect, Some(vec![]));
    }
}
