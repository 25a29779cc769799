//! Every subcommand with its stdout, then its stderr, closed before it writes a byte: the
//! shell's `mur … | head -0`. A command must never panic on a closed pipe; it does its work
//! and exits as it would have with someone reading.

mod common;

#[path = "support/fake_github.rs"]
mod fake_github;

use std::path::Path;
use std::process::{Command, Stdio};

use common::*;
use fake_github::*;

/// Which stream is closed.
#[derive(Clone, Copy, Debug)]
enum Closed {
    Stdout,
    Stderr,
}

/// Runs `cmd` with `closed` as a pipe whose reading end is already closed; returns its exit
/// code and whatever it wrote to the other stream.
fn run_closed(mut cmd: Command, closed: Closed) -> (i32, String) {
    let writer = closed_pipe();
    match closed {
        Closed::Stdout => cmd.stdout(writer).stderr(Stdio::piped()),
        Closed::Stderr => cmd.stderr(writer).stdout(Stdio::piped()),
    };
    let o = cmd.stdin(Stdio::null()).output().unwrap();
    let other = match closed {
        Closed::Stdout => &o.stderr,
        Closed::Stderr => &o.stdout,
    };
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(other).into_owned(),
    )
}

/// The writing end of a pipe whose reading end is already closed.
fn closed_pipe() -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two new descriptors, which are owned from here on.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let (reader, writer) = unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    };
    drop(reader);
    writer
}

fn in_dir(dir: &Path, home: &Path, args: &[&str]) -> Command {
    let mut c = mur();
    c.args(args)
        .current_dir(dir)
        .env("MURMUR_HOME", home)
        .env("HOME", home)
        .env_remove("MUR_GITHUB_API_BASE")
        .env_remove("MUR_GITHUB_API")
        .env_remove("GITHUB_TOKEN");
    c
}

#[test]
fn no_subcommand_panics_on_a_closed_stdout_or_stderr() {
    let p = Project::example("hello");
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    // A real session to read traces of.
    let ok = in_dir(p.path(), home, &["run", "--task", "Say hello"])
        .output()
        .unwrap();
    assert!(ok.status.success(), "{}", stderr(&ok));
    let trace = p.sessions()[0].join("trace.jsonl");
    let trace = trace.to_str().unwrap();
    p.write(
        "skill/murmur.yaml",
        "name: style\nversion: 1.0.0\nruntime: skill\n",
    )
    .write("skill/skill.md", "# Style\n");

    // (arguments, exit code with someone reading)
    let cases: Vec<(Vec<&str>, i32)> = vec![
        (vec!["--help"], 0),
        (vec!["--version"], 0),
        (vec!["run", "--task", "Say hello", "-v"], 0),
        (vec!["doctor"], 0),
        (vec!["doctor", "no-such.yaml"], 1),
        (vec!["trace", "show", trace], 0),
        (vec!["trace", "steps", trace], 0),
        (vec!["trace", "report", trace], 0),
        (vec!["trace", "diff", trace, trace], 0),
        (vec!["trace", "show", "no-such-trace.jsonl"], 1),
        (vec!["build", "skill", "-o", "style.mur.zip"], 0),
        (vec!["install", "./style.mur.zip"], 0),
        (vec!["list"], 0),
        (vec!["list", "-g"], 0),
        (vec!["completions", "bash"], 0),
        (vec!["man"], 0),
        (vec!["no-such-command"], 2),
    ];
    for (args, code) in &cases {
        for closed in [Closed::Stdout, Closed::Stderr] {
            let (got, other) = run_closed(in_dir(p.path(), home, args), closed);
            assert!(
                !other.contains("panicked") && !other.contains("internal error"),
                "mur {args:?} with {closed:?} closed panicked: {other}"
            );
            assert_eq!(got, *code, "mur {args:?} with {closed:?} closed: {other}");
        }
    }
    // The runs whose output went nowhere still did their work: every session ended ok.
    for s in p.sessions() {
        let t = std::fs::read_to_string(s.join("trace.jsonl")).unwrap();
        assert!(
            t.lines().last().unwrap().contains("\"session_end\""),
            "{}: {t}",
            s.display()
        );
    }
    assert!(p
        .path()
        .join(".murmur/artifacts/local/style/1.0.0/style-1.0.0.mur.zip")
        .is_file());
}

#[test]
fn an_install_into_a_closed_pipe_files_every_artifact_and_the_whole_lock() {
    let p = Project::new();
    let home = tempfile::tempdir().unwrap();
    p.write(
        "murmur.yaml",
        "name: a\nversion: \"0.1.0\"\nartifacts:\n  - name: mur/driver-script\n    runtime: driver\n    config:\n      script: s.json\n",
    );
    let fake = FakeGithub::start();
    fake.repo("Ana/tools", 4242);
    fake.release(
        "Ana/tools",
        "v1",
        vec![
            (
                "tool-a-1.0.0.mur.zip".into(),
                tool_zip("tool-a", "1.0.0", "a"),
            ),
            (
                "tool-b-1.0.0.mur.zip".into(),
                tool_zip("tool-b", "1.0.0", "b"),
            ),
            (
                "tool-c-1.0.0.mur.zip".into(),
                tool_zip("tool-c", "1.0.0", "c"),
            ),
        ],
    );
    let mut cmd = in_dir(p.path(), home.path(), &["install", "github:Ana/tools@v1"]);
    cmd.env("MUR_GITHUB_API", &fake.base);
    let (code, err) = run_closed(cmd, Closed::Stdout);
    assert_eq!(code, 0, "{err}");
    let lock = std::fs::read_to_string(p.path().join("murmur.lock")).unwrap();
    for t in ["tool-a", "tool-b", "tool-c"] {
        assert!(
            p.path()
                .join(format!(".murmur/artifacts/ana/{t}/1.0.0/{t}-1.0.0.mur.zip"))
                .is_file(),
            "{t} is filed"
        );
        assert!(
            lock.contains(&format!(
                "  - name: ana/{t}\n    resolved_version: \"1.0.0\"\n"
            )),
            "{t} is pinned: {lock}"
        );
    }
}
