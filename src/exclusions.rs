//! Proxy-wide exclusions (`serve --exempt-namespace`, `--exempt-namespace-selector`,
//! `--exclusions-file`): requests answered `allowed` before any webhook is looked at, without a
//! backend call, the way Gatekeeper's `--exempt-namespace` and Kyverno's `resourceFilters` /
//! `--excludeBootstrapResources` keep the control plane out of reach of a broad legacy
//! registration. kube-apiserver has nothing like it: this is the proxy's own departure from its
//! exactness, opt-in. With none of the flags nothing here exists ([`Exclusions::load`] gives
//! `None`) and every request goes to its webhooks as kube-apiserver would send it.
//!
//! A request is exempt when its namespace is listed or selected (namespace labels read as
//! namespaceSelector reads them: `GetNamespaceLabels` in
//! `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/namespace/matcher.go`,
//! so a Namespace's own requests use its own name and labels and other cluster-scoped requests
//! never match), or when any one of the exclusion matchConditions is `true`. Those are compiled
//! and run in the webhook CEL environment (`object`, `oldObject`, `request`; `namespaceObject`
//! is null, as for webhooks), without `authorizer`: exclusions are decided before anything is
//! asked of the cluster. A condition that errors exempts nothing; it is counted and logged at
//! debug. The files are read once, at start.
//!
//! Depends on `api`, `names`, `field_error`, `config` (matchConditions and selectors validated
//! as a webhook's are), `matching`, `review`, `metrics` and `dispatch` (the answer).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use crate::api;
use crate::config::compile_match_conditions;
use crate::decision::Decision;
use crate::dispatch::Answer;
use crate::field_error::Error as FieldError;
use crate::matching::selector::parse_selector;
use crate::matching::{
    namespace_labels, LabelSelector, MatchConditions, NamespaceLabels, Namespaces,
};
use crate::names;
use crate::review::{AdmissionResponse, ParsedReview};

/// What the command line asks for; `serve`, `check` and `explain` take the same flags.
#[derive(Clone, Debug, Default)]
pub struct ExclusionSettings {
    /// `--exempt-namespace`, repeatable: namespace names.
    pub namespaces: Vec<String>,
    /// `--exempt-namespace-selector`: a label selector as kubectl's `-l` takes it
    /// ([`parse_selector`]).
    pub namespace_selector: Option<String>,
    /// `--exclusions-file`: YAML or JSON, `{namespaces, namespaceSelector, matchConditions}`.
    pub file: Option<PathBuf>,
    /// The cluster's kube-apiserver never sends the virtual authentication and authorization
    /// resources ([`VIRTUAL_RESOURCES`]) to webhooks: `--kube-version` 1.37 or later
    /// ([`crate::kube_version::VIRTUAL_RESOURCES_EXCLUDED`]). They are answered as that
    /// kube-apiserver decides them: without a webhook.
    pub virtual_resources: bool,
}

/// The non-persisted resources kube-apiserver keeps from admission webhooks from 1.37
/// (`ExcludeAdmissionWebhookVirtualResources`, beta and on), as it already keeps them from
/// admission policies ([`crate::resources::VIRTUAL_RESOURCES`]).
pub use crate::resources::VIRTUAL_RESOURCES;

impl ExclusionSettings {
    /// These settings for a cluster of `version`: from
    /// [`crate::kube_version::VIRTUAL_RESOURCES_EXCLUDED`] the virtual resources are exempt as
    /// well (an unknown version changes nothing).
    pub fn for_kube_version(self, version: Option<crate::kube_version::KubeVersion>) -> Self {
        let excluded =
            version.is_some_and(|v| v >= crate::kube_version::VIRTUAL_RESOURCES_EXCLUDED);
        ExclusionSettings {
            virtual_resources: self.virtual_resources || excluded,
            ..self
        }
    }

    /// True when no exclusion is asked for (the default).
    pub fn is_empty(&self) -> bool {
        self.namespaces.is_empty()
            && self.namespace_selector.is_none()
            && self.file.is_none()
            && !self.virtual_resources
    }
}

/// The `--exclusions-file` format. Unknown fields are refused, as in webhook configurations.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ExclusionsFile {
    /// Namespace names.
    #[serde(default)]
    namespaces: Vec<String>,
    /// A `metav1.LabelSelector` over namespace labels.
    #[serde(default)]
    namespace_selector: Option<api::LabelSelector>,
    /// matchConditions, validated as a webhook's (`validateMatchConditions`).
    #[serde(default)]
    match_conditions: Vec<api::MatchCondition>,
}

/// Why the exclusions cannot be used; `serve` refuses to start.
#[derive(Debug, thiserror::Error)]
pub enum ExclusionsError {
    /// An `--exempt-namespace` value is not a namespace name.
    #[error("--exempt-namespace {0:?}: a namespace name must be a lowercase RFC 1123 label (at most 63 lower case alphanumeric characters or '-', starting and ending with an alphanumeric character)")]
    NamespaceName(String),
    /// `--exempt-namespace-selector` does not parse, or selects every namespace.
    #[error("--exempt-namespace-selector {text:?}: {message}")]
    Selector {
        /// The flag's value.
        text: String,
        /// What is wrong with it.
        message: String,
    },
    /// `--exclusions-file` cannot be read.
    #[error("--exclusions-file {}: {error}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The read error.
        error: std::io::Error,
    },
    /// `--exclusions-file` is not valid: every problem, each a field path
    /// (`matchConditions[1].expression`) and the reason in kube-apiserver's words.
    #[error("--exclusions-file {}: {}", path.display(), problems.join("; "))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Each problem, `<field path>: <reason>`.
        problems: Vec<String>,
    },
}

impl ExclusionsError {
    /// One line per problem (`check` prints each): the file's problems one by one, else the
    /// error itself.
    pub fn problems(&self) -> Vec<String> {
        match self {
            ExclusionsError::Invalid { path, problems } => problems
                .iter()
                .map(|p| format!("--exclusions-file {}: {p}", path.display()))
                .collect(),
            other => vec![other.to_string()],
        }
    }
}

/// Why a request is exempt, for the `admission_proxy_exempt_total` `reason` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExemptionReason {
    /// Its namespace is listed or selected.
    Namespace,
    /// An exclusion matchCondition is `true`.
    Condition,
    /// A virtual resource kube-apiserver of the cluster's version never sends to webhooks.
    VirtualResource,
}

impl ExemptionReason {
    /// `namespace` or `condition` (one of `metrics::EXEMPTION_REASONS`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ExemptionReason::Namespace => "namespace",
            ExemptionReason::Condition => "condition",
            ExemptionReason::VirtualResource => "virtual_resource",
        }
    }
}

/// A request exempted by a proxy-wide exclusion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exemption {
    /// Which kind of exclusion applied.
    pub reason: ExemptionReason,
    /// Why, in one line (`namespace "kube-system" is listed (--exempt-namespace)`): the log
    /// line's detail and what `explain` shows.
    pub detail: String,
}

impl Exemption {
    /// The answer: `allowed`, in the caller's AdmissionReview version, decision
    /// [`Decision::Exempt`]; no webhook was looked at and nothing was called.
    pub(crate) fn answer(&self, review: &ParsedReview<'_>) -> Answer {
        let allow = AdmissionResponse::allow(&review.request.uid);
        Answer::respond(review, allow, Decision::Exempt, self.detail.clone())
    }
}

/// What [`Exclusions::decide`] found: the exemption, if any, and the exclusion
/// matchConditions' errors (which exempt nothing).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Decided {
    pub(crate) exemption: Option<Exemption>,
    /// The failed conditions' errors, aggregated; `None` when none failed or none ran.
    pub(crate) condition_error: Option<String>,
}

/// The proxy-wide exclusions, compiled.
#[derive(Debug, Default)]
pub struct Exclusions {
    /// Namespace names, each with where it was given (`--exempt-namespace`, the file).
    namespaces: BTreeMap<String, &'static str>,
    /// Namespace selectors, each with where it was given; any one matching exempts.
    selectors: Vec<(&'static str, LabelSelector)>,
    /// The file's matchConditions; any one `true` exempts.
    conditions: MatchConditions,
    /// [`VIRTUAL_RESOURCES`] are exempt ([`ExclusionSettings::virtual_resources`]).
    virtual_resources: bool,
}

/// Where a name or selector came from, as the detail names it.
const FLAG_NAMESPACE: &str = "--exempt-namespace";
const FLAG_SELECTOR: &str = "--exempt-namespace-selector";
const FILE_NAMESPACES: &str = "--exclusions-file namespaces";
const FILE_SELECTOR: &str = "--exclusions-file namespaceSelector";

impl Exclusions {
    /// Builds the exclusions `settings` ask for; `None` when they ask for none.
    ///
    /// # Errors
    /// [`ExclusionsError`]: a namespace name that is not one, a selector that does not parse
    /// or selects every namespace (which would turn every webhook off), a file that cannot be
    /// read, or one with problems (all of them listed, each with its field path).
    pub fn load(settings: &ExclusionSettings) -> Result<Option<Self>, ExclusionsError> {
        if settings.is_empty() {
            return Ok(None);
        }
        let mut exclusions = Exclusions {
            virtual_resources: settings.virtual_resources,
            ..Exclusions::default()
        };
        for name in &settings.namespaces {
            if !names::is_dns1123_label(name) {
                return Err(ExclusionsError::NamespaceName(name.clone()));
            }
            exclusions.namespaces.insert(name.clone(), FLAG_NAMESPACE);
        }
        if let Some(text) = &settings.namespace_selector {
            let selector_error = |message: String| ExclusionsError::Selector {
                text: text.clone(),
                message,
            };
            let parsed = parse_selector(text).map_err(|e| selector_error(e.to_string()))?;
            let compiled =
                LabelSelector::compile(Some(&parsed)).map_err(|e| selector_error(e.to_string()))?;
            if compiled.is_empty() {
                return Err(selector_error(SELECTS_EVERYTHING.to_string()));
            }
            exclusions.selectors.push((FLAG_SELECTOR, compiled));
        }
        if let Some(path) = &settings.file {
            let text = crate::files::read_to_string(path, crate::files::MAX_CONFIG_FILE_BYTES)
                .map_err(|error| ExclusionsError::Read {
                    path: path.clone(),
                    error,
                })?;
            exclusions
                .add_file(&text)
                .map_err(|problems| ExclusionsError::Invalid {
                    path: path.clone(),
                    problems,
                })?;
        }
        Ok(Some(exclusions))
    }

    /// Adds the exclusions of a file's `text`.
    ///
    /// # Errors
    /// Every problem, `<field path>: <reason>`.
    fn add_file(&mut self, text: &str) -> Result<(), Vec<String>> {
        let file = parse_file(text)?;
        let mut problems = Vec::new();
        let mut bad = |e: FieldError| problems.push(e.to_string());
        for (i, name) in file.namespaces.iter().enumerate() {
            let at = format!("namespaces[{i}]");
            if !names::is_dns1123_label(name) {
                bad(FieldError::invalid(
                    at,
                    name,
                    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
                ));
            } else if self.namespaces.get(name) == Some(&FILE_NAMESPACES) {
                bad(FieldError::duplicate(at, name));
            } else {
                self.namespaces.insert(name.clone(), FILE_NAMESPACES);
            }
        }
        if let Some(selector) = &file.namespace_selector {
            crate::matching::selector::validate_label_selector(
                Some(selector),
                "namespaceSelector",
                &mut bad,
            );
            match LabelSelector::compile(Some(selector)) {
                Ok(compiled) if compiled.is_empty() => {
                    bad(FieldError::forbidden(
                        "namespaceSelector",
                        SELECTS_EVERYTHING,
                    ));
                }
                Ok(compiled) => self.selectors.push((FILE_SELECTOR, compiled)),
                // The selector's error names its own field (`values`, `operator`).
                Err(e) => bad(e.prefixed("namespaceSelector.matchExpressions.")),
            }
        }
        let compiled = compile_match_conditions(&file.match_conditions, &mut bad);
        for (i, mc) in file.match_conditions.iter().enumerate() {
            let uses_authorizer = compiled
                .iter()
                .any(|c| c.name == mc.name && c.expression == mc.expression && c.uses_authorizer);
            if uses_authorizer {
                bad(FieldError::forbidden(
                    format!("matchConditions[{i}].expression"),
                    "`authorizer` is not available to proxy-wide exclusions: they are decided before any webhook, without asking the cluster; put this condition on the webhooks instead",
                ));
            }
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        self.conditions = MatchConditions::new(compiled);
        Ok(())
    }

    /// What applies to `review`, without counting or logging (`explain`; `serve` calls
    /// [`Exclusions::exempt`]). Namespaces first: conditions run only when no namespace
    /// exemption applies.
    pub(crate) fn decide(
        &self,
        review: &ParsedReview<'_>,
        namespaces: Option<&Namespaces>,
    ) -> Decided {
        let resource = review.request.effective_resource();
        if self.virtual_resources
            && VIRTUAL_RESOURCES.contains(&(&*resource.group, &*resource.resource))
        {
            return Decided {
                exemption: Some(Exemption {
                    reason: ExemptionReason::VirtualResource,
                    detail: format!(
                        "{} {} never reaches webhooks in kube-apiserver {} and later (ExcludeAdmissionWebhookVirtualResources; --kube-version)",
                        resource.group,
                        resource.resource,
                        crate::kube_version::VIRTUAL_RESOURCES_EXCLUDED
                    ),
                }),
                condition_error: None,
            };
        }
        if let Some(exemption) = self.by_namespace(review, namespaces) {
            return Decided {
                exemption: Some(exemption),
                condition_error: None,
            };
        }
        let any = self.conditions.evaluate_any(review);
        Decided {
            exemption: any.first_true.map(|name| Exemption {
                reason: ExemptionReason::Condition,
                detail: format!("matchCondition {name:?} of --exclusions-file is true"),
            }),
            condition_error: any.error,
        }
    }

    /// Whether `review` is exempt, counted (`admission_proxy_exempt_total`; a condition error
    /// in `admission_proxy_exclusion_condition_errors_total`, logged at debug): the call the
    /// admission routes make before any webhook. `namespaces`: the labels namespaceSelector
    /// would use (the cache, or a live lookup when [`Exclusions::namespace_missing`]).
    pub fn exempt(
        &self,
        review: &ParsedReview<'_>,
        namespaces: Option<&Namespaces>,
    ) -> Option<Exemption> {
        let Decided {
            exemption,
            condition_error,
        } = self.decide(review, namespaces);
        if let Some(error) = condition_error {
            crate::metrics::exclusion_condition_error();
            tracing::debug!(uid = %crate::log_value::Bounded(&review.request.uid), error = %crate::log_value::Bounded(&error), "a matchCondition of --exclusions-file failed to evaluate: it exempts nothing");
        }
        if let Some(e) = &exemption {
            crate::metrics::exempt(e.reason.as_str());
        }
        exemption
    }

    /// Whether deciding `review` needs the labels of a namespace `namespaces` does not know: a
    /// namespace selector is set, the request is namespaced and not exempt by name, and the
    /// cache has no entry. With `--watch-namespaces` the caller looks the namespace up live, as
    /// for a webhook's namespaceSelector; without, the namespace is not exempt by selector.
    pub fn namespace_missing(
        &self,
        review: &ParsedReview<'_>,
        namespaces: Option<&Namespaces>,
    ) -> bool {
        let namespace = &*review.request.namespace;
        !self.selectors.is_empty()
            && !namespace.is_empty()
            && !self.namespaces.contains_key(namespace)
            && matches!(
                namespace_labels(review, namespaces),
                NamespaceLabels::NotFound | NamespaceLabels::Unavailable(_)
            )
    }

    /// The exemption by namespace name or selector. `request.namespace` is empty for a
    /// cluster-scoped object and a Namespace's own name for a Namespace (kube-apiserver sets
    /// it so), so cluster-scoped requests other than a Namespace's are never exempt here.
    fn by_namespace(
        &self,
        review: &ParsedReview<'_>,
        namespaces: Option<&Namespaces>,
    ) -> Option<Exemption> {
        let namespace = &*review.request.namespace;
        if namespace.is_empty() {
            return None;
        }
        if let Some(source) = self.namespaces.get(namespace) {
            return Some(Exemption {
                reason: ExemptionReason::Namespace,
                detail: format!("namespace {namespace:?} is listed ({source})"),
            });
        }
        if self.selectors.is_empty() {
            return None;
        }
        let labels = match namespace_labels(review, namespaces) {
            NamespaceLabels::Object(labels) => Cow::Owned(labels),
            NamespaceLabels::Stored(labels) => Cow::Borrowed(labels),
            // Unknown labels select nothing: the webhooks decide as usual.
            NamespaceLabels::ClusterScoped
            | NamespaceLabels::NotFound
            | NamespaceLabels::Unavailable(_) => return None,
        };
        self.selectors
            .iter()
            .find(|(_, selector)| selector.matches(&labels))
            .map(|(source, selector)| Exemption {
                reason: ExemptionReason::Namespace,
                detail: format!("namespace {namespace:?} matches {source} {selector}"),
            })
    }

    /// The exclusion matchConditions (`explain` shows each one's value).
    pub(crate) fn match_conditions(&self) -> &MatchConditions {
        &self.conditions
    }

    /// What is configured, in one line (`serve` logs it, `check` prints it):
    /// `namespaces kube-system, kube-public; namespaceSelector env=system; 2 matchCondition(s)`.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if !self.namespaces.is_empty() {
            let names: Vec<&str> = self.namespaces.keys().map(String::as_str).collect();
            parts.push(format!("namespaces {}", names.join(", ")));
        }
        for (source, selector) in &self.selectors {
            parts.push(format!("{source} {selector}"));
        }
        let conditions = self.conditions.iter().count();
        if conditions > 0 {
            parts.push(format!("{conditions} matchCondition(s)"));
        }
        if self.virtual_resources {
            parts
                .push("virtual authentication and authorization resources (--kube-version)".into());
        }
        if parts.is_empty() {
            return "none".to_string();
        }
        parts.join("; ")
    }
}

/// Why an empty selector is refused.
const SELECTS_EVERYTHING: &str =
    "an empty selector selects every namespace, which would exempt every namespaced request from every webhook";

/// The file's text as [`ExclusionsFile`]; an empty file is an empty one.
///
/// # Errors
/// The YAML error, or the field path and what is wrong there
/// (`matchConditions[0].expresion: unknown field ...`).
fn parse_file(text: &str) -> Result<ExclusionsFile, Vec<String>> {
    crate::files::check_nesting(text).map_err(|e| vec![e.to_string()])?;
    let value: serde_json::Value =
        serde_yaml_ng::from_str(text).map_err(|e| vec![format!("not YAML or JSON: {e}")])?;
    if value.is_null() {
        return Ok(ExclusionsFile::default());
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let message = e.into_inner().to_string();
        vec![if path == "." {
            message
        } else {
            format!("{path}: {message}")
        }]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(file: &str) -> Result<Exclusions, Vec<String>> {
        let mut exclusions = Exclusions::default();
        exclusions.add_file(file).map(|()| exclusions)
    }

    fn review(namespace: &str, resource: &str, labels: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": resource},
                "name": "n", "namespace": namespace, "operation": "CREATE",
                "userInfo": {"username": "system:serviceaccount:kube-system:ctrl"},
                "object": {"metadata": {"name": "n", "labels": labels}}
            }
        }))
        .unwrap()
    }

    fn namespaces() -> Namespaces {
        Namespaces::parse("kind: List\nitems:\n- kind: Namespace\n  metadata: {name: ops, labels: {tier: system}}\n- kind: Namespace\n  metadata: {name: app}\n").unwrap()
    }

    #[test]
    fn problems_name_their_field() {
        let problems = load(
            "namespaces: [ok, Not_OK, ok]\nnamespaceSelector: {matchExpressions: [{key: k, operator: In}]}\nmatchConditions:\n- {name: a, expression: 'true'}\n- {name: b, expression: 'object.'}\n- {name: c, expression: \"authorizer.group('').resource('pods').check('get').allowed()\"}\n",
        )
        .unwrap_err();
        let joined = problems.join("\n");
        for want in [
            "namespaces[1]: Invalid value: \"Not_OK\"",
            "namespaces[2]: Duplicate value: \"ok\"",
            "namespaceSelector.matchExpressions.values: Required value",
            "matchConditions[1].expression: Invalid value: \"object.\": compilation failed",
            "matchConditions[2].expression: Forbidden: `authorizer` is not available",
        ] {
            assert!(joined.contains(want), "missing {want}: {joined}");
        }
        assert_eq!(
            load("matchConditions: [{name: a, expresion: 'true'}]").unwrap_err(),
            vec!["matchConditions[0].expresion: unknown field `expresion`, expected `name` or `expression`"]
        );
        assert!(load("namespaceSelector: {}").unwrap_err()[0]
            .starts_with("namespaceSelector: Forbidden: an empty selector"));
        assert!(load("").is_ok(), "an empty file exempts nothing");
    }

    #[test]
    fn namespaces_by_name_and_selector_cluster_scoped_never() {
        let exclusions =
            load("namespaces: [kube-system]\nnamespaceSelector: {matchLabels: {tier: system}}\n")
                .unwrap();
        let ns = namespaces();
        let decide = |body: &[u8]| {
            let review = ParsedReview::parse(body).unwrap();
            exclusions.decide(&review, Some(&ns)).exemption
        };
        let by_name = decide(&review("kube-system", "pods", serde_json::json!({}))).unwrap();
        assert_eq!(by_name.reason, ExemptionReason::Namespace);
        assert!(by_name.detail.contains("--exclusions-file namespaces"));
        let by_selector = decide(&review("ops", "pods", serde_json::json!({}))).unwrap();
        assert!(
            by_selector.detail.contains("tier=system"),
            "{by_selector:?}"
        );
        assert_eq!(decide(&review("app", "pods", serde_json::json!({}))), None);
        assert_eq!(
            decide(&review("unknown", "pods", serde_json::json!({}))),
            None,
            "a namespace without known labels is not selected"
        );
        assert_eq!(
            decide(&review("", "nodes", serde_json::json!({"tier": "system"}))),
            None,
            "cluster-scoped"
        );
        // A Namespace's own request: its own labels, as namespaceSelector reads them.
        assert!(decide(&review(
            "new",
            "namespaces",
            serde_json::json!({"tier": "system"})
        ))
        .is_some());
    }

    #[test]
    fn any_true_condition_exempts_and_errors_do_not() {
        let exclusions = load(
            "matchConditions:\n- {name: broken, expression: 'object.spec.missing == 1'}\n- {name: controllers, expression: \"request.userInfo.username.startsWith('system:serviceaccount:kube-system:')\"}\n",
        )
        .unwrap();
        let body = review("app", "pods", serde_json::json!({}));
        let review = ParsedReview::parse(&body).unwrap();
        let decided = exclusions.decide(&review, None);
        let exemption = decided.exemption.unwrap();
        assert_eq!(exemption.reason, ExemptionReason::Condition);
        assert!(exemption.detail.contains("\"controllers\""));
        assert!(decided
            .condition_error
            .unwrap()
            .starts_with("expression 'object.spec.missing == 1' resulted in error"));

        let only_broken =
            load("matchConditions: [{name: broken, expression: 'object.spec.missing == 1'}]")
                .unwrap();
        let decided = only_broken.decide(&review, None);
        assert_eq!(decided.exemption, None, "an error exempts nothing");
        assert!(decided.condition_error.is_some());
    }

    #[test]
    fn flags_are_validated() {
        let settings = |namespaces: &[&str], selector: Option<&str>| ExclusionSettings {
            namespaces: namespaces.iter().map(ToString::to_string).collect(),
            namespace_selector: selector.map(ToString::to_string),
            ..ExclusionSettings::default()
        };
        assert!(Exclusions::load(&ExclusionSettings::default())
            .unwrap()
            .is_none());
        assert!(matches!(
            Exclusions::load(&settings(&["Bad"], None)),
            Err(ExclusionsError::NamespaceName(_))
        ));
        let err = Exclusions::load(&settings(&[], Some("")))
            .unwrap_err()
            .to_string();
        assert!(err.contains("selects every namespace"), "{err}");
        let err = Exclusions::load(&settings(&[], Some("a in b")))
            .unwrap_err()
            .to_string();
        assert!(err.contains("expected: '('"), "{err}");
        let loaded = Exclusions::load(&settings(&["kube-system"], Some("tier=system")))
            .unwrap()
            .unwrap();
        assert_eq!(
            loaded.summary(),
            "namespaces kube-system; --exempt-namespace-selector tier=system"
        );
    }
}
