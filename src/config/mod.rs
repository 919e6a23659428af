//! Webhook configuration from files: discovery, parsing (YAML multi-doc, JSON, `List`),
//! per-version defaults (`SetDefaults_ValidatingWebhook` and `SetDefaults_MutatingWebhook` in
//! `pkg/apis/admissionregistration/v1/defaults.go` and `.../v1beta1/defaults.go`), validation
//! as kube-apiserver does on create (`pkg/apis/admissionregistration/validation/validation.go`),
//! and compilation into a [`Snapshot`] the request path reads without locks.
//! CustomResourceDefinitions in the same files declare custom resources for matchPolicy
//! Equivalent. Depends on `api`, `backend`, `review`, `conversion`, `matching` and `field_error`.
//!
//! This file holds what a load produces ([`Webhook`], [`Snapshot`], [`Problem`],
//! [`ConfigError`]); the steps are beside it: `load` (files, documents, kinds), `compile` (one
//! configuration object into webhooks), `defaults` and `validation` (kube-apiserver's, per
//! version), and the other kinds a directory holds (`candidates`, `policies`, `crd`,
//! `options`, `static_manifests`, `removed`, `strict`).

pub mod candidates;
pub(crate) mod crd;
pub mod options;
mod policies;
mod removed;
pub mod static_manifests;
mod strict;

mod compile;
mod defaults;
mod load;
mod validation;

pub(crate) use compile::compile_match_conditions;
use compile::*;
use defaults::*;
use load::*;
pub use load::{config_files, load, load_contents, read_files};
use validation::*;

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
    #[error("cannot read {}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why it could not be read (quoted, not a `source()`).
        error: std::io::Error,
    },
    /// Every problem found, each with its file and field path.
    #[error("{} problem(s) in the webhook configuration:\n{}", .0.len(), .0.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<Problem>),
}

/// The most problems (and, separately, warnings) listed for one file; past them,
/// [`load_contents`] lists one more that says how many were left out (a file of a million
/// documents that are not configurations is one rejection, not a million log lines).
pub const MAX_PROBLEMS_PER_FILE: usize = 20;

/// `(field, message)` problems or warnings of one webhook, fields relative to it.
type FieldProblems = Vec<(String, String)>;

#[cfg(test)]
mod tests;
