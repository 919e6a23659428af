//! Candidates: `admission-proxy.io/v1alpha1` `Candidate` objects in the configuration
//! directory, each attaching a replacement to one legacy webhook. The replacement decides in
//! the background, on the requests the legacy webhook is called for, and the two decisions are
//! compared (`admission::candidates`); the legacy webhook's answer is what kube-apiserver gets.
//!
//! ```yaml
//! apiVersion: admission-proxy.io/v1alpha1
//! kind: Candidate
//! metadata: {name: pods-v2}
//! spec:
//!   webhook: pods.example.com        # webhooks[].name of the legacy webhook
//!   webhookType: Validating          # only when a mutating webhook has the same name
//!   backend:                         # a mirrored backend ...
//!     clientConfig: {url: "https://pods-v2.example.com/validate", caBundle: "..."}
//!     admissionReviewVersions: [v1]
//!     timeoutSeconds: 10
//!   # policy: {name: pods-policy}     # ... or a ValidatingAdmissionPolicy in the directory
//! ```
//!
//! Decoded strictly (unknown fields refused), like the webhook configurations; every problem
//! names its file, document and field, and refuses the whole load (the last good
//! configuration keeps serving).

use std::path::PathBuf;
use std::sync::Arc;

use super::{Backends, Problem, Webhook};
use crate::api::{self, WebhookType};
use crate::field_error::{BadValue, Error as FieldError, ErrorType};
use crate::metrics::WebhookMetrics;

/// The candidate kind's `apiVersion`.
pub const API_VERSION: &str = "admission-proxy.io/v1alpha1";

/// One compiled candidate, attached to its legacy webhook ([`Webhook::candidates`]).
#[derive(Debug)]
pub struct Candidate {
    /// `metadata.name`: the `candidate` label of its metrics.
    pub name: String,
    /// The file it was loaded from.
    pub(crate) source: PathBuf,
    /// What decides.
    pub(crate) kind: CandidateKind,
}

/// What a candidate is.
#[derive(Debug)]
pub(crate) enum CandidateKind {
    /// A mirrored backend: the legacy webhook's selection (rules, selectors, matchPolicy,
    /// matchConditions, failurePolicy, sideEffects) with the candidate's `clientConfig`,
    /// `admissionReviewVersions` and `timeoutSeconds`, run through the same pipeline.
    Backend(Arc<Webhook>),
    /// A ValidatingAdmissionPolicy with its bindings, evaluated in the proxy.
    Policy(Arc<crate::policy::Policy>),
}

impl Candidate {
    /// A backend candidate's backend (its pool key: what its circuit breaker is found by);
    /// `None` for a policy.
    pub(crate) fn backend_pool_key(&self) -> Option<u64> {
        match &self.kind {
            CandidateKind::Backend(webhook) => Some(webhook.backend.pool_key),
            CandidateKind::Policy(_) => None,
        }
    }

    /// `backend` or `policy`: the `kind` label of reports.
    pub(crate) fn kind_str(&self) -> &'static str {
        match self.kind {
            CandidateKind::Backend(_) => "backend",
            CandidateKind::Policy(_) => "policy",
        }
    }
}

/// A candidate as decoded, waiting for every webhook and policy of the load.
pub(super) struct Declared {
    base: Problem,
    prefix: String,
    object: api::CandidateObject,
}

/// Decodes one `Candidate` document (strictly); `None`, with the problem in `errors`, when it
/// cannot be.
pub(super) fn decode(
    value: &serde_json::Value,
    prefix: &str,
    base: &Problem,
    errors: &mut Vec<Problem>,
) -> Option<Declared> {
    let base = Problem {
        kind: Some("Candidate".into()),
        configuration: value
            .pointer("/metadata/name")
            .and_then(|n| n.as_str())
            .map(str::to_string),
        ..base.clone()
    };
    let object: api::CandidateObject = match serde_path_to_error::deserialize(value) {
        Ok(object) => object,
        Err(e) => {
            errors.push(Problem {
                field: format!("{prefix}{}", e.path()),
                message: e.into_inner().to_string(),
                ..base
            });
            return None;
        }
    };
    let before = errors.len();
    let mut bad = |error: FieldError| errors.push(base.located(error.prefixed(prefix)));
    if object.api_version != API_VERSION {
        bad(FieldError::not_supported(
            "apiVersion",
            &object.api_version,
            &[API_VERSION],
        ));
    }
    if !crate::names::is_dns1123_subdomain(&object.metadata.name) {
        bad(FieldError::invalid(
            "metadata.name",
            &object.metadata.name,
            "a candidate name must be a DNS-1123 subdomain",
        ));
    }
    let spec = &object.spec;
    if spec.webhook.is_empty() {
        bad(FieldError::required(
            "spec.webhook",
            "the legacy webhook's webhooks[].name",
        ));
    }
    if let Some(t) = spec.webhook_type.as_deref() {
        if !matches!(t, "Validating" | "Mutating") {
            bad(FieldError::not_supported(
                "spec.webhookType",
                t,
                &["Validating", "Mutating"],
            ));
        }
    }
    match (&spec.backend, &spec.policy) {
        (Some(_), None) | (None, Some(_)) => {}
        _ => bad(FieldError::new(
            ErrorType::Invalid,
            "spec",
            BadValue::Omitted,
            "exactly one of backend or policy must be set",
        )),
    }
    (errors.len() == before).then(|| Declared {
        base,
        prefix: prefix.to_string(),
        object,
    })
}

/// Resolves each declared candidate's legacy webhook among `compiled`, compiles it, and
/// attaches it there. `policy` compiles a policy candidate from the referenced
/// ValidatingAdmissionPolicy's name (`Err`: the problems, field paths relative to the
/// candidate).
pub(super) fn attach(
    declared: Vec<Declared>,
    compiled: &mut [Webhook],
    backends: &mut Backends,
    mut policy: impl FnMut(&str) -> Result<Arc<crate::policy::Policy>, Vec<FieldError>>,
    errors: &mut Vec<Problem>,
    warnings: &mut Vec<Problem>,
) {
    let mut names = std::collections::HashSet::new();
    for Declared {
        base,
        prefix,
        object,
    } in declared
    {
        let located = |error: FieldError| base.located(error.prefixed(&prefix));
        if !names.insert(object.metadata.name.clone()) {
            errors.push(located(FieldError::duplicate(
                "metadata.name",
                object.metadata.name.as_str(),
            )));
            continue;
        }
        let legacy = match legacy_index(compiled, &object.spec) {
            Ok(i) => i,
            Err(e) => {
                errors.push(located(e));
                continue;
            }
        };
        // Problems as `(field relative to the candidate, message)`.
        let kind =
            match (&object.spec.backend, &object.spec.policy) {
                (Some(backend), _) => mirrored(&compiled[legacy], backend, &object, backends)
                    .map(|w| CandidateKind::Backend(Arc::new(w))),
                (None, Some(reference)) => policy(&reference.name)
                    .map(CandidateKind::Policy)
                    .map_err(|problems| {
                        let at = |e: FieldError| super::field_problem(e.prefixed("spec.policy."));
                        problems.into_iter().map(at).collect()
                    }),
                (None, None) => continue,
            };
        if let Ok(CandidateKind::Policy(p)) = &kind {
            for message in scope_differences(&compiled[legacy], p) {
                warnings.push(Problem {
                    field: format!("{prefix}spec.policy"),
                    message,
                    ..base.clone()
                });
            }
        }
        match kind {
            Ok(kind) => compiled[legacy].candidates.push(Arc::new(Candidate {
                name: object.metadata.name.clone(),
                source: base.file.clone(),
                kind,
            })),
            Err(problems) => errors.extend(problems.into_iter().map(|(field, message)| Problem {
                field: format!("{prefix}{field}"),
                message,
                ..base.clone()
            })),
        }
    }
}

/// Resources a scope comparison probes besides those the legacy rules name: the core
/// resources and one version of every resource of the equivalence table.
const CORE_RESOURCES: [&str; 15] = [
    "pods",
    "services",
    "configmaps",
    "secrets",
    "namespaces",
    "nodes",
    "serviceaccounts",
    "persistentvolumeclaims",
    "persistentvolumes",
    "replicationcontrollers",
    "endpoints",
    "events",
    "limitranges",
    "resourcequotas",
    "podtemplates",
];

/// Where the policy's rules (matchConstraints and bindings) and the legacy webhook's rules
/// select different requests, by group/version/resource and operation, each way: what the
/// legacy webhook is called for and the policy does not cover gets no verdict after the
/// cut-over; what the policy covers and the legacy webhook never sees is never compared and
/// gets a new verdict. Selectors, resourceNames and matchPolicy's equivalents aside: the rules
/// are compared on the resources the legacy rules name and the built-in ones.
///
/// Over 80 lines: the probe set, the two matchers and the two-way comparison read best
/// together; each step is a few lines.
fn scope_differences(legacy: &Webhook, policy: &crate::policy::Policy) -> Vec<String> {
    use crate::matching::RuleInput;
    use crate::review::{GroupVersionResource, Operation};
    use std::collections::BTreeMap;
    let mut targets: std::collections::BTreeSet<(String, String, String)> = CORE_RESOURCES
        .iter()
        .map(|r| (String::new(), "v1".to_string(), r.to_string()))
        .collect();
    for e in crate::resources::equivalence::EQUIVALENCES {
        let (g, v) = e.versions[0];
        targets.insert((g.to_string(), v.to_string(), e.resource.to_string()));
    }
    for rule in &legacy.spec.rules {
        for g in rule.api_groups.iter().filter(|g| *g != "*") {
            for v in rule.api_versions.iter().filter(|v| *v != "*") {
                for r in rule.resources.iter().filter(|r| !r.contains('*')) {
                    let r = r.split('/').next().unwrap_or(r);
                    targets.insert((g.clone(), v.clone(), r.to_string()));
                }
            }
        }
    }
    let operations = [
        (Operation::Create, "CREATE"),
        (Operation::Update, "UPDATE"),
        (Operation::Delete, "DELETE"),
        (Operation::Connect, "CONNECT"),
    ];
    // Resource -> operations, each way.
    let mut missing: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    let mut extra: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for (g, v, r) in &targets {
        let resource = GroupVersionResource {
            group: g.as_str().into(),
            version: v.as_str().into(),
            resource: r.as_str().into(),
        };
        for (operation, word) in operations {
            // Namespaced or cluster-scoped: either counts.
            let selects = |f: &dyn Fn(&RuleInput<'_>) -> bool| {
                ["ns", ""].iter().any(|namespace| {
                    f(&RuleInput {
                        operation,
                        resource: &resource,
                        sub_resource: "",
                        namespace,
                    })
                })
            };
            let by_legacy = selects(&|i| legacy.matcher.rules.iter().any(|rule| rule.matches(i)));
            let by_policy = selects(&|i| policy.rules_select(i));
            let name = format!("{}/{v} {r}", if g.is_empty() { "core" } else { g });
            match (by_legacy, by_policy) {
                (true, false) => missing.entry(name).or_default().push(word),
                (false, true) => extra.entry(name).or_default().push(word),
                _ => {}
            }
        }
    }
    let list = |found: &BTreeMap<String, Vec<&str>>| {
        let mut shown: Vec<String> = found
            .iter()
            .take(8)
            .map(|(r, ops)| format!("{r} ({})", ops.join(", ")))
            .collect();
        if found.len() > 8 {
            shown.push(format!("and {} more", found.len() - 8));
        }
        shown.join(", ")
    };
    let mut out = Vec::new();
    if !missing.is_empty() {
        out.push(format!(
            "ValidatingAdmissionPolicy {:?} does not cover requests its legacy webhook {:?} is called for: {}; after the cut-over they get no verdict from it",
            policy.name(),
            legacy.name,
            list(&missing)
        ));
    }
    if !extra.is_empty() {
        out.push(format!(
            "ValidatingAdmissionPolicy {:?} covers requests its legacy webhook {:?} is never called for: {}; they are never compared, and get a new verdict after the cut-over",
            policy.name(),
            legacy.name,
            list(&extra)
        ));
    }
    out
}

/// Where the candidate's legacy webhook is among `compiled`.
fn legacy_index(compiled: &[Webhook], spec: &api::CandidateSpec) -> Result<usize, FieldError> {
    let wanted = |w: &Webhook| match spec.webhook_type.as_deref() {
        Some("Validating") => w.webhook_type == WebhookType::Validating,
        Some("Mutating") => w.webhook_type == WebhookType::Mutating,
        _ => true,
    };
    let found: Vec<usize> = (0..compiled.len())
        .filter(|&i| compiled[i].name == spec.webhook && wanted(&compiled[i]))
        .collect();
    match found.as_slice() {
        [i] => Ok(*i),
        [] => Err(FieldError::new(
            ErrorType::NotFound,
            "spec.webhook",
            BadValue::from(spec.webhook.as_str()),
            "no webhook of that name (and type) is in the configuration directory",
        )),
        _ => Err(FieldError::required(
            "spec.webhookType",
            format!(
                "both a validating and a mutating webhook are named {:?}: say which",
                spec.webhook
            ),
        )),
    }
}

/// The mirrored backend's webhook: the legacy webhook's selection, defaults written out as
/// the legacy webhook has them, with the candidate's `clientConfig`,
/// `admissionReviewVersions` and `timeoutSeconds` (validated as a v1 webhook's are). Mode
/// Enforce whatever `--default-mode` says: the candidate's own decision is what is compared.
fn mirrored(
    legacy: &Webhook,
    backend: &api::CandidateBackend,
    object: &api::CandidateObject,
    backends: &mut Backends,
) -> Result<Webhook, super::FieldProblems> {
    let mutating = legacy.webhook_type == WebhookType::Mutating;
    let spec = api::Webhook {
        client_config: backend.client_config.clone(),
        admission_review_versions: backend.admission_review_versions.clone(),
        timeout_seconds: backend.timeout_seconds,
        failure_policy: Some(legacy.failure_policy().as_str().into()),
        match_policy: Some(legacy.matcher.match_policy.as_str().into()),
        side_effects: Some(legacy.side_effects.as_str().into()),
        reinvocation_policy: mutating.then(|| legacy.reinvocation_policy.as_str().into()),
        ..legacy.spec.clone()
    };
    match super::compile_webhook(&spec, false, legacy.webhook_type, backends) {
        Ok((webhook, _warnings)) => Ok(Webhook {
            configuration: legacy.configuration.clone(),
            index: legacy.index,
            source: legacy.source.clone(),
            mode: Some(super::options::Mode::Enforce),
            // Its own series: the legacy webhook's are not touched by its calls.
            metrics: WebhookMetrics::new(
                &format!("{}~candidate~{}", legacy.name, object.metadata.name),
                legacy.webhook_type.as_str(),
            ),
            ..webhook
        }),
        // The legacy webhook compiled: only the candidate's own fields can be wrong here.
        Err(problems) => Err(problems
            .into_iter()
            .map(|(field, message)| (format!("spec.backend.{field}"), message))
            .collect()),
    }
}
