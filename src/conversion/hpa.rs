//! HorizontalPodAutoscaler autoscaling/v1, v2beta1 and v2beta2 to and from the hub,
//! autoscaling/v2, field by field as `pkg/apis/autoscaling/{v1,v2beta1,v2beta2,v2}/conversion.go`
//! convert through the internal version (the internal HPA is v2's shape). Depends on `fields`
//! and `gojson`.
//!
//! What an older version cannot hold rides in annotations (`pkg/apis/autoscaling/annotations.go`):
//! - v1 keeps the metrics other than CPU utilization, the metric statuses and the conditions as
//!   JSON of the `autoscaling/v1` annotation types (v2beta1's metric shapes), and the behavior;
//! - v1 and v2beta1 keep `spec.behavior` as `json.Marshal` of the *internal*
//!   `HorizontalPodAutoscalerBehavior`, which has no json tags: Go field names (`ScaleUp`,
//!   `StabilizationWindowSeconds`…), read back ignoring case;
//! - v2beta2 keeps the scaling rules' `tolerance` as a Quantity string.
//!
//! Every conversion to an external version first drops the round-trip annotations and then
//! writes its own; every conversion to internal reads them and then drops them
//! (`DropRoundTripHorizontalPodAutoscalerAnnotations`). Malformed metric, status, condition
//! and behavior annotations are ignored, as upstream moves "only well-formed data from
//! annotations to fields"; a malformed tolerance annotation is an error, as there.

use serde_json::{json, Map, Value};

use super::fields::{annotations, as_map, get_mut, member, spec, take, take_annotation};
use super::gojson::{decode, encode, is_quantity, tagged, DecodeError, Field, Presence, Type};

/// `autoscaling.MetricSpecsAnnotation`: v1's metrics other than CPU utilization.
pub(super) const METRIC_SPECS: &str = "autoscaling.alpha.kubernetes.io/metrics";
/// `autoscaling.MetricStatusesAnnotation`: v1's `status.currentMetrics`.
pub(super) const METRIC_STATUSES: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
/// `autoscaling.HorizontalPodAutoscalerConditionsAnnotation`: v1's `status.conditions`.
pub(super) const CONDITIONS: &str = "autoscaling.alpha.kubernetes.io/conditions";
/// `autoscaling.BehaviorSpecsAnnotation`: `spec.behavior` in v1 and v2beta1.
pub(super) const BEHAVIOR: &str = "autoscaling.alpha.kubernetes.io/behavior";
/// `autoscaling.ToleranceScaleDownAnnotation`: v2beta2's `behavior.scaleDown.tolerance`.
pub(super) const SCALE_DOWN_TOLERANCE: &str =
    "autoscaling.alpha.kubernetes.io/scale-down-tolerance";
/// `autoscaling.ToleranceScaleUpAnnotation`: v2beta2's `behavior.scaleUp.tolerance`.
pub(super) const SCALE_UP_TOLERANCE: &str = "autoscaling.alpha.kubernetes.io/scale-up-tolerance";
/// `autoscaling.DefaultCPUUtilization`: v1's implicit target when it has no metric at all.
const DEFAULT_CPU_UTILIZATION: i64 = 80;

/// v2beta2's tolerance annotations, by scaling direction.
const TOLERANCES: [(&str, &str); 2] = [
    ("scaleDown", SCALE_DOWN_TOLERANCE),
    ("scaleUp", SCALE_UP_TOLERANCE),
];

const ROUND_TRIP: [&str; 6] = [
    METRIC_SPECS,
    BEHAVIOR,
    METRIC_STATUSES,
    CONDITIONS,
    SCALE_DOWN_TOLERANCE,
    SCALE_UP_TOLERANCE,
];

// The Go types written into annotations and v2beta1's metric fields, in declaration order
// (`k8s.io/api/autoscaling/v1/types.go`, "the types below are used in the alpha metrics
// annotation"; v2beta1 declares the same shapes).
use Presence::{Nullable, OmitZero, Optional, Required};

static STRING: Type = Type::String;
static INT32: Type = Type::Int32;
static QUANTITY: Type = Type::Quantity;
static TIME: Type = Type::Time;
static STRING_MAP: Type = Type::StringMap;
static STRINGS: Type = Type::List(&STRING);
static REQUIREMENT: Type = Type::Struct(&[
    tagged("key", &STRING, Required),
    tagged("operator", &STRING, Required),
    tagged("values", &STRINGS, OmitZero),
]);
static REQUIREMENTS: Type = Type::List(&REQUIREMENT);
static LABEL_SELECTOR: Type = Type::Struct(&[
    tagged("matchLabels", &STRING_MAP, OmitZero),
    tagged("matchExpressions", &REQUIREMENTS, OmitZero),
]);
static REFERENCE: Type = Type::Struct(&[
    tagged("kind", &STRING, Required),
    tagged("name", &STRING, Required),
    tagged("apiVersion", &STRING, OmitZero),
]);
static OBJECT_SOURCE: Type = Type::Struct(&[
    tagged("target", &REFERENCE, Required),
    tagged("metricName", &STRING, Required),
    tagged("targetValue", &QUANTITY, Required),
    tagged("selector", &LABEL_SELECTOR, Optional),
    tagged("averageValue", &QUANTITY, Optional),
]);
static PODS_SOURCE: Type = Type::Struct(&[
    tagged("metricName", &STRING, Required),
    tagged("targetAverageValue", &QUANTITY, Required),
    tagged("selector", &LABEL_SELECTOR, Optional),
]);
static RESOURCE_SOURCE: Type = Type::Struct(&[
    tagged("name", &STRING, Required),
    tagged("targetAverageUtilization", &INT32, Optional),
    tagged("targetAverageValue", &QUANTITY, Optional),
]);
static CONTAINER_RESOURCE_SOURCE: Type = Type::Struct(&[
    tagged("name", &STRING, Required),
    tagged("targetAverageUtilization", &INT32, Optional),
    tagged("targetAverageValue", &QUANTITY, Optional),
    tagged("container", &STRING, Required),
]);
static EXTERNAL_SOURCE: Type = Type::Struct(&[
    tagged("metricName", &STRING, Required),
    tagged("metricSelector", &LABEL_SELECTOR, Optional),
    tagged("targetValue", &QUANTITY, Optional),
    tagged("targetAverageValue", &QUANTITY, Optional),
]);
static METRIC_SPEC: Type = Type::Struct(&[
    tagged("type", &STRING, Required),
    tagged("object", &OBJECT_SOURCE, Optional),
    tagged("pods", &PODS_SOURCE, Optional),
    tagged("resource", &RESOURCE_SOURCE, Optional),
    tagged("containerResource", &CONTAINER_RESOURCE_SOURCE, Optional),
    tagged("external", &EXTERNAL_SOURCE, Optional),
]);
static METRIC_SPECS_TYPE: Type = Type::List(&METRIC_SPEC);
static OBJECT_STATUS: Type = Type::Struct(&[
    tagged("target", &REFERENCE, Required),
    tagged("metricName", &STRING, Required),
    tagged("currentValue", &QUANTITY, Required),
    tagged("selector", &LABEL_SELECTOR, Optional),
    tagged("averageValue", &QUANTITY, Optional),
]);
static PODS_STATUS: Type = Type::Struct(&[
    tagged("metricName", &STRING, Required),
    tagged("currentAverageValue", &QUANTITY, Required),
    tagged("selector", &LABEL_SELECTOR, Optional),
]);
static RESOURCE_STATUS: Type = Type::Struct(&[
    tagged("name", &STRING, Required),
    tagged("currentAverageUtilization", &INT32, Optional),
    tagged("currentAverageValue", &QUANTITY, Required),
]);
static CONTAINER_RESOURCE_STATUS: Type = Type::Struct(&[
    tagged("name", &STRING, Required),
    tagged("currentAverageUtilization", &INT32, Optional),
    tagged("currentAverageValue", &QUANTITY, Required),
    tagged("container", &STRING, Required),
]);
static EXTERNAL_STATUS: Type = Type::Struct(&[
    tagged("metricName", &STRING, Required),
    tagged("metricSelector", &LABEL_SELECTOR, Optional),
    tagged("currentValue", &QUANTITY, Required),
    tagged("currentAverageValue", &QUANTITY, Optional),
]);
static METRIC_STATUS: Type = Type::Struct(&[
    tagged("type", &STRING, Required),
    tagged("object", &OBJECT_STATUS, Optional),
    tagged("pods", &PODS_STATUS, Optional),
    tagged("resource", &RESOURCE_STATUS, Optional),
    tagged("containerResource", &CONTAINER_RESOURCE_STATUS, Optional),
    tagged("external", &EXTERNAL_STATUS, Optional),
]);
static METRIC_STATUSES_TYPE: Type = Type::List(&METRIC_STATUS);
static CONDITION: Type = Type::Struct(&[
    tagged("type", &STRING, Required),
    tagged("status", &STRING, Required),
    tagged("lastTransitionTime", &TIME, Nullable),
    tagged("reason", &STRING, OmitZero),
    tagged("message", &STRING, OmitZero),
]);
static CONDITIONS_TYPE: Type = Type::List(&CONDITION);

/// An untagged field of an internal type: Go writes its field name.
const fn internal(key: &'static str, name: &'static str, ty: &'static Type) -> Field {
    Field {
        key,
        name,
        ty,
        presence: Nullable,
    }
}

// `pkg/apis/autoscaling/types.go`: HorizontalPodAutoscalerBehavior, HPAScalingRules,
// HPAScalingPolicy. No json tags, pointers and slices without omitempty (nil is `null`).
static POLICY: Type = Type::Struct(&[
    Field {
        presence: Required,
        ..internal("Type", "type", &STRING)
    },
    Field {
        presence: Required,
        ..internal("Value", "value", &INT32)
    },
    Field {
        presence: Required,
        ..internal("PeriodSeconds", "periodSeconds", &INT32)
    },
]);
static POLICIES: Type = Type::List(&POLICY);
static RULES: Type = Type::Struct(&[
    internal(
        "StabilizationWindowSeconds",
        "stabilizationWindowSeconds",
        &INT32,
    ),
    internal("SelectPolicy", "selectPolicy", &STRING),
    internal("Policies", "policies", &POLICIES),
    internal("Tolerance", "tolerance", &QUANTITY),
]);
static BEHAVIOR_TYPE: Type = Type::Struct(&[
    internal("ScaleUp", "scaleUp", &RULES),
    internal("ScaleDown", "scaleDown", &RULES),
]);

/// Why a HorizontalPodAutoscaler does not convert to the hub.
#[derive(Debug, thiserror::Error)]
pub(super) enum HpaError {
    /// v2beta1's `spec.metrics` or `status.currentMetrics` do not decode as their Go types:
    /// where (from the object's root) and why, as `json.Unmarshal` says it.
    #[error(transparent)]
    Metrics(DecodeError),
    /// A tolerance annotation of v2beta2 is not a Quantity (`resource.ParseQuantity`).
    #[error("failed to parse annotation {0:?}: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")]
    Tolerance(&'static str),
}

/// Converts a HorizontalPodAutoscaler of `version` to the hub (autoscaling/v2) in place.
///
/// # Errors
/// [`HpaError`] naming the field when v2beta1's `spec.metrics` or `status.currentMetrics` do
/// not decode as their Go types, or a tolerance annotation is not a Quantity.
pub(super) fn to_hub(version: &str, o: &mut Value) -> Result<(), HpaError> {
    match version {
        "v1" => v1_to_hub(o),
        "v2beta1" => v2beta1_to_hub(o)?,
        "v2beta2" => v2beta2_to_hub(o)?,
        _ => {}
    }
    drop_round_trip_annotations(o);
    Ok(())
}

/// Converts a hub (autoscaling/v2) HorizontalPodAutoscaler to `version` in place. Every hub
/// object has a representation in every version, so this cannot fail.
pub(super) fn from_hub(version: &str, o: &mut Value) {
    drop_round_trip_annotations(o);
    match version {
        "v1" => hub_to_v1(o),
        "v2beta1" => hub_to_v2beta1(o),
        "v2beta2" => hub_to_v2beta2(o),
        _ => {}
    }
}

/// `DropRoundTripHorizontalPodAutoscalerAnnotations` (`pkg/apis/autoscaling/helpers.go`); an
/// emptied map goes too (`omitempty`).
fn drop_round_trip_annotations(o: &mut Value) {
    for key in ROUND_TRIP {
        take_annotation(o, key);
    }
}

/// `Convert_autoscaling_HorizontalPodAutoscaler_To_v1_HorizontalPodAutoscaler` and its spec
/// and status functions: the first CPU metric with a utilization target becomes
/// `targetCPUUtilizationPercentage` and every other metric goes to the metrics annotation; the
/// last CPU metric status with a utilization becomes `currentCPUUtilizationPercentage`, and all
/// statuses, the behavior and the conditions go to annotations.
fn hub_to_v1(o: &mut Value) {
    let metrics = take_list(o, Metric::Spec.path());
    let behavior = take(o, &["spec", "behavior"]).filter(|b| !b.is_null());
    let statuses = take_list(o, Metric::Status.path());
    let conditions = take_list(o, &["status", "conditions"]);

    let (cpu, others): (Vec<&Value>, Vec<&Value>) = metrics.iter().partition(|m| is_cpu(m));
    if let Some(target) = cpu
        .first()
        .map(|m| &m["resource"]["target"]["averageUtilization"])
    {
        spec(o).insert("targetCPUUtilizationPercentage".into(), target.clone());
    }
    let current_cpu = statuses
        .iter()
        .filter(|s| s["type"] == "Resource" && s["resource"]["name"] == "cpu")
        .filter_map(|s| non_null(&s["resource"]["current"]["averageUtilization"]))
        .next_back();
    if let Some(current) = current_cpu {
        status(o).insert("currentCPUUtilizationPercentage".into(), current.clone());
    }

    if !others.is_empty() {
        let specs: Vec<Value> = others
            .into_iter()
            .map(|m| metric_from_hub(m, Metric::Spec))
            .collect();
        write_annotation(o, METRIC_SPECS, &Value::Array(specs), &METRIC_SPECS_TYPE);
    }
    if !statuses.is_empty() {
        let statuses: Vec<Value> = statuses
            .iter()
            .map(|m| metric_from_hub(m, Metric::Status))
            .collect();
        write_annotation(
            o,
            METRIC_STATUSES,
            &Value::Array(statuses),
            &METRIC_STATUSES_TYPE,
        );
    }
    if let Some(behavior) = behavior {
        write_annotation(o, BEHAVIOR, &behavior, &BEHAVIOR_TYPE);
    }
    if !conditions.is_empty() {
        write_annotation(o, CONDITIONS, &Value::Array(conditions), &CONDITIONS_TYPE);
    }
}

/// `Convert_v1_HorizontalPodAutoscaler_To_autoscaling_HorizontalPodAutoscaler`: the CPU target
/// becomes a Resource metric placed after the annotation's metrics; the annotation's statuses
/// replace the one made from `currentCPUUtilizationPercentage`; with no metric at all the
/// implicit 80 % CPU target is made explicit.
fn v1_to_hub(o: &mut Value) {
    let mut metrics: Vec<Value> = Vec::new();
    if let Some(target) = take(o, &["spec", "targetCPUUtilizationPercentage"]) {
        if !target.is_null() {
            metrics.push(cpu_metric(target));
        }
    }
    let mut statuses = None;
    if let Some(current) = take(o, &["status", "currentCPUUtilizationPercentage"]) {
        if !current.is_null() {
            statuses = Some(vec![json!({"type": "Resource",
                "resource": {"name": "cpu", "current": {"averageUtilization": current}}})]);
        }
    }
    if let Some(Value::Array(specs)) = annotation(o, METRIC_SPECS, &METRIC_SPECS_TYPE) {
        let mut all: Vec<Value> = specs
            .iter()
            .map(|m| metric_to_hub(m, Metric::Spec))
            .collect();
        all.append(&mut metrics);
        metrics = all;
    }
    let behavior = annotation(o, BEHAVIOR, &BEHAVIOR_TYPE);
    if let Some(Value::Array(current)) = annotation(o, METRIC_STATUSES, &METRIC_STATUSES_TYPE) {
        statuses = Some(
            current
                .iter()
                .map(|m| metric_to_hub(m, Metric::Status))
                .collect(),
        );
    }
    if metrics.is_empty() {
        metrics.push(cpu_metric(DEFAULT_CPU_UTILIZATION.into()));
    }
    let conditions = annotation(o, CONDITIONS, &CONDITIONS_TYPE);

    spec(o).insert("metrics".into(), Value::Array(metrics));
    if let Some(behavior) = behavior.filter(is_set_behavior) {
        spec(o).insert("behavior".into(), behavior);
    }
    if let Some(statuses) = statuses.filter(|s| !s.is_empty()) {
        status(o).insert("currentMetrics".into(), Value::Array(statuses));
    }
    if let Some(conditions) = conditions.filter(|c| c.as_array().is_some_and(|c| !c.is_empty())) {
        status(o).insert("conditions".into(), conditions);
    }
}

/// autoscaling/v2beta1: the metric shapes of `autoConvert_…` and the per-source functions in
/// `v2beta1/conversion.go`, and the behavior annotation.
fn hub_to_v2beta1(o: &mut Value) {
    let behavior = take(o, &["spec", "behavior"]).filter(|b| !b.is_null());
    for metric in [Metric::Spec, Metric::Status] {
        if let Some(Value::Array(items)) = get_mut(o, metric.path()) {
            for item in items.iter_mut() {
                *item = metric_from_hub(item, metric);
                forget_container(item, metric);
            }
        }
    }
    if let Some(behavior) = behavior {
        write_annotation(o, BEHAVIOR, &behavior, &BEHAVIOR_TYPE);
    }
}

fn v2beta1_to_hub(o: &mut Value) -> Result<(), HpaError> {
    for metric in [Metric::Spec, Metric::Status] {
        if let Some(list) = get_mut(o, metric.path()) {
            let decoded = decode(list, metric.list_type())
                .map_err(|e| HpaError::Metrics(e.under(&metric.path().join("."))))?;
            *list = match decoded {
                Value::Array(items) => Value::Array(
                    items
                        .iter()
                        .map(|m| {
                            let mut hub = metric_to_hub(m, metric);
                            forget_container(&mut hub, metric);
                            hub
                        })
                        .collect(),
                ),
                other => other,
            };
        }
    }
    if let Some(behavior) = annotation(o, BEHAVIOR, &BEHAVIOR_TYPE).filter(is_set_behavior) {
        spec(o).insert("behavior".into(), behavior);
    }
    Ok(())
}

/// v2beta1's `ContainerResourceMetricSource` conversions (both directions, in
/// `v2beta1/conversion.go`) copy the name and target but not `container`, which is left at Go's
/// zero value, `""`; the status conversions copy it. Kubernetes loses it, and so does the proxy.
fn forget_container(m: &mut Value, metric: Metric) {
    if metric != Metric::Spec {
        return;
    }
    if let Some(source) = get_mut(m, &["containerResource"]).and_then(Value::as_object_mut) {
        source.insert("container".into(), Value::String(String::new()));
    }
}

/// autoscaling/v2beta2 has no `tolerance` in its scaling rules: `v2beta2/conversion.go` keeps
/// each as the Quantity's string in an annotation.
fn hub_to_v2beta2(o: &mut Value) {
    for (direction, key) in TOLERANCES {
        let tolerance = take(o, &["spec", "behavior", direction, "tolerance"]);
        let text = match tolerance {
            Some(Value::String(s)) => s,
            Some(Value::Number(n)) => n.to_string(),
            _ => continue,
        };
        annotations(o).insert(key.into(), text.into());
    }
}

fn v2beta2_to_hub(o: &mut Value) -> Result<(), HpaError> {
    for (direction, key) in TOLERANCES {
        let Some(text) = annotation_text(o, key).map(|t| t.trim().to_string()) else {
            continue;
        };
        if !is_quantity(&text) {
            return Err(HpaError::Tolerance(key));
        }
        let rules = member(member(spec(o), "behavior"), direction);
        rules.insert("tolerance".into(), Value::String(text));
    }
    Ok(())
}

fn status(o: &mut Value) -> &mut Map<String, Value> {
    member(as_map(o), "status")
}

/// A CPU Resource metric with a utilization target (the shape v1's field stands for).
fn cpu_metric(utilization: Value) -> Value {
    json!({"type": "Resource", "resource": {"name": "cpu",
        "target": {"type": "Utilization", "averageUtilization": utilization}}})
}

/// `metric.Type == Resource && metric.Resource.Name == cpu && Target.AverageUtilization != nil`.
fn is_cpu(metric: &Value) -> bool {
    metric["type"] == "Resource"
        && metric["resource"]["name"] == "cpu"
        && !metric["resource"]["target"]["averageUtilization"].is_null()
}

/// `behavior != (HorizontalPodAutoscalerBehavior{})`: at least one direction set.
fn is_set_behavior(behavior: &Value) -> bool {
    ["scaleUp", "scaleDown"]
        .iter()
        .any(|d| behavior.get(d).is_some_and(|r| !r.is_null()))
}

/// The annotation `key` decoded as `ty`, or `None` when absent or malformed (upstream ignores
/// what does not unmarshal).
fn annotation(o: &Value, key: &str, ty: &Type) -> Option<Value> {
    let value: Value = serde_json::from_str(annotation_text(o, key)?).ok()?;
    decode(&value, ty).ok()
}

fn annotation_text<'a>(o: &'a Value, key: &str) -> Option<&'a str> {
    o["metadata"]["annotations"][key].as_str()
}

/// Writes `value` as Go marshals `ty` into the annotation `key`.
fn write_annotation(o: &mut Value, key: &str, value: &Value, ty: &Type) {
    annotations(o).insert(key.into(), encode(value, ty).into());
}

fn take_list(o: &mut Value, path: &[&str]) -> Vec<Value> {
    match take(o, path) {
        Some(Value::Array(items)) => items,
        _ => Vec::new(),
    }
}

fn non_null(v: &Value) -> Option<&Value> {
    (!v.is_null()).then_some(v)
}

/// How one metric source's fields in the old shapes (v1's annotation types, v2beta1) map onto
/// v2's, after the per-source functions of `autoscaling/v1/conversion.go` (v2beta1 has the same
/// ones). A field moves when it is set; the old shapes' required fields are always set once
/// decoded, which gives upstream's "always set" cases (`Value: &in.TargetValue`).
struct Source {
    /// The member of MetricSpec/MetricStatus: `object`, `pods`, `resource`…
    key: &'static str,
    /// `(old field, v2 path)` of the MetricSpec source.
    spec: &'static [(&'static str, &'static [&'static str])],
    /// `(old field, v2 path)` of the MetricStatus source.
    status: &'static [(&'static str, &'static [&'static str])],
    /// v2's `target.type`: `(old field, type when it is set, type otherwise)`.
    target_type: (&'static str, &'static str, &'static str),
}

const METRIC_NAME: (&str, &[&str]) = ("metricName", &["metric", "name"]);
const SELECTOR: (&str, &[&str]) = ("selector", &["metric", "selector"]);
const METRIC_SELECTOR: (&str, &[&str]) = ("metricSelector", &["metric", "selector"]);
const DESCRIBED_OBJECT: (&str, &[&str]) = ("target", &["describedObject"]);
const NAME: (&str, &[&str]) = ("name", &["name"]);
const CONTAINER: (&str, &[&str]) = ("container", &["container"]);

static SOURCES: [Source; 5] = [
    Source {
        key: "object",
        spec: &[
            DESCRIBED_OBJECT,
            METRIC_NAME,
            SELECTOR,
            ("targetValue", &["target", "value"]),
            ("averageValue", &["target", "averageValue"]),
        ],
        status: &[
            DESCRIBED_OBJECT,
            METRIC_NAME,
            SELECTOR,
            ("currentValue", &["current", "value"]),
            ("averageValue", &["current", "averageValue"]),
        ],
        target_type: ("averageValue", "AverageValue", "Value"),
    },
    Source {
        key: "pods",
        spec: &[
            METRIC_NAME,
            SELECTOR,
            ("targetAverageValue", &["target", "averageValue"]),
        ],
        status: &[
            METRIC_NAME,
            SELECTOR,
            ("currentAverageValue", &["current", "averageValue"]),
        ],
        target_type: ("targetAverageValue", "AverageValue", "AverageValue"),
    },
    Source {
        key: "resource",
        spec: &[
            NAME,
            (
                "targetAverageUtilization",
                &["target", "averageUtilization"],
            ),
            ("targetAverageValue", &["target", "averageValue"]),
        ],
        status: &[
            NAME,
            (
                "currentAverageUtilization",
                &["current", "averageUtilization"],
            ),
            ("currentAverageValue", &["current", "averageValue"]),
        ],
        target_type: ("targetAverageUtilization", "Utilization", "AverageValue"),
    },
    Source {
        key: "containerResource",
        spec: &[
            NAME,
            CONTAINER,
            (
                "targetAverageUtilization",
                &["target", "averageUtilization"],
            ),
            ("targetAverageValue", &["target", "averageValue"]),
        ],
        status: &[
            NAME,
            CONTAINER,
            (
                "currentAverageUtilization",
                &["current", "averageUtilization"],
            ),
            ("currentAverageValue", &["current", "averageValue"]),
        ],
        target_type: ("targetAverageUtilization", "Utilization", "AverageValue"),
    },
    Source {
        key: "external",
        spec: &[
            METRIC_NAME,
            METRIC_SELECTOR,
            ("targetValue", &["target", "value"]),
            ("targetAverageValue", &["target", "averageValue"]),
        ],
        status: &[
            METRIC_NAME,
            METRIC_SELECTOR,
            ("currentValue", &["current", "value"]),
            ("currentAverageValue", &["current", "averageValue"]),
        ],
        target_type: ("targetValue", "Value", "AverageValue"),
    },
];

/// A MetricSpec (`spec.metrics`) or a MetricStatus (`status.currentMetrics`).
#[derive(Clone, Copy, PartialEq)]
enum Metric {
    Spec,
    Status,
}

impl Metric {
    fn fields(self, source: &Source) -> &'static [(&'static str, &'static [&'static str])] {
        match self {
            Metric::Spec => source.spec,
            Metric::Status => source.status,
        }
    }

    /// The Go type of the old shape.
    fn old_type(self) -> &'static Type {
        match self {
            Metric::Spec => &METRIC_SPEC,
            Metric::Status => &METRIC_STATUS,
        }
    }

    /// The Go type of a list of old shapes.
    fn list_type(self) -> &'static Type {
        match self {
            Metric::Spec => &METRIC_SPECS_TYPE,
            Metric::Status => &METRIC_STATUSES_TYPE,
        }
    }

    /// Where the list lives in an HPA (v2 and v2beta1 alike).
    fn path(self) -> &'static [&'static str] {
        match self {
            Metric::Spec => &["spec", "metrics"],
            Metric::Status => &["status", "currentMetrics"],
        }
    }
}

/// `Convert_v1_MetricSpec_To_autoscaling_MetricSpec` / `…MetricStatus…` (and v2beta1's): an
/// old-shape metric (decoded, so its required fields are set) in v2's shape. A spec's target
/// type follows from which fields are set.
fn metric_to_hub(old: &Value, metric: Metric) -> Value {
    let mut out = Map::new();
    out.insert("type".into(), old["type"].clone());
    for source in &SOURCES {
        let Some(s) = non_null(&old[source.key]) else {
            continue;
        };
        let mut v = Value::Object(Map::new());
        for (field, path) in metric.fields(source) {
            if let Some(x) = non_null(&s[*field]) {
                set_path(&mut v, path, x.clone());
            }
        }
        if metric == Metric::Spec {
            let (decider, set, unset) = source.target_type;
            let kind = if s[decider].is_null() { unset } else { set };
            set_path(&mut v, &["target", "type"], kind.into());
        }
        out.insert(source.key.into(), v);
    }
    Value::Object(out)
}

/// `Convert_autoscaling_MetricSpec_To_v1_MetricSpec` / `…MetricStatus…`: a v2 metric in the
/// old shape, with Go's zero values in the required fields v2 leaves unset (a Pods target
/// without `averageValue` is `"0"`).
fn metric_from_hub(m: &Value, metric: Metric) -> Value {
    let mut out = Map::new();
    out.insert("type".into(), m["type"].clone());
    for source in &SOURCES {
        let Some(s) = non_null(&m[source.key]) else {
            continue;
        };
        let mut old = Map::new();
        for (field, path) in metric.fields(source) {
            if let Some(x) = path.iter().try_fold(s, |v, k| v.get(*k)).and_then(non_null) {
                old.insert((*field).into(), x.clone());
            }
        }
        out.insert(source.key.into(), Value::Object(old));
    }
    normalize(Value::Object(out), metric.old_type())
}

/// Sets `v` at `path` under `o`, creating the objects on the way.
fn set_path(o: &mut Value, path: &[&str], v: Value) {
    if let Some((last, parents)) = path.split_last() {
        let parent = parents.iter().fold(as_map(o), |map, key| member(map, key));
        parent.insert((*last).into(), v);
    }
}

/// Fills Go's zero values into the required fields, as the typed object holds them. A hub
/// value of the wrong type (not from kube-apiserver) is left as it is.
fn normalize(value: Value, ty: &Type) -> Value {
    decode(&value, ty).unwrap_or(value)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::conversion::objects::{convert, ConversionError};

    const KIND: &str = "HorizontalPodAutoscaler";
    const V2: (&str, &str) = ("autoscaling", "v2");
    const V1: (&str, &str) = ("autoscaling", "v1");
    const V2BETA1: (&str, &str) = ("autoscaling", "v2beta1");
    const V2BETA2: (&str, &str) = ("autoscaling", "v2beta2");

    /// An autoscaling/v2 spec from the API reference with a metric of each source every version
    /// keeps whole (ContainerResource is in [`container_metric`]) and a behavior, ordered as v1
    /// gives them back (the CPU utilization metric last).
    pub(crate) fn sample_spec() -> Value {
        json!({
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 2, "maxReplicas": 10,
            "metrics": [
                {"type": "Object", "object": {
                    "describedObject": {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "name": "web"},
                    "metric": {"name": "requests-per-second"},
                    "target": {"type": "Value", "value": "10k"}}},
                {"type": "Pods", "pods": {
                    "metric": {"name": "packets-per-second", "selector": {"matchLabels": {"app": "web"}}},
                    "target": {"type": "AverageValue", "averageValue": "1k"}}},
                {"type": "Resource", "resource": {"name": "memory",
                    "target": {"type": "AverageValue", "averageValue": "500Mi"}}},
                {"type": "External", "external": {
                    "metric": {"name": "queue_messages_ready",
                        "selector": {"matchExpressions": [{"key": "queue", "operator": "In", "values": ["worker_tasks"]}]}},
                    "target": {"type": "AverageValue", "averageValue": "30"}}},
                {"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 70}}}
            ],
            "behavior": {
                "scaleDown": {"stabilizationWindowSeconds": 300, "selectPolicy": "Min",
                    "policies": [{"type": "Percent", "value": 10, "periodSeconds": 60}]},
                "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "tolerance": "50m",
                    "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15},
                                 {"type": "Pods", "value": 4, "periodSeconds": 15}]}
            }
        })
    }

    /// An autoscaling/v2 status as the HPA controller writes it.
    pub(crate) fn sample_status() -> Value {
        json!({
            "observedGeneration": 3, "lastScaleTime": "2026-11-20T10:00:00Z",
            "currentReplicas": 4, "desiredReplicas": 5,
            "currentMetrics": [
                {"type": "Resource", "resource": {"name": "cpu",
                    "current": {"averageUtilization": 85, "averageValue": "425m"}}},
                {"type": "Object", "object": {
                    "describedObject": {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "name": "web"},
                    "metric": {"name": "requests-per-second"}, "current": {"value": "12k"}}}
            ],
            "conditions": [
                {"type": "AbleToScale", "status": "True", "lastTransitionTime": "2026-11-20T09:00:00Z",
                    "reason": "ReadyForNewScale", "message": "recommended size matches current size"},
                {"type": "ScalingActive", "status": "True", "lastTransitionTime": "2026-11-20T09:00:00Z",
                    "reason": "ValidMetricFound"}
            ]
        })
    }

    /// A ContainerResource metric (v2), which v2beta1 keeps without its `container`.
    fn container_metric() -> Value {
        json!({"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "sidecar",
            "target": {"type": "Utilization", "averageUtilization": 60}}})
    }

    /// [`sample_spec`] with [`container_metric`] before the CPU metric.
    fn spec_with_container_metric() -> Value {
        let mut spec = sample_spec();
        spec["metrics"]
            .as_array_mut()
            .unwrap()
            .insert(3, container_metric());
        spec
    }

    fn hpa(spec: Value, status: Value) -> Value {
        json!({"apiVersion": "autoscaling/v2", "kind": KIND,
            "metadata": {"name": "web", "namespace": "production", "annotations": {"team": "platform"}},
            "spec": spec, "status": status})
    }

    fn annotation_of<'a>(o: &'a Value, key: &str) -> &'a str {
        annotation_text(o, key).unwrap_or_else(|| panic!("{key} in {o}"))
    }

    /// `Convert_autoscaling_HorizontalPodAutoscaler_To_v1_HorizontalPodAutoscaler`: the CPU
    /// target and current utilization become v1's fields; the rest is in annotations, written as
    /// Go writes them (json tags for the v1 annotation types, Go field names for the internal
    /// behavior, `null` for its unset pointers).
    #[test]
    fn to_v1_keeps_what_v1_lacks_in_annotations_byte_for_byte() {
        let original = hpa(spec_with_container_metric(), sample_status());
        let v1 = convert(&original, KIND, V2, V1).unwrap();
        assert_eq!(convert(&v1, KIND, V1, V2).unwrap(), original);
        assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 70);
        assert!(v1["spec"].get("metrics").is_none() && v1["spec"].get("behavior").is_none());
        assert_eq!(v1["status"]["currentCPUUtilizationPercentage"], 85);
        assert!(v1["status"].get("currentMetrics").is_none());
        assert!(v1["status"].get("conditions").is_none());
        assert_eq!(v1["metadata"]["annotations"]["team"], "platform");
        assert_eq!(
            annotation_of(&v1, METRIC_SPECS),
            concat!(
                r#"[{"type":"Object","object":{"target":{"kind":"Ingress","name":"web","apiVersion":"networking.k8s.io/v1"},"metricName":"requests-per-second","targetValue":"10k"}},"#,
                r#"{"type":"Pods","pods":{"metricName":"packets-per-second","targetAverageValue":"1k","selector":{"matchLabels":{"app":"web"}}}},"#,
                r#"{"type":"Resource","resource":{"name":"memory","targetAverageValue":"500Mi"}},"#,
                r#"{"type":"ContainerResource","containerResource":{"name":"cpu","targetAverageUtilization":60,"container":"sidecar"}},"#,
                r#"{"type":"External","external":{"metricName":"queue_messages_ready","metricSelector":{"matchExpressions":[{"key":"queue","operator":"In","values":["worker_tasks"]}]},"targetAverageValue":"30"}}]"#
            )
        );
        assert_eq!(
            annotation_of(&v1, BEHAVIOR),
            concat!(
                r#"{"ScaleUp":{"StabilizationWindowSeconds":0,"SelectPolicy":"Max","Policies":[{"Type":"Percent","Value":100,"PeriodSeconds":15},{"Type":"Pods","Value":4,"PeriodSeconds":15}],"Tolerance":"50m"},"#,
                r#""ScaleDown":{"StabilizationWindowSeconds":300,"SelectPolicy":"Min","Policies":[{"Type":"Percent","Value":10,"PeriodSeconds":60}],"Tolerance":null}}"#
            )
        );
        assert_eq!(
            annotation_of(&v1, METRIC_STATUSES),
            concat!(
                r#"[{"type":"Resource","resource":{"name":"cpu","currentAverageUtilization":85,"currentAverageValue":"425m"}},"#,
                r#"{"type":"Object","object":{"target":{"kind":"Ingress","name":"web","apiVersion":"networking.k8s.io/v1"},"metricName":"requests-per-second","currentValue":"12k"}}]"#
            )
        );
        assert_eq!(
            annotation_of(&v1, CONDITIONS),
            concat!(
                r#"[{"type":"AbleToScale","status":"True","lastTransitionTime":"2026-11-20T09:00:00Z","reason":"ReadyForNewScale","message":"recommended size matches current size"},"#,
                r#"{"type":"ScalingActive","status":"True","lastTransitionTime":"2026-11-20T09:00:00Z","reason":"ValidMetricFound"}]"#
            )
        );
    }

    /// `Convert_v1_HorizontalPodAutoscaler_To_autoscaling_HorizontalPodAutoscaler`: a v1 object
    /// with no metric gets the implicit 80 % CPU target; the CPU target comes after the
    /// annotation's metrics; the behavior annotation is read ignoring case, and round-trip
    /// annotations never reach the v2 object.
    #[test]
    fn from_v1_defaults_cpu_and_reads_annotations_as_go_does() {
        let bare = json!({"apiVersion": "autoscaling/v1", "kind": KIND, "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3},
            "status": {"currentReplicas": 1, "desiredReplicas": 1, "currentCPUUtilizationPercentage": 40}});
        let v2 = convert(&bare, KIND, V1, V2).unwrap();
        assert_eq!(
            v2["spec"]["metrics"],
            json!([{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 80}}}])
        );
        assert_eq!(
            v2["status"]["currentMetrics"],
            json!([{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 40}}}])
        );

        let mut annotated = bare.clone();
        annotated["spec"]["targetCPUUtilizationPercentage"] = json!(50);
        annotated["metadata"]["annotations"] = json!({
            METRIC_SPECS: r#"[{"type":"Pods","pods":{"metricName":"qps","targetAverageValue":"2"}}]"#,
            BEHAVIOR: r#"{"scaleDown":{"stabilizationWindowSeconds":60},"SCALEUP":null}"#,
            CONDITIONS: r#"[{"type":"AbleToScale","status":"False"}]"#,
        });
        let v2 = convert(&annotated, KIND, V1, V2).unwrap();
        assert_eq!(
            v2["spec"]["metrics"],
            json!([
                {"type": "Pods", "pods": {"metric": {"name": "qps"},
                    "target": {"type": "AverageValue", "averageValue": "2"}}},
                {"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 50}}}
            ])
        );
        assert_eq!(
            v2["spec"]["behavior"],
            json!({"scaleDown": {"stabilizationWindowSeconds": 60}})
        );
        assert_eq!(
            v2["status"]["conditions"],
            json!([{"type": "AbleToScale", "status": "False"}])
        );
        assert!(v2["metadata"].get("annotations").is_none(), "{v2}");
    }

    /// Upstream moves "only well-formed data from annotations to fields": an annotation that
    /// does not unmarshal, or a behavior with neither direction, is ignored and dropped.
    #[test]
    fn malformed_annotations_are_ignored_and_dropped() {
        let v1 = json!({"apiVersion": "autoscaling/v1", "kind": KIND,
            "metadata": {"name": "web", "annotations": {
                METRIC_SPECS: "not json",
                METRIC_STATUSES: r#"[{"type":"Resource","resource":{"name":"cpu","currentAverageUtilization":"high"}}]"#,
                BEHAVIOR: "{}",
                CONDITIONS: r#"{"type":"AbleToScale"}"#,
                "team": "platform"}},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3,
                "targetCPUUtilizationPercentage": 60},
            "status": {"currentReplicas": 1, "desiredReplicas": 1}});
        let v2 = convert(&v1, KIND, V1, V2).unwrap();
        assert_eq!(v2["metadata"]["annotations"], json!({"team": "platform"}));
        assert_eq!(v2["spec"]["metrics"].as_array().map(Vec::len), Some(1));
        assert!(v2["spec"].get("behavior").is_none());
        assert!(v2["status"].get("currentMetrics").is_none());
        assert!(v2["status"].get("conditions").is_none());
    }

    /// What Kubernetes' v1 conversion changes or loses, pinned: the CPU utilization metric
    /// moves last; a second CPU utilization metric is lost; an Object target without a value
    /// comes back with value "0"; stale round-trip annotations on the v2 object are dropped.
    #[test]
    fn what_v1_round_trips_change() {
        let spec = json!({"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3,
        "metrics": [
            {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}},
            {"type": "Object", "object": {"describedObject": {"kind": "Service", "name": "web"},
                "metric": {"name": "latency"}, "target": {"type": "AverageValue", "averageValue": "200m"}}},
            {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 90}}}
        ]});
        let mut object = hpa(spec, json!({"desiredReplicas": 1}));
        object["metadata"]["annotations"][METRIC_STATUSES] = json!("[]");
        let v1 = convert(&object, KIND, V2, V1).unwrap();
        assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 50);
        assert!(v1["metadata"]["annotations"].get(METRIC_STATUSES).is_none());
        let back = convert(&v1, KIND, V1, V2).unwrap();
        assert_eq!(
            back["spec"]["metrics"],
            json!([
                {"type": "Object", "object": {"describedObject": {"kind": "Service", "name": "web"},
                    "metric": {"name": "latency"},
                    "target": {"type": "AverageValue", "value": "0", "averageValue": "200m"}}},
                {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}
            ])
        );
        assert_eq!(back["metadata"]["annotations"], json!({"team": "platform"}));
    }

    /// autoscaling/v2beta1 holds the metrics in its own shapes and the behavior in the
    /// annotation; a ContainerResource metric loses its `container` both ways, as
    /// `v2beta1/conversion.go` drops it; a metric of the wrong type is an error naming the field.
    #[test]
    fn v2beta1_metric_shapes_and_type_errors() {
        let with_container = hpa(spec_with_container_metric(), sample_status());
        let v2beta1 = convert(&with_container, KIND, V2, V2BETA1).unwrap();
        assert_eq!(
            v2beta1["spec"]["metrics"][3],
            json!({"type": "ContainerResource", "containerResource": {"name": "cpu",
                "targetAverageUtilization": 60, "container": ""}})
        );
        let mut lost = v2beta1.clone();
        lost["spec"]["metrics"][3]["containerResource"]["container"] = json!("sidecar");
        let back = convert(&lost, KIND, V2BETA1, V2).unwrap();
        assert_eq!(
            back["spec"]["metrics"][3]["containerResource"]["container"],
            ""
        );
        assert_eq!(
            back["spec"]["metrics"][3]["containerResource"]["target"]["averageUtilization"],
            60
        );

        let v2beta1 = convert(&hpa(sample_spec(), sample_status()), KIND, V2, V2BETA1).unwrap();
        assert_eq!(
            v2beta1["spec"]["metrics"][2],
            json!({"type": "Resource", "resource": {"name": "memory", "targetAverageValue": "500Mi"}})
        );
        assert_eq!(
            v2beta1["status"]["currentMetrics"][1]["object"],
            json!({"target": {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "name": "web"},
                "metricName": "requests-per-second", "currentValue": "12k"})
        );
        assert!(v2beta1["metadata"]["annotations"][BEHAVIOR].is_string());
        assert_eq!(
            v2beta1["status"]["conditions"],
            sample_status()["conditions"]
        );

        let mut bad = v2beta1.clone();
        bad["spec"]["metrics"][4]["resource"]["targetAverageUtilization"] = json!("70%");
        let err = convert(&bad, KIND, V2BETA1, V2).unwrap_err();
        assert_eq!(
            err,
            ConversionError::Invalid {
                kind: KIND.into(),
                to: "autoscaling/v2".into(),
                reason: "spec.metrics[4].resource.targetAverageUtilization: cannot unmarshal string into int32".into(),
            }
        );
    }

    /// autoscaling/v2beta2 (`v2beta2/conversion.go`): `tolerance` rides in its annotations; one
    /// that is not a Quantity fails the conversion, as `resource.ParseQuantity` does there.
    #[test]
    fn v2beta2_tolerance_annotations() {
        let v2beta2 = convert(&hpa(sample_spec(), sample_status()), KIND, V2, V2BETA2).unwrap();
        assert_eq!(annotation_of(&v2beta2, SCALE_UP_TOLERANCE), "50m");
        assert!(v2beta2["metadata"]["annotations"]
            .get(SCALE_DOWN_TOLERANCE)
            .is_none());
        assert!(v2beta2["spec"]["behavior"]["scaleUp"]
            .get("tolerance")
            .is_none());
        assert_eq!(v2beta2["spec"]["metrics"], sample_spec()["metrics"]);

        let mut bad = v2beta2.clone();
        bad["metadata"]["annotations"][SCALE_DOWN_TOLERANCE] = json!("a lot");
        let err = convert(&bad, KIND, V2BETA2, V2).unwrap_err();
        assert!(
            matches!(&err, ConversionError::Invalid { reason, .. }
                if reason.starts_with(r#"failed to parse annotation "autoscaling.alpha.kubernetes.io/scale-down-tolerance""#)),
            "{err}"
        );
    }
}
