//! `mur trace show` says whose token counts it prints: the provider's (as its reply reported
//! them) or the runtime's estimate (from the bytes sent and received), for sessions this
//! runtime wrote. The original's traces, which carry both, are in trace_views.rs.

mod common;

use common::*;

fn show_after(script: &str) -> String {
    let p = Project::new();
    p.write("murmur.yaml", &scripted_manifest("counter", ""));
    p.write("script.yaml", script);
    let run = p.mur(&["run", "--task", "count"]);
    assert!(run.status.success(), "{}", stderr(&run));
    let trace = p.sessions()[0].join("trace.jsonl");
    let show = mur()
        .args(["trace", "show", trace.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(show.status.success(), "{}", stderr(&show));
    stdout(&show)
}

#[test]
fn counts_the_provider_reported_are_labelled_as_its_own() {
    let out =
        show_after("turns:\n  - say: a\n    usage: {input_tokens: 1200, output_tokens: 34}\n");
    assert!(
        out.contains("\ntokens:     1,200 in / 34 out  (1,234 total, counted by the provider)\n"),
        "{out}"
    );
    assert!(
        out.contains("\n  turn 0  end_turn  1,200 in / 34 out\n"),
        "{out}"
    );
    assert!(!out.contains("provider:"), "{out}");
}

#[test]
fn estimates_are_marked_and_a_mixed_session_says_how_many_calls_were_estimated() {
    let out = show_after("turns:\n  - say: a\n");
    assert!(
        regex::Regex::new(
            r"\ntokens:     [0-9,]+ in / [0-9,]+ out  \([0-9,]+ total, estimated\)\n"
        )
        .unwrap()
        .is_match(&out),
        "{out}"
    );
    assert!(
        regex::Regex::new(r"\n  turn 0  end_turn  ~[0-9,]+ in / ~[0-9,]+ out\n")
            .unwrap()
            .is_match(&out),
        "{out}"
    );
    let mixed = show_after(
        "turns:\n  - call: [{tool: nothing, input: {}}]\n    usage: {input_tokens: 500, output_tokens: 20}\n  - say: done\n",
    );
    assert!(
        mixed.contains(" total, estimated on 1 of 2 model calls)\nprovider:   500 in / 20 out  (its own count, on 1 of 2 model calls)\n"),
        "{mixed}"
    );
    assert!(
        mixed.contains("\n  turn 0  tool_call  500 in / 20 out\n"),
        "{mixed}"
    );
    assert!(
        regex::Regex::new(r"\n  turn 1  end_turn  ~[0-9,]+ in / ~[0-9,]+ out\n")
            .unwrap()
            .is_match(&mixed),
        "{mixed}"
    );
}
