//! The namespaces admission reads: the labels namespaceSelector needs and the objects a
//! ValidatingAdmissionPolicy's `namespaceObject` is. kube-apiserver reads them from its informer
//! cache (`GetNamespaceLabels` in
//! `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/namespace/matcher.go`),
//! the proxy from a `kubectl get namespaces -o yaml` file or a live watch (`namespace_watch`).
//! Depends on `files` (bounded reads, the nesting check).

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;

/// The label every Namespace carries, set by kube-apiserver (NamespaceDefaultLabelName, GA 1.22).
pub(crate) const METADATA_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// The cluster's namespaces, by name: their labels (namespaceSelector) and their
/// `namespaceObject` (ValidatingAdmissionPolicy).
#[derive(Clone, Debug, Default)]
pub struct Namespaces {
    namespaces: HashMap<String, Namespace>,
    /// Why a namespace that is not listed cannot be said not to exist (the live lookup failed,
    /// or the watch has not synced): `None` means a missing namespace does not exist.
    unavailable: Option<String>,
}

/// One namespace, as admission reads it.
#[derive(Clone, Debug)]
struct Namespace {
    /// `metadata.labels` with the automatic name label.
    labels: BTreeMap<String, String>,
    /// What `namespaceObject` is bound to ([`namespace_object`]).
    object: serde_json::Value,
}

/// Why a namespaces file cannot be used. A message names the file and quotes its cause (not a
/// `source()`): it is logged, and printed by `explain` and `serve`, as one line.
#[derive(Debug, thiserror::Error)]
pub enum NamespacesError {
    #[error("document {doc}: {message}")]
    Invalid { doc: usize, message: String },
    /// [`Namespaces::parse`]: nested deeper than `files::MAX_NESTING`, refused before parsing.
    #[error(transparent)]
    TooDeep(#[from] crate::files::TooDeep),
    /// [`Namespaces::load`]: the file cannot be read (also: not a regular file, or larger than
    /// `files::MAX_CONFIG_FILE_BYTES`).
    #[error("{}: {error}", path.display())]
    Read {
        path: std::path::PathBuf,
        error: std::io::Error,
    },
    /// [`Namespaces::load`]: the file is not a namespaces file.
    #[error("{}: {error}", path.display())]
    File {
        path: std::path::PathBuf,
        error: Box<NamespacesError>,
    },
}

/// The metadata fields `CreateNamespaceObject` copies
/// (`staging/src/k8s.io/apiserver/pkg/admission/plugin/cel/condition.go`); the rest
/// (`managedFields`, `ownerReferences`, type meta) never reaches `namespaceObject`.
const NAMESPACE_OBJECT_METADATA: [&str; 12] = [
    "name",
    "generateName",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "finalizers",
];

/// `namespaceObject` for a Namespace as the API serves it (JSON): `CreateNamespaceObject`
/// (`staging/src/k8s.io/apiserver/pkg/admission/plugin/cel/condition.go`) keeps `spec`,
/// `status` and twelve metadata fields, without `apiVersion` and `kind`; the result is then
/// what apimachinery's `DefaultUnstructuredConverter.ToUnstructured` makes of that typed
/// object: an `omitempty` field that is empty is left out, `spec` and `status` (structs) are
/// always there, and a missing `creationTimestamp` is `null` (`metav1.Time.ToUnstructured`).
pub(crate) fn namespace_object(namespace: &serde_json::Value) -> serde_json::Value {
    use serde_json::{Map, Value};
    let without_empty = |from: Option<&Value>| -> Map<String, Value> {
        let Some(Value::Object(from)) = from else {
            return Map::new();
        };
        from.iter()
            .filter(|(_, v)| !is_empty(v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    let mut metadata = Map::new();
    let given = namespace.get("metadata");
    for field in NAMESPACE_OBJECT_METADATA {
        match given.and_then(|m| m.get(field)) {
            Some(v) if !is_empty(v) => {
                metadata.insert(field.to_string(), v.clone());
            }
            _ if field == "creationTimestamp" => {
                metadata.insert(field.to_string(), Value::Null);
            }
            _ => {}
        }
    }
    let mut object = Map::new();
    object.insert("metadata".into(), Value::Object(metadata));
    object.insert(
        "spec".into(),
        Value::Object(without_empty(namespace.get("spec"))),
    );
    object.insert(
        "status".into(),
        Value::Object(without_empty(namespace.get("status"))),
    );
    Value::Object(object)
}

/// Go's `omitempty` emptiness (`isZero` in apimachinery's `runtime/converter.go`) for JSON.
fn is_empty(v: &serde_json::Value) -> bool {
    use serde_json::Value;
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

impl Namespaces {
    /// Reads and parses a namespaces file (`--namespaces-file`): the one loader `serve`,
    /// `check`, `explain` and `demo` share.
    ///
    /// # Errors
    /// `NamespacesError::Read` or `NamespacesError::File`, each naming the file.
    pub fn load(path: &std::path::Path) -> Result<Self, NamespacesError> {
        let text = crate::files::read_to_string(path, crate::files::MAX_CONFIG_FILE_BYTES)
            .map_err(|error| NamespacesError::Read {
                path: path.to_path_buf(),
                error,
            })?;
        Self::parse(&text).map_err(|e| NamespacesError::File {
            path: path.to_path_buf(),
            error: Box::new(e),
        })
    }

    /// Parses YAML or JSON holding a `NamespaceList`/`List` (as `kubectl get namespaces -o yaml`
    /// prints it) or `Namespace` documents, multi-document YAML included. Each namespace is
    /// kept whole (its `namespaceObject`) and its labels get the automatic
    /// `kubernetes.io/metadata.name=<name>` label.
    ///
    /// # Errors
    /// `NamespacesError::Invalid` naming the document that is not YAML or holds something
    /// other than Namespaces; `NamespacesError::TooDeep` for nesting past `files::MAX_NESTING`.
    pub fn parse(text: &str) -> Result<Self, NamespacesError> {
        use serde_json::Value;
        crate::files::check_nesting(text)?;
        let mut out = Namespaces::default();
        let kind_of = |v: &Value| {
            v.get("kind")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        for (doc, de) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
            let invalid = |message: String| NamespacesError::Invalid { doc, message };
            let value = Value::deserialize(de).map_err(|e| invalid(e.to_string()))?;
            if value.is_null() {
                continue;
            }
            if !value.is_object() {
                return Err(invalid(
                    "expected a Namespace, NamespaceList or List".into(),
                ));
            }
            let items = match kind_of(&value).as_str() {
                "Namespace" => vec![value],
                "NamespaceList" | "List" => match value.get("items") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::Array(items)) => items.clone(),
                    Some(_) => return Err(invalid("items: expected a list".into())),
                },
                other => {
                    return Err(invalid(format!(
                        "kind {other:?}: expected Namespace, NamespaceList or List"
                    )))
                }
            };
            for item in items {
                let kind = kind_of(&item);
                if kind != "Namespace" && !kind.is_empty() {
                    return Err(invalid(format!(
                        "list item of kind {kind:?}: expected Namespace"
                    )));
                }
                out.insert(&item).map_err(|e| invalid(e.to_string()))?;
            }
        }
        Ok(out)
    }

    /// Adds or replaces one Namespace (as the API serves it, JSON), adding the automatic
    /// name label to its labels.
    ///
    /// # Errors
    /// What in `namespace` is not a Namespace's: `metadata.name` or `metadata.labels`.
    pub(crate) fn insert(&mut self, namespace: &serde_json::Value) -> Result<(), NotANamespace> {
        let metadata = namespace.get("metadata");
        let name = match metadata.and_then(|m| m.get("name")) {
            None | Some(serde_json::Value::Null) => String::new(),
            Some(serde_json::Value::String(name)) => name.clone(),
            Some(_) => return Err(NotANamespace::Name),
        };
        let mut labels: BTreeMap<String, String> = match metadata.and_then(|m| m.get("labels")) {
            None | Some(serde_json::Value::Null) => BTreeMap::new(),
            Some(labels) => BTreeMap::deserialize(labels).map_err(NotANamespace::Labels)?,
        };
        labels
            .entry(METADATA_NAME_LABEL.to_string())
            .or_insert_with(|| name.clone());
        let object = namespace_object(namespace);
        self.namespaces.insert(name, Namespace { labels, object });
        Ok(())
    }

    /// The labels of namespace `name`, `None` when it is not known.
    pub(crate) fn labels(&self, name: &str) -> Option<&BTreeMap<String, String>> {
        self.namespaces.get(name).map(|n| &n.labels)
    }

    /// Namespace `name` as `namespaceObject` binds it ([`namespace_object`]), `None` when it
    /// is not known.
    pub(crate) fn object(&self, name: &str) -> Option<&serde_json::Value> {
        self.namespaces.get(name).map(|n| &n.object)
    }

    /// No namespace known, and any lookup answered with `reason` (a namespace whose labels
    /// could not be read: the request follows failurePolicy rather than getting a 404).
    pub(crate) fn unavailable(reason: String) -> Self {
        Namespaces {
            namespaces: HashMap::new(),
            unavailable: Some(reason),
        }
    }

    /// Why a namespace missing here may still exist, if it may.
    pub(crate) fn unavailable_reason(&self) -> Option<&str> {
        self.unavailable.as_deref()
    }

    /// How many namespaces are known.
    pub fn len(&self) -> usize {
        self.namespaces.len()
    }

    /// True when no namespace is known.
    pub fn is_empty(&self) -> bool {
        self.namespaces.is_empty()
    }
}

/// What in a Namespace is not a Namespace's ([`Namespaces::insert`]).
#[derive(Debug, thiserror::Error)]
pub(crate) enum NotANamespace {
    /// `metadata.name` is not a string.
    #[error("metadata.name: expected a string")]
    Name,
    /// `metadata.labels` is not a map of strings.
    #[error("metadata.labels: {0}")]
    Labels(serde_json::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_list_and_adds_name_label() {
        let ns = Namespaces::parse(
            "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: a\n    labels: {env: prod}\n- kind: Namespace\n  metadata: {name: b}\n",
        )
        .unwrap();
        assert_eq!(
            ns.labels("a").unwrap().get("env").map(String::as_str),
            Some("prod")
        );
        assert_eq!(
            ns.labels("b")
                .unwrap()
                .get(METADATA_NAME_LABEL)
                .map(String::as_str),
            Some("b")
        );
        assert!(ns.labels("c").is_none());
    }

    /// `CreateNamespaceObject`, then `ToUnstructured`: no type meta, no managedFields or
    /// ownerReferences, empty fields left out, `spec` and `status` always there.
    #[test]
    fn namespace_object_is_what_create_namespace_object_keeps() {
        let namespace = serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "a", "uid": "e5b6", "resourceVersion": "201",
                "creationTimestamp": "2026-11-28T10:00:00Z", "labels": {"x": "y"},
                "annotations": {}, "finalizers": [],
                "managedFields": [{"manager": "kubectl-create"}],
                "ownerReferences": [{"name": "o"}]},
            "status": {"phase": "Active"}});
        assert_eq!(
            namespace_object(&namespace),
            serde_json::json!({"metadata": {"name": "a", "uid": "e5b6", "resourceVersion": "201",
                "creationTimestamp": "2026-11-28T10:00:00Z", "labels": {"x": "y"}},
                "spec": {}, "status": {"phase": "Active"}})
        );
        let bare = serde_json::json!({"metadata": {"name": "b"}});
        assert_eq!(
            namespace_object(&bare),
            serde_json::json!({"metadata": {"name": "b", "creationTimestamp": null},
                "spec": {}, "status": {}})
        );
    }

    #[test]
    fn rejects_other_kinds() {
        let err = Namespaces::parse("kind: Pod\nmetadata: {name: x}\n").unwrap_err();
        assert!(err.to_string().contains("Pod"), "{err}");
    }
}
