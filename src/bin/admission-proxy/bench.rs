//! `admission-proxy bench`: an open-loop latency benchmark that sends AdmissionReviews the way
//! kube-apiserver does (TLS, HTTP/1.1 keep-alive, `Content-Type: application/json`,
//! `?timeout=10s`), each with a fresh uid, open loop at a fixed rate. Latency counts from the
//! moment the generator releases a request on its schedule, including any wait for a free
//! connection, so a stalled server cannot hide its queueing (no coordinated omission); the
//! generator's own lag behind the schedule is reported separately. Every answer is checked (status, apiVersion and uid echoed); a wrong answer is an
//! error, not a latency. Uses the library's `dispatch` (client), `config` (targets) and `review`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;
use tokio::sync::{mpsc, Mutex};

use admission_proxy::api::WebhookClientConfig;
use admission_proxy::config::Backend;
use admission_proxy::dispatch::{HttpClient, Target};

/// Bench settings.
#[derive(Clone, Debug)]
pub(crate) struct BenchOptions {
    /// `https://host:port/path` (e.g. the proxy's `/webhooks/{name}`).
    pub(crate) target: String,
    /// A second URL, interleaved with `target` in alternating rounds.
    pub(crate) compare: Option<String>,
    pub(crate) reviews: PathBuf,
    /// Requests per second (per target while it has the round).
    pub(crate) rate: u32,
    /// Measured seconds (after the warm-up).
    pub(crate) duration: Duration,
    pub(crate) warmup: Duration,
    /// Concurrent keep-alive connections.
    pub(crate) connections: usize,
    /// PEM CA for the targets (`None`: system roots).
    pub(crate) cacert: Option<PathBuf>,
    /// Length of one round when comparing.
    pub(crate) round: Duration,
}

/// Why the bench could not run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BenchError {
    #[error("{0}")]
    Setup(String),
}

/// One AdmissionReview body with its uid cut out, so each send gets a fresh uid cheaply.
#[derive(Clone)]
struct Template {
    before: Vec<u8>,
    after: Vec<u8>,
    api_version: String,
}

impl Template {
    fn parse(body: &[u8]) -> Option<Self> {
        let v: serde_json::Value = serde_json::from_slice(body).ok()?;
        let uid = v.pointer("/request/uid")?.as_str()?;
        let needle = format!("\"uid\":\"{uid}\"");
        let at = body
            .windows(needle.len())
            .position(|w| w == needle.as_bytes())?;
        Some(Template {
            before: body[..at + 7].to_vec(),
            after: body[at + needle.len() - 1..].to_vec(),
            api_version: v.get("apiVersion")?.as_str()?.to_string(),
        })
    }

    fn with_uid(&self, uid: &str) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.before.len() + uid.len() + self.after.len());
        out.extend_from_slice(&self.before);
        out.extend_from_slice(uid.as_bytes());
        out.extend_from_slice(&self.after);
        out
    }
}

/// Loads every AdmissionReview in `path` (a file or a directory of `*.json`, `index.json` left out).
///
/// # Errors
/// [`BenchError::Setup`] when nothing usable is found.
fn load_templates(path: &Path) -> Result<Vec<Template>, BenchError> {
    let files: Vec<PathBuf> = if path.is_dir() {
        let mut f: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| BenchError::Setup(format!("{}: {e}", path.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "json") && !p.ends_with("index.json"))
            .collect();
        f.sort();
        f
    } else {
        vec![path.to_path_buf()]
    };
    let templates: Vec<Template> = files
        .iter()
        .filter_map(|f| std::fs::read(f).ok())
        .filter_map(|b| Template::parse(&b))
        .collect();
    if templates.is_empty() {
        return Err(BenchError::Setup(format!(
            "no AdmissionReview found in {}",
            path.display()
        )));
    }
    Ok(templates)
}

/// Results for one target.
#[derive(Debug, Serialize)]
pub(crate) struct TargetReport {
    pub(crate) target: String,
    pub(crate) requests: u64,
    /// Successful answers per measured second.
    pub(crate) achieved_rate: f64,
    /// Latency percentiles in milliseconds: p50, p90, p99, p99.9, max.
    pub(crate) latency_ms: BTreeMap<String, f64>,
    /// Errors by class: `transport`, `http_<code>`, `unparseable`, `wrong_uid`, `wrong_version`.
    pub(crate) errors: BTreeMap<String, u64>,
    /// Good answers by the proxy's `x-admission-proxy-decision` header (`none` without it).
    pub(crate) decisions: BTreeMap<String, u64>,
    /// Good answers that arrived after the caller's deadline (`?timeout=10s`).
    pub(crate) late: u64,
}

/// The whole run.
#[derive(Debug, Serialize)]
pub(crate) struct BenchReport {
    pub(crate) rate: u32,
    pub(crate) connections: usize,
    pub(crate) duration_seconds: f64,
    /// How far behind its schedule the generator released a request, at worst (ms). Large
    /// values mean the load generator itself was starved and the rate was not held.
    pub(crate) generator_max_lag_ms: f64,
    pub(crate) targets: Vec<TargetReport>,
}

struct Stats {
    hist: Histogram<u64>,
    errors: BTreeMap<String, u64>,
    decisions: BTreeMap<String, u64>,
    late: u64,
    ok: u64,
}

impl Stats {
    fn new() -> Self {
        Stats {
            hist: Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds"),
            errors: BTreeMap::new(),
            decisions: BTreeMap::new(),
            late: 0,
            ok: 0,
        }
    }
}

struct Job {
    scheduled: Instant,
    seq: u64,
    target: usize,
    measured: bool,
}

fn target_for(url: &str, cacert: Option<&str>) -> Result<(Target, String), BenchError> {
    let parsed = url::Url::parse(url).map_err(|e| BenchError::Setup(format!("{url}: {e}")))?;
    let mut base = parsed.clone();
    base.set_path("/");
    base.set_query(None);
    use base64::Engine;
    let backend = Backend::from_client_config(&WebhookClientConfig {
        url: Some(base.to_string()),
        ca_bundle: cacert.map(|pem| base64::engine::general_purpose::STANDARD.encode(pem)),
        service: None,
    })
    .map_err(|e| BenchError::Setup(format!("{url}: {e}")))?;
    Ok((
        Target::new(&backend),
        format!("{}?timeout={}s", parsed.path(), CALLER_TIMEOUT.as_secs()),
    ))
}

/// Runs the benchmark. Progress goes to stderr.
///
/// # Errors
/// [`BenchError`] for unusable options or reviews.
pub(crate) async fn run(opts: BenchOptions) -> Result<BenchReport, BenchError> {
    let templates = Arc::new(load_templates(&opts.reviews)?);
    let cacert = match &opts.cacert {
        Some(p) => Some(
            std::fs::read_to_string(p)
                .map_err(|e| BenchError::Setup(format!("{}: {e}", p.display())))?,
        ),
        None => None,
    };
    let mut urls = vec![opts.target.clone()];
    urls.extend(opts.compare.clone());
    let targets: Vec<(Target, String)> = urls
        .iter()
        .map(|u| target_for(u, cacert.as_deref()))
        .collect::<Result<_, _>>()?;
    let targets = Arc::new(targets);
    let client = Arc::new(HttpClient::new());
    let (tx, rx) = mpsc::channel::<Job>(1 << 16);
    let rx = Arc::new(Mutex::new(rx));
    let run_id = std::process::id();
    let mut workers = Vec::new();
    for _ in 0..opts.connections.max(1) {
        let (rx, client, targets, templates) = (
            rx.clone(),
            client.clone(),
            targets.clone(),
            templates.clone(),
        );
        let n = targets.len();
        workers.push(tokio::spawn(async move {
            let mut stats: Vec<Stats> = (0..n).map(|_| Stats::new()).collect();
            loop {
                let job = { rx.lock().await.recv().await };
                let Some(job) = job else { break };
                let template = &templates[(job.seq as usize) % templates.len()];
                let uid = format!("{run_id:08x}-b000-4000-8000-{:012x}", job.seq);
                let body = template.with_uid(&uid);
                let (target, path) = &targets[job.target];
                let result = client.post(target, path, &body, &[]).await;
                let latency = job.scheduled.elapsed();
                if !job.measured {
                    continue;
                }
                let s = &mut stats[job.target];
                match check(result, &uid, &template.api_version) {
                    Ok(decision) => {
                        s.ok += 1;
                        *s.decisions.entry(decision).or_default() += 1;
                        s.late += u64::from(latency > CALLER_TIMEOUT);
                        let _ = s.hist.record((latency.as_micros() as u64).max(1));
                    }
                    Err(bad) => *s.errors.entry(bad.to_string()).or_default() += 1,
                }
            }
            stats
        }));
    }
    // The open-loop schedule: send i at start + i/rate, whatever the server does.
    let interval = Duration::from_secs_f64(1.0 / f64::from(opts.rate.max(1)));
    let start = Instant::now();
    let end = opts.warmup + opts.duration;
    let mut seq = 0u64;
    let mut last_progress = Instant::now();
    let mut max_lag = Duration::ZERO;
    loop {
        let offset = interval * seq as u32;
        if offset >= end {
            break;
        }
        let scheduled = start + offset;
        tokio::time::sleep_until(scheduled.into()).await;
        // Latency counts from release: the generator's own timer jitter (tokio sleeps end on
        // 1 ms ticks) is not the server's, but waiting for a free connection still counts.
        let released = Instant::now();
        let measured = offset >= opts.warmup;
        if measured {
            max_lag = max_lag.max(released - scheduled);
        }
        let round = if measured {
            ((offset - opts.warmup).as_secs_f64() / opts.round.as_secs_f64()) as usize
        } else {
            seq as usize
        };
        let target = round % targets.len();
        if tx
            .send(Job {
                scheduled: released,
                seq,
                target,
                measured,
            })
            .await
            .is_err()
        {
            break;
        }
        seq += 1;
        if last_progress.elapsed() >= Duration::from_secs(1) {
            last_progress = Instant::now();
            eprintln!(
                "bench: {:>5.1} s, {seq} requests scheduled{}",
                start.elapsed().as_secs_f64(),
                if measured { "" } else { " (warm-up)" }
            );
        }
    }
    drop(tx);
    let mut merged: Vec<Stats> = (0..targets.len()).map(|_| Stats::new()).collect();
    for w in workers {
        if let Ok(stats) = w.await {
            for (m, s) in merged.iter_mut().zip(stats) {
                let _ = m.hist.add(&s.hist);
                m.ok += s.ok;
                m.late += s.late;
                for (k, v) in s.errors {
                    *m.errors.entry(k).or_default() += v;
                }
                for (k, v) in s.decisions {
                    *m.decisions.entry(k).or_default() += v;
                }
            }
        }
    }
    let share = opts.duration.as_secs_f64() / targets.len() as f64;
    Ok(BenchReport {
        rate: opts.rate,
        connections: opts.connections,
        duration_seconds: opts.duration.as_secs_f64(),
        generator_max_lag_ms: max_lag.as_secs_f64() * 1000.0,
        targets: urls
            .into_iter()
            .zip(merged)
            .map(|(target, s)| TargetReport {
                target,
                requests: s.ok + s.errors.values().sum::<u64>(),
                achieved_rate: s.ok as f64 / share,
                latency_ms: [
                    ("p50", 50.0),
                    ("p90", 90.0),
                    ("p99", 99.0),
                    ("p99.9", 99.9),
                    ("max", 100.0),
                ]
                .into_iter()
                .map(|(name, q)| {
                    let v = if q >= 100.0 {
                        s.hist.max()
                    } else {
                        s.hist.value_at_quantile(q / 100.0)
                    };
                    (name.to_string(), v as f64 / 1000.0)
                })
                .collect(),
                errors: s.errors,
                decisions: s.decisions,
                late: s.late,
            })
            .collect(),
    })
}

/// The deadline the bench gives each request (`?timeout=`), as kube-apiserver's default
/// webhook timeout.
const CALLER_TIMEOUT: Duration = Duration::from_secs(10);

/// Why an answer does not count as good; displayed as the error class the report counts
/// (`transport`, `http_503`, ...).
#[derive(Debug, thiserror::Error)]
enum BadAnswer {
    #[error("transport")]
    Transport(#[source] admission_proxy::dispatch::TransportError),
    #[error("http_{0}")]
    Status(u16),
    #[error("unparseable")]
    Unparseable(#[source] serde_json::Error),
    #[error("wrong_uid")]
    WrongUid,
    #[error("wrong_version")]
    WrongVersion,
}

/// A good answer's decision header, or why it is not good.
fn check(
    result: Result<admission_proxy::dispatch::HttpReply, admission_proxy::dispatch::TransportError>,
    uid: &str,
    api_version: &str,
) -> Result<String, BadAnswer> {
    let reply = result.map_err(BadAnswer::Transport)?;
    if reply.status != 200 {
        return Err(BadAnswer::Status(reply.status));
    }
    let v: serde_json::Value =
        serde_json::from_slice(&reply.body).map_err(BadAnswer::Unparseable)?;
    if v.pointer("/response/uid").and_then(|u| u.as_str()) != Some(uid) {
        return Err(BadAnswer::WrongUid);
    }
    if v.get("apiVersion").and_then(|a| a.as_str()) != Some(api_version) {
        return Err(BadAnswer::WrongVersion);
    }
    Ok(reply
        .header(admission_proxy::server::DECISION_HEADER)
        .unwrap_or("none")
        .to_string())
}

/// The human table: one row per target, and added latency / ratios when comparing.
pub(crate) fn render_table(report: &BenchReport) -> String {
    let mut out = format!(
        "rate {} req/s, {} connections, {:.0} s measured, generator lag at most {:.2} ms\n",
        report.rate, report.connections, report.duration_seconds, report.generator_max_lag_ms
    );
    out.push_str(&format!(
        "{:<48} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}  errors\n",
        "target", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms", "req/s", "requests"
    ));
    for t in &report.targets {
        let l = |k: &str| t.latency_ms.get(k).copied().unwrap_or(0.0);
        out.push_str(&format!(
            "{:<48} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.0} {:>10}  {:?}\n",
            t.target,
            l("p50"),
            l("p90"),
            l("p99"),
            l("p99.9"),
            l("max"),
            t.achieved_rate,
            t.requests,
            t.errors
        ));
    }
    if let [a, b] = report.targets.as_slice() {
        out.push_str("\nadded latency (target − compare) and ratio:\n");
        for k in ["p50", "p90", "p99", "p99.9", "max"] {
            let (x, y) = (a.latency_ms[k], b.latency_ms[k]);
            out.push_str(&format!(
                "  {k:<6} {:>+9.3} ms   {:>6.2}x\n",
                x - y,
                if y > 0.0 { x / y } else { f64::NAN }
            ));
        }
    }
    out
}

/// A ValidatingWebhookConfiguration (YAML) of `n` webhooks `hook-{i}.bench.example.com` in a
/// realistic mix, all calling `url` (trusting `ca_pem` as caBundle when given): a third
/// plain rules, a third with namespaceSelector and objectSelector, a third with two CEL
/// matchConditions. Plus `skip.bench.example.com`, whose rules match no request (the skip
/// path). Used to measure what many loaded webhooks cost (`bench --synthetic-config N`).
pub(crate) fn synthetic_config(n: usize, url: &str, ca_pem: Option<&[u8]>) -> String {
    use base64::Engine;
    let client = match ca_pem {
        None => format!("{{url: \"{url}\"}}"),
        Some(pem) => format!(
            "{{url: \"{url}\", caBundle: \"{}\"}}",
            base64::engine::general_purpose::STANDARD.encode(pem)
        ),
    };
    let mut yaml = String::from("apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: bench}\nwebhooks:\n");
    for i in 0..n {
        let extra = match i % 3 {
            0 => "",
            1 => "  namespaceSelector: {matchExpressions: [{key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system]}]}\n  objectSelector: {matchExpressions: [{key: skip, operator: DoesNotExist}]}\n",
            _ => "  matchConditions:\n  - {name: not-system, expression: \"!request.userInfo.username.startsWith('system:')\"}\n  - {name: has-labels, expression: \"has(object.metadata.labels)\"}\n",
        };
        yaml.push_str(&format!(
            "- name: hook-{i}.bench.example.com\n  clientConfig: {client}\n  rules: [{{operations: [CREATE, UPDATE], apiGroups: [\"\", apps], apiVersions: [v1], resources: [pods, services, deployments]}}]\n  sideEffects: None\n  admissionReviewVersions: [v1]\n{extra}"
        ));
    }
    yaml.push_str(&format!("- name: skip.bench.example.com\n  clientConfig: {client}\n  rules: [{{operations: [CONNECT], apiGroups: [none], apiVersions: [v1], resources: [pods]}}]\n  sideEffects: None\n  admissionReviewVersions: [v1]\n"));
    yaml
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The synthetic mix loads as a valid configuration with `n` + 1 webhooks.
    #[test]
    fn synthetic_config_loads() {
        let yaml = synthetic_config(30, "https://127.0.0.1:1/allow", None);
        let snapshot =
            admission_proxy::config::load_contents(&[(std::path::PathBuf::from("s.yaml"), yaml)])
                .unwrap();
        assert_eq!(snapshot.len(), 31);
        assert!(snapshot.webhook("skip.bench.example.com").is_some());
        assert_eq!(
            snapshot
                .webhook("hook-2.bench.example.com")
                .unwrap()
                .matcher
                .match_conditions
                .iter()
                .count(),
            2
        );
    }

    #[test]
    fn template_replaces_only_the_request_uid() {
        let body = br#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"abc","userInfo":{"uid":"admin-uid"}}}"#;
        let t = Template::parse(body).unwrap();
        assert_eq!(
            String::from_utf8(t.with_uid("new")).unwrap(),
            r#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"new","userInfo":{"uid":"admin-uid"}}}"#
        );
    }
}
