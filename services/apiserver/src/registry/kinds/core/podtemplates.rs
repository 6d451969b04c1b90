//! core/v1 PodTemplate: a pod template of its own, checked as a pod spec.

use std::sync::Arc;

use k8s_openapi::api::core::v1::PodTemplate;
use serde_json::{json, Value};

use super::pods::strategy::validate_pod_spec;
use super::workload;
use crate::registry::kinds::common::cells;
use crate::registry::kinds::common::simple::{def, simple, Simple};
use crate::registry::strategy::{Column, Strategy};

pub fn pod_templates() -> Arc<dyn Strategy> {
    Arc::new(Simple::<PodTemplate> {
        columns: template_columns,
        cells: template_cells,
        validate: |o| validate_pod_spec(&o["template"]["spec"], "template.spec"),
        ..simple(def("", "podtemplates", "PodTemplate", "podtemplate"))
    })
}

/// A PodTemplate shows its containers and images always, not only wide.
fn template_columns() -> Vec<Column> {
    vec![
        Column {
            priority: 0,
            ..workload::CONTAINERS
        },
        Column {
            priority: 0,
            ..workload::IMAGES
        },
        Column::new("Pod Labels", "string", "The labels for the pod template."),
    ]
}

fn template_cells(obj: &Value) -> Vec<Value> {
    let (containers, images) =
        workload::containers_and_images(&json!({"spec": {"template": obj["template"]}}));
    vec![
        containers,
        images,
        cells::label_map(&obj["template"]["metadata"]["labels"]).into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_show_containers_images_and_labels() {
        let template = json!({"template": {"metadata": {"labels": {"b": "2", "a": "1"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}});
        assert_eq!(
            template_cells(&template),
            [json!("c"), json!("nginx"), json!("a=1,b=2")]
        );
    }
}
