//! Reading and writing one owner's revisions through the API: claimed
//! from the shared ControllerRevision cache, created under a hashed name
//! (a namesake with other data is a hash collision: the owner's
//! collisionCount goes up and the name changes), renumbered, truncated.

use std::sync::Arc;

use capstan_client::informer::{key_from, Informer, InformerEvent, Store};
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::{NamespaceResourceScope, Selector};
use kube::Resource;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::{hash, same_data};
use crate::error::Result;
use crate::ownership::{self, BY_CONTROLLER, ORPHANS};

/// The revisions cache, indexed as [`History::index`] sets up.
#[derive(Clone)]
pub struct History {
    pub revisions: Store<ControllerRevision>,
    pub client: kube::Client,
}

/// One owner's revisions, oldest first.
pub struct Revisions {
    pub api: Api<ControllerRevision>,
    pub list: Vec<ControllerRevision>,
    owner_uid: String,
    selector: Selector,
}

/// How many times a name may collide before giving up on this sync.
const MAX_COLLISIONS: usize = 10;

impl History {
    /// Registers the indexes revisions are claimed by.
    pub fn index(informer: &Informer<ControllerRevision>) {
        informer.add_index(
            BY_CONTROLLER,
            ownership::by_controller_uid::<ControllerRevision>,
        );
        informer.add_index(
            ORPHANS,
            ownership::orphans_by_namespace::<ControllerRevision>,
        );
    }

    /// The revisions `owner` controls after adopting orphans its
    /// selector matches and releasing those it no longer does.
    pub async fn claim<O>(&self, owner: &O, selector: &Selector) -> Result<Revisions>
    where
        O: Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
    {
        let namespace = owner.meta().namespace.clone().unwrap_or_default();
        let api = Api::<ControllerRevision>::namespaced(self.client.clone(), &namespace);
        let claimed =
            ownership::claim_from_cache(&self.revisions, &self.client, owner, selector).await?;
        let mut list: Vec<ControllerRevision> =
            claimed.into_iter().map(Arc::unwrap_or_clone).collect();
        super::sort(&mut list);
        let owner_uid = owner.meta().uid.clone().unwrap_or_default();
        let selector = selector.clone();
        Ok(Revisions {
            api,
            list,
            owner_uid,
            selector,
        })
    }

    /// Queues the owner of kind `kind` of each revision that changes.
    pub fn queue_owners(
        informer: &Informer<ControllerRevision>,
        kind: &'static str,
        queue: WorkQueue<String>,
    ) {
        informer.add_handler(move |event: &InformerEvent<ControllerRevision>| {
            let revision = event.object();
            if let Some(owner) =
                ownership::controller_of(&revision.metadata).filter(|r| r.kind == kind)
            {
                queue.add(key_from(
                    revision.metadata.namespace.as_deref(),
                    &owner.name,
                ));
            }
        });
    }
}

impl Revisions {
    /// The revision holding `candidate`'s template, made the newest: the
    /// newest as it is, an older one renumbered (a template used again,
    /// as after `kubectl rollout undo`), or a new one. A new one's number
    /// comes from the owner's revisions read again from the API, not from
    /// the cache: a cache behind the API would hand out a number already
    /// taken, and `kubectl rollout history` would show two as one.
    pub async fn make_newest(
        &mut self,
        owner_name: &str,
        mut candidate: ControllerRevision,
        collision_count: &mut i32,
    ) -> Result<ControllerRevision> {
        if let Some(found) = self.reuse(&candidate).await? {
            return Ok(found);
        }
        self.reload().await?;
        if let Some(found) = self.reuse(&candidate).await? {
            return Ok(found);
        }
        candidate.revision = super::next_number(&self.list);
        self.create(owner_name, candidate, collision_count).await
    }

    /// The revision equal to `candidate`, renumbered to the newest if it
    /// is not; None when there is none.
    async fn reuse(
        &mut self,
        candidate: &ControllerRevision,
    ) -> Result<Option<ControllerRevision>> {
        let Some(same) = self.equal_to(candidate).last().cloned().cloned() else {
            return Ok(None);
        };
        if self.list.last() == Some(&same) {
            return Ok(Some(same));
        }
        let next = super::next_number(&self.list);
        self.renumber(&same, next).await.map(Some)
    }

    /// Replaces the list with the owner's revisions as the API has them.
    async fn reload(&mut self) -> Result<()> {
        let params = ListParams::default().labels_from(&self.selector);
        let listed = self.api.list(&params).await?;
        let owned = |r: &ControllerRevision| {
            ownership::controller_uid(&r.metadata) == Some(self.owner_uid.as_str())
        };
        self.list = listed.items.into_iter().filter(owned).collect();
        super::sort(&mut self.list);
        Ok(())
    }

    /// Creates `revision` named `<owner>-<hash>`. A namesake with the
    /// same data is returned as is; one with other data is a collision:
    /// `collision_count` grows and the next name is tried.
    async fn create(
        &mut self,
        owner_name: &str,
        mut revision: ControllerRevision,
        collision_count: &mut i32,
    ) -> Result<ControllerRevision> {
        let data = revision
            .data
            .as_ref()
            .map(|d| d.0.clone())
            .unwrap_or_default();
        for _ in 0..MAX_COLLISIONS {
            let hash = hash(&data, Some(*collision_count));
            let name = format!("{owner_name}-{hash}");
            revision.metadata.name = Some(name.clone());
            let labels = revision
                .metadata
                .labels
                .get_or_insert_with(Default::default);
            labels.insert(super::CONTROLLER_REVISION_HASH.into(), hash);
            let err = match self.api.create(&PostParams::default(), &revision).await {
                Ok(created) => {
                    self.list.push(created.clone());
                    return Ok(created);
                }
                Err(err) => crate::error::Error::from(err),
            };
            if !err.is_already_exists() {
                return Err(err);
            }
            let existing = self.api.get(&name).await?;
            if same_data(&existing, &revision) {
                return Ok(existing);
            }
            *collision_count += 1;
        }
        Err(crate::error::Error::Invalid(format!(
            "{owner_name}: {MAX_COLLISIONS} revision name collisions in a row"
        )))
    }

    /// Gives an existing revision a new number (a template used again).
    async fn renumber(
        &mut self,
        revision: &ControllerRevision,
        number: i64,
    ) -> Result<ControllerRevision> {
        let name = revision.metadata.name.clone().unwrap_or_default();
        let patch = json!({"revision": number});
        let patched = self
            .api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        for held in self
            .list
            .iter_mut()
            .filter(|r| r.metadata.name == patched.metadata.name)
        {
            *held = patched.clone();
        }
        super::sort(&mut self.list);
        Ok(patched)
    }

    /// Deletes the oldest revisions not `live` beyond `limit`.
    pub async fn truncate(
        &self,
        live: &(dyn Fn(&ControllerRevision) -> bool + Sync),
        limit: i32,
    ) -> Result<()> {
        for revision in super::to_truncate(&self.list, live, limit) {
            let name = revision.metadata.name.as_deref().unwrap_or_default();
            if let Err(err) = self.api.delete(name, &DeleteParams::default()).await {
                let err = crate::error::Error::from(err);
                if !err.is_not_found() {
                    return Err(err);
                }
            }
        }
        Ok(())
    }

    /// The revisions holding the same template as `probe`, oldest first.
    pub fn equal_to(&self, probe: &ControllerRevision) -> Vec<&ControllerRevision> {
        self.list.iter().filter(|r| same_data(r, probe)).collect()
    }

    pub fn named(&self, name: &str) -> Option<&ControllerRevision> {
        self.list
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(name))
    }
}
