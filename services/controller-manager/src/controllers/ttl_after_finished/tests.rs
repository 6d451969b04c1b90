use capstan_client::testing::FakeApi;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::chrono::{Duration as ChronoDuration, Utc};
use serde_json::json;

use super::sync::{time_left, Syncer};
use crate::context::Reconciler;
use crate::testkit::{context, eventually, object};

fn job(name: &str, ttl: Option<i32>, finished_ago: Option<i64>) -> Job {
    let conditions = finished_ago.map(|ago| {
        let at = (Utc::now() - ChronoDuration::seconds(ago)).to_rfc3339();
        json!([{"type": "Complete", "status": "True", "lastTransitionTime": at}])
    });
    object(json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"ttlSecondsAfterFinished": ttl, "template": {"spec": {"containers": []}}},
        "status": {"conditions": conditions},
    }))
}

#[test]
fn time_left_counts_from_the_finish() {
    let now = Utc::now();
    assert_eq!(time_left(&job("a", Some(100), None), now), None, "running");
    assert_eq!(time_left(&job("a", None, Some(500)), now), None, "no TTL");
    let left = time_left(&job("a", Some(100), Some(40)), now).unwrap();
    assert!((59..=60).contains(&left.as_secs()), "{left:?}");
    assert!(time_left(&job("a", Some(10), Some(40)), now)
        .unwrap()
        .is_zero());
}

#[tokio::test]
async fn expired_jobs_are_deleted_and_others_kept() {
    let fake = FakeApi::new();
    let ctx = context(&fake);
    let jobs = ctx.informers.get::<Job>();
    ctx.informers.wait_synced().await;
    for j in [
        job("expired", Some(0), Some(5)),
        job("young", Some(3600), Some(5)),
        job("running", Some(0), None),
        job("kept", None, Some(5)),
    ] {
        fake.insert(&j);
    }
    eventually("the cache", || async {
        (jobs.store().len() == 4).then_some(())
    })
    .await;
    let syncer = Syncer {
        jobs: jobs.store(),
        client: fake.client(),
        queue: None,
    };
    for name in ["expired", "young", "running", "kept"] {
        syncer.sync(&format!("default/{name}")).await.unwrap();
    }
    let left: Vec<String> = fake
        .list::<Job>()
        .iter()
        .filter(|j| j.metadata.deletion_timestamp.is_none())
        .filter_map(|j| j.metadata.name.clone())
        .collect();
    assert_eq!(left, ["kept", "running", "young"]);
}

#[tokio::test]
async fn a_ttl_lengthened_since_the_cache_saw_it_keeps_the_job() {
    let fake = FakeApi::new();
    let ctx = context(&fake);
    let jobs = ctx.informers.get::<Job>();
    ctx.informers.wait_synced().await;
    fake.insert(&job("j", Some(0), Some(5)));
    eventually("the cache", || async {
        (jobs.store().len() == 1).then_some(())
    })
    .await;
    let syncer = Syncer {
        jobs: jobs.store(),
        client: fake.client(),
        queue: None,
    };
    // The API has a longer TTL than the cached copy.
    let mut longer: Job = fake.get(Some("default"), "j").unwrap();
    longer.spec.as_mut().unwrap().ttl_seconds_after_finished = Some(3600);
    fake.insert(&longer);
    syncer.sync("default/j").await.unwrap();
    assert!(fake.get::<Job>(Some("default"), "j").is_some());
}
