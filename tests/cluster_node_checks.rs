//! A `mur node` checks what it is asked to run itself, whatever its parent checked: the
//! capsule's bytes against their sha256 pin, the child's grants against the parent's, and the
//! protocol version. This test is a parent speaking to a real node through the cluster's own
//! client (`mur::cluster::connect`), sending starts no `mur run` would send.

mod common;

use std::time::Duration;

use common::*;
use mur::cluster::wire::{to_json, HostMsg, StartAnswer, StartRequest, PROTOCOL_VERSION};
use mur_actors::spec::Grants;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_refuses_a_wrong_pin_more_grants_and_another_protocol() {
    let p = Project::new();
    p.write(
        "worker/murmur.yaml",
        &scripted_manifest("worker", "capabilities:\n  shell:\n    allow: [bash]\n"),
    );
    p.write("worker/script.yaml", "turns:\n  - say: hi\n");
    let out = p.mur(&["build", "worker", "-o", "w.mur.zip"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let bytes = std::fs::read(p.path().join("w.mur.zip")).unwrap();
    let node = common::node::Node::start(p.path(), "node", "c");
    let addr = node.addr.clone();
    let joined =
        mur::cluster::connect::join(&[addr], "c".into(), Duration::from_secs(5), None, p.path())
            .await
            .unwrap();
    assert!(joined.unavailable.is_empty());
    let host = joined.cluster.nodes()[0].host.clone();
    let sha = mur_actors::text::sha256_hex(&bytes);
    let req = StartRequest {
        protocol: PROTOCOL_VERSION,
        edge_group: "mur.edge.nobody".into(),
        capsule: "local/worker".into(),
        version: "0.1.0".into(),
        sha256: "0".repeat(64),
        task: "x".into(),
        session_id: "ses_0000000000000000000000000000000a".into(),
        delegation_id: "dlg_a".into(),
        parent_session_id: "ses_0000000000000000000000000000000b".into(),
        parent_grants: Grants {
            shell_allow: vec!["bash".into()],
            ..Grants::default()
        },
        depth: 1,
        max_depth: 8,
        max_children: 100,
    };
    let call = |req: StartRequest, bytes: Vec<u8>| {
        let host = host.clone();
        async move {
            let answer = host
                .call(
                    |reply| HostMsg::Start(to_json(&req), bytes, reply),
                    Some(Duration::from_secs(30)),
                )
                .await;
            match answer {
                Ok(ractor::rpc::CallResult::Success(json)) => {
                    serde_json::from_str::<StartAnswer>(&json).unwrap()
                }
                other => panic!("no answer: {other:?}"),
            }
        }
    };
    let StartAnswer::Refused(why) = call(req.clone(), bytes.clone()).await else {
        panic!("a wrong pin was not refused");
    };
    assert!(why.contains("does not match its pin"), "{why}");
    // The right pin, but the parent does not hold the child's bash.
    let narrow = StartRequest {
        sha256: sha.clone(),
        parent_grants: Grants::default(),
        ..req.clone()
    };
    let StartAnswer::Refused(why) = call(narrow, bytes.clone()).await else {
        panic!("grants beyond the parent's were not refused");
    };
    assert!(
        why.contains(
            "declares capabilities.shell.allow entry 'bash', which its parent does not hold"
        ),
        "{why}"
    );
    let other = StartRequest {
        protocol: PROTOCOL_VERSION + 1,
        sha256: sha.clone(),
        ..req.clone()
    };
    let StartAnswer::Refused(why) = call(other, bytes.clone()).await else {
        panic!("another protocol was not refused");
    };
    assert!(why.contains("speaks mur cluster protocol"), "{why}");
    // Nothing was started.
    assert!(list(&p.path().join("node/sessions")).is_empty());
    drop(node);
}
