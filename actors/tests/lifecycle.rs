//! A session's life on the kernel alone (the test kit's in-memory model and executors): each
//! way a task ends, and what a cancel says about where it found the session.

use std::sync::Arc;

use mur_actors::grants::Grants;
use mur_actors::session::{ExitStatus, SessionMsg};
use mur_actors::supervisor::{SupervisorArgs, SupervisorMsg};
use mur_actors::testkit::{
    event_types, root_spec, run, trace_lines, Canned, ChildModels, Replies, Reply, Tree,
};
use serde_json::{json, Value};

fn of_type<'a>(lines: &'a [Value], t: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["event_type"] == t).collect()
}

fn shell(binaries: &[&str]) -> Grants {
    Grants {
        shell_allow: binaries.iter().map(|b| b.to_string()).collect(),
        ..Grants::default()
    }
}

#[tokio::test]
async fn a_task_answered_after_a_tool_call_ends_ok_with_every_line() {
    let dir = tempfile::tempdir().unwrap();
    let tools = Canned::new();
    let model = Replies::new([
        Reply::call("bash", json!({"command": "ls"})),
        Reply::say("done"),
    ]);
    let spec = root_spec(
        dir.path(),
        model.driver(),
        shell(&["bash"]),
        tools.executors(),
    );
    let records = spec.paths.records_dir.clone();
    let report = run(spec, SupervisorArgs::default()).await;
    assert_eq!(report.exit_status, ExitStatus::Ok, "{}", report.result);
    assert_eq!(report.result, "done");
    assert_eq!(tools.seen().len(), 1);
    assert_eq!(tools.seen()[0].input, json!({"command": "ls"}));
    let lines = trace_lines(&records.join("trace.jsonl"));
    assert_eq!(
        event_types(&lines),
        [
            "session_start",
            "task_start",
            "inference",
            "tool_call",
            "inference",
            "task_end",
            "session_end"
        ]
    );
}

#[tokio::test]
async fn a_cancel_during_a_model_call_says_inference() {
    let dir = tempfile::tempdir().unwrap();
    let model = Replies::new([Reply::Hang]);
    let spec = root_spec(
        dir.path(),
        model.driver(),
        Grants::default(),
        Canned::new().executors(),
    );
    let tree = Tree::start(spec, SupervisorArgs::default()).await;
    tree.wait_for_line("task_start").await;
    tree.cancel("stop now");
    let records = tree.records().to_path_buf();
    let report = tree.report().await;
    assert_eq!(report.exit_status, ExitStatus::Canceled);
    assert_eq!(report.result, "error: task canceled: stop now");
    let lines = trace_lines(&records.join("trace.jsonl"));
    let canceled = of_type(&lines, "task_canceled");
    assert_eq!(canceled.len(), 1);
    assert_eq!(canceled[0]["phase"], "inference");
    assert_eq!(canceled[0]["turn"], 0);
    assert!(
        of_type(&lines, "inference").is_empty(),
        "no call was answered"
    );
    assert_eq!(lines.last().unwrap()["exit_status"], "canceled");
}

#[tokio::test]
async fn a_cancel_during_a_tool_call_says_turn_and_ends_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let tools = Canned::hanging();
    let model = Replies::new([
        Reply::call("bash", json!({"command": "sleep"})),
        Reply::say("never"),
    ]);
    let spec = root_spec(
        dir.path(),
        model.driver(),
        shell(&["bash"]),
        tools.executors(),
    );
    let tree = Tree::start(spec, SupervisorArgs::default()).await;
    // The call is running once the executor has seen it.
    while tools.seen().is_empty() {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    tree.cancel("enough");
    let records = tree.records().to_path_buf();
    let report = tree.report().await;
    assert_eq!(report.exit_status, ExitStatus::Canceled);
    let lines = trace_lines(&records.join("trace.jsonl"));
    assert_eq!(of_type(&lines, "task_canceled")[0]["phase"], "turn");
    assert!(
        of_type(&lines, "tool_call").is_empty(),
        "the call never finished"
    );
    assert_eq!(of_type(&lines, "task_end")[0]["exit_status"], "canceled");
}

#[tokio::test]
async fn a_cancel_while_waiting_for_a_child_says_delegation_and_ends_the_child() {
    let dir = tempfile::tempdir().unwrap();
    let children = ChildModels::new(
        [("acme/slow", Replies::new([Reply::Hang]))],
        Canned::new().executors(),
    );
    let model = Replies::new([
        Reply::call(
            "delegate-task",
            json!({"capsule": "slow", "version": "0.1.0", "task": "take your time"}),
        ),
        Reply::say("waiting for my sub-capsule"),
    ]);
    let grants = Grants {
        spawn_allow: vec!["acme/slow".into()],
        ..Grants::default()
    };
    let spec = root_spec(
        dir.path(),
        model.driver(),
        grants,
        Canned::new().executors(),
    );
    let args = SupervisorArgs {
        resolver: Some(Arc::new(children)),
        ..SupervisorArgs::default()
    };
    let tree = Tree::start(spec, args).await;
    // The model's second answer ended its turn with the child outstanding: it waits.
    tree.wait_until(|lines| of_type(lines, "inference").len() == 2)
        .await;
    tree.cancel("shutting down");
    let records = tree.records().to_path_buf();
    let report = tree.report().await;
    assert_eq!(report.exit_status, ExitStatus::Canceled);
    let lines = trace_lines(&records.join("trace.jsonl"));
    assert_eq!(of_type(&lines, "task_canceled")[0]["phase"], "delegation");
    let end = of_type(&lines, "delegation");
    assert_eq!(end.len(), 1);
    assert_eq!(end[0]["outcome"], "terminated");
    assert_eq!(end[0]["reason"], "the delegating task was cancelled");
    // The report came once the child had ended too: its trace is complete.
    let child = std::path::PathBuf::from(
        of_type(&lines, "delegation_start")[0]["child_records_dir"]
            .as_str()
            .unwrap(),
    );
    let child_lines = trace_lines(&child.join("trace.jsonl"));
    assert_eq!(child_lines.last().unwrap()["event_type"], "session_end");
    assert_eq!(child_lines.last().unwrap()["exit_status"], "canceled");
}

#[tokio::test]
async fn no_turn_allowed_ends_before_any_model_call() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = root_spec(
        dir.path(),
        Replies::new([Reply::say("never")]).driver(),
        Grants::default(),
        Canned::new().executors(),
    );
    spec.max_turns = Some(0);
    let records = spec.paths.records_dir.clone();
    let report = run(spec, SupervisorArgs::default()).await;
    assert_eq!(report.exit_status, ExitStatus::MaxTurnsReached);
    let lines = trace_lines(&records.join("trace.jsonl"));
    assert!(of_type(&lines, "inference").is_empty());
    assert_eq!(
        of_type(&lines, "session_end")[0]["exit_status"],
        "max_turns_reached"
    );
}

#[tokio::test]
async fn an_empty_task_fails_without_a_model_call() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = root_spec(
        dir.path(),
        Replies::new([Reply::say("never")]).driver(),
        Grants::default(),
        Canned::new().executors(),
    );
    spec.task = "  \n".into();
    let records = spec.paths.records_dir.clone();
    let report = run(spec, SupervisorArgs::default()).await;
    assert_eq!(report.exit_status, ExitStatus::Failed);
    assert!(
        report.result.starts_with("error: the task is empty"),
        "{}",
        report.result
    );
    let lines = trace_lines(&records.join("trace.jsonl"));
    assert!(of_type(&lines, "inference").is_empty());
    assert_eq!(of_type(&lines, "task_failed")[0]["cause"], "runtime_error");
}

#[tokio::test]
async fn a_driver_error_fails_the_task_and_a_panic_crashes_it() {
    let dir = tempfile::tempdir().unwrap();
    let failing = root_spec(
        dir.path(),
        Replies::new([Reply::Fail("the provider is down".into())]).driver(),
        Grants::default(),
        Canned::new().executors(),
    );
    let report = run(failing, SupervisorArgs::default()).await;
    assert_eq!(report.exit_status, ExitStatus::Failed);
    assert_eq!(report.result, "error: the provider is down");

    let panicking = root_spec(
        dir.path(),
        Replies::new([Reply::Panic("boom".into()).after_ms(1)]).driver(),
        Grants::default(),
        Canned::new().executors(),
    );
    let records = panicking.paths.records_dir.clone();
    let report = run(panicking, SupervisorArgs::default()).await;
    assert_eq!(report.exit_status, ExitStatus::Failed);
    assert!(
        report.result.contains("the session crashed: boom"),
        "{}",
        report.result
    );
    let lines = trace_lines(&records.join("trace.jsonl"));
    assert_eq!(lines.last().unwrap()["event_type"], "session_end");
}

#[tokio::test]
async fn a_running_session_describes_itself_as_running() {
    let dir = tempfile::tempdir().unwrap();
    let spec = root_spec(
        dir.path(),
        Replies::new([Reply::Hang]).driver(),
        Grants::default(),
        Canned::new().executors(),
    );
    let tree = Tree::start(spec, SupervisorArgs::default()).await;
    let session = ractor::call!(tree.supervisor, |reply| SupervisorMsg::Lookup {
        session_id: None,
        reply
    })
    .unwrap()
    .expect("the root is live");
    let status = ractor::call!(session, SessionMsg::Describe).unwrap();
    assert_eq!(status.state, "running");
    assert_eq!(status.exit_status, None);
    assert_eq!(status.turns, 0);
    assert_eq!(status.name, "kit");
    tree.cancel("done looking");
    assert_eq!(tree.report().await.exit_status, ExitStatus::Canceled);
}

#[tokio::test]
async fn delegate_task_answers_with_the_child_it_started_in_the_originals_order() {
    let dir = tempfile::tempdir().unwrap();
    let children = ChildModels::new(
        [("acme/leaf", Replies::new([Reply::say("done")]))],
        Canned::new().executors(),
    );
    let model = Replies::new([
        Reply::call(
            "delegate-task",
            json!({"capsule": "leaf", "version": "0.1.0", "task": "go"}),
        ),
        Reply::say("waiting"),
        Reply::say("all in"),
    ]);
    let grants = Grants {
        spawn_allow: vec!["acme/leaf".into()],
        ..Grants::default()
    };
    let mut spec = root_spec(
        dir.path(),
        model.driver(),
        grants,
        Canned::new().executors(),
    );
    // Content capture writes each tool call's output into its line.
    spec.capture = mur_actors::spec::Capture::Content;
    let records = spec.paths.records_dir.clone();
    let args = SupervisorArgs {
        resolver: Some(Arc::new(children)),
        ..SupervisorArgs::default()
    };
    let report = run(spec, args).await;
    assert_eq!(report.exit_status, ExitStatus::Ok, "{}", report.result);
    let lines = trace_lines(&records.join("trace.jsonl"));
    let start = of_type(&lines, "delegation_start")[0];
    let text = |v: &Value| v.as_str().unwrap().to_string();
    let expected = format!(
        r#"{{"delegation_id":"{}","session_id":"{}","capsule":"leaf","version":"0.1.0","status":"started","child_workdir":"{}"}}"#,
        text(&start["delegation_id"]),
        text(&start["child_session_id"]),
        text(&start["child_workdir"]),
    );
    let call = of_type(&lines, "tool_call")[0];
    let output = text(&call["output"]);
    assert!(output.contains(&expected), "{output}\nwanted {expected}");
    assert_eq!(call["output_bytes"], expected.len());
    // The folder is the child's own, under the parent's records.
    assert!(
        text(&start["child_workdir"]).starts_with(&records.join("children").display().to_string())
    );
}

/// An executor with a bug: it panics on every call.
struct Panicking;

#[async_trait::async_trait]
impl mur_actors::tool::ToolExecutor for Panicking {
    async fn execute(
        &self,
        _request: mur_actors::tool::ExecRequest,
    ) -> mur_actors::tool::ExecResult {
        panic!("executor bug")
    }
}

#[tokio::test]
async fn a_tool_call_that_panics_is_the_calls_error_and_the_task_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let broken: Arc<dyn mur_actors::tool::ToolExecutor> = Arc::new(Panicking);
    let executors = mur_actors::tool::Executors {
        shell: broken.clone(),
        native: broken.clone(),
        skill: broken,
        runtime: Default::default(),
    };
    let model = Replies::new([
        Reply::call("bash", json!({"command": "ls"})),
        Reply::say("done anyway"),
    ]);
    let spec = root_spec(dir.path(), model.driver(), shell(&["bash"]), executors);
    let records = spec.paths.records_dir.clone();
    let report = run(spec, SupervisorArgs::default()).await;
    assert_eq!(report.exit_status, ExitStatus::Ok, "{}", report.result);
    assert_eq!(report.result, "done anyway");
    let lines = trace_lines(&records.join("trace.jsonl"));
    let calls = of_type(&lines, "tool_call");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["tool_name"], "bash");
    assert_eq!(calls[0]["status"], "error");
    assert_eq!(
        calls[0]["error"],
        "tool 'bash' failed inside the runtime (it panicked: executor bug); the call did not complete"
    );
}
