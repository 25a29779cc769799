//! Request bodies written straight to bytes, and the encoded history kept between calls.
//!
//! Why: a session's request carries its whole history every turn. Building it as a
//! `serde_json::Value` tree (a map, a `String` key and a boxed value per member, a clone of every
//! tool input) and then printing it cost a long session a third of its CPU, most of its
//! allocator time, and ~3.5 µs per earlier turn on every turn. Now each driver describes its
//! wire objects as `#[derive(Serialize)]` structs borrowing from the neutral request, and
//! `serde_json::to_writer` prints them into a byte buffer: no tree, no key strings.
//!
//! The history only grows at its end, so its encoding does too: each driver keeps, per history,
//! a [`Prefix`] — the wire items of the history's first `covered` messages, comma-joined — and
//! encodes only the messages added since. The prefix lives inside the history itself
//! ([`mur_actors::model::History::with_encoding`]), never in the driver, so one driver serving
//! many sessions (drivers are shared as `Arc<dyn ModelDriver>`) needs no key, no eviction, and
//! cannot mix two sessions up; and since a `History` can only be appended to (a shared one is
//! copied, with an empty slot, before the push), the bytes of its first `covered` messages
//! never go stale. The prefix is also tagged with what else shaped its bytes (the driver's
//! options that change how a message is written, via the `K` of [`Prefix`]), and is started
//! over when that differs. The cost is memory: a history's encoding is kept as long as the
//! history, roughly doubling what a long conversation holds.
//!
//! What cannot be kept is re-encoded each call: Anthropic merges consecutive tool results into
//! one `user` message, so the trailing run of tool results (not yet closed by a later message)
//! is written fresh into the [`Prefix::tail`]; and Anthropic's prompt-cache marker sits on the
//! *last* cacheable block of the conversation, which moves every turn, so blocks are kept
//! unmarked and the marker is spliced in at the recorded offset of the last one ([`Part::mark`]).
//!
//! The tool array is the same call after call (a session offers one `Arc` of tools until its
//! inventory changes), and with many tools or long schemas it is not small: its encoding is
//! kept in the prefix too ([`Kept`]), for as long as the request offers the same array; so is the
//! system prompt's.
//!
//! The kept items are not copied into the body: they are lent to it (`super::request_body`).
//! The body around the history is small and built each call: a `Head` struct for the members
//! before the history and a `Rest` struct for those after it ([`open_object`] / [`key`] /
//! [`close_object`] join them into one object), so the member order stays the one the structs
//! declare. The bytes are exactly what the old `Value` builders printed (serde_json with
//! `preserve_order` prints a map in insertion order, a struct in declaration order); the tests
//! in `tests/request_encoding.rs` keep those builders as the oracle.

use std::fmt::{self, Write as _};
use std::sync::Arc;

use bytes::Bytes;
use mur_actors::model::{ContentBlock, ToolSpec};
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;

use super::request_body::{self, BodyWriter, RequestBody};

/// A comma-joined run of wire items (array elements, without the brackets).
///
/// The bytes are shared so that a request body can carry them without a copy
/// (`super::request_body`); writing to them copies first only if a body still holds them.
#[derive(Default)]
pub(crate) struct Part {
    /// The encoded items.
    pub(crate) bytes: Arc<Vec<u8>>,
    /// How many items `bytes` holds.
    count: usize,
    /// Anthropic: the offset in `bytes` of the closing `}` of the last prompt-cacheable block,
    /// where the cache marker goes if no later block takes it.
    pub(crate) mark: Option<usize>,
}

impl Part {
    /// Starts a new item (writing the separator) and returns the buffer to write it into.
    pub(crate) fn item(&mut self) -> &mut Vec<u8> {
        let bytes = Arc::make_mut(&mut self.bytes);
        if self.count > 0 {
            bytes.push(b',');
        }
        self.count += 1;
        bytes
    }

    /// The buffer, to go on writing the current item.
    pub(crate) fn buf(&mut self) -> &mut Vec<u8> {
        Arc::make_mut(&mut self.bytes)
    }

    /// True when no item was written.
    pub(crate) fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Empties the part, keeping its buffer unless a body still holds it.
    pub(crate) fn clear(&mut self) {
        match Arc::get_mut(&mut self.bytes) {
            Some(bytes) => bytes.clear(),
            None => self.bytes = Arc::default(),
        }
        self.count = 0;
        self.mark = None;
    }

    /// Records that the object just written ends a prompt-cacheable block.
    pub(crate) fn mark_last(&mut self) {
        self.mark = self.bytes.len().checked_sub(1);
    }

    /// Lends `bytes[from..to]` to a request body, without copying.
    pub(crate) fn lend(&self, from: usize, to: usize) -> Bytes {
        request_body::lend(&self.bytes, from, to)
    }

    /// Lends all the bytes to a request body, without copying.
    pub(crate) fn lend_all(&self) -> Bytes {
        self.lend(0, self.bytes.len())
    }
}

/// One history's encoding for one driver shape `K`, kept in the history between calls.
pub(crate) struct Prefix<K> {
    /// What shaped the bytes besides the messages; `None` before the first use.
    key: Option<K>,
    /// How many history messages `done` covers.
    pub(crate) covered: usize,
    /// The wire items of the first `covered` messages.
    pub(crate) done: Part,
    /// Scratch for the items that are re-encoded every call (kept for its buffer).
    pub(crate) tail: Part,
    /// What the last body held around its items (head, system, tools, …), to size the next.
    extra_hint: usize,
    /// The tool array's encoding.
    pub(crate) tools: Kept<Vec<ToolSpec>>,
    /// The system prompt's encoding.
    pub(crate) system: Kept<str>,
}

impl<K> Default for Prefix<K> {
    fn default() -> Self {
        Prefix {
            key: None,
            covered: 0,
            done: Part::default(),
            tail: Part::default(),
            extra_hint: 0,
            tools: Kept::default(),
            system: Kept::default(),
        }
    }
}

/// An encoding kept while requests carry the same value (the same `Arc`, held here so it cannot
/// be freed and its address reused) and the same `variant` (what else shaped the bytes:
/// Anthropic's cache marker on the last tool). The tool array and the system prompt are fixed
/// for most of a session; writing them again every turn escaped every byte of them (the
/// prompt alone was 5,600 of the 16,600 instructions of turn_bench's encoding).
pub(crate) struct Kept<T: ?Sized> {
    /// The value, its variant and their encoding.
    kept: Option<(Arc<T>, bool, Box<RawValue>)>,
}

impl<T: ?Sized> Default for Kept<T> {
    fn default() -> Self {
        Kept { kept: None }
    }
}

impl<T: ?Sized> Kept<T> {
    /// `value` as `encode` writes it, encoded only when the cache held another value or
    /// variant.
    fn get(
        &mut self,
        value: &Arc<T>,
        variant: bool,
        encode: impl FnOnce(&T) -> serde_json::Result<Box<RawValue>>,
    ) -> serde_json::Result<&RawValue> {
        let kept = match self.kept.take() {
            Some(k) if Arc::ptr_eq(&k.0, value) && k.1 == variant => self.kept.insert(k),
            _ => self.kept.insert((value.clone(), variant, encode(value)?)),
        };
        Ok(&kept.2)
    }
}

impl Kept<Vec<ToolSpec>> {
    /// The request's tool array as `encode` writes it, `None` when it offers no tool: what a
    /// body's `tools` member holds.
    pub(crate) fn member(
        &mut self,
        tools: &Arc<Vec<ToolSpec>>,
        variant: bool,
        encode: impl FnOnce(&[ToolSpec]) -> serde_json::Result<Box<RawValue>>,
    ) -> serde_json::Result<Option<&RawValue>> {
        if tools.is_empty() {
            return Ok(None);
        }
        self.get(tools, variant, |t| encode(t)).map(Some)
    }
}

impl Kept<str> {
    /// The system prompt, trimmed, as a JSON string, `None` when it is empty: what a body's
    /// system member holds.
    pub(crate) fn string(&mut self, prompt: &Arc<str>) -> serde_json::Result<Option<&RawValue>> {
        if prompt.trim().is_empty() {
            return Ok(None);
        }
        self.get(prompt, false, |p| serde_json::value::to_raw_value(p.trim()))
            .map(Some)
    }
}

impl<K: PartialEq> Prefix<K> {
    /// Makes the prefix one for `key` and a history of `len` messages: kept when it was
    /// encoded for the same key from no more messages than there are, else started over.
    pub(crate) fn check(&mut self, key: K, len: usize) {
        if self.key.as_ref() != Some(&key) || self.covered > len {
            *self = Prefix {
                key: Some(key),
                ..Prefix::default()
            };
        }
        self.tail.clear();
    }

    /// Forgets everything (after a failed encoding, whose bytes may be half-written).
    pub(crate) fn reset(&mut self) {
        *self = Prefix::default();
    }

    /// A writer for the body, once the prefix is up to date: room for what the last body held
    /// around the items, with some to spare (the items themselves are lent, not copied).
    pub(crate) fn body_buffer(&self) -> BodyWriter {
        BodyWriter::with_capacity(self.extra_hint + self.extra_hint / 4 + 256)
    }

    /// Notes the size of the body just written.
    pub(crate) fn wrote(&mut self, body: &RequestBody) {
        let items = self.done.bytes.len() + self.tail.bytes.len();
        self.extra_hint = body.len().saturating_sub(items);
    }
}

/// Writes `head` as the start of an object left open for more members: `{"a":1,"b":2`.
pub(crate) fn open_object<T: Serialize>(out: &mut Vec<u8>, head: &T) -> serde_json::Result<()> {
    serde_json::to_writer(&mut *out, head)?;
    // A struct prints as `{…}`: drop the `}` so members can follow.
    out.pop();
    Ok(())
}

/// Writes the member name `name` (plain ASCII, nothing to escape) of an open object.
pub(crate) fn key(out: &mut Vec<u8>, name: &str) {
    if out.last() != Some(&b'{') {
        out.push(b',');
    }
    out.push(b'"');
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
}

/// Writes `rest`'s members after the open object's last member, and closes it: `,"c":3}`.
pub(crate) fn close_object<T: Serialize>(out: &mut Vec<u8>, rest: &T) -> serde_json::Result<()> {
    let had_members = out.last() != Some(&b'{');
    let at = out.len();
    serde_json::to_writer(&mut *out, rest)?;
    if out.len() == at + 2 {
        // `rest` has no member: its `{}` becomes the closing `}` alone.
        out.truncate(at);
        out.push(b'}');
    } else if had_members {
        // `rest`'s `{` becomes the separator after the last member.
        out[at] = b',';
    } else {
        out.remove(at);
    }
    Ok(())
}

/// The text blocks of a content list joined with `\n`, written without building the string
/// (`mur_actors::model::joined_text` as a JSON string).
#[derive(Clone, Copy)]
pub(crate) struct Joined<'a>(pub(crate) &'a [ContentBlock]);

impl Joined<'_> {
    fn texts(&self) -> impl Iterator<Item = &str> {
        self.0.iter().filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
    }

    /// True when the joined text is `""`: no text block, or a single empty one.
    pub(crate) fn is_empty(&self) -> bool {
        let mut texts = self.texts();
        match (texts.next(), texts.next()) {
            (None, _) => true,
            (Some(first), None) => first.is_empty(),
            (Some(_), Some(_)) => false,
        }
    }
}

impl fmt::Display for Joined<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, text) in self.texts().enumerate() {
            if i > 0 {
                f.write_char('\n')?;
            }
            f.write_str(text)?;
        }
        Ok(())
    }
}

impl Serialize for Joined<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Tool call arguments as the OpenAI wire string: a raw string input verbatim, anything else
/// as its compact JSON text (written escaped, without building the string first).
#[derive(Clone, Copy)]
pub(crate) struct Arguments<'a>(pub(crate) &'a Value);

impl Serialize for Arguments<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::String(raw) => serializer.serialize_str(raw),
            // `Value`'s `Display` is its compact JSON text.
            other => serializer.collect_str(other),
        }
    }
}

/// `description` as the drivers send it: omitted when absent or empty.
pub(crate) fn description(d: &Option<String>) -> Option<&str> {
    d.as_deref().filter(|d| !d.is_empty())
}

/// For `skip_serializing_if`: omit a `false` flag.
pub(crate) fn is_false(b: &bool) -> bool {
    !*b
}
