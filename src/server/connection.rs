//! One client connection below HTTP: the listener's limits (connection count, TLS handshake,
//! request header, request body and keep-alive idle timeouts, header size) and the socket
//! wrapper that enforces them, and the stream pingora's HTTP session works on (TLS straight over
//! that wrapper, each answer one TLS record and one write). Depends on `metrics`.
//!
//! kube-apiserver's own server bounds the same things (Go's `http.Server` `ReadHeaderTimeout`,
//! `IdleTimeout`, `MaxHeaderBytes`; its max in-flight filter answers 429 + `Retry-After`), and
//! the proxy sits on a Service any pod can reach, so none of them may be unbounded.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use pingora::protocols::raw_connect::ProxyDigest;
use pingora::protocols::{
    GetProxyDigest, GetSocketDigest, GetTimingDigest, Peek, Shutdown, SocketDigest, Ssl,
    TimingDigest, UniqueID, UniqueIDType,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
// tokio's clock, so that tests with paused time see deadlines move.
use tokio::time::{Instant, Sleep};

/// The listener's limits. Durations are wall-clock; sizes are bytes. [`Limits::default`] gives
/// the documented defaults of the `serve` flags.
#[derive(Clone, Debug)]
pub struct Limits {
    /// From accepting a connection to the end of its TLS handshake (`--tls-handshake-timeout`).
    pub tls_handshake_timeout: Duration,
    /// From a request's first byte to the end of its header (`--request-header-timeout`): a
    /// client trickling a header is closed here.
    pub header_timeout: Duration,
    /// From the end of a request's header to the end of its body (`--request-body-timeout`).
    pub body_timeout: Duration,
    /// From the answer being ready to its last byte taken by the socket
    /// (`--write-timeout-seconds`): a client that stops reading is closed here, and the
    /// answer's memory freed.
    pub write_timeout: Duration,
    /// How long a keep-alive connection may wait for its next request (`--idle-timeout`).
    /// Longer than the 90 s kube-apiserver's client keeps idle connections (client-go's
    /// transport defaults), so the proxy never closes a connection kube-apiserver is about to
    /// reuse.
    pub idle_timeout: Duration,
    /// Bytes a request may send before its header is complete (`--max-header-bytes`), counted
    /// as received (TLS framing included; the check runs after each read of at most ~16 KiB).
    pub max_header_bytes: usize,
    /// Open client connections (`--max-connections`); one more is closed at once, counted.
    pub max_connections: usize,
    /// Admissions being answered at once (`--max-requests-inflight`); one more is answered 429
    /// with `Retry-After: 1`, which kube-apiserver's webhook client retries within its deadline.
    pub max_requests_inflight: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            tls_handshake_timeout: Duration::from_secs(10),
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            // Go's http.DefaultMaxHeaderBytes, which kube-apiserver's server keeps.
            max_header_bytes: 1 << 20,
            max_connections: 4096,
            max_requests_inflight: 1000,
        }
    }
}

/// Why the proxy closed a connection, for `admission_proxy_connections_closed_total{reason}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Closed {
    /// Idle between requests longer than the idle timeout.
    IdleTimeout = 1,
    /// A request's header took longer than the header timeout.
    HeaderTimeout = 2,
    /// A request's body took longer than the body timeout.
    BodyTimeout = 3,
    /// A request's header was larger than allowed.
    HeaderTooLarge = 4,
    /// The client did not read the answer within the write timeout.
    WriteTimeout = 5,
}

impl Closed {
    /// The metric label.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Closed::IdleTimeout => "idle_timeout",
            Closed::HeaderTimeout => "header_timeout",
            Closed::BodyTimeout => "body_timeout",
            Closed::HeaderTooLarge => "header_too_large",
            Closed::WriteTimeout => "write_timeout",
        }
    }

    fn from_u8(v: u8) -> Option<Closed> {
        [
            Closed::IdleTimeout,
            Closed::HeaderTimeout,
            Closed::BodyTimeout,
            Closed::HeaderTooLarge,
            Closed::WriteTimeout,
        ]
        .into_iter()
        .find(|c| *c as u8 == v)
    }
}

/// Where a connection is in its request cycle, which decides its read deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Phase {
    /// Waiting for the next request: [`Limits::idle_timeout`].
    Idle = 0,
    /// A request's first bytes arrived: [`Limits::header_timeout`] from then.
    Header = 1,
    /// Header complete, body being read: [`Limits::body_timeout`].
    Body = 2,
    /// Writing the answer: [`Limits::write_timeout`] for the socket to take it.
    Write = 4,
}

/// A connection's phase and read deadline, shared by the HTTP loop (which knows where a request
/// starts and ends) and the socket wrapper (which sees bytes arrive). Both run in the
/// connection's one task; atomics only because the wrapper lives behind pingora's `Box<dyn IO>`.
#[derive(Debug)]
pub(crate) struct Watch {
    base: Instant,
    phase: AtomicU8,
    /// Nanoseconds after `base`; 0 = none.
    deadline: AtomicU64,
    header_bytes: AtomicUsize,
    closed: AtomicU8,
    /// The request line's scan ([`Line`]), fed by [`ServerStream`]'s reads.
    line: AtomicU8,
    limits: Arc<Limits>,
}

/// The scan of a request line as Go's `readRequest` takes it (`net/http/request.go`:
/// `parseRequestLine` cuts the line at its first two spaces, `ParseHTTPVersion` refuses a
/// version with a space in it, `url.ParseRequestURI` a target with an ASCII control character,
/// and `validMethod` a method with one): a control character anywhere in the line, or a third
/// space, is Go's 400. pingora percent-escapes such a target and routes it, so the proxy looks
/// at the bytes as they arrive: once per request, up to the line's end.
///
/// A state of [`Watch::line`]: `SCANNING` with the spaces seen (low bits) and `CR` when the last
/// byte was a carriage return (allowed only before the line feed), or `DONE` or `REFUSED`.
struct Line;

impl Line {
    const DONE: u8 = 0;
    const SCANNING: u8 = 0x40;
    const CR: u8 = 0x20;
    const SPACES: u8 = 0x03;
    const REFUSED: u8 = 0x80;

    /// The state after `bytes` of the line, from `state`.
    fn scan(mut state: u8, bytes: &[u8]) -> u8 {
        for &b in bytes {
            if state & Line::CR != 0 {
                return if b == b'\n' {
                    Line::DONE
                } else {
                    Line::REFUSED
                };
            }
            match b {
                b'\n' => return Line::DONE,
                b'\r' => state |= Line::CR,
                b' ' if state & Line::SPACES == 2 => return Line::REFUSED,
                b' ' => state += 1,
                0..=0x1f | 0x7f => return Line::REFUSED,
                _ => {}
            }
        }
        state
    }
}

impl Watch {
    fn new(limits: Arc<Limits>) -> Self {
        let watch = Watch {
            base: Instant::now(),
            phase: AtomicU8::new(Phase::Idle as u8),
            deadline: AtomicU64::new(0),
            header_bytes: AtomicUsize::new(0),
            closed: AtomicU8::new(0),
            line: AtomicU8::new(Line::DONE),
            limits,
        };
        watch.enter(Phase::Idle);
        watch
    }

    fn enter(&self, phase: Phase) {
        let timeout = match phase {
            Phase::Idle => Some(self.limits.idle_timeout),
            Phase::Header => Some(self.limits.header_timeout),
            Phase::Body => Some(self.limits.body_timeout),
            Phase::Write => Some(self.limits.write_timeout),
        };
        self.phase.store(phase as u8, Ordering::Relaxed);
        let deadline = timeout.map_or(0, |t| {
            // At least 1 ns so that 0 keeps meaning "none".
            (crate::clock::since(self.base) + t)
                .as_nanos()
                .min(u64::MAX as u128) as u64
                | 1
        });
        self.deadline.store(deadline, Ordering::Relaxed);
    }

    /// Bytes of the next request were read with the previous one (HTTP/1.1 pipelining): its
    /// header deadline starts now, as Go's `conn.serve` starts `ReadHeaderTimeout` at each
    /// `readRequest` (`net/http/server.go`), not when further bytes arrive. Those bytes are
    /// not counted against the header size again.
    pub(crate) fn pipelined(&self) {
        if self.phase.load(Ordering::Relaxed) == Phase::Idle as u8 {
            self.enter(Phase::Header);
        }
    }

    /// A request starts on this connection: its request line is scanned from here
    /// (`already`: bytes of it read with the previous request, pipelined).
    pub(crate) fn request_line(&self, already: &[u8]) {
        let state = Line::scan(Line::SCANNING, already);
        self.line.store(state, Ordering::Relaxed);
    }

    /// Bytes of a request arrived (above TLS): scanned while its request line is not done.
    fn read(&self, bytes: &[u8]) {
        let state = self.line.load(Ordering::Relaxed);
        if state & Line::SCANNING != 0 {
            self.line.store(Line::scan(state, bytes), Ordering::Relaxed);
        }
    }

    /// Whether the request line read has what Go's server refuses with 400 ([`Line`]).
    pub(crate) fn request_line_refused(&self) -> bool {
        self.line.load(Ordering::Relaxed) == Line::REFUSED
    }

    /// The request header was read: the body deadline starts.
    pub(crate) fn header_read(&self) {
        self.enter(Phase::Body);
    }

    /// The answer is ready: the socket must take it within [`Limits::write_timeout`].
    pub(crate) fn writing(&self) {
        self.enter(Phase::Write);
    }

    /// Whether an answer is being written (its deadline bounds writes, not reads).
    fn writing_now(&self) -> bool {
        self.phase.load(Ordering::Relaxed) == Phase::Write as u8
    }

    /// The answer was written: the connection waits for its next request.
    pub(crate) fn answered(&self) {
        self.header_bytes.store(0, Ordering::Relaxed);
        self.enter(Phase::Idle);
    }

    /// Why the connection was closed by a limit, if it was.
    pub(crate) fn closed(&self) -> Option<Closed> {
        Closed::from_u8(self.closed.load(Ordering::Relaxed))
    }

    fn deadline(&self) -> Option<Instant> {
        match self.deadline.load(Ordering::Relaxed) {
            0 => None,
            ns => Some(self.base + Duration::from_nanos(ns)),
        }
    }

    /// Bytes arrived: an idle connection starts a request; a header too large trips.
    fn received(&self, n: usize) -> io::Result<()> {
        let phase = self.phase.load(Ordering::Relaxed);
        if phase == Phase::Idle as u8 {
            self.enter(Phase::Header);
        } else if phase != Phase::Header as u8 {
            return Ok(());
        }
        let total = self.header_bytes.fetch_add(n, Ordering::Relaxed) + n;
        if total > self.limits.max_header_bytes {
            return Err(self.trip(Closed::HeaderTooLarge));
        }
        Ok(())
    }

    /// Records why the connection is being closed (`connections_closed_total{reason}`, counted
    /// here, once) and the error that closes it.
    fn trip(&self, why: Closed) -> io::Error {
        if self.closed.swap(why as u8, Ordering::Relaxed) == 0 {
            crate::metrics::connection_closed(why.as_str());
        }
        let kind = match why {
            Closed::HeaderTooLarge => io::ErrorKind::InvalidData,
            _ => io::ErrorKind::TimedOut,
        };
        io::Error::new(kind, why.as_str())
    }

    fn timed_out(&self) -> io::Error {
        let why = match self.phase.load(Ordering::Relaxed) {
            p if p == Phase::Idle as u8 => Closed::IdleTimeout,
            p if p == Phase::Header as u8 => Closed::HeaderTimeout,
            p if p == Phase::Write as u8 => Closed::WriteTimeout,
            _ => Closed::BodyTimeout,
        };
        self.trip(why)
    }
}

/// Answers are at most this many bytes ahead of the socket before a write waits for it.
const MAX_PENDING_WRITE: usize = 64 * 1024;

/// The client's TCP socket under TLS (or under [`ServerStream`] directly, plain): reads fail at
/// the phase's deadline (see [`Watch`]).
///
/// The deadline timer is armed lazily: only when a read would wait, and re-armed only when the
/// deadline moved earlier or the timer fired early, so a busy connection costs no timer work
/// per request.
#[derive(Debug)]
pub(crate) struct ConnIo {
    tcp: TcpStream,
    watch: Arc<Watch>,
    timer: Option<Pin<Box<Sleep>>>,
    timer_at: Option<Instant>,
}

impl ConnIo {
    /// Wraps an accepted socket; returns it with the shared [`Watch`] for the HTTP loop.
    pub(crate) fn new(tcp: TcpStream, limits: Arc<Limits>) -> (Self, Arc<Watch>) {
        let watch = Arc::new(Watch::new(limits));
        let io = ConnIo {
            tcp,
            watch: watch.clone(),
            timer: None,
            timer_at: None,
        };
        (io, watch)
    }

    /// Pending while the deadline has not passed (the timer will wake the task), an error once
    /// it has.
    fn poll_deadline(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Two rounds at most: a timer that fired early is re-armed once at the real deadline.
        for _ in 0..2 {
            let Some(deadline) = self.watch.deadline() else {
                return Poll::Pending;
            };
            // A timer armed at or before the deadline fires first: no clock read (one per
            // request, on the idle read after each answer) until it has.
            let armed = self.timer.is_some() && self.timer_at.is_some_and(|at| at <= deadline);
            if !armed {
                if crate::clock::now() >= deadline {
                    return Poll::Ready(Err(self.watch.timed_out()));
                }
                match &mut self.timer {
                    Some(timer) => timer.as_mut().reset(deadline),
                    None => self.timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
                }
                self.timer_at = Some(deadline);
            }
            let Some(timer) = self.timer.as_mut() else {
                return Poll::Pending;
            };
            match timer.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                // Fired: at the deadline, or at an older, earlier one (re-armed next round).
                Poll::Ready(()) => self.timer_at = None,
            }
        }
        Poll::Pending
    }
}

impl ConnIo {
    /// A write the socket could not take now, while an answer is written, waits for the write
    /// timeout, then fails: a client that stops reading is closed. Other writes (TLS records
    /// outside an answer) are not bounded.
    fn write_deadline(
        &mut self,
        cx: &mut Context<'_>,
        written: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        match written {
            Poll::Pending if !self.watch.writing_now() => Poll::Pending,
            Poll::Pending => match self.poll_deadline(cx) {
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                _ => Poll::Pending,
            },
            ready => ready,
        }
    }
}

impl AsyncRead for ConnIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.tcp).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let n = buf.filled().len() - before;
                if n > 0 {
                    this.watch.received(n)?;
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            // While the answer is written no read is bounded (the write timeout is the
            // writes'); pingora's drain after an answer must not arm the write deadline's timer.
            Poll::Pending if this.watch.writing_now() => Poll::Pending,
            Poll::Pending => match this.poll_deadline(cx) {
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                _ => Poll::Pending,
            },
        }
    }
}

// Writes go straight to the socket: [`ServerStream`], above TLS, holds an answer until its
// flush, and TLS hands over its records in one vectored write.
impl AsyncWrite for ConnIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.tcp).poll_write(cx, buf);
        this.write_deadline(cx, written)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let tcp = &mut this.tcp;
        let written = match bufs {
            // An answer is one TLS record, which rustls hands over as one buffer: `send` costs
            // less in the kernel than `writev` (benches/README.md, "The server's own stream").
            [one] => Pin::new(tcp).poll_write(cx, one),
            _ => Pin::new(tcp).poll_write_vectored(cx, bufs),
        };
        this.write_deadline(cx, written)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}

/// Bytes written but held until a flush, or until [`MAX_PENDING_WRITE`] of them wait, then
/// handed to the layer below in as few writes as it takes. A write that would take the held
/// bytes past [`MAX_PENDING_WRITE`] hands them over first, and one larger than that goes
/// through as the layer below takes it: a large answer (a `/metrics` scrape of megabytes) is
/// never copied here whole, so a client that does not read pins at most
/// [`MAX_PENDING_WRITE`] of it here (and what TLS buffers below, 64 KiB by default).
#[derive(Debug, Default)]
struct Held {
    out: Vec<u8>,
    written: usize,
}

impl Held {
    /// Hands `below` everything held; Ready once it took all of it.
    fn poll_drain<W: AsyncWrite + Unpin>(
        &mut self,
        below: &mut W,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        while self.written < self.out.len() {
            match Pin::new(&mut *below).poll_write(cx, &self.out[self.written..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => self.written += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        self.written = 0;
        if self.out.capacity() > MAX_PENDING_WRITE {
            // A large answer (a big patch) does not keep its buffer for the connection's life.
            self.out = Vec::new();
        } else {
            self.out.clear();
        }
        Poll::Ready(Ok(()))
    }

    /// Holds `bufs`, all of them, while what is held stays within [`MAX_PENDING_WRITE`] (an
    /// answer that small leaves in one piece at the flush); else hands over what is held, then
    /// holds `bufs` if they fit, or writes them through, as much as `below` takes now.
    fn poll_hold<W: AsyncWrite + Unpin>(
        &mut self,
        below: &mut W,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let n: usize = bufs.iter().map(|b| b.len()).sum();
        if self.out.len() + n > MAX_PENDING_WRITE {
            ready!(self.poll_drain(below, cx))?;
            if n > MAX_PENDING_WRITE {
                return Pin::new(below).poll_write_vectored(cx, bufs);
            }
        }
        for b in bufs {
            self.out.extend_from_slice(b);
        }
        Poll::Ready(Ok(n))
    }
}

/// What pingora's HTTP/1 session reads and writes for one client connection: [`ConnIo`], in
/// TLS (rustls, through `tokio-rustls`) or plain, with nothing between them and the session.
///
/// Not pingora's L4 and TLS stream wrappers: they read the clock around every read and write,
/// build timing digests per request and add two layers of dynamic dispatch
/// (benches/README.md, "The server's own stream"). Writes are held here, above TLS, until a
/// flush, so that an answer's header and body become one TLS record: one seal for the proxy,
/// one record for kube-apiserver to open, and one `write` to the socket (benches/README.md:
/// one `writev` fewer per admission).
#[derive(Debug)]
pub(crate) struct ServerStream<S> {
    inner: S,
    held: Held,
    /// The socket's descriptor, pingora's connection id.
    fd: i32,
    /// The connection's [`Watch`], which scans each request line as it is read.
    watch: Arc<Watch>,
}

impl<S> ServerStream<S> {
    /// `inner` over the accepted socket whose descriptor is `fd`, watched by `watch`.
    pub(crate) fn new(inner: S, fd: i32, watch: Arc<Watch>) -> Self {
        ServerStream {
            inner,
            held: Held::default(),
            fd,
            watch,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for ServerStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        this.watch.read(&buf.filled()[before..]);
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for ServerStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.held
            .poll_hold(&mut this.inner, cx, &[io::IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.held.poll_hold(&mut this.inner, cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.held.poll_drain(&mut this.inner, cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.held.poll_drain(&mut this.inner, cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

// pingora's `IO` bound. What its session asks of a client stream beyond reading and writing
// is identification and digests for its own logs, which the proxy does not use: none here.

impl<S: AsyncWrite + Unpin + Send> Shutdown for ServerStream<S> {
    // pingora declares this with `async_trait`; the same signature, written out.
    fn shutdown<'life0, 'async_trait>(
        &'life0 mut self,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            let _ = tokio::io::AsyncWriteExt::shutdown(self).await;
        })
    }
}

impl<S> UniqueID for ServerStream<S> {
    fn id(&self) -> UniqueIDType {
        self.fd
    }
}

impl<S> Ssl for ServerStream<S> {}

impl<S> Peek for ServerStream<S> {}

impl<S> GetTimingDigest for ServerStream<S> {
    fn get_timing_digest(&self) -> Vec<Option<TimingDigest>> {
        Vec::new()
    }
}

impl<S> GetProxyDigest for ServerStream<S> {
    fn get_proxy_digest(&self) -> Option<Arc<ProxyDigest>> {
        None
    }
}

impl<S> GetSocketDigest for ServerStream<S> {
    fn get_socket_digest(&self) -> Option<Arc<SocketDigest>> {
        None
    }
}

/// Open client connections, against [`Limits::max_connections`].
#[derive(Debug, Default)]
pub(crate) struct ConnectionCount(AtomicUsize);

/// Holds one of [`ConnectionCount`]'s places until dropped.
#[derive(Debug)]
pub(crate) struct ConnectionSlot(Arc<ConnectionCount>);

impl ConnectionCount {
    /// A place for one more connection, `None` at `max`.
    pub(crate) fn acquire(self: &Arc<Self>, max: usize) -> Option<ConnectionSlot> {
        let mut now = self.0.load(Ordering::Relaxed);
        loop {
            if now >= max {
                return None;
            }
            match self
                .0
                .compare_exchange_weak(now, now + 1, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => {
                    crate::metrics::connections_open(now + 1);
                    return Some(ConnectionSlot(self.clone()));
                }
                Err(actual) => now = actual,
            }
        }
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let before = self.0 .0.fetch_sub(1, Ordering::AcqRel);
        crate::metrics::connections_open(before - 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A small answer's held buffer is kept for the next answer; a large answer goes through,
    /// after what was held, and never grows it.
    #[tokio::test]
    async fn a_large_answer_goes_through_and_a_small_ones_buffer_is_kept() {
        let watch = Arc::new(Watch::new(limits()));
        let mut stream = ServerStream::new(Vec::<u8>::new(), -1, watch);
        stream
            .write_all(b"HTTP/1.1 200 OK\r\n\r\n{}")
            .await
            .unwrap();
        stream.flush().await.unwrap();
        let kept = stream.held.out.capacity();
        assert!(kept > 0);
        stream.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.unwrap();
        let big = vec![b'x'; MAX_PENDING_WRITE + 1];
        stream.write_all(&big).await.unwrap();
        stream.flush().await.unwrap();
        assert_eq!(stream.inner.len(), 21 + 19 + big.len());
        assert!(stream.inner.ends_with(&big));
        assert_eq!(stream.held.out.capacity(), kept);
    }

    /// A client that did not read its answer pinned all of it here, copied (a 4 MB
    /// scrape: 4 MB per client). What waits here is at most [`MAX_PENDING_WRITE`].
    #[tokio::test(start_paused = true)]
    async fn an_answer_the_client_does_not_read_is_not_held_whole() {
        // A peer that takes 64 KiB and reads nothing.
        let (below, _peer) = tokio::io::duplex(64 * 1024);
        let watch = Arc::new(Watch::new(limits()));
        let mut stream = ServerStream::new(below, -1, watch);
        stream.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.unwrap();
        let answer = vec![b'x'; 8 << 20];
        let written = tokio::time::timeout(Duration::from_secs(1), stream.write_all(&answer)).await;
        assert!(written.is_err(), "the whole answer was taken");
        assert!(
            stream.held.out.capacity() <= MAX_PENDING_WRITE,
            "{} bytes held",
            stream.held.out.capacity()
        );
    }

    fn limits() -> Arc<Limits> {
        Arc::new(Limits {
            idle_timeout: Duration::from_secs(120),
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_header_bytes: 100,
            ..Limits::default()
        })
    }

    /// tokio's timer wheel has millisecond slots: a deadline fires within 1 ms after it.
    fn assert_fired_at(elapsed: Duration, deadline: Duration) {
        assert!(
            elapsed >= deadline && elapsed <= deadline + Duration::from_millis(1),
            "fired after {elapsed:?}, deadline {deadline:?}"
        );
    }

    async fn pair() -> (ConnIo, Arc<Watch>, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let (io, watch) = ConnIo::new(server, limits());
        (io, watch, client)
    }

    /// Paused time: the idle deadline fires at exactly 120 s, not before.
    #[tokio::test(start_paused = true)]
    async fn idle_connection_is_closed_at_the_idle_timeout() {
        let (mut io, watch, _client) = pair().await;
        let start = tokio::time::Instant::now();
        let mut buf = [0u8; 16];
        let err = io.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(watch.closed(), Some(Closed::IdleTimeout));
        assert_fired_at(start.elapsed(), Duration::from_secs(120));
    }

    /// A request's first bytes start the 10 s header deadline, however long the idle one was.
    #[tokio::test(start_paused = true)]
    async fn first_bytes_start_the_header_timeout() {
        let (mut io, watch, mut client) = pair().await;
        client.write_all(b"POST / HTTP/1.1\r\n").await.unwrap();
        let mut buf = [0u8; 64];
        let n = io.read(&mut buf).await.unwrap();
        assert_eq!(n, 17);
        let start = tokio::time::Instant::now();
        let err = io.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(watch.closed(), Some(Closed::HeaderTimeout));
        assert_fired_at(start.elapsed(), Duration::from_secs(10));
    }

    /// After the header, reads wait on the body deadline; after the body, on none.
    #[tokio::test(start_paused = true)]
    async fn body_deadline_then_idle_again() {
        let (mut io, watch, mut client) = pair().await;
        client.write_all(b"x").await.unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(io.read(&mut buf).await.unwrap(), 1);
        watch.header_read();
        let start = tokio::time::Instant::now();
        assert_eq!(
            io.read(&mut buf).await.unwrap_err().kind(),
            io::ErrorKind::TimedOut
        );
        assert_fired_at(start.elapsed(), Duration::from_secs(30));
        assert_eq!(watch.closed(), Some(Closed::BodyTimeout));
        watch.answered();
        let start = tokio::time::Instant::now();
        io.read(&mut buf).await.unwrap_err();
        assert_fired_at(start.elapsed(), Duration::from_secs(120));
    }

    /// A client that never reads its answer held the connection, and the
    /// answer's memory, forever. The socket must take the answer within the write timeout.
    #[tokio::test(start_paused = true)]
    async fn an_answer_the_client_does_not_read_fails_at_the_write_timeout() {
        let (mut io, watch, _client) = pair().await;
        watch.writing();
        let start = tokio::time::Instant::now();
        // Far more than the two sockets' buffers hold: the write must wait for the reader.
        let answer = vec![b'x'; 64 << 20];
        let written = tokio::time::timeout(Duration::from_secs(60), io.write_all(&answer)).await;
        let err = written.expect("no write deadline").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_fired_at(start.elapsed(), Duration::from_secs(10));
        assert_eq!(watch.closed(), Some(Closed::WriteTimeout));
    }

    #[tokio::test]
    async fn a_header_larger_than_the_limit_is_refused() {
        let (mut io, watch, mut client) = pair().await;
        client.write_all(&[b'a'; 101]).await.unwrap();
        let mut buf = vec![0u8; 4096];
        let mut got = 0;
        let err = loop {
            match io.read(&mut buf).await {
                Ok(n) => got += n,
                Err(e) => break e,
            }
            assert!(got <= 101);
        };
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert_eq!(watch.closed(), Some(Closed::HeaderTooLarge));
    }

    /// Over a real socket: an answer written in two parts leaves in one piece at the flush.
    #[tokio::test]
    async fn writes_are_held_until_flush() {
        let (io, watch, mut client) = pair().await;
        let mut io = ServerStream::new(io, -1, watch);
        io.write_all(b"header").await.unwrap();
        io.write_all(b"+body").await.unwrap();
        let mut buf = [0u8; 32];
        let early = tokio::time::timeout(Duration::from_millis(50), client.read(&mut buf)).await;
        assert!(early.is_err(), "nothing is sent before the flush");
        io.flush().await.unwrap();
        let n = client.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"header+body");
    }

    /// Request lines as Go's `readRequest` takes them: a control character anywhere or a third
    /// space is refused, whatever reads the line arrives in; a CR only before the LF.
    #[test]
    fn request_lines_go_refuses_are_found_across_reads() {
        let scan = |pieces: &[&[u8]]| {
            let watch = Watch::new(limits());
            watch.request_line(pieces[0]);
            for p in &pieces[1..] {
                watch.read(p);
            }
            watch.request_line_refused()
        };
        for good in [
            &[&b"POST /webhooks/a?timeout=10s HTTP/1.1\r\nHost: x\r\n\r\n"[..]][..],
            &[b"GET /a%20b HTTP/1.1\n", b"X: a b c d\r\n"],
            &[b"GET /a", b" HTTP/1.1\r", b"\n"],
            &[b"GET /\xc3\xa9<\"> HTTP/1.1\r\n"],
        ] {
            assert!(!scan(good), "{good:?}");
        }
        for bad in [
            &[&b"GET /a b HTTP/1.1\r\n"[..]][..],
            &[b"GET /a", b" b HTTP/1.1\r\n"],
            &[b"GET /a\tb HTTP/1.1\r\n"],
            &[b"GET /a\0b HTTP/1.1\r\n"],
            &[b"GET /a\x7f HTTP/1.1\r\n"],
            &[b"GET /a\rb HTTP/1.1\r\n"],
            &[b"GET /a HTTP/1.1 \r\n"],
        ] {
            assert!(scan(bad), "{bad:?}");
        }
        // Bytes after the line (its header, a body, the next request) are not scanned.
        let watch = Watch::new(limits());
        watch.request_line(b"GET / HTTP/1.1\r\n");
        watch.read(b"\0 \t   ");
        assert!(!watch.request_line_refused());
    }

    #[test]
    fn connection_count_stops_at_max_and_frees_on_drop() {
        let count = Arc::new(ConnectionCount::default());
        let a = count.acquire(2).unwrap();
        let _b = count.acquire(2).unwrap();
        assert!(count.acquire(2).is_none());
        drop(a);
        let _c = count.acquire(2).expect("a place is free again");
        assert!(count.acquire(2).is_none());
    }
}
