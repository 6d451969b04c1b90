//! core/v1 Namespace: cluster-scoped, DNS-1123 label names; deleting one
//! goes Terminating first (the flow removes its contents, then it).

use k8s_openapi::api::core::v1::Namespace;
use schemars::gen::SchemaGenerator;
use schemars::schema::Schema;
use serde_json::{json, Value};

use crate::object::meta::NameRule;
use crate::registry::definition::{Deletion, ResourceDef};
use crate::registry::strategy::{age_cell, Column, Strategy, AGE};
use crate::registry::subresource::STATUS;
use crate::registry::typed::{decode, Decoded};

pub const NAMESPACES: ResourceDef = ResourceDef {
    namespaced: false,
    short_names: &["ns"],
    subresources: &[STATUS],
    name_rule: NameRule::Label,
    deletion: Deletion {
        holds_contents: true,
        ..Deletion::AT_ONCE
    },
    ..ResourceDef::new("", "v1", "namespaces", "Namespace", "namespace")
};

pub struct Namespaces;

impl Strategy for Namespaces {
    fn def(&self) -> &ResourceDef {
        &NAMESPACES
    }

    fn decode(&self, value: &Value) -> Result<Decoded, String> {
        decode::<Namespace>(value)
    }

    fn schema(&self, generator: &mut SchemaGenerator) -> Schema {
        generator.subschema_for::<Namespace>()
    }

    fn prepare_for_delete(&self, marked: &mut Value) {
        marked["status"]["phase"] = "Terminating".into();
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"phase": "Active"});
        if obj["spec"]["finalizers"].is_null() {
            obj["spec"] = json!({"finalizers": ["kubernetes"]});
        }
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::new("Status", "string", "The status of the namespace"),
            AGE,
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        vec![obj["status"]["phase"].clone(), age_cell(obj)]
    }

    fn selectable_fields(&self) -> &'static [(&'static str, &'static str)] {
        &[("status.phase", "/status/phase")]
    }
}
