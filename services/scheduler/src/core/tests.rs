//! The scheduler end to end against the in-memory API: real threads, real
//! queue and cache, bindings written and seen back through the "watch".

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::memory_api::MemoryApi;
use super::*;
use crate::config::SchedulerConfig;
use crate::framework::StaticLister;
use crate::model::testing::{toleration, NodeBuilder, PodBuilder};

struct Harness {
    api: Arc<MemoryApi>,
    scheduler: Arc<Scheduler>,
    _runtime: tokio::runtime::Runtime,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Harness {
    fn new() -> Harness {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let api = MemoryApi::new();
        let scheduler = Scheduler::new(
            &SchedulerConfig::default(),
            Arc::new(StaticLister::default()),
            api.clone(),
            runtime.handle().clone(),
        )
        .unwrap();
        api.watch(&scheduler);
        let thread = Some(scheduler.start());
        Harness {
            api,
            scheduler,
            _runtime: runtime,
            thread,
        }
    }

    /// Waits until `done` holds (the deadline only bounds a broken test).
    fn wait_until(&self, what: &str, done: impl Fn(&Harness) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done(self) {
            assert!(Instant::now() < deadline, "timed out waiting until {what}");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn node_of(&self, name: &str) -> Option<String> {
        self.api
            .pod("default", name)?
            .spec
            .as_ref()?
            .node_name
            .clone()
    }

    fn failed_message(&self, name: &str) -> Option<String> {
        self.api
            .events()
            .into_iter()
            .rev()
            .find(|e| e.regarding.name == name && e.reason == "FailedScheduling")
            .map(|e| e.message)
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.scheduler.stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn node(name: &str, cpu: &str) -> NodeBuilder {
    NodeBuilder::new(name).capacity(cpu, "8Gi", 110)
}

#[test]
fn a_pod_is_bound_and_reported_scheduled() {
    let h = Harness::new();
    h.api.add_node(node("n1", "4").build());
    h.api
        .create_pod(PodBuilder::new("web").req("1", "1Gi").build());
    h.wait_until("web is bound", |h| h.node_of("web").is_some());
    assert_eq!(h.node_of("web").as_deref(), Some("n1"));
    h.wait_until("the Scheduled event", |h| {
        h.api.events().iter().any(|e| e.reason == "Scheduled")
    });
    let event = h
        .api
        .events()
        .into_iter()
        .find(|e| e.reason == "Scheduled")
        .unwrap();
    assert_eq!(event.message, "Successfully assigned default/web to n1");
}

#[test]
fn a_burst_never_over_commits_a_node() {
    let h = Harness::new();
    for i in 0..3 {
        h.api.add_node(node(&format!("n{i}"), "2").build());
    }
    for i in 0..10 {
        h.api
            .create_pod(PodBuilder::new(&format!("p{i}")).req("1", "").build());
    }
    h.wait_until("six pods bound and four reported", |h| {
        h.api.bound() == 6
            && (0..10)
                .filter(|i| h.failed_message(&format!("p{i}")).is_some())
                .count()
                >= 4
    });
    for i in 0..3 {
        let on_node = h
            .api
            .pods()
            .iter()
            .filter(|p| p.spec.as_ref().unwrap().node_name.as_deref() == Some(&format!("n{i}")))
            .count();
        assert_eq!(on_node, 2, "n{i} holds exactly its 2 cpus");
    }
    let pending = (0..10)
        .map(|i| format!("p{i}"))
        .find(|p| h.node_of(p).is_none())
        .unwrap();
    assert_eq!(
        h.failed_message(&pending).unwrap(),
        "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
    );
    let status = h
        .api
        .pod("default", &pending)
        .unwrap()
        .status
        .clone()
        .unwrap();
    let condition = status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "PodScheduled")
        .unwrap();
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_deref()),
        ("False", Some("Unschedulable"))
    );
}

#[test]
fn failed_scheduling_message_counts_each_reason() {
    let h = Harness::new();
    h.api.add_node(node("small", "1").build());
    h.api
        .add_node(node("t1", "8").taint("k", "v", "NoSchedule").build());
    h.api
        .add_node(node("t2", "8").taint("k", "v", "NoSchedule").build());
    h.api
        .create_pod(PodBuilder::new("big").req("2", "").build());
    h.wait_until("big is reported", |h| h.failed_message("big").is_some());
    assert_eq!(
        h.failed_message("big").unwrap(),
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {k: v}. \
         preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, \
         2 Preemption is not helpful for scheduling."
    );
}

#[test]
fn an_impossible_pod_stays_pending_while_the_others_schedule() {
    let h = Harness::new();
    h.api.add_node(node("n1", "4").build());
    h.api
        .create_pod(PodBuilder::new("huge").req("64", "").build());
    for i in 0..3 {
        h.api
            .create_pod(PodBuilder::new(&format!("ok{i}")).req("1", "").build());
    }
    h.wait_until("the others are bound", |h| {
        (0..3).all(|i| h.node_of(&format!("ok{i}")).is_some())
    });
    h.wait_until("huge is reported", |h| h.failed_message("huge").is_some());
    assert!(h.node_of("huge").is_none());
    // A node with room appears: the unschedulable pod is moved and placed.
    h.api.add_node(node("n2", "64").build());
    h.wait_until("huge is bound on the new node", |h| {
        h.node_of("huge").as_deref() == Some("n2")
    });
}

#[test]
fn pods_for_another_scheduler_are_left_alone() {
    let h = Harness::new();
    h.api.add_node(node("n1", "4").build());
    h.api.create_pod(
        PodBuilder::new("theirs")
            .scheduler_name("other-scheduler")
            .build(),
    );
    h.api.create_pod(PodBuilder::new("ours").build());
    h.wait_until("ours is bound", |h| h.node_of("ours").is_some());
    assert!(h.node_of("theirs").is_none());
    assert!(h.failed_message("theirs").is_none());
}

#[test]
fn tolerations_and_node_selectors_steer_pods() {
    let h = Harness::new();
    h.api
        .add_node(node("plain", "4").label("disk", "hdd").build());
    h.api.add_node(
        node("gpu", "4")
            .label("disk", "ssd")
            .taint("gpu", "true", "NoSchedule")
            .build(),
    );
    h.api.create_pod(
        PodBuilder::new("fast")
            .node_selector("disk", "ssd")
            .toleration(toleration("gpu", "Exists", "", ""))
            .build(),
    );
    h.api.create_pod(PodBuilder::new("any").build());
    h.wait_until("both bound", |h| {
        h.node_of("fast").is_some() && h.node_of("any").is_some()
    });
    assert_eq!(h.node_of("fast").as_deref(), Some("gpu"));
    assert_eq!(h.node_of("any").as_deref(), Some("plain"));
}

#[test]
fn a_refused_binding_is_forgotten_and_retried() {
    let h = Harness::new();
    h.api.add_node(node("n1", "1").build());
    h.api.refuse_next_bindings(1);
    h.api.create_pod(PodBuilder::new("p").req("1", "").build());
    h.wait_until("p is bound after a retry", |h| h.node_of("p").is_some());
    let rejected = h.failed_message("p").unwrap();
    assert!(
        rejected.starts_with("Binding rejected: conflict"),
        "{rejected}"
    );
}

#[test]
fn a_high_priority_pod_preempts_and_takes_the_room() {
    let h = Harness::new();
    h.api.add_node(node("n1", "2").build());
    h.api
        .create_pod(PodBuilder::new("low").priority(1).req("2", "").build());
    h.wait_until("low is bound", |h| h.node_of("low").is_some());
    h.api
        .create_pod(PodBuilder::new("high").priority(1000).req("2", "").build());
    h.wait_until("high is bound where low was", |h| {
        h.node_of("high").as_deref() == Some("n1")
    });
    assert!(
        h.api.pod("default", "low").is_none(),
        "the victim was deleted"
    );
    let events = h.api.events();
    let preempted = events.iter().find(|e| e.reason == "Preempted").unwrap();
    assert_eq!(preempted.regarding.name, "low");
    assert!(preempted
        .message
        .starts_with("Preempted by pod uid-high on node n1"));
    assert_eq!(
        h.failed_message("high").unwrap(),
        "0/1 nodes are available: 1 Insufficient cpu."
    );
}

#[test]
fn gated_pods_wait_for_their_gates() {
    let h = Harness::new();
    h.api.add_node(node("n1", "4").build());
    h.api
        .create_pod(PodBuilder::new("gated").gate("example.com/wait").build());
    h.api.create_pod(PodBuilder::new("free").build());
    h.wait_until("free is bound", |h| h.node_of("free").is_some());
    assert!(h.node_of("gated").is_none());
    assert_eq!(h.scheduler.queue().pending().gated, 1);
}

#[test]
fn an_unchanged_failure_is_not_written_again() {
    let h = Harness::new();
    h.api.add_node(node("n1", "1").build());
    h.api
        .create_pod(PodBuilder::new("big").req("2", "").build());
    h.wait_until("big is reported", |h| h.failed_message("big").is_some());
    h.wait_until("the condition is stored", |h| {
        h.api
            .pod("default", "big")
            .unwrap()
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some()
    });
    h.wait_until("big waits with the unschedulable pods", |h| {
        h.scheduler.queue().pending().unschedulable == 1
    });
    let before = h.api.pod("default", "big").unwrap();
    // Retry it: same verdict, so the stored pod is left as it is.
    h.scheduler.queue().flush_unschedulable();
    h.wait_until("a second FailedScheduling", |h| {
        h.api
            .events()
            .iter()
            .filter(|e| e.reason == "FailedScheduling")
            .count()
            >= 2
    });
    h.wait_until("the pod is back with the unschedulable ones", |h| {
        h.scheduler.queue().pending().unschedulable == 1
    });
    assert!(
        Arc::ptr_eq(&before, &h.api.pod("default", "big").unwrap()),
        "no second status write"
    );
}
