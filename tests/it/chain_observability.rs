//! Chain routes through the real binary: what an operator sees of them. Each webhook of a chain
//! is counted in the webhook families as on its single route, the chain in its own families;
//! one `chain admission` log line lists every webhook's decision; a proxy-wide exclusion answers
//! a chain route before any webhook; Warn and Shadow webhooks behave in a chain as on their
//! single routes; `explain` shows each chain route's webhooks in order.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{metric_value, pod_create, BinaryProxy, TestBackend, Workspace};

/// A validating configuration `guards`: a webhook that never matches a Pod, one that allows,
/// one in mode Warn and one in mode Shadow (both would deny), and one that denies; and a
/// mutating configuration `labels` whose webhook adds a label.
fn config(backend: &TestBackend) -> String {
    let hook = |name: &str, path: &str, rules: &str| {
        format!(
            "- name: {name}\n  clientConfig: {}\n  rules: {rules}\n  sideEffects: None\n  admissionReviewVersions: [v1]\n",
            backend.client_config(path)
        )
    };
    let pods =
        r#"[{operations: ["CREATE"], apiGroups: [""], apiVersions: ["v1"], resources: ["pods"]}]"#;
    let deployments = r#"[{operations: ["CREATE"], apiGroups: ["apps"], apiVersions: ["v1"], resources: ["deployments"]}]"#;
    let options =
        r#"{"warn.guards.test": {"mode": "Warn"}, "shadow.guards.test": {"mode": "Shadow"}}"#;
    format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\n\
         metadata: {{name: guards, annotations: {{admission-proxy.io/webhook-options: '{options}'}}}}\nwebhooks:\n{}{}{}{}{}---\n\
         apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\n\
         metadata: {{name: labels}}\nwebhooks:\n{}",
        hook("skip.guards.test", "/upstream/allow/skip", deployments),
        hook("allow.guards.test", "/upstream/allow/allow", pods),
        hook("warn.guards.test", "/upstream/disallowReason/warn", pods),
        hook("shadow.guards.test", "/upstream/disallowReason/shadow", pods),
        hook("deny.guards.test", "/upstream/disallowReason/deny", pods),
        hook("patch.labels.test", "/patch", pods),
    )
}

fn pod(namespace: &str) -> Vec<u8> {
    pod_create(namespace, serde_json::json!({"app": "web"}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_is_counted_logged_and_exempted_as_its_webhooks_are() {
    let backend = TestBackend::start();
    let ws = Workspace::new("chain-observability");
    std::fs::write(ws.conf.join("webhooks.yaml"), config(&backend)).unwrap();
    let proxy = BinaryProxy::start(
        &ws.conf,
        &ws.cert,
        &ws.key,
        &[
            "--log-level",
            "admission_proxy=debug",
            "--exempt-namespace",
            "kube-system",
        ],
    );
    let calls = |tag: &str| {
        let path = format!("/upstream/{tag}");
        backend.recorder.calls_to(&path)
    };

    let reply = proxy
        .post(
            &ws.pki,
            "/configurations/validating/guards?timeout=10s",
            &pod("app"),
        )
        .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.outcome(), ("denied", Some(403)), "{}", reply.json);
    assert_eq!(
        reply.message(),
        "admission webhook \"deny.guards.test\" denied the request: you shall not pass"
    );
    assert_eq!(
        reply.json["response"]["warnings"],
        serde_json::json!([
            "admission webhook \"warn.guards.test\" would deny the request: you shall not pass"
        ]),
        "Warn's denial is a warning, as on its single route"
    );
    assert_eq!(
        reply.json["response"]["auditAnnotations"]["warn.guards.test_would-deny"],
        "you shall not pass"
    );
    // The Shadow webhook is called in the background, after the answer.
    let deadline = Instant::now() + Duration::from_secs(10);
    while calls("disallowReason/shadow") == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let counts = [
        "allow/skip",
        "allow/allow",
        "disallowReason/warn",
        "disallowReason/shadow",
        "disallowReason/deny",
    ]
    .map(calls);
    assert_eq!(counts, [0, 1, 1, 1, 1], "calls per webhook");

    assert!(
        proxy.logged("chain admission"),
        "one line per chain admission"
    );
    let line = proxy
        .logs
        .lock()
        .unwrap()
        .iter()
        .find(|l| l.contains("chain admission"))
        .cloned()
        .unwrap_or_default();
    for part in [
        "\"chain\":\"guards\"",
        "skip.guards.test=skipped",
        "allow.guards.test=allowed(",
        "warn.guards.test=would-deny(",
        "shadow.guards.test=shadowed",
        "deny.guards.test=denied(",
        "\"decision\":\"denied\"",
    ] {
        assert!(line.contains(part), "{part} in {line}");
    }

    let mutated = proxy
        .post(
            &ws.pki,
            "/configurations/mutating/labels?timeout=10s",
            &pod("app"),
        )
        .await;
    assert_eq!(mutated.decision, "allowed", "{}", mutated.json);
    assert!(
        mutated.json["response"]["patch"].is_string(),
        "{}",
        mutated.json
    );
    // The call carried a uid of its own (kube-apiserver makes one per webhook call); the
    // answer carries kube-apiserver's.
    assert_own_call_uid(&backend, "11111111-2222-3333-4444-555555555555");
    assert_eq!(
        mutated.json["response"]["uid"],
        "11111111-2222-3333-4444-555555555555"
    );

    // A proxy-wide exclusion answers the chain route before any webhook.
    let before = backend.recorder.calls();
    let exempt = proxy
        .post(
            &ws.pki,
            "/configurations/validating/guards?timeout=10s",
            &pod("kube-system"),
        )
        .await;
    assert_eq!(exempt.decision, "exempt", "{}", exempt.json);
    assert!(exempt.allowed());
    assert_eq!(
        backend.recorder.calls(),
        before,
        "an exempt chain calls nothing"
    );

    let metrics = tokio::task::block_in_place(|| proxy.scrape(&ws.pki));
    let chain = |name: &str, decision: &str| {
        metric_value(
            &metrics,
            "admission_proxy_chain_admissions_total",
            &[("chain", name), ("decision", decision)],
        )
    };
    assert_eq!(chain("guards", "denied"), Some(1.0), "{metrics}");
    assert_eq!(chain("guards", "exempt"), Some(1.0));
    assert_eq!(chain("labels", "allowed"), Some(1.0));
    assert_eq!(
        metric_value(
            &metrics,
            "admission_proxy_chain_duration_seconds_count",
            &[("chain", "guards")]
        ),
        Some(2.0)
    );
    let webhook = |name: &str, decision: &str| {
        metric_value(
            &metrics,
            "admission_proxy_webhook_admissions_total",
            &[("name", name), ("decision", decision)],
        )
    };
    assert_eq!(webhook("skip.guards.test", "skipped"), Some(1.0));
    assert_eq!(webhook("allow.guards.test", "allowed"), Some(1.0));
    assert_eq!(webhook("warn.guards.test", "would-deny"), Some(1.0));
    assert_eq!(webhook("deny.guards.test", "denied"), Some(1.0));
    assert_eq!(webhook("patch.labels.test", "allowed"), Some(1.0));
}

/// `explain`'s chain view on the bundled configuration: each chain route with its webhooks in
/// the order the chain runs them, each with its own verdict.
#[test]
fn explain_lists_each_chain_in_order() {
    let out = Command::new(env!("CARGO_BIN_EXE_admission-proxy"))
        .args([
            "explain",
            "--config",
            concat!(env!("CARGO_MANIFEST_DIR"), "/config"),
            "--review",
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/admission-reviews/0096-create-core-v1-pods-v1.json"
            ),
            "--namespaces-file",
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/namespaces.yaml"
            ),
            "--output",
            "json",
        ])
        .output()
        .expect("run admission-proxy explain");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let chains = json["chains"].as_array().expect("chains");
    let routes: Vec<&str> = chains.iter().filter_map(|c| c["route"].as_str()).collect();
    assert_eq!(
        routes,
        [
            "/configurations/validating/example-policies",
            "/configurations/validating/legacy-audit",
            "/configurations/mutating/legacy-labeler",
            "/configurations/mutating/legacy-rollout",
        ]
    );
    let policies = &chains[0];
    let names: Vec<&str> = policies["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "require-labels.policy.example.com",
            "quota.policy.example.com"
        ],
        "list order"
    );
    for step in policies["webhooks"].as_array().unwrap() {
        let own = json["webhooks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["name"] == step["name"])
            .expect("the webhook's own explanation");
        assert_eq!(step["verdict"], own["verdict"], "{}", step["name"]);
    }
    assert!(policies["dispatch"]
        .as_str()
        .unwrap()
        .contains("called concurrently"));
}

/// A chained webhook's call under way shows in its `admission_proxy_webhook_in_flight`, as on
/// its single route, and leaves it when answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chained_call_under_way_is_in_flight() {
    let backend = TestBackend::start();
    let ws = Workspace::new("chain-in-flight");
    let config = format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\n\
         metadata: {{name: slow}}\nwebhooks:\n- name: slow.in-flight.test\n  clientConfig: {}\n  \
         rules: [{{operations: [\"*\"], apiGroups: [\"*\"], apiVersions: [\"*\"], resources: [\"*/*\"]}}]\n  \
         sideEffects: None\n  admissionReviewVersions: [v1]\n",
        backend.client_config("/upstream/sleep/1500/allow")
    );
    std::fs::write(ws.conf.join("webhooks.yaml"), config).unwrap();
    let proxy = BinaryProxy::start(&ws.conf, &ws.cert, &ws.key, &[]);
    let in_flight = |proxy: &BinaryProxy| {
        let metrics = proxy.scrape(&ws.pki);
        metric_value(
            &metrics,
            "admission_proxy_webhook_in_flight",
            &[("name", "slow.in-flight.test")],
        )
    };
    let target = proxy.target(&ws.pki);
    let sending = tokio::spawn(async move {
        admission_proxy::dispatch::HttpClient::new()
            .post(
                &target,
                "/configurations/validating/slow?timeout=10s",
                &pod("app"),
                &[],
            )
            .await
    });
    let deadline = Instant::now() + Duration::from_millis(1200);
    let mut seen = None;
    while Instant::now() < deadline {
        seen = tokio::task::block_in_place(|| in_flight(&proxy));
        if seen == Some(1.0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(seen, Some(1.0), "in flight while the call is under way");
    let reply = sending.await.unwrap().expect("answered");
    assert_eq!(
        reply.header(admission_proxy::server::DECISION_HEADER),
        Some("allowed")
    );
    assert_eq!(tokio::task::block_in_place(|| in_flight(&proxy)), Some(0.0));
}

/// A `request.uid` written with a JSON escape (`\u0031` for `1`) is the same uid to
/// kube-apiserver's decoder; each chained call must still carry a uid of its own, so that the
/// webhook's answer (echoing it) verifies. Before, such a uid was left in the call as sent while
/// the answer was checked against the new one: every call failed verification.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_gives_each_call_its_own_uid_when_the_received_uid_has_escapes() {
    let backend = TestBackend::start();
    let ws = Workspace::new("chain-escaped-uid");
    std::fs::write(ws.conf.join("webhooks.yaml"), config(&backend)).unwrap();
    let proxy = BinaryProxy::start(&ws.conf, &ws.cert, &ws.key, &[]);
    let received = "11111111-2222-3333-4444-555555555555";
    let body = String::from_utf8(pod("app")).unwrap();
    assert!(body.contains(&format!("\"uid\":\"{received}\"")), "{body}");
    let escaped = body.replacen(
        &format!("\"uid\":\"{received}\""),
        &format!("\"uid\":\"\\u0031{}\"", &received[1..]),
        1,
    );
    let mutated = proxy
        .post(
            &ws.pki,
            "/configurations/mutating/labels?timeout=10s",
            escaped.as_bytes(),
        )
        .await;
    assert_eq!(mutated.decision, "allowed", "{}", mutated.json);
    assert!(
        mutated.json["response"]["patch"].is_string(),
        "the webhook's patch is kept: {}",
        mutated.json
    );
    assert_eq!(mutated.json["response"]["uid"], received);
    assert_own_call_uid(&backend, received);
}

/// The last call `backend` received carried a uid of its own (a UUID), not `received`:
/// kube-apiserver makes one per webhook call.
fn assert_own_call_uid(backend: &TestBackend, received: &str) {
    let (_, sent) = backend
        .recorder
        .last()
        .expect("the patch webhook was called");
    let sent: serde_json::Value = serde_json::from_slice(&sent).unwrap();
    let call_uid = sent["request"]["uid"].as_str().unwrap_or_default();
    assert_eq!(call_uid.len(), 36, "a UUID: {call_uid}");
    assert_ne!(call_uid, received);
}
