//! The delegation tree: a session's delegations, each with what its child's own trace says.
//!
//! Children write separate traces (SPEC §9: `<parent records>/children/ses_<child>/`), linked
//! from the parent's `delegation_start` by `child_records_dir`. The tree reads each child's
//! trace (counters only) to show its capsule, status, duration and tokens, recursively. A child
//! whose trace is missing or unreadable does not fail the parent's view: its node says so.
//!
//! A trace is hostile input: its `child_records_dir` may point anywhere, back at itself or at
//! an ancestor. The walk reads each file once (by canonical path), reads at most
//! [`MAX_TRACES`] files in all, and shows a loop or the bound as the node's note.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::address::TRACE_FILE;
use super::summary::{self, Delegation, Detail, Summary};

/// How many levels of delegation the tree follows.
pub const MAX_DEPTH: usize = 16;

/// How many child traces one tree reads at most.
pub const MAX_TRACES: usize = 10_000;

/// What the walk has read so far.
struct Walk {
    seen: std::collections::HashSet<PathBuf>,
    read: usize,
}

impl Walk {
    /// Mark `path` read; the note to show instead when it was read before or the bound is hit.
    fn visit(&mut self, path: &Path) -> Result<(), String> {
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        if !self.seen.insert(real) {
            return Err(format!(
                "loop: {} is a trace this tree already shows; not read again",
                path.display()
            ));
        }
        if self.read >= MAX_TRACES {
            return Err(format!(
                "not read: the tree already read {MAX_TRACES} child traces"
            ));
        }
        self.read += 1;
        Ok(())
    }
}

/// One delegation and, when its trace could be read, the child session it started.
#[derive(Debug, Serialize)]
pub struct Node {
    /// The delegation as the parent recorded it.
    pub delegation: Delegation,
    /// The child's own trace, if read.
    pub child: Option<Child>,
    /// Why the child's trace could not be read (missing file, corrupt line).
    pub problem: Option<String>,
    /// The child's own delegations.
    pub children: Vec<Node>,
}

/// What a child's trace says about it.
#[derive(Debug, Serialize)]
pub struct Child {
    /// The child's trace file.
    pub trace: PathBuf,
    /// Capsule name.
    pub capsule: Option<String>,
    /// Capsule version.
    pub version: Option<String>,
    /// `session_end.exit_status`, `None` if it never ended.
    pub status: Option<String>,
    /// Wall time.
    pub duration_ms: Option<u64>,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Counted turns.
    pub turns: u64,
}

impl Node {
    /// Input/output tokens: the child's trace, else the parent's per-delegation usage.
    pub fn tokens(&self) -> Option<(u64, u64)> {
        match (&self.child, self.delegation.usage) {
            (Some(c), _) => Some((c.input_tokens, c.output_tokens)),
            (None, Some(u)) => Some((u.input_tokens, u.output_tokens)),
            _ => None,
        }
    }

    /// Duration: the child's trace, else the parent's `delegation.duration_ms`.
    pub fn duration_ms(&self) -> Option<u64> {
        self.child
            .as_ref()
            .and_then(|c| c.duration_ms)
            .or(self.delegation.duration_ms)
    }
}

/// Build the delegation tree below `summary`, reading child traces.
pub fn build(summary: &Summary) -> Vec<Node> {
    let mut walk = Walk {
        seen: Default::default(),
        read: 0,
    };
    // The root itself counts as read: a child pointing back at it is a loop.
    let _ = walk.visit(&summary.path);
    build_at(summary, 0, &mut walk)
}

fn build_at(summary: &Summary, depth: usize, walk: &mut Walk) -> Vec<Node> {
    let dir = summary.path.parent().unwrap_or(Path::new("."));
    summary
        .delegations
        .iter()
        .map(|d| node(d, dir, depth, walk))
        .collect()
}

fn node(d: &Delegation, parent_dir: &Path, depth: usize, walk: &mut Walk) -> Node {
    let mut n = Node {
        delegation: d.clone(),
        child: None,
        problem: None,
        children: Vec::new(),
    };
    let Some(path) = child_trace(d, parent_dir) else {
        return n;
    };
    if !path.is_file() {
        // A child whose node was lost (docs/cluster.md) left a note instead of a trace.
        let note = path
            .parent()
            .and_then(crate::cluster::records::incomplete_note);
        n.problem = Some(match note {
            Some(note) => format!("incomplete: {note}"),
            None => format!("child trace missing: {}", path.display()),
        });
        return n;
    }
    if let Err(note) = walk.visit(&path) {
        n.problem = Some(note);
        return n;
    }
    match summary::load(&path, Detail::Totals) {
        Ok(s) => {
            if depth + 1 < MAX_DEPTH {
                n.children = build_at(&s, depth + 1, walk);
            }
            n.child = Some(Child {
                trace: path,
                capsule: s.capsule,
                version: s.capsule_version,
                status: s.status,
                duration_ms: s.duration_ms,
                input_tokens: s.totals.input_tokens,
                output_tokens: s.totals.output_tokens,
                turns: s.totals.turns,
            });
        }
        Err(e) => n.problem = Some(format!("child trace unreadable: {}", e.message)),
    }
    n
}

/// Where a child's trace should be: `child_records_dir/trace.jsonl` (relative paths taken from
/// the parent's folder), else `<parent>/children/<child id>/trace.jsonl`. `None` when no child
/// ever ran (a refused delegation).
pub fn child_trace(d: &Delegation, parent_dir: &Path) -> Option<PathBuf> {
    let by_layout = d
        .child_session_id
        .as_ref()
        .map(|id| parent_dir.join("children").join(id).join(TRACE_FILE));
    let recorded = d.child_records_dir.as_ref().map(|r| {
        let r = Path::new(r);
        if r.is_absolute() {
            r.join(TRACE_FILE)
        } else {
            parent_dir.join(r).join(TRACE_FILE)
        }
    });
    match (recorded, by_layout) {
        (Some(r), _) if r.is_file() => Some(r),
        (_, Some(l)) if l.is_file() => Some(l),
        (Some(r), _) => Some(r),
        (None, l) => l,
    }
}
