//! The resources kube-apiserver serves, as far as matchPolicy Equivalent needs them: which
//! group/version/resources are the same objects under other names (the built-in equivalence
//! table, kube-apiserver's `EquivalentResourceRegistry`) and the custom resources the
//! configuration declares. Plain data shared by `matching` (the Equivalent rule pass) and
//! `conversion` (converting objects between those versions); depends on `backend` only (a
//! custom resource's conversion webhook).

pub(crate) mod custom;
pub mod equivalence;

pub(crate) use equivalence::{equivalents, Equivalent};
