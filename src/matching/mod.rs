//! Whether kube-apiserver would call a webhook for a request: `ShouldCallHook` of
//! `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/generic/webhook.go`; upstream
//! paths below are relative to that `plugin/webhook/` directory.
//! Depends on `api`, `review`, `resources` and `names`; everything here is compiled at config
//! load.

pub mod authz;
pub mod cel_env;
pub(crate) mod cel_json;
pub mod cel_limits;
pub(crate) mod cel_names;
pub(crate) mod cel_two_var;
pub(crate) mod cel_types;
pub(crate) mod conditions;
pub(crate) mod cost;
pub(crate) mod namespaces;
pub mod re2;
pub(crate) mod rules;
pub mod selector;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;

use crate::api::{FailurePolicy, MatchPolicy};
use crate::resources::custom::CustomResources;
use crate::resources::{equivalents, Equivalent};
use crate::review::{Operation, ParsedReview, Status};
pub use conditions::Authorized;
pub(crate) use conditions::MAX_AUTHORIZATION_ROUNDS;
pub use conditions::{ConditionsResult, MatchCondition, MatchConditions};
pub use cost::CostModel;
pub use namespaces::Namespaces;
pub use rules::{Rule, RuleInput};
pub(crate) use selector::LabelSelector;

/// The selection part of one webhook, compiled.
#[derive(Debug)]
pub struct Matcher {
    pub(crate) rules: Vec<Rule>,
    pub(crate) namespace_selector: LabelSelector,
    pub(crate) object_selector: LabelSelector,
    /// The webhook's matchConditions, compiled (CEL).
    pub match_conditions: MatchConditions,
    /// Only consulted for matchCondition errors here (`matchconditions/matcher.go` `Match`):
    /// `ShouldCallHook` returns its other errors whatever failurePolicy says.
    pub(crate) failure_policy: FailurePolicy,
    /// Equivalent also tries the request's equivalent resources (second pass of
    /// `ShouldCallHook`).
    pub(crate) match_policy: MatchPolicy,
    /// The custom resources the configuration declares: their versions are equivalents too.
    pub(crate) custom_resources: Arc<CustomResources>,
}

/// Why a webhook is not called.
#[derive(Clone, Debug, PartialEq)]
pub enum SkipReason {
    /// The request's kind is an admission configuration kind
    /// (`predicates/rules/rules.go` `IsExemptAdmissionConfigurationResource`).
    ExemptKind,
    /// namespaceSelector does not match the request's namespace labels.
    NamespaceSelector,
    /// objectSelector matches neither `object` nor `oldObject`.
    ObjectSelector,
    /// No rule matches the request (nor, under Equivalent, any equivalent resource).
    NoRuleMatched,
    /// A matchCondition evaluated to false; its name.
    MatchCondition(String),
    /// matchConditions errored and failurePolicy is Ignore; the aggregated error.
    MatchConditionErrorIgnored(String),
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SkipReason::ExemptKind => f.write_str("exempt admission configuration kind"),
            SkipReason::NamespaceSelector => f.write_str("namespaceSelector does not match"),
            SkipReason::ObjectSelector => f.write_str("objectSelector does not match"),
            SkipReason::NoRuleMatched => f.write_str("no rule matches"),
            SkipReason::MatchCondition(name) => write!(f, "matchCondition {name:?} is false"),
            SkipReason::MatchConditionErrorIgnored(e) => {
                write!(f, "matchConditions errored (failurePolicy Ignore): {e}")
            }
        }
    }
}

/// The outcome of selecting one webhook for one request: the selectors and rules of
/// `ShouldCallHook`, before any conversion and before matchConditions.
#[derive(Clone, Debug, PartialEq)]
pub enum MatchDecision {
    /// The selectors and a rule match the request as sent; matchConditions are next
    /// ([`Matcher::decide_conditions`] on this request).
    Call,
    /// The selectors match and a rule matches an equivalent resource (matchPolicy Equivalent):
    /// the request is converted to the invocation's version first, then matchConditions run on
    /// the converted request, as `ShouldCallHook` does (`request/admissionreview.go`
    /// `CreateV1AdmissionReview` builds what the webhook receives).
    CallEquivalent(Box<Equivalent>),
    /// The webhook is not called; the request is allowed as far as it is concerned.
    Skip(SkipReason),
    /// The request fails whatever failurePolicy says (namespace not found). The status
    /// kube-apiserver would return.
    Reject(Status),
    /// The namespace's labels could not be read (the proxy's namespace watch has not synced
    /// and the live lookup failed): decided by failurePolicy like a failed call, since the
    /// proxy, not the cluster, is missing information. The reason.
    NamespaceUnavailable(String),
}

/// What a webhook's matchConditions decide for the request the webhook would receive
/// (`matchconditions/matcher.go` `Match`, with failurePolicy applied to an error as
/// `ShouldCallHook` does).
#[derive(Clone, Debug, PartialEq)]
pub enum ConditionsVerdict {
    /// The webhook has no matchConditions: nothing was evaluated.
    None,
    /// Every condition is true: call.
    Match,
    /// A condition is false: skip ([`SkipReason::MatchCondition`]).
    Excluded(SkipReason),
    /// A condition errored and failurePolicy is Ignore: skip
    /// ([`SkipReason::MatchConditionErrorIgnored`]).
    ErrorIgnored(SkipReason),
    /// A condition errored and failurePolicy is Fail: kube-apiserver's 403 (`apierrors.NewForbidden`
    /// in `ShouldCallHook`).
    ErrorRejected(Status),
}

/// Labels of `object` / `oldObject`, or why there are none.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ObjectLabels {
    /// The object is null (oldObject on CREATE, object on DELETE).
    Null,
    /// No `metadata` member: `meta.Accessor` fails (e.g. `PodExecOptions`).
    NoMetadata,
    Labels(BTreeMap<String, String>),
}

impl ObjectLabels {
    /// Reads `metadata.labels` from a raw JSON object; absent labels are the empty set.
    pub(crate) fn of(raw: Option<&serde_json::value::RawValue>) -> Self {
        #[derive(Deserialize)]
        struct Obj {
            metadata: Option<Meta>,
        }
        #[derive(Deserialize)]
        struct Meta {
            #[serde(default)]
            labels: Option<BTreeMap<String, String>>,
        }
        let Some(raw) = raw else {
            return ObjectLabels::Null;
        };
        match serde_json::from_str::<Obj>(raw.get()) {
            Ok(Obj {
                metadata: Some(meta),
            }) => ObjectLabels::Labels(meta.labels.unwrap_or_default()),
            _ => ObjectLabels::NoMetadata,
        }
    }

    /// `matchObject` of the object matcher: false for null objects and objects without metadata.
    pub(crate) fn matches(&self, selector: &LabelSelector) -> bool {
        match self {
            ObjectLabels::Labels(labels) => selector.matches(labels),
            ObjectLabels::Null | ObjectLabels::NoMetadata => false,
        }
    }
}

impl Matcher {
    /// `ShouldCallHook` (`generic/webhook.go`) for one webhook up to matchConditions, in
    /// kube-apiserver's order: namespaceSelector, objectSelector, rules, held-back selector
    /// errors. matchPolicy Equivalent matches through equivalent resources (its second rule
    /// pass). Pure matching: the conversion an equivalent match needs, and matchConditions
    /// ([`Matcher::decide_conditions`]), are the caller's next steps.
    ///
    /// ```
    /// use admission_proxy::matching::{ConditionsVerdict, MatchDecision, SkipReason};
    /// use admission_proxy::review::ParsedReview;
    ///
    /// let config = r#"
    /// apiVersion: admissionregistration.k8s.io/v1
    /// kind: ValidatingWebhookConfiguration
    /// metadata: {name: configmaps}
    /// webhooks:
    /// - name: configmaps.example.com
    ///   clientConfig: {url: "https://127.0.0.1:18443/allow"}
    ///   rules: [{operations: ["CREATE"], apiGroups: [""], apiVersions: ["v1"], resources: ["configmaps"]}]
    ///   matchConditions: [{name: not-kube-system, expression: "request.namespace != 'kube-system'"}]
    ///   sideEffects: None
    ///   admissionReviewVersions: [v1]
    /// "#;
    /// let snapshot = admission_proxy::config::load_contents(&[("w.yaml".into(), config.into())])?;
    /// let matcher = &snapshot.webhook("configmaps.example.com").unwrap().matcher;
    /// let review = |namespace: &str, operation: &str| {
    ///     format!(r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{
    ///         "uid":"u","kind":{{"group":"","version":"v1","kind":"ConfigMap"}},
    ///         "resource":{{"group":"","version":"v1","resource":"configmaps"}},
    ///         "namespace":"{namespace}","operation":"{operation}","object":{{"metadata":{{}}}}}}}}"#)
    /// };
    ///
    /// let create = review("default", "CREATE");
    /// let create = ParsedReview::parse(create.as_bytes())?;
    /// assert!(matches!(matcher.decide(&create, None), MatchDecision::Call));
    /// assert!(matches!(matcher.decide_conditions(&create), ConditionsVerdict::Match));
    ///
    /// let delete = review("default", "DELETE");
    /// let delete = ParsedReview::parse(delete.as_bytes())?;
    /// assert!(matches!(
    ///     matcher.decide(&delete, None),
    ///     MatchDecision::Skip(SkipReason::NoRuleMatched)
    /// ));
    ///
    /// let system = review("kube-system", "CREATE");
    /// let system = ParsedReview::parse(system.as_bytes())?;
    /// assert!(matches!(
    ///     matcher.decide_conditions(&system),
    ///     ConditionsVerdict::Excluded(SkipReason::MatchCondition(name)) if name == "not-kube-system"
    /// ));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn decide(
        &self,
        review: &ParsedReview<'_>,
        namespaces: Option<&Namespaces>,
    ) -> MatchDecision {
        let request = &review.request;
        // Dispatch-level exemption, before any webhook is looked at (`generic/webhook.go`
        // `Dispatch`).
        if rules::is_exempt_admission_configuration(request.effective_kind()) {
            return MatchDecision::Skip(SkipReason::ExemptKind);
        }
        let (ns_matches, ns_error) = self.match_namespace_selector(review, namespaces);
        if !ns_matches && ns_error.is_none() {
            return MatchDecision::Skip(SkipReason::NamespaceSelector);
        }
        if !self.match_object_selector(review) {
            return MatchDecision::Skip(SkipReason::ObjectSelector);
        }
        let input = RuleInput {
            operation: review.operation,
            resource: request.effective_resource(),
            sub_resource: request.effective_sub_resource(),
            namespace: &request.namespace,
        };
        let invocation = if self.rules.iter().any(|rule| rule.matches(&input)) {
            None
        } else {
            match self.equivalent_match(&input) {
                Some(equivalent) => Some(equivalent),
                // Held-back selector errors are dropped when no rule matches (`ShouldCallHook`
                // returns before looking at them).
                None => return MatchDecision::Skip(SkipReason::NoRuleMatched),
            }
        };
        match ns_error {
            Some(HeldBack::Status(status)) => return MatchDecision::Reject(status),
            Some(HeldBack::Unavailable(reason)) => {
                return MatchDecision::NamespaceUnavailable(reason)
            }
            None => {}
        }
        match invocation {
            None => MatchDecision::Call,
            Some(invocation) => MatchDecision::CallEquivalent(Box::new(invocation)),
        }
    }

    /// The Equivalent pass of `ShouldCallHook`: rules in order, and for each the request's
    /// equivalent resources in registry order; the first match. `None` under Exact.
    pub(crate) fn equivalent_match(&self, input: &RuleInput<'_>) -> Option<Equivalent> {
        if self.match_policy != MatchPolicy::Equivalent {
            return None;
        }
        let r = input.resource;
        let custom = self.custom_resources.equivalents(
            &r.group,
            &r.version,
            &r.resource,
            input.sub_resource,
        );
        self.rules.iter().find_map(|rule| {
            let builtin = equivalents(&r.group, &r.version, &r.resource, input.sub_resource);
            builtin.chain(custom.iter().cloned()).find(|e| {
                let gvr = crate::review::GroupVersionResource {
                    group: (&*e.group).into(),
                    version: (&*e.version).into(),
                    resource: (&*e.resource).into(),
                };
                rule.matches(&RuleInput {
                    resource: &gvr,
                    ..*input
                })
            })
        })
    }

    /// The rest of `ShouldCallHook` after [`Matcher::decide`] answered call: matchConditions on
    /// `review`, the request as the webhook would receive it (converted, for
    /// [`MatchDecision::CallEquivalent`]).
    pub fn decide_conditions(&self, review: &ParsedReview<'_>) -> ConditionsVerdict {
        if self.match_conditions.is_empty() {
            return ConditionsVerdict::None;
        }
        self.conditions_verdict(review, self.match_conditions.evaluate(review))
    }

    /// What the conditions' `result` on `review` decides, failurePolicy applied to an error
    /// (`ShouldCallHook`); for results evaluated with authorization decisions
    /// ([`MatchConditions::evaluate_authorized`]).
    pub(crate) fn conditions_verdict(
        &self,
        review: &ParsedReview<'_>,
        result: ConditionsResult,
    ) -> ConditionsVerdict {
        match result {
            ConditionsResult::Match => ConditionsVerdict::Match,
            ConditionsResult::NoMatch { condition } => {
                ConditionsVerdict::Excluded(SkipReason::MatchCondition(condition))
            }
            ConditionsResult::Error(message) => match self.failure_policy {
                FailurePolicy::Ignore => {
                    ConditionsVerdict::ErrorIgnored(SkipReason::MatchConditionErrorIgnored(message))
                }
                FailurePolicy::Fail => {
                    ConditionsVerdict::ErrorRejected(forbidden(review, &message))
                }
            },
        }
    }

    /// Whether deciding `review` needs the labels of a namespace `namespaces` does not list:
    /// the case where kube-apiserver falls back from its cache to a live GET
    /// (`predicates/namespace/matcher.go` `Provider.GetNamespace`).
    pub(crate) fn namespace_missing(
        &self,
        review: &ParsedReview<'_>,
        namespaces: Option<&Namespaces>,
    ) -> bool {
        !self.namespace_selector.is_empty()
            && matches!(
                namespace_labels(review, namespaces),
                NamespaceLabels::NotFound | NamespaceLabels::Unavailable(_)
            )
    }

    /// `MatchNamespaceSelector` (`predicates/namespace/matcher.go`); returns
    /// `(matches, error held back)`.
    fn match_namespace_selector(
        &self,
        review: &ParsedReview<'_>,
        namespaces: Option<&Namespaces>,
    ) -> (bool, Option<HeldBack>) {
        match namespace_selected(&self.namespace_selector, review, namespaces) {
            NamespaceSelected::Yes => (true, None),
            NamespaceSelected::No => (false, None),
            NamespaceSelected::NotFound => (
                false,
                Some(HeldBack::Status(Status::failure(
                    404,
                    "NotFound",
                    format!("namespaces {:?} not found", review.request.namespace),
                ))),
            ),
            NamespaceSelected::Unavailable(why) => (false, Some(HeldBack::Unavailable(why))),
        }
    }

    /// `MatchObjectSelector` (`predicates/object/matcher.go`): either object or oldObject
    /// matching is enough.
    fn match_object_selector(&self, review: &ParsedReview<'_>) -> bool {
        if self.object_selector.is_empty() {
            return true;
        }
        let request = &review.request;
        self.object_selector_matches(
            &ObjectLabels::of(request.object),
            &ObjectLabels::of(request.old_object),
        )
    }

    /// objectSelector against both objects: either one matching is enough
    /// (`MatchObjectSelector`).
    pub(crate) fn object_selector_matches(
        &self,
        object: &ObjectLabels,
        old_object: &ObjectLabels,
    ) -> bool {
        self.object_selector.is_empty()
            || object.matches(&self.object_selector)
            || old_object.matches(&self.object_selector)
    }
}

/// A namespaceSelector error held back until a rule matches (`ShouldCallHook`).
enum HeldBack {
    Status(Status),
    Unavailable(String),
}

/// Where namespaceSelector reads a request's namespace labels from (`MatchNamespaceSelector`
/// and `GetNamespaceLabels`, `predicates/namespace/matcher.go`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum NamespaceLabels<'n> {
    /// A cluster-scoped object that is not a Namespace: namespaceSelector never excludes it.
    /// Only the resource *name* is tested, not the group, as `MatchNamespaceSelector` does.
    ClusterScoped,
    /// CREATE or UPDATE of a Namespace itself: the object's own labels (none if it has no
    /// metadata).
    Object(BTreeMap<String, String>),
    /// The namespace as stored: the `--namespaces-file` entry.
    Stored(&'n BTreeMap<String, String>),
    /// The namespace is not known: a 404 (`MatchNamespaceSelector`) held back until a rule
    /// matches.
    NotFound,
    /// The namespace is not known and the proxy could not find out whether it exists: why.
    Unavailable(&'n str),
}

/// What `MatchNamespaceSelector` (`predicates/namespace/matcher.go`) finds for `review`, shared
/// by webhooks and policies (upstream's one matcher); each caller words the errors its way.
#[derive(Debug, PartialEq)]
pub(crate) enum NamespaceSelected {
    /// Selected: an empty selector, a cluster-scoped object, or matching labels.
    Yes,
    /// The labels do not match.
    No,
    /// The namespace does not exist.
    NotFound,
    /// Its labels cannot be read: why, in full.
    Unavailable(String),
}

/// [`NamespaceSelected`] for `selector` on `review`.
pub(crate) fn namespace_selected(
    selector: &LabelSelector,
    review: &ParsedReview<'_>,
    namespaces: Option<&Namespaces>,
) -> NamespaceSelected {
    if selector.is_empty() {
        return NamespaceSelected::Yes;
    }
    let matched = |yes: bool| {
        if yes {
            NamespaceSelected::Yes
        } else {
            NamespaceSelected::No
        }
    };
    match namespace_labels(review, namespaces) {
        NamespaceLabels::ClusterScoped => NamespaceSelected::Yes,
        NamespaceLabels::Object(labels) => matched(selector.matches(&labels)),
        NamespaceLabels::Stored(labels) => matched(selector.matches(labels)),
        NamespaceLabels::NotFound => NamespaceSelected::NotFound,
        NamespaceLabels::Unavailable(reason) => NamespaceSelected::Unavailable(format!(
            "cannot read the labels of namespace {:?}: {reason}",
            review.request.namespace
        )),
    }
}

/// The labels namespaceSelector is matched against for `review`.
pub(crate) fn namespace_labels<'n>(
    review: &ParsedReview<'_>,
    namespaces: Option<&'n Namespaces>,
) -> NamespaceLabels<'n> {
    let request = &review.request;
    let resource = &request.effective_resource().resource;
    if request.namespace.is_empty() && resource != "namespaces" {
        return NamespaceLabels::ClusterScoped;
    }
    let own_labels = resource == "namespaces"
        && request.effective_sub_resource().is_empty()
        && matches!(review.operation, Operation::Create | Operation::Update);
    if own_labels {
        return match ObjectLabels::of(request.object) {
            ObjectLabels::Labels(labels) => NamespaceLabels::Object(labels),
            _ => NamespaceLabels::Object(BTreeMap::new()),
        };
    }
    match namespaces.map(|n| (n.labels(&request.namespace), n.unavailable_reason())) {
        Some((Some(labels), _)) => NamespaceLabels::Stored(labels),
        Some((None, Some(reason))) => NamespaceLabels::Unavailable(reason),
        _ => NamespaceLabels::NotFound,
    }
}

/// The 403 kube-apiserver returns for a matchCondition error under Fail:
/// `<resource>[.<group>] "<name>" is forbidden: <errors>` (`apierrors.NewForbidden` in
/// `ShouldCallHook`).
fn forbidden(review: &ParsedReview<'_>, message: &str) -> Status {
    let resource = review.request.effective_resource();
    let group_resource = if resource.group.is_empty() {
        resource.resource.to_string()
    } else {
        format!("{}.{}", resource.resource, resource.group)
    };
    Status::failure(
        403,
        "Forbidden",
        format!(
            "{group_resource} {:?} is forbidden: {message}",
            review.request.name
        ),
    )
}
