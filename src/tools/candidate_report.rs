//! The candidate report (`admission-proxy candidates`): what a team reads before cutting a
//! legacy webhook over to its replacement. From the proxy's metrics
//! (`admission_proxy_candidate_comparisons_total`, a `/metrics` scrape) and its disagreement
//! captures (`serve --capture-dir`), per candidate: how many requests it was compared on, the
//! agreement rate, its errors and shed work, and its distinct disagreements grouped (what each
//! side decided, how often, and a capture of each to replay with `explain --review`).
//!
//! ```
//! use admission_proxy::tools::candidate_report::{report, render};
//!
//! let metrics = r#"
//! admission_proxy_candidate_comparisons_total{webhook="pods.example.com",candidate="pods-v2",result="agree"} 98
//! admission_proxy_candidate_comparisons_total{webhook="pods.example.com",candidate="pods-v2",result="disagree_allowed"} 2
//! "#;
//! let reports = report(metrics, &[]).unwrap();
//! assert_eq!(reports[0].compared, 100);
//! assert!(render(&reports).contains("98.00% agreement"));
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

/// Why the report cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The capture directory cannot be listed.
    #[error("cannot read the capture directory {}: {error}", dir.display())]
    Captures {
        /// The directory.
        dir: PathBuf,
        /// The I/O error (quoted, not a `source()`).
        error: std::io::Error,
    },
    /// A Prometheus query API answer that is not a vector of samples.
    #[error("the Prometheus query's answer: {0}")]
    Query(String),
}

/// One candidate's report.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CandidateReport {
    /// The legacy webhook (`webhooks[].name`).
    pub webhook: String,
    /// The candidate (`metadata.name`).
    pub candidate: String,
    /// Requests both decided: agreements and disagreements.
    pub compared: u64,
    /// Requests on which they agreed.
    pub agreed: u64,
    /// Every `result` of the metric with its count (agree, disagree_*, candidate_error,
    /// legacy_error, shed).
    pub results: BTreeMap<String, u64>,
    /// Of the compared requests, how many the candidate decided on an error
    /// (`admission_proxy_candidate_error_decisions_total`: its failurePolicy decided).
    pub error_decisions: u64,
    /// The distinct disagreements found in the captures, most frequent first.
    pub disagreements: Vec<Disagreement>,
}

/// Disagreements that read the same: the same differences, and the same decision on each side.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Disagreement {
    /// How they differ (`allowed`, `code`, `patch`, `warnings`).
    pub differences: Vec<String>,
    /// The legacy webhook's decision, e.g. `allowed`, or `denied 403: message`.
    pub legacy: String,
    /// The candidate's decision, in the same words.
    pub candidate: String,
    /// How many captures read so.
    pub count: u64,
    /// Up to three of them, for `explain --review`.
    pub captures: Vec<PathBuf>,
}

impl CandidateReport {
    /// Agreements over comparisons, 0.0 to 1.0 (1.0 with no comparison yet).
    pub fn agreement(&self) -> f64 {
        if self.compared == 0 {
            return 1.0;
        }
        self.agreed as f64 / self.compared as f64
    }
}

/// The report of every candidate in `metrics` (the text of a `/metrics` scrape), with the
/// disagreements of `captures` (a `--capture-dir`) grouped when given; ordered by webhook and
/// candidate.
///
/// # Errors
/// [`ReportError::Captures`] when the capture directory cannot be listed.
pub fn report(metrics: &str, captures: &[&Path]) -> Result<Vec<CandidateReport>, ReportError> {
    let mut reports: BTreeMap<(String, String), CandidateReport> = BTreeMap::new();
    for (labels, value) in series(metrics, "admission_proxy_candidate_comparisons_total") {
        let label = |k: &str| labels.get(k).cloned().unwrap_or_default();
        let key = (label("webhook"), label("candidate"));
        let entry = reports.entry(key.clone()).or_insert_with(|| empty(key));
        let result = label("result");
        let n = value as u64;
        if result == "agree" {
            entry.agreed += n;
        }
        if result == "agree" || result.starts_with("disagree_") {
            entry.compared += n;
        }
        *entry.results.entry(result).or_default() += n;
    }
    for (labels, value) in series(metrics, "admission_proxy_candidate_error_decisions_total") {
        let label = |k: &str| labels.get(k).cloned().unwrap_or_default();
        let key = (label("webhook"), label("candidate"));
        reports
            .entry(key.clone())
            .or_insert_with(|| empty(key))
            .error_decisions += value as u64;
    }
    // Several capture directories (one per replica): their groups merged.
    let mut merged: BTreeMap<(String, String), ByReading> = BTreeMap::new();
    for dir in captures {
        for (key, groups) in disagreements(dir)? {
            let into = merged.entry(key).or_default();
            for d in groups {
                let reading = (d.differences.clone(), d.legacy.clone(), d.candidate.clone());
                let entry = into.entry(reading).or_insert_with(|| Disagreement {
                    captures: Vec::new(),
                    count: 0,
                    ..d.clone()
                });
                entry.count += d.count;
                for c in d.captures {
                    if entry.captures.len() < 3 {
                        entry.captures.push(c);
                    }
                }
            }
        }
    }
    for (key, found) in merged {
        let mut found: Vec<Disagreement> = found.into_values().collect();
        found.sort_by_key(|d| std::cmp::Reverse(d.count));
        let entry = reports.entry(key.clone()).or_insert_with(|| empty(key));
        entry.disagreements = found;
    }
    Ok(reports.into_values().collect())
}

fn empty((webhook, candidate): (String, String)) -> CandidateReport {
    CandidateReport {
        webhook,
        candidate,
        compared: 0,
        agreed: 0,
        results: BTreeMap::new(),
        error_decisions: 0,
        disagreements: Vec::new(),
    }
}

/// `text` as it may reach a terminal: control characters (C0, DEL, C1: an escape sequence
/// could erase or rewrite report lines, a newline forge one) and the bidirectional formatting
/// characters (which reorder what follows them) written as `\u{..}`. Everything the report
/// prints comes from requests, backends, policies or label values, none of them the reader's.
///
/// ```
/// use admission_proxy::tools::candidate_report::printable;
///
/// assert_eq!(printable("denied: é"), "denied: é");
/// assert_eq!(printable("a\u{1b}[2Kb\nc\u{202e}d"), "a\\u{1b}[2Kb\\u{a}c\\u{202e}d");
/// ```
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let hidden = |c: char| {
        c.is_control()
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.contains(hidden) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if hidden(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The report as text, one block per candidate; every value from outside the report passes
/// through [`printable`].
pub fn render(reports: &[CandidateReport]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    if reports.is_empty() {
        out.push_str("no candidate comparisons yet\n");
    }
    for r in reports {
        let _ = writeln!(
            out,
            "candidate {} for webhook {}: compared on {} requests, {:.2}% agreement ({} disagreements)",
            printable(&r.candidate),
            printable(&r.webhook),
            r.compared,
            r.agreement() * 100.0,
            r.compared - r.agreed
        );
        let other: Vec<String> = r
            .results
            .iter()
            .filter(|(k, _)| !(k.as_str() == "agree" || k.starts_with("disagree_")))
            .map(|(k, v)| format!("{} {v}", printable(k)))
            .collect();
        if !other.is_empty() {
            let _ = writeln!(out, "  not compared: {}", other.join(", "));
        }
        if r.error_decisions > 0 {
            let _ = writeln!(
                out,
                "  decided on an error (by failurePolicy, as kube-apiserver would): {}",
                r.error_decisions
            );
        }
        let differing: Vec<String> = r
            .results
            .iter()
            .filter(|(k, v)| k.starts_with("disagree_") && **v > 0)
            .map(|(k, v)| format!("{} {v}", printable(&k["disagree_".len()..])))
            .collect();
        if !differing.is_empty() {
            let _ = writeln!(
                out,
                "  disagreements by first difference: {}",
                differing.join(", ")
            );
        }
        for d in &r.disagreements {
            let reading = if d.differences.is_empty() {
                "agreed, decided on an error".to_string()
            } else {
                d.differences.join("+")
            };
            let _ = writeln!(
                out,
                "  {} x {}: legacy {}; candidate {}",
                d.count,
                printable(&reading),
                printable(&d.legacy),
                printable(&d.candidate)
            );
            for capture in &d.captures {
                let path = capture.to_string_lossy();
                let _ = writeln!(out, "      {}", printable(&path));
            }
        }
    }
    out
}

/// `current` minus `earlier` (two `/metrics` scrapes of the same proxies, `earlier` saved
/// before): the counts of the window between them, as the same text. A series whose value went
/// down (the proxy restarted) counts from zero; one `earlier` lacks counts whole.
pub fn window(current: &str, earlier: &str) -> String {
    let key = |line: &str| line.rsplit_once(' ').map(|(k, _)| k.to_string());
    let before: BTreeMap<String, f64> = earlier
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| Some((key(l)?, l.rsplit(' ').next()?.parse().ok()?)))
        .collect();
    let mut out = String::new();
    for line in current.lines() {
        let (Some(k), Some(Ok(now))) = (key(line), line.rsplit(' ').next().map(str::parse::<f64>))
        else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        let then = before.get(&k).copied().unwrap_or(0.0);
        let value = if now >= then { now - then } else { now };
        out.push_str(&format!("{k} {value}\n"));
    }
    out
}

/// A Prometheus query API answer (`/api/v1/query`, an instant vector) of `family`'s series, as
/// `/metrics` text lines, so that [`report`] reads a fleet's sums as it reads one scrape.
///
/// # Errors
/// The answer is not a successful vector result.
pub fn vector_as_series(family: &str, answer: &str) -> Result<String, ReportError> {
    let bad = |why: &str| ReportError::Query(why.to_string());
    let value: Value = serde_json::from_str(answer).map_err(|e| bad(&e.to_string()))?;
    if value["status"] != "success" {
        return Err(bad(value["error"]
            .as_str()
            .unwrap_or("the query did not succeed")));
    }
    let result = value["data"]["result"]
        .as_array()
        .ok_or_else(|| bad("no vector result"))?;
    let quote = |v: &str| {
        v.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
    };
    let mut out = String::new();
    for sample in result {
        let labels: Vec<String> = sample["metric"]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| *k != "__name__")
            .map(|(k, v)| format!("{k}=\"{}\"", quote(v.as_str().unwrap_or(""))))
            .collect();
        let number = sample["value"][1].as_str().unwrap_or("0");
        out.push_str(&format!("{family}{{{}}} {number}\n", labels.join(",")));
    }
    Ok(out)
}

/// The series of `family` in Prometheus text: each one's labels and value.
fn series(metrics: &str, family: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    metrics
        .lines()
        .filter_map(|line| line.trim().strip_prefix(family))
        .filter_map(|rest| {
            let (labels, value) = rest.strip_prefix('{')?.rsplit_once('}')?;
            let value: f64 = value.trim().parse().ok()?;
            Some((parse_labels(labels), value))
        })
        .collect()
}

/// `k="v",k2="v2"` (Prometheus text escapes `\\`, `\"` and `\n` in values).
fn parse_labels(text: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut rest = text;
    while let Some((key, after)) = rest.split_once("=\"") {
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, other)) => value.push(other),
                    None => {}
                },
                '"' => {
                    end = i + 1;
                    break;
                }
                c => value.push(c),
            }
        }
        labels.insert(key.trim_start_matches(',').trim().to_string(), value);
        rest = &after[end..];
    }
    labels
}

/// Disagreements of one candidate by (differences, legacy decision, candidate decision).
type ByReading = BTreeMap<(Vec<String>, String, String), Disagreement>;

type Groups = BTreeMap<(String, String), Vec<Disagreement>>;

/// The comparison captures of `dir` (disagreements, legacy errors, decisions on an error),
/// grouped per (webhook, candidate).
fn disagreements(dir: &Path) -> Result<Groups, ReportError> {
    let entries = std::fs::read_dir(dir).map_err(|error| ReportError::Captures {
        dir: dir.to_path_buf(),
        error,
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".capture.json"))
        .collect();
    files.sort();
    let mut groups: BTreeMap<(String, String), ByReading> = BTreeMap::new();
    for file in files {
        // Captures are bounded by the writer (`capture::MAX_CAPTURE_BYTES`); a file that does
        // not read is not counted, and said so.
        let text = match crate::files::read_to_string(&file, crate::capture::MAX_CAPTURE_BYTES) {
            Ok(text) => text,
            Err(e) => {
                tracing::warn!(file = %file.display(), error = %e, "capture not read; its disagreement is not in the report");
                continue;
            }
        };
        // As deep as the captured review (kube-apiserver's depth, `deep_json`).
        let capture = match crate::deep_json::parse_value(&text) {
            Ok(capture) => capture,
            Err(e) => {
                tracing::warn!(file = %file.display(), error = %e, "capture is not JSON; its disagreement is not in the report");
                continue;
            }
        };
        let meta = &capture["admissionProxyCapture"];
        let record = &meta["candidate"];
        if !record.is_object() {
            continue;
        }
        let webhook = meta["webhook"].as_str().unwrap_or("").to_string();
        let candidate = record["name"].as_str().unwrap_or("").to_string();
        let differences: Vec<String> = record["differences"]
            .as_array()
            .map(|d| {
                d.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let (legacy, theirs) = (said(&record["legacy"]), said(&record["candidate"]));
        let group = groups
            .entry((webhook, candidate))
            .or_default()
            .entry((differences.clone(), legacy.clone(), theirs.clone()))
            .or_insert_with(|| Disagreement {
                differences,
                legacy,
                candidate: theirs,
                count: 0,
                captures: Vec::new(),
            });
        group.count += 1;
        if group.captures.len() < 3 {
            group.captures.push(file);
        }
    }
    Ok(groups
        .into_iter()
        .map(|(key, found)| {
            let mut found: Vec<Disagreement> = found.into_values().collect();
            found.sort_by_key(|d| std::cmp::Reverse(d.count));
            (key, found)
        })
        .collect())
}

/// One side's decision in words: `allowed`, `allowed with a patch`, `denied 403: message`.
fn said(outcome: &Value) -> String {
    let mut words = outcome["decision"].as_str().unwrap_or("?").to_string();
    if let Some(code) = outcome["code"].as_i64() {
        words.push_str(&format!(" {code}"));
    }
    if let Some(ops) = outcome["patch"].as_str() {
        words.push_str(&format!(" with a patch ({ops})"));
    }
    if let Some(message) = outcome["message"].as_str() {
        words.push_str(&format!(": {}", crate::log_value::Bounded(message)));
    }
    if let Some(error) = outcome["error"].as_str() {
        words.push_str(&format!(
            " (decided on the error: {})",
            crate::log_value::Bounded(error)
        ));
    }
    if let Some(warnings) = outcome["warnings"].as_array() {
        let warnings: Vec<&str> = warnings.iter().filter_map(Value::as_str).collect();
        words.push_str(&format!(" (warnings: {})", warnings.join("; ")));
    }
    words
}
