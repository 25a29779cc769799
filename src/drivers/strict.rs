//! Strict typed readings of JSON, for the fast paths that stand beside a `Value` reading
//! (`super::chat_completion`, `super::anthropic_reply`).
//!
//! A fast path may answer only what its `Value` reading would answer the same way, and serde's
//! derived structs are more lenient than that in one place: a struct also reads from a JSON
//! array, positionally. [`Obj`] accepts a map only. [`Member`] tells an absent member from a
//! `null` one, where the `Value` reading does.

use std::fmt;
use std::marker::PhantomData;

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
