//! The plugin's answer for one policy (`dispatcher.go` `Dispatch`): matching, conversion to
//! the matched version, bindings, parameters, validate calls, then validationActions, audit
//! annotations and the first denial.

use std::collections::BTreeMap;

use ::cel::common::value::Val;

use super::*;
use crate::conversion;
use crate::deep_json;
use crate::matching::cel_json::{self, JsonVal};

/// `reasonToCode` (`policy_decision.go`).
fn reason_to_code(reason: &str) -> u16 {
    match reason {
        "Forbidden" => 403,
        "Unauthorized" => 401,
        "RequestEntityTooLarge" => 413,
        _ => 422,
    }
}

/// A decision that denies, with what it came from (`policyDecisionWithMetadata`).
struct Denied {
    binding: Option<String>,
    message: String,
    reason: Option<String>,
    validation: Option<usize>,
}

/// The outcome of a namespace lookup for `namespaceObject`.
enum NamespaceValue<'n> {
    /// Built once per evaluation, its strings borrowed from the namespace; bound to each
    /// validate call by reference.
    Value(JsonVal<'n>),
    NotFound(String),
    Undecided(String),
}

/// One dispatch in progress.
struct Run<'p> {
    policy: &'p Policy,
    denied: Vec<Denied>,
    verdict: PolicyVerdict,
    /// auditAnnotations' values by key, distinct, in order (`auditAnnotationCollector`).
    collected: BTreeMap<String, Vec<String>>,
    applied: bool,
}

impl Policy {
    /// `Dispatch` for this policy alone.
    pub(super) fn dispatch(
        &self,
        review: &ParsedReview<'_>,
        namespaces: Option<&Namespaces>,
    ) -> PolicyVerdict {
        let mut run = Run::new(self);
        if is_excluded_resource(review) {
            return run.finish(review);
        }
        let equivalent = match self
            .constraints
            .matches(review, namespaces, &self.custom_resources)
        {
            Match::No => return run.finish(review),
            Match::Error(message) => {
                run.config_error(None, message);
                return run.finish(review);
            }
            Match::Unavailable(reason) => return undecided(reason),
            Match::Yes(equivalent) => equivalent,
        };
        let body = match self.versioned(review, equivalent) {
            Ok(body) => body,
            Err(Versioned::Undecided(reason)) => return undecided(reason),
            Err(Versioned::Failed(message)) => {
                run.config_error(None, format!("failed to convert object version: {message}"));
                return run.finish(review);
            }
        };
        let converted = match body.as_deref().map(ParsedReview::parse).transpose() {
            Ok(converted) => converted,
            Err(e) => {
                run.config_error(None, format!("failed to convert object version: {e}"));
                return run.finish(review);
            }
        };
        let seen = converted.as_ref().unwrap_or(review);
        run.bindings(review, seen, namespaces)
    }

    /// The request in the version the policy matched: `None` when `review` already is.
    ///
    /// # Errors
    /// The conversion failed, or takes a conversion webhook (undecided here).
    fn versioned(
        &self,
        review: &ParsedReview<'_>,
        equivalent: Option<Equivalent>,
    ) -> Result<Option<Vec<u8>>, Versioned> {
        let request = &review.request;
        let invocation = match equivalent {
            Some(e) => e,
            None if request.request_kind.is_none() || request.effective_kind() == &request.kind => {
                return Ok(None)
            }
            // kube-apiserver sent the webhook an equivalent version: back to the request's.
            None => {
                let (kind, resource) = (request.effective_kind(), request.effective_resource());
                Equivalent {
                    group: resource.group.to_string().into(),
                    version: resource.version.to_string().into(),
                    resource: resource.resource.to_string().into(),
                    kind_group: kind.group.to_string().into(),
                    kind_version: kind.version.to_string().into(),
                    kind: kind.kind.to_string().into(),
                    custom: None,
                }
            }
        };
        if conversion::needs_webhook(review, &invocation) {
            return Err(Versioned::Undecided(
                "the request must be converted by a conversion webhook".into(),
            ));
        }
        conversion::rewrite_locally(review, invocation)
            .map(|rewritten| Some(rewritten.body))
            .map_err(|e| Versioned::Failed(e.to_string()))
    }

    /// `namespaceObject` for `review`: null for cluster-scoped requests and Namespaces
    /// themselves (`Dispatch` unsets the name for a v1 Namespace).
    fn namespace_value<'n>(
        &self,
        review: &ParsedReview<'_>,
        namespaces: Option<&'n Namespaces>,
    ) -> NamespaceValue<'n> {
        let request = &review.request;
        let kind = request.effective_kind();
        let is_namespace =
            kind.kind == "Namespace" && kind.version == "v1" && kind.group.is_empty();
        let name = &*request.namespace;
        if name.is_empty() || is_namespace {
            return NamespaceValue::Value(cel_json::null());
        }
        match namespaces {
            None if !self.reads.namespace => NamespaceValue::Value(cel_json::null()),
            None => {
                NamespaceValue::Undecided(format!("the labels of namespace {name:?} are not known"))
            }
            Some(n) => match (n.object(name), n.unavailable_reason()) {
                // Not built for a policy that never reads it.
                (Some(_), _) if !self.reads.namespace => NamespaceValue::Value(cel_json::null()),
                (Some(object), _) => NamespaceValue::Value(cel_json::from_json(object)),
                (None, Some(reason)) => NamespaceValue::Undecided(format!(
                    "cannot read the labels of namespace {name:?}: {reason}"
                )),
                (None, None) => NamespaceValue::NotFound(matcher::namespace_not_found(name)),
            },
        }
    }
}

/// Why the request could not be had in the matched version.
enum Versioned {
    Undecided(String),
    Failed(String),
}

/// [`PolicyDecision::Undecided`] for `reason`.
fn undecided(reason: String) -> PolicyVerdict {
    PolicyVerdict::new(PolicyDecision::Undecided(reason))
}

/// `CollectParams`: `[None]` without paramKind or paramRef.
///
/// # Errors
/// [`ParamError`]: the binding's configuration error.
fn params<'p>(
    policy: &'p Policy,
    binding: &Binding,
    namespace: &str,
) -> Result<Vec<Option<&'p Param>>, ParamError> {
    match (&policy.params, &binding.param_ref) {
        (Some(store), Some(param_ref)) => Ok(store
            .collect(param_ref, namespace)?
            .into_iter()
            .map(Some)
            .collect()),
        _ => Ok(vec![None]),
    }
}

impl<'p> Run<'p> {
    fn new(policy: &'p Policy) -> Self {
        Run {
            policy,
            denied: Vec::new(),
            verdict: PolicyVerdict::new(PolicyDecision::NotApplicable),
            collected: BTreeMap::new(),
            applied: false,
        }
    }

    /// Every binding in order (`Dispatch`'s binding loop); `review` is the request as
    /// received, `seen` as the policy sees it (converted). The request's values are converted
    /// to CEL once, and everything built from them lives inside `deep_json::read_deep`, on a
    /// stack deep enough for them.
    fn bindings(
        self,
        review: &ParsedReview<'_>,
        seen: &ParsedReview<'_>,
        namespaces: Option<&Namespaces>,
    ) -> PolicyVerdict {
        let request = &seen.request;
        let raw = [request.object, request.old_object, request.options]
            .map(|v| v.map(serde_json::value::RawValue::get));
        let policy = self.policy;
        let verdict = deep_json::read_deep(&raw, |unbounded| {
            let inputs = Inputs::new(seen, unbounded, &policy.reads)?;
            Ok(Run::new(policy).each_binding(review, &request.namespace, namespaces, &inputs))
        });
        verdict.unwrap_or_else(|e| {
            let mut run = self;
            run.config_error(
                None,
                format!("failed to prepare object variable for evaluation: {e}"),
            );
            run.finish(review)
        })
    }

    /// The binding loop proper.
    fn each_binding(
        mut self,
        review: &ParsedReview<'_>,
        request_namespace: &str,
        namespaces: Option<&Namespaces>,
        inputs: &Inputs<'_>,
    ) -> PolicyVerdict {
        let policy = self.policy;
        let mut namespace = None;
        for binding in &policy.bindings {
            if let Some(c) = &binding.constraints {
                match c.matches(review, namespaces, &policy.custom_resources) {
                    Match::No => {
                        self.outcome(binding, BindingResult::NotMatched);
                        continue;
                    }
                    Match::Error(message) => {
                        self.binding_error(binding, message);
                        continue;
                    }
                    Match::Unavailable(reason) => return undecided(reason),
                    Match::Yes(_) => {}
                }
            }
            let params = match params(policy, binding, request_namespace) {
                Ok(params) => params,
                Err(e) => {
                    self.binding_error(binding, e.to_string());
                    continue;
                }
            };
            let namespace =
                match namespace.get_or_insert_with(|| policy.namespace_value(review, namespaces)) {
                    NamespaceValue::Value(v) => &**v,
                    NamespaceValue::NotFound(message) => return not_found(message),
                    NamespaceValue::Undecided(reason) => return undecided(reason.clone()),
                };
            let outcomes = params
                .into_iter()
                .map(|param| self.validate(binding, param, inputs, namespace))
                .collect();
            self.outcome(binding, BindingResult::Evaluated(outcomes));
        }
        self.finish(review)
    }

    /// One validate call and what its decisions and audit annotations do.
    fn validate(
        &mut self,
        binding: &Binding,
        param: Option<&Param>,
        inputs: &Inputs<'_>,
        namespace: &dyn Val,
    ) -> ParamOutcome {
        let policy = self.policy;
        let activation = Activation {
            inputs,
            params: param.map_or_else(cel_json::null, |p| p.value.clone_as_boxed()),
            namespace: namespace.clone_as_boxed(),
            variables: &policy.variables,
        };
        let result = policy.validator.validate(&activation);
        self.apply(binding, &result);
        ParamOutcome {
            param: param.map(|p| {
                if p.namespace.is_empty() {
                    p.name.clone()
                } else {
                    format!("{}/{}", p.namespace, p.name)
                }
            }),
            excluded: result.excluded,
            decisions: result.decisions,
        }
    }

    /// A validate call's decisions through the binding's validationActions, and its audit
    /// annotations into the collector.
    fn apply(&mut self, binding: &Binding, result: &ValidateResult) {
        if !result.excluded {
            self.applied = true;
        }
        for (i, decision) in result.decisions.iter().enumerate() {
            if decision.evaluation == Evaluation::Error {
                self.verdict.errors.push(PolicyError {
                    binding: Some(binding.name.clone()),
                    message: decision.message.clone(),
                    ignored: decision.action == Action::Admit,
                });
            }
            if decision.action == Action::Deny {
                self.deny_actions(binding, i, decision);
            }
        }
        for audit in &result.audit {
            match audit {
                AuditOutcome::Publish(key, value) => {
                    let values = self.collected.entry(key.clone()).or_default();
                    let value = truncate(value);
                    if !values.contains(&value) {
                        values.push(value);
                    }
                }
                AuditOutcome::Error(message) => {
                    self.verdict.errors.push(PolicyError {
                        binding: Some(binding.name.clone()),
                        message: message.clone(),
                        ignored: false,
                    });
                    self.denied.push(Denied {
                        binding: Some(binding.name.clone()),
                        message: message.clone(),
                        reason: None,
                        validation: None,
                    });
                }
                AuditOutcome::Exclude => {}
            }
        }
    }

    /// A denying decision under each of the binding's validationActions: Deny denies, Warn
    /// warns, Audit publishes the validation-failure annotation.
    fn deny_actions(&mut self, binding: &Binding, index: usize, decision: &ValidationDecision) {
        let policy = &self.policy.name;
        for action in &binding.actions {
            match action.as_str() {
                "Deny" => self.denied.push(Denied {
                    binding: Some(binding.name.clone()),
                    message: decision.message.clone(),
                    reason: decision.reason.clone(),
                    validation: decision.validation,
                }),
                "Warn" => self.verdict.warnings.push(format!(
                    "Validation failed for ValidatingAdmissionPolicy '{policy}' with binding '{}': {}",
                    binding.name, decision.message
                )),
                "Audit" => {
                    let value = ValidationFailure {
                        message: &decision.message,
                        policy,
                        binding: &binding.name,
                        expression_index: index,
                        validation_actions: &binding.actions,
                    };
                    if let Ok(json) = serde_json::to_string(&[value]) {
                        self.verdict
                            .audit_annotations
                            .entry(VALIDATION_FAILURE_ANNOTATION.to_string())
                            .or_insert(json);
                    }
                }
                _ => {}
            }
        }
    }

    /// A configuration error of the policy (`binding` `None`) or a binding, decided by
    /// failurePolicy (`addConfigError`).
    fn config_error(&mut self, binding: Option<&Binding>, message: String) {
        let message = match binding {
            None => format!("failed to configure policy: {message}"),
            Some(_) => format!("failed to configure binding: {message}"),
        };
        let binding = binding.map(|b| b.name.clone());
        self.verdict.errors.push(PolicyError {
            binding: binding.clone(),
            message: message.clone(),
            ignored: !self.policy.fail,
        });
        if self.policy.fail {
            self.denied.push(Denied {
                binding,
                message,
                reason: None,
                validation: None,
            });
        }
    }

    /// A binding's configuration error, and its outcome.
    fn binding_error(&mut self, binding: &Binding, message: String) {
        self.config_error(Some(binding), message.clone());
        self.outcome(binding, BindingResult::ConfigurationError(message));
    }

    fn outcome(&mut self, binding: &Binding, result: BindingResult) {
        self.verdict.bindings.push(BindingOutcome {
            binding: binding.name.clone(),
            result,
        });
    }

    /// The verdict: the collected audit annotations published, the first denial (`Dispatch`'s
    /// end).
    fn finish(mut self, review: &ParsedReview<'_>) -> PolicyVerdict {
        let policy = self.policy;
        for (key, values) in std::mem::take(&mut self.collected) {
            self.verdict
                .audit_annotations
                .insert(format!("{}/{key}", policy.name), values.join(", "));
        }
        self.verdict.decision = if !self.denied.is_empty() {
            PolicyDecision::Denied
        } else if self.applied || !self.verdict.errors.is_empty() {
            PolicyDecision::Allowed
        } else {
            PolicyDecision::NotApplicable
        };
        if let Some(first) = self.denied.first() {
            let cause = match &first.binding {
                Some(b) => format!(
                    "ValidatingAdmissionPolicy '{}' with binding '{b}' denied request: {}",
                    policy.name, first.message
                ),
                None => format!(
                    "ValidatingAdmissionPolicy '{}' denied request: {}",
                    policy.name, first.message
                ),
            };
            let reason = first.reason.clone().unwrap_or_else(|| "Invalid".into());
            self.verdict.denial = Some(Denial {
                code: reason_to_code(&reason),
                message: forbidden_message(review, &cause),
                reason,
                cause,
                binding: first.binding.clone(),
                validation: first.validation.and_then(|i| {
                    let v = policy.validator.validations.get(i)?;
                    Some((i, v.expression.text.clone()))
                }),
            });
        }
        self.verdict
    }
}

/// The value of [`VALIDATION_FAILURE_ANNOTATION`]'s one element (`ValidationFailureValue`), in
/// upstream's field order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ValidationFailure<'a> {
    message: &'a str,
    policy: &'a str,
    binding: &'a str,
    expression_index: usize,
    validation_actions: &'a [String],
}

/// `value` cut to [`MAX_AUDIT_ANNOTATION_VALUE_BYTES`] at a character boundary.
fn truncate(value: &str) -> String {
    let mut end = value.len().min(MAX_AUDIT_ANNOTATION_VALUE_BYTES);
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    value[..end].to_string()
}

/// `admission.NewForbidden`'s message: `<resource>[/<subresource>][.<group>] "<name>" is
/// forbidden: <cause>`, the name from the request or else the object's `metadata.name`.
fn forbidden_message(review: &ParsedReview<'_>, cause: &str) -> String {
    let request = &review.request;
    let resource = request.effective_resource();
    let sub = request.effective_sub_resource();
    let mut group_resource = resource.resource.to_string();
    if !sub.is_empty() {
        group_resource = format!("{group_resource}/{sub}");
    }
    if !resource.group.is_empty() {
        group_resource = format!("{group_resource}.{}", resource.group);
    }
    let name = if request.name.is_empty() {
        object_name(request.object).unwrap_or_default()
    } else {
        request.name.to_string()
    };
    format!(
        "{group_resource} {} is forbidden: {cause}",
        crate::field_error::quote(&name)
    )
}

/// `metadata.name` of a raw object.
fn object_name(raw: Option<&serde_json::value::RawValue>) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Object {
        metadata: Option<spec::ObjectMeta>,
    }
    let object: Object = serde_json::from_str(raw?.get()).ok()?;
    Some(object.metadata?.name)
}

/// The 404 kube-apiserver answers when the request's namespace does not exist (`Dispatch`
/// returns `GetNamespace`'s error as it is).
fn not_found(message: &str) -> PolicyVerdict {
    let mut verdict = PolicyVerdict::new(PolicyDecision::Denied);
    verdict.denial = Some(Denial {
        code: 404,
        reason: "NotFound".into(),
        message: message.to_string(),
        cause: message.to_string(),
        binding: None,
        validation: None,
    });
    verdict
}
