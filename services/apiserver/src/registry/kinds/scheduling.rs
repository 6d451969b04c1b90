//! scheduling.k8s.io/v1 PriorityClass: a value pods take by name, fixed
//! once pods may carry it.

use std::sync::Arc;

use k8s_openapi::api::scheduling::v1::PriorityClass;
use serde_json::{json, Value};

use crate::error::Cause;
use crate::registry::definition::ResourceDef;
use crate::registry::kinds::common::defaults::default_at;
use crate::registry::kinds::common::simple::{simple, Simple};
use crate::registry::kinds::common::validation::{check_enum, immutable};
use crate::registry::strategy::{age_cell, Column, Strategy, AGE};

/// The highest value a class outside the `system-` ones may have.
const HIGHEST_USER_PRIORITY: i64 = 1_000_000_000;

pub fn all() -> Vec<Arc<dyn Strategy>> {
    vec![Arc::new(Simple::<PriorityClass> {
        columns,
        cells,
        validate,
        validate_update,
        defaults: |o| default_at(o, &["preemptionPolicy"], json!("PreemptLowerPriority")),
        ..simple(ResourceDef {
            namespaced: false,
            short_names: &["pc"],
            ..crate::registry::kinds::common::simple::def(
                "scheduling.k8s.io",
                "priorityclasses",
                "PriorityClass",
                "priorityclass",
            )
        })
    })]
}

fn validate(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let name = obj["metadata"]["name"].as_str().unwrap_or("");
    let value = obj["value"].as_i64().unwrap_or(0);
    if !name.starts_with("system-") && value > HIGHEST_USER_PRIORITY {
        let why =
            format!("maximum allowed value of a user defined priority is {HIGHEST_USER_PRIORITY}");
        causes.push(Cause::forbidden("value", why));
    }
    let policies = ["Never", "PreemptLowerPriority"];
    check_enum(
        obj,
        "/preemptionPolicy",
        "preemptionPolicy",
        &policies,
        &mut causes,
    );
    causes
}

/// Pods already carry the value they were admitted with.
fn validate_update(new: &Value, old: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    if new["value"] != old["value"] {
        causes.push(Cause::forbidden(
            "value",
            "may not be changed in an update.",
        ));
    }
    causes.extend(immutable(new, old, "/preemptionPolicy", "preemptionPolicy"));
    causes
}

fn columns() -> Vec<Column> {
    vec![
        Column::new("Value", "integer", "value represents the integer value of this priority class."),
        Column::new("Global-Default", "boolean", "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class."),
        AGE,
        Column::new("PreemptionPolicy", "string", "preemptionPolicy is the Policy for preempting pods with lower priority."),
    ]
}

fn cells(obj: &Value) -> Vec<Value> {
    vec![
        obj["value"].as_i64().unwrap_or(0).into(),
        obj["globalDefault"].as_bool().unwrap_or(false).into(),
        age_cell(obj),
        obj["preemptionPolicy"].clone(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(value: i64) -> Value {
        json!({"metadata": {"name": "high"}, "value": value, "preemptionPolicy": "PreemptLowerPriority"})
    }

    #[test]
    fn user_values_are_bounded_and_fixed() {
        assert!(validate(&class(1000)).is_empty());
        assert_eq!(validate(&class(2_000_000_000))[0].field, "value");
        let causes = validate_update(&class(2000), &class(1000));
        assert_eq!(
            causes[0].message,
            "Forbidden: may not be changed in an update."
        );
        assert_eq!(cells(&class(7))[..2], [json!(7), json!(false)]);
    }
}
