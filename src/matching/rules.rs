//! Rule matching (`RuleWithOperations`), exactly as kube-apiserver's `Matcher.Matches` in
//! `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules/rules.go`.
//! Depends on `api` and `review`.

use crate::api::RuleWithOperations;
use crate::review::{GroupVersionKind, GroupVersionResource, Operation};

/// `rules[].scope`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// `*`: no restriction (the default).
    Any,
    Cluster,
    Namespaced,
}

/// One compiled rule. All parts must match (logical AND); values compare exactly and
/// case-sensitively, with `*` as the only wildcard.
#[derive(Clone, Debug)]
pub struct Rule {
    operations: Vec<String>,
    api_groups: Vec<String>,
    api_versions: Vec<String>,
    /// Each entry split at the first `/` into (resource, subresource); no `/` means "".
    resources: Vec<(String, String)>,
    scope: Scope,
}

/// What a rule is matched against: the original request, `requestResource` etc. when present
/// (`CreateV1AdmissionReview` fills `resource`/`kind` from what the proxy's own registration
/// matched, possibly an equivalent resource).
#[derive(Clone, Copy, Debug)]
pub struct RuleInput<'r> {
    /// The request's operation.
    pub operation: Operation,
    /// The request's group/version/resource (the original request's).
    pub resource: &'r GroupVersionResource<'r>,
    /// The request's subresource, `""` for none.
    pub sub_resource: &'r str,
    /// The request's namespace, `""` for cluster-scoped objects.
    pub namespace: &'r str,
}

impl Rule {
    /// Compiles a validated rule. `scope` must already be defaulted (absent means `*`).
    pub fn new(rule: &RuleWithOperations) -> Self {
        let scope = match rule.scope.as_deref() {
            Some("Cluster") => Scope::Cluster,
            Some("Namespaced") => Scope::Namespaced,
            _ => Scope::Any,
        };
        Rule {
            operations: rule.operations.clone(),
            api_groups: rule.api_groups.clone(),
            api_versions: rule.api_versions.clone(),
            resources: rule
                .resources
                .iter()
                .map(|r| match r.split_once('/') {
                    Some((res, sub)) => (res.to_string(), sub.to_string()),
                    None => (r.clone(), String::new()),
                })
                .collect(),
            scope,
        }
    }

    /// `rules.Matcher.Matches`: scope, operation, group, version and resource all match.
    pub fn matches(&self, input: &RuleInput<'_>) -> bool {
        self.mismatch(input).is_none()
    }

    /// The first part of the rule that does not match, in `rules.Matcher.Matches` order
    /// (`scope`, `operations`, `apiGroups`, `apiVersions`, `resources`); `None` when it matches.
    pub(crate) fn mismatch(&self, input: &RuleInput<'_>) -> Option<&'static str> {
        if !self.matches_scope(input) {
            Some("scope")
        } else if !any_or_star(&self.operations, input.operation.as_str()) {
            Some("operations")
        } else if !any_or_star(&self.api_groups, &input.resource.group) {
            Some("apiGroups")
        } else if !any_or_star(&self.api_versions, &input.resource.version) {
            Some("apiVersions")
        } else if !self.matches_resource(&input.resource.resource, input.sub_resource) {
            Some("resources")
        } else {
            None
        }
    }

    /// `"r/*"` also matches `r` itself; `"*"` matches no subresource; `"*/*"` matches all
    /// (`Matcher.resource`).
    fn matches_resource(&self, resource: &str, sub_resource: &str) -> bool {
        self.resources.iter().any(|(res, sub)| {
            (res == "*" || res == resource) && (sub == "*" || sub == sub_resource)
        })
    }

    /// The Namespace resource (exact GVR `v1 namespaces`, any subresource) is always
    /// cluster-scoped even though `request.namespace` carries its name (`Matcher.scope`).
    fn matches_scope(&self, input: &RuleInput<'_>) -> bool {
        let is_namespace = input.resource.group.is_empty()
            && input.resource.version == "v1"
            && input.resource.resource == "namespaces";
        match self.scope {
            Scope::Any => true,
            Scope::Namespaced => !is_namespace && !input.namespace.is_empty(),
            Scope::Cluster => is_namespace || input.namespace.is_empty(),
        }
    }
}

/// As written in the configuration: `operations=[CREATE] apiGroups=[apps] apiVersions=[v1]
/// resources=[deployments, deployments/scale] scope=*`.
impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let resources: Vec<String> = self
            .resources
            .iter()
            .map(|(r, s)| {
                if s.is_empty() {
                    r.clone()
                } else {
                    format!("{r}/{s}")
                }
            })
            .collect();
        let scope = match self.scope {
            Scope::Any => "*",
            Scope::Cluster => "Cluster",
            Scope::Namespaced => "Namespaced",
        };
        // The core group is "": shown quoted so that it stays visible.
        let groups: Vec<&str> = self
            .api_groups
            .iter()
            .map(|g| if g.is_empty() { "\"\"" } else { g.as_str() })
            .collect();
        write!(
            f,
            "operations=[{}] apiGroups=[{}] apiVersions=[{}] resources=[{}] scope={scope}",
            self.operations.join(", "),
            groups.join(", "),
            self.api_versions.join(", "),
            resources.join(", ")
        )
    }
}

fn any_or_star(list: &[String], value: &str) -> bool {
    list.iter().any(|v| v == "*" || v == value)
}

/// `rules.IsExemptAdmissionConfigurationResource`: requests whose *kind* is one of the
/// admission configuration kinds never reach API-registered webhooks (`generic/webhook.go`
/// `Dispatch` checks it before any webhook).
pub(crate) fn is_exempt_admission_configuration(kind: &GroupVersionKind) -> bool {
    kind.group == "admissionregistration.k8s.io"
        && matches!(
            &*kind.kind,
            "ValidatingWebhookConfiguration"
                | "MutatingWebhookConfiguration"
                | "ValidatingAdmissionPolicy"
                | "ValidatingAdmissionPolicyBinding"
                | "MutatingAdmissionPolicy"
                | "MutatingAdmissionPolicyBinding"
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(
        ops: &[&str],
        groups: &[&str],
        versions: &[&str],
        resources: &[&str],
        scope: Option<&str>,
    ) -> Rule {
        let s = |v: &[&str]| v.iter().map(std::string::ToString::to_string).collect();
        Rule::new(&RuleWithOperations {
            operations: s(ops),
            api_groups: s(groups),
            api_versions: s(versions),
            resources: s(resources),
            scope: scope.map(str::to_string),
        })
    }

    fn gvr<'a>(group: &'a str, version: &'a str, resource: &'a str) -> GroupVersionResource<'a> {
        GroupVersionResource {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
        }
    }

    /// Resource entries against `pods`, `pods/status` and `deployments/scale`
    /// (`Matcher.resource`; rules_test.go `TestResource`).
    #[test]
    fn resource_table() {
        let cases = [
            ("*", [true, false, false]),
            ("pods", [true, false, false]),
            ("pods/*", [true, true, false]),
            ("pods/status", [false, true, false]),
            ("*/status", [false, true, false]),
            ("*/scale", [false, false, true]),
            ("*/*", [true, true, true]),
        ];
        let pods = gvr("", "v1", "pods");
        let deploy = gvr("apps", "v1", "deployments");
        let requests = [(&pods, ""), (&pods, "status"), (&deploy, "scale")];
        for (entry, expected) in cases {
            let r = rule(&["*"], &["*"], &["*"], &[entry], None);
            for ((res, sub), want) in requests.iter().zip(expected) {
                let input = RuleInput {
                    operation: Operation::Create,
                    resource: res,
                    sub_resource: sub,
                    namespace: "ns",
                };
                assert_eq!(r.matches(&input), want, "{entry} vs {}/{sub}", res.resource);
            }
        }
    }

    /// Scope (`Matcher.scope`): Namespaces are cluster-scoped, also their subresources.
    #[test]
    fn scope_namespace_special_cases() {
        let ns = gvr("", "v1", "namespaces");
        let pods = gvr("", "v1", "pods");
        let nodes = gvr("", "v1", "nodes");
        let namespaced = rule(&["*"], &["*"], &["*"], &["*/*"], Some("Namespaced"));
        let cluster = rule(&["*"], &["*"], &["*"], &["*/*"], Some("Cluster"));
        let input = |res, sub, namespace| RuleInput {
            operation: Operation::Update,
            resource: res,
            sub_resource: sub,
            namespace,
        };
        assert!(!namespaced.matches(&input(&ns, "", "foo")));
        assert!(cluster.matches(&input(&ns, "", "foo")));
        assert!(cluster.matches(&input(&ns, "finalize", "foo")));
        assert!(namespaced.matches(&input(&pods, "", "foo")));
        assert!(!cluster.matches(&input(&pods, "", "foo")));
        assert!(cluster.matches(&input(&nodes, "", "")));
        assert!(!namespaced.matches(&input(&nodes, "", "")));
    }

    /// Operations (rules_test.go `TestOperation`): `*` includes CONNECT; exact otherwise.
    #[test]
    fn operations_groups_versions() {
        let pods = gvr("", "v1", "pods");
        let input = |op| RuleInput {
            operation: op,
            resource: &pods,
            sub_resource: "",
            namespace: "ns",
        };
        let star = rule(&["*"], &[""], &["v1"], &["pods"], None);
        assert!(star.matches(&input(Operation::Connect)));
        let create = rule(&["CREATE"], &[""], &["v1"], &["pods"], None);
        assert!(create.matches(&input(Operation::Create)));
        assert!(!create.matches(&input(Operation::Update)));
        assert!(
            !rule(&["*"], &["apps"], &["v1"], &["pods"], None).matches(&input(Operation::Create))
        );
        assert!(
            !rule(&["*"], &[""], &["v1beta1"], &["pods"], None).matches(&input(Operation::Create))
        );
        assert!(
            !rule(&["*"], &[], &["*"], &["pods"], None).matches(&input(Operation::Create)),
            "an empty list matches nothing"
        );
    }

    #[test]
    fn exemptions() {
        let kind = |g: &'static str, k: &'static str| GroupVersionKind {
            group: g.into(),
            version: "v1".into(),
            kind: k.into(),
        };
        assert!(is_exempt_admission_configuration(&kind(
            "admissionregistration.k8s.io",
            "ValidatingWebhookConfiguration"
        )));
        assert!(is_exempt_admission_configuration(&kind(
            "admissionregistration.k8s.io",
            "MutatingAdmissionPolicyBinding"
        )));
        assert!(!is_exempt_admission_configuration(&kind(
            "",
            "ValidatingWebhookConfiguration"
        )));
        assert!(!is_exempt_admission_configuration(&kind(
            "admissionregistration.k8s.io",
            "Other"
        )));
    }
}
