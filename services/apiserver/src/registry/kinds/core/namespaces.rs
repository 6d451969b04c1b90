//! core/v1 Namespace: cluster-scoped, DNS-1123 label names; deleting one
//! goes Terminating first (the flow removes its contents, then it). Every
//! namespace carries the label `kubernetes.io/metadata.name` equal to its
//! name, set on each create and update, so that selectors (webhooks'
//! and policies' `namespaceSelector`) can name namespaces; nobody can
//! remove or change it.

use k8s_openapi::api::core::v1::Namespace;
use schemars::gen::SchemaGenerator;
use schemars::schema::Schema;
use serde_json::{json, Value};

use crate::error::Cause;
use crate::object::meta::{self, NameRule};
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
        label_with_name(obj);
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        label_with_name(new);
    }

    /// Admission runs after the label is set: a webhook's patch that
    /// removes or changes it is refused.
    fn validate(&self, obj: &Value) -> Vec<Cause> {
        name_label_cause(obj).into_iter().collect()
    }

    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<Cause> {
        name_label_cause(new).into_iter().collect()
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

/// kube's immutable label naming a namespace.
pub const NAME_LABEL: &str = "kubernetes.io/metadata.name";

fn label_with_name(obj: &mut Value) {
    let name = meta::name(obj).to_string();
    let metadata = meta::metadata_mut(obj);
    if !metadata.get("labels").is_some_and(Value::is_object) {
        metadata.insert("labels".into(), json!({}));
    }
    metadata["labels"][NAME_LABEL] = name.into();
}

fn name_label_cause(obj: &Value) -> Option<Cause> {
    let name = meta::name(obj);
    let label = obj["metadata"]["labels"][NAME_LABEL].as_str().unwrap_or("");
    (label != name).then(|| {
        Cause::invalid(
            format!("metadata.labels[{NAME_LABEL}]"),
            label,
            format!("must be the namespace's name, {name:?}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_label_is_set_and_cannot_change() {
        let mut created = json!({"metadata": {"name": "team"}});
        Namespaces.prepare_for_create(&mut created);
        assert_eq!(created["metadata"]["labels"][NAME_LABEL], "team");
        assert!(Namespaces.validate(&created).is_empty());
        let mut changed =
            json!({"metadata": {"name": "team", "labels": {NAME_LABEL: "other", "a": "b"}}});
        Namespaces.prepare_for_update(&mut changed, &created);
        assert_eq!(changed["metadata"]["labels"][NAME_LABEL], "team");
        assert_eq!(changed["metadata"]["labels"]["a"], "b");
        let removed = json!({"metadata": {"name": "team", "labels": {}}});
        assert_eq!(Namespaces.validate_update(&removed, &created).len(), 1);
    }
}
