//! The namespace labels namespaceSelector needs: kube-apiserver reads them from its informer
//! cache (`GetNamespaceLabels` in
//! `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/namespace/matcher.go`),
//! the proxy from a `kubectl get namespaces -o yaml` file or a live watch (`namespace_watch`).
//! Depends on `files` (bounded reads, the nesting check).

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;

/// The label every Namespace carries, set by kube-apiserver (NamespaceDefaultLabelName, GA 1.22).
pub(crate) const METADATA_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Labels of the cluster's namespaces, by name.
#[derive(Clone, Debug, Default)]
pub struct Namespaces {
    labels: HashMap<String, BTreeMap<String, String>>,
    /// Why a namespace that is not listed cannot be said not to exist (the live lookup failed,
    /// or the watch has not synced): `None` means a missing namespace does not exist.
    unavailable: Option<String>,
}

/// Why a namespaces file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum NamespacesError {
    #[error("document {doc}: {message}")]
    Invalid { doc: usize, message: String },
    /// [`Namespaces::parse`]: nested deeper than `files::MAX_NESTING`, refused before parsing.
    #[error(transparent)]
    TooDeep(#[from] crate::files::TooDeep),
    /// [`Namespaces::load`]: the file cannot be read (also: not a regular file, or larger than
    /// `files::MAX_CONFIG_FILE_BYTES`).
    #[error("{}: {source}", path.display())]
    Read {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// [`Namespaces::load`]: the file is not a namespaces file.
    #[error("{}: {source}", path.display())]
    File {
        path: std::path::PathBuf,
        #[source]
        source: Box<NamespacesError>,
    },
}

#[derive(Deserialize)]
struct Doc {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    items: Vec<Doc>,
    #[serde(default)]
    metadata: Meta,
}

#[derive(Default, Deserialize)]
struct Meta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
}

impl Namespaces {
    /// Reads and parses a namespaces file (`--namespaces-file`): the one loader `serve`,
    /// `check`, `explain` and `demo` share.
    ///
    /// # Errors
    /// `NamespacesError::Read` or `NamespacesError::File`, each naming the file.
    pub fn load(path: &std::path::Path) -> Result<Self, NamespacesError> {
        let text = crate::files::read_to_string(path, crate::files::MAX_CONFIG_FILE_BYTES)
            .map_err(|source| NamespacesError::Read {
                path: path.to_path_buf(),
                source,
            })?;
        Self::parse(&text).map_err(|e| NamespacesError::File {
            path: path.to_path_buf(),
            source: Box::new(e),
        })
    }

    /// Parses YAML or JSON holding a `NamespaceList`/`List` (as `kubectl get namespaces -o yaml`
    /// prints it) or `Namespace` documents, multi-document YAML included. Each namespace also
    /// gets the automatic `kubernetes.io/metadata.name=<name>` label.
    ///
    /// # Errors
    /// `NamespacesError::Invalid` naming the document that is not YAML or holds something
    /// other than Namespaces; `NamespacesError::TooDeep` for nesting past `files::MAX_NESTING`.
    pub fn parse(text: &str) -> Result<Self, NamespacesError> {
        crate::files::check_nesting(text)?;
        let mut out = Namespaces::default();
        for (doc, de) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
            let value =
                serde_json::Value::deserialize(de).map_err(|e| NamespacesError::Invalid {
                    doc,
                    message: e.to_string(),
                })?;
            if value.is_null() {
                continue;
            }
            let parsed: Doc =
                serde_json::from_value(value).map_err(|e| NamespacesError::Invalid {
                    doc,
                    message: e.to_string(),
                })?;
            let items = match parsed.kind.as_str() {
                "Namespace" => vec![parsed],
                "NamespaceList" | "List" => parsed.items,
                other => {
                    return Err(NamespacesError::Invalid {
                        doc,
                        message: format!(
                            "kind {other:?}: expected Namespace, NamespaceList or List"
                        ),
                    })
                }
            };
            for item in items {
                if item.kind != "Namespace" && !item.kind.is_empty() {
                    return Err(NamespacesError::Invalid {
                        doc,
                        message: format!("list item of kind {:?}: expected Namespace", item.kind),
                    });
                }
                out.insert(item.metadata.name, item.metadata.labels.unwrap_or_default());
            }
        }
        Ok(out)
    }

    /// Adds or replaces one namespace, adding the automatic name label.
    pub(crate) fn insert(&mut self, name: String, mut labels: BTreeMap<String, String>) {
        labels
            .entry(METADATA_NAME_LABEL.to_string())
            .or_insert_with(|| name.clone());
        self.labels.insert(name, labels);
    }

    /// The labels of namespace `name`, `None` when it is not known.
    pub(crate) fn labels(&self, name: &str) -> Option<&BTreeMap<String, String>> {
        self.labels.get(name)
    }

    /// No namespace known, and any lookup answered with `reason` (a namespace whose labels
    /// could not be read: the request follows failurePolicy rather than getting a 404).
    pub(crate) fn unavailable(reason: String) -> Self {
        Namespaces {
            labels: HashMap::new(),
            unavailable: Some(reason),
        }
    }

    /// Why a namespace missing here may still exist, if it may.
    pub(crate) fn unavailable_reason(&self) -> Option<&str> {
        self.unavailable.as_deref()
    }

    /// How many namespaces are known.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// True when no namespace is known.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }
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

    #[test]
    fn rejects_other_kinds() {
        let err = Namespaces::parse("kind: Pod\nmetadata: {name: x}\n").unwrap_err();
        assert!(err.to_string().contains("Pod"), "{err}");
    }
}
