//! A stand-in OTLP/HTTP collector for the proxy's spans (`--otlp-endpoint`), and helpers to
//! read the spans it decoded.

use std::io::Write;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::read_request;

/// A stand-in OTLP/HTTP collector on 127.0.0.1: answers every `POST /v1/traces` 200 with an
/// empty (valid) protobuf response and keeps the spans it decoded.
pub(crate) struct Collector {
    pub(crate) url: String,
    spans: Arc<Mutex<Vec<opentelemetry_proto::tonic::trace::v1::Span>>>,
    /// Request paths, in arrival order.
    pub(crate) paths: Arc<Mutex<Vec<String>>>,
}

impl Collector {
    pub(crate) fn start() -> Self {
        use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
        use prost::Message as _;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let spans: Arc<Mutex<Vec<_>>> = Arc::default();
        let paths: Arc<Mutex<Vec<String>>> = Arc::default();
        let (sink, seen) = (spans.clone(), paths.clone());
        std::thread::spawn(move || {
            for mut tcp in listener.incoming().take(16).flatten() {
                tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                while let Some((head, body)) = read_request(&mut tcp) {
                    let path = head.split(' ').nth(1).unwrap_or_default().to_string();
                    seen.lock().unwrap().push(path);
                    if let Ok(request) = ExportTraceServiceRequest::decode(body.as_slice()) {
                        let mut sink = sink.lock().unwrap();
                        for r in request.resource_spans {
                            for s in r.scope_spans {
                                sink.extend(s.spans);
                            }
                        }
                    }
                    let ok = "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n";
                    if tcp.write_all(ok.as_bytes()).is_err() {
                        break;
                    }
                }
            }
        });
        Collector { url, spans, paths }
    }

    /// The spans received so far, once at least `n` have arrived (waiting at most 10 s).
    pub(crate) fn wait_for(&self, n: usize) -> Vec<opentelemetry_proto::tonic::trace::v1::Span> {
        for _ in 0..200 {
            if self.spans.lock().unwrap().len() >= n {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.spans.lock().unwrap().clone()
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn attribute(span: &opentelemetry_proto::tonic::trace::v1::Span, key: &str) -> String {
    use opentelemetry_proto::tonic::common::v1::any_value::Value;
    match span
        .attributes
        .iter()
        .find(|a| a.key == key)
        .and_then(|a| a.value.as_ref()?.value.as_ref())
    {
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::IntValue(i)) => i.to_string(),
        other => format!("{other:?}"),
    }
}
