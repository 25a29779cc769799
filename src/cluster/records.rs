//! A remote child's records on the parent: the copy of its trace, or the note that it has none.
//!
//! A remote child's trace is written on its node, as any session's is, and the node sends it
//! whole with the child's end; the parent writes it where a local child's trace would be
//! (`<parent records>/children/<ses>/trace.jsonl`), before the outcome reaches the parent, so
//! `mur trace show` of the root reads the whole tree. A child whose node was lost has no copy:
//! its folder gets [`INCOMPLETE_FILE`] saying so, which the tree view shows in its place.

use std::path::Path;

/// The note left in a lost child's records folder.
pub const INCOMPLETE_FILE: &str = "INCOMPLETE";

/// Write the copy of a remote child's trace (and, when the node kept it because it was too
/// large to send, the note saying where it is).
pub fn write_copy(records_dir: &Path, trace: &[u8], left_at: Option<&str>) -> std::io::Result<()> {
    std::fs::create_dir_all(records_dir)?;
    if let Some(at) = left_at {
        return std::fs::write(
            records_dir.join(INCOMPLETE_FILE),
            format!("the trace was too large to copy; it is on the node at {at}\n"),
        );
    }
    std::fs::write(records_dir.join("trace.jsonl"), trace)
}

/// Mark a lost node's child incomplete: what ran where, and why the trace is not here.
pub fn mark_incomplete(records_dir: &Path, why: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(records_dir)?;
    std::fs::write(records_dir.join(INCOMPLETE_FILE), format!("{why}\n"))
}

/// The note of an incomplete child's folder, if it has one.
pub fn incomplete_note(records_dir: &Path) -> Option<String> {
    let text = crate::files::read_text(&records_dir.join(INCOMPLETE_FILE), 64 * 1024).ok()?;
    Some(text.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_is_the_trace_and_a_lost_child_is_a_note() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        write_copy(&a, b"{}\n", None).unwrap();
        assert_eq!(std::fs::read(a.join("trace.jsonl")).unwrap(), b"{}\n");
        assert_eq!(incomplete_note(&a), None);
        let b = dir.path().join("b");
        mark_incomplete(&b, "node lost: n1").unwrap();
        assert_eq!(incomplete_note(&b).as_deref(), Some("node lost: n1"));
    }
}
