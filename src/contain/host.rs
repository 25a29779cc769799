//! What this host's kernel can enforce, probed once per process.
//!
//! Containment is decided per session from one reading of the host: the Landlock ABI (which
//! file, network and scope rules exist), whether a command can get its own user and PID
//! namespaces (so its whole process tree dies with it), and whether seccomp filters load. The
//! namespace probe clones a short-lived child per namespace set it tries, the way commands
//! start, and is cached: sessions pay nothing for it.
//!
//! Landlock and seccomp are one system call each and decide a session's level. The clone probes
//! cost far more (the kernel makes a user and a PID namespace: 0.3 ms idle, and on a VM the
//! wake-up of the thread waiting for the child can add a millisecond), and below `sealed` they
//! change nothing a session decides, only how its commands start. So a session that cannot be
//! `sealed` decides on [`host_basic`], and its commands read [`namespaces`] when the first one
//! starts (`mur run` probes beforehand, off the start's path, for a capsule that may run
//! commands). Whether a command can also get its own network namespace is probed only when a
//! session may be `sealed` (or `mur doctor` asks).

use std::sync::OnceLock;

/// The Landlock ABI that enforces TCP connect/bind rules.
pub const LANDLOCK_NET_ABI: i32 = 4;
/// The Landlock ABI that scopes signals and abstract UNIX sockets to the sandbox.
pub const LANDLOCK_SCOPE_ABI: i32 = 6;

/// How a command's process tree is bounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Namespaces {
    /// Its own user and PID namespaces: the kernel kills every process of the tree when the
    /// command's first process ends.
    UserPid,
    /// Its own PID namespace only (we hold CAP_SYS_ADMIN but cannot create a user namespace).
    Pid,
    /// Neither: the command's process group is killed; a process that leaves the group
    /// (`setsid`) can outlive the call.
    None,
}

/// The host's enforcement primitives.
#[derive(Clone, Debug)]
pub struct Host {
    /// Landlock ABI version (0 when the kernel has no Landlock or it is disabled).
    pub landlock_abi: i32,
    /// What bounds a command's process tree; `None` in a reading that did not probe it
    /// ([`host_basic`]): commands then read [`namespaces`] when they start.
    pub namespaces: Option<Namespaces>,
    /// A seccomp filter can be loaded.
    pub seccomp: bool,
    /// A command can get its own network namespace (used by `sealed` when no network is
    /// granted).
    pub net_namespace: bool,
}

/// This process's cgroup v2, as the host offers it: its folder, whether `mur` may create
/// cgroups below it, and its controllers. `mur` applies no cgroup limit (the resources are
/// rlimits); only `mur doctor` reads this, so no run pays for it.
#[derive(Clone, Debug)]
pub struct Cgroup {
    /// The cgroup's folder under the cgroup2 mount.
    pub dir: std::path::PathBuf,
    /// `mur` may create cgroups below it.
    pub writable: bool,
    /// Its `cgroup.controllers`.
    pub controllers: Vec<String>,
}

impl Host {
    /// Landlock restricts files and TCP (ABI 4 or later): what `scoped` needs.
    pub fn can_scope(&self) -> bool {
        self.landlock_abi >= LANDLOCK_NET_ABI && self.seccomp
    }

    /// What `sealed` needs beyond `scoped`: signal scoping, and namespaces that bound the
    /// process tree and can cut the network off.
    pub fn can_seal(&self) -> bool {
        self.can_scope()
            && self.landlock_abi >= LANDLOCK_SCOPE_ABI
            && self.namespaces.is_some_and(|n| n != Namespaces::None)
            && self.net_namespace
    }

    /// What keeps this host from `scoped`, as a phrase (`None` when nothing does).
    pub fn scoped_missing(&self) -> Option<String> {
        if self.landlock_abi == 0 {
            Some("Landlock is not available in this kernel (Linux 6.7 or later with landlock in the lsm= list)".into())
        } else if self.landlock_abi < LANDLOCK_NET_ABI {
            Some(format!(
                "Landlock ABI {} cannot restrict TCP (ABI {LANDLOCK_NET_ABI}, Linux 6.7, is needed)",
                self.landlock_abi
            ))
        } else if !self.seccomp {
            Some("seccomp filters cannot be loaded on this host".into())
        } else {
            None
        }
    }

    /// What keeps this host from `sealed`, as a phrase.
    pub fn sealed_missing(&self) -> Option<String> {
        if let Some(m) = self.scoped_missing() {
            return Some(m);
        }
        if self.landlock_abi < LANDLOCK_SCOPE_ABI {
            Some(format!(
                "Landlock ABI {} cannot scope signals (ABI {LANDLOCK_SCOPE_ABI}, Linux 6.12, is needed)",
                self.landlock_abi
            ))
        } else if self.namespaces.unwrap_or_else(namespaces) == Namespaces::None {
            Some("commands cannot get their own PID namespace (unprivileged user namespaces are disabled)".into())
        } else if !self.net_namespace {
            Some("commands cannot get their own network namespace".into())
        } else {
            None
        }
    }
}

/// The host, probed on first use, whether a command can get its own network namespace
/// included (what `sealed` and `mur doctor` need).
pub fn host() -> &'static Host {
    static HOST: OnceLock<Host> = OnceLock::new();
    HOST.get_or_init(|| {
        let base = host_basic();
        let ns = namespaces();
        let maps = super::child::IdMaps::current();
        let net_namespace = ns != Namespaces::None && super::spawn::probe(ns, true, maps);
        Host {
            namespaces: Some(ns),
            net_namespace,
            ..base.clone()
        }
    })
}

/// The host as a session that cannot be `sealed` decides on: the Landlock ABI and seccomp, one
/// system call each. Neither clone probe runs (`namespaces` is `None`, `net_namespace` false).
pub fn host_basic() -> &'static Host {
    static BASE: OnceLock<Host> = OnceLock::new();
    BASE.get_or_init(|| Host {
        landlock_abi: landlock_abi(),
        namespaces: None,
        seccomp: seccomp_available(),
        net_namespace: false,
    })
}

/// What bounds a command's process tree on this host, probed on first use: what a command
/// whose session did not read it at launch starts with.
pub fn namespaces() -> Namespaces {
    static NAMESPACES: OnceLock<Namespaces> = OnceLock::new();
    *NAMESPACES.get_or_init(|| {
        let ns = probe_namespaces();
        if ns == Namespaces::None {
            tracing::debug!(
                "commands run without their own PID namespace: daemons can outlive a call"
            );
        }
        ns
    })
}

/// Get a run ready for its commands on a thread of its own, beside the run's start: probe
/// [`namespaces`], so that the first command does not wait for it, then remove the scratch
/// folders of killed runs ([`super::sweep_stale_scratch`]). `mur run` calls this for a capsule
/// that may run commands (one that cannot pays for neither); `mur node`, `replay` and `resume`
/// at their start. [`after_commands`] waits for it.
pub fn before_commands() {
    let spawned = std::thread::Builder::new()
        .name("mur-probe".into())
        .spawn(|| {
            namespaces();
            super::sweep_stale_scratch();
        });
    if let Ok(thread) = spawned {
        *PREPARING.lock().unwrap_or_else(|p| p.into_inner()) = Some(thread);
    }
}

/// Wait for [`before_commands`]'s thread, if it is still at work (a run whose commands never
/// started may end first): a clean-up cut short by the process's exit would leave part of a
/// killed run's scratch folder for the next run.
pub fn after_commands() {
    let thread = PREPARING.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(thread) = thread {
        let _ = thread.join();
    }
}

/// [`before_commands`]'s thread, until [`after_commands`] joins it.
static PREPARING: std::sync::Mutex<Option<std::thread::JoinHandle<()>>> =
    std::sync::Mutex::new(None);

/// The cgroup2 folder of this process: the mount point (from `/proc/self/mountinfo`) joined with
/// the `0::` line of `/proc/self/cgroup`.
pub fn cgroup() -> Option<Cgroup> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = mounts.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        right
            .starts_with("cgroup2 ")
            .then(|| left.split(' ').nth(4).map(str::to_string))
            .flatten()
    })?;
    let dir = std::path::Path::new(&mount).join(rel.trim_start_matches('/'));
    let controllers = std::fs::read_to_string(dir.join("cgroup.controllers"))
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: access(2) only reads the path.
    let writable = unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0;
    Some(Cgroup {
        dir,
        writable,
        controllers,
    })
}

fn landlock_abi() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute and the VERSION flag the call only returns a number.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v < 0 {
        0
    } else {
        v as i32
    }
}

fn seccomp_available() -> bool {
    // SAFETY: reading the calling thread's seccomp mode has no side effect.
    let mode = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
    // 0: no filter yet; 2: already filtered (a nested filter still loads).
    mode == 0 || mode == 2
}

/// Try what [`super::spawn`] does: `clone` into user + PID namespaces, else a PID namespace
/// alone.
fn probe_namespaces() -> Namespaces {
    let maps = super::child::IdMaps::current();
    [Namespaces::UserPid, Namespaces::Pid]
        .into_iter()
        .find(|mode| super::spawn::probe(*mode, false, maps))
        .unwrap_or(Namespaces::None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_basic_reading_agrees_with_the_full_one_on_what_it_reads() {
        let (full, base) = (host(), host_basic());
        assert_eq!(full.namespaces, Some(namespaces()));
        assert_eq!(base.namespaces, None);
        assert_eq!(base.landlock_abi, full.landlock_abi);
        assert_eq!(base.seccomp, full.seccomp);
        assert!(!base.net_namespace);
        assert!(!base.can_seal());
        assert_eq!(base.can_scope(), full.can_scope());
    }
}
