//! A version's `selectableFields`, checked as kube does: each names a
//! field of the schema (not in metadata) of type string, integer or
//! boolean, once, and a version has at most eight.

use std::collections::HashSet;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinitionVersion, JSONSchemaProps,
};

use crate::error::Cause;
use crate::registry::kinds::custom::rules::field_schema;

const MOST: usize = 8;
const TYPES: [&str; 3] = ["boolean", "integer", "string"];

/// The causes of `version`'s selectable fields; `path` is the version's.
pub fn check(version: &CustomResourceDefinitionVersion, path: &str) -> Vec<Cause> {
    let Some(fields) = version.selectable_fields.as_ref().filter(|f| !f.is_empty()) else {
        return Vec::new();
    };
    let mut causes = Vec::new();
    let base = format!("{path}.selectableFields");
    let Some(schema) = version
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
    else {
        return causes; // the missing schema is a cause of its own
    };
    let mut seen = HashSet::new();
    for (i, field) in fields.iter().enumerate() {
        let here = format!("{base}[{i}].jsonPath");
        check_one(schema, &field.json_path, here, &mut seen, &mut causes);
    }
    if seen.len() > MOST {
        causes.push(Cause {
            reason: "FieldValueTooMany",
            field: base,
            message: format!("Too many: {}: must have at most {MOST} items", seen.len()),
        });
    }
    causes
}

/// One selectable field's `jsonPath`: a field of the schema outside
/// metadata, of a type kube selects on, not already in `seen`.
fn check_one(
    schema: &JSONSchemaProps,
    json_path: &str,
    here: String,
    seen: &mut HashSet<String>,
    causes: &mut Vec<Cause>,
) {
    if json_path.is_empty() {
        causes.push(Cause::required(here));
        return;
    }
    let (dotted, found) = match field_schema(schema, json_path) {
        Ok(found) => found,
        Err(why) => {
            let why = format!("is an invalid path: {why}");
            causes.push(Cause::invalid(here, json_path, why));
            return;
        }
    };
    let type_name = found.type_.as_deref().unwrap_or_default();
    if !TYPES.contains(&type_name) {
        let listed: Vec<String> = TYPES.iter().map(|t| format!("{t:?}")).collect();
        causes.push(Cause {
            reason: "FieldValueNotSupported",
            field: here.clone(),
            message: format!(
                "Unsupported value: {type_name:?}: supported values: {}",
                listed.join(", ")
            ),
        });
    }
    if dotted == "metadata" || dotted.starts_with("metadata.") {
        causes.push(Cause::invalid(
            here.clone(),
            json_path,
            "must not point to fields in metadata",
        ));
    }
    if !seen.insert(dotted) {
        causes.push(Cause {
            reason: "FieldValueDuplicate",
            field: here,
            message: format!("Duplicate value: {json_path:?}"),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_must_name_scalar_schema_fields_once() {
        let version: CustomResourceDefinitionVersion = serde_json::from_value(json!({
            "name": "v1", "served": true, "storage": true,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {
                "color": {"type": "string"}, "size": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}}}}}},
            "selectableFields": [{"jsonPath": ".spec.color"}, {"jsonPath": ".spec.size"}, {"jsonPath": ".spec.tags"},
                                 {"jsonPath": ".spec.nope"}, {"jsonPath": ".spec.color"}]}))
        .unwrap();
        let found: Vec<String> = check(&version, "spec.versions[0]")
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        assert_eq!(found, vec![
            "spec.versions[0].selectableFields[2].jsonPath: Unsupported value: \"array\": supported values: \"boolean\", \"integer\", \"string\"",
            "spec.versions[0].selectableFields[3].jsonPath: Invalid value: \".spec.nope\": is an invalid path: does not refer to a valid field",
            "spec.versions[0].selectableFields[4].jsonPath: Duplicate value: \".spec.color\"",
        ]);
    }
}
