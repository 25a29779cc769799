//! `mur doctor --strict` and `mur run` agree: for each check run makes before a session starts,
//! doctor --strict exits 1 exactly when run refuses, with the same diagnostic. Plain
//! `mur doctor` keeps the original's verdicts (a note, exit 0) for the same capsules.

mod common;

use std::process::Output;

use common::*;

/// The first `error[…]` line a command printed on stderr, if any.
fn first_error(o: &Output) -> Option<String> {
    stderr(o)
        .lines()
        .find(|l| l.starts_with("error["))
        .map(str::to_string)
}

/// Run `mur run` and `mur doctor --strict` on the project; assert they agree (exit code and
/// first error line), and return run's first error line.
fn agree(p: &Project) -> Option<String> {
    let home = p.path().join("home");
    let with_env = |args: &[&str]| {
        p.mur_cmd(args)
            .env("HOME", &home)
            .env("MURMUR_HOME", home.join(".murmur"))
            .env_remove("MUR_T_UNSET_KEY")
            .output()
            .unwrap()
    };
    let run = with_env(&["run", "--task", "check"]);
    let doctor = with_env(&["doctor", "--strict"]);
    assert_eq!(
        run.status.code(),
        doctor.status.code(),
        "run:\n{}{}\ndoctor --strict:\n{}{}",
        stdout(&run),
        stderr(&run),
        stdout(&doctor),
        stderr(&doctor)
    );
    let (r, d) = (first_error(&run), first_error(&doctor));
    assert_eq!(r, d, "run and doctor --strict print the same refusal");
    if r.is_some() {
        assert_eq!(doctor.status.code(), Some(1));
        assert!(stderr(&doctor).contains("1 error; fix it and run mur doctor again"));
    } else {
        assert_eq!(doctor.status.code(), Some(0), "{}", stderr(&doctor));
        assert!(stdout(&doctor).contains("  ready: mur run would start this capsule here"));
    }
    r
}

/// Plain `mur doctor` on the project: its exit code and stdout.
fn lenient(p: &Project) -> (Option<i32>, String) {
    let home = p.path().join("home");
    let o = p
        .mur_cmd(&["doctor"])
        .env("HOME", &home)
        .env("MURMUR_HOME", home.join(".murmur"))
        .env_remove("MUR_T_UNSET_KEY")
        .output()
        .unwrap();
    (o.status.code(), stdout(&o))
}

const SCRIPT: &str = "turns:\n  - say: done\n";

#[test]
fn a_ready_capsule_passes_both() {
    let p = Project::example("hello");
    assert_eq!(agree(&p), None);
}

#[test]
fn an_unset_key_is_e_man_003_for_both_and_a_pass_for_plain_doctor() {
    let p = Project::new();
    p.write(
        "murmur.yaml",
        "name: c\nversion: \"1\"\nartifacts:\n  - name: murmur/driver-anthropic\n    version: \"0.1.0\"\n    runtime: driver\n    gateway:\n      endpoint: https://api.anthropic.com\n      api_key: ${MUR_T_UNSET_KEY}\ninference:\n  transport: http\n  model: claude-sonnet-4-5\n  driver: {artifact: murmur/driver-anthropic}\n",
    );
    let err = agree(&p).unwrap();
    assert!(err.starts_with("error[E-MAN-003]: "), "{err}");
    assert!(err.contains("${MUR_T_UNSET_KEY}"), "{err}");
    assert_eq!(lenient(&p).0, Some(0));
}

#[test]
fn a_declared_artifact_not_installed_is_e_run_008_for_both_and_a_note_for_plain_doctor() {
    let p = Project::new();
    // scripted_manifest puts its argument right after the driver entry, inside artifacts:.
    p.write(
        "murmur.yaml",
        &scripted_manifest("c", "  - name: murmur/tool-grep\n    version: \"1.0.0\"\n"),
    );
    p.write("script.yaml", SCRIPT);
    let err = agree(&p).unwrap();
    assert!(err.starts_with("error[E-RUN-008]: "), "{err}");
    let (code, out) = lenient(&p);
    assert_eq!(code, Some(0));
    assert!(
        out.contains("note: mur run will refuse this capsule: "),
        "{out}"
    );
}

#[test]
fn a_pin_that_disagrees_with_the_store_is_refused_by_both() {
    let p = Project::new();
    p.write("murmur.yaml", &scripted_manifest("c", ""));
    p.write("script.yaml", SCRIPT);
    install_artifact(
        &p,
        "tool-greet",
        "name: tool-greet\nversion: 0.1.0\nruntime: tool\nimplementation: native\ndescription: A probe.\n",
        "tool-greet",
        "#!/bin/sh\necho hi\n",
    );
    p.write(
        "murmur.yaml",
        &scripted_manifest("c", "  - name: local/tool-greet\n    version: \"0.1.0\"\n"),
    );
    assert_eq!(agree(&p), None, "installed and pinned: both pass");
    let lock = std::fs::read_to_string(p.path().join("murmur.lock")).unwrap();
    let sha = regex::Regex::new("[0-9a-f]{64}").unwrap();
    let forged = sha.replace_all(&lock, "0".repeat(64).as_str()).into_owned();
    assert_ne!(lock, forged);
    p.write("murmur.lock", &forged);
    let err = agree(&p).unwrap();
    assert_eq!(
        err,
        "error[E-REG-002]: artifact integrity check failed for local/tool-greet@0.1.0"
    );
}

#[test]
fn a_driver_that_cannot_be_used_is_refused_by_both() {
    // The scripted driver's script is missing.
    let p = Project::new();
    p.write("murmur.yaml", &scripted_manifest("c", ""));
    let err = agree(&p).unwrap();
    assert!(err.starts_with("error[E-IO-001]: "), "{err}");
    // A driver mur does not have.
    let p = Project::new();
    p.write(
        "murmur.yaml",
        "name: c\nversion: \"1\"\nartifacts:\n  - name: acme/driver-x\n    version: \"0.1.0\"\n    runtime: driver\n    gateway: {endpoint: \"https://x.example\", keyless: true}\ninference:\n  transport: http\n  model: m\n  driver: {artifact: acme/driver-x}\n",
    );
    let err = agree(&p).unwrap();
    assert!(err.starts_with("error[E-RUN-006]: "), "{err}");
    let (code, out) = lenient(&p);
    assert_eq!(code, Some(0));
    assert!(
        out.contains("note: mur run will refuse this capsule: driver 'acme/driver-x'"),
        "{out}"
    );
    // transport: process.
    let p = Project::new();
    p.write(
        "murmur.yaml",
        "name: c\nversion: \"1\"\nartifacts:\n  - name: murmur/driver-claude-code\n    version: \"0.1.0\"\n    runtime: driver\ninference:\n  transport: process\n  driver:\n    artifact: murmur/driver-claude-code\n",
    );
    let err = agree(&p).unwrap();
    assert!(err.starts_with("error[E-RUN-005]: "), "{err}");
}

#[test]
fn a_system_prompt_file_that_is_missing_is_refused_by_both() {
    let p = Project::new();
    p.write(
        "murmur.yaml",
        &scripted_manifest("c", "").replace(
            "  model: scripted\n",
            "  model: scripted\n  system_prompt_file: prompt.md\n",
        ),
    );
    p.write("script.yaml", SCRIPT);
    let err = agree(&p).unwrap();
    assert!(err.starts_with("error[E-IO-001]: "), "{err}");
    assert!(err.contains("inference.system_prompt_file"), "{err}");
}

#[test]
fn containment_the_capsule_cannot_have_is_refused_by_both() {
    let p = Project::new();
    p.write(
        "murmur.yaml",
        &scripted_manifest(
            "c",
            "capabilities:\n  containment: scoped\n  shell:\n    allow: [bash]\n  filesystem:\n    workdir_exec: true\n",
        ),
    );
    p.write("script.yaml", SCRIPT);
    let err = agree(&p).unwrap();
    assert!(err.starts_with("error[E-CAP-"), "{err}");
}

#[test]
fn a_sub_capsule_with_no_installed_version_is_a_note_as_run_starts_anyway() {
    let p = Project::new();
    p.write(
        "murmur.yaml",
        &scripted_manifest("c", "capabilities:\n  spawn:\n    allow: [local/helper]\n"),
    );
    p.write("script.yaml", SCRIPT);
    assert_eq!(agree(&p), None);
    let home = p.path().join("home");
    let o = p
        .mur_cmd(&["doctor", "--strict"])
        .env("HOME", &home)
        .env("MURMUR_HOME", home.join(".murmur"))
        .output()
        .unwrap();
    assert!(
        stdout(&o).contains(
            "  note: a delegation to local/helper will be refused: no version of it is installed"
        ),
        "{}",
        stdout(&o)
    );
}

#[test]
fn strict_json_says_so_and_carries_the_refusal() {
    let p = Project::new();
    p.write("murmur.yaml", &scripted_manifest("c", ""));
    let o = p.mur(&["doctor", "--strict", "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["strict"], true);
    assert_eq!(v["ok"], false);
    assert_eq!(v["diagnostics"][0]["code"], "E-IO-001");
}
