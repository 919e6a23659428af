//! Webhook configuration from files: discovery, parsing (YAML multi-doc, JSON, `List`),
//! per-version defaults (`SetDefaults_ValidatingWebhook` and `SetDefaults_MutatingWebhook` in
//! `pkg/apis/admissionregistration/v1/defaults.go` and `.../v1beta1/defaults.go`), validation
//! as kube-apiserver does on create (`pkg/apis/admissionregistration/validation/validation.go`),
//! and compilation into a [`Snapshot`] the request path reads without locks.
//! CustomResourceDefinitions in the same files declare custom resources for matchPolicy
//! Equivalent. Depends on `api`, `backend`, `review`, `conversion`, `matching` and `field_error`.

pub mod candidates;
pub(crate) mod crd;
pub mod options;
mod policies;
mod removed;
pub mod static_manifests;
mod strict;

use std::collections::BTreeMap;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::api::{self, FailurePolicy, MatchPolicy, ReinvocationPolicy, SideEffects, WebhookType};
pub use crate::backend::Backend;
use crate::field_error::{BadValue, Error as FieldError, ErrorType, Path as FieldPath};
use crate::files;
use crate::kube_version::{self, KubeVersion};
use crate::matching::{LabelSelector, MatchCondition, MatchConditions, Matcher, Rule};
use crate::metrics::WebhookMetrics;
use crate::names;
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
    /// Selection, including the webhook's `failurePolicy` (see `Webhook::failure_policy`).
    pub matcher: Matcher,
    pub(crate) side_effects: SideEffects,
    /// `reinvocationPolicy`, defaulted (validating webhooks: `Never`, they have none).
    pub(crate) reinvocation_policy: ReinvocationPolicy,
    /// `timeoutSeconds` (1-30 s), or the webhook's `maxTimeoutSeconds` option when lower.
    pub(crate) timeout: Duration,
    /// How its answers are applied (`mode` option); `None` when not set: `serve
    /// --default-mode` decides (`Enforce` unless given).
    pub(crate) mode: Option<options::Mode>,
    /// `registered` option: `false` when `registration` leaves the webhook out (it is being
    /// retired; the proxy still answers its route).
    pub registered: bool,
    /// `maxConcurrentCalls` option: the backend call slots, `None` when unbounded.
    pub(crate) call_slots: Option<CallSlots>,
    /// The negotiated version; `None` when no entry is known (each call is then a call failure).
    pub review_version: Option<ReviewVersion>,
    /// Shared with each call's [`crate::dispatch::client::Target`] (no copy per call).
    pub(crate) backend: std::sync::Arc<Backend>,
    /// Its metric series, resolved once here so that the request path never hashes labels.
    pub(crate) metrics: WebhookMetrics,
    /// Replacements decided beside it in the background and compared with it
    /// ([`candidates`]); empty for most webhooks.
    pub(crate) candidates: Vec<Arc<candidates::Candidate>>,
}

/// A webhook's `maxConcurrentCalls`: how many, and the semaphore handing them out. A reload
/// makes new slots; calls under way keep theirs until they end.
#[derive(Debug)]
pub(crate) struct CallSlots {
    pub(crate) max: usize,
    pub(crate) slots: tokio::sync::Semaphore,
}

impl Webhook {
    /// The candidates attached to this webhook (decided beside it in the background), in
    /// the order their files were loaded.
    pub fn candidates(&self) -> &[Arc<candidates::Candidate>] {
        &self.candidates
    }

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
#[derive(Debug)]
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
    /// The chain routes: each configuration's webhooks, by type and `metadata.name`
    /// (`/configurations/{type}/{name}`).
    /// Indexed by `WebhookType as usize`, so that a route's `&str` name looks one up.
    pub(crate) chains: [BTreeMap<String, Arc<Chain>>; 2],
    /// Every validating, then every mutating webhook, as one chain each
    /// (`/configurations/{type}`).
    pub(crate) whole: [Arc<Chain>; 2],
}

/// The webhooks a chain route runs, in kube-apiserver's order: configurations sorted by
/// `metadata.name` (a byte comparison, Go's `<`: `sort.SliceStable` with `ByName` in
/// `staging/src/k8s.io/apiserver/pkg/admission/configuration/validating_webhook_manager.go`
/// and `mutating_webhook_manager.go`), then each configuration's webhooks in list order.
#[derive(Debug)]
pub(crate) struct Chain {
    pub(crate) webhook_type: WebhookType,
    /// The configuration's name; `None` for every configuration of the type.
    pub(crate) configuration: Option<String>,
    pub(crate) webhooks: Vec<Arc<Webhook>>,
    pub(crate) metrics: crate::metrics::ChainMetrics,
}

impl Chain {
    /// A chain of `webhooks`, sorted into kube-apiserver's order.
    fn new(
        webhook_type: WebhookType,
        configuration: Option<String>,
        mut webhooks: Vec<Arc<Webhook>>,
    ) -> Self {
        webhooks.sort_by(|a, b| (&a.configuration, a.index).cmp(&(&b.configuration, b.index)));
        let label = configuration.as_deref().unwrap_or("*");
        Chain {
            metrics: crate::metrics::ChainMetrics::new(label, webhook_type.as_str()),
            webhook_type,
            configuration,
            webhooks,
        }
    }

    /// The chain's name for logs and metrics: the configuration's, `*` for every one.
    pub(crate) fn name(&self) -> &str {
        self.configuration.as_deref().unwrap_or("*")
    }
}

impl Default for Snapshot {
    fn default() -> Self {
        let whole = |t| Arc::new(Chain::new(t, None, Vec::new()));
        Snapshot {
            validating: HashMap::new(),
            mutating: HashMap::new(),
            custom_resources: Arc::default(),
            files: Vec::new(),
            warnings: Vec::new(),
            hash: 0,
            chains: [BTreeMap::new(), BTreeMap::new()],
            whole: [whole(WebhookType::Validating), whole(WebhookType::Mutating)],
        }
    }
}

/// Why a route names no webhook.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RouteError {
    #[error("no webhook {0:?} is configured (routes are /webhooks/{{validating|mutating}}/{{name}} or /webhooks/{{name}} for the webhook names in the config)")]
    Unknown(String),
    #[error("webhook name {0:?} is both a validating and a mutating webhook: use /webhooks/validating/{0} or /webhooks/mutating/{0}")]
    Ambiguous(String),
    #[error("no {0} {1:?} is configured (chain routes are /configurations/{{validating|mutating}}/{{name}} for the configuration names in the config, or /configurations/{{validating|mutating}} for all of them)")]
    UnknownConfiguration(&'static str, String),
}

impl Snapshot {
    /// Every matchCondition that uses `authorizer`, as `(webhook, index in matchConditions,
    /// condition)`, in route order (`check` lists them; `serve` needs an authorizer for them).
    pub(crate) fn authorizer_conditions(&self) -> Vec<(&Webhook, usize, &MatchCondition)> {
        let mut found: Vec<(&Webhook, usize, &MatchCondition)> = self
            .webhooks()
            .flat_map(|w| {
                w.matcher
                    .match_conditions
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| c.uses_authorizer)
                    .map(move |(i, c)| (w.as_ref(), i, c))
            })
            .collect();
        found.sort_by(|a, b| {
            (&a.0.configuration, a.0.index, a.1).cmp(&(&b.0.configuration, b.0.index, b.1))
        });
        found
    }

    /// Refuses a configuration whose matchConditions use `authorizer` when `serve` has no
    /// authorizer to answer their checks: kube-apiserver always has one, so serving them
    /// without would decide differently.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] with one problem per such condition, naming the flag.
    pub fn require_authorizer(&self, available: bool) -> Result<(), ConfigError> {
        if available {
            return Ok(());
        }
        let problems: Vec<Problem> = self
            .authorizer_conditions()
            .into_iter()
            .map(|(w, i, c)| {
                Problem::of_webhook(
                    w,
                    format!("webhooks[{}].matchConditions[{i}].expression", w.index),
                    format!(
                        "matchCondition {:?} uses `authorizer` (authorization checks): start serve with --authorizer=subjectaccessreview to answer them by SubjectAccessReview",
                        c.name
                    ),
                )
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid(problems))
        }
    }

    /// Refuses a configuration whose webhooks select by namespace labels when `available` is
    /// false (`serve` has no `--namespaces-file` nor `--watch-namespaces`): each such webhook
    /// would reject every namespaced request, since no labels can be read.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming each webhook's `namespaceSelector`.
    pub fn require_namespaces(&self, available: bool) -> Result<(), ConfigError> {
        if available {
            return Ok(());
        }
        let problems: Vec<Problem> = self
            .webhooks()
            .filter(|w| !w.matcher.namespace_selector.is_empty())
            .map(|w| {
                Problem::of_webhook(
                    w,
                    format!("webhooks[{}].namespaceSelector", w.index),
                    "selects by namespace labels, which serve cannot read: start it with --namespaces-file or --watch-namespaces".to_string(),
                )
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid(problems))
        }
    }

    /// What kube-apiserver of `version` alone would refuse in these configurations (nothing
    /// when `None`): matchConditions before 1.28, and each matchCondition calling a CEL library
    /// newer than the version new expressions are compiled against there
    /// ([`crate::kube_version`]). Warnings, never refusals: the proxy evaluates matchConditions
    /// itself, in its own CEL environment, and its registration carries none
    /// (`registration`), so the cluster's version never takes them away; they say what would
    /// happen if the conditions were moved into the cluster's own registration.
    pub fn kube_version_warnings(&self, version: Option<KubeVersion>) -> Vec<Problem> {
        let Some(version) = version else {
            return Vec::new();
        };
        let mut webhooks: Vec<&Arc<Webhook>> = self.webhooks().collect();
        webhooks.sort_by(|a, b| {
            (&a.source, &a.configuration, a.index).cmp(&(&b.source, &b.configuration, b.index))
        });
        let mut problems = Vec::new();
        for w in webhooks {
            let conditions = &w.spec.match_conditions;
            if !conditions.is_empty() && version < kube_version::MATCH_CONDITIONS {
                problems.push(Problem::of_webhook(
                    w,
                    format!("webhooks[{}].matchConditions", w.index),
                    format!("matchConditions are served from Kubernetes {} (--kube-version {version}): the proxy evaluates them; kube-apiserver would refuse them in its own registration", kube_version::MATCH_CONDITIONS),
                ));
                continue;
            }
            let compiled = version.compatibility();
            for (i, c) in conditions.iter().enumerate() {
                let newer = crate::matching::conditions::functions_called(&c.expression)
                    .into_iter()
                    .find_map(|f| {
                        crate::matching::cel_env::introduced(&f)
                            .filter(|(v, _)| *v > compiled)
                            .map(|(v, lib)| (f, v, lib))
                    });
                if let Some((function, since, library)) = newer {
                    problems.push(Problem::of_webhook(
                        w,
                        format!("webhooks[{}].matchConditions[{i}].expression", w.index),
                        format!(
                            "{function}: {library} is in kube-apiserver's CEL environment from {since}, and kube-apiserver {version} compiles new expressions against {compiled}'s: the proxy evaluates it; kube-apiserver would refuse it in its own registration (undeclared reference to '{function}')"
                        ),
                    ));
                }
            }
        }
        problems
    }

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

    /// The chain a chain route names: `/configurations/{type}/{name}` (`Some(name)`) or
    /// `/configurations/{type}` (every configuration of the type).
    ///
    /// # Errors
    /// [`RouteError::UnknownConfiguration`] for a configuration not loaded.
    pub(crate) fn chain(
        &self,
        webhook_type: WebhookType,
        configuration: Option<&str>,
    ) -> Result<&Arc<Chain>, RouteError> {
        let Some(name) = configuration else {
            return Ok(&self.whole[webhook_type as usize]);
        };
        self.chains[webhook_type as usize].get(name).ok_or_else(|| {
            RouteError::UnknownConfiguration(webhook_type.configuration_kind(), name.to_string())
        })
    }

    /// The configurations of `webhook_type` by `metadata.name`, in kube-apiserver's order
    /// (names in byte order), each with its webhooks in list order: the chains'.
    pub(crate) fn configurations(
        &self,
        webhook_type: WebhookType,
    ) -> impl Iterator<Item = (&str, &[Arc<Webhook>])> {
        self.chains[webhook_type as usize]
            .iter()
            .map(|(name, chain)| (name.as_str(), chain.webhooks.as_slice()))
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
    /// A problem of a loaded webhook, at `field` (`webhooks[0].rules[1]`).
    pub(crate) fn of_webhook(w: &Webhook, field: String, message: String) -> Problem {
        Problem {
            file: w.source.clone(),
            document: None,
            kind: Some(w.webhook_type.configuration_kind().to_string()),
            configuration: Some(w.configuration.clone()),
            webhook: Some(w.name.clone()),
            field,
            message,
        }
    }

    /// A problem of the configuration `w` belongs to (not of `w`), at `field`
    /// (`metadata.name`).
    pub(crate) fn of_configuration(w: &Webhook, field: String, message: String) -> Problem {
        Problem {
            webhook: None,
            ..Problem::of_webhook(w, field, message)
        }
    }

    /// A problem of `file` as a whole (no document, kind or field).
    fn of_file(file: &Path, message: String) -> Problem {
        Problem {
            file: file.to_path_buf(),
            document: None,
            kind: None,
            configuration: None,
            webhook: None,
            field: String::new(),
            message,
        }
    }

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
        let text =
            files::read_to_string(&file, files::MAX_CONFIG_FILE_BYTES).map_err(|source| {
                ConfigError::Io {
                    path: file.clone(),
                    source,
                }
            })?;
        total += text.len() as u64;
        if total > files::MAX_CONFIG_BYTES {
            return Err(ConfigError::Io {
                path: path.to_path_buf(),
                source: files::FileError::TooLargeTogether {
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
    let mut load = Load::default();
    for (file, text) in files {
        load.file(file, text);
    }
    load.finish(files_hash(files))
}

/// A hash of the files' names and contents: equal on replicas serving the same files.
fn files_hash(files: &[(PathBuf, String)]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    files.hash(&mut h);
    h.finish()
}

/// One load under way: what [`load_contents`] gathers file by file, in file order.
#[derive(Default)]
struct Load {
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
fn could_be_parameter(item: &serde_json::Value) -> bool {
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
fn unsupported_kind(item: &serde_json::Value, prefix: &str, base: &Problem) -> Problem {
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

/// Why a document of a file is not JSON or YAML; the problem's message.
#[derive(Debug, thiserror::Error)]
enum SyntaxError {
    #[error("invalid JSON: {0}")]
    Json(#[source] serde_json::Error),
    #[error("invalid YAML: {0}")]
    Yaml(#[source] serde_yaml_ng::Error),
}

/// The most problems (and, separately, warnings) listed for one file; past them,
/// [`load_contents`] lists one more that says how many were left out (a file of a million
/// documents that are not configurations is one rejection, not a million log lines).
pub const MAX_PROBLEMS_PER_FILE: usize = 20;

/// Cuts `list` to `keep` items; how many were cut.
fn truncate(list: &mut Vec<Problem>, keep: usize) -> usize {
    let cut = list.len().saturating_sub(keep);
    list.truncate(keep);
    cut
}

/// Hands each document of a file to `each` as a JSON value with its index (YAML: every `---`
/// document, parsed one at a time; JSON: the one document).
fn documents(
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

/// Parses, defaults, validates and compiles one configuration object
/// (`validateValidatingWebhookConfiguration` and `validateMutatingWebhookConfiguration` in
/// `pkg/apis/admissionregistration/validation/validation.go`), then applies the proxy's own
/// webhook options. `None` when it has any problem (all of them are in `errors`).
fn compile_configuration(
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
struct ConfigurationScope<'a> {
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
fn configuration_scope<'a>(
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
fn decode_configuration(
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
fn compile_webhooks(
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
fn apply_options(
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
fn apply_webhook_options(
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
/// Returns the webhook and its warnings, or every `(field, message)` problem found. The steps
/// run in the order their problems are reported (pinned by the tests and `check`).
fn compile_webhook(
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

/// `webhooks[].name` must be a fully qualified name (`validateValidatingWebhook` and
/// `validateMutatingWebhook` in `pkg/apis/admissionregistration/validation/validation.go`:
/// `IsFullyQualifiedName`).
fn validate_webhook_name(name: &str, bad: &mut impl FnMut(FieldError)) {
    if name.is_empty() {
        bad(FieldError::required("name", ""));
    } else if !names::is_fully_qualified_name(name) {
        bad(FieldError::invalid(
            "name",
            name,
            "should be a domain with at least three segments separated by dots",
        ));
    }
}

/// `failurePolicy`, defaulted as the API version does (`SetDefaults_ValidatingWebhook` in
/// `pkg/apis/admissionregistration/v1/defaults.go`: Fail; v1beta1: Ignore) and checked against
/// `supportedFailurePolicies` (`validation.go`). An unsupported value stands in as Fail: the
/// webhook is refused anyway.
fn default_failure_policy(
    value: Option<&str>,
    v1beta1: bool,
    bad: &mut impl FnMut(FieldError),
) -> FailurePolicy {
    match value {
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
    }
}

/// `matchPolicy`, defaulted (`defaults.go`: Equivalent; v1beta1: Exact) and checked against
/// `supportedMatchPolicies` (`validation.go`).
fn default_match_policy(
    value: Option<&str>,
    v1beta1: bool,
    bad: &mut impl FnMut(FieldError),
) -> MatchPolicy {
    match value {
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
    }
}

/// `sideEffects`, defaulted (v1beta1's `defaults.go`: Unknown; v1 has no default, so it is
/// required) and checked as `validateValidatingWebhook` does on create: only None and
/// NoneOnDryRun are offered, Some and Unknown are kept from stored configurations.
fn default_side_effects(
    value: Option<&str>,
    v1beta1: bool,
    bad: &mut impl FnMut(FieldError),
) -> SideEffects {
    match value {
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
    }
}

/// The warning for sideEffects Some or Unknown: accepted (kube-apiserver keeps them from
/// stored configurations), but every dry-run request is refused (`NewDryRunUnsupportedErr`).
fn side_effects_warning(side_effects: SideEffects) -> Option<(String, String)> {
    matches!(side_effects, SideEffects::Some | SideEffects::Unknown).then(|| {
        (
            "sideEffects".into(),
            format!("{side_effects:?} is only accepted from configurations stored before v1; dry-run requests matching this webhook are rejected (\"does not support dry run\"): kubectl apply --dry-run=server and kubectl diff fail; fix: sideEffects: None, or NoneOnDryRun if the webhook honours request.dryRun"),
        )
    })
}

/// `timeoutSeconds`, defaulted (`defaults.go`: 10; v1beta1: 30) and checked to be 1-30, as
/// `validateValidatingWebhook` does.
fn default_timeout_seconds(
    value: Option<i64>,
    v1beta1: bool,
    bad: &mut impl FnMut(FieldError),
) -> i64 {
    let timeout_seconds = value.unwrap_or(if v1beta1 { 30 } else { 10 });
    if !(1..=30).contains(&timeout_seconds) {
        bad(FieldError::invalid(
            "timeoutSeconds",
            timeout_seconds,
            "the timeout value must be between 1 and 30 seconds",
        ));
    }
    timeout_seconds
}

/// `admissionReviewVersions`, defaulted (v1beta1's `defaults.go`: `[v1beta1]`; v1 requires it)
/// and validated (`validateAdmissionReviewVersions` in `validation.go`: DNS-1035 labels, no
/// duplicates, at least one version kube-apiserver speaks). Returns the version the proxy
/// speaks to the backend, `None` when no entry is known.
fn validate_review_versions(
    hook: &api::Webhook,
    v1beta1: bool,
    bad: &mut impl FnMut(FieldError),
) -> Option<ReviewVersion> {
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
    review_version
}

/// `reinvocationPolicy`, defaulted to Never; when given, Never or IfNeeded
/// (`validateMutatingWebhook`: `supportedReinvocationPolicies`).
fn default_reinvocation_policy(
    value: Option<&str>,
    bad: &mut impl FnMut(FieldError),
) -> ReinvocationPolicy {
    let Some(p) = value else {
        return ReinvocationPolicy::Never;
    };
    ReinvocationPolicy::parse(p).unwrap_or_else(|| {
        bad(FieldError::not_supported(
            "reinvocationPolicy",
            p,
            &["IfNeeded", "Never"],
        ));
        ReinvocationPolicy::Never
    })
}

/// namespaceSelector then objectSelector: validated (`ValidateLabelSelector` in
/// `apimachinery/pkg/apis/meta/v1/validation`, called by `validateValidatingWebhook`), then
/// compiled. An invalid selector compiles as the empty one: the webhook is refused anyway.
fn compile_selectors(hook: &api::Webhook, problems: &mut FieldProblems) -> [LabelSelector; 2] {
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
fn client_config_backend(
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
fn build_webhook(
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

#[cfg(test)]
mod tests;
