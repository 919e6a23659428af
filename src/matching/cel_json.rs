//! JSON read straight into the CEL values an expression evaluates over: one pass over the
//! request's own text, no intermediate tree, and strings without escapes borrowed from the
//! text rather than copied (a label or an image that is only compared is never copied).
//!
//! The values are the `cel` crate's built-in ones (`map`, `list`, `string`, `int`, `uint`,
//! `double`, `bool`, `null`), so every operator, function and conversion treats them as it
//! treats any other; their maps and lists share their contents, so binding one to a variable
//! again (another condition, another policy, a comprehension's element) costs a reference
//! count. Numbers read as kube-apiserver's CEL values of unstructured JSON read them
//! (`staging/src/k8s.io/apiserver/pkg/cel/types.go`, `UnstructuredToVal`): an integer is an
//! `int`, an integer past `int64` that fits `uint64` a `uint` (as the `serde_json::Value`
//! path read it), anything else a `double`.

use std::collections::HashMap;
use std::fmt;

use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelUInt,
};
use cel::common::value::Val;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// A CEL value that may borrow from the JSON text it was read from.
pub(crate) type JsonVal<'v> = Box<dyn Val + 'v>;

/// Reads `text` (one JSON value) as a CEL value; with serde_json's recursion limit unless
/// `unbounded` (only inside `deep_json::read_deep`'s `read`, on a stack grown for it).
///
/// # Errors
/// serde_json's: its recursion limit when bounded, or text that is not JSON.
pub(crate) fn read(text: &str, unbounded: bool) -> Result<JsonVal<'_>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    if unbounded {
        de.disable_recursion_limit();
    }
    let value = ValueSeed.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// `raw` read as [`read`] does; an absent value is `null`.
///
/// # Errors
/// As [`read`].
pub(crate) fn read_raw(
    raw: Option<&serde_json::value::RawValue>,
    unbounded: bool,
) -> Result<JsonVal<'_>, serde_json::Error> {
    match raw {
        None => Ok(null()),
        Some(raw) => read(raw.get(), unbounded),
    }
}

/// CEL's `null`.
pub(crate) fn null() -> JsonVal<'static> {
    Box::new(CelNull)
}

/// `value` as a CEL value of the same shape, made once to be bound many times (each binding
/// of a map or list is then a reference count).
pub(crate) fn from_value(value: cel::Value) -> JsonVal<'static> {
    // Only a function value has no `Val` form; nothing built from JSON or the request is one.
    JsonVal::try_from(value).unwrap_or_else(|_| null())
}

/// Reads one JSON value as a CEL value.
struct ValueSeed;

impl<'de> DeserializeSeed<'de> for ValueSeed {
    type Value = JsonVal<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = JsonVal<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Self::Value, E> {
        Ok(Box::new(CelBool::from(b)))
    }

    fn visit_i64<E>(self, i: i64) -> Result<Self::Value, E> {
        Ok(Box::new(CelInt::from(i)))
    }

    fn visit_u64<E>(self, u: u64) -> Result<Self::Value, E> {
        Ok(match i64::try_from(u) {
            Ok(i) => Box::new(CelInt::from(i)),
            Err(_) => Box::new(CelUInt::from(u)),
        })
    }

    fn visit_f64<E>(self, d: f64) -> Result<Self::Value, E> {
        Ok(Box::new(CelDouble::from(d)))
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(Box::new(CelString::from(s)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Box::new(CelString::from(s.to_string())))
    }

    fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
        Ok(Box::new(CelString::from(s)))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Box::new(CelNull))
    }

    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(Box::new(CelNull))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element_seed(ValueSeed)? {
            items.push(item);
        }
        Ok(Box::new(CelList::from(items)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut entries = HashMap::with_capacity(map.size_hint().unwrap_or(0));
        // A repeated key keeps its last value, as encoding/json's decoder and serde_json's do.
        while let Some(key) = map.next_key_seed(KeySeed)? {
            let value = map.next_value_seed(ValueSeed)?;
            entries.insert(key, value);
        }
        Ok(Box::new(CelMap::from(entries)))
    }
}

/// Reads an object's key, borrowed when it has no escapes.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = CelMapKey<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = CelMapKey<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(CelMapKey::from(s))
    }

    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(CelMapKey::from(s.to_string()))
    }

    fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
        Ok(CelMapKey::from(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cel::Value;

    /// The values read are those the `serde_json::Value` path gave (`conditions::json_to_cel`),
    /// numbers included: the same `Value` once converted back.
    #[test]
    fn reads_what_the_json_tree_path_read() {
        for text in [
            r#"{"a":1,"b":-2,"c":18446744073709551615,"d":1.5,"f":"x\"y","g":[true,null,"z"],"h":{},"i":[],"j":-0,"k":1.0}"#,
            r#"{"a":1,"a":2}"#,
            r#"[1,[2,[3]],{"k":"v"}]"#,
            r#""\u00e9""#,
            "[1e400]",
        ] {
            let Ok(ours) = read(text, false) else {
                // 1e400 is out of f64's range: both paths refuse it.
                assert!(
                    serde_json::from_str::<serde_json::Value>(text).is_err(),
                    "{text}"
                );
                continue;
            };
            let ours = Value::try_from(ours.as_ref()).unwrap();
            let tree: serde_json::Value = serde_json::from_str(text).unwrap();
            assert_eq!(ours, super::super::conditions::json_to_cel(&tree), "{text}");
        }
        assert!(read("{\"a\":", false).is_err());
        assert!(read("1 2", false).is_err());
    }
}
