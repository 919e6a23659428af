//! CustomResourceDefinition objects in the configuration (apiextensions.k8s.io v1 and v1beta1,
//! with each version's defaults): a custom resource's versions and conversion strategy, for
//! matchPolicy Equivalent. Validated as `apiextensions-apiserver`'s
//! `validation.go` does for the fields used here. Depends on `api`, `backend`, `conversion`,
//! `field_error`.

use serde::Deserialize;

use crate::api::WebhookClientConfig;
use crate::backend::Backend;
use crate::resources::custom::{
    ConversionReviewVersion, ConversionStrategy, ConversionWebhook, CustomResource, CustomVersion,
};

use crate::field_error::{self, BadValue, Error as FieldError, ErrorList, ErrorType};
use crate::names;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Crd {
    #[serde(default)]
    metadata: Metadata,
    #[serde(default)]
    spec: Spec,
}

#[derive(Debug, Default, Deserialize)]
struct Metadata {
    #[serde(default)]
    name: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    #[serde(default)]
    group: String,
    #[serde(default)]
    names: Names,
    #[serde(default)]
    scope: String,
    /// v1beta1 only: the single (deprecated) version.
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    versions: Vec<Version>,
    /// v1beta1 only: subresources of every version.
    #[serde(default)]
    subresources: Option<Subresources>,
    #[serde(default)]
    conversion: Option<Conversion>,
}

#[derive(Debug, Default, Deserialize)]
struct Names {
    #[serde(default)]
    plural: String,
    #[serde(default)]
    kind: String,
}

#[derive(Debug, Default, Deserialize)]
struct Version {
    #[serde(default)]
    name: String,
    #[serde(default)]
    served: bool,
    #[serde(default)]
    storage: bool,
    #[serde(default)]
    subresources: Option<Subresources>,
}

#[derive(Debug, Default, Deserialize)]
struct Subresources {
    #[serde(default)]
    status: Option<serde_json::Value>,
    #[serde(default)]
    scale: Option<serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Conversion {
    #[serde(default)]
    strategy: Option<String>,
    /// v1.
    #[serde(default)]
    webhook: Option<WebhookConversion>,
    /// v1beta1.
    #[serde(default)]
    webhook_client_config: Option<WebhookClientConfig>,
    /// v1beta1 (v1 has it under `webhook`).
    #[serde(default)]
    conversion_review_versions: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WebhookConversion {
    #[serde(default)]
    client_config: Option<WebhookClientConfig>,
    #[serde(default)]
    conversion_review_versions: Option<Vec<String>>,
}

/// Why a CustomResourceDefinition is refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CrdError {
    /// The object does not have a CustomResourceDefinition's shape: where (a serde path such
    /// as `spec.versions[0].served`), and the decoder's error.
    #[error("{field}: {error}")]
    Decode {
        field: String,
        error: serde_json::Error,
    },
    /// Validation errors (`ValidateCustomResourceDefinition` in
    /// `staging/src/k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation/validation.go`),
    /// shown as `ErrorList.ToAggregate` shows them.
    #[error("{}", field_error::aggregate(.0))]
    Invalid(ErrorList),
}

/// Parses, defaults and validates one CustomResourceDefinition; `v1beta1` selects that
/// version's shape and defaults (`spec.version`, top-level `subresources`,
/// `webhookClientConfig`, `conversionReviewVersions` defaulting to `[v1beta1]`).
///
/// # Errors
/// [`CrdError::Decode`] when the object does not have a CustomResourceDefinition's shape;
/// [`CrdError::Invalid`] with every validation error, fields relative to the object
/// (`spec.versions[1].name`).
pub(crate) fn compile(value: serde_json::Value, v1beta1: bool) -> Result<CustomResource, CrdError> {
    let crd: Crd = serde_path_to_error::deserialize(value).map_err(|e| CrdError::Decode {
        field: e.path().to_string(),
        error: e.into_inner(),
    })?;
    let mut problems = ErrorList::new();
    let mut bad = |error: FieldError| problems.push(error);
    let spec = crd.spec;
    validate_names(&crd.metadata.name, &spec, &mut bad);
    let v1beta1_subresources = spec.subresources.filter(|_| v1beta1);
    let single = spec.version.filter(|_| v1beta1);
    let versions = versions(spec.versions, single, v1beta1_subresources, &mut bad);
    let strategy = conversion_strategy(spec.conversion, v1beta1, &mut bad);
    match strategy {
        Some(strategy) if problems.is_empty() => Ok(CustomResource {
            name: crd.metadata.name,
            group: spec.group,
            plural: spec.names.plural,
            kind: spec.names.kind,
            versions,
            strategy,
        }),
        _ => Err(CrdError::Invalid(problems)),
    }
}

/// `metadata.name`, `spec.group`, `spec.names` and `spec.scope` (`ValidateCustomResourceDefinition`).
fn validate_names(name: &str, spec: &Spec, bad: &mut impl FnMut(FieldError)) {
    if spec.group.is_empty() {
        bad(FieldError::required("spec.group", ""));
    } else if !names::is_dns1123_subdomain(&spec.group) || !spec.group.contains('.') {
        bad(FieldError::invalid(
            "spec.group",
            &spec.group,
            "should be a domain with at least one dot",
        ));
    }
    if spec.names.plural.is_empty() {
        bad(FieldError::required("spec.names.plural", ""));
    } else if !names::is_dns1035_label(&spec.names.plural) {
        bad(FieldError::invalid(
            "spec.names.plural",
            &spec.names.plural,
            "a lowercase RFC 1035 label is required",
        ));
    }
    if spec.names.kind.is_empty() {
        bad(FieldError::required("spec.names.kind", ""));
    } else if !names::is_dns1035_label(&spec.names.kind.to_lowercase()) {
        bad(FieldError::invalid(
            "spec.names.kind",
            &spec.names.kind,
            "lowercased, an RFC 1035 label is required",
        ));
    }
    let expected_name = format!("{}.{}", spec.names.plural, spec.group);
    if name != expected_name {
        bad(FieldError::invalid(
            "metadata.name",
            name,
            format!(
                "must be spec.names.plural+\".\"+spec.group ({})",
                field_error::quote(&expected_name)
            ),
        ));
    }
    if !matches!(spec.scope.as_str(), "Namespaced" | "Cluster") {
        bad(if spec.scope.is_empty() {
            FieldError::required("spec.scope", "")
        } else {
            FieldError::not_supported("spec.scope", &spec.scope, &["Cluster", "Namespaced"])
        });
    }
}

/// `spec.versions` (v1beta1: `spec.version` first, `spec.subresources` for every version)
/// validated as `ValidateCustomResourceDefinitionSpec` does: the served versions with their
/// subresources.
fn versions(
    mut declared: Vec<Version>,
    single: Option<String>,
    shared: Option<Subresources>,
    bad: &mut impl FnMut(FieldError),
) -> Vec<CustomVersion> {
    if let Some(single) = single {
        match declared.first() {
            None => declared.push(Version {
                name: single,
                served: true,
                storage: true,
                subresources: None,
            }),
            Some(first) if first.name != single => bad(FieldError::invalid(
                "spec.version",
                &single,
                "must match the first version in spec.versions",
            )),
            Some(_) => {}
        }
    }
    if declared.is_empty() {
        bad(FieldError::required(
            "spec.versions",
            "must have at least one version",
        ));
    }
    let storage = declared.iter().filter(|v| v.storage).count();
    if !declared.is_empty() && storage != 1 {
        bad(FieldError::new(
            ErrorType::Invalid,
            "spec.versions",
            BadValue::Omitted,
            "must have exactly one version marked as storage version",
        ));
    }
    let mut versions: Vec<CustomVersion> = Vec::with_capacity(declared.len());
    for (i, v) in declared.iter().enumerate() {
        if !names::is_dns1035_label(&v.name) {
            bad(FieldError::invalid(
                format!("spec.versions[{i}].name"),
                &v.name,
                "a DNS-1035 label is required",
            ));
        }
        if versions.iter().any(|seen| seen.name == v.name) {
            bad(FieldError::duplicate(
                format!("spec.versions[{i}].name"),
                &v.name,
            ));
        }
        let subresources = v.subresources.as_ref().or(shared.as_ref());
        versions.push(CustomVersion {
            name: v.name.clone(),
            served: v.served,
            status: subresources.is_some_and(|s| s.status.is_some()),
            scale: subresources.is_some_and(|s| s.scale.is_some()),
        });
    }
    versions
}

/// `spec.conversion`, defaulted (`None`) and validated; `None` when it has problems.
fn conversion_strategy(
    conversion: Option<Conversion>,
    v1beta1: bool,
    bad: &mut impl FnMut(FieldError),
) -> Option<ConversionStrategy> {
    let conversion = conversion.unwrap_or_default();
    let (client_config, review_versions, at) = if v1beta1 {
        let versions = conversion
            .conversion_review_versions
            .unwrap_or_else(|| vec!["v1beta1".to_string()]);
        (
            conversion.webhook_client_config,
            Some(versions),
            "spec.conversion.webhookClientConfig",
        )
    } else {
        let webhook = conversion.webhook;
        let has_webhook = webhook.is_some();
        let (cc, versions) = webhook
            .map(|w| (w.client_config, w.conversion_review_versions))
            .unwrap_or_default();
        if conversion.strategy.as_deref() == Some("Webhook") && !has_webhook {
            bad(FieldError::required(
                "spec.conversion.webhook",
                "required when strategy is set to Webhook",
            ));
            return None;
        }
        if conversion.strategy.as_deref() != Some("Webhook") && has_webhook {
            bad(FieldError::forbidden(
                "spec.conversion.webhook",
                "should not be set when strategy is not set to Webhook",
            ));
            return None;
        }
        (cc, versions, "spec.conversion.webhook.clientConfig")
    };
    match conversion.strategy.as_deref().unwrap_or("None") {
        "None" => {
            if v1beta1 && client_config.is_some() {
                bad(FieldError::forbidden(
                    at,
                    "should not be set when strategy is not set to Webhook",
                ));
                return None;
            }
            Some(ConversionStrategy::None)
        }
        "Webhook" => webhook_strategy(client_config, review_versions, v1beta1, at, bad),
        other => {
            bad(FieldError::not_supported(
                "spec.conversion.strategy",
                other,
                &["None", "Webhook"],
            ));
            None
        }
    }
}

/// `strategy: Webhook`: its clientConfig (under `at`) and conversionReviewVersions.
fn webhook_strategy(
    client_config: Option<WebhookClientConfig>,
    review_versions: Option<Vec<String>>,
    v1beta1: bool,
    at: &str,
    bad: &mut impl FnMut(FieldError),
) -> Option<ConversionStrategy> {
    let versions_at = if v1beta1 {
        "spec.conversion.conversionReviewVersions"
    } else {
        "spec.conversion.webhook.conversionReviewVersions"
    };
    let review_versions = review_versions.unwrap_or_default();
    let review_version = ConversionReviewVersion::negotiate(&review_versions);
    if review_versions.is_empty() {
        bad(FieldError::required(
            versions_at,
            "must specify one of v1, v1beta1",
        ));
    } else if review_version.is_none() {
        // Rust's list rendering (`["v2"]`), where Go's `%#v` would print `[]string{"v2"}`:
        // kept as this message has always read.
        bad(FieldError::invalid(
            versions_at,
            BadValue::Text(format!("{review_versions:?}")),
            "must include at least one of v1, v1beta1",
        ));
    }
    let Some(cc) = client_config else {
        bad(FieldError::required(
            at,
            "required when strategy is set to Webhook",
        ));
        return None;
    };
    match Backend::from_client_config(&cc) {
        Ok(backend) => Some(ConversionStrategy::Webhook(ConversionWebhook {
            backend: backend.into(),
            review_versions,
            review_version,
        })),
        Err(mut error) => {
            // The backend's fields are under `clientConfig`; here they are under `at`.
            let field = error
                .field
                .strip_prefix("clientConfig")
                .unwrap_or(&error.field);
            error.field = format!("{at}{field}");
            bad(error);
            None
        }
    }
}
