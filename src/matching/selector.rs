//! Label selectors (`namespaceSelector`, `objectSelector`), compiled once at config load into
//! `kube_core::Selector`, which matches as apimachinery's `Requirement.Matches`
//! (`staging/src/k8s.io/apimachinery/pkg/labels/selector.go`); and selectors written as kubectl's
//! `-l` takes them, parsed as that file's `Parse` does ([`parse_selector`]). Depends on `api`,
//! `field_error` and `names`.

use std::collections::BTreeMap;

use kube_core::{Expression, Selector, SelectorExt};

use crate::api;
use crate::field_error::{self, Error as FieldError};
use crate::names;

/// A compiled `metav1.LabelSelector`. The v1 API defaults an omitted selector to `{}`
/// (`pkg/apis/admissionregistration/v1/defaults.go`), which matches everything
/// (`LabelSelectorAsSelector`), so an absent selector compiles to the empty one.
#[derive(Clone, Debug, Default)]
pub struct LabelSelector {
    /// `None` for the empty selector: no labels are looked up at all.
    selector: Option<Selector>,
}

/// `ValidateLabelSelector` (`k8s.io/apimachinery/pkg/apis/meta/v1/validation`), with
/// invalid label values refused (`AllowInvalidLabelValueInSelector` false, as on create): each
/// `matchLabels` key and value, then each requirement's operator, key and values, under
/// `path` and in apimachinery's words.
pub(crate) fn validate_label_selector(
    selector: Option<&api::LabelSelector>,
    path: &str,
    bad: &mut impl FnMut(FieldError),
) {
    let Some(selector) = selector else { return };
    let labels = format!("{path}.matchLabels");
    for (key, value) in selector.match_labels.iter().flatten() {
        for msg in names::qualified_name_errors(key) {
            bad(FieldError::invalid(labels.clone(), key, msg));
        }
        for msg in names::label_value_errors(value) {
            bad(FieldError::invalid(labels.clone(), value, msg));
        }
    }
    for (i, req) in selector.match_expressions.iter().flatten().enumerate() {
        let at = format!("{path}.matchExpressions[{i}]");
        let values = req.values.as_deref().unwrap_or_default();
        match req.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => bad(FieldError::required(
                format!("{at}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => bad(FieldError::forbidden(
                format!("{at}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => bad(FieldError::invalid(
                format!("{at}.operator"),
                other,
                "not a valid selector operator",
            )),
        }
        for msg in names::qualified_name_errors(&req.key) {
            bad(FieldError::invalid(format!("{at}.key"), &req.key, msg));
        }
        for (j, value) in values.iter().enumerate() {
            for msg in names::label_value_errors(value) {
                bad(FieldError::invalid(format!("{at}.values[{j}]"), value, msg));
            }
        }
    }
}

impl LabelSelector {
    /// Compiles a selector. `matchLabels` entries are `Equal` requirements; all requirements
    /// are ANDed (`metav1.LabelSelectorAsSelector`).
    ///
    /// # Errors
    /// The field error `LabelSelectorAsSelector` would give (field `values` or `operator`,
    /// relative to the requirement) for an unknown operator, `In`/`NotIn` without values, or
    /// `Exists`/`DoesNotExist` with values.
    pub fn compile(selector: Option<&api::LabelSelector>) -> Result<Self, FieldError> {
        let Some(selector) = selector else {
            return Ok(Self::default());
        };
        let mut expressions = Vec::new();
        for (key, value) in selector.match_labels.iter().flatten() {
            expressions.push(Expression::Equal(key.clone(), value.clone()));
        }
        for req in selector.match_expressions.iter().flatten() {
            let values = req.values.clone().unwrap_or_default();
            let expression = match req.operator.as_str() {
                "In" | "NotIn" if values.is_empty() => {
                    return Err(FieldError::required(
                        "values",
                        format!(
                            "must be specified when `operator` is 'In' or 'NotIn' (key {})",
                            field_error::quote(&req.key)
                        ),
                    ))
                }
                "Exists" | "DoesNotExist" if !values.is_empty() => {
                    return Err(FieldError::forbidden(
                        "values",
                        format!(
                            "may not be specified when `operator` is 'Exists' or 'DoesNotExist' (key {})",
                            field_error::quote(&req.key)
                        ),
                    ))
                }
                "In" => Expression::In(req.key.clone(), values.into_iter().collect()),
                "NotIn" => Expression::NotIn(req.key.clone(), values.into_iter().collect()),
                "Exists" => Expression::Exists(req.key.clone()),
                "DoesNotExist" => Expression::DoesNotExist(req.key.clone()),
                other => {
                    return Err(FieldError::not_supported(
                        "operator",
                        other,
                        &["In", "NotIn", "Exists", "DoesNotExist"],
                    ))
                }
            };
            expressions.push(expression);
        }
        Ok(LabelSelector {
            selector: (!expressions.is_empty()).then(|| expressions.into_iter().collect()),
        })
    }

    /// True for the empty selector, which matches everything without looking at labels.
    pub(crate) fn is_empty(&self) -> bool {
        self.selector.is_none()
    }

    /// Whether `labels` satisfy every requirement (`NotIn` and `DoesNotExist` match an absent key).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.selector.as_ref().is_none_or(|s| s.matches(labels))
    }
}

/// The selector in `kubectl` syntax (`app=web,tier in (a,b)`); `{}` (everything) when empty.
impl std::fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.selector {
            None => f.write_str("{} (everything)"),
            Some(s) => write!(f, "{s}"),
        }
    }
}

/// Why a selector string does not parse: the message of apimachinery's parser (`labels.Parse`,
/// `staging/src/k8s.io/apimachinery/pkg/labels/selector.go`) where it has one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorSyntaxError(String);

impl From<String> for SelectorSyntaxError {
    fn from(message: String) -> Self {
        SelectorSyntaxError(message)
    }
}

/// A token of the selector syntax (`labels.Token`).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Identifier(String),
    /// `!` before a key: the key does not exist.
    Not,
    Equals,
    DoubleEquals,
    NotEquals,
    In,
    NotIn,
    GreaterThan,
    LessThan,
    Open,
    Close,
    Comma,
    End,
}

impl Token {
    /// The token as written, for error messages (`found '...'`).
    fn literal(&self) -> &str {
        match self {
            Token::Identifier(s) => s,
            Token::Not => "!",
            Token::Equals => "=",
            Token::DoubleEquals => "==",
            Token::NotEquals => "!=",
            Token::In => "in",
            Token::NotIn => "notin",
            Token::GreaterThan => ">",
            Token::LessThan => "<",
            Token::Open => "(",
            Token::Close => ")",
            Token::Comma => ",",
            Token::End => "",
        }
    }

    /// In a value position `in` and `notin` are plain words (`lookahead(Values)`).
    fn as_value(&self) -> Option<&str> {
        match self {
            Token::Identifier(s) => Some(s),
            Token::In => Some("in"),
            Token::NotIn => Some("notin"),
            _ => None,
        }
    }
}

/// `labels.Lexer`: identifiers run to white space or one of `=!(),><`; operators are the
/// longest run of those characters that is a token.
fn lex(text: &str) -> Vec<Token> {
    const SPECIAL: &[char] = &['=', '!', '(', ')', ',', '>', '<'];
    let mut tokens = Vec::new();
    let mut rest = text.trim_start_matches([' ', '\t', '\r', '\n']);
    while let Some(c) = rest.chars().next() {
        let (token, len) = if SPECIAL.contains(&c) {
            match (c, rest[1..].chars().next()) {
                ('!', Some('=')) => (Token::NotEquals, 2),
                ('=', Some('=')) => (Token::DoubleEquals, 2),
                ('!', _) => (Token::Not, 1),
                ('=', _) => (Token::Equals, 1),
                ('(', _) => (Token::Open, 1),
                (')', _) => (Token::Close, 1),
                (',', _) => (Token::Comma, 1),
                ('>', _) => (Token::GreaterThan, 1),
                _ => (Token::LessThan, 1),
            }
        } else {
            let len = rest
                .find(|c: char| SPECIAL.contains(&c) || matches!(c, ' ' | '\t' | '\r' | '\n'))
                .unwrap_or(rest.len());
            let word = &rest[..len];
            let token = match word {
                "in" => Token::In,
                "notin" => Token::NotIn,
                _ => Token::Identifier(word.to_string()),
            };
            (token, len)
        };
        tokens.push(token);
        rest = rest[len..].trim_start_matches([' ', '\t', '\r', '\n']);
    }
    tokens.push(Token::End);
    tokens
}

/// The parser over [`lex`]'s tokens (`labels.Parser`).
struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> &Token {
        self.tokens.get(self.at).unwrap_or(&Token::End)
    }

    fn next(&mut self) -> Token {
        let token = self.peek().clone();
        self.at += 1;
        token
    }

    /// `[!] KEY [ <set-based-restriction> | <exact-match-restriction> ]`, as one
    /// `metav1.LabelSelectorRequirement`-like `(key, operator, values)`.
    fn requirement(&mut self) -> Result<(String, &'static str, Vec<String>), SelectorSyntaxError> {
        let mut token = self.next();
        let not = token == Token::Not;
        if not {
            token = self.next();
        }
        let Some(key) = token.as_value().map(str::to_string) else {
            return Err(format!("found '{}', expected: identifier", token.literal()).into());
        };
        if !names::is_qualified_name(&key) {
            return Err(format!(
                "invalid label key {key:?}: must be a qualified name (an optional DNS subdomain prefix and '/', then at most 63 alphanumeric characters, '-', '_' or '.')"
            ).into());
        }
        if not {
            return Ok((key, "DoesNotExist", Vec::new()));
        }
        if matches!(self.peek(), Token::End | Token::Comma) {
            return Ok((key, "Exists", Vec::new()));
        }
        let operator = match self.next() {
            Token::In => "In",
            Token::NotIn => "NotIn",
            Token::Equals | Token::DoubleEquals => "Equals",
            Token::NotEquals => "NotEquals",
            // `ParseToLabelSelector` refuses these: a LabelSelector cannot hold them.
            Token::GreaterThan => {
                return Err(SelectorSyntaxError::from(
                    "\"gt\" isn't supported in label selectors".to_string(),
                ))
            }
            Token::LessThan => {
                return Err(SelectorSyntaxError::from(
                    "\"lt\" isn't supported in label selectors".to_string(),
                ))
            }
            other => {
                return Err(format!(
                    "found '{}', expected: in, notin, =, ==, !=, gt, lt",
                    other.literal()
                )
                .into())
            }
        };
        let values = if matches!(operator, "In" | "NotIn") {
            self.value_set()?
        } else {
            vec![self.exact_value()?]
        };
        if let Some(bad) = values.iter().find(|v| !names::is_label_value(v)) {
            return Err(format!(
                "invalid label value {bad:?} for key {key:?}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', at most 63 characters"
            ).into());
        }
        Ok((key, operator, values))
    }

    /// `"(" VALUE ["," VALUE]... ")"`; empty values allowed (`parseValues`,
    /// `parseIdentifiersList`).
    fn value_set(&mut self) -> Result<Vec<String>, SelectorSyntaxError> {
        let open = self.next();
        if open != Token::Open {
            return Err(format!("found '{}' expected: '('", open.literal()).into());
        }
        let mut values = std::collections::BTreeSet::new();
        let mut expect_value = true;
        loop {
            let token = self.next();
            match (&token, token.as_value()) {
                (_, Some(v)) if expect_value => {
                    values.insert(v.to_string());
                    expect_value = false;
                }
                (Token::Comma, _) => {
                    if expect_value {
                        values.insert(String::new());
                    }
                    expect_value = true;
                }
                (Token::Close, _) => {
                    if expect_value {
                        values.insert(String::new());
                    }
                    return Ok(values.into_iter().collect());
                }
                _ => {
                    return Err(format!(
                        "found '{}', expected: ',', ')' or identifier",
                        token.literal()
                    )
                    .into())
                }
            }
        }
    }

    /// The one value after `=`, `==` or `!=`; empty at a `,` or the end (`parseExactValue`).
    fn exact_value(&mut self) -> Result<String, SelectorSyntaxError> {
        if matches!(self.peek(), Token::End | Token::Comma) {
            return Ok(String::new());
        }
        let token = self.next();
        token
            .as_value()
            .map(str::to_string)
            .ok_or_else(|| format!("found '{}', expected: identifier", token.literal()).into())
    }
}

/// Parses a label selector written as kubectl's `-l` takes it (`env=prod,tier in (a,b),!x`;
/// `labels.Parse` in `staging/src/k8s.io/apimachinery/pkg/labels/selector.go`) into a
/// `metav1.LabelSelector`, as `ParseToLabelSelector`
/// (`staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/helpers.go`) converts it: `=` and `==`
/// into `matchLabels` (a second requirement on the same key into `matchExpressions`, `In`, so
/// that both still hold), `in`, `notin`, `KEY` and `!KEY` into `matchExpressions`. One
/// difference: `!=`, which `ParseToLabelSelector` refuses, becomes `NotIn` with its one value,
/// the same requirement (both match an absent key). The empty string selects everything.
///
/// # Errors
/// [`SelectorSyntaxError`]: the syntax error in `labels.Parse`'s words
/// (`unable to parse requirement: found ',', expected: identifier`), an invalid key or value,
/// or `gt`/`lt`, which a `LabelSelector` cannot hold.
pub fn parse_selector(text: &str) -> Result<api::LabelSelector, SelectorSyntaxError> {
    let mut parser = Parser {
        tokens: lex(text),
        at: 0,
    };
    let mut match_labels = BTreeMap::new();
    let mut match_expressions = Vec::new();
    loop {
        match parser.peek() {
            Token::End => break,
            Token::Not => {}
            token if token.as_value().is_some() => {}
            token => {
                return Err(SelectorSyntaxError(format!(
                    "found '{}', expected: !, identifier, or 'end of string'",
                    token.literal()
                )))
            }
        }
        let (key, operator, values) = parser
            .requirement()
            .map_err(|e| SelectorSyntaxError(format!("unable to parse requirement: {}", e.0)))?;
        match operator {
            "Equals" if !match_labels.contains_key(&key) => {
                match_labels.insert(key, values.into_iter().next().unwrap_or_default());
            }
            _ => {
                let operator = match operator {
                    "Equals" => "In",
                    "NotEquals" => "NotIn",
                    other => other,
                };
                match_expressions.push(api::LabelSelectorRequirement {
                    key,
                    operator: operator.to_string(),
                    values: (!values.is_empty()).then_some(values),
                });
            }
        }
        match parser.next() {
            Token::End => break,
            Token::Comma if parser.peek() == &Token::Not || parser.peek().as_value().is_some() => {}
            Token::Comma => {
                return Err(SelectorSyntaxError(format!(
                    "found '{}', expected: identifier after ','",
                    parser.peek().literal()
                )))
            }
            other => {
                return Err(SelectorSyntaxError(format!(
                    "found '{}', expected: ',' or 'end of string'",
                    other.literal()
                )))
            }
        }
    }
    Ok(api::LabelSelector {
        match_labels: (!match_labels.is_empty()).then_some(match_labels),
        match_expressions: (!match_expressions.is_empty()).then_some(match_expressions),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::LabelSelectorRequirement;

    fn sel(
        labels: &[(&str, &str)],
        exprs: &[(&str, &str, &[&str])],
    ) -> Result<LabelSelector, FieldError> {
        LabelSelector::compile(Some(&api::LabelSelector {
            match_labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            match_expressions: Some(
                exprs
                    .iter()
                    .map(|(k, op, vs)| LabelSelectorRequirement {
                        key: k.to_string(),
                        operator: op.to_string(),
                        values: Some(vs.iter().map(std::string::ToString::to_string).collect()),
                    })
                    .collect(),
            ),
        }))
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Semantics of apimachinery's `labels/selector_test.go` `TestRequirementSelectorMatching`.
    #[test]
    fn operators() {
        let none = labels(&[]);
        let a = labels(&[("env", "prod"), ("flag", "")]);
        assert!(
            sel(&[], &[("env", "NotIn", &["dev"])])
                .unwrap()
                .matches(&none),
            "NotIn matches an absent key"
        );
        assert!(sel(&[], &[("env", "DoesNotExist", &[])])
            .unwrap()
            .matches(&none));
        assert!(!sel(&[], &[("env", "In", &["prod"])])
            .unwrap()
            .matches(&none));
        assert!(sel(&[], &[("env", "In", &["prod", "dev"])])
            .unwrap()
            .matches(&a));
        assert!(
            sel(&[], &[("flag", "Exists", &[])]).unwrap().matches(&a),
            "an empty value exists"
        );
        assert!(sel(&[("env", "prod")], &[("flag", "Exists", &[])])
            .unwrap()
            .matches(&a));
        assert!(
            !sel(&[("env", "prod")], &[("other", "Exists", &[])])
                .unwrap()
                .matches(&a),
            "requirements are ANDed"
        );
    }

    #[test]
    fn empty_and_absent_selectors_match_everything() {
        assert!(LabelSelector::compile(None).unwrap().is_empty());
        assert!(sel(&[], &[]).unwrap().is_empty());
        assert!(sel(&[], &[]).unwrap().matches(&labels(&[("x", "y")])));
    }

    #[test]
    fn invalid_requirements_are_errors() {
        assert!(sel(&[], &[("k", "In", &[])])
            .unwrap_err()
            .to_string()
            .contains("Required value"));
        assert!(sel(&[], &[("k", "Exists", &["v"])])
            .unwrap_err()
            .to_string()
            .contains("Forbidden"));
        assert!(sel(&[], &[("k", "Equals", &["v"])])
            .unwrap_err()
            .to_string()
            .contains("Unsupported value"));
    }
    /// `labels.Parse`'s syntax (its `TestParse`-style cases), as the selector it means.
    #[test]
    fn kubectl_selectors_parse_as_apimachinery_reads_them() {
        let matches = |text: &str, pairs: &[(&str, &str)]| {
            let parsed = parse_selector(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            LabelSelector::compile(Some(&parsed))
                .unwrap()
                .matches(&labels(pairs))
        };
        assert!(matches("", &[]), "the empty selector selects everything");
        assert!(matches("env=prod", &[("env", "prod")]));
        assert!(matches("env==prod", &[("env", "prod")]));
        assert!(!matches("env=prod", &[("env", "dev")]));
        assert!(matches("env!=prod", &[]), "!= matches an absent key");
        assert!(!matches("env!=prod", &[("env", "prod")]));
        assert!(matches(" x in (a, b) , y,!z", &[("x", "b"), ("y", "")]));
        assert!(!matches(
            "x in (a,b),y,!z",
            &[("x", "b"), ("y", ""), ("z", "")]
        ));
        assert!(matches("x notin (a)", &[]));
        assert!(matches("x in (,a)", &[("x", "")]), "an empty value");
        assert!(matches("x=", &[("x", "")]));
        assert!(
            matches("in in (in, notin)", &[("in", "notin")]),
            "keywords are words in value positions"
        );
        assert!(
            !matches("a=b,a=c", &[("a", "b")]),
            "two requirements on one key both hold"
        );
        assert!(matches(
            "kubernetes.io/metadata.name in (kube-system)",
            &[("kubernetes.io/metadata.name", "kube-system")]
        ));
        assert_eq!(
            parse_selector("env=prod,tier in (a,b)").unwrap(),
            api::LabelSelector {
                match_labels: Some(labels(&[("env", "prod")])),
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: "tier".into(),
                    operator: "In".into(),
                    values: Some(vec!["a".into(), "b".into()]),
                }]),
            }
        );
    }

    #[test]
    fn bad_kubectl_selectors_are_refused_with_apimachinery_s_words() {
        for (text, want) in [
            ("x,", "found '', expected: identifier after ','"),
            (
                ",x",
                "found ',', expected: !, identifier, or 'end of string'",
            ),
            ("x=a b", "found 'b', expected: ',' or 'end of string'"),
            ("x in a", "found 'a' expected: '('"),
            ("x in (a", "found '', expected: ',', ')' or identifier"),
            ("x > 1", "\"gt\" isn't supported in label selectors"),
            ("x < 1", "\"lt\" isn't supported in label selectors"),
            ("!x=a", "found '=', expected: ',' or 'end of string'"),
            ("x=(", "found '(', expected: identifier"),
            ("-bad=a", "invalid label key \"-bad\""),
            ("x=-bad-", "invalid label value \"-bad-\""),
        ] {
            let err = parse_selector(text).unwrap_err().to_string();
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }
}
