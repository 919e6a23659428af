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
    assert!(last.contains(": 22 namespace(s)"), "{out}");
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

fn scratch(name: &str) -> crate::common::Scratch {
    crate::common::Scratch::new(&format!("check-{name}"))
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

/// A configuration with each risky pattern, one webhook per pattern: `check` names each with
/// its field and a fix, stays valid (exit 0), and fails with `--fail-on warning`; the bundled
/// configuration has none of them.
#[test]
fn safety_findings_name_each_risky_webhook_and_gate_with_fail_on_warning() {
    let dir = scratch("findings");
    let webhook = |name: &str, rules: &str, extra: &str| {
        format!(
            "- name: {name}\n  clientConfig: {{service: {{namespace: policy, name: webhook}}}}\n  \
             rules: [{rules}]\n  sideEffects: None\n  admissionReviewVersions: [v1]\n{extra}"
        )
    };
    let all = "{operations: [\"*\"], apiGroups: [\"*\"], apiVersions: [\"*\"], resources: [\"*\"]}";
    let pods =
        "{operations: [CREATE, UPDATE], apiGroups: [\"\"], apiVersions: [v1], resources: [pods]}";
    let leases = "{operations: [UPDATE], apiGroups: [coordination.k8s.io], apiVersions: [v1], resources: [leases]}";
    let deletes =
        "{operations: [DELETE], apiGroups: [\"*\"], apiVersions: [\"*\"], resources: [\"*\"]}";
    let system_ns = "  namespaceSelector:\n    matchExpressions:\n    - {key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system, kube-node-lease]}\n";
    let validating = [
        // Catch-all, no namespaceSelector, Fail: every control-plane request.
        webhook("everything.example.com", all, "  failurePolicy: Fail\n"),
        // Leases with Fail, the system namespaces left out: nothing to flag.
        webhook("leases.example.com", leases, &format!("  failurePolicy: Fail\n{system_ns}")),
        // Pods with Fail, system namespaces left out, its own namespace not: cannot recover.
        webhook("pods.example.com", pods, &format!("  failurePolicy: Fail\n{system_ns}")),
        // Catch-all under Ignore, system users left out: only the catch-all finding.
        webhook(
            "quiet.example.com",
            all,
            "  failurePolicy: Ignore\n  matchConditions:\n  - {name: users, expression: \"!request.userInfo.username.startsWith('system:')\"}\n",
        ),
        // Every resource, but only objects labelled in-use=true: not a catch-all.
        webhook(
            "deletes.example.com",
            deletes,
            "  failurePolicy: Ignore\n  objectSelector: {matchLabels: {in-use: \"true\"}}\n",
        ),
        // A namespaceSelector that still selects kube-system does not leave it out.
        webhook(
            "leaky.example.com",
            deletes,
            "  failurePolicy: Ignore\n  namespaceSelector:\n    matchExpressions:\n    - {key: team, operator: NotIn, values: [x]}\n",
        ),
    ];
    std::fs::write(
        dir.join("validating.yaml"),
        format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\n\
             metadata: {{name: risky}}\nwebhooks:\n{}",
            validating.concat()
        ),
    )
    .unwrap();
    let mutating = [
        webhook(
            "first.example.com",
            pods,
            "  timeoutSeconds: 30\n  failurePolicy: Ignore\n  reinvocationPolicy: IfNeeded\n",
        ),
        webhook(
            "second.example.com",
            pods,
            "  timeoutSeconds: 20\n  failurePolicy: Ignore\n",
        ),
    ];
    std::fs::write(
        dir.join("mutating.yaml"),
        format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\n\
             metadata: {{name: slow}}\nwebhooks:\n{}",
            mutating.concat()
        ),
    )
    .unwrap();
    let (code, out) = check(&["--config", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "findings are warnings: {out}");
    let lines = |webhook: &str| -> Vec<&str> {
        out.lines()
            .filter(|l| l.starts_with("warning: ") && l.contains(&format!("webhook {webhook:?}")))
            .collect()
    };
    let everything = lines("everything.example.com");
    for what in [
        "rules[0]: every resource of every group",
        "failurePolicy: Fail, and the webhook is called for a kubelet renewing its node Lease in kube-node-lease",
        "a kubelet registering its Node (CREATE nodes)",
        "kube-controller-manager renewing its leader election Lease in kube-system",
        "a TokenReview",
        "a SubjectAccessReview",
        "a kubelet requesting its client or serving certificate (CREATE certificatesigningrequests)",
        "a system pod in kube-system",
        "creating a pod in the backend's own namespace \"policy\"",
        "updating endpoints in the backend's own namespace \"policy\"",
    ] {
        assert!(
            everything.iter().any(|l| l.contains(what)),
            "{what:?} not flagged for the catch-all webhook:\n{out}"
        );
    }
    assert!(everything.iter().all(|l| l.contains("fix: ")), "{out}");
    // `*` resources are main resources only: nodes/status is not matched.
    assert!(
        !everything.iter().any(|l| l.contains("nodes/status")),
        "{out}"
    );
    let leases = lines("leases.example.com");
    assert_eq!(leases.len(), 0, "system namespaces left out: {out}");
    let pods = lines("pods.example.com");
    assert_eq!(
        pods.len(),
        1,
        "its own namespace's pods (and no endpoints): {out}"
    );
    assert!(
        pods[0].contains("webhooks[2].failurePolicy") && pods[0].contains("\"policy\""),
        "{out}"
    );
    let quiet = lines("quiet.example.com");
    assert_eq!(quiet.len(), 1, "Ignore: only the catch-all rule: {out}");
    assert!(quiet[0].contains("webhooks[3].rules[0]"), "{out}");
    // The catch-all finding reads the selectors (the Gatekeeper and Kyverno shapes): an
    // objectSelector narrows it; a namespaceSelector silences it only if it leaves kube-system
    // out.
    assert!(
        !lines("deletes.example.com")
            .iter()
            .any(|l| l.contains("every resource of every group")),
        "{out}"
    );
    assert!(
        lines("leaky.example.com")
            .iter()
            .any(|l| l.contains("webhooks[5].rules[0]: every resource of every group")),
        "{out}"
    );
    let first = lines("first.example.com");
    assert!(
        first
            .iter()
            .any(|l| l
                .contains("webhooks[0].timeoutSeconds: 30 s with reinvocationPolicy: IfNeeded")),
        "{out}"
    );
    assert!(
        first.iter().any(|l| l.contains("CREATE core pods: first.example.com (mutating 30 s x2 (IfNeeded)), second.example.com (mutating 20 s), everything.example.com (validating 10 s)")
            && l.contains("may take 90 s together")),
        "{out}"
    );
    assert!(out.lines().last().unwrap().starts_with("valid: "), "{out}");
    // kube-apiserver 1.37 never sends TokenReviews and SubjectAccessReviews to webhooks
    // (ExcludeAdmissionWebhookVirtualResources): not at risk there; the rest still is.
    let (_, at_137) = check(&["--config", dir.to_str().unwrap(), "--kube-version", "1.37"]);
    assert!(
        !at_137.contains("a TokenReview") && !at_137.contains("a SubjectAccessReview"),
        "{at_137}"
    );
    assert!(
        at_137.contains("a kubelet registering its Node"),
        "{at_137}"
    );
    assert!(
        at_137
            .lines()
            .last()
            .unwrap()
            .contains("virtual authentication and authorization resources"),
        "{at_137}"
    );
    let (code, _) = check(&["--config", dir.to_str().unwrap(), "--fail-on", "warning"]);
    assert_eq!(code, 1, "--fail-on warning gates on findings");
    // The bundled configuration: none of these findings (only the loader's own warnings: the
    // demo's sideEffects Unknown and removed extensions/v1beta1 rule).
    let bundled = concat!(env!("CARGO_MANIFEST_DIR"), "/config");
    let (_, out) = check(&["--config", bundled]);
    let warnings: Vec<&str> = out.lines().filter(|l| l.starts_with("warning: ")).collect();
    assert_eq!(warnings.len(), 2, "{out}");
    assert!(
        warnings[0].contains("sideEffects: Unknown is only accepted"),
        "{out}"
    );
    assert!(warnings[1].contains("removed in Kubernetes 1.16"), "{out}");
}

/// `--kube-version` never takes away what the proxy evaluates itself: kube-apiserver compiles
/// a new matchCondition against the CEL environment of the release before its own (a library
/// is refused in the release that added it, `base.go`'s `IntroducedVersion`s) and has no
/// matchConditions before 1.28, but the proxy's registration carries none and the proxy
/// evaluates them in its own environment. `check` warns of what kube-apiserver alone would
/// refuse; `check`, `explain` and `serve` load it (they refused it, so a 1.26 cluster got no
/// matchConditions through the proxy, the proxy's first promise).
#[test]
fn kube_version_warns_of_cel_libraries_the_cluster_alone_would_refuse() {
    let dir = scratch("kube-version");
    let config = |expression: &str| {
        format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\n\
             metadata: {{name: versions}}\nwebhooks:\n- name: v.example.com\n  \
             clientConfig: {{url: \"https://127.0.0.1:9/\"}}\n  \
             rules: [{{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [pods]}}]\n  \
             namespaceSelector: {{matchLabels: {{team: a}}}}\n  \
             sideEffects: None\n  admissionReviewVersions: [v1]\n  \
             matchConditions:\n  - name: c\n    expression: {expression:?}\n"
        )
    };
    // (expression, the release whose library it needs, its function)
    for (expression, since, function) in [
        ("isIP(object.metadata.name)", 30, "isIP"),
        ("sets.contains(['a'], ['a'])", 29, "sets.contains"),
        ("object.?metadata.?name.hasValue()", 28, "hasValue"),
        ("'%s'.format(['a']) == 'a'", 29, "format"),
        (
            "format.dns1123Label().validate('a') == optional.none()",
            31,
            "format.dns1123Label",
        ),
        ("isSemver('1.2.3')", 33, "isSemver"),
        (
            "authorizer.group('').resource('pods').labelSelector('a=b').check('list').allowed()",
            31,
            "labelSelector",
        ),
    ] {
        let file = dir.join("c.yaml");
        std::fs::write(&file, config(expression)).unwrap();
        let path = file.to_str().unwrap();
        let at = format!("1.{since}");
        let (code, out) = check(&["--config", path, "--kube-version", &at]);
        assert_eq!(
            code, 0,
            "{expression} at {at}: the proxy evaluates it: {out}"
        );
        let warning = out
            .lines()
            .find(|l| l.starts_with("warning: ") && l.contains("matchConditions[0].expression"))
            .unwrap_or_default();
        assert!(
            warning.contains(&format!("from 1.{since}, and kube-apiserver 1.{since} compiles new expressions against 1.{}'s: the proxy evaluates it; kube-apiserver would refuse it in its own registration (undeclared reference to '{function}')", since - 1)),
            "{expression} at {at}: {out}"
        );
        let next = format!("1.{}", since + 1);
        let (code, out) = check(&["--config", path, "--kube-version", &next]);
        assert_eq!(code, 0, "{expression} at {next}: {out}");
        assert!(!out.contains("undeclared reference"), "{out}");
        let (code, out) = check(&["--config", path]);
        assert_eq!(code, 0, "{expression} without --kube-version: {out}");
    }
    // Before 1.28 kube-apiserver has no matchConditions: the proxy still evaluates them.
    let file = dir.join("c.yaml");
    std::fs::write(&file, config("object.metadata.name != ''")).unwrap();
    let path = file.to_str().unwrap();
    let (code, out) = check(&["--config", path, "--kube-version", "1.26"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("webhooks[0].matchConditions: matchConditions are served from Kubernetes 1.28 (--kube-version 1.26): the proxy evaluates them"), "{out}");
    let (code, out) = check(&["--config", path, "--kube-version", "2.0"]);
    assert_eq!(code, 2, "a bad version is a usage error: {out}");

    // explain and serve serve the same configuration, and evaluate its conditions.
    std::fs::write(&file, config("isIP(object.metadata.name)")).unwrap();
    let review = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/admission-reviews/0096-create-core-v1-pods-v1.json"
    );
    let explain = Command::new(env!("CARGO_BIN_EXE_admission-proxy"))
        .args([
            "explain",
            "--config",
            path,
            "--review",
            review,
            "--kube-version",
            "1.26",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&explain.stdout);
    assert!(
        explain.status.success() && stdout.contains("v.example.com"),
        "{stdout} {}",
        String::from_utf8_lossy(&explain.stderr)
    );
}

/// KEP-5793's layout (kube-apiserver 1.36 `staticManifestsDir`): a directory of v1
/// ValidatingWebhookConfigurations named `*.static.k8s.io`, as a `…List` and multi-document
/// YAML, with url and caBundle, loads as any configuration directory and passes
/// `check --static-manifests validating`; kube-apiserver's own refusals are `check`'s, in its
/// words; a field given twice is refused by strict decoding, in YAML and JSON alike.
#[test]
fn static_manifests_layout_loads_and_is_checked_as_kube_apiserver_loads_it() {
    let dir = scratch("static-manifests");
    let ca = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJpakNDQVRHZ0F3SUJBZ0lVWkxSOWhabktrZitaYjUvejkybWo1Z09KTnl3d0NnWUlLb1pJemowRUF3SXcKRkRFU01CQUdBMVVFQXd3Sk1USTNMakF1TUM0eE1CNFhEVEkyTVRFeU56RTFOVEF4TWxvWERUSTJNVEV5T1RFMQpOVEF4TWxvd0ZERVNNQkFHQTFVRUF3d0pNVEkzTGpBdU1DNHhNRmt3RXdZSEtvWkl6ajBDQVFZSUtvWkl6ajBECkFRY0RRZ0FFU3IyWkQxaFdWRXlkOUxEemJoSngxSmtuREd4OHl2clIyREloSFpSMDlGeStUWjRxU1ZiL0FBVk0KYmk1QkVqamxvS2YwcVRIamlvcElSTUtiVS9UTXVLTmhNRjh3SFFZRFZSME9CQllFRkxmcTVHaDFEWGlYNFV6dgo0MHFENXRUQ1BET2JNQjhHQTFVZEl3UVlNQmFBRkxmcTVHaDFEWGlYNFV6djQwcUQ1dFRDUERPYk1BOEdBMVVkCkVRUUlNQWFIQkg4QUFBRXdEQVlEVlIwVEFRSC9CQUl3QURBS0JnZ3Foa2pPUFFRREFnTkhBREJFQWlCclFuWnYKQ0x3WUhJOUc1NncvaVA0SnlGc05qblkzTVZ6aXQxdE1xQVg4bmdJZ2ZMaEtKL2VvZ1B3OTZYMy90Nkk2cThpRApORG10SG5nNnFwdnBDWXZubWQwPQotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg==";
    let config = |name: &str, webhook: &str, client: &str| {
        format!(
            "{{apiVersion: admissionregistration.k8s.io/v1, kind: ValidatingWebhookConfiguration, \
             metadata: {{name: {name}}}, webhooks: [{{name: {webhook}, clientConfig: {client}, \
             rules: [{{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [pods], scope: Namespaced}}], \
             sideEffects: None, admissionReviewVersions: [v1], \
             namespaceSelector: {{matchLabels: {{team: a}}}}}}]}}"
        )
    };
    let good = |name: &str, webhook: &str| {
        config(
            name,
            webhook,
            &format!("{{url: \"https://127.0.0.1:8443/webhooks/{webhook}\", caBundle: {ca}}}"),
        )
    };
    std::fs::write(
        dir.join("a.yaml"),
        format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfigurationList\nitems:\n- {}\n---\n{}\n",
            good("one.static.k8s.io", "one.example.com"),
            good("two.static.k8s.io", "two.example.com")
        ),
    )
    .unwrap();
    let path = dir.to_str().unwrap();
    let (code, out) = check(&["--config", path, "--static-manifests", "validating"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.lines()
            .last()
            .unwrap()
            .contains("2 webhook(s) in 1 file(s)"),
        "{out}"
    );

    // Each of kube-apiserver's refusals.
    std::fs::write(dir.join("b.yaml"), good("plain-name", "three.example.com")).unwrap();
    std::fs::write(
        dir.join("c.yaml"),
        config(
            "svc.static.k8s.io",
            "four.example.com",
            "{service: {namespace: policy, name: webhook}}",
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("d.yaml"),
        config(
            "noca.static.k8s.io",
            "five.example.com",
            "{url: \"https://127.0.0.1:8443/x\"}",
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("e.yaml"),
        "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata: {name: m.static.k8s.io}\nwebhooks: []\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("f.yaml"),
        good("one.static.k8s.io", "six.example.com"),
    )
    .unwrap();
    let (code, out) = check(&["--config", path, "--static-manifests", "validating"]);
    assert_eq!(code, 1, "{out}");
    let file = |f: &str| dir.join(f).display().to_string();
    for expected in [
        format!("ValidatingWebhookConfiguration \"plain-name\" in file {:?} must have a name ending with \".static.k8s.io\"", file("b.yaml")),
        format!("webhook \"four.example.com\" in ValidatingWebhookConfiguration \"svc.static.k8s.io\" (file {:?}): clientConfig.service is not supported for static manifests; use clientConfig.url instead", file("c.yaml")),
        format!("webhook \"five.example.com\" in ValidatingWebhookConfiguration \"noca.static.k8s.io\" (file {:?}): clientConfig.caBundle is required for static manifests", file("d.yaml")),
        format!("file {:?} contains MutatingWebhookConfiguration but this directory is configured for ValidatingAdmissionWebhook plugin; use a separate directory", file("e.yaml")),
        format!("duplicate ValidatingWebhookConfiguration name \"one.static.k8s.io\" found in file {:?} (previously seen in {:?})", file("f.yaml"), file("a.yaml")),
    ] {
        assert!(out.lines().any(|l| l.starts_with("error: ") && l.contains(&expected)), "{expected}\n{out}");
    }
    // Without --static-manifests the same directory is an ordinary configuration directory.
    std::fs::remove_file(dir.join("f.yaml")).unwrap();
    let (code, out) = check(&["--config", path]);
    assert_eq!(code, 0, "{out}");

    // Strict decoding: a field given twice, in YAML and in JSON.
    for (name, text) in [
        ("g.yaml", "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: g, name: h}\nwebhooks: []\n"),
        ("g.json", r#"{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "g"}, "webhooks": [], "webhooks": []}"#),
    ] {
        std::fs::write(dir.join(name), text).unwrap();
        let (code, out) = check(&["--config", path]);
        assert_eq!(code, 1, "{out}");
        assert!(out.contains("strict decoding error: duplicate field"), "{out}");
        std::fs::remove_file(dir.join(name)).unwrap();
    }
}

/// What kube-apiserver 1.32.0 refuses at create (`tests/fixtures/policy-refusals/`: each
/// document and its answer to `kubectl apply --dry-run=server`), `check` refuses in the same
/// words: required and unsupported values, apimachinery's qualified-name and label-selector
/// messages, cel-go's compile errors with the source line and caret, return types, a binding
/// validated on its own even when its policy is not in the directory, type errors
/// (`undefined field 'foo1'`, no matching overload).
#[test]
fn kube_apiserver_s_refusals_are_check_s_in_its_words() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/policy-refusals");
    let answers = std::fs::read_to_string(dir.join("kube-apiserver-1.32.0.txt")).unwrap();
    let mut cases: Vec<(String, Vec<String>)> = Vec::new();
    for line in answers.lines() {
        if let Some(name) = line.strip_prefix("=== ") {
            cases.push((name.to_string(), Vec::new()));
        } else if let Some((_, lines)) = cases.last_mut() {
            let line = line.trim();
            if line.is_empty() || line.starts_with("--- ") {
                continue;
            }
            // `The ValidatingAdmissionPolicy "p" is invalid: ` leads the first error, `* `
            // the others when there are several.
            let line = match line.split_once(" is invalid:") {
                Some((_, rest)) => rest.trim(),
                None => line.trim_start_matches("* "),
            };
            if !line.is_empty() {
                lines.push(line.to_string());
            }
        }
    }
    assert_eq!(cases.len(), 24);
    let mut differ = Vec::new();
    for (name, want) in &cases {
        let scratch = scratch(&format!("refusal-{name}"));
        std::fs::copy(dir.join(name), scratch.join(name)).unwrap();
        let (code, out) = check(&["--config", scratch.to_str().unwrap()]);
        let missing: Vec<&String> = want.iter().filter(|w| !out.contains(w.as_str())).collect();
        if missing.is_empty() {
            assert_eq!(code, 1, "{name}: refused\n{out}");
        } else {
            differ.push(format!(
                "{name}: kube-apiserver said {missing:?}; check said\n{out}"
            ));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

/// `check` compares a candidate policy's scope with its legacy webhook's, both ways: a policy
/// that misses cronjobs (the legacy webhook's rules name them) would leave them without a
/// verdict after the cut-over; one that also covers DELETE gets requests the legacy webhook
/// never sees, never compared.
#[test]
fn a_candidate_policy_s_scope_is_compared_with_its_legacy_webhook_s() {
    let dir = scratch("candidate-scope");
    std::fs::write(
        dir.join("webhooks.yaml"),
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\n\
         metadata: {name: legacy}\nwebhooks:\n- name: workloads.legacy.example.com\n  \
         clientConfig: {url: \"https://127.0.0.1:9/never\"}\n  rules:\n  \
         - {operations: [CREATE, UPDATE], apiGroups: [apps], apiVersions: [v1], resources: [deployments]}\n  \
         - {operations: [CREATE, UPDATE], apiGroups: [batch], apiVersions: [v1], resources: [cronjobs]}\n  \
         sideEffects: None\n  admissionReviewVersions: [v1]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("candidate.yaml"),
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\n\
         metadata: {name: workloads}\nspec:\n  matchConstraints:\n    resourceRules:\n    \
         - {operations: [CREATE, UPDATE, DELETE], apiGroups: [apps], apiVersions: [v1], resources: [deployments]}\n  \
         validations:\n  - expression: \"true\"\n---\n\
         apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n\
         metadata: {name: workloads}\nspec: {policyName: workloads, validationActions: [Deny]}\n---\n\
         apiVersion: admission-proxy.io/v1alpha1\nkind: Candidate\nmetadata: {name: workloads}\n\
         spec: {webhook: workloads.legacy.example.com, policy: {name: workloads}}\n",
    )
    .unwrap();
    let (code, out) = check(&["--config", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "warnings only: {out}");
    assert!(
        out.contains("does not cover requests its legacy webhook \"workloads.legacy.example.com\" is called for: batch/v1 cronjobs (CREATE, UPDATE)"),
        "{out}"
    );
    assert!(
        out.contains("covers requests its legacy webhook \"workloads.legacy.example.com\" is never called for: apps/v1 deployments (DELETE)"),
        "{out}"
    );
}

/// The webhook configurations projects ship (`tests/fixtures/public-webhooks/`: cert-manager,
/// Gatekeeper, Istio, Linkerd, Crossplane, Knative Serving, sources in its README) load as
/// kube-apiserver loads them, with exactly the findings that are right for them: Gatekeeper's
/// catch-all rules, whose namespaceSelector leaves out only namespaces labelled to be ignored
/// (kube-system is not, as created), and nothing else (Linkerd's generated caBundle, Istio's
/// four injector webhooks, Knative's webhooks without rules, Crossplane's placeholder service).
#[test]
fn public_webhook_configurations_load_with_the_right_findings() {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/public-webhooks"
    );
    let gatekeeper = |kind: &str, name: &str, webhook: &str| {
        format!("warning: {dir}/gatekeeper.yaml: {kind} \"{name}\": webhook \"{webhook}\": webhooks[0].rules[0]: every resource of every group, in every namespace (kube-system included) and a namespaceSelector that selects kube-system as it is created (labelled with its name only): fix: add a namespaceSelector leaving out the system namespaces (kubernetes.io/metadata.name NotIn [kube-system, kube-node-lease]) or name the resources the webhook needs")
    };
    let expected: [(&str, usize, Vec<String>); 6] = [
        ("cert-manager", 2, vec![]),
        ("crossplane", 1, vec![]),
        (
            "gatekeeper",
            3,
            vec![
                gatekeeper(
                    "MutatingWebhookConfiguration",
                    "gatekeeper-mutating-webhook-configuration",
                    "mutation.gatekeeper.sh",
                ),
                gatekeeper(
                    "ValidatingWebhookConfiguration",
                    "gatekeeper-validating-webhook-configuration",
                    "validation.gatekeeper.sh",
                ),
            ],
        ),
        ("istio", 6, vec![]),
        ("knative-serving", 3, vec![]),
        ("linkerd", 3, vec![]),
    ];
    for (project, webhooks, warnings) in expected {
        let file = format!("{dir}/{project}.yaml");
        let (code, out) = check(&["--config", &file]);
        assert_eq!(code, 0, "{project}: {out}");
        let mut want = warnings.clone();
        let summary = if warnings.is_empty() {
            format!("valid: {file}: {webhooks} webhook(s) in 1 file(s)")
        } else {
            format!(
                "valid: {file}: {webhooks} webhook(s) in 1 file(s); {} warning(s)",
                warnings.len()
            )
        };
        want.push(summary);
        assert_eq!(out.lines().collect::<Vec<_>>(), want, "{project}");
    }
}
