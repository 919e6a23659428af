//! `admission-proxy registration` through the real binary on the bundled configuration: every
//! legacy webhook registered once under its own name, with its own rules, selectors, policies
//! and order, pointing at the proxy's Service on its typed route; the output is itself a valid
//! webhook configuration (`check`). `registration --chain`: one webhook per configuration on
//! its chain route, never narrower than any of the configuration's webhooks.

use std::collections::BTreeMap;
use std::process::Command;

use serde::Deserialize;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_admission-proxy");
const CONFIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config");

/// Every document of a YAML stream.
fn documents(text: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).unwrap())
        .collect()
}

/// `admission-proxy check` with `args`: whether it passed, and what it printed.
fn check(args: &[&std::ffi::OsStr]) -> (bool, String) {
    let out = Command::new(BIN).arg("check").args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn registration(args: &[&str]) -> Vec<Value> {
    let out = Command::new(BIN)
        .args(["registration", "--config", CONFIG])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    documents(&String::from_utf8(out.stdout).unwrap())
}

/// Legacy webhooks by (kind, name), as written in config/.
fn legacy() -> BTreeMap<(String, String), (String, Value)> {
    let mut out = BTreeMap::new();
    for file in ["legacy-webhooks.yaml", "policy-webhooks.yaml"] {
        let text = std::fs::read_to_string(format!("{CONFIG}/{file}")).unwrap();
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            let doc = Value::deserialize(doc).unwrap();
            let kind = doc["kind"].as_str().unwrap().to_string();
            let configuration = doc["metadata"]["name"].as_str().unwrap().to_string();
            for w in doc["webhooks"].as_array().unwrap() {
                let name = w["name"].as_str().unwrap().to_string();
                out.insert((kind.clone(), name), (configuration.clone(), w.clone()));
            }
        }
    }
    out
}

#[test]
fn every_legacy_webhook_is_registered_once_with_its_own_selection() {
    let objects = registration(&[
        "--service",
        "webhooks/admission-proxy:8443",
        "--inject-ca-from",
        "webhooks/admission-proxy",
    ]);
    let legacy = legacy();
    let mut seen = 0;
    for object in &objects {
        let kind = object["kind"].as_str().unwrap();
        let registered_for = object["metadata"]["annotations"]["admission-proxy.io/registered-for"]
            .as_str()
            .unwrap();
        assert_eq!(
            object["metadata"]["name"].as_str().unwrap(),
            format!("{registered_for}-admission-proxy")
        );
        assert_eq!(
            object["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            "webhooks/admission-proxy"
        );
        let legacy_order: Vec<&String> = legacy
            .iter()
            .filter(|((k, _), (c, _))| k == kind && c == registered_for)
            .map(|((_, n), _)| n)
            .collect();
        let webhooks = object["webhooks"].as_array().unwrap();
        assert_eq!(webhooks.len(), legacy_order.len());
        for w in webhooks {
            seen += 1;
            let name = w["name"].as_str().unwrap();
            let (_, original) = &legacy[&(kind.to_string(), name.to_string())];
            // Exact webhooks keep their rules; Equivalent ones (only rollout here, whose
            // extensions/v1beta1 no cluster serves since 1.16) are widened below. Every rule
            // states kube-apiserver's default scope, so an apply shows no drift.
            let mut expected_rules = original["rules"].clone();
            for rule in expected_rules.as_array_mut().unwrap() {
                if rule.get("scope").is_none() {
                    rule["scope"] = "*".into();
                }
            }
            if name != "rollout.legacy.example.com" {
                assert_eq!(w["rules"], expected_rules, "{name}");
            }
            for rule in w["rules"].as_array().unwrap() {
                assert!(rule["scope"].is_string(), "{name}: {rule}");
            }
            let typed = if kind.starts_with("Validating") {
                "validating"
            } else {
                "mutating"
            };
            assert_eq!(
                w["clientConfig"]["service"],
                serde_json::json!({"namespace": "webhooks", "name": "admission-proxy", "port": 8443, "path": format!("/webhooks/{typed}/{name}")})
            );
            assert_eq!(
                w["admissionReviewVersions"],
                serde_json::json!(["v1", "v1beta1"])
            );
            assert!(w.get("matchConditions").is_none(), "left to the proxy");
            // The proxy's namespace is excluded on top of the legacy selector.
            let expressions = w["namespaceSelector"]["matchExpressions"]
                .as_array()
                .unwrap();
            assert_eq!(
                expressions.last().unwrap(),
                &serde_json::json!({"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["webhooks"]})
            );
            if let Some(original) = original["namespaceSelector"]["matchExpressions"].as_array() {
                assert_eq!(&expressions[..expressions.len() - 1], &original[..]);
            }
            if original.get("objectSelector").is_some() {
                assert_eq!(w["objectSelector"], original["objectSelector"]);
            }
        }
        // Mutating webhooks keep their list order.
        let names: Vec<&str> = webhooks
            .iter()
            .map(|w| w["name"].as_str().unwrap())
            .collect();
        if kind.starts_with("Mutating") {
            let text = std::fs::read_to_string(format!("{CONFIG}/legacy-webhooks.yaml")).unwrap();
            let positions: Vec<usize> = names.iter().map(|n| text.find(n).unwrap()).collect();
            assert!(positions.windows(2).all(|p| p[0] < p[1]), "{names:?}");
        }
    }
    assert_eq!(seen, legacy.len(), "every legacy webhook, once");

    // Defaults of the legacy version become explicit: the v1beta1 audit webhook is Ignore,
    // Exact, 30 s (kept at the 30 s maximum), sideEffects Unknown registered as None.
    let audit = objects
        .iter()
        .flat_map(|o| o["webhooks"].as_array().unwrap())
        .find(|w| w["name"] == "audit.legacy.example.com")
        .unwrap();
    assert_eq!(audit["failurePolicy"], "Ignore");
    assert_eq!(audit["matchPolicy"], "Exact");
    assert_eq!(audit["timeoutSeconds"], 30);
    assert_eq!(audit["sideEffects"], "None");
    let rollout = objects
        .iter()
        .flat_map(|o| o["webhooks"].as_array().unwrap())
        .find(|w| w["name"] == "rollout.legacy.example.com")
        .unwrap();
    assert_eq!(
        rollout["timeoutSeconds"], 6,
        "one second above the legacy 5"
    );
    assert_eq!(rollout["matchPolicy"], "Equivalent");
    assert_eq!(rollout["reinvocationPolicy"], "Never");
    // kube-apiserver's Equivalent pass only knows served versions: the registration names
    // apps/v1 itself (and every other version the proxy converts from), with the legacy
    // operations and scope, sorted and merged.
    assert_eq!(
        rollout["rules"],
        serde_json::json!([
            {"operations": ["CREATE", "UPDATE"], "apiGroups": ["apps"],
             "apiVersions": ["v1", "v1beta1", "v1beta2"], "resources": ["deployments"], "scope": "*"},
            {"operations": ["CREATE", "UPDATE"], "apiGroups": ["extensions"],
             "apiVersions": ["v1beta1"], "resources": ["deployments"], "scope": "*"}
        ])
    );
}

#[test]
fn the_registration_is_a_valid_webhook_configuration() {
    let dir = std::env::temp_dir().join(format!(
        "admission-proxy-registration-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let out = Command::new(BIN)
        .args([
            "registration",
            "--config",
            CONFIG,
            "--service",
            "webhooks/admission-proxy",
        ])
        .output()
        .unwrap();
    std::fs::write(dir.join("registration.yaml"), &out.stdout).unwrap();
    let file = dir.join("registration.yaml");
    let (valid, report) = check(&["--config".as_ref(), file.as_os_str()]);
    assert!(valid, "{report}");
    assert!(
        report.contains("valid: ") && report.contains("5 webhook(s)"),
        "{report}"
    );
    let bad = Command::new(BIN)
        .args([
            "registration",
            "--config",
            CONFIG,
            "--service",
            "admission-proxy",
        ])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("is not NAMESPACE/NAME[:PORT]"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A stand-in API server on 127.0.0.1 answering discovery as a current cluster does (no
/// extensions/v1beta1, no policy/v1beta1): `GET /api`, `/api/v1`, `/apis` and each
/// `/apis/{group}/{version}` (`APIVersions`, `APIGroupList`, `APIResourceList`), anything
/// else 404 ([`stand_in_api`]).
fn discovery_server() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let groups: &[(&str, &str, &[&str])] = &[
        (
            "apps",
            "v1",
            &[
                "deployments",
                "deployments/scale",
                "deployments/status",
                "daemonsets",
            ],
        ),
        (
            "networking.k8s.io",
            "v1",
            &["ingresses", "ingresses/status", "networkpolicies"],
        ),
        ("autoscaling", "v1", &["horizontalpodautoscalers"]),
        ("autoscaling", "v2", &["horizontalpodautoscalers"]),
        // An aggregated API whose service is down: listed, but its resource list answers 503.
        ("metrics.k8s.io", "v1beta1", &[]),
    ];
    let resources = |gv: &str, names: &[&str]| {
        let list: Vec<Value> = names
            .iter()
            .map(|n| serde_json::json!({"name": n, "kind": "X", "namespaced": true, "verbs": ["get"]}))
            .collect();
        serde_json::json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": list})
    };
    let mut routes: BTreeMap<String, Value> = BTreeMap::new();
    routes.insert(
        "/api".into(),
        serde_json::json!({"kind": "APIVersions", "versions": ["v1"]}),
    );
    routes.insert("/api/v1".into(), resources("v1", &["pods", "namespaces"]));
    let mut by_group: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for (g, v, names) in groups {
        let gv = format!("{g}/{v}");
        by_group
            .entry(g)
            .or_default()
            .push(serde_json::json!({"groupVersion": gv, "version": v}));
        if *g != "metrics.k8s.io" {
            routes.insert(format!("/apis/{gv}"), resources(&gv, names));
        }
    }
    let list: Vec<Value> = by_group
        .into_iter()
        .map(|(g, versions)| serde_json::json!({"name": g, "versions": versions}))
        .collect();
    routes.insert(
        "/apis".into(),
        serde_json::json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": list}),
    );
    let (url, requests) = stand_in_api(routes);
    (url, requests)
}

/// A stand-in API server on 127.0.0.1: `routes` by path (the query aside), each answered 200
/// with its JSON, paths under `/apis/metrics.k8s.io/` 503 (an aggregated API that is down),
/// anything else 404. Counts the requests and keeps each request line's target (path and
/// query). Serves until the test process ends; each connection is answered in a thread.
fn stand_in_api(
    routes: BTreeMap<String, Value>,
) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = requests.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let routes = routes.clone();
            let log = log.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut out = stream;
                // Keep-alive: at most 100 requests per connection.
                for _ in 0..100 {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    loop {
                        let mut header = String::new();
                        if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                            break;
                        }
                    }
                    let target = line.split(' ').nth(1).unwrap_or("").to_string();
                    let path = target.split('?').next().unwrap_or("").to_string();
                    log.lock().unwrap().push(target);
                    let (status, body) = match routes.get(&path) {
                        Some(body) => ("200 OK", body.to_string()),
                        None if path.starts_with("/apis/metrics.k8s.io/") => ("503 Service Unavailable", serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "ServiceUnavailable", "message": "the server is currently unable to handle the request", "code": 503}).to_string()),
                        None => ("404 Not Found", serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}).to_string()),
                    };
                    let head = format!("HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n", body.len());
                    if out
                        .write_all(head.as_bytes())
                        .and_then(|()| out.write_all(body.as_bytes()))
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    (url, requests)
}

/// Legacy webhooks a cluster of today cannot reach by themselves: an Equivalent one for
/// extensions/v1beta1 deployments, an Exact (v1beta1 default) one for the same, and one for
/// PodSecurityPolicy, which has no served successor.
const REMOVED_VERSIONS: &str = "\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: legacy}
webhooks:
- name: equivalent.legacy.example.com
  clientConfig: {url: 'https://127.0.0.1:9443/a'}
  rules: [{operations: [CREATE], apiGroups: [extensions], apiVersions: [v1beta1], resources: [deployments]}]
  sideEffects: None
  admissionReviewVersions: [v1]
- name: psp.legacy.example.com
  clientConfig: {url: 'https://127.0.0.1:9443/b'}
  rules: [{operations: [CREATE], apiGroups: [policy], apiVersions: [v1beta1], resources: [podsecuritypolicies]}]
  sideEffects: None
  admissionReviewVersions: [v1]
---
apiVersion: admissionregistration.k8s.io/v1beta1
kind: ValidatingWebhookConfiguration
metadata: {name: exported}
webhooks:
- name: exact.legacy.example.com
  clientConfig: {url: 'https://127.0.0.1:9443/c'}
  rules: [{operations: [CREATE], apiGroups: [extensions], apiVersions: [v1beta1], resources: [deployments]}]
";

/// A directory with `config.yaml` (REMOVED_VERSIONS) and a kubeconfig for `url`.
fn removed_versions_dir(name: &str, url: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("admission-proxy-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.yaml"), REMOVED_VERSIONS).unwrap();
    std::fs::write(
        dir.join("kubeconfig"),
        format!("apiVersion: v1\nkind: Config\nclusters:\n- name: stand-in\n  cluster: {{server: \"{url}\"}}\nusers:\n- name: u\n  user: {{token: t}}\ncontexts:\n- name: stand-in\n  context: {{cluster: stand-in, user: u}}\ncurrent-context: stand-in\n"),
    )
    .unwrap();
    dir
}

#[test]
fn check_warns_about_removed_versions_for_equivalent_and_exact() {
    let dir = removed_versions_dir("check-removed", "http://127.0.0.1:1");
    let file = dir.join("config.yaml");
    let (valid, report) = check(&["--config".as_ref(), file.as_os_str()]);
    assert!(valid, "warnings only: {report}");
    let warnings: Vec<&str> = report
        .lines()
        .filter(|l| l.starts_with("warning: "))
        .collect();
    let find = |webhook: &str| {
        warnings
            .iter()
            .find(|l| {
                l.contains(&format!("webhook \"{webhook}\": webhooks["))
                    && l.contains(".rules[0]: ")
            })
            .unwrap_or_else(|| panic!("{webhook}: {report}"))
            .to_string()
    };
    assert!(find("equivalent.legacy.example.com").ends_with("webhooks[0].rules[0]: extensions/v1beta1 deployments: removed in Kubernetes 1.16: kube-apiserver alone would never call this webhook for it; through the proxy (`admission-proxy registration`), requests for apps/v1 deployments are converted to extensions/v1beta1"), "{report}");
    assert!(find("exact.legacy.example.com").ends_with("webhooks[0].rules[0]: extensions/v1beta1 deployments: removed in Kubernetes 1.16: never called for it, directly or through the proxy; set `matchPolicy: Equivalent` in the proxy's copy to have the proxy convert requests for apps/v1 deployments"), "{report}");
    assert!(find("psp.legacy.example.com").ends_with("policy/v1beta1 podsecuritypolicies: removed in Kubernetes 1.25, with no served version the proxy converts from: never called for it, directly or through the proxy"), "{report}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn discovery_registers_only_served_versions_and_reports_unreachable_rules() {
    let (url, requests) = discovery_server();
    let dir = removed_versions_dir("discovery", &url);
    let kubeconfig = dir.join("kubeconfig");
    let out = Command::new(BIN)
        .args([
            "registration",
            "--service",
            "webhooks/admission-proxy",
            "--discover",
            "--config",
        ])
        .arg(dir.join("config.yaml"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // /api, /api/v1, /apis and the five group/versions, each once: the unavailable one's 503
    // is not retried (kube-rs would, 15 times with backoff, for minutes).
    assert_eq!(requests.lock().unwrap().len(), 8);
    let objects = documents(&String::from_utf8(out.stdout).unwrap());
    let webhook = |name: &str| {
        objects
            .iter()
            .flat_map(|o| o["webhooks"].as_array().unwrap())
            .find(|w| w["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(
        webhook("equivalent.legacy.example.com")["rules"],
        serde_json::json!([{"operations": ["CREATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"], "scope": "*"}]),
        "only the served version"
    );
    assert_eq!(
        webhook("psp.legacy.example.com")["rules"],
        serde_json::json!([])
    );
    assert!(
        stderr
            .contains("warning: discovery: metrics.k8s.io/v1beta1 is listed but could not be read"),
        "an unavailable aggregated API is a warning, not a failure: {stderr}"
    );
    let unreachable: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("warning: ") && !l.contains("warning: discovery:"))
        .collect();
    assert_eq!(unreachable.len(), 2, "{stderr}");
    let warnings = stderr.clone();
    assert!(unreachable[0].contains("webhook \"exact.legacy.example.com\": webhooks[0].rules[0]: no resource the cluster serves matches this rule under matchPolicy Exact: the webhook is never called for it"), "{stderr}");
    assert!(unreachable[1].contains("webhook \"psp.legacy.example.com\": webhooks[1].rules[0]: no resource the cluster serves matches this rule, directly or through a version the proxy converts from"), "{stderr}");

    // --chain: each chain's rules are the union of the served rules above (legacy: apps/v1
    // deployments, nothing for PodSecurityPolicy; exported, Exact: its own rule); the same
    // warnings.
    let (code, stdout, stderr) = run_registration(&[
        "--service".as_ref(),
        "webhooks/admission-proxy".as_ref(),
        "--chain".as_ref(),
        "--discover".as_ref(),
        "--config".as_ref(),
        dir.join("config.yaml").as_os_str(),
        "--kubeconfig".as_ref(),
        kubeconfig.as_os_str(),
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stderr, warnings);
    let chains = documents(&stdout);
    let rules = |configuration: &str| {
        chains
            .iter()
            .find(|o| {
                o["metadata"]["annotations"]["admission-proxy.io/registered-for"] == configuration
            })
            .unwrap()["webhooks"][0]["rules"]
            .clone()
    };
    assert_eq!(
        rules("legacy"),
        serde_json::json!([{"operations": ["CREATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"], "scope": "*"}])
    );
    assert_eq!(
        rules("exported"),
        serde_json::json!([{"operations": ["CREATE"], "apiGroups": ["extensions"], "apiVersions": ["v1beta1"], "resources": ["deployments"], "scope": "*"}])
    );

    let file = dir.join("config.yaml");
    let discover = |file: &std::path::Path, kubeconfig: &std::path::Path| {
        check(&[
            "--discover".as_ref(),
            "--config".as_ref(),
            file.as_os_str(),
            "--kubeconfig".as_ref(),
            kubeconfig.as_os_str(),
        ])
    };
    let (valid, report) = discover(&file, &kubeconfig);
    assert!(valid, "{report}");
    assert_eq!(
        report
            .matches("no resource the cluster serves matches this rule")
            .count(),
        2,
        "{report}"
    );
    assert!(
        report
            .trim_end()
            .contains("3 webhook(s) in 1 file(s); cluster: 5 group/version(s) served"),
        "{report}"
    );

    // A cluster that cannot be reached: check says so and fails.
    let down = removed_versions_dir("discovery-down", "http://127.0.0.1:1");
    let (valid, report) = discover(&down.join("config.yaml"), &down.join("kubeconfig"));
    assert!(!valid, "{report}");
    assert!(
        report.contains("error: discovery: discovery request failed"),
        "{report}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&down);
}

/// For every resource of the equivalence table, in its oldest version, with no subresource,
/// `scale` where it has one, and `*`: the registration `registration` prints loads with
/// `check` (kube-apiserver's validation of rules, e.g. no `r/*` beside `r/x`) and names the
/// resource's newest version.
#[test]
fn every_equivalence_registers_as_a_valid_configuration() {
    use admission_proxy::resources::equivalence::EQUIVALENCES;
    let mut config = String::from("apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: every}\nwebhooks:\n");
    let mut expected = Vec::new();
    for (i, e) in EQUIVALENCES.iter().enumerate() {
        let (group, version) = *e.versions.last().unwrap();
        let mut entries = vec![e.resource.to_string(), format!("{}/*", e.resource)];
        if e.scale.is_some() {
            entries.push(format!("{}/scale", e.resource));
        }
        for (j, entry) in entries.iter().enumerate() {
            let name = format!("w{i}-{j}.legacy.example.com");
            config.push_str(&format!("- name: {name}\n  clientConfig: {{url: 'https://127.0.0.1:9443/'}}\n  rules: [{{operations: ['*'], apiGroups: ['{group}'], apiVersions: ['{version}'], resources: ['{entry}']}}]\n  sideEffects: None\n  admissionReviewVersions: [v1]\n"));
            expected.push((name, e.versions[0], entry.clone()));
        }
    }
    let dir = std::env::temp_dir().join(format!("admission-proxy-every-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("registration")).unwrap();
    std::fs::write(dir.join("config.yaml"), config).unwrap();
    let out = Command::new(BIN)
        .args([
            "registration",
            "--service",
            "webhooks/admission-proxy",
            "--config",
        ])
        .arg(dir.join("config.yaml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(dir.join("registration/registration.yaml"), &out.stdout).unwrap();
    let registered = dir.join("registration");
    let (valid, report) = check(&["--config".as_ref(), registered.as_os_str()]);
    assert!(valid, "{report}");
    let objects = documents(&String::from_utf8(out.stdout).unwrap());
    let webhooks = objects[0]["webhooks"].as_array().unwrap();
    assert_eq!(webhooks.len(), expected.len());
    for (name, (group, version), entry) in expected {
        let w = webhooks
            .iter()
            .find(|w| w["name"] == name.as_str())
            .unwrap();
        let newest = w["rules"].as_array().unwrap().iter().any(|r| {
            r["apiGroups"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g == group)
                && r["apiVersions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|v| v == version)
                && r["resources"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|x| x == entry.as_str())
        });
        assert!(
            newest,
            "{name}: {group}/{version} {entry} in {:#}",
            w["rules"]
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// What `registration --chain` prints for config/ with `--service webhooks/admission-proxy:8443
/// --inject-ca-from webhooks/admission-proxy`.
const CONFIG_CHAINS: &str = r#"---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  annotations:
    admission-proxy.io/registered-for: example-policies
    cert-manager.io/inject-ca-from: webhooks/admission-proxy
  labels:
    admission-proxy.io/registration: webhooks.admission-proxy
    app.kubernetes.io/managed-by: admission-proxy
  name: example-policies-admission-proxy
webhooks:
- admissionReviewVersions:
  - v1
  - v1beta1
  clientConfig:
    service:
      name: admission-proxy
      namespace: webhooks
      path: /configurations/validating/example-policies
      port: 8443
  failurePolicy: Fail
  matchPolicy: Equivalent
  name: example-policies.chain.admission-proxy.io
  namespaceSelector:
    matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values:
      - webhooks
  objectSelector: {}
  rules:
  - apiGroups:
    - '*'
    apiVersions:
    - '*'
    operations:
    - CREATE
    - UPDATE
    resources:
    - '*'
    scope: '*'
  sideEffects: None
  timeoutSeconds: 6
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  annotations:
    admission-proxy.io/registered-for: legacy-audit
    cert-manager.io/inject-ca-from: webhooks/admission-proxy
  labels:
    admission-proxy.io/registration: webhooks.admission-proxy
    app.kubernetes.io/managed-by: admission-proxy
  name: legacy-audit-admission-proxy
webhooks:
- admissionReviewVersions:
  - v1
  - v1beta1
  clientConfig:
    service:
      name: admission-proxy
      namespace: webhooks
      path: /configurations/validating/legacy-audit
      port: 8443
  failurePolicy: Ignore
  matchPolicy: Exact
  name: legacy-audit.chain.admission-proxy.io
  namespaceSelector:
    matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values:
      - webhooks
  objectSelector: {}
  rules:
  - apiGroups:
    - ''
    apiVersions:
    - v1
    operations:
    - CREATE
    - DELETE
    resources:
    - namespaces
    scope: '*'
  sideEffects: None
  timeoutSeconds: 30
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  annotations:
    admission-proxy.io/registered-for: legacy-labeler
    cert-manager.io/inject-ca-from: webhooks/admission-proxy
  labels:
    admission-proxy.io/registration: webhooks.admission-proxy
    app.kubernetes.io/managed-by: admission-proxy
  name: legacy-labeler-admission-proxy
webhooks:
- admissionReviewVersions:
  - v1
  - v1beta1
  clientConfig:
    service:
      name: admission-proxy
      namespace: webhooks
      path: /configurations/mutating/legacy-labeler
      port: 8443
  failurePolicy: Ignore
  matchPolicy: Exact
  name: legacy-labeler.chain.admission-proxy.io
  namespaceSelector:
    matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values:
      - webhooks
  objectSelector: {}
  reinvocationPolicy: Never
  rules:
  - apiGroups:
    - ''
    - apps
    apiVersions:
    - v1
    operations:
    - CREATE
    resources:
    - serviceaccounts
    - deployments
    scope: '*'
  sideEffects: None
  timeoutSeconds: 30
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  annotations:
    admission-proxy.io/registered-for: legacy-rollout
    cert-manager.io/inject-ca-from: webhooks/admission-proxy
  labels:
    admission-proxy.io/registration: webhooks.admission-proxy
    app.kubernetes.io/managed-by: admission-proxy
  name: legacy-rollout-admission-proxy
webhooks:
- admissionReviewVersions:
  - v1
  - v1beta1
  clientConfig:
    service:
      name: admission-proxy
      namespace: webhooks
      path: /configurations/mutating/legacy-rollout
      port: 8443
  failurePolicy: Fail
  matchPolicy: Equivalent
  name: legacy-rollout.chain.admission-proxy.io
  namespaceSelector:
    matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values:
      - webhooks
  objectSelector: {}
  reinvocationPolicy: Never
  rules:
  - apiGroups:
    - apps
    apiVersions:
    - v1
    - v1beta1
    - v1beta2
    operations:
    - CREATE
    - UPDATE
    resources:
    - deployments
    scope: '*'
  - apiGroups:
    - extensions
    apiVersions:
    - v1beta1
    operations:
    - CREATE
    - UPDATE
    resources:
    - deployments
    scope: '*'
  sideEffects: None
  timeoutSeconds: 6
"#;

/// `registration` with `args`, not asserting success: (exit code, stdout, stderr).
fn run_registration(args: &[&std::ffi::OsStr]) -> (Option<i32>, String, String) {
    let out = Command::new(BIN)
        .arg("registration")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A fresh directory under the temporary directory for test `name`, removed when dropped.
fn scratch(name: &str) -> crate::common::Scratch {
    crate::common::Scratch::new(name)
}

/// `check` on `yaml` written alone into a directory: whether it is valid, and the report.
fn check_output(name: &str, yaml: &str) -> (bool, String) {
    let dir = scratch(name);
    std::fs::write(dir.join("registration.yaml"), yaml).unwrap();
    check(&["--config".as_ref(), dir.as_os_str()])
}

#[test]
fn chain_registers_each_configuration_once_on_its_chain_route() {
    let args = [
        "--config",
        CONFIG,
        "--service",
        "webhooks/admission-proxy:8443",
        "--inject-ca-from",
        "webhooks/admission-proxy",
        "--chain",
    ];
    let args: Vec<&std::ffi::OsStr> = args.iter().map(std::convert::AsRef::as_ref).collect();
    let (code, stdout, stderr) = run_registration(&args);
    assert_eq!(code, Some(0), "{stderr}");
    // example-policies: quota's rule (CREATE core/v1 persistentvolumeclaims, Namespaced) is
    // inside require-labels' (CREATE, UPDATE of everything), so only the latter is registered;
    // require-labels' namespaceSelector is not quota's (none), so the chain has only the
    // proxy's exclusion; timeoutSeconds max(5, 1) + 1. legacy-audit and legacy-labeler are
    // v1beta1 (Ignore, Exact, 30 s: at the 30 s maximum already). legacy-rollout keeps its
    // Equivalent widening.
    assert_eq!(stdout, CONFIG_CHAINS);
    let (valid, report) = check_output("chain-config", &stdout);
    assert!(valid, "{report}");
    assert!(
        report.contains("valid: ") && report.contains("4 webhook(s)"),
        "{report}"
    );
}

/// Legacy configurations whose webhooks differ in every field a chain registration merges.
const CHAINS: &str = r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: mixed}
webhooks:
- name: a.mixed.example.com
  clientConfig: {url: 'https://127.0.0.1:9443/a'}
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [pods]}]
  matchPolicy: Exact
  namespaceSelector: {matchLabels: {team: a}}
  objectSelector: {matchLabels: {tier: web}}
  failurePolicy: Ignore
  sideEffects: None
  admissionReviewVersions: [v1]
- name: b.mixed.example.com
  clientConfig: {url: 'https://127.0.0.1:9443/b'}
  rules: [{operations: [CREATE, UPDATE], apiGroups: [extensions], apiVersions: [v1beta1], resources: [deployments]}]
  namespaceSelector: {matchLabels: {team: b}}
  objectSelector: {matchLabels: {tier: web}}
  sideEffects: NoneOnDryRun
  timeoutSeconds: 7
  admissionReviewVersions: [v1]
- name: c.mixed.example.com
  clientConfig: {url: 'https://127.0.0.1:9443/c'}
  rules:
  - {operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [pods], scope: '*'}
  - {operations: [UPDATE], apiGroups: [''], apiVersions: [v1], resources: [pods, pods/status]}
  matchPolicy: Exact
  objectSelector: {matchLabels: {tier: web}}
  failurePolicy: Ignore
  sideEffects: None
  timeoutSeconds: 3
  admissionReviewVersions: [v1]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: lenient}
webhooks:
- name: a.lenient.example.com
  clientConfig: {url: 'https://127.0.0.1:9443/d'}
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [configmaps], scope: Namespaced}]
  matchPolicy: Exact
  namespaceSelector: {matchExpressions: [{key: env, operator: In, values: [prod]}]}
  failurePolicy: Ignore
  sideEffects: None
  timeoutSeconds: 29
  admissionReviewVersions: [v1]
- name: b.lenient.example.com
  clientConfig: {url: 'https://127.0.0.1:9443/e'}
  rules: [{operations: ['*'], apiGroups: [''], apiVersions: [v1], resources: [configmaps], scope: Namespaced}]
  matchPolicy: Exact
  namespaceSelector: {matchExpressions: [{key: env, operator: In, values: [prod]}]}
  objectSelector: {}
  failurePolicy: Ignore
  sideEffects: None
  timeoutSeconds: 30
  admissionReviewVersions: [v1]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: mutators}
webhooks:
- name: a.mutators.example.com
  clientConfig: {url: 'https://127.0.0.1:9443/f'}
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [pods]}]
  sideEffects: None
  admissionReviewVersions: [v1]
- name: b.mutators.example.com
  clientConfig: {url: 'https://127.0.0.1:9443/g'}
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [pods]}]
  reinvocationPolicy: IfNeeded
  sideEffects: None
  admissionReviewVersions: [v1]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: once}
webhooks:
- name: a.once.example.com
  clientConfig: {url: 'https://127.0.0.1:9443/h'}
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [pods]}]
  reinvocationPolicy: Never
  sideEffects: None
  admissionReviewVersions: [v1]
"#;

#[test]
fn a_chain_is_never_narrower_than_any_of_its_webhooks() {
    let dir = scratch("chain-widening");
    std::fs::write(dir.join("config.yaml"), CHAINS).unwrap();
    let config = dir.join("config.yaml");
    let (code, stdout, stderr) = run_registration(&[
        "--config".as_ref(),
        config.as_os_str(),
        "--service".as_ref(),
        "webhooks/admission-proxy".as_ref(),
        "--chain".as_ref(),
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let objects = documents(&stdout);
    let names: Vec<&str> = objects
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "lenient-admission-proxy",
            "mixed-admission-proxy",
            "mutators-admission-proxy",
            "once-admission-proxy"
        ],
        "validating first, each by name"
    );
    let chain = |configuration: &str| {
        let object = objects
            .iter()
            .find(|o| {
                o["metadata"]["annotations"]["admission-proxy.io/registered-for"] == configuration
            })
            .unwrap();
        let webhooks = object["webhooks"].as_array().unwrap();
        assert_eq!(webhooks.len(), 1, "{configuration}: one webhook");
        webhooks[0].clone()
    };
    let exclusion = serde_json::json!({"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["webhooks"]});

    let mixed = chain("mixed");
    assert_eq!(mixed["name"], "mixed.chain.admission-proxy.io");
    assert_eq!(
        mixed["clientConfig"],
        serde_json::json!({"service": {"namespace": "webhooks", "name": "admission-proxy", "port": 443, "path": "/configurations/validating/mixed"}})
    );
    // The union: a's rule once (c repeats it), b's widened for Equivalent, c's own second rule.
    assert_eq!(
        mixed["rules"],
        serde_json::json!([
            {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "scope": "*"},
            {"operations": ["CREATE", "UPDATE"], "apiGroups": ["apps"],
             "apiVersions": ["v1", "v1beta1", "v1beta2"], "resources": ["deployments"], "scope": "*"},
            {"operations": ["CREATE", "UPDATE"], "apiGroups": ["extensions"],
             "apiVersions": ["v1beta1"], "resources": ["deployments"], "scope": "*"},
            {"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods", "pods/status"], "scope": "*"}
        ])
    );
    assert_eq!(mixed["matchPolicy"], "Equivalent", "b is Equivalent");
    // namespaceSelectors differ (team a, team b, none): match all but the proxy's namespace.
    // objectSelectors are all `tier: web`: kept.
    assert_eq!(
        mixed["namespaceSelector"],
        serde_json::json!({"matchExpressions": [exclusion]})
    );
    assert_eq!(
        mixed["objectSelector"],
        serde_json::json!({"matchLabels": {"tier": "web"}})
    );
    assert_eq!(mixed["timeoutSeconds"], 11, "a's v1 default 10, plus one");
    assert_eq!(mixed["failurePolicy"], "Fail", "b is Fail (v1 default)");
    assert_eq!(mixed["sideEffects"], "NoneOnDryRun", "b is NoneOnDryRun");
    assert!(mixed.get("reinvocationPolicy").is_none(), "validating");
    assert!(mixed.get("matchConditions").is_none());
    assert_eq!(
        mixed["admissionReviewVersions"],
        serde_json::json!(["v1", "v1beta1"])
    );

    let lenient = chain("lenient");
    // b's rule (every operation) covers a's (CREATE): a's is dropped although it came first.
    assert_eq!(
        lenient["rules"],
        serde_json::json!([{"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"], "scope": "Namespaced"}])
    );
    assert_eq!(lenient["matchPolicy"], "Exact", "both Exact");
    assert_eq!(lenient["failurePolicy"], "Ignore", "both Ignore");
    assert_eq!(lenient["sideEffects"], "None");
    assert_eq!(
        lenient["timeoutSeconds"], 30,
        "max(29, 30) + 1, capped at 30"
    );
    // The same namespaceSelector on both: kept, plus the exclusion. An absent objectSelector
    // and `{}` are the same.
    assert_eq!(
        lenient["namespaceSelector"],
        serde_json::json!({"matchExpressions": [
            {"key": "env", "operator": "In", "values": ["prod"]}, exclusion
        ]})
    );
    assert_eq!(lenient["objectSelector"], serde_json::json!({}));

    let mutators = chain("mutators");
    assert_eq!(
        mutators["clientConfig"]["service"]["path"],
        "/configurations/mutating/mutators"
    );
    assert_eq!(mutators["name"], "mutators.chain.admission-proxy.io");
    assert_eq!(mutators["reinvocationPolicy"], "IfNeeded", "b is IfNeeded");
    assert_eq!(chain("once")["reinvocationPolicy"], "Never");

    let (valid, report) = check_output("chain-widening-check", &stdout);
    assert!(valid, "{report}");
    assert!(report.contains("4 webhook(s)"), "{report}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A valid configuration name of `n` characters (at least 193): four DNS labels.
fn long_name(n: usize) -> String {
    format!(
        "{}.{}.{}.{}",
        "a".repeat(63),
        "b".repeat(63),
        "c".repeat(63),
        "d".repeat(n - 3 * 64)
    )
}

/// A ValidatingWebhookConfiguration named [`long_name`]`(n)` with one webhook, `extra` added to
/// it (YAML, two-space indented under the list item).
fn long_name_config(n: usize, extra: &str) -> String {
    format!("apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {{name: {}}}\nwebhooks:\n- name: a.long.example.com\n  clientConfig: {{url: 'https://127.0.0.1:9443/a'}}\n  rules: [{{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [pods]}}]\n{extra}  sideEffects: None\n  admissionReviewVersions: [v1]\n", long_name(n))
}

/// A legacy name of 240 characters became a registration named 256 characters with
/// `--service` (the default suffix) and 270 with `--static-manifests` (and `.static.k8s.io`),
/// printed with exit 0 although kube-apiserver refuses the object (and `check` the output).
/// Now nothing is printed and the name, its length and the longest legacy name the suffix
/// allows are said; 237 characters (253 with the suffix) still register.
#[test]
fn a_registration_name_longer_than_kube_apiserver_takes_is_refused() {
    let name = long_name;
    let selector = "  namespaceSelector: {matchExpressions: [{key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system]}]}\n";
    let config = |n: usize| long_name_config(n, selector);
    let dir = scratch("registration-long-name");
    let file = dir.join("config.yaml");
    let service = |file: &std::path::Path| {
        run_registration(&[
            "--service".as_ref(),
            "webhooks/admission-proxy".as_ref(),
            "--config".as_ref(),
            file.as_os_str(),
        ])
    };
    std::fs::write(&file, config(237)).unwrap();
    let (code, stdout, stderr) = service(&file);
    assert_eq!(code, Some(0), "{stderr}");
    let (valid, report) = check_output("registration-long-name-check", &stdout);
    assert!(valid, "{report}");

    std::fs::write(&file, config(240)).unwrap();
    let (code, stdout, stderr) = service(&file);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stdout.is_empty(), "nothing printed: {stdout}");
    let expected = format!(
        "error: {}: ValidatingWebhookConfiguration \"{}\": metadata.name: the registration's name \"{}-admission-proxy\" (256 characters: the legacy name and 16 added by --name-suffix) is not a DNS-1123 subdomain of at most 253 characters, which kube-apiserver requires; choose a shorter --name-suffix (the legacy name may have at most 237 characters with this one)\nerror: 1 configuration(s) cannot be registered; nothing printed\n",
        file.display(),
        name(240),
        name(240)
    );
    let errors: String = stderr
        .lines()
        .filter(|l| l.starts_with("error: "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(errors, expected);

    let (code, stdout, stderr) = run_registration(&[
        "--url".as_ref(),
        "https://10.0.0.1:8443".as_ref(),
        "--namespace".as_ref(),
        "webhooks".as_ref(),
        "--ca-bundle".as_ref(),
        file.as_os_str(),
        "--static-manifests".as_ref(),
        "validating".as_ref(),
        "--config".as_ref(),
        file.as_os_str(),
    ]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stdout.is_empty(), "nothing printed: {stdout}");
    assert!(
        stderr.contains("-admission-proxy.static.k8s.io\" (270 characters: the legacy name and 30 added by --name-suffix and .static.k8s.io)"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_configuration_name_too_long_for_a_chain_webhook_name_is_reported() {
    // A valid configuration name of 228 characters makes a chain webhook name of exactly 253,
    // the most kube-apiserver takes; 229 is one too many.
    let name = long_name;
    let config = |n: usize| long_name_config(n, "");
    let dir = scratch("chain-long-name");
    let file = dir.join("config.yaml");
    let run = |file: &std::path::Path| {
        run_registration(&[
            "--service".as_ref(),
            "webhooks/admission-proxy".as_ref(),
            "--chain".as_ref(),
            "--config".as_ref(),
            file.as_os_str(),
        ])
    };

    std::fs::write(&file, config(228)).unwrap();
    let (code, stdout, stderr) = run(&file);
    assert_eq!(code, Some(0), "{stderr}");
    let objects = documents(&stdout);
    let chain_name = objects[0]["webhooks"][0]["name"].as_str().unwrap();
    assert_eq!(chain_name.len(), 253);
    assert_eq!(
        chain_name,
        format!("{}.chain.admission-proxy.io", name(228))
    );
    let (valid, report) = check_output("chain-long-name-check", &stdout);
    assert!(valid, "{report}");

    std::fs::write(&file, config(229)).unwrap();
    let (code, stdout, stderr) = run(&file);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stdout.is_empty(), "nothing printed: {stdout}");
    let expected = format!(
        "error: {}: ValidatingWebhookConfiguration \"{}\": metadata.name: the chain webhook name \"{}.chain.admission-proxy.io\" (254 characters) is not a valid webhook name (a DNS-1123 subdomain of at most 253 characters): a configuration registered as a chain may have at most 228 characters; register it per webhook (without --chain)\nerror: 1 configuration(s) cannot be registered as a chain; nothing printed\n",
        file.display(),
        name(229),
        name(229)
    );
    // Nothing printed: no findings either (they are the printed registration's).
    assert_eq!(stderr, expected);
    // Without --chain it registers as before.
    let (code, _, stderr) = run_registration(&[
        "--service".as_ref(),
        "webhooks/admission-proxy".as_ref(),
        "--config".as_ref(),
        file.as_os_str(),
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The proxy's CA, written into `dir`: (file, its base64 as `caBundle`).
fn proxy_ca(dir: &std::path::Path) -> (std::path::PathBuf, String) {
    use base64::Engine;
    let pki = crate::tools::pki::TestPki::generate(&["10.0.0.5"]).unwrap();
    let file = dir.join("proxy-ca.crt");
    std::fs::write(&file, &pki.ca_pem).unwrap();
    (
        file,
        base64::engine::general_purpose::STANDARD.encode(&pki.ca_pem),
    )
}

/// `registration --static-manifests validating|mutating` writes a file kube-apiserver's static
/// manifests loader takes: `check --static-manifests` (the loader's rules) passes on a
/// directory holding it, each configuration is its legacy one's name with the suffix and
/// `.static.k8s.io`, and each webhook's `clientConfig` is exactly the proxy's URL with the
/// webhook's typed route and the proxy's CA, no `service`.
#[test]
fn a_static_manifests_registration_is_what_kube_apiserver_loads() {
    let dir = scratch("static-registration");
    let (ca_file, ca_bundle) = proxy_ca(&dir);
    let legacy = legacy();
    for (plugin, kind) in [
        ("validating", "ValidatingWebhookConfiguration"),
        ("mutating", "MutatingWebhookConfiguration"),
    ] {
        let (code, out, err) = run_registration(&[
            "--config".as_ref(),
            CONFIG.as_ref(),
            "--url".as_ref(),
            "https://10.0.0.5:8443".as_ref(),
            "--namespace".as_ref(),
            "webhooks".as_ref(),
            "--ca-bundle".as_ref(),
            ca_file.as_os_str(),
            "--static-manifests".as_ref(),
            plugin.as_ref(),
        ]);
        assert_eq!(code, Some(0), "{err}");
        let static_dir = dir.join(plugin);
        std::fs::create_dir_all(&static_dir).unwrap();
        std::fs::write(static_dir.join("admission-proxy.yaml"), &out).unwrap();
        let (valid, report) = check(&[
            "--config".as_ref(),
            static_dir.as_os_str(),
            "--static-manifests".as_ref(),
            plugin.as_ref(),
        ]);
        assert!(valid, "{plugin}: {report}\n{out}");

        let mut registered = Vec::new();
        for doc in documents(&out) {
            assert_eq!(doc["kind"], kind, "one plugin's kind per directory");
            let legacy_name = doc["metadata"]["annotations"]["admission-proxy.io/registered-for"]
                .as_str()
                .unwrap();
            assert_eq!(
                doc["metadata"]["name"],
                format!("{legacy_name}-admission-proxy.static.k8s.io")
            );
            for w in doc["webhooks"].as_array().unwrap() {
                let name = w["name"].as_str().unwrap();
                assert_eq!(
                    w["clientConfig"],
                    serde_json::json!({
                        "url": format!("https://10.0.0.5:8443/webhooks/{plugin}/{name}"),
                        "caBundle": ca_bundle,
                    })
                );
                registered.push(name.to_string());
            }
        }
        registered.sort();
        let expected: Vec<String> = legacy
            .keys()
            .filter(|(k, _)| k == kind)
            .map(|(_, name)| name.clone())
            .collect();
        assert_eq!(registered, expected, "every legacy {plugin} webhook, once");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--url` without `--static-manifests`: both kinds, `clientConfig.url` the proxy's URL (port
/// 443 dropped, as a URL writes it) with each webhook's route, or with `--chain` the chain
/// route, and `--namespace` excluded from every namespaceSelector as `--service`'s is.
#[test]
fn registration_url_appends_each_route() {
    let args = [
        "--url",
        "https://proxy.example.com:443/",
        "--namespace",
        "admission",
    ];
    let docs = registration(&args);
    let kinds: std::collections::BTreeSet<&str> =
        docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.len(), 2, "{kinds:?}");
    for doc in &docs {
        let webhook_type = if doc["kind"] == "ValidatingWebhookConfiguration" {
            "validating"
        } else {
            "mutating"
        };
        for w in doc["webhooks"].as_array().unwrap() {
            let name = w["name"].as_str().unwrap();
            assert_eq!(
                w["clientConfig"],
                serde_json::json!({
                    "url": format!("https://proxy.example.com/webhooks/{webhook_type}/{name}")
                })
            );
            let excluded = w["namespaceSelector"]["matchExpressions"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| {
                    e["key"] == "kubernetes.io/metadata.name"
                        && e["values"] == serde_json::json!(["admission"])
                });
            assert!(excluded, "{w}");
        }
    }
    let chains = registration(&[args.as_slice(), &["--chain"]].concat());
    let labeler = chains
        .iter()
        .find(|d| d["metadata"]["name"] == "legacy-labeler-admission-proxy")
        .unwrap();
    assert_eq!(
        labeler["webhooks"][0]["clientConfig"],
        serde_json::json!({
            "url": "https://proxy.example.com/configurations/mutating/legacy-labeler"
        })
    );
}

/// What `--url` and `--static-manifests` refuse, as usage errors (exit 2) naming the problem.
#[test]
fn registration_refuses_what_kube_apiserver_would() {
    let dir = scratch("static-registration-usage");
    let (ca_file, _) = proxy_ca(&dir);
    let ca = ca_file.to_str().unwrap();
    for (args, says) in [
        (
            vec!["--url", "http://10.0.0.5:8443", "--namespace", "webhooks"],
            "'https' is the only allowed URL scheme",
        ),
        (
            vec![
                "--url",
                "https://10.0.0.5:8443/proxy",
                "--namespace",
                "webhooks",
            ],
            "without a path",
        ),
        (vec!["--url", "https://10.0.0.5:8443"], "--namespace"),
        (
            vec![
                "--service",
                "webhooks/admission-proxy",
                "--ca-bundle",
                ca,
                "--static-manifests",
                "validating",
            ],
            "--url",
        ),
        (
            vec![
                "--url",
                "https://10.0.0.5:8443",
                "--namespace",
                "webhooks",
                "--static-manifests",
                "mutating",
            ],
            "--ca-bundle",
        ),
        (
            vec![
                "--url",
                "https://10.0.0.5:8443",
                "--namespace",
                "webhooks",
                "--ca-bundle",
                ca,
                "--static-manifests",
                "both",
            ],
            "expected validating or mutating",
        ),
    ] {
        let mut all = vec!["--config", CONFIG];
        all.extend(&args);
        let all: Vec<&std::ffi::OsStr> = all.iter().map(std::ffi::OsStr::new).collect();
        let (code, out, err) = run_registration(&all);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: nothing printed");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `registration`'s findings are those of what it prints: it leaves the proxy's own namespace
/// out of every namespaceSelector, so a Fail webhook on pods is not called for the proxy's
/// pods (it was flagged as if it were), and it adds a second to each timeout, so three 20 s
/// mutating webhooks on one resource (called one after another) become 63 s, past
/// kube-apiserver's 60 s (said nothing).
#[test]
fn registration_findings_judge_what_is_printed() {
    let dir = scratch("registration-findings");
    let hook = |name: &str| {
        format!(
            "- name: {name}\n  clientConfig: {{service: {{namespace: webhooks, name: legacy}}}}\n  \
             rules: [{{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [pods]}}]\n  \
             failurePolicy: Ignore\n  timeoutSeconds: 20\n  sideEffects: None\n  admissionReviewVersions: [v1]\n"
        )
    };
    let file = dir.join("config.yaml");
    std::fs::write(
        &file,
        format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\n\
             metadata: {{name: slow}}\nwebhooks:\n{}{}{}---\n\
             apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\n\
             metadata: {{name: pods}}\nwebhooks:\n{}",
            hook("a.slow.example.com").replace("pods", "configmaps"),
            hook("b.slow.example.com").replace("pods", "configmaps"),
            hook("c.slow.example.com").replace("pods", "configmaps"),
            hook("fail.pods.example.com")
                .replace("failurePolicy: Ignore", "failurePolicy: Fail")
                .replace("timeoutSeconds: 20", "timeoutSeconds: 5")
        ),
    )
    .unwrap();
    let (code, _, stderr) = run_registration(&[
        "--service".as_ref(),
        "webhooks/admission-proxy".as_ref(),
        "--config".as_ref(),
        file.as_os_str(),
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("registration.yaml") && stderr.contains("may take 63 s together"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("own namespace \"webhooks\""),
        "the printed registration leaves webhooks out: {stderr}"
    );
}

/// The cut-over's registration step: a webhook with `registered: false` (kept in the proxy's
/// directory, its route still answered) is left out of the registration, a configuration left
/// with none is not printed, and `--prune` names what the cluster holds for this proxy
/// (listed by its `admission-proxy.io/registration` label, from a stand-in API server) that
/// the registration no longer includes, for `xargs -r kubectl delete`.
#[test]
fn a_retired_webhook_is_left_out_and_pruned() {
    let dir = scratch("registration-prune");
    let config = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: legacy
  annotations:
    admission-proxy.io/webhook-options: '{"b.legacy.example.com": {"registered": false}}'
webhooks:
- name: a.legacy.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {url: 'https://127.0.0.1:9443/a'}
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [configmaps]}]
- name: b.legacy.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {url: 'https://127.0.0.1:9443/b'}
  rules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [secrets]}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: other
  annotations:
    admission-proxy.io/webhook-options: '{"c.other.example.com": {"registered": false, "mode": "Shadow"}}'
webhooks:
- name: c.other.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {url: 'https://127.0.0.1:9443/c'}
  rules: [{operations: [CREATE], apiGroups: [apps], apiVersions: [v1], resources: [deployments]}]
"#;
    std::fs::write(dir.join("config.yaml"), config).unwrap();
    let (code, stdout, stderr) = run_registration(&[
        "--service".as_ref(),
        "webhooks/admission-proxy".as_ref(),
        "--config".as_ref(),
        dir.join("config.yaml").as_os_str(),
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let printed = documents(&stdout);
    let names: Vec<(&str, Vec<&str>)> = printed
        .iter()
        .map(|o| {
            let hooks = o["webhooks"].as_array().unwrap();
            (
                o["metadata"]["name"].as_str().unwrap(),
                hooks.iter().map(|w| w["name"].as_str().unwrap()).collect(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [("legacy-admission-proxy", vec!["a.legacy.example.com"])]
    );
    assert_eq!(
        printed[0]["metadata"]["labels"]["admission-proxy.io/registration"],
        "webhooks.admission-proxy"
    );
    // The cluster holds both registrations of this proxy and a mutating one of a configuration
    // since removed from the directory.
    let list = |kind: &str, names: &[&str]| {
        let items: Vec<Value> = names
            .iter()
            .map(|n| serde_json::json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": n}}))
            .collect();
        serde_json::json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": format!("{kind}List"), "metadata": {"resourceVersion": "7"}, "items": items})
    };
    let mut routes = BTreeMap::new();
    routes.insert(
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations".to_string(),
        list(
            "ValidatingWebhookConfiguration",
            &["legacy-admission-proxy", "other-admission-proxy"],
        ),
    );
    routes.insert(
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations".to_string(),
        list("MutatingWebhookConfiguration", &["gone-admission-proxy"]),
    );
    let (url, requests) = stand_in_api(routes);
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!("apiVersion: v1\nkind: Config\nclusters:\n- name: stand-in\n  cluster: {{server: \"{url}\"}}\nusers:\n- name: u\n  user: {{token: t}}\ncontexts:\n- name: stand-in\n  context: {{cluster: stand-in, user: u}}\ncurrent-context: stand-in\n"),
    )
    .unwrap();
    let (code, stdout, stderr) = run_registration(&[
        "--service".as_ref(),
        "webhooks/admission-proxy".as_ref(),
        "--config".as_ref(),
        dir.join("config.yaml").as_os_str(),
        "--prune".as_ref(),
        "--kubeconfig".as_ref(),
        kubeconfig.as_os_str(),
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        stdout,
        "mutatingwebhookconfiguration/gone-admission-proxy\nvalidatingwebhookconfiguration/other-admission-proxy\n"
    );
    let requests = requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2, "{requests:?}");
    for r in &requests {
        assert!(
            r.contains(
                "labelSelector=admission-proxy.io%2Fregistration%3Dwebhooks.admission-proxy"
            ),
            "{r}"
        );
    }
    // --kubeconfig alone is refused rather than ignored.
    let (code, _, stderr) = run_registration(&[
        "--service".as_ref(),
        "webhooks/admission-proxy".as_ref(),
        "--config".as_ref(),
        dir.join("config.yaml").as_os_str(),
        "--kubeconfig".as_ref(),
        kubeconfig.as_os_str(),
    ]);
    assert_ne!(code, Some(0));
    assert!(
        stderr.contains("--kubeconfig is read with --discover or --prune only"),
        "{stderr}"
    );
}
