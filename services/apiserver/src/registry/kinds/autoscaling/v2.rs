//! autoscaling/v2 HorizontalPodAutoscaler, the stored version (v1 in
//! `v1.rs`): scales a workload between bounds on its metrics.

use std::sync::Arc;

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use serde_json::{json, Value};

use crate::error::Cause;
use crate::registry::definition::ResourceDef;
use crate::registry::kinds::common::defaults::default_at;
use crate::registry::kinds::common::simple::{simple, Simple};
use crate::registry::kinds::common::validation::{self, check_enum, items};
use crate::registry::strategy::{age_cell, Column, Strategy, AGE};
use crate::registry::subresource::STATUS;

pub fn all() -> Vec<Arc<dyn Strategy>> {
    vec![Arc::new(autoscalers())]
}

pub(super) fn hpa_def() -> ResourceDef {
    ResourceDef {
        short_names: &["hpa"],
        categories: &["all"],
        subresources: &[STATUS],
        ..ResourceDef::new(
            "autoscaling",
            "v2",
            "horizontalpodautoscalers",
            "HorizontalPodAutoscaler",
            "horizontalpodautoscaler",
        )
    }
}

fn autoscalers() -> Simple<HorizontalPodAutoscaler> {
    Simple {
        columns: hpa_columns,
        cells: hpa_cells,
        validate: validate_hpa,
        defaults: hpa_defaults,
        // desiredReplicas is a required field of the v2 status.
        on_create: |o| o["status"] = json!({"desiredReplicas": 0}),
        // autoscaling/v1 is served over it (`v1.rs`).
        conversion: Some(crate::registry::kinds::autoscaling::conversion::conversion),
        ..simple(hpa_def())
    }
}

/// autoscaling/v2 defaults: one replica at least, 80% CPU when no metric
/// is given, and the default scaling rules filled into a given behavior.
fn hpa_defaults(obj: &mut Value) {
    default_at(obj, &["spec", "minReplicas"], json!(1));
    if items(&obj["spec"]["metrics"]).next().is_none() {
        obj["spec"]["metrics"] = json!([{"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": 80}}}]);
    }
    if !obj["spec"]["behavior"].is_object() {
        return;
    }
    let up = json!([{"type": "Pods", "value": 4, "periodSeconds": 15},
                    {"type": "Percent", "value": 100, "periodSeconds": 15}]);
    let down = json!([{"type": "Percent", "value": 100, "periodSeconds": 15}]);
    for (rules, policies) in [("scaleUp", up), ("scaleDown", down)] {
        let path = |field| ["spec", "behavior", rules, field];
        default_at(obj, &path("selectPolicy"), json!("Max"));
        default_at(obj, &path("policies"), policies);
    }
    // Scaling down keeps no window of its own unless given one: the
    // controller's --horizontal-pod-autoscaler-downscale-stabilization
    // applies, as in kube.
    let up_window = ["spec", "behavior", "scaleUp", "stabilizationWindowSeconds"];
    default_at(obj, &up_window, json!(0));
}

pub(super) fn validate_hpa(obj: &Value) -> Vec<Cause> {
    let spec = &obj["spec"];
    let mut causes = Vec::new();
    for field in ["kind", "name"] {
        if spec["scaleTargetRef"][field]
            .as_str()
            .is_none_or(str::is_empty)
        {
            causes.push(Cause::required(format!("spec.scaleTargetRef.{field}")));
        }
    }
    let min = spec["minReplicas"].as_i64();
    let max = spec["maxReplicas"].as_i64().unwrap_or(0);
    if min.is_some_and(|m| m < 1) {
        let why = "must be greater than or equal to 1";
        causes.push(validation::invalid(
            "spec.minReplicas",
            &spec["minReplicas"],
            why,
        ));
    }
    if max < 1 {
        causes.push(validation::invalid(
            "spec.maxReplicas",
            &json!(max),
            "must be greater than 0",
        ));
    } else if min.is_some_and(|m| max < m) {
        let why = "must be greater than or equal to `minReplicas`";
        causes.push(validation::invalid("spec.maxReplicas", &json!(max), why));
    }
    for (i, metric) in items(&spec["metrics"]) {
        causes.extend(metric_causes(metric, &format!("spec.metrics[{i}]")));
    }
    causes
}

const METRIC_SOURCES: [(&str, &str); 5] = [
    ("ContainerResource", "containerResource"),
    ("External", "external"),
    ("Object", "object"),
    ("Pods", "pods"),
    ("Resource", "resource"),
];

/// A known type whose source is filled in, with a target of a known type.
fn metric_causes(metric: &Value, path: &str) -> Vec<Cause> {
    let kind = metric["type"].as_str().unwrap_or("");
    let Some((_, source)) = METRIC_SOURCES.iter().find(|(t, _)| *t == kind) else {
        let allowed: Vec<&str> = METRIC_SOURCES.iter().map(|(t, _)| *t).collect();
        return vec![validation::unsupported(
            format!("{path}.type"),
            &metric["type"],
            &allowed,
        )];
    };
    if !metric[*source].is_object() {
        return vec![validation::required(
            format!("{path}.{source}"),
            "must populate information for the given metric source",
        )];
    }
    let mut causes = Vec::new();
    check_enum(
        &metric[*source],
        "/target/type",
        &format!("{path}.{source}.target.type"),
        &["AverageValue", "Utilization", "Value"],
        &mut causes,
    );
    causes
}

pub(super) fn hpa_columns() -> Vec<Column> {
    vec![
        Column::new("Reference", "string", "scaleTargetRef points to the target resource to scale."),
        Column::new("Targets", "string", "metrics contains the specifications for which to use to calculate the desired replica count."),
        Column::new("MinPods", "string", "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down."),
        Column::new("MaxPods", "string", "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up."),
        Column::new("Replicas", "string", "currentReplicas is current number of replicas of pods managed by this autoscaler."),
        AGE,
    ]
}

pub(super) fn hpa_cells(obj: &Value) -> Vec<Value> {
    let spec = &obj["spec"];
    let target = &spec["scaleTargetRef"];
    let reference = format!(
        "{}/{}",
        target["kind"].as_str().unwrap_or(""),
        target["name"].as_str().unwrap_or("")
    );
    let min = match spec["minReplicas"].as_i64() {
        Some(m) => m.to_string(),
        None => "<unset>".into(),
    };
    vec![
        reference.into(),
        hpa_targets(obj).into(),
        min.into(),
        spec["maxReplicas"].as_i64().unwrap_or(0).into(),
        obj["status"]["currentReplicas"]
            .as_i64()
            .unwrap_or(0)
            .into(),
        age_cell(obj),
    ]
}

/// formatHPAMetrics: the first two metrics as `current/target`.
fn hpa_targets(obj: &Value) -> String {
    let specs: Vec<&Value> = items(&obj["spec"]["metrics"]).map(|(_, m)| m).collect();
    if specs.is_empty() {
        return "<none>".into();
    }
    let statuses = &obj["status"]["currentMetrics"];
    let list: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| metric_target(spec, &statuses[i]))
        .collect();
    let shown = list[..list.len().min(2)].join(", ");
    match list.len() {
        n if n > 2 => format!("{shown} + {} more...", n - 2),
        _ => shown,
    }
}

fn quantity(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "<unknown>".into(),
        other => other.to_string(),
    }
}

fn metric_target(spec: &Value, status: &Value) -> String {
    let kind = spec["type"].as_str().unwrap_or("");
    let Some((_, source)) = METRIC_SOURCES.iter().find(|(t, _)| *t == kind) else {
        return "<unknown type>".into();
    };
    let (spec, current) = (&spec[*source], &status[*source]["current"]);
    let target = &spec["target"];
    let named = matches!(*source, "resource" | "containerResource");
    let pair = if !target["averageValue"].is_null() || *source == "pods" {
        let avg = if named || *source == "pods" {
            ""
        } else {
            " (avg)"
        };
        format!(
            "{}/{}{avg}",
            quantity(&current["averageValue"]),
            quantity(&target["averageValue"])
        )
    } else if named {
        let percent = |v: &Value| v.as_i64().map(|p| format!("{p}%"));
        format!(
            "{}/{}",
            percent(&current["averageUtilization"]).unwrap_or("<unknown>".into()),
            percent(&target["averageUtilization"]).unwrap_or("<auto>".into())
        )
    } else {
        format!(
            "{}/{}",
            quantity(&current["value"]),
            quantity(&target["value"])
        )
    };
    if named {
        format!("{}: {pair}", spec["name"].as_str().unwrap_or(""))
    } else {
        pair
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hpa(spec: Value) -> Value {
        let mut obj = json!({"metadata": {"name": "web"}, "spec": spec});
        autoscalers().prepare_for_create(&mut obj);
        obj
    }

    #[test]
    fn hpa_defaults_and_columns() {
        let obj = hpa(
            json!({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                             "maxReplicas": 5}),
        );
        assert!(validate_hpa(&obj).is_empty());
        let cells = hpa_cells(&obj);
        assert_eq!(
            cells[..5],
            [
                json!("Deployment/web"),
                json!("cpu: <unknown>/80%"),
                json!("1"),
                json!(5),
                json!(0)
            ]
        );
        let obj = hpa(
            json!({"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5,
            "metrics": [{"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "500Mi"}}},
                        {"type": "Pods", "pods": {"metric": {"name": "rps"}, "target": {"type": "AverageValue", "averageValue": "1k"}}},
                        {"type": "External", "external": {"metric": {"name": "q"}, "target": {"type": "Value", "value": "30"}}}],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}),
        );
        assert_eq!(
            hpa_targets(&obj),
            "memory: <unknown>/500Mi, <unknown>/1k + 1 more..."
        );
        assert_eq!(
            obj["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"],
            60
        );
        assert_eq!(obj["spec"]["behavior"]["scaleUp"]["selectPolicy"], "Max");
        assert_eq!(
            obj["spec"]["behavior"]["scaleUp"]["stabilizationWindowSeconds"],
            0
        );
        let obj = hpa(
            json!({"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5,
                             "behavior": {}}),
        );
        let down = &obj["spec"]["behavior"]["scaleDown"];
        assert!(down["stabilizationWindowSeconds"].is_null(), "{down}");
        assert_eq!(down["policies"][0]["type"], "Percent");
    }

    #[test]
    fn hpa_bounds_and_target_are_checked() {
        let obj = hpa(
            json!({"scaleTargetRef": {"kind": "Deployment"}, "minReplicas": 3, "maxReplicas": 2,
                             "metrics": [{"type": "Resource"}]}),
        );
        let messages: Vec<String> = validate_hpa(&obj)
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        assert_eq!(
            messages,
            [
                "spec.scaleTargetRef.name: Required value",
                "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`",
                "spec.metrics[0].resource: Required value: must populate information for the given metric source",
            ]
        );
    }
}
