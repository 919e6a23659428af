//! The subcommands other than `serve`: `check`, `explain` and `registration` (the library's
//! `config`, `explain`, `registration` and `served`, printed), and the tools that are not
//! library API, `demo` and `bench` (with the example backend). Errors are `anyhow`.

use std::sync::Arc;
use std::time::Duration;

use admission_proxy::authorizer::{CacheTtl, SubjectAccessReviews};
use admission_proxy::exclusions::Exclusions;
use admission_proxy::kube_version::KubeVersion;
use admission_proxy::matching::authz::{CheckKey, Decision};
use admission_proxy::{config, matching::Namespaces, serve, tls};
use anyhow::{bail, Context};

use crate::cli::{
    BenchArgs, CandidatesArgs, CheckArgs, DemoArgs, DiscoveryArgs, ExplainArgs, FailOn,
    RegistrationArgs,
};
use crate::{bench, demo, example_backend};

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
            let mut config =
                admission_proxy::kube_client::config(self.kubeconfig.as_deref()).await?;
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

/// The names of the cluster's Validating- and MutatingWebhookConfigurations labelled as the
/// registration of the proxy `options` describe (`registration --prune`).
fn listed_registrations(
    kubeconfig: Option<&std::path::Path>,
    options: &admission_proxy::tools::registration::Options,
) -> anyhow::Result<Vec<(admission_proxy::api::WebhookType, String)>> {
    use admission_proxy::api::WebhookType;
    use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("start the tokio runtime")?;
    runtime.block_on(async {
        let config = admission_proxy::kube_client::config(kubeconfig).await?;
        let client = kube::Client::try_from(config)?;
        let selector = format!(
            "{}={}",
            admission_proxy::tools::registration::REGISTRATION_LABEL,
            admission_proxy::tools::registration::registration_id(options)
        );
        let mut listed = Vec::new();
        for webhook_type in [WebhookType::Validating, WebhookType::Mutating] {
            let kind = webhook_type.configuration_kind();
            let gvk = GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
            let plural = format!("{}s", kind.to_ascii_lowercase());
            let resource = ApiResource::from_gvk_with_plural(&gvk, &plural);
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
            let list = api
                .list(&ListParams::default().labels(&selector))
                .await
                .map_err(admission_proxy::kube_client::KubeError)
                .with_context(|| format!("list {plural} labelled {selector}"))?;
            for object in list.items {
                if let Some(name) = object.metadata.name {
                    listed.push((webhook_type, name));
                }
            }
        }
        Ok(listed)
    })
}

/// `--kube-version`, else the version of the cluster `kubeconfig` names when the command is to
/// read the cluster (`Some`: `check --discover`, `explain --kubeconfig`), else none. A cluster
/// that cannot tell is `Err` with why: the caller warns and checks nothing by version, as
/// `serve` does.
fn kube_version_for(
    given: Option<KubeVersion>,
    cluster: Option<Option<&std::path::Path>>,
) -> Result<Option<KubeVersion>, String> {
    let (None, Some(kubeconfig)) = (given, cluster) else {
        return Ok(given);
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("start the tokio runtime: {e}"))?;
    let (version, _) = runtime
        .block_on(admission_proxy::kube_version::of_cluster(kubeconfig))
        .map_err(|e| format!("the cluster's Kubernetes version could not be read from /version ({e}): nothing is checked by version (give --kube-version)"))?;
    Ok(Some(version))
}

/// What `check` found so far: each problem (`error: ...`) and warning (`warning: ...`) is
/// printed on its own line as it is found, and counted for the verdict.
#[derive(Default)]
struct Tally {
    problems: usize,
    warnings: usize,
}

impl Tally {
    fn error(&mut self, problem: impl std::fmt::Display) {
        println!("error: {problem}");
        self.problems += 1;
    }

    fn warning(&mut self, warning: impl std::fmt::Display) {
        println!("warning: {warning}");
        self.warnings += 1;
    }
}

/// `check`: loads as `serve` would and prints the result on stdout; returns whether it is valid.
pub(crate) fn check(args: &CheckArgs) -> bool {
    let mut tally = Tally::default();
    if args.discovery.kubeconfig.is_some() && !args.discovery.discover {
        tally.error(format_args!("--kubeconfig is read with --discover only"));
        return false;
    }
    let cluster = args
        .discovery
        .discover
        .then_some(args.discovery.kubeconfig.as_deref());
    let kube_version = kube_version_for(args.kube_version, cluster).unwrap_or_else(|why| {
        tally.warning(why);
        None
    });
    let loaded_exclusions = Exclusions::load(&args.exclusions.settings(kube_version));
    let exempt = loaded_exclusions.as_ref().ok().and_then(Option::as_ref);
    let summary = check_configuration(args, kube_version, exempt, &mut tally);
    let namespaces = args
        .namespaces_file
        .as_ref()
        .map(|f| match Namespaces::load(f) {
            Ok(ns) => format!("; {}: {} namespace(s)", f.display(), ns.len()),
            Err(e) => {
                tally.error(e);
                format!("; {}: invalid", f.display())
            }
        });
    let exclusions = match loaded_exclusions {
        Ok(None) => String::new(),
        Ok(Some(exclusions)) => format!("; exclusions: {}", exclusions.summary()),
        Err(e) => {
            e.problems().iter().for_each(|p| tally.error(p));
            "; exclusions: invalid".to_string()
        }
    };
    if let Some(plugin) = args.static_manifests {
        if let Ok(files) = config::read_files(&args.config) {
            config::static_manifests::check(&files, plugin)
                .iter()
                .for_each(|p| tally.error(p));
        }
    }
    let Tally { problems, warnings } = tally;
    let verdict = if problems == 0 { "valid" } else { "INVALID" };
    let warned = if warnings > 0 {
        format!("; {warnings} warning(s)")
    } else {
        String::new()
    };
    println!(
        "{verdict}: {summary}{}{exclusions}{warned}",
        namespaces.unwrap_or_default()
    );
    problems == 0 && (warnings == 0 || args.fail_on == FailOn::Error)
}

/// `check` of the configuration directory at `kube_version`, with the proxy-wide exemptions
/// `exempt` (the safety findings leave out what they exempt): its problems and warnings go to
/// `tally`; returns its summary (`DIR: N webhook(s) in M file(s)...`).
fn check_configuration(
    args: &CheckArgs,
    kube_version: Option<KubeVersion>,
    exempt: Option<&Exclusions>,
    tally: &mut Tally,
) -> String {
    let snapshot = match config::load(&args.config) {
        Ok(snapshot) => snapshot,
        Err(config::ConfigError::Invalid(list)) => {
            list.iter().for_each(|p| tally.error(p));
            return format!("{}: {} problem(s)", args.config.display(), list.len());
        }
        Err(e) => {
            tally.error(e);
            return format!("{}: cannot be read", args.config.display());
        }
    };
    snapshot.warnings.iter().for_each(|w| tally.warning(w));
    snapshot
        .kube_version_warnings(kube_version)
        .iter()
        .for_each(|w| tally.warning(w));
    admission_proxy::tools::findings::findings(&snapshot, None, exempt)
        .iter()
        .for_each(|f| tally.warning(f));
    // Not a problem: `serve --authorizer=subjectaccessreview` answers them.
    let authorizer = match snapshot.require_authorizer(false) {
        Err(config::ConfigError::Invalid(uses)) => {
            for p in &uses {
                println!("authorizer: {p}");
            }
            format!("; {} matchCondition(s) use authorizer", uses.len())
        }
        _ => String::new(),
    };
    let cluster = match args.discovery.served() {
        Ok(None) => String::new(),
        Ok(Some(served)) => {
            discovery_warnings(&snapshot, &served)
                .iter()
                .for_each(|w| tally.warning(w));
            format!(
                "; cluster: {} group/version(s) served",
                served.group_versions()
            )
        }
        Err(e) => {
            tally.error(format_args!("discovery: {e:#}"));
            "; cluster: discovery failed".to_string()
        }
    };
    let candidates: usize = snapshot.webhooks().map(|w| w.candidates().len()).sum();
    let candidates = if candidates > 0 {
        format!(", {candidates} candidate(s)")
    } else {
        String::new()
    };
    format!(
        "{}: {} webhook(s){candidates} in {} file(s){authorizer}{cluster}",
        args.config.display(),
        snapshot.len(),
        snapshot.files.len()
    )
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
    let unreachable = admission_proxy::tools::registration::unreachable(snapshot, served)
        .into_iter()
        .map(|p| p.to_string());
    unavailable.chain(unreachable).collect()
}

/// `registration`: prints the proxy's webhook configurations for the legacy ones in --config:
/// one webhook per legacy webhook, or with --chain one per legacy configuration (a
/// configuration that cannot be is an error, printed on stderr, and nothing is printed). With
/// --static-manifests, what kube-apiserver's static manifests loader would refuse in the
/// output is an error too.
pub(crate) fn registration(args: &RegistrationArgs) -> anyhow::Result<()> {
    use admission_proxy::tools::registration::Endpoint;
    use base64::Engine;
    if args.discovery.kubeconfig.is_some() && !args.discovery.discover && !args.prune {
        bail!("--kubeconfig is read with --discover or --prune only");
    }
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
    let (namespace, endpoint) = match (&args.service, &args.url, &args.namespace) {
        (Some((namespace, name, port)), _, _) => (
            namespace.clone(),
            Endpoint::Service {
                name: name.clone(),
                port: *port,
            },
        ),
        (None, Some(url), Some(namespace)) => (namespace.clone(), Endpoint::Url(url.clone())),
        // clap requires --service, or --url with --namespace.
        _ => bail!("--service, or --url with --namespace, is required"),
    };
    let options = admission_proxy::tools::registration::Options {
        namespace,
        endpoint,
        ca_bundle,
        inject_ca_from: args.inject_ca_from.clone(),
        name_suffix: args.name_suffix.clone(),
        served: args.discovery.served()?,
        static_manifests: args.static_manifests,
    };
    if let Some(served) = &options.served {
        for w in discovery_warnings(&snapshot, served) {
            eprintln!("warning: {w}");
        }
    }
    if args.prune {
        let objects = if args.chain {
            admission_proxy::tools::registration::chain_objects(&snapshot, &options)
        } else {
            admission_proxy::tools::registration::objects(&snapshot, &options)
        }
        .map_err(|problems| {
            for p in &problems {
                eprintln!("error: {p}");
            }
            anyhow::anyhow!("{} configuration(s) cannot be registered", problems.len())
        })?;
        let listed = listed_registrations(args.discovery.kubeconfig.as_deref(), &options)?;
        for line in admission_proxy::tools::registration::prune_list(&objects, &listed) {
            println!("{line}");
        }
        return Ok(());
    }
    let rendered = if args.chain {
        admission_proxy::tools::registration::render_chains(&snapshot, &options)
    } else {
        admission_proxy::tools::registration::render(&snapshot, &options)
    };
    let rendered = rendered.map_err(|problems| {
        for p in &problems {
            eprintln!("error: {p}");
        }
        let how = if args.chain { " as a chain" } else { "" };
        anyhow::anyhow!(
            "{} configuration(s) cannot be registered{how}; nothing printed",
            problems.len()
        )
    })?;
    // The findings are those of what is printed, as kube-apiserver will load it: its
    // selectors (the proxy's own namespace left out), its timeouts (one second more each),
    // no matchConditions (the proxy evaluates them), the proxy as the backend.
    let printed = std::path::PathBuf::from("registration.yaml");
    match config::load_contents(&[(printed, rendered.clone())]) {
        // Nothing registered (every webhook retired, `registered: false`): nothing to judge;
        // `--prune` names what to delete.
        _ if rendered.is_empty() => {
            eprintln!("registration: every webhook is retired (registered: false); nothing printed: `registration --prune` lists what to delete");
        }
        Ok(registration) => {
            for f in admission_proxy::tools::findings::findings(
                &registration,
                Some(&options.namespace),
                None,
            ) {
                eprintln!("warning: {f}");
            }
        }
        Err(e) => eprintln!("warning: the printed registration is not checked: {e}"),
    }
    if let Some(plugin) = args.static_manifests {
        if rendered.is_empty() {
            bail!(
                "{}: no webhooks of the kind --static-manifests names to register",
                args.config.display()
            );
        }
        // The same rules as `check --static-manifests`, on what is printed: a file
        // kube-apiserver's loader refuses keeps it from starting.
        let output = std::path::PathBuf::from("registration.yaml");
        let refused = config::static_manifests::check(&[(output, rendered.clone())], plugin);
        if !refused.is_empty() {
            for p in &refused {
                eprintln!("error: {p}");
            }
            bail!(
                "{} problem(s) kube-apiserver's static manifests loader would refuse; nothing printed",
                refused.len()
            );
        }
    }
    print!("{rendered}");
    Ok(())
}

/// How long `explain --kubeconfig` waits for each SubjectAccessReview.
const ASK_TIMEOUT: Duration = Duration::from_secs(10);

/// `explain`: loads the configuration and the review as `serve` would and prints the verdicts;
/// `authorizer` checks are asked of the cluster with `--kubeconfig`.
pub(crate) fn explain(args: &ExplainArgs) -> anyhow::Result<()> {
    let kube_version = kube_version_for(args.kube_version, args.kubeconfig.as_deref().map(Some))
        .unwrap_or_else(|why| {
            eprintln!("warning: {why}");
            None
        });
    let snapshot = config::load(&args.config)
        .with_context(|| format!("load webhook configuration from {}", args.config.display()))?;
    let namespaces = args
        .namespaces_file
        .as_deref()
        .map(Namespaces::load)
        .transpose()?;
    let exclusions = Exclusions::load(&args.exclusions.settings(kube_version))?;
    // At most a capture's size: a larger file is no review kube-apiserver sends.
    let body = admission_proxy::files::read_to_string(
        &args.review,
        admission_proxy::capture::MAX_CAPTURE_BYTES,
    )
    .with_context(|| format!("read {}", args.review.display()))?
    .into_bytes();
    let cut = admission_proxy::capture::cut_parts(&body);
    if !cut.is_empty() {
        bail!(
            "replay {}: this capture was cut to the capture size limit ({}): it cannot be replayed",
            args.review.display(),
            cut.join(", ")
        );
    }
    let review = admission_proxy::review::ParsedReview::parse(&body)
        .with_context(|| format!("parse the AdmissionReview in {}", args.review.display()))?;
    // `authorizer` checks: asked of the cluster with --kubeconfig, else answered "not checked".
    let cluster = match &args.kubeconfig {
        None => None,
        Some(kubeconfig) => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("start the tokio runtime")?;
            let client = runtime.block_on(SubjectAccessReviews::client(Some(kubeconfig)))?;
            Some((
                runtime,
                SubjectAccessReviews::new(client, CacheTtl::default()),
            ))
        }
    };
    let authorize = |key: &CheckKey| match &cluster {
        Some((runtime, authorizer)) => runtime.block_on(authorizer.decide(key, ASK_TIMEOUT)),
        None => Decision {
            error: Some("not checked: explain asks the cluster only with --kubeconfig".into()),
            ..Decision::default()
        },
    };
    // matchConditions' library calls priced as the cluster's kube-apiserver prices them.
    let cost_model = admission_proxy::matching::CostModel::of_kube_version(kube_version);
    let explanation = cost_model.apply(|| {
        admission_proxy::tools::explain::explain(
            &snapshot,
            &review,
            namespaces.as_ref(),
            exclusions.as_ref(),
            &args.redact_path,
            &authorize,
        )
    });
    if args.output == "json" {
        println!("{}", serde_json::to_string_pretty(&explanation)?);
    } else {
        print!("{}", admission_proxy::tools::explain::render(&explanation));
    }
    Ok(())
}

/// `bench`: serves the example backend (`--serve-backend`), prints a synthetic configuration
/// (`--synthetic-config`), or runs the benchmark.
pub(crate) async fn bench(args: BenchArgs) -> anyhow::Result<()> {
    if let Some(addr) = args.serve_backend {
        let tls = match (&args.tls_cert_file, &args.tls_private_key_file) {
            (Some(c), Some(k)) => Some(Arc::new(tls::CertResolver::new(tls::load_certified_key(
                c, k,
            )?))),
            _ => None,
        };
        let (handle, recorder) =
            example_backend::start(addr, tls).with_context(|| format!("listen on {addr}"))?;
        if let Some(file) = &args.record_uids {
            recorder
                .record_uids(file)
                .with_context(|| format!("open {} for appending", file.display()))?;
        }
        tracing::info!(address = %handle.local_addr, "example legacy webhook serving (POST /allow answers allowed)");
        serve::wait_for_signal().await;
        handle.shutdown().await;
        return Ok(());
    }
    if let (Some(n), Some(url)) = (args.synthetic_config, &args.backend_url) {
        let ca = match &args.cacert {
            Some(f) => Some(std::fs::read(f).with_context(|| format!("read {}", f.display()))?),
            None => None,
        };
        print!("{}", bench::synthetic_config(n, url, ca.as_deref()));
        return Ok(());
    }
    let report = bench::run(bench::BenchOptions {
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
        print!("{}", bench::render_table(&report));
    }
    Ok(())
}

/// `demo`: runs the demo; an error when some request got no answer.
pub(crate) async fn demo(args: DemoArgs) -> anyhow::Result<()> {
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
}

/// `candidates`: the candidate report, from a metrics scrape (file or `http://` URL) and the
/// capture directory.
pub(crate) fn candidates(args: &CandidatesArgs) -> anyhow::Result<()> {
    use admission_proxy::tools::candidate_report::{render, report, vector_as_series, window};
    let timeout = Duration::from_secs(args.scrape_timeout_seconds);
    let metrics = match &args.prometheus {
        Some(server) => prometheus_series(server, args.since.as_deref(), timeout)?,
        None => {
            let mut all = String::new();
            for source in &args.metrics {
                all.push_str(&scrape(source, timeout)?);
                all.push('\n');
            }
            match &args.since {
                Some(saved) => window(&all, &scrape(saved, timeout)?),
                None => all,
            }
        }
    };
    let dirs: Vec<&std::path::Path> = args
        .capture_dir
        .iter()
        .map(std::path::PathBuf::as_path)
        .collect();
    let reports = report(&metrics, &dirs)?;
    if args.output == "json" {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    } else {
        print!("{}", render(&reports));
    }
    return Ok(());

    /// The families the report reads, summed over every replica by a Prometheus server
    /// (`increase` over the window of `since`).
    fn prometheus_series(
        server: &str,
        since: Option<&str>,
        timeout: Duration,
    ) -> anyhow::Result<String> {
        let window = since.map(window_seconds).transpose()?;
        let mut text = String::new();
        for (family, by) in [
            (
                "admission_proxy_candidate_comparisons_total",
                "webhook, candidate, result",
            ),
            (
                "admission_proxy_candidate_error_decisions_total",
                "webhook, candidate",
            ),
        ] {
            let selected = match window {
                Some(seconds) => format!("increase({family}[{seconds}s])"),
                None => family.to_string(),
            };
            let query = format!("sum by ({by}) ({selected})");
            let url = reqwest::Url::parse_with_params(
                &format!("{}/api/v1/query", server.trim_end_matches('/')),
                &[("query", query.as_str())],
            )
            .with_context(|| format!("--prometheus {server}"))?;
            let answer = http_get(url.as_str(), timeout)
                .with_context(|| format!("query {server}: {query}"))?;
            text.push_str(&vector_as_series(family, &answer)?);
        }
        Ok(text)
    }

    /// `--since` as seconds before now: a duration (`2h`, `30m`, `90s`) or an RFC 3339 time.
    fn window_seconds(since: &str) -> anyhow::Result<u64> {
        if let Some(seconds) = ["h", "m", "s"].iter().find_map(|unit| {
            let n: u64 = since.strip_suffix(unit)?.parse().ok()?;
            Some(match *unit {
                "h" => n * 3600,
                "m" => n * 60,
                _ => n,
            })
        }) {
            return Ok(seconds.max(1));
        }
        let then: k8s_openapi::jiff::Timestamp = since.parse().with_context(|| {
            format!("--since {since:?}: a duration (2h, 30m, 90s) or an RFC 3339 time")
        })?;
        let ago = k8s_openapi::jiff::Timestamp::now().as_second() - then.as_second();
        Ok(u64::try_from(ago).unwrap_or(0).max(1))
    }

    /// A scrape: an `http://` URL (`http://host:port` alone means its `/metrics`) or a file.
    fn scrape(source: &str, timeout: Duration) -> anyhow::Result<String> {
        if let Some(rest) = source.strip_prefix("http://") {
            let url = if rest.contains('/') {
                source.to_string()
            } else {
                format!("{source}/metrics")
            };
            return http_get(&url, timeout).with_context(|| format!("scrape {source}"));
        }
        admission_proxy::files::read_to_string(
            std::path::Path::new(source),
            admission_proxy::files::MAX_CONFIG_FILE_BYTES * 8,
        )
        .with_context(|| format!("read {source}"))
    }
}

/// The most a scrape may be: a `/metrics` render of 5,000 webhooks is 9.3 MB.
const SCRAPE_MAX_BYTES: u64 = 64 << 20;

/// A plain-HTTP GET of `http://host:port/path` (the metrics listener is plain HTTP) with
/// reqwest, so that any framing a server or a proxy in between uses (chunked included) reads
/// as its body; within `timeout` and [`SCRAPE_MAX_BYTES`]: a trickling or endless answer is
/// an error, not a hang or the machine's memory.
fn http_get(url: &str, timeout: Duration) -> anyhow::Result<String> {
    use std::io::Read as _;
    let deadline = std::time::Instant::now() + timeout;
    // reqwest is built without a crypto provider of its own; a plain-HTTP GET still asks.
    admission_proxy::tls::install_client_provider();
    let client = reqwest::blocking::Client::builder()
        .timeout(timeout)
        .build()?;
    let response = client.get(url).send()?;
    if !response.status().is_success() {
        bail!("{}", response.status());
    }
    if response
        .content_length()
        .is_some_and(|n| n > SCRAPE_MAX_BYTES)
    {
        bail!("the answer is larger than {SCRAPE_MAX_BYTES} bytes");
    }
    let mut body = Vec::new();
    let mut reader = response.take(SCRAPE_MAX_BYTES + 1);
    let mut buf = [0u8; 64 * 1024];
    loop {
        // reqwest's timeout bounds each read; the deadline, the whole answer.
        if std::time::Instant::now() > deadline {
            bail!("the answer took longer than {timeout:?} (--scrape-timeout-seconds)");
        }
        let n = reader.read(&mut buf)?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&buf[..n]);
    }
    if body.len() as u64 > SCRAPE_MAX_BYTES {
        bail!("the answer is larger than {SCRAPE_MAX_BYTES} bytes");
    }
    Ok(String::from_utf8(body)?)
}
