//! core/v1 Service: ClusterIP by default, ports default to TCP and to a
//! targetPort equal to the port. A service holds its cluster IP and node
//! ports alone across the cluster (claims, picked from
//! [`super::ranges`] when the client leaves them out).

use k8s_openapi::api::core::v1::Service;
use schemars::gen::SchemaGenerator;
use schemars::schema::Schema;
use serde_json::Value;

use super::allocation::{cluster_ips, has_node_ports, kind_of, node_ports, Allocated};
use crate::error::Cause;
use crate::object::meta::NameRule;
use crate::registry::definition::ResourceDef;
use crate::registry::kinds::common::cells::map_string;
use crate::registry::kinds::common::defaults::default_at;
use crate::registry::kinds::core::services::ranges::{self as ranges, NODE_PORTS};
use crate::registry::strategy::{age_cell, Column, Strategy, AGE};
use crate::registry::subresource::STATUS;
use crate::registry::typed::{decode, Decoded};

const DEF: ResourceDef = ResourceDef {
    short_names: &["svc"],
    categories: &["all"],
    subresources: &[STATUS],
    unique: Some(&Allocated),
    name_rule: NameRule::Label,
    ..ResourceDef::new("", "v1", "services", "Service", "service")
};

pub struct Services;

fn default_spec(obj: &mut Value) {
    default_at(obj, &["spec", "type"], "ClusterIP".into());
    default_at(obj, &["spec", "sessionAffinity"], "None".into());
    for port in obj
        .pointer_mut("/spec/ports")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        default_at(port, &["protocol"], "TCP".into());
        let number = port["port"].clone();
        default_at(port, &["targetPort"], number);
    }
}

fn validate_allocated(obj: &Value, causes: &mut Vec<Cause>) {
    let kind = kind_of(obj);
    for (i, ip) in cluster_ips(obj).iter().enumerate() {
        if kind == "ExternalName" {
            causes.push(Cause::forbidden(
                format!("spec.clusterIPs[{i}]"),
                "may not be set for ExternalName services",
            ));
        } else if !ranges::in_range(ip) {
            causes.push(Cause::invalid(
                format!("spec.clusterIPs[{i}]"),
                ip,
                format!("failed to allocate IP {ip}: the provided IP ({ip}) is not in the valid range. The range of valid IPs is {}", ranges::CIDR),
            ));
        }
    }
    for (i, port) in node_ports(obj) {
        let field = format!("spec.ports[{i}].nodePort");
        if !has_node_ports(obj) {
            causes.push(Cause::forbidden(
                field,
                format!("may not be used when `type` is '{kind}'"),
            ));
        } else if !NODE_PORTS.contains(&port) {
            causes.push(Cause::invalid(
                field,
                &port.to_string(),
                format!(
                    "provided port is not in the valid range. The range of valid ports is {}-{}",
                    NODE_PORTS.start(),
                    NODE_PORTS.end()
                ),
            ));
        }
    }
    if kind == "ExternalName"
        && obj["spec"]["externalName"]
            .as_str()
            .is_none_or(str::is_empty)
    {
        causes.push(Cause::required("spec.externalName"));
    }
}

fn external_ip_cell(obj: &Value) -> Value {
    let listed = |v: &Value, field: &str| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|x| {
                let x = if field.is_empty() { x } else { &x[field] };
                x.as_str().map(str::to_string)
            })
            .collect()
    };
    let mut ips = listed(&obj["spec"]["externalIPs"], "");
    match kind_of(obj) {
        "ExternalName" => return text_or_none(&obj["spec"]["externalName"]),
        "LoadBalancer" => {
            let ingress = &obj["status"]["loadBalancer"]["ingress"];
            ips.extend(listed(ingress, "ip"));
            ips.extend(listed(ingress, "hostname"));
            if ips.is_empty() {
                return "<pending>".into();
            }
        }
        _ => {}
    }
    match ips.is_empty() {
        true => "<none>".into(),
        false => ips.join(",").into(),
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

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        let mut causes = self.validate(new);
        let (was, now) = (cluster_ips(old), cluster_ips(new));
        if kind_of(new) != "ExternalName" && !was.is_empty() && was != now {
            causes.push(Cause::invalid(
                "spec.clusterIPs[0]",
                now.first().map_or("", String::as_str),
                "may not change once set",
            ));
        }
        causes
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        let mut causes = Vec::new();
        validate_allocated(obj, &mut causes);
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
            external_ip_cell(obj),
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
