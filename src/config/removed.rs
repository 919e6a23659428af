//! Warnings for rules that name API versions Kubernetes no longer serves. Depends on `api`,
//! `conversion` (the equivalence table) and `served` (the removals).
//!
//! kube-apiserver accepts any version in a rule and never says that one is not served. Its
//! Equivalent pass (`ShouldCallHook`,
//! `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/generic/webhook.go`) only knows
//! the equivalents it serves (`EquivalentResourceRegistry`, filled by
//! `staging/src/k8s.io/apiserver/pkg/endpoints/installer.go`), so a webhook registered only for
//! a removed version is silently never called. The proxy can convert for it, when it is told
//! to (matchPolicy Equivalent) and registered for the served versions (`registration`).

use crate::api::{MatchPolicy, RuleWithOperations};
use crate::resources::equivalence::EQUIVALENCES;
use crate::served::removal;

/// One warning per rule and removed group/version/release: `(field, message)`, field
/// `rules[i]`. Rules naming `*` are not checked (they also match served versions).
pub(super) fn warnings(
    rules: &[RuleWithOperations],
    match_policy: MatchPolicy,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, rule) in rules.iter().enumerate() {
        for group in rule.api_groups.iter().filter(|g| *g != "*") {
            for version in rule.api_versions.iter().filter(|v| *v != "*") {
                // Resources of this group/version by release, in rule order.
                let mut by_release: Vec<(&str, Vec<&str>)> = Vec::new();
                for entry in &rule.resources {
                    let resource = entry.split_once('/').map_or(entry.as_str(), |(r, _)| r);
                    let Some(r) = removal(group, version, resource) else {
                        continue;
                    };
                    match by_release.iter_mut().find(|(rel, _)| *rel == r.release) {
                        Some((_, entries)) => entries.push(entry),
                        None => by_release.push((r.release, vec![entry])),
                    }
                }
                for (release, entries) in by_release {
                    let served = served_equivalents(group, version, &entries);
                    // Served successors the webhook's own rules do not name already (a rule
                    // for apps [v1, v1beta1] makes its v1beta1 only dead weight).
                    let uncovered: Vec<String> = served
                        .iter()
                        .filter(|(g, v, e)| !rules.iter().any(|r| r.covers(g, v, e)))
                        .map(|(g, v, e)| format!("{} {e}", group_version(g, v)))
                        .collect();
                    if served.is_empty() || !uncovered.is_empty() {
                        let head = format!(
                            "{} {}: removed in Kubernetes {release}",
                            group_version(group, version),
                            entries.join(", ")
                        );
                        let message = message(
                            &head,
                            &group_version(group, version),
                            &uncovered,
                            match_policy,
                        );
                        out.push((format!("rules[{i}]"), message));
                    }
                }
            }
        }
    }
    out
}

/// `head` (`extensions/v1beta1 deployments: removed in Kubernetes 1.16`) with what happens
/// under `match_policy`, given `served`: the served versions the proxy converts from that the
/// webhook's rules do not name already (`apps/v1 deployments`), none when there is no
/// successor.
fn message(head: &str, removed: &str, served: &[String], match_policy: MatchPolicy) -> String {
    match (match_policy, served.is_empty()) {
        (_, true) => format!("{head}, with no served version the proxy converts from: never called for it, directly or through the proxy"),
        (MatchPolicy::Equivalent, false) => format!(
            "{head}: kube-apiserver alone would never call this webhook for it; through the proxy (`admission-proxy registration`), requests for {} are converted to {removed}",
            served.join(", "),
        ),
        (MatchPolicy::Exact, false) => format!(
            "{head}: never called for it, directly or through the proxy; set `matchPolicy: Equivalent` in the proxy's copy to have the proxy convert requests for {}",
            served.join(", ")
        ),
    }
}

/// `group/version`, or `version` alone for the core group.
fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

/// The served equivalents of `entries` in `group/version`, as (group, version, entry), in
/// table (registry) order.
fn served_equivalents(
    group: &str,
    version: &str,
    entries: &[&str],
) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for entry in entries {
        let (resource, sub) = entry.split_once('/').unwrap_or((entry, ""));
        let Some(e) = EQUIVALENCES
            .iter()
            .find(|e| e.resource == resource && e.versions.contains(&(group, version)))
        else {
            continue;
        };
        if sub == "scale" && e.scale.is_none() {
            continue;
        }
        for &(g, v) in e.versions {
            let served = (g.to_string(), v.to_string(), entry.to_string());
            if removal(g, v, resource).is_none() && !out.contains(&served) {
                out.push(served);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(groups: &[&str], versions: &[&str], resources: &[&str]) -> RuleWithOperations {
        let own = |l: &[&str]| l.iter().map(std::string::ToString::to_string).collect();
        RuleWithOperations {
            operations: own(&["CREATE"]),
            api_groups: own(groups),
            api_versions: own(versions),
            resources: own(resources),
            scope: None,
        }
    }

    #[test]
    fn equivalent_and_exact_say_what_happens() {
        let rules = [rule(
            &["extensions"],
            &["v1beta1"],
            &["deployments", "ingresses"],
        )];
        let w = warnings(&rules, MatchPolicy::Equivalent);
        assert_eq!(
            w,
            [
                ("rules[0]".to_string(), "extensions/v1beta1 deployments: removed in Kubernetes 1.16: kube-apiserver alone would never call this webhook for it; through the proxy (`admission-proxy registration`), requests for apps/v1 deployments are converted to extensions/v1beta1".to_string()),
                ("rules[0]".to_string(), "extensions/v1beta1 ingresses: removed in Kubernetes 1.22: kube-apiserver alone would never call this webhook for it; through the proxy (`admission-proxy registration`), requests for networking.k8s.io/v1 ingresses are converted to extensions/v1beta1".to_string()),
            ]
        );
        let w = warnings(&rules[..1], MatchPolicy::Exact);
        assert_eq!(w[0].1, "extensions/v1beta1 deployments: removed in Kubernetes 1.16: never called for it, directly or through the proxy; set `matchPolicy: Equivalent` in the proxy's copy to have the proxy convert requests for apps/v1 deployments");
    }

    #[test]
    fn no_served_equivalent_and_served_versions_are_quiet() {
        let psp = [rule(&["policy"], &["v1beta1"], &["podsecuritypolicies"])];
        assert_eq!(warnings(&psp, MatchPolicy::Equivalent)[0].1, "policy/v1beta1 podsecuritypolicies: removed in Kubernetes 1.25, with no served version the proxy converts from: never called for it, directly or through the proxy");
        let served = [
            rule(&["apps"], &["v1"], &["deployments"]),
            rule(&["*"], &["v1beta1"], &["*"]),
            rule(&["networking.k8s.io"], &["v1beta1"], &["ipaddresses"]),
        ];
        assert!(warnings(&served, MatchPolicy::Exact).is_empty());
        // A rule that also names the served successor: nothing to say.
        let both = [rule(
            &["apps", "extensions"],
            &["v1", "v1beta1"],
            &["deployments"],
        )];
        assert!(warnings(&both, MatchPolicy::Exact).is_empty());
    }
}
