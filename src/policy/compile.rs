//! A policy's expressions compiled with their declarations as
//! `validateValidatingAdmissionPolicySpec` (`pkg/apis/admissionregistration/validation/validation.go`)
//! declares them: variables (each seeing those before it, `CompileAndStoreVariable`),
//! matchConditions (no `variables`: upstream validates them with a stateless compiler),
//! validations, their messageExpressions (no `authorizer`) and auditAnnotations.

use std::collections::HashSet;

use super::cel::{self, Declarations, Expression, Reads, Returns};
use super::spec::{PolicySpec, Validation};
use super::validator::{CompiledValidation, Validator};
use crate::field_error::Error as FieldError;

/// The compiled expressions of a policy: the validator, its variables, what they read of the
/// request.
pub(super) type Compiled = (Validator, Vec<(String, Expression)>, Reads);

/// `maxAuditAnnotationValueExpressionLength`: bytes.
const MAX_VALUE_EXPRESSION_BYTES: usize = 5 * 1024;

/// Compiles every expression of `spec`; `None` when one did not (its error went to `bad`).
pub(super) fn expressions(spec: &PolicySpec, bad: &mut impl FnMut(FieldError)) -> Option<Compiled> {
    let mut c = Compiler {
        bad,
        failed: false,
        reads: Reads::default(),
        variables: Vec::new(),
        failed_variables: Vec::new(),
        full: Declarations {
            params: spec.param_kind.is_some(),
            authorizer: true,
            variables: true,
        },
    };
    c.variables(spec);
    let match_conditions = c.match_conditions(spec);
    let validations = c.validations(spec);
    let audit_annotations = c.audit_annotations(spec);
    if c.failed {
        return None;
    }
    let validator = Validator {
        match_conditions,
        validations,
        audit_annotations,
        fail: spec.failure_policy.as_deref() != Some("Ignore"),
    };
    Some((validator, c.variables, c.reads))
}

/// The compilation of one policy's expressions in progress.
struct Compiler<'b, B> {
    bad: &'b mut B,
    /// An expression did not compile.
    failed: bool,
    /// What the expressions read of the request.
    reads: Reads,
    /// The variables compiled so far.
    variables: Vec<(String, Expression)>,
    /// The variables that did not compile, by name.
    failed_variables: Vec<String>,
    /// Every optional variable but what the kind of expression lacks.
    full: Declarations,
}

impl<B: FnMut(FieldError)> Compiler<'_, B> {
    /// Compiles `text` at `at`; its error, as a field error, is reported.
    fn compile(
        &mut self,
        at: String,
        text: &str,
        declarations: Declarations,
        returns: Returns,
    ) -> Option<Expression> {
        match cel::compile(
            text,
            declarations,
            returns,
            &self.variables,
            &self.failed_variables,
        ) {
            Ok(e) => {
                self.reads.add(&e.reads);
                Some(e)
            }
            Err(super::cel::ExpressionError::Cel(e)) => {
                self.fail(e.field_error(at, text));
                None
            }
            Err(e) => {
                self.fail(FieldError::invalid(at, text, e.to_string()));
                None
            }
        }
    }

    /// Reports an error that leaves an expression out.
    fn fail(&mut self, error: FieldError) {
        self.failed = true;
        (self.bad)(error);
    }

    /// `validateVariable`, in order.
    fn variables(&mut self, spec: &PolicySpec) {
        for (i, v) in spec.variables.iter().enumerate() {
            let at = format!("spec.variables[{i}]");
            if v.name.trim().is_empty() {
                (self.bad)(FieldError::required(
                    format!("{at}.name"),
                    "name is not specified",
                ));
            } else if !is_cel_identifier(&v.name) {
                (self.bad)(FieldError::invalid(
                    format!("{at}.name"),
                    &v.name,
                    "name is not a valid CEL identifier",
                ));
            }
            if v.expression.trim().is_empty() {
                self.fail(FieldError::required(
                    format!("{at}.expression"),
                    "expression is not specified",
                ));
            } else if let Some(e) = self.compile(
                format!("{at}.expression"),
                &v.expression,
                self.full,
                Returns::Any,
            ) {
                self.variables.push((v.name.clone(), e));
            } else {
                self.failed_variables.push(v.name.clone());
            }
        }
    }

    /// `validateMatchConditions`: names qualified and unique, expressions bool.
    fn match_conditions(&mut self, spec: &PolicySpec) -> Vec<Expression> {
        let declarations = Declarations {
            variables: false,
            ..self.full
        };
        let mut compiled = Vec::new();
        let mut names = HashSet::new();
        for (i, c) in spec.match_conditions.iter().enumerate() {
            let at = format!("spec.matchConditions[{i}]");
            let text = c.expression.trim();
            if text.is_empty() {
                self.fail(FieldError::required(format!("{at}.expression"), ""));
            } else if let Some(e) = self.compile(
                format!("{at}.expression"),
                text,
                declarations,
                Returns::Bool,
            ) {
                compiled.push(e);
            }
            if c.name.is_empty() {
                (self.bad)(FieldError::required(format!("{at}.name"), ""));
            } else {
                for msg in crate::names::qualified_name_errors(&c.name) {
                    (self.bad)(FieldError::invalid(format!("{at}.name"), &c.name, msg));
                }
                if !names.insert(c.name.as_str()) {
                    (self.bad)(FieldError::duplicate(format!("{at}.name"), &c.name));
                }
            }
        }
        compiled
    }

    /// `validateValidation`, each.
    fn validations(&mut self, spec: &PolicySpec) -> Vec<CompiledValidation> {
        let message_declarations = Declarations {
            authorizer: false,
            ..self.full
        };
        let mut compiled = Vec::new();
        for (i, v) in spec.validations.iter().enumerate() {
            let at = format!("spec.validations[{i}]");
            let expression = if v.expression.trim().is_empty() {
                self.fail(FieldError::required(
                    format!("{at}.expression"),
                    "expression is not specified",
                ));
                None
            } else {
                self.compile(
                    format!("{at}.expression"),
                    &v.expression,
                    self.full,
                    Returns::Bool,
                )
            };
            let message_expression = if v.message_expression.trim().is_empty() {
                if !v.message_expression.is_empty() {
                    self.fail(FieldError::invalid(
                        format!("{at}.messageExpression"),
                        &v.message_expression,
                        "must be non-empty if specified",
                    ));
                }
                None
            } else {
                // As written, so that compile errors point at the right column.
                self.compile(
                    format!("{at}.messageExpression"),
                    &v.message_expression,
                    message_declarations,
                    Returns::String,
                )
            };
            validate_message(&at, v, self.bad);
            if let Some(expression) = expression {
                compiled.push(CompiledValidation {
                    expression,
                    message: v.message.clone(),
                    message_expression,
                    reason: v.reason.clone(),
                });
            }
        }
        compiled
    }

    /// `validateAuditAnnotation`'s valueExpression, each (the keys are `spec`'s).
    fn audit_annotations(&mut self, spec: &PolicySpec) -> Vec<(String, Expression)> {
        let mut compiled = Vec::new();
        for (i, a) in spec.audit_annotations.iter().enumerate() {
            let at = format!("spec.auditAnnotations[{i}].valueExpression");
            let text = a.value_expression.trim();
            if text.is_empty() {
                self.fail(FieldError::required(at, "valueExpression is not specified"));
            } else if text.len() > MAX_VALUE_EXPRESSION_BYTES {
                self.fail(FieldError::required(
                    at,
                    format!("must not exceed {MAX_VALUE_EXPRESSION_BYTES} bytes in length"),
                ));
            } else if let Some(e) = self.compile(at, text, self.full, Returns::StringOrNull) {
                compiled.push((a.key.clone(), e));
            }
        }
        compiled
    }
}

/// A validation's `message` and `reason` (`validateValidation`).
fn validate_message(at: &str, v: &Validation, bad: &mut impl FnMut(FieldError)) {
    let trimmed = v.message.trim();
    if !v.message.is_empty() && trimmed.is_empty() {
        bad(FieldError::invalid(
            format!("{at}.message"),
            &v.message,
            "message must be non-empty if specified",
        ));
    } else if trimmed.contains(['\n', '\r']) {
        bad(FieldError::invalid(
            format!("{at}.message"),
            &v.message,
            "message must not contain line breaks",
        ));
    }
    if let Some(reason) = &v.reason {
        // `supportedValidationPolicyReason` (`pkg/apis/admissionregistration/validation/
        // validation.go`): kube-apiserver refuses `Unauthorized` at create.
        const SUPPORTED: [&str; 3] = ["Forbidden", "Invalid", "RequestEntityTooLarge"];
        if !SUPPORTED.contains(&reason.as_str()) {
            bad(FieldError::not_supported(
                format!("{at}.reason"),
                reason,
                &SUPPORTED,
            ));
        }
    }
}

/// `isCELIdentifier`: `[_a-zA-Z][_a-zA-Z0-9]*`, not a CEL reserved word.
fn is_cel_identifier(name: &str) -> bool {
    const RESERVED: [&str; 24] = [
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
        "int",
        "uint",
        "double",
    ];
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
        && !RESERVED.contains(&name)
}
