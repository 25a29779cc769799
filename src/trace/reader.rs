//! Streaming reader of `trace.jsonl`.
//!
//! Traces can be large (a long session, a million lines) and can be read while they are still
//! being written, so the reader never loads a whole file: it parses one line at a time into an
//! [`Event`]. It tolerates what a live or killed writer leaves behind — a torn last line — and
//! reports any other line that is not a JSON object as `E-TRC-001` naming the file and line.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::diagnostic::Diagnostic;

use super::event::Event;

/// The longest line a trace may hold. The writer's longest lines carry one model reply's tool
/// input (replies are capped at 64 MiB, and real ones are well under 1 MiB); a longer line is
/// damage, refused before it is held in memory.
pub const MAX_LINE_BYTES: u64 = 16 << 20;

/// Iterator over the events of one trace file, one line at a time.
pub struct TraceReader<R = File> {
    path: PathBuf,
    input: BufReader<R>,
    buf: Vec<u8>,
    line_no: usize,
    done: bool,
    /// True once a torn (unparsable) final line has been skipped.
    pub torn_last_line: bool,
}

impl TraceReader<File> {
    /// Open a trace file; a missing or unreadable file is `E-IO-001` / `E-IO-003`.
    pub fn open(path: &Path) -> Result<Self, Diagnostic> {
        let file = File::open(path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Diagnostic::error(
                    "E-IO-001",
                    format!("trace file not found: {}", path.display()),
                )
                .with_hint("the session may have failed before it wrote its trace")
            } else {
                Diagnostic::error(
                    "E-IO-003",
                    format!("failed to read {}: {e}", path.display()),
                )
            }
        })?;
        Ok(Self::new(path, file))
    }
}

impl<R: Read> TraceReader<R> {
    /// Read events from any byte stream; `path` names it in diagnostics.
    pub fn new(path: &Path, input: R) -> Self {
        TraceReader {
            path: path.to_path_buf(),
            input: BufReader::with_capacity(1 << 16, input),
            buf: Vec::with_capacity(4096),
            line_no: 0,
            done: false,
            torn_last_line: false,
        }
    }

    /// The file being read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of the last line read (1-based).
    pub fn line_no(&self) -> usize {
        self.line_no
    }

    fn read_line(&mut self) -> Result<bool, Diagnostic> {
        self.buf.clear();
        match (&mut self.input)
            .take(MAX_LINE_BYTES + 1)
            .read_until(b'\n', &mut self.buf)
        {
            Ok(0) => Ok(false),
            Ok(n) if n as u64 > MAX_LINE_BYTES => {
                self.line_no += 1;
                self.done = true;
                Err(self.corrupt(format!("line is longer than {} MiB", MAX_LINE_BYTES >> 20)))
            }
            Ok(_) => {
                self.line_no += 1;
                Ok(true)
            }
            Err(e) => Err(Diagnostic::error(
                "E-IO-003",
                format!("failed to read {}: {e}", self.path.display()),
            )),
        }
    }

    /// True when nothing but blank lines is left in the input.
    fn only_blank_left(&mut self) -> Result<bool, Diagnostic> {
        let mut rest = Vec::new();
        loop {
            rest.clear();
            match self.input.read_until(b'\n', &mut rest) {
                Ok(0) => return Ok(true),
                Ok(_) if rest.iter().all(u8::is_ascii_whitespace) => continue,
                Ok(_) => return Ok(false),
                Err(e) => {
                    return Err(Diagnostic::error(
                        "E-IO-003",
                        format!("failed to read {}: {e}", self.path.display()),
                    ))
                }
            }
        }
    }

    fn corrupt(&self, why: impl std::fmt::Display) -> Diagnostic {
        Diagnostic::error(
            "E-TRC-001",
            format!("{}:{}: {why}", self.path.display(), self.line_no),
        )
        .with_hint("every line of trace.jsonl must be one JSON object; this file is damaged")
    }
}

impl<R: Read> Iterator for TraceReader<R> {
    type Item = Result<Event, Diagnostic>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            match self.read_line() {
                Ok(false) => self.done = true,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
                Ok(true) => {
                    if self.buf.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    let parsed = serde_json::from_slice::<Event>(&self.buf);
                    let failure = match parsed {
                        Ok(ev) if ev.event_type.is_some() => return Some(Ok(ev)),
                        Ok(_) => {
                            self.done = true;
                            return Some(Err(self.corrupt("line has no \"event_type\" string")));
                        }
                        Err(e) => e.to_string(),
                    };
                    // A torn final line is what a writer being killed (or still writing)
                    // leaves: skip it. Anything after it means the file is damaged.
                    match self.only_blank_left() {
                        Ok(true) => {
                            self.done = true;
                            self.torn_last_line = true;
                            return None;
                        }
                        Ok(false) => {
                            self.done = true;
                            return Some(Err(self.corrupt(failure)));
                        }
                        Err(e) => {
                            self.done = true;
                            return Some(Err(e));
                        }
                    }
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> (Vec<String>, Option<String>, bool) {
        let mut r = TraceReader::new(Path::new("t.jsonl"), text.as_bytes());
        let mut kinds = Vec::new();
        let mut err = None;
        for ev in &mut r {
            match ev {
                Ok(e) => kinds.push(e.kind().to_string()),
                Err(d) => err = Some(d.message),
            }
        }
        (kinds, err, r.torn_last_line)
    }

    #[test]
    fn torn_last_line_is_skipped_but_a_bad_middle_line_is_an_error() {
        let ok = "{\"event_type\":\"a\"}\n\n{\"event_type\":\"b\",\"x\":[1,{\"y\":2}]}\n";
        assert_eq!(read(ok), (vec!["a".into(), "b".into()], None, false));
        let torn = "{\"event_type\":\"a\"}\n{\"event_ty";
        assert_eq!(read(torn), (vec!["a".into()], None, true));
        let torn_then_blank = "{\"event_type\":\"a\"}\n{\"event_ty\n\n  \n";
        assert_eq!(read(torn_then_blank), (vec!["a".into()], None, true));
        let (kinds, err, _) = read("{\"event_type\":\"a\"}\nnot json\n{\"event_type\":\"b\"}\n");
        assert_eq!(kinds, ["a"]);
        assert_eq!(err.unwrap(), "t.jsonl:2: expected ident at line 1 column 2");
        let (_, err, _) = read("{\"event_type\":\"a\"}\n{\"no_type\":1}\n");
        assert_eq!(err.unwrap(), "t.jsonl:2: line has no \"event_type\" string");
    }

    #[test]
    fn fields_of_unexpected_shape_read_as_absent() {
        let line = "{\"event_type\":\"tool_call\",\"turn\":\"three\",\"tool_name\":{\"a\":1},\"status\":[\"ok\"],\"duration_ms\":12.7,\"added\":[\"x\",3,\"y\"]}\n";
        let mut r = TraceReader::new(Path::new("t"), line.as_bytes());
        let ev = r.next().unwrap().unwrap();
        assert_eq!(ev.turn, None);
        assert_eq!(ev.tool_name, None);
        assert_eq!(ev.status, None);
        assert_eq!(ev.duration_ms, Some(12));
        assert_eq!(ev.added, Some(vec!["x".to_string(), "y".to_string()]));
    }
}
