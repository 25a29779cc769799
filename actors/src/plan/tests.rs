//! `run_plan` driven end to end through a recording [`StepRunner`].
//!
//! The runner behaves like a tiny session: tool `echo` answers its input, tool `fail` fails,
//! tool `flaky` fails until its Nth call, tool `meet` and shell `meet` wait at a shared barrier
//! (a wave that did not run them together would hang, and the test would time out), shell
//! `echo` prints its arguments, shell `false` exits 1, shell `hang` never ends, and a capsule
//! answers `<capsule>@<version>: <task>`. Every dispatch and every trace line is recorded.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::{watch, Barrier};

use super::*;
use crate::trace::TraceEvent;

#[derive(Default)]
struct Recorder {
    calls: Mutex<Vec<String>>,
    events: Mutex<Vec<TraceEvent>>,
    flaky_fails: AtomicUsize,
    tools_in_flight: AtomicUsize,
    max_tools_in_flight: AtomicUsize,
    barrier: Option<Arc<Barrier>>,
}

impl Recorder {
    fn new() -> Arc<Self> {
        Arc::new(Recorder::default())
    }

    fn with_barrier(n: usize) -> Arc<Self> {
        Arc::new(Recorder {
            barrier: Some(Arc::new(Barrier::new(n))),
            ..Recorder::default()
        })
    }

    fn flaky(failures: usize) -> Arc<Self> {
        let r = Recorder::default();
        r.flaky_fails.store(failures, Ordering::SeqCst);
        Arc::new(r)
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }

    fn log(&self, call: String) {
        self.calls.lock().unwrap().push(call);
    }

    /// `(event_type, parent_id, fields)` of every trace line, in order.
    fn lines(&self) -> Vec<(String, Option<String>, Value)> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e.event_type.to_string(),
                    e.parent_id.clone(),
                    Value::Object(e.fields()),
                )
            })
            .collect()
    }

    fn lines_of(&self, kind: &str) -> Vec<Value> {
        self.lines()
            .into_iter()
            .filter(|(t, _, _)| t == kind)
            .map(|(_, _, f)| f)
            .collect()
    }

    async fn meet(&self) {
        let barrier = self.barrier.as_ref().expect("test needs a barrier");
        barrier.wait().await;
    }
}

#[async_trait::async_trait]
impl StepRunner for Recorder {
    async fn run_tool(&self, tool: &str, input: Value) -> StepOutcome {
        self.log(format!("tool {tool} {input}"));
        let now = self.tools_in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_tools_in_flight.fetch_max(now, Ordering::SeqCst);
        let outcome = match tool {
            "echo" => StepOutcome::Success {
                output: input.to_string(),
            },
            "slow" => {
                tokio::time::sleep(Duration::from_millis(30)).await;
                StepOutcome::Success {
                    output: "slow done".into(),
                }
            }
            "meet" => {
                self.meet().await;
                StepOutcome::Success {
                    output: "met".into(),
                }
            }
            "hang" => std::future::pending().await,
            "flaky" => {
                let left = self.flaky_fails.load(Ordering::SeqCst);
                if left > 0 {
                    self.flaky_fails.store(left - 1, Ordering::SeqCst);
                    StepOutcome::Failed {
                        error: format!("flaky: {left} failure(s) left"),
                    }
                } else {
                    StepOutcome::Success {
                        output: "steady".into(),
                    }
                }
            }
            _ => StepOutcome::Failed {
                error: "tool step failed".into(),
            },
        };
        self.tools_in_flight.fetch_sub(1, Ordering::SeqCst);
        outcome
    }

    async fn run_shell(&self, argv: Vec<String>) -> StepOutcome {
        self.log(format!("shell {}", argv.join(" ")));
        match argv[0].as_str() {
            "echo" => StepOutcome::Success {
                output: format!("{}\n", argv[1..].join(" ")),
            },
            "meet" => {
                self.meet().await;
                StepOutcome::Success {
                    output: argv[1..].join(" "),
                }
            }
            "hang" => std::future::pending().await,
            _ => StepOutcome::Failed {
                error: "exit code 1".into(),
            },
        }
    }

    async fn run_capsule(&self, capsule: &str, version: &str, task: &str) -> StepOutcome {
        self.log(format!("capsule {capsule}@{version} {task}"));
        StepOutcome::Success {
            output: format!("{capsule}@{version}: {task}"),
        }
    }

    fn trace(&self, event: TraceEvent) {
        self.events.lock().unwrap().push(event);
    }
}

fn ctx() -> PlanContext {
    PlanContext {
        tools: [
            "echo",
            "fail",
            "flaky",
            "slow",
            "meet",
            "hang",
            "bash",
            "delegate-task",
        ]
        .map(String::from)
        .to_vec(),
        shell_allow: ["echo", "false", "meet", "hang", "bash"]
            .map(String::from)
            .to_vec(),
        capsules: vec!["researcher".into()],
        parent_event: "evt_call".into(),
    }
}

async fn run(recorder: &Arc<Recorder>, plan: Value) -> PlanReport {
    let (_tx, rx) = watch::channel(false);
    let runner: Arc<dyn StepRunner> = recorder.clone();
    tokio::time::timeout(
        Duration::from_secs(5),
        run_plan(&json!({ "plan": plan }), &ctx(), runner, rx),
    )
    .await
    .expect("the plan finished (a wave that should overlap did not)")
}

/// `(step_id, status, output, error)` of each reported step.
fn steps(report: &PlanReport) -> Vec<(String, String, Value, Value)> {
    report.data["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["step_id"].as_str().unwrap().to_string(),
                s["status"].as_str().unwrap().to_string(),
                s["output"].clone(),
                s["error"].clone(),
            )
        })
        .collect()
}

fn step(id: &str, status: &str, output: Value, error: Value) -> (String, String, Value, Value) {
    (id.to_string(), status.to_string(), output, error)
}

#[tokio::test]
async fn waves_follow_dependencies_and_settle_in_declaration_order() {
    let r = Recorder::new();
    let report = run(
        &r,
        json!({"id": "p", "steps": [
            {"id": "last", "shell": "echo three", "depends_on": ["mid"]},
            {"id": "mid", "shell": "echo two", "depends_on": ["first", "side"]},
            {"id": "first", "shell": "echo one"},
            {"id": "side", "tool": "echo", "input": {"n": 1}},
        ]}),
    )
    .await;
    assert!(report.completed);
    let order: Vec<String> = steps(&report).into_iter().map(|s| s.0).collect();
    assert_eq!(order, ["first", "side", "mid", "last"]);
    let calls = r.calls();
    assert_eq!(&calls[2..], ["shell echo two", "shell echo three"]);
    let starts: Vec<Value> = r
        .lines_of("plan_step_start")
        .into_iter()
        .map(|l| l["step_id"].clone())
        .collect();
    assert_eq!(
        starts,
        [json!("first"), json!("side"), json!("mid"), json!("last")]
    );
}

#[tokio::test]
async fn shell_steps_of_one_wave_run_at_the_same_time() {
    // Each `meet` waits until both have arrived: run one after the other, they never return.
    let r = Recorder::with_barrier(2);
    let report = run(
        &r,
        json!({"id": "p", "steps": [
            {"id": "a", "shell": "meet left"},
            {"id": "b", "shell": "meet right"},
        ]}),
    )
    .await;
    assert!(report.completed, "{}", report.text());
    assert_eq!(report.data["steps"][0]["output"], "left");
    assert_eq!(report.data["steps"][1]["output"], "right");
}

#[tokio::test]
async fn tool_steps_take_turns_but_run_beside_shell_steps() {
    let r = Recorder::with_barrier(2);
    let report = run(
        &r,
        json!({"id": "p", "steps": [
            {"id": "t1", "tool": "slow"},
            {"id": "t2", "tool": "slow"},
            {"id": "t3", "tool": "meet"},
            {"id": "s", "shell": "meet shell"},
        ]}),
    )
    .await;
    assert!(report.completed, "{}", report.text());
    assert_eq!(r.max_tools_in_flight.load(Ordering::SeqCst), 1);
    assert_eq!(
        r.calls().iter().filter(|c| c.starts_with("tool ")).count(),
        3
    );
}

#[tokio::test]
async fn conditions_run_skip_or_stop_the_plan() {
    let r = Recorder::new();
    let report = run(
        &r,
        json!({"id": "p", "steps": [
            {"id": "a", "shell": "echo hi"},
            {"id": "yes", "shell": "echo yes", "depends_on": ["a"], "if": "$a.status == 'success' && $a.output != ''"},
            {"id": "no", "shell": "echo no", "depends_on": ["a"], "if": "$a.status == 'failed'"},
            {"id": "after_no", "shell": "echo after", "depends_on": ["no"], "if": "$no.status == 'skipped'"},
            {"id": "bad", "shell": "echo bad", "depends_on": ["yes"], "if": "$yes.output"},
            {"id": "never", "shell": "echo never", "depends_on": ["bad"]},
        ]}),
    )
    .await;
    assert!(!report.completed);
    assert_eq!(report.data["failed_step"], "bad");
    assert_eq!(
        steps(&report),
        [
            step("a", "success", json!("hi\n"), Value::Null),
            step("no", "skipped", Value::Null, Value::Null),
            step("yes", "success", json!("yes\n"), Value::Null),
            step("after_no", "success", json!("after\n"), Value::Null),
            step(
                "bad",
                "failed",
                Value::Null,
                json!("unsupported condition expression '$yes.output'")
            ),
        ]
    );
    let mut calls = r.calls();
    calls.sort();
    assert_eq!(
        calls,
        ["shell echo after", "shell echo hi", "shell echo yes"]
    );
    // Neither undispatched step claims an attempt or a start line.
    let lines = r.lines_of("plan_step");
    let no = lines.iter().find(|l| l["step_id"] == "no").unwrap();
    assert_eq!(
        (no["status"].clone(), no["attempts"].clone()),
        (json!("skipped"), json!(0))
    );
    let bad = lines.iter().find(|l| l["step_id"] == "bad").unwrap();
    assert_eq!(bad["attempts"], 0);
    let started: Vec<Value> = r
        .lines_of("plan_step_start")
        .iter()
        .map(|l| l["step_id"].clone())
        .collect();
    assert!(!started.contains(&json!("no")) && !started.contains(&json!("bad")));
}

#[tokio::test]
async fn references_substitute_output_and_status_at_any_depth() {
    let r = Recorder::new();
    let report = run(
        &r,
        json!({"id": "p", "steps": [
            {"id": "a", "shell": "echo hi there"},
            {"id": "b", "tool": "echo", "depends_on": ["a"],
             "input": {"text": "$a.output", "meta": [{"st": "$a.status"}, "keep $a.output"]}},
            {"id": "c", "capsule": "researcher", "depends_on": ["a"], "input": {"objective": "$a.output"}},
        ]}),
    )
    .await;
    assert!(report.completed, "{}", report.text());
    let calls = r.calls();
    assert!(calls.contains(
        &r#"tool echo {"text":"hi there\n","meta":[{"st":"success"},"keep $a.output"]}"#
            .to_string()
    ));
    assert!(
        calls.contains(&"capsule researcher@0.1.0 hi there\n".to_string()),
        "{calls:?}"
    );
    // The tool step's interpolated input is on its plan_step line.
    let b = r
        .lines_of("plan_step")
        .into_iter()
        .find(|l| l["step_id"] == "b")
        .unwrap();
    assert_eq!(
        b["input"],
        json!({"text": "hi there\n", "meta": [{"st": "success"}, "keep $a.output"]})
    );
}

#[tokio::test]
async fn references_that_cannot_be_read_fail_the_step() {
    let r = Recorder::new();
    let report = run(
        &r,
        json!({"id": "p", "steps": [
            {"id": "a", "shell": "echo hi"},
            {"id": "early", "tool": "echo", "input": {"x": "$a.output"}, "on_error": "continue"},
            {"id": "f", "shell": "false", "on_error": "continue"},
            {"id": "empty", "tool": "echo", "depends_on": ["f"], "input": "$f.output", "on_error": "continue"},
            {"id": "home", "tool": "echo", "input": ["$HOME"], "on_error": "continue"},
        ]}),
    )
    .await;
    let got = steps(&report);
    assert_eq!(
        got[1],
        step(
            "early",
            "failed",
            Value::Null,
            json!("reference '$a.output' is not ready")
        )
    );
    assert_eq!(
        got[3],
        step(
            "home",
            "failed",
            Value::Null,
            json!("invalid reference '$HOME'")
        )
    );
    assert_eq!(
        got[4],
        step(
            "empty",
            "failed",
            Value::Null,
            json!("reference '$f.output' has no output")
        )
    );
    assert!(report.completed, "continue keeps the plan going");
}

#[tokio::test]
async fn on_error_fail_stops_skip_records_skipped_continue_goes_on() {
    let r = Recorder::new();
    let report = run(
        &r,
        json!({"id": "p", "steps": [
            {"id": "s", "tool": "fail", "on_error": "skip"},
            {"id": "c", "shell": "false", "on_error": "continue"},
            {"id": "d", "shell": "echo $s.status", "depends_on": ["s", "c"]},
            {"id": "f", "tool": "fail", "depends_on": ["d"]},
            {"id": "g", "shell": "echo unreachable", "depends_on": ["f"]},
        ]}),
    )
    .await;
    assert!(!report.completed);
    assert_eq!(report.data["failed_step"], "f");
    assert_eq!(
        steps(&report),
        [
            step("s", "skipped", Value::Null, json!("tool step failed")),
            step("c", "failed", Value::Null, json!("exit code 1")),
            step("d", "success", json!("$s.status\n"), Value::Null),
            step("f", "failed", Value::Null, json!("tool step failed")),
        ]
    );
    assert!(!r.calls().iter().any(|c| c.contains("unreachable")));
    let end = &r.lines_of("plan_end")[0];
    assert_eq!(end["outcome"], "failed");
    assert_eq!(end["failed_step"], "f");
}

#[tokio::test]
async fn retries_rerun_a_failed_step_until_attempts_run_out() {
    let r = Recorder::flaky(2);
    let report = run(
        &r,
        json!({"id": "p", "steps": [{"id": "x", "tool": "flaky", "retries": 2}]}),
    )
    .await;
    assert!(report.completed);
    assert_eq!(report.data["steps"][0]["output"], "steady");
    assert_eq!(r.calls().len(), 3);
    assert_eq!(r.lines_of("plan_step")[0]["attempts"], 3);

    let r = Recorder::flaky(5);
    let report = run(
        &r,
        json!({"id": "p", "steps": [{"id": "x", "tool": "flaky", "retries": 1}]}),
    )
    .await;
    assert!(!report.completed);
    assert_eq!(report.data["steps"][0]["error"], "flaky: 4 failure(s) left");
    assert_eq!(r.calls().len(), 2);
    assert_eq!(r.lines_of("plan_step")[0]["attempts"], 2);

    // The bound itself is allowed: 20 retries are 21 attempts.
    let r = Recorder::flaky(100);
    let report = run(
        &r,
        json!({"id": "p", "steps": [{"id": "x", "tool": "flaky", "retries": MAX_STEP_RETRIES}]}),
    )
    .await;
    assert!(!report.completed);
    assert_eq!(r.calls().len(), 21);
}

#[tokio::test]
async fn every_validation_rule_refuses_the_whole_plan_with_its_sentence() {
    let cases: Vec<(Value, &str, &str)> = vec![
        (json!([{"id": "a", "shell": "echo"}, {"id": "a", "shell": "echo"}]), "a", "duplicate step id 'a'"),
        (json!([{"id": "a"}]), "a", "step must declare exactly one of tool, shell, or capsule"),
        (json!([{"id": "a", "tool": "echo", "shell": "echo"}]), "a", "step declares more than one of tool, shell, or capsule"),
        (json!([{"id": "a", "tool": "submit-plan"}]), "a", "a plan step cannot submit another plan: 'submit-plan' is not callable from inside a plan"),
        (json!([{"id": "a", "tool": "pull-artifact"}]), "a", "'pull-artifact' is not callable from inside a plan"),
        (json!([{"id": "a", "tool": "remove-artifact"}]), "a", "'remove-artifact' is not callable from inside a plan"),
        (json!([{"id": "a", "tool": "grep"}]), "a", "tool 'grep' is not installed"),
        (json!([{"id": "a", "shell": "   "}]), "a", "shell command is empty"),
        (json!([{"id": "a", "shell": "rm -rf /"}]), "a", "binary 'rm' is not in capabilities.shell.allow"),
        (json!([{"id": "a", "capsule": "writer", "input": "x"}]), "a", "capsule 'writer' is not in capabilities.spawn.allow"),
        (json!([{"id": "a", "capsule": "researcher", "input": 5}]), "a", "capsule step input must be a string or { \"objective\": \"<text>\" }, not a number"),
        (json!([{"id": "a", "shell": "echo", "on_error": "retry"}]), "a", "invalid on_error policy 'retry'"),
        (json!([{"id": "a", "shell": "echo", "retries": 21}]), "a", "retries 21 is more than 20, the most a step may ask for"),
        (json!([{"id": "a", "shell": "false", "retries": 4_000_000_000u32}]), "a", "retries 4000000000 is more than 20, the most a step may ask for"),
        (json!([{"id": "a", "shell": "echo", "depends_on": ["ghost"]}]), "a", "unknown dependency 'ghost'"),
        (json!([{"id": "a", "tool": "echo", "input": {"x": ["$ghost.output"]}}]), "a", "unknown reference '$ghost.output'"),
        (json!([{"id": "a", "shell": "echo"}, {"id": "b", "shell": "echo", "if": "$a.stdout == 'x'"}]), "b", "unknown reference field 'stdout'"),
        (json!([
            {"id": "ok", "shell": "echo"},
            {"id": "x", "shell": "echo", "depends_on": ["ok", "z"]},
            {"id": "y", "shell": "echo", "depends_on": ["x"]},
            {"id": "z", "shell": "echo", "depends_on": ["y"]},
        ]), "x", "plan is blocked by a dependency cycle or missing dependency"),
        (json!([{"id": "self", "shell": "echo", "depends_on": ["self"]}]), "self", "plan is blocked by a dependency cycle or missing dependency"),
    ];
    for (steps_json, step_id, error) in cases {
        let r = Recorder::new();
        let n = steps_json.as_array().unwrap().len();
        let report = run(&r, json!({"id": "v", "steps": steps_json})).await;
        assert_eq!(
            report.data,
            json!({"plan_id": "v", "completed": false, "canceled": false, "failed_step": step_id,
                   "steps": [{"step_id": step_id, "status": "failed", "output": null, "error": error}]}),
            "{error}"
        );
        assert_eq!(
            report.summary,
            format!("Plan 'v': {n} steps, 0 succeeded, 1 failed, 0 skipped")
        );
        assert!(
            r.calls().is_empty(),
            "nothing runs when a plan is refused: {error}"
        );
        let kinds: Vec<String> = r.lines().into_iter().map(|l| l.0).collect();
        assert_eq!(kinds, ["plan_start", "plan_end"], "{error}");
        let end = &r.lines_of("plan_end")[0];
        assert_eq!(end["reason"], error);
        assert_eq!(end["failed_step"], step_id);
    }
}

#[tokio::test]
async fn input_without_a_plan_object_is_one_failed_plan_step() {
    for input in [
        json!("plan"),
        json!({"plan": 3}),
        json!({"plan": {"id": "p"}}),
    ] {
        let r = Recorder::new();
        let (_tx, rx) = watch::channel(false);
        let report = run_plan(&input, &ctx(), r.clone(), rx).await;
        let error = report.data["steps"][0]["error"]
            .as_str()
            .unwrap()
            .to_string();
        if input.get("plan").is_some_and(Value::is_object) {
            assert_eq!(error, "failed to parse plan JSON: missing field `steps`");
        } else {
            assert_eq!(error, NOT_A_PLAN);
        }
        assert_eq!(report.data["failed_step"], "plan");
        assert_eq!(
            report.summary,
            "Plan '': 0 steps, 0 succeeded, 1 failed, 0 skipped"
        );
        let lines = r.lines();
        assert_eq!(lines.len(), 1);
        assert_eq!(
            (lines[0].0.as_str(), lines[0].1.as_deref()),
            ("plan_end", Some("evt_call"))
        );
    }
}

#[tokio::test]
async fn cancel_ends_running_steps_and_skips_the_rest() {
    let r = Recorder::new();
    let (tx, rx) = watch::channel(false);
    let plan = json!({"plan": {"id": "c", "steps": [
        {"id": "quick", "shell": "echo ok"},
        {"id": "stuck", "shell": "hang"},
        {"id": "later", "tool": "echo", "depends_on": ["stuck"]},
    ]}});
    let runner: Arc<dyn StepRunner> = r.clone();
    let task = tokio::spawn(async move { run_plan(&plan, &ctx(), runner, rx).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    tx.send(true).unwrap();
    let report = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    assert!(report.canceled && !report.completed);
    assert_eq!(
        steps(&report),
        [
            step("quick", "success", json!("ok\n"), Value::Null),
            step("stuck", "failed", Value::Null, json!("the task running this plan was cancelled; this step's command was ended with it")),
            step("later", "skipped", Value::Null, json!("the task running this plan was cancelled before this step ran")),
        ]
    );
    assert_eq!(
        report.summary,
        "Plan 'c' was cancelled: 3 steps, 1 succeeded, 1 failed, 1 skipped"
    );
    let end = &r.lines_of("plan_end")[0];
    assert_eq!(end["outcome"], "canceled");
    assert_eq!(end["reason"], "the task running this plan was cancelled");
    assert!(!r.calls().iter().any(|c| c.starts_with("tool")));
}

#[tokio::test]
async fn a_plan_cancelled_before_it_starts_runs_nothing() {
    let r = Recorder::new();
    let (tx, rx) = watch::channel(false);
    tx.send(true).unwrap();
    let plan = json!({"plan": {"id": "c", "steps": [{"id": "a", "shell": "echo"}, {"id": "b", "tool": "echo"}]}});
    let report = run_plan(&plan, &ctx(), r.clone(), rx).await;
    assert!(report.canceled);
    assert!(r.calls().is_empty());
    assert_eq!(report.data["steps"][1]["status"], "skipped");
    assert_eq!(report.data["steps"][1]["error"], CANCELLED_BEFORE);
}

#[tokio::test]
async fn a_mixed_plan_reports_exact_json_summary_and_trace() {
    let r = Recorder::new();
    let report = run(
        &r,
        json!({"id": "mixed", "steps": [
            {"id": "list", "shell": "echo a.txt b.txt"},
            {"id": "read", "tool": "echo", "input": {"files": "$list.output"}, "depends_on": ["list"]},
            {"id": "ask", "capsule": "researcher", "version": "1.2.0", "input": "summarise", "depends_on": ["list"]},
            {"id": "broken", "shell": "false", "on_error": "continue"},
            {"id": "optional", "shell": "echo x", "if": "$broken.status == 'success'", "depends_on": ["broken"]},
        ]}),
    )
    .await;
    assert_eq!(
        report.text(),
        r#"{"plan_id":"mixed","completed":true,"canceled":false,"failed_step":null,"steps":[{"step_id":"list","status":"success","output":"a.txt b.txt\n","error":null},{"step_id":"broken","status":"failed","output":null,"error":"exit code 1"},{"step_id":"optional","status":"skipped","output":null,"error":null},{"step_id":"read","status":"success","output":"{\"files\":\"a.txt b.txt\\n\"}","error":null},{"step_id":"ask","status":"success","output":"researcher@1.2.0: summarise","error":null}]}"#
    );
    assert!(report.completed && !report.canceled);
    assert_eq!(
        report.summary,
        "Plan 'mixed': 5 steps, 3 succeeded, 1 failed, 1 skipped"
    );

    let lines = r.lines();
    let (kind, parent, start) = &lines[0];
    assert_eq!(
        (kind.as_str(), parent.as_deref()),
        ("plan_start", Some("evt_call"))
    );
    assert_eq!(
        start,
        &json!({"plan_id": "mixed", "step_count": 5, "steps": [
            {"step_id": "list", "kind": "shell", "depends_on": [], "has_condition": false},
            {"step_id": "read", "kind": "tool", "depends_on": ["list"], "has_condition": false},
            {"step_id": "ask", "kind": "capsule", "depends_on": ["list"], "has_condition": false},
            {"step_id": "broken", "kind": "shell", "depends_on": [], "has_condition": false},
            {"step_id": "optional", "kind": "shell", "depends_on": ["broken"], "has_condition": true},
        ]})
    );
    // Every other line hangs off plan_start.
    let plan_event = r.events.lock().unwrap()[0].event_id.clone();
    assert!(lines[1..]
        .iter()
        .all(|l| l.1.as_deref() == Some(plan_event.as_str())));
    let kinds: Vec<&str> = lines.iter().map(|l| l.0.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "plan_start",
            "plan_step_start",
            "plan_step_start",
            "plan_step",
            "plan_step",
            "plan_step",
            "plan_step_start",
            "plan_step_start",
            "plan_step",
            "plan_step",
            "plan_end",
        ]
    );
    assert_eq!(
        lines[1].2,
        json!({"plan_id": "mixed", "step_id": "list", "kind": "shell", "depends_on": []})
    );
    let mut broken = lines[4].2.clone();
    assert!(broken["duration_ms"].is_u64());
    broken.as_object_mut().unwrap().remove("duration_ms");
    assert_eq!(
        broken,
        json!({"plan_id": "mixed", "step_id": "broken", "kind": "shell", "status": "failed", "attempts": 1, "error": "exit code 1"})
    );
    let mut end = lines[10].2.clone();
    end.as_object_mut().unwrap().remove("duration_ms");
    assert_eq!(
        end,
        json!({"plan_id": "mixed", "outcome": "completed", "steps_total": 5,
               "steps_succeeded": 3, "steps_failed": 1, "steps_skipped": 1})
    );
}

#[tokio::test]
async fn cancel_tells_a_running_tool_call_from_one_still_waiting_its_turn() {
    let r = Recorder::new();
    let (tx, rx) = watch::channel(false);
    let plan = json!({"plan": {"id": "c", "steps": [
        {"id": "holding", "tool": "hang"},
        {"id": "queued", "tool": "echo"},
    ]}});
    let runner: Arc<dyn StepRunner> = r.clone();
    let task = tokio::spawn(async move { run_plan(&plan, &ctx(), runner, rx).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    tx.send(true).unwrap();
    let report = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        steps(&report),
        [
            step("holding", "failed", Value::Null, json!("the task running this plan was cancelled; this step's tool call was ended with it")),
            step("queued", "skipped", Value::Null, json!(CANCELLED_BEFORE)),
        ]
    );
    assert_eq!(
        r.calls(),
        ["tool hang {}"],
        "the queued call never reached the session"
    );
    let attempts: Vec<Value> = r
        .lines_of("plan_step")
        .iter()
        .map(|l| l["attempts"].clone())
        .collect();
    assert_eq!(attempts, [json!(1), json!(0)]);
}

#[tokio::test]
async fn a_stopping_failure_still_reports_the_rest_of_its_wave() {
    let r = Recorder::new();
    let report = run(
        &r,
        json!({"id": "p", "steps": [
            {"id": "bad", "shell": "false"},
            {"id": "good", "shell": "echo ran anyway"},
            {"id": "next", "shell": "echo next", "depends_on": ["good"]},
        ]}),
    )
    .await;
    assert_eq!(report.data["failed_step"], "bad");
    assert_eq!(
        steps(&report),
        [
            step("bad", "failed", Value::Null, json!("exit code 1")),
            step("good", "success", json!("ran anyway\n"), Value::Null),
        ]
    );
    assert_eq!(
        report.summary,
        "Plan 'p': 3 steps, 1 succeeded, 1 failed, 0 skipped"
    );
}
