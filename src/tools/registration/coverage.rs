//! The rules the proxy is registered with for one legacy webhook, so that kube-apiserver
//! reaches the proxy for every request the legacy webhook's rules cover through matchPolicy
//! Equivalent, including versions the cluster no longer serves. Depends on `api`,
//! `conversion` (the equivalence table and the declared custom resources) and `served`.
//!
//! Why the legacy rules are not enough: kube-apiserver's Equivalent pass
//! (`ShouldCallHook` in
//! `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/generic/webhook.go`) walks only
//! the equivalents its `EquivalentResourceRegistry` knows, which `installer.go` fills with the
//! versions it serves. A copied rule for `extensions/v1beta1 deployments` never matches on a
//! cluster that stopped serving that version (1.16), so kube-apiserver would never call the
//! proxy and the proxy's own conversion would never run. The proxy is therefore registered for
//! every version the proxy can convert from: kube-apiserver then matches each request exactly,
//! sends it in the version its caller used, and the proxy converts once.

use std::collections::{BTreeMap, BTreeSet};

use crate::api::RuleWithOperations;
use crate::resources::custom::{CustomResource, CustomResources};
use crate::resources::equivalence::EQUIVALENCES;
use crate::served::ServedResources;

/// One rule target: group, version and resource entry (`deployments`, `deployments/scale`).
type Target = (String, String, String);

/// The operations and scope a group of targets shares (a rule's, as written).
type Key = (Vec<String>, Option<String>);

/// The rules to register the proxy with for a webhook whose legacy rules are `rules`.
///
/// - matchPolicy Exact (`equivalent == false`): `rules` as they are (kube-apiserver calls the
///   webhook only for what they name, and so does the proxy).
/// - matchPolicy Equivalent: each rule's own targets plus every equivalent version the proxy
///   converts (the built-in equivalence table, and every version of a declared
///   CustomResourceDefinition, `served: false` ones left out as kube-apiserver never receives
///   requests for them), with the rule's operations and scope. Subresources follow the table:
///   `status` and `*` for every version, `scale` where the resource has it. Rules with a `*`
///   group, version or resource are kept as written (they already match every served version)
///   and only the targets they do not cover are added. Added targets are merged into as few
///   rules as the cross-product shape allows (sorted; groups with the same versions and
///   resources share one rule).
///
/// With `served` (the cluster's discovery), only targets the cluster serves are registered;
/// without it, removed versions stay (harmless: a rule may name any version, and older
/// clusters still serve them).
///
/// Returns rules in this order: the kept wildcard rules as written, then the merged rules of
/// each legacy rule's operations and scope, in the order those first appear.
pub(crate) fn registration_rules(
    rules: &[RuleWithOperations],
    equivalent: bool,
    custom: &CustomResources,
    served: Option<&ServedResources>,
) -> Vec<RuleWithOperations> {
    if !equivalent {
        return rules.to_vec();
    }
    let kept: Vec<&RuleWithOperations> = rules.iter().filter(|r| !is_explicit(r)).collect();
    let mut groups: Vec<(Key, BTreeSet<Target>)> = Vec::new();
    for rule in rules {
        let key = (rule.operations.clone(), rule.scope.clone());
        let mut targets = if is_explicit(rule) {
            own_targets(rule)
        } else {
            BTreeSet::new()
        };
        targets.extend(equivalent_targets(rule, custom));
        targets.retain(|(g, v, r)| {
            served.is_none_or(|s| s.serves(g, v, r))
                && !kept
                    .iter()
                    .any(|k| (&k.operations, &k.scope) == (&key.0, &key.1) && k.covers(g, v, r))
        });
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, all)) => all.extend(targets),
            None => groups.push((key, targets)),
        }
    }
    let mut out: Vec<RuleWithOperations> = kept.into_iter().cloned().collect();
    for ((operations, scope), mut targets) in groups {
        drop_subsumed(&mut targets);
        for (api_groups, api_versions, resources) in merge(&targets) {
            out.push(RuleWithOperations {
                operations: operations.clone(),
                api_groups,
                api_versions,
                resources,
                scope: scope.clone(),
            });
        }
    }
    out
}

/// Whether a rule names every group, version and resource (no `*`; a `*` subresource is
/// fine): its targets can then be listed and merged with the added ones.
fn is_explicit(rule: &RuleWithOperations) -> bool {
    let star = |v: &[String]| v.iter().any(|s| s == "*");
    !star(&rule.api_groups)
        && !star(&rule.api_versions)
        && !rule
            .resources
            .iter()
            .any(|r| r.split_once('/').map_or(r.as_str(), |(res, _)| res) == "*")
}

/// The cross product of an explicit rule's groups, versions and resources.
fn own_targets(rule: &RuleWithOperations) -> BTreeSet<Target> {
    let mut out = BTreeSet::new();
    for g in &rule.api_groups {
        for v in &rule.api_versions {
            for r in &rule.resources {
                out.insert((g.clone(), v.clone(), r.clone()));
            }
        }
    }
    out
}

/// Every version of every resource (built-in or declared custom) that `rule` reaches through
/// an equivalent, as targets with the rule's subresource.
fn equivalent_targets(rule: &RuleWithOperations, custom: &CustomResources) -> BTreeSet<Target> {
    let mut out = BTreeSet::new();
    let named = |g: &str, v: &str| rule.names_group_version(g, v);
    for entry in &rule.resources {
        let (res, sub) = entry.split_once('/').unwrap_or((entry, ""));
        let with_sub = |resource: &str| {
            if sub.is_empty() {
                resource.to_string()
            } else {
                format!("{resource}/{sub}")
            }
        };
        for e in EQUIVALENCES {
            let has_sub = match sub {
                "" | "status" | "*" => true,
                "scale" => e.scale.is_some(),
                _ => false,
            };
            if (res == "*" || res == e.resource)
                && has_sub
                && e.versions.iter().any(|&(g, v)| named(g, v))
            {
                for &(g, v) in e.versions {
                    out.insert((g.to_string(), v.to_string(), with_sub(e.resource)));
                }
            }
        }
        for crd in custom.iter() {
            let versions = custom_versions(crd, sub);
            if (res == "*" || res == crd.plural) && versions.iter().any(|v| named(&crd.group, v)) {
                for v in versions.iter().filter(|v| served_in_crd(crd, v)) {
                    out.insert((crd.group.clone(), v.to_string(), with_sub(&crd.plural)));
                }
            }
        }
    }
    out
}

/// The versions of `crd` that serve subresource `sub` (`""` and `*`: every version).
fn custom_versions<'c>(crd: &'c CustomResource, sub: &str) -> Vec<&'c str> {
    crd.versions
        .iter()
        .filter(|v| match sub {
            "" | "*" => true,
            "status" => v.status,
            "scale" => v.scale,
            _ => false,
        })
        .map(|v| v.name.as_str())
        .collect()
}

/// `served: true` in the CRD: kube-apiserver receives requests only for those versions.
fn served_in_crd(crd: &CustomResource, version: &str) -> bool {
    crd.versions.iter().any(|v| v.name == version && v.served)
}

/// Removes `res` and `res/sub` where `res/*` is there for the same group/version: `res/*`
/// matches both (`rules.go`), and kube-apiserver refuses a rule that names `res/*` and then
/// `res/sub` (`validateResources` in `pkg/apis/admissionregistration/validation/validation.go`:
/// "if 'res/*' is present, must not specify res/sub"), which merging could otherwise produce.
fn drop_subsumed(targets: &mut BTreeSet<Target>) {
    let wildcards: BTreeSet<(String, String, String)> = targets
        .iter()
        .filter_map(|(g, v, r)| {
            let res = r.strip_suffix("/*")?;
            Some((g.clone(), v.clone(), res.to_string()))
        })
        .collect();
    targets.retain(|(g, v, r)| {
        let (res, sub) = r.split_once('/').unwrap_or((r, ""));
        sub == "*" || !wildcards.contains(&(g.clone(), v.clone(), res.to_string()))
    });
}

/// Targets merged into rules: the versions of each (group, resource), then the resources of
/// each (group, versions), then the groups sharing both. Each result's cross product is
/// exactly a part of `targets`, and together they cover it. Sorted.
fn merge(targets: &BTreeSet<Target>) -> Vec<(Vec<String>, Vec<String>, Vec<String>)> {
    let mut versions: BTreeMap<(&str, &str), BTreeSet<&str>> = BTreeMap::new();
    for (g, v, r) in targets {
        versions.entry((g, r)).or_default().insert(v);
    }
    let mut resources: BTreeMap<(&str, BTreeSet<&str>), BTreeSet<&str>> = BTreeMap::new();
    for ((g, r), vs) in versions {
        resources.entry((g, vs)).or_default().insert(r);
    }
    let mut groups: BTreeMap<(BTreeSet<&str>, BTreeSet<&str>), BTreeSet<&str>> = BTreeMap::new();
    for ((g, vs), rs) in resources {
        groups.entry((vs, rs)).or_default().insert(g);
    }
    let owned = |set: BTreeSet<&str>| set.into_iter().map(str::to_string).collect::<Vec<_>>();
    let mut out: Vec<_> = groups
        .into_iter()
        .map(|((vs, rs), gs)| (owned(gs), owned(vs), owned(rs)))
        .collect();
    out.sort();
    out
}

/// The indexes of `rules` that no resource the cluster serves can reach, directly or (for
/// matchPolicy Equivalent) through an equivalent version the proxy converts from: the webhook
/// is never called for what those rules name, directly or through the proxy.
pub(crate) fn unreachable_rules(
    rules: &[RuleWithOperations],
    equivalent: bool,
    custom: &CustomResources,
    served: &ServedResources,
) -> Vec<usize> {
    rules
        .iter()
        .enumerate()
        .filter(|(_, rule)| {
            let direct = served.iter().any(|(g, v, r)| rule.covers(g, v, r));
            let through_proxy = equivalent
                && equivalent_targets(rule, custom)
                    .iter()
                    .any(|(g, v, r)| served.serves(g, v, r));
            !direct && !through_proxy
        })
        .map(|(i, _)| i)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::custom::tests::widgets;

    fn rule(groups: &[&str], versions: &[&str], resources: &[&str]) -> RuleWithOperations {
        let own = |l: &[&str]| l.iter().map(std::string::ToString::to_string).collect();
        RuleWithOperations {
            operations: own(&["CREATE", "UPDATE"]),
            api_groups: own(groups),
            api_versions: own(versions),
            resources: own(resources),
            scope: None,
        }
    }

    /// Each rule as `groups versions resources`.
    fn shown(rules: &[RuleWithOperations]) -> Vec<String> {
        rules
            .iter()
            .map(|r| {
                format!(
                    "{} {} {}",
                    r.api_groups.join(","),
                    r.api_versions.join(","),
                    r.resources.join(",")
                )
            })
            .collect()
    }

    /// The Equivalent registration of `rules`, no custom resources, no discovery.
    fn expand(rules: &[RuleWithOperations]) -> Vec<String> {
        shown(&registration_rules(
            rules,
            true,
            &CustomResources::default(),
            None,
        ))
    }

    #[test]
    fn a_removed_deployment_version_is_registered_in_every_version() {
        assert_eq!(
            expand(&[rule(&["extensions"], &["v1beta1"], &["deployments"])]),
            [
                "apps v1,v1beta1,v1beta2 deployments",
                "extensions v1beta1 deployments"
            ]
        );
        // The scale subresource, with its own table.
        assert_eq!(
            expand(&[rule(&["apps"], &["v1beta1"], &["statefulsets/scale"])]),
            ["apps v1,v1beta1,v1beta2 statefulsets/scale"]
        );
        // Ingress: groups with the same versions would share a rule; these do not.
        assert_eq!(
            expand(&[rule(&["extensions"], &["v1beta1"], &["ingresses"])]),
            [
                "extensions v1beta1 ingresses",
                "networking.k8s.io v1,v1beta1 ingresses"
            ]
        );
    }

    #[test]
    fn groups_with_the_same_versions_and_resources_share_a_rule() {
        let rules = [
            rule(&["rbac.authorization.k8s.io"], &["v1beta1"], &["roles"]),
            rule(&["apps"], &["v1"], &["daemonsets"]),
        ];
        let out = expand(&rules);
        assert_eq!(
            out,
            [
                "apps v1,v1beta2 daemonsets",
                "extensions v1beta1 daemonsets",
                "rbac.authorization.k8s.io v1,v1alpha1,v1beta1 roles",
            ]
        );
    }

    #[test]
    fn wildcard_rules_are_kept_and_only_what_they_miss_is_added() {
        // `*` versions of extensions: apps and networking.k8s.io are added, extensions is not.
        let out = expand(&[rule(&["extensions"], &["*"], &["deployments"])]);
        assert_eq!(
            out,
            [
                "extensions * deployments",
                "apps v1,v1beta1,v1beta2 deployments"
            ]
        );
        // Everything already: nothing added.
        assert_eq!(expand(&[rule(&["*"], &["*"], &["*"])]), ["* * *"]);
        // Core resources have no equivalents.
        assert_eq!(expand(&[rule(&[""], &["v1"], &["pods"])]), [" v1 pods"]);
    }

    #[test]
    fn a_wildcard_subresource_absorbs_what_it_matches() {
        // Two valid legacy rules whose merge would read `[deployments/*, deployments/status]`,
        // which kube-apiserver's validation refuses.
        let rules = [
            rule(&["extensions"], &["v1beta1"], &["deployments/*"]),
            rule(&["apps"], &["v1"], &["deployments/status", "deployments"]),
        ];
        let out = expand(&rules);
        assert_eq!(
            out,
            [
                "apps v1,v1beta1,v1beta2 deployments/*",
                "extensions v1beta1 deployments/*"
            ]
        );
    }

    #[test]
    fn exact_webhooks_keep_their_rules() {
        let r = rule(&["extensions"], &["v1beta1"], &["deployments"]);
        let out = registration_rules(
            std::slice::from_ref(&r),
            false,
            &CustomResources::default(),
            None,
        );
        assert_eq!(out, [r]);
    }

    #[test]
    fn custom_resources_in_every_served_version() {
        let all = widgets();
        let out = |r| shown(&registration_rules(&[r], true, &all, None));
        assert_eq!(
            out(rule(&["example.com"], &["v1"], &["widgets"])),
            ["example.com v1,v2 widgets"]
        );
        // v1alpha1 is not served; only v2 has a scale subresource.
        assert_eq!(
            out(rule(&["example.com"], &["v2"], &["widgets/scale"])),
            ["example.com v2 widgets/scale"]
        );
        assert_eq!(
            out(rule(&["example.com"], &["v2"], &["widgets/status"])),
            ["example.com v1,v2 widgets/status"]
        );
    }

    #[test]
    fn discovery_keeps_only_served_targets_and_finds_unreachable_rules() {
        let mut served = ServedResources::default();
        served.insert("apps", "v1", "deployments");
        served.insert("apps", "v1", "deployments/scale");
        served.insert("autoscaling", "v2", "horizontalpodautoscalers");
        let none = CustomResources::default();
        let rules = [
            rule(&["extensions"], &["v1beta1"], &["deployments"]),
            rule(&["policy"], &["v1beta1"], &["podsecuritypolicies"]),
        ];
        let out = shown(&registration_rules(&rules, true, &none, Some(&served)));
        assert_eq!(out, ["apps v1 deployments"]);
        // Equivalent: the Deployment rule is reached through apps/v1; PodSecurityPolicy has no
        // served equivalent. Exact: neither.
        assert_eq!(unreachable_rules(&rules, true, &none, &served), [1]);
        assert_eq!(unreachable_rules(&rules, false, &none, &served), [0, 1]);
        let wildcard = [rule(&["*"], &["*"], &["*/scale"])];
        assert!(unreachable_rules(&wildcard, false, &none, &served).is_empty());
    }
}
