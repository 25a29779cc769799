//! Delegation: a Session handing one task to a sub-capsule, and the outcome coming back.
//!
//! `delegate-task` asks the Supervisor for a child Session, linked under the parent Session in
//! the actor tree; the tool returns as soon as the child holds its task. The child's end comes
//! back to the parent as a typed [`DelegationOutcome`] message (a background-task message, never
//! a blocking wait), also when the child crashed (a supervision event) or overran its deadline.

use std::path::PathBuf;

use async_trait::async_trait;

use crate::fence;
use crate::session::Totals;
use crate::spec::{Grants, SessionPaths, SessionSpec};

/// Bytes of a child's answer the parent's model reads; the rest stays in the child's file.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// What the Supervisor asks the resolver for: a child spec.
#[derive(Clone, Debug)]
pub struct ChildRequest {
    /// The child's full capsule name (`scope/name`).
    pub capsule: String,
    /// The exact version.
    pub version: String,
    /// The child's first user message, verbatim.
    pub task: String,
    /// The child's `ses_…` (already minted).
    pub session_id: String,
    /// The `dlg_…` id.
    pub delegation_id: String,
    /// The parent's session id.
    pub parent_session_id: String,
    /// The parent's grants: a child may never hold more.
    pub parent_grants: Grants,
    /// Where the child's files go.
    pub paths: SessionPaths,
    /// The child's depth in the tree (root = 0).
    pub depth: u32,
}

/// Turns a capsule name and version into a runnable child spec (reading stores, checking that
/// the child's grants stay within the parent's). `Err` is the refusal.
#[async_trait]
pub trait CapsuleResolver: Send + Sync {
    /// Build the child's spec.
    async fn resolve(&self, request: &ChildRequest) -> Result<SessionSpec, DelegationError>;
}

/// Why a `delegate-task` (or a plan's capsule step) started no child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DelegationErrorKind {
    /// This process cannot delegate (no Supervisor or no resolver).
    Unavailable,
    /// The call's input is not what `delegate-task` takes.
    BadInput,
    /// The capsule is not in `capabilities.spawn.allow`.
    NotGranted,
    /// A bound of the tree (`--max-depth`, `--max-children`) is reached.
    Bounds,
    /// The capsule cannot be found, read or run.
    NotResolved,
    /// The child declares grants its parent does not hold.
    ExceedsGrants,
    /// The place it was sent to refused it (a node).
    Refused,
    /// It was resolved, but its session could not start.
    CannotStart,
    /// The Supervisor did not answer.
    NoAnswer,
}

impl DelegationErrorKind {
    /// The code, for logs and tests.
    pub fn code(self) -> &'static str {
        match self {
            DelegationErrorKind::Unavailable => "unavailable",
            DelegationErrorKind::BadInput => "bad_input",
            DelegationErrorKind::NotGranted => "not_granted",
            DelegationErrorKind::Bounds => "bounds",
            DelegationErrorKind::NotResolved => "not_resolved",
            DelegationErrorKind::ExceedsGrants => "exceeds_grants",
            DelegationErrorKind::Refused => "refused",
            DelegationErrorKind::CannotStart => "cannot_start",
            DelegationErrorKind::NoAnswer => "no_answer",
        }
    }
}

/// A delegation that started no child: its class and the sentence the model and the
/// `delegation` line's `reason` read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DelegationError {
    /// The class.
    pub kind: DelegationErrorKind,
    /// The sentence.
    pub message: String,
}

impl DelegationError {
    /// A refusal of `kind`.
    pub fn new(kind: DelegationErrorKind, message: impl Into<String>) -> Self {
        DelegationError {
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for DelegationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DelegationError {}

/// How a delegation ended, as the parent's model and trace see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutcomeStatus {
    /// The child answered.
    Ok,
    /// The child's task failed (or hit its own max turns, or was canceled by itself).
    Error,
    /// The child's actor died (a panic).
    Crashed,
    /// The parent ended it (deadline, or the parent's task ended first).
    Terminated,
}

impl OutcomeStatus {
    /// The trace and model spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeStatus::Ok => "ok",
            OutcomeStatus::Error => "error",
            OutcomeStatus::Crashed => "crashed",
            OutcomeStatus::Terminated => "terminated",
        }
    }
}

/// The background-task message a child's end sends to its parent Session.
#[derive(Clone, Debug, PartialEq)]
pub struct DelegationOutcome {
    /// `dlg_…`.
    pub delegation_id: String,
    /// Full capsule name.
    pub capsule: String,
    /// Version.
    pub version: String,
    /// The child's session id.
    pub child_session_id: String,
    /// How it ended.
    pub status: OutcomeStatus,
    /// The child's answer (its `out/result.txt`).
    pub answer: String,
    /// Why it crashed or was ended.
    pub detail: Option<String>,
    /// From the child's start to its end.
    pub duration_ms: u64,
    /// The child's own counters (its tokens roll up into the parent's).
    pub totals: Totals,
    /// The child's work folder.
    pub child_workdir: PathBuf,
    /// The child's records folder (its trace, its result file).
    pub child_records_dir: PathBuf,
    /// The node it ran on (`mur node`); `None` when it ran in this process.
    pub node: Option<String>,
}

/// The text the parent's model reads for one outcome: a header line, then the fenced record.
pub fn outcome_text(o: &DelegationOutcome) -> String {
    let bare = crate::provided::bare(&o.capsule);
    let mut body = format!(
        "Delegated capsule finished.\ndelegation_id: {}\ncapsule: {bare}@{}\nsession_id: {}\nstatus: {}\nduration_ms: {}\nworkdir: {}\n",
        o.delegation_id,
        o.version,
        o.child_session_id,
        o.status.as_str(),
        o.duration_ms,
        crate::text::path_text(&o.child_workdir)
    );
    if let Some(d) = &o.detail {
        body.push_str(&format!("detail: {d}\n"));
    }
    if o.answer.is_empty() {
        body.push_str("result: none (the sub-capsule left no answer)");
    } else if o.answer.len() > MAX_ANSWER_BYTES {
        let kept = crate::text::truncate(&o.answer, MAX_ANSWER_BYTES);
        body.push_str(&format!(
            "result:\n{kept} […]\n[cut at {} of {} bytes; the whole answer is {}]",
            kept.len(),
            o.answer.len(),
            o.child_records_dir.join("out/result.txt").display()
        ));
    } else {
        body.push_str("result:\n");
        body.push_str(&o.answer);
    }
    format!(
        "[delegate-task] delegation {} to {bare}@{} ended {}:\n{}",
        o.delegation_id,
        o.version,
        o.status.as_str(),
        fence::fence(&format!("delegation:{bare}"), &body)
    )
}

/// What `delegate-task` learned when the child started.
#[derive(Clone, Debug)]
pub struct StartedChild {
    /// `dlg_…`.
    pub delegation_id: String,
    /// The child's session id.
    pub session_id: String,
    /// The child's work folder.
    pub workdir: PathBuf,
    /// The child's records folder.
    pub records_dir: PathBuf,
    /// The child actor (to cancel it): the Session, or a remote child's local stand-in.
    pub child: ractor::ActorRef<crate::session::SessionMsg>,
    /// The node it runs on; `None` in this process.
    pub node: Option<String>,
}

/// Where one delegation is, as its parent sees it.
#[derive(Debug)]
enum ChildState {
    /// The child runs; its actor is the one to cancel.
    Running(ractor::ActorRef<crate::session::SessionMsg>),
    /// Its outcome is in hand and not yet shown to the model.
    Settled(Box<DelegationOutcome>),
}

/// One delegation a session started and has not yet delivered.
#[derive(Debug)]
struct Entry {
    capsule: String,
    version: String,
    child_session_id: String,
    started: std::time::Instant,
    workdir: PathBuf,
    records_dir: PathBuf,
    node: Option<String>,
    state: ChildState,
}

/// A child its deadline ended: its outcome is settled (`terminated`), its actor still winds
/// down (writes its last lines; a remote child's trace is still on its way home).
#[derive(Debug)]
pub struct Ending {
    /// Its session id.
    pub child_session_id: String,
    /// Its records folder.
    pub records_dir: PathBuf,
}

/// A session's delegations: started, settled (outcome in hand, not yet shown to the model),
/// outcomes that arrived before the session learned the child had started, and children ended
/// by their deadline that have not ended yet.
///
/// Every call a session makes per outcome or per turn costs the same with ten thousand children
/// as with one: the running ones are counted, the settled ones indexed, never scanned for.
#[derive(Debug, Default)]
pub struct ChildTable {
    entries: std::collections::HashMap<String, Entry>,
    /// Delegation ids of the settled entries, in delegation-id order (the order outcomes are
    /// shown in).
    settled: std::collections::BTreeSet<String>,
    /// How many entries are running.
    running: usize,
    /// Delegation id → a child ended by its deadline whose own end has not arrived: the
    /// session's end waits for it as for a running child, so its trace is whole.
    ending: std::collections::HashMap<String, Ending>,
    early: std::collections::HashMap<String, DelegationOutcome>,
    by_actor: std::collections::HashMap<ractor::ActorId, String>,
    /// Children that crashed before the session learned they had started: a supervision
    /// event outruns the `delegate-task` answer that names the child.
    crashed_early: std::collections::HashMap<ractor::ActorId, String>,
}

impl ChildTable {
    /// Record a started child.
    pub fn started(&mut self, s: &StartedChild, capsule: &str, version: &str) {
        self.by_actor
            .insert(s.child.get_id(), s.delegation_id.clone());
        let state = match self.early.remove(&s.delegation_id) {
            Some(mut o) => {
                o.node = s.node.clone();
                self.settled.insert(s.delegation_id.clone());
                ChildState::Settled(Box::new(o))
            }
            None => {
                self.running += 1;
                ChildState::Running(s.child.clone())
            }
        };
        let entry = Entry {
            capsule: capsule.to_string(),
            version: version.to_string(),
            child_session_id: s.session_id.clone(),
            started: std::time::Instant::now(),
            workdir: s.workdir.clone(),
            records_dir: s.records_dir.clone(),
            node: s.node.clone(),
            state,
        };
        self.entries.insert(s.delegation_id.clone(), entry);
    }

    /// Record an outcome. Returns false when the delegation was already settled (a late report
    /// from a child that was ended), so the caller ignores it.
    pub fn settle(&mut self, mut o: DelegationOutcome) -> bool {
        // The child's own end, after its deadline settled it: it has ended now.
        if self.ending.remove(&o.delegation_id).is_some() {
            return false;
        }
        match self.entries.get_mut(&o.delegation_id) {
            Some(e) => match e.state {
                ChildState::Running(_) => {
                    o.node = e.node.clone();
                    self.settled.insert(o.delegation_id.clone());
                    e.state = ChildState::Settled(Box::new(o));
                    self.running -= 1;
                    true
                }
                ChildState::Settled(_) => false,
            },
            None => {
                self.early.insert(o.delegation_id.clone(), o);
                true
            }
        }
    }

    /// A linked child actor this table does not know yet crashed with `error`: kept until
    /// [`Self::take_early_crash`] finds it when the child's start is recorded.
    pub fn crashed_before_known(&mut self, id: ractor::ActorId, error: String) {
        self.crashed_early.insert(id, error);
    }

    /// The crash of a child that ended before its start was recorded, if it did.
    pub fn take_early_crash(&mut self, id: ractor::ActorId) -> Option<String> {
        self.crashed_early.remove(&id)
    }

    /// The delegation a crashed child actor belonged to.
    pub fn by_actor(&self, id: ractor::ActorId) -> Option<&str> {
        self.by_actor.get(&id).map(String::as_str)
    }

    /// A synthesized outcome for a running delegation the parent ends or that crashed.
    pub fn synthesize(
        &self,
        delegation_id: &str,
        status: OutcomeStatus,
        detail: String,
    ) -> Option<DelegationOutcome> {
        let e = self.entries.get(delegation_id)?;
        let ChildState::Running(_) = e.state else {
            return None;
        };
        Some(DelegationOutcome {
            delegation_id: delegation_id.to_string(),
            capsule: e.capsule.clone(),
            version: e.version.clone(),
            child_session_id: e.child_session_id.clone(),
            status,
            answer: String::new(),
            detail: Some(detail),
            duration_ms: e.started.elapsed().as_millis() as u64,
            totals: Totals::default(),
            child_workdir: e.workdir.clone(),
            child_records_dir: e.records_dir.clone(),
            node: e.node.clone(),
        })
    }

    /// What the task's end needs of a running child its deadline ends: hand it to
    /// [`Self::wait_for_end`] once its `terminated` outcome is settled.
    pub fn ending_of(&self, delegation_id: &str) -> Option<Ending> {
        let e = self.entries.get(delegation_id)?;
        let ChildState::Running(_) = e.state else {
            return None;
        };
        Some(Ending {
            child_session_id: e.child_session_id.clone(),
            records_dir: e.records_dir.clone(),
        })
    }

    /// A child whose outcome is settled still winds down: until its own end arrives
    /// ([`Self::settle`], or [`Self::ended`] for a crash) it counts as not ended.
    pub fn wait_for_end(&mut self, delegation_id: &str, ending: Ending) {
        self.ending.insert(delegation_id.to_string(), ending);
    }

    /// The actor of a child ended by its deadline stopped (it crashed while winding down):
    /// what is known of it, if it was one.
    pub fn ended(&mut self, delegation_id: &str) -> Option<Ending> {
        self.ending.remove(delegation_id)
    }

    /// No child runs and none ended by its deadline is still winding down.
    pub fn all_ended(&self) -> bool {
        self.ending.is_empty() && self.running == 0
    }

    /// True when an outcome is in hand and not yet delivered.
    pub fn has_settled(&self) -> bool {
        !self.settled.is_empty()
    }

    /// The running child of a delegation, if it is still outstanding.
    pub fn running_child(
        &self,
        delegation_id: &str,
    ) -> Option<&ractor::ActorRef<crate::session::SessionMsg>> {
        match &self.entries.get(delegation_id)?.state {
            ChildState::Running(child) => Some(child),
            ChildState::Settled(_) => None,
        }
    }

    /// Delegations still running.
    pub fn outstanding(&self) -> usize {
        self.running
    }

    /// How many outcomes are settled and not yet delivered.
    pub fn settled_count(&self) -> usize {
        self.settled.len()
    }

    /// At most `n` of the settled outcomes, in delegation-id order; removes them.
    pub fn take_settled_at_most(&mut self, n: usize) -> Vec<DelegationOutcome> {
        let mut out = Vec::with_capacity(n.min(self.settled.len()));
        while out.len() < n {
            let Some(id) = self.settled.pop_first() else {
                break;
            };
            if let Some(Entry {
                state: ChildState::Settled(o),
                ..
            }) = self.entries.remove(&id)
            {
                out.push(*o);
            }
        }
        out
    }

    /// Outcomes settled and not yet delivered, in delegation-id order; removes them.
    pub fn take_settled(&mut self) -> Vec<DelegationOutcome> {
        self.take_settled_at_most(usize::MAX)
    }

    /// Running children with their delegation ids, in delegation-id order (to end them).
    pub fn running(&self) -> Vec<(String, ractor::ActorRef<crate::session::SessionMsg>)> {
        let mut out: Vec<(String, ractor::ActorRef<crate::session::SessionMsg>)> = self
            .entries
            .iter()
            .filter_map(|(k, e)| match &e.state {
                ChildState::Running(c) => Some((k.clone(), c.clone())),
                ChildState::Settled(_) => None,
            })
            .collect();
        out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(answer: String) -> DelegationOutcome {
        DelegationOutcome {
            delegation_id: "dlg_1".into(),
            capsule: "acme/writer".into(),
            version: "0.1.0".into(),
            child_session_id: "ses_c".into(),
            status: OutcomeStatus::Ok,
            answer,
            detail: None,
            duration_ms: 5,
            totals: Totals::default(),
            child_workdir: "/w/children/ses_c".into(),
            child_records_dir: "/w/children/ses_c".into(),
            node: None,
        }
    }

    #[tokio::test]
    async fn the_table_counts_and_orders_outcomes_whatever_order_they_arrive_in() {
        let (child, _) = ractor::Actor::spawn(None, crate::testkit::Idle, ())
            .await
            .unwrap();
        let mut table = ChildTable::default();
        let ids: Vec<String> = (0..6).map(|i| format!("dlg_{i:02}")).collect();
        // dlg_05's outcome arrives before its start is recorded.
        table.settle(DelegationOutcome {
            delegation_id: ids[5].clone(),
            ..outcome("early".into())
        });
        for id in &ids {
            let started = StartedChild {
                delegation_id: id.clone(),
                session_id: format!("ses_{id}"),
                workdir: "/w".into(),
                records_dir: "/w".into(),
                child: child.clone(),
                node: None,
            };
            table.started(&started, "acme/writer", "0.1.0");
        }
        assert_eq!((table.outstanding(), table.settled_count()), (5, 1));
        for i in [3, 0, 4] {
            let o = DelegationOutcome {
                delegation_id: ids[i].clone(),
                ..outcome(format!("answer {i}"))
            };
            assert!(table.settle(o.clone()));
            // A second report of the same delegation is ignored.
            assert!(!table.settle(o));
        }
        assert_eq!((table.outstanding(), table.settled_count()), (2, 4));
        assert!(table.has_settled() && !table.all_ended());
        let first: Vec<String> = table
            .take_settled_at_most(2)
            .into_iter()
            .map(|o| o.delegation_id)
            .collect();
        assert_eq!(first, [ids[0].clone(), ids[3].clone()]);
        let rest: Vec<String> = table
            .take_settled()
            .into_iter()
            .map(|o| o.delegation_id)
            .collect();
        assert_eq!(rest, [ids[4].clone(), ids[5].clone()]);
        let running: Vec<String> = table.running().into_iter().map(|(d, _)| d).collect();
        assert_eq!(running, [ids[1].clone(), ids[2].clone()]);
        // A deadline settles dlg_01 at once; the table is ended only once its child is too.
        let ending = table.ending_of(&ids[1]).unwrap();
        let o = table
            .synthesize(&ids[1], OutcomeStatus::Terminated, "deadline".into())
            .unwrap();
        assert!(table.settle(o));
        table.wait_for_end(&ids[1], ending);
        assert!(table.settle(DelegationOutcome {
            delegation_id: ids[2].clone(),
            ..outcome("last".into())
        }));
        assert_eq!(table.outstanding(), 0);
        assert!(!table.all_ended(), "dlg_01 still winds down");
        assert!(!table.settle(DelegationOutcome {
            delegation_id: ids[1].clone(),
            ..outcome("its own end".into())
        }));
        assert!(table.all_ended());
        child.stop(None);
    }

    #[test]
    fn an_outcome_is_a_header_and_a_fenced_record_with_the_bare_name() {
        let text = outcome_text(&outcome("the answer".into()));
        assert_eq!(
            text,
            "[delegate-task] delegation dlg_1 to writer@0.1.0 ended ok:\n<untrusted-content source=delegation:writer>\nDelegated capsule finished.\ndelegation_id: dlg_1\ncapsule: writer@0.1.0\nsession_id: ses_c\nstatus: ok\nduration_ms: 5\nworkdir: /w/children/ses_c\nresult:\nthe answer\n</untrusted-content>"
        );
    }

    #[test]
    fn long_answers_are_cut_and_point_at_the_whole_file() {
        let text = outcome_text(&outcome("é".repeat(40_000)));
        assert!(text.contains(
            "[cut at 65536 of 80000 bytes; the whole answer is /w/children/ses_c/out/result.txt]"
        ));
        assert!(text.len() < 70_000);
        let empty = outcome_text(&outcome(String::new()));
        assert!(empty.contains("result: none (the sub-capsule left no answer)"));
    }
}
