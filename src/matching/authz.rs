//! The Kubernetes authz CEL library for matchConditions' `authorizer` variable (upstream
//! `staging/src/k8s.io/apiserver/pkg/cel/library/authz.go`, costs in `library/cost.go`): the
//! values an expression builds (`authorizer.group(g).resource(r)...check(verb)`) and the
//! decisions it reads. Depends on `cel`, `review` and `names`; no I/O.
//!
//! kube-apiserver answers `check` in-process with its authorizer. The proxy cannot, so `check`
//! never blocks: it looks its [`CheckKey`] up in the decisions the caller supplies for this
//! evaluation ([`DecisionSource`]) and, when there is none yet, records the key as pending and
//! fails the evaluation. The caller (`dispatch`) asks a SubjectAccessReview for the pending keys
//! and evaluates again; see `MatchConditions::evaluate_authorized`.

use std::collections::BTreeMap;
use std::sync::Arc;

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

/// The attributes of one check (upstream `authorizer.AttributesRecord` as `ResourceCheck` and
/// `PathCheck` build it), the verb included.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Attributes {
    /// A resource check: SubjectAccessReview `resourceAttributes`, `version` always `"*"`.
    /// Empty strings are unset.
    Resource {
        /// API group, `""` for the core group.
        group: String,
        /// Resource (plural), never empty.
        resource: String,
        /// Subresource.
        subresource: String,
        /// Namespace.
        namespace: String,
        /// Object name.
        name: String,
        /// `fieldSelector(...)`: sent as `fieldSelector.rawSelector`.
        field_selector: String,
        /// `labelSelector(...)`: sent as `labelSelector.rawSelector`.
        label_selector: String,
        /// The verb `check` was given.
        verb: String,
    },
    /// A non-resource check: SubjectAccessReview `nonResourceAttributes`.
    NonResource {
        /// URL path, as given (never blank).
        path: String,
        /// The verb `check` was given.
        verb: String,
    },
}

/// One authorization question: a user and the attributes checked. Equal keys get the same
/// answer (the cache key of kube-apiserver's webhook authorizer is the SubjectAccessReview spec,
/// which is exactly these fields).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CheckKey {
    /// Who.
    pub user: Arc<User>,
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

/// Where `check` finds decisions during one evaluation.
pub trait DecisionSource {
    /// The decision for `key`, if known without waiting.
    fn decision(&self, key: &CheckKey) -> Option<Decision>;
}
