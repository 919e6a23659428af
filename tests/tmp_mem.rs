#[test]
fn load_1000() {
    let yaml = admission_proxy::bench::synthetic_config(1000, "https://127.0.0.1:19443/allow", "");
    let snap = admission_proxy::config::load_contents(&[(std::path::PathBuf::from("x.yaml"), yaml)]).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(snap.webhooks.len(), 1001);
    drop(snap);
}
