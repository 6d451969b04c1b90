//! A StatefulSet's current and update revisions (kube's
//! `getStatefulSetRevisions`): the update revision holds the set's
//! template now, re-using (and renumbering) an existing revision with the
//! same template, as after `kubectl rollout undo`; the current revision
//! is the one the status names, or the update revision at first.

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;

use super::identity::set_name;
use crate::error::{Error, Result};
use crate::history::{revision_for, template_of, Revisions};

/// The two revisions a sync works with.
pub struct SetRevisions {
    pub current: ControllerRevision,
    pub update: ControllerRevision,
}

impl SetRevisions {
    pub fn current_name(&self) -> &str {
        self.current.metadata.name.as_deref().unwrap_or_default()
    }

    pub fn update_name(&self) -> &str {
        self.update.metadata.name.as_deref().unwrap_or_default()
    }

    /// The template pods at the current revision are made from.
    pub fn current_template(&self, set: &StatefulSet) -> PodTemplateSpec {
        template_of(&self.current).unwrap_or_else(|| set_template(set))
    }
}

pub fn set_template(set: &StatefulSet) -> PodTemplateSpec {
    set.spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default()
}

/// Finds or makes the revisions; `collision_count` grows on a hash collision.
pub async fn current_and_update(
    set: &StatefulSet,
    revisions: &mut Revisions,
    collision_count: &mut i32,
) -> Result<SetRevisions> {
    let candidate = revision_for(set, &set_template(set), 0);
    let update = revisions
        .make_newest(set_name(set), candidate, collision_count)
        .await?;
    let named = set
        .status
        .as_ref()
        .and_then(|s| s.current_revision.as_deref())
        .and_then(|name| revisions.named(name).cloned());
    let current = named.unwrap_or_else(|| update.clone());
    if update.metadata.name.is_none() {
        return Err(Error::Invalid("a revision without a name".into()));
    }
    Ok(SetRevisions { current, update })
}
