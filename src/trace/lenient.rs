//! Lenient field types for trace lines.
//!
//! A trace written by another runtime version may use a key we know with a shape we do not
//! expect (a number where we read a string, an object where we read a list). Readers must not
//! fail on that: these wrappers keep the value when it has the expected shape and quietly drop
//! it otherwise, without buffering the skipped value.
//!
//! Strings are borrowed from the line being read whenever the JSON text allows it (no escapes),
//! so a line costs no allocation for the fields the views only look at; [`Checked`] reads a
//! value exactly as strictly as `serde_json::Value` would and keeps nothing, for readers that do
//! not print it. [`Field`] is the one reading rule per field type, for serde and for the line
//! scanner alike.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// Deserialize an optional string, borrowed from the input when it has no escapes; any other
/// JSON shape reads as `None`.
pub fn string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Cow<'de, str>>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<Cow<'de, str>>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
            Ok(Some(Cow::Borrowed(v)))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v.to_owned())))
        }
        fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v)))
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
            while a.next_element::<IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
            while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(None)
        }
    }
    d.deserialize_any(V)
}

/// Deserialize an optional integer (negative values allowed); any other shape reads as `None`.
pub fn int<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<i64>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Ok(Some(v))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(i64::try_from(v).unwrap_or(i64::MAX)))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Ok(v.is_finite().then_some(v as i64))
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
            while a.next_element::<IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
            while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(None)
        }
    }
    d.deserialize_any(V)
}

/// Deserialize an optional list of strings; non-string items are skipped, any other shape
/// reads as `None`.
pub fn strings<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    struct Item(Option<String>);
    impl<'de> Deserialize<'de> for Item {
        fn deserialize<D2: Deserializer<'de>>(d: D2) -> Result<Self, D2::Error> {
            string(d).map(|s| Item(s.map(Cow::into_owned)))
        }
    }
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<Vec<String>>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(Item(item)) = a.next_element::<Item>()? {
                out.extend(item);
            }
            Ok(Some(out))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
            while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(None)
        }
    }
    d.deserialize_any(V)
}

/// Deserialize an optional `{input_tokens, output_tokens}` object; any other shape reads as `None`.
pub fn usage<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Usage>, D::Error> {
    let value = serde_json::Value::deserialize(d)?;
    let get = |k: &str| value.get(k).and_then(serde_json::Value::as_u64);
    Ok(match (get("input_tokens"), get("output_tokens")) {
        (None, None) => None,
        (i, o) => Some(Usage {
            input_tokens: i.unwrap_or(0),
            output_tokens: o.unwrap_or(0),
        }),
    })
}

/// Token usage of one delegation as the parent recorded it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Usage {
    /// Input tokens the child spent.
    pub input_tokens: u64,
    /// Output tokens the child spent.
    pub output_tokens: u64,
}

/// How a trace field of this type is read: by serde (the derived `Deserialize` of
/// [`super::event::Event`] reads every field with [`read`]), and, for the values the line
/// scanner (`super::scan`) has already taken apart, what that same reading gives. One impl per
/// field type holds both, side by side, so the two ways of reading a line cannot drift apart.
pub trait Field<'de>: Sized {
    /// Read the field's value.
    fn read<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error>;

    /// What [`Field::read`] gives for a value of this shape, or `None` when the scanner must
    /// leave the line to serde (a shape it does not take apart for this type).
    fn scanned(value: Scanned<'de>) -> Option<Self>;
}

/// A value as the line scanner saw it: only the shapes it reads itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scanned<'a> {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool,
    /// An integer of at most 18 digits, no fraction or exponent (so it fits an `i64`, and
    /// serde_json reads it as the same `i64` or `u64`).
    Int(i64),
    /// A string, borrowed from the line when it has no escapes (only the escapes other than
    /// `\u`, which serde_json reads the same way, are unescaped by the scanner).
    Str(Cow<'a, str>),
    /// An array or object (already checked to be JSON that serde_json reads without error).
    Nested,
}

/// Read any trace field by its type's [`Field`] rule (the `deserialize_with` of every field).
pub fn read<'de, D: Deserializer<'de>, T: Field<'de>>(d: D) -> Result<T, D::Error> {
    T::read(d)
}

impl<'de> Field<'de> for Option<Cow<'de, str>> {
    fn read<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        string(d)
    }
    fn scanned(value: Scanned<'de>) -> Option<Self> {
        match value {
            Scanned::Str(s) => Some(Some(s)),
            Scanned::Null | Scanned::Bool | Scanned::Int(_) => Some(None),
            // `string` would read it as `None` too, but checking it the way `string` does
            // (keys as text) is serde's to do.
            Scanned::Nested => None,
        }
    }
}

impl<'de> Field<'de> for Option<i64> {
    fn read<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        int(d)
    }
    fn scanned(value: Scanned<'de>) -> Option<Self> {
        match value {
            Scanned::Int(n) => Some(Some(n)),
            Scanned::Null | Scanned::Bool | Scanned::Str(_) => Some(None),
            Scanned::Nested => None,
        }
    }
}

impl<'de> Field<'de> for Option<Vec<String>> {
    fn read<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        strings(d)
    }
    fn scanned(value: Scanned<'de>) -> Option<Self> {
        match value {
            Scanned::Null | Scanned::Bool | Scanned::Int(_) | Scanned::Str(_) => Some(None),
            Scanned::Nested => None,
        }
    }
}

impl<'de> Field<'de> for Option<Usage> {
    fn read<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        usage(d)
    }
    fn scanned(value: Scanned<'de>) -> Option<Self> {
        match value {
            // Not an object: no token counts in it.
            Scanned::Null | Scanned::Bool | Scanned::Int(_) | Scanned::Str(_) => Some(None),
            Scanned::Nested => None,
        }
    }
}

/// A tool input: `null` reads as absent, anything else as `I` reads it.
impl<'de, I: ToolInput> Field<'de> for Option<I> {
    fn read<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Option::<I>::deserialize(d)
    }
    fn scanned(value: Scanned<'de>) -> Option<Self> {
        match value {
            Scanned::Null => Some(None),
            _ => I::scanned().map(Some),
        }
    }
}

/// A JSON value read as strictly as `serde_json::Value` reads it, and dropped.
///
/// The views that print a tool call's input keep it as a `Value`; the ones that only count
/// calls (`mur trace report`) must still refuse exactly the lines a `Value` would refuse (a
/// string that is not UTF-8, a number out of range, nesting past the parser's depth limit), or a
/// damaged trace would read differently depending on the view. This visits every part of the
/// value the way `Value` does, through `deserialize_any` and text that is checked, without
/// building anything.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Checked;

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Checked;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any valid JSON value")
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Checked, E> {
                Ok(Checked)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Checked, E> {
                Ok(Checked)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Checked, E> {
                Ok(Checked)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Checked, E> {
                Ok(Checked)
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Checked, E> {
                Ok(Checked)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Checked, E> {
                Ok(Checked)
            }
            fn visit_none<E: de::Error>(self) -> Result<Checked, E> {
                Ok(Checked)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Checked, D::Error> {
                Checked::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Checked, A::Error> {
                while a.next_element::<Checked>()?.is_some() {}
                Ok(Checked)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Checked, A::Error> {
                // Keys as `Value` reads them: as checked strings.
                while a.next_key::<Checked>()?.is_some() {
                    a.next_value::<Checked>()?;
                }
                Ok(Checked)
            }
        }
        d.deserialize_any(V)
    }
}

/// What a tool call's `input` is read into: the value itself, or only its check.
///
/// [`super::event::Event`] is generic over this so that one reader serves the views that print
/// inputs (`serde_json::Value`) and the ones that do not ([`Checked`]) with the same strictness.
pub trait ToolInput: for<'de> Deserialize<'de> {
    /// The input as a `Value`, if this form keeps it.
    fn into_value(self) -> Option<serde_json::Value>;

    /// What reading a value the line scanner has checked gives, when this form keeps nothing
    /// of it; `None` when it must be read by serde.
    fn scanned() -> Option<Self>;
}

impl ToolInput for serde_json::Value {
    fn into_value(self) -> Option<serde_json::Value> {
        Some(self)
    }
    fn scanned() -> Option<Self> {
        None
    }
}

impl ToolInput for Checked {
    fn into_value(self) -> Option<serde_json::Value> {
        None
    }
    fn scanned() -> Option<Self> {
        Some(Checked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Checked` accepts and refuses exactly what `Value` does, with the same message.
    #[test]
    fn checked_is_as_strict_as_value() {
        let deep_ok = format!("{}1{}", "[".repeat(127), "]".repeat(127));
        let deep_bad = format!("{}1{}", "[".repeat(130), "]".repeat(130));
        let deep_map = format!("{}1{}", "{\"a\":".repeat(130), "}".repeat(130));
        let cases: Vec<Vec<u8>> = vec![
            b"{\"a\":[1,-2,3.5,true,null,\"x\\u00e9\"]}".to_vec(),
            b"1e400".to_vec(),
            b"-1e400".to_vec(),
            b"123456789012345678901234567890".to_vec(),
            b"\"\\ud800\"".to_vec(),
            b"{\"\xff\":1}".to_vec(),
            b"[\"\xc3\x28\"]".to_vec(),
            b"{\"a\" 1}".to_vec(),
            b"{\"a\":1,\"a\":2}".to_vec(),
            b"[1,]".to_vec(),
            b"\"tab\there\"".to_vec(),
            deep_ok.into_bytes(),
            deep_bad.into_bytes(),
            deep_map.into_bytes(),
        ];
        for case in cases {
            let value = serde_json::from_slice::<serde_json::Value>(&case).map(|_| ());
            let checked = serde_json::from_slice::<Checked>(&case).map(|_| ());
            assert_eq!(
                value.map_err(|e| e.to_string()),
                checked.map_err(|e| e.to_string()),
                "{}",
                String::from_utf8_lossy(&case)
            );
        }
    }
}
