//! apps/v1 Deployment: defaults as the apps/v1 defaulter sets them.

use k8s_openapi::api::apps::v1::Deployment;
use schemars::gen::SchemaGenerator;
use schemars::schema::Schema;
use serde_json::{json, Value};

use crate::error::Cause;
use crate::registry::definition::ResourceDef;
use crate::registry::kinds::common::defaults::default_at;
use crate::registry::kinds::common::scale;
use crate::registry::kinds::core::workload;
use crate::registry::strategy::{age_cell, Column, Strategy, AGE};
use crate::registry::subresource::STATUS_AND_SCALE;
use crate::registry::typed::{decode, Decoded};

const DEF: ResourceDef = ResourceDef {
    short_names: &["deploy"],
    categories: &["all"],
    subresources: STATUS_AND_SCALE,
    ..ResourceDef::new("apps", "v1", "deployments", "Deployment", "deployment")
};

pub struct Deployments;

fn defaults(obj: &mut Value) {
    default_at(obj, &["spec", "replicas"], json!(1));
    default_at(obj, &["spec", "revisionHistoryLimit"], json!(10));
    default_at(obj, &["spec", "progressDeadlineSeconds"], json!(600));
    default_at(obj, &["spec", "strategy", "type"], json!("RollingUpdate"));
    crate::registry::kinds::core::pods::strategy::default_template(obj);
    if obj["spec"]["strategy"]["type"] == "RollingUpdate" {
        default_at(
            obj,
            &["spec", "strategy", "rollingUpdate"],
            json!({"maxUnavailable": "25%", "maxSurge": "25%"}),
        );
    }
}

impl Strategy for Deployments {
    fn def(&self) -> &ResourceDef {
        &DEF
    }

    fn scale_of(&self, obj: &Value) -> Option<Value> {
        Some(scale::scale_of(obj))
    }

    fn decode(&self, value: &Value) -> Result<Decoded, String> {
        decode::<Deployment>(value)
    }

    fn schema(&self, generator: &mut SchemaGenerator) -> Schema {
        generator.subschema_for::<Deployment>()
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        defaults(obj);
        obj["status"] = json!({});
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        defaults(new);
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        workload::validate(obj, true)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        let mut causes = self.validate(new);
        causes.extend(workload::validate_update(new, old));
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::new("Ready", "string", "Number of the pod with ready state"),
            Column::new("Up-to-date", "integer", "Total number of non-terminated pods targeted by this deployment that have the desired template spec."),
            Column::new("Available", "integer", "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment."),
            AGE,
            workload::CONTAINERS,
            workload::IMAGES,
            Column::wide("Selector", "string", "Label selector for pods."),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let (containers, images) = workload::containers_and_images(obj);
        vec![
            workload::ready_of(obj).into(),
            workload::count(obj, "/status/updatedReplicas"),
            workload::count(obj, "/status/availableReplicas"),
            age_cell(obj),
            containers,
            images,
            scale::selector_string(&obj["spec"]["selector"]).into(),
        ]
    }
}
