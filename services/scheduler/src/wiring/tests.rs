//! The wiring against capstan-client's in-memory API: informers, leader
//! election, bindings, status patches and Events, all through kube-rs.

use std::time::{Duration, Instant};

use capstan_client::testing::{FakeApi, Verb};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Pod};

use crate::config::SchedulerConfig;
use crate::model::testing::{NodeBuilder, PodBuilder};

async fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn node_of(fake: &FakeApi, name: &str) -> Option<String> {
    fake.get::<Pod>(Some("default"), name)?.spec?.node_name
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_through_the_api_with_leader_election() {
    let fake = FakeApi::new();
    fake.insert(&NodeBuilder::new("n1").capacity("2", "8Gi", 110).build());
    for name in ["a", "b", "c"] {
        fake.insert(&PodBuilder::new(name).req("1", "").build());
    }
    let config = SchedulerConfig::default();
    assert!(config.leader_election.leader_elect, "kube's default");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(super::run(config, fake.client(), None, None, async move {
        let _ = stopped.await;
    }));
    wait_until("two pods bound", || {
        ["a", "b", "c"]
            .iter()
            .filter(|p| node_of(&fake, p).is_some())
            .count()
            == 2
    })
    .await;
    let pending = ["a", "b", "c"]
        .into_iter()
        .find(|p| node_of(&fake, p).is_none())
        .unwrap();
    wait_until("the pending pod's condition", || {
        fake.get::<Pod>(Some("default"), pending)
            .and_then(|p| p.status?.conditions)
            .is_some_and(|c| {
                c.iter().any(|c| {
                    c.type_ == "PodScheduled" && c.reason.as_deref() == Some("Unschedulable")
                })
            })
    })
    .await;
    let pod = fake.get::<Pod>(Some("default"), pending).unwrap();
    let condition = pod
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "PodScheduled")
        .unwrap();
    assert_eq!(condition.status, "False");
    assert_eq!(
        condition.message.as_deref(),
        Some("0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")
    );
    wait_until("a FailedScheduling event", || {
        fake.list::<Event>()
            .iter()
            .any(|e| e.reason.as_deref() == Some("FailedScheduling"))
    })
    .await;
    wait_until("Scheduled events", || {
        fake.list::<Event>()
            .iter()
            .filter(|e| e.reason.as_deref() == Some("Scheduled"))
            .count()
            == 2
    })
    .await;
    assert_eq!(fake.calls_to(Verb::Create, "pods/binding").len(), 2);
    let lease = fake
        .get::<Lease>(Some("kube-system"), "kube-scheduler")
        .expect("the Lease");
    assert!(lease
        .spec
        .unwrap()
        .holder_identity
        .is_some_and(|h| !h.is_empty()));
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_of_other_schedulers_are_not_touched() {
    let fake = FakeApi::new();
    fake.insert(&NodeBuilder::new("n1").build());
    fake.insert(
        &PodBuilder::new("theirs")
            .scheduler_name("someone-else")
            .build(),
    );
    fake.insert(&PodBuilder::new("ours").build());
    let mut config = SchedulerConfig::default();
    config.leader_election.leader_elect = false;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(super::run(config, fake.client(), None, None, async move {
        let _ = stopped.await;
    }));
    wait_until("ours is bound", || node_of(&fake, "ours").is_some()).await;
    assert!(node_of(&fake, "theirs").is_none());
    let touched = fake
        .calls()
        .into_iter()
        .filter(|c| c.name.as_deref() == Some("theirs") && c.verb != Verb::Get)
        .count();
    assert_eq!(touched, 0);
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
}

/// As embedded in `capstan`: the pod informer is lent by the host process,
/// and outlives a run that lost its Lease; the next run schedules with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_with_a_lent_pod_informer_across_runs() {
    let fake = FakeApi::new();
    fake.insert(&NodeBuilder::new("n1").build());
    fake.insert(&PodBuilder::new("first").build());
    let host = capstan_client::informer::Informers::new(fake.client());
    let pods = host.get::<Pod>();
    for (index, name) in ["first", "second"].into_iter().enumerate() {
        if index == 1 {
            fake.insert(&PodBuilder::new(name).build());
        }
        let mut config = SchedulerConfig::default();
        config.leader_election.leader_elect = false;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(super::run(
            config,
            fake.client(),
            None,
            Some(pods.clone()),
            async move {
                let _ = stopped.await;
            },
        ));
        wait_until("the pod is bound", || node_of(&fake, name).is_some()).await;
        stop.send(()).unwrap();
        running.await.unwrap().unwrap();
    }
    // Only the host listed pods; each run listed nodes for itself.
    assert_eq!(fake.calls_to(Verb::List, "pods").len(), 1);
    assert_eq!(fake.calls_to(Verb::List, "nodes").len(), 2);
    assert_eq!(fake.calls_to(Verb::Create, "pods/binding").len(), 2);
}
