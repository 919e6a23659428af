//! Converting built-in objects between the group/versions of one resource, field by field as
//! Kubernetes' conversion functions do (matching notes §6; KEP-492 "Convert to
//! webhook-requested version"). Works on JSON; depends on `equivalence` only.
//!
//! Every conversion goes through the hub (the first, newest version in
//! [`super::equivalence::EQUIVALENCES`]), as Kubernetes goes through its internal version. A
//! version with no rules here differs from the hub only in `apiVersion`.

use serde_json::{Map, Value};

use super::equivalence::GroupVersion;

/// Why an object could not be converted.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConversionError {
    /// The proxy has no conversion between these versions of this kind.
    #[error("no conversion from {from} to {to} for kind {kind} in admission-proxy")]
    NoPath {
        kind: String,
        from: String,
        to: String,
    },
    /// The object is not what the conversion needs (a field of the wrong type).
    #[error("converting {kind} to {to}: {reason}")]
    Invalid {
        kind: String,
        to: String,
        reason: String,
    },
}

/// `group/version` as `apiVersion` writes it (`v1` for the core group).
pub fn api_version((group, version): (&str, &str)) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

/// Converts `object` (a `kind` in `from`) to `to`, returning the converted object with its
/// `apiVersion` set. `from == to` returns the object unchanged.
///
/// # Errors
/// [`ConversionError::NoPath`] for versions this proxy cannot convert between (see the README's
/// "Supported conversions"), [`ConversionError::Invalid`] for a field of the wrong type.
pub fn convert(
    object: &Value,
    kind: &str,
    from: GroupVersion,
    to: GroupVersion,
) -> Result<Value, ConversionError> {
    if from == to {
        return Ok(object.clone());
    }
    let no_path = || ConversionError::NoPath {
        kind: kind.to_string(),
        from: api_version(from),
        to: api_version(to),
    };
    if !supported(kind, from) || !supported(kind, to) {
        return Err(no_path());
    }
    let mut object = object.clone();
    let invalid = |reason: String| ConversionError::Invalid {
        kind: kind.to_string(),
        to: api_version(to),
        reason,
    };
    to_hub(kind, from, &mut object).map_err(invalid)?;
    from_hub(kind, to, &mut object).map_err(invalid)?;
    if let Some(map) = object.as_object_mut() {
        map.insert("apiVersion".into(), Value::String(api_version(to)));
    }
    Ok(object)
}

/// Versions whose conversion to and from the hub is implemented. The others (HPA v1/v2beta1,
/// CRD v1beta1, EndpointSlice v1beta1, the Scale kinds) need field mappings this proxy does not
/// have yet.
fn supported(kind: &str, (group, version): GroupVersion) -> bool {
    !matches!(
        (kind, group, version),
        ("HorizontalPodAutoscaler", _, "v1" | "v2beta1")
            | ("CustomResourceDefinition", _, "v1beta1")
            | ("EndpointSlice", _, "v1beta1")
            | ("Scale", _, _)
    )
}

/// Deployment `spec.rollbackTo` in apps/v1beta1 and extensions/v1beta1; the annotation newer
/// versions keep it in (`pkg/apis/apps/v1/conversion.go`, `DeprecatedRollbackTo`).
const ROLLBACK_TO: &str = "deprecated.deployment.rollback.to";
/// DaemonSet `spec.templateGeneration` in extensions/v1beta1; the annotation of apps versions
/// (`DeprecatedTemplateGeneration`).
const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";
/// The label PodDisruptionBudget conversion uses to spell v1beta1's selectors in v1
/// (`pkg/apis/policy/helper.go`, `PDBV1beta1Label`).
const PDB_LABEL: &str = "pdb.kubernetes.io/deprecated-v1beta1-empty-selector-match";

fn to_hub(kind: &str, (group, version): GroupVersion, o: &mut Value) -> Result<(), String> {
    match (kind, group, version) {
        ("Deployment", "apps" | "extensions", "v1beta1") => {
            if let Some(rollback) = take(o, &["spec", "rollbackTo"]) {
                let revision = rollback
                    .get("revision")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                annotations(o).insert(ROLLBACK_TO.into(), Value::String(revision.to_string()));
            }
        }
        ("DaemonSet", "extensions", "v1beta1") => {
            if let Some(generation) = take(o, &["spec", "templateGeneration"]) {
                let generation = generation
                    .as_i64()
                    .ok_or("spec.templateGeneration is not an integer")?;
                annotations(o).insert(
                    TEMPLATE_GENERATION.into(),
                    Value::String(generation.to_string()),
                );
            }
        }
        ("Ingress", _, "v1beta1") => ingress_to_v1(o),
        ("PodDisruptionBudget", _, "v1beta1") => {
            // `Convert_v1beta1_PodDisruptionBudget_To_policy_PodDisruptionBudget`: an empty
            // selector matches nothing in v1beta1, everything in v1.
            if let Some(selector) = get_mut(o, &["spec", "selector"]) {
                if is_empty_selector(selector) {
                    *selector = pdb_selector("Exists");
                } else if *selector == pdb_selector("DoesNotExist") {
                    *selector = Value::Object(Map::new());
                }
            }
        }
        ("PriorityLevelConfiguration", _, "v1beta1" | "v1beta2") => {
            rename(
                o,
                &["spec", "limited"],
                "assuredConcurrencyShares",
                "nominalConcurrencyShares",
            );
        }
        _ => {}
    }
    Ok(())
}

fn from_hub(kind: &str, (group, version): GroupVersion, o: &mut Value) -> Result<(), String> {
    match (kind, group, version) {
        ("Deployment", "apps" | "extensions", "v1beta1") => {
            if let Some(revision) = take_annotation(o, ROLLBACK_TO) {
                let revision: i64 = revision
                    .parse()
                    .map_err(|_| format!("annotation {ROLLBACK_TO} is not an integer"))?;
                spec(o).insert(
                    "rollbackTo".into(),
                    serde_json::json!({"revision": revision}),
                );
            }
        }
        ("DaemonSet", "extensions", "v1beta1") => {
            if let Some(generation) = take_annotation(o, TEMPLATE_GENERATION) {
                let generation: i64 = generation
                    .parse()
                    .map_err(|_| format!("annotation {TEMPLATE_GENERATION} is not an integer"))?;
                spec(o).insert("templateGeneration".into(), generation.into());
            }
        }
        ("Ingress", _, "v1beta1") => ingress_to_v1beta1(o),
        ("PodDisruptionBudget", _, "v1beta1") => {
            if let Some(selector) = get_mut(o, &["spec", "selector"]) {
                if *selector == pdb_selector("Exists") {
                    *selector = Value::Object(Map::new());
                } else if is_empty_selector(selector) {
                    *selector = pdb_selector("DoesNotExist");
                }
            }
        }
        ("PriorityLevelConfiguration", _, "v1beta1" | "v1beta2") => {
            rename(
                o,
                &["spec", "limited"],
                "nominalConcurrencyShares",
                "assuredConcurrencyShares",
            );
        }
        _ => {}
    }
    Ok(())
}

fn pdb_selector(operator: &str) -> Value {
    serde_json::json!({"matchExpressions": [{"key": PDB_LABEL, "operator": operator}]})
}

fn is_empty_selector(selector: &Value) -> bool {
    selector.as_object().is_some_and(|m| {
        m.iter().all(|(_, v)| {
            v.is_null()
                || v.as_object().is_some_and(Map::is_empty)
                || v.as_array().is_some_and(Vec::is_empty)
        })
    })
}

/// networking v1beta1 → v1 (`pkg/apis/networking/v1beta1/conversion.go` and
/// `extensions/v1beta1/conversion.go`): `backend` → `defaultBackend`;
/// `serviceName`/`servicePort` → `service.name` and `service.port.number` or `.name`.
fn ingress_to_v1(o: &mut Value) {
    if let Some(backend) = take(o, &["spec", "backend"]) {
        spec(o).insert("defaultBackend".into(), backend_to_v1(backend));
    }
    for_each_path_backend(o, backend_to_v1);
}

fn ingress_to_v1beta1(o: &mut Value) {
    if let Some(backend) = take(o, &["spec", "defaultBackend"]) {
        spec(o).insert("backend".into(), backend_to_v1beta1(backend));
    }
    for_each_path_backend(o, backend_to_v1beta1);
}

fn for_each_path_backend(o: &mut Value, f: fn(Value) -> Value) {
    let Some(rules) = get_mut(o, &["spec", "rules"]).and_then(Value::as_array_mut) else {
        return;
    };
    for rule in rules {
        let Some(paths) = get_mut(rule, &["http", "paths"]).and_then(Value::as_array_mut) else {
            continue;
        };
        for path in paths {
            if let Some(backend) = path.get_mut("backend") {
                *backend = f(backend.take());
            }
        }
    }
}

fn backend_to_v1(backend: Value) -> Value {
    let Value::Object(mut b) = backend else {
        return backend;
    };
    let name = b.remove("serviceName");
    let port = b.remove("servicePort");
    if name.is_some() || port.is_some() {
        let mut service = Map::new();
        if let Some(name) = name {
            service.insert("name".into(), name);
        }
        match port {
            Some(Value::String(p)) => {
                service.insert("port".into(), serde_json::json!({"name": p}));
            }
            Some(Value::Number(p)) => {
                service.insert("port".into(), serde_json::json!({"number": p}));
            }
            _ => {}
        }
        b.insert("service".into(), Value::Object(service));
    }
    Value::Object(b)
}

fn backend_to_v1beta1(backend: Value) -> Value {
    let Value::Object(mut b) = backend else {
        return backend;
    };
    if let Some(Value::Object(mut service)) = b.remove("service") {
        if let Some(name) = service.remove("name") {
            b.insert("serviceName".into(), name);
        }
        if let Some(Value::Object(port)) = service.remove("port") {
            // A named port wins over a number, as in `Convert_networking_IngressBackend_To_v1beta1`.
            match (port.get("name"), port.get("number")) {
                (Some(Value::String(n)), _) if !n.is_empty() => {
                    b.insert("servicePort".into(), Value::String(n.clone()));
                }
                (_, Some(number)) => {
                    b.insert("servicePort".into(), number.clone());
                }
                _ => {}
            }
        }
    }
    Value::Object(b)
}

fn get_mut<'a>(o: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    path.iter().try_fold(o, |v, key| v.get_mut(*key))
}

/// Removes and returns the member at `path`.
fn take(o: &mut Value, path: &[&str]) -> Option<Value> {
    let (last, parent) = path.split_last()?;
    get_mut(o, parent)?.as_object_mut()?.remove(*last)
}

fn rename(o: &mut Value, path: &[&str], from: &str, to: &str) {
    if let Some(map) = get_mut(o, path).and_then(Value::as_object_mut) {
        if let Some(v) = map.remove(from) {
            map.insert(to.into(), v);
        }
    }
}

/// The object at `key` of `map`, created (or replacing a non-object) when needed.
fn member<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let member = map
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if !member.is_object() {
        *member = Value::Object(Map::new());
    }
    member.as_object_mut().expect("just made an object")
}

/// `o` as an object (a non-object becomes an empty one).
fn as_map(o: &mut Value) -> &mut Map<String, Value> {
    if !o.is_object() {
        *o = Value::Object(Map::new());
    }
    o.as_object_mut().expect("just made an object")
}

fn spec(o: &mut Value) -> &mut Map<String, Value> {
    member(as_map(o), "spec")
}

fn annotations(o: &mut Value) -> &mut Map<String, Value> {
    member(member(as_map(o), "metadata"), "annotations")
}

/// Removes an annotation, and the `annotations` map when that empties it (Go's `omitempty`).
fn take_annotation(o: &mut Value, key: &str) -> Option<String> {
    let metadata = get_mut(o, &["metadata"])?.as_object_mut()?;
    let annotations = metadata.get_mut("annotations")?.as_object_mut()?;
    let value = annotations.remove(key)?;
    if annotations.is_empty() {
        metadata.remove("annotations");
    }
    value.as_str().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(
        kind: &str,
        object: Value,
        from: GroupVersion,
        to: GroupVersion,
        expected: Value,
    ) {
        let converted = convert(&object, kind, from, to).unwrap();
        assert_eq!(converted, expected, "{kind} {from:?} -> {to:?}");
        let back = convert(&converted, kind, to, from).unwrap();
        assert_eq!(back, object, "{kind} {to:?} -> {from:?} (round trip)");
    }

    #[test]
    fn deployment_rollback_to_rides_an_annotation() {
        round_trip(
            "Deployment",
            json!({"apiVersion": "extensions/v1beta1", "kind": "Deployment",
                   "metadata": {"name": "web"},
                   "spec": {"replicas": 2, "rollbackTo": {"revision": 3}}}),
            ("extensions", "v1beta1"),
            ("apps", "v1"),
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "web", "annotations": {ROLLBACK_TO: "3"}},
                   "spec": {"replicas": 2}}),
        );
    }

    #[test]
    fn daemonset_template_generation_rides_an_annotation() {
        round_trip(
            "DaemonSet",
            json!({"apiVersion": "extensions/v1beta1", "kind": "DaemonSet",
                   "metadata": {"name": "agent", "annotations": {"a": "b"}},
                   "spec": {"templateGeneration": 7}}),
            ("extensions", "v1beta1"),
            ("apps", "v1"),
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
                   "metadata": {"name": "agent", "annotations": {"a": "b", TEMPLATE_GENERATION: "7"}},
                   "spec": {}}),
        );
    }

    #[test]
    fn ingress_backends_change_shape() {
        round_trip(
            "Ingress",
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                   "spec": {"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}},
                            "rules": [{"host": "a.example.com", "http": {"paths": [
                                {"path": "/", "pathType": "Prefix",
                                 "backend": {"service": {"name": "api", "port": {"name": "http"}}}},
                                {"path": "/r", "pathType": "Prefix",
                                 "backend": {"resource": {"kind": "Bucket", "name": "b"}}}]}}]}}),
            ("networking.k8s.io", "v1"),
            ("extensions", "v1beta1"),
            json!({"apiVersion": "extensions/v1beta1", "kind": "Ingress",
                   "spec": {"backend": {"serviceName": "web", "servicePort": 80},
                            "rules": [{"host": "a.example.com", "http": {"paths": [
                                {"path": "/", "pathType": "Prefix",
                                 "backend": {"serviceName": "api", "servicePort": "http"}},
                                {"path": "/r", "pathType": "Prefix",
                                 "backend": {"resource": {"kind": "Bucket", "name": "b"}}}]}}]}}),
        );
    }

    #[test]
    fn pdb_empty_selectors_keep_their_meaning() {
        // helper.go: v1beta1 `{}` matches nothing; v1 spells that with an Exists requirement.
        round_trip(
            "PodDisruptionBudget",
            json!({"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget",
                   "spec": {"minAvailable": 1, "selector": {}}}),
            ("policy", "v1beta1"),
            ("policy", "v1"),
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                   "spec": {"minAvailable": 1, "selector": pdb_selector("Exists")}}),
        );
        round_trip(
            "PodDisruptionBudget",
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                   "spec": {"selector": {"matchLabels": {"app": "web"}}}}),
            ("policy", "v1"),
            ("policy", "v1beta1"),
            json!({"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget",
                   "spec": {"selector": {"matchLabels": {"app": "web"}}}}),
        );
    }

    #[test]
    fn apiversion_only_pairs_and_missing_paths() {
        round_trip(
            "CronJob",
            json!({"apiVersion": "batch/v1", "kind": "CronJob", "spec": {"schedule": "* * * * *"}}),
            ("batch", "v1"),
            ("batch", "v1beta1"),
            json!({"apiVersion": "batch/v1beta1", "kind": "CronJob", "spec": {"schedule": "* * * * *"}}),
        );
        let hpa = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler"});
        assert!(matches!(
            convert(
                &hpa,
                "HorizontalPodAutoscaler",
                ("autoscaling", "v2"),
                ("autoscaling", "v1")
            ),
            Err(ConversionError::NoPath { .. })
        ));
    }
}
