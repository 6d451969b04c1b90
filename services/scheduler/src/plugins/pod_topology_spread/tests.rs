use super::*;
use crate::framework::{Code, StaticLister};
use crate::model::testing::{NodeBuilder, PodBuilder};
use crate::model::LabelMatcher;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

fn spread(key: &str, skew: i32, when: &str) -> TopologySpreadConstraint {
    TopologySpreadConstraint {
        max_skew: skew,
        topology_key: key.into(),
        when_unsatisfiable: when.into(),
        label_selector: Some(LabelSelector {
            match_labels: Some([("app".to_string(), "web".to_string())].into()),
            match_expressions: None,
        }),
        ..Default::default()
    }
}

fn web(name: &str, node: &str) -> Arc<PodInfo> {
    PodBuilder::new(name).label("app", "web").node(node).info()
}

/// Zones a (n1, n2) and b (n3), and n4 without a zone label.
fn cluster(pods: &[(&str, &str)]) -> Snapshot {
    let nodes = [
        ("n1", Some("a")),
        ("n2", Some("a")),
        ("n3", Some("b")),
        ("n4", None),
    ];
    Snapshot::from_infos(
        nodes
            .iter()
            .map(|(name, zone)| {
                let mut builder = NodeBuilder::new(name);
                if let Some(zone) = zone {
                    builder = builder.label("topology.kubernetes.io/zone", zone);
                }
                let here: Vec<Arc<PodInfo>> = pods
                    .iter()
                    .filter(|(_, n)| n == name)
                    .map(|(p, n)| web(p, n))
                    .collect();
                let mut info = builder.info_with(&here);
                // As the cache does: each pod added moves the generation.
                info.generation = 1 + here.len() as u64;
                info
            })
            .collect(),
    )
}

fn plugin() -> PodTopologySpread {
    PodTopologySpread::with_lister(Arc::new(StaticLister::default()))
}

fn filter_codes(pod: &PodInfo, snapshot: &Snapshot) -> Vec<Code> {
    let mut state = CycleState::new();
    let pre = plugin().pre_filter(&mut state, pod, snapshot);
    if pre.is_skip() {
        return vec![Code::Success; snapshot.len()];
    }
    snapshot
        .nodes()
        .iter()
        .map(|n| plugin().filter(&state, pod, n).code)
        .collect()
}

#[test]
fn filter_keeps_zone_skew_within_max() {
    use Code::*;
    let pod = PodBuilder::new("p")
        .label("app", "web")
        .spread(spread("topology.kubernetes.io/zone", 1, "DoNotSchedule"))
        .info();
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, Vec<Code>);
    let cases: Vec<Case> = vec![
        (
            "empty cluster: any zone",
            vec![],
            vec![Success, Success, Success, UnschedulableAndUnresolvable],
        ),
        (
            "zone a ahead: only b",
            vec![("x", "n1")],
            vec![
                Unschedulable,
                Unschedulable,
                Success,
                UnschedulableAndUnresolvable,
            ],
        ),
        (
            "balanced: any zone",
            vec![("x", "n1"), ("y", "n3")],
            vec![Success, Success, Success, UnschedulableAndUnresolvable],
        ),
        (
            "pods on the unlabelled node do not count",
            vec![("x", "n4"), ("y", "n4")],
            vec![Success, Success, Success, UnschedulableAndUnresolvable],
        ),
    ];
    for (name, pods, want) in cases {
        assert_eq!(filter_codes(&pod, &cluster(&pods)), want, "{name}");
    }
}

#[test]
fn filter_messages_are_kube_s() {
    let pod = PodBuilder::new("p")
        .label("app", "web")
        .spread(spread("topology.kubernetes.io/zone", 1, "DoNotSchedule"))
        .info();
    let snapshot = cluster(&[("x", "n1")]);
    let mut state = CycleState::new();
    plugin().pre_filter(&mut state, &pod, &snapshot);
    let status = plugin().filter(&state, &pod, snapshot.get("n1").unwrap());
    assert_eq!(
        status.message(),
        "node(s) didn't match pod topology spread constraints"
    );
    let status = plugin().filter(&state, &pod, snapshot.get("n4").unwrap());
    assert_eq!(
        status.message(),
        "node(s) didn't match pod topology spread constraints (missing required label)"
    );
}

#[test]
fn a_pod_the_selector_does_not_match_adds_no_skew() {
    let pod = PodBuilder::new("p")
        .label("app", "db")
        .spread(spread("topology.kubernetes.io/zone", 1, "DoNotSchedule"))
        .info();
    let codes = filter_codes(&pod, &cluster(&[("x", "n1")]));
    assert_eq!(codes[0], Code::Success);
}

#[test]
fn min_domains_counts_missing_domains_as_empty() {
    let mut constraint = spread("topology.kubernetes.io/zone", 1, "DoNotSchedule");
    constraint.min_domains = Some(3);
    let pod = PodBuilder::new("p")
        .label("app", "web")
        .spread(constraint)
        .info();
    // Zones a and b hold one pod each, but with 3 domains required the minimum is 0.
    let codes = filter_codes(&pod, &cluster(&[("x", "n1"), ("y", "n3")]));
    assert_eq!(
        &codes[..3],
        &[
            Code::Unschedulable,
            Code::Unschedulable,
            Code::Unschedulable
        ]
    );
}

#[test]
fn preemption_updates_counts_through_add_and_remove() {
    let pod = PodBuilder::new("p")
        .label("app", "web")
        .spread(spread("topology.kubernetes.io/zone", 1, "DoNotSchedule"))
        .info();
    let snapshot = cluster(&[("x", "n1")]);
    let mut state = CycleState::new();
    plugin().pre_filter(&mut state, &pod, &snapshot);
    let n1 = snapshot.get("n1").unwrap();
    plugin().remove_pod(&mut state, &pod, &web("x", "n1"), n1);
    assert!(plugin().filter(&state, &pod, n1).is_success());
    plugin().add_pod(
        &mut state,
        &pod,
        &web("z", "n3"),
        snapshot.get("n3").unwrap(),
    );
    plugin().add_pod(
        &mut state,
        &pod,
        &web("w", "n3"),
        snapshot.get("n3").unwrap(),
    );
    assert!(plugin().filter(&state, &pod, n1).is_success());
    assert_eq!(
        plugin()
            .filter(&state, &pod, snapshot.get("n3").unwrap())
            .code,
        Code::Unschedulable
    );
}

fn scores(pod: &PodInfo, snapshot: &Snapshot, plugin: &PodTopologySpread) -> Vec<i64> {
    let nodes = snapshot.nodes().to_vec();
    let mut state = CycleState::new();
    if plugin
        .pre_score(&mut state, pod, &nodes, snapshot)
        .is_skip()
    {
        return Vec::new();
    }
    let mut scores: Vec<i64> = nodes
        .iter()
        .map(|n| plugin.score(&state, pod, n).unwrap())
        .collect();
    plugin.normalize(&state, pod, &nodes, &mut scores);
    scores
}

#[test]
fn score_prefers_emptier_zones_and_ignores_unlabelled_nodes() {
    let pod = PodBuilder::new("p")
        .label("app", "web")
        .spread(spread("topology.kubernetes.io/zone", 1, "ScheduleAnyway"))
        .info();
    let got = scores(
        &pod,
        &cluster(&[("x", "n1"), ("y", "n2"), ("z", "n3")]),
        &plugin(),
    );
    // Zone a: 2 pods, zone b: 1. weight ln(2+2); raw a = round(2*1.386) = 3, b = round(1.386) = 1.
    // normalized: 100*(3+1-3)/3 = 33, 100*(3+1-1)/3 = 100; n4 ignored.
    assert_eq!(got, vec![33, 33, 100, 0]);
}

#[test]
fn system_defaults_use_the_pods_workloads_and_spare_unlabelled_nodes() {
    let mut lister = StaticLister::default();
    lister.workloads.insert(
        "default".into(),
        vec![LabelMatcher::from_map(
            &[("app".to_string(), "web".to_string())].into(),
        )],
    );
    let plugin = PodTopologySpread::with_lister(Arc::new(lister));
    let pod = PodBuilder::new("p").label("app", "web").info();
    let got = scores(&pod, &cluster(&[("x", "n1"), ("y", "n1")]), &plugin);
    assert_eq!(got.len(), 4);
    // n4 has no zone label but is still spread by hostname, and it is empty.
    assert!(got[3] > got[0], "{got:?}");
    assert!(got[2] > got[0], "{got:?}");
    // Without a workload selecting the pod there is nothing to spread.
    let lone = PodBuilder::new("q").label("app", "other").info();
    assert!(scores(&lone, &cluster(&[]), &plugin).is_empty());
}

/// Hostname spreading counts each node's own pods: remembered while the
/// node is unchanged, counted again once its generation moves.
#[test]
fn hostname_counts_follow_each_nodes_pods_across_cycles() {
    let plugin = plugin();
    let pod = PodBuilder::new("p")
        .label("app", "web")
        .spread(spread("kubernetes.io/hostname", 1, "ScheduleAnyway"))
        .info();
    let got = scores(&pod, &cluster(&[("x", "n1")]), &plugin);
    assert!(got[0] < got[1], "n1 holds a pod: {got:?}");
    let got = scores(
        &pod,
        &cluster(&[("x", "n1"), ("y", "n2"), ("z", "n2")]),
        &plugin,
    );
    assert!(got[1] < got[0], "n2 now holds two: {got:?}");
    assert!(got[0] < got[2], "n3 holds none: {got:?}");
}

/// Filter's and Score's constraints with one selector ask one question of
/// the memo: each node's pods are matched once for both.
#[test]
fn constraints_sharing_a_selector_are_counted_once() {
    let plugin = plugin();
    let pod = PodBuilder::new("p")
        .label("app", "web")
        .spread(spread("topology.kubernetes.io/zone", 1, "DoNotSchedule"))
        .spread(spread("kubernetes.io/hostname", 1, "ScheduleAnyway"))
        .info();
    let snapshot = cluster(&[("x", "n1"), ("y", "n3")]);
    let mut state = CycleState::new();
    assert!(!plugin.pre_filter(&mut state, &pod, &snapshot).is_skip());
    let got = scores(&pod, &snapshot, &plugin);
    assert!(got[0] < got[1], "n1 holds a pod: {got:?}");
    assert_eq!(plugin.counts.questions(), 1);
}

#[test]
fn args_are_validated() {
    let decode = |args: serde_json::Value| {
        let context = PluginContext {
            args: &args,
            lister: Arc::new(StaticLister::default()),
        };
        PodTopologySpread::factory(&context).err().map(|e| e.field)
    };
    assert_eq!(
        decode(serde_json::json!({"defaultingType": "Bogus"})),
        Some("defaultingType".into())
    );
    assert_eq!(
        decode(
            serde_json::json!({"defaultingType": "System", "defaultConstraints": [{"maxSkew": 1, "topologyKey": "k", "whenUnsatisfiable": "ScheduleAnyway"}]})
        ),
        Some("defaultConstraints".into())
    );
    assert_eq!(
        decode(
            serde_json::json!({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 0, "topologyKey": "k", "whenUnsatisfiable": "ScheduleAnyway"}]})
        ),
        Some("defaultConstraints[0].maxSkew".into())
    );
    assert_eq!(decode(serde_json::json!({"defaultingType": "List"})), None);
}
