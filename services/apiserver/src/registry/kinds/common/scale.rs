//! The autoscaling/v1 Scale view of an object's `spec.replicas`, what a
//! `/scale` subresource answers for the workloads.

use serde_json::{json, Value};

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
