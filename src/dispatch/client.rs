//! HTTP/1.1 POSTs over pingora's pooled upstream connector, with TLS verified against a
//! webhook's `caBundle` (system roots when absent). Used for legacy backends, and by `demo`
//! and the tests to talk to the proxy. Depends on `backend`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::Bytes;
use crossbeam_queue::ArrayQueue;
use pingora::connectors::http::Connector;
use pingora::protocols::http::client::HttpSession;
use pingora::upstreams::peer::HttpPeer;
use std::collections::HashMap;

use crate::backend::Backend;

/// How long an idle pooled connection is kept.
const POOL_IDLE: Duration = Duration::from_secs(60);

/// The most bytes read of one backend's answer body (5 MiB). An answer carries at most the
/// request's object back as a JSONPatch, base64-encoded: kube-apiserver takes request bodies
/// of at most 3 MiB (`MaxRequestBodyBytes`, `staging/src/k8s.io/apiserver/pkg/server/config.go`),
/// which is 4 MiB in base64, and 1 MiB more covers the status message, warnings and audit
/// annotations. client-go reads a webhook's answer whole (`transformResponse`,
/// `staging/src/k8s.io/client-go/rest/request.go`) without a limit; a sidecar cannot: one
/// backend streaming an endless body would otherwise take every webhook behind the proxy down
/// with it. A larger answer (by its `Content-Length`, or as read) is a call error
/// ([`TransportError::TooLarge`]), decided by the webhook's failurePolicy. All answers held at
/// once are bounded too ([`ANSWER_BYTES`]).
pub const MAX_ANSWER_BYTES: usize = 5 * 1024 * 1024;

/// A transport-level failure, classified once (connect / TLS / other I/O or protocol).
/// Displays as Go's words for it (what callers see in AdmissionReview messages and logs);
/// `source()` is what caused it, when something did (pingora's or an I/O error).
#[derive(Debug)]
pub enum TransportError {
    /// No connection: DNS, refused, unreachable, timed out (`dial tcp ...`).
    Connect(TransportFailure),
    /// The TLS handshake or the certificate failed.
    Tls(TransportFailure),
    /// Any other I/O or protocol failure on the connection (`EOF`, ...).
    Io(TransportFailure),
    /// The answer's header arrived and its body could not be read: client-go reports this
    /// without the `Post "URL": ` prefix of a failed round trip (`transformResponse`).
    Body(TransportFailure),
    /// The answer's body is larger than [`MAX_ANSWER_BYTES`]; read no further.
    TooLarge(TransportFailure),
}

/// What a [`TransportError`] says (Go's words, `dial tcp ADDR: connect: connection refused`,
/// `EOF`, ...) and what caused it.
#[derive(Debug)]
pub struct TransportFailure {
    text: String,
    cause: Option<TransportCause>,
}

/// The error a transport failure came from.
#[derive(Debug)]
enum TransportCause {
    Pingora(Box<pingora::Error>),
    Io(std::io::Error),
}

impl TransportFailure {
    /// A failure with nothing underneath (a refused request line, no such host).
    fn new(text: impl Into<String>) -> Self {
        TransportFailure {
            text: text.into(),
            cause: None,
        }
    }

    fn caused_by(text: impl Into<String>, cause: TransportCause) -> Self {
        TransportFailure {
            text: text.into(),
            cause: Some(cause),
        }
    }
}

impl TransportError {
    /// The error class for logs and metrics: `connect`, `tls` or `transport`.
    pub(crate) fn class(&self) -> &'static str {
        match self {
            TransportError::Connect(_) => "connect",
            TransportError::Tls(_) => "tls",
            TransportError::Io(_) | TransportError::Body(_) | TransportError::TooLarge(_) => {
                "transport"
            }
        }
    }

    fn failure(&self) -> &TransportFailure {
        match self {
            TransportError::Connect(f)
            | TransportError::Tls(f)
            | TransportError::Io(f)
            | TransportError::Body(f)
            | TransportError::TooLarge(f) => f,
        }
    }

    fn into_failure(self) -> TransportFailure {
        match self {
            TransportError::Connect(f)
            | TransportError::Tls(f)
            | TransportError::Io(f)
            | TransportError::Body(f)
            | TransportError::TooLarge(f) => f,
        }
    }
}

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let TransportError::Body(_) = self {
            f.write_str(
                "unexpected error when reading response body. Please retry. Original error: ",
            )?;
        }
        f.write_str(&self.failure().text)
    }
}

impl std::error::Error for TransportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self.failure().cause.as_ref()? {
            TransportCause::Pingora(e) => Some(e.as_ref()),
            TransportCause::Io(e) => Some(e),
        }
    }
}

/// A complete HTTP answer: status, header fields as received, whole body.
#[derive(Debug)]
pub struct HttpReply {
    /// The HTTP status code.
    pub status: u16,
    /// The response headers.
    pub headers: http::HeaderMap,
    /// The whole response body.
    pub body: Bytes,
    /// The share of [`ANSWER_BYTES`] the body holds; given back when the reply is dropped.
    _held: Option<tokio::sync::SemaphorePermit<'static>>,
}

impl HttpReply {
    /// An answer made here rather than read from a backend.
    #[cfg(test)]
    pub(crate) fn new(status: u16, headers: http::HeaderMap, body: Bytes) -> Self {
        HttpReply {
            status,
            headers,
            body,
            _held: None,
        }
    }
}

/// Bytes of backends' answers held at once, by side: `[0]` the admissions' calls (32 MiB),
/// `[1]` the background lane's (Shadow webhooks, candidate backends: 16 MiB). Each answer is at
/// most [`MAX_ANSWER_BYTES`], but calls run concurrently: without a shared bound, a backend
/// that streams large answers to `--max-requests-inflight` admissions (or to the lane's 256
/// places) at once would hold hundreds of them. Answers are a few hundred bytes as a rule;
/// one that would pass its side's bound is a call error (decided by failurePolicy on the
/// admissions' side; the lane's work is best effort, its admission answered long before).
/// Counted as the memory the body holds (its buffer's capacity), in permits of 1 KiB, past
/// each answer's first [`UNCOUNTED_ANSWER_BYTES`]: those are bounded by the calls in flight,
/// and counting them would cost every call the budget's atomics.
pub const ANSWER_BYTES: [usize; 2] = [32 << 20, 16 << 20];

/// The part of each answer not counted in [`ANSWER_BYTES`] (16 KiB): an AdmissionReview
/// answer is a few hundred bytes as a rule, so this is the common case at no cost; at
/// `--max-requests-inflight` 400 it is 6.4 MB at most.
pub const UNCOUNTED_ANSWER_BYTES: usize = 16 << 10;

static ANSWERS: [tokio::sync::Semaphore; 2] = [
    tokio::sync::Semaphore::const_new(ANSWER_BYTES[0] >> 10),
    tokio::sync::Semaphore::const_new(ANSWER_BYTES[1] >> 10),
];

impl HttpReply {
    /// The first value of header `name` (any case), when it is text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The `Content-Type` header.
    pub(crate) fn content_type(&self) -> Option<&str> {
        self.header("content-type")
    }
}

/// Where to POST: a backend's address, TLS settings and `Host` header, shared with the
/// configuration that holds it (nothing copied per call). A host name is resolved only when a
/// new connection is dialled ([`HttpClient::post`]).
#[derive(Clone)]
pub struct Target {
    backend: Arc<Backend>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Target({self}, tls={})", self.backend.tls)
    }
}

impl Target {
    /// The target of a backend (a copy of it); its `caBundle` certificates were checked to
    /// parse at load.
    pub fn new(backend: &Backend) -> Self {
        Self::shared(Arc::new(backend.clone()))
    }

    /// The target of a backend the configuration holds: the call shares it.
    pub(crate) fn shared(backend: Arc<Backend>) -> Self {
        Target { backend }
    }

    /// The peer for connections whose leaf is one of `caBundle`'s self-signed certificates:
    /// chain verification is off in rustls (webpki refuses a CA as end entity), the handshake
    /// signature is still checked, and [`Target::pinned_leaf_ok`] checks the leaf itself.
    fn pinned_peer(&self, verified: &HttpPeer) -> Option<HttpPeer> {
        if self.backend.self_signed_leaves.is_empty() {
            return None;
        }
        let mut peer = verified.clone();
        peer.options.verify_cert = false;
        peer.options.verify_hostname = false;
        Some(peer)
    }

    /// Whether a new connection of [`Target::pinned_peer`] presented one of the self-signed
    /// `caBundle` certificates, now within its validity period.
    fn pinned_leaf_ok(&self, session: &HttpSession) -> bool {
        let Some(ssl) = session.digest().and_then(|d| d.ssl_digest.as_ref()) else {
            return false;
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        self.backend
            .self_signed_leaves
            .iter()
            .any(|l| l.sha256 == ssl.cert_digest && l.not_before <= now && now <= l.not_after)
    }

    async fn peer(&self) -> Result<HttpPeer, TransportError> {
        let b = &*self.backend;
        let addr: SocketAddr = match b.host.parse::<std::net::IpAddr>() {
            Ok(ip) => SocketAddr::new(ip, b.port),
            Err(_) => tokio::net::lookup_host((b.host.as_str(), b.port))
                .await
                .map_err(|e| {
                    let text = format!("dial tcp: lookup {}: {e}", b.host);
                    TransportError::Connect(TransportFailure::caused_by(
                        text,
                        TransportCause::Io(e),
                    ))
                })?
                .next()
                .ok_or_else(|| {
                    TransportError::Connect(TransportFailure::new(format!(
                        "dial tcp: lookup {}: no such host",
                        b.host
                    )))
                })?,
        };
        let sni = if b.tls {
            b.tls_server_name().to_string()
        } else {
            String::new()
        };
        let mut peer = HttpPeer::new(addr, b.tls, sni);
        peer.options.ca = b.ca_bundle.clone();
        peer.group_key = b.ca_fingerprint;
        Ok(peer)
    }

    /// SNI and the name verified in the certificate (`host` unless `tlsServerName` is set).
    fn server_name(&self) -> &str {
        self.backend.tls_server_name()
    }
}

/// A pooled HTTP/1.1 client. Cheap to share; one per process.
pub struct HttpClient {
    /// Dials and handshakes new connections (its own pool stays empty: see [`Pool`]).
    connector: Connector,
    /// Idle connections: `[0]` those of the admissions' runtime, `[1]` those of the background
    /// lane's ([`lane_pool`]).
    pools: [Pool; 2],
}

thread_local! {
    /// Whether this thread runs the background lane's runtime ([`mark_background_lane`]).
    static BACKGROUND_LANE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks the calling thread as the background lane's: connections it dials are pooled apart.
///
/// Why: a tokio socket is driven by the runtime that registered it. A connection the
/// low-priority lane dialled and an admission then took from a shared pool would wait, on every
/// read, for the lane's thread to be scheduled; so each side reuses only its own connections.
pub(crate) fn mark_background_lane() {
    BACKGROUND_LANE.with(|b| b.set(true));
}

/// The index in [`HttpClient::pools`] of the calling thread's side.
fn lane_pool() -> usize {
    usize::from(BACKGROUND_LANE.with(std::cell::Cell::get))
}

/// Idle keep-alive connections, per backend (address, TLS server name and trust roots).
///
/// The proxy's own rather than pingora's: pingora's pool watches each idle connection with a
/// task and, when a connection is taken while that task still holds it, drops it with
/// `ERROR failed to acquire reusable stream` and dials anew (a needless TLS handshake; 214
/// such lines in 1158 demo requests). Here a connection is checked when it is taken
/// ([`closed_while_idle`]), before any byte is written. Lock-free on the request path: one
/// bounded queue per backend, found in a copy-on-write map.
#[derive(Default)]
struct Pool {
    queues: ArcSwap<HashMap<u64, Arc<ArrayQueue<Idle>>>>,
}

/// An idle connection and when it was last used (the wake-up that read its answer,
/// [`crate::clock`]).
struct Idle {
    stream: pingora::protocols::Stream,
    since: tokio::time::Instant,
}

/// Idle connections kept per backend; more are closed after their answer.
const POOL_PER_BACKEND: usize = 64;

impl Pool {
    /// An idle connection to `key` not older than [`POOL_IDLE`], oldest first.
    fn take(&self, key: u64) -> Option<pingora::protocols::Stream> {
        let queue = self.queues.load().get(&key).cloned()?;
        while let Some(idle) = queue.pop() {
            if crate::clock::since(idle.since) < POOL_IDLE {
                return Some(idle.stream);
            }
        }
        None
    }

    /// Keeps `stream` for the next call to `key` (closes it when the queue is full).
    fn put(&self, key: u64, stream: pingora::protocols::Stream) {
        let queue = super::cow_entry(&self.queues, key, || ArrayQueue::new(POOL_PER_BACKEND));
        let _ = queue.push(Idle {
            stream,
            since: crate::clock::now(),
        });
    }
}

impl Default for HttpClient {
    fn default() -> Self {
        Self::new()
    }
}

impl HttpClient {
    /// A client with an empty pool. System trust roots (`SSL_CERT_FILE`, `SSL_CERT_DIR` or the
    /// platform's bundle) are loaded once here; without any (a `scratch` image with no CA
    /// bundle) the client starts with none, warns, and only backends with a `caBundle` verify.
    pub fn new() -> Self {
        // pingora's connector panics when the platform roots cannot be loaded: check first.
        let options = match pingora::tls::load_native_certs() {
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(error = %e, "no system trust roots: backends without a caBundle cannot be verified");
                // pingora's default pool size when no options are given.
                let mut options = pingora::connectors::ConnectorOptions::new(128);
                // An empty root store (an empty PEM file).
                options.ca_file = Some("/dev/null".to_string());
                Some(options)
            }
        };
        // Before the connector: pingora's TLS client takes the process's default provider,
        // installing ring's own only when none is.
        crate::tls::install_client_provider();
        HttpClient {
            connector: Connector::new(options),
            pools: Default::default(),
        }
    }

    /// POSTs `body` to `path_and_query` with `Content-Type: application/json`, the headers
    /// kube-apiserver sends, and `extra_headers`. The request is sent exactly once: like Go's
    /// transport for a POST, nothing is re-sent after any byte of it was written (a backend
    /// with side effects must not see one admission twice). A pooled connection the backend
    /// closed while it was idle is detected before writing and replaced (Go's `net/http`
    /// `Transport` retries only a request it wrote nothing of, `shouldRetryRequest`).
    ///
    /// # Errors
    /// [`TransportError`] for connect, TLS and I/O or protocol failures. No timeout is applied
    /// here: callers bound the whole exchange.
    pub async fn post(
        &self,
        target: &Target,
        path_and_query: &str,
        body: &[u8],
        extra_headers: &[(&str, &str)],
    ) -> Result<HttpReply, TransportError> {
        let wire = request_bytes(target, path_and_query, body, extra_headers)?;
        let key = target.backend.pool_key;
        // Each stale pooled connection leaves the pool as it is taken; at most the pool's size.
        let mut stream = None;
        for _ in 0..POOL_PER_BACKEND {
            let Some(mut pooled) = self.pools[lane_pool()].take(key) else {
                break;
            };
            if closed_while_idle(&mut pooled) {
                tracing::debug!(backend = %target, "pooled connection was closed by the backend; taking another");
                continue;
            }
            stream = Some(pooled);
            break;
        }
        let stream = match stream {
            Some(pooled) => pooled,
            // Boxed: a new connection (DNS lookup, TCP and TLS handshakes) is the rare branch,
            // and its state, most of this future's, would otherwise be part of every call's.
            None => Box::pin(self.new_connection(target)).await?,
        };
        let (reply, mut h1) = exchange(stream, target, &wire).await?;
        h1.respect_keepalive();
        if let Some(stream) = h1.reuse().await {
            self.pools[lane_pool()].put(key, stream);
        }
        Ok(reply)
    }

    /// A new connection to `target`. Only a new connection needs the address: a pooled one
    /// is reused without a DNS lookup (a Service backend's name would otherwise be resolved
    /// per call), as Go's transport reuses idle connections by host and port.
    async fn new_connection(
        &self,
        target: &Target,
    ) -> Result<pingora::protocols::Stream, TransportError> {
        let verified = target.peer().await?;
        let pinned = target.pinned_peer(&verified);
        let session = self.connect(target, &verified, pinned.as_ref()).await?;
        let HttpSession::H1(h1) = session else {
            return Err(TransportError::Io(TransportFailure::new(
                "unexpected HTTP/2 session",
            )));
        };
        Ok(h1.into_inner())
    }

    /// A new connection: first through `pinned` (when the `caBundle` has a self-signed
    /// certificate for the name) whose connections must present it, else, or when the backend
    /// presented another certificate, through the chain-verified `verified`.
    async fn connect(
        &self,
        target: &Target,
        verified: &HttpPeer,
        pinned: Option<&HttpPeer>,
    ) -> Result<HttpSession, TransportError> {
        crate::metrics::upstream_connection_opened();
        if let Some(peer) = pinned {
            let (session, _) = self
                .connector
                .get_http_session(peer)
                .await
                .map_err(|e| classify(e, target))?;
            if target.pinned_leaf_ok(&session) {
                return Ok(session);
            }
            tracing::debug!(backend = %target, "the backend's certificate is not a self-signed caBundle certificate; verifying its chain");
        }
        let (session, _) = self
            .connector
            .get_http_session(verified)
            .await
            .map_err(|e| classify(e, target))?;
        Ok(session)
    }
}

/// One request/response on a connection: the request line, headers and body go out in one
/// write, so one TLS record and usually one TCP segment (pingora's own `write_request_header`
/// flushes the header on its own, which cost an extra send and an extra wake-up of the backend
/// per call: benches/README.md, "What the profiles found"). pingora parses the response and
/// owns the pooled connection.
///
/// Over 80 lines: one request and its answer in order (write, read the header, the body within
/// its bounds, give the connection back), each step beside the error it can end in.
async fn exchange(
    mut stream: pingora::protocols::Stream,
    target: &Target,
    wire: &[u8],
) -> Result<(HttpReply, pingora::protocols::http::v1::client::HttpSession), TransportError> {
    use tokio::io::AsyncWriteExt;
    let io = |e: std::io::Error| {
        TransportError::Io(TransportFailure::caused_by(
            e.to_string(),
            TransportCause::Io(e),
        ))
    };
    stream.write_all(wire).await.map_err(io)?;
    stream.flush().await.map_err(io)?;
    // `new_with_options` only reads a peer option the proxy leaves at its default.
    let mut h1 = pingora::protocols::http::v1::client::HttpSession::new(stream);
    let failed = |e: Box<pingora::Error>| classify(e, target);
    h1.read_response().await.map_err(failed)?;
    let header = h1
        .resp_header()
        .ok_or_else(|| TransportError::Io(TransportFailure::new("no response header")))?;
    let status = header.status.as_u16();
    let headers = header.headers.clone();
    let too_large = || {
        TransportError::TooLarge(TransportFailure::new(format!(
            "the answer's body is larger than {MAX_ANSWER_BYTES} bytes, more than any answer to an AdmissionReview kube-apiserver accepts"
        )))
    };
    // Refused before a byte of it is read when its length says so: the length pingora frames
    // the body by.
    let declared = pingora::protocols::http::v1::common::header_value_content_length(
        headers.get(http::header::CONTENT_LENGTH),
    );
    if declared.is_some_and(|n| n > MAX_ANSWER_BYTES) {
        return Err(too_large());
    }
    // client-go reads the whole body in `transformResponse`
    // (`staging/src/k8s.io/client-go/rest/request.go`) and words any failure so.
    let body_failed = |e: Box<pingora::Error>| {
        let failed = classify(e, target);
        let text = match &failed {
            // Go's io.ReadAll on a body cut short: io.ErrUnexpectedEOF.
            TransportError::Io(f) if f.text == "EOF" => "unexpected EOF".to_string(),
            other => other.to_string(),
        };
        TransportError::Body(TransportFailure {
            text,
            cause: failed.into_failure().cause,
        })
    };
    let side = lane_pool();
    let mut held: Option<tokio::sync::SemaphorePermit<'static>> = None;
    // With its length known, a body in pieces is joined into one buffer of that size.
    let mut body = Body::expecting(declared.unwrap_or(0));
    while let Some(chunk) = h1.read_body_bytes().await.map_err(body_failed)? {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            // The connection is dropped with the rest unread: it cannot carry another call.
            return Err(too_large());
        }
        let holds = body.held_after(chunk.len());
        if holds <= UNCOUNTED_ANSWER_BYTES {
            body.push(chunk);
            continue;
        }
        let counted = holds - UNCOUNTED_ANSWER_BYTES;
        hold_answer_bytes(&ANSWERS[side], &mut held, counted).map_err(|()| {
            let whose = ["the admissions'", "the background lane's"][side];
            TransportError::TooLarge(TransportFailure::new(format!(
                "{whose} answers from backends already hold {} bytes; this answer is not read further",
                ANSWER_BYTES[side]
            )))
        })?;
        body.push(chunk);
    }
    let body = body.finish();
    Ok((
        HttpReply {
            status,
            headers,
            body,
            _held: held,
        },
        h1,
    ))
}

/// Grows `held` to cover `total` bytes of an answer (in KiB) from `budget` (a side of
/// [`ANSWERS`]).
///
/// # Errors
/// `budget` has not that much left; `held` is as it was.
fn hold_answer_bytes(
    budget: &'static tokio::sync::Semaphore,
    held: &mut Option<tokio::sync::SemaphorePermit<'static>>,
    total: usize,
) -> Result<(), ()> {
    let want = u32::try_from(total.div_ceil(1024)).unwrap_or(u32::MAX);
    let have = held.as_ref().map_or(0, |p| p.num_permits() as u32);
    if want <= have {
        return Ok(());
    }
    let more = budget.try_acquire_many(want - have).map_err(|_| ())?;
    match held {
        Some(permit) => permit.merge(more),
        None => *held = Some(more),
    }
    Ok(())
}

/// An HTTP body read chunk by chunk. A body that arrives in one piece (the usual
/// AdmissionReview and answer) is kept as read, without a copy; only one in several pieces is
/// joined.
#[derive(Default)]
pub(crate) struct Body {
    first: Bytes,
    joined: Option<Vec<u8>>,
    /// The whole body's length when it was declared: the joined buffer's size.
    expected: usize,
}

impl Body {
    /// A body of `expected` bytes (0 when not known).
    pub(crate) fn expecting(expected: usize) -> Self {
        Body {
            expected,
            ..Body::default()
        }
    }

    /// The bytes the body will hold once a chunk of `chunk` bytes is pushed: its buffer's
    /// capacity, which is what it takes of memory.
    pub(crate) fn held_after(&self, chunk: usize) -> usize {
        let len = self.len() + chunk;
        match &self.joined {
            None if self.first.is_empty() => len,
            None => len.max(self.expected),
            Some(all) if all.capacity() >= len => all.capacity(),
            // `Vec` at least doubles when it grows.
            Some(all) => len.max(all.capacity() * 2),
        }
    }

    /// Appends the next chunk.
    pub(crate) fn push(&mut self, chunk: Bytes) {
        match &mut self.joined {
            None if self.first.is_empty() => self.first = chunk,
            None => {
                let len = self.first.len() + chunk.len();
                let mut all = Vec::with_capacity(len.max(self.expected));
                all.extend_from_slice(&self.first);
                all.extend_from_slice(&chunk);
                self.joined = Some(all);
            }
            Some(all) => all.extend_from_slice(&chunk),
        }
    }

    /// Bytes so far.
    pub(crate) fn len(&self) -> usize {
        self.joined.as_ref().map_or(self.first.len(), Vec::len)
    }

    /// The whole body.
    pub(crate) fn finish(self) -> Bytes {
        self.joined.map_or(self.first, Bytes::from)
    }
}

/// Whether an idle pooled connection was closed by the backend (or sent something unasked),
/// before anything is written to it: Go's transport knows this from its connection's read loop
/// (`persistConn.readLoop`, `errServerClosedIdle`, `net/http/transport.go`) and dials anew.
///
/// First one non-blocking read through the stream (what TLS has already buffered, or what the
/// runtime has already seen); an open, quiet connection has nothing to read (`Pending`). That
/// read goes by the readiness the runtime last polled, which on a busy runtime can predate the
/// backend's close; so then the socket itself is asked (`recv` with `MSG_PEEK | MSG_DONTWAIT`):
/// end-of-file, an error or unasked bytes (a TLS alert) mean closed; `EAGAIN`, open.
#[allow(
    unsafe_code,
    reason = "a non-blocking MSG_PEEK recv, which tokio does not offer on a borrowed stream"
)]
fn closed_while_idle(stream: &mut pingora::protocols::Stream) -> bool {
    use futures::FutureExt;
    use tokio::io::AsyncReadExt;
    let mut byte = [0u8; 1];
    if stream.read(&mut byte).now_or_never().is_some() {
        return true;
    }
    let fd = stream.id();
    // SAFETY: `fd` is the stream's own open socket, borrowed for the call; the one-byte buffer
    // outlives it. MSG_PEEK leaves any byte where it is.
    let peeked = unsafe {
        libc::recv(
            fd,
            byte.as_mut_ptr().cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    peeked >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::WouldBlock
}

/// The HTTP/1.1 request as sent: request line, the headers kube-apiserver sends, `extra`, body.
///
/// # Errors
/// A CR, LF or other control byte in the path or a header (never from a validated config).
fn request_bytes(
    target: &Target,
    path_and_query: &str,
    body: &[u8],
    extra_headers: &[(&str, &str)],
) -> Result<Vec<u8>, TransportError> {
    let fields = [
        ("Host", target.backend.host_header.as_str()),
        ("User-Agent", "kube-apiserver-admission"),
        ("Accept", "application/json, */*"),
        ("Content-Type", "application/json"),
    ];
    let all = || fields.iter().chain(extra_headers.iter());
    let unsafe_text = |t: &str| t.bytes().any(|b| b < 0x20 || b == 0x7f);
    if unsafe_text(path_and_query) || all().any(|(n, v)| unsafe_text(n) || unsafe_text(v)) {
        return Err(TransportError::Io(TransportFailure::new(
            "refusing to send a request line or header with control characters",
        )));
    }
    // Appended, not `write!`: the formatting machinery cost more than the copies here
    // (benches/README.md, "Instructions per admission").
    let mut wire = Vec::with_capacity(256 + body.len());
    wire.extend_from_slice(b"POST ");
    wire.extend_from_slice(path_and_query.as_bytes());
    wire.extend_from_slice(b" HTTP/1.1\r\n");
    for (name, value) in all() {
        wire.extend_from_slice(name.as_bytes());
        wire.extend_from_slice(b": ");
        wire.extend_from_slice(value.as_bytes());
        wire.extend_from_slice(b"\r\n");
    }
    wire.extend_from_slice(b"Content-Length: ");
    wire.extend_from_slice(itoa::Buffer::new().format(body.len()).as_bytes());
    wire.extend_from_slice(b"\r\n\r\n");
    wire.extend_from_slice(body);
    Ok(wire)
}

/// Maps pingora's error types onto connect / TLS / I/O, with Go's texts where they are known
/// (`dial tcp ADDR: connect: connection refused`, `EOF`); pingora's error is kept as the cause.
fn classify(e: Box<pingora::Error>, addr: &Target) -> TransportError {
    use pingora::ErrorType::*;
    let failure = |text: String, e| TransportFailure::caused_by(text, TransportCause::Pingora(e));
    if closed_without_close_notify(&e) {
        return TransportError::Io(failure("EOF".into(), e));
    }
    // pingora's own text, which names the rustls or I/O error (tls_sentence reads it).
    let cause = e.to_string();
    let (class, text): (fn(TransportFailure) -> TransportError, String) = match e.etype() {
        ConnectRefused => (
            TransportError::Connect,
            format!("dial tcp {addr}: connect: connection refused"),
        ),
        ConnectTimedout => (
            TransportError::Connect,
            format!("dial tcp {addr}: i/o timeout"),
        ),
        ConnectNoRoute => (
            TransportError::Connect,
            format!("dial tcp {addr}: connect: no route to host"),
        ),
        ConnectError | BindError | SocketError | ConnectProxyFailure => {
            (TransportError::Connect, format!("dial tcp {addr}: {cause}"))
        }
        TLSWantX509Lookup | TLSHandshakeFailure | TLSHandshakeTimedout | InvalidCert
        | HandshakeError => (TransportError::Tls, tls_sentence(&cause, addr)),
        ConnectionClosed => (TransportError::Io, "EOF".into()),
        _ => (TransportError::Io, cause),
    };
    class(failure(text, e))
}

/// Whether `e` is the peer closing TCP without TLS close_notify (an I/O error of kind
/// UnexpectedEof somewhere in its causes): Go reads that close as end of stream, and rustls' own
/// text for it carries a documentation URL the caller should not see. pingora's error keeps
/// its cause in a field, not in `source()`.
fn closed_without_close_notify(e: &pingora::Error) -> bool {
    let mut cause = e.cause.as_deref();
    // Bounded: pingora nests a handful of contexts at most.
    for _ in 0..16 {
        let Some(c) = cause else { return false };
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::UnexpectedEof {
                return true;
            }
            cause = io
                .get_ref()
                .map(|inner| inner as &(dyn std::error::Error + Send + Sync));
        } else if let Some(p) = c.downcast_ref::<pingora::Error>() {
            cause = p.cause.as_deref();
        } else {
            return false;
        }
    }
    false
}

/// A TLS failure as one sentence in Go's words where Go has them (`x509: certificate signed by
/// unknown authority`, `x509: certificate is valid for A, not B`), naming the server name
/// verified, instead of pingora's nested context and rustls' debug names.
fn tls_sentence(cause: &str, addr: &Target) -> String {
    // pingora: "... tls connect error cause: <rustls error>, SNI: <name> cause: ...".
    let rustls = cause
        .rsplit_once("error cause: ")
        .map_or(cause, |(_, rest)| rest);
    let rustls = rustls.split(", SNI: ").next().unwrap_or(rustls).trim();
    let Some(detail) = rustls.strip_prefix("invalid peer certificate: ") else {
        return format!(
            "tls: handshake with {addr} (server name {:?}) failed: {rustls}",
            addr.server_name()
        );
    };
    let reason = if detail.contains("UnknownIssuer") {
        "x509: certificate signed by unknown authority (issued by no caBundle certificate, or by no system root when caBundle is empty)".to_string()
    } else if detail.contains("CaUsedAsEndEntity") {
        "x509: certificate signed by unknown authority (a CA certificate presented as the server's own, and not one of caBundle's)".to_string()
    } else if detail.contains("Expired") {
        "x509: certificate has expired or is not yet valid".to_string()
    } else if detail.contains("NotValidYet") {
        "x509: certificate has expired or is not yet valid: not yet valid".to_string()
    } else if let Some(valid) = detail
        .split_once("certificate is only valid for ")
        .map(|(_, v)| v)
    {
        let names: Vec<&str> = valid
            .split(['(', ')', '"', ',', ' ', '[', ']'])
            .filter(|t| !t.is_empty() && !t.ends_with("Name") && *t != "IpAddress")
            .collect();
        format!(
            "x509: certificate is valid for {}, not {}",
            names.join(", "),
            addr.server_name()
        )
    } else {
        format!("x509: {detail}")
    };
    format!(
        "tls: failed to verify certificate of {addr} for server name {:?}: {reason}",
        addr.server_name()
    )
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Only in logs and failure messages, never per successful call.
        f.write_str(&crate::backend::authority(
            &self.backend.host,
            self.backend.port,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::WebhookClientConfig;

    /// Answers held at once take from their side's budget by the memory their bodies hold,
    /// grow their share as they are read, and give it back when dropped; one that would pass
    /// the budget is refused, and takes nothing more.
    #[test]
    fn answers_held_at_once_are_bounded() {
        let budget: &'static tokio::sync::Semaphore =
            Box::leak(Box::new(tokio::sync::Semaphore::new(8)));
        let mut a = None;
        hold_answer_bytes(budget, &mut a, 3 * 1024).unwrap();
        hold_answer_bytes(budget, &mut a, 5 * 1024).unwrap();
        assert_eq!(budget.available_permits(), 3);
        let mut b = None;
        assert_eq!(hold_answer_bytes(budget, &mut b, 4 * 1024), Err(()));
        assert!(b.is_none());
        hold_answer_bytes(budget, &mut b, 2 * 1024 + 1).unwrap();
        assert_eq!(budget.available_permits(), 0);
        drop(a);
        assert_eq!(budget.available_permits(), 5);
        // A body counts its buffer: joined into its declared size, or grown by doubling.
        let mut body = Body::expecting(10_000);
        assert_eq!(body.held_after(100), 100);
        body.push(Bytes::from(vec![0; 100]));
        assert_eq!(body.held_after(100), 10_000);
        body.push(Bytes::from(vec![0; 100]));
        let mut unknown = Body::default();
        unknown.push(Bytes::from(vec![0; 100]));
        unknown.push(Bytes::from(vec![0; 100]));
        assert_eq!(unknown.held_after(1), 400);
    }

    fn target(url: &str) -> Target {
        let backend = Backend::from_client_config(&WebhookClientConfig {
            url: Some(url.into()),
            ..Default::default()
        })
        .unwrap();
        Target::new(&backend)
    }

    /// A plain-HTTP backend on 127.0.0.1 answering every request `200 {}` on kept-alive
    /// connections; the count is of connections accepted.
    async fn counting_backend() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 << 10];
                    let mut seen = Vec::new();
                    while let Ok(n @ 1..) = tcp.read(&mut buf).await {
                        seen.extend_from_slice(&buf[..n]);
                        // Each test request is one head and a 2-byte body.
                        while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                            seen.drain(..end + 4 + 2);
                            let reply = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
                            if tcp.write_all(reply).await.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        (url, accepted)
    }

    /// A connection the background lane dialled is never handed to an admission (its socket
    /// is driven by the lane's low-priority runtime), nor the other way round; each side
    /// reuses its own.
    #[tokio::test]
    async fn the_background_lane_and_admissions_reuse_only_their_own_connections() {
        let (url, accepted) = counting_backend().await;
        let client = Arc::new(HttpClient::new());
        let t = target(&url);
        let post = |client: Arc<HttpClient>, t: Target| async move {
            let reply = client.post(&t, "/", b"{}", &[]).await.unwrap();
            assert_eq!(reply.status, 200);
        };
        post(client.clone(), t.clone()).await;
        post(client.clone(), t.clone()).await;
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
        let on_lane = std::thread::spawn({
            let (client, t) = (client.clone(), t.clone());
            move || {
                mark_background_lane();
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                runtime.block_on(async {
                    post(client.clone(), t.clone()).await;
                    post(client, t).await;
                });
            }
        });
        tokio::task::spawn_blocking(move || on_lane.join().unwrap())
            .await
            .unwrap();
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 2);
        post(client, t).await;
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    /// A backend that closes each connection once it has answered (as one whose idle timeout
    /// has passed does), with no `Connection: close`: the next call finds the pooled
    /// connection closed and dials anew, even when its runtime has not yet seen the close
    /// (a busy runtime polls its sockets' readiness only between tasks). Before, the call was
    /// written to the closed connection and failed (`EOF`, or `Broken pipe`), and
    /// failurePolicy decided an admission the backend never saw.
    #[tokio::test(flavor = "current_thread")]
    async fn a_pooled_connection_the_backend_closed_is_not_written_to() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let (closed, on_close) = std::sync::mpsc::channel();
        let (close, to_close) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            for tcp in listener.incoming().take(2) {
                let mut tcp = tcp.unwrap();
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                while !seen.ends_with(b"\r\n\r\n{}") {
                    let n = tcp.read(&mut buf).unwrap();
                    assert!(n > 0, "the request arrives whole");
                    seen.extend_from_slice(&buf[..n]);
                }
                tcp.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
                    .unwrap();
                // Closed only once the client has read the answer and pooled the connection.
                let _ = to_close.recv();
                drop(tcp);
                closed.send(()).unwrap();
            }
        });
        let client = HttpClient::new();
        let t = target(&url);
        assert_eq!(client.post(&t, "/", b"{}", &[]).await.unwrap().status, 200);
        close.send(()).unwrap();
        // Blocks this runtime's only thread: its I/O driver cannot see the close.
        on_close.recv().unwrap();
        drop(close);
        let second = client.post(&t, "/", b"{}", &[]).await;
        assert_eq!(second.map(|r| r.status).map_err(|e| e.to_string()), Ok(200));
    }

    /// Go's words outside, pingora's error (and the I/O error inside it) kept as the source.
    #[test]
    fn transport_errors_keep_pingoras_error_as_their_source() {
        use std::error::Error as _;
        let t = target("https://127.0.0.1:9/");
        let refused = classify(
            pingora::Error::because(
                pingora::ErrorType::ConnectRefused,
                "connecting",
                std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
            ),
            &t,
        );
        assert_eq!(
            refused.to_string(),
            "dial tcp 127.0.0.1:9: connect: connection refused"
        );
        assert_eq!(refused.class(), "connect");
        let source = refused.source().expect("pingora's error");
        let pingora = source
            .downcast_ref::<pingora::Error>()
            .expect("pingora's error");
        assert_eq!(pingora.etype(), &pingora::ErrorType::ConnectRefused);

        // A close without close_notify reads as EOF; the I/O error stays reachable.
        let closed = classify(
            pingora::Error::because(
                pingora::ErrorType::ReadError,
                "reading",
                std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
            ),
            &t,
        );
        assert!(matches!(&closed, TransportError::Io(_)));
        assert_eq!(closed.to_string(), "EOF");
        let pingora = closed
            .source()
            .unwrap()
            .downcast_ref::<pingora::Error>()
            .unwrap();
        assert!(closed_without_close_notify(pingora));

        let unsafe_header = request_bytes(&t, "/x\r\n", b"", &[]).unwrap_err();
        assert!(unsafe_header.source().is_none());
    }

    /// The bytes a backend receives: request line with `?timeout=`, the headers kube-apiserver's
    /// webhook client sends (`Host` without the scheme's default port), any extra header, the
    /// length, then the body unchanged.
    #[test]
    fn request_bytes_are_the_whole_request() {
        let wire = request_bytes(
            &target("https://hooks.example.com:8443/validate"),
            "/validate?timeout=10s",
            b"{\"kind\":\"AdmissionReview\"}",
            &[("X-Extra", "v")],
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(wire).unwrap(),
            "POST /validate?timeout=10s HTTP/1.1\r\n\
             Host: hooks.example.com:8443\r\n\
             User-Agent: kube-apiserver-admission\r\n\
             Accept: application/json, */*\r\n\
             Content-Type: application/json\r\n\
             X-Extra: v\r\n\
             Content-Length: 26\r\n\
             \r\n\
             {\"kind\":\"AdmissionReview\"}"
        );
        let default_port = request_bytes(&target("https://hooks.example.com/"), "/", b"", &[]);
        assert!(String::from_utf8(default_port.unwrap())
            .unwrap()
            .contains("\r\nHost: hooks.example.com\r\n"));
    }

    /// A control character in the path or a header would split the request: refused, nothing
    /// built.
    #[test]
    fn control_characters_are_refused() {
        let t = target("https://hooks.example.com/");
        assert!(request_bytes(&t, "/a\r\nX: y", b"", &[]).is_err());
        assert!(request_bytes(&t, "/", b"", &[("X-Extra", "a\nb")]).is_err());
    }
}
