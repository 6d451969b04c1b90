//! The loops the API server itself needs: serving CustomResourceDefinitions
//! (`crds`), giving back claims whose objects are gone (`claims_repair`),
//! the default ServiceAccounts and root CA (`service_accounts`) and quota
//! usage (`resource_quotas`). kube-controller-manager's loops (garbage
//! collection, namespace cleanup, ending graceful pod deletions) run in
//! `capstan-controller-manager`, an API client like any other.

mod claims_repair;
pub mod crds;
pub mod resource_quotas;
pub mod service_accounts;

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
