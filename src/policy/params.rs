//! Parameter objects: those of the policy's paramKind among the configuration's objects,
//! converted to CEL once at load, and the selection a binding's paramRef makes for one
//! request (`CollectParams` in
//! `staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/generic/policy_dispatcher.go`).

use std::collections::BTreeMap;

use crate::matching::cel_json::{self, JsonVal};

use super::spec::{ObjectMeta, ParamKind, ParamRef};
use crate::matching::conditions::json_to_cel;
use crate::matching::LabelSelector;

/// Built-in kinds known to be namespaced, for a paramKind none of whose objects says so
/// (kube-apiserver asks its REST mapper; the configuration directory is all the proxy has).
const NAMESPACED_BUILTINS: [(&str, &str); 2] = [("v1", "ConfigMap"), ("v1", "Secret")];

/// One parameter object.
#[derive(Debug)]
pub(crate) struct Param {
    pub(crate) namespace: String,
    pub(crate) name: String,
    labels: BTreeMap<String, String>,
    /// The object as CEL sees it (`params`), built at load; each evaluation binds it by
    /// reference.
    pub(crate) value: JsonVal<'static>,
}

/// The parameter objects of a policy's paramKind, sorted by namespace and name (kube-apiserver's
/// lister answers in no particular order; sorted, the evaluation is reproducible).
#[derive(Debug)]
pub(crate) struct ParamStore {
    /// The paramKind is namespaced (`paramScope`).
    namespaced: bool,
    params: Vec<Param>,
}

/// Why a binding's parameters cannot be collected: `CollectParams`'s errors
/// (`staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/generic/policy_dispatcher.go`),
/// in its words.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ParamError {
    /// paramRef names a namespace and the paramKind is cluster-scoped.
    #[error("paramRef.namespace must not be provided for a cluster-scoped `paramKind`")]
    NamespaceForClusterScoped,
    /// A namespaced paramKind, no paramRef.namespace, and a cluster-scoped request.
    #[error(
        "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources"
    )]
    NamespacedForClusterScoped,
    /// Nothing found and parameterNotFoundAction is Deny.
    #[error("no params found for policy binding with `Deny` parameterNotFoundAction")]
    NotFound,
}

/// A compiled paramRef.
#[derive(Debug)]
pub(crate) struct CompiledRef {
    name: String,
    namespace: String,
    /// `None` when the ref names one object.
    selector: Option<LabelSelector>,
    deny_when_not_found: bool,
}

impl CompiledRef {
    /// Compiles a validated paramRef (a selector the validation refused has already failed
    /// the binding).
    pub(crate) fn compile(r: &ParamRef) -> Self {
        let selector = match (&r.selector, r.name.is_empty()) {
            (Some(s), true) => Some(LabelSelector::compile(Some(s)).unwrap_or_default()),
            _ => None,
        };
        CompiledRef {
            name: r.name.clone(),
            namespace: r.namespace.clone(),
            selector,
            deny_when_not_found: r.parameter_not_found_action.as_deref() == Some("Deny"),
        }
    }
}

impl ParamStore {
    /// The objects of `kind` among `objects` (any other apiVersion/kind is skipped).
    pub(crate) fn new(kind: &ParamKind, objects: &[serde_json::Value]) -> Self {
        let mut params: Vec<Param> = objects
            .iter()
            .filter(|o| {
                o.get("apiVersion").and_then(serde_json::Value::as_str)
                    == Some(kind.api_version.as_str())
                    && o.get("kind").and_then(serde_json::Value::as_str) == Some(kind.kind.as_str())
            })
            .map(|o| {
                let meta: ObjectMeta = o
                    .get("metadata")
                    .and_then(|m| serde_json::from_value(m.clone()).ok())
                    .unwrap_or_default();
                Param {
                    namespace: meta.namespace,
                    name: meta.name,
                    labels: meta.labels.unwrap_or_default(),
                    value: cel_json::from_value(json_to_cel(o)),
                }
            })
            .collect();
        params.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        let namespaced = params.iter().any(|p| !p.namespace.is_empty())
            || NAMESPACED_BUILTINS.contains(&(kind.api_version.as_str(), kind.kind.as_str()));
        ParamStore { namespaced, params }
    }

    /// `CollectParams` for a binding with `param_ref`, on a request in `namespace`: the
    /// objects to evaluate with. Empty: none found and parameterNotFoundAction is Allow.
    ///
    /// # Errors
    /// [`ParamError`]: the binding's configuration error (the caller prefixes `failed to
    /// configure binding: `).
    pub(crate) fn collect(
        &self,
        param_ref: &CompiledRef,
        namespace: &str,
    ) -> Result<Vec<&Param>, ParamError> {
        let scope = if !self.namespaced {
            if !param_ref.namespace.is_empty() {
                return Err(ParamError::NamespaceForClusterScoped);
            }
            None
        } else if !param_ref.namespace.is_empty() {
            Some(param_ref.namespace.as_str())
        } else if !namespace.is_empty() {
            Some(namespace)
        } else {
            return Err(ParamError::NamespacedForClusterScoped);
        };
        let in_scope = |p: &&Param| scope.is_none_or(|ns| p.namespace == ns);
        let found: Vec<&Param> = match &param_ref.selector {
            None => self
                .params
                .iter()
                .filter(in_scope)
                .filter(|p| p.name == param_ref.name)
                .take(1)
                .collect(),
            Some(selector) => self
                .params
                .iter()
                .filter(in_scope)
                .filter(|p| selector.matches(&p.labels))
                .collect(),
        };
        if found.is_empty() && param_ref.deny_when_not_found {
            return Err(ParamError::NotFound);
        }
        Ok(found)
    }
}
