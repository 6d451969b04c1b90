//! core/v1 Node: cluster-scoped, with a status kubectl reads as Ready,
//! NotReady or Unknown.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use serde_json::Value;

use crate::registry::definition::ResourceDef;
use crate::registry::kinds::common::simple::{def, simple, Simple};
use crate::registry::strategy::{age_cell, Column, Strategy, AGE};
use crate::registry::subresource::STATUS;

pub fn nodes() -> Arc<dyn Strategy> {
    Arc::new(Simple::<Node> {
        def: ResourceDef {
            namespaced: false,
            short_names: &["no"],
            subresources: &[STATUS],
            ..def("", "nodes", "Node", "node")
        },
        columns: || {
            vec![
                Column::new("Status", "string", "The status of the node"),
                AGE,
            ]
        },
        cells: |o| vec![node_status(o).into(), age_cell(o)],
        fields: &[("spec.unschedulable", "/spec/unschedulable")],
        ..simple(def("", "nodes", "Node", "node"))
    })
}

fn node_status(node: &Value) -> String {
    let conditions = node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten();
    let ready = conditions
        .filter(|c| c["type"] == "Ready")
        .map(|c| c["status"] == "True")
        .next();
    let status = match ready {
        Some(true) => "Ready",
        Some(false) => "NotReady",
        None => "Unknown",
    };
    // A cordoned node says so, as kubectl's printer shows it.
    match node["spec"]["unschedulable"] == true {
        true => format!("{status},SchedulingDisabled"),
        false => status.into(),
    }
}
