//! core/v1 ConfigMap: data and binaryData, frozen once `immutable: true`.

use k8s_openapi::api::core::v1::ConfigMap;
use schemars::gen::SchemaGenerator;
use schemars::schema::Schema;
use serde_json::Value;

use crate::error::Cause;
use crate::registry::definition::ResourceDef;
use crate::registry::strategy::{age_cell, Column, Strategy, AGE};
use crate::registry::typed::{decode, Decoded};

const DEF: ResourceDef = ResourceDef {
    short_names: &["cm"],
    ..ResourceDef::new("", "v1", "configmaps", "ConfigMap", "configmap")
};

pub struct ConfigMaps;

/// Shared by ConfigMap and Secret: once `immutable` is true, neither the
/// payload nor the flag may change.
pub fn immutable_causes(new: &Value, old: &Value, payload: &[&str]) -> Vec<Cause> {
    if old["immutable"] != Value::Bool(true) {
        return Vec::new();
    }
    let mut causes = Vec::new();
    for field in payload {
        if new[*field] != old[*field] {
            causes.push(Cause::forbidden(
                *field,
                "field is immutable when `immutable` is set",
            ));
        }
    }
    if new["immutable"] != old["immutable"] {
        causes.push(Cause::forbidden(
            "immutable",
            "field is immutable when `immutable` is set",
        ));
    }
    causes
}

fn count(obj: &Value, fields: &[&str]) -> usize {
    fields
        .iter()
        .filter_map(|f| obj[*f].as_object())
        .map(|m| m.len())
        .sum()
}

impl Strategy for ConfigMaps {
    fn def(&self) -> &ResourceDef {
        &DEF
    }

    fn decode(&self, value: &Value) -> Result<Decoded, String> {
        decode::<ConfigMap>(value)
    }

    fn schema(&self, generator: &mut SchemaGenerator) -> Schema {
        generator.subschema_for::<ConfigMap>()
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        let mut causes = Vec::new();
        for field in ["data", "binaryData"] {
            for key in obj[field].as_object().into_iter().flat_map(|m| m.keys()) {
                if !is_config_key(key) {
                    causes.push(Cause::invalid(field, key, "a valid config key must consist of alphanumeric characters, '-', '_' or '.'"));
                }
            }
        }
        causes
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        let mut causes = self.validate(new);
        causes.extend(immutable_causes(new, old, &["data", "binaryData"]));
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::new("Data", "integer", "Number of entries in the configmap"),
            AGE,
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        vec![count(obj, &["data", "binaryData"]).into(), age_cell(obj)]
    }
}

pub fn is_config_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 253
        && key != "."
        && key != ".."
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

pub fn entry_count(obj: &Value, fields: &[&str]) -> usize {
    count(obj, fields)
}
