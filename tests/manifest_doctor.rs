//! `mur doctor` as a user runs it: default path, explicit file or folder, exit codes, and
//! which stream each line goes to.

use std::path::Path;
use std::process::{Command, Output};

fn doctor(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mur"))
        .arg("doctor")
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("run mur doctor")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

const OK: &str =
    "name: coding-agent\nversion: \"0.1.0\"\ncapabilities:\n  shell:\n    allow: [git]\n";

#[test]
fn default_path_is_murmur_yaml_in_the_current_folder() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("murmur.yaml"), OK).unwrap();
    let out = doctor(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with("murmur.yaml: ok — coding-agent v0.1.0\n  containment: declared "),
        "{stdout}"
    );
    assert_eq!(text(&out.stderr), "");
}

#[test]
fn a_folder_argument_means_its_murmur_yaml_and_a_file_argument_is_read_as_is() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("capsule");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("murmur.yaml"), OK).unwrap();
    std::fs::write(dir.path().join("other.yaml"), OK).unwrap();
    let out = doctor(dir.path(), &["capsule"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = doctor(dir.path(), &["other.yaml"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).starts_with("other.yaml: ok — coding-agent v0.1.0\n  containment: "));
}

#[test]
fn a_missing_manifest_is_e_io_001_with_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let out = doctor(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    let want = format!(
        "error[E-IO-001]: murmur.yaml not found at {}",
        dir.path().join("murmur.yaml").display()
    );
    assert!(err.starts_with(&want), "{err}");
    assert_eq!(text(&out.stdout), "");
}

#[test]
fn errors_go_to_stderr_with_hints_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("murmur.yaml"),
        "name: c\nversion: \"1\"\ncapabilities:\n  shell:\n    allow: [/usr/bin/git]\n  spawn:\n    allow: [researcher]\n",
    )
    .unwrap();
    let out = doctor(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout), "");
    let err = text(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines[0],
        "error[E-MAN-003]: murmur.yaml: invalid capability config for 'capabilities.shell.allow[0]': '/usr/bin/git' is a path; an entry is a bare binary name"
    );
    assert_eq!(
        lines[1],
        "  hint: name the binary alone (e.g. 'git'), and put its directory on PATH"
    );
    assert!(lines[2].starts_with(
        "error[E-MAN-003]: murmur.yaml: invalid artifact name in 'capabilities.spawn.allow[0]'"
    ));
    assert_eq!(
        lines.last().unwrap(),
        &"murmur.yaml: 2 errors; fix them and run mur doctor again"
    );
}

#[test]
fn warnings_print_on_stderr_and_still_exit_0() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("murmur.yaml"),
        format!("{OK}hooks: []\nskils: []\n"),
    )
    .unwrap();
    let out = doctor(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).starts_with("murmur.yaml: ok, 2 warnings — coding-agent v0.1.0\n"));
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 2);
    assert!(err
        .lines()
        .all(|l| l.starts_with("warning[W-SEC-019]: unrecognized key '")));
}

#[test]
fn a_capsule_mur_cannot_run_gets_a_note_but_passes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("murmur.yaml"),
        "name: c\nversion: \"1\"\nartifacts:\n  - name: murmur/driver-claude-code\n    version: \"0.1.0\"\n    runtime: driver\ninference:\n  transport: process\n  driver:\n    artifact: murmur/driver-claude-code\n",
    )
    .unwrap();
    let out = doctor(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("murmur.yaml: ok — c v1\n"), "{stdout}");
    assert!(stdout.contains("note: mur run will refuse this capsule: inference.transport: process"));
}

#[test]
fn bad_input_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let inputs: [&[u8]; 8] = [
        b"",
        b"\xff\xfe not utf-8",
        b"name: [unclosed",
        b"42",
        b"name: c\nversion: \"1\"\nartifacts: [1, \"x\", null, {name: 7}]\n",
        b"name: c\nversion: \"1\"\ncapabilities: [shell]\ninference: 3\nexports: x\ntrace: []\nlifecycle: 1\n",
        b"name: c\nversion: \"1\"\ninference:\n  driver: {artifact: 5}\n  max_turns: -1\n  retry: {max_retries: x}\n",
        b"name: c\nversion: \"1\"\n? [complex, key]\n: v\ncapabilities:\n  install:\n    tool: [\"\"]\n",
    ];
    for input in inputs {
        std::fs::write(dir.path().join("murmur.yaml"), input).unwrap();
        let out = doctor(dir.path(), &[]);
        let err = text(&out.stderr);
        assert!(
            matches!(out.status.code(), Some(0) | Some(1)),
            "input {:?} gave {:?}: {err}",
            String::from_utf8_lossy(input),
            out.status
        );
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn deep_nesting_is_refused_at_once_with_its_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    // 40,000 levels (80 KB): the parser alone used to spend seconds on it.
    let n = 40_000;
    std::fs::write(
        dir.path().join("murmur.yaml"),
        format!("{OK}config: {}{}\n", "[".repeat(n), "]".repeat(n)),
    )
    .unwrap();
    let out = doctor(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).starts_with(
            "error[E-MAN-002]: murmur.yaml: YAML syntax error at line 6, column 109: collections nested deeper than 100 levels"
        ),
        "{}",
        text(&out.stderr)
    );
    // The bound's own sentence: the text was refused before the parser saw it (the parser's
    // refusal, after quadratic work, says "recursion limit exceeded").
    assert!(!text(&out.stderr).contains("recursion limit"));
}
