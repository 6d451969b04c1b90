//! FlowSchema: which requests go to which priority level, and how they
//! are split into flows.

use k8s_openapi::api::flowcontrol::v1::FlowSchema;
use serde_json::{json, Value};

use crate::error::Cause;
use crate::registry::definition::ResourceDef;
use crate::registry::kinds::common::defaults::default_at;
use crate::registry::kinds::common::simple::{def, simple, Simple};
use crate::registry::kinds::common::validation::{
    check_enum, invalid, items, required, text, unsupported,
};
use crate::registry::strategy::{age_cell, Column, AGE};
use crate::registry::subresource::STATUS;

/// The API group of both kinds.
pub const GROUP: &str = "flowcontrol.apiserver.k8s.io";

const SUBJECT_KINDS: [&str; 3] = ["ServiceAccount", "Group", "User"];

pub fn strategy() -> Simple<FlowSchema> {
    Simple {
        columns,
        cells,
        validate,
        defaults: |o| default_at(o, &["spec", "matchingPrecedence"], json!(1000)),
        on_create: |o| o["status"] = json!({}),
        table_order: Some(matching_order),
        ..simple(ResourceDef {
            namespaced: false,
            subresources: &[STATUS],
            ..def(GROUP, "flowschemas", "FlowSchema", "flowschema")
        })
    }
}

fn validate(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    if text(obj, "/spec/priorityLevelConfiguration/name").is_empty() {
        let field = "spec.priorityLevelConfiguration.name";
        causes.push(required(field, "must reference a priority level"));
    }
    let precedence = &obj["spec"]["matchingPrecedence"];
    if !precedence
        .as_i64()
        .is_some_and(|p| (1..=10000).contains(&p))
    {
        let why = "must be between 1 and 10000, inclusive";
        causes.push(invalid("spec.matchingPrecedence", precedence, why));
    }
    let methods = ["ByUser", "ByNamespace"];
    let pointer = "/spec/distinguisherMethod/type";
    if obj
        .pointer("/spec/distinguisherMethod")
        .is_some_and(|m| !m.is_null())
    {
        check_enum(
            obj,
            pointer,
            "spec.distinguisherMethod.type",
            &methods,
            &mut causes,
        );
    }
    for (i, rule) in items(&obj["spec"]["rules"]) {
        validate_rule(rule, &format!("spec.rules[{i}]"), &mut causes);
    }
    causes
}

fn validate_rule(rule: &Value, field: &str, causes: &mut Vec<Cause>) {
    let subjects = rule["subjects"].as_array().map_or(0, Vec::len);
    if subjects == 0 {
        causes.push(required(
            format!("{field}.subjects"),
            "subjects must contain at least one value",
        ));
    }
    for (j, subject) in items(&rule["subjects"]) {
        let kind = subject["kind"].as_str().unwrap_or("");
        if !SUBJECT_KINDS.contains(&kind) {
            let at = format!("{field}.subjects[{j}].kind");
            causes.push(unsupported(at, &subject["kind"], &SUBJECT_KINDS));
        }
    }
    let resources = rule["resourceRules"].as_array().map_or(0, Vec::len);
    let non_resources = rule["nonResourceRules"].as_array().map_or(0, Vec::len);
    if resources + non_resources == 0 {
        let why = "at least one of resourceRules and nonResourceRules has to be non-empty";
        causes.push(required(field.to_string(), why));
    }
}

/// Lowest matchingPrecedence first, then by name: the order requests
/// are matched in.
fn matching_order(a: &Value, b: &Value) -> std::cmp::Ordering {
    let key = |o: &Value| {
        let precedence = o["spec"]["matchingPrecedence"].as_i64().unwrap_or(1000);
        (
            precedence,
            o["metadata"]["name"].as_str().unwrap_or("").to_string(),
        )
    };
    key(a).cmp(&key(b))
}

fn columns() -> Vec<Column> {
    vec![
        Column::new(
            "PriorityLevel",
            "string",
            "The name of the priority level this schema sends requests to.",
        ),
        Column::new(
            "MatchingPrecedence",
            "string",
            "The precedence of this schema among those matching a request; the lowest wins.",
        ),
        Column::new(
            "DistinguisherMethod",
            "string",
            "How requests of this schema are divided into flows.",
        ),
        AGE,
        Column::new(
            "MissingPL",
            "string",
            "Whether the priority level this schema references is missing.",
        ),
    ]
}

fn cells(obj: &Value) -> Vec<Value> {
    let spec = &obj["spec"];
    let method = spec["distinguisherMethod"]["type"]
        .as_str()
        .unwrap_or("<none>");
    vec![
        spec["priorityLevelConfiguration"]["name"].clone(),
        spec["matchingPrecedence"].clone(),
        method.into(),
        age_cell(obj),
        missing_level(obj).into(),
    ]
}

/// The Dangling condition's status, `?` before one is published.
fn missing_level(obj: &Value) -> &str {
    let conditions = obj["status"]["conditions"].as_array();
    let dangling = conditions
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Dangling");
    dangling.and_then(|c| c["status"].as_str()).unwrap_or("?")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Strategy;

    fn schema() -> Value {
        json!({"metadata": {"name": "team"}, "spec": {
            "priorityLevelConfiguration": {"name": "global-default"},
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{"subjects": [{"kind": "Group", "group": {"name": "team"}}],
                       "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"]}]}]}})
    }

    #[test]
    fn a_schema_is_defaulted_and_checked() {
        let strategy = strategy();
        let mut obj = schema();
        strategy.prepare_for_create(&mut obj);
        assert_eq!(obj["spec"]["matchingPrecedence"], 1000);
        assert!(
            strategy.validate(&obj).is_empty(),
            "{:?}",
            strategy.validate(&obj)
        );
        obj["spec"]["matchingPrecedence"] = json!(0);
        obj["spec"]["distinguisherMethod"]["type"] = json!("ByPod");
        obj["spec"]["rules"][0]["subjects"][0]["kind"] = json!("Robot");
        obj["spec"]["rules"][0]["resourceRules"] = json!([]);
        let fields: Vec<String> = strategy
            .validate(&obj)
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(
            fields,
            [
                "spec.matchingPrecedence",
                "spec.distinguisherMethod.type",
                "spec.rules[0].subjects[0].kind",
                "spec.rules[0]"
            ]
        );
    }

    #[test]
    fn the_table_reads_as_kubectl_shows_it() {
        let mut obj = schema();
        obj["spec"]["matchingPrecedence"] = json!(9900);
        let cells = cells(&obj);
        assert_eq!(
            cells[..3],
            [json!("global-default"), json!(9900), json!("ByUser")]
        );
        assert_eq!(cells[4], "?");
        obj["status"] = json!({"conditions": [{"type": "Dangling", "status": "False"}]});
        assert_eq!(missing_level(&obj), "False");
    }
}
