//! The HTTPS server kube-apiserver calls, speaking HTTP only: the proxy's own accept loop
//! (plain HTTP on the TLS port answered 400 as Go servers do, bounded TLS handshakes, handshake
//! failures counted, not logged as errors) feeding pingora's HTTP/1 server layer; framing and
//! its limits, the admission routes (`POST /webhooks/{validating|mutating}/{name}`,
//! `/webhooks/{name}`, `/configurations/{validating|mutating}[/{name}]`) with the body read and
//! parsed once, `/livez`, `/healthz`, `/readyz` and `/metrics`, writing each answer, and the
//! drain on shutdown. A routed request goes to the admission layer (`admission`), which
//! answers it. Depends on `admission`, `review`, `metrics`, `tls`.

use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Response;
use pingora::http::ResponseHeader;
use pingora::protocols::http::server::ReusableHttpStream;
use pingora::protocols::http::ServerSession;
use tokio::sync::{watch, Notify};

use crate::admission::{Admissions, Route};
use crate::api::WebhookType;
use crate::log_value::Bounded;
use crate::review::{encode_status, SharedReview, Status};

mod connection;

pub use connection::{Closed, Limits};
use connection::{ConnIo, ConnectionCount, ServerStream, Watch};

/// Default request body limit: kube-apiserver's own 3 MiB (`MaxRequestBodyBytes` in `NewConfig`,
/// `staging/src/k8s.io/apiserver/pkg/server/config.go`).
pub const DEFAULT_MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Response header naming the proxy's decision (`Decision::as_str`: `skipped`, `allowed`,
/// `denied`, `failed-open`, `failed-closed`, `rejected-dry-run`, `rejected`, `would-deny`,
/// `would-patch`, `shadowed`, `exempt`); kube-apiserver ignores it, people debugging don't.
pub const DECISION_HEADER: &str = "x-admission-proxy-decision";

/// What the HTTP layer reads: its limits, the metrics it serves, its shutdown and in-flight
/// state, and the admission layer it hands routed requests to.
pub struct State {
    /// One admission from the routed request to the answer (`admission`).
    pub(crate) admissions: Arc<Admissions>,
    /// Request bodies larger than this get 413.
    pub(crate) max_body_bytes: usize,
    /// The listener's limits; [`Limits::default`] unless the `serve` flags set them.
    pub limits: Arc<Limits>,
    pub(crate) metrics: Option<crate::metrics::Scrapes>,
    /// Set on SIGTERM: `/readyz` fails so that the endpoint is taken out of the Service, and
    /// answers ask clients to close their connections.
    shutting_down: AtomicBool,
    in_flight: InFlight,
}

/// Requests being answered, and a wake-up when the count reaches zero (the drain waits on it).
#[derive(Default)]
struct InFlight {
    count: AtomicUsize,
    idle: Notify,
}

impl InFlight {
    /// Counts one request until the guard is dropped.
    fn start(&self) -> InFlightGuard<'_> {
        self.count.fetch_add(1, Ordering::AcqRel);
        InFlightGuard(self)
    }

    /// Waits until none is counted; at once when none is.
    async fn idle(&self) {
        loop {
            let idle = self.idle.notified();
            if self.count.load(Ordering::Acquire) == 0 {
                return;
            }
            idle.await;
        }
    }
}

/// Counts one request in flight until dropped.
struct InFlightGuard<'a>(&'a InFlight);

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl State {
    /// The HTTP layer in front of `admissions`: bodies up to `max_body_bytes`, the listener's
    /// `limits`, and `/metrics` rendered by `metrics` (`None`: answered 404).
    pub fn new(
        admissions: Admissions,
        max_body_bytes: usize,
        limits: Limits,
        metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
    ) -> Self {
        let admissions = Arc::new(admissions);
        let metrics = metrics.map(|handle| {
            let admissions = admissions.clone();
            crate::metrics::Scrapes::new(move || {
                let mut text = handle.render();
                admissions.write_served_metrics(&mut text);
                text
            })
        });
        State {
            admissions,
            max_body_bytes,
            limits: Arc::new(limits),
            metrics,
            shutting_down: AtomicBool::new(false),
            in_flight: InFlight::default(),
        }
    }

    /// Whether kube-apiserver should be sent requests: `Err(reason)` while shutting down or
    /// while no webhook is loaded (an empty configuration would answer every route 404).
    ///
    /// # Errors
    /// The reason, for the `/readyz` body.
    pub(crate) fn readiness(&self) -> Result<(), &'static str> {
        if self.shutting_down.load(Ordering::Acquire) {
            return Err("shutting down");
        }
        self.admissions.readiness()
    }

    /// Marks the proxy as shutting down: `/readyz` fails from now on.
    pub(crate) fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::Release);
    }

    /// Requests being answered now.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.count.load(Ordering::Acquire)
    }

    /// Waits until no request is in flight. Returns at once when none is.
    pub(crate) async fn drained(&self) {
        self.in_flight.idle().await;
    }

    fn request_started(&self) -> InFlightGuard<'_> {
        self.in_flight.start()
    }
}

/// The route an admission path names; `None` for any other path.
pub(crate) fn parse_route(path: &str) -> Option<Route<'_>> {
    let typed = |t: &str| match t {
        "validating" => Some(WebhookType::Validating),
        "mutating" => Some(WebhookType::Mutating),
        _ => None,
    };
    let one_segment = |name: &str| !name.is_empty() && !name.contains('/');
    if let Some(rest) = path.strip_prefix("/configurations/") {
        return match rest.split_once('/') {
            None => Some(Route::Chain(typed(rest)?, None)),
            Some((t, name)) => one_segment(name).then_some(Route::Chain(typed(t)?, Some(name))),
        };
    }
    let rest = path.strip_prefix("/webhooks/")?;
    let (webhook_type, name) = match rest.split_once('/') {
        None => (None, rest),
        Some((t, name)) => (Some(typed(t)?), name),
    };
    one_segment(name).then_some(Route::Webhook(webhook_type, name))
}

/// The pingora HTTP app.
pub(crate) struct AdmissionApp {
    state: Arc<State>,
}

/// An HTTP app that answers each request with one complete response (pingora's `ServeHttp`,
/// served by `Served` so that a client going away is not an ERROR line).
///
/// A native `async fn` (not `async_trait`): the response future lives inside the connection's
/// future instead of in a box allocated, and copied into, per request (benches/README.md).
pub trait Respond: Send + Sync + 'static {
    /// The response to the request whose header `session` holds (its body not read yet).
    fn response(
        &self,
        session: &mut ServerSession,
    ) -> impl std::future::Future<Output = Response<Bytes>> + Send;

    /// Whether answers written now should close their connection (`Connection: close`)
    /// besides the listener's own shutdown; asked as each answer is written.
    fn closing(&self) -> bool {
        false
    }
}

/// Serves a [`Respond`] app on pingora's HTTP/1 sessions: what pingora does for `ServeHttp`,
/// except that a client that closes its connection, sends no request or stops reading is
/// logged at debug (it is the client's event: kube-apiserver gave up, not the proxy's error),
/// and that read deadlines are the connection's [`Watch`], not a pingora timer per read.
pub(crate) struct Served<A> {
    app: A,
    /// Requests from their header read to their answer written, for the shutdown.
    answering: Arc<InFlight>,
}

impl<A: Respond> Served<A> {
    /// One request on `http`: read it, answer it, and hand back the connection when it may
    /// carry another request.
    async fn serve_one(
        &self,
        mut http: ServerSession,
        watch: &Watch,
        shutdown: &watch::Receiver<bool>,
    ) -> Option<ReusableHttpStream> {
        // Keep-alive without pingora's own timers (Some(0) = no timeout): the connection's
        // Watch closes idle, trickling and slow connections.
        http.set_keepalive(Some(0));
        http.set_read_timeout(None);
        match http.read_request().await {
            Ok(true) => {}
            Ok(false) => return None,
            Err(e) => {
                close_unread(http, &e, watch).await;
                return None;
            }
        }
        if let Some(answer) = go_refusal(&http, watch) {
            crate::metrics::bad_request("framing");
            tracing::debug!(request = %Bounded(http.request_summary()), answer, "a request Go's server refuses; answered and closed");
            answer_and_close(http, answer, watch).await;
            return None;
        }
        watch.header_read();
        let _answering = self.answering.start();
        let (parts, body) = self.app.response(&mut http).await.into_parts();
        if http.is_body_done() {
            watch.writing();
        } else {
            // finish() drains what the app left unread, under a fresh body deadline.
            watch.header_read();
        }
        // Decided as the answer is written, as Go's `chunkWriter.writeHeader` asks
        // `Server.doKeepAlives` (`net/http/server.go`): once the shutdown began (or the app is
        // shutting down), the answer says `Connection: close` and the connection ends after
        // it. (pingora's `read_request` sets keep-alive from the request's own header.)
        if shutdown_began(shutdown) || self.app.closing() {
            http.set_keepalive(None);
        }
        if let Err(e) = write_answer(&mut http, parts.into(), body).await {
            tracing::debug!(error = %e, request = %Bounded(http.request_summary()), "client went away before the answer was written");
            return None;
        }
        let finished = http.finish().await;
        watch.answered();
        match finished {
            Ok(reusable) => reusable,
            Err(e) => {
                tracing::debug!(error = %e, "connection not reusable after the answer");
                None
            }
        }
    }
}

/// Whether the listener's shutdown began: without a lock (`borrow` takes the channel's), as
/// the only value ever sent is `true`. A dropped [`ServerHandle`] (which does not stop the
/// server) is no shutdown; after one, [`Answering`] keeps the sender.
fn shutdown_began(shutdown: &watch::Receiver<bool>) -> bool {
    shutdown.has_changed().unwrap_or(false)
}

/// Writes an answer's header, then its body (if any) as the last of the response.
///
/// # Errors
/// pingora's, when the client went away.
async fn write_answer(
    http: &mut ServerSession,
    header: ResponseHeader,
    body: Bytes,
) -> pingora::Result<()> {
    http.write_response_header(Box::new(header)).await?;
    if !body.is_empty() {
        http.write_response_body(body, true).await?;
    }
    Ok(())
}

/// A request that could not be read: answered as Go's `net/http` answers one it cannot frame
/// (then closed), or closed because a limit of the connection's [`Watch`] cut it off, or
/// because the client went away.
async fn close_unread(mut http: ServerSession, e: &pingora::Error, watch: &Watch) {
    if let Some(answer) = framing_answer(e, watch.closed()) {
        crate::metrics::bad_request("framing");
        tracing::debug!(error = %Bounded(e), answer, "request could not be framed; answered and closed");
        answer_and_close(http, answer, watch).await;
        return;
    }
    match watch.closed() {
        Some(why) => {
            tracing::debug!(reason = why.as_str(), "connection closed by a limit");
            http.shutdown().await;
        }
        None => {
            tracing::debug!(error = %Bounded(e), "connection closed before a complete request");
        }
    }
}

/// `answer`, as is, then the connection closes (Go's answers to requests it cannot serve),
/// within the write timeout.
async fn answer_and_close(http: ServerSession, answer: &str, watch: &Watch) {
    watch.writing();
    let dated;
    let answer = if answer.contains("{date}") {
        let date = pingora::protocols::http::date::get_cached_date();
        dated = answer.replace("{date}", date.to_str().unwrap_or_default());
        dated.as_str()
    } else {
        answer
    };
    if let ServerSession::H1(v1) = http {
        use tokio::io::AsyncWriteExt as _;
        let mut stream = v1.into_inner();
        let _ = stream.write_all(answer.as_bytes()).await;
        let _ = stream.flush().await;
        let _ = stream.shutdown().await;
    }
}

/// Go's `net/http` answer to a request header it cannot take (`server.go`, `conn.serve`): 431
/// when it is larger than the header limit, else 400; then the connection closes.
const GO_431: &str = "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n431 Request Header Fields Too Large";
const GO_400: &str = "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request";
/// Go's answer to a transfer coding it does not take (`conn.serve`, `isUnsupportedTEError`),
/// which does not echo the coding.
const GO_501: &str = "HTTP/1.1 501 Not Implemented\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\nUnsupported transfer encoding";
/// Go's answer to an HTTP/1.1 request without Host: `conn.readRequest`'s
/// `badRequestError("missing required Host header")`, a `statusError` written by `conn.serve`
/// with its text in the status line and the body.
const GO_NO_HOST: &str = "HTTP/1.1 400 Bad Request: missing required Host header\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request: missing required Host header";
/// Go's answer to a request with two Host headers: `conn.readRequest`'s
/// `badRequestError("too many Host headers")`, written as [`GO_NO_HOST`] is.
const GO_HOSTS: &str = "HTTP/1.1 400 Bad Request: too many Host headers\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request: too many Host headers";

/// Go's answer to a request pingora read but Go's server refuses, in Go's order: a request line
/// with a control character or a third space ([`GO_400`], `readRequest` in
/// `net/http/request.go`; pingora percent-escapes such a target and routes it); a
/// Transfer-Encoding sent twice or other than exactly `chunked` (any case) ([`GO_501`],
/// `transferReader.parseTransferEncoding` in `net/http/transfer.go`; pingora takes `gzip,
/// chunked` as chunked); no Host on HTTP/1.1 ([`GO_NO_HOST`], `conn.readRequest` in
/// `net/http/server.go`). `None` for a request Go serves.
fn go_refusal(http: &ServerSession, watch: &Watch) -> Option<&'static str> {
    if watch.request_line_refused() {
        return Some(GO_400);
    }
    let header = http.req_header();
    if let Some(answer) = go_target_refusal(header.raw_path(), &header.method) {
        return Some(answer);
    }
    let mut codings = header
        .headers
        .get_all(http::header::TRANSFER_ENCODING)
        .iter();
    if let Some(coding) = codings.next() {
        if codings.next().is_some() || !coding.as_bytes().eq_ignore_ascii_case(b"chunked") {
            return Some(GO_501);
        }
    }
    if header.version >= http::Version::HTTP_11
        && header.method != http::Method::CONNECT
        && !header.headers.contains_key(http::header::HOST)
    {
        return Some(GO_NO_HOST);
    }
    None
}

/// Go's `ServeMux` answer to the request target `*` (`ServeMux.ServeHTTP` in
/// `net/http/server.go`: `Connection: close` and a bare 400, which its server writes with a
/// `Date`): written by [`answer_and_close`] with the `Date` between (`{date}`).
const GO_ASTERISK: &str =
    "HTTP/1.1 400 Bad Request\r\nConnection: close\r\nDate: {date}\r\nContent-Length: 0\r\n\r\n";

/// Go's answer to a request target it does not route, in `readRequest`'s order
/// (`net/http/request.go`, `url.ParseRequestURI` in `net/url/url.go`): `*` parses, and
/// `ServeMux` answers it [`GO_ASTERISK`] (an `OPTIONS *` included: the proxy serves no
/// `globalOptionsHandler`); a target that is neither an absolute path nor an absolute URI
/// (`invalid URI for request`), or whose path has a `%` not followed by two hex digits
/// (`invalid URL escape`), fails `ParseRequestURI`: [`GO_400`]. A `CONNECT` target is an
/// authority and is not read here. `None` for a target Go routes.
fn go_target_refusal(target: &[u8], method: &http::Method) -> Option<&'static str> {
    if method == http::Method::CONNECT {
        return None;
    }
    if target == b"*" {
        return Some(GO_ASTERISK);
    }
    let path = match target.first() {
        Some(b'/') => target,
        _ => match uri_scheme_end(target) {
            // `scheme:` then the rest; only its path is unescaped at parse time.
            Some(end) => &target[end + 1..],
            None => return Some(GO_400),
        },
    };
    let path = path.split(|b| *b == b'?').next().unwrap_or_default();
    let mut bytes = path.iter();
    while let Some(b) = bytes.next() {
        if *b == b'%' {
            let hex = |b: Option<&u8>| b.is_some_and(u8::is_ascii_hexdigit);
            if !(hex(bytes.next()) && hex(bytes.next())) {
                return Some(GO_400);
            }
        }
    }
    None
}

/// Where an absolute URI's scheme ends (the index of its `:`), as Go's `getScheme` reads it
/// (`net/url/url.go`): a letter, then letters, digits, `+`, `-` or `.`, then `:`. `None`
/// when the target has no scheme.
fn uri_scheme_end(target: &[u8]) -> Option<usize> {
    for (i, b) in target.iter().enumerate() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i > 0 => {}
            b':' if i > 0 => return Some(i),
            _ => return None,
        }
    }
    None
}

/// The answer to a request whose header failed to read, as Go's server gives it: a header over
/// `--max-header-bytes` (the connection's limit tripped) or with more fields than pingora
/// parses gets [`GO_431`], a Transfer-Encoding whose last coding is not `chunked` [`GO_501`],
/// two Host headers [`GO_HOSTS`], any other header pingora cannot frame (two Content-Length
/// values, a malformed line) [`GO_400`]; `None` when there is nobody to answer (the client
/// went away, a timeout closed the connection).
fn framing_answer(e: &pingora::Error, closed: Option<Closed>) -> Option<&'static str> {
    match closed {
        Some(Closed::HeaderTooLarge) => return Some(GO_431),
        Some(_) => return None,
        None => {}
    }
    if *e.etype() != pingora::ErrorType::InvalidHTTPHeader {
        return None;
    }
    let cause = e.root_cause().to_string();
    let context = e
        .context
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default();
    if cause.contains("too many headers") || context.contains("header larger than") {
        Some(GO_431)
    } else if context.contains("non-chunked final Transfer-Encoding") {
        // `chunked, gzip`: pingora's refusal; Go's is 501, as for any coding but `chunked`.
        Some(GO_501)
    } else if context.contains("multiple Host header fields") {
        Some(GO_HOSTS)
    } else {
        Some(GO_400)
    }
}

/// A complete response with `Content-Type` and `Content-Length` (pingora's HTTP/1 session keeps
/// the connection alive only when the length is known). `body` is taken as it is: a `Vec<u8>`
/// without a copy, or `Bytes` shared with other answers (the `/metrics` render).
pub fn reply(status: u16, content_type: &'static str, body: impl Into<Bytes>) -> Response<Bytes> {
    use http::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
    let body = body.into();
    let length = HeaderValue::from(body.len());
    let mut response = Response::new(body);
    *response.status_mut() =
        http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CONTENT_LENGTH, length);
    response
}

fn status_reply(code: u16, reason: &'static str, message: String) -> Response<Bytes> {
    reply(
        code,
        "application/json",
        encode_status(&Status::failure(code, reason, message)),
    )
}

/// Which observation endpoints a listener serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Observations {
    /// `/livez`, `/healthz`, `/readyz`.
    pub(crate) health: bool,
    /// `/metrics`.
    pub(crate) metrics: bool,
}

impl Observations {
    /// Both, as the admission port serves them.
    pub(crate) const ALL: Observations = Observations {
        health: true,
        metrics: true,
    };
}

/// The answer to `GET path` when it is an observation endpoint `serves` includes.
fn observation(state: &State, path: &str, serves: Observations) -> Option<Response<Bytes>> {
    match path {
        "/healthz" | "/livez" if serves.health => Some(reply(200, "text/plain", b"ok".to_vec())),
        "/readyz" if serves.health => Some(match state.readiness() {
            Ok(()) => reply(200, "text/plain", b"ok".to_vec()),
            Err(reason) => reply(503, "text/plain", reason.as_bytes().to_vec()),
        }),
        "/metrics" if serves.metrics => Some(match &state.metrics {
            Some(scrapes) => reply(200, "text/plain; version=0.0.4", scrapes.body()),
            None => status_reply(404, "NotFound", "metrics are not enabled".into()),
        }),
        _ => None,
    }
}

/// The plain-HTTP listener for the kubelet's probes and Prometheus
/// (`--health-probe-bind-address`, `--metrics-bind-address`, as controller-runtime's managers
/// have them): the admission port may require client certificates (`--client-ca-file`),
/// which neither the kubelet nor a scraper presents. Serves only its [`Observations`]; every
/// other request is a 404.
pub(crate) struct ObservationApp {
    pub(crate) state: Arc<State>,
    pub(crate) serves: Observations,
}

impl Respond for ObservationApp {
    async fn response(&self, session: &mut ServerSession) -> Response<Bytes> {
        let header = session.req_header();
        let found = (header.method == "GET")
            .then(|| observation(&self.state, header.uri.path(), self.serves))
            .flatten();
        found.unwrap_or_else(|| {
            status_reply(
                404,
                "NotFound",
                format!("{} is not served here", Bounded(header.uri.path())),
            )
        })
    }
}

/// Serves [`ObservationApp`] on `listen`, plain HTTP.
///
/// # Errors
/// See [`serve`].
pub(crate) fn serve_observations(
    listen: SocketAddr,
    state: Arc<State>,
    serves: Observations,
) -> std::io::Result<ServerHandle> {
    let limits = Arc::new(Limits {
        max_connections: state.limits.max_connections.min(OBSERVATION_CONNECTIONS),
        max_header_bytes: state.limits.max_header_bytes.min(OBSERVATION_HEADER_BYTES),
        ..(*state.limits).clone()
    });
    serve(listen, None, ObservationApp { state, serves }, limits)
}

/// Connections a plain-HTTP probe or metrics listener keeps open at once (or
/// `--max-connections`, when lower); one more is closed at once, counted as the admission
/// port's are. The kubelet's probes and a scraper or two need a few; this bounds what clients
/// of those ports may hold.
pub const OBSERVATION_CONNECTIONS: usize = 64;

/// Bytes a request to a plain-HTTP probe or metrics listener may send before its header ends
/// (or `--max-header-bytes`, when lower); more is answered 431, as on the admission port. A
/// probe's or a scrape's header is a few hundred bytes: with [`OBSERVATION_CONNECTIONS`], what
/// headers may hold there is 1 MiB, not 64 MiB.
pub const OBSERVATION_HEADER_BYTES: usize = 16 * 1024;

impl Respond for AdmissionApp {
    /// From SIGTERM on, clients move to another endpoint for their next request.
    fn closing(&self) -> bool {
        self.state.shutting_down.load(Ordering::Relaxed)
    }

    async fn response(&self, session: &mut ServerSession) -> Response<Bytes> {
        let received = crate::clock::now();
        let _in_flight = self.state.request_started();
        let header = session.req_header();
        // Cloned, not copied into Strings: the body is read through `session` below. A
        // standard method is copied inline; the URI shares its bytes.
        let method = header.method.clone();
        let uri = header.uri.clone();
        let (path, query) = (uri.path(), uri.query().unwrap_or(""));
        if let Some(response) = self.before_body(&method, path) {
            return response;
        }
        let body = match read_body(session, self.state.max_body_bytes).await {
            Ok(body) => body,
            Err(e) => return self.body_refusal(session, e),
        };
        let Routed { route, review } = match resolve(&method, path, body) {
            ControlFlow::Continue(routed) => routed,
            ControlFlow::Break(response) => return response,
        };
        let headers = &session.req_header().headers;
        // Pinned where it is made: awaited as a temporary, the admission's (large) future
        // would be copied into this one's state.
        let admit = std::pin::pin!(self
            .state
            .admissions
            .admit(route, &review, query, headers, received));
        let answer = match admit.await {
            Ok(answer) => answer,
            Err(unknown) => return status_reply(404, "NotFound", unknown.to_string()),
        };
        let mut response = reply(answer.http_status, "application/json", answer.body);
        response.headers_mut().insert(
            DECISION_HEADER,
            http::HeaderValue::from_static(answer.decision.as_str()),
        );
        response
    }
}

impl AdmissionApp {
    /// The answer to a body that could not be read: 413 over `--max-body-bytes` (the
    /// connection kept when the rest was drained), 400 when reading failed (closed).
    fn body_refusal(&self, session: &mut ServerSession, e: BodyError) -> Response<Bytes> {
        match e {
            BodyError::TooLarge { drained } => {
                crate::metrics::bad_request("too_large");
                if !drained {
                    session.set_keepalive(None);
                }
                let max = self.state.max_body_bytes;
                let message = format!("request body is larger than {max} bytes");
                status_reply(413, "RequestEntityTooLarge", message)
            }
            BodyError::Read(e) => {
                session.set_keepalive(None);
                status_reply(
                    400,
                    "BadRequest",
                    format!("cannot read request body: {}", Bounded(e)),
                )
            }
        }
    }

    /// What is answered before the body is read: `/livez`, `/readyz`, `/metrics` on this
    /// port, and the 429 of `--max-requests-inflight` for an admission over the limit.
    fn before_body(&self, method: &http::Method, path: &str) -> Option<Response<Bytes>> {
        if method == "GET" {
            return observation(&self.state, path, Observations::ALL);
        }
        if method != "POST"
            || !(path.starts_with("/webhooks/") || path.starts_with("/configurations/"))
            || self.state.in_flight() <= self.state.limits.max_requests_inflight
        {
            return None;
        }
        // kube-apiserver's own max-in-flight answer; its webhook client waits Retry-After and
        // re-sends within its deadline (client-go's `checkWait`,
        // `staging/src/k8s.io/client-go/rest/with_retry.go`).
        crate::metrics::throttled();
        let mut response = status_reply(
            429,
            "TooManyRequests",
            format!(
                "Too many requests, please try again later: {} admissions are in flight (--max-requests-inflight)",
                self.state.limits.max_requests_inflight
            ),
        );
        response
            .headers_mut()
            .insert("Retry-After", http::HeaderValue::from_static("1"));
        Some(response)
    }
}

/// An admission request routed: its [`Route`] and the body parsed once (shared with work
/// after the answer).
struct Routed<'a> {
    route: Route<'a>,
    review: SharedReview,
}

/// The admission route and its AdmissionReview, or the answer: 404 for no route (a GET on an
/// admission route included), 405 for another method, 400 for a body that is not an
/// AdmissionReview.
fn resolve<'a>(
    method: &http::Method,
    path: &'a str,
    body: Bytes,
) -> ControlFlow<Response<Bytes>, Routed<'a>> {
    let Some(route) = parse_route(path) else {
        return ControlFlow::Break(status_reply(404, "NotFound", format!("no route for {}: admission requests go to POST /webhooks/{{validating|mutating}}/{{webhook name}}, /webhooks/{{webhook name}}, /configurations/{{validating|mutating}}/{{configuration name}} or /configurations/{{validating|mutating}}", Bounded(format_args!("{path:?}")))));
    };
    if method != "POST" {
        return ControlFlow::Break(status_reply(
            405,
            "MethodNotAllowed",
            format!(
                "{} is not allowed: send AdmissionReviews with POST",
                Bounded(&method)
            ),
        ));
    }
    match SharedReview::parse(body) {
        Ok(review) => ControlFlow::Continue(Routed { route, review }),
        Err(e) => {
            crate::metrics::bad_request("malformed");
            tracing::warn!(path = %Bounded(path), error = %Bounded(&e), "rejected a request that is not an AdmissionReview");
            ControlFlow::Break(status_reply(400, "BadRequest", Bounded(e).to_string()))
        }
    }
}

enum BodyError {
    /// `drained`: the rest of the body was read, so the connection can be reused.
    TooLarge {
        drained: bool,
    },
    Read(String),
}

async fn read_body(session: &mut ServerSession, limit: usize) -> Result<bytes::Bytes, BodyError> {
    // The length pingora frames the body by.
    let declared = pingora::protocols::http::v1::common::header_value_content_length(
        session.get_header(http::header::CONTENT_LENGTH),
    );
    if declared.is_some_and(|n| n > limit) {
        let drained = drain_for_413(session, declared).await;
        return Err(BodyError::TooLarge { drained });
    }
    let mut body = crate::dispatch::client::Body::default();
    while let Some(chunk) = session
        .read_request_body()
        .await
        .map_err(|e| BodyError::Read(e.to_string()))?
    {
        if body.len() + chunk.len() > limit {
            let drained = drain_for_413(session, declared).await;
            return Err(BodyError::TooLarge { drained });
        }
        body.push(chunk);
    }
    Ok(body.finish())
}

/// Reads and discards the rest of an oversized body so that the client reads the 413 rather
/// than a broken pipe. Bounded in size (16 MiB) and time (5 s); past that the connection is
/// closed. Returns whether the body was read to its end.
async fn drain_for_413(session: &mut ServerSession, declared: Option<usize>) -> bool {
    const MAX_DRAIN: usize = 16 * 1024 * 1024;
    if declared.is_some_and(|n| n > MAX_DRAIN) {
        return false;
    }
    let drain = async {
        let mut drained = 0usize;
        loop {
            match session.read_request_body().await {
                Ok(Some(chunk)) => {
                    drained += chunk.len();
                    if drained > MAX_DRAIN {
                        return false;
                    }
                }
                Ok(None) => return true,
                Err(_) => return false,
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(5), drain)
        .await
        .unwrap_or(false)
}

/// A running listener. Dropping it does not stop the server; call [`ServerHandle::shutdown`].
pub struct ServerHandle {
    /// The address actually bound (useful with port 0).
    pub local_addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    answering: Arc<InFlight>,
}

impl ServerHandle {
    /// Stops accepting connections and asks open ones to close after their current request
    /// (`Connection: close`); requests in flight go on (see `State::drained`). Returns the
    /// requests being answered, to wait until every answer is written (`Answering::written`).
    pub async fn shutdown(self) -> Answering {
        let _ = self.shutdown.send(true);
        let _ = self.task.await;
        Answering {
            in_flight: self.answering,
            _shutdown: self.shutdown,
        }
    }
}

/// A server's requests from their header read to their answer written; and its shutdown's
/// sender, kept so that the connections still open read the shutdown (`shutdown_began`).
pub struct Answering {
    in_flight: Arc<InFlight>,
    _shutdown: watch::Sender<bool>,
}

impl Answering {
    /// Waits until every request read so far has its answer written (or its client gone).
    pub(crate) async fn written(&self) {
        self.in_flight.idle().await;
    }
}

/// The listen backlog: connections the kernel completes before the accept loop takes them.
/// Go's `net.Listen` (what webhooks and kube-apiserver's peers are used to) asks for
/// `net.core.somaxconn` (4096 on current kernels); the kernel caps it there. Rust's standard
/// listener asks for 128, which a connect burst from kube-apiserver (one connection per
/// concurrent admission) overflowed: the overflow waits a SYN retry, a second or more.
pub(crate) const LISTEN_BACKLOG: u32 = 4096;

/// A listening socket on `listen` with [`LISTEN_BACKLOG`] and `SO_REUSEADDR` (as Rust's and
/// Go's listeners set it), registered with the current tokio runtime.
///
/// # Errors
/// The socket, bind or listen error, e.g. address in use.
pub(crate) fn bind(listen: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if listen.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(listen)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Serves `app` on `listen` (HTTPS with `tls`, else plain HTTP) inside the current tokio
/// runtime, within `limits`.
///
/// # Errors
/// The bind error, e.g. address in use.
pub fn serve<A: Respond>(
    listen: SocketAddr,
    tls: Option<Arc<rustls::ServerConfig>>,
    app: A,
    limits: Arc<Limits>,
) -> std::io::Result<ServerHandle> {
    let listener = bind(listen)?;
    let local_addr = listener.local_addr()?;
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let (tx, rx) = watch::channel(false);
    let served = Arc::new(Served {
        app,
        answering: Arc::default(),
    });
    let answering = served.answering.clone();
    let task = tokio::spawn(accept_loop(listener, acceptor, served, limits, rx));
    Ok(ServerHandle {
        local_addr,
        shutdown: tx,
        task,
        answering,
    })
}

async fn accept_loop<A: Respond>(
    listener: tokio::net::TcpListener,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    app: Arc<Served<A>>,
    limits: Arc<Limits>,
    mut shutdown: watch::Receiver<bool>,
) {
    let open = Arc::new(ConnectionCount::default());
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.wait_for(|stop| *stop) => return,
        };
        match accepted {
            Ok((tcp, peer)) => {
                let Some(slot) = open.acquire(limits.max_connections) else {
                    // Closed at once rather than left in the backlog: the client sees a reset
                    // and tries another endpoint; the count shows the cap was reached.
                    crate::metrics::connection_closed("max_connections");
                    tracing::debug!(%peer, max = limits.max_connections, "connection refused: --max-connections reached");
                    drop(tcp);
                    continue;
                };
                let _ = tcp.set_nodelay(true);
                let (acceptor, app, limits, shutdown) = (
                    acceptor.clone(),
                    app.clone(),
                    limits.clone(),
                    shutdown.clone(),
                );
                // The clock is read once per wake-up of the connection's task (crate::clock).
                tokio::spawn(crate::clock::Cached::new(async move {
                    connection(tcp, peer, acceptor, app, limits, shutdown).await;
                    drop(slot);
                }));
            }
            Err(e) => {
                // EMFILE and the like: accept() fails at once until a descriptor frees up.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Go's `net/http` answer to plain HTTP on a TLS port (server.go).
const PLAIN_HTTP_ON_TLS: &[u8] =
    b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";

/// One connection: TLS handshake (bounded by [`Limits::tls_handshake_timeout`]), then requests
/// until the client or the server closes it.
async fn connection<A: Respond>(
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    app: Arc<Served<A>>,
    limits: Arc<Limits>,
    shutdown: watch::Receiver<bool>,
) {
    let fd = std::os::fd::AsRawFd::as_raw_fd(&tcp);
    let (stream, watch): (pingora::protocols::Stream, _) = match acceptor {
        None => {
            let (io, watch) = ConnIo::new(tcp, limits);
            (Box::new(ServerStream::new(io, fd, watch.clone())), watch)
        }
        Some(acceptor) => match tls_handshake(tcp, peer, acceptor, limits, fd).await {
            Some(accepted) => accepted,
            None => return,
        },
    };
    let mut next = Some((stream, None::<bytes::BytesMut>));
    while let Some((stream, pipelined)) = next {
        // HTTP/1.1 pipelining (RFC 9112 §9.3.2): bytes of the next request read with this
        // one are handed to the next session, and requests are answered one after another in
        // order. Without it pingora closes the connection after the first answer and drops the
        // rest.
        let mut http = pingora::protocols::http::v1::server::HttpSession::new(stream);
        http.set_pipelining_enabled(true);
        match pipelined {
            Some(prefix) => {
                watch.request_line(&prefix[..]);
                if !prefix.is_empty() {
                    // Without this a partial header behind a complete request waited for the
                    // idle timeout: no further byte arrives to start the header deadline.
                    watch.pipelined();
                }
                http.set_pipelined_prefix(prefix);
            }
            None => watch.request_line(&[]),
        }
        next = app
            .serve_one(ServerSession::H1(http), &watch, &shutdown)
            .await
            .map(pingora::protocols::http::ReusableHttpStream::into_parts);
    }
}

/// The TLS handshake of a new connection, bounded by [`Limits::tls_handshake_timeout`]; `None`
/// when the connection ended there (plain HTTP answered as Go answers it, a failed or timed-out
/// handshake counted, or the client gone).
async fn tls_handshake(
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    acceptor: tokio_rustls::TlsAcceptor,
    limits: Arc<Limits>,
    fd: std::os::fd::RawFd,
) -> Option<(pingora::protocols::Stream, Arc<Watch>)> {
    let handshake_timeout = limits.tls_handshake_timeout;
    let handshake = async {
        // A TLS connection starts with a handshake record (0x16); anything else is a
        // client speaking plain HTTP (or nothing we understand) to the TLS port.
        let mut first = [0u8; 1];
        match tcp.peek(&mut first).await {
            Ok(1) if first[0] == 0x16 => {}
            Ok(1) => return Err(Handshake::PlainHttp(tcp)),
            _ => return Err(Handshake::Closed),
        }
        let (io, watch) = ConnIo::new(tcp, limits);
        acceptor
            .accept(io)
            .await
            .map(|tls| (tls, watch))
            .map_err(|e| Handshake::Failed(e.to_string()))
    };
    match tokio::time::timeout(handshake_timeout, handshake).await {
        Ok(Ok((tls, watch))) => Some((Box::new(ServerStream::new(tls, fd, watch.clone())), watch)),
        Ok(Err(Handshake::PlainHttp(mut tcp))) => {
            use tokio::io::AsyncWriteExt;
            crate::metrics::tls_handshake_failure("plain_http");
            tracing::debug!(%peer, "plain HTTP request on the TLS port; answered 400");
            let _ = tcp.write_all(PLAIN_HTTP_ON_TLS).await;
            let _ = tcp.shutdown().await;
            None
        }
        Ok(Err(Handshake::Closed)) => None,
        Ok(Err(Handshake::Failed(error))) => {
            // The client's problem (wrong CA, no client certificate, port scan): its
            // own logs say so; here it is counted and visible at debug.
            crate::metrics::tls_handshake_failure("error");
            tracing::debug!(%peer, %error, "TLS handshake failed");
            None
        }
        Err(_) => {
            crate::metrics::tls_handshake_failure("timeout");
            tracing::debug!(%peer, "TLS handshake timed out");
            None
        }
    }
}

enum Handshake {
    PlainHttp(tokio::net::TcpStream),
    Closed,
    Failed(String),
}

/// Serves the admission app on `listen` with `tls`.
///
/// # Errors
/// See [`serve`].
pub fn serve_admission(
    listen: SocketAddr,
    tls: Arc<rustls::ServerConfig>,
    state: Arc<State>,
) -> std::io::Result<ServerHandle> {
    let limits = state.limits.clone();
    serve(listen, Some(tls), AdmissionApp { state }, limits)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With Rust's default backlog of 128, connections the accept loop had not
    /// taken yet overflowed it and waited a SYN retry (1 s or more). Nothing accepts here, so
    /// every connection stays in the backlog; 300 complete at once (within the machine's
    /// `net.core.somaxconn`, 4096 on current kernels).
    #[tokio::test]
    async fn a_connect_burst_fits_the_backlog() {
        let listener = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut open = Vec::new();
        for i in 0..300 {
            let connect = tokio::net::TcpStream::connect(addr);
            match tokio::time::timeout(std::time::Duration::from_millis(500), connect).await {
                Ok(Ok(stream)) => open.push(stream),
                other => panic!("connection {i} did not complete at once: {other:?}"),
            }
        }
        assert_eq!(open.len(), 300);
    }

    #[test]
    fn routes() {
        use WebhookType::{Mutating, Validating};
        let cases = [
            ("/webhooks/a.b.c", Route::Webhook(None, "a.b.c")),
            (
                "/webhooks/mutating/a.b.c",
                Route::Webhook(Some(Mutating), "a.b.c"),
            ),
            (
                "/webhooks/validating/a.b.c",
                Route::Webhook(Some(Validating), "a.b.c"),
            ),
            ("/configurations/validating", Route::Chain(Validating, None)),
            (
                "/configurations/mutating/cfg",
                Route::Chain(Mutating, Some("cfg")),
            ),
        ];
        for (path, route) in cases {
            assert_eq!(parse_route(path), Some(route), "{path}");
        }
        for bad in [
            "/webhooks/",
            "/webhooks/other/a.b.c",
            "/webhooks/mutating/",
            "/x",
            "/webhooks/mutating/a/b",
            "/configurations/",
            "/configurations/other",
            "/configurations/mutating/",
            "/configurations/mutating/a/b",
        ] {
            assert_eq!(parse_route(bad), None, "{bad}");
        }
    }
}
