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

const FAMILIES: [&str; 18] = [
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
    "admission_proxy_backend_ca_bundle_expiry_timestamp_seconds",
    // These two appeared only with their first increment.
    "admission_proxy_namespace_watch_errors_total",
    "admission_proxy_namespace_lookups_total",
    // Present without --authorizer too.
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
    // The test backend's caBundle, per webhook that names it.
    let ca_expiry = value(
        &before,
        "admission_proxy_backend_ca_bundle_expiry_timestamp_seconds",
        &[("name", "allow.metrics.test"), ("type", "validating")],
    )
    .unwrap();
    assert!(ca_expiry > now, "{ca_expiry} > {now}");

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

/// The resident memory of process `pid`, bytes (`VmRSS` of `/proc/PID/status`).
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

/// Clients of `/metrics` that never read pinned about twice the scrape each until the
/// write timeout (100 of them with a 4 MB scrape: 840 MB). A scrape is rendered once for the
/// clients it is being written to, and written out as the socket takes it, never copied per
/// client: 20 such clients add less than a few scrapes' worth, not 40. The metrics listener
/// keeps at most 64 connections (one more is closed at once), each with a header of at most
/// 16 KiB.
#[test]
fn clients_that_never_read_metrics_pin_a_bounded_amount() {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::Duration;
    let ws = Workspace::new("metrics-unread");
    let hooks: String = (0..3000)
        .map(|i| {
            format!(
                "- name: hook-{i}.unread.test\n  clientConfig: {{url: \"https://127.0.0.1:9/never\"}}\n  rules: {ALL}\n  sideEffects: None\n  admissionReviewVersions: [v1]\n"
            )
        })
        .collect();
    std::fs::write(
        ws.conf.join("webhooks.yaml"),
        format!("apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {{name: unread}}\nwebhooks:\n{hooks}"),
    )
    .unwrap();
    let proxy = BinaryProxy::start(
        &ws.conf,
        &ws.cert,
        &ws.key,
        &[
            "--metrics-bind-address",
            "127.0.0.1:0",
            "--write-timeout-seconds",
            "60",
        ],
    );
    assert!(proxy.logged("plain-HTTP observation listener"));
    let address = {
        let logs = proxy.logs.lock().unwrap();
        let line = logs
            .iter()
            .find(|l| l.contains("plain-HTTP observation listener"))
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        v["fields"]["address"].as_str().unwrap().to_string()
    };
    // A probe or a scrape needs a few hundred bytes of header; 1 MiB (the admission port's
    // --max-header-bytes) times 64 connections was what the listener could be made to hold.
    let mut big = TcpStream::connect(&address).unwrap();
    big.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let padding = "a".repeat(32 * 1024);
    // A peer that stops reading our request may reset it: what was answered counts.
    let _ = big.write_all(
        format!("GET /metrics HTTP/1.1\r\nHost: scraper\r\nX-Padding: {padding}\r\n\r\n")
            .as_bytes(),
    );
    let mut answer = Vec::new();
    let _ = big.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 431 Request Header Fields Too Large"),
        "a 32 KiB header: {}",
        &answer[..answer.len().min(200)]
    );

    let request = b"GET /metrics HTTP/1.1\r\nHost: scraper\r\n\r\n";
    let mut reader = TcpStream::connect(&address).unwrap();
    reader
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    reader
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: scraper\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut scrape = Vec::new();
    reader.read_to_end(&mut scrape).unwrap();
    let scrape = scrape.len() as u64;
    // More than the kernel takes off a socket whose client does not read (a few MB on
    // loopback): the rest waits in the proxy.
    assert!(scrape > 5_000_000, "a scrape of {scrape} bytes");

    let pid = proxy.child.id();
    let before = rss(pid);
    // Small receive buffers, so that the kernel does not take the whole answer off the proxy.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    let clients: Vec<TcpStream> = (0..20)
        .map(|_| {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.set_recv_buffer_size(4096).unwrap();
            let c = runtime.block_on(socket.connect(address.parse().unwrap()));
            let mut c = c.unwrap().into_std().unwrap();
            c.set_nonblocking(false).unwrap();
            c.write_all(request).unwrap();
            c
        })
        .collect();
    // Each answer has begun (its first bytes wait, unread, at the client): whatever the proxy
    // holds for these 20 clients, it holds now.
    for c in &clients {
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        assert_eq!(c.peek(&mut [0u8; 1]).unwrap(), 1, "an answer begun");
    }
    // Before renders were shared, each client pinned two copies: 40 scrapes for 20 clients.
    // Now at most two renders are alive, plus what a render takes while it is made (the
    // exporter's text grows by doubling) and what the allocator keeps of it, whichever client
    // arrives while the next render is under way: a bound well below one copy per client.
    let grown = rss(pid).saturating_sub(before);
    assert!(
        grown < 8 * scrape,
        "20 clients that do not read added {grown} bytes; a scrape is {scrape}"
    );

    // 44 more make 64 open; the next is closed at once.
    let _more: Vec<TcpStream> = (0..44)
        .map(|_| TcpStream::connect(&address).unwrap())
        .collect();
    let mut extra = TcpStream::connect(&address).unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut buf = [0u8; 1];
    let refused = match extra.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    };
    assert!(
        refused,
        "a 65th connection to the metrics listener stays open"
    );
}

/// Two webhooks with a caBundle, then a reload that removes one: the removed webhook's
/// `admission_proxy_backend_ca_bundle_expiry_timestamp_seconds` leaves `/metrics` with it (it
/// used to stay until a restart, and AdmissionProxyBackendCABundleExpiring kept firing for a
/// webhook that no longer exists); the one still served keeps its series.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_removed_by_a_reload_loses_its_ca_bundle_expiry() {
    let backend = TestBackend::start();
    let ws = Workspace::new("metrics-removed");
    let kept = validating(
        "kept.metrics.test",
        &backend.client_config("/allow"),
        ALL,
        "",
    );
    let removed = validating(
        "removed.metrics.test",
        &backend.client_config("/allow"),
        ALL,
        "",
    );
    let file = ws.conf.join("webhooks.yaml");
    std::fs::write(&file, format!("{kept}---\n{removed}")).unwrap();
    let proxy = BinaryProxy::start(&ws.conf, &ws.cert, &ws.key, &[]);
    let family = "admission_proxy_backend_ca_bundle_expiry_timestamp_seconds";
    let expiry = |metrics: &str, name: &str| {
        value(metrics, family, &[("name", name), ("type", "validating")])
    };
    let before = tokio::task::block_in_place(|| scrape(&proxy, &ws));
    assert!(expiry(&before, "kept.metrics.test").is_some(), "{before}");
    assert!(
        expiry(&before, "removed.metrics.test").is_some(),
        "{before}"
    );

    std::fs::write(&file, &kept).unwrap();
    let after = tokio::task::block_in_place(|| {
        proxy.scrape_until(&ws.pki, |m| {
            value(m, "admission_proxy_config_webhooks", &[]) == Some(1.0)
                && expiry(m, "removed.metrics.test").is_none()
        })
    });
    assert_eq!(
        expiry(&after, "removed.metrics.test"),
        None,
        "the removed webhook's caBundle expiry is gone: {after}"
    );
    assert_eq!(
        expiry(&after, "kept.metrics.test"),
        expiry(&before, "kept.metrics.test"),
        "the webhook still served keeps its series"
    );
    assert_eq!(
        after.matches(&format!("# TYPE {family} gauge")).count(),
        1,
        "one family: {after}"
    );
}

/// A backend that refuses connections opens its breaker (`--breaker-failures 1`), and
/// `admission_proxy_circuit_breaker_state` says so; a reload that removes the only webhook
/// calling it takes the series away (it used to stay until a restart, and
/// AdmissionProxyCircuitBreakerOpen kept firing for a backend nothing calls). The breaker of
/// the backend still served stays, closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_no_webhook_calls_any_more_loses_its_breaker_state() {
    let backend = TestBackend::start();
    let ws = Workspace::new("metrics-breaker-removed");
    let port = crate::common::closed_port();
    let kept = validating(
        "kept.metrics.test",
        &backend.client_config("/allow"),
        ALL,
        "failurePolicy: Ignore",
    );
    let down = validating(
        "down.metrics.test",
        &format!(
            "{{url: \"https://127.0.0.1:{port}/allow\", caBundle: \"{}\"}}",
            ws.pki.ca_bundle()
        ),
        ALL,
        "failurePolicy: Ignore",
    );
    let file = ws.conf.join("webhooks.yaml");
    std::fs::write(&file, format!("{kept}---\n{down}")).unwrap();
    let proxy = BinaryProxy::start(&ws.conf, &ws.cert, &ws.key, &["--breaker-failures", "1"]);
    let target = proxy.target(&ws.pki);
    let client = admission_proxy::dispatch::HttpClient::new();
    let pod = fixture("0096-create-core-v1-pods-v1.json");
    for hook in ["kept.metrics.test", "down.metrics.test"] {
        let reply = client
            .post(&target, &format!("/webhooks/{hook}?timeout=10s"), &pod, &[])
            .await
            .unwrap();
        assert_eq!(reply.status, 200, "{hook}");
    }
    let family = "admission_proxy_circuit_breaker_state";
    let down_backend = format!("127.0.0.1:{port}");
    let kept_backend = backend.url.trim_start_matches("https://").to_string();
    let state = |metrics: &str, backend: &str| value(metrics, family, &[("backend", backend)]);
    let before = tokio::task::block_in_place(|| scrape(&proxy, &ws));
    assert_eq!(state(&before, &down_backend), Some(1.0), "open: {before}");
    assert_eq!(state(&before, &kept_backend), Some(0.0), "closed: {before}");

    std::fs::write(&file, &kept).unwrap();
    let after = tokio::task::block_in_place(|| {
        proxy.scrape_until(&ws.pki, |m| {
            value(m, "admission_proxy_config_webhooks", &[]) == Some(1.0)
                && state(m, &down_backend).is_none()
        })
    });
    assert_eq!(state(&after, &down_backend), None, "{after}");
    assert_eq!(state(&after, &kept_backend), Some(0.0), "{after}");
    assert_eq!(
        after.matches(&format!("# TYPE {family} gauge")).count(),
        1,
        "one family: {after}"
    );
}
