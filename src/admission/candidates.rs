//! Candidates at work: after the legacy webhook's answer, each of its candidates
//! ([`crate::config::candidates`]) decides the same request on the background lane, and the two
//! decisions are compared ([`compare`](super::compare)). The legacy answer is what
//! kube-apiserver got, already: a candidate never delays or changes it. A candidate slower than
//! the legacy call, down, or over its own timeout is counted; with the lane full, its work is
//! shed and counted.
//!
//! Each comparison is counted (`admission_proxy_candidate_comparisons_total` by webhook,
//! candidate and result; the candidate's own time in
//! `admission_proxy_candidate_duration_seconds`). A disagreement is logged once and, with
//! `--capture-dir`, captured (redacted like every capture) with both decisions, so that
//! `explain --review` replays it and `candidates report` groups it.

use std::sync::Arc;

use tokio::time::Instant;

use super::compare::{differences, shown_warnings, Outcome};
use super::{namespaces_for, Admissions};
use crate::config::candidates::{Candidate, CandidateKind};
use crate::config::Webhook;
use crate::dispatch::{Answer, Decision};
use crate::log_value::Bounded;
use crate::matching::authz::Decisions;
use crate::matching::{Authorized, Namespaces, MAX_AUTHORIZATION_ROUNDS};
use crate::policy::{Policy, PolicyDecision, PolicyVerdict};
use crate::review::{ParsedReview, SharedReview};

/// How long a policy candidate's `authorizer` checks may take, all rounds together (in the
/// background: what kube-apiserver's in-process authorizer would answer at once).
const POLICY_AUTHORIZATION_BUDGET: std::time::Duration = std::time::Duration::from_secs(5);

/// The legacy webhook's answer, as the background work needs it (copied once, shared by
/// every candidate of the webhook).
struct Legacy {
    http_status: u16,
    body: Vec<u8>,
    decision: Decision,
}

/// Whether a mirrored backend's answer is its failurePolicy's on a failed call.
fn failed(decision: Decision) -> bool {
    matches!(
        decision,
        Decision::FailedOpen | Decision::FailedClosed | Decision::Rejected
    )
}

impl Admissions {
    /// Starts each of `webhook`'s candidates on the background lane, after `legacy` answered
    /// `review` (only when the legacy webhook was called). Costs the request path one copy of
    /// the answer, only for webhooks with candidates.
    pub(super) fn candidates(
        self: &Arc<Self>,
        webhook: &Arc<Webhook>,
        review: &SharedReview,
        legacy: &Answer,
    ) {
        if !legacy.decision.called() {
            return;
        }
        let shared = Arc::new(Legacy {
            http_status: legacy.http_status,
            body: legacy.body.clone(),
            decision: legacy.decision,
        });
        for candidate in &webhook.candidates {
            let Some(slot) = self.background.slot(review.get().body_len()) else {
                crate::metrics::candidate_comparison(&webhook.name, &candidate.name, "shed");
                continue;
            };
            let (admissions, webhook, candidate) =
                (self.clone(), webhook.clone(), candidate.clone());
            let (review, legacy) = (review.clone(), shared.clone());
            slot.run(&self.background, async move {
                admissions
                    .compare(&webhook, &candidate, &review, &legacy)
                    .await;
            });
        }
    }

    /// One candidate's decision on `review`, compared with the legacy webhook's and recorded:
    /// `candidate_error` when the candidate could not decide; `legacy_error` (not compared,
    /// logged, captured) when the legacy webhook's own call failed, which its failurePolicy
    /// answered; otherwise agreement or the first difference. A candidate decision that came
    /// from an error (a policy's evaluation error, a mirrored backend's failed call, each
    /// decided by its failurePolicy) is compared like any other, and also counted
    /// (`admission_proxy_candidate_error_decisions_total`), logged and captured.
    async fn compare(
        &self,
        webhook: &Webhook,
        candidate: &Candidate,
        shared: &SharedReview,
        legacy: &Legacy,
    ) {
        let started = Instant::now();
        let decided = self.candidate_decision(candidate, shared).await;
        crate::metrics::candidate_duration(&webhook.name, &candidate.name, started.elapsed());
        let review = shared.get();
        let uid = Bounded(&review.request.uid);
        let outcome = match decided {
            Ok(outcome) => outcome,
            Err(why) => {
                crate::metrics::candidate_comparison(
                    &webhook.name,
                    &candidate.name,
                    "candidate_error",
                );
                tracing::debug!(uid = %uid, webhook = %webhook.name, candidate = %candidate.name, error = %Bounded(&why.to_string()), "candidate could not decide");
                return;
            }
        };
        let legacy_failed = matches!(
            legacy.decision,
            Decision::FailedOpen | Decision::FailedClosed
        );
        let legacy = Outcome::of_answer(legacy.http_status, &legacy.body, legacy.decision.as_str());
        let record = |differences: serde_json::Value| {
            serde_json::json!({
                "name": candidate.name,
                "kind": candidate.kind_str(),
                "differences": differences,
                "legacy": legacy,
                "candidate": outcome,
            })
        };
        let capture = |record: serde_json::Value| {
            if let Some(capture) = &self.capture {
                capture.offer_comparison(review.body(), &webhook.name, record);
            }
        };
        if legacy_failed {
            crate::metrics::candidate_comparison(&webhook.name, &candidate.name, "legacy_error");
            tracing::info!(uid = %uid, webhook = %webhook.name, candidate = %candidate.name, legacy = %Bounded(format_args!("{} {}", legacy.decision, legacy.message)), "the legacy webhook's call failed; not compared");
            capture(record(serde_json::json!(["legacy_error"])));
            return;
        }
        let object = || {
            crate::conversion::take_objects(review)
                .ok()
                .and_then(|[object, _]| object)
        };
        let found = differences(&legacy, &outcome, object);
        if let Some(error) = &outcome.error {
            crate::metrics::candidate_error_decision(&webhook.name, &candidate.name);
            tracing::info!(uid = %uid, webhook = %webhook.name, candidate = %candidate.name, decision = %outcome.decision, error = %Bounded(error), "candidate decided on an error, by its failurePolicy");
        }
        let Some(first) = found.first() else {
            crate::metrics::candidate_comparison(&webhook.name, &candidate.name, "agree");
            if outcome.error.is_some() {
                capture(record(serde_json::json!([])));
            }
            return;
        };
        crate::metrics::candidate_comparison(&webhook.name, &candidate.name, first.result());
        let names: Vec<&str> = found.iter().map(|d| d.result()).collect();
        tracing::info!(
            uid = %uid,
            webhook = %webhook.name,
            candidate = %candidate.name,
            difference = %names.join(","),
            legacy = %Bounded(format_args!("{} {}", legacy.decision, legacy.message)),
            candidate_decision = %Bounded(format_args!("{} {}", outcome.decision, outcome.message)),
            "candidate disagrees with the legacy webhook"
        );
        capture(record(serde_json::json!(found)));
    }

    /// What `candidate` decides on `shared`, as the answer kube-apiserver would act on.
    ///
    /// # Errors
    /// [`Undecided`] when it cannot be decided here.
    async fn candidate_decision(
        &self,
        candidate: &Candidate,
        shared: &SharedReview,
    ) -> Result<Outcome, Undecided> {
        let review = shared.get();
        match &candidate.kind {
            CandidateKind::Backend(backend) => {
                let webhooks = std::slice::from_ref(backend);
                let namespaces = namespaces_for(self, webhooks, review, None).await;
                let uid = uuid::Uuid::new_v4().to_string();
                let answer = {
                    let call = std::pin::pin!(self.dispatcher.admit_own_call(
                        backend,
                        review,
                        namespaces.as_deref(),
                        &uid
                    ));
                    call.await
                };
                let outcome =
                    Outcome::of_answer(answer.http_status, &answer.body, answer.decision.as_str());
                // A failed call is the answer its failurePolicy gives, marked as an error.
                Ok(if failed(answer.decision) {
                    Outcome {
                        error: Some(answer.detail),
                        ..outcome
                    }
                } else {
                    outcome
                })
            }
            CandidateKind::Policy(policy) => {
                let namespaces = self.namespaces.load_full();
                let verdict = self
                    .policy_verdict(policy, review, namespaces.as_deref())
                    .await?;
                policy_outcome(&verdict)
            }
        }
    }
}

impl Admissions {
    /// `policy`'s verdict on `review`, its `authorizer` checks answered by SubjectAccessReview
    /// (`--authorizer`, its cache first) in rounds, as webhooks' matchConditions are.
    ///
    /// # Errors
    /// [`Undecided`] when they cannot be.
    async fn policy_verdict(
        &self,
        policy: &Policy,
        review: &ParsedReview<'_>,
        namespaces: Option<&Namespaces>,
    ) -> Result<PolicyVerdict, Undecided> {
        let authorizer = self.dispatcher.authorizer();
        let mut decisions = match authorizer {
            Some(a) => Decisions::with_cache(a.clone()),
            None => Decisions::default(),
        };
        let deadline = Instant::now() + POLICY_AUTHORIZATION_BUDGET;
        for _ in 0..MAX_AUTHORIZATION_ROUNDS {
            let keys = match policy.evaluate(review, namespaces, &mut decisions) {
                Authorized::Done(verdict) => return Ok(verdict),
                Authorized::Pending(keys) => keys,
            };
            let Some(authorizer) = authorizer else {
                return Err(Undecided::NoAuthorizer);
            };
            let budget = deadline.saturating_duration_since(Instant::now());
            let answers = authorizer.decide_all(&keys, budget).await;
            for (key, decision) in keys.into_iter().zip(answers) {
                decisions.insert(key, decision);
            }
        }
        Err(Undecided::AuthorizationRounds)
    }
}

/// Why a candidate's decision cannot be taken here: counted as `candidate_error`, logged.
#[derive(Debug, thiserror::Error)]
pub(super) enum Undecided {
    /// The policy asks `authorizer` and there is no SubjectAccessReview client.
    #[error("the policy uses `authorizer` but serve was started without --authorizer")]
    NoAuthorizer,
    /// The authorization checks did not settle within the rounds allowed.
    #[error("authorization checks still undecided after {MAX_AUTHORIZATION_ROUNDS} rounds")]
    AuthorizationRounds,
    /// What the policy evaluator could not decide (a namespace it does not know, a conversion
    /// it cannot do), in its words.
    #[error("{0}")]
    Policy(String),
}

/// A policy's verdict as the answer kube-apiserver would give: allowed (also when the policy
/// does not apply) with its warnings, or its denial as the client reads it (message, reason,
/// code), with the failing validation and the audit annotations beside. An evaluation or
/// configuration error is the decision failurePolicy takes on it (`addConfigError`,
/// `Validate` in `staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/validating/`):
/// Fail denies with upstream's text, Ignore admits; `error` says which error decided. Only a
/// request the proxy cannot decide (a namespace unknown) is a candidate error.
fn policy_outcome(verdict: &PolicyVerdict) -> Result<Outcome, Undecided> {
    if let PolicyDecision::Undecided(why) = &verdict.decision {
        return Err(Undecided::Policy(why.clone()));
    }
    let (allowed, word) = match verdict.decision {
        PolicyDecision::NotApplicable => (true, "not-applicable"),
        PolicyDecision::Denied => (false, "denied"),
        _ => (true, "allowed"),
    };
    let denial = verdict.denial.as_ref();
    let error = match denial {
        // The error that denied (Fail), else the first one ignored.
        Some(d) => verdict
            .errors
            .iter()
            .find(|e| !e.ignored && d.cause.ends_with(&e.message)),
        None => verdict.errors.first(),
    };
    let outcome = Outcome {
        allowed,
        code: denial.map(|d| i64::from(d.code)),
        message: denial.map(|d| d.message.clone()).unwrap_or_default(),
        reason: denial.map(|d| d.reason.clone()).unwrap_or_default(),
        validation: denial
            .and_then(|d| d.validation.as_ref())
            .map(|(i, expression)| format!("spec.validations[{i}]: {expression}")),
        error: error.map(|e| e.message.clone()),
        audit_annotations: verdict.audit_annotations.clone(),
        warnings: shown_warnings(verdict.warnings.iter().map(String::as_str)),
        patch: None,
        patch_operations: None,
        decision: word,
    };
    Ok(outcome)
}
