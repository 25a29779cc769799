//! Shared helpers for end-to-end tests: temporary projects, running the real `mur` binary, and
//! normalising ids, ports and paths so outputs can be compared exactly.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

pub mod node;

/// The built `mur` binary.
pub fn mur() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mur"))
}

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A temporary project folder, optionally seeded with files.
pub struct Project {
    /// Kept alive for the test.
    pub dir: tempfile::TempDir,
}

impl Project {
    /// An empty project.
    pub fn new() -> Project {
        Project {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// An empty project on the disk the build is on (`CARGO_TARGET_TMPDIR`), for tests that
    /// need a real filesystem where `TMPDIR` may be a tmpfs.
    pub fn on_disk() -> Project {
        Project {
            dir: tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap(),
        }
    }

    /// A copy of `examples/<name>`.
    pub fn example(name: &str) -> Project {
        let p = Project::new();
        copy_dir(&repo().join("examples").join(name), p.path());
        p
    }

    /// A copy of `examples/<name>` after its `setup.sh` ran (with `MUR` set to this `mur`).
    pub fn example_set_up(name: &str) -> Project {
        Project::example(name).set_up()
    }

    /// This project with a copy of `examples/<name>` in it.
    pub fn with_example(self, name: &str) -> Project {
        copy_dir(&repo().join("examples").join(name), self.path());
        self
    }

    /// This project after its `setup.sh` ran (with `MUR` set to this `mur`).
    pub fn set_up(self) -> Project {
        let out = Command::new("bash")
            .arg("setup.sh")
            .current_dir(self.path())
            .env("MUR", env!("CARGO_BIN_EXE_mur"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
        self
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Write a file (parents created).
    pub fn write(&self, rel: &str, text: &str) -> &Self {
        let p = self.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
        self
    }

    /// Run `mur` with `args` in the project folder.
    pub fn mur(&self, args: &[&str]) -> Output {
        self.mur_cmd(args).output().unwrap()
    }

    /// `mur` with `args` in the project folder, to add environment before running it.
    pub fn mur_cmd(&self, args: &[&str]) -> Command {
        let mut c = mur();
        c.args(args).current_dir(self.path());
        c
    }

    /// The sessions' records folders (`workdir/.murmur/ses_*`: trace, out/, staged tools).
    pub fn sessions(&self) -> Vec<PathBuf> {
        list(&self.path().join("workdir/.murmur"))
    }

    /// The sessions' work folders (`workdir/ses_*`: where their commands run).
    pub fn work_folders(&self) -> Vec<PathBuf> {
        list(&self.path().join("workdir"))
            .into_iter()
            .filter(|p| p.file_name().unwrap() != ".murmur")
            .collect()
    }
}

/// Where `mur run --workdir <workdir>` keeps records when `HOME` is `home`.
pub fn records_home(home: &Path, workdir: &Path) -> PathBuf {
    home.join(".murmur/records")
        .join(workdir.strip_prefix("/").unwrap_or(workdir))
}

/// The entries of a folder, sorted (none when it does not exist).
pub fn list(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Copy a folder tree (skipping `workdir/`).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_name() == "workdir" {
            continue;
        }
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// Whether a process whose command line contains `marker` is alive.
pub fn alive(marker: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .map(|c| {
                String::from_utf8_lossy(&c)
                    .replace('\0', " ")
                    .contains(marker)
            })
            .unwrap_or(false)
    })
}

/// Stdout as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Replace session ids, other ids, ports and `root` with stable placeholders.
pub fn normalise(text: &str, root: &Path) -> String {
    let text = text.replace(&root.display().to_string(), "<ROOT>");
    let ids = regex::Regex::new(r"(?-u:\b)(ses|evt|tsk|ctx|dlg)_[0-9a-f]{32}(?-u:\b)").unwrap();
    let text = ids.replace_all(&text, "${1}_<ID>");
    let port = regex::Regex::new(r"localhost:[0-9]+").unwrap();
    port.replace_all(&text, "localhost:<PORT>").into_owned()
}

/// Run a tree to its end on a fresh Supervisor: the kernel test kit's runner.
#[allow(unused_imports)]
pub use mur_actors::testkit::run as run_tree;

/// Wait until the trace at `path` holds an `event_type` line (it is written as it happens);
/// fails the test after 60 s. A wait for an event, not a guess at how long it takes.
pub async fn wait_for_line(path: &Path, event_type: &str) {
    let needle = format!("\"event_type\":\"{event_type}\"");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if std::fs::read_to_string(path).is_ok_and(|t| t.contains(&needle)) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no {event_type} line in {} after 60 s",
            path.display()
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

/// A text no other process's command line holds: this process's id and the time in ns (for
/// [`processes_holding`] and [`commands_holding`]).
pub fn unique_marker() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

/// Live processes whose command line holds `marker` (a command, and a copy of it that has
/// forked and not yet exec'd: a shell's subshell has the same command line).
pub fn processes_holding(marker: &str) -> usize {
    holding(marker).len()
}

/// Commands whose command line holds `marker`: [`processes_holding`] less the forks of one
/// (those whose parent holds it too), so a shell looping over `sleep` counts once.
pub fn commands_holding(marker: &str) -> usize {
    let pids = holding(marker);
    pids.iter()
        .filter(|(_, parent)| !pids.iter().any(|(p, _)| p == parent))
        .count()
}

/// `(pid, parent pid)` of the live processes whose command line holds `marker`.
fn holding(marker: &str) -> Vec<(u32, u32)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            if !String::from_utf8_lossy(&cmdline).contains(marker) {
                return None;
            }
            // `pid (comm) state ppid ...`: comm may hold spaces, so read after its `)`.
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let parent = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            Some((pid, parent))
        })
        .collect()
}

/// The lines of a trace file as JSON.
pub fn trace(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The event types of a trace, in order.
pub fn types(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .map(|l| l["event_type"].as_str().unwrap().to_string())
        .collect()
}

/// A minimal manifest on the scripted model with the given extra YAML under `capabilities:`.
pub fn scripted_manifest(name: &str, capabilities: &str) -> String {
    format!(
        "name: {name}\nversion: \"0.1.0\"\nartifacts:\n  - name: mur/driver-script\n    version: \"0.1.0\"\n    runtime: driver\n    config:\n      script: script.yaml\n{capabilities}inference:\n  transport: http\n  model: scripted\n  driver:\n    artifact: mur/driver-script\n"
    )
}

/// Pack and install a native tool (or hook) whose entrypoint is `script`.
pub fn install_artifact(p: &Project, dir: &str, manifest: &str, bin: &str, script: &str) {
    p.write(&format!("{dir}/murmur.yaml"), manifest);
    let path = format!("{dir}/bin/{bin}");
    p.write(&path, script);
    std::fs::set_permissions(
        p.path().join(&path),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let zip = format!("{dir}.mur.zip");
    let out = p.mur(&["build", dir, "-o", &zip]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = p.mur(&["install", &format!("./{zip}")]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// A capsule `name` on the Anthropic driver at `endpoint` (key `${ANTHROPIC_API_KEY}`), with
/// `capabilities.shell.allow: [<shell>]` and `trace.capture: content`: what replay and resume
/// record from.
pub fn anthropic_capsule(name: &str, endpoint: &str, shell: &str) -> String {
    format!(
        "name: {name}\nversion: \"0.1.0\"\nartifacts:\n  - name: murmur/driver-anthropic\n    version: \"0.19.0\"\n    runtime: driver\n    gateway:\n      endpoint: {endpoint}\n      api_key: ${{ANTHROPIC_API_KEY}}\ncapabilities:\n  shell:\n    allow: [{shell}]\ninference:\n  transport: http\n  model: claude-sonnet-5\n  driver:\n    artifact: murmur/driver-anthropic\ntrace:\n  capture: content\n"
    )
}

/// An Anthropic reply calling `tool` with `input` (call id `id`).
pub fn anthropic_call(id: &str, tool: &str, input: Value) -> fake_provider::Reply {
    fake_provider::Reply::json(serde_json::json!({
        "id": format!("msg_{id}"), "type": "message", "role": "assistant", "model": "claude-sonnet-5",
        "content": [{"type": "tool_use", "id": id, "name": tool, "input": input}],
        "stop_reason": "tool_use", "usage": {"input_tokens": 100, "output_tokens": 10}
    }))
}
