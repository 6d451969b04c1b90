//! The `Node` authorization mode (kube's Node authorizer): what a
//! kubelet's identity, `system:node:<name>` in `system:nodes`, may read
//! and write, decided from a graph of the pods bound to each node and the
//! objects they name, kept from the registry's watches. With `RBAC` after
//! it (`--authorization-mode=Node,RBAC`, the default) nodes need no RBAC
//! binding; the `NodeRestriction` admission plugin limits their writes to
//! their own objects.
//!
//! - `graph.rs`: the graph, updated in place per event;
//! - `feed.rs`: lists and watches pods and PersistentVolumes into it;
//! - `authorizer.rs`: the decision.

mod authorizer;
mod feed;
mod graph;

use std::sync::Arc;

pub use authorizer::{NodeAuthorizer, LEASE_NAMESPACE};

use crate::auth::PolicyRule;
use crate::error::ApiError;
use crate::registry::Catalog;

/// The Node authorizer over `catalog`'s pods and volumes, its graph
/// filled before it answers.
pub async fn start(catalog: &Arc<Catalog>) -> Result<NodeAuthorizer, ApiError> {
    let graph = feed::start(catalog.clone()).await?;
    let rules = PolicyRule::all_of(&crate::rbac::component_policy::node());
    Ok(NodeAuthorizer::new(graph, rules))
}
