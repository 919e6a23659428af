//! The proxy's own per-webhook settings, carried in one annotation on the copied webhook
//! configuration so that the file stays a valid Kubernetes object that `kubectl apply
//! --dry-run=server` and schema validators accept. Depends on `names` and `field_error`.
//!
//! ```yaml
//! metadata:
//!   name: legacy
//!   annotations:
//!     admission-proxy.io/webhook-options: |
//!       {"pods.legacy.example.com": {"tlsServerName": "legacy-webhook.webhooks.svc",
//!                                    "mode": "Warn", "maxTimeoutSeconds": 5}}
//! ```
//!
//! The value is a JSON (or YAML) object keyed by the names of this configuration's webhooks.
//! Unknown webhook names and unknown settings are errors: a misspelt key must not silently
//! leave a setting off.

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;

use crate::field_error::{BadValue, Error as FieldError, ErrorList, ErrorType};

use crate::names;

/// The annotation holding the settings.
pub(crate) const ANNOTATION: &str = "admission-proxy.io/webhook-options";

/// Settings of one webhook.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct WebhookOptions {
    /// The name the backend's serving certificate carries (sent as SNI and verified against
    /// the certificate), when the proxy dials another host than the one the certificate was
    /// issued for: typically the Service DNS name `legacy-webhook.webhooks.svc` while the
    /// `clientConfig.url` is `https://127.0.0.1:9443/validate`. A DNS name or an IP address.
    pub(crate) tls_server_name: Option<String>,
    /// How the webhook's answers are applied ([`Mode`]); `Enforce` when absent.
    pub(crate) mode: Option<Mode>,
    /// A bound below `timeoutSeconds` (1-30): a webhook registered with 30 s cannot hold
    /// kube-apiserver for longer than this (the `--max-timeout-seconds` of one webhook).
    pub(crate) max_timeout_seconds: Option<u64>,
    /// Calls to this webhook's backend at once; a call that finds no free slot within the
    /// queue time (`--call-queue-timeout-ms`) is answered by failurePolicy (class
    /// `overloaded`) instead of piling onto a slow backend.
    pub(crate) max_concurrent_calls: Option<usize>,
    /// `false`: `registration` no longer registers the webhook with kube-apiserver (it lists
    /// it among what to prune) while the proxy still answers its route, in its mode, for the
    /// requests kube-apiserver sends before it sees the change: the cut-over's third step,
    /// so that no request meets a route that is gone.
    pub(crate) registered: Option<bool>,
}

/// How a webhook's answers are applied. Everything but `Enforce` is the proxy's own, opt-in
/// behaviour; kube-apiserver has `Enforce` only.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[clap(rename_all = "PascalCase")]
pub enum Mode {
    /// As kube-apiserver: a denial denies, a patch is applied.
    #[default]
    Enforce,
    /// The backend is called as usual, but a denial is answered `allowed: true` with the
    /// warning `admission webhook "N" would deny the request: MESSAGE` and the audit annotation
    /// `would-deny`, and a mutating webhook's patch is dropped (audit annotation `would-patch`
    /// with its paths). ValidatingAdmissionPolicy's `validationActions: [Warn, Audit]`, for
    /// webhooks.
    Warn,
    /// The proxy answers at once as if the webhook did not exist (`allowed`) and calls the
    /// backend in the background (a bounded queue; dropped and counted when full); what the
    /// webhook would have decided is logged and counted. For rolling out a new or changed
    /// webhook with no latency or availability risk.
    Shadow,
}

/// The field path of the annotation, for problems.
pub(crate) fn field() -> String {
    format!("metadata.annotations[{ANNOTATION}]")
}

/// Parses the annotation of a configuration whose webhooks are `webhook_names`.
///
/// # Errors
/// Field errors: the value is not a JSON/YAML object of objects, names a webhook
/// the configuration does not have, has an unknown setting, or a `tlsServerName` that is
/// neither a DNS-1123 subdomain nor an IP address.
pub(crate) fn parse(
    annotations: Option<&BTreeMap<String, String>>,
    webhook_names: &[&str],
) -> Result<HashMap<String, WebhookOptions>, ErrorList> {
    let Some(text) = annotations.and_then(|a| a.get(ANNOTATION)) else {
        return Ok(HashMap::new());
    };
    let options: BTreeMap<String, WebhookOptions> = serde_yaml_ng::from_str(text).map_err(|e| {
        // The parser's message stands where the value would: a YAML value can be long.
        vec![FieldError::new(
            ErrorType::Invalid,
            field(),
            BadValue::Omitted,
            e.to_string(),
        )]
    })?;
    let mut problems = ErrorList::new();
    for (name, o) in &options {
        let at = format!("{}[{name:?}]", field());
        if !webhook_names.contains(&name.as_str()) {
            problems.push(FieldError::new(
                ErrorType::NotFound,
                at.clone(),
                BadValue::Omitted,
                format!(
                    "this configuration has no webhook {name:?} (it has {})",
                    webhook_names.join(", ")
                ),
            ));
        }
        if let Some(t) = o.max_timeout_seconds {
            if !(1..=30).contains(&t) {
                problems.push(FieldError::invalid(
                    format!("{at}.maxTimeoutSeconds"),
                    t,
                    "must be between 1 and 30 seconds",
                ));
            }
        }
        if o.max_concurrent_calls == Some(0) {
            problems.push(FieldError::invalid(
                format!("{at}.maxConcurrentCalls"),
                0,
                "must be at least 1",
            ));
        }
        if let Some(server) = &o.tls_server_name {
            if !names::is_dns1123_subdomain(server) && server.parse::<std::net::IpAddr>().is_err() {
                problems.push(FieldError::invalid(
                    format!("{at}.tlsServerName"),
                    server,
                    "must be a DNS name or an IP address",
                ));
            }
        }
    }
    if problems.is_empty() {
        Ok(options.into_iter().collect())
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotations(value: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(ANNOTATION.to_string(), value.to_string())])
    }

    /// The errors as the `(field, message)` pairs a configuration problem shows.
    fn pairs(errors: ErrorList) -> Vec<(String, String)> {
        errors
            .into_iter()
            .map(|e| {
                let message = e.body();
                (e.field, message)
            })
            .collect()
    }

    #[test]
    fn parses_server_names_by_webhook() {
        let a = annotations(r#"{"a.example.com": {"tlsServerName": "hook.ns.svc"}}"#);
        let parsed = parse(Some(&a), &["a.example.com", "b.example.com"]).unwrap();
        assert_eq!(
            parsed["a.example.com"].tls_server_name.as_deref(),
            Some("hook.ns.svc")
        );
        assert!(parse(None, &["a.example.com"]).unwrap().is_empty());
    }

    #[test]
    fn parses_modes_and_timeout_caps() {
        let a = annotations(r#"{"a.example.com": {"mode": "Warn", "maxTimeoutSeconds": 3}}"#);
        let parsed = parse(Some(&a), &["a.example.com"]).unwrap();
        assert_eq!(parsed["a.example.com"].mode, Some(Mode::Warn));
        assert_eq!(parsed["a.example.com"].max_timeout_seconds, Some(3));
        let a = annotations(r#"{"a.example.com": {"mode": "Audit", "maxTimeoutSeconds": 31}}"#);
        let problems = pairs(parse(Some(&a), &["a.example.com"]).unwrap_err());
        assert!(
            problems[0].1.contains("unknown variant `Audit`"),
            "{problems:?}"
        );
        let a = annotations(r#"{"a.example.com": {"maxTimeoutSeconds": 31}}"#);
        let problems = pairs(parse(Some(&a), &["a.example.com"]).unwrap_err());
        assert!(
            problems[0].0.ends_with(".maxTimeoutSeconds"),
            "{problems:?}"
        );
        assert!(problems[0].1.contains("between 1 and 30"), "{problems:?}");
    }

    #[test]
    fn unknown_names_settings_and_bad_server_names_are_located() {
        let a = annotations(r#"{"c.example.com": {"tlsServerName": "Not A Name"}}"#);
        let problems = pairs(parse(Some(&a), &["a.example.com"]).unwrap_err());
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].1.contains("no webhook \"c.example.com\""));
        assert!(problems[1].0.ends_with("[\"c.example.com\"].tlsServerName"));
        let a = annotations(r#"{"a.example.com": {"tlsServername": "x.y"}}"#);
        let problems = pairs(parse(Some(&a), &["a.example.com"]).unwrap_err());
        assert!(
            problems[0].1.contains("unknown field `tlsServername`"),
            "{problems:?}"
        );
    }
}
