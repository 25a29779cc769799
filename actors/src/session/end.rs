//! How a session's task ends: the result file, `task_end` and `session_end`, the durability
//! sync, the report, and draining children that are still winding down.

use ractor::ActorRef;

use super::{ExitStatus, Life, SessionMsg, SessionReport, SessionState};
use crate::dispatcher::DispatcherMsg;
use crate::file_lane::{self, Lane};
use crate::record_error::RecordError;
use crate::trace::events;
use crate::trace::Durability;

impl SessionState {
    /// Queue the end of the task; the actual finish runs in the handler (it awaits fsync).
    pub(super) fn finish_later(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        status: ExitStatus,
        text: String,
    ) {
        // Replacing the state drops a model call still in flight (it is aborted).
        self.life = Life::Ending { status };
        let _ = myself.send_message(SessionMsg::Finish { status, text });
    }

    pub(super) fn fail(&mut self, myself: &ActorRef<SessionMsg>, cause: &str, reason: &str) {
        self.emit(events::task_failed(
            &self.task_event,
            &self.task_id,
            self.turn,
            cause,
            reason,
        ));
        self.finish_later(myself, ExitStatus::Failed, format!("error: {reason}"));
    }

    /// Write the task's last lines and sync the trace; returns the report.
    pub(super) async fn close(&mut self, status: ExitStatus, text: String) -> SessionReport {
        // Nothing else runs for this task: a model call in flight is aborted with its state.
        self.life = Life::Ended { status };
        if let Some(d) = &self.dispatcher {
            let _ = d.send_message(DispatcherMsg::CancelAll);
        }
        self.end_children(status);
        // The result file exists before `task_end` is written.
        let out = self.spec.paths.records_dir.join("out");
        let result = text.clone();
        let mut trace_error = file_lane::run(Lane::End, move || {
            let file = out.join("result.txt");
            std::fs::create_dir_all(&out)
                .and_then(|_| std::fs::write(&file, result))
                .map_err(|e| RecordError::Write {
                    path: file,
                    cause: e.to_string(),
                })
        })
        .await
        .and_then(|r| r)
        .err();
        let duration_ms = self.started.elapsed().as_millis() as u64;
        let t = self.totals;
        self.emit(events::task_end(
            self.on_task(self.turn),
            status.as_str(),
            duration_ms,
            &t,
        ));
        self.emit(events::session_end(
            &self.session_event,
            status.as_str(),
            duration_ms,
            &t,
            self.delegated,
        ));
        // Every session's lines are written, then its records flushed in the background; the
        // root waits for its whole tree's flushes.
        if let Err(e) = self.trace.sync(Durability::Written).await {
            trace_error.get_or_insert(e);
        }
        self.record_sync.submit(self.records.clone());
        if self.spec.spawned_by.is_none() {
            if let Err(e) = self.record_sync.settle().await {
                trace_error.get_or_insert(e);
            }
        }
        SessionReport {
            session_id: self.spec.session_id.clone(),
            exit_status: status,
            result: text,
            totals: t,
            duration_ms,
            trace_error,
        }
    }

    /// End the task, report, and stop (once children still running have reported).
    pub(super) async fn finish(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        status: ExitStatus,
        text: String,
    ) {
        let report = self.close(status, text).await;
        if self.children.all_ended() {
            if let Some(sink) = self.report_to.take() {
                sink(report);
            }
            myself.stop(None);
        } else {
            // Report once the children it canceled (or its deadlines ended) have ended too (or
            // after 5 s), so whoever waits for this report finds every trace of the subtree
            // complete.
            self.life = Life::Draining {
                report: Box::new(report),
            };
            myself.send_after(std::time::Duration::from_secs(5), || SessionMsg::Drained);
        }
    }

    /// The children still running at the end have reported (or the wait ran out): wait for
    /// the flushes of what they wrote after this session's own end (the root only), report,
    /// and stop.
    pub(super) async fn drained(&mut self, myself: &ActorRef<SessionMsg>) {
        let life = std::mem::replace(
            &mut self.life,
            Life::Ending {
                status: ExitStatus::Failed,
            },
        );
        self.life = match life {
            Life::Draining { mut report } => {
                if self.spec.spawned_by.is_none() {
                    if let Err(e) = self.record_sync.settle().await {
                        report.trace_error.get_or_insert(e);
                    }
                }
                let status = report.exit_status;
                if let Some(sink) = self.report_to.take() {
                    sink(*report);
                }
                Life::Ended { status }
            }
            // A late timer: the report went out already.
            other => other,
        };
        myself.stop(None);
    }
}
