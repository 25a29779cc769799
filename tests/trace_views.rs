//! `mur trace show|steps|diff|report` end to end: exact plain output (stdout is a pipe), exit
//! codes, `--json`, fixture sessions in temporary work folders, and the traces written by the
//! original Murmur read by path.

mod trace_support;

use serde_json::Value;
use trace_support::{conformance, mur, session, with_fixture};

const PULL_SHOW: &str = "\
── Session ──────────────────────────────────────
session:    ses_019ed2af76b57c42912b612f07dd4d51
capsule:    coding-agent v0.1.0
model:      claude-sonnet-5
status:     ok
duration:   9.8s
tokens:     17,300 in / 410 out  (17,710 total, estimated)
tools:      cargo, git, pull-artifact, remove-artifact

── Turns ────────────────────────────────────────
count:      6  (max: 20)
  turn 0  tool_call  ~2,100 in / ~60 out
    pull-artifact  240ms  ✓  28 B in → 520 B out  {\"artifact\":\"murmur/tool-*\"}
  turn 1  tool_call  ~2,500 in / ~55 out
    pull-artifact  310ms  ✓  31 B in → 240 B out  {\"artifact\":\"murmur/tool-edit\"}
    · pulled murmur/tool-edit@0.2.0 (runtime/untrusted)
  turn 2  tool_call  ~2,900 in / ~120 out
    · tools refreshed (agent)  +tool-edit
    tool-edit  12ms  ✓  91 B in → 81 B out  {\"path\":\"src/parse.rs\",\"edits\":[{\"old\":\"if input.len() > 0\",\"new\":\"if !input.is_empty()\"}]}
  turn 3  tool_call  ~3,100 in / ~40 out
    cargo  5.2s  ✓  exit 0  18 B in → 1.4 KiB out  {\"command\":\"test\"}
  turn 4  tool_call  ~3,300 in / ~45 out
    remove-artifact  3ms  ✓  24 B in → 199 B out  {\"artifact\":\"tool-edit\"}
  turn 5  end_turn  ~3,400 in / ~90 out
    · tools refreshed (agent)  -tool-edit

── Tool calls ───────────────────────────────────
count:      5  (5 ok, 0 error)  success 100.0%
latency:    avg 1.2s
  cargo            1 call  0 errors  avg 5.2s
  pull-artifact    2 calls  0 errors  avg 275ms
  remove-artifact  1 call  0 errors  avg 3ms
  tool-edit        1 call  0 errors  avg 12ms

── Pulled at runtime ────────────────────────────
  murmur/tool-edit@0.2.0  tool  runtime/untrusted  from github:murmur-nexus/default-artifacts

── Shell calls ──────────────────────────────────
count:      1
exit codes: 1 ok
latency:    avg 5.2s
";

#[test]
fn show_prints_the_seed_001_session_with_its_pulled_at_runtime_section() {
    let tmp = with_fixture("pull");
    let out = mur(tmp.path(), &["trace", "show"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stderr, "");
    assert_eq!(out.stdout, PULL_SHOW);
    // Plain when piped: no escape sequences.
    assert!(!out.stdout.contains('\x1b'));
}

const TREE: &str = "\
── Delegations ──────────────────────────────────
lead v0.1.0  ses_0193a1b2c3d47000800000000000a001  ok  9.1s  18,730 in / 1,270 out
├─ acme/reviewer@0.3.0  ses_0193a1b2c3e57000800000000000b002  ok  4.1s  4,230 in / 450 out
│  └─ acme/linter@0.1.0  ses_0193a1b2c3f67000800000000000c003  ok  1.1s  1,120 in / 70 out
├─ acme/tester@0.1.0  ses_0193a1b2c4077000800000000000d004  crashed  3.3s  1,500 in / 90 out  (child trace has no session_end)
│    reason: child session panicked: index out of bounds
├─ acme/deployer@1.0.0  (no child)  refused  0ms  —
│    reason: capsule 'deployer' is not in capabilities.spawn.allow
└─ acme/writer@0.2.0  ses_0193a1b2c4187000800000000000e005  terminated  2.5s  300 in / 20 out
     reason: delegation deadline passed
     child trace missing: workdir/ses_0193a1b2c3d47000800000000000a001/children/ses_0193a1b2c4187000800000000000e005/trace.jsonl
";

#[test]
fn show_draws_the_delegation_tree_from_the_children_traces() {
    // The reviewer's child_records_dir names the machine the run happened on; the reader
    // falls back to children/<id>/ beside the parent. The tester was killed (torn last line,
    // no session_end); the writer's trace is missing; the deployer was refused.
    let tmp = with_fixture("delegation");
    let out = mur(tmp.path(), &["trace", "show"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let tree = &out.stdout[out.stdout.find("── Delegations").expect("tree")..];
    assert_eq!(tree, TREE);
    assert!(out.stdout.contains(
        "\n  turn 6  end_turn  ~2,600 in / ~150 out\n    · continued with 3 delegation outcomes (waited 2.6s)\n"
    ));
    for section in [
        "\n── Retries ──────────────────────────────────────\n  turn 1  attempt 1/3  HTTP 429  (status)  after 1.5s\n    rate limited\n",
        "\n── Denied calls ─────────────────────────────────\n  turn 4  bash  on-tool-call  acme/hook-policy\n    reason: rm -rf is not allowed\n",
        "\n── Plans ────────────────────────────────────────\n  plan plan-1  2 steps  failed\n    build  shell  success  900ms\n    test  shell  failed  50ms\n",
        "\n  turn 3  tool_call  ~1,800 in / ~90 out\n    delegate-task  1ms  ✗  56 B in → 95 B out  {\"capsule\":\"deployer\",\"version\":\"1.0.0\",\"task\":\"Deploy\"}\n      error: capsule 'deployer' is not in capabilities.spawn.allow\n",
    ] {
        assert!(out.stdout.contains(section), "missing {section}\n---\n{}", out.stdout);
    }
}

#[test]
fn show_json_carries_the_summary_and_the_tree() {
    let tmp = with_fixture("delegation");
    let out = mur(tmp.path(), &["trace", "show", "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).expect("one JSON document");
    assert_eq!(
        v["session"]["session_id"],
        "ses_0193a1b2c3d47000800000000000a001"
    );
    assert_eq!(v["session"]["totals"]["turns"], 7);
    assert_eq!(v["session"]["denials"][0]["hook_name"], "acme/hook-policy");
    assert_eq!(v["session"]["plans"][0]["outcome"], "failed");
    let tree = v["delegation_tree"].as_array().unwrap();
    assert_eq!(tree.len(), 4);
    assert_eq!(tree[0]["child"]["capsule"], "acme/reviewer");
    assert_eq!(tree[0]["children"][0]["child"]["input_tokens"], 1120);
    assert_eq!(tree[2]["delegation"]["outcome"], "refused");
    assert!(tree[3]["problem"]
        .as_str()
        .unwrap()
        .starts_with("child trace missing: "));
}

#[test]
fn steps_summarise_each_turn_and_verbose_quotes_inputs() {
    let tmp = with_fixture("failed");
    let out = mur(tmp.path(), &["trace", "steps", "--verbose"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        "\
Session ses_0193a1b2d0007000800000000000f00f  (1 task, 1 turn)
  turn 0  tool_call  cargo
    cargo  4.1s  ✓  exit 0  \"build\"
  turn 1  error  driver_error  HTTP 503
    · retry attempt 1/3  HTTP 503  (status)  after 500ms
    · retry attempt 2/3  HTTP 503  (status)  after 1.0s
    · retry attempt 3/3  HTTP 503  (status)  after 1.5s
    · task failed: driver_error — the model provider answered HTTP 503 four times
"
    );
    let plain = mur(tmp.path(), &["trace", "steps"]);
    assert!(plain.stdout.contains("\n    cargo  4.1s  ✓  exit 0\n"));
    let json = mur(tmp.path(), &["trace", "steps", "-v", "--json"]);
    let v: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(v["steps"][0]["calls"][0]["input_summary"], "\"build\"");
    assert_eq!(v["steps"][1]["decision"], "error");
}

#[test]
fn show_reports_a_failed_session() {
    let tmp = with_fixture("failed");
    let out = mur(tmp.path(), &["trace", "show", "f00f"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("\nstatus:     failed\n"));
    assert!(out.stdout.contains(
        "\n── Failed ───────────────────────────────────────\n  task_failed  driver_error  at turn 1\n    reason: the model provider answered HTTP 503 four times\n"
    ));
}

const A: &str = "ses_0193000000007000800000000000aaaa";
const B: &str = "ses_0193000000017000800000000000bbbb";

#[test]
fn diff_defaults_to_the_two_most_recent_and_finds_the_divergence() {
    let tmp = tempfile::tempdir().unwrap();
    let wd = tmp.path().join("workdir");
    session(A, &["bash", "grep"]).write_in(&wd);
    let mut b = session(B, &["bash", "bash", "grep"]);
    b.ended = Some("failed");
    b.write_in(&wd);
    let out = mur(tmp.path(), &["trace", "diff"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        format!(
            "\
Run A: {A}  demo v1.0.0
Run B: {B}  demo v1.0.0

Metric                Run A           Run B           Delta
───────────────────── ─────────────── ─────────────── ──────────────────────────
turns                 3               4               +1
duration              1.7s            1.9s            +220ms
input tokens          300             400             +100
output tokens         25              35              +10
tool calls            2               3               +1
tool success rate     100.0%          100.0%          =
shell calls           0               0               =
exit status           ok              failed          differs

── Tools ────────────────────────────────────────
  bash                1               2               +1
  grep                1               1               =

── Divergence ───────────────────────────────────
first divergence at step 2:
  A: turn 1  tool_call  grep
  B: turn 1  tool_call  bash
"
        )
    );
    // Same run against itself: no divergence.
    let same = mur(tmp.path(), &["trace", "diff", "aaaa", "aaaa"]);
    assert!(same.stdout.ends_with(
        "── Divergence ───────────────────────────────────\nnone: both runs made the same decisions and tool calls over 3 turns\n"
    ));
    let v: Value =
        serde_json::from_str(&mur(tmp.path(), &["trace", "diff", "--json"]).stdout).unwrap();
    assert_eq!(v["divergence"]["turn_position"], 1);
    assert_eq!(v["b"]["status"], "failed");
}

#[test]
fn diff_argument_errors_name_the_side() {
    let tmp = tempfile::tempdir().unwrap();
    session(A, &["bash"]).write_in(&tmp.path().join("workdir"));
    let out = mur(tmp.path(), &["trace", "diff"]);
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stderr.lines().next().unwrap(),
        "error[E-TRC-002]: before: @2 is out of range — workdir has 1 session"
    );
    let out = mur(tmp.path(), &["trace", "diff", "zzzz", "yyyy"]);
    assert_eq!(out.code, 1);
    let firsts: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("error"))
        .collect();
    assert_eq!(
        firsts,
        [
            "error[E-TRC-002]: before: no session found matching suffix 'zzzz' in workdir",
            "error[E-TRC-002]: after: no session found matching suffix 'yyyy' in workdir",
        ]
    );
    // clap usage error for a third argument.
    assert_eq!(mur(tmp.path(), &["trace", "diff", "a", "b", "c"]).code, 2);
}

#[test]
fn report_covers_tokens_tools_latency_and_children() {
    let tmp = with_fixture("delegation");
    let out = mur(tmp.path(), &["trace", "report"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let expected_head = "\
Sessions:   1
  ses_0193a1b2c3d47000800000000000a001  lead v0.1.0  ok  9.1s  7 turns  18,730 in / 1,270 out

── Tokens ───────────────────────────────────────
input:      18,730
output:     1,270
total:      20,000
turns:      7
per turn:   avg 2,675 in / 181 out

── Tool calls ───────────────────────────────────
count:      6  (4 ok, 2 error)  success 66.7%
  NAME              CALLS  ERRORS       AVG       MAX      OUTPUT
  bash                  1       1       2ms       2ms        64 B
  delegate-task         4       1       7ms      12ms       629 B
  submit-plan           1       0     960ms     960ms       412 B

── Latency ──────────────────────────────────────
session:    avg 9.1s  min 9.1s  max 9.1s
tool call:  avg 165ms  p50 9ms  p95 960ms  max 960ms
plan steps: 2 (2 shell; 1 failed, 0 skipped)
retries:    1  (waited 1.5s)

── Exit status ──────────────────────────────────
  ok                       1  (100.0%)

── Per-child usage ──────────────────────────────
ses_0193…a001  lead v0.1.0
";
    assert!(out.stdout.starts_with(expected_head), "{}", out.stdout);
    assert!(out.stdout.ends_with("children:   6,030 in / 560 out\n"));
    let v: Value =
        serde_json::from_str(&mur(tmp.path(), &["trace", "report", "--json"]).stdout).unwrap();
    assert_eq!(v["children_tokens"]["input_tokens"], 6030);
    assert_eq!(v["tools"]["delegate-task"]["calls"], 4);
}

/// A trace past the size `mur trace` reads on two cores (4 MiB): every line is counted, in
/// order; a torn last line is skipped and a damaged line is named by its number, as in a small
/// trace.
#[test]
fn a_large_trace_is_read_whole_and_damage_in_it_is_found() {
    let tmp = tempfile::tempdir().unwrap();
    let wd = tmp.path().join("workdir");
    let tools: Vec<&str> = (0..20_000).map(|i| ["bash", "grep"][i % 3 / 2]).collect();
    let mut s = session("ses_0193000000007000800000000000dddd", &tools);
    s.ended = None; // totals from the lines, not from a session_end
    let path = s.write_in(&wd);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.len() > 4 << 20, "{} bytes", text.len());
    let whole = mur(tmp.path(), &["trace", "report"]);
    assert_eq!(whole.code, 0, "{}", whole.stderr);
    let expected_tokens = "\
── Tokens ───────────────────────────────────────
input:      2,000,100
output:     200,005
total:      2,200,105
turns:      20,001
per turn:   avg 100 in / 9 out

── Tool calls ───────────────────────────────────
count:      20,000  (20,000 ok, 0 error)  success 100.0%
  NAME     CALLS  ERRORS       AVG       MAX      OUTPUT
  bash    13,334       0      20ms      20ms   651.1 KiB
  grep     6,666       0      20ms      20ms   325.5 KiB
";
    assert!(whole.stdout.contains(expected_tokens), "{}", whole.stdout);
    assert!(
        whole
            .stdout
            .contains("  20,001 turns  2,000,100 in / 200,005 out\n"),
        "{}",
        whole.stdout
    );

    std::fs::write(&path, format!("{text}{{\"event_type\":\"inference\",\"tu")).unwrap();
    let torn = mur(tmp.path(), &["trace", "report"]);
    assert_eq!((torn.code, torn.stdout), (0, whole.stdout));

    // Line 2 + 2 × 15,000 + 1: the inference line of turn 15,000.
    let mut lines: Vec<&str> = text.lines().collect();
    lines[30_002] = "{\"event_type\":\"inference\",\"turn\":";
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let damaged = mur(tmp.path(), &["trace", "report"]);
    assert_eq!(damaged.code, 1, "{}", damaged.stdout);
    let want = "error[E-TRC-001]: workdir/ses_0193000000007000800000000000dddd/trace.jsonl:30003: \
                EOF while parsing a value at line 2 column 0\n";
    assert!(damaged.stderr.starts_with(want), "{}", damaged.stderr);
}

#[test]
fn report_over_the_last_n_sessions_adds_them_up() {
    let tmp = tempfile::tempdir().unwrap();
    let wd = tmp.path().join("workdir");
    session("ses_0193000000007000800000000000aaaa", &["bash"]).write_in(&wd);
    session("ses_0193000000017000800000000000bbbb", &["bash", "grep"]).write_in(&wd);
    let mut c = session("ses_0193000000027000800000000000cccc", &["grep"]);
    c.ended = Some("max_turns_reached");
    c.write_in(&wd);
    let out = mur(tmp.path(), &["trace", "report", "--last", "2"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.starts_with(
        "Sessions:   2\n  ses_0193000000027000800000000000cccc  demo v1.0.0  max_turns_reached  1.4s  2 turns  200 in / 15 out\n  ses_0193000000017000800000000000bbbb  demo v1.0.0  ok  1.7s  3 turns  300 in / 25 out\n"
    ), "{}", out.stdout);
    assert!(out.stdout.contains("\ninput:      500\noutput:     40\n"));
    assert!(out.stdout.contains(
        "\n── Exit status ──────────────────────────────────\n  max_turns_reached        1  (50.0%)\n  ok                       1  (50.0%)\n"
    ));
    let all = mur(tmp.path(), &["trace", "report", "--last", "10"]);
    assert!(all.stdout.starts_with("Sessions:   3\n"));
    assert_eq!(all.stderr, "");
    // A sweep skips sessions it cannot read, and says which.
    std::fs::create_dir_all(wd.join(".murmur/ses_0193000000037000800000000000dddd")).unwrap();
    std::fs::create_dir_all(wd.join("ses_0193000000047000800000000000eeee")).unwrap();
    std::fs::write(
        wd.join("ses_0193000000047000800000000000eeee/trace.jsonl"),
        "",
    )
    .unwrap();
    let swept = mur(tmp.path(), &["trace", "report", "--last", "10"]);
    assert_eq!(swept.code, 0, "{}", swept.stderr);
    assert!(swept.stdout.starts_with("Sessions:   3\n"));
    assert_eq!(
        swept.stderr,
        "warning[E-TRC-001]: skipped: workdir/ses_0193000000047000800000000000eeee/trace.jsonl: trace file is empty (incomplete or zero-event session)\n\
         warning[E-IO-001]: skipped: trace file not found: workdir/.murmur/ses_0193000000037000800000000000dddd/trace.jsonl\n"
    );
    // Named explicitly, an unreadable session is an error.
    let named = mur(tmp.path(), &["trace", "report", "eeee"]);
    assert_eq!(named.code, 1);
    assert!(named.stderr.starts_with("error[E-TRC-001]: workdir/ses_0193000000047000800000000000eeee/trace.jsonl: trace file is empty"));
    let zero = mur(tmp.path(), &["trace", "report", "--last", "0"]);
    assert_eq!(zero.code, 1);
    assert_eq!(zero.stderr, "error[E-TRC-002]: --last must be at least 1\n");
}

#[test]
fn traces_written_by_the_original_murmur_read_by_path() {
    let tmp = tempfile::tempdir().unwrap();
    let basic = conformance("upstream-basic.trace.jsonl");
    let pull = conformance("upstream-pull.trace.jsonl");
    let (basic, pull) = (basic.to_str().unwrap(), pull.to_str().unwrap());
    for args in [
        vec!["trace", "show", basic],
        vec!["trace", "show", pull],
        vec!["trace", "steps", "--verbose", pull],
        vec!["trace", "diff", basic, pull],
        vec!["trace", "report", basic, pull],
        vec!["trace", "show", "--json", pull],
    ] {
        let out = mur(tmp.path(), &args);
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        assert_eq!(out.stderr, "", "{args:?}");
    }
    let steps = mur(tmp.path(), &["trace", "steps", basic]);
    assert_eq!(
        steps.stdout,
        "Session ses_01a229824faa79708cb1e827a2275bb3  (1 task, 2 turns)\n  turn 0  tool_call  bash\n    bash  48ms  ✓  exit 0\n  turn 1  end_turn\n"
    );
    let show = mur(tmp.path(), &["trace", "show", pull]);
    assert!(show.stdout.contains(
        "\n── Pulled at runtime ────────────────────────────\n  murmur/tool-edit@0.2.0  tool  runtime/untrusted  from project store\n"
    ));
    // Upstream writes its estimate in input_tokens and the provider's count beside it: the
    // header's totals are the estimate, and say so; the provider's own count follows, and
    // each turn shows the provider's count with the estimate in brackets.
    assert!(show.stdout.contains(
        "\nstatus:     ok\nduration:   238ms\ntokens:     5,425 in / 260 out  (5,685 total, estimated)\nprovider:   510 in / 60 out  (its own count, on 5 of 5 model calls)\n"
    ), "{}", show.stdout);
    assert!(
        show.stdout
            .contains("\n  turn 0  tool_call  100 in / 10 out  (estimated ~1,356 / ~54)\n"),
        "{}",
        show.stdout
    );
    let report = mur(tmp.path(), &["trace", "report", basic, pull]);
    assert!(
        report
            .stdout
            .contains("\ninput:      6,637\noutput:     340\n"),
        "{}",
        report.stdout
    );
}

#[test]
fn show_of_a_child_names_its_parent_and_its_own_children() {
    let tmp = with_fixture("delegation");
    let out = mur(tmp.path(), &["trace", "show", "b002"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.starts_with(
        "── Session ──────────────────────────────────────\nsession:    ses_0193a1b2c3e57000800000000000b002\nspawned by: ses_0193a1b2c3d47000800000000000a001 (delegation dlg_0193a1b2c3e57000800000000000f001)\ncapsule:    acme/reviewer v0.1.0\n"
    ), "{}", out.stdout);
    assert!(out.stdout.ends_with(
        "── Delegations ──────────────────────────────────\nacme/reviewer v0.1.0  ses_0193a1b2c3e57000800000000000b002  ok  4.1s  4,230 in / 450 out\n└─ acme/linter@0.1.0  ses_0193a1b2c3f67000800000000000c003  ok  1.1s  1,120 in / 70 out\n"
    ), "{}", out.stdout);
}

#[test]
fn several_tasks_and_peer_events_are_grouped() {
    let tmp = tempfile::tempdir().unwrap();
    let id = "ses_0193000000007000800000000000dddd";
    let dir = tmp.path().join("workdir").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let env = |kind: &str, ts: u64, rest: &str| {
        format!("{{\"event_type\":\"{kind}\",\"event_id\":\"evt_{ts}\",\"parent_id\":null,\"session_id\":\"{id}\",\"timestamp\":{ts}{rest}}}\n")
    };
    let text = [
        env("session_start", 1, ",\"capsule_name\":\"peer\",\"capsule_version\":\"0.2.0\",\"model\":\"m\",\"tools_declared\":[\"share-file\"]"),
        env("task_start", 2, ",\"task_id\":\"tsk_a\""),
        env("inference", 3, ",\"turn\":0,\"input_tokens\":10,\"output_tokens\":1,\"decision\":\"tool_call\",\"tool_name\":\"share-file\""),
        env("peer_handle_mint", 4, ",\"outcome\":\"ok\""),
        env("tool_call", 5, ",\"turn\":0,\"tool_name\":\"share-file\",\"input\":{\"path\":\"report.md\",\"peer\":\"b\"},\"duration_ms\":1,\"status\":\"ok\""),
        env("inference", 6, ",\"turn\":1,\"input_tokens\":10,\"output_tokens\":1,\"decision\":\"end_turn\""),
        env("task_end", 7, ",\"task_id\":\"tsk_a\",\"exit_status\":\"ok\""),
        env("task_start", 8, ",\"task_id\":\"tsk_b\""),
        env("peer_file_fetch", 9, ",\"outcome\":\"refused\""),
        env("inference", 10, ",\"turn\":0,\"input_tokens\":10,\"output_tokens\":1,\"decision\":\"text\""),
        env("task_end", 11, ",\"task_id\":\"tsk_b\",\"exit_status\":\"ok\""),
        env("session_end", 12, ",\"total_turns\":3,\"total_input_tokens\":30,\"total_output_tokens\":3,\"total_tool_calls\":1,\"total_shell_calls\":0,\"duration_ms\":11,\"exit_status\":\"ok\""),
    ]
    .concat();
    std::fs::write(dir.join("trace.jsonl"), text).unwrap();
    let out = mur(tmp.path(), &["trace", "steps", "-v"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        format!(
            "Session {id}  (2 tasks, 3 turns)\n  task 1\n  turn 0  tool_call  share-file\n    share-file  1ms  ✓  \"report.md\"\n  turn 1  end_turn\n  task 2\n  turn 0  text\n"
        )
    );
    let show = mur(tmp.path(), &["trace", "show"]);
    assert!(show.stdout.contains(
        "\n── Peer files ───────────────────────────────────\n  peer_file_fetch refused  1\n  peer_handle_mint ok  1\n"
    ), "{}", show.stdout);
}

#[test]
fn colour_on_a_terminal_and_never_with_no_color() {
    // `script` gives the command a pseudo-terminal as stdout.
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("script(1) not installed; terminal colour not checked");
        return;
    }
    let tmp = with_fixture("pull");
    let bin = env!("CARGO_BIN_EXE_mur");
    let run = |no_color: bool| {
        let mut cmd = std::process::Command::new("script");
        cmd.args(["-qec", &format!("{bin} trace show"), "/dev/null"])
            .current_dir(tmp.path());
        if no_color {
            cmd.env("NO_COLOR", "1");
        } else {
            cmd.env_remove("NO_COLOR");
        }
        String::from_utf8_lossy(&cmd.output().unwrap().stdout).into_owned()
    };
    let coloured = run(false);
    assert!(
        coloured.contains("status:     \x1b[32mok\x1b[0m"),
        "{coloured:?}"
    );
    assert!(coloured.contains("\x1b[1m── Session "));
    let plain = run(true);
    assert!(plain.contains("status:     ok"));
    assert!(!plain.contains('\x1b'));
}

#[test]
fn a_trace_that_points_at_itself_is_read_once_and_shown_as_a_loop() {
    // A crafted trace: every delegation says its child's records are the trace's own folder.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("crafted");
    std::fs::create_dir_all(&dir).unwrap();
    let sid = "ses_0193000000007000800000000000aaaa";
    let mut lines = vec![
        serde_json::json!({"event_type": "session_start", "event_id": "evt_1", "parent_id": null, "session_id": sid, "timestamp": 1, "capsule_name": "loop", "capsule_version": "1"}),
    ];
    for i in 0..20 {
        lines.push(serde_json::json!({"event_type": "delegation_start", "event_id": format!("evt_s{i}"), "parent_id": "evt_1", "session_id": sid, "timestamp": 2, "delegation_id": format!("dlg_{i}"), "capsule": "loop", "version": "1", "child_session_id": sid, "child_records_dir": "."}));
        lines.push(serde_json::json!({"event_type": "delegation", "event_id": format!("evt_e{i}"), "parent_id": "evt_1", "session_id": sid, "timestamp": 3, "delegation_id": format!("dlg_{i}"), "capsule": "loop", "version": "1", "outcome": "ok"}));
    }
    lines.push(serde_json::json!({"event_type": "session_end", "event_id": "evt_9", "parent_id": "evt_1", "session_id": sid, "timestamp": 4, "exit_status": "ok"}));
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let trace = dir.join("trace.jsonl");
    std::fs::write(&trace, text).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mur"))
        .args(["trace", "show", trace.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Read each file once: this ends at once (it used to run for 20^16 reads).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("mur trace show still reading a self-referencing trace after 20 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.matches("loop: ").count(), 20, "{stdout}");
}

#[test]
fn absurd_token_counts_add_up_saturating_with_a_note() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("big");
    std::fs::create_dir_all(&dir).unwrap();
    let sid = "ses_0193000000007000800000000000bbbb";
    let mut lines = vec![
        serde_json::json!({"event_type": "session_start", "event_id": "evt_1", "parent_id": null, "session_id": sid, "timestamp": 1, "capsule_name": "big", "capsule_version": "1"}),
    ];
    for i in 0..3 {
        // No provider sends these: near u64::MAX, three of them overflow a plain sum.
        lines.push(serde_json::json!({"event_type": "inference", "event_id": format!("evt_i{i}"), "parent_id": "evt_1", "session_id": sid, "timestamp": 2, "turn": i, "input_tokens": 18446744073709551000u64, "output_tokens": 9223372036854775000u64, "decision": "end_turn"}));
    }
    // No session_end: the totals are counted from the lines, from timestamps far apart.
    lines.push(serde_json::json!({"event_type": "tool_call", "event_id": "evt_t", "parent_id": "evt_1", "session_id": sid, "timestamp": i64::MAX, "turn": 0, "tool_name": "bash", "duration_ms": u64::MAX, "status": "ok"}));
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let trace = dir.join("trace.jsonl");
    std::fs::write(&trace, text).unwrap();
    let path = trace.to_str().unwrap();
    for view in ["show", "steps", "report"] {
        let out = mur(tmp.path(), &["trace", view, path]);
        assert_eq!(out.code, 0, "{view}: {}", out.stderr);
        assert!(!out.stderr.contains("panicked"), "{view}: {}", out.stderr);
    }
    let show = mur(tmp.path(), &["trace", "show", path]);
    assert!(
        show.stdout.contains("note:       token counts above 10^12"),
        "{}",
        show.stdout
    );
    let report = mur(tmp.path(), &["trace", "report", path]);
    assert!(
        report
            .stdout
            .contains("input:      18,446,744,073,709,551,615\n"),
        "{}",
        report.stdout
    );
    assert!(report
        .stdout
        .contains("note:       token counts above 10^12"));
}
