//! A ValidatingAdmissionPolicy evaluator: a policy with its bindings and parameter objects,
//! compiled from `admissionregistration.k8s.io/v1` JSON, evaluated on one AdmissionReview
//! request as kube-apiserver's `ValidatingAdmissionPolicy` admission plugin evaluates it
//! (`staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/validating/`: `dispatcher.go`
//! `Dispatch`, `validator.go` `Validate`; matching in `policy/generic/policy_matcher.go` and
//! `policy/matching/matching.go`; parameters in `policy/generic/policy_dispatcher.go`
//! `CollectParams`). Depends on `matching` (rules, selectors, namespaces, the CEL environment,
//! cost and `authorizer`), `conversion` and `resources` (matchPolicy Equivalent), `review`
//! and `field_error`.
//!
//! Everything is compiled in [`Policy::compile`]: selectors, rules and every CEL expression.
//! [`Policy::evaluate`] reads no files and logs nothing.

mod cel;
mod compile;
mod matcher;
mod params;
mod spec;
#[cfg(test)]
mod tests;
mod validator;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use self::cel::{Activation, Expression, Inputs, Reads};
use self::matcher::{Constraints, Match};
use self::params::{CompiledRef, Param, ParamError, ParamStore};
pub use self::validator::{Action, Evaluation, ValidationDecision};
use self::validator::{AuditOutcome, ValidateResult, Validator};
use crate::field_error::Error as FieldError;
use crate::matching::authz::{self, Decisions};
use crate::matching::{Authorized, Namespaces};
use crate::resources::custom::CustomResources;
use crate::resources::Equivalent;
use crate::review::ParsedReview;

/// `maxAuditAnnotationValueLength` (`dispatcher.go`): longer audit annotation values are cut to
/// this many bytes (at a character boundary here; Go cuts bytes).
const MAX_AUDIT_ANNOTATION_VALUE_BYTES: usize = 10 * 1024;

/// The audit annotation an Audit validation action publishes (`publishValidationFailureAnnotation`).
pub const VALIDATION_FAILURE_ANNOTATION: &str =
    "validation.policy.admission.k8s.io/validation_failure";

/// A ValidatingAdmissionPolicy with its bindings and parameter objects, compiled at load.
#[derive(Debug)]
pub struct Policy {
    name: String,
    fail: bool,
    constraints: Constraints,
    validator: Validator,
    variables: Vec<(String, Expression)>,
    /// What the expressions read of the request (only that is converted for an evaluation).
    reads: Reads,
    /// The paramKind's objects; `None` without paramKind.
    params: Option<ParamStore>,
    bindings: Vec<Binding>,
    custom_resources: Arc<CustomResources>,
}

/// A compiled ValidatingAdmissionPolicyBinding.
#[derive(Debug)]
struct Binding {
    name: String,
    /// `None`: every request the policy matches.
    constraints: Option<Constraints>,
    param_ref: Option<CompiledRef>,
    /// validationActions, as written (for the validation-failure annotation).
    actions: Vec<String>,
}

/// What the policy decided on one request, all bindings together.
#[derive(Clone, Debug, PartialEq)]
pub enum PolicyDecision {
    /// The policy does not apply: it or every binding does not match, matchConditions
    /// excluded the request, or no parameter was found under parameterNotFoundAction Allow.
    NotApplicable,
    /// Evaluated and not denied (failed validations may still have warned or been audited).
    Allowed,
    /// Denied: [`PolicyVerdict::denial`] says how.
    Denied,
    /// The proxy lacks what kube-apiserver would know (a namespace's labels, a conversion that
    /// takes a conversion webhook): why. Not comparable with the webhook's answer.
    Undecided(String),
}

/// A denial as kube-apiserver returns it (`Dispatch`: `admission.NewForbidden`, reason and
/// code replaced by the first denied decision's).
#[derive(Clone, Debug, PartialEq)]
pub struct Denial {
    /// HTTP status code (`reasonToCode`): Forbidden 403, RequestEntityTooLarge 413, Invalid
    /// (the default) 422 (`Unauthorized` is refused at load, as at create); 404 when the
    /// namespace does not exist.
    pub code: u16,
    /// Status reason: `Invalid` unless the validation gives one.
    pub reason: String,
    /// Status message: `<resource>[.<group>] "<name>" is forbidden: <cause>`.
    pub message: String,
    /// The cause (the status's `details.causes[0].message`): `ValidatingAdmissionPolicy 'p'
    /// with binding 'b' denied request: <message>` (`... 'p' denied request: ...` for an error of
    /// the policy itself).
    pub cause: String,
    /// The binding of the first denied decision; `None` for an error of the policy itself.
    pub binding: Option<String>,
    /// The failed validation of the first denied decision, if it is one: its index in
    /// `spec.validations` and its expression.
    pub validation: Option<(usize, String)>,
}

/// A configuration or evaluation error met on the way, and whether failurePolicy Ignore
/// dropped it.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyError {
    /// The binding, `None` for the policy itself.
    pub binding: Option<String>,
    /// The error as upstream words it (`failed to configure binding: ...`, `expression '...'
    /// resulted in error: ...`).
    pub message: String,
    /// failurePolicy Ignore: the error did not deny.
    pub ignored: bool,
}

/// One binding's outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct BindingOutcome {
    /// `metadata.name` of the binding.
    pub binding: String,
    /// What happened.
    pub result: BindingResult,
}

/// What one binding did.
#[derive(Clone, Debug, PartialEq)]
pub enum BindingResult {
    /// Not evaluated: the policy or the binding's matchResources do not match.
    NotMatched,
    /// A configuration error (parameters, selectors): the message.
    ConfigurationError(String),
    /// Evaluated once per parameter object (once with `params` null without paramKind or
    /// paramRef; never when no parameter was found under Allow).
    Evaluated(Vec<ParamOutcome>),
}

/// The evaluation with one parameter object.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamOutcome {
    /// The parameter object, `namespace/name` or `name`; `None` when `params` is null.
    pub param: Option<String>,
    /// A matchCondition excluded the request (nothing else was evaluated).
    pub excluded: bool,
    /// The validate call's decisions, in validation order.
    pub decisions: Vec<ValidationDecision>,
}

/// What the policy decided on one request (all bindings together, as the plugin answers).
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyVerdict {
    /// NotApplicable, Allowed, Denied or Undecided.
    pub decision: PolicyDecision,
    /// The denial, when [`PolicyDecision::Denied`].
    pub denial: Option<Denial>,
    /// Warnings, in order: `Validation failed for ValidatingAdmissionPolicy 'p' with binding
    /// 'b': <message>` (validationActions Warn).
    pub warnings: Vec<String>,
    /// Audit annotations: `<policy>/<key>` from auditAnnotations (distinct values of several
    /// bindings or parameters joined by `, `, cut to 10 KiB) and
    /// [`VALIDATION_FAILURE_ANNOTATION`] from validationActions Audit (the first one; upstream
    /// refuses to overwrite an annotation).
    pub audit_annotations: BTreeMap<String, String>,
    /// Errors met, denying (failurePolicy Fail) or ignored.
    pub errors: Vec<PolicyError>,
    /// Every binding's outcome, in the order given to [`Policy::compile`]; empty when the
    /// policy itself did not match, or failed before its bindings were looked at.
    pub bindings: Vec<BindingOutcome>,
}

impl PolicyVerdict {
    fn new(decision: PolicyDecision) -> Self {
        PolicyVerdict {
            decision,
            denial: None,
            warnings: Vec::new(),
            audit_annotations: BTreeMap::new(),
            errors: Vec::new(),
            bindings: Vec::new(),
        }
    }
}

impl Policy {
    /// Compiles `policy` (a ValidatingAdmissionPolicy), `bindings` (every
    /// ValidatingAdmissionPolicyBinding whose `spec.policyName` is this policy's name) and
    /// `params` (every parameter object of the configuration, any apiVersion/kind: the
    /// policy's paramKind picks its own). API defaults are applied first (failurePolicy Fail,
    /// matchPolicy Equivalent, empty selectors, scope `*`), then the objects are validated as
    /// `ValidateValidatingAdmissionPolicy` / `ValidateValidatingAdmissionPolicyBinding` do and
    /// every expression is compiled.
    ///
    /// # Errors
    /// Every field error, with upstream's paths and messages (a binding's prefixed with
    /// `bindings[<i>].`), e.g. `spec.validations[0].expression: Invalid value: "...":
    /// compilation failed: ...`.
    ///
    /// ```
    /// use admission_proxy::matching::{authz::Decisions, Authorized};
    /// use admission_proxy::policy::{Policy, PolicyDecision};
    /// use admission_proxy::review::ParsedReview;
    /// use serde_json::json;
    ///
    /// let policy = json!({
    ///     "apiVersion": "admissionregistration.k8s.io/v1",
    ///     "kind": "ValidatingAdmissionPolicy",
    ///     "metadata": {"name": "replicas"},
    ///     "spec": {
    ///         "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
    ///         "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
    ///             "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
    ///         "validations": [{"expression": "object.spec.replicas <= int(params.data.max)",
    ///             "messageExpression": "'replicas must be at most ' + params.data.max"}]
    ///     }
    /// });
    /// let binding = json!({
    ///     "apiVersion": "admissionregistration.k8s.io/v1",
    ///     "kind": "ValidatingAdmissionPolicyBinding",
    ///     "metadata": {"name": "replicas-binding"},
    ///     "spec": {"policyName": "replicas", "validationActions": ["Deny"],
    ///         "paramRef": {"name": "limits", "namespace": "default", "parameterNotFoundAction": "Deny"}}
    /// });
    /// let limits = json!({"apiVersion": "v1", "kind": "ConfigMap",
    ///     "metadata": {"name": "limits", "namespace": "default"}, "data": {"max": "3"}});
    /// let policy = Policy::compile(&policy, &[binding], &[limits]).map_err(|e| format!("{e:?}"))?;
    ///
    /// let body = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
    ///     "uid":"u","kind":{"group":"apps","version":"v1","kind":"Deployment"},
    ///     "resource":{"group":"apps","version":"v1","resource":"deployments"},
    ///     "name":"web","namespace":"default","operation":"CREATE",
    ///     "object":{"metadata":{"name":"web"},"spec":{"replicas":5}}}}"#;
    /// let review = ParsedReview::parse(body.as_bytes())?;
    /// let Authorized::Done(verdict) = policy.evaluate(&review, None, &mut Decisions::default()) else {
    ///     unreachable!("the policy makes no authorization checks")
    /// };
    /// assert_eq!(verdict.decision, PolicyDecision::Denied);
    /// let denial = verdict.denial.unwrap();
    /// assert_eq!(denial.code, 422);
    /// assert_eq!(
    ///     denial.message,
    ///     "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'replicas' with \
    ///      binding 'replicas-binding' denied request: replicas must be at most 3"
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn compile(
        policy: &serde_json::Value,
        bindings: &[serde_json::Value],
        params: &[serde_json::Value],
    ) -> Result<Policy, Vec<FieldError>> {
        let mut errors = Vec::new();
        let object = spec::decode::<spec::PolicyObject>(policy);
        let mut object = object.map_err(|e| vec![e])?;
        spec::default_policy(&mut object.spec);
        let name = object.metadata.name.clone();
        let mut bad = |e: FieldError| errors.push(e);
        spec::validate_name(&name, &mut bad);
        spec::validate_policy_spec(&name, &object.spec, &mut bad);
        let compiled = compile::expressions(&object.spec, &mut bad);
        let constraints = object
            .spec
            .match_constraints
            .as_ref()
            .map(Constraints::compile);
        let mut compiled_bindings = Vec::new();
        for (i, binding) in bindings.iter().enumerate() {
            match compile_binding(binding, &name) {
                Ok(b) => compiled_bindings.push(b),
                Err(e) => errors.extend(
                    e.into_iter()
                        .map(|e| e.prefixed(&format!("bindings[{i}]."))),
                ),
            }
        }
        let (Some(constraints), Some((validator, variables, reads)), true) =
            (constraints, compiled, errors.is_empty())
        else {
            return Err(errors);
        };
        Ok(Policy {
            fail: validator.fail,
            name,
            constraints,
            validator,
            variables,
            reads,
            params: object
                .spec
                .param_kind
                .as_ref()
                .map(|kind| ParamStore::new(kind, params)),
            bindings: compiled_bindings,
            custom_resources: matcher::no_custom_resources(),
        })
    }

    /// Whether the policy's matchConstraints and one of its bindings select `input` by their
    /// rules alone (selectors, resourceNames and equivalents aside): `check`'s scope
    /// comparison with the legacy webhook it would replace.
    pub(crate) fn rules_select(&self, input: &crate::matching::RuleInput<'_>) -> bool {
        self.constraints.rules_select(input)
            && self
                .bindings
                .iter()
                .any(|b| b.constraints.as_ref().is_none_or(|c| c.rules_select(input)))
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Matches resources through these custom resources' versions too (matchPolicy
    /// Equivalent), as the webhooks' matching does with the configuration's declared custom
    /// resources.
    #[allow(
        dead_code,
        reason = "for the configuration loader, which knows the declared custom resources"
    )]
    pub(crate) fn set_custom_resources(&mut self, custom_resources: Arc<CustomResources>) {
        self.custom_resources = custom_resources;
    }

    /// `(apiVersion, kind)` of `spec.paramKind` of a ValidatingAdmissionPolicy object, so the
    /// loader knows which other objects are parameters; `None` without one.
    pub fn param_kind_of(policy: &serde_json::Value) -> Option<(String, String)> {
        let kind = policy.get("spec")?.get("paramKind")?;
        let field = |name| kind.get(name)?.as_str().map(str::to_string);
        Some((field("apiVersion")?, field("kind")?))
    }

    /// Evaluates the policy on `review` (the request as kube-apiserver received it) with the
    /// namespace labels of `namespaces` (`None`: not known; then only a policy whose expressions
    /// read `namespaceObject` is [`PolicyDecision::Undecided`] on a namespaced request).
    ///
    /// `authorizer` checks are answered from `decisions` (and its cache); a check without a
    /// decision makes the answer [`Authorized::Pending`] with the checks to resolve: add their
    /// decisions and evaluate again (at most `MAX_AUTHORIZATION_ROUNDS` rounds), as for
    /// webhooks' matchConditions. See [`Policy::compile`] for an example.
    pub fn evaluate(
        &self,
        review: &ParsedReview<'_>,
        namespaces: Option<&Namespaces>,
        decisions: &mut Decisions,
    ) -> Authorized<PolicyVerdict> {
        let (verdict, pending) =
            authz::with_decisions(decisions, || self.dispatch(review, namespaces));
        if pending.is_empty() {
            Authorized::Done(verdict)
        } else {
            Authorized::Pending(pending)
        }
    }
}

/// Compiles one binding of `policy_name`.
///
/// # Errors
/// The field errors kube-apiserver gives `binding` at create
/// (`ValidateValidatingAdmissionPolicyBinding` in
/// `pkg/apis/admissionregistration/validation/validation.go`), whatever policy it names: for a
/// binding whose policy is not in the directory, which no policy compiles.
pub fn binding_errors(binding: &serde_json::Value) -> Vec<FieldError> {
    match validated_binding(binding) {
        Ok((_, errors)) | Err(errors) => errors,
    }
}

/// `binding` decoded and defaulted, with its own field errors (name and spec).
fn validated_binding(
    binding: &serde_json::Value,
) -> Result<(spec::BindingObject, Vec<FieldError>), Vec<FieldError>> {
    let mut object = spec::decode::<spec::BindingObject>(binding).map_err(|e| vec![e])?;
    spec::default_binding(&mut object.spec);
    let mut errors = Vec::new();
    let mut bad = |e: FieldError| errors.push(e);
    spec::validate_name(&object.metadata.name, &mut bad);
    spec::validate_binding_spec(&object.spec, &mut bad);
    Ok((object, errors))
}

/// Its field errors (`ValidateValidatingAdmissionPolicyBinding`; a binding of another policy).
fn compile_binding(
    binding: &serde_json::Value,
    policy_name: &str,
) -> Result<Binding, Vec<FieldError>> {
    let (object, mut errors) = validated_binding(binding)?;
    let mut bad = |e: FieldError| errors.push(e);
    if !object.spec.policy_name.is_empty() && object.spec.policy_name != policy_name {
        bad(FieldError::invalid(
            "spec.policyName",
            &object.spec.policy_name,
            format!("does not name policy {policy_name:?}"),
        ));
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(Binding {
        name: object.metadata.name,
        constraints: object
            .spec
            .match_resources
            .as_ref()
            .map(Constraints::compile),
        param_ref: object.spec.param_ref.as_ref().map(CompiledRef::compile),
        actions: object.spec.validation_actions,
    })
}

/// Whether no policy applies to `review`, whatever its rules say (`shouldIgnoreResource`,
/// `staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/generic/plugin.go`, by group and
/// resource, any version): the policies' own resources (`admissionResources` there), and the
/// authentication and authorization reviews ([`crate::resources::VIRTUAL_RESOURCES`], given
/// to the policy plugins by `pkg/controlplane/apiserver/admission/config.go`).
fn is_excluded_resource(review: &ParsedReview<'_>) -> bool {
    let r = review.request.effective_resource();
    let policy_resource = r.group == "admissionregistration.k8s.io"
        && matches!(
            &*r.resource,
            "validatingadmissionpolicies"
                | "validatingadmissionpolicybindings"
                | "mutatingadmissionpolicies"
                | "mutatingadmissionpolicybindings"
        );
    policy_resource || crate::resources::VIRTUAL_RESOURCES.contains(&(&*r.group, &*r.resource))
}

mod dispatch;
