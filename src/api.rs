//! The admissionregistration.k8s.io `v1` / `v1beta1` webhook configuration types, as they are
//! written in files (`kubectl get ... -o yaml`), before defaults. Plain data; depends on nothing.
//!
//! Field names are the Kubernetes JSON names verbatim. Every struct denies unknown fields: a
//! misspelt `namespaceSelecter` must not silently widen what a webhook sees. Scalars are
//! optional here so that "missing" becomes a validation error naming the field, not a parse error.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `ValidatingWebhookConfiguration` or `MutatingWebhookConfiguration`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WebhookConfiguration {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub webhooks: Vec<Webhook>,
}

/// `metav1.ObjectMeta`. Only `name` matters; the rest is accepted because `kubectl get -o yaml`
/// prints it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ObjectMeta {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub generate_name: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub self_link: Option<String>,
    #[serde(default)]
    pub uid: Option<String>,
    #[serde(default)]
    pub resource_version: Option<String>,
    #[serde(default)]
    pub generation: Option<i64>,
    #[serde(default)]
    pub creation_timestamp: Option<serde_json::Value>,
    #[serde(default)]
    pub deletion_timestamp: Option<serde_json::Value>,
    #[serde(default)]
    pub deletion_grace_period_seconds: Option<i64>,
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub annotations: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub owner_references: Option<serde_json::Value>,
    #[serde(default)]
    pub finalizers: Option<Vec<String>>,
    #[serde(default)]
    pub managed_fields: Option<serde_json::Value>,
}

/// `ValidatingWebhook` / `MutatingWebhook`. `reinvocationPolicy` exists only on the mutating
/// type; the loader reports it as an unknown field on a validating webhook.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Webhook {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub client_config: Option<WebhookClientConfig>,
    #[serde(default)]
    pub rules: Vec<RuleWithOperations>,
    #[serde(default)]
    pub failure_policy: Option<String>,
    #[serde(default)]
    pub match_policy: Option<String>,
    #[serde(default)]
    pub namespace_selector: Option<LabelSelector>,
    #[serde(default)]
    pub object_selector: Option<LabelSelector>,
    #[serde(default)]
    pub side_effects: Option<String>,
    #[serde(default)]
    pub timeout_seconds: Option<i64>,
    #[serde(default)]
    pub admission_review_versions: Option<Vec<String>>,
    #[serde(default)]
    pub reinvocation_policy: Option<String>,
    #[serde(default)]
    pub match_conditions: Vec<MatchCondition>,
}

/// `WebhookClientConfig`: exactly one of `url` or `service`; `caBundle` is base64 PEM.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WebhookClientConfig {
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub service: Option<ServiceReference>,
    #[serde(default)]
    pub ca_bundle: Option<String>,
}

/// `ServiceReference`: `https://{name}.{namespace}.svc:{port}{path}`, port defaulting to 443.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ServiceReference {
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub port: Option<i64>,
}

/// `RuleWithOperations`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RuleWithOperations {
    #[serde(default)]
    pub operations: Vec<String>,
    #[serde(default)]
    pub api_groups: Vec<String>,
    #[serde(default)]
    pub api_versions: Vec<String>,
    #[serde(default)]
    pub resources: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

impl RuleWithOperations {
    /// Whether this rule's groups, versions and resources match every request for
    /// `group/version` and the resource entry `entry` (`res`, `res/sub` or `res/*`), as
    /// `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules/rules.go`
    /// matches them: `*` or equal for groups and versions, and
    /// `(r == "*" || r == res) && (s == "*" || s == sub)` for each resource entry `r/s`.
    /// Operations and scope are not looked at.
    pub fn covers(&self, group: &str, version: &str, entry: &str) -> bool {
        let (res, sub) = entry.split_once('/').unwrap_or((entry, ""));
        self.names_group_version(group, version)
            && self.resources.iter().any(|r| {
                let (a, b) = r.split_once('/').unwrap_or((r, ""));
                (a == "*" || a == res) && (b == "*" || b == sub)
            })
    }

    /// Whether `apiGroups` and `apiVersions` each hold the value or `*` (`rules.go`'s group
    /// and version match).
    pub fn names_group_version(&self, group: &str, version: &str) -> bool {
        let any_or_star =
            |list: &[String], value: &str| list.iter().any(|s| s == "*" || s == value);
        any_or_star(&self.api_groups, group) && any_or_star(&self.api_versions, version)
    }
}

/// `metav1.LabelSelector`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LabelSelector {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_expressions: Option<Vec<LabelSelectorRequirement>>,
}

/// `metav1.LabelSelectorRequirement`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LabelSelectorRequirement {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub operator: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
}

/// `MatchCondition` (KEP-3716).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MatchCondition {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub expression: String,
}

/// `failurePolicy`: how a failed call (or a matchCondition error) is handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Fail open: the request is admitted.
    Ignore,
    /// Fail closed: the request is rejected.
    Fail,
}

impl FailurePolicy {
    /// The configuration spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            FailurePolicy::Ignore => "Ignore",
            FailurePolicy::Fail => "Fail",
        }
    }
}

/// `matchPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchPolicy {
    Exact,
    Equivalent,
}

/// `sideEffects`. `Unknown` and `Some` only come from configurations stored through v1beta1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SideEffects {
    None,
    NoneOnDryRun,
    Some,
    Unknown,
}

impl SideEffects {
    /// Whether the webhook may be called for a dry-run request (the dispatchers' `callHook`).
    pub fn supports_dry_run(self) -> bool {
        matches!(self, SideEffects::None | SideEffects::NoneOnDryRun)
    }
}

/// Which admission plugin a webhook belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WebhookType {
    Validating,
    Mutating,
}

impl WebhookType {
    /// `validating` / `mutating`, as used in logs and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookType::Validating => "validating",
            WebhookType::Mutating => "mutating",
        }
    }

    /// The kind of configuration that holds this type of webhook.
    pub fn configuration_kind(self) -> &'static str {
        match self {
            WebhookType::Validating => "ValidatingWebhookConfiguration",
            WebhookType::Mutating => "MutatingWebhookConfiguration",
        }
    }
}
