//! A remote child's records on the parent: the copy of its trace, or the note that it has none.
//!
//! A remote child's trace is written on its node, as any session's is, and the node sends it
//! whole with the child's end; the parent writes it where a local child's trace would be
//! (`<parent records>/children/<ses>/trace.jsonl`), before the outcome reaches the parent, so
//! `mur trace show` of the root reads the whole tree. A child whose node was lost has no copy:
//! its folder gets [`INCOMPLETE_FILE`] saying so, which the tree view shows in its place.

use std::path::{Path, PathBuf};

use super::wire::TracePart;

/// The note left in a lost child's records folder.
pub const INCOMPLETE_FILE: &str = "INCOMPLETE";

/// Write the copies of a remote child's traces under its records folder: `parts` say where
/// each goes and how many of `bytes` are its, in order (the child's own `trace.jsonl`, then
/// `children/<ses>/…/trace.jsonl` of the sessions it delegated to on its node). When the node
/// kept them because they were too large to send, the note saying where they are instead.
/// A part whose path is not such a trace path, or whose length runs past `bytes`, is refused
/// before anything is written: a node writes nowhere else on the parent's disk.
pub fn write_copies(
    records_dir: &Path,
    parts: &[TracePart],
    bytes: &[u8],
    left_at: Option<&str>,
) -> std::io::Result<()> {
    if let Some(at) = left_at {
        let why = format!("the trace was too large to copy; it is on the node at {at}");
        return mark_incomplete(records_dir, &why);
    }
    let mut pieces = Vec::with_capacity(parts.len());
    let mut rest = bytes;
    for part in parts {
        let rel = trace_path(&part.path).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("the node sent a trace for {:?}, which is not a trace path of the child's records", part.path),
            )
        })?;
        let len = usize::try_from(part.len).unwrap_or(usize::MAX);
        if len > rest.len() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "the node sent fewer bytes than its trace list says ({} for {:?})",
                    part.len, part.path
                ),
            ));
        }
        let (piece, tail) = rest.split_at(len);
        pieces.push((rel, piece));
        rest = tail;
    }
    for (rel, piece) in pieces {
        // `rel` ends with the file name: its folder is inside `records_dir`, or that itself.
        let path = records_dir.join(rel);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, piece)?;
    }
    Ok(())
}

/// `path` as a relative path under a child's records, if it is `trace.jsonl` or
/// `children/<ses_…>/…/trace.jsonl`: session ids only, never `..`, `/` or anything else.
fn trace_path(path: &str) -> Option<PathBuf> {
    let mut words: Vec<&str> = path.split('/').collect();
    if words.pop()? != "trace.jsonl" || words.len() % 2 != 0 {
        return None;
    }
    for pair in words.chunks(2) {
        let id = pair[1].strip_prefix("ses_")?;
        let plain = !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric());
        if pair[0] != "children" || !plain {
            return None;
        }
    }
    Some(PathBuf::from(path))
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
        let part = |path: &str, len: u64| TracePart {
            path: path.into(),
            len,
        };
        let parts = [
            part("trace.jsonl", 3),
            part("children/ses_01ab/trace.jsonl", 4),
        ];
        write_copies(&a, &parts, b"{}\n{1}\n", None).unwrap();
        assert_eq!(std::fs::read(a.join("trace.jsonl")).unwrap(), b"{}\n");
        assert_eq!(
            std::fs::read(a.join("children/ses_01ab/trace.jsonl")).unwrap(),
            b"{1}\n"
        );
        assert_eq!(incomplete_note(&a), None);
        let b = dir.path().join("b");
        mark_incomplete(&b, "node lost: n1").unwrap();
        assert_eq!(incomplete_note(&b).as_deref(), Some("node lost: n1"));
    }

    #[test]
    fn a_node_writes_nothing_outside_the_child_s_traces() {
        let dir = tempfile::tempdir().unwrap();
        let c = dir.path().join("c");
        for bad in [
            "../trace.jsonl",
            "children/../../trace.jsonl",
            "/etc/trace.jsonl",
            "children/ses_1/result.txt",
            "out/trace.jsonl",
            "children/ses_a.b/trace.jsonl",
            "children/ses_/trace.jsonl",
            "children//trace.jsonl",
            "",
        ] {
            let parts = [TracePart {
                path: bad.into(),
                len: 0,
            }];
            let err = write_copies(&c, &parts, b"", None).unwrap_err();
            assert!(err.to_string().contains("not a trace path"), "{bad}: {err}");
        }
        // A list longer than the bytes: refused, and nothing written, not even the first.
        let parts = [
            TracePart {
                path: "trace.jsonl".into(),
                len: 2,
            },
            TracePart {
                path: "children/ses_2/trace.jsonl".into(),
                len: 9,
            },
        ];
        let err = write_copies(&c, &parts, b"{}abc", None).unwrap_err();
        assert!(err.to_string().contains("fewer bytes"), "{err}");
        assert!(!c.join("trace.jsonl").exists());
    }
}
