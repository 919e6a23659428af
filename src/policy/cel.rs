//! A policy's CEL expressions: compiled at load in the environment of each kind of expression
//! (`staging/src/k8s.io/apiserver/pkg/admission/plugin/cel/compile.go` and `composition.go`,
//! declarations as `validateValidatingAdmissionPolicySpec` makes them), and evaluated on one
//! request as `condition.go` `ForInput` and `activation.go` `Evaluate` do: per-expression
//! cost limit `PerCallLimit`, one budget over a list of expressions, composited variables
//! evaluated on first use within one `ForInput` and their cost charged to the expression that
//! needed them.
//!
//! How variables are evaluated here: cel-go resolves `variables.x` lazily, during the
//! expression. The `cel` crate has no lazy values, so the variables an expression references
//! (and those they reference) are evaluated just before it, once per `ForInput`, and bound as
//! a map. A variable that fails is left out of the map; an expression that then fails reports
//! the variable's error, as cel-go does. The one difference: a variable referenced only on a
//! branch that does not run (`false && variables.x`) is still evaluated, so its cost is
//! charged where cel-go would not charge it.

use std::collections::HashMap;
use std::sync::Arc;

use cel::common::ast::Expr as Ast;
use cel::objects::{Key, Map};
use cel::{Context, Value};

use crate::matching::cel_env::Program;

use crate::matching::authz::{self, User};
use crate::matching::cel_env;
use crate::matching::cel_json::{self, JsonVal};
use crate::matching::cel_types::Ty;
use crate::matching::conditions::{self, CompileError, EvaluationError};
use crate::matching::cost::{self, Cancelled};
use crate::review::ParsedReview;

/// `RuntimeCELCostBudget` (`staging/src/k8s.io/apiserver/pkg/apis/cel/config.go`): what one
/// `ForInput` over validations, or over audit annotations, may spend; cel-go cost units.
pub(crate) const RUNTIME_CEL_COST_BUDGET: u64 = 10_000_000;

/// `RuntimeCELCostBudgetMatchConditions`: the same for matchConditions.
pub(crate) const MATCH_CONDITIONS_BUDGET: u64 = cost::WEBHOOK_BUDGET;

/// Why a policy expression does not compile (wrapped in a field error by the caller).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ExpressionError {
    /// The shared CEL checks (syntax, functions, variables, patterns, bool results).
    #[error(transparent)]
    Cel(#[from] CompileError),
    /// `variables.<name>` where no earlier variable has that name (upstream declares each
    /// variable as it compiles it, so later ones are not visible either).
    #[error("compilation failed: undefined field '{0}'")]
    UndefinedVariable(String),
    /// The result is statically of a type the field does not allow: what it must be, what it
    /// is (as cel-go names types).
    #[error("must evaluate to {0} but got {1}")]
    ReturnType(&'static str, String),
}

/// The result type a kind of expression must have (`ReturnTypes` of its accessor).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Returns {
    /// validations, matchConditions.
    Bool,
    /// messageExpression.
    String,
    /// auditAnnotations' valueExpression: string or null.
    StringOrNull,
    /// variables.
    Any,
}

/// Which optional variables an environment declares (`OptionalVariableDeclarations`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Declarations {
    /// `params` (the policy has a paramKind).
    pub(crate) params: bool,
    /// `authorizer` (not in messageExpression).
    pub(crate) authorizer: bool,
    /// `variables` (not in matchConditions, which upstream validates without composition).
    pub(crate) variables: bool,
}

/// One compiled expression.
#[derive(Debug)]
pub(crate) struct Expression {
    /// As written.
    pub(crate) text: String,
    program: Program,
    /// The policy variables it needs, directly or through other variables, by index,
    /// ascending (so each one's own needs come before it).
    needs: Vec<usize>,
    /// The request's variables it reads.
    pub(crate) reads: Reads,
    /// Its type, as a variable of it is declared ([`Ty::declared`]).
    ty: Ty,
}

/// Which of the request's variables a policy's expressions read, so that only those are
/// converted to CEL values for an evaluation (a whole object's conversion is most of a
/// policy's cost).
#[derive(Clone, Debug, Default)]
pub(crate) struct Reads {
    pub(crate) object: bool,
    pub(crate) old_object: bool,
    pub(crate) authorizer: bool,
    /// `namespaceObject`.
    pub(crate) namespace: bool,
    /// `request`: `None` when not read; `Some(None)` read whole; `Some(Some(fields))` only
    /// those top-level fields selected (`request.operation` → `operation`).
    pub(crate) request: Option<Option<Vec<String>>>,
}

impl Reads {
    /// Adds what `other` reads.
    pub(crate) fn add(&mut self, other: &Reads) {
        self.object |= other.object;
        self.old_object |= other.old_object;
        self.authorizer |= other.authorizer;
        self.namespace |= other.namespace;
        self.request = match (self.request.take(), &other.request) {
            (None, theirs) => theirs.clone(),
            (mine, None) => mine,
            (Some(Some(mut mine)), Some(Some(theirs))) => {
                for f in theirs {
                    if !mine.contains(f) {
                        mine.push(f.clone());
                    }
                }
                Some(Some(mine))
            }
            _ => Some(None),
        };
    }

    /// What an expression whose free variables are `free` reads.
    fn of(expr: &Ast, free: &[String]) -> Self {
        let has = |name: &str| free.iter().any(|v| v == name);
        let request = has("request").then(|| {
            let mut fields = Vec::new();
            conditions::request_fields(expr, &mut fields).then_some(fields)
        });
        Reads {
            object: has("object"),
            old_object: has("oldObject"),
            authorizer: has("authorizer"),
            namespace: has("namespaceObject"),
            request,
        }
    }
}

/// Compiles `text`; `variables` are the policy variables compiled so far, in order, and
/// `failed` those before it that did not compile (declared `dyn`, as `CompileAndStoreVariable`
/// declares a variable whatever its result, so that their errors are reported once).
///
/// # Errors
/// [`ExpressionError`], displayed as kube-apiserver words a compile error.
pub(crate) fn compile(
    text: &str,
    declarations: Declarations,
    returns: Returns,
    variables: &[(String, Expression)],
    failed: &[String],
) -> Result<Expression, ExpressionError> {
    let mut declared = vec!["object", "oldObject", "request", "namespaceObject"];
    if declarations.params {
        declared.push("params");
    }
    if declarations.authorizer {
        declared.push("authorizer");
    }
    if declarations.variables {
        declared.push("variables");
    }
    let composition: Vec<(String, Ty)> = variables
        .iter()
        .map(|(name, e)| (name.clone(), e.ty.clone()))
        .chain(failed.iter().map(|name| (name.clone(), Ty::Dyn)))
        .collect();
    let (program, free, ty) = conditions::compile_program(text, &declared, &composition)?;
    check_returns(&ty, returns)?;
    if matches!(returns, Returns::Bool) {
        conditions::check_bool(&program, &ty)?;
    }
    let mut referenced = Vec::new();
    let names = if references(&program.expression().expr, &mut referenced) {
        referenced
    } else {
        // `variables` used other than by field: it may read any of them.
        variables.iter().map(|(n, _)| n.clone()).collect()
    };
    let mut needs = Vec::new();
    for name in names.into_iter().filter(|n| !failed.contains(n)) {
        let index = variables
            .iter()
            .position(|(n, _)| *n == name)
            .ok_or(ExpressionError::UndefinedVariable(name))?;
        needs.extend(variables[index].1.needs.iter().copied());
        needs.push(index);
    }
    needs.sort_unstable();
    needs.dedup();
    Ok(Expression {
        text: text.to_string(),
        needs,
        reads: Reads::of(&program.expression().expr, &free),
        program,
        ty: ty.declared(),
    })
}

/// Refuses a result whose type (the checker's) the field does not allow; `dyn` is accepted,
/// as kube-apiserver's checker accepts it.
fn check_returns(ty: &Ty, returns: Returns) -> Result<(), ExpressionError> {
    let allowed: &[&str] = match returns {
        Returns::String => &["string"],
        Returns::StringOrNull => &["string", "null_type"],
        Returns::Bool | Returns::Any => return Ok(()),
    };
    match ty.result_name() {
        Some(name) if !allowed.contains(&name.as_str()) => {
            let want = if allowed.len() == 1 {
                "string"
            } else {
                "one of [string null_type]"
            };
            Err(ExpressionError::ReturnType(want, name))
        }
        _ => Ok(()),
    }
}

/// Collects the names selected on `variables` (`variables.x`, `has(variables.x)`); false when
/// `variables` appears any other way (then every variable counts, so the walk may stop).
fn references(expr: &Ast, out: &mut Vec<String>) -> bool {
    use cel::common::ast::EntryExpr;
    let all = |list: &mut dyn Iterator<Item = &Ast>, out: &mut Vec<String>| {
        for e in list {
            if !references(e, out) {
                return false;
            }
        }
        true
    };
    match expr {
        Ast::Ident(name) => name != "variables",
        Ast::Select(sel) => match &sel.operand.expr {
            Ast::Ident(name) if name == "variables" => {
                if !out.contains(&sel.field) {
                    out.push(sel.field.clone());
                }
                true
            }
            other => references(other, out),
        },
        Ast::Call(call) => all(
            &mut call
                .target
                .iter()
                .map(|t| &t.expr)
                .chain(call.args.iter().map(|a| &a.expr)),
            out,
        ),
        Ast::List(list) => all(&mut list.elements.iter().map(|e| &e.expr), out),
        Ast::Map(cel::common::ast::MapExpr { entries })
        | Ast::Struct(cel::common::ast::StructExpr { entries, .. }) => all(
            &mut entries.iter().flat_map(|e| match &e.expr {
                EntryExpr::StructField(f) => vec![&f.value.expr],
                EntryExpr::MapEntry(m) => vec![&m.key.expr, &m.value.expr],
            }),
            out,
        ),
        Ast::Comprehension(c) => all(
            &mut [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ]
            .into_iter()
            .map(|e| &e.expr),
            out,
        ),
        Ast::Unspecified | Ast::Literal(_) => true,
    }
}

/// The request's part of every activation, converted once per evaluation: `object`,
/// `oldObject`, `request`, and the authorizer values for the requesting user
/// (`newActivation` in `activation.go`).
pub(crate) struct Inputs<'v> {
    object: JsonVal<'v>,
    old_object: JsonVal<'v>,
    request: JsonVal<'v>,
    authorizer: JsonVal<'v>,
    request_resource: JsonVal<'v>,
}

impl<'v> Inputs<'v> {
    /// Converts `review`'s values (read without serde_json's recursion limit when
    /// `unbounded`, inside `deep_json::read_deep`).
    ///
    /// # Errors
    /// serde_json's, when bounded and an object nests past its limit.
    pub(crate) fn new(
        review: &ParsedReview<'v>,
        unbounded: bool,
        reads: &Reads,
    ) -> serde_json::Result<Self> {
        let request = &review.request;
        let raw = |read: bool, v: Option<&'v serde_json::value::RawValue>| {
            if read {
                cel_json::read_raw(v, unbounded)
            } else {
                Ok(cel_json::null())
            }
        };
        let (authorizer, request_resource) = if reads.authorizer {
            let user: Arc<User> = authz::requesting_user(review);
            (
                authz::authorizer(user.clone()),
                authz::request_resource(user, review),
            )
        } else {
            (Value::Null, Value::Null)
        };
        Ok(Inputs {
            object: raw(reads.object, request.object)?,
            old_object: raw(reads.old_object, request.old_object)?,
            request: match &reads.request {
                None => cel_json::null(),
                Some(fields) => conditions::request_to_cel(review, fields.as_deref(), unbounded)?,
            },
            authorizer: cel_json::from_value(authorizer),
            request_resource: cel_json::from_value(request_resource),
        })
    }
}

/// The evaluation ran the budget out: kube-apiserver's error for it.
#[derive(Debug, thiserror::Error)]
#[error("{}", cost::OUT_OF_BUDGET_ERROR)]
pub(crate) struct OutOfBudget;

/// One expression's result in a `ForInput`: the value, or why it has none; `None` for a
/// placeholder.
pub(crate) type Outcome = Option<Result<Value, ExpressionFailed>>;

/// An expression that gave no value, as kube-apiserver words it (`activation.go`'s
/// `Evaluate`: `expression '<text>' resulted in error: <cause>`). `cause` is cel-go's or a
/// Kubernetes library's message, or the failure of a variable the expression reads
/// ([`VariableFailed`]'s text): users read it verbatim in denials and warnings.
#[derive(Clone, Debug, thiserror::Error)]
#[error("expression '{expression}' resulted in error: {cause}")]
pub(crate) struct ExpressionFailed {
    /// The expression's source text.
    pub(crate) expression: String,
    /// What failed, in upstream's words.
    pub(crate) cause: String,
}

/// A variable that gave no value (`compositionContext`'s
/// `composited variable "<name>" fails to evaluate: <error>`), remembered for every
/// expression that reads it.
#[derive(Clone, Debug, thiserror::Error)]
#[error("composited variable {name:?} fails to evaluate: {cause}")]
struct VariableFailed {
    /// The variable's name.
    name: String,
    /// cel-go's or a library's message.
    cause: String,
}

/// Everything an activation binds but the request: `params`, `namespaceObject`, and the
/// policy's variables.
pub(crate) struct Activation<'a, 'v> {
    pub(crate) inputs: &'a Inputs<'v>,
    /// Bound to every `ForInput` of the activation: built once, each binding a reference
    /// count.
    pub(crate) params: JsonVal<'v>,
    pub(crate) namespace: JsonVal<'v>,
    pub(crate) variables: &'a [(String, Expression)],
}

impl<'v> Activation<'_, 'v> {
    /// `ForInput`: evaluates `expressions` in order (`None`: a placeholder), spending at most
    /// `budget`; `namespaceObject` is null when `with_namespace` is false (matchConditions).
    /// Returns the results and the budget left.
    ///
    /// # Errors
    /// [`OutOfBudget`]: the evaluation as a whole fails.
    pub(crate) fn for_input(
        &self,
        expressions: &[Option<&Expression>],
        with_namespace: bool,
        budget: u64,
    ) -> Result<(Vec<Outcome>, u64), OutOfBudget> {
        cel_env::with_root_context(|context| {
            // The request's values borrow from its body.
            let mut context: Context<'_, 'v> = context;
            self.bind(&mut context, with_namespace);
            let mut composition = Composition {
                values: vec![None; self.variables.len()],
            };
            let mut remaining = budget;
            let mut outcomes = Vec::with_capacity(expressions.len());
            for expression in expressions {
                let Some(expression) = expression else {
                    outcomes.push(None);
                    continue;
                };
                let (outcome, left) =
                    self.evaluate(&mut context, &mut composition, expression, remaining)?;
                remaining = left;
                outcomes.push(Some(outcome));
            }
            Ok((outcomes, remaining))
        })
    }

    /// Binds everything but `variables`.
    fn bind(&self, context: &mut Context<'_, 'v>, with_namespace: bool) {
        let i = self.inputs;
        context.add_variable_as_val("object", i.object.clone_as_boxed());
        context.add_variable_as_val("oldObject", i.old_object.clone_as_boxed());
        context.add_variable_as_val("request", i.request.clone_as_boxed());
        context.add_variable_as_val("params", self.params.clone_as_boxed());
        let namespace = if with_namespace {
            self.namespace.clone_as_boxed()
        } else {
            cel_json::null()
        };
        context.add_variable_as_val("namespaceObject", namespace);
        context.add_variable_as_val("authorizer", i.authorizer.clone_as_boxed());
        context.add_variable_as_val(
            authz::REQUEST_RESOURCE_VARIABLE,
            i.request_resource.clone_as_boxed(),
        );
    }

    /// `Evaluate` (`activation.go`): the variables it needs first (their cost is the
    /// composition's), then the expression under `PerCallLimit`; both charged to `remaining`.
    fn evaluate(
        &self,
        context: &mut Context<'_, 'v>,
        composition: &mut Composition,
        expression: &Expression,
        remaining: u64,
    ) -> Result<(Result<Value, ExpressionFailed>, u64), OutOfBudget> {
        let composition_cost = composition.ensure(context, &expression.needs, self.variables);
        context.add_variable_from_value("variables", composition.map(self.variables));
        authz::next_condition();
        let (result, spent) = run(&expression.program, context);
        let remaining = remaining
            .checked_sub(composition_cost)
            .and_then(|r| r.checked_sub(spent))
            .ok_or(OutOfBudget)?;
        let result = result.map_err(|e| ExpressionFailed {
            expression: expression.text.clone(),
            cause: composition
                .failure(&expression.needs)
                .map_or_else(|| e.to_string(), ToString::to_string),
        });
        Ok((result, remaining))
    }
}

/// Runs `program` under `PerCallLimit`: its result and the cost cel-go would charge.
fn run(program: &Program, context: &Context<'_, '_>) -> (Result<Value, EvaluationError>, u64) {
    match cost::actual_cost(program.expression(), context, cost::PER_CALL_LIMIT) {
        Ok(spent) => (
            program.execute(context).map_err(EvaluationError::from),
            spent,
        ),
        Err(Cancelled(spent)) => (Err(EvaluationError::PerCallLimit), spent),
    }
}

/// The variables evaluated so far in one `ForInput` (`compositionContext`).
struct Composition {
    /// By variable index: the value, or why it has none.
    values: Vec<Option<Result<Value, VariableFailed>>>,
}

impl Composition {
    /// Evaluates the variables in `needs` not evaluated yet, in order; returns their cost.
    fn ensure(
        &mut self,
        context: &mut Context<'_, '_>,
        needs: &[usize],
        variables: &[(String, Expression)],
    ) -> u64 {
        let mut total = 0u64;
        for &index in needs {
            if self.values.get(index).is_none_or(Option::is_some) {
                continue;
            }
            let (name, expression) = &variables[index];
            context.add_variable_from_value("variables", self.map(variables));
            authz::next_condition();
            let (result, spent) = run(&expression.program, context);
            total = total.saturating_add(spent);
            self.values[index] = Some(result.map_err(|e| VariableFailed {
                name: name.clone(),
                cause: e.to_string(),
            }));
        }
        total
    }

    /// The `variables` map: every variable evaluated without error.
    fn map(&self, variables: &[(String, Expression)]) -> Value {
        let map: HashMap<Key, Value> = self
            .values
            .iter()
            .zip(variables)
            .filter_map(|(value, (name, _))| match value {
                Some(Ok(v)) => Some((Key::String(Arc::new(name.clone())), v.clone())),
                _ => None,
            })
            .collect();
        Value::Map(Map { map: Arc::new(map) })
    }

    /// The first failed variable among `needs`: its error.
    fn failure(&self, needs: &[usize]) -> Option<&VariableFailed> {
        needs
            .iter()
            .find_map(|&i| self.values.get(i)?.as_ref()?.as_ref().err())
    }
}
