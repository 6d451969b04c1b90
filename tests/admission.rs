//! The admission plugins, driven with kubectl over HTTPS: what
//! NamespaceLifecycle refuses, what ServiceAccount and LimitRanger add to
//! a pod, and ResourceQuota stopping the fourth pod, also when two API
//! servers on one store admit pods at once.

use std::time::Duration;

use capstan_tests::apiserver::{root_ca_flags, ApiCluster, Backend, Kubectl};
use capstan_tests::poll::wait_for;
use capstan_tests::tls::Identity;
use serde_json::Value;

capstan_tests::on_both_backends!(
    a_terminating_or_missing_namespace_takes_nothing_new,
    a_quota_of_three_pods_stops_the_fourth_with_two_apiservers_racing,
);

mod capstan_only {
    use capstan_tests::apiserver::Backend;

    #[test]
    fn a_new_namespace_gets_its_account_and_pods_their_token() {
        super::a_new_namespace_gets_its_account_and_pods_their_token(Backend::Capstan)
    }

    #[test]
    fn limit_range_defaults_show_on_the_created_pod() {
        super::limit_range_defaults_show_on_the_created_pod(Backend::Capstan)
    }

    #[test]
    fn a_scoped_quota_counts_only_the_pods_in_its_scope() {
        super::a_scoped_quota_counts_only_the_pods_in_its_scope(Backend::Capstan)
    }

    #[test]
    fn priority_classes_and_the_default_storage_class_fill_in() {
        super::priority_classes_and_the_default_storage_class_fill_in(Backend::Capstan)
    }
}

const WAIT: Duration = Duration::from_secs(30);

fn json(kubectl: &Kubectl, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.extend(["-o", "json"]);
    serde_json::from_str(&kubectl.ok(&args)).expect("kubectl prints JSON")
}

/// Waits until `kubectl get <what> -n <namespace>` finds it.
fn wait_exists(kubectl: &Kubectl, what: &[&str], namespace: &str) -> Value {
    let mut args = vec!["get"];
    args.extend(what);
    args.extend(["-n", namespace, "-o", "json"]);
    wait_for(WAIT, &format!("{what:?} in {namespace}"), || {
        let out = kubectl.run(&args);
        out.status
            .success()
            .then(|| serde_json::from_slice(&out.stdout).expect("JSON"))
    })
}

fn a_terminating_or_missing_namespace_takes_nothing_new(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let kubectl = &cluster.kubectl;
    kubectl.ok(&["create", "namespace", "doomed"]);
    // A finalizer keeps a ConfigMap, and so the namespace, while it goes.
    kubectl.ok_with_input(
        &["apply", "-n", "doomed", "-f", "-"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: held, finalizers: [example.com/hold]}\n",
    );
    kubectl.ok(&["delete", "namespace", "doomed", "--wait=false"]);
    wait_for(WAIT, "doomed to be Terminating", || {
        let phase = json(kubectl, &["get", "namespace", "doomed"]);
        (phase["status"]["phase"] == "Terminating").then_some(())
    });
    let refused = kubectl.fails(&["run", "late", "--image=nginx", "-n", "doomed"]);
    assert!(
        refused.contains("Forbidden")
            && refused.contains(
                "pods \"late\" is forbidden: unable to create new content in namespace doomed because it is being terminated"
            ),
        "{refused}"
    );
    assert!(kubectl
        .fails(&["get", "pod", "late", "-n", "doomed"])
        .contains("NotFound"));

    let missing = kubectl.fails(&["create", "configmap", "c", "-n", "nowhere"]);
    assert!(
        missing.contains("namespaces \"nowhere\" not found"),
        "{missing}"
    );
    for system in ["kube-system", "default", "kube-public", "kube-node-lease"] {
        let refused = kubectl.fails(&["delete", "namespace", system, "--wait=false"]);
        assert!(
            refused.contains(&format!(
                "namespaces \"{system}\" is forbidden: this namespace may not be deleted"
            )),
            "{refused}"
        );
        assert!(kubectl.ok(&["get", "namespace", system]).contains("Active"));
    }
    // Let the namespace go.
    kubectl.ok(&[
        "patch",
        "configmap",
        "held",
        "-n",
        "doomed",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    wait_for(WAIT, "doomed to go", || {
        let out = kubectl.run(&["get", "namespace", "doomed"]);
        (!out.status.success()).then_some(())
    });
}

fn a_new_namespace_gets_its_account_and_pods_their_token(backend: Backend) {
    let cluster = ApiCluster::start_with(backend, root_ca_flags);
    let kubectl = &cluster.kubectl;
    kubectl.ok(&["create", "namespace", "team"]);
    // A pod at once: the plugin waits for the controller's `default`.
    kubectl.ok(&["run", "web", "--image=nginx", "-n", "team"]);
    let account = wait_exists(kubectl, &["serviceaccount", "default"], "team");
    assert_eq!(account["metadata"]["name"], "default");
    let ca = wait_exists(kubectl, &["configmap", "kube-root-ca.crt"], "team");
    assert!(
        ca["data"]["ca.crt"]
            .as_str()
            .is_some_and(|pem| pem.starts_with("-----BEGIN CERTIFICATE-----")),
        "{ca}"
    );

    let pod = json(kubectl, &["get", "pod", "web", "-n", "team"]);
    let spec = &pod["spec"];
    assert_eq!(spec["serviceAccountName"], "default");
    let volume = &spec["volumes"][0];
    let name = volume["name"].as_str().expect("a volume");
    assert!(name.starts_with("kube-api-access-"), "{pod}");
    let sources = &volume["projected"]["sources"];
    assert_eq!(sources[0]["serviceAccountToken"]["path"], "token");
    assert_eq!(sources[1]["configMap"]["name"], "kube-root-ca.crt");
    assert_eq!(sources[2]["downwardAPI"]["items"][0]["path"], "namespace");
    let mount = &spec["containers"][0]["volumeMounts"][0];
    assert_eq!(mount["name"], name);
    assert_eq!(
        mount["mountPath"],
        "/var/run/secrets/kubernetes.io/serviceaccount"
    );
    assert_eq!(mount["readOnly"], true);

    let refused = kubectl.fails(&[
        "run",
        "ghost",
        "--image=nginx",
        "-n",
        "team",
        "--overrides",
        r#"{"spec":{"serviceAccountName":"ghost"}}"#,
    ]);
    assert!(
        refused.contains(
            "pods \"ghost\" is forbidden: error looking up service account team/ghost: serviceaccount \"ghost\" not found"
        ),
        "{refused}"
    );

    // A deleted `default` comes back (with a new uid).
    let uid = account["metadata"]["uid"].clone();
    kubectl.ok(&["delete", "serviceaccount", "default", "-n", "team"]);
    wait_for(WAIT, "default to be made again", || {
        let out = kubectl.run(&["get", "sa", "default", "-n", "team", "-o", "json"]);
        let again: Value = serde_json::from_slice(&out.stdout).ok()?;
        (again["metadata"]["uid"] != uid).then_some(())
    });
}

const LIMITS: &str = r#"
apiVersion: v1
kind: LimitRange
metadata: {name: limits}
spec:
  limits:
  - type: Container
    default: {cpu: 500m, memory: 128Mi}
    defaultRequest: {cpu: 100m, memory: 64Mi}
    max: {cpu: "1"}
"#;

fn limit_range_defaults_show_on_the_created_pod(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let kubectl = &cluster.kubectl;
    kubectl.ok_with_input(&["apply", "-f", "-"], LIMITS);
    // A consistent read: the LimitRange cache the plugin reads has it.
    kubectl.ok(&["get", "limitrange", "limits"]);
    kubectl.ok(&["run", "web", "--image=nginx"]);
    let pod = json(kubectl, &["get", "pod", "web"]);
    let resources = &pod["spec"]["containers"][0]["resources"];
    assert_eq!(resources["limits"]["cpu"], "500m", "{pod}");
    assert_eq!(resources["limits"]["memory"], "128Mi");
    assert_eq!(resources["requests"]["cpu"], "100m");
    assert_eq!(resources["requests"]["memory"], "64Mi");
    assert_eq!(
        pod["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
        "LimitRanger plugin set: cpu, memory request for container web; cpu, memory limit for container web"
    );
    let refused = kubectl.fails(&[
        "run",
        "big",
        "--image=nginx",
        "--overrides",
        r#"{"spec":{"containers":[{"name":"big","image":"nginx","resources":{"limits":{"cpu":"2"}}}]}}"#,
    ]);
    assert!(
        refused.contains(
            "pods \"big\" is forbidden: maximum cpu usage per Container is 1, but limit is 2"
        ),
        "{refused}"
    );
}

const CLASSES: &str = r#"
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: usual
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: example.com/disk
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
"#;

fn priority_classes_and_the_default_storage_class_fill_in(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let kubectl = &cluster.kubectl;
    let system = json(
        kubectl,
        &["get", "priorityclass", "system-cluster-critical"],
    );
    assert_eq!(system["value"], 2000000000);
    assert_eq!(
        json(kubectl, &["get", "pc", "system-node-critical"])["value"],
        2000001000
    );
    kubectl.ok_with_input(&["apply", "-f", "-"], CLASSES);
    kubectl.ok(&["get", "storageclass,priorityclass"]);
    kubectl.ok(&[
        "run",
        "urgent",
        "--image=nginx",
        "--overrides",
        r#"{"spec":{"priorityClassName":"high"}}"#,
    ]);
    let pod = json(kubectl, &["get", "pod", "urgent"]);
    assert_eq!(pod["spec"]["priority"], 1000, "{pod}");
    let refused = kubectl.fails(&[
        "run",
        "lost",
        "--image=nginx",
        "--overrides",
        r#"{"spec":{"priorityClassName":"nope"}}"#,
    ]);
    assert!(
        refused.contains("pods \"lost\" is forbidden: no PriorityClass with name nope was found"),
        "{refused}"
    );
    kubectl.ok_with_input(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data}\n\
         spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n",
    );
    let claim = json(kubectl, &["get", "pvc", "data"]);
    assert_eq!(claim["spec"]["storageClassName"], "usual", "{claim}");
}

const QUOTA: &str = r#"
apiVersion: v1
kind: ResourceQuota
metadata: {name: three}
spec:
  hard: {pods: "3"}
"#;

fn a_quota_of_three_pods_stops_the_fourth_with_two_apiservers_racing(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let kubectl = &cluster.kubectl;
    kubectl.ok(&["create", "namespace", "solo"]);
    kubectl.ok_with_input(&["apply", "-n", "solo", "-f", "-"], QUOTA);
    let counted = |kubectl: &Kubectl, namespace: &str, used: &str| {
        wait_for(WAIT, &format!("quota used {used} in {namespace}"), || {
            let quota = json(kubectl, &["get", "quota", "three", "-n", namespace]);
            (quota["status"]["used"]["pods"] == used).then_some(())
        })
    };
    counted(kubectl, "solo", "0");
    for name in ["a", "b", "c"] {
        kubectl.ok(&["run", name, "--image=nginx", "-n", "solo"]);
    }
    let refused = kubectl.fails(&["run", "d", "--image=nginx", "-n", "solo"]);
    assert!(
        refused.contains(
            "pods \"d\" is forbidden: exceeded quota: three, requested: pods=1, used: pods=3, limited: pods=3"
        ),
        "{refused}"
    );
    // A delete gives its pod back, once the controller recounts.
    kubectl.ok(&[
        "delete",
        "pod",
        "a",
        "-n",
        "solo",
        "--grace-period=0",
        "--force",
    ]);
    counted(kubectl, "solo", "2");
    kubectl.ok(&["run", "e", "--image=nginx", "-n", "solo"]);

    // Two API servers, eight pods at once, four through each.
    let second = cluster.add_apiserver("apiserver-2");
    let other = Kubectl::as_identity(
        cluster.dir.path(),
        second.port,
        &Identity::Admin,
        "kubeconfig-2",
    );
    kubectl.ok(&["create", "namespace", "race"]);
    kubectl.ok_with_input(&["apply", "-n", "race", "-f", "-"], QUOTA);
    counted(kubectl, "race", "0");
    counted(&other, "race", "0");
    let results: Vec<(String, bool, String)> = std::thread::scope(|scope| {
        let runs: Vec<_> = (0..8)
            .map(|i| {
                let client = if i % 2 == 0 { kubectl } else { &other };
                scope.spawn(move || {
                    let name = format!("p{i}");
                    let out = client.run(&["run", &name, "--image=nginx", "-n", "race"]);
                    let err = String::from_utf8_lossy(&out.stderr).to_string();
                    (name, out.status.success(), err)
                })
            })
            .collect();
        runs.into_iter()
            .map(|r| r.join().expect("a kubectl run"))
            .collect()
    });
    let admitted = results.iter().filter(|(_, ok, _)| *ok).count();
    assert_eq!(admitted, 3, "{results:?}");
    for (name, ok, err) in &results {
        assert!(
            *ok || err.contains(&format!(
                "pods \"{name}\" is forbidden: exceeded quota: three"
            )),
            "{name}: {err}"
        );
    }
    let pods = kubectl.ok(&["get", "pods", "-n", "race", "-o", "name"]);
    assert_eq!(pods.lines().count(), 3, "{pods}");
    counted(&other, "race", "3");
}

fn a_scoped_quota_counts_only_the_pods_in_its_scope(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let kubectl = &cluster.kubectl;
    kubectl.ok(&["create", "namespace", "scoped"]);
    // A pod with requests is made before the quota: the controller's
    // count must leave it out.
    let sized = "apiVersion: v1\nkind: Pod\nmetadata: {name: sized, namespace: scoped}\n\
spec:\n  containers:\n  - {name: c, image: nginx, resources: {requests: {cpu: 100m}}}\n";
    kubectl.ok_with_input(&["apply", "-f", "-"], sized);
    kubectl.ok(&[
        "create",
        "quota",
        "free",
        "--hard=pods=1",
        "--scopes=BestEffort",
        "-n",
        "scoped",
    ]);
    wait_for(WAIT, "the scoped quota counted", || {
        let quota = json(kubectl, &["get", "quota", "free", "-n", "scoped"]);
        (quota["status"]["used"]["pods"] == "0").then_some(())
    });
    kubectl.ok(&["run", "first", "--image=nginx", "-n", "scoped"]);
    let refused = kubectl.fails(&["run", "second", "--image=nginx", "-n", "scoped"]);
    assert!(
        refused.contains("pods \"second\" is forbidden: exceeded quota: free, requested: pods=1, used: pods=1, limited: pods=1"),
        "{refused}"
    );
    // Pods outside the scope are neither refused nor counted.
    let another = sized.replace("name: sized", "name: another");
    kubectl.ok_with_input(&["apply", "-f", "-"], &another);
    let quota = json(kubectl, &["get", "quota", "free", "-n", "scoped"]);
    assert_eq!(quota["status"]["used"]["pods"], "1", "{quota}");
}
