//! admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy and
//! ValidatingAdmissionPolicyBinding, cluster-scoped. A policy whose CEL
//! does not compile is refused here (422 naming the expression's field),
//! so the ValidatingAdmissionPolicy plugin only meets compiled ones.

use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use serde_json::{json, Value};

use crate::admission::policy::compiled::Compiled;
use crate::error::Cause;
use crate::registry::definition::ResourceDef;
use crate::registry::kinds::common::defaults::default_at;
use crate::registry::kinds::common::simple::{simple, Simple};
use crate::registry::kinds::common::validation::{
    check_enum, invalid, items, required, unsupported,
};
use crate::registry::strategy::{age_cell, Column, Strategy, AGE};
use crate::registry::subresource::STATUS;

const GROUP: &str = "admissionregistration.k8s.io";
const ACTIONS: &[&str] = &["Audit", "Deny", "Warn"];

pub fn all() -> Vec<Arc<dyn Strategy>> {
    let policies = Simple::<ValidatingAdmissionPolicy> {
        columns: || {
            vec![
                Column::new(
                    "Validations",
                    "integer",
                    "validations is the number of validations in the policy.",
                ),
                Column::new(
                    "ParamKind",
                    "string",
                    "paramKind is the kind of the policy's parameters.",
                ),
                AGE,
            ]
        },
        cells: |o| {
            let count = o["spec"]["validations"].as_array().map_or(0, Vec::len);
            let kind = &o["spec"]["paramKind"];
            let param = match kind.is_object() {
                true => format!(
                    "{}/{}",
                    kind["apiVersion"].as_str().unwrap_or(""),
                    kind["kind"].as_str().unwrap_or("")
                ),
                false => "<unset>".into(),
            };
            vec![json!(count), json!(param), age_cell(o)]
        },
        validate: validate_policy,
        validate_update: |new, _| validate_policy(new),
        defaults: default_policy,
        ..simple(cluster(
            "validatingadmissionpolicies",
            "ValidatingAdmissionPolicy",
            "validatingadmissionpolicy",
            true,
        ))
    };
    let bindings = Simple::<ValidatingAdmissionPolicyBinding> {
        columns: || {
            vec![
                Column::new(
                    "PolicyName",
                    "string",
                    "policyName references a ValidatingAdmissionPolicy name.",
                ),
                Column::new(
                    "ParamRef",
                    "string",
                    "paramRef names the parameters of the policy.",
                ),
                AGE,
            ]
        },
        cells: |o| {
            let param = o["spec"]["paramRef"]["name"].as_str().unwrap_or("<unset>");
            vec![o["spec"]["policyName"].clone(), json!(param), age_cell(o)]
        },
        validate: validate_binding,
        validate_update: |new, _| validate_binding(new),
        ..simple(cluster(
            "validatingadmissionpolicybindings",
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybinding",
            false,
        ))
    };
    vec![Arc::new(policies), Arc::new(bindings)]
}

fn cluster(
    resource: &'static str,
    kind: &'static str,
    singular: &'static str,
    status: bool,
) -> ResourceDef {
    ResourceDef {
        namespaced: false,
        subresources: if status { &[STATUS] } else { &[] },
        categories: &["api-extensions"],
        ..crate::registry::kinds::common::simple::def(GROUP, resource, kind, singular)
    }
}

/// kube's defaults: fail closed, Equivalent matching, select everything.
fn default_policy(policy: &mut Value) {
    default_at(policy, &["spec", "failurePolicy"], json!("Fail"));
    if policy["spec"]["matchConstraints"].is_object() {
        for (field, value) in [
            ("matchPolicy", json!("Equivalent")),
            ("namespaceSelector", json!({})),
            ("objectSelector", json!({})),
        ] {
            default_at(policy, &["spec", "matchConstraints", field], value);
        }
    }
}

fn validate_policy(policy: &Value) -> Vec<Cause> {
    let spec = &policy["spec"];
    let mut causes = Vec::new();
    if !spec["matchConstraints"].is_object() {
        causes.push(Cause::required("spec.matchConstraints"));
    } else if spec["matchConstraints"]["resourceRules"]
        .as_array()
        .is_none_or(Vec::is_empty)
    {
        causes.push(Cause::required("spec.matchConstraints.resourceRules"));
    }
    let none = |field: &str| spec[field].as_array().is_none_or(Vec::is_empty);
    if none("validations") && none("auditAnnotations") {
        let why = "validations or auditAnnotations must contain at least one item";
        causes.push(required("spec.validations", why));
    }
    check_enum(
        policy,
        "/spec/failurePolicy",
        "spec.failurePolicy",
        &["Fail", "Ignore"],
        &mut causes,
    );
    for (i, _) in items(&spec["validations"]) {
        let reasons = [
            "Unauthorized",
            "Forbidden",
            "Invalid",
            "RequestEntityTooLarge",
        ];
        let pointer = format!("/spec/validations/{i}/reason");
        check_enum(
            policy,
            &pointer,
            &format!("spec.validations[{i}].reason"),
            &reasons,
            &mut causes,
        );
        if spec["validations"][i]["expression"]
            .as_str()
            .is_none_or(str::is_empty)
        {
            causes.push(Cause::required(format!("spec.validations[{i}].expression")));
        }
    }
    let kind = &spec["paramKind"];
    if kind.is_object() {
        for field in ["apiVersion", "kind"] {
            if kind[field].as_str().is_none_or(str::is_empty) {
                causes.push(Cause::required(format!("spec.paramKind.{field}")));
            }
        }
    }
    if let Err(bad) = Compiled::from_policy(policy) {
        causes.extend(
            bad.into_iter()
                .map(|b| Cause::invalid(b.field, &b.source, b.why)),
        );
    }
    causes
}

fn validate_binding(binding: &Value) -> Vec<Cause> {
    let spec = &binding["spec"];
    let mut causes = Vec::new();
    if spec["policyName"].as_str().is_none_or(str::is_empty) {
        causes.push(Cause::required("spec.policyName"));
    }
    let actions: Vec<&Value> = items(&spec["validationActions"]).map(|(_, a)| a).collect();
    if actions.is_empty() {
        causes.push(Cause::required("spec.validationActions"));
    }
    for (i, action) in actions.iter().enumerate() {
        if !action.as_str().is_some_and(|a| ACTIONS.contains(&a)) {
            causes.push(unsupported(
                format!("spec.validationActions[{i}]"),
                action,
                ACTIONS,
            ));
        }
    }
    let has = |name: &str| actions.iter().any(|a| *a == name);
    if has("Deny") && has("Warn") {
        causes.push(Cause::invalid(
            "spec.validationActions",
            "Deny, Warn",
            "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        ));
    }
    if spec["paramRef"].is_object() {
        validate_param_ref(&spec["paramRef"], &mut causes);
    }
    causes
}

/// kube's rules for `spec.paramRef`: a name or a selector (not both), a
/// name that can be a path segment, and a parameterNotFoundAction.
fn validate_param_ref(reference: &Value, causes: &mut Vec<Cause>) {
    const FIELD: &str = "spec.paramRef";
    let name = reference["name"].as_str().unwrap_or_default();
    let selector = &reference["selector"];
    let exclusive = "name and selector are mutually exclusive";
    if !name.is_empty() {
        for why in path_segment_problems(name) {
            causes.push(Cause::invalid(format!("{FIELD}.name"), name, why));
        }
        if selector.is_object() {
            causes.push(Cause::forbidden(format!("{FIELD}.name"), exclusive));
        }
    }
    if selector.is_object() {
        if let Err(e) = crate::object::selector::LabelSelector::from_object(selector) {
            causes.push(invalid(
                format!("{FIELD}.selector"),
                selector,
                &e.to_string(),
            ));
        }
        if !name.is_empty() {
            causes.push(Cause::forbidden(format!("{FIELD}.selector"), exclusive));
        }
    }
    if name.is_empty() && !selector.is_object() {
        causes.push(required(FIELD, "one of name or selector must be specified"));
    }
    let action = &reference["parameterNotFoundAction"];
    match action.as_str() {
        None | Some("") => causes.push(Cause::required(format!("{FIELD}.parameterNotFoundAction"))),
        Some("Deny" | "Allow") => {}
        Some(_) => causes.push(unsupported(
            format!("{FIELD}.parameterNotFoundAction"),
            action,
            &["Deny", "Allow"],
        )),
    }
}

/// kube's `ValidatePathSegmentName`.
fn path_segment_problems(name: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if name == "." || name == ".." {
        problems.push(format!("may not be '{name}'"));
    }
    for bad in ["/", "%"] {
        if name.contains(bad) {
            problems.push(format!("may not contain '{bad}'"));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(validation: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["deployments"]}]},
            "validations": [validation]}})
    }

    #[test]
    fn a_policy_must_compile() {
        assert_eq!(
            validate_policy(&policy(json!({"expression": "object.spec.replicas <= 5"}))),
            []
        );
        let causes = validate_policy(&policy(json!({"expression": "object.spec.replicas <="})));
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec.validations[0].expression");
        assert!(
            causes[0].message.starts_with(
                "Invalid value: \"object.spec.replicas <=\": compilation failed: ERROR: <input>:1:"
            ),
            "{}",
            causes[0].message
        );
        let empty = validate_policy(&json!({"spec": {}}));
        let fields: Vec<&str> = empty.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["spec.matchConstraints", "spec.validations"]);
    }

    #[test]
    fn defaults_fill_kubes_values() {
        let mut p = policy(json!({"expression": "true"}));
        default_policy(&mut p);
        assert_eq!(p["spec"]["failurePolicy"], "Fail");
        assert_eq!(p["spec"]["matchConstraints"]["matchPolicy"], "Equivalent");
        assert_eq!(p["spec"]["matchConstraints"]["objectSelector"], json!({}));
    }

    #[test]
    fn a_binding_names_a_policy_and_known_actions() {
        let ok = json!({"spec": {"policyName": "p", "validationActions": ["Deny", "Audit"]}});
        assert_eq!(validate_binding(&ok), []);
        let bad = json!({"spec": {"validationActions": ["Deny", "Warn", "Shout"]}});
        let fields: Vec<String> = validate_binding(&bad)
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(
            fields,
            [
                "spec.policyName",
                "spec.validationActions[2]",
                "spec.validationActions"
            ]
        );
    }

    #[test]
    fn a_param_ref_has_a_name_or_a_selector_and_an_action() {
        let binding = |reference: Value| {
            let spec =
                json!({"policyName": "p", "validationActions": ["Deny"], "paramRef": reference});
            validate_binding(&json!({ "spec": spec }))
                .into_iter()
                .map(|c| format!("{}: {}", c.field, c.message))
                .collect::<Vec<_>>()
        };
        let by_name = json!({"name": "limits", "parameterNotFoundAction": "Deny"});
        assert_eq!(binding(by_name), Vec::<String>::new());
        let both = json!({"name": "a/b", "selector": {"matchLabels": {"x": "y"}},
            "parameterNotFoundAction": "Maybe"});
        assert_eq!(
            binding(both),
            [
                "spec.paramRef.name: Invalid value: \"a/b\": may not contain '/'",
                "spec.paramRef.name: Forbidden: name and selector are mutually exclusive",
                "spec.paramRef.selector: Forbidden: name and selector are mutually exclusive",
                "spec.paramRef.parameterNotFoundAction: Unsupported value: \"Maybe\": supported values: \"Deny\", \"Allow\"",
            ]
        );
        assert_eq!(
            binding(json!({})),
            [
                "spec.paramRef: Required value: one of name or selector must be specified",
                "spec.paramRef.parameterNotFoundAction: Required value",
            ]
        );
    }
}
