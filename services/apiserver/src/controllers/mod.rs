//! The loops kube-controller-manager would run that the API's own
//! semantics depend on: without them a Foreground delete would never
//! finish, a terminating namespace would keep its contents, and a pod
//! deleted with a grace period would stay Terminating for ever. Each pass
//! looks at every resource actor's cached objects and acts through the
//! same actor messages the gateway sends, so every rule (preconditions,
//! finalizers, claims) applies. Several API servers on one store may run
//! them at once: every write they make is conditional on uid or
//! resourceVersion, so the second one's attempt is a harmless no-op.

mod claims_repair;
pub mod crds;
mod garbage_collector;
mod namespaces;
mod pod_termination;
pub mod resource_quotas;
pub mod service_accounts;
mod world;

pub use world::MANAGER;

use std::sync::Arc;
use std::time::Duration;

use crate::registry::Catalog;
use crate::storage::Store;

/// How often a pass runs when nothing is deleted.
const PERIOD: Duration = Duration::from_secs(2);
/// After a delete, how long to let the watch caches see it first.
const SETTLE: Duration = Duration::from_millis(150);

/// Passes between two repairs of leaked claims (about a minute).
const REPAIR_EVERY: u32 = 30;

/// Runs the passes until the process ends.
pub async fn run(catalog: Arc<Catalog>, store: Store, prefix: String) {
    let mut passes = 0u32;
    loop {
        let deleted = tokio::time::timeout(PERIOD, catalog.deletions.notified()).await;
        if deleted.is_ok() {
            tokio::time::sleep(SETTLE).await;
        }
        let world = world::World::observe(&catalog).await;
        garbage_collector::pass(&catalog, &world).await;
        pod_termination::pass(&world).await;
        namespaces::pass(&world).await;
        if passes.is_multiple_of(REPAIR_EVERY) {
            claims_repair::pass(&store, &prefix).await;
        }
        passes = passes.wrapping_add(1);
    }
}
