//! One CronJob's reconcile, kube's `syncCronJob`: bring `status.active`
//! in line with its Jobs (finished ones leave it with `SawCompletedJob`),
//! delete finished Jobs past the history limits, then, unless suspended,
//! start the Job due now if it is not too late and the concurrency policy
//! allows, and look again at the next start time.

use std::sync::Arc;
use std::time::Duration;

use capstan_client::events::{EventRecorder, EventType};
use capstan_client::informer::Store;
use capstan_client::queue::WorkQueue;
use k8s_openapi::api::batch::v1::{CronJob, CronJobStatus, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::chrono::{DateTime, Utc};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams, PropagationPolicy};

use super::history::{self, SCHEDULED_TIMESTAMP};
use super::schedule::{Schedule, Unusable, MAX_MISSED};
use crate::context::Reconciler;
use crate::error::{Error, Result};
use crate::ownership::{controller_ref, BY_CONTROLLER};

pub struct Syncer {
    pub cronjobs: Store<CronJob>,
    pub jobs: Store<Job>,
    pub client: kube::Client,
    pub recorder: EventRecorder,
    /// For the look again at the next start time (none in unit tests).
    pub queue: Option<WorkQueue<String>>,
}

impl Reconciler for Syncer {
    async fn sync(&self, key: &str) -> Result<()> {
        let Some(cached) = self.cronjobs.get_by_key(key) else {
            return Ok(());
        };
        if cached.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let cronjob = cached.as_ref().clone();
        let uid = cronjob.metadata.uid.clone().unwrap_or_default();
        let jobs = self.jobs.by_index(BY_CONTROLLER, &uid);
        let mut status = cronjob.status.clone().unwrap_or_default();
        self.track_active(&cronjob, &jobs, &mut status);
        self.delete_jobs(&cronjob, &history::past_limits(&cronjob, &jobs))
            .await?;
        let suspended = cronjob
            .spec
            .as_ref()
            .and_then(|s| s.suspend)
            .unwrap_or(false);
        if !suspended {
            self.start_due(key, &cronjob, &jobs, &mut status).await?;
        }
        self.write_status(&cronjob, status).await
    }
}

impl Syncer {
    /// Finished Jobs leave `active`; Jobs gone from the cache too.
    fn track_active(&self, cronjob: &CronJob, jobs: &[Arc<Job>], status: &mut CronJobStatus) {
        let mut active = status.active.take().unwrap_or_default();
        active.retain(|r| {
            let job = jobs.iter().find(|j| j.metadata.uid == r.uid);
            let Some(job) = job else { return false };
            let Some(outcome) = history::finished(job) else {
                return true;
            };
            let name = job.metadata.name.as_deref().unwrap_or_default();
            let message = format!("Saw completed job: {name}, status: {outcome}");
            self.recorder
                .record(cronjob, EventType::Normal, "SawCompletedJob", message);
            if outcome == "Complete" {
                let done = job.status.as_ref().and_then(|s| s.completion_time.clone());
                let later = |t: &Time| {
                    status
                        .last_successful_time
                        .as_ref()
                        .is_none_or(|l| l.0 < t.0)
                };
                if let Some(done) = done.filter(later) {
                    status.last_successful_time = Some(done);
                }
            }
            false
        });
        for job in jobs.iter().filter(|j| history::finished(j).is_none()) {
            if !active.iter().any(|r| r.uid == job.metadata.uid) {
                active.push(reference(job));
            }
        }
        status.active = (!active.is_empty()).then_some(active);
    }

    /// Starts the Job due now, if any may start; queues the next look.
    async fn start_due(
        &self,
        key: &str,
        cronjob: &CronJob,
        jobs: &[Arc<Job>],
        status: &mut CronJobStatus,
    ) -> Result<()> {
        let spec = cronjob.spec.clone().unwrap_or_default();
        let schedule = match Schedule::parse(&spec.schedule, spec.time_zone.as_deref()) {
            Ok(schedule) => schedule,
            Err(unusable) => {
                let (reason, message) = match unusable {
                    Unusable::Schedule(m) => ("UnparseableSchedule", m),
                    Unusable::TimeZone(m) => ("UnknownTimeZone", m),
                };
                self.recorder
                    .record(cronjob, EventType::Warning, reason, message);
                return Ok(());
            }
        };
        let now = Utc::now();
        let since = status
            .last_schedule_time
            .as_ref()
            .or(cronjob.metadata.creation_timestamp.as_ref());
        let since = since.map_or(now, |t| t.0);
        let (due, missed) = schedule.due(since, now);
        self.look_again_at(key, schedule.next_after(now), now);
        let Some(due) = due else { return Ok(()) };
        if missed > MAX_MISSED {
            let message = "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew";
            self.recorder
                .record(cronjob, EventType::Warning, "TooManyMissedTimes", message);
        }
        if let Some(deadline) = spec.starting_deadline_seconds {
            if due + k8s_openapi::chrono::Duration::seconds(deadline) < now {
                let message = format!(
                    "Missed scheduled time to start a job: {}",
                    schedule.local_rfc3339(due)
                );
                self.recorder
                    .record(cronjob, EventType::Warning, "MissSchedule", message);
                return Ok(());
            }
        }
        let name = history::job_name(cronjob, due);
        if jobs
            .iter()
            .any(|j| j.metadata.name.as_deref() == Some(name.as_str()))
        {
            return Ok(());
        }
        let running = status.active.as_ref().map_or(0, Vec::len);
        match spec.concurrency_policy.as_deref() {
            Some("Forbid") if running > 0 => {
                let message = "Not starting job because prior execution is running and concurrency policy is Forbid";
                self.recorder
                    .record(cronjob, EventType::Normal, "JobAlreadyActive", message);
                return Ok(());
            }
            Some("Replace") if running > 0 => {
                let active: Vec<Arc<Job>> = jobs
                    .iter()
                    .filter(|j| history::finished(j).is_none())
                    .cloned()
                    .collect();
                self.delete_jobs(cronjob, &active).await?;
                status.active = None;
            }
            _ => {}
        }
        let Some(job) = self.create_job(cronjob, &schedule, &name, due).await? else {
            return Ok(());
        };
        status
            .active
            .get_or_insert_with(Vec::new)
            .push(reference(&job));
        status.last_schedule_time = Some(Time(due));
        Ok(())
    }

    fn look_again_at(&self, key: &str, next: Option<DateTime<Utc>>, now: DateTime<Utc>) {
        let (Some(queue), Some(next)) = (&self.queue, next) else {
            return;
        };
        let wait = (next - now).to_std().unwrap_or_default() + Duration::from_millis(100);
        queue.add_after(key.to_string(), wait);
    }

    /// Creates the Job for `due`; None if it already exists.
    async fn create_job(
        &self,
        cronjob: &CronJob,
        schedule: &Schedule,
        name: &str,
        due: DateTime<Utc>,
    ) -> Result<Option<Job>> {
        let template = cronjob
            .spec
            .as_ref()
            .map(|s| s.job_template.clone())
            .unwrap_or_default();
        let mut meta = template.metadata.unwrap_or_default();
        meta.annotations
            .get_or_insert_with(Default::default)
            .insert(SCHEDULED_TIMESTAMP.into(), schedule.local_rfc3339(due));
        let job = Job {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: cronjob.metadata.namespace.clone(),
                owner_references: Some(vec![controller_ref(cronjob)]),
                ..meta
            },
            spec: template.spec,
            status: None,
        };
        let namespace = cronjob.metadata.namespace.as_deref().unwrap_or_default();
        let api: Api<Job> = Api::namespaced(self.client.clone(), namespace);
        match api
            .create(&PostParams::default(), &job)
            .await
            .map_err(Error::from)
        {
            Ok(created) => {
                let message = format!("Created job {name}");
                self.recorder
                    .record(cronjob, EventType::Normal, "SuccessfulCreate", message);
                Ok(Some(created))
            }
            Err(err) if err.is_already_exists() => Ok(None),
            Err(err) => {
                let message = format!("Error creating job: {}", err.api_message());
                self.recorder
                    .record(cronjob, EventType::Warning, "FailedCreate", message);
                Err(err)
            }
        }
    }

    /// Deletes `jobs` with their pods in the background, as kube does.
    async fn delete_jobs(&self, cronjob: &CronJob, jobs: &[Arc<Job>]) -> Result<()> {
        let namespace = cronjob.metadata.namespace.as_deref().unwrap_or_default();
        let api: Api<Job> = Api::namespaced(self.client.clone(), namespace);
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..DeleteParams::default()
        };
        for job in jobs {
            let name = job.metadata.name.as_deref().unwrap_or_default();
            match api.delete(name, &params).await.map_err(Error::from) {
                Ok(_) => {
                    let message = format!("Deleted job {name}");
                    self.recorder
                        .record(cronjob, EventType::Normal, "SuccessfulDelete", message);
                }
                Err(err) if err.is_not_found() => {}
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }

    async fn write_status(&self, cronjob: &CronJob, status: CronJobStatus) -> Result<()> {
        if cronjob.status.clone().unwrap_or_default() == status {
            return Ok(());
        }
        let namespace = cronjob.metadata.namespace.as_deref().unwrap_or_default();
        let api: Api<CronJob> = Api::namespaced(self.client.clone(), namespace);
        crate::status::update_status(&api, cronjob, |c| c.status = Some(status.clone())).await?;
        Ok(())
    }
}

fn reference(job: &Job) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        name: job.metadata.name.clone(),
        namespace: job.metadata.namespace.clone(),
        uid: job.metadata.uid.clone(),
        resource_version: job.metadata.resource_version.clone(),
        ..ObjectReference::default()
    }
}
