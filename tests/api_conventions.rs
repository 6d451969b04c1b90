//! API conventions a client sees, on both stores: responses in YAML when
//! asked, Invalid Status objects that name each wrong field of a pod spec,
//! access reviews (`kubectl auth`), and kube's errors from the subresources
//! a kubelet serves when the pod has no node.

use std::process::Command;

use capstan_tests::apiserver::{ApiCluster, Backend, Http};
use serde_json::json;

capstan_tests::on_both_backends!(
    yaml_on_request,
    pod_spec_mistakes_are_invalid_with_causes,
    access_reviews_and_kubelet_subresources,
    defaults_and_name_rules_follow_kubernetes,
);

/// GET with an Accept header, by curl as the admin: status code,
/// content type, body.
fn curl(port: u16, path: &str, accept: &str) -> (String, String, String) {
    let pki = capstan_tests::tls::pki_of(port).expect("an HTTPS API server");
    let output = Command::new("curl")
        .args([
            "-s",
            "-H",
            &format!("Accept: {accept}"),
            "-w",
            "\n%{http_code} %{content_type}",
        ])
        .arg("--cacert")
        .arg(pki.server_ca())
        .arg("--cert")
        .arg(pki.admin_cert())
        .arg("--key")
        .arg(pki.admin_key())
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .output()
        .expect("run curl");
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    let (body, trailer) = text.rsplit_once('\n').expect("curl's trailer");
    let (code, content_type) = trailer.split_once(' ').unwrap_or((trailer, ""));
    (code.to_string(), content_type.to_string(), body.to_string())
}

fn yaml_on_request(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    cluster
        .kubectl
        .ok(&["create", "configmap", "plain", "--from-literal=colour=blue"]);
    let path = "/api/v1/namespaces/default/configmaps/plain";
    let (code, content_type, body) = curl(cluster.port, path, "application/yaml");
    assert_eq!(
        (code.as_str(), content_type.as_str()),
        ("200", "application/yaml"),
        "{body}"
    );
    assert!(
        body.contains("kind: ConfigMap") && body.contains("colour: blue"),
        "{body}"
    );
    let (code, _, body) = curl(
        cluster.port,
        "/api/v1/namespaces/default/configmaps",
        "application/yaml",
    );
    assert!(
        code == "200" && body.contains("kind: ConfigMapList"),
        "{body}"
    );
    // JSON stays the default, and a watch has no YAML form.
    let (_, content_type, _) = curl(cluster.port, path, "*/*");
    assert_eq!(content_type, "application/json");
    let watch = "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1";
    let (code, _, body) = curl(cluster.port, watch, "application/yaml");
    assert_eq!(code, "406", "{body}");
}

fn pod_spec_mistakes_are_invalid_with_causes(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "broken"},
        "spec": {"restartPolicy": "Sometimes",
                 "containers": [{"name": "a", "image": "nginx", "ports": [{"containerPort": 70000}],
                                 "volumeMounts": [{"name": "missing", "mountPath": "/m"}]},
                                {"name": "a", "image": "nginx"}]}});
    let mut http = Http::connect(cluster.port);
    let (code, status) = http.request("POST", "/api/v1/namespaces/default/pods", Some(&pod));
    assert_eq!(
        (code, status["reason"].as_str()),
        (422, Some("Invalid")),
        "{status}"
    );
    let causes: Vec<&str> = status["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    for field in [
        "spec.restartPolicy",
        "spec.containers[0].ports[0].containerPort",
        "spec.containers[0].volumeMounts[0].name",
        "spec.containers[1].name",
    ] {
        assert!(causes.contains(&field), "{field} in {causes:?}");
    }
    let (code, _) = http.get("/api/v1/namespaces/default/pods/broken");
    assert_eq!(code, 404, "nothing was written");
}

fn access_reviews_and_kubelet_subresources(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let kubectl = &cluster.kubectl;
    // No authorization yet: every question gets a yes; the kubeconfig is
    // the admin's.
    assert_eq!(
        kubectl
            .ok(&["auth", "can-i", "delete", "pods", "-n", "kube-system"])
            .trim(),
        "yes"
    );
    assert_eq!(
        kubectl.ok(&["auth", "can-i", "get", "/healthz"]).trim(),
        "yes"
    );
    let rules = kubectl.ok(&["auth", "can-i", "--list"]);
    assert!(rules.contains("*.*") && rules.contains("[*]"), "{rules}");
    let whoami = kubectl.ok(&["auth", "whoami"]);
    assert!(whoami.contains("system:admin"), "{whoami}");
    let resources = kubectl.ok(&[
        "api-resources",
        "--api-group=authorization.k8s.io",
        "-o",
        "name",
    ]);
    assert!(
        resources.contains("selfsubjectaccessreviews"),
        "{resources}"
    );

    // exec of a pod no node has taken (there are no nodes): kube's 400.
    kubectl.ok(&["run", "idle", "--image=nginx"]);
    let exec = kubectl.fails(&["exec", "idle", "--", "ls"]);
    assert!(
        exec.contains("pod idle does not have a host assigned"),
        "{exec}"
    );
    let wrong = kubectl.fails(&["exec", "idle", "-c", "other", "--", "ls"]);
    assert!(
        wrong.contains("container other is not valid for pod idle"),
        "{wrong}"
    );
}

fn defaults_and_name_rules_follow_kubernetes(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let kubectl = &cluster.kubectl;
    // A deployment's pod template gets a pod's defaults, ports a protocol.
    kubectl.ok(&[
        "create",
        "deployment",
        "web",
        "--image=nginx:1.25",
        "--port=80",
    ]);
    let template = kubectl.ok(&["get", "deploy", "web", "-o", "jsonpath={.spec.template.spec.restartPolicy} {.spec.template.spec.dnsPolicy} {.spec.template.spec.containers[0].imagePullPolicy} {.spec.template.spec.containers[0].ports[0].protocol}"]);
    assert_eq!(template, "Always ClusterFirst IfNotPresent TCP");
    // RBAC names are path segments: `system:` names are fine, `a/b` not.
    kubectl.ok(&[
        "create",
        "clusterrole",
        "system:pod-reader",
        "--verb=get",
        "--resource=pods",
    ]);
    let role = kubectl.ok(&["get", "clusterrole", "system:pod-reader", "-o", "name"]);
    assert_eq!(
        role.trim(),
        "clusterrole.rbac.authorization.k8s.io/system:pod-reader"
    );
    let mut http = Http::connect(cluster.port);
    let slashed = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "a%b"}});
    let (code, status) = http.request(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        Some(&slashed),
    );
    assert_eq!(code, 422, "{status}");
    let refused = kubectl.fails(&["create", "configmap", "system:config"]);
    assert!(refused.contains("RFC 1123 subdomain"), "{refused}");
}
