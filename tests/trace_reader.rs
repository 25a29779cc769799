//! The reader against traces cut at every byte: what a killed or still-running writer leaves.
//! Every cut must read (the torn last line skipped) or fail with a diagnostic — never panic.

mod trace_support;

use mur::trace::summary::{load, Detail};

#[test]
fn a_trace_cut_anywhere_reads_up_to_the_cut() {
    let full =
        trace_support::fixture("pull/workdir/ses_019ed2af76b57c42912b612f07dd4d51/trace.jsonl");
    let bytes = std::fs::read(&full).unwrap();
    let first_line_end = bytes.iter().position(|&b| b == b'\n').unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("trace.jsonl");
    let complete = load(&full, Detail::Full).unwrap();
    let mut last_turns = 0;
    for cut in 0..=bytes.len() {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        match load(&path, Detail::Full) {
            Ok(s) => {
                assert!(
                    cut >= first_line_end,
                    "cut {cut} read without a whole first line"
                );
                assert_eq!(s.session_id, complete.session_id);
                // Turns only grow as the cut moves on, and never past the whole trace.
                assert!(s.counted.turns >= last_turns && s.counted.turns <= complete.counted.turns);
                last_turns = s.counted.turns;
                // Torn exactly when the text after the last newline is not a whole JSON object
                // (a line cut just before its newline is complete and reads).
                let tail_start = bytes[..cut]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |i| i + 1);
                let tail = &bytes[tail_start..cut];
                let torn =
                    !tail.is_empty() && serde_json::from_slice::<serde_json::Value>(tail).is_err();
                assert_eq!(s.torn_last_line, torn, "cut {cut}");
            }
            Err(d) => {
                assert!(cut < first_line_end, "cut {cut}: {d}");
                assert_eq!(d.code, "E-TRC-001");
                let expected = if cut == 0 {
                    "trace file is empty (incomplete or zero-event session)"
                } else {
                    "no valid lines (its only line is cut off or not a JSON trace event)"
                };
                assert!(d.message.ends_with(expected), "cut {cut}: {}", d.message);
            }
        }
    }
    assert_eq!(last_turns, 6);
}

#[test]
fn a_line_longer_than_the_cap_is_refused_before_it_is_held() {
    use mur::trace::reader::MAX_LINE_BYTES;
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("trace.jsonl");
    let start = r#"{"event_type":"session_start","event_id":"evt_1","parent_id":null,"session_id":"ses_0193000000007000800000000000cccc","timestamp":1,"capsule_name":"big","capsule_version":"1"}"#;
    // A second line of exactly the cap (with its newline) reads; one byte more is refused.
    let line = |len: u64| {
        let head = r#"{"event_type":"note","event_id":"evt_2","x":""#;
        let pad = len as usize - head.len() - 3;
        format!("{head}{}\"}}\n", "a".repeat(pad))
    };
    // Read on one thread (`Full`) and, the file being this large, on two (`Totals`).
    std::fs::write(&path, format!("{start}\n{}", line(MAX_LINE_BYTES))).unwrap();
    assert!(load(&path, Detail::Full).is_ok());
    assert!(load(&path, Detail::Totals).is_ok());
    std::fs::write(&path, format!("{start}\n{}", line(MAX_LINE_BYTES + 1))).unwrap();
    for detail in [Detail::Full, Detail::Totals] {
        let err = load(&path, detail).unwrap_err();
        assert_eq!(err.code, "E-TRC-001");
        assert_eq!(
            err.message,
            format!("{}:2: line is longer than 16 MiB", path.display())
        );
    }
}

/// Plain lines are taken apart by the reader's own scanner and the others by serde_json; the
/// two must read the same. Every fixture and conformance trace reads the same as its copy whose
/// keys are all written with an escape (which the scanner leaves to serde), at every detail
/// level, and every view prints the same for both.
#[test]
fn plain_and_escaped_lines_read_the_same() {
    let traces = [
        trace_support::fixture("pull/workdir/ses_019ed2af76b57c42912b612f07dd4d51/trace.jsonl"),
        trace_support::fixture("failed/workdir/ses_0193a1b2d0007000800000000000f00f/trace.jsonl"),
        trace_support::fixture(
            "delegation/workdir/ses_0193a1b2c3d47000800000000000a001/trace.jsonl",
        ),
        trace_support::conformance("upstream-basic.trace.jsonl"),
        trace_support::conformance("upstream-pull.trace.jsonl"),
    ];
    let tmp = tempfile::tempdir().unwrap();
    let session = tmp.path().join("ses_0193000000007000800000000000eeee");
    std::fs::create_dir(&session).unwrap();
    let path = session.join("trace.jsonl");
    // `"key":` as `"\u006bey":`: the same key to serde, left to it by the scanner.
    let key = regex::Regex::new(r#""([a-z])([a-z_]*)":"#).unwrap();
    for trace in &traces {
        let plain = std::fs::read_to_string(trace).unwrap();
        let escaped = key
            .replace_all(&plain, |c: &regex::Captures| {
                format!("\"\\u{:04x}{}\":", c[1].as_bytes()[0], &c[2])
            })
            .into_owned();
        assert_ne!(plain, escaped);
        let read = |text: &str| {
            std::fs::write(&path, text).unwrap();
            let summaries: Vec<String> = [Detail::Totals, Detail::Turns, Detail::Full]
                .into_iter()
                .map(|detail| serde_json::to_string(&load(&path, detail).unwrap()).unwrap())
                .collect();
            let p = path.to_str().unwrap();
            let views: Vec<String> = [
                &["trace", "show", p][..],
                &["trace", "steps", "-v", p],
                &["trace", "report", "--json", p],
                &["trace", "report", p],
                &["trace", "diff", p, p],
            ]
            .iter()
            .map(|args| trace_support::mur(tmp.path(), args).stdout)
            .collect();
            (summaries, views)
        };
        assert_eq!(read(&plain), read(&escaped), "{}", trace.display());
    }
}
