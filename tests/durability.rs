//! Durability of a run's records, watched with `strace`: before `mur run` prints its status,
//! every file and folder of the delegation tree's records has been `fsync`ed (or
//! `fdatasync`ed), crashed children's included; nothing else on the disk is flushed (no
//! `syncfs`, no `sync`), and the work folders are left to their commands. Records on a tmpfs
//! are not flushed at all (a flush there is a no-op).

mod common;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

/// Run `mur run` of `example` under `strace -f`; answers the project, its stdout and the
/// syscall log.
fn traced_run(example: &str, task: &str) -> (Project, String, String) {
    // On a disk: records in memory (a tmpfs TMPDIR) have nothing to flush.
    let p = Project::on_disk().with_example(example).set_up();
    let (out, log) = traced(&p, &["run", "--task", task], &[]);
    (p, out, log)
}

/// `mur args…` in `p` under `strace -f`, with `env` added; it must succeed. Answers its stdout
/// and the syscall log.
fn traced(p: &Project, args: &[&str], env: &[(&str, &str)]) -> (String, String) {
    let log = p.path().join("strace.log");
    let out = Command::new("strace")
        .args(["-f", "-qq", "-y", "-s", "64", "-o"])
        .arg(&log)
        .args(["-e", "trace=fsync,fdatasync,syncfs,sync,write"])
        .arg(env!("CARGO_BIN_EXE_mur"))
        .args(args)
        .envs(env.iter().copied())
        .current_dir(p.path())
        .output()
        .expect("strace runs (this test needs strace installed: apt-get install strace)");
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    (stdout(&out), std::fs::read_to_string(log).unwrap())
}

/// The paths flushed before the line holding `status:` went to stdout.
fn flushed_before_status(log: &str) -> HashSet<PathBuf> {
    let mut flushed = HashSet::new();
    for line in log.lines() {
        // `1234  write(1<pipe:[5]>, "status:  ok\n", 12) = 12`
        if line.contains(" write(1<") && line.contains("status:") {
            return flushed;
        }
        // `1234  fsync(5</a/b>) = 0`, or split across threads:
        // `1234  fsync(5</a/b> <unfinished ...>` then `1234  <... fsync resumed>) = 0`.
        for call in ["fsync(", "fdatasync("] {
            let Some(at) = line.find(call) else { continue };
            let rest = &line[at + call.len()..];
            if let Some((_, tail)) = rest.split_once('<') {
                if let Some((path, _)) = tail.split_once('>') {
                    flushed.insert(PathBuf::from(path));
                }
            }
        }
    }
    panic!("no status line was written to stdout:\n{log}");
}

/// Every file and folder under `dir`, itself included, leaving out work folders.
fn records_under(dir: &Path, out: &mut Vec<PathBuf>) {
    out.push(dir.to_path_buf());
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() && path.file_name().is_some_and(|n| n != "work") {
            records_under(&path, out);
        } else if kind.is_file() {
            out.push(path);
        }
    }
}

fn assert_every_record_flushed(p: &Project, log: &str) {
    assert!(
        !log.contains("syncfs("),
        "a syncfs flushes other processes' files:\n{log}"
    );
    assert!(
        !log.contains(" sync()"),
        "a sync flushes the whole machine:\n{log}"
    );
    let flushed = flushed_before_status(log);
    let root = p.path().canonicalize().unwrap();
    let records = &p.sessions()[0];
    let mut expected = Vec::new();
    records_under(&records.canonicalize().unwrap(), &mut expected);
    // The folders that gained an entry: `.murmur/` (the session's folder), and, on a
    // project's first run, `workdir/` (`.murmur/`) and the project (`workdir/`).
    expected.extend([
        root.join("workdir/.murmur"),
        root.join("workdir"),
        root.clone(),
    ]);
    let missing: Vec<&PathBuf> = expected.iter().filter(|p| !flushed.contains(*p)).collect();
    assert!(
        missing.is_empty(),
        "not flushed before the status line: {missing:#?}"
    );
    // Only this run's records (and the lock, written by install) are flushed.
    let strangers: Vec<&PathBuf> = flushed.iter().filter(|p| !p.starts_with(&root)).collect();
    assert!(
        strangers.is_empty(),
        "flushed outside the project: {strangers:#?}"
    );
    let work: Vec<&Path> = flushed
        .iter()
        .filter_map(|p| p.strip_prefix(&root).ok())
        .filter(|p| p.components().any(|c| c.as_os_str() == "work"))
        .collect();
    assert!(work.is_empty(), "work folders are the commands': {work:#?}");
}

#[test]
fn a_delegation_tree_flushes_every_record_and_nothing_else_before_it_reports() {
    let (p, out, log) = traced_run("delegation-tree", "Report on actor runtimes");
    assert!(out.contains("status:  ok"), "{out}");
    assert_every_record_flushed(&p, &log);
    // Three children and a grandchild, each with its trace and its result.
    let flushed = flushed_before_status(&log);
    let traces = flushed
        .iter()
        .filter(|p| p.ends_with("trace.jsonl"))
        .count();
    assert_eq!(traces, 5, "{flushed:#?}");
}

#[test]
fn a_crashed_child_s_records_are_flushed_too() {
    let (p, _out, log) = traced_run("supervision", "Run the three");
    assert_every_record_flushed(&p, &log);
}

#[test]
fn the_copies_of_remote_children_s_traces_are_flushed_with_the_tree() {
    let cookie = "durability-cookie-7e1";
    let p = Project::on_disk().with_example("supervision").set_up();
    let node = common::node::Node::start(p.path(), "node-a", cookie);
    let args = [
        "run",
        "--task",
        "Run the three",
        "--max-local",
        "0",
        "--nodes",
        &node.addr,
    ];
    let (_, log) = traced(&p, &args, &[("MUR_CLUSTER_COOKIE", cookie)]);
    assert_eq!(node.sessions_started(), 3, "every child ran on the node");
    // The three copies are among the records, each flushed before the status line.
    let children = list(&p.sessions()[0].join("children"));
    assert_eq!(children.len(), 3);
    for c in &children {
        assert!(c.join("trace.jsonl").is_file(), "{}", c.display());
    }
    assert_every_record_flushed(&p, &log);
}
