//! Repairs claims (cluster IPs, node ports) their owners no longer hold,
//! as kube-apiserver's allocator repair loops do. Claims are written and
//! released in the same transactions as their objects, so a claim can
//! only leak when a namespace's contents are removed and the API server
//! stops part way; this gives such values back.

use crate::storage::{Store, CLAIMS};

/// Runs a repair pass; what it released, for the log.
pub async fn pass(store: &Store, prefix: &str) -> usize {
    let claims = format!("{prefix}/{CLAIMS}/");
    let leaked = match store.leaked_claims(&claims).await {
        Ok(leaked) => leaked,
        Err(err) => {
            tracing::debug!(%err, "claim repair skipped: the store did not answer");
            return 0;
        }
    };
    let mut released = 0;
    for (key, mod_revision) in leaked {
        match store.release_claim(&key, mod_revision).await {
            Ok(()) => {
                tracing::info!(claim = %key, "released a claim whose owner is gone");
                released += 1;
            }
            Err(err) => tracing::warn!(claim = %key, %err, "releasing a leaked claim failed"),
        }
    }
    released
}
