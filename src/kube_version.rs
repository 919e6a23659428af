//! The cluster's Kubernetes version (`--kube-version`, or discovery's `/version` with
//! `--kubeconfig`): what kube-apiserver of that release accepts and sends differs.
//!
//! - The CEL libraries matchConditions may call: kube-apiserver compiles a new or changed
//!   expression against the environment of its compatibility version, one minor release
//!   before its own (`DefaultCompatibilityVersion`,
//!   `staging/src/k8s.io/apiserver/pkg/cel/environment/base.go`; the webhook configuration's
//!   validation, `pkg/apis/admissionregistration/validation/validation.go`, compiles with
//!   `environment.NewExpressions`), so that a rollback can still run it. Each library's
//!   release is `baseOptsWithoutStrictCost`'s `IntroducedVersion`
//!   ([`crate::matching::cel_env::introduced`]).
//! - matchConditions themselves: beta and on by default from 1.28 (the
//!   `AdmissionWebhookMatchConditions` feature gate; GA in 1.30).
//! - What a matchCondition's calls into the Kubernetes CEL libraries cost at run time: their
//!   own prices from 1.32, 1 each before ([`crate::matching::CostModel`]).

use std::fmt;
use std::str::FromStr;

/// A Kubernetes release, `1.MINOR`.
///
/// ```
/// use admission_proxy::kube_version::KubeVersion;
/// let v: KubeVersion = "v1.30.4-gke.1".parse().unwrap();
/// assert_eq!((v.minor, v.to_string().as_str()), (30, "1.30"));
/// assert_eq!(v.compatibility().minor, 29);
/// assert!("2.0".parse::<KubeVersion>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct KubeVersion {
    /// The minor release (`30` for 1.30).
    pub minor: u32,
}

/// The first release serving webhook matchConditions by default (beta).
pub const MATCH_CONDITIONS: KubeVersion = KubeVersion { minor: 28 };

/// The first release charging the Kubernetes CEL libraries' own costs to webhook matchConditions
/// by default (`StrictCostEnforcementForWebhooks`: beta and off in 1.30 and 1.31, GA and locked
/// on in 1.32; `pkg/features/versioned_kube_features.go`).
pub const STRICT_COST_ENFORCEMENT: KubeVersion = KubeVersion { minor: 32 };

/// The first release whose kube-apiserver takes a mutating webhook's patch that is not a JSON
/// Patch as a call error, decided by failurePolicy (`received undecodable patch in webhook
/// response`); before, `callAttrMutatingHook` answered `apierrors.NewInternalError` whatever
/// failurePolicy said (`staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/mutating/dispatcher.go`).
pub const UNDECODABLE_PATCH_IS_CALL_ERROR: KubeVersion = KubeVersion { minor: 34 };

/// The first release whose kube-apiserver keeps the virtual authentication and authorization
/// resources from webhooks (`ExcludeAdmissionWebhookVirtualResources`, beta and on by default;
/// [`crate::resources::VIRTUAL_RESOURCES`]).
pub const VIRTUAL_RESOURCES_EXCLUDED: KubeVersion = KubeVersion { minor: 37 };

/// A version that is not `1.MINOR[.PATCH]` (with an optional `v` and suffix).
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not a Kubernetes version (1.MINOR, e.g. 1.30 or v1.30.2)")]
pub struct BadVersion(String);

impl FromStr for KubeVersion {
    type Err = BadVersion;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadVersion(s.to_string());
        let rest = s.strip_prefix('v').unwrap_or(s);
        let mut parts = rest.split('.');
        let (major, minor) = (parts.next().ok_or_else(bad)?, parts.next().ok_or_else(bad)?);
        // `/version` may report `minor: "30+"` on some distributions.
        let digits: String = minor.chars().take_while(char::is_ascii_digit).collect();
        match (major, digits.parse::<u32>()) {
            ("1", Ok(minor)) => Ok(KubeVersion { minor }),
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "1.{}", self.minor)
    }
}

impl KubeVersion {
    /// The release whose CEL environment new expressions are compiled against: one before.
    pub fn compatibility(self) -> KubeVersion {
        KubeVersion {
            minor: self.minor.saturating_sub(1),
        }
    }
}

/// How long the cluster's `/version` is waited for.
const VERSION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Why the cluster's version could not be read ([`of_cluster`]).
#[derive(Debug, thiserror::Error)]
pub enum ClusterVersionError {
    /// No usable client configuration.
    #[error(transparent)]
    Client(#[from] crate::kube_client::ClientError),
    /// `/version` failed: kube-rs' words with their causes (quoted, not a `source()`).
    #[error("/version: {0}")]
    Request(crate::kube_client::KubeError),
    /// `/version` did not answer in time.
    #[error("/version: no answer within {VERSION_TIMEOUT:?}")]
    Timeout,
    /// `/version` answered something that is no `1.MINOR` version.
    #[error("/version: {0}")]
    Version(BadVersion),
}

/// The Kubernetes version of the cluster `kubeconfig` names (`None`: KUBECONFIG,
/// `~/.kube/config`, then the pod's service account), from its `/version` as `kubectl version`
/// reads it (readable by everyone: `system:public-info-viewer`); with its `gitVersion`.
///
/// # Errors
/// [`ClusterVersionError`]: no usable kubeconfig, no answer within 5 s, or an answer that is
/// no `1.MINOR` version.
pub async fn of_cluster(
    kubeconfig: Option<&std::path::Path>,
) -> Result<(KubeVersion, String), ClusterVersionError> {
    let client = crate::kube_client::client(kubeconfig).await?;
    let info = tokio::time::timeout(VERSION_TIMEOUT, client.apiserver_version())
        .await
        .map_err(|_| ClusterVersionError::Timeout)?
        .map_err(|e| ClusterVersionError::Request(crate::kube_client::KubeError(e)))?;
    let version = format!("{}.{}", info.major, info.minor)
        .parse::<KubeVersion>()
        .map_err(ClusterVersionError::Version)?;
    Ok((version, info.git_version))
}
