//! Session addresses and bad input, end to end through the real `mur` binary.

mod trace_support;

use std::fs;

use trace_support::{mur, session};

const A: &str = "ses_0193000000007000800000000000aaaa";
const B: &str = "ses_0193000000017000800000000000bbbb";
const C: &str = "ses_0193000000027000800000000001aaaa";

/// A temp folder with `workdir/` holding sessions A, B, C (C newest).
fn three_sessions() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let wd = tmp.path().join("workdir");
    session(A, &["bash"]).write_in(&wd);
    session(B, &["bash", "grep"]).write_in(&wd);
    session(C, &["grep", "grep", "grep"]).write_in(&wd);
    tmp
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

#[test]
fn no_address_and_ordinals_count_back_from_the_newest() {
    let tmp = three_sessions();
    let steps = |args: &[&str]| {
        let out = mur(tmp.path(), &[&["trace", "steps"], args].concat());
        assert_eq!(out.code, 0, "{}", out.stderr);
        first_line(&out.stdout).to_string()
    };
    assert_eq!(steps(&[]), format!("Session {C}  (1 task, 4 turns)"));
    assert_eq!(steps(&["@1"]), format!("Session {C}  (1 task, 4 turns)"));
    assert_eq!(steps(&["@2"]), format!("Session {B}  (1 task, 3 turns)"));
    assert_eq!(steps(&["@3"]), format!("Session {A}  (1 task, 2 turns)"));
}

#[test]
fn suffix_full_id_and_path_each_name_one_session() {
    let tmp = three_sessions();
    for (address, id) in [
        ("bbbb", B),
        ("BBBB", B),
        ("1aaaa", C),
        (A, A),
        (&format!("workdir/{B}/trace.jsonl") as &str, B),
        (&format!("workdir/{A}") as &str, A),
    ] {
        let out = mur(tmp.path(), &["trace", "steps", address]);
        assert_eq!(out.code, 0, "{address}: {}", out.stderr);
        assert!(
            first_line(&out.stdout).starts_with(&format!("Session {id}  ")),
            "{address} gave {}",
            out.stdout
        );
    }
}

#[test]
fn an_ambiguous_suffix_lists_the_candidates() {
    let tmp = three_sessions();
    let out = mur(tmp.path(), &["trace", "show", "aaaa"]);
    assert_eq!(out.code, 1);
    assert_eq!(out.stdout, "");
    assert_eq!(
        out.stderr,
        format!(
            "error[E-TRC-002]: ambiguous: 'aaaa' matches 2 sessions — provide more characters\n  {A}\n  {C}\n  hint: give more characters of the id, or the full id\n"
        )
    );
}

#[test]
fn an_unknown_address_lists_what_there_is() {
    let tmp = three_sessions();
    let out = mur(tmp.path(), &["trace", "show", "cccc"]);
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stderr,
        format!(
            "error[E-TRC-002]: no session found matching suffix 'cccc' in workdir\n  hint: sessions in workdir, newest first:\n    @1   {C}\n    @2   {B}\n    @3   {A}\n"
        )
    );
    let out = mur(
        tmp.path(),
        &["trace", "show", "ses_0193000000037000800000000000cccc"],
    );
    assert_eq!(out.code, 1);
    assert!(out.stderr.starts_with(
        "error[E-TRC-002]: session ses_0193000000037000800000000000cccc not found in workdir\n"
    ));
}

#[test]
fn bad_ordinals_and_short_suffixes_are_refused() {
    let tmp = three_sessions();
    let err = |a: &str| {
        let out = mur(tmp.path(), &["trace", "show", a]);
        assert_eq!(out.code, 1, "{a}");
        first_line(&out.stderr).to_string()
    };
    assert_eq!(
        err("@4"),
        "error[E-TRC-002]: @4 is out of range — workdir has 3 sessions"
    );
    assert_eq!(err("@0"), "error[E-TRC-002]: ordinal must be @1 or higher");
    assert_eq!(
        err("@x"),
        "error[E-TRC-002]: invalid ordinal '@x' — expected @1, @2, ..."
    );
    assert_eq!(
        err("aaa"),
        "error[E-TRC-002]: session address 'aaa' is too short"
    );
    assert_eq!(
        err("nowhere/trace.jsonl"),
        "error[E-IO-001]: trace file not found: nowhere/trace.jsonl"
    );
}

#[test]
fn empty_or_missing_workdir_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let out = mur(tmp.path(), &["trace", "show"]);
    assert_eq!(out.code, 1);
    assert_eq!(
        first_line(&out.stderr),
        "error[E-TRC-002]: no sessions found: workdir workdir does not exist"
    );
    fs::create_dir(tmp.path().join("workdir")).unwrap();
    fs::create_dir(tmp.path().join("workdir/not-a-session")).unwrap();
    let out = mur(tmp.path(), &["trace", "report"]);
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stderr,
        "error[E-TRC-002]: no sessions found in workdir at workdir\n  hint: run a capsule first, or pass --workdir <dir> naming the folder that holds your session folders\n"
    );
}

#[test]
fn workdir_flag_reads_both_layouts() {
    let tmp = tempfile::tempdir().unwrap();
    // `mur run --workdir proj`: records under proj/.murmur/ses_*.
    session(A, &["bash"]).write_in(&tmp.path().join("proj/.murmur"));
    // A manifest folder's default layout elsewhere.
    session(B, &["grep"]).write_in(&tmp.path().join("agent/workdir"));
    let out = mur(tmp.path(), &["trace", "steps", "--workdir", "proj"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.starts_with(&format!("Session {A}  ")));
    let out = mur(
        tmp.path(),
        &["trace", "steps", "@1", "--workdir", "agent/workdir"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.starts_with(&format!("Session {B}  ")));
}

#[test]
fn a_child_session_is_found_by_its_id() {
    let tmp = trace_support::with_fixture("delegation");
    let out = mur(tmp.path(), &["trace", "steps", "c003"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        "Session ses_0193a1b2c3f67000800000000000c003  (1 task, 2 turns)\n  turn 0  tool_call  clippy\n    clippy  800ms  ✓  exit 1\n  turn 1  end_turn\n"
    );
}

#[test]
fn a_trace_without_session_end_still_shows() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = session(A, &["bash"]);
    s.ended = None;
    let path = s.write_in(&tmp.path().join("workdir"));
    let out = mur(tmp.path(), &["trace", "show"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let head: Vec<&str> = out.stdout.lines().take(9).collect();
    assert_eq!(
        head,
        [
            "── Session ──────────────────────────────────────",
            &format!("session:    {A}"),
            "capsule:    demo v1.0.0",
            "model:      gpt-test",
            "status:     ended without a session_end (last event: some_future_event at 2026-11-18T11:06:40.422Z)",
            "duration:   422ms  (first to last event)",
            "tokens:     200 in / 15 out  (215 total, estimated)",
            "tools:      bash, grep",
            "totals:     counted from the lines (the trace has no session_end)",
        ]
    );
    // diff and report read it too.
    let p = path.to_str().unwrap();
    assert_eq!(mur(tmp.path(), &["trace", "report", p]).code, 0);
}

#[test]
fn a_torn_last_line_is_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let path = session(A, &["bash"]).write_in(&tmp.path().join("workdir"));
    let mut text = fs::read_to_string(&path).unwrap();
    text.push_str("{\"event_type\":\"tool_call\",\"event_id\":\"evt_01");
    fs::write(&path, text).unwrap();
    let out = mur(tmp.path(), &["trace", "show"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains(
        "\nnote:       the last line was torn (a run still writing, or killed) and was skipped\n"
    ));
    assert!(out.stdout.contains("\nstatus:     ok\n"));
    for cmd in ["steps", "report", "diff"] {
        let args: Vec<&str> = if cmd == "diff" {
            vec!["trace", cmd, A, A]
        } else {
            vec!["trace", cmd]
        };
        assert_eq!(mur(tmp.path(), &args).code, 0, "{cmd}");
    }
}

#[test]
fn a_corrupt_line_in_the_middle_names_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let path = session(A, &["bash"]).write_in(&tmp.path().join("workdir"));
    let text = fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.insert(3, "this is not json");
    fs::write(&path, lines.join("\n") + "\n").unwrap();
    for cmd in ["show", "steps", "report"] {
        let out = mur(tmp.path(), &["trace", cmd]);
        assert_eq!(out.code, 1, "{cmd}");
        assert_eq!(out.stdout, "");
        assert_eq!(
            first_line(&out.stderr),
            format!(
                "error[E-TRC-001]: workdir/{A}/trace.jsonl:4: expected ident at line 1 column 2"
            )
        );
    }
}

#[test]
fn empty_and_headless_traces_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let wd = tmp.path().join("workdir");
    fs::create_dir_all(wd.join(A)).unwrap();
    fs::write(wd.join(A).join("trace.jsonl"), "").unwrap();
    let out = mur(tmp.path(), &["trace", "show"]);
    assert_eq!(out.code, 1);
    assert_eq!(
        first_line(&out.stderr),
        format!("error[E-TRC-001]: workdir/{A}/trace.jsonl: trace file is empty (incomplete or zero-event session)")
    );
    // A file whose only line is garbage is not empty: it holds nothing valid.
    fs::write(wd.join(A).join("trace.jsonl"), "garbage\n").unwrap();
    let out = mur(tmp.path(), &["trace", "show"]);
    assert_eq!(
        first_line(&out.stderr),
        format!("error[E-TRC-001]: workdir/{A}/trace.jsonl: no valid lines (its only line is cut off or not a JSON trace event)")
    );
    fs::write(
        wd.join(A).join("trace.jsonl"),
        "{\"event_type\":\"task_start\",\"session_id\":\"x\",\"timestamp\":1}\n",
    )
    .unwrap();
    let out = mur(tmp.path(), &["trace", "show"]);
    assert_eq!(
        first_line(&out.stderr),
        format!("error[E-TRC-001]: workdir/{A}/trace.jsonl: no session_start event found")
    );
    // A records folder without a trace (a session that failed before writing one).
    fs::create_dir_all(wd.join(".murmur").join(B)).unwrap();
    let out = mur(tmp.path(), &["trace", "show", "bbbb"]);
    assert_eq!(out.code, 1);
    assert_eq!(
        first_line(&out.stderr),
        format!("error[E-IO-001]: trace file not found: workdir/.murmur/{B}/trace.jsonl")
    );
    // A work folder (the current layout) is not a session: it holds no trace.
    fs::create_dir_all(wd.join("ses_0193000000037000800000000000dddd")).unwrap();
    let out = mur(tmp.path(), &["trace", "show", "dddd"]);
    assert_eq!(
        first_line(&out.stderr),
        "error[E-TRC-002]: no session found matching suffix 'dddd' in workdir"
    );
}

#[test]
fn the_original_murmurs_records_layout_is_found_with_no_flags() {
    // Murmur 0.8 keeps a run's records in ~/.murmur/records/<canonical workdir>/<ses>/, the
    // workdir being <manifest dir>/workdir; that folder itself may be gone.
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let project = tmp.path().join("proj");
    fs::create_dir_all(&project).unwrap();
    let canonical = fs::canonicalize(&project).unwrap().join("workdir");
    let records = home
        .join(".murmur/records")
        .join(canonical.strip_prefix("/").unwrap());
    session(A, &["bash"]).write_in(&records);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mur"))
        .args(["trace", "steps"])
        .current_dir(&project)
        .env("HOME", &home)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        first_line(&String::from_utf8_lossy(&out.stdout)),
        format!("Session {A}  (1 task, 2 turns)")
    );
}
