//! `admission-proxy registration` through the real binary on the bundled configuration: every
//! legacy webhook registered once under its own name, with its own rules, selectors, policies
//! and order, pointing at the proxy's Service on its typed route; the output is itself a valid
//! webhook configuration (`check`).

use std::collections::BTreeMap;
use std::process::Command;

use serde::Deserialize;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_admission-proxy");
const CONFIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config");

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
    let text = String::from_utf8(out.stdout).unwrap();
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap())
        .collect()
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
            assert_eq!(w["rules"], original["rules"], "{name}");
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
    let check = Command::new(BIN)
        .args(["check", "--config"])
        .arg(dir.join("registration.yaml"))
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{report}");
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
