//! autoscaling/v2 HorizontalPodAutoscaler (v1 in `autoscaling_v1.rs`) and policy/v1
//! PodDisruptionBudget: the objects that bound how many pods run.

use std::sync::Arc;

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde_json::{json, Value};

use super::super::strategy::{age_cell, Column, ResourceDef, Strategy, AGE};
use super::common::{self, check_enum, items};
use super::default_at;
use super::simple::{simple, versioned, Simple};
use crate::error::Cause;

pub fn all() -> Vec<Arc<dyn Strategy>> {
    vec![Arc::new(autoscalers()), Arc::new(disruption_budgets())]
}

pub(super) fn hpa_def() -> ResourceDef {
    ResourceDef {
        short_names: &["hpa"],
        categories: &["all"],
        status: true,
        ..versioned(
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
        // autoscaling/v1 is served over it (`autoscaling_v1.rs`).
        conversion: Some(super::hpa_conversion::conversion),
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
    for (rules, window, policies) in [("scaleUp", 0, up), ("scaleDown", 300, down)] {
        let path = |field| ["spec", "behavior", rules, field];
        default_at(obj, &path("stabilizationWindowSeconds"), json!(window));
        default_at(obj, &path("selectPolicy"), json!("Max"));
        default_at(obj, &path("policies"), policies);
    }
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
        causes.push(common::invalid(
            "spec.minReplicas",
            &spec["minReplicas"],
            why,
        ));
    }
    if max < 1 {
        causes.push(common::invalid(
            "spec.maxReplicas",
            &json!(max),
            "must be greater than 0",
        ));
    } else if min.is_some_and(|m| max < m) {
        let why = "must be greater than or equal to `minReplicas`";
        causes.push(common::invalid("spec.maxReplicas", &json!(max), why));
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
        return vec![common::unsupported(
            format!("{path}.type"),
            &metric["type"],
            &allowed,
        )];
    };
    if !metric[*source].is_object() {
        return vec![common::required(
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

fn disruption_budgets() -> Simple<PodDisruptionBudget> {
    Simple {
        columns: pdb_columns,
        cells: pdb_cells,
        validate: validate_pdb,
        // The v1 status fields are required.
        on_create: |o| {
            o["status"] = json!({"currentHealthy": 0, "desiredHealthy": 0,
                                 "disruptionsAllowed": 0, "expectedPods": 0})
        },
        ..simple(ResourceDef {
            short_names: &["pdb"],
            status: true,
            ..versioned(
                "policy",
                "v1",
                "poddisruptionbudgets",
                "PodDisruptionBudget",
                "poddisruptionbudget",
            )
        })
    }
}

fn validate_pdb(obj: &Value) -> Vec<Cause> {
    let spec = &obj["spec"];
    let mut causes = Vec::new();
    if !spec["minAvailable"].is_null() && !spec["maxUnavailable"].is_null() {
        causes.push(common::invalid(
            "spec",
            &Value::from(spec.to_string()),
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
    for field in ["minAvailable", "maxUnavailable"] {
        causes.extend(int_or_percent_cause(&spec[field], &format!("spec.{field}")));
    }
    check_enum(
        spec,
        "/unhealthyPodEvictionPolicy",
        "spec.unhealthyPodEvictionPolicy",
        &["IfHealthyBudget", "AlwaysAllow"],
        &mut causes,
    );
    causes
}

/// ValidatePositiveIntOrPercent, and no more than 100%.
fn int_or_percent_cause(value: &Value, field: &str) -> Option<Cause> {
    match value {
        Value::Number(n) if n.as_i64().is_some_and(|n| n < 0) => Some(common::invalid(
            field,
            value,
            "must be greater than or equal to 0",
        )),
        Value::String(s) => {
            let digits = s
                .strip_suffix('%')
                .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
            match digits.map(str::parse::<u64>) {
                None => Some(common::invalid(field, value, "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")),
                Some(Ok(p)) if p <= 100 => None,
                Some(_) => Some(common::invalid(field, value, "must not be greater than 100%")),
            }
        }
        _ => None,
    }
}

fn pdb_columns() -> Vec<Column> {
    vec![
        Column::new(
            "Min Available",
            "string",
            "The minimum number of pods that must be available.",
        ),
        Column::new(
            "Max Unavailable",
            "string",
            "The maximum number of pods that may be unavailable.",
        ),
        Column::new(
            "Allowed Disruptions",
            "integer",
            "Calculated number of pods that may be disrupted at this time.",
        ),
        AGE,
    ]
}

fn pdb_cells(obj: &Value) -> Vec<Value> {
    let shown = |v: &Value| match v {
        Value::Null => "N/A".to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let spec = &obj["spec"];
    vec![
        shown(&spec["minAvailable"]).into(),
        shown(&spec["maxUnavailable"]).into(),
        obj["status"]["disruptionsAllowed"]
            .as_i64()
            .unwrap_or(0)
            .into(),
        age_cell(obj),
    ]
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

    #[test]
    fn pdb_counts_and_percentages() {
        let pdb = |spec: Value| json!({"metadata": {"name": "p"}, "spec": spec});
        assert!(validate_pdb(&pdb(json!({"minAvailable": "50%"}))).is_empty());
        let both = validate_pdb(&pdb(json!({"minAvailable": 1, "maxUnavailable": 1})));
        assert_eq!(both[0].field, "spec");
        let bad = validate_pdb(&pdb(json!({"maxUnavailable": "150%"})));
        assert_eq!(
            bad[0].message,
            "Invalid value: \"150%\": must not be greater than 100%"
        );
        let mut obj = pdb(json!({"minAvailable": 2}));
        disruption_budgets().prepare_for_create(&mut obj);
        assert_eq!(pdb_cells(&obj)[..3], [json!("2"), json!("N/A"), json!(0)]);
    }
}
