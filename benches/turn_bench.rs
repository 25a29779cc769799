//! Runtime overhead per turn, the whole loop: `cargo bench --bench turn_bench`.
//!
//! A real session (Supervisor, Session, Dispatcher, trace on disk) talks to the
//! fake provider on loopback through the real OpenAI driver (Chat Completions, JSON replies).
//! Each turn the model calls a tool the capsule does not have (the refusal needs no subprocess,
//! so no tool's own time is counted) and the next turn follows. Per turn, the overhead is the
//! loop's own time (from one reply's arrival to the next request's start: trace lines, dispatch,
//! history) plus the driver's time on the call less the server's own time for the request.
//!
//! The records go to `/dev/shm` when it exists (the runtime's own figure; `MUR_BENCH_DISK=1`
//! puts them under `TMPDIR`).
//!
//! A turn must cost the same late in a session as early: the figures of a 50-turn and a
//! 300-turn session are compared (target: p50 at 300 / p50 at 50 ≤ 1.2, and ≤ 30 µs of overhead
//! per turn), and so are the first and last 50 turns of the 300-turn one. The sessions run
//! `BENCH_ROUNDS` times (default 5), alternating, and the median of each figure is reported, so
//! one noisy run on a shared machine does not decide. The floor, a bare POST of the session's
//! median body through the same client to the same server, is measured right after each
//! 300-turn session, and the runtime's own figure is each session's p50 less its own floor
//! (this VM's loopback drifts by tens of µs within minutes). The last 50 turns send bodies
//! several times the first 50's, so the floor is also taken at those two sizes, and the
//! runtime's own growth is printed: the last 50 turns' p50 less its floor, minus the same for
//! the first 50. The fake provider reads every body but
//! neither parses nor keeps it ([`FakeProvider::keep_bodies`]): parsed and kept, 300 turns of
//! bodies cost the server ~0.8 ms a request at the end and grow the process by ~100 MB, and
//! part of that shows up in the client's figures (fresh pages, a colder cache on shared cores)
//! rather than in the server's netted-out time.

#[path = "support/turns.rs"]
mod turns;

use mur_actors::spec::Capture;
use turns::{median, Figures, Runtimes};

fn main() {
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(5)
        .max(1);
    let runtimes = Runtimes::new();
    // The session's records go to `/dev/shm` when there is one: the runtime's own figure. On
    // this VM's ext4, soon after another bench had deleted tens of thousands of files, the
    // 50-turn p50 measured three times what it was on /dev/shm in the same minutes
    // (docs/architecture.md, "The disk, measured"). `MUR_BENCH_DISK=1` keeps them under
    // `TMPDIR`.
    let shm = std::path::Path::new("/dev/shm");
    let dir = if std::env::var_os("MUR_BENCH_DISK").is_none() && shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .unwrap();
    println!("session records in {}", dir.path().display());
    let (mut short, mut long, mut floors, mut growth) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        short.push(runtimes.run(50, dir.path(), Capture::Meta));
        let session = runtimes.run(300, dir.path(), Capture::Meta);
        // The transport's own cost, measured the same way right after the session (this VM's
        // loopback drifts by tens of µs within minutes), with bodies of the session's median
        // size: what a turn would cost if the runtime did nothing. Then at the sizes of its
        // first and last 50 bodies: how much of the later turns' extra cost is the transport
        // carrying bigger bodies, not the runtime.
        let provider = runtimes.provider.handle().clone();
        let floor = |len| {
            runtimes
                .session
                .block_on(turns::transport_floor(300, len, &provider))
        };
        floors.push(floor(session.body_len));
        let (early, late) = (floor(session.first_body_len), floor(session.last_body_len));
        growth.push((session.last - late) - (session.first - early));
        long.push(session);
    }
    for (turns, runs) in [(50, &short), (300, &long)] {
        let fig = |f: fn(&Figures) -> f64| median(runs.iter().map(f).collect());
        println!(
            "{turns} turns: runtime overhead per turn p50 {:.0} µs, p99 {:.0} µs (of which the loop itself p50 {:.0} µs; the rest is the driver's HTTP and JSON work); median of {rounds} runs",
            fig(|f| f.p50),
            fig(|f| f.p99),
            fig(|f| f.loop_p50),
        );
    }
    let p50 = |runs: &[Figures]| median(runs.iter().map(|f| f.p50).collect());
    let (at_50, at_300) = (p50(&short), p50(&long));
    let first = median(long.iter().map(|f| f.first).collect());
    let last = median(long.iter().map(|f| f.last).collect());
    let (early_len, late_len) = (
        median(long.iter().map(|f| f.first_body_len as f64).collect()),
        median(long.iter().map(|f| f.last_body_len as f64).collect()),
    );
    println!(
        "p50 at 300 turns / p50 at 50 turns = {:.2} (target ≤ 1.2); within the 300-turn session, last 50 turns / first 50 = {:.2} ({last:.0} µs / {first:.0} µs; bodies {:.0} KB / {:.0} KB); the runtime's own, last 50 less first 50, each less the floor at its body size: {:+.0} µs (median of {rounds})",
        at_300 / at_50,
        last / first,
        late_len / 1000.0,
        early_len / 1000.0,
        median(growth),
    );
    let body_len = median(long.iter().map(|f| f.body_len as f64).collect()) as usize;
    // The runtime's own: each session less the floor measured beside it, then the median.
    let own = median(long.iter().zip(&floors).map(|(f, fl)| f.p50 - fl).collect());
    let spread = |v: Vec<f64>| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        format!("{:.0}–{:.0} µs", lo, hi)
    };
    println!(
        "overhead per turn p50 at 300 turns {:.3} ms; floor (a bare POST of the median body, {body_len} bytes, through the same client to the same server, net of the server, right after each session) {:.3} ms; the runtime's own {:.3} ms (target ≤ 0.03 ms; each session less its floor, median of {rounds}: {})",
        at_300 / 1000.0,
        median(floors.clone()) / 1000.0,
        own / 1000.0,
        spread(long.iter().zip(&floors).map(|(f, fl)| f.p50 - fl).collect()),
    );
}
