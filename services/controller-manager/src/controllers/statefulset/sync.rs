//! One StatefulSet's reconcile (kube's `syncStatefulSet`): claim its pods
//! and revisions, find the current and update revisions, carry out the
//! plan (see `plan`), write the status, trim the history.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use capstan_client::informer::Store;
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::chrono::Utc;
use kube::api::Api;
use kube::core::Selector;

use super::control::SetControl;
use super::identity::{new_pod, ordinal_of, revision_of};
use super::plan::{plan, Action, Policy, Template};
use super::revisions::{current_and_update, set_template, SetRevisions};
use super::status::{calculate, needs_update};
use crate::context::Reconciler;
use crate::error::Result;
use crate::expectations::Expectations;
use crate::history::History;
use crate::intstr::scaled_value;
use crate::ownership::{self, controller_ref, Claim, BY_CONTROLLER, ORPHANS};
use crate::pod_control::{slow_start_batch, SLOW_START_INITIAL_BATCH};
use crate::status::update_derived_status;

pub struct Syncer {
    pub sets: Store<StatefulSet>,
    pub pods: Store<Pod>,
    pub history: History,
    pub expectations: Expectations,
    pub control: SetControl,
    /// For a look again once ready pods become available.
    pub queue: Option<WorkQueue<String>>,
}

/// The set's selector; an empty or unparsable one is the user's to fix.
pub fn selector_of(set: &StatefulSet) -> std::result::Result<Selector, String> {
    let selector = set
        .spec
        .as_ref()
        .map(|s| s.selector.clone())
        .unwrap_or_default();
    ownership::parse_selector(&selector)
}

/// The spec as the plan reads it.
pub fn policy_of(set: &StatefulSet, update_revision: &str) -> Policy {
    let spec = set.spec.clone().unwrap_or_default();
    let replicas = spec.replicas.unwrap_or(1);
    let strategy = spec.update_strategy.unwrap_or_default();
    let rolling = (strategy.type_.as_deref() != Some("OnDelete")).then(|| {
        let rolling = strategy.rolling_update.unwrap_or_default();
        let max = rolling.max_unavailable.unwrap_or(IntOrString::Int(1));
        let max = scaled_value(&max, replicas, false).unwrap_or(1).max(1);
        (rolling.partition.unwrap_or(0), max)
    });
    Policy {
        start_ordinal: spec.ordinals.and_then(|o| o.start).unwrap_or(0),
        replicas,
        parallel: spec.pod_management_policy.as_deref() == Some("Parallel"),
        rolling,
        min_ready_seconds: spec.min_ready_seconds.unwrap_or(0),
        update_revision: update_revision.to_string(),
    }
}

impl Reconciler for Syncer {
    async fn sync(&self, key: &str) -> Result<()> {
        let Some(set) = self.sets.get_by_key(key) else {
            self.expectations.forget(key);
            return Ok(());
        };
        let selector = match selector_of(&set) {
            Ok(selector) => selector,
            Err(reason) => {
                tracing::warn!(%key, %reason, "invalid selector; not syncing");
                return Ok(());
            }
        };
        if set.metadata.deletion_timestamp.is_some() || !self.expectations.satisfied(key) {
            return Ok(());
        }
        let set_pods = self.claim_pods(&set, &selector).await?;
        let mut revisions = self.history.claim(set.as_ref(), &selector).await?;
        let status = set.status.clone().unwrap_or_default();
        let mut collisions = status.collision_count.unwrap_or(0);
        let chosen = current_and_update(&set, &mut revisions, &mut collisions).await?;
        let now = Utc::now();
        let actions = plan(&policy_of(&set, chosen.update_name()), &set_pods, now);
        let carried = self.carry_out(key, &set, &actions, &chosen).await;
        let status = calculate(&set, &set_pods, &chosen, collisions, now);
        if needs_update(&set, &status) {
            self.write_status(&set, &status).await?;
        }
        self.trim_history(&set, &revisions, &set_pods, &chosen)
            .await?;
        self.recheck_availability(key, &set, &status);
        carried
    }
}

impl Syncer {
    /// The pods the set controls (every phase), with their ordinals.
    async fn claim_pods(
        &self,
        set: &Arc<StatefulSet>,
        selector: &Selector,
    ) -> Result<Vec<(i32, Arc<Pod>)>> {
        let namespace = set.metadata.namespace.clone().unwrap_or_default();
        let uid = set.metadata.uid.clone().unwrap_or_default();
        let client = self.control.client.clone();
        let reference = controller_ref(set.as_ref());
        let claim = Claim {
            api: Api::<Pod>::namespaced(client.clone(), &namespace),
            owner: reference.clone(),
            owner_deleting: false,
            selector,
        };
        let sets: Api<StatefulSet> = Api::namespaced(client, &namespace);
        let orphans: Vec<Arc<Pod>> = self
            .pods
            .by_index(ORPHANS, &namespace)
            .into_iter()
            .filter(|p| ordinal_of(set, p).is_some())
            .collect();
        let claimed = claim
            .claim(self.pods.by_index(BY_CONTROLLER, &uid), orphans, || {
                ownership::still_adoptable(&sets, &reference)
            })
            .await?;
        Ok(claimed
            .into_iter()
            .filter_map(|p| ordinal_of(set, &p).map(|o| (o, p)))
            .collect())
    }

    async fn carry_out(
        &self,
        key: &str,
        set: &StatefulSet,
        actions: &[Action],
        chosen: &SetRevisions,
    ) -> Result<()> {
        let creates: Vec<(i32, Template)> = actions
            .iter()
            .filter_map(|a| match a {
                Action::Create { ordinal, template } => Some((*ordinal, *template)),
                _ => None,
            })
            .collect();
        let doomed: Vec<&Arc<Pod>> = actions
            .iter()
            .filter_map(|a| match a {
                Action::Delete(pod) | Action::Condemn(pod) => Some(pod),
                _ => None,
            })
            .collect();
        let uids = doomed.iter().filter_map(|p| p.metadata.uid.clone());
        self.expectations.expect(key, creates.len(), uids);
        let deleted = self.delete_all(key, set, actions).await;
        let created = self.create_all(key, set, &creates, chosen).await;
        created.and(deleted)
    }

    async fn create_all(
        &self,
        key: &str,
        set: &StatefulSet,
        creates: &[(i32, Template)],
        chosen: &SetRevisions,
    ) -> Result<()> {
        let update_template = set_template(set);
        let current_template = chosen.current_template(set);
        let make = |i: usize| {
            let (ordinal, template) = creates[i];
            let (template, revision) = match template {
                Template::Current => (&current_template, chosen.current_name()),
                Template::Update => (&update_template, chosen.update_name()),
            };
            let pod = new_pod(set, template, ordinal, revision);
            async move {
                let name = pod.metadata.name.clone().unwrap_or_default();
                self.control.create_claims(set, ordinal, &name).await?;
                if !self.control.create_pod(set, &pod).await? {
                    // Already there: no watch event is coming for it.
                    self.expectations.creation_observed(key);
                }
                Ok(())
            }
        };
        let (created, failed) =
            slow_start_batch(creates.len(), SLOW_START_INITIAL_BATCH, make).await;
        if created < creates.len() {
            self.expectations
                .lower_creations(key, creates.len() - created);
        }
        failed.map_or(Ok(()), Err)
    }

    async fn delete_all(&self, key: &str, set: &StatefulSet, actions: &[Action]) -> Result<()> {
        let deletions = actions.iter().filter_map(|action| {
            let (pod, condemned) = match action {
                Action::Delete(pod) => (pod, false),
                Action::Condemn(pod) => (pod, true),
                Action::Create { .. } => return None,
            };
            Some(async move {
                if condemned {
                    let ordinal = ordinal_of(set, pod).unwrap_or_default();
                    self.control.hand_claims_to(set, ordinal, pod).await?;
                }
                let result = self.control.delete_pod(set, pod).await;
                if result.is_err() {
                    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
                    self.expectations.deletion_observed(key, uid);
                }
                result
            })
        });
        let results = futures::future::join_all(deletions).await;
        results.into_iter().find(Result::is_err).unwrap_or(Ok(()))
    }

    async fn write_status(&self, set: &StatefulSet, status: &StatefulSetStatus) -> Result<()> {
        let namespace = set.metadata.namespace.as_deref().unwrap_or_default();
        let api: Api<StatefulSet> = Api::namespaced(self.control.client.clone(), namespace);
        update_derived_status(&api, set, |s| s.status = Some(status.clone())).await?;
        Ok(())
    }

    /// Revisions past revisionHistoryLimit go, oldest first, unless the
    /// status or a pod still names them.
    async fn trim_history(
        &self,
        set: &StatefulSet,
        revisions: &crate::history::Revisions,
        set_pods: &[(i32, Arc<Pod>)],
        chosen: &SetRevisions,
    ) -> Result<()> {
        let mut live: HashSet<String> = set_pods
            .iter()
            .map(|(_, p)| revision_of(p).to_string())
            .collect();
        live.insert(chosen.current_name().to_string());
        live.insert(chosen.update_name().to_string());
        let limit = set
            .spec
            .as_ref()
            .and_then(|s| s.revision_history_limit)
            .unwrap_or(10);
        let is_live =
            |r: &ControllerRevision| live.contains(r.metadata.name.as_deref().unwrap_or_default());
        revisions.truncate(&is_live, limit).await
    }

    fn recheck_availability(&self, key: &str, set: &StatefulSet, status: &StatefulSetStatus) {
        let min_ready = set
            .spec
            .as_ref()
            .and_then(|s| s.min_ready_seconds)
            .unwrap_or(0);
        let waiting = status.ready_replicas > status.available_replicas;
        if let (true, true, Some(queue)) = (min_ready > 0, waiting, &self.queue) {
            queue.add_after(key.to_string(), Duration::from_secs(min_ready as u64));
        }
    }
}
