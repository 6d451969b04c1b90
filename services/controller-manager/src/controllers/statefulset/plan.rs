//! What one sync of a StatefulSet does, decided without side effects
//! (kube's `updateStatefulSet`, as a plan the syncer carries out):
//!
//! 1. every ordinal in range gets a pod, in order; a failed or finished
//!    pod is deleted to be made again; under OrderedReady the plan stops
//!    at the first pod it creates, is waiting to go, or is not yet
//!    Running and Ready (available, with minReadySeconds);
//! 2. pods past the last ordinal go, the highest first, one at a time
//!    under OrderedReady and only once the others are healthy (the first
//!    unhealthy pod may go at once);
//! 3. RollingUpdate replaces pods not at the update revision, from the
//!    highest ordinal down to the partition, keeping at most
//!    maxUnavailable pods unavailable; OnDelete leaves them to the user.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::chrono::{DateTime, Utc};

use super::identity::revision_of;
use crate::pods;

/// How the set's pods are managed, read from its spec.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub start_ordinal: i32,
    pub replicas: i32,
    /// Parallel pod management (else OrderedReady).
    pub parallel: bool,
    /// RollingUpdate's partition and maxUnavailable; None for OnDelete.
    pub rolling: Option<(i32, i32)>,
    pub min_ready_seconds: i32,
    pub update_revision: String,
}

/// Which template a new pod is made from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Template {
    Current,
    Update,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Create {
        ordinal: i32,
        template: Template,
    },
    /// A pod past the last ordinal, whose claims the retention policy may take.
    Condemn(Arc<Pod>),
    /// A failed pod, or one at an old revision.
    Delete(Arc<Pod>),
}

/// The actions for one sync over the set's pods, keyed by ordinal.
pub fn plan(policy: &Policy, pods: &[(i32, Arc<Pod>)], now: DateTime<Utc>) -> Vec<Action> {
    let mut planner = Planner {
        policy,
        now,
        actions: Vec::new(),
    };
    planner.run(pods);
    planner.actions
}

struct Planner<'a> {
    policy: &'a Policy,
    now: DateTime<Utc>,
    actions: Vec<Action>,
}

/// Whether the plan stops here (OrderedReady waits).
type Stop = bool;

impl Planner<'_> {
    fn healthy(&self, pod: &Pod) -> bool {
        pods::phase(pod) == "Running"
            && pods::is_available(pod, self.policy.min_ready_seconds, self.now)
            && !pods::is_terminating(pod)
    }

    fn run(&mut self, pods: &[(i32, Arc<Pod>)]) {
        let first = self.policy.start_ordinal;
        let end = first + self.policy.replicas.max(0);
        let in_range = |o: i32| (first..end).contains(&o);
        let slots: Vec<(i32, Option<&Arc<Pod>>)> = (first..end)
            .map(|o| (o, pods.iter().find(|(p, _)| *p == o).map(|(_, pod)| pod)))
            .collect();
        let mut condemned: Vec<&Arc<Pod>> = pods
            .iter()
            .filter(|(o, _)| !in_range(*o))
            .map(|(_, p)| p)
            .collect();
        condemned.sort_by_key(|p| std::cmp::Reverse(ordinal_in(pods, p)));
        let first_unhealthy = slots
            .iter()
            .filter_map(|(_, p)| *p)
            .chain(condemned.iter().copied())
            .find(|p| !self.healthy(p))
            .cloned();
        for (ordinal, pod) in &slots {
            if self.replica(*ordinal, *pod) {
                return;
            }
        }
        for pod in &condemned {
            if self.condemn(pod, first_unhealthy.as_ref()) {
                return;
            }
        }
        if let Some((partition, max_unavailable)) = self.policy.rolling {
            self.roll(&slots, partition, max_unavailable);
        }
    }

    fn template_for(&self, ordinal: i32) -> Template {
        match self.policy.rolling {
            Some((partition, _)) if ordinal - self.policy.start_ordinal < partition => {
                Template::Current
            }
            _ => Template::Update,
        }
    }

    fn replica(&mut self, ordinal: i32, pod: Option<&Arc<Pod>>) -> Stop {
        let waits = !self.policy.parallel;
        let Some(pod) = pod else {
            let template = self.template_for(ordinal);
            self.actions.push(Action::Create { ordinal, template });
            return waits;
        };
        if matches!(pods::phase(pod), "Failed" | "Succeeded") {
            if !pods::is_terminating(pod) {
                self.actions.push(Action::Delete(pod.clone()));
            }
            return waits;
        }
        waits && !self.healthy(pod)
    }

    fn condemn(&mut self, pod: &Arc<Pod>, first_unhealthy: Option<&Arc<Pod>>) -> Stop {
        let waits = !self.policy.parallel;
        if pods::is_terminating(pod) {
            return waits;
        }
        let is_first_unhealthy = first_unhealthy.is_some_and(|u| Arc::ptr_eq(u, pod));
        if waits && !self.healthy(pod) && !is_first_unhealthy {
            return true;
        }
        self.actions.push(Action::Condemn(pod.clone()));
        waits
    }

    /// Deletes outdated pods from the top down to the partition: an
    /// unavailable one at once (it costs nothing), an available one
    /// while fewer than `max_unavailable` pods are unavailable.
    fn roll(&mut self, slots: &[(i32, Option<&Arc<Pod>>)], partition: i32, max_unavailable: i32) {
        let healthy = slots
            .iter()
            .filter(|(_, p)| p.is_some_and(|p| self.healthy(p)));
        let mut unavailable = (slots.len() - healthy.count()) as i32;
        let update = &self.policy.update_revision;
        let floor = partition.max(0) as usize;
        let outdated = slots
            .iter()
            .enumerate()
            .rev()
            .take_while(|(i, _)| *i >= floor);
        for pod in outdated.filter_map(|(_, (_, p))| *p) {
            if revision_of(pod) == update || pods::is_terminating(pod) {
                continue;
            }
            if !self.healthy(pod) {
                self.actions.push(Action::Delete(pod.clone()));
            } else if unavailable < max_unavailable.max(1) {
                self.actions.push(Action::Delete(pod.clone()));
                unavailable += 1;
            }
        }
    }
}

fn ordinal_in(pods: &[(i32, Arc<Pod>)], pod: &Arc<Pod>) -> i32 {
    pods.iter()
        .find(|(_, p)| Arc::ptr_eq(p, pod))
        .map_or(-1, |(o, _)| *o)
}
