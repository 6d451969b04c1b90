//! One simulated container: its status moves Waiting -> Running ->
//! Terminated, and back through CrashLoopBackOff when its restart rule
//! says so, each transition at a time derived from the status already
//! written. So a node that restarts, or evaluates late, catches up to the
//! same statuses a kubelet would have reported.

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use sha2::{Digest, Sha256};

use crate::clock::{after, whole_seconds};

/// When a container restarts after it exits (the pod's `restartPolicy`,
/// or `Always` for a sidecar).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    Always,
    OnFailure,
    Never,
}

impl Restart {
    pub fn parse(policy: Option<&str>) -> Restart {
        match policy {
            Some("Never") => Restart::Never,
            Some("OnFailure") => Restart::OnFailure,
            _ => Restart::Always,
        }
    }

    fn after_exit(self, exit_code: i32) -> bool {
        match self {
            Restart::Always => true,
            Restart::OnFailure => exit_code != 0,
            Restart::Never => false,
        }
    }
}

/// The script one container follows.
#[derive(Debug, Clone)]
pub struct Script {
    /// When it may first start (the sandbox is up, the init containers done).
    pub start_at: DateTime<Utc>,
    /// How long each run lasts; `None` runs until stopped.
    pub run_for: Option<Duration>,
    pub exit_code: i32,
    pub restart: Restart,
    /// From its start until its startup probe passes.
    pub startup_delay: Duration,
    /// From its start until its readiness probe passes; `None`: never.
    pub ready_delay: Option<Duration>,
    /// The reason it waits for before its first start.
    pub waiting_reason: &'static str,
}

/// What identifies the container's runs: its pod and its name.
pub struct Identity<'a> {
    pub pod_uid: &'a str,
    pub pod_name: &'a str,
    pub namespace: &'a str,
}

/// The next status of `spec`'s container at `now`, from `previous`, and
/// when it changes next.
pub fn advance(
    spec: &Container,
    previous: Option<&ContainerStatus>,
    script: &Script,
    who: &Identity,
    now: DateTime<Utc>,
) -> (ContainerStatus, Option<DateTime<Utc>>) {
    let mut status = previous
        .cloned()
        .unwrap_or_else(|| waiting(spec, script.waiting_reason, None));
    // Each pass makes one transition that was due; a long absence with a
    // crash-looping container needs at most a few hundred (the back-off
    // reaches 5 minutes quickly), the bound only guards against a bug.
    for _ in 0..10_000 {
        let due = match state_of(&status) {
            State::Waiting { crash_loop: false } => Some(script.start_at),
            State::Waiting { crash_loop: true } => Some(restart_due(&status)),
            State::Running { started_at } => script.run_for.map(|d| after(started_at, d)),
            State::Terminated { exit_code } if script.restart.after_exit(exit_code) => {
                status = restarted(spec, status, who);
                continue;
            }
            State::Terminated { .. } => return (status, None),
        };
        match due {
            Some(at) if at <= now => status = transition(spec, status, script, who, at),
            _ => return running_flags(status, script, due, now),
        }
    }
    (status, None)
}

enum State {
    Waiting { crash_loop: bool },
    Running { started_at: DateTime<Utc> },
    Terminated { exit_code: i32 },
}

fn state_of(status: &ContainerStatus) -> State {
    let state = status.state.as_ref();
    if let Some(running) = state.and_then(|s| s.running.as_ref()) {
        let started_at = running
            .started_at
            .as_ref()
            .map_or(DateTime::UNIX_EPOCH, |t| t.0);
        return State::Running { started_at };
    }
    if let Some(terminated) = state.and_then(|s| s.terminated.as_ref()) {
        return State::Terminated {
            exit_code: terminated.exit_code,
        };
    }
    let reason = state
        .and_then(|s| s.waiting.as_ref())
        .and_then(|w| w.reason.as_deref());
    State::Waiting {
        crash_loop: reason == Some(CRASH_LOOP),
    }
}

/// Waiting -> Running, or Running -> Terminated, at `at`.
fn transition(
    spec: &Container,
    status: ContainerStatus,
    script: &Script,
    who: &Identity,
    at: DateTime<Utc>,
) -> ContainerStatus {
    match state_of(&status) {
        State::Running { started_at } => {
            let terminated = terminated_state(&status, started_at, at, script.exit_code, None);
            ContainerStatus {
                state: Some(terminated),
                ready: false,
                started: Some(false),
                ..status
            }
        }
        _ => run(spec, status, who, at),
    }
}

fn run(
    spec: &Container,
    status: ContainerStatus,
    who: &Identity,
    at: DateTime<Utc>,
) -> ContainerStatus {
    ContainerStatus {
        container_id: Some(container_id(who, &spec.name, status.restart_count)),
        image_id: image_id(&status.image),
        state: Some(ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(Time(whole_seconds(at))),
            }),
            ..ContainerState::default()
        }),
        ready: false,
        started: Some(false),
        ..status
    }
}

/// The state of a run that ended at `at`.
pub fn terminated_state(
    status: &ContainerStatus,
    started_at: DateTime<Utc>,
    at: DateTime<Utc>,
    exit_code: i32,
    reason: Option<&str>,
) -> ContainerState {
    let default_reason = if exit_code == 0 { "Completed" } else { "Error" };
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            container_id: status.container_id.clone(),
            exit_code,
            started_at: Some(Time(started_at)),
            finished_at: Some(Time(whole_seconds(at))),
            reason: Some(reason.unwrap_or(default_reason).to_string()),
            ..ContainerStateTerminated::default()
        }),
        ..ContainerState::default()
    }
}

const CRASH_LOOP: &str = "CrashLoopBackOff";
/// The kubelet's restart back-off: 10 s, doubling, at most 5 minutes.
const BACKOFF_START: u64 = 10;
const BACKOFF_MAX: u64 = 300;

/// How long the kubelet waits before the `restarts`-th restart: the first
/// is immediate, then 10 s doubling up to 5 minutes.
pub fn backoff(restarts: i32) -> Duration {
    if restarts <= 1 {
        return Duration::ZERO;
    }
    let doublings = (restarts - 2).min(16) as u32;
    Duration::from_secs((BACKOFF_START << doublings).min(BACKOFF_MAX))
}

fn restart_due(status: &ContainerStatus) -> DateTime<Utc> {
    let finished = status
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .and_then(|t| t.finished_at.as_ref())
        .map_or(DateTime::UNIX_EPOCH, |t| t.0);
    after(finished, backoff(status.restart_count))
}

/// A terminated run becomes the last state; the next run waits out its back-off.
fn restarted(spec: &Container, status: ContainerStatus, who: &Identity) -> ContainerStatus {
    let restarts = status.restart_count + 1;
    let delay = backoff(restarts);
    let message = format!(
        "back-off {}s restarting failed container={} pod={}_{}({})",
        delay.as_secs(),
        spec.name,
        who.pod_name,
        who.namespace,
        who.pod_uid
    );
    let mut next = waiting(spec, CRASH_LOOP, Some(message));
    next.restart_count = restarts;
    next.last_state = status.state;
    next.container_id = status.container_id;
    next.image_id = status.image_id;
    next
}

/// `ready` and `started` of a running container at `now`, and the
/// earliest of `due` and the next time either flips.
fn running_flags(
    mut status: ContainerStatus,
    script: &Script,
    due: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> (ContainerStatus, Option<DateTime<Utc>>) {
    let State::Running { started_at } = state_of(&status) else {
        return (status, due);
    };
    let started_at_time = after(started_at, script.startup_delay);
    let ready_at = script
        .ready_delay
        .map(|d| after(started_at, d).max(started_at_time));
    let started = started_at_time <= now;
    let ready = ready_at.is_some_and(|at| at <= now);
    status.started = Some(started);
    status.ready = ready;
    let pending = [
        (!started).then_some(started_at_time),
        ready_at.filter(|_| !ready),
        due,
    ];
    (status, pending.into_iter().flatten().min())
}

/// A container that has not started: `reason` is ContainerCreating,
/// PodInitializing or CrashLoopBackOff.
pub fn waiting(spec: &Container, reason: &str, message: Option<String>) -> ContainerStatus {
    ContainerStatus {
        name: spec.name.clone(),
        image: normalized_image(spec.image.as_deref().unwrap_or_default()),
        image_id: String::new(),
        state: Some(ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.to_string()),
                message,
            }),
            ..ContainerState::default()
        }),
        ready: false,
        started: Some(false),
        restart_count: 0,
        ..ContainerStatus::default()
    }
}

/// The image as a container runtime reports it: `nginx` is
/// `docker.io/library/nginx:latest`.
pub fn normalized_image(image: &str) -> String {
    if image.is_empty() {
        return String::new();
    }
    let (name, reference) = match image.split_once('@') {
        Some((name, digest)) => (name.to_string(), format!("@{digest}")),
        None => {
            let last_slash = image.rfind('/').map_or(0, |i| i + 1);
            match image[last_slash..].rfind(':') {
                Some(colon) => (
                    image[..last_slash + colon].to_string(),
                    image[last_slash + colon..].to_string(),
                ),
                None => (image.to_string(), ":latest".to_string()),
            }
        }
    };
    let first = name.split('/').next().unwrap_or_default();
    let has_registry =
        name.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    let full = if has_registry {
        name
    } else if name.contains('/') {
        format!("docker.io/{name}")
    } else {
        format!("docker.io/library/{name}")
    };
    format!("{full}{reference}")
}

fn hex_digest(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The image's content digest, as the runtime reports it
/// (`docker.io/library/nginx@sha256:...`), stable per image name.
pub fn image_id(image: &str) -> String {
    let repository = match image.split_once('@') {
        Some((repository, _)) => repository,
        None => image.rsplit_once(':').map_or(image, |(r, _)| r),
    };
    format!("{repository}@sha256:{}", hex_digest(&[image]))
}

/// A run's container ID, distinct per pod, container and restart.
pub fn container_id(who: &Identity, container: &str, restarts: i32) -> String {
    let id = hex_digest(&[who.pod_uid, container, &restarts.to_string()]);
    format!("containerd://{id}")
}

#[cfg(test)]
#[path = "container_tests.rs"]
mod tests;
