use capstan_client::testing::FakeApi;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::chrono::{Datelike, Duration as ChronoDuration, TimeZone, Utc};
use serde_json::{json, Value};

use super::history::SCHEDULED_TIMESTAMP;
use super::sync::Syncer;
use crate::context::Reconciler;
use crate::ownership::{self, BY_CONTROLLER};
use crate::testkit::{context, eventually, object};

/// A CronJob every minute, made `age_minutes` ago, with `spec` merged in.
fn cronjob(age_minutes: i64, spec: Value) -> CronJob {
    let created = (Utc::now() - ChronoDuration::minutes(age_minutes)).to_rfc3339();
    let mut value = json!({
        "metadata": {"name": "tick", "namespace": "default", "uid": "cj-uid", "creationTimestamp": created},
        "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}},
    });
    for (k, v) in spec.as_object().unwrap() {
        value["spec"][k] = v.clone();
    }
    object(value)
}

async fn setup(fake: &FakeApi) -> (Syncer, std::sync::Arc<crate::context::Context>) {
    let ctx = context(fake);
    let cronjobs = ctx.informers.get::<CronJob>();
    let jobs = ctx.informers.get::<Job>();
    jobs.add_index(BY_CONTROLLER, ownership::by_controller_uid::<Job>);
    ctx.informers.wait_synced().await;
    let client = fake.client();
    let syncer = Syncer {
        cronjobs: cronjobs.store(),
        jobs: jobs.store(),
        recorder: ctx.recorder(&client, super::ACCOUNT),
        client,
        queue: None,
    };
    (syncer, ctx)
}

async fn cached(syncer: &Syncer, fake: &FakeApi) {
    eventually("the caches", || async {
        let jobs = fake.list::<Job>().len() == syncer.jobs.len();
        let cj: Option<CronJob> = fake.get(Some("default"), "tick");
        let same = cj.is_some_and(|c| {
            syncer
                .cronjobs
                .get(Some("default"), "tick")
                .map(|s| s.metadata.resource_version.clone())
                == Some(c.metadata.resource_version)
        });
        (jobs && same).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_due_start_makes_one_job_named_for_its_minute() {
    let fake = FakeApi::new();
    let (syncer, _ctx) = setup(&fake).await;
    // Yearly, made two years ago: two starts missed, the latest runs
    // (and no start falls due while the test runs).
    fake.insert(&cronjob(
        2 * 366 * 24 * 60,
        json!({"schedule": "0 0 1 1 *"}),
    ));
    cached(&syncer, &fake).await;
    syncer.sync("default/tick").await.unwrap();
    let jobs = fake.list::<Job>();
    assert_eq!(jobs.len(), 1, "only the latest missed start runs");
    let job = &jobs[0];
    let year = Utc::now().year();
    let due = Utc.with_ymd_and_hms(year, 1, 1, 0, 0, 0).unwrap();
    let name = format!("tick-{}", due.timestamp() / 60);
    assert_eq!(job.metadata.name.as_deref(), Some(name.as_str()));
    assert!(job
        .metadata
        .annotations
        .as_ref()
        .unwrap()
        .contains_key(SCHEDULED_TIMESTAMP));
    assert_eq!(
        job.metadata.owner_references.as_ref().unwrap()[0].kind,
        "CronJob"
    );
    let status = fake
        .get::<CronJob>(Some("default"), "tick")
        .unwrap()
        .status
        .unwrap();
    assert_eq!(status.active.unwrap().len(), 1);
    assert!(status.last_schedule_time.is_some());
    // The same start again: nothing more.
    cached(&syncer, &fake).await;
    syncer.sync("default/tick").await.unwrap();
    assert_eq!(fake.list::<Job>().len(), 1);
}

#[tokio::test]
async fn forbid_waits_for_the_running_job_and_replace_replaces_it() {
    let fake = FakeApi::new();
    let (syncer, _ctx) = setup(&fake).await;
    let running: Job = object(
        json!({"metadata": {"name": "tick-1", "namespace": "default", "uid": "j1",
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "tick", "uid": "cj-uid", "controller": true}]},
        "spec": {"template": {"spec": {"containers": []}}}}),
    );
    fake.insert(&running);
    fake.insert(&cronjob(3, json!({"concurrencyPolicy": "Forbid"})));
    cached(&syncer, &fake).await;
    syncer.sync("default/tick").await.unwrap();
    assert_eq!(
        fake.list::<Job>().len(),
        1,
        "Forbid starts nothing while one runs"
    );
    let mut replace: CronJob = fake.get(Some("default"), "tick").unwrap();
    replace.spec.as_mut().unwrap().concurrency_policy = Some("Replace".into());
    fake.insert(&replace);
    cached(&syncer, &fake).await;
    syncer.sync("default/tick").await.unwrap();
    let names: Vec<String> = fake
        .list::<Job>()
        .into_iter()
        .filter(|j| j.metadata.deletion_timestamp.is_none())
        .filter_map(|j| j.metadata.name)
        .collect();
    assert_eq!(names.len(), 1);
    assert_ne!(names[0], "tick-1", "the running job was replaced");
}

#[tokio::test]
async fn suspended_starts_nothing_and_finished_jobs_past_the_limits_go() {
    let fake = FakeApi::new();
    let (syncer, _ctx) = setup(&fake).await;
    fake.insert(&cronjob(3, json!({"suspend": true})));
    cached(&syncer, &fake).await;
    syncer.sync("default/tick").await.unwrap();
    assert!(fake.list::<Job>().is_empty(), "suspended");
    // Finished jobs past the failed-history limit (1) go, oldest first.
    for (i, outcome) in ["Failed", "Failed", "Complete"].iter().enumerate() {
        let job: Job = object(
            json!({"metadata": {"name": format!("tick-{i}"), "namespace": "default",
            "uid": format!("j{i}"), "creationTimestamp": format!("2026-01-01T00:0{i}:00Z"),
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "tick", "uid": "cj-uid", "controller": true}]},
            "spec": {"template": {"spec": {"containers": []}}},
            "status": {"conditions": [{"type": outcome, "status": "True"}]}}),
        );
        fake.insert(&job);
    }
    cached(&syncer, &fake).await;
    syncer.sync("default/tick").await.unwrap();
    let left: Vec<String> = fake
        .list::<Job>()
        .into_iter()
        .filter(|j| j.metadata.deletion_timestamp.is_none())
        .filter_map(|j| j.metadata.name)
        .collect();
    assert_eq!(left, ["tick-1", "tick-2"]);
}

#[tokio::test]
async fn a_start_missed_past_the_deadline_is_skipped() {
    let fake = FakeApi::new();
    let (syncer, _ctx) = setup(&fake).await;
    let yearly = json!({"schedule": "0 0 1 1 *", "startingDeadlineSeconds": 60});
    fake.insert(&cronjob(2 * 366 * 24 * 60, yearly));
    cached(&syncer, &fake).await;
    syncer.sync("default/tick").await.unwrap();
    assert!(fake.list::<Job>().is_empty());
}
