//! matchPolicy Equivalent end to end (KEP-492 "Convert to webhook-requested version"):
//! a legacy webhook registered for an old version receives the request converted to that
//! version, and its patch comes back as a patch of the caller's object. Real proxy, real TLS,
//! real example backend.

use admission_proxy::api::RuleWithOperations;
use admission_proxy::config;
use admission_proxy::matching::{Rule, RuleInput};
use admission_proxy::review::ParsedReview;
use admission_proxy::tools::registration;
use base64::Engine;
use serde_json::{json, Value};

use crate::common::{self, fixture, webhook_config, TestBackend, TestProxy};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// A mutating webhook `name` registered for `group/version resource`, answering with `patch`
/// (JSON Patch, in the registered version) through the example backend's `/raw`.
fn legacy_mutating(
    backend: &TestBackend,
    name: &str,
    group: &str,
    version: &str,
    resource: &str,
    patch: Value,
    extra: &str,
) -> String {
    let path = patching_path(&patch);
    webhook_config(
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
        name,
        &backend.client_config(&path),
        &format!("[{{operations: [\"*\"], apiGroups: [\"{group}\"], apiVersions: [\"{version}\"], resources: [\"{resource}\"]}}]"),
        &format!("sideEffects: None\n  admissionReviewVersions: [v1]\n  {extra}"),
    )
}

/// The example backend's path that allows with `patch` (JSON Patch) through `/raw`.
fn patching_path(patch: &Value) -> String {
    let answer = json!({"apiVersion": "$API", "kind": "AdmissionReview", "response": {
        "uid": "$UID", "allowed": true, "patchType": "JSONPatch",
        "patch": B64.encode(patch.to_string())}});
    format!(
        "/raw/200/{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(answer.to_string())
    )
}

/// A v1 AdmissionReview: CREATE of `object` as `(group, version, kind, resource)` in
/// namespace "production", by jane.
fn create_review(
    (group, version, kind, resource): (&str, &str, &str, &str),
    object: Value,
) -> Vec<u8> {
    let gvk = json!({"group": group, "version": version, "kind": kind});
    let gvr = json!({"group": group, "version": version, "resource": resource});
    let name = object["metadata"]["name"].clone();
    serde_json::to_vec(
        &json!({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
        "request": {"uid": "c0c0c0c0-0000-4000-8000-000000000001", "kind": gvk, "resource": gvr,
            "requestKind": gvk, "requestResource": gvr, "name": name, "namespace": "production",
            "operation": "CREATE", "userInfo": {"username": "jane"}, "object": object,
            "oldObject": null, "dryRun": false, "options": null}}),
    )
    .unwrap()
}

/// What the backend received last.
fn received(backend: &TestBackend) -> Value {
    let (_, body) = backend.recorder.last().expect("the backend was called");
    serde_json::from_slice(&body).unwrap()
}

/// The caller's object after applying the proxy's answer patch.
fn patched(review: &[u8], reply: &common::Reply) -> Value {
    let review: Value = serde_json::from_slice(review).unwrap();
    let mut object = review["request"]["object"].clone();
    let patch = reply.json["response"]["patch"].as_str().expect("a patch");
    assert_eq!(reply.json["response"]["patchType"], "JSONPatch");
    let ops: json_patch::Patch = serde_json::from_slice(&B64.decode(patch).unwrap()).unwrap();
    json_patch::patch(&mut object, &ops).unwrap();
    object
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extensions_v1beta1_deployment_webhook_gets_v1beta1_and_patches_apps_v1() {
    let backend = TestBackend::start();
    // The legacy webhook sets rollbackTo (a v1beta1-only field) and an annotation, with a
    // v4-style `replace` of an annotation that does not exist yet.
    let patch = json!([
        {"op": "add", "path": "/spec/rollbackTo", "value": {"revision": 4}},
        {"op": "replace", "path": "/metadata/annotations/legacy", "value": "seen"}
    ]);
    let proxy = TestProxy::start(&legacy_mutating(
        &backend,
        "deploy.legacy.example.com",
        "extensions",
        "v1beta1",
        "deployments",
        patch,
        "",
    ));
    let review = fixture("0064-create-apps-v1-deployments-v1.json");
    let reply = proxy.review("deploy.legacy.example.com", &review).await;
    assert!(reply.allowed(), "{}", reply.json);

    // `CreateV1AdmissionReview`: kind/resource and the object are the invocation's; request*
    // the original's.
    let sent = received(&backend);
    let request = &sent["request"];
    assert_eq!(
        request["kind"],
        json!({"group": "extensions", "version": "v1beta1", "kind": "Deployment"})
    );
    assert_eq!(
        request["resource"],
        json!({"group": "extensions", "version": "v1beta1", "resource": "deployments"})
    );
    assert_eq!(
        request["requestKind"],
        json!({"group": "apps", "version": "v1", "kind": "Deployment"})
    );
    assert_eq!(
        request["requestResource"],
        json!({"group": "apps", "version": "v1", "resource": "deployments"})
    );
    assert_eq!(request["object"]["apiVersion"], "extensions/v1beta1");
    let original: Value = serde_json::from_slice(&review).unwrap();
    assert_eq!(request["uid"], original["request"]["uid"]);
    assert_eq!(
        request["object"]["spec"],
        original["request"]["object"]["spec"]
    );

    // The patch lands as an apps/v1 patch: rollbackTo becomes the annotation apps/v1 keeps it in.
    let after = patched(&review, &reply);
    assert_eq!(after["apiVersion"], "apps/v1");
    assert_eq!(
        after["metadata"]["annotations"]["deprecated.deployment.rollback.to"],
        "4"
    );
    assert_eq!(after["metadata"]["annotations"]["legacy"], "seen");
    assert!(after["spec"].get("rollbackTo").is_none());
    let mut expected = original["request"]["object"].clone();
    expected["metadata"]["annotations"]["legacy"] = json!("seen");
    expected["metadata"]["annotations"]["deprecated.deployment.rollback.to"] = json!("4");
    assert_eq!(after, expected);

    // Under matchPolicy Exact the same registration never sees the request.
    let backend2 = TestBackend::start();
    let exact = TestProxy::start(&legacy_mutating(
        &backend2,
        "exact.legacy.example.com",
        "extensions",
        "v1beta1",
        "deployments",
        json!([]),
        "matchPolicy: Exact",
    ));
    let reply = exact.review("exact.legacy.example.com", &review).await;
    assert_eq!(reply.decision, "skipped");
    assert_eq!(backend2.recorder.calls(), 0);
}

/// An Equivalent webhook inside a mutating chain: it receives the Deployment as
/// extensions/v1beta1, its patch comes back in the caller's apps/v1, and the next webhook of the
/// chain is selected and called on that patched apps/v1 object (its objectSelector matches
/// only the label the first one added); the chain's one patch turns the caller's object into
/// the final one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_equivalent_webhook_in_a_mutating_chain_hands_on_the_callers_version() {
    let first = TestBackend::start();
    let second = TestBackend::start();
    let patch = json!([
        {"op": "add", "path": "/metadata/labels", "value": {"legacy": "seen"}},
        {"op": "add", "path": "/spec/rollbackTo", "value": {"revision": 4}}
    ]);
    let hook = |name: &str, client_config: String, rules: &str, extra: &str| {
        format!(
            "- name: {name}\n  clientConfig: {client_config}\n  rules: {rules}\n  sideEffects: None\n  admissionReviewVersions: [v1]\n{extra}"
        )
    };
    let config = format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata: {{name: deploys}}\nwebhooks:\n{}{}",
        hook(
            "rollout.legacy.example.com",
            first.client_config(&patching_path(&patch)),
            r#"[{operations: ["*"], apiGroups: ["extensions"], apiVersions: ["v1beta1"], resources: ["deployments"]}]"#,
            "",
        ),
        hook(
            "labelled.legacy.example.com",
            second.client_config("/upstream/noop"),
            r#"[{operations: ["*"], apiGroups: ["apps"], apiVersions: ["v1"], resources: ["deployments"]}]"#,
            "  objectSelector: {matchLabels: {legacy: seen}}\n",
        ),
    );
    let proxy = TestProxy::start(&config);
    let review = fixture("0064-create-apps-v1-deployments-v1.json");
    let reply = proxy
        .post("/configurations/mutating/deploys?timeout=10s", &review)
        .await;
    assert_eq!(reply.decision, "allowed", "{}", reply.json);
    assert_eq!(
        received(&first)["request"]["object"]["apiVersion"],
        "extensions/v1beta1"
    );
    assert_eq!(second.recorder.calls(), 1, "selected on the patched object");
    let seen = &received(&second)["request"]["object"];
    assert_eq!(seen["apiVersion"], "apps/v1");
    assert_eq!(seen["metadata"]["labels"]["legacy"], "seen");
    assert_eq!(
        seen["metadata"]["annotations"]["deprecated.deployment.rollback.to"], "4",
        "rollbackTo came back as apps/v1 keeps it"
    );
    assert!(seen["spec"].get("rollbackTo").is_none());
    let after = patched(&review, &reply);
    assert_eq!(
        &after, seen,
        "the chain's patch gives the object the last webhook saw"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingress_v1beta1_webhook_gets_service_name_and_port() {
    let backend = TestBackend::start();
    let patch = json!([{"op": "replace", "path": "/spec/rules/0/http/paths/0/backend/servicePort", "value": 8080}]);
    let proxy = TestProxy::start(&legacy_mutating(
        &backend,
        "ingress.legacy.example.com",
        "networking.k8s.io",
        "v1beta1",
        "ingresses",
        patch,
        "",
    ));
    let review = fixture("0103-create-networking.k8s.io-v1-ingresses-v1.json");
    let reply = proxy.review("ingress.legacy.example.com", &review).await;
    assert!(reply.allowed(), "{}", reply.json);
    let sent = received(&backend);
    let object = &sent["request"]["object"];
    assert_eq!(object["apiVersion"], "networking.k8s.io/v1beta1");
    assert_eq!(
        object["spec"]["rules"][0]["http"]["paths"][0]["backend"],
        json!({"serviceName": "tf-serving", "servicePort": 8501})
    );
    let after = patched(&review, &reply);
    assert_eq!(
        after["spec"]["rules"][0]["http"]["paths"][0]["backend"],
        json!({"service": {"name": "tf-serving", "port": {"number": 8080}}})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cronjob_v1beta1_webhook_and_match_conditions_see_the_converted_object() {
    let backend = TestBackend::start();
    let patch = json!([{"op": "add", "path": "/spec/suspend", "value": true}]);
    let config = legacy_mutating(
        &backend,
        "cron.legacy.example.com",
        "batch",
        "v1beta1",
        "cronjobs",
        patch,
        "matchConditions: [{name: converted, expression: \"object.apiVersion == 'batch/v1beta1' && request.kind.version == 'v1beta1' && request.requestKind.version == 'v1'\"}]",
    );
    let proxy = TestProxy::start(&config);
    let object = json!({"apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "nightly", "namespace": "production"},
        "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": {"spec": {
            "containers": [{"name": "job", "image": "busybox"}], "restartPolicy": "Never"}}}}}});
    let review = create_review(("batch", "v1", "CronJob", "cronjobs"), object);
    let reply = proxy.review("cron.legacy.example.com", &review).await;
    assert!(reply.allowed(), "{}", reply.json);
    assert_eq!(
        backend.recorder.calls(),
        1,
        "the matchCondition saw batch/v1beta1"
    );
    assert_eq!(
        received(&backend)["request"]["object"]["apiVersion"],
        "batch/v1beta1"
    );
    let after = patched(&review, &reply);
    assert_eq!(after["apiVersion"], "batch/v1");
    assert_eq!(after["spec"]["suspend"], true);
}

/// An autoscaling/v2 HorizontalPodAutoscaler with a memory and a CPU utilization metric and a
/// scale-down behavior, as kube-apiserver sends it.
fn hpa_v2() -> Value {
    json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "production", "uid": "5c0a2f4e-0000-4000-8000-0000000000a1",
            "annotations": {"team": "platform"}},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 2, "maxReplicas": 10,
            "metrics": [
                {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "500Mi"}}},
                {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300, "selectPolicy": "Min",
                "policies": [{"type": "Percent", "value": 10, "periodSeconds": 60}]}}},
        "status": {"desiredReplicas": 0}})
}

const HPA_V2: (&str, &str, &str, &str) = (
    "autoscaling",
    "v2",
    "HorizontalPodAutoscaler",
    "horizontalpodautoscalers",
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hpa_v1_webhook_gets_the_cpu_target_and_annotations_and_patches_autoscaling_v2() {
    let backend = TestBackend::start();
    // The legacy webhook only knows v1's fields: it lowers the CPU target and raises maxReplicas.
    let patch = json!([
        {"op": "replace", "path": "/spec/targetCPUUtilizationPercentage", "value": 55},
        {"op": "replace", "path": "/spec/maxReplicas", "value": 20}
    ]);
    let proxy = TestProxy::start(&legacy_mutating(
        &backend,
        "hpa.legacy.example.com",
        "autoscaling",
        "v1",
        "horizontalpodautoscalers",
        patch,
        "matchConditions: [{name: v1-shape, expression: \"object.spec.targetCPUUtilizationPercentage == 70\"}]",
    ));
    let review = create_review(HPA_V2, hpa_v2());
    let reply = proxy.review("hpa.legacy.example.com", &review).await;
    assert!(reply.allowed(), "{}", reply.json);

    // pkg/apis/autoscaling/v1/conversion.go: the CPU target is v1's field, the other metric
    // and the behavior ride in annotations, as kube-apiserver writes them.
    let sent = received(&backend);
    let object = &sent["request"]["object"];
    assert_eq!(object["apiVersion"], "autoscaling/v1");
    assert_eq!(
        object["spec"],
        json!({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 2, "maxReplicas": 10, "targetCPUUtilizationPercentage": 70})
    );
    assert_eq!(
        object["metadata"]["annotations"],
        json!({"team": "platform",
            "autoscaling.alpha.kubernetes.io/metrics": r#"[{"type":"Resource","resource":{"name":"memory","targetAverageValue":"500Mi"}}]"#,
            "autoscaling.alpha.kubernetes.io/behavior": r#"{"ScaleUp":null,"ScaleDown":{"StabilizationWindowSeconds":300,"SelectPolicy":"Min","Policies":[{"Type":"Percent","Value":10,"PeriodSeconds":60}],"Tolerance":null}}"#})
    );
    assert_eq!(
        sent["request"]["requestKind"],
        json!({"group": "autoscaling", "version": "v2", "kind": "HorizontalPodAutoscaler"})
    );

    // The patch lands on autoscaling/v2: the CPU metric's target, not a v1 field; nothing else
    // moves, and no round-trip annotation reaches the caller's object.
    let reply_patch: Value = serde_json::from_slice(
        &B64.decode(reply.json["response"]["patch"].as_str().unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        reply_patch,
        json!([
            {"op": "replace", "path": "/spec/maxReplicas", "value": 20},
            {"op": "replace", "path": "/spec/metrics/1/resource/target/averageUtilization", "value": 55}
        ])
    );
    let mut expected = hpa_v2();
    expected["spec"]["maxReplicas"] = json!(20);
    expected["spec"]["metrics"][1]["resource"]["target"]["averageUtilization"] = json!(55);
    assert_eq!(patched(&review, &reply), expected);
}

/// A review kube-apiserver already converted for the proxy's own registration (matchPolicy
/// Equivalent on a registration naming autoscaling/v1 only): `kind` is autoscaling/v1 and the
/// object is in v1, `requestKind` is still autoscaling/v2 (`CreateV1AdmissionReview` in
/// `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/request/admissionreview.go`).
/// The object is converted from `kind`'s version, here not at all, and the patch kube-apiserver
/// gets back is against the object it sent, in v1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_already_converted_by_kube_apiserver_is_converted_from_its_kind() {
    let backend = TestBackend::start();
    let proxy = TestProxy::start(&legacy_mutating(
        &backend,
        "hpa.legacy.example.com",
        "autoscaling",
        "v1",
        "horizontalpodautoscalers",
        json!([{"op": "replace", "path": "/spec/maxReplicas", "value": 20}]),
        "",
    ));
    let v1 = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "production", "uid": "5c0a2f4e-0000-4000-8000-0000000000a1"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 2, "maxReplicas": 10, "targetCPUUtilizationPercentage": 70}});
    let mut review: Value = serde_json::from_slice(&create_review(HPA_V2, v1.clone())).unwrap();
    review["request"]["kind"]["version"] = json!("v1");
    review["request"]["resource"]["version"] = json!("v1");
    let review = serde_json::to_vec(&review).unwrap();
    let reply = proxy.review("hpa.legacy.example.com", &review).await;
    assert!(reply.allowed(), "{}", reply.json);
    let sent = received(&backend);
    assert_eq!(
        sent["request"]["object"], v1,
        "already in the registered version"
    );
    assert_eq!(sent["request"]["kind"]["version"], "v1");
    assert_eq!(sent["request"]["requestKind"]["version"], "v2");
    let patch: Value = serde_json::from_slice(
        &B64.decode(reply.json["response"]["patch"].as_str().unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        patch,
        json!([{"op": "replace", "path": "/spec/maxReplicas", "value": 20}])
    );
    assert_eq!(backend.recorder.calls(), 1);
}

/// A mutating backend's patch whose result Kubernetes cannot convert back (a v2beta2 tolerance
/// annotation that is not a Quantity) is a patch failure: 500 whatever failurePolicy says
/// (`webhook/mutating/dispatcher.go` returns conversion errors as they are, not as call
/// failures), never a silent allow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patched_object_that_cannot_be_converted_back_is_an_internal_error() {
    let backend = TestBackend::start();
    let patch = json!([{"op": "add",
        "path": "/metadata/annotations/autoscaling.alpha.kubernetes.io~1scale-up-tolerance",
        "value": "ten percent"}]);
    let proxy = TestProxy::start(&legacy_mutating(
        &backend,
        "hpa.legacy.example.com",
        "autoscaling",
        "v2beta2",
        "horizontalpodautoscalers",
        patch,
        "failurePolicy: Ignore",
    ));
    let review = create_review(HPA_V2, hpa_v2());
    let reply = proxy.review("hpa.legacy.example.com", &review).await;
    assert_eq!(backend.recorder.calls(), 1);
    assert_eq!(
        received(&backend)["request"]["object"]["apiVersion"],
        "autoscaling/v2beta2"
    );
    assert!(!reply.allowed());
    assert_eq!(reply.outcome().1, Some(500));
    assert!(
        reply.message().contains(
            r#"failed to parse annotation "autoscaling.alpha.kubernetes.io/scale-up-tolerance""#
        ),
        "{}",
        reply.message()
    );
}

/// A CustomResourceDefinition for `widgets.example.com` serving v2 (storage) and v1, with
/// `conversion` (YAML flow mapping) as its `spec.conversion`.
fn widgets_crd(conversion: &str) -> String {
    format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: widgets.example.com}}\nspec:\n  group: example.com\n  names: {{plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}}\n  scope: Namespaced\n  versions:\n  - {{name: v2, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}\n  - {{name: v1, served: true, storage: false, schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}\n  conversion: {conversion}\n---\n"
    )
}

/// The widgets CRD with `conversion`, and a mutating webhook registered for example.com/v1
/// widgets answering with `patch` (in v1).
fn widgets_config(backend: &TestBackend, conversion: &str, patch: Value, extra: &str) -> String {
    widgets_crd(conversion)
        + &legacy_mutating(
            backend,
            "widgets.legacy.example.com",
            "example.com",
            "v1",
            "widgets",
            patch,
            extra,
        )
}

/// `spec.conversion` calling `path` on `converter` with ConversionReview v1.
fn webhook_conversion(converter: &TestBackend, path: &str) -> String {
    format!(
        "{{strategy: Webhook, webhook: {{clientConfig: {}, conversionReviewVersions: [v1]}}}}",
        converter.client_config(path)
    )
}

/// CREATE of an example.com/v2 Widget with `spec.replicas: 3`.
fn widget_review() -> Vec<u8> {
    create_review(
        ("example.com", "v2", "Widget", "widgets"),
        json!({"apiVersion": "example.com/v2", "kind": "Widget",
               "metadata": {"name": "w1", "namespace": "production", "uid": "8f1c0e2a-0000-4000-8000-00000000000a",
                            "labels": {"app": "web"}},
               "spec": {"replicas": 3, "color": "blue"}}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resource_with_strategy_none_changes_only_the_api_version() {
    let backend = TestBackend::start();
    let config = widgets_config(
        &backend,
        "{strategy: None}",
        json!([{"op": "replace", "path": "/spec/color", "value": "red"}]),
        "matchConditions: [{name: v1, expression: \"object.apiVersion == 'example.com/v1'\"}]",
    );
    let proxy = TestProxy::start(&config);
    let review = widget_review();
    let reply = proxy.review("widgets.legacy.example.com", &review).await;
    assert!(reply.allowed(), "{}", reply.json);
    let request = &received(&backend)["request"];
    assert_eq!(
        request["kind"],
        json!({"group": "example.com", "version": "v1", "kind": "Widget"})
    );
    assert_eq!(
        request["requestResource"],
        json!({"group": "example.com", "version": "v2", "resource": "widgets"})
    );
    let original: Value = serde_json::from_slice(&review).unwrap();
    let mut expected_sent = original["request"]["object"].clone();
    expected_sent["apiVersion"] = json!("example.com/v1");
    assert_eq!(request["object"], expected_sent, "nothing but apiVersion");
    let after = patched(&review, &reply);
    let mut expected = original["request"]["object"].clone();
    expected["spec"]["color"] = json!("red");
    assert_eq!(after, expected);
    // The answer's patch touches only what the webhook changed.
    let patch = B64
        .decode(reply.json["response"]["patch"].as_str().unwrap())
        .unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&patch).unwrap(),
        json!([{"op": "replace", "path": "/spec/color", "value": "red"}])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resource_conversion_webhook_converts_both_ways() {
    let backend = TestBackend::start();
    let converter = TestBackend::start();
    let conversion = webhook_conversion(&converter, "/convert");
    // The legacy webhook only knows v1's `spec.count`; its matchCondition sees the converted
    // object.
    let config = widgets_config(
        &backend,
        &conversion,
        json!([{"op": "replace", "path": "/spec/count", "value": 5}]),
        "matchConditions: [{name: converted, expression: \"object.spec.count == 3\"}]",
    );
    let proxy = TestProxy::start(&config);
    let review = widget_review();
    let reply = proxy.review("widgets.legacy.example.com", &review).await;
    assert!(reply.allowed(), "{}", reply.json);
    assert_eq!(backend.recorder.calls(), 1, "the matchCondition matched");
    let sent = &received(&backend)["request"]["object"];
    assert_eq!(sent["apiVersion"], "example.com/v1");
    assert_eq!(sent["spec"], json!({"count": 3, "color": "blue"}));
    // Two ConversionReviews: v2 -> v1 for the call, v1 -> v2 for the patch.
    assert_eq!(converter.recorder.calls(), 2);
    let (path, last) = converter.recorder.last().unwrap();
    assert_eq!(path, "/convert");
    let last: Value = serde_json::from_slice(&last).unwrap();
    assert_eq!(last["apiVersion"], "apiextensions.k8s.io/v1");
    assert_eq!(last["request"]["desiredAPIVersion"], "example.com/v2");
    assert_eq!(last["request"]["objects"][0]["spec"]["count"], 5);
    let after = patched(&review, &reply);
    let original: Value = serde_json::from_slice(&review).unwrap();
    let mut expected = original["request"]["object"].clone();
    expected["spec"]["replicas"] = json!(5);
    assert_eq!(after, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversion_webhook_failures_are_internal_errors_whatever_failure_policy_says() {
    let backend = TestBackend::start();
    let converter = TestBackend::start();
    let failure = json!({"apiVersion": "$API", "kind": "ConversionReview",
        "response": {"uid": "$UID", "result": {"status": "Failure", "message": "v1 widgets are retired"}}});
    let raw = format!(
        "/raw/200/{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(failure.to_string())
    );
    let cases = [
        (
            raw.as_str(),
            "/webhooks/widgets.legacy.example.com?timeout=10s",
            "conversion webhook for example.com/v2, Kind=Widget failed: v1 widgets are retired"
                .to_string(),
        ),
        (
            "/slow/3000",
            // kube-apiserver's deadline (1 s, less the 250 ms margin) bounds the conversion.
            "/webhooks/widgets.legacy.example.com?timeout=1s",
            format!(
                "conversion webhook for example.com/v2, Kind=Widget failed: Post \"{}/slow/3000\": context deadline exceeded",
                converter.url
            ),
        ),
    ];
    for (path, call, expected) in cases {
        let conversion = webhook_conversion(&converter, path);
        let config = widgets_config(&backend, &conversion, json!([]), "failurePolicy: Ignore");
        let proxy = TestProxy::start(&config);
        let reply = proxy.post(call, &widget_review()).await;
        assert_eq!(reply.status, 200);
        assert!(!reply.allowed(), "{}", reply.json);
        assert_eq!(reply.outcome(), ("rejected", Some(500)));
        assert_eq!(reply.json["response"]["status"]["reason"], "InternalError");
        assert_eq!(
            reply.message(),
            format!("Internal error occurred: {expected}")
        );
    }
    assert_eq!(
        backend.recorder.calls(),
        0,
        "the legacy webhook never sees v2"
    );
}

/// Whether one of `rules` matches `review` exactly, as kube-apiserver's exact pass does
/// (`rules.go`), against the request's own group/version/resource.
fn exact_match(rules: &[RuleWithOperations], review: &ParsedReview<'_>) -> bool {
    let request = &review.request;
    let input = RuleInput {
        operation: review.operation,
        resource: request.effective_resource(),
        sub_resource: request.effective_sub_resource(),
        namespace: &request.namespace,
    };
    rules.iter().any(|r| Rule::new(r).matches(&input))
}

/// What kube-apiserver does with `admission-proxy registration`'s output for `config` on a
/// cluster that no longer serves the legacy version: its Equivalent pass knows only served
/// versions (`EquivalentResourceRegistry`), so a registration reaches the proxy only by
/// matching the caller's version exactly. Asserts that the legacy rules alone do not, that
/// exactly one registered webhook does, and POSTs `review` to that webhook's path.
async fn through_registration(config: &str, proxy: &TestProxy, review: &[u8]) -> common::Reply {
    let snapshot = config::load_contents(&[("test.yaml".into(), config.to_string())]).unwrap();
    let parsed = ParsedReview::parse(review).unwrap();
    for w in snapshot.webhooks() {
        assert!(
            !exact_match(&w.spec.rules, &parsed),
            "the legacy rules of {} match exactly: this test needs a removed version",
            w.name
        );
    }
    let options = registration::Options {
        namespace: "webhooks".into(),
        endpoint: registration::Endpoint::Service {
            name: "admission-proxy".into(),
            port: 443,
        },
        ca_bundle: None,
        inject_ca_from: None,
        name_suffix: "-admission-proxy".into(),
        served: None,
        static_manifests: None,
    };
    let mut paths = Vec::new();
    for object in registration::objects(&snapshot, &options).unwrap() {
        for w in object["webhooks"].as_array().unwrap() {
            let rules: Vec<RuleWithOperations> =
                serde_json::from_value(w["rules"].clone()).unwrap();
            if exact_match(&rules, &parsed) {
                paths.push(
                    w["clientConfig"]["service"]["path"]
                        .as_str()
                        .unwrap()
                        .to_string(),
                );
            }
        }
    }
    assert_eq!(paths.len(), 1, "one registered webhook matches: {paths:?}");
    proxy
        .post(&format!("{}?timeout=10s", paths[0]), review)
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_route_brings_an_apps_v1_deployment_to_the_extensions_v1beta1_webhook() {
    let backend = TestBackend::start();
    let config = legacy_mutating(
        &backend,
        "deploy.legacy.example.com",
        "extensions",
        "v1beta1",
        "deployments",
        json!([{"op": "add", "path": "/metadata/annotations/legacy", "value": "seen"}]),
        "",
    );
    let proxy = TestProxy::start(&config);
    let review = fixture("0064-create-apps-v1-deployments-v1.json");
    let reply = through_registration(&config, &proxy, &review).await;
    assert!(reply.allowed(), "{}", reply.json);
    assert_eq!(backend.recorder.calls(), 1, "called exactly once");
    let request = &received(&backend)["request"];
    assert_eq!(request["kind"]["group"], "extensions");
    assert_eq!(request["object"]["apiVersion"], "extensions/v1beta1");
    assert_eq!(request["requestKind"]["group"], "apps");
    let after = patched(&review, &reply);
    assert_eq!(after["apiVersion"], "apps/v1");
    assert_eq!(after["metadata"]["annotations"]["legacy"], "seen");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_route_brings_a_networking_v1_ingress_to_the_extensions_v1beta1_webhook() {
    let backend = TestBackend::start();
    let config = legacy_mutating(
        &backend,
        "ingress.legacy.example.com",
        "extensions",
        "v1beta1",
        "ingresses",
        json!([]),
        "",
    );
    let proxy = TestProxy::start(&config);
    let review = fixture("0103-create-networking.k8s.io-v1-ingresses-v1.json");
    let reply = through_registration(&config, &proxy, &review).await;
    assert!(reply.allowed(), "{}", reply.json);
    assert_eq!(backend.recorder.calls(), 1);
    let request = &received(&backend)["request"];
    assert_eq!(request["object"]["apiVersion"], "extensions/v1beta1");
    assert_eq!(
        request["resource"],
        json!({"group": "extensions", "version": "v1beta1", "resource": "ingresses"})
    );
    assert!(
        reply.json["response"].get("patch").is_none(),
        "nothing to carry back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_route_brings_a_custom_resource_to_the_webhook_of_its_other_version() {
    let backend = TestBackend::start();
    let config = widgets_config(
        &backend,
        "{strategy: None}",
        json!([{"op": "replace", "path": "/spec/color", "value": "red"}]),
        "",
    );
    let proxy = TestProxy::start(&config);
    let review = widget_review();
    let reply = through_registration(&config, &proxy, &review).await;
    assert!(reply.allowed(), "{}", reply.json);
    assert_eq!(backend.recorder.calls(), 1);
    assert_eq!(
        received(&backend)["request"]["object"]["apiVersion"],
        "example.com/v1"
    );
    assert_eq!(patched(&review, &reply)["spec"]["color"], "red");
}

/// An AdmissionReview of `tests/fixtures/equivalent-events/` (kube-apiserver 1.32.0's own).
fn events_fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/equivalent-events/{name}", common::FIXTURES)).unwrap()
}

/// core/v1 and events.k8s.io Events are one resource (one storage in kube-apiserver, so one
/// entry of its `EquivalentResourceRegistry`): a webhook registered for either version, with
/// matchPolicy Equivalent, gets the other's requests converted exactly as kube-apiserver 1.32.0
/// converted them (`message` is `note`, `involvedObject` is `regarding`, ...), and its patch
/// comes back in the caller's version. Before, the proxy said "no rule matches".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn core_and_events_k8s_io_events_are_one_resource() {
    let without_uid = |mut review: Value| {
        review["request"]["uid"] = Value::Null;
        review
    };
    for (registered, sent, expected, patch, field) in [
        (
            ("events.k8s.io", "v1"),
            "core-v1-event.json",
            "core-v1-event-as-events.k8s.io-v1.json",
            json!([{"op": "add", "path": "/note", "value": "seen by the legacy webhook"}]),
            "message",
        ),
        (
            ("", "v1"),
            "events.k8s.io-v1-event.json",
            "events.k8s.io-v1-event-as-core-v1.json",
            json!([{"op": "add", "path": "/message", "value": "seen by the legacy webhook"}]),
            "note",
        ),
    ] {
        let backend = TestBackend::start();
        let proxy = TestProxy::start(&legacy_mutating(
            &backend,
            "events.legacy.example.com",
            registered.0,
            registered.1,
            "events",
            patch,
            "",
        ));
        let review = events_fixture(sent);
        let reply = proxy.review("events.legacy.example.com", &review).await;
        assert!(reply.allowed(), "{sent}: {}", reply.json);
        assert_eq!(backend.recorder.calls(), 1, "{sent}");
        let expected: Value = serde_json::from_slice(&events_fixture(expected)).unwrap();
        assert_eq!(
            without_uid(received(&backend)),
            without_uid(expected),
            "{sent}"
        );
        let after = patched(&review, &reply);
        assert_eq!(after[field], "seen by the legacy webhook", "{sent}");
    }
}
