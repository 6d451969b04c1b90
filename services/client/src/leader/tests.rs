//! The election's timing, on tokio's paused clock against the in-memory
//! API: who leads, when another takes over, when a leader gives up.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;

use super::*;
use crate::testing::{ApiError, FakeApi, Verb};

fn elector(fake: &FakeApi, identity: &str) -> LeaderElector {
    let mut config = LeaderElectionConfig::new("kube-system", "kube-scheduler");
    config.identity = identity.to_string();
    LeaderElector::new(fake.client(), config)
}

fn lease(fake: &FakeApi) -> Lease {
    fake.get::<Lease>(Some("kube-system"), "kube-scheduler")
        .expect("the lease exists")
}

fn holder(fake: &FakeApi) -> (String, i32) {
    let spec = lease(fake).spec.unwrap();
    (
        spec.holder_identity.unwrap_or_default(),
        spec.lease_transitions.unwrap_or(0),
    )
}

#[tokio::test(start_paused = true)]
async fn the_first_candidate_creates_the_lease_with_kubes_timings() {
    let fake = FakeApi::new();
    let leadership = elector(&fake, "a").acquire().await;
    assert!(leadership.is_leading());
    let spec = lease(&fake).spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("a"));
    assert_eq!(spec.lease_duration_seconds, Some(15));
    assert_eq!(spec.lease_transitions, Some(0));
    // Renewed every retry period, from its own last write (no reads).
    let renewed_before = spec.renew_time.unwrap().0;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(lease(&fake).spec.unwrap().renew_time.unwrap().0 > renewed_before);
    assert_eq!(fake.calls_to(Verb::Update, "leases").len(), 2);
    assert_eq!(fake.calls_to(Verb::Get, "leases").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn another_takes_over_a_lease_duration_after_the_leader_stops_renewing() {
    let fake = FakeApi::new();
    let first = elector(&fake, "a").acquire().await;
    let second = tokio::spawn(elector(&fake, "b").acquire());
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(!second.is_finished(), "b took a lease a kept renewing");
    assert_eq!(holder(&fake), ("a".to_string(), 0));

    // a dies without releasing.
    let stopped = Instant::now();
    drop(first);
    let taken = second.await.unwrap();
    let waited = stopped.elapsed();
    assert!(taken.is_leading());
    assert_eq!(holder(&fake), ("b".to_string(), 1));
    // b saw a's last renewal at most 2 s before a stopped and at most one
    // jittered retry (4.4 s) after; it takes over 15 s after that, at its
    // next try.
    assert!(
        waited >= Duration::from_secs(13),
        "took over after {waited:?}"
    );
    assert!(
        waited <= Duration::from_millis(23_800),
        "took over after {waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_released_lease_is_taken_at_the_next_try() {
    let fake = FakeApi::new();
    let first = elector(&fake, "a").acquire().await;
    let second = tokio::spawn(elector(&fake, "b").acquire());
    tokio::time::sleep(Duration::from_secs(10)).await;
    let released = Instant::now();
    first.release().await;
    let spec = lease(&fake).spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some(""));
    assert_eq!(spec.lease_duration_seconds, Some(1));
    let _taken = second.await.unwrap();
    assert!(
        released.elapsed() <= Duration::from_millis(4_400),
        "{:?}",
        released.elapsed()
    );
    assert_eq!(holder(&fake), ("b".to_string(), 1));
}

#[tokio::test(start_paused = true)]
async fn a_leader_that_cannot_renew_stops_before_anyone_could_take_over() {
    let fake = FakeApi::new();
    let leadership = elector(&fake, "a").acquire().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let failing = Instant::now();
    let unavailable = ApiError::new(503, "ServiceUnavailable", "the API is down");
    fake.fail_next(Verb::Update, "leases", 1000, unavailable.clone());
    fake.fail_next(Verb::Get, "leases", 1000, unavailable);
    leadership.lost().await;
    let after = failing.elapsed();
    assert!(!leadership.is_leading());
    // The last renewal was at most one retry period before the failures;
    // the leader gives up a renew deadline after its next attempt, which
    // is before a lease duration (15 s) has passed.
    assert!(after >= Duration::from_secs(8), "gave up after {after:?}");
    assert!(after < Duration::from_secs(13), "gave up after {after:?}");
}

#[tokio::test(start_paused = true)]
async fn two_candidates_racing_for_a_new_lease_only_one_wins() {
    let fake = FakeApi::new();
    let a = tokio::spawn(elector(&fake, "a").acquire());
    let b = tokio::spawn(elector(&fake, "b").acquire());
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(a.is_finished() != b.is_finished(), "exactly one leads");
    let (winner, _) = holder(&fake);
    let loser = if winner == "a" { b } else { a };
    assert!(!loser.is_finished());
    loser.abort();
}
