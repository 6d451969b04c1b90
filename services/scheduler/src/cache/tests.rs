use super::*;
use crate::model::testing::{NodeBuilder, PodBuilder};

fn cache_with_nodes(names: &[&str]) -> Cache {
    let mut cache = Cache::new(Duration::from_secs(30));
    for name in names {
        cache.add_node(Arc::new(
            NodeBuilder::new(name).capacity("4", "8Gi", 110).build(),
        ));
    }
    cache
}

fn requested_cpu(snapshot: &Snapshot, node: &str) -> i64 {
    snapshot.get(node).unwrap().requested.milli_cpu
}

#[test]
fn assumed_pods_count_at_once_so_a_burst_cannot_over_commit() {
    let mut cache = cache_with_nodes(&["n1"]);
    let mut snapshot = Snapshot::default();
    for i in 0..4 {
        cache
            .assume(PodBuilder::new(&format!("p{i}")).req("1", "").info(), "n1")
            .unwrap();
    }
    cache.update_snapshot(&mut snapshot);
    assert_eq!(requested_cpu(&snapshot, "n1"), 4000);
    assert_eq!(snapshot.get("n1").unwrap().pods.len(), 4);
}

#[test]
fn a_pod_cannot_be_assumed_twice() {
    let mut cache = cache_with_nodes(&["n1"]);
    let pod = PodBuilder::new("p").info();
    cache.assume(pod.clone(), "n1").unwrap();
    assert!(matches!(
        cache.assume(pod, "n1"),
        Err(CacheError::AlreadyPresent(_))
    ));
}

#[test]
fn forget_releases_and_confirmation_keeps() {
    let mut cache = cache_with_nodes(&["n1"]);
    let mut snapshot = Snapshot::default();
    cache
        .assume(PodBuilder::new("a").req("1", "").info(), "n1")
        .unwrap();
    cache
        .assume(PodBuilder::new("b").req("1", "").info(), "n1")
        .unwrap();
    cache.forget("uid-a").unwrap();
    cache
        .add_pod(PodBuilder::new("b").req("1", "").node("n1").info())
        .unwrap();
    assert!(!cache.is_assumed("uid-b"));
    assert!(
        cache.forget("uid-b").is_err(),
        "a confirmed pod is not forgotten"
    );
    cache.update_snapshot(&mut snapshot);
    assert_eq!(requested_cpu(&snapshot, "n1"), 1000);
}

#[test]
fn confirmation_on_another_node_moves_the_pod() {
    let mut cache = cache_with_nodes(&["n1", "n2"]);
    let mut snapshot = Snapshot::default();
    cache
        .assume(PodBuilder::new("a").req("1", "").info(), "n1")
        .unwrap();
    cache
        .add_pod(PodBuilder::new("a").req("1", "").node("n2").info())
        .unwrap();
    cache.update_snapshot(&mut snapshot);
    assert_eq!(requested_cpu(&snapshot, "n1"), 0);
    assert_eq!(requested_cpu(&snapshot, "n2"), 1000);
}

#[test]
fn assumptions_expire_only_after_binding_finished_and_the_ttl() {
    let mut cache = cache_with_nodes(&["n1"]);
    let start = Instant::now();
    cache.assume(PodBuilder::new("a").info(), "n1").unwrap();
    cache.assume(PodBuilder::new("b").info(), "n1").unwrap();
    cache.finish_binding("uid-a", start);
    assert!(cache
        .cleanup_expired(start + Duration::from_secs(29))
        .is_empty());
    let dropped = cache.cleanup_expired(start + Duration::from_secs(31));
    assert_eq!(dropped.len(), 1);
    assert_eq!(dropped[0].key, "uid-a");
    assert!(cache.is_assumed("uid-b"), "still binding: never expires");
}

#[test]
fn snapshots_copy_only_changed_nodes() {
    let mut cache = cache_with_nodes(&["n1", "n2"]);
    let mut snapshot = Snapshot::default();
    cache.update_snapshot(&mut snapshot);
    let n2_before = snapshot.get("n2").unwrap().clone();
    cache
        .add_pod(PodBuilder::new("a").node("n1").info())
        .unwrap();
    cache.update_snapshot(&mut snapshot);
    assert!(
        Arc::ptr_eq(&n2_before, snapshot.get("n2").unwrap()),
        "unchanged node shared"
    );
    assert_eq!(snapshot.get("n1").unwrap().pods.len(), 1);
    // An older snapshot taken before is not changed by later cache updates.
    let old = snapshot.clone();
    cache
        .add_pod(PodBuilder::new("b").node("n1").info())
        .unwrap();
    cache.update_snapshot(&mut snapshot);
    assert_eq!(old.get("n1").unwrap().pods.len(), 1);
    assert_eq!(snapshot.get("n1").unwrap().pods.len(), 2);
}

#[test]
fn pods_before_their_node_and_node_removal() {
    let mut cache = Cache::new(DEFAULT_ASSUMED_POD_TTL);
    let mut snapshot = Snapshot::default();
    cache
        .add_pod(PodBuilder::new("early").req("1", "").node("late").info())
        .unwrap();
    cache.update_snapshot(&mut snapshot);
    assert!(
        snapshot.get("late").is_none(),
        "a node the cache has not seen is not schedulable"
    );
    cache.add_node(Arc::new(NodeBuilder::new("late").build()));
    cache.update_snapshot(&mut snapshot);
    assert_eq!(requested_cpu(&snapshot, "late"), 1000);
    cache.remove_node("late");
    cache.update_snapshot(&mut snapshot);
    assert!(snapshot.is_empty());
}

#[test]
fn image_counts_follow_nodes() {
    let mut cache = Cache::new(DEFAULT_ASSUMED_POD_TTL);
    let mut snapshot = Snapshot::default();
    cache.add_node(Arc::new(NodeBuilder::new("a").image("web:v1", 10).build()));
    cache.add_node(Arc::new(NodeBuilder::new("b").image("web:v1", 10).build()));
    cache.update_snapshot(&mut snapshot);
    assert_eq!(snapshot.image_nodes.get("web:v1"), Some(&2));
    cache.remove_node("a");
    cache.update_snapshot(&mut snapshot);
    assert_eq!(snapshot.image_nodes.get("web:v1"), Some(&1));
}
