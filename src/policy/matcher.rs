//! Whether a policy's `matchConstraints`, or a binding's `matchResources`, select a request:
//! `Matcher.Matches` and `matchesResourceRules` of
//! `staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/matching/matching.go`, reached
//! through `DefinitionMatches` / `BindingMatches` of `policy/generic/policy_matcher.go`.
//! Selectors and rules are compiled at load.

use std::sync::Arc;

use super::spec::{MatchResources, NamedRule};
use crate::matching::{namespace_selected, LabelSelector, NamespaceSelected, Namespaces};
use crate::matching::{ObjectLabels, Rule, RuleInput};
use crate::resources::custom::CustomResources;
use crate::resources::{equivalents, Equivalent};
use crate::review::{GroupVersionResource, ParsedReview};

/// One `NamedRuleWithOperations`, compiled.
#[derive(Debug)]
struct Named {
    rule: Rule,
    /// Empty: any name.
    resource_names: Vec<String>,
}

impl Named {
    /// The rule matches and the request's name is listed (an empty list lists every name; a
    /// request without a name, such as a CREATE with `generateName`, matches only the empty
    /// list, as upstream compares `attr.GetName()` as it is).
    fn matches(&self, input: &RuleInput<'_>, name: &str) -> bool {
        self.rule.matches(input)
            && (self.resource_names.is_empty() || self.resource_names.iter().any(|n| n == name))
    }
}

/// A compiled `MatchResources`.
#[derive(Debug)]
pub(crate) struct Constraints {
    namespace_selector: LabelSelector,
    object_selector: LabelSelector,
    resource_rules: Vec<Named>,
    exclude_resource_rules: Vec<Named>,
    /// matchPolicy Equivalent: equivalent resources are tried after the request's own.
    equivalent: bool,
}

/// What [`Constraints::matches`] decided.
#[derive(Debug)]
pub(crate) enum Match {
    /// Not selected.
    No,
    /// Selected through the request's own resource (`None`) or an equivalent one (matchPolicy
    /// Equivalent): the resource and kind the expressions see.
    Yes(Option<Equivalent>),
    /// A selector could not be decided on a request a rule selects: the namespace does not
    /// exist (`namespaces "x" not found`, as `MatchNamespaceSelector` returns it).
    Error(String),
    /// The proxy does not know the namespace's labels (its namespace watch is not synced):
    /// why. kube-apiserver always knows them, so this is undecided rather than an error.
    Unavailable(String),
}

impl Constraints {
    /// Compiles defaulted, validated match resources: a selector the validation refused
    /// (`validate_label_selector`) has already failed the policy and compiles as the empty
    /// one here.
    pub(crate) fn compile(m: &MatchResources) -> Self {
        let selector = |s| LabelSelector::compile(s).unwrap_or_default();
        let namespace_selector = selector(m.namespace_selector.as_ref());
        let object_selector = selector(m.object_selector.as_ref());
        let named = |rules: &[NamedRule]| {
            rules
                .iter()
                .map(|r| Named {
                    rule: Rule::new(&r.rule()),
                    resource_names: r.resource_names.clone(),
                })
                .collect()
        };
        Constraints {
            namespace_selector,
            object_selector,
            resource_rules: named(&m.resource_rules),
            exclude_resource_rules: named(&m.exclude_resource_rules),
            equivalent: m.match_policy.as_deref() != Some("Exact"),
        }
    }

    /// Whether the rules alone select `input` (any name; selectors and matchPolicy's
    /// equivalents aside): excludeResourceRules first, then resourceRules (none: every
    /// resource). For `check`'s scope comparison with a legacy webhook's rules.
    pub(crate) fn rules_select(&self, input: &RuleInput<'_>) -> bool {
        let any = |rules: &[Named]| rules.iter().any(|n| n.rule.matches(input));
        !any(&self.exclude_resource_rules)
            && (self.resource_rules.is_empty() || any(&self.resource_rules))
    }

    /// `Matcher.Matches`: namespaceSelector and objectSelector (their errors held back),
    /// excludeResourceRules, resourceRules (none: every resource), then the held-back errors.
    pub(crate) fn matches(
        &self,
        review: &ParsedReview<'_>,
        namespaces: Option<&Namespaces>,
        custom: &CustomResources,
    ) -> Match {
        let (ns_matches, held_back) = self.namespace_matches(review, namespaces);
        if !ns_matches && held_back.is_none() {
            return Match::No;
        }
        if !self.object_matches(review) {
            return Match::No;
        }
        if self
            .resource_rules_match(&self.exclude_resource_rules, review, custom)
            .is_some()
        {
            return Match::No;
        }
        let matched = if self.resource_rules.is_empty() {
            Some(None)
        } else {
            self.resource_rules_match(&self.resource_rules, review, custom)
        };
        match (matched, held_back) {
            (None, _) => Match::No,
            (Some(_), Some(held_back)) => held_back,
            (Some(equivalent), None) => Match::Yes(equivalent),
        }
    }

    /// `MatchNamespaceSelector`: `(matches, error held back until a rule matches)`.
    fn namespace_matches(
        &self,
        review: &ParsedReview<'_>,
        namespaces: Option<&Namespaces>,
    ) -> (bool, Option<Match>) {
        match namespace_selected(&self.namespace_selector, review, namespaces) {
            NamespaceSelected::Yes => (true, None),
            NamespaceSelected::No => (false, None),
            NamespaceSelected::NotFound => (
                false,
                Some(Match::Error(namespace_not_found(&review.request.namespace))),
            ),
            NamespaceSelected::Unavailable(why) => (false, Some(Match::Unavailable(why))),
        }
    }

    /// `MatchObjectSelector`: `object` or `oldObject` matching is enough; a null object or one
    /// without metadata does not match.
    fn object_matches(&self, review: &ParsedReview<'_>) -> bool {
        self.object_selector.is_empty()
            || [review.request.object, review.request.old_object]
                .into_iter()
                .any(|raw| ObjectLabels::of(raw).matches(&self.object_selector))
    }

    /// `matchesResourceRules`: the request's own resource first against every rule, then
    /// (matchPolicy Equivalent) each rule against each equivalent resource. `Some(None)`: the
    /// own resource; `Some(Some(e))`: equivalent `e`; `None`: no match.
    fn resource_rules_match(
        &self,
        rules: &[Named],
        review: &ParsedReview<'_>,
        custom: &CustomResources,
    ) -> Option<Option<Equivalent>> {
        let request = &review.request;
        let input = RuleInput {
            operation: review.operation,
            resource: request.effective_resource(),
            sub_resource: request.effective_sub_resource(),
            namespace: &request.namespace,
        };
        let name = &*request.name;
        if rules.iter().any(|r| r.matches(&input, name)) {
            return Some(None);
        }
        if !self.equivalent {
            return None;
        }
        let r = input.resource;
        let custom = custom.equivalents(&r.group, &r.version, &r.resource, input.sub_resource);
        rules
            .iter()
            .find_map(|rule| {
                let builtin = equivalents(&r.group, &r.version, &r.resource, input.sub_resource);
                builtin.chain(custom.iter().cloned()).find(|e| {
                    let gvr = GroupVersionResource {
                        group: (&*e.group).into(),
                        version: (&*e.version).into(),
                        resource: (&*e.resource).into(),
                    };
                    rule.matches(
                        &RuleInput {
                            resource: &gvr,
                            ..input
                        },
                        name,
                    )
                })
            })
            .map(Some)
    }
}

/// kube-apiserver's NotFound message for a namespace.
pub(crate) fn namespace_not_found(namespace: &str) -> String {
    format!("namespaces {namespace:?} not found")
}

/// The custom resources a policy matches through (none unless the loader says otherwise).
pub(crate) fn no_custom_resources() -> Arc<CustomResources> {
    Arc::new(CustomResources::default())
}
