//! The `admission-proxy` binary: command-line parsing, logging, signals. Errors surface here
//! as `anyhow`; everything else lives in the library.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use admission_proxy::{
    config, demo, dispatch::breaker::BreakerSettings, dispatch::Dispatcher, matching::Namespaces,
    namespace_watch, reload, server, tls,
};
use anyhow::{bail, Context};
use clap::{Parser, Subcommand};

/// mimalloc instead of glibc malloc: the request path allocates and frees many short-lived
/// buffers; glibc's chunk consolidation was ~13% of the proxy's CPU under load
/// (benches/README.md, "What the profiles found").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Returns memory freed on this thread (a configuration load's peak: YAML, JSON values, the
/// old snapshot) to the OS instead of keeping it in mimalloc's pages.
fn release_freed_memory() {
    // SAFETY: mi_collect only walks the calling thread's heap; no pointer is passed.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

/// `--version`: the crate version and the git commit it was built from (build.rs).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("ADMISSION_PROXY_GIT_COMMIT"),
    ")"
);

#[derive(Parser)]
#[command(
    name = "admission-proxy",
    version = VERSION,
    about = "A sidecar in front of legacy Kubernetes admission webhooks: pre-filters requests as kube-apiserver would, negotiates AdmissionReview versions, enforces timeoutSeconds and failurePolicy."
)]
struct Cli {
    /// Log filter (tracing EnvFilter syntax), e.g. `info`, `admission_proxy=debug`; RUST_LOG
    /// wins. Defaults to `info` for serve and `warn` for demo (which prints its own lines).
    #[arg(long, global = true)]
    log_level: Option<String>,
    /// Log as JSON lines.
    #[arg(long, global = true)]
    log_json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve AdmissionReviews at POST /webhooks/{webhook name} over HTTPS.
    Serve(Box<ServeArgs>),
    /// Run the serve path on 127.0.0.1 with the bundled config, an example legacy backend and
    /// real captured AdmissionReviews; print one line per request.
    Demo(DemoArgs),
    /// Open-loop latency benchmark against a proxy or a webhook (or, with --serve-backend, a
    /// minimal allow-all legacy webhook to benchmark against).
    Bench(BenchArgs),
    /// Validate webhook configuration exactly as `serve` loads it: print every problem (file,
    /// document, configuration, webhook, field path, reason) and a summary; exit 0 when valid,
    /// 1 when not. For CI on a repository of webhook configurations.
    Check(CheckArgs),
    /// Print (YAML) the Validating/MutatingWebhookConfigurations that register the proxy with
    /// kube-apiserver for every webhook of --config: same names, the legacy rules, selectors,
    /// matchPolicy and failurePolicy, the proxy's Service as clientConfig (README, "Cutting
    /// over").
    Registration(RegistrationArgs),
    /// For a captured AdmissionReview: for every loaded webhook, whether kube-apiserver would
    /// call it and why (rules, namespaceSelector and objectSelector with the labels used, each
    /// matchCondition's value or error, failurePolicy), and the exact body a call would send.
    Explain(ExplainArgs),
}

#[derive(clap::Args)]
struct ExplainArgs {
    /// Directory (or file) of ValidatingWebhookConfiguration / MutatingWebhookConfiguration.
    #[arg(long)]
    config: PathBuf,
    /// An AdmissionReview (JSON, admission.k8s.io/v1 or v1beta1) as kube-apiserver sends it.
    #[arg(long)]
    review: PathBuf,
    /// Namespaces file (`kubectl get namespaces -o yaml`) for namespaceSelector.
    #[arg(long)]
    namespaces_file: Option<PathBuf>,
    /// `text` (default) or `json`.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    output: String,
    /// A field to redact in the bodies shown, besides Secret values (always redacted), as
    /// `serve --redact-path` takes it; repeatable.
    #[arg(long)]
    redact_path: Vec<admission_proxy::redact::RedactPath>,
}

#[derive(clap::Args)]
struct RegistrationArgs {
    /// Directory (or file) of the legacy ValidatingWebhookConfiguration /
    /// MutatingWebhookConfiguration, as the proxy serves it.
    #[arg(long)]
    config: PathBuf,
    /// The proxy's Service, `NAMESPACE/NAME[:PORT]` (port 443 by default). Its namespace is
    /// excluded from every namespaceSelector so that the proxy never blocks its own pods.
    #[arg(long, value_parser = admission_proxy::registration::parse_service)]
    service: (String, String, u16),
    /// PEM CA that signed the proxy's serving certificate, written as caBundle.
    #[arg(long)]
    ca_bundle: Option<PathBuf>,
    /// Add `cert-manager.io/inject-ca-from: NAMESPACE/CERTIFICATE` so that cert-manager's CA
    /// injector fills in caBundle.
    #[arg(long)]
    inject_ca_from: Option<String>,
    /// Appended to each legacy configuration's name (so that both exist during the cutover).
    #[arg(long, default_value = "-admission-proxy")]
    name_suffix: String,
    #[command(flatten)]
    discovery: DiscoveryArgs,
}

/// Reading the cluster's served resources (`registration`, `check`).
#[derive(clap::Args)]
struct DiscoveryArgs {
    /// Read the cluster's served resources (discovery: /api, /apis) to register only served
    /// versions and to report every rule no served resource reaches.
    #[arg(long)]
    discover: bool,
    /// Kubeconfig for --discover (default: KUBECONFIG, ~/.kube/config, then the pod's service
    /// account).
    #[arg(long, requires = "discover")]
    kubeconfig: Option<PathBuf>,
}

impl DiscoveryArgs {
    /// The cluster's served resources when --discover is given.
    fn served(&self) -> anyhow::Result<Option<admission_proxy::served::ServedResources>> {
        if !self.discover {
            return Ok(None);
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("start the tokio runtime")?;
        runtime.block_on(async {
            let mut config = namespace_watch::config(self.kubeconfig.as_deref()).await?;
            // kube-rs re-sends a 503 up to 15 times with backoff, minutes in all: an aggregated
            // API that is down (metrics.k8s.io without metrics-server) must not stall
            // `registration` or `check`; it is reported as unavailable instead.
            config.default_retry = false;
            let client = kube::Client::try_from(config)?;
            let served = admission_proxy::served::discover(&client).await?;
            Ok(Some(served))
        })
    }
}

#[derive(clap::Args)]
struct CheckArgs {
    /// Directory (or file) of ValidatingWebhookConfiguration / MutatingWebhookConfiguration.
    #[arg(long)]
    config: PathBuf,
    /// Namespaces file (`kubectl get namespaces -o yaml`) to validate as well.
    #[arg(long)]
    namespaces_file: Option<PathBuf>,
    #[command(flatten)]
    discovery: DiscoveryArgs,
}

#[derive(clap::Args)]
struct BenchArgs {
    /// URL to send AdmissionReviews to, e.g. https://127.0.0.1:8443/webhooks/NAME.
    #[arg(long, required_unless_present_any = ["serve_backend", "synthetic_config"])]
    target: Option<String>,
    /// A second URL (e.g. the backend directly), interleaved in alternating rounds.
    #[arg(long)]
    compare: Option<String>,
    /// AdmissionReview file or directory (relative to the working directory: the repository's
    /// root by default).
    #[arg(long, default_value = "tests/fixtures/admission-reviews")]
    reviews: PathBuf,
    /// Requests per second.
    #[arg(long, default_value_t = 1000)]
    rate: u32,
    /// Measured seconds.
    #[arg(long, default_value_t = 10)]
    duration: u64,
    /// Warm-up seconds, not measured.
    #[arg(long, default_value_t = 2)]
    warmup: u64,
    /// Concurrent keep-alive connections.
    #[arg(long, default_value_t = 8)]
    connections: usize,
    /// PEM CA that signed the targets' certificates (system roots otherwise).
    #[arg(long)]
    cacert: Option<PathBuf>,
    /// Seconds per round when comparing.
    #[arg(long, default_value_t = 1.0)]
    round_seconds: f64,
    /// `table` or `json`.
    #[arg(long, default_value = "table")]
    output: String,
    /// Instead of benchmarking, serve an allow-all legacy webhook stand-in on ADDR (paths as
    /// in the example backend, e.g. /allow); HTTPS with --tls-cert-file/--tls-private-key-file,
    /// else plain HTTP (loopback only).
    #[arg(long)]
    serve_backend: Option<SocketAddr>,
    /// With --serve-backend: append every AdmissionReview's request.uid to FILE as it arrives
    /// (a uid the backend received twice shows as a repeated line, across restarts too).
    #[arg(long, requires = "serve_backend")]
    record_uids: Option<PathBuf>,
    /// Instead of benchmarking, print a webhook configuration with this many webhooks in a
    /// realistic mix (rules, selectors, matchConditions) calling --backend-url, plus
    /// `skip.bench.example.com` that matches nothing; --cacert becomes their caBundle.
    #[arg(long, requires = "backend_url")]
    synthetic_config: Option<usize>,
    /// The URL the --synthetic-config webhooks call.
    #[arg(long)]
    backend_url: Option<String>,
    #[arg(long, requires = "tls_private_key_file")]
    tls_cert_file: Option<PathBuf>,
    #[arg(long)]
    tls_private_key_file: Option<PathBuf>,
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Directory (or file) of ValidatingWebhookConfiguration / MutatingWebhookConfiguration
    /// YAML or JSON; watched and hot-reloaded.
    #[arg(long)]
    config: PathBuf,
    /// Address to listen on: `HOST:PORT`, or `:PORT` for every address (as in Go); port 0
    /// picks a free port (logged).
    #[arg(long, default_value = ":8443", value_parser = parse_listen)]
    listen: SocketAddr,
    /// Plain-HTTP address for /livez, /healthz and /readyz (as controller-runtime's
    /// --health-probe-bind-address), e.g. `:8081`; `0` (default) for none. The kubelet's
    /// probes send no client certificate, so with --client-ca-file they need this port.
    #[arg(long, default_value = "0", value_parser = parse_bind_address)]
    health_probe_bind_address: BindAddress,
    /// Plain-HTTP address for /metrics (as controller-runtime's --metrics-bind-address), e.g.
    /// `:8080`; `0` (default) for none. The same address as --health-probe-bind-address
    /// serves both on one listener.
    #[arg(long, default_value = "0", value_parser = parse_bind_address)]
    metrics_bind_address: BindAddress,
    /// PEM certificate chain served to kube-apiserver; reloaded with its key on change. A pair
    /// whose key does not match is refused (at start, and on reload the last good pair stays).
    #[arg(long)]
    tls_cert_file: PathBuf,
    /// PEM private key of --tls-cert-file.
    #[arg(long)]
    tls_private_key_file: PathBuf,
    /// Lowest TLS version accepted from clients.
    #[arg(long, value_enum, default_value = "1.2")]
    tls_min_version: tls::MinVersion,
    /// PEM CA certificate(s): require a client certificate issued by one of them (kube-apiserver
    /// presents one when its AdmissionConfiguration kubeconfig names it). Reloaded on change.
    /// Without it no client certificate is asked for.
    #[arg(long)]
    client_ca_file: Option<PathBuf>,
    /// Accept only client certificates whose subject CN is one of these (comma-separated or
    /// repeated); needs --client-ca-file.
    #[arg(long, value_delimiter = ',', requires = "client_ca_file")]
    client_cn: Vec<String>,
    /// Namespaces for namespaceSelector (`kubectl get namespaces -o yaml`); watched. The
    /// offline alternative to --watch-namespaces.
    #[arg(long, conflicts_with = "watch_namespaces")]
    namespaces_file: Option<PathBuf>,
    /// Keep namespace labels from a live, metadata-only watch of the cluster's Namespaces
    /// (needs get, list and watch on namespaces); a namespace not yet seen is fetched with a
    /// live GET, as kube-apiserver does. /readyz waits for the first list.
    #[arg(long)]
    watch_namespaces: bool,
    /// Kubeconfig for --watch-namespaces outside a pod (default: KUBECONFIG, ~/.kube/config,
    /// then the pod's service account).
    #[arg(long, requires = "watch_namespaces")]
    kubeconfig: Option<PathBuf>,
    /// Largest accepted AdmissionReview body, in bytes (kube-apiserver's own limit is 3 MiB).
    #[arg(long, default_value_t = server::DEFAULT_MAX_BODY_BYTES)]
    max_body_bytes: usize,
    /// Milliseconds kept back from kube-apiserver's ?timeout= so the proxy answers first.
    #[arg(long, default_value_t = 250)]
    timeout_margin_ms: u64,
    /// Seconds each CRD conversion webhook call may take (matchPolicy Equivalent on a custom
    /// resource with strategy Webhook); kube-apiserver uses 30 and the CRD cannot set it. Always
    /// bounded by kube-apiserver's own ?timeout= as well.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=30))]
    conversion_webhook_timeout_seconds: u64,
    /// Bound every webhook call to this many seconds, below its timeoutSeconds (1-30): a
    /// webhook registered with 30 s cannot hold kube-apiserver for 30 s. Off unless set; the
    /// maxTimeoutSeconds webhook option bounds one webhook.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=30))]
    max_timeout_seconds: Option<u64>,
    /// Open a backend's circuit breaker after this many consecutive calls fail to connect,
    /// complete TLS or answer in time: its webhooks are then answered by failurePolicy at
    /// once ("backend unavailable, failing fast") until one probe call succeeds. Off unless set.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    breaker_failures: Option<u32>,
    /// Seconds an open breaker answers at once before letting one probe call through.
    #[arg(long, default_value_t = 10, requires = "breaker_failures", value_parser = clap::value_parser!(u64).range(1..=3600))]
    breaker_cooldown_seconds: u64,
    /// Milliseconds a call waits for a free slot of a webhook with the maxConcurrentCalls
    /// option before failurePolicy answers (class overloaded).
    #[arg(long, default_value_t = 100)]
    call_queue_timeout_ms: u64,
    /// The mode of every webhook without a mode option: Enforce (as kube-apiserver), Warn or
    /// Shadow (README, "Operating legacy webhooks safely").
    #[arg(long, value_enum, default_value = "Enforce")]
    default_mode: admission_proxy::config::options::Mode,
    /// Write sampled AdmissionReviews (redacted, with the decision and its latency) to DIR as
    /// files `explain --review` reads. Secret data and stringData are always redacted.
    #[arg(long)]
    capture_dir: Option<PathBuf>,
    /// Fraction of admissions captured (0-1), chosen by uid.
    #[arg(long, default_value_t = 0.01, requires = "capture_dir")]
    capture_sample: f64,
    /// Capture files kept; the oldest are removed.
    #[arg(long, default_value_t = 1000, requires = "capture_dir")]
    capture_max_files: usize,
    /// Bytes of capture files kept; the oldest are removed.
    #[arg(long, default_value_t = 100 * 1024 * 1024, requires = "capture_dir")]
    capture_max_bytes: u64,
    /// A field to redact in captures and trace logs, besides Secret values (always
    /// redacted): a JSON Pointer into the AdmissionReview
    /// (/request/object/metadata/annotations/example.com~1token) or a dotted path
    /// (request.object.spec.password); repeatable.
    #[arg(long)]
    redact_path: Vec<admission_proxy::redact::RedactPath>,
    /// Seconds between periodic re-reads of watched files (a backstop for missed events).
    #[arg(long, default_value_t = 30)]
    resync_seconds: u64,
    /// Threads serving requests. One (as linkerd2-proxy defaults to) costs the least CPU per
    /// request and keeps tails short when the sidecar shares cores with its webhook; raise it
    /// with the pod's CPU limit (benches/README.md, "What the profiles found").
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    worker_threads: u16,
    /// Seconds the proxy keeps serving after SIGTERM with /readyz failing, so that the
    /// endpoint leaves the Service before the listener closes (kube-apiserver learns of
    /// endpoint changes late). A second SIGTERM skips the rest of the delay.
    #[arg(long, default_value_t = 5)]
    shutdown_delay_seconds: u64,
    /// Seconds requests in flight may take to finish once the listener is closed; keep
    /// delay + grace below the pod's terminationGracePeriodSeconds.
    #[arg(long, default_value_t = 20)]
    shutdown_grace_seconds: u64,
    /// Export the proxy's own spans (admission, matching, conversion, each backend call) to
    /// this OTLP/HTTP collector, e.g. `http://otel-collector:4318` (`/v1/traces` is appended).
    /// Off unless set; without it the caller's traceparent/tracestate are forwarded unchanged.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    otlp_endpoint: Option<String>,
    /// Requests without a sampled parent span that are traced, per million (kube-apiserver's
    /// TracingConfiguration samplingRatePerMillion). A caller's traceparent decides for its
    /// own requests.
    #[arg(long, default_value_t = 0, requires = "otlp_endpoint", value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    tracing_sampling_rate_per_million: u32,
    #[command(flatten)]
    limits: LimitArgs,
}

/// The listener's limits (`server::Limits`; README "Proxy options"). Defaults follow Go's
/// `http.Server` as kube-apiserver configures it where it has one.
#[derive(clap::Args)]
struct LimitArgs {
    /// Seconds from accepting a connection to the end of its TLS handshake.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    tls_handshake_timeout_seconds: u64,
    /// Seconds from a request's first byte to the end of its header (a client trickling
    /// its header is closed then).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    request_header_timeout_seconds: u64,
    /// Seconds from the end of a request's header to the end of its body.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    request_body_timeout_seconds: u64,
    /// Seconds the socket may take to accept an answer: a client that stops reading is closed
    /// then, and the answer's memory freed.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    write_timeout_seconds: u64,
    /// Seconds a keep-alive connection may wait for its next request. Keep it above the 90 s
    /// kube-apiserver keeps idle connections, or it may send on a connection being closed.
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..))]
    idle_timeout_seconds: u64,
    /// Bytes a request may send before its header ends (Go's default, 1 MiB).
    #[arg(long, default_value_t = 1 << 20, value_parser = clap::value_parser!(u64).range(1024..))]
    max_header_bytes: u64,
    /// Client connections open at once; more are closed at once and counted.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..))]
    max_connections: u64,
    /// Admissions answered at once; more are answered 429 with Retry-After: 1, which
    /// kube-apiserver retries within its deadline.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    max_requests_inflight: u64,
}

impl LimitArgs {
    fn limits(&self) -> server::Limits {
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        server::Limits {
            tls_handshake_timeout: Duration::from_secs(self.tls_handshake_timeout_seconds),
            header_timeout: Duration::from_secs(self.request_header_timeout_seconds),
            body_timeout: Duration::from_secs(self.request_body_timeout_seconds),
            write_timeout: Duration::from_secs(self.write_timeout_seconds),
            idle_timeout: Duration::from_secs(self.idle_timeout_seconds),
            max_header_bytes: size(self.max_header_bytes),
            max_connections: size(self.max_connections),
            max_requests_inflight: size(self.max_requests_inflight),
        }
    }
}

/// An optional listen address: `None` for `0`.
#[derive(Clone, Copy, Debug)]
struct BindAddress(Option<SocketAddr>);

/// `--health-probe-bind-address`, `--metrics-bind-address`: `0` for none (as controller-runtime
/// reads it), else as [`parse_listen`].
fn parse_bind_address(s: &str) -> anyhow::Result<BindAddress> {
    if s == "0" {
        return Ok(BindAddress(None));
    }
    parse_listen(s).map(|a| BindAddress(Some(a)))
}

/// `--listen`: `HOST:PORT`, `[V6]:PORT`, or Go's `:PORT` for all (IPv4) addresses.
fn parse_listen(s: &str) -> anyhow::Result<SocketAddr> {
    let full = match s.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => s.to_string(),
    };
    full.parse()
        .map_err(|e| anyhow::anyhow!("{s:?} is not HOST:PORT or :PORT ({e})"))
}

#[derive(clap::Args)]
struct DemoArgs {
    /// Webhook configuration to run with. The defaults are relative to the working directory:
    /// the repository's root, where the README runs the demo.
    #[arg(long, default_value = "config")]
    config: PathBuf,
    /// Directory of captured AdmissionReview bodies (with index.json).
    #[arg(long, default_value = "tests/fixtures/admission-reviews")]
    reviews: PathBuf,
    /// Namespaces for namespaceSelector.
    #[arg(long, default_value = "tests/fixtures/namespaces.yaml")]
    namespaces_file: PathBuf,
    /// Where the example legacy backend listens (the bundled config points at it).
    #[arg(long, default_value = "127.0.0.1:18443")]
    backend_listen: SocketAddr,
    /// Replay every captured review, not just the curated selection.
    #[arg(long)]
    all: bool,
}

/// A log filter: comma-separated levels (`info`) or `target=level` directives. EnvFilter alone
/// also takes a bare word as a target name, so `--log-level verbose` would quietly log nothing:
/// that is refused here.
fn log_filter(spec: &str, what: &str) -> anyhow::Result<tracing_subscriber::EnvFilter> {
    const LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];
    let invalid = || {
        format!("{what} {spec:?} is not a valid log filter (a level: trace, debug, info, warn, error, off; or TARGET=LEVEL, e.g. admission_proxy=debug, comma-separated)")
    };
    for directive in spec.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        if !directive.contains('=') && !LEVELS.contains(&directive.to_ascii_lowercase().as_str()) {
            bail!(invalid());
        }
    }
    let filter = tracing_subscriber::EnvFilter::try_new(spec).with_context(invalid)?;
    // kube-rs' HTTP layer logs every failed request to the Kubernetes API as ERROR (`failed
    // with error client error (Connect)`), each retry of the namespace watch included; the
    // proxy logs the same failure once as a WARN with its consequence. Silenced unless the
    // filter names kube_client itself.
    if spec.contains("kube_client") {
        return Ok(filter);
    }
    Ok(filter.add_directive(
        "kube_client::client::builder=off"
            .parse()
            .context("the kube_client directive")?,
    ))
}

/// Logging to stderr. `RUST_LOG` wins over `level`; either, when set and invalid, is an error
/// (a typo must not silently turn logging off).
fn init_logging(level: &str, json: bool) -> anyhow::Result<()> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(env) if !env.is_empty() => log_filter(&env, "RUST_LOG")?,
        _ => log_filter(level, "--log-level")?,
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
    Ok(())
}

/// Runs the command; an error is printed once, its causes joined (without repeating a cause
/// its context already quotes), and the exit code is 1.
fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            let mut message = String::new();
            for cause in e.chain() {
                let text = cause.to_string();
                if !message.contains(&text) {
                    if !message.is_empty() {
                        message.push_str(": ");
                    }
                    message.push_str(&text);
                }
            }
            eprintln!("error: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let default_level = if matches!(cli.command, Command::Demo(_)) {
        "warn"
    } else {
        "info"
    };
    init_logging(
        cli.log_level.as_deref().unwrap_or(default_level),
        cli.log_json,
    )?;
    if let Command::Check(args) = &cli.command {
        let valid = check(args);
        std::process::exit(if valid { 0 } else { 1 });
    }
    if let Command::Explain(args) = &cli.command {
        return explain(args);
    }
    if let Command::Registration(args) = &cli.command {
        return registration(args);
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Command::Serve(args) = &cli.command {
        builder.worker_threads(usize::from(args.worker_threads));
    }
    let runtime = builder
        .enable_all()
        .build()
        .context("start the tokio runtime")?;
    match cli.command {
        Command::Serve(args) => runtime.block_on(serve(*args)),
        Command::Bench(args) => runtime.block_on(bench(args)),
        Command::Check(_) | Command::Explain(_) | Command::Registration(_) => {
            unreachable!("handled before the runtime starts")
        }
        Command::Demo(args) => runtime.block_on(async {
            let summary = demo::run(demo::DemoOptions {
                config: args.config,
                reviews: args.reviews,
                namespaces_file: Some(args.namespaces_file),
                backend_addr: args.backend_listen,
                all: args.all,
            })
            .await?;
            if summary.contains_key("error") {
                bail!("some demo requests got no answer");
            }
            Ok(())
        }),
    }
}

/// `check`: loads as `serve` would and prints the result on stdout; returns whether it is valid.
fn check(args: &CheckArgs) -> bool {
    let mut problems = 0usize;
    let summary = match config::load(&args.config) {
        Ok(snapshot) => {
            for w in &snapshot.warnings {
                println!("warning: {w}");
            }
            let cluster = match args.discovery.served() {
                Ok(None) => String::new(),
                Ok(Some(served)) => {
                    for w in discovery_warnings(&snapshot, &served) {
                        println!("warning: {w}");
                    }
                    format!(
                        "; cluster: {} group/version(s) served",
                        served.group_versions()
                    )
                }
                Err(e) => {
                    println!("error: discovery: {e:#}");
                    problems += 1;
                    "; cluster: discovery failed".to_string()
                }
            };
            format!(
                "{}: {} webhook(s) in {} file(s){cluster}",
                args.config.display(),
                snapshot.len(),
                snapshot.files.len()
            )
        }
        Err(config::ConfigError::Invalid(list)) => {
            for p in &list {
                println!("error: {p}");
            }
            problems += list.len();
            format!("{}: {} problem(s)", args.config.display(), list.len())
        }
        Err(e) => {
            println!("error: {e}");
            problems += 1;
            format!("{}: cannot be read", args.config.display())
        }
    };
    let namespaces = args
        .namespaces_file
        .as_ref()
        .map(|f| match Namespaces::load(f) {
            Ok(ns) => format!("; {}: {} namespace(s)", f.display(), ns.len()),
            Err(e) => {
                println!("error: {e}");
                problems += 1;
                format!("; {}: invalid", f.display())
            }
        });
    let verdict = if problems == 0 { "valid" } else { "INVALID" };
    println!("{verdict}: {summary}{}", namespaces.unwrap_or_default());
    problems == 0
}

/// What `--discover` tells about `snapshot` (`check` and `registration` print it): the
/// group/versions the cluster lists but could not describe, then every rule no served resource
/// reaches.
fn discovery_warnings(
    snapshot: &config::Snapshot,
    served: &admission_proxy::served::ServedResources,
) -> Vec<String> {
    let unavailable = served.unavailable.iter().map(|(gv, error)| {
        format!("discovery: {gv} is listed but could not be read ({error}); its resources count as not served")
    });
    let unreachable = admission_proxy::registration::unreachable(snapshot, served)
        .into_iter()
        .map(|p| p.to_string());
    unavailable.chain(unreachable).collect()
}

/// `registration`: prints the proxy's webhook configurations for the legacy ones in --config.
fn registration(args: &RegistrationArgs) -> anyhow::Result<()> {
    use base64::Engine;
    let snapshot = config::load(&args.config)
        .with_context(|| format!("load webhook configuration from {}", args.config.display()))?;
    if snapshot.is_empty() {
        bail!("{}: no webhooks to register", args.config.display());
    }
    let ca_bundle = match &args.ca_bundle {
        Some(f) => {
            let pem = std::fs::read(f).with_context(|| format!("read {}", f.display()))?;
            Some(base64::engine::general_purpose::STANDARD.encode(pem))
        }
        None => None,
    };
    let (namespace, service, port) = args.service.clone();
    let options = admission_proxy::registration::Options {
        namespace,
        service,
        port,
        ca_bundle,
        inject_ca_from: args.inject_ca_from.clone(),
        name_suffix: args.name_suffix.clone(),
        served: args.discovery.served()?,
    };
    if let Some(served) = &options.served {
        for w in discovery_warnings(&snapshot, served) {
            eprintln!("warning: {w}");
        }
    }
    print!(
        "{}",
        admission_proxy::registration::render(&snapshot, &options)
    );
    Ok(())
}

/// `explain`: loads the configuration and the review as `serve` would and prints the verdicts.
fn explain(args: &ExplainArgs) -> anyhow::Result<()> {
    let snapshot = config::load(&args.config)
        .with_context(|| format!("load webhook configuration from {}", args.config.display()))?;
    let namespaces = args
        .namespaces_file
        .as_deref()
        .map(Namespaces::load)
        .transpose()?;
    let body =
        std::fs::read(&args.review).with_context(|| format!("read {}", args.review.display()))?;
    let review = admission_proxy::review::ParsedReview::parse(&body)
        .with_context(|| format!("parse the AdmissionReview in {}", args.review.display()))?;
    let explanation = admission_proxy::explain::explain(
        &snapshot,
        &review,
        namespaces.as_ref(),
        &args.redact_path,
    );
    if args.output == "json" {
        println!("{}", serde_json::to_string_pretty(&explanation)?);
    } else {
        print!("{}", admission_proxy::explain::render(&explanation));
    }
    Ok(())
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    // Before the configuration loads: each webhook resolves its metric series as it is
    // compiled, and series resolved without a recorder would count nothing.
    let metrics = admission_proxy::metrics::install(
        env!("CARGO_PKG_VERSION"),
        env!("ADMISSION_PROXY_GIT_COMMIT"),
    );
    admission_proxy::memory::set_release(release_freed_memory);
    // Loaded on a thread of its own, which ends here: its memory is then the allocator's to
    // reclaim (mimalloc takes over an ended thread's pages), whereas pages of the main thread,
    // which only waits from now on, would keep this snapshot's memory after a reload freed it
    // (benches/README.md, "Memory across reloads").
    let snapshot = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let loaded = config::load(&args.config);
                admission_proxy::memory::release();
                loaded
            })
            .join()
    })
    .map_err(|_| anyhow::anyhow!("loading the webhook configuration panicked"))?
    .with_context(|| format!("load webhook configuration from {}", args.config.display()))?;
    for w in &snapshot.warnings {
        tracing::warn!(warning = %w, "webhook configuration warning");
    }
    if snapshot.is_empty() {
        tracing::warn!(config = %args.config.display(), "no webhooks are configured: /readyz fails until a configuration with webhooks is loaded");
    }
    let namespaces = match &args.namespaces_file {
        Some(f) => Some(Namespaces::load(f)?),
        None => {
            if !args.watch_namespaces
                && snapshot
                    .webhooks()
                    .any(|w| !w.matcher.namespace_selector.is_empty())
            {
                tracing::warn!("a webhook has a namespaceSelector but neither --namespaces-file nor --watch-namespaces was given: namespaced requests it matches are rejected with 404 (namespace not found), as kube-apiserver does for unknown namespaces");
            }
            None
        }
    };
    let key = tls::load_certified_key(&args.tls_cert_file, &args.tls_private_key_file)
        .context("load the serving certificate")?;
    if let Some(not_after) = tls::not_after(&key) {
        admission_proxy::metrics::serving_certificate(not_after);
    }
    let resolver = Arc::new(tls::CertResolver::new(key));
    let client_auth = match &args.client_ca_file {
        Some(f) => {
            let pem = std::fs::read(f).with_context(|| format!("read {}", f.display()))?;
            let auth = tls::ClientAuth::new(&pem, args.client_cn.clone())
                .with_context(|| format!("load the client CA {}", f.display()))?;
            Some(Arc::new(auth))
        }
        None => None,
    };
    let server_tls =
        tls::server_config(resolver.clone(), args.tls_min_version, client_auth.clone())?;
    tracing::info!(
        webhooks = snapshot.len(),
        custom_resources = snapshot.custom_resources.len(),
        files = snapshot.files.len(),
        "webhook configuration loaded"
    );
    admission_proxy::metrics::config_loaded(snapshot.hash, snapshot.len());
    let mut state = server::State::new(
        snapshot,
        namespaces,
        {
            let dispatcher = Dispatcher::new(Duration::from_millis(args.timeout_margin_ms))
                .with_conversion_timeout(Duration::from_secs(
                    args.conversion_webhook_timeout_seconds,
                ))
                .with_call_queue_timeout(Duration::from_millis(args.call_queue_timeout_ms))
                .with_default_mode(args.default_mode);
            let dispatcher = match args.max_timeout_seconds {
                Some(cap) => dispatcher.with_max_timeout(Duration::from_secs(cap)),
                None => dispatcher,
            };
            match args.breaker_failures {
                Some(failures) => dispatcher.with_breakers(BreakerSettings {
                    failures,
                    cooldown: Duration::from_secs(args.breaker_cooldown_seconds),
                }),
                None => dispatcher,
            }
        },
        args.max_body_bytes,
    );
    state.metrics = metrics;
    state.limits = Arc::new(args.limits.limits());
    state.redact_paths = args.redact_path.clone();
    if let Some(endpoint) = &args.otlp_endpoint {
        state.spans = Some(admission_proxy::telemetry::Spans::start(
            &admission_proxy::telemetry::SpanSettings {
                endpoint: endpoint.clone(),
                sampling_rate_per_million: args.tracing_sampling_rate_per_million,
                service_name: "admission-proxy".into(),
            },
        )?);
        tracing::info!(endpoint = %endpoint, sampling_rate_per_million = args.tracing_sampling_rate_per_million, "exporting spans over OTLP");
    }
    if let Some(dir) = &args.capture_dir {
        if !(0.0..=1.0).contains(&args.capture_sample) {
            bail!(
                "--capture-sample {} is not between 0 and 1",
                args.capture_sample
            );
        }
        state.capture = Some(
            admission_proxy::capture::Capture::start(admission_proxy::capture::CaptureSettings {
                dir: dir.clone(),
                sample: args.capture_sample,
                max_files: args.capture_max_files,
                max_bytes: args.capture_max_bytes,
                redact_paths: args.redact_path.clone(),
            })
            .with_context(|| format!("--capture-dir {}", dir.display()))?,
        );
    }
    if args.watch_namespaces {
        let client = namespace_watch::client(args.kubeconfig.as_deref())
            .await
            .context("start the namespace watch")?;
        state.namespace_watch = Some(namespace_watch::NamespaceWatch::start(
            client,
            state.namespaces.clone(),
        ));
    }
    let state = Arc::new(state);
    let handle = server::serve_admission(args.listen, Arc::new(server_tls), state.clone())
        .with_context(|| format!("listen on {}", args.listen))?;
    let observers = serve_observations(&args, &state)?;
    let _reloader = reload::Sources {
        config: args.config.clone(),
        namespaces: args.namespaces_file.clone(),
        tls: Some((
            args.tls_cert_file.clone(),
            args.tls_private_key_file.clone(),
            resolver,
        )),
        client_ca: args.client_ca_file.clone().zip(client_auth.clone()),
        resync: Duration::from_secs(args.resync_seconds.max(1)),
    }
    .spawn(state.clone())
    .context("watch the configuration")?;
    // Logged once files are watched: a change from now on is picked up.
    tracing::info!(address = %handle.local_addr, version = VERSION, client_certificates = client_auth.is_some(), "admission-proxy listening");
    wait_for_signal().await;
    // Kubernetes removes the pod from the Service's endpoints only after it is told to stop,
    // and kube-apiserver learns of that later still: keep answering (and failing /readyz)
    // for the delay, then close the listener and let requests in flight finish.
    state.begin_shutdown();
    tracing::info!(
        delay_seconds = args.shutdown_delay_seconds,
        grace_seconds = args.shutdown_grace_seconds,
        "shutting down: /readyz fails; serving on for the shutdown delay"
    );
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_secs(args.shutdown_delay_seconds)) => {}
        _ = wait_for_signal() => tracing::info!("second signal: shutdown delay skipped"),
    }
    let answering = handle.shutdown().await;
    tracing::info!(
        in_flight = state.in_flight(),
        "listener closed; draining requests in flight"
    );
    // The probe and metrics listeners serve on through the drain (/readyz keeps failing).
    let _observers = observers;
    let grace = Duration::from_secs(args.shutdown_grace_seconds);
    let cut = match tokio::time::timeout(grace, state.drained()).await {
        Ok(()) => 0,
        Err(_) => {
            // Each admission still waiting for its backend is answered by its failurePolicy,
            // as a call that never answered would be, instead of a bare connection close.
            let cut = state.in_flight();
            state.expire_grace();
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
    if state.spans.is_some() {
        // The batch processor's thread exports what is left; bounded, and off the runtime.
        let state = state.clone();
        let _ = tokio::task::spawn_blocking(move || {
            if let Some(spans) = &state.spans {
                spans.shutdown(SPANS_FLUSHED);
            }
        })
        .await;
    }
    if cut > 0 {
        bail!("{cut} admission(s) were still in flight when --shutdown-grace-seconds ({}) ran out: each was answered by its webhook's failurePolicy", args.shutdown_grace_seconds);
    }
    tracing::info!("drained; exiting");
    Ok(())
}

/// How long the shutdown waits, after the last admission was answered, for the answers to be
/// written.
const ANSWERS_WRITTEN: Duration = Duration::from_secs(2);

/// How long the shutdown waits for the last spans to be exported (`--otlp-endpoint`).
const SPANS_FLUSHED: Duration = Duration::from_secs(2);

/// Starts the plain-HTTP probe and metrics listeners `--health-probe-bind-address` and
/// `--metrics-bind-address` ask for (one listener when they are the same address).
fn serve_observations(
    args: &ServeArgs,
    state: &Arc<server::State>,
) -> anyhow::Result<Vec<server::ServerHandle>> {
    use server::Observations;
    let listeners: Vec<(SocketAddr, Observations)> = match (
        args.health_probe_bind_address.0,
        args.metrics_bind_address.0,
    ) {
        (Some(h), Some(m)) if h == m && h.port() != 0 => vec![(h, Observations::ALL)],
        (health, metrics) => health
            .map(|a| {
                (
                    a,
                    Observations {
                        health: true,
                        metrics: false,
                    },
                )
            })
            .into_iter()
            .chain(metrics.map(|a| {
                (
                    a,
                    Observations {
                        health: false,
                        metrics: true,
                    },
                )
            }))
            .collect(),
    };
    let mut handles = Vec::new();
    for (address, serves) in listeners {
        let handle = server::serve_observations(address, state.clone(), serves)
            .with_context(|| format!("listen on {address}"))?;
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

async fn bench(args: BenchArgs) -> anyhow::Result<()> {
    if let Some(addr) = args.serve_backend {
        let tls = match (&args.tls_cert_file, &args.tls_private_key_file) {
            (Some(c), Some(k)) => Some(Arc::new(tls::CertResolver::new(tls::load_certified_key(
                c, k,
            )?))),
            _ => None,
        };
        let (handle, recorder) = admission_proxy::example_backend::start(addr, tls)
            .with_context(|| format!("listen on {addr}"))?;
        if let Some(file) = &args.record_uids {
            recorder
                .record_uids(file)
                .with_context(|| format!("open {} for appending", file.display()))?;
        }
        tracing::info!(address = %handle.local_addr, "example legacy webhook serving (POST /allow answers allowed)");
        wait_for_signal().await;
        handle.shutdown().await;
        return Ok(());
    }
    if let (Some(n), Some(url)) = (args.synthetic_config, &args.backend_url) {
        let ca = match &args.cacert {
            Some(f) => Some(std::fs::read(f).with_context(|| format!("read {}", f.display()))?),
            None => None,
        };
        print!(
            "{}",
            admission_proxy::bench::synthetic_config(n, url, ca.as_deref())
        );
        return Ok(());
    }
    let report = admission_proxy::bench::run(admission_proxy::bench::BenchOptions {
        target: args.target.unwrap_or_default(),
        compare: args.compare,
        reviews: args.reviews,
        rate: args.rate,
        duration: Duration::from_secs(args.duration),
        warmup: Duration::from_secs(args.warmup),
        connections: args.connections,
        cacert: args.cacert,
        round: Duration::from_secs_f64(args.round_seconds.max(0.1)),
    })
    .await?;
    if args.output == "json" {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", admission_proxy::bench::render_table(&report));
    }
    Ok(())
}

async fn wait_for_signal() {
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
