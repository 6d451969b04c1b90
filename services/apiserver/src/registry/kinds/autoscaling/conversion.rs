//! Conversion between autoscaling/v1 and autoscaling/v2
//! HorizontalPodAutoscalers (v2 is stored; v1 is served over it, see
//! `v1.rs`). v1 has one target, `targetCPUUtilizationPercentage`:
//! v2's `metrics` entry for CPU utilization. As kube's conversion does,
//! what v1 cannot say travels in annotations: the other metrics, the
//! behavior, the current metrics and the conditions, so a v2 object read
//! and written back as v1 keeps them. The annotations hold the v2 shapes
//! (kube's hold its older alpha shapes).

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{json, Map, Value};

use crate::registry::conversion::{Conversion, ConversionError, Converter};

pub const V1: &str = "autoscaling/v1";
pub const V2: &str = "autoscaling/v2";
const METRICS: &str = "autoscaling.alpha.kubernetes.io/metrics";
const CURRENT_METRICS: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
const CONDITIONS: &str = "autoscaling.alpha.kubernetes.io/conditions";
const BEHAVIOR: &str = "autoscaling.alpha.kubernetes.io/behavior";

/// How both versions are stored: as v2, converted by [`HpaVersions`].
pub fn conversion() -> Conversion {
    Conversion {
        storage_version: "v2",
        converter: Arc::new(HpaVersions),
    }
}

/// Converts between autoscaling/v1 and autoscaling/v2.
pub struct HpaVersions;

impl Converter for HpaVersions {
    fn convert<'a>(
        &'a self,
        objects: Vec<Value>,
        api_version: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Value>, ConversionError>> {
        let converted = objects
            .into_iter()
            .map(|o| match (o["apiVersion"].as_str(), api_version) {
                (Some(from), to) if from == to => Ok(o),
                (Some(V2), V1) => Ok(to_v1(o)),
                (Some(V1), V2) => Ok(to_v2(o)),
                (from, to) => Err(ConversionError(format!(
                    "no conversion from {} to {to} for HorizontalPodAutoscaler",
                    from.unwrap_or("")
                ))),
            })
            .collect();
        Box::pin(async move { converted })
    }
}

fn annotations(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj["metadata"]["annotations"].is_object() {
        obj["metadata"]["annotations"] = json!({});
    }
    obj["metadata"]["annotations"]
        .as_object_mut()
        .expect("an object")
}

/// Puts `value` (when not empty) in the annotation `name` as JSON text.
fn stash(obj: &mut Value, name: &str, value: &Value) {
    let empty = value.is_null() || value.as_array().is_some_and(|a| a.is_empty());
    if !empty {
        annotations(obj).insert(name.into(), value.to_string().into());
    }
}

/// Takes the annotation `name` out, parsed.
fn unstash(obj: &mut Value, name: &str) -> Option<Value> {
    let text = annotations(obj).remove(name)?;
    serde_json::from_str(text.as_str()?).ok()
}

fn drop_empty_annotations(obj: &mut Value) {
    if obj["metadata"]["annotations"]
        .as_object()
        .is_some_and(|a| a.is_empty())
    {
        if let Some(meta) = obj["metadata"].as_object_mut() {
            meta.remove("annotations");
        }
    }
}

fn is_cpu(metric: &Value, value: &str) -> bool {
    metric["type"] == "Resource"
        && metric["resource"]["name"] == "cpu"
        && metric["resource"][value]["averageUtilization"].is_i64()
}

/// The v2 object as v1.
pub fn to_v1(v2: Value) -> Value {
    let mut v1 = json!({"apiVersion": V1, "kind": v2["kind"], "metadata": v2["metadata"]});
    let spec = &v2["spec"];
    v1["spec"] =
        json!({"scaleTargetRef": spec["scaleTargetRef"], "maxReplicas": spec["maxReplicas"]});
    if !spec["minReplicas"].is_null() {
        v1["spec"]["minReplicas"] = spec["minReplicas"].clone();
    }
    let metrics = spec["metrics"].as_array().cloned().unwrap_or_default();
    let (cpu, others): (Vec<Value>, Vec<Value>) =
        metrics.into_iter().partition(|m| is_cpu(m, "target"));
    if let Some(cpu) = cpu.first() {
        v1["spec"]["targetCPUUtilizationPercentage"] =
            cpu["resource"]["target"]["averageUtilization"].clone();
    }
    stash(&mut v1, METRICS, &json!(others));
    stash(&mut v1, BEHAVIOR, &spec["behavior"]);
    let status = &v2["status"];
    if status.is_object() {
        v1["status"] = status_to_v1(&mut v1, status);
    }
    drop_empty_annotations(&mut v1);
    v1
}

fn status_to_v1(v1: &mut Value, status: &Value) -> Value {
    let mut out = json!({"currentReplicas": status["currentReplicas"].as_i64().unwrap_or(0),
                         "desiredReplicas": status["desiredReplicas"].as_i64().unwrap_or(0)});
    for field in ["observedGeneration", "lastScaleTime"] {
        if !status[field].is_null() {
            out[field] = status[field].clone();
        }
    }
    let current = status["currentMetrics"].as_array().cloned();
    let (cpu, others): (Vec<Value>, Vec<Value>) = current
        .unwrap_or_default()
        .into_iter()
        .partition(|m| is_cpu(m, "current"));
    if let Some(cpu) = cpu.first() {
        out["currentCPUUtilizationPercentage"] =
            cpu["resource"]["current"]["averageUtilization"].clone();
    }
    stash(v1, CURRENT_METRICS, &json!(others));
    stash(v1, CONDITIONS, &status["conditions"]);
    out
}

/// The v1 object as v2.
pub fn to_v2(mut v1: Value) -> Value {
    let others = unstash(&mut v1, METRICS);
    let behavior = unstash(&mut v1, BEHAVIOR);
    let current = unstash(&mut v1, CURRENT_METRICS);
    let conditions = unstash(&mut v1, CONDITIONS);
    drop_empty_annotations(&mut v1);
    let spec = &v1["spec"];
    let mut v2 = json!({"apiVersion": V2, "kind": v1["kind"], "metadata": v1["metadata"],
        "spec": {"scaleTargetRef": spec["scaleTargetRef"], "maxReplicas": spec["maxReplicas"]}});
    if !spec["minReplicas"].is_null() {
        v2["spec"]["minReplicas"] = spec["minReplicas"].clone();
    }
    let mut metrics = Vec::new();
    if let Some(cpu) = spec["targetCPUUtilizationPercentage"].as_i64() {
        metrics.push(json!({"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": cpu}}}));
    }
    metrics.extend(
        others
            .and_then(|o| o.as_array().cloned())
            .unwrap_or_default(),
    );
    if !metrics.is_empty() {
        v2["spec"]["metrics"] = json!(metrics);
    }
    if let Some(behavior) = behavior {
        v2["spec"]["behavior"] = behavior;
    }
    let status = &v1["status"];
    if status.is_object() {
        let mut out = json!({"desiredReplicas": status["desiredReplicas"].as_i64().unwrap_or(0)});
        for field in ["observedGeneration", "lastScaleTime", "currentReplicas"] {
            if !status[field].is_null() {
                out[field] = status[field].clone();
            }
        }
        let mut current_metrics = Vec::new();
        if let Some(cpu) = status["currentCPUUtilizationPercentage"].as_i64() {
            current_metrics.push(json!({"type": "Resource", "resource": {"name": "cpu",
                "current": {"averageUtilization": cpu}}}));
        }
        current_metrics.extend(
            current
                .and_then(|c| c.as_array().cloned())
                .unwrap_or_default(),
        );
        if !current_metrics.is_empty() {
            out["currentMetrics"] = json!(current_metrics);
        }
        if let Some(conditions) = conditions {
            out["conditions"] = conditions;
        }
        v2["status"] = out;
    }
    v2
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2() -> Value {
        json!({"apiVersion": V2, "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "ns", "annotations": {"keep": "me"}},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "minReplicas": 1, "maxReplicas": 5,
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}},
                                 {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}}],
                     "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}},
            "status": {"currentReplicas": 2, "desiredReplicas": 3,
                       "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 42}}}],
                       "conditions": [{"type": "AbleToScale", "status": "True"}]}})
    }

    #[test]
    fn cpu_utilization_is_v1s_target_and_the_rest_rides_in_annotations() {
        let v1 = to_v1(v2());
        assert_eq!(v1["apiVersion"], V1);
        assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 60);
        assert_eq!(v1["spec"]["maxReplicas"], 5);
        assert_eq!(v1["status"]["currentCPUUtilizationPercentage"], 42);
        assert_eq!(v1["status"]["desiredReplicas"], 3);
        let notes = &v1["metadata"]["annotations"];
        assert_eq!(notes["keep"], "me");
        assert!(notes[METRICS].as_str().unwrap().contains("memory"));
        assert!(notes[BEHAVIOR]
            .as_str()
            .unwrap()
            .contains("stabilizationWindowSeconds"));
        assert!(notes[CONDITIONS].as_str().unwrap().contains("AbleToScale"));
        assert!(v1["spec"].get("metrics").is_none());
    }

    #[test]
    fn v2_read_as_v1_and_back_is_the_same_object() {
        assert_eq!(to_v2(to_v1(v2())), v2());
    }

    #[test]
    fn a_v1_object_without_a_target_has_no_metrics_in_v2() {
        let v1 = json!({"apiVersion": V1, "kind": "HorizontalPodAutoscaler", "metadata": {"name": "a"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "a"}, "maxReplicas": 3}});
        let v2 = to_v2(v1);
        assert!(v2["spec"].get("metrics").is_none());
        assert!(v2["metadata"].get("annotations").is_none());
    }
}
