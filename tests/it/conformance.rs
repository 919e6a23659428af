//! Conformance with kube-apiserver, case by case, through the real server over TLS with a real
//! legacy backend: each case is a webhook, a request, and what kube-apiserver would do (backend
//! called or not, the proxy's decision, the status code). All cases are loaded as one
//! configuration and run one after another against one proxy; the failures are reported together.
//!
//! Every case cites the upstream code it reproduces, as `file function`. Paths are in
//! kubernetes/kubernetes, relative to
//! `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/`: `generic/webhook.go
//! ShouldCallHook` is the function `ShouldCallHook` in
//! `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/generic/webhook.go`. Exceptions: a
//! path starting with `pkg/` is relative to the repository root; one starting with `k8s.io/` is
//! a staging module (`k8s.io/client-go/rest/request.go` is
//! `staging/src/k8s.io/client-go/rest/request.go`); `KEP-3716` is kubernetes/enhancements
//! `keps/sig-api-machinery/3716-admission-webhook-match-conditions` (matchConditions).

use base64::Engine as _;
use serde_json::{json, Value};

use crate::common::{self, TestBackend, TestProxy};

/// What kube-apiserver does with the request, as the proxy must answer it.
#[derive(Clone, Debug, PartialEq)]
enum Expect {
    /// Not called; the request is admitted by this webhook.
    Skip,
    /// Called; the proxy's decision (`allowed`, `denied`, `failed-open`, `failed-closed`) and the
    /// denial's `status.code` if any.
    Call(&'static str, Option<i64>),
    /// Not called; the request fails (`rejected`, `rejected-dry-run`) with this code.
    Reject(&'static str, i64),
}

struct Case {
    name: String,
    cite: &'static str,
    /// `ValidatingWebhookConfiguration` or `MutatingWebhookConfiguration`.
    kind: &'static str,
    /// `v1` or `v1beta1` (admissionregistration).
    config_version: &'static str,
    /// Webhook fields other than name and clientConfig, flow-style YAML lines.
    fields: Vec<String>,
    /// Backend path (example backend behaviour).
    backend: String,
    review: Value,
    /// The caller's `?timeout=` in seconds.
    caller_timeout: u64,
    expect: Expect,
    /// Text the answer's message must contain.
    message: Option<String>,
    /// Text the backend request's path and query must contain (when called).
    backend_query: Option<String>,
    /// AdmissionReview apiVersion the backend must receive (when called).
    backend_version: Option<&'static str>,
}

const V1_DEFAULTS: [&str; 2] = ["sideEffects: None", "admissionReviewVersions: [v1]"];

impl Case {
    fn new(name: impl Into<String>, cite: &'static str) -> Self {
        Case {
            name: name.into(),
            cite,
            kind: "ValidatingWebhookConfiguration",
            config_version: "v1",
            fields: vec![format!("rules: [{}]", rule("*", "*", "*", "*/*", None))],
            backend: "/allow".into(),
            review: request(Req::default()),
            caller_timeout: 10,
            expect: Expect::Call("allowed", None),
            message: None,
            backend_query: None,
            backend_version: None,
        }
    }
    fn rules(mut self, rules: &str) -> Self {
        self.fields[0] = format!("rules: [{rules}]");
        self
    }
    fn field(mut self, field: impl Into<String>) -> Self {
        self.fields.push(field.into());
        self
    }
    fn review(mut self, review: Value) -> Self {
        self.review = review;
        self
    }
    fn backend(mut self, backend: impl Into<String>) -> Self {
        self.backend = backend.into();
        self
    }
    fn expect(mut self, expect: Expect) -> Self {
        self.expect = expect;
        self
    }
    fn message(mut self, text: impl Into<String>) -> Self {
        self.message = Some(text.into());
        self
    }
    fn v1beta1(mut self) -> Self {
        self.config_version = "v1beta1";
        self
    }
    fn mutating(mut self) -> Self {
        self.kind = "MutatingWebhookConfiguration";
        self
    }
    fn webhook_name(&self, i: usize) -> String {
        format!("c{i}.conformance.example.com")
    }
    fn config(&self, i: usize, backend: &TestBackend) -> String {
        let mut fields = self.fields.clone();
        if self.config_version == "v1" {
            for d in V1_DEFAULTS {
                let key = d.split(':').next().unwrap_or_default();
                if !fields.iter().any(|f| f.starts_with(key)) {
                    fields.push(d.to_string());
                }
            }
        }
        format!(
            "---\napiVersion: admissionregistration.k8s.io/{}\nkind: {}\nmetadata: {{name: conformance-{i}}}\nwebhooks:\n- name: {}\n  clientConfig: {}\n{}\n",
            self.config_version,
            self.kind,
            self.webhook_name(i),
            backend.client_config(&self.backend),
            fields
                .iter()
                .map(|f| format!("  {f}"))
                .collect::<Vec<_>>()
                .join("\n")
        )
    }
}

/// One rule, flow-style.
fn rule(ops: &str, groups: &str, versions: &str, resources: &str, scope: Option<&str>) -> String {
    let list = |s: &str| {
        s.split(',')
            .map(|x| format!("{:?}", x.trim()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let scope = scope.map(|s| format!(", scope: {s}")).unwrap_or_default();
    format!(
        "{{operations: [{}], apiGroups: [{}], apiVersions: [{}], resources: [{}]{scope}}}",
        list(ops),
        list(groups),
        list(versions),
        list(resources)
    )
}

/// A request, v1 by default: CREATE of Pod "p" in namespace "production", labelled app=web.
#[derive(Clone)]
struct Req {
    version: &'static str,
    op: &'static str,
    group: &'static str,
    api_version: &'static str,
    kind: &'static str,
    resource: &'static str,
    sub: &'static str,
    namespace: &'static str,
    name: &'static str,
    object: Value,
    old: Value,
    dry_run: bool,
}

impl Default for Req {
    fn default() -> Self {
        Req {
            version: "v1",
            op: "CREATE",
            group: "",
            api_version: "v1",
            kind: "Pod",
            resource: "pods",
            sub: "",
            namespace: "production",
            name: "p",
            object: json!({"metadata": {"name": "p", "labels": {"app": "web"}}}),
            old: Value::Null,
            dry_run: false,
        }
    }
}

impl Req {
    /// UPDATE of the default Pod; oldObject labelled app=web.
    fn update() -> Self {
        Req {
            op: "UPDATE",
            old: labelled(json!({"app": "web"})),
            ..Req::default()
        }
    }
    /// DELETE: object null, oldObject labelled app=web.
    fn delete() -> Self {
        Req {
            op: "DELETE",
            object: Value::Null,
            old: labelled(json!({"app": "web"})),
            ..Req::default()
        }
    }
    /// CONNECT pods/exec: the object is the options kind, without metadata.
    fn connect() -> Self {
        Req {
            op: "CONNECT",
            sub: "exec",
            object: json!({"kind": "PodExecOptions", "apiVersion": "v1", "command": ["sh"]}),
            ..Req::default()
        }
    }
}

/// A table cell: `true` means kube-apiserver calls the webhook (which allows), else skips it.
fn called_or_skipped(called: bool) -> Expect {
    if called {
        Expect::Call("allowed", None)
    } else {
        Expect::Skip
    }
}

fn request(r: Req) -> Value {
    let gvk = json!({"group": r.group, "version": r.api_version, "kind": r.kind});
    let gvr = json!({"group": r.group, "version": r.api_version, "resource": r.resource});
    let mut request = json!({
        "uid": "0d7a5e2c-1111-4a4a-9b9b-123456789abc",
        "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
        "name": r.name, "namespace": r.namespace, "operation": r.op,
        "userInfo": {"username": "jane", "uid": "42", "groups": ["devs", "system:authenticated"]},
        "object": r.object, "oldObject": r.old, "dryRun": r.dry_run, "options": null
    });
    if !r.sub.is_empty() {
        request["subResource"] = json!(r.sub);
        request["requestSubResource"] = json!(r.sub);
    }
    json!({"kind": "AdmissionReview", "apiVersion": format!("admission.k8s.io/{}", r.version), "request": request})
}

fn labelled(labels: Value) -> Value {
    json!({"metadata": {"name": "p", "labels": labels}})
}

/// `/raw/{code}/{body}` on the example backend.
fn raw(code: u16, body: &str) -> String {
    format!(
        "/raw/{code}/{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(body)
    )
}

// ---------------------------------------------------------------------------------------------
// The cases, by section.
// ---------------------------------------------------------------------------------------------

/// `predicates/rules/rules.go` `Matcher.resource` and `splitResource`: the resources/subresources
/// table (`pods/*` also matches `pods`; `*` matches no subresource).
fn resources() -> Vec<Case> {
    let requests = [
        ("pods", ""),
        ("pods", "status"),
        ("pods", "log"),
        ("services", ""),
        ("services", "status"),
    ];
    // Expected, by hand from the notes: one row per rule entry, one column per request.
    let table: [(&str, [bool; 5]); 8] = [
        ("pods", [true, false, false, false, false]),
        ("pods/*", [true, true, true, false, false]),
        ("pods/status", [false, true, false, false, false]),
        ("*", [true, false, false, true, false]),
        ("*/status", [false, true, false, false, true]),
        ("*/*", [true, true, true, true, true]),
        ("pods/log", [false, false, true, false, false]),
        ("services/*", [false, false, false, true, true]),
    ];
    let mut cases = Vec::new();
    for (entry, row) in table {
        for ((resource, sub), called) in requests.iter().zip(row) {
            let kind = if *resource == "pods" {
                "Pod"
            } else {
                "Service"
            };
            cases.push(
                Case::new(
                    format!(
                        "resources [{entry}] vs {resource}{}{sub}",
                        if sub.is_empty() { "" } else { "/" }
                    ),
                    "predicates/rules/rules.go Matcher.Matches",
                )
                .rules(&rule("*", "", "v1", entry, None))
                .review(request(Req {
                    op: "UPDATE",
                    resource,
                    sub,
                    kind,
                    old: labelled(json!({"app": "web"})),
                    ..Req::default()
                }))
                .expect(called_or_skipped(called)),
            );
        }
    }
    cases
}

/// `predicates/rules/rules.go` `Matcher.operation`: operations, including CONNECT and `*`.
fn operations() -> Vec<Case> {
    let requests: [(&str, Req); 4] = [
        ("CREATE", Req::default()),
        ("UPDATE", Req::update()),
        ("DELETE", Req::delete()),
        ("CONNECT", Req::connect()),
    ];
    let table: [(&str, [bool; 4]); 6] = [
        ("CREATE", [true, false, false, false]),
        ("UPDATE", [false, true, false, false]),
        ("DELETE", [false, false, true, false]),
        ("CONNECT", [false, false, false, true]),
        ("*", [true, true, true, true]),
        ("UPDATE,DELETE", [false, true, true, false]),
    ];
    let mut cases = Vec::new();
    for (ops, row) in table {
        for ((op, req), called) in requests.iter().zip(row) {
            cases.push(
                Case::new(
                    format!("operations [{ops}] vs {op}"),
                    "predicates/rules/rules.go Matcher.Matches",
                )
                .rules(&rule(ops, "*", "*", "*/*", None))
                .review(request(req.clone()))
                .expect(called_or_skipped(called)),
            );
        }
    }
    cases
}

/// `predicates/rules/rules.go` `Matcher.group`, `Matcher.version` (`exactOrWildcard`): apiGroups
/// and apiVersions compare exactly, `*` is the only wildcard.
fn groups_and_versions() -> Vec<Case> {
    let requests = [
        ("", "v1", "pods"),
        ("apps", "v1", "deployments"),
        ("batch", "v1beta1", "cronjobs"),
    ];
    let table: [(&str, &str, [bool; 3]); 7] = [
        ("", "*", [true, false, false]),
        ("apps", "*", [false, true, false]),
        ("*", "*", [true, true, true]),
        ("apps,batch", "*", [false, true, true]),
        ("*", "v1", [true, true, false]),
        ("*", "v1beta1", [false, false, true]),
        ("*", "V1", [false, false, false]),
    ];
    let mut cases = Vec::new();
    for (groups, versions, row) in table {
        for ((group, version, resource), called) in requests.iter().zip(row) {
            cases.push(
                Case::new(
                    format!("apiGroups [{groups}] apiVersions [{versions}] vs {group}/{version}"),
                    "predicates/rules/rules.go Matcher.Matches",
                )
                // The exact pass; the Equivalent pass is `tests/it/equivalent.rs`'s.
                .field("matchPolicy: Exact")
                .rules(&rule("*", groups, versions, "*", None))
                .review(request(Req {
                    group,
                    api_version: version,
                    resource,
                    kind: "Thing",
                    ..Req::default()
                }))
                .expect(called_or_skipped(called)),
            );
        }
    }
    cases
}

/// `predicates/rules/rules.go` `Matcher.scope`: scope, with the Namespace resource (any
/// subresource) always cluster-scoped.
fn scopes() -> Vec<Case> {
    let ns = |op: &'static str, namespace: &'static str, sub: &'static str| Req {
        op,
        kind: "Namespace",
        resource: "namespaces",
        namespace,
        sub,
        name: "team-a",
        object: json!({"metadata": {"name": "team-a"}}),
        old: if op == "CREATE" {
            Value::Null
        } else {
            json!({"metadata": {"name": "team-a"}})
        },
        ..Req::default()
    };
    let requests: [(&str, Req); 6] = [
        ("namespaced pod", Req::default()),
        (
            "cluster-scoped node",
            Req {
                kind: "Node",
                resource: "nodes",
                namespace: "",
                ..Req::default()
            },
        ),
        ("Namespace CREATE", ns("CREATE", "", "")),
        (
            "Namespace UPDATE (namespace = own name)",
            ns("UPDATE", "team-a", ""),
        ),
        ("namespaces/finalize", ns("UPDATE", "team-a", "finalize")),
        ("namespaces/status", ns("UPDATE", "team-a", "status")),
    ];
    let table: [(&str, [bool; 6]); 3] = [
        ("Namespaced", [true, false, false, false, false, false]),
        ("Cluster", [false, true, true, true, true, true]),
        ("\"*\"", [true, true, true, true, true, true]),
    ];
    let mut cases = Vec::new();
    for (scope, row) in table {
        for ((what, req), called) in requests.iter().zip(row) {
            cases.push(
                Case::new(
                    format!("scope {scope} vs {what}"),
                    "predicates/rules/rules.go Matcher.Matches",
                )
                .rules(&rule("*", "*", "*", "*/*", Some(scope)))
                .review(request(req.clone()))
                .expect(called_or_skipped(called)),
            );
        }
    }
    cases
}

/// `predicates/namespace/matcher.go` `MatchNamespaceSelector`, `GetNamespaceLabels`, and
/// `generic/webhook.go` `ShouldCallHook` (a lookup error surfaces only once a rule matches):
/// namespaceSelector and where the labels come from. Operators: `Requirement.Matches` in
/// `k8s.io/apimachinery/pkg/labels/selector.go`.
fn namespace_selectors() -> Vec<Case> {
    let prod = "namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: production}}";
    let env = "namespaceSelector: {matchLabels: {env: prod}}";
    let not_system = "namespaceSelector: {matchExpressions: [{key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system, kube-public]}]}";
    let ns = |op: &'static str, namespace: &'static str, sub: &'static str, labels: Value| Req {
        op,
        kind: "Namespace",
        resource: "namespaces",
        namespace,
        sub,
        name: "production",
        object: if op == "DELETE" {
            Value::Null
        } else {
            json!({"metadata": {"name": "production", "labels": labels}})
        },
        old: if op == "CREATE" {
            Value::Null
        } else {
            json!({"metadata": {"name": "production"}})
        },
        ..Req::default()
    };
    let in_ns = |namespace| Req {
        namespace,
        ..Req::default()
    };
    vec![
        Case::new(
            "stored labels match",
            "predicates/namespace/matcher.go MatchNamespaceSelector",
        )
        .field(prod),
        Case::new(
            "stored labels do not match",
            "predicates/namespace/matcher.go MatchNamespaceSelector",
        )
        .field(prod)
        .review(request(in_ns("kube-system")))
        .expect(Expect::Skip),
        Case::new(
            "NotIn matches production",
            "predicates/namespace/matcher.go MatchNamespaceSelector",
        )
        .field(not_system),
        Case::new(
            "NotIn excludes kube-system",
            "predicates/namespace/matcher.go MatchNamespaceSelector",
        )
        .field(not_system)
        .review(request(in_ns("kube-system")))
        .expect(Expect::Skip),
        Case::new(
            "unknown namespace, rule matches: 404",
            "predicates/namespace/matcher.go MatchNamespaceSelector",
        )
        .field(prod)
        .review(request(in_ns("ghost")))
        .expect(Expect::Reject("rejected", 404))
        .message("namespaces \"ghost\" not found"),
        Case::new(
            "unknown namespace with failurePolicy Ignore is still 404",
            "generic/webhook.go ShouldCallHook",
        )
        .field(prod)
        .field("failurePolicy: Ignore")
        .review(request(in_ns("ghost")))
        .expect(Expect::Reject("rejected", 404)),
        Case::new(
            "unknown namespace, no rule matches: skip",
            "generic/webhook.go ShouldCallHook",
        )
        .field(prod)
        .rules(&rule("*", "", "v1", "services", None))
        .review(request(in_ns("ghost")))
        .expect(Expect::Skip),
        Case::new(
            "unknown namespace, objectSelector says no: skip",
            "generic/webhook.go ShouldCallHook",
        )
        .field(prod)
        .field("objectSelector: {matchLabels: {app: db}}")
        .review(request(in_ns("ghost")))
        .expect(Expect::Skip),
        Case::new(
            "empty selector never looks the namespace up",
            "predicates/namespace/matcher.go MatchNamespaceSelector",
        )
        .field("namespaceSelector: {}")
        .review(request(in_ns("ghost"))),
        Case::new(
            "cluster-scoped object is never excluded",
            "predicates/namespace/matcher.go MatchNamespaceSelector",
        )
        .field(env)
        .review(request(Req {
            kind: "Node",
            resource: "nodes",
            namespace: "",
            ..Req::default()
        })),
        Case::new(
            "Namespace CREATE reads its own labels (match)",
            "predicates/namespace/matcher.go GetNamespaceLabels",
        )
        .field(env)
        .review(request(ns("CREATE", "", "", json!({"env": "prod"})))),
        Case::new(
            "Namespace CREATE reads its own labels (no match)",
            "predicates/namespace/matcher.go GetNamespaceLabels",
        )
        .field(env)
        .review(request(ns("CREATE", "", "", json!({"env": "dev"}))))
        .expect(Expect::Skip),
        Case::new(
            "Namespace UPDATE reads its own new labels",
            "predicates/namespace/matcher.go GetNamespaceLabels",
        )
        .field(env)
        .review(request(ns(
            "UPDATE",
            "production",
            "",
            json!({"env": "prod"}),
        ))),
        Case::new(
            "Namespace DELETE reads the stored labels",
            "predicates/namespace/matcher.go GetNamespaceLabels",
        )
        .field(env)
        .review(request(ns("DELETE", "production", "", Value::Null)))
        .expect(Expect::Skip),
        Case::new(
            "namespaces/status reads the stored labels, not the object",
            "predicates/namespace/matcher.go GetNamespaceLabels",
        )
        .field(env)
        .review(request(ns(
            "UPDATE",
            "production",
            "status",
            json!({"env": "prod"}),
        )))
        .expect(Expect::Skip),
        Case::new(
            "namespaces/finalize reads the stored labels",
            "predicates/namespace/matcher.go GetNamespaceLabels",
        )
        .field(prod)
        .review(request(ns("UPDATE", "production", "finalize", json!({})))),
        Case::new(
            "a 'namespaces' resource of another group counts as Namespace",
            "predicates/namespace/matcher.go GetNamespaceLabels",
        )
        .field(env)
        .review(request(Req {
            group: "example.com",
            kind: "Namespace",
            resource: "namespaces",
            namespace: "",
            object: labelled(json!({"env": "dev"})),
            ..Req::default()
        }))
        .expect(Expect::Skip),
    ]
}

/// `predicates/object/matcher.go` `MatchObjectSelector` (and `Requirement.Matches` in
/// `k8s.io/apimachinery/pkg/labels/selector.go`): objectSelector on object and oldObject, every
/// operator.
fn object_selectors() -> Vec<Case> {
    let objects: [(&str, Req); 6] = [
        ("CREATE app=web", Req::default()),
        (
            "CREATE app=db",
            Req {
                object: labelled(json!({"app": "db"})),
                ..Req::default()
            },
        ),
        (
            "CREATE without labels",
            Req {
                object: json!({"metadata": {"name": "p"}}),
                ..Req::default()
            },
        ),
        ("CONNECT options without metadata", Req::connect()),
        ("DELETE (object null, old app=web)", Req::delete()),
        (
            "UPDATE new app=db, old app=web",
            Req {
                object: labelled(json!({"app": "db"})),
                ..Req::update()
            },
        ),
    ];
    let table: [(&str, [bool; 6]); 7] = [
        (
            "{matchLabels: {app: web}}",
            [true, false, false, false, true, true],
        ),
        (
            "{matchExpressions: [{key: app, operator: In, values: [web, db]}]}",
            [true, true, false, false, true, true],
        ),
        (
            "{matchExpressions: [{key: app, operator: NotIn, values: [web]}]}",
            [false, true, true, false, false, true],
        ),
        (
            "{matchExpressions: [{key: app, operator: Exists}]}",
            [true, true, false, false, true, true],
        ),
        (
            "{matchExpressions: [{key: app, operator: DoesNotExist}]}",
            [false, false, true, false, false, false],
        ),
        (
            "{matchLabels: {app: web}, matchExpressions: [{key: tier, operator: DoesNotExist}]}",
            [true, false, false, false, true, true],
        ),
        ("{}", [true, true, true, true, true, true]),
    ];
    let mut cases = Vec::new();
    for (selector, row) in table {
        for ((what, req), called) in objects.iter().zip(row) {
            cases.push(
                Case::new(
                    format!("objectSelector {selector} vs {what}"),
                    "predicates/object/matcher.go MatchObjectSelector",
                )
                .field(format!("objectSelector: {selector}"))
                .review(request(req.clone()))
                .expect(called_or_skipped(called)),
            );
        }
    }
    cases
}

/// `predicates/rules/rules.go` `IsExemptAdmissionConfigurationResource`, checked first by
/// `generic/webhook.go` `Dispatch`: admission configuration kinds are exempt, by kind and group.
fn exemptions() -> Vec<Case> {
    let mut cases = Vec::new();
    for kind in [
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "MutatingAdmissionPolicy",
        "MutatingAdmissionPolicyBinding",
    ] {
        for version in ["v1", "v1beta1"] {
            cases.push(
                Case::new(
                    format!("exempt {kind} {version}"),
                    "predicates/rules/rules.go IsExemptAdmissionConfigurationResource",
                )
                .review(request(Req {
                    group: "admissionregistration.k8s.io",
                    api_version: version,
                    kind,
                    resource: "things",
                    namespace: "",
                    ..Req::default()
                }))
                .expect(Expect::Skip),
            );
        }
    }
    cases.push(
        Case::new(
            "same kind in another group is not exempt",
            "predicates/rules/rules.go IsExemptAdmissionConfigurationResource",
        )
        .review(request(Req {
            group: "example.com",
            kind: "ValidatingWebhookConfiguration",
            resource: "validatingwebhookconfigurations",
            namespace: "",
            ..Req::default()
        })),
    );
    cases
}

/// A `matchConditions` field naming the expressions c0, c1, ...
fn match_conditions_field(list: &[&str]) -> String {
    let items: Vec<String> = list
        .iter()
        .enumerate()
        .map(|(i, e)| format!("{{name: c{i}, expression: {e:?}}}"))
        .collect();
    format!("matchConditions: [{}]", items.join(", "))
}

/// `matchconditions/matcher.go` `Match` (any `false` wins, then failurePolicy),
/// `generic/webhook.go` `ShouldCallHook` (after the rules; an error is a 403 Forbidden),
/// KEP-3716: matchConditions.
fn match_conditions() -> Vec<Case> {
    let cond = match_conditions_field;
    let err = "object.spec.missing == 1";
    vec![
        Case::new("true calls", "matchconditions/matcher.go Match").field(cond(&["true"])),
        Case::new("false skips", "matchconditions/matcher.go Match")
            .field(cond(&["false"])).expect(Expect::Skip),
        Case::new("object labels", "KEP-3716").field(cond(&["object.metadata.labels.app == 'web'"])),
        Case::new("oldObject is null on CREATE", "matchconditions/matcher.go Match")
            .field(cond(&["oldObject == null"])),
        Case::new("namespaceObject is null for webhooks", "matchconditions/matcher.go Match").field(cond(&["namespaceObject == null"])),
        Case::new("request.userInfo", "matchconditions/matcher.go Match").field(cond(&["request.userInfo.username == 'jane' && 'devs' in request.userInfo.groups"])),
        Case::new("request fields", "matchconditions/matcher.go Match").field(cond(&["request.namespace == 'production' && request.resource.resource == 'pods' && request.operation == 'CREATE' && request.subResource == ''"])),
        Case::new("exclude kubelet requests (KEP example)", "KEP-3716").field(cond(&["!('system:nodes' in request.userInfo.groups)"])),
        Case::new("any false wins over an error under Fail", "matchconditions/matcher.go Match").field(cond(&[err, "false"])).expect(Expect::Skip),
        Case::new("a false after an error still wins", "matchconditions/matcher.go Match").field(cond(&["false", err])).expect(Expect::Skip),
        Case::new("error under Fail rejects 403", "generic/webhook.go ShouldCallHook")
            .field(cond(&[err])).expect(Expect::Reject("rejected", 403))
            .message(format!("pods \"p\" is forbidden: expression '{err}' resulted in error")),
        Case::new("error with a true under Fail rejects", "matchconditions/matcher.go Match").field(cond(&["true", err])).expect(Expect::Reject("rejected", 403)),
        Case::new("two errors are aggregated", "matchconditions/matcher.go Match").field(cond(&[err, err])).expect(Expect::Reject("rejected", 403)).message("is forbidden: [expression"),
        Case::new("error under Ignore skips", "matchconditions/matcher.go Match").field(cond(&[err])).field("failurePolicy: Ignore").expect(Expect::Skip),
        Case::new("v1beta1 default failurePolicy Ignore skips on error", "pkg/apis/admissionregistration/v1beta1/defaults.go").field(cond(&[err])).v1beta1().expect(Expect::Skip),
        Case::new("forbidden message names resource.group", "generic/webhook.go ShouldCallHook")
            .field(cond(&[err]))
            .review(request(Req { group: "apps", kind: "Deployment", resource: "deployments", ..Req::default() }))
            .expect(Expect::Reject("rejected", 403)).message("deployments.apps \"p\" is forbidden"),
        Case::new(
            "conditions run after rules: no rule, no error",
            "generic/webhook.go ShouldCallHook",
        )
            .field(cond(&[err])).rules(&rule("*", "", "v1", "services", None)).expect(Expect::Skip),
        Case::new("regex matches", "k8s.io/apiserver/pkg/cel/environment/base.go")
            .field(cond(&["object.metadata.name.matches('^p$')"])),
        Case::new("optional field access", "k8s.io/apiserver/pkg/cel/environment/base.go").field(cond(&["object.?spec.?nodeName.orValue('') == ''"])),
    ]
    .into_iter()
    .chain(cost_limits())
    .collect()
}

/// `k8s.io/apiserver/pkg/apis/cel/config.go` (`PerCallLimit`,
/// `RuntimeCELCostBudgetMatchConditions`) and `matchconditions/matcher.go` `Match`: the per-call
/// limit (1,000,000) is a per-condition error; the per-webhook budget (2,500,000) fails the whole
/// evaluation, even over an earlier `false`.
fn cost_limits() -> Vec<Case> {
    let cond = match_conditions_field;
    // `contains` costs ceil(len/10) × ceil(sub/10): 2 × 2 on 20 characters; 1,050 × 1,050
    // = 1,102,500 on 10,500 (over the per-call limit; two fit the budget, three do not).
    let contains = "object.metadata.annotations.a.contains(object.metadata.annotations.b)";
    let annotated = |len: usize| {
        request(Req {
            object: json!({"metadata": {"name": "p", "annotations": {"a": "x".repeat(len), "b": "x".repeat(len)}}}),
            ..Req::default()
        })
    };
    // A comprehension: 1,000 iterations of 300 × 300 on 3,000 characters.
    let ten = "[0,1,2,3,4,5,6,7,8,9]";
    let looped = format!("{ten}.all(a, {ten}.all(b, {ten}.all(c, {contains})))");
    let cancelled = "resulted in error: operation cancelled: actual cost limit exceeded";
    let budget = "is forbidden: validation failed due to running out of cost budget, no further validation rules will be run";
    let big = || annotated(10_500);
    vec![
        Case::new(
            "short strings are cheap: called",
            "k8s.io/apiserver/pkg/apis/cel/config.go",
        )
        .field(cond(&[contains]))
        .review(annotated(20)),
        Case::new(
            "per-call limit under Fail rejects 403",
            "k8s.io/apiserver/pkg/apis/cel/config.go",
        )
        .field(cond(&[contains]))
        .review(big())
        .expect(Expect::Reject("rejected", 403))
        .message(cancelled),
        Case::new(
            "per-call limit in a comprehension",
            "k8s.io/apiserver/pkg/apis/cel/config.go",
        )
        .field(cond(&[&looped]))
        .review(annotated(3_000))
        .expect(Expect::Reject("rejected", 403))
        .message(cancelled),
        Case::new(
            "per-call limit under Ignore skips",
            "matchconditions/matcher.go Match",
        )
        .field(cond(&[contains]))
        .review(big())
        .field("failurePolicy: Ignore")
        .expect(Expect::Skip),
        Case::new(
            "per-call limit loses to a false",
            "matchconditions/matcher.go Match",
        )
        .field(cond(&[contains, "false"]))
        .review(big())
        .expect(Expect::Skip),
        Case::new(
            "two cancelled conditions stay within the budget",
            "k8s.io/apiserver/pkg/apis/cel/config.go",
        )
        .field(cond(&[contains, contains]))
        .review(big())
        .expect(Expect::Reject("rejected", 403))
        .message("is forbidden: [expression"),
        Case::new(
            "budget out under Fail rejects even after a false",
            "matchconditions/matcher.go Match",
        )
        .field(cond(&["false", contains, contains, contains]))
        .review(big())
        .expect(Expect::Reject("rejected", 403))
        .message(budget),
        Case::new(
            "budget out under Ignore skips",
            "matchconditions/matcher.go Match",
        )
        .field(cond(&[contains, contains, contains]))
        .review(big())
        .field("failurePolicy: Ignore")
        .expect(Expect::Skip),
        Case::new(
            "one step over the whole budget is a budget error",
            "k8s.io/apiserver/pkg/apis/cel/config.go",
        )
        .field(cond(&[contains]))
        .review(annotated(20_000))
        .expect(Expect::Reject("rejected", 403))
        .message(budget),
    ]
}

/// docs/reference/cel.md "CEL compatibility": every listed function, through the server, as a matchCondition
/// (call) and negated (skip). The authz library needs an API server to answer its checks: its
/// rows run through the binary in `authorizer.rs` and with decisions in `cel_env`'s tests.
fn cel_library() -> Vec<Case> {
    let mut cases = Vec::new();
    let functions = admission_proxy::matching::cel_env::FUNCTIONS
        .iter()
        .filter(|f| !f.library.starts_with("Kubernetes authz"));
    for f in functions {
        let condition = |e: String| format!("matchConditions: [{{name: f, expression: {e:?}}}]");
        cases.push(
            Case::new(
                format!("CEL {} ({})", f.name, f.library),
                "k8s.io/apiserver/pkg/cel/environment/base.go",
            )
            .field(condition(f.example.to_string())),
        );
        cases.push(
            Case::new(
                format!("CEL {} negated", f.name),
                "k8s.io/apiserver/pkg/cel/environment/base.go",
            )
            .field(condition(format!("!({})", f.example)))
            .expect(Expect::Skip),
        );
    }
    cases
}

/// `pkg/apis/admissionregistration/v1/defaults.go` and `.../v1beta1/defaults.go`: v1 and v1beta1
/// defaults.
fn defaults() -> Vec<Case> {
    let dead = "/status/503";
    vec![
        Case::new(
            "v1 failurePolicy defaults to Fail",
            "pkg/apis/admissionregistration/v1/defaults.go",
        )
        .backend(dead)
        .expect(Expect::Call("failed-closed", Some(500))),
        Case::new(
            "v1beta1 failurePolicy defaults to Ignore",
            "pkg/apis/admissionregistration/v1beta1/defaults.go",
        )
        .v1beta1()
        .backend(dead)
        .expect(Expect::Call("failed-open", None)),
        Case::new(
            "v1beta1 admissionReviewVersions defaults to [v1beta1]",
            "pkg/apis/admissionregistration/v1beta1/defaults.go",
        )
        .v1beta1()
        .backend("/only/v1beta1/allow"),
        Case::new(
            "v1beta1 sideEffects defaults to Unknown: dry run rejected",
            "pkg/apis/admissionregistration/v1beta1/defaults.go",
        )
        .v1beta1()
        .review(request(Req {
            dry_run: true,
            ..Req::default()
        }))
        .expect(Expect::Reject("rejected-dry-run", 400)),
        {
            let mut c = Case::new(
                "v1 timeoutSeconds defaults to 10",
                "pkg/apis/admissionregistration/v1/defaults.go",
            );
            c.caller_timeout = 30;
            c.backend_query = Some("?timeout=10s".into());
            c
        },
        {
            let mut c = Case::new(
                "v1beta1 timeoutSeconds defaults to 30",
                "pkg/apis/admissionregistration/v1beta1/defaults.go",
            )
            .v1beta1();
            c.caller_timeout = 30;
            c.backend_query = Some("?timeout=30s".into());
            c
        },
        Case::new(
            "v1beta1 rules scope defaults to *",
            "pkg/apis/admissionregistration/v1beta1/defaults.go",
        )
        .v1beta1()
        .review(request(Req {
            kind: "Node",
            resource: "nodes",
            namespace: "",
            ..Req::default()
        })),
    ]
}

/// `request/admissionreview.go` `CreateAdmissionObjects`: AdmissionReview version negotiation; the
/// caller is answered in its own version.
fn versions() -> Vec<Case> {
    let mut cases = Vec::new();
    for (list, sent) in [
        ("[v1]", "v1"),
        ("[v1beta1]", "v1beta1"),
        ("[v1, v1beta1]", "v1"),
        ("[v1beta1, v1]", "v1beta1"),
        ("[v2, v1]", "v1"),
        ("[v1alpha1, v1beta1]", "v1beta1"),
    ] {
        for caller in ["v1", "v1beta1"] {
            let mut c = Case::new(
                format!("admissionReviewVersions {list}, caller {caller}"),
                "request/admissionreview.go CreateAdmissionObjects",
            )
            .field(format!("admissionReviewVersions: {list}"))
            .backend(format!("/only/{sent}/allow"))
            .review(request(Req {
                version: caller,
                ..Req::default()
            }));
            c.backend_version = Some(if sent == "v1" {
                "admission.k8s.io/v1"
            } else {
                "admission.k8s.io/v1beta1"
            });
            cases.push(c);
        }
    }
    cases
}

/// `request/admissionreview.go` `VerifyAdmissionResponse`, called by `validating/dispatcher.go`
/// `callHook` after `Result.Into` has decoded the answer into the version sent: response
/// verification, in order, before `allowed` is read. Failures are call failures, so
/// failurePolicy applies (`validating/dispatcher.go` `Dispatch`).
fn verification() -> Vec<Case> {
    let v1 = |response: &str| {
        raw(
            200,
            &format!(
                r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{response}}}"#
            ),
        )
    };
    let beta = |response: &str| {
        raw(
            200,
            &format!(
                r#"{{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","response":{response}}}"#
            ),
        )
    };
    let v1beta1_caller = || {
        request(Req {
            version: "v1beta1",
            ..Req::default()
        })
    };
    let patch = base64::engine::general_purpose::STANDARD
        .encode(r#"[{"op":"add","path":"/metadata/annotations","value":{"a":"b"}}]"#);
    vec![
        Case::new(
            "response absent",
            "request/admissionreview.go VerifyAdmissionResponse",
        )
        .backend(raw(
            200,
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
        ))
        .expect(Expect::Call("failed-closed", Some(500)))
        .message("webhook response was absent"),
        Case::new(
            "uid mismatch",
            "request/admissionreview.go VerifyAdmissionResponse",
        )
        .backend(v1(r#"{"uid":"other","allowed":true}"#))
        .expect(Expect::Call("failed-closed", Some(500)))
        .message("expected response.uid="),
        Case::new(
            "uid mismatch on a denial fails open under Ignore",
            "validating/dispatcher.go Dispatch",
        )
        .field("failurePolicy: Ignore")
        .backend(v1(r#"{"uid":"other","allowed":false}"#))
        .expect(Expect::Call("failed-open", None)),
        Case::new(
            "apiVersion and kind missing",
            "request/admissionreview.go VerifyAdmissionResponse",
        )
        .backend(raw(200, r#"{"response":{"uid":"$UID","allowed":true}}"#))
        .expect(Expect::Call("failed-closed", Some(500)))
        .message(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got /, Kind=",
        ),
        Case::new(
            "v1 request answered in v1beta1",
            "validating/dispatcher.go callHook",
        )
        .backend(beta(r#"{"uid":"$UID","allowed":true}"#))
        .expect(Expect::Call("failed-closed", Some(500))),
        Case::new(
            "validating webhook returns a patch",
            "request/admissionreview.go VerifyAdmissionResponse",
        )
        .backend(v1(&format!(
            r#"{{"uid":"$UID","allowed":true,"patchType":"JSONPatch","patch":"{patch}"}}"#
        )))
        .expect(Expect::Call("failed-closed", Some(500)))
        .message("validating webhook may not return response.patch"),
        Case::new(
            "mutating: patch without patchType",
            "request/admissionreview.go VerifyAdmissionResponse",
        )
        .mutating()
        .backend(v1(&format!(
            r#"{{"uid":"$UID","allowed":true,"patch":"{patch}"}}"#
        )))
        .expect(Expect::Call("failed-closed", Some(500)))
        .message("webhook returned response.patch but not response.patchType"),
        Case::new(
            "mutating: patchType without patch",
            "request/admissionreview.go VerifyAdmissionResponse",
        )
        .mutating()
        .backend(v1(
            r#"{"uid":"$UID","allowed":true,"patchType":"JSONPatch"}"#,
        ))
        .expect(Expect::Call("failed-closed", Some(500)))
        .message("webhook returned response.patchType but not response.patch"),
        Case::new(
            "mutating: empty patchType",
            "request/admissionreview.go VerifyAdmissionResponse",
        )
        .mutating()
        .backend(v1(&format!(
            r#"{{"uid":"$UID","allowed":true,"patchType":"","patch":"{patch}"}}"#
        )))
        .expect(Expect::Call("failed-closed", Some(500)))
        .message("invalid response.patchType"),
        Case::new(
            "missing allowed is a denial",
            "validating/dispatcher.go callHook",
        )
        .backend(v1(r#"{"uid":"$UID"}"#))
        .expect(Expect::Call("denied", Some(400))),
        Case::new(
            "'Allowed' (wrong case) is a denial",
            "validating/dispatcher.go callHook",
        )
        .backend(v1(r#"{"uid":"$UID","Allowed":true}"#))
        .expect(Expect::Call("denied", Some(400))),
        Case::new(
            "v1beta1 answer may omit uid, apiVersion and kind",
            "request/admissionreview.go VerifyAdmissionResponse",
        )
        .field("admissionReviewVersions: [v1beta1]")
        .review(v1beta1_caller())
        .backend(raw(200, r#"{"response":{"allowed":true}}"#)),
        Case::new(
            "v1beta1 answer with wrong apiVersion fails",
            "validating/dispatcher.go callHook",
        )
        .field("admissionReviewVersions: [v1beta1]")
        .review(v1beta1_caller())
        .backend(v1(r#"{"uid":"$UID","allowed":true}"#))
        .expect(Expect::Call("failed-closed", Some(500))),
        Case::new(
            "v1beta1 validating patch is ignored",
            "request/admissionreview.go VerifyAdmissionResponse",
        )
        .field("admissionReviewVersions: [v1beta1]")
        .review(v1beta1_caller())
        .backend(beta(&format!(
            r#"{{"uid":"$UID","allowed":true,"patch":"{patch}"}}"#
        ))),
    ]
}

/// `errors/statuserror.go` `ToStatusErr`: denials and their status codes; failurePolicy does not
/// apply to them (`validating/dispatcher.go` `Dispatch`).
fn denials() -> Vec<Case> {
    let deny = |status: &str| {
        raw(
            200,
            &format!(
                r#"{{"apiVersion":"$API","kind":"AdmissionReview","response":{{"uid":"$UID","allowed":false,"status":{status}}}}}"#
            ),
        )
    };
    vec![
        Case::new("denial keeps 403", "errors/statuserror.go ToStatusErr").backend(deny(r#"{"code":403,"message":"no"}"#)).expect(Expect::Call("denied", Some(403))),
        Case::new("denial without code is 400", "errors/statuserror.go ToStatusErr").backend(deny(r#"{"message":"no"}"#)).expect(Expect::Call("denied", Some(400))),
        Case::new("denial with code 200 is 400", "errors/statuserror.go ToStatusErr").backend(deny(r#"{"code":200,"message":"no"}"#)).expect(Expect::Call("denied", Some(400))),
        Case::new("denial with code 399 is 400", "errors/statuserror.go ToStatusErr").backend(deny(r#"{"code":399}"#)).expect(Expect::Call("denied", Some(400))),
        Case::new("denial keeps 429", "errors/statuserror.go ToStatusErr").backend(deny(r#"{"code":429,"message":"slow down"}"#)).expect(Expect::Call("denied", Some(429))),
        Case::new("denial keeps codes above 599", "errors/statuserror.go ToStatusErr").backend(deny(r#"{"code":700}"#)).expect(Expect::Call("denied", Some(700))),
        Case::new("denial without status is 400", "errors/statuserror.go ToStatusErr").backend(raw(200, r#"{"apiVersion":"$API","kind":"AdmissionReview","response":{"uid":"$UID","allowed":false}}"#)).expect(Expect::Call("denied", Some(400))),
        Case::new("denial under Ignore is still a denial", "validating/dispatcher.go Dispatch").field("failurePolicy: Ignore").backend("/deny").expect(Expect::Call("denied", Some(403))),
    ]
}

/// `k8s.io/client-go/rest/request.go` `transformResponse` and `Result.Into` (called from
/// `validating/dispatcher.go` `callHook`), with the any-format decoder of
/// `k8s.io/apiserver/pkg/util/webhook/client.go` `NewClientManager`: HTTP status and body of the
/// backend's answer.
fn http_answers() -> Vec<Case> {
    let allow = r#"{"apiVersion":"$API","kind":"AdmissionReview","response":{"uid":"$UID","allowed":true}}"#;
    let mut cases = vec![
        Case::new(
            "empty body is a call failure",
            "k8s.io/client-go/rest/request.go Result.Into",
        )
        .backend("/empty")
        .expect(Expect::Call("failed-closed", Some(500))),
        Case::new(
            "YAML body is accepted",
            "k8s.io/apiserver/pkg/util/webhook/client.go NewClientManager",
        )
        .backend("/yaml"),
        Case::new(
            "garbage body is a call failure",
            "k8s.io/client-go/rest/request.go Result.Into",
        )
        .backend("/garbage")
        .expect(Expect::Call("failed-closed", Some(500))),
        Case::new(
            "garbage body under Ignore fails open",
            "validating/dispatcher.go Dispatch",
        )
        .field("failurePolicy: Ignore")
        .backend("/garbage")
        .expect(Expect::Call("failed-open", None)),
    ];
    for code in [200u16, 201, 202, 204, 206] {
        let expect = if code == 204 {
            Expect::Call("failed-closed", Some(500))
        } else {
            Expect::Call("allowed", None)
        };
        // 204 carries no body, which is the empty-body failure.
        let body = if code == 204 { "" } else { allow };
        cases.push(
            Case::new(
                format!("HTTP {code} counts as success"),
                "k8s.io/client-go/rest/request.go transformResponse",
            )
            .backend(raw(code, body))
            .expect(expect),
        );
    }
    for code in [400u16, 403, 404, 429, 500, 503] {
        cases.push(
            Case::new(
                format!("HTTP {code} is a call failure, not the client's status"),
                "k8s.io/client-go/rest/request.go transformResponse",
            )
            .backend(format!("/status/{code}"))
            .expect(Expect::Call("failed-closed", Some(500))),
        );
        cases.push(
            Case::new(
                format!("HTTP {code} under Ignore fails open"),
                "validating/dispatcher.go Dispatch",
            )
            .field("failurePolicy: Ignore")
            .backend(format!("/status/{code}"))
            .expect(Expect::Call("failed-open", None)),
        );
    }
    cases
}

/// `validating/dispatcher.go` `callHook` (checked before the call; the 400 is
/// `errors/statuserror.go` `NewDryRunUnsupportedErr`): dryRun and sideEffects.
fn dry_run() -> Vec<Case> {
    let mut cases = Vec::new();
    for (side_effects, supports) in [
        ("None", true),
        ("NoneOnDryRun", true),
        ("Some", false),
        ("Unknown", false),
    ] {
        for dry in [true, false] {
            let expect = if dry && !supports {
                Expect::Reject("rejected-dry-run", 400)
            } else {
                Expect::Call("allowed", None)
            };
            let mut c = Case::new(
                format!("sideEffects {side_effects}, dryRun {dry}"),
                "validating/dispatcher.go callHook",
            )
            .v1beta1()
            .field(format!("sideEffects: {side_effects}"))
            .field("admissionReviewVersions: [v1]")
            .review(request(Req {
                dry_run: dry,
                ..Req::default()
            }))
            .expect(expect);
            if dry && !supports {
                c = c
                    .field("failurePolicy: Ignore")
                    .message("does not support dry run");
            }
            cases.push(c);
        }
    }
    cases
}

/// `validating/dispatcher.go` `callHook`: the timeout sent to the backend, rounded up.
fn timeouts() -> Vec<Case> {
    let mut cases = Vec::new();
    for (webhook, caller, sent) in [
        (5u64, 10u64, 5u64),
        (20, 10, 10),
        (10, 3, 3),
        (1, 30, 1),
        (30, 30, 30),
        (29, 30, 29),
    ] {
        let mut c = Case::new(
            format!("timeoutSeconds {webhook}, caller {caller}s → timeout={sent}s"),
            "validating/dispatcher.go callHook",
        )
        .field(format!("timeoutSeconds: {webhook}"));
        c.caller_timeout = caller;
        c.backend_query = Some(format!("?timeout={sent}s"));
        cases.push(c);
    }
    cases
}

/// `validating/dispatcher.go` `callHook` (recorded before `allowed` is read): warnings and
/// auditAnnotations reach kube-apiserver as the backend gave them; it applies the dedup, size and
/// key rules itself.
fn warnings_and_annotations() -> Vec<Case> {
    let answer = r#"{"apiVersion":"$API","kind":"AdmissionReview","response":{"uid":"$UID","allowed":true,"warnings":["w","w",""],"auditAnnotations":{"key":"v","bad/key/x":"y"}}}"#;
    vec![
        Case::new(
            "warnings and auditAnnotations pass through",
            "validating/dispatcher.go callHook",
        )
        .backend(raw(200, answer)),
        Case::new(
            "a denial keeps its warnings",
            "validating/dispatcher.go callHook",
        )
        .backend("/deny")
        .expect(Expect::Call("denied", Some(403)))
        .message("denied by the example backend"),
    ]
}

fn all_cases() -> Vec<Case> {
    [
        resources(),
        operations(),
        groups_and_versions(),
        scopes(),
        namespace_selectors(),
        object_selectors(),
        exemptions(),
        match_conditions(),
        cel_library(),
        defaults(),
        versions(),
        verification(),
        denials(),
        http_answers(),
        dry_run(),
        timeouts(),
        warnings_and_annotations(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The HTTP code kube-apiserver's client would see for the proxy's answer: a call failure
/// answered as a `metav1.Status` keeps its code (a call failure failing closed is 500, from
/// `validating/dispatcher.go` `Dispatch`); a denial goes through `errors/statuserror.go`
/// `ToStatusErr`, which raises any code below 400, or none, to 400. The proxy passes the backend's
/// status through, so backend → proxy → kube-apiserver gives what backend → kube-apiserver gives.
fn client_code(reply: &common::Reply) -> Option<i64> {
    if reply.json["kind"] == "Status" {
        return reply.json["code"].as_i64();
    }
    let response = &reply.json["response"];
    if response["allowed"].as_bool() == Some(true) {
        return None;
    }
    Some(
        response["status"]["code"]
            .as_i64()
            .filter(|c| *c >= 400)
            .unwrap_or(400),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_apiserver_conformance() {
    let backend = TestBackend::start();
    let cases = all_cases();
    let config: String = cases
        .iter()
        .enumerate()
        .map(|(i, c)| c.config(i, &backend))
        .collect();
    let proxy = TestProxy::start(&config);
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let body = serde_json::to_vec(&case.review).unwrap();
        let before = backend.recorder.calls();
        let reply = proxy
            .post(
                &format!(
                    "/webhooks/{}?timeout={}s",
                    case.webhook_name(i),
                    case.caller_timeout
                ),
                &body,
            )
            .await;
        let called = backend.recorder.calls() > before;
        let decision = reply.decision.as_str();
        let code = client_code(&reply);
        let got = match (called, decision) {
            (false, "skipped") => Expect::Skip,
            (true, d) => Expect::Call(
                match d {
                    "allowed" => "allowed",
                    "denied" => "denied",
                    "failed-open" => "failed-open",
                    "failed-closed" => "failed-closed",
                    _ => "unexpected",
                },
                code,
            ),
            (false, "rejected") => Expect::Reject("rejected", code.unwrap_or(0)),
            (false, "rejected-dry-run") => Expect::Reject("rejected-dry-run", code.unwrap_or(0)),
            (false, _) => Expect::Reject("unexpected", code.unwrap_or(0)),
        };
        let mut problems = Vec::new();
        if got != case.expect {
            problems.push(format!(
                "expected {:?}, got {got:?} (decision {decision})",
                case.expect
            ));
        }
        if let Some(text) = &case.message {
            let message = reply.message();
            if !message.contains(text.as_str()) {
                problems.push(format!("message {message:?} lacks {text:?}"));
            }
        }
        let answered_version = reply.json["apiVersion"].as_str().unwrap_or("");
        let caller_version = case.review["apiVersion"].as_str().unwrap_or("");
        if reply.status == 200 && answered_version != caller_version {
            problems.push(format!(
                "answered in {answered_version}, caller used {caller_version}"
            ));
        }
        if called {
            let (path, sent) = backend.recorder.last().unwrap_or_default();
            if let Some(query) = &case.backend_query {
                if !path.contains(query.as_str()) {
                    problems.push(format!("backend request {path:?} lacks {query:?}"));
                }
            }
            if let Some(version) = case.backend_version {
                let sent: Value = serde_json::from_slice(&sent).unwrap_or(Value::Null);
                if sent["apiVersion"] != version {
                    problems.push(format!(
                        "backend got {}, expected {version}",
                        sent["apiVersion"]
                    ));
                }
            }
        }
        if !problems.is_empty() {
            failures.push(format!(
                "[{}] {} ({}): {}",
                i,
                case.name,
                case.cite,
                problems.join("; ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} conformance cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    assert!(cases.len() >= 300, "{} cases", cases.len());
}
