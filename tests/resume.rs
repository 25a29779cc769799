//! `mur resume` end to end: a real `mur` on the fake provider is killed with SIGKILL while its
//! third model call is pending, and a second `mur` continues it from its last complete turn.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::*;
use fake_provider::builders::anthropic;
use fake_provider::{FakeProvider, Reply};
use serde_json::{json, Value};

fn manifest(endpoint: &str, shell: &str) -> String {
    anthropic_capsule("stepper", endpoint, shell)
}

fn tool_use(id: &str, command: &str) -> Reply {
    anthropic_call(id, "bash", json!({ "command": command }))
}

/// A project whose session ran steps one and two and was killed (SIGKILL) while its third
/// model call was pending at the fake provider.
struct Killed {
    fake: FakeProvider,
    p: Project,
    home: PathBuf,
    work: PathBuf,
    id: String,
    records: PathBuf,
}

impl Killed {
    fn mur(&self, args: &[&str]) -> Command {
        let mut c = self.p.mur_cmd(args);
        c.env("HOME", &self.home)
            .env("ANTHROPIC_API_KEY", "sk-ant-test");
        c
    }
}

async fn killed_at_the_third_call() -> Killed {
    let fake = FakeProvider::start([
        tool_use("toolu_1", "echo one >> steps.txt"),
        tool_use("toolu_2", "echo two >> steps.txt"),
        Reply::Hang,
    ])
    .await
    .unwrap();
    let p = Project::new();
    p.write("murmur.yaml", &manifest(&fake.endpoint(), "bash"));
    std::fs::create_dir_all(p.path().join("work")).unwrap();
    let home = p.path().join("home");
    let work = p.path().join("work");
    let child = p
        .mur_cmd(&["run", "--task", "do the three steps", "--workdir", "work"])
        .env("HOME", &home)
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The real events: the provider holds the third request, and the second step's lines
    // (its tool_call and shell) are in the trace.
    let second_step_written = || {
        list(&records_home(&home, &work)).first().is_some_and(|s| {
            std::fs::read_to_string(s.join("trace.jsonl"))
                .is_ok_and(|t| t.matches("{\"event_type\":\"shell\"").count() == 2)
        })
    };
    kill_when(child, "the third model call", || {
        fake.requests().len() >= 3 && second_step_written()
    })
    .await;
    let group = records_home(&home, &work);
    let sessions = list(&group);
    assert_eq!(sessions.len(), 1);
    let records = sessions[0].clone();
    let id = records.file_name().unwrap().to_str().unwrap().to_string();
    let t = trace(&records.join("trace.jsonl"));
    assert!(
        !types(&t).contains(&"session_end".to_string()),
        "killed: no session_end"
    );
    Killed {
        fake,
        p,
        home,
        work,
        id,
        records,
    }
}

/// Wait (at most 60 s) until `there()` holds, then SIGKILL `child`: a kill at a known point,
/// not after a guess at how long it takes. Fails if `mur` ends first.
async fn kill_when(mut child: std::process::Child, what: &str, there: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !there() {
        assert!(Instant::now() < deadline, "{what} never happened");
        if let Some(status) = child.try_wait().unwrap() {
            panic!("mur ended before {what}: {status}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
}

fn run(c: &mut Command) -> Output {
    c.output().unwrap()
}

fn newest_other(group: &Path, old: &str) -> PathBuf {
    list(group)
        .into_iter()
        .rfind(|s| !s.ends_with(old))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_killed_at_its_third_model_call_resumes_without_running_a_step_twice() {
    let k = killed_at_the_third_call().await;
    assert_eq!(
        std::fs::read_to_string(k.work.join("steps.txt")).unwrap(),
        "one\ntwo\n"
    );
    k.fake.push(tool_use("toolu_3", "echo three >> steps.txt"));
    k.fake
        .push(Reply::json(anthropic::text("All three steps are done.")));
    let id = k.id.clone();
    let mut cmd = k.mur(&["resume", &id, "--workdir", "work"]);
    let out = tokio::task::spawn_blocking(move || run(&mut cmd))
        .await
        .unwrap();
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let text = normalise(&stdout(&out), k.p.path());
    assert_eq!(
        text,
        "resumed: ses_<ID> (from turn 2)\nmurmur: url localhost:<PORT>\nsession: ses_<ID>\nstatus:  ok\n"
    );
    // Steps one and two once each, step three after them.
    assert_eq!(
        std::fs::read_to_string(k.work.join("steps.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );
    // The first resumed request carries the whole recorded conversation.
    let reqs = k.fake.requests();
    assert_eq!(reqs.len(), 5);
    let body = reqs[3].body.clone().unwrap();
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 5, "task, two calls and their two results");
    assert_eq!(messages[0]["content"][0]["text"], "do the three steps");
    assert_eq!(messages[3]["content"][0]["type"], "tool_use");
    assert_eq!(messages[3]["content"][0]["id"], "toolu_2");
    assert_eq!(messages[4]["content"][0]["tool_use_id"], "toolu_2");
    assert!(messages[4].to_string().contains("echo two >> steps.txt"));
    // A new session, linked to the old one; totals add up across the resume.
    let resumed = newest_other(&records_home(&k.home, &k.work), &k.id);
    let t = trace(&resumed.join("trace.jsonl"));
    assert_eq!(t[0]["resumed_from"], k.id.as_str());
    assert_eq!(t[0]["resumed_totals"]["turns"], 2);
    assert_eq!(t[0]["resumed_totals"]["tool_calls"], 2);
    let turns: Vec<&Value> = t
        .iter()
        .filter(|l| l["event_type"] == "inference")
        .map(|l| &l["turn"])
        .collect();
    assert_eq!(turns, [2, 3], "finished turns are never run again");
    let end = t.last().unwrap();
    assert_eq!(end["event_type"], "session_end");
    assert_eq!(end["exit_status"], "ok");
    assert_eq!(end["total_turns"], 4);
    assert_eq!(end["total_tool_calls"], 3);
    assert_eq!(end["total_shell_calls"], 3);
    let inputs = |t: &[Value]| -> u64 {
        t.iter()
            .filter(|l| l["event_type"] == "inference")
            .map(|l| l["input_tokens"].as_u64().unwrap())
            .sum()
    };
    let old = trace(&k.records.join("trace.jsonl"));
    assert_eq!(end["total_input_tokens"], inputs(&old) + inputs(&t));
    // The old trace is left as it was.
    assert!(!types(&trace(&k.records.join("trace.jsonl"))).contains(&"session_end".to_string()));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_torn_last_line_resumes_from_the_last_whole_turn() {
    let k = killed_at_the_third_call().await;
    // Tear the trace inside the second call's tool_call line: its result was never recorded.
    let path = k.records.join("trace.jsonl");
    let raw = std::fs::read_to_string(&path).unwrap();
    let cut = raw.find("\"tool_call_id\":\"toolu_2\"").unwrap();
    let line_start = raw[..cut].rfind('\n').unwrap() + 1;
    std::fs::write(&path, &raw[..cut]).unwrap();
    assert!(raw[line_start..cut].starts_with("{\"event_type\":\"tool_call\""));
    k.fake.push(tool_use("toolu_3", "echo three >> steps.txt"));
    k.fake.push(Reply::json(anthropic::text("done")));
    let id = k.id.clone();
    let mut cmd = k.mur(&["resume", &id, "--workdir", "work"]);
    let out = tokio::task::spawn_blocking(move || run(&mut cmd))
        .await
        .unwrap();
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    // The call without a recorded result was treated as not done and ran again first.
    assert_eq!(
        std::fs::read_to_string(k.work.join("steps.txt")).unwrap(),
        "one\ntwo\ntwo\nthree\n"
    );
    let resumed = newest_other(&records_home(&k.home, &k.work), &k.id);
    let t = trace(&resumed.join("trace.jsonl"));
    let first_call = t.iter().find(|l| l["event_type"] == "tool_call").unwrap();
    assert_eq!(first_call["tool_call_id"], "toolu_2");
    assert_eq!(first_call["turn"], 1);
    let end = t.last().unwrap();
    assert_eq!(end["total_turns"], 4);
    assert_eq!(end["total_tool_calls"], 3, "one recorded, two run here");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_manifest_is_refused_naming_the_difference_unless_forced() {
    let k = killed_at_the_third_call().await;
    k.p.write("murmur.yaml", &manifest(&k.fake.endpoint(), "bash, ls"));
    let id = k.id.clone();
    let mut cmd = k.mur(&["resume", &id, "--workdir", "work"]);
    let out = tokio::task::spawn_blocking(move || run(&mut cmd))
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out), "status:  failed\n");
    assert_eq!(
        normalise(&stderr(&out), k.p.path()),
        "error[E-RPL-002]: murmur.yaml changed since session ses_<ID> ran: grants: shell_allow was [bash] and is now [bash, ls]; tools: added [ls], removed []\n  hint: undo the change, or pass --force to resume with the manifest as it is now\n"
    );
    assert_eq!(
        list(&records_home(&k.home, &k.work)).len(),
        1,
        "nothing started"
    );
    k.fake.push(Reply::json(anthropic::text("done anyway")));
    let mut cmd = k.mur(&["resume", &id, "--workdir", "work", "--force", "--json"]);
    let out = tokio::task::spawn_blocking(move || run(&mut cmd))
        .await
        .unwrap();
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let v: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(v["resumed_from"], k.id.as_str());
    assert_eq!(v["status"], "ok");
    assert_eq!(v["totals"]["turns"], 3);
}

#[test]
fn finished_and_unrecorded_sessions_are_refused_with_what_is_missing() {
    let p = Project::new();
    p.write(
        "murmur.yaml",
        &scripted_manifest("plain", "capabilities:\n  shell:\n    allow: [bash]\n"),
    );
    p.write("script.yaml", "turns:\n  - say: done\n");
    let out = p.mur(&["run", "--task", "x"]);
    assert!(out.status.success());
    let out = p.mur(&["resume"]);
    assert_eq!(out.status.code(), Some(1));
    let err = normalise(&stderr(&out), p.path());
    assert!(
        err.starts_with("error[E-RPL-001]: <ROOT>/workdir/.murmur/ses_<ID>/trace.jsonl: session ses_<ID> was recorded without trace.capture: content, so its trace holds no model replies and no tool results to resume from\n"),
        "{err}"
    );
    let manifest = std::fs::read_to_string(p.path().join("murmur.yaml")).unwrap();
    p.write(
        "murmur.yaml",
        &format!("{manifest}trace:\n  capture: content\n"),
    );
    let out = p.mur(&["run", "--task", "x"]);
    assert!(out.status.success());
    let out = p.mur(&["resume"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        normalise(&stderr(&out), p.path()),
        "error[E-RPL-003]: session ses_<ID> ended ok: there is nothing left to resume\n  hint: mur run the capsule with a new task, or mur replay the session to run it again\n"
    );
}

/// A capsule folder packed and installed into the project's store (as `local/<name>`).
fn install_capsule(p: &Project, name: &str, manifest: &str, script: Option<&str>) {
    p.write(&format!("capsules/{name}/murmur.yaml"), manifest);
    if let Some(s) = script {
        p.write(&format!("capsules/{name}/script.yaml"), s);
    }
    let zip = format!("{name}.mur.zip");
    let out = p.mur(&["build", &format!("capsules/{name}"), "-o", &zip]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = p.mur(&["install", &format!("./{zip}")]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_finished_delegation_keeps_its_outcome_and_a_running_one_is_delegated_again() {
    // `slow` asks the fake provider, which holds its first request until the kill.
    let fake = FakeProvider::start([Reply::Hang]).await.unwrap();
    let p = Project::new();
    let content = "trace:\n  capture: content\n";
    p.write(
        "murmur.yaml",
        &format!(
            "{}{content}",
            scripted_manifest(
                "parent",
                "capabilities:\n  spawn:\n    allow: [local/fast, local/slow]\n"
            )
        ),
    );
    install_capsule(
        &p,
        "fast",
        &format!("{}{content}", scripted_manifest("fast", "")),
        Some("turns:\n  - say: fast answer\n"),
    );
    let slow = manifest(&fake.endpoint(), "bash")
        .replace("capabilities:\n  shell:\n    allow: [bash]\n", "");
    install_capsule(
        &p,
        "slow",
        &slow.replace("name: stepper", "name: slow"),
        None,
    );
    p.write(
        "script.yaml",
        "turns:\n  - call:\n      - {tool: delegate-task, input: {capsule: fast, version: 0.1.0, task: quick}}\n      - {tool: delegate-task, input: {capsule: slow, version: 0.1.0, task: slow}}\n  - say: waiting\n  - expect: slow answer\n    say: '{{last}}'\n",
    );
    let child = p
        .mur_cmd(&["run", "--task", "fan out"])
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The real events: slow's model call is held, fast's trace has ended.
    let fast_ended = || {
        p.sessions().first().is_some_and(|s| {
            list(&s.join("children")).iter().any(|c| {
                std::fs::read_to_string(c.join("trace.jsonl")).is_ok_and(|t| {
                    t.contains("\"capsule_name\":\"fast\"") && t.contains("\"session_end\"")
                })
            })
        })
    };
    // And the parent has written slow's delegation_start: a kill before that line is written
    // loses it (the runtime writes lines as they happen, not before), and with it the
    // delegation this test resumes.
    let slow_started = || {
        p.sessions().first().is_some_and(|s| {
            std::fs::read_to_string(s.join("trace.jsonl")).is_ok_and(|t| {
                t.lines().any(|l| {
                    l.contains("\"delegation_start\"") && l.contains("\"capsule\":\"local/slow\"")
                })
            })
        })
    };
    kill_when(child, "the children getting there", || {
        !fake.requests().is_empty() && fast_ended() && slow_started()
    })
    .await;
    let old = p.sessions()[0].clone();
    let old_id = old.file_name().unwrap().to_str().unwrap().to_string();
    let old_trace = trace(&old.join("trace.jsonl"));
    let slow_dlg = old_trace
        .iter()
        .filter(|l| l["event_type"] == "delegation_start")
        .find(|l| l["capsule"] == "local/slow")
        .map(|l| l["delegation_id"].as_str().unwrap().to_string())
        .unwrap();
    fake.push(Reply::json(anthropic::text("slow answer")));
    let dir = p.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        mur()
            .args(["resume"])
            .current_dir(dir)
            .env("ANTHROPIC_API_KEY", "sk-ant-test")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains(&format!(
            "delegating again: {slow_dlg} (still running when the session stopped)\n"
        )),
        "{}",
        stdout(&out)
    );
    let resumed = p
        .sessions()
        .into_iter()
        .find(|s| !s.ends_with(&old_id))
        .unwrap();
    // Only the running delegation ran again: fast kept its recorded outcome.
    let children = list(&resumed.join("children"));
    assert_eq!(children.len(), 1);
    assert_eq!(
        trace(&children[0].join("trace.jsonl"))[0]["capsule_name"],
        "slow"
    );
    let t = trace(&resumed.join("trace.jsonl"));
    let restarted = t
        .iter()
        .find(|l| l["event_type"] == "delegation_restarted")
        .unwrap();
    assert_eq!(restarted["previous_delegation_id"], slow_dlg.as_str());
    assert_eq!(restarted["resumed_from"], old_id.as_str());
    assert_eq!(t.last().unwrap()["exit_status"], "ok");
    let result = std::fs::read_to_string(resumed.join("out/result.txt")).unwrap();
    assert!(result.contains("slow answer"), "{result}");
    assert_eq!(fake.requests().len(), 2);
}

/// A native tool `local/<name>` packed and put in the project store, printing `says`.
fn store_tool(p: &Project, name: &str, says: &str) {
    install_artifact(
        p,
        name,
        &format!("name: {name}\nversion: 0.1.0\nruntime: tool\nimplementation: native\ndescription: A probe.\n"),
        name,
        &format!("#!/bin/bash\nread -r _\necho {says}\n"),
    );
}

/// The text inside a pulled tool's `<untrusted-content>` fence.
fn unfenced(output: &str) -> String {
    let body = output.split_once('\n').map(|(_, b)| b).unwrap_or(output);
    body.strip_suffix("\n</untrusted-content>")
        .unwrap_or(body)
        .to_string()
}

/// A session that pulled local/tool-greet and local/tool-bye from the project store, called
/// tool-greet, and was killed (SIGKILL) while its fourth model call was pending.
async fn killed_after_pulling() -> Killed {
    let fake = FakeProvider::start([
        anthropic_call(
            "toolu_1",
            "pull-artifact",
            json!({"artifact": "local/tool-greet"}),
        ),
        anthropic_call(
            "toolu_2",
            "pull-artifact",
            json!({"artifact": "local/tool-bye"}),
        ),
        anthropic_call("toolu_3", "tool-greet", json!({})),
        Reply::Hang,
    ])
    .await
    .unwrap();
    let p = Project::new();
    p.write("murmur.yaml", &manifest(&fake.endpoint(), "bash"));
    store_tool(&p, "tool-greet", "hello");
    store_tool(&p, "tool-bye", "bye");
    // Installing pinned them as the operator's: the session is to pull them itself.
    std::fs::remove_file(p.path().join("murmur.lock")).unwrap();
    p.write(
        "murmur.yaml",
        &manifest(&fake.endpoint(), "bash").replace(
            "    allow: [bash]\n",
            "    allow: [bash]\n  install:\n    tool: [\"local/tool-*\"]\n    from: [stores]\n",
        ),
    );
    std::fs::create_dir_all(p.path().join("work")).unwrap();
    let home = p.path().join("home");
    let work = p.path().join("work");
    let child = p
        .mur_cmd(&["run", "--task", "greet", "--workdir", "work"])
        .env("HOME", &home)
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let greeted = || {
        list(&records_home(&home, &work)).first().is_some_and(|s| {
            std::fs::read_to_string(s.join("trace.jsonl"))
                .is_ok_and(|t| t.matches("{\"event_type\":\"tool_call\"").count() == 3)
        })
    };
    kill_when(child, "the fourth model call", || {
        fake.requests().len() >= 4 && greeted()
    })
    .await;
    let records = list(&records_home(&home, &work))[0].clone();
    let id = records.file_name().unwrap().to_str().unwrap().to_string();
    Killed {
        fake,
        p,
        home,
        work,
        id,
        records,
    }
}

fn lock_pins(k: &Killed) -> Vec<(String, String)> {
    let lock = std::fs::read_to_string(k.p.path().join("murmur.lock")).unwrap();
    let mut pins = Vec::new();
    let mut name = String::new();
    for l in lock.lines() {
        if let Some(n) = l.strip_prefix("  - name: ") {
            name = n.to_string();
        }
        if let Some(s) = l.strip_prefix("    session: ") {
            pins.push((name.clone(), s.to_string()));
        }
    }
    pins
}

#[tokio::test(flavor = "multi_thread")]
async fn a_resume_holds_the_pulled_tools_as_the_lock_pins_them_and_can_remove_one() {
    let k = killed_after_pulling().await;
    let pins = lock_pins(&k);
    assert_eq!(
        pins,
        [
            ("local/tool-greet".to_string(), k.id.clone()),
            ("local/tool-bye".to_string(), k.id.clone())
        ]
    );
    k.fake
        .push(anthropic_call("toolu_4", "tool-greet", json!({})));
    k.fake.push(anthropic_call(
        "toolu_5",
        "remove-artifact",
        json!({"artifact": "tool-bye"}),
    ));
    k.fake.push(Reply::json(anthropic::text("Greeted.")));
    let id = k.id.clone();
    let mut cmd = k.mur(&["resume", &id, "--workdir", "work"]);
    let out = tokio::task::spawn_blocking(move || run(&mut cmd))
        .await
        .unwrap();
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        normalise(&stdout(&out), k.p.path()),
        "resumed: ses_<ID> (from turn 3)\nholding again: local/tool-greet@0.1.0 (pulled by the session, as murmur.lock pins it)\nholding again: local/tool-bye@0.1.0 (pulled by the session, as murmur.lock pins it)\nmurmur: url localhost:<PORT>\nsession: ses_<ID>\nstatus:  ok\n"
    );
    let group = records_home(&k.home, &k.work);
    let new = newest_other(&group, &k.id);
    let new_id = new.file_name().unwrap().to_str().unwrap().to_string();
    let t = trace(&new.join("trace.jsonl"));
    let calls: Vec<(String, String, String)> = t
        .iter()
        .filter(|l| l["event_type"] == "tool_call")
        .map(|l| {
            (
                l["tool_name"].as_str().unwrap().to_string(),
                l["status"].as_str().unwrap().to_string(),
                unfenced(l["output"].as_str().unwrap()),
            )
        })
        .collect();
    let removed = "{\"artifact\":\"local/tool-bye\",\"removed\":true}\n</untrusted-content>\ntool-bye is gone from your tool list from your next turn; a call to it is refused.";
    assert_eq!(
        calls,
        [
            (
                "tool-greet".to_string(),
                "ok".to_string(),
                "hello\n".to_string()
            ),
            (
                "remove-artifact".to_string(),
                "ok".to_string(),
                removed.to_string()
            ),
        ]
    );
    // The model was offered both pulled tools from its first call on.
    let first = &k.fake.requests()[4];
    let offered: Vec<&str> = first.body.as_ref().unwrap()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        offered.contains(&"tool-greet") && offered.contains(&"tool-bye"),
        "{offered:?}"
    );
    // The lock: the kept pin is the resumed session's, the removed one is gone; the staged
    // copies are the new session's.
    assert_eq!(lock_pins(&k), [("local/tool-greet".to_string(), new_id)]);
    assert!(new.join("tools/tool-greet/bin/tool-greet").is_file());
    assert!(!new.join("tools/tool-bye").exists());
    assert!(
        k.records.join("tools/tool-bye").exists(),
        "the old records stay as they were"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pulled_tool_no_store_holds_any_more_refuses_the_resume_and_changes_nothing() {
    let k = killed_after_pulling().await;
    std::fs::remove_dir_all(k.p.path().join(".murmur/artifacts/local/tool-bye")).unwrap();
    let lock = std::fs::read_to_string(k.p.path().join("murmur.lock")).unwrap();
    let out = k
        .mur(&["resume", &k.id, "--workdir", "work"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        normalise(&stderr(&out), k.p.path()),
        "error[E-RPL-004]: cannot resume session ses_<ID>: murmur.lock pins 'local/tool-bye@0.1.0', which the session pulled, and neither the project store nor the global store holds local/tool-bye@0.1.0 any more\n  hint: put the pinned version back in the project or global store (`mur install <its .mur.zip>`), or restore its murmur.lock entry; a resume holds a pulled tool only as the lock pinned it\n"
    );
    assert_eq!(
        std::fs::read_to_string(k.p.path().join("murmur.lock")).unwrap(),
        lock,
        "the lock is as it was"
    );
    assert_eq!(
        list(&records_home(&k.home, &k.work)).len(),
        1,
        "no session started"
    );
}
