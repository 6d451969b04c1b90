use serde_json::{json, Value};

use crate::registry::kinds::custom::rules::tree::*;
use crate::registry::kinds::custom::rules::*;

fn rules(schema: Value) -> Rules {
    Rules::of(&serde_json::from_value(schema).unwrap())
}

fn causes(rules: &Rules, obj: Value, old: Option<Value>) -> Vec<String> {
    rules
        .validate(&obj, old.as_ref())
        .into_iter()
        .map(|c| format!("{} {}: {}", c.reason, c.field, c.message))
        .collect()
}

fn widget_schema() -> Value {
    json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.minReplicas <= self.maxReplicas", "message": "minReplicas must not exceed maxReplicas"},
            {"rule": "self.color != 'black'", "messageExpression": "'color ' + self.color + ' is not allowed'", "reason": "FieldValueForbidden", "fieldPath": ".color"}],
        "properties": {
            "minReplicas": {"type": "integer"}, "maxReplicas": {"type": "integer"}, "color": {"type": "string"},
            "id": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "id is immutable"}]},
            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                      "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}},
                                "x-kubernetes-validations": [{"rule": "self.port >= oldSelf.port", "message": "ports only grow"}]}},
            "tags": {"type": "object", "additionalProperties": {"type": "string",
                     "x-kubernetes-validations": [{"rule": "self.size() <= 5"}]}}}}},
        "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('w')", "reason": "FieldValueRequired", "message": "name must start with w"}]})
}

#[test]
fn a_valid_object_passes_and_failures_name_the_node() {
    let rules = rules(widget_schema());
    let good = json!({"metadata": {"name": "w1", "uid": "x"},
        "spec": {"minReplicas": 1, "maxReplicas": 3, "color": "red", "tags": {"a": "short"}}});
    assert_eq!(causes(&rules, good, None), Vec::<String>::new());
    let bad = json!({"metadata": {"name": "x1"},
        "spec": {"minReplicas": 5, "maxReplicas": 3, "color": "black", "tags": {"a": "much too long"}}});
    assert_eq!(
        causes(&rules, bad, None),
        vec![
            "FieldValueRequired <nil>: Required value: name must start with w",
            "FieldValueInvalid spec: Invalid value: \"object\": minReplicas must not exceed maxReplicas",
            "FieldValueForbidden spec.color: Forbidden: color black is not allowed",
            "FieldValueInvalid spec.tags[a]: Invalid value: \"string\": failed rule: self.size() <= 5",
        ]
    );
}

#[test]
fn transition_rules_run_only_with_an_old_value() {
    let rules = rules(widget_schema());
    let new = json!({"metadata": {"name": "w"}, "spec": {"minReplicas": 1, "maxReplicas": 1, "color": "red", "id": "b",
        "ports": [{"name": "http", "port": 80}, {"name": "new", "port": 1}]}});
    assert_eq!(causes(&rules, new.clone(), None), Vec::<String>::new());
    let old = json!({"metadata": {"name": "w"}, "spec": {"id": "a", "ports": [{"name": "http", "port": 8080}]}});
    assert_eq!(
        causes(&rules, new, Some(old)),
        vec![
            "FieldValueInvalid spec.id: Invalid value: \"string\": id is immutable",
            "FieldValueInvalid spec.ports[0]: Invalid value: \"object\": ports only grow",
        ]
    );
}

#[test]
fn optional_old_self_runs_on_create_with_none() {
    let rules = rules(
        json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"a": {"type": "string"}},
        "x-kubernetes-validations": [{"rule": "!oldSelf.hasValue() || self.a == oldSelf.value().a",
                                      "optionalOldSelf": true, "message": "a is fixed"}]}}}),
    );
    let obj = json!({"spec": {"a": "x"}});
    assert!(causes(&rules, obj.clone(), None).is_empty());
    let old = json!({"spec": {"a": "y"}});
    assert_eq!(
        causes(&rules, obj, Some(old)),
        vec!["FieldValueInvalid spec: Invalid value: \"object\": a is fixed"]
    );
}

#[test]
fn evaluation_errors_are_causes() {
    let rules = rules(
        json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-validations": [{"rule": "self.missing > 1"}]}}}),
    );
    let found = causes(&rules, json!({"spec": {}}), None);
    assert_eq!(found.len(), 1);
    assert!(
        found[0].starts_with("FieldValueInvalid spec: Invalid value: \"object\": No such key: missing evaluating rule: self.missing > 1"),
        "{found:?}"
    );
}

#[test]
fn runaway_rules_are_stopped_before_they_run() {
    let rules = rules(
        json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.items.all(a, self.items.all(b, self.items.all(c, a + b + c >= 0)))"},
            {"rule": "false"}],
        "properties": {"items": {"type": "array", "items": {"type": "integer"}}}}}}),
    );
    let items: Vec<i64> = (0..300).collect();
    let found = causes(&rules, json!({"spec": {"items": items}}), None);
    assert_eq!(found.len(), 1, "no further rules run: {found:?}");
    assert!(found[0].contains("'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: self.items.all"), "{found:?}");
}

fn checked(schema: Value) -> Vec<String> {
    check(
        &serde_json::from_value(schema).unwrap(),
        "spec.validation.openAPIV3Schema",
    )
    .into_iter()
    .map(|c| format!("{}: {}", c.field, c.message))
    .collect()
}

#[test]
fn wrong_rules_refuse_the_definition() {
    let found = checked(
        json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.a <"},
            {"rule": "self.a == 1", "reason": "Nope"},
            {"rule": "self.a == 1", "fieldPath": ".b"},
            {"rule": "other == 1"}],
        "properties": {"a": {"type": "integer"}, "list": {"type": "array", "items": {"type": "string",
            "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}}}}}),
    );
    let at = "spec.validation.openAPIV3Schema.properties[spec]";
    assert_eq!(found.len(), 5, "{found:#?}");
    assert!(found[0].starts_with(&format!(
        "{at}.x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{{Rule:\"self.a <\", Message:\"\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}}: compilation failed: ERROR: <input>:1:"
    )), "{}", found[0]);
    assert!(found[1].starts_with(&format!(
        "{at}.x-kubernetes-validations[1].reason: Unsupported value: \"Nope\""
    )));
    assert_eq!(found[2], format!("{at}.x-kubernetes-validations[2].fieldPath: Invalid value: \".b\": fieldPath must be a valid path: does not refer to a valid field"));
    assert!(found[3].ends_with("undeclared reference to 'other' (in container '')"));
    assert_eq!(found[4], format!("{at}.properties[list].items.x-kubernetes-validations[0].rule: Invalid value: \"self == oldSelf\": oldSelf cannot be used on the uncorrelatable portion of the schema within {at}.properties[list]"));
}

#[test]
fn unchanged_values_are_not_held_to_new_rules() {
    let rules = rules(widget_schema());
    let stored = json!({"metadata": {"name": "w"}, "spec": {"minReplicas": 5, "maxReplicas": 1, "color": "red",
        "tags": {"old": "far too long"}}});
    let mut update = stored.clone();
    update["spec"]["tags"]["new"] = json!("short");
    assert_eq!(
        causes(&rules, update.clone(), Some(stored.clone())),
        vec!["FieldValueInvalid spec: Invalid value: \"object\": minReplicas must not exceed maxReplicas"],
        "spec changed, so its rules run; the unchanged tag's do not"
    );
    let mut untouched_spec = stored.clone();
    untouched_spec["metadata"]["labels"] = json!({"a": "b"});
    assert!(causes(&rules, untouched_spec, Some(stored)).is_empty());
}
