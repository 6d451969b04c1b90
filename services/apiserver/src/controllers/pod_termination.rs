//! Kubelet's last word on a graceful pod deletion, for a control plane
//! without kubelets: when a Terminating pod's grace period is over, it is
//! deleted for good (as `kubectl delete --grace-period=0 --force` would).

use super::world::{self, World};
use crate::registry::flow::deletion::grace_expired;
use crate::registry::options::DeleteOptions;

pub async fn pass(world: &World) {
    for node in &world.nodes {
        // Only types with a grace period (pods) have one that expires.
        if grace_expired(node.view()) {
            let now = DeleteOptions {
                grace_period: Some(0),
                ..Default::default()
            };
            world::delete(node, now).await;
        }
    }
}
