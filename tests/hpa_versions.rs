//! HorizontalPodAutoscalers in autoscaling/v1 and autoscaling/v2 over
//! one v2 storage: `kubectl autoscale` (which writes v1) works, and the
//! object reads as v1 (`targetCPUUtilizationPercentage`) and as v2
//! (`metrics`), with what v1 cannot say kept in kube's annotations.

use std::time::Duration;

use capstan_tests::apiserver::{ApiCluster, Backend, Http, WatchEvents};
use capstan_tests::etcdctl::etcdctl_ok;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(20);

capstan_tests::on_both_backends!(kubectl_autoscale_reads_as_v1_and_v2);

const V1: &str = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers";
const V2: &str = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers";

/// Reads HPA `x` at `path`, changes it with `change` and writes it back,
/// reading again when the write conflicts: the controller manager's HPA
/// controller writes the status between a read and a write, as it would
/// under any client's read-modify-write.
fn updated(http: &mut Http, path: &str, change: impl Fn(&mut Value)) {
    for _ in 0..10 {
        let (code, mut object) = http.get(&format!("{path}/x"));
        assert_eq!(code, 200, "{object}");
        change(&mut object);
        let (code, answer) = http.request("PUT", &format!("{path}/x"), Some(&object));
        match code {
            200 => return,
            409 => continue,
            _ => panic!("PUT {path}/x: {code} {answer}"),
        }
    }
    panic!("PUT {path}/x conflicted 10 times in a row");
}

fn kubectl_autoscale_reads_as_v1_and_v2(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let kubectl = &cluster.kubectl;
    kubectl.ok(&["create", "deployment", "x", "--image=nginx"]);
    let out = kubectl.ok(&[
        "autoscale",
        "deployment",
        "x",
        "--max=5",
        "--cpu-percent=60",
    ]);
    assert!(
        out.contains("horizontalpodautoscaler.autoscaling/x autoscaled"),
        "{out}"
    );
    let table = kubectl.ok(&["get", "hpa"]);
    assert!(table.contains("cpu: <unknown>/60%"), "{table}");

    let mut http = Http::connect(cluster.port);
    let (code, v1) = http.get(&format!("{V1}/x"));
    assert_eq!(code, 200, "{v1}");
    assert_eq!(v1["apiVersion"], "autoscaling/v1");
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 60);
    assert_eq!(v1["spec"]["maxReplicas"], 5);
    let (_, v2) = http.get(&format!("{V2}/x"));
    assert_eq!(v2["apiVersion"], "autoscaling/v2");
    let cpu = json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}]);
    assert_eq!(v2["spec"]["metrics"], cpu);
    let key = "/registry/horizontalpodautoscalers/default/x";
    let raw = etcdctl_ok(&cluster.store.url(), &["get", key, "--print-value-only"]);
    let raw: Value = serde_json::from_str(raw.trim()).expect("stored as JSON");
    assert_eq!(raw["apiVersion"], "autoscaling/v2");

    // A v2 metric v1 cannot hold rides in kube's annotation, and a v1
    // update that keeps the annotation keeps the metric.
    let memory = json!({"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}});
    updated(&mut http, V2, |both| {
        both["spec"]["metrics"]
            .as_array_mut()
            .unwrap()
            .push(memory.clone());
    });
    updated(&mut http, V1, |v1| {
        let stashed = v1["metadata"]["annotations"]["autoscaling.alpha.kubernetes.io/metrics"]
            .as_str()
            .unwrap_or("");
        assert!(stashed.contains("memory"), "{v1}");
        v1["spec"]["targetCPUUtilizationPercentage"] = 70.into();
    });
    let (_, v2) = http.get(&format!("{V2}/x"));
    assert_eq!(
        v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
        70
    );
    assert_eq!(v2["spec"]["metrics"][1], memory);
    assert!(
        v2["metadata"]["annotations"]
            .get("autoscaling.alpha.kubernetes.io/metrics")
            .is_none(),
        "{v2}"
    );

    // Lists and watches in each version.
    for (path, version) in [(V1, "autoscaling/v1"), (V2, "autoscaling/v2")] {
        let (_, list) = http.get(path);
        assert_eq!(list["items"][0]["apiVersion"], version, "{list}");
        let mut watch =
            WatchEvents::open(cluster.port, &format!("{path}?watch=1&resourceVersion=0"));
        let event = watch.next(WAIT).expect("the initial event");
        assert_eq!(event["object"]["apiVersion"], version, "{event}");
    }
    // v1 validation names the field v1 sent.
    let mut bad = v1.clone();
    bad["metadata"] = json!({"name": "bad"});
    bad["spec"]["targetCPUUtilizationPercentage"] = 0.into();
    let (code, refused) = http.request("POST", V1, Some(&bad));
    assert_eq!(code, 422, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("targetCPUUtilizationPercentage"),
        "{refused}"
    );
}
