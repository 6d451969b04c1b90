//! apiextensions.k8s.io/v1 CustomResourceDefinitions: a built-in type
//! whose objects define others. Validation is here; serving what they
//! define and keeping their status is `controllers::crds`' work.

mod selectable;
pub mod status;
mod structural;
mod validation;

pub use status::typed;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use schemars::gen::SchemaGenerator;
use schemars::schema::Schema;
use serde_json::{json, Value};

use crate::error::Cause;
use crate::registry::definition::{Deletion, ResourceDef};
use crate::registry::strategy::{Column, Strategy};
use crate::registry::subresource::STATUS;
use crate::registry::typed::{decode, Decoded};

pub const GROUP: &str = "apiextensions.k8s.io";
pub const RESOURCE: &str = "customresourcedefinitions";

/// Held by a CRD being deleted until its instances are gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

pub struct Crds {
    def: ResourceDef,
}

impl Default for Crds {
    fn default() -> Crds {
        Crds {
            def: ResourceDef {
                namespaced: false,
                short_names: &["crd", "crds"],
                categories: &["api-extensions"],
                subresources: &[STATUS],
                deletion: Deletion {
                    finalizers: &[CLEANUP_FINALIZER],
                    ..Deletion::AT_ONCE
                },
                ..ResourceDef::new(
                    GROUP,
                    "v1",
                    RESOURCE,
                    "CustomResourceDefinition",
                    "customresourcedefinition",
                )
            },
        }
    }
}

/// Adds the storage version to `status.storedVersions`, as kube's strategy does.
fn record_storage_version(obj: &mut Value) {
    let storage = obj["spec"]["versions"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["storage"] == true))
        .and_then(|v| v["name"].as_str())
        .map(str::to_string);
    let Some(storage) = storage else { return };
    if !obj["status"].is_object() {
        obj["status"] = json!({});
    }
    let stored = &mut obj["status"]["storedVersions"];
    if !stored.is_array() {
        *stored = json!([]);
    }
    let list = stored.as_array_mut().expect("an array");
    if !list.iter().any(|v| *v == storage) {
        list.push(storage.into());
    }
}

impl Strategy for Crds {
    fn def(&self) -> &ResourceDef {
        &self.def
    }

    fn decode(&self, value: &Value) -> Result<Decoded, String> {
        decode::<CustomResourceDefinition>(value)
    }

    fn schema(&self, generator: &mut SchemaGenerator) -> Schema {
        generator.subschema_for::<CustomResourceDefinition>()
    }

    /// A new definition starts with no conditions and no accepted names:
    /// the controller accepts them.
    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"acceptedNames": {"plural": "", "kind": ""}, "conditions": []});
        record_storage_version(obj);
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        record_storage_version(new);
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        match typed(obj) {
            Some(crd) => validation::validate(&crd),
            None => vec![Cause::invalid(
                "spec",
                "",
                "does not fit CustomResourceDefinition",
            )],
        }
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        let mut causes = self.validate(new);
        if let (Some(new), Some(old)) = (typed(new), typed(old)) {
            causes.extend(validation::validate_update(&new, &old));
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![Column::new(
            "Created At",
            "date",
            "CreationTimestamp is a timestamp representing the server time when this object was created.",
        )]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        vec![obj["metadata"]["creationTimestamp"].clone()]
    }

    fn prepare_for_delete(&self, marked: &mut Value) {
        status::set_condition(
            marked,
            status::condition(
                "Terminating",
                "True",
                "InstanceDeletionInProgress",
                "CustomResource deletion is in progress",
            ),
        );
    }
}
