//! CEL `matchConditions` (KEP-3716; upstream `Match` in
//! `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions/matcher.go`):
//! compiled once at config load, evaluated against `object`, `oldObject` and `request`,
//! converted to CEL values only when an expression references them. Depends on `review` and
//! the `cel` crate.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use cel::common::types::{CelBool, CelList, CelMap, CelMapKey, CelString};
use cel::objects::{Key, Map};
use cel::Value;

use super::cel_env::Program;

use super::authz::{self, CheckKey, Decisions};
use super::cel_env;
use super::cel_json::{self, JsonVal};
use super::cel_types::{self, Ty};
use super::cost::{self, Cancelled};

use crate::deep_json;
use crate::review::ParsedReview;

/// Variables of the webhook CEL environment (`apiserver/pkg/admission/plugin/cel/compile.go`;
/// `authorizer.requestResource` is reached through `authorizer`). `namespaceObject` is always
/// null for webhooks (`Match` binds no namespace).
const VARIABLES: [&str; 5] = [
    "object",
    "oldObject",
    "request",
    "namespaceObject",
    "authorizer",
];

/// What an expression reads and calls, collected once at compile time.
#[derive(Default)]
struct Names {
    /// Identifiers no comprehension binds.
    variables: Vec<String>,
    /// Every occurrence of those, with its node: where an undeclared one is reported.
    variable_uses: Vec<(String, u64)>,
    /// Called functions, namespaced ones qualified (`sets.contains`).
    functions: Vec<String>,
    /// Every call, with its node, and for a namespaced one (`sets.contains`) its
    /// namespace's.
    calls: Vec<(String, u64, Option<u64>)>,
    /// String-literal patterns of `matches`, `find` and `findAll`, compiled once at load.
    patterns: Vec<Pattern>,
}

/// A string literal of a regular-expression call, and whether an invalid one refuses the
/// expression at load.
struct Pattern {
    text: String,
    /// The literal's node, for where it is in the source.
    id: u64,
    /// `matches`' argument 0: what `cel.ValidateRegexLiterals` checks at create (`base.go`;
    /// `newFormatValidator(overloads.Matches, 0, …)` in cel-go's `cel/validator.go`). That is
    /// the pattern of `s.matches(p)`, but the string of `matches(s, p)`, whose pattern (like
    /// `find`'s and `findAll`'s) only fails when it is called.
    validated: bool,
}

/// Collects the free identifiers and the functions an expression calls (a two-variable
/// comprehension counted as [`cel_env::TWO_VARIABLE_COMPREHENSION`], for the version checks).
///
/// # Errors
/// None today; the walk's callers keep the `Result` for the checks it may grow.
///
/// Over 80 lines: one match over every kind of expression, the macros' bound variables handled
/// in their arms.
fn free_variables(
    node: &cel::common::ast::IdedExpr,
    bound: &mut Vec<String>,
    out: &mut Names,
) -> Result<(), CompileError> {
    use cel::common::ast::{EntryExpr, Expr};
    match &node.expr {
        Expr::Unspecified | Expr::Literal(_) => {}
        Expr::Ident(name) => {
            if !name.starts_with('@')
                && !bound.contains(name)
                && !super::cel_names::TYPE_NAMES.contains(&name.as_str())
            {
                out.variable_uses.push((name.clone(), node.id));
                if !out.variables.contains(name) {
                    out.variables.push(name.clone());
                }
            }
        }
        Expr::Call(call) => {
            let namespace = match call.target.as_ref().map(|t| &t.expr) {
                Some(Expr::Ident(ns))
                    if super::cel_names::is_namespace(ns) && !bound.contains(ns) =>
                {
                    Some(ns)
                }
                _ => None,
            };
            let function = match namespace {
                Some(ns) => format!("{ns}.{}", call.func_name),
                None => call.func_name.clone(),
            };
            if matches!(function.as_str(), "matches" | "find" | "findAll") {
                use cel::common::ast::LiteralValue;
                let literal = |i: usize| match call.args.get(i) {
                    Some(a) => match &a.expr {
                        Expr::Literal(LiteralValue::String(p)) => Some((p.to_string(), a.id)),
                        _ => None,
                    },
                    None => None,
                };
                // `s.matches(p)` or `matches(s, p)`: the pattern is the last argument.
                let pattern = usize::from(call.target.is_none());
                for i in 0..=pattern {
                    let validated = function == "matches" && i == 0;
                    if let Some((text, id)) = literal(i).filter(|_| i == pattern || validated) {
                        out.patterns.push(Pattern {
                            text,
                            id,
                            validated,
                        });
                    }
                }
            }
            let namespace_id = namespace.and(call.target.as_ref().map(|t| t.id));
            out.calls.push((function.clone(), node.id, namespace_id));
            if !out.functions.contains(&function) {
                out.functions.push(function);
            }
            if let (Some(target), None) = (&call.target, namespace) {
                free_variables(target, bound, out)?;
            }
            for arg in &call.args {
                free_variables(arg, bound, out)?;
            }
        }
        Expr::Select(select) => free_variables(&select.operand, bound, out)?,
        Expr::List(list) => {
            for e in &list.elements {
                free_variables(e, bound, out)?;
            }
        }
        Expr::Map(cel::common::ast::MapExpr { entries })
        | Expr::Struct(cel::common::ast::StructExpr { entries, .. }) => {
            for entry in entries {
                match &entry.expr {
                    EntryExpr::StructField(f) => free_variables(&f.value, bound, out)?,
                    EntryExpr::MapEntry(m) => {
                        free_variables(&m.key, bound, out)?;
                        free_variables(&m.value, bound, out)?;
                    }
                }
            }
        }
        Expr::Comprehension(c) => {
            free_variables(&c.iter_range, bound, out)?;
            free_variables(&c.accu_init, bound, out)?;
            let before = bound.len();
            bound.push(c.iter_var.clone());
            if let Some(second) = &c.iter_var2 {
                bound.push(second.clone());
                out.functions
                    .push(cel_env::TWO_VARIABLE_COMPREHENSION.to_string());
            }
            bound.push(c.accu_var.clone());
            for e in [&c.loop_cond, &c.loop_step, &c.result] {
                free_variables(e, bound, out)?;
            }
            bound.truncate(before);
        }
    }
    Ok(())
}

/// One compiled `matchConditions` entry.
#[derive(Debug)]
pub struct MatchCondition {
    pub(crate) name: String,
    pub(crate) expression: String,
    /// It reads `authorizer`: its checks need an authorizer (`serve --authorizer`).
    pub(crate) uses_authorizer: bool,
    program: Program,
}

/// Which variables a webhook's conditions reference, so that only those are converted.
#[derive(Clone, Debug, Default)]
struct Uses {
    object: bool,
    old_object: bool,
    request: bool,
    /// `authorizer` (and `authorizer.requestResource`): checks answered by the caller's
    /// decisions ([`MatchConditions::evaluate_authorized`]).
    authorizer: bool,
    /// Top-level `request` fields selected (`request.userInfo` → `userInfo`); `None` when
    /// `request` is also used whole, so every field is needed.
    request_fields: Option<Vec<String>>,
}

/// What cel-go's checker refuses `expression` for, as it reports it: the variables and
/// functions `names` uses that are not declared (`variables`; the Kubernetes CEL functions),
/// each use at its node (a call at its `(`), and the type errors [`cel_types::check`] finds
/// (`request` and `namespaceObject` typed, `variables` with the fields `composition` types,
/// the rest `dyn`); all sorted by position (`Errors.ToDisplayString`, `common/errors.go`).
/// Without errors, the expression's type.
///
/// # Errors
/// [`CompileError::Undeclared`] when there is one.
fn checker_errors(
    expression: &str,
    program: &Program,
    names: &Names,
    variables: &[&str],
    composition: &[(String, Ty)],
) -> Result<Ty, CompileError> {
    let variable_uses = names
        .variable_uses
        .iter()
        .filter(|(name, _)| !variables.contains(&name.as_str()));
    // An undeclared namespaced call (`sets.nope(x)`) reads as a member call on an identifier,
    // both undeclared.
    let calls = names
        .calls
        .iter()
        .filter(|(name, ..)| !cel_env::is_declared(name))
        .flat_map(
            |(name, id, namespace)| match (namespace, name.split_once('.')) {
                (Some(ns_id), Some((ns, function))) => vec![(ns, *ns_id), (function, *id)],
                _ => vec![(name.as_str(), *id)],
            },
        );
    let typed: Vec<(&str, Ty)> = variables
        .iter()
        .map(|v| match *v {
            "request" => (*v, Ty::Object(&cel_types::REQUEST)),
            "namespaceObject" => (*v, Ty::Object(&cel_types::NAMESPACE)),
            "variables" => (*v, Ty::Variables(composition.into())),
            "authorizer" => (*v, Ty::Opaque(authz::AUTHORIZER_TYPE)),
            other => (other, Ty::Dyn),
        })
        .collect();
    let declarations = cel_types::Declarations { variables: &typed };
    let (ty, type_errors) = cel_types::check(program.expression(), &declarations);
    let undeclared = variable_uses
        .map(|(name, id)| (name.as_str(), *id))
        .chain(calls)
        .map(|(name, id)| {
            (
                id,
                format!("undeclared reference to '{name}' (in container '')"),
            )
        });
    let mut found: Vec<(usize, String)> = undeclared
        .chain(type_errors)
        .map(|(id, message)| {
            let at = program.source_info().offset_for(id).map_or(0, |o| o.0);
            let at = usize::try_from(at).unwrap_or(0);
            // The `cel` crate's offsets are in bytes; cel-go's columns in characters.
            let chars = expression
                .get(..at)
                .map_or(0, |before| before.chars().count());
            (chars, message)
        })
        .collect();
    if found.is_empty() {
        return Ok(ty);
    }
    found.sort_by_key(|(at, _)| *at);
    let errors: Vec<String> = found
        .iter()
        .map(|(at, message)| super::cel_limits::display_at(expression, *at, message))
        .collect();
    Err(CompileError::Undeclared(errors.join("\n")))
}

/// Collects the fields selected directly on `request`; false if `request` appears otherwise.
pub(crate) fn request_fields(expr: &cel::common::ast::Expr, out: &mut Vec<String>) -> bool {
    use cel::common::ast::{EntryExpr, Expr};
    match expr {
        Expr::Ident(name) => name != "request",
        Expr::Select(sel) => match &sel.operand.expr {
            Expr::Ident(name) if name == "request" && !sel.test => {
                if !out.contains(&sel.field) {
                    out.push(sel.field.clone());
                }
                true
            }
            other => request_fields(other, out),
        },
        Expr::Call(call) => {
            call.target
                .as_ref()
                .is_none_or(|t| request_fields(&t.expr, out))
                && call.args.iter().all(|a| request_fields(&a.expr, out))
        }
        Expr::List(list) => list.elements.iter().all(|e| request_fields(&e.expr, out)),
        Expr::Map(cel::common::ast::MapExpr { entries })
        | Expr::Struct(cel::common::ast::StructExpr { entries, .. }) => {
            entries.iter().all(|e| match &e.expr {
                EntryExpr::StructField(f) => request_fields(&f.value.expr, out),
                EntryExpr::MapEntry(m) => {
                    request_fields(&m.key.expr, out) && request_fields(&m.value.expr, out)
                }
            })
        }
        Expr::Comprehension(c) => [
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ]
        .iter()
        .all(|e| request_fields(&e.expr, out)),
        Expr::Unspecified | Expr::Literal(_) => true,
    }
}

/// The compiled `matchConditions` of one webhook, in list order.
#[derive(Debug, Default)]
pub struct MatchConditions {
    conditions: Vec<MatchCondition>,
    uses: Uses,
    /// Largest request body (bytes) for which the conditions cannot reach a cost limit, so
    /// their cost need not be tracked ([`cost::fast_path_max_body`]); `None`: always track.
    untracked_max_body: Option<u64>,
}

/// The result of evaluating all conditions (matcher.go `Match`).
#[derive(Clone, Debug, PartialEq)]
pub enum ConditionsResult {
    /// No condition was false and none errored: call the webhook.
    Match,
    /// The first condition that evaluated to false; the webhook is skipped whatever else errored.
    NoMatch {
        /// The condition's name.
        condition: String,
    },
    /// No condition was false but some errored, or the webhook's cost budget ran out;
    /// failurePolicy decides. The message aggregates the errors as `utilerrors.NewAggregate`
    /// does.
    Error(String),
}

/// Why a match condition does not compile; the message kube-apiserver's CEL compiler would
/// give where it has one (`CompileCELExpression` in
/// `staging/src/k8s.io/apiserver/pkg/admission/plugin/cel/compile.go`: `compilation failed:
/// ...`). Each message is the whole of upstream's text, its cause's words included, so no
/// variant has a `source()`: a chain of causes would repeat them.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// Over one of cel-go's parser limits (size, nesting, depth), checked before parsing.
    #[error("compilation failed: {0}")]
    Limit(super::cel_limits::LimitError),
    /// A syntax error: the parser's errors.
    #[error("compilation failed: {0}")]
    Parse(cel::ParseErrors),
    /// A function this build cannot evaluate, or that no environment declares.
    #[error("compilation failed: {0}")]
    Function(cel_env::FunctionError),
    /// Variables or functions the environment does not declare, each where it is written, as
    /// cel-go's checker reports them (`ERROR: <input>:1:1: undeclared reference to 'x' (in
    /// container '')`, the source line and a caret; one per use, in source order).
    #[error("compilation failed: {0}")]
    Undeclared(String),
    /// A use of the authz library (`authorizer`) its declarations do not allow.
    #[error("compilation failed: {0}")]
    Authz(authz::TypeError),
    /// A literal `matches` argument that Go's `regexp` refuses, as cel-go's
    /// `ValidateRegexLiterals` reports it (`ERROR: <input>:1:13: invalid matches argument` and
    /// the source line with a caret).
    #[error("compilation failed: {0}")]
    MatchesArgument(String),
    /// Another literal pattern (`matches(s, p)`'s, `find`'s, `findAll`'s) that Go's `regexp`
    /// refuses: kube-apiserver compiles it as it builds the program, and fails there
    /// (`program instantiation failed: `, an internal error of the field: `CompileCELExpression`,
    /// `staging/src/k8s.io/apiserver/pkg/admission/plugin/cel/compile.go`).
    #[error("program instantiation failed: {error}")]
    Regex {
        pattern: String,
        error: super::re2::Re2Error,
    },
    /// A conversion of a literal that cannot be done (`int('abc')`, `uint(-1)`): cel-go's
    /// planner converts literals when it builds the program, which then fails.
    #[error("program instantiation failed: {0}")]
    Conversion(String),
    /// The result is statically not a bool: its type as cel-go names it (`int`,
    /// `list(string)`, `google.protobuf.Duration`).
    #[error("must evaluate to bool but got {0}")]
    NotBool(String),
}

impl From<cel_env::FunctionError> for CompileError {
    fn from(e: cel_env::FunctionError) -> Self {
        CompileError::Function(e)
    }
}

impl From<authz::TypeError> for CompileError {
    fn from(e: authz::TypeError) -> Self {
        CompileError::Authz(e)
    }
}

/// Runs `f`, an evaluation that may spend up to the webhook's cost budget (milliseconds to
/// tens of them), without holding up the other admissions of this worker thread: on a
/// multi-threaded runtime (`serve`), `block_in_place` hands the worker's other tasks to
/// another thread first; anywhere else (the background lane's own thread, `explain`, tests)
/// `f` simply runs. Only evaluations whose cost is tracked come here: those that cannot reach
/// the limits ([`cost::fast_path_max_body`]) are cheaper than the hand-off.
fn off_the_workers<R>(f: impl FnOnce() -> R) -> R {
    let multi_threaded = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi_threaded {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}

impl CompileError {
    /// The field error kube-apiserver gives for `expression` at `field`: an internal error for
    /// a program that cannot be built ([`CompileError::Regex`], `field.InternalError`), an
    /// invalid value otherwise (`field.Invalid`, with the expression).
    pub(crate) fn field_error(
        &self,
        field: impl Into<String>,
        expression: &str,
    ) -> crate::field_error::Error {
        use crate::field_error::{BadValue, Error, ErrorType};
        match self {
            CompileError::Regex { .. } => Error::new(
                ErrorType::Internal,
                field,
                BadValue::Omitted,
                self.to_string(),
            ),
            _ => Error::invalid(field, expression, self.to_string()),
        }
    }
}

/// Why a condition has no value (`explain`, and the error `evaluate` aggregates).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub(crate) enum EvaluationError {
    /// The expression failed when run: CEL's error, in cel-go's words where they differ
    /// ([`cel_go_words`]).
    #[error("{}", cel_go_words(.0))]
    Execution(cel::ExecutionError),
    /// A library function refused its arguments (`path must not be empty`): its message, as
    /// cel-go prints `types.NewErr`.
    #[error("{0}")]
    Library(String),
    /// Cancelled: its cel-go cost is over [`cost::PER_CALL_LIMIT`].
    #[error("{}", cost::PER_CALL_LIMIT_ERROR)]
    PerCallLimit,
    /// It ran the webhook's [`cost::WEBHOOK_BUDGET`] out.
    #[error("{}", cost::OUT_OF_BUDGET_ERROR)]
    OutOfBudget,
    /// It did not run: the variables could not be bound, `object` or `oldObject` nested
    /// deeper than kube-apiserver reads ([`ReadError`]).
    #[error("{0}")]
    Unreadable(String),
    /// It did not run: an earlier condition ran the budget out.
    #[error("not evaluated: the webhook's cost budget ran out")]
    NotEvaluated,
}

/// The request's `object`, `oldObject` or `options` could not be read for the conditions:
/// decided as a condition's error is, by failurePolicy (never taken for `null`).
#[derive(Debug, thiserror::Error)]
#[error("the request's object could not be read for matchConditions: {0}")]
pub(crate) struct ReadError(deep_json::DeepError);

/// `e` as cel-go words the same failure (`common/types/err.go`: `no such key: %v`,
/// `division by zero`, `modulus by zero`, `integer overflow`, `unsigned integer overflow`;
/// `interpreter/attributes.go`: `index out of bounds: %v`), which reaches users in denials and
/// warnings. A library function's error is its message alone, as `types.NewErr` makes it
/// (the `cel` crate prefixes `Error executing function '<name>': `); the `cel` crate's own
/// words otherwise.
fn cel_go_words(e: &cel::ExecutionError) -> std::borrow::Cow<'_, str> {
    use cel::ExecutionError as E;
    use std::borrow::Cow;
    match e {
        E::NoSuchKey(key) => Cow::Owned(format!("no such key: {key}")),
        E::IndexOutOfBounds(cel::Value::Int(i)) => Cow::Owned(format!("index out of bounds: {i}")),
        E::IndexOutOfBounds(cel::Value::UInt(i)) => Cow::Owned(format!("index out of bounds: {i}")),
        E::FunctionError { message, .. } => Cow::Borrowed(message),
        E::DivisionByZero(_) => Cow::Borrowed("division by zero"),
        E::RemainderByZero(_) => Cow::Borrowed("modulus by zero"),
        E::Overflow(_, cel::Value::UInt(_), _) => Cow::Borrowed("unsigned integer overflow"),
        E::Overflow(..) => Cow::Borrowed("integer overflow"),
        other => Cow::Owned(other.to_string()),
    }
}

impl From<cel_env::ParseError> for CompileError {
    fn from(e: cel_env::ParseError) -> Self {
        match e {
            cel_env::ParseError::Limit(e) => CompileError::Limit(e),
            cel_env::ParseError::Syntax(e) => CompileError::Parse(e),
        }
    }
}

impl From<cel::ExecutionError> for EvaluationError {
    fn from(e: cel::ExecutionError) -> Self {
        match authz::library_message(&e) {
            Some(message) => EvaluationError::Library(message.to_string()),
            None => EvaluationError::Execution(e),
        }
    }
}

/// Most rounds of [`MatchConditions::evaluate_authorized`] one admission needs: `check` costs
/// 350000 against a per-expression limit of 1000000, so a condition asks for at most two
/// checks, and each round answers at least one per condition still waiting.
pub(crate) const MAX_AUTHORIZATION_ROUNDS: usize = 4;

/// The outcome of an evaluation with authorization checks: final, or waiting for decisions.
#[derive(Debug)]
pub enum Authorized<T> {
    /// Every check reached had a decision: the result.
    Done(T),
    /// Checks reached without a decision (at most one per condition, the first): resolve
    /// them, add them to the decisions and evaluate again.
    Pending(Vec<CheckKey>),
}

/// What [`MatchConditions::evaluate_any`] found.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct AnyTrue {
    /// The name of the first condition, in list order, that evaluated to `true`.
    pub(crate) first_true: Option<String>,
    /// The conditions that failed, aggregated as `Match` aggregates errors; `None` when none
    /// did.
    pub(crate) error: Option<String>,
}

/// Errors as `utilerrors.NewAggregate` prints them: none, the one, or `[a, b]`.
fn aggregate(mut errors: Vec<String>) -> Option<String> {
    match errors.len() {
        0 => None,
        1 => Some(errors.remove(0)),
        _ => Some(format!("[{}]", errors.join(", "))),
    }
}

/// One condition's evaluation, for `explain`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ConditionEvaluation {
    /// The value as CEL prints it, or why there is none.
    pub(crate) value: Result<String, EvaluationError>,
    /// The cost kube-apiserver would charge (cel-go runtime cost); `None` when the condition
    /// did not run because the webhook's budget had run out.
    pub(crate) cost: Option<u64>,
}

/// One condition's result inside [`MatchConditions::run`].
struct Ran {
    result: Result<Value, EvaluationError>,
    cost: Option<u64>,
}

impl MatchCondition {
    /// Compiles one expression.
    ///
    /// # Errors
    /// `CompileError`: a syntax error, an undeclared variable, a Kubernetes CEL function
    /// this build cannot evaluate, or an expression whose result is statically not a bool.
    pub fn compile(name: &str, expression: &str) -> Result<Self, CompileError> {
        let (program, variables, ty) = compile_program(expression, &VARIABLES, &[])?;
        check_bool(&program, &ty)?;
        Ok(MatchCondition {
            name: name.to_string(),
            expression: expression.to_string(),
            uses_authorizer: variables.iter().any(|v| v == "authorizer"),
            program,
        })
    }
}

/// Parses `expression` and checks what it uses: its functions exist in this build, its
/// variables are among `variables`, its literal patterns compile, its `authorizer` calls are
/// well typed, its types check (`variables`' fields typed by `composition`). Returns the
/// program, its free variables and its type. The result type is the caller's to check
/// ([`check_bool`] for conditions).
/// Shared with the ValidatingAdmissionPolicy evaluator (`crate::policy`), whose environments
/// declare more variables (`params`, `variables`).
///
/// # Errors
/// As [`MatchCondition::compile`], except [`CompileError::NotBool`].
pub(crate) fn compile_program(
    expression: &str,
    variables: &[&str],
    composition: &[(String, Ty)],
) -> Result<(Program, Vec<String>, Ty), CompileError> {
    let program = cel_env::compile(expression)?;
    let mut names = Names::default();
    free_variables(program.expression(), &mut Vec::new(), &mut names)?;
    // Functions first: an unsupported macro's loop variables would read as undeclared.
    cel_env::check_supported(names.functions.iter().map(String::as_str))?;
    let ty = checker_errors(expression, &program, &names, variables, composition)?;
    for pattern in &names.patterns {
        let Err(source) = cel_env::precompile_regex(&pattern.text) else {
            continue;
        };
        if pattern.validated {
            // cel-go's words, at the literal (`cel/validator.go`, `formatValidator.Validate`).
            // The `cel` crate's offsets are in bytes; cel-go's columns in characters.
            let at = program
                .source_info()
                .offset_for(pattern.id)
                .map_or(0, |o| o.0);
            let at = usize::try_from(at).unwrap_or(0);
            let chars = expression
                .get(..at)
                .map_or(0, |before| before.chars().count());
            return Err(CompileError::MatchesArgument(
                super::cel_limits::display_at(expression, chars, "invalid matches argument"),
            ));
        }
        // Any other literal pattern (`matches(s, p)`'s, `find`'s, `findAll`'s) is compiled
        // when kube-apiserver builds the program (the regex optimizations of `OptOptimize`,
        // base.go), which then fails.
        return Err(CompileError::Regex {
            pattern: pattern.text.clone(),
            error: source,
        });
    }
    authz::static_type(&program.expression().expr, &mut Vec::new())?;
    if let Some(why) = failed_constant_conversion(&program.expression().expr) {
        return Err(CompileError::Conversion(why));
    }
    Ok((program, names.variables, ty))
}

/// The functions `expression` calls (namespaced ones qualified), inner calls first (a call's
/// target and arguments before it, as kube-apiserver's type checker meets them), for the
/// checks that depend on the cluster's version
/// ([`crate::config::Snapshot::kube_version_warnings`]); empty when it does not parse
/// (compiling it reports that).
pub(crate) fn functions_called(expression: &str) -> Vec<String> {
    let Ok(program) = cel_env::compile(expression) else {
        return Vec::new();
    };
    let mut names = Names::default();
    match free_variables(program.expression(), &mut Vec::new(), &mut names) {
        // The walk records a call before what it calls on.
        Ok(()) => names.functions.into_iter().rev().collect(),
        Err(_) => Vec::new(),
    }
}

/// Why a conversion of a literal in `expr` fails, in cel-go's words, for the first one that
/// does: cel-go's planner converts `int`, `uint`, `double`, `bool` and `string` of a literal
/// when it builds the program (`interpreter/planner.go`, constant type conversions), so
/// kube-apiserver refuses the expression at create (`program instantiation failed: type
/// conversion error from 'string' to 'int'`). Parsed as Go's `strconv` parses: `ParseInt` and
/// `ParseUint` in base 10, `ParseBool`'s twelve spellings; a float that Go may take and Rust
/// may not (hexadecimal) is left to evaluation.
fn failed_constant_conversion(expr: &cel::common::ast::Expr) -> Option<String> {
    use cel::common::ast::{EntryExpr, Expr};
    fn first<'a>(
        mut nodes: impl Iterator<Item = &'a cel::common::ast::IdedExpr>,
    ) -> Option<String> {
        nodes.find_map(|n| failed_constant_conversion(&n.expr))
    }
    match expr {
        Expr::Call(call) => {
            if let (None, [arg]) = (&call.target, call.args.as_slice()) {
                if let Expr::Literal(literal) = &arg.expr {
                    if let Some(why) = conversion_error(&call.func_name, literal) {
                        return Some(why);
                    }
                }
            }
            first(call.target.iter().map(|t| &**t).chain(call.args.iter()))
        }
        Expr::Select(s) => failed_constant_conversion(&s.operand.expr),
        Expr::List(l) => first(l.elements.iter()),
        Expr::Map(cel::common::ast::MapExpr { entries })
        | Expr::Struct(cel::common::ast::StructExpr { entries, .. }) => {
            entries.iter().find_map(|e| match &e.expr {
                EntryExpr::StructField(f) => failed_constant_conversion(&f.value.expr),
                EntryExpr::MapEntry(m) => failed_constant_conversion(&m.key.expr)
                    .or_else(|| failed_constant_conversion(&m.value.expr)),
            })
        }
        Expr::Comprehension(c) => first(
            [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ]
            .into_iter(),
        ),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => None,
    }
}

/// cel-go's error converting `literal` with `function`, if it fails.
fn conversion_error(function: &str, literal: &cel::common::ast::LiteralValue) -> Option<String> {
    use cel::common::ast::LiteralValue as L;
    let from_string = || format!("type conversion error from 'string' to '{function}'");
    // Go's float-to-int conversion range checks (`common/types/double.go`).
    let to_int = |f: f64| !(f > -9.223_372_036_854_776e18 && f < 9.223_372_036_854_776e18);
    match (function, literal) {
        ("int", L::String(s)) => s.parse::<i64>().is_err().then(from_string),
        ("int", L::Double(d)) => to_int(**d).then(|| "integer overflow".to_string()),
        ("int", L::UInt(u)) => (**u > i64::MAX as u64).then(|| "integer overflow".to_string()),
        ("uint", L::String(s)) => {
            (s.starts_with('+') || s.parse::<u64>().is_err()).then(from_string)
        }
        ("uint", L::Int(i)) => (**i < 0).then(|| "unsigned integer overflow".to_string()),
        ("uint", L::Double(d)) => (!(**d > -1.0 && **d < 1.844_674_407_370_955_2e19))
            .then(|| "unsigned integer overflow".to_string()),
        ("double", L::String(s)) => {
            let hex = s.contains("0x") || s.contains("0X");
            (!hex && s.parse::<f64>().is_err()).then(from_string)
        }
        ("bool", L::String(s)) => (!matches!(
            s.as_ref(),
            "1" | "t"
                | "T"
                | "TRUE"
                | "true"
                | "True"
                | "0"
                | "f"
                | "F"
                | "FALSE"
                | "false"
                | "False"
        ))
        .then(from_string),
        ("string", L::Bytes(b)) => std::str::from_utf8(b)
            .is_err()
            .then(|| "invalid UTF-8 in bytes, cannot convert to string".to_string()),
        _ => None,
    }
}

/// Refuses a program whose type `ty` (the checker's) is not bool nor `dyn` (what kube-apiserver's type checker
/// refuses for conditions).
///
/// # Errors
/// [`CompileError::NotBool`] with what it evaluates to.
pub(crate) fn check_bool(program: &Program, ty: &Ty) -> Result<(), CompileError> {
    if let Some(name) = ty.result_name().filter(|n| n != "bool") {
        return Err(CompileError::NotBool(name));
    }
    match authz::static_type(&program.expression().expr, &mut Vec::new())? {
        authz::StaticType::Other(kind) | authz::StaticType::Authz(kind) if kind != "bool" => {
            Err(CompileError::NotBool(kind.to_string()))
        }
        _ => Ok(()),
    }
}

impl MatchConditions {
    /// Wraps compiled conditions, noting which variables they need.
    pub fn new(conditions: Vec<MatchCondition>) -> Self {
        let mut uses = Uses::default();
        let (mut fields, mut whole_request) = (Vec::new(), false);
        for c in &conditions {
            let r = c.program.references();
            uses.object |= r.has_variable("object");
            uses.old_object |= r.has_variable("oldObject");
            uses.request |= r.has_variable("request");
            uses.authorizer |= c.uses_authorizer;
            whole_request |= !request_fields(&c.program.expression().expr, &mut fields);
        }
        uses.request_fields = (!whole_request).then_some(fields);
        let untracked_max_body =
            cost::fast_path_max_body(conditions.iter().map(|c| c.program.expression()));
        MatchConditions {
            conditions,
            uses,
            untracked_max_body,
        }
    }

    /// True when a condition uses `authorizer`: evaluate with
    /// [`MatchConditions::evaluate_authorized`].
    pub(crate) fn uses_authorizer(&self) -> bool {
        self.uses.authorizer
    }

    /// True when the webhook has no matchConditions.
    pub(crate) fn is_empty(&self) -> bool {
        self.conditions.is_empty()
    }

    /// The compiled conditions, in list order.
    pub fn iter(&self) -> impl Iterator<Item = &MatchCondition> {
        self.conditions.iter()
    }

    /// Evaluates every condition in order (no short-circuit between conditions, as upstream
    /// `Match`), then: the webhook's cost budget ran out → [`ConditionsResult::Error`] whatever
    /// the results; first `false` → [`ConditionsResult::NoMatch`]; else any error (a per-call
    /// cost limit included) → [`ConditionsResult::Error`]; else [`ConditionsResult::Match`].
    ///
    /// A non-bool result of a `dyn` expression counts as "not false", as in matcher.go, which
    /// only compares results with `celtypes.False`.
    pub fn evaluate(&self, review: &ParsedReview<'_>) -> ConditionsResult {
        if self.conditions.is_empty() {
            return ConditionsResult::Match;
        }
        let track = self
            .untracked_max_body
            .is_none_or(|max| review.body_len() as u64 > max);
        let evaluate = || {
            self.with_bound(review, |context| self.result(self.run(context, track)))
                .unwrap_or_else(|e| ConditionsResult::Error(e.to_string()))
        };
        if track {
            off_the_workers(evaluate)
        } else {
            evaluate()
        }
    }

    /// Runs `f` in a context with the variables the conditions reference bound to `review`'s
    /// values (see [`MatchConditions::bind`]); an `object` or `oldObject` nested past
    /// serde_json's limit is read as deep as kube-apiserver reads it ([`deep_json::read_deep`]),
    /// `f` then running on the stack grown for it.
    ///
    /// # Errors
    /// A value that cannot be read (nested past kube-apiserver's own limit): never bound as
    /// `null`, which would make the conditions decide on an object that is not absent. The
    /// caller decides as for a condition's error, by failurePolicy.
    fn with_bound<'v, R>(
        &self,
        review: &ParsedReview<'v>,
        f: impl Fn(&cel::Context<'_, '_>) -> R,
    ) -> Result<R, ReadError> {
        let request = &review.request;
        let raw = [request.object, request.old_object, request.options]
            .map(|v| v.map(serde_json::value::RawValue::get));
        deep_json::read_deep(&raw, |unbounded| {
            cel_env::with_root_context(|context| {
                // The request's values borrow from its body: a scope for values that live
                // as long as the body does.
                let mut context: cel::Context<'_, 'v> = context;
                self.bind(&mut context, review, unbounded)?;
                Ok(f(&context))
            })
        })
        .map_err(ReadError)
    }

    /// [`MatchConditions::evaluate`] with `authorizer`'s checks answered from `decisions`.
    /// A check without a decision makes the result [`Authorized::Pending`] (that evaluation
    /// is discarded): the caller resolves the keys, adds them to `decisions` and evaluates
    /// again. Each round asks for at most one check per condition, the first one reached, so
    /// within a condition the checks asked for are those cel-go's evaluation would make (the
    /// exceptions are in docs/reference/cel.md); `check`'s cost bounds a condition to two, so
    /// [`MAX_AUTHORIZATION_ROUNDS`] rounds decide every webhook.
    pub(crate) fn evaluate_authorized(
        &self,
        review: &ParsedReview<'_>,
        decisions: &mut Decisions,
    ) -> Authorized<ConditionsResult> {
        let (result, pending) = authz::with_decisions(decisions, || self.evaluate(review));
        if pending.is_empty() {
            Authorized::Done(result)
        } else {
            Authorized::Pending(pending)
        }
    }

    /// The decision from every condition's result (upstream `Match`).
    fn result(&self, ran: Result<Vec<Ran>, Vec<Ran>>) -> ConditionsResult {
        let Ok(ran) = ran else {
            return ConditionsResult::Error(cost::OUT_OF_BUDGET_ERROR.to_string());
        };
        if let Some(i) = ran
            .iter()
            .position(|r| matches!(r.result, Ok(Value::Bool(false))))
        {
            return ConditionsResult::NoMatch {
                condition: self.conditions[i].name.clone(),
            };
        }
        match aggregate(self.errors(&ran)) {
            None => ConditionsResult::Match,
            Some(error) => ConditionsResult::Error(error),
        }
    }

    /// `expression '<expression>' resulted in error: <error>` for each condition in `ran` that
    /// errored, in list order (the messages `Match` aggregates).
    fn errors(&self, ran: &[Ran]) -> Vec<String> {
        self.conditions
            .iter()
            .zip(ran)
            .filter_map(|(c, r)| {
                let e = r.result.as_ref().err()?;
                Some(format!(
                    "expression '{}' resulted in error: {e}",
                    c.expression
                ))
            })
            .collect()
    }

    /// The proxy's own use of matchConditions, for proxy-wide exclusions
    /// (`crate::exclusions`): the conditions are run as [`MatchConditions::evaluate`] runs
    /// them (same variables, per-call cost limit and budget), but any one `true` decides,
    /// where a webhook needs every one. A condition that errors, runs the budget out, is not
    /// reached, or yields a value that is not a bool (a `dyn` expression) is not `true`: it
    /// decides nothing and is reported in [`AnyTrue::error`].
    pub(crate) fn evaluate_any(&self, review: &ParsedReview<'_>) -> AnyTrue {
        if self.conditions.is_empty() {
            return AnyTrue::default();
        }
        let track = self
            .untracked_max_body
            .is_none_or(|max| review.body_len() as u64 > max);
        let any = self.with_bound(review, |context| {
            let (mut ran, out_of_budget) = match self.run(context, track) {
                Ok(ran) => (ran, false),
                Err(ran) => (ran, true),
            };
            if out_of_budget {
                // The condition that ran the budget out counts as failed, whatever it returned.
                if let Some(last) = ran.last_mut() {
                    last.result = Err(EvaluationError::OutOfBudget);
                }
            }
            for r in &mut ran {
                if let Ok(value) = &r.result {
                    if !matches!(value, Value::Bool(_)) {
                        r.result = Err(EvaluationError::Library(format!(
                            "must evaluate to bool, not {}",
                            value.type_of()
                        )));
                    }
                }
            }
            let first_true = ran
                .iter()
                .position(|r| matches!(r.result, Ok(Value::Bool(true))))
                .map(|i| self.conditions[i].name.clone());
            let mut errors = self.errors(&ran);
            if ran.len() < self.conditions.len() {
                errors.push(format!(
                    "{} condition(s) not evaluated: {}",
                    self.conditions.len() - ran.len(),
                    cost::OUT_OF_BUDGET_ERROR
                ));
            }
            AnyTrue {
                first_true,
                error: aggregate(errors),
            }
        });
        any.unwrap_or_else(|e| AnyTrue {
            first_true: None,
            error: Some(e.to_string()),
        })
    }

    /// Runs every condition in `context`, in order (`condition.go` `ForInput`). With `track`,
    /// each is charged its cel-go cost first: over [`cost::PER_CALL_LIMIT`] it is cancelled (a
    /// per-condition error), and its cost is taken from the webhook's
    /// [`cost::WEBHOOK_BUDGET`].
    ///
    /// # Errors
    /// The budget ran out: the evaluator as a whole fails; the results so far (the condition
    /// that ran out included) are returned for `explain`.
    fn run(&self, context: &cel::Context<'_, '_>, track: bool) -> Result<Vec<Ran>, Vec<Ran>> {
        let mut remaining = cost::WEBHOOK_BUDGET;
        let mut ran = Vec::with_capacity(self.conditions.len());
        for condition in &self.conditions {
            if self.uses.authorizer {
                authz::next_condition();
            }
            let execute = || {
                condition
                    .program
                    .execute(context)
                    .map_err(EvaluationError::from)
            };
            if !track {
                ran.push(Ran {
                    result: execute(),
                    cost: None,
                });
                continue;
            }
            let (spent, result) = match cost::actual_cost(
                condition.program.expression(),
                context,
                cost::PER_CALL_LIMIT,
            ) {
                Ok(spent) => (spent, execute()),
                Err(Cancelled(spent)) => (spent, Err(EvaluationError::PerCallLimit)),
            };
            let out_of_budget = spent > remaining;
            remaining = remaining.saturating_sub(spent);
            ran.push(Ran {
                result,
                cost: Some(spent),
            });
            if out_of_budget {
                return Err(ran);
            }
        }
        Ok(ran)
    }

    /// Adds the variables the conditions reference (see [`VARIABLES`]) to `context`; JSON
    /// values are read with serde_json's recursion limit unless `unbounded`.
    ///
    /// # Errors
    /// A raw value that does not read (serde_json's recursion limit, when bounded).
    fn bind<'v>(
        &self,
        context: &mut cel::Context<'_, 'v>,
        review: &ParsedReview<'v>,
        unbounded: bool,
    ) -> Result<(), serde_json::Error> {
        let request = &review.request;
        if self.uses.object {
            context.add_variable_as_val("object", cel_json::read_raw(request.object, unbounded)?);
        }
        if self.uses.old_object {
            context.add_variable_as_val(
                "oldObject",
                cel_json::read_raw(request.old_object, unbounded)?,
            );
        }
        if self.uses.request {
            context.add_variable_as_val(
                "request",
                request_to_cel(review, self.uses.request_fields.as_deref(), unbounded)?,
            );
        }
        context.add_variable_from_value("namespaceObject", Value::Null);
        if self.uses.authorizer {
            let user = authz::requesting_user(review);
            context.add_variable_from_value(
                authz::REQUEST_RESOURCE_VARIABLE,
                authz::request_resource(user.clone(), review),
            );
            context.add_variable_from_value("authorizer", authz::authorizer(user));
        }
        Ok(())
    }

    /// Every condition's own result and cost, in list order, for `explain` (KEP-3716
    /// "Debuggability"): the value as CEL prints it, or the error message. Cost is always
    /// tracked here. The decision itself is [`MatchConditions::evaluate`]'s.
    pub(crate) fn evaluate_each(&self, review: &ParsedReview<'_>) -> Vec<ConditionEvaluation> {
        let each = self.with_bound(review, |context| {
            let (ran, out_of_budget) = match self.run(context, true) {
                Ok(ran) => (ran, false),
                Err(ran) => (ran, true),
            };
            let last = ran.len().saturating_sub(1);
            let mut each: Vec<ConditionEvaluation> = ran
                .into_iter()
                .enumerate()
                .map(|(i, r)| ConditionEvaluation {
                    value: if out_of_budget && i == last {
                        Err(EvaluationError::OutOfBudget)
                    } else {
                        r.result.map(|v| match v {
                            Value::Bool(b) => b.to_string(),
                            Value::String(s) => format!("{s:?}"),
                            Value::Int(i) => i.to_string(),
                            Value::Null => "null".to_string(),
                            other => format!("{other:?}"),
                        })
                    },
                    cost: r.cost,
                })
                .collect();
            each.resize(
                self.conditions.len(),
                ConditionEvaluation {
                    value: Err(EvaluationError::NotEvaluated),
                    cost: None,
                },
            );
            each
        });
        each.unwrap_or_else(|e| {
            vec![
                ConditionEvaluation {
                    value: Err(EvaluationError::Unreadable(e.to_string())),
                    cost: None,
                };
                self.conditions.len()
            ]
        })
    }
}

/// JSON → CEL: integers become `int` (or `uint` beyond i64), other numbers `double`.
pub(crate) fn json_to_cel(value: &serde_json::Value) -> Value {
    match value {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                Value::UInt(u)
            } else {
                Value::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        serde_json::Value::String(s) => Value::String(Arc::new(s.clone())),
        serde_json::Value::Array(a) => Value::List(Arc::new(a.iter().map(json_to_cel).collect())),
        serde_json::Value::Object(o) => {
            let map: HashMap<Key, Value> = o
                .iter()
                .map(|(k, v)| (Key::String(Arc::new(k.clone())), json_to_cel(v)))
                .collect();
            Value::Map(Map { map: Arc::new(map) })
        }
    }
}

/// A string of the request as a CEL string, borrowed from the body where the body holds it
/// as is.
fn text<'v>(s: &Cow<'v, str>) -> JsonVal<'v> {
    match s {
        Cow::Borrowed(s) => Box::new(CelString::from(*s)),
        Cow::Owned(s) => Box::new(CelString::from(s.clone())),
    }
}

/// A CEL map of `entries`, keyed by field name.
fn fields<'v>(entries: impl IntoIterator<Item = (&'static str, JsonVal<'v>)>) -> JsonVal<'v> {
    let map: HashMap<CelMapKey<'v>, JsonVal<'v>> = entries
        .into_iter()
        .map(|(k, v)| (CelMapKey::from(k), v))
        .collect();
    Box::new(CelMap::from(map))
}

/// A CEL list of the request's strings.
fn texts<'v>(list: &[Cow<'v, str>]) -> JsonVal<'v> {
    Box::new(CelList::from(list.iter().map(text).collect::<Vec<_>>()))
}

/// `request.userInfo` as the request holds it (`authenticationv1.UserInfo`), borrowed.
#[derive(Default, serde::Deserialize)]
struct UserInfo<'a> {
    #[serde(default, borrow)]
    username: Cow<'a, str>,
    #[serde(default, borrow)]
    uid: Cow<'a, str>,
    #[serde(default, borrow)]
    groups: Vec<Cow<'a, str>>,
    #[serde(default, borrow)]
    extra: BTreeMap<Cow<'a, str>, Vec<Cow<'a, str>>>,
}

/// `request.userInfo` (`authenticationv1.UserInfo`): every field present, empty when absent
/// (as [`authz::User::from_user_info`] reads it for the authorizer).
fn user_info<'v>(raw: Option<&'v serde_json::value::RawValue>) -> JsonVal<'v> {
    let user: UserInfo<'v> = raw
        .and_then(|raw| serde_json::from_str(raw.get()).ok())
        .unwrap_or_default();
    let extra: HashMap<CelMapKey<'v>, JsonVal<'v>> = user
        .extra
        .iter()
        .map(|(k, v)| {
            let key = match k {
                Cow::Borrowed(k) => CelMapKey::from(*k),
                Cow::Owned(k) => CelMapKey::from(k.clone()),
            };
            (key, texts(v))
        })
        .collect();
    fields([
        ("username", text(&user.username)),
        ("uid", text(&user.uid)),
        ("groups", texts(&user.groups)),
        ("extra", Box::new(CelMap::from(extra)) as JsonVal<'v>),
    ])
}

/// The `request` variable: the AdmissionRequest without uid, object and oldObject, with every
/// field present (a typed Go struct in kube-apiserver, so `request.subResource == ""` holds
/// when the JSON omits it). Built as CEL values directly, its strings borrowed from the body:
/// going through `serde_json::Value` cost 12 µs per request (benches/README.md).
///
/// With `only`, just those top-level fields are built: handing `cel` a larger map costs
/// about 10 µs per evaluation whatever is read from it (benches/README.md).
///
/// # Errors
/// serde_json's recursion limit for `options`, bounded ([`cel_json::read_raw`]).
pub(crate) fn request_to_cel<'v>(
    review: &ParsedReview<'v>,
    only: Option<&[String]>,
    unbounded: bool,
) -> Result<JsonVal<'v>, serde_json::Error> {
    let gvk = |g: &crate::review::GroupVersionKind<'v>| {
        fields([
            ("group", text(&g.group)),
            ("version", text(&g.version)),
            ("kind", text(&g.kind)),
        ])
    };
    let gvr = |g: &crate::review::GroupVersionResource<'v>| {
        fields([
            ("group", text(&g.group)),
            ("version", text(&g.version)),
            ("resource", text(&g.resource)),
        ])
    };
    let r = &review.request;
    let want = |field: &str| only.is_none_or(|f| f.iter().any(|x| x == field));
    let mut entries: Vec<(&'static str, JsonVal<'v>)> = Vec::new();
    let mut put = |field: &'static str, value: &dyn Fn() -> JsonVal<'v>| {
        if want(field) {
            entries.push((field, value()));
        }
    };
    put("kind", &|| gvk(&r.kind));
    put("resource", &|| gvr(&r.resource));
    put("subResource", &|| text(&r.sub_resource));
    put("requestKind", &|| {
        gvk(r.request_kind.as_ref().unwrap_or(&Default::default()))
    });
    put("requestResource", &|| {
        gvr(r.request_resource.as_ref().unwrap_or(&Default::default()))
    });
    put("requestSubResource", &|| {
        r.request_sub_resource
            .as_ref()
            .map_or_else(|| Box::new(CelString::from("")) as JsonVal<'v>, text)
    });
    put("name", &|| text(&r.name));
    put("namespace", &|| text(&r.namespace));
    put("operation", &|| text(&r.operation));
    put("userInfo", &|| user_info(r.user_info));
    put("dryRun", &|| Box::new(CelBool::from(r.is_dry_run())));
    if want("options") {
        entries.push(("options", cel_json::read_raw(r.options, unbounded)?));
    }
    Ok(fields(entries))
}

#[cfg(test)]
mod tests {
    use super::*;

    const POD: &str = r#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},"namespace":"ns","operation":"CREATE","userInfo":{"username":"jane","groups":["devs","system:authenticated"]},"object":{"metadata":{"name":"p","labels":{"app":"web"}},"spec":{"volumes":[{"name":"v","nfs":{"server":"s"}}]}},"oldObject":null,"dryRun":false,"options":null}}"#;

    fn conditions(list: &[(&str, &str)]) -> MatchConditions {
        MatchConditions::new(
            list.iter()
                .map(|(n, e)| MatchCondition::compile(n, e).unwrap())
                .collect(),
        )
    }

    fn eval(list: &[(&str, &str)]) -> ConditionsResult {
        conditions(list).evaluate(&ParsedReview::parse(POD.as_bytes()).unwrap())
    }

    /// Regular expressions decide as Go's `regexp` does (RE2: `\w` is ASCII): a condition
    /// `!'déjà'.matches('^\\w+$')` holds in kube-apiserver, so the webhook is called; with
    /// the `regex` crate's Unicode `\w` it did not, and the proxy skipped a webhook
    /// kube-apiserver calls. A literal valid in RE2 that the `regex` crate's size limit refused
    /// (`(\w{100}){10}`) loads; one Go refuses is refused in Go's words.
    #[test]
    fn regular_expressions_decide_as_re2() {
        assert_eq!(
            eval(&[("not-a-word", r"!'déjà'.matches('^\\w+$')")]),
            ConditionsResult::Match
        );
        assert_eq!(
            eval(&[("find", r"'déjà vu'.find('\\w+') == 'd'")]),
            ConditionsResult::Match
        );
        // A pattern known only at run time fails in Go's words (cel-go's `String.Match`; the
        // Kubernetes `find`'s `Illegal regex: ` before them).
        for (expression, want) in [
            (
                "'a'.matches(request.operation + '[')",
                "error parsing regexp: missing closing ]: `[`",
            ),
            (
                "'a'.find(request.operation + '[') == ''",
                "Illegal regex: error parsing regexp: missing closing ]: `[`",
            ),
        ] {
            assert_fails_with(expression, want);
        }
        assert!(MatchCondition::compile("c", r"'a'.matches('(\\w{100}){10}')").is_ok());
        // What kube-apiserver 1.32 answered for each at create: a literal `matches` argument
        // (the pattern of `s.matches(p)`, the string of `matches(s, p)`) refused by
        // `ValidateRegexLiterals` at its position; any other literal pattern refused as the
        // program is built.
        let refused = |expression: &str| {
            MatchCondition::compile("c", expression)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            refused(r"'é'.matches('(\\w{100}){11}')"),
            "compilation failed: ERROR: <input>:1:13: invalid matches argument\n | 'é'.matches('(\\\\w{100}){11}')\n | .．..........^"
        );
        assert_eq!(
            refused("matches('a(', '.*')"),
            "compilation failed: ERROR: <input>:1:9: invalid matches argument\n | matches('a(', '.*')\n | ........^"
        );
        for expression in [
            r"'a'.find('(\\w{100}){11}') == ''",
            r"matches('a', '(\\w{100}){11}')",
        ] {
            assert_eq!(
                refused(expression),
                "program instantiation failed: error parsing regexp: invalid repeat count: `{11}`"
            );
        }
        assert_eq!(
            refused("'a'.findAll('a**').size() == 0"),
            "program instantiation failed: error parsing regexp: invalid nested repetition operator: `**`"
        );
    }

    /// Nesting as deep as kube-apiserver takes (249: its parse listener refuses 250) compiles;
    /// the `cel` crate's own parser stopped at 96 (`Recursion limit of 96 exceeded`), refusing
    /// what kube-apiserver 1.32 created. On a stack like the binary's threads'.
    #[test]
    fn nesting_compiles_as_deep_as_kube_apiserver_takes() {
        let nested = |n: usize| format!("{}true{}", "(".repeat(n), ")".repeat(n));
        let compiled = std::thread::Builder::new()
            .stack_size(crate::deep_json::THREAD_STACK_BYTES)
            .spawn(move || {
                let ok = [97, 249].map(|n| MatchCondition::compile("c", &nested(n)).is_ok());
                let refused = MatchCondition::compile("c", &nested(250))
                    .map(|_| ())
                    .unwrap_err()
                    .to_string();
                (ok, refused)
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(compiled.0, [true, true]);
        assert_eq!(
            compiled.1,
            "compilation failed: ERROR: <input>:-1:0: expression recursion limit exceeded: 250"
        );
    }

    /// Run-time errors read as cel-go words them: they reach users in denials and warnings.
    #[test]
    fn runtime_errors_read_in_cel_go_s_words() {
        for (expression, want) in [
            ("object.metadata.nope == 'x'", "no such key: nope"),
            // A field of something that is not a map (oldObject is null on CREATE): cel-go's
            // `refQualify` says `no such key`, where the `cel` crate found no `_._` overload.
            ("oldObject.metadata.name == 'p'", "no such key: metadata"),
            ("object.metadata.name.first == 'p'", "no such key: first"),
            ("1 / (size(request.operation) - 6) == 1", "division by zero"),
            ("1 % (size(request.operation) - 6) == 1", "modulus by zero"),
            (
                "9223372036854775807 + size(request.operation) > 0",
                "integer overflow",
            ),
            (
                "18446744073709551615u + uint(size(request.operation)) > 0u",
                "unsigned integer overflow",
            ),
        ] {
            assert_fails_with(expression, want);
        }
    }

    /// The Kubernetes libraries' and cel-go's errors in their words, each as kube-apiserver
    /// 1.32.0 gives it for the same expression (`staging/src/k8s.io/apiserver/pkg/cel/library`:
    /// `url.ParseRequestURI`, `netip.ParseAddr` / `ParsePrefix` and `resource.ParseQuantity`
    /// errors; `lists.go`; cel-go's `index out of bounds`). Before, `Error executing function
    /// 'url': invalid URL: relative URL without a base` and the like.
    #[test]
    fn library_errors_read_in_kubernetes_words() {
        let quantity_format = "quantities must match the regular expression \
                               '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
        for (expression, want) in [
            (
                "[size(request.operation)][5] == 1",
                "index out of bounds: 5",
            ),
            (
                "request.userInfo.groups.filter(g, false).min() == 'a'",
                "min called on empty list",
            ),
            (
                "request.userInfo.groups.filter(g, false).max() == 'a'",
                "max called on empty list",
            ),
            (
                "url('foo') == url('foo')",
                r#"URL parse error during conversion from string: parse "foo": invalid URI for request"#,
            ),
            (
                "url('http://[::1') == url('x')",
                r#"URL parse error during conversion from string: parse "http://[::1": missing ']' in host"#,
            ),
            ("url('') == url('x')", r#"parse "": empty url"#),
            (
                "url('http://a b') == url('x')",
                r#"parse "http://a b": invalid character " " in host name"#,
            ),
            (
                "url('http://host:port') == url('x')",
                r#"parse "http://host:port": invalid port ":port" after host"#,
            ),
            (
                "url('/a%zz') == url('x')",
                r#"parse "/a%zz": invalid URL escape "%zz""#,
            ),
            (
                "url(':x') == url('x')",
                r#"parse ":x": missing protocol scheme"#,
            ),
            (
                "url('http://u ser@host') == url('x')",
                r#"parse "http://u ser@host": net/url: invalid userinfo"#,
            ),
            ("quantity('abc') == quantity('1')", quantity_format),
            ("quantity(' 1') == quantity('1')", quantity_format),
            ("quantity('1.5.Ki') == quantity('1')", quantity_format),
            (
                "quantity('1m1') == quantity('1')",
                "unable to parse quantity's suffix",
            ),
            (
                "quantity('--1') == quantity('1')",
                "unable to parse quantity's suffix",
            ),
            (
                "quantity('1e100').asInteger() > 0",
                "cannot convert value to integer",
            ),
            (
                "ip('1.2.3.256') == ip('1.2.3.4')",
                r#"IP Address "1.2.3.256" parse error during conversion from string: ParseAddr("1.2.3.256"): IPv4 field has value >255"#,
            ),
            (
                "ip('01.2.3.4') == ip('1.2.3.4')",
                r#"ParseAddr("01.2.3.4"): IPv4 field has octet with leading zero"#,
            ),
            (
                "ip('1..2.3') == ip('1.2.3.4')",
                r#"ParseAddr("1..2.3"): IPv4 field must have at least one digit (at ".2.3")"#,
            ),
            (
                "ip('1:2') == ip('::1')",
                r#"ParseAddr("1:2"): address string too short"#,
            ),
            (
                "ip('1::2::3') == ip('::1')",
                r#"ParseAddr("1::2::3"): multiple :: in address (at ":3")"#,
            ),
            (
                "ip('12345::') == ip('::1')",
                r#"ParseAddr("12345::"): each group must have 4 or less digits (at "12345::")"#,
            ),
            (
                "ip('::1.2.3.4:5') == ip('::1')",
                r#"ParseAddr("::1.2.3.4:5"): unexpected character (at ":5")"#,
            ),
            (
                "ip('fe80::1%') == ip('::1')",
                r#"ParseAddr("fe80::1%"): zone must be a non-empty string"#,
            ),
            (
                "ip('foo') == ip('::1')",
                r#"ParseAddr("foo"): unable to parse IP"#,
            ),
            (
                "ip('fe80::1%eth0') == ip('::1')",
                r#"IP address "fe80::1%eth0" with zone value is not allowed"#,
            ),
            (
                "ip('::ffff:1.2.3.4') == ip('::1')",
                r#"IPv4-mapped IPv6 address "::ffff:1.2.3.4" is not allowed"#,
            ),
            (
                "cidr('foo') == cidr('1.2.3.0/24')",
                r#"network address parse error during conversion from string: network address parse error during conversion from string: netip.ParsePrefix("foo"): no '/'"#,
            ),
            (
                "cidr('1.2.3.4/33') == cidr('1.2.3.0/24')",
                r#"netip.ParsePrefix("1.2.3.4/33"): prefix length out of range"#,
            ),
            (
                "cidr('1.2.3.4/a') == cidr('1.2.3.0/24')",
                r#"netip.ParsePrefix("1.2.3.4/a"): bad bits after slash: "a""#,
            ),
            (
                "cidr('::ffff:1.2.3.4/120') == cidr('1.2.3.0/24')",
                r#"network address parse error during conversion from string: IPv4-mapped IPv6 address "::ffff:1.2.3.4/120" is not allowed"#,
            ),
            (
                "cidr('1.2.3.0/24').containsCIDR('foo')",
                r#"network address parse error during conversion from string: network address parse error during conversion from string: netip.ParsePrefix("foo"): no '/'"#,
            ),
        ] {
            assert_fails_with(expression, want);
        }
        // What Go's parsers accept, the libraries accept (kube-apiserver 1.32.0 says true).
        for expression in [
            "isQuantity('.') && !isQuantity(' 1') && quantity('.') == quantity('0')",
            "quantity('-.5Ki') == quantity('-512') && quantity('e3') != quantity('1000')",
            "isURL('mailto:x') && isURL('http://') && isURL('*') && isURL('/?x')",
            "!isCIDR('1.2.3.4/01') && !isIP('::ffff:1.2.3.4') && !isIP('1.2.3.4%eth0')",
        ] {
            assert_eq!(
                eval(&[("c", expression)]),
                ConditionsResult::Match,
                "{expression}"
            );
        }
    }

    /// The format library validates as `staging/src/k8s.io/apiserver/pkg/cel/library/format.go`
    /// does, with apimachinery's and strfmt's messages (each value as kube-apiserver 1.32.0
    /// gave it for the same expression; `maskTrailingDash` included).
    #[test]
    fn format_library_validates_in_kubernetes_words() {
        let run = |expression: &str| {
            let program = cel_env::compile(expression).unwrap();
            cel_env::with_root_context(|c| program.execute(&c)).unwrap()
        };
        for (expression, want) in [
            ("format.dns1123LabelPrefix().validate('abc-').orValue([]).join(' | ')", ""),
            ("format.dns1035LabelPrefix().validate('abc-').orValue([]).join(' | ')", ""),
            ("format.dns1123SubdomainPrefix().validate('a.b-').orValue([]).join(' | ')", ""),
            ("format.uuid().validate('123e4567-e89b12d3-a456-426614174000').orValue([]).join(' | ')", ""),
            ("format.byte().validate('aGVsbA==').orValue([]).join(' | ')", ""),
            ("format.byte().validate('YQ==').orValue([]).join(' | ')", ""),
            ("format.date().validate('2020-1-01').orValue([]).join(' | ')", "invalid date"),
            ("format.datetime().validate('2020-01-01T10:00:00Z').orValue([]).join(' | ')", ""),
            ("format.datetime().validate('2020-01-01T10:00:00.123+02:00').orValue([]).join(' | ')", ""),
            ("format.datetime().validate('2020-01-01T10:00:00.Z').orValue([]).join(' | ')", "invalid datetime"),
            ("format.qualifiedName().validate('/x').orValue([]).join(' | ')", "prefix part must be non-empty"),
            ("format.labelValue().validate('a_b').orValue([]).join(' | ')", ""),
            (
                "format.dns1123Label().validate('Bad_Name!').orValue([]).join(' | ')",
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            ),
            (
                "format.uri().validate('http://[::1').orValue([]).join(' | ')",
                "parse \"http://[::1\": missing ']' in host",
            ),
        ] {
            assert_eq!(
                run(expression),
                cel::Value::String(std::sync::Arc::new(want.to_string())),
                "{expression}"
            );
        }
    }

    /// `expression`, the one condition, fails on the pod with a message ending in `want`.
    fn assert_fails_with(expression: &str, want: &str) {
        let ConditionsResult::Error(message) = eval(&[("c", expression)]) else {
            panic!("{expression} is an error");
        };
        assert!(message.ends_with(want), "{expression}: {message}");
    }

    /// `has()` of a field of something that is not a map is false in cel-go (`refQualify`
    /// without `errorOnBadPresenceTest`): the guard for `oldObject` on CREATE.
    #[test]
    fn has_on_what_is_not_a_map_is_false() {
        assert_eq!(
            eval(&[(
                "c",
                "!has(oldObject.metadata) && !has(object.metadata.name.x)"
            )]),
            ConditionsResult::Match
        );
    }

    /// Type errors kube-apiserver's checker refuses at create, refused in its words
    /// (`request` is `kubernetes.AdmissionRequest`; checked on kube-apiserver 1.32.0).
    #[test]
    fn type_errors_are_refused_as_cel_go_s_checker_refuses_them() {
        for (expression, want) in [
            ("request.foo1 == 1", "ERROR: <input>:1:8: undefined field 'foo1'\n | request.foo1 == 1\n | .......^"),
            ("1 < 'asdf'", "ERROR: <input>:1:3: found no matching overload for '_<_' applied to '(int, string)'\n | 1 < 'asdf'\n | ..^"),
            ("request.name == null", "ERROR: <input>:1:14: found no matching overload for '_==_' applied to '(string, null)'"),
            ("request.dryRun.x", "ERROR: <input>:1:15: type 'bool' does not support field selection"),
            ("[1,2].all(x, x)", "ERROR: <input>:1:14: expected type 'bool' but found 'int'"),
            ("request.userInfo.extra['a'] == 'b'", "ERROR: <input>:1:29: found no matching overload for '_==_' applied to '(list(string), string)'"),
            ("'abc'.contains(1)", "ERROR: <input>:1:15: found no matching overload for 'contains' applied to 'string.(int)'"),
            ("has(request.foo)", "ERROR: <input>:1:4: undefined field 'foo'"),
            ("request.userInfo.groups.exists(g, g > 1)", "ERROR: <input>:1:37: found no matching overload for '_>_' applied to '(string, int)'"),
            ("(true ? 1 : 'a') == 1", "ERROR: <input>:1:7: found no matching overload for '_?_:_' applied to '(bool, int, string)'"),
            ("[1, 'a'].size() == 2", "ERROR: <input>:1:5: expected type 'int' but found 'string'"),
            ("request.kind == 'Pod'", "ERROR: <input>:1:14: found no matching overload for '_==_' applied to '(kubernetes.GroupVersionKind, string)'"),
            ("[1][0u] == 1", "ERROR: <input>:1:4: found no matching overload for '_[_]' applied to '(list(int), uint)'"),
            ("1 + 1u == 2", "ERROR: <input>:1:3: found no matching overload for '_+_' applied to '(int, uint)'"),
            ("int(true) == 1", "ERROR: <input>:1:4: found no matching overload for 'int' applied to '(bool)'"),
            ("duration('1x') > duration('1s')", "ERROR: <input>:1:10: invalid duration argument\n | duration('1x') > duration('1s')\n | .........^"),
            ("timestamp('x') > timestamp('2020-01-01T00:00:00Z')", "ERROR: <input>:1:11: invalid timestamp argument"),
        ] {
            let err = MatchCondition::compile("c", expression).unwrap_err().to_string();
            assert!(err.starts_with(&format!("compilation failed: {want}")), "{expression}: {err}");
        }
        // What it accepts (dyn objects, cross-type numeric comparison, null objects).
        for expression in [
            "object.spec.replicas > 'x'",
            "request == null",
            "1u < 1",
            "type(object) == timestamp || type(object) == duration",
            "request.userInfo.extra.foo == ['x']",
        ] {
            assert!(
                MatchCondition::compile("c", expression).is_ok(),
                "{expression}"
            );
        }
    }

    /// KEP-3716 user stories: NFS volumes, excluding a group, excluding leases.
    #[test]
    fn kep_examples() {
        assert_eq!(
            eval(&[("nfs", "object.spec.volumes.exists(v, has(v.nfs))")]),
            ConditionsResult::Match
        );
        assert_eq!(
            eval(&[(
                "exclude-kubelet-requests",
                "!('system:nodes' in request.userInfo.groups)"
            )]),
            ConditionsResult::Match
        );
        assert_eq!(
            eval(&[("only-devs", "'admins' in request.userInfo.groups")]),
            ConditionsResult::NoMatch {
                condition: "only-devs".into()
            }
        );
        assert_eq!(
            eval(&[("exclude-leases", "!(request.resource.group == 'coordination.k8s.io' && request.resource.resource == 'leases')")]),
            ConditionsResult::Match
        );
    }

    /// As upstream `Match`: any false wins over errors; errors count only without a false.
    #[test]
    fn any_false_wins_and_errors_aggregate() {
        let err = "object.spec.missing.field == 1";
        assert_eq!(
            eval(&[("e", err), ("f", "false")]),
            ConditionsResult::NoMatch {
                condition: "f".into()
            }
        );
        let ConditionsResult::Error(msg) = eval(&[("e", err), ("t", "true")]) else {
            panic!()
        };
        assert!(
            msg.starts_with("expression 'object.spec.missing.field == 1' resulted in error"),
            "{msg}"
        );
        let ConditionsResult::Error(msg) = eval(&[("e1", err), ("e2", err)]) else {
            panic!()
        };
        assert!(msg.starts_with('[') && msg.ends_with(']'), "{msg}");
    }

    #[test]
    fn request_fields_default_like_the_go_struct() {
        assert_eq!(
            eval(&[(
                "sub",
                "request.subResource == '' && request.name == '' && !request.dryRun"
            )]),
            ConditionsResult::Match
        );
        assert_eq!(
            eval(&[("null-old", "oldObject == null")]),
            ConditionsResult::Match
        );
        assert_eq!(
            eval(&[(
                "optional",
                "object.?metadata.?labels.?app.orValue('') == 'web'"
            )]),
            ConditionsResult::Match
        );
        assert_eq!(
            eval(&[("optional-ns", "optional.of(1).hasValue()")]),
            ConditionsResult::Match
        );
    }

    /// Only the selected top-level fields of `request` are built; any other use gets them all.
    #[test]
    fn request_fields_built_on_demand_keep_results() {
        assert_eq!(
            eval(&[("sel", "request.userInfo.username == 'jane'")]),
            ConditionsResult::Match
        );
        assert_eq!(
            eval(&[(
                "whole",
                "'userInfo' in dyn(request) && 'dryRun' in dyn(request) && 'options' in dyn(request)"
            )]),
            ConditionsResult::Match
        );
        assert_eq!(
            eval(&[(
                "has",
                "has(request.name) && has(request.requestSubResource)"
            )]),
            ConditionsResult::Match
        );
        assert_eq!(
            eval(&[
                ("a", "request.operation == 'CREATE'"),
                ("b", "size(dyn(request)) == 12")
            ]),
            ConditionsResult::Match
        );
    }

    #[test]
    fn compile_errors() {
        for (expr, want) in [
            ("object.", "compilation failed"),
            ("params.x == 1", "undeclared reference"),
            (
                "authorizer.resource('g', 'r', '*').check('v').allowed()",
                "no matching overload",
            ),
            // Lists have `reverse` from 1.34 (cel-go's lists library v3); strings never.
            (
                "'abc'.reverse() == 'cba'",
                "compilation failed: ERROR: <input>:1:14: found no matching overload for 'reverse' applied to 'string.()'\n | 'abc'.reverse() == 'cba'\n | .............^",
            ),
            // Two-variable comprehensions are macros now: their own refusals, in cel-go's words.
            (
                "object.metadata.labels.all(k, k, k != '')",
                "compilation failed: ERROR: <input>:1:31: duplicate variable name: k\n | object.metadata.labels.all(k, k, k != '')\n | ..............................^",
            ),
            (
                "image('nginx').registry() == 'docker.io'",
                "function \"image\"",
            ),
            ("'a'.matches('(')", "invalid matches argument"),
            (
                "'a'.find('[') == ''",
                "program instantiation failed: error parsing regexp: missing closing ]: `[`",
            ),
            (
                "nope.contains('x')",
                "compilation failed: ERROR: <input>:1:1: undeclared reference to 'nope' (in container '')\n | nope.contains('x')\n | ^",
            ),
            // Every undeclared use, in source order, as kube-apiserver 1.32.0 reports them.
            (
                "x == y && sets.foo(z)",
                "compilation failed: ERROR: <input>:1:1: undeclared reference to 'x' (in container '')\n | x == y && sets.foo(z)\n | ^\nERROR: <input>:1:6: undeclared reference to 'y' (in container '')\n | x == y && sets.foo(z)\n | .....^\nERROR: <input>:1:11: undeclared reference to 'sets' (in container '')\n | x == y && sets.foo(z)\n | ..........^\nERROR: <input>:1:19: undeclared reference to 'foo' (in container '')\n | x == y && sets.foo(z)\n | ..................^\nERROR: <input>:1:20: undeclared reference to 'z' (in container '')\n | x == y && sets.foo(z)\n | ...................^",
            ),
            (
                "object.metadata.name == 1 && has(q.y) && object.foo(1)",
                "compilation failed: ERROR: <input>:1:34: undeclared reference to 'q' (in container '')\n | object.metadata.name == 1 && has(q.y) && object.foo(1)\n | .................................^\nERROR: <input>:1:52: undeclared reference to 'foo' (in container '')\n | object.metadata.name == 1 && has(q.y) && object.foo(1)\n | ...................................................^",
            ),
            ("1 + 2", "must evaluate to bool but got int"),
            ("[1].all(i, 1, true)", "argument must be a simple name"),
            ("'string'", "must evaluate to bool but got string"),
            // A `dyn` result is refused too: kube-apiserver 1.32.0 answered `kubectl apply` of
            // a webhook with this matchCondition `webhooks[0].matchConditions[0].expression:
            // Invalid value: "object.metadata.labels.x": must evaluate to bool but got dyn`.
            ("object.metadata.labels.x", "must evaluate to bool but got dyn"),
            ("duration('1s')", "must evaluate to bool but got google.protobuf.Duration"),
        ] {
            let err = MatchCondition::compile("c", expr).unwrap_err().to_string();
            assert!(err.contains(want), "{expr}: {err}");
        }
    }
}
