//! Loading: the files a configuration path stands for, read within bounds, each parsed one
//! document at a time (YAML multi-doc, JSON, `List`), its objects sorted by kind and handed to
//! compilation, and the whole gathered into a [`Snapshot`] or every problem found.

use super::*;

/// The files a config path stands for: the file itself, or every `*.yaml`, `*.yml`, `*.json`
/// directly in the directory, hidden names (ConfigMap `..data` internals) left out, sorted.
///
/// # Errors
/// [`ConfigError::Io`] when the path or directory cannot be read.
pub fn config_files(path: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let io = |error| ConfigError::Io {
        path: path.to_path_buf(),
        error,
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

/// The contents of every file of `path` ([`config_files`]), as `(file, text)`: regular files
/// only, each at most [`files::MAX_CONFIG_FILE_BYTES`], together at most
/// [`files::MAX_CONFIG_BYTES`], UTF-8. What `serve` loads at start and on every reload.
///
/// # Errors
/// [`ConfigError::Io`] naming the file (or the directory, for the total): unreadable, not a
/// regular file, too large, or not UTF-8 text.
pub fn read_files(path: &Path) -> Result<Vec<(PathBuf, String)>, ConfigError> {
    let files = config_files(path)?;
    let mut contents = Vec::with_capacity(files.len());
    let mut total = 0u64;
    for file in files {
        let text = files::read_to_string(&file, files::MAX_CONFIG_FILE_BYTES).map_err(|error| {
            ConfigError::Io {
                path: file.clone(),
                error,
            }
        })?;
        total += text.len() as u64;
        if total > files::MAX_CONFIG_BYTES {
            return Err(ConfigError::Io {
                path: path.to_path_buf(),
                error: files::FileError::TooLargeTogether {
                    size: total,
                    limit: files::MAX_CONFIG_BYTES,
                }
                .into(),
            });
        }
        contents.push((file, text));
    }
    Ok(contents)
}

/// Reads every file of `path` ([`read_files`]) and builds a snapshot.
///
/// ```
/// // The example configuration the README runs: two files, five webhooks.
/// let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/config"));
/// let snapshot = admission_proxy::config::load(dir)?;
/// assert_eq!(snapshot.len(), 5);
/// let webhook = snapshot.webhook("require-labels.policy.example.com").unwrap();
/// assert_eq!(webhook.name, "require-labels.policy.example.com");
/// # Ok::<(), admission_proxy::config::ConfigError>(())
/// ```
///
/// # Errors
/// [`ConfigError::Io`] for unreadable paths and files [`read_files`] refuses;
/// [`ConfigError::Invalid`] with every problem found (not only the first; past
/// [`MAX_PROBLEMS_PER_FILE`] in a file, how many more) when anything does not parse or validate.
pub fn load(path: &Path) -> Result<Snapshot, ConfigError> {
    let skipped = skipped_files(path);
    let contents = read_files(path)?;
    let mut snapshot = load_contents(&contents)?;
    let warning = |file: PathBuf, message: String| Problem::of_file(&file, message);
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
pub(super) fn skipped_files(path: &Path) -> Vec<PathBuf> {
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
    let mut load = Load::default();
    for (file, text) in files {
        load.file(file, text);
    }
    load.finish(files_hash(files))
}

/// A hash of the files' names and contents: equal on replicas serving the same files.
pub(super) fn files_hash(files: &[(PathBuf, String)]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    files.hash(&mut h);
    h.finish()
}

/// One load under way: what [`load_contents`] gathers file by file, in file order.
#[derive(Default)]
pub(super) struct Load {
    errors: Vec<Problem>,
    warnings: Vec<Problem>,
    files: Vec<PathBuf>,
    /// Where each route was first defined, for the duplicate's message.
    routes: HashMap<(WebhookType, String), (PathBuf, String)>,
    /// The file of each configuration (by kind and `metadata.name`), for the duplicate's
    /// message.
    configurations: HashMap<(WebhookType, String), PathBuf>,
    compiled: Vec<Webhook>,
    custom: CustomResources,
    backends: Backends,
    /// `Candidate`s, attached to their webhooks once every file is read.
    candidates: Vec<candidates::Declared>,
    /// `ValidatingAdmissionPolicy` and `ValidatingAdmissionPolicyBinding` objects.
    policies: policies::Policies,
    /// Objects of any other kind: a policy's parameters (its `paramKind`), or a problem.
    others: Vec<(Problem, String, serde_json::Value)>,
}

impl Load {
    /// Every document of one file, parsed and compiled one at a time (a file of a million small
    /// documents never holds them all); a file with no documents at all is a problem. Past
    /// [`MAX_PROBLEMS_PER_FILE`] errors (or warnings) in the file, the rest are counted and
    /// summarised in one more problem.
    fn file(&mut self, file: &Path, text: &str) {
        self.files.push(file.to_path_buf());
        let is_json = file.extension().is_some_and(|e| e == "json");
        let located = |message: String| Problem::of_file(file, message);
        if let Err(too_deep) = files::check_nesting(text) {
            self.errors.push(located(too_deep.to_string()));
            return;
        }
        let (errors, warnings) = (self.errors.len(), self.warnings.len());
        let (mut omitted_errors, mut omitted_warnings) = (0usize, 0usize);
        let mut any = false;
        documents(text, is_json, |doc_index, doc| {
            any |= !matches!(doc, Ok(serde_json::Value::Null));
            let base = Problem {
                // JSON files hold one document: no index.
                document: (!is_json).then_some(doc_index),
                ..located(String::new())
            };
            self.document(doc, &base);
            omitted_errors += truncate(&mut self.errors, errors + MAX_PROBLEMS_PER_FILE);
            omitted_warnings += truncate(&mut self.warnings, warnings + MAX_PROBLEMS_PER_FILE);
        });
        if !any {
            // A ConfigMap key caught half-written, or emptied by mistake, would otherwise drop
            // its webhooks silently (they would answer 404): refused like an invalid file, so
            // the last good configuration, this file's webhooks included, keeps serving.
            self.errors.push(located("the file has no documents (empty, or only comments): refused like an invalid file; delete it to remove its webhooks".into()));
            return;
        }
        if omitted_errors > 0 {
            self.errors.push(located(format!(
                "and {omitted_errors} more problems in this file, not listed"
            )));
        }
        if omitted_warnings > 0 {
            self.warnings.push(located(format!(
                "and {omitted_warnings} more warnings in this file, not listed"
            )));
        }
    }

    /// One document: a configuration, a CustomResourceDefinition, or a `List` of them.
    fn document(&mut self, doc: Result<serde_json::Value, SyntaxError>, base: &Problem) {
        let value = match doc {
            Ok(serde_json::Value::Null) => return,
            Ok(v) => v,
            Err(e) => {
                self.errors.push(Problem {
                    message: e.to_string(),
                    ..base.clone()
                });
                return;
            }
        };
        for (prefix, item) in configuration_items(value, base, &mut self.errors) {
            match item.get("kind").and_then(|k| k.as_str()).unwrap_or("") {
                "CustomResourceDefinition" => {
                    declare_custom_resource(
                        item,
                        &prefix,
                        base,
                        &mut self.custom,
                        &mut self.errors,
                    );
                    continue;
                }
                "Candidate" => {
                    self.candidates.extend(candidates::decode(
                        &item,
                        &prefix,
                        base,
                        &mut self.errors,
                    ));
                    continue;
                }
                "ValidatingAdmissionPolicy" | "ValidatingAdmissionPolicyBinding" => {
                    self.policies.add(item, &prefix, base, &mut self.errors);
                    continue;
                }
                "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => {}
                _ if could_be_parameter(&item) => {
                    self.others.push((base.clone(), prefix, item));
                    continue;
                }
                _ => {
                    self.errors.push(unsupported_kind(&item, &prefix, base));
                    continue;
                }
            }
            let Some(webhooks) = compile_configuration(
                item,
                &prefix,
                base,
                &mut self.backends,
                &mut self.errors,
                &mut self.warnings,
            ) else {
                continue;
            };
            if !self.configuration(&webhooks, &prefix, base) {
                continue;
            }
            for webhook in webhooks {
                self.route(webhook, base);
            }
        }
    }

    /// Whether the configuration of `webhooks` is the first of its kind with its name: a
    /// cluster holds one object per name (a second create is `AlreadyExists`, `Create` in
    /// `staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go`), so two in the
    /// files are a mistake, and their webhooks would be one configuration's.
    fn configuration(&mut self, webhooks: &[Webhook], prefix: &str, base: &Problem) -> bool {
        let Some(first) = webhooks.first() else {
            return true;
        };
        let key = (first.webhook_type, first.configuration.clone());
        if let Some(other_file) = self.configurations.get(&key) {
            let duplicate = FieldError::new(
                ErrorType::Duplicate,
                format!("{prefix}metadata.name"),
                BadValue::from(first.configuration.as_str()),
                format!(
                    "{} names are unique in a cluster (also in {})",
                    first.webhook_type.configuration_kind(),
                    other_file.display()
                ),
            );
            self.errors.push(Problem {
                kind: Some(first.webhook_type.configuration_kind().into()),
                configuration: Some(first.configuration.clone()),
                ..base.located(duplicate)
            });
            return false;
        }
        self.configurations.insert(key, base.file.clone());
        true
    }

    /// Keeps `webhook` unless another of its type has its name: names are routes, so they
    /// must be unique across all files (kube-apiserver only needs them unique per
    /// configuration).
    fn route(&mut self, webhook: Webhook, base: &Problem) {
        let key = (webhook.webhook_type, webhook.name.clone());
        if let Some((other_file, other_config)) = self.routes.get(&key) {
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
            self.errors.push(Problem {
                kind: Some(webhook.webhook_type.configuration_kind().into()),
                configuration: Some(webhook.configuration.clone()),
                webhook: Some(webhook.name.clone()),
                ..base.located(duplicate)
            });
            return;
        }
        self.routes
            .insert(key, (base.file.clone(), webhook.configuration.clone()));
        self.compiled.push(webhook);
    }

    /// Objects of other kinds: parameters of a policy whose `paramKind` names their
    /// apiVersion and kind are kept; anything else is refused as before.
    fn parameters(&mut self) -> Vec<serde_json::Value> {
        let param_kinds = self.policies.param_kinds();
        let mut params = Vec::new();
        // Refused ones are listed at most MAX_PROBLEMS_PER_FILE a file, as in `file`.
        let mut refused: BTreeMap<PathBuf, usize> = BTreeMap::new();
        for (base, prefix, item) in std::mem::take(&mut self.others) {
            let text = |k: &str| {
                item.get(k)
                    .and_then(|v| v.as_str())
                    .unwrap_or("")
                    .to_string()
            };
            if param_kinds.contains(&(text("apiVersion"), text("kind"))) {
                params.push(item);
                continue;
            }
            let n = refused.entry(base.file.clone()).or_default();
            *n += 1;
            if *n <= MAX_PROBLEMS_PER_FILE {
                self.errors.push(unsupported_kind(&item, &prefix, &base));
            }
        }
        for (file, n) in refused {
            if n > MAX_PROBLEMS_PER_FILE {
                let more = n - MAX_PROBLEMS_PER_FILE;
                self.errors.push(Problem::of_file(
                    &file,
                    format!("and {more} more problems in this file, not listed"),
                ));
            }
        }
        params
    }

    /// Compiles every ValidatingAdmissionPolicy (with its bindings and the parameter objects;
    /// matching through `custom`'s versions too), then attaches every candidate to its
    /// webhook.
    fn attach_candidates(&mut self, custom: &Arc<CustomResources>) {
        let params = self.parameters();
        let compiled = self
            .policies
            .compile(&params, custom, &mut self.errors, &mut self.warnings);
        let policy = |name: &str| match compiled.get(name) {
            Some(Some(policy)) => Ok(policy.clone()),
            // Its problems are reported in its own document.
            Some(None) => Err(Vec::new()),
            None => Err(vec![FieldError::new(
                ErrorType::NotFound,
                "name",
                BadValue::from(name),
                "no ValidatingAdmissionPolicy of that name is in the configuration directory",
            )]),
        };
        let declared = std::mem::take(&mut self.candidates);
        candidates::attach(
            declared,
            &mut self.compiled,
            &mut self.backends,
            policy,
            &mut self.errors,
            &mut self.warnings,
        );
    }

    /// The snapshot, or every problem found.
    fn finish(mut self, hash: u64) -> Result<Snapshot, ConfigError> {
        // Every matcher sees every declared custom resource, whichever file declares it.
        let custom = Arc::new(std::mem::take(&mut self.custom));
        self.attach_candidates(&custom);
        let mut snapshot = Snapshot {
            files: self.files,
            warnings: self.warnings,
            hash,
            custom_resources: custom,
            ..Snapshot::default()
        };
        for mut webhook in self.compiled {
            webhook.matcher.custom_resources = snapshot.custom_resources.clone();
            let map = match webhook.webhook_type {
                WebhookType::Validating => &mut snapshot.validating,
                WebhookType::Mutating => &mut snapshot.mutating,
            };
            map.insert(webhook.name.clone(), Arc::new(webhook));
        }
        if !self.errors.is_empty() {
            return Err(ConfigError::Invalid(self.errors));
        }
        let mut by_configuration: BTreeMap<(WebhookType, String), Vec<Arc<Webhook>>> =
            BTreeMap::new();
        for w in snapshot.webhooks() {
            let key = (w.webhook_type, w.configuration.clone());
            by_configuration.entry(key).or_default().push(w.clone());
        }
        for t in [WebhookType::Validating, WebhookType::Mutating] {
            let all = snapshot.of_type(t).values().cloned().collect();
            snapshot.whole[t as usize] = Arc::new(Chain::new(t, None, all));
        }
        for ((t, name), webhooks) in by_configuration {
            let chain = Chain::new(t, Some(name.clone()), webhooks);
            snapshot.chains[t as usize].insert(name, Arc::new(chain));
        }
        if snapshot.len() <= crate::metrics::EAGER_WEBHOOKS {
            for webhook in snapshot.webhooks() {
                webhook.metrics.register_all();
            }
        }
        Ok(snapshot)
    }
}

/// Whether a document of a kind the proxy does not know may be a policy's parameter object
/// (`paramKind`): it names an apiVersion and has a `metadata.name`. Kept until every file is
/// read; anything else is refused at once.
pub(super) fn could_be_parameter(item: &serde_json::Value) -> bool {
    let named = item
        .pointer("/metadata/name")
        .and_then(|n| n.as_str())
        .is_some_and(|n| !n.is_empty());
    item.get("apiVersion")
        .and_then(|v| v.as_str())
        .is_some_and(|v| !v.is_empty())
        && named
}

/// The problem of a document whose kind the proxy does not load.
pub(super) fn unsupported_kind(item: &serde_json::Value, prefix: &str, base: &Problem) -> Problem {
    let kind = item
        .get("kind")
        .and_then(|v| v.as_str())
        .unwrap_or("")
        .to_string();
    Problem {
        kind: Some(kind.clone()),
        ..base.located(FieldError::new(
            ErrorType::NotSupported,
            format!("{prefix}kind"),
            kind.into(),
            "expected ValidatingWebhookConfiguration, MutatingWebhookConfiguration, CustomResourceDefinition, Candidate, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding, a policy's paramKind, or a List of them",
        ))
    }
}

/// Why a document of a file is not JSON or YAML; the problem's message, the parser's words
/// included (so no `source()`).
#[derive(Debug, thiserror::Error)]
pub(super) enum SyntaxError {
    #[error("invalid JSON: {0}")]
    Json(serde_json::Error),
    #[error("invalid YAML: {0}")]
    Yaml(serde_yaml_ng::Error),
}

/// Cuts `list` to `keep` items; how many were cut.
pub(super) fn truncate(list: &mut Vec<Problem>, keep: usize) -> usize {
    let cut = list.len().saturating_sub(keep);
    list.truncate(keep);
    cut
}

/// Hands each document of a file to `each` as a JSON value with its index (YAML: every `---`
/// document, parsed one at a time; JSON: the one document).
pub(super) fn documents(
    text: &str,
    is_json: bool,
    mut each: impl FnMut(usize, Result<serde_json::Value, SyntaxError>),
) {
    if is_json {
        let doc = serde_json::from_str::<strict::Strict>(text);
        each(0, doc.map(|d| d.0).map_err(SyntaxError::Json));
        return;
    }
    for (index, de) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let doc = strict::Strict::deserialize(de)
            .map(|d| d.0)
            .map_err(SyntaxError::Yaml);
        let failed = doc.is_err();
        each(index, doc);
        // After a syntax error the document iterator keeps yielding the same error forever.
        if failed {
            break;
        }
    }
}

/// Unwraps `List`s: returns `(field prefix, configuration value)` pairs.
pub(super) fn configuration_items(
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
pub(super) fn declare_custom_resource(
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
        Err(crd::CrdError::Decode { field, error }) => errors.push(Problem {
            kind: Some("CustomResourceDefinition".into()),
            configuration: name.clone(),
            field: format!("{prefix}{field}"),
            message: error.to_string(),
            ..base.clone()
        }),
        Err(crd::CrdError::Invalid(problems)) => {
            errors.extend(problems.into_iter().map(problem));
        }
    }
}
