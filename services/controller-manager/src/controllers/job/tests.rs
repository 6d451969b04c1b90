use capstan_client::informer::Informer;
use capstan_client::testing::FakeApi;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{json, Value};

use super::sync::Syncer;
use super::tracking::{has_finalizer, TRACKING_FINALIZER};
use crate::context::Reconciler;
use crate::expectations::Expectations;
use crate::pod_control::PodControl;
use crate::testkit::{context, eventually, object};

fn job(spec: Value) -> Job {
    let mut value = json!({
        "metadata": {"name": "pi", "namespace": "default", "uid": "job-uid"},
        "spec": {"template": {"metadata": {"labels": {"job-name": "pi"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "pi", "image": "perl"}]}}},
    });
    for (k, v) in spec.as_object().unwrap() {
        value["spec"][k] = v.clone();
    }
    object(value)
}

async fn syncer(
    fake: &FakeApi,
) -> (
    Syncer,
    Informer<Job>,
    Informer<Pod>,
    std::sync::Arc<crate::context::Context>,
) {
    let ctx = context(fake);
    let jobs = ctx.informers.get::<Job>();
    let pods = crate::controllers::replicaset::index_pods(&ctx);
    ctx.informers.wait_synced().await;
    let client = fake.client();
    let syncer = Syncer {
        jobs: jobs.store(),
        pods: pods.store(),
        expectations: Expectations::new(),
        control: PodControl::new(client.clone(), ctx.recorder(&client, super::ACCOUNT)),
        queue: None,
        written: Default::default(),
    };
    (syncer, jobs, pods, ctx)
}

/// Waits until the caches hold what the API holds.
async fn caught_up(fake: &FakeApi, jobs: &Informer<Job>, pods: &Informer<Pod>) {
    eventually("the caches", || async {
        let version = |m: &kube::api::ObjectMeta| m.resource_version.clone();
        let same_jobs = fake.list::<Job>().iter().all(|j| {
            jobs.store()
                .get(Some("default"), j.metadata.name.as_deref().unwrap())
                .map(|c| version(&c.metadata))
                == Some(version(&j.metadata))
        });
        let listed = fake.list::<Pod>();
        let same_pods = listed.len() == pods.store().len()
            && listed.iter().all(|p| {
                pods.store()
                    .get(Some("default"), p.metadata.name.as_deref().unwrap())
                    .map(|c| version(&c.metadata))
                    == Some(version(&p.metadata))
            });
        (same_jobs && same_pods).then_some(())
    })
    .await;
}

/// Marks every pod of the fake finished with `phase` (and exit code).
fn finish_all(fake: &FakeApi, phase: &str, code: i32) {
    for mut pod in fake.list::<Pod>() {
        if pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|p| p != "Pending")
        {
            continue;
        }
        pod.status = Some(object(
            json!({"phase": phase, "containerStatuses": [{"name": "pi", "image": "perl",
            "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": code, "finishedAt": "2020-01-01T00:00:00Z"}}}]}),
        ));
        fake.insert(&pod);
    }
}

fn condition(fake: &FakeApi, kind: &str) -> Option<(String, String)> {
    let job: Job = fake.get(Some("default"), "pi")?;
    let conditions = job.status?.conditions?;
    let c = conditions
        .into_iter()
        .find(|c| c.type_ == kind && c.status == "True")?;
    Some((c.reason.unwrap_or_default(), c.message.unwrap_or_default()))
}

#[tokio::test]
async fn a_job_runs_its_completions_and_counts_each_pod_once() {
    let fake = FakeApi::new();
    let (syncer, jobs, pods, _ctx) = syncer(&fake).await;
    fake.insert(&job(
        json!({"completions": 2, "parallelism": 2, "backoffLimit": 6}),
    ));
    caught_up(&fake, &jobs, &pods).await;
    syncer.sync("default/pi").await.unwrap();
    let made = fake.list::<Pod>();
    assert_eq!(made.len(), 2);
    assert!(made.iter().all(has_finalizer));
    finish_all(&fake, "Succeeded", 0);
    caught_up(&fake, &jobs, &pods).await;
    syncer.expectations.forget("default/pi");
    syncer.sync("default/pi").await.unwrap();
    // Counted once, finalizers released, and the job complete.
    assert!(fake.list::<Pod>().iter().all(|p| !has_finalizer(p)));
    let status = fake
        .get::<Job>(Some("default"), "pi")
        .unwrap()
        .status
        .unwrap();
    assert_eq!(status.succeeded, Some(2));
    assert!(status
        .uncounted_terminated_pods
        .is_none_or(|u| u.succeeded.unwrap_or_default().is_empty()));
    assert_eq!(
        condition(&fake, "SuccessCriteriaMet").unwrap().0,
        "CompletionsReached"
    );
    assert_eq!(
        condition(&fake, "Complete").unwrap().0,
        "CompletionsReached"
    );
    // Syncing again changes nothing.
    caught_up(&fake, &jobs, &pods).await;
    syncer.sync("default/pi").await.unwrap();
    assert_eq!(
        fake.get::<Job>(Some("default"), "pi")
            .unwrap()
            .status
            .unwrap()
            .succeeded,
        Some(2)
    );
}

#[tokio::test]
async fn failures_past_the_backoff_limit_fail_the_job() {
    let fake = FakeApi::new();
    let (syncer, jobs, pods, _ctx) = syncer(&fake).await;
    fake.insert(&job(
        json!({"completions": 1, "parallelism": 1, "backoffLimit": 0}),
    ));
    caught_up(&fake, &jobs, &pods).await;
    syncer.sync("default/pi").await.unwrap();
    finish_all(&fake, "Failed", 1);
    caught_up(&fake, &jobs, &pods).await;
    syncer.expectations.forget("default/pi");
    syncer.sync("default/pi").await.unwrap();
    let failed = condition(&fake, "Failed").expect("the job failed");
    assert_eq!(
        failed,
        (
            "BackoffLimitExceeded".into(),
            "Job has reached the specified backoff limit".into()
        )
    );
    assert_eq!(
        fake.list::<Pod>().len(),
        1,
        "no replacement after the limit"
    );
}

#[tokio::test]
async fn an_indexed_job_gives_each_pod_its_index_and_fails_on_a_failed_index() {
    let fake = FakeApi::new();
    let (syncer, jobs, pods, _ctx) = syncer(&fake).await;
    fake.insert(&job(
        json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed",
        "backoffLimitPerIndex": 0, "backoffLimit": 100}),
    ));
    caught_up(&fake, &jobs, &pods).await;
    syncer.sync("default/pi").await.unwrap();
    let made = fake.list::<Pod>();
    assert_eq!(made.len(), 3);
    for pod in &made {
        let index = pod.metadata.annotations.as_ref().unwrap()[super::indexes::INDEX].clone();
        assert_eq!(
            pod.metadata.labels.as_ref().unwrap()[super::indexes::INDEX],
            index
        );
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(
            spec.hostname.as_deref(),
            Some(format!("pi-{index}").as_str())
        );
        let env = spec.containers[0].env.as_ref().unwrap();
        assert!(env.iter().any(
            |e| e.name == "JOB_COMPLETION_INDEX" && e.value.as_deref() == Some(index.as_str())
        ));
        assert!(pod
            .metadata
            .generate_name
            .as_deref()
            .unwrap()
            .starts_with(&format!("pi-{index}-")));
        assert!(pod
            .metadata
            .finalizers
            .as_ref()
            .unwrap()
            .contains(&TRACKING_FINALIZER.to_string()));
    }
    // Index 1 fails, the others succeed.
    for mut pod in fake.list::<Pod>() {
        let failing = pod.metadata.annotations.as_ref().unwrap()[super::indexes::INDEX] == "1";
        let (phase, code) = if failing {
            ("Failed", 2)
        } else {
            ("Succeeded", 0)
        };
        pod.status = Some(object(
            json!({"phase": phase, "containerStatuses": [{"name": "pi", "image": "perl",
            "imageID": "", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": code}}}]}),
        ));
        fake.insert(&pod);
    }
    caught_up(&fake, &jobs, &pods).await;
    syncer.expectations.forget("default/pi");
    syncer.sync("default/pi").await.unwrap();
    let status = fake
        .get::<Job>(Some("default"), "pi")
        .unwrap()
        .status
        .unwrap();
    assert_eq!(status.completed_indexes.as_deref(), Some("0,2"));
    assert_eq!(status.failed_indexes.as_deref(), Some("1"));
    assert_eq!(condition(&fake, "Failed").unwrap().0, "FailedIndexes");
}

#[tokio::test]
async fn a_pod_deleted_before_it_finished_counts_as_failed_and_is_replaced() {
    let fake = FakeApi::new();
    let (syncer, jobs, pods, _ctx) = syncer(&fake).await;
    fake.insert(&job(
        json!({"completions": 1, "parallelism": 1, "backoffLimit": 3}),
    ));
    caught_up(&fake, &jobs, &pods).await;
    syncer.sync("default/pi").await.unwrap();
    let first = fake.list::<Pod>().remove(0);
    let name = first.metadata.name.clone().unwrap();
    let api: kube::Api<Pod> = kube::Api::namespaced(fake.client(), "default");
    api.delete(&name, &Default::default()).await.unwrap();
    caught_up(&fake, &jobs, &pods).await;
    syncer.expectations.forget("default/pi");
    syncer.sync("default/pi").await.unwrap();
    // Released (so it can go), counted once as failed, and replaced.
    let left: Vec<Pod> = fake.list::<Pod>();
    let deleted = fake.get::<Pod>(Some("default"), &name);
    assert!(deleted.is_none_or(|p| !has_finalizer(&p)));
    let status = fake
        .get::<Job>(Some("default"), "pi")
        .unwrap()
        .status
        .unwrap();
    assert_eq!(status.failed, Some(1));
    assert_eq!(status.active, Some(1));
    assert!(left
        .iter()
        .any(|p| p.metadata.name.as_deref() != Some(name.as_str())));
}

#[tokio::test]
async fn a_pod_whose_job_is_gone_is_let_go() {
    let fake = FakeApi::new();
    let (syncer, jobs, pods, _ctx) = syncer(&fake).await;
    let orphan: Pod = object(
        json!({"metadata": {"name": "pi-x", "namespace": "default", "uid": "p1",
        "finalizers": [TRACKING_FINALIZER],
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "pi", "uid": "gone",
            "controller": true}]},
        "spec": {"containers": [{"name": "pi", "image": "perl"}]}}),
    );
    fake.insert(&orphan);
    caught_up(&fake, &jobs, &pods).await;
    syncer.sync("pod:default/pi-x").await.unwrap();
    let pod: Pod = fake.get(Some("default"), "pi-x").unwrap();
    assert!(!has_finalizer(&pod));
}

#[tokio::test]
async fn a_pod_of_a_live_job_keeps_its_finalizer() {
    let fake = FakeApi::new();
    let (syncer, jobs, pods, _ctx) = syncer(&fake).await;
    fake.insert(&job(json!({"completions": 1})));
    caught_up(&fake, &jobs, &pods).await;
    syncer.sync("default/pi").await.unwrap();
    let pod = fake.list::<Pod>().remove(0);
    let key = format!("pod:default/{}", pod.metadata.name.as_deref().unwrap());
    syncer.sync(&key).await.unwrap();
    assert!(fake.list::<Pod>().iter().all(has_finalizer));
}

#[tokio::test]
async fn suspending_deletes_the_running_pods_and_says_so() {
    let fake = FakeApi::new();
    let (syncer, jobs, pods, _ctx) = syncer(&fake).await;
    fake.insert(&job(json!({"completions": 2, "parallelism": 2})));
    caught_up(&fake, &jobs, &pods).await;
    syncer.sync("default/pi").await.unwrap();
    assert_eq!(fake.list::<Pod>().len(), 2);
    let mut suspended: Job = fake.get(Some("default"), "pi").unwrap();
    suspended.spec.as_mut().unwrap().suspend = Some(true);
    fake.insert(&suspended);
    caught_up(&fake, &jobs, &pods).await;
    syncer.sync("default/pi").await.unwrap();
    let (reason, _) = condition(&fake, "Suspended").expect("Suspended");
    assert_eq!(reason, "JobSuspended");
    let status = fake
        .get::<Job>(Some("default"), "pi")
        .unwrap()
        .status
        .unwrap();
    assert_eq!(status.active, None, "no active pods: {status:?}");
    assert!(fake
        .list::<Pod>()
        .iter()
        .all(|p| p.metadata.deletion_timestamp.is_some()));
}
