//! Validation of a custom object against its CRD's structural schema
//! (kube's JSONSchemaProps), with kube's field causes: types, formats,
//! enum, pattern, bounds, lengths, required, nullable and the
//! `x-kubernetes-*` extensions that change what a value may be.

use std::collections::BTreeMap;

use base64::Engine;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps as Props, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde_json::Value;

use crate::error::Cause;

/// Every cause `value` at `path` breaks in `schema`.
pub fn validate(schema: &Props, value: &Value, path: &str, causes: &mut Vec<Cause>) {
    if value.is_null() {
        if !schema.nullable.unwrap_or(false) && schema.type_.is_some() {
            causes.push(type_invalid(
                path,
                value,
                schema.type_.as_deref().unwrap_or(""),
            ));
        }
        return;
    }
    if !type_ok(schema, value) {
        let expected = schema.type_.as_deref().unwrap_or("");
        causes.push(type_invalid(path, value, expected));
        return;
    }
    check_enum(schema, value, path, causes);
    match value {
        Value::String(s) => check_string(schema, s, path, causes),
        Value::Number(_) => check_number(schema, value, path, causes),
        Value::Array(items) => check_array(schema, items, path, causes),
        Value::Object(map) => check_object(schema, map, path, causes),
        Value::Bool(_) | Value::Null => {}
    }
}

fn type_ok(schema: &Props, value: &Value) -> bool {
    if schema.x_kubernetes_int_or_string.unwrap_or(false) {
        return value.is_string() || value.is_i64() || value.is_u64();
    }
    match schema.type_.as_deref() {
        Some("object") => value.is_object(),
        Some("array") => value.is_array(),
        Some("string") => value.is_string(),
        Some("integer") => value.is_i64() || value.is_u64(),
        Some("number") => value.is_number(),
        Some("boolean") => value.is_boolean(),
        _ => true,
    }
}

/// The JSON type of `value` as go-openapi names it.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_invalid(path: &str, value: &Value, expected: &str) -> Cause {
    let actual = type_name(value);
    Cause {
        reason: "FieldValueTypeInvalid",
        field: path.to_string(),
        message: format!(
            "Invalid value: \"{actual}\": {path} in body must be of type {expected}: \"{actual}\""
        ),
    }
}

/// `Invalid value: <v>: <why>`, the value shown as Go's `%v` of JSON shows it.
fn invalid(path: &str, value: &Value, why: String) -> Cause {
    let shown = match value {
        Value::String(s) => Value::from(s.as_str()).to_string(),
        other => other.to_string(),
    };
    Cause {
        reason: "FieldValueInvalid",
        field: path.to_string(),
        message: format!("Invalid value: {shown}: {why}"),
    }
}

fn check_enum(schema: &Props, value: &Value, path: &str, causes: &mut Vec<Cause>) {
    let Some(allowed) = &schema.enum_ else { return };
    if allowed.iter().any(|a| a.0 == *value) {
        return;
    }
    let listed: Vec<String> = allowed.iter().map(|a| a.0.to_string()).collect();
    causes.push(Cause {
        reason: "FieldValueNotSupported",
        field: path.to_string(),
        message: format!(
            "Unsupported value: {value}: supported values: {}",
            listed.join(", ")
        ),
    });
}

fn check_string(schema: &Props, s: &str, path: &str, causes: &mut Vec<Cause>) {
    let value = Value::from(s);
    let chars = s.chars().count() as i64;
    if let Some(max) = schema.max_length.filter(|max| chars > *max) {
        causes.push(Cause {
            reason: "FieldValueTooLong",
            field: path.to_string(),
            message: format!("Too long: may not be more than {max} bytes"),
        });
    }
    if let Some(min) = schema.min_length.filter(|min| chars < *min) {
        let why = format!("{path} in body should be at least {min} chars long");
        causes.push(invalid(path, &value, why));
    }
    if let Some(pattern) = &schema.pattern {
        // The CRD's validation compiled it already; a pattern that does
        // not compile here matches nothing rather than everything.
        let matched = regex::Regex::new(pattern).is_ok_and(|re| re.is_match(s));
        if !matched {
            let why = format!("{path} in body should match '{pattern}'");
            causes.push(invalid(path, &value, why));
        }
    }
    if !schema.x_kubernetes_int_or_string.unwrap_or(false) {
        check_string_format(schema.format.as_deref(), s, path, causes);
    }
}

fn check_string_format(format: Option<&str>, s: &str, path: &str, causes: &mut Vec<Cause>) {
    let ok = match format {
        Some("date-time") => {
            time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).is_ok()
        }
        Some("date") => {
            let format = time::macros::format_description!("[year]-[month]-[day]");
            time::Date::parse(s, &format).is_ok()
        }
        Some("byte") => base64::engine::general_purpose::STANDARD.decode(s).is_ok(),
        Some("int-or-string") => true,
        _ => true,
    };
    if !ok {
        let format = format.unwrap_or("");
        let why = format!("{path} in body must be of type {format}: {:?}", s);
        causes.push(invalid(path, &Value::from(s), why));
    }
}

fn check_number(schema: &Props, value: &Value, path: &str, causes: &mut Vec<Cause>) {
    let n = value.as_f64().unwrap_or(0.0);
    let range = match schema.format.as_deref() {
        Some("int32") => Some((i32::MIN as f64, i32::MAX as f64)),
        Some("int64") => Some((i64::MIN as f64, i64::MAX as f64)),
        _ => None,
    };
    if let Some((low, high)) = range.filter(|(low, high)| n < *low || n > *high) {
        let format = schema.format.as_deref().unwrap_or("");
        let why =
            format!("{path} in body must be of type {format}: \"{value}\" (range {low}..{high})");
        causes.push(invalid(path, value, why));
    }
    let exclusive_min = schema.exclusive_minimum.unwrap_or(false);
    if let Some(min) = schema.minimum {
        if n < min || (exclusive_min && n == min) {
            let how = if exclusive_min {
                "greater than"
            } else {
                "greater than or equal to"
            };
            let why = format!("{path} in body should be {how} {}", shown(min));
            causes.push(invalid(path, value, why));
        }
    }
    let exclusive_max = schema.exclusive_maximum.unwrap_or(false);
    if let Some(max) = schema.maximum {
        if n > max || (exclusive_max && n == max) {
            let how = if exclusive_max {
                "less than"
            } else {
                "less than or equal to"
            };
            let why = format!("{path} in body should be {how} {}", shown(max));
            causes.push(invalid(path, value, why));
        }
    }
    if let Some(factor) = schema
        .multiple_of
        .filter(|f| *f != 0.0 && (n / f).fract() != 0.0)
    {
        let why = format!("{path} in body should be a multiple of {}", shown(factor));
        causes.push(invalid(path, value, why));
    }
}

/// A bound as Go prints a float64 with `%v`: `1`, not `1.0`.
fn shown(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        n.to_string()
    }
}

fn check_array(schema: &Props, items: &[Value], path: &str, causes: &mut Vec<Cause>) {
    let count = items.len() as i64;
    if let Some(max) = schema.max_items.filter(|max| count > *max) {
        causes.push(Cause {
            reason: "FieldValueTooMany",
            field: path.to_string(),
            message: format!("Too many: {count}: must have at most {max} items"),
        });
    }
    if let Some(min) = schema.min_items.filter(|min| count < *min) {
        let why = format!("{path} in body should have at least {min} items");
        causes.push(invalid(path, &Value::from(count), why));
    }
    if schema.unique_items.unwrap_or(false) {
        for (i, item) in items.iter().enumerate() {
            if items[..i].contains(item) {
                causes.push(Cause {
                    reason: "FieldValueDuplicate",
                    field: format!("{path}[{i}]"),
                    message: format!("Duplicate value: {item}"),
                });
            }
        }
    }
    if let Some(JSONSchemaPropsOrArray::Schema(item_schema)) = &schema.items {
        for (i, item) in items.iter().enumerate() {
            validate(item_schema, item, &format!("{path}[{i}]"), causes);
        }
    }
}

fn check_object(
    schema: &Props,
    map: &serde_json::Map<String, Value>,
    path: &str,
    causes: &mut Vec<Cause>,
) {
    let child = |key: &str| match path {
        "" => key.to_string(),
        _ => format!("{path}.{key}"),
    };
    for required in schema.required.iter().flatten() {
        if !map.contains_key(required) {
            causes.push(Cause::required(child(required)));
        }
    }
    if schema.x_kubernetes_embedded_resource.unwrap_or(false) {
        for required in ["apiVersion", "kind"] {
            if map
                .get(required)
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                causes.push(Cause::required(child(required)));
            }
        }
    }
    let count = map.len() as i64;
    if let Some(max) = schema.max_properties.filter(|max| count > *max) {
        causes.push(Cause {
            reason: "FieldValueTooMany",
            field: path.to_string(),
            message: format!("Too many: {count}: must have at most {max} items"),
        });
    }
    if let Some(min) = schema.min_properties.filter(|min| count < *min) {
        let why = format!("{path} in body should have at least {min} properties");
        causes.push(invalid(path, &Value::from(count), why));
    }
    let empty = BTreeMap::new();
    let properties = schema.properties.as_ref().unwrap_or(&empty);
    for (key, value) in map {
        if let Some(property) = properties.get(key) {
            validate(property, value, &child(key), causes);
        } else if let Some(JSONSchemaPropsOrBool::Schema(extra)) = &schema.additional_properties {
            validate(extra, value, &child(key), causes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn props(schema: Value) -> Props {
        serde_json::from_value(schema).unwrap()
    }

    fn causes(schema: Value, value: Value) -> Vec<(String, String)> {
        let mut out = Vec::new();
        validate(&props(schema), &value, "", &mut out);
        out.into_iter().map(|c| (c.field, c.message)).collect()
    }

    fn spec_of(properties: Value) -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": properties}}})
    }

    #[test]
    fn types_are_checked_with_kube_messages() {
        let schema = spec_of(json!({"replicas": {"type": "integer"}}));
        let found = causes(schema, json!({"spec": {"replicas": "three"}}));
        assert_eq!(
            found,
            vec![(
                "spec.replicas".into(),
                "Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"".into()
            )]
        );
    }

    #[test]
    fn bounds_enum_pattern_and_lengths() {
        let schema = spec_of(json!({
            "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
            "mode": {"type": "string", "enum": ["a", "b"]},
            "id": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 3},
        }));
        let found = causes(
            schema,
            json!({"spec": {"replicas": 11, "mode": "c", "id": "ABCD"}}),
        );
        let messages: Vec<&str> = found.iter().map(|(_, m)| m.as_str()).collect();
        assert!(messages.contains(
            &"Invalid value: 11: spec.replicas in body should be less than or equal to 10"
        ));
        assert!(messages.contains(&"Unsupported value: \"c\": supported values: \"a\", \"b\""));
        assert!(
            messages.contains(&"Invalid value: \"ABCD\": spec.id in body should match '^[a-z]+$'")
        );
        assert!(messages.contains(&"Too long: may not be more than 3 bytes"));
    }

    #[test]
    fn required_nullable_and_formats() {
        let schema = json!({"type": "object", "required": ["spec"], "properties": {"spec": {
            "type": "object", "required": ["size"], "properties": {
                "size": {"type": "integer", "format": "int32"},
                "when": {"type": "string", "format": "date-time"},
                "data": {"type": "string", "format": "byte"},
                "note": {"type": "string", "nullable": true},
                "other": {"type": "string"}}}}});
        assert_eq!(
            causes(schema.clone(), json!({})),
            vec![("spec".into(), "Required value".into())]
        );
        let found = causes(
            schema.clone(),
            json!({"spec": {"size": 5_000_000_000i64, "when": "yesterday", "data": "%%", "note": null, "other": null}}),
        );
        let fields: Vec<&str> = found.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            vec!["spec.data", "spec.other", "spec.size", "spec.when"]
        );
        let fine = json!({"spec": {"size": 3, "when": "2024-01-02T03:04:05Z", "data": "aGk="}});
        assert!(causes(schema, fine).is_empty());
    }

    #[test]
    fn int_or_string_and_embedded_resources() {
        let schema = spec_of(json!({
            "port": {"x-kubernetes-int-or-string": true},
            "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                         "x-kubernetes-preserve-unknown-fields": true},
        }));
        let ok = json!({"spec": {"port": "http", "template": {"apiVersion": "v1", "kind": "Pod"}}});
        assert!(causes(schema.clone(), ok).is_empty());
        let bad = json!({"spec": {"port": true, "template": {"kind": "Pod"}}});
        let fields: Vec<String> = causes(schema, bad).into_iter().map(|(f, _)| f).collect();
        assert_eq!(fields, vec!["spec.port", "spec.template.apiVersion"]);
    }

    #[test]
    fn arrays_and_maps_use_their_item_schemas() {
        let schema = spec_of(json!({
            "items": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        }));
        let found = causes(
            schema,
            json!({"spec": {"items": ["a", 1, "c"], "labels": {"x": 2}}}),
        );
        let fields: Vec<&str> = found.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(fields, vec!["spec.items", "spec.items[1]", "spec.labels.x"]);
    }
}
