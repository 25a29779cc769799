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
    std::fs::write(&path, format!("{start}\n{}", line(MAX_LINE_BYTES))).unwrap();
    assert!(load(&path, Detail::Full).is_ok());
    std::fs::write(&path, format!("{start}\n{}", line(MAX_LINE_BYTES + 1))).unwrap();
    let err = load(&path, Detail::Full).unwrap_err();
    assert_eq!(err.code, "E-TRC-001");
    assert_eq!(
        err.message,
        format!("{}:2: line is longer than 16 MiB", path.display())
    );
}
