//! Strict typed readings of JSON, for the fast paths that stand beside a `Value` reading
//! (`super::chat_completion`, `super::anthropic_reply`).
//!
//! A fast path may answer only what its `Value` reading would answer the same way, and serde is
//! more lenient than that in two places. A derived struct also reads from a JSON array,
//! positionally: [`Obj`] accepts a map only ([`Member`] tells an absent member from a `null`
//! one, where the `Value` reading does). And serde_json skips a member that a struct does not
//! read with fewer checks than it reads one: [`skips_like_value`] says when a text is safe
//! from that.

use std::fmt;
use std::marker::PhantomData;

use crate::trace::lenient::Checked;

use serde::de::value::MapAccessDeserializer;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// A JSON object read as `T`; an array (which a derived struct would read positionally) is an
/// error.
pub(crate) struct Obj<T>(pub(crate) T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Only<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Only<T> {
            type Value = T;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(Only(PhantomData)).map(Obj)
    }
}

/// A member that is absent, `null`, or a value: the `Value` reading tells `null` from absent
/// for `reasoning_content` (a `null` one hides `reasoning`).
#[derive(Default)]
pub(crate) enum Member<T> {
    /// Not in the object.
    #[default]
    Absent,
    /// `null`.
    Null,
    /// A value.
    Is(T),
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Member<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Option::<T>::deserialize(d)? {
            None => Member::Null,
            Some(v) => Member::Is(v),
        })
    }
}

/// Whether serde_json, skipping the members of `json` that a typed reading does not read,
/// refuses what the `Value` reading refuses: the text passes the trace reader's [`Checked`],
/// which reads every value exactly as strictly as `Value` and keeps nothing. Skipping a value,
/// serde_json checks its syntax but not three things the `Value` reading refuses: a `\u`
/// escape of half a surrogate pair, a number too large for an `f64` (`1e400`), and nesting
/// past its limit (and, reading bytes, text that is not UTF-8: the fuzzer found that one in
/// `object`, answered by the typed reading and refused by the `Value` one). For a tool call's
/// reply it is 0.46 µs of the fast path's 1.40: a second pass, but no tree built.
pub(crate) fn skips_like_value(json: &str) -> bool {
    serde_json::from_str::<Checked>(json).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_the_value_reading_refuses_is_not_left_to_a_skip() {
        let deep = |n| format!(r#"{{"x":{}{}}}"#, "[".repeat(n), "]".repeat(n));
        for good in [
            r#"{"id":"c","object":"chat.completion","created":1733,"x":-2.5E+3,"e":"\ud83d\ude00"}"#,
            &deep(120),
        ] {
            assert!(skips_like_value(good), "{good}");
        }
        for bad in [
            r#"{"object":"chat.complet\ud800on"}"#,
            r#"{"object":"\uDC00"}"#,
            r#"{"created":1e400}"#,
            &deep(130),
            r#"{"unterminated":"abc"#,
        ] {
            assert!(!skips_like_value(bad), "{bad}");
            // What makes it worth checking: a skip accepts it.
            let skipped = serde_json::from_str::<serde::de::IgnoredAny>(bad).is_ok();
            let value = serde_json::from_str::<serde_json::Value>(bad).is_ok();
            assert!(!value, "{bad}");
            if !bad.starts_with(r#"{"unterminated"#) {
                assert!(skipped, "{bad}");
            }
        }
    }
}
