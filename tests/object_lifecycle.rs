//! What happens to objects over their life, driven with kubectl and raw
//! HTTP against the real binaries on both stores: services get unique
//! cluster IPs and node ports (also when two API servers allocate at
//! once), pods are bound to nodes and deleted gracefully, and deletion
//! propagates to dependents (garbage collection) and namespace contents.

use std::collections::HashSet;
use std::time::Duration;

use capstan_tests::apiserver::{
    ApiCluster, ApiServer, Backend, Http, Kubectl, StoreBackend, WatchEvents,
};
use capstan_tests::poll::wait_for;
use serde_json::{json, Value};

capstan_tests::on_both_backends!(
    services_hold_unique_cluster_ips_and_node_ports,
    deletion_propagates_to_dependents,
    finalizers_hold_objects_and_namespaces,
    pods_are_bound_and_deleted_gracefully,
    events_expire_after_the_event_ttl,
    leaked_claims_are_given_back,
);

const PATIENCE: Duration = Duration::from_secs(20);
const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn service(name: &str, kind: &str, cluster_ip: Option<&str>, node_port: Option<i64>) -> Value {
    let mut port = json!({"port": 80});
    if let Some(node_port) = node_port {
        port["nodePort"] = node_port.into();
    }
    let mut spec = json!({"type": kind, "ports": [port]});
    if let Some(ip) = cluster_ip {
        spec["clusterIP"] = ip.into();
    }
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec})
}

fn create_service(port: u16, body: &Value) -> (u16, Value) {
    Http::connect(port).request("POST", "/api/v1/namespaces/default/services", Some(body))
}

/// Creates `count` services named `<prefix>-<i>` through `port`.
fn create_many(port: u16, prefix: String, kind: &'static str, count: usize) -> Vec<Value> {
    let mut http = Http::connect(port);
    (0..count)
        .map(|i| {
            let body = service(&format!("{prefix}-{i}"), kind, None, None);
            let (code, created) =
                http.request("POST", "/api/v1/namespaces/default/services", Some(&body));
            assert_eq!(code, 201, "{created}");
            created
        })
        .collect()
}

fn services_hold_unique_cluster_ips_and_node_ports(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let second = cluster.add_apiserver("second");
    let kubectl = &cluster.kubectl;

    let default = kubectl.ok(&["get", "svc", "kubernetes", "--no-headers"]);
    assert!(
        default.contains("ClusterIP")
            && default.contains("10.96.0.1 ")
            && default.contains("443/TCP"),
        "{default}"
    );

    // Two API servers allocate at once: every address and port is unique.
    let writers: Vec<_> = [(cluster.port, "a"), (second.port, "b")]
        .into_iter()
        .map(|(port, name)| {
            std::thread::spawn(move || create_many(port, format!("np-{name}"), "NodePort", 12))
        })
        .collect();
    let created: Vec<Value> = writers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    let ips: HashSet<&str> = created
        .iter()
        .map(|s| s["spec"]["clusterIP"].as_str().unwrap())
        .collect();
    let ports: HashSet<i64> = created
        .iter()
        .map(|s| s["spec"]["ports"][0]["nodePort"].as_i64().unwrap())
        .collect();
    assert_eq!((ips.len(), ports.len()), (24, 24), "{created:?}");
    for ip in &ips {
        let octets: Vec<u8> = ip.split('.').map(|o| o.parse().unwrap()).collect();
        assert!(octets[0] == 10 && (96..112).contains(&octets[1]), "{ip}");
    }
    assert!(ports.iter().all(|p| (30000..=32767).contains(p)));

    // Asking for a taken or foreign address or port is Invalid.
    let taken_ip = created[0]["spec"]["clusterIP"].as_str().unwrap();
    let taken_port = created[1]["spec"]["ports"][0]["nodePort"].as_i64().unwrap();
    let (code, status) = create_service(
        cluster.port,
        &service("dup-ip", "ClusterIP", Some(taken_ip), None),
    );
    assert_eq!(code, 422, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("provided IP is already allocated"),
        "{status}"
    );
    let (code, status) = create_service(
        second.port,
        &service("dup-port", "NodePort", None, Some(taken_port)),
    );
    assert_eq!(code, 422, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("provided port is already allocated"),
        "{status}"
    );
    let (code, status) = create_service(
        cluster.port,
        &service("far", "NodePort", Some("192.168.1.1"), Some(80)),
    );
    assert_eq!(code, 422, "{status}");
    let message = status["message"].as_str().unwrap();
    assert!(
        message.contains("not in the valid range")
            && message.contains("10.96.0.0/12")
            && message.contains("30000-32767"),
        "{status}"
    );
    assert!(kubectl
        .fails(&["get", "svc", "dup-ip"])
        .contains("NotFound"));

    // A deleted service gives its address and port back.
    kubectl.ok(&["delete", "svc", "np-a-0", "np-a-1"]);
    let reuse = service("reuse", "NodePort", Some(taken_ip), Some(taken_port));
    let (code, status) = create_service(second.port, &reuse);
    assert_eq!(code, 201, "{status}");

    // An update without the address keeps it; changing it is refused;
    // turning the service into a ClusterIP one gives its node port back.
    let (code, kept) = Http::connect(cluster.port).request(
        "PATCH",
        "/api/v1/namespaces/default/services/reuse",
        Some(&json!({"spec": {"clusterIP": null, "clusterIPs": null}})),
    );
    assert_eq!(
        (code, kept["spec"]["clusterIP"].as_str()),
        (200, Some(taken_ip)),
        "{kept}"
    );
    let moved = kubectl.fails(&[
        "patch",
        "svc",
        "reuse",
        "-p",
        r#"{"spec":{"clusterIP":"10.96.7.7","clusterIPs":["10.96.7.7"]}}"#,
    ]);
    assert!(moved.contains("may not change once set"), "{moved}");
    kubectl.ok(&["patch", "svc", "reuse", "--type=json", "-p",
        r#"[{"op":"replace","path":"/spec/type","value":"ClusterIP"},{"op":"remove","path":"/spec/ports/0/nodePort"}]"#]);
    let (code, status) = create_service(
        cluster.port,
        &service("port-again", "NodePort", None, Some(taken_port)),
    );
    assert_eq!(code, 201, "{status}");

    // A namespace's services give theirs back when the namespace goes.
    kubectl.ok(&["create", "namespace", "team"]);
    let mut http = Http::connect(cluster.port);
    let inside = service("inside", "ClusterIP", Some("10.100.0.100"), None);
    let (code, status) = http.request("POST", "/api/v1/namespaces/team/services", Some(&inside));
    assert_eq!(code, 201, "{status}");
    kubectl.ok(&["delete", "namespace", "team"]);
    wait_for(PATIENCE, "namespace team to go", || {
        (http.get("/api/v1/namespaces/team").0 == 404).then_some(())
    });
    let (code, status) = create_service(
        cluster.port,
        &service("outside", "ClusterIP", Some("10.100.0.100"), None),
    );
    assert_eq!(code, 201, "{status}");
    drop(second);
}

const OWNER: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: owner}\ndata: {k: v}\n";

fn uid(kubectl: &Kubectl, what: &[&str]) -> String {
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    args.extend(["-o", "jsonpath={.metadata.uid}"]);
    kubectl.ok(&args)
}

/// A configmap owned by the given (name, uid) configmaps.
fn dependent(kubectl: &Kubectl, name: &str, owners: &[(&str, &str)]) {
    let refs: Vec<Value> = owners
        .iter()
        .map(|(owner, uid)| json!({"apiVersion": "v1", "kind": "ConfigMap", "name": owner, "uid": uid, "blockOwnerDeletion": true}))
        .collect();
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "ownerReferences": refs}});
    kubectl.ok_with_input(&["create", "-f", "-"], &body.to_string());
}

/// The names of `kind` in `default`, but for the `kube-root-ca.crt`
/// ConfigMap every namespace has (as in kube).
fn names(kubectl: &Kubectl, kind: &str) -> Vec<String> {
    let out = kubectl.ok(&["get", kind, "-o", "jsonpath={.items[*].metadata.name}"]);
    out.split_whitespace()
        .filter(|name| *name != "kube-root-ca.crt")
        .map(str::to_string)
        .collect()
}

fn owned_pair(kubectl: &Kubectl) -> String {
    kubectl.ok_with_input(&["apply", "-f", "-"], OWNER);
    let owner = uid(kubectl, &["cm", "owner"]);
    dependent(kubectl, "d1", &[("owner", &owner)]);
    dependent(kubectl, "d2", &[("owner", &owner)]);
    owner
}

fn deletion_propagates_to_dependents(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let kubectl = &cluster.kubectl;

    // Background (kubectl's default): the owner goes, then its dependents.
    owned_pair(kubectl);
    kubectl.ok(&["delete", "cm", "owner"]);
    wait_for(PATIENCE, "dependents to be collected", || {
        names(kubectl, "cm").is_empty().then_some(())
    });

    // Foreground: the owner is marked (deletionTimestamp and the
    // foregroundDeletion finalizer), the dependents go, then the owner,
    // in that order on a watch opened before the delete.
    owned_pair(kubectl);
    let (code, list) = Http::connect(cluster.port).get(CMS);
    assert_eq!(code, 200, "{list}");
    let from = list["metadata"]["resourceVersion"].as_str().unwrap();
    let mut watch = WatchEvents::open(
        cluster.port,
        &format!("{CMS}?watch=1&resourceVersion={from}"),
    );
    kubectl.ok(&["delete", "cm", "owner", "--cascade=foreground"]);
    let mut order = Vec::new();
    while !order.contains(&"DELETED owner".to_string()) {
        let event = watch
            .next(PATIENCE)
            .unwrap_or_else(|| panic!("no event after {order:?}"));
        let object = &event["object"];
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let marked = object["metadata"]["deletionTimestamp"].is_string()
            && object["metadata"]["finalizers"] == json!(["foregroundDeletion"]);
        match event["type"].as_str() {
            Some("DELETED") => order.push(format!("DELETED {name}")),
            Some("MODIFIED") if name == "owner" && marked && order.is_empty() => {
                order.push("marked owner".into())
            }
            _ => {}
        }
    }
    if order.len() == 4 {
        order[1..3].sort();
    }
    assert_eq!(
        order,
        ["marked owner", "DELETED d1", "DELETED d2", "DELETED owner"],
        "foreground order"
    );
    assert!(
        names(kubectl, "cm").is_empty(),
        "{:?}",
        names(kubectl, "cm")
    );

    // Orphan: the dependents stay, without the reference.
    owned_pair(kubectl);
    kubectl.ok(&["delete", "cm", "owner", "--cascade=orphan"]);
    assert_eq!(names(kubectl, "cm"), ["d1", "d2"]);
    let refs = kubectl.ok(&[
        "get",
        "cm",
        "d1",
        "-o",
        "jsonpath={.metadata.ownerReferences}",
    ]);
    assert_eq!(refs.trim(), "", "no owner references left: {refs}");
    kubectl.ok(&["delete", "cm", "--all"]);

    // Two owners: losing one only drops that reference.
    let first = owned_pair(kubectl);
    kubectl.ok_with_input(&["apply", "-f", "-"], &OWNER.replace("owner", "other"));
    let other = uid(kubectl, &["cm", "other"]);
    dependent(kubectl, "shared", &[("owner", &first), ("other", &other)]);
    kubectl.ok(&["delete", "cm", "owner"]);
    wait_for(PATIENCE, "the shared dependent to lose one owner", || {
        let refs = kubectl.ok(&[
            "get",
            "cm",
            "shared",
            "-o",
            "jsonpath={.metadata.ownerReferences[*].name}",
        ]);
        (refs.trim() == "other").then_some(())
    });
    wait_for(PATIENCE, "sole dependents to be collected", || {
        (names(kubectl, "cm") == ["other", "shared"]).then_some(())
    });
}

fn finalizers_hold_objects_and_namespaces(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let kubectl = &cluster.kubectl;
    kubectl.ok(&["create", "namespace", "held"]);
    let held = json!({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "keep", "namespace": "held", "finalizers": ["example.com/hold"]}});
    kubectl.ok_with_input(&["create", "-f", "-"], &held.to_string());
    kubectl.ok(&["create", "configmap", "plain", "-n", "held"]);

    kubectl.ok(&["delete", "namespace", "held", "--wait=false"]);
    wait_for(PATIENCE, "the unheld contents to go", || {
        (names(kubectl, "cm").is_empty()
            && kubectl
                .ok(&["get", "cm", "-n", "held", "-o", "name"])
                .trim()
                == "configmap/keep")
            .then_some(())
    });
    let phase = kubectl.ok(&["get", "ns", "held", "-o", "jsonpath={.status.phase}"]);
    assert_eq!(phase, "Terminating");
    let marked = kubectl.ok(&[
        "get",
        "cm",
        "keep",
        "-n",
        "held",
        "-o",
        "jsonpath={.metadata.deletionTimestamp}",
    ]);
    assert!(
        !marked.is_empty(),
        "the held configmap is marked for deletion"
    );

    kubectl.ok(&[
        "patch",
        "cm",
        "keep",
        "-n",
        "held",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    wait_for(
        PATIENCE,
        "the namespace to go once its contents are gone",
        || {
            let out = kubectl.run(&["get", "ns", "held"]);
            (!out.status.success()).then_some(())
        },
    );
}

fn pods_are_bound_and_deleted_gracefully(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let kubectl = &cluster.kubectl;
    for pod in ["bound", "legacy", "loose"] {
        kubectl.ok(&["run", pod, "--image=nginx"]);
    }
    let binding = r#"{"apiVersion":"v1","kind":"Binding","metadata":{"name":"bound"},"target":{"kind":"Node","name":"node-a"}}"#;
    std::fs::write(cluster.dir.path().join("binding.json"), binding).unwrap();
    let file = cluster.dir.path().join("binding.json");
    let file = file.to_str().unwrap();
    let done = kubectl.ok(&[
        "create",
        "--raw",
        "/api/v1/namespaces/default/pods/bound/binding",
        "-f",
        file,
    ]);
    assert!(done.contains("Success"), "{done}");
    let again = kubectl.fails(&[
        "create",
        "--raw",
        "/api/v1/namespaces/default/pods/bound/binding",
        "-f",
        file,
    ]);
    assert!(again.contains("already assigned to node"), "{again}");
    let mut http = Http::connect(cluster.port);
    let legacy = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "legacy"}, "target": {"name": "node-b"}});
    let (code, status) = http.request("POST", "/api/v1/namespaces/default/bindings", Some(&legacy));
    assert_eq!(code, 201, "{status}");
    let nowhere =
        json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "loose"}, "target": {}});
    let (code, status) = http.request(
        "POST",
        "/api/v1/namespaces/default/pods/loose/binding",
        Some(&nowhere),
    );
    assert_eq!(code, 422, "{status}");
    let wide = kubectl.ok(&["get", "pods", "-o", "wide"]);
    assert!(
        wide.lines()
            .any(|l| l.starts_with("bound") && l.contains("node-a")),
        "{wide}"
    );
    assert!(
        wide.lines()
            .any(|l| l.starts_with("legacy") && l.contains("node-b")),
        "{wide}"
    );
    let scheduled = kubectl.ok(&[
        "get",
        "pod",
        "bound",
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"PodScheduled\")].status}",
    ]);
    assert_eq!(scheduled, "True");

    // A pod on a node is Terminating for its grace period, then goes.
    kubectl.ok(&["delete", "pod", "bound", "--grace-period=2", "--wait=false"]);
    let status = kubectl.ok(&["get", "pod", "bound", "--no-headers"]);
    assert!(status.contains("Terminating"), "{status}");
    wait_for(PATIENCE, "the grace period to end", || {
        (!kubectl.run(&["get", "pod", "bound"]).status.success()).then_some(())
    });
    // A pod on no node, or a forced deletion, goes at once.
    kubectl.ok(&["delete", "pod", "loose", "--wait=false"]);
    kubectl.ok(&["delete", "pod", "legacy", "--grace-period=0", "--force"]);
    assert!(
        names(kubectl, "pods").is_empty(),
        "{:?}",
        names(kubectl, "pods")
    );
}

fn events_expire_after_the_event_ttl(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreBackend::start(backend, &dir.path().join("store"));
    let api = ApiServer::start_with(&[store.url()], dir.path(), "api", &["--event-ttl", "2s"]);
    let mut http = Http::connect(api.port);
    let (_, list) = http.get("/api/v1/namespaces/default/events");
    let from = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut watch = WatchEvents::open(
        api.port,
        &format!("/api/v1/namespaces/default/events?watch=1&resourceVersion={from}"),
    );
    let event = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "brief"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
        "reason": "Tested", "message": "expires", "type": "Normal"});
    let (code, status) = http.request("POST", "/api/v1/namespaces/default/events", Some(&event));
    assert_eq!(code, 201, "{status}");
    let (code, status) = http.request(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "stays"}})),
    );
    assert_eq!(code, 201, "{status}");

    wait_for(PATIENCE, "the event to expire", || {
        (http.get("/api/v1/namespaces/default/events/brief").0 == 404).then_some(())
    });
    let added = watch.next(PATIENCE).expect("the ADDED event");
    assert_eq!(added["type"], "ADDED", "{added}");
    let deleted = watch
        .next(PATIENCE)
        .expect("a DELETED event when it expires");
    assert_eq!(
        (
            deleted["type"].as_str(),
            deleted["object"]["metadata"]["name"].as_str()
        ),
        (Some("DELETED"), Some("brief")),
        "{deleted}"
    );
    assert_eq!(
        http.get("/api/v1/namespaces/default/configmaps/stays").0,
        200,
        "other types do not expire"
    );
}

/// A claim whose owner is gone is released by the repair pass; a live
/// service's claim is not. The owner goes as an operator's
/// `etcdctl del` of the object's key would remove it: behind the API
/// server's back, leaving its cluster IP claimed by nobody.
fn leaked_claims_are_given_back(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreBackend::start(backend, &dir.path().join("store"));
    let api = ApiServer::start_with(&[store.url()], dir.path(), "api", &[]);
    let mut http = Http::connect(api.port);
    for (name, ip) in [("ghost", "10.96.9.9"), ("kept", "10.96.8.8")] {
        let object = service(name, "ClusterIP", Some(ip), None);
        let (code, status) =
            http.request("POST", "/api/v1/namespaces/default/services", Some(&object));
        assert_eq!(code, 201, "{status}");
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let deleted = runtime.block_on(async {
        let mut client = etcd_client::Client::connect([store.url()], None)
            .await
            .unwrap();
        let options = etcd_client::DeleteOptions::new().with_prefix();
        let response = client
            .delete("/registry/services/default/ghost", Some(options))
            .await
            .unwrap();
        response.deleted()
    });
    assert_eq!(
        deleted, 1,
        "the ghost service's key is where the store layout puts it"
    );
    // Repair passes run at start and then every minute: a restart
    // brings the next one forward.
    drop(http);
    drop(api);
    let api = ApiServer::start_with(&[store.url()], dir.path(), "api-restarted", &[]);
    let mut http = Http::connect(api.port);
    let wanted = service("reuser", "ClusterIP", Some("10.96.9.9"), None);
    wait_for(PATIENCE, "the leaked cluster IP to be given back", || {
        let (code, _) = http.request("POST", "/api/v1/namespaces/default/services", Some(&wanted));
        (code == 201).then_some(())
    });
    let taken = service("thief", "ClusterIP", Some("10.96.8.8"), None);
    let (code, status) = http.request("POST", "/api/v1/namespaces/default/services", Some(&taken));
    assert_eq!(code, 422, "a live service keeps its claim: {status}");
}
