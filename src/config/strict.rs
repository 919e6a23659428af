//! Strict decoding of a configuration document: a field given twice in one object is an
//! error, as kube-apiserver's strict decoders make it (`serializer.EnableStrict`, which the
//! static manifests loader of KEP-5793 uses,
//! `pkg/admission/plugin/webhook/manifest/loader/loader.go`; and `kubectl apply`'s default
//! `--validate=strict`: `strict decoding error: duplicate field "metadata.name"`). A plain
//! `serde_json::Value` keeps the last value silently, so a document is read into one through
//! [`Strict`], which refuses the second. Unknown fields are the typed decoders' concern
//! (`deny_unknown_fields`).

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, Error, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// A document as a `serde_json::Value`, refused when an object repeats a key; the error names
/// the field's path (`metadata.name`, `webhooks[0].rules`).
pub(super) struct Strict(pub(super) Value);

impl<'de> serde::Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        At(String::new()).deserialize(deserializer).map(Strict)
    }
}

/// Reads the value at a path (`""` for the document).
struct At(String);

impl At {
    fn child(&self, key: &str) -> At {
        At(if self.0.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.0)
        })
    }
}

impl<'de> DeserializeSeed<'de> for At {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for At {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E: Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E: Error>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E: Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E: Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(At(format!("{}[{}]", self.0, items.len())))? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(self.child(&key))?;
            if object.contains_key(&key) {
                return Err(A::Error::custom(format_args!(
                    "strict decoding error: duplicate field {:?}",
                    self.child(&key).0
                )));
            }
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::Strict;

    #[test]
    fn a_field_given_twice_is_refused_with_its_path() {
        let json = r#"{"metadata": {"name": "a", "name": "b"}}"#;
        let err = serde_json::from_str::<Strict>(json)
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains(r#"strict decoding error: duplicate field "metadata.name""#),
            "{err}"
        );
        let yaml = "webhooks:\n- name: a\n  rules: []\n  rules: []\n";
        let err = serde_yaml_ng::from_str::<Strict>(yaml)
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains(r#"duplicate field "webhooks[0].rules""#),
            "{err}"
        );
        let fine = serde_json::from_str::<Strict>(r#"{"a": [1, {"b": null}], "c": 1.5}"#).unwrap();
        assert_eq!(fine.0, serde_json::json!({"a": [1, {"b": null}], "c": 1.5}));
    }
}
