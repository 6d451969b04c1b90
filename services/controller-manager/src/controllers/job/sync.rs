//! One Job's reconcile, kube's `syncJob`: count finished pods through the
//! job-tracking finalizer (record them in `uncountedTerminatedPods`, then
//! remove the finalizer, then move them into the counts, so a restart
//! neither loses nor double-counts one), decide success or failure
//! (completions, Indexed completion, backoffLimit, backoffLimitPerIndex and
//! maxFailedIndexes, podFailurePolicy, activeDeadlineSeconds), honour
//! suspend, and otherwise keep `parallelism` pods running.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use capstan_client::events::EventType;
use capstan_client::informer::Store;
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::batch::v1::{Job, JobStatus, UncountedTerminatedPods};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::chrono::{Duration as ChronoDuration, Utc};
use kube::api::{Api, Patch, PatchParams};

use super::conditions::{self, set_condition};
use super::failure::{self, Verdict};
use super::indexes;
use super::pods as job_pods;
use super::tracking::{has_finalizer, Pods, ORPHAN_PREFIX, TRACKING_FINALIZER};
use crate::context::Reconciler;
use crate::error::{Error, Result};
use crate::expectations::Expectations;
use crate::ownership::BY_CONTROLLER;
use crate::pod_control::{self, PodControl, BURST_REPLICAS, SLOW_START_INITIAL_BATCH};
use crate::pods;

pub struct Syncer {
    pub jobs: Store<Job>,
    pub pods: Store<Pod>,
    pub expectations: Expectations,
    pub control: PodControl,
    pub queue: Option<WorkQueue<String>>,
    /// The resourceVersion of each job's last status this controller
    /// wrote: a cache still behind it would count finished pods again.
    pub written: WrittenVersions,
}

fn terminal(pod: &Pod) -> bool {
    matches!(pods::phase(pod), "Succeeded" | "Failed")
}

/// The outcome this sync reached for the job.
pub struct Outcome {
    pub failure: Option<(String, String)>,
    pub success: bool,
}

impl Reconciler for Syncer {
    async fn sync(&self, key: &str) -> Result<()> {
        if let Some(pod_key) = key.strip_prefix(ORPHAN_PREFIX) {
            return self.release_orphan(pod_key).await;
        }
        let Some(cached) = self.jobs.get_by_key(key) else {
            self.expectations.forget(key);
            self.written.0.lock().remove(key);
            return Ok(());
        };
        if self.written.ahead_of(key, &cached) {
            // Our own last write is not in the cache yet: wait for it.
            if let Some(queue) = &self.queue {
                queue.add_after(key.to_string(), std::time::Duration::from_millis(200));
            }
            return Ok(());
        }
        let mut job = cached.as_ref().clone();
        let pods = self.pods_of(&job);
        if conditions::finished(&job) || job.metadata.deletion_timestamp.is_some() {
            // Nothing more to count: let go of every pod it still holds.
            return self.release(&pods.all, &mut BTreeSet::new()).await;
        }
        let mut status = job.status.clone().unwrap_or_default();
        let mut outcome = Outcome {
            failure: conditions::failure_target(&status),
            success: conditions::has(&status, "SuccessCriteriaMet"),
        };
        self.track(&mut job, &pods, &mut status, &mut outcome)
            .await?;
        if conditions::suspended(&job) {
            return self.suspend(key, &mut job, &pods, status).await;
        }
        self.resume(&job, &mut status);
        self.judge(&job, &mut status, &mut outcome);
        let settling = outcome.failure.is_some() || outcome.success;
        let active = match settling {
            true => self.stop_all(&job, &pods.active).await?,
            false => self.manage(key, &job, &pods, &status).await?,
        };
        status.active = Some(active as i32);
        status.ready = Some(pods.active.iter().filter(|p| pods::is_ready(p)).count() as i32);
        status.terminating = Some(pods.terminating as i32);
        if settling {
            self.finish(&job, &pods, &mut status, &outcome);
        }
        self.write_if_changed(&mut job, status).await?;
        self.recheck_deadline(key, &job);
        Ok(())
    }
}

impl Syncer {
    /// The job's pods by what they mean for it. A pod being deleted
    /// before it finished counts as failed (kube's default pod
    /// replacement), unless a podFailurePolicy waits for its phase.
    fn pods_of(&self, job: &Job) -> Pods {
        let uid = job.metadata.uid.clone().unwrap_or_default();
        let waits_for_phase = job
            .spec
            .as_ref()
            .is_some_and(|s| s.pod_failure_policy.is_some());
        let mut sorted = Pods::default();
        for pod in self.pods.by_index(BY_CONTROLLER, &uid) {
            let (deleted, done) = (pods::is_terminating(&pod), terminal(&pod));
            if deleted && !done {
                sorted.terminating += 1;
            }
            if (done || (deleted && !waits_for_phase)) && has_finalizer(&pod) {
                sorted.finished.push(pod.clone());
            } else if !deleted && !done {
                sorted.active.push(pod.clone());
            }
            sorted.all.push(pod);
        }
        sorted
    }

    /// The finalizer protocol for pods that finished since the last sync:
    /// record them in uncountedTerminatedPods, release them, then count
    /// them, each step written before the next, so a restart between
    /// steps neither loses nor double-counts a pod.
    async fn track(
        &self,
        job: &mut Job,
        pods: &Pods,
        status: &mut JobStatus,
        outcome: &mut Outcome,
    ) -> Result<()> {
        let mut uncounted = status.uncounted_terminated_pods.clone().unwrap_or_default();
        let mut known: BTreeSet<String> = uncounted.succeeded.iter().flatten().cloned().collect();
        known.extend(uncounted.failed.iter().flatten().cloned());
        let mut recorded = false;
        let mut ignored = BTreeSet::new();
        for pod in &pods.finished {
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            if known.contains(&uid) {
                continue;
            }
            match self.record(job, pod, status, &mut uncounted, outcome) {
                true => recorded = true,
                false => {
                    ignored.insert(uid);
                }
            }
        }
        if recorded {
            status.uncounted_terminated_pods = Some(uncounted.clone());
            self.write_status(job, status.clone()).await?;
        }
        let mut released = ignored;
        self.release(&pods.finished, &mut released).await?;
        let held: BTreeSet<String> = pods
            .all
            .iter()
            .filter(|p| has_finalizer(p))
            .filter_map(|p| p.metadata.uid.clone())
            .filter(|uid| !released.contains(uid))
            .collect();
        let moved = job_pods::move_counted(&mut uncounted, status, &held);
        status.uncounted_terminated_pods = Some(uncounted);
        if moved {
            self.write_status(job, status.clone()).await?;
        }
        Ok(())
    }

    /// Records one finished pod; false if it does not count at all
    /// (a podFailurePolicy Ignore).
    fn record(
        &self,
        job: &Job,
        pod: &Pod,
        status: &mut JobStatus,
        uncounted: &mut UncountedTerminatedPods,
        outcome: &mut Outcome,
    ) -> bool {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let index = indexes::of(pod);
        if pods::phase(pod) == "Succeeded" {
            uncounted.succeeded.get_or_insert_with(Vec::new).push(uid);
            if let (true, Some(index)) = (job_pods::indexed(job), index) {
                let mut done = indexes::parse(status.completed_indexes.as_deref());
                done.insert(index);
                status.completed_indexes = indexes::format(&done);
            }
            return true;
        }
        let verdict = match pods::phase(pod) {
            "Failed" => failure::judge(job, pod),
            _ => Verdict::Count,
        };
        match verdict {
            Verdict::Ignore => return false,
            Verdict::FailJob(message) => {
                outcome
                    .failure
                    .get_or_insert(("PodFailurePolicy".into(), message));
            }
            Verdict::FailIndex => job_pods::fail_index(status, index),
            Verdict::Count => {
                let limit = job.spec.as_ref().and_then(|s| s.backoff_limit_per_index);
                if let (Some(limit), Some(index)) = (limit, index) {
                    if indexes::failures_before(pod) + 1 > limit {
                        job_pods::fail_index(status, Some(index));
                    }
                }
            }
        }
        uncounted.failed.get_or_insert_with(Vec::new).push(uid);
        true
    }

    /// Removes the tracking finalizer from `pods`; the UIDs released go
    /// into `released`.
    pub(super) async fn release(
        &self,
        pods: &[Arc<Pod>],
        released: &mut BTreeSet<String>,
    ) -> Result<()> {
        for pod in pods.iter().filter(|p| has_finalizer(p)) {
            let kept: Vec<&String> = pod
                .metadata
                .finalizers
                .iter()
                .flatten()
                .filter(|f| *f != TRACKING_FINALIZER)
                .collect();
            let patch = serde_json::json!({"metadata": {
                "finalizers": if kept.is_empty() { serde_json::Value::Null } else { serde_json::json!(kept) },
                "resourceVersion": pod.metadata.resource_version,
            }});
            let namespace = pod.metadata.namespace.clone().unwrap_or_default();
            let api: Api<Pod> = Api::namespaced(self.control.client().clone(), &namespace);
            let name = pod.metadata.name.clone().unwrap_or_default();
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(Error::from)
            {
                Ok(_) => {}
                Err(err) if err.is_not_found() => {}
                Err(err) => return Err(err),
            }
            released.insert(pod.metadata.uid.clone().unwrap_or_default());
        }
        Ok(())
    }

    /// Backoff, per-index limits, the deadline and completion.
    fn judge(&self, job: &Job, status: &mut JobStatus, outcome: &mut Outcome) {
        if outcome.failure.is_some() {
            return;
        }
        let spec = job.spec.clone().unwrap_or_default();
        let failed = status.failed.unwrap_or(0) + job_pods::uncounted(status, false) as i32;
        let failed_indexes = indexes::parse(status.failed_indexes.as_deref());
        outcome.failure =
            if spec.backoff_limit_per_index.is_none() && failed > spec.backoff_limit.unwrap_or(6) {
                Some((
                    "BackoffLimitExceeded".into(),
                    "Job has reached the specified backoff limit".into(),
                ))
            } else if spec
                .max_failed_indexes
                .is_some_and(|m| failed_indexes.len() as i32 > m)
            {
                Some((
                    "MaxFailedIndexesExceeded".into(),
                    "Job has exceeded the specified maximal number of failed indexes".into(),
                ))
            } else if job_pods::past_deadline(job, status) {
                Some((
                    "DeadlineExceeded".into(),
                    "Job was active longer than specified deadline".into(),
                ))
            } else {
                None
            };
        if outcome.failure.is_none() {
            match job_pods::complete(job, status) {
                Some(true) => outcome.success = true,
                Some(false) => {
                    outcome.failure =
                        Some(("FailedIndexes".into(), "Job has failed indexes".into()))
                }
                None => {}
            }
        }
    }

    /// Deletes every active pod (the job succeeded, failed or is suspended).
    async fn stop_all(&self, job: &Job, active: &[Arc<Pod>]) -> Result<usize> {
        let namespace = job.metadata.namespace.clone().unwrap_or_default();
        let mut first = None;
        for pod in active {
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            let uid = pod.metadata.uid.as_deref().unwrap_or_default();
            if let Err(err) = self.control.delete(&namespace, name, uid, job).await {
                first.get_or_insert(err);
            }
        }
        match first {
            Some(err) => Err(err),
            None => Ok(0),
        }
    }

    /// FailureTarget or SuccessCriteriaMet at once; Failed or Complete
    /// once no pod runs and every finished one is counted.
    fn finish(&self, job: &Job, pods: &Pods, status: &mut JobStatus, outcome: &Outcome) {
        let settled = pods.terminating == 0
            && job_pods::uncounted(status, true) == 0
            && job_pods::uncounted(status, false) == 0;
        let recorder = self.control.recorder();
        if let Some((reason, message)) = &outcome.failure {
            set_condition(status, "FailureTarget", reason, message);
            if settled && set_condition(status, "Failed", reason, message) {
                recorder.record(job, EventType::Warning, reason, message.clone());
            }
            return;
        }
        let reached = (
            "CompletionsReached",
            "Reached expected number of succeeded pods",
        );
        set_condition(status, "SuccessCriteriaMet", reached.0, reached.1);
        if settled && set_condition(status, "Complete", reached.0, reached.1) {
            status.completion_time = Some(Time(Utc::now()));
            recorder.record(job, EventType::Normal, "Completed", "Job completed");
        }
    }

    async fn suspend(
        &self,
        key: &str,
        job: &mut Job,
        pods: &Pods,
        mut status: JobStatus,
    ) -> Result<()> {
        self.stop_all(job, &pods.active).await?;
        status.active = Some(0);
        status.ready = Some(0);
        status.terminating = Some((pods.terminating + pods.active.len()) as i32);
        if set_condition(&mut status, "Suspended", "JobSuspended", "Job suspended") {
            status.start_time = None;
            self.control
                .recorder()
                .record(job, EventType::Normal, "Suspended", "Job suspended");
        }
        self.expectations.forget(key);
        self.write_if_changed(job, status).await
    }

    fn resume(&self, job: &Job, status: &mut JobStatus) {
        if conditions::has(status, "Suspended") {
            conditions::set_false(status, "Suspended", "JobResumed", "Job resumed");
            status.start_time = None;
            self.control
                .recorder()
                .record(job, EventType::Normal, "Resumed", "Job resumed");
        }
        if status.start_time.is_none() {
            status.start_time = Some(Time(Utc::now()));
        }
    }

    /// Keeps `parallelism` pods running (for the indexes still to do, for
    /// an Indexed job); returns how many are active after it.
    async fn manage(&self, key: &str, job: &Job, pods: &Pods, status: &JobStatus) -> Result<usize> {
        if !self.expectations.satisfied(key) {
            return Ok(pods.active.len());
        }
        let plan = job_pods::plan(job, pods, status);
        if !plan.surplus.is_empty() {
            let uids = plan.surplus.iter().filter_map(|p| p.metadata.uid.clone());
            self.expectations.expect_deletions(key, uids);
            let deleted = self.stop_all(job, &plan.surplus).await;
            return deleted.map(|_| pods.active.len() - plan.surplus.len());
        }
        if plan.create.is_empty() {
            return Ok(pods.active.len());
        }
        if let Some(wait) = job_pods::backoff_left(pods, status) {
            if let Some(queue) = &self.queue {
                queue.add_after(key.to_string(), wait);
            }
            return Ok(pods.active.len());
        }
        let made = self.create(key, job, &plan.create).await?;
        Ok(pods.active.len() + made)
    }

    async fn create(&self, key: &str, job: &Job, wanted: &[job_pods::NewPod]) -> Result<usize> {
        let count = wanted.len().min(BURST_REPLICAS);
        self.expectations.expect_creations(key, count);
        let namespace = job.metadata.namespace.clone().unwrap_or_default();
        let make = |i: usize| {
            let pod = job_pods::pod_for(job, &wanted[i]);
            let namespace = namespace.clone();
            async move {
                match self.control.create(&namespace, &pod, job).await {
                    Ok(_) => Ok(()),
                    Err(err) if err.is_namespace_terminating() => Ok(()),
                    Err(err) => Err(err),
                }
            }
        };
        let (made, failed) =
            pod_control::slow_start_batch(count, SLOW_START_INITIAL_BATCH, make).await;
        if made < count {
            self.expectations.lower_creations(key, count - made);
        }
        match failed {
            Some(err) => Err(err),
            None => Ok(made),
        }
    }

    async fn write_if_changed(&self, job: &mut Job, status: JobStatus) -> Result<()> {
        if job_pods::normalized(job.status.clone().unwrap_or_default())
            == job_pods::normalized(status.clone())
        {
            return Ok(());
        }
        self.write_status(job, status).await
    }

    /// Writes the status; `job` becomes what was stored, so the next
    /// write of this sync does not conflict with this one.
    async fn write_status(&self, job: &mut Job, status: JobStatus) -> Result<()> {
        let namespace = job.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Job> = Api::namespaced(self.control.client().clone(), &namespace);
        let status = job_pods::normalized(status);
        if let Some(written) =
            crate::status::update_status(&api, job, |j| j.status = Some(status.clone())).await?
        {
            self.written.remember(job_key(&written), &written);
            *job = written;
        }
        Ok(())
    }

    /// Looks again when activeDeadlineSeconds runs out.
    fn recheck_deadline(&self, key: &str, job: &Job) {
        let (Some(queue), Some(seconds)) = (
            &self.queue,
            job.spec.as_ref().and_then(|s| s.active_deadline_seconds),
        ) else {
            return;
        };
        let start = job
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map_or_else(Utc::now, |t| t.0);
        let left = start + ChronoDuration::seconds(seconds) - Utc::now();
        let wait = left.to_std().unwrap_or_default() + std::time::Duration::from_millis(500);
        queue.add_after(key.to_string(), wait);
    }
}

fn job_key(job: &Job) -> String {
    capstan_client::informer::key_from(
        job.metadata.namespace.as_deref(),
        job.metadata.name.as_deref().unwrap_or_default(),
    )
}

/// Per job key, the resourceVersion of the status last written.
#[derive(Default)]
pub struct WrittenVersions(parking_lot::Mutex<HashMap<String, u64>>);

fn version(job: &Job) -> Option<u64> {
    job.metadata.resource_version.as_deref()?.parse().ok()
}

impl WrittenVersions {
    fn remember(&self, key: String, written: &Job) {
        if let Some(v) = version(written) {
            self.0.lock().insert(key, v);
        }
    }

    /// True while `cached` is older than this controller's last write;
    /// forgets the write once the cache has it.
    fn ahead_of(&self, key: &str, cached: &Job) -> bool {
        let mut written = self.0.lock();
        let Some(&ours) = written.get(key) else {
            return false;
        };
        if version(cached).is_some_and(|c| c < ours) {
            return true;
        }
        written.remove(key);
        false
    }
}
