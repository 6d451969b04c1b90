//! A Service's Endpoints subsets from its pods: one address per pod (ready
//! or not ready), grouped by the set of ports they serve, in a stable
//! order so that an unchanged world compares equal and writes nothing;
//! past 1000 addresses, truncated as kube truncates (ready ones first,
//! each subset keeping its share).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, ObjectReference, Pod, Service,
};

use super::selection;
use crate::pods;

/// Most addresses one Endpoints object carries.
pub const MAX_CAPACITY: usize = 1000;
/// The annotation marking an Endpoints object that was cut to capacity.
pub const OVER_CAPACITY: &str = "endpoints.kubernetes.io/over-capacity";

/// Ready and not-ready addresses sharing one port set.
#[derive(Default)]
struct Group {
    ready: BTreeMap<String, EndpointAddress>,
    not_ready: BTreeMap<String, EndpointAddress>,
}

/// A port as a sortable key.
type PortKey = (String, i32, String, Option<String>);

fn port_key(port: &EndpointPort) -> PortKey {
    (
        port.name.clone().unwrap_or_default(),
        port.port,
        port.protocol.clone().unwrap_or_default(),
        port.app_protocol.clone(),
    )
}

/// The subsets for `service` from `pods` (the pods its selector matches).
pub fn desired(service: &Service, pods: &[Arc<Pod>]) -> Vec<EndpointSubset> {
    let tolerate_unready = selection::publishes_not_ready(service);
    let mut groups: BTreeMap<Vec<PortKey>, (Vec<EndpointPort>, Group)> = BTreeMap::new();
    for pod in pods {
        if !selection::belongs(pod, tolerate_unready) {
            continue;
        }
        let Some(address) = address(service, pod) else {
            continue;
        };
        let ready = tolerate_unready || pods::is_ready(pod);
        for ports in port_sets(service, pod) {
            let key: Vec<PortKey> = ports.iter().map(port_key).collect();
            let (_, group) = groups
                .entry(key)
                .or_insert_with(|| (ports, Group::default()));
            let side = match ready {
                true => &mut group.ready,
                false => &mut group.not_ready,
            };
            side.insert(address.ip.clone(), address.clone());
        }
    }
    groups
        .into_values()
        .map(|(ports, group)| subset(ports, group))
        .collect()
}

fn address(service: &Service, pod: &Pod) -> Option<EndpointAddress> {
    let ip = selection::address_for(service, pod)?;
    Some(EndpointAddress {
        ip,
        hostname: selection::hostname_for(service, pod),
        node_name: Some(pods::node_name(pod).to_string()).filter(|n| !n.is_empty()),
        target_ref: Some(ObjectReference {
            kind: Some("Pod".into()),
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
            ..ObjectReference::default()
        }),
    })
}

/// Each port the pod serves for the Service, one subset apiece (kube
/// repacks them afterwards); a headless Service without ports gets the
/// bare address.
fn port_sets(service: &Service, pod: &Pod) -> Vec<Vec<EndpointPort>> {
    let ports = selection::ports(service);
    if ports.is_empty() {
        return match selection::is_headless(service) {
            true => vec![Vec::new()],
            false => Vec::new(),
        };
    }
    ports
        .iter()
        .filter_map(|port| {
            let number = selection::find_port(pod, port)?;
            Some(vec![EndpointPort {
                name: port.name.clone().filter(|n| !n.is_empty()),
                port: number,
                protocol: Some(port.protocol.clone().unwrap_or_else(|| "TCP".into())),
                app_protocol: port.app_protocol.clone(),
            }])
        })
        .collect()
}

fn subset(ports: Vec<EndpointPort>, group: Group) -> EndpointSubset {
    let not_ready: Vec<EndpointAddress> = group
        .not_ready
        .into_iter()
        .filter(|(ip, _)| !group.ready.contains_key(ip))
        .map(|(_, a)| a)
        .collect();
    EndpointSubset {
        addresses: non_empty(group.ready.into_values().collect()),
        not_ready_addresses: non_empty(not_ready),
        ports: non_empty(ports),
    }
}

fn non_empty<T>(list: Vec<T>) -> Option<Vec<T>> {
    (!list.is_empty()).then_some(list)
}

/// kube's RepackSubsets: subsets whose addresses are the same set are
/// merged into one carrying all their ports, so a pod serving three ports
/// appears once with three ports rather than three times.
pub fn repack(subsets: Vec<EndpointSubset>) -> Vec<EndpointSubset> {
    let mut by_addresses: BTreeMap<(Vec<String>, Vec<String>), EndpointSubset> = BTreeMap::new();
    for subset in subsets {
        let ips = |list: &Option<Vec<EndpointAddress>>| -> Vec<String> {
            list.iter().flatten().map(|a| a.ip.clone()).collect()
        };
        let key = (ips(&subset.addresses), ips(&subset.not_ready_addresses));
        match by_addresses.get_mut(&key) {
            Some(merged) => {
                let ports = merged.ports.get_or_insert_with(Vec::new);
                ports.extend(subset.ports.unwrap_or_default());
            }
            None => {
                by_addresses.insert(key, subset);
            }
        }
    }
    by_addresses
        .into_values()
        .map(|mut subset| {
            if let Some(ports) = subset.ports.as_mut() {
                ports.sort_by_key(port_key);
                ports.dedup_by_key(|p| port_key(p));
            }
            subset
        })
        .collect()
}

/// The subsets for `service`: computed, then repacked.
pub fn for_service(service: &Service, pods: &[Arc<Pod>]) -> Vec<EndpointSubset> {
    repack(desired(service, pods))
}

fn count(list: &Option<Vec<EndpointAddress>>) -> usize {
    list.as_ref().map_or(0, Vec::len)
}

/// How many addresses (ready and not) the subsets carry.
pub fn total(subsets: &[EndpointSubset]) -> usize {
    subsets
        .iter()
        .map(|s| count(&s.addresses) + count(&s.not_ready_addresses))
        .sum()
}

/// Cuts the subsets to [`MAX_CAPACITY`] addresses, ready ones first, each
/// subset keeping its proportion (rounded up, the last taking what is
/// left). Returns whether anything was cut.
pub fn truncate(subsets: &mut [EndpointSubset]) -> bool {
    let ready: usize = subsets.iter().map(|s| count(&s.addresses)).sum();
    let not_ready: usize = subsets.iter().map(|s| count(&s.not_ready_addresses)).sum();
    if ready + not_ready <= MAX_CAPACITY {
        return false;
    }
    let cut_ready = ready > MAX_CAPACITY;
    let (room, population) = match cut_ready {
        true => (MAX_CAPACITY, ready),
        false => (MAX_CAPACITY - ready, not_ready),
    };
    let mut left = room;
    for subset in subsets.iter_mut() {
        let list = match cut_ready {
            true => &mut subset.addresses,
            false => &mut subset.not_ready_addresses,
        };
        let here = count(list);
        let share = ((here as f64 / population as f64) * room as f64).ceil() as usize;
        let keep = share.min(left);
        if let Some(addresses) = list.as_mut() {
            addresses.truncate(keep);
        }
        left -= count(list);
        if cut_ready {
            subset.not_ready_addresses = None;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::object;
    use serde_json::json;

    fn pod(name: &str, ip: &str, ready: bool) -> Arc<Pod> {
        Arc::new(object(json!({
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "nginx",
                "ports": [{"name": "http", "containerPort": 8080}]}]},
            "status": {"phase": "Running", "podIP": ip,
                "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]},
        })))
    }

    fn service(spec: serde_json::Value) -> Service {
        object(json!({"metadata": {"name": "web", "namespace": "default"}, "spec": spec}))
    }

    #[test]
    fn ports_of_one_pod_are_packed_into_one_subset() {
        let svc = service(
            json!({"clusterIP": "10.96.0.1", "selector": {"app": "web"}, "ports": [
            {"name": "a", "port": 80, "targetPort": "http", "protocol": "TCP"},
            {"name": "b", "port": 81, "targetPort": 9090, "protocol": "TCP"}]}),
        );
        let pods = [pod("p1", "10.0.0.1", true), pod("p2", "10.0.0.2", false)];
        let subsets = for_service(&svc, &pods);
        assert_eq!(subsets.len(), 1, "{subsets:?}");
        let subset = &subsets[0];
        let ips: Vec<&str> = subset
            .addresses
            .iter()
            .flatten()
            .map(|a| a.ip.as_str())
            .collect();
        assert_eq!(ips, ["10.0.0.1"]);
        let not_ready: Vec<&str> = subset
            .not_ready_addresses
            .iter()
            .flatten()
            .map(|a| a.ip.as_str())
            .collect();
        assert_eq!(not_ready, ["10.0.0.2"]);
        let ports: Vec<(i32, Option<&str>)> = subset
            .ports
            .iter()
            .flatten()
            .map(|p| (p.port, p.name.as_deref()))
            .collect();
        assert_eq!(ports, [(8080, Some("a")), (9090, Some("b"))]);
        let target = subset.addresses.as_ref().unwrap()[0]
            .target_ref
            .as_ref()
            .unwrap();
        assert_eq!(target.name.as_deref(), Some("p1"));
        assert_eq!(target.kind.as_deref(), Some("Pod"));
    }

    #[test]
    fn publish_not_ready_makes_every_address_ready() {
        let svc = service(
            json!({"clusterIP": "None", "publishNotReadyAddresses": true,
            "selector": {"app": "web"}}),
        );
        let subsets = for_service(&svc, &[pod("p1", "10.0.0.1", false)]);
        assert_eq!(subsets.len(), 1);
        assert_eq!(count(&subsets[0].addresses), 1);
        assert!(
            subsets[0].ports.is_none(),
            "a headless service without ports"
        );
        let plain = service(json!({"clusterIP": "10.96.0.1", "selector": {"app": "web"}}));
        assert!(for_service(&plain, &[pod("p1", "10.0.0.1", true)]).is_empty());
    }

    #[test]
    fn truncation_keeps_ready_addresses_first() {
        let address = |i: usize| EndpointAddress {
            ip: format!("10.0.{}.{}", i / 250, i % 250),
            ..EndpointAddress::default()
        };
        let mut subsets = vec![
            EndpointSubset {
                addresses: Some((0..600).map(address).collect()),
                not_ready_addresses: Some((600..1000).map(address).collect()),
                ports: None,
            },
            EndpointSubset {
                addresses: Some((1000..1200).map(address).collect()),
                not_ready_addresses: Some((1200..1400).map(address).collect()),
                ports: None,
            },
        ];
        assert!(truncate(&mut subsets));
        assert_eq!(total(&subsets), MAX_CAPACITY);
        assert_eq!(count(&subsets[0].addresses), 600);
        assert_eq!(count(&subsets[1].addresses), 200);
        // 200 places for 600 not-ready addresses, shared 400:200 rounding up.
        assert_eq!(count(&subsets[0].not_ready_addresses), 134);
        assert_eq!(count(&subsets[1].not_ready_addresses), 66);
        let mut small = subsets[..1].to_vec();
        small[0].not_ready_addresses = None;
        assert!(!truncate(&mut small));
    }
}
