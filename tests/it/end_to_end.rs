//! End to end: real proxy, real legacy backends, real TLS on 127.0.0.1, real AdmissionReviews.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::*;

const HOOK: &str = "policy.example.com.test";

fn pod(labels: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": labels}})
}

/// Every captured review, replayed to a catch-all v1 webhook and a catch-all v1beta1-only
/// mutating webhook: the uid and version are echoed, the backend receives the body byte for
/// byte (same version) or with only `apiVersion` changed (converted), with `?timeout=Ns`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replays_every_real_fixture() {
    let backend = TestBackend::start();
    let config = format!(
        "{}---\n{}",
        validating(
            "v1.catch.all",
            &backend.client_config("/only/v1/allow"),
            ALL,
            "timeoutSeconds: 5"
        ),
        webhook_config(
            "admissionregistration.k8s.io/v1beta1",
            "MutatingWebhookConfiguration",
            "v1beta1.catch.all",
            &backend.client_config("/only/v1beta1/allow"),
            ALL,
            "sideEffects: None"
        )
    );
    let proxy = TestProxy::start(&config);
    let entries = index();
    assert!(entries.len() > 400);
    for entry in &entries {
        let file = entry["file"].as_str().unwrap();
        let body = fixture(file);
        let caller = entry["reviewVersion"].as_str().unwrap();
        let uid =
            serde_json::from_slice::<serde_json::Value>(&body).unwrap()["request"]["uid"].clone();
        for (hook, backend_version) in [("v1.catch.all", "v1"), ("v1beta1.catch.all", "v1beta1")] {
            let calls = backend.recorder.calls();
            let reply = proxy.review(hook, &body).await;
            assert_eq!(
                reply.status,
                200,
                "{file} → {hook}: {}",
                String::from_utf8_lossy(&reply.body)
            );
            assert_eq!(
                reply.json["apiVersion"],
                format!("admission.k8s.io/{caller}"),
                "{file}"
            );
            assert_eq!(reply.json["kind"], "AdmissionReview");
            assert_eq!(reply.json["response"]["uid"], uid, "{file}");
            assert!(reply.allowed(), "{file} → {hook}");
            assert_eq!(reply.decision, "allowed", "{file} → {hook}");
            assert_eq!(backend.recorder.calls(), calls + 1);
            let (path, sent) = backend.recorder.last().unwrap();
            assert!(
                path.ends_with("?timeout=5s") || path.ends_with("?timeout=10s"),
                "{path}"
            );
            let expected = if caller == backend_version {
                body.clone()
            } else {
                String::from_utf8(body.clone())
                    .unwrap()
                    .replacen(
                        &format!("\"apiVersion\":\"admission.k8s.io/{caller}\""),
                        &format!("\"apiVersion\":\"admission.k8s.io/{backend_version}\""),
                        1,
                    )
                    .into_bytes()
            };
            assert!(
                sent == expected,
                "{file} → {hook}: the backend must get the envelope unchanged but for apiVersion"
            );
        }
    }
}

/// A request no rule matches is answered `allowed` without calling the backend, byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skipped_requests_never_reach_the_backend() {
    let backend = TestBackend::start();
    let rules =
        r#"[{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]"#;
    let proxy = TestProxy::start(&validating(
        HOOK,
        &backend.client_config("/deny"),
        rules,
        "",
    ));
    let body = fixture("0039-create-core-v1-serviceaccounts-v1.json");
    let reply = proxy.review(HOOK, &body).await;
    assert_eq!(reply.decision, "skipped");
    assert_eq!(
        String::from_utf8(reply.body).unwrap(),
        r#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","response":{"uid":"ac3b3c83-1c49-4451-9a7b-203c77bb7563","allowed":true}}"#
    );
    let reply = proxy
        .review(
            HOOK,
            &fixture("0042-create-core-v1-serviceaccounts-v1beta1.json"),
        )
        .await;
    assert_eq!(
        reply.json["apiVersion"], "admission.k8s.io/v1beta1",
        "answered in the caller's version"
    );
    assert_eq!(backend.recorder.calls(), 0);
    let reply = proxy
        .review(HOOK, &fixture("0096-create-core-v1-pods-v1.json"))
        .await;
    assert_eq!(
        (reply.decision.as_str(), backend.recorder.calls()),
        ("denied", 1)
    );
}

/// Denials pass through with their status, warnings and audit annotations (kube-apiserver's
/// `ToStatusErr` keeps a denial's status; the dispatchers keep both of the others).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denials_pass_through() {
    let backend = TestBackend::start();
    let config = format!(
        "{}---\n{}",
        validating("deny.code.test", &backend.client_config("/deny"), ALL, ""),
        validating(
            "deny.nocode.test",
            &backend.client_config("/deny-nocode"),
            ALL,
            ""
        )
    );
    let proxy = TestProxy::start(&config);
    let body = fixture("0096-create-core-v1-pods-v1.json");
    let reply = proxy.review("deny.code.test", &body).await;
    assert_eq!(reply.decision, "denied");
    let r = &reply.json["response"];
    assert_eq!(r["allowed"], false);
    assert_eq!(
        r["status"],
        json!({"status": "Failure", "message": "denied by the example backend", "reason": "Forbidden", "code": 403})
    );
    assert_eq!(r["warnings"], json!(["example-backend: denied"]));
    assert_eq!(r["auditAnnotations"], json!({"decision": "denied"}));
    let reply = proxy.review("deny.nocode.test", &body).await;
    assert!(
        reply.json["response"]["status"].get("code").is_none(),
        "kube-apiserver floors the missing code to 400 itself"
    );
    assert_eq!(reply.message(), "denied without a code");
}

/// A mutating v1beta1-only backend's patch comes back to a v1 caller with patchType JSONPatch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1beta1_backend_patch_reaches_v1_caller() {
    let backend = TestBackend::start();
    let config = webhook_config(
        "admissionregistration.k8s.io/v1beta1",
        "MutatingWebhookConfiguration",
        "labeler.legacy.test",
        &backend.client_config("/only/v1beta1/patch"),
        ALL,
        "sideEffects: None",
    );
    let proxy = TestProxy::start(&config);
    let reply = proxy
        .review(
            "labeler.legacy.test",
            &fixture("0037-create-core-v1-serviceaccounts-v1.json"),
        )
        .await;
    assert_eq!(reply.decision, "allowed");
    let r = &reply.json["response"];
    assert_eq!(r["patchType"], "JSONPatch");
    use base64::Engine;
    let patch = base64::engine::general_purpose::STANDARD
        .decode(r["patch"].as_str().unwrap())
        .unwrap();
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&patch).unwrap()[0]["path"],
        "/metadata/labels"
    );
}

/// Call failures follow failurePolicy: Ignore admits with a warning, Fail answers 500 with a
/// Status and no Retry-After (which client-go's `checkWait` would re-send on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_failures_follow_failure_policy() {
    let backend = TestBackend::start();
    let refusing = refusing_port();
    let dead = refusing.addr;
    let other_pki = crate::tools::pki::TestPki::generate(&["127.0.0.1"]).unwrap();
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "garbage",
            backend.client_config("/garbage"),
            "failed to call webhook: couldn't get version/kind",
        ),
        (
            "wrong-uid",
            backend.client_config("/wrong-uid"),
            r#"received invalid webhook response: expected response.uid="#,
        ),
        (
            "status-503",
            backend.client_config("/status/503"),
            "failed to call webhook: example backend answered 503",
        ),
        (
            "empty",
            backend.client_config("/empty"),
            "0-length response with status code: 200",
        ),
        (
            "refused",
            format!(
                "{{url: \"https://{dead}/x\", caBundle: \"{}\"}}",
                backend.pki.ca_bundle()
            ),
            "connect: connection refused",
        ),
        (
            "untrusted",
            format!(
                "{{url: \"{}/allow\", caBundle: \"{}\"}}",
                backend.url,
                other_pki.ca_bundle()
            ),
            "tls",
        ),
        (
            "version",
            backend.client_config("/only/v1beta1/allow"),
            "only understands admission.k8s.io/v1beta1",
        ),
    ];
    let mut config = String::new();
    for (name, cc, _) in &cases {
        for policy in ["Ignore", "Fail"] {
            config.push_str(&validating(
                &format!("{name}.{}.test", policy.to_lowercase()),
                cc,
                ALL,
                &format!("failurePolicy: {policy}"),
            ));
            config.push_str("---\n");
        }
    }
    let proxy = TestProxy::start(&config);
    let body = fixture("0096-create-core-v1-pods-v1.json");
    for (name, _, text) in &cases {
        let open = proxy.review(&format!("{name}.ignore.test"), &body).await;
        assert_eq!(
            (open.status, open.decision.as_str()),
            (200, "failed-open"),
            "{name}"
        );
        assert!(open.allowed());
        let warning = open.json["response"]["warnings"][0].as_str().unwrap();
        assert!(
            warning.contains(&format!("\"{name}.ignore.test\"")) && warning.contains(text),
            "{name}: {warning}"
        );
        assert_eq!(
            open.json["response"]["auditAnnotations"]["failed-open"],
            format!("{name}.ignore.test")
        );
        let closed = proxy.review(&format!("{name}.fail.test"), &body).await;
        assert_eq!(
            (closed.status, closed.decision.as_str()),
            (500, "failed-closed"),
            "{name}"
        );
        assert_eq!(closed.json["kind"], "Status");
        assert_eq!(closed.json["code"], 500);
        assert!(
            !closed.message().starts_with("failed to call webhook"),
            "kube-apiserver adds that prefix itself"
        );
        assert!(!closed.headers.contains_key("retry-after"));
    }
}

/// A backend slower than the deadline: the proxy answers within min(timeoutSeconds, caller's
/// ?timeout= minus the margin), and tells the backend the rounded-up budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_backend_times_out_before_the_caller_does() {
    let backend = TestBackend::start();
    let config = format!(
        "{}---\n{}",
        validating(
            "slow.fail.test",
            &backend.client_config("/slow/5000"),
            ALL,
            "failurePolicy: Fail\n  timeoutSeconds: 1"
        ),
        validating(
            "slow.caller.test",
            &backend.client_config("/slow/5000"),
            ALL,
            "failurePolicy: Ignore\n  timeoutSeconds: 30"
        )
    );
    let proxy = TestProxy::start(&config);
    let body = fixture("0096-create-core-v1-pods-v1.json");
    let t0 = Instant::now();
    let reply = proxy.review("slow.fail.test", &body).await;
    assert_eq!(reply.decision, "failed-closed");
    assert!(
        reply.message().ends_with("context deadline exceeded"),
        "{}",
        reply.message()
    );
    assert!(
        t0.elapsed() < Duration::from_millis(2500),
        "{:?}",
        t0.elapsed()
    );
    let t0 = Instant::now();
    let reply = proxy
        .post("/webhooks/slow.caller.test?timeout=2s", &body)
        .await;
    let took = t0.elapsed();
    assert_eq!(reply.decision, "failed-open");
    assert!(
        took >= Duration::from_millis(1700) && took < Duration::from_millis(2000),
        "answered before kube-apiserver's 2 s: {took:?}"
    );
    assert!(
        backend.recorder.last().unwrap().0.ends_with("?timeout=2s"),
        "1.75 s rounds up to 2 s"
    );
}

/// Dry run: sideEffects Unknown/Some rejects with 400 without calling, whatever failurePolicy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_and_side_effects() {
    let backend = TestBackend::start();
    let legacy = webhook_config(
        "admissionregistration.k8s.io/v1beta1",
        "ValidatingWebhookConfiguration",
        "legacy.dry.test",
        &backend.client_config("/allow"),
        ALL,
        "failurePolicy: Ignore",
    );
    let config = format!(
        "{legacy}---\n{}",
        validating("none.dry.test", &backend.client_config("/allow"), ALL, "")
    );
    let proxy = TestProxy::start(&config);
    let body = fixture("0724-delete-core-v1-namespaces-v1.json");
    let reply = proxy.review("legacy.dry.test", &body).await;
    assert_eq!(reply.outcome(), ("rejected-dry-run", Some(400)));
    // What the user reads once kube-apiserver prefixes the denial (`ToStatusErr`): the
    // sentence once, not `… denied the request: admission webhook "legacy.dry.test" does not
    // support dry run`.
    assert_eq!(
        format!(
            "admission webhook {:?} denied the request: {}",
            "legacy.dry.test",
            reply.message()
        ),
        r#"admission webhook "legacy.dry.test" denied the request: does not support dry run (sideEffects Unknown)"#
    );
    assert_eq!(backend.recorder.calls(), 0);
    assert_eq!(proxy.decision("none.dry.test", &body).await, "allowed");
}

/// namespaceSelector with the namespaces file, the automatic name label, a Namespace's own
/// labels on CREATE, and 404 for an unknown namespace (`MatchNamespaceSelector`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_selector() {
    let backend = TestBackend::start();
    let selector = |name: &str, ns: &str| {
        validating(
            name,
            &backend.client_config("/allow"),
            ALL,
            &format!("namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: {ns}}}}}"),
        )
    };
    let proxy = TestProxy::start(&format!(
        "{}---\n{}",
        selector("prod.ns.test", "production"),
        selector("batch.ns.test", "batch")
    ));
    let pod_in_production = fixture("0096-create-core-v1-pods-v1.json");
    assert_eq!(
        proxy.decision("prod.ns.test", &pod_in_production).await,
        "allowed"
    );
    assert_eq!(
        proxy.decision("batch.ns.test", &pod_in_production).await,
        "skipped"
    );
    let unknown = review_json(
        "v1",
        "CREATE",
        "pods",
        "no-such-namespace",
        pod(json!({})),
        json!(null),
        false,
    );
    let reply = proxy.review("prod.ns.test", &unknown).await;
    assert_eq!(reply.outcome(), ("rejected", Some(404)));
    assert_eq!(
        reply.message(),
        r#"namespaces "no-such-namespace" not found"#
    );
    // Cluster-scoped objects are never excluded (0098: a PersistentVolume).
    assert_eq!(
        proxy
            .decision(
                "batch.ns.test",
                &fixture("0098-create-core-v1-persistentvolumes-v1.json")
            )
            .await,
        "allowed"
    );
}

/// objectSelector: either object or oldObject; null and metadata-less objects never match;
/// NotIn matches an unlabeled object (`MatchObjectSelector`, `Requirement.Matches`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_selector() {
    let backend = TestBackend::start();
    let proxy = TestProxy::start(&format!(
        "{}---\n{}",
        validating(
            "in.obj.test",
            &backend.client_config("/allow"),
            ALL,
            "objectSelector: {matchLabels: {app: web}}"
        ),
        validating(
            "notin.obj.test",
            &backend.client_config("/allow"),
            ALL,
            "objectSelector: {matchExpressions: [{key: app, operator: NotIn, values: [web]}]}"
        )
    ));
    let update = |new, old| review_json("v1", "UPDATE", "pods", "production", new, old, false);
    assert_eq!(
        proxy
            .review(
                "in.obj.test",
                &update(pod(json!({"app": "web"})), pod(json!({})))
            )
            .await
            .decision,
        "allowed"
    );
    assert_eq!(
        proxy
            .review(
                "in.obj.test",
                &update(pod(json!({})), pod(json!({"app": "web"})))
            )
            .await
            .decision,
        "allowed"
    );
    assert_eq!(
        proxy
            .review("in.obj.test", &update(pod(json!({})), pod(json!({}))))
            .await
            .decision,
        "skipped"
    );
    let unlabeled = json!({"metadata": {"name": "p"}});
    assert_eq!(
        proxy
            .decision(
                "notin.obj.test",
                &review_json(
                    "v1",
                    "CREATE",
                    "pods",
                    "production",
                    unlabeled,
                    json!(null),
                    false
                )
            )
            .await,
        "allowed"
    );
    let no_metadata = json!({"kind": "PodExecOptions", "command": ["sh"]});
    assert_eq!(
        proxy
            .decision(
                "notin.obj.test",
                &review_json(
                    "v1",
                    "CONNECT",
                    "pods",
                    "production",
                    no_metadata,
                    json!(null),
                    false
                )
            )
            .await,
        "skipped"
    );
}

/// matchConditions: false skips; errors reject (403) under Fail and skip under Ignore.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn match_conditions() {
    let backend = TestBackend::start();
    let cond = |name: &str, policy: &str, expr: &str| {
        validating(
            name,
            &backend.client_config("/allow"),
            ALL,
            &format!(
                "failurePolicy: {policy}\n  matchConditions: [{{name: c, expression: \"{expr}\"}}]"
            ),
        )
    };
    let proxy = TestProxy::start(
        &[
            cond(
                "label.mc.test",
                "Fail",
                "has(object.metadata.labels) && object.metadata.labels.app == 'web'",
            ),
            cond("error.fail.test", "Fail", "object.spec.nothing.here == 1"),
            cond(
                "error.ignore.test",
                "Ignore",
                "object.spec.nothing.here == 1",
            ),
        ]
        .join("---\n"),
    );
    let web = review_json(
        "v1",
        "CREATE",
        "pods",
        "production",
        pod(json!({"app": "web"})),
        json!(null),
        false,
    );
    let other = review_json(
        "v1",
        "CREATE",
        "pods",
        "production",
        pod(json!({"app": "db"})),
        json!(null),
        false,
    );
    assert_eq!(proxy.decision("label.mc.test", &web).await, "allowed");
    assert_eq!(proxy.decision("label.mc.test", &other).await, "skipped");
    let reply = proxy.review("error.fail.test", &web).await;
    assert_eq!(reply.outcome(), ("rejected", Some(403)));
    assert!(
        reply.message().starts_with(
            r#"pods "p" is forbidden: expression 'object.spec.nothing.here == 1' resulted in error"#
        ),
        "{}",
        reply.message()
    );
    assert_eq!(proxy.decision("error.ignore.test", &web).await, "skipped");
    assert_eq!(backend.recorder.calls(), 1);
}

/// Bad input: 400 for what is not an AdmissionReview, 404 for unknown webhooks and routes,
/// 413 over the body limit; the server keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_clear_errors() {
    let backend = TestBackend::start();
    let proxy = TestProxy::start_with(
        &validating(HOOK, &backend.client_config("/allow"), ALL, ""),
        None,
        64 * 1024,
    );
    for (body, expected) in [
        (&b"{not json"[..], "malformed AdmissionReview"),
        (br#"{"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{"uid":"u"}}"#, "wrong kind"),
        (br#"{"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview"}"#, "unsupported AdmissionReview apiVersion"),
        (br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"operation":"CREATE"}}"#, "no uid"),
    ] {
        let reply = proxy.review(HOOK, body).await;
        assert_eq!(reply.status, 400, "{}", String::from_utf8_lossy(body));
        assert!(reply.message().contains(expected), "{}", reply.message());
    }
    let pod = fixture("0096-create-core-v1-pods-v1.json");
    let reply = proxy.review("no.such.webhook", &pod).await;
    assert_eq!(reply.status, 404);
    assert!(reply.message().contains("no webhook \"no.such.webhook\""));
    assert_eq!(proxy.post("/other", &pod).await.status, 404);
    let big = vec![b' '; 65 * 1024];
    assert_eq!(proxy.review(HOOK, &big).await.status, 413);
    assert_eq!(proxy.decision(HOOK, &pod).await, "allowed", "still serving");
    assert_eq!(backend.recorder.calls(), 1);
}

/// YAML answers are accepted (the webhook client ignores the response Content-Type:
/// `NewClientManager` gives it one serializer for every media type).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yaml_answers_are_accepted() {
    let backend = TestBackend::start();
    let proxy = TestProxy::start(&validating(HOOK, &backend.client_config("/yaml"), ALL, ""));
    assert_eq!(
        proxy
            .decision(HOOK, &fixture("0096-create-core-v1-pods-v1.json"))
            .await,
        "allowed"
    );
}

/// Plain `http://` backends are accepted on loopback (documented extension).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_loopback_backend() {
    let (handle, recorder) =
        crate::tools::example_backend::start("127.0.0.1:0".parse().unwrap(), None).unwrap();
    let cc = format!("{{url: \"http://{}/deny\"}}", handle.local_addr);
    let proxy = TestProxy::start(&validating(HOOK, &cc, ALL, ""));
    let reply = proxy
        .review(HOOK, &fixture("0096-create-core-v1-pods-v1.json"))
        .await;
    assert_eq!((reply.decision.as_str(), recorder.calls()), ("denied", 1));
}

/// Rules are matched against requestResource, not resource: the proxy's own registration may
/// have been matched through an equivalent resource (`CreateV1AdmissionReview`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_match_the_original_request_resource() {
    let backend = TestBackend::start();
    let rules = r#"[{operations: [CREATE], apiGroups: [apps], apiVersions: [v1], resources: [deployments]}]"#;
    let proxy = TestProxy::start(&validating(
        HOOK,
        &backend.client_config("/allow"),
        rules,
        "matchPolicy: Exact",
    ));
    let mut review: serde_json::Value =
        serde_json::from_slice(&fixture("0066-create-apps-v1-deployments-v1.json")).unwrap();
    review["request"]["resource"] =
        json!({"group": "extensions", "version": "v1beta1", "resource": "deployments"});
    review["request"]["kind"] =
        json!({"group": "extensions", "version": "v1beta1", "kind": "Deployment"});
    assert_eq!(
        proxy
            .decision(HOOK, &serde_json::to_vec(&review).unwrap())
            .await,
        "allowed"
    );
    review["request"]["requestResource"] =
        json!({"group": "extensions", "version": "v1beta1", "resource": "deployments"});
    assert_eq!(
        proxy
            .decision(HOOK, &serde_json::to_vec(&review).unwrap())
            .await,
        "skipped"
    );
}
