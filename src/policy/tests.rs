//! Tests of the ValidatingAdmissionPolicy evaluator, ported from upstream where a file-based
//! evaluator can run the case. Upstream files are under
//! `staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/` unless said otherwise.
//!
//! Ported:
//! - e2e `test/e2e/apimachinery/validatingadmissionpolicy.go`: "should validate against a
//!   Deployment" (messageExpression `wants replicas > 1, got 1`, `namespaceObject.metadata.name`),
//!   "should allow expressions to refer variables" (variables referring to variables), the
//!   replicas limit with a ConfigMap parameter.
//! - `validating/admission_test.go`: `TestBasicPolicyDefinitionFailure` (the denial's wording,
//!   reason Invalid, 422), `TestDefinitionDoesntMatch`, `TestNativeTypeParam` (ConfigMap
//!   params), `TestParamRef` (name, selector, namespaced params defaulting to the request's
//!   namespace, parameterNotFoundAction Deny/Allow, several params evaluated each),
//!   `TestNamespaceParamRefClusterScopedParamError`, `TestAuditValidationAction`,
//!   `TestWarnValidationAction`, `TestAllValidationActions`, `TestAuditAnnotations` (distinct
//!   values of several params joined), `TestMatchConditions` (false skips, errors by
//!   failurePolicy), `TestAuthorizationCheck`-style `authorizer` use.
//! - `validating/validator_test.go`: failure policy on runtime errors (Fail denies, Ignore
//!   admits), messageExpression (used, trimmed, multi-line and over-long falling back to
//!   `message`, non-string falling back, `failed expression: ...` without a message),
//!   reasons and their codes, auditAnnotations (string, null excluded, non-string an error),
//!   the per-call cost limit and the runtime cost budget.
//! - `generic/policy_matcher_test.go` / `matching/matching_test.go`: namespaceSelector (and the
//!   held-back namespace-not-found error), objectSelector on object or oldObject,
//!   excludeResourceRules, resourceNames, matchPolicy Equivalent vs Exact (through the HPA
//!   autoscaling/v2 → v1 equivalence and conversion), binding matchResources.
//! - `pkg/apis/admissionregistration/validation/validation_test.go`: a sample of
//!   `TestValidateValidatingAdmissionPolicy` / `...Binding` messages.
//!
//! Not applicable to a file-based evaluator: the controller and informer tests
//! (`TestPluginNotReady`, `TestReconfigureBinding`, `TestRemoveDefinition`,
//! `TestRemoveBinding`, `TestEmptyParamSource`, the param informer's sync waits and the direct
//! API fallback of `CollectParams`), status/type-checking warnings (`typechecking_test.go`,
//! e2e "should type check ..."), CRD parameter kinds served by the cluster
//! (`TestInvalidParamSourceGVK`: the proxy cannot tell an unknown kind from one without
//! objects), metrics, and the e2e API operations tests.

use std::collections::BTreeMap;

use serde_json::{json, Value as Json};

use super::*;
use crate::matching::authz::Decision;

fn policy_with(name: &str, spec: Json) -> Json {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name}, "spec": spec})
}

fn binding(name: &str, policy: &str, spec: Json) -> Json {
    let mut spec = spec;
    spec["policyName"] = json!(policy);
    if spec.get("validationActions").is_none() {
        spec["validationActions"] = json!(["Deny"]);
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name}, "spec": spec})
}

fn deployments() -> Json {
    json!({"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
        "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]})
}

fn compile(policy: &Json, bindings: &[Json], params: &[Json]) -> Policy {
    Policy::compile(policy, bindings, params).unwrap_or_else(|e| {
        panic!(
            "{}",
            e.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        )
    })
}

fn compile_errors(policy: &Json, bindings: &[Json]) -> Vec<String> {
    Policy::compile(policy, bindings, &[])
        .expect_err("should not compile")
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// The policy's verdict, every authorization check answered `allowed`.
fn verdict(policy: &Policy, body: &str, namespaces: Option<&Namespaces>) -> PolicyVerdict {
    let review = ParsedReview::parse(body.as_bytes()).unwrap();
    let mut decisions = Decisions::default();
    for _ in 0..8 {
        match policy.evaluate(&review, namespaces, &mut decisions) {
            Authorized::Done(verdict) => return verdict,
            Authorized::Pending(keys) => {
                for key in keys {
                    decisions.insert(
                        key,
                        Decision {
                            allowed: true,
                            ..Decision::default()
                        },
                    );
                }
            }
        }
    }
    panic!("authorization checks still pending")
}

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/admission-reviews/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(path).unwrap()
}

/// A review of `apps/v1` Deployment `web` in `namespace` with `replicas` and `labels`.
fn deployment(namespace: &str, replicas: i64, labels: Json) -> String {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
        "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
        "name": "web", "namespace": namespace, "operation": "CREATE",
        "userInfo": {"username": "jane"},
        "object": {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": namespace, "labels": labels},
            "spec": {"replicas": replicas}}}})
    .to_string()
}

fn namespaces(yaml: &str) -> Namespaces {
    Namespaces::parse(yaml).unwrap()
}

fn denial(v: &PolicyVerdict) -> &Denial {
    assert_eq!(v.decision, PolicyDecision::Denied, "{v:#?}");
    v.denial.as_ref().unwrap()
}

/// e2e "should validate against a Deployment", on a recorded AdmissionReview.
#[test]
fn e2e_deployment_message_expression_and_namespace_object() {
    let policy = policy_with(
        "replicas.example.com",
        json!({"matchConstraints": deployments(), "validations": [
            {"expression": "object.spec.replicas > 1",
             "messageExpression": "'wants replicas > 1, got ' + string(object.spec.replicas)"},
            {"expression": "namespaceObject.metadata.name == 'guestbook'",
             "message": "Internal error! Other namespace should not be allowed."}]}),
    );
    let policy = compile(
        &policy,
        &[binding("b", "replicas.example.com", json!({}))],
        &[],
    );
    let known = namespaces("kind: Namespace\nmetadata: {name: guestbook}\n");
    let v = verdict(
        &policy,
        &fixture("0064-create-apps-v1-deployments-v1.json"),
        Some(&known),
    );
    let d = denial(&v);
    assert_eq!(
        d.message,
        "deployments.apps \"redis-master\" is forbidden: ValidatingAdmissionPolicy \
         'replicas.example.com' with binding 'b' denied request: wants replicas > 1, got 1"
    );
    assert_eq!((d.code, d.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        d.validation,
        Some((0, "object.spec.replicas > 1".to_string()))
    );
    let BindingResult::Evaluated(params) = &v.bindings[0].result else {
        panic!("{v:#?}")
    };
    // The namespace check passed: only the replicas validation denied.
    assert_eq!(params[0].decisions[1].evaluation, Evaluation::Admit);
    // Without the namespace's labels, a policy reading namespaceObject cannot decide.
    let v = verdict(
        &policy,
        &fixture("0064-create-apps-v1-deployments-v1.json"),
        None,
    );
    assert!(matches!(v.decision, PolicyDecision::Undecided(_)), "{v:?}");
}

/// `namespaceObject` is the namespace as `CreateNamespaceObject` copies it
/// (`staging/src/k8s.io/apiserver/pkg/admission/plugin/cel/condition.go`): metadata with
/// annotations, spec and status (the fields `BuildNamespaceType` declares; what it leaves out
/// is `matching::namespaces`' test). The namespace is as `kubectl get namespace -o yaml`
/// prints it (kube-apiserver 1.32.0).
#[test]
fn namespace_object_is_the_whole_namespace() {
    let policy = policy_with(
        "ns",
        json!({"matchConstraints": deployments(), "validations": [{"expression":
            "namespaceObject.status.phase == 'Active' \
             && namespaceObject.spec.finalizers == ['kubernetes'] \
             && namespaceObject.metadata.annotations.owner == 'team-a' \
             && namespaceObject.metadata.labels['kubernetes.io/metadata.name'] == 'a' \
             && namespaceObject.metadata.resourceVersion == '201'"}]}),
    );
    let policy = compile(&policy, &[binding("b", "ns", json!({}))], &[]);
    let known = namespaces(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  annotations: {owner: team-a}\n  \
         creationTimestamp: \"2026-11-28T10:00:00Z\"\n  labels: {kubernetes.io/metadata.name: a}\n  \
         managedFields:\n  - {manager: kubectl-create, operation: Update}\n  name: a\n  \
         resourceVersion: \"201\"\n  uid: e5b6\nspec:\n  finalizers: [kubernetes]\n\
         status: {phase: Active}\n",
    );
    let v = verdict(&policy, &deployment("a", 1, json!({})), Some(&known));
    assert_eq!(v.decision, PolicyDecision::Allowed, "{v:#?}");
}

/// e2e "should allow expressions to refer variables".
#[test]
fn e2e_variables() {
    let policy = policy_with(
        "vars",
        json!({"matchConstraints": deployments(),
            "variables": [{"name": "replicas", "expression": "object.spec.replicas"},
                          {"name": "oddReplicas", "expression": "variables.replicas % 2 == 1"}],
            "validations": [{"expression": "variables.replicas > 1", "message": "must have at least 2 replicas"},
                            {"expression": "variables.oddReplicas", "message": "must have an odd number of replicas"}]}),
    );
    let policy = compile(&policy, &[binding("b", "vars", json!({}))], &[]);
    assert_eq!(
        verdict(&policy, &deployment("ns", 3, json!({})), None).decision,
        PolicyDecision::Allowed
    );
    let v = verdict(&policy, &deployment("ns", 4, json!({})), None);
    assert!(denial(&v)
        .cause
        .ends_with("denied request: must have an odd number of replicas"));
    let v = verdict(&policy, &deployment("ns", 1, json!({})), None);
    assert!(denial(&v)
        .cause
        .ends_with("denied request: must have at least 2 replicas"));
}

/// A variable that fails to evaluate fails the expressions that read it, with its error.
#[test]
fn failing_variable_reports_its_error() {
    let policy = policy_with(
        "vars",
        json!({"matchConstraints": deployments(),
            "variables": [{"name": "missing", "expression": "object.spec.nope"}],
            "validations": [{"expression": "false || variables.missing == 1"},
                            {"expression": "true || variables.missing == 1"}]}),
    );
    let policy = compile(&policy, &[binding("b", "vars", json!({}))], &[]);
    let v = verdict(&policy, &deployment("ns", 3, json!({})), None);
    let d = denial(&v);
    assert!(
        d.cause.contains(
            "expression 'false || variables.missing == 1' resulted in error: composited variable \"missing\" fails to evaluate: "
        ),
        "{d:?}"
    );
    let BindingResult::Evaluated(params) = &v.bindings[0].result else {
        panic!()
    };
    // Short-circuited: the failed variable is never read.
    assert_eq!(params[0].decisions[1].evaluation, Evaluation::Admit);
}

fn replicas_policy() -> Json {
    policy_with(
        "replicas",
        json!({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": deployments(),
            "validations": [{"expression": "object.spec.replicas <= int(params.data.max)",
                "messageExpression": "'replicas must be at most ' + params.data.max",
                "reason": "Forbidden"}]}),
    )
}

fn config_map(namespace: &str, name: &str, max: &str, labels: Json) -> Json {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels}, "data": {"max": max}})
}

/// `TestNativeTypeParam` / the e2e replicas limit: a ConfigMap named by the binding, in the
/// request's namespace when the paramRef names none.
#[test]
fn params_by_name_default_to_the_request_namespace() {
    let b = binding(
        "limit",
        "replicas",
        json!({"paramRef": {"name": "limits", "parameterNotFoundAction": "Deny"}}),
    );
    let params = [
        config_map("a", "limits", "3", json!({})),
        config_map("b", "limits", "10", json!({})),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "limits", "namespace": "a"}}),
    ];
    let policy = compile(&replicas_policy(), &[b], &params);
    let v = verdict(&policy, &deployment("a", 5, json!({})), None);
    let d = denial(&v);
    assert_eq!((d.code, d.reason.as_str()), (403, "Forbidden"));
    assert!(d
        .cause
        .ends_with("denied request: replicas must be at most 3"));
    assert_eq!(
        verdict(&policy, &deployment("b", 5, json!({})), None).decision,
        PolicyDecision::Allowed
    );
    // No ConfigMap in namespace c: Deny.
    let v = verdict(&policy, &deployment("c", 5, json!({})), None);
    assert_eq!(
        denial(&v).cause,
        "ValidatingAdmissionPolicy 'replicas' with binding 'limit' denied request: failed to \
         configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
    );
    assert_eq!(denial(&v).code, 422);
}

/// A binding without `paramRef` on a policy with a `paramKind`: `params` is null, and a field
/// of it is cel-go's `no such key` while `has()` of it is false (`refQualify` in
/// `interpreter/attributes.go`, without `errorOnBadPresenceTest`), the guard the
/// ValidatingAdmissionPolicy documentation gives for an optional `paramRef`.
#[test]
fn a_field_of_null_params_is_no_such_key_and_has_is_false() {
    let guarded = policy_with(
        "replicas",
        json!({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": deployments(),
            "validations": [{"expression":
                "!has(params.data) || object.spec.replicas <= int(params.data.max)"}]}),
    );
    let policy = compile(&guarded, &[binding("b", "replicas", json!({}))], &[]);
    assert_eq!(
        verdict(&policy, &deployment("a", 50, json!({})), None).decision,
        PolicyDecision::Allowed
    );
    let policy = compile(
        &replicas_policy(),
        &[binding("b", "replicas", json!({}))],
        &[],
    );
    let v = verdict(&policy, &deployment("a", 5, json!({})), None);
    assert_eq!(
        denial(&v).cause,
        "ValidatingAdmissionPolicy 'replicas' with binding 'b' denied request: expression \
         'object.spec.replicas <= int(params.data.max)' resulted in error: no such key: data"
    );
}

/// `TestParamRef`: parameterNotFoundAction Allow, selectors (each param evaluated), an
/// explicit namespace, a namespaced paramRef on a cluster-scoped request.
#[test]
fn param_ref_selector_allow_and_scope() {
    let params = [
        config_map("a", "one", "10", json!({"team": "x"})),
        config_map("a", "two", "2", json!({"team": "x"})),
        config_map("a", "three", "1", json!({"team": "y"})),
    ];
    let selector = binding(
        "sel",
        "replicas",
        json!({"paramRef": {"selector": {"matchLabels": {"team": "x"}}, "namespace": "a",
            "parameterNotFoundAction": "Allow"}}),
    );
    let policy = compile(&replicas_policy(), &[selector], &params);
    let v = verdict(&policy, &deployment("elsewhere", 5, json!({})), None);
    assert!(denial(&v).cause.ends_with("replicas must be at most 2"));
    let BindingResult::Evaluated(outcomes) = &v.bindings[0].result else {
        panic!()
    };
    let names: Vec<_> = outcomes.iter().map(|o| o.param.clone().unwrap()).collect();
    assert_eq!(names, ["a/one", "a/two"]);

    let allow = binding(
        "allow",
        "replicas",
        json!({"paramRef": {"name": "absent", "parameterNotFoundAction": "Allow"}}),
    );
    let policy = compile(&replicas_policy(), &[allow], &params);
    let v = verdict(&policy, &deployment("a", 50, json!({})), None);
    assert_eq!(v.decision, PolicyDecision::NotApplicable);
    assert_eq!(v.bindings[0].result, BindingResult::Evaluated(Vec::new()));

    // A cluster-scoped request has no namespace to default to.
    let mut nodes = replicas_policy();
    nodes["spec"]["matchConstraints"] = json!({"resourceRules": [{"apiGroups": [""],
        "apiVersions": ["v1"], "operations": ["*"], "resources": ["nodes"]}]});
    let by_name = binding(
        "n",
        "replicas",
        json!({"paramRef": {"name": "one", "parameterNotFoundAction": "Deny"}}),
    );
    let policy = compile(&nodes, &[by_name], &params);
    let node = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "kind": {"group": "", "version": "v1", "kind": "Node"},
        "resource": {"group": "", "version": "v1", "resource": "nodes"},
        "name": "n1", "operation": "CREATE", "object": {"metadata": {"name": "n1"}}}});
    let v = verdict(&policy, &node.to_string(), None);
    assert!(denial(&v).cause.ends_with(
        "failed to configure binding: cannot use namespaced paramRef in policy binding that matches cluster-scoped resources"
    ));
}

/// A cluster-scoped paramKind refuses a paramRef namespace (`CollectParams`).
#[test]
fn cluster_scoped_param_kind_refuses_a_namespace() {
    let mut p = replicas_policy();
    p["spec"]["paramKind"] = json!({"apiVersion": "example.com/v1", "kind": "Limit"});
    p["spec"]["validations"][0]["expression"] = json!("object.spec.replicas <= params.max");
    p["spec"]["validations"][0]["messageExpression"] = json!("'at most ' + string(params.max)");
    let limit = json!({"apiVersion": "example.com/v1", "kind": "Limit", "metadata": {"name": "l"}, "max": 2});
    let good = binding(
        "good",
        "replicas",
        json!({"paramRef": {"name": "l", "parameterNotFoundAction": "Deny"}}),
    );
    let bad = binding(
        "bad",
        "replicas",
        json!({"paramRef": {"name": "l", "namespace": "x", "parameterNotFoundAction": "Deny"}}),
    );
    let policy = compile(&p, &[good, bad], std::slice::from_ref(&limit));
    let v = verdict(&policy, &deployment("a", 5, json!({})), None);
    assert_eq!(
        denial(&v).cause,
        "ValidatingAdmissionPolicy 'replicas' with binding 'good' denied request: at most 2"
    );
    assert_eq!(
        v.bindings[1].result,
        BindingResult::ConfigurationError(
            "paramRef.namespace must not be provided for a cluster-scoped `paramKind`".into()
        )
    );
}

fn failing_policy(failure_policy: &str, extra: Json) -> Json {
    let mut spec = json!({"failurePolicy": failure_policy, "matchConstraints": deployments(),
        "validations": [{"expression": "object.spec.replicas > 10", "message": "too few replicas"}]});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    policy_with("p", spec)
}

/// `TestWarnValidationAction`, `TestAuditValidationAction`, `TestAllValidationActions`.
#[test]
fn validation_actions_warn_and_audit() {
    let policy = compile(
        &failing_policy("Fail", json!({})),
        &[binding(
            "b",
            "p",
            json!({"validationActions": ["Warn", "Audit"]}),
        )],
        &[],
    );
    let v = verdict(&policy, &deployment("a", 1, json!({})), None);
    assert_eq!(v.decision, PolicyDecision::Allowed);
    assert_eq!(
        v.warnings,
        ["Validation failed for ValidatingAdmissionPolicy 'p' with binding 'b': too few replicas"]
    );
    assert_eq!(
        v.audit_annotations[VALIDATION_FAILURE_ANNOTATION],
        r#"[{"message":"too few replicas","policy":"p","binding":"b","expressionIndex":0,"validationActions":["Warn","Audit"]}]"#
    );
    let policy = compile(
        &failing_policy("Fail", json!({})),
        &[binding(
            "b",
            "p",
            json!({"validationActions": ["Deny", "Audit"]}),
        )],
        &[],
    );
    let v = verdict(&policy, &deployment("a", 1, json!({})), None);
    assert!(denial(&v).cause.ends_with("too few replicas"));
    assert!(v.warnings.is_empty());
    assert!(v
        .audit_annotations
        .contains_key(VALIDATION_FAILURE_ANNOTATION));
}

/// validator_test "test failure policy with multiple validations": a runtime error denies
/// under Fail and admits under Ignore; either way it is reported.
#[test]
fn failure_policy_on_runtime_errors() {
    let extra = json!({"validations": [{"expression": "object.spec.missing > 1"}]});
    let fail = compile(
        &failing_policy("Fail", extra.clone()),
        &[binding("b", "p", json!({}))],
        &[],
    );
    let v = verdict(&fail, &deployment("a", 1, json!({})), None);
    let d = denial(&v);
    assert!(
        d.cause.starts_with(
            "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: expression 'object.spec.missing > 1' resulted in error: "
        ),
        "{d:?}"
    );
    assert_eq!(d.code, 422);
    let ignore = compile(
        &failing_policy("Ignore", extra),
        &[binding("b", "p", json!({"validationActions": ["Warn"]}))],
        &[],
    );
    let v = verdict(&ignore, &deployment("a", 1, json!({})), None);
    assert_eq!(v.decision, PolicyDecision::Allowed);
    assert!(v.warnings.is_empty(), "Ignore admits: no Warn");
    assert!(v.errors[0].ignored);
}

/// `TestMatchConditions`: false skips; an error denies under Fail and skips under Ignore.
#[test]
fn match_conditions() {
    let conditions = |expr: &str| {
        json!({"matchConditions": [{"name": "first", "expression": "true"},
                                   {"name": "second", "expression": expr}]})
    };
    let run = |fp: &str, expr: &str| {
        let policy = compile(
            &failing_policy(fp, conditions(expr)),
            &[binding("b", "p", json!({}))],
            &[],
        );
        verdict(&policy, &deployment("a", 1, json!({})), None)
    };
    assert_eq!(
        run("Fail", "object.metadata.name != 'web'").decision,
        PolicyDecision::NotApplicable
    );
    assert!(denial(&run("Fail", "object.metadata.name == 'web'"))
        .cause
        .ends_with("too few replicas"));
    let v = run("Fail", "object.nope == 'x'");
    assert!(denial(&v)
        .cause
        .contains("denied request: expression 'object.nope == 'x'' resulted in error: "));
    assert_eq!(
        run("Ignore", "object.nope == 'x'").decision,
        PolicyDecision::NotApplicable
    );
}

/// namespaceSelector, objectSelector (object or oldObject), excludeResourceRules,
/// resourceNames (`matching_test.go`).
#[test]
fn match_constraints_selectors_and_rules() {
    let constraints = json!({
        "namespaceSelector": {"matchLabels": {"env": "prod"}},
        "objectSelector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["web"]}]},
        "resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"],
            "resources": ["deployments"], "resourceNames": ["web", "api"]}],
        "excludeResourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"],
            "resources": ["*"], "resourceNames": ["api"]}]});
    let policy = compile(
        &failing_policy("Fail", json!({"matchConstraints": constraints})),
        &[binding("b", "p", json!({}))],
        &[],
    );
    let ns = namespaces(
        "kind: NamespaceList\nitems:\n- metadata: {name: prod, labels: {env: prod}}\n- metadata: {name: dev, labels: {env: dev}}\n",
    );
    let web = json!({"tier": "web"});
    let run = |body: &str| verdict(&policy, body, Some(&ns)).decision;
    assert_eq!(
        run(&deployment("prod", 1, web.clone())),
        PolicyDecision::Denied
    );
    assert_eq!(
        run(&deployment("dev", 1, web.clone())),
        PolicyDecision::NotApplicable
    );
    assert_eq!(
        run(&deployment("prod", 1, json!({"tier": "db"}))),
        PolicyDecision::NotApplicable
    );
    let api = deployment("prod", 1, web.clone()).replace("\"web\"", "\"api\"");
    assert_eq!(run(&api), PolicyDecision::NotApplicable, "excluded by name");
    let other = deployment("prod", 1, web.clone()).replace("\"name\":\"web\"", "\"name\":\"x\"");
    assert_eq!(
        run(&other),
        PolicyDecision::NotApplicable,
        "not a listed name"
    );
    // A namespace that does not exist: the selector's 404 held back until a rule matches,
    // then a policy configuration error under failurePolicy Fail.
    let v = verdict(&policy, &deployment("gone", 1, web), Some(&ns));
    assert_eq!(
        denial(&v).cause,
        "ValidatingAdmissionPolicy 'p' denied request: failed to configure policy: namespaces \"gone\" not found"
    );
}

/// Binding matchResources narrow the policy's (`BindingMatches`).
#[test]
fn binding_match_resources() {
    let narrow = binding(
        "narrow",
        "p",
        json!({"matchResources": {"objectSelector": {"matchLabels": {"app": "x"}}}}),
    );
    let all = binding("all", "p", json!({"validationActions": ["Warn"]}));
    let policy = compile(&failing_policy("Fail", json!({})), &[narrow, all], &[]);
    let v = verdict(&policy, &deployment("a", 1, json!({"app": "y"})), None);
    assert_eq!(v.decision, PolicyDecision::Allowed);
    assert_eq!(v.bindings[0].result, BindingResult::NotMatched);
    assert_eq!(v.warnings.len(), 1);
    let v = verdict(&policy, &deployment("a", 1, json!({"app": "x"})), None);
    assert_eq!(denial(&v).binding.as_deref(), Some("narrow"));
}

/// matchPolicy Equivalent matches an autoscaling/v2 request through autoscaling/v1 and
/// converts it; Exact does not match it (`matchesResourceRules`).
#[test]
fn match_policy_equivalent_converts() {
    let spec = |policy: &str| {
        json!({"matchConstraints": {"matchPolicy": policy, "resourceRules": [{"apiGroups": ["autoscaling"],
            "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["horizontalpodautoscalers"]}]},
            "validations": [{"expression": "object.apiVersion != 'autoscaling/v1'",
                "messageExpression": "request.kind.version + ' from ' + request.requestKind.version"}]})
    };
    let name = std::fs::read_dir(format!(
        "{}/tests/fixtures/admission-reviews",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
    .filter_map(|e| e.ok()?.file_name().into_string().ok())
    .filter(|n| n.ends_with("create-autoscaling-v2-horizontalpodautoscalers-v1.json"))
    .min()
    .unwrap();
    let body = fixture(&name);
    let equivalent = compile(
        &policy_with("p", spec("Equivalent")),
        &[binding("b", "p", json!({}))],
        &[],
    );
    let v = verdict(&equivalent, &body, None);
    assert!(
        denial(&v).cause.ends_with("denied request: v1 from v2"),
        "{v:?}"
    );
    let exact = compile(
        &policy_with("p", spec("Exact")),
        &[binding("b", "p", json!({}))],
        &[],
    );
    assert_eq!(
        verdict(&exact, &body, None).decision,
        PolicyDecision::NotApplicable
    );
}

/// validator_test messageExpression cases and reasons.
#[test]
fn message_expression_fallbacks_and_reasons() {
    let run = |validation: Json| {
        let policy = compile(
            &failing_policy("Fail", json!({"validations": [validation]})),
            &[binding("b", "p", json!({}))],
            &[],
        );
        denial(&verdict(&policy, &deployment("a", 1, json!({})), None)).clone()
    };
    let cause = |d: Denial| {
        d.cause
            .rsplit("denied request: ")
            .next()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        cause(run(
            json!({"expression": "false", "messageExpression": "'  trimmed  '"})
        )),
        "trimmed"
    );
    assert_eq!(
        cause(run(
            json!({"expression": "false", "message": "fallback", "messageExpression": "'a\\nb'"})
        )),
        "fallback"
    );
    let long = format!("'{}'", "x".repeat(5 * 1024 + 1));
    assert_eq!(
        cause(run(
            json!({"expression": "false", "message": "fallback", "messageExpression": long})
        )),
        "fallback"
    );
    assert_eq!(
        cause(run(
            json!({"expression": "false", "message": "fallback", "messageExpression": "string(object.nope)"})
        )),
        "fallback"
    );
    assert_eq!(
        cause(run(json!({"expression": "  1 > 2  "}))),
        "failed expression: 1 > 2"
    );
    for (reason, code) in [
        ("Forbidden", 403),
        ("RequestEntityTooLarge", 413),
        ("Invalid", 422),
    ] {
        let d = run(json!({"expression": "false", "reason": reason}));
        assert_eq!((d.reason.as_str(), d.code), (reason, code));
    }
}

/// `TestAuditAnnotations`: values published under `<policy>/<key>`, distinct values of
/// several params joined; null excluded; a non-string value denies.
#[test]
fn audit_annotations() {
    let mut p = replicas_policy();
    p["spec"]["validations"] = json!([]);
    p["spec"]["auditAnnotations"] = json!([
        {"key": "max", "valueExpression": "'max ' + params.data.max"},
        {"key": "none", "valueExpression": "null"}]);
    let b = binding(
        "b",
        "replicas",
        json!({"paramRef": {"selector": {}, "parameterNotFoundAction": "Deny"}}),
    );
    let params = [
        config_map("a", "one", "3", json!({})),
        config_map("a", "two", "3", json!({})),
        config_map("a", "three", "4", json!({})),
    ];
    let policy = compile(&p, std::slice::from_ref(&b), &params);
    let v = verdict(&policy, &deployment("a", 1, json!({})), None);
    assert_eq!(v.decision, PolicyDecision::Allowed);
    assert_eq!(
        v.audit_annotations,
        BTreeMap::from([("replicas/max".to_string(), "max 3, max 4".to_string())])
    );
    // kube-apiserver refuses a `dyn` value at create (`object.spec.replicas`, as `check`
    // does); the run-time check stays for what this checker cannot type (the semver library's
    // results).
    let refused = json!([{"key": "n", "valueExpression": "object.spec.replicas"}]);
    p["spec"]["auditAnnotations"] = refused;
    assert_eq!(
        compile_errors(&p, &[]),
        ["spec.auditAnnotations[0].valueExpression: Invalid value: \"object.spec.replicas\": must evaluate to one of [string null_type] but got dyn"]
    );
    let untyped = "semver('1.2.3').major()";
    p["spec"]["auditAnnotations"] = json!([{"key": "n", "valueExpression": untyped}]);
    let policy = compile(&p, &[b], &params);
    let v = verdict(&policy, &deployment("a", 1, json!({})), None);
    assert!(denial(&v).cause.contains(&format!(
        "valueExpression '{untyped}' resulted in unsupported return type: "
    )));
}

/// `authorizer` checks are resolved in rounds; the per-call limit (three checks cost more
/// than `PerCallLimit`) and the runtime budget (fifteen two-check validations cost more than
/// `RuntimeCELCostBudget`) apply.
#[test]
fn authorizer_and_cost_limits() {
    let check =
        |verb: &str| format!("authorizer.group('').resource('pods').check('{verb}').allowed()");
    let two = format!("{} && {}", check("get"), check("list"));
    let three = format!("{two} && {}", check("watch"));
    let run = |validations: Vec<Json>| {
        let policy = compile(
            &failing_policy("Fail", json!({"validations": validations})),
            &[binding("b", "p", json!({}))],
            &[],
        );
        verdict(&policy, &deployment("a", 1, json!({})), None)
    };
    assert_eq!(
        run(vec![json!({"expression": two.clone()})]).decision,
        PolicyDecision::Allowed
    );
    let v = run(vec![json!({"expression": three.clone()})]);
    assert!(denial(&v)
        .cause
        .ends_with("resulted in error: operation cancelled: actual cost limit exceeded"));
    let v = run(vec![json!({"expression": two.clone()}); 14]);
    assert_eq!(v.decision, PolicyDecision::Allowed);
    let v = run(vec![json!({"expression": two}); 15]);
    assert!(denial(&v).cause.ends_with(
        "denied request: validation failed due to running out of cost budget, no further validation rules will be run"
    ));
}

/// Policies' own resources, and the authentication and authorization reviews, are exempt
/// from every policy, a catch-all one included (`shouldIgnoreResource`; the reviews from
/// `exclusion.Excluded()`): a SubjectAccessReview or a TokenReview a catch-all policy denied
/// was denied by the proxy's candidate where kube-apiserver never evaluates the policy.
#[test]
fn policy_resources_are_exempt() {
    let mut p = failing_policy("Fail", json!({}));
    p["spec"]["matchConstraints"]["resourceRules"] = json!([{"apiGroups": ["*"],
        "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}]);
    p["spec"]["validations"] = json!([{"expression": "false"}]);
    let policy = compile(&p, &[binding("b", "p", json!({}))], &[]);
    let body = deployment("a", 1, json!({}))
        .replace("\"deployments\"", "\"validatingadmissionpolicybindings\"")
        .replace("\"apps\"", "\"admissionregistration.k8s.io\"");
    assert_eq!(
        verdict(&policy, &body, None).decision,
        PolicyDecision::NotApplicable
    );
    for (group, resource) in [
        ("authorization.k8s.io", "subjectaccessreviews"),
        ("authorization.k8s.io", "selfsubjectaccessreviews"),
        ("authorization.k8s.io", "localsubjectaccessreviews"),
        ("authorization.k8s.io", "selfsubjectrulesreviews"),
        ("authentication.k8s.io", "tokenreviews"),
        ("authentication.k8s.io", "selfsubjectreviews"),
    ] {
        let body = deployment("a", 1, json!({}))
            .replace("\"deployments\"", &format!("\"{resource}\""))
            .replace("\"apps\"", &format!("\"{group}\""));
        assert_eq!(
            verdict(&policy, &body, None).decision,
            PolicyDecision::NotApplicable,
            "{group} {resource}"
        );
    }
    assert_eq!(
        verdict(&policy, &deployment("a", 1, json!({})), None).decision,
        PolicyDecision::Denied
    );
}

/// CEL compile errors at their fields, as the CEL compiler words them.
#[test]
fn compile_errors_cel() {
    let with = |validations: Json| failing_policy("Fail", json!({"validations": validations}));
    let errors = compile_errors(&with(json!([{"expression": "object."}])), &[]);
    assert!(
        errors[0].starts_with(
            "spec.validations[0].expression: Invalid value: \"object.\": compilation failed: "
        ),
        "{errors:?}"
    );
    let errors = compile_errors(&with(json!([{"expression": "params.x == 1"}])), &[]);
    assert!(
        errors[0].contains("undeclared reference to 'params' (in container '')"),
        "{errors:?}"
    );
    let errors = compile_errors(
        &with(
            json!([{"expression": "true", "messageExpression": "string(authorizer.path('/').check('get').allowed())"}]),
        ),
        &[],
    );
    assert!(
        errors[0].starts_with("spec.validations[0].messageExpression: Invalid value: "),
        "{errors:?}"
    );
    let errors = compile_errors(
        &with(json!([{"expression": "true", "messageExpression": "1 + 1"}])),
        &[],
    );
    assert!(
        errors[0].ends_with("must evaluate to string but got int"),
        "{errors:?}"
    );
    let errors = compile_errors(
        &failing_policy(
            "Fail",
            json!({"variables": [{"name": "a", "expression": "variables.b"},
            {"name": "b", "expression": "1"}]}),
        ),
        &[],
    );
    assert!(
        errors[0].ends_with(
            "compilation failed: ERROR: <input>:1:10: undefined field 'b'\n | variables.b\n | .........^"
        ),
        "{errors:?}"
    );
    let errors = compile_errors(
        &failing_policy(
            "Fail",
            json!({"variables": [{"name": "a", "expression": "1"}],
            "matchConditions": [{"name": "m", "expression": "variables.a == 1"}]}),
        ),
        &[],
    );
    assert!(
        errors[0].starts_with("spec.matchConditions[0].expression"),
        "{errors:?}"
    );
}

/// Structural errors as `ValidateValidatingAdmissionPolicy` and `...Binding` word them.
#[test]
fn compile_errors_structure() {
    let with = |validations: Json| failing_policy("Fail", json!({"validations": validations}));
    let errors = compile_errors(
        &with(json!([{"expression": "true", "reason": "Teapot", "message": "a\nb"}])),
        &[],
    );
    assert_eq!(
        errors,
        [
            "spec.validations[0].message: Invalid value: \"a\\nb\": message must not contain line breaks",
            "spec.validations[0].reason: Unsupported value: \"Teapot\": supported values: \"Forbidden\", \"Invalid\", \"RequestEntityTooLarge\"",
        ]
    );
    let errors = compile_errors(
        &failing_policy("Fail", json!({"matchConstraints": {}})),
        &[binding(
            "b",
            "p",
            json!({"validationActions": ["Deny", "Warn"],
            "paramRef": {"name": "x"}}),
        )],
    );
    assert_eq!(
        errors,
        [
            "spec.matchConstraints.resourceRules: Required value",
            "bindings[0].spec.paramRef.parameterNotFoundAction: Required value",
            "bindings[0].spec.validationActions: Invalid value: []admissionregistration.ValidationAction{\"Deny\", \"Warn\"}: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        ]
    );
}

#[test]
fn param_kind_of() {
    assert_eq!(
        Policy::param_kind_of(&replicas_policy()),
        Some(("v1".to_string(), "ConfigMap".to_string()))
    );
    assert_eq!(
        Policy::param_kind_of(&failing_policy("Fail", json!({}))),
        None
    );
}

/// validator_test "test Object null in delete", on a recorded DELETE.
#[test]
fn delete_has_null_object() {
    let p = policy_with(
        "p",
        json!({"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["DELETE"], "resources": ["secrets"]}]},
            "validations": [{"expression": "object == null && oldObject != null && request.operation == 'DELETE'"},
                            {"expression": "false", "message": "deletes are audited"}]}),
    );
    let policy = compile(
        &p,
        &[binding("b", "p", json!({"validationActions": ["Audit"]}))],
        &[],
    );
    let v = verdict(
        &policy,
        &fixture("0705-delete-core-v1-secrets-v1.json"),
        None,
    );
    assert_eq!(v.decision, PolicyDecision::Allowed);
    let BindingResult::Evaluated(outcomes) = &v.bindings[0].result else {
        panic!("{v:?}")
    };
    assert_eq!(outcomes[0].decisions[0].evaluation, Evaluation::Admit);
    assert!(v.audit_annotations[VALIDATION_FAILURE_ANNOTATION].contains(
        r#""message":"deletes are audited","policy":"p","binding":"b","expressionIndex":1"#
    ));
}

/// A Namespace is matched by namespaceSelector on its own labels and sees a null
/// `namespaceObject` (`Dispatch` unsets the namespace of a v1 Namespace).
#[test]
fn namespace_requests_use_their_own_labels() {
    let p = policy_with(
        "p",
        json!({"matchConstraints": {"namespaceSelector": {"matchLabels": {"env": "dev"}},
            "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["UPDATE"], "resources": ["namespaces"]}]},
            "validations": [{"expression": "namespaceObject == null && has(object.metadata.labels.team)",
                "message": "namespaces need a team"}]}),
    );
    let policy = compile(&p, &[binding("b", "p", json!({}))], &[]);
    let v = verdict(
        &policy,
        &fixture("0561-update-core-v1-namespaces-v1.json"),
        None,
    );
    assert_eq!(v.decision, PolicyDecision::Allowed, "{v:?}");
    let v = verdict(
        &policy,
        &fixture("0564-update-core-v1-namespaces-v1.json"),
        None,
    );
    assert!(denial(&v).cause.ends_with("namespaces need a team"));
    let v = verdict(
        &policy,
        &fixture("0567-update-core-v1-namespaces-v1.json"),
        None,
    );
    assert_eq!(v.decision, PolicyDecision::NotApplicable);
}

/// The type checker against kube-apiserver 1.32.0's: the Kubernetes libraries' overloads,
/// variables typed by their expressions, `map` and `filter` results, the authorizer's types.
/// Each line of `tests/fixtures/cel-checker/kube-apiserver-1.32.0.jsonl` is compiled as a
/// validation after its variables; the text must be kube-apiserver's, but for the expressions
/// listed here, where this build's environment is deliberately newer or the checker knows less.
#[test]
fn type_checks_as_kube_apiserver_1_32() {
    use super::cel::{compile, Declarations, Expression, Returns};
    // The lists library at version 3 (`slice`, `flatten`, `sort`, `distinct`, `reverse`,
    // `lists.range`: kube-apiserver 1.34), which this environment has and `check` warns about
    // for an older --kube-version.
    let newer_or_unchecked = [
        "[1].slice(0, 1) == [1]",
        "[[1]].flatten() == [1]",
        "lists.range(3) == [0,1,2]",
        "[1,2].distinct() == [1]",
        "[2,1].sort() == [1,2]",
        "[1].reverse() == [1]",
        "'abc'.reverse() == 'cba'",
    ];
    let fixture = include_str!("../../tests/fixtures/cel-checker/kube-apiserver-1.32.0.jsonl");
    let mut differences = Vec::new();
    let mut compared = 0;
    for line in fixture.lines() {
        let case: Json = serde_json::from_str(line).unwrap();
        let expression = case["expression"].as_str().unwrap();
        let declarations = Declarations {
            params: case["params"].as_bool().unwrap_or(false),
            authorizer: true,
            variables: true,
        };
        let mut variables: Vec<(String, Expression)> = Vec::new();
        let mut failed = Vec::new();
        let mut first_error = None;
        for v in case["variables"].as_array().into_iter().flatten() {
            let name = v["name"].as_str().unwrap().to_string();
            let text = v["expression"].as_str().unwrap();
            match compile(text, declarations, Returns::Any, &variables, &failed) {
                Ok(e) => variables.push((name, e)),
                Err(e) => {
                    first_error.get_or_insert(format!("{name}: {e}"));
                    failed.push(name);
                }
            }
        }
        let ours = first_error.unwrap_or_else(|| {
            match compile(expression, declarations, Returns::Bool, &variables, &failed) {
                Ok(_) => "OK".to_string(),
                Err(e) => e.to_string(),
            }
        });
        let kube = case["kube"].as_str().unwrap();
        let differs = ours != kube;
        if newer_or_unchecked.contains(&expression) {
            assert!(differs, "{expression} now agrees: take it off the list");
            continue;
        }
        compared += 1;
        if differs {
            differences.push(format!(
                "{expression}\n  kube-apiserver: {kube}\n  here:           {ours}"
            ));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
    assert_eq!(compared, 210);
}
