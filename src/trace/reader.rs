//! Streaming reader of `trace.jsonl`.
//!
//! Traces can be large (a long session, a million lines) and can be read while they are still
//! being written, so the reader never loads a whole file: it reads the file in blocks and parses
//! one line at a time, in place, into an [`Event`] that borrows its strings from the block. No
//! line is copied and no string the views only compare is allocated, which (with the line
//! scanner, `super::scan`) keeps `mur trace report` over a million lines under the cost of a
//! plain serde_json parse of the same bytes.
//!
//! It tolerates what a live or killed writer leaves behind — a torn last line — and reports any
//! other line that is not a JSON object as `E-TRC-001` naming the file and line.

use std::fs::File;
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};

use crate::diagnostic::Diagnostic;

use super::event::Event;
use super::lenient::ToolInput;

/// The longest line a trace may hold. The writer's longest lines carry one model reply's tool
/// input (replies are capped at 64 MiB, and real ones are well under 1 MiB); a longer line is
/// damage, refused before it is held in memory.
pub const MAX_LINE_BYTES: u64 = 16 << 20;

/// Bytes asked of the file per read. The buffer grows past this only to hold one longer line
/// (up to [`MAX_LINE_BYTES`]).
const BLOCK: usize = 128 << 10;

/// Reader of the events of one trace file, one line at a time.
///
/// Not an [`Iterator`]: each [`Event`] borrows from the reader's buffer, so it must be dropped
/// before the next one is read, and it is read in place ([`TraceReader::read_event`]) rather
/// than returned: an event is a wide struct (1.4 KiB), and moving it out through each layer
/// took a tenth of a report.
pub struct TraceReader<R = File> {
    path: PathBuf,
    input: R,
    /// Bytes read from `input`; `buf[start..end]` is not consumed yet.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// `buf[start..scanned]` is known to hold no newline.
    scanned: usize,
    eof: bool,
    line_no: usize,
    done: bool,
    /// True once a torn (unparsable) final line has been skipped.
    pub torn_last_line: bool,
}

/// Open the trace file at `path` (to read with [`TraceReader::new`], or on two cores); a
/// missing or unreadable file is `E-IO-001` / `E-IO-003`.
pub fn open(path: &Path) -> Result<File, Diagnostic> {
    File::open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Diagnostic::error(
                "E-IO-001",
                format!("trace file not found: {}", path.display()),
            )
            .with_hint("the session may have failed before it wrote its trace")
        } else {
            read_error(path, &e)
        }
    })
}

impl<R: Read> TraceReader<R> {
    /// Read events from any byte stream; `path` names it in diagnostics.
    pub fn new(path: &Path, input: R) -> Self {
        TraceReader {
            path: path.to_path_buf(),
            input,
            buf: Vec::new(),
            start: 0,
            end: 0,
            scanned: 0,
            eof: false,
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

    /// Read the next event into `ev` (a default event: its strings will borrow from this
    /// reader's buffer, hence one fresh `ev` per line), its tool input read as `I`
    /// (`serde_json::Value` to keep it, [`super::lenient::Checked`] to only check it).
    ///
    /// `Ok(false)` at the end of the trace (a torn last line skipped) and after an error.
    pub fn read_event<'s, I: ToolInput>(
        &'s mut self,
        ev: &mut Event<'s, I>,
    ) -> Result<bool, Diagnostic> {
        let (from, to) = match self.next_line() {
            Ok(Some(line)) => line,
            Ok(None) => return Ok(false),
            Err(e) => {
                self.done = true;
                return Err(e);
            }
        };
        let why = match parse_line(ev, &self.buf[from..to]) {
            Ok(()) => return Ok(true),
            Err(Refusal::Unparsable(why)) => why,
            Err(refusal) => {
                self.done = true;
                return Err(refused(&self.path, self.line_no, refusal));
            }
        };
        self.done = true;
        // A torn final line is what a writer being killed (or still writing) leaves: skip it.
        // Anything after it means the file is damaged.
        match rest_is_blank(&self.buf[to..self.end], &mut self.input, self.eof) {
            Ok(true) => {
                self.torn_last_line = true;
                Ok(false)
            }
            Ok(false) => Err(refused(&self.path, self.line_no, Refusal::Unparsable(why))),
            Err(e) => Err(read_error(&self.path, &e)),
        }
    }

    /// The next line that is not blank, as a range of `buf` (with its newline, when it has
    /// one), consumed; `None` at the end of the input.
    fn next_line(&mut self) -> Result<Option<(usize, usize)>, Diagnostic> {
        while !self.done {
            let Some((from, to)) = self.take_line()? else {
                self.done = true;
                break;
            };
            if !is_blank(&self.buf[from..to]) {
                return Ok(Some((from, to)));
            }
        }
        Ok(None)
    }

    /// The next line as a range of `buf`, consumed; refuses one longer than [`MAX_LINE_BYTES`]
    /// (newline included) before reading more of it.
    fn take_line(&mut self) -> Result<Option<(usize, usize)>, Diagnostic> {
        loop {
            if let Some(i) = find_newline(&self.buf[self.scanned..self.end]) {
                let to = self.scanned + i + 1;
                return self.consume(to).map(Some);
            }
            self.scanned = self.end;
            let held = self.end - self.start;
            if held as u64 > MAX_LINE_BYTES {
                return self.consume(self.end).map(Some);
            }
            if self.eof {
                return if held == 0 {
                    Ok(None)
                } else {
                    self.consume(self.end).map(Some)
                };
            }
            self.fill()?;
        }
    }

    /// Count the line `buf[start..to]` and consume it.
    fn consume(&mut self, to: usize) -> Result<(usize, usize), Diagnostic> {
        let from = self.start;
        self.line_no += 1;
        self.start = to;
        self.scanned = to;
        if (to - from) as u64 > MAX_LINE_BYTES {
            self.done = true;
            return Err(refused(&self.path, self.line_no, Refusal::TooLong));
        }
        Ok((from, to))
    }

    /// Read more of the input after the unconsumed bytes, moving them to the front first and
    /// growing the buffer when they fill it.
    fn fill(&mut self) -> Result<(), Diagnostic> {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.scanned -= self.start;
            self.start = 0;
        }
        if self.buf.len() - self.end < BLOCK / 2 {
            // Room for the longest line allowed and one byte more, which proves it too long.
            let cap = MAX_LINE_BYTES as usize + BLOCK;
            let len = (self.buf.len() * 2).clamp(BLOCK, cap);
            self.buf.resize(len, 0);
        }
        loop {
            match self.input.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(read_error(&self.path, &e)),
            }
            return Ok(());
        }
    }
}

/// Why a line is not a trace event.
#[derive(Debug)]
pub(super) enum Refusal {
    /// Longer than [`MAX_LINE_BYTES`]: damage, wherever it is.
    TooLong,
    /// JSON with no `"event_type"` string: damage, wherever it is.
    NoType,
    /// Not a JSON object (serde_json's message): damage, unless nothing but blank lines
    /// follows it (a torn last line).
    Unparsable(String),
}

/// Parse one non-blank `line` into `ev` (a default event), refusing what is not a trace event.
#[inline]
pub(super) fn parse_line<'b, I: ToolInput>(
    ev: &mut Event<'b, I>,
    line: &'b [u8],
) -> Result<(), Refusal> {
    match ev.parse_from(line) {
        Ok(()) if ev.event_type.is_some() => Ok(()),
        Ok(()) => Err(Refusal::NoType),
        Err(e) => Err(Refusal::Unparsable(e.to_string())),
    }
}

/// True for a blank line (or run of lines): ASCII whitespace only.
pub(super) fn is_blank(bytes: &[u8]) -> bool {
    bytes.iter().all(u8::is_ascii_whitespace)
}

/// True when `tail` and the rest of `input` hold nothing but whitespace (blank lines).
fn rest_is_blank(tail: &[u8], input: &mut impl Read, eof: bool) -> std::io::Result<bool> {
    if !is_blank(tail) {
        return Ok(false);
    }
    if eof {
        return Ok(true);
    }
    let mut block = vec![0u8; BLOCK];
    loop {
        match input.read(&mut block) {
            Ok(0) => return Ok(true),
            Ok(n) if is_blank(&block[..n]) => {}
            Ok(_) => return Ok(false),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Offset of the first `\n` in `hay` (memchr's vectorised search: lines are long enough for a
/// byte-at-a-time scan to cost about a quarter of a report).
fn find_newline(hay: &[u8]) -> Option<usize> {
    memchr::memchr(b'\n', hay)
}

/// `E-TRC-001` for line `line_no` of `path`, refused (for a torn line, only once it is known
/// not to be the last).
pub(super) fn refused(path: &Path, line_no: usize, refusal: Refusal) -> Diagnostic {
    match refusal {
        Refusal::TooLong => {
            let why = format!("line is longer than {} MiB", MAX_LINE_BYTES >> 20);
            corrupt(path, line_no, why)
        }
        Refusal::NoType => corrupt(path, line_no, "line has no \"event_type\" string"),
        Refusal::Unparsable(why) => corrupt(path, line_no, why),
    }
}

fn corrupt(path: &Path, line_no: usize, why: impl std::fmt::Display) -> Diagnostic {
    Diagnostic::error("E-TRC-001", format!("{}:{line_no}: {why}", path.display()))
        .with_hint("every line of trace.jsonl must be one JSON object; this file is damaged")
}

/// `E-IO-003`: `path` could not be read.
pub(super) fn read_error(path: &Path, e: &std::io::Error) -> Diagnostic {
    Diagnostic::error(
        "E-IO-003",
        format!("failed to read {}: {e}", path.display()),
    )
}

/// Inputs for the readers' tests.
#[cfg(test)]
pub(super) mod test_input {
    use std::io::Read;

    /// Reads at most `step` bytes per call (to cut lines at every place a block can end), then
    /// fails with `EIO` once `fail_at` bytes are read, if that is set.
    pub struct Trickle<'a> {
        bytes: &'a [u8],
        step: usize,
        read: usize,
        fail_at: Option<usize>,
    }

    impl<'a> Trickle<'a> {
        /// `bytes`, `step` at a time, failing at `fail_at`.
        pub fn new(bytes: &'a [u8], step: usize, fail_at: Option<usize>) -> Self {
            Trickle {
                bytes,
                step,
                read: 0,
                fail_at,
            }
        }
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let mut n = self.step.min(out.len()).min(self.bytes.len());
            if let Some(at) = self.fail_at {
                if self.read >= at {
                    return Err(std::io::Error::from_raw_os_error(libc::EIO));
                }
                n = n.min(at - self.read);
            }
            out[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            self.read += n;
            Ok(n)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_input::Trickle;
    use super::*;
    use crate::trace::lenient::Checked;

    fn read_from(input: impl Read) -> (Vec<String>, Option<String>, bool) {
        let mut r = TraceReader::new(Path::new("t.jsonl"), input);
        let mut kinds = Vec::new();
        let mut err = None;
        loop {
            let mut ev = Event::<Checked>::default();
            match r.read_event(&mut ev) {
                Ok(true) => kinds.push(ev.kind().to_string()),
                Ok(false) => break,
                Err(d) => err = Some(d.message),
            }
        }
        (kinds, err, r.torn_last_line)
    }

    fn read(text: &str) -> (Vec<String>, Option<String>, bool) {
        let whole = read_from(text.as_bytes());
        for step in [1, 2, 3, 7, 16] {
            let bytes = text.as_bytes();
            assert_eq!(
                read_from(Trickle::new(bytes, step, None)),
                whole,
                "read {step} at a time"
            );
        }
        whole
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
        let (_, err, _) = read("{\"event_type\":\"a\"}\n{\"event_ty\n{\"event_type\":\"b\"}");
        assert_eq!(
            err.unwrap(),
            "t.jsonl:2: control character (\\u0000-\\u001F) found while parsing a string at line 2 column 0"
        );
    }

    #[test]
    fn lines_end_at_a_newline_or_the_end_of_the_input() {
        let text =
            "  {\"event_type\":\"a\"}\r\n\r\n\t\n{\"event_type\":\"b\"}  \n{\"event_type\":\"c\"}";
        assert_eq!(
            read(text),
            (vec!["a".into(), "b".into(), "c".into()], None, false)
        );
        assert_eq!(read(""), (vec![], None, false));
        assert_eq!(read("\n \n"), (vec![], None, false));
        // A line is counted blank or not as a whole; its number counts blank lines too.
        let (_, err, _) = read("\n\n{\"event_type\":1}\n");
        assert_eq!(err.unwrap(), "t.jsonl:3: line has no \"event_type\" string");
    }

    #[test]
    fn fields_of_unexpected_shape_read_as_absent() {
        let line = "{\"event_type\":\"tool_call\",\"turn\":\"three\",\"tool_name\":{\"a\":1},\"status\":[\"ok\"],\"duration_ms\":12.7,\"added\":[\"x\",3,\"y\"]}\n";
        let mut r = TraceReader::new(Path::new("t"), line.as_bytes());
        let mut ev = Event::<serde_json::Value>::default();
        assert!(r.read_event(&mut ev).unwrap());
        assert_eq!(ev.turn, None);
        assert_eq!(ev.tool_name, None);
        assert_eq!(ev.status, None);
        assert_eq!(ev.duration_ms, Some(12));
        assert_eq!(ev.added, Some(vec!["x".to_string(), "y".to_string()]));
    }

    #[test]
    fn the_newline_search_finds_the_first_newline() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..2000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 70) as usize;
            let hay: Vec<u8> = (0..len)
                .map(|i| {
                    let r = seed.rotate_left(i as u32 * 5) as u8;
                    // Mostly plain bytes, some newlines and bytes next to b'\n' in value.
                    match r % 16 {
                        0 => b'\n',
                        1 => 0x0b,
                        2 => 0x8a,
                        3 => 0x09,
                        _ => r | 0x20,
                    }
                })
                .collect();
            let want = hay.iter().position(|&b| b == b'\n');
            assert_eq!(find_newline(&hay), want, "{hay:?}");
        }
    }
}
