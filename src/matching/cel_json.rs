//! JSON read straight into the CEL values an expression evaluates over, from the request's own
//! text: no intermediate tree, strings without escapes borrowed from the text rather than
//! copied (a label or an image that is only compared is never copied), and an object's or an
//! array's members read only when an expression first reaches into it ([`read_raw`]: `object`
//! read for `object.metadata.labels` reads the top level, `metadata` and `labels`, and skips
//! `spec` and `status` at scanning speed).
//!
//! The values are the `cel` crate's built-in ones (`map`, `list`, `string`, `int`, `uint`,
//! `double`, `bool`, `null`), so every operator, function and conversion treats them as it
//! treats any other; their maps and lists share their contents, so binding one to a variable
//! again (another condition, another policy, a comprehension's element) costs a reference
//! count. Numbers: an integer is an `int` and a fraction or exponent a `double`, as
//! kube-apiserver decodes unstructured JSON (`sigs.k8s.io/json`, integers as `int64`) and
//! `UnstructuredToVal` (`staging/src/k8s.io/apiserver/pkg/cel/common/values.go`) turns it
//! into CEL; an integer past `int64` that fits `uint64` is a `uint`, as the proxy has always
//! read it, where kube-apiserver falls back to a `double`.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, OnceLock};

use cel::common::traits::{Adder, Comparer, Container, Indexer, Iterable, Sizer, Zeroer};
use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelUInt, Type,
    DYN_TYPE,
};
use cel::common::value::{Builtin, BuiltinRef, CowVal, Val};
use cel::ExecutionError;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::deep_json;

/// A CEL value that may borrow from the JSON text it was read from.
pub(crate) type JsonVal<'v> = Box<dyn Val + 'v>;

/// Reads `text`, one JSON scalar (a string, number, `true`, `false` or `null`), as a CEL value;
/// objects and arrays are [`Lazy`].
///
/// # Errors
/// serde_json's, for text that is not a JSON scalar (not a member of a request's `RawValue`,
/// which is one).
fn scalar(text: &str) -> Result<JsonVal<'_>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = de.deserialize_any(ScalarVisitor)?;
    de.end()?;
    Ok(value)
}

/// `raw` (an absent value is `null`) as a CEL value whose objects and arrays are read level by
/// level, each when an expression first reaches into it, and kept.
///
/// `raw` is JSON serde_json has read already (a `RawValue` of the request), so every level
/// parses. Bounded (`unbounded` false), a value nested past serde_json's recursion limit is
/// refused with that limit's error (`deep_json::refuse_past_recursion_limit`), so that
/// `deep_json::read_deep` reads it again on a stack grown for its depth.
///
/// # Errors
/// serde_json's recursion limit, bounded.
pub(crate) fn read_raw(
    raw: Option<&serde_json::value::RawValue>,
    unbounded: bool,
) -> Result<JsonVal<'_>, serde_json::Error> {
    let Some(raw) = raw else {
        return Ok(null());
    };
    if !unbounded {
        deep_json::refuse_past_recursion_limit(raw.get())?;
    }
    member(raw)
}

/// A JSON object or array, read on first use: its members (scalars as values, objects and
/// arrays as [`Lazy`] again) in a `CelMap` or `CelList` every operation then delegates to.
/// Through `as_builtin` it is that map or list to the interpreter and to every function, so
/// it behaves exactly as one read eagerly. A clone shares the text and what was read.
#[derive(Clone, Debug)]
struct Lazy<'v>(Arc<LazyInner<'v>>);

#[derive(Debug)]
struct LazyInner<'v> {
    text: &'v str,
    /// An object (else an array).
    map: bool,
    value: OnceLock<JsonVal<'v>>,
}

impl<'v> Lazy<'v> {
    fn new(text: &'v str) -> Self {
        Lazy(Arc::new(LazyInner {
            text,
            map: text.starts_with('{'),
            value: OnceLock::new(),
        }))
    }

    /// The object's or array's members, read now if not yet.
    fn value(&self) -> &(dyn Val + 'v) {
        self.0
            .value
            .get_or_init(|| {
                level(self.0.text).unwrap_or_else(|e| Box::new(Unreadable(e.to_string())))
            })
            .as_ref()
    }
}

impl<'v> Val for Lazy<'v> {
    fn get_type(&self) -> &Type {
        if self.0.map {
            <CelMap as Val>::cel_type()
        } else {
            <CelList as Val>::cel_type()
        }
    }

    fn cel_type() -> &'static Type
    where
        Self: Sized,
    {
        // A map or a list: the type is the instance's.
        &DYN_TYPE
    }

    fn as_adder<'b, 'w>(&'b self) -> Option<&'b (dyn Adder + 'w)>
    where
        Self: 'w,
    {
        self.value().as_adder()
    }

    fn as_comparer(&self) -> Option<&dyn Comparer> {
        self.value().as_comparer()
    }

    fn as_container(&self) -> Option<&dyn Container> {
        self.value().as_container()
    }

    fn as_indexer<'b, 'w>(&'b self) -> Option<&'b (dyn Indexer + 'w)>
    where
        Self: 'w,
    {
        self.value().as_indexer()
    }

    fn into_indexer<'w>(self: Box<Self>) -> Option<Box<dyn Indexer + 'w>>
    where
        Self: 'w,
    {
        self.value().clone_as_boxed().into_indexer()
    }

    fn as_iterable<'b, 'w>(&'b self) -> Option<&'b (dyn Iterable + 'w)>
    where
        Self: 'w,
    {
        self.value().as_iterable()
    }

    fn as_sizer(&self) -> Option<&dyn Sizer> {
        self.value().as_sizer()
    }

    fn as_zeroer(&self) -> Option<&dyn Zeroer> {
        self.value().as_zeroer()
    }

    fn equals(&self, other: &dyn Val) -> bool {
        self.value().equals(other)
    }

    fn clone_as_boxed<'w>(&self) -> Box<dyn Val + 'w>
    where
        Self: 'w,
    {
        Box::new(self.clone())
    }

    fn as_builtin<'b, 'w>(&'b self) -> BuiltinRef<'b, 'w>
    where
        Self: 'w,
    {
        self.value().as_builtin()
    }

    fn into_builtin<'w>(self: Box<Self>) -> Option<Builtin<'w>>
    where
        Self: 'w,
    {
        self.value().clone_as_boxed().into_builtin()
    }
}

/// One level of an object or array: its members, objects and arrays among them left to read.
///
/// # Errors
/// serde_json's, for text that is not JSON (not `RawValue`s of a request, which parse).
fn level(text: &str) -> Result<JsonVal<'_>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = de.deserialize_any(LevelVisitor)?;
    de.end()?;
    Ok(value)
}

/// A member: a scalar read now, an object or array as [`Lazy`].
fn member(raw: &serde_json::value::RawValue) -> Result<JsonVal<'_>, serde_json::Error> {
    let text = raw.get();
    match text.as_bytes().first() {
        Some(b'{' | b'[') => Ok(Box::new(Lazy::new(text))),
        _ => scalar(text),
    }
}

struct LevelVisitor;

impl<'de> Visitor<'de> for LevelVisitor {
    type Value = JsonVal<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object or array")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(raw) = seq.next_element::<&'de serde_json::value::RawValue>()? {
            items.push(member(raw).map_err(serde::de::Error::custom)?);
        }
        Ok(Box::new(CelList::from(items)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut entries = HashMap::new();
        // A repeated key keeps its last value, as encoding/json's decoder and serde_json's do.
        while let Some(key) = map.next_key_seed(KeySeed)? {
            let raw = map.next_value::<&'de serde_json::value::RawValue>()?;
            entries.insert(key, member(raw).map_err(serde::de::Error::custom)?);
        }
        Ok(Box::new(CelMap::from(entries)))
    }
}

/// What a [`Lazy`] holds when its text does not parse (never for a request's `RawValue`s):
/// every use of it fails with the reason, none reads it as empty or absent.
#[derive(Clone, Debug)]
struct Unreadable(String);

impl Val for Unreadable {
    fn get_type(&self) -> &Type {
        &DYN_TYPE
    }

    fn cel_type() -> &'static Type
    where
        Self: Sized,
    {
        &DYN_TYPE
    }

    fn as_indexer<'b, 'w>(&'b self) -> Option<&'b (dyn Indexer + 'w)>
    where
        Self: 'w,
    {
        Some(self)
    }

    fn clone_as_boxed<'w>(&self) -> Box<dyn Val + 'w>
    where
        Self: 'w,
    {
        Box::new(self.clone())
    }
}

impl Indexer for Unreadable {
    fn get<'b, 'v>(&'b self, _idx: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        Err(ExecutionError::function_error("object", &self.0))
    }

    fn steal<'v>(self: Box<Self>, _idx: &dyn Val) -> Result<Box<dyn Val + 'v>, ExecutionError>
    where
        Self: 'v,
    {
        Err(ExecutionError::function_error("object", &self.0))
    }
}

/// CEL's `null`.
pub(crate) fn null() -> JsonVal<'static> {
    Box::new(CelNull)
}

/// A JSON tree the proxy holds (a parameter object, a namespace) as a CEL value, its strings
/// borrowed from it, numbers as [`ScalarVisitor`] reads them; made once to be bound many times.
pub(crate) fn from_json(value: &serde_json::Value) -> JsonVal<'_> {
    match value {
        serde_json::Value::Null => null(),
        serde_json::Value::Bool(b) => Box::new(CelBool::from(*b)),
        serde_json::Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Box::new(CelInt::from(i)),
            (None, Some(u)) => Box::new(CelUInt::from(u)),
            _ => Box::new(CelDouble::from(n.as_f64().unwrap_or(f64::NAN))),
        },
        serde_json::Value::String(s) => Box::new(CelString::from(s.as_str())),
        serde_json::Value::Array(a) => {
            Box::new(CelList::from(a.iter().map(from_json).collect::<Vec<_>>()))
        }
        serde_json::Value::Object(o) => Box::new(CelMap::from(
            o.iter()
                .map(|(k, v)| (CelMapKey::from(k.as_str()), from_json(v)))
                .collect::<HashMap<_, _>>(),
        )),
    }
}

/// `value` as a CEL value of the same shape, made once to be bound many times (each binding
/// of a map or list is then a reference count).
pub(crate) fn from_value(value: cel::Value) -> JsonVal<'static> {
    // Only a function value has no `Val` form; nothing built from JSON or the request is one.
    JsonVal::try_from(value).unwrap_or_else(|_| null())
}

struct ScalarVisitor;

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = JsonVal<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON scalar")
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
            let raw: &serde_json::value::RawValue = serde_json::from_str(text).unwrap();
            let ours = read_raw(Some(raw), false).unwrap();
            let ours = Value::try_from(ours.as_ref());
            match serde_json::from_str::<serde_json::Value>(text) {
                Ok(tree) => assert_eq!(
                    ours.unwrap(),
                    super::super::conditions::json_to_cel(&tree),
                    "{text}"
                ),
                // 1e400 is out of f64's range: the tree path refuses it, and so does the level
                // that holds it when it is read (never read as absent).
                Err(_) => assert!(ours.is_err(), "{text}"),
            }
        }
        assert!(scalar("{\"a\":").is_err());
        assert!(scalar("1 2").is_err());
    }

    /// Read level by level, a value is the same value: every level reached by the conversion
    /// back, as an expression returning it reaches it.
    #[test]
    fn lazily_read_values_are_the_values() {
        for text in [
            r#"{"metadata":{"name":"p","labels":{"app":"web","e\u0301":"x"}},"spec":{"containers":[{"image":"a:1"},{"image":"b"}],"n":[1,-2,1.5,18446744073709551615,null,true]}}"#,
            r#"[[],{},[{"a":[[{}]]}],"s",0]"#,
            r#"{"a":1,"a":{"b":2}}"#,
        ] {
            let raw: &serde_json::value::RawValue = serde_json::from_str(text).unwrap();
            let lazy = read_raw(Some(raw), false).unwrap();
            let tree: serde_json::Value = serde_json::from_str(text).unwrap();
            let want = super::super::conditions::json_to_cel(&tree);
            assert_eq!(Value::try_from(lazy.as_ref()).unwrap(), want, "{text}");
            // Compared with the same value built whole, in both orders.
            let eager = from_value(want);
            assert!(
                lazy.equals(eager.as_ref()) && eager.equals(lazy.as_ref()),
                "{text}"
            );
        }
        assert!(Value::try_from(read_raw(None, false).unwrap().as_ref()).unwrap() == Value::Null);
    }

    /// Past serde_json's recursion limit, a bounded read fails with that limit's error (so
    /// that `deep_json::read_deep` reads it again on a grown stack) and an unbounded one reads.
    #[test]
    fn deep_values_are_refused_bounded_and_read_unbounded() {
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(200), "]".repeat(200));
        let raw: &serde_json::value::RawValue = serde_json::from_str(&deep).unwrap();
        let refused = read_raw(Some(raw), false).unwrap_err();
        assert!(crate::deep_json::is_recursion_limit(&refused), "{refused}");
        // serde_json reads 127 levels and refuses 128: so does the bounded read.
        let at_limit = format!("{}1{}", "[".repeat(127), "]".repeat(127));
        let raw: &serde_json::value::RawValue = serde_json::from_str(&at_limit).unwrap();
        assert!(read_raw(Some(raw), false).is_ok());
        assert!(serde_json::from_str::<serde_json::Value>(&at_limit).is_ok());
        let past = format!("{}1{}", "[".repeat(128), "]".repeat(128));
        let raw: &serde_json::value::RawValue = serde_json::from_str(&past).unwrap();
        assert!(read_raw(Some(raw), false).is_err());
        assert!(serde_json::from_str::<serde_json::Value>(&past).is_err());
        let shallow = format!("{{\"a\":{}1{}}}", "[".repeat(100), "]".repeat(100));
        let raw: &serde_json::value::RawValue = serde_json::from_str(&shallow).unwrap();
        assert!(read_raw(Some(raw), false).is_ok());
        let raw: &serde_json::value::RawValue = serde_json::from_str(&deep).unwrap();
        assert!(read_raw(Some(raw), true).is_ok());
    }
}
