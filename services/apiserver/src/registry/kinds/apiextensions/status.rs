//! A CRD's status as kube's naming and establishing controllers keep it:
//! `acceptedNames` and the `NamesAccepted` condition (a plural, short
//! name, kind or list kind another CRD of the group holds is refused),
//! then `Established` once the names are accepted.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{json, Value};

use crate::object::time::now_rfc3339;

/// The typed form of a stored CRD (None if it does not fit the type).
pub fn typed(obj: &Value) -> Option<CustomResourceDefinition> {
    serde_json::from_value(obj.clone()).ok()
}

pub fn condition(kind: &str, status: &str, reason: &str, message: &str) -> Value {
    json!({"type": kind, "status": status, "reason": reason, "message": message})
}

/// Sets one condition in `obj.status.conditions`, keeping its transition
/// time when the status does not change.
pub fn set_condition(obj: &mut Value, mut condition: Value) {
    if !obj["status"].is_object() {
        obj["status"] = json!({});
    }
    if !obj["status"]["conditions"].is_array() {
        obj["status"]["conditions"] = json!([]);
    }
    let list = obj["status"]["conditions"]
        .as_array_mut()
        .expect("an array");
    let existing = list.iter_mut().find(|c| c["type"] == condition["type"]);
    match existing {
        Some(old) if old["status"] == condition["status"] => {
            condition["lastTransitionTime"] = old["lastTransitionTime"].clone();
            *old = condition;
        }
        Some(old) => {
            condition["lastTransitionTime"] = now_rfc3339().into();
            *old = condition;
        }
        None => {
            condition["lastTransitionTime"] = now_rfc3339().into();
            list.push(condition);
        }
    }
}

pub fn has_condition(obj: &Value, kind: &str) -> bool {
    let list = obj["status"]["conditions"].as_array();
    list.into_iter()
        .flatten()
        .any(|c| c["type"] == kind && c["status"] == "True")
}

/// The names `other` holds in its group (accepted ones).
fn held_names(other: &CustomResourceDefinition) -> (Vec<String>, Vec<String>) {
    let Some(names) = other
        .status
        .as_ref()
        .and_then(|s| s.accepted_names.as_ref())
    else {
        return (Vec::new(), Vec::new());
    };
    let mut resources = vec![names.plural.clone()];
    resources.extend(names.singular.clone());
    resources.extend(names.short_names.clone().unwrap_or_default());
    let mut kinds = vec![names.kind.clone()];
    kinds.extend(names.list_kind.clone());
    (resources, kinds)
}

/// Why `crd`'s names cannot be accepted given `others`, as kube's
/// naming controller words it: (reason, message).
fn conflict(
    crd: &CustomResourceDefinition,
    others: &[CustomResourceDefinition],
) -> Option<(&'static str, String)> {
    let names = &crd.spec.names;
    for other in others {
        if other.metadata.name == crd.metadata.name || other.spec.group != crd.spec.group {
            continue;
        }
        let (resources, kinds) = held_names(other);
        if resources.contains(&names.plural) {
            return Some((
                "PluralConflict",
                format!("{:?} is already in use", names.plural),
            ));
        }
        if let Some(singular) = names.singular.as_ref().filter(|s| resources.contains(s)) {
            return Some((
                "SingularConflict",
                format!("{singular:?} is already in use"),
            ));
        }
        for short in names.short_names.iter().flatten() {
            if resources.contains(short) {
                return Some(("ShortNamesConflict", format!("{short:?} is already in use")));
            }
        }
        if kinds.contains(&names.kind) {
            return Some((
                "KindConflict",
                format!("{:?} is already in use", names.kind),
            ));
        }
        if let Some(list_kind) = names.list_kind.as_ref().filter(|l| kinds.contains(l)) {
            return Some((
                "ListKindConflict",
                format!("{list_kind:?} is already in use"),
            ));
        }
    }
    None
}

/// `obj` (a stored CRD) with its names and conditions brought up to date.
pub fn reconciled(obj: &Value, others: &[CustomResourceDefinition]) -> Value {
    let mut next = obj.clone();
    let Some(crd) = typed(obj) else {
        return next;
    };
    match conflict(&crd, others) {
        None => {
            let mut accepted = obj["spec"]["names"].clone();
            if accepted["listKind"].is_null() {
                accepted["listKind"] = format!("{}List", crd.spec.names.kind).into();
            }
            if accepted["singular"].is_null() {
                accepted["singular"] = crd.spec.names.kind.to_lowercase().into();
            }
            next["status"]["acceptedNames"] = accepted;
            set_condition(
                &mut next,
                condition("NamesAccepted", "True", "NoConflicts", "no conflicts found"),
            );
            set_condition(
                &mut next,
                condition(
                    "Established",
                    "True",
                    "InitialNamesAccepted",
                    "the initial names have been accepted",
                ),
            );
        }
        Some((reason, message)) => {
            set_condition(
                &mut next,
                condition("NamesAccepted", "False", reason, &message),
            );
            if !has_condition(obj, "Established") {
                set_condition(
                    &mut next,
                    condition(
                        "Established",
                        "False",
                        "NotAccepted",
                        "not all names are accepted",
                    ),
                );
            }
        }
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(name: &str, plural: &str, kind: &str) -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name}, "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": plural, "kind": kind}, "versions": []}, "status": {}})
    }

    #[test]
    fn free_names_are_accepted_and_established() {
        let next = reconciled(&crd("widgets.example.com", "widgets", "Widget"), &[]);
        assert!(has_condition(&next, "NamesAccepted"));
        assert!(has_condition(&next, "Established"));
        assert_eq!(next["status"]["acceptedNames"]["listKind"], "WidgetList");
    }

    #[test]
    fn a_kind_another_definition_holds_is_refused() {
        let first = reconciled(&crd("widgets.example.com", "widgets", "Widget"), &[]);
        let first = typed(&first).unwrap();
        let next = reconciled(&crd("gadgets.example.com", "gadgets", "Widget"), &[first]);
        assert!(!has_condition(&next, "NamesAccepted"));
        assert!(!has_condition(&next, "Established"));
        let accepted = &next["status"]["conditions"][0];
        assert_eq!(accepted["reason"], "KindConflict");
        assert_eq!(accepted["message"], "\"Widget\" is already in use");
    }
}
