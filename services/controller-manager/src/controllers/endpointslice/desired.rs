//! The endpoints a Service should have, as EndpointSlice endpoints grouped
//! by address type and port set: one per pod of each address family the
//! Service serves, with the ready / serving / terminating conditions,
//! node, zone, hostname and a reference to the pod.

use std::collections::BTreeMap;
use std::sync::Arc;

use capstan_client::informer::Store;
use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort};

use super::reconcile::{ports_key, Group};
use crate::controllers::endpoints::selection;
use crate::pods;

pub const IPV4: &str = "IPv4";
pub const IPV6: &str = "IPv6";
/// The node label naming its zone.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// The address types the Service's slices carry: its ipFamilies, else
/// its clusterIP's family, else (headless, no families) both.
pub fn address_types(service: &Service) -> Vec<&'static str> {
    let spec = service.spec.as_ref();
    let families: Vec<&'static str> = spec
        .and_then(|s| s.ip_families.as_ref())
        .into_iter()
        .flatten()
        .map(|f| if f == IPV6 { IPV6 } else { IPV4 })
        .collect();
    if !families.is_empty() {
        return families;
    }
    if !selection::is_headless(service) {
        let ip = spec.and_then(|s| s.cluster_ip.as_deref()).unwrap_or("");
        return vec![if selection::is_ipv6(ip) { IPV6 } else { IPV4 }];
    }
    vec![IPV4, IPV6]
}

/// The ports a pod serves for the Service (those it has no port for are
/// left out).
pub fn ports_for(service: &Service, pod: &Pod) -> Vec<EndpointPort> {
    selection::ports(service)
        .iter()
        .filter_map(|port| {
            let number = selection::find_port(pod, port)?;
            Some(EndpointPort {
                name: Some(port.name.clone().unwrap_or_default()),
                port: Some(number),
                protocol: Some(port.protocol.clone().unwrap_or_else(|| "TCP".into())),
                app_protocol: port.app_protocol.clone(),
            })
        })
        .collect()
}

/// The endpoint for `pod` with address `ip`.
pub fn endpoint(service: &Service, pod: &Pod, ip: String, nodes: &Store<Node>) -> Endpoint {
    let publish = selection::publishes_not_ready(service);
    let serving = publish || pods::is_ready(pod);
    let terminating = pods::is_terminating(pod);
    let node = pods::node_name(pod);
    let zone = match node.is_empty() {
        true => None,
        false => nodes
            .get(None, node)
            .and_then(|n| n.metadata.labels.as_ref()?.get(ZONE_LABEL).cloned()),
    };
    Endpoint {
        addresses: vec![ip],
        conditions: Some(EndpointConditions {
            // Never ready while terminating, unless not-ready pods are published.
            ready: Some(publish || (serving && !terminating)),
            serving: Some(serving),
            terminating: Some(terminating),
        }),
        hostname: selection::hostname_for(service, pod),
        node_name: Some(node.to_string()).filter(|n| !n.is_empty()),
        zone,
        target_ref: Some(ObjectReference {
            kind: Some("Pod".into()),
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
            ..ObjectReference::default()
        }),
        ..Endpoint::default()
    }
}

/// The Service's endpoint groups from `pods` (those its selector matches).
pub fn groups(service: &Service, pods: &[Arc<Pod>], nodes: &Store<Node>) -> Vec<Group> {
    let types = address_types(service);
    let mut groups: BTreeMap<(String, String), Group> = BTreeMap::new();
    for pod in pods {
        if !selection::belongs(pod, true) {
            continue;
        }
        let ports = ports_for(service, pod);
        for address_type in &types {
            let wanted_v6 = *address_type == IPV6;
            let ips = selection::pod_ips(pod);
            let Some(ip) = ips
                .into_iter()
                .find(|ip| selection::is_ipv6(ip) == wanted_v6)
            else {
                continue;
            };
            let key = (address_type.to_string(), ports_key(&ports));
            let group = groups.entry(key).or_insert_with(|| Group {
                address_type: address_type.to_string(),
                ports: ports.clone(),
                endpoints: Vec::new(),
            });
            group.endpoints.push(endpoint(service, pod, ip, nodes));
        }
    }
    groups.into_values().collect()
}
