//! The Kubernetes CEL environment for matchConditions (`MustBaseEnvSet` in
//! `staging/src/k8s.io/apiserver/pkg/cel/environment/base.go`): the `cel` crate's standard
//! library, the Kubernetes libraries from `kube-cel`, and regular expressions compiled once, as
//! Go's `regexp` reads them (`re2`).
//! Registers `authz`'s `authorizer` library beside them.
//!
//! Which crate provides what was measured (docs/reference/cel.md, "CEL compatibility"): `cel` 0.15 alone lacks
//! every Kubernetes library; `kube-cel` 0.8 on its own `cel` 0.13 lacks optional types. `kube-cel`
//! rebuilt on `cel` 0.15 (`vendor/kube-cel/VENDORED.md`) has both.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;
use cel::extractors::{Arguments, This};
use cel::objects::Value;
use cel::{Context, Env, ExecutionError, ResolveResult};
use kube_cel::KubeCelExt;
use regex::Regex;

use crate::kube_version::KubeVersion;

/// The parse/compile environment: the standard library and the macros. Kubernetes library
/// functions are resolved at run time through [`with_root_context`].
pub(crate) fn env() -> Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        for m in super::cel_two_var::macros() {
            // Each is for a name and argument count no standard macro has.
            let _ = env.add_macro(m);
        }
        // `string(ip)` and `string(cidr)` (`library/ip.go`, `cidr.go`): overloads of the
        // standard `string`, which only the environment can extend.
        for (id, name) in [("ip_to_string", "net.IP"), ("cidr_to_string", "net.CIDR")] {
            let opaque = cel::common::types::Type::new_opaque_type(name);
            let _ = env.add_overload("string", id, vec![opaque], ip_or_cidr_to_string);
        }
        Arc::new(env)
    })
    .clone()
}

/// The `string` overload of `ip()` and `cidr()` values: their text.
fn ip_or_cidr_to_string<'b, 'v>(
    args: Vec<cel::common::value::CowVal<'b, 'v>>,
) -> Result<cel::common::value::CowVal<'b, 'v>, cel::ExecutionError> {
    let text = args
        .first()
        .and_then(|a| Value::try_from(a.as_ref()).ok())
        .and_then(|v| kube_cel::ip_or_cidr_text(&v))
        .ok_or_else(|| cel::ExecutionError::function_error("string", "expected an ip or cidr"))?;
    Ok(cel::common::value::CowVal::owned(
        cel::common::types::CelString::from(text),
    ))
}

/// A compiled expression: its tree and where each node was written. The `cel` crate's
/// `Program`, parsed with cel-go's nesting limit rather than the crate's (96): its
/// `Env::compile` takes no parser options, and the expressions kube-apiserver accepts nest up
/// to 249 levels ([`super::cel_limits`] refuses 250 and more before parsing).
#[derive(Debug)]
pub(crate) struct Program {
    expression: cel::parser::Expression,
    source_info: cel::common::ast::SourceInfo,
}

impl Program {
    /// The expression's tree.
    pub(crate) fn expression(&self) -> &cel::parser::Expression {
        &self.expression
    }

    /// Where each node was written (byte offsets in the source).
    pub(crate) fn source_info(&self) -> &cel::common::ast::SourceInfo {
        &self.source_info
    }

    /// The variables and functions the expression references.
    pub(crate) fn references(&self) -> cel::parser::ExpressionReferences<'_> {
        self.expression.references()
    }

    /// Evaluates the expression in `context`.
    ///
    /// # Errors
    /// CEL's execution error.
    pub(crate) fn execute(&self, context: &Context<'_, '_>) -> cel::ResolveResult {
        Value::resolve(&self.expression, context)
    }
}

/// Why an expression does not parse.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ParseError {
    /// Over one of cel-go's parser limits, found before parsing ([`super::cel_limits`]).
    #[error(transparent)]
    Limit(#[from] super::cel_limits::LimitError),
    /// The parser's errors.
    #[error(transparent)]
    Syntax(cel::ParseErrors),
}

/// Parses `source` in [`env`] (its macros expanded): first against cel-go's parser limits
/// ([`super::cel_limits::check`], which refuses in cel-go's words what would otherwise be
/// parsed, and recursed into, too deep), then with cel-go's nesting limit.
///
/// # Errors
/// [`ParseError`]: a limit, or the parser's errors.
pub(crate) fn compile(source: &str) -> Result<Program, ParseError> {
    super::cel_limits::check(source)?;
    // The crate's limit counts nested `expr` rules past the first; cel-go's listener counts
    // them all (nesting 249 is the deepest it takes).
    let nesting = u16::try_from(super::cel_limits::MAX_RECURSION_DEPTH - 1).unwrap_or(u16::MAX);
    env()
        .parser()
        .max_recursion_depth(nesting)
        .parse_with_source_info(source)
        .map(|(expression, source_info)| Program {
            expression,
            source_info,
        })
        .map_err(ParseError::Syntax)
}

thread_local! {
    /// The function registry (every library function), built once per thread: registering
    /// ~120 functions costs far more than evaluating a typical condition.
    static ROOT: Context<'static, 'static> = root_context();
}

fn root_context() -> Context<'static, 'static> {
    let mut context = Context::with_env(env());
    context.register_all();
    // Cached regular expressions replace the `cel` crate's versions, which compile the pattern on
    // every call.
    let _ = context.add_function("matches", matches);
    let _ = context.add_function("find", find);
    let _ = context.add_function("findAll", find_all);
    let _ = context.add_function("includes", includes);
    let _ = context.add_function(
        super::cel_two_var::MAP_INSERT,
        super::cel_two_var::map_insert,
    );
    // The authz library (`authorizer`): member functions of its opaque values.
    for (name, function) in super::authz::FUNCTIONS {
        let _ = context.add_function(name, function);
    }
    context
}

/// Runs `f` with a child scope of the per-thread root context; the caller adds the request's
/// variables to the child.
pub(crate) fn with_root_context<R>(f: impl FnOnce(Context<'_, 'static>) -> R) -> R {
    ROOT.with(|root| f(root.new_inner_scope()))
}

/// Regular expressions compiled at config load, keyed by pattern. Read without a lock on the
/// request path; written only while a configuration compiles.
fn regexes() -> &'static ArcSwap<HashMap<String, Arc<Regex>>> {
    static REGEXES: OnceLock<ArcSwap<HashMap<String, Arc<Regex>>>> = OnceLock::new();
    REGEXES.get_or_init(Default::default)
}

/// Most distinct patterns kept; beyond this, patterns compile per call (as `cel` does), so a
/// stream of configurations cannot grow the cache without bound.
const MAX_CACHED_REGEXES: usize = 4096;

/// Compiles a literal pattern of `matches`/`find`/`findAll` at load, as kube-apiserver's regex
/// optimizer does (`cel.ValidateRegexLiterals`, base.go).
///
/// Patterns are read as Go's `regexp` reads them ([`super::re2`]).
///
/// # Errors
/// [`super::re2::Re2Error`] when Go would refuse the pattern.
pub(crate) fn precompile_regex(pattern: &str) -> Result<(), super::re2::Re2Error> {
    if regexes().load().contains_key(pattern) {
        return Ok(());
    }
    let compiled = Arc::new(super::re2::compile(pattern)?);
    regexes().rcu(|current| {
        let mut next = HashMap::clone(current);
        if next.len() < MAX_CACHED_REGEXES {
            next.insert(pattern.to_string(), compiled.clone());
        }
        next
    });
    Ok(())
}

fn regex(function: &str, pattern: &str) -> Result<Arc<Regex>, ExecutionError> {
    if let Some(re) = regexes().load().get(pattern) {
        return Ok(re.clone());
    }
    // cel-go's `matches` returns Go's error as it is (`String.Match`); the Kubernetes regex
    // library's `find` and `findAll` prefix it (`Illegal regex: %v`,
    // `staging/src/k8s.io/apiserver/pkg/cel/library/regex.go`). Both are printed verbatim.
    super::re2::compile(pattern).map(Arc::new).map_err(|e| {
        let message = match function {
            "matches" => e.to_string(),
            _ => format!("Illegal regex: {e}"),
        };
        ExecutionError::function_error(super::authz::LIBRARY_ERROR, message)
    })
}

/// `string.matches(string) -> bool` (CEL standard library), with the pattern cached.
/// `<dyn>.includes(<dyn>)` (the Kubernetes lists library, version 1, Kubernetes 1.37:
/// `staging/src/k8s.io/apiserver/pkg/cel/library/lists.go`): a list holds an element equal to
/// the argument, or anything else equals it.
fn includes(This(this): This<Value>, item: Value) -> ResolveResult {
    Ok(Value::Bool(match &this {
        Value::List(list) => list.contains(&item),
        other => *other == item,
    }))
}

fn matches(This(this): This<Arc<String>>, pattern: Arc<String>) -> ResolveResult {
    Ok(Value::Bool(regex("matches", &pattern)?.is_match(&this)))
}

/// `string.find(string) -> string` (Kubernetes regex library): the first match, or `""`.
fn find(This(this): This<Arc<String>>, pattern: Arc<String>) -> ResolveResult {
    let found = regex("find", &pattern)?
        .find(&this)
        .map(|m| m.as_str().to_string())
        .unwrap_or_default();
    Ok(Value::String(Arc::new(found)))
}

/// `string.findAll(string [, int]) -> list(string)` (Kubernetes regex library): every match,
/// or the first `n`; a negative `n` means all, as in Go's `FindAllString`.
fn find_all(This(this): This<Arc<String>>, Arguments(args): Arguments) -> ResolveResult {
    let pattern = match args.first() {
        Some(Value::String(s)) => s.clone(),
        _ => {
            return Err(ExecutionError::function_error(
                "findAll",
                "expected a string pattern",
            ))
        }
    };
    let limit = match args.get(1) {
        None => usize::MAX,
        Some(Value::Int(n)) => usize::try_from(*n).unwrap_or(usize::MAX),
        Some(_) => {
            return Err(ExecutionError::function_error(
                "findAll",
                "expected an int limit",
            ))
        }
    };
    let re = regex("findAll", &pattern)?;
    let found = re
        .find_iter(&this)
        .take(limit)
        .map(|m| Value::String(Arc::new(m.as_str().to_string())))
        .collect();
    Ok(Value::List(Arc::new(found)))
}

/// One function of the CEL environment, with an expression that evaluates to `true` and shows
/// it works as in Kubernetes (each example is run by the tests and listed in docs/reference/cel.md's
/// CEL compatibility table).
#[derive(Debug)]
pub struct LibraryFunction {
    /// The name as it appears in a call (`isSorted`, `sets.contains`).
    pub name: &'static str,
    /// The Kubernetes or cel-go library it comes from.
    pub library: &'static str,
    /// An expression that is `true` in kube-apiserver and here.
    pub example: &'static str,
}

macro_rules! functions {
    ($($library:literal: [$($name:literal => $example:literal),* $(,)?]),* $(,)?) => {
        &[$($(LibraryFunction { name: $name, library: $library, example: $example },)*)*]
    };
}

/// Every function an expression may call, by library: the Kubernetes 1.33 base environment
/// (`baseOptsWithoutStrictCost` in base.go) minus `UNSUPPORTED`. An expression calling
/// anything else is refused at load, as kube-apiserver's type checker refuses it.
pub const FUNCTIONS: &[LibraryFunction] = functions! {
    "standard": [
        "size" => "size('abc') == 3 && size([1, 2]) == 2 && 'abc'.size() == 3",
        "contains" => "'hello'.contains('ell')",
        "startsWith" => "'hello'.startsWith('he')",
        "endsWith" => "'hello'.endsWith('lo')",
        "matches" => "'abc123'.matches('^[a-z]+[0-9]+$') && matches('x', 'x')",
        "int" => "int('42') == 42 && int(2.9) == 2",
        "uint" => "uint(42) == 42u",
        "double" => "double(1) == 1.0",
        "string" => "string(42) == '42' && string(true) == 'true'",
        "bytes" => "bytes('abc') == b'abc'",
        "bool" => "bool('true')",
        "type" => "type(1) == int && type('a') == string",
        "dyn" => "dyn(1) == 1",
        "timestamp" => "timestamp('2024-01-01T00:00:00Z') < timestamp('2025-01-01T00:00:00Z')",
        "duration" => "duration('1h') > duration('30m')",
        "getFullYear" => "timestamp('2024-03-01T10:00:00Z').getFullYear() == 2024",
        "getMonth" => "timestamp('2024-03-01T10:00:00Z').getMonth() == 2",
        "getDayOfMonth" => "timestamp('2024-03-05T10:00:00Z').getDayOfMonth() == 4",
        "getDate" => "timestamp('2024-03-05T10:00:00Z').getDate() == 5",
        "getDayOfWeek" => "timestamp('2024-03-05T10:00:00Z').getDayOfWeek() == 2",
        "getDayOfYear" => "timestamp('2024-01-02T10:00:00Z').getDayOfYear() == 1",
        "getHours" => "timestamp('2024-03-01T10:00:00Z').getHours() == 10 && duration('2h').getHours() == 2",
        "getMinutes" => "duration('90m').getMinutes() == 90",
        "getSeconds" => "duration('90s').getSeconds() == 90",
        "getMilliseconds" => "duration('1.5s').getMilliseconds() == 1500",
    ],
    "macros": [
        "has" => "has(object.metadata) && !has(object.status)",
        "all" => "[1, 2].all(x, x > 0)",
        "exists" => "[1, 2].exists(x, x == 2)",
        "exists_one" => "[1, 2].exists_one(x, x == 2)",
        "map" => "[1, 2].map(x, x * 2) == [2, 4] && [1, 2].map(x, x > 1, x) == [2]",
        "filter" => "[1, 2, 3].filter(x, x > 1) == [2, 3]",
    ],
    "two-variable comprehensions (cel-go ext.TwoVarComprehensions)": [
        "two-variable comprehension" => "[1, 2].all(i, v, v > i) && {'a': 1}.exists(k, v, k == 'a' && v == 1) && [1, 2].existsOne(i, v, v == 2)",
        "transformList" => "[1, 2, 3].transformList(i, v, i * v + v) == [1, 4, 9] && [1, 2, 3].transformList(i, v, i % 2 == 0, v) == [1, 3]",
        "transformMap" => "[1, 2].transformMap(i, v, v * 2) == {0: 2, 1: 4} && {'a': 1}.transformMap(k, v, v > 0, k) == {'a': 'a'}",
        "transformMapEntry" => "{'a': 1}.transformMapEntry(k, v, {v: k}) == {1: 'a'}",
    ],
    "optional types": [
        "optional.of" => "optional.of(1).hasValue()",
        "optional.none" => "!optional.none().hasValue()",
        "optional.ofNonZeroValue" => "!optional.ofNonZeroValue('').hasValue()",
        "hasValue" => "object.?metadata.?labels.?app.hasValue()",
        "value" => "object.?metadata.?name.value() == 'p'",
        "orValue" => "object.?spec.?missing.orValue('x') == 'x' && {'a': 1}[?'b'].orValue(2) == 2",
        "or" => "optional.none().or(optional.of(2)).value() == 2",
    ],
    "cross-type numeric comparison": [
        "_==_ (int, double, uint)" => "dyn(1) == 1.0 && 1u < 2 && 2.5 > 1",
    ],
    "strings (cel-go ext.Strings v2)": [
        "charAt" => "'hello'.charAt(1) == 'e'",
        "indexOf" => "'hello'.indexOf('l') == 2 && 'hello'.indexOf('l', 3) == 3",
        "lastIndexOf" => "'hello'.lastIndexOf('l') == 3",
        "lowerAscii" => "'HeLLo'.lowerAscii() == 'hello'",
        "upperAscii" => "'hello'.upperAscii() == 'HELLO'",
        "replace" => "'hello'.replace('l', 'L') == 'heLLo' && 'hello'.replace('l', 'L', 1) == 'heLlo'",
        "split" => "'a,b,c'.split(',') == ['a', 'b', 'c'] && 'a,b,c'.split(',', 2) == ['a', 'b,c']",
        "substring" => "'hello'.substring(1, 3) == 'el' && 'hello'.substring(3) == 'lo'",
        "trim" => "'  a  '.trim() == 'a'",
        "join" => "['a', 'b'].join('-') == 'a-b' && ['a', 'b'].join() == 'ab'",
        "strings.quote" => "strings.quote('a\"b') == '\"a\\\\\"b\"'",
        "format" => "'%s is %d'.format(['x', 1]) == 'x is 1' && '%.2f'.format([1.2345]) == '1.23'",
    ],
    "lists (cel-go ext.Lists v3)": [
        "slice" => "[1, 2, 3, 4].slice(1, 3) == [2, 3]",
        "flatten" => "[[1], [2, 3]].flatten() == [1, 2, 3]",
        "sort" => "[3, 1, 2].sort() == [1, 2, 3] && ['b', 'a'].sort() == ['a', 'b']",
        "lists.range" => "lists.range(3) == [0, 1, 2]",
        "reverse" => "[1, 2, 3].reverse() == [3, 2, 1]",
        "distinct" => "[1, 2, 2, 1].distinct() == [1, 2]",
    ],
    "Kubernetes lists v1": [
        "includes" => "[1, 2, 3].includes(2) && !['a'].includes('b') && 'model-a'.includes('model-a')",
    ],
    "Kubernetes lists": [
        "isSorted" => "[1, 2, 3].isSorted() && !['b', 'a'].isSorted()",
        "sum" => "[1, 2, 3].sum() == 6 && [1.5, 2.5].sum() == 4.0",
        "min" => "[3, 1, 2].min() == 1",
        "max" => "[3, 1, 2].max() == 3",
        "indexOf (list)" => "[1, 2, 3, 2].indexOf(2) == 1 && [1].indexOf(5) == -1",
        "lastIndexOf (list)" => "[1, 2, 3, 2].lastIndexOf(2) == 3",
    ],
    "Kubernetes regex": [
        "find" => "'abc 123'.find('[0-9]+') == '123' && 'abc'.find('[0-9]+') == ''",
        "findAll" => "'1 a 22 b 333'.findAll('[0-9]+') == ['1', '22', '333'] && '1 a 22'.findAll('[0-9]+', 1) == ['1']",
    ],
    "Kubernetes URLs": [
        "url" => "url('https://example.com:8443/path?k=v').getScheme() == 'https'",
        "isURL" => "isURL('https://example.com/x') && isURL('/absolute') && !isURL('not a url')",
        "getScheme" => "url('https://example.com').getScheme() == 'https'",
        "getHost" => "url('https://example.com:8443/').getHost() == 'example.com:8443'",
        "getHostname" => "url('https://[::1]:80/').getHostname() == '::1'",
        "getPort" => "url('https://example.com:8443/').getPort() == '8443' && url('https://example.com/').getPort() == ''",
        "getEscapedPath" => "url('https://example.com/a%20b').getEscapedPath() == '/a%20b'",
        "getQuery" => "url('https://example.com/?k=v&k=w').getQuery() == {'k': ['v', 'w']}",
    ],
    "Kubernetes quantity": [
        "quantity" => "quantity('1Gi') == quantity('1024Mi')",
        "isQuantity" => "isQuantity('1.3G') && !isQuantity('1.3Gi1')",
        "sign" => "sign(quantity('-50k')) == -1",
        "isInteger" => "quantity('50k').isInteger() && !quantity('1.5').isInteger()",
        "asInteger" => "quantity('50M').asInteger() == 50000000",
        "asApproximateFloat" => "quantity('1Mi').asApproximateFloat() == 1048576.0",
        "add" => "quantity('50k').add(quantity('20k')) == quantity('70k') && quantity('50k').add(20) == quantity('50020')",
        "sub" => "quantity('50k').sub(quantity('20k')) == quantity('30k') && quantity('50k').sub(20) == quantity('49980')",
        "isGreaterThan" => "quantity('50M').isGreaterThan(quantity('50k')) && semver('2.0.0').isGreaterThan(semver('1.9.9'))",
        "isLessThan" => "quantity('50k').isLessThan(quantity('100k')) && semver('1.2.3').isLessThan(semver('1.3.0'))",
        "compareTo" => "quantity('50k').compareTo(quantity('50000')) == 0 && semver('1.2.3').compareTo(semver('1.2.4')) == -1",
    ],
    "Kubernetes IP and CIDR": [
        "ip" => "ip('127.0.0.1') == ip('127.0.0.1') && cidr('192.168.1.0/24').ip() == ip('192.168.1.0')",
        "isIP" => "isIP('127.0.0.1') && isIP('::1') && !isIP('127.0.0.256') && !isIP('127.0.0.1/32')",
        "ip.isCanonical" => "ip.isCanonical('127.0.0.1') && !ip.isCanonical('2001:DB8::')",
        "family" => "ip('127.0.0.1').family() == 4 && ip('::1').family() == 6",
        "isLoopback" => "ip('127.0.0.1').isLoopback()",
        "isUnspecified" => "ip('0.0.0.0').isUnspecified() && ip('::').isUnspecified()",
        "isLinkLocalMulticast" => "ip('224.0.0.1').isLinkLocalMulticast()",
        "isLinkLocalUnicast" => "ip('fe80::1').isLinkLocalUnicast()",
        "isGlobalUnicast" => "ip('192.168.0.1').isGlobalUnicast() && !ip('255.255.255.255').isGlobalUnicast()",
        "cidr" => "cidr('192.168.0.0/16') == cidr('192.168.0.0/16') && string(cidr('192.168.0.0/16')) == '192.168.0.0/16' && string(ip('::1')) == '::1'",
        "isCIDR" => "isCIDR('192.168.0.0/16') && !isCIDR('192.168.0.0')",
        "containsIP" => "cidr('192.168.0.0/16').containsIP(ip('192.168.3.4')) && cidr('192.168.0.0/16').containsIP('192.168.3.4')",
        "containsCIDR" => "cidr('192.168.0.0/16').containsCIDR(cidr('192.168.1.0/24')) && cidr('192.168.0.0/16').containsCIDR('192.168.1.0/24')",
        "masked" => "cidr('192.168.1.5/24').masked() == cidr('192.168.1.0/24')",
        "prefixLength" => "cidr('192.168.1.0/24').prefixLength() == 24",
    ],
    "sets (cel-go ext.Sets)": [
        "sets.contains" => "sets.contains([1, 2, 3], [2, 3]) && !sets.contains([1], [2])",
        "sets.equivalent" => "sets.equivalent([1, 2], [2, 1, 1])",
        "sets.intersects" => "sets.intersects([1, 2], [2, 3]) && !sets.intersects([1], [2])",
    ],
    "Kubernetes format": [
        "format.named" => "format.named('dns1123Label').hasValue() && !format.named('nope').hasValue()",
        "format.dns1123Label" => "!format.dns1123Label().validate('my-name').hasValue() && format.dns1123Label().validate('My_Name').hasValue()",
        "validate" => "format.dns1123Subdomain().validate('a.b').orValue([]) == []",
        "format.dns1123Subdomain" => "!format.dns1123Subdomain().validate('a.example.com').hasValue()",
        "format.dns1035Label" => "format.dns1035Label().validate('1abc').hasValue()",
        "format.dns1123LabelPrefix" => "!format.dns1123LabelPrefix().validate('abc-').hasValue()",
        "format.dns1123SubdomainPrefix" => "!format.dns1123SubdomainPrefix().validate('a.b-').hasValue()",
        "format.dns1035LabelPrefix" => "!format.dns1035LabelPrefix().validate('abc-').hasValue()",
        "format.qualifiedName" => "!format.qualifiedName().validate('example.com/name').hasValue()",
        "format.labelValue" => "!format.labelValue().validate('v1.2').hasValue() && format.labelValue().validate('-x').hasValue()",
        "format.uri" => "!format.uri().validate('https://example.com').hasValue()",
        "format.uuid" => "!format.uuid().validate('123e4567-e89b-12d3-a456-426614174000').hasValue()",
        "format.byte" => "!format.byte().validate('aGVsbG8=').hasValue()",
        "format.date" => "!format.date().validate('2024-01-31').hasValue() && format.date().validate('2024-13-01').hasValue()",
        "format.datetime" => "!format.datetime().validate('2024-01-31T10:00:00Z').hasValue()",
    ],
    "Kubernetes authz (an authorizer that allows)": [
        "path" => "authorizer.path('/healthz').check('get').allowed()",
        "group" => "authorizer.group('apps').resource('deployments').check('list').allowed()",
        "resource" => "authorizer.group('').resource('pods').check('get').allowed()",
        "subresource" => "authorizer.group('').resource('pods').subresource('exec').check('create').allowed()",
        "namespace" => "authorizer.group('').resource('pods').namespace('default').check('list').allowed()",
        "name" => "authorizer.group('admissionregistration.k8s.io').resource('validatingwebhookconfigurations').name('my-webhook').check('breakglass').allowed()",
        "fieldSelector" => "authorizer.group('').resource('pods').fieldSelector('spec.nodeName=node-1').check('list').allowed()",
        "labelSelector" => "authorizer.group('').resource('pods').labelSelector('app=web').check('list').allowed()",
        "serviceAccount" => "authorizer.serviceAccount('default', 'builder').group('').resource('pods').check('create').allowed()",
        "check" => "authorizer.requestResource.check('create').allowed()",
        "allowed" => "authorizer.path('/metrics').check('get').allowed()",
        "reason" => "type(authorizer.path('/metrics').check('get').reason()) == string",
        "errored" => "!authorizer.path('/metrics').check('get').errored()",
        "error" => "authorizer.path('/metrics').check('get').error() == ''",
    ],
    "Kubernetes semver": [
        "semver" => "semver('1.2.3') == semver('1.2.3')",
        "isSemver" => "isSemver('1.2.3') && !isSemver('1.2') && isSemver('v1.0', true)",
        "major" => "semver('1.2.3').major() == 1",
        "minor" => "semver('1.2.3').minor() == 2",
        "patch" => "semver('1.2.3').patch() == 3",
    ],
};

/// The name a two-variable comprehension (`all(i, v, …)`, `transformList`, …) is counted under
/// among an expression's functions: the macros expand to a comprehension, not a call.
pub(crate) const TWO_VARIABLE_COMPREHENSION: &str = "two-variable comprehension";

/// Functions of the Kubernetes base environment this build cannot evaluate, with the reason given
/// when an expression uses one.
pub(crate) const UNSUPPORTED: &[(&str, &str)] = &[
    (
        "image",
        "the image library (Kubernetes 1.33) is not supported",
    ),
    (
        "sortBy",
        "the lists library's sortBy macro (Kubernetes 1.34) is not supported",
    ),
];

/// The release that added `function` to kube-apiserver's CEL base environment, with its
/// library, for functions added after matchConditions came (1.27); `None` for older ones.
/// From `baseOptsWithoutStrictCost`'s `IntroducedVersion`s
/// (`staging/src/k8s.io/apiserver/pkg/cel/environment/base.go`): authz 1.27; optional types
/// and quantity 1.28; sets and cel-go's strings library at version 2 (whose `format` and
/// `strings.quote` came at its version 1, `ext/strings.go` `CompileOptions`) 1.29; IP and CIDR
/// 1.30; format and the authz selectors 1.31; two-variable comprehensions 1.32; semver 1.33. A name in two libraries
/// (`compareTo` of quantity and of semver) counts from the earlier.
pub(crate) fn introduced(function: &str) -> Option<(KubeVersion, &'static str)> {
    let since = |library: &str, name: &str| -> Option<u32> {
        match library {
            "optional types" | "Kubernetes quantity" => Some(28),
            "two-variable comprehensions (cel-go ext.TwoVarComprehensions)" => Some(32),
            "sets (cel-go ext.Sets)" => Some(29),
            "strings (cel-go ext.Strings v2)" => {
                matches!(name, "format" | "strings.quote").then_some(29)
            }
            "Kubernetes IP and CIDR" => Some(30),
            "Kubernetes format" => Some(31),
            "Kubernetes authz (an authorizer that allows)" => {
                Some(if matches!(name, "fieldSelector" | "labelSelector") {
                    31
                } else {
                    27
                })
            }
            "Kubernetes semver" => Some(33),
            "lists (cel-go ext.Lists v3)" => Some(34),
            "Kubernetes lists v1" => Some(37),
            _ => None,
        }
    };
    let mut found: Option<(KubeVersion, &'static str)> = None;
    for f in FUNCTIONS.iter().filter(|f| f.name == function) {
        let Some(minor) = since(f.library, f.name) else {
            // Also in an older library (`indexOf` of strings v0): always there.
            return None;
        };
        if found.is_none_or(|(v, _)| minor < v.minor) {
            found = Some((KubeVersion { minor }, f.library));
        }
    }
    found
}

/// Operators and internal calls the parser emits (`_==_`, `@in`, `_[_]`, `_?_:_`...).
fn is_operator(name: &str) -> bool {
    name.starts_with('_') || name.starts_with('@') || name == "!_" || name == "-_"
}

/// A Kubernetes CEL function an expression calls that this build cannot evaluate, with the
/// reason (`UNSUPPORTED`).
#[derive(Debug, thiserror::Error)]
#[error("function {function:?}: {why} by admission-proxy")]
pub struct FunctionError {
    /// The function's name.
    pub function: String,
    /// Why it is missing.
    pub why: &'static str,
}

/// Checks that no function `functions` names is one this build knows it cannot evaluate.
///
/// # Errors
/// The first such function, named, with the reason.
pub(crate) fn check_supported<'a>(
    functions: impl IntoIterator<Item = &'a str>,
) -> Result<(), FunctionError> {
    for function in functions {
        if let Some((_, why)) = UNSUPPORTED.iter().find(|(name, _)| *name == function) {
            return Err(FunctionError {
                function: function.to_string(),
                why,
            });
        }
    }
    Ok(())
}

/// Whether the Kubernetes CEL environment declares `function` (an operator, or one of
/// [`FUNCTIONS`]).
pub(crate) fn is_declared(function: &str) -> bool {
    is_operator(function) || FUNCTIONS.iter().any(|f| f.name == function)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matching::conditions::CompileError;
    use crate::matching::{ConditionsResult, MatchCondition, MatchConditions};
    use crate::review::ParsedReview;

    const POD: &str = r#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},"namespace":"ns","operation":"CREATE","userInfo":{"username":"jane"},"object":{"metadata":{"name":"p","labels":{"app":"web"}},"spec":{}},"oldObject":null}}"#;

    /// Evaluates `expression` on a pod; every authorization check is allowed.
    fn eval(expression: &str) -> Result<ConditionsResult, CompileError> {
        use crate::matching::authz::{Decision, Decisions};
        use crate::matching::conditions::Authorized;
        let condition = MatchCondition::compile("c", expression)?;
        let review = ParsedReview::parse(POD.as_bytes()).unwrap();
        let conditions = MatchConditions::new(vec![condition]);
        let mut decisions = Decisions::default();
        for _ in 0..crate::matching::MAX_AUTHORIZATION_ROUNDS {
            match conditions.evaluate_authorized(&review, &mut decisions) {
                Authorized::Done(result) => return Ok(result),
                Authorized::Pending(keys) => {
                    for key in keys {
                        let allowed = Decision {
                            allowed: true,
                            ..Decision::default()
                        };
                        decisions.insert(key, allowed);
                    }
                }
            }
        }
        panic!("{expression}: still pending after every round")
    }

    /// Two-variable comprehensions as kube-apiserver 1.32.0's stored-expression environment
    /// (`ext.TwoVarComprehensions`) compiles and evaluates them: each expected text is what its
    /// CEL compiler printed for the expression (the environment for new expressions, of the
    /// compatibility version 1.31, has none of them).
    #[test]
    fn two_variable_comprehensions_as_cel_go_expands_and_evaluates_them() {
        let matched = |e: &str| matches!(eval(e), Ok(ConditionsResult::Match));
        for e in [
            "[1, 2].all(i, v, v > i)",
            "{'a': 1}.all(k, v, k == 'a' && v == 1)",
            "[1, 2].exists(i, v, i == 1 && v == 2)",
            "!([1, 2, 2].existsOne(i, v, v == 2))",
            "[1, 2].exists_one(i, v, v == 2)",
            "[1, 2, 3].transformList(i, v, i * v + v) == [1, 4, 9]",
            "[1, 2, 3].transformList(i, v, i % 2 == 0, v) == [1, 3]",
            "[1, 2].transformMap(i, v, v * 2) == {0: 2, 1: 4}",
            "{'a': 1}.transformMap(k, v, v > 0, k) == {'a': 'a'}",
            "{'a': 1}.transformMapEntry(k, v, {v: k}) == {1: 'a'}",
            "{'a': 1}.transformList(k, v, k) == ['a'] && {'a': 1}.transformList(k, v, v) == [1]",
            "object.metadata.labels.all(k, v, k == 'app' && v == 'web')",
        ] {
            assert!(matched(e), "{e}: {:?}", eval(e));
        }
        for (e, error) in [
            (
                "{'a': 1, 'b': 1}.transformMapEntry(k, v, {v: k}).size() == 1",
                "insert failed: key 1 already exists",
            ),
            (
                "[1, 2].transformMapEntry(i, v, {'x': v}) == {}",
                "insert failed: key x already exists",
            ),
        ] {
            assert!(
                matches!(eval(e), Ok(ConditionsResult::Error(ref m)) if m.ends_with(error)),
                "{e}: {:?}",
                eval(e)
            );
        }
        for (e, error) in [
            ("[1, 2].all(i, i, true)", "ERROR: <input>:1:15: duplicate variable name: i\n | [1, 2].all(i, i, true)\n | ..............^"),
            ("[1, 2].all(1, v, true)", "ERROR: <input>:1:12: argument must be a simple name\n | [1, 2].all(1, v, true)\n | ...........^"),
            ("[1, 2].transformList(i, v, v) == 'a'", "ERROR: <input>:1:31: found no matching overload for '_==_' applied to '(list(int), string)'"),
            ("{'a': 1}.all(k, v, v.lowerAscii() == 'a')", "ERROR: <input>:1:32: found no matching overload for 'lowerAscii' applied to 'int.()'"),
            ("[1,2].transformMap(i, v, v) == 1", "ERROR: <input>:1:29: found no matching overload for '_==_' applied to '(map(int, int), int)'"),
        ] {
            let got = eval(e).unwrap_err().to_string();
            assert!(got.contains(error), "{e}: {got}");
        }
    }

    /// Every function of the compatibility table works as its example shows.
    #[test]
    fn every_listed_function_works_as_in_kubernetes() {
        let failures: Vec<String> = FUNCTIONS
            .iter()
            .filter_map(|f| match eval(f.example) {
                Ok(ConditionsResult::Match) => None,
                other => Some(format!(
                    "{} ({}): {} -> {other:?}",
                    f.name, f.library, f.example
                )),
            })
            .collect();
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    /// The CEL compatibility table (docs/reference/cel.md) lists every function with its example.
    #[test]
    fn readme_table_lists_every_function() {
        let readme = include_str!("../../docs/reference/cel.md");
        for f in FUNCTIONS {
            let row = format!("| `{}` | `{}` |", f.name, f.example.replace('|', "\\|"));
            assert!(readme.contains(&row), "docs/reference/cel.md lacks {row}");
        }
    }
}
