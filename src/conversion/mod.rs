//! matchPolicy Equivalent (KEP-492 "Convert to webhook-requested version"): object
//! conversion, rewriting the AdmissionReview a legacy webhook receives, and carrying its patch
//! back to the caller's version. Depends on `review` and `resources` (the equivalence table).

mod fields;
mod gojson;
mod hpa;
pub(crate) mod objects;
pub(crate) mod webhook;

use std::borrow::Cow;
use std::collections::BTreeMap;

use base64::Engine;
use serde_json::value::RawValue;
use serde_json::Value;

pub use objects::{api_version, convert, ConversionError};

use crate::resources::custom::{ConversionStrategy, CustomResource};
use crate::resources::{equivalence, Equivalent};
use crate::review::{ParsedReview, Status};

/// Why a request could not be rewritten for a webhook, or its patch carried back. kube-apiserver
/// answers both with 500 InternalError whatever failurePolicy says: the dispatchers
/// (`webhook/validating/dispatcher.go`, `webhook/mutating/dispatcher.go`) return them as
/// `apierrors.NewInternalError`, not as call failures (`ErrCallingWebhook`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum EquivalentError {
    #[error(transparent)]
    Conversion(#[from] ConversionError),
    /// The caller's AdmissionReview could not be re-read as JSON (it parsed once already).
    #[error("could not rewrite the AdmissionReview: {0}")]
    Review(String),
    /// The webhook's patch does not apply to the converted object (json-patch v4 semantics).
    #[error("{0}")]
    Patch(String),
    /// The CRD's conversion webhook failed or answered wrongly (`webhook_converter.go`
    /// messages: `conversion webhook for <gvk> failed: …`).
    #[error("{0}")]
    ConversionWebhook(String),
}

/// The 500 kube-apiserver answers a conversion or patch problem with, whatever failurePolicy
/// says (`apierrors.NewInternalError` in the dispatchers).
pub(crate) fn internal_error(e: &dyn std::fmt::Display) -> Status {
    Status::failure(
        500,
        "InternalError",
        format!("Internal error occurred: {e}"),
    )
}

/// The `(group, version)` that `review`'s `object` and `oldObject` are in, and that a patch
/// back to kube-apiserver must be against: `kind`'s, not `requestKind`'s. They differ when
/// kube-apiserver itself converted for the proxy's registration (matchPolicy Equivalent on a
/// registration that does not name the caller's version): `CreateV1AdmissionReview`
/// (`staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/request/admissionreview.go`)
/// puts the invocation's kind in `kind` and the converted object beside it.
pub(crate) fn object_version<'r>(review: &'r ParsedReview<'_>) -> (&'r str, &'r str) {
    let kind = &review.request.kind;
    (&*kind.group, &*kind.version)
}

/// Whether getting `review`'s objects to `invocation`'s version takes the custom resource's
/// conversion webhook (strategy `Webhook` and a different version; `scale` is autoscaling/v1
/// Scale in every version and never needs it).
pub(crate) fn needs_webhook(review: &ParsedReview<'_>, invocation: &Equivalent) -> bool {
    invocation
        .custom
        .as_deref()
        .and_then(CustomResource::conversion_webhook)
        .is_some()
        && object_version(review) != (&invocation.kind_group, &invocation.kind_version)
}

/// Converts `object` (a `kind` in `from`) to `to` without any webhook: built-in kinds field by
/// field ([`convert`]), custom resources with strategy `None` by their `apiVersion` alone
/// (`nopConverter`).
///
/// # Errors
/// [`EquivalentError::Conversion`] for an object the conversion cannot read (or a version
/// outside the table);
/// [`EquivalentError::ConversionWebhook`] for a custom resource that needs its webhook.
pub(crate) fn convert_locally(
    object: &Value,
    kind: &str,
    from: (&str, &str),
    to: (&str, &str),
    custom: Option<&CustomResource>,
) -> Result<Value, EquivalentError> {
    if from == to {
        return Ok(object.clone());
    }
    match custom.map(|c| &c.strategy) {
        None => Ok(convert_static(object, kind, from, to)?),
        Some(ConversionStrategy::None) => {
            let mut object = object.clone();
            if let Some(map) = object.as_object_mut() {
                map.insert("apiVersion".into(), Value::String(api_version(to)));
            }
            Ok(object)
        }
        Some(ConversionStrategy::Webhook(_)) => Err(EquivalentError::ConversionWebhook(format!(
            "converting {kind} to {}/{} needs the conversion webhook",
            to.0, to.1
        ))),
    }
}

/// The caller's `object` and `oldObject` as JSON trees (`None` when null or absent), to be
/// converted: the only parts of the review a rewrite parses. Read as deep as kube-apiserver
/// reads them ([`crate::deep_json::parse_value`]).
///
/// # Errors
/// [`EquivalentError::Review`] when an object is not valid JSON.
pub(crate) fn take_objects(
    review: &ParsedReview<'_>,
) -> Result<[Option<Value>; 2], EquivalentError> {
    let request = &review.request;
    let parse = |raw: Option<&RawValue>| -> Result<Option<Value>, EquivalentError> {
        match raw {
            None => Ok(None),
            Some(raw) => crate::deep_json::parse_value(raw.get())
                .map(|v| (!v.is_null()).then_some(v))
                .map_err(|e| EquivalentError::Review(e.to_string())),
        }
    };
    Ok([parse(request.object)?, parse(request.old_object)?])
}

/// A request rewritten for a webhook matched through an equivalent resource, with the objects
/// a patch back needs (kept so that nothing is parsed twice).
#[derive(Debug)]
pub(crate) struct Rewritten {
    /// The equivalent resource the rule matched, and the kind the webhook is invoked with.
    pub(crate) invocation: Equivalent,
    /// The rewritten AdmissionReview, in the caller's AdmissionReview version
    /// ([`rewrite_review`]).
    pub(crate) body: Vec<u8>,
    /// The caller's `object`, in the caller's version (`None` when null).
    pub(crate) original: Option<Value>,
    /// `object` as the webhook receives it, converted (`None` when null).
    pub(crate) sent: Option<Value>,
}

/// A member of the rewritten review: passed through as the caller sent it, or built.
#[derive(serde::Serialize)]
#[serde(untagged)]
enum Member<'v> {
    Raw(&'v RawValue),
    Built(Value),
    Object(Option<&'v Value>),
    Members(BTreeMap<Cow<'v, str>, Member<'v>>),
}

const OBJECT_FIELDS: [&str; 2] = ["object", "oldObject"];

/// The AdmissionReview `review` becomes for a webhook matched through `invocation`
/// (`CreateV1AdmissionReview`): `kind`, `resource` and `object`/`oldObject` (given,
/// converted, in `converted`) are the invocation's; `requestKind`, `requestResource` and
/// `requestSubResource` keep the original; every other member passes through as sent. The
/// result is in the caller's AdmissionReview version, members in name order.
///
/// The caller's review is not parsed again: its top level and its `request` are split into
/// raw members (a scan, no tree).
///
/// # Errors
/// [`EquivalentError::Review`] when the body has no `request` object or the result does not
/// serialize.
pub(crate) fn rewrite_review(
    review: &ParsedReview<'_>,
    invocation: &Equivalent,
    converted: [Option<&Value>; 2],
) -> Result<Vec<u8>, EquivalentError> {
    splice(review, |out| {
        for (field, object) in OBJECT_FIELDS.into_iter().zip(converted) {
            out.insert(field.into(), Member::Object(object));
        }
        let request = &review.request;
        let kind = request.effective_kind();
        let resource = request.effective_resource();
        let built = [
            ("requestKind", gvk(&kind.group, &kind.version, &kind.kind)),
            (
                "requestResource",
                gvr(&resource.group, &resource.version, &resource.resource),
            ),
        ];
        let i = invocation;
        let invoked = [
            ("kind", gvk(&i.kind_group, &i.kind_version, &i.kind)),
            ("resource", gvr(&i.group, &i.version, &i.resource)),
        ];
        for (field, value) in built.into_iter().chain(invoked) {
            out.insert(field.into(), Member::Built(value));
        }
        let sub_resource = request.effective_sub_resource();
        if !sub_resource.is_empty() {
            out.insert(
                "requestSubResource".into(),
                Member::Built(sub_resource.into()),
            );
        }
    })
}

/// `review` with `request.object` replaced by `object` and every other member passed through
/// as sent: what the next webhook of a mutating chain receives after a patch changed the
/// object (`callAttrMutatingHook` hands each webhook the object as patched so far,
/// `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/mutating/dispatcher.go`).
///
/// # Errors
/// As [`rewrite_review`].
pub(crate) fn with_object(
    review: &ParsedReview<'_>,
    object: &Value,
) -> Result<Vec<u8>, EquivalentError> {
    splice(review, |out| {
        out.insert("object".into(), Member::Object(Some(object)));
    })
}

/// The caller's review with members of its `request` replaced by `edit`: its top level and
/// its `request` are split into raw members (a scan, no tree), the rest passed through as
/// sent; members come out in name order.
fn splice<'v>(
    review: &'v ParsedReview<'_>,
    edit: impl FnOnce(&mut BTreeMap<Cow<'v, str>, Member<'v>>),
) -> Result<Vec<u8>, EquivalentError> {
    type Members<'a> = BTreeMap<Cow<'a, str>, &'a RawValue>;
    let review_error = |e: serde_json::Error| EquivalentError::Review(e.to_string());
    let top: Members<'_> = serde_json::from_slice(review.body()).map_err(review_error)?;
    let raw_request = top
        .get("request")
        .ok_or_else(|| EquivalentError::Review("no request".into()))?;
    let members: Members<'_> = serde_json::from_str(raw_request.get())
        .map_err(|_| EquivalentError::Review("no request".into()))?;
    let mut out: BTreeMap<Cow<'_, str>, Member<'_>> = members
        .into_iter()
        .map(|(name, raw)| (name, Member::Raw(raw)))
        .collect();
    edit(&mut out);
    let mut envelope: BTreeMap<Cow<'_, str>, Member<'_>> = top
        .into_iter()
        .map(|(name, raw)| (name, Member::Raw(raw)))
        .collect();
    envelope.insert("request".into(), Member::Members(out));
    serde_json::to_vec(&envelope).map_err(review_error)
}

/// [`rewrite_review`] with objects converted by [`convert_locally`].
///
/// # Errors
/// [`EquivalentError::Conversion`] when an object cannot be converted to the invocation's
/// version: the webhook must never see a version it did not register for.
pub(crate) fn rewrite_locally(
    review: &ParsedReview<'_>,
    invocation: Equivalent,
) -> Result<Rewritten, EquivalentError> {
    let objects = take_objects(review)?;
    let from = object_version(review);
    let to = (&*invocation.kind_group, &*invocation.kind_version);
    let custom = invocation.custom.as_deref();
    let mut converted = [None, None];
    for (slot, object) in converted.iter_mut().zip(&objects) {
        if let Some(object) = object {
            *slot = Some(convert_locally(object, &invocation.kind, from, to, custom)?);
        }
    }
    rewritten(review, invocation, objects, converted)
}

/// The [`Rewritten`] request for `objects` (the caller's) converted to `converted`.
///
/// # Errors
/// As [`rewrite_review`].
pub(crate) fn rewritten(
    review: &ParsedReview<'_>,
    invocation: Equivalent,
    objects: [Option<Value>; 2],
    converted: [Option<Value>; 2],
) -> Result<Rewritten, EquivalentError> {
    let body = rewrite_review(
        review,
        &invocation,
        [converted[0].as_ref(), converted[1].as_ref()],
    )?;
    let [original, _] = objects;
    let [sent, _] = converted;
    Ok(Rewritten {
        invocation,
        body,
        original,
        sent,
    })
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    serde_json::json!({"group": group, "version": version, "kind": kind})
}

fn gvr(group: &str, version: &str, resource: &str) -> Value {
    serde_json::json!({"group": group, "version": version, "resource": resource})
}

/// [`convert`] between group/versions named by borrowed strings (a request's), looked up in
/// the table.
fn convert_static(
    object: &Value,
    kind: &str,
    from: (&str, &str),
    to: (&str, &str),
) -> Result<Value, ConversionError> {
    let no_path = || ConversionError::NoPath {
        kind: kind.to_string(),
        from: format!("{}/{}", from.0, from.1),
        to: format!("{}/{}", to.0, to.1),
    };
    let table_from = equivalence::table_version(from.0, from.1).ok_or_else(no_path)?;
    let table_to = equivalence::table_version(to.0, to.1).ok_or_else(no_path)?;
    convert(object, kind, table_from, table_to)
}

/// Applies a mutating webhook's patch (base64 JSON Patch against the object in the
/// invocation's version, json-patch v4 semantics) to `converted`.
///
/// # Errors
/// [`EquivalentError::Patch`] when the patch does not decode or apply.
pub(crate) fn apply_patch(converted: &Value, patch_base64: &str) -> Result<Value, EquivalentError> {
    let engine = base64::engine::general_purpose::STANDARD;
    let bytes = engine
        .decode(patch_base64)
        .map_err(|e| EquivalentError::Patch(e.to_string()))?;
    let operations: Vec<Value> =
        serde_json::from_slice(&bytes).map_err(|e| EquivalentError::Patch(e.to_string()))?;
    let mut patched = converted.clone();
    apply_v4(&mut patched, operations)?;
    Ok(patched)
}

/// The JSON Patch, base64, that turns the caller's `original` object into `result` (the
/// patched object converted back to the caller's version); `None` when they are equal.
///
/// # Errors
/// [`EquivalentError::Patch`] when the patch does not serialize.
pub(crate) fn patch_between(
    original: &Value,
    result: &Value,
) -> Result<Option<String>, EquivalentError> {
    let diff = json_patch::diff(original, result);
    if diff.0.is_empty() {
        return Ok(None);
    }
    let json = serde_json::to_vec(&diff).map_err(|e| EquivalentError::Patch(e.to_string()))?;
    Ok(Some(base64::engine::general_purpose::STANDARD.encode(json)))
}

/// Applies JSON Patch operations one by one with the leniencies of evanphx/json-patch v4, which
/// `webhook/mutating/dispatcher.go` applies patches with (the `json-patch` crate is strict):
/// `replace` of a missing object member adds it, and a negative array index counts from the end.
fn apply_v4(doc: &mut Value, operations: Vec<Value>) -> Result<(), EquivalentError> {
    for mut op in operations {
        for key in ["path", "from"] {
            if let Some(path) = op.get(key).and_then(Value::as_str) {
                let resolved = resolve_negative(doc, path);
                op[key] = Value::String(resolved);
            }
        }
        if op.get("op").and_then(Value::as_str) == Some("replace") {
            let path = op.get("path").and_then(Value::as_str).unwrap_or("");
            if doc.pointer(path).is_none() {
                let parent = path.rsplit_once('/').map_or("", |(p, _)| p);
                if doc.pointer(parent).is_some_and(Value::is_object) {
                    op["op"] = Value::String("add".into());
                }
            }
        }
        let operation: json_patch::PatchOperation =
            serde_json::from_value(op).map_err(|e| EquivalentError::Patch(e.to_string()))?;
        json_patch::patch(doc, &[operation]).map_err(|e| EquivalentError::Patch(e.to_string()))?;
    }
    Ok(())
}

/// Rewrites `-N` array indices of `path` against `doc` to `len - N`.
fn resolve_negative(doc: &Value, path: &str) -> String {
    if !path.contains("/-") {
        return path.to_string();
    }
    let mut current = Some(doc);
    let mut out = String::new();
    for segment in path.split('/').skip(1) {
        let mut segment = segment.to_string();
        if let (Some(Value::Array(items)), Ok(n)) = (current, segment.parse::<i64>()) {
            if n < 0 {
                let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
                segment = (len + n).to_string();
            }
        }
        current = current.and_then(|v| match v {
            Value::Array(items) => segment.parse::<usize>().ok().and_then(|i| items.get(i)),
            Value::Object(map) => map.get(&segment.replace("~1", "/").replace("~0", "~")),
            _ => None,
        });
        out.push('/');
        out.push_str(&segment);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What dispatch does with a mutating webhook's patch, composed here without any
    /// webhook: [`apply_patch`] to
    /// `converted`, [`convert_locally`] back from `invocation` to the caller's version, then
    /// [`patch_between`] the caller's `original` and the result.
    ///
    /// # Errors
    /// [`EquivalentError::Patch`] when the patch does not decode or apply;
    /// [`EquivalentError::Conversion`] when the result cannot be converted back.
    fn patch_back(
        original: &Value,
        converted: &Value,
        patch_base64: &str,
        kind: &str,
        caller: (&str, &str),
        invocation: (&str, &str),
        custom: Option<&CustomResource>,
    ) -> Result<Option<String>, EquivalentError> {
        let patched = apply_patch(converted, patch_base64)?;
        let back = convert_locally(&patched, kind, invocation, caller, custom)?;
        patch_between(original, &back)
    }
    use serde_json::json;

    fn b64(v: Value) -> String {
        base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(&v).unwrap())
    }

    fn decode(s: &str) -> Value {
        serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(s).unwrap())
            .unwrap()
    }

    #[test]
    fn a_v1beta1_patch_lands_as_a_v1_patch() {
        let original = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "annotations": {"deprecated.deployment.rollback.to": "2"}},
            "spec": {"replicas": 1}});
        let converted = convert(
            &original,
            "Deployment",
            ("apps", "v1"),
            ("extensions", "v1beta1"),
        )
        .unwrap();
        assert_eq!(converted["spec"]["rollbackTo"], json!({"revision": 2}));
        // The legacy webhook clears rollbackTo and sets replicas.
        let patch = b64(json!([
            {"op": "remove", "path": "/spec/rollbackTo"},
            {"op": "replace", "path": "/spec/replicas", "value": 3}
        ]));
        let back = patch_back(
            &original,
            &converted,
            &patch,
            "Deployment",
            ("apps", "v1"),
            ("extensions", "v1beta1"),
            None,
        )
        .unwrap()
        .expect("a change");
        let mut result = original.clone();
        json_patch::patch(
            &mut result,
            &serde_json::from_value::<json_patch::Patch>(decode(&back)).unwrap(),
        )
        .unwrap();
        assert_eq!(
            result,
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"}, "spec": {"replicas": 3}})
        );
    }

    #[test]
    fn v4_semantics_replace_adds_and_negative_indices_count_from_the_end() {
        let mut doc = json!({"metadata": {}, "list": [1, 2, 3]});
        apply_v4(
            &mut doc,
            vec![
                json!({"op": "replace", "path": "/metadata/labels", "value": {"a": "b"}}),
                json!({"op": "remove", "path": "/list/-1"}),
            ],
        )
        .unwrap();
        assert_eq!(
            doc,
            json!({"metadata": {"labels": {"a": "b"}}, "list": [1, 2]})
        );
        let err = apply_v4(&mut doc, vec![json!({"op": "remove", "path": "/nope/x"})]).unwrap_err();
        assert!(matches!(err, EquivalentError::Patch(_)));
    }
}
