//! A `mur node` checks what it is asked to run itself, whatever its parent checked: the
//! capsule's bytes against their sha256 pin, the child's grants against the parent's, and the
//! protocol version. This test is a parent speaking to a real node through the cluster's own
//! client (`mur::cluster::connect`), sending starts no `mur run` would send; and a parent
//! meeting a node of another protocol version, which it does not use.

mod common;

use std::time::Duration;

use common::*;
use mur::cluster::wire::{
    to_json, Hello, HostMsg, StartAnswer, StartRequest, HOST_GROUP, PROTOCOL_VERSION,
};
use mur_actors::spec::Grants;

/// One test at a time: each joins a cluster from this process, and two cluster servers in one
/// process number their node sessions alike, so one test could find the other's node
/// (`common::node::join`).
static ONE_CLUSTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_refuses_a_wrong_pin_more_grants_and_another_protocol() {
    let _one = ONE_CLUSTER.lock().await;
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
    let joined = common::node::join(&node.addr, "c", p.path()).await;
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

/// A node's host that says it speaks the next protocol version.
struct NextProtocolHost;

#[ractor::async_trait]
impl ractor::Actor for NextProtocolHost {
    type Msg = HostMsg;
    type State = ();
    type Arguments = ();

    async fn pre_start(
        &self,
        myself: ractor::ActorRef<HostMsg>,
        _: (),
    ) -> Result<(), ractor::ActorProcessingErr> {
        ractor::pg::join(HOST_GROUP.to_string(), vec![myself.get_cell()]);
        Ok(())
    }

    async fn handle(
        &self,
        _: ractor::ActorRef<HostMsg>,
        msg: HostMsg,
        _: &mut (),
    ) -> Result<(), ractor::ActorProcessingErr> {
        if let HostMsg::Hello(_, reply) = msg {
            let _ = reply.send(to_json(&Hello {
                protocol: PROTOCOL_VERSION + 1,
                name: "next".into(),
                capacity: 4,
                live: 0,
            }));
        }
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_marks_a_node_of_another_protocol_unavailable() {
    let _one = ONE_CLUSTER.lock().await;
    // A node of a later mur: ractor_cluster's own server, as `mur node` starts it, whose host
    // answers hello with the next protocol version.
    let server = mur::cluster::node::start_server("c".into(), "next-node", "localhost")
        .await
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(mur::cluster::node::accept_loop(listener, server, None));
    ractor::Actor::spawn(None, NextProtocolHost, ())
        .await
        .unwrap();
    let p = Project::new();
    let joined = common::node::join(&addr, "c", p.path()).await;
    assert!(joined.cluster.nodes().is_empty(), "the node was used");
    let warnings: Vec<String> = joined
        .unavailable
        .iter()
        .map(|w| w.diagnostic().to_string())
        .collect();
    assert_eq!(
        warnings,
        [format!(
            "warning[W-CLU-005]: node {addr} is unavailable: it speaks mur cluster protocol {}, this mur speaks {PROTOCOL_VERSION}\n  hint: the run goes on with the other nodes and this machine",
            PROTOCOL_VERSION + 1
        )]
    );
}
