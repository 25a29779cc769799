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

/// What a program given JSON on stdin left behind.
pub struct Answered {
    /// Its stdout (capped).
    pub out: super::capture::Captured,
    /// Its stderr (capped).
    pub err: super::capture::Captured,
    /// Its exit code (`-1` when killed by a signal).
    pub code: i32,
}

/// Why a program could not answer.
pub enum NoAnswer {
    /// It could not be started.
    Start(std::io::Error),
    /// Its sandbox could not be built.
    Sandbox(String),
    /// It was still running at the deadline (its process group was killed).
    Deadline,
}

/// Run `cmd` (built by the session's [`crate::contain::Sandbox`]: contained, in its own
/// process group), write `input` to its stdin, and collect both streams (spooled to
/// `records_dir/logs/<label>-…` past the cap). The protocol of native tools and policy hooks
/// alike.
pub async fn answer_json(
    mut cmd: tokio::process::Command,
    records_dir: &std::path::Path,
    label: &str,
    input: &str,
    deadline: std::time::Duration,
) -> Result<Answered, NoAnswer> {
    use std::process::Stdio;
    use tokio::io::AsyncWriteExt;

    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(NoAnswer::Start)?;
    let _group = GroupGuard::new(child.id());
    let mut stdin = child.stdin.take().expect("piped stdin");
    let logs = records_dir.join("logs");
    let stamp = mur_actors::ids::mint("");
    let out = super::capture::capture(
        child.stdout.take().expect("piped stdout"),
        logs.join(format!("{label}-{stamp}.stdout")),
    );
    let err = super::capture::capture(
        child.stderr.take().expect("piped stderr"),
        logs.join(format!("{label}-{stamp}.stderr")),
    );
    let run = async {
        let write = async {
            let _ = stdin.write_all(input.as_bytes()).await;
            drop(stdin);
        };
        let ((), out, err, status) = tokio::join!(write, out, err, child.wait());
        Answered {
            out,
            err,
            code: status.ok().and_then(|s| s.code()).unwrap_or(-1),
        }
    };
    tokio::time::timeout(deadline, run)
        .await
        .map_err(|_| NoAnswer::Deadline)
}
