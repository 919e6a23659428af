//! Proxy-wide exclusions (`serve --exempt-namespace`, `--exempt-namespace-selector`,
//! `--exclusions-file`), through the real binary: an exempt request is answered allowed
//! (decision `exempt`) with no backend call, counted and logged; a condition that errors exempts
//! nothing; without the flags nothing changes; a bad file refuses to start naming the field;
//! `check` validates the flags and `explain` shows the exemption.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{
    fixture, metric_value, pod_create, review_json, validating, BinaryProxy, Reply, TestBackend,
    Workspace, ALL,
};

/// A webhook that denies whatever reaches it: an exempt request answered allowed was not sent.
fn denying_config(backend: &TestBackend) -> String {
    validating(
        "deny.exclusions.test",
        &backend.client_config("/deny"),
        ALL,
        "",
    )
}

/// Namespaces `ops` (`tier=system`) and `app` (no labels).
const NAMESPACES: &str = "kind: List\nitems:\n- kind: Namespace\n  metadata: {name: ops, labels: {tier: system}}\n- kind: Namespace\n  metadata: {name: app}\n- kind: Namespace\n  metadata: {name: kube-system}\n";

/// A Pod CREATE in `namespace` with `labels`.
fn pod(namespace: &str, labels: serde_json::Value) -> Vec<u8> {
    pod_create(namespace, labels)
}

/// Sends `body` to the webhook through `proxy`.
async fn send(proxy: &BinaryProxy, ws: &Workspace, body: &[u8]) -> Reply {
    proxy
        .post(&ws.pki, "/webhooks/deny.exclusions.test?timeout=10s", body)
        .await
}

/// The value of the first series of `family` whose labels include every `labels` pair.
fn metric(metrics: &str, family: &str, labels: &[(&str, &str)]) -> Option<f64> {
    metric_value(metrics, family, labels)
}

fn scrape(proxy: &BinaryProxy, ws: &Workspace) -> String {
    proxy.scrape(&ws.pki)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exempt_namespaces_by_name_and_selector_call_nothing() {
    let backend = TestBackend::start();
    let ws = Workspace::new("exclusions-namespaces");
    std::fs::write(ws.conf.join("webhooks.yaml"), denying_config(&backend)).unwrap();
    let namespaces = ws.dir.join("namespaces.yaml");
    std::fs::write(&namespaces, NAMESPACES).unwrap();
    let proxy = BinaryProxy::start(
        &ws.conf,
        &ws.cert,
        &ws.key,
        &[
            "--log-level",
            "admission_proxy=debug",
            "--namespaces-file",
            namespaces.to_str().unwrap(),
            "--exempt-namespace",
            "kube-system",
            "--exempt-namespace",
            "kube-public",
            "--exempt-namespace-selector",
            "tier in (system, infra)",
        ],
    );
    assert!(
        proxy.logged("proxy-wide exclusions"),
        "the exclusions are logged at start"
    );

    for namespace in ["kube-system", "kube-public", "ops"] {
        let reply = send(&proxy, &ws, &pod(namespace, serde_json::json!({}))).await;
        assert_eq!(reply.status, 200, "{namespace}");
        assert!(reply.allowed(), "{namespace}: {}", reply.json);
        assert_eq!(reply.decision, "exempt", "{namespace}");
        assert_eq!(
            reply.json["response"]["uid"], "11111111-2222-3333-4444-555555555555",
            "the caller's uid is answered"
        );
    }
    assert_eq!(
        backend.recorder.calls(),
        0,
        "an exempt request calls nothing"
    );

    // Not exempt: a namespace neither listed nor selected, and a cluster-scoped request.
    let reply = send(&proxy, &ws, &pod("app", serde_json::json!({}))).await;
    assert_eq!(reply.outcome(), ("denied", Some(403)), "{}", reply.json);
    let node = review_json(
        "v1",
        "CREATE",
        "nodes",
        "",
        serde_json::json!({"metadata": {"name": "n"}}),
        serde_json::Value::Null,
        false,
    );
    let reply = send(&proxy, &ws, &node).await;
    assert_eq!(
        reply.decision, "denied",
        "cluster-scoped requests are never exempt by namespace"
    );
    assert_eq!(backend.recorder.calls(), 2);

    let metrics = tokio::task::block_in_place(|| scrape(&proxy, &ws));
    assert_eq!(
        metric(
            &metrics,
            "admission_proxy_exempt_total",
            &[("reason", "namespace")]
        ),
        Some(3.0),
        "{metrics}"
    );
    assert_eq!(
        metric(
            &metrics,
            "admission_proxy_exempt_total",
            &[("reason", "condition")]
        ),
        Some(0.0)
    );
    assert_eq!(
        metric(
            &metrics,
            "admission_proxy_webhook_admissions_total",
            &[
                ("name", "deny.exclusions.test"),
                ("decision", "exempt"),
                ("rejected", "false")
            ]
        ),
        Some(3.0)
    );
    assert!(
        proxy.logged(
            r#"namespace \"ops\" matches --exempt-namespace-selector tier in (infra,system)"#
        ),
        "the admission line names the exclusion: {:?}",
        proxy.logs.lock().unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_true_condition_exempts_and_an_error_does_not() {
    let backend = TestBackend::start();
    let ws = Workspace::new("exclusions-conditions");
    std::fs::write(ws.conf.join("webhooks.yaml"), denying_config(&backend)).unwrap();
    let file = ws.dir.join("exclusions.yaml");
    // `object.metadata.labels.exempt` errors on an object without that label (no such key).
    std::fs::write(
        &file,
        "matchConditions:\n- name: labelled-exempt\n  expression: \"object.metadata.labels.exempt == 'yes'\"\n",
    )
    .unwrap();
    let proxy = BinaryProxy::start(
        &ws.conf,
        &ws.cert,
        &ws.key,
        &[
            "--log-level",
            "admission_proxy=debug",
            "--exclusions-file",
            file.to_str().unwrap(),
        ],
    );

    let reply = send(
        &proxy,
        &ws,
        &pod("app", serde_json::json!({"exempt": "yes"})),
    )
    .await;
    assert_eq!(reply.decision, "exempt", "{}", reply.json);
    assert!(reply.allowed());
    assert_eq!(backend.recorder.calls(), 0);

    let reply = send(
        &proxy,
        &ws,
        &pod("app", serde_json::json!({"exempt": "no"})),
    )
    .await;
    assert_eq!(reply.decision, "denied", "false exempts nothing");
    let reply = send(&proxy, &ws, &pod("app", serde_json::json!({}))).await;
    assert_eq!(reply.decision, "denied", "an error exempts nothing");
    assert_eq!(backend.recorder.calls(), 2);

    let metrics = tokio::task::block_in_place(|| scrape(&proxy, &ws));
    assert_eq!(
        metric(
            &metrics,
            "admission_proxy_exempt_total",
            &[("reason", "condition")]
        ),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        metric(
            &metrics,
            "admission_proxy_exclusion_condition_errors_total",
            &[]
        ),
        Some(1.0)
    );
    assert!(proxy.logged("failed to evaluate: it exempts nothing"));
    assert!(proxy.logged(r#"matchCondition \"labelled-exempt\" of --exclusions-file is true"#));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_flags_nothing_is_exempt() {
    let backend = TestBackend::start();
    let ws = Workspace::new("exclusions-default");
    std::fs::write(ws.conf.join("webhooks.yaml"), denying_config(&backend)).unwrap();
    let proxy = BinaryProxy::start(&ws.conf, &ws.cert, &ws.key, &[]);
    assert!(!proxy.logged("proxy-wide exclusions"));
    let reply = send(&proxy, &ws, &pod("kube-system", serde_json::json!({}))).await;
    assert_eq!(reply.outcome(), ("denied", Some(403)));
    assert_eq!(backend.recorder.calls(), 1);
    let metrics = tokio::task::block_in_place(|| scrape(&proxy, &ws));
    for reason in ["namespace", "condition"] {
        assert_eq!(
            metric(
                &metrics,
                "admission_proxy_exempt_total",
                &[("reason", reason)]
            ),
            Some(0.0),
            "described and at zero: {metrics}"
        );
    }
}

/// Runs the binary with `args` until it exits (at most 20 s): its exit code and stderr.
fn run_to_exit(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_admission-proxy"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start admission-proxy");
    let deadline = Instant::now() + Duration::from_secs(20);
    let code = loop {
        match child.try_wait().unwrap() {
            Some(status) => break status.code(),
            None if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
    }
    (code, stderr)
}

/// A file with a good condition, one that does not compile and one that uses `authorizer`.
fn bad_file(dir: &Path) -> std::path::PathBuf {
    let file = dir.join("bad-exclusions.yaml");
    std::fs::write(
        &file,
        "namespaces: [kube-system]\nmatchConditions:\n- {name: ok, expression: 'true'}\n- {name: broken, expression: 'object.'}\n- {name: sar, expression: \"authorizer.group('').resource('pods').check('get').allowed()\"}\n",
    )
    .unwrap();
    file
}

#[test]
fn a_bad_exclusions_file_refuses_to_start() {
    let ws = Workspace::new("exclusions-bad");
    std::fs::write(
        ws.conf.join("webhooks.yaml"),
        validating(
            "x.exclusions.test",
            "{url: \"https://127.0.0.1:9/\"}",
            ALL,
            "",
        ),
    )
    .unwrap();
    let file = bad_file(&ws.dir);
    let (code, stderr) = run_to_exit(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--config",
        ws.conf.to_str().unwrap(),
        "--tls-cert-file",
        ws.cert.to_str().unwrap(),
        "--tls-private-key-file",
        ws.key.to_str().unwrap(),
        "--exclusions-file",
        file.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("matchConditions[1].expression: Invalid value: \"object.\""),
        "{stderr}"
    );
    assert!(
        stderr.contains("matchConditions[2].expression: Forbidden: `authorizer` is not available"),
        "{stderr}"
    );
    assert!(!stderr.contains("admission-proxy listening"), "{stderr}");
}

fn check(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_admission-proxy"))
        .arg("check")
        .args(args)
        .output()
        .expect("run admission-proxy check");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn check_validates_the_exclusions() {
    let ws = Workspace::new("exclusions-check");
    std::fs::write(
        ws.conf.join("webhooks.yaml"),
        validating(
            "x.exclusions.test",
            "{url: \"https://127.0.0.1:9/\"}",
            ALL,
            "",
        ),
    )
    .unwrap();
    let conf = ws.conf.to_str().unwrap();
    let bad = bad_file(&ws.dir);
    let (code, out) = check(&["--config", conf, "--exclusions-file", bad.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    let errors: Vec<&str> = out.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 2, "{out}");
    assert!(
        errors[0].contains("bad-exclusions.yaml: matchConditions[1].expression"),
        "{out}"
    );
    assert!(
        errors[1].contains("matchConditions[2].expression: Forbidden"),
        "{out}"
    );
    assert!(
        out.lines()
            .last()
            .unwrap()
            .contains("; exclusions: invalid"),
        "{out}"
    );

    let (code, out) = check(&[
        "--config",
        conf,
        "--exempt-namespace-selector",
        "tier in system",
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("error: --exempt-namespace-selector \"tier in system\": unable to parse requirement: found 'system' expected: '('"),
        "{out}"
    );

    let good = ws.dir.join("exclusions.json");
    std::fs::write(
        &good,
        r#"{"namespaceSelector": {"matchLabels": {"tier": "system"}}, "matchConditions": [{"name": "leases", "expression": "request.resource.resource == 'leases'"}]}"#,
    )
    .unwrap();
    let (code, out) = check(&[
        "--config",
        conf,
        "--exempt-namespace",
        "kube-system",
        "--exclusions-file",
        good.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.lines().last().unwrap().contains(
            "; exclusions: namespaces kube-system; --exclusions-file namespaceSelector tier=system; 1 matchCondition(s)"
        ),
        "{out}"
    );
    // The webhook (failurePolicy Fail on everything) is flagged for the control plane's
    // requests, but not for those in kube-system, which the proxy exempts before any webhook.
    assert!(
        out.contains("called for a kubelet registering its Node"),
        "{out}"
    );
    assert!(
        !out.contains("in kube-system:") && !out.contains("Lease in kube-system"),
        "{out}"
    );
}

#[test]
fn explain_shows_the_exemption_before_the_webhooks() {
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/config");
    let review = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/admission-reviews/0001-create-core-v1-namespaces-v1.json"
    );
    let explain = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_admission-proxy"))
            .args(["explain", "--config", config, "--review", review])
            .args(extra)
            .output()
            .expect("run admission-proxy explain");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // The review creates namespace "development".
    let text = explain(&["--exempt-namespace", "development"]);
    let exempt = text
        .find("exempt by proxy exclusion: namespace \"development\" is listed (--exempt-namespace): answered allowed at once, no webhook is called")
        .unwrap_or_else(|| panic!("{text}"));
    let first_webhook = text.find("\nwebhook ").unwrap();
    assert!(exempt < first_webhook, "shown before the webhooks: {text}");

    let text = explain(&["--exempt-namespace", "kube-system"]);
    assert!(
        text.contains("proxy exclusions (namespaces kube-system): none applies"),
        "{text}"
    );
    assert!(!text.contains("exempt by proxy exclusion"), "{text}");

    let without = explain(&["--output", "json"]);
    let without: serde_json::Value = serde_json::from_str(&without).unwrap();
    assert!(
        without.get("exclusion").is_none(),
        "no exclusions, no section"
    );

    let dir = std::env::temp_dir().join(format!(
        "admission-proxy-exclusions-explain-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("exclusions.yaml");
    std::fs::write(
        &file,
        "matchConditions:\n- {name: broken, expression: 'object.spec.missing == 1'}\n- {name: namespaces, expression: \"request.resource.resource == 'namespaces'\"}\n",
    )
    .unwrap();
    let json = explain(&[
        "--exclusions-file",
        file.to_str().unwrap(),
        "--output",
        "json",
    ]);
    let _ = std::fs::remove_dir_all(&dir);
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    let exclusion = &json["exclusion"];
    assert_eq!(exclusion["verdict"], "exempt", "{exclusion:#}");
    assert_eq!(
        exclusion["reason"],
        "matchCondition \"namespaces\" of --exclusions-file is true"
    );
    assert!(
        exclusion["matchConditions"][0]["error"].is_string(),
        "{exclusion:#}"
    );
    assert_eq!(exclusion["matchConditions"][1]["value"], "true");
}

/// `--kube-version 1.37`: kube-apiserver of that release never sends the virtual
/// authentication and authorization resources to webhooks
/// (`ExcludeAdmissionWebhookVirtualResources`): a real SelfSubjectAccessReview is answered as
/// it would be there, allowed without the webhook, counted as exempt; at 1.36 it is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn virtual_resources_never_reach_webhooks_from_kube_1_37() {
    let backend = TestBackend::start();
    let ws = Workspace::new("exclusions-virtual");
    std::fs::write(ws.conf.join("webhooks.yaml"), denying_config(&backend)).unwrap();
    let review = fixture("0615-create-authorization.k8s.io-v1-selfsubjectaccessreviews-v1.json");
    let at_137 = BinaryProxy::start(&ws.conf, &ws.cert, &ws.key, &["--kube-version", "1.37"]);
    let reply = send(&at_137, &ws, &review).await;
    assert!(reply.allowed(), "{}", reply.json);
    assert_eq!(reply.decision, "exempt");
    assert_eq!(backend.recorder.calls(), 0, "never sent to the webhook");
    let metrics = scrape(&at_137, &ws);
    assert_eq!(
        metric(
            &metrics,
            "admission_proxy_exempt_total",
            &[("reason", "virtual_resource")]
        ),
        Some(1.0),
        "{metrics}"
    );
    drop(at_137);
    let at_136 = BinaryProxy::start(&ws.conf, &ws.cert, &ws.key, &["--kube-version", "1.36"]);
    let reply = send(&at_136, &ws, &review).await;
    assert!(!reply.allowed(), "sent, and denied: {}", reply.json);
    assert_eq!(backend.recorder.calls(), 1);
}

/// `--kube-version 1.26`, a cluster without matchConditions (1.28+): the proxy still evaluates
/// them, as its registration carries none. It refused to start before, so such a cluster got
/// no matchConditions through the proxy at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn match_conditions_are_evaluated_for_a_cluster_before_1_28() {
    let backend = TestBackend::start();
    let ws = Workspace::new("exclusions-kube-1-26");
    let config = validating(
        "deny.exclusions.test",
        &backend.client_config("/deny"),
        ALL,
        "matchConditions:\n  - {name: only-team-a, expression: \"object.metadata.labels.team == 'a'\"}",
    );
    std::fs::write(ws.conf.join("webhooks.yaml"), config).unwrap();
    let proxy = tokio::task::block_in_place(|| {
        BinaryProxy::start(&ws.conf, &ws.cert, &ws.key, &["--kube-version", "1.26"])
    });
    let reply = send(&proxy, &ws, &pod("app", serde_json::json!({"team": "b"}))).await;
    assert_eq!(reply.decision, "skipped", "{}", reply.json);
    let reply = send(&proxy, &ws, &pod("app", serde_json::json!({"team": "a"}))).await;
    assert_eq!(reply.decision, "denied", "{}", reply.json);
    assert_eq!(
        backend.recorder.calls(),
        1,
        "called only where the condition holds"
    );
}
