//! Seed 001 end to end, as a user runs it: build and file the edit tool, run the coding capsule
//! on the buggy crate, and check the fix, the lock, the trace and `mur trace show`.
//! (Builds `examples/coding-agent/tool-edit` with cargo: the slowest test of the suite.)

mod common;

use std::process::Command;

use common::*;

/// A `HOME` inside the project, so records stay there, with the real toolchain homes linked in
/// (the capsule grants `~/.rustup` and `~/.cargo` to `cargo`).
fn home(p: &Project) -> std::path::PathBuf {
    let home = p.path().join(".home");
    if !home.exists() {
        std::fs::create_dir_all(&home).unwrap();
        let real = std::path::PathBuf::from(std::env::var_os("HOME").unwrap());
        for (var, dir) in [("RUSTUP_HOME", ".rustup"), ("CARGO_HOME", ".cargo")] {
            let target = std::env::var_os(var)
                .map(std::path::PathBuf::from)
                .unwrap_or_else(|| real.join(dir));
            std::os::unix::fs::symlink(target, home.join(dir)).unwrap();
        }
    }
    home
}

fn setup() -> Project {
    let p = Project::example("coding-agent");
    let out = Command::new("bash")
        .arg("setup.sh")
        .current_dir(p.path())
        .env("HOME", home(&p))
        .env("MUR", env!("CARGO_BIN_EXE_mur"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains("Installed local/tool-edit@0.2.0"),
        "{}",
        stdout(&out)
    );
    p
}

fn run(p: &Project) -> std::process::Output {
    Command::new("bash")
        .arg("run.sh")
        .current_dir(p.path())
        .env("HOME", home(p))
        .env("MUR", env!("CARGO_BIN_EXE_mur"))
        .output()
        .unwrap()
}

/// The newest session's records (a `--workdir` run keeps them under `~/.murmur/records/`).
fn session(p: &Project) -> std::path::PathBuf {
    let work = std::fs::canonicalize(p.path()).unwrap().join("work");
    list(&records_home(&home(p), &work)).pop().unwrap()
}

#[test]
fn the_capsule_lists_pulls_uses_and_removes_the_edit_tool() {
    let p = setup();
    let out = run(&p);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).ends_with("status:  ok\n"));
    let fixed = std::fs::read_to_string(p.path().join("work/src/lib.rs")).unwrap();
    assert!(fixed.contains("input.as_bytes().first() else"), "{fixed}");
    // The removal deleted the pin.
    assert_eq!(
        std::fs::read_to_string(p.path().join("murmur.lock")).unwrap(),
        "lock_version: 3\nartifacts: []\n"
    );
    let s = session(&p);
    let t = trace(&s.join("trace.jsonl"));
    let pulled: Vec<_> = t
        .iter()
        .filter(|l| l["event_type"] == "artifact_pulled")
        .collect();
    assert_eq!(pulled.len(), 1);
    assert_eq!(pulled[0]["name"], "local/tool-edit");
    assert_eq!(pulled[0]["version"], "0.2.0");
    assert_eq!(pulled[0]["origin"], "runtime");
    assert_eq!(pulled[0]["trust"], "untrusted");
    assert_eq!(pulled[0]["fetched_from"], "project store");
    assert_eq!(pulled[0]["session"], t[0]["session_id"]);
    let refreshed: Vec<_> = t
        .iter()
        .filter(|l| l["event_type"] == "tools_refreshed")
        .collect();
    assert_eq!(refreshed.len(), 2);
    assert_eq!(refreshed[0]["trigger"], "agent");
    assert_eq!(refreshed[0]["added"], serde_json::json!(["tool-edit"]));
    assert_eq!(refreshed[1]["removed"], serde_json::json!(["tool-edit"]));
    // Each tools_refreshed line comes right before the inference call whose tool list changed.
    for r in &refreshed {
        let at = t
            .iter()
            .position(|l| l["event_id"] == r["event_id"])
            .unwrap();
        assert_eq!(t[at + 1]["event_type"], "inference");
        assert_eq!(t[at + 1]["turn"], r["turn"]);
    }
    let show = p
        .mur_cmd(&["trace", "show", "--workdir", "work"])
        .env("HOME", home(&p))
        .output()
        .unwrap();
    assert!(show.status.success(), "{}", stderr(&show));
    assert!(
        stdout(&show).contains(
            "── Pulled at runtime ────────────────────────────\n  local/tool-edit@0.2.0  tool  runtime/untrusted  from project store\n"
        ),
        "{}",
        stdout(&show)
    );

    // The edit tool reads both envelopes: the input as a JSON string (what both runtimes
    // send) and as an object.
    let bin = p.path().join("tool-edit/package/bin/tool-edit");
    for (n, stdin) in [
        r#"{"data":"{\"path\":\"a.txt\",\"edits\":[{\"old\":\"x\",\"new\":\"y\"}]}","log_path":null}"#,
        r#"{"data":{"path":"a.txt","edits":[{"old":"y","new":"z"}]}}"#,
    ]
    .iter()
    .enumerate()
    {
        std::fs::write(p.path().join("a.txt"), if n == 0 { "x" } else { "y" }).unwrap();
        let mut child = Command::new(&bin)
            .current_dir(p.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        let reply: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(reply["status"], "passed", "{stdin}: {reply}");
        assert_eq!(
            std::fs::read_to_string(p.path().join("a.txt")).unwrap(),
            if n == 0 { "y" } else { "z" }
        );
    }
}

#[test]
fn a_pull_the_capsule_keeps_is_pinned_as_runtime_and_not_staged_next_time() {
    let p = setup();
    // Stop before the removal: the pin stays.
    let script = std::fs::read_to_string(p.path().join("script.yaml")).unwrap();
    let cut = script.find("  - expect: \"Applied 1 edit\"").unwrap();
    p.write("script.yaml", &format!("{}  - say: kept\n", &script[..cut]));
    let out = run(&p);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let s = session(&p);
    let id = s.file_name().unwrap().to_str().unwrap().to_string();
    let lock = std::fs::read_to_string(p.path().join("murmur.lock")).unwrap();
    let sha = std::fs::read_to_string(
        p.path()
            .join(".murmur/artifacts/local/tool-edit/0.2.0/tool-edit-0.2.0.sha256"),
    )
    .unwrap();
    let sha = sha.split_whitespace().next().unwrap();
    assert_eq!(
        lock,
        format!("lock_version: 3\nartifacts:\n  - name: local/tool-edit\n    resolved_version: \"0.2.0\"\n    sha256:\n      any: \"{sha}\"\n    origin: runtime\n    session: {id}\n")
    );
    // The next launch does not stage a runtime pin the manifest does not declare.
    p.write(
        "script.yaml",
        "turns:\n  - expect_no_tools: ['\"name\":\"tool-edit\"']\n    say: clean\n",
    );
    let out = run(&p);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
}

#[test]
fn a_policy_hook_artifact_denies_a_pull_and_nothing_is_written() {
    use std::os::unix::fs::PermissionsExt;
    let p = setup();
    // A hook that refuses every pull of tool-edit, packed and installed like any artifact.
    p.write(
        "hook/murmur.yaml",
        "name: no-edit-pulls\nversion: 0.1.0\nruntime: hook\nimplementation: native\ndescription: Refuses pulls of tool-edit.\nbinding: [on-tool-call]\nexecution_mode: blocking\ncommit_policy: deny\n",
    );
    p.write(
        "hook/bin/no-edit-pulls",
        "#!/bin/sh\nread -r event\ncase \"$event\" in\n  *'\"tool-name\":\"pull-artifact\"'*tool-edit*) echo '{\"decision\":\"deny\",\"reason\":\"pulling tool-edit is not allowed in this project\"}';;\n  *) echo '{\"decision\":\"none\"}';;\nesac\n",
    );
    std::fs::set_permissions(
        p.path().join("hook/bin/no-edit-pulls"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let out = p.mur(&["build", "hook", "-o", "hook.mur.zip"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = p.mur(&["install", "./hook.mur.zip"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let manifest = std::fs::read_to_string(p.path().join("murmur.yaml")).unwrap();
    p.write(
        "murmur.yaml",
        &manifest.replace(
            "capabilities:\n",
            "  - name: local/no-edit-pulls\n    version: \"0.1.0\"\n    runtime: hook\n\ncapabilities:\n",
        ),
    );
    p.write(
        "script.yaml",
        "turns:\n  - call: [{tool: pull-artifact, input: {artifact: local/tool-edit}}]\n  - expect: \"Refused by policy hook 'local/no-edit-pulls': pulling tool-edit is not allowed in this project\"\n    say: refused as expected\n",
    );
    let lock_before = std::fs::read_to_string(p.path().join("murmur.lock")).unwrap();
    let out = run(&p);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let s = session(&p);
    let t = trace(&s.join("trace.jsonl"));
    let denied: Vec<_> = t
        .iter()
        .filter(|l| l["event_type"] == "call_denied")
        .collect();
    assert_eq!(denied.len(), 1);
    assert_eq!(denied[0]["hook_name"], "local/no-edit-pulls");
    assert_eq!(denied[0]["target"], "pull-artifact");
    assert!(!t.iter().any(|l| l["event_type"] == "artifact_pulled"));
    assert!(!t.iter().any(|l| l["event_type"] == "tool_call"));
    assert_eq!(
        std::fs::read_to_string(p.path().join("murmur.lock")).unwrap(),
        lock_before,
        "the lock is untouched"
    );
}
