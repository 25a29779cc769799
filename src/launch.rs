//! Launching a session on a fresh actor tree: the part of `mur run` after the manifest is read.
//!
//! Starts the Supervisor, opens the door, prints the startup lines of seed 001 step 4, runs the
//! root session to its end, turns Ctrl-C into a clean `canceled` ending (a second Ctrl-C exits at
//! once), and prints `status:  <exit status>`.

use std::io::Write;

use mur_actors::record_error::RecordError;
use mur_actors::session::SessionReport;
use mur_actors::spec::SessionSpec;
use mur_actors::supervisor::{Supervisor, SupervisorArgs, SupervisorMsg};
use ractor::Actor;

use crate::diagnostic::Diagnostic;

/// The `-v` lines `mur run` prints after `session:`.
#[derive(Clone, Debug, Default)]
pub struct Header {
    /// Print the verbose lines.
    pub verbose: bool,
    /// Print nothing on stdout (`--json` prints one object at the end instead).
    pub quiet: bool,
    /// `<name> v<version>`.
    pub manifest: String,
    /// `<driver artifact> (<model>)`.
    pub driver: String,
}

/// Raise the soft open-file limit to the hard limit, so thousands of sessions (one trace file
/// each) fit in one process. Failure is harmless: the default limit stays.
pub fn raise_nofile_limit() {
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    unsafe {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// Run `spec` as the root session of a new actor tree and print the `mur run` lines.
pub async fn launch(
    spec: SessionSpec,
    header: &Header,
    supervisor: SupervisorArgs,
) -> Result<SessionReport, Diagnostic> {
    raise_nofile_limit();
    let (sup, sup_handle) = Actor::spawn(None, Supervisor, supervisor)
        .await
        .map_err(|e| Diagnostic::error("E-RUN-001", format!("cannot start the runtime: {e}")))?;
    let addr = crate::door::open(sup.clone()).await.map_err(|e| {
        Diagnostic::error(
            "E-RUN-001",
            format!("cannot open the loopback listener on 127.0.0.1: {e}"),
        )
    })?;
    if !header.quiet {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "murmur: url localhost:{}", addr.port());
        let _ = writeln!(out, "session: {}", spec.session_id);
        if header.verbose {
            let _ = writeln!(out, "workdir: {}", spec.paths.workdir.display());
            let _ = writeln!(out, "manifest: {}", header.manifest);
            let _ = writeln!(out, "driver: {}", header.driver);
        }
        let _ = out.flush();
    }

    let records = spec.paths.records_dir.clone();
    // The root's folders are created here so an unwritable place is a clear error, not a
    // session that fails with nowhere to write its trace. The folders that gained the records'
    // new folders are flushed (the session's end covers its own folder's); the work folder is
    // the commands'.
    let create = |path: &std::path::Path| {
        let path = path.to_path_buf();
        move |e: std::io::Error| RecordError::Create {
            path,
            cause: e.to_string(),
        }
    };
    let made = mur_actors::durable::create_dirs(&spec.paths.records_dir)
        .map_err(create(&spec.paths.records_dir))
        .and_then(|made| mur_actors::durable::flush_made(&made));
    let workdir = std::fs::create_dir_all(&spec.paths.workdir).map_err(create(&spec.paths.workdir));
    for made in [made, workdir] {
        if let Err(e) = made {
            stop(sup, sup_handle).await;
            return Err(Diagnostic::error("E-IO-002", e.to_string()).with_hint(format!(
                "the session folder {} must be creatable and writable; pass --workdir to put it elsewhere",
                records.display()
            )));
        }
    }
    // Ctrl-C is caught from before the root starts: a handler installed only when the wait
    // below is first polled would leave a window (the session's first model call and command
    // may already run) in which Ctrl-C kills mur with no trace ending.
    let mut interrupts =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok();
    let mut interrupted = async move || match interrupts.as_mut() {
        Some(s) => {
            s.recv().await;
        }
        None => {
            let _ = tokio::signal::ctrl_c().await;
        }
    };
    let started = ractor::call!(sup, |reply| SupervisorMsg::StartRoot {
        spec: Box::new(spec),
        reply
    });
    let rx = match started {
        Ok(Ok(rx)) => rx,
        Ok(Err(e)) => {
            stop(sup, sup_handle).await;
            return Err(Diagnostic::error("E-IO-002", e).with_hint(format!(
                "the session folder {} must be creatable and writable; pass --workdir to put it elsewhere",
                records.display()
            )));
        }
        Err(e) => {
            stop(sup, sup_handle).await;
            return Err(Diagnostic::error(
                "E-RUN-001",
                format!("the runtime did not answer: {e}"),
            ));
        }
    };
    tokio::pin!(rx);
    let report = tokio::select! {
        r = &mut rx => r,
        _ = interrupted() => {
            // On a terminal the progress says what the run still waits for; piped, one line
            // says it, unless -q asked for nothing but errors.
            if !crate::progress::interrupted() && !header.quiet {
                crate::errln!("Ctrl-C: canceling the run; waiting for the session and its sub-capsules to stop and write their last trace lines (Ctrl-C again exits at once)");
            }
            let _ = sup.send_message(SupervisorMsg::Shutdown { reason: "interrupted (Ctrl-C)".into() });
            tokio::select! {
                r = &mut rx => r,
                _ = interrupted() => {
                    crate::contain::spawn::end_of_process();
                    std::process::exit(130)
                }
            }
        }
    };
    stop(sup, sup_handle).await;
    // Every line is written: the progress (if drawn) prints what is left and clears.
    crate::progress::finish();
    let report =
        report.map_err(|_| Diagnostic::error("E-RUN-001", "the session ended without a report"))?;
    if !header.quiet {
        crate::outln!("status:  {}", report.exit_status.as_str());
    }
    Ok(report)
}

/// Stop the actor tree, then wait for the trace thread to write every line the sessions
/// appended (a child canceled with its root may write its last lines after the root reported).
async fn stop(sup: ractor::ActorRef<SupervisorMsg>, handle: tokio::task::JoinHandle<()>) {
    sup.stop(None);
    let _ = handle.await;
    mur_actors::trace::written_all().await;
}
