//! The loops the API server itself needs: serving CustomResourceDefinitions
//! (`crds`) and giving back claims whose objects are gone
//! (`claims_repair`). kube-controller-manager's loops (garbage
//! collection, namespace cleanup, ending graceful pod deletions, quota
//! usage, the default ServiceAccounts and the root CA ConfigMaps) run in
//! `capstan-controller-manager`, an API client like any other.

mod claims_repair;
pub mod crds;

use std::time::Duration;

use crate::storage::Store;

/// Who the controllers' writes are from, in managedFields.
pub const MANAGER: &str = "capstan-controllers";

/// How often leaked claims are looked for.
const REPAIR_PERIOD: Duration = Duration::from_secs(60);

/// Repairs leaked claims now and then, until the process ends.
pub async fn run(store: Store, prefix: String) {
    loop {
        claims_repair::pass(&store, &prefix).await;
        tokio::time::sleep(REPAIR_PERIOD).await;
    }
}
