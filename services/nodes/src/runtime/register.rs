//! Registration: each node gets a pod CIDR (the one it registered with
//! before, else a free one of the cluster CIDR, free among every Node of
//! the cluster) and registers its Node as a kubelet does: created with
//! its status, or, when it exists (the process restarted), its labels and
//! status brought up to date.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use chrono::Utc;
use futures::{stream, StreamExt, TryStreamExt};
use ipnet::Ipv4Net;
use k8s_openapi::api::core::v1::Node;
use kube::api::ListParams;
use kube::Api;

use super::fleet::{Fleet, SimNode};
use super::writes;
use crate::error::Error;
use crate::node::cidr::ClusterCidr;

/// Registrations in flight at once.
const PARALLEL: usize = 32;

/// Registers every node of `fleet`; `client` reads as the process.
pub async fn register_all(
    fleet: &Fleet,
    client: &kube::Client,
    range: &ClusterCidr,
) -> Result<(), Error> {
    let existing = existing_nodes(client).await?;
    let cidrs = assign_cidrs(fleet, &existing, range)?;
    stream::iter(fleet.all().iter().cloned())
        .map(|node| {
            let cidr = cidrs[&node.name];
            let before = existing.get(&node.name).cloned();
            async move { register(fleet, &node, cidr, before).await }
        })
        .buffer_unordered(PARALLEL)
        .try_collect::<Vec<()>>()
        .await?;
    tracing::info!(nodes = fleet.all().len(), "nodes registered");
    Ok(())
}

async fn existing_nodes(client: &kube::Client) -> Result<HashMap<String, Node>, Error> {
    let list = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(Error::api("list the cluster's nodes"))?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|n| Some((n.metadata.name.clone()?, n)))
        .collect())
}

fn pod_cidr_of(node: &Node) -> Option<Ipv4Net> {
    node.spec.as_ref()?.pod_cidr.as_deref()?.parse().ok()
}

/// Each node's CIDR: its own if it has one, else the next free one.
fn assign_cidrs(
    fleet: &Fleet,
    existing: &HashMap<String, Node>,
    range: &ClusterCidr,
) -> Result<HashMap<String, Ipv4Net>, Error> {
    let used: BTreeSet<Ipv4Net> = existing.values().filter_map(pod_cidr_of).collect();
    let mut assigned = HashMap::new();
    let mut needing = Vec::new();
    for node in fleet.all() {
        match existing.get(&node.name).and_then(pod_cidr_of) {
            Some(cidr) => {
                assigned.insert(node.name.clone(), cidr);
            }
            None => needing.push(node.name.clone()),
        }
    }
    let free = range.free(&used, needing.len());
    if free.len() < needing.len() {
        return Err(Error::Config(crate::config::ConfigError::Invalid {
            field: "cluster_cidr",
            reason: format!(
                "has {} free node CIDRs left, and {} nodes need one",
                free.len(),
                needing.len()
            ),
        }));
    }
    assigned.extend(needing.into_iter().zip(free));
    Ok(assigned)
}

async fn register(
    fleet: &Fleet,
    node: &Arc<SimNode>,
    cidr: Ipv4Net,
    before: Option<Node>,
) -> Result<(), Error> {
    let now = Utc::now();
    let mut object = fleet.template.node(node.index, &cidr.to_string(), now);
    if let Some(previous) = before.as_ref().and_then(|n| n.status.as_ref()) {
        // Conditions keep their transition times across a restart.
        let conditions = previous.conditions.as_deref().unwrap_or_default();
        object.status = Some(fleet.template.status(&node.name, conditions, now, &[]));
    }
    let registered = match before {
        None => writes::create_node(&node.client, &object).await?,
        Some(_) => None,
    };
    let registered = match registered {
        Some(created) => created,
        None => {
            // Exists: keep its CIDR, fill it in if it had none.
            let has_cidr = before.as_ref().and_then(pod_cidr_of).is_some();
            let cidr_text = cidr.to_string();
            let set_cidr = (!has_cidr).then_some(cidr_text.as_str());
            writes::update_node(&node.client, &object, set_cidr).await?
        }
    };
    node.set_pod_cidr(cidr);
    let mut state = node.state.lock();
    state.status = object.status;
    state.node = Some(Arc::new(registered));
    Ok(())
}
