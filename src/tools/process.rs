//! Process-group hygiene for tool subprocesses.
//!
//! Tools run in their own process group so that everything they start (a `bash -c` pipeline, a
//! test runner's workers) can be killed together when the call is canceled or times out.

/// Kills a process group with SIGKILL when dropped.
pub struct GroupGuard(pub Option<i32>);

impl GroupGuard {
    /// Guard the group led by the child with this pid.
    pub fn new(pid: Option<u32>) -> Self {
        GroupGuard(pid.map(|p| p as i32))
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.0 {
            // SAFETY: killpg only sends a signal; a stale pgid at worst returns ESRCH.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
    }
}
