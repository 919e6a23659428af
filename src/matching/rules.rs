//! Rule matching (`RuleWithOperations`), exactly as kube-apiserver's `Matcher.Matches` in
//! `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules/rules.go`.
//! Depends on `api`, `review` and `field_error`.

use std::collections::HashSet;

use crate::api::RuleWithOperations;
use crate::field_error::{BadValue, Error as FieldError, ErrorType};
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

/// Rule validation of `pkg/apis/admissionregistration/validation/validation.go`
/// (`validateRuleWithOperations` and `validateRule`), for webhooks' `rules` and policies'
/// resource rules alike.
pub(crate) fn validate_rule(rule: &RuleWithOperations, at: &str, bad: &mut impl FnMut(FieldError)) {
    validate_wildcard_alone(&rule.operations, &format!("{at}.operations"), bad);
    for (i, op) in rule.operations.iter().enumerate() {
        if !matches!(
            op.as_str(),
            "*" | "CREATE" | "UPDATE" | "DELETE" | "CONNECT"
        ) {
            bad(FieldError::not_supported(
                format!("{at}.operations[{i}]"),
                op,
                &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"],
            ));
        }
    }
    validate_wildcard_alone(&rule.api_groups, &format!("{at}.apiGroups"), bad);
    validate_wildcard_alone(&rule.api_versions, &format!("{at}.apiVersions"), bad);
    for (i, v) in rule.api_versions.iter().enumerate() {
        if v.is_empty() {
            bad(FieldError::required(format!("{at}.apiVersions[{i}]"), ""));
        }
    }
    validate_resources(&rule.resources, at, bad);
    if let Some(scope) = rule.scope.as_deref() {
        if !matches!(scope, "*" | "Cluster" | "Namespaced") {
            bad(FieldError::not_supported(
                format!("{at}.scope"),
                scope,
                &["*", "Cluster", "Namespaced"],
            ));
        }
    }
}

/// A rule's list at `field` is required, and `*` in it must stand alone (`validateRule`:
/// `hasWildcard`).
fn validate_wildcard_alone(list: &[String], field: &str, bad: &mut impl FnMut(FieldError)) {
    if list.is_empty() {
        bad(FieldError::required(field, ""));
    } else if list.len() > 1 && list.iter().any(|v| v == "*") {
        bad(FieldError::new(
            ErrorType::Invalid,
            field,
            BadValue::Omitted,
            "if '*' is present, must not specify other values",
        ));
    }
}

/// A rule's `resources` (`validateResources` in `validation.go`): required, no empty entry, no
/// entry a wildcard already covers (`*/*`, `res/*`, `*/sub`, `*`).
fn validate_resources(resources: &[String], at: &str, bad: &mut impl FnMut(FieldError)) {
    if resources.is_empty() {
        bad(FieldError::required(format!("{at}.resources"), ""));
    }
    let mut wildcard_sub: HashSet<&str> = HashSet::new();
    let mut wildcard_res: HashSet<&str> = HashSet::new();
    let (mut double, mut single, mut plain) = (false, false, false);
    for (i, entry) in resources.iter().enumerate() {
        if entry.is_empty() {
            bad(FieldError::required(format!("{at}.resources[{i}]"), ""));
            continue;
        }
        double |= entry == "*/*";
        single |= entry == "*";
        let Some((res, sub)) = entry.split_once('/') else {
            // Upstream overwrites this flag per entry instead of accumulating it
            // (`validateResources`).
            plain = entry != "*";
            continue;
        };
        let covered = |by: String| {
            FieldError::invalid(
                format!("{at}.resources[{i}]"),
                entry,
                format!("if '{by}' is present, must not specify {entry}"),
            )
        };
        if wildcard_sub.contains(res) {
            bad(covered(format!("{res}/*")));
        }
        if wildcard_res.contains(sub) {
            bad(covered(format!("*/{sub}")));
        }
        if sub == "*" {
            wildcard_sub.insert(res);
        }
        if res == "*" {
            wildcard_res.insert(sub);
        }
    }
    let invalid = |detail| {
        FieldError::new(
            ErrorType::Invalid,
            format!("{at}.resources"),
            BadValue::Omitted,
            detail,
        )
    };
    if resources.len() > 1 && double {
        bad(invalid(
            "if '*/*' is present, must not specify other resources",
        ));
    }
    if single && plain {
        bad(invalid(
            "if '*' is present, must not specify other resources without subresources",
        ));
    }
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
