//! What the replicated workloads share: a selector that must match the
//! pod template, and the autoscaling/v1 Scale view of `spec.replicas`.

use serde_json::{json, Value};

use super::pod::validate_pod_spec;
use crate::error::Cause;
use crate::object::selector::LabelSelector;

/// A `metav1.LabelSelector` (or a plain map, for ReplicationControllers)
/// as the selector string Scale reports.
pub fn selector_string(selector: &Value) -> String {
    let mut parts: Vec<String> = Vec::new();
    let labels = selector.get("matchLabels").unwrap_or(selector);
    if let Some(map) = labels.as_object() {
        parts.extend(
            map.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| format!("{k}={v}"))),
        );
    }
    for expr in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let key = expr["key"].as_str().unwrap_or("");
        let values: Vec<&str> = expr["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        parts.push(match expr["operator"].as_str().unwrap_or("") {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            _ => format!("!{key}"),
        });
    }
    parts.join(",")
}

/// The Scale object for a workload.
pub fn scale_of(obj: &Value) -> Value {
    let meta = &obj["metadata"];
    json!({
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"],
                     "resourceVersion": meta["resourceVersion"], "creationTimestamp": meta["creationTimestamp"]},
        "spec": {"replicas": obj["spec"]["replicas"].as_i64().unwrap_or(0)},
        "status": {"replicas": obj["status"]["replicas"].as_i64().unwrap_or(0),
                   "selector": selector_string(&obj["spec"]["selector"])},
    })
}

/// Selector present, matching the template's labels; replicas ≥ 0; a
/// valid pod template.
pub fn validate(obj: &Value, selector_required: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = &obj["spec"];
    let selector = &spec["selector"];
    let template_labels = spec["template"]["metadata"]["labels"].as_object();
    if selector.is_null() || selector.as_object().is_some_and(|s| s.is_empty()) {
        if selector_required {
            causes.push(Cause::required("spec.selector"));
        }
    } else if let Ok(parsed) = LabelSelector::parse(&selector_string(selector)) {
        if !parsed.matches(template_labels) {
            let labels = super::map_string(&spec["template"]["metadata"]["labels"]);
            causes.push(Cause::invalid(
                "spec.template.metadata.labels",
                &labels,
                "`selector` does not match template `labels`",
            ));
        }
    }
    if spec["replicas"].as_i64().is_some_and(|r| r < 0) {
        causes.push(Cause::invalid(
            "spec.replicas",
            &spec["replicas"].to_string(),
            "must be greater than or equal to 0",
        ));
    }
    causes.extend(validate_pod_spec(
        &spec["template"]["spec"],
        "spec.template.spec",
    ));
    causes
}

/// Immutable selector, as apps/v1 has it.
pub fn validate_update(new: &Value, old: &Value) -> Vec<Cause> {
    if new["spec"]["selector"] != old["spec"]["selector"] {
        return vec![Cause::invalid(
            "spec.selector",
            &selector_string(&new["spec"]["selector"]),
            "field is immutable",
        )];
    }
    Vec::new()
}

/// `ready/desired` as kubectl shows it.
pub fn ready_of(obj: &Value) -> String {
    format!(
        "{}/{}",
        obj["status"]["readyReplicas"].as_i64().unwrap_or(0),
        obj["spec"]["replicas"].as_i64().unwrap_or(0)
    )
}

pub fn count(obj: &Value, pointer: &str) -> Value {
    obj.pointer(pointer)
        .and_then(Value::as_i64)
        .unwrap_or(0)
        .into()
}

/// Containers and images of the pod template, for `-o wide`.
pub fn containers_and_images(obj: &Value) -> (Value, Value) {
    let containers = obj["spec"]["template"]["spec"]["containers"].as_array();
    let names: Vec<&str> = containers
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    let images: Vec<&str> = containers
        .into_iter()
        .flatten()
        .filter_map(|c| c["image"].as_str())
        .collect();
    (names.join(",").into(), images.join(",").into())
}
