//! Label selectors (`namespaceSelector`, `objectSelector`), compiled once at config load into
//! `kube_core::Selector`, which matches as apimachinery's `Requirement.Matches`
//! (`staging/src/k8s.io/apimachinery/pkg/labels/selector.go`). Depends on `api` and `field_error`.

use std::collections::BTreeMap;

use kube_core::{Expression, Selector, SelectorExt};

use crate::api;
use crate::field_error::{self, Error as FieldError};

/// A compiled `metav1.LabelSelector`. The v1 API defaults an omitted selector to `{}`
/// (`pkg/apis/admissionregistration/v1/defaults.go`), which matches everything
/// (`LabelSelectorAsSelector`), so an absent selector compiles to the empty one.
#[derive(Clone, Debug, Default)]
pub struct LabelSelector {
    /// `None` for the empty selector: no labels are looked up at all.
    selector: Option<Selector>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::LabelSelectorRequirement;

    fn sel(
        labels: &[(&str, &str)],
        exprs: &[(&str, &str, &[&str])],
    ) -> Result<LabelSelector, String> {
        // As text: the tests look for kube-apiserver's words in the message.
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
        .map_err(|e| e.to_string())
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
            .contains("Required value"));
        assert!(sel(&[], &[("k", "Exists", &["v"])])
            .unwrap_err()
            .contains("Forbidden"));
        assert!(sel(&[], &[("k", "Equals", &["v"])])
            .unwrap_err()
            .contains("Unsupported value"));
    }
}
