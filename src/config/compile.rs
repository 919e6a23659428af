//! Compilation: one configuration object decoded, defaulted, validated and built into
//! [`Webhook`]s (backends shared, selectors and matchConditions compiled once), then the proxy's
//! own per-webhook options applied.

use super::*;

/// Parses, defaults, validates and compiles one configuration object
/// (`validateValidatingWebhookConfiguration` and `validateMutatingWebhookConfiguration` in
/// `pkg/apis/admissionregistration/validation/validation.go`), then applies the proxy's own
/// webhook options. `None` when it has any problem (all of them are in `errors`).
pub(super) fn compile_configuration(
    value: serde_json::Value,
    prefix: &str,
    base: &Problem,
    backends: &mut Backends,
    errors: &mut Vec<Problem>,
    warnings: &mut Vec<Problem>,
) -> Option<Vec<Webhook>> {
    let scope = configuration_scope(&value, prefix, base, errors)?;
    // From a reference: the value is only needed again to name the webhook of an error.
    let config = decode_configuration(&value, &scope, errors)?;
    // The JSON tree is as large as the compiled webhooks: freed before they are built.
    drop(value);
    let before = errors.len();
    // `ValidateObjectMeta` with `NameIsDNSSubdomain`.
    if !names::is_dns1123_subdomain(&config.metadata.name) {
        errors.push(scope.base.located(FieldError::invalid(
            format!("{prefix}metadata.name"),
            &config.metadata.name,
            "a configuration name must be a DNS-1123 subdomain",
        )));
    }
    let mut out = compile_webhooks(&config, &scope, backends, errors, warnings);
    apply_options(&config, &scope, &mut out, errors);
    (errors.len() == before).then_some(out)
}

/// One configuration object being compiled: where its problems are, and what its `kind` and
/// `apiVersion` say.
pub(super) struct ConfigurationScope<'a> {
    /// `items[i].` inside a `List`, else empty: the prefix of every field path.
    prefix: &'a str,
    /// The file and document, with the configuration's kind and name.
    base: Problem,
    webhook_type: WebhookType,
    /// `admissionregistration.k8s.io/v1beta1`, whose defaults differ from v1's.
    v1beta1: bool,
}

impl ConfigurationScope<'_> {
    /// A problem of `webhooks[index]`, named `name`, at `field` (relative to the webhook).
    fn webhook_problem(&self, index: usize, name: &str, field: &str, message: String) -> Problem {
        let dot = if field.is_empty() { "" } else { "." };
        Problem {
            webhook: Some(name.to_string()),
            field: format!("{}webhooks[{index}]{dot}{field}", self.prefix),
            message,
            ..self.base.clone()
        }
    }
}

/// The configuration's kind (the webhook type) and apiVersion, as the API server's decoder
/// recognises them; `None`, with the problem in `errors`, for anything else.
pub(super) fn configuration_scope<'a>(
    value: &serde_json::Value,
    prefix: &'a str,
    base: &Problem,
    errors: &mut Vec<Problem>,
) -> Option<ConfigurationScope<'a>> {
    let string_at = |key: &str| value.get(key).and_then(|v| v.as_str()).unwrap_or("");
    let kind = string_at("kind");
    let base = Problem {
        kind: Some(kind.to_string()),
        configuration: value
            .pointer("/metadata/name")
            .and_then(|n| n.as_str())
            .map(str::to_string),
        ..base.clone()
    };
    let webhook_type = match kind {
        "ValidatingWebhookConfiguration" => WebhookType::Validating,
        "MutatingWebhookConfiguration" => WebhookType::Mutating,
        other => {
            errors.push(base.located(FieldError::new(
                ErrorType::NotSupported,
                format!("{prefix}kind"),
                other.into(),
                "expected ValidatingWebhookConfiguration, MutatingWebhookConfiguration, CustomResourceDefinition or a List of them",
            )));
            return None;
        }
    };
    let v1beta1 = match string_at("apiVersion") {
        "admissionregistration.k8s.io/v1" => false,
        "admissionregistration.k8s.io/v1beta1" => true,
        other => {
            errors.push(base.located(FieldError::new(
                ErrorType::NotSupported,
                format!("{prefix}apiVersion"),
                other.into(),
                "expected admissionregistration.k8s.io/v1 or admissionregistration.k8s.io/v1beta1",
            )));
            return None;
        }
    };
    Some(ConfigurationScope {
        prefix,
        base,
        webhook_type,
        v1beta1,
    })
}

/// Decodes the configuration (unknown fields refused, as the API server's strict decoding
/// does); a decoding problem names the field path and, when it is inside one, the webhook.
pub(super) fn decode_configuration(
    value: &serde_json::Value,
    scope: &ConfigurationScope<'_>,
    errors: &mut Vec<Problem>,
) -> Option<api::WebhookConfiguration> {
    match serde_path_to_error::deserialize(value) {
        Ok(c) => Some(c),
        Err(e) => {
            let path = e.path().to_string();
            errors.push(Problem {
                webhook: webhook_name_at(value, &path),
                field: format!("{}{path}", scope.prefix),
                message: e.into_inner().to_string(),
                ..scope.base.clone()
            });
            None
        }
    }
}

/// Compiles every webhook of `config` ([`compile_webhook`]), with the checks that need the
/// configuration: names unique within it (`validateValidatingWebhookConfiguration`:
/// `hookNames`) and `reinvocationPolicy` on mutating webhooks only. Returns the valid ones.
pub(super) fn compile_webhooks(
    config: &api::WebhookConfiguration,
    scope: &ConfigurationScope<'_>,
    backends: &mut Backends,
    errors: &mut Vec<Problem>,
    warnings: &mut Vec<Problem>,
) -> Vec<Webhook> {
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(config.webhooks.len());
    for (i, hook) in config.webhooks.iter().enumerate() {
        let problem = |field: &str, message| scope.webhook_problem(i, &hook.name, field, message);
        if scope.webhook_type == WebhookType::Validating && hook.reinvocation_policy.is_some() {
            errors.push(problem(
                "reinvocationPolicy",
                "unknown field `reinvocationPolicy`: it exists only on MutatingWebhook".into(),
            ));
        }
        if !seen.insert(hook.name.clone()) {
            let duplicate = FieldError::duplicate("name", &hook.name);
            errors.push(problem(&duplicate.field, duplicate.body()));
        }
        match compile_webhook(hook, scope.v1beta1, scope.webhook_type, backends) {
            Ok((webhook, hook_warnings)) => {
                warnings.extend(hook_warnings.into_iter().map(|(f, m)| problem(&f, m)));
                out.push(Webhook {
                    configuration: config.metadata.name.clone(),
                    index: i,
                    source: scope.base.file.clone(),
                    ..webhook
                });
            }
            Err(problems) => errors.extend(problems.into_iter().map(|(f, m)| problem(&f, m))),
        }
    }
    out
}

/// Applies the proxy's webhook options annotation ([`options::parse`]) to the compiled
/// webhooks of `config`; kube-apiserver has no such thing.
pub(super) fn apply_options(
    config: &api::WebhookConfiguration,
    scope: &ConfigurationScope<'_>,
    out: &mut [Webhook],
    errors: &mut Vec<Problem>,
) {
    let names: Vec<&str> = config.webhooks.iter().map(|w| w.name.as_str()).collect();
    match options::parse(config.metadata.annotations.as_ref(), &names) {
        Ok(mut options) => {
            for webhook in out {
                if let Some(o) = options.remove(&webhook.name) {
                    apply_webhook_options(webhook, o, scope, errors);
                }
            }
        }
        Err(problems) => {
            errors.extend(
                problems
                    .into_iter()
                    .map(|e| scope.base.located(e.prefixed(scope.prefix))),
            );
        }
    }
}

/// One webhook's options: tlsServerName (https backends only), mode, maxConcurrentCalls and
/// maxTimeoutSeconds.
pub(super) fn apply_webhook_options(
    webhook: &mut Webhook,
    o: options::WebhookOptions,
    scope: &ConfigurationScope<'_>,
    errors: &mut Vec<Problem>,
) {
    if o.tls_server_name.is_some() && !webhook.backend.tls {
        let plain = FieldError::new(
            ErrorType::Invalid,
            format!("{}{}", scope.prefix, options::field()),
            BadValue::Omitted,
            format!(
                "tlsServerName needs an https backend, and {} is plain http",
                webhook.backend.url
            ),
        );
        errors.push(Problem {
            webhook: Some(webhook.name.clone()),
            ..scope.base.located(plain)
        });
    }
    if o.tls_server_name.is_some() {
        // This webhook's own copy: the backend may be shared with others.
        std::sync::Arc::make_mut(&mut webhook.backend).set_server_name(o.tls_server_name);
    }
    webhook.mode = o.mode;
    webhook.registered = o.registered.unwrap_or(true);
    webhook.call_slots = o.max_concurrent_calls.map(|max| CallSlots {
        max,
        slots: tokio::sync::Semaphore::new(max),
    });
    if let Some(cap) = o.max_timeout_seconds {
        webhook.timeout = webhook.timeout.min(Duration::from_secs(cap));
    }
}

/// The name of the webhook a serde path like `webhooks[2].rules[0]` points into.
pub(super) fn webhook_name_at(value: &serde_json::Value, path: &str) -> Option<String> {
    let rest = path.strip_prefix("webhooks[")?;
    let index: usize = rest.split(']').next()?.parse().ok()?;
    value
        .get("webhooks")?
        .get(index)?
        .get("name")?
        .as_str()
        .map(str::to_string)
}

/// A field error as a `(field, message)` problem: the message is its body (`ErrorBody`).
pub(super) fn field_problem(error: FieldError) -> (String, String) {
    let message = error.body();
    (error.field, message)
}

/// The backends of one load, one per distinct `clientConfig`: webhooks that call the same
/// backend with the same `caBundle` share its parsed trust roots (about 4 KB each), which
/// would otherwise be kept once per webhook.
#[derive(Default)]
pub(super) struct Backends(HashMap<api::WebhookClientConfig, Arc<Backend>>);

impl Backends {
    /// The backend `cc` names, built on first use. Errors: [`Backend::from_client_config`]'s.
    fn get(&mut self, cc: &api::WebhookClientConfig) -> Result<Arc<Backend>, FieldError> {
        if let Some(backend) = self.0.get(cc) {
            return Ok(backend.clone());
        }
        let backend = Arc::new(Backend::from_client_config(cc)?);
        self.0.insert(cc.clone(), backend.clone());
        Ok(backend)
    }
}

/// Defaults (`defaults.go` of the webhook's API version), validates (`validation.go`,
/// `ValidateValidatingWebhookConfiguration` and its mutating twin) and compiles one webhook.
/// Returns the webhook and its warnings, or every `(field, message)` problem found. The steps
/// run in the order their problems are reported (pinned by the tests and `check`).
pub(super) fn compile_webhook(
    hook: &api::Webhook,
    v1beta1: bool,
    webhook_type: WebhookType,
    backends: &mut Backends,
) -> Result<(Webhook, FieldProblems), FieldProblems> {
    let mut problems: FieldProblems = Vec::new();
    let mut warnings: FieldProblems = Vec::new();
    let mut bad = |error: FieldError| problems.push(field_problem(error));
    validate_webhook_name(&hook.name, &mut bad);
    let failure_policy = default_failure_policy(hook.failure_policy.as_deref(), v1beta1, &mut bad);
    let match_policy = default_match_policy(hook.match_policy.as_deref(), v1beta1, &mut bad);
    warnings.extend(removed::warnings(&hook.rules, match_policy));
    let side_effects = default_side_effects(hook.side_effects.as_deref(), v1beta1, &mut bad);
    warnings.extend(side_effects_warning(side_effects));
    let timeout_seconds = default_timeout_seconds(hook.timeout_seconds, v1beta1, &mut bad);
    let review_version = validate_review_versions(hook, v1beta1, &mut bad);
    let reinvocation_policy =
        default_reinvocation_policy(hook.reinvocation_policy.as_deref(), &mut bad);
    for (i, rule) in hook.rules.iter().enumerate() {
        crate::matching::rules::validate_rule(rule, &format!("rules[{i}]"), &mut bad);
    }
    let [namespace_selector, object_selector] = compile_selectors(hook, &mut problems);
    let mut bad = |error: FieldError| problems.push(field_problem(error));
    let conditions = compile_match_conditions(&hook.match_conditions, &mut bad);
    let backend = client_config_backend(hook.client_config.as_ref(), backends, &mut bad);
    if let Some(e) = backend.as_ref().and_then(|b| b.rest_client_error.as_ref()) {
        warnings.push((
            "clientConfig.caBundle".into(),
            format!("holds no usable certificate: kube-apiserver accepts it and every call fails when it builds the client (could not get REST client: {e}); the proxy fails each call so too, by failurePolicy"),
        ));
    }
    match backend {
        Some(backend) if problems.is_empty() => {
            let matcher = Matcher {
                rules: hook.rules.iter().map(Rule::new).collect(),
                namespace_selector,
                object_selector,
                match_conditions: MatchConditions::new(conditions),
                failure_policy,
                match_policy,
                custom_resources: Arc::default(),
            };
            let timeout = Duration::from_secs(timeout_seconds as u64);
            let webhook = build_webhook(
                hook,
                webhook_type,
                matcher,
                (side_effects, reinvocation_policy),
                timeout,
                review_version,
                backend,
            );
            Ok((webhook, warnings))
        }
        _ => Err(problems),
    }
}

/// namespaceSelector then objectSelector: validated (`ValidateLabelSelector` in
/// `apimachinery/pkg/apis/meta/v1/validation`, called by `validateValidatingWebhook`), then
/// compiled. An invalid selector compiles as the empty one: the webhook is refused anyway.
pub(super) fn compile_selectors(
    hook: &api::Webhook,
    problems: &mut FieldProblems,
) -> [LabelSelector; 2] {
    let mut selectors = [LabelSelector::default(), LabelSelector::default()];
    for (slot, (field, selector)) in selectors.iter_mut().zip([
        ("namespaceSelector", &hook.namespace_selector),
        ("objectSelector", &hook.object_selector),
    ]) {
        crate::matching::selector::validate_label_selector(selector.as_ref(), field, &mut |e| {
            problems.push(field_problem(e));
        });
        *slot = LabelSelector::compile(selector.as_ref()).unwrap_or_default();
    }
    selectors
}

/// matchConditions: at most 64, each with a unique qualified name and an expression that
/// compiles (`validateMatchConditions` in `validation.go`). Returns the compiled ones.
pub(crate) fn compile_match_conditions(
    match_conditions: &[api::MatchCondition],
    bad: &mut impl FnMut(FieldError),
) -> Vec<MatchCondition> {
    if match_conditions.len() > 64 {
        bad(FieldError::too_many(
            "matchConditions",
            match_conditions.len() as i64,
            64,
        ));
    }
    let mut conditions = Vec::new();
    let mut condition_names = HashSet::new();
    for (i, mc) in match_conditions.iter().enumerate() {
        let at = FieldPath::new("matchConditions").index(i);
        if mc.name.is_empty() {
            bad(FieldError::required(at.clone().child("name"), ""));
        } else {
            for msg in names::qualified_name_errors(&mc.name) {
                bad(FieldError::invalid(at.clone().child("name"), &mc.name, msg));
            }
            if !condition_names.insert(mc.name.clone()) {
                bad(FieldError::duplicate(at.clone().child("name"), &mc.name));
            }
        }
        if mc.expression.trim().is_empty() {
            bad(FieldError::required(at.child("expression"), ""));
            continue;
        }
        match MatchCondition::compile(&mc.name, &mc.expression) {
            Ok(c) => conditions.push(c),
            Err(e) => bad(e.field_error(at.child("expression"), &mc.expression)),
        }
    }
    conditions
}

/// The backend `clientConfig` names, shared through `backends`; it is required and validated
/// as `ValidateWebhookURL` and `ValidateWebhookService` do
/// (`staging/src/k8s.io/apiserver/pkg/util/webhook/validation.go`).
pub(super) fn client_config_backend(
    client_config: Option<&api::WebhookClientConfig>,
    backends: &mut Backends,
    bad: &mut impl FnMut(FieldError),
) -> Option<Arc<Backend>> {
    match client_config {
        None => {
            bad(FieldError::required("clientConfig", ""));
            None
        }
        Some(cc) => match backends.get(cc) {
            Ok(b) => Some(b),
            Err(error) => {
                bad(error);
                None
            }
        },
    }
}

/// The compiled webhook of a valid `hook`; its configuration, index and source are filled in
/// by [`compile_configuration`], its options by [`apply_options`].
pub(super) fn build_webhook(
    hook: &api::Webhook,
    webhook_type: WebhookType,
    matcher: Matcher,
    (side_effects, reinvocation_policy): (SideEffects, ReinvocationPolicy),
    timeout: Duration,
    review_version: Option<ReviewVersion>,
    backend: Arc<Backend>,
) -> Webhook {
    Webhook {
        name: hook.name.clone(),
        configuration: String::new(),
        index: 0,
        webhook_type,
        // The backend holds what clientConfig says; the caBundle is not kept twice.
        spec: api::Webhook {
            client_config: None,
            ..hook.clone()
        },
        source: PathBuf::new(),
        matcher,
        side_effects,
        reinvocation_policy,
        timeout,
        mode: None,
        registered: true,
        call_slots: None,
        review_version,
        backend,
        metrics: WebhookMetrics::new(&hook.name, webhook_type.as_str()),
        candidates: Vec::new(),
    }
}
