//! Pruning and defaulting of a custom object by its structural schema:
//! fields the schema does not specify are dropped (unless
//! `x-kubernetes-preserve-unknown-fields` keeps them), and absent fields
//! with a `default` are set, as kube-apiserver does before validation.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps as Props, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde_json::{Map, Value};

/// Fields every object and every embedded resource keeps whatever the
/// schema says: they belong to the API machinery.
const MACHINERY: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Drops what `schema` does not specify from the root object `value`,
/// returning the dropped paths (`spec.bogus`).
pub fn prune_root(schema: &Props, value: &mut Value) -> Vec<String> {
    let mut dropped = Vec::new();
    prune(schema, value, "", true, &mut dropped);
    dropped
}

fn prune(schema: &Props, value: &mut Value, path: &str, root: bool, dropped: &mut Vec<String>) {
    match value {
        Value::Object(map) => prune_object(schema, map, path, root, dropped),
        Value::Array(items) => {
            if let Some(JSONSchemaPropsOrArray::Schema(item)) = &schema.items {
                for (i, v) in items.iter_mut().enumerate() {
                    prune(item, v, &format!("{path}[{i}]"), false, dropped);
                }
            }
        }
        _ => {}
    }
}

fn prune_object(
    schema: &Props,
    map: &mut Map<String, Value>,
    path: &str,
    root: bool,
    dropped: &mut Vec<String>,
) {
    let embedded = root || schema.x_kubernetes_embedded_resource.unwrap_or(false);
    let preserve = schema.x_kubernetes_preserve_unknown_fields.unwrap_or(false);
    let additional = match &schema.additional_properties {
        Some(JSONSchemaPropsOrBool::Schema(extra)) => Some(extra.as_ref()),
        _ => None,
    };
    let any = matches!(
        schema.additional_properties,
        Some(JSONSchemaPropsOrBool::Bool(true))
    );
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        let here = match path {
            "" => key.clone(),
            _ => format!("{path}.{key}"),
        };
        let property = schema.properties.as_ref().and_then(|p| p.get(&key));
        match property.or(additional) {
            Some(child) => {
                if let Some(v) = map.get_mut(&key) {
                    prune(child, v, &here, false, dropped);
                }
            }
            None if embedded && MACHINERY.contains(&key.as_str()) => {}
            None if preserve || any => {}
            None => {
                map.remove(&key);
                dropped.push(here);
            }
        }
    }
}

/// Sets the schema's defaults where `value` leaves fields absent.
pub fn default(schema: &Props, value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, property) in schema.properties.iter().flatten() {
                if let (false, Some(default)) = (map.contains_key(key), &property.default) {
                    map.insert(key.clone(), default.0.clone());
                }
                if let Some(child) = map.get_mut(key) {
                    default(property, child);
                }
            }
            if let Some(JSONSchemaPropsOrBool::Schema(extra)) = &schema.additional_properties {
                for child in map.values_mut() {
                    default(extra, child);
                }
            }
        }
        Value::Array(items) => {
            if let Some(JSONSchemaPropsOrArray::Schema(item)) = &schema.items {
                for child in items {
                    default(item, child);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn props(schema: Value) -> Props {
        serde_json::from_value(schema).unwrap()
    }

    #[test]
    fn unknown_fields_are_dropped_and_named() {
        let schema = props(
            json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"size": {"type": "integer"},
                           "list": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}}}}}}),
        );
        let mut obj = json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "a"},
            "spec": {"size": 1, "bogus": true, "list": [{"a": "x", "b": "y"}]}, "extra": 1});
        let dropped = prune_root(&schema, &mut obj);
        assert_eq!(dropped, vec!["extra", "spec.bogus", "spec.list[0].b"]);
        assert_eq!(
            obj,
            json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "a"},
            "spec": {"size": 1, "list": [{"a": "x"}]}})
        );
    }

    #[test]
    fn preserved_and_embedded_fields_stay() {
        let schema = props(json!({"type": "object", "properties": {
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "pod": {"type": "object", "x-kubernetes-embedded-resource": true,
                    "properties": {"spec": {"type": "object"}}}}}));
        let mut obj = json!({"free": {"anything": [1]},
            "pod": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}, "junk": 1}});
        let dropped = prune_root(&schema, &mut obj);
        assert_eq!(dropped, vec!["pod.junk"]);
        assert_eq!(obj["free"]["anything"], json!([1]));
        assert_eq!(obj["pod"]["kind"], "Pod");
    }

    #[test]
    fn defaults_fill_absent_fields_at_every_depth() {
        let schema = props(
            json!({"type": "object", "properties": {"spec": {"type": "object",
            "default": {}, "properties": {
                "replicas": {"type": "integer", "default": 1},
                "ports": {"type": "array", "items": {"type": "object",
                    "properties": {"protocol": {"type": "string", "default": "TCP"}}}}}}}}),
        );
        let mut obj = json!({});
        default(&schema, &mut obj);
        assert_eq!(obj, json!({"spec": {"replicas": 1}}));
        let mut obj = json!({"spec": {"replicas": 3, "ports": [{}]}});
        default(&schema, &mut obj);
        assert_eq!(
            obj,
            json!({"spec": {"replicas": 3, "ports": [{"protocol": "TCP"}]}})
        );
    }
}
