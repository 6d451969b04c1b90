//! core/v1 PersistentVolumeClaims and PersistentVolumes.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use serde_json::{json, Value};

use crate::error::Cause;
use crate::registry::definition::ResourceDef;
use crate::registry::kinds::common::cells::access_modes;
use crate::registry::kinds::common::defaults::default_at;
use crate::registry::kinds::common::simple::{def, simple, Simple};
use crate::registry::kinds::common::validation::{self, check_enum, items};
use crate::registry::strategy::{age_cell, Column, Strategy, AGE};
use crate::registry::subresource::STATUS;

const ACCESS_MODES: [&str; 4] = [
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];

pub fn all() -> Vec<Arc<dyn Strategy>> {
    vec![Arc::new(claims()), Arc::new(volumes())]
}

fn claims() -> Simple<PersistentVolumeClaim> {
    Simple {
        columns: claim_columns,
        cells: claim_cells,
        validate: validate_claim,
        validate_update: claim_spec_fixed,
        defaults: |o| default_at(o, &["spec", "volumeMode"], json!("Filesystem")),
        // A new claim waits to be bound.
        on_create: |o| o["status"] = json!({"phase": "Pending"}),
        ..simple(ResourceDef {
            short_names: &["pvc"],
            subresources: &[STATUS],
            ..def(
                "",
                "persistentvolumeclaims",
                "PersistentVolumeClaim",
                "persistentvolumeclaim",
            )
        })
    }
}

fn access_mode_causes(modes: &Value, field: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    if items(modes).next().is_none() {
        causes.push(validation::required(
            field,
            "at least 1 access mode is required",
        ));
    }
    for (_, mode) in items(modes) {
        if !mode.as_str().is_some_and(|m| ACCESS_MODES.contains(&m)) {
            causes.push(validation::unsupported(field, mode, &ACCESS_MODES));
        }
    }
    causes
}

fn validate_claim(obj: &Value) -> Vec<Cause> {
    let spec = &obj["spec"];
    let mut causes = access_mode_causes(&spec["accessModes"], "spec.accessModes");
    if spec["resources"]["requests"]["storage"].is_null() {
        causes.push(Cause::required("spec.resources[storage]"));
    }
    check_enum(
        spec,
        "/volumeMode",
        "spec.volumeMode",
        &["Block", "Filesystem"],
        &mut causes,
    );
    causes
}

/// A claim's spec is fixed once made, but for a larger request and the
/// binding of a volume to it.
fn claim_spec_fixed(new: &Value, old: &Value) -> Vec<Cause> {
    let fixed = |obj: &Value, old_spec: &Value| {
        let mut spec = obj["spec"].clone();
        spec["resources"]["requests"] = Value::Null;
        spec["volumeAttributesClassName"] = Value::Null;
        if old_spec["volumeName"].as_str().is_none_or(str::is_empty) {
            spec["volumeName"] = Value::Null;
        }
        spec
    };
    let mut causes = Vec::new();
    if fixed(new, &old["spec"]) != fixed(old, &old["spec"]) {
        causes.push(Cause::forbidden(
            "spec",
            "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
        ));
    }
    let storage = |obj: &Value| {
        obj["spec"]["resources"]["requests"]["storage"]
            .as_str()
            .and_then(crate::object::quantity::parse)
    };
    if let (Some(now), Some(before)) = (storage(new), storage(old)) {
        if now < before {
            causes.push(Cause::forbidden(
                "spec.resources.requests.storage",
                "field can not be less than status.capacity",
            ));
        }
    }
    causes
}

fn claim_columns() -> Vec<Column> {
    vec![
        Column::new(
            "Status",
            "string",
            "phase represents the current phase of PersistentVolumeClaim.",
        ),
        Column::new(
            "Volume",
            "string",
            "volumeName is the binding reference to the PersistentVolume backing this claim.",
        ),
        Column::new(
            "Capacity",
            "string",
            "capacity represents the actual resources of the underlying volume.",
        ),
        Column::new(
            "Access Modes",
            "string",
            "accessModes contains the actual access modes the volume backing the PVC has.",
        ),
        Column::new("StorageClass", "string", "StorageClass of the pvc"),
        Column::new(
            "VolumeAttributesClass",
            "string",
            "VolumeAttributesClass of the pvc",
        ),
        AGE,
        Column::wide(
            "VolumeMode",
            "string",
            "volumeMode defines what type of volume is required by the claim.",
        ),
    ]
}

/// printPersistentVolumeClaim: capacity and modes only once bound.
fn claim_cells(obj: &Value) -> Vec<Value> {
    let (spec, status) = (&obj["spec"], &obj["status"]);
    let bound = spec["volumeName"].as_str().is_some_and(|v| !v.is_empty());
    let (capacity, modes) = if bound {
        (
            validation::text(status, "/capacity/storage").to_string(),
            access_modes(&status["accessModes"]),
        )
    } else {
        (String::new(), String::new())
    };
    vec![
        phase(obj).into(),
        validation::text(spec, "/volumeName").into(),
        capacity.into(),
        modes.into(),
        storage_class(obj).into(),
        text_or(spec, "/volumeAttributesClassName", "<unset>").into(),
        age_cell(obj),
        text_or(spec, "/volumeMode", "<unset>").into(),
    ]
}

fn phase(obj: &Value) -> &str {
    if obj["metadata"]["deletionTimestamp"].is_null() {
        validation::text(obj, "/status/phase")
    } else {
        "Terminating"
    }
}

/// The beta annotation wins over the field, as kubectl reads it.
fn storage_class(obj: &Value) -> &str {
    obj["metadata"]["annotations"]["volume.beta.kubernetes.io/storage-class"]
        .as_str()
        .unwrap_or_else(|| validation::text(obj, "/spec/storageClassName"))
}

fn text_or<'a>(obj: &'a Value, pointer: &str, fallback: &'a str) -> &'a str {
    Some(validation::text(obj, pointer))
        .filter(|t| !t.is_empty())
        .unwrap_or(fallback)
}

fn volumes() -> Simple<PersistentVolume> {
    Simple {
        columns: volume_columns,
        cells: volume_cells,
        validate: validate_volume,
        defaults: |o| {
            default_at(
                o,
                &["spec", "persistentVolumeReclaimPolicy"],
                json!("Retain"),
            );
            default_at(o, &["spec", "volumeMode"], json!("Filesystem"));
        },
        on_create: |o| o["status"] = json!({"phase": "Pending"}),
        ..simple(ResourceDef {
            namespaced: false,
            short_names: &["pv"],
            subresources: &[STATUS],
            ..def(
                "",
                "persistentvolumes",
                "PersistentVolume",
                "persistentvolume",
            )
        })
    }
}

/// Spec fields that are not the volume's source.
const VOLUME_FIELDS: [&str; 9] = [
    "accessModes",
    "capacity",
    "claimRef",
    "mountOptions",
    "nodeAffinity",
    "persistentVolumeReclaimPolicy",
    "storageClassName",
    "volumeAttributesClassName",
    "volumeMode",
];

fn validate_volume(obj: &Value) -> Vec<Cause> {
    let spec = &obj["spec"];
    let mut causes = access_mode_causes(&spec["accessModes"], "spec.accessModes");
    if spec["capacity"]["storage"].is_null() {
        causes.push(Cause::required("spec.capacity"));
    }
    let sources = spec
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, v)| !VOLUME_FIELDS.contains(&k.as_str()) && !v.is_null())
        .count();
    match sources {
        0 => causes.push(validation::required("spec", "must specify a volume type")),
        1 => {}
        _ => causes.push(Cause::forbidden(
            "spec",
            "may not specify more than 1 volume type",
        )),
    }
    let policies = ["Delete", "Recycle", "Retain"];
    let field = "spec.persistentVolumeReclaimPolicy";
    check_enum(
        spec,
        "/persistentVolumeReclaimPolicy",
        field,
        &policies,
        &mut causes,
    );
    causes
}

fn volume_columns() -> Vec<Column> {
    vec![
        Column::new("Capacity", "string", "capacity is the description of the persistent volume's resources and capacity."),
        Column::new("Access Modes", "string", "accessModes contains all ways the volume can be mounted."),
        Column::new("Reclaim Policy", "string", "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim."),
        Column::new("Status", "string", "phase indicates if a volume is available, bound to a claim, or released by a claim."),
        Column::new("Claim", "string", "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim."),
        Column::new("StorageClass", "string", "StorageClass of the pv"),
        Column::new("VolumeAttributesClass", "string", "VolumeAttributesClass of the pv"),
        Column::new("Reason", "string", "reason is a brief CamelCase string that describes any failure."),
        AGE,
        Column::wide("VolumeMode", "string", "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state."),
    ]
}

fn volume_cells(obj: &Value) -> Vec<Value> {
    let spec = &obj["spec"];
    let claim = match spec["claimRef"].as_object() {
        Some(_) => format!(
            "{}/{}",
            validation::text(spec, "/claimRef/namespace"),
            validation::text(spec, "/claimRef/name")
        ),
        None => String::new(),
    };
    let class = obj["metadata"]["annotations"]["volume.beta.kubernetes.io/storage-class"]
        .as_str()
        .unwrap_or_else(|| validation::text(spec, "/storageClassName"));
    vec![
        validation::text(spec, "/capacity/storage").into(),
        access_modes(&spec["accessModes"]).into(),
        validation::text(spec, "/persistentVolumeReclaimPolicy").into(),
        phase(obj).into(),
        claim.into(),
        class.into(),
        text_or(spec, "/volumeAttributesClassName", "<unset>").into(),
        validation::text(obj, "/status/reason").into(),
        age_cell(obj),
        text_or(spec, "/volumeMode", "<unset>").into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(spec: Value) -> Value {
        let mut obj = json!({"metadata": {"name": "data"}, "spec": spec});
        claims().prepare_for_create(&mut obj);
        obj
    }

    #[test]
    fn claims_need_modes_and_a_size_and_start_pending() {
        let obj = claim(
            json!({"accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
                               "resources": {"requests": {"storage": "1Gi"}}}),
        );
        assert!(validate_claim(&obj).is_empty());
        let cells = claim_cells(&obj);
        assert_eq!(
            cells[..6],
            [
                json!("Pending"),
                json!(""),
                json!(""),
                json!(""),
                json!("fast"),
                json!("<unset>")
            ]
        );
        assert_eq!(cells[7], "Filesystem");
        let fields: Vec<String> =
            validate_claim(&claim(json!({"accessModes": ["ReadWriteSometimes"]})))
                .into_iter()
                .map(|c| c.field)
                .collect();
        assert_eq!(fields, ["spec.accessModes", "spec.resources[storage]"]);
    }

    #[test]
    fn a_claim_may_only_grow() {
        let old = claim(
            json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}),
        );
        let mut new = old.clone();
        new["spec"]["resources"]["requests"]["storage"] = "2Gi".into();
        assert!(claim_spec_fixed(&new, &old).is_empty());
        let mut shrunk = old.clone();
        shrunk["spec"]["resources"]["requests"]["storage"] = "512Mi".into();
        assert_eq!(
            claim_spec_fixed(&shrunk, &old)[0].field,
            "spec.resources.requests.storage"
        );
        new["spec"]["storageClassName"] = "slow".into();
        assert_eq!(claim_spec_fixed(&new, &old)[0].field, "spec");
    }

    #[test]
    fn volumes_need_one_source_a_capacity_and_modes() {
        let mut obj = json!({"metadata": {"name": "pv1"}, "spec": {"capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteOnce", "ReadOnlyMany"], "hostPath": {"path": "/data"}}});
        volumes().prepare_for_create(&mut obj);
        assert!(validate_volume(&obj).is_empty());
        assert_eq!(
            volume_cells(&obj)[..5],
            [
                json!("10Gi"),
                json!("RWO,ROX"),
                json!("Retain"),
                json!("Pending"),
                json!("")
            ]
        );
        let bare = json!({"metadata": {"name": "pv1"}, "spec": {}});
        let messages: Vec<String> = validate_volume(&bare)
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        assert_eq!(
            messages,
            [
                "spec.accessModes: Required value: at least 1 access mode is required",
                "spec.capacity: Required value",
                "spec: Required value: must specify a volume type",
            ]
        );
    }
}
