//! Exactly one call per admission, and client-go's retry (`checkWait` in
//! `staging/src/k8s.io/client-go/rest/with_retry.go`): the proxy never re-sends a POST after
//! writing it (a garbage answer, a connection closed after the request, on fresh and pooled
//! connections), replaces a pooled connection the backend closed while idle without a failure,
//! and re-sends after a 429/5xx with an integer `Retry-After` within the deadline. Each test
//! counts what the backend received, with a raw TLS backend on 127.0.0.1 whose every answer
//! the test scripts. Trace context rides on the same call: forwarded as
//! received, or, with `--otlp-endpoint`, the proxy's own spans exported to a stand-in OTLP
//! collector.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::tools::pki::TestPki;

use crate::common::otlp::{attribute, hex, Collector};
use crate::common::{self, fixture, plain_tls_server, read_request, validating, TestProxy, ALL};

/// What the backend does with the n-th request (0-based) it reads.
#[derive(Clone, Copy, Debug)]
enum Act {
    /// Allowed, connection kept open.
    Allow,
    /// Allowed, then the backend closes the connection a moment later (while the proxy has it
    /// in its pool).
    AllowThenClose,
    /// Bytes that are not HTTP, then close.
    Garbage,
    /// Close without answering.
    Close,
    /// This status with this `Retry-After` (none when `None`) and a Status body.
    Status(u16, Option<&'static str>),
    /// A 200 header announcing more body than is sent, then the TCP connection closed without
    /// TLS close_notify (a backend that died mid-answer).
    Truncated,
    /// A 200 with a chunked body that never ends (written until the proxy stops reading, at
    /// most 256 MiB).
    Endless,
    /// A 200 announcing a 1 GiB body, of which it sends nothing.
    Huge,
}

/// A TLS backend on 127.0.0.1 that answers by script; counts requests and connections.
struct RawBackend {
    url: String,
    pki: TestPki,
    requests: Arc<AtomicUsize>,
    connections: Arc<AtomicUsize>,
    /// Connections the backend has closed.
    closed: Arc<AtomicUsize>,
    /// Each request's request line and header lines, in arrival order.
    heads: Arc<Mutex<Vec<String>>>,
}

impl RawBackend {
    fn start(script: Vec<Act>) -> Self {
        let pki = TestPki::generate(&["127.0.0.1"]).unwrap();
        let config = plain_tls_server(&pki);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("https://{}", listener.local_addr().unwrap());
        let (requests, connections) =
            (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let script = Arc::new(Mutex::new(script));
        let closed = Arc::new(AtomicUsize::new(0));
        let heads: Arc<Mutex<Vec<String>>> = Arc::default();
        let (r, c, x, h) = (
            requests.clone(),
            connections.clone(),
            closed.clone(),
            heads.clone(),
        );
        std::thread::spawn(move || {
            // Bounded: the test process ends with the test.
            for tcp in listener.incoming().take(64).flatten() {
                c.fetch_add(1, Ordering::SeqCst);
                let (config, script, r, x) = (config.clone(), script.clone(), r.clone(), x.clone());
                let heads = h.clone();
                std::thread::spawn(move || {
                    tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                    let conn = rustls::ServerConnection::new(config).unwrap();
                    let mut tls = rustls::StreamOwned::new(conn, tcp);
                    loop {
                        let Some((head, body)) = read_request(&mut tls) else {
                            return;
                        };
                        heads.lock().unwrap().push(head);
                        let n = r.fetch_add(1, Ordering::SeqCst);
                        let act = script.lock().unwrap().get(n).copied().unwrap_or(Act::Allow);
                        if !answer(&mut tls, act, &body) {
                            drop(tls);
                            x.fetch_add(1, Ordering::SeqCst);
                            return;
                        }
                    }
                });
            }
        });
        RawBackend {
            url,
            pki,
            requests,
            connections,
            closed,
            heads,
        }
    }

    fn client_config(&self) -> String {
        format!(
            "{{url: \"{}/hook\", caBundle: \"{}\"}}",
            self.url,
            self.pki.ca_bundle()
        )
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

/// Answers per `act`; whether the connection stays open.
fn answer(tls: &mut (impl Read + Write), act: Act, request: &[u8]) -> bool {
    let review: serde_json::Value = serde_json::from_slice(request).unwrap_or_default();
    let allow = if review["kind"] == "ConversionReview" {
        // A conversion webhook's success: each object with the desired apiVersion.
        let request = &review["request"];
        let objects: Vec<serde_json::Value> = request["objects"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|o| {
                let mut o = o.clone();
                o["apiVersion"] = request["desiredAPIVersion"].clone();
                o
            })
            .collect();
        serde_json::json!({
            "apiVersion": review["apiVersion"], "kind": "ConversionReview",
            "response": {"uid": request["uid"], "result": {"status": "Success"}, "convertedObjects": objects}
        })
    } else {
        serde_json::json!({
            "apiVersion": review["apiVersion"], "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": true}
        })
    }
    .to_string();
    let http = |status: &str, extra: &str, body: &str| {
        format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}\r\n{body}",
            body.len()
        )
    };
    let written = match act {
        Act::Allow | Act::AllowThenClose => http("200 OK", "", &allow),
        Act::Garbage => "this is not HTTP\r\n\r\n".to_string(),
        Act::Truncated => format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{}",
            allow.len() + 100,
            allow
        ),
        Act::Close => return false,
        Act::Huge => format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            1u64 << 30
        ),
        Act::Endless => {
            let header = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
            if tls.write_all(header.as_bytes()).is_err() {
                return false;
            }
            let chunk = format!("10000\r\n{}\r\n", " ".repeat(0x10000));
            for _ in 0..4096 {
                if tls.write_all(chunk.as_bytes()).is_err() {
                    break;
                }
            }
            return false;
        }
        Act::Status(code, retry_after) => http(
            &format!("{code} Busy"),
            &retry_after
                .map(|s| format!("Retry-After: {s}\r\n"))
                .unwrap_or_default(),
            r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"busy","code":503}"#,
        ),
    };
    if tls
        .write_all(written.as_bytes())
        .and_then(|_| tls.flush())
        .is_err()
    {
        return false;
    }
    match act {
        Act::Allow | Act::Status(..) => true,
        Act::AllowThenClose => {
            // Closed after the proxy has pooled the connection, before its next request.
            std::thread::sleep(Duration::from_millis(100));
            false
        }
        Act::Garbage | Act::Close | Act::Truncated | Act::Endless | Act::Huge => false,
    }
}

fn proxy_for(backend: &RawBackend, extra: &str) -> TestProxy {
    TestProxy::start(&validating(
        "once.hooks.example.com",
        &backend.client_config(),
        ALL,
        extra,
    ))
}

const POD: &str = "0096-create-core-v1-pods-v1.json";

async fn decide(proxy: &TestProxy) -> (String, String) {
    let reply = proxy.review("once.hooks.example.com", &fixture(POD)).await;
    let warning = reply.json["response"]["warnings"][0]
        .as_str()
        .unwrap_or_default()
        .to_string();
    (reply.decision, warning)
}

#[tokio::test]
async fn a_garbage_answer_is_one_call_on_fresh_and_pooled_connections() {
    let backend = RawBackend::start(vec![Act::Garbage, Act::Allow, Act::Garbage]);
    let proxy = proxy_for(&backend, "failurePolicy: Ignore");
    let (decision, warning) = decide(&proxy).await;
    assert_eq!(decision, "failed-open", "{warning}");
    assert_eq!(backend.requests(), 1, "fresh connection: sent once");
    assert_eq!(decide(&proxy).await.0, "allowed");
    let (decision, warning) = decide(&proxy).await;
    assert_eq!(decision, "failed-open", "{warning}");
    assert_eq!(backend.requests(), 3, "pooled connection: sent once");
}

#[tokio::test]
async fn a_connection_closed_after_the_request_is_one_call() {
    let backend = RawBackend::start(vec![Act::Close, Act::Allow, Act::Close]);
    let proxy = proxy_for(&backend, "failurePolicy: Ignore");
    assert_eq!(decide(&proxy).await.0, "failed-open");
    assert_eq!(backend.requests(), 1);
    assert_eq!(decide(&proxy).await.0, "allowed");
    let (decision, warning) = decide(&proxy).await;
    assert_eq!(decision, "failed-open");
    assert!(
        warning.contains("EOF") || warning.contains("closed"),
        "{warning}"
    );
    assert_eq!(
        backend.requests(),
        3,
        "the pooled connection's failure is not re-sent"
    );
}

/// A backend that dies mid-answer (TCP closed without TLS close_notify) gave the
/// caller rustls' own text, with its documentation URL. kube-apiserver's client-go says
/// `unexpected error when reading response body. Please retry. Original error: unexpected EOF`
/// (`transformResponse` in `staging/src/k8s.io/client-go/rest/request.go`), and so does the
/// proxy now; a close before any answer stays Go's `EOF`.
#[tokio::test]
async fn a_backend_dying_mid_answer_is_reported_in_client_gos_words() {
    let backend = RawBackend::start(vec![Act::Truncated, Act::Close]);
    let proxy = proxy_for(&backend, "failurePolicy: Ignore");
    let (decision, warning) = decide(&proxy).await;
    assert_eq!(decision, "failed-open");
    assert!(
        warning.contains(": failed to call webhook: unexpected error when reading response body. Please retry. Original error: unexpected EOF; failurePolicy is Ignore"),
        "{warning}"
    );
    let (decision, warning) = decide(&proxy).await;
    assert_eq!(decision, "failed-open");
    assert!(
        warning.contains("\": EOF; failurePolicy is Ignore"),
        "{warning}"
    );
    assert!(!warning.contains("https://docs.rs"), "{warning}");
    assert_eq!(backend.requests(), 2, "neither failure is re-sent");
}

/// An answer larger than any answer kube-apiserver takes is read no further than
/// `MAX_ANSWER_BYTES`: a backend streaming an endless body, or announcing 1 GiB, fails the
/// call at once (decided by failurePolicy) instead of filling the proxy's memory until the
/// call's timeout (10 s here).
#[tokio::test]
async fn an_answer_larger_than_any_admission_answer_is_a_call_error() {
    let backend = RawBackend::start(vec![Act::Endless, Act::Huge]);
    let proxy = proxy_for(&backend, "failurePolicy: Ignore");
    let limit = admission_proxy::dispatch::MAX_ANSWER_BYTES;
    let expected = format!(
        ": failed to call webhook: the answer's body is larger than {limit} bytes, more than any answer to an AdmissionReview kube-apiserver accepts; failurePolicy is Ignore"
    );
    for what in ["an endless chunked body", "a Content-Length of 1 GiB"] {
        let started = Instant::now();
        let (decision, warning) = decide(&proxy).await;
        assert_eq!(decision, "failed-open", "{what}: {warning}");
        assert!(warning.contains(&expected), "{what}: {warning}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{what}: decided before the call's timeout, not by it"
        );
    }
    assert_eq!(backend.requests(), 2);
}

#[tokio::test]
async fn a_pooled_connection_closed_while_idle_is_replaced_before_sending() {
    let backend = RawBackend::start(vec![Act::AllowThenClose, Act::Allow]);
    let proxy = proxy_for(&backend, "failurePolicy: Fail");
    assert_eq!(decide(&proxy).await.0, "allowed");
    // Wait (at most 2 s) until the backend has closed the pooled connection.
    for _ in 0..200 {
        if backend.closed.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(backend.closed.load(Ordering::SeqCst), 1);
    assert_eq!(decide(&proxy).await.0, "allowed");
    assert_eq!(backend.requests(), 2, "each admission sent once");
    assert_eq!(
        backend.connections.load(Ordering::SeqCst),
        2,
        "the closed connection was replaced by a new one"
    );
}

#[tokio::test]
async fn retry_after_on_503_is_honoured_as_client_go_does() {
    let backend = RawBackend::start(vec![Act::Status(503, Some("1")), Act::Allow]);
    let proxy = proxy_for(&backend, "failurePolicy: Fail\n  timeoutSeconds: 5");
    let t0 = Instant::now();
    assert_eq!(decide(&proxy).await.0, "allowed");
    assert!(t0.elapsed() >= Duration::from_secs(1), "waited Retry-After");
    assert_eq!(backend.requests(), 2, "re-sent once");
}

#[tokio::test]
async fn a_429_without_retry_after_is_not_retried() {
    let backend = RawBackend::start(vec![Act::Status(429, None), Act::Allow]);
    let proxy = proxy_for(&backend, "failurePolicy: Ignore");
    let (decision, warning) = decide(&proxy).await;
    assert_eq!(decision, "failed-open", "{warning}");
    assert_eq!(backend.requests(), 1);
}

#[tokio::test]
async fn a_retry_after_beyond_the_deadline_ends_at_the_deadline() {
    let backend = RawBackend::start(vec![Act::Status(503, Some("30")), Act::Allow]);
    let proxy = proxy_for(&backend, "failurePolicy: Ignore\n  timeoutSeconds: 1");
    let t0 = Instant::now();
    let (decision, warning) = decide(&proxy).await;
    assert_eq!(decision, "failed-open");
    assert!(warning.contains("context deadline exceeded"), "{warning}");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert_eq!(backend.requests(), 1, "the deadline came before the retry");
}

#[tokio::test]
async fn at_most_ten_retries() {
    let backend = RawBackend::start(vec![Act::Status(500, Some("0")); 20]);
    let proxy = proxy_for(&backend, "failurePolicy: Ignore");
    let (decision, warning) = decide(&proxy).await;
    assert_eq!(decision, "failed-open", "{warning}");
    assert_eq!(backend.requests(), 11, "one call and ten retries");
}

#[tokio::test]
async fn sequential_admissions_reuse_one_connection() {
    let backend = RawBackend::start(vec![]);
    let proxy = proxy_for(&backend, "failurePolicy: Fail");
    for _ in 0..5 {
        assert_eq!(decide(&proxy).await.0, "allowed");
        // A pause such as a quiet cluster has between admissions.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(backend.requests(), 5);
    assert_eq!(
        backend.connections.load(Ordering::SeqCst),
        1,
        "one TLS connection serves every admission"
    );
}

/// kube-apiserver calls conversion webhooks with the same client-go client as
/// admission webhooks, so a 503 with `Retry-After` is re-sent there too; the proxy failed the
/// conversion (500) at once.
#[tokio::test]
async fn a_conversion_webhook_s_retry_after_is_honoured_too() {
    let converter = RawBackend::start(vec![Act::Status(503, Some("0")), Act::Allow]);
    let legacy = common::TestBackend::start();
    let crd = format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: widgets.example.com}}\nspec:\n  group: example.com\n  names: {{plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}}\n  scope: Namespaced\n  versions:\n  - {{name: v2, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}\n  - {{name: v1, served: true, storage: false, schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}\n  conversion: {{strategy: Webhook, webhook: {{clientConfig: {}, conversionReviewVersions: [v1]}}}}\n---\n",
        converter.client_config()
    );
    let config = crd
        + &validating(
            "widgets.hooks.example.com",
            &legacy.client_config("/allow"),
            r#"[{operations: ["*"], apiGroups: ["example.com"], apiVersions: ["v1"], resources: ["widgets"]}]"#,
            "",
        );
    let proxy = TestProxy::start(&config);
    let gvk = serde_json::json!({"group": "example.com", "version": "v2", "kind": "Widget"});
    let gvr = serde_json::json!({"group": "example.com", "version": "v2", "resource": "widgets"});
    let review = serde_json::json!({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
        "request": {"uid": "c0c0c0c0-0000-4000-8000-00000000c0de", "kind": gvk, "resource": gvr,
            "requestKind": gvk, "requestResource": gvr, "name": "w1", "namespace": "production",
            "operation": "CREATE", "userInfo": {"username": "jane"},
            "object": {"apiVersion": "example.com/v2", "kind": "Widget",
                "metadata": {"name": "w1", "namespace": "production", "uid": "8f1c0e2a-0000-4000-8000-00000000000a"},
                "spec": {"replicas": 3}},
            "oldObject": null, "dryRun": false, "options": null}});
    let reply = proxy
        .review(
            "widgets.hooks.example.com",
            &serde_json::to_vec(&review).unwrap(),
        )
        .await;
    assert_eq!(reply.decision, "allowed", "{}", reply.json);
    assert_eq!(converter.requests(), 2, "the 503 was re-sent once");
    assert_eq!(legacy.recorder.calls(), 1);
}

/// kube-apiserver with `APIServerTracing` sends W3C `traceparent` and
/// `tracestate`; the proxy dropped them, so the legacy webhook's spans lost their parent. They
/// reach the backend as sent; an invalid `traceparent` is dropped with its `tracestate`.
#[tokio::test]
async fn the_callers_trace_context_reaches_the_backend() {
    let backend = RawBackend::start(vec![]);
    let proxy = proxy_for(&backend, "failurePolicy: Fail");
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let tracestate = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7";
    let send = |headers: Vec<(&'static str, &'static str)>| {
        let proxy = &proxy;
        async move {
            let target = admission_proxy::dispatch::Target::new(
                &admission_proxy::backend::Backend::from_client_config(
                    &admission_proxy::api::WebhookClientConfig {
                        url: Some(format!("https://{}/", proxy.addr)),
                        ca_bundle: Some(base64::Engine::encode(
                            &base64::engine::general_purpose::STANDARD,
                            &proxy.ca_pem,
                        )),
                        service: None,
                    },
                )
                .unwrap(),
            );
            admission_proxy::dispatch::HttpClient::new()
                .post(
                    &target,
                    "/webhooks/once.hooks.example.com?timeout=10s",
                    &fixture(POD),
                    &headers,
                )
                .await
                .unwrap()
                .status
        }
    };
    assert_eq!(
        send(vec![
            ("traceparent", traceparent),
            ("tracestate", tracestate)
        ])
        .await,
        200
    );
    assert_eq!(
        send(vec![
            ("traceparent", "00-zz-00f067aa0ba902b7-01"),
            ("tracestate", tracestate)
        ])
        .await,
        200
    );
    assert_eq!(send(vec![]).await, 200);
    let heads = backend.heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 3);
    assert!(
        heads[0].contains(&format!("traceparent: {traceparent}\r\n")),
        "{}",
        heads[0]
    );
    assert!(
        heads[0].contains(&format!("tracestate: {tracestate}\r\n")),
        "{}",
        heads[0]
    );
    for head in &heads[1..] {
        assert!(
            !head.contains("traceparent") && !head.contains("tracestate"),
            "{head}"
        );
    }
}

/// With `--otlp-endpoint` the proxy exports its own spans to the collector,
/// sampled as the caller's `traceparent` says: a sampled request gives `admission` (server,
/// child of the caller's span), `matching` and `Call validating webhook` (client) under it,
/// and the backend receives the call span as its parent with the caller's `tracestate`; a
/// request whose `traceparent` is not sampled, or that has none (sampling rate 0, as
/// kube-apiserver's default), exports nothing.
#[tokio::test]
async fn spans_are_exported_to_the_otlp_collector_as_the_caller_samples() {
    let backend = RawBackend::start(vec![]);
    let collector = Collector::start();
    let ws = common::Workspace::new("otlp");
    std::fs::write(
        ws.conf.join("hooks.yaml"),
        validating(
            "once.hooks.example.com",
            &backend.client_config(),
            ALL,
            "failurePolicy: Fail",
        ),
    )
    .unwrap();
    let proxy = common::BinaryProxy::start_with_env(
        &ws.conf,
        &ws.cert,
        &ws.key,
        &["--otlp-endpoint", &collector.url],
        &[("OTEL_BSP_SCHEDULE_DELAY", "100")],
    );
    let target = proxy.target(&ws.pki);
    let client = admission_proxy::dispatch::HttpClient::new();
    let send = |headers: Vec<(&'static str, &'static str)>| {
        let (client, target) = (&client, &target);
        async move {
            let reply = client
                .post(
                    target,
                    "/webhooks/once.hooks.example.com?timeout=10s",
                    &fixture(POD),
                    &headers,
                )
                .await
                .unwrap();
            assert_eq!(
                reply.status,
                200,
                "{}",
                String::from_utf8_lossy(&reply.body)
            );
        }
    };
    let unsampled = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00";
    send(vec![("traceparent", unsampled)]).await;
    send(vec![]).await;
    let (trace, caller_span) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let sampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    send(vec![
        ("traceparent", sampled),
        ("tracestate", "congo=t61rcWkgMzE"),
    ])
    .await;

    let spans = collector.wait_for(3);
    assert!(
        collector
            .paths
            .lock()
            .unwrap()
            .iter()
            .all(|p| p == "/v1/traces"),
        "{:?}",
        collector.paths.lock().unwrap()
    );
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        spans.len(),
        3,
        "only the sampled request is exported: {names:?}"
    );
    assert!(spans.iter().all(|s| hex(&s.trace_id) == trace), "{names:?}");
    let by_name = |name: &str| {
        spans
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no {name:?} span in {names:?}"))
    };
    let admission = by_name("admission");
    let (matching, call) = (by_name("matching"), by_name("Call validating webhook"));
    assert_eq!(hex(&admission.parent_span_id), caller_span);
    // SpanKind: 2 server, 3 client, 1 internal (opentelemetry-proto trace.proto).
    assert_eq!((admission.kind, matching.kind, call.kind), (2, 1, 3));
    assert_eq!(hex(&matching.parent_span_id), hex(&admission.span_id));
    assert_eq!(hex(&call.parent_span_id), hex(&admission.span_id));
    assert_eq!(attribute(admission, "webhook"), "once.hooks.example.com");
    assert_eq!(attribute(admission, "resource"), "/v1, Resource=pods");
    assert_eq!(attribute(admission, "decision"), "allowed");
    assert_eq!(attribute(admission, "http.response.status_code"), "200");
    assert_eq!(attribute(matching, "result"), "call");
    assert_eq!(attribute(call, "http.response.status_code"), "200");
    assert!(admission.start_time_unix_nano <= call.start_time_unix_nano);
    assert!(call.end_time_unix_nano <= admission.end_time_unix_nano);

    let heads = backend.heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 3);
    let traceparent = |head: &str| {
        head.lines()
            .find_map(|l| l.strip_prefix("traceparent: "))
            .unwrap_or_default()
            .to_string()
    };
    // Not sampled: the trace goes on (same trace id, not sampled), with no spans exported.
    let first = traceparent(&heads[0]);
    assert!(
        first.starts_with("00-0af7651916cd43dd8448eb211c80319c-") && first.ends_with("-00"),
        "{first}"
    );
    assert_eq!(
        traceparent(&heads[2]),
        format!("00-{trace}-{}-01", hex(&call.span_id)),
        "the backend's parent is the proxy's call span"
    );
    assert!(
        heads[2].contains("tracestate: congo=t61rcWkgMzE\r\n"),
        "{}",
        heads[2]
    );
}
