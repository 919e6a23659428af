//! `/metrics` of the real binary: every family described and the webhooks' series at zero
//! before any request; after real admissions (allowed, denied, skipped, failed open, an
//! unknown route) the per-webhook counts, the backend's and the proxy's own time, matchCondition
//! counts, connections, build and configuration info; an unknown webhook name in a URL never
//! becomes a label value.

use crate::common::{fixture, validating, BinaryProxy, TestBackend, Workspace, ALL};

use crate::common::metric_value as value;

fn scrape(proxy: &BinaryProxy, ws: &Workspace) -> String {
    proxy.scrape(&ws.pki)
}

const FAMILIES: [&str; 17] = [
    "admission_proxy_build_info",
    "admission_proxy_webhook_admissions_total",
    "admission_proxy_admissions_total",
    "admission_proxy_webhook_admission_duration_seconds",
    "admission_proxy_webhook_backend_duration_seconds",
    "admission_proxy_webhook_proxy_duration_seconds",
    "admission_proxy_webhook_call_failures_total",
    "admission_proxy_webhook_retries_total",
    "admission_proxy_webhook_in_flight",
    "admission_proxy_match_condition_evaluations_total",
    "admission_proxy_upstream_connections_opened_total",
    "admission_proxy_config_generation",
    "admission_proxy_config_hash",
    "admission_proxy_serving_certificate_expiry_timestamp_seconds",
    // Issue 26 §10: these two appeared only with their first increment.
    "admission_proxy_namespace_watch_errors_total",
    "admission_proxy_namespace_lookups_total",
    // Issue 28: present without --authorizer too.
    "admission_proxy_authorizer_checks_total",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_show_each_webhook_and_the_proxy_s_own_cost() {
    let backend = TestBackend::start();
    let ws = Workspace::new("metrics");
    let config = [
        validating(
            "allow.metrics.test",
            &backend.client_config("/allow"),
            ALL,
            "matchConditions: [{name: always, expression: 'true'}]",
        ),
        validating("deny.metrics.test", &backend.client_config("/deny"), ALL, ""),
        validating(
            "skip.metrics.test",
            &backend.client_config("/allow"),
            r#"[{operations: [CONNECT], apiGroups: ["nothing"], apiVersions: ["*"], resources: ["*"]}]"#,
            "",
        ),
        validating(
            "down.metrics.test",
            "{url: \"https://127.0.0.1:9/never\"}",
            ALL,
            "failurePolicy: Ignore",
        ),
    ]
    .join("---\n");
    std::fs::write(ws.conf.join("webhooks.yaml"), config).unwrap();
    let proxy = BinaryProxy::start(&ws.conf, &ws.cert, &ws.key, &[]);

    // Before any request: every family described, every webhook's series at zero.
    let before = tokio::task::block_in_place(|| scrape(&proxy, &ws));
    for family in FAMILIES {
        assert!(
            before.contains(&format!("# HELP {family} ")),
            "{family} described: {before}"
        );
    }
    let allowed = [
        ("name", "allow.metrics.test"),
        ("type", "validating"),
        ("decision", "allowed"),
        ("rejected", "false"),
    ];
    assert_eq!(
        value(
            &before,
            "admission_proxy_webhook_admissions_total",
            &allowed
        ),
        Some(0.0)
    );
    assert_eq!(
        value(
            &before,
            "admission_proxy_webhook_call_failures_total",
            &[("name", "down.metrics.test"), ("class", "connect")]
        ),
        Some(0.0)
    );
    assert_eq!(
        value(&before, "admission_proxy_config_generation", &[]),
        Some(1.0)
    );
    assert_eq!(
        value(&before, "admission_proxy_config_webhooks", &[]),
        Some(4.0)
    );
    assert_eq!(
        value(
            &before,
            "admission_proxy_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))]
        ),
        Some(1.0)
    );
    let expiry = value(
        &before,
        "admission_proxy_serving_certificate_expiry_timestamp_seconds",
        &[],
    )
    .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(expiry > now, "{expiry} > {now}");

    let target = proxy.target(&ws.pki);
    let client = admission_proxy::dispatch::HttpClient::new();
    let pod = fixture("0096-create-core-v1-pods-v1.json");
    let send = |hook: &'static str| {
        let (client, target, pod) = (&client, &target, &pod);
        async move {
            client
                .post(target, &format!("/webhooks/{hook}?timeout=10s"), pod, &[])
                .await
                .unwrap()
                .status
        }
    };
    for hook in [
        "allow.metrics.test",
        "allow.metrics.test",
        "deny.metrics.test",
        "skip.metrics.test",
        "down.metrics.test",
    ] {
        assert_eq!(send(hook).await, 200, "{hook}");
    }
    assert_eq!(send("evil.unknown.name").await, 404);

    let after = tokio::task::block_in_place(|| scrape(&proxy, &ws));
    let count = |name: &str, decision: &str| {
        value(
            &after,
            "admission_proxy_webhook_admissions_total",
            &[("name", name), ("decision", decision)],
        )
    };
    assert_eq!(count("allow.metrics.test", "allowed"), Some(2.0));
    assert_eq!(count("deny.metrics.test", "denied"), Some(1.0));
    assert_eq!(
        value(
            &after,
            "admission_proxy_webhook_admissions_total",
            &[
                ("name", "deny.metrics.test"),
                ("decision", "denied"),
                ("rejected", "true")
            ]
        ),
        Some(1.0)
    );
    assert_eq!(count("skip.metrics.test", "skipped"), Some(1.0));
    assert_eq!(count("down.metrics.test", "failed-open"), Some(1.0));
    assert_eq!(
        value(
            &after,
            "admission_proxy_admissions_total",
            &[("operation", "CREATE"), ("decision", "allowed")]
        ),
        Some(2.0)
    );
    assert_eq!(
        value(
            &after,
            "admission_proxy_webhook_call_failures_total",
            &[("name", "down.metrics.test"), ("class", "connect")]
        ),
        Some(1.0)
    );
    // The backend's time only where it was called; the proxy's own time for every admission.
    let allow = [("name", "allow.metrics.test")];
    assert_eq!(
        value(
            &after,
            "admission_proxy_webhook_backend_duration_seconds_count",
            &allow
        ),
        Some(2.0)
    );
    assert_eq!(
        value(
            &after,
            "admission_proxy_webhook_proxy_duration_seconds_count",
            &allow
        ),
        Some(2.0)
    );
    assert_eq!(
        value(
            &after,
            "admission_proxy_webhook_admission_duration_seconds_count",
            &allow
        ),
        Some(2.0)
    );
    assert_eq!(
        value(
            &after,
            "admission_proxy_webhook_backend_duration_seconds_count",
            &[("name", "skip.metrics.test")]
        ),
        Some(0.0)
    );
    assert!(
        value(
            &after,
            "admission_proxy_webhook_proxy_duration_seconds_bucket",
            &[("name", "allow.metrics.test"), ("le", "0.00005")]
        )
        .is_some(),
        "buckets start at 50 µs: {after}"
    );
    assert_eq!(
        value(
            &after,
            "admission_proxy_match_condition_evaluations_total",
            &allow
        ),
        Some(2.0)
    );
    assert_eq!(
        value(
            &after,
            "admission_proxy_match_condition_exclusions_total",
            &allow
        ),
        Some(0.0)
    );
    assert_eq!(
        value(&after, "admission_proxy_webhook_in_flight", &allow),
        Some(0.0)
    );
    assert_eq!(
        value(
            &after,
            "admission_proxy_upstream_connections_opened_total",
            &[]
        ),
        Some(2.0),
        "one connection to the backend, one attempt at the dead one"
    );
    assert_eq!(
        value(
            &after,
            "admission_proxy_bad_requests_total",
            &[("reason", "unknown_webhook")]
        ),
        Some(1.0)
    );
    assert!(
        !after.contains("evil.unknown.name"),
        "a URL's name never becomes a label value"
    );
}
