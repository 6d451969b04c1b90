//! core/v1 Pod: defaults the scheduler and kubelet expect, `Pending` on
//! create, and a spec that is immutable apart from what Kubernetes lets
//! change (container images, activeDeadlineSeconds, added tolerations).

use k8s_openapi::api::core::v1::Pod;
use schemars::gen::SchemaGenerator;
use schemars::schema::Schema;
use serde_json::{json, Value};

use super::binding::BINDING;
use super::eviction::EVICTION;
use super::kubelet::KUBELET;
use crate::error::Cause;
use crate::object::meta::is_dns1123_label;
use crate::registry::definition::{Deletion, ResourceDef};
use crate::registry::kinds::common::defaults::default_at;
use crate::registry::strategy::{age_cell, Column, Strategy, AGE};
use crate::registry::subresource::{Subresource, STATUS};
use crate::registry::typed::{decode, Decoded};

const DEF: ResourceDef = ResourceDef {
    short_names: &["po"],
    categories: &["all"],
    subresources: SUBRESOURCES,
    deletion: Deletion {
        grace_period: Some(grace_period),
        ..Deletion::AT_ONCE
    },
    ..ResourceDef::new("", "v1", "pods", "Pod", "pod")
};

/// A pod's status, its binding to a node, its eviction, and what its
/// kubelet serves.
const SUBRESOURCES: &[Subresource] = &[
    STATUS, BINDING, EVICTION, KUBELET[0], KUBELET[1], KUBELET[2], KUBELET[3],
];

pub struct Pods;

/// The request's grace period, else the pod's own; 0 for a pod on no
/// node (nothing runs it).
fn grace_period(pod: &Value, requested: Option<i64>) -> i64 {
    if pod["spec"]["nodeName"].as_str().is_none_or(str::is_empty) {
        return 0;
    }
    let own = pod["spec"]["terminationGracePeriodSeconds"].as_i64();
    let grace = requested.or(own).unwrap_or(30);
    // A negative period means "as soon as possible", which is 1 s.
    if grace < 0 {
        1
    } else {
        grace
    }
}

const CONTAINER_LISTS: [&str; 2] = ["initContainers", "containers"];

fn default_containers(obj: &mut Value) {
    for list in CONTAINER_LISTS {
        // `get_mut`, not indexing: indexing a missing field would add it as null.
        let containers = obj.pointer_mut(&format!("/spec/{list}"));
        for container in containers
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            let image = container["image"].as_str().unwrap_or("");
            let latest = !image.contains(':') || image.ends_with(":latest");
            default_at(
                container,
                &["imagePullPolicy"],
                if latest { "Always" } else { "IfNotPresent" }.into(),
            );
            default_at(
                container,
                &["terminationMessagePath"],
                "/dev/termination-log".into(),
            );
            default_at(container, &["terminationMessagePolicy"], "File".into());
            let ports = container.get_mut("ports").and_then(Value::as_array_mut);
            for port in ports.into_iter().flatten() {
                default_at(port, &["protocol"], "TCP".into());
            }
        }
    }
}

/// The defaults kube-apiserver gives every pod spec, a pod's own or a
/// workload's template (where restartPolicy is for the type to decide).
pub fn default_pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    for (field, value) in [
        ("restartPolicy", json!("Always")),
        ("dnsPolicy", json!("ClusterFirst")),
        ("schedulerName", json!("default-scheduler")),
        ("terminationGracePeriodSeconds", json!(30)),
        ("securityContext", json!({})),
    ] {
        default_at(spec, &[field], value);
    }
    let mut holder = json!({"spec": spec.take()});
    default_containers(&mut holder);
    *spec = holder["spec"].take();
}

/// A workload's pod template gets a pod's defaults (when it has one).
pub fn default_template(obj: &mut Value) {
    if let Some(spec) = obj.pointer_mut("/spec/template/spec") {
        default_pod_spec(spec);
    }
}

/// The spec with the fields an update may change blanked out.
fn immutable_part(spec: &Value) -> Value {
    let mut spec = spec.clone();
    for list in CONTAINER_LISTS {
        for container in spec[list].as_array_mut().into_iter().flatten() {
            container["image"] = Value::Null;
        }
    }
    for field in [
        "activeDeadlineSeconds",
        "tolerations",
        "terminationGracePeriodSeconds",
    ] {
        spec[field] = Value::Null;
    }
    spec
}

pub fn validate_pod_spec(spec: &Value, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let containers = spec["containers"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if containers.is_empty() {
        causes.push(Cause::required(format!("{path}.containers")));
    }
    for list in CONTAINER_LISTS {
        for (i, container) in spec[list].as_array().into_iter().flatten().enumerate() {
            let here = format!("{path}.{list}[{i}]");
            match container["name"].as_str() {
                None | Some("") => causes.push(Cause::required(format!("{here}.name"))),
                Some(name) if !is_dns1123_label(name) => {
                    causes.push(Cause::invalid(format!("{here}.name"), name, "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'"));
                }
                _ => {}
            }
            if container["image"]
                .as_str()
                .is_none_or(|i| i.trim().is_empty())
            {
                causes.push(Cause::required(format!("{here}.image")));
            }
        }
    }
    causes.extend(crate::registry::kinds::core::pods::validation::validate(
        spec, path,
    ));
    causes
}

fn ready_cell(obj: &Value) -> String {
    let total = obj["spec"]["containers"].as_array().map_or(0, Vec::len);
    let statuses = obj["status"]["containerStatuses"].as_array();
    let ready = statuses
        .into_iter()
        .flatten()
        .filter(|s| s["ready"] == true)
        .count();
    format!("{ready}/{total}")
}

fn status_cell(obj: &Value) -> Value {
    if !obj["metadata"]["deletionTimestamp"].is_null() {
        return "Terminating".into();
    }
    match obj["status"]["reason"].as_str() {
        Some(reason) => reason.into(),
        None => obj["status"]["phase"].clone(),
    }
}

fn restarts_cell(obj: &Value) -> Value {
    let statuses = obj["status"]["containerStatuses"].as_array();
    statuses
        .into_iter()
        .flatten()
        .filter_map(|s| s["restartCount"].as_i64())
        .sum::<i64>()
        .into()
}

fn or_none(value: &Value) -> Value {
    match value.as_str() {
        Some(s) if !s.is_empty() => s.into(),
        _ => "<none>".into(),
    }
}

impl Strategy for Pods {
    fn def(&self) -> &ResourceDef {
        &DEF
    }

    fn decode(&self, value: &Value) -> Result<Decoded, String> {
        decode::<Pod>(value)
    }

    fn schema(&self, generator: &mut SchemaGenerator) -> Schema {
        generator.subschema_for::<Pod>()
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        default_pod_spec(&mut obj["spec"]);
        obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_containers(new);
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        validate_pod_spec(&obj["spec"], "spec")
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        let mut causes = self.validate(new);
        if immutable_part(&new["spec"]) != immutable_part(&old["spec"]) {
            causes.push(Cause::forbidden("spec", "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"));
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::new(
                "Ready",
                "string",
                "The aggregate readiness state of this pod for accepting traffic.",
            ),
            Column::new(
                "Status",
                "string",
                "The aggregate status of the containers in this pod.",
            ),
            Column::new(
                "Restarts",
                "string",
                "The number of times the containers in this pod have been restarted.",
            ),
            AGE,
            Column::wide("IP", "string", "IP address allocated to the pod."),
            Column::wide(
                "Node",
                "string",
                "Name of the Node this pod is assigned to.",
            ),
            Column::wide(
                "Nominated Node",
                "string",
                "Name of the node the scheduler nominated.",
            ),
            Column::wide("Readiness Gates", "string", "Pod readiness gates."),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let gates = obj["spec"]["readinessGates"].as_array().map_or(0, Vec::len);
        vec![
            ready_cell(obj).into(),
            status_cell(obj),
            restarts_cell(obj),
            age_cell(obj),
            or_none(&obj["status"]["podIP"]),
            or_none(&obj["spec"]["nodeName"]),
            or_none(&obj["status"]["nominatedNodeName"]),
            if gates == 0 {
                "<none>".into()
            } else {
                format!("0/{gates}").into()
            },
        ]
    }

    fn selectable_fields(&self) -> &'static [(&'static str, &'static str)] {
        &[
            ("spec.nodeName", "/spec/nodeName"),
            ("spec.restartPolicy", "/spec/restartPolicy"),
            ("spec.schedulerName", "/spec/schedulerName"),
            ("spec.serviceAccountName", "/spec/serviceAccountName"),
            ("spec.hostNetwork", "/spec/hostNetwork"),
            ("status.phase", "/status/phase"),
            ("status.podIP", "/status/podIP"),
            ("status.nominatedNodeName", "/status/nominatedNodeName"),
        ]
    }
}
