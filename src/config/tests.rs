//! Config loading tests: defaults per API version
//! (`pkg/apis/admissionregistration/v1/defaults.go`, `.../v1beta1/defaults.go`), validation
//! (`pkg/apis/admissionregistration/validation/validation.go`), and error locations.

use super::*;

fn load_one(name: &str, text: &str) -> Result<Snapshot, ConfigError> {
    load_contents(&[(PathBuf::from(name), text.to_string())])
}

fn problems(name: &str, text: &str) -> Vec<String> {
    match load_one(name, text) {
        Err(ConfigError::Invalid(p)) => p.iter().map(std::string::ToString::to_string).collect(),
        other => panic!("expected problems, got {other:?}"),
    }
}

const V1: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: policy}
webhooks:
- name: pods.policy.example.com
  clientConfig: {url: "https://127.0.0.1:9443/validate"}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  sideEffects: None
  admissionReviewVersions: [v1]
"#;

#[test]
fn v1_defaults() {
    let snap = load_one("v1.yaml", V1).unwrap();
    let w = snap.webhook("pods.policy.example.com").unwrap();
    assert_eq!(w.failure_policy(), FailurePolicy::Fail);
    assert_eq!(w.matcher.match_policy, MatchPolicy::Equivalent);
    assert_eq!(w.timeout, Duration::from_secs(10));
    assert_eq!(w.review_version, Some(ReviewVersion::V1));
    assert_eq!(w.configuration, "policy");
    assert!(w.matcher.namespace_selector.is_empty() && w.matcher.object_selector.is_empty());
}

#[test]
fn v1beta1_defaults() {
    let text = r#"
apiVersion: admissionregistration.k8s.io/v1beta1
kind: MutatingWebhookConfiguration
metadata: {name: legacy}
webhooks:
- name: legacy.hooks.example.com
  clientConfig: {service: {name: hook, namespace: system}}
  rules: [{operations: ["*"], apiGroups: ["*"], apiVersions: ["*"], resources: ["*/*"]}]
"#;
    let snap = load_one("beta.yaml", text).unwrap();
    let w = snap.webhook("legacy.hooks.example.com").unwrap();
    assert_eq!(w.failure_policy(), FailurePolicy::Ignore);
    assert_eq!(w.matcher.match_policy, MatchPolicy::Exact);
    assert_eq!(w.timeout, Duration::from_secs(30));
    assert_eq!(w.side_effects, SideEffects::Unknown);
    assert_eq!(w.review_version, Some(ReviewVersion::V1beta1));
    assert_eq!(w.backend.url, "https://hook.system.svc:443/");
    assert_eq!(
        snap.warnings.len(),
        1,
        "sideEffects Unknown loads with a warning"
    );
}

#[test]
fn v1_export_of_legacy_side_effects_loads_with_warning() {
    let snap = load_one(
        "v1.yaml",
        &V1.replace("sideEffects: None", "sideEffects: Unknown"),
    )
    .unwrap();
    assert!(
        snap.warnings[0].to_string().contains("dry-run"),
        "{}",
        snap.warnings[0]
    );
}

#[test]
fn v1_requires_side_effects_and_review_versions() {
    let p = problems(
        "v1.yaml",
        &V1.replace("  sideEffects: None\n", "")
            .replace("  admissionReviewVersions: [v1]\n", ""),
    );
    assert!(
        p.iter()
            .any(|p| p.contains("webhooks[0].sideEffects: Required value")),
        "{p:?}"
    );
    assert!(
        p.iter()
            .any(|p| p.contains("webhooks[0].admissionReviewVersions: Required value")),
        "{p:?}"
    );
}

#[test]
fn problems_name_file_configuration_webhook_and_field() {
    let p = problems("dir/v1.yaml", &V1.replace("[CREATE]", "[PATCH]"));
    assert_eq!(
        p,
        vec![
            r#"dir/v1.yaml (document 0): ValidatingWebhookConfiguration "policy": webhook "pods.policy.example.com": webhooks[0].rules[0].operations[0]: Unsupported value: "PATCH": supported values: "*", "CONNECT", "CREATE", "DELETE", "UPDATE""#
        ]
    );
}

#[test]
fn unknown_fields_are_errors() {
    let p = problems(
        "v1.yaml",
        &V1.replace(
            "sideEffects: None",
            "sideEffects: None\n  namespaceSelecter: {}",
        ),
    );
    assert!(
        p[0].contains("webhook \"pods.policy.example.com\"")
            && p[0].contains("unknown field `namespaceSelecter`"),
        "{p:?}"
    );
    let p = problems(
        "v1.yaml",
        &V1.replace(
            "sideEffects: None",
            "sideEffects: None\n  reinvocationPolicy: Never",
        ),
    );
    assert!(p[0].contains("reinvocationPolicy"), "{p:?}");
}

#[test]
fn validation_table() {
    let cases: &[(&str, &str, &str)] = &[
        ("name: pods.policy.example.com", "name: pods", "should be a domain with at least three segments"),
        ("sideEffects: None", "sideEffects: Maybe", "Unsupported value: \"Maybe\""),
        ("[v1]\n", "[v1, v1]\n", "Duplicate value"),
        ("[v1]\n", "[v3]\n", "must include at least one of v1, v1beta1"),
        ("sideEffects: None", "sideEffects: None\n  timeoutSeconds: 31", "between 1 and 30"),
        ("sideEffects: None", "sideEffects: None\n  failurePolicy: Never", "supported values: \"Fail\", \"Ignore\""),
        ("sideEffects: None", "sideEffects: None\n  matchPolicy: Loose", "Unsupported value: \"Loose\""),
        ("[CREATE]", "[\"*\", CREATE]", "if '*' is present"),
        ("resources: [pods]", "resources: [\"*/*\", pods]", "if '*/*' is present"),
        ("resources: [pods]", "resources: [\"pods/*\", pods/status]", "if 'pods/*' is present"),
        ("resources: [pods]", "resources: [\"*\", pods]", "if '*' is present, must not specify other resources without subresources"),
        ("resources: [pods]", "resources: [pods], scope: Global", "Unsupported value: \"Global\""),
        ("apiGroups: [\"\"]", "apiGroups: []", "apiGroups: Required value"),
        ("https://127.0.0.1:9443/validate", "http://10.1.2.3/validate", "'https' is required"),
        ("sideEffects: None", "sideEffects: None\n  objectSelector: {matchExpressions: [{key: a, operator: In}]}", "objectSelector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"),
        ("sideEffects: None", "sideEffects: None\n  objectSelector: {matchExpressions: [{key: a, operator: Bogus}]}", "objectSelector.matchExpressions[0].operator: Invalid value: \"Bogus\": not a valid selector operator"),
        ("sideEffects: None", "sideEffects: None\n  namespaceSelector: {matchLabels: {\"bad key!\": x}}", "namespaceSelector.matchLabels: Invalid value: \"bad key!\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
        ("sideEffects: None", "sideEffects: None\n  matchConditions: [{name: c, expression: 'object.'}]", "matchConditions[0].expression"),
        ("sideEffects: None", "sideEffects: None\n  matchConditions: [{name: c, expression: '1'}]", "must evaluate to bool"),
        ("sideEffects: None", "sideEffects: None\n  matchConditions: [{name: c, expression: 'true'}, {name: c, expression: 'true'}]", "matchConditions[1].name: Duplicate"),
        ("name: policy", "name: Policy_1", "metadata.name"),
    ];
    for (from, to, expected) in cases {
        let text = V1.replacen(from, to, 1);
        assert_ne!(text, V1, "case {to} did not change the document");
        let p = problems("v1.yaml", &text);
        assert!(
            p.iter().any(|p| p.contains(expected)),
            "{to}: expected {expected:?} in {p:?}"
        );
    }
    let ok = V1.replace("resources: [pods]", "resources: [pods, \"*\"]");
    assert!(
        load_one("v1.yaml", &ok).is_ok(),
        "the overwritten-flag quirk lets [pods, *] pass"
    );
}

#[test]
fn lists_multi_documents_and_json() {
    let list = format!(
        "apiVersion: v1\nkind: List\nitems:\n{}",
        V1.trim_start()
            .lines()
            .map(|l| format!("  {l}\n"))
            .collect::<String>()
            .replacen("  apiVersion", "- apiVersion", 1)
    );
    assert!(load_one("list.yaml", &list)
        .unwrap()
        .webhook("pods.policy.example.com")
        .is_some());
    let two = format!(
        "{V1}---\n{}",
        V1.replace("pods.policy", "svc.policy")
            .replace("name: policy", "name: policy2")
    );
    assert_eq!(load_one("two.yaml", &two).unwrap().len(), 2);
    let json: serde_json::Value = serde_yaml_ng::from_str(V1).unwrap();
    assert!(load_one("one.json", &json.to_string()).is_ok());
}

#[test]
fn webhook_names_are_unique_across_files() {
    let err = load_contents(&[
        ("a.yaml".into(), V1.to_string()),
        ("b.yaml".into(), V1.replace("name: policy", "name: other")),
    ])
    .unwrap_err();
    assert!(err.to_string().contains("unique across all files"), "{err}");
}

/// A cluster holds one configuration of a kind per name (a second `create` is `AlreadyExists`):
/// two in the files are refused, whatever their webhooks are called. A validating and a
/// mutating configuration may share a name, as in a cluster.
#[test]
fn configuration_names_are_unique_per_kind() {
    let err = load_contents(&[
        ("a.yaml".into(), V1.to_string()),
        (
            "b.yaml".into(),
            V1.replace("pods.policy.example.com", "other.policy.example.com"),
        ),
    ])
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "1 problem(s) in the webhook configuration:\n  b.yaml (document 0): ValidatingWebhookConfiguration \"policy\": metadata.name: Duplicate value: \"policy\": ValidatingWebhookConfiguration names are unique in a cluster (also in a.yaml)"
    );
    let mutating = V1
        .replace(
            "ValidatingWebhookConfiguration",
            "MutatingWebhookConfiguration",
        )
        .replace("pods.policy.example.com", "other.policy.example.com");
    load_contents(&[
        ("a.yaml".into(), V1.to_string()),
        ("b.yaml".into(), mutating),
    ])
    .unwrap();
}

/// An empty file among others used to load as "no webhooks here", silently
/// removing its webhooks; it is refused, so the last good configuration keeps serving.
#[test]
fn an_empty_or_comment_only_file_is_refused() {
    for empty in ["", "\n", "# being written\n", "---\n"] {
        let err = load_contents(&[
            ("a.yaml".into(), V1.to_string()),
            ("b.yaml".into(), empty.to_string()),
        ])
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "1 problem(s) in the webhook configuration:\n  b.yaml: the file has no documents (empty, or only comments): refused like an invalid file; delete it to remove its webhooks",
            "{empty:?}"
        );
    }
    assert!(problems("c.json", "")[0].contains("invalid JSON"));
}

#[test]
fn wrong_kinds_and_bad_yaml() {
    assert!(problems("x.yaml", "apiVersion: v1\nkind: ConfigMap\n")[0]
        .contains("kind: Unsupported value: \"ConfigMap\""));
    assert!(problems("x.yaml", "a: [")[0].contains("invalid YAML"));
    assert!(problems(
        "x.yaml",
        &V1.replace(
            "admissionregistration.k8s.io/v1",
            "admissionregistration.k8s.io/v2"
        )
    )[0]
    .contains("apiVersion"));
}

const CRD_V1: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {plural: widgets, kind: Widget}
  scope: Namespaced
  versions:
  - {name: v2, served: true, storage: true, subresources: {status: {}, scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}}}
  - {name: v1, served: true, storage: false}
  conversion:
    strategy: Webhook
    webhook:
      clientConfig: {service: {name: widget-conversion, namespace: system, path: /convert}}
      conversionReviewVersions: [v2, v1beta1, v1]
"#;

#[test]
fn custom_resource_definitions_declare_equivalents() {
    use crate::resources::custom::{ConversionReviewVersion, ConversionStrategy};
    // In the same directory as the webhooks, in any file order; `List`s as kubectl prints.
    let list = format!(
        "apiVersion: v1\nkind: List\nitems:\n- {}",
        V1.trim().replace('\n', "\n  ")
    );
    let snap = load_contents(&[
        (PathBuf::from("a-webhooks.yaml"), list),
        (PathBuf::from("b-crds.yaml"), CRD_V1.to_string()),
    ])
    .unwrap();
    let crd = snap.custom_resources.get("example.com", "widgets").unwrap();
    assert_eq!(crd.kind, "Widget");
    let names: Vec<_> = crd
        .versions
        .iter()
        .map(|v| (v.name.as_str(), v.status, v.scale))
        .collect();
    assert_eq!(names, [("v2", true, true), ("v1", false, false)]);
    let ConversionStrategy::Webhook(w) = &crd.strategy else {
        panic!("strategy Webhook")
    };
    assert_eq!(
        w.backend.url,
        "https://widget-conversion.system.svc:443/convert"
    );
    // The first version kube-apiserver knows, in the CRD's order.
    assert_eq!(w.review_version, Some(ConversionReviewVersion::V1beta1));
    let w = snap.webhook("pods.policy.example.com").unwrap();
    assert!(w
        .matcher
        .custom_resources
        .get("example.com", "widgets")
        .is_some());
}

#[test]
fn v1beta1_custom_resource_definition_defaults() {
    use crate::resources::custom::{ConversionReviewVersion, ConversionStrategy};
    let text = r#"
apiVersion: apiextensions.k8s.io/v1beta1
kind: CustomResourceDefinition
metadata: {name: crontabs.stable.example.com}
spec:
  group: stable.example.com
  names: {plural: crontabs, kind: CronTab}
  scope: Namespaced
  version: v1
  subresources: {status: {}}
  conversion:
    strategy: Webhook
    webhookClientConfig: {url: "https://127.0.0.1:9443/convert"}
"#;
    let snap = load_one("crd.yaml", text).unwrap();
    let crd = snap
        .custom_resources
        .get("stable.example.com", "crontabs")
        .unwrap();
    assert_eq!(crd.versions.len(), 1);
    assert!(crd.versions[0].served && crd.versions[0].status);
    let ConversionStrategy::Webhook(w) = &crd.strategy else {
        panic!("strategy Webhook")
    };
    assert_eq!(w.review_versions, ["v1beta1"]);
    assert_eq!(w.review_version, Some(ConversionReviewVersion::V1beta1));
}

#[test]
fn custom_resource_definition_problems() {
    let bad = CRD_V1
        .replace("{name: widgets.example.com}", "{name: widgets}")
        .replace("storage: false", "storage: true")
        .replace(
            "conversionReviewVersions: [v2, v1beta1, v1]",
            "conversionReviewVersions: [v2]",
        );
    assert_eq!(
        problems("crd.yaml", &bad),
        [
            "crd.yaml (document 0): CustomResourceDefinition \"widgets\": metadata.name: Invalid value: \"widgets\": must be spec.names.plural+\".\"+spec.group (\"widgets.example.com\")",
            "crd.yaml (document 0): CustomResourceDefinition \"widgets\": spec.versions: Invalid value: must have exactly one version marked as storage version",
            "crd.yaml (document 0): CustomResourceDefinition \"widgets\": spec.conversion.webhook.conversionReviewVersions: Invalid value: [\"v2\"]: must include at least one of v1, v1beta1",
        ]
    );
    let no_webhook = CRD_V1.replace("    webhook:\n      clientConfig: {service: {name: widget-conversion, namespace: system, path: /convert}}\n      conversionReviewVersions: [v2, v1beta1, v1]\n", "");
    assert_eq!(
        problems("crd.yaml", &no_webhook),
        ["crd.yaml (document 0): CustomResourceDefinition \"widgets.example.com\": spec.conversion.webhook: Required value: required when strategy is set to Webhook"]
    );
    let twice = format!("{CRD_V1}---{CRD_V1}");
    assert_eq!(
        problems("crd.yaml", &twice),
        ["crd.yaml (document 1): CustomResourceDefinition \"widgets.example.com\": spec.names.plural: Duplicate value: widgets.example.com is declared by more than one CustomResourceDefinition"]
    );
    let http = CRD_V1.replace(
        "{service: {name: widget-conversion, namespace: system, path: /convert}}",
        "{url: \"http://example.com/convert\"}",
    );
    let found = problems("crd.yaml", &http);
    assert_eq!(found.len(), 1);
    assert!(
        found[0].contains("spec.conversion.webhook.clientConfig.url: Invalid value: \"http://example.com/convert\": 'https' is required"),
        "{found:?}"
    );
}

/// Two ValidatingAdmissionPolicies of one name are refused, as a cluster refuses the second
/// create (`AlreadyExists`); a binding of a policy that is not there is only a warning.
#[test]
fn a_policy_name_twice_is_refused_and_an_unused_binding_warned() {
    let policy = "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\n\
        metadata: {name: p}\nspec:\n  matchConstraints:\n    resourceRules: [{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [pods]}]\n  \
        validations: [{expression: \"true\"}]\n";
    let twice = format!("{policy}---\n{policy}");
    assert_eq!(
        problems("p.yaml", &twice),
        ["p.yaml (document 1): ValidatingAdmissionPolicy \"p\": metadata.name: Duplicate value: \"p\": ValidatingAdmissionPolicy names are unique in a cluster (also in p.yaml)"]
    );
    let binding =
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n\
        metadata: {name: b}\nspec: {policyName: nope, validationActions: [Deny]}\n";
    let snapshot = load_one("b.yaml", binding).unwrap_or_else(|e| panic!("{e}"));
    let warnings: Vec<String> = snapshot.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        warnings,
        ["b.yaml (document 0): ValidatingAdmissionPolicyBinding \"b\": spec.policyName: Not found: \"nope\": no ValidatingAdmissionPolicy of that name is in the configuration directory: the binding is not used"]
    );
}
