//! The line scanner: the fast way through the lines a trace writer produces.
//!
//! `mur trace report` over a million lines spends nearly all its time taking lines apart: with
//! serde_json, even into typed events that borrow their strings, parsing was four fifths of the
//! report. A writer's line is a flat object of short keys, plain strings, small integers and
//! one nested tool input, so this reads exactly that shape, straight into an [`Event`], in
//! about half the time, and nothing else. Its inner steps are what a report's time goes to
//! (a million lines of ~470 bytes, fourteen fields each): the search for a string's end,
//! sixteen bytes at a time ([`find_special`], shared with the trace writer); the key's field,
//! from a table built when compiling (`Known::of`); the digits of an integer, summed in
//! registers.
//!
//! It is only ever an accelerator: whatever it is not sure of (a fraction or an exponent, an
//! integer of more than 18 digits, a `\u` escape, an escape in a key, deep nesting, a repeated
//! field, a list or object where a field holds text or a number, anything that is not JSON)
//! makes it give the line up, and [`Event::parse_from`] reads the line with serde_json as
//! before. So it accepts a subset of what serde_json accepts, and for what it accepts each
//! field gets what [`super::lenient::Field::read`] gives for that value (the rule
//! [`super::lenient::Field::scanned`] states next to it). The tests below, the
//! `trace_lines` fuzz target and `tests/trace_reader.rs` hold it to that.

use std::borrow::Cow;

use mur_actors::json_str::find_special;

use super::event::{Event, Known};
use super::lenient::{Scanned, ToolInput};

/// Deepest nesting of arrays and objects taken apart here (serde_json allows 128).
const MAX_DEPTH: u32 = 32;

/// Most digits in an integer read here: 18 always fit an `i64`.
const MAX_DIGITS: usize = 18;

/// Read `text` (one line, its newline included or not) into `ev`, a default event; false when
/// the line is left to serde, `ev` then holding any part of it.
pub(super) fn line<'a, I: ToolInput>(text: &'a str, ev: &mut Event<'a, I>) -> bool {
    Scan { text, at: 0 }.object(ev).is_some()
}

/// A position in the line being read.
struct Scan<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Scan<'a> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    /// Skip JSON whitespace (the four bytes serde_json skips).
    #[inline]
    fn space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    #[inline]
    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// The top-level object, up to the end of the line.
    fn object<I: ToolInput>(&mut self, ev: &mut Event<'a, I>) -> Option<()> {
        self.space();
        self.eat(b'{')?;
        self.space();
        if self.eat(b'}').is_none() {
            let mut seen = 0u128;
            loop {
                self.eat(b'"')?;
                let key = self.plain_string()?;
                self.space();
                self.eat(b':')?;
                self.space();
                match Known::of(key) {
                    Some(known) => {
                        // A repeated field is an error to serde: let it say so.
                        let bit = 1u128 << known as u32;
                        if seen & bit != 0 {
                            return None;
                        }
                        seen |= bit;
                        let value = self.value()?;
                        known.scanned(ev, value)?;
                    }
                    None => self.skip(1)?,
                }
                self.space();
                match self.peek()? {
                    b',' => {
                        self.at += 1;
                        self.space();
                    }
                    b'}' => {
                        self.at += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        self.space();
        (self.at == self.text.len()).then_some(())
    }

    /// A known field's value. Always inlined: returned from a call, the value went through
    /// memory, and reading it back stalled the loop (a store forwarded to a wider load).
    #[inline(always)]
    fn value(&mut self) -> Option<Scanned<'a>> {
        Some(match self.peek()? {
            b'"' => {
                self.at += 1;
                Scanned::Str(self.string()?)
            }
            b'-' | b'0'..=b'9' => Scanned::Int(self.integer()?),
            b'[' | b'{' => {
                self.skip(1)?;
                Scanned::Nested
            }
            _ => self.literal()?,
        })
    }

    /// Skip a value, checking it is JSON serde_json reads without error; `depth` counts the
    /// objects and arrays it is in (the line's own object is 1).
    fn skip(&mut self, depth: u32) -> Option<()> {
        match self.peek()? {
            b'"' => {
                self.at += 1;
                self.skip_string()
            }
            b'-' | b'0'..=b'9' => self.integer().map(drop),
            open @ (b'[' | b'{') => {
                if depth >= MAX_DEPTH {
                    return None;
                }
                let close = if open == b'[' { b']' } else { b'}' };
                self.at += 1;
                self.space();
                if self.eat(close).is_some() {
                    return Some(());
                }
                loop {
                    if open == b'{' {
                        self.eat(b'"')?;
                        self.skip_string()?;
                        self.space();
                        self.eat(b':')?;
                        self.space();
                    }
                    self.skip(depth + 1)?;
                    self.space();
                    match self.peek()? {
                        b',' => {
                            self.at += 1;
                            self.space();
                        }
                        b if b == close => {
                            self.at += 1;
                            return Some(());
                        }
                        _ => return None,
                    }
                }
            }
            _ => self.literal().map(drop),
        }
    }

    /// `null`, `true` or `false`.
    #[inline]
    fn literal(&mut self) -> Option<Scanned<'a>> {
        let rest = &self.text.as_bytes()[self.at..];
        let (len, value) = if rest.starts_with(b"null") {
            (4, Scanned::Null)
        } else if rest.starts_with(b"true") {
            (4, Scanned::Bool)
        } else if rest.starts_with(b"false") {
            (5, Scanned::Bool)
        } else {
            return None;
        };
        self.at += len;
        Some(value)
    }

    /// An integer: an optional `-`, then `0` or a digit from 1 to 9 and more digits, at most
    /// [`MAX_DIGITS`] in all, not followed by a fraction or an exponent. `-0` (a float to
    /// serde_json) is left to serde.
    #[inline]
    fn integer(&mut self) -> Option<i64> {
        let negative = self.eat(b'-').is_some();
        let rest = &self.text.as_bytes()[self.at..];
        // Locals, not `self.at`, in the loop: the compiler keeps them in registers.
        let (mut digits, mut magnitude) = (0, 0i64);
        while let Some(&d) = rest.get(digits) {
            if !d.is_ascii_digit() {
                break;
            }
            if digits == MAX_DIGITS {
                return None;
            }
            magnitude = magnitude * 10 + i64::from(d - b'0');
            digits += 1;
        }
        // No digits, a leading zero, or a fraction or exponent next: serde's to read.
        if digits == 0 || (digits > 1 && rest[0] == b'0') {
            return None;
        }
        if let Some(b'.' | b'e' | b'E') = rest.get(digits) {
            return None;
        }
        self.at += digits;
        match (negative, magnitude) {
            (true, 0) => None,
            (true, n) => Some(-n),
            (false, n) => Some(n),
        }
    }

    /// The rest of a string whose opening quote was read, unescaped (into a buffer of its own
    /// only when it has escapes).
    #[inline]
    fn string(&mut self) -> Option<Cow<'a, str>> {
        let start = self.at;
        let end = start + find_special(&self.text.as_bytes()[start..])?;
        if self.text.as_bytes()[end] == b'"' {
            self.at = end + 1;
            return self.text.get(start..end).map(Cow::Borrowed);
        }
        let mut out = String::new();
        let mut from = start;
        loop {
            let stop = self.at + find_special(&self.text.as_bytes()[self.at..])?;
            out.push_str(self.text.get(from..stop)?);
            match self.text.as_bytes()[stop] {
                b'"' => {
                    self.at = stop + 1;
                    return Some(Cow::Owned(out));
                }
                b'\\' => {
                    out.push(match self.text.as_bytes().get(stop + 1)? {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\x08',
                        b'f' => '\x0c',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        _ => return None,
                    });
                    self.at = stop + 2;
                    from = self.at;
                }
                _ => return None, // a control character
            }
        }
    }

    /// The rest of a key whose opening quote was read; a key with an escape is left to serde.
    #[inline]
    fn plain_string(&mut self) -> Option<&'a str> {
        let start = self.at;
        let end = start + find_special(&self.text.as_bytes()[start..])?;
        if self.text.as_bytes()[end] != b'"' {
            return None;
        }
        self.at = end + 1;
        self.text.get(start..end)
    }

    /// Skip the rest of a string whose opening quote was read, checking its escapes as
    /// serde_json does; `\u` escapes are left to serde (it reads them differently for a value
    /// it keeps and one it skips).
    fn skip_string(&mut self) -> Option<()> {
        loop {
            let stop = self.at + find_special(&self.text.as_bytes()[self.at..])?;
            match self.text.as_bytes()[stop] {
                b'"' => {
                    self.at = stop + 1;
                    return Some(());
                }
                b'\\' => match self.text.as_bytes().get(stop + 1)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.at = stop + 2,
                    _ => return None,
                },
                _ => return None, // a control character
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::event::KNOWN_NAMES;
    use crate::trace::lenient::Checked;
    use serde::de::{self, Visitor};

    /// The fields the derived `Deserialize` asks serde_json for, caught on the way.
    fn derived_fields() -> &'static [&'static str] {
        #[derive(Debug)]
        struct Caught(&'static [&'static str]);
        impl std::fmt::Display for Caught {
            fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                write!(f, "caught")
            }
        }
        impl std::error::Error for Caught {}
        impl de::Error for Caught {
            fn custom<T: std::fmt::Display>(_: T) -> Self {
                Caught(&[])
            }
        }
        struct Catch;
        impl<'de> de::Deserializer<'de> for Catch {
            type Error = Caught;
            fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Caught> {
                Err(Caught(&[]))
            }
            fn deserialize_struct<V: Visitor<'de>>(
                self,
                _: &'static str,
                fields: &'static [&'static str],
                _: V,
            ) -> Result<V::Value, Caught> {
                Err(Caught(fields))
            }
            serde::forward_to_deserialize_any! {
                bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
                byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
                identifier ignored_any
            }
        }
        match <Event<Checked> as serde::Deserialize>::deserialize(Catch) {
            Err(Caught(fields)) => fields,
            Ok(_) => unreachable!(),
        }
    }

    #[test]
    fn the_scanner_knows_the_keys_serde_reads() {
        assert_eq!(KNOWN_NAMES, derived_fields());
    }

    #[test]
    fn each_known_key_is_found_and_no_other() {
        for (i, name) in KNOWN_NAMES.iter().enumerate() {
            assert_eq!(Known::of(name).map(|k| k as usize), Some(i), "{name}");
        }
        // Keys writers put on every line that no field reads, near misses, and the edges.
        let others = [
            "event_id",
            "parent_id",
            "system_sha",
            "tools_sha",
            "response_sha",
            "",
            "t",
            "turn ",
            " turn",
            "Turn",
            "turns",
            "tur",
            "event_typ",
            "event_types",
            "inputs",
            "usag",
            "total_shell_call",
            "é",
            "statuses",
        ];
        for key in others {
            assert_eq!(Known::of(key), None, "{key}");
        }
        // Each name with one byte changed where the table does not look (so the changed key
        // starts its search at the name's own slot): only the comparison can tell them apart.
        for name in KNOWN_NAMES {
            let n = name.len();
            for at in (1..n - 1).filter(|&at| at != n / 2) {
                let mut near = name.as_bytes().to_vec();
                near[at] = if near[at] == b'x' { b'y' } else { b'x' };
                let near = String::from_utf8(near).unwrap();
                if !KNOWN_NAMES.contains(&near.as_str()) {
                    assert_eq!(Known::of(&near), None, "{near}");
                }
            }
        }
    }

    /// Scan `line`; when the scanner takes it, it must be what serde reads.
    fn agrees<I: ToolInput + PartialEq + std::fmt::Debug>(line: &str) -> bool {
        let mut ev = Event::<I>::default();
        if !super::line(line, &mut ev) {
            return false;
        }
        match serde_json::from_str::<Event<I>>(line) {
            Ok(want) => assert_eq!(ev, want, "{line}"),
            Err(e) => panic!("scanned a line serde refuses ({e}): {line}"),
        }
        true
    }

    #[test]
    fn written_lines_are_scanned_as_serde_reads_them() {
        let lines = [
            r#"{"event_type":"session_start","event_id":"evt_1","parent_id":null,"session_id":"ses_1","timestamp":1795992735682,"capsule_name":"bench","max_turns":null,"runtime_artifacts":[],"deadline":{"at":"x","secs":3}}"#,
            r#"{"event_type":"tool_call","turn":3,"tool_name":"bash","input":{"command":"echo \"hi\"\n","n":[1,-2,true,null,{}]},"input_bytes":52,"status":"ok","error":null}"#,
            r#"{"event_type":"shell","command":"grep \"a\\b\" \/x\t","exit_code":-1,"stdout_bytes":0}"#,
            "  {\"event_type\" : \"a\" ,\t\"turn\"\r:\n7 }  \r\n",
            r#"{"event_type":"a","turn":"7","tool_name":12,"status":true,"decision":false,"x":"é✓"}"#,
            r#"{"event_type":"a","turn":999999999999999999,"timestamp":-999999999999999999}"#,
            r#"{"event_type":"a","turn":0,"input":null,"usage":"none","tools_declared":3}"#,
            r#"{"event_type":"a","input":"text","":1,"skip":[[[]]],"e":"\\\"\/\b\f\n\r\t"}"#,
            r#"{}"#,
        ];
        for line in lines {
            assert!(agrees::<Checked>(line), "not scanned: {line}");
            agrees::<serde_json::Value>(line);
        }
    }

    #[test]
    fn what_the_scanner_is_not_sure_of_is_left_to_serde() {
        let lines = [
            r#"{"event_type":"a","turn":1.5}"#,
            r#"{"event_type":"a","turn":1e3}"#,
            r#"{"event_type":"a","turn":1000000000000000000}"#,
            r#"{"event_type":"a","turn":-0}"#,
            r#"{"event_type":"a","turn":01}"#,
            r#"{"event_type":"a","turn":1,"turn":2}"#,
            r#"{"event_type":"a","x":1e400}"#,
            r#"{"event_type":"a","input":{"a":1e400}}"#,
            r#"{"event_type":"a","x":"\u00e9"}"#,
            r#"{"event_type":"a","tool_name":"\ud800"}"#,
            r#"{"event\u005ftype":"a"}"#,
            r#"{"event_type":"a","tools_declared":["a"]}"#,
            r#"{"event_type":"a","usage":{"input_tokens":1}}"#,
            r#"{"event_type":"a","tool_name":{"a":1}}"#,
            r#"{"event_type":"a","x":[1,]}"#,
            r#"{"event_type":"a",}"#,
            r#"{"event_type":"a"} x"#,
            r#"{"event_type":"a""#,
            r#"{"event_type":"a","x":nul}"#,
            r#"{"event_type":"a","x":"tab	in"}"#,
            r#"{"event_type":"a","x":"\q"}"#,
            r#"["tool_call","ses_1",7]"#,
            "",
            "\u{feff}{}",
        ];
        for line in lines {
            assert!(!agrees::<Checked>(line), "scanned: {line}");
        }
        let deep = format!(
            "{{\"event_type\":\"a\",\"x\":{}1{}}}",
            "[".repeat(40),
            "]".repeat(40)
        );
        assert!(!agrees::<Checked>(&deep));
        // A tool input is kept whole by serde when it is wanted as a `Value`.
        assert!(!agrees::<serde_json::Value>(
            r#"{"event_type":"a","input":{}}"#
        ));
    }

    /// Lines put together at random from pieces near the edges of what the scanner takes:
    /// whatever it takes, it reads as serde does.
    #[test]
    fn random_lines_are_scanned_as_serde_reads_them_or_left_to_it() {
        const KEYS: &[&str] = &[
            "event_type",
            "turn",
            "tool_name",
            "input",
            "usage",
            "added",
            "status",
            "x",
            "event_id",
            "",
            "é",
            "timestamp",
            "max_turns",
            "outcome",
        ];
        const VALUES: &[&str] = &[
            "\"tool_call\"",
            "\"\"",
            "\"a\\\"b\"",
            "\"a\\nb\"",
            "\"\\u0041\"",
            "\"é✓\"",
            "\"a\tb\"",
            "0",
            "-1",
            "7",
            "123456789012345678",
            "1234567890123456789",
            "-0",
            "01",
            "1.0",
            "2e5",
            "-",
            "null",
            "true",
            "false",
            "nul",
            "[]",
            "{}",
            "[1,[2,{\"a\":[]}]]",
            "{\"a\":\"b\",\"c\":{}}",
            "[1,]",
            "{\"a\"}",
            "{\"a\":1,}",
            "[\"x\",3,\"y\"]",
            "{\"input_tokens\":5}",
            "1e400",
            "\"\\x\"",
        ];
        const GAPS: &[&str] = &["", "", "", " ", "\t", "\r\n", "\n"];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let (mut scanned, mut total) = (0, 0);
        for _ in 0..20_000 {
            let mut line = String::new();
            line.push_str(GAPS[next(GAPS.len())]);
            line.push('{');
            let fields = next(6);
            for i in 0..fields {
                if i > 0 {
                    line.push(',');
                }
                line.push_str(GAPS[next(GAPS.len())]);
                line.push_str(&format!("\"{}\"", KEYS[next(KEYS.len())]));
                line.push_str(GAPS[next(GAPS.len())]);
                line.push(':');
                line.push_str(GAPS[next(GAPS.len())]);
                line.push_str(VALUES[next(VALUES.len())]);
                line.push_str(GAPS[next(GAPS.len())]);
            }
            line.push('}');
            line.push_str(GAPS[next(GAPS.len())]);
            // Now and then, damage it.
            if next(8) == 0 {
                let at = next(line.len() + 1);
                let at = (0..=at)
                    .rev()
                    .find(|&i| line.is_char_boundary(i))
                    .unwrap_or(0);
                line.truncate(at);
            }
            total += 1;
            if agrees::<Checked>(&line) {
                scanned += 1;
            }
            agrees::<serde_json::Value>(&line);
        }
        // Enough of them are taken for the comparison to mean something.
        assert!(scanned * 5 > total, "{scanned} of {total} scanned");
    }

    /// The lines a session writes many of are the scanner's to read (the few it leaves to
    /// serde, such as `session_start` with its lists, cost nothing that matters).
    #[test]
    fn the_lines_a_session_writes_many_of_are_scanned() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let traces = [
            "tests/fixtures/traces/pull/workdir/ses_019ed2af76b57c42912b612f07dd4d51/trace.jsonl",
            "tests/fixtures/traces/failed/workdir/ses_0193a1b2d0007000800000000000f00f/trace.jsonl",
            "tests/fixtures/traces/delegation/workdir/ses_0193a1b2c3d47000800000000000a001/trace.jsonl",
            "../shared/conformance/traces/upstream-basic.trace.jsonl",
            "../shared/conformance/traces/upstream-pull.trace.jsonl",
        ];
        let many = [
            "inference",
            "tool_call",
            "shell",
            "skill_call",
            "task_start",
            "task_end",
        ];
        let mut seen = 0;
        for trace in traces {
            let text = std::fs::read_to_string(root.join(trace)).unwrap();
            for line in text.lines() {
                let want = serde_json::from_str::<Event<Checked>>(line).unwrap();
                if many.contains(&want.kind()) {
                    seen += 1;
                    assert!(agrees::<Checked>(line), "not scanned: {line}");
                }
            }
        }
        assert!(seen > 20, "{seen}");
    }
}
