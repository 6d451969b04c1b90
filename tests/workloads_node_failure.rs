//! A node that dies, and the pods that move: `capstan` (its scheduler in
//! process), a `capstan-controller-manager` with a short
//! `--node-monitor-grace-period`, and a `capstan-nodes` with three nodes.
//! Two Deployments spread over them: `web` tolerates an unreachable node
//! for 3 s, `patient` says nothing and so gets the DefaultTolerationSeconds
//! plugin's 300 s. One node is stopped (its Lease lapses): it goes
//! Unknown with the unreachable NoExecute taint, `web`'s pods there are
//! evicted (DisruptionTarget, TaintManagerEviction) and replaced on the
//! other nodes while `patient`'s stay; started again, the node is Ready
//! and untainted and finishes the evicted pods' deletion.

use std::time::Duration;

use capstan_tests::apiserver::{Embedded, Kubectl};
use capstan_tests::component::Component;
use capstan_tests::poll::wait_for;
use capstan_tests::sim_nodes::SimNodes;

const WAIT: Duration = Duration::from_secs(120);
const NODES: [&str; 3] = ["fail-0", "fail-1", "fail-2"];

struct Cluster {
    // Fields drop in order: the helpers go before the API server.
    manager: Component,
    nodes: SimNodes,
    capstan: Embedded,
}

impl Cluster {
    fn start() -> Cluster {
        let capstan =
            Embedded::start_with(&["--simulated-nodes", "0", "--disable-controller-manager"]);
        let (dir, kubectl) = (capstan.dir.path(), &capstan.kubectl);
        let manager = Component::start(
            dir,
            kubectl,
            "capstan-controller-manager",
            &[
                "--secure-port",
                "0",
                "--node-monitor-grace-period",
                "20s",
                "--node-monitor-period",
                "1s",
            ],
        );
        let nodes = SimNodes::start(dir, kubectl, &["--nodes", "3", "--name-prefix", "fail-"]);
        let cluster = Cluster {
            capstan,
            manager,
            nodes,
        };
        // The controller manager makes the `default` ServiceAccount pods need.
        cluster.kubectl().wait_for_default_account();
        for node in NODES {
            wait_for(WAIT, &format!("{node} Ready"), || {
                (ready(cluster.kubectl(), node) == "True").then_some(())
            });
        }
        cluster
    }

    fn kubectl(&self) -> &Kubectl {
        &self.capstan.kubectl
    }

    /// Stops or starts one simulated node through `capstan-nodes`' admin routes.
    fn node(&self, name: &str, action: &str) {
        let answer = self.nodes.admin("POST", &format!("/nodes/{name}/{action}"));
        let answer: serde_json::Value = serde_json::from_str(&answer).unwrap_or_default();
        assert_eq!(answer["changed"], true, "{action} {name}: {answer}");
    }

    /// Waits until `node`'s Ready status and NoExecute taints satisfy
    /// `done`; on timeout says what they were and what the controller
    /// manager and the nodes logged last.
    fn wait_node(&self, node: &str, what: &str, done: impl Fn(&str, &str) -> bool) {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            let status = ready(self.kubectl(), node);
            let taints = no_execute_taints(self.kubectl(), node);
            if done(&status, &taints) {
                return;
            }
            if std::time::Instant::now() > deadline {
                panic!(
                    "{node} not {what} after {WAIT:?}: Ready={status:?}, NoExecute taints={taints:?}\n\
                     controller manager:\n{}\nnodes:\n{}",
                    self.manager.log_tail(20),
                    self.nodes.process.log_tail(20)
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

fn jsonpath(kubectl: &Kubectl, args: &[&str], path: &str) -> String {
    let path = format!("jsonpath={path}");
    let mut all = args.to_vec();
    all.extend(["-o", path.as_str()]);
    kubectl.ok(&all)
}

/// The node's Ready status; empty before it registers.
fn ready(kubectl: &Kubectl, node: &str) -> String {
    let path = "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}";
    let output = kubectl.run(&["get", "node", node, "-o", path]);
    String::from_utf8_lossy(&output.stdout).to_string()
}

fn no_execute_taints(kubectl: &Kubectl, node: &str) -> String {
    let path = "{range .spec.taints[?(@.effect==\"NoExecute\")]}{.key}{\"\\n\"}{end}";
    jsonpath(kubectl, &["get", "node", node], path)
}

/// A Deployment's pods: (name, node, terminating, ready).
fn pods_of(kubectl: &Kubectl, app: &str) -> Vec<(String, String, bool, bool)> {
    let path = "{range .items[*]}{.metadata.name} {.spec.nodeName} \
        {.metadata.deletionTimestamp} {.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}";
    let selector = format!("app={app}");
    let text = jsonpath(kubectl, &["get", "pods", "-l", &selector], path);
    text.lines()
        .map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let field = |i: usize| fields.get(i).copied().unwrap_or_default().to_string();
            (field(0), field(1), !field(2).is_empty(), field(3) == "True")
        })
        .collect()
}

fn deployment(name: &str, replicas: u32, tolerations: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: c
        image: nginx
{tolerations}"
    )
}

const SHORT_TOLERATIONS: &str = "      tolerations:
      - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 3}
      - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 3}
";

fn live_ready_elsewhere(pods: &[(String, String, bool, bool)], node: &str) -> usize {
    pods.iter()
        .filter(|(_, on, terminating, ready)| on != node && !terminating && *ready)
        .count()
}

#[test]
fn a_node_that_stops_heartbeating_loses_its_pods_to_the_others_and_comes_back_untainted() {
    let cluster = Cluster::start();
    let kubectl = cluster.kubectl();
    kubectl.ok_with_input(
        &["apply", "-f", "-"],
        &deployment("web", 6, SHORT_TOLERATIONS),
    );
    kubectl.ok_with_input(&["apply", "-f", "-"], &deployment("patient", 3, ""));
    kubectl.ok(&["rollout", "status", "deployment/web", "--timeout=120s"]);
    kubectl.ok(&["rollout", "status", "deployment/patient", "--timeout=120s"]);

    // DefaultTolerationSeconds gave the silent Deployment's pods 300 s.
    let patient = pods_of(kubectl, "patient");
    let tolerations = jsonpath(
        kubectl,
        &["get", "pod", &patient[0].0],
        "{range .spec.tolerations[*]}{.key}={.tolerationSeconds} {end}",
    );
    assert_eq!(
        tolerations.trim(),
        "node.kubernetes.io/not-ready=300 node.kubernetes.io/unreachable=300"
    );

    let web = pods_of(kubectl, "web");
    let victim = web[0].1.clone();
    assert!(NODES.contains(&victim.as_str()), "{web:?}");
    let doomed: Vec<String> = web
        .iter()
        .filter(|p| p.1 == victim)
        .map(|p| p.0.clone())
        .collect();
    let staying: Vec<String> = patient
        .iter()
        .filter(|p| p.1 == victim)
        .map(|p| p.0.clone())
        .collect();

    cluster.node(&victim, "stop");
    cluster.wait_node(
        &victim,
        "Unknown and tainted unreachable",
        |ready, taints| ready == "Unknown" && taints.contains("node.kubernetes.io/unreachable"),
    );
    wait_for(WAIT, "web's pods replaced on the other nodes", || {
        let pods = pods_of(kubectl, "web");
        let evicted = doomed
            .iter()
            .all(|name| pods.iter().find(|p| &p.0 == name).is_none_or(|p| p.2));
        (evicted && live_ready_elsewhere(&pods, &victim) == 6).then_some(())
    });
    let evicted = &doomed[0];
    let mark = jsonpath(
        kubectl,
        &["get", "pod", evicted],
        "{.status.conditions[?(@.type==\"DisruptionTarget\")].reason}",
    );
    assert_eq!(mark, "DeletionByTaintManager", "{evicted}");
    let selector = format!("involvedObject.name={evicted},reason=TaintManagerEviction");
    let message = format!("Marking for deletion Pod default/{evicted}");
    wait_for(WAIT, "the TaintManagerEviction event", || {
        let events = jsonpath(
            kubectl,
            &["get", "events", "--field-selector", &selector],
            "{.items[*].message}",
        );
        events.contains(&message).then_some(())
    });
    // 300 s have not passed: the patient pods on the node are still there.
    let patient_now = pods_of(kubectl, "patient");
    for name in &staying {
        let pod = patient_now.iter().find(|p| &p.0 == name);
        assert!(
            pod.is_some_and(|p| !p.2),
            "{name} evicted early: {patient_now:?}"
        );
    }

    cluster.node(&victim, "start");
    cluster.wait_node(&victim, "Ready and untainted", |ready, taints| {
        ready == "True" && taints.trim().is_empty()
    });
    wait_for(
        WAIT,
        "the evicted pods' deletion finished by their node",
        || {
            let pods = pods_of(kubectl, "web");
            doomed
                .iter()
                .all(|name| pods.iter().all(|p| &p.0 != name))
                .then_some(())
        },
    );
    assert_eq!(pods_of(kubectl, "web").len(), 6);
    let patient_after = pods_of(kubectl, "patient");
    assert_eq!(
        patient_after.iter().filter(|p| !p.2).count(),
        3,
        "{patient_after:?}"
    );
}
