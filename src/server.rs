//! The HTTPS server kube-apiserver calls: pingora's HTTP server app on a listener the proxy
//! binds itself (so `--listen 127.0.0.1:0` works), routing `POST /webhooks/{name}` to
//! [`Dispatcher::admit`] on a lock-free config snapshot. Also `/healthz`, `/readyz` and
//! `/metrics`. Depends on `config`, `matching`, `dispatch`, `review`, `metrics`, `tls`.

use std::net::{SocketAddr, TcpListener};
use std::os::fd::IntoRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::{ArcSwap, ArcSwapOption};
use async_trait::async_trait;
use http::Response;
use metrics_exporter_prometheus::PrometheusHandle;
use pingora::apps::http_app::ServeHttp;
use pingora::listeners::tls::TlsSettings;
use pingora::protocols::http::ServerSession;
use pingora::server::Fds;
use pingora::services::listening::Service;
use pingora::services::Service as _;
use tokio::sync::watch;

use crate::config::Snapshot;
use crate::dispatch::{parse_go_duration, Decision, Dispatcher};
use crate::matching::Namespaces;
use crate::review::{encode_status, ParsedReview, Status};
use crate::tls::CertResolver;

/// Default request body limit: kube-apiserver's own 3 MiB (dispatch notes §4).
pub const DEFAULT_MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Response header naming the proxy's decision (`skipped`, `allowed`, `denied`, `failed-open`,
/// `failed-closed`, `rejected-dry-run`, `rejected`); kube-apiserver ignores it, people debugging don't.
pub const DECISION_HEADER: &str = "x-admission-proxy-decision";

/// What the request path reads; swapped (never locked) on reload.
pub struct State {
    pub config: ArcSwap<Snapshot>,
    /// Namespace labels from `--namespaces-file`; `None` when no file was given.
    pub namespaces: ArcSwapOption<Namespaces>,
    pub dispatcher: Dispatcher,
    /// Request bodies larger than this get 413.
    pub max_body_bytes: usize,
    pub metrics: Option<PrometheusHandle>,
}

impl State {
    /// State serving `config`.
    pub fn new(
        config: Snapshot,
        namespaces: Option<Namespaces>,
        dispatcher: Dispatcher,
        max_body_bytes: usize,
    ) -> Self {
        State {
            config: ArcSwap::from_pointee(config),
            namespaces: ArcSwapOption::new(namespaces.map(Arc::new)),
            dispatcher,
            max_body_bytes,
            metrics: None,
        }
    }
}

/// The pingora HTTP app.
pub struct AdmissionApp {
    state: Arc<State>,
}

/// A complete response with `Content-Type` and `Content-Length` (pingora's `ServeHttp` keeps
/// the connection alive only when the length is known).
pub fn reply(status: u16, content_type: &str, body: Vec<u8>) -> Response<Vec<u8>> {
    Response::builder()
        .status(status)
        .header("Content-Type", content_type)
        .header("Content-Length", body.len())
        .body(body)
        .unwrap_or_else(|_| Response::new(Vec::new()))
}

fn status_reply(code: u16, reason: &'static str, message: String) -> Response<Vec<u8>> {
    reply(
        code,
        "application/json",
        encode_status(&Status::failure(code, reason, message)),
    )
}

#[async_trait]
impl ServeHttp for AdmissionApp {
    async fn response(&self, session: &mut ServerSession) -> Response<Vec<u8>> {
        let received = Instant::now();
        // A slow client must not hold a worker forever.
        session.set_read_timeout(Some(Duration::from_secs(30)));
        let header = session.req_header();
        let method = header.method.as_str().to_string();
        let path = header.uri.path().to_string();
        let query = header.uri.query().unwrap_or("").to_string();
        match (method.as_str(), path.as_str()) {
            ("GET", "/healthz" | "/readyz" | "/livez") => {
                return reply(200, "text/plain", b"ok".to_vec())
            }
            ("GET", "/metrics") => {
                return match &self.state.metrics {
                    Some(h) => reply(200, "text/plain; version=0.0.4", h.render().into_bytes()),
                    None => status_reply(404, "NotFound", "metrics are not enabled".into()),
                }
            }
            _ => {}
        }
        let body = match read_body(session, self.state.max_body_bytes).await {
            Ok(body) => body,
            Err(BodyError::TooLarge { drained }) => {
                crate::metrics::bad_request("too_large");
                if !drained {
                    session.set_keepalive(None);
                }
                return status_reply(
                    413,
                    "RequestEntityTooLarge",
                    format!(
                        "request body is larger than {} bytes",
                        self.state.max_body_bytes
                    ),
                );
            }
            Err(BodyError::Read(e)) => {
                session.set_keepalive(None);
                return status_reply(400, "BadRequest", format!("cannot read request body: {e}"));
            }
        };
        let Some(name) = path
            .strip_prefix("/webhooks/")
            .filter(|n| !n.is_empty() && !n.contains('/'))
        else {
            return status_reply(404, "NotFound", format!("no route for {path:?}: admission requests go to POST /webhooks/{{webhook name}}"));
        };
        if method != "POST" {
            return status_reply(
                405,
                "MethodNotAllowed",
                format!("{method} is not allowed: send AdmissionReviews with POST"),
            );
        }
        let review = match ParsedReview::parse(&body) {
            Ok(r) => r,
            Err(e) => {
                crate::metrics::bad_request("malformed");
                tracing::warn!(webhook = name, error = %e, "rejected a request that is not an AdmissionReview");
                return status_reply(400, "BadRequest", e.to_string());
            }
        };
        let config = self.state.config.load();
        let Some(webhook) = config.webhook(name) else {
            crate::metrics::bad_request("unknown_webhook");
            return status_reply(404, "NotFound", format!("no webhook {name:?} is configured (routes are /webhooks/{{name}} for the webhook names in the config)"));
        };
        let caller_timeout = query
            .split('&')
            .find_map(|kv| kv.strip_prefix("timeout="))
            .and_then(parse_go_duration);
        let namespaces = self.state.namespaces.load();
        let answer = self
            .state
            .dispatcher
            .admit(
                webhook,
                &review,
                namespaces.as_deref(),
                caller_timeout,
                received,
            )
            .await;
        let latency = received.elapsed();
        let request = &review.request;
        let resource = request.effective_resource();
        let sub = request.effective_sub_resource();
        // One line per admission: denials, failures and rejections at info; the everyday
        // allowed/skipped at debug (at 2000 req/s, info lines for those cost ~8% of the CPU).
        macro_rules! admission_event {
            ($level:expr) => { tracing::event!($level,
            uid = %request.uid,
            webhook = %webhook.name,
            operation = review.operation.as_str(),
            resource = %format_args!("{}{}{}/{}{}{}", resource.group, if resource.group.is_empty() { "" } else { "/" }, resource.version, resource.resource, if sub.is_empty() { "" } else { "/" }, sub),
            object = %format_args!("{}{}{}", request.namespace, if request.namespace.is_empty() { "" } else { "/" }, request.name),
            decision = answer.decision.as_str(),
            latency_ms = latency.as_secs_f64() * 1000.0,
            detail = %answer.detail,
            "admission"
        ) };
        }
        match answer.decision {
            Decision::Allowed | Decision::Skipped => admission_event!(tracing::Level::DEBUG),
            _ => admission_event!(tracing::Level::INFO),
        }
        tracing::trace!(uid = %request.uid, body = %String::from_utf8_lossy(review.body()), "admission request body");
        crate::metrics::admission(
            &webhook.name,
            webhook.webhook_type.as_str(),
            review.operation.as_str(),
            answer.decision.as_str(),
            latency,
        );
        let mut response = reply(answer.http_status, "application/json", answer.body);
        if let Ok(v) = http::HeaderValue::from_str(answer.decision.as_str()) {
            response.headers_mut().insert(DECISION_HEADER, v);
        }
        response
    }
}

enum BodyError {
    /// `drained`: the rest of the body was read, so the connection can be reused.
    TooLarge {
        drained: bool,
    },
    Read(String),
}

async fn read_body(session: &mut ServerSession, limit: usize) -> Result<Vec<u8>, BodyError> {
    let declared = session
        .get_header("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        let drained = drain_for_413(session, declared).await;
        return Err(BodyError::TooLarge { drained });
    }
    let mut body = Vec::with_capacity(declared.unwrap_or(0));
    while let Some(chunk) = session
        .read_request_body()
        .await
        .map_err(|e| BodyError::Read(e.to_string()))?
    {
        if body.len() + chunk.len() > limit {
            let drained = drain_for_413(session, declared).await;
            return Err(BodyError::TooLarge { drained });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
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
}

impl ServerHandle {
    /// Stops accepting; connections in flight finish their current request.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let _ = self.task.await;
    }
}

/// Serves `app` on `listen`, over TLS when `tls` is given, inside the current tokio runtime.
///
/// # Errors
/// The bind error, e.g. address in use.
pub fn serve<A: ServeHttp + Send + Sync + 'static>(
    listen: SocketAddr,
    tls: Option<Arc<CertResolver>>,
    app: A,
) -> std::io::Result<ServerHandle> {
    // Bind here rather than in pingora so that port 0 can be reported; pingora adopts the
    // socket through its listen-fd table.
    let listener = TcpListener::bind(listen)?;
    listener.set_nonblocking(true)?;
    let local_addr = listener.local_addr()?;
    let addr = local_addr.to_string();
    let mut fds = Fds::new();
    fds.add(addr.clone(), listener.into_raw_fd());
    let mut service = Service::new(format!("admission-proxy {addr}"), app);
    match tls {
        Some(resolver) => {
            let mut settings = TlsSettings::intermediate("", "")
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            settings.set_cert_resolver(resolver);
            service.add_tls_with_settings(&addr, None, settings);
        }
        None => service.add_tcp(&addr),
    }
    let (tx, rx) = watch::channel(false);
    let fds = Arc::new(parking_lot::Mutex::new(fds));
    let task = tokio::spawn(async move {
        service.start_service(Some(fds), rx, 1).await;
    });
    Ok(ServerHandle {
        local_addr,
        shutdown: tx,
        task,
    })
}

/// Serves the admission app on `listen` with `tls`.
///
/// # Errors
/// See [`serve`].
pub fn serve_admission(
    listen: SocketAddr,
    tls: Arc<CertResolver>,
    state: Arc<State>,
) -> std::io::Result<ServerHandle> {
    serve(listen, Some(tls), AdmissionApp { state })
}
