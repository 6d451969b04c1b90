//! What a Job needs of its pods: which to make next (any, or the indexes
//! still to do), how they are made (the finalizer, the completion index
//! as annotation, label, env and hostname), the counts and the deadline.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job, JobStatus, UncountedTerminatedPods};
use k8s_openapi::api::core::v1::{EnvVar, Pod};
use k8s_openapi::chrono::{Duration as ChronoDuration, Utc};

use super::failure;
use super::indexes::{self, INDEX, INDEX_FAILURES};
use super::tracking::{Pods, TRACKING_FINALIZER};
use crate::ownership::controller_ref;
use crate::pod_control;

pub fn indexed(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.completion_mode.as_deref()) == Some("Indexed")
}

fn parallelism(job: &Job) -> i32 {
    job.spec.as_ref().and_then(|s| s.parallelism).unwrap_or(1)
}

fn completions(job: &Job) -> Option<i32> {
    job.spec.as_ref().and_then(|s| s.completions)
}

pub fn fail_index(status: &mut JobStatus, index: Option<i32>) {
    let Some(index) = index else { return };
    let mut failed = indexes::parse(status.failed_indexes.as_deref());
    failed.insert(index);
    status.failed_indexes = indexes::format(&failed);
}

/// Finished pods recorded but not yet counted.
pub fn uncounted(status: &JobStatus, succeeded: bool) -> usize {
    let pods = status.uncounted_terminated_pods.as_ref();
    let list = pods.and_then(|u| {
        if succeeded {
            u.succeeded.as_ref()
        } else {
            u.failed.as_ref()
        }
    });
    list.map_or(0, Vec::len)
}

/// Moves recorded pods no longer `held` (their finalizer released now,
/// or gone from the cache) into the counts; true if any moved.
pub fn move_counted(
    uncounted: &mut UncountedTerminatedPods,
    status: &mut JobStatus,
    held: &BTreeSet<String>,
) -> bool {
    let mut moved = false;
    for (list, count) in [
        (&mut uncounted.succeeded, &mut status.succeeded),
        (&mut uncounted.failed, &mut status.failed),
    ] {
        let Some(uids) = list.as_mut() else { continue };
        let before = uids.len();
        uids.retain(|uid| held.contains(uid));
        let gone = before - uids.len();
        if gone > 0 {
            *count = Some(count.unwrap_or(0) + gone as i32);
            moved = true;
        }
    }
    moved
}

pub fn past_deadline(job: &Job, status: &JobStatus) -> bool {
    let Some(seconds) = job.spec.as_ref().and_then(|s| s.active_deadline_seconds) else {
        return false;
    };
    let Some(start) = status.start_time.as_ref() else {
        return false;
    };
    start.0 + ChronoDuration::seconds(seconds) <= Utc::now()
}

/// Some(true) when the job succeeded, Some(false) when every index is
/// done but some failed, None while work remains.
pub fn complete(job: &Job, status: &JobStatus) -> Option<bool> {
    let succeeded = status.succeeded.unwrap_or(0) + uncounted(status, true) as i32;
    if indexed(job) {
        let total = completions(job)?;
        let done = indexes::parse(status.completed_indexes.as_deref());
        let failed = indexes::parse(status.failed_indexes.as_deref());
        let covered = (0..total).all(|i| done.contains(&i) || failed.contains(&i));
        return match (covered, failed.is_empty()) {
            (false, _) => None,
            (true, true) => Some(true),
            (true, false) => Some(false),
        };
    }
    match completions(job) {
        Some(total) => (succeeded >= total).then_some(true),
        None => (succeeded > 0 && status.active.unwrap_or(0) == 0).then_some(true),
    }
}

/// A pod to make: its index (Indexed jobs) and how often that index failed.
pub struct NewPod {
    pub index: Option<i32>,
    pub failures: i32,
}

pub struct Plan {
    pub create: Vec<NewPod>,
    pub surplus: Vec<Arc<Pod>>,
}

/// The pods to make and to delete to run `parallelism` of what remains.
pub fn plan(job: &Job, pods: &Pods, status: &JobStatus) -> Plan {
    let parallelism = parallelism(job).max(0) as usize;
    if indexed(job) {
        return plan_indexed(job, pods, status, parallelism);
    }
    let succeeded = status.succeeded.unwrap_or(0) + uncounted(status, true) as i32;
    let wanted = match completions(job) {
        Some(total) => (total - succeeded).clamp(0, parallelism as i32) as usize,
        None if succeeded > 0 => 0,
        None => parallelism,
    };
    let active = pods.active.len();
    if active > wanted {
        let surplus =
            pod_control::pods_to_delete(&pods.active, &pods.active, active - wanted, Utc::now());
        return Plan {
            create: Vec::new(),
            surplus,
        };
    }
    let create = (active..wanted)
        .map(|_| NewPod {
            index: None,
            failures: 0,
        })
        .collect();
    Plan {
        create,
        surplus: Vec::new(),
    }
}

fn plan_indexed(job: &Job, pods: &Pods, status: &JobStatus, parallelism: usize) -> Plan {
    let total = completions(job).unwrap_or(0);
    let done = indexes::parse(status.completed_indexes.as_deref());
    let failed = indexes::parse(status.failed_indexes.as_deref());
    let mut running = BTreeSet::new();
    let mut surplus = Vec::new();
    for pod in &pods.active {
        match indexes::of(pod) {
            Some(i) if i < total && !done.contains(&i) && running.insert(i) => {}
            _ => surplus.push(pod.clone()),
        }
    }
    if !surplus.is_empty() {
        return Plan {
            create: Vec::new(),
            surplus,
        };
    }
    let room = parallelism.saturating_sub(running.len());
    let create = (0..total)
        .filter(|i| !done.contains(i) && !failed.contains(i) && !running.contains(i))
        .take(room)
        .map(|i| NewPod {
            index: Some(i),
            failures: index_failures(pods, i),
        })
        .collect();
    Plan { create, surplus }
}

/// Failures of `index` so far, from its failed pods.
fn index_failures(pods: &Pods, index: i32) -> i32 {
    pods.all
        .iter()
        .filter(|p| indexes::of(p) == Some(index) && crate::pods::phase(p) == "Failed")
        .map(|p| indexes::failures_before(p) + 1)
        .max()
        .unwrap_or(0)
}

/// How long to wait before replacing failed pods, if at all.
pub fn backoff_left(pods: &Pods, status: &JobStatus) -> Option<Duration> {
    let failures = status.failed.unwrap_or(0) + uncounted(status, false) as i32;
    let last = pods
        .all
        .iter()
        .filter(|p| crate::pods::phase(p) == "Failed")
        .filter_map(|p| failure::finished_at(p))
        .max()?;
    let due = last + ChronoDuration::from_std(failure::backoff(failures)).ok()?;
    (due - Utc::now()).to_std().ok().filter(|d| !d.is_zero())
}

/// The pod for `new`: the template, the job as controller, the tracking
/// finalizer, and for an Indexed job its index (annotation, label,
/// `JOB_COMPLETION_INDEX`, hostname `<job>-<index>`).
pub fn pod_for(job: &Job, new: &NewPod) -> Pod {
    let name = job.metadata.name.clone().unwrap_or_default();
    let template = job
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let prefix = match new.index {
        Some(i) => format!("{name}-{i}-"),
        None => format!("{name}-"),
    };
    let mut pod = pod_control::pod_from_template(&template, &controller_ref(job), &prefix);
    pod.metadata
        .finalizers
        .get_or_insert_with(Vec::new)
        .push(TRACKING_FINALIZER.into());
    let Some(index) = new.index else { return pod };
    let text = index.to_string();
    let annotations = pod
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    annotations.insert(INDEX.into(), text.clone());
    if job
        .spec
        .as_ref()
        .and_then(|s| s.backoff_limit_per_index)
        .is_some()
    {
        annotations.insert(INDEX_FAILURES.into(), new.failures.to_string());
    }
    pod.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(INDEX.into(), text.clone());
    if let Some(spec) = pod.spec.as_mut() {
        spec.hostname = Some(format!("{name}-{index}"));
        for container in spec
            .containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten())
        {
            let env = container.env.get_or_insert_with(Vec::new);
            env.retain(|e| e.name != "JOB_COMPLETION_INDEX");
            env.push(EnvVar {
                name: "JOB_COMPLETION_INDEX".into(),
                value: Some(text.clone()),
                value_from: None,
            });
        }
    }
    pod
}

/// Zero counts and empty lists absent, as kube's JSON omits them.
pub fn normalized(mut status: JobStatus) -> JobStatus {
    for field in [
        &mut status.active,
        &mut status.ready,
        &mut status.succeeded,
        &mut status.failed,
    ] {
        if *field == Some(0) {
            *field = None;
        }
    }
    if let Some(uncounted) = status.uncounted_terminated_pods.as_mut() {
        if uncounted.succeeded.as_ref().is_some_and(Vec::is_empty) {
            uncounted.succeeded = None;
        }
        if uncounted.failed.as_ref().is_some_and(Vec::is_empty) {
            uncounted.failed = None;
        }
    }
    status
}
