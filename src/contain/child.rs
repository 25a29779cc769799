//! The part of containment that runs in the child, between `fork` and `exec`.
//!
//! Everything here is prepared in the parent ([`ChildPlan`]): the Landlock ruleset is already a
//! file descriptor, the seccomp programs are compiled, the uid/gid maps are formatted. The child
//! only makes system calls on that data, allocating nothing: it is a fork of a multithreaded
//! process, where another thread may have held the allocator's lock.
//!
//! The order matters. Namespaces first (a user namespace must be entered while nothing else
//! restricts us); then the fork that makes the command PID 1 of its own PID namespace, so the
//! kernel kills every process the command starts (daemons included) when it ends; the
//! intermediate process stays outside and relays the exit status. Then rlimits,
//! `no_new_privs`, Landlock, and seccomp last (it forbids the namespace calls made above).

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use super::host::Namespaces;

/// The uid/gid maps a command's user namespace gets: its own ids, mapped to themselves.
#[derive(Clone, Debug)]
pub struct IdMaps {
    uid_map: CString,
    gid_map: CString,
}

impl IdMaps {
    /// Maps for the calling process's effective ids.
    pub fn current() -> IdMaps {
        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        IdMaps {
            uid_map: CString::new(format!("{uid} {uid} 1\n")).expect("no NUL"),
            gid_map: CString::new(format!("{gid} {gid} 1\n")).expect("no NUL"),
        }
    }
}

/// Everything the child does before exec, prepared by the parent.
pub struct ChildPlan {
    /// What bounds the process tree.
    pub namespaces: Namespaces,
    /// A network namespace of its own (no interface but a down loopback).
    pub private_net: bool,
    /// The maps written when a user namespace is entered.
    pub maps: IdMaps,
    /// `mur`'s pid: the relay exits at once if it was re-parented before it could watch it.
    pub runtime_pid: libc::pid_t,
    /// `(resource, limit)` pairs applied with `setrlimit` (soft and hard).
    pub rlimits: Vec<(libc::__rlimit_resource_t, libc::rlim_t)>,
    /// The Landlock ruleset to restrict to, when Landlock is enforced.
    pub ruleset: Option<Arc<OwnedFd>>,
    /// Seccomp programs, loaded in order.
    pub seccomp: Vec<&'static seccompiler::BpfProgram>,
}

/// `SECCOMP_FILTER_FLAG_SPEC_ALLOW`: loading a filter does not also turn on the Speculative
/// Store Bypass mitigation for the command. That mitigation guards secrets inside one process
/// from code running in it (a JIT sandbox); a contained command's process holds nothing but its
/// own untrusted code, and the mitigation slowed every command by ~0.3 ms.
const SECCOMP_FILTER_FLAG_SPEC_ALLOW: libc::c_ulong = 1 << 2;

/// Load one seccomp program on the calling thread.
///
/// # Safety
/// `prog` must outlive the call (the kernel copies it).
unsafe fn load_filter(prog: &seccompiler::BpfProgram) -> std::io::Result<()> {
    let fprog = libc::sock_fprog {
        len: prog.len() as libc::c_ushort,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    let rc = libc::syscall(
        libc::SYS_seccomp,
        libc::SECCOMP_SET_MODE_FILTER,
        SECCOMP_FILTER_FLAG_SPEC_ALLOW,
        &fprog as *const libc::sock_fprog,
    );
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

impl ChildPlan {
    /// Install this plan on `cmd` (run between fork and exec).
    pub fn install(self: Arc<Self>, cmd: &mut tokio::process::Command) {
        // SAFETY: `apply` only makes async-signal-safe system calls on data prepared here, and
        // allocates nothing.
        unsafe {
            cmd.pre_exec(move || self.apply());
        }
    }

    /// Run in the child: enter namespaces, become PID 1 of the new PID namespace, restrict.
    ///
    /// # Safety
    /// Only to be called in a freshly forked child, before exec.
    unsafe fn apply(&self) -> std::io::Result<()> {
        if self.namespaces != Namespaces::None {
            enter_namespaces(self.namespaces, self.private_net, &self.maps)?;
            let pid = libc::fork();
            if pid < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if pid > 0 {
                relay(pid, self.runtime_pid);
            }
            // The command: PID 1 of its namespace. It dies when the relay does (killed by the
            // runtime, or the runtime itself killed), and the kernel then kills the whole tree.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        }
        for &(resource, limit) in &self.rlimits {
            let mut cur = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::getrlimit(resource, &mut cur);
            let limit = limit.min(cur.rlim_max);
            let lim = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(resource, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if let Some(fd) = &self.ruleset {
            if libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), 0u32) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        for prog in &self.seccomp {
            load_filter(prog)?;
        }
        Ok(())
    }
}

/// Enter a new PID namespace (with a user namespace of our own ids when `mode` says so, and a
/// network namespace when `private_net`). Shared with the host probe.
///
/// # Safety
/// Only in a single-threaded (freshly forked) child.
pub unsafe fn enter_namespaces(
    mode: Namespaces,
    private_net: bool,
    maps: &IdMaps,
) -> std::io::Result<()> {
    let net = if private_net { libc::CLONE_NEWNET } else { 0 };
    match mode {
        Namespaces::None => Ok(()),
        Namespaces::Pid => {
            if libc::unshare(libc::CLONE_NEWPID | net) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        }
        Namespaces::UserPid => {
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWPID | net) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            write_proc(c"/proc/self/setgroups", b"deny")?;
            write_proc(c"/proc/self/uid_map", maps.uid_map.as_bytes())?;
            write_proc(c"/proc/self/gid_map", maps.gid_map.as_bytes())?;
            Ok(())
        }
    }
}

unsafe fn write_proc(path: &std::ffi::CStr, data: &[u8]) -> std::io::Result<()> {
    let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let n = libc::write(fd, data.as_ptr().cast(), data.len());
    libc::close(fd);
    if n != data.len() as isize {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The intermediate process: hold nothing, wait for the command, exit as it did.
unsafe fn relay(pid: libc::pid_t, runtime_pid: libc::pid_t) -> ! {
    // Close every descriptor: the command holds the pipes, and the spawn's error pipe must
    // close when the command execs.
    libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32);
    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    if libc::getppid() != runtime_pid {
        // The runtime died before we could watch it: take the command with us.
        libc::kill(pid, libc::SIGKILL);
        libc::_exit(125);
    }
    let mut status = 0;
    loop {
        let r = libc::waitpid(pid, &mut status, 0);
        if r == pid {
            break;
        }
        if r < 0 && *libc::__errno_location() != libc::EINTR {
            libc::_exit(125);
        }
    }
    if libc::WIFEXITED(status) {
        libc::_exit(libc::WEXITSTATUS(status));
    }
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        let no_core = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        libc::signal(sig, libc::SIG_DFL);
        libc::kill(libc::getpid(), sig);
        libc::_exit(128 + sig);
    }
    libc::_exit(125);
}
