//! What containment costs per command: `cargo bench --bench contain_bench`.
//!
//! Runs `true` (a plan-style argv) and `bash -c true` (a shell tool call) through the real
//! `ShellExecutor`, contained by the policy `mur run` decides for a capsule granting
//! `[bash, true]` and not contained at all, interleaved in one run so both see the same machine.
//! Prints p50/p99 of each and the difference. Target: containment adds at most 1 ms p50.
//! Set `MUR_BENCH_ITERS` for more or fewer commands per case (default 300).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mur::contain::{decide, Sandbox};
use mur::tools::shell::ShellExecutor;
use mur_actors::tool::{ExecRequest, ToolDecl, ToolExecutor, ToolKind, ToolOrigin};

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn contained(dir: &Path, level: Option<mur::contain::Level>) -> ShellExecutor {
    let manifest =
        "name: bench\nversion: \"0.1.0\"\ncapabilities:\n  shell:\n    allow: [bash, \"true\"]\n";
    std::fs::write(dir.join("murmur.yaml"), manifest).unwrap();
    let loaded = mur::manifest::load(&dir.join("murmur.yaml")).unwrap();
    let (work, records) = (dir.join("work"), dir.join("records"));
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(records.join("tools")).unwrap();
    let d = decide::decide(&loaded.manifest, &loaded.path, &work, &records, level).unwrap();
    println!(
        "contained: declared {}, achieved {}",
        d.policy.declared.as_str(),
        d.policy.achieved.as_str()
    );
    ShellExecutor {
        deadline: Duration::from_secs(30),
        sandbox: Arc::new(Sandbox::new(d.policy, work, dir.join("scratch"))),
    }
}

fn bash_call(dir: &Path) -> ExecRequest {
    ExecRequest {
        session_id: "ses_bench".into(),
        tool: Arc::new(ToolDecl {
            name: "bash".into(),
            full_name: None,
            version: "0.0.0".into(),
            description: String::new(),
            input_schema: serde_json::json!({}),
            kind: ToolKind::Shell {
                binary: "bash".into(),
            },
            origin: ToolOrigin::Provided,
        }),
        input: serde_json::json!({"command": "true"}),
        workdir: dir.join("work"),
        records_dir: dir.join("records"),
        trace: std::sync::Arc::new(|_| {}),
    }
}

async fn time(exec: &ShellExecutor, dir: &Path, bash: bool) -> f64 {
    let start = Instant::now();
    if bash {
        let out = exec.execute(bash_call(dir)).await.unwrap();
        assert!(out.text.contains("Exit code: 0"), "{}", out.text);
    } else {
        let run = exec
            .run_argv(vec!["true".into()], dir.join("work"), dir.join("records"))
            .await
            .unwrap();
        assert_eq!(run.exit_code, 0, "{}", run.stderr);
    }
    start.elapsed().as_secs_f64() * 1e6
}

fn report(name: &str, mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let p50 = pct(&v, 0.5);
    println!(
        "  {name:<28} p50 {:>8.0} µs   p99 {:>8.0} µs",
        p50,
        pct(&v, 0.99)
    );
    p50
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let iters: usize = std::env::var("MUR_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let host = mur::contain::host::host();
    println!(
        "host: Landlock ABI {}, namespaces {:?}, seccomp {}",
        host.landlock_abi, host.namespaces, host.seccomp
    );
    // What a session pays at launch to decide its containment (every delegated child does).
    {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let _ = contained(dir, None);
        let loaded = mur::manifest::load(&dir.join("murmur.yaml")).unwrap();
        let n = 2000;
        let start = Instant::now();
        for _ in 0..n {
            let d = decide::decide(
                &loaded.manifest,
                &loaded.path,
                &dir.join("work"),
                &dir.join("records"),
                None,
            )
            .unwrap();
            std::hint::black_box(Sandbox::new(
                d.policy,
                dir.join("work"),
                dir.join("scratch"),
            ));
        }
        println!(
            "decide + sandbox per session: {:.1} µs",
            start.elapsed().as_secs_f64() * 1e6 / n as f64
        );
    }
    for level in [None, Some(mur::contain::Level::Sealed)] {
        if level.is_some() && !host.can_seal() {
            continue;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let boxed = contained(dir, level);
        let bare = ShellExecutor {
            deadline: Duration::from_secs(30),
            sandbox: Arc::new(Sandbox::uncontained(dir.join("work"))),
        };
        for bash in [false, true] {
            // Warm up both paths (page cache, the ruleset, the seccomp programs).
            for _ in 0..10 {
                time(&boxed, dir, bash).await;
                time(&bare, dir, bash).await;
            }
            let (mut c, mut u) = (Vec::new(), Vec::new());
            for _ in 0..iters {
                c.push(time(&boxed, dir, bash).await);
                u.push(time(&bare, dir, bash).await);
            }
            let what = if bash { "bash -c true" } else { "true" };
            println!("{what} ({iters} commands each):");
            let pc = report("contained", c);
            let pu = report("not contained", u);
            println!("  containment adds            p50 {:>8.0} µs", pc - pu);
        }
    }
}
