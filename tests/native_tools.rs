//! The native tool protocol as a tool author sees it (docs/tools.md): what arrives on stdin,
//! and how each form of reply reaches the model.

mod common;

use common::*;

/// Packs and installs a native tool whose program is `script`.
fn tool(p: &Project, name: &str, script: &str) {
    install_artifact(
        p,
        name,
        &format!("name: {name}\nversion: 0.1.0\nruntime: tool\nimplementation: native\ndescription: A probe.\n"),
        name,
        script,
    );
}

/// The text inside the `<untrusted-content>` fence the model reads a pulled tool's result in.
fn unfenced(output: &str) -> String {
    let body = output.split_once('\n').map(|(_, b)| b).unwrap_or(output);
    body.strip_suffix("\n</untrusted-content>")
        .unwrap_or(body)
        .to_string()
}

#[test]
fn a_native_tool_reads_the_original_envelope_and_may_answer_in_any_of_its_forms() {
    let p = Project::new();
    p.write("murmur.yaml", &scripted_manifest("probe", ""));
    tool(
        &p,
        "echo-in",
        "#!/bin/bash\nread -r line\nprintf '%s\\n' \"$line\"\n",
    );
    tool(
        &p,
        "plain",
        "#!/bin/bash\nread -r _\necho 'three lines changed'\nexit 3\n",
    );
    tool(&p, "quiet", "#!/bin/bash\nread -r _\n");
    tool(
        &p,
        "proto",
        "#!/bin/bash\nread -r _\necho '{\"status\":\"failed\",\"summary\":\"no\",\"data\":{\"why\":1}}'\n",
    );
    let mut artifacts = String::new();
    for t in ["echo-in", "plain", "quiet", "proto"] {
        artifacts.push_str(&format!("  - name: local/{t}\n    version: \"0.1.0\"\n"));
    }
    p.write(
        "murmur.yaml",
        &format!("name: probe\nversion: \"0.1.0\"\nartifacts:\n  - name: mur/driver-script\n    version: \"0.1.0\"\n    runtime: driver\n    config:\n      script: script.yaml\n{artifacts}capabilities:\n  shell:\n    allow: [bash]\ntrace:\n  capture: content\ninference:\n  transport: http\n  model: scripted\n  driver:\n    artifact: mur/driver-script\n"),
    );
    p.write(
        "script.yaml",
        "turns:\n  - call:\n      - {tool: echo-in, input: {path: a.txt, n: 1}}\n      - {tool: plain, input: {}}\n      - {tool: quiet, input: {}}\n      - {tool: proto, input: {}}\n  - say: done\n",
    );
    let out = p.mur(&["run", "--task", "probe"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let t = trace(&p.sessions()[0].join("trace.jsonl"));
    let calls: Vec<(String, String)> = t
        .iter()
        .filter(|l| l["event_type"] == "tool_call")
        .map(|l| {
            (
                l["status"].as_str().unwrap_or("").to_string(),
                unfenced(l["output"].as_str().unwrap_or("")),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            // The input as one JSON string under data; no log file.
            (
                "ok".to_string(),
                r#"{"data":"{\"path\":\"a.txt\",\"n\":1}","log_path":null}"#.to_string() + "\n"
            ),
            // Plain text: the exit code decides.
            ("error".to_string(), "three lines changed\n".to_string()),
            // Nothing printed.
            (
                "ok".to_string(),
                "native tool 'quiet' exited with code 0".to_string()
            ),
            // The protocol object: its status, and data as JSON text.
            ("error".to_string(), r#"{"why":1}"#.to_string()),
        ],
        "{calls:#?}"
    );
}

#[test]
fn a_tool_runs_what_the_capsule_grants_never_what_its_own_manifest_asks_for() {
    // Like murmur-tool-git, whose own manifest asks for `git`: the ask grants nothing. The
    // tool may run a program only when the capsule's own capabilities.shell.allow names it.
    let p = Project::new();
    p.write("murmur.yaml", &scripted_manifest("probe", ""));
    install_artifact(
        &p,
        "sys",
        "name: sys\nversion: 0.1.0\nruntime: tool\nimplementation: native\ndescription: Runs uname.\ncapabilities:\n  shell:\n    allow: [uname]\n",
        "sys",
        "#!/bin/bash\nread -r _\nif out=$(uname -s 2>&1); then echo \"ran: $out\"; else echo \"refused: $out\"; fi\n",
    );
    p.write(
        "script.yaml",
        "turns:\n  - call: [{tool: sys, input: {}}]\n  - say: done\n",
    );
    let run = |allow: &str| {
        p.write(
            "murmur.yaml",
            &format!("name: probe\nversion: \"0.1.0\"\nartifacts:\n  - name: mur/driver-script\n    version: \"0.1.0\"\n    runtime: driver\n    config:\n      script: script.yaml\n  - name: local/sys\n    version: \"0.1.0\"\ncapabilities:\n  shell:\n    allow: [{allow}]\ntrace:\n  capture: content\ninference:\n  transport: http\n  model: scripted\n  driver:\n    artifact: mur/driver-script\n"),
        );
        let out = p.mur(&["run", "--task", "probe"]);
        assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
        let s = p.sessions().into_iter().max().unwrap();
        let t = trace(&s.join("trace.jsonl"));
        let call = t.iter().find(|l| l["event_type"] == "tool_call").unwrap();
        unfenced(call["output"].as_str().unwrap())
    };
    let without = run("bash");
    assert!(
        without.starts_with("refused: ") && without.contains("Permission denied"),
        "{without}"
    );
    let with = run("bash, uname");
    assert_eq!(with, "ran: Linux\n");
}

#[test]
fn a_call_to_a_removed_tool_gets_the_removal_sentence() {
    let p = Project::new();
    p.write("murmur.yaml", &scripted_manifest("probe", ""));
    tool(&p, "tool-greet", "#!/bin/bash\nread -r _\necho hello\n");
    std::fs::remove_file(p.path().join("murmur.lock")).unwrap();
    p.write(
        "murmur.yaml",
        &scripted_manifest(
            "probe",
            "capabilities:\n  shell:\n    allow: [bash]\n  install:\n    tool: [\"local/tool-*\"]\n    from: [stores]\ntrace:\n  capture: content\n",
        ),
    );
    p.write(
        "script.yaml",
        "turns:\n  - call: [{tool: pull-artifact, input: {artifact: local/tool-greet}}]\n  - call: [{tool: tool-greet, input: {}}]\n  - call: [{tool: remove-artifact, input: {artifact: local/tool-greet}}]\n  - call: [{tool: tool-greet, input: {}}]\n  - say: done\n",
    );
    let out = p.mur(&["run", "--task", "probe"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let t = trace(&p.sessions()[0].join("trace.jsonl"));
    let calls: Vec<_> = t
        .iter()
        .filter(|l| l["event_type"] == "tool_call")
        .collect();
    assert_eq!(calls.len(), 4, "{calls:#?}");
    // As the original writes them: the pull's artifact_pulled line, then its tool_call line.
    let at = |ty: &str| t.iter().position(|l| l["event_type"] == ty).unwrap();
    assert_eq!(at("artifact_pulled") + 1, at("tool_call"));
    assert_eq!(unfenced(calls[1]["output"].as_str().unwrap()), "hello\n");
    assert_eq!(calls[3]["status"], "error");
    assert_eq!(
        calls[3]["output"],
        "tool 'tool-greet' was removed from this session; it can no longer be called"
    );
}
