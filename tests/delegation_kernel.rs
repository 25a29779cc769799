//! Delegation trees on the real kernel: a parent fans out, children answer, crash or overrun
//! their deadline, and the parent continues once with every outcome. Children are resolved by a
//! resolver that builds their specs from scripts (the store-backed resolver is tested end to end
//! through `mur run`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mur::drivers::script::ScriptDriver;
use mur_actors::delegation::{CapsuleResolver, ChildRequest, DelegationError, DelegationErrorKind};
use mur_actors::provided;
use mur_actors::session::{ExitStatus, SessionReport};
use mur_actors::spec::{Grants, SessionPaths, SessionSpec, SpawnedBy};
use mur_actors::supervisor::{Supervisor, SupervisorArgs, SupervisorMsg};
use ractor::Actor;
use serde_json::Value;

mod common;
use common::trace as lines;

fn spec_for(
    name: &str,
    script: &str,
    grants: Grants,
    session_id: String,
    paths: SessionPaths,
    task: String,
) -> SessionSpec {
    let driver = ScriptDriver::from_str(script, Path::new(&format!("{name}.yaml"))).unwrap();
    let mut spec = SessionSpec::new(
        session_id,
        name,
        Arc::new(driver),
        grants,
        task,
        paths,
        mur::tools::executors(
            Duration::from_secs(30),
            std::sync::Arc::new(mur::contain::Sandbox::uncontained(std::env::temp_dir())),
        ),
    );
    spec.max_turns = Some(10);
    // No deadline can pass on a slow machine unless a test asks for one (the deadline test).
    spec.delegation_deadline = Duration::from_secs(300);
    spec
}

/// Children by full name: their scripts and grants.
struct Scripts(HashMap<String, (String, Grants)>);

#[async_trait]
impl CapsuleResolver for Scripts {
    async fn resolve(&self, r: &ChildRequest) -> Result<SessionSpec, DelegationError> {
        let (script, grants) = self.0.get(&r.capsule).ok_or_else(|| {
            DelegationError::new(
                DelegationErrorKind::NotResolved,
                format!("capsule '{}@{}' is not in any store", r.capsule, r.version),
            )
        })?;
        let name = provided::bare(&r.capsule);
        let mut spec = spec_for(
            name,
            script,
            grants.clone(),
            r.session_id.clone(),
            r.paths.clone(),
            r.task.clone(),
        );
        spec.depth = r.depth;
        spec.spawned_by = Some(SpawnedBy {
            parent_session_id: r.parent_session_id.clone(),
            delegation_id: r.delegation_id.clone(),
        });
        Ok(spec)
    }
}

fn spawn_grants(children: &[&str]) -> Grants {
    Grants {
        spawn_allow: children.iter().map(|c| format!("acme/{c}")).collect(),
        ..Grants::default()
    }
}

async fn run_tree(root: SessionSpec, resolver: Scripts, args: SupervisorArgs) -> SessionReport {
    let args = SupervisorArgs {
        resolver: Some(Arc::new(resolver)),
        ..args
    };
    common::run_tree(root, args).await
}

fn of_type<'a>(lines: &'a [Value], t: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["event_type"] == t).collect()
}

fn root_paths(dir: &Path) -> (String, SessionPaths, PathBuf) {
    let id = mur_actors::ids::session_id();
    let records = dir.join("workdir").join(&id);
    (
        id,
        SessionPaths {
            workdir: records.clone(),
            records_dir: records.clone(),
        },
        records,
    )
}

#[tokio::test]
async fn a_parent_gets_every_outcome_ok_crashed_and_refused_before_its_next_call() {
    let dir = tempfile::tempdir().unwrap();
    let parent = "
turns:
  - call:
      - {tool: delegate-task, input: {capsule: answerer, version: '0.1.0', task: 'what is 6*7?'}}
      - {tool: delegate-task, input: {capsule: crasher, version: '0.1.0', task: 'crash'}}
      - {tool: delegate-task, input: {capsule: stranger, version: '0.1.0', task: 'x'}}
  # Work until both children have ended (their traces say so), so their outcomes arrive while
  # this call runs and are injected before the next model call, whatever the machine's load.
  - call: [{tool: bash, input: {command: 'for i in $(seq 1 30000); do [ \"$(cat children/*/trace.jsonl 2>/dev/null | grep -c session_end)\" -ge 2 ] && break; sleep 0.01; done'}}]
  - expect: 'the answer to what is 6*7? is 42'
    say: 'done: {{last}}'
";
    let resolver = Scripts(HashMap::from([
        (
            "acme/answerer".to_string(),
            (
                "
turns:
  - delay_ms: 100
    say: 'the answer to {{task}} is 42'
"
                .to_string(),
                Grants::default(),
            ),
        ),
        (
            "acme/crasher".to_string(),
            (
                "
turns:
  - panic: boom
"
                .to_string(),
                Grants::default(),
            ),
        ),
    ]));
    let (id, paths, records) = root_paths(dir.path());
    let mut grants = spawn_grants(&["answerer", "crasher"]);
    grants.shell_allow = vec!["bash".into()];
    let root = spec_for("parent", parent, grants, id, paths, "fan out".into());
    let report = run_tree(root, resolver, SupervisorArgs::default()).await;
    assert_eq!(report.exit_status, ExitStatus::Ok, "{}", report.result);
    // Both outcomes arrived while the parent worked and were injected before its next model
    // call (the script's `expect` checked that): no continuation was needed.
    assert!(report.result.starts_with("done: "), "{}", report.result);

    let t = lines(&records.join("trace.jsonl"));
    assert_eq!(of_type(&t, "delegation_start").len(), 2);
    let ends = of_type(&t, "delegation");
    assert_eq!(ends.len(), 3, "one per call, the refusal included");
    let refused: Vec<_> = ends.iter().filter(|l| l["outcome"] == "refused").collect();
    assert_eq!(refused.len(), 1);
    assert!(refused[0]["reason"]
        .as_str()
        .unwrap()
        .starts_with("'stranger' is not in capabilities.spawn.allow"));
    let mut outcomes: Vec<&str> = ends
        .iter()
        .map(|l| l["outcome"].as_str().unwrap())
        .collect();
    outcomes.sort();
    assert_eq!(outcomes, ["crashed", "ok", "refused"]);
    assert!(of_type(&t, "task_continued").is_empty());
    let end = of_type(&t, "session_end")[0];
    assert_eq!(end["total_turns"], 3);
    let crashed = ends.iter().find(|l| l["outcome"] == "crashed").unwrap();
    assert!(crashed["reason"].as_str().unwrap().contains("boom"));
    assert_eq!(t.last().unwrap()["event_type"], "session_end");

    // Each child has its own trace under children/, linked to the parent.
    for start in of_type(&t, "delegation_start") {
        let child = PathBuf::from(start["child_records_dir"].as_str().unwrap());
        assert!(child.starts_with(records.join("children")));
        let ct = lines(&child.join("trace.jsonl"));
        assert_eq!(ct[0]["spawned_by"], t[0]["session_id"]);
        assert_eq!(ct[0]["delegation_id"], start["delegation_id"]);
    }
}

#[tokio::test]
async fn a_child_past_its_deadline_is_terminated_and_the_waiting_parent_continues_once() {
    let dir = tempfile::tempdir().unwrap();
    let parent = "
turns:
  - call: [{tool: delegate-task, input: {capsule: hanger, version: '0.1.0', task: 'hang'}}]
  - say: waiting for my sub-capsule
  - expect: 'ended terminated'
    say: 'combined: {{last}}'
";
    // The only child: nothing else can be caught by the deadline on a slow machine.
    let resolver = Scripts(HashMap::from([(
        "acme/hanger".to_string(),
        (
            "
turns:
  - delay_ms: 60000
    say: late
"
            .to_string(),
            Grants::default(),
        ),
    )]));
    let (id, paths, records) = root_paths(dir.path());
    let mut root = spec_for(
        "parent",
        parent,
        spawn_grants(&["hanger"]),
        id,
        paths,
        "hang".into(),
    );
    root.delegation_deadline = Duration::from_millis(700);
    let report = run_tree(root, resolver, SupervisorArgs::default()).await;
    assert_eq!(report.exit_status, ExitStatus::Ok, "{}", report.result);
    assert!(report
        .result
        .starts_with("combined: [delegate-task] delegation dlg_"));
    assert!(report.result.contains(
        "to hanger@0.1.0 ended terminated:\n<untrusted-content source=delegation:hanger>\n"
    ));
    assert!(report
        .result
        .contains("detail: still running at the delegation deadline of 0.7 s"));
    assert!(report.result.contains("result: none"));
    let t = lines(&records.join("trace.jsonl"));
    let ends = of_type(&t, "delegation");
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["outcome"], "terminated");
    let cont = of_type(&t, "task_continued");
    assert_eq!(cont.len(), 1, "continues once with the outcome");
    assert_eq!(cont[0]["delegations"].as_array().unwrap().len(), 1);
    assert_eq!(of_type(&t, "session_end")[0]["total_turns"], 3);
    // The ended child's trace is complete: it was canceled, not left running.
    let child = PathBuf::from(
        of_type(&t, "delegation_start")[0]["child_records_dir"]
            .as_str()
            .unwrap(),
    );
    let ct = lines(&child.join("trace.jsonl"));
    assert_eq!(ct.last().unwrap()["event_type"], "session_end");
    assert_eq!(ct.last().unwrap()["exit_status"], "canceled");
}

#[tokio::test]
async fn a_canceled_parent_ends_its_children_and_every_trace_is_complete() {
    let dir = tempfile::tempdir().unwrap();
    let parent = "turns:
  - call:
      - {tool: delegate-task, input: {capsule: sleeper, version: '0.1.0', task: 'sleep'}}
  - say: waiting
";
    let resolver = Scripts(HashMap::from([(
        "acme/sleeper".to_string(),
        (
            "
turns:
  - delay_ms: 10000
    say: late
"
            .to_string(),
            Grants::default(),
        ),
    )]));
    let (id, paths, records) = root_paths(dir.path());
    let mut root = spec_for(
        "parent",
        parent,
        spawn_grants(&["sleeper"]),
        id,
        paths,
        "t".into(),
    );
    root.delegation_deadline = Duration::from_secs(60);
    let args = SupervisorArgs {
        resolver: Some(Arc::new(resolver)),
        ..SupervisorArgs::default()
    };
    let (sup, handle) = Actor::spawn(None, Supervisor, args).await.unwrap();
    let rx = ractor::call!(sup, |reply| SupervisorMsg::StartRoot {
        spec: Box::new(root),
        reply
    })
    .unwrap()
    .unwrap();
    // Cancel once the child holds its task (the parent's trace says so), not after a guess.
    common::wait_for_line(&records.join("trace.jsonl"), "delegation_start").await;
    sup.send_message(SupervisorMsg::Shutdown {
        reason: "test".into(),
    })
    .unwrap();
    let report = tokio::time::timeout(Duration::from_secs(10), rx)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.exit_status, ExitStatus::Canceled);
    // The report comes once the canceled child has ended too: every trace is complete now,
    // before the tree is stopped.
    let t = lines(&records.join("trace.jsonl"));
    let end = of_type(&t, "delegation")[0];
    assert_eq!(end["outcome"], "terminated");
    assert_eq!(end["reason"], "the delegating task was cancelled");
    let child = PathBuf::from(
        of_type(&t, "delegation_start")[0]["child_records_dir"]
            .as_str()
            .unwrap(),
    );
    let ct = lines(&child.join("trace.jsonl"));
    assert_eq!(ct.last().unwrap()["event_type"], "session_end");
    assert_eq!(ct.last().unwrap()["exit_status"], "canceled");
    sup.stop(None);
    handle.await.unwrap();
}

#[tokio::test]
async fn depth_and_live_children_bounds_refuse_with_the_flag_named() {
    let dir = tempfile::tempdir().unwrap();
    let parent = "turns:
  - call:
      - {tool: delegate-task, input: {capsule: middle, version: '0.1.0', task: 'go down'}}
      - {tool: delegate-task, input: {capsule: middle, version: '0.1.0', task: 'again'}}
  - say: waiting
  - say: 'parent saw: {{last}}'
";
    let middle = "turns:
  - call:
      - {tool: delegate-task, input: {capsule: middle, version: '0.1.0', task: 'deeper'}}
  - say: 'middle saw: {{last}}'
";
    let resolver = Scripts(HashMap::from([(
        "acme/middle".to_string(),
        (middle.to_string(), spawn_grants(&["middle"])),
    )]));
    let (id, paths, records) = root_paths(dir.path());
    let root = spec_for(
        "parent",
        parent,
        spawn_grants(&["middle"]),
        id,
        paths,
        "t".into(),
    );
    let args = SupervisorArgs {
        max_depth: 1,
        max_children: 1,
        ..SupervisorArgs::default()
    };
    let report = run_tree(root, resolver, args).await;
    assert_eq!(report.exit_status, ExitStatus::Ok, "{}", report.result);
    let t = lines(&records.join("trace.jsonl"));
    let refused: Vec<_> = of_type(&t, "delegation")
        .into_iter()
        .filter(|l| l["outcome"] == "refused")
        .collect();
    assert_eq!(refused.len(), 1);
    assert!(refused[0]["reason"]
        .as_str()
        .unwrap()
        .contains("--max-children"));
    // The child at depth 1 could not go to depth 2.
    assert!(report.result.contains("--max-depth"), "{}", report.result);
}

#[tokio::test]
async fn a_child_whose_folder_cannot_be_made_ends_in_error_naming_why() {
    let dir = tempfile::tempdir().unwrap();
    let (id, paths, records) = root_paths(dir.path());
    // A file where the children's folders go: no child folder can be made under it.
    std::fs::create_dir_all(&records).unwrap();
    std::fs::write(records.join("children"), "in the way").unwrap();
    // The child fails at once, so its outcome may be shown before the second model call (and
    // the task ends there) or after it (the parent waits, then continues once): both later
    // turns answer with what was heard last.
    let parent = "turns:
  - call:
      - {tool: delegate-task, input: {capsule: answerer, version: '0.1.0', task: 'what is 6*7?'}}
  - say: 'seen: {{last}}'
  - say: 'seen: {{last}}'
";
    let resolver = Scripts(HashMap::from([(
        "acme/answerer".to_string(),
        (
            "
turns:
  - say: 'the answer is 42'
"
            .to_string(),
            Grants::default(),
        ),
    )]));
    let root = spec_for(
        "parent",
        parent,
        spawn_grants(&["answerer"]),
        id,
        paths,
        "fan out".into(),
    );
    let report = run_tree(root, resolver, SupervisorArgs::default()).await;
    assert_eq!(report.exit_status, ExitStatus::Ok, "{}", report.result);
    assert!(
        report.result.contains("cannot create") && report.result.contains("children"),
        "{}",
        report.result
    );
    let t = lines(&records.join("trace.jsonl"));
    let ends = of_type(&t, "delegation");
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["outcome"], "error");
    let reason = ends[0]["reason"].as_str().unwrap();
    assert!(reason.contains("cannot create"), "{reason}");
    assert!(reason.contains("Not a directory"), "{reason}");
}

/// A placer for the kernel's placement hook: `acme/far` runs "elsewhere" (a do-nothing
/// stand-in; the outcome is reported through the sink at once), `acme/full` is refused, the
/// rest run here.
struct FarAway;

#[async_trait]
impl mur_actors::placement::ChildPlacer for FarAway {
    async fn place(&self, offer: mur_actors::placement::Offer) -> mur_actors::placement::Placed {
        use mur_actors::placement::Placed;
        match offer.request.capsule.as_str() {
            "acme/far" => {
                let (child, _) =
                    Actor::spawn_linked(None, mur_actors::testkit::Idle, (), offer.parent.clone())
                        .await
                        .unwrap();
                let (report, id, stop) = (offer.report, offer.request.session_id, child.clone());
                tokio::spawn(async move {
                    report(SessionReport {
                        session_id: id,
                        exit_status: ExitStatus::Ok,
                        result: "answered far away".into(),
                        totals: Default::default(),
                        duration_ms: 1,
                        trace_error: None,
                    });
                    stop.stop(None);
                });
                Placed::There {
                    child,
                    node: "far-node".into(),
                }
            }
            "acme/full" => Placed::Refused("every node is full".into()),
            _ => Placed::Here {
                spec: Box::new(offer.spec),
                report: offer.report,
            },
        }
    }
}

#[tokio::test]
async fn a_placer_runs_a_child_elsewhere_refuses_one_and_hands_one_back() {
    let dir = tempfile::tempdir().unwrap();
    let parent = "
turns:
  - call:
      - {tool: delegate-task, input: {capsule: far, version: '0.1.0', task: 'x'}}
      - {tool: delegate-task, input: {capsule: full, version: '0.1.0', task: 'x'}}
      - {tool: delegate-task, input: {capsule: near, version: '0.1.0', task: 'x'}}
  - say: waiting
  - say: 'done: {{last}}'
";
    let child = "turns:\n  - say: 'answered here'\n".to_string();
    let resolver = Scripts(HashMap::from(
        ["acme/far", "acme/full", "acme/near"]
            .map(|c| (c.to_string(), (child.clone(), Grants::default()))),
    ));
    let (id, paths, records) = root_paths(dir.path());
    let root = spec_for(
        "parent",
        parent,
        spawn_grants(&["far", "full", "near"]),
        id,
        paths,
        "place".into(),
    );
    let args = SupervisorArgs {
        placer: Some(Arc::new(FarAway)),
        ..SupervisorArgs::default()
    };
    let report = run_tree(root, resolver, args).await;
    assert_eq!(report.exit_status, ExitStatus::Ok, "{}", report.result);
    let t = lines(&records.join("trace.jsonl"));
    let starts = of_type(&t, "delegation_start");
    let far = starts.iter().find(|l| l["capsule"] == "acme/far").unwrap();
    assert_eq!(far["node"], "far-node");
    let near = starts.iter().find(|l| l["capsule"] == "acme/near").unwrap();
    assert!(near.get("node").is_none(), "{near}");
    let ends = of_type(&t, "delegation");
    let end = |c: &str| *ends.iter().find(|l| l["capsule"] == c).unwrap();
    assert_eq!(end("acme/far")["outcome"], "ok");
    assert_eq!(end("acme/far")["node"], "far-node");
    assert_eq!(end("acme/full")["outcome"], "refused");
    assert_eq!(end("acme/full")["reason"], "every node is full");
    assert_eq!(end("acme/near")["outcome"], "ok");
    assert_eq!(t.last().unwrap()["event_type"], "session_end");
}

/// A placer whose children run "elsewhere" and take a while to end once canceled, as a remote
/// child does (its node ends it, then its trace travels home): `acme/slow` then reports,
/// `acme/dies` then fails. Each writes `wound-down` in its records folder just before.
struct SlowToEnd;

/// The stand-in [`SlowToEnd`] places.
struct WindsDown;

/// What a [`WindsDown`] stand-in holds.
struct WindsDownState {
    report: Option<mur_actors::session::ReportSink>,
    session_id: String,
    records_dir: PathBuf,
    dies: bool,
}

#[async_trait]
impl Actor for WindsDown {
    type Msg = mur_actors::session::SessionMsg;
    type State = WindsDownState;
    type Arguments = WindsDownState;

    async fn pre_start(
        &self,
        _myself: ractor::ActorRef<Self::Msg>,
        args: WindsDownState,
    ) -> Result<WindsDownState, ractor::ActorProcessingErr> {
        Ok(args)
    }

    async fn handle(
        &self,
        myself: ractor::ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut WindsDownState,
    ) -> Result<(), ractor::ActorProcessingErr> {
        if let mur_actors::session::SessionMsg::Cancel { .. } = msg {
            tokio::time::sleep(Duration::from_millis(600)).await;
            std::fs::create_dir_all(&state.records_dir).unwrap();
            std::fs::write(state.records_dir.join("wound-down"), "").unwrap();
            if state.dies {
                return Err("it died winding down".into());
            }
            if let Some(report) = state.report.take() {
                report(SessionReport {
                    session_id: state.session_id.clone(),
                    exit_status: ExitStatus::Canceled,
                    result: "error: task canceled".into(),
                    totals: Default::default(),
                    duration_ms: 1,
                    trace_error: None,
                });
            }
            myself.stop(None);
        }
        Ok(())
    }
}

#[async_trait]
impl mur_actors::placement::ChildPlacer for SlowToEnd {
    async fn place(&self, offer: mur_actors::placement::Offer) -> mur_actors::placement::Placed {
        let state = WindsDownState {
            dies: offer.request.capsule == "acme/dies",
            session_id: offer.request.session_id,
            records_dir: offer.request.paths.records_dir,
            report: Some(offer.report),
        };
        let (child, _) = Actor::spawn_linked(None, WindsDown, state, offer.parent.clone())
            .await
            .unwrap();
        mur_actors::placement::Placed::There {
            child,
            node: "far-node".into(),
        }
    }
}

#[tokio::test]
async fn a_parent_reports_only_once_the_children_its_deadlines_ended_have_ended() {
    let dir = tempfile::tempdir().unwrap();
    let parent = "
turns:
  - call:
      - {tool: delegate-task, input: {capsule: slow, version: '0.1.0', task: 'x'}}
      - {tool: delegate-task, input: {capsule: dies, version: '0.1.0', task: 'x'}}
  - say: waiting
  - say: 'done: {{last}}'
";
    let resolver = Scripts(HashMap::from(["acme/slow", "acme/dies"].map(|c| {
        (
            c.to_string(),
            ("turns:\n  - say: never\n".to_string(), Grants::default()),
        )
    })));
    let (id, paths, records) = root_paths(dir.path());
    let mut root = spec_for(
        "parent",
        parent,
        spawn_grants(&["slow", "dies"]),
        id,
        paths,
        "x".into(),
    );
    root.delegation_deadline = Duration::from_millis(300);
    let args = SupervisorArgs {
        placer: Some(Arc::new(SlowToEnd)),
        ..SupervisorArgs::default()
    };
    let report = run_tree(root, resolver, args).await;
    assert_eq!(report.exit_status, ExitStatus::Ok, "{}", report.result);
    let t = lines(&records.join("trace.jsonl"));
    let ends = of_type(&t, "delegation");
    assert_eq!(ends.len(), 2, "{ends:?}");
    assert!(
        ends.iter().all(|l| l["outcome"] == "terminated"),
        "{ends:?}"
    );
    // The outcomes settled at the deadline, yet the report waited for both children's own
    // ends: what they leave behind as they wind down is there when it arrives.
    for start in of_type(&t, "delegation_start") {
        let dir = PathBuf::from(start["child_records_dir"].as_str().unwrap());
        assert!(dir.join("wound-down").is_file(), "{}", start["capsule"]);
    }
}
