//! What happened to one admission: the [`Decision`] every answer carries, with its spelling in
//! logs, metrics and the `x-admission-proxy-decision` answer header, and whether it rejects the
//! request (kube-apiserver's `rejected` metric label). The metrics module builds its series
//! from `Decision::ALL` and indexes them with `Decision::index`, so the two cannot drift
//! apart. Uses nothing else of the crate.

/// What happened to one admission, for logs and metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Not sent to the backend: kube-apiserver would not have called it.
    Skipped,
    /// The backend allowed the request (with or without a patch).
    Allowed,
    /// The backend denied the request.
    Denied,
    /// The call failed and failurePolicy Ignore admitted the request.
    FailedOpen,
    /// The call failed and failurePolicy Fail rejected the request (HTTP 500).
    FailedClosed,
    /// Dry-run request to a webhook whose sideEffects is Unknown or Some.
    RejectedDryRun,
    /// Rejected before calling (namespace not found, matchCondition error under Fail).
    Rejected,
    /// `mode: Warn`: the backend denied; answered allowed with a warning.
    WouldDeny,
    /// `mode: Warn`: the backend allowed with a patch, which was dropped.
    WouldPatch,
    /// `mode: Shadow`: answered allowed at once; the backend is called in the background.
    Shadowed,
    /// Answered allowed by a proxy-wide exclusion (`serve --exempt-namespace`,
    /// `--exclusions-file`) before any webhook was looked at; nothing was called.
    Exempt,
}

impl Decision {
    /// Every decision, in [`Decision::index`] order.
    pub(crate) const ALL: [Decision; 11] = [
        Decision::Skipped,
        Decision::Allowed,
        Decision::Denied,
        Decision::FailedOpen,
        Decision::FailedClosed,
        Decision::RejectedDryRun,
        Decision::Rejected,
        Decision::WouldDeny,
        Decision::WouldPatch,
        Decision::Shadowed,
        Decision::Exempt,
    ];

    /// The log/metric spelling.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Decision::Skipped => "skipped",
            Decision::Allowed => "allowed",
            Decision::Denied => "denied",
            Decision::FailedOpen => "failed-open",
            Decision::FailedClosed => "failed-closed",
            Decision::RejectedDryRun => "rejected-dry-run",
            Decision::Rejected => "rejected",
            Decision::WouldDeny => "would-deny",
            Decision::WouldPatch => "would-patch",
            Decision::Shadowed => "shadowed",
            Decision::Exempt => "exempt",
        }
    }

    /// Whether kube-apiserver ends up refusing the request (its admission metrics'
    /// `rejected` label): denials, failures closed and the proxy's own rejections.
    pub(crate) fn rejects(self) -> bool {
        matches!(
            self,
            Decision::Denied
                | Decision::FailedClosed
                | Decision::RejectedDryRun
                | Decision::Rejected
        )
    }

    /// Whether the webhook was called for the request, or its call attempted and failurePolicy
    /// decided: the requests a candidate is proven on. Skips, rejections before the call,
    /// Shadow and exemptions are not.
    pub fn called(self) -> bool {
        matches!(
            self,
            Decision::Allowed
                | Decision::Denied
                | Decision::FailedOpen
                | Decision::FailedClosed
                | Decision::WouldDeny
                | Decision::WouldPatch
        )
    }

    /// The decision spelt `label` (its log and metric spelling), as the proxy's decision header and
    /// log lines carry it.
    pub fn from_label(label: &str) -> Option<Self> {
        Decision::ALL.into_iter().find(|d| d.as_str() == label)
    }

    /// The position in [`Decision::ALL`] (the metrics' series arrays).
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_is_in_index_order() {
        for (i, d) in Decision::ALL.iter().enumerate() {
            assert_eq!(d.index(), i, "{d:?}");
            assert_eq!(Decision::from_label(d.as_str()), Some(*d));
        }
    }
}
