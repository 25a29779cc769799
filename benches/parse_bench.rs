//! Benchmark of the manifest and lock parsers on 1 MB inputs, through the real `mur` binary.
//!
//! Each case writes one input of about 1 MB, runs `mur doctor` (manifests) or `mur list` (the
//! lock) on it five times, and prints the median wall time and the command's peak resident
//! memory above that of the same command on a tiny input. Targets (issue 12): a 1 MB manifest
//! or lock parses in under 100 ms, and no input costs more than 64 MiB beyond the baseline.
//! Every case runs in a fresh child of a fresh helper process, so each peak is its own.
//! Run with `cargo bench --bench parse_bench`; a missed target exits 1.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const MUR: &str = env!("CARGO_BIN_EXE_mur");
const RUNS: usize = 5;

/// Runs `mur args` in `dir` once as this process's only child; prints its peak RSS in KiB.
fn helper(dir: &str, args: &[String]) {
    let status = Command::new(MUR)
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run mur");
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we own.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    println!("{} {}", status.code().unwrap_or(-1), usage.ru_maxrss);
}

/// (median wall time, peak RSS in KiB, exit code) of `mur args` in `dir`.
fn measure(dir: &Path, args: &[&str]) -> (Duration, u64, i32) {
    let mut times = Vec::new();
    let mut peak = 0;
    let mut code = 0;
    for _ in 0..RUNS {
        let start = Instant::now();
        let out = Command::new(std::env::current_exe().unwrap())
            .arg("--helper")
            .arg(dir)
            .args(args)
            .output()
            .expect("run the helper");
        times.push(start.elapsed());
        let text = String::from_utf8_lossy(&out.stdout);
        let mut it = text.split_whitespace();
        code = it.next().and_then(|c| c.parse().ok()).unwrap_or(-1);
        peak = peak.max(it.next().and_then(|k| k.parse().ok()).unwrap_or(0));
    }
    times.sort();
    (times[RUNS / 2], peak, code)
}

fn project(root: &Path, name: &str, manifest: &str, lock: Option<&str>) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("murmur.yaml"), manifest).unwrap();
    if let Some(lock) = lock {
        std::fs::write(dir.join("murmur.lock"), lock).unwrap();
    }
    dir
}

const HEAD: &str = "name: big\nversion: \"0.1.0\"\n";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--helper") {
        return helper(&args[1], &args[2..]);
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    const MB: usize = 1 << 20;

    // Manifests of about 1 MB, each shaped differently.
    let mut artifacts = format!("{HEAD}artifacts:\n");
    let mut i = 0;
    while artifacts.len() < MB {
        let _ = write!(
            artifacts,
            "  - name: acme/tool-{i}\n    version: \"1.0.{i}\"\n"
        );
        i += 1;
    }
    let mut allow = format!("{HEAD}capabilities:\n  shell:\n    allow: [");
    i = 0;
    while allow.len() < MB {
        let _ = write!(allow, "a-binary-named-{i:06}, ");
        i += 1;
    }
    allow.push_str("ls]\n");
    let prompt = format!(
        "{HEAD}metadata:\n  notes: \"{}\"\n",
        "All work and no play. ".repeat(MB / 22)
    );
    let mut nested = format!("{HEAD}metadata:\n");
    while nested.len() < MB {
        let _ = writeln!(
            nested,
            "  k{}: {}x{}",
            nested.len(),
            "[".repeat(90),
            "]".repeat(90)
        );
    }
    let mut lock = String::from("lock_version: 3\nartifacts:\n");
    i = 0;
    while lock.len() < MB {
        let _ = write!(lock, "  - name: acme/tool-{i}\n    resolved_version: \"1.0.{i}\"\n    sha256:\n      any: \"{:064x}\"\n    origin: runtime\n    session: ses_019ed2af76b57c42912b612f07dd4d51\n    owner_id: 42\n", i);
        i += 1;
    }

    let tiny = project(root, "tiny", HEAD, Some("lock_version: 3\nartifacts: []\n"));
    let cases = [
        (
            "manifest: 1 MB of artifacts entries",
            project(root, "artifacts", &artifacts, None),
            "doctor",
        ),
        (
            "manifest: 1 MB flow list in shell.allow",
            project(root, "allow", &allow, None),
            "doctor",
        ),
        (
            "manifest: 1 MB quoted string",
            project(root, "prompt", &prompt, None),
            "doctor",
        ),
        (
            "manifest: 1 MB of 90-deep flow nesting",
            project(root, "nested", &nested, None),
            "doctor",
        ),
        (
            "lock: 1 MB of pins (mur list)",
            project(root, "lock", HEAD, Some(&lock)),
            "list",
        ),
    ];
    let (base_doctor_t, base_doctor, _) = measure(&tiny, &["doctor"]);
    let (base_list_t, base_list, _) = measure(&tiny, &["list"]);
    println!(
        "baseline: mur doctor {base_doctor_t:.1?} {:.1} MiB; mur list {base_list_t:.1?} {:.1} MiB",
        base_doctor as f64 / 1024.0,
        base_list as f64 / 1024.0
    );
    let mut missed = false;
    for (label, dir, cmd) in &cases {
        let size = std::fs::metadata(dir.join(if *cmd == "list" {
            "murmur.lock"
        } else {
            "murmur.yaml"
        }))
        .unwrap()
        .len();
        let (t, peak, code) = measure(dir, &[cmd]);
        let base = if *cmd == "list" {
            base_list
        } else {
            base_doctor
        };
        let extra = peak.saturating_sub(base) as f64 / 1024.0;
        let ok = t < Duration::from_millis(100) && extra < 64.0;
        missed |= !ok;
        println!(
            "{label}: {:.2} MB, exit {code}, median {t:.1?}, peak {:.1} MiB (+{extra:.1} MiB){}",
            size as f64 / 1e6,
            peak as f64 / 1024.0,
            if ok { "" } else { "  MISSED" }
        );
    }
    if missed {
        std::process::exit(1);
    }
}
