//! The real binary as kube-apiserver and the kubelet meet it: SIGTERM drains admissions in
//! flight, /readyz tells when to send requests, client certificates (`--client-ca-file`,
//! `--client-cn`, rotation), plain HTTP on the TLS port, mismatched serving pairs, `--version`
//! and `--log-level` errors.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::tools::pki::TestPki;
use admission_proxy::dispatch::HttpClient;

use crate::common::{
    fixture, https_get, validating, wait_for_calls, BinaryProxy, TestBackend, Workspace, ALL,
};

const BIN: &str = env!("CARGO_BIN_EXE_admission-proxy");

fn write_config(ws: &Workspace, contents: &str) {
    std::fs::write(ws.conf.join("webhooks.yaml"), contents).unwrap();
}

fn unreachable_webhook() -> String {
    validating(
        "unreachable.serving.test",
        "{url: \"https://127.0.0.1:9/never\"}",
        ALL,
        "failurePolicy: Ignore",
    )
}

/// `serve` on `ws` with its certificate and `key`, run to its exit (a refusal at start).
fn serve_until_exit(ws: &Workspace, key: &Path) -> std::process::Output {
    Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&ws.conf)
        .arg("--tls-cert-file")
        .arg(&ws.cert)
        .arg("--tls-private-key-file")
        .arg(key)
        .output()
        .unwrap()
}

fn sigterm(proxy: &BinaryProxy) {
    let status = Command::new("kill")
        .args(["-TERM", &proxy.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits at most `limit` for the process to exit; its exit status.
fn wait_exit(proxy: &mut BinaryProxy, limit: Duration) -> Option<std::process::ExitStatus> {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if let Some(status) = proxy.child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_answers_the_admission_in_flight_then_exits() {
    let ws = Workspace::new("drain");
    let backend = TestBackend::start();
    write_config(
        &ws,
        &validating(
            "slow.serving.test",
            &backend.client_config("/slow/2500"),
            ALL,
            "timeoutSeconds: 10",
        ),
    );
    let mut proxy = BinaryProxy::start(
        &ws.conf,
        &ws.cert,
        &ws.key,
        &[
            "--shutdown-delay-seconds",
            "1",
            "--shutdown-grace-seconds",
            "10",
        ],
    );
    let target = proxy.target(&ws.pki);
    let client = Arc::new(HttpClient::new());
    let in_flight = {
        let (client, target) = (client.clone(), target.clone());
        tokio::spawn(async move {
            client
                .post(
                    &target,
                    "/webhooks/slow.serving.test?timeout=10s",
                    &fixture("0096-create-core-v1-pods-v1.json"),
                    &[],
                )
                .await
        })
    };
    // The request has reached the backend before the signal.
    wait_for_calls(&backend, 1).await;
    assert_eq!(backend.recorder.calls(), 1);
    let signalled = Instant::now();
    sigterm(&proxy);
    assert!(proxy.logged("shutting down"));
    // During the shutdown delay the proxy still answers, and /readyz fails.
    let (addr, ca) = (proxy.addr.clone(), ws.pki.ca_pem.clone());
    let readyz = tokio::task::spawn_blocking(move || https_get(&addr, &ca, None, "/readyz"))
        .await
        .unwrap()
        .unwrap();
    assert!(
        readyz.starts_with("HTTP/1.1 503") && readyz.ends_with("shutting down"),
        "{readyz}"
    );

    let reply = in_flight
        .await
        .unwrap()
        .expect("the admission in flight is answered");
    assert_eq!(reply.status, 200);
    let answer: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(answer["response"]["allowed"], true);
    // Written during the drain: the client is told to close, as Go's server does once its
    // shutdown began (it said `keep-alive`).
    assert_eq!(
        reply.header("connection"),
        Some("close"),
        "{:?}",
        reply.headers
    );
    let status = wait_exit(&mut proxy, Duration::from_secs(15)).expect("the proxy exits");
    assert!(status.success(), "{status:?}");
    assert!(
        signalled.elapsed() >= Duration::from_secs(1),
        "the shutdown delay was kept"
    );
    assert!(proxy.logged("drained; exiting"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_fails_until_a_configuration_has_webhooks() {
    let ws = Workspace::new("readyz");
    // A ConfigMap key without an extension is not loaded: zero webhooks.
    std::fs::write(ws.conf.join("webhooks"), unreachable_webhook()).unwrap();
    let proxy = BinaryProxy::start(&ws.conf, &ws.cert, &ws.key, &[]);
    assert!(proxy.logged("no webhooks are configured"));
    let get = |path: &'static str| {
        let (addr, ca) = (proxy.addr.clone(), ws.pki.ca_pem.clone());
        move || https_get(&addr, &ca, None, path).unwrap()
    };
    let readyz = tokio::task::spawn_blocking(get("/readyz")).await.unwrap();
    assert!(readyz.starts_with("HTTP/1.1 503"), "{readyz}");
    assert!(readyz.ends_with("no webhooks are configured"), "{readyz}");
    let livez = tokio::task::spawn_blocking(get("/livez")).await.unwrap();
    assert!(livez.starts_with("HTTP/1.1 200"), "{livez}");

    write_config(&ws, &unreachable_webhook());
    let mut ready = false;
    for _ in 0..60 {
        let readyz = tokio::task::spawn_blocking(get("/readyz")).await.unwrap();
        if readyz.starts_with("HTTP/1.1 200") {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ready, "ready once webhooks are loaded");
}

#[test]
fn plain_http_on_the_tls_port_gets_go_s_400() {
    let ws = Workspace::new("plain");
    write_config(&ws, &unreachable_webhook());
    let proxy = BinaryProxy::start(&ws.conf, &ws.cert, &ws.key, &["--log-level", "debug"]);
    let mut tcp = TcpStream::connect(&proxy.addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    tcp.write_all(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    let mut answer = Vec::new();
    tcp.read_to_end(&mut answer).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&answer),
        "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"
    );
    // A client that connects and leaves, and one whose TLS fails: no ERROR line.
    drop(TcpStream::connect(&proxy.addr).unwrap());
    let stranger = TestPki::generate(&["127.0.0.1"]).unwrap();
    assert!(https_get(&proxy.addr, &stranger.ca_pem, None, "/readyz").is_err());
    assert!(proxy.logged("TLS handshake failed"));
    let logs = proxy.logs.lock().unwrap();
    assert!(
        !logs.iter().any(|l| l.contains("\"level\":\"ERROR\"")),
        "{logs:?}"
    );
}

#[test]
fn client_certificates_are_required_verified_filtered_by_cn_and_rotated() {
    let ws = Workspace::new("mtls");
    write_config(&ws, &unreachable_webhook());
    let clients = TestPki::generate(&["unused"]).unwrap();
    let ca_file = ws.dir.join("client-ca.crt");
    std::fs::write(&ca_file, &clients.ca_pem).unwrap();
    let proxy = BinaryProxy::start(
        &ws.conf,
        &ws.cert,
        &ws.key,
        &[
            "--client-ca-file",
            ca_file.to_str().unwrap(),
            "--client-cn",
            "kube-apiserver,kube-apiserver-proxy",
        ],
    );
    let get = |client: Option<&(String, String)>| {
        https_get(&proxy.addr, &ws.pki.ca_pem, client, "/readyz")
    };
    let apiserver = clients.client_certificate("kube-apiserver").unwrap();
    let ok = get(Some(&apiserver)).unwrap();
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    assert!(get(None).is_err(), "no client certificate: refused");
    let other_cn = clients.client_certificate("someone-else").unwrap();
    assert!(get(Some(&other_cn)).is_err(), "a CN not listed: refused");
    let other_ca = TestPki::generate(&["unused"]).unwrap();
    let foreign = other_ca.client_certificate("kube-apiserver").unwrap();
    assert!(get(Some(&foreign)).is_err(), "another CA: refused");

    // Rotate the client CA: the new CA's clients are served, the old one's no longer.
    std::fs::write(&ca_file, &other_ca.ca_pem).unwrap();
    assert!(proxy.logged("client CA reloaded"));
    assert!(get(Some(&foreign)).unwrap().starts_with("HTTP/1.1 200"));
    assert!(get(Some(&apiserver)).is_err());
}

#[test]
fn a_serving_key_that_does_not_match_is_refused_at_start_and_on_reload() {
    let ws = Workspace::new("pair");
    write_config(&ws, &unreachable_webhook());
    let other = TestPki::generate(&["127.0.0.1"]).unwrap();
    let wrong_key = ws.dir.join("wrong.key");
    std::fs::write(&wrong_key, &other.key_pem).unwrap();
    let out = serve_until_exit(&ws, &wrong_key);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let error: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(error.len(), 1, "{stderr}");
    assert!(
        error[0].contains("does not match")
            && error[0].contains(ws.cert.to_str().unwrap())
            && error[0].contains(wrong_key.to_str().unwrap()),
        "{stderr}"
    );
    assert_eq!(
        error[0].matches("does not match").count(),
        1,
        "the cause is printed once: {stderr}"
    );

    // On reload: the last good pair keeps serving.
    let proxy = BinaryProxy::start(&ws.conf, &ws.cert, &ws.key, &[]);
    std::fs::write(&ws.key, &other.key_pem).unwrap();
    assert!(
        proxy.logged("serving certificate not reloaded"),
        "{:?}",
        proxy.logs.lock().unwrap()
    );
    let ok = https_get(&proxy.addr, &ws.pki.ca_pem, None, "/livez").unwrap();
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
}

#[test]
fn version_names_the_commit_and_a_bad_log_level_is_an_error() {
    let out = Command::new(BIN).arg("--version").output().unwrap();
    let version = String::from_utf8_lossy(&out.stdout);
    assert!(
        version.starts_with(&format!(
            "admission-proxy {} (commit ",
            env!("CARGO_PKG_VERSION")
        )),
        "{version}"
    );
    let out = Command::new(BIN)
        .args(["--log-level", "verbose", "check", "--config"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("config"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("--log-level \"verbose\" is not a valid log filter"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A plain HTTP GET; the whole answer.
fn http_get(addr: &str, path: &str) -> String {
    let mut tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        tcp,
        "GET {path} HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    let _ = tcp.read_to_string(&mut out);
    out
}

/// The address a listener line with `serves` logged.
fn logged_address(proxy: &BinaryProxy, serves: &str) -> String {
    assert!(proxy.logged(serves), "{:?}", proxy.logs.lock().unwrap());
    let logs = proxy.logs.lock().unwrap();
    let line = logs
        .iter()
        .find(|l| {
            l.contains("plain-HTTP observation listener")
                && l.contains(&format!("\"serves\":\"{serves}\""))
        })
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    v["fields"]["address"].as_str().unwrap().to_string()
}

/// With `--client-ca-file`, the admission port refuses the kubelet's probes (no
/// client certificate), so the pod never became Ready. The probes and /metrics have plain-HTTP
/// listeners of their own, as controller-runtime's managers do; each serves only its paths.
#[test]
fn probes_and_metrics_have_plain_http_ports_beside_client_certificate_auth() {
    let ws = Workspace::new("probes");
    write_config(&ws, &unreachable_webhook());
    let clients = TestPki::generate(&["unused"]).unwrap();
    let ca_file = ws.dir.join("client-ca.crt");
    std::fs::write(&ca_file, &clients.ca_pem).unwrap();
    let proxy = BinaryProxy::start(
        &ws.conf,
        &ws.cert,
        &ws.key,
        &[
            "--client-ca-file",
            ca_file.to_str().unwrap(),
            "--health-probe-bind-address",
            "127.0.0.1:0",
            "--metrics-bind-address",
            "127.0.0.1:0",
        ],
    );
    assert!(
        https_get(&proxy.addr, &ws.pki.ca_pem, None, "/readyz").is_err(),
        "the admission port wants a client certificate"
    );
    let health = logged_address(&proxy, "health probes");
    let metrics = logged_address(&proxy, "metrics");
    for path in ["/readyz", "/livez", "/healthz"] {
        let answer = http_get(&health, path);
        assert!(answer.starts_with("HTTP/1.1 200"), "{path}: {answer}");
        assert!(answer.ends_with("ok"), "{path}: {answer}");
    }
    assert!(http_get(&health, "/metrics").starts_with("HTTP/1.1 404"));
    let scrape = http_get(&metrics, "/metrics");
    assert!(scrape.starts_with("HTTP/1.1 200"), "{scrape}");
    assert!(
        scrape.contains("# HELP admission_proxy_build_info"),
        "{scrape}"
    );
    assert!(http_get(&metrics, "/readyz").starts_with("HTTP/1.1 404"));
    assert!(http_get(&health, "/webhooks/unreachable.serving.test").starts_with("HTTP/1.1 404"));

    // One address for both: one listener serving both.
    let ws2 = Workspace::new("probes-one");
    write_config(&ws2, &unreachable_webhook());
    let port = crate::common::closed_port();
    let both = format!("127.0.0.1:{port}");
    let proxy2 = BinaryProxy::start(
        &ws2.conf,
        &ws2.cert,
        &ws2.key,
        &[
            "--health-probe-bind-address",
            &both,
            "--metrics-bind-address",
            &both,
        ],
    );
    assert_eq!(logged_address(&proxy2, "health probes and metrics"), both);
    assert!(http_get(&both, "/readyz").starts_with("HTTP/1.1 200"));
    assert!(http_get(&both, "/metrics").starts_with("HTTP/1.1 200"));
}

/// When `--shutdown-grace-seconds` ran out, the admissions still in flight got a
/// bare EOF (a transport error for kube-apiserver) and the process exited 0. Each is answered
/// by its webhook's failurePolicy (Ignore: allowed with the reason; Fail: 500), and the exit
/// code says the drain was cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admissions_cut_by_the_grace_period_are_answered_by_failure_policy() {
    let ws = Workspace::new("grace");
    let backend = TestBackend::start();
    write_config(
        &ws,
        &[
            validating(
                "ignore.grace.test",
                &backend.client_config("/slow/8000"),
                ALL,
                "timeoutSeconds: 10\n  failurePolicy: Ignore",
            ),
            validating(
                "fail.grace.test",
                &backend.client_config("/slow/8000"),
                ALL,
                "timeoutSeconds: 10\n  failurePolicy: Fail",
            ),
        ]
        .join("---\n"),
    );
    let mut proxy = BinaryProxy::start(
        &ws.conf,
        &ws.cert,
        &ws.key,
        &[
            "--shutdown-delay-seconds",
            "0",
            "--shutdown-grace-seconds",
            "1",
        ],
    );
    let target = proxy.target(&ws.pki);
    let client = Arc::new(HttpClient::new());
    let send = |webhook: &'static str| {
        let (client, target) = (client.clone(), target.clone());
        tokio::spawn(async move {
            client
                .post(
                    &target,
                    &format!("/webhooks/{webhook}?timeout=10s"),
                    &fixture("0096-create-core-v1-pods-v1.json"),
                    &[],
                )
                .await
        })
    };
    let (ignore, fail) = (send("ignore.grace.test"), send("fail.grace.test"));
    wait_for_calls(&backend, 2).await;
    let signalled = Instant::now();
    sigterm(&proxy);
    let ignore = ignore.await.unwrap().expect("answered, not cut");
    assert_eq!(ignore.status, 200);
    let answer: serde_json::Value = serde_json::from_slice(&ignore.body).unwrap();
    assert_eq!(answer["response"]["allowed"], true);
    let warning = answer["response"]["warnings"][0].as_str().unwrap();
    assert!(warning.contains("shutting down"), "{warning}");
    let fail = fail.await.unwrap().expect("answered, not cut");
    assert_eq!(fail.status, 500);
    let status: serde_json::Value = serde_json::from_slice(&fail.body).unwrap();
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("grace period ran out"),
        "{status}"
    );
    assert!(
        signalled.elapsed() < Duration::from_secs(5),
        "answered at the grace period's end"
    );
    let exit = wait_exit(&mut proxy, Duration::from_secs(10)).expect("the proxy exits");
    assert_eq!(exit.code(), Some(1), "a cut drain is not a clean exit");
    assert!(proxy.logged("answered by its webhook's failurePolicy"));
}

/// The grace period's end in a chain. Each webhook whose call is under way, or not
/// started yet, is a failure decided by its own failurePolicy, and no call starts after it. The
/// validating chain's Ignore webhook fails open and its Fail webhook fails closed. In the
/// mutating chain, the first webhook (Ignore) is cut and fails open; the second (Fail) is not
/// called and fails closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chains_cut_by_the_grace_period_decide_each_webhook_by_its_failure_policy() {
    let ws = Workspace::new("grace-chains");
    let backend = TestBackend::start();
    let hook = |name: &str, path: &str, policy: &str| {
        format!(
            "- name: {name}\n  clientConfig: {}\n  rules: {ALL}\n  sideEffects: None\n  admissionReviewVersions: [v1]\n  timeoutSeconds: 10\n  failurePolicy: {policy}\n",
            backend.client_config(path)
        )
    };
    let config = |kind: &str, hooks: [String; 2]| {
        format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: {kind}\nmetadata: {{name: cut}}\nwebhooks:\n{}{}",
            hooks[0], hooks[1]
        )
    };
    write_config(
        &ws,
        &[
            config(
                "ValidatingWebhookConfiguration",
                [
                    hook("ignore.grace.test", "/slow/8000", "Ignore"),
                    hook("fail.grace.test", "/slow/8000", "Fail"),
                ],
            ),
            config(
                "MutatingWebhookConfiguration",
                [
                    hook("ignore.grace.test", "/slow/8000", "Ignore"),
                    hook("after.grace.test", "/upstream/allow/after", "Fail"),
                ],
            ),
        ]
        .join("---\n"),
    );
    let mut proxy = BinaryProxy::start(
        &ws.conf,
        &ws.cert,
        &ws.key,
        &[
            "--shutdown-delay-seconds",
            "0",
            "--shutdown-grace-seconds",
            "1",
        ],
    );
    let target = proxy.target(&ws.pki);
    let client = Arc::new(HttpClient::new());
    let send = |route: &'static str| {
        let (client, target) = (client.clone(), target.clone());
        tokio::spawn(async move {
            client
                .post(
                    &target,
                    &format!("/configurations/{route}/cut?timeout=10s"),
                    &fixture("0096-create-core-v1-pods-v1.json"),
                    &[],
                )
                .await
        })
    };
    let (validating, mutating) = (send("validating"), send("mutating"));
    wait_for_calls(&backend, 3).await;
    let signalled = Instant::now();
    sigterm(&proxy);
    for (route, reply) in [("validating", validating), ("mutating", mutating)] {
        let reply = reply.await.unwrap().expect("answered, not cut");
        assert_eq!(reply.status, 200, "{route}");
        let answer: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
        let response = &answer["response"];
        assert_eq!(response["allowed"], false, "{route}: {answer}");
        assert_eq!(response["status"]["code"], 500, "{route}: {answer}");
        let failed = if route == "validating" {
            "fail.grace.test"
        } else {
            "after.grace.test"
        };
        let message = response["status"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with(&format!(
                "Internal error occurred: failed calling webhook \"{failed}\": failed to call webhook: Post"
            )) && message.ends_with("the proxy is shutting down and its grace period ran out"),
            "{route}: {message}"
        );
        assert_eq!(
            response["auditAnnotations"]["failed-open_round_0_index_0"], "ignore.grace.test",
            "{route}: {answer}"
        );
    }
    assert_eq!(
        backend.recorder.calls_to("/upstream/allow/after"),
        0,
        "no call starts after the grace period"
    );
    assert!(
        signalled.elapsed() < Duration::from_secs(5),
        "answered at the grace period's end"
    );
    let exit = wait_exit(&mut proxy, Duration::from_secs(10)).expect("the proxy exits");
    assert_eq!(exit.code(), Some(1), "a cut drain is not a clean exit");
}

/// In text logs a uid holding a newline wrote a log line of its own (a forged line; JSON logs
/// escaped it), and a 2.9 MB `kind` was written whole into the WARN line and into the 400
/// body. What a request supplies is escaped (no value starts a line) and cut to 1,024 bytes
/// in log lines and error bodies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_supplied_values_neither_forge_nor_flood_log_lines() {
    let ws = Workspace::new("log-lines");
    let backend = TestBackend::start();
    write_config(
        &ws,
        &validating("deny.logs.test", &backend.client_config("/deny"), ALL, ""),
    );
    let proxy = BinaryProxy::start_text_logs(&ws.conf, &ws.cert, &ws.key, &[]);
    let path = "/webhooks/deny.logs.test?timeout=10s";
    let mut review: serde_json::Value =
        serde_json::from_slice(&fixture("0096-create-core-v1-pods-v1.json")).unwrap();
    review["request"]["uid"] =
        "forged\n2001-01-01T00:00:00.000000Z  INFO admission_proxy::server: admission decision=allowed"
            .into();
    let denied = proxy
        .post(&ws.pki, path, &serde_json::to_vec(&review).unwrap())
        .await;
    assert_eq!(denied.status, 200);
    assert!(!denied.allowed(), "{:?}", denied.json);

    review["kind"] = "K".repeat(2_900_000).into();
    let refused = proxy
        .post(&ws.pki, path, &serde_json::to_vec(&review).unwrap())
        .await;
    assert_eq!(refused.status, 400);
    assert!(
        refused.body.len() < 2048,
        "a 400 body of {} bytes",
        refused.body.len()
    );
    assert!(
        refused.message().starts_with("wrong kind \"KKK"),
        "{}",
        refused.message()
    );

    assert!(proxy.logged("forged"));
    assert!(proxy.logged("rejected a request that is not an AdmissionReview"));
    let logs = proxy.logs.lock().unwrap();
    assert!(
        !logs.iter().any(|l| l.starts_with("2001-01-01")),
        "a forged log line: {logs:?}"
    );
    let admission = logs.iter().find(|l| l.contains("forged")).unwrap();
    assert!(
        admission.contains(r"forged\n2001-01-01"),
        "the newline is escaped: {admission}"
    );
    let warning = logs
        .iter()
        .find(|l| l.contains("rejected a request that is not an AdmissionReview"))
        .unwrap();
    assert!(
        warning.len() < 2048,
        "a WARN line of {} bytes",
        warning.len()
    );
}

/// The listener's own shutdown, apart from the admission app's SIGTERM flag: an answer written
/// after `ServerHandle::shutdown` began says `Connection: close` and its connection closes (the
/// example backend's server, whose app never asks to close on its own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_written_after_the_listener_s_shutdown_began_close_their_connection() {
    let (handle, recorder) =
        crate::tools::example_backend::start("127.0.0.1:0".parse().unwrap(), None).unwrap();
    let addr = handle.local_addr;
    let answer = tokio::task::spawn_blocking(move || {
        let body = fixture("0096-create-core-v1-pods-v1.json");
        let mut tcp = TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let head = format!(
            "POST /slow/1000 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        tcp.write_all(head.as_bytes()).unwrap();
        tcp.write_all(&body).unwrap();
        // Until the server closes the connection, or the read timeout if it does not.
        let (mut out, mut buf) = (Vec::new(), [0u8; 4096]);
        while let Ok(n) = tcp.read(&mut buf) {
            if n == 0 {
                return (String::from_utf8_lossy(&out).into_owned(), true);
            }
            out.extend_from_slice(&buf[..n]);
        }
        (String::from_utf8_lossy(&out).into_owned(), false)
    });
    for _ in 0..200 {
        if recorder.calls() >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(recorder.calls(), 1, "the request reached the backend's app");
    let _answering = handle.shutdown().await;
    let (answer, closed) = answer.await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer
            .to_ascii_lowercase()
            .contains("\r\nconnection: close\r\n"),
        "{answer}"
    );
    assert!(closed, "the connection was left open");
}

/// A webhook with a namespaceSelector needs the namespaces' labels: without
/// `--namespaces-file` or `--watch-namespaces`, `serve` reported ready and then rejected every
/// namespaced request. It now refuses to start, naming the webhook and the flags, and a
/// reload that brings such a webhook keeps the last good configuration.
#[test]
fn a_namespace_selector_without_a_namespace_source_is_refused() {
    let ws = Workspace::new("ns-source");
    let selecting = validating(
        "selects.ns.test",
        "{url: \"https://127.0.0.1:9/never\"}",
        ALL,
        "namespaceSelector: {matchLabels: {env: prod}}",
    );
    write_config(&ws, &selecting);
    let out = serve_until_exit(&ws, &ws.key);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("webhooks[0].namespaceSelector")
            && stderr.contains("--namespaces-file or --watch-namespaces"),
        "{stderr}"
    );

    // Started without one, a reload that brings one is refused; the last good serves.
    write_config(&ws, &unreachable_webhook());
    let proxy = BinaryProxy::start(&ws.conf, &ws.cert, &ws.key, &[]);
    write_config(&ws, &selecting);
    assert!(
        proxy.logged("--namespaces-file or --watch-namespaces"),
        "{:?}",
        proxy.logs.lock().unwrap()
    );
    let ready = https_get(&proxy.addr, &ws.pki.ca_pem, None, "/readyz").unwrap();
    assert!(ready.starts_with("HTTP/1.1 200"), "{ready}");
}

/// A caBundle that decodes but holds no certificate (Linkerd's install manifests carry a
/// placeholder) was refused at load; kube-apiserver accepts the configuration and fails each
/// call when it builds the client. `check` now warns, and `serve` fails each call in
/// client-go's words, by failurePolicy.
#[test]
fn a_ca_bundle_without_certificates_loads_and_each_call_fails_by_failure_policy() {
    use base64::Engine;
    let ws = Workspace::new("bad-ca-bundle");
    let placeholder = base64::engine::general_purpose::STANDARD.encode("placeholder");
    let webhook = |name: &str, policy: &str| {
        validating(
            name,
            &format!("{{url: \"https://127.0.0.1:9/never\", caBundle: \"{placeholder}\"}}"),
            ALL,
            &format!("failurePolicy: {policy}"),
        )
    };
    write_config(
        &ws,
        &[
            webhook("ignore.ca.test", "Ignore"),
            webhook("fail.ca.test", "Fail"),
        ]
        .join("---\n"),
    );
    let out = Command::new(BIN)
        .args(["check", "--config"])
        .arg(&ws.conf)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert!(
        report.contains("clientConfig.caBundle")
            && report.contains("unable to parse bytes as PEM block"),
        "{report}"
    );
    let proxy = BinaryProxy::start(&ws.conf, &ws.cert, &ws.key, &[]);
    let client = HttpClient::new();
    let target = proxy.target(&ws.pki);
    let body = crate::common::fixture("0096-create-core-v1-pods-v1.json");
    let post = |name: &'static str| {
        let (client, target, body) = (&client, &target, &body);
        async move {
            client
                .post(target, &format!("/webhooks/{name}?timeout=10s"), body, &[])
                .await
                .unwrap()
        }
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let ignore = rt.block_on(post("ignore.ca.test"));
    assert_eq!(
        ignore.header("x-admission-proxy-decision"),
        Some("failed-open")
    );
    let fail = rt.block_on(post("fail.ca.test"));
    assert_eq!(
        fail.header("x-admission-proxy-decision"),
        Some("failed-closed")
    );
    let text = String::from_utf8_lossy(&fail.body);
    assert!(
        text.contains("could not get REST client: unable to load root certificates: unable to parse bytes as PEM block"),
        "{text}"
    );
}
