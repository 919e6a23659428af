//! Reading and writing JSON as Go's `encoding/json` does for a described Go struct. Kubernetes
//! keeps some fields in annotations as `json.Marshal` of Go types (HorizontalPodAutoscaler,
//! `pkg/apis/autoscaling/v1/conversion.go`), so the proxy writes them byte for byte as Go would
//! and reads them back with Go's leniencies and its errors. Depends on nothing else in the crate.
//!
//! A value is held in the proxy's *canonical* form: a JSON object keyed by each field's
//! Kubernetes JSON name, unset pointers absent. [`decode`] turns Go's JSON into that form (keys
//! matched exactly, else ignoring case; unknown keys ignored; a value of the wrong type is an
//! error, as `json.Unmarshal` fails); [`encode`] writes it back in the struct's field order with
//! Go's `omitempty`, zero values and HTML-safe escaping.

use serde_json::{Map, Value};

/// A Go type as `encoding/json` sees it.
pub(super) enum Type {
    /// `string` (and string-based enums).
    String,
    /// `int32`: an integral JSON number in range.
    Int32,
    /// `resource.Quantity`: a string or number in Quantity syntax, held as a string.
    Quantity,
    /// `metav1.Time`: an RFC 3339 string; the zero time is `null`.
    Time,
    /// `map[string]string`: keys written sorted, as Go sorts map keys.
    StringMap,
    /// A slice.
    List(&'static Type),
    /// A struct with its fields in declaration order.
    Struct(&'static [Field]),
}

/// How Go writes a field that is unset (see each variant).
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Presence {
    /// A value field without `omitempty`: always written, its zero value when unset.
    Required,
    /// A value field with `omitempty`: left out when unset or zero (`""`, `0`, empty).
    OmitZero,
    /// A pointer with `omitempty`: left out when unset, written when set (even to zero).
    Optional,
    /// A pointer, slice or `metav1.Time` without `omitempty`: `null` when unset.
    Nullable,
}

/// One field of a Go struct.
pub(super) struct Field {
    /// The key Go writes: the json tag's name, or the Go field name for untagged types.
    pub(crate) key: &'static str,
    /// The field's name in canonical form (Kubernetes' JSON name).
    pub(crate) name: &'static str,
    /// The field's Go type.
    pub(crate) ty: &'static Type,
    /// How Go writes it when unset.
    pub(crate) presence: Presence,
}

/// A field whose Go key is its canonical name (a tagged field).
pub(super) const fn tagged(name: &'static str, ty: &'static Type, presence: Presence) -> Field {
    Field {
        key: name,
        name,
        ty,
        presence,
    }
}

/// Why a value could not be decoded: the path to it (`resource.targetAverageUtilization`,
/// `[1].type`) and what was wrong.
#[derive(Debug, PartialEq)]
pub(super) struct DecodeError {
    pub(crate) path: String,
    pub(crate) message: String,
}

impl DecodeError {
    fn leaf(message: String) -> Self {
        DecodeError {
            path: String::new(),
            message,
        }
    }

    /// The error as seen from the value holding this one at `segment` (a field or `[i]`).
    pub(super) fn under(mut self, segment: &str) -> Self {
        if !self.path.is_empty() && !self.path.starts_with('[') {
            self.path.insert(0, '.');
        }
        self.path.insert_str(0, segment);
        self
    }
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for DecodeError {}

/// Decodes `value` (Go's JSON of `ty`) into canonical form. `null` decodes to `Value::Null`
/// (an unset pointer, or a value left at its zero). Unset [`Presence::Required`] fields are
/// filled with their zero value, as the Go struct holds them.
///
/// # Errors
/// [`DecodeError`] where `json.Unmarshal` would fail: a JSON type that does not fit the Go type,
/// an int32 out of range or fractional, an invalid Quantity or time.
///
/// Over 80 lines: one match over the Go types, as `encoding/json`'s decoder switches on them.
pub(super) fn decode(value: &Value, ty: &Type) -> Result<Value, DecodeError> {
    if value.is_null() {
        return Ok(Value::Null);
    }
    let mismatch = || {
        DecodeError::leaf(format!(
            "cannot unmarshal {} into {}",
            json_type(value),
            go_type(ty)
        ))
    };
    match ty {
        Type::String => value
            .is_string()
            .then(|| value.clone())
            .ok_or_else(mismatch),
        Type::Int32 => value
            .as_i64()
            .filter(|n| i32::try_from(*n).is_ok())
            .map(Value::from)
            .ok_or_else(mismatch),
        Type::Quantity => {
            let text = match value {
                Value::String(s) => s.trim().to_string(),
                Value::Number(n) => n.to_string(),
                _ => return Err(mismatch()),
            };
            if is_quantity(&text) {
                Ok(Value::String(text))
            } else {
                Err(DecodeError::leaf(format!(
                    "quantity {text:?} does not match ^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
                )))
            }
        }
        Type::Time => match value.as_str() {
            Some(s) if is_rfc3339(s) => Ok(value.clone()),
            Some(s) => Err(DecodeError::leaf(format!("time {s:?} is not RFC 3339"))),
            None => Err(mismatch()),
        },
        Type::StringMap => {
            let map = value.as_object().ok_or_else(mismatch)?;
            let mut out = Map::new();
            for (k, v) in map {
                let v = decode(v, &Type::String).map_err(|e| e.under(k))?;
                out.insert(k.clone(), if v.is_null() { "".into() } else { v });
            }
            Ok(Value::Object(out))
        }
        Type::List(item) => {
            let items = value.as_array().ok_or_else(mismatch)?;
            let mut out = Vec::with_capacity(items.len());
            for (i, v) in items.iter().enumerate() {
                let v = decode(v, item).map_err(|e| e.under(&format!("[{i}]")))?;
                out.push(if v.is_null() { zero(item) } else { v });
            }
            Ok(Value::Array(out))
        }
        Type::Struct(fields) => {
            let map = value.as_object().ok_or_else(mismatch)?;
            let mut out = Map::new();
            for (key, v) in map {
                // encoding/json: "preferring an exact match but also accepting a
                // case-insensitive match"; unknown keys are ignored.
                let Some(field) = fields
                    .iter()
                    .find(|f| f.key == key)
                    .or_else(|| fields.iter().find(|f| f.key.eq_ignore_ascii_case(key)))
                else {
                    continue;
                };
                let v = decode(v, field.ty).map_err(|e| e.under(field.name))?;
                if !v.is_null() {
                    out.insert(field.name.to_string(), v);
                }
            }
            for field in fields.iter() {
                if field.presence == Presence::Required && !out.contains_key(field.name) {
                    out.insert(field.name.to_string(), zero(field.ty));
                }
            }
            Ok(Value::Object(out))
        }
    }
}

/// Writes canonical `value` as `json.Marshal` of `ty` writes it. A value that does not fit the
/// type is written as it is (canonical values come from [`decode`] or from objects
/// kube-apiserver serialised, so this does not happen on the request path).
pub(super) fn encode(value: &Value, ty: &Type) -> String {
    let mut out = String::new();
    write(&mut out, value, ty);
    out
}

fn write(out: &mut String, value: &Value, ty: &Type) {
    match (ty, value) {
        (Type::List(item), Value::Array(items)) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(out, v, item);
            }
            out.push(']');
        }
        (Type::Struct(fields), Value::Object(map)) => {
            out.push('{');
            let mut first = true;
            for field in fields.iter() {
                let v = map.get(field.name).filter(|v| !v.is_null());
                let v = match (field.presence, v) {
                    (Presence::Required, None) => zero(field.ty),
                    (Presence::Nullable, None) => Value::Null,
                    (Presence::OmitZero, Some(v)) if is_zero(v) => continue,
                    (_, Some(v)) => v.clone(),
                    (Presence::OmitZero | Presence::Optional, None) => continue,
                };
                if !first {
                    out.push(',');
                }
                first = false;
                write_string(out, field.key);
                out.push(':');
                write(out, &v, field.ty);
            }
            out.push('}');
        }
        (Type::Quantity, Value::Number(n)) => write_string(out, &n.to_string()),
        (_, Value::String(s)) => write_string(out, s),
        // Numbers, null, maps (serde_json's maps are sorted, as Go sorts map keys) and values
        // that do not fit the type.
        (_, v) => out.push_str(&escape_html(&v.to_string())),
    }
}

/// A JSON string as Go writes it: HTML-safe (`<`, `>`, `&` and U+2028/U+2029 escaped).
fn write_string(out: &mut String, s: &str) {
    out.push_str(&escape_html(&Value::String(s.to_string()).to_string()));
}

fn escape_html(json: &str) -> String {
    if !json.contains(['<', '>', '&', '\u{2028}', '\u{2029}']) {
        return json.to_string();
    }
    json.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// The zero value of `ty` as Go writes it.
fn zero(ty: &Type) -> Value {
    match ty {
        Type::String => Value::String(String::new()),
        Type::Int32 => Value::from(0),
        Type::Quantity => Value::String("0".into()),
        Type::Struct(_) => decode(&Value::Object(Map::new()), ty).unwrap_or(Value::Null),
        Type::Time | Type::StringMap | Type::List(_) => Value::Null,
    }
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        Value::Bool(b) => !b,
        Value::Null => true,
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Bool(_) => "bool",
        Value::Null => "null",
    }
}

fn go_type(ty: &Type) -> &'static str {
    match ty {
        Type::String => "string",
        Type::Int32 => "int32",
        Type::Quantity => "resource.Quantity",
        Type::Time => "metav1.Time",
        Type::StringMap => "map[string]string",
        Type::List(_) => "a slice",
        Type::Struct(_) => "a struct",
    }
}

/// `resource.ParseQuantity`'s syntax (`apimachinery/pkg/api/resource/quantity.go`): a signed
/// decimal number (digits on at least one side of the point), then a binary suffix
/// (`Ki`…`Ei`), a decimal suffix (`n`, `u`, `m`, none, `k`, `M`…`E`) or an exponent
/// (`e`/`E` and a signed integer).
pub(super) fn is_quantity(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    let whole = digits(s);
    let mut rest = &s[whole..];
    let mut fraction = 0;
    if let Some(after) = rest.strip_prefix('.') {
        fraction = digits(after);
        rest = &after[fraction..];
    }
    if whole + fraction == 0 {
        return false;
    }
    match rest {
        "" | "n" | "u" | "m" | "k" | "M" | "G" | "T" | "P" | "E" => true,
        "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => true,
        _ => rest
            .strip_prefix(['e', 'E'])
            .map(|exp| exp.strip_prefix(['+', '-']).unwrap_or(exp))
            .is_some_and(|exp| !exp.is_empty() && digits(exp) == exp.len()),
    }
}

/// `time.Parse(time.RFC3339, s)`'s shape: `2006-01-02T15:04:05`, optional fractional seconds,
/// then `Z` or `±07:00`.
fn is_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    let digit = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    let date_time = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18]
        .iter()
        .all(|&i| digit(i))
        && at(4, b'-')
        && at(7, b'-')
        && at(10, b'T')
        && at(13, b':')
        && at(16, b':');
    if !date_time {
        return false;
    }
    let mut i = 19;
    if at(i, b'.') {
        i += 1;
        let start = i;
        while digit(i) {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    match b.get(i) {
        Some(b'Z') => i + 1 == b.len(),
        Some(b'+' | b'-') => {
            i + 6 == b.len()
                && digit(i + 1)
                && digit(i + 2)
                && at(i + 3, b':')
                && digit(i + 4)
                && digit(i + 5)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    static POLICY: Type = Type::Struct(&[
        Field {
            key: "Type",
            name: "type",
            ty: &Type::String,
            presence: Presence::Required,
        },
        Field {
            key: "Value",
            name: "value",
            ty: &Type::Int32,
            presence: Presence::Required,
        },
    ]);
    static CONDITION: Type = Type::Struct(&[
        tagged("type", &Type::String, Presence::Required),
        tagged("lastTransitionTime", &Type::Time, Presence::Nullable),
        tagged("reason", &Type::String, Presence::OmitZero),
        tagged("limit", &Type::Quantity, Presence::Optional),
        tagged("labels", &Type::StringMap, Presence::OmitZero),
    ]);

    #[test]
    fn keys_match_ignoring_case_and_unknown_keys_are_dropped() {
        let decoded = decode(&json!({"TYPE": "Pods", "value": 4, "extra": true}), &POLICY);
        assert_eq!(decoded, Ok(json!({"type": "Pods", "value": 4})));
        // An exact match wins over a case-insensitive one.
        let decoded = decode(&json!({"type": "Exact", "tYPE": "Folded"}), &POLICY).unwrap();
        assert_eq!(decoded["type"], "Exact");
        assert_eq!(
            encode(&json!({"type": "Pods", "value": 4}), &POLICY),
            r#"{"Type":"Pods","Value":4}"#
        );
    }

    #[test]
    fn zero_values_omitempty_and_null_as_go_writes_them() {
        assert_eq!(
            encode(&json!({"reason": ""}), &CONDITION),
            r#"{"type":"","lastTransitionTime":null}"#
        );
        assert_eq!(
            encode(
                &json!({"type": "A&B", "reason": "<x>", "limit": "0", "labels": {"b": "1", "a": "2"},
                        "lastTransitionTime": "2026-11-20T10:00:00Z"}),
                &CONDITION
            ),
            r#"{"type":"A\u0026B","lastTransitionTime":"2026-11-20T10:00:00Z","reason":"\u003cx\u003e","limit":"0","labels":{"a":"2","b":"1"}}"#
        );
        assert_eq!(
            decode(&json!({}), &POLICY),
            Ok(json!({"type": "", "value": 0}))
        );
    }

    #[test]
    fn type_errors_fail_as_json_unmarshal_does() {
        let err = decode(
            &json!([{"Type": "Pods", "Value": "4"}]),
            &Type::List(&POLICY),
        );
        assert_eq!(
            err.unwrap_err().to_string(),
            "[0].value: cannot unmarshal string into int32"
        );
        assert!(decode(&json!({"Value": 2.5}), &POLICY).is_err());
        assert!(decode(&json!({"Value": 3_000_000_000_i64}), &POLICY).is_err());
        let err = decode(&json!({"limit": "ten"}), &CONDITION).unwrap_err();
        assert_eq!(err.path, "limit");
        assert!(decode(&json!({"lastTransitionTime": "yesterday"}), &CONDITION).is_err());
        assert_eq!(
            decode(&json!({"limit": 5, "lastTransitionTime": null}), &CONDITION),
            Ok(json!({"type": "", "limit": "5"}))
        );
    }

    #[test]
    fn quantity_syntax() {
        for ok in [
            "1", "100m", "0.5", ".5", "5.", "+1Ki", "-2Gi", "1e3", "1E-3", "3u", "7n", "2E",
        ] {
            assert!(is_quantity(ok), "{ok}");
        }
        for bad in [
            "", ".", "m", "1.2.3", "1KB", "1e", "1e+", "1 Gi", "0x10", "1ki",
        ] {
            assert!(!is_quantity(bad), "{bad}");
        }
    }

    #[test]
    fn rfc3339_times() {
        for ok in [
            "2026-11-20T10:00:00Z",
            "2026-11-20T10:00:00.123456Z",
            "2026-11-20T10:00:00+01:00",
        ] {
            assert!(is_rfc3339(ok), "{ok}");
        }
        for bad in [
            "2026-11-20",
            "2026-11-20 10:00:00Z",
            "2026-11-20T10:00:00",
            "2026-11-20T10:00:00.Z",
        ] {
            assert!(!is_rfc3339(bad), "{bad}");
        }
    }
}
