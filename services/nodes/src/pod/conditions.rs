//! The pod's phase and the conditions a kubelet owns, computed from its
//! container statuses as kube's `getPhase` and `Generate*Condition` do.

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{ContainerStatus, PodCondition, PodReadinessGate};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::container::Restart;

/// The condition types a node writes; every other condition (readiness
/// gates, DisruptionTarget) belongs to someone else and is left alone.
pub const OWNED: [&str; 5] = [
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodScheduled",
];

/// The phase from the main containers' statuses (kube's `getPhase`).
pub fn phase(initialized: bool, containers: &[ContainerStatus], restart: Restart) -> &'static str {
    if !initialized {
        return "Pending";
    }
    let (mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0);
    for status in containers {
        let state = status.state.clone().unwrap_or_default();
        if state.running.is_some() {
            running += 1;
        } else if let Some(terminated) = &state.terminated {
            stopped += 1;
            succeeded += usize::from(terminated.exit_code == 0);
        } else if status
            .last_state
            .as_ref()
            .is_some_and(|s| s.terminated.is_some())
        {
            stopped += 1;
        } else {
            waiting += 1;
        }
    }
    let failed = stopped - succeeded;
    match () {
        _ if waiting > 0 => "Pending",
        _ if running > 0 => "Running",
        _ if stopped == 0 => "Pending",
        _ => match restart {
            Restart::Always => "Running",
            Restart::OnFailure if stopped == succeeded => "Succeeded",
            Restart::OnFailure => "Running",
            Restart::Never if failed > 0 => "Failed",
            Restart::Never => "Succeeded",
        },
    }
}

/// A terminal phase once every container has stopped for good.
pub fn final_phase(containers: &[ContainerStatus]) -> &'static str {
    let all_zero = containers.iter().all(|s| {
        s.state
            .as_ref()
            .and_then(|st| st.terminated.as_ref())
            .is_some_and(|t| t.exit_code == 0)
    });
    if all_zero {
        "Succeeded"
    } else {
        "Failed"
    }
}

/// What the owned conditions are computed from.
pub struct Readiness<'a> {
    pub sandbox_ready: bool,
    /// Init containers not yet done, in order.
    pub incomplete: Vec<&'a str>,
    /// Containers (sidecars included) not ready, in order.
    pub unready: Vec<&'a str>,
    pub phase: &'a str,
}

/// `old` with the owned conditions recomputed, in the order the API
/// stored them (new ones after, in kube's order); everyone else's stay
/// as they were. A condition keeps its transition time while its status
/// stays.
pub fn conditions(
    old: &[PodCondition],
    gates: &[PodReadinessGate],
    r: &Readiness,
    now: DateTime<Utc>,
) -> Vec<PodCondition> {
    let succeeded = r.phase == "Succeeded";
    let completed = || succeeded.then(|| ("PodCompleted".to_string(), None));
    let list = |names: &[&str]| names.join(" ");
    let initialized = match (r.incomplete.is_empty(), completed()) {
        (true, why) => (true, why),
        (false, _) => (
            false,
            Some((
                "ContainersNotInitialized".into(),
                Some(format!(
                    "containers with incomplete status: [{}]",
                    list(&r.incomplete)
                )),
            )),
        ),
    };
    let containers_ready = match (r.unready.is_empty() && !is_final(r.phase), completed()) {
        (true, _) => (true, None),
        (false, Some(why)) => (false, Some(why)),
        (false, None) => (
            false,
            Some((
                "ContainersNotReady".into(),
                Some(format!(
                    "containers with unready status: [{}]",
                    list(&r.unready)
                )),
            )),
        ),
    };
    let ready = match (&containers_ready, gate_problem(old, gates)) {
        ((true, _), None) => (true, None),
        ((true, _), Some(problem)) => (
            false,
            Some(("ReadinessGatesNotReady".into(), Some(problem))),
        ),
        ((false, why), _) => (false, why.clone()),
    };
    let scheduled = (true, None);
    let owned = [
        (OWNED[0], (r.sandbox_ready && !is_final(r.phase), None)),
        (OWNED[1], initialized),
        (OWNED[2], ready),
        (OWNED[3], containers_ready),
        (OWNED[4], scheduled),
    ];
    let mut recomputed: Vec<PodCondition> = owned
        .into_iter()
        .map(|(kind, (status, why))| condition(old, kind, status, why, now))
        .collect();
    in_stored_order(old, &mut recomputed)
}

/// `old` with each owned condition replaced by its recomputed version,
/// then the owned ones `old` lacks, in kube's order. The API keeps the
/// order it stored (a strategic merge replaces conditions by type in
/// place and appends new ones), so a status computed again from the pod
/// it was written to compares equal and is not written a second time.
fn in_stored_order(old: &[PodCondition], recomputed: &mut Vec<PodCondition>) -> Vec<PodCondition> {
    let mut out: Vec<PodCondition> = old
        .iter()
        .map(
            |c| match recomputed.iter().position(|r| r.type_ == c.type_) {
                Some(at) => recomputed.remove(at),
                None => c.clone(),
            },
        )
        .collect();
    out.append(recomputed);
    out
}

fn is_final(phase: &str) -> bool {
    matches!(phase, "Succeeded" | "Failed")
}

/// Why the readiness gates hold the pod back, if they do.
fn gate_problem(old: &[PodCondition], gates: &[PodReadinessGate]) -> Option<String> {
    gates.iter().find_map(|gate| {
        let kind = &gate.condition_type;
        match old.iter().find(|c| &c.type_ == kind) {
            None => Some(format!(
                "corresponding condition of pod readiness gate \"{kind}\" does not exist."
            )),
            Some(c) if c.status != "True" => Some(format!(
                "the status of pod readiness gate \"{kind}\" is not \"True\", but {}",
                c.status
            )),
            Some(_) => None,
        }
    })
}

type Why = Option<(String, Option<String>)>;

fn condition(
    old: &[PodCondition],
    kind: &str,
    status: bool,
    why: Why,
    now: DateTime<Utc>,
) -> PodCondition {
    let status = if status { "True" } else { "False" }.to_string();
    let previous = old.iter().find(|c| c.type_ == kind);
    // The scheduler's PodScheduled stays as it wrote it.
    if kind == "PodScheduled" {
        if let Some(existing) = previous.filter(|c| c.status == "True") {
            return existing.clone();
        }
    }
    let since = previous
        .filter(|c| c.status == status)
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or(Time(now));
    let (reason, message) = why.map_or((None, None), |(r, m)| (Some(r), m));
    PodCondition {
        type_: kind.to_string(),
        status,
        last_transition_time: Some(since),
        reason,
        message,
        ..PodCondition::default()
    }
}
