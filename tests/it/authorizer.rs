//! matchConditions' `authorizer` through the real binary (`serve --authorizer=subjectaccessreview`)
//! against a stand-in API server speaking SubjectAccessReview: KEP-3716's breakglass example
//! both ways, `authorizer.requestResource`, path and serviceAccount checks, an erroring API,
//! the cache, cost limits, and the refusal without the flag.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::sar_api::SarApi;
use crate::common::{self, https_get, BinaryProxy, TestBackend, Workspace, ALL};
use admission_proxy::dispatch::HttpClient;

/// KEP-3716's breakglass condition, as upstream's library spells it.
const BREAKGLASS: &str = "!authorizer.group('admissionregistration.k8s.io').resource('validatingwebhookconfigurations').name('my-webhook').check('breakglass').allowed()";

/// A validating webhook calling `path` on `backend` with these matchConditions
/// (`(name, expression)`) and failurePolicy.
fn webhook(
    name: &str,
    backend: &TestBackend,
    path: &str,
    policy: &str,
    conditions: &[(&str, &str)],
) -> String {
    configuration(name, &backend.client_config(path), policy, conditions)
}

/// [`webhook`] with any `clientConfig` (flow-style YAML).
fn configuration(
    name: &str,
    client_config: &str,
    policy: &str,
    conditions: &[(&str, &str)],
) -> String {
    let conditions: Vec<String> = conditions
        .iter()
        .map(|(n, e)| format!("{{name: {n}, expression: \"{e}\"}}"))
        .collect();
    common::validating(
        name,
        client_config,
        ALL,
        &format!(
            "failurePolicy: {policy}\n  matchConditions: [{}]",
            conditions.join(", ")
        ),
    )
}

/// A pod CREATE in `production` by `username` (uid `<username>-uid`, groups, extra), with
/// uid `n`.
fn pod_by(username: &str, n: usize) -> Vec<u8> {
    let mut review: Value =
        serde_json::from_slice(&common::fixture("0096-create-core-v1-pods-v1.json")).unwrap();
    review["request"]["uid"] = json!(format!("00000000-0000-4000-8000-{n:012}"));
    review["request"]["userInfo"] = json!({
        "username": username,
        "uid": format!("{username}-uid"),
        "groups": ["oncall", "system:authenticated"],
        "extra": {"scopes": ["admin"]}
    });
    serde_json::to_vec(&review).unwrap()
}

/// Starts the binary with the authorizer on, against `api`.
fn start(ws: &Workspace, api: &SarApi, extra: &[&str]) -> BinaryProxy {
    let kubeconfig = ws.dir.join("kubeconfig");
    api.write_kubeconfig(&kubeconfig);
    let mut args = vec![
        "--authorizer",
        "subjectaccessreview",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    BinaryProxy::start(&ws.conf, &ws.cert, &ws.key, &args)
}

/// A workspace named `name` serving `config` with the authorizer on, against `api`.
fn serve(name: &str, api: &SarApi, config: &str) -> (Workspace, BinaryProxy) {
    let ws = Workspace::new(name);
    std::fs::write(ws.conf.join("webhooks.yaml"), config).unwrap();
    let proxy = start(&ws, api, &[]);
    (ws, proxy)
}

/// Sends `body` to `webhook`; returns the decision header and the response.
async fn admit(proxy: &BinaryProxy, ws: &Workspace, webhook: &str, body: &[u8]) -> (String, Value) {
    let reply = HttpClient::new()
        .post(
            &proxy.target(&ws.pki),
            &format!("/webhooks/{webhook}?timeout=10s"),
            body,
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    let decision = reply
        .header("x-admission-proxy-decision")
        .unwrap_or_default()
        .to_string();
    let review: Value = serde_json::from_slice(&reply.body).unwrap();
    (decision, review["response"].clone())
}

/// The non-resource paths of the SubjectAccessReviews `api` was asked, in order.
fn paths_asked(api: &SarApi) -> Vec<Value> {
    api.bodies()
        .iter()
        .map(|b| b["spec"]["nonResourceAttributes"]["path"].clone())
        .collect()
}

/// A metric's value in the proxy's /metrics, 0 when absent.
fn metric(proxy: &BinaryProxy, ws: &Workspace, series: &str) -> f64 {
    let text = https_get(&proxy.addr, &ws.pki.ca_pem, None, "/metrics").unwrap();
    text.lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// KEP-3716's example: a user the cluster authorizes to `breakglass` on the webhook's
/// configuration skips the webhook (its backend is not called); anyone else gets the webhook.
/// The SubjectAccessReview carries the requesting user and the check's attributes, version
/// `*`; a second identical check is answered from the cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breakglass_skips_the_webhook_for_an_authorized_user_only() {
    let api = SarApi::start();
    api.allow(
        "oncall-admin",
        "breakglass",
        "validatingwebhookconfigurations",
        "RBAC: allowed by ClusterRoleBinding \"breakglass\"",
    );
    let backend = TestBackend::start();
    let (ws, proxy) = serve(
        "authz-breakglass",
        &api,
        &webhook(
            "my-webhook.authz.test",
            &backend,
            "/deny",
            "Fail",
            &[("breakglass", BREAKGLASS)],
        ),
    );
    // Given --kubeconfig and no --kube-version, serve asked the cluster's version.
    assert!(
        proxy.logged("the cluster's Kubernetes version, from /version") && proxy.logged("1.33"),
        "{:?}",
        proxy.logs.lock().unwrap()
    );

    let (decision, response) = admit(
        &proxy,
        &ws,
        "my-webhook.authz.test",
        &pod_by("oncall-admin", 1),
    )
    .await;
    assert_eq!(decision, "skipped");
    assert_eq!(response["allowed"], json!(true));
    assert_eq!(backend.recorder.calls(), 0, "the webhook is skipped");
    assert_eq!(api.calls(), 1);
    assert_eq!(
        api.bodies()[0],
        json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "metadata": {},
            "spec": {
                "user": "oncall-admin",
                "uid": "oncall-admin-uid",
                "groups": ["oncall", "system:authenticated"],
                "extra": {"scopes": ["admin"]},
                "resourceAttributes": {
                    "group": "admissionregistration.k8s.io",
                    "version": "*",
                    "resource": "validatingwebhookconfigurations",
                    "name": "my-webhook",
                    "verb": "breakglass"
                }
            }
        })
    );

    let (decision, response) =
        admit(&proxy, &ws, "my-webhook.authz.test", &pod_by("jane", 2)).await;
    assert_eq!(decision, "denied");
    assert_eq!(response["allowed"], json!(false));
    assert_eq!(backend.recorder.calls(), 1, "anyone else gets the webhook");
    assert_eq!(api.calls(), 2);

    // Both answers are cached: no further API calls.
    admit(
        &proxy,
        &ws,
        "my-webhook.authz.test",
        &pod_by("oncall-admin", 3),
    )
    .await;
    admit(&proxy, &ws, "my-webhook.authz.test", &pod_by("jane", 4)).await;
    assert_eq!(api.calls(), 2, "answered from the cache");
    assert_eq!(backend.recorder.calls(), 2);
    let checks = "admission_proxy_authorizer_checks_total{result=";
    assert_eq!(metric(&proxy, &ws, &format!("{checks}\"cached\"}}")), 2.0);
    assert_eq!(metric(&proxy, &ws, &format!("{checks}\"allowed\"}}")), 1.0);
    assert_eq!(metric(&proxy, &ws, &format!("{checks}\"denied\"}}")), 1.0);
    assert_eq!(
        metric(
            &proxy,
            &ws,
            "admission_proxy_subjectaccessreview_duration_seconds_count"
        ),
        2.0
    );
}

/// `authorizer.requestResource` (the request's group, resource, namespace and name), a path
/// check, and a check for a service account, each answered by its own SubjectAccessReview.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_resource_path_and_service_account_checks() {
    let api = SarApi::start();
    api.allow("jane", "create", "pods", "");
    api.allow("jane", "get", "/healthz", "");
    api.allow("system:serviceaccount:ci:builder", "create", "pods", "");
    let backend = TestBackend::start();
    let config = [
        webhook("request.authz.test", &backend, "/allow", "Fail", &[("may-create", "authorizer.requestResource.check('create').allowed()")]),
        webhook("path.authz.test", &backend, "/allow", "Fail", &[("may-probe", "authorizer.path('/healthz').check('get').allowed()")]),
        webhook("sa.authz.test", &backend, "/allow", "Fail", &[("builder-may-not", "!authorizer.serviceAccount('ci', 'builder').group('').resource('pods').namespace('ci').check('create').allowed()")]),
    ]
    .join("---\n");
    let (ws, proxy) = serve("authz-kinds", &api, &config);

    let (decision, _) = admit(&proxy, &ws, "request.authz.test", &pod_by("jane", 1)).await;
    assert_eq!(decision, "allowed");
    let spec = &api.bodies()[0]["spec"];
    assert_eq!(
        spec["resourceAttributes"],
        json!({"namespace": "production", "verb": "create", "version": "*", "resource": "pods", "name": "dns-frontend"})
    );

    let (decision, _) = admit(&proxy, &ws, "path.authz.test", &pod_by("jane", 2)).await;
    assert_eq!(decision, "allowed");
    assert_eq!(
        api.bodies()[1]["spec"]["nonResourceAttributes"],
        json!({"path": "/healthz", "verb": "get"})
    );

    let (decision, _) = admit(&proxy, &ws, "sa.authz.test", &pod_by("jane", 3)).await;
    assert_eq!(decision, "skipped", "the service account may create pods");
    assert_eq!(
        api.bodies()[2]["spec"],
        json!({
            "user": "system:serviceaccount:ci:builder",
            "groups": ["system:serviceaccounts", "system:serviceaccounts:ci"],
            "resourceAttributes": {"namespace": "ci", "verb": "create", "version": "*", "resource": "pods"}
        })
    );
    assert_eq!(backend.recorder.calls(), 2);
    assert_eq!(api.calls(), 3);
}

/// A failing API (403: the proxy's RBAC is missing) makes errored decisions, not CEL errors:
/// the breakglass webhook is called, `.error()` carries the reason, and nothing is cached.
/// An expression that does fail (`path('')`) goes through failurePolicy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erroring_api_errs_the_decision_and_the_webhook_is_called() {
    let api = SarApi::start();
    api.fail_with(Some(403));
    let backend = TestBackend::start();
    let config = [
        webhook(
            "my-webhook.authz.test",
            &backend,
            "/allow",
            "Fail",
            &[("breakglass", BREAKGLASS)],
        ),
        webhook(
            "reads-error.authz.test",
            &backend,
            "/allow",
            "Fail",
            &[(
                "not-when-forbidden",
                "!authorizer.path('/x').check('get').error().contains('Forbidden')",
            )],
        ),
        webhook(
            "empty-path.authz.test",
            &backend,
            "/allow",
            "Fail",
            &[("empty", "authorizer.path('').check('get').allowed()")],
        ),
    ]
    .join("---\n");
    let (ws, proxy) = serve("authz-errors", &api, &config);

    let (decision, _) = admit(
        &proxy,
        &ws,
        "my-webhook.authz.test",
        &pod_by("oncall-admin", 1),
    )
    .await;
    assert_eq!(decision, "allowed", "the backend was called and allowed");
    assert_eq!(backend.recorder.calls(), 1);
    admit(
        &proxy,
        &ws,
        "my-webhook.authz.test",
        &pod_by("oncall-admin", 2),
    )
    .await;
    assert_eq!(api.calls(), 2, "failures are not cached");

    let (decision, _) = admit(&proxy, &ws, "reads-error.authz.test", &pod_by("jane", 3)).await;
    assert_eq!(
        decision, "skipped",
        "the condition read the 403 in .error()"
    );
    assert_eq!(backend.recorder.calls(), 2);

    let (decision, response) =
        admit(&proxy, &ws, "empty-path.authz.test", &pod_by("jane", 4)).await;
    assert_eq!(decision, "rejected");
    assert_eq!(response["status"]["code"], json!(403));
    let message = response["status"]["message"].as_str().unwrap();
    assert!(
        message.ends_with("expression 'authorizer.path('').check('get').allowed()' resulted in error: path must not be empty"),
        "{message}"
    );
    assert_eq!(
        api.calls(),
        3,
        "no review for an expression that fails first"
    );
    assert_eq!(
        metric(
            &proxy,
            &ws,
            "admission_proxy_authorizer_checks_total{result=\"error\"}"
        ),
        3.0
    );
}

/// A slow API: the check errs within the admission's deadline (the webhook's timeoutSeconds,
/// within kube-apiserver's `?timeout=`), and the webhook is still called in time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_api_counts_against_the_admission_s_deadline() {
    let api = SarApi::start();
    api.delay(Duration::from_secs(5));
    let backend = TestBackend::start();
    let config = webhook(
        "my-webhook.authz.test",
        &backend,
        "/allow",
        "Fail",
        &[("breakglass", BREAKGLASS)],
    );
    let (ws, proxy) = serve(
        "authz-slow",
        &api,
        &config.replace("failurePolicy", "timeoutSeconds: 2\n  failurePolicy"),
    );
    let started = std::time::Instant::now();
    let (decision, _) = admit(&proxy, &ws, "my-webhook.authz.test", &pod_by("jane", 1)).await;
    let took = started.elapsed();
    // The review had the webhook's 2 s, then erred: the breakglass condition is true and the
    // backend is called, with its own 2 s within what is left of kube-apiserver's 10 s.
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_millis(3500),
        "{took:?}"
    );
    assert_eq!(decision, "allowed");
    assert_eq!(backend.recorder.calls(), 1);
    assert_eq!(api.calls(), 1);
}

/// `check` costs 350000: a third check in one expression runs over the per-expression limit,
/// after two reviews (the third is not sent); failurePolicy Fail then rejects, with cel-go's
/// text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_third_check_runs_over_the_cost_limit() {
    let api = SarApi::start();
    let backend = TestBackend::start();
    let three = "authorizer.path('/a').check('get').allowed() || authorizer.path('/b').check('get').allowed() || authorizer.path('/c').check('get').allowed()";
    let (ws, proxy) = serve(
        "authz-cost",
        &api,
        &webhook(
            "three.authz.test",
            &backend,
            "/allow",
            "Fail",
            &[("three", three)],
        ),
    );
    let (decision, response) = admit(&proxy, &ws, "three.authz.test", &pod_by("jane", 1)).await;
    assert_eq!(decision, "rejected");
    let message = response["status"]["message"].as_str().unwrap();
    assert!(
        message.ends_with("resulted in error: operation cancelled: actual cost limit exceeded"),
        "{message}"
    );
    assert_eq!(backend.recorder.calls(), 0);
    assert_eq!(paths_asked(&api), vec![json!("/a"), json!("/b")]);
}

/// Before 1.32 kube-apiserver does not charge `check` its 350000 by default
/// (`StrictCostEnforcementForWebhooks` beta and off in 1.30 and 1.31): with `--kube-version
/// 1.31` the same three checks are all asked and the condition is simply false.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_checks_fit_the_cost_limit_before_1_32() {
    let api = SarApi::start();
    let backend = TestBackend::start();
    let three = "authorizer.path('/a').check('get').allowed() || authorizer.path('/b').check('get').allowed() || authorizer.path('/c').check('get').allowed()";
    let ws = Workspace::new("authz-cost-1-31");
    let config = webhook(
        "three.authz.test",
        &backend,
        "/allow",
        "Fail",
        &[("three", three)],
    );
    std::fs::write(ws.conf.join("webhooks.yaml"), config).unwrap();
    let proxy = start(&ws, &api, &["--kube-version", "1.31"]);
    let (decision, response) = admit(&proxy, &ws, "three.authz.test", &pod_by("jane", 1)).await;
    assert_eq!(decision, "skipped", "{response}");
    assert_eq!(response["allowed"], true);
    assert_eq!(backend.recorder.calls(), 0);
    assert_eq!(
        paths_asked(&api),
        vec![json!("/a"), json!("/b"), json!("/c")]
    );
}

/// A backend no test reaches (the proxy refuses to start first).
const UNCALLED: &str = "{url: \"https://127.0.0.1:9/never\"}";

/// Runs the binary with `args` then `extra` to its end: exit code, stdout, stderr.
fn run(args: &[&std::ffi::OsStr], extra: &[&str]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_admission-proxy"))
        .args(args)
        .args(extra)
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// The breakglass webhook in front of [`UNCALLED`].
fn breakglass_unreached() -> String {
    configuration(
        "my-webhook.authz.test",
        UNCALLED,
        "Fail",
        &[("breakglass", BREAKGLASS)],
    )
}

/// Without `--authorizer`, a configuration that uses `authorizer` is refused at start with the
/// webhook, the condition and the flag named; with it, KEP-3716's draft form is refused as
/// kube-apiserver's compiler refuses it.
#[test]
fn refused_without_the_flag_and_in_the_draft_form() {
    let ws = Workspace::new("authz-refused");
    let serve = |extra: &[&str]| {
        let (code, _, stderr) = run(
            &[
                "serve".as_ref(),
                "--listen".as_ref(),
                "127.0.0.1:0".as_ref(),
                "--config".as_ref(),
                ws.conf.as_os_str(),
                "--tls-cert-file".as_ref(),
                ws.cert.as_os_str(),
                "--tls-private-key-file".as_ref(),
                ws.key.as_os_str(),
            ],
            extra,
        );
        (code, stderr)
    };
    std::fs::write(ws.conf.join("webhooks.yaml"), breakglass_unreached()).unwrap();
    let (code, stderr) = serve(&[]);
    assert_ne!(code, Some(0));
    assert!(
        stderr.contains("webhook \"my-webhook.authz.test\": webhooks[0].matchConditions[0].expression: matchCondition \"breakglass\" uses `authorizer` (authorization checks): start serve with --authorizer=subjectaccessreview"),
        "{stderr}"
    );

    let draft = "authorizer.resource('admissionregistration.k8s.io', 'validatingwebhookconfigurations', '*').check('breakglass').allowed()";
    std::fs::write(
        ws.conf.join("webhooks.yaml"),
        configuration(
            "my-webhook.authz.test",
            UNCALLED,
            "Fail",
            &[("breakglass", draft)],
        ),
    )
    .unwrap();
    let api = SarApi::start();
    let kubeconfig = ws.dir.join("kubeconfig");
    api.write_kubeconfig(&kubeconfig);
    let (code, stderr) = serve(&[
        "--authorizer",
        "subjectaccessreview",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
    ]);
    assert_ne!(code, Some(0));
    assert!(
        stderr.contains("compilation failed: ERROR: <input>:1:20: found no matching overload for 'resource' applied to 'kubernetes.authorization.Authorizer.(string, string, string)'"),
        "{stderr}"
    );
    assert_eq!(api.calls(), 0);
}

/// `check` lists every matchCondition that uses `authorizer` (valid: `serve --authorizer`
/// answers them).
#[test]
fn check_lists_the_conditions_that_use_authorizer() {
    let ws = Workspace::new("authz-check");
    let config = [
        configuration(
            "my-webhook.authz.test",
            UNCALLED,
            "Fail",
            &[
                ("breakglass", BREAKGLASS),
                ("pods-only", "request.resource.resource == 'pods'"),
            ],
        ),
        configuration("plain.authz.test", UNCALLED, "Fail", &[("always", "true")]),
    ]
    .join("---\n");
    std::fs::write(ws.conf.join("webhooks.yaml"), config).unwrap();
    let (code, stdout, _) = run(
        &["check".as_ref(), "--config".as_ref(), ws.conf.as_os_str()],
        &[],
    );
    assert_eq!(code, Some(0), "{stdout}");
    let listed: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("authorizer: "))
        .collect();
    assert_eq!(listed.len(), 1, "{stdout}");
    assert!(
        listed[0].ends_with(": ValidatingWebhookConfiguration \"cfg-my-webhook-authz-test\": webhook \"my-webhook.authz.test\": webhooks[0].matchConditions[0].expression: matchCondition \"breakglass\" uses `authorizer` (authorization checks): start serve with --authorizer=subjectaccessreview to answer them by SubjectAccessReview"),
        "{stdout}"
    );
    assert!(
        stdout.lines().last().unwrap().starts_with("valid: ")
            && stdout.contains("2 webhook(s) in 1 file(s); 1 matchCondition(s) use authorizer"),
        "{stdout}"
    );
}

/// `explain` shows each check's attributes and answer: asked of the cluster with
/// `--kubeconfig` (the verdict follows it), else "not checked" (an errored decision, so the
/// breakglass webhook is called, as serve would call it when the API fails).
#[test]
fn explain_shows_each_check_and_its_answer() {
    let api = SarApi::start();
    api.allow(
        "oncall-admin",
        "breakglass",
        "validatingwebhookconfigurations",
        "RBAC: allowed",
    );
    let ws = Workspace::new("authz-explain");
    std::fs::write(ws.conf.join("webhooks.yaml"), breakglass_unreached()).unwrap();
    let review = ws.dir.join("review.json");
    std::fs::write(&review, pod_by("oncall-admin", 1)).unwrap();
    let kubeconfig = ws.dir.join("kubeconfig");
    api.write_kubeconfig(&kubeconfig);
    let args = [
        "explain".as_ref(),
        "--config".as_ref(),
        ws.conf.as_os_str(),
        "--review".as_ref(),
        review.as_os_str(),
    ];
    let explain = |extra: &[&str]| {
        let (code, stdout, stderr) = run(&args, extra);
        assert_eq!(code, Some(0), "{stderr}");
        stdout
    };
    let check = "authorizer check: may \"oncall-admin\" breakglass admissionregistration.k8s.io/validatingwebhookconfigurations named \"my-webhook\"? -> ";

    let live = explain(&["--kubeconfig", kubeconfig.to_str().unwrap()]);
    assert!(
        live.contains(": SKIP (matchCondition \"breakglass\" is false)"),
        "{live}"
    );
    assert!(
        live.contains(&format!("{check}allowed: RBAC: allowed")),
        "{live}"
    );
    assert!(live.contains("-> false (cost 350006)"), "{live}");
    assert_eq!(
        api.calls(),
        1,
        "asked once (the second time from the cache)"
    );

    let offline = explain(&[]);
    assert!(offline.contains(": CALL (every check passed)"), "{offline}");
    assert!(
        offline.contains(&format!(
            "{check}error: not checked: explain asks the cluster only with --kubeconfig"
        )),
        "{offline}"
    );
    assert_eq!(api.calls(), 1);

    // kube-apiserver 1.31 does not charge `check` its 350000 (StrictCostEnforcementForWebhooks
    // off by default before 1.32): the same condition costs 7.
    let at_1_31 = explain(&[
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--kube-version",
        "1.31",
    ]);
    assert!(at_1_31.contains("-> false (cost 7)"), "{at_1_31}");

    // With --kubeconfig the cluster's version is read too (the stand-in answers 1.33). The
    // semver library, which kube-apiserver 1.33 would refuse in a new expression of its own
    // (it compiles against 1.32's environment), is the proxy's to evaluate: explain runs it.
    std::fs::write(
        ws.conf.join("webhooks.yaml"),
        breakglass_unreached().replace("authorizer.group", "isSemver('1.0.0') && authorizer.group"),
    )
    .unwrap();
    let (code, stdout, stderr) = run(&args, &["--kubeconfig", kubeconfig.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("isSemver('1.0.0')"), "{stdout}");
    assert!(
        api.requests().iter().any(|r| r == "GET /version"),
        "{:?}",
        api.requests()
    );
    let (code, stdout, stderr) = run(
        &args,
        &[
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--kube-version",
            "1.34",
        ],
    );
    assert_eq!(code, Some(0), "an explicit --kube-version wins: {stderr}");
    assert!(
        stdout.contains("SKIP") || stdout.contains("CALL"),
        "{stdout}"
    );
}

/// A reload that brings `authorizer` to a proxy started without the flag is rejected, naming
/// the flag, and the last good configuration keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_needs_the_flag_keeps_the_last_good_configuration() {
    let backend = TestBackend::start();
    let ws = Workspace::new("authz-reload");
    let file = ws.conf.join("webhooks.yaml");
    std::fs::write(
        &file,
        webhook(
            "my-webhook.authz.test",
            &backend,
            "/deny",
            "Fail",
            &[("always", "true")],
        ),
    )
    .unwrap();
    let proxy = BinaryProxy::start(&ws.conf, &ws.cert, &ws.key, &[]);
    let (decision, _) = admit(
        &proxy,
        &ws,
        "my-webhook.authz.test",
        &pod_by("oncall-admin", 1),
    )
    .await;
    assert_eq!(decision, "denied");
    std::fs::write(
        &file,
        webhook(
            "my-webhook.authz.test",
            &backend,
            "/allow",
            "Fail",
            &[("breakglass", BREAKGLASS)],
        ),
    )
    .unwrap();
    assert!(
        proxy.logged("start serve with --authorizer=subjectaccessreview"),
        "{:?}",
        proxy.logs.lock().unwrap()
    );
    assert!(proxy.logged("webhook configuration change rejected"));
    let (decision, _) = admit(
        &proxy,
        &ws,
        "my-webhook.authz.test",
        &pod_by("oncall-admin", 2),
    )
    .await;
    assert_eq!(
        decision, "denied",
        "the last good configuration still serves"
    );
    assert_eq!(backend.recorder.calls(), 2);
}

/// With `--otlp-endpoint`, the SubjectAccessReview rounds are an `authorization` span under
/// the admission, with how many checks were asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checks_are_an_authorization_span() {
    use crate::common::otlp::{attribute, hex, Collector};
    let api = SarApi::start();
    let collector = Collector::start();
    let backend = TestBackend::start();
    let ws = Workspace::new("authz-span");
    std::fs::write(
        ws.conf.join("webhooks.yaml"),
        webhook(
            "my-webhook.authz.test",
            &backend,
            "/allow",
            "Fail",
            &[("breakglass", BREAKGLASS)],
        ),
    )
    .unwrap();
    let kubeconfig = ws.dir.join("kubeconfig");
    api.write_kubeconfig(&kubeconfig);
    let proxy = BinaryProxy::start_with_env(
        &ws.conf,
        &ws.cert,
        &ws.key,
        &[
            "--otlp-endpoint",
            &collector.url,
            "--tracing-sampling-rate-per-million",
            "1000000",
            "--authorizer",
            "subjectaccessreview",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
        ],
        &[("OTEL_BSP_SCHEDULE_DELAY", "100")],
    );
    let (decision, _) = admit(&proxy, &ws, "my-webhook.authz.test", &pod_by("jane", 1)).await;
    assert_eq!(decision, "allowed");
    let spans = collector.wait_for(4);
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    let by_name = |name: &str| {
        spans
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no {name:?} span in {names:?}"))
    };
    let (admission, authorization) = (by_name("admission"), by_name("authorization"));
    assert_eq!(hex(&authorization.parent_span_id), hex(&admission.span_id));
    assert_eq!(attribute(authorization, "checks"), "1");
    assert!(by_name("matching").end_time_unix_nano >= authorization.end_time_unix_nano);
}
