//! The resources kube-apiserver serves, as far as matchPolicy Equivalent needs them: which
//! group/version/resources are the same objects under other names (the built-in equivalence
//! table, kube-apiserver's `EquivalentResourceRegistry`) and the custom resources the
//! configuration declares. Plain data shared by `matching` (the Equivalent rule pass) and
//! `conversion` (converting objects between those versions); depends on `backend` only (a
//! custom resource's conversion webhook).

pub(crate) mod custom;
pub mod equivalence;

pub(crate) use equivalence::{equivalents, Equivalent};

/// The authentication and authorization reviews, which kube-apiserver never persists and keeps
/// from admission policies always and from webhooks from 1.37: `excluded` in
/// `pkg/kubeapiserver/admission/exclusion/resources.go`. (group, resource); every version.
pub const VIRTUAL_RESOURCES: [(&str, &str); 6] = [
    ("authentication.k8s.io", "selfsubjectreviews"),
    ("authentication.k8s.io", "tokenreviews"),
    ("authorization.k8s.io", "localsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"),
    ("authorization.k8s.io", "subjectaccessreviews"),
];
