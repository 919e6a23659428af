//! From "this webhook matched" to the answer for kube-apiserver: dry-run vs sideEffects,
//! AdmissionReview version negotiation, the deadline, the backend call, verification, and
//! failurePolicy, as `callHook` and `Dispatch` in `validating/dispatcher.go` and
//! `callAttrMutatingHook` in `mutating/dispatcher.go` do (both under
//! `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/`). Every failure is classified
//! once as a `CallFailure`, which drives the answer, the log line and the metrics. One
//! webhook's decision is a `Verdict`; a single route renders it (`Verdict::into_answer`), a
//! chain route (`chain`) folds the verdicts of a whole configuration's webhooks.
//! Depends on `config`, `conversion`, `matching`, `review`, `metrics`, `authorizer` (checks of
//! matchConditions' `authorizer`) and `telemetry` (its phases and backend calls become spans
//! when the proxy exports them).

pub mod breaker;
pub(crate) mod chain;
pub(crate) mod client;
pub(crate) mod conversion_webhook;
pub(crate) mod pipeline;

pub(crate) use pipeline::{patch_paths, Shadow};
pub(crate) mod verify;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::api::FailurePolicy;
use crate::authorizer::SubjectAccessReviews;
use crate::config::options::Mode;
use crate::config::Webhook;
use crate::conversion::{self, EquivalentError, Rewritten};
pub(crate) use crate::decision::Decision;
use crate::kube_version::KubeVersion;
use crate::matching::CostModel;
use crate::metrics::Conditions;
use crate::review::{encode_status, AdmissionResponse, ParsedReview, Status};
pub use client::{
    HttpClient, HttpReply, Target, TransportError, ANSWER_BYTES, MAX_ANSWER_BYTES,
    UNCOUNTED_ANSWER_BYTES,
};

/// Why a call to a backend failed. Exactly the failures kube-apiserver submits to
/// failurePolicy (`ErrCallingWebhook`, `staging/src/k8s.io/apiserver/pkg/util/webhook/error.go`).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub(crate) enum CallFailure {
    /// `admissionReviewVersions` lists no version kube-apiserver knows.
    #[error("could not create admission objects: webhook does not accept known AdmissionReview versions (v1, v1beta1)")]
    NoKnownReviewVersion,
    #[error("failed to call webhook: Post {url:?}: {detail}")]
    Transport {
        url: String,
        class: &'static str,
        detail: String,
    },
    /// The answer's body could not be read (client-go words it without the URL).
    #[error("failed to call webhook: {0}")]
    ReadBody(String),
    #[error("failed to call webhook: Post {url:?}: context deadline exceeded")]
    Timeout { url: String },
    /// A non-2xx answer; `code` only reaches metrics (as in `ErrCallingWebhook.Status`).
    #[error("failed to call webhook: {message}")]
    Status { code: u16, message: String },
    #[error("failed to call webhook: {0}")]
    Undecodable(String),
    #[error("received invalid webhook response: {0}")]
    Invalid(String),
    #[error("unsupported patch type {0:?}")]
    UnsupportedPatchType(String),
    #[error("received undecodable patch in webhook response: {0}")]
    UndecodablePatch(String),
    /// The backend's client cannot be built (a `caBundle` with no usable certificate):
    /// `ErrCallingWebhook`'s `could not get REST client: …` (`callHook`).
    #[error("could not get REST client: {0}")]
    RestClient(String),
    /// The proxy could not read the namespace labels the webhook's namespaceSelector needs
    /// (`serve --watch-namespaces` not synced, live lookup failed); no call was made.
    #[error("{0}")]
    NamespaceUnavailable(String),
    /// The backend's circuit breaker is open (`--breaker-failures`); no call was made.
    #[error("{0}")]
    CircuitOpen(breaker::BreakerOpen),
    /// Every call slot of the webhook (`maxConcurrentCalls`) stayed taken for the queue time;
    /// no call was made.
    #[error("{0}")]
    Overloaded(String),
    /// The proxy's `--shutdown-grace-seconds` ran out while the call was under way.
    #[error("failed to call webhook: Post {url:?}: the proxy is shutting down and its grace period ran out")]
    ShuttingDown { url: String },
}

impl CallFailure {
    /// The error class for logs and metrics: `connect`, `tls`, `transport`, `timeout`,
    /// `status`, `bad_answer`, `no_review_version`.
    pub(crate) fn class(&self) -> &'static str {
        match self {
            CallFailure::NoKnownReviewVersion => "no_review_version",
            CallFailure::Transport { class, .. } => class,
            CallFailure::ReadBody(_) => "transport",
            CallFailure::RestClient(_) => "tls",
            CallFailure::Timeout { .. } => "timeout",
            CallFailure::Status { .. } => "status",
            CallFailure::Undecodable(_)
            | CallFailure::Invalid(_)
            | CallFailure::UnsupportedPatchType(_)
            | CallFailure::UndecodablePatch(_) => "bad_answer",
            CallFailure::NamespaceUnavailable(_) => "namespace_labels",
            CallFailure::CircuitOpen(_) => "circuit_open",
            CallFailure::Overloaded(_) => "overloaded",
            CallFailure::ShuttingDown { .. } => "shutdown",
        }
    }

    /// What the proxy puts in the message of its HTTP 500 Status so that kube-apiserver prints
    /// `failed calling webhook "N": failed to call webhook: <this>` (`ErrCallingWebhook.Error`
    /// around client-go's error for a non-2xx Status body, whose text is its `message`): the
    /// reason without its `failed to call webhook: ` prefix.
    pub(crate) fn status_message(&self) -> String {
        let reason = self.to_string();
        match reason.strip_prefix("failed to call webhook: ") {
            Some(rest) => rest.to_string(),
            None => reason,
        }
    }
}

/// The value for `key` in a copy-on-write map, made by `make` and inserted when absent. Readers
/// take no lock; an insert copies the map (backends are few, and each is inserted once).
pub(crate) fn cow_entry<T>(
    map: &arc_swap::ArcSwap<std::collections::HashMap<u64, std::sync::Arc<T>>>,
    key: u64,
    make: impl FnOnce() -> T,
) -> std::sync::Arc<T> {
    if let Some(v) = map.load().get(&key) {
        return v.clone();
    }
    let fresh = std::sync::Arc::new(make());
    let mut chosen = fresh.clone();
    map.rcu(|m| {
        let mut m = std::collections::HashMap::clone(m);
        chosen = m.entry(key).or_insert_with(|| fresh.clone()).clone();
        m
    });
    chosen
}

/// How long a call waits for a `maxConcurrentCalls` slot unless `--call-queue-timeout-ms` says.
pub(crate) const DEFAULT_CALL_QUEUE_TIMEOUT: Duration = Duration::from_millis(100);

/// How many times client-go re-sends one webhook call (`maxRetries: 10` in `NewRequest`,
/// `staging/src/k8s.io/client-go/rest/request.go`).
const MAX_RETRIES: usize = 10;

/// client-go's `checkWait` (`rest/with_retry.go`; `rest/request.go` in older client-go): a 429
/// or 5xx answer with an integer `Retry-After` (seconds, `strconv.Atoi`; negative waits none)
/// is re-sent, same body and uid, after that long. Any other answer is final.
fn retry_after(reply: &HttpReply) -> Option<Duration> {
    if reply.status != 429 && reply.status < 500 {
        return None;
    }
    let seconds: i64 = reply.header("retry-after")?.trim().parse().ok()?;
    Some(Duration::from_secs(seconds.max(0) as u64))
}

/// POSTs `body` as client-go does for webhooks (`rest/request.go`, `Request.Do` with
/// `checkWait`): once, then again after each [`retry_after`] wait, at most [`MAX_RETRIES`]
/// times; `on_retry` counts each re-send. kube-apiserver's admission and conversion webhook
/// clients are both client-go REST clients, so both call paths use this. The caller's
/// deadline (a `timeout` around this future) also ends a wait that would outlast it.
///
/// # Errors
/// The [`TransportError`] of the last attempt.
pub(crate) async fn post_as_client_go(
    client: &HttpClient,
    target: &Target,
    path: &str,
    body: &[u8],
    headers: &[(&str, &str)],
    mut on_retry: impl FnMut(),
) -> Result<HttpReply, TransportError> {
    let mut retries = 0;
    loop {
        let reply = client.post(target, path, body, headers).await?;
        match retry_after(&reply) {
            Some(wait) if retries < MAX_RETRIES => {
                retries += 1;
                on_retry();
                tokio::time::sleep(wait).await;
            }
            _ => return Ok(reply),
        }
    }
}

/// The proxy's answer: HTTP status and body for kube-apiserver, plus what to log.
#[derive(Clone, Debug)]
pub struct Answer {
    /// 200, or 500 when failing closed.
    pub(crate) http_status: u16,
    pub(crate) body: Vec<u8>,
    /// What happened, for the log line and metrics.
    pub decision: Decision,
    /// Why: skip reason, failure, or empty.
    pub(crate) detail: String,
    /// How long the backend call took (every attempt and Retry-After wait), when one was made.
    pub(crate) backend: Option<Duration>,
    /// What matchConditions did (for their metrics).
    pub(crate) conditions: Conditions,
}

impl Answer {
    /// HTTP 200 with `response` in the caller's AdmissionReview version.
    pub(crate) fn respond(
        review: &ParsedReview<'_>,
        response: AdmissionResponse,
        decision: Decision,
        detail: String,
    ) -> Self {
        Answer {
            http_status: 200,
            body: response.encode(review.version),
            decision,
            detail,
            backend: None,
            conditions: Conditions::NotEvaluated,
        }
    }
}

/// When the request arrived and kube-apiserver's `?timeout=`: what every deadline of one
/// admission is measured against.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    pub(crate) received: Instant,
    pub(crate) caller_timeout: Option<Duration>,
}

/// The backend deadline: `min(timeoutSeconds, caller's ?timeout - margin - time already spent)`,
/// as `callHook` bounds a call by `timeoutSeconds` within the request's deadline; the margin
/// allows for kube-apiserver rounding its `?timeout=` up. `None` caller timeout means no bound.
pub(crate) fn backend_budget(
    webhook_timeout: Duration,
    caller_timeout: Option<Duration>,
    margin: Duration,
    elapsed: Duration,
) -> Duration {
    match caller_timeout {
        Some(t) => webhook_timeout.min(t.saturating_sub(margin).saturating_sub(elapsed)),
        None => webhook_timeout,
    }
}

/// The `?timeout=` sent on: the budget rounded up to whole seconds (as `callHook` does).
pub(crate) fn timeout_param(budget: Duration) -> u64 {
    let secs = budget.as_secs() + u64::from(budget.subsec_nanos() > 0);
    secs.max(1)
}

/// Calls backends: runs one webhook's admission through the phases of `pipeline.rs`
/// ([`Self::dispatch`]); a chain's through the same phases ([`chain`]). One per process; holds
/// the connection pool. Built by [`Dispatcher::new`] and its `with_*` settings, below.
pub struct Dispatcher {
    client: HttpClient,
    /// Subtracted from kube-apiserver's `?timeout=` so the proxy answers in time.
    timeout_margin: Duration,
    /// The bound on each CRD conversion webhook call (kube-apiserver: 30 s).
    conversion_timeout: Duration,
    /// `--max-timeout-seconds`: no webhook call may take longer, whatever its `timeoutSeconds`.
    max_timeout: Option<Duration>,
    /// `--breaker-failures`: per-backend circuit breakers, off unless set.
    breakers: Option<breaker::Breakers>,
    /// How long a call waits for one of its webhook's `maxConcurrentCalls` slots.
    call_queue_timeout: Duration,
    /// `--default-mode`: the mode of webhooks without a `mode` option.
    default_mode: Mode,
    /// `--authorizer=subjectaccessreview`: answers matchConditions' `authorizer` checks.
    authorizer: Option<Arc<SubjectAccessReviews>>,
    /// What matchConditions' library calls cost: the cluster's version's default.
    cost_model: CostModel,
    /// The cluster's Kubernetes version (`--kube-version`, `/version`); `None`: the newest
    /// behaviour.
    kube_version: Option<KubeVersion>,
}

impl Dispatcher {
    /// A dispatcher answering `timeout_margin` before kube-apiserver's deadline.
    pub fn new(timeout_margin: Duration) -> Self {
        Dispatcher {
            client: HttpClient::new(),
            timeout_margin,
            conversion_timeout: conversion_webhook::DEFAULT_CONVERSION_TIMEOUT,
            max_timeout: None,
            breakers: None,
            call_queue_timeout: DEFAULT_CALL_QUEUE_TIMEOUT,
            default_mode: Mode::Enforce,
            authorizer: None,
            cost_model: CostModel::Strict,
            kube_version: None,
        }
    }

    /// Decides as kube-apiserver of `version` decides (`None`: the newest): matchConditions'
    /// calls into the Kubernetes CEL libraries priced as it prices them
    /// ([`CostModel::of_kube_version`]), and a mutating webhook's undecodable patch an internal
    /// error before 1.34 ([`crate::kube_version::UNDECODABLE_PATCH_IS_CALL_ERROR`]).
    pub fn with_kube_version(mut self, version: Option<crate::kube_version::KubeVersion>) -> Self {
        self.cost_model = CostModel::of_kube_version(version);
        self.kube_version = version;
        self
    }

    /// Answers matchConditions' `authorizer` checks with `authorizer`
    /// (`--authorizer=subjectaccessreview`).
    pub(crate) fn with_authorizer(mut self, authorizer: Arc<SubjectAccessReviews>) -> Self {
        self.authorizer = Some(authorizer);
        self
    }

    /// The SubjectAccessReview client answering `authorizer` checks (`--authorizer`), if any.
    pub(crate) fn authorizer(&self) -> Option<&Arc<SubjectAccessReviews>> {
        self.authorizer.as_ref()
    }

    /// The mode of webhooks without a `mode` option (`--default-mode`; `Enforce` otherwise).
    pub(crate) fn with_default_mode(mut self, mode: Mode) -> Self {
        self.default_mode = mode;
        self
    }

    /// `webhook`'s mode: its `mode` option, else the default.
    pub(crate) fn mode_of(&self, webhook: &Webhook) -> Mode {
        webhook.mode.unwrap_or(self.default_mode)
    }

    /// How long a call waits for a free slot of a webhook with `maxConcurrentCalls`
    /// (`--call-queue-timeout-ms`; default [`DEFAULT_CALL_QUEUE_TIMEOUT`]).
    pub(crate) fn with_call_queue_timeout(mut self, wait: Duration) -> Self {
        self.call_queue_timeout = wait;
        self
    }

    /// Opens a backend's circuit breaker after `settings.failures` consecutive connect, TLS
    /// or timeout failures ([`breaker`]).
    pub fn with_breakers(mut self, settings: breaker::BreakerSettings) -> Self {
        self.breakers = Some(breaker::Breakers::new(settings));
        self
    }

    /// Each circuit breaker's backend (`host:port`) and state (0 closed, 1 open, 2 half-open)
    /// whose backend `served` keeps (by pool key); none without `--breaker-failures`.
    pub(crate) fn breaker_states(&self, served: impl Fn(u64) -> bool) -> Vec<(String, u8)> {
        self.breakers
            .as_ref()
            .map_or_else(Vec::new, |breakers| breakers.states(served))
    }

    /// Bounds every webhook call by `cap` (`--max-timeout-seconds`), below its
    /// `timeoutSeconds`: a webhook that registered itself with 30 s cannot hold kube-apiserver
    /// for 30 s. The proxy's own, opt-in; kube-apiserver has no such bound.
    pub(crate) fn with_max_timeout(mut self, cap: Duration) -> Self {
        self.max_timeout = Some(cap);
        self
    }

    /// Bounds each CRD conversion webhook call by `timeout` instead of kube-apiserver's 30 s
    /// (always also by kube-apiserver's own deadline).
    pub(crate) fn with_conversion_timeout(mut self, timeout: Duration) -> Self {
        self.conversion_timeout = timeout;
        self
    }

    /// What remains of kube-apiserver's `?timeout=` (less the margin) for a request received
    /// at `received`; `None` when the caller gave none. For what the proxy does before any
    /// webhook (a live namespace lookup), so that failurePolicy still answers in time.
    pub(crate) fn time_left(
        &self,
        caller_timeout: Option<Duration>,
        received: Instant,
    ) -> Option<Duration> {
        caller_timeout.map(|t| {
            backend_budget(
                Duration::MAX,
                Some(t),
                self.timeout_margin,
                crate::clock::since(received),
            )
        })
    }

    /// What one webhook's call may take: its `timeoutSeconds`, below `--max-timeout-seconds`
    /// when set.
    fn call_limit(&self, webhook: &Webhook) -> Duration {
        self.max_timeout
            .map_or(webhook.timeout, |cap| webhook.timeout.min(cap))
    }

    /// The time left for a call bounded by `limit`, within kube-apiserver's deadline.
    fn budget(&self, limit: Duration, clock: Clock) -> Duration {
        backend_budget(
            limit,
            clock.caller_timeout,
            self.timeout_margin,
            crate::clock::since(clock.received),
        )
    }

    /// The backend's patch (against the converted object the webhook received, in
    /// `rewritten`) as a patch against the caller's object; `None` when the result equals the
    /// caller's object. Errors are the 500 kube-apiserver answers patch and conversion problems
    /// with (`apierrors.NewInternalError` in `callAttrMutatingHook`).
    async fn patch_back(
        &self,
        review: &ParsedReview<'_>,
        rewritten: &Rewritten,
        patch: &str,
        clock: Clock,
    ) -> Result<Option<String>, Status> {
        let (Some(original), Some(sent_object)) = (&rewritten.original, &rewritten.sent) else {
            return Err(conversion::internal_error(
                &"the webhook attempted to modify the object, which is not supported for this operation",
            ));
        };
        // The patch is against the object kube-apiserver sent, in `kind`'s version.
        let caller = conversion::object_version(review);
        let i = &rewritten.invocation;
        let internal = |e: EquivalentError| conversion::internal_error(&e);
        let patched = conversion::apply_patch(sent_object, patch).map_err(internal)?;
        let back = if conversion::needs_webhook(review, i) {
            let desired = conversion::api_version(caller);
            self.convert_by_webhook(i, &patched, &desired, clock).await
        } else {
            let from = (&*i.kind_group, &*i.kind_version);
            conversion::convert_locally(&patched, &i.kind, from, caller, i.custom.as_deref())
        };
        conversion::patch_between(original, &back.map_err(internal)?).map_err(internal)
    }

    /// The answer for an admission whose call was cut by the proxy's shutdown grace period:
    /// its webhook's failurePolicy, as for any call failure ([`CallFailure::ShuttingDown`]).
    pub(crate) fn shutting_down(&self, webhook: &Webhook, review: &ParsedReview<'_>) -> Answer {
        self.shut_down(webhook).into_answer(webhook, review)
    }

    /// [`Self::shutting_down`] before it is rendered, for a chain.
    fn shut_down(&self, webhook: &Webhook) -> Verdict {
        let url = webhook.backend.url.clone();
        self.fail(webhook, CallFailure::ShuttingDown { url })
    }

    /// A call failure, counted once: failurePolicy decides what it becomes
    /// ([`Verdict::into_answer`] for a single route, the chain's rules in [`chain`]).
    fn fail(&self, webhook: &Webhook, failure: CallFailure) -> Verdict {
        webhook.metrics.call_failure(failure.class());
        let decision = match webhook.failure_policy() {
            FailurePolicy::Ignore => Decision::FailedOpen,
            FailurePolicy::Fail => Decision::FailedClosed,
        };
        Verdict {
            detail: failure.to_string(),
            outcome: Outcome::Failed(failure),
            decision,
            backend: None,
            conditions: Conditions::NotEvaluated,
        }
    }
}

/// What one webhook decided for one admission, before a route renders it: a single route
/// answers it as it is ([`Verdict::into_answer`]); a chain folds the verdicts of its webhooks
/// into one answer ([`chain`]).
#[derive(Clone, Debug)]
pub(crate) struct Verdict {
    pub(crate) outcome: Outcome,
    /// What happened, for the log line and metrics.
    pub(crate) decision: Decision,
    /// Why: skip reason, failure, denial message, or empty.
    pub(crate) detail: String,
    /// How long the backend call took, when one was made.
    pub(crate) backend: Option<Duration>,
    /// What matchConditions did (for their metrics).
    pub(crate) conditions: Conditions,
}

/// The substance of a [`Verdict`].
#[derive(Clone, Debug)]
pub(crate) enum Outcome {
    /// A response to pass on: a skip, the backend's verified answer (its patch in the caller's
    /// version; mode Warn applied), Shadow's allow, or a rejection the proxy decided itself.
    Response(AdmissionResponse),
    /// The call failed; the webhook's failurePolicy decides (already in the decision).
    Failed(CallFailure),
}

impl Verdict {
    fn new(response: AdmissionResponse, decision: Decision, detail: String) -> Self {
        Verdict {
            outcome: Outcome::Response(response),
            decision,
            detail,
            backend: None,
            conditions: Conditions::NotEvaluated,
        }
    }

    /// The single route's answer. A failure goes to failurePolicy: Ignore admits with a
    /// warning and an audit annotation (standing in for kube-apiserver's `failed-open` one);
    /// Fail answers HTTP 500 with a Status, which kube-apiserver reports as its own call
    /// failure, and no Retry-After, which would make client-go re-send (`checkWait`).
    pub(crate) fn into_answer(self, webhook: &Webhook, review: &ParsedReview<'_>) -> Answer {
        let (decision, detail) = (self.decision, self.detail);
        let mut answer = match self.outcome {
            Outcome::Response(response) => Answer::respond(review, response, decision, detail),
            Outcome::Failed(failure) => match webhook.failure_policy() {
                FailurePolicy::Ignore => {
                    let mut response = AdmissionResponse::allow(&review.request.uid);
                    response.warnings.push(format!("failed calling webhook {:?}: {failure}; failurePolicy is Ignore, request admitted", webhook.name));
                    response.audit_annotations =
                        BTreeMap::from([("failed-open".to_string(), webhook.name.clone())]);
                    Answer::respond(review, response, decision, detail)
                }
                FailurePolicy::Fail => {
                    let status = Status::failure(500, "InternalError", failure.status_message());
                    Answer {
                        http_status: 500,
                        body: encode_status(&status),
                        decision,
                        detail,
                        backend: None,
                        conditions: Conditions::NotEvaluated,
                    }
                }
            },
        };
        answer.backend = self.backend;
        answer.conditions = self.conditions;
        answer
    }
}

/// What [`Dispatcher::dispatch`] learns on the way, for the webhook's metrics.
#[derive(Default)]
struct Trace {
    backend: Option<Duration>,
    conditions: Conditions,
}

impl Trace {
    /// Puts what was learnt into the verdict.
    fn note(self, verdict: &mut Verdict) {
        verdict.backend = self.backend;
        verdict.conditions = self.conditions;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`backend_budget`], [`timeout_param`]: min(timeoutSeconds, caller time left - margin),
    /// rounded up.
    #[test]
    fn deadline() {
        let s = Duration::from_secs;
        let ms = Duration::from_millis;
        assert_eq!(
            backend_budget(s(20), Some(s(10)), ms(0), ms(0)),
            s(10),
            "timeout_test.go: 20 s webhook under a 10 s request"
        );
        assert_eq!(backend_budget(s(5), Some(s(10)), ms(250), ms(0)), s(5));
        assert_eq!(
            backend_budget(s(10), Some(s(10)), ms(250), ms(1000)),
            ms(8750)
        );
        assert_eq!(backend_budget(s(10), None, ms(250), ms(1000)), s(10));
        assert_eq!(backend_budget(s(10), Some(s(1)), ms(250), s(2)), ms(0));
        assert_eq!(timeout_param(ms(8750)), 9);
        assert_eq!(timeout_param(s(5)), 5);
        assert_eq!(timeout_param(ms(1)), 1);
    }

    #[test]
    fn failure_messages() {
        let f = CallFailure::Timeout {
            url: "https://127.0.0.1:1/x?timeout=5s".into(),
        };
        assert_eq!(
            f.to_string(),
            r#"failed to call webhook: Post "https://127.0.0.1:1/x?timeout=5s": context deadline exceeded"#
        );
        assert_eq!(
            f.status_message(),
            r#"Post "https://127.0.0.1:1/x?timeout=5s": context deadline exceeded"#
        );
        assert_eq!(
            CallFailure::Invalid("webhook response was absent".into()).status_message(),
            "received invalid webhook response: webhook response was absent"
        );
    }
}
