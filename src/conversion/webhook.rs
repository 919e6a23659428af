//! The ConversionReview a CRD conversion webhook receives, and the checks kube-apiserver makes
//! on its answer (`apiextensions-apiserver/pkg/apiserver/conversion/webhook_converter.go`:
//! `createConversionReviewObjects`, `getConvertedObjectsFromResponse`, `Convert`,
//! `validateConvertedObject`, `restoreObjectMeta`). Pure functions on JSON; the call itself is
//! `dispatch`'s. Depends on `custom`.

use serde_json::{json, Map, Value};

use crate::resources::custom::ConversionReviewVersion;

/// The request body for converting `object` to `desired_api_version`: one object per review,
/// as kube-apiserver converts `object` and `oldObject` one at a time.
pub fn conversion_request(
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
pub fn gvk_string(object: &Value) -> String {
    let field = |f: &str| object.get(f).and_then(Value::as_str).unwrap_or("");
    format!("{}, Kind={}", field("apiVersion"), field("kind"))
}

/// Checks the webhook's answer `body` to a request made by [`conversion_request`] for
/// `original`, and returns the converted object with `original`'s metadata restored except for
/// labels and annotations (`restoreObjectMeta`).
///
/// # Errors
/// The message kube-apiserver gives after `conversion webhook for <gvk> `: `failed: <why>`
/// for an undecodable or unsuccessful answer, `returned invalid object…` /
/// `returned invalid metadata…` for an object that breaks the rules.
pub fn converted_object(
    version: ConversionReviewVersion,
    uid: &str,
    body: &[u8],
    original: &Value,
    desired_api_version: &str,
) -> Result<Value, String> {
    let review: Value = serde_json::from_slice(body).map_err(|e| format!("failed: {e}"))?;
    if version == ConversionReviewVersion::V1 {
        // v1 answers must say what they are and echo the uid; v1beta1 never checked either.
        let got = gvk_string(&review);
        let expected = "apiextensions.k8s.io/v1, Kind=ConversionReview";
        if got != expected {
            return Err(format!(
                "failed: expected webhook response of {expected}, got {got}"
            ));
        }
    }
    let response = review
        .get("response")
        .filter(|r| !r.is_null())
        .ok_or("failed: no response provided")?;
    if version == ConversionReviewVersion::V1 {
        let got = response.get("uid").and_then(Value::as_str).unwrap_or("");
        if got != uid {
            return Err(format!(
                "failed: expected response.uid={uid:?}, got {got:?}"
            ));
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
        return Err(if message.is_empty() {
            format!("failed: response.result.status was '{status}', not 'Success'")
        } else {
            format!("failed: {message}")
        });
    }
    let objects = response
        .get("convertedObjects")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    if objects.len() != 1 {
        return Err(format!("returned {} objects, expected 1", objects.len()));
    }
    let mut converted = objects[0].clone();
    let got_api_version = converted
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if got_api_version != desired_api_version {
        return Err(format!("returned invalid object at index 0: invalid groupVersion (expected {desired_api_version}, received {got_api_version})"));
    }
    let kind = |o: &Value| {
        o.get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    if kind(&converted) != kind(original) {
        return Err(format!(
            "returned invalid object at index 0: invalid kind (expected {}, received {})",
            kind(original),
            kind(&converted)
        ));
    }
    validate_converted_object(original, &converted)
        .map_err(|e| format!("returned invalid object: {e}"))?;
    restore_object_meta(original, &mut converted)
        .map_err(|e| format!("returned invalid metadata: {e}"))?;
    Ok(converted)
}

/// `validateConvertedObject`: name, namespace and uid must not change (the kind was checked).
fn validate_converted_object(original: &Value, converted: &Value) -> Result<(), String> {
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
            return Err(format!("must have the same {what}: {expected} != {got}"));
        }
    }
    Ok(())
}

/// `restoreObjectMeta`: the converted object keeps the original's metadata, except for labels
/// and annotations, which the webhook may change (string values only).
fn restore_object_meta(original: &Value, converted: &mut Value) -> Result<(), String> {
    let answered = match converted.get("metadata") {
        None => return Err("missing metadata in converted object".into()),
        Some(Value::Object(m)) => m.clone(),
        Some(other) => {
            return Err(format!(
                "invalid metadata of type {} in converted object",
                type_name(other)
            ))
        }
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
                    return Err(format!(
                        "metadata.{field}[{key}] must be a string, but is {} in converted object",
                        type_name(value)
                    ));
                }
                restored.insert(field.into(), Value::Object(values.clone()));
            }
            Some(other) => {
                return Err(format!(
                    "invalid metadata.{field} of type {} in converted object",
                    type_name(other)
                ))
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
            converted_object(version, UID, &body, &original, "example.com/v2").unwrap_err()
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
