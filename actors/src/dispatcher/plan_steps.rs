//! [`PlanSteps`]: how a session answers the steps of a `submit-plan` call.
//!
//! Tool and shell steps route through the same [`ToolTable`] as a direct call (precedence,
//! grants, required fields, executors); capsule steps start a child through the same delegation
//! path as `delegate-task`, but wait for its outcome, and write the same `delegation_start` /
//! `delegation` lines (outcome `completed` or `timed_out`, as upstream records a waited call).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::delegation::{OutcomeStatus, MAX_ANSWER_BYTES};
use crate::dispatcher::{missing_required, DelegateCtx, Route, ToolTable};
use crate::plan::{StepOutcome, StepRunner};
use crate::text::truncate;
use crate::tool::{ExecRequest, ExecStatus};
use crate::trace::events::{self, DelegationEnd, DelegationStart};
use crate::trace::{TraceEvent, TraceLog};

/// The session side of a running plan.
pub struct PlanSteps {
    /// Where tool and shell steps route.
    pub table: Arc<ToolTable>,
    /// How capsule steps start children.
    pub delegation: DelegateCtx,
    /// The session's trace.
    pub trace: TraceLog,
    /// The session's `session_start` id (delegation lines hang off it).
    pub session_event: String,
}

impl PlanSteps {
    fn emit(&self, e: TraceEvent) {
        self.trace.append(e);
    }

    fn delegation_line(
        &self,
        step: &StepLine<'_>,
        duration_ms: u64,
        outcome: &str,
        reason: Option<&str>,
    ) {
        self.emit(events::delegation(
            &self.session_event,
            &DelegationEnd {
                capsule: step.capsule,
                version: step.version,
                delegation_id: step.ids.0,
                child_session_id: step.ids.1,
                duration_ms,
                outcome,
                reason,
                usage: None,
                node: step.node,
            },
        ));
    }
}

/// What every `delegation` line of one capsule step repeats.
struct StepLine<'a> {
    capsule: &'a str,
    version: &'a str,
    /// The delegation and child session ids, once it started.
    ids: (Option<&'a str>, Option<&'a str>),
    /// The node it ran on, when it ran on one.
    node: Option<&'a str>,
}

#[async_trait]
impl StepRunner for PlanSteps {
    async fn run_tool(&self, tool: &str, input: Value) -> StepOutcome {
        let (decl, _kind) = match self.table.route(tool) {
            Route::Exec(decl, kind) => (decl, kind),
            Route::Refuse(error) => return StepOutcome::Failed { error },
            Route::Runtime(name) => {
                return StepOutcome::Failed {
                    error: format!("'{}' is not callable from inside a plan", name.name()),
                }
            }
        };
        if let Some(error) = missing_required(&decl, &input) {
            return StepOutcome::Failed { error };
        }
        let paths = self.table.paths();
        let request = ExecRequest {
            session_id: self.delegation.session_id().to_string(),
            trace: crate::dispatcher::ToolTable::sink(&self.trace, &self.session_event),
            tool: decl.clone(),
            input,
            workdir: paths.workdir.clone(),
            records_dir: paths.records_dir.clone(),
        };
        match self.table.executor(&decl).execute(request).await {
            Ok(out) if out.status == ExecStatus::Passed => {
                StepOutcome::Success { output: out.text }
            }
            Ok(out) if out.text.is_empty() => StepOutcome::Failed {
                error: "tool step failed".into(),
            },
            Ok(out) => StepOutcome::Failed { error: out.text },
            Err(e) => StepOutcome::Failed { error: e.message },
        }
    }

    async fn run_shell(&self, argv: Vec<String>) -> StepOutcome {
        let binary = argv.first().cloned().unwrap_or_default();
        if !self.table.grants().shell_allow.contains(&binary) {
            return StepOutcome::Failed {
                error: format!("binary '{binary}' is not in capabilities.shell.allow"),
            };
        }
        let shell = crate::provided::shell_tool(&binary);
        let paths = self.table.paths();
        let run = self
            .table
            .executor(&shell)
            .run_argv(argv, paths.workdir.clone(), paths.records_dir.clone())
            .await;
        match run {
            Ok(r) if r.exit_code == 0 => StepOutcome::Success { output: r.stdout },
            Ok(r) if r.stderr.trim().is_empty() => StepOutcome::Failed {
                error: format!("exit code {}", r.exit_code),
            },
            Ok(r) => StepOutcome::Failed { error: r.stderr },
            Err(e) => StepOutcome::Failed { error: e.message },
        }
    }

    async fn run_capsule(&self, capsule: &str, version: &str, task: &str) -> StepOutcome {
        let Some(full) = self.delegation.full_name(capsule).map(str::to_string) else {
            return StepOutcome::Failed {
                error: format!("capsule '{capsule}' is not in capabilities.spawn.allow"),
            };
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let started_at = std::time::Instant::now();
        let started = match self.delegation.start(&full, version, task, Some(tx)).await {
            Ok(s) => s,
            Err(refusal) => {
                let reason = refusal.message;
                let line = StepLine {
                    capsule: &full,
                    version,
                    ids: (None, None),
                    node: None,
                };
                self.delegation_line(&line, 0, "refused", Some(&reason));
                return StepOutcome::Failed { error: reason };
            }
        };
        self.emit(events::delegation_start(
            &self.session_event,
            &DelegationStart {
                delegation_id: &started.delegation_id,
                capsule: &full,
                version,
                child_session_id: &started.session_id,
                child_workdir: &started.workdir,
                child_records_dir: &started.records_dir,
                node: started.node.as_deref(),
            },
        ));
        let line = StepLine {
            capsule: &full,
            version,
            ids: (
                Some(started.delegation_id.as_str()),
                Some(started.session_id.as_str()),
            ),
            node: started.node.as_deref(),
        };
        let deadline = self.delegation.deadline();
        let elapsed = || started_at.elapsed().as_millis() as u64;
        match tokio::time::timeout(deadline, rx).await {
            Ok(Ok(o)) if o.status == OutcomeStatus::Ok => {
                self.delegation_line(&line, elapsed(), "completed", None);
                StepOutcome::Success {
                    output: truncate(&o.answer, MAX_ANSWER_BYTES),
                }
            }
            Ok(Ok(o)) => {
                let reason = o
                    .detail
                    .unwrap_or_else(|| format!("the sub-capsule ended {}", o.status.as_str()));
                self.delegation_line(&line, elapsed(), "failed", Some(&reason));
                StepOutcome::Failed { error: reason }
            }
            Ok(Err(_)) => {
                self.delegation.forget(&started.session_id);
                let reason = "the sub-capsule crashed before it reported".to_string();
                self.delegation_line(&line, elapsed(), "failed", Some(&reason));
                StepOutcome::Failed { error: reason }
            }
            Err(_) => {
                let _ = started
                    .child
                    .send_message(crate::session::SessionMsg::Cancel {
                        reason: "the plan step's deadline passed".into(),
                    });
                let reason = format!(
                    "the sub-capsule was still running after {} s (lifecycle.delegation_deadline_secs) and was ended",
                    deadline.as_secs_f64()
                );
                self.delegation_line(&line, elapsed(), "timed_out", Some(&reason));
                StepOutcome::Failed { error: reason }
            }
        }
    }

    fn trace(&self, event: TraceEvent) {
        self.emit(event);
    }
}
