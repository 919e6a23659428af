//! The `admission-proxy` binary: command-line parsing, logging, signals. Errors surface here
//! as `anyhow`; everything else lives in the library.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use admission_proxy::{
    config, demo, dispatch::Dispatcher, matching::Namespaces, reload, server, tls,
};
use anyhow::{bail, Context};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "admission-proxy",
    version,
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
    Serve(ServeArgs),
    /// Run the serve path on 127.0.0.1 with the bundled config, an example legacy backend and
    /// real captured AdmissionReviews; print one line per request.
    Demo(DemoArgs),
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Directory (or file) of ValidatingWebhookConfiguration / MutatingWebhookConfiguration
    /// YAML or JSON; watched and hot-reloaded.
    #[arg(long)]
    config: PathBuf,
    /// Address to listen on; port 0 picks a free port (logged).
    #[arg(long, default_value = "0.0.0.0:8443")]
    listen: SocketAddr,
    /// PEM certificate chain served to kube-apiserver; reloaded with its key on change.
    #[arg(long)]
    tls_cert_file: PathBuf,
    /// PEM private key of --tls-cert-file.
    #[arg(long)]
    tls_private_key_file: PathBuf,
    /// Namespaces for namespaceSelector (`kubectl get namespaces -o yaml`); watched.
    #[arg(long)]
    namespaces_file: Option<PathBuf>,
    /// Largest accepted AdmissionReview body, in bytes (kube-apiserver's own limit is 3 MiB).
    #[arg(long, default_value_t = server::DEFAULT_MAX_BODY_BYTES)]
    max_body_bytes: usize,
    /// Milliseconds kept back from kube-apiserver's ?timeout= so the proxy answers first.
    #[arg(long, default_value_t = 250)]
    timeout_margin_ms: u64,
    /// Seconds between periodic re-reads of watched files (a backstop for missed events).
    #[arg(long, default_value_t = 30)]
    resync_seconds: u64,
    /// Seconds to let requests in flight finish after SIGTERM.
    #[arg(long, default_value_t = 20)]
    shutdown_grace_seconds: u64,
}

#[derive(clap::Args)]
struct DemoArgs {
    /// Webhook configuration to run with.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/config"))]
    config: PathBuf,
    /// Directory of captured AdmissionReview bodies (with index.json).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/admission-reviews"))]
    reviews: PathBuf,
    /// Namespaces for namespaceSelector.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/namespaces.yaml"))]
    namespaces_file: PathBuf,
    /// Where the example legacy backend listens (the bundled config points at it).
    #[arg(long, default_value = "127.0.0.1:18443")]
    backend_listen: SocketAddr,
    /// Replay every captured review, not just the curated selection.
    #[arg(long)]
    all: bool,
}

fn init_logging(level: &str, json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let default_level = if matches!(cli.command, Command::Demo(_)) {
        "warn"
    } else {
        "info"
    };
    init_logging(
        cli.log_level.as_deref().unwrap_or(default_level),
        cli.log_json,
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("start the tokio runtime")?;
    match cli.command {
        Command::Serve(args) => runtime.block_on(serve(args)),
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

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let snapshot = config::load(&args.config)
        .with_context(|| format!("load webhook configuration from {}", args.config.display()))?;
    for w in &snapshot.warnings {
        tracing::warn!(warning = %w, "webhook configuration warning");
    }
    let namespaces = match &args.namespaces_file {
        Some(f) => Some(
            Namespaces::parse(
                &std::fs::read_to_string(f).with_context(|| format!("read {}", f.display()))?,
            )
            .with_context(|| format!("parse {}", f.display()))?,
        ),
        None => {
            if snapshot
                .webhooks
                .values()
                .any(|w| !w.matcher.namespace_selector.is_empty())
            {
                tracing::warn!("a webhook has a namespaceSelector but no --namespaces-file was given: namespaced requests it matches are rejected with 404 (namespace not found), as kube-apiserver does for unknown namespaces");
            }
            None
        }
    };
    let key = tls::load_certified_key(&args.tls_cert_file, &args.tls_private_key_file)
        .context("load the serving certificate")?;
    let resolver = Arc::new(tls::CertResolver::new(key));
    tracing::info!(
        webhooks = snapshot.webhooks.len(),
        files = snapshot.files.len(),
        "webhook configuration loaded"
    );
    let mut state = server::State::new(
        snapshot,
        namespaces,
        Dispatcher::new(Duration::from_millis(args.timeout_margin_ms)),
        args.max_body_bytes,
    );
    state.metrics = admission_proxy::metrics::install();
    let state = Arc::new(state);
    let handle = server::serve_admission(args.listen, resolver.clone(), state.clone())
        .with_context(|| format!("listen on {}", args.listen))?;
    tracing::info!(address = %handle.local_addr, "admission-proxy listening");
    let _reloader = reload::Sources {
        config: args.config.clone(),
        namespaces: args.namespaces_file.clone(),
        tls: Some((
            args.tls_cert_file.clone(),
            args.tls_private_key_file.clone(),
            resolver,
        )),
        resync: Duration::from_secs(args.resync_seconds.max(1)),
    }
    .spawn(state)
    .context("watch the configuration")?;
    wait_for_signal().await;
    tracing::info!(grace_seconds = args.shutdown_grace_seconds, "shutting down");
    if tokio::time::timeout(
        Duration::from_secs(args.shutdown_grace_seconds),
        handle.shutdown(),
    )
    .await
    .is_err()
    {
        tracing::warn!("requests still in flight after the grace period");
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
