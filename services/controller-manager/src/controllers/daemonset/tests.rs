use std::sync::Arc;

use capstan_client::informer::Informer;
use capstan_client::testing::FakeApi;
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod, Toleration};
use k8s_openapi::chrono::Utc;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::eligibility::{daemon_template, fit, target_node, Fit};
use super::plan::{NodePods, Planner, Rolling};
use super::sync::Syncer;
use crate::context::Reconciler;
use crate::expectations::Expectations;
use crate::history::{History, CONTROLLER_REVISION_HASH};
use crate::pod_control::PodControl;
use crate::testkit::{context, eventually, object};
use capstan_component_helpers::tolerations::tolerates;

fn node(name: &str, labels: serde_json::Value, taints: serde_json::Value) -> Node {
    object(json!({"metadata": {"name": name, "labels": labels}, "spec": {"taints": taints}}))
}

fn daemon_set(spec: serde_json::Value) -> DaemonSet {
    let mut value = json!({
        "metadata": {"name": "agent", "namespace": "default", "generation": 1},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "agent", "image": "agent:1"}]},
            },
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
        },
    });
    for (k, v) in spec.as_object().unwrap() {
        value["spec"][k] = v.clone();
    }
    object(value)
}

#[test]
fn taints_selectors_and_affinity_decide_where_daemon_pods_run() {
    let template = daemon_template(&daemon_set(json!({})).spec.unwrap().template);
    let plain = node("a", json!({}), json!([]));
    assert_eq!(
        fit(&plain, &template),
        Fit {
            should_run: true,
            should_continue_running: true
        }
    );
    // kube's daemon tolerations cover cordoned and not-ready nodes.
    let cordoned = node(
        "b",
        json!({}),
        json!([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]),
    );
    assert!(fit(&cordoned, &template).should_run);
    let not_ready = node(
        "b",
        json!({}),
        json!([{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]),
    );
    assert!(fit(&not_ready, &template).should_run);
    let gpu = node(
        "c",
        json!({}),
        json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
    );
    assert_eq!(
        fit(&gpu, &template),
        Fit {
            should_run: false,
            should_continue_running: true
        }
    );
    let evicting = node(
        "c",
        json!({}),
        json!([{"key": "dedicated", "value": "gpu", "effect": "NoExecute"}]),
    );
    assert_eq!(
        fit(&evicting, &template),
        Fit {
            should_run: false,
            should_continue_running: false
        }
    );
    let toleration: Toleration =
        object(json!({"key": "dedicated", "operator": "Equal", "value": "gpu"}));
    let taint = gpu.spec.as_ref().unwrap().taints.as_ref().unwrap()[0].clone();
    assert!(tolerates(&toleration, &taint));
    let selective = daemon_template(&daemon_set(json!({"template": {
        "metadata": {"labels": {"app": "agent"}},
        "spec": {"containers": [{"name": "agent", "image": "agent:1"}], "nodeSelector": {"disk": "ssd"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}]}}}}}})).spec.unwrap().template);
    assert!(
        fit(
            &node("d", json!({"disk": "ssd", "zone": "z1"}), json!([])),
            &selective
        )
        .should_run
    );
    assert!(
        !fit(
            &node("d", json!({"disk": "ssd", "zone": "z2"}), json!([])),
            &selective
        )
        .should_run
    );
    assert!(!fit(&node("d", json!({"zone": "z1"}), json!([])), &selective).should_run);
}

fn pod_on(node: &str, hash: &str, ready: bool, age: i64) -> Arc<Pod> {
    let created = (Utc::now() - k8s_openapi::chrono::Duration::seconds(age)).to_rfc3339();
    let mut value = json!({
        "metadata": {"name": format!("agent-{node}-{hash}"), "namespace": "default", "uid": format!("{node}-{hash}"),
            "creationTimestamp": created, "labels": {CONTROLLER_REVISION_HASH: hash}},
        "spec": {"nodeName": node, "containers": []},
        "status": {"phase": "Running"},
    });
    if ready {
        value["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}]);
    }
    Arc::new(object(value))
}

fn fits() -> Fit {
    Fit {
        should_run: true,
        should_continue_running: true,
    }
}

fn planner(max_surge: i32, max_unavailable: i32) -> Planner {
    Planner {
        hash: "new".into(),
        min_ready_seconds: 0,
        rolling: Some(Rolling {
            max_surge,
            max_unavailable,
        }),
        now: Utc::now(),
    }
}

fn names(pods: &[Arc<Pod>]) -> Vec<String> {
    pods.iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect()
}

#[test]
fn rolling_updates_keep_within_max_unavailable_or_surge_first() {
    let nodes = |pods: [Vec<Arc<Pod>>; 3]| -> Vec<NodePods> {
        pods.into_iter()
            .enumerate()
            .map(|(i, pods)| NodePods {
                node: format!("n{i}"),
                fit: fits(),
                pods,
            })
            .collect()
    };
    let all_old = nodes([
        vec![pod_on("n0", "old", true, 9)],
        vec![pod_on("n1", "old", true, 9)],
        vec![pod_on("n2", "old", true, 9)],
    ]);
    let plan = planner(0, 1).plan(&all_old);
    assert_eq!(
        (names(&plan.delete), plan.create_on.len()),
        (vec!["agent-n0-old".to_string()], 0)
    );
    assert_eq!(planner(0, 2).plan(&all_old).delete.len(), 2);
    // A node whose new pod is not yet available uses the budget up.
    let rolling = nodes([
        vec![pod_on("n0", "new", false, 1)],
        vec![pod_on("n1", "old", true, 9)],
        vec![pod_on("n2", "old", false, 9)],
    ]);
    let plan = planner(0, 1).plan(&rolling);
    assert_eq!(
        names(&plan.delete),
        ["agent-n2-old"],
        "an unavailable old pod goes at once"
    );
    // Surge: new pods beside old ones, then the old ones go.
    let plan = planner(1, 0).plan(&all_old);
    assert_eq!(
        (plan.create_on, plan.delete.len()),
        (vec!["n0".to_string()], 0)
    );
    let surged = nodes([
        vec![pod_on("n0", "old", true, 9), pod_on("n0", "new", true, 1)],
        vec![pod_on("n1", "old", true, 9)],
        vec![pod_on("n2", "old", true, 9)],
    ]);
    let plan = planner(1, 0).plan(&surged);
    assert_eq!(
        (names(&plan.delete), plan.create_on),
        (vec!["agent-n0-old".to_string()], vec!["n1".to_string()])
    );
    // OnDelete: nothing old is touched; a node without a pod gets one.
    let on_delete = Planner {
        rolling: None,
        ..planner(0, 1)
    };
    let partial = nodes([
        vec![pod_on("n0", "old", true, 9)],
        vec![],
        vec![pod_on("n2", "old", true, 9), pod_on("n2", "old", true, 1)],
    ]);
    let plan = on_delete.plan(&partial);
    assert_eq!(
        (plan.create_on, names(&plan.delete)),
        (vec!["n1".to_string()], vec!["agent-n2-old".to_string()])
    );
}

struct Harness {
    _ctx: Arc<crate::context::Context>,
    fake: FakeApi,
    informers: (
        Informer<DaemonSet>,
        Informer<Node>,
        Informer<Pod>,
        Informer<ControllerRevision>,
    ),
    syncer: Syncer,
}

async fn harness() -> Harness {
    let fake = FakeApi::new();
    let ctx = context(&fake);
    let daemon_sets = ctx.informers.get::<DaemonSet>();
    let nodes = ctx.informers.get::<Node>();
    let pods = crate::controllers::replicaset::index_pods(&ctx);
    let revisions = ctx.informers.get::<ControllerRevision>();
    History::index(&revisions);
    let expectations = Expectations::new();
    let events = crate::pod_events::PodEvents {
        owners: daemon_sets.store(),
        selector: |ds: &DaemonSet| super::sync::selector_of(ds).ok(),
        expectations: expectations.clone(),
        queue: capstan_client::queue::WorkQueue::new("daemonset-test"),
    };
    pods.add_handler(move |event| events.handle(event));
    ctx.informers.wait_synced().await;
    let client = fake.client();
    let syncer = Syncer {
        daemon_sets: daemon_sets.store(),
        nodes: nodes.store(),
        pods: pods.store(),
        history: History {
            revisions: revisions.store(),
            client: client.clone(),
        },
        expectations,
        control: PodControl::new(client.clone(), ctx.recorder(&client, super::ACCOUNT)),
        queue: None,
    };
    Harness {
        _ctx: ctx,
        fake,
        informers: (daemon_sets, nodes, pods, revisions),
        syncer,
    }
}

impl Harness {
    async fn sync(&self) {
        eventually("the caches to catch up", || async {
            let (d, n, p, r) = &self.informers;
            let versions = |a: Vec<Option<String>>, mut b: Vec<Option<String>>| {
                let mut a = a;
                a.sort();
                b.sort();
                a == b
            };
            let caught_up = versions(
                self.fake
                    .list::<Pod>()
                    .into_iter()
                    .map(|p| p.metadata.resource_version)
                    .collect(),
                p.store()
                    .list()
                    .iter()
                    .map(|p| p.metadata.resource_version.clone())
                    .collect(),
            ) && versions(
                self.fake
                    .list::<DaemonSet>()
                    .into_iter()
                    .map(|p| p.metadata.resource_version)
                    .collect(),
                d.store()
                    .list()
                    .iter()
                    .map(|p| p.metadata.resource_version.clone())
                    .collect(),
            ) && n.store().len() == self.fake.list::<Node>().len()
                && r.store().len() == self.fake.list::<ControllerRevision>().len();
            caught_up.then_some(())
        })
        .await;
        self.syncer.sync("default/agent").await.unwrap();
    }

    fn live_pods(&self) -> Vec<Pod> {
        let mut pods: Vec<Pod> = self
            .fake
            .list::<Pod>()
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        pods.sort_by_key(target_node);
        pods
    }

    /// As kubelets would: pods being deleted finish going, the others
    /// are bound to their pinned node and made Ready.
    async fn run_pods(&self) {
        let api: Api<Pod> = Api::namespaced(self.fake.client(), "default");
        for pod in self.fake.list::<Pod>() {
            if pod.metadata.deletion_timestamp.is_some() {
                let name = pod.metadata.name.clone().unwrap();
                api.delete(&name, &kube::api::DeleteParams::default().grace_period(0))
                    .await
                    .unwrap();
            }
        }
        for pod in self.live_pods() {
            let name = pod.metadata.name.clone().unwrap();
            let node = target_node(&pod).unwrap();
            let bind = json!({"spec": {"nodeName": node}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&bind))
                .await
                .unwrap();
            let status = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await
                .unwrap();
        }
    }
}

#[tokio::test]
async fn one_pinned_pod_per_fitting_node_then_a_rollout_node_by_node() {
    let h = harness().await;
    for name in ["n0", "n1"] {
        h.fake.insert(&node(name, json!({}), json!([])));
    }
    h.fake.insert(&node(
        "tainted",
        json!({}),
        json!([{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]),
    ));
    h.fake.insert(&daemon_set(json!({})));
    h.sync().await;
    let pods = h.live_pods();
    let targets: Vec<_> = pods.iter().map(|p| target_node(p).unwrap()).collect();
    assert_eq!(targets, ["n0", "n1"]);
    let tolerations = pods[0].spec.as_ref().unwrap().tolerations.clone().unwrap();
    assert!(tolerations
        .iter()
        .any(|t| t.key.as_deref() == Some("node.kubernetes.io/unreachable")));
    assert!(pods[0].metadata.generate_name.as_deref() == Some("agent-"));
    h.run_pods().await;
    h.sync().await;
    let status = serde_json::to_value(
        h.fake
            .get::<DaemonSet>(Some("default"), "agent")
            .unwrap()
            .status,
    )
    .unwrap();
    assert_eq!(status["desiredNumberScheduled"], 2);
    assert_eq!(status["numberReady"], 2);
    assert_eq!(status["updatedNumberScheduled"], 2);
    assert_eq!(status["numberMisscheduled"], 0);

    let api: Api<DaemonSet> = Api::namespaced(h.fake.client(), "default");
    let image = json!({"spec": {"template": {"spec": {"containers": [{"name": "agent", "image": "agent:2"}]}}}});
    api.patch("agent", &PatchParams::default(), &Patch::Merge(&image))
        .await
        .unwrap();
    h.sync().await;
    assert_eq!(
        h.live_pods().len(),
        1,
        "one node at a time (maxUnavailable 1)"
    );
    h.sync().await;
    assert_eq!(
        h.live_pods().len(),
        1,
        "a node's new pod waits for the old one to go"
    );
    h.run_pods().await;
    h.sync().await;
    assert_eq!(h.live_pods().len(), 2);
    h.run_pods().await;
    h.sync().await;
    h.sync().await;
    h.run_pods().await;
    h.sync().await;
    h.run_pods().await;
    h.sync().await;
    let pods = h.live_pods();
    let images: Vec<_> = pods
        .iter()
        .map(|p| {
            p.spec.as_ref().unwrap().containers[0]
                .image
                .clone()
                .unwrap()
        })
        .collect();
    assert_eq!(images, ["agent:2", "agent:2"]);
    assert_eq!(h.fake.list::<ControllerRevision>().len(), 2);
    let status = serde_json::to_value(
        h.fake
            .get::<DaemonSet>(Some("default"), "agent")
            .unwrap()
            .status,
    )
    .unwrap();
    assert_eq!(status["updatedNumberScheduled"], 2);
    assert_eq!(status["numberAvailable"], 2);
}

#[test]
fn a_pending_pod_on_a_node_newly_tainted_goes_and_a_running_one_stays() {
    let tainted = Fit {
        should_run: false,
        should_continue_running: true,
    };
    let mut pending = (*pod_on("n0", "new", false, 1)).clone();
    pending.spec.as_mut().unwrap().node_name = None;
    pending.status.as_mut().unwrap().phase = Some("Pending".into());
    let nodes = vec![
        NodePods {
            node: "n0".into(),
            fit: tainted,
            pods: vec![Arc::new(pending)],
        },
        NodePods {
            node: "n1".into(),
            fit: tainted,
            pods: vec![pod_on("n1", "new", true, 9)],
        },
    ];
    let plan = planner(0, 1).plan(&nodes);
    assert_eq!(names(&plan.delete), ["agent-n0-new"]);
    assert!(plan.create_on.is_empty());
}
