//! Kubelet's last word on a graceful pod deletion, for a control plane
//! without kubelets: when a Terminating pod's grace period is over, it is
//! deleted for good (as `kubectl delete --grace-period=0 --force` would).

use super::world::{self, World};
use crate::registry::deletion::grace_expired;
use crate::registry::options::DeleteOptions;
use crate::registry::Catalog;

pub async fn pass(catalog: &Catalog, world: &World) {
    for node in &world.nodes {
        let def = catalog.entries()[node.entry].strategy.def();
        let pod = def.group.is_empty() && def.resource == "pods";
        if pod && grace_expired(&node.object) {
            let now = DeleteOptions {
                grace_period: Some(0),
                ..Default::default()
            };
            world::delete(catalog, node, now).await;
        }
    }
}
