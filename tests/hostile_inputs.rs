//! Every input a fuzzer ever found, replayed through the parser it broke.
//!
//! `tests/hostile/<target>/` holds the inputs, one file each, named after what they do; the
//! folder name is the fuzz target (`fuzz/fuzz_targets/<target>.rs`) and the `mur::hostile`
//! function it calls. Each input must run to its end without a panic; the functions also check
//! what the parsers write back (a lock round trip, a minted handle). The fuzz corpus is seeded
//! from the same folders, so the fuzzers start from every known bad input too.

use std::path::{Path, PathBuf};

fn inputs(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/hostile")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} holds no inputs", dir.display());
    files
}

fn replay(target: &str, run: fn(&[u8])) {
    for file in inputs(target) {
        let bytes = std::fs::read(&file).unwrap();
        if std::panic::catch_unwind(|| run(&bytes)).is_err() {
            panic!("{} broke the {target} parser", file.display());
        }
    }
}

#[test]
fn manifests() {
    replay("manifest", mur::hostile::manifest);
}

#[test]
fn locks() {
    replay("lock", mur::hostile::lock);
}

#[test]
fn trace_lines() {
    replay("trace_lines", mur::hostile::trace_lines);
}

#[test]
fn trace_files() {
    replay("trace_file", mur::hostile::trace_file);
}

#[test]
fn plans() {
    replay("plan", mur::hostile::plan);
}

#[test]
fn archives() {
    replay("archive", mur::hostile::archive);
}

#[test]
fn scripts() {
    replay("script", mur::hostile::script);
}

#[test]
fn replies() {
    replay("reply", mur::hostile::reply);
}

#[test]
fn peer_handles() {
    replay("peer", mur::hostile::peer);
}
