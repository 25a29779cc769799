//! Pull benchmark: a pull of a 1 MiB artifact from the project store (call to result), and
//! listing a pattern over a store of 1,000 artifacts. Real files, real zips, real lock writes.
//! Run with `cargo bench --bench pull_bench`.

use std::time::{Duration, Instant};

use mur::artifact::config::SourcesConfig;
use mur::artifact::payload::zip_entries;
use mur::artifact::{unpack, PullService, Store};
use mur::manifest::ArtifactName;
use mur_actors::registry::{ArtifactRequest, ArtifactSource, PullOutcome};
use serde_json::json;

fn tool(name: &str, version: &str, payload: Vec<u8>) -> Vec<u8> {
    let manifest = format!("name: {name}\nversion: \"{version}\"\nruntime: tool\nimplementation: native\ndescription: Benchmark tool {name}.\n");
    zip_entries(vec![
        ("murmur.yaml".into(), manifest.into_bytes(), false),
        (format!("bin/{name}"), payload, true),
    ])
    .unwrap()
}

/// 1 MiB that does not compress (xorshift), so the zip really is 1 MiB.
fn noise(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn put(store: &Store, bytes: &[u8]) {
    let p = unpack(bytes, "bench").unwrap();
    let name = ArtifactName::from_parts("murmur", p.manifest.name()).unwrap();
    store.put(&name, bytes, &p, None, None).unwrap();
}

fn stats(label: &str, mut samples: Vec<Duration>, target_ms: f64) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let median = ms(samples[samples.len() / 2]);
    let p95 = ms(samples[samples.len() * 95 / 100]);
    let mean = samples.iter().map(|d| ms(*d)).sum::<f64>() / samples.len() as f64;
    let verdict = if median <= target_ms {
        "within"
    } else {
        "OVER"
    };
    println!(
        "{label}: median {median:.2} ms, mean {mean:.2} ms, p95 {p95:.2} ms over {} runs (target ≤ {target_ms} ms: {verdict})",
        samples.len()
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("p");
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&project).unwrap();
    let grant = |block: &str| {
        let text = format!("name: b\nversion: \"0.1.0\"\ncapabilities:\n  install:\n{block}");
        mur::manifest::parse_str(&text)
            .unwrap()
            .0
            .capabilities
            .install
    };
    let sources = SourcesConfig {
        api_base: "http://127.0.0.1:9".into(),
        sources: vec![],
        murmur_token: None,
    };
    let store = Store::project(&project);

    // 1. Pull of a 1 MiB artifact from the project store.
    let big = tool("tool-big", "1.0.0", noise(1 << 20));
    println!("artifact size: {} bytes", big.len());
    put(&store, &big);
    let svc = PullService::new(
        grant("    tool: [\"murmur/tool-*\"]\n"),
        &project,
        &home,
        sources.clone(),
    );
    let mut samples = Vec::new();
    for i in 0..40 {
        let req = ArtifactRequest {
            session_id: format!("ses_{i:032x}"),
            records_dir: project.join(format!("workdir/{i}")),
            input: json!({"artifact": "murmur/tool-big"}),
        };
        let t = Instant::now();
        let out = rt.block_on(svc.pull(req)).unwrap();
        samples.push(t.elapsed());
        assert!(matches!(out, PullOutcome::Pulled(_)));
    }
    stats("pull 1 MiB from the project store", samples, 20.0);

    // 2. Listing a pattern over a store of 1,000 artifacts.
    for i in 0..1000 {
        put(
            &store,
            &tool(&format!("tool-n{i:04}"), "1.0.0", b"#!/bin/sh\n".to_vec()),
        );
    }
    let svc = PullService::new(
        grant("    tool: [\"murmur/tool-*\"]\n"),
        &project,
        &home,
        sources,
    );
    let mut samples = Vec::new();
    for _ in 0..30 {
        let req = ArtifactRequest {
            session_id: "ses_list".into(),
            records_dir: project.join("workdir/l"),
            input: json!({"artifact": "murmur/tool-*"}),
        };
        let t = Instant::now();
        let out = rt.block_on(svc.pull(req)).unwrap();
        samples.push(t.elapsed());
        let PullOutcome::Listing(v) = out else {
            panic!("not a listing")
        };
        assert_eq!(v["omitted"], 951);
    }
    stats(
        "list murmur/tool-* over 1,001 stored artifacts",
        samples,
        50.0,
    );
}
