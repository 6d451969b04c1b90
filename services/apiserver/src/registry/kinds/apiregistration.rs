//! apiregistration.k8s.io/v1 APIService: which server answers one API
//! group/version. A "Local" one (no `spec.service`) is served by this
//! server; one with a service is proxied to an extension API server
//! (`crate::aggregator`). Validation follows kube-aggregator's
//! `ValidateAPIService`, with its messages.

use std::sync::Arc;

use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use serde_json::{json, Value};

use crate::error::Cause;
use crate::object::meta::{is_dns1123_subdomain, NameRule};
use crate::registry::definition::ResourceDef;
use crate::registry::kinds::common::defaults::default_at;
use crate::registry::kinds::common::simple::{simple, Simple};
use crate::registry::kinds::common::validation::{invalid, required, text};
use crate::registry::strategy::{age_cell, Column, Strategy, AGE};
use crate::registry::subresource::STATUS;

pub const GROUP: &str = "apiregistration.k8s.io";
pub const RESOURCE: &str = "apiservices";

pub fn all() -> Vec<Arc<dyn Strategy>> {
    vec![Arc::new(Simple::<APIService> {
        columns,
        cells,
        validate,
        defaults,
        on_create: |o| {
            // The availability controller owns the status.
            if let Some(map) = o.as_object_mut() {
                map.remove("status");
            }
        },
        ..simple(def())
    })]
}

fn def() -> ResourceDef {
    ResourceDef {
        namespaced: false,
        subresources: &[STATUS],
        categories: &["api-extensions"],
        name_rule: NameRule::PathSegment,
        ..crate::registry::kinds::common::simple::def(GROUP, RESOURCE, "APIService", "apiservice")
    }
}

fn defaults(obj: &mut Value) {
    if obj["spec"]["service"].is_object() {
        default_at(obj, &["spec", "service", "port"], json!(443));
    }
}

/// kube's IsDNS1035Label: a lower-case letter, then letters, digits and
/// dashes, ending in a letter or digit; 63 characters at most.
fn is_dns1035_label(s: &str) -> bool {
    let bytes = s.as_bytes();
    let inner = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-';
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes[0].is_ascii_lowercase()
        && bytes.iter().all(inner)
        && bytes[bytes.len() - 1] != b'-'
}

const DNS1035_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

fn validate(obj: &Value) -> Vec<Cause> {
    let spec = &obj["spec"];
    let (group, version) = (text(spec, "/group"), text(spec, "/version"));
    let mut causes = Vec::new();
    let name = text(obj, "/metadata/name");
    let wanted = format!("{version}.{group}");
    if !name.is_empty() && name != wanted {
        let why = format!("must be `spec.version+\".\"+spec.group`: {wanted:?}");
        causes.push(invalid("metadata.name", &json!(name), &why));
    }
    if group.is_empty() && version != "v1" {
        let why = "only v1 may have an empty group and it better be legacy kube";
        causes.push(required("spec.group", why));
    }
    if !group.is_empty() && !is_dns1123_subdomain(group) {
        causes.push(invalid("spec.group", &json!(group), DNS1123_SUBDOMAIN_MSG));
    }
    if !is_dns1035_label(version) {
        causes.push(invalid("spec.version", &json!(version), DNS1035_MSG));
    }
    check_priority(spec, "groupPriorityMinimum", 20000, &mut causes);
    check_priority(spec, "versionPriority", 1000, &mut causes);
    causes.extend(validate_backend(spec));
    causes
}

fn check_priority(spec: &Value, field: &str, max: i64, causes: &mut Vec<Cause>) {
    let value = spec[field].as_i64().unwrap_or(0);
    if value <= 0 || value > max {
        let why = format!("must be positive and less than {max}");
        causes.push(invalid(format!("spec.{field}"), &json!(value), &why));
    }
}

/// A local APIService has no way to reach a server; one with a service
/// trusts either its caBundle or nothing.
fn validate_backend(spec: &Value) -> Vec<Cause> {
    let ca_bundle = text(spec, "/caBundle");
    let skip = spec["insecureSkipTLSVerify"].as_bool().unwrap_or(false);
    let mut causes = Vec::new();
    let service = &spec["service"];
    if !service.is_object() {
        if !ca_bundle.is_empty() {
            let shown = json!(format!("{} bytes", decoded_len(ca_bundle)));
            let why = "local APIServices may not have a caBundle";
            causes.push(invalid("spec.caBundle", &shown, why));
        }
        if skip {
            let why = "local APIServices may not have insecureSkipTLSVerify";
            causes.push(invalid("spec.insecureSkipTLSVerify", &json!(true), why));
        }
        return causes;
    }
    if text(service, "/namespace").is_empty() {
        causes.push(required("spec.service.namespace", ""));
    }
    if text(service, "/name").is_empty() {
        causes.push(required("spec.service.name", ""));
    }
    let port = service["port"].as_i64().unwrap_or(443);
    if !(1..=65535).contains(&port) {
        let why = "port is not valid: must be between 1 and 65535, inclusive";
        causes.push(invalid("spec.service.port", &json!(port), why));
    }
    if skip && !ca_bundle.is_empty() {
        let why = "may not be true if caBundle is present";
        causes.push(invalid("spec.insecureSkipTLSVerify", &json!(true), why));
    }
    causes
}

/// The bytes a base64 caBundle holds (kube counts bytes, not characters).
fn decoded_len(encoded: &str) -> usize {
    use base64::Engine;
    let engine = base64::engine::general_purpose::STANDARD;
    engine.decode(encoded).map_or(encoded.len(), |b| b.len())
}

fn columns() -> Vec<Column> {
    vec![
        Column::new(
            "Service",
            "string",
            "The reference to the service that hosts this API endpoint.",
        ),
        Column::new("Available", "string", "Whether this service is available."),
        AGE,
    ]
}

/// `Local` or `namespace/name`; `True`, or `False (Reason)` as kubectl
/// shows an APIService that is not available.
fn cells(obj: &Value) -> Vec<Value> {
    let service = &obj["spec"]["service"];
    let shown = match service.is_object() {
        true => format!("{}/{}", text(service, "/namespace"), text(service, "/name")),
        false => "Local".to_string(),
    };
    vec![json!(shown), json!(available_cell(obj)), age_cell(obj)]
}

fn available_cell(obj: &Value) -> String {
    let conditions = obj["status"]["conditions"].as_array();
    let available = conditions
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Available");
    match available {
        None => "Unknown".into(),
        Some(c) if c["status"] == "True" => "True".into(),
        Some(c) => format!("{} ({})", text(c, "/status"), text(c, "/reason")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(name: &str, spec: Value) -> Value {
        let mut spec = spec;
        default_at(&mut spec, &["group"], json!("metrics.k8s.io"));
        default_at(&mut spec, &["version"], json!("v1beta1"));
        default_at(&mut spec, &["groupPriorityMinimum"], json!(100));
        default_at(&mut spec, &["versionPriority"], json!(100));
        json!({"metadata": {"name": name}, "spec": spec})
    }

    fn fields(causes: &[Cause]) -> Vec<&str> {
        causes.iter().map(|c| c.field.as_str()).collect()
    }

    #[test]
    fn a_well_formed_service_passes() {
        let obj = remote(
            "v1beta1.metrics.k8s.io",
            json!({"service": {"namespace": "kube-system", "name": "metrics", "port": 443},
                   "insecureSkipTLSVerify": true}),
        );
        assert_eq!(validate(&obj), []);
        let local = remote("v1beta1.metrics.k8s.io", json!({}));
        assert_eq!(validate(&local), []);
    }

    #[test]
    fn the_name_must_be_version_dot_group() {
        let causes = validate(&remote("metrics", json!({})));
        assert_eq!(fields(&causes), ["metadata.name"]);
        assert!(
            causes[0]
                .message
                .contains(r#"must be `spec.version+"."+spec.group`: "v1beta1.metrics.k8s.io""#),
            "{}",
            causes[0].message
        );
    }

    #[test]
    fn priorities_group_and_version_are_required() {
        let obj = json!({"metadata": {"name": "."}, "spec": {}});
        let causes = validate(&obj);
        assert_eq!(
            fields(&causes),
            [
                "spec.group",
                "spec.version",
                "spec.groupPriorityMinimum",
                "spec.versionPriority"
            ]
        );
        let too_high = remote(
            "v1beta1.metrics.k8s.io",
            json!({"groupPriorityMinimum": 20001, "versionPriority": 1001}),
        );
        let causes = validate(&too_high);
        assert_eq!(
            causes[0].message,
            "Invalid value: 20001: must be positive and less than 20000"
        );
        assert_eq!(fields(&causes)[1], "spec.versionPriority");
    }

    #[test]
    fn ca_bundle_and_skip_verify_exclude_each_other_and_local_has_neither() {
        let both = remote(
            "v1beta1.metrics.k8s.io",
            json!({"service": {"namespace": "a", "name": "b"}, "caBundle": "Zm9v",
                   "insecureSkipTLSVerify": true}),
        );
        let causes = validate(&both);
        assert_eq!(fields(&causes), ["spec.insecureSkipTLSVerify"]);
        assert!(causes[0]
            .message
            .ends_with("may not be true if caBundle is present"));
        let local = remote(
            "v1beta1.metrics.k8s.io",
            json!({"caBundle": "Zm9v", "insecureSkipTLSVerify": true}),
        );
        let causes = validate(&local);
        assert_eq!(
            fields(&causes),
            ["spec.caBundle", "spec.insecureSkipTLSVerify"]
        );
        assert_eq!(
            causes[0].message,
            "Invalid value: \"3 bytes\": local APIServices may not have a caBundle"
        );
        let nameless = remote(
            "v1beta1.metrics.k8s.io",
            json!({"service": {"port": 70000}}),
        );
        assert_eq!(
            fields(&validate(&nameless)),
            [
                "spec.service.namespace",
                "spec.service.name",
                "spec.service.port"
            ]
        );
    }

    #[test]
    fn cells_show_local_or_the_service_and_availability() {
        let mut obj = remote(
            "v1beta1.metrics.k8s.io",
            json!({"service": {"namespace": "kube-system", "name": "metrics"}}),
        );
        assert_eq!(
            cells(&obj)[..2],
            [json!("kube-system/metrics"), json!("Unknown")]
        );
        obj["status"] = json!({"conditions": [{"type": "Available", "status": "False",
            "reason": "MissingEndpoints"}]});
        assert_eq!(cells(&obj)[1], json!("False (MissingEndpoints)"));
        let local = remote("v1.apps", json!({"group": "apps", "version": "v1"}));
        assert_eq!(cells(&local)[0], json!("Local"));
    }
}
