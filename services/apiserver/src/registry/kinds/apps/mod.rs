//! apps/v1: Deployments, ReplicaSets, StatefulSets, DaemonSets and the
//! ControllerRevisions of the last two.

mod deployments;
mod revisions;
mod sets;

use std::sync::Arc;

use crate::registry::Strategy;

pub fn all() -> Vec<Arc<dyn Strategy>> {
    vec![
        Arc::new(deployments::Deployments),
        sets::replica_sets(),
        sets::stateful_sets(),
        sets::daemon_sets(),
        revisions::controller_revisions(),
    ]
}
