//! discovery.k8s.io/v1 EndpointSlice: addresses of one type behind a
//! service.

use std::sync::Arc;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::Value;

use crate::error::Cause;
use crate::registry::kinds::common::cells::list_with_more;
use crate::registry::kinds::common::simple::{simple, Simple};
use crate::registry::kinds::common::validation::{self, immutable, items};
use crate::registry::strategy::{age_cell, Column, Strategy, AGE};

const ADDRESS_TYPES: [&str; 3] = ["IPv4", "IPv6", "FQDN"];

pub fn all() -> Vec<Arc<dyn Strategy>> {
    let def = crate::registry::kinds::common::simple::def(
        "discovery.k8s.io",
        "endpointslices",
        "EndpointSlice",
        "endpointslice",
    );
    vec![Arc::new(Simple::<EndpointSlice> {
        columns,
        cells,
        validate,
        validate_update: |new, old| {
            immutable(new, old, "/addressType", "addressType")
                .into_iter()
                .collect()
        },
        ..simple(def)
    })]
}

fn validate(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    match obj["addressType"].as_str() {
        None | Some("") => causes.push(Cause::required("addressType")),
        Some(kind) if !ADDRESS_TYPES.contains(&kind) => causes.push(validation::unsupported(
            "addressType",
            &obj["addressType"],
            &ADDRESS_TYPES,
        )),
        Some(_) => {}
    }
    for (i, endpoint) in items(&obj["endpoints"]) {
        if items(&endpoint["addresses"]).next().is_none() {
            let why = "must contain at least 1 address";
            causes.push(validation::required(
                format!("endpoints[{i}].addresses"),
                why,
            ));
        }
    }
    for (i, port) in items(&obj["ports"]) {
        let field = format!("ports[{i}].protocol");
        validation::check_enum(
            port,
            "/protocol",
            &field,
            &["SCTP", "TCP", "UDP"],
            &mut causes,
        );
    }
    causes
}

fn columns() -> Vec<Column> {
    vec![
        Column::new(
            "AddressType",
            "string",
            "addressType specifies the type of address carried by this EndpointSlice.",
        ),
        Column::new(
            "Ports",
            "string",
            "ports specifies the list of network ports exposed by each endpoint in this slice.",
        ),
        Column::new(
            "Endpoints",
            "string",
            "endpoints is a list of unique endpoints in this slice.",
        ),
        AGE,
    ]
}

/// formatDiscoveryPorts / formatDiscoveryEndpoints: three at most.
fn cells(obj: &Value) -> Vec<Value> {
    let ports: Vec<String> = items(&obj["ports"])
        .map(|(_, p)| match (&p["port"], p["name"].as_str()) {
            (Value::Number(n), _) => n.to_string(),
            (_, Some(name)) => name.to_string(),
            _ => "*".to_string(),
        })
        .collect();
    let addresses: Vec<String> = items(&obj["endpoints"])
        .flat_map(|(_, e)| {
            items(&e["addresses"]).map(|(_, a)| a.as_str().unwrap_or("").to_string())
        })
        .collect();
    vec![
        obj["addressType"].clone(),
        list_with_more(&ports, 3).into(),
        list_with_more(&addresses, 3).into(),
        age_cell(obj),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn address_type_is_required_and_known() {
        let slice = |t: &str| {
            json!({"metadata": {"name": "web-abc"}, "addressType": t,
            "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.2", "10.0.0.3", "10.0.0.4"]}],
            "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]})
        };
        assert!(validate(&slice("IPv4")).is_empty());
        assert_eq!(validate(&slice("")), [Cause::required("addressType")]);
        assert_eq!(validate(&slice("IPv5"))[0].reason, "FieldValueNotSupported");
        let cells = cells(&slice("IPv4"));
        assert_eq!(
            cells[..3],
            [
                json!("IPv4"),
                json!("80"),
                json!("10.0.0.1,10.0.0.2,10.0.0.3 + 1 more...")
            ]
        );
    }
}
