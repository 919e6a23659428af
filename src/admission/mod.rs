//! One admission, from the routed request to the answer, for single webhook routes and chains
//! alike: the caller's deadline (`?timeout=`), the namespace labels (the cache, or
//! kube-apiserver's live lookup), proxy-wide exemptions, each webhook's mode, the dispatcher's
//! pipeline (`dispatch`), and observation (the log line, trace-level body, capture, metrics).
//! Work after the answer (Shadow calls) goes to one bounded lane ([`background`]). The server
//! (`server`) hands a routed, parsed request here and writes back what comes out; it knows
//! nothing of namespaces, exemptions, Shadow or chains. Depends on `config`, `dispatch`,
//! `exclusions`, `namespace_watch`, `capture`, `telemetry`, `review`, `metrics`.

mod background;
mod candidates;
mod compare;

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::{ArcSwap, ArcSwapOption};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::api::WebhookType;
use crate::capture::Capture;
use crate::config::{Chain, Snapshot};
use crate::dispatch::chain::{ChainAnswer, ChainRequest, Step};

use crate::dispatch::Dispatcher;
use crate::dispatch::{Answer, Clock, Decision, Shadow};
use crate::exclusions::{Exclusions, Exemption};
use crate::log_value::Bounded;
use crate::matching::Namespaces;
use crate::namespace_watch::{Lookup, NamespaceWatch};
use crate::redact::RedactPath;
use crate::review::{ParsedReview, SharedReview};
use crate::telemetry::{Spans, TraceContext};

use background::Background;

/// Where an admission path points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route<'a> {
    /// `/webhooks/validating/{name}`, `/webhooks/mutating/{name}` or `/webhooks/{name}`: one
    /// webhook.
    Webhook(Option<WebhookType>, &'a str),
    /// `/configurations/{validating|mutating}/{name}`: every webhook of one configuration;
    /// `/configurations/{validating|mutating}`: every configuration of the type.
    Chain(WebhookType, Option<&'a str>),
}

/// The admission layer: what one admission reads (a lock-free configuration snapshot, the
/// namespace labels), what it runs (the dispatcher), and where it reports (captures, spans).
/// Built whole by [`Admissions::new`] or [`Admissions::from_parts`]; a reload swaps
/// `config` and `namespaces`, nothing else changes after construction.
pub struct Admissions {
    pub(crate) config: ArcSwap<Snapshot>,
    /// Namespace labels from `--namespaces-file` or the namespace watch; `None` when neither
    /// was given (or the watch has not listed yet). Shared with the watch, which publishes here.
    pub(crate) namespaces: Arc<ArcSwapOption<Namespaces>>,
    /// `--watch-namespaces`: readiness waits for its first list, and namespaces missing from
    /// the cache are looked up live.
    namespace_watch: Option<NamespaceWatch>,
    pub(crate) dispatcher: Dispatcher,
    /// `--capture-dir`: sampled, redacted AdmissionReviews for `explain --review`.
    capture: Option<Capture>,
    /// `--redact-path`: fields replaced in every body the proxy writes out (captures, trace
    /// logs), besides Secret values.
    redact_paths: Vec<RedactPath>,
    /// `--otlp-endpoint`: the proxy's own spans, exported over OTLP; `None` (the default)
    /// forwards the caller's trace context and records nothing.
    pub(crate) spans: Option<Spans>,
    /// `--exempt-namespace`, `--exempt-namespace-selector`, `--exclusions-file`: requests
    /// answered allowed before any webhook ([`exemption`]); `None` (the default) for none.
    exclusions: Option<Exclusions>,
    /// Work after the answer: Shadow calls.
    background: Background,
    /// Set when `--shutdown-grace-seconds` ran out: admissions still in flight stop waiting
    /// for their backend and are answered by failurePolicy ([`Admissions::expire_grace`]).
    grace_expired: AtomicBool,
    grace_notify: Notify,
}

/// What [`Admissions::from_parts`] builds from: everything `serve` configures, made before
/// the admission layer is (the namespace watch publishes into `namespaces`).
pub(crate) struct Parts {
    pub(crate) snapshot: Snapshot,
    pub(crate) namespaces: Arc<ArcSwapOption<Namespaces>>,
    pub(crate) namespace_watch: Option<NamespaceWatch>,
    pub(crate) dispatcher: Dispatcher,
    pub(crate) capture: Option<Capture>,
    pub(crate) redact_paths: Vec<RedactPath>,
    pub(crate) spans: Option<Spans>,
    pub(crate) exclusions: Option<Exclusions>,
}

/// A route naming no loaded webhook or configuration: answered 404, counted
/// (`bad_requests_total{reason="unknown_webhook"|"unknown_configuration"}`).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UnknownRoute(String);

impl Admissions {
    /// The admission layer for `config`, with the namespace labels `namespaces` (none: every
    /// namespaceSelector that needs labels fails by its failurePolicy) and `dispatcher`;
    /// nothing else configured (no captures, spans, exclusions or namespace watch).
    ///
    /// # Errors
    /// The background lane's thread could not be started (out of threads or memory).
    pub fn new(
        config: Snapshot,
        namespaces: Option<Namespaces>,
        dispatcher: Dispatcher,
    ) -> std::io::Result<Self> {
        Self::from_parts(Parts {
            snapshot: config,
            namespaces: Arc::new(ArcSwapOption::new(namespaces.map(Arc::new))),
            namespace_watch: None,
            dispatcher,
            capture: None,
            redact_paths: Vec::new(),
            spans: None,
            exclusions: None,
        })
    }

    /// The admission layer from everything `serve` configured.
    ///
    /// # Errors
    /// The background lane's thread could not be started (out of threads or memory).
    pub(crate) fn from_parts(parts: Parts) -> std::io::Result<Self> {
        Ok(Admissions {
            config: ArcSwap::from_pointee(parts.snapshot),
            namespaces: parts.namespaces,
            namespace_watch: parts.namespace_watch,
            dispatcher: parts.dispatcher,
            capture: parts.capture,
            redact_paths: parts.redact_paths,
            spans: parts.spans,
            exclusions: parts.exclusions,
            background: Background::new()?,
            grace_expired: AtomicBool::new(false),
            grace_notify: Notify::new(),
        })
    }

    /// Why kube-apiserver should not be sent requests yet, if so: no webhook is loaded (an
    /// empty configuration would answer every route 404), or the namespace watch has not
    /// listed yet.
    ///
    /// # Errors
    /// The reason, for the `/readyz` body.
    pub(crate) fn readiness(&self) -> Result<(), &'static str> {
        if self.config.load().is_empty() {
            return Err("no webhooks are configured");
        }
        if self.namespace_watch.as_ref().is_some_and(|w| !w.synced()) {
            return Err("the namespace watch has not listed the cluster's namespaces yet");
        }
        Ok(())
    }

    /// The shutdown grace period ran out: every admission still waiting for its backend is
    /// answered by its webhook's failurePolicy now (as kube-apiserver would treat a call that
    /// never answered), rather than left to a closed connection.
    pub(crate) fn expire_grace(&self) {
        self.grace_expired.store(true, Ordering::Release);
        self.grace_notify.notify_waiters();
    }

    /// Resolves once [`Admissions::expire_grace`] was called.
    async fn grace_expired(&self) {
        loop {
            let expired = self.grace_notify.notified();
            if self.grace_expired.load(Ordering::Acquire) {
                return;
            }
            expired.await;
        }
    }

    /// Appends to `out`, a scrape's text, the families rendered from the configuration
    /// served rather than kept by the recorder, so that what a reload removed leaves
    /// `/metrics` with it: each webhook's caBundle expiry, and the circuit breaker state of
    /// each backend it calls (legacy webhooks and backend candidates).
    pub(crate) fn write_served_metrics(&self, out: &mut String) {
        let served = self.config.load();
        let expiries = served.webhooks().filter_map(|w| {
            let not_after = w.backend.ca_bundle_expiry?;
            Some((w.webhook_type.as_str(), w.name.as_str(), not_after))
        });
        crate::metrics::write_ca_bundle_expiries(out, expiries);
        let backends: std::collections::HashSet<u64> = served
            .webhooks()
            .flat_map(|w| {
                std::iter::once(w.backend.pool_key)
                    .chain(w.candidates().iter().filter_map(|c| c.backend_pool_key()))
            })
            .collect();
        let states = self
            .dispatcher
            .breaker_states(|key| backends.contains(&key));
        crate::metrics::write_breaker_states(out, states);
    }

    /// The admission of `shared` (parsed once, with its body) on `route`, from the caller's
    /// `query` and `headers` (`?timeout=`, trace context), received at `received`: answered,
    /// observed (log line, trace-level body, capture, metrics), with its Shadow calls handed to
    /// the background lane (the review as it is, not parsed again).
    ///
    /// # Errors
    /// [`UnknownRoute`] when `route` names no loaded webhook or configuration (counted).
    pub(crate) async fn admit(
        self: &Arc<Self>,
        route: Route<'_>,
        shared: &SharedReview,
        query: &str,
        headers: &http::HeaderMap,
        received: Instant,
    ) -> Result<Answer, UnknownRoute> {
        let config = self.config.load();
        let review = shared.get();
        match route {
            Route::Webhook(webhook_type, name) => {
                let webhook = config.route(webhook_type, name).map_err(|e| {
                    crate::metrics::bad_request("unknown_webhook");
                    UnknownRoute(Bounded(e).to_string())
                })?;
                // Pinned where it is made: awaited as a temporary, the admission's (large)
                // future would be copied into this one's state (34,000 instructions of memcpy,
                // callgrind).
                let admit =
                    std::pin::pin!(self.admit_webhook(webhook, shared, query, headers, received));
                let answer = admit.await;
                self.observe(webhook, review, &answer, crate::clock::since(received));
                Ok(answer)
            }
            Route::Chain(webhook_type, name) => {
                let chain = config.chain(webhook_type, name).map_err(|e| {
                    crate::metrics::bad_request("unknown_configuration");
                    UnknownRoute(Bounded(e).to_string())
                })?;
                let admit =
                    std::pin::pin!(self.admit_chain(chain, shared, query, headers, received));
                let chained = admit.await;
                self.observe_chain(chain, review, &chained, crate::clock::since(received));
                Ok(chained.answer)
            }
        }
    }

    /// The admission: a proxy-wide exclusion answers first when one applies ([`exemption`]);
    /// else the dispatcher decides (its phases in `dispatch/pipeline.rs`; a Shadow
    /// answer comes back at once and its call is started here, in the background), within the
    /// proxy's own span when spans are exported, and answered by failurePolicy if the shutdown
    /// grace period runs out first.
    async fn admit_webhook(
        self: &Arc<Self>,
        webhook: &Arc<crate::config::Webhook>,
        shared: &SharedReview,
        query: &str,
        headers: &http::HeaderMap,
        received: Instant,
    ) -> Answer {
        let review = shared.get();
        let webhooks = std::slice::from_ref(webhook);
        // With exclusions the labels are needed first (and looked up once); without, a Shadow
        // webhook answers before any lookup.
        let caller_timeout = caller_timeout(query);
        let time_left = || self.dispatcher.time_left(caller_timeout, received);
        let mut looked_up = None;
        if self.exclusions.is_some() {
            let namespaces = namespaces_for(self, webhooks, review, time_left()).await;
            if let Some(exemption) = exemption(self, review, namespaces.as_deref()) {
                return exemption.answer(review);
            }
            looked_up = Some(namespaces);
        }
        let _webhook_in_flight = webhook.metrics.in_flight();
        if let ControlFlow::Break(shadow) = self.dispatcher.mode(webhook, shared) {
            let answer = shadow.answer();
            self.shadow(shadow, caller_timeout, received);
            return answer;
        }
        let clock = Clock {
            caller_timeout,
            received,
        };
        // Pinned where it is made, as every large admission future is (no copy into this
        // one's state).
        let decide =
            std::pin::pin!(self.decide(webhook, review, looked_up, clock, trace_context(headers)));
        let answer = decide.await;
        if !webhook.candidates.is_empty() {
            self.candidates(webhook, shared, &answer);
        }
        answer
    }

    /// The dispatcher's decision on `review` for `webhook` (the namespace labels looked up
    /// now unless `looked_up`), within the proxy's own span when spans are exported, and
    /// answered by failurePolicy if the shutdown grace period runs out first.
    async fn decide(
        &self,
        webhook: &Arc<crate::config::Webhook>,
        review: &ParsedReview<'_>,
        looked_up: Option<Option<Arc<Namespaces>>>,
        clock: Clock,
        trace_context: TraceContext<'_>,
    ) -> Answer {
        // `--otlp-endpoint`: the proxy's own span for this admission, parented on the caller's
        // context; without it nothing is allocated.
        let span = self
            .spans
            .as_ref()
            .map(|s| s.admission(&trace_context, clock.received, webhook, review));
        let answer = {
            let trace_context = trace_context.with_span(span.as_ref());
            // Pinned where it is made: moved into `select!`, the admission's (large) future was
            // copied four times per admission (34,000 instructions of memcpy, callgrind).
            let admit =
                std::pin::pin!(self.pipeline(webhook, review, looked_up, clock, trace_context));
            tokio::select! {
                biased;
                answer = admit => answer,
                () = self.grace_expired() => self.dispatcher.shutting_down(webhook, review),
            }
        };
        if let Some(span) = span {
            span.finish(answer.decision, answer.http_status);
        }
        answer
    }

    /// The dispatcher's pipeline for `webhook` on `review`, with the namespace labels
    /// `looked_up` already, else looked up now.
    async fn pipeline(
        &self,
        webhook: &Arc<crate::config::Webhook>,
        review: &ParsedReview<'_>,
        looked_up: Option<Option<Arc<Namespaces>>>,
        clock: Clock,
        trace_context: TraceContext<'_>,
    ) -> Answer {
        let namespaces = match looked_up {
            Some(namespaces) => namespaces,
            None => {
                let time_left = self
                    .dispatcher
                    .time_left(clock.caller_timeout, clock.received);
                let webhooks = std::slice::from_ref(webhook);
                namespaces_for(self, webhooks, review, time_left).await
            }
        };
        let admit = std::pin::pin!(self.dispatcher.dispatch(
            webhook,
            review,
            namespaces.as_deref(),
            clock.caller_timeout,
            clock.received,
            trace_context,
        ));
        admit.await
    }

    /// A chain admission (`/configurations/...`): a proxy-wide exclusion answers first when
    /// one applies ([`exemption`]); else the dispatcher runs the chain's webhooks
    /// ([`crate::dispatch::chain`]); each webhook's call still under way when the shutdown
    /// grace period runs out is answered by its failurePolicy; webhooks in mode Shadow are
    /// started here, in the background, with the review each would have received.
    async fn admit_chain(
        self: &Arc<Self>,
        chain: &Arc<Chain>,
        shared: &SharedReview,
        query: &str,
        headers: &http::HeaderMap,
        received: Instant,
    ) -> ChainAnswer {
        let review = shared.get();
        let caller_timeout = caller_timeout(query);
        let time_left = self.dispatcher.time_left(caller_timeout, received);
        let namespaces = namespaces_for(self, &chain.webhooks, review, time_left).await;
        if let Some(exemption) = exemption(self, review, namespaces.as_deref()) {
            return ChainAnswer {
                answer: exemption.answer(review),
                steps: Vec::new(),
                rounds: 0,
                shadows: Vec::new(),
                called: Vec::new(),
            };
        }
        let trace_context = trace_context(headers);
        // `--otlp-endpoint`: one span for the chain; each webhook's phases are its children.
        let span = self
            .spans
            .as_ref()
            .map(|s| s.chain_admission(&trace_context, received, chain.name(), review));
        let trace_context = trace_context.with_span(span.as_ref());
        let request = ChainRequest {
            review: shared,
            namespaces: namespaces.as_deref(),
            caller_timeout,
            received,
            trace_context,
        };
        let grace = || self.grace_expired();
        let mut answer = {
            let run = std::pin::pin!(self.dispatcher.chain(chain, request, &grace));
            run.await
        };
        if let Some(span) = span {
            span.finish(answer.answer.decision, answer.answer.http_status);
        }
        for shadow in std::mem::take(&mut answer.shadows) {
            self.shadow(shadow, caller_timeout, received);
        }
        for called in std::mem::take(&mut answer.called) {
            self.candidates(&called.webhook, &called.review, &called.answer);
        }
        answer
    }

    /// Observation, once per chain admission: one log line with every webhook's decision,
    /// the redacted body at trace level, a sampled capture, each webhook's metrics (as on its
    /// single route) and the chain's.
    fn observe_chain(
        &self,
        chain: &Chain,
        review: &ParsedReview<'_>,
        chained: &ChainAnswer,
        latency: Duration,
    ) {
        let answer = &chained.answer;
        let request = &review.request;
        let webhooks = WebhookSteps(&chained.steps);
        macro_rules! chain_event {
            ($level:expr) => { tracing::event!($level,
            uid = %Bounded(&request.uid),
            chain = chain.name(),
            r#type = chain.webhook_type.as_str(),
            operation = review.operation.as_str(),
            resource = %Bounded(ResourceLabel(review)),
            object = %Bounded(ObjectLabel(review)),
            decision = answer.decision.as_str(),
            latency_ms = latency.as_secs_f64() * 1000.0,
            rounds = chained.rounds,
            webhooks = %webhooks,
            detail = %Bounded(&answer.detail),
            "chain admission"
        ) };
        }
        if everyday(answer.decision) {
            chain_event!(tracing::Level::DEBUG);
        } else {
            chain_event!(tracing::Level::INFO);
        }
        self.observe_body(review, chain.name(), answer, latency);
        let operation = review.operation as usize;
        for step in &chained.steps {
            let metrics = &step.webhook.metrics;
            metrics.admission(
                step.decision,
                operation,
                step.took,
                step.backend,
                step.conditions,
            );
        }
        chain
            .metrics
            .admission(answer.decision, latency, chained.rounds > 1);
    }

    /// Observation, once per admission: the log line, the redacted body at trace level, a
    /// sampled capture, and the webhook's metrics.
    fn observe(
        &self,
        webhook: &crate::config::Webhook,
        review: &ParsedReview<'_>,
        answer: &Answer,
        latency: Duration,
    ) {
        let request = &review.request;
        // One line per admission: the everyday decisions at debug, the rest at info.
        macro_rules! admission_event {
            ($level:expr) => { tracing::event!($level,
            uid = %Bounded(&request.uid),
            webhook = %webhook.name,
            operation = review.operation.as_str(),
            resource = %Bounded(ResourceLabel(review)),
            object = %Bounded(ObjectLabel(review)),
            decision = answer.decision.as_str(),
            latency_ms = latency.as_secs_f64() * 1000.0,
            detail = %Bounded(&answer.detail),
            "admission"
        ) };
        }
        if everyday(answer.decision) {
            admission_event!(tracing::Level::DEBUG);
        } else {
            admission_event!(tracing::Level::INFO);
        }
        self.observe_body(review, &webhook.name, answer, latency);
        webhook.metrics.admission(
            answer.decision,
            review.operation as usize,
            latency,
            answer.backend,
            answer.conditions,
        );
    }

    /// The body's part of observation: the redacted body at trace level and a sampled
    /// capture, under `route` (a webhook's or a chain's name).
    fn observe_body(
        &self,
        review: &ParsedReview<'_>,
        route: &str,
        answer: &Answer,
        latency: Duration,
    ) {
        let request = &review.request;
        // Secret values and --redact-path fields never reach a log line.
        if tracing::enabled!(tracing::Level::TRACE) {
            let body = crate::redact::redacted_text(review.body(), &self.redact_paths);
            tracing::trace!(uid = %Bounded(&request.uid), body = %body, "admission request body (redacted)");
        }
        if let Some(capture) = &self.capture {
            if capture.sampled(&request.uid) {
                capture.offer(
                    review.body(),
                    route,
                    answer.decision.as_str(),
                    answer.http_status,
                    latency.as_secs_f64() * 1000.0,
                    &answer.detail,
                );
            }
        }
    }

    /// `mode: Shadow`: the webhook is called after the answer, on the background lane, as in
    /// Enforce mode, and what it decided is logged, counted and compared with its candidates. Never delays the answer: with
    /// the lane full the call is shed and counted (`admission_proxy_shadow_calls_dropped_total`).
    fn shadow(
        self: &Arc<Self>,
        shadow: Shadow,
        caller_timeout: Option<Duration>,
        received: Instant,
    ) {
        let Some(slot) = self.background.slot(shadow.review.get().body_len()) else {
            crate::metrics::shadow_dropped();
            tracing::debug!(webhook = %shadow.webhook.name, "shadow call dropped: the background lane is full");
            return;
        };
        let admissions = self.clone();
        slot.run(&self.background, async move {
            let Shadow {
                webhook,
                review: shared,
            } = shadow;
            let review = shared.get();
            let time_left = admissions.dispatcher.time_left(caller_timeout, received);
            let webhooks = std::slice::from_ref(&webhook);
            let namespaces = namespaces_for(&admissions, webhooks, review, time_left).await;
            let answer = admissions
                .dispatcher
                .dispatch(
                    &webhook,
                    review,
                    namespaces.as_deref(),
                    caller_timeout,
                    received,
                    TraceContext::default(),
                )
                .await;
            crate::metrics::shadow_decision(
                &webhook.name,
                webhook.webhook_type.as_str(),
                answer.decision.as_str(),
            );
            tracing::info!(
                uid = %Bounded(&review.request.uid),
                webhook = %webhook.name,
                decision = answer.decision.as_str(),
                detail = %Bounded(&answer.detail),
                latency_ms = crate::clock::since(received).as_secs_f64() * 1000.0,
                "shadow admission: what the webhook would have decided (the answer given was allowed)"
            );
            // Its candidates are compared with what it would have decided: in the cut-over the
            // legacy webhook is Shadow while its replacement enforces, and is still checked.
            if !webhook.candidates.is_empty() {
                admissions.candidates(&webhook, &shared, &answer);
            }
        });
    }
}

/// Whether an admission's (or a chain's) log line is written at debug rather than info: the
/// everyday decisions (allowed, skipped, shadowed, exempt); denials, failures and rejections
/// are info. At 2000 req/s, info lines for the everyday ones cost ~8% of the CPU.
fn everyday(decision: Decision) -> bool {
    matches!(
        decision,
        Decision::Allowed | Decision::Skipped | Decision::Shadowed | Decision::Exempt
    )
}

/// The caller's W3C trace context (`traceparent`, `tracestate`), borrowed from `headers`.
fn trace_context(headers: &http::HeaderMap) -> TraceContext<'_> {
    // Static names: looked up without parsing the name per request.
    static TRACEPARENT: http::HeaderName = http::HeaderName::from_static("traceparent");
    static TRACESTATE: http::HeaderName = http::HeaderName::from_static("tracestate");
    let value = |name| headers.get(name).and_then(|v| v.to_str().ok());
    TraceContext::new(value(&TRACEPARENT), value(&TRACESTATE))
}

/// `group/version/resource[/subresource]` of a request, for log lines; formatted only when
/// the line is written.
struct ResourceLabel<'a>(&'a ParsedReview<'a>);

impl std::fmt::Display for ResourceLabel<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let request = &self.0.request;
        let resource = request.effective_resource();
        let sub = request.effective_sub_resource();
        if !resource.group.is_empty() {
            write!(f, "{}/", resource.group)?;
        }
        write!(f, "{}/{}", resource.version, resource.resource)?;
        if !sub.is_empty() {
            write!(f, "/{sub}")?;
        }
        Ok(())
    }
}

/// `namespace/name` (or `name`) of a request's object, for log lines.
struct ObjectLabel<'a>(&'a ParsedReview<'a>);

impl std::fmt::Display for ObjectLabel<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let request = &self.0.request;
        if !request.namespace.is_empty() {
            write!(f, "{}/", request.namespace)?;
        }
        write!(f, "{}", request.name)
    }
}

/// Every webhook's decision in a chain, for its log line:
/// `a.example.com=skipped b.example.com=allowed(patched,12ms) ...`.
struct WebhookSteps<'a>(&'a [Step]);

impl std::fmt::Display for WebhookSteps<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (n, step) in self.0.iter().enumerate() {
            let space = if n == 0 { "" } else { " " };
            write!(f, "{space}{}={}", step.webhook.name, step.decision.as_str())?;
            if step.round > 0 {
                write!(f, "[round {}]", step.round)?;
            }
            if let Some(backend) = step.backend {
                let patched = if step.mutated { "patched," } else { "" };
                write!(f, "({patched}{}ms)", backend.as_millis())?;
            }
            if matches!(step.decision, Decision::FailedOpen | Decision::FailedClosed) {
                write!(f, "({})", Bounded(&step.detail))?;
            }
        }
        Ok(())
    }
}

/// kube-apiserver's deadline for this call: the `timeout` query parameter, a Go duration
/// (`10s`, `1m0s`, `500ms`) as client-go writes it (`Request.Timeout` in
/// `staging/src/k8s.io/client-go/rest/request.go`). Read as Go's `url.Query` and
/// `time.ParseDuration` read it, with `form_urlencoded` and kube-core's `Duration`; absent,
/// malformed or negative is no deadline of the caller's.
fn caller_timeout(query: &str) -> Option<Duration> {
    let (_, value) = form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == "timeout")?;
    // kube-core reads "" as zero; Go's ParseDuration refuses it.
    if value.is_empty() {
        return None;
    }
    let duration: kube_core::Duration = value.parse().ok()?;
    (!duration.is_negative()).then(|| duration.into())
}

/// The namespace labels `review` is matched with: the cache, or, with `--watch-namespaces`,
/// kube-apiserver's live lookup of a namespace the watch has not seen yet: once per admission,
/// for the proxy-wide exclusions and `webhooks` alike, bounded by the timeout of the first of
/// `webhooks` whose namespaceSelector needs it (else [`NAMESPACE_LOOKUP_TIMEOUT`]) and by
/// `time_left` of the caller's deadline, so that failurePolicy still answers in time.
async fn namespaces_for(
    state: &Admissions,
    webhooks: &[Arc<crate::config::Webhook>],
    review: &ParsedReview<'_>,
    time_left: Option<Duration>,
) -> Option<Arc<Namespaces>> {
    let cache = state.namespaces.load_full();
    let Some(watch) = &state.namespace_watch else {
        return cache;
    };
    let webhook = webhooks
        .iter()
        .find(|w| w.matcher.namespace_missing(review, cache.as_deref()));
    let exclusions = state
        .exclusions
        .as_ref()
        .is_some_and(|e| e.namespace_missing(review, cache.as_deref()));
    let timeout = match webhook {
        Some(webhook) => webhook.timeout,
        None if exclusions => NAMESPACE_LOOKUP_TIMEOUT,
        None => return cache,
    };
    let timeout = time_left.map_or(timeout, |left| timeout.min(left));
    live_namespace(watch, &review.request.namespace, timeout)
        .await
        .map(Arc::new)
        .or(cache)
}

/// Proxy-wide exclusions, before any webhook (`crate::exclusions`): the exemption that applies
/// to `review`, counted, or `None` (also when none are configured). `namespaces` are the
/// admission's, from [`namespaces_for`], which looks a namespace the watch has not seen yet
/// up for the exclusions too.
pub(crate) fn exemption(
    state: &Admissions,
    review: &ParsedReview<'_>,
    namespaces: Option<&Namespaces>,
) -> Option<Exemption> {
    state.exclusions.as_ref()?.exempt(review, namespaces)
}

/// The longest a live namespace lookup may take (also bounded by the webhook's timeout).
const NAMESPACE_LOOKUP_TIMEOUT: Duration = Duration::from_secs(2);

/// kube-apiserver's lister-miss fallback (`Provider.GetNamespace` in
/// `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/namespace/matcher.go`)
/// for a namespace the watch has not (yet) seen: its labels, `None` when it does not exist (the
/// matcher then answers 404 as usual), or why it cannot be known (failurePolicy decides).
async fn live_namespace(
    watch: &NamespaceWatch,
    name: &str,
    webhook_timeout: Duration,
) -> Option<Namespaces> {
    match watch
        .lookup(name, webhook_timeout.min(NAMESPACE_LOOKUP_TIMEOUT))
        .await
    {
        Lookup::Found(one) => Some(one),
        Lookup::NotFound => None,
        Lookup::Failed(reason) if watch.synced() => Some(Namespaces::unavailable(reason)),
        Lookup::Failed(reason) => Some(Namespaces::unavailable(format!(
            "the namespace watch has not listed the cluster's namespaces yet, and {reason}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kube-apiserver's `?timeout=` as Go reads it (the cases the hand-written parser this
    /// replaced was tested with, and Go's percent-decoding and fractions).
    #[test]
    fn the_callers_timeout_is_read_as_go_reads_it() {
        let s = Duration::from_secs;
        assert_eq!(caller_timeout("timeout=10s"), Some(s(10)));
        assert_eq!(caller_timeout("dryRun=All&timeout=1m0s"), Some(s(60)));
        assert_eq!(
            caller_timeout("timeout=1.5s"),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            caller_timeout("timeout=250ms"),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            caller_timeout("timeout=1%6D0s"),
            Some(s(60)),
            "percent-decoded"
        );
        assert_eq!(caller_timeout("timeout=ten"), None);
        assert_eq!(caller_timeout("timeout=-5s"), None);
        assert_eq!(caller_timeout("timeout="), None);
        assert_eq!(caller_timeout(""), None);
    }

    /// A Shadow webhook's call after the answer takes the review as the request parsed it:
    /// one parse for the admission and its background call together (a second parse of a
    /// copied body was how the background lane was fed).
    #[tokio::test]
    async fn a_shadow_call_reads_the_review_parsed_for_the_answer() {
        use crate::config::options::Mode;
        // Nothing listens on the port: the Shadow call fails fast, after the review was read.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let yaml = format!("apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\n\
             metadata: {{name: c}}\nwebhooks:\n- name: w.example.com\n  \
             clientConfig: {{url: \"https://127.0.0.1:{port}/\"}}\n  \
             rules: [{{operations: [CREATE], apiGroups: [\"*\"], apiVersions: [\"*\"], resources: [\"*\"]}}]\n  \
             sideEffects: None\n  admissionReviewVersions: [v1]\n  failurePolicy: Fail\n");
        let snapshot = crate::config::load_contents(&[("t.yaml".into(), yaml)])
            .unwrap_or_else(|e| panic!("{e}"));
        let dispatcher =
            Dispatcher::new(Duration::from_millis(250)).with_default_mode(Mode::Shadow);
        let admissions = Arc::new(Admissions::new(snapshot, None, dispatcher).unwrap());
        let body = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/admission-reviews/0064-create-apps-v1-deployments-v1.json"
        ))
        .unwrap();
        crate::review::PARSES.with(|n| n.set(0));
        let review = SharedReview::parse(body.into()).unwrap();
        let route = Route::Webhook(Some(WebhookType::Validating), "w.example.com");
        let answer = admissions
            .admit(route, &review, "", &http::HeaderMap::new(), Instant::now())
            .await
            .unwrap();
        assert_eq!(answer.decision, Decision::Shadowed, "{}", answer.detail);
        // The background call runs on the lane's own thread; its end frees its place.
        admissions.background.finished().await;
        let on_lane = admissions
            .background
            .on_lane(|| crate::review::PARSES.with(std::cell::Cell::get))
            .await;
        assert_eq!(
            crate::review::PARSES.with(std::cell::Cell::get) + on_lane,
            1
        );
    }
}
#[cfg(test)]
mod future_size {
    use super::*;

    /// What an admission in flight holds: its future is part of its connection's task. A new
    /// backend connection (DNS lookup, TCP and TLS handshakes, pingora's connector) is the rare
    /// branch of a call, boxed when taken; inline, its state made every admission's future
    /// 16 KiB (this build: 15,984 bytes, the call's 10,440) where the common path needs under
    /// half of that.
    #[test]
    fn an_admission_holds_no_connection_setup() {
        let yaml = "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\n\
            metadata: {name: c}\nwebhooks:\n- name: w.example.com\n  \
            clientConfig: {url: \"https://127.0.0.1:1/\"}\n  \
            rules: [{operations: [CREATE], apiGroups: [\"*\"], apiVersions: [\"*\"], resources: [\"*\"]}]\n  \
            sideEffects: None\n  admissionReviewVersions: [v1]\n";
        let snapshot = crate::config::load_contents(&[("t.yaml".into(), yaml.to_string())])
            .unwrap_or_else(|e| panic!("{e}"));
        let dispatcher = Dispatcher::new(Duration::from_millis(250));
        let admissions = Arc::new(Admissions::new(snapshot, None, dispatcher).unwrap());
        let body = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/admission-reviews/0064-create-apps-v1-deployments-v1.json"
        ))
        .unwrap();
        let review = SharedReview::parse(body.into()).unwrap();
        let route = Route::Webhook(Some(WebhookType::Validating), "w.example.com");
        let headers = http::HeaderMap::new();
        let admit = admissions.admit(route, &review, "", &headers, Instant::now());
        let config = admissions.config.load();
        let webhook = config
            .route(Some(WebhookType::Validating), "w.example.com")
            .unwrap();
        let client = crate::dispatch::client::HttpClient::new();
        let target = crate::dispatch::client::Target::shared(webhook.backend.clone());
        let call = client.post(&target, "/", b"", &[]);
        let (admit, call) = (std::mem::size_of_val(&admit), std::mem::size_of_val(&call));
        assert!(admit <= 8 * 1024, "an admission's future is {admit} bytes");
        assert!(call <= 2 * 1024, "a call's future is {call} bytes");
    }
}
