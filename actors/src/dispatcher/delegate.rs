//! `delegate-task`: validating the call and asking the Supervisor for a child.

use ractor::ActorRef;
use serde_json::Value;
use tokio::sync::oneshot;

use crate::delegation::{
    ChildRequest, DelegationError, DelegationErrorKind, DelegationOutcome, StartedChild,
};
use crate::fence;
use crate::ids;
use crate::protocol::{CallResult, Effect};
use crate::provided::bare;
use crate::session::SessionMsg;
use crate::spec::{Grants, SessionPaths};
use crate::supervisor::SupervisorMsg;
use crate::tool::ExecStatus;

/// What a delegation needs to know about the delegating session.
#[derive(Clone)]
pub struct DelegateCtx {
    pub(super) session_id: String,
    pub(super) depth: u32,
    pub(super) supervisor: Option<ActorRef<SupervisorMsg>>,
    pub(super) session: ActorRef<SessionMsg>,
    pub(super) spawn_allow: Vec<String>,
    pub(super) parent_grants: Grants,
    pub(super) records_dir: std::path::PathBuf,
    pub(super) deadline: std::time::Duration,
}

impl DelegateCtx {
    /// The full name `spawn.allow` grants for a bare (or full) capsule name.
    pub fn full_name(&self, capsule: &str) -> Option<&str> {
        self.spawn_allow
            .iter()
            .find(|f| bare(f) == capsule || f.as_str() == capsule)
            .map(String::as_str)
    }

    /// The delegating session's id.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// How long a waiting plan step gives a child.
    pub fn deadline(&self) -> std::time::Duration {
        self.deadline
    }

    /// Ask the Supervisor for a child of this session. With `waiter`, the child's outcome goes
    /// there (a plan step waiting for it) instead of to the session.
    pub async fn start(
        &self,
        full: &str,
        version: &str,
        task: &str,
        waiter: Option<oneshot::Sender<DelegationOutcome>>,
    ) -> Result<StartedChild, DelegationError> {
        let Some(supervisor) = &self.supervisor else {
            return Err(DelegationError::new(
                DelegationErrorKind::Unavailable,
                "delegation is not available in this process",
            ));
        };
        let session_id = ids::session_id();
        let records = self.records_dir.join("children").join(&session_id);
        let request = ChildRequest {
            capsule: full.to_string(),
            version: version.to_string(),
            task: task.to_string(),
            session_id,
            delegation_id: ids::mint("dlg_"),
            parent_session_id: self.session_id.clone(),
            parent_grants: self.parent_grants.clone(),
            // The child's work folder sits inside its records folder, beside (never above) its
            // trace: its commands may write `work/`, not the records around it.
            paths: SessionPaths {
                workdir: records.join("work"),
                records_dir: records,
            },
            depth: self.depth + 1,
        };
        let answer = ractor::call!(supervisor, |reply| SupervisorMsg::SpawnChild {
            request: Box::new(request),
            parent: self.session.clone(),
            waiter,
            reply
        });
        match answer {
            Ok(r) => r,
            Err(e) => Err(DelegationError::new(
                DelegationErrorKind::NoAnswer,
                format!("the runtime did not answer: {e}"),
            )),
        }
    }

    /// Tell the Supervisor a child is gone without a report (a crash seen by a waiting step).
    pub fn forget(&self, session_id: &str) {
        if let Some(sup) = &self.supervisor {
            let _ = sup.send_message(SupervisorMsg::ChildGone {
                session_id: session_id.to_string(),
            });
        }
    }

    /// The names this session may delegate to, bare.
    pub fn bare_names(&self) -> Vec<&str> {
        self.spawn_allow.iter().map(|f| bare(f)).collect()
    }
}

fn required_str<'a>(input: &'a Value, key: &str) -> Result<&'a str, DelegationError> {
    match input.get(key).and_then(Value::as_str) {
        Some(s) if !s.trim().is_empty() => Ok(s),
        _ => Err(DelegationError::new(
            DelegationErrorKind::BadInput,
            format!("'delegate-task' requires a non-empty '{key}'"),
        )),
    }
}

/// Run one `delegate-task` call: validate, ask the Supervisor for the child, answer.
pub(super) async fn delegate(ctx: &DelegateCtx, input: &Value) -> (CallResult, Option<Effect>) {
    let asked_capsule = input.get("capsule").and_then(Value::as_str).unwrap_or("");
    let asked_version = input.get("version").and_then(Value::as_str).unwrap_or("");
    let refused = |refusal: DelegationError, capsule: String| {
        (
            CallResult::Refused {
                text: refusal.message.clone(),
            },
            Some(Effect::DelegationRefused {
                capsule,
                version: asked_version.to_string(),
                reason: refusal.message,
            }),
        )
    };
    if !input.is_object() {
        return refused(
            DelegationError::new(
                DelegationErrorKind::BadInput,
                "'delegate-task' expects a JSON object as its input",
            ),
            asked_capsule.into(),
        );
    }
    let fields = (
        required_str(input, "capsule"),
        required_str(input, "version"),
        required_str(input, "task"),
    );
    let (capsule, version, task) = match fields {
        (Ok(c), Ok(v), Ok(t)) => (c, v, t),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
            return refused(e, asked_capsule.into())
        }
    };
    let Some(full) = ctx.full_name(capsule).map(str::to_string) else {
        return refused(
            DelegationError::new(
                DelegationErrorKind::NotGranted,
                format!(
                "'{capsule}' is not in capabilities.spawn.allow; this capsule may delegate to: {}",
                ctx.bare_names().join(", ")
            ),
            ),
            capsule.into(),
        );
    };
    match ctx.start(&full, version, task, None).await {
        Ok(started) => {
            let data = serde_json::to_string(&Started {
                delegation_id: &started.delegation_id,
                session_id: &started.session_id,
                capsule: bare(&full),
                version,
                status: "started",
                child_workdir: crate::text::path_text(&started.workdir),
            })
            .unwrap_or_default();
            (
                CallResult::Ran {
                    status: ExecStatus::Passed,
                    output_bytes: data.len() as u64,
                    text: fence::fence("tool:delegate-task", &data),
                    shell: None,
                },
                Some(Effect::DelegationStarted {
                    started,
                    capsule: full,
                    version: version.to_string(),
                }),
            )
        }
        Err(reason) => refused(reason, full),
    }
}

/// `delegate-task`'s answer when the child holds its task, in this order (written straight
/// from the fields: a `json!` object built a hashed map per delegation).
#[derive(serde::Serialize)]
struct Started<'a> {
    delegation_id: &'a str,
    session_id: &'a str,
    capsule: &'a str,
    version: &'a str,
    status: &'a str,
    child_workdir: std::borrow::Cow<'a, str>,
}
