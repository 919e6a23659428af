//! Calling a custom resource's conversion webhook (strategy `Webhook`) for matchPolicy
//! Equivalent: before matchConditions and the legacy webhook, and again to carry its patch
//! back. kube-apiserver's rules (`webhook_converter.go`; GitHub kubernetes#91338): a fixed
//! timeout (30 s by default), no failurePolicy: any failure fails the request with 500
//! InternalError. Each failure is classified once, like [`super::CallFailure`], for the answer,
//! the log and `admission_proxy_conversion_webhook_failures_total`. The dispatcher's steps
//! that call it (`Dispatcher::rewrite_by_webhook`, `Dispatcher::convert_by_webhook`, within the
//! admission's budget) are here too. Depends on `conversion` and the HTTP client.

use std::time::Duration;

use serde_json::Value;

use crate::conversion::webhook::{conversion_request, converted_object, gvk_string};
use crate::conversion::{self, EquivalentError, Rewritten};
use crate::resources::custom::{ConversionWebhook, CustomResource};
use crate::resources::Equivalent;
use crate::review::ParsedReview;

use super::client::{HttpClient, Target};
use super::{Clock, Dispatcher};

/// kube-apiserver's timeout for conversion webhooks; CRDs cannot set one (kubernetes#91338).
pub(crate) const DEFAULT_CONVERSION_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a conversion webhook call failed: `class` (`connect`, `tls`, `transport`, `timeout`,
/// `status`, `bad_answer`, `no_review_version`) for logs and metrics, and kube-apiserver's
/// message (`conversion webhook for <gvk> failed: …`).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{message}")]
pub(crate) struct ConversionFailure {
    pub(crate) class: &'static str,
    pub(crate) message: String,
}

/// Converts `object` to `desired_api_version` with `crd`'s conversion webhook, within `budget`.
///
/// # Errors
/// [`ConversionFailure`] for a transport failure, the timeout, a non-2xx answer, or an answer
/// `webhook_converter.go` rejects.
pub(crate) async fn convert(
    client: &HttpClient,
    crd: &CustomResource,
    webhook: &ConversionWebhook,
    object: &Value,
    desired_api_version: &str,
    budget: Duration,
) -> Result<Value, ConversionFailure> {
    let gvk = gvk_string(object);
    let fail = |class: &'static str, detail: String| {
        crate::metrics::conversion_failure(&crd.name, class);
        ConversionFailure {
            class,
            message: format!("conversion webhook for {gvk} {detail}"),
        }
    };
    let Some(version) = webhook.review_version else {
        return Err(fail(
            "no_review_version",
            "failed: no supported conversion review versions".into(),
        ));
    };
    let backend = &webhook.backend;
    if let Some(e) = &backend.rest_client_error {
        return Err(fail("tls", format!("failed: {e}")));
    }
    let uid = fresh_uid();
    let body = conversion_request(version, &uid, desired_api_version, object);
    let target = Target::shared(backend.clone());
    let post = |detail: &dyn std::fmt::Display| format!("failed: Post {:?}: {detail}", backend.url);
    // kube-apiserver's conversion client is client-go too: Retry-After is honoured.
    let call = super::post_as_client_go(client, &target, &backend.path, &body, &[], || {});
    let reply = match tokio::time::timeout(budget, call).await {
        Err(_) => return Err(fail("timeout", post(&"context deadline exceeded"))),
        Ok(Err(e)) => return Err(fail(e.class(), post(&e))),
        Ok(Ok(reply)) => reply,
    };
    if !(200..300).contains(&reply.status) {
        return Err(fail(
            "status",
            format!("failed: {}", super::verify::status_message(&reply)),
        ));
    }
    converted_object(version, &uid, &reply.body, object, desired_api_version)
        .map_err(|detail| fail("bad_answer", detail.to_string()))
}

/// A random version-4 UUID for each ConversionReview (`uuid.NewUUID()` upstream).
fn fresh_uid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// The conversion-webhook steps of an admission: the dispatcher's budget and client, the
/// conversion above.
impl Dispatcher {
    /// Converts one object with the conversion webhook of `invocation`'s custom resource.
    pub(super) async fn convert_by_webhook(
        &self,
        invocation: &Equivalent,
        object: &Value,
        desired_api_version: &str,
        clock: Clock,
    ) -> Result<Value, EquivalentError> {
        let crd = invocation.custom.as_deref();
        let Some((crd, webhook)) = crd.and_then(|c| Some((c, c.conversion_webhook()?))) else {
            return Err(EquivalentError::ConversionWebhook(
                "no conversion webhook".into(),
            ));
        };
        let budget = self.budget(self.conversion_timeout, clock);
        convert(
            &self.client,
            crd,
            webhook,
            object,
            desired_api_version,
            budget,
        )
        .await
        .map_err(|f| EquivalentError::ConversionWebhook(f.message))
    }

    /// [`Self::convert_by_webhook`] for an object that may be absent (`oldObject` on CREATE).
    async fn convert_optional(
        &self,
        invocation: &Equivalent,
        object: Option<&Value>,
        desired_api_version: &str,
        clock: Clock,
    ) -> Result<Option<Value>, EquivalentError> {
        match object {
            None => Ok(None),
            Some(o) => self
                .convert_by_webhook(invocation, o, desired_api_version, clock)
                .await
                .map(Some),
        }
    }

    /// The request rewritten for `invocation`, its objects converted by the custom resource's
    /// conversion webhook (`object` and `oldObject` concurrently, one ConversionReview each).
    pub(super) async fn rewrite_by_webhook(
        &self,
        review: &ParsedReview<'_>,
        invocation: Equivalent,
        clock: Clock,
    ) -> Result<Rewritten, EquivalentError> {
        let objects = conversion::take_objects(review)?;
        let desired = conversion::api_version((&invocation.kind_group, &invocation.kind_version));
        let [object, old_object] = &objects;
        let (object, old_object) = tokio::join!(
            self.convert_optional(&invocation, object.as_ref(), &desired, clock),
            self.convert_optional(&invocation, old_object.as_ref(), &desired, clock),
        );
        conversion::rewritten(review, invocation, objects, [object?, old_object?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_are_version_4_and_differ() {
        let (a, b) = (fresh_uid(), fresh_uid());
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
        assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"), "{a}");
    }

    /// The same client-go messages as an admission webhook's non-2xx answer (one
    /// `transformResponse`): a Status body's message, else `NewGenericServerResponse`'s text
    /// for the code (a 500 without a body is "an error on the server (\"unknown\") …", not the
    /// unknown-code text this copy used to give).
    #[test]
    fn non_2xx_messages() {
        let reply = |status: u16, body: &'static [u8]| {
            crate::dispatch::HttpReply::new(
                status,
                http::HeaderMap::new(),
                bytes::Bytes::from_static(body),
            )
        };
        let message = |status, body| super::super::verify::status_message(&reply(status, body));
        assert_eq!(
            message(500, b""),
            "an error on the server (\"unknown\") has prevented the request from succeeding"
        );
        assert_eq!(
            message(403, br#"{"kind":"Status","message":"nope"}"#),
            "nope"
        );
        assert_eq!(
            message(502, b"bad gateway"),
            "an error on the server (\"bad gateway\") has prevented the request from succeeding"
        );
        assert_eq!(
            message(418, b""),
            "the server responded with the status code 418 but did not return more information"
        );
    }
}
