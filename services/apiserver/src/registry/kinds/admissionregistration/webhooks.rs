//! admissionregistration.k8s.io/v1 MutatingWebhookConfiguration and
//! ValidatingWebhookConfiguration: cluster-scoped lists of webhooks the
//! admission plugins call (`crate::admission::webhook`). Defaults and
//! validation follow kube's, with its messages.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use serde_json::{json, Value};

use crate::admission::policy::expressions::compile;
use crate::error::Cause;
use crate::registry::definition::ResourceDef;
use crate::registry::kinds::common::defaults::default_at;
use crate::registry::kinds::common::simple::{simple, Simple};
use crate::registry::kinds::common::validation::{
    check_enum, invalid, items, required, text, unsupported,
};
use crate::registry::strategy::{age_cell, Column, Strategy, AGE};

const GROUP: &str = "admissionregistration.k8s.io";

pub fn all() -> Vec<Arc<dyn Strategy>> {
    vec![
        Arc::new(Simple::<MutatingWebhookConfiguration> {
            columns,
            cells,
            validate: |o| validate(o, true),
            defaults: |o| defaults(o, true),
            ..simple(cluster_def(
                "mutatingwebhookconfigurations",
                "MutatingWebhookConfiguration",
                "mutatingwebhookconfiguration",
            ))
        }),
        Arc::new(Simple::<ValidatingWebhookConfiguration> {
            columns,
            cells,
            validate: |o| validate(o, false),
            defaults: |o| defaults(o, false),
            ..simple(cluster_def(
                "validatingwebhookconfigurations",
                "ValidatingWebhookConfiguration",
                "validatingwebhookconfiguration",
            ))
        }),
    ]
}

fn cluster_def(resource: &'static str, kind: &'static str, singular: &'static str) -> ResourceDef {
    ResourceDef {
        namespaced: false,
        categories: &["api-extensions"],
        ..crate::registry::kinds::common::simple::def(GROUP, resource, kind, singular)
    }
}

/// kube's SetDefaults for each webhook (and its rules and service).
fn defaults(obj: &mut Value, mutating: bool) {
    let Some(webhooks) = obj["webhooks"].as_array_mut() else {
        return;
    };
    for hook in webhooks.iter_mut().filter(|h| h.is_object()) {
        default_at(hook, &["failurePolicy"], json!("Fail"));
        default_at(hook, &["matchPolicy"], json!("Equivalent"));
        default_at(hook, &["namespaceSelector"], json!({}));
        default_at(hook, &["objectSelector"], json!({}));
        default_at(hook, &["timeoutSeconds"], json!(10));
        if mutating {
            default_at(hook, &["reinvocationPolicy"], json!("Never"));
        }
        if hook["clientConfig"]["service"].is_object() {
            default_at(hook, &["clientConfig", "service", "port"], json!(443));
        }
        for rule in hook["rules"].as_array_mut().into_iter().flatten() {
            if rule.is_object() {
                default_at(rule, &["scope"], json!("*"));
            }
        }
    }
}

fn validate(obj: &Value, mutating: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut names = HashSet::new();
    for (i, hook) in items(&obj["webhooks"]) {
        let path = format!("webhooks[{i}]");
        let name = text(hook, "/name");
        if !names.insert(name) && !name.is_empty() {
            causes.push(Cause {
                reason: "FieldValueDuplicate",
                field: format!("{path}.name"),
                message: format!("Duplicate value: {name:?}"),
            });
        }
        validate_webhook(hook, &path, mutating, &mut causes);
    }
    causes
}

fn validate_webhook(hook: &Value, path: &str, mutating: bool, causes: &mut Vec<Cause>) {
    validate_name(hook, path, causes);
    for (j, rule) in items(&hook["rules"]) {
        validate_rule(rule, &format!("{path}.rules[{j}]"), causes);
    }
    let enums: [(&str, &[&str]); 3] = [
        ("failurePolicy", &["Fail", "Ignore"]),
        ("matchPolicy", &["Equivalent", "Exact"]),
        ("reinvocationPolicy", &["IfNeeded", "Never"]),
    ];
    for (field, allowed) in enums {
        if field != "reinvocationPolicy" || mutating {
            let pointer = format!("/{field}");
            check_enum(hook, &pointer, &format!("{path}.{field}"), allowed, causes);
        }
    }
    validate_side_effects(hook, path, causes);
    if let Some(timeout) = hook["timeoutSeconds"].as_i64() {
        if !(1..=30).contains(&timeout) {
            let why = "the timeout value must be between 1 and 30 seconds";
            causes.push(invalid(
                format!("{path}.timeoutSeconds"),
                &json!(timeout),
                why,
            ));
        }
    }
    validate_versions(hook, path, causes);
    validate_client_config(
        &hook["clientConfig"],
        &format!("{path}.clientConfig"),
        causes,
    );
    for selector in ["namespaceSelector", "objectSelector"] {
        validate_selector(&hook[selector], &format!("{path}.{selector}"), causes);
    }
    validate_match_conditions(&hook["matchConditions"], path, causes);
}

/// kube's limit on a webhook's matchConditions.
const MAX_MATCH_CONDITIONS: usize = 64;

/// Each condition named once and its CEL compiling, so the plugins only
/// ever meet expressions that compile.
fn validate_match_conditions(conditions: &Value, path: &str, causes: &mut Vec<Cause>) {
    let count = conditions.as_array().map_or(0, Vec::len);
    if count > MAX_MATCH_CONDITIONS {
        causes.push(Cause {
            reason: "FieldValueTooMany",
            field: format!("{path}.matchConditions"),
            message: format!("Too many: {count}: must have at most {MAX_MATCH_CONDITIONS} items"),
        });
    }
    let mut seen = HashSet::new();
    for (i, condition) in items(conditions) {
        let at = format!("{path}.matchConditions[{i}]");
        let name = text(condition, "/name");
        if name.is_empty() {
            causes.push(Cause::required(format!("{at}.name")));
        } else if !seen.insert(name) {
            causes.push(Cause {
                reason: "FieldValueDuplicate",
                field: format!("{at}.name"),
                message: format!("Duplicate value: {name:?}"),
            });
        }
        let expression = text(condition, "/expression");
        if expression.is_empty() {
            causes.push(Cause::required(format!("{at}.expression")));
        } else if let Err(why) = compile(expression) {
            causes.push(invalid(
                format!("{at}.expression"),
                &json!(expression),
                &why,
            ));
        }
    }
}

/// A webhook's name is a DNS subdomain of at least three segments.
fn validate_name(hook: &Value, path: &str, causes: &mut Vec<Cause>) {
    let field = format!("{path}.name");
    let name = text(hook, "/name");
    if name.is_empty() {
        causes.push(Cause::required(field));
        return;
    }
    let subdomain = name.len() <= 253
        && name.split('.').all(|part| {
            !part.is_empty()
                && part.len() <= 63
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        });
    if !subdomain {
        let why = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
        causes.push(invalid(field, &json!(name), why));
    } else if name.split('.').count() < 3 {
        let why = "should be a domain with at least three segments separated by dots";
        causes.push(invalid(field, &json!(name), why));
    }
}

fn validate_rule(rule: &Value, path: &str, causes: &mut Vec<Cause>) {
    let operations = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
    let ops = &rule["operations"];
    if ops.as_array().is_none_or(Vec::is_empty) {
        causes.push(Cause::required(format!("{path}.operations")));
    }
    for (k, op) in items(ops) {
        if !op.as_str().is_some_and(|o| operations.contains(&o)) {
            causes.push(unsupported(
                format!("{path}.operations[{k}]"),
                op,
                &operations,
            ));
        }
    }
    check_wildcard_alone(ops, &format!("{path}.operations"), "operations", causes);
    for (field, what) in [("apiGroups", "API groups"), ("apiVersions", "API versions")] {
        let list = &rule[field];
        if list.as_array().is_none_or(Vec::is_empty) {
            causes.push(Cause::required(format!("{path}.{field}")));
        }
        check_wildcard_alone(list, &format!("{path}.{field}"), what, causes);
    }
    if rule["resources"].as_array().is_none_or(Vec::is_empty) {
        causes.push(Cause::required(format!("{path}.resources")));
    }
    for (k, resource) in items(&rule["resources"]) {
        if resource.as_str().is_none_or(str::is_empty) {
            causes.push(Cause::required(format!("{path}.resources[{k}]")));
        }
    }
    let scopes = ["*", "Cluster", "Namespaced"];
    check_enum(rule, "/scope", &format!("{path}.scope"), &scopes, causes);
}

/// kube: `if '*' is present, must not specify other <what>`.
fn check_wildcard_alone(list: &Value, field: &str, what: &str, causes: &mut Vec<Cause>) {
    let values = list.as_array().map(Vec::as_slice).unwrap_or_default();
    if values.len() > 1 && values.iter().any(|v| v == "*") {
        let why = format!("if '*' is present, must not specify other {what}");
        causes.push(invalid(field, list, &why));
    }
}

/// admissionregistration/v1 allows only webhooks without side effects
/// (or with none on dry runs), so that dry runs can call them.
fn validate_side_effects(hook: &Value, path: &str, causes: &mut Vec<Cause>) {
    let field = format!("{path}.sideEffects");
    let allowed = ["None", "NoneOnDryRun"];
    match &hook["sideEffects"] {
        // A typed decode leaves an absent sideEffects as "".
        Value::Null => causes.push(required(field, "must specify one of None, NoneOnDryRun")),
        Value::String(s) if s.is_empty() => {
            causes.push(required(field, "must specify one of None, NoneOnDryRun"))
        }
        value if value.as_str().is_some_and(|v| allowed.contains(&v)) => {}
        value => causes.push(unsupported(field, value, &allowed)),
    }
}

/// The AdmissionReview versions the webhook speaks; this server speaks v1
/// and v1beta1 (the same shape), as kube does.
fn validate_versions(hook: &Value, path: &str, causes: &mut Vec<Cause>) {
    let field = format!("{path}.admissionReviewVersions");
    let versions = &hook["admissionReviewVersions"];
    if versions.as_array().is_none_or(Vec::is_empty) {
        causes.push(required(field, "must specify one of v1, v1beta1"));
        return;
    }
    let known = items(versions).any(|(_, v)| v == "v1" || v == "v1beta1");
    if !known {
        let why = "must include at least one of v1, v1beta1";
        causes.push(invalid(field, versions, why));
    }
}

/// Exactly one of `url` (https, a host, no user, query or fragment) and
/// `service` (name, namespace, a path starting with `/`, a valid port).
fn validate_client_config(config: &Value, path: &str, causes: &mut Vec<Cause>) {
    let url = config.get("url").filter(|v| !v.is_null());
    let service = config.get("service").filter(|v| !v.is_null());
    match (url, service) {
        (Some(url), None) => validate_url(url, &format!("{path}.url"), causes),
        (None, Some(service)) => validate_service(service, &format!("{path}.service"), causes),
        _ => causes.push(required(path, "exactly one of url or service is required")),
    }
}

fn validate_url(url: &Value, field: &str, causes: &mut Vec<Cause>) {
    let text = url.as_str().unwrap_or("");
    let Some(rest) = text.strip_prefix("https://") else {
        causes.push(invalid(
            field,
            url,
            "'https' is the only allowed URL scheme",
        ));
        return;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let problem = if authority.is_empty() {
        Some("host must be specified")
    } else if authority.contains('@') {
        Some("user information is not permitted in the URL")
    } else if text.contains('#') {
        Some("fragments are not permitted in the URL")
    } else if text.contains('?') {
        Some("query parameters are not permitted in the URL")
    } else {
        text.parse::<hyper::Uri>()
            .err()
            .map(|_| "must be a valid URL")
    };
    if let Some(why) = problem {
        causes.push(invalid(field, url, why));
    }
}

fn validate_service(service: &Value, path: &str, causes: &mut Vec<Cause>) {
    for (key, what) in [("name", "service name"), ("namespace", "service namespace")] {
        if text(service, &format!("/{key}")).is_empty() {
            causes.push(required(
                format!("{path}.{key}"),
                &format!("{what} is required"),
            ));
        }
    }
    if let Some(p) = service["path"].as_str() {
        if !p.is_empty() && !p.starts_with('/') {
            causes.push(invalid(
                format!("{path}.path"),
                &json!(p),
                "must start with a '/'",
            ));
        }
    }
    if let Some(port) = service["port"].as_i64() {
        if !(1..=65535).contains(&port) {
            let why = "port is not valid: must be between 1 and 65535, inclusive";
            causes.push(invalid(format!("{path}.port"), &json!(port), why));
        }
    }
}

/// The operators a metav1.LabelSelector's expressions may use.
fn validate_selector(selector: &Value, path: &str, causes: &mut Vec<Cause>) {
    let operators = ["In", "NotIn", "Exists", "DoesNotExist"];
    for (k, expression) in items(&selector["matchExpressions"]) {
        let at = format!("{path}.matchExpressions[{k}]");
        let op = &expression["operator"];
        if !op.as_str().is_some_and(|o| operators.contains(&o)) {
            causes.push(unsupported(format!("{at}.operator"), op, &operators));
        }
        let has_values = expression["values"]
            .as_array()
            .is_some_and(|v| !v.is_empty());
        let needs_values = matches!(op.as_str(), Some("In" | "NotIn"));
        if needs_values && !has_values {
            let why = "must be specified when `operator` is 'In' or 'NotIn'";
            causes.push(required(format!("{at}.values"), why));
        } else if !needs_values && has_values {
            let why = "may not be specified when `operator` is 'Exists' or 'DoesNotExist'";
            causes.push(Cause::forbidden(format!("{at}.values"), why));
        }
    }
}

fn columns() -> Vec<Column> {
    vec![
        Column::new(
            "Webhooks",
            "integer",
            "Webhooks indicates the number of webhooks in the configuration.",
        ),
        AGE,
    ]
}

fn cells(obj: &Value) -> Vec<Value> {
    let count = obj["webhooks"].as_array().map_or(0, Vec::len);
    vec![count.into(), age_cell(obj)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(hook: Value) -> Value {
        let mut obj = json!({"metadata": {"name": "c"}, "webhooks": [hook]});
        defaults(&mut obj, true);
        obj
    }

    fn good() -> Value {
        json!({"name": "deny.example.com", "sideEffects": "None",
               "admissionReviewVersions": ["v1"],
               "clientConfig": {"url": "https://127.0.0.1:8443/deny"},
               "rules": [{"operations": ["CREATE"], "apiGroups": [""],
                          "apiVersions": ["v1"], "resources": ["pods"]}]})
    }

    fn messages(hook: Value) -> Vec<String> {
        validate(&config(hook), true)
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn defaults_fill_kubes_values() {
        let obj = config(good());
        let hook = &obj["webhooks"][0];
        assert_eq!(hook["failurePolicy"], "Fail");
        assert_eq!(hook["matchPolicy"], "Equivalent");
        assert_eq!(hook["timeoutSeconds"], 10);
        assert_eq!(hook["reinvocationPolicy"], "Never");
        assert_eq!(hook["namespaceSelector"], json!({}));
        assert_eq!(hook["rules"][0]["scope"], "*");
        assert!(messages(good()).is_empty(), "{:?}", messages(good()));
        assert_eq!(cells(&obj)[0], json!(1));
    }

    #[test]
    fn match_conditions_are_named_once_and_compile() {
        let mut hook = good();
        hook["matchConditions"] = json!([
            {"name": "a", "expression": "object.metadata.name == 'x'"},
            {"name": "a", "expression": "object.metadata.name =="},
            {"expression": "true"},
        ]);
        let found = messages(hook);
        assert_eq!(found.len(), 3, "{found:?}");
        assert_eq!(
            found[0],
            "webhooks[0].matchConditions[1].name: Duplicate value: \"a\""
        );
        assert!(
            found[1].starts_with("webhooks[0].matchConditions[1].expression: Invalid value: \"object.metadata.name ==\": compilation failed: "),
            "{found:?}"
        );
        assert_eq!(
            found[2],
            "webhooks[0].matchConditions[2].name: Required value"
        );
    }

    #[test]
    fn bad_webhooks_get_kubes_messages() {
        let mut hook = good();
        hook["sideEffects"] = Value::Null;
        hook["admissionReviewVersions"] = json!(["v2"]);
        hook["timeoutSeconds"] = json!(31);
        hook["clientConfig"] = json!({"url": "http://x.example.com/"});
        assert_eq!(
            messages(hook),
            [
                "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
                "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
                "webhooks[0].admissionReviewVersions: Invalid value: [\"v2\"]: must include at least one of v1, v1beta1",
                "webhooks[0].clientConfig.url: Invalid value: \"http://x.example.com/\": 'https' is the only allowed URL scheme",
            ]
        );
        let mut both = good();
        both["clientConfig"]["service"] = json!({"name": "s", "namespace": "n"});
        both["sideEffects"] = json!("Some");
        assert_eq!(
            messages(both),
            [
                "webhooks[0].sideEffects: Unsupported value: \"Some\": supported values: \"None\", \"NoneOnDryRun\"",
                "webhooks[0].clientConfig: Required value: exactly one of url or service is required",
            ]
        );
    }

    #[test]
    fn names_rules_services_and_selectors_are_checked() {
        let mut hook = good();
        hook["name"] = json!("deny");
        hook["rules"][0]["operations"] = json!(["*", "CREATE"]);
        hook["rules"][0]["scope"] = json!("Everywhere");
        hook["clientConfig"] = json!({"service": {"namespace": "n", "path": "x", "port": 0}});
        hook["objectSelector"] = json!({"matchExpressions": [{"key": "a", "operator": "In"}]});
        let got = messages(hook);
        assert_eq!(got.len(), 7, "{got:?}");
        assert!(
            got[0].ends_with("should be a domain with at least three segments separated by dots")
        );
        assert!(got[1].starts_with("webhooks[0].rules[0].operations: Invalid value"));
        assert!(got[2].starts_with("webhooks[0].rules[0].scope: Unsupported value"));
        assert_eq!(
            got[3],
            "webhooks[0].clientConfig.service.name: Required value: service name is required"
        );
        assert!(got[4].starts_with("webhooks[0].clientConfig.service.path: Invalid value: \"x\""));
        assert!(got[5].starts_with(
            "webhooks[0].clientConfig.service.port: Invalid value: 0: port is not valid"
        ));
        assert!(got[6].contains("objectSelector.matchExpressions[0].values: Required value"));
        let two = json!({"webhooks": [good(), good()]});
        let dup = validate(&two, false);
        assert_eq!(dup[0].message, "Duplicate value: \"deny.example.com\"");
    }
}
