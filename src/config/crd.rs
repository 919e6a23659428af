//! CustomResourceDefinition objects in the configuration (apiextensions.k8s.io v1 and v1beta1,
//! with each version's defaults): a custom resource's versions and conversion strategy, for
//! matchPolicy Equivalent (issue 5). Validated as `apiextensions-apiserver`'s
//! `validation.go` does for the fields used here. Depends on `api`, `backend`, `conversion`.

use serde::Deserialize;

use crate::api::WebhookClientConfig;
use crate::backend::Backend;
use crate::resources::custom::{
    ConversionReviewVersion, ConversionStrategy, ConversionWebhook, CustomResource, CustomVersion,
};

use super::{names, FieldProblems};

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

/// Parses, defaults and validates one CustomResourceDefinition; `v1beta1` selects that
/// version's shape and defaults (`spec.version`, top-level `subresources`,
/// `webhookClientConfig`, `conversionReviewVersions` defaulting to `[v1beta1]`).
///
/// # Errors
/// Every `(field, message)` problem, fields relative to the object (`spec.versions[1].name`).
pub fn compile(value: serde_json::Value, v1beta1: bool) -> Result<CustomResource, FieldProblems> {
    let crd: Crd = serde_path_to_error::deserialize(value)
        .map_err(|e| vec![(e.path().to_string(), e.into_inner().to_string())])?;
    let mut problems: FieldProblems = Vec::new();
    let mut bad = |field: &str, message: String| problems.push((field.to_string(), message));
    let spec = crd.spec;
    if spec.group.is_empty() {
        bad("spec.group", "Required value".into());
    } else if !names::is_dns1123_subdomain(&spec.group) || !spec.group.contains('.') {
        bad(
            "spec.group",
            format!(
                "Invalid value: {:?}: should be a domain with at least one dot",
                spec.group
            ),
        );
    }
    if spec.names.plural.is_empty() {
        bad("spec.names.plural", "Required value".into());
    } else if !names::is_dns1035_label(&spec.names.plural) {
        bad(
            "spec.names.plural",
            format!(
                "Invalid value: {:?}: a lowercase RFC 1035 label is required",
                spec.names.plural
            ),
        );
    }
    if spec.names.kind.is_empty() {
        bad("spec.names.kind", "Required value".into());
    } else if !names::is_dns1035_label(&spec.names.kind.to_lowercase()) {
        bad(
            "spec.names.kind",
            format!(
                "Invalid value: {:?}: lowercased, an RFC 1035 label is required",
                spec.names.kind
            ),
        );
    }
    let expected_name = format!("{}.{}", spec.names.plural, spec.group);
    if crd.metadata.name != expected_name {
        bad(
            "metadata.name",
            format!(
                "Invalid value: {:?}: must be spec.names.plural+\".\"+spec.group ({expected_name:?})",
                crd.metadata.name
            ),
        );
    }
    if !matches!(spec.scope.as_str(), "Namespaced" | "Cluster") {
        let message = if spec.scope.is_empty() {
            "Required value".to_string()
        } else {
            format!(
                "Unsupported value: {:?}: supported values: \"Cluster\", \"Namespaced\"",
                spec.scope
            )
        };
        bad("spec.scope", message);
    }
    let mut declared = spec.versions;
    if let Some(single) = spec.version.filter(|_| v1beta1) {
        match declared.first() {
            None => declared.push(Version {
                name: single,
                served: true,
                storage: true,
                subresources: None,
            }),
            Some(first) if first.name != single => bad(
                "spec.version",
                format!("Invalid value: {single:?}: must match the first version in spec.versions"),
            ),
            Some(_) => {}
        }
    }
    if declared.is_empty() {
        bad(
            "spec.versions",
            "Required value: must have at least one version".into(),
        );
    }
    let storage = declared.iter().filter(|v| v.storage).count();
    if !declared.is_empty() && storage != 1 {
        bad(
            "spec.versions",
            "Invalid value: must have exactly one version marked as storage version".into(),
        );
    }
    let shared = spec.subresources.filter(|_| v1beta1);
    let mut versions: Vec<CustomVersion> = Vec::with_capacity(declared.len());
    for (i, v) in declared.iter().enumerate() {
        if !names::is_dns1035_label(&v.name) {
            bad(
                &format!("spec.versions[{i}].name"),
                format!("Invalid value: {:?}: a DNS-1035 label is required", v.name),
            );
        }
        if versions.iter().any(|seen| seen.name == v.name) {
            bad(
                &format!("spec.versions[{i}].name"),
                format!("Duplicate value: {:?}", v.name),
            );
        }
        let subresources = v.subresources.as_ref().or(shared.as_ref());
        versions.push(CustomVersion {
            name: v.name.clone(),
            served: v.served,
            status: subresources.is_some_and(|s| s.status.is_some()),
            scale: subresources.is_some_and(|s| s.scale.is_some()),
        });
    }
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
        _ => Err(problems),
    }
}

/// `spec.conversion`, defaulted (`None`) and validated; `None` when it has problems.
fn conversion_strategy(
    conversion: Option<Conversion>,
    v1beta1: bool,
    bad: &mut impl FnMut(&str, String),
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
            bad(
                "spec.conversion.webhook",
                "Required value: required when strategy is set to Webhook".into(),
            );
            return None;
        }
        if conversion.strategy.as_deref() != Some("Webhook") && has_webhook {
            bad(
                "spec.conversion.webhook",
                "Forbidden: should not be set when strategy is not set to Webhook".into(),
            );
            return None;
        }
        (cc, versions, "spec.conversion.webhook.clientConfig")
    };
    match conversion.strategy.as_deref().unwrap_or("None") {
        "None" => {
            if v1beta1 && client_config.is_some() {
                bad(
                    at,
                    "Forbidden: should not be set when strategy is not set to Webhook".into(),
                );
                return None;
            }
            Some(ConversionStrategy::None)
        }
        "Webhook" => {
            let versions_at = if v1beta1 {
                "spec.conversion.conversionReviewVersions"
            } else {
                "spec.conversion.webhook.conversionReviewVersions"
            };
            let review_versions = review_versions.unwrap_or_default();
            let review_version = ConversionReviewVersion::negotiate(&review_versions);
            if review_versions.is_empty() {
                bad(
                    versions_at,
                    "Required value: must specify one of v1, v1beta1".into(),
                );
            } else if review_version.is_none() {
                bad(
                    versions_at,
                    format!(
                        "Invalid value: {review_versions:?}: must include at least one of v1, v1beta1"
                    ),
                );
            }
            let Some(cc) = client_config else {
                bad(
                    at,
                    "Required value: required when strategy is set to Webhook".into(),
                );
                return None;
            };
            match Backend::from_client_config(&cc) {
                Ok(backend) => Some(ConversionStrategy::Webhook(ConversionWebhook {
                    backend: backend.into(),
                    review_versions,
                    review_version,
                })),
                Err((field, message)) => {
                    let field = field.strip_prefix("clientConfig").unwrap_or(&field);
                    bad(&format!("{at}{field}"), message);
                    None
                }
            }
        }
        other => {
            bad(
                "spec.conversion.strategy",
                format!("Unsupported value: {other:?}: supported values: \"None\", \"Webhook\""),
            );
            None
        }
    }
}
