//! A cancel the parent sends right behind a remote child's start reaches the child. A test
//! binary of its own: each `join` in a process starts a cluster server of its own, and two of
//! them numbering their node sessions alike would find each other's hosts (a `mur run` has
//! one), so this real node must not share its process with another test's.

mod common;

use std::time::Duration;

use common::*;
use mur::cluster::wire::{to_json, HostMsg, StartAnswer, StartRequest, PROTOCOL_VERSION};
use mur_actors::spec::Grants;

/// A cancel the parent sends right behind its start (Ctrl-C, or a deadline, while the child is
/// still starting) reaches the child: it ends `canceled`, and its command does not outlive it.
/// The node used to book the child in the start's own task, so a cancel handled before that
/// task ran found nothing, was dropped, and the child ran on with no one to stop it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_sent_right_behind_a_start_ends_the_child() {
    let marker = format!("never-{}", unique_marker());
    let p = Project::new();
    p.write(
        "worker/murmur.yaml",
        &scripted_manifest(
            "worker",
            "capabilities:\n  shell:\n    allow: [bash, sleep]\n",
        ),
    );
    p.write(
        "worker/script.yaml",
        &format!(
            "turns:\n  - call:\n      - tool: bash\n        input: {{command: \"while [ ! -e /nonexistent/{marker} ]; do sleep 0.05; done\"}}\n  - say: done\n"
        ),
    );
    let out = p.mur(&["build", "worker", "-o", "w.mur.zip"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let bytes = std::fs::read(p.path().join("w.mur.zip")).unwrap();
    let node = common::node::Node::start(p.path(), "node", "c");
    let joined = common::node::join(&node.addr, "c", p.path()).await;
    let host = joined.cluster.nodes()[0].host.clone();
    let session_id = "ses_0000000000000000000000000000000c".to_string();
    let req = StartRequest {
        protocol: PROTOCOL_VERSION,
        edge_group: "mur.edge.nobody".into(),
        capsule: "local/worker".into(),
        version: "0.1.0".into(),
        sha256: mur_actors::text::sha256_hex(&bytes),
        task: "loop".into(),
        session_id: session_id.clone(),
        delegation_id: "dlg_c".into(),
        parent_session_id: "ses_0000000000000000000000000000000d".into(),
        parent_grants: Grants {
            shell_allow: vec!["bash".into(), "sleep".into()],
            ..Grants::default()
        },
        depth: 1,
        max_depth: 8,
        max_children: 100,
    };
    // The start and, right behind it on the same connection, the cancel.
    let (reply, answer) = ractor::concurrency::oneshot();
    host.send_message(HostMsg::Start(to_json(&req), bytes, reply.into()))
        .unwrap();
    host.send_message(HostMsg::Cancel(
        session_id.clone(),
        "the parent was interrupted".into(),
    ))
    .unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(60), answer)
        .await
        .expect("the node answered the start")
        .unwrap();
    assert!(
        matches!(
            serde_json::from_str::<StartAnswer>(&answer).unwrap(),
            StartAnswer::Started { .. }
        ),
        "{answer}"
    );
    // The child's trace ends `canceled`, and nothing of its command is left.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let ended = loop {
        let sessions = list(&node.dir.join("sessions"));
        let last = sessions.first().and_then(|s| {
            let t = std::fs::read_to_string(s.join("trace.jsonl")).ok()?;
            let line: serde_json::Value = serde_json::from_str(t.lines().last()?).ok()?;
            (line["event_type"] == "session_end").then_some(line)
        });
        if let Some(line) = last {
            break line;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the child never ended: {} of its commands alive",
            commands_holding(&marker)
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    assert_eq!(ended["exit_status"], "canceled", "{ended}");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while processes_holding(&marker) > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the child's command outlived it"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    drop(node);
}
