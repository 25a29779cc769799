//! Delegation across machines, on loopback: real `mur node` processes and a real `mur run
//! --nodes` root, children on the scripted model. Every wait is for a line, a file or a
//! process, with a generous bound for a loaded machine; none is a fixed sleep.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::node::Node;
use common::*;
use serde_json::Value;

const COOKIE: &str = "test-cookie-3f9a";

/// Wait for `cond`, failing with `what` after a bound that holds on a loaded machine.
fn wait_for(what: &str, cond: impl FnMut() -> bool) {
    wait_or(what, cond, String::new);
}

/// [`wait_for`], saying `state()` too when it times out.
fn wait_or(what: &str, mut cond: impl FnMut() -> bool, state: impl Fn() -> String) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "timed out waiting for {what}{}",
            state()
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// A project whose root fans six `local/worker` children out; each child runs `cmd` in bash.
fn fan_out_project(cmd: &str) -> Project {
    let p = Project::new();
    let shell = "capabilities:\n  shell:\n    allow: [bash, sleep]\n";
    p.write("worker/murmur.yaml", &scripted_manifest("worker", shell));
    p.write(
        "worker/script.yaml",
        "turns:\n  - call:\n      - tool: bash\n        input: {command: \"{{task.cmd}}\"}\n  - say: \"worked: {{last}}\"\n",
    );
    p.write(
        "murmur.yaml",
        &scripted_manifest(
            "fanout",
            "capabilities:\n  shell:\n    allow: [bash, sleep]\n  spawn:\n    allow: [local/worker]\n",
        ),
    );
    let zip = "worker-0.1.0.mur.zip";
    let out = p.mur(&["build", "worker", "-o", zip]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = p.mur(&["install", &format!("./{zip}")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let task = serde_json::json!({ "cmd": cmd }).to_string();
    let call = serde_json::json!({"tool": "delegate-task", "input": {"capsule": "worker", "version": "0.1.0", "task": task}});
    let calls: Vec<Value> = (0..6).map(|_| call.clone()).collect();
    let script = serde_json::json!({"turns": [
        {"call": calls},
        {"say": "six workers are running"},
        {"say": "all six reported"},
    ]});
    p.write("script.yaml", &script.to_string());
    p
}

fn run_cmd(p: &Project, nodes: &[&Node]) -> Command {
    let addrs: Vec<&str> = nodes.iter().map(|n| n.addr.as_str()).collect();
    let mut c = p.mur_cmd(&[
        "run",
        "--task",
        "fan out",
        "--nodes",
        &addrs.join(","),
        "--max-local",
        "0",
    ]);
    c.env("MUR_CLUSTER_COOKIE", COOKIE).env("HOME", p.path());
    c
}

/// Two nodes with the test's cookie.
fn two_nodes(p: &Project) -> (Node, Node) {
    (
        Node::start(p.path(), "node-a", COOKIE),
        Node::start(p.path(), "node-b", COOKIE),
    )
}

/// The root, started and left running.
fn spawn_root(p: &Project, nodes: &[&Node]) -> std::process::Child {
    run_cmd(p, nodes)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// What `mur trace show` prints of the project's newest session (the root).
fn trace_show(p: &Project) -> String {
    let show = p
        .mur_cmd(&["trace", "show"])
        .env("HOME", p.path())
        .output()
        .unwrap();
    stdout(&show)
}

/// The root's `delegation` lines.
fn outcomes(root: &Path) -> Vec<Value> {
    trace(&root.join("trace.jsonl"))
        .into_iter()
        .filter(|l| l["event_type"] == "delegation")
        .collect()
}

fn children_dirs(root: &Path) -> Vec<PathBuf> {
    list(&root.join("children"))
}

/// The trace in `dir` ends with `session_end`.
fn assert_whole(dir: &Path) {
    let t = trace(&dir.join("trace.jsonl"));
    let last = &t.last().unwrap()["event_type"];
    assert_eq!(last, "session_end", "{}", dir.display());
}

/// The root's six children's folders, each holding a trace that ends with `session_end`.
fn six_whole_child_traces(root: &Path) -> Vec<PathBuf> {
    let kids = children_dirs(root);
    assert_eq!(kids.len(), 6);
    kids.iter().for_each(|k| assert_whole(k));
    kids
}

#[test]
fn six_children_spread_over_two_nodes_all_ok_with_their_traces_home() {
    let p = fan_out_project("echo hello from $PWD");
    let (a, b) = two_nodes(&p);
    let out = run_cmd(&p, &[&a, &b]).output().unwrap();
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let root = &p.sessions()[0];
    let lines = outcomes(root);
    assert_eq!(lines.len(), 6, "{lines:?}");
    for l in &lines {
        assert_eq!(l["outcome"], "ok", "{l}");
    }
    let on = |n: &Node| {
        lines
            .iter()
            .filter(|l| l["node"] == n.name.as_str())
            .count()
    };
    // Least loaded first: quick children free their slot early, so the split may be 4/2.
    assert_eq!(on(&a) + on(&b), 6, "{lines:?}");
    assert!(on(&a) >= 1 && on(&b) >= 1, "{lines:?}");
    // Each delegation_start names its node too.
    let starts: Vec<Value> = trace(&root.join("trace.jsonl"))
        .into_iter()
        .filter(|l| l["event_type"] == "delegation_start")
        .collect();
    assert!(starts.iter().all(|l| l["node"].is_string()), "{starts:?}");
    // Each child's trace was written on its node and copied home, whole.
    assert_eq!(a.sessions_started() + b.sessions_started(), 6);
    for k in &six_whole_child_traces(root) {
        let t = trace(&k.join("trace.jsonl"));
        assert_eq!(
            t[0]["spawned_by"],
            trace(&root.join("trace.jsonl"))[0]["session_id"]
        );
    }
    // Usage rolls up: the children's tokens are in the root's totals.
    let end = trace(&root.join("trace.jsonl")).pop().unwrap();
    assert!(end["delegated_input_tokens"].as_u64().unwrap() > 0, "{end}");
    // The tree view renders every child, wherever it ran.
    let text = trace_show(&p);
    assert_eq!(text.matches("local/worker@0.1.0").count(), 6, "{text}");
}

#[test]
fn on_a_node_the_parent_hears_ok_crashed_and_terminated_as_it_would_here() {
    // examples/supervision with every child on the node: one answers, one's driver panics
    // 100 ms in, one hangs past the 2 s delegation deadline.
    let p = Project::example_set_up("supervision");
    let node = Node::start(p.path(), "node-a", COOKIE);
    let out = run_cmd(&p, &[&node]).output().unwrap();
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let root = &p.sessions()[0];
    let mut ends: Vec<(String, String, String)> = outcomes(root)
        .iter()
        .map(|l| {
            let s = |k: &str| l[k].as_str().unwrap_or_default().to_string();
            (s("capsule"), s("outcome"), s("node"))
        })
        .collect();
    ends.sort();
    let on = |capsule: &str, outcome: &str| {
        (capsule.to_string(), outcome.to_string(), node.name.clone())
    };
    assert_eq!(
        ends,
        [
            on("local/answerer", "ok"),
            on("local/crasher", "crashed"),
            on("local/hanger", "terminated"),
        ]
    );
    let result = std::fs::read_to_string(root.join("out/result.txt")).unwrap();
    assert!(
        result.contains(&format!("crashed on node {}: the session crashed: the crasher's model driver panicked on purpose", node.name)),
        "{result}"
    );
    // Every child's trace came home whole, the crashed one's too.
    let kids = children_dirs(root);
    assert_eq!(kids.len(), 3, "{kids:?}");
    kids.iter().for_each(|k| assert_whole(k));
}

#[test]
fn a_plans_capsule_step_on_a_node_names_the_node_at_start_and_end() {
    let p = fan_out_project("echo planned");
    p.write(
        "murmur.yaml",
        &scripted_manifest(
            "fanout",
            "capabilities:\n  shell:\n    allow: [bash, sleep]\n  spawn:\n    allow: [local/worker]\n  plan:\n    submit: true\n",
        ),
    );
    let task = serde_json::json!({ "cmd": "echo planned" }).to_string();
    let step =
        serde_json::json!({"id": "w", "capsule": "worker", "version": "0.1.0", "input": task});
    let script = serde_json::json!({"turns": [
        {"call": [{"tool": "submit-plan", "input": {"plan": {"id": "remote", "steps": [step]}}}]},
        {"expect": "\"completed\":true", "say": "planned"},
    ]});
    p.write("script.yaml", &script.to_string());
    let node = Node::start(p.path(), "node-a", COOKIE);
    let out = run_cmd(&p, &[&node]).output().unwrap();
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let root = trace(&p.sessions()[0].join("trace.jsonl"));
    let line = |kind: &str| {
        root.iter()
            .find(|l| l["event_type"] == kind)
            .unwrap_or_else(|| panic!("no {kind} line: {root:?}"))
            .clone()
    };
    assert_eq!(line("delegation_start")["node"], node.name.as_str());
    let end = line("delegation");
    assert_eq!(end["outcome"], "completed", "{end}");
    assert_eq!(end["node"], node.name.as_str(), "{end}");
    assert_eq!(node.sessions_started(), 1);
}

#[test]
fn a_killed_node_settles_its_children_node_lost_and_the_rest_end_ok() {
    let go = tempfile::tempdir().unwrap();
    let flag = go.path().join("go");
    let p = fan_out_project(&format!(
        "while [ ! -e {} ]; do sleep 0.05; done; echo released",
        flag.display()
    ));
    let (mut a, b) = two_nodes(&p);
    let root = spawn_root(&p, &[&a, &b]);
    wait_for("three children on each node", || {
        a.sessions_started() == 3 && b.sessions_started() == 3
    });
    a.kill9();
    // Node b's children may finish only now: node a is gone before any child answered.
    std::fs::write(&flag, "").unwrap();
    let out = root.wait_with_output().unwrap();
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let root = &p.sessions()[0];
    let lines = outcomes(root);
    assert_eq!(lines.len(), 6, "{lines:?}");
    for l in &lines {
        if l["node"] == a.name.as_str() {
            assert!(l["outcome"] == "error" || l["outcome"] == "crashed", "{l}");
            assert!(l["reason"].as_str().unwrap().contains("node lost"), "{l}");
        } else {
            assert_eq!(l["node"], b.name.as_str(), "{l}");
            assert_eq!(l["outcome"], "ok", "{l}");
        }
    }
    // The lost children's folders say they are incomplete; the others hold whole traces.
    let incomplete = children_dirs(root)
        .iter()
        .filter(|k| k.join("INCOMPLETE").is_file())
        .count();
    assert_eq!(incomplete, 3);
    let text = trace_show(&p);
    assert!(text.contains("incomplete: node lost"), "{}", text);
}

/// Start the root on `nodes`, Ctrl-C it once `commands` commands holding `marker` run, check
/// it ends `canceled`, and wait until no such command is left on any node.
fn interrupt_once_running(p: &Project, nodes: &[&Node], marker: &str, commands: usize) {
    let root = spawn_root(p, nodes);
    let state = || {
        let on: Vec<String> = nodes
            .iter()
            .map(|n| format!("{} on {}", n.sessions_started(), n.name))
            .collect();
        format!(
            ": {} commands alive ({} processes); sessions {}",
            commands_holding(marker),
            processes_holding(marker),
            on.join(", ")
        )
    };
    wait_or(
        &format!("{commands} remote commands running"),
        || commands_holding(marker) >= commands,
        state,
    );
    // SAFETY: kill only signals the child process this test started.
    unsafe { libc::kill(root.id() as i32, libc::SIGINT) };
    let out = root.wait_with_output().unwrap();
    assert!(
        stdout(&out).contains("status:  canceled"),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    wait_or(
        "no command left on any node",
        || processes_holding(marker) == 0,
        state,
    );
}

#[test]
fn ctrl_c_at_the_root_ends_remote_children_and_their_traces_complete() {
    let marker = format!("never-{}", unique_marker());
    let p = fan_out_project(&format!(
        "while [ ! -e /nonexistent/{marker} ]; do sleep 0.05; done"
    ));
    let (a, b) = two_nodes(&p);
    interrupt_once_running(&p, &[&a, &b], &marker, 6);
    let root = &p.sessions()[0];
    let t = trace(&root.join("trace.jsonl"));
    assert_eq!(t.last().unwrap()["event_type"], "session_end");
    six_whole_child_traces(root);
    // The nodes hold no child any more.
    drop((a, b));
}

#[test]
fn ctrl_c_at_the_root_ends_grandchildren_running_on_a_node() {
    // root → middle (on the node) → two leaves (in the middle's tree, on the node), each
    // running a command that never ends by itself.
    let marker = format!("never-{}", unique_marker());
    let p = Project::new();
    let shell = "capabilities:\n  shell:\n    allow: [bash, sleep]\n";
    p.write("leaf/murmur.yaml", &scripted_manifest("leaf", shell));
    let wait = format!("while [ ! -e /nonexistent/{marker} ]; do sleep 0.05; done");
    let leaf = serde_json::json!({"turns": [
        {"call": [{"tool": "bash", "input": {"command": wait}}]},
        {"say": "the leaf's command ended"},
    ]});
    p.write("leaf/script.yaml", &leaf.to_string());
    p.write(
        "middle/murmur.yaml",
        &scripted_manifest(
            "middle",
            "capabilities:\n  shell:\n    allow: [bash, sleep]\n  spawn:\n    allow: [local/leaf]\n",
        ),
    );
    let delegate = |capsule: &str| serde_json::json!({"tool": "delegate-task", "input": {"capsule": capsule, "version": "0.1.0", "task": "go"}});
    let middle = serde_json::json!({"turns": [
        {"call": [delegate("leaf"), delegate("leaf")]},
        {"say": "waiting for the leaves"},
        {"say": "the leaves ended"},
    ]});
    p.write("middle/script.yaml", &middle.to_string());
    p.write(
        "murmur.yaml",
        &scripted_manifest(
            "root",
            "capabilities:\n  shell:\n    allow: [bash, sleep]\n  spawn:\n    allow: [local/middle, local/leaf]\n",
        ),
    );
    for name in ["leaf", "middle"] {
        let zip = format!("{name}-0.1.0.mur.zip");
        let out = p.mur(&["build", name, "-o", &zip]);
        assert!(out.status.success(), "{}", stderr(&out));
        let out = p.mur(&["install", &format!("./{zip}")]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let root_script = serde_json::json!({"turns": [
        {"call": [delegate("middle")]},
        {"say": "waiting for the middle"},
        {"say": "the middle ended"},
    ]});
    p.write("script.yaml", &root_script.to_string());
    let node = Node::start(p.path(), "node-a", COOKIE);
    interrupt_once_running(&p, &[&node], &marker, 2);
    // Root, middle and both leaves: each trace is in the root's records and ends whole.
    let root = &p.sessions()[0];
    let ends = outcomes(root);
    assert_eq!(ends.len(), 1, "{ends:?}");
    // A canceled parent ends its children: upstream's terminal line for each.
    let ended = |l: &Value| {
        l["outcome"] == "terminated" && l["reason"] == "the delegating task was cancelled"
    };
    assert!(ended(&ends[0]), "{}", ends[0]);
    assert_eq!(ends[0]["node"], node.name.as_str());
    let mid = &children_dirs(root)[0];
    let leaves = children_dirs(mid);
    assert_eq!(leaves.len(), 2, "{leaves:?}");
    [root, mid]
        .into_iter()
        .chain(&leaves)
        .for_each(|d| assert_whole(d));
    let leaf_ends = outcomes(mid);
    assert_eq!(leaf_ends.len(), 2, "{leaf_ends:?}");
    assert!(leaf_ends.iter().all(ended), "{leaf_ends:?}");
}

#[test]
fn bad_nodes_are_warnings_and_the_run_goes_on_here() {
    let p = fan_out_project("echo here");
    let stranger = Node::start(p.path(), "stranger", "another-cookie");
    let out = p
        .mur_cmd(&[
            "run",
            "--task",
            "fan out",
            "--nodes",
            &format!("{},127.0.0.1:1", stranger.addr),
            "--max-local",
            "0",
        ])
        .env("MUR_CLUSTER_COOKIE", COOKIE)
        .env("HOME", p.path())
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{}{err}", stdout(&out));
    assert!(
        err.contains(&format!(
            "warning[W-CLU-005]: node {} is unavailable: the connection closed during the handshake",
            stranger.addr
        )),
        "{err}"
    );
    assert!(
        err.contains("warning[W-CLU-005]: node 127.0.0.1:1 is unavailable: unreachable"),
        "{err}"
    );
    let lines = outcomes(&p.sessions()[0]);
    assert_eq!(lines.len(), 6);
    assert!(lines
        .iter()
        .all(|l| l["outcome"] == "ok" && l.get("node").is_none()));
    assert_eq!(stranger.sessions_started(), 0);
}

#[test]
fn a_node_or_a_parent_without_a_cookie_refuses_to_start() {
    let p = Project::new();
    let out = mur()
        .args(["node", "--listen", "127.0.0.1:0"])
        .env_remove("MUR_CLUSTER_COOKIE")
        .env("HOME", p.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains(
            "error[E-CLU-001]: no cluster cookie: set MUR_CLUSTER_COOKIE or pass --cookie-file"
        ),
        "{}",
        stderr(&out)
    );
    let p = fan_out_project("echo x");
    let out = p
        .mur_cmd(&["run", "--task", "x", "--nodes", "127.0.0.1:1"])
        .env_remove("MUR_CLUSTER_COOKIE")
        .env("HOME", p.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("error[E-CLU-001]"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn with_tls_children_run_on_a_node_whose_certificate_the_parent_trusts() {
    let p = fan_out_project("echo over tls");
    let key = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    p.write("tls/cert.pem", &key.cert.pem());
    p.write("tls/key.pem", &key.signing_key.serialize_pem());
    let (cert, pem_key) = (p.path().join("tls/cert.pem"), p.path().join("tls/key.pem"));
    let node = Node::start_with(
        p.path(),
        "node-tls",
        COOKIE,
        &[
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            pem_key.to_str().unwrap(),
        ],
    );
    let out = run_cmd(&p, &[&node])
        .args(["--tls-ca", cert.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let lines = outcomes(&p.sessions()[0]);
    assert_eq!(lines.len(), 6);
    assert!(
        lines
            .iter()
            .all(|l| l["outcome"] == "ok" && l["node"] == node.name.as_str()),
        "{lines:?}"
    );
    // A parent without the trust root does not get past the handshake: the node is unavailable.
    let out = run_cmd(&p, &[&node]).output().unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "warning[W-CLU-005]: node {} is unavailable",
            node.addr
        )),
        "{err}"
    );
}

#[test]
fn a_remote_child_delegates_on_its_node_and_the_whole_tree_comes_home() {
    let p = Project::new();
    let install = |name: &str| {
        let zip = format!("{name}-0.1.0.mur.zip");
        let out = p.mur(&["build", name, "-o", &zip]);
        assert!(out.status.success(), "{}", stderr(&out));
        let out = p.mur(&["install", &format!("./{zip}")]);
        assert!(out.status.success(), "{}", stderr(&out));
    };
    let delegate = |capsule: &str, version: &str| serde_json::json!({"tool": "delegate-task", "input": {"capsule": capsule, "version": version, "task": "go"}});
    p.write("leaf/murmur.yaml", &scripted_manifest("leaf", ""));
    p.write(
        "leaf/script.yaml",
        "turns:\n  - say: \"the leaf's answer\"\n",
    );
    p.write(
        "middle/murmur.yaml",
        &scripted_manifest(
            "middle",
            "capabilities:\n  spawn:\n    allow: [local/leaf]\n",
        ),
    );
    // One delegation the parent's stores can answer, one they cannot. The leaf's outcome may
    // arrive before the next model call (it is injected, and the session ends there) or after
    // it (the session waits, then continues once): both turns answer with what was heard last.
    let heard = serde_json::json!({"say": "the middle heard: {{last}}"});
    let middle = serde_json::json!({"turns": [
        {"call": [delegate("leaf", "0.1.0"), delegate("leaf", "9.9.9")]},
        heard,
        heard,
    ]});
    p.write("middle/script.yaml", &middle.to_string());
    p.write(
        "murmur.yaml",
        &scripted_manifest(
            "root",
            "capabilities:\n  spawn:\n    allow: [local/middle, local/leaf]\n",
        ),
    );
    install("leaf");
    install("middle");
    let done = serde_json::json!({"say": "done: {{last}}"});
    let root_script = serde_json::json!({"turns": [
        {"call": [delegate("middle", "0.1.0")]},
        done,
        done,
    ]});
    p.write("script.yaml", &root_script.to_string());
    let node = Node::start(p.path(), "node-a", COOKIE);
    let out = run_cmd(&p, &[&node]).output().unwrap();
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let root = &p.sessions()[0];
    let ends = outcomes(root);
    assert_eq!(ends.len(), 1, "{ends:?}");
    assert_eq!(ends[0]["outcome"], "ok", "{}", ends[0]);
    assert_eq!(ends[0]["node"], node.name.as_str());
    // The middle ran on the node and its delegation to the leaf ran there too, in its tree.
    assert_eq!(node.sessions_started(), 1);
    let mid = &children_dirs(root)[0];
    let mid_trace = trace(&mid.join("trace.jsonl"));
    assert_eq!(mid_trace.last().unwrap()["event_type"], "session_end");
    let mid_ends: Vec<&Value> = mid_trace
        .iter()
        .filter(|l| l["event_type"] == "delegation")
        .collect();
    let by_version = |v: &str| *mid_ends.iter().find(|l| l["version"] == v).unwrap();
    assert_eq!(by_version("0.1.0")["outcome"], "ok", "{mid_ends:?}");
    assert!(by_version("0.1.0").get("node").is_none(), "{mid_ends:?}");
    // What the parent's stores do not hold is refused, naming it.
    let refused = by_version("9.9.9");
    assert_eq!(refused["outcome"], "refused", "{refused}");
    let why = refused["reason"].as_str().unwrap();
    assert!(
        why.contains("the parent cannot send 'local/leaf@9.9.9'")
            && why.contains("in neither the project store nor the global store"),
        "{why}"
    );
    // The leaf's trace came home with the middle's, where a local grandchild's would be.
    let leaves = children_dirs(mid);
    assert_eq!(leaves.len(), 1, "{leaves:?}");
    let leaf = trace(&leaves[0].join("trace.jsonl"));
    assert_eq!(leaf.last().unwrap()["event_type"], "session_end");
    assert_eq!(leaf[0]["spawned_by"], mid_trace[0]["session_id"]);
    // The answer went up the whole chain.
    let result = std::fs::read_to_string(root.join("out/result.txt")).unwrap();
    assert!(result.contains("the leaf's answer"), "{result}");
    let text = trace_show(&p);
    assert!(text.contains("local/leaf@0.1.0"), "{text}");
}
