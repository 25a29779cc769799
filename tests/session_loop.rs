//! The turn loop on the real kernel, driven by the scripted model and real shell subprocesses,
//! without the CLI: trace lines, result file, refusals, limits and cancel.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

mod common;

use common::alive;
use mur::drivers::script::ScriptDriver;
use mur_actors::record_error::RecordError;
use mur_actors::session::{ExitStatus, SessionReport};
use mur_actors::spec::{Grants, SessionPaths, SessionSpec};
use mur_actors::supervisor::{Supervisor, SupervisorArgs, SupervisorMsg};
use mur_actors::testkit::{self, Tree};
use ractor::Actor;
use serde_json::Value;

fn spec(dir: &Path, script: &str, shell_allow: &[&str], max_turns: Option<u32>) -> SessionSpec {
    let driver = ScriptDriver::from_str(script, &dir.join("script.yaml")).unwrap();
    let session_id = mur_actors::ids::session_id();
    let records = dir.join("workdir").join(&session_id);
    let grants = Grants {
        shell_allow: shell_allow.iter().map(|s| s.to_string()).collect(),
        ..Grants::default()
    };
    let paths = SessionPaths {
        workdir: records.clone(),
        records_dir: records,
    };
    let executors = mur::tools::executors(
        Duration::from_secs(30),
        std::sync::Arc::new(mur::contain::Sandbox::uncontained(std::env::temp_dir())),
    );
    let mut spec = SessionSpec::new(
        session_id,
        "loop-test",
        Arc::new(driver),
        grants,
        "do the thing".into(),
        paths,
        executors,
    );
    spec.max_turns = max_turns;
    spec
}

/// Run `spec` to its end on a fresh tree.
async fn run(spec: SessionSpec) -> SessionReport {
    testkit::run(spec, SupervisorArgs::default()).await
}

/// Start `spec`, wait for its trace to hold an `event_type` line, cancel the tree (Ctrl-C), and
/// return its report: the cancel lands at a known point, whatever the machine's load.
async fn cancel_after_line(spec: SessionSpec, event_type: &str) -> SessionReport {
    let tree = Tree::start(spec, SupervisorArgs::default()).await;
    tree.wait_for_line(event_type).await;
    tree.cancel("test");
    tree.report().await
}

fn trace(records: &Path) -> Vec<Value> {
    testkit::trace_lines(&records.join("trace.jsonl"))
}

fn types(lines: &[Value]) -> Vec<String> {
    testkit::event_types(lines)
}

#[tokio::test]
async fn shell_calls_run_in_order_and_the_trace_counts_match() {
    let dir = tempfile::tempdir().unwrap();
    let script = "
turns:
  - call:
      - {tool: bash, input: {command: 'echo one > f.txt; echo hi'}}
      - {tool: nope, input: {}}
  - expect: 'not declared in manifest allowlist'
    call: [{tool: bash, input: {command: 'cat f.txt; exit 3'}}]
  - expect: 'Exit code: 3'
    say: done
";
    let s = spec(dir.path(), script, &["bash"], None);
    let records = s.paths.records_dir.clone();
    let report = run(s).await;
    assert_eq!(report.exit_status, ExitStatus::Ok, "{}", report.result);
    assert_eq!(report.result, "done");
    assert_eq!(
        std::fs::read_to_string(records.join("out/result.txt")).unwrap(),
        "done"
    );
    let lines = trace(&records);
    assert_eq!(
        types(&lines),
        [
            "session_start",
            "task_start",
            "inference",
            "tool_call",
            "shell",
            "tool_call",
            "inference",
            "tool_call",
            "shell",
            "inference",
            "task_end",
            "session_end"
        ]
    );
    assert_eq!(lines[0]["tools_declared"], serde_json::json!(["bash"]));
    assert_eq!(lines[5]["status"], "error");
    assert_eq!(
        lines[5]["error"],
        "tool 'nope' is not declared in manifest allowlist: no artifacts: entry, skill or capabilities.shell.allow entry names it"
    );
    assert_eq!(lines[8]["exit_code"], 3);
    let end = &lines[11];
    assert_eq!(end["total_turns"], 3);
    assert_eq!(end["total_tool_calls"], 3);
    assert_eq!(end["total_shell_calls"], 2);
    assert_eq!(end["exit_status"], "ok");
    // Every parent id names a line already in the file.
    for (i, l) in lines.iter().enumerate().skip(1) {
        let parent = l["parent_id"].as_str().unwrap();
        assert!(
            lines[..i].iter().any(|p| p["event_id"] == parent),
            "line {i}"
        );
    }
    assert!(records.join("tools/bash/murmur.yaml").exists());
    assert!(records.join("f.txt").exists());
}

#[tokio::test]
async fn max_turns_ends_the_task_with_the_upstream_text() {
    let dir = tempfile::tempdir().unwrap();
    let script = "
turns:
  - call: [{tool: bash, input: {command: 'true'}}]
  - call: [{tool: bash, input: {command: 'true'}}]
  - say: never
";
    let s = spec(dir.path(), script, &["bash"], Some(2));
    let report = run(s).await;
    assert_eq!(report.exit_status, ExitStatus::MaxTurnsReached);
    assert_eq!(
        report.result,
        "error: max_turns exceeded: the task used all 2 inference turns inference.max_turns allows (turn 0 to turn 1)"
    );
}

#[tokio::test]
async fn cancel_during_a_model_call_ends_canceled_with_a_complete_trace() {
    let dir = tempfile::tempdir().unwrap();
    let script = "
turns:
  - delay_ms: 30000
    say: too late
";
    let s = spec(dir.path(), script, &[], None);
    let records = s.paths.records_dir.clone();
    let started = std::time::Instant::now();
    // The first model call is out before task_start is written.
    let report = cancel_after_line(s, "task_start").await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(report.exit_status, ExitStatus::Canceled);
    let lines = trace(&records);
    assert_eq!(
        types(&lines),
        [
            "session_start",
            "task_start",
            "task_canceled",
            "task_end",
            "session_end"
        ]
    );
    assert_eq!(lines[2]["phase"], "inference");
    assert_eq!(lines[4]["exit_status"], "canceled");
}

#[tokio::test]
async fn cancel_kills_a_running_command() {
    let dir = tempfile::tempdir().unwrap();
    let script = "
turns:
  - call: [{tool: bash, input: {command: 'sleep 30'}}]
  - say: never
";
    let s = spec(dir.path(), script, &["bash"], None);
    let started = std::time::Instant::now();
    // The reply asking for the command is recorded before the command starts.
    let report = cancel_after_line(s, "inference").await;
    assert_eq!(report.exit_status, ExitStatus::Canceled);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn driver_errors_fail_the_task_with_a_traced_cause() {
    let dir = tempfile::tempdir().unwrap();
    let s = spec(
        dir.path(),
        "
turns:
  - error: provider exploded
",
        &[],
        None,
    );
    let records = s.paths.records_dir.clone();
    let report = run(s).await;
    assert_eq!(report.exit_status, ExitStatus::Failed);
    assert_eq!(report.result, "error: provider exploded");
    let lines = trace(&records);
    assert_eq!(
        types(&lines),
        [
            "session_start",
            "task_start",
            "inference",
            "task_failed",
            "task_end",
            "session_end"
        ]
    );
    assert_eq!(lines[2]["decision"], "error");
    assert_eq!(lines[3]["cause"], "driver_error");
    assert_eq!(lines[5]["total_turns"], 0);
}

fn hook(dir: &Path, name: &str, body: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

#[tokio::test]
async fn policy_hooks_deny_calls_before_they_run_and_fail_closed() {
    use mur::tools::hooks::{HookGate, PolicyHook};
    let dir = tempfile::tempdir().unwrap();
    // Denies any shell command mentioning rm; proceeds otherwise.
    let guard = hook(
        dir.path(),
        "no-rm",
        r#"read -r event; case "$event" in *'"command":"rm'*) echo '{"decision":"deny","reason":"rm is not allowed here"}';; *) echo '{"decision":"none"}';; esac"#,
    );
    // Answers garbage: every tool call it is asked about is refused.
    let broken = hook(dir.path(), "broken", "cat >/dev/null; echo nonsense");
    let script = "turns:
  - call:
      - {tool: bash, input: {command: 'rm -rf precious'}}
      - {tool: bash, input: {command: 'echo fine > made.txt'}}
      - {tool: nope, input: {}}
  - expect: 'failed at the'
    say: done
";
    let mut s = spec(dir.path(), script, &["bash"], None);
    let records = s.paths.records_dir.clone();
    s.gate = Some(Arc::new(HookGate {
        hooks: vec![
            PolicyHook {
                name: "acme/no-rm".into(),
                entrypoint: guard,
                on_tool_call: false,
                on_shell: true,
            },
            PolicyHook {
                name: "acme/broken".into(),
                entrypoint: broken,
                on_tool_call: true,
                on_shell: false,
            },
        ],
        shell_allow: vec!["bash".into()],
        native_tools: vec![],
        workdir: records.clone(),
        records_dir: records.clone(),
        sandbox: Arc::new(mur::contain::Sandbox::uncontained(records.clone())),
    }));
    std::fs::create_dir_all(records.join("precious")).unwrap();
    let report = run(s).await;
    assert_eq!(report.exit_status, ExitStatus::Ok, "{}", report.result);
    assert!(
        records.join("precious").exists(),
        "the denied command never ran"
    );
    assert!(records.join("made.txt").exists(), "the allowed one did");
    let lines = trace(&records);
    let denied: Vec<&Value> = lines
        .iter()
        .filter(|l| l["event_type"] == "call_denied")
        .collect();
    assert_eq!(denied.len(), 2);
    assert_eq!(denied[0]["event"], "on-shell");
    assert_eq!(denied[0]["hook_name"], "acme/no-rm");
    assert_eq!(denied[0]["reason"], "rm is not allowed here");
    assert!(denied[0]["target"].as_str().unwrap().ends_with("/bash"));
    assert_eq!(denied[1]["event"], "on-tool-call");
    assert_eq!(denied[1]["target"], "nope");
    assert!(denied[1]["reason"]
        .as_str()
        .unwrap()
        .starts_with("policy hook 'acme/broken' failed at the 'on-tool-call' decision point: its answer is not JSON"));
    // Only the call that ran has tool_call and shell lines.
    assert_eq!(
        lines
            .iter()
            .filter(|l| l["event_type"] == "tool_call")
            .count(),
        1
    );
    assert_eq!(
        lines.iter().filter(|l| l["event_type"] == "shell").count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_after_a_plan_kills_the_next_running_command() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("sleep 53.{}", std::process::id());
    let script = format!(
        "
turns:
  - call: [{{tool: submit-plan, input: {{plan: {{id: p, steps: [{{id: a, shell: \"true\"}}]}}}}}}]
  - call: [{{tool: bash, input: {{command: '{marker}'}}}}]
  - say: never
"
    );
    let mut s = spec(dir.path(), &script, &["bash", "true"], None);
    s.grants.plan_submit = true;
    s.tools = mur_actors::provided::provided_tools(&s.grants);
    let (sup, handle) = Actor::spawn(None, Supervisor, SupervisorArgs::default())
        .await
        .unwrap();
    let rx = ractor::call!(sup, |reply| SupervisorMsg::StartRoot {
        spec: Box::new(s),
        reply
    })
    .unwrap()
    .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !alive(&marker) {
        assert!(
            std::time::Instant::now() < deadline,
            "the command never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = sup.send_message(SupervisorMsg::Shutdown {
        reason: "test".into(),
    });
    let report = tokio::time::timeout(Duration::from_secs(20), rx)
        .await
        .expect("session ended in time")
        .unwrap();
    assert_eq!(report.exit_status, ExitStatus::Canceled);
    // This process lives on: nothing but the cancel itself can have ended the command.
    let gone = std::time::Instant::now() + Duration::from_secs(5);
    while alive(&marker) {
        assert!(
            std::time::Instant::now() < gone,
            "the canceled command is still running"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    sup.stop(None);
    handle.await.unwrap();
}

/// A shell executor with a bug: it panics.
struct Panics;

#[async_trait::async_trait]
impl mur_actors::tool::ToolExecutor for Panics {
    async fn execute(&self, _: mur_actors::tool::ExecRequest) -> mur_actors::tool::ExecResult {
        panic!("executor bug on purpose")
    }
}

#[tokio::test]
async fn a_panicking_tool_call_is_an_error_for_the_model_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let script = "
turns:
  - call: [{tool: bash, input: {command: 'true'}}]
  - expect: 'it panicked: executor bug on purpose'
    say: the tool broke
";
    let mut s = spec(dir.path(), script, &["bash"], None);
    s.executors.shell = Arc::new(Panics);
    let records = s.paths.records_dir.clone();
    let report = run(s).await;
    assert_eq!(report.exit_status, ExitStatus::Ok, "{}", report.result);
    assert_eq!(report.result, "the tool broke");
    let t = trace(&records);
    let call = t.iter().find(|l| l["event_type"] == "tool_call").unwrap();
    assert_eq!(call["status"], "error");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_tree_leaves_no_command_running() {
    // Killed actors skip `post_stop`: the Dispatcher's running call must still die with it.
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("sleep 54.{}", std::process::id());
    let script = format!(
        "
turns:
  - call: [{{tool: bash, input: {{command: '{marker}'}}}}]
  - say: never
"
    );
    let s = spec(dir.path(), &script, &["bash"], None);
    let (sup, handle) = Actor::spawn(None, Supervisor, SupervisorArgs::default())
        .await
        .unwrap();
    let _rx = ractor::call!(sup, |reply| SupervisorMsg::StartRoot {
        spec: Box::new(s),
        reply
    })
    .unwrap()
    .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !alive(&marker) {
        assert!(
            std::time::Instant::now() < deadline,
            "the command never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    sup.kill();
    handle.await.unwrap();
    let gone = std::time::Instant::now() + Duration::from_secs(5);
    while alive(&marker) {
        assert!(
            std::time::Instant::now() < gone,
            "the command outlived its killed session"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_that_cannot_be_written_ends_the_session_failed_naming_the_file() {
    // A full disk, for this one file: its trace is /dev/full, where every write fails ENOSPC.
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("sleep 55.{}", std::process::id());
    let script = format!(
        "
turns:
  - call: [{{tool: bash, input: {{command: '{marker}'}}}}]
  - say: never
"
    );
    let s = spec(dir.path(), &script, &["bash"], None);
    let records = s.paths.records_dir.clone();
    std::fs::create_dir_all(&records).unwrap();
    std::os::unix::fs::symlink("/dev/full", records.join("trace.jsonl")).unwrap();
    let report = run(s).await;
    assert_eq!(report.exit_status, ExitStatus::Failed, "{}", report.result);
    let want = format!(
        "trace write failed: {}: No space left on device",
        records.join("trace.jsonl").display()
    );
    assert!(report.result.contains(&want), "{}", report.result);
    // The error is typed: the trace's write failure, naming the file, under E-RUN-007.
    let error = report
        .trace_error
        .as_ref()
        .expect("the report carries the error");
    assert!(
        matches!(error, RecordError::TraceWrite { path, .. } if path == &records.join("trace.jsonl")),
        "{error:?}"
    );
    assert!(error.to_string().starts_with(&want), "{error}");
    assert_eq!(error.code(), "E-RUN-007");
    // The session did not run on unrecorded: its command (if it started) was ended with it.
    let gone = std::time::Instant::now() + Duration::from_secs(5);
    while alive(&marker) {
        assert!(
            std::time::Instant::now() < gone,
            "the command outlived the failed session"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // What could be written still was: the result file names the error.
    let result = std::fs::read_to_string(records.join("out/result.txt")).unwrap();
    assert!(result.contains(&want), "{result}");
}
