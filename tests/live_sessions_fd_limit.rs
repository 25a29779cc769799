//! Many live sessions, few descriptors: a parent keeps 600 children alive at once in a process
//! whose open-file limit is 256, and every child still answers with a complete trace. (Trace
//! files are written by one shared thread that keeps only some of them open.)
//!
//! Its own test binary: it lowers the process's limit for good.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mur::drivers::script::ScriptDriver;
use mur_actors::delegation::{CapsuleResolver, ChildRequest};
use mur_actors::provided;
use mur_actors::session::ExitStatus;
use mur_actors::spec::{Grants, SessionPaths, SessionSpec, SpawnedBy};
use mur_actors::supervisor::SupervisorArgs;

mod common;
use common::trace as lines;

const CHILDREN: usize = 600;
const FD_LIMIT: u64 = 256;

fn spec(name: &str, script: &str, grants: Grants, id: String, paths: SessionPaths) -> SessionSpec {
    let driver = ScriptDriver::from_str(script, Path::new(&format!("{name}.yaml"))).unwrap();
    let mut s = SessionSpec::new(
        id,
        name,
        Arc::new(driver),
        grants,
        "go".into(),
        paths,
        mur::tools::executors(
            Duration::from_secs(30),
            std::sync::Arc::new(mur::contain::Sandbox::uncontained(std::env::temp_dir())),
        ),
    );
    s.delegation_deadline = Duration::from_secs(60);
    s
}

/// Every child is a `waiter`: it answers after a pause long enough for all of them to be
/// alive at once.
struct Waiters(Arc<ScriptDriver>);

#[async_trait]
impl CapsuleResolver for Waiters {
    async fn resolve(
        &self,
        r: &ChildRequest,
    ) -> Result<SessionSpec, mur_actors::delegation::DelegationError> {
        let mut s = SessionSpec::new(
            r.session_id.clone(),
            provided::bare(&r.capsule),
            self.0.clone(),
            Grants::default(),
            r.task.clone(),
            r.paths.clone(),
            mur::tools::executors(
                Duration::from_secs(30),
                std::sync::Arc::new(mur::contain::Sandbox::uncontained(std::env::temp_dir())),
            ),
        );
        s.depth = r.depth;
        s.spawned_by = Some(SpawnedBy {
            parent_session_id: r.parent_session_id.clone(),
            delegation_id: r.delegation_id.clone(),
        });
        Ok(s)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_hundred_live_children_fit_in_256_descriptors() {
    // SAFETY: setrlimit only reads the struct we pass.
    unsafe {
        let lim = libc::rlimit {
            rlim_cur: FD_LIMIT,
            rlim_max: FD_LIMIT,
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
    }
    let dir = tempfile::tempdir().unwrap();
    let mut calls = String::from("turns:\n  - call:\n");
    for i in 0..CHILDREN {
        calls.push_str(&format!(
            "      - {{tool: delegate-task, input: {{capsule: waiter, version: '0.1.0', task: 'job {i}'}}}}\n"
        ));
    }
    calls.push_str("  - say: waiting\n  - say: 'all in'\n");
    let leaf = ScriptDriver::from_str(
        "turns:\n  - delay_ms: 1500\n    say: 'done {{task}}'\n",
        Path::new("waiter.yaml"),
    )
    .unwrap();
    let id = mur_actors::ids::session_id();
    let records = dir.path().join(&id);
    let paths = SessionPaths {
        workdir: records.clone(),
        records_dir: records.clone(),
    };
    let grants = Grants {
        spawn_allow: vec!["acme/waiter".into()],
        ..Grants::default()
    };
    let root = spec("fan", &calls, grants, id, paths);
    let args = SupervisorArgs {
        resolver: Some(Arc::new(Waiters(Arc::new(leaf)))),
        ..SupervisorArgs::default()
    };
    let report = common::run_tree(root, args).await;
    assert_eq!(report.exit_status, ExitStatus::Ok, "{}", report.result);
    assert_eq!(report.trace_error, None);

    let t = lines(&records.join("trace.jsonl"));
    let ok = t
        .iter()
        .filter(|l| l["event_type"] == "delegation" && l["outcome"] == "ok")
        .count();
    assert_eq!(ok, CHILDREN, "every child answered");
    let starts: Vec<PathBuf> = t
        .iter()
        .filter(|l| l["event_type"] == "delegation_start")
        .map(|l| PathBuf::from(l["child_records_dir"].as_str().unwrap()))
        .collect();
    assert_eq!(starts.len(), CHILDREN);
    for child in starts {
        let ct = lines(&child.join("trace.jsonl"));
        assert_eq!(ct[0]["event_type"], "session_start");
        assert_eq!(ct.last().unwrap()["event_type"], "session_end");
        assert_eq!(ct.last().unwrap()["exit_status"], "ok");
        let result = std::fs::read_to_string(child.join("out/result.txt")).unwrap();
        assert!(result.starts_with("done job "), "{result}");
    }
}
