//! The ConversionReview a CRD conversion webhook receives, and the checks kube-apiserver makes
//! on its answer (`apiextensions-apiserver/pkg/apiserver/conversion/webhook_converter.go`:
//! `createConversionReviewObjects`, `getConvertedObjectsFromResponse`, `Convert`,
//! `validateConvertedObject`, `restoreObjectMeta`). Pure functions on JSON; the call itself is
//! `dispatch`'s. Depends on `custom`.

use serde_json::{json, Map, Value};

use crate::resources::custom::ConversionReviewVersion;

/// The request body for converting `object` to `desired_api_version`: one object per review,
/// as kube-apiserver converts `object` and `oldObject` one at a time.
pub(crate) fn conversion_request(
    version: ConversionReviewVersion,
    uid: &str,
    desired_api_version: &str,
    object: &Value,
) -> Vec<u8> {
    let review = json!({
        "kind": "ConversionReview",
        "apiVersion": version.api_version(),
        "request": {"uid": uid, "desiredAPIVersion": desired_api_version, "objects": [object]},
    });
    serde_json::to_vec(&review).unwrap_or_default()
}

/// `<group>/<version>, Kind=<kind>` of `object`, as Go's `GroupVersionKind.String()` prints
/// it in conversion errors.
pub(crate) fn gvk_string(object: &Value) -> String {
    let field = |f: &str| object.get(f).and_then(Value::as_str).unwrap_or("");
    format!("{}, Kind={}", field("apiVersion"), field("kind"))
}

/// Why a conversion webhook's answer is refused; displayed as kube-apiserver's message after
/// `conversion webhook for <gvk> ` (`webhook_converter.go`, `Convert` and
/// `getConvertedObjectsFromResponse`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum AnswerError {
    /// The body is not JSON.
    #[error("failed: {0}")]
    Undecodable(serde_json::Error),
    /// A v1 answer that is not a v1 ConversionReview: what it is (`<group>/<version>, Kind=<kind>`).
    #[error("failed: expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got {0}")]
    NotAReview(String),
    /// No `response`, or a null one.
    #[error("failed: no response provided")]
    NoResponse,
    /// A v1 answer for another request: the uid expected, the uid received.
    #[error("failed: expected response.uid={expected:?}, got {got:?}")]
    Uid { expected: String, got: String },
    /// `result.status` is not `Success`: the webhook's message, or the status when it has none.
    #[error("failed: {}", failure_text(.status, .message))]
    Unsuccessful { status: String, message: String },
    /// Not exactly one converted object: how many.
    #[error("returned {0} objects, expected 1")]
    ObjectCount(usize),
    /// The converted object is not in the version asked for.
    #[error("returned invalid object at index 0: invalid groupVersion (expected {expected}, received {got})")]
    GroupVersion { expected: String, got: String },
    /// The converted object is of another kind.
    #[error(
        "returned invalid object at index 0: invalid kind (expected {expected}, received {got})"
    )]
    Kind { expected: String, got: String },
    /// `validateConvertedObject`: name, namespace or uid changed.
    #[error("returned invalid object: must have the same {what}: {expected} != {got}")]
    Identity {
        what: &'static str,
        expected: String,
        got: String,
    },
    /// `restoreObjectMeta` refused the answer's metadata.
    #[error("returned invalid metadata: {0}")]
    Metadata(MetadataError),
}

/// `Convert`'s text for an unsuccessful answer: its message, else the status it has.
fn failure_text(status: &str, message: &str) -> String {
    if message.is_empty() {
        format!("response.result.status was '{status}', not 'Success'")
    } else {
        message.to_string()
    }
}

/// Why `restoreObjectMeta` refuses a converted object's metadata (Go's `%T` of the values).
#[derive(Debug, thiserror::Error)]
pub(crate) enum MetadataError {
    /// No `metadata` at all.
    #[error("missing metadata in converted object")]
    Missing,
    /// `metadata` that is not a map: its type.
    #[error("invalid metadata of type {0} in converted object")]
    NotAnObject(&'static str),
    /// A label or annotation (`field`, `key`) that is not a string.
    #[error("metadata.{field}[{key}] must be a string, but is {type_name} in converted object")]
    NotAString {
        field: &'static str,
        key: String,
        type_name: &'static str,
    },
    /// `labels` or `annotations` that is not a map.
    #[error("invalid metadata.{field} of type {type_name} in converted object")]
    NotAMap {
        field: &'static str,
        type_name: &'static str,
    },
}

/// Checks the webhook's answer `body` to a request made by [`conversion_request`] for
/// `original`, and returns the converted object with `original`'s metadata restored except for
/// labels and annotations (`restoreObjectMeta`).
///
/// # Errors
/// [`AnswerError`], displayed as kube-apiserver's message after `conversion webhook for <gvk> `:
/// `failed: <why>` for an undecodable or unsuccessful answer, `returned invalid object…` /
/// `returned invalid metadata…` for an object that breaks the rules.
pub(crate) fn converted_object(
    version: ConversionReviewVersion,
    uid: &str,
    body: &[u8],
    original: &Value,
    desired_api_version: &str,
) -> Result<Value, AnswerError> {
    let review: Value = serde_json::from_slice(body).map_err(AnswerError::Undecodable)?;
    if version == ConversionReviewVersion::V1 {
        // v1 answers must say what they are and echo the uid; v1beta1 never checked either.
        let got = gvk_string(&review);
        if got != "apiextensions.k8s.io/v1, Kind=ConversionReview" {
            return Err(AnswerError::NotAReview(got));
        }
    }
    let response = review
        .get("response")
        .filter(|r| !r.is_null())
        .ok_or(AnswerError::NoResponse)?;
    if version == ConversionReviewVersion::V1 {
        let got = response.get("uid").and_then(Value::as_str).unwrap_or("");
        if got != uid {
            return Err(AnswerError::Uid {
                expected: uid.to_string(),
                got: got.to_string(),
            });
        }
    }
    let result = response.get("result");
    let status = result
        .and_then(|r| r.get("status"))
        .and_then(Value::as_str)
        .unwrap_or("");
    if status != "Success" {
        let message = result
            .and_then(|r| r.get("message"))
            .and_then(Value::as_str)
            .unwrap_or("");
        return Err(AnswerError::Unsuccessful {
            status: status.to_string(),
            message: message.to_string(),
        });
    }
    let objects = response
        .get("convertedObjects")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    if objects.len() != 1 {
        return Err(AnswerError::ObjectCount(objects.len()));
    }
    let mut converted = objects[0].clone();
    let got_api_version = converted
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if got_api_version != desired_api_version {
        return Err(AnswerError::GroupVersion {
            expected: desired_api_version.to_string(),
            got: got_api_version.to_string(),
        });
    }
    let kind = |o: &Value| {
        o.get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    if kind(&converted) != kind(original) {
        return Err(AnswerError::Kind {
            expected: kind(original),
            got: kind(&converted),
        });
    }
    validate_converted_object(original, &converted)?;
    restore_object_meta(original, &mut converted).map_err(AnswerError::Metadata)?;
    Ok(converted)
}

/// `validateConvertedObject`: name, namespace and uid must not change (the kind was checked).
fn validate_converted_object(original: &Value, converted: &Value) -> Result<(), AnswerError> {
    let meta = |o: &Value, f: &str| {
        o.get("metadata")
            .and_then(|m| m.get(f))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let checks = [
        ("name", meta(original, "name"), meta(converted, "name")),
        (
            "namespace",
            meta(original, "namespace"),
            meta(converted, "namespace"),
        ),
        ("UID", meta(original, "uid"), meta(converted, "uid")),
    ];
    for (what, expected, got) in checks {
        if expected != got {
            return Err(AnswerError::Identity {
                what,
                expected,
                got,
            });
        }
    }
    Ok(())
}

/// `restoreObjectMeta`: the converted object keeps the original's metadata, except for labels
/// and annotations, which the webhook may change (string values only).
fn restore_object_meta(original: &Value, converted: &mut Value) -> Result<(), MetadataError> {
    let answered = match converted.get("metadata") {
        None => return Err(MetadataError::Missing),
        Some(Value::Object(m)) => m.clone(),
        Some(other) => return Err(MetadataError::NotAnObject(type_name(other))),
    };
    let mut restored = match original.get("metadata") {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    };
    for field in ["labels", "annotations"] {
        match answered.get(field) {
            None | Some(Value::Null) => {
                restored.remove(field);
            }
            Some(Value::Object(values)) => {
                if let Some((key, value)) = values.iter().find(|(_, v)| !v.is_string()) {
                    return Err(MetadataError::NotAString {
                        field,
                        key: key.clone(),
                        type_name: type_name(value),
                    });
                }
                restored.insert(field.into(), Value::Object(values.clone()));
            }
            Some(other) => {
                return Err(MetadataError::NotAMap {
                    field,
                    type_name: type_name(other),
                })
            }
        }
    }
    if let Some(map) = converted.as_object_mut() {
        map.insert("metadata".into(), Value::Object(restored));
    }
    Ok(())
}

/// Go's `%T` of a decoded JSON value, for messages.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "0d2c7a5e-0000-4000-8000-000000000001";

    fn widget(api_version: &str) -> Value {
        json!({"apiVersion": api_version, "kind": "Widget",
               "metadata": {"name": "w", "namespace": "ns", "uid": "u-1", "resourceVersion": "7",
                            "labels": {"a": "b"}},
               "spec": {"count": 2}})
    }

    fn answer(version: &str, uid: &str, result: Value, objects: Vec<Value>) -> Vec<u8> {
        serde_json::to_vec(
            &json!({"apiVersion": format!("apiextensions.k8s.io/{version}"),
            "kind": "ConversionReview",
            "response": {"uid": uid, "result": result, "convertedObjects": objects}}),
        )
        .unwrap()
    }

    #[test]
    fn a_good_answer_keeps_the_original_metadata_but_its_labels() {
        let original = widget("example.com/v1");
        let mut returned = widget("example.com/v2");
        returned["metadata"] = json!({"name": "w", "namespace": "ns", "uid": "u-1",
                                      "labels": {"c": "d"}, "resourceVersion": "changed"});
        returned["spec"] = json!({"replicas": 2});
        let body = answer("v1", UID, json!({"status": "Success"}), vec![returned]);
        let converted = converted_object(
            ConversionReviewVersion::V1,
            UID,
            &body,
            &original,
            "example.com/v2",
        )
        .unwrap();
        assert_eq!(
            converted,
            json!({"apiVersion": "example.com/v2", "kind": "Widget",
                   "metadata": {"name": "w", "namespace": "ns", "uid": "u-1", "resourceVersion": "7",
                                "labels": {"c": "d"}},
                   "spec": {"replicas": 2}})
        );
    }

    #[test]
    fn bad_answers_get_kube_apiserver_messages() {
        let original = widget("example.com/v1");
        let check = |version, body: Vec<u8>| {
            converted_object(version, UID, &body, &original, "example.com/v2")
                .unwrap_err()
                .to_string()
        };
        let v1 = ConversionReviewVersion::V1;
        let ok = json!({"status": "Success"});
        assert_eq!(
            check(
                v1,
                answer("v1", "other", ok.clone(), vec![widget("example.com/v2")])
            ),
            format!("failed: expected response.uid={UID:?}, got \"other\"")
        );
        // v1beta1 answers are not checked for their uid.
        assert!(converted_object(
            ConversionReviewVersion::V1beta1,
            UID,
            &answer(
                "v1beta1",
                "other",
                ok.clone(),
                vec![widget("example.com/v2")]
            ),
            &original,
            "example.com/v2"
        )
        .is_ok());
        assert_eq!(
            check(v1, answer("v1beta1", UID, ok.clone(), vec![])),
            "failed: expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got apiextensions.k8s.io/v1beta1, Kind=ConversionReview"
        );
        assert_eq!(
            check(
                v1,
                answer(
                    "v1",
                    UID,
                    json!({"status": "Failure", "message": "no"}),
                    vec![]
                )
            ),
            "failed: no"
        );
        assert_eq!(
            check(v1, answer("v1", UID, json!({"status": "Failure"}), vec![])),
            "failed: response.result.status was 'Failure', not 'Success'"
        );
        assert_eq!(
            check(v1, answer("v1", UID, ok.clone(), vec![])),
            "returned 0 objects, expected 1"
        );
        assert_eq!(
            check(v1, answer("v1", UID, ok.clone(), vec![widget("example.com/v1")])),
            "returned invalid object at index 0: invalid groupVersion (expected example.com/v2, received example.com/v1)"
        );
        let mut renamed = widget("example.com/v2");
        renamed["metadata"]["name"] = json!("x");
        assert_eq!(
            check(v1, answer("v1", UID, ok.clone(), vec![renamed])),
            "returned invalid object: must have the same name: w != x"
        );
        let mut numeric = widget("example.com/v2");
        numeric["metadata"]["labels"] = json!({"a": 1});
        assert_eq!(
            check(v1, answer("v1", UID, ok, vec![numeric])),
            "returned invalid metadata: metadata.labels[a] must be a string, but is int64 in converted object"
        );
    }

    #[test]
    fn request_shape() {
        let body = conversion_request(
            ConversionReviewVersion::V1beta1,
            UID,
            "example.com/v2",
            &widget("example.com/v1"),
        );
        let review: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(review["apiVersion"], "apiextensions.k8s.io/v1beta1");
        assert_eq!(review["kind"], "ConversionReview");
        assert_eq!(review["request"]["uid"], UID);
        assert_eq!(review["request"]["desiredAPIVersion"], "example.com/v2");
        assert_eq!(review["request"]["objects"][0], widget("example.com/v1"));
    }
}
