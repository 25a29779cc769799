//! The part of containment that runs in the child, between `fork` and `exec`.
//!
//! Everything here is prepared in the parent ([`ChildPlan`]): the Landlock ruleset is already a
//! file descriptor, the seccomp programs are compiled, the uid/gid maps are formatted. The child
//! ([`super::spawn`]) only makes system calls on that data, allocating nothing: it shares the
//! memory of a multithreaded process, where another thread may hold the allocator's lock.
//!
//! The order matters. The namespaces come with the `clone` itself (the command is PID 1 of its
//! own PID namespace, so the kernel kills every process it starts, daemons included, when it
//! ends), then the uid/gid maps, then [`ChildPlan::restrict`]: rlimits, `no_new_privs`,
//! Landlock, and seccomp last (it forbids the namespace calls the sandbox itself made).

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
    /// Maps for this process's effective ids, formatted once.
    pub fn current() -> &'static IdMaps {
        static MAPS: std::sync::OnceLock<IdMaps> = std::sync::OnceLock::new();
        MAPS.get_or_init(|| {
            // SAFETY: geteuid/getegid cannot fail.
            let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
            IdMaps {
                uid_map: CString::new(format!("{uid} {uid} 1\n")).expect("no NUL"),
                gid_map: CString::new(format!("{gid} {gid} 1\n")).expect("no NUL"),
            }
        })
    }
}

/// Everything the child does before exec, prepared by the parent.
pub struct ChildPlan {
    /// What bounds the process tree.
    pub namespaces: Namespaces,
    /// A network namespace of its own (no interface but a down loopback).
    pub private_net: bool,
    /// The maps written when a user namespace is entered.
    pub maps: &'static IdMaps,
    /// `(resource, limit)` pairs applied with `setrlimit` (soft and hard).
    pub rlimits: Vec<(rustix::process::Resource, u64)>,
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
    /// Run in the child, after its namespaces exist and before exec: die with `mur`, rlimits,
    /// `no_new_privs`, Landlock, seccomp (last: it forbids what came before).
    ///
    /// # Safety
    /// Only in the child of [`super::spawn`], before exec: it makes system calls only.
    pub unsafe fn restrict(&self) -> std::io::Result<()> {
        use rustix::process::{getrlimit, set_parent_process_death_signal, setrlimit, Rlimit};
        let os = |e: rustix::io::Errno| std::io::Error::from_raw_os_error(e.raw_os_error());
        // If `mur` dies, so does the command, and with a PID namespace every process it started.
        set_parent_process_death_signal(Some(rustix::process::Signal::KILL)).map_err(os)?;
        for &(resource, limit) in &self.rlimits {
            let hard = getrlimit(resource).maximum;
            let limit = hard.map_or(limit, |h| limit.min(h));
            let lim = Rlimit {
                current: Some(limit),
                maximum: Some(limit),
            };
            setrlimit(resource, lim).map_err(os)?;
        }
        rustix::thread::set_no_new_privs(true).map_err(os)?;
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

/// Write the uid/gid maps of a user namespace the calling process was just created in.
///
/// # Safety
/// Only in a fresh child, before exec.
pub unsafe fn write_id_maps(maps: &IdMaps) -> std::io::Result<()> {
    write_proc(c"/proc/self/setgroups", b"deny")?;
    write_proc(c"/proc/self/uid_map", maps.uid_map.as_bytes())?;
    write_proc(c"/proc/self/gid_map", maps.gid_map.as_bytes())
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
