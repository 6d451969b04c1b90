use std::collections::BTreeSet;

use super::clock::FakeClock;
use super::*;
use crate::framework::{ActionType, EventResource};
use crate::model::testing::PodBuilder;

/// Plugin "Fit" registers node additions; "Gate" is the PreEnqueue gate.
struct Hooks;

impl QueueHooks for Hooks {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        if pod
            .spec()
            .scheduling_gates
            .as_ref()
            .is_some_and(|g| !g.is_empty())
        {
            Status::unresolvable("gated").with_plugin("Gate")
        } else {
            Status::success()
        }
    }

    fn events_for(&self, _: &PodInfo, plugins: &BTreeSet<&'static str>) -> Vec<ClusterEvent> {
        let mut events = Vec::new();
        if plugins.contains("Fit") {
            events.push(ClusterEvent::new(EventResource::Node, ActionType::ADD));
        }
        events
    }
}

fn queue() -> (SchedulingQueue, FakeClock) {
    let clock = FakeClock::new();
    (
        SchedulingQueue::new(
            QueueSettings::default(),
            Arc::new(Hooks),
            Arc::new(clock.clone()),
        ),
        clock,
    )
}

fn rejected_by_fit(mut info: QueuedPodInfo) -> QueuedPodInfo {
    info.unschedulable_plugins.insert("Fit");
    info
}

const NODE_ADD: ClusterEvent = ClusterEvent::new(EventResource::Node, ActionType::ADD);
const NODE_LABEL: ClusterEvent =
    ClusterEvent::new(EventResource::Node, ActionType::UPDATE_NODE_LABEL);

#[test]
fn active_queue_orders_by_priority_then_arrival() {
    let (q, clock) = queue();
    q.add(PodBuilder::new("low").priority(1).info());
    clock.advance(Duration::from_millis(1));
    q.add(PodBuilder::new("high").priority(10).info());
    clock.advance(Duration::from_millis(1));
    q.add(PodBuilder::new("low2").priority(1).info());
    let order: Vec<String> = (0..3)
        .map(|_| q.try_pop().unwrap().pod.name().to_string())
        .collect();
    assert_eq!(order, vec!["high", "low", "low2"]);
    assert!(q.try_pop().is_none());
}

#[test]
fn backoff_doubles_from_one_second_to_ten() {
    let info = |attempts| {
        let mut info =
            QueuedPodInfo::new(PodBuilder::new("p").info(), std::time::Instant::now(), 1);
        info.attempts = attempts;
        info.backoff_duration(Duration::from_secs(1), Duration::from_secs(10))
    };
    let got: Vec<u64> = (1..=6).map(|a| info(a).as_secs()).collect();
    assert_eq!(got, vec![1, 2, 4, 8, 10, 10]);
}

#[test]
fn unschedulable_pods_wait_for_a_relevant_event_then_back_off() {
    let (q, clock) = queue();
    q.add(PodBuilder::new("p").info());
    let popped = q.try_pop().unwrap();
    q.add_unschedulable(rejected_by_fit(popped), false);
    assert_eq!(q.pending().unschedulable, 1);
    q.move_all(NODE_LABEL);
    assert_eq!(
        q.pending().unschedulable,
        1,
        "an event Fit did not register does not move it"
    );
    q.move_all(NODE_ADD);
    assert_eq!(q.pending().backoff, 1, "moved, but still backing off");
    assert!(q.try_pop().is_none());
    clock.advance(Duration::from_millis(1001));
    let again = q.try_pop().expect("backoff over");
    assert_eq!(again.attempts, 2);
}

#[test]
fn an_event_during_the_attempt_sends_the_pod_to_backoff() {
    let (q, _clock) = queue();
    q.add(PodBuilder::new("p").info());
    let popped = q.try_pop().unwrap();
    q.move_all(NODE_ADD);
    q.add_unschedulable(rejected_by_fit(popped), false);
    assert_eq!(
        q.pending(),
        PendingCounts {
            backoff: 1,
            ..Default::default()
        }
    );
}

#[test]
fn errors_back_off_without_waiting_for_events() {
    let (q, _clock) = queue();
    q.add(PodBuilder::new("p").info());
    let popped = q.try_pop().unwrap();
    q.add_unschedulable(popped, true);
    assert_eq!(q.pending().backoff, 1);
}

#[test]
fn unschedulable_pods_are_retried_after_five_minutes() {
    let (q, clock) = queue();
    q.add(PodBuilder::new("p").info());
    q.add_unschedulable(rejected_by_fit(q.try_pop().unwrap()), false);
    clock.advance(Duration::from_secs(299));
    assert!(q.try_pop().is_none());
    clock.advance(Duration::from_secs(31));
    assert!(q.try_pop().is_some(), "flushed by the periodic check");
}

#[test]
fn gated_pods_wait_until_their_gates_are_removed() {
    let (q, _clock) = queue();
    let gated = PodBuilder::new("p").gate("wait");
    let old = gated.clone().info();
    q.add(old.clone());
    assert_eq!(q.pending().gated, 1);
    q.flush_unschedulable();
    q.move_all(NODE_ADD);
    assert!(q.try_pop().is_none(), "gated pods move only when updated");
    q.update(&old, PodBuilder::new("p").info());
    assert_eq!(q.try_pop().unwrap().pod.name(), "p");
}

#[test]
fn a_spec_update_retries_an_unschedulable_pod() {
    let (q, clock) = queue();
    let old = PodBuilder::new("p").info();
    q.add(old.clone());
    q.add_unschedulable(rejected_by_fit(q.try_pop().unwrap()), false);
    q.update(&old, PodBuilder::new("p").label("x", "y").info());
    clock.advance(Duration::from_secs(2));
    assert!(q.try_pop().is_some());
}

#[test]
fn deleted_pods_leave_every_queue() {
    let (q, _clock) = queue();
    let pod = PodBuilder::new("p").info();
    q.add(pod.clone());
    q.nominate(pod.clone(), "n1");
    q.delete(&pod.key);
    assert_eq!(q.pending(), PendingCounts::default());
    assert!(q.nominated_node(&pod.key).is_none());
}

#[test]
fn a_bound_pod_moves_waiting_pods_whose_affinity_selects_it() {
    use k8s_openapi::api::core::v1::{Affinity, PodAffinity, PodAffinityTerm};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    struct AffinityHooks;
    impl QueueHooks for AffinityHooks {
        fn pre_enqueue(&self, _: &PodInfo) -> Status {
            Status::success()
        }
        fn events_for(&self, _: &PodInfo, _: &BTreeSet<&'static str>) -> Vec<ClusterEvent> {
            vec![ClusterEvent::new(
                EventResource::AssignedPod,
                ActionType::ADD,
            )]
        }
    }
    let q = SchedulingQueue::new(
        QueueSettings::default(),
        Arc::new(AffinityHooks),
        Arc::new(FakeClock::new()),
    );
    let term = PodAffinityTerm {
        label_selector: Some(LabelSelector {
            match_labels: Some([("app".to_string(), "db".to_string())].into()),
            match_expressions: None,
        }),
        topology_key: "zone".into(),
        ..Default::default()
    };
    let affinity = Affinity {
        pod_affinity: Some(PodAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![term]),
            ..Default::default()
        }),
        ..Default::default()
    };
    q.add(PodBuilder::new("web").affinity(affinity).info());
    let mut popped = q.try_pop().unwrap();
    popped.unschedulable_plugins.insert("InterPodAffinity");
    q.add_unschedulable(popped, false);
    q.assigned_pod_added(
        &PodBuilder::new("other")
            .label("app", "cache")
            .node("n1")
            .info(),
    );
    assert_eq!(q.pending().unschedulable, 1);
    q.assigned_pod_added(&PodBuilder::new("db").label("app", "db").node("n1").info());
    assert_eq!(q.pending().unschedulable, 0);
}

#[test]
fn pop_waits_and_close_releases_it() {
    let (q, _clock) = queue();
    let q = Arc::new(q);
    let waiter = {
        let q = q.clone();
        std::thread::spawn(move || q.pop().map(|p| p.pod.name().to_string()))
    };
    std::thread::sleep(Duration::from_millis(20));
    q.add(PodBuilder::new("late").info());
    assert_eq!(waiter.join().unwrap().as_deref(), Some("late"));
    let waiter = {
        let q = q.clone();
        std::thread::spawn(move || q.pop().is_none())
    };
    std::thread::sleep(Duration::from_millis(20));
    q.close();
    assert!(waiter.join().unwrap());
}
