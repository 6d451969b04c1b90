//! kube's structural-schema rules for a CRD version's openAPIV3Schema:
//! every specified field has a type, objects hold properties, arrays a
//! single item schema, the root is an object, and patterns compile.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps as Props, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};

use crate::error::Cause;

const TYPES: [&str; 6] = ["array", "boolean", "integer", "number", "object", "string"];

fn cause(reason: &'static str, field: String, message: String) -> Cause {
    Cause {
        reason,
        field,
        message,
    }
}

/// The causes that make the schema at `path` not structural.
pub fn check_root(schema: &Props, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    match schema.type_.as_deref() {
        None | Some("") => causes.push(cause(
            "FieldValueRequired",
            format!("{path}.type"),
            "Required value: must not be empty at the root".into(),
        )),
        Some("object") => {}
        Some(other) => causes.push(Cause::invalid(
            format!("{path}.type"),
            other,
            "must be object at the root",
        )),
    }
    check(schema, path, &mut causes);
    causes
}

fn check(schema: &Props, path: &str, causes: &mut Vec<Cause>) {
    let loose = schema.x_kubernetes_int_or_string.unwrap_or(false)
        || schema.x_kubernetes_preserve_unknown_fields.unwrap_or(false);
    match schema.type_.as_deref() {
        Some(t) if !t.is_empty() && !TYPES.contains(&t) => {
            let listed: Vec<String> = TYPES.iter().map(|t| format!("{t:?}")).collect();
            causes.push(cause(
                "FieldValueNotSupported",
                format!("{path}.type"),
                format!(
                    "Unsupported value: {t:?}: supported values: {}",
                    listed.join(", ")
                ),
            ));
        }
        None | Some("") if !loose => causes.push(cause(
            "FieldValueRequired",
            format!("{path}.type"),
            "Required value: must not be empty for specified object fields".into(),
        )),
        _ => {}
    }
    if let Some(pattern) = &schema.pattern {
        if let Err(err) = regex::Regex::new(pattern) {
            let why = format!("must be a valid regular expression, but isn't: {err}");
            causes.push(Cause::invalid(format!("{path}.pattern"), pattern, why));
        }
    }
    match &schema.items {
        Some(JSONSchemaPropsOrArray::Schema(item)) => check(item, &format!("{path}.items"), causes),
        Some(JSONSchemaPropsOrArray::Schemas(_)) => causes.push(Cause::forbidden(
            format!("{path}.items"),
            "items must be a schema object and not an array",
        )),
        None if schema.type_.as_deref() == Some("array") => causes.push(cause(
            "FieldValueRequired",
            format!("{path}.items"),
            "Required value: must be specified".into(),
        )),
        None => {}
    }
    for (name, property) in schema.properties.iter().flatten() {
        check(property, &format!("{path}.properties[{name}]"), causes);
    }
    if let Some(JSONSchemaPropsOrBool::Schema(extra)) = &schema.additional_properties {
        if schema.properties.as_ref().is_some_and(|p| !p.is_empty()) {
            causes.push(Cause::forbidden(
                format!("{path}.additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        check(extra, &format!("{path}.additionalProperties"), causes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(schema: serde_json::Value) -> Vec<String> {
        let schema: Props = serde_json::from_value(schema).unwrap();
        check_root(&schema, "s")
            .into_iter()
            .map(|c| c.field)
            .collect()
    }

    #[test]
    fn every_specified_field_needs_a_type() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"properties": {"a": {"type": "string", "pattern": "("}}},
            "list": {"type": "array"},
            "free": {"x-kubernetes-preserve-unknown-fields": true},
            "port": {"x-kubernetes-int-or-string": true}}});
        assert_eq!(
            fields(schema),
            vec![
                "s.properties[list].items",
                "s.properties[spec].type",
                "s.properties[spec].properties[a].pattern"
            ]
        );
        assert_eq!(fields(json!({"type": "string"})), vec!["s.type"]);
    }
}
