//! The docs run as written: every `sh` block of README.md, docs/quickstart.md and each
//! examples/*/README.md, in a fresh copy of the repository's docs and examples, with the built
//! `mur` first on PATH and a home of its own. A block fails the test on a non-zero exit.
//!
//! What is not run, and why:
//! - `cargo install`, `cargo test` and `cargo run -p …` lines: the suite is itself built by
//!   cargo (`cargo run -- ARGS` is `mur ARGS`, and is run as that);
//! - servers the docs start for a real model (llama-server, vllm): none here;
//! - examples/openai-compatible/README.md needs such a server on port 8089 (tests/cli_http.rs
//!   runs the same capsule against the fake provider);
//! - examples/coding-agent/README.md builds its edit tool with cargo: tests/seed_001.rs runs
//!   its setup.sh, run.sh and `mur trace show --workdir work` as written.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;

/// `(markdown file, folder its commands run from)`; a folder of `.` is the repository root.
const DOCS: &[(&str, &str)] = &[
    ("README.md", "."),
    ("docs/quickstart.md", "."),
    ("docs/replay.md", "."),
    ("examples/hello/README.md", "."),
    (
        "examples/delegation-tree/README.md",
        "examples/delegation-tree",
    ),
    ("examples/plan/README.md", "examples/plan"),
    ("examples/supervision/README.md", "examples/supervision"),
    ("docs/cluster.md", "examples/supervision"),
    ("examples/peer-handoff/README.md", "."),
];

/// The `sh` blocks of a markdown text, each as its lines.
fn blocks(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut current: Option<Vec<String>> = None;
    for line in text.lines() {
        match (&mut current, line.trim_start()) {
            (None, l) if l.starts_with("```sh") => current = Some(Vec::new()),
            (Some(_), l) if l.starts_with("```") => out.push(current.take().unwrap()),
            (Some(b), _) => b.push(line.to_string()),
            (None, _) => {}
        }
    }
    out
}

/// The line as the test runs it, or `None` when it is not run (see the module docs).
fn runnable(line: &str) -> Option<String> {
    let l = line.trim();
    if l.is_empty() || l.starts_with('#') {
        return None;
    }
    if let Some(rest) = l.strip_prefix("cargo run -- ") {
        return Some(format!("mur {rest}"));
    }
    if l.starts_with("cargo ") || l.starts_with("llama-server") || l.starts_with("vllm") {
        return None;
    }
    Some(l.to_string())
}

#[test]
fn every_documented_command_runs_as_written() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("mur");
    for dir in ["docs", "examples"] {
        copy_dir(&repo().join(dir), &root.join(dir));
    }
    std::fs::copy(repo().join("README.md"), root.join("README.md")).unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_mur")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = 0;
    for (doc, cwd) in DOCS {
        let text = std::fs::read_to_string(repo().join(doc)).unwrap();
        for block in blocks(&text) {
            let lines: Vec<String> = block.iter().filter_map(|l| runnable(l)).collect();
            if lines.is_empty() {
                continue;
            }
            let script = format!("set -euo pipefail\n{}\n", lines.join("\n"));
            let out = Command::new("bash")
                .arg("-c")
                .arg(&script)
                .current_dir(root.join(cwd))
                .env("PATH", &path)
                .env("HOME", &home)
                .env("MURMUR_HOME", home.join(".murmur"))
                .env_remove("MUR")
                .env_remove("MUR_GITHUB_API")
                .env_remove("MUR_GITHUB_API_BASE")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{doc}: this block failed (exit {:?}):\n{script}\nstdout:\n{}\nstderr:\n{}",
                out.status.code(),
                stdout(&out),
                stderr(&out)
            );
            ran += 1;
        }
    }
    assert!(ran >= 8, "only {ran} blocks ran");
    assert!(home
        .join(".local/share/bash-completion/completions/mur")
        .is_file());
}
