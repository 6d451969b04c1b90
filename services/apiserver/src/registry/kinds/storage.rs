//! storage.k8s.io/v1 StorageClass: a provisioner and its parameters,
//! fixed once volumes may have been made from them.

use std::sync::Arc;

use k8s_openapi::api::storage::v1::StorageClass;
use serde_json::{json, Value};

use crate::error::Cause;
use crate::registry::definition::ResourceDef;
use crate::registry::kinds::common::defaults::default_at;
use crate::registry::kinds::common::simple::{simple, Simple};
use crate::registry::kinds::common::validation::{self, check_enum, immutable};
use crate::registry::strategy::{age_cell, Column, Strategy, AGE};

pub fn all() -> Vec<Arc<dyn Strategy>> {
    vec![Arc::new(Simple::<StorageClass> {
        columns,
        cells,
        validate,
        validate_update,
        name_cell: default_marked,
        defaults: |o| {
            default_at(o, &["reclaimPolicy"], json!("Delete"));
            default_at(o, &["volumeBindingMode"], json!("Immediate"));
        },
        ..simple(ResourceDef {
            namespaced: false,
            short_names: &["sc"],
            ..crate::registry::kinds::common::simple::def(
                "storage.k8s.io",
                "storageclasses",
                "StorageClass",
                "storageclass",
            )
        })
    })]
}

/// kubectl shows the default class as `<name> (default)`.
fn default_marked(obj: &Value) -> Value {
    let name = obj["metadata"]["name"].as_str().unwrap_or("");
    let annotations = &obj["metadata"]["annotations"];
    let default = [
        "storageclass.kubernetes.io/is-default-class",
        "storageclass.beta.kubernetes.io/is-default-class",
    ]
    .iter()
    .any(|a| annotations[*a] == "true");
    match default {
        true => format!("{name} (default)").into(),
        false => name.into(),
    }
}

fn validate(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    if obj["provisioner"].as_str().is_none_or(str::is_empty) {
        causes.push(Cause::required("provisioner"));
    }
    check_enum(
        obj,
        "/reclaimPolicy",
        "reclaimPolicy",
        &["Delete", "Retain"],
        &mut causes,
    );
    let modes = ["Immediate", "WaitForFirstConsumer"];
    check_enum(
        obj,
        "/volumeBindingMode",
        "volumeBindingMode",
        &modes,
        &mut causes,
    );
    causes
}

/// ValidateStorageClassUpdate: what provisioned volumes were made with
/// stays as it was.
fn validate_update(new: &Value, old: &Value) -> Vec<Cause> {
    let mut causes: Vec<Cause> = ["parameters", "provisioner", "reclaimPolicy"]
        .into_iter()
        .filter(|field| changed(&new[*field], &old[*field]))
        .map(|field| Cause::forbidden(field, format!("updates to {field} are forbidden.")))
        .collect();
    causes.extend(immutable(
        new,
        old,
        "/volumeBindingMode",
        "volumeBindingMode",
    ));
    causes
}

/// Different, counting an absent value and an empty map as the same.
fn changed(new: &Value, old: &Value) -> bool {
    let empty = |v: &Value| v.is_null() || v.as_object().is_some_and(|m| m.is_empty());
    new != old && !(empty(new) && empty(old))
}

fn columns() -> Vec<Column> {
    vec![
        Column::new("Provisioner", "string", "provisioner indicates the type of the provisioner."),
        Column::new("ReclaimPolicy", "string", "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class."),
        Column::new("VolumeBindingMode", "string", "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound."),
        Column::new("AllowVolumeExpansion", "string", "allowVolumeExpansion shows whether the storage class allow volume expand."),
        AGE,
    ]
}

fn cells(obj: &Value) -> Vec<Value> {
    vec![
        obj["provisioner"].clone(),
        validation::text(obj, "/reclaimPolicy").into(),
        validation::text(obj, "/volumeBindingMode").into(),
        obj["allowVolumeExpansion"]
            .as_bool()
            .unwrap_or(false)
            .into(),
        age_cell(obj),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(provisioner: &str, parameters: Value) -> Value {
        let mut obj = json!({"metadata": {"name": "fast"}, "provisioner": provisioner, "parameters": parameters});
        default_at(&mut obj, &["reclaimPolicy"], json!("Delete"));
        default_at(&mut obj, &["volumeBindingMode"], json!("Immediate"));
        obj
    }

    #[test]
    fn provisioner_is_required_and_policies_known() {
        assert!(validate(&class("ebs.csi.aws.com", json!({"type": "gp3"}))).is_empty());
        assert_eq!(
            validate(&class("", Value::Null)),
            [Cause::required("provisioner")]
        );
        let mut obj = class("p", Value::Null);
        obj["reclaimPolicy"] = "Recycle".into();
        assert_eq!(validate(&obj)[0].field, "reclaimPolicy");
        assert_eq!(
            cells(&obj)[..4],
            [
                json!("p"),
                json!("Recycle"),
                json!("Immediate"),
                json!(false)
            ]
        );
    }

    #[test]
    fn parameters_and_provisioner_are_fixed() {
        let old = class("ebs.csi.aws.com", json!({"type": "gp3"}));
        let new = class("ebs.csi.aws.com", json!({"type": "io2"}));
        let causes = validate_update(&new, &old);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "parameters");
        assert_eq!(
            causes[0].message,
            "Forbidden: updates to parameters are forbidden."
        );
        let mut labelled = old.clone();
        labelled["metadata"]["labels"] = json!({"tier": "fast"});
        assert!(validate_update(&labelled, &old).is_empty());
        assert!(validate_update(&class("p", json!({})), &class("p", Value::Null)).is_empty());
    }
}
