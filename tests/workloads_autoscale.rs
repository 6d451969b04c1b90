//! The horizontal pod autoscaler as a user meets it, driven with kubectl:
//! `capstan` with two simulated nodes (which serve metrics.k8s.io through
//! the aggregator) and a `capstan-controller-manager` with a short
//! `--horizontal-pod-autoscaler-sync-period`, downscale stabilization and
//! CPU initialization period.
//! A Deployment with CPU requests is autoscaled at 50%; the pods' usage
//! is set through the simulated nodes' usage annotation: at the target
//! nothing moves, above it the Deployment grows to the maximum, below it
//! it shrinks to the minimum once the window has passed; `kubectl get
//! hpa` shows the measured targets, the status carries kube's conditions
//! and the events say why. An autoscaler whose target does not exist, and
//! one whose pods request no CPU, report kube's reasons.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use capstan_tests::apiserver::{Embedded, Kubectl};
use capstan_tests::poll::wait_for;
use capstan_tests::{binary, watchdog};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(120);
const USAGE: &str = "nodes.capstan.dev/cpu-usage";

struct Cluster {
    capstan: Embedded,
    manager: Child,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.manager.kill();
        let _ = self.manager.wait();
        watchdog::untrack(self.manager.id());
    }
}

fn spawn_manager(dir: &Path, kubeconfig: &str) -> Child {
    let log =
        std::fs::File::create(dir.join("capstan-controller-manager.log")).expect("create a log");
    let child = Command::new(binary("capstan-controller-manager"))
        .args(["--kubeconfig", kubeconfig, "--secure-port", "0"])
        .args(["--horizontal-pod-autoscaler-sync-period", "1s"])
        .args(["--horizontal-pod-autoscaler-downscale-stabilization", "5s"])
        // A pod's CPU is trusted as soon as it is Ready: with the default
        // five minutes a pod just started reads as unready for a metrics
        // window, and at a sync a second the warnings of that half minute
        // would use up kube's event spam budget for the autoscaler.
        .args([
            "--horizontal-pod-autoscaler-cpu-initialization-period",
            "1s",
        ])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start capstan-controller-manager");
    watchdog::track(child.id());
    child
}

impl Cluster {
    fn start() -> Cluster {
        let capstan =
            Embedded::start_with(&["--simulated-nodes", "2", "--disable-controller-manager"]);
        let kubeconfig = capstan.kubectl.kubeconfig.to_str().unwrap().to_string();
        let manager = spawn_manager(capstan.dir.path(), &kubeconfig);
        let cluster = Cluster { capstan, manager };
        wait_for(WAIT, "two Ready nodes", || {
            let ready = cluster.kubectl().ok(&[
                "get",
                "nodes",
                "-o",
                "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}",
            ]);
            (ready.lines().filter(|l| *l == "True").count() == 2).then_some(())
        });
        cluster
    }

    fn kubectl(&self) -> &Kubectl {
        &self.capstan.kubectl
    }

    fn hpa(&self, name: &str) -> Value {
        let out = self.kubectl().ok(&["get", "hpa", name, "-o", "json"]);
        serde_json::from_str(&out).expect("kubectl prints JSON")
    }

    /// Waits for `name`'s condition `kind` to have `status` and `reason`.
    fn wait_condition(&self, name: &str, kind: &str, status: &str, reason: &str) -> Value {
        let what = format!("{name}: {kind}={status} ({reason})");
        wait_for(WAIT, &what, || {
            condition(&self.hpa(name), kind, status, reason)
        })
    }

    /// Sets every live pod of `web`'s usage annotation (a pod deleted
    /// between kubectl's list and its write is no failure).
    fn set_usage(&self, usage: &str) {
        let annotation = format!("{USAGE}={usage}");
        let args = [
            "annotate",
            "pods",
            "-l",
            "app=web",
            &annotation,
            "--overwrite",
        ];
        let output = self.kubectl().run(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let unexpected = stderr.lines().any(|l| !l.contains("(NotFound)"));
        assert!(
            output.status.success() || !unexpected,
            "kubectl {args:?}: {stderr}"
        );
    }

    fn deployment_replicas(&self) -> i64 {
        let out = self.kubectl().ok(&[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.replicas}",
        ]);
        out.trim().parse().unwrap_or(-1)
    }

    /// Waits until the deployment asks for `count` and every pod of it,
    /// the new ones included, carries `usage`.
    fn wait_scaled(&self, count: i64, usage: &str) {
        wait_for(WAIT, &format!("web scaled to {count}"), || {
            self.set_usage(usage);
            (self.deployment_replicas() == count).then_some(())
        });
    }

    /// Waits for an event of `reason` whose `name: message` line passes `wanted`.
    fn wait_event(&self, reason: &str, wanted: impl Fn(&str) -> bool) -> String {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            let events = self.events(reason);
            if let Some(found) = events.iter().find(|e| wanted(e)) {
                return found.clone();
            }
            if std::time::Instant::now() > deadline {
                let all = self.kubectl().ok(&["get", "events"]);
                let log = self
                    .capstan
                    .dir
                    .path()
                    .join("capstan-controller-manager.log");
                let log = std::fs::read_to_string(log).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(30).collect();
                panic!(
                    "no {reason} event as wanted after {WAIT:?}: {events:?}\n{all}\ncontroller manager:\n{}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    fn events(&self, reason: &str) -> Vec<String> {
        let selector = format!("reason={reason}");
        let out = self.kubectl().ok(&[
            "get",
            "events",
            "--field-selector",
            &selector,
            "-o",
            "jsonpath={range .items[*]}{.involvedObject.name}: {.message}{\"\\n\"}{end}",
        ]);
        out.lines().map(str::to_string).collect()
    }
}

fn condition(hpa: &Value, kind: &str, status: &str, reason: &str) -> Option<Value> {
    let conditions = hpa["status"]["conditions"].as_array()?;
    let found = conditions.iter().find(|c| c["type"] == kind)?;
    (found["status"] == status && found["reason"] == reason).then(|| found.clone())
}

/// The row of `name` in `kubectl get hpa`.
fn hpa_row(kubectl: &Kubectl, name: &str) -> String {
    let table = kubectl.ok(&["get", "hpa"]);
    let row = table.lines().find(|l| l.starts_with(&format!("{name} ")));
    row.unwrap_or_else(|| panic!("no row for {name}:\n{table}"))
        .to_string()
}

#[test]
fn a_deployment_scales_with_its_pods_cpu_usage() {
    let cluster = Cluster::start();
    let kubectl = cluster.kubectl();
    kubectl.ok(&["create", "deployment", "web", "--image=nginx"]);
    kubectl.ok(&[
        "set",
        "resources",
        "deployment",
        "web",
        "--requests=cpu=100m,memory=64Mi",
    ]);
    let out = kubectl.ok(&["rollout", "status", "deployment/web", "--timeout=120s"]);
    assert!(out.contains("successfully rolled out"), "{out}");

    // At the target: measured, and nothing moves.
    cluster.set_usage("50m");
    let out = kubectl.ok(&[
        "autoscale",
        "deployment",
        "web",
        "--cpu-percent=50",
        "--min=1",
        "--max=5",
    ]);
    assert!(
        out.contains("horizontalpodautoscaler.autoscaling/web autoscaled"),
        "{out}"
    );
    let active = cluster.wait_condition("web", "ScalingActive", "True", "ValidMetricFound");
    assert_eq!(
        active["message"],
        "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)"
    );
    let row = wait_for(WAIT, "kubectl get hpa with a measured target", || {
        let row = hpa_row(kubectl, "web");
        row.contains("cpu: 50%/50%").then_some(row)
    });
    let columns: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        columns[..7],
        ["web", "Deployment/web", "cpu:", "50%/50%", "1", "5", "1"],
        "{row}"
    );
    assert_eq!(cluster.deployment_replicas(), 1);
    let hpa = cluster.hpa("web");
    assert_eq!(hpa["status"]["desiredReplicas"], 1, "{hpa}");
    assert_eq!(
        hpa["status"]["currentMetrics"][0]["resource"]["current"]["averageValue"],
        "50m"
    );
    assert!(
        condition(&hpa, "AbleToScale", "True", "ReadyForNewScale").is_some(),
        "{hpa}"
    );

    // Four times the request's half: up to the maximum, limited by it.
    cluster.wait_scaled(5, "200m");
    let limited = cluster.wait_condition("web", "ScalingLimited", "True", "TooManyReplicas");
    assert_eq!(
        limited["message"],
        "the desired replica count is more than the maximum replica count"
    );
    let out = kubectl.ok(&["rollout", "status", "deployment/web", "--timeout=120s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
    let hpa = cluster.hpa("web");
    assert!(hpa["status"]["lastScaleTime"].is_string(), "{hpa}");
    cluster.wait_event("SuccessfulRescale", |e| {
        e.starts_with("web: New size: ")
            && e.ends_with(
                "; reason: cpu resource utilization (percentage of request) above target",
            )
    });
    let row = wait_for(WAIT, "5 replicas in kubectl get hpa", || {
        cluster.set_usage("200m");
        let row = hpa_row(kubectl, "web");
        let columns: Vec<String> = row.split_whitespace().map(str::to_string).collect();
        (columns.get(6).map(String::as_str) == Some("5") && row.contains("cpu: 200%/50%"))
            .then_some(row)
    });
    assert!(row.contains("Deployment/web"), "{row}");
    // autoscaling/v1 reads the same status.
    let path = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers/web";
    let v1 = kubectl.ok(&["get", "--raw", path]);
    let v1: Value = serde_json::from_str(&v1).expect("kubectl prints JSON");
    assert_eq!(v1["apiVersion"], "autoscaling/v1", "{v1}");
    assert_eq!(v1["status"]["currentCPUUtilizationPercentage"], 200, "{v1}");

    // A tenth of the request: down to the minimum after the 5 s window.
    cluster.wait_scaled(1, "10m");
    cluster.wait_event("SuccessfulRescale", |e| {
        e == "web: New size: 1; reason: All metrics below target"
    });
    // A tenth of the target times one pod rounds up to the minimum itself.
    let within = cluster.wait_condition("web", "ScalingLimited", "False", "DesiredWithinRange");
    assert_eq!(
        within["message"],
        "the desired count is within the acceptable range"
    );
    let row = hpa_row(kubectl, "web");
    assert!(row.contains("cpu: 10%/50%"), "{row}");
}

#[test]
fn targets_that_cannot_be_read_are_reported_with_kubes_reasons() {
    let cluster = Cluster::start();
    let kubectl = cluster.kubectl();
    let ghost = r#"{"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "ghost"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "ghost"},
                 "minReplicas": 1, "maxReplicas": 3}}"#;
    kubectl.ok_with_input(&["create", "-f", "-"], ghost);
    let able = cluster.wait_condition("ghost", "AbleToScale", "False", "FailedGetScale");
    let message = able["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("the HPA controller was unable to get the target's current scale: ")
            && message.contains("not found"),
        "{message}"
    );
    let failed = wait_for(WAIT, "a FailedGetScale event", || {
        let events = cluster.events("FailedGetScale");
        (!events.is_empty()).then_some(events)
    });
    assert!(failed[0].starts_with("ghost: "), "{failed:?}");

    // Pods without a CPU request cannot be measured against one.
    kubectl.ok(&["create", "deployment", "bare", "--image=nginx"]);
    let out = kubectl.ok(&["rollout", "status", "deployment/bare", "--timeout=120s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
    kubectl.ok(&[
        "autoscale",
        "deployment",
        "bare",
        "--cpu-percent=50",
        "--max=3",
    ]);
    let active =
        cluster.wait_condition("bare", "ScalingActive", "False", "FailedGetResourceMetric");
    let message = active["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(
            "the HPA was unable to compute the replica count: failed to get cpu utilization: missing request for cpu in container nginx of Pod bare-"
        ),
        "{message}"
    );
    let summary = wait_for(WAIT, "a FailedComputeMetricsReplicas event", || {
        let events = cluster.events("FailedComputeMetricsReplicas");
        events.into_iter().find(|e| e.starts_with("bare: "))
    });
    assert!(
        summary.starts_with("bare: invalid metrics (1 invalid out of 1), first error is: failed to get cpu utilization: "),
        "{summary}"
    );
    assert!(hpa_row(kubectl, "bare").contains("cpu: <unknown>/50%"));
    assert_eq!(
        kubectl
            .ok(&[
                "get",
                "deployment",
                "bare",
                "-o",
                "jsonpath={.spec.replicas}"
            ])
            .trim(),
        "1"
    );
}
