//! Candidates: a replacement attached to a legacy webhook decides in the background on the
//! requests the legacy webhook is called for; every disagreement is counted, captured and
//! reported, and the legacy answers are those of a proxy without the candidate.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::*;
use crate::tools::pki::TestPki;
use admission_proxy::dispatch::HttpClient;

const ALL: &str =
    "[{operations: [\"*\"], apiGroups: [\"*\"], apiVersions: [\"*\"], resources: [\"*\"]}]";
const LEGACY: &str = "legacy.example.com";

fn candidate_backend(name: &str, client_config: &str) -> String {
    format!(
        "apiVersion: admission-proxy.io/v1alpha1\nkind: Candidate\nmetadata: {{name: {name}}}\n\
         spec:\n  webhook: {LEGACY}\n  backend:\n    clientConfig: {client_config}\n    \
         admissionReviewVersions: [v1]\n    timeoutSeconds: 5\n"
    )
}

/// Every other validating fixture, as kube-apiserver sent them.
fn validating_fixtures() -> Vec<(String, Vec<u8>)> {
    index()
        .iter()
        .filter(|e| e["webhookType"] == "validating")
        .step_by(2)
        .map(|e| e["file"].as_str().unwrap().to_string())
        .map(|f| (f.clone(), fixture(&f)))
        .collect()
}

/// Whether the example backend's `/require-labels` allows the review: the object or the old
/// object carries a label.
fn labelled(body: &[u8]) -> bool {
    let review: serde_json::Value = serde_json::from_slice(body).unwrap();
    ["object", "oldObject"].iter().any(|side| {
        review["request"][side]["metadata"]["labels"]
            .as_object()
            .is_some_and(|l| !l.is_empty())
    })
}

/// The legacy webhook, allowing everything, in `ws`'s configuration.
fn legacy_allowing(ws: &Workspace, backend: &TestBackend) {
    std::fs::write(
        ws.conf.join("webhooks.yaml"),
        validating(LEGACY, &backend.client_config("/allow"), ALL, ""),
    )
    .unwrap();
}

/// The legacy webhook, requiring labels (the example backend's `/require-labels`), in `ws`'s
/// configuration.
fn legacy_requiring_labels(ws: &Workspace, backend: &TestBackend) {
    let legacy = validating(
        LEGACY,
        &backend.client_config("/require-labels/quiet"),
        ALL,
        "",
    );
    std::fs::write(ws.conf.join("webhooks.yaml"), legacy).unwrap();
}

/// The capture files of `dir` once there are `n` (a bounded wait: 500 x 20 ms).
fn captures_when(dir: &Path, n: usize) -> Vec<PathBuf> {
    for _ in 0..500 {
        if capture_files(dir).len() >= n {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    capture_files(dir)
}

fn capture_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.to_string_lossy().ends_with(".capture.json"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// A candidate backend that denies unlabelled objects, beside a legacy webhook that allows
/// everything: exactly the unlabelled requests disagree, each counted once, captured once and
/// reported; the legacy answers are byte for byte those of a proxy without the candidate, and
/// the candidate backend is called once per request the legacy webhook was called for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirrored_backend_is_compared_on_every_called_request_and_its_disagreements_reported() {
    let backend = TestBackend::start();
    let ws = Workspace::new("candidates-backend");
    let captures = ws.dir.join("captures");
    let legacy = validating(LEGACY, &backend.client_config("/allow"), ALL, "");
    std::fs::write(ws.conf.join("webhooks.yaml"), &legacy).unwrap();
    let plain = ws.dir.join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    std::fs::write(plain.join("webhooks.yaml"), &legacy).unwrap();
    let candidate = candidate_backend("labels-required", &backend.client_config("/require-labels"));
    std::fs::write(ws.conf.join("candidate.yaml"), candidate).unwrap();
    let (with, without) = tokio::task::block_in_place(|| {
        let capture_dir = captures.to_str().unwrap();
        let flags = ["--capture-dir", capture_dir, "--capture-sample", "0"];
        (
            BinaryProxy::start(&ws.conf, &ws.cert, &ws.key, &flags),
            BinaryProxy::start(&plain, &ws.cert, &ws.key, &[]),
        )
    });
    let path = format!("/webhooks/{LEGACY}?timeout=10s");
    let client = HttpClient::new();
    let targets = [with.target(&ws.pki), without.target(&ws.pki)];
    let post = |i: usize, body: &[u8]| {
        let (client, target) = (&client, &targets[i]);
        let (path, body) = (path.clone(), body.to_vec());
        async move { Reply::from(client.post(target, &path, &body, &[]).await.unwrap()) }
    };
    let (mut called, mut unlabelled) = (0u64, Vec::new());
    for (i, (file, body)) in validating_fixtures().into_iter().enumerate() {
        // In batches the lane's places hold: at idle priority, on cores the tests keep busy,
        // it may fall behind and would shed.
        if i % 50 == 49 {
            results_when(&with, &ws.pki, "labels-required", called as f64).await;
        }
        let a = post(0, &body).await;
        let b = post(1, &body).await;
        assert_eq!(
            (a.status, &a.body),
            (b.status, &b.body),
            "{file}: the answer changed with a candidate"
        );
        if a.decision == "allowed" {
            called += 1;
            if !labelled(&body) {
                unlabelled.push(file);
            }
        }
    }
    assert!(called > 50 && !unlabelled.is_empty() && (unlabelled.len() as u64) < called);
    let metrics = tokio::task::block_in_place(|| {
        scrape_when_compared(&with, &ws.pki, "labels-required", called as f64)
    });
    let mut results = comparisons(&metrics, "labels-required");
    results.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        results,
        vec![
            (
                "agree".to_string(),
                (called - unlabelled.len() as u64) as f64
            ),
            ("disagree_allowed".to_string(), unlabelled.len() as f64),
        ]
    );
    assert_eq!(backend.recorder.calls_to("/require-labels"), called);
    assert_eq!(backend.recorder.calls_to("/allow"), 2 * called);
    let files = tokio::task::block_in_place(|| captures_when(&captures, unlabelled.len()));
    assert_eq!(
        files.len(),
        unlabelled.len(),
        "one capture per disagreement"
    );
    let capture: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap();
    let record = &capture["admissionProxyCapture"]["candidate"];
    assert_eq!(record["name"], "labels-required");
    // The example backend's denial also carries a warning the legacy allow has not.
    assert_eq!(
        record["differences"],
        serde_json::json!(["allowed", "warnings"])
    );
    assert_eq!(record["legacy"]["allowed"], true);
    assert_eq!(record["candidate"]["allowed"], false);
    assert_eq!(record["candidate"]["code"], 403);
    // The report: from the scrape and the captures.
    let scrape = ws.dir.join("metrics.txt");
    std::fs::write(&scrape, &metrics).unwrap();
    let report = std::process::Command::new(env!("CARGO_BIN_EXE_admission-proxy"))
        .args(["candidates", "--metrics"])
        .arg(&scrape)
        .arg("--capture-dir")
        .arg(&captures)
        .output()
        .unwrap();
    assert!(report.status.success(), "{report:?}");
    let text = String::from_utf8(report.stdout).unwrap();
    let agreement = 100.0 * (called - unlabelled.len() as u64) as f64 / called as f64;
    let head = format!(
        "candidate labels-required for webhook {LEGACY}: compared on {called} requests, {agreement:.2}% agreement ({} disagreements)",
        unlabelled.len()
    );
    assert!(text.starts_with(&head), "{text}");
    let group = format!(
        "  {} x allowed+warnings: legacy allowed; candidate denied 403: objects must carry labels (require-labels policy)",
        unlabelled.len()
    );
    assert!(text.contains(&group), "{text}");
    // explain on a captured disagreement: both decisions side by side, and the candidate.
    let explain = std::process::Command::new(env!("CARGO_BIN_EXE_admission-proxy"))
        .args(["explain", "--config"])
        .arg(&ws.conf)
        .arg("--review")
        .arg(&files[0])
        .output()
        .unwrap();
    assert!(explain.status.success(), "{explain:?}");
    let text = String::from_utf8(explain.stdout).unwrap();
    for line in [
        format!("captured disagreement of candidate \"labels-required\" with webhook \"{LEGACY}\" (differs in: allowed, warnings):"),
        "  legacy webhook: allowed".to_string(),
        "  candidate:      denied 403 Forbidden: objects must carry labels (require-labels policy) (warnings:".to_string(),
        "  candidate \"labels-required\" (backend, ".to_string(),
    ] {
        assert!(text.contains(&line), "missing {line:?} in {text}");
    }
    let logs = with.stop();
    let logged = logs
        .iter()
        .filter(|l| l.contains("candidate disagrees with the legacy webhook"))
        .count();
    assert_eq!(logged, unlabelled.len(), "each disagreement logged once");
    drop(without);
}

/// A candidate file that cannot be used is refused with its file, field and reason, like any
/// bad configuration file (`check` loads as `serve` does).
#[test]
fn bad_candidate_files_are_refused_with_their_fields() {
    let ws = Workspace::new("candidates-check");
    let url = format!("{{url: \"https://127.0.0.1:{}/\"}}", closed_port());
    let url = url.as_str();
    std::fs::write(
        ws.conf.join("webhooks.yaml"),
        validating(LEGACY, url, ALL, ""),
    )
    .unwrap();
    let docs = [
        // 0: an unknown field.
        format!("apiVersion: admission-proxy.io/v1alpha1\nkind: Candidate\nmetadata: {{name: a}}\nspec:\n  webhook: {LEGACY}\n  backnd: {{}}\n"),
        // 1: neither backend nor policy.
        format!("apiVersion: admission-proxy.io/v1alpha1\nkind: Candidate\nmetadata: {{name: b}}\nspec:\n  webhook: {LEGACY}\n"),
        // 2: no such webhook.
        format!("apiVersion: admission-proxy.io/v1alpha1\nkind: Candidate\nmetadata: {{name: c}}\nspec:\n  webhook: nope.example.com\n  backend: {{clientConfig: {url}, admissionReviewVersions: [v1]}}\n"),
        // 3: a backend without admissionReviewVersions.
        format!("apiVersion: admission-proxy.io/v1alpha1\nkind: Candidate\nmetadata: {{name: d}}\nspec:\n  webhook: {LEGACY}\n  backend: {{clientConfig: {url}}}\n"),
        // 4: a policy that is not in the directory.
        format!("apiVersion: admission-proxy.io/v1alpha1\nkind: Candidate\nmetadata: {{name: e}}\nspec:\n  webhook: {LEGACY}\n  policy: {{name: missing}}\n"),
        // 5: the wrong apiVersion.
        format!("apiVersion: admission-proxy.io/v1\nkind: Candidate\nmetadata: {{name: f}}\nspec:\n  webhook: {LEGACY}\n  backend: {{clientConfig: {url}, admissionReviewVersions: [v1]}}\n"),
    ];
    std::fs::write(ws.conf.join("candidates.yaml"), docs.join("---\n")).unwrap();
    // A policy whose CEL does not compile, and a binding with an unknown action: upstream's
    // messages, in the policy's and the binding's own documents.
    let broken = policy(
        "broken",
        "  - expression: \"object.metadata.name ==\"\n  - expression: \"nosuchvar.x == 1\"\n",
    )
    .replace(
        "validationActions: [Deny]",
        "validationActions: [Deny, Bogus]",
    );
    std::fs::write(ws.conf.join("policies.yaml"), broken).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_admission-proxy"))
        .args(["check", "--config"])
        .arg(&ws.conf)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    for want in [
        "candidates.yaml (document 0): Candidate \"a\": spec.backnd: unknown field `backnd`, expected one of `webhook`, `webhookType`, `backend`, `policy`",
        "candidates.yaml (document 1): Candidate \"b\": spec: Invalid value: exactly one of backend or policy must be set",
        "candidates.yaml (document 2): Candidate \"c\": spec.webhook: Not found: \"nope.example.com\"",
        "candidates.yaml (document 3): Candidate \"d\": spec.backend.admissionReviewVersions: Required value",
        "candidates.yaml (document 4): Candidate \"e\": spec.policy.name: Not found: \"missing\"",
        "candidates.yaml (document 5): Candidate \"f\": apiVersion: Unsupported value: \"admission-proxy.io/v1\"",
        "policies.yaml (document 0): ValidatingAdmissionPolicy \"broken\": spec.validations[0].expression: Invalid value: \"object.metadata.name ==\": compilation failed: ERROR: <input>:1:24: Syntax error: mismatched input '<EOF>'",
        "policies.yaml (document 0): ValidatingAdmissionPolicy \"broken\": spec.validations[1].expression: Invalid value: \"nosuchvar.x == 1\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'nosuchvar' (in container '')",
        "policies.yaml (document 1): ValidatingAdmissionPolicyBinding \"broken\": spec.validationActions[1]: Unsupported value: \"Bogus\": supported values: \"Audit\", \"Deny\", \"Warn\"",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with("error: ") && l.contains(want)),
            "missing {want:?} in {text}"
        );
    }
}

/// Waits (bounded) until `candidate`'s comparisons reach `n` in all; the results by name.
async fn results_when(
    proxy: &BinaryProxy,
    pki: &TestPki,
    candidate: &str,
    n: f64,
) -> std::collections::BTreeMap<String, f64> {
    let metrics = tokio::task::block_in_place(|| scrape_when_compared(proxy, pki, candidate, n));
    comparisons(&metrics, candidate).into_iter().collect()
}

fn start(ws: &Workspace, extra: &[&str]) -> BinaryProxy {
    tokio::task::block_in_place(|| BinaryProxy::start(&ws.conf, &ws.cert, &ws.key, extra))
}

/// A mutating legacy webhook and two candidates: one patches the object as the legacy webhook
/// does (agrees), one adds another label (disagrees on the object after the patch).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mutating_candidate_is_compared_on_the_object_after_its_patch() {
    let backend = TestBackend::start();
    let ws = Workspace::new("candidates-patch");
    let legacy = webhook_config(
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
        LEGACY,
        &backend.client_config("/patch"),
        ALL,
        "sideEffects: None\n  admissionReviewVersions: [v1]",
    );
    let candidates = [
        candidate_backend("same-patch", &backend.client_config("/patch")),
        candidate_backend("other-label", &backend.client_config("/upstream/addLabel")),
    ];
    std::fs::write(ws.conf.join("webhooks.yaml"), legacy).unwrap();
    std::fs::write(ws.conf.join("candidates.yaml"), candidates.join("---\n")).unwrap();
    let proxy = start(&ws, &[]);
    let path = format!("/webhooks/mutating/{LEGACY}?timeout=10s");
    for name in [
        "0096-create-core-v1-pods-v1.json",
        "0064-create-apps-v1-deployments-v1.json",
    ] {
        let reply = proxy.post(&ws.pki, &path, &fixture(name)).await;
        assert_eq!(reply.decision, "allowed", "{name}");
        assert!(reply.json["response"]["patch"].is_string(), "{name}");
    }
    let same = results_when(&proxy, &ws.pki, "same-patch", 2.0).await;
    assert_eq!(same.get("agree"), Some(&2.0), "{same:?}");
    let other = results_when(&proxy, &ws.pki, "other-label", 2.0).await;
    assert_eq!(other.get("disagree_patch"), Some(&2.0), "{other:?}");
}

/// A mirrored backend over its own timeout and one that is down are each decided by the
/// failurePolicy they would have after the cut-over (Fail: denied, so here a disagreement
/// with the allowing legacy webhook) and counted as decisions on an error; neither delays the
/// legacy answer (answered before the slow one's timeout ends).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_or_dead_candidate_is_counted_and_never_delays_the_answer() {
    let backend = TestBackend::start();
    let ws = Workspace::new("candidates-slow");
    legacy_allowing(&ws, &backend);
    let slow = candidate_backend("slow", &backend.client_config("/slow/5000"))
        .replace("timeoutSeconds: 5", "timeoutSeconds: 1");
    let dead = candidate_backend(
        "dead",
        &format!(
            "{{url: \"https://127.0.0.1:{}/\", caBundle: \"{}\"}}",
            closed_port(),
            backend.pki.ca_bundle()
        ),
    );
    std::fs::write(ws.conf.join("candidates.yaml"), [slow, dead].join("---\n")).unwrap();
    let proxy = start(&ws, &[]);
    let path = format!("/webhooks/{LEGACY}?timeout=10s");
    let reply = proxy
        .post(&ws.pki, &path, &fixture("0096-create-core-v1-pods-v1.json"))
        .await;
    assert_eq!(reply.decision, "allowed");
    let at_answer = tokio::task::block_in_place(|| proxy.scrape(&ws.pki));
    assert!(
        comparisons(&at_answer, "slow").is_empty(),
        "the answer came before the slow candidate's timeout"
    );
    for name in ["slow", "dead"] {
        let results = results_when(&proxy, &ws.pki, name, 1.0).await;
        assert_eq!(
            results.get("disagree_allowed"),
            Some(&1.0),
            "{name}: {results:?}"
        );
        let metrics = tokio::task::block_in_place(|| proxy.scrape(&ws.pki));
        assert_eq!(
            metric_value(
                &metrics,
                "admission_proxy_candidate_error_decisions_total",
                &[("webhook", LEGACY), ("candidate", name)]
            ),
            Some(1.0),
            "{name}"
        );
    }
}

/// Candidates follow the configuration directory: one added is compared from the next
/// request on; a bad candidate file is refused and the last good configuration (its candidate
/// included) keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn candidates_are_hot_reloaded_and_a_bad_one_keeps_the_last_good() {
    let backend = TestBackend::start();
    let ws = Workspace::new("candidates-reload");
    legacy_allowing(&ws, &backend);
    let proxy = start(&ws, &[]);
    let path = format!("/webhooks/{LEGACY}?timeout=10s");
    let pod = fixture("0096-create-core-v1-pods-v1.json");
    std::fs::write(
        ws.conf.join("candidates.yaml"),
        candidate_backend("mirror", &backend.client_config("/allow")),
    )
    .unwrap();
    // Bounded: the reload is picked up within a few of these.
    let mut compared = false;
    for _ in 0..100 {
        proxy.post(&ws.pki, &path, &pod).await;
        let metrics = tokio::task::block_in_place(|| proxy.scrape(&ws.pki));
        if !comparisons(&metrics, "mirror").is_empty() {
            compared = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(compared, "the new candidate is compared");
    std::fs::write(
        ws.conf.join("broken.yaml"),
        "apiVersion: admission-proxy.io/v1alpha1\nkind: Candidate\nmetadata: {name: broken}\nspec: {webhook: nope.example.com, backend: {}}\n",
    )
    .unwrap();
    let mut refused = false;
    for _ in 0..100 {
        if proxy.logged("spec.webhook: Not found") {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(refused, "the bad candidate file is refused with its field");
    let before = tokio::task::block_in_place(|| proxy.scrape(&ws.pki));
    let agreed = |m: &str| {
        comparisons(m, "mirror")
            .into_iter()
            .find(|(r, _)| r == "agree")
            .map_or(0.0, |(_, v)| v)
    };
    let n = agreed(&before);
    proxy.post(&ws.pki, &path, &pod).await;
    let after = results_when(&proxy, &ws.pki, "mirror", n + 1.0).await;
    assert_eq!(
        after.get("agree"),
        Some(&(n + 1.0)),
        "the last good candidate still compares"
    );
}

/// Candidate work is shed, and counted, when the background lane is full: 300 admissions
/// with a candidate that takes 5 s leave at least 44 of them uncompared (the lane holds 256),
/// and every admission is still answered at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn candidate_work_is_shed_and_counted_when_the_background_lane_is_full() {
    let backend = TestBackend::start();
    let ws = Workspace::new("candidates-shed");
    legacy_allowing(&ws, &backend);
    let slow = candidate_backend("slow", &backend.client_config("/slow/5000"))
        .replace("timeoutSeconds: 5", "timeoutSeconds: 10");
    std::fs::write(ws.conf.join("candidates.yaml"), slow).unwrap();
    let proxy = start(&ws, &[]);
    let (client, target) = (HttpClient::new(), proxy.target(&ws.pki));
    let path = format!("/webhooks/{LEGACY}?timeout=10s");
    let pod = fixture("0096-create-core-v1-pods-v1.json");
    let sends = (0..300).map(|_| client.post(&target, &path, &pod, &[]));
    let replies = futures::future::join_all(sends).await;
    assert!(replies
        .iter()
        .all(|r| r.as_ref().is_ok_and(|r| r.status == 200)));
    let metrics = tokio::task::block_in_place(|| proxy.scrape(&ws.pki));
    let shed = comparisons(&metrics, "slow")
        .into_iter()
        .find(|(r, _)| r == "shed")
        .map_or(0.0, |(_, v)| v);
    assert!(shed >= 44.0, "shed {shed}: {metrics}");
}

/// On a chain route (`/configurations/...`), each webhook with candidates is compared as on
/// its own route: the candidate receives the review the legacy webhook was sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn candidates_are_compared_on_chain_routes_too() {
    let backend = TestBackend::start();
    let ws = Workspace::new("candidates-chain");
    legacy_allowing(&ws, &backend);
    let candidate = candidate_backend("labels", &backend.client_config("/require-labels"));
    std::fs::write(ws.conf.join("candidates.yaml"), candidate).unwrap();
    let proxy = start(&ws, &[]);
    let chain = format!(
        "/configurations/validating/cfg-{}?timeout=10s",
        LEGACY.replace('.', "-")
    );
    let (labelled_pod, bare_pod) = (
        pod_create("default", serde_json::json!({"app": "web"})),
        pod_create("default", serde_json::json!({})),
    );
    for body in [&labelled_pod, &bare_pod, &bare_pod] {
        assert_eq!(proxy.post(&ws.pki, &chain, body).await.decision, "allowed");
    }
    let results = results_when(&proxy, &ws.pki, "labels", 3.0).await;
    assert_eq!(results.get("agree"), Some(&1.0), "{results:?}");
    assert_eq!(results.get("disagree_allowed"), Some(&2.0), "{results:?}");
    assert_eq!(backend.recorder.calls_to("/require-labels"), 3);
}

/// A ValidatingAdmissionPolicy, with its binding, as `kubectl get -o yaml` prints them.
fn policy(name: &str, validations: &str) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {{name: {name}}}\n\
         spec:\n  failurePolicy: Fail\n  matchConstraints:\n    resourceRules:\n    - operations: [\"*\"]\n      \
         apiGroups: [\"*\"]\n      apiVersions: [\"*\"]\n      resources: [\"*\"]\n  validations:\n{validations}\
         ---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n\
         metadata: {{name: {name}}}\nspec:\n  policyName: {name}\n  validationActions: [Deny]\n"
    )
}

fn candidate_policy(name: &str, policy: &str) -> String {
    format!(
        "apiVersion: admission-proxy.io/v1alpha1\nkind: Candidate\nmetadata: {{name: {name}}}\n\
         spec:\n  webhook: {LEGACY}\n  policy: {{name: {policy}}}\n"
    )
}

/// The example backend's `/require-labels` as CEL: the object or the old object is labelled.
const LABELLED: &str = "  - expression: \"[object, oldObject].exists(o, o != null && has(o.metadata) && has(o.metadata.labels) && size(o.metadata.labels) > 0)\"\n    message: objects must carry labels (require-labels policy)\n    reason: Forbidden\n";

/// The cut-over's second step: the legacy webhook in mode Shadow (the proxy answers allowed at
/// once; its replacement policy enforces in kube-apiserver) is still compared with its
/// candidate, on what it would have decided: a labelled pod agrees allowed, an unlabelled one
/// agrees denied, while both answers are allowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_legacy_webhook_is_still_compared_with_its_candidate() {
    let backend = TestBackend::start();
    let ws = Workspace::new("candidates-shadow");
    legacy_requiring_labels(&ws, &backend);
    let files = [policy("same", LABELLED), candidate_policy("exact", "same")];
    std::fs::write(ws.conf.join("candidates.yaml"), files.join("---\n")).unwrap();
    let proxy = start(&ws, &["--default-mode", "Shadow"]);
    let path = format!("/webhooks/{LEGACY}?timeout=10s");
    let client = HttpClient::new();
    let target = proxy.target(&ws.pki);
    for labels in [serde_json::json!({"app": "web"}), serde_json::json!({})] {
        let body = pod_create("default", labels);
        let reply = Reply::from(client.post(&target, &path, &body, &[]).await.unwrap());
        assert_eq!(reply.decision, "shadowed");
        assert_eq!(reply.json["response"]["allowed"], true);
    }
    let results = results_when(&proxy, &ws.pki, "exact", 2.0).await;
    assert_eq!(results, [("agree".to_string(), 2.0)].into());
    wait_for_calls(&backend, 2).await;
}

/// Two policies beside a legacy webhook that requires labels, on every validating fixture:
/// one that says what the webhook says agrees on every request; one that also refuses
/// DELETE disagrees on exactly the DELETEs the webhook allows, each captured with the policy's
/// failing validation and message, which `explain` shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_candidate_agrees_where_it_should_and_reports_exactly_what_it_changes() {
    let backend = TestBackend::start();
    let ws = Workspace::new("candidates-policy");
    let captures = ws.dir.join("captures");
    legacy_requiring_labels(&ws, &backend);
    let no_delete = format!("{LABELLED}  - expression: \"request.operation != 'DELETE'\"\n    message: deleting is not allowed\n    reason: Forbidden\n");
    let files = [
        policy("same", LABELLED),
        policy("no-delete", &no_delete),
        candidate_policy("exact", "same"),
        candidate_policy("deliberate", "no-delete"),
    ];
    std::fs::write(ws.conf.join("candidates.yaml"), files.join("---\n")).unwrap();
    let capture_dir = captures.to_str().unwrap().to_string();
    let proxy = start(
        &ws,
        &["--capture-dir", &capture_dir, "--capture-sample", "0"],
    );
    let path = format!("/webhooks/{LEGACY}?timeout=10s");
    let client = HttpClient::new();
    let target = proxy.target(&ws.pki);
    // The authentication and authorization reviews: sent to the legacy webhook (before 1.37),
    // which denies them (no labels), while kube-apiserver never applies a policy to them
    // (`exclusion.Excluded()`): after a cut-over they would be allowed, a real disagreement.
    let (mut called, mut deletes_allowed, mut reviews_denied) = (0u64, 0u64, 0u64);
    let auth_review = |e: &serde_json::Value| {
        matches!(
            e["group"].as_str(),
            Some("authorization.k8s.io" | "authentication.k8s.io")
        ) && e["resource"]
            .as_str()
            .is_some_and(|r| r.ends_with("reviews"))
    };
    let validating: Vec<_> = index()
        .into_iter()
        .filter(|e| e["webhookType"] == "validating")
        .collect();
    // In batches the lane's places hold (it sheds what it cannot take, and at idle priority
    // on cores the test's own requests keep busy it may fall behind): each batch's comparisons
    // are waited for before the next is sent.
    for batch in validating.chunks(50) {
        for e in batch {
            let body = fixture(e["file"].as_str().unwrap());
            let reply = Reply::from(client.post(&target, &path, &body, &[]).await.unwrap());
            if matches!(reply.decision.as_str(), "allowed" | "denied") {
                called += 1;
                if reply.decision == "allowed" && e["operation"] == "DELETE" {
                    deletes_allowed += 1;
                }
                if reply.decision == "denied" && auth_review(e) {
                    reviews_denied += 1;
                }
            }
        }
        for name in ["exact", "deliberate"] {
            results_when(&proxy, &ws.pki, name, called as f64).await;
        }
    }
    assert!(
        called > 100 && deletes_allowed > 0 && reviews_denied > 0,
        "{called} {deletes_allowed} {reviews_denied}"
    );
    let exact = results_when(&proxy, &ws.pki, "exact", called as f64).await;
    assert_eq!(
        exact,
        [
            ("agree".to_string(), (called - reviews_denied) as f64),
            ("disagree_allowed".to_string(), reviews_denied as f64),
        ]
        .into(),
        "agreement everywhere but on the reviews"
    );
    let deliberate = results_when(&proxy, &ws.pki, "deliberate", called as f64).await;
    let differ = deletes_allowed + reviews_denied;
    assert_eq!(
        deliberate,
        [
            ("agree".to_string(), (called - differ) as f64),
            ("disagree_allowed".to_string(), differ as f64),
        ]
        .into()
    );
    let files = tokio::task::block_in_place(|| {
        captures_when(&captures, (differ + reviews_denied) as usize)
    });
    assert_eq!(files.len() as u64, differ + reviews_denied);
    // The deliberate difference's captures: a DELETE the legacy webhook allowed.
    let files: Vec<_> = files
        .into_iter()
        .filter(|f| {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            text.contains("\"operation\":\"DELETE\"")
        })
        .collect();
    assert_eq!(files.len() as u64, deletes_allowed);
    let explain = std::process::Command::new(env!("CARGO_BIN_EXE_admission-proxy"))
        .args(["explain", "--config"])
        .arg(&ws.conf)
        .arg("--review")
        .arg(&files[0])
        .output()
        .unwrap();
    let text = String::from_utf8(explain.stdout).unwrap();
    for line in [
        "  legacy webhook: allowed",
        "  candidate:      denied 403 Forbidden: poddisruptionbudgets.policy \"cockroachdb-budget\" is forbidden: ValidatingAdmissionPolicy 'no-delete' with binding 'no-delete' denied request: deleting is not allowed (failing validation spec.validations[1]: request.operation != 'DELETE')",
        "  candidate \"deliberate\" (policy, ",
        "ValidatingAdmissionPolicy \"no-delete\": DENY 403 Forbidden: poddisruptionbudgets.policy \"cockroachdb-budget\" is forbidden: ValidatingAdmissionPolicy 'no-delete' with binding 'no-delete' denied request: deleting is not allowed (failing validation spec.validations[1]: request.operation != 'DELETE')",
        "  candidate \"exact\" (policy, ",
    ] {
        assert!(text.contains(line), "missing {line:?} in {text}");
    }
}

/// A metrics endpoint answering as `answer` does to each connection (at most 4), on
/// 127.0.0.1; its `http://` URL.
fn metrics_server(answer: fn(&mut std::net::TcpStream)) -> String {
    use std::io::Read as _;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/metrics", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for mut tcp in listener.incoming().take(4).flatten() {
            let mut head = [0u8; 4096];
            let _ = tcp.read(&mut head);
            answer(&mut tcp);
        }
    });
    url
}

fn candidates_report(metrics: &str, extra: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_admission-proxy"))
        .args(["candidates", "--metrics", metrics])
        .args(extra)
        .output()
        .unwrap()
}

/// The report prints what requests, backends and label values said: an escape sequence in a
/// decision or a label (`\u{1b}[1A\u{1b}[2K` erases the line above), or a newline that forges
/// a line, is written escaped. A chunked scrape is read as its body (it read as "no
/// comparisons yet"); a trickling scrape ends at `--scrape-timeout-seconds` and an endless one
/// at 64 MiB (it hung, or grew to 2.16 GB).
#[test]
fn the_report_is_escaped_and_its_scrape_bounded() {
    use std::io::Write as _;
    let chunked = metrics_server(|tcp| {
        let series = "admission_proxy_candidate_comparisons_total{webhook=\"w\",candidate=\"c\\n  candidate forged: 100.00% agreement\\u001b[2K\",result=\"agree\"} 7\n";
        let series = series.replace("\\u001b", "\u{1b}");
        let _ = write!(
            tcp,
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n{series}\r\n0\r\n\r\n",
            series.len()
        );
    });
    let report = candidates_report(&chunked, &[]);
    assert!(report.status.success(), "{report:?}");
    let text = String::from_utf8(report.stdout).unwrap();
    assert!(
        text.starts_with("candidate c\\u{a}  candidate forged: 100.00% agreement\\u{1b}[2K for webhook w: compared on 7 requests"),
        "{text}"
    );
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(!text.contains('\u{1b}'), "{text}");

    let trickle = metrics_server(|tcp| {
        let _ = tcp.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n");
        for _ in 0..600 {
            if tcp.write_all(b"#").is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    let started = std::time::Instant::now();
    let report = candidates_report(&trickle, &["--scrape-timeout-seconds", "1"]);
    assert!(!report.status.success());
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "ended by the timeout"
    );
    let stderr = String::from_utf8_lossy(&report.stderr);
    assert!(stderr.contains(&format!("scrape {trickle}")), "{stderr}");

    let endless = metrics_server(|tcp| {
        let _ = tcp.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
        let line = "#".repeat(64 * 1024);
        for _ in 0..2048 {
            if tcp.write_all(line.as_bytes()).is_err() {
                return;
            }
        }
    });
    let report = candidates_report(&endless, &[]);
    assert!(!report.status.success());
    let stderr = String::from_utf8_lossy(&report.stderr);
    assert!(
        stderr.contains("the answer is larger than 67108864 bytes"),
        "{stderr}"
    );
}

/// A ValidatingAdmissionPolicy `name` on pods, failurePolicy `failure_policy`, with `extra`
/// under its spec and `binding` under its binding's spec, as `kubectl get -o yaml` prints them.
fn pod_policy(name: &str, failure_policy: &str, extra: &str, binding: &str) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {{name: {name}}}\n\
         spec:\n  failurePolicy: {failure_policy}\n  matchConstraints:\n    resourceRules:\n    - \
         {{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [pods]}}\n{extra}\
         ---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n\
         metadata: {{name: {name}}}\nspec:\n  policyName: {name}\n  validationActions: [Deny]\n{binding}\
         ---\n{}",
        candidate_policy(name, name)
    )
}

/// An evaluation error, or a parameter that is not there, is a decision, as kube-apiserver
/// takes it after a cut-over (`addConfigError`, `Validate` in the policy plugin): failurePolicy
/// Fail denies with upstream's text (compared: here the legacy webhook allowed, a
/// disagreement), Ignore admits (agrees). Before, all three were `candidate_error`. The
/// capture and `explain` show the denial as the client would read it, with the validation
/// that failed, the error it came from, and the audit annotations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_that_errs_decides_by_its_failure_policy() {
    let backend = TestBackend::start();
    let ws = Workspace::new("candidates-policy-errors");
    let captures = ws.dir.join("captures");
    legacy_allowing(&ws, &backend);
    let erring = "  validations:\n  - expression: \"object.spec.nope == 'x'\"\n  \
                  auditAnnotations:\n  - {key: image, valueExpression: \"string(object.spec.containers[0].image)\"}\n";
    let params = "  paramKind: {apiVersion: v1, kind: ConfigMap}\n  validations:\n  - expression: \"params.data.max == '1'\"\n";
    let files = [
        pod_policy("fails", "Fail", erring, ""),
        pod_policy("ignores", "Ignore", erring, ""),
        pod_policy(
            "no-params",
            "Fail",
            params,
            "  paramRef: {name: limits, parameterNotFoundAction: Deny}\n",
        ),
    ];
    std::fs::write(ws.conf.join("candidates.yaml"), files.join("---\n")).unwrap();
    let proxy = start_capturing(&ws, &captures);
    let reply = post_pod(&proxy, &ws).await;
    assert!(reply.allowed(), "{}", reply.message());
    for (name, result) in [
        ("fails", "disagree_allowed"),
        ("ignores", "agree"),
        ("no-params", "disagree_allowed"),
    ] {
        assert_eq!(
            results_when(&proxy, &ws.pki, name, 1.0).await,
            [(result.to_string(), 1.0)].into(),
            "{name}"
        );
    }
    // Each decision that came from an error is counted apart and captured, the agreeing
    // Ignore one too.
    let metrics = proxy.scrape(&ws.pki);
    for name in ["fails", "ignores", "no-params"] {
        assert_eq!(
            metric_value(
                &metrics,
                "admission_proxy_candidate_error_decisions_total",
                &[("webhook", LEGACY), ("candidate", name)]
            ),
            Some(1.0),
            "{name}: {metrics}"
        );
    }
    let files = tokio::task::block_in_place(|| captures_when(&captures, 3));
    assert!(files.iter().any(|f| std::fs::read_to_string(f)
        .unwrap()
        .contains("\"name\":\"ignores\"")));
    let report = std::process::Command::new(env!("CARGO_BIN_EXE_admission-proxy"))
        .args(["candidates", "--metrics"])
        .arg(metrics_file(&ws, &metrics))
        .arg("--capture-dir")
        .arg(&captures)
        .output()
        .unwrap();
    let report = String::from_utf8(report.stdout).unwrap();
    assert!(
        report.contains("candidate ignores for webhook legacy.example.com: compared on 1 requests, 100.00% agreement (0 disagreements)\n  decided on an error (by failurePolicy, as kube-apiserver would): 1\n  1 x agreed, decided on an error: legacy allowed; candidate allowed (decided on the error: expression 'object.spec.nope == 'x'' resulted in error: no such key: nope)"),
        "{report}"
    );
    let captured: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    let fails = captured
        .iter()
        .find(|c| c.contains("\"name\":\"fails\""))
        .expect("a capture of fails");
    let record: serde_json::Value = serde_json::from_str(fails).unwrap();
    let candidate = &record["admissionProxyCapture"]["candidate"]["candidate"];
    assert_eq!(candidate["code"], 422, "{candidate}");
    assert_eq!(candidate["reason"], "Invalid", "{candidate}");
    let message = candidate["message"].as_str().unwrap();
    assert!(
        message.ends_with(
            "is forbidden: ValidatingAdmissionPolicy 'fails' with binding 'fails' denied request: \
             expression 'object.spec.nope == 'x'' resulted in error: no such key: nope"
        ),
        "{candidate}"
    );
    assert!(message.starts_with("pods \""), "{candidate}");
    assert_eq!(
        candidate["error"],
        "expression 'object.spec.nope == 'x'' resulted in error: no such key: nope",
        "{candidate}"
    );
    assert!(
        candidate["auditAnnotations"]["fails/image"].is_string(),
        "{candidate}"
    );
    let no_params = captured
        .iter()
        .find(|c| c.contains("\"name\":\"no-params\""))
        .expect("a capture of no-params");
    assert!(
        no_params.contains(
            "denied request: failed to configure binding: no params found for policy binding \
             with `Deny` parameterNotFoundAction"
        ),
        "{no_params}"
    );
}

/// A scrape written where `candidates --metrics` reads it.
fn metrics_file(ws: &Workspace, metrics: &str) -> PathBuf {
    let path = ws.dir.join("scrape.txt");
    let body = metrics.split_once("\r\n\r\n").map_or(metrics, |(_, b)| b);
    std::fs::write(&path, body).unwrap();
    path
}

/// The legacy webhook's own failures are not the candidate's: a legacy call that times out
/// (failurePolicy Ignore admits) is `legacy_error`, out of the agreement rate, logged and
/// captured, where it read as a disagreement with a candidate that denies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_failure_is_legacy_error_not_a_disagreement() {
    let backend = TestBackend::start();
    let ws = Workspace::new("candidates-legacy-error");
    let captures = ws.dir.join("captures");
    std::fs::write(
        ws.conf.join("webhooks.yaml"),
        validating(
            LEGACY,
            &backend.client_config("/slow/5000"),
            ALL,
            "failurePolicy: Ignore\n  timeoutSeconds: 1",
        ),
    )
    .unwrap();
    let denying = "  validations:\n  - {expression: \"false\", message: no}\n";
    std::fs::write(
        ws.conf.join("candidates.yaml"),
        pod_policy("denies", "Fail", denying, ""),
    )
    .unwrap();
    let proxy = start_capturing(&ws, &captures);
    let reply = post_pod(&proxy, &ws).await;
    assert_eq!(reply.decision, "failed-open", "{}", reply.message());
    assert_eq!(
        results_when(&proxy, &ws.pki, "denies", 1.0).await,
        [("legacy_error".to_string(), 1.0)].into()
    );
    let files = tokio::task::block_in_place(|| captures_when(&captures, 1));
    let text = std::fs::read_to_string(&files[0]).unwrap();
    assert!(
        text.contains("\"differences\":[\"legacy_error\"]"),
        "{text}"
    );
    assert!(proxy.logged("the legacy webhook's call failed; not compared"));
}

/// One report for a fleet: the scrapes of two replicas add up; `--since` a saved scrape
/// counts only what came after it; `--prometheus` asks a Prometheus server's query API (a
/// stand-in speaking its wire protocol here) for the sums over every replica, `increase` over
/// the `--since` window. Before, `candidates` read one scrape, from the beginning.
#[test]
fn the_report_sums_a_fleet_and_windows_by_since() {
    let ws = Workspace::new("candidates-fleet");
    let series = |agree: u64, disagree: u64| {
        format!(
            "admission_proxy_candidate_comparisons_total{{webhook=\"w\",candidate=\"c\",result=\"agree\"}} {agree}\n\
             admission_proxy_candidate_comparisons_total{{webhook=\"w\",candidate=\"c\",result=\"disagree_allowed\"}} {disagree}\n"
        )
    };
    let file = |name: &str, text: &str| {
        let path = ws.dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let (a, b) = (
        file("a.txt", &series(90, 10)),
        file("b.txt", &series(50, 0)),
    );
    let report = candidates_report(&a, &["--metrics", &b]);
    let text = String::from_utf8(report.stdout).unwrap();
    assert!(
        text.starts_with("candidate c for webhook w: compared on 150 requests, 93.33% agreement (10 disagreements)"),
        "{text}"
    );
    // Saved before a fix: 80 agreements and all 10 disagreements; since then 10 more
    // agreements.
    let saved_a = file("saved-a.txt", &series(80, 10));
    let windowed = candidates_report(&a, &["--since", &saved_a]);
    let text = String::from_utf8(windowed.stdout).unwrap();
    assert!(
        text.starts_with("candidate c for webhook w: compared on 10 requests, 100.00% agreement (0 disagreements)"),
        "{text}"
    );

    // A stand-in Prometheus: answers each instant query with a vector, recording the query.
    let queries = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = queries.clone();
    std::thread::spawn(move || {
        use std::io::{Read as _, Write as _};
        for mut tcp in listener.incoming().take(2).flatten() {
            let mut head = [0u8; 8192];
            let n = tcp.read(&mut head).unwrap_or(0);
            let request = String::from_utf8_lossy(&head[..n]).to_string();
            let target = request.split_whitespace().nth(1).unwrap_or("").to_string();
            seen.lock().unwrap().push(target.clone());
            let body = if target.contains("error_decisions") {
                r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"webhook":"w","candidate":"c"},"value":[1764300000,"3"]}]}}"#.to_string()
            } else {
                r#"{"status":"success","data":{"resultType":"vector","result":[
                    {"metric":{"webhook":"w","candidate":"c","result":"agree"},"value":[1764300000,"118"]},
                    {"metric":{"webhook":"w","candidate":"c","result":"disagree_allowed"},"value":[1764300000,"2"]}]}}"#.to_string()
            };
            let _ = write!(
                tcp,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_admission-proxy"))
        .args(["candidates", "--prometheus", &url, "--since", "2h"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.starts_with("candidate c for webhook w: compared on 120 requests, 98.33% agreement (2 disagreements)\n  decided on an error (by failurePolicy, as kube-apiserver would): 3"),
        "{text}"
    );
    let queries = queries.lock().unwrap();
    assert!(
        queries[0].starts_with("/api/v1/query?query=sum+by+%28webhook%2C+candidate%2C+result%29+%28increase%28admission_proxy_candidate_comparisons_total%5B7200s%5D%29%29"),
        "{queries:?}"
    );
}

/// `serve` on `ws`'s configuration, capturing every comparison into `captures`.
fn start_capturing(ws: &Workspace, captures: &Path) -> BinaryProxy {
    let capture_dir = captures.to_str().unwrap().to_string();
    start(
        ws,
        &["--capture-dir", &capture_dir, "--capture-sample", "0"],
    )
}

/// The legacy webhook's route answering a recorded pod CREATE.
async fn post_pod(proxy: &BinaryProxy, ws: &Workspace) -> Reply {
    proxy
        .post(
            &ws.pki,
            &format!("/webhooks/{LEGACY}?timeout=10s"),
            &fixture("0096-create-core-v1-pods-v1.json"),
        )
        .await
}
