//! Criterion benches of the request path: parse, envelope conversion, matching with 1/100/1000
//! loaded webhooks, CEL matchConditions, and the whole in-process pipeline (skip and forward).

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use admission_proxy::config;
use admission_proxy::dispatch::Dispatcher;
use admission_proxy::matching::{MatchCondition, MatchConditions, Namespaces};
use admission_proxy::review::{ParsedReview, ReviewVersion};
use admission_proxy::telemetry::TraceContext;
use admission_proxy::tls::CertResolver;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use pki::TestPki;

// The binary's tools the benches need (the synthetic configuration, the example backend, the
// PKI), compiled in from src/bin/admission-proxy: they are not library API. Each is used in part.
// Its unit tests' module compiles here without their #[test] functions: imports unused.
#[allow(dead_code, unused_imports)]
#[path = "../src/bin/admission-proxy/bench.rs"]
mod bench;
#[allow(dead_code)]
#[path = "../src/bin/admission-proxy/example_backend.rs"]
mod example_backend;
#[allow(dead_code)]
#[path = "../src/bin/admission-proxy/pki.rs"]
mod pki;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{FIXTURES}/admission-reviews/{name}")).unwrap()
}

fn namespaces() -> Namespaces {
    Namespaces::parse(&std::fs::read_to_string(format!("{FIXTURES}/namespaces.yaml")).unwrap())
        .unwrap()
}

/// `n` webhooks in the realistic mix of [`bench::synthetic_config`].
fn config(n: usize, url: &str, ca_pem: Option<&[u8]>) -> config::Snapshot {
    let yaml = bench::synthetic_config(n, url, ca_pem);
    config::load_contents(&[(PathBuf::from("bench.yaml"), yaml)]).unwrap()
}

fn parse_and_convert(c: &mut Criterion) {
    let pod = fixture("0096-create-core-v1-pods-v1.json");
    c.bench_function("parse/pod", |b| {
        b.iter(|| {
            black_box(
                ParsedReview::parse(black_box(&pod))
                    .unwrap()
                    .request
                    .uid
                    .len(),
            )
        });
    });
    // Every captured review once per iteration (the latency benchmark's mix): time / count.
    let all: Vec<Vec<u8>> = std::fs::read_dir(format!("{FIXTURES}/admission-reviews"))
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    c.bench_function(&format!("parse/all_{}_fixtures", all.len()), |b| {
        b.iter(|| {
            for body in &all {
                black_box(
                    ParsedReview::parse(black_box(body))
                        .map(|r| r.request.uid.len())
                        .ok(),
                );
            }
        });
    });
    let parsed = ParsedReview::parse(&pod).unwrap();
    c.bench_function("envelope/v1_to_v1beta1", |b| {
        b.iter(|| black_box(parsed.body_as(ReviewVersion::V1beta1).len()));
    });
}

/// matchPolicy Equivalent object conversion there and back: the captured apps/v1 Deployment to
/// extensions/v1beta1, and an autoscaling/v2 HorizontalPodAutoscaler to autoscaling/v1 (its
/// metrics, behavior, statuses and conditions written to and read from annotations as Go JSON).
fn object_conversion(c: &mut Criterion) {
    use admission_proxy::conversion::convert;
    let review: serde_json::Value =
        serde_json::from_slice(&fixture("0064-create-apps-v1-deployments-v1.json")).unwrap();
    let deployment = review["request"]["object"].clone();
    let hpa = serde_json::json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "production"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 2, "maxReplicas": 10, "metrics": [
                {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "500Mi"}}},
                {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "1k"}}},
                {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300, "selectPolicy": "Min",
                "policies": [{"type": "Percent", "value": 10, "periodSeconds": 60}]}}},
        "status": {"currentReplicas": 3, "desiredReplicas": 3, "currentMetrics": [
            {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 55, "averageValue": "275m"}}}],
            "conditions": [{"type": "AbleToScale", "status": "True", "lastTransitionTime": "2026-11-20T09:00:00Z", "reason": "ReadyForNewScale"}]}});
    for (name, object, kind, from, to) in [
        (
            "deployment_v1_to_extensions_v1beta1_and_back",
            &deployment,
            "Deployment",
            ("apps", "v1"),
            ("extensions", "v1beta1"),
        ),
        (
            "hpa_v2_to_v1_and_back",
            &hpa,
            "HorizontalPodAutoscaler",
            ("autoscaling", "v2"),
            ("autoscaling", "v1"),
        ),
    ] {
        c.bench_function(&format!("conversion/{name}"), |b| {
            b.iter(|| {
                let there = convert(black_box(object), kind, from, to).unwrap();
                black_box(convert(&there, kind, to, from).unwrap())
            });
        });
    }
}

fn matching(c: &mut Criterion) {
    let ns = namespaces();
    let pod = fixture("0096-create-core-v1-pods-v1.json");
    let mut group = c.benchmark_group("match");
    for n in [1usize, 100, 1000] {
        let snapshot = config(n, "https://127.0.0.1:1/", None);
        let name = format!("hook-{}.bench.example.com", n - 1);
        group.bench_with_input(BenchmarkId::new("lookup_and_decide", n), &n, |b, _| {
            b.iter(|| {
                let review = ParsedReview::parse(&pod).unwrap();
                let webhook = snapshot.webhook(&name).unwrap();
                black_box(webhook.matcher.decide(&review, Some(&ns)));
                black_box(webhook.matcher.decide_conditions(&review))
            });
        });
    }
    group.finish();
}

fn cel(c: &mut Criterion) {
    let pod = fixture("0096-create-core-v1-pods-v1.json");
    let review = ParsedReview::parse(&pod).unwrap();
    for (name, expression) in [
        // Context setup alone.
        ("cel/constant", "true"),
        (
            "cel/request_only",
            "!request.userInfo.username.startsWith('system:')",
        ),
        (
            "cel/object_walk",
            "object.spec.containers.all(c, c.image.contains(':'))",
        ),
        // A label condition as webhooks write them (no comprehension: its cost needs no
        // tracking on a body this size), and the same test as a comprehension (always
        // cost-tracked).
        (
            "cel/object_labels",
            "has(object.metadata.labels) && 'app' in object.metadata.labels",
        ),
        (
            "cel/object_labels_exists",
            "has(object.metadata.labels) && object.metadata.labels.exists(k, k == 'app')",
        ),
    ] {
        let conditions =
            MatchConditions::new(vec![MatchCondition::compile("c", expression).unwrap()]);
        c.bench_function(name, |b| {
            b.iter(|| black_box(conditions.evaluate(&review)));
        });
    }
}

/// The bundled policy candidate (`config/candidates.yaml`: `require-labels`, its matchConditions
/// and its validation over `object` and `oldObject`) evaluated on a Pod's creation.
fn policy(c: &mut Criterion) {
    let pod = fixture("0096-create-core-v1-pods-v1.json");
    let review = ParsedReview::parse(&pod).unwrap();
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/candidates.yaml"
    ))
    .unwrap();
    let documents: Vec<serde_json::Value> = serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    let of_kind = |kind: &str| {
        documents
            .iter()
            .filter(|d| d["kind"] == kind)
            .cloned()
            .collect::<Vec<_>>()
    };
    let policy = of_kind("ValidatingAdmissionPolicy")
        .into_iter()
        .find(|p| p["metadata"]["name"] == "require-labels")
        .unwrap();
    let bindings: Vec<_> = of_kind("ValidatingAdmissionPolicyBinding")
        .into_iter()
        .filter(|b| b["spec"]["policyName"] == "require-labels")
        .collect();
    let policy = admission_proxy::policy::Policy::compile(&policy, &bindings, &[]).unwrap();
    let ns = namespaces();
    c.bench_function("policy/bundled_candidate", |b| {
        b.iter(|| {
            black_box(policy.evaluate(
                &review,
                Some(&ns),
                &mut admission_proxy::matching::authz::Decisions::default(),
            ))
        });
    });
}

fn pipeline(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let pki = TestPki::generate(&["127.0.0.1"]).unwrap();
    let resolver = Arc::new(CertResolver::new(pki.certified_key().unwrap()));
    let (backend, _) = rt.block_on(async {
        example_backend::start("127.0.0.1:0".parse().unwrap(), Some(resolver)).unwrap()
    });
    let snapshot = config(
        1,
        &format!("https://{}/allow", backend.local_addr),
        Some(pki.ca_pem.as_bytes()),
    );
    let ns = namespaces();
    let dispatcher = Dispatcher::new(Duration::from_millis(250));
    let pod = fixture("0096-create-core-v1-pods-v1.json");
    for (label, hook) in [
        ("skip", "skip.bench.example.com"),
        ("forward", "hook-0.bench.example.com"),
    ] {
        let webhook = snapshot.webhook(hook).unwrap().clone();
        c.bench_function(&format!("pipeline/{label}"), |b| {
            b.iter(|| {
                rt.block_on(async {
                    let review = ParsedReview::parse(&pod).unwrap();
                    black_box(
                        dispatcher
                            .dispatch(
                                &webhook,
                                &review,
                                Some(&ns),
                                Some(Duration::from_secs(10)),
                                tokio::time::Instant::now(),
                                TraceContext::default(),
                            )
                            .await
                            .decision,
                    )
                })
            });
        });
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = parse_and_convert, object_conversion, matching, cel, policy, pipeline
}
criterion_main!(benches);
