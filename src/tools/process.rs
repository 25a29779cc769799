//! Programs that speak JSON on stdin and stdout: native tools and policy hooks.
//!
//! They start through the session's sandbox ([`crate::contain::Sandbox::command`]), which puts
//! each in its own PID namespace (or at least its own process group), so that everything they
//! start dies with them when the call ends, is canceled or passes its deadline.

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
    /// It was still running at the deadline (its process group was killed).
    Deadline,
}

/// Run `cmd` (built by the session's [`crate::contain::Sandbox`]: contained, in its own
/// process group), write `input` to its stdin, and collect both streams (spooled to
/// `records_dir/logs/<label>-…` past the cap). The protocol of native tools and policy hooks
/// alike.
pub async fn answer_json(
    mut cmd: crate::contain::spawn::Command,
    records_dir: &std::path::Path,
    label: &str,
    input: &str,
    deadline: std::time::Duration,
) -> Result<Answered, NoAnswer> {
    use tokio::io::AsyncWriteExt;

    let mut child = cmd
        .stdin(crate::contain::spawn::Stdin::Piped)
        .spawn()
        .map_err(NoAnswer::Start)?;
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
            code: status.ok().flatten().unwrap_or(-1),
        }
    };
    tokio::time::timeout(deadline, run)
        .await
        .map_err(|_| NoAnswer::Deadline)
}
