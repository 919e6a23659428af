//! Real legacy backends as they are deployed: a serving certificate issued for the Service DNS
//! name while the proxy dials 127.0.0.1 (`tlsServerName`), a self-signed `CA:TRUE` certificate
//! used as its own caBundle (accepted by Go's verifier, so by kube-apiserver), and a validating
//! and a mutating webhook sharing one name (cert-manager ships `webhook.cert-manager.io` in
//! both), each on its typed route.

use crate::tools::pki::TestPki;

use crate::common::{fixture, webhook_config, TestBackend, TestProxy, ALL};

const POD: &str = "0096-create-core-v1-pods-v1.json";

/// A v1 ValidatingWebhookConfiguration with failurePolicy Ignore and `annotations` (a YAML flow
/// mapping) on the configuration.
fn validating_ignore(name: &str, client_config: &str, annotations: &str) -> String {
    webhook_config(
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
        name,
        client_config,
        ALL,
        "sideEffects: None\n  admissionReviewVersions: [v1]\n  failurePolicy: Ignore",
    )
    .replacen(
        "metadata: {name: cfg-",
        &format!("metadata: {{annotations: {annotations}, name: cfg-"),
        1,
    )
}

#[tokio::test]
async fn tls_server_name_reaches_a_backend_whose_certificate_names_the_service() {
    let backend =
        TestBackend::start_with_pki(TestPki::generate(&["legacy-webhook.webhooks.svc"]).unwrap());
    let options = r#"{admission-proxy.io/webhook-options: '{"named.hooks.example.com": {"tlsServerName": "legacy-webhook.webhooks.svc"}}'}"#;
    let named = validating_ignore(
        "named.hooks.example.com",
        &backend.client_config("/deny"),
        options,
    );
    let plain = validating_ignore(
        "plain.hooks.example.com",
        &backend.client_config("/deny"),
        "{}",
    );
    let proxy = TestProxy::start(&format!("{named}---\n{plain}"));

    let reply = proxy.review("named.hooks.example.com", &fixture(POD)).await;
    assert_eq!(
        reply.outcome(),
        ("denied", Some(403)),
        "{}",
        reply.message()
    );
    assert_eq!(backend.recorder.calls(), 1);

    // Without the option the certificate does not carry 127.0.0.1: a TLS failure, decided by
    // failurePolicy Ignore, whose warning reads as a sentence naming what was verified.
    let reply = proxy.review("plain.hooks.example.com", &fixture(POD)).await;
    assert_eq!(reply.decision, "failed-open");
    let warning = reply.json["response"]["warnings"][0].as_str().unwrap();
    assert!(
        warning.contains("failed calling webhook \"plain.hooks.example.com\"")
            && warning.contains("tls: failed to verify certificate of 127.0.0.1:")
            && warning.contains(
                "for server name \"127.0.0.1\": x509: certificate is valid for legacy-webhook.webhooks.svc, not 127.0.0.1;"
            ),
        "{warning}"
    );
    assert_eq!(
        backend.recorder.calls(),
        1,
        "no request reached the backend"
    );
}

#[tokio::test]
async fn a_self_signed_ca_certificate_in_ca_bundle_is_accepted_as_the_backends_own() {
    let backend = TestBackend::start_with_pki(TestPki::self_signed_ca(&["127.0.0.1"]).unwrap());
    // The same kind of certificate, but not the backend's: not trusted.
    let stranger = TestPki::self_signed_ca(&["127.0.0.1"]).unwrap();
    let trusted = validating_ignore(
        "trusted.hooks.example.com",
        &backend.client_config("/deny"),
        "{}",
    );
    let untrusted = validating_ignore(
        "untrusted.hooks.example.com",
        &format!(
            "{{url: \"{}/deny\", caBundle: \"{}\"}}",
            backend.url,
            stranger.ca_bundle()
        ),
        "{}",
    );
    let proxy = TestProxy::start(&format!("{trusted}---\n{untrusted}"));
    for _ in 0..3 {
        // New connection first, then a pooled one: both verified.
        let reply = proxy
            .review("trusted.hooks.example.com", &fixture(POD))
            .await;
        assert_eq!(
            reply.outcome(),
            ("denied", Some(403)),
            "{}",
            reply.message()
        );
    }
    assert_eq!(backend.recorder.calls(), 3);

    let reply = proxy
        .review("untrusted.hooks.example.com", &fixture(POD))
        .await;
    assert_eq!(reply.decision, "failed-open");
    let warning = reply.json["response"]["warnings"][0].as_str().unwrap();
    assert!(
        warning.contains("x509: certificate signed by unknown authority"),
        "{warning}"
    );
    assert_eq!(
        backend.recorder.calls(),
        3,
        "the stranger's backend was not called"
    );
}

#[tokio::test]
async fn validating_and_mutating_webhooks_may_share_a_name() {
    let backend = TestBackend::start();
    let name = "webhook.cert-manager.io";
    let validating = validating_ignore(name, &backend.client_config("/deny"), "{}");
    let mutating = webhook_config(
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
        name,
        &backend.client_config("/patch"),
        ALL,
        "sideEffects: None\n  admissionReviewVersions: [v1]",
    );
    let only_mutating = webhook_config(
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
        "only.hooks.example.com",
        &backend.client_config("/patch"),
        ALL,
        "sideEffects: None\n  admissionReviewVersions: [v1]",
    );
    let proxy = TestProxy::start(&format!("{validating}---\n{mutating}---\n{only_mutating}"));
    let pod = fixture(POD);

    let reply = proxy
        .post(&format!("/webhooks/validating/{name}?timeout=10s"), &pod)
        .await;
    assert_eq!(reply.outcome(), ("denied", Some(403)));
    let reply = proxy
        .post(&format!("/webhooks/mutating/{name}?timeout=10s"), &pod)
        .await;
    assert_eq!(reply.decision, "allowed");
    assert!(reply.json["response"]["patch"].is_string());

    let reply = proxy.review(name, &pod).await;
    assert_eq!(reply.status, 404);
    assert!(
        reply
            .message()
            .contains("both a validating and a mutating webhook"),
        "{}",
        reply.message()
    );
    // An unambiguous name keeps its untyped route; the wrong type is not found.
    assert_eq!(
        proxy.decision("only.hooks.example.com", &pod).await,
        "allowed"
    );
    let reply = proxy
        .post(
            "/webhooks/validating/only.hooks.example.com?timeout=10s",
            &pod,
        )
        .await;
    assert_eq!(reply.status, 404);
    assert_eq!(backend.recorder.calls(), 3);
}
