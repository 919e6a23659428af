//! Field-level validation errors as kube-apiserver words them: a field path, an error type
//! (`Required value`, `Invalid value`, `Unsupported value`, ...), the offending value and a
//! detail. Mirrors `staging/src/k8s.io/apimachinery/pkg/util/validation/field/errors.go`
//! (`Error`, `ErrorType`, the constructors `Required`, `Invalid`, `NotSupported`, ...) and
//! `field/path.go` (`Path`). Display reproduces `(*Error).Error` byte for byte, so the
//! messages `check` prints and tests pin stay kube-apiserver's. Depends on nothing else in
//! the crate.

use std::fmt::{self, Write as _};

/// Why a field is invalid: `ErrorType` of `field/errors.go`, displayed as its
/// `ErrorType.String` (`Required value`, `Unsupported value`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(
    dead_code,
    reason = "apimachinery's whole set, so that each displays as upstream"
)]
pub(crate) enum ErrorType {
    /// `ErrorTypeNotFound`: `Not found`.
    NotFound,
    /// `ErrorTypeRequired`: `Required value`.
    Required,
    /// `ErrorTypeDuplicate`: `Duplicate value`.
    Duplicate,
    /// `ErrorTypeInvalid`: `Invalid value`.
    Invalid,
    /// `ErrorTypeNotSupported`: `Unsupported value`.
    NotSupported,
    /// `ErrorTypeForbidden`: `Forbidden`.
    Forbidden,
    /// `ErrorTypeTooLong`: `Too long`.
    TooLong,
    /// `ErrorTypeTooMany`: `Too many`.
    TooMany,
    /// `ErrorTypeInternal`: `Internal error`.
    Internal,
    /// `ErrorTypeTypeInvalid`: `Invalid value` (a value not of the schema's type).
    TypeInvalid,
}

impl ErrorType {
    /// The canonical text of the type (`ErrorType.String`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ErrorType::NotFound => "Not found",
            ErrorType::Required => "Required value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::Invalid | ErrorType::TypeInvalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
            ErrorType::Internal => "Internal error",
        }
    }
}

impl fmt::Display for ErrorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The offending value of an [`Error`] (`Error.BadValue`), rendered as `ErrorBody` does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum BadValue {
    /// No value shown (`omitValue`): the body is the type, then the detail.
    Omitted,
    /// A string, quoted as Go's `%q` (see [`quote`]).
    String(String),
    /// An integer, shown as Go's `%v`.
    Int(i64),
    /// A value shown as it is: Go's `fmt.Stringer` case, for values whose text is already
    /// made (a list, a parse error).
    Text(String),
}

impl From<&str> for BadValue {
    fn from(s: &str) -> Self {
        BadValue::String(s.to_string())
    }
}

impl From<&String> for BadValue {
    fn from(s: &String) -> Self {
        BadValue::String(s.clone())
    }
}

impl From<String> for BadValue {
    fn from(s: String) -> Self {
        BadValue::String(s)
    }
}

impl From<i64> for BadValue {
    fn from(n: i64) -> Self {
        BadValue::Int(n)
    }
}

impl From<i32> for BadValue {
    fn from(n: i32) -> Self {
        BadValue::Int(n.into())
    }
}

impl From<u64> for BadValue {
    fn from(n: u64) -> Self {
        // Beyond i64 only as text: Go would print the same digits.
        i64::try_from(n).map_or_else(|_| BadValue::Text(n.to_string()), BadValue::Int)
    }
}

/// A field-level validation error (`field.Error` of
/// `staging/src/k8s.io/apimachinery/pkg/util/validation/field/errors.go`). Displays as
/// `(*Error).Error`: `<field>: <body>`; `Error::body` is `ErrorBody`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// What is wrong.
    pub(crate) error_type: ErrorType,
    /// The field path, as `Path.String` renders it (`spec.versions[1].name`).
    pub(crate) field: String,
    /// The offending value.
    pub(crate) bad_value: BadValue,
    /// Free text after the value; empty for none.
    pub(crate) detail: String,
}

impl std::error::Error for Error {}

/// A list of field errors (`field.ErrorList`).
pub(crate) type ErrorList = Vec<Error>;

impl Error {
    /// An error of any type, for the messages the named constructors do not shape (a
    /// `NotSupported` whose detail is not a list of values, a `NotFound` with a detail).
    pub(crate) fn new(
        error_type: ErrorType,
        field: impl Into<String>,
        bad_value: BadValue,
        detail: impl Into<String>,
    ) -> Self {
        Error {
            error_type,
            field: field.into(),
            bad_value,
            detail: detail.into(),
        }
    }

    /// `field.Required`: `<field>: Required value[: <detail>]`.
    pub(crate) fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Required, field, BadValue::Omitted, detail)
    }

    /// `field.Invalid`: `<field>: Invalid value: <value>[: <detail>]`.
    pub(crate) fn invalid(
        field: impl Into<String>,
        value: impl Into<BadValue>,
        detail: impl Into<String>,
    ) -> Self {
        Self::new(ErrorType::Invalid, field, value.into(), detail)
    }

    /// `field.NotSupported`: `<field>: Unsupported value: <value>: supported values: "a", "b"`
    /// (each valid value quoted by `strconv.Quote`, in the order given).
    pub(crate) fn not_supported(
        field: impl Into<String>,
        value: impl Into<BadValue>,
        valid: &[&str],
    ) -> Self {
        let mut detail = String::new();
        if !valid.is_empty() {
            detail.push_str("supported values: ");
            for (i, v) in valid.iter().enumerate() {
                if i > 0 {
                    detail.push_str(", ");
                }
                detail.push_str(&quote(v));
            }
        }
        Self::new(ErrorType::NotSupported, field, value.into(), detail)
    }

    /// `field.Duplicate`: `<field>: Duplicate value: <value>`.
    pub(crate) fn duplicate(field: impl Into<String>, value: impl Into<BadValue>) -> Self {
        Self::new(ErrorType::Duplicate, field, value.into(), "")
    }

    /// `field.Forbidden`: `<field>: Forbidden[: <detail>]`.
    pub(crate) fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Forbidden, field, BadValue::Omitted, detail)
    }

    /// `field.TooLong`: `<field>: Too long: may not be more than <max> bytes` (`byte` for
    /// 1); `value is too long` when `max` is negative. The value itself is never shown.
    #[allow(
        dead_code,
        reason = "apimachinery's constructor; no configuration field has a length limit yet"
    )]
    pub(crate) fn too_long(field: impl Into<String>, max: i64) -> Self {
        let detail = match max {
            1 => "may not be more than 1 byte".to_string(),
            max if max >= 0 => format!("may not be more than {max} bytes"),
            _ => "value is too long".to_string(),
        };
        Self::new(ErrorType::TooLong, field, BadValue::Omitted, detail)
    }

    /// `field.TooMany`: `<field>: Too many: <actual>: must have at most <max> items` (`item`
    /// for 1); the count is left out when negative, the bound replaced by `has too many items`.
    pub(crate) fn too_many(field: impl Into<String>, actual: i64, max: i64) -> Self {
        let detail = match max {
            1 => "must have at most 1 item".to_string(),
            max if max >= 0 => format!("must have at most {max} items"),
            _ => "has too many items".to_string(),
        };
        let value = if actual >= 0 {
            BadValue::Int(actual)
        } else {
            BadValue::Omitted
        };
        Self::new(ErrorType::TooMany, field, value, detail)
    }

    /// The same error at `prefix` followed by its field (`items[0].` + `webhooks[1].name`).
    pub(crate) fn prefixed(mut self, prefix: &str) -> Self {
        self.field.insert_str(0, prefix);
        self
    }

    /// The message without the field (`ErrorBody`): the type, the value unless the type or
    /// [`BadValue::Omitted`] hides it, then `: <detail>` when there is one.
    pub(crate) fn body(&self) -> String {
        let mut s = self.error_type.as_str().to_string();
        // Required, Forbidden, TooLong and Internal never show their value.
        let hidden = matches!(
            self.error_type,
            ErrorType::Required | ErrorType::Forbidden | ErrorType::TooLong | ErrorType::Internal
        );
        if !hidden {
            match &self.bad_value {
                BadValue::Omitted => {}
                BadValue::String(v) => {
                    s.push_str(": ");
                    s.push_str(&quote(v));
                }
                BadValue::Int(n) => {
                    let _ = write!(s, ": {n}");
                }
                BadValue::Text(t) => {
                    s.push_str(": ");
                    s.push_str(t);
                }
            }
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// The text of `ErrorList.ToAggregate().Error()`: each distinct message once, in order; a
/// single message as it is, several as `[a, b]`; empty for none (`aggregate.Error` in
/// `staging/src/k8s.io/apimachinery/pkg/util/errors/errors.go`).
pub(crate) fn aggregate(list: &[Error]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for error in list {
        let message = error.to_string();
        if !seen.contains(&message) {
            seen.push(message);
        }
    }
    match seen.len() {
        0 => String::new(),
        1 => seen.remove(0),
        _ => format!("[{}]", seen.join(", ")),
    }
}

/// A field path (`field.Path` of `staging/src/k8s.io/apimachinery/pkg/util/validation/field/path.go`),
/// kept rendered: `NewPath("spec").Child("versions").Index(1)` is `spec.versions[1]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Path(String);

impl Path {
    /// The root of a path (`NewPath`).
    pub(crate) fn new(name: &str) -> Self {
        Path(name.to_string())
    }

    /// A field below this one (`Child`): `.name`.
    pub(crate) fn child(mut self, name: &str) -> Self {
        if !self.0.is_empty() {
            self.0.push('.');
        }
        self.0.push_str(name);
        self
    }

    /// A list element (`Index`): `[i]`.
    pub(crate) fn index(mut self, i: usize) -> Self {
        let _ = write!(self.0, "[{i}]");
        self
    }

    /// A map entry (`Key`): `[key]`, the key unquoted as upstream prints it.
    #[allow(
        dead_code,
        reason = "apimachinery's path step; no map-keyed field is validated yet"
    )]
    pub(crate) fn key(mut self, key: &str) -> Self {
        let _ = write!(self.0, "[{key}]");
        self
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<Path> for String {
    fn from(p: Path) -> Self {
        p.0
    }
}

/// `s` quoted as Go's `strconv.Quote` (`%q`), which `ErrorBody` and `NotSupported` use:
/// `"` and `\` escaped, `\a \b \f \n \r \t \v` by name, other ASCII controls as `\xNN`,
/// other unprintable characters as `\uNNNN` or `\UNNNNNNNN`. Whether a non-ASCII character
/// is printable is Rust's judgement (the table `str::escape_debug` uses), which stands in for
/// Go's `unicode.IsPrint`: letters, marks, numbers, punctuation and symbols print as they are;
/// the two tables differ only where their Unicode versions do.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            ' '..='~' => out.push(c),
            c if c < ' ' || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if is_printable(c) => out.push(c),
            c if (c as u32) < 0x10000 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\U{:08x}", c as u32);
            }
        }
    }
    out.push('"');
    out
}

/// Whether `c` is printable by Rust's table. After another character, `str::escape_debug`
/// escapes only what is not printable: combining marks stay, as in Go.
fn is_printable(c: char) -> bool {
    let mut pair = String::from("a");
    pair.push(c);
    pair.escape_debug().count() == 2
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each constructor's text as `field/errors.go` builds it: the examples of
    /// `field/errors_test.go` (`TestErrorUsefulMessage`, `TestNotSupported`) and messages of
    /// the validations this crate reproduces.
    #[test]
    fn messages_are_kube_apiservers() {
        assert_eq!(
            Error::not_supported("f", "v", &["a", "b", "c"]).body(),
            r#"Unsupported value: "v": supported values: "a", "b", "c""#
        );
        let cases = [
            (
                Error::invalid("foo", "bar", "deet"),
                "foo: Invalid value: \"bar\": deet",
            ),
            (
                Error::required("spec.webhooks[0].name", ""),
                "spec.webhooks[0].name: Required value",
            ),
            (Error::required("f", "detail"), "f: Required value: detail"),
            (
                Error::invalid("f", "x", "must be y"),
                "f: Invalid value: \"x\": must be y",
            ),
            (
                Error::invalid("timeoutSeconds", 31, "must be between 1 and 30 seconds"),
                "timeoutSeconds: Invalid value: 31: must be between 1 and 30 seconds",
            ),
            (
                Error::not_supported("failurePolicy", "Foo", &["Fail", "Ignore"]),
                "failurePolicy: Unsupported value: \"Foo\": supported values: \"Fail\", \"Ignore\"",
            ),
            (
                Error::not_supported("f", "Foo", &[]),
                "f: Unsupported value: \"Foo\"",
            ),
            (Error::duplicate("f", "a"), "f: Duplicate value: \"a\""),
            (
                Error::forbidden("f", "may not be set"),
                "f: Forbidden: may not be set",
            ),
            (
                Error::too_long("f", 63),
                "f: Too long: may not be more than 63 bytes",
            ),
            (
                Error::too_long("f", 1),
                "f: Too long: may not be more than 1 byte",
            ),
            (Error::too_long("f", -1), "f: Too long: value is too long"),
            (
                Error::too_many("f", 65, 64),
                "f: Too many: 65: must have at most 64 items",
            ),
            (
                Error::too_many("f", -1, -1),
                "f: Too many: has too many items",
            ),
            (
                Error::new(ErrorType::Invalid, "f", BadValue::Omitted, "must be a list"),
                "f: Invalid value: must be a list",
            ),
            (
                Error::new(ErrorType::Internal, "f", "v".into(), "broke"),
                "f: Internal error: broke",
            ),
            (
                Error::new(ErrorType::NotFound, "f", "v".into(), ""),
                "f: Not found: \"v\"",
            ),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text);
        }
    }

    #[test]
    fn body_leaves_out_the_field_and_prefix_prepends_to_it() {
        let e = Error::duplicate("name", "a").prefixed("webhooks[0].");
        assert_eq!(e.field, "webhooks[0].name");
        assert_eq!(e.body(), "Duplicate value: \"a\"");
    }

    /// Duplicates are dropped (`TestToAggregate`); one message stands alone, several are
    /// bracketed (`aggregate.Error`).
    #[test]
    fn aggregates_join_distinct_messages() {
        let a = Error::required("a", "");
        let b = Error::duplicate("b", "x");
        assert_eq!(aggregate(&[]), "");
        assert_eq!(aggregate(&[a.clone(), a.clone()]), "a: Required value");
        assert_eq!(
            aggregate(&[a.clone(), b, a]),
            "[a: Required value, b: Duplicate value: \"x\"]"
        );
    }

    /// `NewPath(...).Child(...).Index(...).Key(...)` as `Path.String` renders it.
    #[test]
    fn paths_render_as_upstream() {
        let p = Path::new("spec")
            .child("versions")
            .index(1)
            .child("labels")
            .key("app");
        assert_eq!(p.to_string(), "spec.versions[1].labels[app]");
        assert_eq!(String::from(Path::new("").child("name")), "name");
    }

    /// `strconv.Quote`'s escapes (examples of Go's `strconv/quote_test.go`, `quotetests`).
    #[test]
    fn quoting_is_gos() {
        assert_eq!(quote("\u{7}\u{8}\u{c}\r\n\t\u{b}"), r#""\a\b\f\r\n\t\v""#);
        assert_eq!(quote("\\"), r#""\\""#);
        assert_eq!(
            quote("!\u{a0}!\u{2000}!\u{3000}!"),
            r#""!\u00a0!\u2000!\u3000!""#
        );
        assert_eq!(quote("\u{263a}"), "\"\u{263a}\"");
        assert_eq!(quote("\u{10ffff}"), r#""\U0010ffff""#);
        assert_eq!(quote("\u{4}"), r#""\x04""#);
        assert_eq!(quote("\u{7f}"), r#""\x7f""#);
        assert_eq!(quote("\u{200b}"), r#""\u200b""#);
        assert_eq!(quote("e\u{301}"), "\"e\u{301}\"");
        assert_eq!(quote("\"x\""), r#""\"x\"""#);
    }
}
