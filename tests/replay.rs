//! `mur replay` end to end: the real binary records sessions (scripted model, or the fake
//! provider over HTTP), replays them offline, and names the first divergence.

mod common;

use common::*;
use fake_provider::builders::anthropic;
use fake_provider::{FakeProvider, Reply};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const CONTENT: &str = "trace:\n  capture: content\n";

/// Reads a file with bash alone (a contained bash may run no other binary).
const READ: &str = "echo \"$(<notes.txt)\"";

fn anthropic_manifest(endpoint: &str) -> String {
    anthropic_capsule("reader", endpoint, "bash")
}

fn tool_use(id: &str, command: &str) -> Reply {
    anthropic_call(id, "bash", json!({ "command": command }))
}

fn session_id(out: &std::process::Output) -> String {
    stdout(out)
        .lines()
        .find_map(|l| l.strip_prefix("session: "))
        .expect("a session line")
        .to_string()
}

fn records(home: &std::path::Path, work: &std::path::Path, id: &str) -> std::path::PathBuf {
    records_home(home, work).join(id)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_replays_offline_unchanged_and_a_changed_file_is_named_with_a_diff() {
    let fake = FakeProvider::start([
        tool_use("toolu_1", READ),
        tool_use("toolu_2", "echo step >> log.txt"),
        Reply::json(anthropic::text("The notes say hello.")),
    ])
    .await
    .unwrap();
    let p = Project::new();
    p.write("murmur.yaml", &anthropic_manifest(&fake.endpoint()));
    p.write("work/notes.txt", "hello\nfrom the notes\n");
    let home = p.path().join("home");
    let work = p.path().join("work");
    let dir = p.path().to_path_buf();
    let (home2, dir2) = (home.clone(), dir.clone());
    let out = tokio::task::spawn_blocking(move || {
        mur()
            .args(["run", "--task", "read the notes", "--workdir", "work"])
            .current_dir(&dir2)
            .env("HOME", &home2)
            .env("ANTHROPIC_API_KEY", "sk-ant-test")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let recorded = session_id(&out);
    assert_eq!(fake.requests().len(), 3);

    // No key, and the provider is never asked again.
    let replay = |args: Vec<&'static str>| {
        let (home, dir, id) = (home.clone(), dir.clone(), recorded.clone());
        move || {
            let mut c = mur();
            c.arg("replay")
                .arg(&id)
                .args(args)
                .current_dir(&dir)
                .env("HOME", &home)
                .env_remove("ANTHROPIC_API_KEY");
            c.output().unwrap()
        }
    };
    let out = tokio::task::spawn_blocking(replay(vec!["--workdir", "work"]))
        .await
        .unwrap();
    assert_eq!(
        stdout(&out),
        "replay: identical (3 turns, 2 tool calls)\n",
        "{}",
        stderr(&out)
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(fake.requests().len(), 3, "no model request was made");

    // The replay is a session of its own, linked to the recorded one.
    let mut sessions: Vec<_> = list(&records_home(&home, &work));
    sessions.retain(|s| !s.ends_with(&recorded));
    assert_eq!(sessions.len(), 1);
    let t = trace(&sessions[0].join("trace.jsonl"));
    assert_eq!(t[0]["replay_of"], recorded.as_str());
    assert_eq!(t[0]["driver"], "mur/driver-replay");
    assert_eq!(t.last().unwrap()["exit_status"], "ok");

    // A file the first call reads changed: turn 0, bash, the input, and the new text.
    std::fs::write(work.join("notes.txt"), "goodbye\nfrom the notes\n").unwrap();
    let out = tokio::task::spawn_blocking(replay(vec!["--workdir", "work"]))
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let input = json!({ "command": READ }).to_string();
    assert_eq!(
        stdout(&out),
        format!(
            "replay: diverged at turn 0: the result of bash differs\n\
             tool:  bash\n\
             input: {input}\n\
             --- recorded\n\
             +++ replayed\n\
             @@ -2,7 +2,7 @@\n \
             $ {READ}\n \
             Exit code: 0\n \
             Stdout:\n\
             -hello\n\
             +goodbye\n \
             from the notes\n \n \
             Stderr:\n"
        )
    );
    assert_eq!(fake.requests().len(), 3);

    // --json: the same as one object.
    let out = tokio::task::spawn_blocking(replay(vec!["--workdir", "work", "--json"]))
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(v["status"], "diverged");
    assert_eq!(v["turn"], 0);
    assert_eq!(v["tool"], "bash");
    assert_eq!(v["replay_of"], recorded.as_str());
    assert_eq!(v["input"], json!({ "command": READ }));
    assert!(v["replayed"].as_str().unwrap().contains("goodbye"));
    assert!(v["recorded"].as_str().unwrap().contains("hello"));
    let _ = records(&home, &work, &recorded);
}

fn scripted_project(caps: &str, script: &str) -> Project {
    let p = Project::new();
    p.write(
        "murmur.yaml",
        &format!("{}{CONTENT}", scripted_manifest("player", caps)),
    );
    p.write("script.yaml", script);
    p
}

#[test]
fn tools_recorded_plays_back_a_trace_whose_tools_cannot_run_here() {
    let p = scripted_project(
        "capabilities:\n  shell:\n    allow: [bash]\n",
        "turns:\n  - call: [{tool: bash, input: {command: 'echo hello, world'}}]\n  - expect: 'hello, world'\n    say: done\n",
    );
    let out = p.mur(&["run", "--task", "greet the world"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let recorded = session_id(&out);

    // Here no bash can be found: played back, the run is the recorded one.
    let nowhere = p.path().join("empty-path");
    std::fs::create_dir_all(&nowhere).unwrap();
    let out = p
        .mur_cmd(&["replay", &recorded, "--tools", "recorded"])
        .env("PATH", &nowhere)
        .output()
        .unwrap();
    assert_eq!(
        stdout(&out),
        "replay: identical (2 turns, 1 tool calls)\n",
        "{}",
        stderr(&out)
    );
    assert_eq!(out.status.code(), Some(0));
    // The played-back session ran nothing and still wrote its tool_call and shell lines.
    let replayed = p
        .sessions()
        .into_iter()
        .find(|s| !s.ends_with(&recorded))
        .unwrap();
    let t = trace(&replayed.join("trace.jsonl"));
    assert_eq!(t[0]["replay_of"], recorded.as_str());
    let call = t.iter().find(|l| l["event_type"] == "tool_call").unwrap();
    assert!(call["output"].as_str().unwrap().contains("hello, world"));
    assert!(t.iter().any(|l| l["event_type"] == "shell"));

    // Run for real, the missing binary is the divergence.
    let out = p
        .mur_cmd(&["replay", &recorded])
        .env("PATH", &nowhere)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with("replay: diverged at turn 0: the result of bash differs\ntool:  bash\ninput: {\"command\":\"echo hello, world\"}\n"),
        "{text}"
    );
    assert!(
        text.contains("+binary 'bash' is not installed on this machine"),
        "{text}"
    );
}

/// The turns of the session recorded in `records` and of every session below it, from their
/// `session_end` lines.
fn tree_turns(records: &std::path::Path) -> u64 {
    let own = trace(&records.join("trace.jsonl"))
        .iter()
        .filter(|l| l["event_type"] == "session_end")
        .map(|l| l["total_turns"].as_u64().unwrap())
        .sum::<u64>();
    own + list(&records.join("children"))
        .iter()
        .map(|c| tree_turns(c))
        .sum::<u64>()
}

#[test]
fn the_delegation_tree_replays_each_child_from_its_own_trace() {
    let p = Project::example("delegation-tree");
    for m in [
        "murmur.yaml",
        "capsules/researcher/murmur.yaml",
        "capsules/writer/murmur.yaml",
        "capsules/critic/murmur.yaml",
        "capsules/proofreader/murmur.yaml",
    ] {
        let path = p.path().join(m);
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str(&format!("\n{CONTENT}"));
        std::fs::write(&path, text).unwrap();
    }
    let p = p.set_up();
    let out = p.mur(&["run", "--task", "Write a short note about actor runtimes."]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let recorded = session_id(&out);
    // How many turns the tree took depends on when each outcome arrived (before a parent's
    // next model call it is shown there; after, the parent waits and continues once): 9 most
    // often, 8 when the proofreader answered before the writer's second call. The replay
    // plays the recording's count, whichever it was.
    let turns = tree_turns(&p.path().join("workdir/.murmur").join(&recorded));
    assert!(turns == 8 || turns == 9, "{turns}");
    let out = p.mur(&["replay", &recorded]);
    assert_eq!(
        stdout(&out),
        format!("replay: identical ({turns} turns, 4 tool calls)\n"),
        "{}",
        stderr(&out)
    );
    // Every replayed child names the recorded child it replays.
    let replayed = p
        .sessions()
        .into_iter()
        .find(|s| !s.ends_with(&recorded))
        .unwrap();
    let root = trace(&replayed.join("trace.jsonl"));
    assert_eq!(root[0]["replay_of"], recorded.as_str());
    let recorded_children: Vec<String> = trace(
        &p.path()
            .join("workdir/.murmur")
            .join(&recorded)
            .join("trace.jsonl"),
    )
    .iter()
    .filter(|l| l["event_type"] == "delegation_start")
    .map(|l| l["child_session_id"].as_str().unwrap().to_string())
    .collect();
    let mut replay_of: Vec<String> = list(&replayed.join("children"))
        .iter()
        .map(|c| {
            trace(&c.join("trace.jsonl"))[0]["replay_of"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    replay_of.sort();
    let mut expected = recorded_children.clone();
    expected.sort();
    assert_eq!(replay_of, expected);

    // Played back, nothing is delegated: the outcomes come from the recording.
    let out = p.mur(&["replay", &recorded, "--tools", "recorded"]);
    assert_eq!(
        stdout(&out),
        "replay: identical (3 turns, 3 tool calls)\n",
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_changed_system_prompt_is_a_divergence_of_its_own() {
    let p = scripted_project(
        "capabilities:\n  shell:\n    allow: [bash]\n",
        "turns:\n  - call: [{tool: bash, input: {command: 'echo one'}}]\n  - say: done\n",
    );
    let out = p.mur(&["run", "--task", "say one"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let recorded = session_id(&out);
    let manifest = std::fs::read_to_string(p.path().join("murmur.yaml")).unwrap();
    p.write(
        "murmur.yaml",
        &manifest.replace(
            "  model: scripted\n",
            "  model: scripted\n  system_prompt: Be brief.\n",
        ),
    );
    let out = p.mur(&["replay", &recorded]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.starts_with("replay: diverged at turn 0: the runtime now sends another system prompt than the recorded one\n--- recorded\n+++ replayed\n"),
        "{text}"
    );
    assert!(text.contains("\n+Be brief.\n"), "{text}");
}

#[test]
fn a_session_recorded_without_content_is_refused_with_what_is_missing() {
    let p = Project::new();
    p.write(
        "murmur.yaml",
        &scripted_manifest("player", "capabilities:\n  shell:\n    allow: [bash]\n"),
    );
    p.write("script.yaml", "turns:\n  - say: done\n");
    let out = p.mur(&["run", "--task", "x"]);
    assert!(out.status.success());
    let recorded = session_id(&out);
    let before = p.sessions().len();
    let out = p.mur(&["replay", &recorded]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out), "");
    let err = normalise(&stderr(&out), p.path());
    assert_eq!(
        err,
        "error[E-RPL-001]: <ROOT>/workdir/.murmur/ses_<ID>/trace.jsonl: session ses_<ID> was recorded without trace.capture: content, so its trace holds no model replies and no tool results to replay from\n  hint: set trace: {capture: content} in murmur.yaml and run the capsule again\n"
    );
    assert_eq!(p.sessions().len(), before, "nothing was started");
}

#[test]
fn trace_show_body_prints_what_the_hashes_name() {
    let p = scripted_project(
        "capabilities:\n  shell:\n    allow: [bash]\n",
        "turns:\n  - say: looking\n    call: [{tool: bash, input: {command: 'echo one'}}]\n  - say: done\n",
    );
    let out = p.mur(&["run", "--task", "say one"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let t = trace(&p.sessions()[0].join("trace.jsonl"));
    let inference: Vec<&Value> = t
        .iter()
        .filter(|l| l["event_type"] == "inference")
        .collect();
    // Each body once, before the first line naming it.
    let bodies: Vec<&Value> = t.iter().filter(|l| l["event_type"] == "body").collect();
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0]["kind"], "system");
    assert_eq!(bodies[1]["kind"], "tools");
    let sha = |s: &str| hex_sha(s.as_bytes());
    for (selector, key) in [
        ("system", "system_sha"),
        ("tools", "tools_sha"),
        ("response", "response_sha"),
    ] {
        for turn in [0, 1] {
            let out = p.mur(&[
                "trace",
                "show",
                "--body",
                selector,
                "--turn",
                &turn.to_string(),
            ]);
            assert!(out.status.success(), "{}", stderr(&out));
            assert_eq!(
                sha(&stdout(&out)),
                inference[turn][key].as_str().unwrap(),
                "{selector} of turn {turn}"
            );
        }
    }
    let out = p.mur(&["trace", "show", "--body", "response", "--turn", "0"]);
    assert_eq!(
        stdout(&out),
        "[{\"type\":\"text\",\"text\":\"looking\"},{\"type\":\"tool_call\",\"id\":\"call_0_0\",\"name\":\"bash\",\"input\":{\"command\":\"echo one\"}}]"
    );
    let out = p.mur(&["trace", "show", "--turn", "0"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "error[E-TRC-001]: --turn has no meaning without --body\n"
    );
    // The tool result as the model saw it.
    let call = t.iter().find(|l| l["event_type"] == "tool_call").unwrap();
    assert_eq!(
        call["output"],
        "<untrusted-content source=tool:bash>\n$ echo one\nExit code: 0\nStdout:\none\n\nStderr:\n\n</untrusted-content>"
    );
}

fn hex_sha(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
