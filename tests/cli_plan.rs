//! `submit-plan` end to end: the tool exists exactly with its grant, runs waves of shell and
//! tool steps with references and conditions, and writes the plan_* trace lines.

mod common;

use common::*;

fn plan_project(grant: &str, script: &str) -> Project {
    let p = Project::new();
    p.write(
        "murmur.yaml",
        &scripted_manifest(
            "planner",
            &format!("capabilities:\n  shell:\n    allow: [bash, echo, 'false']\n{grant}"),
        ),
    );
    p.write("script.yaml", script);
    p
}

const PLAN: &str = r#"turns:
  - call:
      - tool: submit-plan
        input:
          plan:
            id: build
            steps:
              - {id: a, shell: "echo hello"}
              - {id: b, shell: "echo world"}
              - {id: c, tool: bash, input: {command: "$a.output"}, depends_on: [a, b]}
              - {id: d, shell: "false", on_error: continue}
              - {id: e, shell: "echo never", if: "$d.status == 'success'", depends_on: [d]}
  - expect: '"completed":true'
    call:
      - tool: submit-plan
        input:
          plan:
            id: loop
            steps:
              - {id: x, shell: "echo x", depends_on: [y]}
              - {id: y, shell: "echo y", depends_on: [x]}
  - expect: 'dependency cycle'
    say: '{{last}}'
"#;

#[test]
fn a_plan_runs_its_waves_and_reports_every_step() {
    let p = plan_project("  plan:\n    submit: true\n", PLAN);
    let out = p.mur(&["run", "--task", "plan it"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let s = &p.sessions()[0];
    let t = trace(&s.join("trace.jsonl"));
    assert!(t[0]["tools_declared"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!("submit-plan")));
    let starts: Vec<_> = t
        .iter()
        .filter(|l| l["event_type"] == "plan_start")
        .collect();
    assert_eq!(starts.len(), 2);
    assert_eq!(starts[0]["plan_id"], "build");
    assert_eq!(starts[1]["plan_id"], "loop");
    assert_eq!(starts[0]["step_count"], 5);
    let steps: Vec<(String, String)> = t
        .iter()
        .filter(|l| l["event_type"] == "plan_step")
        .map(|l| {
            (
                l["step_id"].as_str().unwrap().to_string(),
                l["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let find = |id: &str| {
        steps
            .iter()
            .find(|(s, _)| s == id)
            .map(|(_, st)| st.as_str())
    };
    assert_eq!(find("a"), Some("success"));
    assert_eq!(find("c"), Some("success"));
    assert_eq!(find("d"), Some("failed"));
    let ends: Vec<_> = t.iter().filter(|l| l["event_type"] == "plan_end").collect();
    assert_eq!(ends[0]["outcome"], "completed");
    assert_eq!(
        ends[1]["outcome"], "failed",
        "the cycle is refused before any step runs"
    );
    assert_eq!(steps.len(), 5, "no step of the cyclic plan ran");
    // The plan's result, as the model saw it, is one fenced report.
    let result = std::fs::read_to_string(s.join("out/result.txt")).unwrap();
    assert!(result.contains("dependency cycle"), "{result}");
}

#[test]
fn without_the_grant_submit_plan_does_not_exist_and_is_refused_by_name() {
    let p = plan_project(
        "",
        "turns:\n  - call: [{tool: submit-plan, input: {plan: {id: p, steps: []}}}]\n  - expect: 'capabilities.plan.submit'\n    say: refused\n",
    );
    let out = p.mur(&["run", "--task", "plan it"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let s = &p.sessions()[0];
    let t = trace(&s.join("trace.jsonl"));
    assert!(!t[0]["tools_declared"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!("submit-plan")));
    assert!(!s.join("tools/submit-plan").exists());
}

#[test]
fn the_plan_example_runs() {
    let p = Project::example("plan");
    let out = p.mur(&["run", "--task", "Write a note about this machine"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let s = &p.sessions()[0];
    let result = std::fs::read_to_string(s.join("out/result.txt")).unwrap();
    assert!(
        result.contains(r#""step_id":"done","status":"success","output":"note written\n""#),
        "{result}"
    );
    assert!(p.work_folders()[0].join("note.txt").is_file());
    // The report counts the plan's steps, shell steps included (they write no shell line).
    let report = p.mur(&["trace", "report"]);
    assert!(
        stdout(&report).contains("plan steps: 5 (4 shell, 1 tool; 0 failed, 0 skipped)\n"),
        "{}",
        stdout(&report)
    );
}
