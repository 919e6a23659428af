//! Objects nested past serde_json's recursion limit (128 levels) are read as deep as
//! kube-apiserver reads them (10,000 levels, Go `encoding/json` `maxNestingDepth`): a webhook
//! whose matchConditions read `object` is called on them, on its single route, in a chain and
//! in `explain`, never skipped as if the object were absent; past kube-apiserver's limit the
//! webhook's failurePolicy decides. Anyone who can create a schemaless custom resource can send
//! such an object.

use crate::common::*;

/// A Pod CREATE whose object is `depth` levels deep: `{"spec": {"deep": [[...1...]]}, ...}`,
/// the object and `spec` two of them.
fn deep_pod(depth: usize) -> Vec<u8> {
    let depth = depth - 2;
    let mut body = String::from_utf8(pod_create("app", serde_json::json!({"app": "web"}))).unwrap();
    // serde_json cannot build the tree this deep either: splice the text in.
    let spec = format!(
        "\"spec\":{{\"deep\":{}1{}}},\"metadata\"",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    assert!(body.contains("\"metadata\""), "{body}");
    body = body.replacen("\"metadata\"", &spec, 1);
    body.into_bytes()
}

/// A validating webhook `name` that matches on `object != null`, in front of `path`.
fn guarded(backend: &TestBackend, name: &str, path: &str, policy: &str) -> String {
    validating(
        name,
        &backend.client_config(path),
        ALL,
        &format!(
            "failurePolicy: {policy}\n  matchConditions: [{{name: has-object, expression: \"object != null\"}}]"
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deeply_nested_object_is_called_or_decided_by_failure_policy_never_skipped() {
    let backend = TestBackend::start();
    let ws = Workspace::new("deep-objects");
    std::fs::write(
        ws.conf.join("webhooks.yaml"),
        [
            guarded(&backend, "deny.deep.test", "/deny", "Fail"),
            guarded(&backend, "ignore.deep.test", "/deny", "Ignore"),
            webhook_config(
                "admissionregistration.k8s.io/v1",
                "MutatingWebhookConfiguration",
                "patch.deep.test",
                &backend.client_config("/patch"),
                ALL,
                "sideEffects: None\n  admissionReviewVersions: [v1]\n  matchConditions: [{name: has-object, expression: \"object != null\"}]",
            ),
        ]
        .join("---\n"),
    )
    .unwrap();
    let proxy =
        tokio::task::block_in_place(|| BinaryProxy::start(&ws.conf, &ws.cert, &ws.key, &[]));
    let post = |path: &'static str, body: Vec<u8>| {
        let proxy = &proxy;
        let pki = &ws.pki;
        async move { proxy.post(pki, path, &body).await }
    };
    for depth in [10, 130, 5_000, 10_000] {
        // 10,000: kube-apiserver's limit, counted from the object's top as it decodes it.
        let calls = backend.recorder.calls();
        let denied = post("/webhooks/deny.deep.test?timeout=10s", deep_pod(depth)).await;
        assert_eq!(denied.decision, "denied", "depth {depth}: {}", denied.json);
        assert!(!denied.allowed());
        let ignored = post("/webhooks/ignore.deep.test?timeout=10s", deep_pod(depth)).await;
        assert_eq!(
            ignored.decision, "denied",
            "depth {depth}: {}",
            ignored.json
        );
        assert_eq!(
            backend.recorder.calls(),
            calls + 2,
            "depth {depth}: both called"
        );
        let patched = post("/webhooks/patch.deep.test?timeout=10s", deep_pod(depth)).await;
        assert_eq!(
            patched.decision, "allowed",
            "depth {depth}: {}",
            patched.json
        );
        assert!(
            patched.json["response"]["patch"].is_string(),
            "depth {depth}: {}",
            patched.json
        );
        let chained = post(
            "/configurations/mutating/cfg-patch-deep-test?timeout=10s",
            deep_pod(depth),
        )
        .await;
        assert_eq!(chained.status, 200, "depth {depth}");
        assert!(chained.allowed(), "depth {depth}: {}", chained.json);
        assert!(
            chained.json["response"]["patch"].is_string(),
            "depth {depth}: the chain applies the patch: {}",
            chained.json
        );
        assert_eq!(backend.recorder.calls(), calls + 4, "depth {depth}");
    }

    // Past kube-apiserver's own limit (which it never sends) nothing reads the object: it is a
    // matchCondition error, decided by failurePolicy with no call: Fail rejects with the
    // reason, Ignore skips the webhook (the `matchConditions` API: "If failurePolicy=Ignore,
    // the error is ignored and the webhook is skipped").
    let calls = backend.recorder.calls();
    let too_deep = 10_001;
    let failed = post("/webhooks/deny.deep.test?timeout=10s", deep_pod(too_deep)).await;
    assert!(!failed.allowed(), "{}", failed.json);
    assert_ne!(failed.decision, "skipped");
    let message = failed.json["response"]["status"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains("10001 levels deep"),
        "the reason is given: {message}"
    );
    let open = post("/webhooks/ignore.deep.test?timeout=10s", deep_pod(too_deep)).await;
    assert!(open.allowed());
    assert_eq!(open.decision, "skipped", "{}", open.json);
    assert_eq!(backend.recorder.calls(), calls);

    // explain: the same verdict offline.
    let review = ws.dir.join("deep.json");
    std::fs::write(&review, deep_pod(130)).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_admission-proxy"))
        .args(["explain", "--config"])
        .arg(&ws.conf)
        .arg("--review")
        .arg(&review)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(!text.contains("not JSON"), "the body is shown: {text}");
    for name in ["deny.deep.test", "ignore.deep.test", "patch.deep.test"] {
        let line = text
            .lines()
            .find(|l| l.contains(&format!("webhook \"{name}\"")))
            .unwrap_or_default();
        assert!(line.contains("): CALL"), "{name}: {line}\n{text}");
    }
}
