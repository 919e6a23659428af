//! `admission-proxy serve` as one library call: [`ServeConfig`], plain data (what the command
//! line gives), and [`run`], which builds the server state from it (webhook configuration,
//! namespaces, serving certificate and client CA, metrics, spans, captures, the namespace
//! watch), starts the admission and observation listeners and the reload watcher, serves until
//! SIGTERM or SIGINT, then drains. Uses `config`, `matching`, `dispatch`, `server`, `reload`,
//! `namespace_watch`, `tls`, `metrics`, `memory`, `telemetry`, `capture` and `redact`; nothing
//! uses it but the binary.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;

use crate::admission::{Admissions, Parts};
use crate::authorizer::{CacheTtl, SubjectAccessReviews};
use crate::capture::{Capture, CaptureSettings};
use crate::config::{self, options::Mode, ConfigError, Snapshot};
use crate::dispatch::breaker::BreakerSettings;
use crate::dispatch::Dispatcher;
use crate::exclusions::{ExclusionSettings, Exclusions, ExclusionsError};
use crate::kube_client::{self, ClientError};
use crate::kube_version::KubeVersion;
use crate::matching::namespaces::NamespacesError;
use crate::matching::Namespaces;
use crate::namespace_watch::NamespaceWatch;
use crate::redact::RedactPath;
use crate::reload::{self, ReloadHandle};
use crate::server::{self, Limits, Observations, ServerHandle, State};
use crate::telemetry::{SpanSettings, Spans, TelemetryError};
use crate::tls::{self, CertResolver, ClientAuth, MinVersion, TlsError};

/// The crate version and the git commit it was built from (build.rs): `--version`, and the
/// "listening" log line.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("ADMISSION_PROXY_GIT_COMMIT"),
    ")"
);

/// How long the shutdown waits, after the last admission was answered, for the answers to be
/// written.
const ANSWERS_WRITTEN: Duration = Duration::from_secs(2);

/// How long the shutdown waits for the last spans to be exported (`otlp`).
const SPANS_FLUSHED: Duration = Duration::from_secs(2);

/// Everything `serve` needs, as plain data; each field is the `serve` flag of the same name
/// (docs/reference/configuration.md, "Proxy options").
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// Directory (or file) of ValidatingWebhookConfiguration / MutatingWebhookConfiguration
    /// YAML or JSON; watched and hot-reloaded.
    pub config: PathBuf,
    /// The admission (HTTPS) listener's address; port 0 picks a free port (logged).
    pub listen: SocketAddr,
    /// Plain-HTTP listener for `/livez`, `/healthz` and `/readyz`; `None` for none.
    pub health_probe_address: Option<SocketAddr>,
    /// Plain-HTTP listener for `/metrics`; `None` for none. The same address (not port 0) as
    /// `health_probe_address` serves both on one listener.
    pub metrics_address: Option<SocketAddr>,
    /// PEM certificate chain served to kube-apiserver; watched and reloaded with its key.
    pub tls_cert_file: PathBuf,
    /// PEM private key of `tls_cert_file`.
    pub tls_private_key_file: PathBuf,
    /// Lowest TLS version accepted from clients.
    pub tls_min_version: MinVersion,
    /// PEM CA certificate(s) a client certificate must be issued by; watched. `None`: no
    /// client certificate is asked for.
    pub client_ca_file: Option<PathBuf>,
    /// Subject CNs a client certificate may have; empty for any (needs `client_ca_file`).
    pub client_cns: Vec<String>,
    /// Namespaces file (`kubectl get namespaces -o yaml`) for namespaceSelector and
    /// `namespaceObject`; watched.
    pub namespaces_file: Option<PathBuf>,
    /// Namespaces from a live watch of the cluster's Namespaces instead.
    pub watch_namespaces: bool,
    /// matchConditions' `authorizer` checks answered by SubjectAccessReview, cached this long;
    /// `None`: configurations that use `authorizer` are refused.
    pub authorizer: Option<CacheTtl>,
    /// Kubeconfig for `watch_namespaces` and `authorizer` (`None`: KUBECONFIG,
    /// ~/.kube/config, then the pod's service account).
    pub kubeconfig: Option<PathBuf>,
    /// The cluster's Kubernetes version: what its kube-apiserver sends and how it charges
    /// (the virtual-resource exclusions, the CEL cost model); never what the proxy itself
    /// evaluates. `None`: asked of the cluster's `/version` when `kubeconfig` is given, else
    /// the current releases' behaviour.
    pub kube_version: Option<KubeVersion>,
    /// Largest accepted AdmissionReview body, bytes.
    pub max_body_bytes: usize,
    /// Kept back from kube-apiserver's `?timeout=` so that the proxy answers first.
    pub timeout_margin: Duration,
    /// What each CRD conversion webhook call may take (at most kube-apiserver's 30 s).
    pub conversion_webhook_timeout: Duration,
    /// Bound on every webhook call, below its timeoutSeconds; `None` for none.
    pub max_timeout: Option<Duration>,
    /// Per-backend circuit breakers; `None` for none.
    pub breaker: Option<BreakerSettings>,
    /// How long a call waits for a free slot of a webhook with maxConcurrentCalls.
    pub call_queue_timeout: Duration,
    /// The mode of every webhook without a mode option.
    pub default_mode: Mode,
    /// Sampled, redacted AdmissionReview captures; `None` for none. Its `sample` must be
    /// between 0 and 1 ([`ServeError::CaptureSample`]).
    pub capture: Option<CaptureSettings>,
    /// Fields redacted in captures and trace logs, besides Secret values.
    pub redact_paths: Vec<RedactPath>,
    /// Period of the re-read of watched files (a backstop for missed events); at least 1 s.
    pub resync: Duration,
    /// Time served after SIGTERM with /readyz failing, before the listener closes (whole
    /// seconds are logged).
    pub shutdown_delay: Duration,
    /// Time requests in flight may take once the listener is closed (whole seconds are logged).
    pub shutdown_grace: Duration,
    /// The proxy's own spans over OTLP/HTTP; `None` (the default) exports nothing.
    pub spans: Option<SpanSettings>,
    /// The admission listener's limits.
    pub limits: Limits,
    /// Proxy-wide exclusions (`--exempt-namespace`, `--exempt-namespace-selector`,
    /// `--exclusions-file`), read once at start; empty (the default) for none.
    pub exclusions: ExclusionSettings,
}

/// Why `serve` could not start, or ended with admissions cut short. Each variant's text is
/// the context; the cause follows as its source.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The background lane's thread (Shadow calls, candidates) could not be started.
    #[error("start the background lane's thread")]
    BackgroundLane(#[source] std::io::Error),
    /// The thread loading the webhook configuration panicked (a bug).
    #[error("loading the webhook configuration panicked")]
    LoadPanicked,
    /// The webhook configuration does not load.
    #[error("load webhook configuration from {}", path.display())]
    Config {
        /// `ServeConfig::config`.
        path: PathBuf,
        /// Every problem found, or why the files cannot be read.
        #[source]
        source: ConfigError,
    },
    /// The namespaces file does not load.
    #[error(transparent)]
    Namespaces(#[from] NamespacesError),
    /// The proxy-wide exclusions are not valid (each problem with its field path).
    #[error(transparent)]
    Exclusions(#[from] ExclusionsError),
    /// The serving certificate or its key does not load, or they do not match.
    #[error("load the serving certificate")]
    ServingCertificate(#[source] TlsError),
    /// The client CA file cannot be read.
    #[error("read {}", path.display())]
    Read {
        /// `ServeConfig::client_ca_file`.
        path: PathBuf,
        /// The read error.
        #[source]
        source: std::io::Error,
    },
    /// The client CA file holds no usable CA certificate.
    #[error("load the client CA {}", path.display())]
    ClientCa {
        /// `ServeConfig::client_ca_file`.
        path: PathBuf,
        /// Why the certificates are refused.
        #[source]
        source: TlsError,
    },
    /// rustls refused the server configuration (a bug).
    #[error(transparent)]
    Tls(TlsError),
    /// The span exporter cannot be built (e.g. the endpoint is not an http(s) URL).
    #[error(transparent)]
    Spans(#[from] TelemetryError),
    /// The capture sample is not a fraction.
    #[error("--capture-sample {0} is not between 0 and 1")]
    CaptureSample(f64),
    /// The capture directory cannot be created.
    #[error("--capture-dir {}", dir.display())]
    Capture {
        /// `CaptureSettings::dir`.
        dir: PathBuf,
        /// The error creating it.
        #[source]
        source: std::io::Error,
    },
    /// No Kubernetes client for the namespace watch (no usable kubeconfig).
    #[error("start the namespace watch")]
    NamespaceWatch(#[source] ClientError),
    /// No Kubernetes client for `--authorizer=subjectaccessreview` (no usable kubeconfig).
    #[error("start the SubjectAccessReview authorizer")]
    Authorizer(#[source] ClientError),
    /// A listener cannot be bound.
    #[error("listen on {address}")]
    Listen {
        /// The address asked for.
        address: SocketAddr,
        /// The bind error.
        #[source]
        source: std::io::Error,
    },
    /// The watched files' directories cannot be watched.
    #[error("watch the configuration")]
    Watch(#[source] notify::Error),
    /// The shutdown grace ran out: `cut` admissions were answered by failurePolicy.
    #[error("{cut} admission(s) were still in flight when --shutdown-grace-seconds ({grace_seconds}) ran out: each was answered by its webhook's failurePolicy")]
    GraceExpired {
        /// Admissions still in flight.
        cut: usize,
        /// `ServeConfig::shutdown_grace`, whole seconds.
        grace_seconds: u64,
    },
}

/// Serves as `config` says until SIGTERM or SIGINT, then drains: /readyz fails for
/// `shutdown_delay` (a second signal skips the rest), the listener closes, and requests in
/// flight get `shutdown_grace` to finish.
///
/// ```no_run
/// use std::time::Duration;
/// use admission_proxy::config::options::Mode;
/// use admission_proxy::serve::{run, ServeConfig};
///
/// // What `admission-proxy serve --config config --tls-cert-file tls.crt
/// // --tls-private-key-file tls.key` runs: every other flag at its default.
/// let config = ServeConfig {
///     config: "config".into(),
///     listen: "0.0.0.0:8443".parse()?,
///     health_probe_address: None,
///     metrics_address: None,
///     tls_cert_file: "tls.crt".into(),
///     tls_private_key_file: "tls.key".into(),
///     tls_min_version: admission_proxy::tls::MinVersion::Tls12,
///     client_ca_file: None,
///     client_cns: Vec::new(),
///     namespaces_file: None,
///     watch_namespaces: false,
///     authorizer: None,
///     kubeconfig: None,
///     kube_version: None,
///     max_body_bytes: admission_proxy::server::DEFAULT_MAX_BODY_BYTES,
///     timeout_margin: Duration::from_millis(250),
///     conversion_webhook_timeout: Duration::from_secs(30),
///     max_timeout: None,
///     breaker: None,
///     call_queue_timeout: Duration::from_millis(100),
///     default_mode: Mode::Enforce,
///     capture: None,
///     redact_paths: Vec::new(),
///     resync: Duration::from_secs(30),
///     shutdown_delay: Duration::from_secs(5),
///     shutdown_grace: Duration::from_secs(20),
///     spans: None,
///     limits: Default::default(),
///     exclusions: Default::default(),
/// };
/// tokio::runtime::Runtime::new()?.block_on(run(config))?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// [`ServeError`] when something `config` names cannot be loaded or bound, or when admissions
/// were still in flight at the end of the grace ([`ServeError::GraceExpired`]).
pub async fn run(config: ServeConfig) -> Result<(), ServeError> {
    let serving = Serving::start(&config).await?;
    wait_for_signal().await;
    serving.drain(&config).await
}

/// Waits for SIGTERM or SIGINT (only SIGINT where SIGTERM cannot be listened for).
pub async fn wait_for_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// A running server: its state, its listeners and the reload watcher.
struct Serving {
    state: Arc<State>,
    admission: ServerHandle,
    /// The probe and metrics listeners; they serve on through the drain.
    observers: Vec<ServerHandle>,
    /// Reloading stops when it is dropped.
    _reloader: ReloadHandle,
}

/// The serving certificate and client CA, kept for the reload watcher.
struct Certificates {
    resolver: Arc<CertResolver>,
    client_auth: Option<Arc<ClientAuth>>,
    server: rustls::ServerConfig,
}

impl Serving {
    /// Builds the state and starts the listeners and the reload watcher.
    async fn start(config: &ServeConfig) -> Result<Self, ServeError> {
        // Before any TLS client (the Kubernetes clients too) takes the process's default.
        crate::tls::install_client_provider();
        // Before the configuration loads: each webhook resolves its metric series as it is
        // compiled, and series resolved without a recorder would count nothing.
        let metrics = crate::metrics::install(
            env!("CARGO_PKG_VERSION"),
            env!("ADMISSION_PROXY_GIT_COMMIT"),
        );
        let snapshot = load_snapshot(config)?;
        let kube_version = kube_version(config).await;
        snapshot
            .require_authorizer(config.authorizer.is_some())
            .and_then(|()| snapshot.require_namespaces(has_namespace_source(config)))
            .map_err(|source| ServeError::Config {
                path: config.config.clone(),
                source,
            })?;
        let namespaces = load_namespaces(config, &snapshot)?;
        // The cluster's version may only be known now (from /version).
        let exclusions =
            Exclusions::load(&config.exclusions.clone().for_kube_version(kube_version))?;
        let certificates = certificates(config)?;
        reload::loaded(&snapshot, false);
        let mut dispatcher = dispatcher(config, kube_version);
        if let Some(ttl) = config.authorizer {
            let client = SubjectAccessReviews::client(config.kubeconfig.as_deref())
                .await
                .map_err(ServeError::Authorizer)?;
            dispatcher =
                dispatcher.with_authorizer(Arc::new(SubjectAccessReviews::new(client, ttl)));
            tracing::info!(authorized_ttl = ?ttl.authorized, unauthorized_ttl = ?ttl.unauthorized, "matchConditions' authorizer checks are answered by SubjectAccessReview");
        }
        if let Some(exclusions) = &exclusions {
            tracing::info!(exclusions = %exclusions.summary(), "proxy-wide exclusions: matching requests are answered allowed before any webhook");
        }
        let admissions = admissions(config, snapshot, namespaces, dispatcher, exclusions).await?;
        let state = Arc::new(State::new(
            admissions,
            config.max_body_bytes,
            config.limits.clone(),
            metrics,
        ));
        let admission =
            server::serve_admission(config.listen, Arc::new(certificates.server), state.clone())
                .map_err(|source| ServeError::Listen {
                    address: config.listen,
                    source,
                })?;
        let observers = serve_observations(config, &state)?;
        let client_certificates = certificates.client_auth.is_some();
        let reloader = reload::Sources {
            config: config.config.clone(),
            namespaces: config.namespaces_file.clone(),
            tls: Some((
                config.tls_cert_file.clone(),
                config.tls_private_key_file.clone(),
                certificates.resolver,
            )),
            client_ca: config.client_ca_file.clone().zip(certificates.client_auth),
            resync: config.resync.max(Duration::from_secs(1)),
            authorizer: config.authorizer.is_some(),
            namespace_source: has_namespace_source(config),
        }
        .spawn(state.clone())
        .map_err(ServeError::Watch)?;
        // Logged once files are watched: a change from now on is picked up.
        tracing::info!(address = %admission.local_addr, version = VERSION, client_certificates, "admission-proxy listening");
        Ok(Serving {
            state,
            admission,
            observers,
            _reloader: reloader,
        })
    }

    /// The shutdown after the first signal.
    async fn drain(self, config: &ServeConfig) -> Result<(), ServeError> {
        let Serving {
            state,
            admission,
            // Both live to the end: the probe and metrics listeners serve on through the drain
            // (/readyz keeps failing), and files stay watched.
            observers: _observers,
            _reloader,
        } = self;
        // Kubernetes removes the pod from the Service's endpoints only after it is told to
        // stop, and kube-apiserver learns of that later still: keep answering (and failing
        // /readyz) for the delay, then close the listener and let requests in flight finish.
        state.begin_shutdown();
        tracing::info!(
            delay_seconds = config.shutdown_delay.as_secs(),
            grace_seconds = config.shutdown_grace.as_secs(),
            "shutting down: /readyz fails; serving on for the shutdown delay"
        );
        tokio::select! {
            _ = tokio::time::sleep(config.shutdown_delay) => {}
            _ = wait_for_signal() => tracing::info!("second signal: shutdown delay skipped"),
        }
        let answering = admission.shutdown().await;
        tracing::info!(
            in_flight = state.in_flight(),
            "listener closed; draining requests in flight"
        );
        let cut = match tokio::time::timeout(config.shutdown_grace, state.drained()).await {
            Ok(()) => 0,
            Err(_) => {
                // Each admission still waiting for its backend is answered by its
                // failurePolicy, as a call that never answered would be, instead of a bare
                // connection close.
                let cut = state.in_flight();
                state.admissions.expire_grace();
                cut
            }
        };
        // Bounded: the last answers are written before the process ends their connections.
        if tokio::time::timeout(ANSWERS_WRITTEN, answering.written())
            .await
            .is_err()
        {
            tracing::warn!("answers still being written after the drain; exiting");
        }
        flush_spans(&state).await;
        if cut > 0 {
            return Err(ServeError::GraceExpired {
                cut,
                grace_seconds: config.shutdown_grace.as_secs(),
            });
        }
        tracing::info!("drained; exiting");
        Ok(())
    }
}

/// The cluster's version: `--kube-version`, else `/version` of the cluster `--kubeconfig`
/// names (as `kubectl version` reads it), else none. A cluster that cannot tell (unreachable
/// at start, or an answer that is no version) is warned about and nothing is checked by
/// version: the namespace watch and the authorizer report the cluster's health themselves.
async fn kube_version(config: &ServeConfig) -> Option<KubeVersion> {
    if config.kube_version.is_some() {
        return config.kube_version;
    }
    let kubeconfig = config.kubeconfig.as_deref()?;
    match crate::kube_version::of_cluster(Some(kubeconfig)).await {
        Ok((version, git_version)) => {
            tracing::info!(kube_version = %version, %git_version, "the cluster's Kubernetes version, from /version");
            Some(version)
        }
        Err(error) => {
            tracing::warn!(%error, "the cluster's Kubernetes version could not be read from /version: nothing is checked by version (give --kube-version)");
            None
        }
    }
}

/// Loads the webhook configuration on a thread of its own, which ends here: its memory is then
/// the allocator's to reclaim (mimalloc takes over an ended thread's pages), whereas pages of
/// the thread that only waits from now on would keep this snapshot's memory after a reload
/// freed it (benches/README.md, "Memory across reloads"). Logs its warnings.
fn load_snapshot(config: &ServeConfig) -> Result<Snapshot, ServeError> {
    let snapshot = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let loaded = config::load(&config.config);
                crate::memory::release();
                loaded
            })
            .join()
    })
    .map_err(|_| ServeError::LoadPanicked)?
    .map_err(|source| ServeError::Config {
        path: config.config.clone(),
        source,
    })?;
    for w in &snapshot.warnings {
        tracing::warn!(warning = %w, "webhook configuration warning");
    }
    if snapshot.is_empty() {
        tracing::warn!(config = %config.config.display(), "no webhooks are configured: /readyz fails until a configuration with webhooks is loaded");
    }
    Ok(snapshot)
}

/// The namespaces file's namespaces; `None` without one (warned about when a webhook has a
/// namespaceSelector and no watch supplies them either).
fn load_namespaces(
    config: &ServeConfig,
    snapshot: &Snapshot,
) -> Result<Option<Namespaces>, ServeError> {
    if let Some(f) = &config.namespaces_file {
        return Ok(Some(Namespaces::load(f)?));
    }
    if !config.watch_namespaces
        && snapshot
            .webhooks()
            .any(|w| !w.matcher.namespace_selector.is_empty())
    {
        tracing::warn!("a webhook has a namespaceSelector but neither --namespaces-file nor --watch-namespaces was given: namespaced requests it matches are rejected with 404 (namespace not found), as kube-apiserver does for unknown namespaces");
    }
    Ok(None)
}

/// The serving certificate (its expiry exported as a metric), the client CA and the rustls
/// configuration over them.
fn certificates(config: &ServeConfig) -> Result<Certificates, ServeError> {
    let key = tls::load_certified_key(&config.tls_cert_file, &config.tls_private_key_file)
        .map_err(ServeError::ServingCertificate)?;
    if let Some(not_after) = tls::not_after(&key) {
        crate::metrics::serving_certificate(not_after);
    }
    let resolver = Arc::new(CertResolver::new(key));
    let client_auth = match &config.client_ca_file {
        Some(f) => {
            let pem =
                crate::files::read(f, crate::files::MAX_PEM_FILE_BYTES).map_err(|source| {
                    ServeError::Read {
                        path: f.clone(),
                        source,
                    }
                })?;
            let auth = ClientAuth::new(&pem, config.client_cns.clone()).map_err(|source| {
                ServeError::ClientCa {
                    path: f.clone(),
                    source,
                }
            })?;
            Some(Arc::new(auth))
        }
        None => None,
    };
    let server = tls::server_config(
        resolver.clone(),
        config.tls_min_version,
        client_auth.clone(),
    )
    .map_err(ServeError::Tls)?;
    Ok(Certificates {
        resolver,
        client_auth,
        server,
    })
}

/// Whether `serve` has namespace labels to read: a namespaces file or the watch.
fn has_namespace_source(config: &ServeConfig) -> bool {
    config.namespaces_file.is_some() || config.watch_namespaces
}

/// The dispatcher with `config`'s timeouts, breakers and default mode, and the CEL cost model
/// of the cluster's `kube_version`.
fn dispatcher(config: &ServeConfig, kube_version: Option<KubeVersion>) -> Dispatcher {
    let dispatcher = Dispatcher::new(config.timeout_margin)
        .with_kube_version(kube_version)
        .with_conversion_timeout(config.conversion_webhook_timeout)
        .with_call_queue_timeout(config.call_queue_timeout)
        .with_default_mode(config.default_mode);
    let dispatcher = match config.max_timeout {
        Some(cap) => dispatcher.with_max_timeout(cap),
        None => dispatcher,
    };
    match config.breaker {
        Some(breaker) => dispatcher.with_breakers(breaker),
        None => dispatcher,
    }
}

/// The admission layer `config` asks for, built whole (policy-server's `new_from_config`):
/// the loaded `snapshot`, `namespaces` and `dispatcher`, the proxy-wide `exclusions`, and
/// what only some configurations have: spans, captures, the namespace watch (which publishes
/// into the same namespace labels the admissions read).
async fn admissions(
    config: &ServeConfig,
    snapshot: Snapshot,
    namespaces: Option<Namespaces>,
    dispatcher: Dispatcher,
    exclusions: Option<Exclusions>,
) -> Result<Admissions, ServeError> {
    let spans = match &config.spans {
        Some(settings) => {
            let spans = Spans::start(settings)?;
            tracing::info!(endpoint = %settings.endpoint, sampling_rate_per_million = settings.sampling_rate_per_million, "exporting spans over OTLP");
            Some(spans)
        }
        None => None,
    };
    let capture = match &config.capture {
        Some(settings) if !(0.0..=1.0).contains(&settings.sample) => {
            return Err(ServeError::CaptureSample(settings.sample));
        }
        Some(settings) => {
            Some(
                Capture::start(settings.clone()).map_err(|source| ServeError::Capture {
                    dir: settings.dir.clone(),
                    source,
                })?,
            )
        }
        None => None,
    };
    let namespaces = Arc::new(ArcSwapOption::new(namespaces.map(Arc::new)));
    let namespace_watch = if config.watch_namespaces {
        let client = kube_client::client(config.kubeconfig.as_deref())
            .await
            .map_err(ServeError::NamespaceWatch)?;
        Some(NamespaceWatch::start(client, namespaces.clone()))
    } else {
        None
    };
    Admissions::from_parts(Parts {
        snapshot,
        namespaces,
        namespace_watch,
        dispatcher,
        capture,
        redact_paths: config.redact_paths.clone(),
        spans,
        exclusions,
    })
    .map_err(ServeError::BackgroundLane)
}

/// Starts the plain-HTTP probe and metrics listeners `config` asks for (one listener when
/// they are the same address).
fn serve_observations(
    config: &ServeConfig,
    state: &Arc<State>,
) -> Result<Vec<ServerHandle>, ServeError> {
    let health = Observations {
        health: true,
        metrics: false,
    };
    let metrics = Observations {
        health: false,
        metrics: true,
    };
    let listeners: Vec<(SocketAddr, Observations)> =
        match (config.health_probe_address, config.metrics_address) {
            (Some(h), Some(m)) if h == m && h.port() != 0 => vec![(h, Observations::ALL)],
            (h, m) => h
                .map(|a| (a, health))
                .into_iter()
                .chain(m.map(|a| (a, metrics)))
                .collect(),
        };
    let mut handles = Vec::new();
    for (address, serves) in listeners {
        let handle = server::serve_observations(address, state.clone(), serves)
            .map_err(|source| ServeError::Listen { address, source })?;
        let what = match (serves.health, serves.metrics) {
            (true, true) => "health probes and metrics",
            (true, false) => "health probes",
            _ => "metrics",
        };
        tracing::info!(address = %handle.local_addr, serves = what, "plain-HTTP observation listener");
        handles.push(handle);
    }
    Ok(handles)
}

/// Exports the spans left (`spans`): bounded, on a blocking thread, as the batch processor's
/// thread does the exporting.
async fn flush_spans(state: &Arc<State>) {
    if state.admissions.spans.is_none() {
        return;
    }
    let admissions = state.admissions.clone();
    let _ = tokio::task::spawn_blocking(move || {
        if let Some(spans) = &admissions.spans {
            spans.shutdown(SPANS_FLUSHED);
        }
    })
    .await;
}
