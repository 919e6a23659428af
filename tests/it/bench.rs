//! `admission-proxy bench` against a real TLS backend: answers are checked and counted.

use std::sync::Arc;
use std::time::Duration;

use crate::tools::bench::{run, BenchOptions};
use crate::tools::pki::TestPki;
use admission_proxy::tls::CertResolver;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_counts_checked_answers_and_errors() {
    let pki = TestPki::generate(&["127.0.0.1"]).unwrap();
    let resolver = Arc::new(CertResolver::new(pki.certified_key().unwrap()));
    let (backend, recorder) =
        crate::tools::example_backend::start("127.0.0.1:0".parse().unwrap(), Some(resolver))
            .unwrap();
    let ca = std::env::temp_dir().join(format!(
        "admission-proxy-bench-ca-{}.pem",
        std::process::id()
    ));
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    let report = run(BenchOptions {
        target: format!("https://{}/allow", backend.local_addr),
        compare: Some(format!("https://{}/wrong-uid", backend.local_addr)),
        reviews: concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/admission-reviews"
        )
        .into(),
        rate: 200,
        duration: Duration::from_secs(1),
        warmup: Duration::from_millis(200),
        connections: 4,
        cacert: Some(ca.clone()),
        round: Duration::from_millis(250),
    })
    .await
    .unwrap();
    let _ = std::fs::remove_file(&ca);
    let (allow, wrong) = (&report.targets[0], &report.targets[1]);
    assert!(allow.errors.is_empty(), "{:?}", allow.errors);
    assert!(
        (80..=120).contains(&allow.requests),
        "half of 200 req/s for 1 s: {}",
        allow.requests
    );
    assert!(allow.latency_ms["p50"] > 0.0 && allow.latency_ms["p50"] <= allow.latency_ms["max"]);
    assert_eq!(
        wrong.errors.get("wrong_uid").copied(),
        Some(wrong.requests),
        "a wrong answer is an error, not a latency"
    );
    assert!(
        recorder.calls() >= 200,
        "warm-up and measured requests reached the backend: {}",
        recorder.calls()
    );
}
