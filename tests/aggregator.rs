//! Aggregated APIs (apiregistration.k8s.io/v1), driven with kubectl
//! against `capstan` (and `capstan-apiserver` with kube-apiserver's
//! front-proxy flags on capstan-store and on etcd): the Local APIServices of its own groups; an
//! APIService refused as kube refuses it; a metrics server written here
//! (`support/metrics_server.rs`: HTTPS, its own CA, trusting only the
//! front-proxy client certificate `capstan` made) registered through an
//! APIService, a Service and its Endpoints, answering `kubectl top pods`
//! and `kubectl get --raw` with the user in X-Remote-* headers; a user
//! without rights refused by this server before the backend is called;
//! a watch streamed through; the backend stopped: 503 and
//! Available=False. The proxy's added latency is printed (curl, direct
//! and through the proxy), not asserted.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use base64::Engine;
use capstan_apiserver::pki::Pki;
use capstan_tests::apiserver::{ApiCluster, Backend, Embedded, Kubectl, WatchEvents};
use capstan_tests::http::Connection;
use capstan_tests::metrics_server::MetricsServer;
use capstan_tests::poll::wait_for;
use capstan_tests::tls::{self, Identity};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);
const RAW_PODS: &str = "/apis/metrics.k8s.io/v1beta1/namespaces/x/pods";

fn json_of(kubectl: &Kubectl, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.extend(["-o", "json"]);
    serde_json::from_str(&kubectl.ok(&args)).expect("kubectl's JSON")
}

/// The Available condition of an APIService: (status, reason).
fn available(kubectl: &Kubectl, name: &str) -> Option<(String, String)> {
    let output = kubectl.run(&["get", "apiservice", name, "-o", "json"]);
    let obj: Value = serde_json::from_slice(&output.stdout).ok()?;
    let conditions = obj["status"]["conditions"].as_array()?;
    let c = conditions.iter().find(|c| c["type"] == "Available")?;
    Some((
        c["status"].as_str()?.to_string(),
        c["reason"].as_str()?.to_string(),
    ))
}

fn wait_available(kubectl: &Kubectl, name: &str, status: &str, reason: &str) {
    let what = format!("APIService {name} Available={status} ({reason})");
    wait_for(WAIT, &what, || {
        let now = available(kubectl, name)?;
        (now.0 == status && now.1 == reason).then_some(())
    });
}

/// The Service, its Endpoints (the server's loopback port) and the
/// APIService that send metrics.k8s.io/v1beta1 to `server`.
fn register(kubectl: &Kubectl, server: &MetricsServer) {
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(&server.ca_pem);
    let objects = [
        json!({"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": "metrics", "namespace": "kube-system"},
         "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 4443}]}}),
        json!({"apiVersion": "v1", "kind": "Endpoints",
         "metadata": {"name": "metrics", "namespace": "kube-system"},
         "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                      "ports": [{"name": "https", "port": server.port}]}]}),
        json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
         "metadata": {"name": "v1beta1.metrics.k8s.io"},
         "spec": {"group": "metrics.k8s.io", "version": "v1beta1", "caBundle": ca_bundle,
                  "groupPriorityMinimum": 100, "versionPriority": 100,
                  "service": {"namespace": "kube-system", "name": "metrics"}}}),
    ];
    // One YAML stream of three documents (a List would send kubectl's
    // validation to OpenAPI v2).
    let yaml = |o: &Value| serde_yaml::to_string(o).expect("YAML");
    let stream: Vec<String> = objects.iter().map(yaml).collect();
    kubectl.ok_with_input(&["apply", "-f", "-"], &stream.join("---\n"));
}

#[test]
fn local_apiservices_are_listed_and_bad_ones_refused() {
    let capstan = Embedded::start();
    let kubectl = &capstan.kubectl;
    wait_available(kubectl, "v1.apps", "True", "Local");
    let table = kubectl.ok(&["get", "apiservices"]);
    let core = table.lines().find(|l| l.starts_with("v1. ")).expect(&table);
    assert!(core.contains("Local") && core.contains("True"), "{table}");
    assert!(table.contains("v1.apiregistration.k8s.io"), "{table}");
    let bad = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "metrics"},
        "spec": {"group": "metrics.k8s.io", "version": "v1beta1", "caBundle": "Zm9v",
                 "insecureSkipTLSVerify": true, "versionPriority": 100,
                 "service": {"namespace": "kube-system", "name": "metrics"}}});
    let output = kubectl.run_with_input(&["create", "-f", "-"], &bad.to_string());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    for expected in [
        r#"metadata.name: Invalid value: "metrics": must be `spec.version+"."+spec.group`: "v1beta1.metrics.k8s.io""#,
        "spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000",
        "spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present",
    ] {
        assert!(stderr.contains(expected), "{expected}\nnot in\n{stderr}");
    }
    let names = kubectl.ok(&["get", "apiservices", "-o", "name"]);
    assert!(!names.contains("apiservice.apiregistration.k8s.io/metrics\n"));
    let configmap = json_of(
        kubectl,
        &[
            "get",
            "configmap",
            "-n",
            "kube-system",
            "extension-apiserver-authentication",
        ],
    );
    let data = &configmap["data"];
    assert_eq!(
        data["requestheader-username-headers"],
        r#"["X-Remote-User"]"#
    );
    assert_eq!(
        data["requestheader-allowed-names"],
        r#"["front-proxy-client"]"#
    );
    let front_proxy_ca = std::fs::read_to_string(capstan.pki().front_proxy_ca()).unwrap();
    assert_eq!(
        data["requestheader-client-ca-file"],
        front_proxy_ca.as_str()
    );
    assert!(data["client-ca-file"]
        .as_str()
        .unwrap()
        .contains("BEGIN CERTIFICATE"));
}

const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
";

#[test]
fn custom_resources_get_a_local_apiservice_while_served() {
    let capstan = Embedded::start();
    let kubectl = &capstan.kubectl;
    kubectl.ok_with_input(&["apply", "-f", "-"], CRD);
    wait_available(kubectl, "v1.example.com", "True", "Local");
    kubectl.ok(&["delete", "crd", "widgets.example.com"]);
    wait_for(WAIT, "v1.example.com removed", || {
        let names = kubectl.ok(&["get", "apiservices", "-o", "name"]);
        (!names.contains("/v1.example.com")).then_some(())
    });
}

/// An extension server calling back (`capstan`'s requestheader
/// authentication): the front-proxy certificate and X-Remote-* headers
/// name the user; the same headers from an ordinary client are ignored.
#[test]
fn a_front_proxy_names_the_user_in_headers() {
    let capstan = Embedded::start();
    let pki = capstan.pki();
    let read = |p: std::path::PathBuf| std::fs::read_to_string(p).unwrap();
    let front_proxy = Identity::Certificate {
        cert: read(pki.front_proxy_client_cert()),
        key: read(pki.front_proxy_client_key()),
    };
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let path = "/apis/authentication.k8s.io/v1/selfsubjectreviews";
    let headers = [
        ("Content-Type", "application/json"),
        ("X-Remote-User", "jane"),
        ("X-Remote-Group", "dev"),
        ("X-Remote-Extra-Example.com%2fscopes", "read"),
    ];
    let body = review.to_string();
    let who = |identity: &Identity| {
        let mut connection = Connection::connect_as(capstan.port, identity).unwrap();
        let response = connection
            .send("POST", path, &headers, body.as_bytes())
            .unwrap();
        assert_eq!(response.status, 201, "{}", response.text());
        response.json().unwrap()["status"]["userInfo"].clone()
    };
    let jane = who(&front_proxy);
    assert_eq!(jane["username"], "jane");
    assert!(jane["groups"].as_array().unwrap().contains(&json!("dev")));
    assert_eq!(jane["extra"]["example.com/scopes"], json!(["read"]));
    let admin = who(&Identity::Admin);
    assert_eq!(admin["username"], "system:admin");
}

capstan_tests::on_both_backends!(kubectl_top_reads_an_aggregated_metrics_server);

/// kube-apiserver's front-proxy flags over the cluster's certificates
/// (kubeadm's values, as `capstan` passes them).
fn front_proxy_flags(dir: &Path) -> Vec<String> {
    let pki = tls::pki_in(dir);
    let path = |p: std::path::PathBuf| p.display().to_string();
    [
        (
            "--proxy-client-cert-file",
            path(pki.front_proxy_client_cert()),
        ),
        (
            "--proxy-client-key-file",
            path(pki.front_proxy_client_key()),
        ),
        ("--requestheader-client-ca-file", path(pki.front_proxy_ca())),
        ("--requestheader-username-headers", "X-Remote-User".into()),
        ("--requestheader-group-headers", "X-Remote-Group".into()),
        (
            "--requestheader-extra-headers-prefix",
            "X-Remote-Extra-".into(),
        ),
        ("--requestheader-allowed-names", "front-proxy-client".into()),
    ]
    .into_iter()
    .flat_map(|(flag, value)| [flag.to_string(), value])
    .collect()
}

fn kubectl_top_reads_an_aggregated_metrics_server(backend: Backend) {
    let capstan = ApiCluster::start_with(backend, front_proxy_flags);
    let kubectl = &capstan.kubectl;
    let dir = capstan.dir.path();
    let pki = tls::pki_in(dir);
    let mut server = MetricsServer::start(dir, "metrics", "kube-system", &pki.front_proxy_ca());
    kubectl.ok(&["create", "namespace", "x"]);
    register(kubectl, &server);
    wait_available(kubectl, "v1beta1.metrics.k8s.io", "True", "Passed");

    // Discovery lists the group, and the backend's resources.
    let groups = kubectl.ok(&["api-versions"]);
    assert!(groups.contains("metrics.k8s.io/v1beta1"), "{groups}");
    let resources = kubectl.ok(&["api-resources", "--api-group", "metrics.k8s.io"]);
    assert!(resources.contains("PodMetrics"), "{resources}");

    let top = kubectl.ok(&["top", "pods", "-n", "x"]);
    let web1 = top.lines().find(|l| l.starts_with("web-1")).expect(&top);
    assert!(web1.contains("250m") && web1.contains("64Mi"), "{top}");
    let web2 = top.lines().find(|l| l.starts_with("web-2")).expect(&top);
    assert!(web2.contains("1500m") && web2.contains("128Mi"), "{top}");

    let raw: Value = serde_json::from_str(&kubectl.ok(&["get", "--raw", RAW_PODS])).unwrap();
    assert_eq!(raw["kind"], "PodMetricsList");
    assert_eq!(raw["items"][0]["metadata"]["name"], "web-1");
    let seen = server.seen();
    let last = seen.last().expect("the backend was called");
    assert_eq!(last.path, RAW_PODS);
    assert_eq!(last.headers["x-remote-user"], ["system:admin"]);
    assert!(last.headers["x-remote-group"].contains(&"system:masters".to_string()));
    assert!(!last.headers.contains_key("authorization"));

    // Headers a client sets itself do not reach the backend.
    let mut admin = Connection::connect(capstan.port).unwrap();
    let spoofed = [("X-Remote-User", "mallory"), ("X-Remote-Group", "spoofed")];
    let response = admin.send("GET", RAW_PODS, &spoofed, b"").unwrap();
    assert_eq!(response.status, 200, "{}", response.text());
    let last = server.seen().pop().unwrap();
    assert_eq!(last.headers["x-remote-user"], ["system:admin"]);
    assert!(!last.headers["x-remote-group"].contains(&"spoofed".to_string()));

    // A user without rights is refused here, before the backend.
    let calls = server.seen().len();
    let nobody = certificate_of(&pki, "nobody");
    let as_nobody = Kubectl::as_identity(dir, capstan.port, &nobody, "nobody.kubeconfig");
    let refused = as_nobody.fails(&["get", "--raw", RAW_PODS]);
    assert!(
        refused.contains("Forbidden") || refused.contains("forbidden"),
        "{refused}"
    );
    assert_eq!(server.seen().len(), calls, "the backend was not called");

    // A watch streams through: the event arrives while the answer is open.
    let mut watch = WatchEvents::open(capstan.port, &format!("{RAW_PODS}?watch=1"));
    let event = watch.next(WAIT).expect("an event through the proxy");
    assert_eq!(event["object"]["metadata"]["name"], "web-1");
    drop(watch);

    print_latency(&capstan, &pki, &server);

    server.stop();
    let output = kubectl.run(&["get", "--raw", RAW_PODS]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("service unavailable"), "{stderr}");
    wait_available(
        kubectl,
        "v1beta1.metrics.k8s.io",
        "False",
        "FailedDiscoveryCheck",
    );
    let mut admin = Connection::connect(capstan.port).unwrap();
    let response = admin.send("GET", RAW_PODS, &[], b"").unwrap();
    assert_eq!(response.status, 503);
    let status = response.json().unwrap();
    assert_eq!(
        (&status["reason"], &status["message"]),
        (&json!("ServiceUnavailable"), &json!("service unavailable"))
    );
    let groups = kubectl.ok(&["api-versions"]);
    assert!(!groups.contains("metrics.k8s.io"), "{groups}");
    let gauge = r#"apiserver_aggregator_unavailable_apiservice{name="v1beta1.metrics.k8s.io"} 1"#;
    wait_for(WAIT, "the unavailable gauge", || {
        let metrics = kubectl.ok(&["get", "--raw", "/metrics"]);
        metrics.contains(gauge).then_some(())
    });
}

fn certificate_of(pki: &Pki, user: &str) -> Identity {
    let ca = pki.client_authority().unwrap();
    let since = time::OffsetDateTime::now_utc() - time::Duration::hours(1);
    let issued = ca
        .issue_client(user, None, since, time::Duration::days(1))
        .unwrap();
    Identity::Certificate {
        cert: issued.certificate,
        key: issued.key,
    }
}

/// curl's total time per request, `count` requests on one connection.
fn curl_times(args: &[String], url: &str, count: usize) -> Vec<f64> {
    let mut command = Command::new("curl");
    command.args(["-s", "-w", "%{time_total}\\n"]);
    command.args(args);
    for _ in 0..count {
        command.args(["-o", "/dev/null", url]);
    }
    let output = command.output().expect("run curl");
    let text = String::from_utf8_lossy(&output.stdout);
    let mut times: Vec<f64> = text.lines().filter_map(|l| l.parse().ok()).collect();
    times.sort_by(|a, b| a.total_cmp(b));
    times
}

/// The proxy's added latency, as a rough figure for the notes: the
/// median of a get straight to the backend and through the proxy (each
/// on one kept-alive connection, the first request's handshake left out).
fn print_latency(capstan: &ApiCluster, pki: &Pki, server: &MetricsServer) {
    let dir = capstan.dir.path();
    let path = |p: std::path::PathBuf| p.display().to_string();
    let direct_args = vec![
        "--cacert".to_string(),
        path(dir.join("metrics-ca.crt")),
        "--cert".into(),
        path(pki.front_proxy_client_cert()),
        "--key".into(),
        path(pki.front_proxy_client_key()),
        "-H".into(),
        "X-Remote-User: bench".into(),
        "--resolve".into(),
        format!("metrics.kube-system.svc:{}:127.0.0.1", server.port),
    ];
    let direct_url = format!("https://metrics.kube-system.svc:{}{RAW_PODS}", server.port);
    let proxied_args = vec![
        "--cacert".to_string(),
        path(pki.server_ca()),
        "--cert".into(),
        path(pki.admin_cert()),
        "--key".into(),
        path(pki.admin_key()),
    ];
    let proxied_url = format!("https://127.0.0.1:{}{RAW_PODS}", capstan.port);
    let median = |times: &[f64]| times.get(times.len() / 2).copied().unwrap_or(f64::NAN);
    let direct = curl_times(&direct_args, &direct_url, 50);
    let proxied = curl_times(&proxied_args, &proxied_url, 50);
    eprintln!(
        "aggregator latency (median of {}/{} gets): direct {:.2} ms, through the proxy {:.2} ms",
        direct.len(),
        proxied.len(),
        median(&direct) * 1000.0,
        median(&proxied) * 1000.0
    );
}
