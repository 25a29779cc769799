//! Shared helpers for the `mur trace` end-to-end tests: run the real binary, lay out work
//! folders, and write small synthetic traces in the upstream event shapes.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

/// What one run of `mur` printed.
pub struct Out {
    pub stdout: String,
    pub stderr: String,
    pub code: i32,
}

/// Run `mur <args>` in `cwd` (stdout is a pipe, so output is plain).
pub fn mur(cwd: &Path, args: &[&str]) -> Out {
    let out = Command::new(env!("CARGO_BIN_EXE_mur"))
        .args(args)
        .current_dir(cwd)
        .env_remove("NO_COLOR")
        .output()
        .expect("run mur");
    Out {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: out.status.code().unwrap_or(-1),
    }
}

/// `tests/fixtures/traces/<name>`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/traces")
        .join(name)
}

/// A conformance trace written by the original Murmur.
pub fn conformance(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/conformance/traces")
        .join(name)
}

/// Copy a folder tree.
pub fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A temp folder holding `workdir/` copied from a fixture's `workdir/`.
pub fn with_fixture(name: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&fixture(name).join("workdir"), &tmp.path().join("workdir"));
    tmp
}

/// A synthetic session: one tool call per entry of `tools`, then an end_turn.
pub struct Session<'a> {
    pub id: &'a str,
    pub capsule: &'a str,
    pub tools: &'a [&'a str],
    pub ended: Option<&'a str>,
    pub t0: i64,
}

impl Session<'_> {
    /// The trace lines.
    pub fn lines(&self) -> Vec<Value> {
        let sid = self.id;
        let mut t = self.t0;
        let mut n = 0;
        let mut lines = Vec::new();
        let mut ev = |kind: &str, parent: Option<String>, fields: Value, dt: i64| {
            n += 1;
            t += dt;
            let id = format!("evt_{}{:04x}", &sid[4..32], n);
            let mut line = json!({"event_type": kind, "event_id": id, "parent_id": parent,
                                  "session_id": sid, "timestamp": t});
            for (k, v) in fields.as_object().unwrap() {
                line[k] = v.clone();
            }
            lines.push(line);
            id
        };
        let root = ev(
            "session_start",
            None,
            json!({"capsule_name": self.capsule, "capsule_version": "1.0.0", "model": "gpt-test",
                   "max_turns": null, "tools_declared": ["bash", "grep"], "future_key": {"x": [1]}}),
            0,
        );
        let task = ev(
            "task_start",
            Some(root.clone()),
            json!({"task_id": "tsk_1"}),
            1,
        );
        let (mut input, mut output) = (0, 0);
        for (turn, tool) in self.tools.iter().enumerate() {
            let inf = ev(
                "inference",
                Some(task.clone()),
                json!({"turn": turn, "input_tokens": 100, "output_tokens": 10,
                       "decision": "tool_call", "tool_name": tool}),
                200,
            );
            ev(
                "tool_call",
                Some(inf),
                json!({"turn": turn, "tool_name": tool, "input": {"command": format!("{tool} --version")},
                       "input_bytes": 30, "output_bytes": 50, "duration_ms": 20, "status": "ok"}),
                20,
            );
            input += 100;
            output += 10;
        }
        ev(
            "inference",
            Some(task.clone()),
            json!({"turn": self.tools.len(), "input_tokens": 100, "output_tokens": 5,
                   "decision": "end_turn", "tool_name": null}),
            200,
        );
        ev(
            "some_future_event",
            Some(root.clone()),
            json!({"turn": "not a number"}),
            1,
        );
        if let Some(status) = self.ended {
            let turns = self.tools.len() + 1;
            ev(
                "session_end",
                Some(root),
                json!({"total_turns": turns, "total_input_tokens": input + 100,
                       "total_output_tokens": output + 5, "total_tool_calls": self.tools.len(),
                       "total_shell_calls": 0, "duration_ms": 1000 + 220 * turns, "exit_status": status}),
                1,
            );
        }
        lines
    }

    /// Write the trace as `<dir>/<id>/trace.jsonl`; returns its path.
    pub fn write_in(&self, dir: &Path) -> PathBuf {
        let folder = dir.join(self.id);
        fs::create_dir_all(&folder).unwrap();
        let path = folder.join("trace.jsonl");
        let text: String = self.lines().iter().map(|l| format!("{l}\n")).collect();
        fs::write(&path, text).unwrap();
        path
    }
}

/// A quick ended session with the given id and tools.
pub fn session<'a>(id: &'a str, tools: &'a [&'a str]) -> Session<'a> {
    Session {
        id,
        capsule: "demo",
        tools,
        ended: Some("ok"),
        t0: 1_795_000_000_000,
    }
}
