//! Delegation through `mur run`: sub-capsules packed with `mur build`, filed with `mur install`,
//! resolved from the store by name and exact version, run as child actors.

mod common;

use std::process::Command;

use common::*;

fn setup(example: &str) -> Project {
    Project::example_set_up(example)
}

fn delegation_lines(t: &[serde_json::Value]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = t
        .iter()
        .filter(|l| l["event_type"] == "delegation")
        .map(|l| {
            (
                l["capsule"].as_str().unwrap().to_string(),
                l["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn the_delegation_tree_runs_three_children_and_a_grandchild() {
    let p = setup("delegation-tree");
    let out = p.mur(&["run", "--task", "Report on actor runtimes"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let s = &p.sessions()[0];
    let t = trace(&s.join("trace.jsonl"));
    assert_eq!(
        delegation_lines(&t),
        [
            ("local/critic".to_string(), "ok".to_string()),
            ("local/researcher".to_string(), "ok".to_string()),
            ("local/writer".to_string(), "ok".to_string()),
        ]
    );
    let result = std::fs::read_to_string(s.join("out/result.txt")).unwrap();
    assert!(
        result.starts_with("Combined report from my sub-capsules:"),
        "{result}"
    );
    // The writer's own trace shows its delegation to the proofreader, one level down.
    let writer = t
        .iter()
        .find(|l| l["event_type"] == "delegation_start" && l["capsule"] == "local/writer")
        .unwrap();
    let wdir = std::path::PathBuf::from(writer["child_records_dir"].as_str().unwrap());
    let wt = trace(&wdir.join("trace.jsonl"));
    assert_eq!(wt[0]["spawned_by"], t[0]["session_id"]);
    assert_eq!(
        delegation_lines(&wt),
        [("local/proofreader".to_string(), "ok".to_string())]
    );
    // Children's tokens roll up into the parent's totals.
    let end = t.last().unwrap();
    assert!(end["delegated_input_tokens"].as_u64().unwrap() > 0);
    let show = p.mur(&["trace", "show"]);
    let text = stdout(&show);
    assert!(text.contains("└─ local/proofreader@0.1.0"), "{text}");
}

#[test]
fn supervision_reports_ok_crashed_and_terminated() {
    let p = setup("supervision");
    let started = std::time::Instant::now();
    let out = p.mur(&["run", "--task", "Run the three"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
    let s = &p.sessions()[0];
    let t = trace(&s.join("trace.jsonl"));
    assert_eq!(
        delegation_lines(&t),
        [
            ("local/answerer".to_string(), "ok".to_string()),
            ("local/crasher".to_string(), "crashed".to_string()),
            ("local/hanger".to_string(), "terminated".to_string()),
        ]
    );
    let result = std::fs::read_to_string(s.join("out/result.txt")).unwrap();
    assert!(result.contains("ended crashed:"), "{result}");
    assert!(
        result.contains("still running at the delegation deadline of 2 s"),
        "{result}"
    );
    // The crashed child's trace still ends with session_end.
    let crasher = t
        .iter()
        .find(|l| l["event_type"] == "delegation_start" && l["capsule"] == "local/crasher")
        .unwrap();
    let ct = trace(
        &std::path::PathBuf::from(crasher["child_records_dir"].as_str().unwrap())
            .join("trace.jsonl"),
    );
    assert_eq!(ct.last().unwrap()["event_type"], "session_end");
}

#[test]
fn unknown_versions_and_grants_beyond_the_parent_are_refused_by_name() {
    let p = setup("delegation-tree");
    // Ask for a version the store does not hold, and drop the grant the writer needs.
    let script = "turns:
  - call:
      - {tool: delegate-task, input: {capsule: critic, version: '9.9.9', task: 'x'}}
      - {tool: delegate-task, input: {capsule: writer, version: '0.1.0', task: 'x'}}
  - say: done
";
    p.write("script.yaml", script);
    let manifest = std::fs::read_to_string(p.path().join("murmur.yaml")).unwrap();
    p.write(
        "murmur.yaml",
        &manifest.replace("      - local/proofreader\n", ""),
    );
    let out = p.mur(&["run", "--task", "x"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let s = &p.sessions()[0];
    let t = trace(&s.join("trace.jsonl"));
    let refused: Vec<&str> = t
        .iter()
        .filter(|l| l["event_type"] == "delegation" && l["outcome"] == "refused")
        .map(|l| l["reason"].as_str().unwrap())
        .collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(refused[0].contains("9.9.9"), "{}", refused[0]);
    assert!(
        refused[1].contains("declares capabilities.spawn.allow entry 'local/proofreader', which its parent does not hold"),
        "{}",
        refused[1]
    );
}

#[test]
fn ctrl_c_ends_the_whole_tree_with_no_process_left_and_every_trace_complete() {
    use std::io::{BufRead, BufReader};
    let p = Project::new();
    // A sleep of a length no other process uses: its command line is the marker.
    let marker = format!("sleep 41.{}", std::process::id());
    // A child that runs a long command; its parent waits for it.
    p.write(
        "child/murmur.yaml",
        &scripted_manifest(
            "sleeper",
            "capabilities:\n  shell:\n    allow: [bash, sleep]\n",
        ),
    );
    p.write(
        "child/script.yaml",
        &format!("turns:\n  - call: [{{tool: bash, input: {{command: '{marker}; true'}}}}]\n  - say: late\n"),
    );
    p.write(
        "murmur.yaml",
        &scripted_manifest(
            "parent",
            "capabilities:\n  shell:\n    allow: [bash, sleep]\n  spawn:\n    allow: [local/sleeper]\n",
        ),
    );
    p.write(
        "script.yaml",
        "turns:\n  - call: [{tool: delegate-task, input: {capsule: sleeper, version: '0.1.0', task: sleep}}]\n  - say: waiting\n  - say: never\n",
    );
    assert!(p
        .mur(&["build", "child", "-o", "sleeper.mur.zip"])
        .status
        .success());
    assert!(p.mur(&["install", "./sleeper.mur.zip"]).status.success());
    let mut child = mur()
        .args(["run", "--task", "go"])
        .current_dir(p.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    lines.next();
    lines.next();
    // Wait until the grandchild command runs.
    let running = || {
        Command::new("pgrep")
            .args(["-f", &marker])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !running() {
        assert!(
            std::time::Instant::now() < deadline,
            "the child's command never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(!running(), "no process of the tree is left");
    // Piped, Ctrl-C says what the run waits for, once.
    let err = stderr(&out);
    assert_eq!(
        err.matches("Ctrl-C: canceling the run; waiting for the session and its sub-capsules to stop and write their last trace lines (Ctrl-C again exits at once)\n").count(),
        1,
        "{err}"
    );
    let s = &p.sessions()[0];
    let t = trace(&s.join("trace.jsonl"));
    assert_eq!(t.last().unwrap()["exit_status"], "canceled");
    let end = t.iter().find(|l| l["event_type"] == "delegation").unwrap();
    assert_eq!(end["outcome"], "terminated");
    assert_eq!(end["reason"], "the delegating task was cancelled");
    let start = t
        .iter()
        .find(|l| l["event_type"] == "delegation_start")
        .unwrap();
    let ct = trace(
        &std::path::PathBuf::from(start["child_records_dir"].as_str().unwrap()).join("trace.jsonl"),
    );
    assert_eq!(ct.last().unwrap()["event_type"], "session_end");
    assert_eq!(ct.last().unwrap()["exit_status"], "canceled");
}

#[test]
fn a_max_depth_the_filesystem_cannot_hold_is_refused_naming_the_bound() {
    let p = Project::example("hello");
    let out = p.mur(&["run", "--task", "x", "--max-depth", "120"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.starts_with("error[E-RUN-060]: --max-depth 120 cannot be held here: each level of delegation nests a child's records 46 bytes deeper below "),
        "{err}"
    );
    assert!(
        err.contains("paths stop at 4096 bytes, so at most "),
        "{err}"
    );
    assert!(!p.path().join("workdir").exists(), "nothing was written");
    // The default depth always fits.
    assert!(p.mur(&["run", "--task", "x"]).status.success());
}
