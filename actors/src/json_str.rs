//! JSON strings, fast: finding where one ends, and writing one that needs no escape.
//!
//! Trace lines are JSON objects of short keys, ids, hashes and small numbers, written ten per
//! delegated child and read a million at a time by `mur trace report`. serde_json escapes a
//! string one byte at a time through a table and writes it in three calls; on a 10,000-child
//! fan-out that was an eighth of the process's instructions, nearly all of it for strings that
//! hold nothing to escape. Here the bytes that would need it (`"`, `\` and the control
//! characters, the set serde_json escapes) are searched sixteen at a time, a string without them
//! is copied as it is, and anything else is left to serde_json, so the bytes written are
//! serde_json's own. The same search finds the end of a string for the trace reader's scanner.

use serde::ser::{self, Impossible};
use serde::Serialize;

/// Offset of the first byte in `bytes` that ends or interrupts a JSON string: `"`, `\` or a
/// control character (below 0x20, which JSON does not allow in a string). Sixteen bytes at a
/// time with SSE2 (part of every x86_64), then eight at a time in a `u64` (on other targets,
/// all of it). Always inlined: a call per string was a sixth of `mur trace report`'s time.
#[inline(always)]
pub fn find_special(bytes: &[u8]) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        let mut at = 0;
        while at + 16 <= bytes.len() {
            let mask = special_mask(bytes, at);
            if mask != 0 {
                return Some(at + mask.trailing_zeros() as usize);
            }
            at += 16;
        }
        find_special_words(&bytes[at..]).map(|i| at + i)
    }
    #[cfg(not(target_arch = "x86_64"))]
    find_special_words(bytes)
}

/// Bit `i` set when `bytes[at + i]` (for `i` below 16) ends or interrupts a JSON string.
#[cfg(target_arch = "x86_64")]
#[inline]
fn special_mask(bytes: &[u8], at: usize) -> u32 {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    let block = &bytes[at..at + 16];
    // SAFETY: SSE2 is in x86_64's baseline, so these intrinsics are always available; the
    // unaligned load reads the sixteen bytes of `block`.
    unsafe {
        let v = _mm_loadu_si128(block.as_ptr().cast());
        let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
        let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
        // A byte is below 0x20 when its unsigned minimum with 0x1f is itself.
        let control = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
        _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control)) as u32
    }
}

/// [`find_special`], eight bytes at a time in a `u64`.
#[inline]
fn find_special_words(bytes: &[u8]) -> Option<usize> {
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for word in &mut words {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        let found = word_hits(u64::from_le_bytes(w));
        if found != 0 {
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    // The last few bytes, padded with zeros: a hit in the padding (a zero is a control
    // character) means no special byte in the string.
    let rest = words.remainder();
    let mut w = [0u8; 8];
    w[..rest.len()].copy_from_slice(rest);
    let first = (word_hits(u64::from_le_bytes(w)).trailing_zeros() / 8) as usize;
    (first < rest.len()).then_some(at + first)
}

/// The high bit of each byte of `x` (eight bytes, little-endian) below 0x20, or equal to `"` or
/// `\`. Only the lowest bit set is exact (a borrow only runs upwards, from a byte that is a hit
/// itself), so the word is zero exactly when none of its bytes is a hit.
#[inline]
fn word_hits(x: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let quote = x ^ (ONES * u64::from(b'"'));
    let backslash = x ^ (ONES * u64::from(b'\\'));
    (x.wrapping_sub(ONES * 0x20) & !x
        | quote.wrapping_sub(ONES) & !quote
        | backslash.wrapping_sub(ONES) & !backslash)
        & HIGH
}

/// True when `s` holds a byte JSON escapes. Most strings written are keys and short values: from
/// 8 to 15 bytes long, their first and last eight bytes are checked as two words.
#[inline]
fn needs_escape(s: &[u8]) -> bool {
    match s.len() {
        16.. => find_special(s).is_some(),
        8.. => {
            let (Some(first), Some(last)) = (s.first_chunk::<8>(), s.last_chunk::<8>()) else {
                return true;
            };
            word_hits(u64::from_le_bytes(*first)) | word_hits(u64::from_le_bytes(*last)) != 0
        }
        _ => s.iter().any(|&b| b == b'"' || b == b'\\' || b < 0x20),
    }
}

/// Append `s` as a JSON string, quotes included: exactly what serde_json writes.
#[inline]
pub fn push_str(out: &mut Vec<u8>, s: &str) {
    if needs_escape(s.as_bytes()) {
        // Writing to a Vec cannot fail.
        let _ = serde_json::to_writer(out, s);
        return;
    }
    out.reserve(s.len() + 2);
    out.push(b'"');
    out.extend_from_slice(s.as_bytes());
    out.push(b'"');
}

/// Append `value` as JSON, as `serde_json::to_writer` does (false, with nothing written, when
/// it fails). Strings, integers, booleans, `null` and unit enum variants (and those inside an
/// `Option` or a newtype) are written here; anything else goes through serde_json.
pub fn push_value<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> bool {
    if value.serialize(Direct { out: &mut *out }).is_ok() {
        return true;
    }
    let at = out.len();
    if serde_json::to_writer(&mut *out, value).is_err() {
        out.truncate(at);
        return false;
    }
    true
}

/// A serializer for the plain values [`push_value`] writes itself. It writes nothing when it
/// refuses a value ([`NotDirect`]), so the caller can hand the value to serde_json instead.
struct Direct<'o> {
    out: &'o mut Vec<u8>,
}

/// [`Direct`]'s refusal: a value serde_json must write.
#[derive(Debug, thiserror::Error)]
#[error("not a plain value")]
struct NotDirect;

impl ser::Error for NotDirect {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        NotDirect
    }
}

impl Direct<'_> {
    fn integer(self, n: impl itoa::Integer) -> Result<(), NotDirect> {
        self.out
            .extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
        Ok(())
    }
}

impl ser::Serializer for Direct<'_> {
    type Ok = ();
    type Error = NotDirect;
    type SerializeSeq = Impossible<(), NotDirect>;
    type SerializeTuple = Impossible<(), NotDirect>;
    type SerializeTupleStruct = Impossible<(), NotDirect>;
    type SerializeTupleVariant = Impossible<(), NotDirect>;
    type SerializeMap = Impossible<(), NotDirect>;
    type SerializeStruct = Impossible<(), NotDirect>;
    type SerializeStructVariant = Impossible<(), NotDirect>;

    fn serialize_bool(self, v: bool) -> Result<(), NotDirect> {
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), NotDirect> {
        self.integer(v)
    }
    fn serialize_i16(self, v: i16) -> Result<(), NotDirect> {
        self.integer(v)
    }
    fn serialize_i32(self, v: i32) -> Result<(), NotDirect> {
        self.integer(v)
    }
    fn serialize_i64(self, v: i64) -> Result<(), NotDirect> {
        self.integer(v)
    }
    fn serialize_u8(self, v: u8) -> Result<(), NotDirect> {
        self.integer(v)
    }
    fn serialize_u16(self, v: u16) -> Result<(), NotDirect> {
        self.integer(v)
    }
    fn serialize_u32(self, v: u32) -> Result<(), NotDirect> {
        self.integer(v)
    }
    fn serialize_u64(self, v: u64) -> Result<(), NotDirect> {
        self.integer(v)
    }
    fn serialize_f32(self, _: f32) -> Result<(), NotDirect> {
        Err(NotDirect)
    }
    fn serialize_f64(self, _: f64) -> Result<(), NotDirect> {
        Err(NotDirect)
    }
    fn serialize_char(self, v: char) -> Result<(), NotDirect> {
        push_str(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), NotDirect> {
        push_str(self.out, v);
        Ok(())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), NotDirect> {
        Err(NotDirect)
    }
    fn serialize_none(self) -> Result<(), NotDirect> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), NotDirect> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), NotDirect> {
        self.serialize_none()
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), NotDirect> {
        self.serialize_none()
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), NotDirect> {
        push_str(self.out, variant);
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), NotDirect> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), NotDirect> {
        Err(NotDirect)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, NotDirect> {
        Err(NotDirect)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, NotDirect> {
        Err(NotDirect)
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, NotDirect> {
        Err(NotDirect)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, NotDirect> {
        Err(NotDirect)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, NotDirect> {
        Err(NotDirect)
    }
    fn serialize_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStruct, NotDirect> {
        Err(NotDirect)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, NotDirect> {
        Err(NotDirect)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_special_byte_search_finds_the_first_one() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..5000 {
            // Up to 80 bytes: the 16-byte steps, the 8-byte ones and the padded tail; special
            // bytes dense in some rounds, rare in others (so that the first one is often far in).
            let len = (next() % 80) as usize;
            let spread = if round % 2 == 0 { 24 } else { 400 };
            let hay: Vec<u8> = (0..len)
                .map(|_| match next() % spread {
                    0 => b'"',
                    1 => b'\\',
                    2 => 0x1f,
                    3 => 0x20,
                    4 => 0x80,
                    5 => 0xff,
                    6 => 0x00,
                    r => b'a' + (r % 26) as u8,
                })
                .collect();
            let want = hay
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20);
            assert_eq!(find_special(&hay), want, "{hay:?}");
            assert_eq!(find_special_words(&hay), want, "{hay:?}");
        }
    }

    /// What [`push_value`] writes for `value`: serde_json's bytes.
    fn written<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
        let mut out = b"[".to_vec();
        assert!(push_value(&mut out, value));
        out.drain(..1);
        out
    }

    #[test]
    fn values_are_written_as_serde_json_writes_them() {
        #[derive(Serialize)]
        #[serde(rename_all = "snake_case")]
        enum Status {
            Ok,
            TimedOut,
            Failed(String),
        }
        #[derive(Serialize)]
        struct Id(String);
        #[derive(Serialize)]
        struct Unit;
        #[derive(Serialize)]
        struct Pair {
            a: u8,
            b: &'static str,
        }
        let long = "x".repeat(40) + "\"q\" and \\ and \u{1f}" + &"y".repeat(40);
        let raw = serde_json::value::RawValue::from_string("{\"kept\": [1, 2]}".into()).unwrap();
        macro_rules! same {
            ($($v:expr),* $(,)?) => {$(
                assert_eq!(
                    String::from_utf8(written(&$v)).unwrap(),
                    serde_json::to_string(&$v).unwrap(),
                    "{}", stringify!($v)
                );
            )*};
        }
        same!(
            "",
            "plain",
            "a\"b",
            "tab\there",
            "\u{7f}\u{80}é✓🦀",
            "0123456789abcdef0123",
            long,
            String::from("owned"),
            'c',
            '"',
            true,
            false,
            0u8,
            255u8,
            -128i8,
            i16::MIN,
            u16::MAX,
            i32::MIN,
            u32::MAX,
            i64::MIN,
            i64::MAX,
            u64::MAX,
            i128::MIN,
            u128::MAX,
            1.5f64,
            f64::NAN,
            -0.0f32,
            None::<&str>,
            Some("x"),
            Some(Some(7u32)),
            (),
            Unit,
            Id("ses_1".into()),
            Status::Ok,
            Status::TimedOut,
            Status::Failed("why".into()),
            Pair { a: 1, b: "two" },
            vec!["a", "b"],
            [1u8; 3],
            (1, "t"),
            serde_json::json!(null),
            serde_json::json!("v\n"),
            serde_json::json!(12),
            serde_json::json!(-3),
            serde_json::json!(2.25),
            serde_json::json!({"k": [1, "x"]}),
            raw,
        );
    }

    #[test]
    fn a_value_serde_json_refuses_leaves_nothing_behind() {
        struct Refused;
        impl Serialize for Refused {
            fn serialize<S: ser::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use ser::SerializeSeq;
                let mut seq = s.serialize_seq(None)?;
                seq.serialize_element(&1)?;
                Err(ser::Error::custom("no"))
            }
        }
        let mut out = b"kept".to_vec();
        assert!(!push_value(&mut out, &Refused));
        assert_eq!(out, b"kept");
    }

    #[test]
    fn a_byte_to_escape_is_seen_wherever_it_is() {
        for len in 0..40 {
            let plain = vec![b'k'; len];
            assert!(!needs_escape(&plain), "{len}");
            for at in 0..len {
                for special in [b'"', b'\\', 0x00, 0x1f] {
                    let mut s = plain.clone();
                    s[at] = special;
                    assert!(needs_escape(&s), "{len} {at} {special}");
                }
                let mut s = plain.clone();
                s[at] = 0x20;
                assert!(!needs_escape(&s), "{len} {at}");
            }
        }
    }

    #[test]
    fn strings_with_nothing_to_escape_are_copied_and_others_escaped() {
        for s in [
            "",
            "evt_0193c0ffee0070000000000000000001",
            "a\\b",
            "\n",
            "\u{0}",
        ] {
            let mut out = Vec::new();
            push_str(&mut out, s);
            assert_eq!(out, serde_json::to_vec(s).unwrap(), "{s:?}");
        }
    }
}
