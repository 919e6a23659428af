//! `serve --watch-namespaces` through the real binary against a stand-in Kubernetes API server
//! on 127.0.0.1 that speaks the Namespace list/watch/get protocol (whole Namespaces as
//! kube-apiserver 1.32 serves them,
//! chunked watch events with resourceVersions, bookmarks, a 410 Gone that forces a re-list,
//! dropped connections, 404s): not ready before the first list; namespaceSelector decisions
//! from live labels, flipping within 1 s of a watch event; kube-apiserver's lister-miss GET
//! fallback; a failed lookup before sync decided by failurePolicy.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use admission_proxy::dispatch::HttpClient;
use serde_json::{json, Value};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use crate::common::{self, BinaryProxy, TestBackend, Workspace};

/// The stand-in API server's state, shared with the test.
#[derive(Default)]
struct Api {
    /// What a GET or a list reads: name → labels.
    storage: BTreeMap<String, BTreeMap<String, String>>,
    resource_version: u64,
    /// Open watch connections: each gets raw event lines; dropping the sender ends the
    /// response (the connection closes).
    watchers: Vec<mpsc::UnboundedSender<Vec<u8>>>,
    /// Lists are answered only once this is false (to observe the proxy before sync).
    hold_lists: bool,
    /// GETs of single namespaces answer 500 while true.
    fail_gets: bool,
    /// GETs of single namespaces wait this long before answering.
    slow_gets: Duration,
    /// The next watch answers 410 Gone (resourceVersion too old).
    gone_next_watch: bool,
    /// Requests seen, as `METHOD path?query`.
    requests: Vec<String>,
}

type Shared = Arc<Mutex<Api>>;

/// Namespace `name` as kube-apiserver serves it (`kubectl get namespace -o json`, 1.32.0),
/// annotated `owner: <name>`.
fn namespace(name: &str, labels: &BTreeMap<String, String>, rv: u64) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": labels, "annotations": {"owner": name},
            "resourceVersion": rv.to_string(), "uid": format!("uid-{name}"),
            "creationTimestamp": "2026-11-28T10:00:00Z",
            "managedFields": [{"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
                "time": "2026-11-28T10:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:kubernetes.io/metadata.name": {}}}}}]},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    })
}

fn response(status: &str, body: &Value) -> Vec<u8> {
    let body = body.to_string();
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn chunk(line: &Value) -> Vec<u8> {
    let mut data = line.to_string().into_bytes();
    data.push(b'\n');
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(&data);
    out.extend_from_slice(b"\r\n");
    out
}

fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code})
}

impl Api {
    /// Changes a namespace in storage and sends the watch event.
    fn apply(&mut self, name: &str, labels: &[(&str, &str)], event: &str) {
        let labels: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.resource_version += 1;
        let line =
            json!({"type": event, "object": namespace(name, &labels, self.resource_version)});
        self.storage.insert(name.to_string(), labels);
        let bytes = chunk(&line);
        self.watchers.retain(|w| w.send(bytes.clone()).is_ok());
    }

    fn count(&self, prefix: &str) -> usize {
        self.requests
            .iter()
            .filter(|r| r.starts_with(prefix))
            .count()
    }
}

/// Serves the stand-in API on 127.0.0.1; returns its URL.
async fn serve_api(api: Shared) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        // Bounded: the test process ends the runtime.
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(connection(tcp, api.clone()));
        }
    });
    url
}

/// One connection: requests until the client closes it or a watch ends.
async fn connection(tcp: TcpStream, api: Shared) {
    let (read, mut write) = tcp.into_split();
    let mut read = BufReader::new(read);
    loop {
        let Some((request_line, _)) = common::read_request_async(&mut read).await else {
            return;
        };
        let target = request_line
            .split_whitespace()
            .nth(1)
            .unwrap_or("")
            .to_string();
        api.lock().unwrap().requests.push(format!("GET {target}"));
        let (path, query) = target.split_once('?').unwrap_or((&target, ""));
        if path == "/api/v1/namespaces" && query.contains("watch=true") {
            watch(&mut write, &api).await;
            return;
        }
        let answer = if path == "/api/v1/namespaces" {
            // Bounded wait for the test to release the list (at most 30 s).
            for _ in 0..600 {
                if !api.lock().unwrap().hold_lists {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let a = api.lock().unwrap();
            let items: Vec<Value> = a
                .storage
                .iter()
                .map(|(n, l)| namespace(n, l, a.resource_version))
                .collect();
            response(
                "200 OK",
                &json!({"apiVersion": "v1", "kind": "NamespaceList", "metadata": {"resourceVersion": a.resource_version.to_string()}, "items": items}),
            )
        } else if let Some(name) = path.strip_prefix("/api/v1/namespaces/") {
            let slow = api.lock().unwrap().slow_gets;
            tokio::time::sleep(slow).await;
            let a = api.lock().unwrap();
            match a.storage.get(name) {
                _ if a.fail_gets => response(
                    "500 Internal Server Error",
                    &status(500, "InternalError", "etcdserver: request timed out"),
                ),
                Some(labels) => response("200 OK", &namespace(name, labels, a.resource_version)),
                None => response(
                    "404 Not Found",
                    &status(404, "NotFound", &format!("namespaces \"{name}\" not found")),
                ),
            }
        } else {
            response("404 Not Found", &status(404, "NotFound", "no such path"))
        };
        if write.write_all(&answer).await.is_err() {
            return;
        }
    }
}

/// A watch response: chunked events from the test until it drops the sender (or a 410).
async fn watch(write: &mut tokio::net::tcp::OwnedWriteHalf, api: &Shared) {
    let head =
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    if write.write_all(head).await.is_err() {
        return;
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    {
        let mut a = api.lock().unwrap();
        if std::mem::take(&mut a.gone_next_watch) {
            let gone = json!({"type": "ERROR", "object": status(410, "Expired", "too old resource version: 1 (5)")});
            let _ = tx.send(chunk(&gone));
            drop(tx);
        } else {
            // A bookmark first, as kube-apiserver sends them with allowWatchBookmarks.
            let bookmark = json!({"type": "BOOKMARK", "object": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"resourceVersion": a.resource_version.to_string()}}});
            let _ = tx.send(chunk(&bookmark));
            a.watchers.push(tx);
        }
    }
    while let Some(bytes) = rx.recv().await {
        if write.write_all(&bytes).await.is_err() {
            return;
        }
    }
    let _ = write.write_all(b"0\r\n\r\n").await;
}

fn kubeconfig(ws: &Workspace, url: &str) -> std::path::PathBuf {
    let path = ws.dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!("apiVersion: v1\nkind: Config\nclusters:\n- name: stand-in\n  cluster: {{server: \"{url}\"}}\nusers:\n- name: proxy\n  user: {{token: test-token}}\ncontexts:\n- name: stand-in\n  context: {{cluster: stand-in, user: proxy}}\ncurrent-context: stand-in\n"),
    )
    .unwrap();
    path
}

/// `serve --watch-namespaces` on `ws`'s configuration, watching the stand-in API at `url`.
fn watching(ws: &Workspace, url: &str) -> BinaryProxy {
    let kubeconfig = kubeconfig(ws, url);
    BinaryProxy::start(
        &ws.conf,
        &ws.cert,
        &ws.key,
        &[
            "--watch-namespaces",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
        ],
    )
}

/// Whether the proxy became ready (its first list done) within 20 s.
async fn synced(proxy: &BinaryProxy, ws: &Workspace) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ready(proxy, ws).await {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    true
}

/// A pod CREATE in `namespace`, with a fresh uid.
fn pod_in(namespace: &str, n: usize) -> Vec<u8> {
    let mut review: Value =
        serde_json::from_slice(&common::fixture("0096-create-core-v1-pods-v1.json")).unwrap();
    review["request"]["namespace"] = json!(namespace);
    review["request"]["object"]["metadata"]["namespace"] = json!(namespace);
    review["request"]["uid"] = json!(format!("00000000-0000-4000-8000-{n:012}"));
    serde_json::to_vec(&review).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_labels_follow_the_cluster() {
    let api: Shared = Arc::default();
    {
        let mut a = api.lock().unwrap();
        a.resource_version = 10;
        a.storage.insert(
            "team-a".into(),
            BTreeMap::from([("env".into(), "prod".into())]),
        );
        a.storage.insert(
            "team-b".into(),
            BTreeMap::from([("env".into(), "dev".into())]),
        );
        a.hold_lists = true;
        a.fail_gets = true;
    }
    let url = serve_api(api.clone()).await;
    let backend = TestBackend::start();
    let ws = Workspace::new("nswatch");
    std::fs::write(
        ws.conf.join("webhooks.yaml"),
        common::validating(
            "prod.nswatch.test",
            &backend.client_config("/deny"),
            common::ALL,
            "namespaceSelector: {matchLabels: {env: prod}}",
        ),
    )
    .unwrap();
    let proxy = watching(&ws, &url);
    let client = HttpClient::new();
    let target = proxy.target(&ws.pki);
    let mut n = 0;
    let mut decide = |namespace: &str| {
        n += 1;
        let body = pod_in(namespace, n);
        let (client, target) = (&client, &target);
        async move {
            let reply = client
                .post(
                    target,
                    "/webhooks/prod.nswatch.test?timeout=10s",
                    &body,
                    &[],
                )
                .await
                .unwrap();
            let v: Value = serde_json::from_slice(&reply.body).unwrap_or(Value::Null);
            let message = v["response"]["status"]["message"]
                .as_str()
                .or(v["message"].as_str())
                .unwrap_or("")
                .to_string();
            (
                reply.status,
                reply
                    .header("x-admission-proxy-decision")
                    .unwrap_or_default()
                    .to_string(),
                message,
            )
        }
    };

    // Before the first list: not ready, and a request that needs labels (the live GET fails
    // too) follows failurePolicy (Fail: 500) with a message that says why.
    let (code, decision, message) = decide("team-a").await;
    assert_eq!(
        (code, decision.as_str()),
        (500, "failed-closed"),
        "{message}"
    );
    assert!(
        message.contains("has not listed the cluster's namespaces yet")
            && message.contains("team-a"),
        "{message}"
    );
    assert!(!ready(&proxy, &ws).await, "not ready before the first list");
    assert_eq!(backend.recorder.calls(), 0);

    // The list completes: ready, and decisions use the listed labels.
    {
        let mut a = api.lock().unwrap();
        a.hold_lists = false;
        a.fail_gets = false;
    }
    let t0 = Instant::now();
    while !ready(&proxy, &ws).await {
        assert!(t0.elapsed() < Duration::from_secs(10), "synced within 10 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(decide("team-a").await.1, "denied");
    assert_eq!(decide("team-b").await.1, "skipped");
    assert_eq!(backend.recorder.calls(), 1);

    // A label change takes effect within 1 s of its watch event.
    api.lock()
        .unwrap()
        .apply("team-b", &[("env", "prod")], "MODIFIED");
    let changed = Instant::now();
    while decide("team-b").await.1 != "denied" {
        assert!(
            changed.elapsed() < Duration::from_secs(1),
            "label change within 1 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // A namespace the watch has not delivered yet: kube-apiserver's live GET fallback.
    api.lock().unwrap().storage.insert(
        "team-c".into(),
        BTreeMap::from([("env".into(), "prod".into())]),
    );
    assert_eq!(decide("team-c").await.1, "denied");
    assert_eq!(
        api.lock().unwrap().count("GET /api/v1/namespaces/team-c"),
        1
    );
    // A namespace that does not exist: 404, whatever failurePolicy says.
    let (code, decision, message) = decide("ghost").await;
    assert_eq!((code, decision.as_str()), (200, "rejected"));
    assert_eq!(message, "namespaces \"ghost\" not found");

    // A dropped watch connection: the watch resumes and later events still apply.
    let watches = api.lock().unwrap().count("GET /api/v1/namespaces?");
    api.lock().unwrap().watchers.clear();
    let t0 = Instant::now();
    while api.lock().unwrap().watchers.is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the watch reconnects"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(api.lock().unwrap().count("GET /api/v1/namespaces?") > watches);
    api.lock()
        .unwrap()
        .apply("team-b", &[("env", "dev")], "MODIFIED");
    let t0 = Instant::now();
    while decide("team-b").await.1 != "skipped" {
        assert!(
            t0.elapsed() < Duration::from_secs(1),
            "event after reconnect applied"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // 410 Gone: changes made meanwhile arrive by a re-list; labels already cached keep
    // serving until it completes.
    {
        let mut a = api.lock().unwrap();
        a.gone_next_watch = true;
        a.resource_version += 5;
        a.storage.insert(
            "team-a".into(),
            BTreeMap::from([("env".into(), "dev".into())]),
        );
        a.watchers.clear();
    }
    let t0 = Instant::now();
    loop {
        let (_, decision, _) = decide("team-a").await;
        assert!(
            decision == "denied" || decision == "skipped",
            "cached labels keep serving: {decision}"
        );
        if decision == "skipped" {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "re-listed after 410"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The protocol as kube-apiserver sees it: list, watch from the list's resourceVersion,
    // resume from the last event after a dropped connection, and after the 410 a new list
    // before the next watch. The re-list's labels can serve before that watch is sent: wait
    // (bounded) for the watch after it.
    let trace = || -> Vec<String> {
        api.lock()
            .unwrap()
            .requests
            .iter()
            .filter(|r| r.starts_with("GET /api/v1/namespaces?"))
            .map(|r| match r.split_once("resourceVersion=") {
                Some((_, rv)) => format!("watch {rv}"),
                None => "list".to_string(),
            })
            .collect()
    };
    let t0 = Instant::now();
    while trace().last().is_some_and(|last| last == "list")
        && t0.elapsed() < Duration::from_secs(10)
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let trace = trace();
    assert_eq!(
        trace,
        ["list", "watch 10", "watch 11", "watch 12", "list", "watch 17"],
        "{trace:?}"
    );
    // The watch's state is in the metrics.
    let metrics = get(&proxy, &ws, "/metrics").await;
    assert!(
        metrics.contains("admission_proxy_namespace_watch_synced 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("admission_proxy_namespaces_cached 3"),
        "{metrics}"
    );
    assert!(
        metrics.contains("admission_proxy_namespace_lookups_total{result=\"not_found\"} 1"),
        "{metrics}"
    );
}

/// `GET path` from the proxy (a GET, as the kubelet's probe sends it).
async fn get(proxy: &BinaryProxy, ws: &Workspace, path: &'static str) -> String {
    let (addr, ca) = (proxy.addr.clone(), ws.pki.ca_pem.clone());
    tokio::task::spawn_blocking(move || common::https_get(&addr, &ca, None, path))
        .await
        .unwrap()
        .unwrap_or_default()
}

async fn ready(proxy: &BinaryProxy, ws: &Workspace) -> bool {
    get(proxy, ws, "/readyz").await.starts_with("HTTP/1.1 200")
}

/// While the Kubernetes API cannot be reached, kube-rs' HTTP layer logged
/// `ERROR … failed with error client error (Connect)` on every retry, beside the proxy's own
/// WARN saying the same calmly. Only the proxy's line remains.
#[test]
fn an_unreachable_api_is_the_proxy_s_warning_alone() {
    let ws = Workspace::new("nsdown");
    std::fs::write(
        ws.conf.join("webhooks.yaml"),
        common::validating(
            "down.nswatch.test",
            "{url: \"https://127.0.0.1:9/never\"}",
            common::ALL,
            "",
        ),
    )
    .unwrap();
    // Port 1 on loopback: nothing listens, every connect is refused at once.
    let kubeconfig = kubeconfig(&ws, "http://127.0.0.1:1");
    let proxy = BinaryProxy::start(
        &ws.conf,
        &ws.cert,
        &ws.key,
        &[
            "--watch-namespaces",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
        ],
    );
    assert!(
        proxy.logged("namespace watch error"),
        "{:?}",
        proxy.logs.lock().unwrap()
    );
    let logs = proxy.logs.lock().unwrap().clone();
    let errors: Vec<&String> = logs
        .iter()
        .filter(|l| l.contains("\"level\":\"ERROR\""))
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
}

/// A live lookup of a namespace the watch has not seen yet is bounded by
/// what remains of kube-apiserver's `?timeout=`, not only by its own 2 s: with `?timeout=1s`
/// and a GET that does not answer, failurePolicy answers within the caller's second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_namespace_lookup_ends_within_the_callers_deadline() {
    let api: Shared = Arc::default();
    {
        let mut a = api.lock().unwrap();
        a.resource_version = 10;
        a.slow_gets = Duration::from_secs(5);
    }
    let url = serve_api(api.clone()).await;
    let backend = TestBackend::start();
    let ws = Workspace::new("nswatch-slow");
    std::fs::write(
        ws.conf.join("webhooks.yaml"),
        common::validating(
            "slow.nswatch.test",
            &backend.client_config("/deny"),
            common::ALL,
            "namespaceSelector: {matchLabels: {env: prod}}\n  timeoutSeconds: 10\n  failurePolicy: Ignore",
        ),
    )
    .unwrap();
    let proxy = watching(&ws, &url);
    assert!(synced(&proxy, &ws).await, "the watch listed");
    let started = Instant::now();
    let reply = proxy
        .post(
            &ws.pki,
            "/webhooks/slow.nswatch.test?timeout=1s",
            &pod_in("fresh", 1),
        )
        .await;
    let took = started.elapsed();
    assert_eq!(reply.decision, "failed-open", "{}", reply.json);
    assert!(
        took < Duration::from_millis(1500),
        "answered within the caller's deadline: {took:?}"
    );
    assert_eq!(api.lock().unwrap().count("GET /api/v1/namespaces/fresh"), 1);
    assert_eq!(backend.recorder.calls(), 0);
}

/// In a validating chain, a webhook whose namespace labels cannot be read
/// fails open at selection (failurePolicy Ignore) at its own place among the selected
/// webhooks, so a later webhook failing open too keeps its own `failed-open` annotation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_open_annotations_in_a_chain_keep_their_own_indices() {
    let api: Shared = Arc::default();
    {
        let mut a = api.lock().unwrap();
        a.resource_version = 10;
        a.fail_gets = true;
    }
    let url = serve_api(api.clone()).await;
    let backend = TestBackend::start();
    let ws = Workspace::new("nswatch-chain");
    let hook = |name: &str, path: &str, extra: &str| {
        format!(
            "- name: {name}\n  clientConfig: {}\n  rules: {}\n  sideEffects: None\n  admissionReviewVersions: [v1]\n  failurePolicy: Ignore\n{extra}",
            backend.client_config(path),
            common::ALL
        )
    };
    std::fs::write(
        ws.conf.join("webhooks.yaml"),
        format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {{name: both}}\nwebhooks:\n{}{}",
            hook(
                "labels.nswatch.test",
                "/deny",
                "  namespaceSelector: {matchLabels: {env: prod}}\n"
            ),
            hook("broken.nswatch.test", "/status/500", ""),
        ),
    )
    .unwrap();
    let proxy = watching(&ws, &url);
    assert!(synced(&proxy, &ws).await, "the watch listed");
    let reply = proxy
        .post(
            &ws.pki,
            "/configurations/validating/both?timeout=10s",
            &pod_in("fresh", 1),
        )
        .await;
    assert_eq!(reply.decision, "failed-open", "{}", reply.json);
    let annotations = &reply.json["response"]["auditAnnotations"];
    assert_eq!(
        annotations["failed-open_round_0_index_0"], "labels.nswatch.test",
        "{annotations}"
    );
    assert_eq!(
        annotations["failed-open_round_0_index_1"], "broken.nswatch.test",
        "{annotations}"
    );
    assert_eq!(
        backend.recorder.calls(),
        1,
        "only the second webhook is called"
    );
}

/// A ValidatingAdmissionPolicy candidate's `namespaceObject` is the watched Namespace whole
/// (`CreateNamespaceObject`: annotations, spec, status), as kube-apiserver's
/// informer holds it: a metadata-only watch carried neither status nor spec, so a policy
/// reading `namespaceObject.status.phase` erred where kube-apiserver decides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_candidate_reads_the_watched_namespace_whole() {
    let api: Shared = Arc::default();
    {
        let mut a = api.lock().unwrap();
        a.resource_version = 10;
        a.storage.insert("team-a".into(), BTreeMap::new());
    }
    let url = serve_api(api.clone()).await;
    let backend = TestBackend::start();
    let ws = Workspace::new("nswatch-policy");
    let legacy = "legacy.nswatch.test";
    std::fs::write(
        ws.conf.join("webhooks.yaml"),
        common::validating(legacy, &backend.client_config("/allow"), common::ALL, ""),
    )
    .unwrap();
    std::fs::write(
        ws.conf.join("candidate.yaml"),
        format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\n\
             metadata: {{name: active}}\nspec:\n  failurePolicy: Fail\n  matchConstraints:\n    \
             resourceRules:\n    - {{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [pods]}}\n  \
             validations:\n  - expression: \"namespaceObject.status.phase == 'Active' && \
             namespaceObject.metadata.annotations.owner == 'team-a' && \
             namespaceObject.spec.finalizers == ['kubernetes']\"\n\
             ---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n\
             metadata: {{name: active}}\nspec: {{policyName: active, validationActions: [Deny]}}\n\
             ---\napiVersion: admission-proxy.io/v1alpha1\nkind: Candidate\nmetadata: {{name: active}}\n\
             spec:\n  webhook: {legacy}\n  policy: {{name: active}}\n"
        ),
    )
    .unwrap();
    let proxy = watching(&ws, &url);
    assert!(synced(&proxy, &ws).await, "the watch never synced");
    let reply = proxy
        .post(
            &ws.pki,
            &format!("/webhooks/{legacy}?timeout=10s"),
            &pod_in("team-a", 1),
        )
        .await;
    assert!(reply.allowed(), "{}", reply.message());
    let metrics = tokio::task::block_in_place(|| {
        common::scrape_when_compared(&proxy, &ws.pki, "active", 1.0)
    });
    assert_eq!(
        common::comparisons(&metrics, "active"),
        [("agree".to_string(), 1.0)],
        "{metrics}"
    );
}
