//! Live progress, as a user sees it: `mur run` under a real pseudo-terminal (openpty), its
//! output read from the terminal's other side. Piped runs print no progress (cli_color.rs and
//! every other test run piped).

mod common;

use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use common::*;

/// What the terminal showed so far, and whether the other side has closed.
#[derive(Default)]
struct Screen {
    bytes: Vec<u8>,
    closed: bool,
}

/// A command running on a pseudo-terminal (stdin, stdout and stderr all on it).
struct Pty {
    child: Child,
    screen: Arc<(Mutex<Screen>, Condvar)>,
}

/// Longest a test waits for something to appear (a failure bound, not a pause).
const PATIENCE: Duration = Duration::from_secs(60);

impl Pty {
    /// Run `cmd` on a new terminal, with `env` set after the colour variables are cleared.
    fn spawn(mut cmd: Command, env: &[(&str, &str)]) -> Pty {
        let (mut master, mut slave) = (-1, -1);
        let size = libc::winsize {
            ws_row: 50,
            ws_col: 160,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: openpty writes two descriptors into the ints we pass; the size is read only.
        let rc = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                &size,
            )
        };
        assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: both descriptors were just opened and are owned by nobody else.
        let (master, slave) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        cmd.stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave))
            .env("TERM", "xterm-256color")
            .env_remove("NO_COLOR")
            .env_remove("CLICOLOR_FORCE")
            .env_remove("RUST_LOG");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("spawn mur on the pty");
        // The Command still holds the slave's copies: drop them, so that the master reads EOF
        // (EIO) once mur and everything it started have closed the terminal.
        drop(cmd);
        let screen = Arc::new((Mutex::new(Screen::default()), Condvar::new()));
        let shared = screen.clone();
        std::thread::spawn(move || {
            let mut file = std::fs::File::from(master);
            let mut buf = [0u8; 4096];
            loop {
                match file.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let (m, cv) = &*shared;
                        m.lock().unwrap().bytes.extend_from_slice(&buf[..n]);
                        cv.notify_all();
                    }
                }
            }
            let (m, cv) = &*shared;
            m.lock().unwrap().closed = true;
            cv.notify_all();
        });
        Pty { child, screen }
    }

    /// Wait until the terminal has shown `text` (in its plain form).
    fn wait_for(&self, text: &str) -> String {
        let (m, cv) = &*self.screen;
        let deadline = Instant::now() + PATIENCE;
        let mut s = m.lock().unwrap();
        loop {
            let plain = plain(&s.bytes);
            if plain.contains(text) {
                return plain;
            }
            let now = Instant::now();
            assert!(
                now < deadline && !s.closed,
                "the terminal never showed {text:?}; it showed:\n{plain}"
            );
            s = cv.wait_timeout(s, deadline - now).unwrap().0;
        }
    }

    /// Wait for mur to exit and the terminal to close; the exit code and the raw bytes shown.
    fn finish(mut self) -> (Option<i32>, Vec<u8>) {
        let status = self.child.wait().unwrap();
        let (m, cv) = &*self.screen;
        let deadline = Instant::now() + PATIENCE;
        let mut s = m.lock().unwrap();
        while !s.closed {
            let now = Instant::now();
            assert!(now < deadline, "the terminal never closed");
            s = cv.wait_timeout(s, deadline - now).unwrap().0;
        }
        (status.code(), s.bytes.clone())
    }
}

/// The terminal's bytes without ANSI escapes and carriage returns.
fn plain(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => {
                // CSI: ESC [ params final-byte.
                if chars.peek() == Some(&'[') {
                    chars.next();
                    for d in chars.by_ref() {
                        if ('@'..='~').contains(&d) {
                            break;
                        }
                    }
                }
            }
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}

fn run_on_pty(p: &Project, args: &[&str]) -> Pty {
    let mut cmd = p.mur_cmd(args);
    cmd.env("HOME", p.path().join("home"));
    Pty::spawn(cmd, &[])
}

#[test]
fn a_run_on_a_terminal_shows_each_model_and_tool_call_and_its_status() {
    let p = Project::example("hello");
    let pty = run_on_pty(&p, &["run", "--task", "Say hello"]);
    let (code, bytes) = pty.finish();
    let shown = plain(&bytes);
    assert_eq!(code, Some(0), "{shown}");
    // Each model call: its turn, tokens (the scripted model reports none: estimated) and time.
    assert!(
        regex::Regex::new(
            r"turn 0 · model · ~[0-9,]+ in / ~[0-9,]+ out \(estimated\) · [0-9.]+m?s"
        )
        .unwrap()
        .is_match(&shown),
        "{shown}"
    );
    // Each tool call: name, its input in short, the exit code, the time.
    assert!(
        regex::Regex::new(r#"✓ bash  echo "hello from .* · exit 0 · [0-9.]+m?s"#)
            .unwrap()
            .is_match(&shown),
        "{shown}"
    );
    assert!(shown.contains("✓ ls  -1 · exit 0 · "), "{shown}");
    assert!(shown.contains("turn 2 · model · "), "{shown}");
    assert!(shown.contains("status:  ok"), "{shown}");
    // The header is still there, and the spinners are gone at the end: the status is last.
    assert!(shown.contains("session: ses_"), "{shown}");
    assert!(shown.trim_end().ends_with("status:  ok"), "{shown}");
    // A tty is coloured by default; nothing failed, so nothing is red.
    assert!(
        !String::from_utf8_lossy(&bytes).contains("\x1b[31m"),
        "{shown}"
    );
}

fn refusing_project() -> Project {
    let p = Project::new();
    p.write(
        "murmur.yaml",
        &scripted_manifest("refuser", "capabilities:\n  shell:\n    allow: [bash]\n"),
    );
    p.write(
        "script.yaml",
        "turns:\n  - call:\n      - tool: python3\n        input: {command: \"-c 1\"}\n      - tool: bash\n        input: {command: \"exit 3\"}\n  - say: done\n",
    );
    p
}

#[test]
fn a_refusal_and_a_failed_command_stand_out_in_red() {
    let p = refusing_project();
    let pty = run_on_pty(&p, &["run", "--task", "try"]);
    let (code, bytes) = pty.finish();
    let raw = String::from_utf8_lossy(&bytes).into_owned();
    let shown = plain(&bytes);
    assert_eq!(code, Some(0), "{shown}");
    assert!(
        shown.contains("✗ python3  -c 1 · refused: tool 'python3' is not declared"),
        "{shown}"
    );
    assert!(shown.contains("capabilities.shell.allow"), "{shown}");
    assert!(
        raw.contains("\x1b[31m✗ python3"),
        "the refusal is red: {raw:?}"
    );
    assert!(shown.contains("✗ bash  exit 3 · exit 3 · "), "{shown}");
    assert!(
        raw.contains("\x1b[31m✗ bash"),
        "the failed command is red: {raw:?}"
    );
    // The refusal is shown once: the kernel's warning log line is left to the progress.
    assert_eq!(shown.matches("✗ python3").count(), 1, "{shown}");
    assert!(!shown.contains("WARN"), "{shown}");
}

#[test]
fn colour_on_a_terminal_obeys_no_color_and_the_flag() {
    let p = refusing_project();
    let flag = ["--color", "never", "run", "--task", "try"];
    let plain_run = ["run", "--task", "try"];
    for (args, env) in [
        (&flag[..], &[][..]),
        (&plain_run[..], &[("NO_COLOR", "1")][..]),
    ] {
        let mut cmd = p.mur_cmd(args);
        cmd.env("HOME", p.path().join("home"));
        let (code, bytes) = Pty::spawn(cmd, env).finish();
        let shown = plain(&bytes);
        assert_eq!(code, Some(0), "{shown}");
        assert!(shown.contains("✗ python3"), "{shown}");
        assert!(
            !String::from_utf8_lossy(&bytes).contains("\x1b[31m"),
            "no red with {args:?} {env:?}: {shown}"
        );
    }
}

#[test]
fn quiet_on_a_terminal_prints_nothing_but_errors() {
    let p = refusing_project();
    let pty = run_on_pty(&p, &["run", "-q", "--task", "try"]);
    let (code, bytes) = pty.finish();
    assert_eq!(code, Some(0));
    assert_eq!(plain(&bytes), "", "{:?}", String::from_utf8_lossy(&bytes));
}

#[test]
fn delegations_show_as_a_tree_of_children_with_their_outcomes() {
    let p = Project::example_set_up("supervision");
    let pty = run_on_pty(&p, &["run", "--task", "Run the drills"]);
    let (_, bytes) = pty.finish();
    let shown = plain(&bytes);
    assert!(shown.contains("→ delegated to "), "{shown}");
    assert!(shown.contains("sub-capsules:"), "{shown}");
    assert!(
        regex::Regex::new(r"(?m)^  ✓ [^ \n]+ \([0-9a-f]{8}\) ok$")
            .unwrap()
            .is_match(&shown),
        "{shown}"
    );
    assert!(
        regex::Regex::new(r"(?m)^  ✗ [^ \n]+ \([0-9a-f]{8}\) crashed$")
            .unwrap()
            .is_match(&shown),
        "{shown}"
    );
}

#[test]
fn ctrl_c_says_what_the_run_is_waiting_for() {
    let p = Project::new();
    p.write(
        "murmur.yaml",
        &format!(
            "{}trace:\n  capture: content\n",
            // `sleep` is granted too: a contained bash may exec only granted binaries, and
            // without it the command fails at once (exit 126) and a Ctrl-C races its end.
            scripted_manifest(
                "sleeper",
                "capabilities:\n  shell:\n    allow: [bash, sleep]\n"
            )
        ),
    );
    p.write(
        "script.yaml",
        "turns:\n  - call:\n      - tool: bash\n        input: {command: \"sleep 60\"}\n  - say: done\n",
    );
    let pty = run_on_pty(&p, &["run", "--task", "wait"]);
    // If the command fails instead of running, the trace (content captured) says why.
    let why = || {
        p.sessions()
            .iter()
            .filter_map(|s| std::fs::read_to_string(s.join("trace.jsonl")).ok())
            .flat_map(|t| t.lines().map(str::to_string).collect::<Vec<_>>())
            .filter(|l| l.contains("\"tool_call\"") || l.contains("\"session_start\""))
            .collect::<Vec<_>>()
            .join("\n")
    };
    // The spinner says the command runs; then the user presses Ctrl-C.
    pty.wait_for("sleeper · turn 0 · running bash");
    // SAFETY: kill only sends a signal to the child we started.
    unsafe { libc::kill(pty.child.id() as i32, libc::SIGINT) };
    let (code, bytes) = pty.finish();
    let shown = plain(&bytes);
    assert!(
        shown.contains("Ctrl-C: canceling the run; waiting for sleeper (turn 0 · running bash) to stop and write their last trace lines (Ctrl-C again exits at once)"),
        "{shown}\n--- trace:\n{}",
        why()
    );
    assert!(shown.contains("status:  canceled"), "{shown}");
    assert_eq!(code, Some(1), "{shown}");
}

#[test]
fn plan_steps_show_one_line_each() {
    let p = Project::example("plan");
    let (code, bytes) = run_on_pty(&p, &["run", "--task", "Write a note"]).finish();
    let shown = plain(&bytes);
    assert_eq!(code, Some(0), "{shown}");
    assert!(shown.contains("plan survey · 5 steps"), "{shown}");
    assert!(
        regex::Regex::new(r"step kernel \(shell\) success · [0-9.]+m?s")
            .unwrap()
            .is_match(&shown),
        "{shown}"
    );
    assert!(shown.contains("step today (tool) success"), "{shown}");
    assert!(
        shown.contains("plan survey completed · 5 of 5 steps succeeded"),
        "{shown}"
    );
    assert!(!shown.contains("✗"), "{shown}");
}

#[test]
fn pulls_and_removals_show_as_they_happen() {
    let p = Project::new();
    p.write("murmur.yaml", &scripted_manifest("puller", ""));
    install_artifact(
        &p,
        "tool-greet",
        "name: tool-greet\nversion: 0.1.0\nruntime: tool\nimplementation: native\ndescription: A probe.\n",
        "tool-greet",
        "#!/bin/bash\nread -r _\necho hello\n",
    );
    std::fs::remove_file(p.path().join("murmur.lock")).unwrap();
    p.write(
        "murmur.yaml",
        &scripted_manifest(
            "puller",
            "capabilities:\n  shell:\n    allow: [bash]\n  install:\n    tool: [\"local/tool-*\"]\n    from: [stores]\n",
        ),
    );
    p.write(
        "script.yaml",
        "turns:\n  - call: [{tool: pull-artifact, input: {artifact: local/tool-greet}}]\n  - call: [{tool: tool-greet, input: {}}]\n  - call: [{tool: remove-artifact, input: {artifact: local/tool-greet}}]\n  - say: done\n",
    );
    let (code, bytes) = run_on_pty(&p, &["run", "--task", "pull"]).finish();
    let shown = plain(&bytes);
    assert_eq!(code, Some(0), "{shown}");
    assert!(
        shown.contains("↓ pulled local/tool-greet@0.1.0 (tool, from "),
        "{shown}"
    );
    assert!(shown.contains("tools now: +tool-greet"), "{shown}");
    assert!(shown.contains("✓ tool-greet  {} · ok · "), "{shown}");
    assert!(shown.contains("− removed local/tool-greet · "), "{shown}");
    assert!(shown.contains("tools now: −tool-greet"), "{shown}");
}

#[test]
fn a_failed_model_call_stands_out_and_the_error_follows_the_status() {
    let p = Project::new();
    p.write("murmur.yaml", &scripted_manifest("failer", ""));
    p.write(
        "script.yaml",
        "turns:\n  - error: \"the provider fell over\"\n",
    );
    let (code, bytes) = run_on_pty(&p, &["run", "--task", "try"]).finish();
    let raw = String::from_utf8_lossy(&bytes).into_owned();
    let shown = plain(&bytes);
    assert_eq!(code, Some(1), "{shown}");
    assert!(
        shown.contains("✗ turn 0 · model call failed: driver_error: the provider fell over"),
        "{shown}"
    );
    assert!(
        raw.contains("\x1b[31m✗ turn 0 · model call failed"),
        "{raw:?}"
    );
    assert!(shown.contains("✗ task failed (driver_error): "), "{shown}");
    // The spinners are gone before the status and the diagnostic are printed.
    let tail = &shown[shown.find("status:  failed").expect("status")..];
    assert!(
        tail.contains("error[E-RUN-040]: the task did not complete (failed)"),
        "{tail}"
    );
    assert!(!tail.contains("failer ·"), "{tail}");
}

#[test]
fn verbose_on_a_terminal_keeps_the_header_and_leaves_the_event_lines_to_the_progress() {
    let p = Project::example("hello");
    let (code, bytes) = run_on_pty(&p, &["run", "--task", "Say hello", "-v"]).finish();
    let shown = plain(&bytes);
    assert_eq!(code, Some(0), "{shown}");
    for line in [
        "workdir: ",
        "manifest: hello v0.1.0",
        "driver: mur-driver-script (scripted)",
    ] {
        assert!(shown.contains(line), "{line}: {shown}");
    }
    assert!(shown.contains("✓ ls  -1 · exit 0 · "), "{shown}");
    assert!(!shown.contains(" session_start capsule_name="), "{shown}");
    // -vv adds the debug logs, printed above the progress, not through it.
    let (code, bytes) = run_on_pty(&p, &["run", "--task", "Say hello", "-vv"]).finish();
    let shown = plain(&bytes);
    assert_eq!(code, Some(0), "{shown}");
    assert!(
        shown.contains(" session_start capsule_name=hello"),
        "{shown}"
    );
    assert!(shown.contains("✓ ls  -1 · exit 0 · "), "{shown}");
}

#[test]
fn a_large_fan_out_draws_a_bounded_tree_and_counts_the_rest() {
    let p = Project::example_set_up("delegation-tree");
    let calls: String = (0..60)
        .map(|i| format!("      - tool: delegate-task\n        input: {{capsule: critic, version: \"0.1.0\", task: \"Risks {i}.\"}}\n"))
        .collect();
    p.write(
        "script.yaml",
        &format!("turns:\n  - say: fan\n    call:\n{calls}  - say: waiting\n  - say: done\n"),
    );
    let (code, bytes) = run_on_pty(&p, &["run", "--task", "fan out"]).finish();
    let shown = plain(&bytes);
    assert_eq!(code, Some(0), "{shown}");
    let tree = &shown[shown.rfind("sub-capsules:").expect("tree")..];
    let rows = tree
        .lines()
        .filter(|l| l.starts_with("  ✓ critic ("))
        .count();
    assert_eq!(rows, 28, "{tree}");
    assert!(
        tree.contains("  … and 32 more; 60 of 60 sub-capsules ended ok\nstatus:  ok"),
        "{tree}"
    );
    // Past the first sub-capsules, the rest are one counted spinner, not sixty.
    assert!(shown.contains("48 more sub-capsules: "), "{shown}");
}
