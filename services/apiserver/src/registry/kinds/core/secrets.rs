//! core/v1 Secret: `stringData` is folded into base64 `data` on write.

use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use schemars::gen::SchemaGenerator;
use schemars::schema::Schema;
use serde_json::Value;

use crate::error::Cause;
use crate::registry::definition::ResourceDef;
use crate::registry::kinds::core::configmaps::{entry_count, immutable_causes, is_config_key};
use crate::registry::strategy::{age_cell, Column, Strategy, AGE};
use crate::registry::typed::{decode, Decoded};

const DEF: ResourceDef = ResourceDef {
    ..ResourceDef::new("", "v1", "secrets", "Secret", "secret")
};

pub struct Secrets;

/// Moves `stringData` into `data`, as the real Secret strategy does, so
/// what is stored and served has one representation.
fn fold_string_data(obj: &mut Value) {
    let Some(Value::Object(strings)) = obj.as_object_mut().and_then(|o| o.remove("stringData"))
    else {
        return;
    };
    if !obj["data"].is_object() {
        obj["data"] = Value::Object(Default::default());
    }
    for (key, value) in strings {
        let encoded =
            base64::engine::general_purpose::STANDARD.encode(value.as_str().unwrap_or(""));
        obj["data"][key] = Value::String(encoded);
    }
}

impl Strategy for Secrets {
    fn def(&self) -> &ResourceDef {
        &DEF
    }

    fn decode(&self, value: &Value) -> Result<Decoded, String> {
        decode::<Secret>(value)
    }

    fn schema(&self, generator: &mut SchemaGenerator) -> Schema {
        generator.subschema_for::<Secret>()
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        fold_string_data(obj);
        crate::registry::kinds::common::defaults::default_at(obj, &["type"], "Opaque".into());
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        fold_string_data(new);
        crate::registry::kinds::common::defaults::default_at(new, &["type"], "Opaque".into());
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        let keys = obj["data"].as_object().into_iter().flat_map(|m| m.keys());
        keys.filter(|k| !is_config_key(k))
            .map(|k| {
                Cause::invalid(
                    format!("data[{k}]"),
                    k,
                    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                )
            })
            .collect()
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        let mut causes = self.validate(new);
        causes.extend(immutable_causes(new, old, &["data"]));
        if new["type"] != old["type"] {
            causes.push(Cause::forbidden("type", "field is immutable"));
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::new("Type", "string", "The type of the secret"),
            Column::new("Data", "integer", "The number of entries in the secret"),
            AGE,
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        vec![
            obj["type"].clone(),
            entry_count(obj, &["data"]).into(),
            age_cell(obj),
        ]
    }

    fn selectable_fields(&self) -> &'static [(&'static str, &'static str)] {
        &[("type", "/type")]
    }
}
