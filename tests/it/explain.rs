//! `admission-proxy explain`, through the real binary on captured AdmissionReviews and the
//! bundled configuration (KEP-3716 "Debuggability"): every webhook's verdict with its evidence,
//! and the exact body a call would send.

use std::process::Command;

const CONFIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config");
const NAMESPACES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/namespaces.yaml"
);

fn review_path(name: &str) -> String {
    format!(
        "{}/tests/fixtures/admission-reviews/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn explain(review: &str, extra: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_admission-proxy"))
        .args(["explain", "--config", CONFIG, "--review", review])
        .args(extra)
        .output()
        .expect("run admission-proxy explain");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(review: &str) -> serde_json::Value {
    let (code, out, err) = explain(
        review,
        &["--namespaces-file", NAMESPACES, "--output", "json"],
    );
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).expect("explain --output json prints JSON")
}

fn webhook<'a>(explanation: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    explanation["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == name)
        .unwrap_or_else(|| panic!("webhook {name} explained"))
}

/// A Namespace CREATE: namespaceSelector reads the object's own labels (`GetNamespaceLabels`);
/// the v1beta1-only legacy webhook is sent the same review re-enveloped as v1beta1, byte for
/// byte otherwise; the v1 webhook gets the captured bytes unchanged.
#[test]
fn namespace_create_on_the_bundled_config() {
    let path = review_path("0001-create-core-v1-namespaces-v1.json");
    let captured = std::fs::read(&path).unwrap();
    let e = json(&path);
    assert_eq!(e["apiVersion"], "admission.k8s.io/v1");

    let require = webhook(&e, "require-labels.policy.example.com");
    assert_eq!(require["verdict"], "call", "{require:#}");
    assert_eq!(
        require["namespaceSelector"]["labelsFrom"],
        "the Namespace object itself"
    );
    assert_eq!(require["rules"][0]["result"], "matched");
    assert_eq!(
        require["matchConditions"][0]["name"],
        "exclude-system-users"
    );
    assert_eq!(require["matchConditions"][0]["value"], "true");
    // `request` + `userInfo` + `username` + startsWith on "admin" (1) + `!`: cel-go's cost.
    assert_eq!(require["matchConditions"][0]["cost"], 5);
    let call = &require["call"];
    assert_eq!(call["admissionReviewVersion"], "admission.k8s.io/v1");
    assert_eq!(
        call["url"],
        "https://127.0.0.1:18443/require-labels?timeout=5s"
    );
    assert_eq!(
        serde_json::to_vec(&call["body"]).unwrap(),
        serde_json::to_vec(&serde_json::from_slice::<serde_json::Value>(&captured).unwrap())
            .unwrap()
    );

    let audit = webhook(&e, "audit.legacy.example.com");
    assert_eq!(audit["verdict"], "call", "{audit:#}");
    assert_eq!(
        audit["call"]["admissionReviewVersion"],
        "admission.k8s.io/v1beta1"
    );
    assert_eq!(audit["failurePolicy"], "Ignore", "v1beta1 default");

    let quota = webhook(&e, "quota.policy.example.com");
    assert_eq!(quota["verdict"], "skip");
    assert_eq!(quota["reason"], "no rule matches");
    // A Namespace is cluster-scoped; scope is the first part tested (`predicates/rules/rules.go`
    // `Matcher.Matches`).
    assert_eq!(quota["rules"][0]["result"], "scope does not match");
    assert!(quota.get("call").is_none());
}

/// The bundled legacy webhook registered for extensions/v1beta1 deployments (matchPolicy
/// Equivalent by the v1 default) is called for an apps/v1 Deployment with the request
/// converted: kind, resource and object in extensions/v1beta1, requestKind still apps/v1
/// (`CreateV1AdmissionReview`).
#[test]
fn deployment_create_is_converted_for_the_extensions_v1beta1_webhook() {
    let e = json(&review_path("0064-create-apps-v1-deployments-v1.json"));
    let rollout = webhook(&e, "rollout.legacy.example.com");
    assert_eq!(rollout["verdict"], "call", "{rollout:#}");
    assert!(
        rollout["reason"]
            .as_str()
            .is_some_and(|r| r.contains("matchPolicy Equivalent")),
        "{rollout:#}"
    );
    let request = &rollout["call"]["body"]["request"];
    assert_eq!(request["object"]["apiVersion"], "extensions/v1beta1");
    assert_eq!(request["kind"]["group"], "extensions");
    assert_eq!(request["requestKind"]["group"], "apps");
    // Which rule of `admission-proxy registration`'s output brings the request to the proxy:
    // the legacy rule names extensions/v1beta1, which no current cluster serves.
    assert_eq!(
        rollout["registrationRule"],
        serde_json::json!({"index": 0, "rule": "operations=[CREATE, UPDATE] apiGroups=[apps] apiVersions=[v1, v1beta1, v1beta2] resources=[deployments] scope=*"})
    );
    // Exact webhooks are registered with their own rules: nothing more to show.
    let audit = webhook(&e, "audit.legacy.example.com");
    assert!(audit.get("registrationRule").is_none(), "{audit:#}");
}

/// The text form names each webhook's verdict and reason, and prints the exact body.
#[test]
fn text_output_shows_evidence_and_the_exact_body() {
    let path = review_path("0001-create-core-v1-namespaces-v1.json");
    let captured = std::fs::read_to_string(&path).unwrap();
    let (code, out, err) = explain(&path, &["--namespaces-file", NAMESPACES]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("AdmissionReview admission.k8s.io/v1 (uid "),
        "{out}"
    );
    assert!(
        out.contains("webhook \"quota.policy.example.com\" (validating configuration \"example-policies\"): SKIP (no rule matches)"),
        "{out}"
    );
    assert!(
        out.contains("matchCondition \"skip-dry-run\": !request.dryRun -> true (cost 3)"),
        "{out}"
    );
    assert!(
        out.contains(&format!("    {}\n", captured.trim_end())),
        "the v1 body is printed byte for byte: {out}"
    );
}

/// A namespaced request whose namespace is unknown: the 404 is held back and shown as the
/// reason only because a rule matches (`ShouldCallHook`).
#[test]
fn unknown_namespace_is_a_held_back_not_found() {
    let path = review_path("0001-create-core-v1-namespaces-v1.json");
    let (_, out, _) = explain(&path, &[]);
    // Without a namespaces file, a Namespace CREATE still uses its own labels.
    assert!(out.contains("labels: the Namespace object itself"), "{out}");
    let pods = std::fs::read_dir(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/admission-reviews"
    ))
    .unwrap()
    .filter_map(std::result::Result::ok)
    .map(|e| e.path())
    .find(|p| p.to_string_lossy().ends_with("create-core-v1-pods-v1.json"))
    .expect("a pod fixture");
    let (code, out, err) = explain(pods.to_str().unwrap(), &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("webhook \"require-labels.policy.example.com\" (validating configuration \"example-policies\"): REJECT (404 NotFound: namespaces "),
        "{out}"
    );
    assert!(out.contains("labels: namespace not found"), "{out}");
}

/// Bad input: a file that is not an AdmissionReview is a clear error, exit 1.
#[test]
fn bad_review_is_a_clear_error() {
    let dir = std::env::temp_dir().join(format!("explain-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.json");
    std::fs::write(&bad, br#"{"kind":"Pod","apiVersion":"v1"}"#).unwrap();
    let (code, _, err) = explain(bad.to_str().unwrap(), &[]);
    assert_eq!(code, 1);
    assert!(err.contains("parse the AdmissionReview in"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
