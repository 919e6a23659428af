//! Webhook configuration from files: discovery, parsing (YAML multi-doc, JSON, `List`),
//! per-version defaults (`SetDefaults_ValidatingWebhook` and `SetDefaults_MutatingWebhook` in
//! `pkg/apis/admissionregistration/v1/defaults.go` and `.../v1beta1/defaults.go`), validation
//! as kube-apiserver does on create (`pkg/apis/admissionregistration/validation/validation.go`),
//! and compilation into a [`Snapshot`] the request path reads without locks.
//! CustomResourceDefinitions in the same files declare custom resources for matchPolicy
//! Equivalent. Depends on `api`, `backend`, `review`, `conversion`, `matching` and `field_error`.

pub(crate) mod crd;
pub(crate) mod names;
pub mod options;
mod removed;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::api::{self, FailurePolicy, MatchPolicy, SideEffects, WebhookType};
pub use crate::backend::Backend;
use crate::field_error::{BadValue, Error as FieldError, ErrorType, Path as FieldPath};
use crate::matching::{LabelSelector, MatchCondition, MatchConditions, Matcher, Rule};
use crate::metrics::WebhookMetrics;
use crate::resources::custom::CustomResources;
use crate::review::ReviewVersion;

/// One loaded, validated and compiled webhook: a route of the proxy.
#[derive(Debug)]
pub struct Webhook {
    /// `webhooks[].name`: the routes are `/webhooks/{validating|mutating}/{name}` and, when no
    /// webhook of the other type has the same name, `/webhooks/{name}`.
    pub name: String,
    /// `metadata.name` of the configuration it came from.
    pub(crate) configuration: String,
    /// Position in its configuration's `webhooks` list (kube-apiserver calls mutating webhooks
    /// in configuration-name order, then list order).
    pub(crate) index: usize,
    /// Validating or mutating: from the configuration's kind.
    pub webhook_type: WebhookType,
    /// The webhook as written in the file (before defaults), for `registration`.
    pub spec: api::Webhook,
    /// The file it was loaded from.
    pub(crate) source: PathBuf,
    /// Selection, including the webhook's `failurePolicy` (see [`Webhook::failure_policy`]).
    pub matcher: Matcher,
    pub(crate) side_effects: SideEffects,
    /// `timeoutSeconds` (1-30 s), or the webhook's `maxTimeoutSeconds` option when lower.
    pub(crate) timeout: Duration,
    /// How its answers are applied (`mode` option); `None` when not set: `serve
    /// --default-mode` decides (`Enforce` unless given).
    pub(crate) mode: Option<options::Mode>,
    /// `maxConcurrentCalls` option: the backend call slots, `None` when unbounded.
    pub(crate) call_slots: Option<CallSlots>,
    /// The negotiated version; `None` when no entry is known (each call is then a call failure).
    pub review_version: Option<ReviewVersion>,
    /// Shared with each call's [`crate::dispatch::client::Target`] (no copy per call).
    pub(crate) backend: std::sync::Arc<Backend>,
    /// Its metric series, resolved once here so that the request path never hashes labels.
    pub(crate) metrics: WebhookMetrics,
}

/// A webhook's `maxConcurrentCalls`: how many, and the semaphore handing them out. A reload
/// makes new slots; calls under way keep theirs until they end.
#[derive(Debug)]
pub(crate) struct CallSlots {
    pub(crate) max: usize,
    pub(crate) slots: tokio::sync::Semaphore,
}

impl Webhook {
    /// `failurePolicy`, kept once, in the matcher, which needs it for matchCondition errors.
    pub(crate) fn failure_policy(&self) -> FailurePolicy {
        self.matcher.failure_policy
    }

    /// kube-apiserver's dry-run rule, for dispatch and `explain` alike: a dry-run request to a
    /// webhook whose sideEffects is Unknown or Some is refused with 400 BadRequest, whatever
    /// failurePolicy says (`callHook` in `webhook/validating/dispatcher.go` and
    /// `callAttrMutatingHook` in `webhook/mutating/dispatcher.go`, both under
    /// `staging/src/k8s.io/apiserver/pkg/admission/plugin/`: `NewDryRunUnsupportedErr`). The
    /// refusal's message without the webhook's name (kube-apiserver puts it in front), `None`
    /// when the call may go ahead.
    pub(crate) fn dry_run_refusal(
        &self,
        review: &crate::review::ParsedReview<'_>,
    ) -> Option<String> {
        (review.request.is_dry_run() && !self.side_effects.supports_dry_run()).then(|| {
            format!(
                "does not support dry run (sideEffects {:?})",
                self.side_effects
            )
        })
    }
}

/// An immutable, compiled configuration. Swapped whole on reload.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Validating webhooks by name.
    pub(crate) validating: HashMap<String, Arc<Webhook>>,
    /// Mutating webhooks by name. kube-apiserver lets a validating and a mutating webhook share
    /// a name (names are unique per configuration only), so the two are kept apart.
    pub(crate) mutating: HashMap<String, Arc<Webhook>>,
    /// CustomResourceDefinitions declared in the files (shared with every webhook's matcher).
    pub(crate) custom_resources: Arc<CustomResources>,
    /// Files read, in load order.
    pub files: Vec<PathBuf>,
    /// Problems that did not stop loading (e.g. `sideEffects: Unknown`).
    pub warnings: Vec<Problem>,
    /// A hash of the files' names and contents: equal on replicas serving the same files.
    pub(crate) hash: u64,
}

/// Why a route names no webhook.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RouteError {
    #[error("no webhook {0:?} is configured (routes are /webhooks/{{validating|mutating}}/{{name}} or /webhooks/{{name}} for the webhook names in the config)")]
    Unknown(String),
    #[error("webhook name {0:?} is both a validating and a mutating webhook: use /webhooks/validating/{0} or /webhooks/mutating/{0}")]
    Ambiguous(String),
}

impl Snapshot {
    /// The webhooks of one type.
    pub(crate) fn of_type(&self, webhook_type: WebhookType) -> &HashMap<String, Arc<Webhook>> {
        match webhook_type {
            WebhookType::Validating => &self.validating,
            WebhookType::Mutating => &self.mutating,
        }
    }

    /// Every webhook, validating first, in no particular order within a type.
    pub fn webhooks(&self) -> impl Iterator<Item = &Arc<Webhook>> {
        self.validating.values().chain(self.mutating.values())
    }

    /// How many webhooks are loaded.
    pub fn len(&self) -> usize {
        self.validating.len() + self.mutating.len()
    }

    /// Whether no webhook is loaded (the proxy is then not ready: it would answer nothing).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The webhook a route names: `/webhooks/{type}/{name}` (`Some(type)`) or
    /// `/webhooks/{name}` (`None`, only when the name belongs to one type).
    ///
    /// # Errors
    /// [`RouteError::Unknown`] for a name not loaded (for that type); [`RouteError::Ambiguous`]
    /// for an untyped route whose name is both a validating and a mutating webhook.
    pub(crate) fn route(
        &self,
        webhook_type: Option<WebhookType>,
        name: &str,
    ) -> Result<&Arc<Webhook>, RouteError> {
        let unknown = || RouteError::Unknown(name.to_string());
        match webhook_type {
            Some(t) => self.of_type(t).get(name).ok_or_else(unknown),
            None => match (self.validating.get(name), self.mutating.get(name)) {
                (Some(_), Some(_)) => Err(RouteError::Ambiguous(name.to_string())),
                (Some(w), None) | (None, Some(w)) => Ok(w),
                (None, None) => Err(unknown()),
            },
        }
    }

    /// The webhook served at `/webhooks/{name}`, when the name is unambiguous.
    pub fn webhook(&self, name: &str) -> Option<&Arc<Webhook>> {
        self.route(None, name).ok()
    }
}

/// Where a problem is and what it is: `file[#doc]: Kind "config": webhook "name": field: message`.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    /// The file the problem is in.
    pub file: PathBuf,
    /// 0-based document index in a multi-document file.
    pub(crate) document: Option<usize>,
    pub(crate) kind: Option<String>,
    pub(crate) configuration: Option<String>,
    pub(crate) webhook: Option<String>,
    /// Field path, Kubernetes style: `webhooks[0].rules[1].operations[0]`.
    pub(crate) field: String,
    /// What is wrong, in kube-apiserver's words where it has them.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(doc) = self.document {
            write!(f, " (document {doc})")?;
        }
        if let Some(kind) = &self.kind {
            write!(f, ": {kind}")?;
        }
        if let Some(c) = &self.configuration {
            write!(f, " {c:?}")?;
        }
        if let Some(w) = &self.webhook {
            write!(f, ": webhook {w:?}")?;
        }
        if !self.field.is_empty() {
            write!(f, ": {}", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl Problem {
    /// `error` where this problem is: its field, and its body (`ErrorBody`) as the message.
    fn located(&self, error: FieldError) -> Problem {
        let message = error.body();
        Problem {
            field: error.field,
            message,
            ..self.clone()
        }
    }
}

/// Why a configuration cannot be used; the last good one keeps serving.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// Every problem found, each with its file and field path.
    #[error("{} problem(s) in the webhook configuration:\n{}", .0.len(), .0.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<Problem>),
}

/// The files a config path stands for: the file itself, or every `*.yaml`, `*.yml`, `*.json`
/// directly in the directory, hidden names (ConfigMap `..data` internals) left out, sorted.
///
/// # Errors
/// [`ConfigError::Io`] when the path or directory cannot be read.
pub fn config_files(path: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let io = |source| ConfigError::Io {
        path: path.to_path_buf(),
        source,
    };
    if !path.is_dir() {
        std::fs::metadata(path).map_err(io)?;
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(io)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            !name.starts_with('.')
                && matches!(
                    p.extension().and_then(|e| e.to_str()),
                    Some("yaml" | "yml" | "json")
                )
                && p.is_file()
        })
        .collect();
    files.sort();
    Ok(files)
}

/// Reads every file of `path` and builds a snapshot.
///
/// # Errors
/// [`ConfigError::Io`] for unreadable paths; [`ConfigError::Invalid`] with every problem found
/// (not only the first) when anything does not parse or validate.
pub fn load(path: &Path) -> Result<Snapshot, ConfigError> {
    let files = config_files(path)?;
    let skipped = skipped_files(path);
    let mut contents = Vec::with_capacity(files.len());
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(|source| ConfigError::Io {
            path: file.clone(),
            source,
        })?;
        contents.push((file.clone(), text));
    }
    let mut snapshot = load_contents(&contents)?;
    let warning = |file: PathBuf, message: String| Problem {
        file,
        document: None,
        kind: None,
        configuration: None,
        webhook: None,
        field: String::new(),
        message,
    };
    for file in skipped {
        snapshot.warnings.push(warning(file, "not loaded: only *.yaml, *.yml and *.json files are read (a ConfigMap key needs one of these extensions)".into()));
    }
    if snapshot.is_empty() {
        snapshot.warnings.push(warning(path.to_path_buf(), "no webhooks are configured: `serve` stays not ready (/readyz fails) until a configuration with webhooks is loaded".into()));
    }
    Ok(snapshot)
}

/// Regular files of a config directory that [`config_files`] leaves out for their name (not
/// hidden, no YAML/JSON extension): each is worth a warning, as it was probably meant to load.
fn skipped_files(path: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(path) else {
        return Vec::new();
    };
    let mut skipped: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            !name.starts_with('.')
                && !matches!(
                    p.extension().and_then(|e| e.to_str()),
                    Some("yaml" | "yml" | "json")
                )
                && p.is_file()
        })
        .collect();
    skipped.sort();
    skipped
}

/// Builds a snapshot from `(file name, contents)` pairs; see [`load`].
///
/// # Errors
/// [`ConfigError::Invalid`] listing every problem.
pub fn load_contents(files: &[(PathBuf, String)]) -> Result<Snapshot, ConfigError> {
    let mut errors = Vec::new();
    let mut snapshot = Snapshot::default();
    let mut routes: HashMap<(WebhookType, String), (PathBuf, String)> = HashMap::new();
    snapshot.hash = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        files.hash(&mut h);
        h.finish()
    };
    let mut compiled: Vec<Webhook> = Vec::new();
    let mut custom = CustomResources::default();
    let mut backends = Backends::default();
    for (file, text) in files {
        snapshot.files.push(file.clone());
        let is_json = file.extension().is_some_and(|e| e == "json");
        let docs = documents(text, is_json);
        if docs
            .iter()
            .all(|d| matches!(d, Ok(serde_json::Value::Null)))
        {
            // A ConfigMap key caught half-written, or emptied by mistake, would otherwise drop
            // its webhooks silently (they would answer 404): refused like an invalid file, so
            // the last good configuration, this file's webhooks included, keeps serving.
            errors.push(Problem {
                file: file.clone(),
                document: None,
                kind: None,
                configuration: None,
                webhook: None,
                field: String::new(),
                message: "the file has no documents (empty, or only comments): refused like an invalid file; delete it to remove its webhooks".into(),
            });
            continue;
        }
        for (doc_index, doc) in docs.into_iter().enumerate() {
            let document = (!is_json).then_some(doc_index);
            let base = Problem {
                file: file.clone(),
                document,
                kind: None,
                configuration: None,
                webhook: None,
                field: String::new(),
                message: String::new(),
            };
            let value = match doc {
                Ok(serde_json::Value::Null) => continue,
                Ok(v) => v,
                Err(e) => {
                    errors.push(Problem {
                        message: e.to_string(),
                        ..base
                    });
                    continue;
                }
            };
            for (prefix, item) in configuration_items(value, &base, &mut errors) {
                if item.get("kind").and_then(|k| k.as_str()) == Some("CustomResourceDefinition") {
                    declare_custom_resource(item, &prefix, &base, &mut custom, &mut errors);
                    continue;
                }
                let Some(webhooks) = compile_configuration(
                    item,
                    &prefix,
                    &base,
                    &mut backends,
                    &mut errors,
                    &mut snapshot.warnings,
                ) else {
                    continue;
                };
                for webhook in webhooks {
                    let key = (webhook.webhook_type, webhook.name.clone());
                    if let Some((other_file, other_config)) = routes.get(&key) {
                        let duplicate = FieldError::new(
                            ErrorType::Duplicate,
                            "webhooks[].name",
                            BadValue::Omitted,
                            format!(
                                "{} webhook names are routes and must be unique across all files (also in {} configuration {other_config:?})",
                                webhook.webhook_type.as_str(),
                                other_file.display()
                            ),
                        );
                        errors.push(Problem {
                            kind: Some(webhook.webhook_type.configuration_kind().into()),
                            configuration: Some(webhook.configuration.clone()),
                            webhook: Some(webhook.name.clone()),
                            ..base.located(duplicate)
                        });
                        continue;
                    }
                    routes.insert(key, (file.clone(), webhook.configuration.clone()));
                    compiled.push(webhook);
                }
            }
        }
    }
    // Every matcher sees every declared custom resource, whichever file declares it.
    snapshot.custom_resources = Arc::new(custom);
    for mut webhook in compiled {
        webhook.matcher.custom_resources = snapshot.custom_resources.clone();
        let map = match webhook.webhook_type {
            WebhookType::Validating => &mut snapshot.validating,
            WebhookType::Mutating => &mut snapshot.mutating,
        };
        map.insert(webhook.name.clone(), Arc::new(webhook));
    }
    if errors.is_empty() {
        if snapshot.len() <= crate::metrics::EAGER_WEBHOOKS {
            for webhook in snapshot.webhooks() {
                webhook.metrics.register_all();
            }
        }
        Ok(snapshot)
    } else {
        Err(ConfigError::Invalid(errors))
    }
}

/// Why a document of a file is not JSON or YAML; the problem's message.
#[derive(Debug, thiserror::Error)]
enum SyntaxError {
    #[error("invalid JSON: {0}")]
    Json(#[source] serde_json::Error),
    #[error("invalid YAML: {0}")]
    Yaml(#[source] serde_yaml_ng::Error),
}

/// Splits a file into documents as JSON values (YAML: every `---` document).
fn documents(text: &str, is_json: bool) -> Vec<Result<serde_json::Value, SyntaxError>> {
    if is_json {
        return vec![serde_json::from_str(text).map_err(SyntaxError::Json)];
    }
    let mut docs = Vec::new();
    for de in serde_yaml_ng::Deserializer::from_str(text) {
        let doc = serde_json::Value::deserialize(de).map_err(SyntaxError::Yaml);
        let failed = doc.is_err();
        docs.push(doc);
        // After a syntax error the document iterator keeps yielding the same error forever.
        if failed {
            break;
        }
    }
    docs
}

/// Unwraps `List`s: returns `(field prefix, configuration value)` pairs.
fn configuration_items(
    value: serde_json::Value,
    base: &Problem,
    errors: &mut Vec<Problem>,
) -> Vec<(String, serde_json::Value)> {
    let kind = value
        .get("kind")
        .and_then(|k| k.as_str())
        .unwrap_or("")
        .to_string();
    match kind.as_str() {
        "List"
        | "ValidatingWebhookConfigurationList"
        | "MutatingWebhookConfigurationList"
        | "CustomResourceDefinitionList" => {
            let mut value = value;
            // Moved out, not cloned: a List is the whole file's configuration.
            let items = match value.get_mut("items").map(serde_json::Value::take) {
                Some(serde_json::Value::Array(items)) => items,
                None | Some(serde_json::Value::Null) => Vec::new(),
                Some(_) => {
                    errors.push(Problem {
                        kind: Some(kind),
                        ..base.located(FieldError::new(
                            ErrorType::Invalid,
                            "items",
                            BadValue::Omitted,
                            "must be a list",
                        ))
                    });
                    return Vec::new();
                }
            };
            items
                .into_iter()
                .enumerate()
                .map(|(i, item)| (format!("items[{i}]."), item))
                .collect()
        }
        _ => vec![(String::new(), value)],
    }
}

/// Adds one CustomResourceDefinition to `custom`, or its problems to `errors` (also when
/// another object already declares the same group and plural).
fn declare_custom_resource(
    value: serde_json::Value,
    prefix: &str,
    base: &Problem,
    custom: &mut CustomResources,
    errors: &mut Vec<Problem>,
) {
    let name = value
        .pointer("/metadata/name")
        .and_then(|n| n.as_str())
        .map(str::to_string);
    let problem = |error: FieldError| Problem {
        kind: Some("CustomResourceDefinition".into()),
        configuration: name.clone(),
        ..base.located(error.prefixed(prefix))
    };
    let v1beta1 = match value.get("apiVersion").and_then(|v| v.as_str()) {
        Some("apiextensions.k8s.io/v1") => false,
        Some("apiextensions.k8s.io/v1beta1") => true,
        other => {
            errors.push(problem(FieldError::new(
                ErrorType::NotSupported,
                "apiVersion",
                other.unwrap_or("").into(),
                "expected apiextensions.k8s.io/v1 or apiextensions.k8s.io/v1beta1",
            )));
            return;
        }
    };
    match crd::compile(value, v1beta1) {
        Ok(resource) => {
            let (group, plural) = (resource.group.clone(), resource.plural.clone());
            if custom.insert(resource).is_some() {
                errors.push(problem(FieldError::new(
                    ErrorType::Duplicate,
                    "spec.names.plural",
                    BadValue::Omitted,
                    format!(
                        "{plural}.{group} is declared by more than one CustomResourceDefinition"
                    ),
                )));
            }
        }
        Err(crd::CrdError::Decode { field, source }) => errors.push(Problem {
            kind: Some("CustomResourceDefinition".into()),
            configuration: name.clone(),
            field: format!("{prefix}{field}"),
            message: source.to_string(),
            ..base.clone()
        }),
        Err(crd::CrdError::Invalid(problems)) => {
            errors.extend(problems.into_iter().map(problem));
        }
    }
}

/// Parses, defaults, validates and compiles one configuration object.
fn compile_configuration(
    value: serde_json::Value,
    prefix: &str,
    base: &Problem,
    backends: &mut Backends,
    errors: &mut Vec<Problem>,
    warnings: &mut Vec<Problem>,
) -> Option<Vec<Webhook>> {
    let kind = value
        .get("kind")
        .and_then(|k| k.as_str())
        .unwrap_or("")
        .to_string();
    let name = value
        .pointer("/metadata/name")
        .and_then(|n| n.as_str())
        .map(str::to_string);
    let base = Problem {
        kind: Some(kind.clone()),
        configuration: name.clone(),
        ..base.clone()
    };
    let problem = |field: String, message: String| Problem {
        field,
        message,
        ..base.clone()
    };
    let webhook_type = match kind.as_str() {
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
    let api_version = value
        .get("apiVersion")
        .and_then(|v| v.as_str())
        .unwrap_or("")
        .to_string();
    let v1beta1 = match api_version.as_str() {
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
    // From a reference: the value is only needed again to name the webhook of an error.
    let config: api::WebhookConfiguration = match serde_path_to_error::deserialize(&value) {
        Ok(c) => c,
        Err(e) => {
            let path = e.path().to_string();
            let webhook = webhook_name_at(&value, &path);
            errors.push(Problem {
                webhook,
                ..problem(format!("{prefix}{path}"), e.into_inner().to_string())
            });
            return None;
        }
    };
    // The JSON tree is as large as the compiled webhooks: freed before they are built.
    drop(value);
    let before = errors.len();
    if !names::is_dns1123_subdomain(&config.metadata.name) {
        errors.push(base.located(FieldError::invalid(
            format!("{prefix}metadata.name"),
            &config.metadata.name,
            "a configuration name must be a DNS-1123 subdomain",
        )));
    }
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(config.webhooks.len());
    for (i, hook) in config.webhooks.iter().enumerate() {
        let at = |field: &str| {
            format!(
                "{prefix}webhooks[{i}]{}{field}",
                if field.is_empty() { "" } else { "." }
            )
        };
        let mut push = |field: &str, message: String| {
            errors.push(Problem {
                webhook: Some(hook.name.clone()),
                ..problem(at(field), message)
            });
        };
        if webhook_type == WebhookType::Validating && hook.reinvocation_policy.is_some() {
            push(
                "reinvocationPolicy",
                "unknown field `reinvocationPolicy`: it exists only on MutatingWebhook".into(),
            );
        }
        if !seen.insert(hook.name.clone()) {
            let duplicate = FieldError::duplicate("name", &hook.name);
            push(&duplicate.field, duplicate.body());
        }
        match compile_webhook(hook, v1beta1, webhook_type, backends) {
            Ok((webhook, hook_warnings)) => {
                for (field, message) in hook_warnings {
                    warnings.push(Problem {
                        webhook: Some(hook.name.clone()),
                        ..problem(at(&field), message)
                    });
                }
                out.push(Webhook {
                    configuration: config.metadata.name.clone(),
                    index: i,
                    source: base.file.clone(),
                    ..webhook
                });
            }
            Err(problems) => {
                for (field, message) in problems {
                    push(&field, message);
                }
            }
        }
    }
    let names: Vec<&str> = config.webhooks.iter().map(|w| w.name.as_str()).collect();
    match options::parse(config.metadata.annotations.as_ref(), &names) {
        Ok(mut options) => {
            for webhook in &mut out {
                let Some(o) = options.remove(&webhook.name) else {
                    continue;
                };
                if o.tls_server_name.is_some() && !webhook.backend.tls {
                    let plain = FieldError::new(
                        ErrorType::Invalid,
                        format!("{prefix}{}", options::field()),
                        BadValue::Omitted,
                        format!(
                            "tlsServerName needs an https backend, and {} is plain http",
                            webhook.backend.url
                        ),
                    );
                    errors.push(Problem {
                        webhook: Some(webhook.name.clone()),
                        ..base.located(plain)
                    });
                }
                if o.tls_server_name.is_some() {
                    // This webhook's own copy: the backend may be shared with others.
                    std::sync::Arc::make_mut(&mut webhook.backend)
                        .set_server_name(o.tls_server_name);
                }
                webhook.mode = o.mode;
                webhook.call_slots = o.max_concurrent_calls.map(|max| CallSlots {
                    max,
                    slots: tokio::sync::Semaphore::new(max),
                });
                if let Some(cap) = o.max_timeout_seconds {
                    webhook.timeout = webhook.timeout.min(Duration::from_secs(cap));
                }
            }
        }
        Err(problems) => {
            errors.extend(
                problems
                    .into_iter()
                    .map(|e| base.located(e.prefixed(prefix))),
            );
        }
    }
    (errors.len() == before).then_some(out)
}

/// The name of the webhook a serde path like `webhooks[2].rules[0]` points into.
fn webhook_name_at(value: &serde_json::Value, path: &str) -> Option<String> {
    let rest = path.strip_prefix("webhooks[")?;
    let index: usize = rest.split(']').next()?.parse().ok()?;
    value
        .get("webhooks")?
        .get(index)?
        .get("name")?
        .as_str()
        .map(str::to_string)
}

/// `(field, message)` problems or warnings of one webhook, fields relative to it.
type FieldProblems = Vec<(String, String)>;

/// A field error as a `(field, message)` problem: the message is its body (`ErrorBody`).
fn field_problem(error: FieldError) -> (String, String) {
    let message = error.body();
    (error.field, message)
}

/// The backends of one load, one per distinct `clientConfig`: webhooks that call the same
/// backend with the same `caBundle` share its parsed trust roots (about 4 KB each), which
/// would otherwise be kept once per webhook.
#[derive(Default)]
struct Backends(HashMap<api::WebhookClientConfig, Arc<Backend>>);

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
/// Returns the webhook and its warnings, or every `(field, message)` problem found.
fn compile_webhook(
    hook: &api::Webhook,
    v1beta1: bool,
    webhook_type: WebhookType,
    backends: &mut Backends,
) -> Result<(Webhook, FieldProblems), FieldProblems> {
    let mut problems: FieldProblems = Vec::new();
    let mut warnings: FieldProblems = Vec::new();
    let mut bad = |error: FieldError| problems.push(field_problem(error));

    if hook.name.is_empty() {
        bad(FieldError::required("name", ""));
    } else if !names::is_fully_qualified_name(&hook.name) {
        bad(FieldError::invalid(
            "name",
            &hook.name,
            "should be a domain with at least three segments separated by dots",
        ));
    }

    let failure_policy = match hook.failure_policy.as_deref() {
        None if v1beta1 => FailurePolicy::Ignore,
        None => FailurePolicy::Fail,
        Some("Ignore") => FailurePolicy::Ignore,
        Some("Fail") => FailurePolicy::Fail,
        Some(other) => {
            bad(FieldError::not_supported(
                "failurePolicy",
                other,
                &["Fail", "Ignore"],
            ));
            FailurePolicy::Fail
        }
    };
    let match_policy = match hook.match_policy.as_deref() {
        None if v1beta1 => MatchPolicy::Exact,
        None => MatchPolicy::Equivalent,
        Some("Exact") => MatchPolicy::Exact,
        Some("Equivalent") => MatchPolicy::Equivalent,
        Some(other) => {
            bad(FieldError::not_supported(
                "matchPolicy",
                other,
                &["Equivalent", "Exact"],
            ));
            MatchPolicy::Exact
        }
    };
    warnings.extend(removed::warnings(&hook.rules, match_policy));
    let side_effects = match hook.side_effects.as_deref() {
        None if v1beta1 => SideEffects::Unknown,
        None => {
            bad(FieldError::required(
                "sideEffects",
                "must specify one of None, NoneOnDryRun",
            ));
            SideEffects::Unknown
        }
        Some("None") => SideEffects::None,
        Some("NoneOnDryRun") => SideEffects::NoneOnDryRun,
        // Only configurations stored through v1beta1 carry these (warned about below).
        Some("Some") => SideEffects::Some,
        Some("Unknown") => SideEffects::Unknown,
        Some(other) => {
            bad(FieldError::not_supported(
                "sideEffects",
                other,
                &["None", "NoneOnDryRun"],
            ));
            SideEffects::Unknown
        }
    };
    if matches!(side_effects, SideEffects::Some | SideEffects::Unknown) {
        warnings.push((
            "sideEffects".into(),
            format!("{side_effects:?} is only accepted from configurations stored before v1; dry-run requests matching this webhook are rejected (\"does not support dry run\")"),
        ));
    }
    let timeout_seconds = hook
        .timeout_seconds
        .unwrap_or(if v1beta1 { 30 } else { 10 });
    if !(1..=30).contains(&timeout_seconds) {
        bad(FieldError::invalid(
            "timeoutSeconds",
            timeout_seconds,
            "the timeout value must be between 1 and 30 seconds",
        ));
    }
    let admission_review_versions = match &hook.admission_review_versions {
        Some(v) => v.clone(),
        None if v1beta1 => vec!["v1beta1".to_string()],
        None => {
            bad(FieldError::required(
                "admissionReviewVersions",
                "must specify one of v1, v1beta1",
            ));
            Vec::new()
        }
    };
    let mut versions_seen = HashSet::new();
    for (i, v) in admission_review_versions.iter().enumerate() {
        if !names::is_dns1035_label(v) {
            bad(FieldError::invalid(
                format!("admissionReviewVersions[{i}]"),
                v,
                "a DNS-1035 label is required",
            ));
        }
        if !versions_seen.insert(v) {
            bad(FieldError::duplicate(
                format!("admissionReviewVersions[{i}]"),
                v,
            ));
        }
    }
    let review_version = ReviewVersion::negotiate(&admission_review_versions);
    if hook.admission_review_versions.is_some() && review_version.is_none() {
        bad(FieldError::new(
            ErrorType::NotSupported,
            "admissionReviewVersions",
            BadValue::Omitted,
            "must include at least one of v1, v1beta1",
        ));
    }
    if let Some(p) = hook.reinvocation_policy.as_deref() {
        if !matches!(p, "Never" | "IfNeeded") {
            bad(FieldError::not_supported(
                "reinvocationPolicy",
                p,
                &["IfNeeded", "Never"],
            ));
        }
    }
    for (i, rule) in hook.rules.iter().enumerate() {
        validate_rule(rule, &format!("rules[{i}]"), &mut bad);
    }
    let mut selectors = [LabelSelector::default(), LabelSelector::default()];
    for (slot, (field, selector)) in selectors.iter_mut().zip([
        ("namespaceSelector", &hook.namespace_selector),
        ("objectSelector", &hook.object_selector),
    ]) {
        validate_selector_names(selector.as_ref(), field, &mut |error| {
            problems.push(field_problem(error));
        });
        match LabelSelector::compile(selector.as_ref()) {
            Ok(s) => *slot = s,
            // The selector's error names its own field (`values`, `operator`): the message
            // is the whole error, under the selector's `matchExpressions`.
            Err(e) => problems.push((format!("{field}.matchExpressions"), e.to_string())),
        }
    }
    let mut bad = |error: FieldError| problems.push(field_problem(error));
    let [namespace_selector, object_selector] = selectors;
    if hook.match_conditions.len() > 64 {
        bad(FieldError::too_many(
            "matchConditions",
            hook.match_conditions.len() as i64,
            64,
        ));
    }
    let mut conditions = Vec::new();
    let mut condition_names = HashSet::new();
    for (i, mc) in hook.match_conditions.iter().enumerate() {
        let at = FieldPath::new("matchConditions").index(i);
        if mc.name.is_empty() {
            bad(FieldError::required(at.clone().child("name"), ""));
        } else if !names::is_qualified_name(&mc.name) {
            bad(FieldError::invalid(
                at.clone().child("name"),
                &mc.name,
                "must be a qualified name",
            ));
        } else if !condition_names.insert(mc.name.clone()) {
            bad(FieldError::duplicate(at.clone().child("name"), &mc.name));
        }
        if mc.expression.trim().is_empty() {
            bad(FieldError::required(at.child("expression"), ""));
            continue;
        }
        match MatchCondition::compile(&mc.name, &mc.expression) {
            Ok(c) => conditions.push(c),
            Err(e) => bad(FieldError::invalid(
                at.child("expression"),
                &mc.expression,
                e.to_string(),
            )),
        }
    }
    let backend = match hook.client_config.as_ref() {
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
    };
    match backend {
        Some(backend) if problems.is_empty() => Ok((
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
                matcher: Matcher {
                    rules: hook.rules.iter().map(Rule::new).collect(),
                    namespace_selector,
                    object_selector,
                    match_conditions: MatchConditions::new(conditions),
                    failure_policy,
                    match_policy,
                    custom_resources: Arc::default(),
                },
                side_effects,
                timeout: Duration::from_secs(timeout_seconds as u64),
                mode: None,
                call_slots: None,
                review_version,
                backend,
                metrics: WebhookMetrics::new(&hook.name, webhook_type.as_str()),
            },
            warnings,
        )),
        _ => Err(problems),
    }
}

/// Rule validation of `validation.go` (`validateRule`).
fn validate_rule(rule: &api::RuleWithOperations, at: &str, bad: &mut impl FnMut(FieldError)) {
    let star_alone = |list: &[String], field: &str, bad: &mut dyn FnMut(FieldError)| {
        if list.is_empty() {
            bad(FieldError::required(format!("{at}.{field}"), ""));
        } else if list.len() > 1 && list.iter().any(|v| v == "*") {
            bad(FieldError::new(
                ErrorType::Invalid,
                format!("{at}.{field}"),
                BadValue::Omitted,
                "if '*' is present, must not specify other values",
            ));
        }
    };
    star_alone(&rule.operations, "operations", bad);
    for (i, op) in rule.operations.iter().enumerate() {
        if !matches!(
            op.as_str(),
            "*" | "CREATE" | "UPDATE" | "DELETE" | "CONNECT"
        ) {
            bad(FieldError::not_supported(
                format!("{at}.operations[{i}]"),
                op,
                &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"],
            ));
        }
    }
    star_alone(&rule.api_groups, "apiGroups", bad);
    star_alone(&rule.api_versions, "apiVersions", bad);
    for (i, v) in rule.api_versions.iter().enumerate() {
        if v.is_empty() {
            bad(FieldError::required(format!("{at}.apiVersions[{i}]"), ""));
        }
    }
    if rule.resources.is_empty() {
        bad(FieldError::required(format!("{at}.resources"), ""));
    }
    let mut wildcard_sub: HashSet<&str> = HashSet::new();
    let mut wildcard_res: HashSet<&str> = HashSet::new();
    let (mut double, mut single, mut plain) = (false, false, false);
    for (i, entry) in rule.resources.iter().enumerate() {
        if entry.is_empty() {
            bad(FieldError::required(format!("{at}.resources[{i}]"), ""));
            continue;
        }
        double |= entry == "*/*";
        single |= entry == "*";
        let Some((res, sub)) = entry.split_once('/') else {
            // Upstream overwrites this flag per entry instead of accumulating it
            // (`validateResources`).
            plain = entry != "*";
            continue;
        };
        if wildcard_sub.contains(res) {
            bad(FieldError::invalid(
                format!("{at}.resources[{i}]"),
                entry,
                format!("if '{res}/*' is present, must not specify {entry}"),
            ));
        }
        if wildcard_res.contains(sub) {
            bad(FieldError::invalid(
                format!("{at}.resources[{i}]"),
                entry,
                format!("if '*/{sub}' is present, must not specify {entry}"),
            ));
        }
        if sub == "*" {
            wildcard_sub.insert(res);
        }
        if res == "*" {
            wildcard_res.insert(sub);
        }
    }
    if rule.resources.len() > 1 && double {
        bad(FieldError::new(
            ErrorType::Invalid,
            format!("{at}.resources"),
            BadValue::Omitted,
            "if '*/*' is present, must not specify other resources",
        ));
    }
    if single && plain {
        bad(FieldError::new(
            ErrorType::Invalid,
            format!("{at}.resources"),
            BadValue::Omitted,
            "if '*' is present, must not specify other resources without subresources",
        ));
    }
    if let Some(scope) = rule.scope.as_deref() {
        if !matches!(scope, "*" | "Cluster" | "Namespaced") {
            bad(FieldError::not_supported(
                format!("{at}.scope"),
                scope,
                &["*", "Cluster", "Namespaced"],
            ));
        }
    }
}

/// Label keys must be qualified names and values label values.
fn validate_selector_names(
    selector: Option<&api::LabelSelector>,
    field: &str,
    bad: &mut impl FnMut(FieldError),
) {
    let Some(selector) = selector else { return };
    for (k, v) in selector.match_labels.iter().flatten() {
        if !names::is_qualified_name(k) {
            bad(FieldError::invalid(
                format!("{field}.matchLabels"),
                k,
                "name part must consist of alphanumeric characters, '-', '_' or '.'",
            ));
        }
        if !names::is_label_value(v) {
            bad(FieldError::invalid(
                format!("{field}.matchLabels"),
                v,
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.'",
            ));
        }
    }
    for (i, req) in selector.match_expressions.iter().flatten().enumerate() {
        if !names::is_qualified_name(&req.key) {
            bad(FieldError::invalid(
                format!("{field}.matchExpressions[{i}].key"),
                &req.key,
                "must be a qualified name",
            ));
        }
    }
}

#[cfg(test)]
mod tests;
