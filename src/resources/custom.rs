//! Custom resources the configuration declares (CustomResourceDefinition objects): their
//! versions in registry order and how kube-apiserver converts their objects
//! (`spec.conversion`). Plain data built at config load; depends on `backend`.
//!
//! Registry order follows `customresource_handler.go` (`getOrCreateServingInfoFor`): every
//! entry of `spec.versions`, in order, is registered as an equivalent of the others
//! (`RegisterKindFor(resource, "", kind)`), the `status` subresource for versions that have it,
//! and `scale` with kind autoscaling/v1 Scale.

use std::collections::HashMap;
use std::sync::Arc;

use crate::backend::Backend;

/// One CustomResourceDefinition as far as matchPolicy Equivalent needs it.
#[derive(Debug)]
pub(crate) struct CustomResource {
    /// `metadata.name`, `<plural>.<group>`.
    pub(crate) name: String,
    /// `spec.group`.
    pub(crate) group: String,
    /// `spec.names.plural`: the resource.
    pub(crate) plural: String,
    /// `spec.names.kind`.
    pub(crate) kind: String,
    /// `spec.versions`, in order (registry order).
    pub(crate) versions: Vec<CustomVersion>,
    /// `spec.conversion.strategy`.
    pub(crate) strategy: ConversionStrategy,
}

/// One entry of `spec.versions`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CustomVersion {
    pub(crate) name: String,
    pub(crate) served: bool,
    /// `subresources.status` is set for this version.
    pub(crate) status: bool,
    /// `subresources.scale` is set for this version.
    pub(crate) scale: bool,
}

/// `spec.conversion.strategy`.
#[derive(Debug)]
pub(crate) enum ConversionStrategy {
    /// `None`: kube-apiserver only rewrites `apiVersion` (`nopConverter`).
    None,
    /// `Webhook`: objects go to the CRD's conversion webhook in a ConversionReview.
    Webhook(ConversionWebhook),
}

/// `spec.conversion.webhook` (v1) or `webhookClientConfig` + `conversionReviewVersions` (v1beta1).
#[derive(Debug)]
pub(crate) struct ConversionWebhook {
    /// Shared with each call's target, as a webhook's backend is.
    pub(crate) backend: std::sync::Arc<Backend>,
    /// `conversionReviewVersions` as configured (ordered preference).
    pub(crate) review_versions: Vec<String>,
    /// The first entry kube-apiserver knows (`createConversionReviewObjects`); `None` makes
    /// every conversion fail with "no supported conversion review versions".
    pub(crate) review_version: Option<ConversionReviewVersion>,
}

/// The `apiextensions.k8s.io` version of a ConversionReview.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ConversionReviewVersion {
    V1,
    V1beta1,
}

impl ConversionReviewVersion {
    /// The first of `versions` kube-apiserver supports, in the webhook's order.
    pub(crate) fn negotiate(versions: &[String]) -> Option<Self> {
        versions.iter().find_map(|v| match v.as_str() {
            "v1" => Some(ConversionReviewVersion::V1),
            "v1beta1" => Some(ConversionReviewVersion::V1beta1),
            _ => None,
        })
    }

    /// `apiextensions.k8s.io/v1` or `apiextensions.k8s.io/v1beta1`.
    pub(crate) fn api_version(self) -> &'static str {
        match self {
            ConversionReviewVersion::V1 => "apiextensions.k8s.io/v1",
            ConversionReviewVersion::V1beta1 => "apiextensions.k8s.io/v1beta1",
        }
    }
}

impl PartialEq for CustomResource {
    /// Two declarations are the same when they name the same resource the same way and convert
    /// the same way (for comparing match decisions; backends compare by URL).
    fn eq(&self, other: &Self) -> bool {
        let strategy = |c: &CustomResource| match &c.strategy {
            ConversionStrategy::None => None,
            ConversionStrategy::Webhook(w) => {
                Some((w.backend.url.clone(), w.review_versions.clone()))
            }
        };
        self.name == other.name
            && self.group == other.group
            && self.plural == other.plural
            && self.kind == other.kind
            && self.versions == other.versions
            && strategy(self) == strategy(other)
    }
}

impl CustomResource {
    /// The conversion webhook, when the strategy is `Webhook`.
    pub(crate) fn conversion_webhook(&self) -> Option<&ConversionWebhook> {
        match &self.strategy {
            ConversionStrategy::Webhook(w) => Some(w),
            ConversionStrategy::None => None,
        }
    }
}

/// The custom resources of one configuration snapshot, by group, then plural (two levels so a
/// lookup borrows the request's names instead of allocating a key).
#[derive(Debug, Default)]
pub(crate) struct CustomResources {
    by_group: HashMap<String, HashMap<String, Arc<CustomResource>>>,
}

impl CustomResources {
    /// Adds `resource`; returns the one it replaces (a duplicate declaration).
    pub(crate) fn insert(&mut self, resource: CustomResource) -> Option<Arc<CustomResource>> {
        self.by_group
            .entry(resource.group.clone())
            .or_default()
            .insert(resource.plural.clone(), Arc::new(resource))
    }

    pub(crate) fn get(&self, group: &str, plural: &str) -> Option<&Arc<CustomResource>> {
        self.by_group.get(group)?.get(plural)
    }

    pub(crate) fn len(&self) -> usize {
        self.by_group.values().map(HashMap::len).sum()
    }

    /// Every declared custom resource, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<CustomResource>> {
        self.by_group.values().flat_map(HashMap::values)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `widgets.example.com`: v2 (status and scale), v1 (status), v1alpha1 (`served: false`).
    pub(crate) fn widgets() -> CustomResources {
        let version = |name: &str, status: bool, scale: bool| CustomVersion {
            name: name.into(),
            served: name != "v1alpha1",
            status,
            scale,
        };
        let mut all = CustomResources::default();
        all.insert(CustomResource {
            name: "widgets.example.com".into(),
            group: "example.com".into(),
            plural: "widgets".into(),
            kind: "Widget".into(),
            versions: vec![
                version("v2", true, true),
                version("v1", true, false),
                version("v1alpha1", false, false),
            ],
            strategy: ConversionStrategy::None,
        });
        all
    }

    #[test]
    fn versions_in_spec_order_without_the_request_version() {
        let found: Vec<_> = widgets()
            .equivalents("example.com", "v1alpha1", "widgets", "")
            .into_iter()
            .map(|e| format!("{}/{} {}", e.group, e.version, e.kind))
            .collect();
        assert_eq!(found, ["example.com/v2 Widget", "example.com/v1 Widget"]);
    }

    #[test]
    fn subresources_only_where_declared() {
        let all = widgets();
        let status = all.equivalents("example.com", "v1", "widgets", "status");
        assert_eq!(status.len(), 1);
        assert_eq!(status[0].version, "v2");
        // v1 has no scale subresource, so a v2 scale request has no equivalents.
        assert!(all
            .equivalents("example.com", "v2", "widgets", "scale")
            .is_empty());
        assert!(all
            .equivalents("example.com", "v1", "gadgets", "")
            .is_empty());
        assert!(all
            .equivalents("example.com", "v9", "widgets", "")
            .is_empty());
    }
}
