//! Test harness: a real proxy server and real example legacy backends on 127.0.0.1 with real
//! TLS (rcgen certificates), configured through webhook configuration text.

pub(crate) mod otlp;
pub(crate) mod sar_api;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::tools::example_backend::{self, Recorder};
use crate::tools::pki::TestPki;
use admission_proxy::admission::Admissions;
use admission_proxy::api::WebhookClientConfig;
use admission_proxy::config::{self, Backend};
use admission_proxy::dispatch::{Dispatcher, HttpClient, HttpReply, Target};
use admission_proxy::matching::Namespaces;
use admission_proxy::server::{self, ServerHandle, State, DECISION_HEADER};
use admission_proxy::tls::{CertResolver, MinVersion};

pub(crate) const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

/// Reads a captured AdmissionReview.
pub(crate) fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(Path::new(FIXTURES).join("admission-reviews").join(name)).expect("fixture exists")
}

/// The fixture index entries.
pub(crate) fn index() -> Vec<serde_json::Value> {
    serde_json::from_slice(
        &std::fs::read(Path::new(FIXTURES).join("admission-reviews/index.json")).unwrap(),
    )
    .unwrap()
}

pub(crate) fn namespaces() -> Namespaces {
    Namespaces::parse(
        &std::fs::read_to_string(Path::new(FIXTURES).join("namespaces.yaml")).unwrap(),
    )
    .unwrap()
}

/// The proxy's TLS configuration as `serve` builds it by default.
pub(crate) fn server_tls(resolver: Arc<CertResolver>) -> Arc<rustls::ServerConfig> {
    Arc::new(admission_proxy::tls::server_config(resolver, MinVersion::Tls12, None).unwrap())
}

/// A running example legacy backend with its own PKI.
pub(crate) struct TestBackend {
    pub url: String,
    pub pki: TestPki,
    pub recorder: Arc<Recorder>,
    /// The backend's listener, kept with it (unread, like `TestProxy::_handle`).
    _handle: Option<ServerHandle>,
}

impl TestBackend {
    pub(crate) fn start() -> Self {
        Self::start_with_pki(TestPki::generate(&["127.0.0.1", "localhost"]).unwrap())
    }

    /// A backend serving `pki`'s certificate (`caBundle`: its CA).
    pub(crate) fn start_with_pki(pki: TestPki) -> Self {
        let resolver = Arc::new(CertResolver::new(pki.certified_key().unwrap()));
        let (handle, recorder) =
            example_backend::start("127.0.0.1:0".parse().unwrap(), Some(resolver)).unwrap();
        TestBackend {
            url: format!("https://{}", handle.local_addr),
            pki,
            recorder,
            _handle: Some(handle),
        }
    }

    /// `clientConfig` YAML (flow style) for `path` on this backend.
    pub(crate) fn client_config(&self, path: &str) -> String {
        format!(
            "{{url: \"{}{}\", caBundle: \"{}\"}}",
            self.url,
            path,
            self.pki.ca_bundle()
        )
    }
}

/// The proxy under test and a client trusting it.
pub(crate) struct TestProxy {
    /// The server's state, for a test that inspects it (none does today).
    #[allow(dead_code)]
    pub state: Arc<State>,
    pub addr: std::net::SocketAddr,
    /// The CA that signed the proxy's serving certificate, PEM.
    pub ca_pem: String,
    client: HttpClient,
    target: Target,
    _handle: ServerHandle,
}

/// An answer from the proxy.
pub(crate) struct Reply {
    pub status: u16,
    pub decision: String,
    pub body: Vec<u8>,
    pub json: serde_json::Value,
    pub headers: http::HeaderMap,
}

impl Reply {
    pub(crate) fn from(r: HttpReply) -> Self {
        let decision = r.header(DECISION_HEADER).unwrap_or_default().to_string();
        Reply {
            status: r.status,
            decision,
            json: serde_json::from_slice(&r.body).unwrap_or(serde_json::Value::Null),
            body: r.body.to_vec(),
            headers: r.headers,
        }
    }

    pub(crate) fn allowed(&self) -> bool {
        self.json
            .pointer("/response/allowed")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false)
    }

    /// The proxy's decision and the denial's `status.code`.
    pub(crate) fn outcome(&self) -> (&str, Option<i64>) {
        (
            self.decision.as_str(),
            self.json
                .pointer("/response/status/code")
                .and_then(serde_json::Value::as_i64),
        )
    }

    pub(crate) fn message(&self) -> String {
        self.json
            .pointer("/response/status/message")
            .or_else(|| self.json.get("message"))
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string()
    }
}

impl TestProxy {
    /// Starts a proxy serving `config_yaml` (one or more documents).
    pub(crate) fn start(config_yaml: &str) -> Self {
        Self::start_with(
            config_yaml,
            Some(namespaces()),
            server::DEFAULT_MAX_BODY_BYTES,
        )
    }

    pub(crate) fn start_with(
        config_yaml: &str,
        namespaces: Option<Namespaces>,
        max_body: usize,
    ) -> Self {
        Self::start_limited(config_yaml, namespaces, max_body, server::Limits::default())
    }

    /// [`TestProxy::start_with`] with the listener's `limits`.
    pub(crate) fn start_limited(
        config_yaml: &str,
        namespaces: Option<Namespaces>,
        max_body: usize,
        limits: server::Limits,
    ) -> Self {
        Self::start_full(
            config_yaml,
            namespaces,
            max_body,
            limits,
            Dispatcher::new(Duration::from_millis(250)),
        )
    }

    /// A proxy serving `config_yaml` with `dispatcher` (breakers, timeout caps).
    pub(crate) fn start_dispatching(config_yaml: &str, dispatcher: Dispatcher) -> Self {
        Self::start_full(
            config_yaml,
            Some(namespaces()),
            server::DEFAULT_MAX_BODY_BYTES,
            server::Limits::default(),
            dispatcher,
        )
    }

    fn start_full(
        config_yaml: &str,
        namespaces: Option<Namespaces>,
        max_body: usize,
        limits: server::Limits,
        dispatcher: Dispatcher,
    ) -> Self {
        let snapshot =
            config::load_contents(&[(PathBuf::from("test.yaml"), config_yaml.to_string())])
                .unwrap_or_else(|e| panic!("{e}"));
        let pki = TestPki::generate(&["127.0.0.1"]).unwrap();
        let resolver = Arc::new(CertResolver::new(pki.certified_key().unwrap()));
        let state = Arc::new(State::new(
            Admissions::new(snapshot, namespaces, dispatcher).unwrap(),
            max_body,
            limits,
            None,
        ));
        let handle = server::serve_admission(
            "127.0.0.1:0".parse().unwrap(),
            server_tls(resolver),
            state.clone(),
        )
        .unwrap();
        let addr = handle.local_addr;
        let backend = Backend::from_client_config(&WebhookClientConfig {
            url: Some(format!("https://{addr}/")),
            ca_bundle: Some(pki.ca_bundle()),
            service: None,
        })
        .unwrap();
        TestProxy {
            state,
            addr,
            ca_pem: pki.ca_pem.clone(),
            client: HttpClient::new(),
            target: Target::new(&backend),
            _handle: handle,
        }
    }

    /// POSTs `body` to `/webhooks/{webhook}?timeout=10s`.
    pub(crate) async fn review(&self, webhook: &str, body: &[u8]) -> Reply {
        self.post(&format!("/webhooks/{webhook}?timeout=10s"), body)
            .await
    }

    /// The proxy's decision (`x-admission-proxy-decision`) for `body` sent to `webhook`.
    pub(crate) async fn decision(&self, webhook: &str, body: &[u8]) -> String {
        self.review(webhook, body).await.decision
    }

    pub(crate) async fn post(&self, path_and_query: &str, body: &[u8]) -> Reply {
        Reply::from(
            self.client
                .post(&self.target, path_and_query, body, &[])
                .await
                .expect("the proxy answers"),
        )
    }
}

/// A v1 ValidatingWebhookConfiguration with one webhook; `extra` is added to the webhook (YAML,
/// two-space indented under the list item).
pub(crate) fn validating(name: &str, client_config: &str, rules: &str, extra: &str) -> String {
    webhook_config(
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
        name,
        client_config,
        rules,
        &format!("sideEffects: None\n  admissionReviewVersions: [v1]\n  {extra}"),
    )
}

pub(crate) fn webhook_config(
    api_version: &str,
    kind: &str,
    name: &str,
    client_config: &str,
    rules: &str,
    extra: &str,
) -> String {
    format!(
        "apiVersion: {api_version}\nkind: {kind}\nmetadata: {{name: cfg-{}}}\nwebhooks:\n- name: {name}\n  clientConfig: {client_config}\n  rules: {rules}\n  {extra}\n",
        name.replace('.', "-")
    )
}

/// Rules matching everything.
pub(crate) const ALL: &str =
    r#"[{operations: ["*"], apiGroups: ["*"], apiVersions: ["*"], resources: ["*/*"]}]"#;

/// Replaces `request.uid` and makes a minimal review for `resource`.
pub(crate) fn review_json(
    version: &str,
    op: &str,
    resource: &str,
    namespace: &str,
    object: serde_json::Value,
    old: serde_json::Value,
    dry_run: bool,
) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "kind": "AdmissionReview",
        "apiVersion": format!("admission.k8s.io/{version}"),
        "request": {
            "uid": "11111111-2222-3333-4444-555555555555",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": resource},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": resource},
            "name": "p", "namespace": namespace, "operation": op,
            "userInfo": {"username": "jane", "groups": ["devs"]},
            "object": object, "oldObject": old, "dryRun": dry_run, "options": null
        }
    }))
    .unwrap()
}

/// A v1 AdmissionReview of a Pod `p` CREATE in `namespace`, with `labels`.
pub(crate) fn pod_create(namespace: &str, labels: serde_json::Value) -> Vec<u8> {
    review_json(
        "v1",
        "CREATE",
        "pods",
        namespace,
        serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": labels}}),
        serde_json::Value::Null,
        false,
    )
}

/// The real `admission-proxy serve` binary, its JSON log lines collected.
pub(crate) struct BinaryProxy {
    pub child: std::process::Child,
    pub logs: Arc<std::sync::Mutex<Vec<String>>>,
    pub addr: String,
    /// The thread reading stderr into `logs`; it ends when the process has.
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Drop for BinaryProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl BinaryProxy {
    /// Starts `serve` on 127.0.0.1:0 with `config`, the serving pair and `extra` arguments;
    /// waits (at most 20 s) for the address it logs.
    pub(crate) fn start(config: &Path, cert: &Path, key: &Path, extra: &[&str]) -> Self {
        Self::start_with_env(config, cert, key, extra, &[])
    }

    /// [`BinaryProxy::start`] with these environment variables set.
    pub(crate) fn start_with_env(
        config: &Path,
        cert: &Path,
        key: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        Self::spawn(config, cert, key, extra, env, true)
    }

    /// [`BinaryProxy::start`] with text log lines (no `--log-json`), as a terminal shows them.
    pub(crate) fn start_text_logs(config: &Path, cert: &Path, key: &Path, extra: &[&str]) -> Self {
        Self::spawn(config, cert, key, extra, &[], false)
    }

    fn spawn(
        config: &Path,
        cert: &Path,
        key: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
        json: bool,
    ) -> Self {
        use std::io::{BufRead, BufReader};
        use std::process::{Command, Stdio};
        let mut child = Command::new(env!("CARGO_BIN_EXE_admission-proxy"))
            .envs(env.iter().copied())
            .args(json.then_some("--log-json"))
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--resync-seconds",
                "60",
                "--config",
            ])
            .arg(config)
            .arg("--tls-cert-file")
            .arg(cert)
            .arg("--tls-private-key-file")
            .arg(key)
            .args(extra)
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("start admission-proxy");
        let logs = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        let sink = logs.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("admission-proxy listening") {
                    let address = if json {
                        let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
                        v["fields"]["address"].as_str().unwrap_or("").to_string()
                    } else {
                        // `... admission-proxy listening address=127.0.0.1:PORT version=...`
                        line.split_whitespace()
                            .find_map(|w| w.strip_prefix("address="))
                            .unwrap_or("")
                            .to_string()
                    };
                    let _ = tx.send(address);
                }
                sink.lock().unwrap().push(line);
            }
        });
        let Ok(addr) = rx.recv_timeout(Duration::from_secs(20)) else {
            // Not left running after the test.
            let _ = child.kill();
            let _ = child.wait();
            panic!("the proxy logs its address: {:?}", logs.lock().unwrap());
        };
        BinaryProxy {
            child,
            logs,
            addr,
            reader: Some(reader),
        }
    }

    /// Kills the process and returns every line it wrote to stderr (all of them: the reader
    /// has seen the end of the stream).
    pub(crate) fn stop(mut self) -> Vec<String> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        std::mem::take(&mut *self.logs.lock().unwrap())
    }

    /// Where to send requests to this proxy, trusting `pki`.
    pub(crate) fn target(&self, pki: &TestPki) -> Target {
        let backend = Backend::from_client_config(&WebhookClientConfig {
            url: Some(format!("https://{}/", self.addr)),
            ca_bundle: Some(pki.ca_bundle()),
            service: None,
        })
        .unwrap();
        Target::new(&backend)
    }

    /// Whether a log line containing `needle` was written, waiting at most 3 s.
    /// POSTs `body` to `path_and_query` on this proxy, trusting `pki`'s CA.
    pub(crate) async fn post(&self, pki: &TestPki, path_and_query: &str, body: &[u8]) -> Reply {
        let reply = HttpClient::new()
            .post(&self.target(pki), path_and_query, body, &[])
            .await
            .expect("the proxy answers");
        Reply::from(reply)
    }

    /// The proxy's `/metrics` text.
    pub(crate) fn scrape(&self, pki: &TestPki) -> String {
        https_get(&self.addr, &pki.ca_pem, None, "/metrics").unwrap()
    }

    /// `/metrics` once `ready` holds for it, scraped at most 60 times 50 ms apart (the proxy
    /// applies a change on disk after its file event); the last scrape either way.
    pub(crate) fn scrape_until(&self, pki: &TestPki, ready: impl Fn(&str) -> bool) -> String {
        let mut last = String::new();
        for _ in 0..60 {
            last = self.scrape(pki);
            if ready(&last) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        last
    }

    pub(crate) fn logged(&self, needle: &str) -> bool {
        for _ in 0..60 {
            if self.logs.lock().unwrap().iter().any(|l| l.contains(needle)) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }
}

/// A fresh directory with `config/` and a serving certificate pair for 127.0.0.1.
pub(crate) struct Workspace {
    pub dir: PathBuf,
    pub conf: PathBuf,
    pub pki: TestPki,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Workspace {
    pub(crate) fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("admission-proxy-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let conf = dir.join("config");
        std::fs::create_dir_all(&conf).unwrap();
        let pki = TestPki::generate(&["127.0.0.1"]).unwrap();
        let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
        std::fs::write(&cert, &pki.cert_pem).unwrap();
        std::fs::write(&key, &pki.key_pem).unwrap();
        Workspace {
            dir,
            conf,
            pki,
            cert,
            key,
        }
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `GET path` over TLS trusting `ca_pem`, presenting `client` (cert PEM, key PEM) when given,
/// with the blocking rustls client; the raw HTTP answer, or the TLS/IO error.
pub(crate) fn https_get(
    addr: &str,
    ca_pem: &str,
    client: Option<&(String, String)>,
    path: &str,
) -> Result<String, String> {
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut ca_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots);
    let config = match client {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                rustls_pemfile::certs(&mut cert.as_bytes())
                    .map(Result::unwrap)
                    .collect(),
                rustls_pemfile::private_key(&mut key.as_bytes())
                    .unwrap()
                    .unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    let conn =
        rustls::ClientConnection::new(Arc::new(config), "127.0.0.1".try_into().unwrap()).unwrap();
    let tcp = std::net::TcpStream::connect(addr).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    std::io::Write::write_all(&mut tls, request.as_bytes()).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    match std::io::Read::read_to_end(&mut tls, &mut out) {
        Ok(_) => Ok(String::from_utf8_lossy(&out).into_owned()),
        // Closed without close_notify after a complete answer is still an answer.
        Err(_) if !out.is_empty() => Ok(String::from_utf8_lossy(&out).into_owned()),
        Err(e) => Err(e.to_string()),
    }
}

/// A blocking TLS connection to `addr` trusting `ca_pem` (handshake done), reads bounded by
/// `read_timeout`.
pub(crate) fn tls_connect(
    addr: std::net::SocketAddr,
    ca_pem: &str,
    read_timeout: Duration,
) -> std::io::Result<rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream>> {
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut ca_pem.as_bytes()) {
        roots.add(c?).map_err(std::io::Error::other)?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(std::io::Error::other)?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let conn = rustls::ClientConnection::new(Arc::new(config), "127.0.0.1".try_into().unwrap())
        .map_err(std::io::Error::other)?;
    let tcp = std::net::TcpStream::connect(addr)?;
    tcp.set_read_timeout(Some(read_timeout))?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    while tls.conn.is_handshaking() {
        tls.conn.complete_io(&mut tls.sock)?;
    }
    Ok(tls)
}

/// A rustls server configuration serving `pki`'s certificate, no client certificate asked
/// for: the hand-written backends' TLS (rustls' own server, not the proxy's).
pub(crate) fn plain_tls_server(pki: &TestPki) -> Arc<rustls::ServerConfig> {
    Arc::new(
        rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            rustls_pemfile::certs(&mut pki.cert_pem.as_bytes())
                .map(Result::unwrap)
                .collect(),
            rustls_pemfile::private_key(&mut pki.key_pem.as_bytes())
                .unwrap()
                .unwrap(),
        )
        .unwrap(),
    )
}

/// Waits (at most 2 s, in 10 ms steps) until `backend` has received `n` requests.
pub(crate) async fn wait_for_calls(backend: &TestBackend, n: u64) {
    for _ in 0..200 {
        if backend.recorder.calls() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Reads one HTTP/1.1 request: its head (request line and header lines) and its Content-Length
/// body; `None` at end of stream.
pub(crate) fn read_request(tls: &mut impl std::io::Read) -> Option<(String, Vec<u8>)> {
    use std::io::{BufRead, Read};
    let mut reader = std::io::BufReader::new(tls);
    let mut length = 0usize;
    let mut first = true;
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if first && line.trim().is_empty() {
            continue;
        }
        first = false;
        if line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().ok()?;
        }
        head.push_str(&line);
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).ok()?;
    Some((head, body))
}

/// [`read_request`] for the async stand-in API servers: the request line and the body (by
/// Content-Length, or chunked); `None` when the connection ends first.
pub(crate) async fn read_request_async(
    read: &mut (impl tokio::io::AsyncBufRead + Unpin),
) -> Option<(String, Vec<u8>)> {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt};
    let mut request_line = String::new();
    if read.read_line(&mut request_line).await.ok()? == 0 {
        return None;
    }
    let (mut length, mut chunked) = (0usize, false);
    loop {
        let mut header = String::new();
        if read.read_line(&mut header).await.ok()? == 0 {
            return None;
        }
        if header == "\r\n" {
            break;
        }
        let (name, value) = header.split_once(':').unwrap_or((&header, ""));
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = value.parse().unwrap_or(0);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.eq_ignore_ascii_case("chunked");
        }
    }
    let mut body = Vec::new();
    if !chunked {
        body.resize(length, 0);
        read.read_exact(&mut body).await.ok()?;
        return Some((request_line, body));
    }
    loop {
        let mut size = String::new();
        if read.read_line(&mut size).await.ok()? == 0 {
            return None;
        }
        let size = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
        let mut chunk = vec![0; size + 2];
        read.read_exact(&mut chunk).await.ok()?;
        if size == 0 {
            return Some((request_line, body));
        }
        body.extend_from_slice(&chunk[..size]);
    }
}

/// The value of the series of `family` in `/metrics` text carrying every `labels` pair, if
/// exported.
pub(crate) fn metric_value(metrics: &str, family: &str, labels: &[(&str, &str)]) -> Option<f64> {
    metrics
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(family) && l[family.len()..].starts_with(['{', ' ']))
        .find(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// A loopback port that refuses connections for as long as this lives: bound and never
/// listening, so that no other process can take it meanwhile (a port bound and released can
/// be, and then answers with its own certificate).
pub(crate) struct RefusingPort {
    pub(crate) addr: std::net::SocketAddr,
    _socket: socket2::Socket,
}

pub(crate) fn refusing_port() -> RefusingPort {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let any: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
    socket.bind(&any.into()).unwrap();
    let addr = socket.local_addr().unwrap().as_socket().unwrap();
    RefusingPort {
        addr,
        _socket: socket,
    }
}

/// A loopback port nothing listens on (bound, then released): a backend that is down, or one
/// that starts there later.
pub(crate) fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The sum of `admission_proxy_candidate_comparisons_total` for `candidate`, by result.
pub(crate) fn comparisons(metrics: &str, candidate: &str) -> Vec<(String, f64)> {
    metrics
        .lines()
        .filter(|l| l.starts_with("admission_proxy_candidate_comparisons_total{"))
        .filter(|l| l.contains(&format!("candidate=\"{candidate}\"")))
        .filter_map(|l| {
            let result = l.split("result=\"").nth(1)?.split('"').next()?.to_string();
            Some((result, l.rsplit(' ').next()?.parse().ok()?))
        })
        .collect()
}

/// Waits (bounded) until `candidate` has `n` comparisons; returns the scrape.
pub(crate) fn scrape_when_compared(
    proxy: &BinaryProxy,
    pki: &TestPki,
    candidate: &str,
    n: f64,
) -> String {
    for _ in 0..1500 {
        let metrics = proxy.scrape(pki);
        let total: f64 = comparisons(&metrics, candidate)
            .iter()
            .map(|(_, v)| v)
            .sum();
        if total >= n {
            return metrics;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("the candidate never compared {n} requests");
}

/// A scratch directory under the system's temporary directory, removed when dropped (tests
/// left theirs behind, one per run).
pub(crate) struct Scratch(PathBuf);

impl Scratch {
    /// `admission-proxy-<name>-<pid>`, emptied first.
    pub(crate) fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("admission-proxy-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
