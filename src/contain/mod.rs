//! Containment: every process the runtime starts for a capsule runs inside a sandbox.
//!
//! Shell tools, native tool artifacts (declared or pulled), plan shell steps and policy hooks
//! all start through [`Sandbox::command`], and [`spawn`] starts them with one `clone` into their
//! own user and PID namespaces (so the whole process tree dies with the command). Before exec
//! the child applies ([`child`]) rlimits from `capabilities.resources`, `no_new_privs`, a
//! Landlock ruleset ([`fs`]) and a seccomp deny list ([`syscalls`]); the environment is rebuilt
//! from a baseline with every credential stripped ([`env`]). [`decide`] turns a manifest and
//! the host ([`host`]) into the session's [`Policy`] at launch.
//!
//! Levels follow upstream: the operator declares a floor (`capabilities.containment`,
//! `mur run --containment`, the higher wins, a child never below its parent); the host decides
//! what is enforced, always the most it can ([`host`]); the session reports what it achieved.
//! `scoped` is Landlock (files, TCP) + seccomp; `sealed` adds signal scoping, namespaces that
//! bound the process tree, and a network namespace of its own (no network at all) when no
//! network is granted. A
//! declared floor the host cannot give is refused at launch (E-CAP-003); `workdir_exec: true`
//! caps what is achieved at `advisory`, since a capsule that may run what it writes has given
//! up the claim `scoped` makes. See docs/containment.md.

pub mod child;
pub mod decide;
pub mod env;
pub mod fs;
pub mod host;
pub mod spawn;
pub mod syscalls;

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub use crate::manifest::Containment as Level;

use child::ChildPlan;
use host::{Host, Namespaces};

/// The upstream default of `capabilities.resources` keys, applied per command.
pub mod defaults {
    /// `max_processes`.
    pub const MAX_PROCESSES: u64 = 128;
    /// `max_open_files`.
    pub const MAX_OPEN_FILES: u64 = 1024;
    /// `max_file_size_bytes` (4 GiB).
    pub const MAX_FILE_SIZE_BYTES: u64 = 4 << 30;
    /// `cpu_seconds`.
    pub const CPU_SECONDS: u64 = 3600;
    /// `memory_bytes` (2 GiB of address space).
    pub const MEMORY_BYTES: u64 = 2 << 30;
}

/// Per-command resource limits (`capabilities.resources`, upstream defaults).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// RLIMIT_NPROC, applied when the command has its own user namespace (root is exempt).
    pub max_processes: u64,
    /// RLIMIT_NOFILE.
    pub max_open_files: u64,
    /// RLIMIT_FSIZE.
    pub max_file_size_bytes: u64,
    /// RLIMIT_CPU.
    pub cpu_seconds: u64,
    /// RLIMIT_AS.
    pub memory_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_processes: defaults::MAX_PROCESSES,
            max_open_files: defaults::MAX_OPEN_FILES,
            max_file_size_bytes: defaults::MAX_FILE_SIZE_BYTES,
            cpu_seconds: defaults::CPU_SECONDS,
            memory_bytes: defaults::MEMORY_BYTES,
        }
    }
}

/// Everything a session's sandbox is built from, decided at launch.
#[derive(Clone, Debug)]
pub struct Policy {
    /// The floor asked for.
    pub declared: Level,
    /// What the session's commands run under.
    pub achieved: Level,
    /// Whether Landlock is applied (the host has it).
    pub landlock_abi: i32,
    /// What bounds a command's process tree, when the launch read it (a `sealed` floor); `None`:
    /// the host's, read when a command starts ([`Policy::namespaces`]).
    pub namespaces: Option<Namespaces>,
    /// Seccomp filters are loaded.
    pub seccomp: bool,
    /// Commands get a network namespace of their own (sealed, no network granted).
    pub private_net: bool,
    /// `filesystem.workdir_exec`.
    pub workdir_exec: bool,
    /// The writable part of the work folder (`filesystem.scope`, else the whole folder).
    pub writable: PathBuf,
    /// Where the session's staged tool manifests are (readable, never writable).
    pub staged_tools: PathBuf,
    /// Granted binaries, resolved to the files that run.
    pub binaries: Vec<PathBuf>,
    /// `shell.interpreter_runtime` paths: `(path, list_dir)`.
    pub runtime_dirs: Vec<(PathBuf, bool)>,
    /// `network.allow` is non-empty.
    pub network: bool,
    /// Ports TCP may connect to (`None`: any).
    pub connect: Option<Vec<u16>>,
    /// `network.unix_sockets`.
    pub unix_sockets: bool,
    /// Environment plan (shared by every session of the same capsule).
    pub env: Arc<env::EnvPlan>,
    /// Resource limits.
    pub limits: Limits,
}

impl Policy {
    /// What bounds a command's process tree: the launch's reading, else the host's (probed
    /// once per process, when the first command starts or before; see [`host::namespaces`]).
    pub fn namespaces(&self) -> Namespaces {
        self.namespaces.unwrap_or_else(host::namespaces)
    }
}

/// What kind of process a command is, which decides its rules.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Profile {
    /// A shell tool or plan shell step.
    Shell,
    /// A native tool artifact with this staged entrypoint.
    Native(PathBuf),
    /// A policy hook with this entrypoint: reads its event, writes nothing.
    Hook(PathBuf),
}

/// How many Landlock ruleset descriptors the process keeps cached, across all sessions.
pub const CACHED_RULESETS: usize = 256;

/// Ruleset descriptors cached right now.
static CACHED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A session's sandbox: builds contained commands. One per session, shared by its executors.
pub struct Sandbox {
    policy: Option<Policy>,
    work: PathBuf,
    scratch: PathBuf,
    rulesets: Mutex<HashMap<Profile, Arc<OwnedFd>>>,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("policy", &self.policy)
            .field("work", &self.work)
            .finish()
    }
}

impl Sandbox {
    /// A sandbox enforcing `policy` for commands that run in `work`; `scratch` holds their
    /// `HOME` and `TMPDIR` (created at the first command, removed with the sandbox).
    pub fn new(policy: Policy, work: PathBuf, scratch: PathBuf) -> Sandbox {
        Sandbox {
            policy: Some(policy),
            work,
            scratch,
            rulesets: Mutex::new(HashMap::new()),
        }
    }

    /// No containment at all: commands inherit `mur`'s environment and authority. Only for
    /// embedding the kernel where the caller contains things itself, and for the benchmark
    /// that measures what containment costs.
    pub fn uncontained(work: PathBuf) -> Sandbox {
        Sandbox {
            policy: None,
            scratch: work.clone(),
            work,
            rulesets: Mutex::new(HashMap::new()),
        }
    }

    /// A command running `program` in `cwd` under this sandbox (stdout and stderr piped, stdin
    /// `/dev/null` unless the caller asks for a pipe).
    pub fn command(
        &self,
        program: &Path,
        cwd: &Path,
        profile: Profile,
    ) -> Result<spawn::Command, String> {
        let mut cmd = spawn::Command::new(program, cwd).map_err(|e| e.to_string())?;
        let Some(policy) = &self.policy else {
            return Ok(cmd);
        };
        let (home, tmp) = self.scratch_dirs(&profile)?;
        let home_tmp = [
            (std::ffi::OsStr::new("HOME"), home.as_os_str()),
            (std::ffi::OsStr::new("TMPDIR"), tmp.as_os_str()),
        ];
        cmd.env(
            policy
                .env
                .vars()
                .iter()
                .map(|(k, v)| (k.as_os_str(), v.as_os_str()))
                .chain(home_tmp),
        )
        .map_err(|e| e.to_string())?;
        let ruleset = if policy.landlock_abi > 0 {
            Some(self.ruleset(policy, &profile)?)
        } else {
            None
        };
        let (network, unix) = match profile {
            Profile::Hook(_) => (false, false),
            _ => (policy.network, policy.unix_sockets),
        };
        use rustix::process::Resource;
        let l = &policy.limits;
        let mut rlimits = vec![
            (Resource::Nofile, l.max_open_files),
            (Resource::Fsize, l.max_file_size_bytes),
            (Resource::Cpu, l.cpu_seconds),
            (Resource::As, l.memory_bytes),
            (Resource::Core, 0),
        ];
        let namespaces = policy.namespaces();
        if namespaces == Namespaces::UserPid {
            rlimits.push((Resource::Nproc, l.max_processes));
        }
        let plan = ChildPlan {
            namespaces,
            private_net: policy.private_net && !network,
            maps: child::IdMaps::current(),
            rlimits,
            ruleset,
            seccomp: if policy.seccomp {
                syscalls::programs(network, unix)
            } else {
                Vec::new()
            },
        };
        cmd.plan(Arc::new(plan));
        Ok(cmd)
    }

    /// `HOME` and `TMPDIR` for a command: the session's scratch folder (a hook gets the work
    /// folder, read-only to it, and no scratch).
    fn scratch_dirs(&self, profile: &Profile) -> Result<(PathBuf, PathBuf), String> {
        if let Profile::Hook(_) = profile {
            return Ok((self.work.clone(), self.work.clone()));
        }
        use std::os::unix::fs::DirBuilderExt;
        let (home, tmp) = (self.scratch.join("home"), self.scratch.join("tmp"));
        for d in [&self.scratch, &home, &tmp] {
            if !d.is_dir() {
                std::fs::DirBuilder::new()
                    .mode(0o700)
                    .create(d)
                    .or_else(|e| if d.is_dir() { Ok(()) } else { Err(e) })
                    .map_err(|e| format!("cannot create {}: {e}", d.display()))?;
            }
        }
        Ok((home, tmp))
    }

    /// The profile's ruleset: built once and kept while the process keeps fewer than
    /// [`CACHED_RULESETS`] of them (each is a descriptor, and thousands of live sessions must
    /// not cost thousands of descriptors); past that, built per command and closed after it.
    fn ruleset(&self, policy: &Policy, profile: &Profile) -> Result<Arc<OwnedFd>, String> {
        use std::sync::atomic::Ordering;
        let mut cache = self.rulesets.lock().expect("ruleset cache");
        if let Some(fd) = cache.get(profile) {
            return Ok(fd.clone());
        }
        let rules = self.rules(policy, profile);
        let fd = Arc::new(fs::ruleset(&rules, policy.landlock_abi)?);
        if CACHED.fetch_add(1, Ordering::Relaxed) < CACHED_RULESETS {
            cache.insert(profile.clone(), fd.clone());
        } else {
            CACHED.fetch_sub(1, Ordering::Relaxed);
        }
        Ok(fd)
    }

    /// Why a native tool's entrypoint could not execute, when its `#!` interpreter is what the
    /// sandbox refused: a sentence naming the interpreter and the grant that would allow it.
    pub fn ungranted_interpreter(&self, entry: &Path) -> Option<String> {
        let policy = self.policy.as_ref()?;
        let granted = |real: &Path| {
            policy.binaries.iter().any(|b| b == real)
                || policy.runtime_dirs.iter().any(|(d, _)| real.starts_with(d))
        };
        let missing = shebang(entry)
            .into_iter()
            .find(|written| !granted(&canonical(written)))?;
        let name = missing.file_name()?.to_string_lossy().into_owned();
        Some(format!(
            "its #! interpreter {} is not granted to this capsule; a tool runs only the binaries the capsule grants: add '{name}' to capabilities.shell.allow to let it run",
            missing.display()
        ))
    }

    /// The writable scope, only while it is a real folder inside the work folder: a command
    /// could have replaced it with a link pointing anywhere before a later ruleset is built. A
    /// scope that does not exist yet is made, one real folder at a time (never through a link).
    fn writable(&self, policy: &Policy) -> Vec<PathBuf> {
        if let Ok(rel) = policy.writable.strip_prefix(&self.work) {
            let mut at = self.work.clone();
            for part in rel.components() {
                at.push(part);
                match at.symlink_metadata() {
                    Ok(m) if m.is_dir() => {}
                    Ok(_) => return Vec::new(),
                    Err(_) => {
                        if std::fs::create_dir(&at).is_err() {
                            return Vec::new();
                        }
                    }
                }
            }
        }
        let inside = |p: &Path| {
            let is_link = p
                .symlink_metadata()
                .map(|m| m.file_type().is_symlink())
                .unwrap_or(true);
            let (Ok(real), Ok(work)) = (p.canonicalize(), self.work.canonicalize()) else {
                return false;
            };
            (p == self.work || !is_link) && real.starts_with(work)
        };
        if inside(&policy.writable) {
            vec![policy.writable.clone()]
        } else {
            Vec::new()
        }
    }

    /// The file and network rules of one profile.
    pub fn rules(&self, policy: &Policy, profile: &Profile) -> fs::Rules {
        let mut r = fs::Rules {
            read: vec![self.work.clone(), policy.staged_tools.clone()],
            ..fs::Rules::default()
        };
        let granted = |r: &mut fs::Rules| {
            r.exec.extend(policy.binaries.iter().cloned());
            for (p, list) in &policy.runtime_dirs {
                if *list {
                    r.exec_list.push(p.clone());
                } else {
                    r.exec.push(p.clone());
                }
            }
        };
        match profile {
            Profile::Shell => {
                r.write = self.writable(policy);
                r.write.push(self.scratch.clone());
                granted(&mut r);
                r.connect = policy.connect.clone();
            }
            Profile::Native(entry) => {
                r.write = self.writable(policy);
                r.write.push(self.scratch.clone());
                r.exec.push(canonical(entry));
                granted(&mut r);
                r.connect = policy.connect.clone();
            }
            Profile::Hook(entry) => {
                // An operator-declared hook may be a script: its `#!` interpreter runs too.
                r.exec.push(canonical(entry));
                r.exec.extend(interpreters(entry));
                r.connect = Some(Vec::new());
            }
        }
        if policy.workdir_exec && !matches!(profile, Profile::Hook(_)) {
            r.exec_list.extend(self.writable(policy));
        }
        r
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let cached = self.rulesets.get_mut().map(|c| c.len()).unwrap_or(0);
        CACHED.fetch_sub(cached, std::sync::atomic::Ordering::Relaxed);
        if self.policy.is_some() {
            let _ = std::fs::remove_dir_all(&self.scratch);
        }
    }
}

/// The programs a script's `#!` line runs (`/usr/bin/env X` runs `env`, then `X` from `PATH`),
/// resolved; none for a binary.
pub fn interpreters(script: &Path) -> Vec<PathBuf> {
    shebang(script).iter().map(|p| canonical(p)).collect()
}

/// The programs a script's `#!` line names, as written (the target of `env` found on `PATH`).
fn shebang(script: &Path) -> Vec<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(script)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    let Some(line) = head[..n].strip_prefix(b"#!") else {
        return Vec::new();
    };
    let line = line.split(|b| *b == b'\n').next().unwrap_or(&[]);
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let Some(first) = words.next() else {
        return Vec::new();
    };
    let mut out = vec![PathBuf::from(first)];
    if Path::new(first).file_name().is_some_and(|n| n == "env") {
        if let Some(target) = words.find(|w| !w.starts_with('-')) {
            if let Some(found) = crate::tools::shell::which(target) {
                out.push(found);
            }
        }
    }
    out
}

/// The scratch folder (`HOME`, `TMPDIR`) of a session's commands: `$TMPDIR/mur-<pid>-<ses>`.
/// The pid lets a later `mur` remove what a killed one left ([`sweep_stale_scratch`]).
pub fn scratch_dir(session_id: &str) -> PathBuf {
    // SAFETY: getpid cannot fail.
    let pid = unsafe { libc::getpid() };
    std::env::temp_dir().join(format!("mur-{pid}-{session_id}"))
}

/// Remove scratch folders whose `mur` is gone (killed before it could remove them). Once per
/// process; a folder of a live process, or of another user, is left alone.
pub fn sweep_stale_scratch() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("mur-")) else {
                continue;
            };
            let Some((pid, ses)) = rest.split_once('-') else {
                continue;
            };
            let alive = Path::new("/proc").join(pid).exists();
            if !alive && ses.starts_with("ses_") && pid.parse::<u32>().is_ok() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    });
}

/// `path` with every link resolved (Landlock sees the file that runs), else as given.
pub fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The level the host can back when nothing caps it.
pub fn host_level(h: &Host) -> Level {
    if h.can_seal() {
        Level::Sealed
    } else if h.can_scope() {
        Level::Scoped
    } else {
        Level::Advisory
    }
}

/// Why a host, or the capsule itself, cannot give `floor`: the E-CAP-003 sentence, or `None`.
pub fn floor_problem(
    h: &Host,
    floor: Level,
    workdir_exec: bool,
    records_in_work: bool,
) -> Option<String> {
    if floor == Level::Advisory {
        return None;
    }
    if workdir_exec {
        return Some(format!(
            "containment '{}' cannot hold with capabilities.filesystem.workdir_exec: true: a capsule that may execute what it writes is advisory at most",
            floor.as_str()
        ));
    }
    if records_in_work {
        return Some(format!(
            "containment '{}' cannot hold: the session's records folder would be inside the work folder, where its commands could rewrite them",
            floor.as_str()
        ));
    }
    let missing = match floor {
        Level::Sealed => h.sealed_missing(),
        _ => h.scoped_missing(),
    }?;
    Some(format!(
        "containment '{}' is not achievable on this host: {missing}",
        floor.as_str()
    ))
}

/// One line per fact: what this host enforces (for `mur doctor`, under its containment line).
pub fn host_report(h: &Host) -> Vec<String> {
    let mut out = Vec::new();
    out.push(if h.landlock_abi > 0 {
        let mut what = vec!["files", "execution"];
        if h.landlock_abi >= host::LANDLOCK_NET_ABI {
            what.push("TCP ports");
        }
        if h.landlock_abi >= host::LANDLOCK_SCOPE_ABI {
            what.push("signals");
            what.push("abstract UNIX sockets");
        }
        format!("landlock:   ABI {}: {}", h.landlock_abi, what.join(", "))
    } else {
        "landlock:   not available: files, execution and TCP are not restricted".into()
    });
    out.push(format!(
        "seccomp:    {}",
        if h.seccomp {
            "a deny list per command"
        } else {
            "not available"
        }
    ));
    out.push(format!(
        "processes:  {}",
        match h.namespaces.unwrap_or_else(host::namespaces) {
            Namespaces::UserPid =>
                "own user and PID namespaces per command: the whole tree dies with it",
            Namespaces::Pid => "own PID namespace per command: the whole tree dies with it",
            Namespaces::None =>
                "process group only: a process that calls setsid can outlive its call",
        }
    ));
    out.push(format!(
        "network:    {}",
        if h.net_namespace {
            "TCP by port (Landlock); sealed: no network at all without a grant"
        } else {
            "TCP by port (Landlock)"
        }
    ));
    out.push(format!(
        "resources:  rlimits per command; {}",
        match &host::cgroup() {
            None => "no cgroup v2 here".to_string(),
            Some(c) => {
                let limits: Vec<&str> = ["memory", "pids", "cpu", "io"]
                    .into_iter()
                    .filter(|k| c.controllers.iter().any(|x| x == k))
                    .collect();
                format!(
                    "cgroup v2 {} ({}{}) is not used",
                    c.dir.display(),
                    if limits.is_empty() {
                        "no memory, pids, cpu or io controller".to_string()
                    } else {
                        format!("controllers {}", limits.join(", "))
                    },
                    if c.writable {
                        ", delegated"
                    } else {
                        ", not delegated"
                    }
                )
            }
        }
    ));
    out
}
