use super::*;
use crate::config::SchedulerConfig;
use crate::framework::{Framework, NoNominatedPods, Snapshot, StaticLister};
use crate::model::testing::{NodeBuilder, PodBuilder};
use crate::model::NodeInfo;
use k8s_openapi::api::policy::v1::{
    PodDisruptionBudget, PodDisruptionBudgetSpec, PodDisruptionBudgetStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

fn framework(lister: Arc<StaticLister>) -> Framework {
    Framework::new(
        &SchedulerConfig::default().profiles[0],
        &crate::registry::in_tree_registry(),
        lister,
    )
    .unwrap()
}

/// Runs PreFilter and Filter on every node, then PostFilter.
fn preempt(
    pod: &Arc<PodInfo>,
    nodes: Vec<NodeInfo>,
    lister: StaticLister,
) -> (Option<PostFilterResult>, Status) {
    let lister = Arc::new(lister);
    let framework = framework(lister.clone());
    let snapshot = Snapshot::from_infos(nodes);
    let mut state = CycleState::new();
    assert!(framework
        .run_pre_filter(&mut state, pod, &snapshot)
        .is_success());
    let mut statuses = NodeStatuses::default();
    for node in snapshot.nodes() {
        let status = framework.run_filter(&state, pod, node);
        assert!(
            !status.is_success(),
            "{} fits without preemption",
            node.name
        );
        statuses.set(node.name.clone(), status);
    }
    let context = PostFilterContext {
        snapshot: &snapshot,
        framework: &framework,
        nominated: &NoNominatedPods,
    };
    DefaultPreemption::with_lister(lister).post_filter(&state, pod, &statuses, &context)
}

fn small_node(name: &str, pods: &[Arc<PodInfo>]) -> NodeInfo {
    NodeBuilder::new(name)
        .capacity("2", "4Gi", 110)
        .info_with(pods)
}

fn running(name: &str, priority: i32, cpu: &str) -> Arc<PodInfo> {
    PodBuilder::new(name)
        .priority(priority)
        .req(cpu, "")
        .label("app", name)
        .info()
}

#[test]
fn evicts_the_fewest_lowest_priority_pods() {
    let preemptor = PodBuilder::new("vip").priority(100).req("1", "").info();
    let nodes = vec![
        small_node("n1", &[running("a", 10, "1"), running("b", 10, "1")]),
        small_node("n2", &[running("c", 1, "1"), running("d", 50, "1")]),
    ];
    let (result, status) = preempt(&preemptor, nodes, StaticLister::default());
    assert!(status.is_success(), "{status:?}");
    let result = result.unwrap();
    // n1's highest victim has priority 10, n2's would have 1: n2, evicting only c.
    assert_eq!(result.nominated_node.as_deref(), Some("n2"));
    let victims: Vec<&str> = result.victims.iter().map(|v| v.name()).collect();
    assert_eq!(victims, vec!["c"]);
}

#[test]
fn pods_of_equal_or_higher_priority_are_never_victims() {
    let preemptor = PodBuilder::new("p").priority(10).req("1", "").info();
    let nodes = vec![small_node(
        "n1",
        &[running("a", 10, "1"), running("b", 20, "1")],
    )];
    let (result, status) = preempt(&preemptor, nodes, StaticLister::default());
    assert_eq!(
        status.message(),
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    );
    assert!(result.unwrap().clear_nomination);
}

#[test]
fn unresolvable_nodes_are_not_helped() {
    let preemptor = PodBuilder::new("p").priority(100).req("1", "").info();
    let tainted = NodeBuilder::new("n1")
        .capacity("2", "4Gi", 110)
        .taint("k", "v", "NoSchedule")
        .info_with(&[running("a", 1, "2")]);
    let (_, status) = preempt(&preemptor, vec![tainted], StaticLister::default());
    assert_eq!(
        status.message(),
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    );
}

#[test]
fn preemption_policy_never_is_respected() {
    let mut pod = PodBuilder::new("p").priority(100).req("1", "").build();
    pod.spec.as_mut().unwrap().preemption_policy = Some("Never".into());
    let preemptor = PodInfo::new(Arc::new(pod));
    let nodes = vec![small_node("n1", &[running("a", 1, "2")])];
    let (result, status) = preempt(&preemptor, nodes, StaticLister::default());
    assert!(result.is_none());
    assert_eq!(
        status.message(),
        "preemption: not eligible due to preemptionPolicy=Never."
    );
}

fn budget(app: &str, allowed: i32) -> Arc<PodDisruptionBudget> {
    Arc::new(PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some(format!("pdb-{app}")),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            selector: Some(LabelSelector {
                match_labels: Some([("app".to_string(), app.to_string())].into()),
                match_expressions: None,
            }),
            ..Default::default()
        }),
        status: Some(PodDisruptionBudgetStatus {
            disruptions_allowed: allowed,
            ..Default::default()
        }),
    })
}

#[test]
fn nodes_whose_victims_break_no_budget_are_preferred() {
    let preemptor = PodBuilder::new("vip").priority(100).req("2", "").info();
    let nodes = vec![
        small_node("n1", &[running("guarded", 1, "2")]),
        small_node("n2", &[running("free", 5, "2")]),
    ];
    let lister = StaticLister {
        budgets: vec![budget("guarded", 0)],
        ..Default::default()
    };
    let (result, _) = preempt(&preemptor, nodes, lister);
    assert_eq!(result.unwrap().nominated_node.as_deref(), Some("n2"));
}

#[test]
fn budgets_only_where_there_is_no_other_way() {
    let preemptor = PodBuilder::new("vip").priority(100).req("2", "").info();
    let nodes = vec![small_node("n1", &[running("guarded", 1, "2")])];
    let lister = StaticLister {
        budgets: vec![budget("guarded", 0)],
        ..Default::default()
    };
    let (result, status) = preempt(&preemptor, nodes, lister);
    assert!(status.is_success());
    assert_eq!(result.unwrap().victims[0].name(), "guarded");
}

#[test]
fn victims_are_reprieved_when_the_preemptor_fits_without_them() {
    let preemptor = PodBuilder::new("vip").priority(100).req("1", "").info();
    // 2 cpus: three low pods of 500m each use 1.5; evicting one frees enough.
    let nodes = vec![small_node(
        "n1",
        &[
            running("a", 1, "500m"),
            running("b", 2, "500m"),
            running("c", 3, "500m"),
        ],
    )];
    let (result, _) = preempt(&preemptor, nodes, StaticLister::default());
    let result = result.unwrap();
    let victims: Vec<&str> = result.victims.iter().map(|v| v.name()).collect();
    assert_eq!(
        victims,
        vec!["a"],
        "the least important is evicted, the others reprieved"
    );
}
