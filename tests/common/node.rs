//! A `mur node` process for the cluster tests.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

use super::{list, mur};

/// A `mur node` on 127.0.0.1:0, killed when dropped.
pub struct Node {
    /// The process.
    pub child: Child,
    /// Its name (the first line's).
    pub name: String,
    /// Where it listens.
    pub addr: String,
    /// Its `--dir`.
    pub dir: PathBuf,
}

impl Node {
    /// Start one with `cookie`, its folder `home/label`.
    pub fn start(home: &Path, label: &str, cookie: &str) -> Node {
        Node::start_with(home, label, cookie, &[])
    }

    /// The same with more flags.
    pub fn start_with(home: &Path, label: &str, cookie: &str, extra: &[&str]) -> Node {
        let dir = home.join(label);
        let mut child = mur()
            .args([
                "node",
                "--listen",
                "127.0.0.1:0",
                "--capacity",
                "8",
                "--dir",
            ])
            .arg(&dir)
            .args(extra)
            .env("MUR_CLUSTER_COOKIE", cookie)
            .env("HOME", home)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let re =
            regex::Regex::new(r"^node: ([^ \n]+) listening on (127\.0\.0\.1:[0-9]+)\n$").unwrap();
        let caps = re
            .captures(&first)
            .unwrap_or_else(|| panic!("first line: {first:?}"));
        Node {
            name: caps[1].to_string(),
            addr: caps[2].to_string(),
            dir,
            child,
        }
    }

    /// Hosted sessions that have a trace file on this node.
    pub fn sessions_started(&self) -> usize {
        list(&self.dir.join("sessions"))
            .iter()
            .filter(|s| s.join("trace.jsonl").is_file())
            .count()
    }

    /// `kill -9` it.
    pub fn kill9(&mut self) {
        // SAFETY: kill only signals the child process this test started.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

/// A parent in this process, its project at `project`, joined to the node at `addr` with
/// `cookie`. One per test process: each join starts its own cluster server, and two servers
/// number their node sessions alike, so one could find the other's node.
pub async fn join(addr: &str, cookie: &str, project: &Path) -> mur::cluster::connect::Joined {
    mur::cluster::connect::join(
        &[addr.to_string()],
        cookie.into(),
        std::time::Duration::from_secs(5),
        None,
        project,
    )
    .await
    .unwrap()
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
