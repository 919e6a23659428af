//! Editing Kubernetes objects as JSON in place: members by path, created when missing, and
//! annotations with Go's `omitempty` on the emptied map. Shared by the per-kind conversions;
//! depends on nothing else in the crate.

use serde_json::{Map, Value};

/// The member at `path`, if every step exists.
pub(super) fn get_mut<'a>(o: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    path.iter().try_fold(o, |v, key| v.get_mut(*key))
}

/// Removes and returns the member at `path`.
pub(super) fn take(o: &mut Value, path: &[&str]) -> Option<Value> {
    let (last, parent) = path.split_last()?;
    get_mut(o, parent)?.as_object_mut()?.remove(*last)
}

pub(super) fn rename(o: &mut Value, path: &[&str], from: &str, to: &str) {
    if let Some(map) = get_mut(o, path).and_then(Value::as_object_mut) {
        if let Some(v) = map.remove(from) {
            map.insert(to.into(), v);
        }
    }
}

/// The object at `key` of `map`, created (or replacing a non-object) when needed.
pub(super) fn member<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let member = map
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if !member.is_object() {
        *member = Value::Object(Map::new());
    }
    member.as_object_mut().expect("just made an object")
}

/// `o` as an object (a non-object becomes an empty one).
pub(super) fn as_map(o: &mut Value) -> &mut Map<String, Value> {
    if !o.is_object() {
        *o = Value::Object(Map::new());
    }
    o.as_object_mut().expect("just made an object")
}

pub(super) fn spec(o: &mut Value) -> &mut Map<String, Value> {
    member(as_map(o), "spec")
}

pub(super) fn annotations(o: &mut Value) -> &mut Map<String, Value> {
    member(member(as_map(o), "metadata"), "annotations")
}

/// Removes an annotation, and the `annotations` map when that empties it (Go's `omitempty`).
pub(super) fn take_annotation(o: &mut Value, key: &str) -> Option<String> {
    let metadata = get_mut(o, &["metadata"])?.as_object_mut()?;
    let annotations = metadata.get_mut("annotations")?.as_object_mut()?;
    let value = annotations.remove(key)?;
    if annotations.is_empty() {
        metadata.remove("annotations");
    }
    value.as_str().map(str::to_string)
}
