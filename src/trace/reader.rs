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
        match self.input.read_until(b'\n', &mut self.buf) {
            Ok(0) => Ok(false),
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
