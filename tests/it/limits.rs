//! The listener's limits on the real server over real TLS (issue "Hardened server" §1): a
//! handshake that never completes, a trickled header, idle keep-alive connections, the
//! connection cap and the in-flight cap. Timeouts are set to 1–2 s; each wait is bounded.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use admission_proxy::dispatch::HttpClient;
use admission_proxy::server::{Limits, DEFAULT_MAX_BODY_BYTES};

use crate::common::*;

const WEBHOOK: &str = "slow.example.com";

fn proxy(backend: &TestBackend, limits: Limits) -> TestProxy {
    let config = validating(WEBHOOK, &backend.client_config("/slow/1000"), ALL, "");
    TestProxy::start_limited(&config, Some(namespaces()), DEFAULT_MAX_BODY_BYTES, limits)
}

/// A webhook `fast.example.com` whose backend allows at once.
fn fast(backend: &TestBackend) -> String {
    validating(
        "fast.example.com",
        &backend.client_config("/allow"),
        ALL,
        "",
    )
}

fn review() -> Vec<u8> {
    fixture("0096-create-core-v1-pods-v1.json")
}

/// One admission request as sent on a keep-alive connection.
fn request(body: &[u8]) -> Vec<u8> {
    request_to(WEBHOOK, body)
}

/// [`request`] for `webhook`.
fn request_to(webhook: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "POST /webhooks/{webhook}?timeout=10s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

/// Reads one HTTP answer with a Content-Length body; its status line and body.
fn read_answer(conn: &mut impl Read) -> std::io::Result<(String, String)> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if conn.read(&mut byte)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.push(byte[0]);
        assert!(buf.len() < 64 * 1024, "header too long");
    }
    let head = String::from_utf8_lossy(&buf).into_owned();
    let length: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    conn.read_exact(&mut body)?;
    Ok((head, String::from_utf8_lossy(&body).into_owned()))
}

/// Whether the peer has closed `conn`: a read ends (EOF or error) rather than timing out.
fn closed_by_peer(conn: &mut impl Read) -> bool {
    let mut buf = [0u8; 64];
    match conn.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_that_never_completes_is_closed_at_its_timeout() {
    let backend = TestBackend::start();
    let proxy = proxy(
        &backend,
        Limits {
            tls_handshake_timeout: Duration::from_secs(1),
            ..Limits::default()
        },
    );
    let addr = proxy.addr;
    let (closed, waited) = blocking(move || {
        let mut tcp = TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        // The first byte of a TLS record, then nothing.
        tcp.write_all(&[0x16]).unwrap();
        let start = Instant::now();
        (closed_by_peer(&mut tcp), start.elapsed())
    })
    .await;
    assert!(closed, "the proxy closes the connection");
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(5),
        "closed after {waited:?}, timeout 1 s"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickled_header_is_closed_at_the_header_timeout() {
    let backend = TestBackend::start();
    let proxy = proxy(
        &backend,
        Limits {
            header_timeout: Duration::from_secs(1),
            ..Limits::default()
        },
    );
    let (addr, ca) = (proxy.addr, proxy.ca_pem.clone());
    let (lines_sent, waited) = blocking(move || {
        let mut tls = tls_connect(addr, &ca, Duration::from_millis(200)).unwrap();
        let start = Instant::now();
        tls.write_all(format!("POST /webhooks/{WEBHOOK} HTTP/1.1\r\n").as_bytes())
            .unwrap();
        // One header line every 200 ms, for at most 10 s: the proxy must cut it off.
        for line in 0..50 {
            if tls
                .write_all(format!("X-Trickle-{line}: x\r\n").as_bytes())
                .is_err()
                || closed_by_peer(&mut tls)
            {
                return (line, start.elapsed());
            }
        }
        (50, start.elapsed())
    })
    .await;
    assert!(lines_sent < 50, "the trickling client was never cut off");
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(5),
        "closed after {waited:?}, header timeout 1 s"
    );
    assert_eq!(backend.recorder.calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_survives_a_pause_and_closes_after_the_idle_timeout() {
    let backend = TestBackend::start();
    let proxy = proxy(
        &backend,
        Limits {
            idle_timeout: Duration::from_millis(800),
            header_timeout: Duration::from_millis(300),
            ..Limits::default()
        },
    );
    let (addr, ca) = (proxy.addr, proxy.ca_pem.clone());
    let (first, second, closed, idle_for) = blocking(move || {
        let mut tls = tls_connect(addr, &ca, Duration::from_secs(10)).unwrap();
        tls.write_all(&request(&review())).unwrap();
        let first = read_answer(&mut tls).unwrap().0;
        // The pause under test: longer than the header timeout, shorter than the idle timeout.
        std::thread::sleep(Duration::from_millis(500));
        tls.write_all(&request(&review())).unwrap();
        let second = read_answer(&mut tls).unwrap().0;
        let start = Instant::now();
        let closed = closed_by_peer(&mut tls);
        (first, second, closed, start.elapsed())
    })
    .await;
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    assert!(second.starts_with("HTTP/1.1 200"), "{second}");
    assert!(closed, "the idle connection is closed");
    assert!(
        idle_for >= Duration::from_millis(700) && idle_for < Duration::from_secs(4),
        "closed after {idle_for:?} idle, idle timeout 800 ms"
    );
    assert_eq!(backend.recorder.calls(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_cap_closes_extra_connections_and_recovers() {
    let backend = TestBackend::start();
    let proxy = proxy(
        &backend,
        Limits {
            max_connections: 2,
            ..Limits::default()
        },
    );
    let (addr, ca) = (proxy.addr, proxy.ca_pem.clone());
    let (third_refused, after_close) = blocking(move || {
        let a = tls_connect(addr, &ca, Duration::from_secs(10)).unwrap();
        let _b = tls_connect(addr, &ca, Duration::from_secs(10)).unwrap();
        let third_refused = tls_connect(addr, &ca, Duration::from_secs(10)).is_err();
        drop(a);
        // The freed place is taken by the next connection (bounded: 50 tries, 20 ms apart).
        let mut after_close = None;
        for _ in 0..50 {
            if let Ok(mut c) = tls_connect(addr, &ca, Duration::from_secs(10)) {
                c.write_all(&request(&review())).unwrap();
                after_close = Some(read_answer(&mut c).unwrap().0);
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        (third_refused, after_close)
    })
    .await;
    assert!(third_refused, "a third connection is closed at once");
    let answer = after_close.expect("a connection is accepted once one closed");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_flight_cap_answers_429_with_retry_after_and_recovers() {
    let backend = TestBackend::start();
    let proxy = proxy(
        &backend,
        Limits {
            max_requests_inflight: 1,
            ..Limits::default()
        },
    );
    let (addr, ca) = (proxy.addr, proxy.ca_pem.clone());
    let slow = {
        let ca = ca.clone();
        tokio::task::spawn_blocking(move || {
            let mut tls = tls_connect(addr, &ca, Duration::from_secs(10)).unwrap();
            tls.write_all(&request(&review())).unwrap();
            read_answer(&mut tls).unwrap()
        })
    };
    // The slow admission (1 s at the backend) is in flight once the backend has it.
    wait_for_calls(&backend, 1).await;
    assert_eq!(backend.recorder.calls(), 1);
    let ca2 = ca.clone();
    let (head, body) = blocking(move || {
        let mut tls = tls_connect(addr, &ca2, Duration::from_secs(10)).unwrap();
        tls.write_all(&request(&review())).unwrap();
        read_answer(&mut tls).unwrap()
    })
    .await;
    assert!(head.starts_with("HTTP/1.1 429"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains("retry-after: 1\r\n"),
        "{head}"
    );
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "TooManyRequests");
    assert_eq!(status["code"], 429);
    let (first, _) = slow.await.unwrap();
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    // Nothing in flight again: admitted.
    let (again, _) = blocking(move || {
        let mut tls = tls_connect(addr, &ca, Duration::from_secs(10)).unwrap();
        tls.write_all(&request(&review())).unwrap();
        read_answer(&mut tls).unwrap()
    })
    .await;
    assert!(again.starts_with("HTTP/1.1 200"), "{again}");
    assert_eq!(
        backend.recorder.calls(),
        2,
        "the 429 never reached the backend"
    );
}

/// The TLS records of one answer, read off the socket below the client's TLS (bounded: 10 s
/// read timeout, 64 KiB), then fed to it. Returns the records' content types and the answer.
fn answer_records(
    tls: &mut rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
) -> (Vec<u8>, String) {
    let mut raw = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let types = loop {
        let n = tls.sock.read(&mut chunk).unwrap();
        assert!(n > 0, "closed before the answer");
        raw.extend_from_slice(&chunk[..n]);
        assert!(raw.len() < 64 * 1024, "answer too long");
        // Whole records so far (5-byte header: type, version, length).
        let (mut at, mut whole) = (0, Vec::new());
        while raw.len() >= at + 5 {
            let len = usize::from(u16::from_be_bytes([raw[at + 3], raw[at + 4]]));
            if raw.len() < at + 5 + len {
                break;
            }
            whole.push(raw[at]);
            at += 5 + len;
        }
        if at == raw.len() {
            break whole;
        }
    };
    tls.conn.read_tls(&mut raw.as_slice()).unwrap();
    tls.conn.process_new_packets().unwrap();
    let (head, body) = read_answer(&mut tls.conn.reader()).unwrap();
    (types, head + &body)
}

/// Each answer's header and body leave in one TLS record (one seal for the proxy, one record
/// for kube-apiserver to open), not one record each: the second answer on a keep-alive
/// connection, read below TLS (the first may share the socket with the session tickets).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_is_one_tls_record() {
    let backend = TestBackend::start();
    let config = fast(&backend);
    let proxy = TestProxy::start(&config);
    let (addr, ca) = (proxy.addr, proxy.ca_pem.clone());
    let request = request_to("fast.example.com", &review());
    let (first, (types, second)) = blocking(move || {
        let mut tls = tls_connect(addr, &ca, Duration::from_secs(10)).unwrap();
        tls.write_all(&request).unwrap();
        let first = read_answer(&mut tls).unwrap().0;
        tls.write_all(&request).unwrap();
        (first, answer_records(&mut tls))
    })
    .await;
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    assert!(second.starts_with("HTTP/1.1 200"), "{second}");
    assert!(second.contains("\"allowed\":true"), "{second}");
    // 23: application data (TLS 1.3 wraps every record in it).
    assert_eq!(types, vec![23], "records of the answer");
    assert_eq!(backend.recorder.calls(), 2);
}

/// 50 requests pipelined on one connection (sent before any answer is read, as
/// HTTP/1.1 allows) got 1 answer, then the connection closed. Each is answered, in order
/// (RFC 9112 §9.3.2), and the backend called once per request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_are_answered_in_order() {
    let backend = TestBackend::start();
    let config = fast(&backend);
    let proxy = TestProxy::start(&config);
    let (addr, ca) = (proxy.addr, proxy.ca_pem.clone());
    let uids: Vec<String> = (0..50)
        .map(|i| format!("00000000-0000-4000-8000-{i:012}"))
        .collect();
    let requests: Vec<u8> = uids
        .iter()
        .flat_map(|uid| {
            let mut review: serde_json::Value = serde_json::from_slice(&review()).unwrap();
            review["request"]["uid"] = uid.as_str().into();
            request_to("fast.example.com", &serde_json::to_vec(&review).unwrap())
        })
        .collect();
    let answers = blocking(move || {
        let mut tls = tls_connect(addr, &ca, Duration::from_secs(10)).unwrap();
        tls.write_all(&requests).unwrap();
        (0..50).map(|_| read_answer(&mut tls)).collect::<Vec<_>>()
    })
    .await;
    for (i, (answer, uid)) in answers.iter().zip(&uids).enumerate() {
        let (status, body) = answer
            .as_ref()
            .unwrap_or_else(|e| panic!("answer {i}: {e}"));
        assert!(status.starts_with("HTTP/1.1 200"), "{i}: {status}");
        assert!(
            body.contains(uid.as_str()),
            "answer {i} is request {i}'s: {body}"
        );
    }
    assert_eq!(backend.recorder.calls(), 50);
}

/// Requests pingora cannot frame (two different Content-Length values, a
/// Content-Length that overflows, too many header fields, a header over --max-header-bytes)
/// closed the connection with no answer; Go's server, which kube-apiserver's peers expect,
/// answers `400 Bad Request` or `431 Request Header Fields Too Large` and closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_that_cannot_be_framed_get_go_s_answers() {
    let backend = TestBackend::start();
    let proxy = proxy(&backend, Limits::default());
    let (addr, ca) = (proxy.addr, proxy.ca_pem.clone());
    let head = |extra: &str| {
        format!("POST /webhooks/{WEBHOOK}?timeout=10s HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}\r\n")
            .into_bytes()
    };
    let many: String = (0..300).map(|i| format!("X-Field-{i}: {i}\r\n")).collect();
    let huge = format!("X-Huge: {}\r\n", "a".repeat(2 << 20));
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "two Content-Length values",
            head("Content-Length: 5\r\nContent-Length: 6\r\n"),
            "HTTP/1.1 400 Bad Request",
        ),
        (
            "an overflowing Content-Length",
            head("Content-Length: 99999999999999999999999\r\n"),
            "HTTP/1.1 400 Bad Request",
        ),
        (
            "too many header fields",
            head(&many),
            "HTTP/1.1 431 Request Header Fields Too Large",
        ),
        (
            "a 2 MiB header",
            head(&huge),
            "HTTP/1.1 431 Request Header Fields Too Large",
        ),
    ];
    for (what, request, expected) in cases {
        let (addr, ca) = (addr, ca.clone());
        let answer = blocking(move || {
            let mut tls = tls_connect(addr, &ca, Duration::from_secs(10)).unwrap();
            // A peer that stops reading our request may reset it: what was answered counts.
            let _ = tls.write_all(&request);
            let mut out = Vec::new();
            let mut buf = [0u8; 4096];
            while let Ok(n) = tls.read(&mut buf) {
                if n == 0 {
                    break;
                }
                out.extend_from_slice(&buf[..n]);
            }
            String::from_utf8_lossy(&out).into_owned()
        })
        .await;
        assert!(answer.starts_with(expected), "{what}: {answer:?}");
    }
    assert_eq!(backend.recorder.calls(), 0);
}

/// A partial header pipelined right behind a complete request held the connection for the
/// idle timeout (here 30 s) instead of the header timeout (1 s): the next request's header
/// timeout starts once the previous answer is written, as Go's `conn.serve` starts
/// `ReadHeaderTimeout` at each `readRequest`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_header_pipelined_behind_a_request_is_closed_at_the_header_timeout() {
    let backend = TestBackend::start();
    let config = fast(&backend);
    let limits = Limits {
        header_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(30),
        ..Limits::default()
    };
    let proxy =
        TestProxy::start_limited(&config, Some(namespaces()), DEFAULT_MAX_BODY_BYTES, limits);
    let (addr, ca) = (proxy.addr, proxy.ca_pem.clone());
    let (first, closed, waited) = blocking(move || {
        let mut tls = tls_connect(addr, &ca, Duration::from_secs(10)).unwrap();
        let mut both = request_to("fast.example.com", &review());
        both.extend_from_slice(b"POST /webhooks/fast.example.com HTTP/1.1\r\nHost: 127.0.0.1\r\n");
        // One write: the partial header arrives with the complete request.
        tls.write_all(&both).unwrap();
        let first = read_answer(&mut tls).unwrap().0;
        let start = Instant::now();
        (first, closed_by_peer(&mut tls), start.elapsed())
    })
    .await;
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    assert!(closed, "the connection was not closed within 10 s");
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(5),
        "closed after {waited:?}, header timeout 1 s"
    );
    assert_eq!(backend.recorder.calls(), 1);
}

/// The whole answer to `request` on a fresh connection, read until the proxy closes it.
fn answer_to(addr: std::net::SocketAddr, ca: &str, request: &[u8]) -> String {
    let mut tls = tls_connect(addr, ca, Duration::from_secs(10)).unwrap();
    // A peer that stops reading our request may reset it: what was answered counts.
    let _ = tls.write_all(request);
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = tls.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        assert!(out.len() < 1 << 20, "answer too long");
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Requests Go's server refuses and the proxy used to serve: Transfer-Encoding sent twice, or
/// a coding other than exactly `chunked` (Go: 501, `transferReader.parseTransferEncoding` in
/// `net/http/transfer.go`); a space, TAB or NUL in the request target (400, `readRequest` in
/// `net/http/request.go`); no Host on HTTP/1.1, or two (400 with Go's reason,
/// `conn.readRequest` in `net/http/server.go`); a target that is not an absolute path or URI,
/// or has a bad `%` escape in its path (400, `url.ParseRequestURI`), and `*` (`ServeMux`'s bare
/// 400). Each gets Go's answer, word for word, and the connection closes; the backend is
/// never called. `Transfer-Encoding: Chunked` alone, and
/// HTTP/1.0 without Host, are still served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_go_refuses_get_go_s_answers() {
    let backend = TestBackend::start();
    let proxy = proxy(&backend, Limits::default());
    let (addr, ca) = (proxy.addr, proxy.ca_pem.clone());
    const GO_501: &str = "HTTP/1.1 501 Not Implemented\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\nUnsupported transfer encoding";
    const GO_400: &str = "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request";
    const GO_NO_HOST: &str = "HTTP/1.1 400 Bad Request: missing required Host header\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request: missing required Host header";
    const GO_HOSTS: &str = "HTTP/1.1 400 Bad Request: too many Host headers\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request: too many Host headers";
    let chunked = |te: &str| {
        format!(
            "POST /webhooks/{WEBHOOK}?timeout=10s HTTP/1.1\r\nHost: 127.0.0.1\r\n{te}\r\n0\r\n\r\n"
        )
        .into_bytes()
    };
    let target = |target: &[u8]| {
        let mut r = b"GET ".to_vec();
        r.extend_from_slice(target);
        r.extend_from_slice(b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        r
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "Transfer-Encoding twice",
            chunked("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"),
            GO_501,
        ),
        (
            "gzip, chunked",
            chunked("Transfer-Encoding: gzip, chunked\r\n"),
            GO_501,
        ),
        (
            "chunked, gzip",
            chunked("Transfer-Encoding: chunked, gzip\r\n"),
            GO_501,
        ),
        ("a space in the target", target(b"/livez x"), GO_400),
        ("a TAB in the target", target(b"/livez\tx"), GO_400),
        ("a NUL in the target", target(b"/livez\0x"), GO_400),
        (
            "a target without a leading slash",
            target(format!("webhooks/{WEBHOOK}").as_bytes()),
            GO_400,
        ),
        ("a bad escape in the path", target(b"/livez%zz"), GO_400),
        ("a short escape at the end", target(b"/livez%4"), GO_400),
        (
            "no Host",
            format!("POST /webhooks/{WEBHOOK}?timeout=10s HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
                .into_bytes(),
            GO_NO_HOST,
        ),
        (
            "two Hosts",
            format!("POST /webhooks/{WEBHOOK}?timeout=10s HTTP/1.1\r\nHost: a\r\nHost: b\r\nContent-Length: 0\r\n\r\n")
                .into_bytes(),
            GO_HOSTS,
        ),
    ];
    for (what, request, expected) in cases {
        let ca = ca.clone();
        let answer = blocking(move || answer_to(addr, &ca, &request)).await;
        assert_eq!(answer, expected, "{what}");
    }
    // `*`: Go's ServeMux answer, as Go's server writes it (agnhost 2.53 answered so).
    let ca2 = ca.clone();
    let asterisk = blocking(move || answer_to(addr, &ca2, &target(b"*"))).await;
    let (head, date) =
        asterisk.split_at("HTTP/1.1 400 Bad Request\r\nConnection: close\r\nDate: ".len());
    assert_eq!(
        head,
        "HTTP/1.1 400 Bad Request\r\nConnection: close\r\nDate: "
    );
    assert!(
        date.ends_with(" GMT\r\nContent-Length: 0\r\n\r\n"),
        "{asterisk:?}"
    );
    assert_eq!(backend.recorder.calls(), 0);

    // What Go serves is still served.
    let ca2 = ca.clone();
    let http10 = blocking(move || answer_to(addr, &ca2, b"GET /livez HTTP/1.0\r\n\r\n")).await;
    assert!(http10.starts_with("HTTP/1.1 200"), "{http10}");
    // An escape Go unescapes, a `%` in the query (not unescaped at parse time) and an absolute
    // URI are routed.
    for good in [
        &b"/live%7a"[..],
        b"/livez?x=%zz",
        b"https://127.0.0.1/livez",
    ] {
        let mut request = b"GET ".to_vec();
        request.extend_from_slice(good);
        request.extend_from_slice(b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
        let ca = ca.clone();
        let answer = blocking(move || answer_to(addr, &ca, &request)).await;
        let routed = answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.1 404");
        assert!(routed, "{}: {answer}", String::from_utf8_lossy(good));
    }
    let mut body = review();
    let mut request = format!(
        "POST /webhooks/{WEBHOOK}?timeout=10s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nTransfer-Encoding: Chunked\r\n\r\n{:x}\r\n",
        body.len()
    )
    .into_bytes();
    body.extend_from_slice(b"\r\n0\r\n\r\n");
    request.extend_from_slice(&body);
    let chunked_ok = blocking(move || answer_to(addr, &ca, &request)).await;
    assert!(chunked_ok.starts_with("HTTP/1.1 200"), "{chunked_ok}");
    assert_eq!(backend.recorder.calls(), 1);
}

/// No admission waits on another's CEL. The proxy serves on one worker thread by default;
/// matchConditions that spend the webhook's whole cost budget (three conditions cancelled
/// at cel-go's per-call limit) used to hold that thread, and every other admission, for as
/// long as they ran. Their evaluation now hands the worker's other work to another thread
/// (`block_in_place`): an admission sent while they run is answered first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admission_does_not_wait_for_another_s_cel() {
    let ws = Workspace::new("cel-blocking");
    let expensive = "object.spec.l.all(a, object.spec.l.all(b, a != -1))";
    let slow = validating(
        "slow.cel.example.com",
        "{url: \"https://127.0.0.1:9/never\"}",
        ALL,
        &format!(
            "failurePolicy: Ignore\n  matchConditions:\n  - {{name: a, expression: \"{expensive}\"}}\n  - {{name: b, expression: \"{expensive}\"}}\n  - {{name: c, expression: \"{expensive}\"}}"
        ),
    );
    let quick = validating(
        "quick.cel.example.com",
        "{url: \"https://127.0.0.1:9/never\"}",
        r#"[{operations: ["DELETE"], apiGroups: ["nothing.example.com"], apiVersions: ["*"], resources: ["*"]}]"#,
        "",
    );
    std::fs::write(ws.conf.join("webhooks.yaml"), format!("{slow}---\n{quick}")).unwrap();
    let proxy = tokio::task::block_in_place(|| {
        BinaryProxy::start(&ws.conf, &ws.cert, &ws.key, &["--worker-threads", "1"])
    });
    let target = proxy.target(&ws.pki);
    let (slow_client, quick_client) = (HttpClient::new(), HttpClient::new());
    let small = pod_create("default", serde_json::json!({}));
    // Each client's connection is open before the race.
    for (client, webhook) in [(&slow_client, "slow"), (&quick_client, "quick")] {
        let path = format!("/webhooks/{webhook}.cel.example.com?timeout=10s");
        assert_eq!(
            client
                .post(&target, &path, &small, &[])
                .await
                .unwrap()
                .status,
            200
        );
    }
    let big = review_json(
        "v1",
        "CREATE",
        "pods",
        "default",
        serde_json::json!({"spec": {"l": (0..1_000).collect::<Vec<i32>>()}}),
        serde_json::Value::Null,
        false,
    );
    let sent = Instant::now();
    let slow_call = {
        let target = target.clone();
        tokio::spawn(async move {
            let reply = slow_client
                .post(
                    &target,
                    "/webhooks/slow.cel.example.com?timeout=10s",
                    &big,
                    &[],
                )
                .await
                .unwrap();
            (reply, Instant::now())
        })
    };
    // The quick admission is sent once the slow one is in flight (its conditions running):
    // `/metrics` answers meanwhile only if the worker is not held.
    let evaluating = |m: &str| {
        metric_value(
            m,
            "admission_proxy_webhook_in_flight",
            &[("name", "slow.cel.example.com")],
        ) == Some(1.0)
    };
    let scraped = tokio::task::block_in_place(|| proxy.scrape_until(&ws.pki, evaluating));
    assert!(
        evaluating(&scraped),
        "the slow admission is in flight: {}",
        scraped
            .lines()
            .filter(|l| l.contains("in_flight") || l.contains("slow"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let quick = quick_client
        .post(
            &target,
            "/webhooks/quick.cel.example.com?timeout=10s",
            &small,
            &[],
        )
        .await
        .unwrap();
    let quick_done = Instant::now();
    assert_eq!(quick.status, 200);
    let (slow, slow_done) = slow_call.await.unwrap();
    let slow = Reply::from(slow);
    assert_eq!(
        slow.decision,
        "skipped",
        "{}",
        String::from_utf8_lossy(&slow.body)
    );
    assert!(
        quick_done < slow_done,
        "the quick admission was answered while the other's CEL ran ({:?}, {:?})",
        quick_done - sent,
        slow_done - sent
    );
}
