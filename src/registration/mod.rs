//! `admission-proxy registration`: the Validating/MutatingWebhookConfigurations that register
//! the proxy with kube-apiserver in place of the legacy webhooks of a loaded configuration.
//! Depends on `api`, `config`, `conversion` (the equivalence table, in `coverage`), `matching`
//! (the namespace name label) and `served`.
//!
//! Each legacy webhook becomes one proxy webhook with the same name (denials and failures
//! read as before), the legacy `namespaceSelector`, `objectSelector`, `matchPolicy` and
//! `failurePolicy`, and rules that cover what the legacy rules cover, so kube-apiserver never
//! calls the proxy for a request the legacy webhook would not get (KEP-492 "Webhook
//! selection"; the proxy re-applies them, plus the `matchConditions`, which stay with the
//! proxy). Differences, and why:
//! - `rules`: the legacy ones for matchPolicy Exact; for Equivalent, widened to every version
//!   the proxy converts from (`coverage::registration_rules`): kube-apiserver only knows
//!   equivalents it serves, so a rule for a removed version would never reach the proxy;
//! - `clientConfig` is the proxy's Service, path `/webhooks/{validating|mutating}/{name}`;
//! - `timeoutSeconds` is one second above the legacy one (at most 30): the proxy spends up
//!   to the legacy timeout on the backend and answers by failurePolicy before kube-apiserver's
//!   own deadline;
//! - `namespaceSelector` also excludes the proxy's own namespace, so that the proxy's pods can
//!   always be created (a proxy that is down must not block its own rollout);
//! - `sideEffects` is `NoneOnDryRun` for a legacy `NoneOnDryRun` webhook, else `None`: the
//!   proxy rejects dry-run requests itself for legacy `Unknown`/`Some` webhooks, as
//!   kube-apiserver would, without calling them;
//! - `admissionReviewVersions` is `[v1, v1beta1]`: the proxy speaks both and converts.
//!
//! Mutating webhooks keep their order (kube-apiserver calls them by configuration name, then
//! list order: each configuration keeps its list order, and its name gets only a suffix) and
//! their `reinvocationPolicy`.
//!
//! `registration --chain` ([`chain`]) registers each configuration once instead, as one
//! webhook calling the proxy's chain route, which runs the configuration's webhooks itself.

use serde_json::{json, Value};

use crate::api::WebhookType;
use crate::api::{
    FailurePolicy, LabelSelector, LabelSelectorRequirement, MatchPolicy, SideEffects,
};
use crate::config::{Problem, Snapshot, Webhook};
use crate::matching::namespaces::METADATA_NAME_LABEL;
use crate::served::ServedResources;

pub mod chain;
pub(crate) mod coverage;

pub use chain::{chain_objects, render_chains};

/// Where kube-apiserver reaches the proxy, and how it trusts it.
#[derive(Clone, Debug)]
pub struct Options {
    /// The proxy's Service: namespace, name, port.
    pub namespace: String,
    /// The proxy's Service name.
    pub service: String,
    /// The Service port kube-apiserver calls.
    pub port: u16,
    /// `caBundle` (base64 of the PEM CA that signed the proxy's serving certificate); `None`
    /// leaves it to cert-manager's CA injector (`inject_ca_from`) or to the user.
    pub ca_bundle: Option<String>,
    /// `cert-manager.io/inject-ca-from` value (`NAMESPACE/CERTIFICATE`), if any.
    pub inject_ca_from: Option<String>,
    /// Appended to each legacy configuration's name, so that both can exist during cutover.
    pub name_suffix: String,
    /// The cluster's served resources (`--discover`): when given, only served versions are
    /// registered.
    pub served: Option<ServedResources>,
}

/// Why a `--service` value is not a service reference.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// No `/`, or an empty namespace or name: the whole value.
    #[error("{0:?} is not NAMESPACE/NAME[:PORT]")]
    Shape(String),
    /// The text after `:` is not a port number from 1 to 65535.
    #[error("{0:?} is not a port (1-65535)")]
    Port(String),
}

/// Parses `NAMESPACE/NAME[:PORT]` (port 443 by default, as in `ServiceReference`).
///
/// # Errors
/// [`ServiceError`] when the namespace, the name or the port is missing or invalid.
pub fn parse_service(s: &str) -> Result<(String, String, u16), ServiceError> {
    let (namespace, rest) = s
        .split_once('/')
        .ok_or_else(|| ServiceError::Shape(s.to_string()))?;
    let (name, port) = match rest.split_once(':') {
        Some((name, port)) => (
            name,
            port.parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| ServiceError::Port(port.to_string()))?,
        ),
        None => (rest, 443),
    };
    if namespace.is_empty() || name.is_empty() {
        return Err(ServiceError::Shape(s.to_string()));
    }
    Ok((namespace.to_string(), name.to_string(), port))
}

/// The registration objects for every webhook of `snapshot`: one configuration per legacy
/// configuration, validating first, each sorted by name, as a multi-document YAML stream.
pub fn render(snapshot: &Snapshot, options: &Options) -> String {
    let mut out = String::new();
    for object in objects(snapshot, options) {
        out.push_str("---\n");
        out.push_str(&serde_yaml_ng::to_string(&object).unwrap_or_default());
    }
    out
}

/// The registration objects as JSON values (see [`render`]).
pub fn objects(snapshot: &Snapshot, options: &Options) -> Vec<Value> {
    let mut out = Vec::new();
    for webhook_type in [WebhookType::Validating, WebhookType::Mutating] {
        for (configuration, webhooks) in snapshot.configurations(webhook_type) {
            out.push(configuration_object(
                webhook_type,
                configuration,
                webhooks
                    .iter()
                    .map(|w| webhook(w, snapshot, options))
                    .collect(),
                options,
            ));
        }
    }
    out
}

/// One registration object: the legacy configuration's name plus `name_suffix`, labelled as
/// the proxy's, annotated with the legacy name (and cert-manager's CA injection), holding
/// `webhooks`.
fn configuration_object(
    webhook_type: WebhookType,
    configuration: &str,
    webhooks: Vec<Value>,
    options: &Options,
) -> Value {
    let mut metadata = json!({
        "name": format!("{configuration}{}", options.name_suffix),
        "labels": {"app.kubernetes.io/managed-by": "admission-proxy"},
        "annotations": {"admission-proxy.io/registered-for": configuration},
    });
    if let Some(from) = &options.inject_ca_from {
        metadata["annotations"]["cert-manager.io/inject-ca-from"] = json!(from);
    }
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": webhook_type.configuration_kind(),
        "metadata": metadata,
        "webhooks": webhooks,
    })
}

/// `clientConfig`: the proxy's Service with `path`, and `caBundle` when given.
fn client_config(path: String, options: &Options) -> Value {
    let mut client_config = json!({
        "service": {
            "namespace": options.namespace,
            "name": options.service,
            "port": options.port,
            "path": path,
        }
    });
    if let Some(ca) = &options.ca_bundle {
        client_config["caBundle"] = json!(ca);
    }
    client_config
}

/// The rules the proxy is registered with for `w` ([`coverage::registration_rules`]).
pub(crate) fn rules_for(
    w: &Webhook,
    snapshot: &Snapshot,
    served: Option<&ServedResources>,
) -> Vec<crate::api::RuleWithOperations> {
    coverage::registration_rules(
        &w.spec.rules,
        w.matcher.match_policy == MatchPolicy::Equivalent,
        &snapshot.custom_resources,
        served,
    )
}

/// `rules` with `scope: "*"` where it is unset, as kube-apiserver stores them
/// (`SetDefaults_Rule` in `pkg/apis/admissionregistration/v1/defaults.go`): an applied object
/// equal to the stored one, so `kubectl apply` and GitOps tools see no drift.
fn rules_with_defaults(
    mut rules: Vec<crate::api::RuleWithOperations>,
) -> Vec<crate::api::RuleWithOperations> {
    for rule in &mut rules {
        rule.scope.get_or_insert_with(|| "*".to_string());
    }
    rules
}

fn webhook(w: &Webhook, snapshot: &Snapshot, options: &Options) -> Value {
    let client_config = client_config(
        format!("/webhooks/{}/{}", w.webhook_type.as_str(), w.name),
        options,
    );
    let side_effects = match w.side_effects {
        SideEffects::NoneOnDryRun => "NoneOnDryRun",
        _ => "None",
    };
    let timeout = (w.timeout.as_secs() + 1).min(30);
    let mut hook = json!({
        "name": w.name,
        "clientConfig": client_config,
        "rules": rules_with_defaults(rules_for(w, snapshot, options.served.as_ref())),
        "namespaceSelector": excluding_namespace(w.spec.namespace_selector.as_ref(), &options.namespace),
        "objectSelector": w.spec.object_selector.clone().unwrap_or_default(),
        "matchPolicy": match w.matcher.match_policy {
            MatchPolicy::Exact => "Exact",
            MatchPolicy::Equivalent => "Equivalent",
        },
        "failurePolicy": match w.failure_policy() {
            FailurePolicy::Fail => "Fail",
            FailurePolicy::Ignore => "Ignore",
        },
        "sideEffects": side_effects,
        "timeoutSeconds": timeout,
        "admissionReviewVersions": ["v1", "v1beta1"],
    });
    if w.webhook_type == WebhookType::Mutating {
        // v1's default, as the legacy configuration would have been read.
        hook["reinvocationPolicy"] = json!(w.reinvocation_policy.as_str());
    }
    hook
}

/// Every legacy rule that no resource in `served` reaches, directly or (matchPolicy
/// Equivalent) through a version the proxy converts from
/// (`coverage::unreachable_rules`): one problem per rule, with its file, configuration,
/// webhook and field path, webhooks sorted by type and name. The webhook is never called for
/// what such a rule names, directly or through the proxy.
pub fn unreachable(snapshot: &Snapshot, served: &ServedResources) -> Vec<Problem> {
    let mut webhooks: Vec<&Webhook> = snapshot.webhooks().map(|w| &**w).collect();
    webhooks.sort_by(|a, b| (a.webhook_type, &a.name).cmp(&(b.webhook_type, &b.name)));
    let mut out = Vec::new();
    for w in webhooks {
        let equivalent = w.matcher.match_policy == MatchPolicy::Equivalent;
        for i in coverage::unreachable_rules(
            &w.spec.rules,
            equivalent,
            &snapshot.custom_resources,
            served,
        ) {
            let how = if equivalent {
                ", directly or through a version the proxy converts from"
            } else {
                " under matchPolicy Exact"
            };
            out.push(Problem {
                file: w.source.clone(),
                document: None,
                kind: Some(w.webhook_type.configuration_kind().to_string()),
                configuration: Some(w.configuration.clone()),
                webhook: Some(w.name.clone()),
                field: format!("webhooks[{}].rules[{i}]", w.index),
                message: format!("no resource the cluster serves matches this rule{how}: the webhook is never called for it"),
            });
        }
    }
    out
}

/// `selector` with `kubernetes.io/metadata.name NotIn [namespace]` added.
fn excluding_namespace(selector: Option<&LabelSelector>, namespace: &str) -> LabelSelector {
    let mut selector = selector.cloned().unwrap_or_default();
    selector
        .match_expressions
        .get_or_insert_with(Vec::new)
        .push(LabelSelectorRequirement {
            key: METADATA_NAME_LABEL.to_string(),
            operator: "NotIn".to_string(),
            values: Some(vec![namespace.to_string()]),
        });
    selector
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_references() {
        assert_eq!(
            parse_service("webhooks/admission-proxy").unwrap(),
            ("webhooks".into(), "admission-proxy".into(), 443)
        );
        assert_eq!(parse_service("ns/svc:8443").unwrap().2, 8443);
        for bad in ["svc", "/svc", "ns/", "ns/svc:0", "ns/svc:http"] {
            assert!(parse_service(bad).is_err(), "{bad}");
        }
    }
}
