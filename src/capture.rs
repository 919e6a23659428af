//! Sampled, redacted captures of AdmissionReviews (`serve --capture-dir DIR --capture-sample
//! RATE`): files `explain --review FILE` reads as they are, with what the proxy decided and how
//! long it took. Redaction, encoding and file I/O happen on a thread of its own fed by a bounded
//! queue; the request path only samples (a hash of the uid) and hands over the body. Secret
//! values ([`crate::redact`]) and every `--redact-path` field are replaced before anything is
//! written, and files are created readable by the proxy's user only (0600, in a 0700
//! directory when the proxy creates it). Depends on `metrics` and `redact`.

use std::collections::VecDeque;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};

use serde_json::Value;

use crate::redact::{redact, RedactPath};

/// Captures kept in the queue between the request path and the writer; more are dropped and
/// counted (`admission_proxy_captures_dropped_total`).
const QUEUE: usize = 256;

/// The most one capture file may be (and at most `--capture-max-bytes`): 8 MiB, room for a
/// request of kube-apiserver's 3 MiB (`MaxRequestBodyBytes`) written compactly with what the
/// proxy adds. A capture over it is cut, its largest parts first (`request.oldObject`,
/// `request.object`, the candidate's record), and says so in `admissionProxyCapture.cut`;
/// `explain --review` and `candidates` read files up to this size.
pub const MAX_CAPTURE_BYTES: u64 = 8 << 20;

/// Capture settings (`serve` flags).
#[derive(Clone, Debug)]
pub struct CaptureSettings {
    /// Where capture files go (created if missing).
    pub dir: PathBuf,
    /// Fraction of admissions captured, 0.0 to 1.0.
    pub sample: f64,
    /// At most this many capture files; the oldest are removed.
    pub max_files: usize,
    /// At most this many bytes of capture files; the oldest are removed.
    pub max_bytes: u64,
    /// Extra fields to redact (`--redact-path`), besides Secret values.
    pub redact_paths: Vec<RedactPath>,
}

/// One admission to capture: the body as received and what was decided.
struct Entry {
    body: Vec<u8>,
    webhook: String,
    decision: &'static str,
    http_status: u16,
    latency_ms: f64,
    detail: String,
    /// A candidate's comparison with the legacy webhook (a disagreement).
    candidate: Option<Value>,
}

/// The request path's handle: samples and queues; never blocks.
#[derive(Debug)]
pub(crate) struct Capture {
    /// Captured when the uid's hash (mod 2^32) is below this.
    threshold: u64,
    queue: SyncSender<Entry>,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Entry({}, {} bytes)", self.webhook, self.body.len())
    }
}

impl Capture {
    /// Starts the writer thread.
    ///
    /// # Errors
    /// The directory cannot be created or listed, or the thread cannot start.
    pub(crate) fn start(settings: CaptureSettings) -> std::io::Result<Self> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&settings.dir)?;
        let mut kept = existing_captures(&settings.dir)?;
        let (queue, rx) = sync_channel::<Entry>(QUEUE);
        let threshold = (settings.sample.clamp(0.0, 1.0) * f64::from(u32::MAX)) as u64;
        std::thread::Builder::new()
            .name("capture".into())
            // Captures read reviews as deep as kube-apiserver sends them (deep_json).
            .stack_size(crate::deep_json::THREAD_STACK_BYTES)
            .spawn(move || {
                for entry in rx {
                    if let Err(e) = write_capture(&settings, &mut kept, entry) {
                        tracing::warn!(error = %e, dir = %settings.dir.display(), "capture not written");
                    }
                }
            })?;
        Ok(Capture { threshold, queue })
    }

    /// Whether the admission with `uid` is sampled (a stable choice: the same uid, the same
    /// answer).
    pub(crate) fn sampled(&self, uid: &str) -> bool {
        // FNV-1a: cheap and stable across runs and builds.
        let mut h: u32 = 0x811c_9dc5;
        for b in uid.bytes() {
            h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
        }
        u64::from(h) < self.threshold
    }

    /// Queues a capture of `body` (call only when [`Capture::sampled`]); dropped and counted
    /// when the writer is behind.
    pub(crate) fn offer(
        &self,
        body: &[u8],
        webhook: &str,
        decision: &'static str,
        http_status: u16,
        latency_ms: f64,
        detail: &str,
    ) {
        let entry = Entry {
            body: body.to_vec(),
            webhook: webhook.to_string(),
            decision,
            http_status,
            latency_ms,
            detail: detail.to_string(),
            candidate: None,
        };
        self.queue_entry(entry);
    }

    /// Queues a capture of `body` with a candidate's disagreement with the legacy webhook
    /// (`record`: the candidate, both decisions and how they differ). Every disagreement is
    /// captured, whatever the sample rate; dropped and counted when the writer is behind.
    pub(crate) fn offer_comparison(&self, body: &[u8], webhook: &str, record: Value) {
        let decision = |side: &str| {
            record
                .pointer(&format!("/{side}/decision"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let entry = Entry {
            body: body.to_vec(),
            webhook: webhook.to_string(),
            decision: "candidate-disagrees",
            http_status: 200,
            latency_ms: 0.0,
            detail: format!(
                "legacy {}, candidate {}",
                decision("legacy"),
                decision("candidate")
            ),
            candidate: Some(record),
        };
        self.queue_entry(entry);
    }

    fn queue_entry(&self, entry: Entry) {
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
            self.queue.try_send(entry)
        {
            crate::metrics::capture_dropped();
        }
    }
}

/// Captures written by this process: the second part of every file name.
static CAPTURES_WRITTEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A capture's file name: `{unix ms}-{sequence}-{uid}.capture.json`, which sorts oldest first.
/// The sequence keeps apart two captures of one uid in the same millisecond (one review sent
/// to two webhooks, or a burst the writer thread catches up on), which once shared a name: the
/// second overwrote the first and the pruning then removed a file still counted as kept.
fn capture_name(unix_ms: u128, sequence: u64, uid: &str) -> String {
    format!("{unix_ms:013}-{sequence:010}-{uid}.capture.json")
}

/// Capture files already in `dir`, oldest first (names start with a millisecond timestamp).
fn existing_captures(dir: &Path) -> std::io::Result<VecDeque<(PathBuf, u64)>> {
    let mut files: Vec<(PathBuf, u64)> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".capture.json"))
        .map(|e| (e.path(), e.metadata().map(|m| m.len()).unwrap_or(0)))
        .collect();
    files.sort();
    Ok(files.into())
}

/// Redacts, writes and trims to the limits.
fn write_capture(
    settings: &CaptureSettings,
    kept: &mut VecDeque<(PathBuf, u64)>,
    entry: Entry,
) -> std::io::Result<()> {
    let Some(mut review) = std::str::from_utf8(&entry.body)
        .ok()
        .and_then(|text| crate::deep_json::parse_value(text).ok())
    else {
        return Ok(());
    };
    redact(&mut review, &settings.redact_paths);
    let uid = review
        .pointer("/request/uid")
        .and_then(Value::as_str)
        .unwrap_or("no-uid")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(64)
        .collect::<String>();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    if let Some(map) = review.as_object_mut() {
        map.insert(
            "admissionProxyCapture".into(),
            serde_json::json!({
                "webhook": entry.webhook,
                "decision": entry.decision,
                "httpStatus": entry.http_status,
                "latencyMs": entry.latency_ms,
                "detail": entry.detail,
                "capturedAtUnixMs": now.as_millis() as u64,
            }),
        );
        if let (Some(candidate), Some(capture)) =
            (entry.candidate, map.get_mut("admissionProxyCapture"))
        {
            capture["candidate"] = candidate;
        }
    }
    let limit = settings.max_bytes.min(MAX_CAPTURE_BYTES);
    let Some(text) = encode_within(&mut review, limit)? else {
        crate::metrics::capture_dropped();
        tracing::warn!(uid = %uid, limit, "capture not written: larger than the capture limit even without the request's objects");
        return Ok(());
    };
    let path = settings.dir.join(capture_name(
        now.as_millis(),
        CAPTURES_WRITTEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        &uid,
    ));
    let tmp = path.with_extension("tmp");
    {
        use std::io::Write as _;
        // 0600: captures hold request bodies (redacted, but still the cluster's objects).
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(&text)?;
    }
    std::fs::rename(&tmp, &path)?;
    kept.push_back((path, text.len() as u64));
    let mut bytes: u64 = kept.iter().map(|(_, n)| n).sum();
    while kept.len() > settings.max_files || bytes > settings.max_bytes {
        let Some((old, n)) = kept.pop_front() else {
            break;
        };
        let _ = std::fs::remove_file(&old);
        bytes -= n;
    }
    crate::metrics::captured();
    Ok(())
}

/// The parts of a capture cut, largest first, when it is over its limit: JSON pointers.
const CUTTABLE: [&str; 3] = [
    "/request/oldObject",
    "/request/object",
    "/admissionProxyCapture/candidate",
];

/// What was cut from a capture to fit its limit (`admissionProxyCapture.cut`, by
/// [`encode_within`]), as written there; empty for a whole capture or any other review. A
/// cut capture no longer holds the request it captured: replayed, its decisions would be
/// about other objects.
///
/// ```
/// use admission_proxy::capture::cut_parts;
///
/// let cut = br#"{"admissionProxyCapture": {"cut": ["/request/object: 9000000 bytes"]}}"#;
/// assert_eq!(cut_parts(cut), ["/request/object: 9000000 bytes"]);
/// assert!(cut_parts(br#"{"request": {}}"#).is_empty());
/// ```
pub fn cut_parts(body: &[u8]) -> Vec<String> {
    #[derive(serde::Deserialize)]
    struct Capture {
        #[serde(rename = "admissionProxyCapture")]
        meta: Option<Meta>,
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        cut: Option<Vec<String>>,
    }
    serde_json::from_slice::<Capture>(body)
        .ok()
        .and_then(|c| c.meta?.cut)
        .unwrap_or_default()
}

/// `capture` encoded compactly (pretty-printing a value nested 9,000 deep wrote 162 MB for a
/// 19 KB review), within `limit` bytes: over it, the parts of [`CUTTABLE`] are replaced one at
/// a time by what they were (`"cut: N bytes"`), each named in `admissionProxyCapture.cut`.
/// `None` when even that is over the limit.
///
/// # Errors
/// The value does not encode (not for a value that was parsed).
fn encode_within(capture: &mut Value, limit: u64) -> std::io::Result<Option<Vec<u8>>> {
    let encode = |v: &Value| serde_json::to_vec(v).map_err(std::io::Error::other);
    let mut text = encode(capture)?;
    let mut cut = Vec::new();
    for pointer in CUTTABLE {
        if text.len() as u64 <= limit {
            break;
        }
        let Some(part) = capture.pointer_mut(pointer) else {
            continue;
        };
        if part.is_null() {
            continue;
        }
        let size = encode(part)?.len();
        *part = Value::String(format!("cut: {size} bytes"));
        cut.push(format!("{pointer}: {size} bytes"));
        if let Some(meta) = capture.pointer_mut("/admissionProxyCapture") {
            meta["cut"] = serde_json::json!(cut);
        }
        text = encode(capture)?;
    }
    Ok((text.len() as u64 <= limit).then_some(text))
}

#[cfg(test)]
mod tests {
    #[test]
    fn captures_of_one_uid_in_one_millisecond_get_their_own_files() {
        let (a, b) = (
            super::capture_name(1_764_000_000_000, 7, "u-1"),
            super::capture_name(1_764_000_000_000, 8, "u-1"),
        );
        assert_ne!(a, b);
        assert!(a < b, "names sort in writing order");
        assert!(super::capture_name(999, 9_999_999, "u") < super::capture_name(1_000, 0, "u"));
        assert_eq!(a, "1764000000000-0000000007-u-1.capture.json");
    }

    use super::*;

    /// A review nested 9,000 deep is written compactly (pretty-printed it was 162 MB); one over
    /// the limit loses its largest parts, each named, and one that cannot fit is not written.
    #[test]
    fn captures_are_compact_and_cut_to_their_limit() {
        // On a stack like the capture thread's: a value this deep is recursed into.
        std::thread::Builder::new()
            .stack_size(crate::deep_json::THREAD_STACK_BYTES)
            .spawn(compact_and_cut)
            .unwrap()
            .join()
            .unwrap();
    }

    fn compact_and_cut() {
        let deep = format!("{}1{}", "[".repeat(9_000), "]".repeat(9_000));
        let body = format!(
            r#"{{"request":{{"uid":"u","object":{deep},"oldObject":{{"big":"{}"}}}}}}"#,
            "x".repeat(100_000)
        );
        let mut capture = crate::deep_json::parse_value(&body).unwrap();
        let whole = encode_within(&mut capture, MAX_CAPTURE_BYTES)
            .unwrap()
            .unwrap();
        assert_eq!(whole.len(), body.len());
        let mut capture = crate::deep_json::parse_value(&body).unwrap();
        capture["admissionProxyCapture"] = serde_json::json!({"webhook": "w"});
        let cut = encode_within(&mut capture, 50_000).unwrap().unwrap();
        let cut: Value = crate::deep_json::parse_value(std::str::from_utf8(&cut).unwrap()).unwrap();
        assert_eq!(cut["request"]["oldObject"], "cut: 100010 bytes");
        assert_eq!(
            cut["admissionProxyCapture"]["cut"],
            serde_json::json!(["/request/oldObject: 100010 bytes"])
        );
        assert!(cut["request"]["object"].is_array(), "what fits is kept");
        let mut capture = crate::deep_json::parse_value(&body).unwrap();
        assert_eq!(encode_within(&mut capture, 50).unwrap(), None);
    }

    #[test]
    fn sampling_is_stable_and_follows_the_rate() {
        let (tx, _rx) = sync_channel(1);
        let half = Capture {
            threshold: u64::from(u32::MAX) / 2,
            queue: tx,
        };
        let sampled = (0..10_000)
            .filter(|i| half.sampled(&format!("uid-{i}")))
            .count();
        assert!((4_500..5_500).contains(&sampled), "{sampled}");
        assert_eq!(half.sampled("uid-7"), half.sampled("uid-7"));
    }
}
