//! Which group/version/resources are the same resource under other names (kube-apiserver's
//! `EquivalentResourceRegistry`, `staging/src/k8s.io/apimachinery/pkg/runtime/mapper.go`), for
//! matchPolicy Equivalent. Plain data; depends on `custom` (the declared custom resources) only.

use std::borrow::Cow;
use std::sync::Arc;

use super::custom::{CustomResource, CustomResources, CustomVersion};

/// A group and version, `("apps", "v1")`; the core group is `""`.
pub(crate) type GroupVersion = (&'static str, &'static str);

/// A resource and every group/version serving the same objects, hub (newest) first; this is the
/// registry order the Equivalent pass walks (`ShouldCallHook`: rule order first, then this).
#[derive(Debug)]
pub struct Equivalence {
    /// The resource, plural (`deployments`).
    pub resource: &'static str,
    /// The kind, the same in every version.
    pub(crate) kind: &'static str,
    /// Every group/version serving it, in registry order.
    pub versions: &'static [GroupVersion],
    /// The `scale` subresource's kind per entry of `versions` (`KindFor(…, "scale")`, kind
    /// `Scale`), when the resource has one.
    pub scale: Option<&'static [GroupVersion]>,
}

const APPS: &[GroupVersion] = &[
    ("apps", "v1"),
    ("apps", "v1beta2"),
    ("extensions", "v1beta1"),
];
const APPS_SCALE: &[GroupVersion] = &[
    ("autoscaling", "v1"),
    ("apps", "v1beta2"),
    ("extensions", "v1beta1"),
];
const RBAC: &[GroupVersion] = &[
    ("rbac.authorization.k8s.io", "v1"),
    ("rbac.authorization.k8s.io", "v1beta1"),
    ("rbac.authorization.k8s.io", "v1alpha1"),
];
const FLOWCONTROL: &[GroupVersion] = &[
    ("flowcontrol.apiserver.k8s.io", "v1"),
    ("flowcontrol.apiserver.k8s.io", "v1beta3"),
    ("flowcontrol.apiserver.k8s.io", "v1beta2"),
    ("flowcontrol.apiserver.k8s.io", "v1beta1"),
];
const STORAGE: &[GroupVersion] = &[("storage.k8s.io", "v1"), ("storage.k8s.io", "v1beta1")];
const ADMISSION_V1BETA1: &[GroupVersion] = &[
    ("admissionregistration.k8s.io", "v1"),
    ("admissionregistration.k8s.io", "v1beta1"),
];
const ADMISSION_V1ALPHA1: &[GroupVersion] = &[
    ("admissionregistration.k8s.io", "v1"),
    ("admissionregistration.k8s.io", "v1beta1"),
    ("admissionregistration.k8s.io", "v1alpha1"),
];
const AUTHORIZATION: &[GroupVersion] = &[
    ("authorization.k8s.io", "v1"),
    ("authorization.k8s.io", "v1beta1"),
];
const RESOURCE: &[GroupVersion] = &[
    ("resource.k8s.io", "v1beta1"),
    ("resource.k8s.io", "v1alpha3"),
];

const fn eq(
    resource: &'static str,
    kind: &'static str,
    versions: &'static [GroupVersion],
) -> Equivalence {
    Equivalence {
        resource,
        kind,
        versions,
        scale: None,
    }
}

/// The built-in equivalences, including versions removed from current clusters that legacy
/// webhooks still register for.
///
/// kube-apiserver keys its `EquivalentResourceRegistry` by a resource's storage prefix
/// (`NewEquivalentResourceRegistryWithIdentity` in `staging/src/k8s.io/apiserver/pkg/server/config.go`,
/// `DefaultStorageFactory.ResourcePrefix`): every version of a group/resource shares it, and so
/// do the resources of other groups stored with them (`AddCohabitatingResources` in
/// `pkg/kubeapiserver/default_storage_factory_builder.go`: core and events.k8s.io events, apps
/// and extensions workloads, networking and extensions ingresses and network policies). Each
/// entry is one such storage; the test `the_table_is_what_kube_apiserver_serves` holds it
/// against the discovery of a real kube-apiserver 1.32.0 with every version on and against
/// `served::REMOVED` (extensions/v1beta1 workloads until 1.16 and ingresses until 1.22, apps
/// v1beta1/v1beta2 until 1.16, the v1beta1 APIs removed in 1.22 and 1.25, autoscaling
/// v2beta1/v2beta2 until 1.25/1.26, flowcontrol v1beta1–v1beta3 until 1.26–1.32, the v1alpha1
/// ValidatingAdmissionPolicy until 1.32).
pub const EQUIVALENCES: &[Equivalence] = &[
    Equivalence {
        resource: "deployments",
        kind: "Deployment",
        versions: &[
            ("apps", "v1"),
            ("apps", "v1beta2"),
            ("apps", "v1beta1"),
            ("extensions", "v1beta1"),
        ],
        scale: Some(&[
            ("autoscaling", "v1"),
            ("apps", "v1beta2"),
            ("apps", "v1beta1"),
            ("extensions", "v1beta1"),
        ]),
    },
    Equivalence {
        resource: "replicasets",
        kind: "ReplicaSet",
        versions: APPS,
        scale: Some(APPS_SCALE),
    },
    eq("daemonsets", "DaemonSet", APPS),
    Equivalence {
        resource: "statefulsets",
        kind: "StatefulSet",
        versions: &[("apps", "v1"), ("apps", "v1beta2"), ("apps", "v1beta1")],
        scale: Some(&[
            ("autoscaling", "v1"),
            ("apps", "v1beta2"),
            ("apps", "v1beta1"),
        ]),
    },
    eq(
        "ingresses",
        "Ingress",
        &[
            ("networking.k8s.io", "v1"),
            ("networking.k8s.io", "v1beta1"),
            ("extensions", "v1beta1"),
        ],
    ),
    eq(
        "networkpolicies",
        "NetworkPolicy",
        &[("networking.k8s.io", "v1"), ("extensions", "v1beta1")],
    ),
    eq(
        "cronjobs",
        "CronJob",
        &[("batch", "v1"), ("batch", "v1beta1")],
    ),
    eq(
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        &[("policy", "v1"), ("policy", "v1beta1")],
    ),
    eq(
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        &[
            ("autoscaling", "v2"),
            ("autoscaling", "v1"),
            ("autoscaling", "v2beta2"),
            ("autoscaling", "v2beta1"),
        ],
    ),
    eq(
        "customresourcedefinitions",
        "CustomResourceDefinition",
        &[
            ("apiextensions.k8s.io", "v1"),
            ("apiextensions.k8s.io", "v1beta1"),
        ],
    ),
    eq("roles", "Role", RBAC),
    eq("rolebindings", "RoleBinding", RBAC),
    eq("clusterroles", "ClusterRole", RBAC),
    eq("clusterrolebindings", "ClusterRoleBinding", RBAC),
    eq("storageclasses", "StorageClass", STORAGE),
    eq("volumeattachments", "VolumeAttachment", STORAGE),
    eq("csidrivers", "CSIDriver", STORAGE),
    eq("csinodes", "CSINode", STORAGE),
    eq(
        "priorityclasses",
        "PriorityClass",
        &[
            ("scheduling.k8s.io", "v1"),
            ("scheduling.k8s.io", "v1beta1"),
            ("scheduling.k8s.io", "v1alpha1"),
        ],
    ),
    eq(
        "leases",
        "Lease",
        &[
            ("coordination.k8s.io", "v1"),
            ("coordination.k8s.io", "v1beta1"),
        ],
    ),
    // One storage: `AddCohabitatingResources(api.Resource("events"), events.Resource("events"))`
    // (`pkg/kubeapiserver/default_storage_factory_builder.go`); core is installed first.
    eq(
        "events",
        "Event",
        &[
            ("", "v1"),
            ("events.k8s.io", "v1"),
            ("events.k8s.io", "v1beta1"),
        ],
    ),
    eq(
        "endpointslices",
        "EndpointSlice",
        &[("discovery.k8s.io", "v1"), ("discovery.k8s.io", "v1beta1")],
    ),
    eq(
        "certificatesigningrequests",
        "CertificateSigningRequest",
        &[
            ("certificates.k8s.io", "v1"),
            ("certificates.k8s.io", "v1beta1"),
        ],
    ),
    eq("flowschemas", "FlowSchema", FLOWCONTROL),
    eq(
        "prioritylevelconfigurations",
        "PriorityLevelConfiguration",
        FLOWCONTROL,
    ),
    eq(
        "runtimeclasses",
        "RuntimeClass",
        &[("node.k8s.io", "v1"), ("node.k8s.io", "v1beta1")],
    ),
    eq(
        "ingressclasses",
        "IngressClass",
        &[
            ("networking.k8s.io", "v1"),
            ("networking.k8s.io", "v1beta1"),
        ],
    ),
    eq("csistoragecapacities", "CSIStorageCapacity", STORAGE),
    eq(
        "volumeattributesclasses",
        "VolumeAttributesClass",
        &[
            ("storage.k8s.io", "v1beta1"),
            ("storage.k8s.io", "v1alpha1"),
        ],
    ),
    eq(
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        ADMISSION_V1BETA1,
    ),
    eq(
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        ADMISSION_V1BETA1,
    ),
    eq(
        "validatingadmissionpolicies",
        "ValidatingAdmissionPolicy",
        ADMISSION_V1ALPHA1,
    ),
    eq(
        "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding",
        ADMISSION_V1ALPHA1,
    ),
    eq(
        "apiservices",
        "APIService",
        &[
            ("apiregistration.k8s.io", "v1"),
            ("apiregistration.k8s.io", "v1beta1"),
        ],
    ),
    eq(
        "tokenreviews",
        "TokenReview",
        &[
            ("authentication.k8s.io", "v1"),
            ("authentication.k8s.io", "v1beta1"),
        ],
    ),
    eq(
        "selfsubjectreviews",
        "SelfSubjectReview",
        &[
            ("authentication.k8s.io", "v1"),
            ("authentication.k8s.io", "v1beta1"),
            ("authentication.k8s.io", "v1alpha1"),
        ],
    ),
    eq("subjectaccessreviews", "SubjectAccessReview", AUTHORIZATION),
    eq(
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        AUTHORIZATION,
    ),
    eq(
        "localsubjectaccessreviews",
        "LocalSubjectAccessReview",
        AUTHORIZATION,
    ),
    eq(
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
        AUTHORIZATION,
    ),
    eq("deviceclasses", "DeviceClass", RESOURCE),
    eq("resourceclaims", "ResourceClaim", RESOURCE),
    eq("resourceclaimtemplates", "ResourceClaimTemplate", RESOURCE),
    eq("resourceslices", "ResourceSlice", RESOURCE),
];

/// One equivalent of a request's resource: the group/version/resource to match rules against
/// and the kind the webhook is invoked with (`KindFor`). Built-in names borrow the table;
/// custom resources' are owned.
#[derive(Clone, Debug, PartialEq)]
pub struct Equivalent {
    pub(crate) group: Cow<'static, str>,
    pub(crate) version: Cow<'static, str>,
    pub(crate) resource: Cow<'static, str>,
    pub(crate) kind_group: Cow<'static, str>,
    pub(crate) kind_version: Cow<'static, str>,
    pub(crate) kind: Cow<'static, str>,
    /// The declared custom resource, `None` for built-in resources.
    pub(crate) custom: Option<Arc<CustomResource>>,
}

/// The equivalents of `group/version/resource` with `sub_resource` (`""` for the main
/// resource), in registry order, the request's own version excluded; empty when the resource
/// has no equivalents here (custom resources, core resources) or the subresource is not known
/// to be served by every version (only the main resource and `status`, and `scale` where the
/// table lists it, are).
pub(crate) fn equivalents(
    group: &str,
    version: &str,
    resource: &str,
    sub_resource: &str,
) -> impl Iterator<Item = Equivalent> {
    let found = EQUIVALENCES.iter().find_map(|e| {
        let own = e
            .versions
            .iter()
            .position(|&(g, v)| g == group && v == version)?;
        (e.resource == resource).then_some((e, own))
    });
    let scale_sub = sub_resource == "scale";
    let entries = found
        .filter(|(e, _)| matches!(sub_resource, "" | "status") || (scale_sub && e.scale.is_some()))
        .map(move |(e, own)| {
            let others = e
                .versions
                .iter()
                .enumerate()
                .filter(move |&(i, _)| i != own);
            others.map(move |(i, &(g, v))| {
                let (kind_group, kind_version, kind) = match e.scale {
                    Some(scale) if scale_sub => (scale[i].0, scale[i].1, "Scale"),
                    _ => (g, v, e.kind),
                };
                Equivalent {
                    group: Cow::Borrowed(g),
                    version: Cow::Borrowed(v),
                    resource: Cow::Borrowed(e.resource),
                    kind_group: Cow::Borrowed(kind_group),
                    kind_version: Cow::Borrowed(kind_version),
                    kind: Cow::Borrowed(kind),
                    custom: None,
                }
            })
        });
    entries.into_iter().flatten()
}

/// The table's own `(group, version)` equal to `group/version` (a resource's or a `scale`
/// kind's), so a request's borrowed names become the table's `'static` ones.
pub(crate) fn table_version(group: &str, version: &str) -> Option<GroupVersion> {
    EQUIVALENCES
        .iter()
        .flat_map(|e| e.versions.iter().chain(e.scale.into_iter().flatten()))
        .find(|&&(g, v)| g == group && v == version)
        .copied()
}

/// Kept here rather than with [`CustomResources`]: the table of equivalents is this module's,
/// and custom.rs then needs nothing from it (no import circle).
impl CustomResources {
    /// The equivalents of `group/version/resource` with `sub_resource`, in registry order
    /// (`spec.versions` order), the request's own version excluded: every other version for
    /// the main resource, the versions with a `status` (or `scale`) subresource for those. Empty
    /// when no declared custom resource serves `group/version/resource`.
    pub(crate) fn equivalents(
        &self,
        group: &str,
        version: &str,
        resource: &str,
        sub_resource: &str,
    ) -> Vec<Equivalent> {
        let Some(crd) = self.get(group, resource) else {
            return Vec::new();
        };
        let has = |v: &CustomVersion| match sub_resource {
            "" => true,
            "status" => v.status,
            "scale" => v.scale,
            _ => false,
        };
        if !crd.versions.iter().any(|v| v.name == version && has(v)) {
            return Vec::new();
        }
        crd.versions
            .iter()
            .filter(|v| v.name != version && has(v))
            .map(|v| {
                let (kind_group, kind_version, kind) = if sub_resource == "scale" {
                    (
                        Cow::Borrowed("autoscaling"),
                        Cow::Borrowed("v1"),
                        Cow::Borrowed("Scale"),
                    )
                } else {
                    (
                        Cow::Owned(crd.group.clone()),
                        Cow::Owned(v.name.clone()),
                        Cow::Owned(crd.kind.clone()),
                    )
                };
                Equivalent {
                    group: Cow::Owned(crd.group.clone()),
                    version: Cow::Owned(v.name.clone()),
                    resource: Cow::Owned(crd.plural.clone()),
                    kind_group,
                    kind_version,
                    kind,
                    custom: Some(crd.clone()),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployments_walk_in_registry_order_without_the_request_version() {
        let found: Vec<_> = equivalents("apps", "v1", "deployments", "")
            .map(|e| format!("{}/{}", e.group, e.version))
            .collect();
        assert_eq!(
            found,
            ["apps/v1beta2", "apps/v1beta1", "extensions/v1beta1"]
        );
    }

    #[test]
    fn scale_kinds_follow_kind_for() {
        // As upstream `KindFor`: for apps/v1 deployments/scale the kind is autoscaling/v1 Scale.
        let e: Vec<_> = equivalents("extensions", "v1beta1", "deployments", "scale").collect();
        assert_eq!(e[0].group, "apps");
        assert_eq!(
            (&*e[0].kind_group, &*e[0].kind_version, &*e[0].kind),
            ("autoscaling", "v1", "Scale")
        );
        assert_eq!(equivalents("apps", "v1", "daemonsets", "scale").count(), 0);
    }

    /// Every `(group, version, resource, kind, scale kind)` a discovery document of
    /// `tests/fixtures/discovery/` lists, in its order (a group's versions by priority).
    fn discovered(file: &str) -> Vec<(String, String, String, String, Option<String>)> {
        let path = format!(
            "{}/tests/fixtures/discovery/{file}",
            env!("CARGO_MANIFEST_DIR")
        );
        let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        let text = |v: &serde_json::Value| v.as_str().unwrap_or("").to_string();
        let mut out = Vec::new();
        for group in doc["items"].as_array().unwrap() {
            for version in group["versions"].as_array().unwrap() {
                for r in version["resources"].as_array().unwrap() {
                    let scale = r["subresources"].as_array().and_then(|subs| {
                        subs.iter().find(|s| s["subresource"] == "scale").map(|s| {
                            let k = &s["responseKind"];
                            format!(
                                "{}/{}/{}",
                                text(&k["group"]),
                                text(&k["version"]),
                                text(&k["kind"])
                            )
                        })
                    });
                    out.push((
                        text(&group["metadata"]["name"]),
                        text(&version["version"]),
                        text(&r["resource"]),
                        text(&r["responseKind"]["kind"]),
                        scale,
                    ));
                }
            }
        }
        out
    }

    /// The table is what kube-apiserver serves from one storage, checked against a real
    /// kube-apiserver 1.32.0 with every version on (`tests/fixtures/discovery/`): built-in
    /// resources of one name share a storage prefix (`DefaultStorageFactory.ResourcePrefix`),
    /// so every name it serves under several group/versions is one entry, with its kind, its
    /// `scale` kinds and each group's versions in priority order; every version listed is
    /// served or removed (`served::REMOVED`), and every removed resource still served under
    /// another version is listed. core/v1 events were missing (one storage with
    /// events.k8s.io), and with them eight other resources.
    #[test]
    fn the_table_is_what_kube_apiserver_serves() {
        use std::collections::BTreeMap;
        let served: Vec<_> = [
            "kube-apiserver-1.32.0-api.json",
            "kube-apiserver-1.32.0-apis.json",
        ]
        .iter()
        .flat_map(|f| discovered(f))
        .collect();
        let mut by_name: BTreeMap<&str, Vec<_>> = BTreeMap::new();
        for s in &served {
            by_name.entry(s.2.as_str()).or_default().push(s);
        }
        let entry = |resource: &str| EQUIVALENCES.iter().find(|e| e.resource == resource);
        for (resource, versions) in &by_name {
            let listed = versions.iter().map(|s| (s.0.as_str(), s.1.as_str()));
            if versions.len() > 1 {
                let e = entry(resource).unwrap_or_else(|| panic!("{resource}: {versions:?}"));
                for (g, v) in listed.clone() {
                    assert!(e.versions.contains(&(g, v)), "{resource}: {g}/{v}");
                }
                // The served versions of each group in the table's order are discovery's.
                let in_table: Vec<_> = e
                    .versions
                    .iter()
                    .copied()
                    .filter(|gv| listed.clone().any(|l| l == *gv))
                    .collect();
                assert_eq!(in_table, listed.clone().collect::<Vec<_>>(), "{resource}");
            }
            if let Some(e) = entry(resource) {
                for s in versions {
                    assert_eq!(e.kind, s.3, "{resource}");
                    let i = e.versions.iter().position(|&gv| gv == (&*s.0, &*s.1));
                    let scale = e
                        .scale
                        .zip(i)
                        .map(|(scale, i)| format!("{}/{}/Scale", scale[i].0, scale[i].1));
                    assert_eq!(scale, s.4, "{resource} {}/{} scale", s.0, s.1);
                }
            }
        }
        for e in EQUIVALENCES {
            for &(g, v) in e.versions {
                let is_served = served
                    .iter()
                    .any(|s| (&*s.0, &*s.1, &*s.2) == (g, v, e.resource));
                assert!(
                    is_served || crate::served::removal(g, v, e.resource).is_some(),
                    "{} {g}/{v}: neither served by 1.32.0 nor removed",
                    e.resource
                );
            }
        }
        for r in crate::served::REMOVED {
            let Some(resource) = r.resource else { continue };
            if by_name.contains_key(resource) {
                let e = entry(resource).unwrap_or_else(|| panic!("{resource} {r:?}"));
                assert!(
                    e.versions.contains(&(r.group, r.version)),
                    "{resource} {r:?}"
                );
            }
        }
    }

    #[test]
    fn no_equivalents_for_core_or_unknown_resources() {
        assert_eq!(equivalents("", "v1", "pods", "").count(), 0);
        assert_eq!(equivalents("", "v1", "events", "").count(), 2);
        assert_eq!(equivalents("example.com", "v1", "widgets", "").count(), 0);
        // Every table entry names each group/version once.
        for e in EQUIVALENCES {
            for (i, gv) in e.versions.iter().enumerate() {
                assert!(!e.versions[..i].contains(gv), "{} {gv:?}", e.resource);
            }
        }
    }
}
