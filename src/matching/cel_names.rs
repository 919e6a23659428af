//! Names the Kubernetes CEL libraries put in an expression's namespace: what the compile-time
//! checks (`conditions`, `cost`, `authz`) must tell apart from variables. A leaf: the checks
//! and the environment that registers the libraries (`cel_env`) both use it.

/// Function namespaces a call may name (`optional.of(...)`, `sets.contains(...)`): the
/// libraries of `MustBaseEnvSet` (`staging/src/k8s.io/apiserver/pkg/cel/environment/base.go`)
/// that are called through a namespace.
const NAMESPACES: [&str; 6] = ["optional", "sets", "strings", "ip", "format", "lists"];

/// True for a function namespace (`sets` in `sets.contains(...)`) rather than a receiver.
pub(crate) fn is_namespace(name: &str) -> bool {
    NAMESPACES.contains(&name)
}

/// Type names, usable as values (`type(x) == int`; `duration` and `timestamp` are
/// `google.protobuf.Duration` and `google.protobuf.Timestamp`).
pub(crate) const TYPE_NAMES: [&str; 12] = [
    "int",
    "uint",
    "double",
    "string",
    "bool",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "duration",
    "timestamp",
];
