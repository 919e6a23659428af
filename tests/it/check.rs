//! `admission-proxy check`, through the real binary: the bundled configuration is valid; an
//! invalid directory gets every problem with its location and exit code 1; files that are not
//! regular, too large or too deep are clear errors, and repeated problems are summarised.

use std::process::Command;

fn check(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_admission-proxy"))
        .arg("check")
        .args(args)
        .output()
        .expect("run admission-proxy check");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn bundled_config_is_valid() {
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/config");
    let namespaces = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/namespaces.yaml"
    );
    let (code, out) = check(&["--config", config, "--namespaces-file", namespaces]);
    assert_eq!(code, 0, "{out}");
    let last = out.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("valid: ") && last.contains("5 webhook(s), 2 candidate(s) in 3 file(s)"),
        "{out}"
    );
    assert!(last.ends_with("22 namespace(s)"), "{out}");
    assert!(
        out.contains("warning: ") && out.contains("webhooks[0].sideEffects"),
        "the v1 sideEffects: Unknown warning is shown: {out}"
    );
}

#[test]
fn every_problem_is_listed_with_its_location() {
    let dir = std::env::temp_dir().join(format!("admission-proxy-check-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("a.yaml"),
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: bad}\nwebhooks:\n- name: nodots\n  clientConfig: {url: \"https://example.com/x\"}\n  rules: [{operations: [PATCH], apiGroups: [\"\"], apiVersions: [v1], resources: [pods]}]\n  sideEffects: None\n  admissionReviewVersions: [v1]\n---\nkind: Nope\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("b.json"),
        r#"{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration", "metadata": {"name": "j"}, "webhooks": [{"name": "a.b.c", "clientConfig": {"url": "https://x.example.com/"}, "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": 31}]}"#,
    )
    .unwrap();
    let ns = dir.with_extension("namespaces.yaml");
    std::fs::write(&ns, "kind: NamespaceList\nitems: 3\n").unwrap();
    let (code, out) = check(&[
        "--config",
        dir.to_str().unwrap(),
        "--namespaces-file",
        ns.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}");
    let errors: Vec<&str> = out.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 5, "{out}");
    for (want_file, want) in [
        ("a.yaml (document 0)", "webhook \"nodots\": webhooks[0].name: Invalid value"),
        ("a.yaml (document 0)", "webhooks[0].rules[0].operations[0]: Unsupported value: \"PATCH\""),
        ("a.yaml (document 1)", "kind: Unsupported value: \"Nope\""),
        ("b.json", "MutatingWebhookConfiguration \"j\": webhook \"a.b.c\": webhooks[0].timeoutSeconds: Invalid value: 31"),
        ("namespaces.yaml", ""),
    ] {
        assert!(
            errors.iter().any(|e| e.contains(want_file) && e.contains(want)),
            "missing {want_file} {want}: {out}"
        );
    }
    assert!(
        out.lines()
            .last()
            .is_some_and(|l| l.starts_with("INVALID: ")
                && l.contains("4 problem(s)")
                && l.ends_with("invalid")),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&ns);
}

#[test]
fn an_empty_configuration_and_unloaded_files_are_warnings() {
    let dir = std::env::temp_dir().join(format!(
        "admission-proxy-check-empty-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // A ConfigMap key without an extension, and a hidden ConfigMap internal.
    std::fs::write(dir.join("webhooks"), "kind: List\nitems: []\n").unwrap();
    std::fs::write(dir.join(".hidden.yaml"), "x").unwrap();
    let (code, out) = check(&["--config", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "warnings only: {out}");
    let warnings: Vec<&str> = out.lines().filter(|l| l.starts_with("warning: ")).collect();
    assert_eq!(warnings.len(), 2, "{out}");
    assert!(
        warnings[0].contains("webhooks: not loaded: only *.yaml, *.yml and *.json"),
        "{out}"
    );
    assert!(warnings[1].contains("no webhooks are configured"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `check` with these arguments, waiting at most 20 s for it to end (killed after that):
/// exit code (`None`: it did not end) and stdout.
fn check_bounded(args: &[&std::ffi::OsStr]) -> (Option<i32>, String) {
    use std::io::Read;
    let mut child = Command::new(env!("CARGO_BIN_EXE_admission-proxy"))
        .arg("check")
        .args(args)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run admission-proxy check");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut out = String::new();
    let _ = child.stdout.take().unwrap().read_to_string(&mut out);
    (code, out)
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "admission-proxy-check-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A named pipe as the configuration or the namespaces file is refused at once, naming it
/// (`check` used to wait forever for a writer).
#[test]
fn a_named_pipe_is_refused_without_waiting_for_a_writer() {
    let dir = scratch("fifo");
    let fifo = dir.join("webhooks.yaml");
    let status = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(status.success());
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/config");
    for args in [
        vec![
            fifo.as_os_str(),
            "--namespaces-file".as_ref(),
            fifo.as_os_str(),
        ],
        vec![
            config.as_ref(),
            "--namespaces-file".as_ref(),
            fifo.as_os_str(),
        ],
    ] {
        let mut all: Vec<&std::ffi::OsStr> = vec!["--config".as_ref()];
        all.extend(args);
        let (code, out) = check_bounded(&all);
        assert_eq!(code, Some(1), "check ends, invalid: {out}");
        assert!(
            out.contains(&format!(
                "{}: not a regular file (a named pipe): refused",
                fifo.display()
            )),
            "{out}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A file over 8 MiB, and a file nested deeper than 128 levels, are each refused with what is
/// wrong and where; 1,000 documents that are not configurations give the first 20 problems
/// of the file and how many more.
#[test]
fn oversized_deep_and_repetitive_files_are_clear_errors() {
    let dir = scratch("large");
    let padding = "# padding\n".repeat(900 * 1024);
    std::fs::write(dir.join("big.yaml"), &padding).unwrap();
    let (code, out) = check(&["--config", dir.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!(
            "{}: 9216000 bytes, more than the 8388608 bytes such a file may hold",
            dir.join("big.yaml").display()
        )),
        "{out}"
    );
    std::fs::remove_file(dir.join("big.yaml")).unwrap();

    std::fs::write(
        dir.join("deep.json"),
        format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)),
    )
    .unwrap();
    std::fs::write(dir.join("many.yaml"), "kind: Nope\n---\n".repeat(1000)).unwrap();
    let (code, out) = check_bounded(&["--config".as_ref(), dir.as_os_str()]);
    assert_eq!(code, Some(1), "{out}");
    let errors: Vec<&str> = out.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 22, "{out}");
    assert!(
        errors[0].ends_with(
            "deep.json: nested more than 128 levels deep at line 1: refused before parsing"
        ),
        "{out}"
    );
    assert!(
        errors[1..21].iter().all(
            |e| e.contains("many.yaml (document ") && e.contains("Unsupported value: \"Nope\"")
        ),
        "{out}"
    );
    assert!(
        errors[21].ends_with("many.yaml: and 980 more problems in this file, not listed"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
