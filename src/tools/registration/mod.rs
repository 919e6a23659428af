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
//! - `clientConfig` is the proxy's Service, path `/webhooks/{validating|mutating}/{name}`, or
//!   with `--url` the proxy's URL with that path (kube-apiserver's static manifests take no
//!   `service`);
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
//!
//! `registration --static-manifests validating|mutating` writes for one of kube-apiserver's
//! KEP-5793 `staticManifestsDir`s ([`Options::static_manifests`]): that plugin's kind only,
//! names ending in `.static.k8s.io`, `clientConfig.url` and `caBundle`.

use serde_json::{json, Value};

use crate::api::WebhookType;
use crate::api::{
    FailurePolicy, LabelSelector, LabelSelectorRequirement, MatchPolicy, SideEffects,
};
use crate::config::static_manifests::{StaticPlugin, STATIC_CONFIG_SUFFIX};
use crate::config::{Problem, Snapshot, Webhook};
use crate::matching::namespaces::METADATA_NAME_LABEL;
use crate::served::ServedResources;

pub mod chain;
pub(crate) mod coverage;

pub use chain::{chain_objects, render_chains};

/// The label on every registration object naming the proxy it registers
/// ([`registration_id`]): what `registration --prune` lists the cluster's objects by, so
/// that another proxy's registrations are never pruned.
pub const REGISTRATION_LABEL: &str = "admission-proxy.io/registration";

/// The value of [`REGISTRATION_LABEL`]: the proxy's Service as `NAMESPACE.NAME`, or its URL's
/// host, made a valid label value (at most 63 characters of `[A-Za-z0-9._-]`, alphanumeric at
/// both ends; `ValidateLabels` in `staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/validation`).
pub fn registration_id(options: &Options) -> String {
    let raw = match &options.endpoint {
        Endpoint::Service { name, .. } => format!("{}.{name}", options.namespace),
        Endpoint::Url(base) => base
            .trim_start_matches("https://")
            .replace([':', '[', ']'], "-"),
    };
    let cleaned: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(63)
        .collect();
    cleaned
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

/// The registration objects `objects` (what is printed now) no longer includes among those the
/// cluster holds for this proxy (`listed`: the names of the Validating- and
/// MutatingWebhookConfigurations labelled [`REGISTRATION_LABEL`] with [`registration_id`]),
/// as `kubectl delete` takes them: `validatingwebhookconfiguration/NAME`, sorted.
pub fn prune_list(objects: &[Value], listed: &[(WebhookType, String)]) -> Vec<String> {
    let printed: std::collections::HashSet<(&str, &str)> = objects
        .iter()
        .filter_map(|o| Some((o["kind"].as_str()?, o["metadata"]["name"].as_str()?)))
        .collect();
    let mut out: Vec<String> = listed
        .iter()
        .filter(|(t, name)| !printed.contains(&(t.configuration_kind(), name.as_str())))
        .map(|(t, name)| format!("{}/{name}", t.configuration_kind().to_ascii_lowercase()))
        .collect();
    out.sort();
    out
}

/// Where kube-apiserver reaches the proxy, and how it trusts it.
#[derive(Clone, Debug)]
pub struct Options {
    /// The namespace the proxy's pods run in (the Service's, with [`Endpoint::Service`]):
    /// excluded from every namespaceSelector.
    pub namespace: String,
    /// How kube-apiserver reaches the proxy: `clientConfig.service` or `clientConfig.url`.
    pub endpoint: Endpoint,
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
    /// Written for kube-apiserver's static manifests directory of this plugin
    /// (`staticManifestsDir`, KEP-5793): only the plugin's kind (one plugin per directory),
    /// and each name ending in `.static.k8s.io` (appended to the suffixed name unless it
    /// already ends so). The loader also wants `url` and `caBundle` on every webhook; the
    /// caller checks the output with [`crate::config::static_manifests::check`].
    pub static_manifests: Option<StaticPlugin>,
}

/// How kube-apiserver reaches the proxy.
#[derive(Clone, Debug)]
pub enum Endpoint {
    /// `clientConfig.service`: the proxy's Service in [`Options::namespace`].
    Service {
        /// The Service's name.
        name: String,
        /// The Service port kube-apiserver calls.
        port: u16,
    },
    /// `clientConfig.url`: this base (`https://HOST[:PORT]`, as [`parse_url`] returns it)
    /// with each webhook's route appended.
    Url(String),
}

/// Why a `--url` value is not where kube-apiserver can call the proxy: kube-apiserver's
/// rules for a webhook URL (`ValidateWebhookURL` in
/// `staging/src/k8s.io/apiserver/pkg/util/webhook/validation.go`, https only), plus no path
/// of its own, since the proxy's routes start at `/`.
#[derive(Debug, thiserror::Error)]
pub enum UrlError {
    /// Not a URL at all.
    #[error("url must be a valid URL: {0}; desired format: https://host[:port]")]
    Parse(url::ParseError),
    /// A scheme other than https.
    #[error("{0:?}: 'https' is the only allowed URL scheme; desired format: https://host[:port]")]
    Scheme(String),
    /// No host, a user, a query or a fragment: what kube-apiserver refuses in any webhook URL.
    #[error("{0}; desired format: https://host[:port]")]
    Refused(crate::backend::UrlRefusal),
    /// A path other than `/`.
    #[error("{0:?}: give the proxy's URL without a path; each webhook's route (/webhooks/...) is appended")]
    Path(String),
}

/// Parses `https://HOST[:PORT]`, where kube-apiserver reaches the proxy; returns it without
/// a trailing `/` (port 443 is dropped, as a URL writes it).
///
/// # Errors
/// [`UrlError`] for what kube-apiserver refuses in a webhook URL, and for a path.
pub fn parse_url(s: &str) -> Result<String, UrlError> {
    let url = url::Url::parse(s).map_err(UrlError::Parse)?;
    if url.scheme() != "https" {
        return Err(UrlError::Scheme(url.scheme().to_string()));
    }
    crate::backend::refuse_url_parts(s, &url).map_err(UrlError::Refused)?;
    if url.path() != "/" {
        return Err(UrlError::Path(url.path().to_string()));
    }
    // An empty `?` or `#` passed the rules above; the base carries neither.
    let mut base = url;
    base.set_query(None);
    base.set_fragment(None);
    Ok(base.as_str().trim_end_matches('/').to_string())
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
///
/// # Errors
/// As [`objects`].
pub fn render(snapshot: &Snapshot, options: &Options) -> Result<String, Vec<Problem>> {
    let mut out = String::new();
    for object in objects(snapshot, options)? {
        out.push_str("---\n");
        out.push_str(&serde_yaml_ng::to_string(&object).unwrap_or_default());
    }
    Ok(out)
}

/// The registration objects as JSON values (see [`render`]).
///
/// # Errors
/// One [`Problem`] per configuration whose registration name ([`configuration_name`]) is
/// no DNS-1123 subdomain, as kube-apiserver requires of `metadata.name`; nothing is returned
/// then, so that a partial registration is never applied.
pub fn objects(snapshot: &Snapshot, options: &Options) -> Result<Vec<Value>, Vec<Problem>> {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for webhook_type in webhook_types(options) {
        for (configuration, webhooks) in snapshot.configurations(webhook_type) {
            // A webhook with `registered: false` is being retired: kube-apiserver is to stop
            // calling the proxy for it (a configuration left with none is not printed, and
            // `registration --prune` names it).
            let registered: Vec<Value> = webhooks
                .iter()
                .filter(|w| w.registered)
                .map(|w| webhook(w, snapshot, options))
                .collect();
            if registered.is_empty() {
                continue;
            }
            if let Some(problem) = invalid_name(configuration, webhooks, options) {
                problems.push(problem);
                continue;
            }
            out.push(configuration_object(
                webhook_type,
                configuration,
                registered,
                options,
            ));
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// The problem with the registration's name for `configuration`, if it is no DNS-1123
/// subdomain (`ValidateObjectMeta` with `NameIsDNSSubdomain`: at most 253 characters of
/// lower-case labels): a 240-character legacy name plus the default suffix is 256, and 270 with
/// `.static.k8s.io`. kube-apiserver would refuse the object (and its static manifests loader
/// the whole directory), so it is never printed.
pub(crate) fn invalid_name(
    configuration: &str,
    webhooks: &[std::sync::Arc<Webhook>],
    options: &Options,
) -> Option<Problem> {
    let name = configuration_name(configuration, options);
    if crate::names::is_dns1123_subdomain(&name) {
        return None;
    }
    let added = name.len().saturating_sub(configuration.len());
    let message = format!(
        "the registration's name {name:?} ({} characters: the legacy name and {added} added by --name-suffix{}) is not a DNS-1123 subdomain of at most 253 characters, which kube-apiserver requires; choose a shorter --name-suffix (the legacy name may have at most {} characters with this one)",
        name.len(),
        if options.static_manifests.is_some() { " and .static.k8s.io" } else { "" },
        253usize.saturating_sub(added),
    );
    let first = webhooks.first()?;
    Some(Problem::of_configuration(
        first,
        "metadata.name".to_string(),
        message,
    ))
}

/// The types registered: both, or the static manifests plugin's alone (kube-apiserver's
/// loader refuses the other kind in its directory).
fn webhook_types(options: &Options) -> Vec<WebhookType> {
    match options.static_manifests {
        None => vec![WebhookType::Validating, WebhookType::Mutating],
        Some(StaticPlugin::Validating) => vec![WebhookType::Validating],
        Some(StaticPlugin::Mutating) => vec![WebhookType::Mutating],
    }
}

/// The registration's name for the legacy configuration `configuration`: plus `name_suffix`,
/// and for static manifests plus `.static.k8s.io` unless it ends so already (the loader
/// refuses any other name; the suffix is reserved, so it cannot clash with an object of the
/// API).
fn configuration_name(configuration: &str, options: &Options) -> String {
    let name = format!("{configuration}{}", options.name_suffix);
    if options.static_manifests.is_some() && !name.ends_with(STATIC_CONFIG_SUFFIX) {
        format!("{name}{STATIC_CONFIG_SUFFIX}")
    } else {
        name
    }
}

/// One registration object: the legacy configuration's name plus `name_suffix`
/// ([`configuration_name`]), labelled as the proxy's, annotated with the legacy name (and
/// cert-manager's CA injection), holding `webhooks`.
fn configuration_object(
    webhook_type: WebhookType,
    configuration: &str,
    webhooks: Vec<Value>,
    options: &Options,
) -> Value {
    let mut metadata = json!({
        "name": configuration_name(configuration, options),
        "labels": {
            "app.kubernetes.io/managed-by": "admission-proxy",
            REGISTRATION_LABEL: registration_id(options),
        },
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

/// `clientConfig`: the proxy's Service with `path`, or its URL with `path` appended, and
/// `caBundle` when given.
fn client_config(path: String, options: &Options) -> Value {
    let mut client_config = match &options.endpoint {
        Endpoint::Service { name, port } => json!({
            "service": {
                "namespace": options.namespace,
                "name": name,
                "port": port,
                "path": path,
            }
        }),
        Endpoint::Url(base) => json!({ "url": format!("{base}{path}") }),
    };
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

    /// `--url`: what kube-apiserver accepts as a webhook URL, without a path of its own.
    #[test]
    fn proxy_urls() {
        for (url, base) in [
            ("https://10.0.0.5:8443", "https://10.0.0.5:8443"),
            ("https://10.0.0.5:8443/", "https://10.0.0.5:8443"),
            ("https://proxy.example.com:443", "https://proxy.example.com"),
            ("https://[fd00::5]:8443", "https://[fd00::5]:8443"),
            // An empty query or fragment is no query or fragment to kube-apiserver (Go's
            // `len(u.RawQuery) != 0`), and the base carries neither.
            ("https://10.0.0.5:8443?", "https://10.0.0.5:8443"),
            ("https://10.0.0.5:8443/#", "https://10.0.0.5:8443"),
        ] {
            assert_eq!(parse_url(url).unwrap(), base, "{url}");
        }
        for (bad, message) in [
            ("10.0.0.5:8443", "url must be a valid URL"),
            (
                "http://10.0.0.5:8443",
                "'https' is the only allowed URL scheme",
            ),
            ("https://user@10.0.0.5", "user information is not permitted"),
            // Go's url.Parse keeps an empty user (`u.User != nil`); a URL parser that drops it
            // must not let it through.
            ("https://@10.0.0.5", "user information is not permitted"),
            (
                "https://10.0.0.5/?a=b",
                "query parameters are not permitted",
            ),
            ("https://10.0.0.5/#x", "fragments are not permitted"),
            ("https://10.0.0.5/webhooks", "without a path"),
        ] {
            let e = parse_url(bad).unwrap_err().to_string();
            assert!(e.contains(message), "{bad}: {e}");
        }
    }
}
