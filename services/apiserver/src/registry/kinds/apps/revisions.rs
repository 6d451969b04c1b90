//! apps/v1 ControllerRevisions: immutable snapshots of a StatefulSet's or
//! DaemonSet's template, numbered, that `kubectl rollout history|undo`
//! reads back.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;
use serde_json::Value;

use crate::error::Cause;
use crate::registry::kinds::common::simple::{def, simple, Simple};
use crate::registry::kinds::common::validation::{self, check_min, immutable};
use crate::registry::strategy::{age_cell, Column, Strategy, AGE};

pub fn controller_revisions() -> Arc<dyn Strategy> {
    Arc::new(Simple::<ControllerRevision> {
        columns: || {
            vec![
                Column::new("Controller", "string", "Controller of the object."),
                Column::new("Revision", "integer", "Revision of the ControllerRevision."),
                AGE,
            ]
        },
        cells: |o| vec![controller_cell(o), o["revision"].clone(), age_cell(o)],
        validate,
        validate_update: |new, old| immutable(new, old, "/data", "data").into_iter().collect(),
        ..simple(def(
            "apps",
            "controllerrevisions",
            "ControllerRevision",
            "controllerrevision",
        ))
    })
}

fn validate(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    if !obj["revision"].is_i64() {
        causes.push(validation::required("revision", "revision is required"));
    }
    check_min(obj, "/revision", "revision", 0, &mut causes);
    causes
}

/// `statefulset.apps/web`, as kubectl prints the controller.
fn controller_cell(obj: &Value) -> Value {
    let references = obj["metadata"]["ownerReferences"].as_array();
    let controller = references
        .into_iter()
        .flatten()
        .find(|r| r["controller"] == Value::Bool(true));
    let Some(reference) = controller else {
        return Value::from("<none>");
    };
    let group = validation::text(reference, "/apiVersion")
        .split_once('/')
        .map_or("", |(group, _)| group);
    let kind = validation::text(reference, "/kind").to_lowercase();
    let name = validation::text(reference, "/name");
    match group {
        "" => format!("{kind}/{name}").into(),
        group => format!("{kind}.{group}/{name}").into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn revisions_are_numbered_and_name_their_controller() {
        let revision = json!({
            "metadata": {"name": "web-1", "ownerReferences": [{"apiVersion": "apps/v1",
                "kind": "StatefulSet", "name": "web", "uid": "u", "controller": true}]},
            "revision": 2,
        });
        assert!(validate(&revision).is_empty());
        assert_eq!(controller_cell(&revision), "statefulset.apps/web");
        assert_eq!(validate(&json!({"revision": -1})).len(), 1);
        assert_eq!(validate(&json!({})).len(), 1);
        let changed = json!({"data": {"spec": {}}, "revision": 3});
        assert_eq!(
            controller_revisions()
                .validate_update(&changed, &json!({"data": {}, "revision": 3}))
                .len(),
            1
        );
    }
}
