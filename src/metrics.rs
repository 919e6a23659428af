//! Prometheus metrics of the proxy: what each webhook decided and what it cost, split into the
//! legacy backend's time and the proxy's own, plus the process (build, configuration, TLS,
//! namespace watch). Label names follow kube-apiserver's admission webhook metrics where they
//! mean the same (`name`, `type`, `operation`, `rejected`; `apiserver_admission_webhook_*` in
//! `k8s.io/apiserver/pkg/admission/metrics`). Depends on `memory` only; the series rendered
//! from the configuration served are handed in by the caller ([`write_ca_bundle_expiries`]).
//!
//! Every family is described (HELP) and every series the proxy can know in advance exists at
//! zero from start. Per-webhook handles are resolved when a configuration is loaded
//! (`WebhookMetrics`); the request path only increments atomics and records histogram
//! samples, never hashes labels or builds strings. Label values are bounded: webhook names come
//! from the loaded configuration, never from a request's URL.
//!
//! A scrape's text is rendered once and shared ([`Scrapes`]): clients of `/metrics` that do not
//! read pin one render between them, not one each.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use bytes::Bytes;
// tokio's clock, so that tests with paused time see a render age.
use tokio::time::Instant;

use metrics::{Counter, Gauge, Histogram, Label};

use crate::decision::Decision;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Histogram buckets, seconds: 50 µs to 30 s (kube-apiserver's own webhook histogram starts at
/// 5 ms and cannot show a sub-millisecond sidecar).
pub(crate) const BUCKETS: [f64; 18] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0, 30.0,
];

/// How often histogram samples are folded into their buckets.
const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

/// AdmissionReview operations, in the order of `review::Operation`.
pub(crate) const OPERATIONS: [&str; 4] = ["CREATE", "UPDATE", "DELETE", "CONNECT"];

/// Why the proxy closes a client connection (`server::Closed`, plus the connection cap).
pub(crate) const CLOSE_REASONS: [&str; 6] = [
    "idle_timeout",
    "header_timeout",
    "body_timeout",
    "header_too_large",
    "write_timeout",
    "max_connections",
];

/// Call failure classes (`dispatch::CallFailure::class`).
pub(crate) const FAILURE_CLASSES: [&str; 11] = [
    "connect",
    "tls",
    "transport",
    "timeout",
    "status",
    "bad_answer",
    "no_review_version",
    "namespace_labels",
    "circuit_open",
    "overloaded",
    "shutdown",
];

/// Every family: name, kind, help. Described at install so that `/metrics` shows HELP and TYPE
/// for each from the start.
const FAMILIES: &[(&str, Kind, &str)] = &[
    ("admission_proxy_build_info", Kind::Gauge, "Always 1; labels: the version and git commit of the running binary."),
    ("admission_proxy_webhook_admissions_total", Kind::Counter, "Admissions answered per webhook, by decision (skipped, allowed, denied, failed-open, failed-closed, rejected-dry-run, rejected; would-deny and would-patch for webhooks in mode Warn, shadowed in mode Shadow; exempt: a proxy-wide exclusion answered first); rejected is true when the request was refused."),
    ("admission_proxy_admissions_total", Kind::Counter, "Admissions answered, by operation and decision, over all webhooks."),
    ("admission_proxy_webhook_admission_duration_seconds", Kind::Histogram, "Seconds from receiving an admission to answering it, per webhook (skips included)."),
    ("admission_proxy_webhook_backend_duration_seconds", Kind::Histogram, "Seconds spent calling the legacy backend (all attempts and Retry-After waits), per webhook; only admissions that called it."),
    ("admission_proxy_webhook_proxy_duration_seconds", Kind::Histogram, "Seconds the proxy itself added to an admission: end to end minus the backend call, per webhook."),
    ("admission_proxy_webhook_call_failures_total", Kind::Counter, "Backend calls that failed, per webhook and class (connect, tls, transport, timeout, status, bad_answer, no_review_version, namespace_labels, circuit_open, overloaded); failurePolicy decided the answer."),
    ("admission_proxy_webhook_shadow_decisions_total", Kind::Counter, "What webhooks in mode Shadow decided in the background, per webhook and decision (the answer given was allowed)."),
    ("admission_proxy_shadow_calls_dropped_total", Kind::Counter, "Shadow calls not made because the background queue was full."),
    ("admission_proxy_candidate_comparisons_total", Kind::Counter, "Requests a candidate (a replacement attached to a legacy webhook) decided beside the legacy webhook, per webhook and candidate, by result: agree; disagree_allowed, disagree_code, disagree_patch, disagree_warnings (the first difference found); candidate_error (the candidate could not be decided here: a namespace unknown, an authorization check undecided); legacy_error (not compared: the legacy webhook's own call failed); shed (not decided: the background lane was full)."),
    ("admission_proxy_candidate_error_decisions_total", Kind::Counter, "Candidate decisions that came from an error, per webhook and candidate: a policy's evaluation or configuration error, or a mirrored backend's failed call, each decided by its failurePolicy as kube-apiserver would after the cut-over (compared all the same, and captured)."),
    ("admission_proxy_candidate_duration_seconds", Kind::Histogram, "Seconds a candidate took to decide, per webhook and candidate (in the background, after the legacy answer)."),
    ("admission_proxy_captures_total", Kind::Counter, "AdmissionReviews written to --capture-dir (sampled by --capture-sample, redacted)."),
    ("admission_proxy_captures_dropped_total", Kind::Counter, "Sampled captures not written because the capture queue was full."),
    ("admission_proxy_circuit_breaker_state", Kind::Gauge, "Each circuit breaker of a backend the configuration served calls, from its first call: 0 closed, 1 open, 2 half-open (one probe call under way); --breaker-failures."),
    ("admission_proxy_circuit_breaker_transitions_total", Kind::Counter, "Circuit breaker state changes per backend (host:port), by the state entered (open, half_open, closed); --breaker-failures."),
    ("admission_proxy_webhook_retries_total", Kind::Counter, "Backend calls re-sent after a 429/5xx answer with Retry-After, per webhook (client-go's retry)."),
    ("admission_proxy_chain_admissions_total", Kind::Counter, "Admissions answered per chain route (/configurations/{type}/{name}; chain \"*\" for /configurations/{type}), by the chain's decision: skipped (no webhook called), allowed, failed-open (allowed, a webhook failed open), denied, failed-closed (a webhook's failurePolicy Fail, or the chain ran out of time), rejected-dry-run, rejected; each webhook is also counted in the webhook families."),
    ("admission_proxy_chain_duration_seconds", Kind::Histogram, "Seconds from receiving a chain admission to answering it, per chain."),
    ("admission_proxy_chain_reinvocations_total", Kind::Counter, "Mutating chain admissions that ran a second round (reinvocationPolicy IfNeeded), per chain."),
    ("admission_proxy_webhook_in_flight", Kind::Gauge, "Admissions being answered now, per webhook."),
    ("admission_proxy_match_condition_evaluations_total", Kind::Counter, "Admissions whose matchConditions were evaluated, per webhook (apiserver_admission_match_condition_evaluation_seconds_count)."),
    ("admission_proxy_match_condition_exclusions_total", Kind::Counter, "Admissions a matchCondition excluded (a condition was false), per webhook (apiserver_admission_match_condition_exclusions_total)."),
    ("admission_proxy_match_condition_evaluation_errors_total", Kind::Counter, "Admissions whose matchConditions failed to evaluate, per webhook (apiserver_admission_match_condition_evaluation_errors_total); failurePolicy decided."),
    ("admission_proxy_upstream_connections_opened_total", Kind::Counter, "New connections to legacy backends (TCP and TLS handshake); a pooled connection serves the next call."),
    ("admission_proxy_bad_requests_total", Kind::Counter, "Requests answered without any webhook, by reason (malformed, too_large, unknown_webhook, unknown_configuration, framing: a request that cannot be read as HTTP/1.1 or that Go's server refuses, answered 400, 431 or 501 as Go does)."),
    ("admission_proxy_config_reloads_total", Kind::Counter, "Webhook configuration reloads, by result (ok, error: the last good configuration kept serving)."),
    ("admission_proxy_config_last_reload_successful", Kind::Gauge, "1 if the latest load or reload of the webhook configuration succeeded, 0 if it was refused: the last good configuration serves and the files on disk are not it, until a reload succeeds."),
    ("admission_proxy_config_last_reload_success_timestamp_seconds", Kind::Gauge, "When the webhook configuration served was loaded (at start or by the last good reload), Unix seconds."),
    ("admission_proxy_config_generation", Kind::Gauge, "How many configurations this process has loaded (1 after start)."),
    ("admission_proxy_config_hash", Kind::Gauge, "A hash of the loaded configuration files' contents (53 bits): replicas serving the same files show the same value."),
    ("admission_proxy_config_webhooks", Kind::Gauge, "Webhooks in the loaded configuration."),
    ("admission_proxy_serving_certificate_expiry_timestamp_seconds", Kind::Gauge, "When the serving certificate expires, Unix seconds."),
    ("admission_proxy_backend_ca_bundle_expiry_timestamp_seconds", Kind::Gauge, "When the first certificate of a webhook's clientConfig.caBundle expires, Unix seconds, per webhook (name, type) of the configuration served: from then on the backend's certificate no longer verifies against it."),
    ("admission_proxy_tls_handshake_failures_total", Kind::Counter, "Connections that never became a TLS session, by reason (error, timeout, plain_http)."),
    ("admission_proxy_connections_open", Kind::Gauge, "Client connections open now (--max-connections caps them)."),
    ("admission_proxy_connections_closed_total", Kind::Counter, "Client connections the proxy closed because of a limit, by reason (idle_timeout, header_timeout, body_timeout, header_too_large, write_timeout, max_connections)."),
    ("admission_proxy_throttled_total", Kind::Counter, "Admissions answered 429 with Retry-After: 1 because --max-requests-inflight admissions were already in flight."),
    ("admission_proxy_conversion_webhook_failures_total", Kind::Counter, "CRD conversion webhook calls that failed, by CustomResourceDefinition and class."),
    ("admission_proxy_namespace_watch_synced", Kind::Gauge, "1 once the namespace watch has listed the cluster's namespaces (--watch-namespaces)."),
    ("admission_proxy_namespace_watch_last_update_timestamp_seconds", Kind::Gauge, "When the namespace cache last changed, Unix seconds."),
    ("admission_proxy_namespaces_cached", Kind::Gauge, "Namespaces in the namespace cache."),
    ("admission_proxy_namespace_watch_errors_total", Kind::Counter, "Namespace watch errors (dropped connection, 410 Gone, API error), each retried with backoff."),
    ("admission_proxy_namespace_lookups_total", Kind::Counter, "Live GETs of namespaces missing from the cache, by result (found, not_found, error)."),
    ("admission_proxy_authorizer_checks_total", Kind::Counter, "matchConditions authorizer checks answered, by how (allowed, denied: a SubjectAccessReview the check made; error: no answer within the budget, a failed call or an answer both allowed and denied; cached: from the cache; coalesced: by an identical check's call in flight)."),
    ("admission_proxy_exempt_total", Kind::Counter, "Admissions answered allowed by a proxy-wide exclusion, before any webhook and without a backend call, by reason (namespace: --exempt-namespace, --exempt-namespace-selector or the --exclusions-file namespaces and namespaceSelector; condition: a matchCondition of --exclusions-file was true; virtual_resource: a TokenReview or other virtual authentication or authorization resource, which kube-apiserver 1.37 and later (--kube-version) never sends to webhooks)."),
    ("admission_proxy_exclusion_condition_errors_total", Kind::Counter, "Admissions for which a matchCondition of --exclusions-file failed to evaluate (an error, the cost budget, a non-bool value): such a condition exempts nothing."),
    ("admission_proxy_subjectaccessreview_duration_seconds", Kind::Histogram, "Seconds each SubjectAccessReview call to the Kubernetes API took (failed ones included; capped at 10 s)."),
];

#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// Installs the global recorder and its upkeep task (on the current tokio runtime), describes
/// every family and creates the process series at zero; `None` if a recorder is already
/// installed (e.g. a second server in one test process).
///
/// The upkeep matters: with `install_recorder` the exporter keeps every histogram sample until
/// someone calls `run_upkeep` (or scrapes `/metrics`); without it RSS grew by about 20 bytes
/// per request, 20 MB per million (benches/README.md, "What the profiles found").
pub fn install(version: &'static str, commit: &'static str) -> Option<PrometheusHandle> {
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("duration_seconds".into()), &BUCKETS)
        .ok()?
        .install_recorder()
        .ok()?;
    for (name, kind, help) in FAMILIES {
        match kind {
            Kind::Counter => metrics::describe_counter!(*name, *help),
            Kind::Gauge => metrics::describe_gauge!(*name, *help),
            Kind::Histogram => metrics::describe_histogram!(*name, metrics::Unit::Seconds, *help),
        }
    }
    metrics::gauge!("admission_proxy_build_info", "version" => version, "commit" => commit)
        .set(1.0);
    for reason in [
        "malformed",
        "too_large",
        "unknown_webhook",
        "unknown_configuration",
        "framing",
    ] {
        let _ = metrics::counter!("admission_proxy_bad_requests_total", "reason" => reason);
    }
    for result in ["ok", "error"] {
        let _ = metrics::counter!("admission_proxy_config_reloads_total", "result" => result);
    }
    for reason in ["error", "timeout", "plain_http"] {
        let _ =
            metrics::counter!("admission_proxy_tls_handshake_failures_total", "reason" => reason);
    }
    let _ = metrics::counter!("admission_proxy_upstream_connections_opened_total");
    for reason in CLOSE_REASONS {
        let _ = metrics::counter!("admission_proxy_connections_closed_total", "reason" => reason);
    }
    let _ = metrics::counter!("admission_proxy_throttled_total");
    let _ = metrics::counter!("admission_proxy_shadow_calls_dropped_total");
    let _ = metrics::counter!("admission_proxy_captures_total");
    let _ = metrics::counter!("admission_proxy_captures_dropped_total");
    let _ = metrics::counter!("admission_proxy_namespace_watch_errors_total");
    for result in NAMESPACE_LOOKUP_RESULTS {
        let _ = metrics::counter!("admission_proxy_namespace_lookups_total", "result" => result);
    }
    for result in AUTHORIZER_CHECK_RESULTS {
        let _ = metrics::counter!("admission_proxy_authorizer_checks_total", "result" => result);
    }
    let _ = metrics::histogram!("admission_proxy_subjectaccessreview_duration_seconds");
    let _ = exemptions();
    metrics::gauge!("admission_proxy_connections_open").set(0.0);
    let _ = by_operation();
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(UPKEEP_INTERVAL);
        loop {
            tick.tick().await;
            upkeep.run_upkeep();
            // A /metrics render allocates about 1.4 KB per series (1.4 MB with 1,000
            // webhooks); give what it freed back to the OS rather than keep it.
            crate::memory::release();
        }
    });
    Some(handle)
}

/// `admission_proxy_admissions_total{operation,decision}`, every series resolved once.
fn by_operation() -> &'static [[Counter; Decision::ALL.len()]; OPERATIONS.len()] {
    static HANDLES: OnceLock<[[Counter; Decision::ALL.len()]; OPERATIONS.len()]> = OnceLock::new();
    HANDLES.get_or_init(|| {
        OPERATIONS.map(|operation| {
            Decision::ALL.map(|d| {
                metrics::counter!("admission_proxy_admissions_total", "operation" => operation, "decision" => d.as_str(), "rejected" => if d.rejects() { "true" } else { "false" })
            })
        })
    })
}

/// Configurations with at most this many webhooks export every series of every webhook at
/// zero from the start; larger ones register a webhook's histograms and failure classes when
/// first used (see [`WebhookMetrics`]).
pub(crate) const EAGER_WEBHOOKS: usize = 100;

/// One webhook's series. Resolved when its configuration is loaded (a reload resolves the same
/// series again, so counts carry on): the admission counters by decision, retries, in-flight
/// and matchCondition counters exist at zero from start. The three duration histograms (63
/// series) and the failure classes (8) are registered with the whole configuration when it has
/// at most [`EAGER_WEBHOOKS`] webhooks, else with the webhook's first admission and each
/// class's first failure: 1,000 webhooks would otherwise be 83,000 series, ~15 MB of registry
/// and a 10 MB scrape, most of them for webhooks that never see a request (benches/README.md,
/// "Memory across reloads").
#[derive(Debug)]
pub(crate) struct WebhookMetrics {
    /// The `name` label's value, shared by every series of the webhook: the registry keeps a
    /// label value it is handed as an owned string as a copy of its own per series.
    name: std::sync::Arc<str>,
    webhook_type: &'static str,
    admissions: [Counter; Decision::ALL.len()],
    /// End to end, backend, the proxy's own.
    durations: OnceLock<[Histogram; 3]>,
    call_failures: [OnceLock<Counter>; FAILURE_CLASSES.len()],
    retries: Counter,
    in_flight: Gauge,
    condition_evaluations: Counter,
    condition_exclusions: Counter,
    condition_errors: Counter,
}

/// How matchConditions took part in one admission.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Conditions {
    /// Not evaluated (none, or the request was decided before them).
    #[default]
    NotEvaluated,
    /// Evaluated; none was false.
    Passed,
    /// A condition was false: the webhook was skipped.
    Excluded,
    /// Evaluation failed: failurePolicy decided.
    Errored,
}

impl WebhookMetrics {
    /// The series of webhook `name` of `webhook_type` (`validating`/`mutating`), at zero.
    pub(crate) fn new(name: &str, webhook_type: &'static str) -> Self {
        let name: std::sync::Arc<str> = name.into();
        let labels = webhook_labels(&name, webhook_type);
        let counter = |family: &'static str| metrics::counter!(family, labels.to_vec());
        WebhookMetrics {
            webhook_type,
            admissions: by_decision("admission_proxy_webhook_admissions_total", &labels),
            durations: OnceLock::new(),
            call_failures: [const { OnceLock::new() }; FAILURE_CLASSES.len()],
            retries: counter("admission_proxy_webhook_retries_total"),
            in_flight: metrics::gauge!("admission_proxy_webhook_in_flight", labels.to_vec()),
            condition_evaluations: counter("admission_proxy_match_condition_evaluations_total"),
            condition_exclusions: counter("admission_proxy_match_condition_exclusions_total"),
            condition_errors: counter("admission_proxy_match_condition_evaluation_errors_total"),
            name,
        }
    }

    /// Registers every series of this webhook now (histograms and failure classes included).
    pub(crate) fn register_all(&self) {
        let _ = self.durations();
        for class in 0..FAILURE_CLASSES.len() {
            let _ = self.failure_counter(class);
        }
    }

    fn failure_counter(&self, class: usize) -> &Counter {
        self.call_failures[class].get_or_init(|| {
            let labels = webhook_labels(&self.name, self.webhook_type);
            let l = with_labels(&labels, &[("class", FAILURE_CLASSES[class])]);
            metrics::counter!("admission_proxy_webhook_call_failures_total", l)
        })
    }

    /// The duration histograms, registered on first use (one atomic load afterwards).
    fn durations(&self) -> &[Histogram; 3] {
        self.durations.get_or_init(|| {
            let labels = webhook_labels(&self.name, self.webhook_type);
            [
                "admission_proxy_webhook_admission_duration_seconds",
                "admission_proxy_webhook_backend_duration_seconds",
                "admission_proxy_webhook_proxy_duration_seconds",
            ]
            .map(|family| metrics::histogram!(family, labels.to_vec()))
        })
    }

    /// One admission answered: its decision, operation (index into [`OPERATIONS`]), end-to-end
    /// time, the backend call's time if it was called, and what matchConditions did.
    pub(crate) fn admission(
        &self,
        decision: Decision,
        operation: usize,
        total: Duration,
        backend: Option<Duration>,
        conditions: Conditions,
    ) {
        if let Some(c) = self.admissions.get(decision.index()) {
            c.increment(1);
        }
        if let Some(c) = by_operation()
            .get(operation)
            .and_then(|d| d.get(decision.index()))
        {
            c.increment(1);
        }
        let [duration, backend_duration, proxy_duration] = self.durations();
        duration.record(total.as_secs_f64());
        if let Some(backend) = backend {
            backend_duration.record(backend.as_secs_f64());
        }
        proxy_duration.record(
            total
                .saturating_sub(backend.unwrap_or_default())
                .as_secs_f64(),
        );
        match conditions {
            Conditions::NotEvaluated => {}
            Conditions::Passed => self.condition_evaluations.increment(1),
            Conditions::Excluded => {
                self.condition_evaluations.increment(1);
                self.condition_exclusions.increment(1);
            }
            Conditions::Errored => {
                self.condition_evaluations.increment(1);
                self.condition_errors.increment(1);
            }
        }
    }

    /// A backend call failed with `class` (one of [`FAILURE_CLASSES`]).
    pub(crate) fn call_failure(&self, class: &str) {
        if let Some(i) = FAILURE_CLASSES.iter().position(|c| *c == class) {
            self.failure_counter(i).increment(1);
        }
    }

    /// A backend call re-sent after `Retry-After`.
    pub(crate) fn retry(&self) {
        self.retries.increment(1);
    }

    /// Counts an admission in flight until the guard is dropped.
    pub(crate) fn in_flight(&self) -> InFlight<'_> {
        self.in_flight.increment(1.0);
        InFlight(&self.in_flight)
    }
}

/// A webhook's own labels, as kube-apiserver names them.
fn webhook_labels(name: &std::sync::Arc<str>, webhook_type: &'static str) -> [Label; 2] {
    [
        Label::new("name", metrics::SharedString::from_shared(name.clone())),
        Label::from_static_parts("type", webhook_type),
    ]
}

/// One counter of `family` per decision, with `labels` plus `decision` and `rejected`
/// (indexed by [`Decision::index`]).
fn by_decision(family: &'static str, labels: &[Label; 2]) -> [Counter; Decision::ALL.len()] {
    Decision::ALL.map(|d| {
        let rejected = if d.rejects() { "true" } else { "false" };
        let l = with_labels(labels, &[("decision", d.as_str()), ("rejected", rejected)]);
        metrics::counter!(family, l)
    })
}

/// `labels` plus `extra` (static values: decisions, classes, booleans).
fn with_labels(labels: &[Label; 2], extra: &[(&'static str, &'static str)]) -> Vec<Label> {
    let mut l = Vec::with_capacity(labels.len() + extra.len());
    l.extend_from_slice(labels);
    l.extend(extra.iter().map(|(k, v)| Label::from_static_parts(k, v)));
    l
}

/// One chain route's series (`chain`: the configuration's name, `*` for every configuration
/// of the type), resolved when the configuration is loaded.
#[derive(Debug)]
pub(crate) struct ChainMetrics {
    admissions: [Counter; Decision::ALL.len()],
    duration: Histogram,
    reinvocations: Counter,
}

impl ChainMetrics {
    /// The series of chain `chain` of `webhook_type` (`validating`/`mutating`), at zero.
    pub(crate) fn new(chain: &str, webhook_type: &'static str) -> Self {
        let chain: std::sync::Arc<str> = chain.into();
        let labels = [
            Label::new("chain", metrics::SharedString::from_shared(chain)),
            Label::from_static_parts("type", webhook_type),
        ];
        ChainMetrics {
            admissions: by_decision("admission_proxy_chain_admissions_total", &labels),
            duration: metrics::histogram!(
                "admission_proxy_chain_duration_seconds",
                labels.to_vec()
            ),
            reinvocations: metrics::counter!(
                "admission_proxy_chain_reinvocations_total",
                labels.to_vec()
            ),
        }
    }

    /// One chain admission answered: the chain's decision, end-to-end time, and whether a
    /// second (reinvocation) round ran.
    pub(crate) fn admission(&self, decision: Decision, total: Duration, reinvoked: bool) {
        if let Some(c) = self.admissions.get(decision.index()) {
            c.increment(1);
        }
        self.duration.record(total.as_secs_f64());
        if reinvoked {
            self.reinvocations.increment(1);
        }
    }
}

/// See [`WebhookMetrics::in_flight`].
pub(crate) struct InFlight<'a>(&'a Gauge);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

/// A request rejected before any webhook: `admission_proxy_bad_requests_total{reason}`.
pub(crate) fn bad_request(reason: &'static str) {
    metrics::counter!("admission_proxy_bad_requests_total", "reason" => reason).increment(1);
}

/// A configuration reload: `admission_proxy_config_reloads_total{result}` (`ok`/`error`). A
/// refused one also sets `admission_proxy_config_last_reload_successful` to 0, which stays
/// until a configuration loads ([`config_loaded`]): the counter alone cannot tell an alert
/// whether the files are still bad once its window has passed.
pub(crate) fn reload(result: &'static str) {
    metrics::counter!("admission_proxy_config_reloads_total", "result" => result).increment(1);
    if result == "error" {
        metrics::gauge!("admission_proxy_config_last_reload_successful").set(0.0);
    }
}

/// A configuration was loaded (at start or by a reload): generation, hash of its files'
/// contents, webhook count, and that the latest load succeeded, now.
pub(crate) fn config_loaded(hash: u64, webhooks: usize) {
    metrics::gauge!("admission_proxy_config_last_reload_successful").set(1.0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    metrics::gauge!("admission_proxy_config_last_reload_success_timestamp_seconds")
        .set(now.as_secs_f64());
    metrics::gauge!("admission_proxy_config_generation").increment(1.0);
    // 53 bits: a gauge is an f64, and an integer above 2^53 would not survive it.
    metrics::gauge!("admission_proxy_config_hash").set((hash >> 11) as f64);
    metrics::gauge!("admission_proxy_config_webhooks").set(webhooks as f64);
}

/// The serving certificate now served expires at `not_after` (Unix seconds).
pub(crate) fn serving_certificate(not_after: i64) {
    metrics::gauge!("admission_proxy_serving_certificate_expiry_timestamp_seconds")
        .set(not_after as f64);
}

/// Appends to `out`, a scrape's text,
/// `admission_proxy_backend_ca_bundle_expiry_timestamp_seconds{name,type}` for `expiries`, the
/// configuration served's webhooks with a `caBundle`: (`type`, `name`, its first certificate's
/// notAfter in Unix seconds).
pub(crate) fn write_ca_bundle_expiries<'a>(
    out: &mut String,
    expiries: impl IntoIterator<Item = (&'a str, &'a str, i64)>,
) {
    use metrics_exporter_prometheus::formatting::sanitize_label_value;
    let series = expiries
        .into_iter()
        .map(|(webhook_type, webhook, not_after)| {
            (
                format!(
                    "name=\"{}\",type=\"{webhook_type}\"",
                    sanitize_label_value(webhook)
                ),
                not_after,
            )
        });
    write_served_gauge(
        out,
        "admission_proxy_backend_ca_bundle_expiry_timestamp_seconds",
        series,
    );
}

/// Appends to `out`, a scrape's text, `admission_proxy_circuit_breaker_state{backend}` for
/// `states`: the breakers of the backends the configuration served calls (`host:port`, 0
/// closed, 1 open, 2 half-open).
pub(crate) fn write_breaker_states(out: &mut String, states: Vec<(String, u8)>) {
    use metrics_exporter_prometheus::formatting::sanitize_label_value;
    let series = states.into_iter().map(|(backend, state)| {
        (
            format!("backend=\"{}\"", sanitize_label_value(&backend)),
            i64::from(state),
        )
    });
    write_served_gauge(out, "admission_proxy_circuit_breaker_state", series);
}

/// Appends gauge family `name` (one of [`FAMILIES`], never set through the recorder) to `out`
/// with `series`: each one's labels, written out, and its value; sorted, one series per label
/// set. HELP and TYPE are written even without a series, as the recorder's families have from
/// start.
///
/// Such a family is rendered at each scrape from the configuration served rather than set
/// through the recorder, so that a series of a webhook or backend that a reload removed leaves
/// `/metrics` (and stops firing its alert): metrics-exporter-prometheus 0.18 cannot remove a
/// series (its registry is private), and its `idle_timeout` drops series by age, which would
/// also drop a set-once gauge of what is still served.
fn write_served_gauge(out: &mut String, name: &str, series: impl Iterator<Item = (String, i64)>) {
    use metrics_exporter_prometheus::formatting::{write_help_line, write_type_line};
    use std::fmt::Write;
    let help = FAMILIES
        .iter()
        .find(|(family, _, _)| *family == name)
        .map_or("", |(_, _, help)| *help);
    write_help_line(out, name, None, None, help);
    write_type_line(out, name, None, None, "gauge");
    let mut series: Vec<_> = series.collect();
    series.sort_unstable();
    series.dedup_by(|a, b| a.0 == b.0);
    for (labels, value) in series {
        let _ = writeln!(out, "{name}{{{labels}}} {value}");
    }
    out.push('\n');
}

/// A CRD conversion webhook call failed:
/// `admission_proxy_conversion_webhook_failures_total{crd,class}`.
pub(crate) fn conversion_failure(crd: &str, class: &'static str) {
    metrics::counter!("admission_proxy_conversion_webhook_failures_total", "crd" => crd.to_string(), "class" => class).increment(1);
}

/// A connection that never became a TLS session:
/// `admission_proxy_tls_handshake_failures_total{reason}` (`error`, `timeout`, `plain_http`).
pub(crate) fn tls_handshake_failure(reason: &'static str) {
    metrics::counter!("admission_proxy_tls_handshake_failures_total", "reason" => reason)
        .increment(1);
}

/// The namespace watch's state: `admission_proxy_namespace_watch_synced` (0/1) and, after a
/// change, `admission_proxy_namespace_watch_last_update_timestamp_seconds` and
/// `admission_proxy_namespaces_cached`.
pub(crate) fn namespace_watch(synced: bool, update: Option<(f64, usize)>) {
    metrics::gauge!("admission_proxy_namespace_watch_synced").set(if synced { 1.0 } else { 0.0 });
    if let Some((timestamp, cached)) = update {
        metrics::gauge!("admission_proxy_namespace_watch_last_update_timestamp_seconds")
            .set(timestamp);
        metrics::gauge!("admission_proxy_namespaces_cached").set(cached as f64);
    }
}

/// A watch error (dropped connection, 410 Gone, API error), retried with backoff:
/// `admission_proxy_namespace_watch_errors_total`.
pub(crate) fn namespace_watch_error() {
    metrics::counter!("admission_proxy_namespace_watch_errors_total").increment(1);
}

/// The `result` label values of `admission_proxy_namespace_lookups_total`.
const NAMESPACE_LOOKUP_RESULTS: [&str; 3] = ["found", "not_found", "error"];

/// A live namespace lookup: `admission_proxy_namespace_lookups_total{result}`, one of
/// [`NAMESPACE_LOOKUP_RESULTS`].
pub(crate) fn namespace_lookup(result: &'static str) {
    metrics::counter!("admission_proxy_namespace_lookups_total", "result" => result).increment(1);
}

/// The `result` label values of `admission_proxy_authorizer_checks_total`
/// (`authorizer::Outcome::as_str`).
pub(crate) const AUTHORIZER_CHECK_RESULTS: [&str; 5] =
    ["allowed", "denied", "error", "cached", "coalesced"];

/// An authorizer check answered: `admission_proxy_authorizer_checks_total{result}`, one of
/// [`AUTHORIZER_CHECK_RESULTS`]. Never a user or an attribute in a label.
pub(crate) fn authorizer_check(result: &'static str) {
    metrics::counter!("admission_proxy_authorizer_checks_total", "result" => result).increment(1);
}

/// One SubjectAccessReview call's latency:
/// `admission_proxy_subjectaccessreview_duration_seconds`.
pub(crate) fn subjectaccessreview_duration(elapsed: Duration) {
    metrics::histogram!("admission_proxy_subjectaccessreview_duration_seconds")
        .record(elapsed.as_secs_f64());
}

/// The `reason` label values of `admission_proxy_exempt_total`
/// (`exclusions::ExemptionReason::as_str`).
pub(crate) const EXEMPTION_REASONS: [&str; 3] = ["namespace", "condition", "virtual_resource"];

/// `admission_proxy_exempt_total{reason}` in [`EXEMPTION_REASONS`] order, then
/// `admission_proxy_exclusion_condition_errors_total`: resolved once (at install), so that
/// counting on the request path hashes no labels.
fn exemptions() -> &'static ([Counter; EXEMPTION_REASONS.len()], Counter) {
    static HANDLES: OnceLock<([Counter; EXEMPTION_REASONS.len()], Counter)> = OnceLock::new();
    HANDLES.get_or_init(|| {
        (
            EXEMPTION_REASONS.map(
                |reason| metrics::counter!("admission_proxy_exempt_total", "reason" => reason),
            ),
            metrics::counter!("admission_proxy_exclusion_condition_errors_total"),
        )
    })
}

/// An admission exempted by a proxy-wide exclusion: `admission_proxy_exempt_total{reason}`,
/// `reason` one of [`EXEMPTION_REASONS`].
pub(crate) fn exempt(reason: &'static str) {
    if let Some(i) = EXEMPTION_REASONS.iter().position(|r| *r == reason) {
        exemptions().0[i].increment(1);
    }
}

/// An exclusion matchCondition failed to evaluate for an admission:
/// `admission_proxy_exclusion_condition_errors_total`.
pub(crate) fn exclusion_condition_error() {
    exemptions().1.increment(1);
}

/// A new connection to a backend (TCP and, for https, a TLS handshake):
/// `admission_proxy_upstream_connections_opened_total`.
pub(crate) fn upstream_connection_opened() {
    metrics::counter!("admission_proxy_upstream_connections_opened_total").increment(1);
}

/// Client connections open now: `admission_proxy_connections_open`.
pub(crate) fn connections_open(open: usize) {
    metrics::gauge!("admission_proxy_connections_open").set(open as f64);
}

/// A client connection closed by a limit (one of [`CLOSE_REASONS`]):
/// `admission_proxy_connections_closed_total{reason}`.
pub(crate) fn connection_closed(reason: &'static str) {
    metrics::counter!("admission_proxy_connections_closed_total", "reason" => reason).increment(1);
}

/// An admission answered 429 by `--max-requests-inflight`: `admission_proxy_throttled_total`.
pub(crate) fn throttled() {
    metrics::counter!("admission_proxy_throttled_total").increment(1);
}

/// A backend's circuit breaker entered `to` (open, half_open, closed):
/// `admission_proxy_circuit_breaker_transitions_total{backend,to}`. Rare: labels hashed here.
pub(crate) fn breaker_transition(backend: &str, to: &'static str) {
    metrics::counter!("admission_proxy_circuit_breaker_transitions_total", "backend" => backend.to_string(), "to" => to).increment(1);
}

/// What a webhook in mode Shadow decided in the background:
/// `admission_proxy_webhook_shadow_decisions_total{name,type,decision}` (off the answer's path).
pub(crate) fn shadow_decision(name: &str, webhook_type: &'static str, decision: &'static str) {
    metrics::counter!("admission_proxy_webhook_shadow_decisions_total", "name" => name.to_string(), "type" => webhook_type, "decision" => decision).increment(1);
}

/// A shadow call dropped because the background queue was full:
/// `admission_proxy_shadow_calls_dropped_total`.
pub(crate) fn shadow_dropped() {
    metrics::counter!("admission_proxy_shadow_calls_dropped_total").increment(1);
}

/// One candidate comparison: `admission_proxy_candidate_comparisons_total`.
pub(crate) fn candidate_comparison(webhook: &str, candidate: &str, result: &'static str) {
    metrics::counter!("admission_proxy_candidate_comparisons_total", "webhook" => webhook.to_string(), "candidate" => candidate.to_string(), "result" => result).increment(1);
}

/// A candidate decision that came from an error: `admission_proxy_candidate_error_decisions_total`.
pub(crate) fn candidate_error_decision(webhook: &str, candidate: &str) {
    metrics::counter!("admission_proxy_candidate_error_decisions_total", "webhook" => webhook.to_string(), "candidate" => candidate.to_string()).increment(1);
}

/// How long a candidate took: `admission_proxy_candidate_duration_seconds`.
pub(crate) fn candidate_duration(webhook: &str, candidate: &str, took: Duration) {
    metrics::histogram!("admission_proxy_candidate_duration_seconds", "webhook" => webhook.to_string(), "candidate" => candidate.to_string()).record(took.as_secs_f64());
}

/// A capture written: `admission_proxy_captures_total`.
pub(crate) fn captured() {
    metrics::counter!("admission_proxy_captures_total").increment(1);
}

/// A sampled capture dropped (queue full): `admission_proxy_captures_dropped_total`.
pub(crate) fn capture_dropped() {
    metrics::counter!("admission_proxy_captures_dropped_total").increment(1);
}

/// How long a render still being written to a client is handed to clients that ask meanwhile.
const SHARE_WINDOW: Duration = Duration::from_secs(1);

/// The most renders alive at once: held by clients still being written to, or the latest.
const MAX_RENDERS: usize = 2;

/// `/metrics` text, rendered once and shared as [`Bytes`] by every client it is handed to.
///
/// A scrape asked for while the latest render is still being written to another client, and
/// less than [`SHARE_WINDOW`] old, gets that render; so does one asked for while
/// [`MAX_RENDERS`] renders are already alive (clients that do not read hold them until the
/// write timeout closes them), whatever its age. Any other scrape is rendered anew: a scraper
/// asking after the last answer was written (Prometheus, a test) always sees the current
/// values. Memory: at most [`MAX_RENDERS`] renders, whatever the number of clients (before:
/// two copies per client that did not read). No lock: the latest render is swapped in, and a
/// scrape asked for while another thread renders gets the latest one.
pub(crate) struct Scrapes {
    render: Box<dyn Fn() -> String + Send + Sync>,
    latest: ArcSwapOption<Render>,
    /// Renders not yet freed.
    alive: Arc<AtomicUsize>,
    rendering: AtomicBool,
}

/// One render of the scrape text.
struct Render {
    text: Vec<u8>,
    at: Instant,
    /// Clients whose answer holds this render now.
    clients: AtomicUsize,
    alive: Arc<AtomicUsize>,
}

impl Drop for Render {
    fn drop(&mut self) {
        self.alive.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A render under way: [`Scrapes::rendering`] until dropped.
struct Rendering<'a>(&'a AtomicBool);

impl Drop for Rendering<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// One client's hold on a render: the owner of its answer's [`Bytes`].
struct Client(Arc<Render>);

impl AsRef<[u8]> for Client {
    fn as_ref(&self) -> &[u8] {
        &self.0.text
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.0.clients.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Scrapes {
    /// Scrapes of what `render` returns (the exporter's Prometheus text).
    pub(crate) fn new(render: impl Fn() -> String + Send + Sync + 'static) -> Self {
        Scrapes {
            render: Box::new(render),
            latest: ArcSwapOption::empty(),
            alive: Arc::new(AtomicUsize::new(0)),
            rendering: AtomicBool::new(false),
        }
    }

    /// The text of one `/metrics` answer: the latest render, shared, or a new one.
    pub(crate) fn body(&self) -> Bytes {
        let latest = self.latest.load_full();
        if let Some(latest) = latest.as_ref().filter(|l| self.share(l)) {
            return Self::hand_out(latest.clone());
        }
        if self.rendering.swap(true, Ordering::AcqRel) {
            // Another thread renders now: the latest render, or (before the first) one's own.
            return match latest {
                Some(latest) => Self::hand_out(latest),
                None => Bytes::from((self.render)()),
            };
        }
        // Cleared however the render ends, so that a failed one does not stop the next.
        let _rendering = Rendering(&self.rendering);
        let text = (self.render)().into_bytes();
        self.alive.fetch_add(1, Ordering::AcqRel);
        let render = Arc::new(Render {
            text,
            at: Instant::now(),
            clients: AtomicUsize::new(0),
            alive: self.alive.clone(),
        });
        self.latest.store(Some(render.clone()));
        Self::hand_out(render)
    }

    /// Whether `latest` is handed out rather than a new render made.
    fn share(&self, latest: &Render) -> bool {
        let busy = latest.clients.load(Ordering::Acquire) > 0;
        if busy && latest.at.elapsed() < SHARE_WINDOW {
            return true;
        }
        // Alive after a new render: the older renders still held by clients, the latest if a
        // client holds it (else it is freed when replaced), and the new one.
        let older = self.alive.load(Ordering::Acquire).saturating_sub(1);
        older + usize::from(busy) + 1 > MAX_RENDERS
    }

    fn hand_out(render: Arc<Render>) -> Bytes {
        render.clients.fetch_add(1, Ordering::AcqRel);
        Bytes::from_owner(Client(render))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scrapes rendering `n, n+1, ...` (the render count) as their text.
    fn counting() -> (Scrapes, Arc<AtomicUsize>) {
        let renders = Arc::new(AtomicUsize::new(0));
        let counter = renders.clone();
        let scrapes =
            Scrapes::new(move || (counter.fetch_add(1, Ordering::AcqRel) + 1).to_string());
        (scrapes, renders)
    }

    /// Each client of `/metrics` had a render of its own, and one that did not read
    /// kept it. Clients asking while a render is being written share it; a scraper asking
    /// after its last answer was written gets the current values.
    #[tokio::test(start_paused = true)]
    async fn a_render_is_shared_while_it_is_being_written() {
        let (scrapes, renders) = counting();
        assert_eq!(scrapes.body(), "1");
        assert_eq!(scrapes.body(), "2", "nobody holds 1: rendered anew");
        let slow = scrapes.body();
        assert_eq!(slow, "3");
        let same = scrapes.body();
        assert_eq!(same, "3", "3 is being written: shared");
        assert_eq!(same.as_ptr(), slow.as_ptr(), "one copy");
        assert_eq!(renders.load(Ordering::Acquire), 3);
        drop((slow, same));
        assert_eq!(scrapes.body(), "4");
    }

    /// Clients that do not read keep renders alive until the write timeout: after
    /// [`SHARE_WINDOW`] a new render is made, but never more than [`MAX_RENDERS`] alive.
    #[tokio::test(start_paused = true)]
    async fn renders_alive_are_bounded_whatever_the_clients_do() {
        let (scrapes, _) = counting();
        let first = scrapes.body();
        tokio::time::advance(SHARE_WINDOW).await;
        let second = scrapes.body();
        assert_eq!((&first[..], &second[..]), (&b"1"[..], &b"2"[..]));
        tokio::time::advance(SHARE_WINDOW * 10).await;
        let held: Vec<Bytes> = (0..100).map(|_| scrapes.body()).collect();
        assert!(
            held.iter().all(|b| b == "2"),
            "two renders alive: the latest is shared"
        );
        assert_eq!(scrapes.alive.load(Ordering::Acquire), 2);
        drop(first);
        assert_eq!(scrapes.body(), "3", "one freed: rendered anew");
        drop((second, held));
        assert_eq!(scrapes.alive.load(Ordering::Acquire), 1, "only the latest");
    }
}
