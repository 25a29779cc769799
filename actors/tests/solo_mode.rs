//! Solo mode (`mur_actors::solo`), in a process of its own (the mode is process-wide): a session
//! on one thread gets its file jobs and trace lines done without any thread besides its own,
//! and its lines still reach the file whole and in order, whoever appended them.

use mur_actors::file_lane::{self, Lane};
use mur_actors::trace::{self, Durability, EventType, TraceEvent, TraceLog};

/// The names of this process's threads.
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .map(|n| n.trim().to_string())
        .collect()
}

fn turns_in(path: &std::path::Path) -> Vec<u64> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("a whole line");
            v["turn"].as_u64().unwrap()
        })
        .collect()
}

#[test]
fn file_jobs_and_trace_lines_run_on_the_sessions_thread_in_order() {
    mur_actors::solo::enable();
    // What `mur run` gives a capsule that cannot delegate: a current-thread runtime.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ses_1/trace.jsonl");
    let log = TraceLog::new(path.clone(), "ses_1".into());
    let line = |turn: u64| TraceEvent::new(EventType::Inference, None).with("turn", turn);
    rt.block_on(async {
        // Lines appended before the file exists wait for its creation.
        log.append(line(0));
        let here = std::thread::current().id();
        let (creator, made) = {
            let log = log.clone();
            file_lane::run(Lane::Begin, move || {
                (std::thread::current().id(), log.create())
            })
            .await
            .unwrap()
        };
        assert_eq!(creator, here, "the file job ran where it was awaited");
        made.unwrap();
        log.append(line(1));
        // A thread outside the runtime appends too: its line is written there, in order.
        let other = log.clone();
        std::thread::spawn(move || other.append(line(2)))
            .join()
            .unwrap();
        log.append(line(3));
        // The step yields: the queued write runs.
        tokio::task::yield_now().await;
        log.append(line(4));
        assert_eq!(log.sync(Durability::Written).await, Ok(()));
        assert_eq!(turns_in(&path), [0, 1, 2, 3, 4]);
        log.append(line(5));
        trace::written_all().await;
        assert_eq!(turns_in(&path), [0, 1, 2, 3, 4, 5]);
    });
    let names = thread_names();
    assert!(
        !names.iter().any(|n| n == "mur-files" || n == "mur-trace"),
        "no file or trace thread started: {names:?}"
    );
}
