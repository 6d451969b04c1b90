//! networking.k8s.io/v1 Ingress, IngressClass and NetworkPolicy.

use std::sync::Arc;

use k8s_openapi::api::networking::v1::{Ingress, IngressClass, NetworkPolicy};
use serde_json::{json, Value};

use crate::error::Cause;
use crate::object::meta::is_dns1123_subdomain;
use crate::registry::definition::ResourceDef;
use crate::registry::kinds::common::cells::label_selector;
use crate::registry::kinds::common::simple::{simple, Simple};
use crate::registry::kinds::common::validation::{self, check_enum, immutable, items};
use crate::registry::strategy::{age_cell, Column, Strategy, AGE};
use crate::registry::subresource::STATUS;

const GROUP: &str = "networking.k8s.io";

pub fn all() -> Vec<Arc<dyn Strategy>> {
    vec![
        Arc::new(ingresses()),
        Arc::new(ingress_classes()),
        Arc::new(network_policies()),
    ]
}

fn ingresses() -> Simple<Ingress> {
    Simple {
        columns: ingress_columns,
        cells: ingress_cells,
        validate: validate_ingress,
        on_create: |o| o["status"] = json!({"loadBalancer": {}}),
        ..simple(ResourceDef {
            short_names: &["ing"],
            subresources: &[STATUS],
            ..crate::registry::kinds::common::simple::def(GROUP, "ingresses", "Ingress", "ingress")
        })
    }
}

fn validate_ingress(obj: &Value) -> Vec<Cause> {
    let spec = &obj["spec"];
    let mut causes = Vec::new();
    let rules: Vec<(usize, &Value)> = items(&spec["rules"]).collect();
    if rules.is_empty() && spec["defaultBackend"].is_null() {
        causes.push(validation::invalid(
            "spec",
            &Value::from(spec.to_string()),
            "either `defaultBackend` or `rules` must be specified",
        ));
    }
    if spec["defaultBackend"].is_object() {
        causes.extend(backend_causes(
            &spec["defaultBackend"],
            "spec.defaultBackend",
        ));
    }
    for (i, rule) in rules {
        let here = format!("spec.rules[{i}]");
        causes.extend(host_cause(rule["host"].as_str().unwrap_or(""), &here));
        for (j, path) in items(&rule["http"]["paths"]) {
            causes.extend(path_causes(path, &format!("{here}.http.paths[{j}]")));
        }
    }
    causes
}

/// A DNS name, optionally with one leading `*.` wildcard; never an IP.
fn host_cause(host: &str, rule: &str) -> Option<Cause> {
    if host.is_empty() {
        return None;
    }
    let field = format!("{rule}.host");
    if host.parse::<std::net::IpAddr>().is_ok() {
        return Some(validation::invalid(
            field,
            &host.into(),
            "must be a DNS name, not an IP address",
        ));
    }
    let name = host.strip_prefix("*.").unwrap_or(host);
    if is_dns1123_subdomain(name) {
        return None;
    }
    Some(validation::invalid(field, &host.into(), "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"))
}

fn path_causes(path: &Value, here: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let kinds = ["Exact", "ImplementationSpecific", "Prefix"];
    match path["pathType"].as_str() {
        None | Some("") => causes.push(validation::required(
            format!("{here}.pathType"),
            "pathType must be specified",
        )),
        Some(kind) if !kinds.contains(&kind) => causes.push(validation::unsupported(
            format!("{here}.pathType"),
            &path["pathType"],
            &kinds,
        )),
        Some("Exact" | "Prefix") if !path["path"].as_str().unwrap_or("").starts_with('/') => causes
            .push(validation::invalid(
                format!("{here}.path"),
                &path["path"],
                "must be an absolute path",
            )),
        Some(_) => {}
    }
    causes.extend(backend_causes(&path["backend"], &format!("{here}.backend")));
    causes
}

/// A service with a port name or number, or a resource, not both.
fn backend_causes(backend: &Value, here: &str) -> Vec<Cause> {
    let (service, resource) = (&backend["service"], &backend["resource"]);
    if service.is_object() && resource.is_object() {
        return vec![validation::invalid(
            here,
            &Value::from(backend.to_string()),
            "cannot set both service and resource backends",
        )];
    }
    if resource.is_object() {
        return Vec::new();
    }
    if !service.is_object() {
        return vec![validation::required(
            here,
            "one of `service` or `resource` must be specified",
        )];
    }
    let mut causes = Vec::new();
    if service["name"].as_str().is_none_or(str::is_empty) {
        causes.push(Cause::required(format!("{here}.service.name")));
    }
    let port = &service["port"];
    let named = port["name"].as_str().is_some_and(|n| !n.is_empty());
    let numbered = port["number"].as_i64().is_some_and(|n| n != 0);
    if named == numbered {
        let why = if named {
            "cannot set both port name & port number"
        } else {
            "port name or number is required"
        };
        causes.push(validation::invalid(
            format!("{here}.service.port"),
            &Value::from(port.to_string()),
            why,
        ));
    }
    causes
}

fn ingress_columns() -> Vec<Column> {
    vec![
        Column::new("Class", "string", "The name of the IngressClass resource that should be used for additional configuration"),
        Column::new("Hosts", "string", "Hosts that incoming requests are matched against before the ingress rule"),
        Column::new("Address", "string", "Address is a list containing ingress points for the load-balancer"),
        Column::new("Ports", "string", "Ports of TLS configurations that open"),
        AGE,
    ]
}

fn ingress_cells(obj: &Value) -> Vec<Value> {
    let spec = &obj["spec"];
    let ports = if items(&spec["tls"]).next().is_some() {
        "80, 443"
    } else {
        "80"
    };
    vec![
        spec["ingressClassName"].as_str().unwrap_or("<none>").into(),
        ingress_hosts(&spec["rules"]).into(),
        ingress_address(&obj["status"]["loadBalancer"]).into(),
        ports.into(),
        age_cell(obj),
    ]
}

/// formatHosts: up to three hosts, `*` when no rule names one.
fn ingress_hosts(rules: &Value) -> String {
    let rules: Vec<&Value> = items(rules).map(|(_, r)| r).collect();
    let hosts: Vec<&str> = rules
        .iter()
        .filter_map(|r| r["host"].as_str().filter(|h| !h.is_empty()))
        .take(3)
        .collect();
    if hosts.is_empty() {
        return "*".into();
    }
    let shown = hosts.join(",");
    if hosts.len() == 3 && rules.len() > 3 {
        return format!("{shown} + {} more...", rules.len() - 3);
    }
    shown
}

/// Distinct IPs (or hostnames) sorted, clipped to 16 characters.
fn ingress_address(load_balancer: &Value) -> String {
    let mut addresses: Vec<&str> = items(&load_balancer["ingress"])
        .filter_map(|(_, i)| {
            i["ip"]
                .as_str()
                .filter(|s| !s.is_empty())
                .or(i["hostname"].as_str())
        })
        .filter(|s| !s.is_empty())
        .collect();
    addresses.sort_unstable();
    addresses.dedup();
    let joined = addresses.join(",");
    if joined.len() > 16 {
        return format!("{}...", &joined[..13]);
    }
    joined
}

fn ingress_classes() -> Simple<IngressClass> {
    Simple {
        columns: || {
            vec![
                Column::new(
                    "Controller",
                    "string",
                    "Controller that is responsible for handling this class",
                ),
                Column::new(
                    "Parameters",
                    "string",
                    "A reference to a resource with additional parameters",
                ),
                AGE,
            ]
        },
        cells: |o| {
            vec![
                o["spec"]["controller"].clone(),
                class_parameters(&o["spec"]["parameters"]).into(),
                age_cell(o),
            ]
        },
        validate: validate_ingress_class,
        validate_update: |new, old| {
            immutable(new, old, "/spec/controller", "spec.controller")
                .into_iter()
                .collect()
        },
        ..simple(ResourceDef {
            namespaced: false,
            ..crate::registry::kinds::common::simple::def(
                GROUP,
                "ingressclasses",
                "IngressClass",
                "ingressclass",
            )
        })
    }
}

/// `Kind.group/name` of the parameters, `<none>` without.
fn class_parameters(parameters: &Value) -> String {
    if !parameters.is_object() {
        return "<none>".into();
    }
    let mut shown = parameters["kind"].as_str().unwrap_or("").to_string();
    if let Some(group) = parameters["apiGroup"].as_str() {
        shown = format!("{shown}.{group}");
    }
    format!("{shown}/{}", parameters["name"].as_str().unwrap_or(""))
}

/// The controller is a domain-prefixed path such as `k8s.io/ingress-nginx`.
fn validate_ingress_class(obj: &Value) -> Vec<Cause> {
    let controller = obj["spec"]["controller"].as_str().unwrap_or("");
    if controller.is_empty() {
        return vec![Cause::required("spec.controller")];
    }
    let domain_prefixed = controller
        .split_once('/')
        .is_some_and(|(domain, path)| is_dns1123_subdomain(domain) && !path.is_empty());
    if domain_prefixed {
        return Vec::new();
    }
    vec![validation::invalid(
        "spec.controller",
        &controller.into(),
        "must be a domain-prefixed path (such as \"acme.io/foo\")",
    )]
}

fn network_policies() -> Simple<NetworkPolicy> {
    Simple {
        columns: || {
            vec![
                Column::new(
                    "Pod-Selector",
                    "string",
                    "podSelector selects the pods to which this NetworkPolicy object applies.",
                ),
                AGE,
            ]
        },
        cells: |o| {
            vec![
                label_selector(&o["spec"]["podSelector"]).into(),
                age_cell(o),
            ]
        },
        validate: validate_network_policy,
        ..simple(ResourceDef {
            short_names: &["netpol"],
            ..crate::registry::kinds::common::simple::def(
                GROUP,
                "networkpolicies",
                "NetworkPolicy",
                "networkpolicy",
            )
        })
    }
}

fn validate_network_policy(obj: &Value) -> Vec<Cause> {
    let spec = &obj["spec"];
    let mut causes = Vec::new();
    for (i, kind) in items(&spec["policyTypes"]) {
        if !matches!(kind.as_str(), Some("Ingress" | "Egress")) {
            let field = format!("spec.policyTypes[{i}]");
            causes.push(validation::unsupported(field, kind, &["Ingress", "Egress"]));
        }
    }
    for (direction, peers) in [("ingress", "from"), ("egress", "to")] {
        for (i, rule) in items(&spec[direction]) {
            let here = format!("spec.{direction}[{i}]");
            causes.extend(peer_and_port_causes(rule, peers, &here));
        }
    }
    causes
}

fn peer_and_port_causes(rule: &Value, peers: &str, here: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (j, port) in items(&rule["ports"]) {
        let field = format!("{here}.ports[{j}].protocol");
        check_enum(
            port,
            "/protocol",
            &field,
            &["TCP", "UDP", "SCTP"],
            &mut causes,
        );
    }
    for (j, peer) in items(&rule[peers]) {
        let block = &peer["ipBlock"];
        if block.is_object() && block["cidr"].as_str().is_none_or(str::is_empty) {
            causes.push(Cause::required(format!("{here}.{peers}[{j}].ipBlock.cidr")));
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ingress(spec: Value) -> Value {
        json!({"metadata": {"name": "web"}, "spec": spec})
    }

    #[test]
    fn a_typical_ingress_passes_and_prints_like_kubectl() {
        let obj = ingress(
            json!({"ingressClassName": "nginx", "tls": [{"hosts": ["a.example.com"], "secretName": "t"}],
            "rules": [{"host": "a.example.com", "http": {"paths": [{"path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}),
        );
        assert!(
            validate_ingress(&obj).is_empty(),
            "{:?}",
            validate_ingress(&obj)
        );
        assert_eq!(
            ingress_cells(&obj)[..4],
            [
                json!("nginx"),
                json!("a.example.com"),
                json!(""),
                json!("80, 443")
            ]
        );
    }

    #[test]
    fn ingress_paths_need_a_type_an_absolute_path_and_a_port() {
        let obj = ingress(json!({"rules": [{"host": "10.0.0.1", "http": {"paths": [
            {"path": "/", "backend": {"service": {"name": "web", "port": {}}}},
            {"path": "api", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"name": "http"}}}}]}}]}));
        let fields: Vec<String> = validate_ingress(&obj)
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        assert_eq!(fields, [
            "spec.rules[0].host: Invalid value: \"10.0.0.1\": must be a DNS name, not an IP address",
            "spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified",
            "spec.rules[0].http.paths[0].backend.service.port: Invalid value: \"{}\": port name or number is required",
            "spec.rules[0].http.paths[1].path: Invalid value: \"api\": must be an absolute path",
        ]);
        assert!(!validate_ingress(&ingress(json!({}))).is_empty());
    }

    #[test]
    fn ingress_hosts_are_clipped_at_three() {
        let rules = json!([{"host": "a"}, {"host": "b"}, {"host": "c"}, {"host": "d"}]);
        assert_eq!(ingress_hosts(&rules), "a,b,c + 1 more...");
        assert_eq!(ingress_hosts(&json!([{}])), "*");
    }

    #[test]
    fn ingress_class_controller_is_a_prefixed_path_and_immutable() {
        let class = |c: &str| json!({"metadata": {"name": "nginx"}, "spec": {"controller": c}});
        assert!(validate_ingress_class(&class("k8s.io/ingress-nginx")).is_empty());
        assert_eq!(
            validate_ingress_class(&class(""))[0],
            Cause::required("spec.controller")
        );
        assert_eq!(validate_ingress_class(&class("nginx")).len(), 1);
        let causes =
            ingress_classes().validate_update(&class("a.io/x"), &class("k8s.io/ingress-nginx"));
        assert_eq!(
            causes[0].message,
            "Invalid value: \"a.io/x\": field is immutable"
        );
    }

    #[test]
    fn network_policy_types_and_blocks() {
        let obj = json!({"metadata": {"name": "db"}, "spec": {"podSelector": {"matchLabels": {"app": "db"}},
            "policyTypes": ["Ingress", "Sideways"],
            "ingress": [{"from": [{"ipBlock": {}}], "ports": [{"protocol": "ICMP", "port": 5432}]}]}});
        let fields: Vec<String> = validate_network_policy(&obj)
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(
            fields,
            [
                "spec.policyTypes[1]",
                "spec.ingress[0].ports[0].protocol",
                "spec.ingress[0].from[0].ipBlock.cidr"
            ]
        );
        assert_eq!(network_policies().cells(&obj)[0], "app=db");
    }
}
