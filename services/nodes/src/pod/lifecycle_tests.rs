use std::collections::BTreeMap;

use chrono::TimeDelta;
use k8s_openapi::api::core::v1::PodCondition;
use serde_json::{json, Value};

use super::*;
use crate::pod::annotations::{self, Plan};

const T0: &str = "2025-03-01T10:00:00Z";

fn at(seconds: f64) -> DateTime<Utc> {
    let base = DateTime::parse_from_rfc3339(T0).unwrap().to_utc();
    base + TimeDelta::milliseconds((seconds * 1000.0) as i64)
}

fn pod(spec: Value, annotations: &[(&str, &str)]) -> Pod {
    let annotations: BTreeMap<String, String> = annotations
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "ns", "uid": "u-1", "annotations": annotations},
        "spec": spec,
        "status": {"phase": "Pending", "qosClass": "BestEffort"},
    }))
    .unwrap()
}

fn one(spec_extra: Value) -> Value {
    let mut spec = json!({"containers": [{"name": "app", "image": "nginx"}]});
    spec.as_object_mut()
        .unwrap()
        .extend(spec_extra.as_object().unwrap().clone());
    spec
}

const ENV: Environment = Environment {
    host_ip: "127.0.0.1",
    pod_ip: Some("10.244.0.5"),
    finishing_run: Duration::from_secs(1),
};

/// Advances `pod` at `seconds` after T0 and stores the status written.
fn step(pod: &mut Pod, seconds: f64) -> Next {
    let (plan, warnings) = Plan::parse(pod.metadata.annotations.as_ref());
    assert!(warnings.is_empty());
    let next = advance(pod, &plan, &ENV, at(seconds));
    if let Some(status) = &next.status {
        pod.status = Some(status.clone());
    }
    next
}

fn status_json(pod: &Pod) -> Value {
    serde_json::to_value(pod.status.as_ref().unwrap()).unwrap()
}

fn condition(pod: &Pod, kind: &str) -> Value {
    let status = status_json(pod);
    status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == kind)
        .cloned()
        .unwrap_or(Value::Null)
}

#[test]
fn a_pod_with_nothing_to_wait_for_is_running_and_ready_in_one_write() {
    let mut p = pod(one(json!({})), &[]);
    let next = step(&mut p, 0.4);
    assert!(next.status.is_some() && !next.delete && next.wake_at.is_none());
    let s = status_json(&p);
    assert_eq!(s["phase"], "Running");
    assert_eq!(s["podIP"], "10.244.0.5");
    assert_eq!(s["podIPs"], json!([{"ip": "10.244.0.5"}]));
    assert_eq!(s["hostIP"], "127.0.0.1");
    assert_eq!(s["startTime"], T0);
    assert_eq!(s["qosClass"], "BestEffort");
    let c = &s["containerStatuses"][0];
    assert_eq!(c["image"], "docker.io/library/nginx:latest");
    assert!(c["imageID"]
        .as_str()
        .unwrap()
        .starts_with("docker.io/library/nginx@sha256:"));
    assert!(c["containerID"]
        .as_str()
        .unwrap()
        .starts_with("containerd://"));
    assert_eq!(c["ready"], true);
    assert_eq!(c["started"], true);
    assert_eq!(c["restartCount"], 0);
    assert_eq!(c["state"]["running"]["startedAt"], T0);
    for kind in conditions::OWNED {
        assert_eq!(condition(&p, kind)["status"], "True", "{kind}");
    }
    // Nothing changes later: no write, nothing to wake for.
    assert_eq!(
        step(&mut p, 60.0),
        Next {
            status: None,
            delete: false,
            wake_at: None
        }
    );
}

/// The conditions as the API stores a patch of `written` over `stored`:
/// a strategic merge by type, in place, new ones appended.
fn merged_by_type(stored: &[PodCondition], written: &[PodCondition]) -> Vec<PodCondition> {
    let mut out: Vec<PodCondition> = stored
        .iter()
        .map(|c| {
            written
                .iter()
                .find(|w| w.type_ == c.type_)
                .unwrap_or(c)
                .clone()
        })
        .collect();
    out.extend(
        written
            .iter()
            .filter(|w| !stored.iter().any(|c| c.type_ == w.type_))
            .cloned(),
    );
    out
}

#[test]
fn a_pod_the_scheduler_bound_is_written_once_not_again_when_the_watch_returns_it() {
    let mut p = pod(one(json!({})), &[]);
    let scheduled = json!([{"type": "PodScheduled", "status": "True", "lastTransitionTime": T0}]);
    p.status.as_mut().unwrap().conditions = Some(serde_json::from_value(scheduled).unwrap());
    let stored = p.status.clone().unwrap().conditions.unwrap();
    let (plan, _) = Plan::parse(None);
    let written = advance(&p, &plan, &ENV, at(0.4))
        .status
        .expect("a first write");
    let mut as_stored = written.clone();
    as_stored.conditions = Some(merged_by_type(
        &stored,
        written.conditions.as_deref().unwrap(),
    ));
    assert_eq!(as_stored, written, "the API keeps the order written");
    p.status = Some(as_stored);
    assert_eq!(advance(&p, &plan, &ENV, at(1.0)).status, None);
}

#[test]
fn a_readiness_probe_holds_readiness_until_its_initial_delay() {
    let spec = json!({"containers": [{"name": "app", "image": "nginx",
        "readinessProbe": {"initialDelaySeconds": 5, "httpGet": {"port": 80}}}]});
    let mut p = pod(spec, &[]);
    let next = step(&mut p, 0.0);
    assert_eq!(next.wake_at, Some(at(5.0)));
    assert_eq!(status_json(&p)["phase"], "Running");
    let ready = condition(&p, "Ready");
    assert_eq!(ready["status"], "False");
    assert_eq!(ready["reason"], "ContainersNotReady");
    assert_eq!(ready["message"], "containers with unready status: [app]");
    assert!(step(&mut p, 4.0).status.is_none());
    assert!(step(&mut p, 5.2).status.is_some());
    assert_eq!(condition(&p, "Ready")["status"], "True");
    assert_eq!(
        condition(&p, "Ready")["lastTransitionTime"],
        "2025-03-01T10:00:05Z"
    );
    assert_eq!(condition(&p, "Initialized")["lastTransitionTime"], T0);
}

#[test]
fn a_failing_readiness_probe_never_passes() {
    let spec = json!({"containers": [{"name": "app", "image": "nginx", "readinessProbe": {"exec": {"command": ["true"]}}}]});
    let mut p = pod(spec, &[(annotations::READY, "false")]);
    let next = step(&mut p, 0.0);
    assert_eq!(next.wake_at, None);
    assert_eq!(condition(&p, "ContainersReady")["status"], "False");
}

#[test]
fn readiness_gates_hold_the_ready_condition() {
    let mut p = pod(
        one(json!({"readinessGates": [{"conditionType": "example.com/lb"}]})),
        &[],
    );
    step(&mut p, 0.0);
    let ready = condition(&p, "Ready");
    assert_eq!(ready["status"], "False");
    assert_eq!(ready["reason"], "ReadinessGatesNotReady");
    assert_eq!(
        ready["message"],
        "corresponding condition of pod readiness gate \"example.com/lb\" does not exist."
    );
    assert_eq!(condition(&p, "ContainersReady")["status"], "True");
    let mut status = p.status.clone().unwrap();
    status
        .conditions
        .as_mut()
        .unwrap()
        .push(serde_json::from_value(json!({"type": "example.com/lb", "status": "True"})).unwrap());
    p.status = Some(status);
    step(&mut p, 1.0);
    assert_eq!(condition(&p, "Ready")["status"], "True");
    assert_eq!(condition(&p, "example.com/lb")["status"], "True");
}

#[test]
fn a_pod_that_finishes_succeeds_after_its_run_time() {
    let mut p = pod(one(json!({"restartPolicy": "Never"})), &[]);
    let next = step(&mut p, 0.0);
    assert_eq!(next.wake_at, Some(at(1.0)));
    assert_eq!(status_json(&p)["phase"], "Running");
    step(&mut p, 1.0);
    let s = status_json(&p);
    assert_eq!(s["phase"], "Succeeded");
    let terminated = &s["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(terminated["exitCode"], 0);
    assert_eq!(terminated["reason"], "Completed");
    assert_eq!(terminated["startedAt"], T0);
    assert_eq!(terminated["finishedAt"], "2025-03-01T10:00:01Z");
    assert_eq!(condition(&p, "Ready")["reason"], "PodCompleted");
    assert_eq!(
        condition(&p, "PodReadyToStartContainers")["status"],
        "False"
    );
    assert_eq!(
        step(&mut p, 5.0),
        Next {
            status: None,
            delete: false,
            wake_at: None
        }
    );
}

#[test]
fn the_exit_code_annotation_fails_the_pod() {
    let mut p = pod(
        one(json!({"restartPolicy": "Never"})),
        &[
            (annotations::EXIT_CODE, "3"),
            (annotations::RUN_DURATION, "0s"),
        ],
    );
    step(&mut p, 0.0);
    let s = status_json(&p);
    assert_eq!(s["phase"], "Failed");
    assert_eq!(
        s["containerStatuses"][0]["state"]["terminated"]["exitCode"],
        3
    );
    assert_eq!(
        s["containerStatuses"][0]["state"]["terminated"]["reason"],
        "Error"
    );
    assert_eq!(condition(&p, "Ready")["reason"], "ContainersNotReady");
}

#[test]
fn on_failure_restarts_with_the_kubelets_back_off() {
    let mut p = pod(
        one(json!({"restartPolicy": "OnFailure"})),
        &[(annotations::EXIT_CODE, "1")],
    );
    step(&mut p, 0.0);
    // The first restart is immediate.
    step(&mut p, 1.0);
    let c = &status_json(&p)["containerStatuses"][0];
    assert_eq!(c["restartCount"], 1);
    assert_eq!(c["state"]["running"]["startedAt"], "2025-03-01T10:00:01Z");
    assert_eq!(c["lastState"]["terminated"]["exitCode"], 1);
    let next = step(&mut p, 2.0);
    assert_eq!(next.wake_at, Some(at(12.0)));
    let s = status_json(&p);
    assert_eq!(s["phase"], "Running");
    let c = &s["containerStatuses"][0];
    assert_eq!(c["restartCount"], 2);
    assert_eq!(c["state"]["waiting"]["reason"], "CrashLoopBackOff");
    assert_eq!(
        c["state"]["waiting"]["message"],
        "back-off 10s restarting failed container=app pod=web_ns(u-1)"
    );
    // Away for ten minutes: the node catches up in one write.
    step(&mut p, 600.0);
    let c = &status_json(&p)["containerStatuses"][0];
    assert!(c["restartCount"].as_i64().unwrap() > 5, "{c}");
}

#[test]
fn init_containers_run_in_order_before_the_main_containers() {
    let spec = json!({
        "initContainers": [{"name": "one", "image": "busybox"}, {"name": "two", "image": "busybox"}],
        "containers": [{"name": "app", "image": "nginx"}],
    });
    let mut p = pod(spec.clone(), &[(annotations::INIT_DURATION, "2s")]);
    let next = step(&mut p, 0.0);
    assert_eq!(next.wake_at, Some(at(2.0)));
    let s = status_json(&p);
    assert_eq!(s["phase"], "Pending");
    assert!(s["initContainerStatuses"][0]["state"]["running"].is_object());
    assert_eq!(
        s["initContainerStatuses"][1]["state"]["waiting"]["reason"],
        "PodInitializing"
    );
    assert_eq!(
        s["containerStatuses"][0]["state"]["waiting"]["reason"],
        "PodInitializing"
    );
    assert_eq!(
        condition(&p, "Initialized")["message"],
        "containers with incomplete status: [one two]"
    );
    step(&mut p, 2.0);
    assert!(status_json(&p)["initContainerStatuses"][1]["state"]["running"].is_object());
    step(&mut p, 4.0);
    let s = status_json(&p);
    assert_eq!(s["phase"], "Running");
    assert_eq!(s["initContainerStatuses"][1]["ready"], true);
    assert_eq!(
        s["containerStatuses"][0]["state"]["running"]["startedAt"],
        "2025-03-01T10:00:04Z"
    );

    let mut quick = pod(spec, &[]);
    step(&mut quick, 0.0);
    assert_eq!(status_json(&quick)["phase"], "Running");
    assert_eq!(condition(&quick, "Ready")["status"], "True");
}

#[test]
fn sidecars_keep_running_and_count_for_readiness() {
    let spec = json!({
        "initContainers": [{"name": "proxy", "image": "envoy", "restartPolicy": "Always",
                            "readinessProbe": {"initialDelaySeconds": 3, "exec": {"command": ["true"]}}}],
        "containers": [{"name": "app", "image": "nginx"}],
    });
    let mut p = pod(spec, &[]);
    step(&mut p, 0.0);
    let s = status_json(&p);
    assert_eq!(s["phase"], "Running");
    assert!(s["initContainerStatuses"][0]["state"]["running"].is_object());
    assert_eq!(
        condition(&p, "Ready")["message"],
        "containers with unready status: [proxy]"
    );
    step(&mut p, 3.0);
    assert_eq!(condition(&p, "Ready")["status"], "True");
}

#[test]
fn a_deleted_pod_stops_then_is_deleted() {
    let mut p = pod(one(json!({})), &[]);
    step(&mut p, 0.0);
    p.metadata.deletion_timestamp = Some(Time(at(40.0)));
    p.metadata.deletion_grace_period_seconds = Some(30);
    let next = step(&mut p, 10.5);
    assert!(next.delete);
    let s = status_json(&p);
    assert_eq!(s["phase"], "Succeeded");
    let terminated = &s["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(terminated["exitCode"], 0);
    assert_eq!(terminated["finishedAt"], "2025-03-01T10:00:10Z");
    // Once terminal, only the deletion is left.
    assert_eq!(
        step(&mut p, 11.0),
        Next {
            status: None,
            delete: true,
            wake_at: None
        }
    );
}

#[test]
fn a_container_slower_than_the_grace_period_is_killed() {
    let mut p = pod(one(json!({})), &[(annotations::STOP_DURATION, "1m")]);
    step(&mut p, 0.0);
    p.metadata.deletion_timestamp = Some(Time(at(40.0)));
    p.metadata.deletion_grace_period_seconds = Some(30);
    let next = step(&mut p, 10.0);
    assert_eq!(
        (next.status, next.delete, next.wake_at),
        (None, false, Some(at(40.0)))
    );
    let next = step(&mut p, 40.0);
    assert!(next.delete);
    let s = status_json(&p);
    assert_eq!(s["phase"], "Failed");
    assert_eq!(
        s["containerStatuses"][0]["state"]["terminated"]["exitCode"],
        137
    );
}

#[test]
fn a_pod_deleted_before_it_started_reports_unknown_containers() {
    let mut p = pod(one(json!({})), &[(annotations::START_DELAY, "1h")]);
    step(&mut p, 0.0);
    let s = status_json(&p);
    assert_eq!(s["phase"], "Pending");
    assert_eq!(
        s["containerStatuses"][0]["state"]["waiting"]["reason"],
        "ContainerCreating"
    );
    assert!(s["podIP"].is_null());
    assert_eq!(
        condition(&p, "PodReadyToStartContainers")["status"],
        "False"
    );
    p.metadata.deletion_timestamp = Some(Time(at(35.0)));
    p.metadata.deletion_grace_period_seconds = Some(30);
    assert!(step(&mut p, 5.0).delete);
    let s = status_json(&p);
    assert_eq!(s["phase"], "Failed");
    assert_eq!(
        s["containerStatuses"][0]["state"]["terminated"]["reason"],
        "ContainerStatusUnknown"
    );
}

#[test]
fn the_active_deadline_fails_the_pod() {
    let mut p = pod(one(json!({"activeDeadlineSeconds": 30})), &[]);
    assert_eq!(step(&mut p, 0.0).wake_at, Some(at(30.0)));
    let next = step(&mut p, 30.0);
    assert!(!next.delete);
    let s = status_json(&p);
    assert_eq!(s["phase"], "Failed");
    assert_eq!(s["reason"], "DeadlineExceeded");
    assert_eq!(
        s["containerStatuses"][0]["state"]["terminated"]["exitCode"],
        137
    );
}

#[test]
fn a_start_delay_keeps_the_pod_pending_and_host_network_uses_the_node_ip() {
    let mut p = pod(
        one(json!({"hostNetwork": true})),
        &[(annotations::START_DELAY, "2s")],
    );
    assert_eq!(step(&mut p, 0.0).wake_at, Some(at(2.0)));
    assert!(status_json(&p)["podIP"].is_null());
    step(&mut p, 2.0);
    let s = status_json(&p);
    assert_eq!(s["phase"], "Running");
    assert_eq!(s["podIP"], "127.0.0.1");
}

#[test]
fn a_refused_pod_fails_with_the_kubelets_message() {
    let p = pod(one(json!({})), &[]);
    let status = rejected(
        &p,
        "OutOfcpu",
        "Node didn't have enough resource: cpu, requested: 1000, used: 0, capacity: 500",
    );
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.reason.as_deref(), Some("OutOfcpu"));
    assert_eq!(
        status.message.as_deref(),
        Some("Pod was rejected: Node didn't have enough resource: cpu, requested: 1000, used: 0, capacity: 500")
    );
    let mut failed = p.clone();
    failed.status = Some(status);
    let (plan, _) = Plan::parse(None);
    assert_eq!(advance(&failed, &plan, &ENV, at(1.0)).status, None);
}
