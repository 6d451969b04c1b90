//! Which pods stand behind a Service, and how: the rules the endpoints,
//! EndpointSlice controllers share (kube's `ShouldPodBeInEndpoints`,
//! `FindPort`, `ShouldSetHostname` and the address-family choice).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use capstan_client::informer::{key_of, InformerEvent, Store};
use k8s_openapi::api::core::v1::{Pod, Service, ServicePort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::pods;

/// The label selector of a Service that selects pods; None for a Service
/// without one (its Endpoints are written by hand and left alone). An
/// empty map is no selector, as the API server round-trips it.
pub fn selector(service: &Service) -> Option<&BTreeMap<String, String>> {
    service
        .spec
        .as_ref()?
        .selector
        .as_ref()
        .filter(|s| !s.is_empty())
}

/// Whether `labels` carry every pair of `selector`.
pub fn matches(
    selector: &BTreeMap<String, String>,
    labels: Option<&BTreeMap<String, String>>,
) -> bool {
    let empty = BTreeMap::new();
    let labels = labels.unwrap_or(&empty);
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// An ExternalName Service is a DNS alias: it has no endpoints.
pub fn is_external_name(service: &Service) -> bool {
    let kind = service.spec.as_ref().and_then(|s| s.type_.as_deref());
    kind == Some("ExternalName")
}

/// `spec.clusterIP` is None (or not allocated): a headless Service.
pub fn is_headless(service: &Service) -> bool {
    let ip = service.spec.as_ref().and_then(|s| s.cluster_ip.as_deref());
    matches!(ip, None | Some("") | Some("None"))
}

pub fn publishes_not_ready(service: &Service) -> bool {
    service
        .spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false)
}

pub fn ports(service: &Service) -> &[ServicePort] {
    service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_deref())
        .unwrap_or_default()
}

/// The keys of the Services in the pod's namespace whose selector matches
/// `labels` (a pod's labels now or before a change).
pub fn services_selecting(
    services: &Store<Service>,
    namespace: &str,
    labels: Option<&BTreeMap<String, String>>,
) -> Vec<String> {
    services
        .list_namespace(namespace)
        .iter()
        .filter(|s| selector(s).is_some_and(|sel| matches(sel, labels)))
        .map(|s| key_of(s.as_ref()))
        .collect()
}

/// The pods of the Service's namespace its selector matches.
pub fn pods_of(pods: &Store<Pod>, service: &Service) -> Vec<Arc<Pod>> {
    let Some(selector) = selector(service) else {
        return Vec::new();
    };
    let namespace = service.metadata.namespace.as_deref().unwrap_or_default();
    pods.list_namespace(namespace)
        .into_iter()
        .filter(|p| matches(selector, p.metadata.labels.as_ref()))
        .collect()
}

/// Whether a pod has a place among a Service's endpoints at all: it is not
/// finished, has an address, and (unless terminating pods are wanted) is
/// not being deleted.
pub fn belongs(pod: &Pod, include_terminating: bool) -> bool {
    if matches!(pods::phase(pod), "Succeeded" | "Failed") {
        return false;
    }
    if pod_ips(pod).is_empty() {
        return false;
    }
    include_terminating || !pods::is_terminating(pod)
}

/// The pod's addresses, `status.podIPs` or else `status.podIP`.
pub fn pod_ips(pod: &Pod) -> Vec<String> {
    let Some(status) = pod.status.as_ref() else {
        return Vec::new();
    };
    let listed: Vec<String> = status
        .pod_ips
        .iter()
        .flatten()
        .map(|ip| ip.ip.clone())
        .filter(|ip| !ip.is_empty())
        .collect();
    if !listed.is_empty() {
        return listed;
    }
    status
        .pod_ip
        .clone()
        .filter(|ip| !ip.is_empty())
        .into_iter()
        .collect()
}

pub fn is_ipv6(address: &str) -> bool {
    matches!(address.parse::<IpAddr>(), Ok(IpAddr::V6(_)))
}

/// The address family the Service's endpoints use: its first ipFamily,
/// else its clusterIP's, else (headless) the pod's own.
pub fn wants_ipv6(service: &Service, pod: &Pod) -> bool {
    let spec = service.spec.as_ref();
    if let Some(first) = spec.and_then(|s| s.ip_families.as_ref()?.first().cloned()) {
        return first == "IPv6";
    }
    if !is_headless(service) {
        let ip = spec.and_then(|s| s.cluster_ip.as_deref()).unwrap_or("");
        return is_ipv6(ip);
    }
    pod_ips(pod).first().is_some_and(|ip| is_ipv6(ip))
}

/// The pod's address of the family the Service wants, if it has one.
pub fn address_for(service: &Service, pod: &Pod) -> Option<String> {
    let v6 = wants_ipv6(service, pod);
    pod_ips(pod).into_iter().find(|ip| is_ipv6(ip) == v6)
}

/// A pod's own hostname is published when it names this Service as its subdomain.
pub fn hostname_for(service: &Service, pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    let hostname = spec.hostname.as_deref().filter(|h| !h.is_empty())?;
    let same_namespace = service.metadata.namespace == pod.metadata.namespace;
    let named = spec.subdomain.as_deref() == service.metadata.name.as_deref();
    (same_namespace && named).then(|| hostname.to_string())
}

/// The pod's port a Service port sends to: the number itself, or the
/// container port of that name and protocol (sidecars included). None
/// when the pod has no such port.
pub fn find_port(pod: &Pod, port: &ServicePort) -> Option<i32> {
    let protocol = port.protocol.as_deref().unwrap_or("TCP");
    match port.target_port.as_ref() {
        None => Some(port.port),
        Some(IntOrString::Int(number)) => Some(*number),
        Some(IntOrString::String(name)) => {
            let spec = pod.spec.as_ref()?;
            let sidecars = spec
                .init_containers
                .iter()
                .flatten()
                .filter(|c| c.restart_policy.as_deref() == Some("Always"));
            spec.containers
                .iter()
                .chain(sidecars)
                .flat_map(|c| c.ports.iter().flatten())
                .find(|p| {
                    p.name.as_deref() == Some(name.as_str())
                        && p.protocol.as_deref().unwrap_or("TCP") == protocol
                })
                .map(|p| p.container_port)
        }
    }
}

/// The Services a pod's change concerns: those selecting it now and,
/// when its labels changed, those that selected it before. Nothing when
/// no published part of the pod changed.
pub fn services_for_pod_event(
    services: &Store<Service>,
    event: &InformerEvent<Pod>,
) -> Vec<String> {
    let pod = event.object();
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let mut keys = services_selecting(services, namespace, pod.metadata.labels.as_ref());
    if let InformerEvent::Updated { old, new } = event {
        if endpoint_view(old) == endpoint_view(new) {
            return Vec::new();
        }
        if old.metadata.labels != new.metadata.labels {
            for key in services_selecting(services, namespace, old.metadata.labels.as_ref()) {
                if !keys.contains(&key) {
                    keys.push(key);
                }
            }
        }
    }
    keys
}

/// What of a pod the endpoint controllers publish: a change elsewhere
/// (an annotation, a container's restart count) changes no endpoint.
pub fn endpoint_view(pod: &Pod) -> impl PartialEq {
    let spec = pod.spec.as_ref();
    let ports: Vec<_> = spec
        .into_iter()
        .flat_map(|s| {
            s.containers
                .iter()
                .chain(s.init_containers.iter().flatten())
        })
        .map(|c| (c.ports.clone(), c.restart_policy.clone()))
        .collect();
    (
        pod.metadata.labels.clone(),
        pod_ips(pod),
        pods::is_ready(pod),
        pods::is_terminating(pod),
        pods::phase(pod).to_string(),
        spec.and_then(|s| s.node_name.clone()),
        spec.and_then(|s| s.hostname.clone()),
        spec.and_then(|s| s.subdomain.clone()),
        ports,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::object;
    use serde_json::json;

    fn pod() -> Pod {
        object(json!({
            "metadata": {"name": "web-1", "namespace": "default", "labels": {"app": "web"}},
            "spec": {
                "hostname": "web-1", "subdomain": "web",
                "containers": [{"name": "c", "image": "nginx",
                    "ports": [{"name": "http", "containerPort": 8080},
                              {"name": "dns", "containerPort": 5353, "protocol": "UDP"}]}],
            },
            "status": {"phase": "Running", "podIP": "10.0.0.5",
                "podIPs": [{"ip": "10.0.0.5"}, {"ip": "fd00::5"}]},
        }))
    }

    fn service(spec: serde_json::Value) -> Service {
        object(json!({"metadata": {"name": "web", "namespace": "default"}, "spec": spec}))
    }

    #[test]
    fn named_ports_resolve_by_name_and_protocol() {
        let port = |target: serde_json::Value, protocol: &str| -> ServicePort {
            object(json!({"port": 80, "targetPort": target, "protocol": protocol}))
        };
        let pod = pod();
        assert_eq!(find_port(&pod, &port(json!("http"), "TCP")), Some(8080));
        assert_eq!(find_port(&pod, &port(json!("http"), "UDP")), None);
        assert_eq!(find_port(&pod, &port(json!("dns"), "UDP")), Some(5353));
        assert_eq!(find_port(&pod, &port(json!(9000), "TCP")), Some(9000));
        assert_eq!(find_port(&pod, &port(json!("nope"), "TCP")), None);
    }

    #[test]
    fn the_address_family_follows_the_service() {
        let pod = pod();
        let v4 = service(json!({"clusterIP": "10.96.0.10", "selector": {"app": "web"}}));
        let v6 = service(json!({"ipFamilies": ["IPv6"], "clusterIP": "fd00::10"}));
        assert_eq!(address_for(&v4, &pod).as_deref(), Some("10.0.0.5"));
        assert_eq!(address_for(&v6, &pod).as_deref(), Some("fd00::5"));
        let headless = service(json!({"clusterIP": "None"}));
        assert!(is_headless(&headless));
        assert_eq!(address_for(&headless, &pod).as_deref(), Some("10.0.0.5"));
        assert_eq!(hostname_for(&headless, &pod).as_deref(), Some("web-1"));
    }

    #[test]
    fn finished_addressless_and_terminating_pods_are_left_out() {
        let mut pod = pod();
        assert!(belongs(&pod, false));
        pod.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::chrono::Utc::now()),
        );
        assert!(!belongs(&pod, false));
        assert!(belongs(&pod, true));
        pod.status.as_mut().unwrap().phase = Some("Succeeded".into());
        assert!(!belongs(&pod, true));
        let mut bare = super::tests::pod();
        bare.status = None;
        assert!(!belongs(&bare, true));
    }

    #[test]
    fn an_empty_selector_selects_nothing() {
        let empty = service(json!({"selector": {}}));
        assert!(selector(&empty).is_none());
        let some = service(json!({"selector": {"app": "web"}}));
        let labels: BTreeMap<String, String> = [("app".into(), "web".into())].into();
        assert!(matches(selector(&some).unwrap(), Some(&labels)));
        assert!(!matches(selector(&some).unwrap(), None));
    }
}
