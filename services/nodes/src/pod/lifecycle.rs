//! A pod's life on its node as a pure function: from the pod as the API
//! has it, what the node knows and the time, the status a kubelet would
//! report now, whether the pod is done with (deleted), and when to look
//! again. Everything due by `now` happens in one step, so a pod with
//! nothing to wait for goes from Pending to Running and Ready in one
//! status write, and a node that was away catches up in one write too.

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{
    Container, ContainerStatus, HostIP, Pod, PodIP, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::annotations::Plan;
use super::conditions::{self, Readiness};
use super::container::{self, Identity, Restart, Script};
use super::resources::{is_sidecar, qos_class};
use super::termination;
use crate::clock::{after, whole_seconds};

/// What the node supplies to its pods.
pub struct Environment<'a> {
    pub host_ip: &'a str,
    /// The pod's address from the node's pod CIDR (`None` on the host network).
    pub pod_ip: Option<&'a str>,
    /// How long the containers of a pod that finishes (restartPolicy Never
    /// or OnFailure) run when the pod does not say.
    pub finishing_run: Duration,
}

/// What to do with a pod next.
#[derive(Debug, Clone, PartialEq)]
pub struct Next {
    /// The status to write, when it differs from the pod's.
    pub status: Option<PodStatus>,
    /// Delete the pod (grace 0) once that status is written: it is
    /// terminating and its containers have stopped.
    pub delete: bool,
    /// When the status changes next without anything else happening.
    pub wake_at: Option<DateTime<Utc>>,
}

/// The pod's next status at `now` (see the module's comment).
pub fn advance(pod: &Pod, plan: &Plan, env: &Environment, now: DateTime<Utc>) -> Next {
    let old = pod.status.clone().unwrap_or_default();
    let deleting = pod.metadata.deletion_timestamp.is_some();
    if is_terminal(&old) {
        return Next {
            status: None,
            delete: deleting,
            wake_at: None,
        };
    }
    let Some(spec) = &pod.spec else {
        return Next {
            status: None,
            delete: false,
            wake_at: None,
        };
    };
    let start_time = old
        .start_time
        .as_ref()
        .map_or_else(|| whole_seconds(now), |t| t.0);
    let stop = termination::due(pod, spec, plan, start_time);
    // Nothing happens to the containers after they are stopped.
    let until = stop.as_ref().map_or(now, |s| s.at.min(now));
    let (status, wake_at) = simulate(pod, spec, plan, env, start_time, until);
    let (status, delete, wake_at) = match stop {
        Some(stop) if stop.at <= now => {
            let stopped = termination::stop(pod, status, &stop, now);
            (stopped, stop.delete, None)
        }
        Some(stop) => (status, false, earliest(wake_at, Some(stop.at))),
        None => (status, false, wake_at),
    };
    Next {
        status: (Some(&status) != pod.status.as_ref()).then_some(status),
        delete,
        wake_at,
    }
}

/// Succeeded or Failed: nothing runs any more.
pub fn is_terminal(status: &PodStatus) -> bool {
    matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"))
}

fn earliest(a: Option<DateTime<Utc>>, b: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
    a.into_iter().chain(b).min()
}

/// The status while nothing stops the pod: the sandbox comes up, the init
/// containers run in order, then the main containers.
fn simulate(
    pod: &Pod,
    spec: &PodSpec,
    plan: &Plan,
    env: &Environment,
    start_time: DateTime<Utc>,
    now: DateTime<Utc>,
) -> (PodStatus, Option<DateTime<Utc>>) {
    let old = pod.status.clone().unwrap_or_default();
    let who = identity(pod);
    let sandbox_at = after(start_time, plan.start_delay);
    let sandbox_ready = sandbox_at <= now;
    let mut wake = (!sandbox_ready).then_some(sandbox_at);
    let restart = Restart::parse(spec.restart_policy.as_deref());

    let init_specs = spec.init_containers.as_deref().unwrap_or_default();
    let inits = run_init_containers(init_specs, &old, plan, &who, sandbox_at, now);
    wake = earliest(wake, inits.wake);
    let main_script = Script {
        start_at: inits.done_at.unwrap_or(DateTime::<Utc>::MAX_UTC),
        run_for: plan
            .run_duration
            .or((restart != Restart::Always).then_some(env.finishing_run)),
        exit_code: plan.exit_code,
        restart,
        startup_delay: Duration::ZERO,
        ready_delay: None,
        waiting_reason: if init_specs.is_empty() {
            "ContainerCreating"
        } else {
            "PodInitializing"
        },
    };
    let mut containers = Vec::new();
    for c in &spec.containers {
        let previous = find(old.container_statuses.as_deref(), &c.name);
        if inits.done_at.is_none() {
            let waiting = container::waiting(c, main_script.waiting_reason, None);
            containers.push(previous.cloned().unwrap_or(waiting));
            continue;
        }
        let script = probed(c, plan, main_script.clone());
        let (status, next) = container::advance(c, previous, &script, &who, now);
        wake = earliest(wake, next);
        containers.push(status);
    }
    let initialized = inits.incomplete.is_empty();
    let phase = conditions::phase(initialized, &containers, restart);
    let unready: Vec<&str> = inits
        .sidecars
        .iter()
        .copied()
        .chain(spec.containers.iter().map(|c| c.name.as_str()))
        .filter(|name| {
            !find(Some(&inits.statuses), name)
                .or_else(|| find(Some(&containers), name))
                .is_some_and(|s| s.ready)
        })
        .collect();
    let readiness = Readiness {
        sandbox_ready,
        incomplete: inits.incomplete.clone(),
        unready,
        phase,
    };
    let conditions = conditions::conditions(
        old.conditions.as_deref().unwrap_or_default(),
        spec.readiness_gates.as_deref().unwrap_or_default(),
        &readiness,
        whole_seconds(now),
    );
    let pod_ip = env
        .pod_ip
        .filter(|_| sandbox_ready && spec.host_network != Some(true))
        .or((sandbox_ready && spec.host_network == Some(true)).then_some(env.host_ip));
    let status = PodStatus {
        phase: Some(phase.to_string()),
        conditions: Some(conditions),
        host_ip: Some(env.host_ip.to_string()),
        host_ips: Some(vec![HostIP {
            ip: env.host_ip.to_string(),
        }]),
        pod_ip: pod_ip.map(str::to_string),
        pod_ips: pod_ip.map(|ip| vec![PodIP { ip: ip.to_string() }]),
        start_time: Some(Time(start_time)),
        init_container_statuses: (!init_specs.is_empty()).then_some(inits.statuses),
        container_statuses: Some(containers),
        qos_class: Some(qos_class(pod).to_string()),
        ..old
    };
    (status, wake)
}

/// Where the init containers are at `now`.
struct Inits<'a> {
    statuses: Vec<ContainerStatus>,
    /// Not yet completed (or, for sidecars, not yet started), in order.
    incomplete: Vec<&'a str>,
    /// The sidecars' names: they must be ready for the pod to be.
    sidecars: Vec<&'a str>,
    /// When the last one finished: the main containers start then.
    done_at: Option<DateTime<Utc>>,
    wake: Option<DateTime<Utc>>,
}

fn run_init_containers<'a>(
    specs: &'a [Container],
    old: &PodStatus,
    plan: &Plan,
    who: &Identity,
    sandbox_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Inits<'a> {
    let mut inits = Inits {
        statuses: Vec::new(),
        incomplete: Vec::new(),
        sidecars: specs
            .iter()
            .filter(|c| is_sidecar(c))
            .map(|c| c.name.as_str())
            .collect(),
        done_at: Some(sandbox_at),
        wake: None,
    };
    for c in specs {
        let previous = find(old.init_container_statuses.as_deref(), &c.name);
        let Some(start_at) = inits.done_at else {
            inits.incomplete.push(&c.name);
            let waiting = container::waiting(c, "PodInitializing", None);
            inits.statuses.push(previous.cloned().unwrap_or(waiting));
            continue;
        };
        let sidecar = is_sidecar(c);
        let script = Script {
            start_at,
            run_for: (!sidecar).then_some(plan.init_duration),
            exit_code: 0,
            restart: if sidecar {
                Restart::Always
            } else {
                Restart::Never
            },
            startup_delay: Duration::ZERO,
            ready_delay: None,
            waiting_reason: "PodInitializing",
        };
        let script = if sidecar {
            probed(c, plan, script)
        } else {
            script
        };
        let (mut status, next) = container::advance(c, previous, &script, who, now);
        inits.wake = earliest(inits.wake, next);
        inits.done_at = if sidecar {
            started_since(&status, &script)
        } else {
            completed_at(&status)
        };
        if inits.done_at.is_none() {
            inits.incomplete.push(&c.name);
        } else if !sidecar {
            // A completed init container reports ready, as the kubelet's do.
            status.ready = true;
        }
        inits.statuses.push(status);
    }
    inits
}

/// The script with the container's probes: its startup probe passes after
/// its initial delay, its readiness probe too (or never, if the pod says
/// so); a container without a readiness probe is ready once started.
fn probed(c: &Container, plan: &Plan, script: Script) -> Script {
    let delay = |seconds: Option<i32>| Duration::from_secs(seconds.unwrap_or(0).max(0) as u64);
    let startup_delay = c
        .startup_probe
        .as_ref()
        .map_or(Duration::ZERO, |p| delay(p.initial_delay_seconds));
    let ready_delay = match &c.readiness_probe {
        None => Some(Duration::ZERO),
        Some(_) if !plan.probes_succeed => None,
        Some(p) => Some(delay(p.initial_delay_seconds)),
    };
    Script {
        startup_delay,
        ready_delay,
        ..script
    }
}

/// When a sidecar counts as started (the next init container may run).
fn started_since(status: &ContainerStatus, script: &Script) -> Option<DateTime<Utc>> {
    let running = status.state.as_ref()?.running.as_ref()?;
    let started_at = running.started_at.as_ref()?.0;
    (status.started == Some(true)).then(|| after(started_at, script.startup_delay))
}

fn completed_at(status: &ContainerStatus) -> Option<DateTime<Utc>> {
    let terminated = status.state.as_ref()?.terminated.as_ref()?;
    (terminated.exit_code == 0)
        .then(|| terminated.finished_at.as_ref().map(|t| t.0))
        .flatten()
}

fn find<'a>(statuses: Option<&'a [ContainerStatus]>, name: &str) -> Option<&'a ContainerStatus> {
    statuses?.iter().find(|s| s.name == name)
}

fn identity(pod: &Pod) -> Identity<'_> {
    Identity {
        pod_uid: pod.metadata.uid.as_deref().unwrap_or_default(),
        pod_name: pod.metadata.name.as_deref().unwrap_or_default(),
        namespace: pod.metadata.namespace.as_deref().unwrap_or_default(),
    }
}

/// The status of a pod the node refused: Failed with the kubelet's reason.
pub fn rejected(pod: &Pod, reason: &str, message: &str) -> PodStatus {
    PodStatus {
        phase: Some("Failed".into()),
        reason: Some(reason.to_string()),
        message: Some(format!("Pod was rejected: {message}")),
        qos_class: Some(qos_class(pod).to_string()),
        ..pod.status.clone().unwrap_or_default()
    }
}

#[cfg(test)]
#[path = "lifecycle_tests.rs"]
mod tests;
