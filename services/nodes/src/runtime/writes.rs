//! The writes a kubelet makes, each through the node's own identity:
//! pod status patches (only the conditions a kubelet owns, merged by type
//! so that readiness-gate and disruption conditions others wrote stay),
//! the final pod deletion, the Node's registration and status, the Lease.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeStatus, Pod, PodStatus};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::Api;
use serde_json::{json, Value};

use crate::error::{api_code, Error};
use crate::heartbeat::lease::NAMESPACE as LEASE_NAMESPACE;
use crate::pod::conditions::OWNED;

fn names(pod: &Pod) -> (String, String) {
    (
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

/// Writes `status` over the pod's (a strategic merge patch, as the
/// kubelet's status manager sends, with the pod's uid as precondition).
pub async fn pod_status(
    client: &kube::Client,
    pod: &Pod,
    status: &PodStatus,
) -> Result<Pod, Error> {
    let (namespace, name) = names(pod);
    let mut status = serde_json::to_value(status).unwrap_or(Value::Null);
    if let Some(conditions) = status.get_mut("conditions").and_then(Value::as_array_mut) {
        conditions.retain(|c| c["type"].as_str().is_some_and(|t| OWNED.contains(&t)));
    }
    let patch = json!({"metadata": {"uid": pod.metadata.uid}, "status": status});
    Api::<Pod>::namespaced(client.clone(), &namespace)
        .patch_status(&name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .map_err(Error::api(format!(
            "update the status of pod {namespace}/{name}"
        )))
}

/// Deletes a pod whose containers stopped (grace 0, this pod only); gone
/// already is fine.
pub async fn delete_pod(client: &kube::Client, pod: &Pod) -> Result<(), Error> {
    let (namespace, name) = names(pod);
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: pod.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match Api::<Pod>::namespaced(client.clone(), &namespace)
        .delete(&name, &params)
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if matches!(api_code(&e), Some(404 | 409)) => Ok(()),
        Err(e) => Err(Error::api(format!("delete pod {namespace}/{name}"))(e)),
    }
}

/// Registers `node`; `Ok(None)` if a Node of that name exists already.
pub async fn create_node(client: &kube::Client, node: &Node) -> Result<Option<Node>, Error> {
    let name = node.metadata.name.clone().unwrap_or_default();
    match Api::<Node>::all(client.clone())
        .create(&PostParams::default(), node)
        .await
    {
        Ok(created) => Ok(Some(created)),
        Err(e) if api_code(&e) == Some(409) => Ok(None),
        Err(e) => Err(Error::api(format!("register node {name}"))(e)),
    }
}

/// Reconciles an existing Node with the one the node would register:
/// its labels, an empty pod CIDR, then its status.
pub async fn update_node(
    client: &kube::Client,
    node: &Node,
    pod_cidr: Option<&str>,
) -> Result<Node, Error> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let api = Api::<Node>::all(client.clone());
    let mut patch = json!({"metadata": {"labels": node.metadata.labels}});
    if let Some(cidr) = pod_cidr {
        patch["spec"] = json!({"podCIDR": cidr, "podCIDRs": [cidr]});
    }
    api.patch(&name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .map_err(Error::api(format!("update node {name}")))?;
    let status = node.status.clone().unwrap_or_default();
    node_status(client, &name, &status).await
}

/// Reports the node's status.
pub async fn node_status(
    client: &kube::Client,
    name: &str,
    status: &NodeStatus,
) -> Result<Node, Error> {
    let patch = json!({"status": status});
    Api::<Node>::all(client.clone())
        .patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .map_err(Error::api(format!("update the status of node {name}")))
}

fn leases(client: &kube::Client) -> Api<Lease> {
    Api::namespaced(client.clone(), LEASE_NAMESPACE)
}

/// The node's Lease as the API has it, if any.
pub async fn get_lease(client: &kube::Client, name: &str) -> Result<Option<Lease>, Error> {
    leases(client)
        .get_opt(name)
        .await
        .map_err(Error::api(format!("read lease {LEASE_NAMESPACE}/{name}")))
}

pub async fn create_lease(client: &kube::Client, lease: &Lease) -> Result<Lease, Error> {
    let name = lease.metadata.name.clone().unwrap_or_default();
    leases(client)
        .create(&PostParams::default(), lease)
        .await
        .map_err(Error::api(format!("create lease {LEASE_NAMESPACE}/{name}")))
}

/// Replaces the Lease (its resourceVersion guards against lost updates).
pub async fn replace_lease(client: &kube::Client, lease: &Lease) -> Result<Lease, kube::Error> {
    let name = lease.metadata.name.clone().unwrap_or_default();
    leases(client)
        .replace(&name, &PostParams::default(), lease)
        .await
}
