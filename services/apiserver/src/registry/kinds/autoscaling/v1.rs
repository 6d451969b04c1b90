//! autoscaling/v1 HorizontalPodAutoscaler, served over the autoscaling/v2
//! storage (what `kubectl autoscale` writes), converted by
//! `conversion.rs`.

use k8s_openapi::api::autoscaling::v1::HorizontalPodAutoscaler;
use serde_json::{json, Value};

use crate::error::Cause;
use crate::registry::definition::ResourceDef;
use crate::registry::kinds::autoscaling::conversion::{conversion, to_v2};
use crate::registry::kinds::autoscaling::v2::{hpa_cells, hpa_columns, hpa_def, validate_hpa};
use crate::registry::kinds::common::defaults::default_at;
use crate::registry::kinds::common::simple::{simple, Simple};
use crate::registry::kinds::common::validation;

pub fn autoscalers_v1() -> Simple<HorizontalPodAutoscaler> {
    Simple {
        columns: hpa_columns,
        cells: |o| hpa_cells(&to_v2(o.clone())),
        validate: validate_v1,
        defaults: |o| default_at(o, &["spec", "minReplicas"], json!(1)),
        on_create: |o| o["status"] = json!({"currentReplicas": 0, "desiredReplicas": 0}),
        conversion: Some(conversion),
        ..simple(ResourceDef {
            version: "v1",
            ..hpa_def()
        })
    }
}

/// v1 is checked as the v2 object it stands for (kube validates the
/// internal form, so its causes name the v2 fields too).
fn validate_v1(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    if let Some(cpu) = obj["spec"]["targetCPUUtilizationPercentage"].as_i64() {
        if cpu < 1 {
            let field = "spec.targetCPUUtilizationPercentage";
            causes.push(validation::invalid(
                field,
                &json!(cpu),
                "must be greater than 0",
            ));
        }
    }
    if !causes.is_empty() {
        return causes;
    }
    validate_hpa(&to_v2(obj.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::kinds::autoscaling::conversion::V1;

    #[test]
    fn v1_is_validated_with_its_own_field_first() {
        let hpa = |cpu: i64| {
            json!({"apiVersion": V1, "metadata": {"name": "a"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "a"}, "maxReplicas": 3,
                     "targetCPUUtilizationPercentage": cpu}})
        };
        let causes = validate_v1(&hpa(0));
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec.targetCPUUtilizationPercentage");
        assert!(validate_v1(&hpa(60)).is_empty());
    }
}
