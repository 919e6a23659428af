//! Webhook chains: `POST /configurations/{validating|mutating}/{configurationName}`
//! runs every webhook of one loaded configuration, and `POST /configurations/{validating|mutating}`
//! every loaded configuration of that type (by `metadata.name`, byte order, then list order), as
//! kube-apiserver's dispatchers do (`validating/dispatcher.go`, `mutating/dispatcher.go`,
//! `mutating/reinvocationcontext.go`, `generic/webhook.go`, under
//! `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/`).
//!
//! The cases are kube-apiserver's own, through the chain routes, with real TLS backends (the
//! example backend's `/upstream/` paths, which mirror `testing/webhook_server.go` and the
//! integration tests' handlers) and the calls each webhook's path received:
//! - `NewNonMutatingTestCases` (`testing/testcase.go`) over a validating chain, and over a
//!   mutating one as `ConvertToMutatingTestCases` converts them;
//! - `NewMutatingTestCases` (`testing/testcase.go`);
//! - `test/integration/apiserver/admissionwebhook/reinvocation_test.go` (the in-tree priority
//!   plugin cases do not apply) and `timeout_test.go`;
//! - the proxy's own: which of two denials is reported, a `?timeout=` below the margin, a
//!   matchCondition error or an unknown namespace (rejections before any call), unknown
//!   configurations, malformed bodies, and whole-type chains in name order.
//!
//! Webhook names are upstream's, made fully qualified (`internalErr A` is
//! `internalerr-a.example.com`). The answer's audit annotation keys are the proxy's
//! (kube-apiserver prefixes each with the chain registration's name): `<webhook>_<key>` for a
//! webhook's own, and `failed-open_round_<r>_index_<i>` and `mutation_round_<r>_index_<i>` for
//! kube-apiserver's `failed-open.{validating,mutation}.webhook.admission.k8s.io/…` and
//! `mutation.webhook.admission.k8s.io/…`. A failing case names its chain type and case.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};

use admission_proxy::matching::Namespaces;
use admission_proxy::server::DEFAULT_MAX_BODY_BYTES;

use crate::common::{Reply, TestBackend, TestProxy};

/// The namespace upstream's fake data sources create (`NewFakeValidatingDataSource`).
const NAMESPACE: &str = "webhook-test";
/// Upstream's configuration name (`NewFakeMutatingDataSource`).
const CONFIGURATION: &str = "test-webhooks";

#[derive(Clone, Copy, Debug, PartialEq)]
enum Type {
    Validating,
    Mutating,
}

impl Type {
    fn kind(self) -> &'static str {
        match self {
            Type::Validating => "ValidatingWebhookConfiguration",
            Type::Mutating => "MutatingWebhookConfiguration",
        }
    }

    fn route(self) -> &'static str {
        match self {
            Type::Validating => "validating",
            Type::Mutating => "mutating",
        }
    }
}

/// `matchEverythingRules`.
fn all_rules() -> Value {
    json!([{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"]}])
}

/// The "no match" cases' rule: CREATE only (upstream leaves the rest empty, which validation
/// refuses; `*` keeps the case about the operation).
fn create_rules() -> Value {
    json!([{"operations": ["CREATE"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"]}])
}

/// The integration tests' rule: every operation on core v1 pods.
fn pod_rules() -> Value {
    json!([{"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}])
}

/// One webhook of a configuration.
#[derive(Clone, Debug)]
struct Hook {
    name: &'static str,
    /// The example backend's behaviour under `/upstream/` (`allow`, `sleep/1000/noop`); the
    /// harness appends a tag naming the configuration and position, so that every webhook has
    /// a path of its own.
    behaviour: &'static str,
    failure_policy: Option<&'static str>,
    rules: Value,
    namespace_selector: Option<Value>,
    object_selector: Option<Value>,
    side_effects: &'static str,
    timeout_seconds: Option<u32>,
    reinvocation_policy: Option<&'static str>,
    match_conditions: Option<Value>,
    review_versions: &'static [&'static str],
}

impl Hook {
    fn new(name: &'static str, behaviour: &'static str) -> Self {
        Hook {
            name,
            behaviour,
            failure_policy: None,
            rules: all_rules(),
            namespace_selector: None,
            object_selector: None,
            side_effects: "None",
            timeout_seconds: None,
            reinvocation_policy: None,
            match_conditions: None,
            review_versions: &["v1"],
        }
    }

    fn policy(mut self, policy: &'static str) -> Self {
        self.failure_policy = Some(policy);
        self
    }

    fn rules(mut self, rules: Value) -> Self {
        self.rules = rules;
        self
    }

    fn namespace_selector(mut self, selector: Value) -> Self {
        self.namespace_selector = Some(selector);
        self
    }

    fn object_selector(mut self, selector: Value) -> Self {
        self.object_selector = Some(selector);
        self
    }

    fn side_effects(mut self, side_effects: &'static str) -> Self {
        self.side_effects = side_effects;
        self
    }

    fn timeout(mut self, seconds: u32) -> Self {
        self.timeout_seconds = Some(seconds);
        self
    }

    fn reinvoke(mut self, policy: &'static str) -> Self {
        self.reinvocation_policy = Some(policy);
        self
    }

    fn conditions(mut self, conditions: Value) -> Self {
        self.match_conditions = Some(conditions);
        self
    }

    fn versions(mut self, versions: &'static [&'static str]) -> Self {
        self.review_versions = versions;
        self
    }
}

/// One configuration: its `admissionregistration.k8s.io` version (`v1` or `v1beta1`, whose
/// defaults differ), name and webhooks.
#[derive(Clone, Debug)]
struct Config {
    version: &'static str,
    name: &'static str,
    hooks: Vec<Hook>,
}

/// The backend path of webhook `index` of configuration `config` of type `ty`.
fn hook_path(ty: Type, config: &str, index: usize, hook: &Hook) -> String {
    format!(
        "/upstream/{}/{}-{config}-{index}",
        hook.behaviour,
        ty.route()
    )
}

/// The configurations as one `List` (JSON, which the loader reads as YAML).
fn render(configs: &[(Type, &Config)], backend: &TestBackend) -> String {
    let items: Vec<Value> = configs
        .iter()
        .map(|(ty, config)| {
            let webhooks: Vec<Value> = config
                .hooks
                .iter()
                .enumerate()
                .map(|(i, hook)| {
                    let mut w = json!({
                        "name": hook.name,
                        "clientConfig": {
                            "url": format!("{}{}", backend.url, hook_path(*ty, config.name, i, hook)),
                            "caBundle": backend.pki.ca_bundle(),
                        },
                        "rules": hook.rules,
                        "sideEffects": hook.side_effects,
                        "admissionReviewVersions": hook.review_versions,
                    });
                    let optional = [
                        ("failurePolicy", hook.failure_policy.map(|p| json!(p))),
                        ("namespaceSelector", hook.namespace_selector.clone()),
                        ("objectSelector", hook.object_selector.clone()),
                        ("timeoutSeconds", hook.timeout_seconds.map(|t| json!(t))),
                        ("reinvocationPolicy", hook.reinvocation_policy.map(|p| json!(p))),
                        ("matchConditions", hook.match_conditions.clone()),
                    ];
                    for (key, value) in optional {
                        if let Some(value) = value {
                            w[key] = value;
                        }
                    }
                    w
                })
                .collect();
            json!({
                "apiVersion": format!("admissionregistration.k8s.io/{}", config.version),
                "kind": ty.kind(),
                "metadata": {"name": config.name},
                "webhooks": webhooks,
            })
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
}

/// The namespaces the proxy knows: upstream's, labelled `runlevel: "0"`.
fn namespaces() -> Namespaces {
    Namespaces::parse(&format!(
        "kind: Namespace\nmetadata: {{name: {NAMESPACE}, labels: {{runlevel: \"0\"}}}}\n"
    ))
    .unwrap()
}

/// A proxy serving `configs`.
fn proxy(configs: &[(Type, &Config)], backend: &TestBackend) -> TestProxy {
    TestProxy::start_with(
        &render(configs, backend),
        Some(namespaces()),
        DEFAULT_MAX_BODY_BYTES,
    )
}

/// What the request is about.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Object {
    /// A v1 Pod `my-pod` (`NewAttribute`).
    Pod,
    /// A `custom.resource/v1` `TestCRD` `my-test-crd` (`NewAttributeUnstructured`).
    Crd,
}

/// An AdmissionReview and what it was built from.
struct Request {
    uid: String,
    version: &'static str,
    object: Value,
    body: Vec<u8>,
}

impl Request {
    /// `operation` of `what` in `namespace` with these object labels; UPDATE's oldObject has
    /// no labels, as upstream's (`newAttributesRecord`).
    fn new(
        version: &'static str,
        operation: &str,
        what: Object,
        namespace: &str,
        labels: &BTreeMap<String, String>,
        dry_run: bool,
    ) -> Self {
        let uid = uuid::Uuid::new_v4().to_string();
        let (api_version, kind, group, resource, name) = match what {
            Object::Pod => ("v1", "Pod", "", "pods", "my-pod"),
            Object::Crd => (
                "custom.resource/v1",
                "TestCRD",
                "custom.resource",
                "crd",
                "my-test-crd",
            ),
        };
        let mut object = json!({
            "apiVersion": api_version,
            "kind": kind,
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
        });
        if what == Object::Pod {
            object["spec"] = json!({"containers": [{"name": "fake-name", "image": "fakeimage"}]});
        }
        let (old, options) = if operation == "UPDATE" {
            let mut old = object.clone();
            old["metadata"].as_object_mut().unwrap().remove("labels");
            (old, "UpdateOptions")
        } else {
            (Value::Null, "CreateOptions")
        };
        let gvk = json!({"group": group, "version": "v1", "kind": kind});
        let gvr = json!({"group": group, "version": "v1", "resource": resource});
        let body = serde_json::to_vec(&json!({
            "apiVersion": format!("admission.k8s.io/{version}"),
            "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
                "name": name, "namespace": namespace, "operation": operation,
                "userInfo": {"username": "webhook-test", "uid": "webhook-test"},
                "object": object, "oldObject": old, "dryRun": dry_run,
                "options": {"apiVersion": "meta.k8s.io/v1", "kind": options},
            }
        }))
        .unwrap();
        Request {
            uid,
            version,
            object,
            body,
        }
    }
}

/// What one webhook of a case went through: the calls its path received, and (mutating) the
/// `mutated` value of its `mutation_round_<r>_index_<i>` annotation for each round it was
/// invoked in (a dry-run refusal is invoked without a call).
#[derive(Clone, Debug)]
struct Fate {
    calls: u64,
    rounds: Vec<bool>,
}

/// Not selected (or not reached).
fn skipped() -> Fate {
    Fate {
        calls: 0,
        rounds: vec![],
    }
}

/// Called once in round 0, object unchanged.
fn called() -> Fate {
    Fate {
        calls: 1,
        rounds: vec![false],
    }
}

/// Called once in round 0, object changed.
fn mutated() -> Fate {
    Fate {
        calls: 1,
        rounds: vec![true],
    }
}

/// Refused for dry run: invoked, not called.
fn refused() -> Fate {
    Fate {
        calls: 0,
        rounds: vec![false],
    }
}

/// Called in rounds 0..n with these `mutated` values.
fn rounds(mutated: &[bool]) -> Fate {
    Fate {
        calls: mutated.len() as u64,
        rounds: mutated.to_vec(),
    }
}

/// A check of `response.status.message`.
#[derive(Clone, Debug)]
enum Msg {
    Exact(String),
    Prefix(String),
    Contains(String),
}

impl Msg {
    fn holds(&self, message: &str) -> bool {
        match self {
            Msg::Exact(m) => message == m,
            Msg::Prefix(m) => message.starts_with(m.as_str()),
            Msg::Contains(m) => message.contains(m.as_str()),
        }
    }
}

/// An expected rejection: `response.status` fields.
#[derive(Clone, Debug)]
struct Rejection {
    code: i64,
    reason: Option<&'static str>,
    messages: Vec<Msg>,
}

/// `ToStatusErr` (`errors/statuserror.go`) of a status with `message`, or none.
fn denied_by(webhook: &str, message: Option<&str>) -> String {
    match message {
        Some(m) => format!("admission webhook {webhook:?} denied the request: {m}"),
        None => format!("admission webhook {webhook:?} denied the request without explanation"),
    }
}

/// `apierrors.NewInternalError` of an `ErrCallingWebhook` (`util/webhook/error.go`).
fn failed_calling(webhook: &str, reason: &str) -> String {
    format!("Internal error occurred: failed calling webhook {webhook:?}: {reason}")
}

/// A webhook's denial, code 403.
fn denial(webhook: &str, message: Option<&str>) -> Rejection {
    Rejection {
        code: 403,
        reason: None,
        messages: vec![Msg::Exact(denied_by(webhook, message))],
    }
}

/// A call failure under failurePolicy Fail, its reason starting with `reason`.
fn failure(webhook: &str, reason: &str) -> Rejection {
    Rejection {
        code: 500,
        reason: Some("InternalError"),
        messages: vec![Msg::Prefix(failed_calling(webhook, reason))],
    }
}

/// `NewDryRunUnsupportedErr` (`errors/dryrununsupported.go`).
fn dry_run_unsupported(webhook: &str) -> Rejection {
    Rejection {
        code: 400,
        reason: Some("BadRequest"),
        messages: vec![Msg::Exact(format!(
            "admission webhook {webhook:?} does not support dry run"
        ))],
    }
}

/// One case: a configuration `test-webhooks` of the type under test, a request, and what the
/// chain must answer.
#[derive(Clone, Debug)]
struct Case {
    name: &'static str,
    config_version: &'static str,
    hooks: Vec<Hook>,
    /// The caller's AdmissionReview version.
    caller: &'static str,
    operation: &'static str,
    object: Object,
    namespace: &'static str,
    dry_run: bool,
    /// The object's labels.
    labels: BTreeMap<String, String>,
    timeout: &'static str,
    fates: Vec<Fate>,
    decision: &'static str,
    rejection: Option<Rejection>,
    /// The audit annotations besides the mutating chain's `mutation_round_*` ones (which come
    /// from `fates`).
    annotations: BTreeMap<String, String>,
    warnings: Vec<String>,
    /// Mutating: the object's labels once the answer's patch is applied (`None`: not checked,
    /// for denials, which carry no patch).
    final_labels: Option<BTreeMap<String, String>>,
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

impl Case {
    /// An UPDATE of upstream's pod (label `pod.name: my-pod`) in `webhook-test`, answered as
    /// `skipped` unless told otherwise.
    fn new(name: &'static str) -> Self {
        Case {
            name,
            config_version: "v1",
            hooks: vec![],
            caller: "v1",
            operation: "UPDATE",
            object: Object::Pod,
            namespace: NAMESPACE,
            dry_run: false,
            labels: labels(&[("pod.name", "my-pod")]),
            timeout: "10s",
            fates: vec![],
            decision: "skipped",
            rejection: None,
            annotations: BTreeMap::new(),
            warnings: vec![],
            final_labels: None,
        }
    }

    fn hook(mut self, hook: Hook, fate: Fate) -> Self {
        self.hooks.push(hook);
        self.fates.push(fate);
        self
    }

    fn v1beta1_configuration(mut self) -> Self {
        self.config_version = "v1beta1";
        self
    }

    fn caller(mut self, version: &'static str) -> Self {
        self.caller = version;
        self
    }

    /// Upstream's CRD variant (`IsCRD`): label `crd.name: my-test-crd` instead of `pod.name`.
    fn crd(mut self, name: &'static str) -> Self {
        self.name = name;
        self.object = Object::Crd;
        fn rename(mut l: BTreeMap<String, String>) -> BTreeMap<String, String> {
            if l.remove("pod.name").is_some() {
                l.insert("crd.name".into(), "my-test-crd".into());
            }
            l
        }
        self.labels = rename(std::mem::take(&mut self.labels));
        self.final_labels = self.final_labels.take().map(rename);
        self
    }

    fn dry_run(mut self) -> Self {
        self.dry_run = true;
        self
    }

    fn namespace(mut self, namespace: &'static str) -> Self {
        self.namespace = namespace;
        self
    }

    /// Adds object labels (`AdditionalLabels`).
    fn with_labels(mut self, pairs: &[(&str, &str)]) -> Self {
        self.labels.extend(labels(pairs));
        self
    }

    /// A CREATE of a pod with exactly these labels (the integration tests' pod).
    fn create_with_labels(mut self, pairs: &[(&str, &str)]) -> Self {
        self.operation = "CREATE";
        self.labels = labels(pairs);
        self
    }

    fn allowed(mut self, decision: &'static str) -> Self {
        self.decision = decision;
        self.rejection = None;
        self
    }

    fn rejected(mut self, decision: &'static str, rejection: Rejection) -> Self {
        self.decision = decision;
        self.rejection = Some(rejection);
        self
    }

    fn annotation(mut self, key: &str, value: &str) -> Self {
        self.annotations.insert(key.into(), value.into());
        self
    }

    /// kube-apiserver's `failed-open…/round_0_index_<index>` = the webhook's name.
    fn failed_open(self, index: usize, webhook: &str) -> Self {
        self.annotation(&format!("failed-open_round_0_index_{index}"), webhook)
    }

    fn final_labels(mut self, pairs: &[(&str, &str)]) -> Self {
        self.final_labels = Some(labels(pairs));
        self
    }

    /// The mutating chain's `mutation_round_<r>_index_<i>` annotations, from the fates
    /// (`mutationAnnotationValue`).
    fn mutation_annotations(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for (i, (hook, fate)) in self.hooks.iter().zip(&self.fates).enumerate() {
            for (round, mutated) in fate.rounds.iter().enumerate() {
                out.insert(
                    format!("mutation_round_{round}_index_{i}"),
                    mutation_value(CONFIGURATION, hook.name, *mutated),
                );
            }
        }
        out
    }
}

/// `mutationAnnotationValue` (`testing/testcase.go`).
fn mutation_value(configuration: &str, webhook: &str, mutated: bool) -> String {
    format!(r#"{{"configuration":"{configuration}","webhook":"{webhook}","mutated":{mutated}}}"#)
}

/// The labels of `object` after the answer's patch (none: unchanged); `Err` when the patch is
/// not a base64 JSON Patch that applies.
fn patched_labels(object: &Value, response: &Value) -> Result<BTreeMap<String, String>, String> {
    let mut object = object.clone();
    if let Some(patch) = response.get("patch") {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(patch.as_str().ok_or("patch is not a string")?)
            .map_err(|e| format!("patch is not base64: {e}"))?;
        let patch: json_patch::Patch = serde_json::from_slice(&bytes)
            .map_err(|e| format!("patch is not a JSON Patch: {e}"))?;
        json_patch::patch(&mut object, &patch)
            .map_err(|e| format!("patch does not apply to the object sent: {e}"))?;
    }
    Ok(object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|l| {
            l.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default())
}

/// `response.auditAnnotations` (absent: none).
fn annotations_of(response: &Value) -> BTreeMap<String, String> {
    response
        .get("auditAnnotations")
        .and_then(Value::as_object)
        .map(|a| {
            a.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.as_str().unwrap_or("<not a string>").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `response.warnings` (absent: none).
fn warnings_of(response: &Value) -> Vec<String> {
    response
        .get("warnings")
        .and_then(Value::as_array)
        .map(|w| {
            w.iter()
                .map(|v| v.as_str().unwrap_or("<not a string>").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// What an answer must hold.
struct Expected<'a> {
    decision: &'a str,
    /// `None`: allowed.
    rejection: Option<&'a Rejection>,
    /// Exactly these audit annotations.
    annotations: &'a BTreeMap<String, String>,
    /// Exactly these warnings, in order.
    warnings: &'a [String],
    /// Mutating: the object's labels once the answer's patch is applied; no patch when they
    /// are the labels sent.
    final_labels: Option<&'a BTreeMap<String, String>>,
}

impl<'a> Expected<'a> {
    /// Allowed with this decision and these annotations, no warnings.
    fn allowed(decision: &'a str, annotations: &'a BTreeMap<String, String>) -> Self {
        Expected {
            decision,
            rejection: None,
            annotations,
            warnings: &[],
            final_labels: None,
        }
    }
}

/// Checks an answer to `request` that must be an AdmissionReview: the envelope, the decision
/// header, the rejection (or none), annotations, warnings and (mutating) the patch. Every
/// problem found, as text.
fn check_answer(
    ty: Type,
    request: &Request,
    reply: &Reply,
    expected: &Expected<'_>,
) -> Vec<String> {
    let Expected {
        decision,
        rejection,
        annotations,
        warnings,
        final_labels,
    } = *expected;
    let mut problems = Vec::new();
    let mut expect = |ok: bool, what: String| {
        if !ok {
            problems.push(what);
        }
    };
    expect(
        reply.status == 200,
        format!("HTTP status {}, want 200", reply.status),
    );
    let body = &reply.json;
    let api_version = format!("admission.k8s.io/{}", request.version);
    expect(
        body["apiVersion"] == api_version.as_str() && body["kind"] == "AdmissionReview",
        format!(
            "not an {api_version} AdmissionReview: {}",
            String::from_utf8_lossy(&reply.body)
        ),
    );
    if body["kind"] != "AdmissionReview" {
        // Nothing else to check in a Status.
        return problems;
    }
    let response = &body["response"];
    expect(
        response["uid"] == request.uid.as_str(),
        format!("response.uid {}, want {}", response["uid"], request.uid),
    );
    expect(
        reply.decision == decision,
        format!("decision {:?}, want {decision:?}", reply.decision),
    );
    let allowed = response["allowed"].as_bool();
    expect(
        allowed == Some(rejection.is_none()),
        format!("response.allowed {allowed:?}, want {}", rejection.is_none()),
    );
    if let Some(rejection) = rejection {
        let status = &response["status"];
        expect(
            status["code"].as_i64() == Some(rejection.code),
            format!("status.code {}, want {}", status["code"], rejection.code),
        );
        if let Some(reason) = rejection.reason {
            expect(
                status["reason"] == reason,
                format!("status.reason {}, want {reason}", status["reason"]),
            );
        }
        let message = status["message"].as_str().unwrap_or("");
        for m in &rejection.messages {
            expect(
                m.holds(message),
                format!("status.message {message:?}, want {m:?}"),
            );
        }
        expect(
            response.get("patch").is_none(),
            format!("a rejection carries a patch: {response}"),
        );
    }
    let got = annotations_of(response);
    expect(
        &got == annotations,
        format!("auditAnnotations {got:?}, want {annotations:?}"),
    );
    let got = warnings_of(response);
    expect(
        got == warnings,
        format!("warnings {got:?}, want {warnings:?}"),
    );
    match ty {
        Type::Validating => expect(
            response.get("patch").is_none() && response.get("patchType").is_none(),
            format!("a validating chain answered a patch: {response}"),
        ),
        Type::Mutating => {
            if let Some(want) = final_labels {
                match patched_labels(&request.object, response) {
                    Ok(got) => expect(&got == want, format!("labels {got:?}, want {want:?}")),
                    Err(e) => expect(false, e),
                }
                let unchanged = request.object["metadata"]["labels"] == json!(want);
                expect(
                    unchanged == response.get("patch").is_none(),
                    format!(
                        "patch present: {}, object changed: {}",
                        response.get("patch").is_some(),
                        !unchanged
                    ),
                );
                if response.get("patch").is_some() {
                    expect(
                        response["patchType"] == "JSONPatch",
                        format!("patchType {}, want JSONPatch", response["patchType"]),
                    );
                }
            }
        }
    }
    problems
}

/// Runs `case` through the chain route of `ty` (its own proxy, the shared `backend`); every
/// problem, prefixed with the type and case name.
async fn run(ty: Type, case: &Case, backend: &TestBackend) -> Vec<String> {
    let config = Config {
        version: case.config_version,
        name: CONFIGURATION,
        hooks: case.hooks.clone(),
    };
    let proxy = proxy(&[(ty, &config)], backend);
    let paths: Vec<String> = case
        .hooks
        .iter()
        .enumerate()
        .map(|(i, h)| hook_path(ty, CONFIGURATION, i, h))
        .collect();
    // The backend is shared by the table and its paths repeat: count what this case adds.
    let before: Vec<u64> = paths.iter().map(|p| backend.recorder.calls_to(p)).collect();
    let request = Request::new(
        case.caller,
        case.operation,
        case.object,
        case.namespace,
        &case.labels,
        case.dry_run,
    );
    let reply = proxy
        .post(
            &format!(
                "/configurations/{}/{CONFIGURATION}?timeout={}",
                ty.route(),
                case.timeout
            ),
            &request.body,
        )
        .await;
    let mut annotations = case.annotations.clone();
    if ty == Type::Mutating {
        annotations.extend(case.mutation_annotations());
    }
    // A mutating chain that allows with no final labels given must leave the object as sent.
    let unchanged = (ty == Type::Mutating && case.rejection.is_none()).then_some(&case.labels);
    let mut problems = check_answer(
        ty,
        &request,
        &reply,
        &Expected {
            decision: case.decision,
            rejection: case.rejection.as_ref(),
            annotations: &annotations,
            warnings: &case.warnings,
            final_labels: case.final_labels.as_ref().or(unchanged),
        },
    );
    for ((path, before), (hook, fate)) in paths
        .iter()
        .zip(before)
        .zip(case.hooks.iter().zip(&case.fates))
    {
        let calls = backend.recorder.calls_to(path) - before;
        if calls != fate.calls {
            problems.push(format!("{}: {calls} calls, want {}", hook.name, fate.calls));
        }
    }
    problems
        .into_iter()
        .map(|p| format!("[{ty:?} chain, {:?}] {p}", case.name))
        .collect()
}

/// Runs every case (sequentially, sharing one backend) and fails naming each case that did
/// not hold.
async fn run_table(ty: Type, cases: &[Case]) {
    let backend = TestBackend::start();
    let mut problems = Vec::new();
    for case in cases {
        problems.extend(run(ty, case, &backend).await);
    }
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// `NewNonMutatingTestCases` (`testing/testcase.go`) for a chain of type `ty`; for mutating,
/// as `ConvertToMutatingTestCases` converts them: every invoked webhook adds its
/// `mutation_round_0_index_<i>` (from the fates), and a webhook failing closed ends the
/// chain, so the later ones are not called.
fn non_mutating_cases(ty: Type) -> Vec<Case> {
    let mutating = ty == Type::Mutating;
    let three_internal_errors = |name: &'static str, policy: Option<&'static str>| {
        let mut case = Case::new(name);
        for (i, webhook) in [
            "internalerr-a.example.com",
            "internalerr-b.example.com",
            "internalerr-c.example.com",
        ]
        .into_iter()
        .enumerate()
        {
            let mut hook = Hook::new(webhook, "internalErr");
            if let Some(policy) = policy {
                hook = hook.policy(policy);
            }
            // Validating calls all three at once; mutating stops at the first failure.
            let fate = if mutating && i > 0 {
                skipped()
            } else {
                called()
            };
            case = case.hook(hook, fate);
        }
        let rejection = if mutating {
            failure("internalerr-a.example.com", "failed to call webhook: ")
        } else {
            // The first of the three to finish is reported.
            Rejection {
                code: 500,
                reason: Some("InternalError"),
                messages: vec![
                    Msg::Prefix(
                        "Internal error occurred: failed calling webhook \"internalerr-".into(),
                    ),
                    Msg::Contains(".example.com\": failed to call webhook: ".into()),
                ],
            }
        };
        case.rejected("failed-closed", rejection)
    };
    let runlevel = |operator: &str, value: &str| json!({"matchExpressions": [{"key": "runlevel", "operator": operator, "values": [value]}]});
    let skip_object_selector = Case::new("skip webhook whose objectSelector does not match")
        .hook(Hook::new("allow.example.com", "allow"), called())
        .hook(
            Hook::new("shouldnotbecalled.example.com", "shouldNotBeCalled")
                .object_selector(json!({"matchLabels": {"label": "nonexistent"}})),
            skipped(),
        )
        .allowed("allowed")
        .annotation("allow.example.com_key1", "value1");
    vec![
        Case::new("no match").hook(
            Hook::new("nomatch.example.com", "disallow").rules(create_rules()),
            skipped(),
        ),
        Case::new("match & allow")
            .hook(Hook::new("allow.example.com", "allow"), called())
            .allowed("allowed")
            .annotation("allow.example.com_key1", "value1"),
        Case::new("match & disallow")
            .hook(Hook::new("disallow.example.com", "disallow"), called())
            .rejected("denied", denial("disallow.example.com", None)),
        Case::new("match & disallow ii")
            .hook(
                Hook::new("disallowreason.example.com", "disallowReason"),
                called(),
            )
            .rejected(
                "denied",
                denial("disallowreason.example.com", Some("you shall not pass")),
            ),
        Case::new("match & disallow & but allowed because namespaceSelector exempt the ns").hook(
            Hook::new("disallow.example.com", "disallow").namespace_selector(runlevel("In", "1")),
            skipped(),
        ),
        Case::new("match & disallow & but allowed because namespaceSelector exempt the ns ii")
            .hook(
                Hook::new("disallow.example.com", "disallow")
                    .namespace_selector(runlevel("NotIn", "0")),
                skipped(),
            ),
        Case::new("match & fail (but allow because fail open)")
            .hook(
                Hook::new("internalerr-a.example.com", "internalErr").policy("Ignore"),
                called(),
            )
            .hook(
                Hook::new("internalerr-b.example.com", "internalErr").policy("Ignore"),
                called(),
            )
            .hook(
                Hook::new("internalerr-c.example.com", "internalErr").policy("Ignore"),
                called(),
            )
            .allowed("failed-open")
            .failed_open(0, "internalerr-a.example.com")
            .failed_open(1, "internalerr-b.example.com")
            .failed_open(2, "internalerr-c.example.com"),
        // v1's default failurePolicy is Fail, as the dispatchers read a nil one.
        three_internal_errors(
            "match & fail (but disallow because fail close on nil FailurePolicy)",
            None,
        ),
        three_internal_errors("match & fail (but fail because fail closed)", Some("Fail")),
        // The url cases, with a v1beta1 caller: the answer is in the caller's version.
        Case::new("match & allow (url)")
            .caller("v1beta1")
            .hook(Hook::new("allow.example.com", "allow"), called())
            .allowed("allowed")
            .annotation("allow.example.com_key1", "value1"),
        Case::new("match & disallow (url)")
            .caller("v1beta1")
            .hook(Hook::new("disallow.example.com", "disallow"), called())
            .rejected("denied", denial("disallow.example.com", None)),
        Case::new("absent response and fail open")
            .hook(
                Hook::new("nilresponse.example.com", "nilResponse").policy("Ignore"),
                called(),
            )
            .allowed("failed-open")
            .failed_open(0, "nilresponse.example.com"),
        Case::new("absent response and fail closed")
            .hook(
                Hook::new("nilresponse.example.com", "nilResponse").policy("Fail"),
                called(),
            )
            .rejected(
                "failed-closed",
                Rejection {
                    code: 500,
                    reason: Some("InternalError"),
                    messages: vec![Msg::Exact(failed_calling(
                        "nilresponse.example.com",
                        "received invalid webhook response: webhook response was absent",
                    ))],
                },
            ),
        // sideEffects Unknown and Some load from v1beta1 configurations.
        Case::new("no match dry run")
            .v1beta1_configuration()
            .dry_run()
            .hook(
                Hook::new("nomatch.example.com", "allow")
                    .rules(create_rules())
                    .side_effects("Some"),
                skipped(),
            ),
        Case::new("match dry run side effects Unknown")
            .v1beta1_configuration()
            .dry_run()
            .hook(
                Hook::new("allow.example.com", "allow").side_effects("Unknown"),
                refused(),
            )
            .rejected("rejected-dry-run", dry_run_unsupported("allow.example.com")),
        Case::new("match dry run side effects None")
            .dry_run()
            .hook(
                Hook::new("allow.example.com", "allow").side_effects("None"),
                called(),
            )
            .allowed("allowed")
            .annotation("allow.example.com_key1", "value1"),
        Case::new("match dry run side effects Some")
            .v1beta1_configuration()
            .dry_run()
            .hook(
                Hook::new("allow.example.com", "allow").side_effects("Some"),
                refused(),
            )
            .rejected("rejected-dry-run", dry_run_unsupported("allow.example.com")),
        Case::new("match dry run side effects NoneOnDryRun")
            .dry_run()
            .hook(
                Hook::new("allow.example.com", "allow").side_effects("NoneOnDryRun"),
                called(),
            )
            .allowed("allowed")
            .annotation("allow.example.com_key1", "value1"),
        // `invalid*key` is not a valid annotation key: dropped, as `AddAnnotation` refuses it.
        Case::new("illegal annotation format")
            .hook(
                Hook::new("invalidannotation.example.com", "invalidAnnotation"),
                called(),
            )
            .allowed("allowed"),
        skip_object_selector.clone(),
        skip_object_selector.crd("skip webhook whose objectSelector does not match CRD's labels"),
    ]
}

#[tokio::test]
async fn validating_chain_runs_upstreams_non_mutating_cases() {
    run_table(Type::Validating, &non_mutating_cases(Type::Validating)).await;
}

#[tokio::test]
async fn mutating_chain_runs_upstreams_non_mutating_cases_converted() {
    run_table(Type::Mutating, &non_mutating_cases(Type::Mutating)).await;
}

/// `NewMutatingTestCases` (`testing/testcase.go`). Unlike upstream's unit test, the chain runs
/// the reinvocation round itself, so "reinvoke if needed" also shows round 1.
fn mutating_cases() -> Vec<Case> {
    let remove_label = Case::new("match & remove label")
        .with_labels(&[("remove", "me")])
        .hook(
            Hook::new("removelabel.example.com", "removeLabel"),
            mutated(),
        )
        .allowed("allowed")
        .annotation("removelabel.example.com_key1", "value1")
        .final_labels(&[("pod.name", "my-pod")]);
    let add_label = Case::new("match & add label")
        .hook(Hook::new("addlabel.example.com", "addLabel"), mutated())
        .allowed("allowed")
        .final_labels(&[("pod.name", "my-pod"), ("added", "test")]);
    let remove_then_skip =
        Case::new("first webhook remove labels, second webhook shouldn't be called")
            .with_labels(&[("remove", "me")])
            .hook(
                Hook::new("removelabel.example.com", "removeLabel")
                    .object_selector(json!({"matchLabels": {"remove": "me"}})),
                mutated(),
            )
            // Selected against the patched object, which no longer has the label.
            .hook(
                Hook::new("shouldnotbecalled.example.com", "shouldNotBeCalled")
                    .object_selector(json!({"matchLabels": {"remove": "me"}})),
                skipped(),
            )
            .allowed("allowed")
            .annotation("removelabel.example.com_key1", "value1")
            .final_labels(&[("pod.name", "my-pod")]);
    let never = |name: &'static str, policy: Option<&'static str>| {
        let mut hook = Hook::new("addlabel.example.com", "addLabel");
        if let Some(policy) = policy {
            hook = hook.reinvoke(policy);
        }
        Case::new(name)
            .hook(hook, mutated())
            .allowed("allowed")
            .final_labels(&[("pod.name", "my-pod"), ("added", "test")])
    };
    vec![
        remove_label.clone(),
        add_label.clone().crd("match CRD & add label"),
        add_label,
        remove_label.crd("match CRD & remove label"),
        // A patch that does not decode is a call failure (`received undecodable patch in
        // webhook response`), here under v1's default Fail.
        Case::new("match & invalid mutation")
            .hook(
                Hook::new("invalidmutation.example.com", "invalidMutation"),
                called(),
            )
            .rejected(
                "failed-closed",
                failure(
                    "invalidmutation.example.com",
                    "received undecodable patch in webhook response: ",
                ),
            ),
        Case::new("match & remove label dry run unsupported")
            .v1beta1_configuration()
            .dry_run()
            .with_labels(&[("remove", "me")])
            .hook(
                Hook::new("removelabel.example.com", "removeLabel").side_effects("Unknown"),
                refused(),
            )
            .rejected(
                "rejected-dry-run",
                dry_run_unsupported("removelabel.example.com"),
            ),
        remove_then_skip.clone(),
        remove_then_skip
            .crd("first webhook remove labels from CRD, second webhook shouldn't be called"),
        // addLabel changes the object, then removeLabel does: addLabel (invoked before that
        // change) runs again in round 1 and changes nothing; removeLabel is not reinvoked.
        Case::new("match & reinvoke if needed policy")
            .with_labels(&[("remove", "me")])
            .hook(
                Hook::new("addlabel.example.com", "addLabel").reinvoke("IfNeeded"),
                rounds(&[true, false]),
            )
            .hook(
                Hook::new("removelabel.example.com", "removeLabel").reinvoke("IfNeeded"),
                mutated(),
            )
            .allowed("allowed")
            .annotation("removelabel.example.com_key1", "value1")
            .final_labels(&[("pod.name", "my-pod"), ("added", "test")]),
        never("match & never reinvoke policy", Some("Never")),
        never("match & never reinvoke policy (by default)", None),
        Case::new("match & no reinvoke")
            .hook(Hook::new("noop.example.com", "noop"), called())
            .allowed("allowed")
            .final_labels(&[("pod.name", "my-pod")]),
    ]
}

#[tokio::test]
async fn mutating_chain_runs_upstreams_mutating_cases() {
    run_table(Type::Mutating, &mutating_cases()).await;
}

/// `testWebhookReinvocationPolicy` (`test/integration/apiserver/admissionwebhook/
/// reinvocation_test.go`): a CREATE of a pod labelled `x: "true"`, webhooks on pods with
/// failurePolicy Fail speaking v1beta1, the labels the pod ends with and the calls each
/// webhook received. The in-tree (priority plugin) cases do not apply.
fn reinvocation_cases() -> Vec<Case> {
    let hook = |name: &'static str, path: &'static str, policy: Option<&'static str>| {
        let mut hook = Hook::new(name, path)
            .rules(pod_rules())
            .policy("Fail")
            .versions(&["v1beta1"]);
        if let Some(policy) = policy {
            hook = hook.reinvoke(policy);
        }
        hook
    };
    let add = |policy| hook("addlabel.example.com", "addlabel", policy);
    let conditional = |policy| {
        hook(
            "conditionaladdlabel.example.com",
            "conditionaladdlabel",
            policy,
        )
    };
    let case = |name| {
        Case::new(name)
            .create_with_labels(&[("x", "true")])
            .allowed("allowed")
    };
    vec![
        // Upstream: "no reinvocation of webhook B when in-tree or prior webhook mutations"
        // (the first of the two cases of that name).
        case("reinvocation when a later webhook mutates")
            .hook(add(Some("IfNeeded")), rounds(&[true, false]))
            .hook(conditional(Some("IfNeeded")), mutated())
            .final_labels(&[("x", "true"), ("a", "true"), ("b", "true")]),
        // Upstream: "all webhooks reinvoked when any webhook reinvocation causes mutation".
        case("mutation during reinvocation reinvokes all")
            .hook(
                hook("settrue.example.com", "settrue", Some("IfNeeded")),
                rounds(&[true, true]),
            )
            .hook(
                hook("setfalse.example.com", "setfalse", Some("IfNeeded")),
                rounds(&[true, true]),
            )
            .final_labels(&[("x", "true"), ("fight", "false")]),
        // Upstream: the second "no reinvocation of webhook B …": a webhook skipped in round 0
        // is not called in round 1, even once its objectSelector matches.
        case("never reinvoked when skipped in round 0")
            .hook(
                conditional(Some("IfNeeded"))
                    .object_selector(json!({"matchLabels": {"a": "true"}})),
                skipped(),
            )
            .hook(add(Some("IfNeeded")), mutated())
            .final_labels(&[("x", "true"), ("a", "true")]),
        case("'reinvoke never' policy respected")
            .hook(conditional(Some("Never")), called())
            .hook(add(Some("Never")), mutated())
            .final_labels(&[("x", "true"), ("a", "true")]),
        case("'reinvoke never' (by default) policy respected")
            .hook(conditional(None), called())
            .hook(add(None), mutated())
            .final_labels(&[("x", "true"), ("a", "true")]),
        // Stands in for "no webhook reinvocation for webhook when no in-tree reinvocation
        // mutations": an IfNeeded webhook whose own change is the only one is not reinvoked.
        case("single IfNeeded mutator is not reinvoked by its own change")
            .hook(add(Some("IfNeeded")), mutated())
            .final_labels(&[("x", "true"), ("a", "true")]),
    ]
}

#[tokio::test]
async fn mutating_chain_reinvokes_as_upstreams_integration_test() {
    run_table(Type::Mutating, &reinvocation_cases()).await;
}

/// The proxy's own rejections, which `ShouldCallHook` returns as a statusError: the whole
/// dispatch stops. Validating selects every webhook before calling any, so nothing is called;
/// mutating has already called the webhooks before the failing one.
fn rejection_cases(ty: Type) -> Vec<Case> {
    let mutating = ty == Type::Mutating;
    let first = if mutating { called() } else { skipped() };
    let first_annotation = |case: Case| {
        if mutating {
            case.annotation("allow.example.com_key1", "value1")
        } else {
            case
        }
    };
    vec![
        first_annotation(
            Case::new("a matchCondition error under Fail in the second webhook")
                .hook(Hook::new("allow.example.com", "allow"), first.clone())
                .hook(
                    Hook::new("conditions.example.com", "allow")
                        .policy("Fail")
                        .conditions(json!([{"name": "broken", "expression": "object.spec.missing == 1"}])),
                    skipped(),
                )
                .rejected(
                    "rejected",
                    Rejection {
                        code: 403,
                        reason: Some("Forbidden"),
                        messages: vec![Msg::Prefix(
                            "pods \"my-pod\" is forbidden: expression 'object.spec.missing == 1' resulted in error"
                                .into(),
                        )],
                    },
                ),
        ),
        first_annotation(
            Case::new("an unknown namespace with a namespaceSelector in the second webhook")
                .namespace("missing")
                .hook(Hook::new("allow.example.com", "allow"), first)
                .hook(
                    Hook::new("selector.example.com", "allow")
                        .namespace_selector(json!({"matchLabels": {"runlevel": "0"}})),
                    skipped(),
                )
                .rejected(
                    "rejected",
                    Rejection {
                        code: 404,
                        reason: Some("NotFound"),
                        messages: vec![Msg::Exact("namespaces \"missing\" not found".into())],
                    },
                ),
        ),
    ]
}

#[tokio::test]
async fn validating_chain_rejections_stop_before_any_call() {
    run_table(Type::Validating, &rejection_cases(Type::Validating)).await;
}

#[tokio::test]
async fn mutating_chain_rejections_stop_the_chain() {
    run_table(Type::Mutating, &rejection_cases(Type::Mutating)).await;
}

/// Posts `request` to `route` with `?timeout=`; the reply and how long it took.
async fn timed_post(
    proxy: &TestProxy,
    route: &str,
    timeout: &str,
    request: &Request,
) -> (Reply, Duration) {
    let started = Instant::now();
    let reply = proxy
        .post(&format!("{route}?timeout={timeout}"), &request.body)
        .await;
    (reply, started.elapsed())
}

/// The integration tests' request: a CREATE of a pod labelled `x: "true"`.
fn integration_pod() -> Request {
    Request::new(
        "v1",
        "CREATE",
        Object::Pod,
        NAMESPACE,
        &labels(&[("x", "true")]),
        false,
    )
}

/// The `?timeout=` values each webhook of `config` received.
fn received_timeouts(ty: Type, config: &Config, backend: &TestBackend) -> Vec<Vec<String>> {
    config
        .hooks
        .iter()
        .enumerate()
        .map(|(i, h)| backend.recorder.timeouts(&hook_path(ty, config.name, i, h)))
        .collect()
}

fn strings(per_hook: &[&[&str]]) -> Vec<Vec<String>> {
    per_hook
        .iter()
        .map(|t| t.iter().map(ToString::to_string).collect())
        .collect()
}

/// A timeout test's webhook on pods: `sleep/{ms}/noop` with this failurePolicy and
/// timeoutSeconds.
fn sleeper(
    name: &'static str,
    behaviour: &'static str,
    policy: &'static str,
    seconds: u32,
) -> Hook {
    Hook::new(name, behaviour)
        .rules(pod_rules())
        .policy(policy)
        .timeout(seconds)
}

/// `timeout_test.go` "minimum of request timeout or webhook timeout propagated": each call's
/// `?timeout=` is min(timeoutSeconds, the caller's `?timeout=` less the 250 ms margin and the
/// time spent), rounded up.
#[tokio::test]
async fn minimum_of_request_timeout_or_webhook_timeout_propagated() {
    let backend = TestBackend::start();
    let config = Config {
        version: "v1",
        name: "timeouts",
        hooks: vec![
            sleeper("first.timeouts.example.com", "sleep/0/noop", "Fail", 20),
            sleeper("second.timeouts.example.com", "sleep/0/noop", "Fail", 5),
        ],
    };
    let proxy = proxy(
        &[(Type::Mutating, &config), (Type::Validating, &config)],
        &backend,
    );
    for ty in [Type::Mutating, Type::Validating] {
        let request = integration_pod();
        let route = format!("/configurations/{}/timeouts", ty.route());
        let (reply, _) = timed_post(&proxy, &route, "10s", &request).await;
        let final_labels = labels(&[("x", "true")]);
        let mut annotations = BTreeMap::new();
        if ty == Type::Mutating {
            for (i, hook) in config.hooks.iter().enumerate() {
                annotations.insert(
                    format!("mutation_round_0_index_{i}"),
                    mutation_value("timeouts", hook.name, false),
                );
            }
        }
        let problems = check_answer(
            ty,
            &request,
            &reply,
            &Expected {
                final_labels: Some(&final_labels),
                ..Expected::allowed("allowed", &annotations)
            },
        );
        assert!(problems.is_empty(), "{ty:?}: {problems:?}");
        assert_eq!(
            received_timeouts(ty, &config, &backend),
            strings(&[&["10s"], &["5s"]]),
            "{ty:?}"
        );
    }
}

/// `timeout_test.go` "webhooks consume client timeout available, not webhook timeout": the
/// mutating webhooks (1 s each) are called one after another, each with what is left of the
/// caller's 10 s; the validating ones, called with the 7 s kube-apiserver would have left,
/// run at once.
#[tokio::test]
async fn webhooks_consume_client_timeout_available_not_webhook_timeout() {
    let backend = TestBackend::start();
    let mutating = Config {
        version: "v1",
        name: "timeouts",
        hooks: vec![
            sleeper("first.timeouts.example.com", "sleep/1000/noop", "Fail", 20),
            sleeper("second.timeouts.example.com", "sleep/1000/noop", "Fail", 5),
            sleeper("third.timeouts.example.com", "sleep/1000/noop", "Fail", 20),
        ],
    };
    let validating = Config {
        version: "v1",
        name: "timeouts",
        hooks: vec![
            sleeper("fourth.timeouts.example.com", "sleep/1000/noop", "Fail", 5),
            sleeper("fifth.timeouts.example.com", "sleep/1000/noop", "Fail", 10),
            sleeper("sixth.timeouts.example.com", "sleep/1000/noop", "Fail", 20),
        ],
    };
    let proxy = proxy(
        &[(Type::Mutating, &mutating), (Type::Validating, &validating)],
        &backend,
    );

    let request = integration_pod();
    let (reply, took) =
        timed_post(&proxy, "/configurations/mutating/timeouts", "10s", &request).await;
    let annotations = mutating
        .hooks
        .iter()
        .enumerate()
        .map(|(i, h)| {
            (
                format!("mutation_round_0_index_{i}"),
                mutation_value("timeouts", h.name, false),
            )
        })
        .collect();
    let final_labels = labels(&[("x", "true")]);
    let problems = check_answer(
        Type::Mutating,
        &request,
        &reply,
        &Expected {
            final_labels: Some(&final_labels),
            ..Expected::allowed("allowed", &annotations)
        },
    );
    assert!(problems.is_empty(), "mutating: {problems:?}");
    // ⌈9.75⌉, 5, ⌈9.75 - 2 s spent⌉.
    assert_eq!(
        received_timeouts(Type::Mutating, &mutating, &backend),
        strings(&[&["10s"], &["5s"], &["8s"]])
    );
    assert!(
        took >= Duration::from_secs(3),
        "one after another: {took:?}"
    );

    let request = integration_pod();
    let (reply, took) = timed_post(
        &proxy,
        "/configurations/validating/timeouts",
        "7s",
        &request,
    )
    .await;
    let none = BTreeMap::new();
    let problems = check_answer(
        Type::Validating,
        &request,
        &reply,
        &Expected::allowed("allowed", &none),
    );
    assert!(problems.is_empty(), "validating: {problems:?}");
    // 5, ⌈6.75⌉, ⌈6.75⌉.
    assert_eq!(
        received_timeouts(Type::Validating, &validating, &backend),
        strings(&[&["5s"], &["7s"], &["7s"]])
    );
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_millis(2500),
        "called at once: {took:?}"
    );
}

/// `timeout_test.go` "timed out client requests skip later mutating webhooks": the first
/// webhook (failurePolicy Ignore) outlives the caller's 3 s and fails open; no time is left, so
/// the later webhooks are not called. kube-apiserver then answers 504 because the *request's*
/// context is done; a chain's `?timeout=` is the chain registration's budget, not the
/// request's, so each later webhook is decided as a call that ran out of time, by its own
/// failurePolicy (docs/operating.md, Chains: the deadline): the second
/// (Ignore) fails open, the third (Fail) fails closed.
#[tokio::test]
async fn a_mutating_chain_out_of_time_decides_later_webhooks_by_their_failure_policy() {
    let backend = TestBackend::start();
    let config = Config {
        version: "v1",
        name: "timeouts",
        hooks: vec![
            sleeper("first.timeouts.example.com", "sleep/5000/noop", "Ignore", 4),
            sleeper(
                "second.timeouts.example.com",
                "sleep/1000/noop",
                "Ignore",
                5,
            ),
            sleeper("third.timeouts.example.com", "sleep/1000/noop", "Fail", 5),
        ],
    };
    let proxy = proxy(&[(Type::Mutating, &config)], &backend);
    let request = integration_pod();
    let (reply, took) =
        timed_post(&proxy, "/configurations/mutating/timeouts", "3s", &request).await;
    let mut annotations = BTreeMap::new();
    for (i, name) in ["first", "second", "third"].into_iter().enumerate() {
        let webhook = format!("{name}.timeouts.example.com");
        let key = format!("mutation_round_0_index_{i}");
        annotations.insert(key, mutation_value("timeouts", &webhook, false));
        if i < 2 {
            annotations.insert(format!("failed-open_round_0_index_{i}"), webhook);
        }
    }
    let rejection = failure(
        "third.timeouts.example.com",
        "failed to call webhook: Post \"",
    );
    let problems = check_answer(
        Type::Mutating,
        &request,
        &reply,
        &Expected {
            decision: "failed-closed",
            rejection: Some(&rejection),
            ..Expected::allowed("", &annotations)
        },
    );
    assert!(problems.is_empty(), "{problems:?}");
    assert!(
        reply.message().ends_with("context deadline exceeded"),
        "{}",
        reply.message()
    );
    assert_eq!(
        received_timeouts(Type::Mutating, &config, &backend),
        strings(&[&["3s"], &[], &[]])
    );
    assert!(
        took >= Duration::from_millis(2500) && took < Duration::from_secs(4),
        "answered at the caller's deadline less the margin: {took:?}"
    );
}

/// kube-apiserver reports the first rejection to *finish* (`return errs[0]` over the channel,
/// `validating/dispatcher.go`), and waits for every webhook (`wg.Wait()`): the faster denial
/// wins although it is second in the list, both webhooks are called, and both sets of warnings
/// are kept.
#[tokio::test]
async fn validating_chain_reports_the_first_denial_to_finish() {
    let backend = TestBackend::start();
    let config = Config {
        version: "v1",
        name: CONFIGURATION,
        hooks: vec![
            Hook::new("slow-deny.example.com", "slow-deny/1000/slow"),
            Hook::new("fast-deny.example.com", "slow-deny/100/fast"),
        ],
    };
    let proxy = proxy(&[(Type::Validating, &config)], &backend);
    let request = Request::new(
        "v1",
        "UPDATE",
        Object::Pod,
        NAMESPACE,
        &labels(&[("pod.name", "my-pod")]),
        false,
    );
    let (reply, took) = timed_post(
        &proxy,
        "/configurations/validating/test-webhooks",
        "10s",
        &request,
    )
    .await;
    // Both webhooks' warnings, in whatever order they finished (checked sorted below).
    let warnings = warnings_of(&reply.json["response"]);
    let (rejection, none) = (
        denial("fast-deny.example.com", Some("fast")),
        BTreeMap::new(),
    );
    let problems = check_answer(
        Type::Validating,
        &request,
        &reply,
        &Expected {
            decision: "denied",
            rejection: Some(&rejection),
            annotations: &none,
            warnings: &warnings,
            final_labels: None,
        },
    );
    assert!(problems.is_empty(), "{problems:?}");
    let mut sorted = warnings.clone();
    sorted.sort();
    assert_eq!(sorted, ["slow-deny 100", "slow-deny 1000"]);
    for (i, hook) in config.hooks.iter().enumerate() {
        assert_eq!(
            backend
                .recorder
                .calls_to(&hook_path(Type::Validating, CONFIGURATION, i, hook)),
            1,
            "{}",
            hook.name
        );
    }
    assert!(
        took >= Duration::from_secs(1),
        "waits for every webhook: {took:?}"
    );
}

/// A caller's `?timeout=` shorter than the 250 ms margin leaves nothing for any call: no
/// webhook is called, and each selected one is decided as a call out of time by its own
/// failurePolicy (client-go fails a request whose context is done before sending it): Ignore
/// fails open, Fail fails closed; with only Ignore webhooks the chain admits.
#[tokio::test]
async fn a_chain_out_of_time_calls_nothing_and_decides_by_failure_policy() {
    let out_of_time = |name: &'static str, ignore_policy_only: bool| {
        let case = Case::new(name)
            .hook(
                Hook::new("disallow.example.com", "disallow").policy("Ignore"),
                refused(),
            )
            .failed_open(0, "disallow.example.com");
        let case = if ignore_policy_only {
            case.hook(
                Hook::new("allow.example.com", "allow").policy("Ignore"),
                refused(),
            )
            .failed_open(1, "allow.example.com")
            .allowed("failed-open")
        } else {
            case.hook(Hook::new("allow.example.com", "allow"), refused())
                .rejected(
                    "failed-closed",
                    failure("allow.example.com", "failed to call webhook: Post \""),
                )
        };
        Case {
            timeout: "200ms",
            ..case
        }
    };
    for ty in [Type::Validating, Type::Mutating] {
        run_table(
            ty,
            &[
                out_of_time("?timeout= below the margin, Ignore then Fail", false),
                out_of_time("?timeout= below the margin, Ignore only", true),
            ],
        )
        .await;
    }
}

/// An unknown configuration is a 404 Status with reason NotFound; a body that is not an
/// AdmissionReview a 400; neither calls a webhook.
#[tokio::test]
async fn unknown_configurations_and_malformed_bodies_are_refused() {
    let backend = TestBackend::start();
    let config = Config {
        version: "v1",
        name: CONFIGURATION,
        hooks: vec![Hook::new("allow.example.com", "allow")],
    };
    let proxy = proxy(
        &[(Type::Validating, &config), (Type::Mutating, &config)],
        &backend,
    );
    let request = Request::new(
        "v1",
        "UPDATE",
        Object::Pod,
        NAMESPACE,
        &labels(&[("pod.name", "my-pod")]),
        false,
    );
    for route in ["validating", "mutating"] {
        let reply = proxy
            .post(
                &format!("/configurations/{route}/no-such-configuration?timeout=10s"),
                &request.body,
            )
            .await;
        assert_eq!(
            reply.status,
            404,
            "{route}: {}",
            String::from_utf8_lossy(&reply.body)
        );
        assert_eq!(reply.json["kind"], "Status", "{route}: {}", reply.json);
        assert_eq!(reply.json["reason"], "NotFound", "{route}: {}", reply.json);
        let reply = proxy
            .post(
                &format!("/configurations/{route}/{CONFIGURATION}?timeout=10s"),
                b"{not json",
            )
            .await;
        assert_eq!(
            reply.status,
            400,
            "{route}: {}",
            String::from_utf8_lossy(&reply.body)
        );
    }
    // The chain of another type is not this one: a mutating configuration named like a
    // validating one is its own chain, and both exist here.
    let reply = proxy
        .post(
            &format!("/configurations/mutating/{CONFIGURATION}?timeout=10s"),
            &request.body,
        )
        .await;
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    assert_eq!(backend.recorder.calls(), 1);
}

/// `POST /configurations/{type}` runs every configuration of the type, sorted by name in byte
/// order as `sort.SliceStable(…, ByName)` sorts them (`cfg-10` before `cfg-9`), webhooks in
/// list order: the validating failed-open indexes and the mutating annotations and final
/// object follow that order, not the files'.
#[tokio::test]
async fn whole_type_chains_run_every_configuration_in_name_order() {
    let backend = TestBackend::start();
    // Validating: listed cfg-9 first; cfg-10 runs first.
    let nine = Config {
        version: "v1",
        name: "cfg-9",
        hooks: vec![Hook::new("internalerr-b.example.com", "internalErr").policy("Ignore")],
    };
    let ten = Config {
        version: "v1",
        name: "cfg-10",
        hooks: vec![
            Hook::new("internalerr-a.example.com", "internalErr").policy("Ignore"),
            Hook::new("allow.example.com", "allow"),
        ],
    };
    // Mutating: settrue (cfg-10) before setfalse (cfg-9): fight ends "false".
    let set_false = Config {
        version: "v1",
        name: "cfg-9",
        hooks: vec![Hook::new("setfalse.example.com", "setfalse")],
    };
    let set_true = Config {
        version: "v1",
        name: "cfg-10",
        hooks: vec![Hook::new("settrue.example.com", "settrue")],
    };
    let proxy = proxy(
        &[
            (Type::Validating, &nine),
            (Type::Validating, &ten),
            (Type::Mutating, &set_false),
            (Type::Mutating, &set_true),
        ],
        &backend,
    );

    let pod = || {
        Request::new(
            "v1",
            "UPDATE",
            Object::Pod,
            NAMESPACE,
            &labels(&[("pod.name", "my-pod")]),
            false,
        )
    };
    let request = pod();
    let (reply, _) = timed_post(&proxy, "/configurations/validating", "10s", &request).await;
    let annotations = BTreeMap::from([
        (
            "failed-open_round_0_index_0".to_string(),
            "internalerr-a.example.com".to_string(),
        ),
        ("allow.example.com_key1".to_string(), "value1".to_string()),
        (
            "failed-open_round_0_index_2".to_string(),
            "internalerr-b.example.com".to_string(),
        ),
    ]);
    let problems = check_answer(
        Type::Validating,
        &request,
        &reply,
        &Expected::allowed("failed-open", &annotations),
    );
    assert!(problems.is_empty(), "validating: {problems:?}");
    for config in [&nine, &ten] {
        for (i, hook) in config.hooks.iter().enumerate() {
            assert_eq!(
                backend
                    .recorder
                    .calls_to(&hook_path(Type::Validating, config.name, i, hook)),
                1,
                "{}",
                hook.name
            );
        }
    }

    let request = pod();
    let (reply, _) = timed_post(&proxy, "/configurations/mutating", "10s", &request).await;
    let annotations = BTreeMap::from([
        (
            "mutation_round_0_index_0".to_string(),
            mutation_value("cfg-10", "settrue.example.com", true),
        ),
        (
            "mutation_round_0_index_1".to_string(),
            mutation_value("cfg-9", "setfalse.example.com", true),
        ),
    ]);
    let final_labels = labels(&[("pod.name", "my-pod"), ("fight", "false")]);
    let problems = check_answer(
        Type::Mutating,
        &request,
        &reply,
        &Expected {
            final_labels: Some(&final_labels),
            ..Expected::allowed("allowed", &annotations)
        },
    );
    assert!(problems.is_empty(), "mutating: {problems:?}");
    for config in [&set_false, &set_true] {
        assert_eq!(
            backend
                .recorder
                .calls_to(&hook_path(Type::Mutating, config.name, 0, &config.hooks[0])),
            1,
            "{}",
            config.hooks[0].name
        );
    }
}
