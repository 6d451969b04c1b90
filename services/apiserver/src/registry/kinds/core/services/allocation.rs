//! What a Service holds alone across the cluster: its cluster IPs and
//! node ports, claimed with the object, picked from [`super::ranges`]
//! when the client leaves them out, and kept across updates that leave
//! them out.

use serde_json::Value;

use super::ranges;
use crate::registry::definition::{Claim, UniqueValues};
use crate::registry::kinds::common::defaults::default_at;

/// The Services' unique values.
pub struct Allocated;

impl UniqueValues for Allocated {
    fn claims(&self, obj: &Value) -> Vec<Claim> {
        let ips = cluster_ips(obj)
            .into_iter()
            .enumerate()
            .map(|(i, ip)| Claim {
                name: format!("serviceips/{ip}"),
                field: format!("spec.clusterIPs[{i}]"),
                value: ip,
                taken: "provided IP is already allocated",
            });
        let ports = node_ports(obj).into_iter().map(|(i, port)| Claim {
            name: format!("servicenodeports/{port}"),
            field: format!("spec.ports[{i}].nodePort"),
            value: port.to_string(),
            taken: "provided port is already allocated",
        });
        ips.chain(ports).collect()
    }

    fn allocate(&self, obj: &mut Value, old: Option<&Value>) {
        if let Some(old) = old {
            keep_allocated(obj, old);
        }
        pick(obj);
    }
}

pub fn kind_of(obj: &Value) -> &str {
    obj["spec"]["type"].as_str().unwrap_or("ClusterIP")
}

pub fn has_node_ports(obj: &Value) -> bool {
    matches!(kind_of(obj), "NodePort" | "LoadBalancer")
}

/// The cluster IPs the object holds (not "None", not empty).
pub fn cluster_ips(obj: &Value) -> Vec<String> {
    let listed: Vec<String> = obj["spec"]["clusterIPs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|ip| ip.as_str().map(str::to_string))
        .collect();
    let ips = match listed.is_empty() {
        true => obj["spec"]["clusterIP"]
            .as_str()
            .map(str::to_string)
            .into_iter()
            .collect(),
        false => listed,
    };
    ips.into_iter()
        .filter(|ip| !ip.is_empty() && ip != "None")
        .collect()
}

pub fn node_ports(obj: &Value) -> Vec<(usize, i64)> {
    let ports = obj["spec"]["ports"].as_array().into_iter().flatten();
    ports
        .enumerate()
        .filter_map(|(i, p)| p["nodePort"].as_i64().filter(|n| *n != 0).map(|n| (i, n)))
        .collect()
}

/// Carries over what `old` holds when the update leaves it out, as
/// kube-apiserver does, so that a PUT without clusterIP keeps it.
fn keep_allocated(obj: &mut Value, old: &Value) {
    if kind_of(obj) == "ExternalName" || kind_of(old) == "ExternalName" {
        return;
    }
    let unset = obj["spec"]["clusterIP"].as_str().is_none_or(str::is_empty);
    if unset && !old["spec"]["clusterIP"].is_null() {
        obj["spec"]["clusterIP"] = old["spec"]["clusterIP"].clone();
        obj["spec"]["clusterIPs"] = old["spec"]["clusterIPs"].clone();
    }
    if !has_node_ports(obj) {
        return;
    }
    let old_ports = old["spec"]["ports"].as_array().cloned().unwrap_or_default();
    for port in obj
        .pointer_mut("/spec/ports")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if port["nodePort"].as_i64().is_some_and(|n| n != 0) {
            continue;
        }
        let same = old_ports
            .iter()
            .find(|o| o["port"] == port["port"] && o["protocol"] == port["protocol"]);
        if let Some(kept) = same.and_then(|o| o["nodePort"].as_i64()) {
            port["nodePort"] = kept.into();
        }
    }
}

/// Picks a cluster IP and node ports where the service needs them.
fn pick(obj: &mut Value) {
    if kind_of(obj) == "ExternalName" {
        return;
    }
    default_at(obj, &["spec", "ipFamilies"], serde_json::json!(["IPv4"]));
    default_at(obj, &["spec", "ipFamilyPolicy"], "SingleStack".into());
    default_at(obj, &["spec", "internalTrafficPolicy"], "Cluster".into());
    if obj["spec"]["clusterIP"].as_str().is_none_or(str::is_empty) {
        obj["spec"]["clusterIP"] = ranges::pick_ip().into();
    }
    if obj["spec"]["clusterIPs"]
        .as_array()
        .is_none_or(Vec::is_empty)
    {
        obj["spec"]["clusterIPs"] = serde_json::json!([obj["spec"]["clusterIP"].clone()]);
    }
    if !has_node_ports(obj) {
        return;
    }
    default_at(obj, &["spec", "externalTrafficPolicy"], "Cluster".into());
    let mut taken: Vec<i64> = node_ports(obj).into_iter().map(|(_, n)| n).collect();
    for port in obj
        .pointer_mut("/spec/ports")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if port["nodePort"].as_i64().is_none_or(|n| n == 0) {
            let picked = ranges::pick_node_port(&taken);
            taken.push(picked);
            port["nodePort"] = picked.into();
        }
    }
}
