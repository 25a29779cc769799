//! Reading a large trace on two cores.
//!
//! A report over a million-line trace is nearly all reading and parsing lines, and one core
//! parses at about the speed of a plain serde parse of the same bytes. So for a large trace a
//! second thread reads the file in blocks of whole lines and parses some of them itself; the
//! calling thread parses the others and folds every event into the [`Builder`], in file order.
//!
//! The fold stays on one thread and in order, so no view can tell this reader from
//! [`super::reader::TraceReader`]: the same events reach [`Builder::push`] in the same order,
//! the first damaged line is the one reported, with its number, and a torn last line is
//! skipped by the same rule (an unparsable line followed by nothing but blank lines). The
//! tests below hold the two readers to the same result on damaged and healthy traces cut into
//! blocks down to one byte, read a few bytes at a time, failing anywhere.
//!
//! Which thread parses a block is decided block by block: the reading thread parses one only
//! while the folding thread has [`UNPARSED_AHEAD`] unparsed blocks queued, and otherwise hands
//! it over as it is. So the work balances itself whatever reading costs against parsing on the
//! machine (a fixed share was tried: the best share differed with the block size, and any fixed
//! one left a core idle somewhere).
//!
//! A block parsed by the reading thread travels with the bytes its events borrow from
//! ([`ParsedBlock`], a self-referential cell), so neither thread copies a line or allocates a
//! string the one-thread reader would not; the bytes and the room for events go back to the
//! reading thread to be reused. Only the checked-input events of the counting views are read
//! this way; a view that keeps tool inputs reads on one thread.

use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};

use crate::diagnostic::Diagnostic;

use super::event::Event;
use super::lenient::Checked;
use super::reader::{is_blank, parse_line, read_error, refused, Refusal, MAX_LINE_BYTES};
use super::summary::Builder;

/// Files smaller than this are read on one thread: the second thread and the hand-over of
/// blocks cost about what they save on a trace this size (measured level at 4.5 MiB, 7 ms;
/// 23 % faster at 16 MiB).
pub const FROM_BYTES: u64 = 4 << 20;

/// How the two threads share a trace: [`Split::DEFAULT`] but in tests.
#[derive(Clone, Copy, Debug)]
pub struct Split {
    /// Bytes per block (a block holds whole lines, so a long line makes it longer).
    pub block: usize,
    /// The reading thread parses a block itself only while this many blocks are queued for
    /// the folding thread to parse (0: it parses every block; `usize::MAX`: none).
    pub unparsed_ahead: usize,
}

impl Split {
    /// The split `mur trace` reads with.
    pub const DEFAULT: Split = Split {
        block: BLOCK,
        unparsed_ahead: UNPARSED_AHEAD,
    };
}

/// Bytes per block: big enough that handing a block over is rare, small enough that a block's
/// events (a wide struct per line) stay in the cores' caches between the two threads. (On a
/// million-line report, 128 KiB to 512 KiB were within 10 % of each other; 4 MiB was about twice
/// as slow.)
const BLOCK: usize = 256 << 10;

/// Blocks read ahead of the fold, at most.
const QUEUE: usize = 4;

/// The reading thread parses a block itself only while this many blocks are queued for the
/// folding thread to parse: then that thread has work enough until the parsed block arrives.
/// (1 and 2 were within 4 % of each other.)
const UNPARSED_AHEAD: usize = 2;

/// True when a trace of `len` bytes is worth reading on two cores, and there are two.
pub fn worth_it(len: u64) -> bool {
    len >= FROM_BYTES && std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2)
}

/// An event of a parsed block.
type Parsed<'b> = Event<'b, Checked>;

/// The events of one block parsed by the reading thread, and where they stopped.
struct Events<'b> {
    events: Vec<Parsed<'b>>,
    /// Lines walked, blank ones included.
    lines: usize,
    stop: Option<Stop>,
}

self_cell::self_cell!(
    /// A block of whole lines and the events parsed from it, which borrow its bytes.
    struct ParsedBlock {
        owner: Vec<u8>,
        #[covariant]
        dependent: Events,
    }
);

/// What the reading thread hands the folding one, in file order.
enum Block {
    /// Whole lines, for the folding thread to parse.
    Lines(Vec<u8>),
    /// Whole lines, parsed.
    Parsed(ParsedBlock),
    /// The input could not be read past the blocks before this one; `tail_blank` tells
    /// whether the start of a line read before the error was blank.
    Failed { error: Diagnostic, tail_blank: bool },
}

impl Block {
    /// True when the block holds nothing but blank lines; the read error of a failed block
    /// unless what was read of it already is not blank.
    fn into_blank(self) -> Result<bool, Diagnostic> {
        match self {
            Block::Lines(bytes) => Ok(is_blank(&bytes)),
            Block::Parsed(p) => Ok(is_blank(p.borrow_owner())),
            Block::Failed {
                tail_blank: false, ..
            } => Ok(false),
            Block::Failed { error, .. } => Err(error),
        }
    }
}

/// The line a walk stopped at.
struct Stop {
    /// Its number, counted from the walk's start.
    line: usize,
    refusal: Refusal,
    /// Offset in the block of what follows it.
    rest: usize,
}

/// Walk the whole lines of `block`, handing each one that is not blank to `take`, and stop at
/// the first it refuses or the first longer than [`MAX_LINE_BYTES`]. `lines` counts the lines
/// walked, blank ones included, as [`super::reader::TraceReader`] numbers them.
fn walk<'b>(
    block: &'b [u8],
    lines: &mut usize,
    mut take: impl FnMut(&'b [u8]) -> Result<(), Refusal>,
) -> Option<Stop> {
    let mut from = 0;
    while from < block.len() {
        let to = memchr::memchr(b'\n', &block[from..]).map_or(block.len(), |i| from + i + 1);
        *lines += 1;
        let line = &block[from..to];
        let outcome = if line.len() as u64 > MAX_LINE_BYTES {
            Err(Refusal::TooLong)
        } else if is_blank(line) {
            Ok(())
        } else {
            take(line)
        };
        if let Err(refusal) = outcome {
            let (line, rest) = (*lines, to);
            return Some(Stop {
                line,
                refusal,
                rest,
            });
        }
        from = to;
    }
    None
}

/// Parse the lines of `bytes` into events, as far as the first line that is not one, into
/// `room` (an emptied vector, reused) grown for `hint` events (the last block's count).
fn parse_block(bytes: Vec<u8>, room: Vec<Parsed<'static>>, hint: usize) -> ParsedBlock {
    ParsedBlock::new(bytes, |bytes| {
        // The first block has no count to go by: room for lines of 256 bytes (the writer's
        // are ~300 to 1,000), rather than growing the vector, and copying it, as it fills.
        // Room too small is dropped, not grown: growing copies all of it, used or not.
        let want = (hint + hint / 4).max(bytes.len() / 256);
        let mut events: Vec<Parsed<'_>> = if room.capacity() >= want {
            room
        } else {
            Vec::with_capacity(want)
        };
        let mut lines = 0;
        let stop = walk(bytes, &mut lines, |line| {
            // Parsed where it is kept: an event is too wide to move cheaply.
            // (`resize_with` builds the default in its slot; `push` built it aside and copied.)
            events.resize_with(events.len() + 1, Event::default);
            let parsed = parse_line(events.last_mut().expect("just pushed"), line);
            if parsed.is_err() {
                events.pop();
            }
            parsed
        });
        Events {
            events,
            lines,
            stop,
        }
    })
}

/// `events` emptied, its room kept for the next block. (An empty vector of events that borrow
/// nothing: collected in place, which keeps the allocation, as the two types differ only in a
/// lifetime.)
#[expect(
    clippy::unnecessary_filter_map,
    reason = "the filter changes the element type's lifetime, which `filter` cannot"
)]
fn emptied(mut events: Vec<Parsed<'_>>) -> Vec<Parsed<'static>> {
    events.clear();
    events.into_iter().filter_map(|_| None).collect()
}

/// The two ends of the hand-over, as the reading thread holds them.
struct Reading<'s> {
    blocks: SyncSender<Block>,
    /// Buffers the folding thread is done with.
    spare_bytes: Receiver<Vec<u8>>,
    spare_room: Receiver<Vec<Parsed<'static>>>,
    /// Blocks sent as [`Block::Lines`] that the folding thread has not taken yet.
    unparsed: &'s AtomicUsize,
    /// Parse here while at least this many are.
    unparsed_ahead: usize,
}

/// Fold the trace `input` (named `path` in diagnostics) into `b`, reading it and parsing part
/// of it on a second thread, as `split` says. Returns whether a torn last line was skipped.
pub fn fold<R: Read + Send>(
    input: R,
    path: &Path,
    split: Split,
    b: &mut Builder,
) -> Result<bool, Diagnostic> {
    let unparsed = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        // The channels live inside the scope: when the fold returns early, the reading thread's
        // next send fails and it ends, instead of the scope waiting on it forever.
        let (blocks, rx) = mpsc::sync_channel(QUEUE);
        let (spare_bytes, spare_bytes_rx) = mpsc::channel();
        let (spare_room, spare_room_rx) = mpsc::channel();
        let reading = Reading {
            blocks,
            spare_bytes: spare_bytes_rx,
            spare_room: spare_room_rx,
            unparsed: &unparsed,
            unparsed_ahead: split.unparsed_ahead,
        };
        scope.spawn(move || read_blocks(input, path, split.block, reading));
        let mut lines = 0;
        while let Ok(next) = rx.recv() {
            match next {
                Block::Lines(bytes) => {
                    unparsed.fetch_sub(1, Ordering::Relaxed);
                    let stop = walk(&bytes, &mut lines, |line| {
                        let mut ev = Event::<Checked>::default();
                        parse_line(&mut ev, line)?;
                        b.push(&mut ev);
                        Ok(())
                    });
                    if let Some(stop) = stop {
                        return settle(path, stop, &bytes, &rx);
                    }
                    give_back(&spare_bytes, bytes);
                }
                Block::Parsed(mut parsed) => {
                    let (walked, stop) = parsed.with_dependent_mut(|_, p| {
                        for ev in &mut p.events {
                            b.push(ev);
                        }
                        give_back(&spare_room, emptied(std::mem::take(&mut p.events)));
                        (p.lines, p.stop.take())
                    });
                    if let Some(mut stop) = stop {
                        stop.line += lines;
                        return settle(path, stop, parsed.borrow_owner(), &rx);
                    }
                    lines += walked;
                    give_back(&spare_bytes, parsed.into_owner());
                }
                Block::Failed { error, .. } => return Err(error),
            }
        }
        Ok(false)
    })
}

/// Hand a buffer back for reuse; dropped here when the reading thread has ended.
fn give_back<T>(to: &Sender<T>, spare: T) {
    let _ = to.send(spare);
}

/// The fold stopped at a line it refused: a torn last line (`Ok(true)`) when the line is
/// unparsable and nothing but blank lines follows it, in `block` or in the blocks still to
/// come; `E-TRC-001` naming the line otherwise.
fn settle(path: &Path, stop: Stop, block: &[u8], rx: &Receiver<Block>) -> Result<bool, Diagnostic> {
    let Refusal::Unparsable(why) = stop.refusal else {
        return Err(refused(path, stop.line, stop.refusal));
    };
    let mut last = is_blank(&block[stop.rest..]);
    while last {
        match rx.recv() {
            Ok(next) => last = next.into_blank()?,
            Err(_) => break,
        }
    }
    if last {
        Ok(true)
    } else {
        Err(refused(path, stop.line, Refusal::Unparsable(why)))
    }
}

/// The reading thread: cut `input` into blocks of whole lines and send them in order, parsed
/// or not, until the end of the input, a read error, or the fold hanging up.
fn read_blocks(mut input: impl Read, path: &Path, block: usize, to: Reading<'_>) {
    let block = block.max(1);
    let mut carry: Vec<u8> = Vec::new();
    // After a line it refused the thread parses no more: what follows is only looked at for
    // being blank, and the fold does that.
    let mut refused = false;
    let mut hint = 0;
    let mut eof = false;
    while !eof {
        // `buf[..filled]` is what was read; the rest of `buf` is room, already initialised
        // (a reused buffer keeps its length, so it is zeroed once, when it is first grown).
        let mut buf = to.spare_bytes.try_recv().unwrap_or_default();
        let mut filled = carry.len();
        if buf.len() < filled {
            buf.resize(filled, 0);
        }
        buf[..filled].copy_from_slice(&carry);
        carry.clear();
        // `buf[..searched]` holds no newline (the carried start of a line).
        let mut searched = filled;
        // Read until the block holds `block` bytes and a newline, or the line in it is too
        // long to be one, or the input ends.
        let cut = loop {
            if filled >= block {
                if let Some(i) = memchr::memrchr(b'\n', &buf[searched..filled]) {
                    break searched + i + 1;
                }
                searched = filled;
                if filled as u64 > MAX_LINE_BYTES {
                    break filled;
                }
            }
            let want = block.saturating_sub(filled).max(block / 2).max(1);
            match read_more(&mut input, &mut buf, &mut filled, want) {
                Ok(true) => {}
                Ok(false) => {
                    eof = true;
                    break filled;
                }
                Err(e) => {
                    // What the one-thread reader would have seen before the error: the whole
                    // lines read, then the start of one.
                    let whole = memchr::memrchr(b'\n', &buf[..filled]).map_or(0, |i| i + 1);
                    let tail_blank = is_blank(&buf[whole..filled]);
                    buf.truncate(whole);
                    if !buf.is_empty() && !send(&to, Block::Lines(buf)) {
                        return;
                    }
                    let error = read_error(path, &e);
                    send(&to, Block::Failed { error, tail_blank });
                    return;
                }
            }
        };
        carry.extend_from_slice(&buf[cut..filled]);
        buf.truncate(cut);
        if buf.is_empty() {
            continue;
        }
        let next = if !refused && to.unparsed.load(Ordering::Relaxed) >= to.unparsed_ahead {
            let room = to.spare_room.try_recv().unwrap_or_default();
            let parsed = parse_block(buf, room, hint);
            let p = parsed.borrow_dependent();
            hint = p.events.len();
            refused = p.stop.is_some();
            Block::Parsed(parsed)
        } else {
            Block::Lines(buf)
        };
        if !send(&to, next) {
            return;
        }
    }
}

/// Send `next` to the folding thread, counting it if it is unparsed; false once the fold has
/// hung up.
fn send(to: &Reading<'_>, next: Block) -> bool {
    let unparsed = matches!(next, Block::Lines(_));
    if unparsed {
        to.unparsed.fetch_add(1, Ordering::Relaxed);
    }
    to.blocks.send(next).is_ok()
}

/// Read up to `want` more bytes of `input` into `buf` after `filled` (growing `buf` if it is
/// short of room), in one read; `Ok(false)` at the end of the input.
fn read_more(
    input: &mut impl Read,
    buf: &mut Vec<u8>,
    filled: &mut usize,
    want: usize,
) -> std::io::Result<bool> {
    // One `read` a call: `read_to_end` through `take` (which reads into room without
    // initialising it) asked for 8 KiB first and doubled, six reads a block, three times the
    // one-core reader's.
    if buf.len() < *filled + want {
        buf.resize(*filled + want, 0);
    }
    loop {
        match input.read(&mut buf[*filled..*filled + want]) {
            Ok(n) => {
                *filled += n;
                return Ok(n > 0);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::Split;
    use crate::trace::lenient::Checked;
    use crate::trace::reader::test_input::Trickle;
    use crate::trace::reader::TraceReader;
    use crate::trace::summary::{fold, fold_on_two_cores, Detail};

    const PATH: &str = "ses/trace.jsonl";

    /// What the one-thread reader makes of `text`, as text to compare.
    fn one_thread(text: &[u8], fail_at: Option<usize>) -> String {
        let reader = TraceReader::new(Path::new(PATH), Trickle::new(text, 4096, fail_at));
        format!(
            "{:#?}",
            fold::<_, Checked>(reader, Path::new(PATH), Detail::Turns)
        )
    }

    /// The same through the two-core reader, split as `split` says, the input read `step`
    /// bytes at a time.
    fn two_threads(text: &[u8], split: Split, step: usize, fail_at: Option<usize>) -> String {
        let input = Trickle::new(text, step, fail_at);
        let summary = fold_on_two_cores(input, Path::new(PATH), Detail::Turns, split);
        format!("{summary:#?}")
    }

    /// A session of `turns` turns: an inference, a tool call and a shell line each, a
    /// delegation now and then, blank lines and CRLF line ends here and there.
    fn session(turns: usize) -> String {
        let mut t = String::new();
        t.push_str(r#"{"event_type":"session_start","event_id":"evt_0","parent_id":null,"session_id":"ses_0193c0ffee0070008000000000000001","timestamp":1000,"capsule_name":"two","capsule_version":"0.1.0","model":"m","max_turns":null,"tools_declared":["bash","grep"]}"#);
        t.push('\n');
        t.push_str("{\"event_type\":\"task_start\",\"task_id\":\"tsk_1\",\"timestamp\":1001}\n");
        for n in 0..turns {
            let tool = ["bash", "grep", "tool-\\u00e9dit"][n % 3];
            t.push_str(&format!(
                "{{\"event_type\":\"inference\",\"turn\":{n},\"timestamp\":{},\"input_tokens\":{},\"output_tokens\":{},\"decision\":\"tool_call\",\"tool_name\":\"{tool}\"}}\n",
                1002 + n,
                100 + n,
                n % 7
            ));
            t.push_str(&format!(
                "{{\"event_type\":\"tool_call\",\"turn\":{n},\"tool_name\":\"{tool}\",\"duration_ms\":{},\"status\":\"{}\",\"output_bytes\":{n}}}{}",
                n % 13,
                if n % 5 == 0 { "error" } else { "ok" },
                if n % 4 == 0 { "\r\n" } else { "\n" }
            ));
            if n % 3 == 0 {
                t.push_str(&format!(
                    "{{\"event_type\":\"shell\",\"turn\":{n},\"exit_code\":{},\"duration_ms\":3}}\n",
                    n % 2
                ));
            }
            if n % 6 == 0 {
                t.push_str(&format!(
                    "\n  \n{{\"event_type\":\"delegation_start\",\"delegation_id\":\"dlg_{n}\",\"capsule\":\"kid\",\"child_session_id\":\"ses_{n}\"}}\n{{\"event_type\":\"delegation\",\"delegation_id\":\"dlg_{n}\",\"outcome\":\"ok\",\"usage\":{{\"input_tokens\":5,\"output_tokens\":1}}}}\n"
                ));
            }
        }
        t.push_str("{\"event_type\":\"session_end\",\"exit_status\":\"ok\",\"total_turns\":3,\"duration_ms\":77}\n");
        t
    }

    /// Both readers on `text`, cut into blocks of every size from one byte up and read in
    /// steps of every size, must give the same summary or the same diagnostic, whichever
    /// thread parses the blocks: the reading one every block, none, or as it goes.
    fn same_either_way(text: &[u8], fail_at: Option<usize>) -> String {
        let blocks = [1, 2, 3, 5, 8, 64, 333, 4096, super::BLOCK];
        same_in_blocks(text, fail_at, &blocks, &[1, 7, 4096])
    }

    /// [`same_either_way`] for the given block sizes and read steps only.
    fn same_in_blocks(
        text: &[u8],
        fail_at: Option<usize>,
        blocks: &[usize],
        steps: &[usize],
    ) -> String {
        let want = one_thread(text, fail_at);
        for unparsed_ahead in [0, usize::MAX, super::UNPARSED_AHEAD] {
            for &block in blocks {
                for &step in steps {
                    let split = Split {
                        block,
                        unparsed_ahead,
                    };
                    let got = two_threads(text, split, step, fail_at);
                    assert_eq!(got, want, "{split:?}, read {step} at a time");
                }
            }
        }
        want
    }

    #[test]
    fn a_healthy_trace_reads_the_same_on_two_cores() {
        let text = session(40);
        let summary = same_either_way(text.as_bytes(), None);
        assert!(summary.starts_with("Ok("), "{summary}");
        assert!(summary.contains("tool-\u{e9}dit"), "{summary}");
        // Without a newline at its end, and with blank lines after it, too.
        same_either_way(text.trim_end().as_bytes(), None);
        same_either_way(format!("{text}\n \r\n\n").as_bytes(), None);
    }

    #[test]
    fn a_torn_last_line_is_skipped_on_two_cores_and_nowhere_else() {
        let text = session(25);
        for tail in [
            "{\"event_ty",
            "{\"event_type\":\"inference\",\"turn\":9",
            "\u{1}",
        ] {
            let torn = format!("{text}{tail}");
            let s = same_either_way(torn.as_bytes(), None);
            assert!(s.contains("torn_last_line: true"), "{s}");
            let torn = format!("{text}{tail}\n\n  \n");
            let s = same_either_way(torn.as_bytes(), None);
            assert!(s.contains("torn_last_line: true"), "{s}");
            // The same line with a line after it is damage, named by its number.
            let damaged = format!("{text}{tail}\n{text}");
            let s = same_either_way(damaged.as_bytes(), None);
            let line = text.lines().count() + 1;
            assert!(s.contains(&format!("{PATH}:{line}: ")), "{s}");
        }
    }

    #[test]
    fn damage_anywhere_is_reported_at_its_line_on_two_cores() {
        let text = session(30);
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        for (at, bad) in [
            (1, &b"not json\n"[..]),
            (5, b"{\"no_type\":1}\n"),
            (17, b"{\"event_type\":7}\n"),
            (40, b"[1,2]\n"),
            (lines.len() - 1, b"{\"event_type\":\"x\"\n"),
            (23, b"{\"event_type\":\"x\",\"bad\":\"\x01\"}\n"),
        ] {
            let mut damaged = Vec::new();
            damaged.extend(lines[..at].iter().flat_map(|l| l.bytes()));
            damaged.extend_from_slice(bad);
            damaged.extend(lines[at..].iter().flat_map(|l| l.bytes()));
            let s = same_either_way(&damaged, None);
            assert!(s.contains(&format!("{PATH}:{}: ", at + 1)), "{s}");
        }
        // Bytes that are not UTF-8 in a value no view reads: read past, either way.
        let mut odd = Vec::new();
        odd.extend(lines[..22].iter().flat_map(|l| l.bytes()));
        odd.extend_from_slice(b"{\"event_type\":\"x\",\"bad\":\"\xff\"}\n");
        odd.extend(lines[22..].iter().flat_map(|l| l.bytes()));
        assert!(same_either_way(&odd, None).starts_with("Ok("));
    }

    #[test]
    fn a_read_error_anywhere_is_reported_as_the_one_thread_reader_reports_it() {
        let text = session(7);
        let torn = format!("{text}{{\"event_ty\n\n \n");
        let damaged = format!("{text}{{\"event_ty\n\n{text}");
        for text in [text.as_bytes(), torn.as_bytes(), damaged.as_bytes()] {
            for fail_at in (0..text.len()).step_by(29).chain([text.len() - 1]) {
                let s = same_in_blocks(text, Some(fail_at), &[1, 5, 64, 4096], &[3, 4096]);
                assert!(s.contains("E-IO-003") || s.contains("E-TRC-001"), "{s}");
            }
        }
    }

    #[test]
    fn emptied_events_keep_their_room() {
        let line = b"{\"event_type\":\"x\"}".to_vec();
        let mut events = Vec::with_capacity(300);
        events.push(crate::trace::event::Event::default());
        events[0].parse_from(&line).unwrap();
        let (at, room) = (events.as_ptr() as usize, events.capacity());
        let emptied = super::emptied(events);
        assert_eq!((emptied.len(), emptied.capacity()), (0, room));
        assert_eq!(emptied.as_ptr() as usize, at);
    }

    #[test]
    fn empty_and_blank_traces_read_the_same_on_two_cores() {
        for text in ["", "\n", " \r\n\t\n", "{\"event_ty", "\n\n{\"x\":1"] {
            let s = same_either_way(text.as_bytes(), None);
            assert!(s.contains("E-TRC-001"), "{s}");
        }
    }
}
