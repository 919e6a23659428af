//! Property tests (issue "Hardened server" §2): the AdmissionReview parser and its re-versioning,
//! the configuration loader and label selectors, on generated inputs. Seeds and case counts are
//! fixed so that CI runs the same cases every time; `PROPTEST_CASES=N` runs N cases per property
//! instead (README, "The two commands": a longer local run). Object conversions have their own property in
//! `src/conversion/objects.rs` (it needs the per-kind sample objects).

use std::collections::BTreeMap;
use std::path::PathBuf;

use admission_proxy::api::{LabelSelector as ApiSelector, LabelSelectorRequirement};
use admission_proxy::config;
use admission_proxy::matching::selector::LabelSelector;
use admission_proxy::review::{ParsedReview, ReviewVersion};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use serde_json::json;

use crate::common;

/// Runs `test` on `cases` values of `strategy` (or `PROPTEST_CASES`), from a fixed seed.
fn check<S: Strategy>(
    cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(cases);
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let seed = [7u8; 32];
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed));
    if let Err(e) = runner.run(&strategy, test) {
        panic!("{e}");
    }
}

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/admission-reviews"
);

/// Every captured AdmissionReview body.
fn fixtures() -> Vec<Vec<u8>> {
    let mut files: Vec<_> = std::fs::read_dir(FIXTURES)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json") && !p.ends_with("index.json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect()
}

/// A captured review with a few bytes changed, cut or inserted: close to valid, so that the
/// parser's deeper paths are reached (random bytes alone stop at the first byte).
fn mutated_fixture() -> impl Strategy<Value = Vec<u8>> {
    let bodies = fixtures();
    (
        0..bodies.len(),
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..8),
    )
        .prop_map(move |(i, edits)| {
            let mut body = bodies[i].clone();
            for (at, byte, how) in edits {
                if body.is_empty() {
                    break;
                }
                let at = at.index(body.len());
                match how {
                    0 => body[at] = byte,
                    1 => body.truncate(at),
                    _ => body.insert(at, byte),
                }
            }
            body
        })
}

#[test]
fn any_bytes_parse_to_a_review_or_an_error_never_a_panic() {
    check(2000, prop::collection::vec(any::<u8>(), 0..512), |bytes| {
        let _ = ParsedReview::parse(&bytes);
        Ok(())
    });
    check(2000, mutated_fixture(), |bytes| {
        if let Ok(review) = ParsedReview::parse(&bytes) {
            // Whatever parses can be re-versioned and parses again.
            for v in [ReviewVersion::V1, ReviewVersion::V1beta1] {
                let other = review.body_as(v);
                prop_assert!(ParsedReview::parse(&other).is_ok());
            }
        }
        Ok(())
    });
}

/// Through the real server over TLS: whatever the body, the answer is a 200 AdmissionReview
/// (the body parsed) or a 4xx Status (it did not), never a dropped connection or a 5xx.
#[test]
fn any_body_posted_to_the_server_gets_an_answer_or_a_4xx() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let _entered = runtime.enter();
    let backend = common::TestBackend::start();
    let proxy = common::TestProxy::start(&common::validating(
        "fuzz.example.com",
        &backend.client_config("/allow"),
        common::ALL,
        "",
    ));
    let bodies = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..256),
        mutated_fixture(),
        review(),
    ];
    check(300, bodies, |body| {
        let parses = ParsedReview::parse(&body).is_ok();
        let reply = runtime.block_on(proxy.review("fuzz.example.com", &body));
        if parses {
            prop_assert_eq!(reply.status, 200, "{}", reply.message());
        } else {
            prop_assert!(
                (400..500).contains(&reply.status),
                "{} for a body that does not parse",
                reply.status
            );
        }
        Ok(())
    });
}

fn word() -> impl Strategy<Value = String> {
    "[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?"
}

/// Text as users write it: any unicode, quotes, escapes and control characters included.
fn text() -> impl Strategy<Value = String> {
    any::<String>().prop_map(|s| s.chars().take(24).collect())
}

/// A well-formed AdmissionReview request with generated contents, serialized with varying
/// whitespace and key order as different clients do.
fn review() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::bool::ANY,
        word(),
        prop::sample::select(vec!["CREATE", "UPDATE", "DELETE", "CONNECT"]),
        (word(), word(), word()),
        prop::collection::btree_map(word(), text(), 0..4),
        text(),
        prop::bool::ANY,
    )
        .prop_map(
            |(v1, uid, operation, (group, resource, name), labels, user, pretty)| {
                let api_version = if v1 {
                    "admission.k8s.io/v1"
                } else {
                    "admission.k8s.io/v1beta1"
                };
                let review = json!({
                    "kind": "AdmissionReview",
                    "apiVersion": api_version,
                    "request": {
                        "uid": uid, "operation": operation, "name": name, "namespace": "default",
                        "kind": {"group": group, "version": "v1", "kind": "Thing"},
                        "resource": {"group": group, "version": "v1", "resource": resource},
                        "userInfo": {"username": user},
                        "object": {"metadata": {"name": name, "labels": labels}, "note": user},
                        "dryRun": false
                    }
                });
                if pretty {
                    serde_json::to_vec_pretty(&review).unwrap()
                } else {
                    serde_json::to_vec(&review).unwrap()
                }
            },
        )
}

#[test]
fn re_versioning_a_review_there_and_back_is_the_identity() {
    check(1000, review(), |body| {
        let review = ParsedReview::parse(&body).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let original = review.version;
        let other = match original {
            ReviewVersion::V1 => ReviewVersion::V1beta1,
            ReviewVersion::V1beta1 => ReviewVersion::V1,
        };
        let there = review.body_as(other).into_owned();
        let parsed = ParsedReview::parse(&there).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(parsed.version, other);
        prop_assert_eq!(&parsed.request.uid, &review.request.uid);
        let back = parsed.body_as(original).into_owned();
        prop_assert_eq!(back, body);
        Ok(())
    });
    // The captured reviews too.
    for body in fixtures() {
        let review = ParsedReview::parse(&body).unwrap();
        for v in [ReviewVersion::V1, ReviewVersion::V1beta1] {
            let there = review.body_as(v).into_owned();
            let back = ParsedReview::parse(&there)
                .unwrap()
                .body_as(review.version)
                .into_owned();
            assert_eq!(back, body);
        }
    }
}

/// The bundled example configuration with lines dropped, repeated or changed.
fn mutated_config() -> impl Strategy<Value = String> {
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/legacy-webhooks.yaml"
    ))
    .unwrap();
    let lines: Vec<String> = example.lines().map(str::to_string).collect();
    let n = lines.len();
    (
        prop::collection::vec((0..n, 0u8..4, text()), 1..6),
        Just(lines),
    )
        .prop_map(|(edits, mut lines)| {
            for (at, how, t) in edits {
                if lines.is_empty() {
                    break;
                }
                let at = at % lines.len();
                match how {
                    0 => {
                        lines.remove(at);
                    }
                    1 => {
                        let l = lines[at].clone();
                        lines.insert(at, l);
                    }
                    2 => lines[at] = format!("{}{t}", lines[at]),
                    _ => {
                        // Keep the key, replace the value.
                        let key = lines[at].split(':').next().unwrap_or("").to_string();
                        lines[at] = format!("{key}: {t}");
                    }
                }
            }
            lines.join("\n")
        })
}

/// A loaded configuration, or an error that names the file (and, for a problem inside a
/// document, the field).
fn loads_or_locates(yaml: String) -> Result<(), TestCaseError> {
    let file = PathBuf::from("generated.yaml");
    match config::load_contents(&[(file, yaml)]) {
        Ok(_) => Ok(()),
        Err(config::ConfigError::Invalid(problems)) => {
            prop_assert!(!problems.is_empty());
            for p in &problems {
                prop_assert_eq!(p.file.to_str(), Some("generated.yaml"));
                prop_assert!(!p.message.is_empty(), "{}", p);
            }
            Ok(())
        }
        Err(e) => Err(TestCaseError::fail(format!("unexpected error kind: {e}"))),
    }
}

#[test]
fn any_yaml_loads_or_gives_a_located_error() {
    check(300, text(), loads_or_locates);
    check(300, mutated_config(), loads_or_locates);
}

/// One label selector requirement, with the operators and value counts Kubernetes accepts.
fn requirement(keys: Vec<String>) -> impl Strategy<Value = LabelSelectorRequirement> {
    (
        prop::sample::select(keys),
        prop::sample::select(vec!["In", "NotIn", "Exists", "DoesNotExist"]),
        prop::collection::vec(prop::sample::select(vec!["a", "b", "c"]), 1..3),
    )
        .prop_map(|(key, operator, values)| LabelSelectorRequirement {
            key,
            operator: operator.to_string(),
            values: matches!(operator, "In" | "NotIn")
                .then(|| values.into_iter().map(str::to_string).collect()),
        })
}

/// `metav1.LabelSelector` semantics written out (labels.Requirement.Matches): the oracle.
fn oracle(selector: &ApiSelector, labels: &BTreeMap<String, String>) -> bool {
    let equal = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let expressions = selector.match_expressions.iter().flatten().all(|r| {
        let value = labels.get(&r.key);
        let values = r.values.clone().unwrap_or_default();
        match r.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => unreachable!(),
        }
    });
    equal && expressions
}

#[test]
fn label_selectors_match_as_kubernetes_defines_them() {
    let keys: Vec<String> = ["app", "tier", "team", "example.com/zone"]
        .map(String::from)
        .to_vec();
    let values = prop::sample::select(vec!["a", "b", "c"]).prop_map(String::from);
    let strategy = (
        prop::collection::btree_map(prop::sample::select(keys.clone()), values.clone(), 0..3),
        prop::collection::vec(requirement(keys.clone()), 0..4),
        prop::collection::btree_map(prop::sample::select(keys), values, 0..4),
    );
    check(3000, strategy, |(match_labels, expressions, labels)| {
        let selector = ApiSelector {
            match_labels: (!match_labels.is_empty()).then_some(match_labels),
            match_expressions: (!expressions.is_empty()).then_some(expressions),
        };
        let compiled = LabelSelector::compile(Some(&selector))
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(
            compiled.matches(&labels),
            oracle(&selector, &labels),
            "selector {} on {:?}",
            compiled,
            labels
        );
        Ok(())
    });
}

/// Invalid selectors are refused with Kubernetes' message, never matched.
#[test]
fn malformed_label_selectors_are_refused() {
    let strategy = (
        prop::sample::select(vec!["In", "NotIn", "Exists", "DoesNotExist", "Equals", ""]),
        prop::collection::vec(word(), 0..3),
    );
    check(500, strategy, |(operator, values)| {
        let selector = ApiSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "app".into(),
                operator: operator.to_string(),
                values: Some(values.clone()),
            }]),
        };
        let valid = match operator {
            "In" | "NotIn" => !values.is_empty(),
            "Exists" | "DoesNotExist" => values.is_empty(),
            _ => false,
        };
        prop_assert_eq!(LabelSelector::compile(Some(&selector)).is_ok(), valid);
        Ok(())
    });
}
