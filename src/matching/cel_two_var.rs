//! Two-variable comprehensions, as cel-go's `ext.TwoVarComprehensions()` declares them
//! (`github.com/google/cel-go/ext/comprehensions.go`), which kube-apiserver's base environment
//! has from 1.32 (`staging/src/k8s.io/apiserver/pkg/cel/environment/base.go`):
//! `<list>.all(i, v, p)` / `<map>.all(k, v, p)`, `exists`, `existsOne` (and `exists_one`),
//! `transformList(i, v, [filter,] t)`, `transformMap(i, v, [filter,] t)` and
//! `transformMapEntry(i, v, [filter,] {k: v})`. Each expands at parse time into a comprehension
//! with a second iteration variable (the vendored `cel` binds the index and element of a list,
//! the key and value of a map), with the same accumulator, condition, step and result as
//! cel-go's macros; the map-building steps call [`MAP_INSERT`].

use std::sync::Arc;

use cel::common::ast::{
    operators, CallExpr, ComprehensionExpr, Expr, IdedExpr, ListExpr, LiteralValue, MapExpr,
};
use cel::extractors::Arguments;
use cel::objects::{Key, Map};
use cel::parser::{Macro, MacroExprHelper, ParseError};
use cel::{ExecutionError, ResolveResult, Value};

/// The accumulator's name, as cel-go's `parser.AccumulatorName`.
const ACCUMULATOR: &str = "@result";

/// The internal function that adds to the map being built: `(map, key, value)` or `(map,
/// map)`, failing on a key already there (cel-go's `cel.@mapInsert`). Named with an `@` so
/// that no expression can call it (the walkers treat such names as operators).
pub(crate) const MAP_INSERT: &str = "@mapInsert";

/// The macros, for [`cel::Env::add_macro`].
pub(crate) fn macros() -> Vec<Macro> {
    let mut out = Vec::new();
    for name in ["all", "exists", "existsOne", "exists_one"] {
        out.push(Macro::receiver(name, 3, move |h, t, a| {
            quantifier(name, h, t, a)
        }));
    }
    for name in ["transformList", "transformMap", "transformMapEntry"] {
        for count in [3, 4] {
            out.push(Macro::receiver(name, count, move |h, t, a| {
                transform(name, h, t, a)
            }));
        }
    }
    out
}

type Expanded = Result<Option<IdedExpr>, ParseError>;

/// `all`, `exists`, `existsOne` with two variables (`quantifierAll`, `quantifierExists`,
/// `quantifierExistsOne`).
fn quantifier(
    name: &str,
    h: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
) -> Expanded {
    let (first, second) = iteration_variables(h, args)?;
    // The macro is registered for three arguments: the predicate is what is left.
    let predicate = args.pop().unwrap_or_default();
    let accu = |h: &mut MacroExprHelper<'_>| h.next_expr(Expr::Ident(ACCUMULATOR.to_string()));
    let (init, condition, step, result) = match name {
        "all" => {
            let init = literal(h, LiteralValue::Boolean(true.into()));
            let a = accu(h);
            let condition = call(h, operators::NOT_STRICTLY_FALSE, vec![a]);
            let a = accu(h);
            let step = call(h, operators::LOGICAL_AND, vec![a, predicate]);
            (init, condition, step, accu(h))
        }
        "exists" => {
            let init = literal(h, LiteralValue::Boolean(false.into()));
            let a = accu(h);
            let not = call(h, operators::LOGICAL_NOT, vec![a]);
            let condition = call(h, operators::NOT_STRICTLY_FALSE, vec![not]);
            let a = accu(h);
            let step = call(h, operators::LOGICAL_OR, vec![a, predicate]);
            (init, condition, step, accu(h))
        }
        _ => {
            let init = literal(h, LiteralValue::Int(0.into()));
            let condition = literal(h, LiteralValue::Boolean(true.into()));
            let a = accu(h);
            let one = literal(h, LiteralValue::Int(1.into()));
            let plus = call(h, operators::ADD, vec![a, one]);
            let a = accu(h);
            let step = call(h, operators::CONDITIONAL, vec![predicate, plus, a]);
            let a = accu(h);
            let one = literal(h, LiteralValue::Int(1.into()));
            let result = call(h, operators::EQUALS, vec![a, one]);
            (init, condition, step, result)
        }
    };
    Ok(Some(comprehension(
        h, target, first, second, init, condition, step, result,
    )))
}

/// `transformList`, `transformMap`, `transformMapEntry`, with or without a filter.
fn transform(
    name: &str,
    h: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
) -> Expanded {
    let (first, second) = iteration_variables(h, args)?;
    // Registered for three or four arguments: `[filter,] transform` are what is left.
    let transform = args.pop().unwrap_or_default();
    let filter = args.pop();
    let accu = h.next_expr(Expr::Ident(ACCUMULATOR.to_string()));
    let (init, step) = match name {
        "transformList" => {
            let list = h.next_expr(Expr::List(ListExpr {
                elements: vec![transform],
                optional_indices: Vec::new(),
            }));
            let init = h.next_expr(Expr::List(ListExpr::default()));
            (init, call(h, operators::ADD, vec![accu, list]))
        }
        "transformMap" => {
            let key = h.next_expr(Expr::Ident(first.clone()));
            let init = h.next_expr(Expr::Map(MapExpr::default()));
            (init, call(h, MAP_INSERT, vec![accu, key, transform]))
        }
        _ => {
            let init = h.next_expr(Expr::Map(MapExpr::default()));
            (init, call(h, MAP_INSERT, vec![accu, transform]))
        }
    };
    let step = match filter {
        Some(filter) => {
            let accu = h.next_expr(Expr::Ident(ACCUMULATOR.to_string()));
            call(h, operators::CONDITIONAL, vec![filter, step, accu])
        }
        None => step,
    };
    let condition = literal(h, LiteralValue::Boolean(true.into()));
    let result = h.next_expr(Expr::Ident(ACCUMULATOR.to_string()));
    Ok(Some(comprehension(
        h, target, first, second, init, condition, step, result,
    )))
}

/// The two iteration variables, taken from the first two arguments, refused as cel-go's
/// `extractIterVars` refuses them.
fn iteration_variables(
    h: &mut MacroExprHelper<'_>,
    args: &mut Vec<IdedExpr>,
) -> Result<(String, String), ParseError> {
    if args.len() < 3 {
        return Err(h.new_error(0, "two-variable comprehension without its arguments"));
    }
    let mut taken = args.drain(..2);
    let (first, second) = (
        taken.next().unwrap_or_default(),
        taken.next().unwrap_or_default(),
    );
    drop(taken);
    let name = |e: &IdedExpr| match &e.expr {
        Expr::Ident(n) => Ok(n.clone()),
        _ => Err(h.new_error(e.id, "argument must be a simple name")),
    };
    let (a, b) = (name(&first)?, name(&second)?);
    if a == b {
        return Err(h.new_error(second.id, format!("duplicate variable name: {a}")));
    }
    for (v, e) in [(&a, &first), (&b, &second)] {
        if v == ACCUMULATOR {
            return Err(h.new_error(e.id, "iteration variable overwrites accumulator variable"));
        }
    }
    Ok((a, b))
}

fn literal(h: &mut MacroExprHelper<'_>, value: LiteralValue) -> IdedExpr {
    h.next_expr(Expr::Literal(value))
}

fn call(h: &mut MacroExprHelper<'_>, function: &str, args: Vec<IdedExpr>) -> IdedExpr {
    h.next_expr(Expr::Call(CallExpr {
        func_name: function.to_string(),
        target: None,
        args,
    }))
}

#[allow(clippy::too_many_arguments)]
fn comprehension(
    h: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    first: String,
    second: String,
    accu_init: IdedExpr,
    loop_cond: IdedExpr,
    loop_step: IdedExpr,
    result: IdedExpr,
) -> IdedExpr {
    h.next_expr(Expr::Comprehension(Box::new(ComprehensionExpr {
        iter_range: target.take().unwrap_or_default(),
        iter_var: first,
        iter_var2: Some(second),
        accu_var: ACCUMULATOR.to_string(),
        accu_init,
        loop_cond,
        loop_step,
        result,
    })))
}

/// [`MAP_INSERT`]: `(map, key, value)` adds one entry, `(map, map)` each of the second's;
/// a key already in the map fails as cel-go's `InsertMapKeyValue` does.
pub(crate) fn map_insert(Arguments(args): Arguments) -> ResolveResult {
    let mut map = match args.first() {
        Some(Value::Map(m)) => (*m.map).clone(),
        _ => return Err(ExecutionError::function_error(MAP_INSERT, "expected a map")),
    };
    let mut insert = |key: &Key, value: &Value| {
        if map.contains_key(key) {
            return Err(ExecutionError::function_error(
                MAP_INSERT,
                format!("insert failed: key {} already exists", plain(key)),
            ));
        }
        map.insert(key.clone(), value.clone());
        Ok(())
    };
    match (args.get(1), args.get(2)) {
        (Some(key), Some(value)) => {
            let key = match key {
                Value::String(s) => Key::String(s.clone()),
                Value::Int(i) => Key::Int(*i),
                Value::UInt(u) => Key::Uint(*u),
                Value::Bool(b) => Key::Bool(*b),
                _ => {
                    return Err(ExecutionError::function_error(
                        MAP_INSERT,
                        "unsupported map key type",
                    ))
                }
            };
            insert(&key, value)?;
        }
        (Some(Value::Map(update)), None) => {
            for (key, value) in update.map.iter() {
                insert(key, value)?;
            }
        }
        _ => {
            return Err(ExecutionError::function_error(
                MAP_INSERT,
                "expected a key and a value, or a map",
            ))
        }
    }
    Ok(Value::Map(Map { map: Arc::new(map) }))
}

/// A key as Go's `%v` prints a CEL value: a string without quotes.
fn plain(key: &Key) -> String {
    match key {
        Key::String(s) => s.to_string(),
        Key::Int(i) => i.to_string(),
        Key::Uint(u) => u.to_string(),
        Key::Bool(b) => b.to_string(),
    }
}
