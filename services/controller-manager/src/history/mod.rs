//! ControllerRevisions, the history StatefulSets and DaemonSets keep of
//! their pod templates (kube's `controller/history`): a revision's data
//! is the patch that puts the template back (what `kubectl rollout undo`
//! applies), its name is the owner's name and the hash of that data, its
//! number grows with each new or re-used template, and the oldest
//! revisions no pod uses are deleted past `revisionHistoryLimit`.

mod store;

pub use store::{History, Revisions};

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::ObjectMeta;
use kube::Resource;
use serde_json::{json, Value};

use crate::ownership::controller_ref;

/// The label that ties a pod (and a revision) to its revision.
pub const CONTROLLER_REVISION_HASH: &str = "controller-revision-hash";

/// The revision data for `template`: a strategic-merge patch that
/// replaces the owner's template with it.
pub fn patch_of(template: &PodTemplateSpec) -> Value {
    let mut template = serde_json::to_value(template).unwrap_or_else(|_| json!({}));
    if let Some(fields) = template.as_object_mut() {
        fields.insert("$patch".into(), json!("replace"));
    }
    json!({"spec": {"template": template}})
}

/// The template a revision's data holds.
pub fn template_of(revision: &ControllerRevision) -> Option<PodTemplateSpec> {
    let mut template = revision.data.as_ref()?.0.pointer("/spec/template")?.clone();
    if let Some(fields) = template.as_object_mut() {
        fields.remove("$patch");
    }
    serde_json::from_value(template).ok()
}

/// kube's revision hash: 32-bit FNV-1 over the data's JSON (keys in
/// order) and the collision count's decimal digits, spelled in the
/// alphabet without vowels.
pub fn hash(data: &Value, collision_count: Option<i32>) -> String {
    let mut bytes = serde_json::to_vec(data).unwrap_or_default();
    if let Some(count) = collision_count {
        bytes.extend(count.to_string().bytes());
    }
    let mut hash: u32 = 0x811c_9dc5;
    for byte in bytes {
        hash = hash.wrapping_mul(0x0100_0193);
        hash ^= u32::from(byte);
    }
    safe_encode(&hash.to_string())
}

/// kube's `rand.SafeEncodeString`.
fn safe_encode(text: &str) -> String {
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    text.bytes()
        .map(|b| ALPHANUMS[b as usize % ALPHANUMS.len()] as char)
        .collect()
}

/// A revision of `owner` holding `template` as number `number`, labelled
/// with the template's labels (so the owner's selector finds it),
/// not yet named (nor numbered, when `number` is 0):
/// [`Revisions::make_newest`] names it with its hash and numbers it.
pub fn revision_for<O: Resource<DynamicType = ()>>(
    owner: &O,
    template: &PodTemplateSpec,
    number: i64,
) -> ControllerRevision {
    let labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    ControllerRevision {
        metadata: ObjectMeta {
            namespace: owner.meta().namespace.clone(),
            labels: Some(labels),
            owner_references: Some(vec![controller_ref(owner)]),
            ..ObjectMeta::default()
        },
        data: Some(RawExtension(patch_of(template))),
        revision: number,
    }
}

/// Whether two revisions hold the same template.
pub fn same_data(a: &ControllerRevision, b: &ControllerRevision) -> bool {
    a.data.as_ref().map(|d| &d.0) == b.data.as_ref().map(|d| &d.0)
}

/// The number the next revision gets: one past the highest.
pub fn next_number(revisions: &[ControllerRevision]) -> i64 {
    revisions.iter().map(|r| r.revision).max().unwrap_or(0) + 1
}

/// Oldest first; equal numbers by creation, then name.
pub fn sort(revisions: &mut [ControllerRevision]) {
    revisions.sort_by(|a, b| {
        a.revision
            .cmp(&b.revision)
            .then_with(|| {
                let at = |r: &ControllerRevision| r.metadata.creation_timestamp.clone();
                at(a).cmp(&at(b))
            })
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
}

/// The revisions to delete so at most `limit` of those not `live` stay:
/// the oldest first.
pub fn to_truncate<'a>(
    revisions: &'a [ControllerRevision],
    live: &(dyn Fn(&ControllerRevision) -> bool + Sync),
    limit: i32,
) -> Vec<&'a ControllerRevision> {
    let mut history: Vec<&ControllerRevision> = revisions.iter().filter(|r| !live(r)).collect();
    history.sort_by_key(|r| r.revision);
    let surplus = history.len().saturating_sub(limit.max(0) as usize);
    history.into_iter().take(surplus).collect()
}

/// `labels` plus the revision label.
pub fn with_revision_label(
    labels: Option<&BTreeMap<String, String>>,
    revision: &str,
) -> BTreeMap<String, String> {
    let mut labels = labels.cloned().unwrap_or_default();
    labels.insert(CONTROLLER_REVISION_HASH.into(), revision.into());
    labels
}

#[cfg(test)]
mod tests;
