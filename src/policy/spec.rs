//! The `admissionregistration.k8s.io/v1` shapes of ValidatingAdmissionPolicy and
//! ValidatingAdmissionPolicyBinding as the evaluator reads them, their API defaults
//! (`SetDefaults_ValidatingAdmissionPolicySpec`, `SetDefaults_MatchResources`,
//! `SetDefaults_NamedRuleWithOperations` in `pkg/apis/admissionregistration/v1/defaults.go`)
//! and the structural half of `ValidateValidatingAdmissionPolicy` /
//! `ValidateValidatingAdmissionPolicyBinding`
//! (`pkg/apis/admissionregistration/validation/validation.go`); CEL compilation is in
//! `super::cel`. Defaults are applied before validation, as kube-apiserver does, so objects
//! written by hand load like objects printed by `kubectl get -o yaml`.

use std::collections::{BTreeMap, HashSet};

use serde::Deserialize;

use crate::api::{LabelSelector, MatchCondition, RuleWithOperations};
use crate::field_error::{BadValue, Error as FieldError, ErrorType};
use crate::names;

/// `metadata` as far as the evaluator reads it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ObjectMeta {
    #[serde(default)]
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) namespace: String,
    #[serde(default)]
    pub(crate) labels: Option<BTreeMap<String, String>>,
}

/// A ValidatingAdmissionPolicy.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PolicyObject {
    #[serde(default)]
    pub(crate) metadata: ObjectMeta,
    #[serde(default)]
    pub(crate) spec: PolicySpec,
}

/// `ValidatingAdmissionPolicySpec`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PolicySpec {
    #[serde(default)]
    pub(crate) param_kind: Option<ParamKind>,
    #[serde(default)]
    pub(crate) match_constraints: Option<MatchResources>,
    #[serde(default)]
    pub(crate) validations: Vec<Validation>,
    #[serde(default)]
    pub(crate) failure_policy: Option<String>,
    #[serde(default)]
    pub(crate) audit_annotations: Vec<AuditAnnotation>,
    #[serde(default)]
    pub(crate) match_conditions: Vec<MatchCondition>,
    #[serde(default)]
    pub(crate) variables: Vec<Variable>,
}

/// `ParamKind`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ParamKind {
    #[serde(default)]
    pub(crate) api_version: String,
    #[serde(default)]
    pub(crate) kind: String,
}

/// `MatchResources`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MatchResources {
    #[serde(default)]
    pub(crate) namespace_selector: Option<LabelSelector>,
    #[serde(default)]
    pub(crate) object_selector: Option<LabelSelector>,
    #[serde(default)]
    pub(crate) resource_rules: Vec<NamedRule>,
    #[serde(default)]
    pub(crate) exclude_resource_rules: Vec<NamedRule>,
    #[serde(default)]
    pub(crate) match_policy: Option<String>,
}

/// `NamedRuleWithOperations`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NamedRule {
    #[serde(default)]
    pub(crate) resource_names: Vec<String>,
    #[serde(default)]
    pub(crate) operations: Vec<String>,
    #[serde(default)]
    pub(crate) api_groups: Vec<String>,
    #[serde(default)]
    pub(crate) api_versions: Vec<String>,
    #[serde(default)]
    pub(crate) resources: Vec<String>,
    #[serde(default)]
    pub(crate) scope: Option<String>,
}

impl NamedRule {
    /// The `RuleWithOperations` part.
    pub(crate) fn rule(&self) -> RuleWithOperations {
        RuleWithOperations {
            operations: self.operations.clone(),
            api_groups: self.api_groups.clone(),
            api_versions: self.api_versions.clone(),
            resources: self.resources.clone(),
            scope: self.scope.clone(),
        }
    }
}

/// `Validation`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Validation {
    #[serde(default)]
    pub(crate) expression: String,
    #[serde(default)]
    pub(crate) message: String,
    #[serde(default)]
    pub(crate) reason: Option<String>,
    #[serde(default)]
    pub(crate) message_expression: String,
}

/// `AuditAnnotation`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AuditAnnotation {
    #[serde(default)]
    pub(crate) key: String,
    #[serde(default)]
    pub(crate) value_expression: String,
}

/// `Variable`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Variable {
    #[serde(default)]
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) expression: String,
}

/// A ValidatingAdmissionPolicyBinding.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BindingObject {
    #[serde(default)]
    pub(crate) metadata: ObjectMeta,
    #[serde(default)]
    pub(crate) spec: BindingSpec,
}

/// `ValidatingAdmissionPolicyBindingSpec`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BindingSpec {
    #[serde(default)]
    pub(crate) policy_name: String,
    #[serde(default)]
    pub(crate) param_ref: Option<ParamRef>,
    #[serde(default)]
    pub(crate) match_resources: Option<MatchResources>,
    #[serde(default)]
    pub(crate) validation_actions: Vec<String>,
}

/// `ParamRef`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ParamRef {
    #[serde(default)]
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) namespace: String,
    #[serde(default)]
    pub(crate) selector: Option<LabelSelector>,
    #[serde(default)]
    pub(crate) parameter_not_found_action: Option<String>,
}

/// Reads `value` as `T`; a shape error is one field error at the path serde stopped at.
///
/// # Errors
/// `Invalid value` at the offending path, serde's message as the detail.
pub(crate) fn decode<T: serde::de::DeserializeOwned>(
    value: &serde_json::Value,
) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        FieldError::new(
            ErrorType::TypeInvalid,
            if path == "." { String::new() } else { path },
            BadValue::Omitted,
            e.into_inner().to_string(),
        )
    })
}

/// `SetDefaults_ValidatingAdmissionPolicySpec` (failurePolicy Fail) and the match resources'.
pub(crate) fn default_policy(spec: &mut PolicySpec) {
    spec.failure_policy.get_or_insert_with(|| "Fail".into());
    if let Some(m) = &mut spec.match_constraints {
        default_match_resources(m);
    }
}

/// The binding's match resources' defaults.
pub(crate) fn default_binding(spec: &mut BindingSpec) {
    if let Some(m) = &mut spec.match_resources {
        default_match_resources(m);
    }
}

/// `SetDefaults_MatchResources` (matchPolicy Equivalent, empty selectors) and
/// `SetDefaults_NamedRuleWithOperations` (scope `*`).
fn default_match_resources(m: &mut MatchResources) {
    m.match_policy.get_or_insert_with(|| "Equivalent".into());
    m.namespace_selector
        .get_or_insert_with(LabelSelector::default);
    m.object_selector.get_or_insert_with(LabelSelector::default);
    for rule in m
        .resource_rules
        .iter_mut()
        .chain(m.exclude_resource_rules.iter_mut())
    {
        rule.scope.get_or_insert_with(|| "*".into());
    }
}

/// `ValidateObjectMeta` with `NameIsDNSSubdomain`, as far as a name goes.
pub(crate) fn validate_name(name: &str, bad: &mut impl FnMut(FieldError)) {
    if name.is_empty() {
        bad(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else if !names::is_dns1123_subdomain(name) {
        bad(FieldError::invalid(
            "metadata.name",
            name,
            DNS1123_SUBDOMAIN,
        ));
    }
}

/// `IsDNS1123Subdomain`'s message.
const DNS1123_SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// The structural checks of `validateValidatingAdmissionPolicySpec` (the CEL ones are made
/// while compiling): failurePolicy, paramKind, matchConstraints, at least one validation or
/// audit annotation, audit annotation keys.
pub(crate) fn validate_policy_spec(
    policy_name: &str,
    spec: &PolicySpec,
    bad: &mut impl FnMut(FieldError),
) {
    match spec.failure_policy.as_deref() {
        None => bad(FieldError::required("spec.failurePolicy", "")),
        Some("Fail" | "Ignore") => {}
        Some(other) => bad(FieldError::not_supported(
            "spec.failurePolicy",
            other,
            &["Fail", "Ignore"],
        )),
    }
    if let Some(kind) = &spec.param_kind {
        validate_param_kind(kind, bad);
    }
    match &spec.match_constraints {
        None => bad(FieldError::required("spec.matchConstraints", "")),
        Some(m) => {
            validate_match_resources(m, "spec.matchConstraints", bad);
            // At least one resourceRule gives the expressions their type information.
            if m.resource_rules.is_empty() {
                bad(FieldError::required(
                    "spec.matchConstraints.resourceRules",
                    "",
                ));
            }
        }
    }
    if spec.match_conditions.len() > 64 {
        bad(FieldError::too_many(
            "spec.matchConditions",
            spec.match_conditions.len() as i64,
            64,
        ));
    }
    if spec.validations.is_empty() && spec.audit_annotations.is_empty() {
        let detail = "validations or auditAnnotations must contain at least one item";
        bad(FieldError::required("spec.validations", detail));
        bad(FieldError::required("spec.auditAnnotations", detail));
    }
    validate_audit_annotation_keys(policy_name, spec, bad);
}

/// Audit annotation keys: `<policy name>/<key>` a qualified name, keys unique, at most 20.
fn validate_audit_annotation_keys(
    policy_name: &str,
    spec: &PolicySpec,
    bad: &mut impl FnMut(FieldError),
) {
    if spec.audit_annotations.len() > 20 {
        bad(FieldError::new(
            ErrorType::Invalid,
            "spec.auditAnnotations",
            BadValue::Omitted,
            "must not have more than 20 auditAnnotations",
        ));
    }
    let mut keys = HashSet::new();
    for (i, a) in spec.audit_annotations.iter().enumerate() {
        let at = format!("spec.auditAnnotations[{i}].key");
        if policy_name.is_empty() {
            bad(FieldError::invalid(
                at.clone(),
                &a.key,
                "requires metadata.name be non-empty",
            ));
        } else {
            let qualified = format!("{policy_name}/{}", a.key);
            for msg in names::qualified_name_errors(&qualified) {
                bad(FieldError::invalid(at.clone(), &qualified, msg));
            }
        }
        if !keys.insert(a.key.as_str()) {
            bad(FieldError::duplicate(at, &a.key));
        }
    }
}

/// `validateParamKind`.
fn validate_param_kind(kind: &ParamKind, bad: &mut impl FnMut(FieldError)) {
    let at = "spec.paramKind";
    if kind.api_version.is_empty() {
        bad(FieldError::required(format!("{at}.apiVersion"), ""));
    } else if kind.api_version.matches('/').count() > 1 {
        bad(FieldError::invalid(
            format!("{at}.apiVersion"),
            &kind.api_version,
            format!("unexpected GroupVersion string: {}", kind.api_version),
        ));
    } else {
        let (group, version) = kind
            .api_version
            .split_once('/')
            .unwrap_or(("", &kind.api_version));
        if !group.is_empty() && !names::is_dns1123_subdomain(group) {
            bad(FieldError::invalid(
                format!("{at}.apiVersion"),
                group,
                DNS1123_SUBDOMAIN,
            ));
        }
        if version.is_empty() {
            bad(FieldError::invalid(
                format!("{at}.apiVersion"),
                &kind.api_version,
                "version must be specified",
            ));
        } else if !names::is_dns1035_label(version) {
            bad(FieldError::invalid(
                format!("{at}.apiVersion"),
                version,
                DNS1035_LABEL,
            ));
        }
    }
    if kind.kind.is_empty() {
        bad(FieldError::required(format!("{at}.kind"), ""));
    } else if !names::is_dns1035_label(&kind.kind.to_lowercase()) {
        bad(FieldError::invalid(
            format!("{at}.kind"),
            &kind.kind,
            format!("may have mixed case, but should otherwise match: {DNS1035_LABEL}"),
        ));
    }
}

/// `IsDNS1035Label`'s message.
const DNS1035_LABEL: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

/// `validateMatchResources` at `at`.
pub(crate) fn validate_match_resources(
    m: &MatchResources,
    at: &str,
    bad: &mut impl FnMut(FieldError),
) {
    match m.match_policy.as_deref() {
        None => bad(FieldError::required(format!("{at}.matchPolicy"), "")),
        Some("Exact" | "Equivalent") => {}
        Some(other) => bad(FieldError::not_supported(
            format!("{at}.matchPolicy"),
            other,
            &["Equivalent", "Exact"],
        )),
    }
    for (field, selector) in [
        ("namespaceSelector", &m.namespace_selector),
        ("objectSelector", &m.object_selector),
    ] {
        match selector {
            None => bad(FieldError::required(format!("{at}.{field}"), "")),
            Some(s) => {
                crate::matching::selector::validate_label_selector(
                    Some(s),
                    &format!("{at}.{field}"),
                    bad,
                );
            }
        }
    }
    for (list, rules) in [
        ("resourceRules", &m.resource_rules),
        ("excludeResourceRules", &m.exclude_resource_rules),
    ] {
        for (i, rule) in rules.iter().enumerate() {
            validate_named_rule(rule, &format!("{at}.{list}[{i}]"), bad);
        }
    }
}

/// `validateNamedRuleWithOperations`: resource names are path segments and unique; the rule
/// as `validateRuleWithOperations`.
fn validate_named_rule(rule: &NamedRule, at: &str, bad: &mut impl FnMut(FieldError)) {
    let mut seen = HashSet::new();
    for (i, name) in rule.resource_names.iter().enumerate() {
        let field = format!("{at}.resourceNames[{i}]");
        if let Some(msg) = path_segment_problem(name) {
            bad(FieldError::invalid(field.clone(), name, msg));
        }
        if !seen.insert(name.as_str()) {
            bad(FieldError::duplicate(field, name));
        }
    }
    crate::matching::rules::validate_rule(&rule.rule(), at, bad);
}

/// `path.ValidatePathSegmentName`'s first complaint about `name`.
pub(crate) fn path_segment_problem(name: &str) -> Option<String> {
    if name == "." || name == ".." {
        return Some(format!("may not be '{name}'"));
    }
    ["/", "%"]
        .into_iter()
        .find(|s| name.contains(s))
        .map(|s| format!("may not contain '{s}'"))
}

/// `validateValidatingAdmissionPolicyBindingSpec`: policyName, paramRef, matchResources (at
/// upstream's misspelt path `spec.matchResouces`), validationActions.
pub(crate) fn validate_binding_spec(spec: &BindingSpec, bad: &mut impl FnMut(FieldError)) {
    if spec.policy_name.is_empty() {
        bad(FieldError::required("spec.policyName", ""));
    } else if !names::is_dns1123_subdomain(&spec.policy_name) {
        bad(FieldError::invalid(
            "spec.policyName",
            &spec.policy_name,
            DNS1123_SUBDOMAIN,
        ));
    }
    if let Some(param_ref) = &spec.param_ref {
        validate_param_ref(param_ref, bad);
    }
    if let Some(m) = &spec.match_resources {
        validate_match_resources(m, "spec.matchResouces", bad);
    }
    validate_validation_actions(&spec.validation_actions, bad);
}

/// `validateParamRef`.
fn validate_param_ref(pr: &ParamRef, bad: &mut impl FnMut(FieldError)) {
    let at = "spec.paramRef";
    let exclusive = "name and selector are mutually exclusive";
    if !pr.name.is_empty() {
        if let Some(msg) = path_segment_problem(&pr.name) {
            bad(FieldError::invalid(format!("{at}.name"), &pr.name, msg));
        }
        if pr.selector.is_some() {
            bad(FieldError::forbidden(format!("{at}.name"), exclusive));
        }
    }
    if pr.selector.is_some() && !pr.name.is_empty() {
        bad(FieldError::forbidden(format!("{at}.selector"), exclusive));
    }
    crate::matching::selector::validate_label_selector(
        pr.selector.as_ref(),
        &format!("{at}.selector"),
        bad,
    );
    if pr.name.is_empty() && pr.selector.is_none() {
        bad(FieldError::required(
            at,
            "one of name or selector must be specified",
        ));
    }
    match pr.parameter_not_found_action.as_deref() {
        None | Some("") => bad(FieldError::required(
            format!("{at}.parameterNotFoundAction"),
            "",
        )),
        Some("Deny" | "Allow") => {}
        Some(other) => bad(FieldError::not_supported(
            format!("{at}.parameterNotFoundAction"),
            other,
            &["Deny", "Allow"],
        )),
    }
}

/// `validateValidationActions`: known, unique, not both Deny and Warn, at least one.
fn validate_validation_actions(actions: &[String], bad: &mut impl FnMut(FieldError)) {
    let at = "spec.validationActions";
    let mut seen = HashSet::new();
    for (i, action) in actions.iter().enumerate() {
        if !matches!(action.as_str(), "Deny" | "Warn" | "Audit") {
            bad(FieldError::not_supported(
                format!("{at}[{i}]"),
                action,
                &["Audit", "Deny", "Warn"],
            ));
        }
        if !seen.insert(action.as_str()) {
            bad(FieldError::duplicate(format!("{at}[{i}]"), action));
        }
    }
    if seen.contains("Deny") && seen.contains("Warn") {
        bad(FieldError::invalid(
            at,
            // Go's `%#v` of the typed list, as `field.Invalid` prints a value that is neither a
            // string nor a number (`apimachinery/pkg/util/validation/field/errors.go`).
            BadValue::Text(format!(
                "[]admissionregistration.ValidationAction{{{}}}",
                actions
                    .iter()
                    .map(|a| format!("{a:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        ));
    }
    if seen.is_empty() {
        bad(FieldError::required(
            at,
            "at least one validation action is required",
        ));
    }
}
