//! A DaemonSet's current revision (kube's `constructHistory`): the
//! revision holding its template now, renumbered to the newest if it is
//! an older one used again, or made; its hash labels the new pods.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::PodTemplateSpec;

use crate::error::Result;
use crate::history::{revision_for, Revisions, CONTROLLER_REVISION_HASH};

pub fn ds_template(ds: &DaemonSet) -> PodTemplateSpec {
    ds.spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default()
}

/// The current revision's hash (its `controller-revision-hash` label).
pub async fn current_hash(
    ds: &DaemonSet,
    revisions: &mut Revisions,
    collision_count: &mut i32,
) -> Result<String> {
    let candidate = revision_for(ds, &ds_template(ds), 0);
    let name = ds.metadata.name.clone().unwrap_or_default();
    let current = revisions
        .make_newest(&name, candidate, collision_count)
        .await?;
    let labels = current.metadata.labels.as_ref();
    let hash = labels
        .and_then(|l| l.get(CONTROLLER_REVISION_HASH))
        .cloned();
    // A revision made by another hand may lack the label: its name ends with the hash.
    Ok(hash.unwrap_or_else(|| {
        let name = current.metadata.name.unwrap_or_default();
        name.rsplit('-').next().unwrap_or_default().to_string()
    }))
}
