//! One Deployment's reconcile, kube's `syncDeployment`: claim its
//! ReplicaSets, then either only keep the status (being deleted), scale
//! proportionally (paused, or the replica count changed), or roll out
//! (RollingUpdate or Recreate); and the new ReplicaSet's creation with its
//! pod-template-hash and revision.

use std::collections::BTreeMap;
use std::sync::Arc;

use capstan_client::events::{EventRecorder, EventType};
use capstan_client::informer::Store;
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::core::Selector;

use super::conditions::{self, condition, PROGRESSING, REPLICA_FAILURE};
use super::util::{self, pod_template_hash, with_hash_label, POD_TEMPLATE_HASH};
use crate::context::Reconciler;
use crate::error::{Error, Result};
use crate::ownership::{self, controller_ref, Claim, BY_CONTROLLER, ORPHANS};

/// What the reconcile reads and writes.
pub struct Syncer {
    pub deployments: Store<Deployment>,
    pub replica_sets: Store<ReplicaSet>,
    pub pods: Store<Pod>,
    pub client: kube::Client,
    pub recorder: EventRecorder,
    /// For looks again at progress deadlines and minReadySeconds.
    pub queue: Option<WorkQueue<String>>,
}

/// A deployment's ReplicaSets split: the one with its template, the rest.
pub struct Sets {
    pub new: Option<ReplicaSet>,
    pub old: Vec<ReplicaSet>,
}

impl Sets {
    pub fn all(&self) -> Vec<&ReplicaSet> {
        self.old.iter().chain(self.new.as_ref()).collect()
    }
}

impl Reconciler for Syncer {
    async fn sync(&self, key: &str) -> Result<()> {
        let Some(cached) = self.deployments.get_by_key(key) else {
            return Ok(());
        };
        let mut d = cached.as_ref().clone();
        let selector = match self.selector(&d) {
            Ok(selector) => selector,
            Err(err) => return self.refuse_selector(&mut d, err).await,
        };
        let sets = self.claim_replica_sets(&d, &selector).await?;
        if d.metadata.deletion_timestamp.is_some() {
            let split = self.split(&mut d, sets, false).await?;
            return self.sync_status(&mut d, &split).await;
        }
        self.check_paused(&mut d).await?;
        if util::is_paused(&d) || self.is_scaling_event(&mut d, &sets).await? {
            return self.sync_scale(&mut d, sets).await;
        }
        match util::is_rolling_update(&d) {
            true => self.rollout_rolling(&mut d, sets).await,
            false => self.rollout_recreate(&mut d, sets).await,
        }
    }
}

impl Syncer {
    fn selector(&self, d: &Deployment) -> Result<Selector> {
        let selector = d
            .spec
            .as_ref()
            .map(|s| s.selector.clone())
            .unwrap_or_default();
        let empty = selector.match_labels.as_ref().is_none_or(|m| m.is_empty())
            && selector
                .match_expressions
                .as_ref()
                .is_none_or(|e| e.is_empty());
        if empty {
            return Err(Error::Invalid(
                "This deployment is selecting all pods. A non-empty selector is required.".into(),
            ));
        }
        Selector::try_from(selector)
            .map_err(|e| Error::Invalid(format!("invalid label selector: {}", e.0)))
    }

    /// kube records the refusal and keeps the generation observed; the
    /// error requeues the deployment with backoff until it is fixed.
    async fn refuse_selector(&self, d: &mut Deployment, err: Error) -> Result<()> {
        let reason = match err
            .to_string()
            .starts_with("This deployment is selecting all")
        {
            true => "SelectingAll",
            false => "InvalidSelector",
        };
        self.recorder
            .record(d, EventType::Warning, reason, err.to_string());
        let status = d.status.clone().unwrap_or_default();
        if status.observed_generation != d.metadata.generation {
            let mut fresh = status;
            fresh.observed_generation = d.metadata.generation;
            self.write_status(d, fresh).await?;
        }
        Err(err)
    }

    /// The ReplicaSets this deployment controls, after adoption and release.
    async fn claim_replica_sets(
        &self,
        d: &Deployment,
        selector: &Selector,
    ) -> Result<Vec<ReplicaSet>> {
        let namespace = d.metadata.namespace.clone().unwrap_or_default();
        let uid = d.metadata.uid.clone().unwrap_or_default();
        let owned = self.replica_sets.by_index(BY_CONTROLLER, &uid);
        let orphans = self.replica_sets.by_index(ORPHANS, &namespace);
        let reference = controller_ref(d);
        let claim = Claim {
            api: Api::<ReplicaSet>::namespaced(self.client.clone(), &namespace),
            owner: reference.clone(),
            owner_deleting: d.metadata.deletion_timestamp.is_some(),
            selector,
        };
        let owners: Api<Deployment> = Api::namespaced(self.client.clone(), &namespace);
        let claimed = claim
            .claim(owned, orphans, || {
                ownership::still_adoptable(&owners, &reference)
            })
            .await?;
        Ok(claimed.iter().map(|rs| rs.as_ref().clone()).collect())
    }

    /// kube's `getAllReplicaSetsAndSyncRevision`: the new ReplicaSet
    /// (made if `create` and missing) with its revision brought up to
    /// date, and the old ones.
    pub async fn split(
        &self,
        d: &mut Deployment,
        mut sets: Vec<ReplicaSet>,
        create: bool,
    ) -> Result<Sets> {
        let new_name = util::find_new(d, &sets).and_then(|rs| rs.metadata.name.clone());
        let position = new_name.and_then(|name| {
            sets.iter()
                .position(|rs| rs.metadata.name.as_ref() == Some(&name))
        });
        let existing = position.map(|i| sets.remove(i));
        let new_revision = util::max_revision(&sets) + 1;
        let new = match existing {
            Some(rs) => Some(self.keep_new(d, rs, new_revision).await?),
            None if create => Some(self.create_new(d, &sets, new_revision).await?),
            None => None,
        };
        Ok(Sets { new, old: sets })
    }

    /// Brings an existing new ReplicaSet's annotations and minReadySeconds
    /// up to date, and the deployment's revision and Progressing condition.
    async fn keep_new(
        &self,
        d: &mut Deployment,
        rs: ReplicaSet,
        new_revision: i64,
    ) -> Result<ReplicaSet> {
        let mut copy = rs.clone();
        let annotations_changed = util::set_new_rs_annotations(d, &mut copy, new_revision, true);
        let min_ready = util::min_ready_seconds(d);
        let spec = copy.spec.get_or_insert_with(ReplicaSetSpec::default);
        let min_ready_changed = spec.min_ready_seconds.unwrap_or(0) != min_ready;
        spec.min_ready_seconds = Some(min_ready);
        let rs = match annotations_changed || min_ready_changed {
            true => self.update_rs(&copy).await?,
            false => rs,
        };
        let revision = util::annotation(&rs.metadata, util::REVISION)
            .unwrap_or_default()
            .to_string();
        self.set_deployment_revision(d, &revision).await?;
        let mut status = d.status.clone().unwrap_or_default();
        if conditions::get(&status, PROGRESSING).is_none() && util::progress_deadline(d).is_some() {
            let name = rs.metadata.name.clone().unwrap_or_default();
            let found = condition(
                PROGRESSING,
                "True",
                "FoundNewReplicaSet",
                format!("Found new replica set {name:?}"),
            );
            conditions::set(&mut status, found);
            self.write_status(d, status).await?;
        }
        Ok(rs)
    }

    /// Makes the ReplicaSet for the deployment's template: named by its
    /// pod-template-hash, with that hash in its template's labels and its
    /// selector, sized as the strategy allows.
    async fn create_new(
        &self,
        d: &mut Deployment,
        old: &[ReplicaSet],
        new_revision: i64,
    ) -> Result<ReplicaSet> {
        let spec = d.spec.clone().unwrap_or_default();
        let collisions = d.status.as_ref().and_then(|s| s.collision_count);
        let hash = pod_template_hash(&spec.template, collisions);
        let mut template = spec.template.clone();
        let template_meta = template.metadata.get_or_insert_with(Default::default);
        template_meta.labels = Some(with_hash_label(template_meta.labels.as_ref(), &hash));
        let mut selector = spec.selector.clone();
        let match_labels = selector.match_labels.get_or_insert_with(BTreeMap::new);
        match_labels.insert(POD_TEMPLATE_HASH.into(), hash.clone());
        let name = format!("{}-{hash}", d.metadata.name.as_deref().unwrap_or_default());
        let mut rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: d.metadata.namespace.clone(),
                owner_references: Some(vec![controller_ref(d)]),
                labels: template.metadata.as_ref().and_then(|m| m.labels.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(0),
                min_ready_seconds: Some(util::min_ready_seconds(d)),
                selector,
                template: Some(template),
            }),
            status: None,
        };
        let all: Vec<&ReplicaSet> = old.iter().chain(Some(&rs)).collect();
        let replicas = util::new_rs_new_replicas(d, &all, 0);
        if let Some(spec) = rs.spec.as_mut() {
            spec.replicas = Some(replicas);
        }
        util::set_new_rs_annotations(d, &mut rs, new_revision, false);
        let api: Api<ReplicaSet> = Api::namespaced(
            self.client.clone(),
            d.metadata.namespace.as_deref().unwrap_or_default(),
        );
        let created = match api
            .create(&PostParams::default(), &rs)
            .await
            .map_err(Error::from)
        {
            Ok(created) => created,
            Err(err) if err.is_already_exists() => {
                return self.name_taken(d, &api, &name, err).await
            }
            Err(err) => return self.failed_create(d, &name, err).await,
        };
        if replicas > 0 {
            let message = format!("Scaled up replica set {name} from 0 to {replicas}");
            self.recorder
                .record(d, EventType::Normal, "ScalingReplicaSet", message);
        }
        self.set_deployment_revision(d, &new_revision.to_string())
            .await?;
        let mut status = d.status.clone().unwrap_or_default();
        if util::progress_deadline(d).is_some() {
            let made = condition(
                PROGRESSING,
                "True",
                "NewReplicaSetCreated",
                format!("Created new replica set {name:?}"),
            );
            conditions::set(&mut status, made);
            self.write_status(d, status).await?;
        }
        Ok(created)
    }

    /// The name is taken: by this deployment's own ReplicaSet (a cache
    /// that lags: use it), or by another template (a hash collision: count
    /// it, so the next attempt hashes differently).
    async fn name_taken(
        &self,
        d: &mut Deployment,
        api: &Api<ReplicaSet>,
        name: &str,
        err: Error,
    ) -> Result<ReplicaSet> {
        if let Some(existing) = api.get_opt(name).await? {
            let ours = ownership::controller_uid(&existing.metadata) == d.metadata.uid.as_deref();
            let template = existing.spec.as_ref().and_then(|s| s.template.as_ref());
            let d_template = d.spec.as_ref().map(|s| &s.template);
            if ours
                && template
                    .zip(d_template)
                    .is_some_and(|(a, b)| util::equal_ignore_hash(a, b))
            {
                return Ok(existing);
            }
        }
        let mut status = d.status.clone().unwrap_or_default();
        status.collision_count = Some(status.collision_count.unwrap_or(0) + 1);
        tracing::warn!(%name, collisions = status.collision_count, "pod-template-hash collision");
        self.write_status(d, status).await?;
        Err(err)
    }

    async fn failed_create(
        &self,
        d: &mut Deployment,
        name: &str,
        err: Error,
    ) -> Result<ReplicaSet> {
        let message = format!(
            "Failed to create new replica set {name:?}: {}",
            err.api_message()
        );
        self.recorder
            .record(d, EventType::Warning, "FailedCreate", message.clone());
        if util::progress_deadline(d).is_some() {
            let mut status = d.status.clone().unwrap_or_default();
            conditions::set(
                &mut status,
                condition(REPLICA_FAILURE, "True", "FailedRSCreate", message),
            );
            self.write_status(d, status).await?;
        }
        Err(err)
    }

    /// The deployment's own revision annotation follows its new ReplicaSet's.
    /// Written on a fresh read, not the cached copy: the cache lacks
    /// kubectl's last-applied annotation, which a PUT of it would erase
    /// (and kube's role grants this controller `update`, not `patch`).
    async fn set_deployment_revision(&self, d: &mut Deployment, revision: &str) -> Result<()> {
        if revision.is_empty() || util::annotation(&d.metadata, util::REVISION) == Some(revision) {
            return Ok(());
        }
        let api: Api<Deployment> = Api::namespaced(
            self.client.clone(),
            d.metadata.namespace.as_deref().unwrap_or_default(),
        );
        let name = d.metadata.name.clone().unwrap_or_default();
        let mut fresh = api.get(&name).await?;
        // Conditional on the version this sync read, as kube's update of
        // its cached copy is: a newer deployment conflicts and is synced again.
        fresh.metadata.resource_version = d.metadata.resource_version.clone();
        fresh
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(util::REVISION.into(), revision.into());
        *d = api.replace(&name, &PostParams::default(), &fresh).await?;
        Ok(())
    }

    pub async fn update_rs(&self, rs: &ReplicaSet) -> Result<ReplicaSet> {
        let api: Api<ReplicaSet> = Api::namespaced(
            self.client.clone(),
            rs.metadata.namespace.as_deref().unwrap_or_default(),
        );
        let name = rs.metadata.name.clone().unwrap_or_default();
        Ok(api.replace(&name, &PostParams::default(), rs).await?)
    }

    /// Writes the status (a PUT of `/status`); `d` becomes what was stored.
    pub async fn write_status(
        &self,
        d: &mut Deployment,
        status: k8s_openapi::api::apps::v1::DeploymentStatus,
    ) -> Result<()> {
        let api: Api<Deployment> = Api::namespaced(
            self.client.clone(),
            d.metadata.namespace.as_deref().unwrap_or_default(),
        );
        if let Some(written) =
            crate::status::update_status(&api, d, |o| o.status = Some(status.clone())).await?
        {
            *d = written;
        }
        Ok(())
    }

    /// Pods of the given ReplicaSets (by controller UID).
    pub fn pods_of(&self, sets: &[&ReplicaSet]) -> Vec<Arc<Pod>> {
        sets.iter()
            .filter_map(|rs| rs.metadata.uid.as_deref())
            .flat_map(|uid| self.pods.by_index(BY_CONTROLLER, uid))
            .collect()
    }
}
