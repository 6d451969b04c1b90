//! policy/v1 PodDisruptionBudget: how many of a set of pods may be down
//! at once.

use std::sync::Arc;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde_json::{json, Value};

use crate::error::Cause;
use crate::registry::definition::ResourceDef;
use crate::registry::kinds::common::simple::{simple, Simple};
use crate::registry::kinds::common::validation::{self, check_enum};
use crate::registry::strategy::{age_cell, Column, Strategy, AGE};
use crate::registry::subresource::STATUS;

pub fn all() -> Vec<Arc<dyn Strategy>> {
    vec![Arc::new(disruption_budgets())]
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
            subresources: &[STATUS],
            ..ResourceDef::new(
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
        causes.push(validation::invalid(
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
        Value::Number(n) if n.as_i64().is_some_and(|n| n < 0) => Some(validation::invalid(
            field,
            value,
            "must be greater than or equal to 0",
        )),
        Value::String(s) => {
            let digits = s
                .strip_suffix('%')
                .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
            match digits.map(str::parse::<u64>) {
                None => Some(validation::invalid(field, value, "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")),
                Some(Ok(p)) if p <= 100 => None,
                Some(_) => Some(validation::invalid(field, value, "must not be greater than 100%")),
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
