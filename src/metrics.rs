//! Prometheus metrics of the proxy, named after kube-apiserver's admission webhook metrics
//! where they mean the same thing (dispatch notes §15). Depends on nothing else in this crate.

use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Buckets of kube-apiserver's `apiserver_admission_webhook_admission_duration_seconds`.
const BUCKETS: [f64; 8] = [0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 25.0];

/// How often histogram samples are folded into their buckets.
const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

/// Installs the global recorder and its upkeep task (on the current tokio runtime); `None` if
/// a recorder is already installed (e.g. a second server in one test process).
///
/// The upkeep matters: with `install_recorder` the exporter keeps every histogram sample until
/// someone calls `run_upkeep` (or scrapes `/metrics`); without it RSS grew by about 20 bytes
/// per request, 20 MB per million (benches/README.md, "What the profiles found").
pub fn install() -> Option<PrometheusHandle> {
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("duration_seconds".into()), &BUCKETS)
        .ok()?
        .install_recorder()
        .ok()?;
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(UPKEEP_INTERVAL);
        loop {
            tick.tick().await;
            upkeep.run_upkeep();
        }
    });
    Some(handle)
}

/// One admission answered: `admission_proxy_admission_total{webhook,type,operation,decision}`
/// and `admission_proxy_admission_duration_seconds{webhook,type,decision}` (seconds).
pub fn admission(
    webhook: &str,
    webhook_type: &'static str,
    operation: &'static str,
    decision: &'static str,
    latency: Duration,
) {
    metrics::counter!("admission_proxy_admission_total", "webhook" => webhook.to_string(), "type" => webhook_type, "operation" => operation, "decision" => decision).increment(1);
    metrics::histogram!("admission_proxy_admission_duration_seconds", "webhook" => webhook.to_string(), "type" => webhook_type, "decision" => decision).record(latency.as_secs_f64());
}

/// A backend call failed: `admission_proxy_webhook_call_failures_total{webhook,class}`.
pub fn call_failure(webhook: &str, class: &'static str) {
    metrics::counter!("admission_proxy_webhook_call_failures_total", "webhook" => webhook.to_string(), "class" => class).increment(1);
}

/// A request rejected before any webhook: `admission_proxy_bad_requests_total{reason}`.
pub fn bad_request(reason: &'static str) {
    metrics::counter!("admission_proxy_bad_requests_total", "reason" => reason).increment(1);
}

/// A configuration reload: `admission_proxy_config_reloads_total{result}` (`ok`/`error`).
pub fn reload(result: &'static str) {
    metrics::counter!("admission_proxy_config_reloads_total", "result" => result).increment(1);
}

/// A CRD conversion webhook call failed:
/// `admission_proxy_conversion_webhook_failures_total{crd,class}`.
pub fn conversion_failure(crd: &str, class: &'static str) {
    metrics::counter!("admission_proxy_conversion_webhook_failures_total", "crd" => crd.to_string(), "class" => class).increment(1);
}

/// A connection that never became a TLS session:
/// `admission_proxy_tls_handshake_failures_total{reason}` (`error`, `timeout`, `plain_http`).
pub fn tls_handshake_failure(reason: &'static str) {
    metrics::counter!("admission_proxy_tls_handshake_failures_total", "reason" => reason)
        .increment(1);
}

/// The namespace watch's state: `admission_proxy_namespace_watch_synced` (0/1) and, after a
/// change, `admission_proxy_namespace_watch_last_update_timestamp_seconds` and
/// `admission_proxy_namespaces_cached`.
pub fn namespace_watch(synced: bool, update: Option<(f64, usize)>) {
    metrics::gauge!("admission_proxy_namespace_watch_synced").set(if synced { 1.0 } else { 0.0 });
    if let Some((timestamp, cached)) = update {
        metrics::gauge!("admission_proxy_namespace_watch_last_update_timestamp_seconds")
            .set(timestamp);
        metrics::gauge!("admission_proxy_namespaces_cached").set(cached as f64);
    }
}

/// A watch error (dropped connection, 410 Gone, API error), retried with backoff:
/// `admission_proxy_namespace_watch_errors_total`.
pub fn namespace_watch_error() {
    metrics::counter!("admission_proxy_namespace_watch_errors_total").increment(1);
}

/// A live namespace lookup: `admission_proxy_namespace_lookups_total{result}` (`found`,
/// `not_found`, `error`).
pub fn namespace_lookup(result: &'static str) {
    metrics::counter!("admission_proxy_namespace_lookups_total", "result" => result).increment(1);
}

/// A webhook call re-sent after a 429/5xx with `Retry-After`:
/// `admission_proxy_webhook_retries_total{webhook}`.
pub fn webhook_retry(webhook: &str) {
    metrics::counter!("admission_proxy_webhook_retries_total", "webhook" => webhook.to_string())
        .increment(1);
}

/// A new connection to a backend (TCP and, for https, a TLS handshake):
/// `admission_proxy_upstream_connections_opened_total`.
pub fn upstream_connection_opened() {
    metrics::counter!("admission_proxy_upstream_connections_opened_total").increment(1);
}
