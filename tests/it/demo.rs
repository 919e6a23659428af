//! The demo (the README's first command) runs the real serve path and shows every outcome.

use std::path::PathBuf;

use crate::tools::demo::{run, DemoOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_shows_every_outcome() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let summary = run(DemoOptions {
        config: root.join("config"),
        reviews: root.join("tests/fixtures/admission-reviews"),
        namespaces_file: Some(root.join("tests/fixtures/namespaces.yaml")),
        backend_addr: "127.0.0.1:0".parse().unwrap(),
        all: false,
    })
    .await
    .expect("the demo runs");
    for outcome in [
        "skipped",
        "allowed",
        "denied",
        "failed-open",
        "failed-closed",
        "rejected-dry-run",
    ] {
        assert!(
            summary.get(outcome).copied().unwrap_or(0) > 0,
            "{outcome} missing from {summary:?}"
        );
    }
    assert!(!summary.contains_key("error"), "{summary:?}");
}
