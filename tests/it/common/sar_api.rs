//! A stand-in Kubernetes API server for SubjectAccessReviews (`authorization.k8s.io/v1`): plain
//! HTTP/1.1 on 127.0.0.1, on a thread and runtime of its own (usable from sync tests that run
//! the real binary and from `#[tokio::test]`s alike; its delays never hold a test's workers).
//!
//! It answers `POST /apis/authorization.k8s.io/v1/subjectaccessreviews` from a table keyed by
//! (user, verb, resource or path) or a rule closure over the spec, echoing the review with its
//! status as kube-apiserver does; it can instead answer with an HTTP error (a `Status` body like
//! the API server's) or answer late. Every request body is recorded and SubjectAccessReview
//! calls are counted. Anything else is a 404 `Status`.
//!
//! ```ignore
//! let api = SarApi::start();
//! api.allow("alice", "update", "deployments", "RBAC: allowed by ClusterRoleBinding \"ops\"");
//! api.write_kubeconfig(&ws.dir.join("kubeconfig"));
//! // ... run checks ...
//! assert_eq!(api.calls(), 1);
//! assert_eq!(api.bodies()[0]["spec"]["user"], "alice");
//! ```

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// The path the stand-in answers.
pub(crate) const SAR_PATH: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

/// The status a SubjectAccessReview is answered with (`SubjectAccessReviewStatus`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SarStatus {
    pub allowed: bool,
    /// Sent as `denied: true` only when set (omitempty).
    pub denied: bool,
    pub reason: String,
    pub evaluation_error: String,
}

impl SarStatus {
    /// `allowed: true` with `reason`.
    pub(crate) fn allow(reason: &str) -> Self {
        SarStatus {
            allowed: true,
            reason: reason.into(),
            ..SarStatus::default()
        }
    }

    /// `allowed: false, denied: true` with `reason`.
    pub(crate) fn deny(reason: &str) -> Self {
        SarStatus {
            denied: true,
            reason: reason.into(),
            ..SarStatus::default()
        }
    }

    /// No opinion: `allowed: false`, nothing else (what RBAC answers when no rule matches).
    pub(crate) fn no_opinion() -> Self {
        SarStatus::default()
    }

    fn to_json(&self) -> Value {
        let mut status = json!({"allowed": self.allowed});
        if self.denied {
            status["denied"] = json!(true);
        }
        if !self.reason.is_empty() {
            status["reason"] = json!(self.reason);
        }
        if !self.evaluation_error.is_empty() {
            status["evaluationError"] = json!(self.evaluation_error);
        }
        status
    }
}

type Rule = Box<dyn Fn(&Value) -> SarStatus + Send>;

#[derive(Default)]
struct State {
    /// (user, verb, resource-or-path) → status; resource as `resource` or
    /// `resource/subresource`.
    table: Vec<((String, String, String), SarStatus)>,
    /// Overrides the table when set: spec → status.
    rule: Option<Rule>,
    /// Answer every SubjectAccessReview with this HTTP status and a `Status` body.
    fail: Option<u16>,
    /// Wait this long before answering.
    delay: Duration,
    /// SubjectAccessReview POSTs received.
    calls: usize,
    /// Every request body received (JSON; `null` when empty or not JSON), in order.
    bodies: Vec<Value>,
    /// Every request as `METHOD target`.
    requests: Vec<String>,
}

/// The running stand-in. Dropping it stops the server.
pub(crate) struct SarApi {
    /// `http://127.0.0.1:port`.
    pub url: String,
    state: Arc<Mutex<State>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for SarApi {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl SarApi {
    /// Starts on 127.0.0.1:0; every check has no opinion until told otherwise.
    pub(crate) fn start() -> Self {
        let state: Arc<Mutex<State>> = Arc::default();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let shared = state.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = TcpListener::from_std(listener).unwrap();
                let accept = async {
                    while let Ok((tcp, _)) = listener.accept().await {
                        tokio::spawn(connection(tcp, shared.clone()));
                    }
                };
                tokio::select! {
                    _ = accept => {}
                    _ = stopped => {}
                }
            });
        });
        SarApi {
            url,
            state,
            stop: Some(stop),
        }
    }

    /// `user` may `verb` `what` (a resource, `resource/subresource`, or a non-resource path).
    pub(crate) fn allow(&self, user: &str, verb: &str, what: &str, reason: &str) {
        self.answer(user, verb, what, SarStatus::allow(reason));
    }

    /// `user` is denied `verb` on `what`.
    pub(crate) fn deny(&self, user: &str, verb: &str, what: &str, reason: &str) {
        self.answer(user, verb, what, SarStatus::deny(reason));
    }

    /// `user`, `verb`, `what` is answered `status` (the last entry for a key wins).
    pub(crate) fn answer(&self, user: &str, verb: &str, what: &str, status: SarStatus) {
        self.state
            .lock()
            .unwrap()
            .table
            .insert(0, ((user.into(), verb.into(), what.into()), status));
    }

    /// Answers by `rule` over the request's `spec` instead of the table.
    pub(crate) fn rule(&self, rule: impl Fn(&Value) -> SarStatus + Send + 'static) {
        self.state.lock().unwrap().rule = Some(Box::new(rule));
    }

    /// Answers every SubjectAccessReview with HTTP `code` (403: RBAC's Forbidden `Status`,
    /// 500: an InternalError, others a generic failure) until `None`.
    pub(crate) fn fail_with(&self, code: Option<u16>) {
        self.state.lock().unwrap().fail = code;
    }

    /// Waits `delay` before each answer (`Duration::ZERO`: none).
    pub(crate) fn delay(&self, delay: Duration) {
        self.state.lock().unwrap().delay = delay;
    }

    /// SubjectAccessReview POSTs received so far (counted on arrival, before any delay).
    pub(crate) fn calls(&self) -> usize {
        self.state.lock().unwrap().calls
    }

    /// Every request body received, as JSON, in order.
    pub(crate) fn bodies(&self) -> Vec<Value> {
        self.state.lock().unwrap().bodies.clone()
    }

    /// Every request received, as `METHOD target`.
    pub(crate) fn requests(&self) -> Vec<String> {
        self.state.lock().unwrap().requests.clone()
    }

    /// Writes a kubeconfig pointing at the stand-in (plain http, a bearer token) to `path`.
    pub(crate) fn write_kubeconfig(&self, path: &Path) {
        std::fs::write(
            path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: sar-stand-in\n  cluster: {{server: \"{}\"}}\nusers:\n- name: proxy\n  user: {{token: test-token}}\ncontexts:\n- name: sar-stand-in\n  context: {{cluster: sar-stand-in, user: proxy}}\ncurrent-context: sar-stand-in\n",
                self.url
            ),
        )
        .unwrap();
    }
}

/// (user, verb, resource-or-path) of a SubjectAccessReview spec.
fn key_of(spec: &Value) -> (String, String, String) {
    let text = |v: &Value| v.as_str().unwrap_or("").to_string();
    let user = text(&spec["user"]);
    if let Some(attributes) = spec.get("resourceAttributes") {
        let mut what = text(&attributes["resource"]);
        let sub = text(&attributes["subresource"]);
        if !sub.is_empty() {
            what = format!("{what}/{sub}");
        }
        (user, text(&attributes["verb"]), what)
    } else {
        let attributes = &spec["nonResourceAttributes"];
        (user, text(&attributes["verb"]), text(&attributes["path"]))
    }
}

/// A `Status` body as kube-apiserver writes it.
fn status_body(code: u16) -> Value {
    let (reason, message) = match code {
        403 => ("Forbidden", "subjectaccessreviews.authorization.k8s.io is forbidden: User \"system:serviceaccount:admission-proxy:admission-proxy\" cannot create resource \"subjectaccessreviews\" in API group \"authorization.k8s.io\" at the cluster scope".to_string()),
        404 => ("NotFound", "the server could not find the requested resource".to_string()),
        500 => ("InternalError", "Internal error occurred: authorizer unavailable".to_string()),
        _ => ("", format!("the stand-in answers {code}")),
    };
    let mut body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "code": code});
    if !reason.is_empty() {
        body["reason"] = json!(reason);
    }
    if code == 403 {
        body["details"] = json!({"group": "authorization.k8s.io", "kind": "subjectaccessreviews"});
    }
    body
}

fn response(code: u16, body: &Value) -> Vec<u8> {
    let body = body.to_string();
    let text = match code {
        200 | 201 => "OK",
        403 => "Forbidden",
        404 => "Not Found",
        500 => "Internal Server Error",
        _ => "Error",
    };
    format!(
        "HTTP/1.1 {code} {text}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// One connection: requests until the client closes it.
async fn connection(tcp: TcpStream, state: Arc<Mutex<State>>) {
    let (read, mut write) = tcp.into_split();
    let mut read = BufReader::new(read);
    loop {
        let Some((request_line, body)) = super::read_request_async(&mut read).await else {
            return;
        };
        let mut words = request_line.split_whitespace();
        let method = words.next().unwrap_or("").to_string();
        let target = words.next().unwrap_or("").to_string();
        let path = target.split('?').next().unwrap_or("");
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let sar = method == "POST" && path == SAR_PATH;
        // `serve --kubeconfig` asks the cluster's version once at start, as kube-apiserver
        // answers it (`/version`, readable by everyone through system:public-info-viewer).
        if method == "GET" && path == "/version" {
            let version = serde_json::json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0"});
            state
                .lock()
                .unwrap()
                .requests
                .push(format!("{method} {target}"));
            if write.write_all(&response(200, &version)).await.is_err() {
                return;
            }
            continue;
        }
        let (delay, answer) = {
            let mut s = state.lock().unwrap();
            s.requests.push(format!("{method} {target}"));
            s.bodies.push(body.clone());
            if sar {
                s.calls += 1;
            }
            let answer = if !sar {
                response(404, &status_body(404))
            } else if let Some(code) = s.fail {
                response(code, &status_body(code))
            } else {
                let spec = &body["spec"];
                let status = match &s.rule {
                    Some(rule) => rule(spec),
                    None => {
                        let key = key_of(spec);
                        s.table
                            .iter()
                            .find(|(k, _)| *k == key)
                            .map(|(_, status)| status.clone())
                            .unwrap_or_default()
                    }
                };
                let mut review = body.clone();
                review["status"] = status.to_json();
                response(201, &review)
            };
            (s.delay, answer)
        };
        if sar && !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        if write.write_all(&answer).await.is_err() {
            return;
        }
    }
}
