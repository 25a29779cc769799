//! `mur run` end to end: the real binary on temporary projects, as a user would run it.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::Stdio;
use std::time::Duration;

use common::*;

#[test]
fn the_hello_example_runs_offline_and_prints_the_seed_lines() {
    let p = Project::example("hello");
    let out = p.mur(&["run", "--task", "Say hello", "-v"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let root = std::fs::canonicalize(p.path()).unwrap();
    assert_eq!(
        normalise(&stdout(&out), &root),
        "murmur: url localhost:<PORT>\nsession: ses_<ID>\nworkdir: <ROOT>/workdir/ses_<ID>\nmanifest: hello v0.1.0\ndriver: mur-driver-script (scripted)\nstatus:  ok\n"
    );
    let sessions = p.sessions();
    assert_eq!(sessions.len(), 1);
    let s = &sessions[0];
    assert_eq!(
        std::fs::read_to_string(s.join("out/result.txt")).unwrap(),
        "Hello! I wrote greeting.txt in my work folder and listed it: the shell tools work."
    );
    // The commands ran in the work folder; the records are beside it, out of their reach.
    let work = &p.work_folders()[0];
    assert_eq!(work.file_name(), s.file_name());
    assert!(work.join("greeting.txt").is_file());
    assert!(!s.join("greeting.txt").exists());
    assert!(!work.join("trace.jsonl").exists());
    assert!(s.join("MURMUR.md").is_file());
    // The staged manifests are readable from the work folder at the seed's path.
    assert_eq!(
        std::fs::read_to_string(work.join("tools/bash/murmur.yaml")).unwrap(),
        std::fs::read_to_string(s.join("tools/bash/murmur.yaml")).unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(s.join("task.md")).unwrap(),
        "Say hello"
    );
    let yaml = std::fs::read_to_string(s.join("tools/bash/murmur.yaml")).unwrap();
    assert!(
        yaml.starts_with("name: \"bash\"\nversion: 0.0.0\nruntime: tool\nimplementation: native\n")
    );
    let t = trace(&s.join("trace.jsonl"));
    assert_eq!(
        types(&t),
        [
            "session_start",
            "task_start",
            "inference",
            "tool_call",
            "shell",
            "inference",
            "tool_call",
            "shell",
            "inference",
            "task_end",
            "session_end"
        ]
    );
    assert_eq!(
        t[0]["tools_declared"],
        serde_json::json!(["basename", "bash", "cat", "ls", "uname"])
    );
    assert_eq!(t[0]["containment_declared"], "scoped");
    assert_eq!(t[0]["containment_achieved"], "scoped");
    assert_eq!(t[0]["workdir_exec"], false);
    assert_eq!(t[10]["exit_status"], "ok");
    assert_eq!(t[10]["total_shell_calls"], 2);
}

#[test]
fn without_verbose_only_the_url_session_and_status_lines_print() {
    let p = Project::example("hello");
    let out = p.mur(&["run", "murmur.yaml", "--task", "Say hello"]);
    assert!(out.status.success());
    let lines: Vec<String> = stdout(&out).lines().map(str::to_string).collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[0].starts_with("murmur: url localhost:"));
    assert!(lines[1].starts_with("session: ses_"));
    assert_eq!(lines[2], "status:  ok");
}

#[test]
fn workdir_flag_puts_the_work_folder_there_and_records_under_home() {
    let p = Project::example("hello");
    let home = tempfile::tempdir().unwrap();
    let out = p
        .mur_cmd(&["run", "--task", "Say hello", "--workdir", "space"])
        .env("HOME", home.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let space = p.path().join("space");
    assert!(space.join("greeting.txt").is_file());
    // Nothing of the runtime's lands in the user's folder: no records, no tools link.
    assert!(!space.join(".murmur").exists());
    assert!(!space.join("tools").exists());
    let recs = list(&records_home(home.path(), &space));
    assert_eq!(recs.len(), 1);
    assert!(recs[0].join("trace.jsonl").is_file());
    assert!(recs[0].join("out/result.txt").is_file());
    assert!(!p.path().join("workdir").exists());
    // `mur trace --workdir space` finds the session there.
    let shown = p
        .mur_cmd(&["trace", "steps", "--workdir", "space"])
        .env("HOME", home.path())
        .output()
        .unwrap();
    assert!(shown.status.success(), "{}", stderr(&shown));
    assert!(stdout(&shown).contains("bash"), "{}", stdout(&shown));
}

fn scripted(p: &Project, caps: &str, script: &str) {
    p.write("murmur.yaml", &scripted_manifest("t", caps));
    p.write("script.yaml", script);
}

#[test]
fn a_bad_manifest_never_starts_a_session() {
    let cases = [
        ("name: [unclosed\n", "error[E-MAN-002]: murmur.yaml: YAML syntax error at line"),
        ("version: \"0.1.0\"\n", "error[E-MAN-001]: murmur.yaml: missing required field 'name'"),
        (
            "name: t\nversion: \"0.1\"\ninference:\n  transport: http\n  model: m\n  driver:\n    artifact: mur/driver-script\n",
            "inference.driver.artifact",
        ),
    ];
    for (manifest, expected) in cases {
        let p = Project::new();
        p.write("murmur.yaml", manifest);
        let out = p.mur(&["run", "--task", "x"]);
        assert_eq!(out.status.code(), Some(1), "{manifest}");
        assert!(
            stderr(&out).contains(expected),
            "{manifest}: {}",
            stderr(&out)
        );
        assert_eq!(stdout(&out), "status:  failed\n");
        assert!(!p.path().join("workdir").exists());
        assert!(!p.path().join("murmur.lock").exists());
    }
}

#[test]
fn a_missing_script_file_and_an_empty_task_are_clear_errors() {
    let p = Project::new();
    p.write("murmur.yaml", &scripted_manifest("t", ""));
    let out = p.mur(&["run", "--task", "x"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("error[E-IO-001]: cannot read the model script"),
        "{err}"
    );
    assert!(err.contains("script.yaml"), "{err}");
    assert!(
        err.contains("hint: artifacts[0].config.script names it"),
        "{err}"
    );

    p.write("script.yaml", "turns:\n  - say: hi\n");
    // A typo of a task file is a usage error, not a task; nothing runs.
    for typo in ["tsk.md", "notes/TASK.TXT", "./x"] {
        let out = p.mur(&["run", "--task", typo]);
        assert_eq!(out.status.code(), Some(2), "{typo}");
        assert!(
            stderr(&out).starts_with(&format!("error[E-RUN-062]: --task '{typo}' looks like a file name, and there is no such file here\n  hint: check the path")),
            "{}",
            stderr(&out)
        );
        assert!(!p.path().join("workdir").exists());
    }
    // `-` reads the task from stdin.
    let mut child = p
        .mur_cmd(&["run", "--task", "-", "-v"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"Say hi from stdin")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let s = p.sessions().pop().unwrap();
    assert_eq!(
        std::fs::read_to_string(s.join("task.md")).unwrap(),
        "Say hi from stdin"
    );
    std::fs::remove_dir_all(p.path().join("workdir")).unwrap();
    p.write("empty.md", "  \n");
    let out = p.mur(&["run", "--task", "empty.md"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("error[E-RUN-002]: the task from empty.md is empty"));
    assert!(!p.path().join("workdir").exists());
}

#[test]
fn an_unwritable_workdir_is_a_clear_error() {
    let p = Project::new();
    scripted(&p, "", "turns:\n  - say: hi\n");
    p.write("file", "not a folder");
    let out = p.mur(&["run", "--task", "x", "--workdir", "file/sub"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("error[E-IO-002]: cannot create"), "{err}");
    assert!(err.contains("hint:"), "{err}");
}

#[test]
fn tool_errors_reach_the_model_and_the_session_goes_on() {
    let p = Project::new();
    scripted(
        &p,
        "capabilities:\n  shell:\n    allow: [bash, no-such-binary-here]\n",
        "turns:
  - call: [{tool: no-such-binary-here, input: {command: '--version'}}]
  - expect: \"binary 'no-such-binary-here' is not installed\"
    call: [{tool: made-up-tool, input: {}}]
  - expect: \"tool 'made-up-tool' is not declared in manifest allowlist\"
    call: [{tool: delegate-task, input: {capsule: x, version: '1', task: y}}]
  - expect: \"'delegate-task' needs a capabilities.spawn.allow list in murmur.yaml; this capsule declares none\"
    call: [{tool: pull-artifact, input: {artifact: murmur/tool-edit}}]
  - expect: \"not-granted: this capsule declares no capabilities.install, so pulling 'murmur/tool-edit' is refused\"
    call: [{tool: bash, input: {}}]
  - expect: 'missing required field(s) \"command\"'
    say: survived
",
    );
    let out = p.mur(&["run", "--task", "x"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let s = &p.sessions()[0];
    assert_eq!(
        std::fs::read_to_string(s.join("out/result.txt")).unwrap(),
        "survived"
    );
    let t = trace(&s.join("trace.jsonl"));
    let errors: Vec<_> = t
        .iter()
        .filter(|l| l["event_type"] == "tool_call")
        .map(|l| l["status"].as_str().unwrap())
        .collect();
    assert_eq!(errors, ["error"; 5]);
    assert_eq!(
        t[0]["tools_declared"],
        serde_json::json!(["bash", "no-such-binary-here"])
    );
}

#[test]
fn a_capsule_holding_no_tool_is_offered_none_and_its_calls_are_refused() {
    let p = Project::new();
    scripted(
        &p,
        "",
        "turns:
  - expect_no_tools: ['\"name\"']
    call: [{tool: bash, input: {command: 'echo hi'}}, {tool: made-up-tool, input: {}}]
  - expect: \"tool 'made-up-tool' is not declared in manifest allowlist\"
    say: nothing to run here
",
    );
    let out = p.mur(&["run", "--task", "x"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let t = trace(&p.sessions()[0].join("trace.jsonl"));
    assert_eq!(t[0]["tools_declared"], serde_json::json!([]));
    let calls: Vec<(&str, &str)> = t
        .iter()
        .filter(|l| l["event_type"] == "tool_call")
        .map(|l| {
            (
                l["tool_name"].as_str().unwrap(),
                l["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(calls, [("bash", "error"), ("made-up-tool", "error")]);
    assert_eq!(
        t.iter().filter(|l| l["event_type"] == "shell").count(),
        0,
        "nothing ran"
    );
    assert_eq!(t.last().unwrap()["exit_status"], "ok");
}

#[test]
fn huge_and_binary_output_is_capped_and_kept_whole_in_a_log() {
    let p = Project::new();
    scripted(
        &p,
        "capabilities:\n  shell:\n    allow: [bash, head, tr, printf]\n",
        "turns:
  - call: [{tool: bash, input: {command: 'head -c 3000000 /dev/zero | tr \"\\\\0\" x; printf \"\\\\377\\\\376 bad bytes\" >&2'}}]
  - expect: 'Output truncated. Full output written to'
    say: '{{last}}'
",
    );
    let out = p.mur(&["run", "--task", "x"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let s = &p.sessions()[0];
    let result = std::fs::read_to_string(s.join("out/result.txt")).unwrap();
    assert!(result.len() < 40_000, "capped: {}", result.len());
    assert!(
        result.contains("\u{FFFD}\u{FFFD} bad bytes"),
        "lossy stderr"
    );
    let log = std::fs::read_dir(s.join("logs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "stdout"))
        .unwrap();
    assert_eq!(std::fs::metadata(log).unwrap().len(), 3_000_000);
    let t = trace(&s.join("trace.jsonl"));
    let shell = t.iter().find(|l| l["event_type"] == "shell").unwrap();
    assert_eq!(shell["stdout_bytes"], 3_000_000);
}

#[test]
fn max_turns_and_failures_exit_non_zero_with_their_status() {
    let p = Project::new();
    p.write(
        "murmur.yaml",
        &scripted_manifest("t", "capabilities:\n  shell:\n    allow: [bash]\n")
            .replace("  model: scripted\n", "  model: scripted\n  max_turns: 1\n"),
    );
    p.write(
        "script.yaml",
        "turns:\n  - call: [{tool: bash, input: {command: 'true'}}]\n  - say: never\n",
    );
    let out = p.mur(&["run", "--task", "x"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).ends_with("status:  max_turns_reached\n"));
    let err = stderr(&out);
    assert!(
        err.contains("error[E-RUN-040]: the task did not complete (max_turns_reached)"),
        "{err}"
    );
    assert!(err.contains("hint: read "), "{err}");
    // The hint's command works as printed, from any folder.
    let cmd = err.split('`').nth(1).unwrap();
    let args: Vec<&str> = cmd.split(' ').skip(1).collect();
    let elsewhere = tempfile::tempdir().unwrap();
    let out = mur()
        .args(&args)
        .current_dir(elsewhere.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{cmd}: {}", stderr(&out));
    assert!(
        stdout(&out).contains("max_turns_reached"),
        "{}",
        stdout(&out)
    );

    p.write("script.yaml", "turns:\n  - error: the provider is down\n");
    let out = p.mur(&["run", "--task", "x"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).ends_with("status:  failed\n"));
}

/// Start `mur run` in the background on a slow script; returns the child and its first lines.
fn start_slow(p: &Project) -> (std::process::Child, String, String) {
    scripted(p, "", "turns:\n  - delay_ms: 20000\n    say: late\n");
    let mut child = mur()
        .args(["run", "--task", "wait"])
        .current_dir(p.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut url = String::new();
    reader.read_line(&mut url).unwrap();
    let mut session = String::new();
    reader.read_line(&mut session).unwrap();
    // Keep reading the rest in the background so the pipe never fills.
    let rest = std::thread::spawn(move || {
        let mut s = String::new();
        reader.read_to_string(&mut s).unwrap();
        s
    });
    std::mem::forget(rest);
    (child, url, session)
}

fn http_get(port: &str, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn the_door_answers_with_the_sessions_identity_and_ctrl_c_cancels_cleanly() {
    let p = Project::new();
    let (mut child, url, session) = start_slow(&p);
    let port = url.trim().rsplit(':').next().unwrap().to_string();
    let id = session
        .trim()
        .strip_prefix("session: ")
        .unwrap()
        .to_string();
    std::thread::sleep(Duration::from_millis(200));
    let root = http_get(&port, "/");
    assert!(root.starts_with("HTTP/1.1 200"), "{root}");
    assert!(root.contains(&format!("\"session_id\":\"{id}\"")), "{root}");
    assert!(
        root.contains("\"name\":\"t\"") && root.contains("\"state\":\"running\""),
        "{root}"
    );
    let by_id = http_get(&port, &format!("/{id}"));
    assert!(by_id.contains(&format!("\"session_id\":\"{id}\"")));
    assert!(http_get(&port, "/ses_00000000000000000000000000000000").starts_with("HTTP/1.1 404"));

    // SIGINT, as Ctrl-C sends it.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1));
    let s = &p.sessions()[0];
    let t = trace(&s.join("trace.jsonl"));
    assert_eq!(
        types(&t),
        [
            "session_start",
            "task_start",
            "task_canceled",
            "task_end",
            "session_end"
        ]
    );
    assert_eq!(t[4]["exit_status"], "canceled");
    assert!(std::fs::read_to_string(s.join("out/result.txt"))
        .unwrap()
        .starts_with("error: task canceled: interrupted (Ctrl-C)"));
}

#[test]
fn help_is_useful() {
    let out = mur().arg("--help").output().unwrap();
    let text = stdout(&out);
    for cmd in ["run", "doctor", "trace"] {
        assert!(text.contains(cmd), "{text}");
    }
    let out = mur().args(["run", "--help"]).output().unwrap();
    let text = stdout(&out);
    for flag in [
        "--task",
        "--workdir",
        "--verbose",
        "--max-depth",
        "--max-children",
    ] {
        assert!(text.contains(flag), "{text}");
    }
    let out = mur().args(["run", "--no-such-flag"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_named_file_that_is_a_device_is_refused_by_run_and_doctor() {
    let p = Project::new();
    p.write(
        "murmur.yaml",
        &scripted_manifest("t", "").replace(
            "  model: scripted\n",
            "  model: scripted\n  system_prompt_file: /dev/zero\n",
        ),
    );
    p.write("script.yaml", "turns:\n  - say: never\n");
    // It used to read /dev/zero until memory ran out.
    let out = p.mur(&["run", "--task", "x"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(
            "inference.system_prompt_file names /dev/zero, which cannot be read: it is not a regular file"
        ),
        "{}",
        stderr(&out)
    );
    assert!(!p.path().join("workdir").exists(), "nothing was written");
    let doctor = p.mur(&["doctor"]);
    assert_eq!(doctor.status.code(), Some(1));
    assert!(
        stderr(&doctor).contains("inference.system_prompt_file names /dev/zero, which cannot be read: it is not a regular file"),
        "{}",
        stderr(&doctor)
    );
}

#[test]
fn a_verbose_run_logs_its_lifecycle_and_every_failed_call() {
    let p = Project::new();
    p.write(
        "murmur.yaml",
        &scripted_manifest("t", "capabilities:\n  shell:\n    allow: [bash]\n"),
    );
    p.write(
        "script.yaml",
        "turns:\n  - call: [{tool: nope, input: {}}]\n  - say: done\n",
    );
    let quiet = p
        .mur_cmd(&["run", "--task", "x"])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(quiet.status.success());
    assert_eq!(stderr(&quiet), "", "without -v, nothing but warnings");
    let out = p
        .mur_cmd(&["run", "--task", "x", "-v"])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = stderr(&out);
    for needle in [
        " session_start capsule_name=t",
        " tool_call turn=0 tool_name=nope status=error ",
        " session_end exit_status=ok ",
    ] {
        assert!(err.contains(needle), "{needle}: {err}");
    }
    assert!(!err.contains(" inference "), "model calls are -vv: {err}");
}

#[test]
fn quiet_prints_nothing_but_errors() {
    let p = Project::new();
    p.write("murmur.yaml", &scripted_manifest("quiet", ""))
        .write("script.yaml", "turns:\n  - say: done\n");
    let ok = p.mur(&["run", "--task", "x", "-q"]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    assert_eq!(stdout(&ok), "");
    assert_eq!(stderr(&ok), "");
    // The run happened: its records are there.
    let s = &p.sessions()[0];
    assert_eq!(
        std::fs::read_to_string(s.join("out/result.txt")).unwrap(),
        "done"
    );
    // A run that cannot start says why on stderr, and nothing else anywhere.
    std::fs::remove_file(p.path().join("script.yaml")).unwrap();
    let failed = p.mur(&["run", "--task", "x", "-q"]);
    let err = stderr(&failed);
    assert_eq!(failed.status.code(), Some(1), "{err}");
    assert_eq!(stdout(&failed), "");
    assert!(err.starts_with("error["), "{err}");
    assert!(err.contains("script.yaml"), "{err}");
    // -q and -v contradict each other.
    let both = p.mur(&["run", "--task", "x", "-q", "-v"]);
    assert_eq!(both.status.code(), Some(2));
}
