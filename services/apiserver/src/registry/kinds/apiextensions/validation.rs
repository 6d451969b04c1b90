//! Validation of a CustomResourceDefinition with kube's causes: its name,
//! group, scope, names, versions (exactly one storage version), the
//! structural schema every v1 version needs, and the subresources.

use std::collections::HashSet;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceConversion, CustomResourceDefinition,
    CustomResourceDefinitionNames, CustomResourceDefinitionVersion, CustomResourceSubresourceScale,
    JSONSchemaProps,
};
use serde_json::Value;

use crate::error::Cause;
use crate::registry::kinds::apiextensions::{selectable, structural};
use crate::registry::kinds::custom::rules;

const DNS1035_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const KIND_MSG: &str =
    "may have mixed case, but should otherwise match: [a-z]([-a-z0-9]*[a-z0-9])?";

fn is_dns1035_label(s: &str) -> bool {
    let bytes = s.as_bytes();
    !s.is_empty()
        && s.len() <= 63
        && bytes[0].is_ascii_lowercase()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

fn unsupported(field: &str, value: &str, supported: &[&str]) -> Cause {
    let listed: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    Cause {
        reason: "FieldValueNotSupported",
        field: field.into(),
        message: format!(
            "Unsupported value: {value:?}: supported values: {}",
            listed.join(", ")
        ),
    }
}

fn required(field: &str, why: &str) -> Cause {
    Cause {
        reason: "FieldValueRequired",
        field: field.into(),
        message: format!("Required value: {why}"),
    }
}

/// `Invalid value: <shown>: <why>` for a value that is not a string.
fn invalid_shown(field: &str, shown: &str, why: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid",
        field: field.into(),
        message: format!("Invalid value: {shown}: {why}"),
    }
}

/// Every cause of `crd` (the typed form of the stored object).
pub fn validate(crd: &CustomResourceDefinition) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = &crd.spec;
    let name = crd.metadata.name.as_deref().unwrap_or("");
    if name != format!("{}.{}", spec.names.plural, spec.group) {
        causes.push(Cause::invalid(
            "metadata.name",
            name,
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    if spec.group.is_empty() {
        causes.push(Cause::required("spec.group"));
    } else if !crate::object::meta::is_dns1123_subdomain(&spec.group) || !spec.group.contains('.') {
        causes.push(Cause::invalid(
            "spec.group",
            &spec.group,
            "should be a domain with at least one dot",
        ));
    }
    if !["Cluster", "Namespaced"].contains(&spec.scope.as_str()) {
        match spec.scope.is_empty() {
            true => causes.push(Cause::required("spec.scope")),
            false => causes.push(unsupported(
                "spec.scope",
                &spec.scope,
                &["Cluster", "Namespaced"],
            )),
        }
    }
    causes.extend(validate_names(&spec.names, "spec.names"));
    causes.extend(validate_versions(&spec.versions));
    if let Some(conversion) = &spec.conversion {
        causes.extend(validate_conversion(conversion));
    }
    causes
}

/// `spec.conversion`: `None`, or `Webhook` with a client config kube can
/// call and a ConversionReview version it speaks.
fn validate_conversion(conversion: &CustomResourceConversion) -> Vec<Cause> {
    let path = "spec.conversion";
    let webhook = conversion.webhook.as_ref();
    match conversion.strategy.as_str() {
        "None" if webhook.is_some_and(|w| w.client_config.is_some()) => vec![Cause {
            reason: "FieldValueForbidden",
            field: format!("{path}.webhook"),
            message: "Forbidden: should not be set when strategy is not set to Webhook".into(),
        }],
        "None" => Vec::new(),
        "Webhook" => {
            let needed = "required when strategy is set to Webhook";
            let Some(webhook) = webhook else {
                return vec![required(&format!("{path}.webhook"), needed)];
            };
            let mut causes = Vec::new();
            match &webhook.client_config {
                None => causes.push(required(&format!("{path}.webhook.clientConfig"), needed)),
                Some(config) if config.url.is_some() == config.service.is_some() => {
                    causes.push(required(
                        &format!("{path}.webhook.clientConfig"),
                        "exactly one of url or service is required",
                    ))
                }
                Some(_) => {}
            }
            let versions = &webhook.conversion_review_versions;
            if !versions.iter().any(|v| v == "v1" || v == "v1beta1") {
                causes.push(invalid_shown(
                    &format!("{path}.webhook.conversionReviewVersions"),
                    &format!("{versions:?}"),
                    "must include at least one of v1, v1beta1",
                ));
            }
            causes
        }
        other => vec![unsupported(
            &format!("{path}.strategy"),
            other,
            &["None", "Webhook"],
        )],
    }
}

pub fn validate_names(names: &CustomResourceDefinitionNames, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let label = |field: &str, value: &str, causes: &mut Vec<Cause>| {
        let here = format!("{path}.{field}");
        if value.is_empty() {
            causes.push(Cause::required(here));
        } else if !is_dns1035_label(value) {
            causes.push(Cause::invalid(here, value, DNS1035_MSG));
        }
    };
    label("plural", &names.plural, &mut causes);
    if let Some(singular) = names.singular.as_deref().filter(|s| !s.is_empty()) {
        label("singular", singular, &mut causes);
    }
    let kinds = [
        ("kind", Some(names.kind.as_str())),
        ("listKind", names.list_kind.as_deref()),
    ];
    for (field, kind) in kinds {
        match kind {
            Some("") if field == "kind" => causes.push(Cause::required(format!("{path}.{field}"))),
            Some(kind) if !kind.is_empty() && !is_dns1035_label(&kind.to_lowercase()) => {
                causes.push(Cause::invalid(format!("{path}.{field}"), kind, KIND_MSG))
            }
            _ => {}
        }
    }
    if names.list_kind.as_deref().is_some_and(|l| l == names.kind) {
        causes.push(Cause::invalid(
            format!("{path}.listKind"),
            &names.kind,
            "kind and listKind may not be the same",
        ));
    }
    for (i, short) in names.short_names.iter().flatten().enumerate() {
        if !is_dns1035_label(short) {
            causes.push(Cause::invalid(
                format!("{path}.shortNames[{i}]"),
                short,
                DNS1035_MSG,
            ));
        }
    }
    for (i, category) in names.categories.iter().flatten().enumerate() {
        if !is_dns1035_label(category) {
            causes.push(Cause::invalid(
                format!("{path}.categories[{i}]"),
                category,
                DNS1035_MSG,
            ));
        }
    }
    causes
}

fn validate_versions(versions: &[CustomResourceDefinitionVersion]) -> Vec<Cause> {
    let mut causes = Vec::new();
    let summary =
        Value::from(versions.iter().map(|v| v.name.clone()).collect::<Vec<_>>()).to_string();
    if versions.is_empty() {
        causes.push(required(
            "spec.versions",
            "must have exactly one version marked as storage version",
        ));
        return causes;
    }
    if versions.iter().filter(|v| v.storage).count() != 1 {
        causes.push(invalid_shown(
            "spec.versions",
            &summary,
            "must have exactly one version marked as storage version",
        ));
    }
    if !versions.iter().any(|v| v.served) {
        causes.push(invalid_shown(
            "spec.versions",
            &summary,
            "must have at least one version marked as served",
        ));
    }
    causes.extend(validate_schemas(versions));
    let mut seen = HashSet::new();
    for (i, version) in versions.iter().enumerate() {
        let path = format!("spec.versions[{i}]");
        if !is_dns1035_label(&version.name) {
            causes.push(Cause::invalid(
                format!("{path}.name"),
                &version.name,
                DNS1035_MSG,
            ));
        }
        if !seen.insert(version.name.as_str()) {
            causes.push(Cause {
                reason: "FieldValueDuplicate",
                field: format!("{path}.name"),
                message: format!("Duplicate value: {:?}", version.name),
            });
        }
        causes.extend(validate_version(version, &path));
    }
    causes
}

fn validate_version(version: &CustomResourceDefinitionVersion, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    if version
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .is_none()
    {
        causes.push(required(
            &format!("{path}.schema.openAPIV3Schema"),
            "schemas are required",
        ));
    }
    causes.extend(selectable::check(version, path));
    let subresources = version.subresources.as_ref();
    if let Some(scale) = subresources.and_then(|s| s.scale.as_ref()) {
        causes.extend(validate_scale(scale, &format!("{path}.subresources.scale")));
    }
    for (i, column) in version
        .additional_printer_columns
        .iter()
        .flatten()
        .enumerate()
    {
        let here = format!("{path}.additionalPrinterColumns[{i}]");
        causes.extend(validate_column(column, &here));
    }
    causes
}

/// The scale subresource's paths: replicas under `.spec.` and
/// `.status.`, the selector under either.
fn validate_scale(scale: &CustomResourceSubresourceScale, scale_path: &str) -> Vec<Cause> {
    let checks = [
        (
            "specReplicasPath",
            Some(scale.spec_replicas_path.as_str()),
            ".spec.",
        ),
        (
            "statusReplicasPath",
            Some(scale.status_replicas_path.as_str()),
            ".status.",
        ),
        (
            "labelSelectorPath",
            scale.label_selector_path.as_deref(),
            ".status.",
        ),
    ];
    let mut causes = Vec::new();
    for (field, value, under) in checks {
        let Some(value) = value else { continue };
        if value.is_empty() && field != "labelSelectorPath" {
            causes.push(Cause::required(format!("{scale_path}.{field}")));
        } else if !(value.starts_with(under)
            || (field == "labelSelectorPath" && value.starts_with(".spec.")))
        {
            let why = format!(
                "should be a json path under {}",
                under.trim_end_matches('.')
            );
            causes.push(Cause::invalid(format!("{scale_path}.{field}"), value, why));
        }
    }
    causes
}

fn validate_column(column: &CustomResourceColumnDefinition, here: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let types = ["integer", "number", "string", "boolean", "date"];
    if column.name.is_empty() {
        causes.push(Cause::required(format!("{here}.name")));
    }
    if !types.contains(&column.type_.as_str()) {
        causes.push(unsupported(&format!("{here}.type"), &column.type_, &types));
    }
    if !column.json_path.starts_with('.') {
        causes.push(Cause::invalid(
            format!("{here}.JSONPath"),
            &column.json_path,
            "must be a simple json path starting with .",
        ));
    }
    causes
}

/// The versions' schemas: structural, and rules that compile. As kube
/// does, schemas every version shares are checked once, where kube's
/// internal form keeps them (`spec.validation.openAPIV3Schema`).
fn validate_schemas(versions: &[CustomResourceDefinitionVersion]) -> Vec<Cause> {
    fn schema_of(v: &CustomResourceDefinitionVersion) -> Option<&JSONSchemaProps> {
        v.schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
    }
    let first = versions.first().and_then(schema_of);
    let shared = first.is_some() && versions.iter().all(|v| schema_of(v) == first);
    let checked: Vec<(String, _)> = match (shared, first) {
        (true, Some(schema)) => vec![("spec.validation.openAPIV3Schema".to_string(), schema)],
        _ => versions
            .iter()
            .enumerate()
            .filter_map(|(i, v)| {
                Some((
                    format!("spec.versions[{i}].schema.openAPIV3Schema"),
                    schema_of(v)?,
                ))
            })
            .collect(),
    };
    let mut causes = Vec::new();
    for (path, schema) in checked {
        let found = structural::check_root(schema, &path);
        // kube compiles rules only in a structural schema.
        if found.is_empty() {
            causes.extend(rules::check(schema, &path));
        }
        causes.extend(found);
    }
    causes
}

/// What an update may not change, on top of [`validate`].
pub fn validate_update(
    new: &CustomResourceDefinition,
    old: &CustomResourceDefinition,
) -> Vec<Cause> {
    let mut causes = Vec::new();
    if new.spec.group != old.spec.group {
        causes.push(Cause::invalid(
            "spec.group",
            &new.spec.group,
            "field is immutable",
        ));
    }
    if new.spec.names.plural != old.spec.names.plural {
        causes.push(Cause::invalid(
            "spec.names.plural",
            &new.spec.names.plural,
            "field is immutable",
        ));
    }
    if new.spec.scope != old.spec.scope {
        causes.push(Cause::invalid(
            "spec.scope",
            &new.spec.scope,
            "field is immutable",
        ));
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(value: Value) -> CustomResourceDefinition {
        serde_json::from_value(value).unwrap()
    }

    fn good() -> Value {
        json!({"metadata": {"name": "widgets.example.com"}, "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget", "singular": "widget", "shortNames": ["wd"]},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object"}}}}}]}})
    }

    fn fields(value: Value) -> Vec<String> {
        validate(&crd(value)).into_iter().map(|c| c.field).collect()
    }

    #[test]
    fn a_good_definition_passes() {
        assert!(fields(good()).is_empty());
    }

    #[test]
    fn names_group_and_scope_are_checked() {
        let mut bad = good();
        bad["metadata"]["name"] = json!("other.example.com");
        bad["spec"]["group"] = json!("nodots");
        bad["spec"]["scope"] = json!("Everywhere");
        bad["spec"]["names"]["kind"] = json!("Wid get");
        assert_eq!(
            fields(bad),
            vec![
                "metadata.name",
                "spec.group",
                "spec.scope",
                "spec.names.kind"
            ]
        );
    }

    #[test]
    fn exactly_one_storage_version_and_a_schema() {
        let mut bad = good();
        bad["spec"]["versions"] = json!([{"name": "v1", "served": true, "storage": true},
                                         {"name": "v2", "served": true, "storage": true,
                                          "schema": {"openAPIV3Schema": {"type": "object"}}}]);
        let causes = validate(&crd(bad));
        let messages: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        assert_eq!(messages, vec![
            "spec.versions: Invalid value: [\"v1\",\"v2\"]: must have exactly one version marked as storage version".to_string(),
            "spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required".to_string(),
        ]);
    }

    #[test]
    fn rules_are_compiled_where_kube_keeps_the_schema() {
        let rule = json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [{"rule": "self.a <"}]}}});
        let mut shared = good();
        shared["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = rule.clone();
        let at = "properties[spec].x-kubernetes-validations[0].rule";
        assert_eq!(
            fields(shared.clone()),
            vec![format!("spec.validation.openAPIV3Schema.{at}")]
        );
        let mut apart = shared;
        apart["spec"]["versions"][0]["storage"] = json!(false);
        apart["spec"]["versions"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "v2", "served": true, "storage": true,
                         "schema": {"openAPIV3Schema": {"type": "object"}}}));
        assert_eq!(
            fields(apart),
            vec![format!("spec.versions[0].schema.openAPIV3Schema.{at}")]
        );
    }

    #[test]
    fn scale_paths_and_printer_columns_are_checked() {
        let mut bad = good();
        bad["spec"]["versions"][0]["subresources"] = json!({"scale": {
            "specReplicasPath": "", "statusReplicasPath": ".spec.replicas",
            "labelSelectorPath": ".spec.selector"}});
        bad["spec"]["versions"][0]["additionalPrinterColumns"] = json!([
            {"name": "", "type": "text", "jsonPath": "spec.size"},
            {"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]);
        let scale = "spec.versions[0].subresources.scale";
        let column = "spec.versions[0].additionalPrinterColumns[0]";
        assert_eq!(
            fields(bad),
            vec![
                format!("{scale}.specReplicasPath"),
                format!("{scale}.statusReplicasPath"),
                format!("{column}.name"),
                format!("{column}.type"),
                format!("{column}.JSONPath"),
            ]
        );
    }
}
