//! Choosing victims on one node (kube's `SelectVictimsOnNode`): remove every
//! lower-priority pod; if the preemptor then fits, give back as many as
//! possible, most important first, those whose eviction would break a
//! PodDisruptionBudget before the others.

use std::cmp::Ordering;
use std::sync::Arc;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::framework::{CycleState, FilterRunner, NominatedPods, Status};
use crate::model::{LabelMatcher, NodeInfo, PodInfo};

pub const NO_VICTIMS: &str = "No preemption victims found for incoming pod";

/// The victims chosen on a node, most important first, and how many of
/// them break a disruption budget.
#[derive(Debug, Clone)]
pub struct Victims {
    pub pods: Vec<Arc<PodInfo>>,
    pub pdb_violations: usize,
}

/// When a pod started (its status' startTime, else its creation).
pub fn start_time(pod: &PodInfo) -> Option<&Time> {
    pod.pod
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .or(pod.pod.metadata.creation_timestamp.as_ref())
}

/// kube's `MoreImportantPod`: higher priority, then longer running.
pub fn more_important(a: &PodInfo, b: &PodInfo) -> Ordering {
    b.priority
        .cmp(&a.priority)
        .then_with(|| match (start_time(a), start_time(b)) {
            (Some(x), Some(y)) => x.0.cmp(&y.0),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        })
}

pub fn select_victims(
    framework: &dyn FilterRunner,
    state: &CycleState,
    preemptor: &PodInfo,
    node: &NodeInfo,
    budgets: &[Arc<PodDisruptionBudget>],
    nominated: &dyn NominatedPods,
) -> Result<Victims, Status> {
    let mut state = state.clone();
    let mut node = node.clone();
    let mut potential: Vec<Arc<PodInfo>> = node
        .pods
        .iter()
        .filter(|p| p.priority < preemptor.priority)
        .cloned()
        .collect();
    if potential.is_empty() {
        return Err(Status::unresolvable(NO_VICTIMS));
    }
    for victim in &potential {
        node.remove_pod(&victim.key);
        framework.run_pre_filter_remove_pod(&mut state, preemptor, victim, &node);
    }
    let fits = framework.run_filter_with_nominated(&state, preemptor, &node, nominated);
    if !fits.is_success() {
        return Err(fits);
    }
    potential.sort_by(|a, b| more_important(a, b));
    let (violating, non_violating) = split_by_budget(&potential, budgets);
    let mut victims = Vec::new();
    let mut pdb_violations = 0;
    for (pods, counts_violation) in [(violating, true), (non_violating, false)] {
        for pod in pods {
            node.add_pod(pod.clone());
            framework.run_pre_filter_add_pod(&mut state, preemptor, &pod, &node);
            if !framework
                .run_filter_with_nominated(&state, preemptor, &node, nominated)
                .is_success()
            {
                node.remove_pod(&pod.key);
                framework.run_pre_filter_remove_pod(&mut state, preemptor, &pod, &node);
                pdb_violations += usize::from(counts_violation);
                victims.push(pod);
            }
        }
    }
    victims.sort_by(|a, b| more_important(a, b));
    Ok(Victims {
        pods: victims,
        pdb_violations,
    })
}

/// Splits pods (kept in order) into those whose eviction would take a budget
/// below zero allowed disruptions, and the others.
pub fn split_by_budget(
    pods: &[Arc<PodInfo>],
    budgets: &[Arc<PodDisruptionBudget>],
) -> (Vec<Arc<PodInfo>>, Vec<Arc<PodInfo>>) {
    let selectors: Vec<LabelMatcher> = budgets
        .iter()
        .map(|b| LabelMatcher::new(b.spec.as_ref().and_then(|s| s.selector.as_ref())))
        .collect();
    let mut allowed: Vec<i32> = budgets
        .iter()
        .map(|b| b.status.as_ref().map_or(0, |s| s.disruptions_allowed))
        .collect();
    let (mut violating, mut non_violating) = (Vec::new(), Vec::new());
    for pod in pods {
        let mut violates = false;
        if !pod.labels().is_empty() {
            for (i, budget) in budgets.iter().enumerate() {
                let same_namespace = budget.metadata.namespace.as_deref() == Some(pod.namespace());
                // A budget with an empty selector protects nothing (kube's rule).
                let empty = matches!(selectors[i], LabelMatcher::Everything);
                if !same_namespace || empty || !selectors[i].matches(pod.labels()) {
                    continue;
                }
                let already_disrupted = budget
                    .status
                    .as_ref()
                    .and_then(|s| s.disrupted_pods.as_ref())
                    .is_some_and(|d| d.contains_key(pod.name()));
                if already_disrupted {
                    continue;
                }
                allowed[i] -= 1;
                if allowed[i] < 0 {
                    violates = true;
                }
            }
        }
        if violates {
            violating.push(pod.clone());
        } else {
            non_violating.push(pod.clone());
        }
    }
    (violating, non_violating)
}
