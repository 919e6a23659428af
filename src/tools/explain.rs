//! `admission-proxy explain`: for one captured AdmissionReview, whether a proxy-wide exclusion
//! exempts it, then what every loaded webhook would do with it and why (KEP-3716
//! "Debuggability"). Depends on `config`, `exclusions`, `matching`,
//! `conversion` (by table), `registration` (which registration rule brings the request),
//! `resources` and `review`; the verdict is [`Matcher::decide`]'s and matchConditions' own, in
//! serve's order, so explain cannot disagree with `serve`.
//!
//! [`Matcher::decide`]: crate::matching::Matcher::decide

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use serde_json::value::RawValue;

use crate::api::{FailurePolicy, MatchPolicy, ReinvocationPolicy};
use crate::config::{Snapshot, Webhook};
use crate::conversion::{self, Rewritten};
use crate::exclusions::Exclusions;
use crate::matching::authz::{self, Attributes, CheckKey, Decision, Decisions};
use crate::matching::conditions::ConditionEvaluation;
use crate::matching::{
    namespace_labels, Authorized, ConditionsVerdict, MatchConditions, MatchDecision, Matcher,
    NamespaceLabels, Namespaces, ObjectLabels, Rule, RuleInput, SkipReason,
    MAX_AUTHORIZATION_ROUNDS,
};
use crate::redact::RedactPath;
use crate::resources::Equivalent;
use crate::review::{ParsedReview, Status};

/// What explain reports for one review: the request in brief, then every webhook by name.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    pub(crate) uid: String,
    /// `admission.k8s.io/v1` or `v1beta1`, as the review was written.
    pub(crate) api_version: &'static str,
    /// `CREATE apps/v1 deployments "web" in namespace "prod"`.
    pub(crate) request: String,
    /// The proxy-wide exclusions' verdict, when `serve` is given any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) exclusion: Option<ExclusionCheck>,
    pub(crate) webhooks: Vec<WebhookExplanation>,
    /// When the review is a capture of a candidate's disagreement: both recorded decisions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) captured_comparison: Option<CapturedComparison>,
    /// The chain routes (`/configurations/{type}/{name}`): each configuration's webhooks in
    /// the order a chain runs them.
    pub(crate) chains: Vec<ChainExplanation>,
}

/// One chain route: which webhooks it would run, in what order, and how.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ChainExplanation {
    /// `/configurations/{validating|mutating}/{name}`.
    pub(crate) route: String,
    pub(crate) configuration: String,
    /// `validating` or `mutating`.
    #[serde(rename = "type")]
    pub(crate) webhook_type: &'static str,
    /// How the chain runs its webhooks, and which object each sees.
    pub(crate) dispatch: &'static str,
    pub(crate) webhooks: Vec<ChainStep>,
}

/// One webhook in a chain: its verdict for the request as sent.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ChainStep {
    pub(crate) name: String,
    /// `call`, `skip` or `reject`, as in the webhook's own explanation.
    pub(crate) verdict: &'static str,
    /// `reinvocationPolicy: IfNeeded` (mutating).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) reinvoked_if_needed: bool,
}

/// How a validating chain runs (`Dispatch` in `validating/dispatcher.go`).
const VALIDATING_DISPATCH: &str = "every webhook is selected in this order (a reject stops the chain before any call), then the ones selected are called concurrently; the first denial to arrive is the answer";
/// How a mutating chain runs (`Dispatch` in `mutating/dispatcher.go`).
const MUTATING_DISPATCH: &str = "called one after another in this order, each selected and called on the object as patched by those before it (verdicts here are for the object as sent: a patch can change a later webhook's selectors and matchConditions); the first denial stops the chain; reinvocationPolicy IfNeeded webhooks run once more when a later webhook changed the object";

/// Proxy-wide exclusions (`serve --exempt-namespace`, `--exempt-namespace-selector`,
/// `--exclusions-file`), decided before any webhook: when one applies, the request is answered
/// allowed and no webhook is called ([`Exclusions`]).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ExclusionCheck {
    /// `exempt` or `not exempt`.
    pub(crate) verdict: &'static str,
    /// Why exempt (`namespace "kube-system" is listed (--exempt-namespace)`); absent when not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
    /// What is configured ([`Exclusions::summary`]).
    pub(crate) configured: String,
    /// Each exclusion matchCondition's value or error and cost; any one `true` exempts, an
    /// error exempts nothing.
    pub(crate) match_conditions: Vec<ConditionCheck>,
}

/// One webhook's verdict and the evidence for it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WebhookExplanation {
    pub(crate) name: String,
    pub(crate) configuration: String,
    /// `validating` or `mutating`.
    #[serde(rename = "type")]
    pub(crate) webhook_type: &'static str,
    /// `call`, `skip` or `reject` (the request fails before the webhook is called).
    pub(crate) verdict: &'static str,
    /// Why, in one line.
    pub(crate) reason: String,
    pub(crate) namespace_selector: SelectorCheck,
    pub(crate) object_selector: ObjectSelectorCheck,
    /// Each rule with `matched` or the first part that did not match.
    pub(crate) rules: Vec<RuleCheck>,
    /// matchPolicy Equivalent only: the rule of the proxy's own registration
    /// (`admission-proxy registration`) that kube-apiserver matches this request against
    /// exactly, i.e. why kube-apiserver calls the proxy at all; `None` inside when no
    /// registration rule matches (kube-apiserver would not call the proxy).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) registration_rule: Option<Option<RegistrationRuleCheck>>,
    pub(crate) match_conditions: Vec<ConditionCheck>,
    /// The `authorizer` checks the matchConditions make, in the order they are asked.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) authorization_checks: Vec<AuthorizationCheck>,
    /// `Fail` or `Ignore`.
    pub(crate) failure_policy: &'static str,
    /// What happens if the call to the backend fails (failurePolicy, which kube-apiserver's
    /// dispatchers apply to `ErrCallingWebhook` only).
    pub(crate) on_call_failure: &'static str,
    /// The `mode` webhook option: `Enforce` (as kube-apiserver), `Warn` or `Shadow`.
    pub(crate) mode: &'static str,
    /// The `maxConcurrentCalls` webhook option.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) max_concurrent_calls: Option<usize>,
    /// For `call`: what would be sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) call: Option<CallPlan>,
    /// The candidates attached to the webhook ([`crate::config::candidates`]): what each is,
    /// and for a policy its decision on this request.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) candidates: Vec<CandidateExplanation>,
}

/// namespaceSelector: the selector, the labels used and where they came from.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SelectorCheck {
    pub(crate) selector: String,
    /// `none needed (empty selector)`, `none needed (cluster-scoped object...)`, `the Namespace
    /// object itself`, `--namespaces-file`, or `namespace not found`.
    pub(crate) labels_from: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) labels: Option<BTreeMap<String, String>>,
    /// `match`, `no match` or `error: ...`.
    pub(crate) result: String,
}

/// objectSelector: labels of `object` and `oldObject`; either matching is enough
/// (`MatchObjectSelector`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ObjectSelectorCheck {
    pub(crate) selector: String,
    /// The labels, `null` (no object) or `no metadata`.
    pub(crate) object: String,
    pub(crate) old_object: String,
    pub(crate) result: &'static str,
}

#[derive(Debug, Serialize)]
pub(crate) struct RuleCheck {
    pub(crate) rule: String,
    /// `matched`, or `<field> does not match`.
    pub(crate) result: String,
}

/// The registration rule that brings a request to the proxy.
#[derive(Debug, Serialize)]
pub(crate) struct RegistrationRuleCheck {
    /// Its index in the registered webhook's `rules`.
    pub(crate) index: usize,
    pub(crate) rule: String,
}

#[derive(Debug, Serialize)]
pub(crate) struct ConditionCheck {
    pub(crate) name: String,
    pub(crate) expression: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) value: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    /// The CEL cost kube-apiserver would charge; absent when the condition did not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) cost: Option<u64>,
}

/// One `authorizer` check: who, what, and the answer (`--kubeconfig`: the cluster's, through
/// a SubjectAccessReview; else none is asked and the decision says so).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AuthorizationCheck {
    /// The user the check is for (the requesting user, or `serviceAccount(...)`'s).
    pub(crate) user: String,
    /// The verb.
    pub(crate) verb: String,
    /// `group/resource[/subresource]`, with `in namespace` and a name when set, or the path.
    pub(crate) attributes: String,
    /// `allowed`, `denied` or `error`.
    pub(crate) result: &'static str,
    /// The authorizer's reason, or why the check failed.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) reason: String,
}

/// The request the proxy would send to the legacy backend.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CallPlan {
    /// The negotiated AdmissionReview version (`admission.k8s.io/v1`), absent when the
    /// webhook names none the proxy speaks (then the call fails as failurePolicy says).
    pub(crate) admission_review_version: Option<&'static str>,
    pub(crate) url: String,
    /// The TLS server name verified in the backend's certificate when it is not the URL's
    /// host (the `tlsServerName` option).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tls_server_name: Option<String>,
    pub(crate) timeout_seconds: u64,
    /// The body, exactly as sent except Secret values and `--redact-path` fields, which are
    /// redacted ([`crate::redact`]).
    pub(crate) body: Option<Box<RawValue>>,
}

/// A candidate attached to a webhook: decided beside it whenever it is called.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CandidateExplanation {
    pub(crate) name: String,
    /// `backend` or `policy`.
    pub(crate) kind: &'static str,
    /// The file it is declared in.
    pub(crate) source: String,
    /// What it does with a request the legacy webhook is called for: for a backend, where it
    /// is sent; for a policy, its decision on this request.
    pub(crate) decides: String,
}

/// A captured disagreement (`serve --capture-dir`): both decisions as the proxy recorded them
/// when the request was live.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CapturedComparison {
    pub(crate) webhook: String,
    /// The candidate's record: its name, the differences, and each side's decision.
    pub(crate) comparison: serde_json::Value,
}

/// Answers an `authorizer` check for `explain`: the binary asks the cluster (a
/// SubjectAccessReview) when given a kubeconfig, else answers "not checked".
pub type Authorize<'a> = &'a dyn Fn(&CheckKey) -> Decision;

/// Explains `review`: first whether `exclusions` exempt it (as `serve` decides with the same
/// exclusions), then against every webhook of `snapshot`, sorted by webhook name; bodies shown
/// have Secret values and the fields at `redact_paths` redacted. matchConditions' `authorizer`
/// checks are answered by `authorize`, asked in serve's order.
pub fn explain(
    snapshot: &Snapshot,
    review: &ParsedReview<'_>,
    namespaces: Option<&Namespaces>,
    exclusions: Option<&Exclusions>,
    redact_paths: &[RedactPath],
    authorize: Authorize<'_>,
) -> Explanation {
    let r = &review.request;
    let request = request_line(review);
    let mut webhooks: Vec<&Webhook> = snapshot
        .webhooks()
        .map(std::convert::AsRef::as_ref)
        .collect();
    webhooks.sort_by(|a, b| a.name.cmp(&b.name));
    // Each webhook's checks are needed twice (its verdict, then its evidence): ask once.
    let answers = std::cell::RefCell::new(std::collections::HashMap::new());
    let memo = |key: &CheckKey| {
        if let Some(decision) = answers.borrow().get(key) {
            return Decision::clone(decision);
        }
        let decision = authorize(key);
        answers.borrow_mut().insert(key.clone(), decision.clone());
        decision
    };
    let authorize: Authorize<'_> = &memo;
    let webhooks: Vec<WebhookExplanation> = webhooks
        .into_iter()
        .map(|w| explain_webhook(w, snapshot, review, namespaces, redact_paths, authorize))
        .collect();
    let chains = chain_explanations(snapshot, &webhooks);
    Explanation {
        uid: r.uid.to_string(),
        api_version: review.version.api_version(),
        request,
        exclusion: exclusions.map(|e| exclusion_check(e, review, namespaces)),
        webhooks,
        captured_comparison: captured_comparison(review),
        chains,
    }
}

/// The request in one line: `CREATE apps/v1 deployments/scale "web" in namespace "prod"`.
fn request_line(review: &ParsedReview<'_>) -> String {
    let r = &review.request;
    let resource = r.effective_resource();
    let group_version = if resource.group.is_empty() {
        resource.version.to_string()
    } else {
        format!("{}/{}", resource.group, resource.version)
    };
    let mut request = format!(
        "{} {group_version} {}",
        review.operation.as_str(),
        resource.resource
    );
    let sub = r.effective_sub_resource();
    if !sub.is_empty() {
        let _ = write!(request, "/{sub}");
    }
    if !r.name.is_empty() {
        let _ = write!(request, " {:?}", r.name);
    }
    if !r.namespace.is_empty() {
        let _ = write!(request, " in namespace {:?}", r.namespace);
    }
    request
}

/// Each chain route of `snapshot` with the verdict each of its webhooks got in `webhooks`.
fn chain_explanations(
    snapshot: &Snapshot,
    webhooks: &[WebhookExplanation],
) -> Vec<ChainExplanation> {
    snapshot
        .chains
        .iter()
        .flat_map(std::collections::BTreeMap::values)
        .map(|chain| {
            let steps = chain.webhooks.iter().map(|w| {
                let verdict = webhooks
                    .iter()
                    .find(|e| e.name == w.name && e.webhook_type == w.webhook_type.as_str())
                    .map_or("skip", |e| e.verdict);
                ChainStep {
                    name: w.name.clone(),
                    verdict,
                    reinvoked_if_needed: w.reinvocation_policy == ReinvocationPolicy::IfNeeded,
                }
            });
            let t = chain.webhook_type.as_str();
            ChainExplanation {
                route: format!("/configurations/{t}/{}", chain.name()),
                configuration: chain.name().to_string(),
                webhook_type: t,
                dispatch: match chain.webhook_type {
                    crate::api::WebhookType::Validating => VALIDATING_DISPATCH,
                    crate::api::WebhookType::Mutating => MUTATING_DISPATCH,
                },
                webhooks: steps.collect(),
            }
        })
        .collect()
}

/// The candidate record of a disagreement capture (`admissionProxyCapture.candidate`), if
/// `review` is one.
fn captured_comparison(review: &ParsedReview<'_>) -> Option<CapturedComparison> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Captured<'a> {
        #[serde(borrow)]
        admission_proxy_capture: Option<&'a RawValue>,
    }
    let captured: Captured<'_> = serde_json::from_slice(review.body()).ok()?;
    let meta: serde_json::Value =
        serde_json::from_str(captured.admission_proxy_capture?.get()).ok()?;
    let comparison = meta.get("candidate")?.clone();
    Some(CapturedComparison {
        webhook: meta.get("webhook")?.as_str()?.to_string(),
        comparison,
    })
}

/// What each of `webhook`'s candidates does with `review`: a backend, where it is sent; a
/// policy, its decision (its `authorizer` checks answered by `authorize`).
fn candidate_explanations(
    webhook: &Webhook,
    review: &ParsedReview<'_>,
    namespaces: Option<&Namespaces>,
    authorize: Authorize<'_>,
) -> Vec<CandidateExplanation> {
    use crate::config::candidates::CandidateKind;
    webhook
        .candidates
        .iter()
        .map(|c| CandidateExplanation {
            name: c.name.clone(),
            kind: c.kind_str(),
            source: c.source.display().to_string(),
            decides: match &c.kind {
                CandidateKind::Backend(backend) => format!(
                    "sent the request the legacy webhook is sent (its own uid) at {}, timeout {}s, in the background; its answer is compared with the legacy answer",
                    backend.backend.url,
                    backend.timeout.as_secs()
                ),
                CandidateKind::Policy(policy) => {
                    policy_decision(policy, review, namespaces, authorize)
                }
            },
        })
        .collect()
}

/// A policy candidate's decision on `review`, in words: the ValidatingAdmissionPolicy's
/// verdict, a denial's code and message with the failing validation, warnings and errors.
fn policy_decision(
    policy: &crate::policy::Policy,
    review: &ParsedReview<'_>,
    namespaces: Option<&Namespaces>,
    authorize: Authorize<'_>,
) -> String {
    use crate::matching::Authorized;
    use crate::policy::PolicyDecision;
    let mut decisions = crate::matching::authz::Decisions::default();
    let mut verdict = None;
    for _ in 0..crate::matching::MAX_AUTHORIZATION_ROUNDS {
        match policy.evaluate(review, namespaces, &mut decisions) {
            Authorized::Done(v) => {
                verdict = Some(v);
                break;
            }
            Authorized::Pending(keys) => {
                for key in keys {
                    let decision = authorize(&key);
                    decisions.insert(key, decision);
                }
            }
        }
    }
    let Some(verdict) = verdict else {
        return format!(
            "ValidatingAdmissionPolicy {:?}: authorization checks still undecided",
            policy.name()
        );
    };
    let mut words = match (&verdict.decision, &verdict.denial) {
        (PolicyDecision::Undecided(why), _) => format!("cannot be decided here: {why}"),
        (PolicyDecision::NotApplicable, _) => {
            "not applicable (allowed): no binding matches, or a matchCondition excluded the request"
                .to_string()
        }
        (PolicyDecision::Denied, Some(d)) => {
            let mut w = format!("DENY {} {}: {}", d.code, d.reason, d.message);
            if let Some((i, expression)) = &d.validation {
                let _ = write!(
                    w,
                    " (failing validation spec.validations[{i}]: {expression})"
                );
            }
            w
        }
        _ => "ALLOW".to_string(),
    };
    for warning in &verdict.warnings {
        let _ = write!(words, "; warning: {warning}");
    }
    for (key, value) in &verdict.audit_annotations {
        let _ = write!(words, "; audit annotation {key}: {value}");
    }
    for error in &verdict.errors {
        let how = if error.ignored {
            "ignored (failurePolicy Ignore)"
        } else {
            "denies (failurePolicy Fail)"
        };
        let _ = write!(words, "; error, {how}: {}", error.message);
    }
    format!("ValidatingAdmissionPolicy {:?}: {words}", policy.name())
}

/// The exclusions' verdict on `review` ([`Exclusions`]'s own decision, as `serve` makes it)
/// and each exclusion matchCondition's value.
fn exclusion_check(
    exclusions: &Exclusions,
    review: &ParsedReview<'_>,
    namespaces: Option<&Namespaces>,
) -> ExclusionCheck {
    let decided = exclusions.decide(review, namespaces);
    let conditions = exclusions.match_conditions();
    ExclusionCheck {
        verdict: if decided.exemption.is_some() {
            "exempt"
        } else {
            "not exempt"
        },
        reason: decided.exemption.map(|e| e.detail),
        configured: exclusions.summary(),
        match_conditions: checks_of(conditions, conditions.evaluate_each(review)),
    }
}

/// "a rule matches the equivalent G/V R (matchPolicy Equivalent), so the webhook receives …".
fn equivalent_reason(i: &crate::resources::Equivalent) -> String {
    format!(
        "a rule matches the equivalent {}/{} {} (matchPolicy Equivalent), so the webhook receives {} {} objects",
        i.group,
        i.version,
        i.resource,
        conversion::api_version((&i.kind_group, &i.kind_version)),
        i.kind
    )
}

/// What serve's select, prepare and conditions phases decide for one webhook
/// (`dispatch::pipeline`), without calling anything.
enum Offline {
    Call,
    /// Converted by table; matchConditions passed on the converted request.
    CallConverted(Rewritten),
    /// Needs the custom resource's conversion webhook, which explain does not call.
    ConvertByWebhook(Box<Equivalent>),
    Skip(SkipReason),
    Reject(Status),
    NamespaceUnavailable(String),
}

/// [`Matcher::decide`], the conversion an Equivalent rule needs (by table only), then
/// [`Matcher::decide_conditions`] on the request as the webhook would receive it: the order of
/// `ShouldCallHook` that serve follows.
///
/// [`Matcher::decide`]: crate::matching::Matcher::decide
/// [`Matcher::decide_conditions`]: crate::matching::Matcher::decide_conditions
fn decide_offline(
    webhook: &Webhook,
    review: &ParsedReview<'_>,
    namespaces: Option<&Namespaces>,
    authorize: Authorize<'_>,
) -> Offline {
    let m = &webhook.matcher;
    let conditions = |sent: &ParsedReview<'_>| match decide_conditions(m, sent, authorize) {
        ConditionsVerdict::None | ConditionsVerdict::Match => None,
        ConditionsVerdict::Excluded(why) | ConditionsVerdict::ErrorIgnored(why) => {
            Some(Offline::Skip(why))
        }
        ConditionsVerdict::ErrorRejected(status) => Some(Offline::Reject(status)),
    };
    match m.decide(review, namespaces) {
        MatchDecision::Call => conditions(review).unwrap_or(Offline::Call),
        MatchDecision::CallEquivalent(i) if conversion::needs_webhook(review, &i) => {
            Offline::ConvertByWebhook(i)
        }
        MatchDecision::CallEquivalent(i) => {
            let internal =
                |e: &dyn std::fmt::Display| Offline::Reject(conversion::internal_error(e));
            let rewritten = match conversion::rewrite_locally(review, *i) {
                Ok(rewritten) => rewritten,
                Err(e) => return internal(&e),
            };
            let verdict = match ParsedReview::parse(&rewritten.body) {
                Ok(sent) => conditions(&sent),
                Err(e) => return internal(&e),
            };
            verdict.unwrap_or(Offline::CallConverted(rewritten))
        }
        MatchDecision::Skip(why) => Offline::Skip(why),
        MatchDecision::Reject(status) => Offline::Reject(status),
        MatchDecision::NamespaceUnavailable(why) => Offline::NamespaceUnavailable(why),
    }
}

/// [`Matcher::decide_conditions`], with `authorizer`'s checks answered by `authorize`.
///
/// [`Matcher::decide_conditions`]: crate::matching::Matcher::decide_conditions
fn decide_conditions(
    m: &Matcher,
    sent: &ParsedReview<'_>,
    authorize: Authorize<'_>,
) -> ConditionsVerdict {
    if !m.match_conditions.uses_authorizer() {
        return m.decide_conditions(sent);
    }
    let (mut decisions, _) = ask(m, sent, authorize);
    let (result, _) = authz::with_decisions(&mut decisions, || m.match_conditions.evaluate(sent));
    m.conditions_verdict(sent, result)
}

/// The decisions of `m`'s `authorizer` checks on `sent`, asked of `authorize` in rounds as
/// serve asks them (`dispatch::pipeline`), and the checks in the order asked.
fn ask(
    m: &Matcher,
    sent: &ParsedReview<'_>,
    authorize: Authorize<'_>,
) -> (Decisions, Vec<(CheckKey, Decision)>) {
    let mut decisions = Decisions::default();
    let mut asked = Vec::new();
    for _ in 0..MAX_AUTHORIZATION_ROUNDS {
        match m.match_conditions.evaluate_authorized(sent, &mut decisions) {
            Authorized::Done(_) => break,
            Authorized::Pending(keys) => {
                for key in keys {
                    let decision = authorize(&key);
                    decisions.insert(key.clone(), decision.clone());
                    asked.push((key, decision));
                }
            }
        }
    }
    (decisions, asked)
}

/// One webhook's verdict and its evidence, in the order of kube-apiserver's `ShouldCallHook`
/// (`staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/generic/webhook.go`) and the
/// dispatchers' `callHook`.
fn explain_webhook(
    webhook: &Webhook,
    snapshot: &Snapshot,
    review: &ParsedReview<'_>,
    namespaces: Option<&Namespaces>,
    redact_paths: &[RedactPath],
    authorize: Authorize<'_>,
) -> WebhookExplanation {
    let m = &webhook.matcher;
    let r = &review.request;
    let decision = decide_offline(webhook, review, namespaces, authorize);
    let (verdict, reason) = dry_run_check(webhook, review, verdict_of(&decision, m.failure_policy));
    // What the webhook sees: the request rewritten for its version, when converted.
    let converted = match &decision {
        Offline::CallConverted(c) => ParsedReview::parse(&c.body).ok(),
        _ => None,
    };
    let seen = converted.as_ref().unwrap_or(review);
    let pending_conversion = matches!(decision, Offline::ConvertByWebhook(_));
    let namespace_selector = namespace_selector_check(webhook, review, namespaces);
    let object_selector = object_selector_check(webhook, review);
    let input = RuleInput {
        operation: review.operation,
        resource: r.effective_resource(),
        sub_resource: r.effective_sub_resource(),
        namespace: &r.namespace,
    };
    let rules = rule_checks(webhook, &input);
    let registration_rule = registration_rule_check(webhook, snapshot, &input);
    let (match_conditions, authorization_checks) = condition_checks(webhook, seen, authorize);
    let (failure_policy, on_call_failure) = match webhook.failure_policy() {
        FailurePolicy::Fail => ("Fail", "the request is rejected (500)"),
        FailurePolicy::Ignore => ("Ignore", "the request is admitted with a warning"),
    };
    let call =
        (verdict == "call").then(|| call_plan(webhook, seen, pending_conversion, redact_paths));
    WebhookExplanation {
        name: webhook.name.clone(),
        configuration: webhook.configuration.clone(),
        webhook_type: webhook.webhook_type.as_str(),
        verdict,
        reason,
        namespace_selector,
        object_selector,
        rules,
        registration_rule,
        match_conditions,
        authorization_checks,
        failure_policy,
        on_call_failure,
        mode: mode_name(webhook.mode.unwrap_or_default()),
        max_concurrent_calls: webhook.call_slots.as_ref().map(|c| c.max),
        call,
        candidates: candidate_explanations(webhook, review, namespaces, authorize),
    }
}

/// The verdict (`call`, `skip`, `reject` or `fail`) and its one-line reason for what serve
/// would decide, before the dry-run check.
fn verdict_of(decision: &Offline, failure_policy: FailurePolicy) -> (&'static str, String) {
    match decision {
        Offline::Call => ("call", "every check passed".to_string()),
        Offline::CallConverted(c) => (
            "call",
            format!("every check passed; {}", equivalent_reason(&c.invocation)),
        ),
        Offline::ConvertByWebhook(i) => {
            let crd = i.custom.as_deref();
            let url = crd
                .and_then(|c| c.conversion_webhook())
                .map_or("", |w| w.backend.url.as_str());
            (
                "call",
                format!(
                    "the selectors and rules pass; {}, converted by the conversion webhook of CustomResourceDefinition {:?} ({url}), which explain does not call: matchConditions run on the converted objects (shown here on the caller's)",
                    equivalent_reason(i),
                    crd.map_or("", |c| c.name.as_str()),
                ),
            )
        }
        Offline::Skip(why) => ("skip", why.to_string()),
        Offline::Reject(status) => (
            "reject",
            format!("{} {}: {}", status.code, status.reason, status.message),
        ),
        Offline::NamespaceUnavailable(why) => (
            "fail",
            format!("{why}; failurePolicy {} decides", failure_policy.as_str()),
        ),
    }
}

/// A call refused for dry run instead, when the request is a dry run and the webhook's
/// sideEffects do not allow it: that check comes after matching, before the call (the
/// dispatchers' `callHook`, see [`Webhook::dry_run_refusal`]).
fn dry_run_check(
    webhook: &Webhook,
    review: &ParsedReview<'_>,
    (verdict, reason): (&'static str, String),
) -> (&'static str, String) {
    match webhook
        .dry_run_refusal(review)
        .filter(|_| verdict == "call")
    {
        Some(refusal) => (
            "reject",
            format!(
                "400 BadRequest: admission webhook {:?} {refusal}",
                webhook.name
            ),
        ),
        None => (verdict, reason),
    }
}

/// namespaceSelector evidence: the labels used, where they came from, and the result
/// (`MatchNamespaceSelector` in
/// `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/namespace/matcher.go`).
fn namespace_selector_check(
    webhook: &Webhook,
    review: &ParsedReview<'_>,
    namespaces: Option<&Namespaces>,
) -> SelectorCheck {
    let selector = &webhook.matcher.namespace_selector;
    let (labels_from, labels, result) = if selector.is_empty() {
        ("none needed (empty selector)", None, "match".to_string())
    } else {
        let select = |l: &BTreeMap<String, String>| {
            if selector.matches(l) {
                "match".to_string()
            } else {
                "no match".to_string()
            }
        };
        match namespace_labels(review, namespaces) {
            NamespaceLabels::ClusterScoped => (
                "none needed (cluster-scoped object, never excluded)",
                None,
                "match".to_string(),
            ),
            NamespaceLabels::Object(l) => {
                let result = select(&l);
                ("the Namespace object itself", Some(l), result)
            }
            NamespaceLabels::Stored(l) => ("--namespaces-file", Some(l.clone()), select(l)),
            NamespaceLabels::NotFound => (
                "namespace not found",
                None,
                format!(
                    "error: 404 namespaces {:?} not found (held back until a rule matches)",
                    review.request.namespace
                ),
            ),
            NamespaceLabels::Unavailable(reason) => (
                "namespace labels unavailable",
                None,
                format!("error: {reason} (failurePolicy decides once a rule matches)"),
            ),
        }
    };
    SelectorCheck {
        selector: selector.to_string(),
        labels_from,
        labels,
        result,
    }
}

/// objectSelector evidence: the labels of `object` and `oldObject` and the result
/// (`MatchObjectSelector` in `.../plugin/webhook/predicates/object/matcher.go`).
fn object_selector_check(webhook: &Webhook, review: &ParsedReview<'_>) -> ObjectSelectorCheck {
    let m = &webhook.matcher;
    let object = ObjectLabels::of(review.request.object);
    let old_object = ObjectLabels::of(review.request.old_object);
    let result = if m.object_selector_matches(&object, &old_object) {
        "match"
    } else {
        "no match"
    };
    ObjectSelectorCheck {
        selector: m.object_selector.to_string(),
        object: describe_labels(&object),
        old_object: describe_labels(&old_object),
        result,
    }
}

/// Each rule with `matched` or the first part that does not match (`Matcher.Matches` in
/// `.../plugin/webhook/predicates/rules/rules.go`).
fn rule_checks(webhook: &Webhook, input: &RuleInput<'_>) -> Vec<RuleCheck> {
    webhook
        .matcher
        .rules
        .iter()
        .map(|rule| RuleCheck {
            rule: rule.to_string(),
            result: match rule.mismatch(input) {
                None => "matched".to_string(),
                Some(part) => format!("{part} does not match"),
            },
        })
        .collect()
}

/// matchPolicy Equivalent only: the first rule of the proxy's registration that matches the
/// request exactly, `Some(None)` when none does.
fn registration_rule_check(
    webhook: &Webhook,
    snapshot: &Snapshot,
    input: &RuleInput<'_>,
) -> Option<Option<RegistrationRuleCheck>> {
    // Only Equivalent webhooks are registered with other rules than their own.
    (webhook.matcher.match_policy == MatchPolicy::Equivalent).then(|| {
        crate::tools::registration::rules_for(webhook, snapshot, None)
            .iter()
            .map(Rule::new)
            .enumerate()
            .find(|(_, rule)| rule.matches(input))
            .map(|(index, rule)| RegistrationRuleCheck {
                index,
                rule: rule.to_string(),
            })
    })
}

/// Each matchCondition's value or error and cost on the request as the webhook would receive
/// it (`.../plugin/webhook/matchconditions/matcher.go`), and the `authorizer` checks they make.
fn condition_checks(
    webhook: &Webhook,
    seen: &ParsedReview<'_>,
    authorize: Authorize<'_>,
) -> (Vec<ConditionCheck>, Vec<AuthorizationCheck>) {
    let conditions = &webhook.matcher.match_conditions;
    let (evaluations, asked) = if conditions.uses_authorizer() {
        let (mut decisions, asked) = ask(&webhook.matcher, seen, authorize);
        let (each, _) = authz::with_decisions(&mut decisions, || conditions.evaluate_each(seen));
        (each, asked)
    } else {
        (conditions.evaluate_each(seen), Vec::new())
    };
    let checks = checks_of(conditions, evaluations);
    (checks, asked.iter().map(authorization_check).collect())
}

/// Each condition with its evaluation: value or error, and cost.
fn checks_of(
    conditions: &MatchConditions,
    evaluations: Vec<ConditionEvaluation>,
) -> Vec<ConditionCheck> {
    conditions
        .iter()
        .zip(evaluations)
        .map(|(c, evaluation)| {
            let (value, error) = match evaluation.value {
                Ok(v) => (Some(v), None),
                Err(e) => (None, Some(e.to_string())),
            };
            ConditionCheck {
                name: c.name.clone(),
                expression: c.expression.clone(),
                value,
                error,
                cost: evaluation.cost,
            }
        })
        .collect()
}

/// How one check and its answer are shown.
fn authorization_check((key, decision): &(CheckKey, Decision)) -> AuthorizationCheck {
    let attributes = match &key.attributes {
        Attributes::Resource(r) => {
            let mut what = format!("{}/{}", r.group, r.resource);
            for (prefix, part) in [
                ("/", &r.subresource),
                (" in namespace ", &r.namespace),
                (" named ", &r.name),
                (" fieldSelector ", &r.field_selector),
                (" labelSelector ", &r.label_selector),
            ] {
                if !part.is_empty() {
                    let _ = write!(what, "{prefix}{part:?}");
                }
            }
            what
        }
        Attributes::NonResource(path) => format!("path {path:?}"),
    };
    let (result, reason) = match &decision.error {
        Some(e) => ("error", e.clone()),
        None if decision.allowed => ("allowed", decision.reason.clone()),
        None => ("denied", decision.reason.clone()),
    };
    AuthorizationCheck {
        user: key.user.username.clone(),
        verb: key.verb.clone(),
        attributes,
        result,
        reason,
    }
}

/// What a call would send: the URL with kube-apiserver's `?timeout=` (the dispatchers'
/// `callHook`), the negotiated version and the redacted body.
fn call_plan(
    webhook: &Webhook,
    seen: &ParsedReview<'_>,
    pending_conversion: bool,
    redact_paths: &[RedactPath],
) -> CallPlan {
    let timeout_seconds = webhook.timeout.as_secs();
    let version = webhook.review_version;
    CallPlan {
        admission_review_version: version.map(crate::review::ReviewVersion::api_version),
        url: format!("{}?timeout={timeout_seconds}s", webhook.backend.url),
        tls_server_name: webhook.backend.server_name.clone(),
        timeout_seconds,
        // The converted body is unknown until the conversion webhook answers.
        // Secret values redacted: explain output is pasted into tickets.
        body: version.filter(|_| !pending_conversion).and_then(|v| {
            let body = crate::redact::redacted_text(&seen.body_as(v), redact_paths);
            RawValue::from_string(body).ok()
        }),
    }
}

/// The `mode` option's name.
fn mode_name(mode: crate::config::options::Mode) -> &'static str {
    match mode {
        crate::config::options::Mode::Enforce => "Enforce",
        crate::config::options::Mode::Warn => "Warn",
        crate::config::options::Mode::Shadow => "Shadow",
    }
}

fn describe_labels(labels: &ObjectLabels) -> String {
    match labels {
        ObjectLabels::Null => "null".to_string(),
        ObjectLabels::NoMetadata => "no metadata".to_string(),
        ObjectLabels::Labels(l) if l.is_empty() => "no labels".to_string(),
        ObjectLabels::Labels(l) => l
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(","),
    }
}

/// The human-readable form: one block per webhook, the body last.
pub fn render(explanation: &Explanation) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "AdmissionReview {} (uid {}): {}",
        explanation.api_version, explanation.uid, explanation.request
    );
    if let Some(exclusion) = &explanation.exclusion {
        render_exclusion(&mut out, exclusion);
    }
    for w in &explanation.webhooks {
        let _ = writeln!(
            out,
            "\nwebhook {:?} ({} configuration {:?}): {} ({})",
            w.name,
            w.webhook_type,
            w.configuration,
            w.verdict.to_uppercase(),
            w.reason
        );
        render_selectors(&mut out, w);
        render_rules(&mut out, w);
        render_conditions(&mut out, w);
        render_options(&mut out, w);
        if let Some(call) = &w.call {
            render_call(&mut out, call, w.on_call_failure);
        }
        for c in &w.candidates {
            let _ = writeln!(
                out,
                "  candidate {:?} ({}, {}): {}",
                c.name, c.kind, c.source, c.decides
            );
        }
    }
    if let Some(captured) = &explanation.captured_comparison {
        render_captured(&mut out, captured);
    }
    for chain in &explanation.chains {
        let _ = writeln!(
            out,
            "\nchain {} ({} configuration {:?}): {}",
            chain.route, chain.webhook_type, chain.configuration, chain.dispatch
        );
        for (i, step) in chain.webhooks.iter().enumerate() {
            let again = if step.reinvoked_if_needed {
                " (reinvocationPolicy IfNeeded)"
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "  {}. {:?}: {}{again}",
                i + 1,
                step.name,
                step.verdict.to_uppercase()
            );
        }
    }
    out
}

/// A captured disagreement: the legacy webhook's and the candidate's decisions side by side.
fn render_captured(out: &mut String, captured: &CapturedComparison) {
    let c = &captured.comparison;
    let side = |key: &str| {
        let s = &c[key];
        let mut words = s["decision"].as_str().unwrap_or("?").to_string();
        if let Some(code) = s["code"].as_i64() {
            let _ = write!(words, " {code}");
        }
        if let Some(reason) = s["reason"].as_str() {
            let _ = write!(words, " {reason}");
        }
        if let Some(m) = s["message"].as_str() {
            let _ = write!(words, ": {m}");
        }
        if let Some(v) = s["validation"].as_str() {
            let _ = write!(words, " (failing validation {v})");
        }
        if let Some(e) = s["error"].as_str() {
            let _ = write!(words, " (decided by failurePolicy on the error: {e})");
        }
        if let Some(a) = s["auditAnnotations"].as_object() {
            for (key, value) in a {
                let _ = write!(
                    words,
                    " (audit annotation {key}: {})",
                    value.as_str().unwrap_or("")
                );
            }
        }
        if let Some(w) = s["warnings"].as_array() {
            let w: Vec<&str> = w.iter().filter_map(|v| v.as_str()).collect();
            let _ = write!(words, " (warnings: {})", w.join("; "));
        }
        if let Some(ops) = s["patch"].as_str() {
            let _ = write!(words, " (patch: {ops})");
        }
        words
    };
    let differences: Vec<&str> = c["differences"]
        .as_array()
        .map(|d| d.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "\ncaptured disagreement of candidate {:?} with webhook {:?} (differs in: {}):",
        c["name"].as_str().unwrap_or(""),
        captured.webhook,
        differences.join(", ")
    );
    let _ = writeln!(out, "  legacy webhook: {}", side("legacy"));
    let _ = writeln!(out, "  candidate:      {}", side("candidate"));
}

/// The proxy-wide exclusions' verdict, then a line per exclusion matchCondition.
fn render_exclusion(out: &mut String, exclusion: &ExclusionCheck) {
    match &exclusion.reason {
        Some(reason) => {
            let _ = writeln!(
                out,
                "\nexempt by proxy exclusion: {reason}: answered allowed at once, no webhook is called (below: what each would decide without the exclusion)"
            );
        }
        None => {
            let _ = writeln!(
                out,
                "\nproxy exclusions ({}): none applies",
                exclusion.configured
            );
        }
    }
    for c in &exclusion.match_conditions {
        let result = match (&c.value, &c.error) {
            (Some(v), _) => v.clone(),
            (None, Some(e)) => format!("error: {e} (exempts nothing)"),
            (None, None) => String::new(),
        };
        let cost = c.cost.map(|n| format!(" (cost {n})")).unwrap_or_default();
        let _ = writeln!(
            out,
            "  exclusion matchCondition {:?}: {} -> {result}{cost}",
            c.name, c.expression
        );
    }
}

/// The namespaceSelector and objectSelector lines.
fn render_selectors(out: &mut String, w: &WebhookExplanation) {
    let ns = &w.namespace_selector;
    let labels = ns
        .labels
        .as_ref()
        .map(|l| {
            let text: Vec<String> = l.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!(" [{}]", text.join(","))
        })
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "  namespaceSelector {}: {} (labels: {}{labels})",
        ns.selector, ns.result, ns.labels_from
    );
    let os = &w.object_selector;
    let _ = writeln!(
        out,
        "  objectSelector {}: {} (object: {}; oldObject: {})",
        os.selector, os.result, os.object, os.old_object
    );
}

/// A line per rule, then the registration rule's (matchPolicy Equivalent only).
fn render_rules(out: &mut String, w: &WebhookExplanation) {
    for (i, rule) in w.rules.iter().enumerate() {
        let _ = writeln!(out, "  rule {i}: {} -> {}", rule.rule, rule.result);
    }
    match &w.registration_rule {
        Some(Some(r)) => {
            let _ = writeln!(
                out,
                "  registration rule {}: {} -> matched exactly: kube-apiserver calls the proxy with the caller's version",
                r.index, r.rule
            );
        }
        Some(None) => {
            let _ = writeln!(out, "  registration: no rule matches exactly: kube-apiserver calls the proxy only if it converts to a registered version itself");
        }
        None => {}
    }
}

/// A line per matchCondition: its value or error, and its cost when it ran.
fn render_conditions(out: &mut String, w: &WebhookExplanation) {
    for c in &w.match_conditions {
        let result = match (&c.value, &c.error) {
            (Some(v), _) => v.clone(),
            (None, Some(e)) => format!("error: {e}"),
            (None, None) => String::new(),
        };
        let cost = c.cost.map(|n| format!(" (cost {n})")).unwrap_or_default();
        let _ = writeln!(
            out,
            "  matchCondition {:?}: {} -> {result}{cost}",
            c.name, c.expression
        );
    }
    for a in &w.authorization_checks {
        let reason = if a.reason.is_empty() {
            String::new()
        } else {
            format!(": {}", a.reason)
        };
        let _ = writeln!(
            out,
            "  authorizer check: may {:?} {} {}? -> {}{reason}",
            a.user, a.verb, a.attributes, a.result
        );
    }
}

/// failurePolicy, then the proxy's options that change what a call does (mode other than
/// Enforce, maxConcurrentCalls).
fn render_options(out: &mut String, w: &WebhookExplanation) {
    let _ = writeln!(
        out,
        "  failurePolicy {}: if the call fails, {}",
        w.failure_policy, w.on_call_failure
    );
    match w.mode {
        "Warn" => {
            let _ = writeln!(out, "  mode Warn: the backend's answer is not applied: a denial is answered allowed with a warning, a patch is dropped");
        }
        "Shadow" => {
            let _ = writeln!(out, "  mode Shadow: answered allowed at once; the backend is called in the background and its decision only logged and counted");
        }
        _ => {}
    }
    if let Some(n) = w.max_concurrent_calls {
        let _ = writeln!(
            out,
            "  maxConcurrentCalls {n}: a call that finds no free slot is answered by failurePolicy"
        );
    }
}

/// The call: the version, URL, timeout and body sent, or why none can be.
fn render_call(out: &mut String, call: &CallPlan, on_call_failure: &str) {
    match (&call.admission_review_version, &call.body) {
        (Some(version), Some(body)) => {
            let server_name = call
                .tls_server_name
                .as_ref()
                .map(|n| format!(", TLS server name {n}"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "  sends AdmissionReview {version} to {} (timeout {}s{server_name}):\n    {}",
                call.url,
                call.timeout_seconds,
                body.get()
            );
        }
        _ => {
            let _ = writeln!(
                out,
                "  no AdmissionReview version the proxy speaks: the call fails ({on_call_failure})"
            );
        }
    }
}
