//! W3C trace context, and the proxy's own spans over OTLP.
//!
//! kube-apiserver with `APIServerTracing` (beta and on by default since 1.27) sends webhooks the
//! W3C `traceparent` and `tracestate` headers: each webhook client's transport is wrapped in
//! component-base's `tracing.WrapperFor` (otelhttp) by `NewDefaultAuthenticationInfoResolverWrapper`
//! (`staging/src/k8s.io/apiserver/pkg/util/webhook/authentication.go`). The proxy keeps that
//! context for the legacy webhook behind it:
//!
//! - without `--otlp-endpoint` (the default) it forwards the caller's headers unchanged
//!   ([`TraceContext`]), as an intermediary without spans of its own must; nothing else is
//!   done, so the request path costs what it did before;
//! - with it (`Spans`), the proxy records its own spans, parented on the caller's context:
//!   `admission` (server kind, one per request), `matching` (the webhook's selection rules,
//!   including a conversion by table for matchPolicy Equivalent), `conversion` (a CRD
//!   conversion webhook call, or a patch converted back), and one `Call validating webhook` /
//!   `Call mutating webhook` span of client kind per backend call, the name and attributes
//!   kube-apiserver's dispatchers give their own webhook spans
//!   (`staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/validating/dispatcher.go`,
//!   `callHook`). The backend gets that call span as its parent, so the legacy webhook's spans
//!   sit under the proxy's.
//!
//! Sampling is kube-apiserver's own (`staging/src/k8s.io/component-base/tracing/tracing.go`,
//! `NewProvider`): `ParentBased(TraceIDRatioBased(samplingRatePerMillion / 1e6))`. A request
//! whose `traceparent` is sampled is recorded, one that is not is not, and a request without
//! one is recorded at the configured rate (0 by default, as kube-apiserver's).
//!
//! Spans are batched and exported over OTLP/HTTP (protobuf) on the SDK's own thread; the
//! exporter reads the standard `OTEL_EXPORTER_OTLP_*` and `OTEL_BSP_*` variables for headers,
//! timeout, compression and batching.
//!
//! Uses only review, configuration and decision types (for attribute values); the server
//! and dispatch use it.

use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{
    Span as _, SpanKind, Status, TraceContextExt as _, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracer, SdkTracerProvider};

use crate::config::Webhook;
use crate::review::ParsedReview;

/// The caller's W3C trace context (`traceparent`, `tracestate`), validated, and the proxy's
/// own admission span when spans are exported.
///
/// A `traceparent` that is not version 00's `2-32-16-2` lowercase hex form is dropped, and
/// `tracestate` with it (W3C Trace Context's rule for an invalid `traceparent`); a
/// `tracestate` over 512 bytes or with non-printable bytes is dropped alone.
#[derive(Clone, Copy, Default)]
pub struct TraceContext<'a> {
    /// The caller's headers, the first `len` of them: none, `traceparent`, or both.
    headers: [(&'static str, &'a str); 2],
    len: usize,
    /// The proxy's own span for this admission (`--otlp-endpoint`).
    admission: Option<&'a AdmissionSpan<'a>>,
}

impl std::fmt::Debug for TraceContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceContext")
            .field("headers", &self.headers())
            .field("spans", &self.admission.is_some())
            .finish()
    }
}

impl<'a> TraceContext<'a> {
    /// The context from the caller's header values, validated (no allocation).
    pub(crate) fn new(traceparent: Option<&'a str>, tracestate: Option<&'a str>) -> Self {
        let hex = |s: &str, len: usize| {
            s.len() == len
                && s.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        let valid_parent = |t: &&str| {
            let mut parts = t.split('-');
            let (v, trace, parent, flags) =
                (parts.next(), parts.next(), parts.next(), parts.next());
            let (Some(v), Some(trace), Some(parent), Some(flags), None) =
                (v, trace, parent, flags, parts.next())
            else {
                return false;
            };
            v == "00"
                && hex(trace, 32)
                && hex(parent, 16)
                && hex(flags, 2)
                && trace.bytes().any(|b| b != b'0')
                && parent.bytes().any(|b| b != b'0')
        };
        let mut context = TraceContext::default();
        let Some(traceparent) = traceparent.filter(valid_parent) else {
            return context;
        };
        context.headers[0] = ("traceparent", traceparent);
        context.len = 1;
        if let Some(state) =
            tracestate.filter(|s| s.len() <= 512 && s.bytes().all(|b| (0x20..0x7f).contains(&b)))
        {
            context.headers[1] = ("tracestate", state);
            context.len = 2;
        }
        context
    }

    /// This context with the proxy's own admission span: phases and calls become its children.
    pub(crate) fn with_span(self, admission: Option<&'a AdmissionSpan<'a>>) -> Self {
        TraceContext { admission, ..self }
    }

    /// The caller's headers as received: none, `traceparent`, or both.
    pub(crate) fn headers(&self) -> &[(&'static str, &'a str)] {
        &self.headers[..self.len]
    }

    /// A child span of the admission for one phase (`matching`, `conversion`); `None`, at no
    /// cost, when spans are not exported.
    pub(crate) fn phase(&self, name: &'static str) -> Option<PhaseSpan> {
        self.admission.map(|a| a.child(name, SpanKind::Internal))
    }

    /// The span of one backend call (`None` without spans) and the trace headers to send
    /// with it: with spans, the call span as `traceparent` (the caller's `tracestate` kept);
    /// without, the caller's headers unchanged.
    pub(crate) fn call(&self, webhook: &Webhook) -> (Option<PhaseSpan>, CallHeaders<'a>) {
        let Some(admission) = self.admission else {
            return (None, CallHeaders::Forwarded(*self));
        };
        let name = match webhook.webhook_type {
            crate::api::WebhookType::Validating => "Call validating webhook",
            crate::api::WebhookType::Mutating => "Call mutating webhook",
        };
        let span = admission.child(name, SpanKind::Client);
        let cx = admission
            .cx
            .with_remote_span_context(span.0.span_context().clone());
        let mut injected = HeaderInjector(Vec::with_capacity(2));
        TraceContextPropagator::new().inject_context(&cx, &mut injected);
        (Some(span), CallHeaders::Injected(injected.0))
    }
}

/// The caller's headers, for the propagator that reads them.
impl Extractor for TraceContext<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.headers()
            .iter()
            .find(|(name, _)| *name == key)
            .map(|(_, value)| *value)
    }

    fn keys(&self) -> Vec<&str> {
        self.headers().iter().map(|(name, _)| *name).collect()
    }
}

/// The headers the propagator writes for a backend call.
struct HeaderInjector(Vec<(&'static str, String)>);

impl Injector for HeaderInjector {
    fn set(&mut self, key: &str, value: String) {
        let name = match key {
            "traceparent" => "traceparent",
            "tracestate" => "tracestate",
            _ => return,
        };
        self.0.push((name, value));
    }
}

/// The trace headers of one backend call.
pub(crate) enum CallHeaders<'a> {
    /// No spans: the caller's headers, unchanged.
    Forwarded(TraceContext<'a>),
    /// The call span's context, as the propagator wrote it.
    Injected(Vec<(&'static str, String)>),
}

impl CallHeaders<'_> {
    /// The header fields to send (no allocation).
    pub(crate) fn headers(&self) -> TraceHeaders<'_> {
        match self {
            CallHeaders::Forwarded(caller) => TraceHeaders {
                pairs: caller.headers,
                len: caller.len,
            },
            CallHeaders::Injected(injected) => {
                let mut headers = TraceHeaders {
                    pairs: [("", ""); 2],
                    len: 0,
                };
                for (name, value) in injected.iter().take(2) {
                    headers.pairs[headers.len] = (name, value);
                    headers.len += 1;
                }
                headers
            }
        }
    }
}

/// Up to two trace header fields (`traceparent`, `tracestate`), as a slice.
pub(crate) struct TraceHeaders<'a> {
    pairs: [(&'static str, &'a str); 2],
    len: usize,
}

impl<'a> std::ops::Deref for TraceHeaders<'a> {
    type Target = [(&'static str, &'a str)];
    fn deref(&self) -> &Self::Target {
        &self.pairs[..self.len]
    }
}

/// A span for one phase of an admission; ended when dropped. Boxed: the SDK's span is a few
/// hundred bytes, and an `Option` of it held across an await made every admission's future
/// that much larger to move, spans on or off (callgrind: +190 instructions of memcpy).
pub(crate) struct PhaseSpan(Box<opentelemetry_sdk::trace::Span>);

impl PhaseSpan {
    /// Sets one attribute (`key` as kube-apiserver's spans name it where they have it).
    pub(crate) fn set(&mut self, key: &'static str, value: impl Into<opentelemetry::Value>) {
        self.0.set_attribute(KeyValue::new(key, value));
    }

    /// Marks the span failed with `description` (a call failure, a failed conversion).
    pub(crate) fn fail(&mut self, description: impl Into<std::borrow::Cow<'static, str>>) {
        self.0.set_status(Status::error(description));
    }
}

/// Settings for `Spans::start` (the `serve` flags).
#[derive(Clone, Debug)]
pub struct SpanSettings {
    /// The collector's OTLP/HTTP base URL (`http://otel-collector:4318`); `/v1/traces` is
    /// appended, as for `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub endpoint: String,
    /// Requests without a sampled parent recorded per million (kube-apiserver's
    /// `TracingConfiguration.samplingRatePerMillion`), 0 to 1,000,000.
    pub sampling_rate_per_million: u32,
    /// `service.name` of the spans (`OTEL_SERVICE_NAME` wins when set).
    pub service_name: String,
}

/// Why the span exporter could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// `--otlp-endpoint` is not an `http(s)://` URL.
    #[error("--otlp-endpoint {endpoint:?}: {reason}")]
    Endpoint {
        /// The endpoint as given.
        endpoint: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The OTLP exporter could not be built (its words quoted, not a `source()`).
    #[error("OTLP span exporter: {0}")]
    Exporter(opentelemetry_otlp::ExporterBuildError),
}

/// The proxy's span pipeline: a tracer provider with kube-apiserver's sampler and a batch
/// exporter to the OTLP collector.
pub(crate) struct Spans {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
}

impl Spans {
    /// Builds the exporter and provider. Errors: an endpoint that is not an `http`/`https`
    /// URL, or an exporter the library cannot build. Nothing is sent until spans end, and a
    /// collector that is down only costs dropped spans (logged by the SDK), never an admission.
    pub(crate) fn start(settings: &SpanSettings) -> Result<Self, TelemetryError> {
        use opentelemetry_otlp::WithExportConfig as _;
        let endpoint = traces_url(&settings.endpoint)?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(endpoint)
            .build()
            .map_err(TelemetryError::Exporter)?;
        let ratio = f64::from(settings.sampling_rate_per_million.min(1_000_000)) / 1e6;
        let service_name =
            std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| settings.service_name.clone());
        let provider = SdkTracerProvider::builder()
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                ratio,
            ))))
            .with_resource(
                opentelemetry_sdk::Resource::builder()
                    .with_service_name(service_name)
                    .build(),
            )
            .with_batch_exporter(exporter)
            .build();
        let tracer = provider.tracer("admission-proxy");
        Ok(Spans { provider, tracer })
    }

    /// Starts the `admission` span of one request to `webhook`, parented on the caller's
    /// context, beginning when the request arrived (`received`).
    pub(crate) fn admission(
        &self,
        incoming: &TraceContext<'_>,
        received: Instant,
        webhook: &Webhook,
        review: &ParsedReview<'_>,
    ) -> AdmissionSpan<'_> {
        let names = (webhook.configuration.clone(), webhook.name.clone());
        self.admission_of(incoming, received, names, review)
    }

    /// [`Self::admission`] for a chain route: attribute `configuration` is the chain's
    /// configuration (`*` for every one of the type) and `webhook` is `*`; each webhook's
    /// phases are its children.
    pub(crate) fn chain_admission(
        &self,
        incoming: &TraceContext<'_>,
        received: Instant,
        configuration: &str,
        review: &ParsedReview<'_>,
    ) -> AdmissionSpan<'_> {
        let names = (configuration.to_string(), "*".to_string());
        self.admission_of(incoming, received, names, review)
    }

    fn admission_of(
        &self,
        incoming: &TraceContext<'_>,
        received: Instant,
        (configuration, webhook): (String, String),
        review: &ParsedReview<'_>,
    ) -> AdmissionSpan<'_> {
        let parent = TraceContextPropagator::new().extract(incoming);
        let request = &review.request;
        let resource = request.effective_resource();
        let start = SystemTime::now()
            .checked_sub(received.elapsed())
            .unwrap_or_else(SystemTime::now);
        let span = self
            .tracer
            .span_builder("admission")
            .with_kind(SpanKind::Server)
            .with_start_time(start)
            .with_attributes([
                KeyValue::new("configuration", configuration),
                KeyValue::new("webhook", webhook),
                KeyValue::new(
                    "resource",
                    format!(
                        "{}/{}, Resource={}",
                        resource.group, resource.version, resource.resource
                    ),
                ),
                KeyValue::new("subresource", request.effective_sub_resource().to_string()),
                KeyValue::new("operation", review.operation.as_str()),
                KeyValue::new("UID", request.uid.to_string()),
            ])
            .start_with_context(&self.tracer, &parent);
        AdmissionSpan {
            tracer: &self.tracer,
            cx: parent.with_span(span),
        }
    }

    /// Exports what is buffered and stops the exporter, waiting at most `timeout`. Blocks the
    /// calling thread: call it off the async runtime.
    pub(crate) fn shutdown(&self, timeout: Duration) {
        if let Err(e) = self.provider.shutdown_with_timeout(timeout) {
            tracing::warn!(error = %e, "exporting the last spans failed");
        }
    }
}

/// The URL spans are posted to: `base` with `/v1/traces` appended (OTLP/HTTP's path for
/// traces, as `OTEL_EXPORTER_OTLP_ENDPOINT` is resolved), unless `base` already ends with it.
///
/// # Errors
/// [`TelemetryError::Endpoint`]: not a URL, or not `http`/`https`.
fn traces_url(base: &str) -> Result<String, TelemetryError> {
    let refuse = |reason: String| TelemetryError::Endpoint {
        endpoint: base.to_string(),
        reason,
    };
    let url = url::Url::parse(base).map_err(|e| refuse(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(refuse(format!(
            "scheme {:?} is not http or https (OTLP/HTTP)",
            url.scheme()
        )));
    }
    if url.path().ends_with("/v1/traces") {
        return Ok(base.to_string());
    }
    Ok(format!("{}/v1/traces", base.trim_end_matches('/')))
}

/// The `admission` span of one request; its phases and calls are its children.
pub(crate) struct AdmissionSpan<'s> {
    tracer: &'s SdkTracer,
    cx: Context,
}

impl AdmissionSpan<'_> {
    fn child(&self, name: &'static str, kind: SpanKind) -> PhaseSpan {
        PhaseSpan(Box::new(
            self.tracer
                .span_builder(name)
                .with_kind(kind)
                .start_with_context(self.tracer, &self.cx),
        ))
    }

    /// Ends the span with the admission's decision and HTTP status; failures decided by
    /// failurePolicy and the proxy's own rejections mark it failed.
    pub(crate) fn finish(self, decision: crate::decision::Decision, http_status: u16) {
        use crate::decision::Decision;
        let failed = matches!(
            decision,
            Decision::FailedOpen | Decision::FailedClosed | Decision::Rejected
        );
        let decision = decision.as_str();
        let span = self.cx.span();
        span.set_attribute(KeyValue::new("decision", decision));
        span.set_attribute(KeyValue::new(
            "http.response.status_code",
            i64::from(http_status),
        ));
        if failed {
            span.set_status(Status::error(decision));
        }
        span.end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caller_headers_are_validated() {
        let valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(
            TraceContext::new(Some(valid), Some("a=b")).headers(),
            [("traceparent", valid), ("tracestate", "a=b")]
        );
        for bad in [
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        ] {
            assert!(
                TraceContext::new(Some(bad), Some("a=b"))
                    .headers()
                    .is_empty(),
                "{bad}"
            );
        }
        let long = "a=".to_string() + &"b".repeat(600);
        assert_eq!(
            TraceContext::new(Some(valid), Some(&long)).headers(),
            [("traceparent", valid)]
        );
        assert!(TraceContext::new(None, Some("a=b")).headers().is_empty());
    }

    #[test]
    fn the_traces_path_is_appended_once() {
        assert_eq!(
            traces_url("http://collector:4318").unwrap(),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://collector:4318/").unwrap(),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            traces_url("https://c.example.com/otlp/v1/traces").unwrap(),
            "https://c.example.com/otlp/v1/traces"
        );
        assert!(traces_url("collector:4317").is_err());
        assert!(traces_url("grpc://collector:4317").is_err());
    }
}
