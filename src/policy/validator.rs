//! One policy evaluated with one binding's parameter object: `validator.Validate` of
//! `staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/validating/validator.go`, with
//! the matchConditions step of `webhook/matchconditions/matcher.go` `Match`.

use cel::Value;

use super::cel::{
    Activation, Expression, ExpressionFailed, OutOfBudget, Outcome, MATCH_CONDITIONS_BUDGET,
    RUNTIME_CEL_COST_BUDGET,
};

/// `MaxEvaluatedMessageExpressionSizeBytes` (`apis/cel/config.go`): a longer evaluated
/// message is dropped for the fallback.
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// What a validation's outcome asks for (`PolicyDecisionAction`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// `admit`.
    Admit,
    /// `deny`: handled by the binding's validationActions.
    Deny,
}

/// How the outcome came about (`PolicyDecisionEvaluation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Evaluation {
    /// The expression was true.
    Admit,
    /// The expression was not true.
    Deny,
    /// Evaluation failed; failurePolicy chose the action (Fail: deny, Ignore: admit).
    Error,
}

/// One decision of a validate call (`PolicyDecision`).
#[derive(Clone, Debug, PartialEq)]
pub struct ValidationDecision {
    /// What it asks for.
    pub action: Action,
    /// How it came about.
    pub evaluation: Evaluation,
    /// The message: for a failed validation as upstream chooses it (messageExpression,
    /// message, `failed expression: <expression>`), for an error the error.
    pub message: String,
    /// The status reason of a failed validation (`Invalid` unless the validation gives one);
    /// `None` for errors.
    pub reason: Option<String>,
    /// Index in `spec.validations` of the validation this decision is about; `None` for an
    /// error of the whole call (matchConditions, cost budget), which upstream reports as the
    /// call's only decision (index 0 in the validation-failure audit annotation).
    pub validation: Option<usize>,
}

/// What an audit annotation's valueExpression produced (`PolicyAuditAnnotationAction`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum AuditOutcome {
    /// Publish `key` = value (trimmed).
    Publish(String, String),
    /// Null, blank, or an error under failurePolicy Ignore.
    Exclude,
    /// An error: denies the request whatever failurePolicy says, as upstream does.
    Error(String),
}

/// A validation, compiled.
#[derive(Debug)]
pub(crate) struct CompiledValidation {
    pub(crate) expression: Expression,
    pub(crate) message: String,
    pub(crate) message_expression: Option<Expression>,
    pub(crate) reason: Option<String>,
}

/// A policy's expressions, compiled.
#[derive(Debug)]
pub(crate) struct Validator {
    pub(crate) match_conditions: Vec<Expression>,
    pub(crate) validations: Vec<CompiledValidation>,
    /// `(key, valueExpression)`.
    pub(crate) audit_annotations: Vec<(String, Expression)>,
    /// failurePolicy Fail.
    pub(crate) fail: bool,
}

/// What one validate call found (`ValidateResult`).
#[derive(Debug, Default)]
pub(crate) struct ValidateResult {
    /// A matchCondition was false (or errored under Ignore): nothing else was evaluated.
    pub(crate) excluded: bool,
    pub(crate) decisions: Vec<ValidationDecision>,
    pub(crate) audit: Vec<AuditOutcome>,
}

impl Validator {
    /// An evaluation error of validation `validation` (`None`: of the policy as a whole):
    /// failurePolicy Fail denies with it, Ignore admits.
    fn error_decision(&self, message: String, validation: Option<usize>) -> ValidationDecision {
        ValidationDecision {
            action: if self.fail {
                Action::Deny
            } else {
                Action::Admit
            },
            evaluation: Evaluation::Error,
            message,
            reason: None,
            validation,
        }
    }

    /// The decision for an error of the whole call (`policyDecisionActionForError`).
    fn error(&self, message: String) -> ValidateResult {
        ValidateResult {
            excluded: false,
            decisions: vec![self.error_decision(message, None)],
            audit: Vec::new(),
        }
    }

    /// `Validate`: matchConditions, validations, their messageExpressions (on the budget the
    /// validations left), audit annotations (on a budget of their own).
    pub(crate) fn validate(&self, activation: &Activation<'_, '_>) -> ValidateResult {
        match self.conditions(activation) {
            Err(failed) => return self.error(failed.to_string()),
            Ok(false) => {
                return ValidateResult {
                    excluded: true,
                    ..ValidateResult::default()
                }
            }
            Ok(true) => {}
        }
        let expressions: Vec<_> = self
            .validations
            .iter()
            .map(|v| Some(&v.expression))
            .collect();
        let (results, remaining) =
            match activation.for_input(&expressions, true, RUNTIME_CEL_COST_BUDGET) {
                Ok(found) => found,
                Err(e) => return self.error(e.to_string()),
            };
        let messages: Vec<_> = self
            .validations
            .iter()
            .map(|v| v.message_expression.as_ref())
            .collect();
        let (messages, message_error) = match activation.for_input(&messages, true, remaining) {
            Ok((messages, _)) => (messages, None),
            Err(e) => (Vec::new(), Some(e.to_string())),
        };
        let decisions = results
            .into_iter()
            .enumerate()
            .map(|(i, result)| {
                let message = messages.get(i).and_then(Option::as_ref);
                self.decide(i, result, message, message_error.as_deref())
            })
            .collect();
        let audit = match self.audit(activation) {
            Ok(audit) => audit,
            Err(e) => return self.error(e.to_string()),
        };
        ValidateResult {
            excluded: false,
            decisions,
            audit,
        }
    }

    /// `Match`: any false excludes; otherwise errors (and a run-out budget) are decided by
    /// failurePolicy: Fail → `Err`, Ignore → excluded.
    ///
    /// # Errors
    /// [`ConditionsFailed`] under Fail.
    fn conditions(&self, activation: &Activation<'_, '_>) -> Result<bool, ConditionsFailed> {
        if self.match_conditions.is_empty() {
            return Ok(true);
        }
        let expressions: Vec<_> = self.match_conditions.iter().map(Some).collect();
        let outcomes = match activation.for_input(&expressions, false, MATCH_CONDITIONS_BUDGET) {
            Ok((outcomes, _)) => outcomes,
            Err(e) if self.fail => return Err(ConditionsFailed::Budget(e)),
            Err(_) => return Ok(false),
        };
        let mut errors = Vec::new();
        for outcome in outcomes.into_iter().flatten() {
            match outcome {
                Ok(Value::Bool(false)) => return Ok(false),
                Ok(_) => {}
                Err(e) => errors.push(e),
            }
        }
        match errors.len() {
            0 => Ok(true),
            _ if !self.fail => Ok(false),
            _ => Err(ConditionsFailed::Errors(errors)),
        }
    }

    /// One validation's decision from its result and its message expression's.
    fn decide(
        &self,
        index: usize,
        result: Outcome,
        message: Option<&Result<Value, ExpressionFailed>>,
        message_error: Option<&str>,
    ) -> ValidationDecision {
        let error = |message: String| self.error_decision(message, Some(index));
        let validation = &self.validations[index];
        match result {
            None => error("no result".into()),
            Some(Err(e)) => error(e.to_string()),
            Some(Ok(_)) if message_error.is_some() => error(format!(
                "failed messageExpression: {}",
                message_error.unwrap_or_default()
            )),
            Some(Ok(Value::Bool(true))) => ValidationDecision {
                action: Action::Admit,
                evaluation: Evaluation::Admit,
                message: String::new(),
                reason: None,
                validation: Some(index),
            },
            // Anything but true denies, a non-bool `dyn` result included.
            Some(Ok(_)) => ValidationDecision {
                action: Action::Deny,
                evaluation: Evaluation::Deny,
                message: failure_message(validation, message),
                reason: Some(
                    validation
                        .reason
                        .clone()
                        .unwrap_or_else(|| "Invalid".into()),
                ),
                validation: Some(index),
            },
        }
    }

    /// The audit annotations' outcomes, in order.
    ///
    /// # Errors
    /// [`OutOfBudget`]: the call's error.
    fn audit(&self, activation: &Activation<'_, '_>) -> Result<Vec<AuditOutcome>, OutOfBudget> {
        if self.audit_annotations.is_empty() {
            return Ok(Vec::new());
        }
        let expressions: Vec<_> = self
            .audit_annotations
            .iter()
            .map(|(_, e)| Some(e))
            .collect();
        let (outcomes, _) = activation.for_input(&expressions, true, RUNTIME_CEL_COST_BUDGET)?;
        Ok(self
            .audit_annotations
            .iter()
            .zip(outcomes)
            .map(|((key, expression), outcome)| match outcome {
                Some(Ok(Value::String(s))) if s.trim().is_empty() => AuditOutcome::Exclude,
                Some(Ok(Value::String(s))) => AuditOutcome::Publish(key.clone(), s.trim().into()),
                Some(Ok(Value::Null)) => AuditOutcome::Exclude,
                Some(Ok(other)) => AuditOutcome::Error(format!(
                    "valueExpression '{}' resulted in unsupported return type: {}. Return type must be either string or null.",
                    expression.text,
                    other.type_of()
                )),
                Some(Err(e)) if self.fail => AuditOutcome::Error(e.to_string()),
                Some(Err(_)) | None => AuditOutcome::Exclude,
            })
            .collect())
    }
}

/// The message of a failed validation: messageExpression's string (trimmed; dropped when
/// longer than [`MAX_MESSAGE_BYTES`] or multi-line), else `message` (trimmed), else
/// `failed expression: <expression>`.
fn failure_message(
    validation: &CompiledValidation,
    evaluated: Option<&Result<Value, ExpressionFailed>>,
) -> String {
    let mut message = match evaluated {
        Some(Ok(Value::String(s))) => {
            let s = s.trim();
            if s.len() > MAX_MESSAGE_BYTES || s.contains('\n') {
                String::new()
            } else {
                s.to_string()
            }
        }
        _ => String::new(),
    };
    if message.is_empty() {
        message = validation.message.trim().to_string();
    }
    if message.is_empty() {
        message = format!("failed expression: {}", validation.expression.text.trim());
    }
    message
}

/// Why a policy's matchConditions decide the request under `failurePolicy: Fail`, in upstream's
/// words (`matching.go`: one error alone, several as `[a, b]`).
#[derive(Debug, thiserror::Error)]
enum ConditionsFailed {
    /// The runtime cost budget ran out.
    #[error(transparent)]
    Budget(OutOfBudget),
    /// The conditions' evaluation errors, in order.
    #[error("{}", joined(.0))]
    Errors(Vec<ExpressionFailed>),
}

/// One error alone, several as Go prints a slice of errors: `[a, b]`.
fn joined(errors: &[ExpressionFailed]) -> String {
    match errors {
        [one] => one.to_string(),
        all => {
            let texts: Vec<String> = all.iter().map(ToString::to_string).collect();
            format!("[{}]", texts.join(", "))
        }
    }
}
