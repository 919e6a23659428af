//! Chain routes: every webhook of one configuration (or of every configuration of a type) in
//! one admission, dispatched as kube-apiserver's dispatchers do
//! (`staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/validating/dispatcher.go`,
//! `.../mutating/dispatcher.go` and `.../mutating/reinvocationcontext.go`):
//!
//! - validating: every webhook selected first, in order (a rejection while selecting stops
//!   the admission before any call); then the selected ones called concurrently; the first
//!   rejection to complete is the answer (upstream's `errs[0]`, read from its channel in
//!   arrival order); warnings and audit annotations of every webhook kept;
//! - mutating: one webhook after another, each selected and called on the object as patched
//!   by the ones before it; the first rejection stops the chain; `reinvocationPolicy:
//!   IfNeeded` webhooks run once more when a later webhook changed the object.
//!
//! Each webhook goes through the single route's phases ([`Dispatcher::prepare`],
//! [`Dispatcher::execute`]), so selection, conversion, matchConditions, the call,
//! verification, failurePolicy and modes are exactly the single route's; this module only
//! folds their [`Verdict`]s into one AdmissionResponse, in kube-apiserver's words. Uses what
//! `dispatch` uses.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::ops::ControlFlow;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use serde_json::Value;
use tokio::time::Instant;

use super::pipeline::{Admission, Prepared, Shadow};
use super::{Answer, CallFailure, Clock, Decision, Dispatcher, Outcome, Trace, Verdict};
use crate::api::{FailurePolicy, ReinvocationPolicy, WebhookType};
use crate::config::{Chain, Webhook};
use crate::conversion::{self, Rewritten};
use crate::matching::Namespaces;
use crate::metrics::Conditions;
use crate::review::{AdmissionResponse, ParsedReview, SharedReview, Status};
use crate::telemetry::TraceContext;

/// What one webhook of a chain did: for the chain's log line and the webhook's own metrics
/// (counted as on its single route).
#[derive(Debug)]
pub(crate) struct Step {
    pub(crate) webhook: Arc<Webhook>,
    /// 0, or 1 for a mutating webhook's reinvocation.
    pub(crate) round: u8,
    pub(crate) decision: Decision,
    pub(crate) detail: String,
    /// From the start of the webhook's turn to its verdict.
    pub(crate) took: Duration,
    pub(crate) backend: Option<Duration>,
    pub(crate) conditions: Conditions,
    /// Mutating: its patch changed the object.
    pub(crate) mutated: bool,
}

/// A chain's answer: always HTTP 200 (a 500 would hand the decision to the chain
/// registration's failurePolicy instead of each legacy webhook's), with the steps that led
/// to it.
#[derive(Debug)]
pub(crate) struct ChainAnswer {
    pub(crate) answer: Answer,
    pub(crate) steps: Vec<Step>,
    /// 1, or 2 when a mutating chain reinvoked; 0 when a proxy-wide exclusion answered.
    pub(crate) rounds: u8,
    /// Webhooks in mode Shadow, with the AdmissionReview each would have received: the
    /// admission layer puts them on its background lane.
    pub(crate) shadows: Vec<Shadow>,
    /// Webhooks with candidates that were called: the admission layer starts their
    /// candidates on its background lane.
    pub(crate) called: Vec<Called>,
}

/// A webhook of a chain that has candidates, as its own route would have answered: the
/// review it was sent (in a mutating chain, as patched so far) and its answer.
#[derive(Debug)]
pub(crate) struct Called {
    pub(crate) webhook: Arc<Webhook>,
    pub(crate) review: SharedReview,
    pub(crate) answer: Answer,
}

impl Called {
    /// `Some` only for a webhook with candidates (a copy of its verdict, rare).
    fn of(webhook: &Arc<Webhook>, review: &SharedReview, verdict: &Verdict) -> Option<Self> {
        if webhook.candidates.is_empty() {
            return None;
        }
        let answer = verdict.clone().into_answer(webhook, review.get());
        Some(Called {
            webhook: webhook.clone(),
            review: review.clone(),
            answer,
        })
    }
}

/// kube-apiserver's `ToStatusErr`
/// (`staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/errors/statuserror.go`): a
/// webhook's denial as kube-apiserver reports it, `admission webhook "N" denied the request:
/// MESSAGE` (else `: REASON`, else ` without explanation`), a code below 400 raised to 400, a
/// missing or `Success` status made `Failure`; the other fields kept.
pub(crate) fn to_status_err(name: &str, status: Option<&Value>) -> Value {
    let mut status = match status {
        Some(Value::Object(fields)) => fields.clone(),
        _ => serde_json::Map::new(),
    };
    let denied_by = format!("admission webhook {name:?} denied the request");
    let text = |field: &str| {
        status
            .get(field)
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
    };
    let message = match text("message").or_else(|| text("reason")) {
        Some(t) => format!("{denied_by}: {t}"),
        None => format!("{denied_by} without explanation"),
    };
    let low_code = status.get("code").and_then(Value::as_i64).unwrap_or(0) < 400;
    let not_failure = matches!(text("status").as_deref(), None | Some("Success"));
    if low_code {
        status.insert("code".into(), 400.into());
    }
    if not_failure {
        status.insert("status".into(), "Failure".into());
    }
    status.insert("message".into(), message.into());
    Value::Object(status)
}

/// `apierrors.NewInternalError(ErrCallingWebhook)`: a call failure under failurePolicy Fail,
/// `Internal error occurred: failed calling webhook "N": REASON` (`ErrCallingWebhook.Error` in
/// `staging/src/k8s.io/apiserver/pkg/util/webhook/error.go`).
fn failed_closed(name: &str, failure: &CallFailure) -> Status {
    Status::failure(
        500,
        "InternalError",
        format!("Internal error occurred: failed calling webhook {name:?}: {failure}"),
    )
}

/// `NewDryRunUnsupportedErr` (`.../webhook/errors/statuserror.go`).
fn dry_run_unsupported(name: &str) -> Status {
    Status::failure(
        400,
        "BadRequest",
        format!("admission webhook {name:?} does not support dry run"),
    )
}

/// `apierrors.NewInternalError` for what happens to a patch (`callAttrMutatingHook`).
fn internal_error(message: impl std::fmt::Display) -> Status {
    Status::failure(
        500,
        "InternalError",
        format!("Internal error occurred: {message}"),
    )
}

/// Whether `key` is the name part of a qualified name (`[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`,
/// at most 63 characters): kube-apiserver keeps an audit annotation `<webhook>/<key>` only
/// then (`checkKeyFormat` in `staging/src/k8s.io/apiserver/pkg/admission/attributes.go`).
fn is_name_part(key: &str) -> bool {
    let bytes = key.as_bytes();
    let edge = |b: &u8| b.is_ascii_alphanumeric();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes.first().is_some_and(edge)
        && bytes.last().is_some_and(edge)
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The one AdmissionResponse a chain's verdicts fold into.
struct Fold {
    /// Every webhook's warnings, by its position in the chain (kube-apiserver adds them as
    /// each call returns; position order is one of those orders, and stable).
    warnings: BTreeMap<usize, Vec<String>>,
    annotations: BTreeMap<String, String>,
    /// The first rejection: its status and decision.
    rejection: Option<(Value, Decision)>,
    failed_open: bool,
    called: bool,
}

impl Fold {
    fn new() -> Self {
        Fold {
            warnings: BTreeMap::new(),
            annotations: BTreeMap::new(),
            rejection: None,
            failed_open: false,
            called: false,
        }
    }

    /// `key`: `value`, unless the key is taken (kube-apiserver keeps the first value,
    /// `AddAnnotation`).
    fn annotate(&mut self, key: String, value: String) {
        self.annotations.entry(key).or_insert(value);
    }

    /// A webhook's own audit annotations. kube-apiserver records `<chain registration>/<key>`,
    /// so each key becomes one name part naming the legacy webhook: `<webhook>_<key>`, or
    /// `<i>_<key>` with `<i>` = the webhook's name when that is too long; a key that is not a
    /// valid name part is dropped, as kube-apiserver drops it.
    fn webhook_annotations(&mut self, i: usize, name: &str, annotations: BTreeMap<String, String>) {
        for (key, value) in annotations {
            let long = format!("{name}_{key}");
            if is_name_part(&long) {
                self.annotate(long, value);
                continue;
            }
            let short = format!("{i}_{key}");
            if is_name_part(&key) && is_name_part(&short) {
                self.annotate(i.to_string(), name.to_string());
                self.annotate(short, value);
            }
        }
    }

    /// The response part of a verdict: warnings and audit annotations kept; a denial or the
    /// proxy's own rejection becomes the rejection (if it is the first).
    fn response(&mut self, i: usize, name: &str, decision: Decision, response: AdmissionResponse) {
        self.webhook_annotations(i, name, response.audit_annotations);
        if !response.warnings.is_empty() {
            self.warnings
                .entry(i)
                .or_default()
                .extend(response.warnings);
        }
        if response.allowed {
            return;
        }
        let status = match decision {
            Decision::RejectedDryRun => json_status(&dry_run_unsupported(name)),
            // The proxy's own rejections (namespace not found, a matchCondition error under
            // Fail, a conversion error) are kube-apiserver's own status errors already.
            Decision::Rejected => response
                .status
                .unwrap_or_else(|| Value::Object(Default::default())),
            _ => to_status_err(name, response.status.as_ref()),
        };
        self.reject(status, decision);
    }

    fn reject(&mut self, status: Value, decision: Decision) {
        self.rejection.get_or_insert((status, decision));
    }

    /// A call failure, decided by `webhook`'s failurePolicy: Fail is a rejection,
    /// `apierrors.NewInternalError(ErrCallingWebhook)`; Ignore admits with kube-apiserver's
    /// `failed-open.{validating|mutation}.webhook.admission.k8s.io/round_R_index_I` annotation
    /// (value: the webhook's name) as one name part, `failed-open_round_R_index_I`. `index` is
    /// the position among the webhooks selected (validating) or in the chain (mutating), as
    /// upstream counts. Whether it rejected.
    fn call_failure(
        &mut self,
        webhook: &Webhook,
        failure: &CallFailure,
        round: u8,
        index: usize,
    ) -> bool {
        match webhook.failure_policy() {
            FailurePolicy::Fail => {
                let status = json_status(&failed_closed(&webhook.name, failure));
                self.reject(status, Decision::FailedClosed);
                true
            }
            FailurePolicy::Ignore => {
                self.failed_open(round, index, &webhook.name);
                false
            }
        }
    }

    fn failed_open(&mut self, round: u8, index: usize, name: &str) {
        self.failed_open = true;
        self.called = true;
        self.annotate(
            format!("failed-open_round_{round}_index_{index}"),
            name.to_string(),
        );
    }

    /// Every mutating call's `mutation.webhook.admission.k8s.io/round_R_index_I` annotation
    /// (`MutationAuditAnnotation` in `mutating/dispatcher.go`, its fields in its order), as
    /// `mutation_round_R_index_I`.
    fn mutation(&mut self, round: u8, i: usize, webhook: &Webhook, mutated: bool) {
        #[derive(serde::Serialize)]
        struct Mutation<'a> {
            configuration: &'a str,
            webhook: &'a str,
            mutated: bool,
        }
        let value = serde_json::to_string(&Mutation {
            configuration: &webhook.configuration,
            webhook: &webhook.name,
            mutated,
        })
        .unwrap_or_default();
        self.annotate(format!("mutation_round_{round}_index_{i}"), value);
    }

    /// The answer: the first rejection, else allowed; `decision` says which, and `skipped`
    /// when no webhook was called.
    fn finish(
        self,
        review: &ParsedReview<'_>,
        patch: Option<String>,
    ) -> (AdmissionResponse, Decision, String) {
        let mut response = AdmissionResponse::allow(&review.request.uid);
        response.warnings = self.warnings.into_values().flatten().collect();
        response.audit_annotations = self.annotations;
        let (decision, detail) = match self.rejection {
            Some((status, decision)) => {
                let detail = status
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                response.allowed = false;
                response.status = Some(status);
                (decision, detail)
            }
            None => {
                response.patch_type = patch.as_ref().map(|_| "JSONPatch".to_string());
                response.patch = patch;
                let decision = match (self.failed_open, self.called) {
                    (true, _) => Decision::FailedOpen,
                    (false, true) => Decision::Allowed,
                    (false, false) => Decision::Skipped,
                };
                (decision, String::new())
            }
        };
        (response, decision, detail)
    }
}

fn json_status(status: &Status) -> Value {
    serde_json::to_value(status).unwrap_or_default()
}

/// `reinvocationcontext.go`'s bookkeeping, by position in the chain.
#[derive(Default)]
struct Reinvocation {
    /// IfNeeded webhooks called since the object last changed.
    previously_invoked: BTreeSet<usize>,
    /// Webhooks to call again in round 1.
    reinvoke: BTreeSet<usize>,
    should_reinvoke: bool,
}

impl Reinvocation {
    /// After webhook `i`'s call (`Dispatch` in `mutating/dispatcher.go`): a change makes every
    /// IfNeeded webhook called before it due for reinvocation; then `i` itself counts as
    /// called when it is IfNeeded (a failure included).
    fn called(&mut self, i: usize, if_needed: bool, changed: bool) {
        if changed {
            let previously = std::mem::take(&mut self.previously_invoked);
            self.reinvoke.extend(previously);
            self.should_reinvoke = true;
        }
        if if_needed {
            self.previously_invoked.insert(i);
        }
    }
}

/// A webhook a validating chain selected: to be called, or already decided (namespace labels
/// unavailable under failurePolicy Ignore).
// The large variant is the common one: boxing it would allocate for every call.
#[allow(clippy::large_enum_variant)]
enum Selected<'s> {
    Call(Prepared<'s>, Trace),
    Decided(Verdict),
}

/// A selected webhook of a validating chain: its position in the chain, when its turn
/// started, and its in-flight gauge, held until its verdict.
type Relevant<'s, 'm> = (usize, Selected<'s>, Instant, crate::metrics::InFlight<'m>);

/// What happened to one webhook of a mutating chain, for the loop that runs them.
enum Turn {
    Next,
    /// Its patch changed the object: the review the next webhooks see.
    Changed(Vec<u8>),
    Stop,
}

/// One chain admission: the request as kube-apiserver sent it, and what its deadline is
/// measured against.
#[derive(Clone, Copy)]
pub(crate) struct ChainRequest<'a> {
    /// The request as kube-apiserver sent it, parsed once.
    pub(crate) review: &'a SharedReview,
    /// Namespace labels for namespaceSelectors (looked up once for the chain).
    pub(crate) namespaces: Option<&'a Namespaces>,
    /// kube-apiserver's `?timeout=`: the whole chain's deadline.
    pub(crate) caller_timeout: Option<Duration>,
    /// When the request arrived.
    pub(crate) received: Instant,
    pub(crate) trace_context: TraceContext<'a>,
}

impl Dispatcher {
    /// Runs `chain` for `request` as kube-apiserver's dispatcher of its type would. `grace`
    /// resolves when the proxy's shutdown grace period ran out: calls still under way are then
    /// failures ([`CallFailure::ShuttingDown`]) decided by each webhook's failurePolicy.
    pub(crate) async fn chain<G, F>(
        &self,
        chain: &Chain,
        request: ChainRequest<'_>,
        grace: &G,
    ) -> ChainAnswer
    where
        G: Fn() -> F + Sync,
        F: Future<Output = ()> + Send,
    {
        match chain.webhook_type {
            WebhookType::Validating => {
                let run = pin!(self.validate_chain(chain, request, grace));
                run.await
            }
            WebhookType::Mutating => {
                let run = pin!(self.mutate_chain(chain, request, grace));
                run.await
            }
        }
    }

    /// The validating chain (`Dispatch` in `validating/dispatcher.go`): every webhook
    /// selected first, then the selected ones called concurrently.
    async fn validate_chain<G, F>(
        &self,
        chain: &Chain,
        request: ChainRequest<'_>,
        grace: &G,
    ) -> ChainAnswer
    where
        G: Fn() -> F + Sync,
        F: Future<Output = ()> + Send,
    {
        let review = request.review.get();
        let mut run = ValidatingRun {
            fold: Fold::new(),
            steps: Vec::new(),
            shadows: Vec::new(),
            called: Vec::new(),
        };
        let mut slots: Vec<Option<Rewritten>> = chain.webhooks.iter().map(|_| None).collect();
        let relevant = {
            let selected = pin!(self.select_all(chain, request, &mut slots, &mut run));
            selected.await
        };
        if let Some(relevant) = relevant {
            let calls = pin!(self.call_selected(chain, request, relevant, &mut run, grace));
            calls.await;
        }
        let (response, decision, detail) = run.fold.finish(review, None);
        ChainAnswer {
            answer: Answer::respond(review, response, decision, detail),
            steps: run.steps,
            rounds: 1,
            shadows: run.shadows,
            called: run.called,
        }
    }

    /// A validating chain's selection: every webhook in order, each through
    /// [`Self::prepare`] (upstream's loop over `ShouldCallHook` that builds `relevantHooks`).
    /// The webhooks to call, or `None` when a rejection while selecting (upstream:
    /// `ShouldCallHook`'s status error) already answered, before any call.
    async fn select_all<'s, 'c>(
        &self,
        chain: &'c Chain,
        request: ChainRequest<'_>,
        slots: &'s mut [Option<Rewritten>],
        run: &mut ValidatingRun,
    ) -> Option<Vec<Relevant<'s, 'c>>> {
        let mut relevant = Vec::new();
        for (i, (webhook, slot)) in chain.webhooks.iter().zip(slots.iter_mut()).enumerate() {
            if let ControlFlow::Break(shadow) = self.mode(webhook, request.review) {
                run.steps.push(Step::shadowed(webhook));
                run.shadows.push(shadow);
                continue;
            }
            let a = request.admission(webhook);
            let started = crate::clock::now();
            let in_flight = webhook.metrics.in_flight();
            let mut trace = Trace::default();
            let flow = {
                let prepare = pin!(self.prepare(a, request.namespaces, slot, &mut trace));
                prepare.await
            };
            let mut verdict = match flow {
                std::ops::ControlFlow::Continue(prepared) => {
                    let selected = Selected::Call(prepared, trace);
                    relevant.push((i, selected, started, in_flight));
                    continue;
                }
                std::ops::ControlFlow::Break(verdict) => verdict,
            };
            trace.note(&mut verdict);
            // Namespace labels unavailable, under Ignore: it fails open like a failed call, at
            // its place among the selected webhooks (its failed-open index).
            let ignored = webhook.failure_policy() == FailurePolicy::Ignore;
            if ignored && matches!(verdict.outcome, Outcome::Failed(_)) {
                relevant.push((i, Selected::Decided(verdict), started, in_flight));
                continue;
            }
            run.steps
                .push(Step::of(webhook, 0, &verdict, crate::clock::since(started)));
            match verdict.outcome {
                Outcome::Response(_) if verdict.decision == Decision::Skipped => {}
                Outcome::Response(r) => {
                    run.fold.response(i, &webhook.name, verdict.decision, r);
                    return None;
                }
                // Namespace labels unavailable, under Fail.
                Outcome::Failed(failure) => {
                    run.fold.call_failure(webhook, &failure, 0, i);
                    return None;
                }
            }
        }
        Some(relevant)
    }

    /// A validating chain's calls: every selected webhook at once, folded in completion order,
    /// so the first rejection to arrive is the answer (upstream's `errs[0]`); all of them
    /// finish (`wg.Wait()`).
    async fn call_selected<G, F>(
        &self,
        chain: &Chain,
        request: ChainRequest<'_>,
        relevant: Vec<Relevant<'_, '_>>,
        run: &mut ValidatingRun,
        grace: &G,
    ) where
        G: Fn() -> F + Sync,
        F: Future<Output = ()> + Send,
    {
        let mut running: FuturesUnordered<_> = relevant
            .into_iter()
            .enumerate()
            .map(|(index, (i, selected, started, in_flight))| {
                let webhook = &chain.webhooks[i];
                async move {
                    let _in_flight = in_flight;
                    let verdict = match selected {
                        Selected::Decided(verdict) => verdict,
                        Selected::Call(prepared, mut trace) => {
                            let call_uid = uuid::Uuid::new_v4().to_string();
                            let a = Admission {
                                call_uid: Some(&call_uid),
                                ..request.admission(webhook)
                            };
                            let mut verdict = self
                                .execute_within_grace(a, &prepared, &mut trace, grace)
                                .await;
                            trace.note(&mut verdict);
                            verdict
                        }
                    };
                    (index, i, verdict, crate::clock::since(started))
                }
            })
            .collect();
        while let Some((index, i, verdict, took)) = running.next().await {
            let webhook = &chain.webhooks[i];
            run.steps.push(Step::of(webhook, 0, &verdict, took));
            run.called
                .extend(Called::of(webhook, request.review, &verdict));
            run.fold.called = true;
            match verdict.outcome {
                Outcome::Response(r) => run.fold.response(i, &webhook.name, verdict.decision, r),
                Outcome::Failed(failure) => {
                    run.fold.call_failure(webhook, &failure, 0, index);
                }
            }
        }
    }

    /// The mutating chain (`Dispatch` in `mutating/dispatcher.go`, reinvocation as
    /// `reinvocationcontext.go` and `AdmitWithReinvocation` run it: at most one more round).
    /// The answer's patch turns the object kube-apiserver sent into the final one.
    async fn mutate_chain<G, F>(
        &self,
        chain: &Chain,
        request: ChainRequest<'_>,
        grace: &G,
    ) -> ChainAnswer
    where
        G: Fn() -> F + Sync,
        F: Future<Output = ()> + Send,
    {
        let review = request.review;
        let mut run = MutatingRun {
            request,
            fold: Fold::new(),
            reinvocation: Reinvocation::default(),
            objects: None,
            steps: Vec::new(),
            shadows: Vec::new(),
            called: Vec::new(),
            position: (0, 0),
        };
        // The review as patched so far; parsed again only after a change.
        let mut patched: Option<SharedReview> = None;
        loop {
            let changed = {
                let current = patched.as_ref().unwrap_or(review);
                let segment = pin!(self.run_until_changed(chain, current, &mut run, grace));
                segment.await
            };
            let Some(body) = changed else { break };
            match SharedReview::parse(body.into()) {
                Ok(next) => patched = Some(next),
                Err(e) => {
                    let status = json_status(&internal_error(e));
                    run.fold.reject(status, Decision::Rejected);
                    break;
                }
            }
        }
        let review = review.get();
        let patch = run.patch();
        let rounds = run.position.0 + 1;
        let (response, decision, detail) = run.fold.finish(review, patch);
        ChainAnswer {
            answer: Answer::respond(review, response, decision, detail),
            steps: run.steps,
            rounds,
            shadows: run.shadows,
            called: run.called,
        }
    }

    /// [`Self::execute`] unless the shutdown grace period ran out: a call under way when it
    /// does, or one not started yet, is a [`CallFailure::ShuttingDown`] failure (no call is
    /// started after the grace period).
    async fn execute_within_grace<G, F>(
        &self,
        a: Admission<'_>,
        prepared: &Prepared<'_>,
        trace: &mut Trace,
        grace: &G,
    ) -> Verdict
    where
        G: Fn() -> F + Sync,
        F: Future<Output = ()> + Send,
    {
        use futures::FutureExt;
        if grace().now_or_never().is_some() {
            return self.shut_down(a.webhook);
        }
        let execute = pin!(self.execute(a, prepared, trace));
        tokio::select! {
            biased;
            verdict = execute => verdict,
            () = grace() => self.shut_down(a.webhook),
        }
    }

    /// Runs the mutating chain on `current` from `run.position` until a webhook changes the
    /// object (its new review returned; `run.position` is then the next webhook) or the chain
    /// ends or stops (`None`).
    async fn run_until_changed<G, F>(
        &self,
        chain: &Chain,
        current: &SharedReview,
        run: &mut MutatingRun<'_>,
        grace: &G,
    ) -> Option<Vec<u8>>
    where
        G: Fn() -> F + Sync,
        F: Future<Output = ()> + Send,
    {
        loop {
            let (round, i) = run.position;
            let Some(webhook) = chain.webhooks.get(i) else {
                // Round 1 runs when round 0 changed the object after an IfNeeded webhook.
                let reinvoke = round == 0
                    && run.reinvocation.should_reinvoke
                    && !run.reinvocation.reinvoke.is_empty();
                if !reinvoke {
                    return None;
                }
                run.position = (1, 0);
                continue;
            };
            run.position = (round, i + 1);
            // "if the webhook is skipped in the first round ... it does not get called during
            // reinvocation" (`ShouldReinvokeWebhook`).
            if round == 1 && !run.reinvocation.reinvoke.contains(&i) {
                continue;
            }
            let turn = pin!(self.mutating_turn(webhook, round, i, current, run, grace));
            match turn.await {
                Turn::Next => {}
                Turn::Changed(body) => return Some(body),
                Turn::Stop => return None,
            }
        }
    }

    /// One webhook's turn in a mutating chain (`callAttrMutatingHook` and the loop around it).
    async fn mutating_turn<G, F>(
        &self,
        webhook: &Arc<Webhook>,
        round: u8,
        i: usize,
        current: &SharedReview,
        run: &mut MutatingRun<'_>,
        grace: &G,
    ) -> Turn
    where
        G: Fn() -> F + Sync,
        F: Future<Output = ()> + Send,
    {
        if let ControlFlow::Break(shadow) = self.mode(webhook, current) {
            if round == 0 {
                run.steps.push(Step::shadowed(webhook));
                run.shadows.push(shadow);
            }
            return Turn::Next;
        }
        let shared = current;
        let current = current.get();
        let started = crate::clock::now();
        let _in_flight = webhook.metrics.in_flight();
        let (verdict, called) = {
            let call = pin!(self.mutating_call(webhook, current, run, grace));
            call.await
        };
        let mut record = Step::of(webhook, round, &verdict, crate::clock::since(started));
        if verdict.decision == Decision::Skipped {
            run.steps.push(record);
            return Turn::Next;
        }
        if called {
            run.fold.called = true;
        }
        if called {
            run.called.extend(Called::of(webhook, shared, &verdict));
        }
        let (turn, changed) = run.take(current, webhook, (round, i), verdict);
        if called {
            let if_needed = webhook.reinvocation_policy == ReinvocationPolicy::IfNeeded;
            run.reinvocation.called(i, if_needed, changed);
            run.fold.mutation(round, i, webhook, changed);
        }
        record.mutated = changed;
        run.steps.push(record);
        turn
    }

    /// `webhook`'s verdict on `current` (the review as patched so far): prepared, then, unless
    /// that answered, called with a uid of its own, as kube-apiserver gives each webhook call;
    /// whether it was called.
    async fn mutating_call<G, F>(
        &self,
        webhook: &Arc<Webhook>,
        current: &ParsedReview<'_>,
        run: &MutatingRun<'_>,
        grace: &G,
    ) -> (Verdict, bool)
    where
        G: Fn() -> F + Sync,
        F: Future<Output = ()> + Send,
    {
        let a = Admission {
            review: current,
            ..run.request.admission(webhook)
        };
        let mut trace = Trace::default();
        let mut slot = None;
        let flow = {
            let prepare = pin!(self.prepare(a, run.request.namespaces, &mut slot, &mut trace));
            prepare.await
        };
        let (mut verdict, called) = match flow {
            std::ops::ControlFlow::Break(verdict) => (verdict, false),
            std::ops::ControlFlow::Continue(prepared) => {
                let call_uid = uuid::Uuid::new_v4().to_string();
                let a = Admission {
                    call_uid: Some(&call_uid),
                    ..a
                };
                let execute = pin!(self.execute_within_grace(a, &prepared, &mut trace, grace));
                (execute.await, true)
            }
        };
        trace.note(&mut verdict);
        (verdict, called)
    }
}

/// A mutating chain under way.
struct MutatingRun<'a> {
    request: ChainRequest<'a>,
    fold: Fold,
    reinvocation: Reinvocation,
    /// The object kube-apiserver sent and the object as patched so far, both in the caller's
    /// version; parsed at the first patch.
    objects: Option<(Value, Value)>,
    steps: Vec<Step>,
    shadows: Vec<Shadow>,
    called: Vec<Called>,
    /// (round, the next webhook's position).
    position: (u8, usize),
}

impl MutatingRun<'_> {
    /// The chain's patch: from the object kube-apiserver sent to the final one; `None` when
    /// they are equal (or nothing was patched). A patch that cannot be made rejects the chain
    /// with kube-apiserver's internal error.
    fn patch(&mut self) -> Option<String> {
        let (original, current) = self.objects.as_ref()?;
        if original == current {
            return None;
        }
        match conversion::patch_between(original, current) {
            Ok(patch) => patch,
            Err(e) => {
                self.fold
                    .reject(json_status(&internal_error(e)), Decision::Rejected);
                None
            }
        }
    }

    /// Folds webhook `i`'s `verdict` (of `round`) into the chain's answer: an allowing
    /// response's patch applied to `current` (the next turn is on the changed review), a
    /// denial or a patch that does not apply stopping the chain, a failure decided by
    /// failurePolicy; with whether the object changed.
    fn take(
        &mut self,
        current: &ParsedReview<'_>,
        webhook: &Arc<Webhook>,
        (round, i): (u8, usize),
        verdict: Verdict,
    ) -> (Turn, bool) {
        let name = &webhook.name;
        let decision = verdict.decision;
        match verdict.outcome {
            Outcome::Response(mut response) => {
                let patch = response.patch.take();
                let allowed = response.allowed;
                self.fold.response(i, name, decision, response);
                if !allowed {
                    return (Turn::Stop, false);
                }
                let Some(patch) = patch else {
                    return (Turn::Next, false);
                };
                match self.apply(current, name, &patch) {
                    Ok(Some(body)) => (Turn::Changed(body), true),
                    Ok(None) => (Turn::Next, false),
                    Err(status) => {
                        self.fold.reject(json_status(&status), Decision::Rejected);
                        (Turn::Stop, false)
                    }
                }
            }
            Outcome::Failed(failure) => {
                let stop = self.fold.call_failure(webhook, &failure, round, i);
                (if stop { Turn::Stop } else { Turn::Next }, false)
            }
        }
    }

    /// Applies webhook `name`'s patch (base64 JSON Patch against `current`'s object, in the
    /// caller's version) with evanphx/json-patch v4 semantics, as `callAttrMutatingHook`
    /// does; the new review when the object changed (`!apiequality.Semantic.DeepEqual`, here
    /// JSON inequality).
    ///
    /// # Errors
    /// The internal error kube-apiserver answers: a patch for an operation without an object,
    /// or one that does not apply.
    fn apply(
        &mut self,
        current: &ParsedReview<'_>,
        name: &str,
        patch: &str,
    ) -> Result<Option<Vec<u8>>, Status> {
        let unsupported = || {
            internal_error(format!(
                "admission webhook {name:?} attempted to modify the object, which is not supported for this operation"
            ))
        };
        if self.objects.is_none() {
            let [object, _] = conversion::take_objects(current).map_err(internal_error)?;
            let object = object.ok_or_else(unsupported)?;
            self.objects = Some((object.clone(), object));
        }
        let Some((_, object)) = &mut self.objects else {
            return Err(unsupported());
        };
        let next = conversion::apply_patch(object, patch).map_err(internal_error)?;
        if next == *object {
            return Ok(None);
        }
        let body = conversion::with_object(current, &next).map_err(internal_error)?;
        *object = next;
        Ok(Some(body))
    }
}

impl<'a> ChainRequest<'a> {
    /// `webhook`'s admission of this request (before its call gets a uid of its own).
    fn admission(&self, webhook: &'a Webhook) -> Admission<'a> {
        Admission {
            webhook,
            review: self.review.get(),
            clock: Clock {
                received: self.received,
                caller_timeout: self.caller_timeout,
            },
            trace_context: self.trace_context,
            call_uid: None,
        }
    }
}

/// A validating chain under way.
struct ValidatingRun {
    fold: Fold,
    steps: Vec<Step>,
    shadows: Vec<Shadow>,
    called: Vec<Called>,
}

impl Step {
    fn of(webhook: &Arc<Webhook>, round: u8, verdict: &Verdict, took: Duration) -> Self {
        Step {
            webhook: webhook.clone(),
            round,
            decision: verdict.decision,
            detail: verdict.detail.clone(),
            took,
            backend: verdict.backend,
            conditions: verdict.conditions,
            mutated: false,
        }
    }

    /// A webhook in mode Shadow: called in the background, no part of the answer.
    fn shadowed(webhook: &Arc<Webhook>) -> Self {
        Step {
            webhook: webhook.clone(),
            round: 0,
            decision: Decision::Shadowed,
            detail: "called in the background".to_string(),
            took: Duration::ZERO,
            backend: None,
            conditions: Conditions::NotEvaluated,
            mutated: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `TestToStatusErr` (`webhook/errors/statuserror_test.go`).
    #[test]
    fn denials_read_as_to_status_err_words_them() {
        let by = "admission webhook \"foo\" denied the request";
        let cases = [
            (None, format!("{by} without explanation"), 400),
            (
                Some(serde_json::json!({"message": "you shall not pass"})),
                format!("{by}: you shall not pass"),
                400,
            ),
            (
                Some(serde_json::json!({"reason": "Forbidden"})),
                format!("{by}: Forbidden"),
                400,
            ),
            (
                Some(
                    serde_json::json!({"message": "you shall not pass", "reason": "Forbidden", "code": 403}),
                ),
                format!("{by}: you shall not pass"),
                403,
            ),
            (
                Some(serde_json::json!({})),
                format!("{by} without explanation"),
                400,
            ),
        ];
        for (status, message, code) in cases {
            let s = to_status_err("foo", status.as_ref());
            assert_eq!(s["message"], message.as_str(), "{status:?}");
            assert_eq!(s["code"], code, "{status:?}");
            assert_eq!(s["status"], "Failure", "{status:?}");
        }
    }

    /// `checkKeyFormat`'s name part.
    #[test]
    fn audit_annotation_keys_are_name_parts() {
        for ok in ["a", "allow.example.com_key1", "x-y_z.1"] {
            assert!(is_name_part(ok), "{ok}");
        }
        for bad in ["", "invalid*key", "a/b", "-a", "a.", &"x".repeat(64)] {
            assert!(!is_name_part(bad), "{bad}");
        }
        let mut fold = Fold::new();
        let long = format!("{}.example.com", "w".repeat(60));
        fold.webhook_annotations(
            3,
            &long,
            BTreeMap::from([
                ("key1".to_string(), "v".to_string()),
                ("invalid*key".to_string(), "v".to_string()),
            ]),
        );
        assert_eq!(
            fold.annotations,
            BTreeMap::from([
                ("3".to_string(), long.clone()),
                ("3_key1".to_string(), "v".to_string()),
            ])
        );
    }

    /// `reinvocationcontext.go`: a change makes the IfNeeded webhooks called before it due;
    /// the one that changed it is due only if a later one changes the object again.
    #[test]
    fn reinvocation_bookkeeping() {
        let mut r = Reinvocation::default();
        r.called(0, true, true);
        assert!(r.should_reinvoke && r.reinvoke.is_empty());
        r.called(1, true, true);
        assert_eq!(r.reinvoke, BTreeSet::from([0]));
        assert_eq!(r.previously_invoked, BTreeSet::from([1]));
        let mut never = Reinvocation::default();
        never.called(0, false, false);
        never.called(1, false, true);
        assert!(never.reinvoke.is_empty());
    }
}
