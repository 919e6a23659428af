//! The Kubernetes authz CEL library for matchConditions' `authorizer` variable (upstream
//! `staging/src/k8s.io/apiserver/pkg/cel/library/authz.go`, costs in `library/cost.go`): the
//! values an expression builds (`authorizer.group(g).resource(r)...check(verb)`) and the
//! decisions it reads. Depends on `cel`, `review` and `names`; no I/O.
//!
//! kube-apiserver answers `check` in-process with its authorizer. The proxy cannot, so `check`
//! never blocks: it looks its [`CheckKey`] up in the decisions the caller supplies for this
//! evaluation ([`Decisions`]) and, when there is none yet, records the key as pending and
//! fails the evaluation. The caller (`dispatch`) asks a SubjectAccessReview for the pending keys
//! and evaluates again; see `MatchConditions::evaluate_authorized`.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use cel::extractors::{Arguments, This};
use cel::objects::{Opaque, Value};
use cel::{ExecutionError, ResolveResult};

use crate::names;
use crate::review::ParsedReview;

/// Who a check is about: the request's `userInfo` (`authenticationv1.UserInfo`), or the
/// service account `authorizer.serviceAccount(namespace, name)` names. What a
/// SubjectAccessReview's `spec.user`, `uid`, `groups` and `extra` carry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, serde::Deserialize)]
pub struct User {
    /// `username`; `""` when the request has none.
    #[serde(default)]
    pub username: String,
    /// `uid`.
    #[serde(default)]
    pub uid: String,
    /// `groups`, in the request's order (kube-apiserver's webhook authorizer keys its cache by
    /// the spec as sent, so order is part of the key).
    #[serde(default)]
    pub groups: Vec<String>,
    /// `extra`.
    #[serde(default)]
    pub extra: BTreeMap<String, Vec<String>>,
}

/// What a resource check is about (upstream `authorizer.AttributesRecord` as `ResourceCheck`
/// builds it; SubjectAccessReview `resourceAttributes`, `version` always `"*"`). Empty strings
/// are unset.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ResourceAttributes {
    /// API group, `""` for the core group.
    pub group: String,
    /// Resource (plural), never empty.
    pub resource: String,
    /// Subresource.
    pub subresource: String,
    /// Namespace.
    pub namespace: String,
    /// Object name.
    pub name: String,
    /// `fieldSelector(...)`: sent as `fieldSelector.rawSelector`.
    pub field_selector: String,
    /// `labelSelector(...)`: sent as `labelSelector.rawSelector`.
    pub label_selector: String,
}

/// What one check is about: a resource, or a non-resource path (`PathCheck`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Attributes {
    /// A resource check: SubjectAccessReview `resourceAttributes`.
    Resource(ResourceAttributes),
    /// A non-resource check: SubjectAccessReview `nonResourceAttributes`; the URL path as
    /// given (never blank).
    NonResource(String),
}

/// One authorization question: a user, a verb and what it is about. Equal keys get the same
/// answer (the cache key of kube-apiserver's webhook authorizer is the SubjectAccessReview spec,
/// which is exactly these fields).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CheckKey {
    /// Who.
    pub user: Arc<User>,
    /// The verb `check` was given.
    pub verb: String,
    /// What.
    pub attributes: Attributes,
}

/// The answer to a check, as the library's `Decision` value reads it (authz.go
/// `decisionVal`): `allowed()`, `reason()`, `errored()`, `error()`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decision {
    /// The authorizer allowed (`DecisionAllow`); false for deny and for no opinion.
    pub allowed: bool,
    /// The authorizer's reason, `""` when it gave none.
    pub reason: String,
    /// Why the authorizer failed, if it did (`error()`; `errored()` is `is_some()`). A failed
    /// check is not a CEL error: `allowed()` is false and the expression goes on.
    pub error: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Values (authz.go `authorizerVal`, `pathCheckVal`, `groupCheckVal`, `resourceCheckVal`,
// `decisionVal`), as `cel` opaque values named by upstream's type names.
// ---------------------------------------------------------------------------------------------

/// Upstream's CEL type names (authz.go): `AuthorizerType`, the `authorizer` variable's.
pub(crate) const AUTHORIZER_TYPE: &str = "kubernetes.authorization.Authorizer";
/// `PathCheckType`: what `path(...)` builds.
pub(crate) const PATH_CHECK_TYPE: &str = "kubernetes.authorization.PathCheck";
/// `GroupCheckType`: what `group(...)` builds.
pub(crate) const GROUP_CHECK_TYPE: &str = "kubernetes.authorization.GroupCheck";
/// `ResourceCheckType`: what `resource(...)` and its setters build, and
/// `authorizer.requestResource`.
pub(crate) const RESOURCE_CHECK_TYPE: &str = "kubernetes.authorization.ResourceCheck";
/// `DecisionType`: what `check(...)` returns.
pub(crate) const DECISION_TYPE: &str = "kubernetes.authorization.Decision";

/// The variable name of the request's own resource check
/// (`RequestResourceAuthorizerVarName` in
/// `staging/src/k8s.io/apiserver/pkg/admission/plugin/cel/compile.go`): one name with a dot in
/// it, which `cel` resolves as the longest qualified prefix.
pub(crate) const REQUEST_RESOURCE_VARIABLE: &str = "authorizer.requestResource";

/// `check`'s cost (`library/cost.go` `CallCost`: "set to allow for only two authorization
/// checks per expression"), charged under `StrictCostEnforcementForWebhooks`, locked on since
/// Kubernetes 1.32 (before, a call costs 1: [`super::CostModel`]).
pub(crate) const CHECK_COST: u64 = 350_000;

#[derive(Debug, PartialEq, Eq)]
struct AuthorizerVal {
    user: Arc<User>,
}

#[derive(Debug, PartialEq, Eq)]
struct PathCheckVal {
    user: Arc<User>,
    path: String,
}

#[derive(Debug, PartialEq, Eq)]
struct GroupCheckVal {
    user: Arc<User>,
    group: String,
}

#[derive(Debug, PartialEq, Eq)]
struct ResourceCheckVal {
    user: Arc<User>,
    attributes: ResourceAttributes,
}

#[derive(Debug, PartialEq, Eq)]
struct DecisionVal(Decision);

macro_rules! opaque {
    ($($t:ty => $name:expr),* $(,)?) => {$(
        impl Opaque for $t {
            fn runtime_type_name(&self) -> &str {
                $name
            }
        }
    )*};
}

opaque! {
    AuthorizerVal => AUTHORIZER_TYPE,
    PathCheckVal => PATH_CHECK_TYPE,
    GroupCheckVal => GROUP_CHECK_TYPE,
    ResourceCheckVal => RESOURCE_CHECK_TYPE,
    DecisionVal => DECISION_TYPE,
}

fn value(v: impl Opaque) -> Value {
    Value::Opaque(Arc::new(v))
}

/// The `authorizer` variable for a request made by `user`.
pub(crate) fn authorizer(user: Arc<User>) -> Value {
    value(AuthorizerVal { user })
}

/// The `authorizer.requestResource` variable (`NewResourceAuthorizerVal`): the original
/// request's group, resource, subresource, namespace and name, no selectors.
pub(crate) fn request_resource(user: Arc<User>, review: &ParsedReview<'_>) -> Value {
    let request = &review.request;
    let resource = request.effective_resource();
    value(ResourceCheckVal {
        user,
        attributes: ResourceAttributes {
            group: resource.group.to_string(),
            resource: resource.resource.to_string(),
            subresource: request.effective_sub_resource().to_string(),
            namespace: request.namespace.to_string(),
            name: request.name.to_string(),
            ..ResourceAttributes::default()
        },
    })
}

impl User {
    /// `request.userInfo` as sent (`authenticationv1.UserInfo`); empty when absent or not an
    /// object of that shape.
    pub(crate) fn from_user_info(raw: Option<&serde_json::value::RawValue>) -> Self {
        raw.and_then(|raw| serde_json::from_str(raw.get()).ok())
            .unwrap_or_default()
    }
}

/// Whether `select` is `authorizer.requestResource`, a variable of its own
/// ([`REQUEST_RESOURCE_VARIABLE`]) rather than a field of `authorizer`; not a `has()` test.
pub(crate) fn is_request_resource(select: &cel::common::ast::SelectExpr) -> bool {
    !select.test
        && select.field == "requestResource"
        && matches!(&select.operand.expr, cel::common::ast::Expr::Ident(name) if name == "authorizer")
}

/// The requesting user, from `request.userInfo` (empty when absent).
pub(crate) fn requesting_user(review: &ParsedReview<'_>) -> Arc<User> {
    Arc::new(User::from_user_info(review.request.user_info))
}

// ---------------------------------------------------------------------------------------------
// Functions (authz.go `authzLibraryDecls`, `authzSelectorsLibraryDecls`)
// ---------------------------------------------------------------------------------------------

/// The function name carried by the library's own errors (`path must not be empty`), which
/// `conditions` prints verbatim as cel-go does.
pub(crate) const LIBRARY_ERROR: &str = "kubernetes.authorization";

/// The function name of the error a check without a decision yet returns; that evaluation is
/// discarded, so the text is never shown.
const PENDING: &str = "kubernetes.authorization.pending";

/// A library function as `cel` calls it: the receiver as `This`, then the arguments.
type LibraryFunction = fn(This<Value>, Arguments) -> ResolveResult;

/// Every function of the library, by name.
pub(crate) const FUNCTIONS: [(&str, LibraryFunction); 14] = [
    ("path", path),
    ("group", group),
    ("serviceAccount", service_account),
    ("resource", resource),
    ("subresource", subresource),
    ("namespace", namespace),
    ("name", name),
    ("fieldSelector", field_selector),
    ("labelSelector", label_selector),
    ("check", check),
    ("allowed", allowed),
    ("reason", reason),
    ("errored", errored),
    ("error", error),
];

/// A CEL type name for `v`, for overload errors.
fn type_name(v: &Value) -> String {
    match v {
        Value::Opaque(o) => o.runtime_type_name().to_string(),
        Value::String(_) => "string".into(),
        Value::Int(_) => "int".into(),
        Value::UInt(_) => "uint".into(),
        Value::Float(_) => "double".into(),
        Value::Bool(_) => "bool".into(),
        Value::Bytes(_) => "bytes".into(),
        Value::List(_) => "list".into(),
        Value::Map(_) => "map".into(),
        Value::Null => "null_type".into(),
        other => format!("{:?}", other.type_of()).to_lowercase(),
    }
}

/// cel-go's `no such overload` for a member call on `this` with `args`.
fn no_overload(function: &str, this: &Value, args: &[Value]) -> ExecutionError {
    let types = std::iter::once(this).chain(args).map(type_name).collect();
    ExecutionError::no_such_member_overload(function, types)
}

/// The receiver as `T` and the string arguments, exactly `N` of them; no such overload
/// otherwise.
fn receiver<'a, T: 'static, const N: usize>(
    function: &str,
    this: &'a Value,
    args: &'a [Value],
) -> Result<(&'a T, [&'a str; N]), ExecutionError> {
    let receiver = match this {
        Value::Opaque(o) => o.downcast_ref::<T>(),
        _ => None,
    };
    let strings: Option<Vec<&str>> = args
        .iter()
        .map(|a| match a {
            Value::String(s) => Some(s.as_str()),
            _ => None,
        })
        .collect();
    match (
        receiver,
        strings.and_then(|s| <[&str; N]>::try_from(s).ok()),
    ) {
        (Some(r), Some(s)) => Ok((r, s)),
        _ => Err(no_overload(function, this, args)),
    }
}

fn library_error(message: &str) -> ExecutionError {
    ExecutionError::function_error(LIBRARY_ERROR, message)
}

/// `authorizer.path(string) -> PathCheck`; a blank path is an error.
fn path(This(this): This<Value>, Arguments(args): Arguments) -> ResolveResult {
    let (a, [path]) = receiver::<AuthorizerVal, 1>("path", &this, &args)?;
    if path.trim().is_empty() {
        return Err(library_error("path must not be empty"));
    }
    Ok(value(PathCheckVal {
        user: a.user.clone(),
        path: path.to_string(),
    }))
}

/// `authorizer.group(string) -> GroupCheck`; `''` is the core group.
fn group(This(this): This<Value>, Arguments(args): Arguments) -> ResolveResult {
    let (a, [group]) = receiver::<AuthorizerVal, 1>("group", &this, &args)?;
    Ok(value(GroupCheckVal {
        user: a.user.clone(),
        group: group.to_string(),
    }))
}

/// `authorizer.serviceAccount(namespace, name) -> Authorizer` for the service account's user
/// (`serviceaccount.ServiceAccountInfo.UserInfo` in
/// `staging/src/k8s.io/apiserver/pkg/authentication/serviceaccount/util.go`): the name is
/// checked first (a DNS-1123 subdomain), then the namespace (a DNS-1123 label).
fn service_account(This(this): This<Value>, Arguments(args): Arguments) -> ResolveResult {
    let (_, [namespace, name]) = receiver::<AuthorizerVal, 2>("serviceAccount", &this, &args)?;
    if !names::is_dns1123_subdomain(name) {
        return Err(library_error("Invalid service account name"));
    }
    if !names::is_dns1123_label(namespace) {
        return Err(library_error("Invalid service account namespace"));
    }
    Ok(authorizer(Arc::new(service_account_user(namespace, name))))
}

/// The user a service account authenticates as: `system:serviceaccount:<ns>:<name>`, in the
/// groups `system:serviceaccounts` and `system:serviceaccounts:<ns>`, no uid, no extra.
pub(crate) fn service_account_user(namespace: &str, name: &str) -> User {
    User {
        username: format!("system:serviceaccount:{namespace}:{name}"),
        groups: vec![
            "system:serviceaccounts".to_string(),
            format!("system:serviceaccounts:{namespace}"),
        ],
        ..User::default()
    }
}

/// `GroupCheck.resource(string) -> ResourceCheck`; a blank resource is an error.
fn resource(This(this): This<Value>, Arguments(args): Arguments) -> ResolveResult {
    let (g, [resource]) = receiver::<GroupCheckVal, 1>("resource", &this, &args)?;
    if resource.trim().is_empty() {
        return Err(library_error("resource must not be empty"));
    }
    Ok(value(ResourceCheckVal {
        user: g.user.clone(),
        attributes: ResourceAttributes {
            group: g.group.clone(),
            resource: resource.to_string(),
            ..ResourceAttributes::default()
        },
    }))
}

/// A `ResourceCheck` builder that sets one field (`subresource`, `namespace`, `name`,
/// `fieldSelector`, `labelSelector`); no validation, as upstream.
fn set_field(
    function: &str,
    this: &Value,
    args: &[Value],
    set: fn(&mut ResourceAttributes, String),
) -> ResolveResult {
    let (r, [v]) = receiver::<ResourceCheckVal, 1>(function, this, args)?;
    let mut attributes = r.attributes.clone();
    set(&mut attributes, v.to_string());
    Ok(value(ResourceCheckVal {
        user: r.user.clone(),
        attributes,
    }))
}

fn subresource(This(this): This<Value>, Arguments(args): Arguments) -> ResolveResult {
    set_field("subresource", &this, &args, |r, v| r.subresource = v)
}

fn namespace(This(this): This<Value>, Arguments(args): Arguments) -> ResolveResult {
    set_field("namespace", &this, &args, |r, v| r.namespace = v)
}

fn name(This(this): This<Value>, Arguments(args): Arguments) -> ResolveResult {
    set_field("name", &this, &args, |r, v| r.name = v)
}

fn field_selector(This(this): This<Value>, Arguments(args): Arguments) -> ResolveResult {
    set_field("fieldSelector", &this, &args, |r, v| r.field_selector = v)
}

fn label_selector(This(this): This<Value>, Arguments(args): Arguments) -> ResolveResult {
    set_field("labelSelector", &this, &args, |r, v| r.label_selector = v)
}

/// `PathCheck.check(verb)` / `ResourceCheck.check(verb) -> Decision`: the decision the
/// evaluation was given for this key, or, without one, the key is recorded as pending and
/// the evaluation fails (see [`Evaluation`]).
fn check(This(this): This<Value>, Arguments(args): Arguments) -> ResolveResult {
    let key = if let Ok((p, [verb])) = receiver::<PathCheckVal, 1>("check", &this, &args) {
        CheckKey {
            user: p.user.clone(),
            verb: verb.to_string(),
            attributes: Attributes::NonResource(p.path.clone()),
        }
    } else {
        let (r, [verb]) = receiver::<ResourceCheckVal, 1>("check", &this, &args)?;
        CheckKey {
            user: r.user.clone(),
            verb: verb.to_string(),
            attributes: Attributes::Resource(r.attributes.clone()),
        }
    };
    EVALUATION.with_borrow_mut(|evaluation| {
        let Some(evaluation) = evaluation else {
            return Err(library_error("no authorizer is available"));
        };
        if let Some(decision) = evaluation.decisions.get(&key) {
            return Ok(value(DecisionVal(decision)));
        }
        // Only the first undecided check of a condition is asked for: what follows it may be
        // a check kube-apiserver never reaches (`a && b` with `a` false), and `cel` goes on
        // past an error where cel-go would have short-circuited on the value.
        if !evaluation.condition_pending {
            evaluation.condition_pending = true;
            if !evaluation.pending.contains(&key) {
                evaluation.pending.push(key);
            }
        }
        Err(ExecutionError::function_error(PENDING, "decision pending"))
    })
}

fn decision<'a>(
    function: &str,
    this: &'a Value,
    args: &'a [Value],
) -> Result<&'a Decision, ExecutionError> {
    receiver::<DecisionVal, 0>(function, this, args).map(|(d, [])| &d.0)
}

/// `Decision.allowed() -> bool`: the authorizer allowed (no opinion and deny are false).
fn allowed(This(this): This<Value>, Arguments(args): Arguments) -> ResolveResult {
    Ok(Value::Bool(decision("allowed", &this, &args)?.allowed))
}

/// `Decision.reason() -> string`.
fn reason(This(this): This<Value>, Arguments(args): Arguments) -> ResolveResult {
    let d = decision("reason", &this, &args)?;
    Ok(Value::String(Arc::new(d.reason.clone())))
}

/// `Decision.errored() -> bool`: the authorizer failed.
fn errored(This(this): This<Value>, Arguments(args): Arguments) -> ResolveResult {
    Ok(Value::Bool(
        decision("errored", &this, &args)?.error.is_some(),
    ))
}

/// `Decision.error() -> string`: why the authorizer failed, `""` when it did not.
fn error(This(this): This<Value>, Arguments(args): Arguments) -> ResolveResult {
    let d = decision("error", &this, &args)?;
    Ok(Value::String(Arc::new(d.error.clone().unwrap_or_default())))
}

// ---------------------------------------------------------------------------------------------
// One evaluation's decisions
// ---------------------------------------------------------------------------------------------

/// Answers known without waiting: the SubjectAccessReview cache (`crate::authorizer`), which
/// `check` reads during the evaluation so that cached checks need no second round.
pub trait DecisionCache: Send + Sync {
    /// The fresh cached decision for `key`, if any.
    fn cached(&self, key: &CheckKey) -> Option<Decision>;
}

/// The decisions of one admission's checks so far; `MatchConditions::evaluate_authorized`
/// reads them (then the cache, if any) and the caller adds the answers to what it reports
/// pending.
#[derive(Default)]
pub struct Decisions {
    known: HashMap<CheckKey, Decision>,
    cache: Option<Arc<dyn DecisionCache>>,
}

impl std::fmt::Debug for Decisions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decisions")
            .field("known", &self.known)
            .field("cache", &self.cache.is_some())
            .finish()
    }
}

impl Decisions {
    /// No decisions yet; checks not known are looked up in `cache` before they are pending.
    pub fn with_cache(cache: Arc<dyn DecisionCache>) -> Self {
        Decisions {
            known: HashMap::new(),
            cache: Some(cache),
        }
    }

    /// Records the answer to `key`.
    pub fn insert(&mut self, key: CheckKey, decision: Decision) {
        self.known.insert(key, decision);
    }

    /// The decision for `key`: known, or from the cache (then kept, so that the cache is read
    /// once per key however often the expression reaches the check).
    fn get(&mut self, key: &CheckKey) -> Option<Decision> {
        if let Some(decision) = self.known.get(key) {
            return Some(decision.clone());
        }
        let decision = self.cache.as_ref()?.cached(key)?;
        self.known.insert(key.clone(), decision.clone());
        Some(decision)
    }
}

/// The evaluation in progress on this thread: what `check` reads and where it records keys
/// without a decision. CEL evaluation is synchronous, so a thread-local is enough and the
/// values an expression builds stay plain data.
struct Evaluation {
    decisions: Decisions,
    pending: Vec<CheckKey>,
    /// The current condition already has an undecided check.
    condition_pending: bool,
}

thread_local! {
    static EVALUATION: RefCell<Option<Evaluation>> = const { RefCell::new(None) };
}

/// Runs `f` with `decisions` available to `check`; returns its result and the checks that
/// were reached without a decision (none: the result is final).
pub(crate) fn with_decisions<R>(
    decisions: &mut Decisions,
    f: impl FnOnce() -> R,
) -> (R, Vec<CheckKey>) {
    /// Puts the decisions back, even if `f` unwinds.
    struct Restore<'a>(&'a mut Decisions, Vec<CheckKey>);
    impl Restore<'_> {
        fn restore(&mut self) {
            if let Some(evaluation) = EVALUATION.take() {
                *self.0 = evaluation.decisions;
                self.1 = evaluation.pending;
            }
        }
    }
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            self.restore();
        }
    }
    EVALUATION.set(Some(Evaluation {
        decisions: std::mem::take(decisions),
        pending: Vec::new(),
        condition_pending: false,
    }));
    let mut restore = Restore(decisions, Vec::new());
    let result = f();
    restore.restore();
    (result, std::mem::take(&mut restore.1))
}

/// Marks the start of the next condition: each condition may ask for one undecided check.
pub(crate) fn next_condition() {
    EVALUATION.with_borrow_mut(|e| {
        if let Some(e) = e {
            e.condition_pending = false;
        }
    });
}

/// Whether an execution error is the library's own (printed verbatim, as cel-go prints
/// `types.NewErr`): its message.
pub(crate) fn library_message(error: &ExecutionError) -> Option<&str> {
    match error {
        ExecutionError::FunctionError { function, message } if function == LIBRARY_ERROR => {
            Some(message)
        }
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// Types at load: the part of cel-go's type checker the library needs
// ---------------------------------------------------------------------------------------------

/// What is known at load of an expression's type: one of the library's types, a known other
/// type, or `dyn` (anything taken from the request).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StaticType {
    /// `kubernetes.authorization.*`, by upstream's name.
    Authz(&'static str),
    /// A type outside the library (`string`, `int`, `bool`, `list`...).
    Other(&'static str),
    /// Unknown until run time.
    Dyn,
}

impl StaticType {
    fn name(self) -> &'static str {
        match self {
            StaticType::Authz(n) | StaticType::Other(n) => n,
            StaticType::Dyn => "dyn",
        }
    }
}

/// An expression the Kubernetes CEL compiler refuses for its use of the library.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum TypeError {
    /// A library function called on a receiver, or with arguments, it has no overload for
    /// (cel-go `checker/errors.go` `noMatchingOverload`): e.g. KEP-3716's draft
    /// `authorizer.resource(group, resource, '*')`.
    #[error("found no matching overload for '{function}' applied to '{signature}'")]
    NoMatchingOverload {
        /// The function.
        function: String,
        /// Receiver and argument types as cel-go prints them (`Authorizer.(string)`).
        signature: String,
    },
    /// A field selected on a library value other than `authorizer.requestResource`
    /// (cel-go `undefinedField`).
    #[error("undefined field '{0}'")]
    UndefinedField(String),
}

/// The member overloads of the library: receiver, function, argument count → result
/// (`authzLibraryDecls`, `authzSelectorsLibraryDecls` in authz.go; every argument a string).
const OVERLOADS: [(&str, &str, usize, StaticType); 15] = [
    (
        AUTHORIZER_TYPE,
        "path",
        1,
        StaticType::Authz(PATH_CHECK_TYPE),
    ),
    (
        AUTHORIZER_TYPE,
        "group",
        1,
        StaticType::Authz(GROUP_CHECK_TYPE),
    ),
    (
        AUTHORIZER_TYPE,
        "serviceAccount",
        2,
        StaticType::Authz(AUTHORIZER_TYPE),
    ),
    (
        GROUP_CHECK_TYPE,
        "resource",
        1,
        StaticType::Authz(RESOURCE_CHECK_TYPE),
    ),
    (
        RESOURCE_CHECK_TYPE,
        "subresource",
        1,
        StaticType::Authz(RESOURCE_CHECK_TYPE),
    ),
    (
        RESOURCE_CHECK_TYPE,
        "namespace",
        1,
        StaticType::Authz(RESOURCE_CHECK_TYPE),
    ),
    (
        RESOURCE_CHECK_TYPE,
        "name",
        1,
        StaticType::Authz(RESOURCE_CHECK_TYPE),
    ),
    (
        RESOURCE_CHECK_TYPE,
        "fieldSelector",
        1,
        StaticType::Authz(RESOURCE_CHECK_TYPE),
    ),
    (
        RESOURCE_CHECK_TYPE,
        "labelSelector",
        1,
        StaticType::Authz(RESOURCE_CHECK_TYPE),
    ),
    (
        RESOURCE_CHECK_TYPE,
        "check",
        1,
        StaticType::Authz(DECISION_TYPE),
    ),
    (
        PATH_CHECK_TYPE,
        "check",
        1,
        StaticType::Authz(DECISION_TYPE),
    ),
    (DECISION_TYPE, "allowed", 0, StaticType::Other("bool")),
    (DECISION_TYPE, "reason", 0, StaticType::Other("string")),
    (DECISION_TYPE, "errored", 0, StaticType::Other("bool")),
    (DECISION_TYPE, "error", 0, StaticType::Other("string")),
];

/// Whether `function` is one of the library's.
pub(crate) fn is_library_function(function: &str) -> bool {
    FUNCTIONS.iter().any(|(f, _)| *f == function)
}

/// The static type of `expr`, refusing what cel-go's checker refuses about the library: a
/// library function on a receiver of a known other type or of the wrong library type, with the
/// wrong number of arguments, with a non-string literal argument, or called as a global
/// function; and fields selected on library values (`authorizer.requestResource` aside).
/// `bound` lists comprehension variables (never `authorizer`).
///
/// # Errors
/// The first [`TypeError`], in evaluation order.
///
/// Over 80 lines: one match over every kind of expression.
pub(crate) fn static_type(
    expr: &cel::common::ast::Expr,
    bound: &mut Vec<String>,
) -> Result<StaticType, TypeError> {
    use cel::common::ast::{EntryExpr, Expr, LiteralValue};
    Ok(match expr {
        Expr::Ident(name) if name == "authorizer" && !bound.contains(name) => {
            StaticType::Authz(AUTHORIZER_TYPE)
        }
        Expr::Ident(_) | Expr::Unspecified => StaticType::Dyn,
        Expr::Literal(literal) => StaticType::Other(match literal {
            LiteralValue::Boolean(_) => "bool",
            LiteralValue::Int(_) => "int",
            LiteralValue::UInt(_) => "uint",
            LiteralValue::Double(_) => "double",
            LiteralValue::String(_) => "string",
            LiteralValue::Bytes(_) => "bytes",
            LiteralValue::Null => "null_type",
        }),
        // `has(authorizer.requestResource)` is a field test, which cel-go refuses (below).
        Expr::Select(select)
            if is_request_resource(select) && !bound.iter().any(|b| b == "authorizer") =>
        {
            StaticType::Authz(RESOURCE_CHECK_TYPE)
        }
        Expr::Select(select) => match static_type(&select.operand.expr, bound)? {
            StaticType::Authz(_) => return Err(TypeError::UndefinedField(select.field.clone())),
            _ if select.test => StaticType::Other("bool"),
            _ => StaticType::Dyn,
        },
        Expr::List(list) => {
            for e in &list.elements {
                static_type(&e.expr, bound)?;
            }
            StaticType::Other("list")
        }
        Expr::Map(cel::common::ast::MapExpr { entries })
        | Expr::Struct(cel::common::ast::StructExpr { entries, .. }) => {
            for entry in entries {
                match &entry.expr {
                    EntryExpr::StructField(f) => {
                        static_type(&f.value.expr, bound)?;
                    }
                    EntryExpr::MapEntry(m) => {
                        static_type(&m.key.expr, bound)?;
                        static_type(&m.value.expr, bound)?;
                    }
                }
            }
            StaticType::Other("map")
        }
        Expr::Comprehension(c) => {
            static_type(&c.iter_range.expr, bound)?;
            static_type(&c.accu_init.expr, bound)?;
            let before = bound.len();
            bound.push(c.iter_var.clone());
            bound.extend(c.iter_var2.clone());
            bound.push(c.accu_var.clone());
            let mut result = Ok(StaticType::Dyn);
            for e in [&c.loop_cond, &c.loop_step, &c.result] {
                result = static_type(&e.expr, bound);
                if result.is_err() {
                    break;
                }
            }
            bound.truncate(before);
            result?;
            StaticType::Dyn
        }
        Expr::Call(call) => {
            let receiver = match &call.target {
                Some(t) => match &t.expr {
                    Expr::Ident(ns) if super::cel_names::is_namespace(ns) => None,
                    other => Some(static_type(other, bound)?),
                },
                None => None,
            };
            let mut args = Vec::with_capacity(call.args.len());
            for a in &call.args {
                args.push(static_type(&a.expr, bound)?);
            }
            call_type(&call.func_name, receiver, call.target.is_some(), &args)?
        }
    })
}

/// The result type of one call, given its receiver's and arguments' types.
fn call_type(
    function: &str,
    receiver: Option<StaticType>,
    member: bool,
    args: &[StaticType],
) -> Result<StaticType, TypeError> {
    let refuse = || {
        let list = args.iter().map(|a| a.name()).collect::<Vec<_>>().join(", ");
        TypeError::NoMatchingOverload {
            function: function.to_string(),
            signature: match receiver {
                Some(r) => format!("{}.({list})", r.name()),
                None => format!("({list})"),
            },
        }
    };
    if !is_library_function(function) {
        // Another function on a library value: only equality and the like take any type.
        return match receiver {
            Some(StaticType::Authz(_)) if member => Err(refuse()),
            _ => Ok(StaticType::Dyn),
        };
    }
    let strings = args
        .iter()
        .all(|a| matches!(a, StaticType::Dyn | StaticType::Other("string")));
    match receiver {
        None if !member => Err(refuse()),
        None | Some(StaticType::Dyn) => {
            // A `dyn` receiver is checked at run time, as cel-go does.
            let results: Vec<StaticType> = OVERLOADS
                .iter()
                .filter(|(_, f, n, _)| *f == function && *n == args.len())
                .map(|o| o.3)
                .collect();
            match results.as_slice() {
                [] => Err(refuse()),
                _ if !strings => Err(refuse()),
                [one] => Ok(*one),
                _ => Ok(StaticType::Dyn),
            }
        }
        Some(StaticType::Authz(receiver)) => OVERLOADS
            .iter()
            .find(|(r, f, n, _)| *r == receiver && *f == function && *n == args.len())
            .filter(|_| strings)
            .map(|o| o.3)
            .ok_or_else(refuse),
        Some(StaticType::Other(_)) => Err(refuse()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matching::conditions::{Authorized, ConditionEvaluation};
    use crate::matching::{ConditionsResult, MatchCondition, MatchConditions};

    /// A request by jane (uid, groups, extra) to update a deployment's scale subresource,
    /// converted: `requestResource` is what the user asked for.
    const REVIEW: &str = r#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u","kind":{"group":"autoscaling","version":"v1","kind":"Scale"},"resource":{"group":"apps","version":"v1","resource":"deployments"},"subResource":"scale","requestResource":{"group":"apps","version":"v1beta2","resource":"deployments"},"requestSubResource":"scale","name":"web","namespace":"shop","operation":"UPDATE","userInfo":{"username":"jane","uid":"42","groups":["devs","system:authenticated"],"extra":{"scopes":["a"]}},"object":{"metadata":{"name":"web"}},"oldObject":null}}"#;

    const BREAKGLASS: &str = "!authorizer.group('admissionregistration.k8s.io').resource('validatingwebhookconfigurations').name('my-webhook').check('breakglass').allowed()";

    fn conditions(list: &[&str]) -> MatchConditions {
        MatchConditions::new(
            list.iter()
                .enumerate()
                .map(|(i, e)| MatchCondition::compile(&format!("c{i}"), e).unwrap())
                .collect(),
        )
    }

    fn jane() -> Arc<User> {
        Arc::new(User {
            username: "jane".into(),
            uid: "42".into(),
            groups: vec!["devs".into(), "system:authenticated".into()],
            extra: [("scopes".to_string(), vec!["a".to_string()])].into(),
        })
    }

    fn resource_key(
        user: Arc<User>,
        group: &str,
        resource: &str,
        name: &str,
        verb: &str,
    ) -> CheckKey {
        CheckKey {
            user,
            verb: verb.into(),
            attributes: Attributes::Resource(ResourceAttributes {
                group: group.into(),
                resource: resource.into(),
                name: name.into(),
                ..ResourceAttributes::default()
            }),
        }
    }

    fn decision(allowed: bool) -> Decision {
        Decision {
            allowed,
            reason: if allowed {
                "RBAC: allowed".into()
            } else {
                String::new()
            },
            error: None,
        }
    }

    /// Evaluates `list`, answering each round's keys with `answer`; returns the result and
    /// every round's keys.
    fn run(
        list: &[&str],
        answer: impl Fn(&CheckKey) -> Decision,
    ) -> (ConditionsResult, Vec<Vec<CheckKey>>) {
        let review = ParsedReview::parse(REVIEW.as_bytes()).unwrap();
        let conditions = conditions(list);
        let mut decisions = Decisions::default();
        let mut rounds = Vec::new();
        for _ in 0..crate::matching::MAX_AUTHORIZATION_ROUNDS {
            match conditions.evaluate_authorized(&review, &mut decisions) {
                Authorized::Done(result) => return (result, rounds),
                Authorized::Pending(keys) => {
                    for key in &keys {
                        decisions.insert(key.clone(), answer(key));
                    }
                    rounds.push(keys);
                }
            }
        }
        panic!("still pending after every round: {rounds:?}")
    }

    /// KEP-3716's example: a user allowed to `breakglass` on the webhook's configuration skips
    /// it; anyone else gets the webhook. One check, for the requesting user, version `*`.
    #[test]
    fn breakglass_both_ways() {
        let key = resource_key(
            jane(),
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations",
            "my-webhook",
            "breakglass",
        );
        let (result, rounds) = run(&[BREAKGLASS], |_| decision(true));
        assert_eq!(
            result,
            ConditionsResult::NoMatch {
                condition: "c0".into()
            }
        );
        assert_eq!(rounds, vec![vec![key.clone()]]);
        let (result, rounds) = run(&[BREAKGLASS], |_| decision(false));
        assert_eq!(result, ConditionsResult::Match);
        assert_eq!(rounds, vec![vec![key]]);
    }

    /// A check the cache answers needs no round: the first evaluation is the last, and the
    /// cache is read once per key even though the cost walk and the evaluation both reach it.
    #[test]
    fn cached_checks_decide_in_one_evaluation() {
        struct Cache(std::sync::atomic::AtomicUsize);
        impl DecisionCache for Cache {
            fn cached(&self, _: &CheckKey) -> Option<Decision> {
                self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Some(decision(true))
            }
        }
        let cache = Arc::new(Cache(Default::default()));
        let review = ParsedReview::parse(REVIEW.as_bytes()).unwrap();
        let mut decisions = Decisions::with_cache(cache.clone());
        match conditions(&[BREAKGLASS]).evaluate_authorized(&review, &mut decisions) {
            Authorized::Done(result) => {
                assert_eq!(
                    result,
                    ConditionsResult::NoMatch {
                        condition: "c0".into()
                    }
                );
            }
            Authorized::Pending(keys) => panic!("a round for {keys:?}"),
        }
        assert_eq!(cache.0.load(std::sync::atomic::Ordering::Relaxed), 1);
    }

    /// A failed authorization is a decision, not a CEL error: `allowed()` is false, `errored()`
    /// true and `error()` the reason, so the breakglass webhook is called.
    #[test]
    fn an_errored_decision_is_not_an_evaluation_error() {
        let failed = |_: &CheckKey| Decision {
            allowed: false,
            reason: String::new(),
            error: Some("SubjectAccessReview failed: 403 forbidden".into()),
        };
        assert_eq!(run(&[BREAKGLASS], failed).0, ConditionsResult::Match);
        let reads = "authorizer.path('/x').check('get').errored() && authorizer.path('/x').check('get').error().contains('403')";
        assert_eq!(run(&[reads], failed).0, ConditionsResult::Match);
    }

    /// `authorizer.requestResource`: the original request's group, resource and subresource
    /// (`requestResource`, `requestSubResource`), its namespace and name.
    #[test]
    fn request_resource_is_the_original_request() {
        let (result, rounds) = run(
            &["authorizer.requestResource.check('update').allowed()"],
            |_| decision(true),
        );
        assert_eq!(result, ConditionsResult::Match);
        assert_eq!(rounds[0][0].verb, "update");
        assert_eq!(
            rounds[0][0].attributes,
            Attributes::Resource(ResourceAttributes {
                group: "apps".into(),
                resource: "deployments".into(),
                subresource: "scale".into(),
                namespace: "shop".into(),
                name: "web".into(),
                ..ResourceAttributes::default()
            })
        );
    }

    /// Every builder, the path check and the service account's user.
    #[test]
    fn builders_path_and_service_account() {
        let expr = "authorizer.serviceAccount('ci', 'builder').group('').resource('pods').subresource('log').namespace('ci').name('p').fieldSelector('spec.nodeName=n').labelSelector('app=web').check('get').allowed() && authorizer.path('/healthz').check('get').allowed()";
        let (result, rounds) = run(&[expr], |_| decision(true));
        assert_eq!(result, ConditionsResult::Match);
        let keys: Vec<&CheckKey> = rounds.iter().flatten().collect();
        assert_eq!(keys.len(), 2, "{rounds:?}");
        assert_eq!(
            *keys[0],
            CheckKey {
                user: Arc::new(User {
                    username: "system:serviceaccount:ci:builder".into(),
                    groups: vec![
                        "system:serviceaccounts".into(),
                        "system:serviceaccounts:ci".into()
                    ],
                    ..User::default()
                }),
                verb: "get".into(),
                attributes: Attributes::Resource(ResourceAttributes {
                    group: String::new(),
                    resource: "pods".into(),
                    subresource: "log".into(),
                    namespace: "ci".into(),
                    name: "p".into(),
                    field_selector: "spec.nodeName=n".into(),
                    label_selector: "app=web".into(),
                }),
            }
        );
        assert_eq!(
            *keys[1],
            CheckKey {
                user: jane(),
                verb: "get".into(),
                attributes: Attributes::NonResource("/healthz".into()),
            }
        );
    }

    /// cel-go short-circuits on values: with the first check denied, the second is never asked.
    #[test]
    fn a_check_kube_apiserver_would_not_reach_is_not_asked() {
        let expr = "authorizer.path('/a').check('get').allowed() && authorizer.path('/b').check('get').allowed()";
        let (result, rounds) = run(&[expr], |_| decision(false));
        assert_eq!(
            result,
            ConditionsResult::NoMatch {
                condition: "c0".into()
            }
        );
        assert_eq!(rounds.len(), 1, "{rounds:?}");
        let (result, rounds) = run(&[expr], |_| decision(true));
        assert_eq!(result, ConditionsResult::Match);
        assert_eq!(rounds.len(), 2, "{rounds:?}");
    }

    /// Upstream's argument errors, verbatim, as evaluation errors (failurePolicy decides).
    #[test]
    fn argument_errors_as_upstream() {
        for (expr, message) in [
            (
                "authorizer.path('').check('get').allowed()",
                "path must not be empty",
            ),
            (
                "authorizer.path('  ').check('get').allowed()",
                "path must not be empty",
            ),
            (
                "authorizer.group('').resource(' ').check('get').allowed()",
                "resource must not be empty",
            ),
            (
                "authorizer.serviceAccount('ns', 'Bad_Name').path('/x').check('get').allowed()",
                "Invalid service account name",
            ),
            (
                "authorizer.serviceAccount('bad.ns', 'sa').path('/x').check('get').allowed()",
                "Invalid service account namespace",
            ),
            (
                "authorizer.serviceAccount('bad.ns', 'Bad').path('/x').check('get').allowed()",
                "Invalid service account name",
            ),
        ] {
            let (result, rounds) = run(&[expr], |_| decision(true));
            assert_eq!(
                result,
                ConditionsResult::Error(format!(
                    "expression '{expr}' resulted in error: {message}"
                ))
            );
            assert!(rounds.is_empty(), "{expr}: {rounds:?}");
        }
    }

    /// `check` costs 350000 (library/cost.go): the breakglass expression 350006, and a third
    /// check in one expression runs over the per-call limit (1,000,000). cel-go charges a call
    /// after making it, so kube-apiserver authorizes the third check and then throws its
    /// answer away; the proxy charges before asking and saves that SubjectAccessReview.
    #[test]
    fn check_costs_as_upstream() {
        let review = ParsedReview::parse(REVIEW.as_bytes()).unwrap();
        let conditions = conditions(&[BREAKGLASS]);
        let mut decisions = Decisions::default();
        decisions.insert(
            resource_key(
                jane(),
                "admissionregistration.k8s.io",
                "validatingwebhookconfigurations",
                "my-webhook",
                "breakglass",
            ),
            decision(false),
        );
        let (each, pending) = with_decisions(&mut decisions, || conditions.evaluate_each(&review));
        assert!(pending.is_empty());
        assert_eq!(
            each,
            vec![ConditionEvaluation {
                value: Ok("true".into()),
                cost: Some(350_006)
            }]
        );
        let three = "authorizer.path('/a').check('get').allowed() || authorizer.path('/b').check('get').allowed() || authorizer.path('/c').check('get').allowed()";
        let (result, rounds) = run(&[three], |_| decision(false));
        assert_eq!(
            result,
            ConditionsResult::Error(format!(
                "expression '{three}' resulted in error: operation cancelled: actual cost limit exceeded"
            ))
        );
        assert_eq!(rounds.iter().flatten().count(), 2, "{rounds:?}");
    }

    /// `fieldSelector` and `labelSelector` cost a selector parse (library/cost.go
    /// `selectorCostEstimate`): 10 + ceil(0.1 n) + ceil(0.5 n) x 50 for n characters, 512 for
    /// `spec.nodeName=node-1` (20).
    #[test]
    fn selectors_cost_a_parse() {
        let review = ParsedReview::parse(REVIEW.as_bytes()).unwrap();
        let expr = "authorizer.group('').resource('pods').fieldSelector('spec.nodeName=node-1').check('list').allowed()";
        let conditions = conditions(&[expr]);
        let mut decisions = Decisions::default();
        let (_, rounds) = run(&[expr], |_| decision(true));
        decisions.insert(rounds[0][0].clone(), decision(true));
        let (each, _) = with_decisions(&mut decisions, || conditions.evaluate_each(&review));
        // authorizer 1, group 1, resource 1, fieldSelector 512, check 350000, allowed 1.
        assert_eq!(each[0].cost, Some(350_516));
    }

    /// Checks across a webhook's conditions share its budget (2,500,000): four conditions of
    /// two checks each run it out in the fourth, and the webhook's conditions fail as a whole.
    #[test]
    fn checks_share_the_webhook_s_budget() {
        let conditions: Vec<String> = (0..4)
            .map(|i| format!("authorizer.path('/a{i}').check('get').allowed() || authorizer.path('/b{i}').check('get').allowed()"))
            .collect();
        let list: Vec<&str> = conditions.iter().map(String::as_str).collect();
        let (result, rounds) = run(&list, |_| decision(false));
        assert_eq!(
            result,
            ConditionsResult::Error(crate::matching::cost::OUT_OF_BUDGET_ERROR.to_string())
        );
        assert_eq!(rounds.iter().flatten().count(), 8, "{rounds:?}");
    }

    /// What kube-apiserver's type checker refuses at load, and what it leaves to run time.
    #[test]
    fn load_time_types() {
        for (expr, want) in [
            (
                "authorizer.resource('admissionregistration.k8s.io', 'validatingwebhookconfigurations', '*').check('breakglass').denied()",
                "undeclared reference to 'denied' (in container '')",
            ),
            (
                "!authorizer.resource('admissionregistration.k8s.io', 'validatingwebhookconfigurations', '*').check('breakglass').allowed()",
                "found no matching overload for 'resource' applied to 'kubernetes.authorization.Authorizer.(string, string, string)'",
            ),
            ("'x'.check('get').allowed()", "found no matching overload for 'check' applied to 'string.(string)'"),
            ("authorizer.path(1).check('get').allowed()", "found no matching overload for 'path' applied to 'kubernetes.authorization.Authorizer.(int)'"),
            ("check(authorizer, 'get')", "found no matching overload for 'check'"),
            // cel-go's checker words it so for the library's types (`authz.go` declares them
            // without fields but `requestResource`).
            ("authorizer.user == 'x'", "ERROR: <input>:1:11: unexpected failed resolution of 'kubernetes.authorization.Authorizer'"),
            ("has(authorizer.requestResource)", "ERROR: <input>:1:4: unexpected failed resolution of 'kubernetes.authorization.Authorizer'"),
            ("authorizer.size() == 1", "found no matching overload for 'size'"),
            ("authorizer.path('/x').check('get').reason()", "must evaluate to bool but got string"),
            ("authorizer.path('/x').check('get')", "must evaluate to bool but got kubernetes.authorization.Decision"),
        ] {
            let err = MatchCondition::compile("c", expr).unwrap_err().to_string();
            assert!(err.contains(want), "{expr}: {err}");
        }
        // A `dyn` receiver compiles and fails when run, as with cel-go.
        let expr = "object.metadata.check('get').allowed()";
        MatchCondition::compile("c", expr).unwrap();
        let (result, rounds) = run(&[expr], |_| decision(true));
        assert!(
            matches!(result, ConditionsResult::Error(e) if e.contains("check")),
            "{expr}"
        );
        assert!(rounds.is_empty());
    }
}
