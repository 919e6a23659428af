//! The part of cel-go's type checker (`checker/checker.go`) that kube-apiserver refuses
//! expressions with at create, for the types the admission environment declares: `request`
//! (`kubernetes.AdmissionRequest`) and `namespaceObject` (`kubernetes.Namespace`), built by
//! `BuildRequestType` / `BuildNamespaceType` in
//! `staging/src/k8s.io/apiserver/pkg/admission/plugin/cel/compile.go`; `object`, `oldObject`,
//! `params` dynamic; literals; the standard operators and functions (`cel-go`'s
//! `common/stdlib`), with the base environment's homogeneous aggregate literals and
//! cross-type numeric comparisons.
//!
//! The Kubernetes libraries' functions are checked against their overloads ([`LIBRARY`]:
//! `staging/src/k8s.io/apiserver/pkg/cel/library/*.go`, cel-go's `ext/strings.go` and
//! `ext/sets.go`), and a policy's `variables` are typed as `composition.go` types them: each
//! one the type its expression checked to (`CompileAndStoreVariable`, through
//! `convertCelTypeToDeclType`: scalars, lists and maps kept, anything else `dyn`).
//!
//! Also typed: the authorizer's types, the optional types, type values, two-variable
//! comprehensions, and the result as `CompileCELExpression` wants it (a `dyn` result is
//! refused). cel-go's `string.format` validator is checked here too.
//!
//! It errs towards accepting: a function it has no signature for (the 1.33+ libraries)
//! returns an unknown type and checks nothing, so what passes here may still be refused by
//! kube-apiserver, but what is refused here kube-apiserver refuses too, in the same words (`undefined field 'foo1'`, `found no
//! matching overload for '_<_' applied to '(int, string)'`). The cel crate has no checker;
//! none is maintained for Rust.

use cel::common::ast::{operators, EntryExpr, Expr, IdedExpr, LiteralValue};

/// A CEL type, as far as the checker knows it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Ty {
    /// `dyn`, as cel-go types it (`object`, `params`, what is selected on them).
    Dyn,
    /// A type the checker cannot tell (a function it has no overloads for, and what follows
    /// from one): anything goes with it, as with `dyn`, and it is never a wrong result.
    Unknown,
    /// The type of a node that already failed: checked no further.
    Error,
    Null,
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Duration,
    Timestamp,
    /// A type value (`int` is a `type(int)`, `type(x)` one of `x`'s type).
    Type(Box<Ty>),
    List(Box<Ty>),
    Map(Box<Ty>, Box<Ty>),
    /// A declared object type.
    Object(&'static Object),
    /// A Kubernetes library's opaque type (`kubernetes.Quantity`, `net.IP`): equality only.
    Opaque(&'static str),
    /// An optional value (`optional.of(1)`, `object.?spec`), of the type it holds.
    Optional(Box<Ty>),
    /// A policy's `variables` (`kubernetes.variables`): one field per variable compiled
    /// before, typed.
    Variables(std::sync::Arc<[(String, Ty)]>),
}

/// A declared object type: its name and fields.
#[derive(Debug, PartialEq)]
pub(crate) struct Object {
    name: &'static str,
    fields: &'static [(&'static str, Field)],
}

/// A field's type, written so that the declarations can be `static`.
#[derive(Debug, PartialEq)]
enum Field {
    String,
    Bool,
    Int,
    Timestamp,
    Dyn,
    StringList,
    StringMap,
    StringListMap,
    Object(&'static Object),
    ObjectList(&'static Object),
}

impl Field {
    fn ty(&self) -> Ty {
        let string = || Box::new(Ty::String);
        match self {
            Field::String => Ty::String,
            Field::Bool => Ty::Bool,
            Field::Int => Ty::Int,
            Field::Timestamp => Ty::Timestamp,
            Field::Dyn => Ty::Dyn,
            Field::StringList => Ty::List(string()),
            Field::StringMap => Ty::Map(string(), string()),
            Field::StringListMap => Ty::Map(string(), Box::new(Ty::List(string()))),
            Field::Object(o) => Ty::Object(o),
            Field::ObjectList(o) => Ty::List(Box::new(Ty::Object(o))),
        }
    }
}

static GVK: Object = Object {
    name: "kubernetes.GroupVersionKind",
    fields: &[
        ("group", Field::String),
        ("version", Field::String),
        ("kind", Field::String),
    ],
};
static GVR: Object = Object {
    name: "kubernetes.GroupVersionResource",
    fields: &[
        ("group", Field::String),
        ("version", Field::String),
        ("resource", Field::String),
    ],
};
static USER_INFO: Object = Object {
    name: "kubernetes.UserInfo",
    fields: &[
        ("username", Field::String),
        ("uid", Field::String),
        ("groups", Field::StringList),
        ("extra", Field::StringListMap),
    ],
};
/// `BuildRequestType`.
pub(crate) static REQUEST: Object = Object {
    name: "kubernetes.AdmissionRequest",
    fields: &[
        ("kind", Field::Object(&GVK)),
        ("resource", Field::Object(&GVR)),
        ("subResource", Field::String),
        ("requestKind", Field::Object(&GVK)),
        ("requestResource", Field::Object(&GVR)),
        ("requestSubResource", Field::String),
        ("name", Field::String),
        ("namespace", Field::String),
        ("operation", Field::String),
        ("userInfo", Field::Object(&USER_INFO)),
        ("dryRun", Field::Bool),
        ("options", Field::Dyn),
    ],
};
static NAMESPACE_SPEC: Object = Object {
    name: "kubernetes.NamespaceSpec",
    fields: &[("finalizers", Field::StringList)],
};
static NAMESPACE_CONDITION: Object = Object {
    name: "kubernetes.NamespaceCondition",
    fields: &[
        ("status", Field::String),
        ("type", Field::String),
        ("lastTransitionTime", Field::Timestamp),
        ("message", Field::String),
        ("reason", Field::String),
    ],
};
static NAMESPACE_STATUS: Object = Object {
    name: "kubernetes.NamespaceStatus",
    fields: &[
        ("conditions", Field::ObjectList(&NAMESPACE_CONDITION)),
        ("phase", Field::String),
    ],
};
static NAMESPACE_METADATA: Object = Object {
    name: "kubernetes.NamespaceMetadata",
    fields: &[
        ("name", Field::String),
        ("generateName", Field::String),
        ("namespace", Field::String),
        ("labels", Field::StringMap),
        ("annotations", Field::StringMap),
        ("UID", Field::String),
        ("creationTimestamp", Field::Timestamp),
        ("deletionGracePeriodSeconds", Field::Int),
        ("deletionTimestamp", Field::Timestamp),
        ("generation", Field::Int),
        ("resourceVersion", Field::String),
        ("finalizers", Field::StringList),
    ],
};
/// `BuildNamespaceType`.
pub(crate) static NAMESPACE: Object = Object {
    name: "kubernetes.Namespace",
    fields: &[
        ("metadata", Field::Object(&NAMESPACE_METADATA)),
        ("spec", Field::Object(&NAMESPACE_SPEC)),
        ("status", Field::Object(&NAMESPACE_STATUS)),
    ],
};

impl std::fmt::Display for Ty {
    /// The type as cel-go's errors name it (`list(string)`, `map(string, int)`, `null`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ty::Dyn | Ty::Unknown => f.write_str("dyn"),
            Ty::Error => f.write_str("*error*"),
            Ty::Null => f.write_str("null"),
            Ty::Bool => f.write_str("bool"),
            Ty::Int => f.write_str("int"),
            Ty::Uint => f.write_str("uint"),
            Ty::Double => f.write_str("double"),
            Ty::String => f.write_str("string"),
            Ty::Bytes => f.write_str("bytes"),
            Ty::Duration => f.write_str("duration"),
            Ty::Timestamp => f.write_str("timestamp"),
            Ty::Type(t) => write!(f, "type({t})"),
            Ty::List(e) => write!(f, "list({e})"),
            Ty::Map(k, v) => write!(f, "map({k}, {v})"),
            Ty::Object(o) => f.write_str(o.name),
            Ty::Opaque(name) => f.write_str(name),
            Ty::Variables(_) => f.write_str("kubernetes.variables"),
            Ty::Optional(t) => write!(f, "optional_type({t})"),
        }
    }
}

impl Ty {
    /// Unknown enough that anything goes with it.
    fn is_dyn(&self) -> bool {
        matches!(self, Ty::Dyn | Ty::Error | Ty::Unknown)
    }

    fn is_numeric(&self) -> bool {
        matches!(self, Ty::Int | Ty::Uint | Ty::Double)
    }

    /// Whether the free element type of an empty `map`/`filter` accumulator is inside.
    fn has_free(&self) -> bool {
        match self {
            Ty::Error => true,
            Ty::List(e) | Ty::Optional(e) | Ty::Type(e) => e.has_free(),
            Ty::Map(k, v) => k.has_free() || v.has_free(),
            _ => false,
        }
    }

    /// This type with the free element type read as `dyn`.
    fn freed(&self) -> Ty {
        match self {
            Ty::Error => Ty::Dyn,
            Ty::List(e) => Ty::List(Box::new(e.freed())),
            Ty::Map(k, v) => Ty::Map(Box::new(k.freed()), Box::new(v.freed())),
            other => other.clone(),
        }
    }

    /// The name a wrong result type is reported with (`must evaluate to bool but got
    /// google.protobuf.Duration`, `but got dyn`: cel-go's type names; `CompileCELExpression`
    /// wants the result to be exactly one of the return types); `None` for a type the checker
    /// cannot name exactly (unknown, a type value), which the result check then accepts.
    pub(crate) fn result_name(&self) -> Option<String> {
        match self {
            Ty::Unknown | Ty::Error => None,
            Ty::Null => Some("null_type".to_string()),
            Ty::Duration => Some("google.protobuf.Duration".to_string()),
            Ty::Timestamp => Some("google.protobuf.Timestamp".to_string()),
            Ty::Type(t) => Some(format!("type({})", t.result_name()?)),
            Ty::Optional(t) => Some(format!("optional_type({})", t.result_name()?)),
            other => Some(other.to_string()),
        }
    }

    /// The type a policy variable of this type is declared with (`convertCelTypeToDeclType`,
    /// `staging/src/k8s.io/apiserver/pkg/admission/plugin/cel/composition.go`): scalars, and
    /// lists and maps of what this keeps; anything else (objects, the libraries' types, type
    /// values) `dyn`.
    pub(crate) fn declared(&self) -> Ty {
        match self {
            Ty::List(e) => Ty::List(Box::new(e.declared())),
            Ty::Map(k, v) => Ty::Map(Box::new(k.declared()), Box::new(v.declared())),
            Ty::Null
            | Ty::Bool
            | Ty::Int
            | Ty::Uint
            | Ty::Double
            | Ty::String
            | Ty::Bytes
            | Ty::Duration
            | Ty::Timestamp
            | Ty::Unknown => self.clone(),
            _ => Ty::Dyn,
        }
    }
}

/// A type's kind as cel-go's `TypeName` writes it in format errors (`list`, `map`,
/// `google.protobuf.Duration`).
fn kind_name(t: &Ty) -> String {
    match t {
        Ty::List(_) => "list".into(),
        Ty::Map(..) => "map".into(),
        Ty::Type(_) => "type".into(),
        Ty::Optional(_) => "optional_type".into(),
        other => other.result_name().unwrap_or_else(|| "dyn".into()),
    }
}

/// What `%s` refuses of an argument (`verifyString`): a type other than the scalars, lists,
/// maps, types and null, looked into for list and map literals; the node and its type.
fn string_clause_refuses(
    ty: &Ty,
    expr: &IdedExpr,
    mut type_of: impl FnMut(&IdedExpr) -> Ty,
) -> Option<(u64, Ty)> {
    fn go(ty: &Ty, expr: &IdedExpr, type_of: &mut dyn FnMut(&IdedExpr) -> Ty) -> Option<(u64, Ty)> {
        let allowed = ty.is_dyn()
            || matches!(
                ty,
                Ty::List(_)
                    | Ty::Map(..)
                    | Ty::Int
                    | Ty::Uint
                    | Ty::Double
                    | Ty::Bool
                    | Ty::String
                    | Ty::Timestamp
                    | Ty::Bytes
                    | Ty::Duration
                    | Ty::Type(_)
                    | Ty::Null
            );
        if !allowed {
            return Some((expr.id, ty.clone()));
        }
        match &expr.expr {
            Expr::List(l) => l.elements.iter().find_map(|e| {
                let t = type_of(e);
                go(&t, e, type_of)
            }),
            Expr::Map(m) => m.entries.iter().find_map(|entry| match &entry.expr {
                EntryExpr::MapEntry(me) => {
                    let k = type_of(&me.key);
                    go(&k, &me.key, type_of).or_else(|| {
                        let v = type_of(&me.value);
                        go(&v, &me.value, type_of)
                    })
                }
                EntryExpr::StructField(_) => None,
            }),
            _ => None,
        }
    }
    go(ty, expr, &mut type_of)
}

/// Whether `a` and `b` can be one type (a type parameter bound to both): equal, or `dyn`
/// somewhere in them, or `null` with an object (`request == null`).
fn unify(a: &Ty, b: &Ty) -> Option<Ty> {
    match (a, b) {
        // A failed node, or the free element type of `map`'s and `filter`'s `[]`.
        (Ty::Error, other) | (other, Ty::Error) => Some(other.clone()),
        (Ty::Unknown, _) | (_, Ty::Unknown) => Some(Ty::Unknown),
        (x, y) if x.is_dyn() || y.is_dyn() => Some(Ty::Dyn),
        (Ty::List(x), Ty::List(y)) => unify(x, y).map(|t| Ty::List(Box::new(t))),
        (Ty::Map(k1, v1), Ty::Map(k2, v2)) => {
            Some(Ty::Map(Box::new(unify(k1, k2)?), Box::new(unify(v1, v2)?)))
        }
        (Ty::Null, Ty::Object(o)) | (Ty::Object(o), Ty::Null) => Some(Ty::Object(o)),
        (Ty::Type(x), Ty::Type(y)) => unify(x, y).map(|t| Ty::Type(Box::new(t))),
        (Ty::Optional(x), Ty::Optional(y)) => unify(x, y).map(|t| Ty::Optional(Box::new(t))),
        (x, y) if x == y => Some(x.clone()),
        _ => None,
    }
}

/// A type error at a node: its id and cel-go's message.
pub(crate) type TypeError = (u64, String);

/// The checker's environment: the declared variables' types.
pub(crate) struct Declarations<'a> {
    /// `(name, type)`; a variable not listed is `dyn` (undeclared ones are reported before).
    pub(crate) variables: &'a [(&'a str, Ty)],
}

/// Checks `expr`: its type, and the errors cel-go's checker would report, in no particular
/// order (the caller sorts them by position).
pub(crate) fn check(expr: &IdedExpr, declarations: &Declarations<'_>) -> (Ty, Vec<TypeError>) {
    let mut checker = Checker {
        declarations,
        scopes: Vec::new(),
        errors: Vec::new(),
        exempt: 0,
    };
    let ty = checker.check(expr);
    (ty, checker.errors)
}

struct Checker<'d> {
    declarations: &'d Declarations<'d>,
    /// Comprehension variables, innermost last.
    scopes: Vec<(String, Ty)>,
    errors: Vec<TypeError>,
    /// Inside `format`'s arguments, whose literals (nested ones too) are exempt from
    /// homogeneity (`HomogeneousAggregateLiteralExemptFunctions`).
    exempt: u32,
}

impl Checker<'_> {
    fn error(&mut self, id: u64, message: String) -> Ty {
        self.errors.push((id, message));
        Ty::Error
    }

    /// Over 80 lines: one match over every kind of expression, as cel-go's checker
    /// (`checker/checker.go`, `check`) is one switch; each arm is short.
    fn check(&mut self, node: &IdedExpr) -> Ty {
        match &node.expr {
            Expr::Unspecified => Ty::Dyn,
            Expr::Literal(l) => match l {
                LiteralValue::Boolean(_) => Ty::Bool,
                LiteralValue::Bytes(_) => Ty::Bytes,
                LiteralValue::Double(_) => Ty::Double,
                LiteralValue::Int(_) => Ty::Int,
                LiteralValue::Null => Ty::Null,
                LiteralValue::String(_) => Ty::String,
                LiteralValue::UInt(_) => Ty::Uint,
            },
            Expr::Ident(name) => self.ident(name),
            Expr::Select(select) => {
                let operand = self.check(&select.operand);
                let field = match &operand {
                    // `has()` on the authorizer's types fails as any unknown field does.
                    Ty::Opaque(name)
                        if select.test && name.starts_with("kubernetes.authorization.") =>
                    {
                        let message = format!("unexpected failed resolution of '{name}'");
                        self.error(node.id, message)
                    }
                    _ => self.select(node.id, &operand, &select.field),
                };
                if select.test {
                    Ty::Bool
                } else {
                    field
                }
            }
            Expr::List(list) => {
                let mut element = None::<Ty>;
                for e in &list.elements {
                    let t = self.check(e);
                    element = Some(self.homogeneous(e.id, element, t));
                }
                Ty::List(Box::new(element.unwrap_or(Ty::Dyn)))
            }
            Expr::Map(map) => {
                let (mut key, mut value) = (None::<Ty>, None::<Ty>);
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(m) = &entry.expr {
                        let k = self.check(&m.key);
                        key = Some(self.homogeneous(m.key.id, key, k));
                        let v = self.check(&m.value);
                        value = Some(self.homogeneous(m.value.id, value, v));
                    }
                }
                Ty::Map(
                    Box::new(key.unwrap_or(Ty::Dyn)),
                    Box::new(value.unwrap_or(Ty::Dyn)),
                )
            }
            Expr::Struct(s) => {
                for entry in &s.entries {
                    if let EntryExpr::StructField(f) = &entry.expr {
                        self.check(&f.value);
                    }
                }
                Ty::Unknown
            }
            Expr::Comprehension(c) => {
                let range = self.check(&c.iter_range);
                // The second variable of a two-variable comprehension: a list's element after
                // its index, a map's value after its key.
                let second = match &range {
                    Ty::List(e) => (**e).clone(),
                    Ty::Map(_, v) => (**v).clone(),
                    Ty::Unknown => Ty::Unknown,
                    _ => Ty::Dyn,
                };
                let element = match &range {
                    Ty::List(_) if c.iter_var2.is_some() => Ty::Int,
                    Ty::List(e) => (**e).clone(),
                    Ty::Map(k, _) => (**k).clone(),
                    Ty::Unknown => Ty::Unknown,
                    t if t.is_dyn() => Ty::Dyn,
                    other => {
                        let message = format!(
                            "expression of type '{other}' cannot be range of a comprehension (must be list, map, or dynamic)"
                        );
                        self.error(c.iter_range.id, message);
                        Ty::Dyn
                    }
                };
                // `map` and `filter` start from `[]`, whose element type cel-go leaves free
                // until the step binds it (`[1].map(x, x)` is a `list(int)`): `Error` stands
                // for it here, as `unify` lets any type replace it.
                // `transformMap` and `transformMapEntry` likewise start from `{}`.
                let free_list = matches!(&c.accu_init.expr, Expr::List(l) if l.elements.is_empty());
                let free_map = matches!(&c.accu_init.expr, Expr::Map(m) if m.entries.is_empty());
                let free = free_list || free_map;
                let accu = if free_list {
                    Ty::List(Box::new(Ty::Error))
                } else if free_map {
                    Ty::Map(Box::new(Ty::Error), Box::new(Ty::Error))
                } else {
                    self.check(&c.accu_init)
                };
                self.scopes.push((c.accu_var.clone(), accu));
                self.scopes.push((c.iter_var.clone(), element));
                if let Some(name) = &c.iter_var2 {
                    self.scopes.push((name.clone(), second));
                }
                self.check(&c.loop_cond);
                let step = self.check(&c.loop_step);
                if c.iter_var2.is_some() {
                    self.scopes.pop();
                }
                self.scopes.pop();
                if free {
                    let known = |t: Box<Ty>| {
                        if *t == Ty::Error {
                            Box::new(Ty::Dyn)
                        } else {
                            t
                        }
                    };
                    let bound = match step {
                        Ty::List(e) => Ty::List(known(e)),
                        Ty::Map(k, v) => Ty::Map(known(k), known(v)),
                        Ty::Unknown => Ty::Unknown,
                        _ if free_map => Ty::Map(Box::new(Ty::Dyn), Box::new(Ty::Dyn)),
                        _ => Ty::List(Box::new(Ty::Dyn)),
                    };
                    if let Some(accu) = self.scopes.last_mut() {
                        accu.1 = bound;
                    }
                }
                let result = self.check(&c.result);
                self.scopes.pop();
                result
            }
            Expr::Call(call) if call.func_name == "format" => {
                // `ext.Strings`' `format` takes a list of anything: its literal argument is
                // exempt from homogeneity (`HomogeneousAggregateLiteralExemptFunctions`).
                let mut on_string = false;
                if let Some(t) = &call.target {
                    on_string = self.check(t) == Ty::String;
                }
                let mut elements = None;
                self.exempt += 1;
                for arg in &call.args {
                    match &arg.expr {
                        Expr::List(list) => {
                            let types: Vec<(u64, Ty, &IdedExpr)> = list
                                .elements
                                .iter()
                                .map(|e| (e.id, self.check(e), e))
                                .collect();
                            elements = Some(types);
                        }
                        _ => {
                            self.check(arg);
                        }
                    }
                }
                self.exempt -= 1;
                // cel-go's `stringFormatValidator`: a literal format string with a list literal
                // is checked clause by clause against the arguments' types.
                if let (Some(target), Some(elements), 1) =
                    (&call.target, &elements, call.args.len())
                {
                    if let Expr::Literal(LiteralValue::String(format)) = &target.expr {
                        if let Some((at, message)) = self.format_error(format, elements) {
                            self.error(at.unwrap_or(node.id), message);
                        }
                    }
                }
                if on_string {
                    Ty::String
                } else {
                    Ty::Unknown
                }
            }
            Expr::Call(call) => {
                // cel-go's literal validators (`cel.ValidateDurationLiterals`,
                // `ValidateTimestampLiterals` in the base environment): a literal that does not
                // parse is refused at create, at the literal.
                if let (None, [arg]) = (&call.target, call.args.as_slice()) {
                    if let Expr::Literal(LiteralValue::String(text)) = &arg.expr {
                        let text: &str = text;
                        match call.func_name.as_str() {
                            "duration" if !is_go_duration(text) => {
                                self.error(arg.id, "invalid duration argument".to_string());
                            }
                            "timestamp" if !is_rfc3339(text) => {
                                self.error(arg.id, "invalid timestamp argument".to_string());
                            }
                            _ => {}
                        }
                    }
                }
                // A namespaced function (`sets.contains(a, b)`) parses as a call on an
                // identifier; cel-go resolves it to the function when no variable has that name.
                if let Some(Expr::Ident(ns)) = call.target.as_ref().map(|t| &t.expr) {
                    if super::cel_names::is_namespace(ns) && self.is_undeclared(ns) {
                        let args: Vec<Ty> = call.args.iter().map(|a| self.check(a)).collect();
                        let function = format!("{ns}.{}", call.func_name);
                        return self.call(node.id, &function, None, &args);
                    }
                }
                let target = call.target.as_ref().map(|t| self.check(t));
                // `&&` and `||` check each argument to be bool, where it is written.
                if matches!(
                    call.func_name.as_str(),
                    operators::LOGICAL_AND | operators::LOGICAL_OR
                ) {
                    for arg in &call.args {
                        let t = self.check(arg);
                        if !t.is_dyn() && t != Ty::Bool {
                            self.error(arg.id, format!("expected type 'bool' but found '{t}'"));
                        }
                    }
                    return Ty::Bool;
                }
                let args: Vec<Ty> = call.args.iter().map(|a| self.check(a)).collect();
                self.call(node.id, &call.func_name, target.as_ref(), &args)
            }
        }
    }

    /// What cel-go's `stringFormatValidator` reports for `format` applied to `elements`
    /// (`ext/formatting.go`, `parseFormatString` with a `stringFormatChecker`): the node
    /// (`None`: the call) and the message.
    ///
    /// Over 80 lines: one loop over the format string's verbs, as `parseFormatString`.
    fn format_error(
        &mut self,
        format: &str,
        elements: &[(u64, Ty, &IdedExpr)],
    ) -> Option<(Option<u64>, String)> {
        let bytes = format.as_bytes();
        let (mut i, mut arg) = (0, 0usize);
        while i < bytes.len() {
            if bytes[i] != b'%' {
                i += 1;
                continue;
            }
            if bytes.get(i + 1) == Some(&b'%') {
                i += 2;
                continue;
            }
            if i + 1 >= bytes.len() {
                return Some((None, "unexpected end of string".into()));
            }
            let Some((id, ty, expr)) = elements.get(arg) else {
                return Some((None, format!("index {arg} out of range")));
            };
            let mut j = i + 1;
            if bytes[j] == b'.' {
                j += 1;
                while j < bytes.len() && bytes[j].is_ascii_digit() {
                    j += 1;
                }
                if j >= bytes.len() {
                    return Some((None, "could not parse formatting clause: error while parsing precision: could not find end of precision specifier".into()));
                }
            }
            let verb = format[j..].chars().next().unwrap_or('?');
            let kinds: &[&str] = match verb {
                's' => &[],
                'd' | 'o' => &["int", "uint"],
                'f' | 'e' => &["double", "string"],
                'b' => &["int", "uint", "bool"],
                'x' | 'X' => &["int", "uint", "string", "bytes"],
                other => {
                    return Some((
                        None,
                        format!("could not parse formatting clause: unrecognized formatting clause \"{other}\""),
                    ))
                }
            };
            let bad = if verb == 's' {
                string_clause_refuses(ty, expr, |e| self.check_quiet(e))
            } else {
                (!ty.is_dyn() && !kinds.contains(&kind_name(ty).as_str()))
                    .then(|| (*id, ty.clone()))
            };
            if let Some((at, bad)) = bad {
                let clause = match verb {
                    's' => "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps",
                    'd' => "decimal clause can only be used on integers",
                    'o' => "octal clause can only be used on integers",
                    'f' => "fixed-point clause can only be used on doubles",
                    'e' => "scientific clause can only be used on doubles",
                    'b' => "only integers and bools can be formatted as binary",
                    _ => "only integers, byte buffers, and strings can be formatted as hex",
                };
                return Some((
                    Some(at),
                    format!(
                        "error during formatting: {clause}, was given {}",
                        kind_name(&bad)
                    ),
                ));
            }
            i = j + verb.len_utf8();
            arg += 1;
        }
        (elements.len() > arg).then(|| {
            (
                None,
                format!(
                    "too many arguments supplied to string.format (expected {arg}, got {})",
                    elements.len()
                ),
            )
        })
    }

    /// The type of `e` without reporting its errors again (they were reported when the
    /// argument was checked).
    fn check_quiet(&mut self, e: &IdedExpr) -> Ty {
        let before = self.errors.len();
        let t = self.check(e);
        self.errors.truncate(before);
        t
    }

    /// Whether `name` is neither a comprehension variable nor a declared one.
    fn is_undeclared(&self, name: &str) -> bool {
        !self.scopes.iter().any(|(n, _)| n == name)
            && !self.declarations.variables.iter().any(|(n, _)| *n == name)
    }

    fn ident(&self, name: &str) -> Ty {
        if let Some((_, t)) = self.scopes.iter().rev().find(|(n, _)| n == name) {
            return t.clone();
        }
        if let Some((_, t)) = self.declarations.variables.iter().find(|(n, _)| *n == name) {
            return t.clone();
        }
        match name {
            n if super::cel_names::TYPE_NAMES.contains(&n) => Ty::Type(Box::new(match n {
                "int" => Ty::Int,
                "uint" => Ty::Uint,
                "double" => Ty::Double,
                "string" => Ty::String,
                "bool" => Ty::Bool,
                "bytes" => Ty::Bytes,
                "list" => Ty::List(Box::new(Ty::Dyn)),
                "map" => Ty::Map(Box::new(Ty::Dyn), Box::new(Ty::Dyn)),
                "null_type" => Ty::Null,
                "duration" => Ty::Duration,
                "timestamp" => Ty::Timestamp,
                // `type` itself.
                _ => Ty::Type(Box::new(Ty::Unknown)),
            })),
            _ => Ty::Dyn,
        }
    }

    /// A list or map literal's next element (key, value): the base environment's
    /// `HomogeneousAggregateLiterals` wants each one of the first's type.
    fn homogeneous(&mut self, id: u64, so_far: Option<Ty>, next: Ty) -> Ty {
        match so_far {
            None => next,
            Some(first) => match unify(&first, &next) {
                Some(t) => t,
                None if self.exempt > 0 => Ty::Dyn,
                None => {
                    self.error(id, format!("expected type '{first}' but found '{next}'"));
                    first
                }
            },
        }
    }

    fn select(&mut self, id: u64, operand: &Ty, field: &str) -> Ty {
        match operand {
            Ty::Unknown => Ty::Unknown,
            t if t.is_dyn() => Ty::Dyn,
            Ty::Map(k, v) if k.is_dyn() || **k == Ty::String => (**v).clone(),
            Ty::Object(o) => match o.fields.iter().find(|(name, _)| *name == field) {
                Some((_, f)) => f.ty(),
                None => self.error(id, format!("undefined field '{field}'")),
            },
            // `authz.go` declares one field, `requestResource`; cel-go's checker fails any
            // other selection on its types in these words.
            Ty::Opaque(AUTHZ) if field == "requestResource" => Ty::Opaque(RESOURCE),
            Ty::Opaque(name) if name.starts_with("kubernetes.authorization.") => {
                self.error(id, format!("unexpected failed resolution of '{name}'"))
            }
            // Selecting on an optional selects on what it holds, and stays optional.
            Ty::Optional(inner) => {
                let inner = inner.clone();
                Ty::Optional(Box::new(self.select(id, &inner, field)))
            }
            Ty::Variables(fields) => match fields.iter().find(|(name, _)| name == field) {
                Some((_, t)) => t.clone(),
                None => self.error(id, format!("undefined field '{field}'")),
            },
            other => {
                let message = format!("type '{other}' does not support field selection");
                self.error(id, message)
            }
        }
    }

    fn call(&mut self, id: u64, function: &str, target: Option<&Ty>, args: &[Ty]) -> Ty {
        let all: Vec<&Ty> = target.into_iter().chain(args).collect();
        if all.iter().any(|t| matches!(t, Ty::Error)) {
            return Ty::Error;
        }
        match resolve(function, target, args) {
            // What cel-go would type from an argument the checker cannot tell, it cannot tell.
            Resolution::Type(Ty::Dyn) if all.contains(&&Ty::Unknown) => Ty::Unknown,
            Resolution::Type(t) => t,
            Resolution::Unknown => Ty::Unknown,
            Resolution::NoOverload => {
                // The free element type of `map`'s and `filter`'s `[]` reads as what the other
                // operands bind it to (cel-go prints the type it inferred), else as `dyn`.
                let shown = |t: &Ty| -> String {
                    if !t.has_free() {
                        return t.to_string();
                    }
                    all.iter()
                        .filter(|o| !o.has_free())
                        .find_map(|o| unify(t, o).filter(|u| !u.is_dyn()))
                        .unwrap_or_else(|| t.freed())
                        .to_string()
                };
                let list = |ts: &[Ty]| ts.iter().map(&shown).collect::<Vec<_>>().join(", ");
                let applied = match target {
                    Some(t) => format!("{t}.({})", list(args)),
                    None => format!("({})", list(args)),
                };
                self.error(
                    id,
                    format!("found no matching overload for '{function}' applied to '{applied}'"),
                )
            }
        }
    }
}

/// What a call resolves to.
enum Resolution {
    /// An overload matches; its result.
    Type(Ty),
    /// The checker has no signatures for the function: `dyn`, unchecked.
    Unknown,
    /// The function is known and no overload takes these arguments.
    NoOverload,
}

/// cel-go's standard overloads (`common/stdlib/standard.go`) for the functions the checker
/// knows; `dyn` arguments match any overload (the result is then `dyn` unless every match
/// agrees).
///
/// Over 80 lines: a table, one arm per function, read side by side with `standard.go`.
fn resolve(function: &str, target: Option<&Ty>, args: &[Ty]) -> Resolution {
    use Resolution::{NoOverload, Type, Unknown};
    let found = |t: Option<Ty>| t.map_or(NoOverload, Type);
    let dyn_any = args.iter().chain(target).any(Ty::is_dyn);
    match (function, target, args) {
        (operators::LOGICAL_NOT, None, [a]) => found(bool_of(a)),
        (operators::NEGATE, None, [_]) => overloads(ARITHMETIC, function, target, args),
        (operators::NOT_STRICTLY_FALSE, None, [a]) => found(bool_of(a)),
        (operators::CONDITIONAL, None, [c, a, b]) => {
            let then_else = unify(a, b);
            match (bool_of(c), then_else) {
                (Some(_), Some(t)) => Type(t),
                _ => NoOverload,
            }
        }
        (operators::EQUALS | operators::NOT_EQUALS, None, [a, b]) => {
            found(unify(a, b).map(|_| Ty::Bool))
        }
        (
            operators::LESS
            | operators::LESS_EQUALS
            | operators::GREATER
            | operators::GREATER_EQUALS,
            None,
            [a, b],
        ) => found(
            (dyn_any
                || (a.is_numeric() && b.is_numeric())
                || (a == b
                    && matches!(
                        a,
                        Ty::String | Ty::Bytes | Ty::Bool | Ty::Timestamp | Ty::Duration
                    )))
            .then_some(Ty::Bool),
        ),
        (
            operators::ADD
            | operators::SUBSTRACT
            | operators::MULTIPLY
            | operators::DIVIDE
            | operators::MODULO,
            None,
            [_, _],
        ) => overloads(ARITHMETIC, function, target, args),
        (operators::INDEX, None, [Ty::Optional(inner), index]) => {
            match resolve(function, None, &[(**inner).clone(), index.clone()]) {
                Type(t) => Type(Ty::Optional(Box::new(t))),
                other => other,
            }
        }
        (operators::INDEX, None, [container, index]) => found(match container {
            t if t.is_dyn() => Some(Ty::Dyn),
            Ty::List(e) => (*index == Ty::Int || index.is_dyn()).then(|| (**e).clone()),
            Ty::Map(k, v) => unify(k, index).map(|_| (**v).clone()),
            _ => None,
        }),
        (operators::IN, None, [element, container]) => found(match container {
            t if t.is_dyn() => Some(Ty::Bool),
            Ty::List(e) => unify(element, e).map(|_| Ty::Bool),
            Ty::Map(k, _) => unify(element, k).map(|_| Ty::Bool),
            _ => None,
        }),
        ("size", None, [a]) | ("size", Some(a), []) => found(match a {
            Ty::String | Ty::Bytes | Ty::List(_) | Ty::Map(..) => Some(Ty::Int),
            t if t.is_dyn() => Some(Ty::Int),
            _ => None,
        }),
        ("contains" | "startsWith" | "endsWith", Some(s), [a]) => match s {
            // The Kubernetes libraries add no `contains` on strings; lists' is theirs.
            Ty::String => found((*a == Ty::String || a.is_dyn()).then_some(Ty::Bool)),
            _ => Unknown,
        },
        ("matches", Some(s), [p]) | ("matches", None, [s, p]) => found(
            ((*s == Ty::String || s.is_dyn()) && (*p == Ty::String || p.is_dyn()))
                .then_some(Ty::Bool),
        ),
        // cel-go's strings library at version 2 has no `reverse`: only lists' (1.34).
        ("reverse", Some(Ty::String), []) => NoOverload,
        // The two-variable comprehensions' map builder (`cel.@mapInsert` in cel-go).
        (super::cel_two_var::MAP_INSERT, None, [m, k, v]) => {
            found(unify(m, &Ty::Map(Box::new(k.clone()), Box::new(v.clone()))))
        }
        (super::cel_two_var::MAP_INSERT, None, [m, update]) => found(unify(m, update)),
        // The optional types (cel-go's `OptionalTypes`): `x.?f`, `m[?k]`, `optional.of(v)`,
        // and what an optional's methods give.
        (operators::OPT_SELECT, None, [operand, _]) => {
            Type(Ty::Optional(Box::new(match operand {
                Ty::Map(_, v) => (**v).clone(),
                Ty::Optional(inner) => match &**inner {
                    Ty::Map(_, v) => (**v).clone(),
                    _ => Ty::Dyn,
                },
                Ty::Unknown => Ty::Unknown,
                _ => Ty::Dyn,
            })))
        }
        (operators::OPT_INDEX, None, [container, _]) => {
            Type(Ty::Optional(Box::new(match container {
                Ty::List(e) => (**e).clone(),
                Ty::Map(_, v) => (**v).clone(),
                Ty::Unknown => Ty::Unknown,
                _ => Ty::Dyn,
            })))
        }
        ("optional.of" | "optional.ofNonZeroValue", None, [a]) => {
            Type(Ty::Optional(Box::new(a.clone())))
        }
        ("optional.none", None, []) => Type(Ty::Optional(Box::new(Ty::Dyn))),
        ("hasValue", Some(o), []) => found(match o {
            Ty::Optional(_) => Some(Ty::Bool),
            t if t.is_dyn() => Some(Ty::Bool),
            _ => None,
        }),
        ("value", Some(o), []) => found(match o {
            Ty::Optional(t) => Some((**t).clone()),
            t if t.is_dyn() => Some(Ty::Unknown),
            _ => None,
        }),
        ("orValue", Some(o), [v]) => found(match o {
            Ty::Optional(t) => unify(t, v),
            t if t.is_dyn() => Some(Ty::Unknown),
            _ => None,
        }),
        ("or", Some(o), [other]) => found(match o {
            Ty::Optional(_) => unify(o, other),
            t if t.is_dyn() => Some(Ty::Unknown),
            _ => None,
        }),
        ("dyn", None, [_]) => Type(Ty::Dyn),
        ("type", None, [a]) => Type(Ty::Type(Box::new(a.clone()))),
        ("int", None, [a]) => found(conversion(
            a,
            &[Ty::Int, Ty::Uint, Ty::Double, Ty::String, Ty::Timestamp],
            Ty::Int,
        )),
        ("uint", None, [a]) => found(conversion(
            a,
            &[Ty::Int, Ty::Uint, Ty::Double, Ty::String],
            Ty::Uint,
        )),
        ("double", None, [a]) => found(conversion(
            a,
            &[Ty::Int, Ty::Uint, Ty::Double, Ty::String],
            Ty::Double,
        )),
        ("string", None, [a]) => found(conversion(
            a,
            &[
                // `ip.go` and `cidr.go` add `string(ip)`, `string(cidr)`; quantity and URL
                // have none.
                Ty::Opaque(IP),
                Ty::Opaque(CIDR),
                Ty::Int,
                Ty::Uint,
                Ty::Double,
                Ty::Bool,
                Ty::Bytes,
                Ty::String,
                Ty::Timestamp,
                Ty::Duration,
            ],
            Ty::String,
        )),
        ("bytes", None, [a]) => found(conversion(a, &[Ty::Bytes, Ty::String], Ty::Bytes)),
        ("bool", None, [a]) => found(conversion(a, &[Ty::Bool, Ty::String], Ty::Bool)),
        ("duration", None, [a]) => found(conversion(a, &[Ty::Duration, Ty::String], Ty::Duration)),
        ("timestamp", None, [a]) => found(conversion(
            a,
            &[Ty::Timestamp, Ty::String, Ty::Int],
            Ty::Timestamp,
        )),
        _ => overloads(LIBRARY, function, target, args),
    }
}

const QUANTITY: &str = "kubernetes.Quantity";
const URL: &str = "kubernetes.URL";
const IP: &str = "net.IP";
const CIDR: &str = "net.CIDR";
const NAMED_FORMAT: &str = "kubernetes.NamedFormat";
use super::authz::{
    AUTHORIZER_TYPE as AUTHZ, DECISION_TYPE as DECISION, GROUP_CHECK_TYPE as GROUP,
    PATH_CHECK_TYPE as PATH, RESOURCE_CHECK_TYPE as RESOURCE,
};

/// A parameter or result type in a library overload.
#[derive(Debug)]
enum P {
    S,
    I,
    U,
    D,
    B,
    By,
    Dur,
    Ts,
    Dyn,
    /// The overload's type parameter (`A` in `list(A)`).
    A,
    L(&'static P),
    M(&'static P, &'static P),
    Op(&'static str),
}

/// One overload: the function, whether it is called on a receiver (the first parameter), its
/// parameters and result.
#[derive(Debug)]
pub(crate) struct Overload {
    function: &'static str,
    member: bool,
    params: &'static [P],
    result: P,
}

macro_rules! overloads {
    ($($member:ident $function:literal ($($param:expr),*) -> $result:expr;)*) => {
        &[$(Overload {
            function: $function,
            member: overloads!(@$member),
            params: &[$($param),*],
            result: $result,
        },)*]
    };
    (@m) => { true };
    (@g) => { false };
}

/// cel-go's arithmetic overloads (`common/stdlib/standard.go`): with a `dyn` operand the
/// others still choose (`'a' + object.x` is a string, `object.x + 1` an int).
static ARITHMETIC: &[Overload] = {
    use P::{By, Dur, Ts, A, D, I, L, S, U};
    overloads! {
        g "_+_"(I, I) -> I;
        g "_+_"(U, U) -> U;
        g "_+_"(D, D) -> D;
        g "_+_"(S, S) -> S;
        g "_+_"(By, By) -> By;
        g "_+_"(L(&A), L(&A)) -> L(&A);
        g "_+_"(Ts, Dur) -> Ts;
        g "_+_"(Dur, Ts) -> Ts;
        g "_+_"(Dur, Dur) -> Dur;
        g "_-_"(I, I) -> I;
        g "_-_"(U, U) -> U;
        g "_-_"(D, D) -> D;
        g "_-_"(Ts, Ts) -> Dur;
        g "_-_"(Ts, Dur) -> Ts;
        g "_-_"(Dur, Dur) -> Dur;
        g "_*_"(I, I) -> I;
        g "_*_"(U, U) -> U;
        g "_*_"(D, D) -> D;
        g "_/_"(I, I) -> I;
        g "_/_"(U, U) -> U;
        g "_/_"(D, D) -> D;
        g "_%_"(I, I) -> I;
        g "_%_"(U, U) -> U;
        g "-_"(I) -> I;
        g "-_"(D) -> D;
    }
};

/// The Kubernetes libraries' and cel-go extensions' overloads, as kube-apiserver 1.32's
/// environment declares them (`m` a member, `g` a global function). A function named here is
/// checked against these alone; one not named is unchecked.
///
/// Sources: `staging/src/k8s.io/apiserver/pkg/cel/library/` `lists.go` (`isSorted`, `min`,
/// `max` over the comparable types, `sum` over the summable ones, `indexOf`), `regex.go`,
/// `urls.go`, `quantity.go` (`sign` is global there: `quantity('1').sign()` has no overload),
/// `ip.go`, `cidr.go`, `format.go`, `authz.go` (`authorizer` is a
/// `kubernetes.authorization.Authorizer`; `authorizer.requestResource` a `ResourceCheck`); cel-go `ext/strings.go` (version 2), `ext/sets.go`;
/// cel-go's standard timestamp and duration accessors (`common/stdlib/standard.go`).
pub(crate) static LIBRARY: &[Overload] = {
    use P::{By, Dur, Op, Ts, A, B, D, I, L, M, S, U};
    overloads! {
        m "charAt"(S, I) -> S;
        m "indexOf"(S, S) -> I;
        m "indexOf"(S, S, I) -> I;
        m "indexOf"(L(&A), A) -> I;
        m "lastIndexOf"(S, S) -> I;
        m "lastIndexOf"(S, S, I) -> I;
        m "lastIndexOf"(L(&A), A) -> I;
        m "lowerAscii"(S) -> S;
        m "upperAscii"(S) -> S;
        m "trim"(S) -> S;
        m "replace"(S, S, S) -> S;
        m "replace"(S, S, S, I) -> S;
        m "split"(S, S) -> L(&S);
        m "split"(S, S, I) -> L(&S);
        m "substring"(S, I) -> S;
        m "substring"(S, I, I) -> S;
        m "join"(L(&S)) -> S;
        m "join"(L(&S), S) -> S;
        g "strings.quote"(S) -> S;
        m "find"(S, S) -> S;
        m "findAll"(S, S) -> L(&S);
        m "findAll"(S, S, I) -> L(&S);
        m "isSorted"(L(&I)) -> B;
        m "isSorted"(L(&U)) -> B;
        m "isSorted"(L(&D)) -> B;
        m "isSorted"(L(&B)) -> B;
        m "isSorted"(L(&S)) -> B;
        m "isSorted"(L(&By)) -> B;
        m "isSorted"(L(&Dur)) -> B;
        m "isSorted"(L(&Ts)) -> B;
        m "min"(L(&I)) -> I;
        m "min"(L(&U)) -> U;
        m "min"(L(&D)) -> D;
        m "min"(L(&B)) -> B;
        m "min"(L(&S)) -> S;
        m "min"(L(&By)) -> By;
        m "min"(L(&Dur)) -> Dur;
        m "min"(L(&Ts)) -> Ts;
        m "max"(L(&I)) -> I;
        m "max"(L(&U)) -> U;
        m "max"(L(&D)) -> D;
        m "max"(L(&B)) -> B;
        m "max"(L(&S)) -> S;
        m "max"(L(&By)) -> By;
        m "max"(L(&Dur)) -> Dur;
        m "max"(L(&Ts)) -> Ts;
        m "sum"(L(&I)) -> I;
        m "sum"(L(&U)) -> U;
        m "sum"(L(&D)) -> D;
        m "sum"(L(&Dur)) -> Dur;
        // The constructors (`staging/src/k8s.io/apiserver/pkg/cel`'s `QuantityType`,
        // `URLType`, `IPType`, `CIDRType`): their values compare with `==` only
        // (`quantity(a) > quantity(b)` has no overload; `isGreaterThan` is the way).
        g "quantity"(S) -> Op(QUANTITY);
        g "ip"(S) -> Op(IP);
        g "cidr"(S) -> Op(CIDR);
        g "url"(S) -> Op(URL);
        g "isURL"(S) -> B;
        m "getScheme"(Op(URL)) -> S;
        m "getHost"(Op(URL)) -> S;
        m "getHostname"(Op(URL)) -> S;
        m "getPort"(Op(URL)) -> S;
        m "getEscapedPath"(Op(URL)) -> S;
        m "getQuery"(Op(URL)) -> M(&S, &L(&S));
        g "isQuantity"(S) -> B;
        g "sign"(Op(QUANTITY)) -> I;
        m "isInteger"(Op(QUANTITY)) -> B;
        m "asInteger"(Op(QUANTITY)) -> I;
        m "asApproximateFloat"(Op(QUANTITY)) -> D;
        m "add"(Op(QUANTITY), Op(QUANTITY)) -> Op(QUANTITY);
        m "add"(Op(QUANTITY), I) -> Op(QUANTITY);
        m "sub"(Op(QUANTITY), Op(QUANTITY)) -> Op(QUANTITY);
        m "sub"(Op(QUANTITY), I) -> Op(QUANTITY);
        m "isGreaterThan"(Op(QUANTITY), Op(QUANTITY)) -> B;
        m "isLessThan"(Op(QUANTITY), Op(QUANTITY)) -> B;
        m "compareTo"(Op(QUANTITY), Op(QUANTITY)) -> I;
        m "ip"(Op(CIDR)) -> Op(IP);
        g "isIP"(S) -> B;
        g "ip.isCanonical"(S) -> B;
        m "family"(Op(IP)) -> I;
        m "isUnspecified"(Op(IP)) -> B;
        m "isLoopback"(Op(IP)) -> B;
        m "isLinkLocalMulticast"(Op(IP)) -> B;
        m "isLinkLocalUnicast"(Op(IP)) -> B;
        m "isGlobalUnicast"(Op(IP)) -> B;
        g "isCIDR"(S) -> B;
        m "containsIP"(Op(CIDR), S) -> B;
        m "containsIP"(Op(CIDR), Op(IP)) -> B;
        m "containsCIDR"(Op(CIDR), S) -> B;
        m "containsCIDR"(Op(CIDR), Op(CIDR)) -> B;
        m "masked"(Op(CIDR)) -> Op(CIDR);
        m "prefixLength"(Op(CIDR)) -> I;
        g "sets.contains"(L(&A), L(&A)) -> B;
        g "sets.equivalent"(L(&A), L(&A)) -> B;
        g "sets.intersects"(L(&A), L(&A)) -> B;
        m "validate"(Op(NAMED_FORMAT), S) -> P::Dyn;
        g "format.named"(S) -> P::Dyn;
        g "format.dns1123Label"() -> Op(NAMED_FORMAT);
        g "format.dns1123Subdomain"() -> Op(NAMED_FORMAT);
        g "format.dns1035Label"() -> Op(NAMED_FORMAT);
        g "format.dns1123LabelPrefix"() -> Op(NAMED_FORMAT);
        g "format.dns1123SubdomainPrefix"() -> Op(NAMED_FORMAT);
        g "format.dns1035LabelPrefix"() -> Op(NAMED_FORMAT);
        g "format.qualifiedName"() -> Op(NAMED_FORMAT);
        g "format.labelValue"() -> Op(NAMED_FORMAT);
        g "format.uri"() -> Op(NAMED_FORMAT);
        g "format.uuid"() -> Op(NAMED_FORMAT);
        g "format.byte"() -> Op(NAMED_FORMAT);
        g "format.date"() -> Op(NAMED_FORMAT);
        g "format.datetime"() -> Op(NAMED_FORMAT);
        m "path"(Op(AUTHZ), S) -> Op(PATH);
        m "group"(Op(AUTHZ), S) -> Op(GROUP);
        m "serviceAccount"(Op(AUTHZ), S, S) -> Op(AUTHZ);
        m "resource"(Op(GROUP), S) -> Op(RESOURCE);
        m "subresource"(Op(RESOURCE), S) -> Op(RESOURCE);
        m "namespace"(Op(RESOURCE), S) -> Op(RESOURCE);
        m "name"(Op(RESOURCE), S) -> Op(RESOURCE);
        m "fieldSelector"(Op(RESOURCE), S) -> Op(RESOURCE);
        m "labelSelector"(Op(RESOURCE), S) -> Op(RESOURCE);
        m "check"(Op(PATH), S) -> Op(DECISION);
        m "check"(Op(RESOURCE), S) -> Op(DECISION);
        m "allowed"(Op(DECISION)) -> B;
        m "errored"(Op(DECISION)) -> B;
        m "reason"(Op(DECISION)) -> S;
        m "error"(Op(DECISION)) -> S;
        m "getFullYear"(Ts) -> I;
        m "getFullYear"(Ts, S) -> I;
        m "getMonth"(Ts) -> I;
        m "getMonth"(Ts, S) -> I;
        m "getDate"(Ts) -> I;
        m "getDate"(Ts, S) -> I;
        m "getDayOfMonth"(Ts) -> I;
        m "getDayOfMonth"(Ts, S) -> I;
        m "getDayOfWeek"(Ts) -> I;
        m "getDayOfWeek"(Ts, S) -> I;
        m "getDayOfYear"(Ts) -> I;
        m "getDayOfYear"(Ts, S) -> I;
        m "getHours"(Ts) -> I;
        m "getHours"(Ts, S) -> I;
        m "getHours"(Dur) -> I;
        m "getMinutes"(Ts) -> I;
        m "getMinutes"(Ts, S) -> I;
        m "getMinutes"(Dur) -> I;
        m "getSeconds"(Ts) -> I;
        m "getSeconds"(Ts, S) -> I;
        m "getSeconds"(Dur) -> I;
        m "getMilliseconds"(Ts) -> I;
        m "getMilliseconds"(Ts, S) -> I;
        m "getMilliseconds"(Dur) -> I;
    }
};

/// Resolves a call against `table`: [`Resolution::Unknown`] for a function not there;
/// else the result of the overloads these arguments fit (`dyn` fits any parameter; the
/// results, when several fit, are one type or `dyn`), or no overload.
fn overloads(
    table: &'static [Overload],
    function: &str,
    target: Option<&Ty>,
    args: &[Ty],
) -> Resolution {
    let mut named = table.iter().filter(|o| o.function == function).peekable();
    if named.peek().is_none() {
        return Resolution::Unknown;
    }
    let given: Vec<&Ty> = target.into_iter().chain(args).collect();
    let mut result: Option<Ty> = None;
    for o in named.filter(|o| o.member == target.is_some() && o.params.len() == given.len()) {
        let mut a = None;
        if o.params.iter().zip(&given).all(|(p, t)| fits(p, t, &mut a)) {
            let r = instantiate(&o.result, a.as_ref());
            result = Some(match result {
                None => r,
                Some(before) if before == r => before,
                Some(_) => Ty::Dyn,
            });
        }
    }
    result.map_or(Resolution::NoOverload, Resolution::Type)
}

/// Whether `t` may be passed for `p`, binding the type parameter in `a`.
fn fits(p: &P, t: &Ty, a: &mut Option<Ty>) -> bool {
    if t.is_dyn() {
        return true;
    }
    match (p, t) {
        (P::Dyn, _) => true,
        (P::A, _) => match a.as_ref().map(|bound| unify(bound, t)) {
            None => {
                *a = Some(t.clone());
                true
            }
            Some(Some(joined)) => {
                // A `dyn` bound learns the more precise type.
                if a.as_ref().is_some_and(Ty::is_dyn) {
                    *a = Some(joined);
                }
                true
            }
            Some(None) => false,
        },
        (P::L(e), Ty::List(te)) => fits(e, te, a),
        (P::M(k, v), Ty::Map(tk, tv)) => fits(k, tk, a) && fits(v, tv, a),
        (P::Op(name), Ty::Opaque(o)) => name == o,
        _ => instantiate(p, None) == *t,
    }
}

/// The type `p` stands for, with the type parameter bound to `a` (`dyn` when unbound).
fn instantiate(p: &P, a: Option<&Ty>) -> Ty {
    match p {
        P::S => Ty::String,
        P::I => Ty::Int,
        P::U => Ty::Uint,
        P::D => Ty::Double,
        P::B => Ty::Bool,
        P::By => Ty::Bytes,
        P::Dur => Ty::Duration,
        P::Ts => Ty::Timestamp,
        P::Dyn => Ty::Dyn,
        P::A => a.cloned().unwrap_or(Ty::Dyn),
        P::L(e) => Ty::List(Box::new(instantiate(e, a))),
        P::M(k, v) => Ty::Map(Box::new(instantiate(k, a)), Box::new(instantiate(v, a))),
        P::Op(name) => Ty::Opaque(name),
    }
}

/// Whether Go's `time.ParseDuration` takes `s`: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+` with the
/// units ns, us, µs, μs, ms, s, m, h, or `0`, within ±2⁶³−1 ns.
fn is_go_duration(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    if s == "0" {
        return true;
    }
    if s.is_empty() {
        return false;
    }
    let mut rest = s;
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int, after) = rest.split_at(int_len);
        let (frac, after) = match after.strip_prefix('.') {
            Some(a) => {
                let n = a.bytes().take_while(u8::is_ascii_digit).count();
                (Some(&a[..n]), &a[n..])
            }
            None => (None, after),
        };
        if int.is_empty() && frac.is_none_or(str::is_empty) {
            return false;
        }
        let unit_len = after
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(after.len(), |(i, _)| i);
        let (unit, next) = after.split_at(unit_len);
        let nanos: f64 = match unit {
            "ns" => 1.0,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return false,
        };
        let value: f64 = format!(
            "{}.{}",
            if int.is_empty() { "0" } else { int },
            frac.unwrap_or("0")
        )
        .parse()
        .unwrap_or(f64::INFINITY);
        total += value * nanos;
        if total > 9_223_372_036_854_775_807.0 {
            return false;
        }
        rest = next;
    }
    true
}

/// Whether Go's `time.Parse(time.RFC3339, s)` takes `s` (`T` and `Z` upper case, a fraction of
/// a second allowed, every field in range) for a year CEL's timestamps reach (1 to 9999).
fn is_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    let num = |from: usize, len: usize| -> Option<u32> {
        let part = b.get(from..from + len)?;
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| std::str::from_utf8(part).ok()?.parse().ok())
            .flatten()
    };
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    let (Some(year), Some(month), Some(day), Some(hour), Some(minute), Some(second)) = (
        num(0, 4),
        num(5, 2),
        num(8, 2),
        num(11, 2),
        num(14, 2),
        num(17, 2),
    ) else {
        return false;
    };
    if !(at(4, b'-') && at(7, b'-') && at(10, b'T') && at(13, b':') && at(16, b':')) {
        return false;
    }
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    if year == 0 || day == 0 || day > days || hour > 23 || minute > 59 || second > 59 {
        return false;
    }
    let mut i = 19;
    if matches!(b.get(i), Some(b'.' | b',')) {
        let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return false;
        }
        i += 1 + digits;
    }
    match &b[i..] {
        b"Z" => true,
        [sign, ..] if matches!(sign, b'+' | b'-') && b.len() == i + 6 => {
            at(i + 3, b':') && num(i + 1, 2).is_some_and(|h| h <= 24) && num(i + 4, 2).is_some()
        }
        _ => false,
    }
}

/// `bool` for a bool (or unknown) argument.
fn bool_of(a: &Ty) -> Option<Ty> {
    (a.is_dyn() || *a == Ty::Bool).then_some(Ty::Bool)
}

/// A conversion function's result when it takes `a`.
fn conversion(a: &Ty, from: &[Ty], to: Ty) -> Option<Ty> {
    (a.is_dyn() || from.contains(a)).then_some(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(expression: &str) -> Vec<String> {
        let program = super::super::cel_env::compile(expression).unwrap();
        let declarations = Declarations {
            variables: &[
                ("object", Ty::Dyn),
                ("request", Ty::Object(&REQUEST)),
                ("namespaceObject", Ty::Object(&NAMESPACE)),
            ],
        };
        check(program.expression(), &declarations)
            .1
            .into_iter()
            .map(|(_, m)| m)
            .collect()
    }

    /// Accepted by kube-apiserver 1.32.0 (checked on it): nothing reported.
    #[test]
    fn what_kube_apiserver_accepts_passes() {
        for expression in [
            "object.x == 1",
            "request.userInfo.groups + ['a'] == []",
            "request.operation in ['CREATE']",
            "namespaceObject.metadata.labels.foo == 'x'",
            "request.kind.group.size() > 0",
            "has(object.foo)",
            "request.options.x == 1",
            "request.userInfo.extra.foo == ['x']",
            "object.spec.replicas > 'x'",
            "request == null",
            "1u < 1",
            "request.name in {'a': 1}",
            "'a' in request.userInfo.groups",
            "timestamp('2020-01-01T00:00:00Z') + duration('1s') > timestamp('2020-01-01T00:00:00Z')",
            "true < false",
            "b'a' < b'b'",
            "string(1) == '1'",
            "dyn(1) == 'a'",
            "type(1) == int",
            "[[1]].all(x, x.all(y, y > 0))",
            "quantity('1') == quantity('1') && quantity('2').isGreaterThan(quantity('1'))",
            "ip('1.2.3.4').family() == 4 && cidr('10.0.0.0/8').containsIP(ip('10.1.2.3'))",
        ] {
            assert_eq!(errors(expression), Vec::<String>::new(), "{expression}");
        }
    }

    /// Literal durations and timestamps as kube-apiserver 1.32.0 takes them (checked on it):
    /// Go's `time.ParseDuration` and `time.Parse(time.RFC3339, …)`.
    #[test]
    fn duration_and_timestamp_literals_are_validated() {
        assert!(errors(
            "duration('1h30m') > duration('-1.5s') && duration('0') == duration('1\u{b5}s') - duration('1us') \
             && timestamp('2020-01-01T00:00:00.5+01:00') > timestamp('2020-02-29T00:00:00Z')"
        )
        .is_empty());
        for bad in ["''", "'1'", "'.s'", "'3000000h'", "'1x'"] {
            assert_eq!(
                errors(&format!("duration({bad}) > duration('1s')")),
                ["invalid duration argument"],
                "{bad}"
            );
        }
        for bad in [
            "'2020-01-01t00:00:00z'",
            "'2020-02-30T00:00:00Z'",
            "'2020-01-01T24:00:00Z'",
            "'x'",
        ] {
            assert_eq!(
                errors(&format!(
                    "timestamp({bad}) > timestamp('2020-01-01T00:00:00Z')"
                )),
                ["invalid timestamp argument"],
                "{bad}"
            );
        }
    }

    /// Refused by kube-apiserver 1.32.0 at create (checked on it).
    #[test]
    fn library_values_compare_only_with_equality() {
        assert_eq!(
            errors("quantity(object.data.q) > quantity('1')"),
            ["found no matching overload for '_>_' applied to '(kubernetes.Quantity, kubernetes.Quantity)'"]
        );
    }
}
