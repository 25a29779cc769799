//! Starting a command with `clone(2)`: in its own namespaces, without copying `mur`.
//!
//! `std`'s `Command` forks (copying the whole page table of a process that may hold thousands of
//! sessions) as soon as a `pre_exec` hook is set, and a command that must be PID 1 of its own
//! PID namespace would need a second fork on top. Here one `clone` with `CLONE_VM | CLONE_VFORK`
//! (what `posix_spawn` does) and the namespace flags makes the child directly: it shares `mur`'s
//! memory until it execs, so nothing is copied; it runs on a stack of its own, makes only system
//! calls on data prepared by the parent ([`ChildPlan`], argv, envp), and execs. `mur` waits for
//! it through a pidfd registered with tokio, so no SIGCHLD handler or reaper thread is involved.
//!
//! When the command is PID 1 of its namespace, the kernel kills every process it started the
//! moment it ends; killing it (a deadline, a cancel) takes the whole tree, and so does `mur`'s
//! own death (`PR_SET_PDEATHSIG`).
//!
//! `mur` also keeps the book of every command it started and has not reaped ([`Live`]): a
//! session that ends drops its commands (which kills them), but that drop happens when a
//! runtime thread next polls the aborted task, and a `mur` that exits first (Ctrl-C during a
//! tool call) would leave the command running. So the last thing `mur` does is
//! [`end_of_process`]: no command starts after it, and every command still in the book is
//! killed. Only the three standard streams pass to a command: a descriptor `mur` inherited
//! without close-on-exec (its terminal, a pipe of its own parent) is closed at exec.

use std::collections::BTreeMap;
use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;

use super::child::ChildPlan;
use super::host::Namespaces;

/// What the child's standard input is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stdin {
    /// `/dev/null`.
    Null,
    /// A pipe the caller writes.
    Piped,
}

/// A command to start: program, arguments, folder, environment, and the sandbox to apply.
pub struct Command {
    program: CString,
    argv: Vec<CString>,
    cwd: CString,
    /// `None`: inherit `mur`'s environment.
    env: Option<Vec<CString>>,
    stdin: Stdin,
    plan: Option<Arc<ChildPlan>>,
}

fn cstring(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "an argument, path or variable contains a NUL byte",
        )
    })
}

impl Command {
    /// `program` (an absolute path) run in `cwd`.
    pub fn new(program: &Path, cwd: &Path) -> io::Result<Command> {
        let program = cstring(program.as_os_str())?;
        Ok(Command {
            argv: vec![program.clone()],
            program,
            cwd: cstring(cwd.as_os_str())?,
            env: None,
            stdin: Stdin::Null,
            plan: None,
        })
    }

    /// Append arguments.
    pub fn args<I, S>(&mut self, args: I) -> io::Result<&mut Command>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        for a in args {
            self.argv.push(cstring(a.as_ref())?);
        }
        Ok(self)
    }

    /// Replace the environment with exactly these variables.
    pub fn env<'a>(
        &mut self,
        vars: impl IntoIterator<Item = (&'a OsStr, &'a OsStr)>,
    ) -> io::Result<&mut Command> {
        let mut env = Vec::new();
        for (k, v) in vars {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            env.push(cstring(OsStr::from_bytes(&kv))?);
        }
        self.env = Some(env);
        Ok(self)
    }

    /// Where standard input comes from (default `/dev/null`).
    pub fn stdin(&mut self, stdin: Stdin) -> &mut Command {
        self.stdin = stdin;
        self
    }

    /// The sandbox applied before exec.
    pub fn plan(&mut self, plan: Arc<ChildPlan>) -> &mut Command {
        self.plan = Some(plan);
        self
    }

    /// Start it. The error of a command that could not start (not found, not executable, the
    /// sandbox refused) is the child's errno.
    pub fn spawn(&self) -> io::Result<Child> {
        spawn(self)
    }
}

/// What the child reads while it sets itself up. Lives on the parent's stack: the parent is
/// suspended (`CLONE_VFORK`) until the child execs or exits.
struct Ctx<'a> {
    program: &'a CString,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    cwd: &'a CString,
    stdin: RawFd,
    stdout: RawFd,
    stderr: RawFd,
    errors: RawFd,
    plan: Option<&'a ChildPlan>,
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just opened and are ours.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((above_stdio(r)?, above_stdio(w)?))
}

/// A descriptor numbered 3 or more: when `mur` runs with a standard stream closed, a new
/// descriptor can be 0, 1 or 2, and the child's `dup2` onto those numbers would clobber it.
fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor we own; the old one closes on drop.
    let high = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if high < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just created, ours.
    Ok(unsafe { OwnedFd::from_raw_fd(high) })
}

const STACK: usize = 64 * 1024;

fn spawn(cmd: &Command) -> io::Result<Child> {
    // Counted from before the clone to the entry in the book: `end_of_process` waits for it.
    let _starting = LIVE.starting()?;
    let (out_r, out_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let (errors_r, errors_w) = pipe()?;
    let (stdin_parent, stdin_child) = match cmd.stdin {
        Stdin::Piped => {
            let (r, w) = pipe()?;
            (Some(w), r)
        }
        Stdin::Null => {
            // SAFETY: opening /dev/null with a static path.
            let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: just opened, ours.
            (None, above_stdio(unsafe { OwnedFd::from_raw_fd(fd) })?)
        }
    };
    let mut argv: Vec<*const libc::c_char> = cmd.argv.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let envp: Option<Vec<*const libc::c_char>> = cmd.env.as_ref().map(|env| {
        let mut v: Vec<*const libc::c_char> = env.iter().map(|e| e.as_ptr()).collect();
        v.push(std::ptr::null());
        v
    });
    let plan = cmd.plan.as_deref();
    let ctx = Ctx {
        program: &cmd.program,
        argv: argv.as_ptr(),
        envp: match &envp {
            Some(v) => v.as_ptr(),
            // SAFETY: reading the process's environment pointer.
            None => unsafe { environ_ptr() },
        },
        cwd: &cmd.cwd,
        stdin: stdin_child.as_raw_fd(),
        stdout: out_w.as_raw_fd(),
        stderr: err_w.as_raw_fd(),
        errors: errors_w.as_raw_fd(),
        plan,
    };
    // Without a PID namespace of its own, the process group is what bounds the tree.
    let group = plan.is_none_or(|p| p.namespaces == Namespaces::None);
    let extra = plan.map_or(0, |p| ns_flags(p.namespaces, p.private_net));
    // SAFETY: the child only reads `ctx` (alive: we are suspended until it execs or exits) and
    // makes system calls.
    let (pid, pidfd) =
        unsafe { clone_vfork(extra, child_main, &ctx as *const Ctx as *mut libc::c_void)? };
    drop((out_w, err_w, errors_w, stdin_child));
    // The child has exec'd (the pipe closed on exec: nothing to read) or failed (its errno).
    let mut errno = [0u8; 4];
    // SAFETY: reading into a 4-byte buffer.
    let n = unsafe { libc::read(errors_r.as_raw_fd(), errno.as_mut_ptr().cast(), 4) };
    if n == 4 {
        reap_blocking(&pidfd);
        return Err(io::Error::from_raw_os_error(i32::from_ne_bytes(errno)));
    }
    // From here on a failure must not leave the command running.
    let streams = (|| {
        Ok::<_, io::Error>((
            stdin_parent.map(pipe::Sender::from_owned_fd).transpose()?,
            pipe::Receiver::from_owned_fd(out_r)?,
            pipe::Receiver::from_owned_fd(err_r)?,
        ))
    })();
    let (stdin, stdout, stderr) =
        match streams.and_then(|s| LIVE.add(pid, &pidfd, group).map(|_| s)) {
            Ok(s) => s,
            Err(e) => {
                abandon(pid, &pidfd, group);
                return Err(e);
            }
        };
    // SAFETY: the AsyncFd owns the pidfd for its whole life.
    let pidfd =
        match unsafe { AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE) } {
            Ok(fd) => fd,
            Err(e) => {
                let (fd, e) = e.into_parts();
                LIVE.remove(pid);
                abandon(pid, &fd, group);
                return Err(e);
            }
        };
    Ok(Child {
        pid,
        pidfd: Some(pidfd),
        stdin,
        stdout: Some(stdout),
        stderr: Some(stderr),
        group,
    })
}

/// Kill a started command: through its pidfd (never a recycled pid), and its process group
/// too when it has no PID namespace of its own to take its tree with it.
fn kill_tree(pid: libc::pid_t, pidfd: &OwnedFd, group: bool) {
    if group {
        // SAFETY: signals only.
        unsafe {
            libc::killpg(pid, libc::SIGKILL);
        }
    }
    pidfd_kill(pidfd);
}

/// Kill and reap a command whose start failed after its clone.
fn abandon(pid: libc::pid_t, pidfd: &OwnedFd, group: bool) {
    kill_tree(pid, pidfd, group);
    reap_blocking(pidfd);
}

unsafe fn environ_ptr() -> *const *const libc::c_char {
    extern "C" {
        static environ: *const *const libc::c_char;
    }
    environ
}

/// Runs in the child, on its own stack, sharing `mur`'s memory until exec: system calls only.
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the parent's `Ctx`, alive while we run (the parent is suspended).
    unsafe {
        let ctx = &*(arg as *const Ctx);
        let fail = |errno: i32| fail(ctx.errors, errno);
        let errno = || *libc::__errno_location();
        // Signal handlers are `mur`'s code: a signal arriving before exec must not run them.
        for sig in 1..=libc::SIGRTMAX() {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction != libc::SIG_IGN
                && old.sa_sigaction != libc::SIG_DFL
            {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &dfl, std::ptr::null_mut());
            }
        }
        if let Some(plan) = ctx.plan {
            if plan.namespaces == Namespaces::UserPid {
                if let Err(e) = super::child::write_id_maps(plan.maps) {
                    fail(e.raw_os_error().unwrap_or(libc::EPERM));
                }
            }
        }
        for (from, to) in [(ctx.stdin, 0), (ctx.stdout, 1), (ctx.stderr, 2)] {
            if libc::dup2(from, to) < 0 {
                fail(errno());
            }
        }
        // Nothing but those three reaches the command: every other descriptor (ours are
        // close-on-exec already; what `mur` inherited may not be) closes at exec.
        close_on_exec_above_stdio();
        // Its own process group: what bounds the tree where there is no PID namespace.
        if libc::setpgid(0, 0) != 0 {
            fail(errno());
        }
        if libc::chdir(ctx.cwd.as_ptr()) != 0 {
            fail(errno());
        }
        if let Some(plan) = ctx.plan {
            if let Err(e) = plan.restrict() {
                fail(e.raw_os_error().unwrap_or(libc::EPERM));
            }
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        libc::execve(ctx.program.as_ptr(), ctx.argv, ctx.envp);
        fail(errno())
    }
}

/// Mark every descriptor from 3 up close-on-exec. One `close_range` (Linux 5.11); on an older
/// kernel, one `fcntl` per descriptor below the soft open-file limit (at most 65,536).
///
/// # Safety
/// Only in the child of [`spawn`], before exec.
unsafe fn close_on_exec_above_stdio() {
    let flags = libc::CLOSE_RANGE_CLOEXEC;
    if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, flags) == 0 {
        return;
    }
    let mut lim: libc::rlimit = std::mem::zeroed();
    let top = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
        lim.rlim_cur.min(65_536) as libc::c_int
    } else {
        1024
    };
    for fd in 3..top {
        let current = libc::fcntl(fd, libc::F_GETFD);
        if current >= 0 && current & libc::FD_CLOEXEC == 0 {
            libc::fcntl(fd, libc::F_SETFD, current | libc::FD_CLOEXEC);
        }
    }
}

/// Report `errno` to the parent through the error pipe and exit.
unsafe fn fail(errors: RawFd, errno: i32) -> ! {
    let bytes = errno.to_ne_bytes();
    libc::write(errors, bytes.as_ptr().cast(), 4);
    libc::_exit(127)
}

/// The clone flags of a command's namespaces.
fn ns_flags(namespaces: Namespaces, private_net: bool) -> libc::c_int {
    let ns = match namespaces {
        Namespaces::UserPid => libc::CLONE_NEWUSER | libc::CLONE_NEWPID,
        Namespaces::Pid => libc::CLONE_NEWPID,
        Namespaces::None => 0,
    };
    ns | if private_net { libc::CLONE_NEWNET } else { 0 }
}

/// `clone(CLONE_VM | CLONE_VFORK | CLONE_PIDFD | extra)` running `main(arg)` on a stack of its
/// own, with every signal blocked around it (no handler of `mur` may run on the child's stack).
/// Returns when the child has exec'd or exited: its pid and pidfd.
///
/// # Safety
/// `main` may only make system calls on data `arg` points to, which must stay alive.
unsafe fn clone_vfork(
    extra: libc::c_int,
    main: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    arg: *mut libc::c_void,
) -> io::Result<(libc::pid_t, OwnedFd)> {
    let mut stack = vec![0u8; STACK];
    let top = ((stack.as_mut_ptr().add(STACK) as usize) & !15) as *mut libc::c_void;
    let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD | extra;
    let mut pidfd: libc::c_int = -1;
    let mut all: libc::sigset_t = std::mem::zeroed();
    let mut old: libc::sigset_t = std::mem::zeroed();
    libc::sigfillset(&mut all);
    libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    let pid = libc::clone(main, top, flags, arg, &mut pidfd as *mut libc::c_int);
    let err = io::Error::last_os_error();
    libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    drop(stack);
    if pid < 0 {
        return Err(err);
    }
    Ok((pid, OwnedFd::from_raw_fd(pidfd)))
}

/// Wait for a child that has exited or is being killed; how it ended.
fn reap_blocking(pidfd: &OwnedFd) -> Option<libc::siginfo_t> {
    // SAFETY: waitid on our own pidfd with a zeroed siginfo.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        loop {
            let rc = libc::waitid(
                libc::P_PIDFD,
                pidfd.as_raw_fd() as libc::id_t,
                &mut info,
                libc::WEXITED,
            );
            if rc == 0 {
                return Some(info);
            }
            if *libc::__errno_location() != libc::EINTR {
                return None;
            }
        }
    }
}

/// A started command. Dropped before it was waited for, it is killed (with its process group,
/// and with its PID namespace every process it started) and reaped in the background.
pub struct Child {
    pid: libc::pid_t,
    pidfd: Option<AsyncFd<OwnedFd>>,
    /// Its standard input, when piped.
    pub stdin: Option<pipe::Sender>,
    /// Its standard output.
    pub stdout: Option<pipe::Receiver>,
    /// Its standard error.
    pub stderr: Option<pipe::Receiver>,
    group: bool,
}

impl Child {
    /// The child's pid (as `mur` sees it).
    pub fn id(&self) -> u32 {
        self.pid as u32
    }

    /// Wait for it to end: its exit code, or `None` when a signal ended it.
    pub async fn wait(&mut self) -> io::Result<Option<i32>> {
        let Some(fd) = &self.pidfd else {
            return Err(io::Error::other("the command was already waited for"));
        };
        loop {
            let mut guard = fd.readable().await?;
            // SAFETY: waitid with WNOHANG on our own pidfd and a zeroed siginfo.
            let (rc, info) = unsafe {
                let mut info: libc::siginfo_t = std::mem::zeroed();
                let rc = libc::waitid(
                    libc::P_PIDFD,
                    fd.get_ref().as_raw_fd() as libc::id_t,
                    &mut info,
                    libc::WEXITED | libc::WNOHANG,
                );
                (rc, info)
            };
            if rc < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            // SAFETY: si_pid/si_status are valid for a SIGCHLD siginfo from waitid.
            let (pid, code, status) = unsafe { (info.si_pid(), info.si_code, info.si_status()) };
            if pid == 0 {
                guard.clear_ready();
                continue;
            }
            self.pidfd = None;
            LIVE.remove(self.pid);
            return Ok((code == libc::CLD_EXITED).then_some(status));
        }
    }
}

/// SIGKILL through a pidfd (never a recycled pid).
fn pidfd_kill(fd: &OwnedFd) {
    // SAFETY: a signal through our own pidfd.
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0u32,
        );
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let Some(fd) = self.pidfd.take() else {
            // Reaped already; its process group may still hold processes.
            if self.group {
                // SAFETY: signals only.
                unsafe {
                    libc::killpg(self.pid, libc::SIGKILL);
                }
            }
            return;
        };
        LIVE.remove(self.pid);
        let fd = fd.into_inner();
        kill_tree(self.pid, &fd, self.group);
        // Reap it off the runtime threads: SIGKILL is prompt, but not instant.
        match tokio::runtime::Handle::try_current() {
            Ok(h) => {
                h.spawn_blocking(move || {
                    reap_blocking(&fd);
                });
            }
            Err(_) => {
                reap_blocking(&fd);
            }
        }
    }
}

/// The book of commands this process started and has not reaped (see the module docs).
pub struct Live {
    state: Mutex<LiveState>,
    /// Told when a start in progress is booked (or failed).
    settled: Condvar,
}

struct LiveState {
    /// `end_of_process` ran: nothing starts any more.
    closed: bool,
    /// Starts between their first step and their entry in the book.
    starting: usize,
    /// pid → its own pidfd (a copy, to kill it even once its `Child` is gone) and whether its
    /// process group is to be killed too.
    started: BTreeMap<libc::pid_t, (OwnedFd, bool)>,
}

/// A start in progress, counted in [`Live`] until dropped.
pub struct Starting<'a>(&'a Live);

impl Drop for Starting<'_> {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.starting -= 1;
        if state.starting == 0 {
            self.0.settled.notify_all();
        }
    }
}

/// How long [`Live::end`] waits for starts in progress (each waits only for its command's exec).
const START_GRACE: Duration = Duration::from_secs(2);

impl Live {
    /// An empty book.
    pub const fn new() -> Live {
        Live {
            state: Mutex::new(LiveState {
                closed: false,
                starting: 0,
                started: BTreeMap::new(),
            }),
            settled: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, LiveState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Count a start in progress; refused once the book is closed.
    pub fn starting(&self) -> io::Result<Starting<'_>> {
        let mut state = self.lock();
        if state.closed {
            return Err(io::Error::other(
                "mur is exiting: no command starts any more",
            ));
        }
        state.starting += 1;
        Ok(Starting(self))
    }

    /// Book a started command; refused (the caller kills it) once the book is closed.
    pub fn add(&self, pid: libc::pid_t, pidfd: &OwnedFd, group: bool) -> io::Result<()> {
        let copy = pidfd.try_clone()?;
        let mut state = self.lock();
        if state.closed {
            return Err(io::Error::other("mur is exiting: the command was killed"));
        }
        state.started.insert(pid, (copy, group));
        Ok(())
    }

    /// Take a reaped (or killed and being reaped) command out of the book.
    pub fn remove(&self, pid: libc::pid_t) {
        self.lock().started.remove(&pid);
    }

    /// Close the book and kill every command in it, once the starts in progress are booked;
    /// answers how many were killed.
    pub fn end(&self) -> usize {
        let mut state = self.lock();
        state.closed = true;
        let deadline = std::time::Instant::now() + START_GRACE;
        while state.starting > 0 {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            state = self
                .settled
                .wait_timeout(state, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        let started = std::mem::take(&mut state.started);
        drop(state);
        for (pid, (fd, group)) in &started {
            kill_tree(*pid, fd, *group);
        }
        started.len()
    }
}

impl Default for Live {
    fn default() -> Self {
        Live::new()
    }
}

/// The process's book.
static LIVE: Live = Live::new();

/// The last step of a `mur` process that started commands: none starts after it, and every
/// one still running (a tool call whose session ended while its task was not yet dropped) is
/// killed, with its PID namespace or process group. Answers how many were.
pub fn end_of_process() -> usize {
    LIVE.end()
}

/// Whether `clone` with these namespace flags works here, the way [`Command::spawn`] uses it:
/// the child enters them, writes its id maps when it has a user namespace, and exits.
pub fn probe(namespaces: Namespaces, private_net: bool, maps: &super::child::IdMaps) -> bool {
    struct Probe<'a> {
        user: bool,
        maps: &'a super::child::IdMaps,
    }
    extern "C" fn probe_main(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `arg` is the parent's `Probe`, alive while we run (the parent is suspended).
        unsafe {
            let p = &*(arg as *const Probe);
            if p.user && super::child::write_id_maps(p.maps).is_err() {
                libc::_exit(1);
            }
            libc::_exit(0)
        }
    }
    let p = Probe {
        user: namespaces == Namespaces::UserPid,
        maps,
    };
    // SAFETY: the child runs only `probe_main` and exits.
    let spawned = unsafe {
        clone_vfork(
            ns_flags(namespaces, private_net),
            probe_main,
            &p as *const Probe as *mut libc::c_void,
        )
    };
    let Ok((_, pidfd)) = spawned else {
        return false;
    };
    // SAFETY: si_status is valid for a SIGCHLD siginfo from waitid.
    reap_blocking(&pidfd)
        .is_some_and(|info| info.si_code == libc::CLD_EXITED && unsafe { info.si_status() } == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Wait (blocking) for the process behind `pidfd` to end: whether a signal killed it.
    fn killed(pidfd: &OwnedFd) -> bool {
        reap_blocking(pidfd).is_some_and(|info| info.si_code == libc::CLD_KILLED)
    }

    #[tokio::test]
    async fn the_end_of_the_process_kills_what_was_never_dropped_and_starts_nothing() {
        let live = Live::new();
        let sleep = Path::new("/bin/sleep");
        let mut cmd = Command::new(sleep, Path::new("/")).unwrap();
        cmd.args(["30"]).unwrap();
        let child = cmd.spawn().unwrap();
        let pid = child.pid;
        // A copy to watch it by; the child itself is booked here as `spawn` books it there.
        let own = child.pidfd.as_ref().unwrap().get_ref().try_clone().unwrap();
        live.add(pid, &own, true).unwrap();
        // Its session's task was never dropped: nothing else would kill it.
        std::mem::forget(child);
        assert_eq!(live.end(), 1);
        assert!(killed(&own), "the command was not killed");
        LIVE.remove(pid);
        // A closed book starts nothing and books nothing.
        assert!(live.starting().is_err());
        assert!(live.add(pid, &own, false).is_err());
    }

    #[test]
    fn the_end_waits_for_a_start_in_progress() {
        let live = std::sync::Arc::new(Live::new());
        let starting = live.starting().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let ending = {
            let live = live.clone();
            std::thread::spawn(move || {
                let n = live.end();
                tx.send(n).unwrap();
            })
        };
        // The end waits for the start to be booked; this one fails instead (its drop).
        assert!(rx.recv_timeout(Duration::from_millis(50)).is_err());
        drop(starting);
        assert_eq!(rx.recv().unwrap(), 0);
        ending.join().unwrap();
    }
}
