//! core/v1 Service: ClusterIP by default, ports default to TCP and to a
//! targetPort equal to the port. (Cluster IPs are not allocated yet.)

use k8s_openapi::api::core::v1::Service;
use schemars::gen::SchemaGenerator;
use schemars::schema::Schema;
use serde_json::Value;

use super::super::strategy::{age_cell, Column, ResourceDef, Strategy, AGE};
use super::super::typed::{decode, Decoded};
use super::{default_at, map_string};
use crate::error::Cause;
use crate::object::meta::NameRule;

const DEF: ResourceDef = ResourceDef {
    group: "",
    version: "v1",
    resource: "services",
    kind: "Service",
    singular: "service",
    namespaced: true,
    short_names: &["svc"],
    categories: &["all"],
    status: true,
    scale: false,
    name_rule: NameRule::Label,
};

pub struct Services;

fn default_spec(obj: &mut Value) {
    default_at(obj, &["spec", "type"], "ClusterIP".into());
    default_at(obj, &["spec", "sessionAffinity"], "None".into());
    for port in obj["spec"]["ports"].as_array_mut().into_iter().flatten() {
        default_at(port, &["protocol"], "TCP".into());
        let number = port["port"].clone();
        default_at(port, &["targetPort"], number);
    }
}

fn ports_cell(obj: &Value) -> String {
    let ports = obj["spec"]["ports"].as_array().into_iter().flatten();
    let rendered: Vec<String> = ports
        .map(|p| {
            let node = p["nodePort"]
                .as_i64()
                .map(|n| format!(":{n}"))
                .unwrap_or_default();
            format!(
                "{}{node}/{}",
                p["port"],
                p["protocol"].as_str().unwrap_or("TCP")
            )
        })
        .collect();
    if rendered.is_empty() {
        "<none>".into()
    } else {
        rendered.join(",")
    }
}

fn text_or_none(value: &Value) -> Value {
    match value.as_str() {
        Some(s) if !s.is_empty() => s.into(),
        _ => "<none>".into(),
    }
}

impl Strategy for Services {
    fn def(&self) -> &ResourceDef {
        &DEF
    }

    fn decode(&self, value: &Value) -> Result<Decoded, String> {
        decode::<Service>(value)
    }

    fn schema(&self, generator: &mut SchemaGenerator) -> Schema {
        generator.subschema_for::<Service>()
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        default_spec(obj);
        obj["status"] = serde_json::json!({"loadBalancer": {}});
    }

    fn prepare_for_update(&self, new: &mut Value, _old: &Value) {
        default_spec(new);
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        let mut causes = Vec::new();
        let kind = obj["spec"]["type"].as_str().unwrap_or("ClusterIP");
        let ports = obj["spec"]["ports"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        if ports.is_empty() && kind != "ExternalName" && obj["spec"]["clusterIP"] != "None" {
            causes.push(Cause::required("spec.ports"));
        }
        for (i, port) in ports.iter().enumerate() {
            let number = port["port"].as_i64().unwrap_or(0);
            if !(1..=65535).contains(&number) {
                causes.push(Cause::invalid(
                    format!("spec.ports[{i}].port"),
                    &number.to_string(),
                    "must be between 1 and 65535, inclusive",
                ));
            }
            if ports.len() > 1 && port["name"].as_str().is_none_or(str::is_empty) {
                causes.push(Cause::required(format!("spec.ports[{i}].name")));
            }
        }
        if !["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"].contains(&kind) {
            causes.push(Cause {
                reason: "FieldValueNotSupported",
                field: "spec.type".into(),
                message: format!("Unsupported value: \"{kind}\""),
            });
        }
        causes
    }

    fn columns(&self) -> Vec<Column> {
        vec![
            Column::new("Type", "string", "The type of the service."),
            Column::new("Cluster-IP", "string", "The IP address of the service."),
            Column::new("External-IP", "string", "External IPs of the service."),
            Column::new("Port(s)", "string", "The ports of the service."),
            AGE,
            Column::wide("Selector", "string", "The label selector of the service."),
        ]
    }

    fn cells(&self, obj: &Value) -> Vec<Value> {
        let selector = map_string(&obj["spec"]["selector"]);
        vec![
            obj["spec"]["type"].clone(),
            text_or_none(&obj["spec"]["clusterIP"]),
            text_or_none(&obj["spec"]["externalIPs"][0]),
            ports_cell(obj).into(),
            age_cell(obj),
            if selector.is_empty() {
                "<none>".into()
            } else {
                selector.into()
            },
        ]
    }

    fn selectable_fields(&self) -> &'static [(&'static str, &'static str)] {
        &[
            ("spec.clusterIP", "/spec/clusterIP"),
            ("spec.type", "/spec/type"),
        ]
    }
}
