//! The pod spec checks users run into most, with Kubernetes' field paths
//! and messages: container names unique across all container lists,
//! container ports in range and unique by name, a known restartPolicy,
//! volume names unique and every volume mount naming a volume, env var
//! names present, tolerations whose operator, value, effect and seconds
//! agree (every node component matches them by those rules).

use std::collections::HashSet;

use serde_json::Value;

use crate::error::Cause;

const CONTAINER_LISTS: [&str; 2] = ["initContainers", "containers"];

fn duplicate(field: String, value: &str) -> Cause {
    Cause {
        reason: "FieldValueDuplicate",
        field,
        message: format!("Duplicate value: {}", Value::from(value)),
    }
}

fn not_found(field: String, value: &str) -> Cause {
    Cause {
        reason: "FieldValueNotFound",
        field,
        message: format!("Not found: {}", Value::from(value)),
    }
}

fn unsupported(field: String, value: &str, allowed: &[&str]) -> Cause {
    let allowed: Vec<String> = allowed.iter().map(|a| format!("{a:?}")).collect();
    Cause {
        reason: "FieldValueNotSupported",
        field,
        message: format!(
            "Unsupported value: {}: supported values: {}",
            Value::from(value),
            allowed.join(", ")
        ),
    }
}

fn items(value: &Value) -> impl Iterator<Item = (usize, &Value)> {
    value.as_array().into_iter().flatten().enumerate()
}

pub fn validate(spec: &Value, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let volumes = volume_names(spec, path, &mut causes);
    let mut names = HashSet::new();
    for list in CONTAINER_LISTS {
        for (i, container) in items(&spec[list]) {
            let here = format!("{path}.{list}[{i}]");
            if let Some(name) = container["name"].as_str().filter(|n| !n.is_empty()) {
                if !names.insert(name) {
                    causes.push(duplicate(format!("{here}.name"), name));
                }
            }
            container_ports(container, &here, &mut causes);
            mounts(container, &here, &volumes, &mut causes);
            env(container, &here, &mut causes);
        }
    }
    for (i, toleration) in items(&spec["tolerations"]) {
        tolerations(toleration, &format!("{path}.tolerations[{i}]"), &mut causes);
    }
    if let Some(policy) = spec["restartPolicy"].as_str() {
        let allowed = ["Always", "OnFailure", "Never"];
        if !allowed.contains(&policy) {
            causes.push(unsupported(
                format!("{path}.restartPolicy"),
                policy,
                &allowed,
            ));
        }
    }
    causes
}

/// kube's rules for one toleration.
fn tolerations(toleration: &Value, here: &str, causes: &mut Vec<Cause>) {
    let text = |field: &str| toleration[field].as_str().unwrap_or_default();
    let (key, operator, value, effect) =
        (text("key"), text("operator"), text("value"), text("effect"));
    match operator {
        "Exists" if !value.is_empty() => causes.push(Cause::invalid(
            format!("{here}.operator"),
            toleration["operator"].as_str().unwrap_or_default(),
            "value must be empty when `operator` is 'Exists'",
        )),
        "Exists" => {}
        _ if key.is_empty() => causes.push(Cause::invalid(
            format!("{here}.operator"),
            operator,
            "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
        )),
        "" | "Equal" => {}
        other => causes.push(unsupported(format!("{here}.operator"), other, &["Equal", "Exists"])),
    }
    let effects = ["NoSchedule", "PreferNoSchedule", "NoExecute"];
    if !effect.is_empty() && !effects.contains(&effect) {
        causes.push(unsupported(format!("{here}.effect"), effect, &effects));
    }
    if !toleration["tolerationSeconds"].is_null() && effect != "NoExecute" {
        causes.push(Cause::invalid(
            format!("{here}.effect"),
            effect,
            "effect must be 'NoExecute' when `tolerationSeconds` is set",
        ));
    }
}

fn volume_names<'a>(spec: &'a Value, path: &str, causes: &mut Vec<Cause>) -> HashSet<&'a str> {
    let mut names = HashSet::new();
    for (i, volume) in items(&spec["volumes"]) {
        match volume["name"].as_str().filter(|n| !n.is_empty()) {
            None => causes.push(Cause::required(format!("{path}.volumes[{i}].name"))),
            Some(name) if !names.insert(name) => {
                causes.push(duplicate(format!("{path}.volumes[{i}].name"), name))
            }
            Some(_) => {}
        }
    }
    names
}

fn container_ports(container: &Value, here: &str, causes: &mut Vec<Cause>) {
    let mut names = HashSet::new();
    for (i, port) in items(&container["ports"]) {
        let field = format!("{here}.ports[{i}]");
        match port["containerPort"].as_i64() {
            None => causes.push(Cause::required(format!("{field}.containerPort"))),
            Some(n) if !(1..=65535).contains(&n) => causes.push(Cause::invalid(
                format!("{field}.containerPort"),
                &n.to_string(),
                "must be between 1 and 65535, inclusive",
            )),
            Some(_) => {}
        }
        if let Some(name) = port["name"].as_str().filter(|n| !n.is_empty()) {
            if !names.insert(name) {
                causes.push(duplicate(format!("{field}.name"), name));
            }
        }
        if let Some(protocol) = port["protocol"].as_str() {
            let allowed = ["SCTP", "TCP", "UDP"];
            if !allowed.contains(&protocol) {
                causes.push(unsupported(format!("{field}.protocol"), protocol, &allowed));
            }
        }
    }
}

fn mounts(container: &Value, here: &str, volumes: &HashSet<&str>, causes: &mut Vec<Cause>) {
    for (i, mount) in items(&container["volumeMounts"]) {
        let field = format!("{here}.volumeMounts[{i}]");
        match mount["name"].as_str().filter(|n| !n.is_empty()) {
            None => causes.push(Cause::required(format!("{field}.name"))),
            Some(name) if !volumes.contains(name) => {
                causes.push(not_found(format!("{field}.name"), name))
            }
            Some(_) => {}
        }
        if mount["mountPath"].as_str().is_none_or(str::is_empty) {
            causes.push(Cause::required(format!("{field}.mountPath")));
        }
    }
}

fn env(container: &Value, here: &str, causes: &mut Vec<Cause>) {
    for (i, var) in items(&container["env"]) {
        if var["name"].as_str().is_none_or(str::is_empty) {
            causes.push(Cause::required(format!("{here}.env[{i}].name")));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(spec: Value) -> Vec<String> {
        validate(&spec, "spec")
            .into_iter()
            .map(|c| format!("{} {}", c.field, c.reason))
            .collect()
    }

    #[test]
    fn a_sound_spec_passes() {
        let spec = json!({"restartPolicy": "Never", "volumes": [{"name": "data"}],
            "containers": [{"name": "a", "image": "x", "ports": [{"containerPort": 80, "name": "http"}],
                            "volumeMounts": [{"name": "data", "mountPath": "/d"}], "env": [{"name": "K"}]}]});
        assert!(fields(spec).is_empty());
    }

    #[test]
    fn common_mistakes_are_named_by_field() {
        let spec = json!({"restartPolicy": "Sometimes", "volumes": [{"name": "v"}, {"name": "v"}],
            "initContainers": [{"name": "a"}],
            "containers": [{"name": "a", "ports": [{"containerPort": 70000}, {"containerPort": 1, "protocol": "ICMP"}],
                            "volumeMounts": [{"name": "w", "mountPath": ""}], "env": [{"value": "x"}]}]});
        assert_eq!(
            fields(spec),
            [
                "spec.volumes[1].name FieldValueDuplicate",
                "spec.containers[0].name FieldValueDuplicate",
                "spec.containers[0].ports[0].containerPort FieldValueInvalid",
                "spec.containers[0].ports[1].protocol FieldValueNotSupported",
                "spec.containers[0].volumeMounts[0].name FieldValueNotFound",
                "spec.containers[0].volumeMounts[0].mountPath FieldValueRequired",
                "spec.containers[0].env[0].name FieldValueRequired",
                "spec.restartPolicy FieldValueNotSupported",
            ]
        );
    }

    #[test]
    fn tolerations_follow_kubes_rules() {
        let spec = json!({"containers": [{"name": "a"}], "tolerations": [
            {"operator": "Exists"},
            {"key": "k", "value": "v", "effect": "NoExecute", "tolerationSeconds": 30},
            {"value": "v"},
            {"key": "k", "operator": "Exists", "value": "v"},
            {"key": "k", "operator": "Above"},
            {"key": "k", "effect": "Sometimes"},
            {"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5}]});
        assert_eq!(
            fields(spec),
            [
                "spec.tolerations[2].operator FieldValueInvalid",
                "spec.tolerations[3].operator FieldValueInvalid",
                "spec.tolerations[4].operator FieldValueNotSupported",
                "spec.tolerations[5].effect FieldValueNotSupported",
                "spec.tolerations[6].effect FieldValueInvalid",
            ]
        );
    }
}
