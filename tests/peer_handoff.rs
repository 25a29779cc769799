//! The peer-file handoff end to end: real `mur run` processes, each with its own door, handing
//! a file over by handle (examples/peer-handoff), and the grants deciding whether the two tools
//! exist at all.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

/// Kills a `mur run` still running when the test ends (a failed assertion must not leak it).
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn lines_of<'a>(t: &'a [Value], kind: &str) -> Vec<&'a Value> {
    t.iter().filter(|l| l["event_type"] == kind).collect()
}

/// The one session whose work folder was `workdir`: its records are under
/// `$HOME/.murmur/records/<workdir>/`.
fn records(home: &std::path::Path, workdir: &std::path::Path) -> std::path::PathBuf {
    let mut v = list(&records_home(home, workdir));
    assert_eq!(v.len(), 1);
    v.pop().unwrap()
}

/// Copy `from` to `to` once it exists (within a minute): the message bus between two capsules
/// that can each reach only their own work folder.
fn relay(from: std::path::PathBuf, to: std::path::PathBuf) -> std::thread::JoinHandle<bool> {
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(bytes) = std::fs::read(&from) {
                let tmp = to.with_extension("relay");
                return std::fs::write(&tmp, bytes).is_ok() && std::fs::rename(&tmp, &to).is_ok();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    })
}

#[test]
fn two_processes_hand_a_file_over_by_handle() {
    let p = Project::example("peer-handoff");
    let root = p.path().to_path_buf();
    let home = tempfile::tempdir().unwrap();
    // Each capsule reaches only its own work folder: the handle and the "done" mark are relayed.
    std::fs::create_dir_all(root.join("in")).unwrap();
    std::fs::create_dir_all(root.join("out")).unwrap();
    let handoff = relay(root.join("out/handoff.json"), root.join("in/handoff.json"));
    let done = relay(root.join("in/done"), root.join("out/done"));
    let task = serde_json::json!({"handoff": "handoff.json", "done": "done"}).to_string();

    let mut inbox = Running(
        mur()
            .args(["run", "inbox", "--workdir", "in", "--task", &task])
            .env("HOME", home.path())
            .current_dir(&root)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut out = BufReader::new(inbox.0.stdout.take().unwrap());
    let mut url = String::new();
    let mut session = String::new();
    out.read_line(&mut url).unwrap();
    out.read_line(&mut session).unwrap();
    let port = url.trim().strip_prefix("murmur: url localhost:").unwrap();
    let inbox_id = session
        .trim()
        .strip_prefix("session: ")
        .unwrap()
        .to_string();
    let peer = format!("localhost:{port}/{inbox_id}");

    let outbox_task =
        serde_json::json!({"peer": peer, "handoff": "handoff.json", "done": "done"}).to_string();
    let started = Instant::now();
    let outbox = p
        .mur_cmd(&["run", "outbox", "--workdir", "out", "--task", &outbox_task])
        .env("HOME", home.path())
        .output()
        .unwrap();
    assert!(outbox.status.success(), "{}", stderr(&outbox));
    assert!(
        stdout(&outbox).ends_with("status:  ok\n"),
        "{}",
        stdout(&outbox)
    );
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    let status = inbox.0.wait().unwrap();
    assert!(status.success(), "inbox: {rest}");
    assert_eq!(rest, "status:  ok\n");
    assert!(started.elapsed() < Duration::from_secs(60));
    assert!(handoff.join().unwrap() && done.join().unwrap());

    // The inbox holds the file under peer-in/, named by the handle's id.
    let stored: Vec<_> = std::fs::read_dir(root.join("in/peer-in"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(stored.len(), 1);
    let name = &stored[0];
    assert!(
        name.ends_with("-report.md") && name.len() == 16 + 1 + 9,
        "{name}"
    );
    let contents = "Q3 numbers: revenue 42, churn 3%\n";
    assert_eq!(
        std::fs::read_to_string(root.join("in/peer-in").join(name)).unwrap(),
        contents
    );
    let inbox_records = records(home.path(), &root.join("in"));
    let answer = std::fs::read_to_string(inbox_records.join("out/result.txt")).unwrap();
    assert!(
        answer.starts_with("The outbox sent me its report: <untrusted-content source=tool:bash>")
    );
    assert!(answer.contains(contents));

    // Each side's trace tells its half, naming the handle by its id only.
    let outbox_records = records(home.path(), &root.join("out"));
    let ot = trace(&outbox_records.join("trace.jsonl"));
    let it = trace(&inbox_records.join("trace.jsonl"));
    assert_eq!(
        ot[0]["tools_declared"],
        serde_json::json!(["bash", "mkdir", "mv", "seq", "share-file", "sleep", "wc"])
    );
    assert_eq!(
        it[0]["tools_declared"],
        serde_json::json!([
            "bash",
            "cat",
            "fetch-peer-file",
            "seq",
            "sha256sum",
            "sleep",
            "touch"
        ])
    );
    let mint = lines_of(&ot, "peer_handle_mint");
    let redeem = lines_of(&ot, "peer_handle_redeem");
    let fetch = lines_of(&it, "peer_file_fetch");
    assert_eq!((mint.len(), redeem.len(), fetch.len()), (1, 1, 1));
    let id = mint[0]["handle_id"].as_str().unwrap();
    assert_eq!(&name[..16], id);
    let audience = format!("inbox@{peer}");
    assert_eq!(mint[0]["audience"], audience.as_str());
    assert_eq!(mint[0]["path"], "report.md");
    assert_eq!(mint[0]["outcome"], "ok");
    // ttl 5m narrows the export's max_ttl of 10m.
    let lifetime =
        mint[0]["expires_at_ms"].as_u64().unwrap() - mint[0]["timestamp"].as_u64().unwrap();
    assert!((299_000..=300_000).contains(&lifetime), "{lifetime}");
    assert_eq!(redeem[0]["handle_id"], id);
    assert_eq!(redeem[0]["audience"], audience.as_str());
    assert_eq!(redeem[0]["outcome"], "ok");
    assert_eq!(redeem[0]["bytes"], contents.len());
    assert_eq!(fetch[0]["handle_id"], id);
    assert_eq!(fetch[0]["outcome"], "ok");
    assert_eq!(fetch[0]["stored_path"], format!("peer-in/{name}").as_str());
    assert_eq!(
        fetch[0]["sha256"],
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(contents.as_bytes())).as_str()
    );
    let outbox_id = ot[0]["session_id"].as_str().unwrap();
    assert!(fetch[0]["peer"].as_str().unwrap().ends_with(outbox_id));
    // The staged manifests of the two tools are the runtime-provided shape.
    let staged =
        std::fs::read_to_string(outbox_records.join("tools/share-file/murmur.yaml")).unwrap();
    assert!(
        staged.contains("version: 0.0.0\nruntime: tool\nimplementation: native\n"),
        "{staged}"
    );
    assert!(inbox_records
        .join("tools/fetch-peer-file/murmur.yaml")
        .is_file());
    assert!(!inbox_records.join("tools/share-file").exists());
}

#[test]
fn without_their_grants_the_tools_do_not_exist_and_calls_name_the_missing_declaration() {
    let p = Project::new();
    p.write(
        "murmur.yaml",
        &scripted_manifest("plain", "capabilities:\n  shell:\n    allow: [ls]\n"),
    );
    p.write(
        "script.yaml",
        r#"turns:
  - call: [{tool: share-file, input: {path: a.txt, peer: "localhost:1/ses_0192f0c3a1b27c3d8e9f00112233aa02"}}]
  - expect: "'share-file' needs an exports.peer_files block in murmur.yaml; this capsule declares none"
    call: [{tool: fetch-peer-file, input: {peer: "localhost:1/ses_0192f0c3a1b27c3d8e9f00112233aa02", handle: mh1.a.b}}]
  - expect: "'fetch-peer-file' needs a capabilities.peer_fetch.allow list in murmur.yaml; this capsule declares none"
    say: "Neither tool is mine."
"#,
    );
    let out = p.mur(&["run", "--task", "try"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let s = &p.sessions()[0];
    let t = trace(&s.join("trace.jsonl"));
    assert_eq!(t[0]["tools_declared"], serde_json::json!(["ls"]));
    assert!(!s.join("tools/share-file").exists());
    assert!(!s.join("tools/fetch-peer-file").exists());
    let calls = lines_of(&t, "tool_call");
    assert_eq!(calls.len(), 2);
    assert!(calls.iter().all(|c| c["status"] == "error"));
    assert!(lines_of(&t, "peer_handle_mint").is_empty());
    assert!(lines_of(&t, "peer_file_fetch").is_empty());
}

#[test]
fn a_peer_outside_the_allow_list_is_refused_before_anything_connects() {
    let p = Project::new();
    p.write(
        "murmur.yaml",
        &scripted_manifest(
            "careful",
            "capabilities:\n  peer_fetch:\n    allow: [\"localhost:1\"]\n",
        ),
    );
    p.write(
        "script.yaml",
        r#"turns:
  - call: [{tool: fetch-peer-file, input: {peer: "localhost:2/ses_0192f0c3a1b27c3d8e9f00112233aa02", handle: mh1.a.b}}]
  - expect: "network policy: 'localhost:2/ses_0192f0c3a1b27c3d8e9f00112233aa02' not in capabilities.peer_fetch.allow"
    call: [{tool: fetch-peer-file, input: {peer: "example.com:80/ses_0192f0c3a1b27c3d8e9f00112233aa02", handle: mh1.a.b}}]
  - expect: "network policy: 'example.com:80/ses_0192f0c3a1b27c3d8e9f00112233aa02' not in capabilities.peer_fetch.allow"
    say: "Refused twice."
"#,
    );
    let out = p.mur(&["run", "--task", "fetch"]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let s = &p.sessions()[0];
    let t = trace(&s.join("trace.jsonl"));
    assert_eq!(
        t[0]["tools_declared"],
        serde_json::json!(["fetch-peer-file"])
    );
    let fetch = lines_of(&t, "peer_file_fetch");
    assert_eq!(fetch.len(), 2);
    assert!(fetch.iter().all(|f| f["outcome"] == "peer_not_allowed"));
    assert!(!s.join("peer-in").exists());
}
