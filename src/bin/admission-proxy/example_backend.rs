//! An example legacy webhook backend, independent of the proxy's own AdmissionReview code
//! (it works on plain JSON), for the demo and the integration tests. Its behaviour is chosen by
//! URL path:
//!
//! | path | answer |
//! |---|---|
//! | `/allow` | allowed, echoing uid and apiVersion |
//! | `/deny` | denied, status code 403, with a warning and an audit annotation |
//! | `/deny-nocode` | denied with a status message but no code |
//! | `/require-labels` | denied (403) when the object (or oldObject) has no labels, else allowed |
//! | `/require-labels/quiet` | as `/require-labels`, without the denial's warning (as a ValidatingAdmissionPolicy denies) |
//! | `/patch` | allowed with a JSONPatch adding label `example.com/mutated: "true"` |
//! | `/slow/{ms}` | allowed after `ms` milliseconds |
//! | `/garbage` | 200 with a body that is not JSON |
//! | `/empty` | 200 with an empty body |
//! | `/yaml` | allowed, answered in YAML |
//! | `/wrong-uid` | denied with another uid |
//! | `/raw/{status}/{body}` | HTTP `status` with `body` (base64url, no padding); `$UID` and `$API` in it become the request's uid and apiVersion |
//! | `/status/{code}` | HTTP `code` with a `metav1.Status` body |
//! | `/only/{v1,v1beta1}/{rest}` | HTTP 400 unless the review has that version, then `{rest}` |
//! | `/convert` | a CRD conversion webhook: answers a ConversionReview, renaming `spec.count` (versions before v2) to `spec.replicas` (v2 and later) and back |
//!
//! Under `/upstream/`, the behaviours of kube-apiserver's own webhook tests, for the chain
//! tests: `webhookHandler` in
//! `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/testing/webhook_server.go`, and
//! the handlers of `test/integration/apiserver/admissionwebhook/reinvocation_test.go` and
//! `timeout_test.go`. Each takes an optional last path segment `{tag}`, ignored, so that several
//! webhooks of one chain can share a behaviour on distinct paths ([`Recorder::calls_to`]
//! counts per path). Patches are base64 JSONPatch, with `patchType: JSONPatch` when the review
//! is v1.
//!
//! | path | answer |
//! |---|---|
//! | `/upstream/allow` | allowed, audit annotation `key1: value1` |
//! | `/upstream/disallow` | denied, status `{code: 403}` (no message, no reason) |
//! | `/upstream/disallowReason` | denied, status `{code: 403, message: "you shall not pass"}` |
//! | `/upstream/shouldNotBeCalled` | denied, status `{code: 403, message: "doesn't expect labels to match object selector"}` |
//! | `/upstream/internalErr` | HTTP 500, `webhook internal server error` (text) |
//! | `/upstream/nilResponse` | 200, an AdmissionReview without `response` |
//! | `/upstream/invalidAnnotation` | allowed, audit annotation `invalid*key: value1` |
//! | `/upstream/removeLabel` | allowed, patch `remove /metadata/labels/remove`, audit annotation `key1: value1` |
//! | `/upstream/addLabel` | allowed, patch `add /metadata/labels/added = "test"` |
//! | `/upstream/invalidMutation` | allowed, patch bytes that are not a JSON patch (`[{"op": "add", "CORRUPTED_KEY":}]`) |
//! | `/upstream/noop` | allowed |
//! | `/upstream/addlabel` | allowed, adding label `a: "true"` unless the object has it |
//! | `/upstream/conditionaladdlabel` | allowed, adding label `b: "true"` when the object has label `a` |
//! | `/upstream/settrue`, `/upstream/setfalse` | allowed, setting label `fight` to `"true"` / `"false"` unless it is already |
//! | `/upstream/sleep/{ms}/{then}` | after `ms` milliseconds, as `/upstream/{then}` (`{then}` may carry its tag) |
//! | `/upstream/slow-deny/{ms}/{message}` | after `ms` milliseconds, denied: status `{code: 403, message}`, warning `slow-deny {ms}` |
//!
//! Uses the library's `server` (to serve) and `tls` only.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use http::Response;
use pingora::protocols::http::ServerSession;
use serde_json::{json, Value};

use admission_proxy::server::{reply, serve, Respond, ServerHandle};
use admission_proxy::tls::CertResolver;

/// What the backend has seen; shared with its owner.
#[derive(Default)]
pub(crate) struct Recorder {
    calls: AtomicU64,
    last: Mutex<Option<(String, Vec<u8>)>>,
    uid_log: std::sync::OnceLock<Mutex<std::fs::File>>,
    /// Per path (without the query): the raw `timeout` query value of every request, in
    /// arrival order (`""` when it had none); its length is the path's call count.
    by_path: Mutex<HashMap<String, Vec<String>>>,
}

impl Recorder {
    /// Appends the `request.uid` of every AdmissionReview from now on to `file`, one per line,
    /// written as it arrives (so that the log survives the backend being killed, and a uid
    /// received twice, across restarts too, shows as a repeated line: `bench --serve-backend
    /// --record-uids`, the soak of benches/README.md).
    ///
    /// # Errors
    /// The file cannot be opened for appending.
    pub(crate) fn record_uids(&self, file: &std::path::Path) -> std::io::Result<()> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)?;
        let _ = self.uid_log.set(Mutex::new(f));
        Ok(())
    }

    /// How many requests arrived.
    pub(crate) fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    /// The last request's path-and-query and body.
    pub(crate) fn last(&self) -> Option<(String, Vec<u8>)> {
        self.last.lock().ok().and_then(|l| l.clone())
    }

    /// How many requests arrived for `path` (without the query, e.g. `/upstream/allow/0`),
    /// counted when the body has been read, before the behaviour runs (a request the caller
    /// gave up on while the backend slept counts too).
    // Read by the integration tests (tests/it/chains.rs), not by the binary.
    #[allow(dead_code)]
    pub(crate) fn calls_to(&self, path: &str) -> u64 {
        self.by_path
            .lock()
            .map(|m| m.get(path).map_or(0, |t| t.len() as u64))
            .unwrap_or(0)
    }

    /// The raw `timeout` query values (`10s`, as kube-apiserver and the proxy write them) the
    /// requests for `path` carried, in arrival order; `""` for a request without one.
    #[allow(dead_code)] // as `calls_to`
    pub(crate) fn timeouts(&self, path: &str) -> Vec<String> {
        self.by_path
            .lock()
            .map(|m| m.get(path).cloned().unwrap_or_default())
            .unwrap_or_default()
    }

    /// Records one request for `path_and_query`.
    fn record(&self, path_and_query: &str) {
        let (path, query) = path_and_query
            .split_once('?')
            .unwrap_or((path_and_query, ""));
        let timeout = form_urlencoded::parse(query.as_bytes())
            .find(|(k, _)| k == "timeout")
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default();
        if let Ok(mut m) = self.by_path.lock() {
            m.entry(path.to_string()).or_default().push(timeout);
        }
    }
}

/// The backend app.
pub(crate) struct ExampleBackend {
    recorder: Arc<Recorder>,
}

/// Starts the example backend on `listen` (TLS when `tls` is given).
///
/// # Errors
/// The bind error.
pub(crate) fn start(
    listen: SocketAddr,
    tls: Option<Arc<CertResolver>>,
) -> std::io::Result<(ServerHandle, Arc<Recorder>)> {
    let recorder = Arc::new(Recorder::default());
    let tls = match tls {
        Some(resolver) => Some(Arc::new(
            admission_proxy::tls::server_config(
                resolver,
                admission_proxy::tls::MinVersion::Tls12,
                None,
            )
            .map_err(std::io::Error::other)?,
        )),
        None => None,
    };
    let handle = serve(
        listen,
        tls,
        ExampleBackend {
            recorder: recorder.clone(),
        },
        Arc::new(admission_proxy::server::Limits::default()),
    )?;
    Ok((handle, recorder))
}

/// [`reply`] with the body first, as the behaviour table reads best.
fn json_reply(status: u16, body: Vec<u8>, content_type: &'static str) -> Response<bytes::Bytes> {
    reply(status, content_type, body)
}

fn review(api_version: &Value, response: Value) -> Vec<u8> {
    serde_json::to_vec(
        &json!({"apiVersion": api_version, "kind": "AdmissionReview", "response": response}),
    )
    .unwrap_or_default()
}

/// The answer of the example conversion webhook to a ConversionReview: every object gets the
/// desired `apiVersion`; `spec.count` (before v2) and `spec.replicas` (v2 and later) are the
/// same field under two names.
fn convert(review: &Value) -> Vec<u8> {
    let request = review.get("request").cloned().unwrap_or(Value::Null);
    let desired = request
        .get("desiredAPIVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let v2_or_later = desired
        .rsplit('/')
        .next()
        .and_then(|v| v.strip_prefix('v'))
        .and_then(|v| v.chars().next())
        .and_then(|c| c.to_digit(10))
        .is_some_and(|major| major >= 2);
    let (from, to) = if v2_or_later {
        ("count", "replicas")
    } else {
        ("replicas", "count")
    };
    let objects: Vec<Value> = request
        .get("objects")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|mut object| {
            object["apiVersion"] = json!(desired);
            if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
                if let Some(value) = spec.remove(from) {
                    spec.insert(to.into(), value);
                }
            }
            object
        })
        .collect();
    let answer = json!({
        "apiVersion": review.get("apiVersion").cloned().unwrap_or(Value::Null),
        "kind": "ConversionReview",
        "response": {"uid": request.get("uid").cloned().unwrap_or(Value::Null),
                     "result": {"status": "Success"}, "convertedObjects": objects},
    });
    serde_json::to_vec(&answer).unwrap_or_default()
}

fn has_labels(obj: Option<&Value>) -> bool {
    obj.and_then(|o| o.pointer("/metadata/labels"))
        .and_then(Value::as_object)
        .is_some_and(|l| !l.is_empty())
}

impl Respond for ExampleBackend {
    async fn response(&self, session: &mut ServerSession) -> Response<bytes::Bytes> {
        let path_and_query = session
            .req_header()
            .uri
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_default();
        let mut body = Vec::new();
        while let Ok(Some(chunk)) = session.read_request_body().await {
            body.extend_from_slice(&chunk);
        }
        self.recorder.calls.fetch_add(1, Ordering::SeqCst);
        self.recorder.record(&path_and_query);
        if let Ok(mut last) = self.recorder.last.lock() {
            *last = Some((path_and_query.clone(), body.clone()));
        }
        let request: Value = serde_json::from_slice(&body).unwrap_or_else(|_| envelope(&body));
        let api_version = request.get("apiVersion").cloned().unwrap_or(Value::Null);
        let uid = request
            .pointer("/request/uid")
            .cloned()
            .unwrap_or(Value::Null);
        if let (Some(log), Some(uid)) = (self.recorder.uid_log.get(), uid.as_str()) {
            if let Ok(mut f) = log.lock() {
                use std::io::Write;
                let _ = writeln!(f, "{uid}");
            }
        }
        let path = path_and_query.split('?').next().unwrap_or("").to_string();
        let mut behaviour = path.as_str();
        if let Some(rest) = behaviour.strip_prefix("/only/") {
            let (version, rest) = rest.split_once('/').unwrap_or((rest, ""));
            if api_version.as_str() != Some(&format!("admission.k8s.io/{version}")) {
                let msg = format!(
                    "this webhook only understands admission.k8s.io/{version}, got {api_version}"
                );
                return json_reply(400, serde_json::to_vec(&json!({"kind":"Status","apiVersion":"v1","status":"Failure","message":msg,"code":400})).unwrap_or_default(), "application/json");
            }
            behaviour = &path[path.len() - rest.len() - 1..];
        }
        let allow = json!({"uid": uid, "allowed": true});
        let deny = |message: &str, code: Option<u16>| {
            let mut status =
                json!({"status": "Failure", "message": message, "reason": "Forbidden"});
            if let Some(code) = code {
                status["code"] = json!(code);
            }
            json!({"uid": uid, "allowed": false, "status": status, "warnings": ["example-backend: denied"], "auditAnnotations": {"decision": "denied"}})
        };
        let segments: Vec<&str> = behaviour.trim_start_matches('/').split('/').collect();
        if let ["upstream", rest @ ..] = segments.as_slice() {
            return upstream(rest, &request).await;
        }
        match segments.as_slice() {
            ["allow"] => json_reply(200, review(&api_version, allow), "application/json"),
            ["deny"] => json_reply(
                200,
                review(
                    &api_version,
                    deny("denied by the example backend", Some(403)),
                ),
                "application/json",
            ),
            ["deny-nocode"] => json_reply(
                200,
                review(&api_version, deny("denied without a code", None)),
                "application/json",
            ),
            ["require-labels", quiet @ ..] => {
                let req = request.get("request");
                let labelled = has_labels(req.and_then(|r| r.get("object")))
                    || has_labels(req.and_then(|r| r.get("oldObject")));
                let response = if labelled {
                    allow
                } else {
                    let mut denial = deny(
                        "objects must carry labels (require-labels policy)",
                        Some(403),
                    );
                    if quiet == ["quiet"] {
                        denial["warnings"] = json!([]);
                    }
                    denial
                };
                json_reply(200, review(&api_version, response), "application/json")
            }
            ["patch"] => {
                let has_labels_map = request
                    .pointer("/request/object/metadata/labels")
                    .is_some_and(Value::is_object);
                let ops = if has_labels_map {
                    json!([{"op": "add", "path": "/metadata/labels/example.com~1mutated", "value": "true"}])
                } else {
                    json!([{"op": "add", "path": "/metadata/labels", "value": {"example.com/mutated": "true"}}])
                };
                let patch = base64::engine::general_purpose::STANDARD.encode(ops.to_string());
                let mut response = json!({"uid": uid, "allowed": true, "patch": patch});
                if api_version.as_str() == Some("admission.k8s.io/v1") {
                    response["patchType"] = json!("JSONPatch");
                }
                json_reply(200, review(&api_version, response), "application/json")
            }
            ["convert"] => json_reply(200, convert(&request), "application/json"),
            ["slow", ms] => {
                tokio::time::sleep(Duration::from_millis(ms.parse().unwrap_or(1000))).await;
                json_reply(200, review(&api_version, allow), "application/json")
            }
            ["garbage"] => json_reply(
                200,
                b"<html>this is not an AdmissionReview</html>".to_vec(),
                "text/html",
            ),
            ["empty"] => json_reply(200, Vec::new(), "application/json"),
            ["yaml"] => {
                let text = format!("apiVersion: {}\nkind: AdmissionReview\nresponse:\n  uid: {}\n  allowed: true\n", api_version.as_str().unwrap_or(""), uid);
                json_reply(200, text.into_bytes(), "application/yaml")
            }
            ["wrong-uid"] => json_reply(
                200,
                review(
                    &api_version,
                    json!({"uid": "not-the-uid", "allowed": false}),
                ),
                "application/json",
            ),
            ["status", code] => {
                let code: u16 = code.parse().unwrap_or(500);
                let body = json!({"kind":"Status","apiVersion":"v1","status":"Failure","message":format!("example backend answered {code}"),"code":code});
                json_reply(
                    code,
                    serde_json::to_vec(&body).unwrap_or_default(),
                    "application/json",
                )
            }
            // Any answer at all, for testing how a caller handles it: `$UID` and `$API` in the
            // body become the request's uid and apiVersion.
            ["raw", code, body] => {
                let code: u16 = code.parse().unwrap_or(200);
                let text = base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(body)
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default()
                    .replace("$UID", uid.as_str().unwrap_or(""))
                    .replace("$API", api_version.as_str().unwrap_or(""));
                json_reply(code, text.into_bytes(), "application/json")
            }
            _ => json_reply(
                404,
                b"unknown example backend behaviour".to_vec(),
                "text/plain",
            ),
        }
    }
}

/// The `/upstream/...` behaviours (the module's second table): `segments` is the path after
/// `/upstream/`, `request` the AdmissionReview received (`Null` when it was not JSON).
/// Boxed because `sleep` recurses into its `{then}`.
fn upstream<'a>(
    segments: &'a [&'a str],
    request: &'a Value,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response<bytes::Bytes>> + Send + 'a>> {
    Box::pin(async move {
        let api_version = request.get("apiVersion").cloned().unwrap_or(Value::Null);
        let uid = request
            .pointer("/request/uid")
            .cloned()
            .unwrap_or(Value::Null);
        let v1 = api_version.as_str() == Some("admission.k8s.io/v1");
        let answer = |response: Value| {
            let mut response = response;
            response["uid"] = uid.clone();
            json_reply(200, review(&api_version, response), "application/json")
        };
        let patched = |patch: &[u8], annotations: Option<Value>| {
            let mut response = json!({
                "allowed": true,
                "patch": base64::engine::general_purpose::STANDARD.encode(patch),
            });
            if v1 {
                response["patchType"] = json!("JSONPatch");
            }
            if let Some(annotations) = annotations {
                response["auditAnnotations"] = annotations;
            }
            answer(response)
        };
        let labels = request
            .pointer("/request/object/metadata/labels")
            .and_then(Value::as_object);
        let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        // The reinvocation tests' patches: one label set, the labels map created if absent.
        let set_label = |key: &str, value: &str| {
            let op = if labels.is_some() {
                json!([{"op": "add", "path": format!("/metadata/labels/{key}"), "value": value}])
            } else {
                json!([{"op": "add", "path": "/metadata/labels", "value": {key: value}}])
            };
            patched(op.to_string().as_bytes(), None)
        };
        let key1 = || json!({"key1": "value1"});
        let deny = |status: Value| answer(json!({"allowed": false, "status": status}));
        // The optional `{tag}` is the segment after the behaviour's own.
        let (name, params) = segments
            .split_first()
            .map_or(("", &[][..]), |(n, p)| (*n, p));
        match (name, params) {
            ("allow", [] | [_]) => answer(json!({"allowed": true, "auditAnnotations": key1()})),
            ("disallow", [] | [_]) => deny(json!({"code": 403})),
            ("disallowReason", [] | [_]) => {
                deny(json!({"code": 403, "message": "you shall not pass"}))
            }
            ("shouldNotBeCalled", [] | [_]) => deny(json!({
                "code": 403,
                "message": "doesn't expect labels to match object selector",
            })),
            ("internalErr", [] | [_]) => reply(
                500,
                "text/plain; charset=utf-8",
                b"webhook internal server error\n".to_vec(),
            ),
            ("nilResponse", [] | [_]) => json_reply(
                200,
                serde_json::to_vec(&json!({"apiVersion": api_version, "kind": "AdmissionReview"}))
                    .unwrap_or_default(),
                "application/json",
            ),
            ("invalidAnnotation", [] | [_]) => {
                answer(json!({"allowed": true, "auditAnnotations": {"invalid*key": "value1"}}))
            }
            ("removeLabel", [] | [_]) => patched(
                br#"[{"op": "remove", "path": "/metadata/labels/remove"}]"#,
                Some(key1()),
            ),
            ("addLabel", [] | [_]) => patched(
                br#"[{"op": "add", "path": "/metadata/labels/added", "value": "test"}]"#,
                None,
            ),
            ("invalidMutation", [] | [_]) => patched(br#"[{"op": "add", "CORRUPTED_KEY":}]"#, None),
            ("noop", [] | [_]) => answer(json!({"allowed": true})),
            ("addlabel", [] | [_]) => match label("a") {
                Some("true") => answer(json!({"allowed": true})),
                _ => set_label("a", "true"),
            },
            ("conditionaladdlabel", [] | [_]) => match label("a") {
                Some(_) => set_label("b", "true"),
                None => answer(json!({"allowed": true})),
            },
            ("settrue" | "setfalse", [] | [_]) => {
                let value = if name == "settrue" { "true" } else { "false" };
                if label("fight") == Some(value) {
                    answer(json!({"allowed": true}))
                } else {
                    set_label("fight", value)
                }
            }
            ("sleep", [ms, then @ ..]) if !then.is_empty() => {
                tokio::time::sleep(Duration::from_millis(ms.parse().unwrap_or(1000))).await;
                upstream(then, request).await
            }
            ("slow-deny", [ms, message] | [ms, message, _]) => {
                tokio::time::sleep(Duration::from_millis(ms.parse().unwrap_or(1000))).await;
                answer(json!({
                    "allowed": false,
                    "status": {"code": 403, "message": message},
                    "warnings": [format!("slow-deny {ms}")],
                }))
            }
            _ => json_reply(
                404,
                b"unknown example backend behaviour".to_vec(),
                "text/plain",
            ),
        }
    })
}

/// What the example webhook answers from, for a body serde_json will not build a tree of (an
/// object nested past its 128 levels, which kube-apiserver sends up to 10,000): `apiVersion`,
/// `request.uid` and `request.object.metadata`, the rest skipped without recursion (as a Go
/// webhook decoding into typed structs reads it). `null` when even that does not read.
fn envelope(body: &[u8]) -> Value {
    #[derive(serde::Deserialize)]
    struct Envelope {
        #[serde(rename = "apiVersion")]
        api_version: Option<Value>,
        request: Option<Request>,
    }
    #[derive(serde::Deserialize)]
    struct Request {
        uid: Option<Value>,
        object: Option<Object>,
    }
    #[derive(serde::Deserialize)]
    struct Object {
        metadata: Option<Value>,
    }
    let Ok(envelope) = serde_json::from_slice::<Envelope>(body) else {
        return Value::Null;
    };
    let request = envelope.request.map(
        |r| json!({"uid": r.uid, "object": r.object.map(|o| json!({"metadata": o.metadata}))}),
    );
    json!({"apiVersion": envelope.api_version, "request": request})
}
