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
#[allow(
    dead_code,
    reason = "declared so that deny_unknown_fields accepts them"
)]
pub(crate) struct WebhookConfiguration {
    #[serde(default)]
    pub(crate) api_version: String,
    #[serde(default)]
    pub(crate) kind: String,
    #[serde(default)]
    pub(crate) metadata: ObjectMeta,
    #[serde(default)]
    pub(crate) webhooks: Vec<Webhook>,
}

/// `metav1.ObjectMeta`. Only `name` matters; the rest is accepted because `kubectl get -o yaml`
/// prints it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(
    dead_code,
    reason = "declared so that deny_unknown_fields accepts (and type-checks) what kubectl prints"
)]
pub(crate) struct ObjectMeta {
    #[serde(default)]
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) generate_name: Option<String>,
    #[serde(default)]
    pub(crate) namespace: Option<String>,
    #[serde(default)]
    pub(crate) self_link: Option<String>,
    #[serde(default)]
    pub(crate) uid: Option<String>,
    #[serde(default)]
    pub(crate) resource_version: Option<String>,
    #[serde(default)]
    pub(crate) generation: Option<i64>,
    #[serde(default)]
    pub(crate) creation_timestamp: Option<serde_json::Value>,
    #[serde(default)]
    pub(crate) deletion_timestamp: Option<serde_json::Value>,
    #[serde(default)]
    pub(crate) deletion_grace_period_seconds: Option<i64>,
    #[serde(default)]
    pub(crate) labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub(crate) annotations: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub(crate) owner_references: Option<serde_json::Value>,
    #[serde(default)]
    pub(crate) finalizers: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) managed_fields: Option<serde_json::Value>,
}

/// `ValidatingWebhook` / `MutatingWebhook`. `reinvocationPolicy` exists only on the mutating
/// type; the loader reports it as an unknown field on a validating webhook.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Webhook {
    /// The webhook's name, unique in its configuration (`admission.example.com`).
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub(crate) client_config: Option<WebhookClientConfig>,
    /// Which operations on which resources the webhook is called for (`RuleWithOperations`).
    #[serde(default)]
    pub rules: Vec<RuleWithOperations>,
    #[serde(default)]
    pub(crate) failure_policy: Option<String>,
    #[serde(default)]
    pub(crate) match_policy: Option<String>,
    #[serde(default)]
    pub(crate) namespace_selector: Option<LabelSelector>,
    #[serde(default)]
    pub(crate) object_selector: Option<LabelSelector>,
    #[serde(default)]
    pub(crate) side_effects: Option<String>,
    #[serde(default)]
    pub(crate) timeout_seconds: Option<i64>,
    #[serde(default)]
    pub(crate) admission_review_versions: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) reinvocation_policy: Option<String>,
    #[serde(default)]
    pub(crate) match_conditions: Vec<MatchCondition>,
}

/// `WebhookClientConfig`: exactly one of `url` or `service`; `caBundle` is base64 PEM.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WebhookClientConfig {
    /// `https://host[:port]/path` of a backend outside the cluster.
    #[serde(default)]
    pub url: Option<String>,
    /// A Service in the cluster that fronts the backend.
    #[serde(default)]
    pub service: Option<ServiceReference>,
    /// PEM CA certificates (base64 in YAML/JSON) the backend's serving certificate must chain to; the system roots when absent.
    #[serde(default)]
    pub ca_bundle: Option<String>,
}

/// `ServiceReference`: `https://{name}.{namespace}.svc:{port}{path}`, port defaulting to 443.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ServiceReference {
    #[serde(default)]
    pub(crate) namespace: String,
    #[serde(default)]
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) path: Option<String>,
    #[serde(default)]
    pub(crate) port: Option<i64>,
}

/// `RuleWithOperations`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RuleWithOperations {
    #[serde(default)]
    pub(crate) operations: Vec<String>,
    #[serde(default)]
    pub(crate) api_groups: Vec<String>,
    #[serde(default)]
    pub(crate) api_versions: Vec<String>,
    #[serde(default)]
    pub(crate) resources: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) scope: Option<String>,
}

impl RuleWithOperations {
    /// Whether this rule's groups, versions and resources match every request for
    /// `group/version` and the resource entry `entry` (`res`, `res/sub` or `res/*`), as
    /// `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules/rules.go`
    /// matches them: `*` or equal for groups and versions, and
    /// `(r == "*" || r == res) && (s == "*" || s == sub)` for each resource entry `r/s`.
    /// Operations and scope are not looked at.
    pub(crate) fn covers(&self, group: &str, version: &str, entry: &str) -> bool {
        self.names_group_version(group, version) && self.names_resource(entry)
    }

    /// Whether one of `resources` matches the resource entry `entry` (`res`, `res/sub` or
    /// `res/*`, each part possibly `*`): `(r == "*" || r == res) && (s == "*" || s == sub)` for
    /// some entry `r/s` (`rules.go`). A `*` in `entry` is only matched by a `*`, so this also
    /// says whether this rule's resources cover every resource `entry` (as a rule entry) does.
    pub(crate) fn names_resource(&self, entry: &str) -> bool {
        let (res, sub) = entry.split_once('/').unwrap_or((entry, ""));
        self.resources.iter().any(|r| {
            let (a, b) = r.split_once('/').unwrap_or((r, ""));
            (a == "*" || a == res) && (b == "*" || b == sub)
        })
    }

    /// Whether `apiGroups` and `apiVersions` each hold the value or `*` (`rules.go`'s group
    /// and version match).
    pub(crate) fn names_group_version(&self, group: &str, version: &str) -> bool {
        let any_or_star =
            |list: &[String], value: &str| list.iter().any(|s| s == "*" || s == value);
        any_or_star(&self.api_groups, group) && any_or_star(&self.api_versions, version)
    }
}

/// `metav1.LabelSelector`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LabelSelector {
    /// Labels that must all be present with these values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_labels: Option<BTreeMap<String, String>>,
    /// Requirements (`In`, `NotIn`, `Exists`, `DoesNotExist`) that must all hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_expressions: Option<Vec<LabelSelectorRequirement>>,
}

/// `metav1.LabelSelectorRequirement`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LabelSelectorRequirement {
    /// The label key the requirement applies to.
    #[serde(default)]
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    #[serde(default)]
    pub operator: String,
    /// The values for `In`/`NotIn`; empty for `Exists`/`DoesNotExist`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
}

/// `MatchCondition` (KEP-3716).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MatchCondition {
    #[serde(default)]
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) expression: String,
}

/// `failurePolicy`: how a failed call (or a matchCondition error) is handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FailurePolicy {
    /// Fail open: the request is admitted.
    Ignore,
    /// Fail closed: the request is rejected.
    Fail,
}

impl FailurePolicy {
    /// The configuration spelling.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            FailurePolicy::Ignore => "Ignore",
            FailurePolicy::Fail => "Fail",
        }
    }
}

/// `reinvocationPolicy` of a mutating webhook (`Never` when absent, v1 and v1beta1 alike:
/// `SetDefaults_MutatingWebhook` in `pkg/apis/admissionregistration/v1/defaults.go`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum ReinvocationPolicy {
    /// Called once per admission.
    #[default]
    Never,
    /// Called again when a later webhook changed the object after its call
    /// (`reinvocationcontext.go`).
    IfNeeded,
}

impl ReinvocationPolicy {
    /// The configuration spelling.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ReinvocationPolicy::Never => "Never",
            ReinvocationPolicy::IfNeeded => "IfNeeded",
        }
    }

    /// The policy a configuration spells `s`, if any.
    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "Never" => Some(ReinvocationPolicy::Never),
            "IfNeeded" => Some(ReinvocationPolicy::IfNeeded),
            _ => None,
        }
    }
}

/// `matchPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MatchPolicy {
    Exact,
    Equivalent,
}

impl MatchPolicy {
    /// The configuration spelling.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            MatchPolicy::Exact => "Exact",
            MatchPolicy::Equivalent => "Equivalent",
        }
    }
}

/// `sideEffects`. `Unknown` and `Some` only come from configurations stored through v1beta1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SideEffects {
    None,
    NoneOnDryRun,
    Some,
    Unknown,
}

impl SideEffects {
    /// The configuration spelling.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SideEffects::None => "None",
            SideEffects::NoneOnDryRun => "NoneOnDryRun",
            SideEffects::Some => "Some",
            SideEffects::Unknown => "Unknown",
        }
    }

    /// Whether the webhook may be called for a dry-run request (the dispatchers' `callHook`).
    pub(crate) fn supports_dry_run(self) -> bool {
        matches!(self, SideEffects::None | SideEffects::NoneOnDryRun)
    }
}

/// Which admission plugin a webhook belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WebhookType {
    /// A `ValidatingWebhookConfiguration` webhook: may only allow or deny.
    Validating,
    /// A `MutatingWebhookConfiguration` webhook: may also patch the object.
    Mutating,
}

impl WebhookType {
    /// `validating` / `mutating`, as used in logs and metric labels.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            WebhookType::Validating => "validating",
            WebhookType::Mutating => "mutating",
        }
    }

    /// The kind of configuration that holds this type of webhook (`ValidatingWebhookConfiguration`).
    pub fn configuration_kind(self) -> &'static str {
        match self {
            WebhookType::Validating => "ValidatingWebhookConfiguration",
            WebhookType::Mutating => "MutatingWebhookConfiguration",
        }
    }
}

/// `admission-proxy.io/v1alpha1` `Candidate`: a replacement for one legacy webhook, decided in
/// the background beside it on the same requests and compared with it. The proxy's own kind;
/// strictly decoded like the webhook configurations.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(
    dead_code,
    reason = "declared so that deny_unknown_fields accepts them"
)]
pub(crate) struct CandidateObject {
    #[serde(default)]
    pub(crate) api_version: String,
    #[serde(default)]
    pub(crate) kind: String,
    #[serde(default)]
    pub(crate) metadata: ObjectMeta,
    #[serde(default)]
    pub(crate) spec: CandidateSpec,
}

/// `Candidate.spec`: the legacy webhook and exactly one of `backend` or `policy`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct CandidateSpec {
    /// `webhooks[].name` of the legacy webhook.
    #[serde(default)]
    pub(crate) webhook: String,
    /// `Validating` or `Mutating`; needed only when both types have a webhook of that name.
    #[serde(default)]
    pub(crate) webhook_type: Option<String>,
    #[serde(default)]
    pub(crate) backend: Option<CandidateBackend>,
    #[serde(default)]
    pub(crate) policy: Option<PolicyReference>,
}

/// A mirrored backend: sent the AdmissionReview the legacy webhook is sent (its own uid).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct CandidateBackend {
    #[serde(default)]
    pub(crate) client_config: Option<WebhookClientConfig>,
    #[serde(default)]
    pub(crate) admission_review_versions: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) timeout_seconds: Option<i64>,
}

/// A `ValidatingAdmissionPolicy` in the configuration directory, by `metadata.name`; its
/// `ValidatingAdmissionPolicyBinding`s are those whose `spec.policyName` names it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct PolicyReference {
    #[serde(default)]
    pub(crate) name: String,
}
