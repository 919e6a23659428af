//! The command line: clap's definitions of every subcommand's flags (their doc comments are
//! the `--help` text), the flags' parsers, and `serve`'s flags as the library's plain-data
//! [`ServeConfig`]. Uses the library's types the flags parse into; runs nothing.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use admission_proxy::authorizer::CacheTtl;
use admission_proxy::capture::CaptureSettings;
use admission_proxy::dispatch::breaker::BreakerSettings;
use admission_proxy::exclusions::ExclusionSettings;
use admission_proxy::kube_version::KubeVersion;
use admission_proxy::serve::{self, ServeConfig};
use admission_proxy::telemetry::SpanSettings;
use admission_proxy::{server, tls};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "admission-proxy",
    version = serve::VERSION,
    about = "A sidecar in front of legacy Kubernetes admission webhooks: pre-filters requests as kube-apiserver would, negotiates AdmissionReview versions, enforces timeoutSeconds and failurePolicy."
)]
pub(crate) struct Cli {
    /// Log filter (tracing EnvFilter syntax), e.g. `info`, `admission_proxy=debug`; RUST_LOG
    /// wins. Defaults to `info` for serve and `warn` for demo (which prints its own lines).
    #[arg(long, global = true)]
    pub(crate) log_level: Option<String>,
    /// Log as JSON lines.
    #[arg(long, global = true)]
    pub(crate) log_json: bool,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
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
    /// matchPolicy and failurePolicy, the proxy's Service as clientConfig (docs/retiring.md, "Cutting
    /// over").
    Registration(RegistrationArgs),
    /// For a captured AdmissionReview: for every loaded webhook, whether kube-apiserver would
    /// call it and why (rules, namespaceSelector and objectSelector with the labels used, each
    /// matchCondition's value or error, failurePolicy), and the exact body a call would send.
    Explain(ExplainArgs),
    /// The candidate report: per candidate (a replacement attached to a legacy webhook), how
    /// many requests it was compared on, the agreement rate, and its distinct disagreements
    /// grouped, from the proxy's metrics and its disagreement captures.
    Candidates(CandidatesArgs),
}

#[derive(clap::Args)]
pub(crate) struct CandidatesArgs {
    /// A proxy's metrics: a file holding a `/metrics` scrape, or an `http://` URL of
    /// `serve --metrics-bind-address` (e.g. `http://127.0.0.1:8080/metrics`). Repeat it for
    /// each replica of a webhook's Deployment: the counts add up.
    #[arg(
        long,
        required_unless_present = "prometheus",
        conflicts_with = "prometheus"
    )]
    pub(crate) metrics: Vec<String>,
    /// A Prometheus server that scrapes the proxies (`http://host:9090`): its query API sums
    /// every replica's counts by webhook, candidate and result.
    #[arg(long)]
    pub(crate) prometheus: Option<String>,
    /// Count only since then: with --prometheus a duration (`2h`, `30m`, `90s`) or an RFC 3339
    /// time (`increase` over that window); with --metrics a file holding a scrape saved then
    /// (of the same proxies, in the same order), subtracted from the current one. A fix to a
    /// candidate is then not buried under the disagreements before it.
    #[arg(long)]
    pub(crate) since: Option<String>,
    /// A proxy's `serve --capture-dir`, where every disagreement is captured; repeat it for
    /// each replica.
    #[arg(long)]
    pub(crate) capture_dir: Vec<PathBuf>,
    /// `text` (default) or `json`.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    pub(crate) output: String,
    /// With an `http://` --metrics or --prometheus: the most each request may take, from
    /// connecting to its last byte; a slower answer is an error.
    #[arg(long, default_value_t = 30)]
    pub(crate) scrape_timeout_seconds: u64,
}

#[derive(clap::Args)]
pub(crate) struct ExplainArgs {
    /// Directory (or file) of ValidatingWebhookConfiguration / MutatingWebhookConfiguration.
    #[arg(long)]
    pub(crate) config: PathBuf,
    /// An AdmissionReview (JSON, admission.k8s.io/v1 or v1beta1) as kube-apiserver sends it.
    #[arg(long)]
    pub(crate) review: PathBuf,
    /// Namespaces file (`kubectl get namespaces -o yaml`) for namespaceSelector.
    #[arg(long)]
    pub(crate) namespaces_file: Option<PathBuf>,
    /// `text` (default) or `json`.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    pub(crate) output: String,
    /// A field to redact in the bodies shown, besides Secret values (always redacted), as
    /// `serve --redact-path` takes it; repeatable.
    #[arg(long)]
    pub(crate) redact_path: Vec<admission_proxy::redact::RedactPath>,
    /// Answer matchConditions' `authorizer` checks by asking this cluster (SubjectAccessReview,
    /// as `serve --authorizer=subjectaccessreview` does). Without it no check is asked and
    /// each shows as an error, "not checked".
    #[arg(long)]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// The proxy-wide exclusions `serve` is given: whether one exempts the review is shown
    /// before the webhooks' verdicts.
    #[command(flatten)]
    pub(crate) exclusions: ExclusionArgs,
    /// The cluster's Kubernetes version (`1.30`): what its kube-apiserver sends and how it
    /// charges CEL; never what the proxy evaluates.
    #[arg(long)]
    pub(crate) kube_version: Option<KubeVersion>,
}

#[derive(clap::Args)]
pub(crate) struct RegistrationArgs {
    /// Directory (or file) of the legacy ValidatingWebhookConfiguration /
    /// MutatingWebhookConfiguration, as the proxy serves it.
    #[arg(long)]
    pub(crate) config: PathBuf,
    /// The proxy's Service, `NAMESPACE/NAME[:PORT]` (port 443 by default). Its namespace is
    /// excluded from every namespaceSelector so that the proxy never blocks its own pods.
    #[arg(long, value_parser = admission_proxy::tools::registration::parse_service, required_unless_present = "url", conflicts_with = "url")]
    pub(crate) service: Option<(String, String, u16)>,
    /// Where kube-apiserver reaches the proxy, `https://HOST[:PORT]`: written as
    /// `clientConfig.url` with each webhook's route appended
    /// (`https://HOST:PORT/webhooks/validating/NAME`) instead of `clientConfig.service`.
    #[arg(long, value_parser = admission_proxy::tools::registration::parse_url, requires = "namespace")]
    pub(crate) url: Option<String>,
    /// With --url: the namespace the proxy's pods run in, excluded from every
    /// namespaceSelector as --service's namespace is.
    #[arg(long, requires = "url")]
    pub(crate) namespace: Option<String>,
    /// PEM CA that signed the proxy's serving certificate, written as caBundle.
    #[arg(long)]
    pub(crate) ca_bundle: Option<PathBuf>,
    /// Add `cert-manager.io/inject-ca-from: NAMESPACE/CERTIFICATE` so that cert-manager's CA
    /// injector fills in caBundle.
    #[arg(long)]
    pub(crate) inject_ca_from: Option<String>,
    /// Appended to each legacy configuration's name (so that both exist during the cutover).
    #[arg(long, default_value = "-admission-proxy")]
    pub(crate) name_suffix: String,
    /// One webhook per legacy configuration, `<configuration>.chain.admission-proxy.io`,
    /// calling the proxy's chain route `/configurations/{validating|mutating}/{configuration}`
    /// (which runs that configuration's webhooks as kube-apiserver would) with rules,
    /// selectors and policies wide enough for every one of them (docs/commands.md, "`registration
    /// --chain`").
    #[arg(long)]
    pub(crate) chain: bool,
    /// Write for kube-apiserver's KEP-5793 `staticManifestsDir` of the `validating` or
    /// `mutating` webhook admission plugin: that kind only, names ending in `.static.k8s.io`
    /// (appended), checked as `check --static-manifests` checks. Needs --url and --ca-bundle
    /// (the loader takes no `service`, and no CA injector writes into its files).
    #[arg(long, requires_all = ["url", "ca_bundle"], conflicts_with = "inject_ca_from")]
    pub(crate) static_manifests: Option<admission_proxy::config::static_manifests::StaticPlugin>,
    /// Print, instead of the registration, what to delete: the cluster's Validating- and
    /// MutatingWebhookConfigurations labelled as this proxy's registration
    /// (`admission-proxy.io/registration`) that the registration no longer includes (a retired
    /// webhook's, `registered: false`), one `kind/name` per line for `xargs -r kubectl delete`.
    /// Reads the cluster named by --kubeconfig.
    #[arg(long, conflicts_with = "static_manifests")]
    pub(crate) prune: bool,
    #[command(flatten)]
    pub(crate) discovery: DiscoveryArgs,
}

/// Reading the cluster's served resources (`registration`, `check`).
#[derive(clap::Args)]
pub(crate) struct DiscoveryArgs {
    /// Read the cluster's served resources (discovery: /api, /apis) to register only served
    /// versions and to report every rule no served resource reaches.
    #[arg(long)]
    pub(crate) discover: bool,
    /// Kubeconfig for --discover and `registration --prune` (default: KUBECONFIG,
    /// ~/.kube/config, then the pod's service account).
    #[arg(long)]
    pub(crate) kubeconfig: Option<PathBuf>,
}

#[derive(clap::Args)]
pub(crate) struct CheckArgs {
    /// Directory (or file) of ValidatingWebhookConfiguration / MutatingWebhookConfiguration.
    #[arg(long)]
    pub(crate) config: PathBuf,
    /// Namespaces file (`kubectl get namespaces -o yaml`) to validate as well.
    #[arg(long)]
    pub(crate) namespaces_file: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) discovery: DiscoveryArgs,
    /// The proxy-wide exclusion flags `serve` is given, validated as `serve` validates them.
    #[command(flatten)]
    pub(crate) exclusions: ExclusionArgs,
    /// Exit 1 on errors only (`error`), or on warnings too (`warning`: safety findings,
    /// discovery and load warnings), for a pipeline to gate on.
    #[arg(long, value_enum, default_value_t = FailOn::Error)]
    pub(crate) fail_on: FailOn,
    /// Also check --config as a KEP-5793 `staticManifestsDir` of kube-apiserver's
    /// `validating` or `mutating` webhook admission plugin (v1 configurations of that kind
    /// only, names ending in `.static.k8s.io`, `clientConfig.url` and `caBundle`).
    #[arg(long)]
    pub(crate) static_manifests: Option<admission_proxy::config::static_manifests::StaticPlugin>,
    /// The cluster's Kubernetes version (`1.30`): warns of what its kube-apiserver alone would
    /// refuse (matchConditions before 1.28, CEL libraries newer than it compiles new
    /// expressions against); the proxy evaluates them at any version.
    #[arg(long)]
    pub(crate) kube_version: Option<KubeVersion>,
}

/// `check --fail-on`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum FailOn {
    /// Invalid configuration only.
    Error,
    /// Any warning as well.
    Warning,
}

#[derive(clap::Args)]
pub(crate) struct BenchArgs {
    /// URL to send AdmissionReviews to, e.g. https://127.0.0.1:8443/webhooks/NAME.
    #[arg(long, required_unless_present_any = ["serve_backend", "synthetic_config"])]
    pub(crate) target: Option<String>,
    /// A second URL (e.g. the backend directly), interleaved in alternating rounds.
    #[arg(long)]
    pub(crate) compare: Option<String>,
    /// AdmissionReview file or directory (relative to the working directory: the repository's
    /// root by default).
    #[arg(long, default_value = "tests/fixtures/admission-reviews")]
    pub(crate) reviews: PathBuf,
    /// Requests per second.
    #[arg(long, default_value_t = 1000)]
    pub(crate) rate: u32,
    /// Measured seconds.
    #[arg(long, default_value_t = 10)]
    pub(crate) duration: u64,
    /// Warm-up seconds, not measured.
    #[arg(long, default_value_t = 2)]
    pub(crate) warmup: u64,
    /// Concurrent keep-alive connections.
    #[arg(long, default_value_t = 8)]
    pub(crate) connections: usize,
    /// PEM CA that signed the targets' certificates (system roots otherwise).
    #[arg(long)]
    pub(crate) cacert: Option<PathBuf>,
    /// Seconds per round when comparing.
    #[arg(long, default_value_t = 1.0)]
    pub(crate) round_seconds: f64,
    /// `table` or `json`.
    #[arg(long, default_value = "table")]
    pub(crate) output: String,
    /// Instead of benchmarking, serve an allow-all legacy webhook stand-in on ADDR (paths as
    /// in the example backend, e.g. /allow); HTTPS with --tls-cert-file/--tls-private-key-file,
    /// else plain HTTP (loopback only).
    #[arg(long)]
    pub(crate) serve_backend: Option<SocketAddr>,
    /// With --serve-backend: append every AdmissionReview's request.uid to FILE as it arrives
    /// (a uid the backend received twice shows as a repeated line, across restarts too).
    #[arg(long, requires = "serve_backend")]
    pub(crate) record_uids: Option<PathBuf>,
    /// Instead of benchmarking, print a webhook configuration with this many webhooks in a
    /// realistic mix (rules, selectors, matchConditions) calling --backend-url, plus
    /// `skip.bench.example.com` that matches nothing; --cacert becomes their caBundle.
    #[arg(long, requires = "backend_url")]
    pub(crate) synthetic_config: Option<usize>,
    /// The URL the --synthetic-config webhooks call.
    #[arg(long)]
    pub(crate) backend_url: Option<String>,
    #[arg(long, requires = "tls_private_key_file")]
    pub(crate) tls_cert_file: Option<PathBuf>,
    #[arg(long)]
    pub(crate) tls_private_key_file: Option<PathBuf>,
}

#[derive(clap::Args)]
#[command(group = clap::ArgGroup::new("kubernetes_api").multiple(true).args(["watch_namespaces", "authorizer"]))]
pub(crate) struct ServeArgs {
    /// Directory (or file) of ValidatingWebhookConfiguration / MutatingWebhookConfiguration
    /// YAML or JSON; watched and hot-reloaded.
    #[arg(long)]
    pub(crate) config: PathBuf,
    /// Address to listen on: `HOST:PORT`, or `:PORT` for every address (as in Go); port 0
    /// picks a free port (logged).
    #[arg(long, default_value = ":8443", value_parser = parse_listen)]
    pub(crate) listen: SocketAddr,
    /// Plain-HTTP address for /livez, /healthz and /readyz (as controller-runtime's
    /// --health-probe-bind-address), e.g. `:8081`; `0` (default) for none. The kubelet's
    /// probes send no client certificate, so with --client-ca-file they need this port.
    #[arg(long, default_value = "0", value_parser = parse_bind_address)]
    pub(crate) health_probe_bind_address: BindAddress,
    /// Plain-HTTP address for /metrics (as controller-runtime's --metrics-bind-address), e.g.
    /// `:8080`; `0` (default) for none. The same address as --health-probe-bind-address
    /// serves both on one listener.
    #[arg(long, default_value = "0", value_parser = parse_bind_address)]
    pub(crate) metrics_bind_address: BindAddress,
    /// PEM certificate chain served to kube-apiserver; reloaded with its key on change. A pair
    /// whose key does not match is refused (at start, and on reload the last good pair stays).
    #[arg(long)]
    pub(crate) tls_cert_file: PathBuf,
    /// PEM private key of --tls-cert-file.
    #[arg(long)]
    pub(crate) tls_private_key_file: PathBuf,
    /// Lowest TLS version accepted from clients.
    #[arg(long, value_enum, default_value = "1.2")]
    pub(crate) tls_min_version: tls::MinVersion,
    /// PEM CA certificate(s): require a client certificate issued by one of them (kube-apiserver
    /// presents one when its AdmissionConfiguration kubeconfig names it). Reloaded on change.
    /// Without it no client certificate is asked for.
    #[arg(long)]
    pub(crate) client_ca_file: Option<PathBuf>,
    /// Accept only client certificates whose subject CN is one of these (comma-separated or
    /// repeated); needs --client-ca-file.
    #[arg(long, value_delimiter = ',', requires = "client_ca_file")]
    pub(crate) client_cn: Vec<String>,
    /// Namespaces for namespaceSelector (`kubectl get namespaces -o yaml`); watched. The
    /// offline alternative to --watch-namespaces.
    #[arg(long, conflicts_with = "watch_namespaces")]
    pub(crate) namespaces_file: Option<PathBuf>,
    /// Keep namespaces (labels, and the objects policies read as namespaceObject) from a live
    /// watch of the cluster's Namespaces (needs get, list and watch on namespaces); a namespace not yet seen is fetched with a
    /// live GET, as kube-apiserver does. /readyz waits for the first list.
    #[arg(long)]
    pub(crate) watch_namespaces: bool,
    /// Answer matchConditions' `authorizer` checks (KEP-3716's breakglass, for one) with
    /// SubjectAccessReview for the requesting user (needs create on subjectaccessreviews).
    /// Without it, a configuration whose matchConditions use `authorizer` is refused.
    #[arg(long, value_enum)]
    pub(crate) authorizer: Option<AuthorizerKind>,
    /// How long an allowed SubjectAccessReview answer is reused, a Go duration (kube-apiserver's
    /// --authorization-webhook-cache-authorized-ttl, 5m); `0s` asks every time.
    #[arg(long, default_value = "5m", requires = "authorizer", value_parser = parse_ttl)]
    pub(crate) authorizer_cache_authorized_ttl: Duration,
    /// How long a denied (or no opinion) answer is reused (kube-apiserver's
    /// --authorization-webhook-cache-unauthorized-ttl, 30s). Failed reviews are never reused.
    #[arg(long, default_value = "30s", requires = "authorizer", value_parser = parse_ttl)]
    pub(crate) authorizer_cache_unauthorized_ttl: Duration,
    /// Kubeconfig for --watch-namespaces and --authorizer outside a pod (default: KUBECONFIG,
    /// ~/.kube/config, then the pod's service account).
    #[arg(long, requires = "kubernetes_api")]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// The cluster's Kubernetes version (`1.30`): what its kube-apiserver sends (the virtual
    /// resources from 1.37) and how it charges CEL (strict library costs from 1.32); never what
    /// the proxy evaluates. Default: the cluster's `/version` with --kubeconfig, else the
    /// current releases' behaviour.
    #[arg(long)]
    pub(crate) kube_version: Option<KubeVersion>,
    /// Largest accepted AdmissionReview body, in bytes (kube-apiserver's own limit is 3 MiB).
    #[arg(long, default_value_t = server::DEFAULT_MAX_BODY_BYTES)]
    pub(crate) max_body_bytes: usize,
    /// Milliseconds kept back from kube-apiserver's ?timeout= so the proxy answers first.
    #[arg(long, default_value_t = 250)]
    pub(crate) timeout_margin_ms: u64,
    /// Seconds each CRD conversion webhook call may take (matchPolicy Equivalent on a custom
    /// resource with strategy Webhook); kube-apiserver uses 30 and the CRD cannot set it. Always
    /// bounded by kube-apiserver's own ?timeout= as well.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=30))]
    pub(crate) conversion_webhook_timeout_seconds: u64,
    /// Bound every webhook call to this many seconds, below its timeoutSeconds (1-30): a
    /// webhook registered with 30 s cannot hold kube-apiserver for 30 s. Off unless set; the
    /// maxTimeoutSeconds webhook option bounds one webhook.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=30))]
    pub(crate) max_timeout_seconds: Option<u64>,
    /// Open a backend's circuit breaker after this many consecutive calls fail to connect,
    /// complete TLS or answer in time: its webhooks are then answered by failurePolicy at
    /// once ("backend unavailable, failing fast") until one probe call succeeds. Off unless set.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) breaker_failures: Option<u32>,
    /// Seconds an open breaker answers at once before letting one probe call through.
    #[arg(long, default_value_t = 10, requires = "breaker_failures", value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub(crate) breaker_cooldown_seconds: u64,
    /// Milliseconds a call waits for a free slot of a webhook with the maxConcurrentCalls
    /// option before failurePolicy answers (class overloaded).
    #[arg(long, default_value_t = 100)]
    pub(crate) call_queue_timeout_ms: u64,
    /// The mode of every webhook without a mode option: Enforce (as kube-apiserver), Warn or
    /// Shadow (docs/operating.md, "Operating legacy webhooks safely").
    #[arg(long, value_enum, default_value = "Enforce")]
    pub(crate) default_mode: admission_proxy::config::options::Mode,
    /// Write sampled AdmissionReviews (redacted, with the decision and its latency) to DIR as
    /// files `explain --review` reads. Secret data and stringData are always redacted.
    #[arg(long)]
    pub(crate) capture_dir: Option<PathBuf>,
    /// Fraction of admissions captured (0-1), chosen by uid.
    #[arg(long, default_value_t = 0.01, requires = "capture_dir")]
    pub(crate) capture_sample: f64,
    /// Capture files kept; the oldest are removed.
    #[arg(long, default_value_t = 1000, requires = "capture_dir")]
    pub(crate) capture_max_files: usize,
    /// Bytes of capture files kept; the oldest are removed.
    #[arg(long, default_value_t = 100 * 1024 * 1024, requires = "capture_dir")]
    pub(crate) capture_max_bytes: u64,
    /// A field to redact in captures and trace logs, besides Secret values (always
    /// redacted): a JSON Pointer into the AdmissionReview
    /// (/request/object/metadata/annotations/example.com~1token) or a dotted path
    /// (request.object.spec.password); repeatable.
    #[arg(long)]
    pub(crate) redact_path: Vec<admission_proxy::redact::RedactPath>,
    /// Seconds between periodic re-reads of watched files (a backstop for missed events).
    #[arg(long, default_value_t = 30)]
    pub(crate) resync_seconds: u64,
    /// Threads serving requests. One (as linkerd2-proxy defaults to) costs the least CPU per
    /// request and keeps tails short when the sidecar shares cores with its webhook; raise it
    /// with the pod's CPU limit (benches/README.md, "What the profiles found").
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub(crate) worker_threads: u16,
    /// Seconds the proxy keeps serving after SIGTERM with /readyz failing, so that the
    /// endpoint leaves the Service before the listener closes (kube-apiserver learns of
    /// endpoint changes late). A second SIGTERM skips the rest of the delay.
    #[arg(long, default_value_t = 5)]
    pub(crate) shutdown_delay_seconds: u64,
    /// Seconds requests in flight may take to finish once the listener is closed; keep
    /// delay + grace below the pod's terminationGracePeriodSeconds.
    #[arg(long, default_value_t = 20)]
    pub(crate) shutdown_grace_seconds: u64,
    /// Export the proxy's own spans (admission, matching, conversion, each backend call) to
    /// this OTLP/HTTP collector, e.g. `http://otel-collector:4318` (`/v1/traces` is appended).
    /// Off unless set; without it the caller's traceparent/tracestate are forwarded unchanged.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub(crate) otlp_endpoint: Option<String>,
    /// Requests without a sampled parent span that are traced, per million (kube-apiserver's
    /// TracingConfiguration samplingRatePerMillion). A caller's traceparent decides for its
    /// own requests.
    #[arg(long, default_value_t = 0, requires = "otlp_endpoint", value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub(crate) tracing_sampling_rate_per_million: u32,
    #[command(flatten)]
    pub(crate) limits: LimitArgs,
    #[command(flatten)]
    pub(crate) exclusions: ExclusionArgs,
}

/// Proxy-wide exclusions (`serve`, and `check` and `explain` to validate and show them): opt-in
/// departures from kube-apiserver's exactness (docs/operating.md, "Proxy-wide exclusions").
#[derive(clap::Args)]
pub(crate) struct ExclusionArgs {
    /// Answer every request in this namespace allowed before any webhook, without calling
    /// anything (as Gatekeeper's --exempt-namespace); repeatable. Requests on the Namespace
    /// itself are exempt too; other cluster-scoped requests never are.
    #[arg(long = "exempt-namespace", value_name = "NAME")]
    pub(crate) exempt_namespaces: Vec<String>,
    /// Answer allowed every request in a namespace whose labels match this selector, written
    /// as kubectl's -l takes it (`tier=system`, `env in (ops,infra)`); labels from
    /// --namespaces-file or --watch-namespaces.
    #[arg(long, value_name = "SELECTOR")]
    pub(crate) exempt_namespace_selector: Option<String>,
    /// YAML or JSON file `{namespaces: [...], namespaceSelector: {...}, matchConditions: [{name,
    /// expression}]}`: namespaces as above, and CEL matchConditions (the webhooks' environment,
    /// without `authorizer`) of which any one true exempts the request. Read at start.
    #[arg(long, value_name = "FILE")]
    pub(crate) exclusions_file: Option<PathBuf>,
}

impl ExclusionArgs {
    /// The library's settings for these flags, for a cluster of `kube_version` (the virtual
    /// resources its kube-apiserver never sends to webhooks are exempt).
    pub(crate) fn settings(&self, kube_version: Option<KubeVersion>) -> ExclusionSettings {
        ExclusionSettings {
            namespaces: self.exempt_namespaces.clone(),
            namespace_selector: self.exempt_namespace_selector.clone(),
            file: self.exclusions_file.clone(),
            virtual_resources: false,
        }
        .for_kube_version(kube_version)
    }
}

impl ServeArgs {
    /// The library's serve configuration these flags describe.
    pub(crate) fn config(self) -> ServeConfig {
        let seconds = Duration::from_secs;
        ServeConfig {
            config: self.config,
            listen: self.listen,
            health_probe_address: self.health_probe_bind_address.0,
            metrics_address: self.metrics_bind_address.0,
            tls_cert_file: self.tls_cert_file,
            tls_private_key_file: self.tls_private_key_file,
            tls_min_version: self.tls_min_version,
            client_ca_file: self.client_ca_file,
            client_cns: self.client_cn,
            namespaces_file: self.namespaces_file,
            watch_namespaces: self.watch_namespaces,
            authorizer: self
                .authorizer
                .map(|AuthorizerKind::Subjectaccessreview| CacheTtl {
                    authorized: self.authorizer_cache_authorized_ttl,
                    unauthorized: self.authorizer_cache_unauthorized_ttl,
                }),
            kubeconfig: self.kubeconfig,
            kube_version: self.kube_version,
            max_body_bytes: self.max_body_bytes,
            timeout_margin: Duration::from_millis(self.timeout_margin_ms),
            conversion_webhook_timeout: seconds(self.conversion_webhook_timeout_seconds),
            max_timeout: self.max_timeout_seconds.map(seconds),
            breaker: self.breaker_failures.map(|failures| BreakerSettings {
                failures,
                cooldown: seconds(self.breaker_cooldown_seconds),
            }),
            call_queue_timeout: Duration::from_millis(self.call_queue_timeout_ms),
            default_mode: self.default_mode,
            capture: self.capture_dir.map(|dir| CaptureSettings {
                dir,
                sample: self.capture_sample,
                max_files: self.capture_max_files,
                max_bytes: self.capture_max_bytes,
                redact_paths: self.redact_path.clone(),
            }),
            redact_paths: self.redact_path,
            resync: seconds(self.resync_seconds),
            shutdown_delay: seconds(self.shutdown_delay_seconds),
            shutdown_grace: seconds(self.shutdown_grace_seconds),
            spans: self.otlp_endpoint.map(|endpoint| SpanSettings {
                endpoint,
                sampling_rate_per_million: self.tracing_sampling_rate_per_million,
                service_name: "admission-proxy".into(),
            }),
            limits: self.limits.limits(),
            exclusions: self.exclusions.settings(self.kube_version),
        }
    }
}

/// The listener's limits (`server::Limits`; docs/reference/configuration.md "Proxy options"). Defaults follow Go's
/// `http.Server` as kube-apiserver configures it where it has one.
#[derive(clap::Args)]
pub(crate) struct LimitArgs {
    /// Seconds from accepting a connection to the end of its TLS handshake.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) tls_handshake_timeout_seconds: u64,
    /// Seconds from a request's first byte to the end of its header (a client trickling
    /// its header is closed then).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) request_header_timeout_seconds: u64,
    /// Seconds from the end of a request's header to the end of its body.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) request_body_timeout_seconds: u64,
    /// Seconds the socket may take to accept an answer: a client that stops reading is closed
    /// then, and the answer's memory freed.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) write_timeout_seconds: u64,
    /// Seconds a keep-alive connection may wait for its next request. Keep it above the 90 s
    /// kube-apiserver keeps idle connections, or it may send on a connection being closed.
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) idle_timeout_seconds: u64,
    /// Bytes a request may send before its header ends (Go's default, 1 MiB).
    #[arg(long, default_value_t = 1 << 20, value_parser = clap::value_parser!(u64).range(1024..))]
    pub(crate) max_header_bytes: u64,
    /// Client connections open at once; more are closed at once and counted.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) max_connections: u64,
    /// Admissions answered at once; more are answered 429 with Retry-After: 1, which
    /// kube-apiserver retries within its deadline.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) max_requests_inflight: u64,
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
pub(crate) struct BindAddress(Option<SocketAddr>);

/// What answers matchConditions' `authorizer` checks (`--authorizer`).
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub(crate) enum AuthorizerKind {
    /// A SubjectAccessReview (authorization.k8s.io/v1) per check, cached.
    Subjectaccessreview,
}

/// A cache TTL: a Go duration (`5m`, `30s`, `0s`), as kube-apiserver's flags take it, parsed
/// by kube-core; not negative.
fn parse_ttl(s: &str) -> anyhow::Result<Duration> {
    let d: kube::core::Duration = s
        .parse()
        .map_err(|e| anyhow::anyhow!("{s:?} is not a duration like 5m or 30s: {e}"))?;
    anyhow::ensure!(!d.is_negative(), "{s:?}: a TTL cannot be negative");
    Ok(d.into())
}

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
pub(crate) struct DemoArgs {
    /// Webhook configuration to run with. The defaults are relative to the working directory:
    /// the repository's root, where the README runs the demo.
    #[arg(long, default_value = "config")]
    pub(crate) config: PathBuf,
    /// Directory of captured AdmissionReview bodies (with index.json).
    #[arg(long, default_value = "tests/fixtures/admission-reviews")]
    pub(crate) reviews: PathBuf,
    /// Namespaces for namespaceSelector.
    #[arg(long, default_value = "tests/fixtures/namespaces.yaml")]
    pub(crate) namespaces_file: PathBuf,
    /// Where the example legacy backend listens (the bundled config points at it).
    #[arg(long, default_value = "127.0.0.1:18443")]
    pub(crate) backend_listen: SocketAddr,
    /// Replay every captured review, not just the curated selection.
    #[arg(long)]
    pub(crate) all: bool,
}
