//! What every kind with a pod template shares (ReplicationControllers,
//! the apps kinds, Jobs, PodTemplates): a selector that must match the
//! template, and the template's table columns (their Scale view is
//! `common::scale`).

use serde_json::Value;

use super::pods::strategy::{default_template, validate_pod_spec};
use crate::error::Cause;
use crate::object::selector::LabelSelector;
use crate::registry::definition::ResourceDef;
use crate::registry::kinds::common::scale::selector_string;
use crate::registry::kinds::common::simple::{simple, Simple};
use crate::registry::strategy::{age_cell, Column, AGE};
use crate::registry::subresource::STATUS_AND_SCALE;

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
            let labels = crate::registry::kinds::common::cells::map_string(
                &spec["template"]["metadata"]["labels"],
            );
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

/// A workload that keeps `spec.replicas` copies of its pod template
/// (ReplicationControllers, ReplicaSets, StatefulSets): status and scale,
/// kubectl's Desired/Current/Ready columns, the template's defaults.
pub fn replicated<K>(def: ResourceDef) -> Simple<K> {
    Simple {
        def: ResourceDef {
            subresources: STATUS_AND_SCALE,
            categories: &["all"],
            ..def
        },
        columns: || {
            vec![
                Column::new("Desired", "integer", "Number of desired pods."),
                Column::new("Current", "integer", "Number of actual replicas."),
                Column::new("Ready", "integer", "Number of ready replicas."),
                AGE,
            ]
        },
        cells: |o| {
            vec![
                count(o, "/spec/replicas"),
                count(o, "/status/replicas"),
                count(o, "/status/readyReplicas"),
                age_cell(o),
            ]
        },
        fields: &[("status.replicas", "/status/replicas")],
        validate: |o| validate(o, true),
        defaults: default_template,
        ..simple(def)
    }
}

/// The wide columns of a pod template (`-o wide`): its containers' names
/// and images, as [`containers_and_images`] fills them.
pub const CONTAINERS: Column = Column::wide(
    "Containers",
    "string",
    "Names of each container in the template.",
);
pub const IMAGES: Column = Column::wide(
    "Images",
    "string",
    "Images referenced by each container in the template.",
);
