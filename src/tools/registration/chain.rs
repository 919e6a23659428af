//! `admission-proxy registration --chain`: one proxy webhook per legacy configuration, calling
//! the proxy's chain route `/configurations/{validating|mutating}/{configuration name}`, which
//! runs every webhook of that configuration as kube-apiserver's dispatchers would (validating
//! concurrently, mutating one after another with reinvocation). Depends on the parent module
//! (the per-webhook rules, `clientConfig`, metadata and the namespace exclusion), `api`,
//! `config` and `names`.
//!
//! The chain route re-applies each legacy webhook's own selection (`ShouldCallHook` in
//! `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/generic/webhook.go`:
//! namespaceSelector, objectSelector, rules with matchPolicy, then matchConditions) before
//! calling it. The chain's registration therefore only decides when kube-apiserver calls the
//! proxy at all: it may be wider than any one legacy webhook (a call for which no webhook is
//! selected is answered "allowed" by the proxy without a backend call), but never narrower
//! than any of them, or kube-apiserver would silently skip a webhook for a request the legacy
//! registration sent it. Every field follows from that (see [`chain_objects`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{json, Value};

use super::{
    client_config, configuration_object, excluding_namespace, rules_for, rules_with_defaults,
    webhook_types, Options,
};
use crate::api::{
    FailurePolicy, LabelSelector, LabelSelectorRequirement, MatchPolicy, ReinvocationPolicy,
    RuleWithOperations, SideEffects, WebhookType,
};
use crate::config::{Problem, Snapshot, Webhook};
use crate::names;
use crate::served::ServedResources;

/// Appended to a configuration's name to name its chain webhook: kube-apiserver wants webhook
/// names with at least three segments (`IsFullyQualifiedName`), and a configuration name may
/// have one.
pub const CHAIN_WEBHOOK_SUFFIX: &str = ".chain.admission-proxy.io";

/// The chain webhook's name for the configuration named `configuration`:
/// `<configuration>.chain.admission-proxy.io`.
pub fn chain_webhook_name(configuration: &str) -> String {
    format!("{configuration}{CHAIN_WEBHOOK_SUFFIX}")
}

/// The proxy's chain route for one configuration:
/// `/configurations/{validating|mutating}/{configuration}`. Configuration names are DNS-1123
/// subdomains (checked on load), so they need no escaping in a path.
pub fn chain_path(webhook_type: WebhookType, configuration: &str) -> String {
    format!("/configurations/{}/{configuration}", webhook_type.as_str())
}

/// The chain registration of every configuration of `snapshot` (see [`chain_objects`]) as a
/// multi-document YAML stream, validating first, each sorted by name.
///
/// # Errors
/// As [`chain_objects`].
pub fn render_chains(snapshot: &Snapshot, options: &Options) -> Result<String, Vec<Problem>> {
    let mut out = String::new();
    for object in chain_objects(snapshot, options)? {
        out.push_str("---\n");
        out.push_str(&serde_yaml_ng::to_string(&object).unwrap_or_default());
    }
    Ok(out)
}

/// One configuration per legacy configuration, named as `registration` names it (legacy name
/// plus `name_suffix`, same labels and annotations), holding one webhook:
///
/// - `name`: [`chain_webhook_name`]; denials read `admission webhook "<legacy
///   configuration>.chain.admission-proxy.io" denied the request: …`.
/// - `clientConfig`: the proxy's Service as for `registration`, path [`chain_path`].
/// - `rules`: the union of the rules each legacy webhook is registered with by `registration`
///   (its own for matchPolicy Exact, widened to every version the proxy converts from for
///   Equivalent, only served ones with `--discover`; `chain_rules`).
/// - `matchPolicy`: Equivalent if any legacy webhook is Equivalent, else Exact: kube-apiserver
///   then also calls the proxy for what an Equivalent webhook reaches through a version the
///   cluster serves, which Exact would miss.
/// - `namespaceSelector` and `objectSelector`: the requirements every webhook of the
///   configuration shares (the whole selector when they are all the same; `{}`, which
///   matches everything, when they share none): any one webhook's whole selector would leave
///   out what another webhook is called for, while a requirement they all have leaves out
///   nothing any of them gets (a shared kube-system exclusion stays). The namespaceSelector also excludes the proxy's own namespace, as
///   in `registration`, so that a proxy that is down never blocks its own pods.
/// - `timeoutSeconds`: the largest legacy timeout (defaults of the legacy version, lowered by
///   the `maxTimeoutSeconds` option, as the proxy applies it) plus one, at most 30: the proxy
///   gives each backend its own timeout and answers by the webhooks' failurePolicy before
///   kube-apiserver's deadline. Webhooks of a mutating chain are called one after another
///   and share this one budget (kube-apiserver gives each its own).
/// - `failurePolicy`: Fail unless every legacy webhook is Ignore. It only applies when the
///   proxy itself does not answer; a webhook with Fail must then not be admitted past.
/// - `sideEffects`: NoneOnDryRun if any legacy webhook has it, else None: the proxy refuses
///   dry-run requests itself for legacy `Unknown`/`Some` webhooks, as kube-apiserver would.
/// - `reinvocationPolicy` (mutating): IfNeeded if any legacy webhook has it, else Never. The
///   proxy reinvokes within the chain; IfNeeded here also lets kube-apiserver call the chain
///   again when a later configuration changes the object, as it would the legacy webhook
///   (the proxy then runs the whole chain again, Never webhooks included).
/// - `admissionReviewVersions`: `[v1, v1beta1]`; no `matchConditions` (the proxy evaluates
///   each webhook's).
///
/// Order: kube-apiserver calls configurations sorted by name, then each one's webhooks in list
/// order (`mergeMutatingWebhookConfigurations`/`mergeValidatingWebhookConfigurations`, in
/// newer releases `get…WebhookConfigurations`, in
/// `staging/src/k8s.io/apiserver/pkg/admission/configuration/{mutating,validating}_webhook_manager.go`:
/// `sort.SliceStable` by `…WebhookConfigurationSorter.ByName`, a byte comparison). A chain keeps its configuration's list order, and the chains
/// are named after their configurations, which keeps their order, except where one legacy name
/// starts with another (`a` and `a-ab` swap with the default suffix, as without `--chain`).
///
/// # Errors
/// One [`Problem`] (field `metadata.name` of the legacy configuration) per configuration whose
/// chain webhook name would not be a valid webhook name: longer than 253 characters, i.e. a
/// configuration name longer than 228. Nothing is returned then, so that a partial
/// registration is never applied.
pub fn chain_objects(snapshot: &Snapshot, options: &Options) -> Result<Vec<Value>, Vec<Problem>> {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for webhook_type in webhook_types(options) {
        for (configuration, webhooks) in snapshot.configurations(webhook_type) {
            // Retired whole (every webhook `registered: false`): left out, to be pruned. A
            // chain of which only some are retired still runs them all.
            if webhooks.iter().all(|w| !w.registered) {
                continue;
            }
            let refused = super::invalid_name(configuration, webhooks, options)
                .or_else(|| invalid_name(configuration, webhooks));
            if let Some(problem) = refused {
                problems.push(problem);
                continue;
            }
            let hook = chain_webhook(webhook_type, configuration, webhooks, snapshot, options);
            out.push(configuration_object(
                webhook_type,
                configuration,
                vec![hook],
                options,
            ));
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// The problem with the chain webhook name of `configuration`, if it is not a valid webhook
/// name. The configuration name is a DNS-1123 subdomain (checked on load), so only the length
/// can fail; kube-apiserver checks the whole name the same way (`IsFullyQualifiedName` in
/// `staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go`, from
/// `validateWebhook` in `pkg/apis/admissionregistration/validation/validation.go`), with no
/// limit on one label's length.
fn invalid_name(configuration: &str, webhooks: &[Arc<Webhook>]) -> Option<Problem> {
    let name = chain_webhook_name(configuration);
    if names::is_fully_qualified_name(&name) {
        return None;
    }
    let message = format!(
        "the chain webhook name {name:?} ({} characters) is not a valid webhook name (a DNS-1123 subdomain of at most 253 characters): a configuration registered as a chain may have at most {} characters; register it per webhook (without --chain)",
        name.len(),
        253 - CHAIN_WEBHOOK_SUFFIX.len()
    );
    let first = webhooks.first()?;
    Some(Problem::of_configuration(
        first,
        "metadata.name".to_string(),
        message,
    ))
}

/// The chain webhook of one configuration (`webhooks`, non-empty, in list order).
fn chain_webhook(
    webhook_type: WebhookType,
    configuration: &str,
    webhooks: &[Arc<Webhook>],
    snapshot: &Snapshot,
    options: &Options,
) -> Value {
    let any_equivalent = webhooks
        .iter()
        .any(|w| w.matcher.match_policy == MatchPolicy::Equivalent);
    let all_ignore = webhooks
        .iter()
        .all(|w| w.failure_policy() == FailurePolicy::Ignore);
    let side_effects = if webhooks
        .iter()
        .any(|w| w.side_effects == SideEffects::NoneOnDryRun)
    {
        "NoneOnDryRun"
    } else {
        "None"
    };
    // Never 0: `webhooks` is never empty; 10 s is v1's default.
    let longest = webhooks.iter().map(|w| w.timeout.as_secs()).max();
    let timeout = (longest.unwrap_or(10) + 1).min(30);
    let namespace_selector =
        shared_selector(webhooks.iter().map(|w| w.spec.namespace_selector.as_ref()));
    let mut hook = json!({
        "name": chain_webhook_name(configuration),
        "clientConfig": client_config(chain_path(webhook_type, configuration), options),
        "rules": chain_rules(webhooks, snapshot, options.served.as_ref()),
        "namespaceSelector": excluding_namespace(Some(&namespace_selector), &options.namespace),
        "objectSelector": shared_selector(webhooks.iter().map(|w| w.spec.object_selector.as_ref())),
        "matchPolicy": if any_equivalent { "Equivalent" } else { "Exact" },
        "failurePolicy": if all_ignore { "Ignore" } else { "Fail" },
        "sideEffects": side_effects,
        "timeoutSeconds": timeout,
        "admissionReviewVersions": ["v1", "v1beta1"],
    });
    if webhook_type == WebhookType::Mutating {
        let policy = webhooks
            .iter()
            .map(|w| w.reinvocation_policy)
            .find(|p| *p == ReinvocationPolicy::IfNeeded)
            .unwrap_or_default();
        hook["reinvocationPolicy"] = json!(policy.as_str());
    }
    hook
}

/// The rules of a chain registration: every rule `registration` registers for each of
/// `webhooks` (`rules_for`, with kube-apiserver's default scope `*` stated), in order of first
/// appearance, without the rules another one already covers ([`subsumes`]; identical rules
/// included). Each rule is kept whole, so each is as valid as in `registration`'s output; the
/// union matches every request any webhook's registration matches, and nothing else.
pub(crate) fn chain_rules(
    webhooks: &[Arc<Webhook>],
    snapshot: &Snapshot,
    served: Option<&ServedResources>,
) -> Vec<RuleWithOperations> {
    let mut out: Vec<RuleWithOperations> = Vec::new();
    for w in webhooks {
        for rule in rules_with_defaults(rules_for(w, snapshot, served)) {
            if out.iter().any(|kept| subsumes(kept, &rule)) {
                continue;
            }
            out.retain(|kept| !subsumes(&rule, kept));
            out.push(rule);
        }
    }
    out
}

/// Whether `a` matches every request `b` matches, as `rules.go`
/// (`staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules/rules.go`)
/// matches rules: each of operations, apiGroups and apiVersions holds `*` or every value of
/// `b`'s; `a`'s scope is `*` or `b`'s; every resource entry of `b` is matched by one of `a`'s.
/// A rule's matches are the cross product of its lists, so this is exact, not a guess.
fn subsumes(a: &RuleWithOperations, b: &RuleWithOperations) -> bool {
    let covers = |outer: &[String], inner: &[String]| {
        outer.iter().any(|s| s == "*") || inner.iter().all(|s| outer.contains(s))
    };
    covers(&a.operations, &b.operations)
        && covers(&a.api_groups, &b.api_groups)
        && covers(&a.api_versions, &b.api_versions)
        && (a.scope.as_deref().is_none_or(|s| s == "*") || a.scope == b.scope)
        && b.resources.iter().all(|entry| a.names_resource(entry))
}

/// The requirements every one of `selectors` has (a `matchLabels` entry, or a
/// `matchExpressions` requirement with the same key, operator and values in any order): a
/// selector is the conjunction of its requirements, so each legacy selector implies every
/// shared one, and the result is never narrower than any of them. Identical selectors come
/// out as they are; selectors with nothing in common give `{}`, which matches every object.
fn shared_selector<'a>(
    selectors: impl Iterator<Item = Option<&'a LabelSelector>>,
) -> LabelSelector {
    let all: Vec<LabelSelector> = selectors.map(normalized).collect();
    let Some((first, rest)) = all.split_first() else {
        return LabelSelector::default();
    };
    let labels: BTreeMap<String, String> = first
        .match_labels
        .iter()
        .flatten()
        .filter(|(k, v)| {
            rest.iter()
                .all(|s| s.match_labels.as_ref().and_then(|l| l.get(*k)) == Some(*v))
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let sorted = |r: &LabelSelectorRequirement| {
        let mut values = r.values.clone().unwrap_or_default();
        values.sort();
        (r.key.clone(), r.operator.clone(), values)
    };
    let expressions: Vec<LabelSelectorRequirement> = first
        .match_expressions
        .iter()
        .flatten()
        .filter(|r| {
            let wanted = sorted(r);
            rest.iter().all(|s| {
                s.match_expressions
                    .iter()
                    .flatten()
                    .any(|o| sorted(o) == wanted)
            })
        })
        .cloned()
        .collect();
    normalized(Some(&LabelSelector {
        match_labels: Some(labels),
        match_expressions: Some(expressions),
    }))
}

/// `selector` with absent, `{}` and empty `matchLabels`/`matchExpressions` made the same.
fn normalized(selector: Option<&LabelSelector>) -> LabelSelector {
    let mut selector = selector.cloned().unwrap_or_default();
    if selector
        .match_labels
        .as_ref()
        .is_some_and(BTreeMap::is_empty)
    {
        selector.match_labels = None;
    }
    if selector
        .match_expressions
        .as_ref()
        .is_some_and(Vec::is_empty)
    {
        selector.match_expressions = None;
    }
    selector
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(
        operations: &[&str],
        groups: &[&str],
        versions: &[&str],
        resources: &[&str],
        scope: &str,
    ) -> RuleWithOperations {
        let own = |l: &[&str]| l.iter().map(std::string::ToString::to_string).collect();
        RuleWithOperations {
            operations: own(operations),
            api_groups: own(groups),
            api_versions: own(versions),
            resources: own(resources),
            scope: Some(scope.to_string()),
        }
    }

    #[test]
    fn a_rule_subsumes_what_it_matches_in_every_part() {
        let all = rule(&["*"], &["*"], &["*"], &["*/*"], "*");
        let pods = rule(&["CREATE"], &[""], &["v1"], &["pods"], "Namespaced");
        assert!(subsumes(&all, &pods) && !subsumes(&pods, &all));
        assert!(subsumes(&pods, &pods), "identical");
        // Each part alone makes it narrower.
        let narrower = [
            rule(&["UPDATE"], &["*"], &["*"], &["*/*"], "*"),
            rule(&["*"], &["apps"], &["*"], &["*/*"], "*"),
            rule(&["*"], &["*"], &["v1beta1"], &["*/*"], "*"),
            rule(&["*"], &["*"], &["*"], &["pods/status"], "*"),
            rule(&["*"], &["*"], &["*"], &["*/*"], "Cluster"),
        ];
        for n in &narrower {
            assert!(!subsumes(n, &pods), "{n:?}");
        }
        // `*` matches resources without a subresource only; `r/*` every subresource of r.
        let top = rule(&["*"], &["*"], &["*"], &["*"], "*");
        assert!(!subsumes(
            &top,
            &rule(&["*"], &[""], &["v1"], &["pods/log"], "*")
        ));
        assert!(subsumes(&all, &top) && !subsumes(&top, &all));
        let pod_subs = rule(&["CREATE"], &[""], &["v1"], &["pods/*"], "Namespaced");
        assert!(subsumes(&pod_subs, &pods) && !subsumes(&pods, &pod_subs));
        assert!(!subsumes(
            &rule(&["*"], &["*"], &["*"], &["pods/*"], "*"),
            &rule(&["*"], &["*"], &["*"], &["*/scale"], "*")
        ));
        // Operations as a set.
        assert!(subsumes(
            &rule(&["UPDATE", "CREATE"], &[""], &["v1"], &["pods"], "*"),
            &rule(&["CREATE"], &[""], &["v1"], &["pods"], "*")
        ));
    }

    #[test]
    fn only_requirements_every_selector_has_are_kept() {
        let labels = |k: &str| LabelSelector {
            match_labels: Some([(k.to_string(), "x".to_string())].into()),
            match_expressions: None,
        };
        let a = labels("a");
        assert_eq!(shared_selector([Some(&a), Some(&a)].into_iter()), a);
        assert_eq!(
            shared_selector([Some(&a), Some(&labels("b"))].into_iter()),
            LabelSelector::default()
        );
        assert_eq!(
            shared_selector([Some(&a), None].into_iter()),
            LabelSelector::default()
        );
        let empty = LabelSelector {
            match_labels: Some(BTreeMap::new()),
            match_expressions: Some(Vec::new()),
        };
        assert_eq!(
            shared_selector([None, Some(&empty)].into_iter()),
            LabelSelector::default()
        );
        // A shared kube-system exclusion survives what differs beside it.
        let not_in = |values: &[&str]| LabelSelectorRequirement {
            key: "kubernetes.io/metadata.name".into(),
            operator: "NotIn".into(),
            values: Some(values.iter().map(|v| (*v).to_string()).collect()),
        };
        let with = |extra: &str| LabelSelector {
            match_labels: Some(
                [
                    (extra.to_string(), "x".to_string()),
                    ("tier".into(), "web".into()),
                ]
                .into(),
            ),
            match_expressions: Some(vec![not_in(&["kube-system", "kube-public"])]),
        };
        let mut second = with("b");
        second.match_expressions = Some(vec![
            LabelSelectorRequirement {
                key: "team".into(),
                operator: "Exists".into(),
                values: None,
            },
            not_in(&["kube-public", "kube-system"]),
        ]);
        assert_eq!(
            shared_selector([Some(&with("a")), Some(&second)].into_iter()),
            LabelSelector {
                match_labels: Some([("tier".to_string(), "web".to_string())].into()),
                match_expressions: Some(vec![not_in(&["kube-system", "kube-public"])]),
            }
        );
    }
}
