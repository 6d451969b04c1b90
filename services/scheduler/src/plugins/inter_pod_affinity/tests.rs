use super::*;
use crate::framework::{Code, StaticLister};
use crate::model::testing::{NodeBuilder, PodBuilder};
use k8s_openapi::api::core::v1::{
    Affinity, PodAffinity, PodAffinityTerm, PodAntiAffinity, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

const ZONE: &str = "topology.kubernetes.io/zone";
const HOST: &str = "kubernetes.io/hostname";

fn term(app: &str, key: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: Some(LabelSelector {
            match_labels: Some([("app".to_string(), app.to_string())].into()),
            match_expressions: None,
        }),
        topology_key: key.into(),
        ..Default::default()
    }
}

fn affinity(required: Vec<PodAffinityTerm>) -> Affinity {
    Affinity {
        pod_affinity: Some(PodAffinity {
            required_during_scheduling_ignored_during_execution: Some(required),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn anti_affinity(required: Vec<PodAffinityTerm>) -> Affinity {
    Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(required),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// n1, n2 in zone a; n3 in zone b. `pods` are (pod, node).
fn cluster(pods: Vec<(PodBuilder, &str)>) -> Snapshot {
    let mut infos: Vec<_> = [("n1", "a"), ("n2", "a"), ("n3", "b")]
        .iter()
        .map(|(name, zone)| NodeBuilder::new(name).label(ZONE, zone).info_with(&[]))
        .collect();
    for (pod, node) in pods {
        let info = pod.node(node).info();
        infos
            .iter_mut()
            .find(|n| n.name == node)
            .unwrap()
            .add_pod(info);
    }
    Snapshot::from_infos(infos)
}

fn plugin() -> InterPodAffinity {
    InterPodAffinity::with_lister(Arc::new(StaticLister::default()))
}

fn codes(pod: PodBuilder, snapshot: &Snapshot) -> Vec<Code> {
    let pod = pod.info();
    let mut state = CycleState::new();
    if plugin().pre_filter(&mut state, &pod, snapshot).is_skip() {
        return vec![Code::Success; snapshot.len()];
    }
    snapshot
        .nodes()
        .iter()
        .map(|n| plugin().filter(&state, &pod, n).code)
        .collect()
}

#[test]
fn filter_table() {
    use Code::*;
    let db = || PodBuilder::new("db").label("app", "db");
    type Case<'a> = (&'a str, PodBuilder, Vec<(PodBuilder, &'a str)>, Vec<Code>);
    let cases: Vec<Case> = vec![
        (
            "no terms, nothing existing: skipped",
            PodBuilder::new("p"),
            vec![(db(), "n1")],
            vec![Success, Success, Success],
        ),
        (
            "affinity to db's zone",
            PodBuilder::new("p").affinity(affinity(vec![term("db", ZONE)])),
            vec![(db(), "n1")],
            vec![Success, Success, UnschedulableAndUnresolvable],
        ),
        (
            "affinity to db's host",
            PodBuilder::new("p").affinity(affinity(vec![term("db", HOST)])),
            vec![(db(), "n1")],
            vec![
                Success,
                UnschedulableAndUnresolvable,
                UnschedulableAndUnresolvable,
            ],
        ),
        (
            "affinity with no match anywhere, not matching itself",
            PodBuilder::new("p").affinity(affinity(vec![term("db", ZONE)])),
            vec![],
            vec![UnschedulableAndUnresolvable; 3],
        ),
        (
            "first pod of a self-affine group may go anywhere",
            PodBuilder::new("p")
                .label("app", "web")
                .affinity(affinity(vec![term("web", ZONE)])),
            vec![],
            vec![Success; 3],
        ),
        (
            "anti-affinity keeps off db's zone",
            PodBuilder::new("p").affinity(anti_affinity(vec![term("db", ZONE)])),
            vec![(db(), "n2")],
            vec![Unschedulable, Unschedulable, Success],
        ),
        (
            "existing pod's anti-affinity keeps the pod off its host",
            PodBuilder::new("p").label("app", "web"),
            vec![(db().affinity(anti_affinity(vec![term("web", HOST)])), "n1")],
            vec![Unschedulable, Success, Success],
        ),
    ];
    for (name, pod, existing, want) in cases {
        assert_eq!(codes(pod, &cluster(existing)), want, "{name}");
    }
}

#[test]
fn filter_messages_are_kube_s() {
    let snapshot = cluster(vec![(PodBuilder::new("db").label("app", "db"), "n1")]);
    let check = |pod: PodBuilder, node: &str, message: &str| {
        let pod = pod.info();
        let mut state = CycleState::new();
        plugin().pre_filter(&mut state, &pod, &snapshot);
        assert_eq!(
            plugin()
                .filter(&state, &pod, snapshot.get(node).unwrap())
                .message(),
            message
        );
    };
    check(
        PodBuilder::new("p").affinity(affinity(vec![term("db", ZONE)])),
        "n3",
        filtering::REASON_AFFINITY,
    );
    check(
        PodBuilder::new("p").affinity(anti_affinity(vec![term("db", ZONE)])),
        "n1",
        filtering::REASON_ANTI_AFFINITY,
    );
}

#[test]
fn other_namespaces_do_not_match_unless_named() {
    let other = PodBuilder::new("db").namespace("other").label("app", "db");
    let pod = PodBuilder::new("p").affinity(anti_affinity(vec![term("db", ZONE)]));
    assert_eq!(
        codes(pod, &cluster(vec![(other.clone(), "n1")])),
        vec![Code::Success; 3]
    );
    let mut named = term("db", ZONE);
    named.namespaces = Some(vec!["other".into()]);
    let pod = PodBuilder::new("p").affinity(anti_affinity(vec![named]));
    assert_eq!(
        codes(pod, &cluster(vec![(other, "n1")]))[0],
        Code::Unschedulable
    );
}

#[test]
fn preferred_terms_score_toward_and_away() {
    let weighted = |app: &str, weight: i32| WeightedPodAffinityTerm {
        weight,
        pod_affinity_term: term(app, ZONE),
    };
    let pod = PodBuilder::new("p")
        .affinity(Affinity {
            pod_affinity: Some(PodAffinity {
                preferred_during_scheduling_ignored_during_execution: Some(vec![weighted("db", 5)]),
                ..Default::default()
            }),
            pod_anti_affinity: Some(PodAntiAffinity {
                preferred_during_scheduling_ignored_during_execution: Some(vec![weighted(
                    "cache", 10,
                )]),
                ..Default::default()
            }),
            node_affinity: None,
        })
        .info();
    let snapshot = cluster(vec![
        (PodBuilder::new("db").label("app", "db"), "n1"),
        (PodBuilder::new("c").label("app", "cache"), "n3"),
    ]);
    let nodes = snapshot.nodes().to_vec();
    let mut state = CycleState::new();
    assert!(plugin()
        .pre_score(&mut state, &pod, &nodes, &snapshot)
        .is_success());
    let mut scores: Vec<i64> = nodes
        .iter()
        .map(|n| plugin().score(&state, &pod, n).unwrap())
        .collect();
    assert_eq!(scores, vec![5, 5, -10]);
    plugin().normalize(&state, &pod, &nodes, &mut scores);
    assert_eq!(scores, vec![100, 100, 0]);
}

#[test]
fn existing_required_affinity_attracts_with_hard_weight() {
    let holder = PodBuilder::new("h")
        .label("app", "x")
        .affinity(affinity(vec![term("web", ZONE)]));
    let snapshot = cluster(vec![(holder, "n3")]);
    let pod = PodBuilder::new("p").label("app", "web").info();
    let nodes = snapshot.nodes().to_vec();
    let mut state = CycleState::new();
    assert!(plugin()
        .pre_score(&mut state, &pod, &nodes, &snapshot)
        .is_success());
    let scores: Vec<i64> = nodes
        .iter()
        .map(|n| plugin().score(&state, &pod, n).unwrap())
        .collect();
    assert_eq!(scores, vec![0, 0, 1]);
}
