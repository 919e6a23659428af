//! `admission-proxy demo`: the real serve path on 127.0.0.1 with the bundled `config/`, the
//! example legacy backend, and real AdmissionReviews replayed over TLS, one line per request.
//! Uses the library's `config`, `dispatch`, `server`, `tls`, `matching`, and the binary's
//! `example_backend` and `pki`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::pki::TestPki;
use admission_proxy::admission::Admissions;
use admission_proxy::api::{WebhookClientConfig, WebhookType};
use admission_proxy::config::{self, Backend};
use admission_proxy::decision::Decision;
use admission_proxy::dispatch::{Dispatcher, HttpClient, Target};
use admission_proxy::matching::Namespaces;
use admission_proxy::server::{self, State, DECISION_HEADER};
use admission_proxy::tls::CertResolver;

/// The real captures the demo replays by default: validating ones to every validating webhook,
/// mutating ones to every mutating webhook.
pub(crate) const DEMO_REVIEWS: [&str; 11] = [
    "0003-create-core-v1-namespaces-v1.json",
    "0724-delete-core-v1-namespaces-v1.json",
    "0039-create-core-v1-serviceaccounts-v1.json",
    "0069-create-core-v1-services-v1.json",
    "0096-create-core-v1-pods-v1.json",
    "0162-create-core-v1-persistentvolumeclaims-v1.json",
    "0471-create-apiregistration.k8s.io-v1-apiservices-v1.json",
    "0012-create-core-v1-namespaces-v1beta1.json",
    "0037-create-core-v1-serviceaccounts-v1.json",
    "0064-create-apps-v1-deployments-v1.json",
    "0001-create-core-v1-namespaces-v1.json",
];

/// Demo settings.
pub(crate) struct DemoOptions {
    pub(crate) config: PathBuf,
    pub(crate) reviews: PathBuf,
    pub(crate) namespaces_file: Option<PathBuf>,
    /// Where the example backend listens; URLs naming [`BUNDLED_BACKEND`] are pointed there.
    pub(crate) backend_addr: SocketAddr,
    /// Replay every review in `reviews` instead of [`DEMO_REVIEWS`].
    pub(crate) all: bool,
}

/// Why the demo could not run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DemoError {
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    #[error("{context}: {error}")]
    Io {
        context: String,
        error: std::io::Error,
    },
    #[error("{0}")]
    Setup(String),
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> DemoError {
    let context = context.into();
    move |error| DemoError::Io { context, error }
}

/// Counts per decision.
pub(crate) type Summary = BTreeMap<String, usize>;

/// The example backend's address in the bundled config.
pub(crate) const BUNDLED_BACKEND: &str = "127.0.0.1:18443";

/// Copies the config into `dir`, adding `ca_bundle` to every webhook whose URL has none (the
/// bundled files name an https backend whose CA is only made at demo time), and pointing URLs
/// at [`BUNDLED_BACKEND`] to where the example backend really listens.
fn config_with_ca(
    src: &Path,
    dir: &Path,
    ca_bundle: &str,
    backend: SocketAddr,
) -> Result<PathBuf, DemoError> {
    std::fs::create_dir_all(dir).map_err(io(format!("create {}", dir.display())))?;
    for (i, file) in config::config_files(src)?.iter().enumerate() {
        let text = std::fs::read_to_string(file).map_err(io(format!("read {}", file.display())))?;
        let docs: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&text)
            .map(|d| {
                serde::Deserialize::deserialize(d).map_err(|e: serde_yaml_ng::Error| {
                    DemoError::Setup(format!("{}: {e}", file.display()))
                })
            })
            .collect::<Result<_, _>>()?;
        for (j, mut doc) in docs.into_iter().enumerate() {
            // A candidate's backend holds a clientConfig too.
            let holders: Vec<&mut Value> = match doc.get("kind").and_then(Value::as_str) {
                Some("Candidate") => doc.pointer_mut("/spec/backend").into_iter().collect(),
                _ => doc
                    .get_mut("webhooks")
                    .and_then(Value::as_array_mut)
                    .into_iter()
                    .flatten()
                    .collect(),
            };
            for hook in holders {
                if let Some(cc) = hook.get_mut("clientConfig").and_then(Value::as_object_mut) {
                    cc.entry("caBundle")
                        .or_insert_with(|| Value::String(ca_bundle.to_string()));
                    if let Some(Value::String(url)) = cc.get_mut("url") {
                        *url = url.replacen(BUNDLED_BACKEND, &backend.to_string(), 1);
                    }
                }
            }
            let out = dir.join(format!("{i:02}-{j:02}.json"));
            std::fs::write(&out, doc.to_string())
                .map_err(io(format!("write {}", out.display())))?;
        }
    }
    Ok(dir.to_path_buf())
}

/// Runs the demo, printing to stdout; returns the count of each decision.
///
/// # Errors
/// [`DemoError`] when the config does not load, a port is taken, or a review cannot be read.
pub(crate) async fn run(opts: DemoOptions) -> Result<Summary, DemoError> {
    let demo = Running::start(&opts)?;
    let files = review_files(&opts)?;
    let index = read_index(&opts.reviews);
    let mut summary = Summary::new();
    let mut compared = 0;
    let started = Instant::now();
    for file in &files {
        let body = std::fs::read(file).map_err(io(format!("read {}", file.display())))?;
        let name = file
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string();
        let wanted = match index.get(&name).map(String::as_str) {
            Some("mutating") => WebhookType::Mutating,
            _ => WebhookType::Validating,
        };
        let (user, version, object_version) = describe(&body);
        for webhook in demo.webhooks.iter().filter(|w| w.webhook_type == wanted) {
            let t0 = Instant::now();
            let (decision, what) = demo.admit(webhook, &body, &version, &object_version).await;
            let latency = t0.elapsed();
            if Decision::from_label(&decision).is_some_and(Decision::called) {
                compared += webhook.candidates().len();
            }
            *summary.entry(decision.clone()).or_default() += 1;
            println!(
                "{name:<62} {user:<18} → {:<36} {decision:<16} {:>8.2} ms  {what}",
                webhook.name,
                latency.as_secs_f64() * 1000.0
            );
        }
    }
    println!(
        "\nsummary ({} requests in {:.1} s):",
        summary.values().sum::<usize>(),
        started.elapsed().as_secs_f64()
    );
    for (decision, count) in &summary {
        println!("  {decision:<18} {count}");
    }
    if let Some(metrics) = &demo.metrics {
        candidate_summary(metrics, compared).await;
    }
    demo.proxy.shutdown().await;
    demo.backend.shutdown().await;
    Ok(summary)
}

/// The demo's proxy and example legacy backend, running, and a client of the proxy.
struct Running {
    backend: server::ServerHandle,
    recorder: Arc<super::example_backend::Recorder>,
    proxy: server::ServerHandle,
    /// The loaded webhooks, validating first, by name.
    webhooks: Vec<Arc<config::Webhook>>,
    /// The metrics recorder, when this process had none installed.
    metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
    client: HttpClient,
    target: Target,
}

impl Running {
    /// Starts the example backend and the proxy (the bundled configuration pointed at the
    /// backend, trusting a fresh test CA), and prints what runs where.
    fn start(opts: &DemoOptions) -> Result<Self, DemoError> {
        let pki = TestPki::generate(&["127.0.0.1", "localhost"])
            .map_err(|e| DemoError::Setup(e.to_string()))?;
        let resolver = Arc::new(CertResolver::new(
            pki.certified_key()
                .map_err(|e| DemoError::Setup(e.to_string()))?,
        ));
        let (backend, recorder) =
            super::example_backend::start(opts.backend_addr, Some(resolver.clone())).map_err(
                io(format!(
                    "start the example legacy backend on {} (the port the bundled config names)",
                    opts.backend_addr
                )),
            )?;
        let tmp = std::env::temp_dir().join(format!("admission-proxy-demo-{}", std::process::id()));
        let config_dir = config_with_ca(&opts.config, &tmp, &pki.ca_bundle(), backend.local_addr)?;
        let snapshot = config::load(&config_dir)?;
        let _ = std::fs::remove_dir_all(&tmp);
        let namespaces = opts
            .namespaces_file
            .as_deref()
            .map(Namespaces::load)
            .transpose()
            .map_err(|e| DemoError::Setup(e.to_string()))?;
        for w in &snapshot.warnings {
            println!("config warning: {w}");
        }
        let mut webhooks: Vec<_> = snapshot.webhooks().cloned().collect();
        webhooks
            .sort_by(|a, b| (a.webhook_type as u8, &a.name).cmp(&(b.webhook_type as u8, &b.name)));
        // Candidates are counted in the metrics; the summary reads them back (None when a
        // recorder is already installed in this process: no candidate summary then).
        let metrics = admission_proxy::metrics::install(env!("CARGO_PKG_VERSION"), "demo");
        let state = Arc::new(State::new(
            Admissions::new(
                snapshot,
                namespaces,
                Dispatcher::new(Duration::from_millis(250)),
            )
            .map_err(io("start the background lane"))?,
            server::DEFAULT_MAX_BODY_BYTES,
            server::Limits::default(),
            None,
        ));
        let tls = admission_proxy::tls::server_config(
            resolver,
            admission_proxy::tls::MinVersion::Tls12,
            None,
        )
        .map_err(|e| DemoError::Setup(e.to_string()))?;
        let proxy = server::serve_admission(
            "127.0.0.1:0".parse().expect("literal address"),
            Arc::new(tls),
            state,
        )
        .map_err(io("start the proxy"))?;
        println!(
            "admission-proxy listening on https://{} ; example legacy backend on https://{}",
            proxy.local_addr, backend.local_addr
        );
        println!(
            "{} webhooks loaded from {}\n",
            webhooks.len(),
            opts.config.display()
        );
        let target = Target::new(
            &Backend::from_client_config(&WebhookClientConfig {
                url: Some(format!("https://{}/", proxy.local_addr)),
                ca_bundle: Some(pki.ca_bundle()),
                service: None,
            })
            .map_err(|e| DemoError::Setup(e.to_string()))?,
        );
        Ok(Running {
            backend,
            recorder,
            proxy,
            webhooks,
            metrics,
            client: HttpClient::new(),
            target,
        })
    }

    /// Sends `body` (an AdmissionReview of `version`, its object of `object_version`) to
    /// `webhook`'s route: the decision the proxy's header gives, and a summary of the answer.
    async fn admit(
        &self,
        webhook: &config::Webhook,
        body: &[u8],
        version: &str,
        object_version: &str,
    ) -> (String, String) {
        let calls_before = self.recorder.calls();
        let result = self
            .client
            .post(
                &self.target,
                &format!("/webhooks/{}?timeout=10s", webhook.name),
                body,
                &[],
            )
            .await;
        let reply = match result {
            Ok(reply) => reply,
            Err(e) => return ("error".to_string(), e.to_string()),
        };
        let decision = reply.header(DECISION_HEADER).unwrap_or("?").to_string();
        let backend = if decision == "skipped" {
            ""
        } else {
            webhook
                .review_version
                .map(admission_proxy::review::ReviewVersion::as_str)
                .unwrap_or("?")
        };
        let mut what = summarize(&reply.status, &reply.body, backend, version);
        // matchPolicy Equivalent: say when the backend saw another version. A skipped webhook
        // called nothing: a call counted meanwhile is another admission's, after its answer
        // (Shadow, candidates).
        if decision != "skipped" && self.recorder.calls() > calls_before {
            if let Some(seen) = self
                .recorder
                .last()
                .and_then(|(_, b)| object_api_version(&serde_json::from_slice(&b).ok()?))
            {
                if seen != object_version {
                    what.push_str(&format!("; object {object_version} → {seen}"));
                }
            }
        }
        (decision, what)
    }
}

/// The reviews to replay: every `*.json` in `opts.reviews` but `index.json` (`--all`), else
/// [`DEMO_REVIEWS`].
fn review_files(opts: &DemoOptions) -> Result<Vec<PathBuf>, DemoError> {
    if !opts.all {
        return Ok(DEMO_REVIEWS.iter().map(|f| opts.reviews.join(f)).collect());
    }
    let mut all: Vec<PathBuf> = std::fs::read_dir(&opts.reviews)
        .map_err(io(format!("read {}", opts.reviews.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json") && !p.ends_with("index.json"))
        .collect();
    all.sort();
    Ok(all)
}

/// Waits (bounded: 250 x 20 ms) for the candidates' `compared` comparisons in the background,
/// then prints their report (`admission-proxy candidates`).
async fn candidate_summary(
    metrics: &metrics_exporter_prometheus::PrometheusHandle,
    compared: usize,
) {
    use admission_proxy::tools::candidate_report::{render, report};
    let mut reports = Vec::new();
    for _ in 0..250 {
        reports = report(&metrics.render(), &[]).unwrap_or_default();
        let done: u64 = reports.iter().flat_map(|r| r.results.values()).sum();
        if done as usize >= compared {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if !reports.is_empty() {
        println!("\ncandidates (decided in the background beside their legacy webhooks):");
        for line in render(&reports).lines() {
            println!("  {line}");
        }
    }
}

fn read_index(dir: &Path) -> BTreeMap<String, String> {
    let Ok(text) = std::fs::read_to_string(dir.join("index.json")) else {
        return BTreeMap::new();
    };
    let entries: Vec<Value> = serde_json::from_str(&text).unwrap_or_default();
    entries
        .iter()
        .filter_map(|e| {
            Some((
                e.get("file")?.as_str()?.to_string(),
                e.get("webhookType")?.as_str()?.to_string(),
            ))
        })
        .collect()
}

/// `request.object.apiVersion` of an AdmissionReview (any version).
fn object_api_version(review: &Value) -> Option<String> {
    Some(
        review
            .pointer("/request/object/apiVersion")?
            .as_str()?
            .to_string(),
    )
}

/// `(username, AdmissionReview version, object apiVersion)` of a captured review.
fn describe(body: &[u8]) -> (String, String, String) {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let user = v
        .pointer("/request/userInfo/username")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let version = v
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim_start_matches("admission.k8s.io/")
        .to_string();
    (user, version, object_api_version(&v).unwrap_or_default())
}

fn summarize(status: &u16, body: &[u8], backend_version: &str, caller_version: &str) -> String {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    if *status != 200 {
        return format!(
            "HTTP {status}: {}",
            v.get("message").and_then(Value::as_str).unwrap_or("")
        );
    }
    let r = v.get("response").cloned().unwrap_or(Value::Null);
    let mut parts = vec![format!("review {caller_version}")];
    if !backend_version.is_empty() && backend_version != caller_version {
        parts.push(format!("backend speaks {backend_version}"));
    }
    if let Some(m) = r.pointer("/status/message").and_then(Value::as_str) {
        parts.push(format!("\"{m}\""));
    }
    if r.get("patch").is_some() {
        parts.push("patched".into());
    }
    if let Some(w) = r
        .get("warnings")
        .and_then(Value::as_array)
        .and_then(|w| w.first())
        .and_then(Value::as_str)
    {
        parts.push(format!(
            "warning: {}",
            w.chars().take(90).collect::<String>()
        ));
    }
    parts.join("; ")
}
