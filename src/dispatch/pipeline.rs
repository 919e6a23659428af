//! The phases of one admission for one webhook, in kube-apiserver's order, each a function
//! that either answers (`ControlFlow::Break`) or hands the next phase what it needs:
//!
//! 0. [`mode`](Dispatcher::mode): `mode: Shadow` answers at once and the admission runs in
//!    the background;
//! 1. [`select`](Dispatcher::select): the selectors and rules of `ShouldCallHook`
//!    (`staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/generic/webhook.go`), pure
//!    matching ([`Matcher::decide`](crate::matching::Matcher::decide));
//! 2. prepare, the rest of `ShouldCallHook`: [`convert`](Dispatcher::convert) the request for
//!    an Equivalent rule (by table, or by the custom resource's conversion webhook), then
//!    [`conditions`](Dispatcher::conditions): matchConditions on the request as the webhook
//!    receives it. The caller's review is parsed once (by the server) and the converted one
//!    once (here);
//! 3. [`guard`](Dispatcher::guard): what `callHook` (`webhook/validating/dispatcher.go`) and
//!    `callAttrMutatingHook` (`webhook/mutating/dispatcher.go`) check before calling (dry run
//!    against sideEffects, the AdmissionReview version) and the proxy's own limits (deadline
//!    budget, circuit breaker, maxConcurrentCalls); the permit and the call slot are guards
//!    released on drop, whichever way the admission ends;
//! 4. [`call`](Dispatcher::call): one POST per attempt with client-go's Retry-After, within the
//!    budget;
//! 5. [`respond`](Dispatcher::respond): verify the answer (`VerifyAdmissionResponse`), carry a
//!    patch back to the caller's version, apply mode Warn.
//!
//! Phases 1 and 2 are [`prepare`](Dispatcher::prepare), 3 to 5
//! [`execute`](Dispatcher::execute): a single route runs one after the other
//! ([`decide_and_call`](Dispatcher::decide_and_call)); a chain ([`super::chain`]) selects a
//! validating chain's webhooks before calling any. Each ends in a [`Verdict`]; any failure on
//! the way is one [`CallFailure`] ([`Dispatcher::fail`]), which the route answers by
//! failurePolicy. Each phase's answer builders (`skipped`, `deny`, `warn_only`, [`Shadow`])
//! are at the end of this file. Uses what `dispatch` uses: `config`, `matching`,
//! `conversion`, `resources`, `review` and `telemetry`.

use std::ops::ControlFlow;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::breaker::CallPermit;
use super::{
    post_as_client_go, timeout_param, verify, Answer, CallFailure, Clock, Decision, Dispatcher,
    HttpReply, Target, Trace, TransportError, Verdict,
};
use crate::config::options::Mode;
use crate::config::Webhook;
use crate::conversion::{self, Rewritten};
use crate::kube_version;
use crate::matching::authz::Decisions;
use crate::matching::{
    Authorized, ConditionsResult, ConditionsVerdict, MatchDecision, Namespaces, SkipReason,
    MAX_AUTHORIZATION_ROUNDS,
};
use crate::metrics::Conditions;
use crate::resources::Equivalent;
use crate::review::{AdmissionResponse, ParsedReview, ReviewVersion, SharedReview, Status};
use crate::telemetry::{PhaseSpan, TraceContext};
use serde_json::Value;

/// One admission to one webhook: what every phase reads.
#[derive(Clone, Copy)]
pub(super) struct Admission<'a> {
    pub(super) webhook: &'a Webhook,
    /// The request as kube-apiserver sent it (in a mutating chain: with the object as the
    /// webhooks before patched it).
    pub(super) review: &'a ParsedReview<'a>,
    pub(super) clock: Clock,
    pub(super) trace_context: TraceContext<'a>,
    /// The uid the call carries instead of kube-apiserver's, and that the answer must echo:
    /// a chain gives each of its calls its own, as kube-apiserver does; `None` on a single
    /// route, where kube-apiserver already made one for this call.
    pub(super) call_uid: Option<&'a str>,
}

/// What [`Dispatcher::prepare`] hands [`Dispatcher::execute`]: the request as the webhook
/// receives it.
pub(super) struct Prepared<'s> {
    /// The review converted for an Equivalent rule, parsed once; `None`: the caller's.
    converted: Option<ParsedReview<'s>>,
    /// The conversion it was made from (a patch goes back through it).
    rewritten: Option<&'s Rewritten>,
}

/// What [`Dispatcher::guard`] lets through: the call's version, deadline and held permits.
struct Guarded<'w> {
    version: ReviewVersion,
    /// How long the call may take, all attempts and Retry-After waits included.
    budget: Duration,
    /// The whole seconds sent as `?timeout=`.
    timeout: u64,
    permit: Option<CallPermit>,
    /// maxConcurrentCalls: held until the call ends.
    _slot: Option<tokio::sync::SemaphorePermit<'w>>,
}

impl Dispatcher {
    /// The whole decision for one request to one webhook: match (as `ShouldCallHook`), then
    /// dry-run check, call, verify, and failurePolicy. `caller_timeout` is kube-apiserver's
    /// `?timeout=`; `received` when the request arrived.
    pub async fn dispatch(
        &self,
        webhook: &Webhook,
        review: &ParsedReview<'_>,
        namespaces: Option<&Namespaces>,
        caller_timeout: Option<Duration>,
        received: Instant,
        trace_context: TraceContext<'_>,
    ) -> Answer {
        let clock = Clock {
            received,
            caller_timeout,
        };
        let admit = std::pin::pin!(self.admit_call(
            webhook,
            review,
            namespaces,
            clock,
            trace_context,
            None
        ));
        admit.await
    }

    /// [`Self::dispatch`] for a call of the proxy's own beside kube-apiserver's (a candidate
    /// backend): the review carries `call_uid`, a uid of its own, as kube-apiserver gives
    /// each webhook call one (`CreateAdmissionObjects`), and the answer must echo it.
    pub(crate) async fn admit_own_call(
        &self,
        webhook: &Webhook,
        review: &ParsedReview<'_>,
        namespaces: Option<&Namespaces>,
        call_uid: &str,
    ) -> Answer {
        let clock = Clock {
            received: Instant::now(),
            caller_timeout: None,
        };
        let trace_context = TraceContext::default();
        let admit = std::pin::pin!(self.admit_call(
            webhook,
            review,
            namespaces,
            clock,
            trace_context,
            Some(call_uid)
        ));
        admit.await
    }

    /// [`Self::dispatch`], the call carrying `call_uid` when given.
    async fn admit_call(
        &self,
        webhook: &Webhook,
        review: &ParsedReview<'_>,
        namespaces: Option<&Namespaces>,
        clock: Clock,
        trace_context: TraceContext<'_>,
        call_uid: Option<&str>,
    ) -> Answer {
        let mut trace = Trace::default();
        let mut verdict = {
            let decide = std::pin::pin!(self.decide_and_call(
                webhook,
                review,
                namespaces,
                (clock, call_uid),
                trace_context,
                &mut trace,
            ));
            decide.await
        };
        trace.note(&mut verdict);
        verdict.into_answer(webhook, review)
    }

    /// Phase 0, mode: `mode: Shadow` (config options) is decided here and only here, for
    /// single routes and chains alike: the webhook's answer is allowed at once
    /// ([`Shadow::answer`]) and the [`Shadow`] call, with the review the webhook would have
    /// received, goes to the caller's background lane; Enforce and Warn continue. Shadow must
    /// not delay the answer, not even by a namespace lookup, so it comes first.
    pub(crate) fn mode(
        &self,
        webhook: &Arc<Webhook>,
        review: &SharedReview,
    ) -> ControlFlow<Shadow> {
        if self.mode_of(webhook) == Mode::Shadow {
            return ControlFlow::Break(Shadow {
                webhook: webhook.clone(),
                review: review.clone(),
            });
        }
        ControlFlow::Continue(())
    }

    /// [`Dispatcher::dispatch`], noting in `trace` what its metrics need: [`Self::prepare`],
    /// then [`Self::execute`].
    pub(super) async fn decide_and_call(
        &self,
        webhook: &Webhook,
        review: &ParsedReview<'_>,
        namespaces: Option<&Namespaces>,
        (clock, call_uid): (Clock, Option<&str>),
        trace_context: TraceContext<'_>,
        trace: &mut Trace,
    ) -> Verdict {
        // Each phase's future is pinned where it is made (in a block, which ends its borrows):
        // awaited as a temporary, it would be moved into this one's state, a memcpy of its
        // whole size (the call phase holds the HTTP exchange) per admission.
        let a = Admission {
            webhook,
            review,
            clock,
            trace_context,
            call_uid,
        };
        let mut rewritten = None;
        let prepared = {
            let prepare = pin!(self.prepare(a, namespaces, &mut rewritten, trace));
            match prepare.await {
                ControlFlow::Break(verdict) => return verdict,
                ControlFlow::Continue(prepared) => prepared,
            }
        };
        let execute = pin!(self.execute(a, &prepared, trace));
        execute.await
    }

    /// Phases 1 and 2, all of `ShouldCallHook`: select, convert, matchConditions. Continues
    /// with the request as the webhook receives it; a converted one is kept in `rewritten`,
    /// the caller's slot, which the [`Prepared`] borrows. Answers a skip, a rejection, or
    /// failurePolicy for a namespace whose labels are unavailable.
    pub(super) async fn prepare<'s>(
        &self,
        a: Admission<'_>,
        namespaces: Option<&Namespaces>,
        rewritten: &'s mut Option<Rewritten>,
        trace: &mut Trace,
    ) -> ControlFlow<Verdict, Prepared<'s>> {
        let Admission {
            webhook, review, ..
        } = a;
        // `ShouldCallHook` spans selection, conversion and matchConditions.
        let mut matching = a.trace_context.phase("matching");
        let equivalent = self.select(a, namespaces, &mut matching)?;
        let rewritten: Option<&'s Rewritten> = match equivalent {
            None => None,
            Some(invocation) => {
                let convert = pin!(self.convert(a, invocation));
                Some(&*rewritten.insert(convert.await?))
            }
        };
        // The converted review, parsed once: for matchConditions and for the call.
        let converted = rewritten.map(|r| ParsedReview::parse(&r.body));
        let converted = match converted.transpose() {
            Ok(r) => r,
            Err(e) => {
                let status = conversion::internal_error(&e);
                return ControlFlow::Break(deny(review, status, Decision::Rejected));
            }
        };
        let sent = converted.as_ref().unwrap_or(review);
        let invocation = rewritten.map(|r| &r.invocation);
        let verdict = if webhook.matcher.match_conditions.uses_authorizer() {
            // Boxed: the SubjectAccessReview calls' state would otherwise size every
            // admission's future.
            Box::pin(self.authorize(a, sent)).await
        } else {
            self.cost_model
                .apply(|| webhook.matcher.decide_conditions(sent))
        };
        self.conditions(a, verdict, invocation, matching, trace)?;
        ControlFlow::Continue(Prepared {
            converted,
            rewritten,
        })
    }

    /// Phases 3 to 5 on what [`Self::prepare`] let through: guard, call, respond.
    pub(super) async fn execute(
        &self,
        a: Admission<'_>,
        prepared: &Prepared<'_>,
        trace: &mut Trace,
    ) -> Verdict {
        let sent = prepared.converted.as_ref().unwrap_or(a.review);
        let guarded = match self.guard(a).await {
            ControlFlow::Break(verdict) => return verdict,
            ControlFlow::Continue(guarded) => guarded,
        };
        let version = guarded.version;
        let reply = {
            let call = pin!(self.call(a, sent, guarded, trace));
            match call.await {
                ControlFlow::Break(verdict) => return verdict,
                ControlFlow::Continue(reply) => reply,
            }
        };
        let respond = pin!(self.respond(a, prepared.rewritten, &reply, version));
        respond.await
    }

    /// Phase 1, select: the selectors and rules of `ShouldCallHook`, pure matching. Continues
    /// with the equivalent resource an Equivalent rule matched, if any; answers a skip
    /// (allowed), a rejection, or failurePolicy for a namespace whose labels are unavailable.
    fn select(
        &self,
        a: Admission<'_>,
        namespaces: Option<&Namespaces>,
        span: &mut Option<PhaseSpan>,
    ) -> ControlFlow<Verdict, Option<Box<Equivalent>>> {
        let Admission {
            webhook, review, ..
        } = a;
        let flow = match webhook.matcher.decide(review, namespaces) {
            MatchDecision::Call => ControlFlow::Continue(None),
            MatchDecision::CallEquivalent(invocation) => ControlFlow::Continue(Some(invocation)),
            MatchDecision::Skip(reason) => ControlFlow::Break(skipped(review, reason)),
            MatchDecision::Reject(status) => {
                ControlFlow::Break(deny(review, status, Decision::Rejected))
            }
            MatchDecision::NamespaceUnavailable(reason) => {
                let failure = CallFailure::NamespaceUnavailable(reason);
                ControlFlow::Break(self.fail(webhook, failure))
            }
        };
        if let (Some(span), ControlFlow::Break(answer)) = (span.as_mut(), &flow) {
            span.set("result", answered_summary(answer));
        }
        flow
    }

    /// Phase 2, prepare (a): the request rewritten for the equivalent resource an Equivalent rule
    /// matched, its objects converted by table or, for a custom resource that needs it, by its
    /// conversion webhook. kube-apiserver converts before matchConditions, and a failed
    /// conversion is a 500 whatever failurePolicy says (`ShouldCallHook`:
    /// `apierrors.NewInternalError`).
    async fn convert(
        &self,
        a: Admission<'_>,
        invocation: Box<Equivalent>,
    ) -> ControlFlow<Verdict, Rewritten> {
        let Admission {
            review,
            clock,
            trace_context,
            ..
        } = a;
        let rewritten = if conversion::needs_webhook(review, &invocation) {
            let mut span = trace_context.phase("conversion");
            // Boxed: the conversion webhook calls' state would otherwise size every
            // admission's future.
            let rewrite = Box::pin(self.rewrite_by_webhook(review, *invocation, clock)).await;
            if let (Some(span), Err(e)) = (span.as_mut(), &rewrite) {
                span.fail(e.to_string());
            }
            rewrite
        } else {
            conversion::rewrite_locally(review, *invocation)
        };
        match rewritten {
            Ok(rewritten) => ControlFlow::Continue(rewritten),
            Err(e) => {
                let status = conversion::internal_error(&e);
                ControlFlow::Break(deny(review, status, Decision::Rejected))
            }
        }
    }

    /// Phase 2, prepare (b): the rest of `ShouldCallHook`: the `verdict` of matchConditions on
    /// the request as the webhook receives it; a false condition skips, an error skips or
    /// rejects by failurePolicy. Notes the outcome for the matchConditions metrics and ends
    /// the `matching` span.
    fn conditions(
        &self,
        Admission { review, .. }: Admission<'_>,
        verdict: ConditionsVerdict,
        invocation: Option<&Equivalent>,
        mut span: Option<PhaseSpan>,
        trace: &mut Trace,
    ) -> ControlFlow<Verdict> {
        trace.conditions = conditions_outcome(&verdict);
        let flow = match verdict {
            ConditionsVerdict::None | ConditionsVerdict::Match => ControlFlow::Continue(()),
            ConditionsVerdict::Excluded(reason) | ConditionsVerdict::ErrorIgnored(reason) => {
                ControlFlow::Break(skipped(review, reason))
            }
            ConditionsVerdict::ErrorRejected(status) => {
                ControlFlow::Break(deny(review, status, Decision::Rejected))
            }
        };
        if let Some(span) = &mut span {
            span.set("result", call_summary(invocation, &flow));
        }
        flow
    }

    /// Phase 2, prepare (b) for a webhook whose matchConditions use `authorizer`: they are
    /// evaluated in rounds, each round's undecided checks answered by SubjectAccessReview
    /// ([`crate::authorizer`], its cache first) within the admission's deadline, until every
    /// check reached has a decision. kube-apiserver answers the same checks in-process
    /// (`staging/src/k8s.io/apiserver/pkg/cel/library/authz.go`).
    async fn authorize(&self, a: Admission<'_>, sent: &ParsedReview<'_>) -> ConditionsVerdict {
        let Admission {
            webhook,
            clock,
            trace_context,
            ..
        } = a;
        let conditions = &webhook.matcher.match_conditions;
        let Some(authorizer) = &self.authorizer else {
            let message =
                "matchConditions use `authorizer` but serve was started without --authorizer";
            return webhook
                .matcher
                .conditions_verdict(sent, ConditionsResult::Error(message.into()));
        };
        // One deadline for every round: the webhook's timeoutSeconds within the caller's
        // `?timeout=`. What the checks take is not there for the call.
        let deadline = crate::clock::now() + self.budget(self.call_limit(webhook), clock);
        let mut decisions = Decisions::with_cache(authorizer.clone());
        let mut span: Option<PhaseSpan> = None;
        let mut asked = 0usize;
        for _ in 0..MAX_AUTHORIZATION_ROUNDS {
            let round = self
                .cost_model
                .apply(|| conditions.evaluate_authorized(sent, &mut decisions));
            match round {
                Authorized::Done(result) => {
                    if let Some(span) = &mut span {
                        span.set("checks", i64::try_from(asked).unwrap_or(i64::MAX));
                    }
                    return webhook.matcher.conditions_verdict(sent, result);
                }
                Authorized::Pending(keys) => {
                    // One span for every round's waits, from the first.
                    span = span.or_else(|| trace_context.phase("authorization"));
                    asked += keys.len();
                    // The clock itself, not the wake-up's reading: this round's CEL ran in
                    // this poll, and its time is not the checks' to spend.
                    let budget = deadline.saturating_duration_since(Instant::now());
                    let answers = authorizer.decide_all(&keys, budget).await;
                    for (key, decision) in keys.into_iter().zip(answers) {
                        decisions.insert(key, decision);
                    }
                }
            }
        }
        let message =
            format!("authorization checks still undecided after {MAX_AUTHORIZATION_ROUNDS} rounds");
        webhook
            .matcher
            .conditions_verdict(sent, ConditionsResult::Error(message))
    }

    /// Phase 3, guard: what must hold before the call. Dry run against sideEffects (a 400 that
    /// failurePolicy does not cover; kube-apiserver's `NewDryRunUnsupportedErr`, whose name
    /// kube-apiserver puts in front of the denial itself, `ToStatusErr` in
    /// `.../webhook/errors/statuserror.go`), an AdmissionReview version the webhook accepts,
    /// then the deadline budget, the backend's circuit breaker and a maxConcurrentCalls slot
    /// (waited for within the queue time and the budget).
    async fn guard<'w>(&self, a: Admission<'w>) -> ControlFlow<Verdict, Guarded<'w>> {
        let Admission {
            webhook,
            review,
            clock,
            ..
        } = a;
        if let Some(message) = webhook.dry_run_refusal(review) {
            let status = Status::failure(400, "BadRequest", message);
            return ControlFlow::Break(deny(review, status, Decision::RejectedDryRun));
        }
        let Some(version) = webhook.review_version else {
            return ControlFlow::Break(self.fail(webhook, CallFailure::NoKnownReviewVersion));
        };
        let limit = self.call_limit(webhook);
        let mut budget = self.budget(limit, clock);
        // Nothing left of the caller's deadline: client-go fails a request whose context is
        // done before sending it ("context deadline exceeded"), and failurePolicy decides. A
        // chain reaches this for the webhooks after the one that used up its time.
        let out_of_time = |webhook: &Webhook| {
            let url = format!(
                "{}?timeout={}s",
                webhook.backend.url,
                timeout_param(Duration::ZERO)
            );
            self.fail(webhook, CallFailure::Timeout { url })
        };
        if budget.is_zero() {
            return ControlFlow::Break(out_of_time(webhook));
        }
        let permit = match self.breaker_permit(webhook) {
            Ok(permit) => permit,
            Err(failure) => return ControlFlow::Break(self.fail(webhook, failure)),
        };
        let slot = match self.call_slot(webhook, budget).await {
            Ok(slot) => slot,
            Err(failure) => return ControlFlow::Break(self.fail(webhook, failure)),
        };
        if slot.as_ref().is_some_and(|(_, queued)| *queued) {
            // The time spent queueing comes off the call's budget.
            budget = self.budget(limit, clock);
            if budget.is_zero() {
                return ControlFlow::Break(out_of_time(webhook));
            }
        }
        ControlFlow::Continue(Guarded {
            version,
            budget,
            timeout: timeout_param(budget),
            permit,
            _slot: slot.map(|(slot, _)| slot),
        })
    }

    /// The circuit breaker's permit for `webhook`'s backend: `None` without breakers.
    ///
    /// # Errors
    /// [`CallFailure::CircuitOpen`] while the backend's breaker is open.
    fn breaker_permit(&self, webhook: &Webhook) -> Result<Option<CallPermit>, CallFailure> {
        let Some(breakers) = &self.breakers else {
            return Ok(None);
        };
        let backend = &webhook.backend;
        let breaker = breakers.get(backend.pool_key, || {
            format!("{}:{}", backend.host, backend.port)
        });
        breaker.admit().map(Some).map_err(CallFailure::CircuitOpen)
    }

    /// A maxConcurrentCalls slot of `webhook`: `None` without the option, else a free slot at
    /// once or within the queue time (and the budget), with whether it had to queue.
    ///
    /// # Errors
    /// [`CallFailure::Overloaded`] when every slot stayed busy.
    async fn call_slot<'w>(
        &self,
        webhook: &'w Webhook,
        budget: Duration,
    ) -> Result<Option<(tokio::sync::SemaphorePermit<'w>, bool)>, CallFailure> {
        let Some(slots) = &webhook.call_slots else {
            return Ok(None);
        };
        if let Ok(slot) = slots.slots.try_acquire() {
            return Ok(Some((slot, false)));
        }
        let wait = self.call_queue_timeout.min(budget);
        match tokio::time::timeout(wait, slots.slots.acquire()).await {
            Ok(Ok(slot)) => Ok(Some((slot, true))),
            _ => Err(CallFailure::Overloaded(format!(
                "webhook {:?} is overloaded: all its calls (maxConcurrentCalls) stayed busy for {} ms",
                webhook.name,
                wait.as_millis()
            ))),
        }
    }

    /// Phase 4: the backend call, `sent` in the version [`Dispatcher::guard`] chose, within
    /// its budget; the breaker learns the outcome. Continues with the backend's HTTP answer;
    /// a timeout or transport failure goes to failurePolicy.
    async fn call(
        &self,
        a: Admission<'_>,
        sent: &ParsedReview<'_>,
        guarded: Guarded<'_>,
        trace: &mut Trace,
    ) -> ControlFlow<Verdict, HttpReply> {
        let Admission {
            webhook,
            trace_context,
            call_uid,
            ..
        } = a;
        let Guarded {
            version,
            budget,
            timeout,
            permit,
            _slot,
        } = guarded;
        if let Some(e) = &webhook.backend.rest_client_error {
            let failure = CallFailure::RestClient(e.to_string());
            return ControlFlow::Break(self.fail(webhook, failure));
        }
        // Sized once and appended: `format!` grows its String twice for this.
        let mut path = String::with_capacity(webhook.backend.path.len() + 32);
        path.push_str(&webhook.backend.path);
        path.push_str("?timeout=");
        path.push_str(itoa::Buffer::new().format(timeout));
        path.push('s');
        let body = sent.body_for_call(version, call_uid);
        let target = Target::shared(webhook.backend.clone());
        let (span, call_headers) = trace_context.call(webhook);
        let trace_headers = call_headers.headers();
        // Pinned where it is made: moved into `timeout`, the call's (large) state would be
        // copied once more per admission.
        let call = std::pin::pin!(post_as_client_go(
            &self.client,
            &target,
            &path,
            &body,
            &trace_headers,
            || webhook.metrics.retry(),
        ));
        // `timeout_at`: tokio's `timeout` would read the clock again for its deadline.
        let started = crate::clock::now();
        let reply = tokio::time::timeout_at(started + budget, call).await;
        trace.backend = Some(crate::clock::since(started));
        note_outcome(&reply, span, permit);
        // The URL only appears in failure messages; built there, not on every call.
        let url = || format!("{}?timeout={timeout}s", webhook.backend.url);
        let failure = match reply {
            Ok(Ok(reply)) => return ControlFlow::Continue(reply),
            Err(_) => CallFailure::Timeout { url: url() },
            Ok(Err(e @ (TransportError::Body(_) | TransportError::TooLarge(_)))) => {
                CallFailure::ReadBody(e.to_string())
            }
            Ok(Err(e)) => CallFailure::Transport {
                url: url(),
                class: e.class(),
                detail: e.to_string(),
            },
        };
        ControlFlow::Break(self.fail(webhook, failure))
    }

    /// Phase 5: the backend's answer verified as kube-apiserver verifies it, a patch carried
    /// back to the caller's version (an internal error when it cannot be), mode Warn applied.
    async fn respond(
        &self,
        a: Admission<'_>,
        rewritten: Option<&Rewritten>,
        reply: &HttpReply,
        version: ReviewVersion,
    ) -> Verdict {
        let Admission {
            webhook,
            review,
            clock,
            trace_context,
            call_uid,
        } = a;
        let uid = &review.request.uid;
        let sent_uid = call_uid.unwrap_or(uid);
        let verified = match verify::verify(reply, version, sent_uid, webhook.webhook_type) {
            Ok(verified) => verified,
            Err(CallFailure::UndecodablePatch(e))
                if self
                    .kube_version
                    .is_some_and(|v| v < kube_version::UNDECODABLE_PATCH_IS_CALL_ERROR) =>
            {
                return deny(review, conversion::internal_error(&e), Decision::Rejected);
            }
            Err(failure) => return self.fail(webhook, failure),
        };
        let allowed = verified.allowed;
        let mut response = AdmissionResponse {
            uid: uid.to_string(),
            allowed,
            status: verified.status,
            patch_type: verified.patch.as_ref().map(|_| "JSONPatch".to_string()),
            patch: verified.patch,
            audit_annotations: verified.audit_annotations,
            warnings: verified.warnings,
        };
        if !allowed && response.status.is_none() {
            response.status = Some(serde_json::json!({}));
        }
        if let (Some(r), Some(patch)) = (rewritten, response.patch.as_deref()) {
            let _span = trace_context.phase("conversion");
            // Boxed: a conversion webhook call back would size every admission's future.
            match Box::pin(self.patch_back(review, r, patch, clock)).await {
                Ok(back) => {
                    response.patch_type = back.as_ref().map(|_| "JSONPatch".to_string());
                    response.patch = back;
                }
                Err(status) => return deny(review, status, Decision::Rejected),
            }
        }
        if self.mode_of(webhook) == Mode::Warn {
            return warn_only(webhook, response);
        }
        let (decision, detail) = if allowed {
            (Decision::Allowed, String::new())
        } else {
            // The denial's message goes into the admission log line.
            (Decision::Denied, denial_message(&response).to_string())
        };
        Verdict::new(response, decision, detail)
    }
}

/// A call's outcome, noted where it is watched: its span (status code, or the failure's
/// class) and the backend's breaker (down on connect, TLS and timeout failures).
fn note_outcome(
    reply: &Result<Result<HttpReply, TransportError>, tokio::time::error::Elapsed>,
    span: Option<crate::telemetry::PhaseSpan>,
    permit: Option<CallPermit>,
) {
    if let Some(mut span) = span {
        match reply {
            Ok(Ok(reply)) => span.set("http.response.status_code", i64::from(reply.status)),
            Ok(Err(e)) => span.fail(e.class()),
            Err(_) => span.fail("timeout"),
        }
    }
    if let Some(permit) = permit {
        permit.record(match reply {
            Err(_) => true,
            Ok(Err(e)) => matches!(e, TransportError::Connect(_) | TransportError::Tls(_)),
            Ok(Ok(_)) => false,
        });
    }
}

// The answer builders of the phases above: what each phase answers when it decides.

/// `mode: Warn` (config options): what the backend decided, recorded but not applied. A denial
/// becomes `allowed: true` with the warning `admission webhook "N" would deny the request:
/// MESSAGE` and the audit annotation `would-deny` (kube-apiserver records it as
/// `N/would-deny`); a patch is dropped, its operations' paths kept in the audit annotation
/// `would-patch` and the log. The backend's own warnings and audit annotations are kept.
fn warn_only(webhook: &Webhook, mut response: AdmissionResponse) -> Verdict {
    if !response.allowed {
        let message = denial_message(&response).to_string();
        response.allowed = true;
        response.status = None;
        response.patch = None;
        response.patch_type = None;
        response.warnings.push(format!(
            "admission webhook {:?} would deny the request: {message}",
            webhook.name
        ));
        response
            .audit_annotations
            .insert("would-deny".to_string(), message.clone());
        return Verdict::new(response, Decision::WouldDeny, message);
    }
    let Some(patch) = response.patch.take() else {
        return Verdict::new(response, Decision::Allowed, String::new());
    };
    response.patch_type = None;
    let paths = patch_paths(&patch);
    let detail = format!("patch of {} bytes not applied: {paths}", patch.len());
    response
        .audit_annotations
        .insert("would-patch".to_string(), paths);
    Verdict::new(response, Decision::WouldPatch, detail)
}

/// `status.message` of a denial ("" without one).
fn denial_message(response: &AdmissionResponse) -> &str {
    // The text kube-apiserver shows after `denied the request: ` (`ToStatusErr` in
    // `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/errors/statuserror.go`):
    // `status.message`, else `status.reason` (agnhost denies that way), else none.
    let field = |name: &str| {
        response
            .status
            .as_ref()
            .and_then(|s| s.get(name))
            .and_then(Value::as_str)
            .filter(|text| !text.is_empty())
    };
    field("message")
        .or_else(|| field("reason"))
        .unwrap_or("without explanation")
}

/// A webhook in `mode: Shadow` ([`Dispatcher::mode`]): called after the answer, in the
/// background, with the review it would have received (the caller's, or in a mutating chain
/// the one patched so far), parsed once already.
#[derive(Debug)]
pub(crate) struct Shadow {
    pub(crate) webhook: Arc<Webhook>,
    pub(crate) review: SharedReview,
}

impl Shadow {
    /// `mode: Shadow`'s immediate answer: allowed, as if the webhook did not exist.
    pub(crate) fn verdict(&self) -> Verdict {
        Verdict::new(
            AdmissionResponse::allow(&self.review.get().request.uid),
            Decision::Shadowed,
            "answered at once; the backend is called in the background".to_string(),
        )
    }

    /// The single route's answer: [`Self::verdict`] in the caller's AdmissionReview version.
    pub(crate) fn answer(&self) -> Answer {
        let review = self.review.get();
        self.verdict().into_answer(&self.webhook, review)
    }
}

/// `op path` of each operation of a base64 JSON Patch, comma-separated (for logs and audit).
pub(crate) fn patch_paths(patch_base64: &str) -> String {
    use base64::Engine;
    let ops: Vec<Value> = base64::engine::general_purpose::STANDARD
        .decode(patch_base64)
        .ok()
        .and_then(|raw| serde_json::from_slice(&raw).ok())
        .unwrap_or_default();
    ops.iter()
        .map(|op| {
            let field = |k: &str| op.get(k).and_then(Value::as_str).unwrap_or("?").to_string();
            format!("{} {}", field("op"), field("path"))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `matching` span's `result` for an admission that matching answered: skip and why,
/// reject and why, or (a namespace whose labels are unavailable) failurePolicy's answer.
fn answered_summary(verdict: &Verdict) -> String {
    match verdict.decision {
        Decision::Skipped => format!("skip: {}", verdict.detail),
        Decision::FailedOpen | Decision::FailedClosed => {
            format!("namespace unavailable: {}", verdict.detail)
        }
        _ => format!("reject: {}", verdict.detail),
    }
}

/// The `matching` span's `result` once matchConditions decided: call (and the version an
/// Equivalent rule was matched in), or the skip or rejection they caused.
fn call_summary(invocation: Option<&Equivalent>, flow: &ControlFlow<Verdict>) -> String {
    match (flow, invocation) {
        (ControlFlow::Break(verdict), _) => answered_summary(verdict),
        (ControlFlow::Continue(()), None) => "call".into(),
        (ControlFlow::Continue(()), Some(i)) => {
            let slash = if i.group.is_empty() { "" } else { "/" };
            format!(
                "call, converted to {}{slash}{} {}",
                i.group, i.version, i.resource
            )
        }
    }
}

/// What the webhook's matchConditions did (kube-apiserver counts evaluations, exclusions and
/// errors: `apiserver_admission_match_condition_*`).
fn conditions_outcome(verdict: &ConditionsVerdict) -> Conditions {
    match verdict {
        ConditionsVerdict::None => Conditions::NotEvaluated,
        ConditionsVerdict::Match => Conditions::Passed,
        ConditionsVerdict::Excluded(_) => Conditions::Excluded,
        ConditionsVerdict::ErrorIgnored(_) | ConditionsVerdict::ErrorRejected(_) => {
            Conditions::Errored
        }
    }
}

/// A skip: allowed at once, the reason is the log detail.
fn skipped(review: &ParsedReview<'_>, reason: SkipReason) -> Verdict {
    let allow = AdmissionResponse::allow(&review.request.uid);
    Verdict::new(allow, Decision::Skipped, reason.to_string())
}

/// A denial the proxy itself decides; its message is also the log detail.
fn deny(review: &ParsedReview<'_>, status: Status, decision: Decision) -> Verdict {
    let detail = status.message.clone();
    Verdict::new(
        AdmissionResponse::deny(&review.request.uid, status),
        decision,
        detail,
    )
}

/// The deadline rules with tokio's paused clock, no real sleeps: the backend is a listener
/// that never answers (the TCP handshake completes in the kernel's backlog, the TLS handshake
/// never does), so the runtime idles and time jumps straight to the deadline that ends the
/// call. Each test checks the virtual time the answer took and the failure it gives.
#[cfg(test)]
mod deadline_tests {
    use std::path::PathBuf;
    use std::sync::Arc;
    use std::time::Duration;

    use tokio::time::Instant;

    use crate::config::{self, Webhook};
    use crate::decision::Decision;
    use crate::dispatch::{Answer, Dispatcher};
    use crate::review::ParsedReview;
    use crate::telemetry::TraceContext;

    /// A loopback listener that accepts nothing and answers nothing; `https://` URL for it.
    fn black_hole() -> (std::net::TcpListener, String) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("https://{}/hook", listener.local_addr().unwrap());
        (listener, url)
    }

    /// One validating webhook `w.example.com` calling `url`, failurePolicy Fail, with `extra`
    /// webhook fields and configuration `annotations`.
    fn webhook(url: &str, extra: &str, annotations: &str) -> Arc<Webhook> {
        let ca = crate::pki::TestPki::generate(&["127.0.0.1"])
            .unwrap()
            .ca_bundle();
        let yaml = format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\n\
             metadata: {{name: c{annotations}}}\nwebhooks:\n- name: w.example.com\n  \
             clientConfig: {{url: \"{url}\", caBundle: \"{ca}\"}}\n  \
             rules: [{{operations: [\"*\"], apiGroups: [\"*\"], apiVersions: [\"*\"], resources: [\"*/*\"]}}]\n  \
             sideEffects: None\n  admissionReviewVersions: [v1]\n  failurePolicy: Fail\n  {extra}\n"
        );
        let snapshot = config::load_contents(&[(PathBuf::from("t.yaml"), yaml)])
            .unwrap_or_else(|e| panic!("{e}"));
        let webhook = snapshot.webhooks().next().unwrap().clone();
        webhook
    }

    fn pod() -> Vec<u8> {
        std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/admission-reviews/0096-create-core-v1-pods-v1.json"
        ))
        .unwrap()
    }

    /// Admits the pod review with the caller's `?timeout=`; the answer and the virtual time
    /// it took.
    async fn admit(d: &Dispatcher, w: &Webhook, caller: Option<Duration>) -> (Answer, Duration) {
        let body = pod();
        let review = ParsedReview::parse(&body).unwrap();
        let received = Instant::now();
        let answer = d
            .dispatch(w, &review, None, caller, received, TraceContext::default())
            .await;
        (answer, received.elapsed())
    }

    fn message(answer: &Answer) -> String {
        let v: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
        v["message"].as_str().unwrap_or_default().to_string()
    }

    /// `?timeout=3s` with timeoutSeconds 10: the call ends 250 ms (the margin) before the
    /// caller's deadline, and the backend was told `?timeout=3s` (2.75 s rounded up).
    #[tokio::test(start_paused = true)]
    async fn the_callers_deadline_less_the_margin_bounds_the_call() {
        let (_listener, url) = black_hole();
        let w = webhook(&url, "timeoutSeconds: 10", "");
        let d = Dispatcher::new(Duration::from_millis(250));
        let (answer, took) = admit(&d, &w, Some(Duration::from_secs(3))).await;
        assert_eq!(answer.decision, Decision::FailedClosed);
        assert_eq!(took, Duration::from_millis(2750));
        assert_eq!(
            message(&answer),
            format!("Post \"{url}?timeout=3s\": context deadline exceeded")
        );
    }

    /// No caller deadline: timeoutSeconds alone; `--max-timeout-seconds` caps it.
    #[tokio::test(start_paused = true)]
    async fn timeout_seconds_and_the_max_timeout_cap() {
        let (_listener, url) = black_hole();
        let w = webhook(&url, "timeoutSeconds: 2", "");
        let d = Dispatcher::new(Duration::from_millis(250));
        let (answer, took) = admit(&d, &w, None).await;
        assert_eq!(
            (answer.decision, took),
            (Decision::FailedClosed, Duration::from_secs(2))
        );
        let w = webhook(&url, "timeoutSeconds: 10", "");
        let capped =
            Dispatcher::new(Duration::from_millis(250)).with_max_timeout(Duration::from_secs(1));
        let (answer, took) = admit(&capped, &w, None).await;
        assert_eq!(
            (answer.decision, took),
            (Decision::FailedClosed, Duration::from_secs(1))
        );
        assert!(
            message(&answer).contains("?timeout=1s"),
            "{}",
            message(&answer)
        );
    }

    /// maxConcurrentCalls 1: while one call holds the slot, the next waits the queue time
    /// (100 ms by default) and is answered by failurePolicy as overloaded; the first still
    /// ends at its own deadline.
    #[tokio::test(start_paused = true)]
    async fn a_full_call_slot_waits_the_queue_time() {
        let (_listener, url) = black_hole();
        let options = ", annotations: {admission-proxy.io/webhook-options: '{\"w.example.com\": {\"maxConcurrentCalls\": 1}}'}";
        let w = webhook(&url, "timeoutSeconds: 5", options);
        let d = Dispatcher::new(Duration::from_millis(250));
        let ((first, first_took), (second, second_took)) =
            tokio::join!(admit(&d, &w, None), async {
                tokio::task::yield_now().await;
                admit(&d, &w, None).await
            });
        assert_eq!(
            (first.decision, first_took),
            (Decision::FailedClosed, Duration::from_secs(5))
        );
        assert_eq!(second.decision, Decision::FailedClosed);
        assert_eq!(second_took, Duration::from_millis(100));
        assert!(
            message(&second).contains("overloaded"),
            "{}",
            message(&second)
        );
    }

    /// matchPolicy Equivalent with a matchCondition: the path an apps/v1 Deployment takes
    /// when the webhook registered for apps/v1beta2. The caller's review is parsed once (here,
    /// standing in for the server) and the converted review once; the condition sees the
    /// converted object (it is true only for apps/v1beta2), so the call is made (and times out
    /// on the black hole).
    #[tokio::test(start_paused = true)]
    async fn an_equivalent_admission_parses_each_review_once() {
        let (_listener, url) = black_hole();
        let ca = crate::pki::TestPki::generate(&["127.0.0.1"])
            .unwrap()
            .ca_bundle();
        let yaml = format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\n\
             metadata: {{name: c}}\nwebhooks:\n- name: w.example.com\n  \
             clientConfig: {{url: \"{url}\", caBundle: \"{ca}\"}}\n  \
             rules: [{{operations: [CREATE], apiGroups: [apps], apiVersions: [v1beta2], resources: [deployments]}}]\n  \
             matchPolicy: Equivalent\n  \
             matchConditions: [{{name: sees-v1beta2, expression: \"object.apiVersion == 'apps/v1beta2'\"}}]\n  \
             sideEffects: None\n  admissionReviewVersions: [v1]\n  failurePolicy: Fail\n"
        );
        let snapshot = config::load_contents(&[(PathBuf::from("t.yaml"), yaml)])
            .unwrap_or_else(|e| panic!("{e}"));
        let w = snapshot.webhooks().next().unwrap().clone();
        let d = Dispatcher::new(Duration::from_millis(250));
        let body = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/admission-reviews/0064-create-apps-v1-deployments-v1.json"
        ))
        .unwrap();
        crate::review::PARSES.with(|n| n.set(0));
        let review = ParsedReview::parse(&body).unwrap();
        let answer = d
            .dispatch(
                &w,
                &review,
                None,
                Some(Duration::from_secs(1)),
                Instant::now(),
                TraceContext::default(),
            )
            .await;
        assert_eq!(answer.decision, Decision::FailedClosed, "{}", answer.detail);
        assert_eq!(crate::review::PARSES.with(std::cell::Cell::get), 2);
    }
}

#[cfg(test)]
mod denial_tests {
    use super::*;

    /// A denial whose text is only in `status.reason` logged an empty detail.
    #[test]
    fn the_denial_text_is_the_message_else_the_reason() {
        let denial = |status: Value| AdmissionResponse {
            allowed: false,
            status: Some(status),
            ..AdmissionResponse::allow("u")
        };
        let both = denial(serde_json::json!({"message": "m", "reason": "r"}));
        assert_eq!(denial_message(&both), "m");
        let reason = denial(serde_json::json!({"reason": "pod name contains \"offending\""}));
        assert_eq!(denial_message(&reason), "pod name contains \"offending\"");
        let empty = denial(serde_json::json!({"message": "", "code": 403}));
        assert_eq!(denial_message(&empty), "without explanation");
    }
}

#[cfg(test)]
mod metric_index_tests {
    use super::*;
    use crate::review::Operation;

    /// The metrics module indexes its series by `Operation as usize` and names failure
    /// classes from its table.
    #[test]
    fn operation_indices_and_failure_classes_match_the_metric_tables() {
        for o in [
            Operation::Create,
            Operation::Update,
            Operation::Delete,
            Operation::Connect,
        ] {
            assert_eq!(crate::metrics::OPERATIONS[o as usize], o.as_str());
        }
        let classes = [
            CallFailure::NoKnownReviewVersion,
            CallFailure::Timeout { url: String::new() },
            CallFailure::Status {
                code: 500,
                message: String::new(),
            },
            CallFailure::Invalid(String::new()),
            CallFailure::NamespaceUnavailable(String::new()),
        ];
        for c in classes {
            assert!(
                crate::metrics::FAILURE_CLASSES.contains(&c.class()),
                "{}",
                c.class()
            );
        }
        for t in ["connect", "tls", "transport"] {
            assert!(crate::metrics::FAILURE_CLASSES.contains(&t));
        }
    }
}
