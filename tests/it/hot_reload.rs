//! Hot reload, through the real binary: a ConfigMap-style `..data` symlink swap, a plain file
//! rewrite, and an invalid change that must not replace the last good configuration; files
//! that must not stall or flood the reload thread (a named pipe, deep nesting, thousands of
//! problems).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use admission_proxy::dispatch::{HttpClient, Target};

use crate::common::{self, BinaryProxy, Workspace};

fn webhook(name: &str, operation: &str) -> String {
    format!(
        "- name: {name}\n  clientConfig: {{url: \"https://127.0.0.1:9/never\"}}\n  rules: [{{operations: [{operation}], apiGroups: [\"\"], apiVersions: [v1], resources: [pods]}}]\n  sideEffects: None\n  admissionReviewVersions: [v1]\n"
    )
}

fn config(hooks: &[(&str, &str)]) -> String {
    let mut s = "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: reload}\nwebhooks:\n".to_string();
    for (name, op) in hooks {
        s.push_str(&webhook(name, op));
    }
    s
}

/// Writes `contents` as a new ConfigMap revision and swaps `..data` to it atomically, as the
/// kubelet does.
fn configmap_swap(dir: &Path, revision: &str, contents: &str) {
    let rev = dir.join(revision);
    std::fs::create_dir_all(&rev).unwrap();
    std::fs::write(rev.join("webhooks.yaml"), contents).unwrap();
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(revision, &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
}

async fn status(client: &HttpClient, target: &Target, webhook: &str) -> u16 {
    let body = common::fixture("0096-create-core-v1-pods-v1.json");
    client
        .post(
            target,
            &format!("/webhooks/{webhook}?timeout=10s"),
            &body,
            &[],
        )
        .await
        .map(|r| r.status)
        .unwrap_or(0)
}

/// Polls until `webhook` answers `want`, at most 60 times 50 ms; returns how long it took.
async fn wait_for(
    client: &HttpClient,
    target: &Target,
    webhook: &str,
    want: u16,
) -> Option<Duration> {
    let t0 = Instant::now();
    for _ in 0..60 {
        if status(client, target, webhook).await == want {
            return Some(t0.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reloads_configmap_swaps_and_keeps_last_good_config() {
    let ws = Workspace::new("reload");
    let (dir, conf, pki, cert, key) = (&ws.dir, &ws.conf, &ws.pki, &ws.cert, &ws.key);
    configmap_swap(conf, "..rev1", &config(&[("a.reload.test", "UPDATE")]));
    std::os::unix::fs::symlink("..data/webhooks.yaml", conf.join("webhooks.yaml")).unwrap();

    let proxy = BinaryProxy::start(conf, cert, key, &[]);
    let (client, target) = (HttpClient::new(), proxy.target(pki));
    assert_eq!(
        status(&client, &target, "a.reload.test").await,
        200,
        "UPDATE-only webhook skips a CREATE"
    );
    assert_eq!(status(&client, &target, "b.reload.test").await, 404);

    configmap_swap(
        conf,
        "..rev2",
        &config(&[("a.reload.test", "UPDATE"), ("b.reload.test", "UPDATE")]),
    );
    let took = wait_for(&client, &target, "b.reload.test", 200)
        .await
        .expect("the ..data swap is picked up");
    assert!(took < Duration::from_millis(1500), "reload took {took:?}");

    configmap_swap(conf, "..rev3", &config(&[("c.reload.test", "PATCH")]));
    let t0 = Instant::now();
    let mut logged = false;
    for _ in 0..60 {
        if proxy.logs.lock().unwrap().iter().any(|l| {
            l.contains("webhooks[0].rules[0].operations[0]")
                && l.contains("PATCH")
                && l.contains("webhook \\\"c.reload.test\\\"")
        }) {
            logged = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        logged,
        "the invalid change is logged with its location: {:?}",
        proxy.logs.lock().unwrap()
    );
    assert!(t0.elapsed() < Duration::from_secs(3));
    assert_eq!(
        status(&client, &target, "b.reload.test").await,
        200,
        "the last good configuration keeps serving"
    );
    assert_eq!(status(&client, &target, "c.reload.test").await, 404);

    // A plain second file next to the ConfigMap links.
    std::fs::write(
        conf.join("extra.yaml"),
        config(&[("d.reload.test", "DELETE")]).replace("name: reload", "name: extra"),
    )
    .unwrap();
    configmap_swap(conf, "..rev4", &config(&[("a.reload.test", "UPDATE")]));
    wait_for(&client, &target, "d.reload.test", 200)
        .await
        .expect("the new file is picked up");
    assert_eq!(
        status(&client, &target, "b.reload.test").await,
        404,
        "b was removed"
    );

    // One emptied file among others (a half-written ConfigMap key) is refused like an invalid
    // one: its webhooks keep answering instead of turning into 404s.
    std::fs::write(conf.join("extra.yaml"), "").unwrap();
    assert!(
        tokio::task::block_in_place(|| proxy.logged("has no documents")),
        "the empty file is refused: {:?}",
        proxy.logs.lock().unwrap()
    );
    assert_eq!(
        status(&client, &target, "d.reload.test").await,
        200,
        "the emptied file's webhook keeps serving"
    );

    // An empty file (what an in-place write looks like between truncate and write) does not
    // take every webhook away.
    configmap_swap(conf, "..rev5", "");
    std::fs::remove_file(conf.join("extra.yaml")).unwrap();
    assert!(
        tokio::task::block_in_place(|| proxy.logged("webhooks.yaml: the file has no documents")),
        "the empty configuration is refused: {:?}",
        proxy.logs.lock().unwrap()
    );
    assert_eq!(
        status(&client, &target, "a.reload.test").await,
        200,
        "the last good configuration keeps serving"
    );
    drop(proxy);
    let _ = std::fs::remove_dir_all(dir);
}

/// Reloads while requests keep coming (issue "Latency you can prove", §3): every answer during
/// `ADMISSION_PROXY_RELOADS` (default 10; the benchmark runs 100) confirmed reloads must be the
/// right one: HTTP 200, this request's uid, the backend's denial. Each revision adds a marker
/// webhook, and the next revision is only written once the marker answers, so each counts as
/// a real reload rather than one merged by the debounce.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reloads_under_load_never_answer_wrongly() {
    let reloads: usize = std::env::var("ADMISSION_PROXY_RELOADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10)
        .min(1000);
    let ws = Workspace::new("load");
    let (dir, conf, pki, cert, key) = (&ws.dir, &ws.conf, &ws.pki, &ws.cert, &ws.key);
    let backend = common::TestBackend::start();
    let revision = |i: usize| {
        let steady = common::validating(
            "steady.reload.test",
            &backend.client_config("/deny"),
            common::ALL,
            // Alternate a setting so that consecutive revisions really differ.
            &format!("timeoutSeconds: {}", 10 + i % 2),
        );
        format!(
            "{steady}---\n{}",
            config(&[(&format!("rev-{i}.reload.test"), "UPDATE")])
        )
    };
    std::fs::write(conf.join("webhooks.yaml"), revision(0)).unwrap();
    let proxy = BinaryProxy::start(conf, cert, key, &[]);
    let client = Arc::new(HttpClient::new());
    let target = Arc::new(proxy.target(pki));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let template = String::from_utf8(common::fixture("0096-create-core-v1-pods-v1.json")).unwrap();
    let uid: String = serde_json::from_str::<serde_json::Value>(&template).unwrap()["request"]
        ["uid"]
        .as_str()
        .unwrap()
        .to_string();
    let mut load = Vec::new();
    for worker in 0..4 {
        let (client, target, done) = (client.clone(), target.clone(), done.clone());
        let (template, uid) = (template.clone(), uid.clone());
        load.push(tokio::spawn(async move {
            let (mut ok, mut wrong) = (0usize, Vec::new());
            // Bounded in count; `done` normally ends it much earlier.
            for n in 0..200_000usize {
                if done.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                let fresh = format!("00000000-0000-4000-8000-{worker:04}{n:08}");
                let body = template.replacen(&uid, &fresh, 1);
                let reply = client
                    .post(
                        &target,
                        "/webhooks/steady.reload.test?timeout=10s",
                        body.as_bytes(),
                        &[],
                    )
                    .await;
                let answer = reply.as_ref().ok().and_then(|r| {
                    let v: serde_json::Value = serde_json::from_slice(&r.body).ok()?;
                    Some((
                        r.status,
                        v["response"]["uid"].as_str()?.to_string(),
                        v["response"]["allowed"].as_bool()?,
                    ))
                });
                match answer {
                    Some((200, u, false)) if u == fresh => ok += 1,
                    other => wrong.push(match &reply {
                        Ok(r) => format!(
                            "{fresh}: {other:?}: HTTP {} {}",
                            r.status,
                            String::from_utf8_lossy(&r.body[..r.body.len().min(200)])
                        ),
                        Err(e) => format!("{fresh}: {e}"),
                    }),
                }
            }
            (ok, wrong)
        }));
    }
    for i in 1..=reloads {
        std::fs::write(conf.join("webhooks.yaml"), revision(i)).unwrap();
        wait_for(&client, &target, &format!("rev-{i}.reload.test"), 200)
            .await
            .unwrap_or_else(|| panic!("revision {i} was not loaded"));
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let (mut answered, mut wrong) = (0, Vec::new());
    for task in load {
        let (ok, w) = task.await.unwrap();
        answered += ok;
        wrong.extend(w);
    }
    assert!(
        wrong.is_empty(),
        "{} wrong answers, e.g. {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
    assert!(
        answered > reloads,
        "load kept running through the reloads ({answered} answers)"
    );
    let reloaded = proxy
        .logs
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains("webhook configuration reloaded"))
        .count();
    assert_eq!(reloaded, reloads, "each revision is exactly one reload");
    eprintln!("{reloads} reloads, {answered} answers under load, none wrong");
    drop(proxy);
    let _ = std::fs::remove_dir_all(dir);
}

/// A configuration directory deleted and created again took its inotify watch with
/// it; its changes were then seen only at the periodic resync (60 s here). The watch is re-armed
/// from the parent directory's event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recreated_config_directory_is_watched_again() {
    let ws = Workspace::new("rearm");
    let (conf, pki, cert, key) = (&ws.conf, &ws.pki, &ws.cert, &ws.key);
    std::fs::write(
        conf.join("webhooks.yaml"),
        config(&[("a.rearm.test", "UPDATE")]),
    )
    .unwrap();
    let proxy = BinaryProxy::start(conf, cert, key, &[]);
    let (client, target) = (HttpClient::new(), proxy.target(pki));
    assert_eq!(status(&client, &target, "a.rearm.test").await, 200);

    std::fs::remove_dir_all(conf).unwrap();
    std::fs::create_dir(conf).unwrap();
    std::fs::write(
        conf.join("webhooks.yaml"),
        config(&[("b.rearm.test", "UPDATE")]),
    )
    .unwrap();
    wait_for(&client, &target, "b.rearm.test", 200)
        .await
        .expect("the recreated directory's file is loaded");
    // And the directory is watched again: a later change is seen too.
    std::fs::write(
        conf.join("more.yaml"),
        config(&[("c.rearm.test", "UPDATE")]).replace("name: reload", "name: more"),
    )
    .unwrap();
    wait_for(&client, &target, "c.rearm.test", 200)
        .await
        .unwrap_or_else(|| {
            panic!(
                "a change in the recreated directory is seen: {:?}",
                proxy.logs.lock().unwrap()
            )
        });
    drop(proxy);
    let _ = std::fs::remove_dir_all(&ws.dir);
}

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("run mkfifo");
    assert!(status.success());
}

/// How many log lines contain `needle`.
fn count_logged(proxy: &BinaryProxy, needle: &str) -> usize {
    let logs = proxy.logs.lock().unwrap();
    logs.iter().filter(|l| l.contains(needle)).count()
}

/// A named pipe put in place of the one configuration file (`--config FILE`) is refused at
/// once, naming the file, and the reload thread goes on: a later edit applies. It used to
/// block in `open` forever, and no later change of any file applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_pipe_in_place_of_the_config_file_does_not_stop_reloads() {
    let ws = Workspace::new("fifo");
    let file = ws.dir.join("webhooks.yaml");
    std::fs::write(&file, config(&[("a.fifo.test", "UPDATE")])).unwrap();
    let proxy = BinaryProxy::start(&file, &ws.cert, &ws.key, &[]);
    let (client, target) = (HttpClient::new(), proxy.target(&ws.pki));
    assert_eq!(status(&client, &target, "a.fifo.test").await, 200);

    std::fs::remove_file(&file).unwrap();
    mkfifo(&file);
    let refused = format!(
        "cannot read {}: not a regular file (a named pipe)",
        file.display()
    );
    assert!(
        tokio::task::block_in_place(|| proxy.logged(&refused)),
        "the pipe is refused, naming it: {:?}",
        proxy.logs.lock().unwrap()
    );
    assert_eq!(status(&client, &target, "a.fifo.test").await, 200);

    std::fs::remove_file(&file).unwrap();
    std::fs::write(
        &file,
        config(&[("a.fifo.test", "UPDATE"), ("b.fifo.test", "UPDATE")]),
    )
    .unwrap();
    wait_for(&client, &target, "b.fifo.test", 200)
        .await
        .unwrap_or_else(|| panic!("a later edit is applied: {:?}", proxy.logs.lock().unwrap()));
}

/// YAML nested 50,000 deep is refused before it is parsed, naming the file and the line (the
/// parser's cost grows with the square of the depth: 100,000 levels kept the reload thread busy
/// for 37 s), and reloads go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deeply_nested_file_is_refused_before_it_is_parsed() {
    let ws = Workspace::new("deep");
    let conf = &ws.conf;
    std::fs::write(
        conf.join("webhooks.yaml"),
        config(&[("a.deep.test", "UPDATE")]),
    )
    .unwrap();
    let proxy = BinaryProxy::start(conf, &ws.cert, &ws.key, &[]);
    let (client, target) = (HttpClient::new(), proxy.target(&ws.pki));
    assert_eq!(status(&client, &target, "a.deep.test").await, 200);

    let depth = 50_000;
    std::fs::write(
        conf.join("deep.yaml"),
        format!(
            "kind: List\nitems: {}{}\n",
            "[".repeat(depth),
            "]".repeat(depth)
        ),
    )
    .unwrap();
    assert!(
        tokio::task::block_in_place(|| proxy.logged(
            "deep.yaml: nested more than 128 levels deep at line 2: refused before parsing"
        )),
        "the file is refused with its line: {:?}",
        proxy.logs.lock().unwrap()
    );
    assert_eq!(status(&client, &target, "a.deep.test").await, 200);

    std::fs::remove_file(conf.join("deep.yaml")).unwrap();
    std::fs::write(
        conf.join("more.yaml"),
        config(&[("b.deep.test", "UPDATE")]).replace("name: reload", "name: more"),
    )
    .unwrap();
    wait_for(&client, &target, "b.deep.test", 200)
        .await
        .expect("a later edit is applied");
}

/// A file of 1,000 documents that are not webhook configurations is one rejection listing the
/// first 20 problems and how many more, not an error line per document.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_problems_are_summarised() {
    let ws = Workspace::new("many");
    let conf = &ws.conf;
    std::fs::write(
        conf.join("webhooks.yaml"),
        config(&[("a.many.test", "UPDATE")]),
    )
    .unwrap();
    let proxy = BinaryProxy::start(conf, &ws.cert, &ws.key, &[]);
    let (client, target) = (HttpClient::new(), proxy.target(&ws.pki));
    assert_eq!(status(&client, &target, "a.many.test").await, 200);

    std::fs::write(conf.join("many.yaml"), "kind: Nope\n---\n".repeat(1000)).unwrap();
    assert!(
        tokio::task::block_in_place(|| proxy.logged("change rejected")),
        "the change is rejected: {:?}",
        proxy.logs.lock().unwrap()
    );
    assert_eq!(
        count_logged(&proxy, "many.yaml (document"),
        20,
        "the first 20 problems are listed: {:?}",
        proxy.logs.lock().unwrap()
    );
    assert_eq!(
        count_logged(
            &proxy,
            "many.yaml: and 980 more problems in this file, not listed"
        ),
        1,
        "then how many more: {:?}",
        proxy.logs.lock().unwrap()
    );
    assert_eq!(status(&client, &target, "a.many.test").await, 200);
}

/// `/metrics` once `admission_proxy_config_last_reload_successful` is `want` (bounded: the
/// reload thread applies a change after the file event, so the first scrape after a write may
/// still see the previous value).
async fn scrape_when_reload_successful_is(
    proxy: &BinaryProxy,
    ws: &Workspace,
    want: f64,
) -> String {
    let successful =
        |m: &str| common::metric_value(m, "admission_proxy_config_last_reload_successful", &[]);
    let last = tokio::task::block_in_place(|| {
        proxy.scrape_until(&ws.pki, |m| successful(m) == Some(want))
    });
    assert_eq!(
        successful(&last),
        Some(want),
        "admission_proxy_config_last_reload_successful never became {want}: {last}"
    );
    last
}

fn now_seconds() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// A refused change sets `admission_proxy_config_last_reload_successful` to 0, which
/// AdmissionProxyConfigReloadFailed fires on for as long as the files stay bad (the reload
/// counter only says that a reload failed once); a good reload sets it back to 1 and moves
/// `admission_proxy_config_last_reload_success_timestamp_seconds`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_reload_is_exported_until_a_good_one() {
    let ws = Workspace::new("reload-state");
    let file = ws.conf.join("webhooks.yaml");
    std::fs::write(&file, config(&[("a.state.test", "UPDATE")])).unwrap();
    let started = now_seconds();
    let proxy = BinaryProxy::start(&ws.conf, &ws.cert, &ws.key, &[]);
    let timestamp = |metrics: &str| {
        common::metric_value(
            metrics,
            "admission_proxy_config_last_reload_success_timestamp_seconds",
            &[],
        )
        .expect("the last good load's time is exported")
    };
    let at_start = scrape_when_reload_successful_is(&proxy, &ws, 1.0).await;
    let loaded = timestamp(&at_start);
    assert!(
        started - 1.0 <= loaded && loaded <= now_seconds(),
        "the start's load, {loaded}, is the last good one (started at {started})"
    );

    // Renamed into place, one event: written in place, the truncation and the write can reach
    // the watcher in two batches on a busy machine, and be refused twice.
    let staged = ws.dir.join("webhooks.yaml.new");
    std::fs::write(&staged, config(&[("c.state.test", "PATCH")])).unwrap();
    std::fs::rename(&staged, &file).unwrap();
    let refused = scrape_when_reload_successful_is(&proxy, &ws, 0.0).await;
    assert_eq!(
        common::metric_value(
            &refused,
            "admission_proxy_config_reloads_total",
            &[("result", "error")]
        ),
        Some(1.0)
    );
    assert_eq!(
        timestamp(&refused),
        loaded,
        "the configuration served is still the one loaded at start"
    );

    let fixed = now_seconds();
    std::fs::write(&file, config(&[("b.state.test", "UPDATE")])).unwrap();
    let reloaded = scrape_when_reload_successful_is(&proxy, &ws, 1.0).await;
    assert!(
        timestamp(&reloaded) >= fixed,
        "the good reload's time: {} >= {fixed}",
        timestamp(&reloaded)
    );
    let (client, target) = (HttpClient::new(), proxy.target(&ws.pki));
    assert_eq!(status(&client, &target, "b.state.test").await, 200);
}

/// A configuration file that cannot be read (a named pipe in its place) is a failed reload,
/// and the same good file put back is a good one, although it holds what is already served:
/// the refusal must not stay exported while the files on disk are what the proxy serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_file_put_back_unchanged_is_a_good_reload() {
    let ws = Workspace::new("reload-unreadable");
    let file = ws.dir.join("webhooks.yaml");
    let good = config(&[("a.unreadable.test", "UPDATE")]);
    std::fs::write(&file, &good).unwrap();
    let proxy = BinaryProxy::start(&file, &ws.cert, &ws.key, &[]);
    scrape_when_reload_successful_is(&proxy, &ws, 1.0).await;

    std::fs::remove_file(&file).unwrap();
    mkfifo(&file);
    scrape_when_reload_successful_is(&proxy, &ws, 0.0).await;

    std::fs::remove_file(&file).unwrap();
    std::fs::write(&file, &good).unwrap();
    let back = scrape_when_reload_successful_is(&proxy, &ws, 1.0).await;
    assert_eq!(
        common::metric_value(
            &back,
            "admission_proxy_config_reloads_total",
            &[("result", "ok")]
        ),
        Some(1.0),
        "counted as a good reload"
    );
}

/// A matchCondition of `1+1+…` with 10,000 terms (20 KB) overflowed the reload thread's stack
/// and aborted the running proxy within 2 s. kube-apiserver refuses it at create (cel-go's
/// `MaxRecursionDepth`, 250), and so does the proxy: the change is refused with cel-go's
/// words, the last good configuration keeps serving, and a later edit still loads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expression_over_cel_go_s_parser_limits_is_refused_and_the_proxy_keeps_serving() {
    let ws = Workspace::new("cel-depth");
    let file = ws.conf.join("webhooks.yaml");
    std::fs::write(&file, config(&[("a.cel.test", "UPDATE")])).unwrap();
    let mut proxy = BinaryProxy::start(&ws.conf, &ws.cert, &ws.key, &[]);
    let (client, target) = (HttpClient::new(), proxy.target(&ws.pki));
    assert_eq!(status(&client, &target, "a.cel.test").await, 200);

    let chain = vec!["1"; 10_000].join("+");
    let deep = config(&[("b.cel.test", "UPDATE")])
        + &format!("  matchConditions:\n  - name: deep\n    expression: \"{chain} > 0\"\n");
    let staged = ws.dir.join("webhooks.yaml.new");
    std::fs::write(&staged, deep).unwrap();
    std::fs::rename(&staged, &file).unwrap();
    scrape_when_reload_successful_is(&proxy, &ws, 0.0).await;
    assert!(
        tokio::task::block_in_place(|| proxy
            .logged("compilation failed: ERROR: <input>:-1:0: max recursion depth exceeded")),
        "refused in cel-go's words: {:?}",
        proxy.logs.lock().unwrap()
    );
    assert_eq!(status(&client, &target, "a.cel.test").await, 200);
    assert_eq!(status(&client, &target, "b.cel.test").await, 404);

    // At cel-go's limit the same chain loads and is evaluated.
    let at_limit = vec!["1"; 250].join("+");
    let good = config(&[("b.cel.test", "UPDATE")])
        + &format!("  matchConditions:\n  - name: deep\n    expression: \"{at_limit} > 0\"\n");
    std::fs::write(&staged, good).unwrap();
    std::fs::rename(&staged, &file).unwrap();
    scrape_when_reload_successful_is(&proxy, &ws, 1.0).await;
    assert_eq!(status(&client, &target, "b.cel.test").await, 200);
    assert!(proxy.child.try_wait().unwrap().is_none(), "still running");
}
