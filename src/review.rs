//! AdmissionReview envelopes (admission.k8s.io `v1` and `v1beta1`): parse a request body once,
//! re-address it to another review version without re-serialising it, and encode answers.
//!
//! Depends on nothing else in this crate. Field names follow `k8s.io/api/admission/v1`
//! verbatim; the two versions carry identical request fields (`CreateV1AdmissionReview` and
//! `CreateV1beta1AdmissionReview` fill the same ones, in
//! `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/request/admissionreview.go`), so
//! converting an envelope means changing `apiVersion` and nothing else.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use yoke::{Yoke, Yokeable};

/// An AdmissionReview version kube-apiserver knows (`CreateAdmissionObjects`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReviewVersion {
    /// `admission.k8s.io/v1`: responses are verified strictly (uid, apiVersion/kind, patchType).
    V1,
    /// `admission.k8s.io/v1beta1`: responses may omit uid, apiVersion and kind.
    V1beta1,
}

impl ReviewVersion {
    /// The full `apiVersion`, e.g. `admission.k8s.io/v1`.
    pub fn api_version(self) -> &'static str {
        match self {
            ReviewVersion::V1 => "admission.k8s.io/v1",
            ReviewVersion::V1beta1 => "admission.k8s.io/v1beta1",
        }
    }

    /// The version alone, as written in `admissionReviewVersions` (`v1`, `v1beta1`).
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewVersion::V1 => "v1",
            ReviewVersion::V1beta1 => "v1beta1",
        }
    }

    /// Parses an `admissionReviewVersions` entry; `None` for versions kube-apiserver does not know.
    pub(crate) fn from_short(version: &str) -> Option<Self> {
        match version {
            "v1" => Some(ReviewVersion::V1),
            "v1beta1" => Some(ReviewVersion::V1beta1),
            _ => None,
        }
    }

    /// Parses a full `apiVersion`; `None` unless it is one of the two AdmissionReview versions.
    pub(crate) fn from_api_version(api_version: &str) -> Option<Self> {
        match api_version {
            "admission.k8s.io/v1" => Some(ReviewVersion::V1),
            "admission.k8s.io/v1beta1" => Some(ReviewVersion::V1beta1),
            _ => None,
        }
    }

    /// The version kube-apiserver sends a webhook: the first entry of `admissionReviewVersions`
    /// it knows, unknown entries skipped (`CreateAdmissionObjects`).
    /// `None` when no entry is known; calling such a webhook is a call failure.
    pub(crate) fn negotiate<S: AsRef<str>>(admission_review_versions: &[S]) -> Option<Self> {
        admission_review_versions
            .iter()
            .find_map(|v| Self::from_short(v.as_ref()))
    }
}

impl std::fmt::Display for ReviewVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `metav1.GroupVersionKind` as AdmissionRequest carries it, borrowing the request body
/// (no allocation per field on the request path: benches/README.md, "fewer allocations").
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
pub(crate) struct GroupVersionKind<'a> {
    #[serde(default, borrow)]
    pub(crate) group: Cow<'a, str>,
    #[serde(default, borrow)]
    pub(crate) version: Cow<'a, str>,
    #[serde(default, borrow)]
    pub(crate) kind: Cow<'a, str>,
}

/// `metav1.GroupVersionResource` as AdmissionRequest carries it, borrowing the request body.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
pub struct GroupVersionResource<'a> {
    #[serde(default, borrow)]
    pub(crate) group: Cow<'a, str>,
    #[serde(default, borrow)]
    pub(crate) version: Cow<'a, str>,
    #[serde(default, borrow)]
    pub(crate) resource: Cow<'a, str>,
}

/// An admission operation (`request.operation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// `CREATE`.
    Create,
    /// `UPDATE`.
    Update,
    /// `DELETE`.
    Delete,
    /// `CONNECT`.
    Connect,
}

impl Operation {
    /// Parses the wire form (`CREATE`, `UPDATE`, `DELETE`, `CONNECT`).
    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "CREATE" => Some(Operation::Create),
            "UPDATE" => Some(Operation::Update),
            "DELETE" => Some(Operation::Delete),
            "CONNECT" => Some(Operation::Connect),
            _ => None,
        }
    }

    /// The wire form.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// `request` of an AdmissionReview, borrowing the request body: `object`, `oldObject`,
/// `userInfo` and `options` stay raw JSON so that nothing is parsed that no decision needs.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest<'a> {
    /// The request's uid, echoed in the response.
    #[serde(default, borrow)]
    pub uid: Cow<'a, str>,
    #[serde(default, borrow)]
    pub(crate) kind: GroupVersionKind<'a>,
    #[serde(default, borrow)]
    pub(crate) resource: GroupVersionResource<'a>,
    #[serde(default, borrow)]
    pub(crate) sub_resource: Cow<'a, str>,
    #[serde(default, borrow)]
    pub(crate) request_kind: Option<GroupVersionKind<'a>>,
    #[serde(default, borrow)]
    pub(crate) request_resource: Option<GroupVersionResource<'a>>,
    #[serde(default, borrow, deserialize_with = "optional_borrowed")]
    pub(crate) request_sub_resource: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(crate) name: Cow<'a, str>,
    /// The object's namespace, `""` for cluster-scoped objects.
    #[serde(default, borrow)]
    pub namespace: Cow<'a, str>,
    #[serde(default, borrow)]
    pub(crate) operation: Cow<'a, str>,
    #[serde(default, borrow)]
    pub(crate) user_info: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub(crate) object: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub(crate) old_object: Option<&'a RawValue>,
    #[serde(default)]
    pub(crate) dry_run: Option<bool>,
    #[serde(default, borrow)]
    pub(crate) options: Option<&'a RawValue>,
}

impl<'a> AdmissionRequest<'a> {
    /// The kind of the original request: `requestKind` when present, else `kind`
    /// (`CreateV1AdmissionReview` puts the original request's there; match against it).
    pub(crate) fn effective_kind(&self) -> &GroupVersionKind<'a> {
        self.request_kind.as_ref().unwrap_or(&self.kind)
    }

    /// The resource of the original request: `requestResource` when present, else `resource`.
    pub fn effective_resource(&self) -> &GroupVersionResource<'a> {
        self.request_resource.as_ref().unwrap_or(&self.resource)
    }

    /// The subresource of the original request. When `requestResource` is present an absent
    /// `requestSubResource` means "" (it is `omitempty`); otherwise `subResource` is used.
    pub fn effective_sub_resource(&self) -> &str {
        if self.request_resource.is_some() {
            self.request_sub_resource.as_deref().unwrap_or("")
        } else {
            &self.sub_resource
        }
    }

    /// `request.dryRun`, false when absent.
    pub(crate) fn is_dry_run(&self) -> bool {
        self.dry_run.unwrap_or(false)
    }
}

/// An optional string borrowed from the input when it has no escapes. serde borrows a
/// `Cow<str>` field only when the field is the `Cow` itself; inside an `Option` it would
/// always allocate (serde-rs/serde#1497).
///
/// # Errors
/// The deserializer's, for anything but a string or null.
pub(crate) fn optional_borrowed<'de, D>(d: D) -> Result<Option<Cow<'de, str>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    #[derive(Deserialize)]
    struct Borrowed<'a>(#[serde(borrow)] Cow<'a, str>);
    Ok(Option::<Borrowed<'de>>::deserialize(d)?.map(|b| b.0))
}

/// Why an incoming body is not an AdmissionReview request we can serve (answered with 400).
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// Not JSON, or not the shape of an AdmissionReview.
    #[error("malformed AdmissionReview: {0}")]
    Json(serde_json::Error),
    /// No `apiVersion`.
    #[error("AdmissionReview has no apiVersion")]
    MissingApiVersion,
    /// An `apiVersion` other than admission.k8s.io/v1 and v1beta1.
    #[error("unsupported AdmissionReview apiVersion {0:?}: expected admission.k8s.io/v1 or admission.k8s.io/v1beta1")]
    UnsupportedApiVersion(String),
    /// A `kind` other than `AdmissionReview`.
    #[error("wrong kind {0:?}: expected AdmissionReview")]
    WrongKind(String),
    /// No `request`.
    #[error("AdmissionReview has no request")]
    MissingRequest,
    /// No `request.uid`.
    #[error("AdmissionReview request has no uid")]
    MissingUid,
    /// A `request.operation` other than CREATE, UPDATE, DELETE or CONNECT.
    #[error("AdmissionReview request has unknown operation {0:?}: expected CREATE, UPDATE, DELETE or CONNECT")]
    UnknownOperation(String),
}

/// The decoder's words are the message's (`malformed AdmissionReview: <why>`), so the error
/// keeps them as a field, not as a `source()`.
impl From<serde_json::Error> for ReviewError {
    fn from(e: serde_json::Error) -> Self {
        ReviewError::Json(e)
    }
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(rename = "apiVersion", default, borrow)]
    api_version: Option<&'a RawValue>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default, borrow)]
    request: Option<&'a RawValue>,
}

/// The envelope with its request parsed in the same pass (the common, well-formed case).
#[derive(Deserialize)]
struct Whole<'a> {
    #[serde(rename = "apiVersion", default, borrow)]
    api_version: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "optional_borrowed")]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    request: Option<AdmissionRequest<'a>>,
}

/// An AdmissionReview request parsed once, borrowing the body it came from.
#[derive(Clone, Debug, Yokeable)]
pub struct ParsedReview<'a> {
    /// The version the caller (kube-apiserver) used; the answer must use it too.
    pub version: ReviewVersion,
    /// The request, borrowing the body.
    pub request: AdmissionRequest<'a>,
    /// `request.operation`, parsed.
    pub operation: Operation,
    body: &'a [u8],
    api_version_span: Range<usize>,
}

#[cfg(test)]
thread_local! {
    /// How many AdmissionReviews this thread parsed: what the parse-once tests count.
    pub(crate) static PARSES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

impl<'a> ParsedReview<'a> {
    /// Length of the AdmissionReview body, in bytes.
    pub(crate) fn body_len(&self) -> usize {
        self.body.len()
    }

    /// Parses an AdmissionReview request body.
    ///
    /// # Errors
    /// [`ReviewError`] for malformed JSON, a missing or unknown `apiVersion`, a `kind` other than
    /// `AdmissionReview`, a missing `request` or `request.uid`, or an unknown operation.
    pub fn parse(body: &'a [u8]) -> Result<Self, ReviewError> {
        #[cfg(test)]
        PARSES.with(|n| n.set(n.get() + 1));
        // One pass over the body for a well-formed review; anything else takes the two-pass
        // path below, which reports the first problem in the documented order. The body's
        // UTF-8 is checked once, whole: `from_slice` would check it again for every string and
        // every borrowed `object`/`oldObject` it hands out.
        if let Some(Whole {
            api_version: Some(raw_version),
            kind: Some(kind),
            request: Some(request),
        }) = std::str::from_utf8(body)
            .ok()
            .and_then(|text| serde_json::from_str::<Whole<'a>>(text).ok())
        {
            if let (Some(version), "AdmissionReview", false, Some(operation)) = (
                serde_json::from_str::<&str>(raw_version.get())
                    .ok()
                    .and_then(ReviewVersion::from_api_version),
                &*kind,
                request.uid.is_empty(),
                Operation::parse(&request.operation),
            ) {
                return Ok(ParsedReview {
                    version,
                    request,
                    operation,
                    body,
                    api_version_span: span_in(body, raw_version.get()),
                });
            }
        }
        let envelope: Envelope<'a> = serde_json::from_slice(body)?;
        let raw_version = envelope.api_version.ok_or(ReviewError::MissingApiVersion)?;
        let api_version: String = serde_json::from_str(raw_version.get())?;
        let version = ReviewVersion::from_api_version(&api_version)
            .ok_or(ReviewError::UnsupportedApiVersion(api_version))?;
        match envelope.kind.as_deref() {
            Some("AdmissionReview") => {}
            other => return Err(ReviewError::WrongKind(other.unwrap_or("").to_string())),
        }
        let raw_request = envelope.request.ok_or(ReviewError::MissingRequest)?;
        if raw_request.get() == "null" {
            return Err(ReviewError::MissingRequest);
        }
        let request: AdmissionRequest<'a> = serde_json::from_str(raw_request.get())?;
        if request.uid.is_empty() {
            return Err(ReviewError::MissingUid);
        }
        let operation = Operation::parse(&request.operation)
            .ok_or_else(|| ReviewError::UnknownOperation(request.operation.to_string()))?;
        Ok(ParsedReview {
            version,
            request,
            operation,
            body,
            api_version_span: span_in(body, raw_version.get()),
        })
    }

    /// The body as `version` would carry it. For the caller's own version that is the body
    /// as received (borrowed, byte for byte); otherwise only the `apiVersion` value is spliced.
    pub fn body_as(&self, version: ReviewVersion) -> Cow<'a, [u8]> {
        self.body_for_call(version, None)
    }

    /// The body as `version` would carry it with `request.uid` replaced by `uid` when given:
    /// kube-apiserver sends each webhook call a uid of its own (`CreateAdmissionObjects` in
    /// `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/request/admissionreview.go`
    /// makes a new one per call), which a chain of webhooks behind one admission needs too.
    /// `uid` is put in as it is (a UUID needs no JSON escaping), in place of the received
    /// uid's JSON string whether or not it was written with escapes. Without an edit, the body
    /// as received (borrowed, byte for byte).
    pub(crate) fn body_for_call(&self, version: ReviewVersion, uid: Option<&str>) -> Cow<'a, [u8]> {
        let mut edits: [Option<(Range<usize>, [&str; 3])>; 2] = [None, None];
        if version != self.version {
            edits[0] = Some((
                self.api_version_span.clone(),
                ["\"", version.api_version(), "\""],
            ));
        }
        if let Some(uid) = uid {
            edits[1] = match &self.request.uid {
                Cow::Borrowed(received) => Some((span_in(self.body, received), ["", uid, ""])),
                // Decoded from escapes: its string's span (quotes included) is found again,
                // a rare second read of the envelope; the body parsed once already.
                Cow::Owned(_) => self.raw_uid_span().map(|span| (span, ["\"", uid, "\""])),
            };
        }
        if edits.iter().all(Option::is_none) {
            return Cow::Borrowed(self.body);
        }
        edits.sort_by_key(|e| e.as_ref().map_or(usize::MAX, |(span, _)| span.start));
        let mut out = Vec::with_capacity(self.body.len() + 64);
        let mut at = 0;
        for (span, pieces) in edits.into_iter().flatten() {
            out.extend_from_slice(&self.body[at..span.start]);
            for piece in pieces {
                out.extend_from_slice(piece.as_bytes());
            }
            at = span.end;
        }
        out.extend_from_slice(&self.body[at..]);
        Cow::Owned(out)
    }

    /// Where `request.uid`'s JSON string, quotes included, lies in the body; `None` when the
    /// body does not read again (it did once, so only for a uid that is not a string).
    fn raw_uid_span(&self) -> Option<Range<usize>> {
        #[derive(Deserialize)]
        struct Uid<'a> {
            #[serde(borrow)]
            uid: &'a RawValue,
        }
        let envelope: Envelope<'a> = serde_json::from_slice(self.body).ok()?;
        let request: Uid<'a> = serde_json::from_str(envelope.request?.get()).ok()?;
        let raw = request.uid.get();
        raw.starts_with('"').then(|| span_in(self.body, raw))
    }

    /// The body exactly as received.
    pub(crate) fn body(&self) -> &'a [u8] {
        self.body
    }
}

/// An AdmissionReview parsed once together with the body it borrows, so that work after the
/// answer (a Shadow call) takes the review as it is, with no copy of the body and no second
/// parse. Cloning it shares the body (a reference count) and copies the parsed fields' borrows.
///
/// ```
/// use admission_proxy::review::SharedReview;
///
/// let body = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",
///   "request":{"uid":"705ab4f5-6393-11e8-b7cc-42010a800002","operation":"CREATE",
///   "kind":{"group":"","version":"v1","kind":"Pod"},
///   "resource":{"group":"","version":"v1","resource":"pods"},"namespace":"default"}}"#;
/// let review = SharedReview::parse(bytes::Bytes::from_static(body)).unwrap();
/// let later = review.clone();
/// assert_eq!(later.get().request.namespace, "default");
/// ```
#[derive(Clone)]
pub struct SharedReview(Yoke<ParsedReview<'static>, Arc<Bytes>>);

impl SharedReview {
    /// Parses `body` as [`ParsedReview::parse`] does, keeping the body alive beside the review.
    ///
    /// # Errors
    /// [`ReviewError`], as [`ParsedReview::parse`].
    pub fn parse(body: Bytes) -> Result<Self, ReviewError> {
        Yoke::try_attach_to_cart(Arc::new(body), |body: &Bytes| ParsedReview::parse(body))
            .map(SharedReview)
    }

    /// The parsed review, borrowing the shared body.
    pub fn get(&self) -> &ParsedReview<'_> {
        self.0.get()
    }
}

impl std::fmt::Debug for SharedReview {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

/// Where `part` (a sub-slice of `whole`, as serde hands out borrowed RawValues) lies in `whole`.
fn span_in(whole: &[u8], part: &str) -> Range<usize> {
    let start = part.as_ptr() as usize - whole.as_ptr() as usize;
    start..start + part.len()
}

/// A `metav1.Status` as the proxy builds it for a denial or a failure.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Status {
    pub(crate) status: &'static str,
    pub(crate) message: String,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub(crate) reason: &'static str,
    pub(crate) code: u16,
}

impl Status {
    /// A `Failure` status with the given HTTP code, reason (`BadRequest`, `Forbidden`, ...) and message.
    pub(crate) fn failure(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Status {
            status: "Failure",
            message: message.into(),
            reason,
            code,
        }
    }
}

/// The answer's `response`, as the proxy sends it to kube-apiserver.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AdmissionResponse {
    pub(crate) uid: String,
    pub(crate) allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) status: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) patch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) patch_type: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) audit_annotations: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) warnings: Vec<String>,
}

impl AdmissionResponse {
    /// `allowed: true` for `uid`.
    pub(crate) fn allow(uid: &str) -> Self {
        AdmissionResponse {
            uid: uid.to_string(),
            allowed: true,
            ..Default::default()
        }
    }

    /// `allowed: false` for `uid` with a proxy-built status.
    pub(crate) fn deny(uid: &str, status: Status) -> Self {
        AdmissionResponse {
            uid: uid.to_string(),
            allowed: false,
            status: serde_json::to_value(status).ok(),
            ..Default::default()
        }
    }

    /// Encodes `{"kind":"AdmissionReview","apiVersion":...,"response":{...}}` in `version`.
    pub(crate) fn encode(&self, version: ReviewVersion) -> Vec<u8> {
        #[derive(Serialize)]
        struct Answer<'r> {
            kind: &'static str,
            #[serde(rename = "apiVersion")]
            api_version: &'static str,
            response: &'r AdmissionResponse,
        }
        // Serialising plain strings, bools and maps cannot fail.
        serde_json::to_vec(&Answer {
            kind: "AdmissionReview",
            api_version: version.api_version(),
            response: self,
        })
        .unwrap_or_default()
    }
}

/// The body of a non-2xx HTTP answer: a `metav1.Status` (`kind: Status`, `apiVersion: v1`).
/// kube-apiserver reads its `message` into
/// `failed calling webhook "N": failed to call webhook: <message>` (client-go's
/// `transformResponse` takes the Status's message; `ErrCallingWebhook.Error` adds the prefix).
pub(crate) fn encode_status(status: &Status) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": status.status,
        "message": status.message,
        "reason": status.reason,
        "code": status.code,
    }))
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = r#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u-1","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},"requestKind":{"group":"","version":"v1","kind":"Pod"},"requestResource":{"group":"","version":"v1","resource":"pods"},"name":"p","namespace":"ns","operation":"CREATE","userInfo":{"username":"admin"},"object":{"kind":"Pod"},"oldObject":null,"dryRun":false,"options":null}}"#;

    /// The request path copies no string out of the body (benches/README.md): every field the
    /// decisions read is borrowed, escapes aside (which still decode correctly).
    #[test]
    fn request_strings_are_borrowed_from_the_body() {
        let body = V1.replace(
            r#""name":"p""#,
            r#""name":"p","subResource":"status","requestSubResource":"st\u0061tus""#,
        );
        let parsed = ParsedReview::parse(body.as_bytes()).unwrap();
        let r = &parsed.request;
        for text in [
            &r.uid,
            &r.name,
            &r.namespace,
            &r.operation,
            &r.sub_resource,
            &r.kind.version,
            &r.kind.kind,
            &r.resource.resource,
            &r.request_kind.as_ref().unwrap().kind,
            &r.request_resource.as_ref().unwrap().resource,
        ] {
            assert!(matches!(text, Cow::Borrowed(_)), "{text:?} was copied");
        }
        // An escaped string cannot be borrowed; it is decoded.
        assert_eq!(r.request_sub_resource.as_deref(), Some("status"));
        assert!(matches!(r.request_sub_resource, Some(Cow::Owned(_))));
        let plain = V1.replace(
            r#""name":"p""#,
            r#""name":"p","requestSubResource":"scale""#,
        );
        let parsed = ParsedReview::parse(plain.as_bytes()).unwrap();
        assert!(matches!(
            parsed.request.request_sub_resource,
            Some(Cow::Borrowed("scale"))
        ));
    }

    /// The one-pass parse checks UTF-8 once for the whole body: a byte sequence that is not
    /// UTF-8, inside `object` (kept raw) or inside a field, is still refused, with serde_json's
    /// located error from the two-pass path.
    #[test]
    fn invalid_utf8_is_refused_wherever_it_is() {
        for (at, with) in [
            (r#"{"kind":"Pod"}"#, "{\"kind\":\"Po\u{1}d\"}"),
            (r#""name":"p""#, "\"name\":\"p\u{1}\""),
        ] {
            let mut body = V1.replace(at, with).into_bytes();
            // The placeholder byte becomes a lone continuation byte (never valid UTF-8).
            let i = body.iter().position(|&b| b == 1).unwrap();
            body[i] = 0x80;
            let err = ParsedReview::parse(&body).unwrap_err();
            assert!(matches!(err, ReviewError::Json(_)), "{at}: {err}");
            assert!(
                err.to_string().contains("invalid unicode code point"),
                "{at}: {err}"
            );
        }
    }

    #[test]
    fn parses_v1_request_and_keeps_raw_object() {
        let parsed = ParsedReview::parse(V1.as_bytes()).unwrap();
        assert_eq!(parsed.version, ReviewVersion::V1);
        assert_eq!(parsed.request.uid, "u-1");
        // A uid of the call's own, in either version; the rest byte for byte.
        let same = parsed.body_for_call(ReviewVersion::V1, Some("u-22"));
        assert_eq!(
            same.as_ref(),
            V1.replace(r#""uid":"u-1""#, r#""uid":"u-22""#).as_bytes()
        );
        let other = parsed.body_for_call(ReviewVersion::V1beta1, Some("u-22"));
        let expected = V1
            .replace(r#""uid":"u-1""#, r#""uid":"u-22""#)
            .replace("admission.k8s.io/v1", "admission.k8s.io/v1beta1");
        assert_eq!(other.as_ref(), expected.as_bytes());
        assert_eq!(
            parsed.body_for_call(ReviewVersion::V1, None).as_ref(),
            V1.as_bytes()
        );
        assert_eq!(parsed.operation, Operation::Create);
        assert_eq!(parsed.request.object.unwrap().get(), r#"{"kind":"Pod"}"#);
        assert!(parsed.request.old_object.is_none());
        assert_eq!(parsed.request.effective_sub_resource(), "");
    }

    /// A uid written with escapes is still replaced by the call's own (its whole JSON string).
    #[test]
    fn a_call_uid_replaces_a_received_uid_written_with_escapes() {
        let escaped = V1.replace(r#""uid":"u-1""#, r#""uid":"\u0075-1""#);
        let parsed = ParsedReview::parse(escaped.as_bytes()).unwrap();
        assert_eq!(parsed.request.uid, "u-1");
        assert_eq!(
            parsed
                .body_for_call(ReviewVersion::V1beta1, Some("u-22"))
                .as_ref(),
            V1.replace(r#""uid":"u-1""#, r#""uid":"u-22""#)
                .replace("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
                .as_bytes()
        );
    }

    #[test]
    fn same_version_body_is_borrowed_unchanged() {
        let parsed = ParsedReview::parse(V1.as_bytes()).unwrap();
        assert!(
            matches!(parsed.body_as(ReviewVersion::V1), Cow::Borrowed(b) if b == V1.as_bytes())
        );
    }

    #[test]
    fn other_version_changes_only_api_version() {
        let parsed = ParsedReview::parse(V1.as_bytes()).unwrap();
        let converted = parsed.body_as(ReviewVersion::V1beta1);
        let expected = V1.replace("admission.k8s.io/v1\"", "admission.k8s.io/v1beta1\"");
        assert_eq!(std::str::from_utf8(&converted).unwrap(), expected);
        let back = ParsedReview::parse(&converted).unwrap();
        assert_eq!(back.version, ReviewVersion::V1beta1);
        assert_eq!(back.body_as(ReviewVersion::V1).as_ref(), V1.as_bytes());
    }

    #[test]
    fn rejects_what_is_not_a_request() {
        let cases: &[(&str, &str)] = &[
            ("not json", "malformed"),
            (
                r#"{"kind":"AdmissionReview","request":{"uid":"x"}}"#,
                "no apiVersion",
            ),
            (
                r#"{"apiVersion":"v1","kind":"AdmissionReview"}"#,
                "unsupported",
            ),
            (
                r#"{"apiVersion":"admission.k8s.io/v1","kind":"Pod"}"#,
                "wrong kind",
            ),
            (
                r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
                "no request",
            ),
            (
                r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"operation":"CREATE"}}"#,
                "no uid",
            ),
            (
                r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"PATCH"}}"#,
                "unknown operation",
            ),
        ];
        for (body, expected) in cases {
            let err = ParsedReview::parse(body.as_bytes())
                .unwrap_err()
                .to_string();
            assert!(err.contains(expected), "{body}: {err}");
        }
    }

    #[test]
    fn negotiation_takes_first_known_version() {
        assert_eq!(
            ReviewVersion::negotiate(&["v2", "v1beta1", "v1"]),
            Some(ReviewVersion::V1beta1)
        );
        assert_eq!(
            ReviewVersion::negotiate(&["v1", "v1beta1"]),
            Some(ReviewVersion::V1)
        );
        assert_eq!(ReviewVersion::negotiate(&["v3"]), None);
    }

    #[test]
    fn encodes_answer_in_callers_version() {
        let answer = AdmissionResponse::allow("u\"1").encode(ReviewVersion::V1beta1);
        assert_eq!(
            std::str::from_utf8(&answer).unwrap(),
            r#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1beta1","response":{"uid":"u\"1","allowed":true}}"#
        );
    }
}
