//! How a candidate's decision is compared with the legacy webhook's: both read from the
//! answer each would have given kube-apiserver (an AdmissionReview in the caller's version, or
//! the HTTP error of a failure under failurePolicy Fail), then compared on what kube-apiserver
//! acts on: allowed or denied, the status code of a denial, the object after a mutating
//! answer's patch, and the warnings shown to the user.

use serde::Serialize;
use serde_json::Value;

/// One side's decision, as kube-apiserver would act on it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Outcome {
    pub(crate) allowed: bool,
    /// A denial's `status.code` (an HTTP error's status); `None` when allowed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) code: Option<i64>,
    /// A denial's `status.message` (else its reason), or why the side failed. A policy's
    /// denial is the message its client reads (`<resource> "<name>" is forbidden:
    /// ValidatingAdmissionPolicy '<policy>' with binding '<binding>' denied request: …`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) message: String,
    /// A denial's `status.reason` (`Forbidden`, `Invalid`, ...), when it has one.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) reason: String,
    /// A policy's failing validation, `spec.validations[<i>]: <expression>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) validation: Option<String>,
    /// The evaluation or configuration error failurePolicy decided this outcome from
    /// (`expression '…' resulted in error: …`, `failed to configure binding: …`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    /// A policy's audit annotations: `<policy>/<key>` and
    /// `validation.policy.admission.k8s.io/validation_failure`, as kube-apiserver adds them
    /// to the audit event.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub(crate) audit_annotations: std::collections::BTreeMap<String, String>,
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
                reason: text(&value, "reason"),
                decision,
                ..Outcome::default()
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
            warnings: shown_warnings(
                response
                    .get("warnings")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str),
            ),
            patch: patch.map(str::to_string),
            patch_operations: patch.map(crate::dispatch::patch_paths),
            reason: if allowed {
                String::new()
            } else {
                text(status, "reason")
            },
            decision,
            ..Outcome::default()
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

/// kube-apiserver's warning recorder (`recorder.AddWarning`,
/// `staging/src/k8s.io/apiserver/pkg/endpoints/filters/warning.go`): at most 4,096 runes of
/// warning text in all, then every warning cut to 256 runes and no more added.
const TRUNCATE_AT_TOTAL_RUNES: usize = 4 * 1024;
const TRUNCATE_ITEM_RUNES: usize = 256;

/// The warnings a user is shown for `warnings` (one webhook's, in order), as kube-apiserver's
/// recorder keeps them (`recorder.AddWarning`, `warning.go`): empty ones and repeats dropped,
/// and one with a control character (which `net.NewWarningHeader` refuses); once the text
/// passes 4,096 runes, every warning is cut to its first 256 runes (with no mark) and, once the
/// cut ones reach 4,096 again, the rest dropped. What the candidate comparison compares and a
/// capture keeps: bounded, however many warnings a backend or a policy sends.
pub(crate) fn shown_warnings<'a>(warnings: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let cut = |text: &str| -> (String, usize) {
        let runes = text.chars().count();
        if runes > TRUNCATE_ITEM_RUNES {
            (
                text.chars().take(TRUNCATE_ITEM_RUNES).collect(),
                TRUNCATE_ITEM_RUNES,
            )
        } else {
            (text.to_string(), runes)
        }
    };
    let valid = |text: &str| !text.chars().any(char::is_control);
    let mut recorded = std::collections::HashSet::new();
    let mut ordered: Vec<&str> = Vec::new();
    let mut shown: Vec<String> = Vec::new();
    let (mut written, mut truncating) = (0usize, false);
    for text in warnings {
        if text.is_empty() || (truncating && written >= TRUNCATE_AT_TOTAL_RUNES) {
            continue;
        }
        if !recorded.insert(text) {
            continue;
        }
        ordered.push(text);
        let (text, runes) = if truncating {
            cut(text)
        } else {
            (text.to_string(), text.chars().count())
        };
        if !valid(&text) {
            continue;
        }
        if truncating || written + runes <= TRUNCATE_AT_TOTAL_RUNES {
            written += runes;
            shown.push(text);
            continue;
        }
        // Over the limit: start again with every warning so far cut.
        truncating = true;
        written = 0;
        shown.clear();
        for earlier in &ordered {
            let (text, runes) = cut(earlier);
            if valid(&text) {
                written += runes;
                shown.push(text);
            }
        }
    }
    shown
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

    /// kube-apiserver's `TestTruncation` (`warning_test.go`), its limits scaled from 25 and 5
    /// runes to 4,096 and 256: the item that passes the total cuts every item, and items after
    /// the cut ones reach the total again are dropped; repeats, empty ones and ones with a
    /// control character are never shown.
    #[test]
    fn warnings_are_kept_as_kube_apiserver_s_recorder_keeps_them() {
        let runes = |c: char, n: usize| c.to_string().repeat(n);
        let small = shown_warnings(["a", "", "a", "b\nc", "d"]);
        assert_eq!(small, ["a", "d"]);
        let big: Vec<String> = (0..20).map(|i| runes(char::from(b'a' + i), 300)).collect();
        let shown = shown_warnings(big.iter().map(String::as_str));
        // 13 warnings of 300 runes fit in 4,096; the 14th cuts all to 256: 14 × 256 = 3,584,
        // then 15 and 16 are added (4,096), and the rest dropped.
        assert_eq!(shown.len(), 16);
        assert!(shown.iter().all(|w| w.chars().count() == 256));
        assert_eq!(shown[0], runes('a', 256));
        assert_eq!(shown[15], runes('p', 256));
        // 3,000 warnings of 1 KB are at most 4,096 runes in all (plus the cut item lengths).
        let flood: Vec<String> = (0..3_000)
            .map(|i| format!("{i:04}{}", "x".repeat(1_020)))
            .collect();
        let shown = shown_warnings(flood.iter().map(String::as_str));
        let total: usize = shown.iter().map(|w| w.chars().count()).sum();
        assert!(total <= 4_096 + 256, "{total}");
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
