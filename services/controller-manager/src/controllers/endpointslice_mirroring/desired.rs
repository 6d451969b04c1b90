//! The slices' contents for a hand-written Endpoints: each address of each
//! subset becomes an endpoint (ready from `addresses`, not ready from
//! `notReadyAddresses`) of its IP's family, grouped with the subset's
//! ports. Addresses that are not IPs are skipped, and so is whatever a
//! subset has past the mirroring limit; both are counted for the events.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{EndpointAddress, EndpointSubset, Endpoints};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort};

use crate::controllers::endpointslice::reconcile::{ports_key, Group};

/// The groups of one Endpoints and what was left out.
#[derive(Debug, Default)]
pub struct Mirrored {
    pub groups: Vec<Group>,
    /// Addresses that are not IPs.
    pub invalid: usize,
    /// Addresses past the per-subset limit.
    pub skipped: usize,
}

/// The endpoint for `address` and its address type, if it is an IP
/// (written back in canonical form).
fn endpoint(address: &EndpointAddress, ready: bool) -> Option<(&'static str, Endpoint)> {
    let ip: IpAddr = address.ip.trim().parse().ok()?;
    let address_type = if ip.is_ipv6() { "IPv6" } else { "IPv4" };
    let endpoint = Endpoint {
        addresses: vec![ip.to_string()],
        conditions: Some(EndpointConditions {
            ready: Some(ready),
            ..EndpointConditions::default()
        }),
        hostname: address.hostname.clone().filter(|h| !h.is_empty()),
        node_name: address.node_name.clone(),
        target_ref: address.target_ref.clone(),
        ..Endpoint::default()
    };
    Some((address_type, endpoint))
}

fn ports(subset: &EndpointSubset) -> Vec<EndpointPort> {
    subset
        .ports
        .iter()
        .flatten()
        .map(|p| EndpointPort {
            name: Some(p.name.clone().unwrap_or_default()),
            port: Some(p.port),
            protocol: Some(p.protocol.clone().unwrap_or_else(|| "TCP".into())),
            app_protocol: p.app_protocol.clone(),
        })
        .collect()
}

/// What `endpoints` mirrors to, at most `per_subset` addresses a subset.
pub fn mirror(endpoints: &Endpoints, per_subset: usize) -> Mirrored {
    let mut mirrored = Mirrored::default();
    let mut groups: BTreeMap<(String, String), Group> = BTreeMap::new();
    for subset in endpoints.subsets.iter().flatten() {
        let ports = ports(subset);
        let ready = subset.addresses.iter().flatten().map(|a| (a, true));
        let not_ready = subset
            .not_ready_addresses
            .iter()
            .flatten()
            .map(|a| (a, false));
        let mut taken = 0;
        for (address, is_ready) in ready.chain(not_ready) {
            let Some((address_type, endpoint)) = endpoint(address, is_ready) else {
                mirrored.invalid += 1;
                continue;
            };
            if taken == per_subset {
                mirrored.skipped += 1;
                continue;
            }
            taken += 1;
            let key = (address_type.to_string(), ports_key(&ports));
            let group = groups.entry(key).or_insert_with(|| Group {
                address_type: address_type.to_string(),
                ports: ports.clone(),
                endpoints: Vec::new(),
            });
            group.endpoints.push(endpoint);
        }
    }
    mirrored.groups = groups.into_values().collect();
    mirrored
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::object;
    use serde_json::json;

    #[test]
    fn addresses_become_endpoints_of_their_family() {
        let endpoints: Endpoints = object(json!({
            "metadata": {"name": "db", "namespace": "default"},
            "subsets": [
                {"addresses": [{"ip": "192.168.0.1", "hostname": "db-0"}, {"ip": "fd00::0001"}, {"ip": "not-an-ip"}],
                 "notReadyAddresses": [{"ip": "192.168.0.2"}],
                 "ports": [{"name": "pg", "port": 5432}]},
                {"addresses": [{"ip": "192.168.0.3"}, {"ip": "192.168.0.4"}, {"ip": "192.168.0.5"}],
                 "ports": [{"name": "pg", "port": 5432}]},
            ],
        }));
        let mirrored = mirror(&endpoints, 2);
        assert_eq!(mirrored.invalid, 1);
        assert_eq!(
            mirrored.skipped, 2,
            "two over the limit of 2: one per subset"
        );
        let v4 = mirrored
            .groups
            .iter()
            .find(|g| g.address_type == "IPv4")
            .unwrap();
        let addresses: Vec<&str> = v4
            .endpoints
            .iter()
            .map(|e| e.addresses[0].as_str())
            .collect();
        assert_eq!(addresses, ["192.168.0.1", "192.168.0.3", "192.168.0.4"]);
        assert_eq!(v4.endpoints[0].hostname.as_deref(), Some("db-0"));
        let v6 = mirrored
            .groups
            .iter()
            .find(|g| g.address_type == "IPv6")
            .unwrap();
        assert_eq!(v6.endpoints[0].addresses, ["fd00::1"]);
        assert_eq!(v6.ports[0].port, Some(5432));
    }
}
