//! ValidatingAdmissionPolicies and their bindings in the configuration directory, for policy
//! candidates ([`super::candidates`]): gathered file by file, then each policy compiled once
//! with its bindings and the parameter objects ([`crate::policy::Policy::compile`]). A
//! problem is located in the document it comes from: the policy's, or the binding's.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::Problem;
use crate::field_error::{BadValue, Error as FieldError, ErrorType};
use crate::policy::Policy;
use crate::resources::custom::CustomResources;

/// One object as found: where, and its `items[i].` prefix inside a `List`.
struct Found {
    base: Problem,
    prefix: String,
    object: serde_json::Value,
}

/// The policies (by `metadata.name`) and bindings of one load.
#[derive(Default)]
pub(super) struct Policies {
    policies: BTreeMap<String, Found>,
    bindings: Vec<Found>,
}

/// Each policy compiled: `None` for one whose problems are already reported.
pub(super) type Compiled = HashMap<String, Option<Arc<Policy>>>;

impl Policies {
    /// Keeps a ValidatingAdmissionPolicy or a ValidatingAdmissionPolicyBinding. A second
    /// policy of one name is a problem: a cluster holds one object per name (a second create is
    /// `AlreadyExists`, `Create` in `staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go`),
    /// as for the webhook configurations.
    pub(super) fn add(
        &mut self,
        object: serde_json::Value,
        prefix: &str,
        base: &Problem,
        errors: &mut Vec<Problem>,
    ) {
        let kind = object
            .get("kind")
            .and_then(|k| k.as_str())
            .unwrap_or("")
            .to_string();
        let name = object
            .pointer("/metadata/name")
            .and_then(|n| n.as_str())
            .unwrap_or("")
            .to_string();
        let base = Problem {
            kind: Some(kind.clone()),
            configuration: Some(name.clone()),
            ..base.clone()
        };
        let found = Found {
            base,
            prefix: prefix.to_string(),
            object,
        };
        if kind == "ValidatingAdmissionPolicyBinding" {
            self.bindings.push(found);
            return;
        }
        if let Some(other) = self.policies.get(&name) {
            let duplicate = FieldError::new(
                ErrorType::Duplicate,
                format!("{prefix}metadata.name"),
                BadValue::from(name.as_str()),
                format!(
                    "ValidatingAdmissionPolicy names are unique in a cluster (also in {})",
                    other.base.file.display()
                ),
            );
            errors.push(found.base.located(duplicate));
            return;
        }
        self.policies.insert(name, found);
    }

    /// `(apiVersion, kind)` of every policy's `paramKind`: the objects of these kinds are
    /// parameters.
    pub(super) fn param_kinds(&self) -> HashSet<(String, String)> {
        self.policies
            .values()
            .filter_map(|p| Policy::param_kind_of(&p.object))
            .collect()
    }

    /// Compiles every policy with its bindings (those whose `spec.policyName` names it) and
    /// `params`, matching through `custom`'s versions too. Problems go to `errors` in the
    /// policy's or the binding's document; a binding of no policy in the directory is a
    /// warning (kube-apiserver accepts it; it does nothing).
    pub(super) fn compile(
        &self,
        params: &[serde_json::Value],
        custom: &Arc<CustomResources>,
        errors: &mut Vec<Problem>,
        warnings: &mut Vec<Problem>,
    ) -> Compiled {
        let policy_name = |b: &Found| {
            b.object
                .pointer("/spec/policyName")
                .and_then(|n| n.as_str())
                .unwrap_or("")
                .to_string()
        };
        for binding in &self.bindings {
            let name = policy_name(binding);
            if !self.policies.contains_key(&name) {
                // kube-apiserver validates a binding on its own at create: its errors are
                // errors here too, though no policy of the directory uses it.
                for e in crate::policy::binding_errors(&binding.object) {
                    errors.push(binding.base.located(e.prefixed(&binding.prefix)));
                }
            }
            if !name.is_empty() && !self.policies.contains_key(&name) {
                let unused = FieldError::new(
                    ErrorType::NotFound,
                    format!("{}spec.policyName", binding.prefix),
                    BadValue::from(name.as_str()),
                    "no ValidatingAdmissionPolicy of that name is in the configuration directory: the binding is not used",
                );
                warnings.push(binding.base.located(unused));
            }
        }
        let mut compiled = Compiled::new();
        for (name, policy) in &self.policies {
            let own: Vec<&Found> = self
                .bindings
                .iter()
                .filter(|b| policy_name(b) == *name)
                .collect();
            let objects: Vec<serde_json::Value> = own.iter().map(|b| b.object.clone()).collect();
            let result = match Policy::compile(&policy.object, &objects, params) {
                Ok(mut p) => {
                    p.set_custom_resources(custom.clone());
                    Some(Arc::new(p))
                }
                Err(problems) => {
                    errors.extend(problems.into_iter().map(|e| locate(e, policy, &own)));
                    None
                }
            };
            compiled.insert(name.clone(), result);
        }
        compiled
    }
}

/// `error` of a policy's compilation, in the document it is about: `bindings[i].` errors in
/// the i-th binding's, the rest in the policy's.
fn locate(error: FieldError, policy: &Found, bindings: &[&Found]) -> Problem {
    let in_binding = error.field.strip_prefix("bindings[").and_then(|rest| {
        let (i, field) = rest.split_once("].")?;
        Some((bindings.get(i.parse::<usize>().ok()?)?, field.to_string()))
    });
    match in_binding {
        Some((binding, field)) => {
            let error = FieldError { field, ..error };
            binding.base.located(error.prefixed(&binding.prefix))
        }
        None => policy.base.located(error.prefixed(&policy.prefix)),
    }
}
