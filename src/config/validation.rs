//! The create-time checks of a webhook that are not a default's (`validation.go` in
//! `pkg/apis/admissionregistration/validation/`): its name, its admissionReviewVersions.

use super::*;

/// `webhooks[].name` must be a fully qualified name (`validateValidatingWebhook` and
/// `validateMutatingWebhook` in `pkg/apis/admissionregistration/validation/validation.go`:
/// `IsFullyQualifiedName`).
pub(super) fn validate_webhook_name(name: &str, bad: &mut impl FnMut(FieldError)) {
    if name.is_empty() {
        bad(FieldError::required("name", ""));
    } else if !names::is_fully_qualified_name(name) {
        bad(FieldError::invalid(
            "name",
            name,
            "should be a domain with at least three segments separated by dots",
        ));
    }
}

/// `admissionReviewVersions`, defaulted (v1beta1's `defaults.go`: `[v1beta1]`; v1 requires it)
/// and validated (`validateAdmissionReviewVersions` in `validation.go`: DNS-1035 labels, no
/// duplicates, at least one version kube-apiserver speaks). Returns the version the proxy
/// speaks to the backend, `None` when no entry is known.
pub(super) fn validate_review_versions(
    hook: &api::Webhook,
    v1beta1: bool,
    bad: &mut impl FnMut(FieldError),
) -> Option<ReviewVersion> {
    let admission_review_versions = match &hook.admission_review_versions {
        Some(v) => v.clone(),
        None if v1beta1 => vec!["v1beta1".to_string()],
        None => {
            bad(FieldError::required(
                "admissionReviewVersions",
                "must specify one of v1, v1beta1",
            ));
            Vec::new()
        }
    };
    let mut versions_seen = HashSet::new();
    for (i, v) in admission_review_versions.iter().enumerate() {
        if !names::is_dns1035_label(v) {
            bad(FieldError::invalid(
                format!("admissionReviewVersions[{i}]"),
                v,
                "a DNS-1035 label is required",
            ));
        }
        if !versions_seen.insert(v) {
            bad(FieldError::duplicate(
                format!("admissionReviewVersions[{i}]"),
                v,
            ));
        }
    }
    let review_version = ReviewVersion::negotiate(&admission_review_versions);
    if hook.admission_review_versions.is_some() && review_version.is_none() {
        bad(FieldError::new(
            ErrorType::NotSupported,
            "admissionReviewVersions",
            BadValue::Omitted,
            "must include at least one of v1, v1beta1",
        ));
    }
    review_version
}
