//! CEL runtime cost of matchConditions (KEP-3716 "Performance"; the limits are in
//! `staging/src/k8s.io/apiserver/pkg/apis/cel/config.go`): what kube-apiserver's CEL interpreter
//! charges an expression, the per-call limit and the per-webhook budget. Depends on the `cel`
//! crate and `cel_env` (function namespaces).
//!
//! The `cel` crate tracks no cost, so this module walks an expression the way cel-go's
//! interpreter steps through it and charges what cel-go's `CostObserver` charges
//! (`interpreter/runtimecost.go`) plus Kubernetes' library costs
//! (`apiserver/pkg/cel/library/cost.go`). The values it needs (operand sizes, which branch of
//! `&&`, `||` and `?:` runs, what a comprehension iterates) come from the `cel` interpreter
//! itself, so the walk never decides a condition's value; it only decides whether kube-apiserver
//! would have cancelled the evaluation.
//!
//! Walking costs a few evaluations' worth of time, so [`fast_path_max_body`] works out at load,
//! from an upper bound of every condition's cost, the largest request body for which no limit
//! can be reached; smaller requests skip the walk.

use std::borrow::Cow;

use cel::common::ast::{operators, EntryExpr, Expr, LiteralValue};
use cel::common::types::{CelBool, CelString, Kind};
use cel::common::value::Val;
use cel::objects::Value;
use cel::parser::Expression;
use cel::Context;

/// `PerCallLimit` (`apiserver/pkg/apis/cel/config.go`): most cost one expression may spend.
pub(crate) const PER_CALL_LIMIT: u64 = 1_000_000;

/// `RuntimeCELCostBudgetMatchConditions` (`config.go`): most cost all conditions of one webhook
/// may spend on one request.
pub(crate) const WEBHOOK_BUDGET: u64 = 2_500_000;

/// cel-go's error for an expression cancelled at [`PER_CALL_LIMIT`]; a per-condition error.
pub(crate) const PER_CALL_LIMIT_ERROR: &str = "operation cancelled: actual cost limit exceeded";

/// kube-apiserver's error when [`WEBHOOK_BUDGET`] runs out (`cel/activation.go` `Evaluate`); it
/// fails the evaluator as a whole.
pub(crate) const OUT_OF_BUDGET_ERROR: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

/// cel-go `common.StringTraversalCostFactor`: a string costs one unit per 10 characters.
const STRING_TRAVERSAL: f64 = 0.1;
/// cel-go `common.RegexStringLengthCostFactor`.
const REGEX_LENGTH: f64 = 0.25;
/// cel-go `common.ListCreateBaseCost`, `MapCreateBaseCost`, `StructCreateBaseCost`.
const LIST_CREATE: u64 = 10;
const MAP_CREATE: u64 = 30;
const STRUCT_CREATE: u64 = 40;

/// The evaluation went over its limit; carries the cost charged so far (more than the limit),
/// which kube-apiserver still subtracts from the webhook's budget.
#[derive(Debug, PartialEq)]
pub(crate) struct Cancelled(pub u64);

struct Tracker {
    cost: u64,
    limit: u64,
}

impl Tracker {
    /// Adds `units`; cel-go checks the limit after every step, so this does too.
    fn charge(&mut self, units: u64) -> Result<(), Cancelled> {
        self.cost = self.cost.saturating_add(units);
        if self.cost > self.limit {
            Err(Cancelled(self.cost))
        } else {
            Ok(())
        }
    }
}

/// The cost cel-go charges for evaluating `expr` in `context`.
///
/// # Errors
/// [`Cancelled`] as soon as the cost exceeds `limit` (cel-go stops there too).
pub(crate) fn actual_cost(
    expr: &Expression,
    context: &Context<'_, '_>,
    limit: u64,
) -> Result<u64, Cancelled> {
    let mut tracker = Tracker { cost: 0, limit };
    walk(expr, context, &mut tracker)?;
    Ok(tracker.cost)
}

/// `actualSize` (runtimecost.go): a string's characters, a bytes' length, a list's or map's
/// entries; 1 for anything else.
fn size_of(value: &dyn Val) -> u64 {
    value
        .as_sizer()
        .map_or(1, |s| u64::try_from(s.size().into_inner()).unwrap_or(0))
}

fn is_string_or_bytes(value: &dyn Val) -> bool {
    matches!(value.get_type().kind(), Kind::String | Kind::Bytes)
}

/// `traversalCost` (library/cost.go): strings by bytes/10 rounded down, containers summed.
fn traversal_cost(value: &dyn Val) -> u64 {
    match value.get_type().kind() {
        Kind::String => value
            .downcast_ref::<CelString>()
            .map_or(1, |s| (s.inner().len() as f64 * STRING_TRAVERSAL) as u64),
        Kind::Bytes => (size_of(value) as f64 * STRING_TRAVERSAL) as u64,
        Kind::List => value.as_iterable().map_or(1, |list| {
            let mut items = list.iter();
            let mut cost = 0u64;
            while let Some(item) = items.next() {
                cost = cost.saturating_add(traversal_cost(item));
            }
            cost
        }),
        Kind::Map => match (value.as_iterable(), value.as_indexer()) {
            (Some(keys), Some(indexer)) => {
                let mut keys = keys.iter();
                let mut cost = 0u64;
                while let Some(key) = keys.next() {
                    let entry = indexer.get(key).map_or(1, |v| traversal_cost(v.as_ref()));
                    cost = cost
                        .saturating_add(traversal_cost(key))
                        .saturating_add(entry);
                }
                cost
            }
            _ => 1,
        },
        _ => 1,
    }
}

fn ceil_factor(size: u64, factor: f64) -> u64 {
    (size as f64 * factor).ceil() as u64
}

/// Operand facts a call's cost depends on: sizes (`actualSize`), and whether an operand is a
/// string or bytes (to tell overloads apart, as cel-go does by overload id).
#[derive(Clone, Copy)]
struct Operand {
    size: u64,
    text: bool,
    list: bool,
}

/// The functions whose cost depends on operand values; every other call costs what
/// [`call_cost`] charges without them (1, or a fixed cost such as `check`'s).
fn needs_operands(function: &str) -> bool {
    matches!(
        function,
        operators::EQUALS
            | operators::NOT_EQUALS
            | operators::LESS
            | operators::LESS_EQUALS
            | operators::GREATER
            | operators::GREATER_EQUALS
            | operators::ADD
            | operators::IN
            | "startsWith"
            | "endsWith"
            | "isSorted"
            | "sum"
            | "max"
            | "min"
            | "indexOf"
            | "lastIndexOf"
            | "includes"
            | "contains"
            | "matches"
            | "bytes"
            | "string"
            | "url"
            | "lowerAscii"
            | "upperAscii"
            | "substring"
            | "trim"
            | "replace"
            | "split"
            | "join"
            | "find"
            | "findAll"
            | "cidr"
            | "isIP"
            | "isCIDR"
            | "ip"
            | "ip.isCanonical"
            | "containsIP"
            | "containsCIDR"
            | "quantity"
            | "isQuantity"
            | "fieldSelector"
            | "labelSelector"
    )
}

/// `selectorCostEstimate` (library/cost.go) for a selector of `length` characters: a list of
/// requirements, the string parsed, and a struct and a values list per requirement (at most one
/// per two characters).
fn selector_cost(length: u64) -> u64 {
    LIST_CREATE
        + ceil_factor(length, STRING_TRAVERSAL)
        + ceil_factor(length, 0.5) * (LIST_CREATE + STRUCT_CREATE)
}

/// How kube-apiserver charges calls into the Kubernetes CEL libraries at run time.
///
/// `StrictCostOpt` (`staging/src/k8s.io/apiserver/pkg/cel/environment/base.go`) adds
/// `cel.CostTracking(&library.CostEstimator{})` to a webhook's CEL environment when
/// `StrictCostEnforcementForWebhooks` is on: beta and off by default in 1.30 and 1.31, GA and
/// locked on from 1.32 (`pkg/features/versioned_kube_features.go`). Without it, cel-go's
/// `CostTracker.costCall` prices the calls by its own table, where a library function costs 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CostModel {
    /// `library.CostEstimator` consulted first: `check` 350,000, strings by their length, ...
    #[default]
    Strict,
    /// cel-go's own costs only (kube-apiserver before 1.32, by default).
    Unstrict,
}

impl CostModel {
    /// The default of kube-apiserver `version`: strict from 1.32, and when the version is not
    /// known (the current releases').
    ///
    /// ```
    /// use admission_proxy::kube_version::KubeVersion;
    /// use admission_proxy::matching::CostModel;
    ///
    /// let at = |v: &str| CostModel::of_kube_version(Some(v.parse::<KubeVersion>().unwrap()));
    /// assert_eq!(at("1.31"), CostModel::Unstrict);
    /// assert_eq!(at("1.32"), CostModel::Strict);
    /// assert_eq!(CostModel::of_kube_version(None), CostModel::Strict);
    /// ```
    pub fn of_kube_version(version: Option<crate::kube_version::KubeVersion>) -> Self {
        match version {
            Some(v) if v < crate::kube_version::STRICT_COST_ENFORCEMENT => CostModel::Unstrict,
            _ => CostModel::Strict,
        }
    }

    /// Runs `f` (an evaluation: a dispatcher's conditions phase, `explain`) with every cost
    /// it charges priced by `self`; [`CostModel::Strict`] outside. As `authz::with_decisions`,
    /// a setting of one synchronous evaluation rather than a parameter of every evaluation
    /// function.
    pub fn apply<R>(self, f: impl FnOnce() -> R) -> R {
        struct Restore(CostModel);
        impl Drop for Restore {
            fn drop(&mut self) {
                MODEL.with(|m| m.set(self.0));
            }
        }
        let _restore = Restore(MODEL.with(|m| m.replace(self)));
        f()
    }
}

thread_local! {
    /// The model [`CostModel::apply`] set for the evaluation running on this thread.
    static MODEL: std::cell::Cell<CostModel> = const { std::cell::Cell::new(CostModel::Strict) };
}

/// cel-go `CostTracker.costCall`, with Kubernetes' `CostEstimator.CallCost` consulted first
/// under [`CostModel::Strict`]. `operands` lists the target first for member calls, as
/// cel-go's argument list does; `traversal` is `traversalCost` of the first operand and
/// `result` the result's size, for the few functions that charge by them.
fn call_cost(function: &str, operands: &[Operand], traversal: u64, result: u64) -> u64 {
    let library = match MODEL.with(std::cell::Cell::get) {
        CostModel::Strict => library_call_cost(function, operands, traversal, result),
        CostModel::Unstrict => None,
    };
    library.unwrap_or_else(|| runtime_call_cost(function, operands))
}

/// The most [`call_cost`] charges under either model: for the load-time bound.
fn call_cost_bound(function: &str, operands: &[Operand], traversal: u64, result: u64) -> u64 {
    library_call_cost(function, operands, traversal, result)
        .map_or_else(|| runtime_call_cost(function, operands), |c| c.max(1))
}

/// `CostEstimator.CallCost` (library/cost.go): the Kubernetes libraries' prices, `None` for a
/// function it leaves to cel-go.
fn library_call_cost(
    function: &str,
    operands: &[Operand],
    traversal: u64,
    result: u64,
) -> Option<u64> {
    let size = |i: usize| operands.get(i).map_or(1, |o| o.size);
    let text = |i: usize| operands.get(i).is_some_and(|o| o.text);
    let regex = || ceil_factor(1 + size(0), STRING_TRAVERSAL) * ceil_factor(size(1), REGEX_LENGTH);
    Some(match function {
        "isSorted" | "sum" | "max" | "min" | "indexOf" | "lastIndexOf" | "includes" => traversal,
        "url" | "lowerAscii" | "upperAscii" | "substring" | "trim" | "cidr" | "isIP" | "isCIDR"
        | "quantity" | "isQuantity" => ceil_factor(size(0), STRING_TRAVERSAL),
        "replace" | "split" | "ip.isCanonical" => {
            (size(0) as f64 * 2.0 * STRING_TRAVERSAL).ceil() as u64
        }
        "join" => (result as f64 * 2.0 * STRING_TRAVERSAL).ceil() as u64,
        "find" | "findAll" => regex(),
        "check" => super::authz::CHECK_COST,
        // The receiver is the ResourceCheck; the selector is the argument.
        "fieldSelector" | "labelSelector" => selector_cost(size(1)),
        // `ip(string)` parses; `cidr.ip()` reads a field.
        "ip" if text(0) => ceil_factor(size(0), STRING_TRAVERSAL),
        // The CIDR operand is no Sizer (size 1); a string operand is parsed first.
        "containsIP" | "containsCIDR" => {
            let base = ceil_factor(2, STRING_TRAVERSAL);
            let mask = if function == "containsCIDR" {
                ceil_factor(1, STRING_TRAVERSAL) + 1
            } else {
                0
            };
            let parse = if text(1) {
                ceil_factor(size(1), STRING_TRAVERSAL)
            } else {
                0
            };
            base + mask + parse
        }
        _ => return None,
    })
}

/// cel-go's own prices (`interpreter/runtimecost.go` `costCall`): 1 for a call it has no
/// formula for.
fn runtime_call_cost(function: &str, operands: &[Operand]) -> u64 {
    let size = |i: usize| operands.get(i).map_or(1, |o| o.size);
    let text = |i: usize| operands.get(i).is_some_and(|o| o.text);
    let regex = || ceil_factor(1 + size(0), STRING_TRAVERSAL) * ceil_factor(size(1), REGEX_LENGTH);
    match function {
        "startsWith" | "endsWith" if text(0) => ceil_factor(size(0), STRING_TRAVERSAL),
        "bytes" | "string" if text(0) => ceil_factor(size(0), STRING_TRAVERSAL),
        // InList charges the list's size; `in` on a map is O(1).
        operators::IN if operands.get(1).is_some_and(|o| o.list) => size(1),
        operators::EQUALS
        | operators::NOT_EQUALS
        | operators::LESS
        | operators::LESS_EQUALS
        | operators::GREATER
        | operators::GREATER_EQUALS => ceil_factor(size(0).min(size(1)), STRING_TRAVERSAL),
        operators::ADD if text(0) && text(1) => {
            ceil_factor(size(0).saturating_add(size(1)), STRING_TRAVERSAL)
        }
        "matches" => regex(),
        "contains" if text(0) && text(1) => {
            ceil_factor(size(0), STRING_TRAVERSAL) * ceil_factor(size(1), STRING_TRAVERSAL)
        }
        _ => 1,
    }
}

/// The function a call names, namespaced ones qualified (`ip.isCanonical`), and whether its
/// target is a namespace rather than a receiver value.
fn function_name(call: &cel::common::ast::CallExpr) -> (Cow<'_, str>, bool) {
    match call.target.as_deref().map(|t| &t.expr) {
        Some(Expr::Ident(ns)) if super::cel_names::is_namespace(ns) => {
            (Cow::Owned(format!("{ns}.{}", call.func_name)), true)
        }
        _ => (Cow::Borrowed(call.func_name.as_str()), false),
    }
}

/// Evaluates `expr` with the `cel` interpreter; `None` on an error (the walk then stops charging
/// what would not run).
fn value_of<'e, 'v>(
    expr: &'e Expression,
    context: &'e Context<'_, 'v>,
) -> Option<cel::common::value::CowVal<'e, 'v>> {
    Value::resolve_val(expr, context).ok()
}

fn as_bool(expr: &Expression, context: &Context<'_, '_>) -> Option<bool> {
    value_of(expr, context).and_then(|v| v.downcast_ref::<CelBool>().map(|b| *b.inner()))
}

/// Charges `expr` as cel-go's `CostObserver` would, step by step.
///
/// Over 80 lines: one match over every kind of expression, each arm the charge cel-go makes.
fn walk(expr: &Expression, context: &Context<'_, '_>, t: &mut Tracker) -> Result<(), Cancelled> {
    match &expr.expr {
        // ConstCost.
        Expr::Literal(_) | Expr::Unspecified => Ok(()),
        // SelectAndIdentCost. A `has()` test charges its operand only (cel-go
        // `TestRuntimeCost` "select: non-proto field test": `has(input.testAttr.nestedAttr)` is 2).
        Expr::Ident(_) => t.charge(1),
        Expr::Select(select) if select.test => walk(&select.operand, context, t),
        // One variable whose name has a dot (cel-go's checker resolves it so).
        Expr::Select(select) if super::authz::is_request_resource(select) => t.charge(1),
        Expr::Select(select) => {
            walk(&select.operand, context, t)?;
            t.charge(1)
        }
        Expr::List(list) => {
            for element in &list.elements {
                walk(element, context, t)?;
            }
            t.charge(LIST_CREATE)
        }
        Expr::Map(map) => {
            walk_entries(&map.entries, context, t)?;
            t.charge(MAP_CREATE)
        }
        Expr::Struct(s) => {
            walk_entries(&s.entries, context, t)?;
            t.charge(STRUCT_CREATE)
        }
        Expr::Call(call) => walk_call(expr, call, context, t),
        Expr::Comprehension(c) => {
            // The fold itself is free; its parts are charged each time they run.
            walk(&c.iter_range, context, t)?;
            let Some(range) = value_of(&c.iter_range, context) else {
                return Ok(());
            };
            walk(&c.accu_init, context, t)?;
            let Some(init) = value_of(&c.accu_init, context) else {
                return Ok(());
            };
            // `map` and `filter` only append to their accumulator, and nothing but the step
            // reads it, charging 1 for it whatever it holds: it is not built here, so the walk
            // stays linear in the range (building it, `@result + [x]` copies the list at every
            // element).
            let appends = appends_only(c);
            let mut scope = context.new_inner_scope();
            scope.add_variable_as_val(&c.accu_var, init.into_owned());
            let Some(iterable) = range.as_iterable() else {
                return Ok(());
            };
            let mut items = iterable.iter();
            // A two-variable comprehension binds the index and element of a list, the key and
            // value of a map (as the interpreter does).
            let is_map = range.get_type().kind() == cel::common::types::Kind::Map;
            let mut index: i64 = 0;
            while let Some(item) = items.next() {
                walk(&c.loop_cond, &scope, t)?;
                if as_bool(&c.loop_cond, &scope) == Some(false) {
                    break;
                }
                match &c.iter_var2 {
                    Some(second) if is_map => {
                        let Some(value) = range
                            .as_indexer()
                            .and_then(|m| m.get(item).ok())
                            .map(cel::common::value::CowVal::into_owned)
                        else {
                            return Ok(());
                        };
                        scope.add_variable_as_val(&c.iter_var, item.clone_as_boxed());
                        scope.add_variable_as_val(second, value);
                    }
                    Some(second) => {
                        scope.add_variable_as_val(
                            &c.iter_var,
                            Box::new(cel::common::types::CelInt::from(index)),
                        );
                        scope.add_variable_as_val(second, item.clone_as_boxed());
                        index += 1;
                    }
                    None => scope.add_variable_as_val(&c.iter_var, item.clone_as_boxed()),
                }
                walk(&c.loop_step, &scope, t)?;
                if appends {
                    continue;
                }
                // An erroring step leaves the accumulator as it was: the `cel` crate defers
                // step errors the same way (DeferredErrors).
                if let Some(next) =
                    value_of(&c.loop_step, &scope).map(cel::common::value::CowVal::into_owned)
                {
                    scope.add_variable_as_val(&c.accu_var, next);
                }
            }
            walk(&c.result, &scope, t)
        }
    }
}

/// Whether `c` is a `map` or `filter` expansion: it starts from an empty list, its loop
/// condition is a constant, its step is `@result + [e]` or `g ? @result + [e] : @result`, and
/// its result is `@result` (the shapes the `cel` crate builds in place, `AppendStep`, as
/// cel-go's `folder` does with a mutable list). Such a step charges the same whatever the
/// accumulator holds: 1 for `@result`, the list literal, and 1 for `+` on lists.
fn appends_only(c: &cel::common::ast::ComprehensionExpr) -> bool {
    let is_accu = |e: &Expression| matches!(&e.expr, Expr::Ident(name) if *name == c.accu_var);
    let appends = |e: &Expression| match &e.expr {
        Expr::Call(call) if call.func_name == operators::ADD && call.target.is_none() => {
            matches!(call.args.as_slice(), [lhs, rhs] if is_accu(lhs) && matches!(rhs.expr, Expr::List(_)))
        }
        _ => false,
    };
    let empty_init = matches!(&c.accu_init.expr, Expr::List(l) if l.elements.is_empty());
    let step = match &c.loop_step.expr {
        Expr::Call(call) if call.func_name == operators::CONDITIONAL && call.target.is_none() => {
            matches!(call.args.as_slice(), [_, step, otherwise] if appends(step) && is_accu(otherwise))
        }
        _ => appends(&c.loop_step),
    };
    empty_init && step && is_accu(&c.result) && matches!(c.loop_cond.expr, Expr::Literal(_))
}

/// An identifier with selects on it: cel-go plans it as one attribute.
fn attribute_selects(expr: &Expression) -> Option<u64> {
    match &expr.expr {
        Expr::Ident(_) => Some(0),
        Expr::Select(s) if !s.test => attribute_selects(&s.operand).map(|n| n + 1),
        _ => None,
    }
}

/// Charges an operand cel-go resolves as an attribute instead of evaluating it (a ternary's
/// branch, an index): the identifier is free, its selects are not ("ternary eval": 6).
fn walk_resolved(
    expr: &Expression,
    context: &Context<'_, '_>,
    t: &mut Tracker,
) -> Result<(), Cancelled> {
    match attribute_selects(expr) {
        Some(selects) => t.charge(selects),
        None => walk(expr, context, t),
    }
}

fn walk_entries(
    entries: &[cel::common::ast::IdedEntryExpr],
    context: &Context<'_, '_>,
    t: &mut Tracker,
) -> Result<(), Cancelled> {
    for entry in entries {
        match &entry.expr {
            EntryExpr::StructField(f) => walk(&f.value, context, t)?,
            EntryExpr::MapEntry(m) => {
                walk(&m.key, context, t)?;
                walk(&m.value, context, t)?;
            }
        }
    }
    Ok(())
}

/// A call's charge: its arguments', then its own, as cel-go's `CostObserver` charges each
/// function.
///
/// Over 80 lines: one match over the functions cel-go charges by their arguments' sizes.
fn walk_call(
    expr: &Expression,
    call: &cel::common::ast::CallExpr,
    context: &Context<'_, '_>,
    t: &mut Tracker,
) -> Result<(), Cancelled> {
    let args = &call.args;
    match (call.func_name.as_str(), args.len()) {
        // Ternary, `&&` and `||` cost nothing themselves; only the operands that run count.
        (operators::CONDITIONAL, 3) => {
            walk(&args[0], context, t)?;
            match as_bool(&args[0], context) {
                Some(true) => walk_resolved(&args[1], context, t),
                Some(false) => walk_resolved(&args[2], context, t),
                None => Ok(()),
            }
        }
        // An index is a qualifier of its operand (1); an attribute index is resolved, not
        // evaluated ("comprehension over map": `input[k]` charges nothing for `k`).
        (operators::INDEX | operators::OPT_INDEX, 2) => {
            walk(&args[0], context, t)?;
            walk_resolved(&args[1], context, t)?;
            t.charge(1)
        }
        (operators::LOGICAL_AND | operators::LOGICAL_OR, 2) => {
            walk(&args[0], context, t)?;
            let short = call.func_name == operators::LOGICAL_OR;
            if as_bool(&args[0], context) == Some(short) {
                return Ok(());
            }
            walk(&args[1], context, t)
        }
        // `a.?b` is a qualifier, like a select.
        (operators::OPT_SELECT, 2) => {
            walk(&args[0], context, t)?;
            t.charge(1)
        }
        _ => {
            let (function, namespaced) = function_name(call);
            let receiver = call.target.as_deref().filter(|_| !namespaced);
            for operand in receiver.into_iter().chain(args) {
                walk(operand, context, t)?;
            }
            if !needs_operands(&function) {
                // Fixed costs (`check`'s 350000, 1 for most) need no operand values.
                return t.charge(call_cost(&function, &[], 1, 1));
            }
            let values: Vec<_> = receiver
                .into_iter()
                .chain(args)
                .map(|e| value_of(e, context))
                .collect();
            let operands: Vec<Operand> = values
                .iter()
                .map(|v| {
                    v.as_ref().map_or(
                        Operand {
                            size: 1,
                            text: false,
                            list: false,
                        },
                        |v| Operand {
                            size: size_of(v.as_ref()),
                            text: is_string_or_bytes(v.as_ref()),
                            list: v.get_type().kind() == Kind::List,
                        },
                    )
                })
                .collect();
            let traversal = values
                .first()
                .and_then(Option::as_ref)
                .map_or(1, |v| traversal_cost(v.as_ref()));
            let result = if function == "join" {
                value_of(expr, context).map_or(1, |v| size_of(v.as_ref()))
            } else {
                1
            };
            t.charge(call_cost(&function, &operands, traversal, result))
        }
    }
}

/// An upper bound of the cost of `expr` when no string, list or map taken from the request is
/// larger than `max_size` (a request body of `max_size` bytes holds none larger), and of the
/// size of its result; `u64::MAX` when unbounded (comprehensions).
fn bound(expr: &Expression, max_size: u64) -> (u64, u64) {
    const UNBOUNDED: (u64, u64) = (u64::MAX, u64::MAX);
    let n = max_size;
    match &expr.expr {
        Expr::Literal(LiteralValue::String(s)) => (0, s.chars().count() as u64),
        Expr::Literal(LiteralValue::Bytes(b)) => (0, b.len() as u64),
        Expr::Literal(_) | Expr::Unspecified => (0, 1),
        Expr::Ident(_) => (1, n),
        Expr::Select(s) => {
            let (cost, size) = bound(&s.operand, n);
            (cost.saturating_add(1), size.max(n))
        }
        Expr::List(list) => {
            let cost = list
                .elements
                .iter()
                .fold(LIST_CREATE, |c, e| c.saturating_add(bound(e, n).0));
            (cost, list.elements.len() as u64)
        }
        Expr::Map(_) | Expr::Struct(_) | Expr::Comprehension(_) => UNBOUNDED,
        Expr::Call(call) => {
            let (function, namespaced) = function_name(call);
            let receiver = call.target.as_deref().filter(|_| !namespaced);
            let parts: Vec<(u64, u64)> = receiver
                .into_iter()
                .chain(&call.args)
                .map(|e| bound(e, n))
                .collect();
            let cost = parts.iter().fold(0u64, |c, p| c.saturating_add(p.0));
            let sizes = parts.iter().fold(0u64, |s, p| s.saturating_add(p.1));
            // Operands are taken as text of their largest size: every formula grows with size.
            let operands: Vec<Operand> = parts
                .iter()
                .map(|&(_, size)| Operand {
                    size,
                    text: true,
                    list: true,
                })
                .collect();
            let own = match &*function {
                operators::CONDITIONAL | operators::LOGICAL_AND | operators::LOGICAL_OR => 0,
                operators::OPT_SELECT => 1,
                // A traversal costs at most one unit per byte of what is traversed.
                _ => call_cost_bound(&function, &operands, sizes.max(n), u64::MAX),
            };
            let size = match &*function {
                // Results that may outgrow their operands.
                "replace" | "join" | "format" | "quote" | "strings.quote" => u64::MAX,
                // Concatenation; anything else is no larger than its operands or the request
                // (with room for a number or a timestamp printed as a string).
                operators::ADD => sizes,
                _ => n.max(sizes.saturating_mul(4).saturating_add(32)),
            };
            (cost.saturating_add(own), size)
        }
    }
}

/// The largest request body, in bytes, for which `expressions` together can reach neither
/// [`PER_CALL_LIMIT`] nor [`WEBHOOK_BUDGET`]; requests no larger need no cost tracking. `None`
/// when even an empty body could (comprehensions, or expressions too costly by themselves).
pub(crate) fn fast_path_max_body<'a>(
    expressions: impl Iterator<Item = &'a Expression> + Clone,
) -> Option<u64> {
    let fits = |n: u64| {
        let mut total = 0u64;
        for expr in expressions.clone() {
            let (cost, _) = bound(expr, n);
            if cost > PER_CALL_LIMIT {
                return false;
            }
            total = total.saturating_add(cost);
        }
        total <= WEBHOOK_BUDGET
    };
    if !fits(0) {
        return None;
    }
    // Bounds grow with the size: find the largest fitting size by bisection (at most 33 steps).
    let (mut low, mut high) = (0u64, 1u64 << 32);
    if fits(high) {
        return Some(high);
    }
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if fits(mid) {
            low = mid;
        } else {
            high = mid;
        }
    }
    Some(low)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cost of `expression` with `object` bound to `object`, as kube-apiserver charges it.
    fn cost(expression: &str, object: serde_json::Value) -> Result<u64, Cancelled> {
        let object = super::super::conditions::json_to_cel(&object);
        cost_with(expression, vec![("object", object)], PER_CALL_LIMIT)
    }

    fn object() -> serde_json::Value {
        serde_json::json!({"metadata": {"name": "web-0123456789", "labels": {"app": "web"}},
            "spec": {"containers": [{"image": "a"}, {"image": "b"}, {"image": "c"}]}})
    }

    #[test]
    fn charges_as_cel_go_runtimecost() {
        let cases: &[(&str, u64)] = &[
            // Constants are free; identifiers and selects cost 1 each.
            ("true", 0),
            ("object.metadata.name", 3),
            ("has(object.metadata.labels)", 2),
            // `==` on strings: ceil(min size × 0.1); on ints: 1.
            ("object.metadata.name == 'web'", 4),
            ("object.metadata.name == 'web-0123456789'", 5),
            ("1 == 1", 1),
            // `&&` and `||` are free and short-circuit.
            ("false && object.metadata.name == 'x'", 0),
            ("true || object.metadata.name == 'x'", 0),
            // startsWith: ceil(receiver × 0.1); matches: ceil((1+len) × 0.1) × ceil(regex × 0.25).
            ("object.metadata.name.startsWith('web')", 3 + 2),
            ("object.metadata.name.matches('^web-[0-9]+$')", 3 + 2 * 3),
            // List creation 10; `in` on a list charges its size.
            ("'a' in ['a', 'b']", 10 + 2),
            ("'app' in object.metadata.labels", 3 + 1),
            // all(): range 3; per element the condition (@result, @not_strictly_false) 2 and
            // the step (@result, c, select, ==) 4; the third condition finds `false` and stops
            // the loop; result 1.
            (
                "object.spec.containers.all(c, c.image == 'a')",
                3 + 2 * (2 + 4) + 2 + 1,
            ),
        ];
        for (expression, want) in cases {
            assert_eq!(cost(expression, object()), Ok(*want), "{expression}");
        }
    }

    /// Before 1.32 (`StrictCostEnforcementForWebhooks` off) a Kubernetes library call costs
    /// cel-go's default 1; cel-go's own formulas (`matches`, `startsWith`) stay.
    #[test]
    fn library_calls_cost_one_without_strict_cost_enforcement() {
        let cases: &[(&str, u64, u64)] = &[
            // url: ceil(len × 0.1) = 3 strict; 1 otherwise.
            ("url('https://example.com/x') != null", 3 + 1, 1 + 1),
            // lowerAscii on a 14-character name: select 3 plus ceil(1.4) = 2.
            (
                "object.metadata.name.lowerAscii() == 'x'",
                3 + 2 + 1,
                3 + 1 + 1,
            ),
            // isSorted: the list's traversal (three strings of one character, 0 each: what
            // `traversalCost` gives; it was charged 1 before its operand was read) vs 1.
            ("['a', 'b', 'c'].isSorted()", 10, 10 + 1),
            ("['abcdefghijkl', 'b'].isSorted()", 10 + 1, 10 + 1),
            // cel-go's own prices are the same under both.
            ("object.metadata.name.startsWith('web')", 5, 5),
            ("object.metadata.name.matches('^web-[0-9]+$')", 9, 9),
        ];
        for (expression, strict, unstrict) in cases {
            assert_eq!(cost(expression, object()), Ok(*strict), "{expression}");
            let under = CostModel::Unstrict.apply(|| cost(expression, object()));
            assert_eq!(under, Ok(*unstrict), "{expression} without strict cost");
        }
        // apply restores the model it found.
        assert_eq!(
            cost("url('https://example.com/x') != null", object()),
            Ok(4)
        );
    }

    /// The cost of `expression` with `variables` bound, under `limit`.
    fn cost_with(
        expression: &str,
        variables: Vec<(&str, Value)>,
        limit: u64,
    ) -> Result<u64, Cancelled> {
        let program = crate::matching::cel_env::compile(expression).unwrap();
        crate::matching::cel_env::with_root_context(|mut context| {
            for (name, value) in variables {
                context.add_variable_from_value(name, value);
            }
            actual_cost(program.expression(), &context, limit)
        })
    }

    type Bindings = Vec<(&'static str, Value)>;

    /// cel-go `interpreter/runtimecost_test.go` `TestRuntimeCost`: every case without protobuf
    /// messages, with its expected cost.
    #[test]
    fn reproduces_cel_go_test_runtime_cost() {
        use super::super::conditions::json_to_cel;
        let s500 = Value::String("ab".repeat(250).into());
        let b500 = Value::Bytes(vec![b'a'; 500].into());
        let json = |v: serde_json::Value| json_to_cel(&v);
        let one = json(serde_json::json!([{}]));
        let cases: Vec<(&str, Bindings, u64)> = vec![
            ("\"Hello World!\"", vec![], 0),
            ("input", vec![("input", json(serde_json::json!([1, 2])))], 1),
            (
                "input['key']",
                vec![("input", json(serde_json::json!({"key": "v"})))],
                2,
            ),
            (
                "input[0]",
                vec![("input", json(serde_json::json!(["v"])))],
                2,
            ),
            (
                "input['ke' + 'y']",
                vec![("input", json(serde_json::json!({"key": "v"})))],
                3,
            ),
            (
                "input[3-3]",
                vec![("input", json(serde_json::json!(["v"])))],
                3,
            ),
            (
                "has(input.testAttr.nestedAttr)",
                vec![(
                    "input",
                    json(serde_json::json!({"testAttr": {"nestedAttr": "0"}})),
                )],
                2,
            ),
            ("[1, 2, 3]", vec![], 10),
            ("{\"a\": 1, \"b\": 2, \"c\": 3}", vec![], 30),
            (
                "input.all(x, true)",
                vec![("input", json(serde_json::json!([])))],
                2,
            ),
            (
                "input.all(x, x.all(y, true))",
                vec![("input", json(serde_json::json!([])))],
                2,
            ),
            ("[1, 2, 3].all(x, true)", vec![], 20),
            ("input.matches('[0-9]')", vec![("input", s500.clone())], 103),
            ("'123'.matches('[0-9]')", vec![], 2),
            ("false || false", vec![], 0),
            ("true || false", vec![], 0),
            (
                "a || b || c || d",
                ["a", "b", "c", "d"]
                    .map(|n| (n, Value::Bool(false)))
                    .to_vec(),
                4,
            ),
            ("true && false", vec![], 0),
            ("false && true", vec![], 0),
            (
                "a && b && c && d",
                ["a", "b", "c", "d"]
                    .map(|n| (n, Value::Bool(true)))
                    .to_vec(),
                4,
            ),
            ("1 < 2", vec![], 1),
            ("1 <= 2", vec![], 1),
            ("1 == 2", vec![], 1),
            ("2 > 1", vec![], 1),
            ("2 >= 1", vec![], 1),
            ("2 in [1, 2, 3]", vec![], 13),
            ("1 + 1", vec![], 1),
            ("1 - 1", vec![], 1),
            ("1 / 1", vec![], 1),
            ("1 * 1", vec![], 1),
            ("1 % 1", vec![], 1),
            ("true ? 1 : 2", vec![], 0),
            ("size(\"123\")", vec![], 1),
            (
                "'12345678901234567890' == '123456789012345678901234567890'",
                vec![],
                2,
            ),
            ("string(input)", vec![("input", b500)], 51),
            ("bytes(input)", vec![("input", s500.clone())], 51),
            ("string(1)", vec![], 1),
            (
                "input.contains(arg1)",
                vec![("input", s500.clone()), ("arg1", s500.clone())],
                2502,
            ),
            (
                "input.matches('\\\\d+a\\\\d+b')",
                vec![("input", s500.clone())],
                103,
            ),
            (
                "input.startsWith(arg1)",
                vec![
                    ("input", Value::String("idc".to_string().into())),
                    ("arg1", s500.clone()),
                ],
                3,
            ),
            (
                "input.endsWith(arg1)",
                vec![
                    ("input", Value::String("idc".to_string().into())),
                    ("arg1", s500),
                ],
                3,
            ),
            (
                "input.size()",
                vec![("input", Value::String("500".to_string().into()))],
                2,
            ),
            (
                "size(input)",
                vec![("input", Value::String("500".to_string().into()))],
                2,
            ),
            (
                "(x > 2 ? input1 : input2).all(y, true)",
                vec![
                    ("x", Value::Int(1)),
                    ("input1", one.clone()),
                    ("input2", one),
                ],
                6,
            ),
            ("true ? false : 1 > 3", vec![], 0),
            ("false ? false : 1 > 3", vec![], 1),
            (
                "input.all(k, input[k].single_int32 > 3)",
                vec![(
                    "input",
                    json(serde_json::json!({"val": {"single_int32": 0}})),
                )],
                9,
            ),
            (
                "input.all(k, input[k].all(x, true))",
                vec![("input", json(serde_json::json!({})))],
                2,
            ),
            (
                "input.all(k, k.contains(k))",
                vec![("input", json(serde_json::json!({})))],
                2,
            ),
            (
                "input.all(k, input[k].all(k, true) && k.contains(k))",
                vec![("input", json(serde_json::json!({})))],
                2,
            ),
            (
                "(list1 + list2).all(x, true)",
                vec![
                    ("list1", json(serde_json::json!([]))),
                    ("list2", json(serde_json::json!([]))),
                ],
                4,
            ),
            (
                "\"abcdefg\".contains(str1 + str2)",
                vec![
                    ("str1", Value::String("val1".to_string().into())),
                    ("str2", Value::String("val2222222".to_string().into())),
                ],
                6,
            ),
            ("(1 > 2 ? 5 : 3) > 1", vec![], 2),
            ("(1 > 2 || 2 > 1) == true", vec![], 3),
            ("[{'k1': 1}, {'k2': 2}].all(x, true)", vec![], 77),
        ];
        for (expression, variables, want) in cases {
            assert_eq!(
                cost_with(expression, variables, PER_CALL_LIMIT),
                Ok(want),
                "{expression}"
            );
        }
        // "at limit" and "above limit".
        let strings = || {
            vec![
                ("str1", Value::String("val1".to_string().into())),
                ("str2", Value::String("val2222222".to_string().into())),
            ]
        };
        assert_eq!(
            cost_with("\"abcdefg\".contains(str1 + str2)", strings(), 6),
            Ok(6)
        );
        assert_eq!(
            cost_with("\"abcdefg\".contains(str1 + str2)", strings(), 5),
            Err(Cancelled(6))
        );
    }

    #[test]
    fn cancels_past_the_per_call_limit() {
        // 300 × 300 per `contains` on 3,000 characters, 100 times: cancelled on the 12th.
        let expression = "object.xs.all(a, object.xs.all(b, object.s.contains(object.s)))";
        let object =
            serde_json::json!({"xs": (0..10).collect::<Vec<u32>>(), "s": "x".repeat(3000)});
        let result = cost(expression, object);
        let per_contains = 300 * 300 + 6;
        assert!(
            matches!(result, Err(Cancelled(c)) if c > PER_CALL_LIMIT && c < PER_CALL_LIMIT + per_contains + 100),
            "{result:?}"
        );
    }

    /// `map` and `filter` charge 13 and 15 per element here as in cel-go (the step's
    /// `@result`, `[x]` with its `x` and list creation, `+`), in time linear in the list: the
    /// walk used to build the accumulator at every element, 2.45 s for 20,000 elements and
    /// 35.8 s for 75,000 in a release build. 80,000 elements cross the per-call limit and are
    /// cancelled there; the watchdog (minutes before the fix, in a debug build) only keeps a
    /// regression from hanging the suite.
    #[test]
    fn map_and_filter_are_charged_in_linear_time() {
        let run = |expression: &'static str, n: usize| {
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let object = serde_json::json!({"l": vec![1; n]});
                let _ = tx.send(cost(expression, object));
            });
            rx.recv_timeout(std::time::Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("{expression} over {n} elements still charging"))
        };
        // range 2, the empty accumulator's list 10, per element 13, result 1, size() 1, >= 1.
        let map = "object.l.map(x, x).size() >= 0";
        assert_eq!(run(map, 20_000), Ok(2 + 10 + 13 * 20_000 + 1 + 1 + 1));
        // filter: the guard `x > 0` (x, >) 2 more per element, and the step taken.
        let filter = "object.l.filter(x, x > 0).size() >= 0";
        assert_eq!(run(filter, 20_000), Ok(2 + 10 + 15 * 20_000 + 1 + 1 + 1));
        assert_eq!(run(map, 75_000), Ok(2 + 10 + 13 * 75_000 + 1 + 1 + 1));
        let cancelled = run(map, 80_000);
        assert!(
            matches!(cancelled, Err(Cancelled(c)) if c > PER_CALL_LIMIT && c <= PER_CALL_LIMIT + 13),
            "{cancelled:?}"
        );
    }

    #[test]
    fn fast_path_bound_follows_body_size() {
        let compile = |e: &str| crate::matching::cel_env::compile(e).unwrap();
        let simple = compile("object.metadata.name == 'web'");
        let comprehension = compile("object.spec.containers.all(c, c.image == 'a')");
        let contains = compile("object.a.contains(object.b)");
        // A bounded expression is safe for very large bodies.
        assert!(fast_path_max_body([simple.expression()].into_iter()).unwrap() >= 1 << 32);
        assert_eq!(
            fast_path_max_body([comprehension.expression()].into_iter()),
            None
        );
        // contains: ceil(n/10)² ≤ 10^6 - 8 (selects) → n ≤ 9990.
        let n = fast_path_max_body([contains.expression()].into_iter()).unwrap();
        assert!((9_000..10_000).contains(&n), "{n}");
    }
}
