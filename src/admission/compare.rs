//! How a candidate's decision is compared with the legacy webhook's: both read from the
//! answer each would have given kube-apiserver (an AdmissionReview in the caller's version, or
//! the HTTP error of a failure under failurePolicy Fail), then compared on what kube-apiserver
//! acts on: allowed or denied, the status code of a denial, the object after a mutating
//! answer's patch, and the warnings shown to the user.

use serde::Serialize;
use serde_json::Value;

/// One side's decision, as kube-apiserver would act on it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Outcome {
    pub(crate) allowed: bool,
    /// A denial's `status.code` (an HTTP error's status); `None` when allowed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) code: Option<i64>,
    /// A denial's `status.message` (else its reason), or why the side failed.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) message: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) warnings: Vec<String>,
    /// The base64 JSON Patch of a mutating answer, against the caller's object. Never
    /// written out: a patch of a Secret carries its values.
    #[serde(skip)]
    pub(crate) patch: Option<String>,
    /// What the patch does, `op path` per operation (no values): what captures show.
    #[serde(rename = "patch", skip_serializing_if = "Option::is_none")]
    pub(crate) patch_operations: Option<String>,
    /// The proxy's decision word (`allowed`, `denied`, `failed-closed`, ...).
    pub(crate) decision: &'static str,
}

/// How the two decisions differ, in the order a cut-over cares about them; the first is the
/// comparison's result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Difference {
    /// One allowed, the other denied.
    Allowed,
    /// Both denied, with different status codes.
    Code,
    /// Both allowed; the objects after each one's patch differ.
    Patch,
    /// The warnings differ.
    Warnings,
}

impl Difference {
    /// The `result` label of `admission_proxy_candidate_comparisons_total`.
    pub(crate) fn result(self) -> &'static str {
        match self {
            Difference::Allowed => "disagree_allowed",
            Difference::Code => "disagree_code",
            Difference::Patch => "disagree_patch",
            Difference::Warnings => "disagree_warnings",
        }
    }
}

impl Outcome {
    /// The outcome of an answer: its HTTP status and body (an AdmissionReview carrying
    /// `response`, or for a non-200 the `metav1.Status` kube-apiserver would report).
    pub(crate) fn of_answer(http_status: u16, body: &[u8], decision: &'static str) -> Self {
        let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        if http_status != 200 {
            return Outcome {
                allowed: false,
                code: Some(i64::from(http_status)),
                message: text(&value, "message"),
                warnings: Vec::new(),
                patch: None,
                patch_operations: None,
                decision,
            };
        }
        let response = value.get("response").unwrap_or(&Value::Null);
        let patch = response.get("patch").and_then(Value::as_str);
        let allowed = response.get("allowed").and_then(Value::as_bool) == Some(true);
        let status = response.get("status").unwrap_or(&Value::Null);
        let message = match text(status, "message") {
            m if m.is_empty() => text(status, "reason"),
            m => m,
        };
        Outcome {
            allowed,
            code: (!allowed).then(|| status.get("code").and_then(Value::as_i64).unwrap_or(403)),
            message,
            warnings: response
                .get("warnings")
                .and_then(Value::as_array)
                .map(|w| {
                    w.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
            patch: patch.map(str::to_string),
            patch_operations: patch.map(crate::dispatch::patch_paths),
            decision,
        }
    }
}

fn text(value: &Value, field: &str) -> String {
    value
        .get(field)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// Every way `candidate` differs from `legacy`, most important first; empty when they agree.
/// `object` is the caller's object, which both patches are against (read only when the
/// patches differ as text).
pub(crate) fn differences(
    legacy: &Outcome,
    candidate: &Outcome,
    object: impl FnOnce() -> Option<Value>,
) -> Vec<Difference> {
    let mut found = Vec::new();
    if legacy.allowed != candidate.allowed {
        found.push(Difference::Allowed);
    } else if !legacy.allowed && legacy.code != candidate.code {
        found.push(Difference::Code);
    }
    if legacy.allowed && candidate.allowed && legacy.patch != candidate.patch {
        let after = |patch: &Option<String>, object: &Value| match patch {
            None => Some(object.clone()),
            Some(p) => crate::conversion::apply_patch(object, p).ok(),
        };
        let same = object().is_some_and(|object| {
            let (a, b) = (
                after(&legacy.patch, &object),
                after(&candidate.patch, &object),
            );
            a.is_some() && a == b
        });
        if !same {
            found.push(Difference::Patch);
        }
    }
    if legacy.warnings != candidate.warnings {
        found.push(Difference::Warnings);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    fn answer(response: Value) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response
        }))
        .unwrap()
    }

    fn patch(ops: Value) -> String {
        base64::engine::general_purpose::STANDARD.encode(ops.to_string())
    }

    #[test]
    fn allowed_denied_code_and_warnings_are_told_apart() {
        let allow = Outcome::of_answer(
            200,
            &answer(serde_json::json!({"uid": "u", "allowed": true})),
            "allowed",
        );
        let deny = |code: i64| {
            let body = answer(
                serde_json::json!({"uid": "u", "allowed": false, "status": {"code": code, "message": "no"}}),
            );
            Outcome::of_answer(200, &body, "denied")
        };
        let warned = Outcome::of_answer(
            200,
            &answer(serde_json::json!({"uid": "u", "allowed": true, "warnings": ["w"]})),
            "allowed",
        );
        assert_eq!(differences(&allow, &allow.clone(), || None), vec![]);
        assert_eq!(
            differences(&allow, &deny(403), || None),
            vec![Difference::Allowed]
        );
        assert_eq!(
            differences(&deny(403), &deny(422), || None),
            vec![Difference::Code]
        );
        assert_eq!(differences(&deny(403), &deny(403), || None), vec![]);
        assert_eq!(
            differences(&allow, &warned, || None),
            vec![Difference::Warnings]
        );
        // A failure under failurePolicy Fail is kube-apiserver's HTTP 500.
        let failed = Outcome::of_answer(
            500,
            br#"{"kind":"Status","message":"failed calling webhook"}"#,
            "failed-closed",
        );
        assert_eq!((failed.allowed, failed.code), (false, Some(500)));
        assert_eq!(
            differences(&deny(403), &failed, || None),
            vec![Difference::Code]
        );
    }

    /// Two patches that differ as text but make the same object agree; two that make
    /// different objects do not.
    #[test]
    fn patches_are_compared_by_the_object_they_make() {
        let object = serde_json::json!({"metadata": {"labels": {"a": "1"}}});
        let with = |p: String| {
            let body = answer(
                serde_json::json!({"uid": "u", "allowed": true, "patchType": "JSONPatch", "patch": p}),
            );
            Outcome::of_answer(200, &body, "allowed")
        };
        let add = with(patch(
            serde_json::json!([{"op": "add", "path": "/metadata/labels/b", "value": "2"}]),
        ));
        let same = with(patch(
            serde_json::json!([{"op": "replace", "path": "/metadata/labels", "value": {"a": "1", "b": "2"}}]),
        ));
        let other = with(patch(
            serde_json::json!([{"op": "add", "path": "/metadata/labels/b", "value": "3"}]),
        ));
        assert_eq!(differences(&add, &same, || Some(object.clone())), vec![]);
        assert_eq!(
            differences(&add, &other, || Some(object.clone())),
            vec![Difference::Patch]
        );
    }
}
