//! The defaults kube-apiserver gives a webhook by its configuration's version
//! (`SetDefaults_ValidatingWebhook`, `SetDefaults_MutatingWebhook` in
//! `pkg/apis/admissionregistration/v1/defaults.go` and `.../v1beta1/defaults.go`).

use super::*;

/// `failurePolicy`, defaulted as the API version does (`SetDefaults_ValidatingWebhook` in
/// `pkg/apis/admissionregistration/v1/defaults.go`: Fail; v1beta1: Ignore) and checked against
/// `supportedFailurePolicies` (`validation.go`). An unsupported value stands in as Fail: the
/// webhook is refused anyway.
pub(super) fn default_failure_policy(
    value: Option<&str>,
    v1beta1: bool,
    bad: &mut impl FnMut(FieldError),
) -> FailurePolicy {
    match value {
        None if v1beta1 => FailurePolicy::Ignore,
        None => FailurePolicy::Fail,
        Some("Ignore") => FailurePolicy::Ignore,
        Some("Fail") => FailurePolicy::Fail,
        Some(other) => {
            bad(FieldError::not_supported(
                "failurePolicy",
                other,
                &["Fail", "Ignore"],
            ));
            FailurePolicy::Fail
        }
    }
}

/// `matchPolicy`, defaulted (`defaults.go`: Equivalent; v1beta1: Exact) and checked against
/// `supportedMatchPolicies` (`validation.go`).
pub(super) fn default_match_policy(
    value: Option<&str>,
    v1beta1: bool,
    bad: &mut impl FnMut(FieldError),
) -> MatchPolicy {
    match value {
        None if v1beta1 => MatchPolicy::Exact,
        None => MatchPolicy::Equivalent,
        Some("Exact") => MatchPolicy::Exact,
        Some("Equivalent") => MatchPolicy::Equivalent,
        Some(other) => {
            bad(FieldError::not_supported(
                "matchPolicy",
                other,
                &["Equivalent", "Exact"],
            ));
            MatchPolicy::Exact
        }
    }
}

/// `sideEffects`, defaulted (v1beta1's `defaults.go`: Unknown; v1 has no default, so it is
/// required) and checked as `validateValidatingWebhook` does on create: only None and
/// NoneOnDryRun are offered, Some and Unknown are kept from stored configurations.
pub(super) fn default_side_effects(
    value: Option<&str>,
    v1beta1: bool,
    bad: &mut impl FnMut(FieldError),
) -> SideEffects {
    match value {
        None if v1beta1 => SideEffects::Unknown,
        None => {
            bad(FieldError::required(
                "sideEffects",
                "must specify one of None, NoneOnDryRun",
            ));
            SideEffects::Unknown
        }
        Some("None") => SideEffects::None,
        Some("NoneOnDryRun") => SideEffects::NoneOnDryRun,
        // Only configurations stored through v1beta1 carry these (warned about below).
        Some("Some") => SideEffects::Some,
        Some("Unknown") => SideEffects::Unknown,
        Some(other) => {
            bad(FieldError::not_supported(
                "sideEffects",
                other,
                &["None", "NoneOnDryRun"],
            ));
            SideEffects::Unknown
        }
    }
}

/// The warning for sideEffects Some or Unknown: accepted (kube-apiserver keeps them from
/// stored configurations), but every dry-run request is refused (`NewDryRunUnsupportedErr`).
pub(super) fn side_effects_warning(side_effects: SideEffects) -> Option<(String, String)> {
    matches!(side_effects, SideEffects::Some | SideEffects::Unknown).then(|| {
        (
            "sideEffects".into(),
            format!("{side_effects:?} is only accepted from configurations stored before v1; dry-run requests matching this webhook are rejected (\"does not support dry run\"): kubectl apply --dry-run=server and kubectl diff fail; fix: sideEffects: None, or NoneOnDryRun if the webhook honours request.dryRun"),
        )
    })
}

/// `timeoutSeconds`, defaulted (`defaults.go`: 10; v1beta1: 30) and checked to be 1-30, as
/// `validateValidatingWebhook` does.
pub(super) fn default_timeout_seconds(
    value: Option<i64>,
    v1beta1: bool,
    bad: &mut impl FnMut(FieldError),
) -> i64 {
    let timeout_seconds = value.unwrap_or(if v1beta1 { 30 } else { 10 });
    if !(1..=30).contains(&timeout_seconds) {
        bad(FieldError::invalid(
            "timeoutSeconds",
            timeout_seconds,
            "the timeout value must be between 1 and 30 seconds",
        ));
    }
    timeout_seconds
}

/// `reinvocationPolicy`, defaulted to Never; when given, Never or IfNeeded
/// (`validateMutatingWebhook`: `supportedReinvocationPolicies`).
pub(super) fn default_reinvocation_policy(
    value: Option<&str>,
    bad: &mut impl FnMut(FieldError),
) -> ReinvocationPolicy {
    let Some(p) = value else {
        return ReinvocationPolicy::Never;
    };
    ReinvocationPolicy::parse(p).unwrap_or_else(|| {
        bad(FieldError::not_supported(
            "reinvocationPolicy",
            p,
            &["IfNeeded", "Never"],
        ));
        ReinvocationPolicy::Never
    })
}
