//! `mur doctor` against manifest corpora, running the real binary in each case folder.
//!
//! Two corpora share one layout (`<case>/murmur.yaml` + `expected.tsv` with columns case,
//! verdict, codes, first line):
//! - `../shared/conformance/manifests`: real manifests with the original Murmur's verdicts. Our
//!   first line must say the same thing in substance: same code, same opening up to the field
//!   it names, and every quoted name of the original (the reserved-name list differs by design).
//! - `tests/fixtures/manifests`: our own cases; the first line must start with the text given.

use std::path::{Path, PathBuf};
use std::process::Command;

struct Row {
    case: String,
    verdict: String,
    codes: Vec<String>,
    first_line: String,
}

fn read_rows(dir: &Path) -> Vec<Row> {
    let tsv = std::fs::read_to_string(dir.join("expected.tsv"))
        .unwrap_or_else(|e| panic!("cannot read {}/expected.tsv: {e}", dir.display()));
    tsv.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let cols: Vec<&str> = line.splitn(4, '\t').collect();
            assert!(cols.len() >= 2, "bad row in expected.tsv: {line}");
            Row {
                case: cols[0].to_string(),
                verdict: cols[1].to_string(),
                codes: cols
                    .get(2)
                    .unwrap_or(&"")
                    .split([',', ' '])
                    .filter(|c| !c.is_empty())
                    .map(str::to_string)
                    .collect(),
                first_line: cols.get(3).unwrap_or(&"").to_string(),
            }
        })
        .collect()
}

struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
}

fn doctor_in(dir: &Path) -> Outcome {
    let out = Command::new(env!("CARGO_BIN_EXE_mur"))
        .arg("doctor")
        .current_dir(dir)
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("run mur doctor");
    Outcome {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8(out.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("utf-8 stderr"),
    }
}

/// Single-quoted names in a message, e.g. `'capabilities.plan.submit'`.
fn quoted(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find('\'') {
        let after = &rest[start + 1..];
        let Some(end) = after.find('\'') else { break };
        out.push(&after[..end]);
        rest = &after[end + 1..];
    }
    out
}

/// The opening of a message up to the end of the field it names (or its first clause).
fn head(text: &str) -> &str {
    let cut = ["': ", "; ", " — "]
        .iter()
        .filter_map(|sep| {
            text.find(sep)
                .map(|i| if *sep == "': " { i + 1 } else { i })
        })
        .min()
        .unwrap_or(text.len());
    &text[..cut]
}

/// Checks one case; returns a description of the mismatch, if any.
fn check(dir: &Path, row: &Row, strict_prefix: bool) -> Option<String> {
    let case_dir = dir.join(&row.case);
    let out = doctor_in(&case_dir);
    let first = out.stderr.lines().next().unwrap_or("");
    let problem = |what: String| {
        Some(format!(
            "{}: {what}\n  exit: {}\n  stdout: {}\n  stderr: {}",
            row.case, out.code, out.stdout, out.stderr
        ))
    };
    match row.verdict.as_str() {
        "ok" => {
            if out.code != 0 || !out.stderr.is_empty() {
                return problem("expected ok: exit 0 and nothing on stderr".into());
            }
            if !out.stdout.starts_with("murmur.yaml: ok — ") {
                return problem("expected the verdict 'murmur.yaml: ok — …' on stdout".into());
            }
            return None;
        }
        "warning" | "error" => {}
        other => return problem(format!("unknown verdict '{other}' in expected.tsv")),
    }
    let (want_exit, word) = if row.verdict == "error" {
        (1, "error")
    } else {
        (0, "warning")
    };
    if out.code != want_exit {
        return problem(format!("expected exit {want_exit}"));
    }
    if row.verdict == "warning" && out.stderr.contains("error[") {
        return problem("a warning case printed an error".into());
    }
    let Some(code) = row.codes.first() else {
        return problem("expected.tsv names no code".into());
    };
    let prefix = format!("{word}[{code}]: ");
    let Some(message) = first.strip_prefix(&prefix) else {
        return problem(format!("first stderr line should start '{prefix}'"));
    };
    for c in &row.codes {
        if !out.stderr.contains(&format!("[{c}]")) {
            return problem(format!("code {c} missing"));
        }
    }
    if strict_prefix {
        if !message.starts_with(&row.first_line) {
            return problem(format!("message should start with: {}", row.first_line));
        }
        return None;
    }
    let want_head = head(&row.first_line);
    if !message.starts_with(want_head) {
        return problem(format!(
            "message should open like the original: {want_head}"
        ));
    }
    for name in quoted(&row.first_line) {
        if !message.contains(&format!("'{name}'")) {
            return problem(format!("message should name '{name}' like the original"));
        }
    }
    None
}

fn run_corpus(dir: &Path, strict_prefix: bool) -> usize {
    let rows = read_rows(dir);
    let mut listed: Vec<&str> = rows.iter().map(|r| r.case.as_str()).collect();
    listed.sort_unstable();
    let mut on_disk: Vec<String> = std::fs::read_dir(dir)
        .expect("read corpus dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort_unstable();
    assert_eq!(
        listed,
        on_disk,
        "expected.tsv and the case folders of {} differ",
        dir.display()
    );
    let failures: Vec<String> = rows
        .iter()
        .filter_map(|row| check(dir, row, strict_prefix))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
    rows.len()
}

fn shared_corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/conformance/manifests")
}

#[test]
fn upstream_conformance_corpus_gives_the_same_verdicts() {
    let n = run_corpus(&shared_corpus(), false);
    assert!(
        n >= 19,
        "the shared corpus should hold at least 19 cases, found {n}"
    );
}

#[test]
fn own_corpus_of_invalid_and_valid_manifests() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/manifests");
    let n = run_corpus(&dir, true);
    assert!(
        n >= 70,
        "the fixture corpus should hold at least 70 cases, found {n}"
    );
}

#[test]
fn head_and_quotes_extract_the_field_named() {
    let line = "murmur.yaml: invalid capability config for 'capabilities.plan.submit': must be set";
    assert_eq!(
        head(line),
        "murmur.yaml: invalid capability config for 'capabilities.plan.submit'"
    );
    assert_eq!(quoted(line), vec!["capabilities.plan.submit"]);
}
