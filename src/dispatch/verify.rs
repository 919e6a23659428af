//! Turning a backend's HTTP answer into a verified webhook response, exactly as kube-apiserver
//! does: client-go's `transformResponse` and `Result.Into`
//! (`staging/src/k8s.io/client-go/rest/request.go`), then `VerifyAdmissionResponse`
//! (`staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/request/admissionreview.go`).
//! Depends on `api`, `review` and the client's [`HttpReply`].

use std::borrow::Cow;
use std::collections::BTreeMap;

use base64::Engine;
use serde::Deserialize;

use super::client::HttpReply;
use super::CallFailure;
use crate::api::WebhookType;
use crate::review::ReviewVersion;

/// A backend's `response`, verified.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct VerifiedResponse {
    pub(crate) allowed: bool,
    /// `status`, passed through as the backend wrote it (denials only).
    pub(crate) status: Option<serde_json::Value>,
    /// The base64 JSON Patch, only from mutating webhooks, decoded and non-empty.
    pub(crate) patch: Option<String>,
    pub(crate) warnings: Vec<String>,
    pub(crate) audit_annotations: BTreeMap<String, String>,
}

/// A JSON answer's envelope, for the one-pass decode.
use crate::review::optional_borrowed;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireReview<'a> {
    #[serde(default, borrow, deserialize_with = "optional_borrowed")]
    api_version: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "optional_borrowed")]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    response: Option<WireResponse<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireResponse<'a> {
    #[serde(default, borrow, deserialize_with = "optional_borrowed")]
    uid: Option<Cow<'a, str>>,
    #[serde(default)]
    allowed: bool,
    #[serde(default)]
    status: Option<serde_json::Value>,
    #[serde(default)]
    patch: Option<String>,
    #[serde(default, borrow, deserialize_with = "optional_borrowed")]
    patch_type: Option<Cow<'a, str>>,
    #[serde(default)]
    warnings: Option<Vec<String>>,
    #[serde(default)]
    audit_annotations: Option<BTreeMap<String, String>>,
}

/// Decodes and verifies `reply` to a request of `version` with `uid` sent to a webhook of
/// `webhook_type`.
///
/// # Errors
/// The [`CallFailure`] kube-apiserver would report: non-2xx status, empty or undecodable
/// body, an invalid response (v1: uid, apiVersion/kind, patch/patchType rules), an unsupported
/// patchType or an undecodable patch.
pub(crate) fn verify(
    reply: &HttpReply,
    version: ReviewVersion,
    uid: &str,
    webhook_type: WebhookType,
) -> Result<VerifiedResponse, CallFailure> {
    check_status(reply)?;
    // The response Content-Type is ignored: JSON and YAML are both sniffed, as the webhook
    // client has one serializer for every media type (`NewClientManager`,
    // `staging/src/k8s.io/apiserver/pkg/util/webhook/client.go`).
    // A well-formed JSON answer is decoded in one pass; anything else (YAML, duplicate keys,
    // wrong types) goes through a map, which keeps the last of duplicate keys as
    // sigs.k8s.io/json does and reports the first problem in kube-apiserver's words.
    let mut fast = serde_json::from_slice::<WireReview<'_>>(&reply.body).ok();
    let fast_response = fast.as_mut().map(|review| review.response.take());
    let value: serde_json::Value;
    // `response`: the map path's `response` member (`Some(None)`: absent); `None` on the
    // one-pass path, whose response is `fast_response`.
    let (api_version, kind, response) = match &fast {
        Some(review) => (
            review.api_version.as_deref().unwrap_or(""),
            review.kind.as_deref().unwrap_or(""),
            None,
        ),
        None => {
            value = decode_any(&reply.body).map_err(|e| CallFailure::Undecodable(e.to_string()))?;
            let Some(object) = value.as_object() else {
                return Err(CallFailure::Undecodable(
                    "couldn't get version/kind; json parse error: expected an object".into(),
                ));
            };
            let text = |key: &str| object.get(key).and_then(|v| v.as_str()).unwrap_or("");
            (
                text("apiVersion"),
                text("kind"),
                Some(object.get("response")),
            )
        }
    };
    let gvk_ok = check_kind(api_version, kind, version)?;
    let absent = || CallFailure::Invalid("webhook response was absent".into());
    let response = match (fast_response, response) {
        (Some(decoded), _) => decoded.ok_or_else(absent)?,
        (None, None | Some(None | Some(serde_json::Value::Null))) => return Err(absent()),
        (None, Some(Some(r))) => WireResponse::deserialize(r)
            .map_err(|e| CallFailure::Undecodable(format!("json: {e}")))?,
    };
    // v1beta1 checks only that a response is present; validating webhooks' patches are
    // ignored and a mutating patch is JSONPatch whatever its patchType
    // (`VerifyAdmissionResponse`).
    if version == ReviewVersion::V1 {
        check_v1(&response, uid, webhook_type, (api_version, kind, gvk_ok))?;
    }
    into_verified(response, version, webhook_type)
}

/// client-go's answer to a non-2xx status (`transformResponse`) or an empty body, before
/// anything is decoded.
fn check_status(reply: &HttpReply) -> Result<(), CallFailure> {
    if !(200..=206).contains(&reply.status) {
        return Err(CallFailure::Status {
            code: reply.status,
            message: status_message(reply),
        });
    }
    if reply.body.is_empty() {
        return Err(CallFailure::Undecodable(format!(
            "0-length response with status code: {} and content type: {}",
            reply.status,
            reply.content_type().unwrap_or("application/json")
        )));
    }
    Ok(())
}

/// Whether the answer's `apiVersion`/`kind` are the request's AdmissionReview. A wrong but
/// present apiVersion/kind fails in the decoder (`Result.Into`), before
/// `VerifyAdmissionResponse` looks at it; absent ones are left to its v1 rules.
fn check_kind(api_version: &str, kind: &str, version: ReviewVersion) -> Result<bool, CallFailure> {
    let gvk_ok = api_version == version.api_version() && kind == "AdmissionReview";
    if !gvk_ok && !api_version.is_empty() && !kind.is_empty() {
        let message = match ReviewVersion::from_api_version(api_version) {
            Some(other) if kind == "AdmissionReview" => format!(
                "converting ({}.AdmissionReview) to ({}.AdmissionReview): unknown conversion",
                other.as_str(),
                version.as_str()
            ),
            _ => format!("no kind {kind:?} is registered for version {api_version:?}"),
        };
        return Err(CallFailure::Undecodable(message));
    }
    Ok(gvk_ok)
}

/// `VerifyAdmissionResponse`'s v1 rules, in its order
/// (`staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/request/admissionreview.go`):
/// the uid echoed, the envelope's group/version/kind (the last argument: the answer's
/// `apiVersion`, `kind`, and whether they are v1's), then patch and patchType as the webhook
/// type allows them.
fn check_v1(
    response: &WireResponse,
    uid: &str,
    webhook_type: WebhookType,
    (api_version, kind, gvk_ok): (&str, &str, bool),
) -> Result<(), CallFailure> {
    let has_patch = response.patch.as_deref().is_some_and(|p| !p.is_empty());
    let got_uid = response.uid.as_deref().unwrap_or("");
    if got_uid != uid {
        return Err(CallFailure::Invalid(format!(
            "expected response.uid={uid:?}, got {got_uid:?}"
        )));
    }
    if !gvk_ok {
        // Go prints a GroupVersionKind as `group/version, Kind=kind`.
        let gv = if api_version.contains('/') {
            api_version.to_string()
        } else {
            format!("/{api_version}")
        };
        return Err(CallFailure::Invalid(format!("expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {gv}, Kind={kind}")));
    }
    match webhook_type {
        WebhookType::Mutating => match (has_patch, response.patch_type.as_deref()) {
            (true, None) => {
                return Err(CallFailure::Invalid(
                    "webhook returned response.patch but not response.patchType".into(),
                ))
            }
            (false, Some(_)) => {
                return Err(CallFailure::Invalid(
                    "webhook returned response.patchType but not response.patch".into(),
                ))
            }
            (true, Some("")) => {
                return Err(CallFailure::Invalid(
                    "webhook returned invalid response.patchType of \"\"".into(),
                ))
            }
            _ => {}
        },
        WebhookType::Validating => {
            if has_patch {
                return Err(CallFailure::Invalid(
                    "validating webhook may not return response.patch".into(),
                ));
            }
            if response.patch_type.is_some() {
                return Err(CallFailure::Invalid(
                    "validating webhook may not return response.patchType".into(),
                ));
            }
        }
    }
    Ok(())
}

/// The verified answer: status only for a denial, warnings and audit annotations, and a
/// mutating webhook's patch when it allows (a denial ignores any patch:
/// `callAttrMutatingHook` returns on `!result.Allowed` first) and the patch decodes with at
/// least one operation.
fn into_verified(
    response: WireResponse,
    version: ReviewVersion,
    webhook_type: WebhookType,
) -> Result<VerifiedResponse, CallFailure> {
    let has_patch = response.patch.as_deref().is_some_and(|p| !p.is_empty());
    let mut verified = VerifiedResponse {
        allowed: response.allowed,
        status: if response.allowed {
            None
        } else {
            response.status
        },
        patch: None,
        warnings: response.warnings.unwrap_or_default(),
        audit_annotations: response.audit_annotations.unwrap_or_default(),
    };
    if response.allowed && has_patch && webhook_type == WebhookType::Mutating {
        if version == ReviewVersion::V1 {
            if let Some(t) = response.patch_type.as_deref().filter(|t| *t != "JSONPatch") {
                return Err(CallFailure::UnsupportedPatchType(t.to_string()));
            }
        }
        let patch = response.patch.unwrap_or_default();
        let ops = decode_patch(&patch).map_err(|e| match e {
            // The patch is `[]byte` in the AdmissionResponse: bad base64 fails decoding the
            // answer itself, before `jsonpatch.DecodePatch` sees anything.
            PatchError::Base64(_) => CallFailure::Undecodable(e.to_string()),
            PatchError::Json(_) => CallFailure::UndecodablePatch(e.to_string()),
        })?;
        if ops > 0 {
            verified.patch = Some(patch);
        }
    }
    Ok(verified)
}

/// Why an answer's body decodes as neither JSON nor YAML; the texts of kube-apiserver's
/// universal deserializer, the parser's words included (so no `source()`).
#[derive(Debug, thiserror::Error)]
enum BodyError {
    #[error("json: {0}")]
    Json(serde_json::Error),
    #[error("couldn't get version/kind; json parse error: {0}")]
    NotUtf8(std::str::Utf8Error),
    #[error("couldn't get version/kind; json parse error: {0}")]
    Yaml(serde_yaml_ng::Error),
}

/// JSON first; anything that does not start like JSON is tried as YAML.
fn decode_any(body: &[u8]) -> Result<serde_json::Value, BodyError> {
    let trimmed = body
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .map(|i| body[i]);
    if matches!(trimmed, Some(b'{') | Some(b'[')) {
        return serde_json::from_slice(body).map_err(BodyError::Json);
    }
    let text = std::str::from_utf8(body).map_err(BodyError::NotUtf8)?;
    serde_yaml_ng::from_str(text).map_err(BodyError::Yaml)
}

/// Why a patch is not a base64 JSON Patch (`jsonpatch.DecodePatch`'s texts).
#[derive(Debug, thiserror::Error)]
enum PatchError {
    /// encoding/json's words for a `[]byte` field that is not base64
    /// (`base64.CorruptInputError`).
    #[error("illegal base64 data at input byte {}", base64_offset(.0))]
    Base64(base64::DecodeError),
    #[error("json: cannot unmarshal into []jsonpatch.Operation: {0}")]
    Json(serde_json::Error),
}

/// Where Go's decoder stops on bad base64 (the offset of the bad byte, or the input's length).
fn base64_offset(e: &base64::DecodeError) -> usize {
    match e {
        base64::DecodeError::InvalidByte(at, _) | base64::DecodeError::InvalidLastSymbol(at, _) => {
            *at
        }
        base64::DecodeError::InvalidLength(length) => *length,
        base64::DecodeError::InvalidPadding => 0,
    }
}

/// Decodes a base64 JSON Patch (`jsonpatch.DecodePatch`) and counts its operations.
fn decode_patch(patch: &str) -> Result<usize, PatchError> {
    let raw = base64::engine::general_purpose::STANDARD
        .decode(patch)
        .map_err(PatchError::Base64)?;
    let ops: Vec<serde_json::Map<String, serde_json::Value>> =
        serde_json::from_slice(&raw).map_err(PatchError::Json)?;
    Ok(ops.len())
}

/// The message client-go derives from a non-2xx answer, for admission and CRD conversion
/// webhook calls alike (kube-apiserver calls both with client-go): a Status body's `message`,
/// else the wording of `newUnstructuredResponseError` (`transformResponse`,
/// `staging/src/k8s.io/client-go/rest/request.go`: the body cut at 2048 bytes) and
/// apimachinery's `NewGenericServerResponse` for the status code.
pub(crate) fn status_message(reply: &HttpReply) -> String {
    #[derive(Deserialize)]
    struct StatusBody {
        kind: Option<String>,
        message: Option<String>,
    }
    if let Ok(StatusBody {
        kind: Some(k),
        message: Some(m),
    }) = serde_json::from_slice::<StatusBody>(&reply.body)
    {
        if k == "Status" {
            return m;
        }
    }
    let is_text = reply
        .content_type()
        .is_none_or(|ct| ct.starts_with("text/"));
    let body = String::from_utf8_lossy(&reply.body[..reply.body.len().min(2048)])
        .trim()
        .to_string();
    let text = if is_text && !body.is_empty() {
        body
    } else {
        "unknown".to_string()
    };
    match reply.status {
        400 => "the server rejected our request for an unknown reason".into(),
        401 => "Unauthorized".into(),
        403 => text,
        404 => "the server could not find the requested resource".into(),
        405 => "the server does not allow this method on the requested resource".into(),
        409 => "the server reported a conflict".into(),
        413 => "the server has rejected the request because the request is too large".into(),
        422 => "the server rejected our request due to an error in our request".into(),
        429 => "the server has received too many requests and has asked us to try again later".into(),
        503 => "the server is currently unable to handle the request".into(),
        504 => "the server was unable to return a response in the time allotted, but may still be processing the request".into(),
        code if code >= 500 => format!("an error on the server ({text:?}) has prevented the request from succeeding"),
        code => format!("the server responded with the status code {code} but did not return more information"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn reply(status: u16, body: &str) -> HttpReply {
        HttpReply::new(
            status,
            http::HeaderMap::from_iter([(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/json"),
            )]),
            Bytes::from(body.to_string()),
        )
    }

    fn v1(body: &str, t: WebhookType) -> Result<VerifiedResponse, CallFailure> {
        verify(&reply(200, body), ReviewVersion::V1, "u1", t)
    }

    /// The one-pass decode and the map decode agree: a duplicate key (which the one-pass
    /// decode refuses) is decided by its last value, as sigs.k8s.io/json does, and a
    /// wrong-typed field gets the map path's message.
    #[test]
    fn one_pass_and_map_decodes_agree() {
        let env = r#""apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview""#;
        let plain = format!(r#"{{{env},"response":{{"uid":"u1","allowed":false}}}}"#);
        assert!(!v1(&plain, WebhookType::Validating).unwrap().allowed);
        let duplicate = format!(
            r#"{{{env},"response":{{"uid":"u1","allowed":false}},"response":{{"uid":"u1","allowed":true}}}}"#
        );
        assert!(v1(&duplicate, WebhookType::Validating).unwrap().allowed);
        let null = format!(r#"{{{env},"response":null}}"#);
        assert!(
            matches!(v1(&null, WebhookType::Validating), Err(CallFailure::Invalid(m)) if m == "webhook response was absent")
        );
        let wrong = format!(r#"{{{env},"response":{{"uid":"u1","allowed":"yes"}}}}"#);
        assert!(
            matches!(v1(&wrong, WebhookType::Validating), Err(CallFailure::Undecodable(m)) if m.starts_with("json: invalid type: string"))
        );
    }

    /// `VerifyAdmissionResponse`, each v1 rule in order; it runs before `allowed` is read.
    #[test]
    fn v1_verification_order() {
        use WebhookType::*;
        let cases: &[(&str, WebhookType, &str)] = &[
            (
                r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
                Validating,
                "webhook response was absent",
            ),
            (
                r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"x","allowed":false}}"#,
                Validating,
                r#"expected response.uid="u1", got "x""#,
            ),
            (
                r#"{"response":{"uid":"u1","allowed":true}}"#,
                Validating,
                "got /, Kind=",
            ),
            (
                r#"{"apiVersion":"admission.k8s.io/v1","response":{"uid":"u1","allowed":true}}"#,
                Validating,
                "got admission.k8s.io/v1, Kind=",
            ),
            (
                r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u1","allowed":true,"patch":"W10="}}"#,
                Mutating,
                "patch but not response.patchType",
            ),
            (
                r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u1","allowed":true,"patchType":"JSONPatch"}}"#,
                Mutating,
                "patchType but not response.patch",
            ),
            (
                r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u1","allowed":true,"patch":"W10=","patchType":""}}"#,
                Mutating,
                "invalid response.patchType of \"\"",
            ),
            (
                r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u1","allowed":false,"patch":"W10="}}"#,
                Validating,
                "validating webhook may not return response.patch",
            ),
            (
                r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u1","allowed":true,"patchType":"JSONPatch"}}"#,
                Validating,
                "may not return response.patchType",
            ),
        ];
        for (body, t, want) in cases {
            let err = v1(body, *t).unwrap_err();
            assert!(
                matches!(err, CallFailure::Invalid(ref m) if m.contains(want)),
                "{body}: {err:?}"
            );
        }
    }

    #[test]
    fn decoding_failures() {
        let err = v1(r#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","response":{"uid":"u1","allowed":true}}"#, WebhookType::Validating).unwrap_err();
        assert_eq!(
            err,
            CallFailure::Undecodable(
                "converting (v1beta1.AdmissionReview) to (v1.AdmissionReview): unknown conversion"
                    .into()
            )
        );
        assert!(
            matches!(v1("", WebhookType::Validating).unwrap_err(), CallFailure::Undecodable(m) if m == "0-length response with status code: 200 and content type: application/json")
        );
        assert!(matches!(
            v1("not json at all: [", WebhookType::Validating).unwrap_err(),
            CallFailure::Undecodable(_)
        ));
        let status = verify(
            &reply(503, ""),
            ReviewVersion::V1,
            "u1",
            WebhookType::Validating,
        )
        .unwrap_err();
        assert_eq!(
            status,
            CallFailure::Status {
                code: 503,
                message: "the server is currently unable to handle the request".into()
            }
        );
        let status = verify(
            &reply(429, r#"{"kind":"Status","message":"slow down"}"#),
            ReviewVersion::V1,
            "u1",
            WebhookType::Validating,
        )
        .unwrap_err();
        assert_eq!(
            status,
            CallFailure::Status {
                code: 429,
                message: "slow down".into()
            }
        );
    }

    #[test]
    fn allowed_is_case_sensitive_and_defaults_to_false() {
        let r = v1(r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u1","Allowed":true}}"#, WebhookType::Validating).unwrap();
        assert!(
            !r.allowed,
            "`VerifyAdmissionResponse`: allowed defaults to false"
        );
    }

    #[test]
    fn v1beta1_is_lenient_and_yaml_is_accepted() {
        let r = verify(&reply(200, "response:\n  allowed: true\n  patch: W3sib3AiOiJhZGQiLCJwYXRoIjoiL3giLCJ2YWx1ZSI6MX1d\n"), ReviewVersion::V1beta1, "u1", WebhookType::Mutating).unwrap();
        assert!(r.allowed && r.patch.is_some());
        let r = verify(&reply(200, r#"{"response":{"allowed":true,"patch":"W3sib3AiOiJhZGQiLCJwYXRoIjoiL3giLCJ2YWx1ZSI6MX1d"}}"#), ReviewVersion::V1beta1, "u1", WebhookType::Validating).unwrap();
        assert_eq!(r.patch, None, "validating v1beta1 patches are ignored");
    }

    #[test]
    fn patch_rules() {
        let with = |patch: &str, t: &str| {
            format!(
                r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{{"uid":"u1","allowed":true,"patch":"{patch}","patchType":"{t}"}}}}"#
            )
        };
        assert_eq!(
            v1(&with("W10=", "MergePatch"), WebhookType::Mutating).unwrap_err(),
            CallFailure::UnsupportedPatchType("MergePatch".into())
        );
        assert_eq!(
            v1(&with("!!", "JSONPatch"), WebhookType::Mutating).unwrap_err(),
            CallFailure::Undecodable("illegal base64 data at input byte 0".into())
        );
        assert!(matches!(
            v1(&with("bm90IGpzb24=", "JSONPatch"), WebhookType::Mutating).unwrap_err(),
            CallFailure::UndecodablePatch(_)
        ));
        assert_eq!(
            v1(&with("W10=", "JSONPatch"), WebhookType::Mutating)
                .unwrap()
                .patch,
            None,
            "zero operations: no change"
        );
    }
}
