//! Safety findings: webhook configurations that load and work, but put the cluster at risk
//! when their backend is down or slow. `check` prints them (and `registration` for the
//! configuration it generates) as warnings with the webhook, its field path and a fix.
//!
//! Each finding is decided as kube-apiserver would decide the request at risk: the control
//! plane's own requests (a kubelet's Node and Lease updates and certificate requests, leader
//! election, TokenReviews and SubjectAccessReviews, system pods, the webhook's own backend) are built as AdmissionReviews
//! and run through the same selection as `serve` and `explain` (rules, namespaceSelector,
//! objectSelector, matchPolicy, matchConditions; [`crate::tools::explain::explain`]). What is
//! flagged is what has taken clusters down: a `failurePolicy: Fail` webhook that is down
//! blocks every request it is called for, its own recovery included.
//!
//! `sideEffects: Unknown` or `Some`, which make every dry run fail, is the loader's own warning
//! (with its fix), printed by `check` beside these.
//!
//! Not flagged: the webhook configurations themselves, which kube-apiserver never sends to
//! webhooks (`IsExemptAdmissionConfigurationResource`,
//! `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules/rules.go`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::api::{FailurePolicy, ReinvocationPolicy, WebhookType};
use crate::config::{Problem, Snapshot, Webhook};
use crate::exclusions::Exclusions;
use crate::matching::authz::{CheckKey, Decision};
use crate::matching::Namespaces;
use crate::review::ParsedReview;

/// kube-apiserver's request deadline: `--request-timeout`, default 1m
/// (`staging/src/k8s.io/apiserver/pkg/server/config.go` `NewConfig`, `RequestTimeout`). Every
/// webhook a request meets runs within it: mutating webhooks one after another, validating
/// webhooks in parallel (`dispatcher.go` of `mutating` and `validating`).
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(60);

/// The longest `timeoutSeconds` one webhook may have (`ValidateWebhook`,
/// `pkg/apis/admissionregistration/validation/validation.go`).
const MAX_WEBHOOK_TIMEOUT: Duration = Duration::from_secs(30);

/// One of the control plane's own requests, as kube-apiserver would send it to webhooks.
struct Probe {
    /// What it is, for the message.
    what: String,
    /// What fails while a `failurePolicy: Fail` webhook called for it is down.
    consequence: &'static str,
    operation: &'static str,
    group: &'static str,
    version: &'static str,
    resource: &'static str,
    sub_resource: &'static str,
    kind: &'static str,
    namespace: String,
    name: &'static str,
    username: String,
    groups: &'static [&'static str],
}

const NODE_GROUPS: &[&str] = &["system:nodes", "system:authenticated"];
const CONTROLLER_GROUPS: &[&str] = &[
    "system:serviceaccounts",
    "system:serviceaccounts:kube-system",
    "system:authenticated",
];
const COMPONENT_GROUPS: &[&str] = &["system:authenticated"];

/// The control plane's requests every cluster makes.
///
/// Over 80 lines: a table, one entry per request.
fn control_plane_probes() -> Vec<Probe> {
    let node = |what: &str, consequence, operation, sub_resource| Probe {
        what: what.to_string(),
        consequence,
        operation,
        group: "",
        version: "v1",
        resource: "nodes",
        sub_resource,
        kind: "Node",
        namespace: String::new(),
        name: "node-1",
        username: "system:node:node-1".into(),
        groups: NODE_GROUPS,
    };
    let lease = |what: &str, consequence, namespace: &str, name, username: &str, groups| Probe {
        what: what.to_string(),
        consequence,
        operation: "UPDATE",
        group: "coordination.k8s.io",
        version: "v1",
        resource: "leases",
        sub_resource: "",
        kind: "Lease",
        namespace: namespace.to_string(),
        name,
        username: username.to_string(),
        groups,
    };
    let review = |what: &str, consequence, group, resource, kind| Probe {
        what: what.to_string(),
        consequence,
        operation: "CREATE",
        group,
        version: "v1",
        resource,
        sub_resource: "",
        kind,
        namespace: String::new(),
        name: "",
        username: "system:node:node-1".into(),
        groups: NODE_GROUPS,
    };
    vec![
        node(
            "a kubelet registering its Node (CREATE nodes)",
            "new nodes cannot join the cluster",
            "CREATE",
            "",
        ),
        node(
            "a kubelet reporting its Node's status (UPDATE nodes/status)",
            "node conditions go stale and the node controller marks nodes NotReady",
            "UPDATE",
            "status",
        ),
        lease(
            "a kubelet renewing its node Lease in kube-node-lease (the heartbeat)",
            "nodes are marked NotReady and their pods evicted",
            "kube-node-lease",
            "node-1",
            "system:node:node-1",
            NODE_GROUPS,
        ),
        lease(
            "kube-controller-manager renewing its leader election Lease in kube-system",
            "kube-controller-manager loses its lease and no controller runs",
            "kube-system",
            "kube-controller-manager",
            "system:kube-controller-manager",
            COMPONENT_GROUPS,
        ),
        lease(
            "kube-scheduler renewing its leader election Lease in kube-system",
            "kube-scheduler loses its lease and no pod is scheduled",
            "kube-system",
            "kube-scheduler",
            "system:kube-scheduler",
            COMPONENT_GROUPS,
        ),
        review(
            "a TokenReview (kubelets and aggregated API servers authenticating callers)",
            "token authentication through the API fails",
            "authentication.k8s.io",
            "tokenreviews",
            "TokenReview",
        ),
        review(
            "a SubjectAccessReview (kubelets and aggregated API servers authorizing callers)",
            "authorization through the API fails",
            "authorization.k8s.io",
            "subjectaccessreviews",
            "SubjectAccessReview",
        ),
        pod_probe(
            "kube-system",
            "the ReplicaSet controller creating a system pod in kube-system",
            "system pods (DNS, networking) cannot be recreated",
        ),
        Probe {
            what: "a kubelet requesting its client or serving certificate (CREATE certificatesigningrequests)".into(),
            consequence: "kubelets cannot renew their certificates (a node drops out when its client certificate expires) and new nodes cannot join",
            operation: "CREATE",
            group: "certificates.k8s.io",
            version: "v1",
            resource: "certificatesigningrequests",
            sub_resource: "",
            kind: "CertificateSigningRequest",
            namespace: String::new(),
            name: "csr-1",
            username: "system:node:node-1".into(),
            groups: NODE_GROUPS,
        },
        Probe {
            what: "kube-controller-manager approving a kubelet's certificate (UPDATE certificatesigningrequests/approval)".into(),
            consequence: "kubelet certificates are never approved",
            operation: "UPDATE",
            group: "certificates.k8s.io",
            version: "v1",
            resource: "certificatesigningrequests",
            sub_resource: "approval",
            kind: "CertificateSigningRequest",
            namespace: String::new(),
            name: "csr-1",
            username: "system:serviceaccount:kube-system:certificate-controller".into(),
            groups: CONTROLLER_GROUPS,
        },
    ]
}

/// The ReplicaSet controller creating a pod in `namespace`.
fn pod_probe(namespace: &str, what: &str, consequence: &'static str) -> Probe {
    Probe {
        what: what.to_string(),
        consequence,
        operation: "CREATE",
        group: "",
        version: "v1",
        resource: "pods",
        sub_resource: "",
        kind: "Pod",
        namespace: namespace.to_string(),
        name: "pod-1",
        username: "system:serviceaccount:kube-system:replicaset-controller".into(),
        groups: CONTROLLER_GROUPS,
    }
}

/// The requests a webhook whose backend runs in `namespace` needs to recover: its pods
/// recreated, its Service's endpoints updated.
fn own_namespace_probes(namespace: &str) -> Vec<Probe> {
    vec![
        pod_probe(
            namespace,
            &format!("the ReplicaSet controller creating a pod in the backend's own namespace {namespace:?}"),
            "its own pods cannot be recreated: it cannot recover",
        ),
        Probe {
            what: format!(
                "the EndpointSlice controller updating endpoints in the backend's own namespace {namespace:?}"
            ),
            consequence: "its Service gets no new endpoints: it cannot recover",
            operation: "UPDATE",
            group: "discovery.k8s.io",
            version: "v1",
            resource: "endpointslices",
            sub_resource: "",
            kind: "EndpointSlice",
            namespace: namespace.to_string(),
            name: "backend-abcde",
            username: "system:serviceaccount:kube-system:endpointslice-controller".into(),
            groups: CONTROLLER_GROUPS,
        },
    ]
}

impl Probe {
    /// The AdmissionReview kube-apiserver would send (v1; the object with name and namespace
    /// and no labels).
    fn review(&self) -> Vec<u8> {
        let api_version = if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        };
        let kind =
            serde_json::json!({"group": self.group, "version": self.version, "kind": self.kind});
        let resource = serde_json::json!({"group": self.group, "version": self.version, "resource": self.resource});
        let mut metadata = serde_json::json!({"name": self.name});
        if !self.namespace.is_empty() {
            metadata["namespace"] = self.namespace.clone().into();
        }
        let object =
            serde_json::json!({"apiVersion": api_version, "kind": self.kind, "metadata": metadata});
        let update = self.operation == "UPDATE";
        let mut request = serde_json::json!({
            "uid": "00000000-0000-0000-0000-000000000000",
            "kind": kind, "resource": resource,
            "requestKind": kind, "requestResource": resource,
            "name": self.name,
            "operation": self.operation,
            "userInfo": {"username": self.username, "groups": self.groups},
            "object": object,
            "oldObject": if update { object.clone() } else { serde_json::Value::Null },
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1",
                        "kind": if update { "UpdateOptions" } else { "CreateOptions" }},
        });
        if !self.sub_resource.is_empty() {
            request["subResource"] = self.sub_resource.into();
            request["requestSubResource"] = self.sub_resource.into();
        }
        if !self.namespace.is_empty() {
            request["namespace"] = self.namespace.clone().into();
        }
        serde_json::to_vec(&serde_json::json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request
        }))
        .unwrap_or_default()
    }
}

/// Namespaces as a cluster has them: only the label every namespace carries,
/// `kubernetes.io/metadata.name` (set by kube-apiserver since 1.21).
fn namespaces_named(names: &BTreeSet<String>) -> Option<Namespaces> {
    let items: Vec<serde_json::Value> = names
        .iter()
        .map(|n| {
            serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": n, "labels": {"kubernetes.io/metadata.name": n}}})
        })
        .collect();
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    Namespaces::parse(&list.to_string()).ok()
}

/// The webhooks of `snapshot` called for `probe` (or refusing it before the call, as a
/// matchCondition that cannot be decided does under `failurePolicy: Fail`), by name.
fn called_for(
    snapshot: &Snapshot,
    probe: &Probe,
    namespaces: Option<&Namespaces>,
    exclusions: Option<&Exclusions>,
) -> BTreeSet<String> {
    let body = probe.review();
    let Ok(review) = ParsedReview::parse(&body) else {
        return BTreeSet::new();
    };
    // `authorizer` checks cannot be answered offline: undecided, as explain without a
    // kubeconfig; a webhook whose conditions need one counts as called (the worst case).
    let undecided = |_: &CheckKey| Decision {
        error: Some("not checked offline".into()),
        ..Decision::default()
    };
    let explanation =
        crate::tools::explain::explain(snapshot, &review, namespaces, exclusions, &[], &undecided);
    if explanation
        .exclusion
        .as_ref()
        .is_some_and(|e| e.verdict == "exempt")
    {
        return BTreeSet::new();
    }
    explanation
        .webhooks
        .iter()
        .filter(|w| w.verdict != "skip")
        .map(|w| format!("{}/{}", w.webhook_type, w.name))
        .collect()
}

/// Where a webhook's own backend runs, when its `clientConfig` names a Service (or a URL of
/// its cluster DNS name).
fn backend_namespace(webhook: &Webhook) -> Option<String> {
    webhook.backend.service_namespace().map(str::to_string)
}

fn key(webhook: &Webhook) -> String {
    format!("{}/{}", webhook.webhook_type.as_str(), webhook.name)
}

/// Every safety finding of `snapshot`, sorted by file, configuration and webhook.
/// `own_namespace` is where the proxy itself runs when it is the webhook registered (the
/// `registration` it generates): its pods and endpoints are then the backend's own too.
/// Requests the proxy-wide `exclusions` exempt never reach a webhook (the proxy answers them
/// first), so they are not at risk.
///
/// # Examples
/// ```
/// let yaml = r#"apiVersion: admissionregistration.k8s.io/v1
/// kind: ValidatingWebhookConfiguration
/// metadata: {name: everything}
/// webhooks:
/// - name: all.example.com
///   clientConfig: {service: {namespace: policy, name: webhook}}
///   rules: [{operations: ["*"], apiGroups: ["*"], apiVersions: ["*"], resources: ["*/*"]}]
///   failurePolicy: Fail
///   sideEffects: None
///   admissionReviewVersions: [v1]
/// "#;
/// let snapshot =
///     admission_proxy::config::load_contents(&[("all.yaml".into(), yaml.into())]).unwrap();
/// let findings = admission_proxy::tools::findings::findings(&snapshot, None, None);
/// assert!(findings.iter().any(|f| f.message.contains("kube-node-lease")));
/// ```
pub fn findings(
    snapshot: &Snapshot,
    own_namespace: Option<&str>,
    exclusions: Option<&Exclusions>,
) -> Vec<Problem> {
    let mut webhooks: Vec<&Webhook> = snapshot.webhooks().map(AsRef::as_ref).collect();
    webhooks.sort_by(|a, b| {
        (&a.source, &a.configuration, a.index).cmp(&(&b.source, &b.configuration, b.index))
    });
    let mut found = Vec::new();
    control_plane(snapshot, &webhooks, own_namespace, exclusions, &mut found);
    for w in &webhooks {
        catch_all(w, &mut found);
        reinvocation(w, &mut found);
    }
    deadline(&webhooks, &mut found);
    found.sort_by(|a: &Problem, b: &Problem| {
        (&a.file, &a.configuration, &a.webhook).cmp(&(&b.file, &b.configuration, &b.webhook))
    });
    found
}

/// `failurePolicy: Fail` webhooks called for the control plane's own requests.
fn control_plane(
    snapshot: &Snapshot,
    webhooks: &[&Webhook],
    own_namespace: Option<&str>,
    exclusions: Option<&Exclusions>,
    found: &mut Vec<Problem>,
) {
    let mut own: BTreeSet<String> = webhooks
        .iter()
        .filter_map(|w| backend_namespace(w))
        .collect();
    own.extend(own_namespace.map(str::to_string));
    let mut names: BTreeSet<String> = ["kube-system", "kube-node-lease"].map(String::from).into();
    names.extend(own.iter().cloned());
    let namespaces = namespaces_named(&names);
    let mut flag = |probe: &Probe, only: &dyn Fn(&Webhook) -> bool| {
        let called = called_for(snapshot, probe, namespaces.as_ref(), exclusions);
        for w in webhooks {
            if w.failure_policy() != FailurePolicy::Fail || !only(w) || !called.contains(&key(w)) {
                continue;
            }
            found.push(Problem::of_webhook(
                w,
                format!("webhooks[{}].failurePolicy", w.index),
                format!(
                    "Fail, and the webhook is called for {}: while its backend is down, {}; \
                     fix: exclude it (a namespaceSelector on kubernetes.io/metadata.name, an \
                     objectSelector, or a matchCondition on request.userInfo) or set \
                     failurePolicy: Ignore",
                    probe.what, probe.consequence
                ),
            ));
        }
    };
    for probe in control_plane_probes() {
        flag(&probe, &|_| true);
    }
    for namespace in &own {
        let mine = |w: &Webhook| {
            backend_namespace(w).as_deref() == Some(namespace.as_str())
                || own_namespace == Some(namespace.as_str())
        };
        for probe in own_namespace_probes(namespace) {
            flag(&probe, &mine);
        }
    }
}

/// A rule for every resource of every group, with no objectSelector narrowing it and no
/// namespaceSelector leaving kube-system out (one that still selects it does not).
fn catch_all(w: &Webhook, found: &mut Vec<Problem>) {
    let kube_system = BTreeMap::from([(
        crate::matching::namespaces::METADATA_NAME_LABEL.to_string(),
        "kube-system".to_string(),
    )]);
    if !w.matcher.object_selector.is_empty() || !w.matcher.namespace_selector.matches(&kube_system)
    {
        return;
    }
    // Gatekeeper's selector, for one, leaves out namespaces labelled to be ignored, which
    // kube-system is only once someone labels it.
    let selector = if w.matcher.namespace_selector.is_empty() {
        "no namespaceSelector"
    } else {
        "a namespaceSelector that selects kube-system as it is created (labelled with its name \
         only)"
    };
    for (i, rule) in w.spec.rules.iter().enumerate() {
        let every_group = rule.api_groups.iter().any(|g| g == "*");
        let every_resource = rule.resources.iter().any(|r| r == "*" || r == "*/*");
        if every_group && every_resource {
            found.push(Problem::of_webhook(
                w,
                format!("webhooks[{}].rules[{i}]", w.index),
                format!(
                    "every resource of every group, in every namespace (kube-system included) and \
                     {selector}: fix: add a namespaceSelector leaving out the system namespaces \
                     (kubernetes.io/metadata.name NotIn [kube-system, kube-node-lease]) or name \
                     the resources the webhook needs"
                ),
            ));
        }
    }
}

/// A mutating webhook with `reinvocationPolicy: IfNeeded` may be called twice for one request
/// (`reinvocationcontext.go`): its timeout counts twice.
fn reinvocation(w: &Webhook, found: &mut Vec<Problem>) {
    if w.webhook_type != WebhookType::Mutating
        || w.reinvocation_policy != ReinvocationPolicy::IfNeeded
        || 2 * w.timeout <= MAX_WEBHOOK_TIMEOUT
    {
        return;
    }
    found.push(Problem::of_webhook(
        w,
        format!("webhooks[{}].timeoutSeconds", w.index),
        format!(
            "{} s with reinvocationPolicy: IfNeeded: called twice, the webhook may take {} s of \
             the request's {} s; fix: timeoutSeconds of at most {} or reinvocationPolicy: Never",
            w.timeout.as_secs(),
            2 * w.timeout.as_secs(),
            REQUEST_DEADLINE.as_secs(),
            MAX_WEBHOOK_TIMEOUT.as_secs() / 2
        ),
    ));
}

/// Timeouts that add up past [`REQUEST_DEADLINE`] for one request: every resource a rule
/// names (a placeholder for `*`), CREATE and UPDATE, every selector passing (the worst case).
fn deadline(webhooks: &[&Webhook], found: &mut Vec<Problem>) {
    let mut seen = BTreeSet::new();
    for w in webhooks {
        for rule in &w.spec.rules {
            for group in &rule.api_groups {
                for resource in &rule.resources {
                    let group = if group == "*" {
                        "example.com"
                    } else {
                        group.as_str()
                    };
                    let resource = resource.split('/').next().unwrap_or("*");
                    let resource = if resource == "*" { "widgets" } else { resource };
                    if !seen.insert((group.to_string(), resource.to_string())) {
                        continue;
                    }
                    for operation in ["CREATE", "UPDATE"] {
                        if let Some(p) = over_deadline(webhooks, group, resource, operation) {
                            if !found.iter().any(|f| f.message == p.message) {
                                found.push(p);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The webhooks whose rules take `operation` on `group`/`resource` (any version, any
/// namespace), when their timeouts add up past the deadline.
fn over_deadline(
    webhooks: &[&Webhook],
    group: &str,
    resource: &str,
    operation: &str,
) -> Option<Problem> {
    let takes = |w: &&&Webhook| {
        w.spec.rules.iter().any(|r| {
            let op = r.operations.iter().any(|o| o == "*" || o == operation);
            let g = r.api_groups.iter().any(|g| g == "*" || g == group);
            let res = r.resources.iter().any(|x| {
                let main = x.split('/').next().unwrap_or("");
                !x.contains('/') && (main == "*" || main == resource)
            });
            op && g && res
        })
    };
    let met: Vec<&&Webhook> = webhooks.iter().filter(takes).collect();
    let mutating: Vec<&&Webhook> = met
        .iter()
        .copied()
        .filter(|w| w.webhook_type == WebhookType::Mutating)
        .collect();
    let twice =
        |w: &Webhook| mutating.len() > 1 && w.reinvocation_policy == ReinvocationPolicy::IfNeeded;
    let sequential: Duration = mutating
        .iter()
        .map(|w| if twice(w) { 2 * w.timeout } else { w.timeout })
        .sum();
    let parallel = met
        .iter()
        .filter(|w| w.webhook_type == WebhookType::Validating)
        .map(|w| w.timeout)
        .max()
        .unwrap_or_default();
    let total = sequential + parallel;
    if total <= REQUEST_DEADLINE {
        return None;
    }
    let first = met.first()?;
    let list: Vec<String> = met
        .iter()
        .map(|w| {
            let times = if twice(w) { " x2 (IfNeeded)" } else { "" };
            format!(
                "{} ({} {} s{times})",
                w.name,
                w.webhook_type.as_str(),
                w.timeout.as_secs()
            )
        })
        .collect();
    let group = if group.is_empty() { "core" } else { group };
    Some(Problem::of_webhook(
        first,
        format!("webhooks[{}].timeoutSeconds", first.index),
        format!(
            "{operation} {group} {resource}: {} may take {} s together (mutating webhooks one \
             after another, validating ones in parallel), past kube-apiserver's {} s request \
             deadline, which fails the request whatever failurePolicy says; fix: lower \
             timeoutSeconds so that they add up to less",
            list.join(", "),
            total.as_secs(),
            REQUEST_DEADLINE.as_secs()
        ),
    ))
}
