//! How a pod stops before its containers finish on their own: deleted
//! (the kubelet's graceful termination: the containers get SIGTERM, take
//! up to the grace period, are killed after it; then the pod gets its
//! terminal phase and is deleted with grace 0) or past its
//! `activeDeadlineSeconds` (killed, phase Failed, reason DeadlineExceeded).

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateTerminated, ContainerStatus, Pod, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::annotations::Plan;
use super::conditions::{self, Readiness};
use super::container::terminated_state;
use super::resources::is_sidecar;
use crate::clock::{after, before, whole_seconds};

/// The exit code of a container killed with SIGKILL.
const KILLED: i32 = 137;

/// When and how the pod's containers are stopped.
#[derive(Debug, Clone, PartialEq)]
pub struct Stop {
    pub at: DateTime<Utc>,
    /// The exit code of the containers still running then.
    pub exit_code: i32,
    /// The pod's reason and message, when stopping it fails it.
    pub pod_reason: Option<(&'static str, &'static str)>,
    /// The pod is deleted once stopped.
    pub delete: bool,
}

/// The stop ahead of the pod, if any: its deletion, or its deadline.
pub fn due(pod: &Pod, spec: &PodSpec, plan: &Plan, start_time: DateTime<Utc>) -> Option<Stop> {
    if let Some(deletion) = &pod.metadata.deletion_timestamp {
        let grace = pod
            .metadata
            .deletion_grace_period_seconds
            .or(spec.termination_grace_period_seconds)
            .unwrap_or(30)
            .max(0) as u64;
        let grace = Duration::from_secs(grace);
        // The API set deletionTimestamp to the deletion's time plus the grace.
        let asked_at = before(deletion.0, grace);
        let graceful = plan.stop_duration <= grace;
        return Some(Stop {
            at: after(asked_at, plan.stop_duration.min(grace)),
            exit_code: if graceful { 0 } else { KILLED },
            pod_reason: None,
            delete: true,
        });
    }
    let deadline = spec.active_deadline_seconds.filter(|s| *s > 0)?;
    Some(Stop {
        at: after(start_time, Duration::from_secs(deadline as u64)),
        exit_code: KILLED,
        pod_reason: Some((
            "DeadlineExceeded",
            "Pod was active on the node longer than the specified deadline",
        )),
        delete: false,
    })
}

/// `status` with every container stopped at `stop.at` and a terminal phase.
pub fn stop(pod: &Pod, mut status: PodStatus, stop: &Stop, now: DateTime<Utc>) -> PodStatus {
    let spec = pod.spec.clone().unwrap_or_default();
    let sidecars: Vec<&str> = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| is_sidecar(c))
        .map(|c| c.name.as_str())
        .collect();
    let containers: Vec<ContainerStatus> = status
        .container_statuses
        .take()
        .unwrap_or_default()
        .into_iter()
        .map(|s| stopped(s, stop))
        .collect();
    let inits: Option<Vec<ContainerStatus>> = status.init_container_statuses.take().map(|list| {
        list.into_iter()
            .map(|s| {
                if sidecars.contains(&s.name.as_str()) {
                    stopped(s, stop)
                } else {
                    s
                }
            })
            .collect()
    });
    let phase = match stop.pod_reason {
        Some(_) => "Failed",
        None => conditions::final_phase(&containers),
    };
    let incomplete: Vec<&str> = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| !is_sidecar(c))
        .filter(|c| !completed(inits.as_deref(), &c.name))
        .map(|c| c.name.as_str())
        .collect();
    let unready = sidecars
        .iter()
        .copied()
        .chain(spec.containers.iter().map(|c| c.name.as_str()))
        .collect();
    let readiness = Readiness {
        sandbox_ready: false,
        incomplete,
        unready,
        phase,
    };
    let conditions = conditions::conditions(
        status.conditions.as_deref().unwrap_or_default(),
        spec.readiness_gates.as_deref().unwrap_or_default(),
        &readiness,
        whole_seconds(now),
    );
    let (reason, message) = stop.pod_reason.map_or((None, None), |(r, m)| {
        (Some(r.to_string()), Some(m.to_string()))
    });
    PodStatus {
        phase: Some(phase.to_string()),
        conditions: Some(conditions),
        container_statuses: Some(containers),
        init_container_statuses: inits,
        reason: reason.or(status.reason.take()),
        message: message.or(status.message.take()),
        ..status
    }
}

fn completed(statuses: Option<&[ContainerStatus]>, name: &str) -> bool {
    statuses
        .into_iter()
        .flatten()
        .filter(|s| s.name == name)
        .filter_map(|s| s.state.as_ref()?.terminated.as_ref())
        .any(|t| t.exit_code == 0)
}

/// One container as it is once stopped.
fn stopped(status: ContainerStatus, stop: &Stop) -> ContainerStatus {
    let state = status.state.clone().unwrap_or_default();
    let state = if state.terminated.is_some() {
        state
    } else if let Some(running) = &state.running {
        let started_at = running.started_at.as_ref().map_or(stop.at, |t| t.0);
        terminated_state(&status, started_at, stop.at, stop.exit_code, None)
    } else if let Some(last) = status
        .last_state
        .as_ref()
        .filter(|s| s.terminated.is_some())
    {
        // A crash-looping container stays as its last run ended.
        last.clone()
    } else {
        never_started(stop.at)
    };
    ContainerStatus {
        state: Some(state),
        ready: false,
        started: Some(false),
        ..status
    }
}

/// What the kubelet reports for a container that never ran.
fn never_started(at: DateTime<Utc>) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: KILLED,
            reason: Some("ContainerStatusUnknown".into()),
            message: Some("The container could not be located when the pod was terminated".into()),
            finished_at: Some(Time(whole_seconds(at))),
            ..ContainerStateTerminated::default()
        }),
        ..ContainerState::default()
    }
}
