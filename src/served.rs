//! What kube-apiserver serves, for `registration` and `check`: the API versions Kubernetes
//! removed (by release), and optionally a live cluster's discovery (kube-rs, as
//! `--watch-namespaces` reaches the API). Plain data; depends on nothing else of the crate.
//!
//! Why it matters: kube-apiserver's matchPolicy Equivalent only knows the resources it serves.
//! `staging/src/k8s.io/apiserver/pkg/endpoints/installer.go` registers each installed
//! group/version/resource in the `EquivalentResourceRegistry`, and `ShouldCallHook`
//! (`staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/generic/webhook.go`) asks that
//! registry for a request's equivalents. A rule naming a version the cluster no longer serves
//! (extensions/v1beta1 deployments, since 1.16) therefore never matches, not even through
//! Equivalent: the proxy must be registered for the versions that are served.

use std::collections::{BTreeMap, BTreeSet};

/// The release that stopped serving a group/version (or one resource of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Removal {
    pub(crate) group: &'static str,
    pub(crate) version: &'static str,
    /// `None`: every resource of the group/version.
    pub(crate) resource: Option<&'static str>,
    /// The Kubernetes minor release that no longer serves it, `"1.16"`.
    pub(crate) release: &'static str,
}

const fn removed(
    group: &'static str,
    version: &'static str,
    resource: Option<&'static str>,
    release: &'static str,
) -> Removal {
    Removal {
        group,
        version,
        resource,
        release,
    }
}

/// Built-in API versions that current kube-apiserver no longer serves, from Kubernetes'
/// "Deprecated API Migration Guide" (kubernetes.io/docs/reference/using-api/deprecation-guide)
/// and, for the alpha versions, CHANGELOG-1.23.md (kubernetes/kubernetes#104248). Rows name the
/// resource where Kubernetes later served other resources under the same group/version
/// (networking.k8s.io/v1beta1 IPAddress, storage.k8s.io/v1beta1 VolumeAttributesClass,
/// coordination.k8s.io/v1beta1 LeaseCandidate, certificates.k8s.io/v1beta1
/// ClusterTrustBundle) and come before their group/version's row: extensions/v1beta1 stopped
/// serving workloads in 1.16 and the rest (Ingress) in 1.22.
pub(crate) const REMOVED: &[Removal] = &[
    removed("extensions", "v1beta1", Some("deployments"), "1.16"),
    removed("extensions", "v1beta1", Some("daemonsets"), "1.16"),
    removed("extensions", "v1beta1", Some("replicasets"), "1.16"),
    removed("extensions", "v1beta1", Some("networkpolicies"), "1.16"),
    removed("extensions", "v1beta1", Some("podsecuritypolicies"), "1.16"),
    removed("extensions", "v1beta1", None, "1.22"),
    removed("apps", "v1beta1", None, "1.16"),
    removed("apps", "v1beta2", None, "1.16"),
    removed("networking.k8s.io", "v1beta1", Some("ingresses"), "1.22"),
    removed(
        "networking.k8s.io",
        "v1beta1",
        Some("ingressclasses"),
        "1.22",
    ),
    removed("apiextensions.k8s.io", "v1beta1", None, "1.22"),
    removed(
        "admissionregistration.k8s.io",
        "v1beta1",
        Some("mutatingwebhookconfigurations"),
        "1.22",
    ),
    removed(
        "admissionregistration.k8s.io",
        "v1beta1",
        Some("validatingwebhookconfigurations"),
        "1.22",
    ),
    removed(
        "apiregistration.k8s.io",
        "v1beta1",
        Some("apiservices"),
        "1.22",
    ),
    removed(
        "certificates.k8s.io",
        "v1beta1",
        Some("certificatesigningrequests"),
        "1.22",
    ),
    removed("coordination.k8s.io", "v1beta1", Some("leases"), "1.22"),
    removed(
        "authentication.k8s.io",
        "v1beta1",
        Some("tokenreviews"),
        "1.22",
    ),
    removed("authorization.k8s.io", "v1beta1", None, "1.22"),
    removed("rbac.authorization.k8s.io", "v1beta1", None, "1.22"),
    removed("scheduling.k8s.io", "v1beta1", None, "1.22"),
    removed("storage.k8s.io", "v1beta1", Some("csidrivers"), "1.22"),
    removed("storage.k8s.io", "v1beta1", Some("csinodes"), "1.22"),
    removed("storage.k8s.io", "v1beta1", Some("storageclasses"), "1.22"),
    removed(
        "storage.k8s.io",
        "v1beta1",
        Some("volumeattachments"),
        "1.22",
    ),
    removed(
        "storage.k8s.io",
        "v1beta1",
        Some("csistoragecapacities"),
        "1.27",
    ),
    // Alpha versions, never served unless enabled; their code went in 1.23.
    removed("rbac.authorization.k8s.io", "v1alpha1", None, "1.23"),
    removed("scheduling.k8s.io", "v1alpha1", None, "1.23"),
    removed("batch", "v1beta1", None, "1.25"),
    removed("discovery.k8s.io", "v1beta1", None, "1.25"),
    removed("events.k8s.io", "v1beta1", None, "1.25"),
    removed("policy", "v1beta1", None, "1.25"),
    removed("node.k8s.io", "v1beta1", None, "1.25"),
    removed("autoscaling", "v2beta1", None, "1.25"),
    removed("autoscaling", "v2beta2", None, "1.26"),
    removed("flowcontrol.apiserver.k8s.io", "v1beta1", None, "1.26"),
    removed("flowcontrol.apiserver.k8s.io", "v1beta2", None, "1.29"),
    removed("flowcontrol.apiserver.k8s.io", "v1beta3", None, "1.32"),
    // `APILifecycleRemoved` of each type (`zz_generated.prerelease-lifecycle.go` under
    // `staging/src/k8s.io/api/`).
    removed(
        "admissionregistration.k8s.io",
        "v1alpha1",
        Some("validatingadmissionpolicies"),
        "1.32",
    ),
    removed(
        "admissionregistration.k8s.io",
        "v1alpha1",
        Some("validatingadmissionpolicybindings"),
        "1.32",
    ),
    removed(
        "authentication.k8s.io",
        "v1alpha1",
        Some("selfsubjectreviews"),
        "1.32",
    ),
    removed(
        "authentication.k8s.io",
        "v1beta1",
        Some("selfsubjectreviews"),
        "1.33",
    ),
];

/// The removal of `group/version` `resource` (a resource name without subresource), if
/// current Kubernetes no longer serves it.
pub(crate) fn removal(group: &str, version: &str, resource: &str) -> Option<&'static Removal> {
    REMOVED.iter().find(|r| {
        r.group == group && r.version == version && r.resource.is_none_or(|res| res == resource)
    })
}

/// The resources a cluster serves, as its discovery lists them: for each `group/version`, the
/// resource names including subresources (`deployments`, `deployments/scale`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServedResources {
    by_group_version: BTreeMap<(String, String), BTreeSet<String>>,
    /// Group/versions the cluster lists but could not describe (`GET /apis/{group}/{version}`
    /// failed, as it does for an aggregated API whose service is down: `metrics.k8s.io`
    /// without metrics-server answers 503), with the error. Their resources count as not
    /// served; kubectl's discovery skips them the same way.
    pub unavailable: Vec<(String, String)>,
}

impl ServedResources {
    /// Records that `group/version` serves `resource` (`"deployments"` or
    /// `"deployments/scale"`).
    pub(crate) fn insert(&mut self, group: &str, version: &str, resource: &str) {
        self.by_group_version
            .entry((group.to_string(), version.to_string()))
            .or_default()
            .insert(resource.to_string());
    }

    /// Whether a rule's resource entry (`res`, `res/sub`, `res/*`) can be requested in
    /// `group/version`: `res` must be served, and a named subresource too (`*` accepts any).
    pub(crate) fn serves(&self, group: &str, version: &str, entry: &str) -> bool {
        let Some(resources) = self
            .by_group_version
            .get(&(group.to_string(), version.to_string()))
        else {
            return false;
        };
        match entry.split_once('/') {
            None => resources.contains(entry),
            Some((res, "*")) => resources.contains(res),
            Some(_) => resources.contains(entry),
        }
    }

    /// Every served `(group, version, resource)`, subresources included, sorted.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &str, &str)> {
        self.by_group_version
            .iter()
            .flat_map(|((g, v), resources)| {
                resources
                    .iter()
                    .map(move |r| (g.as_str(), v.as_str(), r.as_str()))
            })
    }

    /// How many group/versions are served.
    pub fn group_versions(&self) -> usize {
        self.by_group_version.len()
    }
}

/// Why the cluster's served resources could not be read: a discovery request failed
/// (`/api`, `/apis` or a group/version's resource list), in kube-rs' words with their causes
/// (quoted, not a `source()`).
#[derive(Debug, thiserror::Error)]
#[error("discovery request failed: {0}")]
pub struct DiscoveryError(pub crate::kube_client::KubeError);

/// Reads the cluster's served resources through `client` (built as for `--watch-namespaces`):
/// `GET /api`, `/api/{version}`, `/apis`, then `/apis/{group}/{version}` for every version of
/// every group (all versions, not only the preferred one: each can be named by a rule). A
/// group/version that fails is recorded in [`ServedResources::unavailable`], not an error.
///
/// # Errors
/// [`DiscoveryError`] when `/api`, a core version or `/apis` fails.
pub async fn discover(client: &kube::Client) -> Result<ServedResources, DiscoveryError> {
    let mut served = ServedResources::default();
    let core = client
        .list_core_api_versions()
        .await
        .map_err(|e| DiscoveryError(crate::kube_client::KubeError(e)))?;
    for version in &core.versions {
        let list = client
            .list_core_api_resources(version)
            .await
            .map_err(|e| DiscoveryError(crate::kube_client::KubeError(e)))?;
        for r in &list.resources {
            served.insert("", version, &r.name);
        }
    }
    let groups = client
        .list_api_groups()
        .await
        .map_err(|e| DiscoveryError(crate::kube_client::KubeError(e)))?;
    for group in &groups.groups {
        for gv in &group.versions {
            match client.list_api_group_resources(&gv.group_version).await {
                Ok(list) => {
                    for r in &list.resources {
                        served.insert(&group.name, &gv.version, &r.name);
                    }
                }
                Err(e) => served
                    .unavailable
                    .push((gv.group_version.clone(), e.to_string())),
            }
        }
    }
    Ok(served)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_rows_win_over_their_group_version() {
        assert_eq!(
            removal("extensions", "v1beta1", "deployments")
                .unwrap()
                .release,
            "1.16"
        );
        assert_eq!(
            removal("extensions", "v1beta1", "ingresses")
                .unwrap()
                .release,
            "1.22"
        );
        assert_eq!(
            removal("storage.k8s.io", "v1beta1", "csistoragecapacities")
                .unwrap()
                .release,
            "1.27"
        );
        assert!(removal("apps", "v1", "deployments").is_none());
        assert!(removal("autoscaling", "v1", "horizontalpodautoscalers").is_none());
    }

    #[test]
    fn served_entries_follow_rule_resource_syntax() {
        let mut s = ServedResources::default();
        s.insert("apps", "v1", "deployments");
        s.insert("apps", "v1", "deployments/scale");
        assert!(s.serves("apps", "v1", "deployments"));
        assert!(s.serves("apps", "v1", "deployments/scale"));
        assert!(s.serves("apps", "v1", "deployments/*"));
        assert!(!s.serves("apps", "v1", "deployments/status"));
        assert!(!s.serves("apps", "v1beta1", "deployments"));
        assert!(!s.serves("extensions", "v1beta1", "deployments"));
    }
}
