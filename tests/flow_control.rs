//! API Priority and Fairness as a cluster's users meet it: kube's
//! FlowSchemas and PriorityLevelConfigurations are there and read as
//! kubectl shows them on a real cluster; deleted mandatory ones come
//! back, edited suggested ones are set back unless annotated otherwise,
//! a schema naming a missing level says so; and a noisy tenant listing
//! from 32 loops is turned away with 429s while another user's requests
//! and kubectl's keep succeeding.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use capstan_tests::apiserver::{ApiCluster, Backend};
use capstan_tests::http::{Connection, Response};
use capstan_tests::kubectl::Kubectl;
use capstan_tests::poll::wait_for;
use capstan_tests::tls::Identity;
use serde_json::{json, Value};

const FLOW_SCHEMAS: &str = "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas";
const LEVELS: &str = "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations";
const CMS: &str = "/api/v1/namespaces/default/configmaps";
const SCHEMA_UID: &str = "x-kubernetes-pf-flowschema-uid";
const LEVEL_UID: &str = "x-kubernetes-pf-prioritylevel-uid";

/// A cluster with token users `noisy` and `quiet`.
fn cluster() -> ApiCluster {
    ApiCluster::start_with(Backend::Capstan, |dir| {
        let tokens = dir.join("tokens.csv");
        let users = "noisy-token,noisy,noisy-uid\nquiet-token,quiet,quiet-uid\n";
        std::fs::write(&tokens, users).expect("the token file");
        let tokens = tokens.to_str().expect("UTF-8").to_string();
        vec![
            "--authorization-mode=AlwaysAllow".into(),
            "--token-auth-file".into(),
            tokens,
        ]
    })
}

fn user(port: u16, token: &str) -> Connection {
    Connection::connect_as(port, &Identity::Token(token.into())).expect("connect")
}

/// The object at `path`, once it exists.
fn get(port: u16, path: &str) -> Option<Value> {
    let (code, object) = Connection::connect(port)
        .ok()?
        .json("GET", path, None)
        .ok()?;
    (code == 200).then_some(object)
}

fn uid(object: &Value) -> String {
    object["metadata"]["uid"]
        .as_str()
        .expect("a uid")
        .to_string()
}

/// Waits for kube's 13 FlowSchemas and 8 levels.
fn wait_for_bootstrap(kubectl: &Kubectl) {
    wait_for(
        Duration::from_secs(30),
        "the bootstrap configuration",
        || {
            let schemas = kubectl.run(&["get", "flowschemas", "-o", "name"]);
            let levels = kubectl.run(&["get", "prioritylevelconfigurations", "-o", "name"]);
            let count =
                |out: &std::process::Output| String::from_utf8_lossy(&out.stdout).lines().count();
            (count(&schemas) == 13 && count(&levels) == 8).then_some(())
        },
    );
}

/// The whitespace-separated words of each line of kubectl's output.
fn table(output: &str) -> Vec<Vec<String>> {
    output
        .lines()
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect()
}

#[test]
fn kubectl_shows_the_configuration_as_on_a_real_cluster() {
    let cluster = cluster();
    let kubectl = &cluster.kubectl;
    wait_for_bootstrap(kubectl);
    // The Dangling conditions are published once the engine has read them.
    let schemas = wait_for(Duration::from_secs(30), "MISSINGPL to be known", || {
        let rows = table(&kubectl.ok(&["get", "flowschemas"]));
        rows[1..]
            .iter()
            .all(|r| r.last().map(String::as_str) == Some("False"))
            .then_some(rows)
    });
    assert_eq!(
        schemas[0],
        [
            "NAME",
            "PRIORITYLEVEL",
            "MATCHINGPRECEDENCE",
            "DISTINGUISHERMETHOD",
            "AGE",
            "MISSINGPL"
        ]
    );
    let order: Vec<(&str, &str, &str, &str)> = schemas[1..]
        .iter()
        .map(|r| (r[0].as_str(), r[1].as_str(), r[2].as_str(), r[3].as_str()))
        .collect();
    assert_eq!(
        order,
        [
            ("exempt", "exempt", "1", "<none>"),
            ("probes", "exempt", "2", "<none>"),
            ("system-leader-election", "leader-election", "100", "ByUser"),
            ("endpoint-controller", "workload-high", "150", "ByUser"),
            (
                "workload-leader-election",
                "leader-election",
                "200",
                "ByUser"
            ),
            ("system-node-high", "node-high", "400", "ByUser"),
            ("system-nodes", "system", "500", "ByUser"),
            (
                "kube-controller-manager",
                "workload-high",
                "800",
                "ByNamespace"
            ),
            ("kube-scheduler", "workload-high", "800", "ByNamespace"),
            (
                "kube-system-service-accounts",
                "workload-high",
                "900",
                "ByNamespace"
            ),
            ("service-accounts", "workload-low", "9000", "ByUser"),
            ("global-default", "global-default", "9900", "ByUser"),
            ("catch-all", "catch-all", "10000", "ByUser"),
        ]
    );
    let levels = table(&kubectl.ok(&["get", "prioritylevelconfigurations"]));
    assert_eq!(
        levels[0],
        [
            "NAME",
            "TYPE",
            "NOMINALCONCURRENCYSHARES",
            "QUEUES",
            "HANDSIZE",
            "QUEUELENGTHLIMIT",
            "AGE"
        ]
    );
    let rows: Vec<&[String]> = levels[1..].iter().map(|r| &r[..6]).collect();
    let expected = [
        ["catch-all", "Limited", "5", "<none>", "<none>", "<none>"],
        ["exempt", "Exempt", "<none>", "<none>", "<none>", "<none>"],
        ["global-default", "Limited", "20", "128", "6", "50"],
        ["leader-election", "Limited", "10", "16", "4", "50"],
        ["node-high", "Limited", "40", "64", "6", "50"],
        ["system", "Limited", "30", "64", "6", "50"],
        ["workload-high", "Limited", "40", "128", "6", "50"],
        ["workload-low", "Limited", "100", "128", "6", "50"],
    ];
    assert_eq!(rows, expected);
    // Every response names the schema and level that served it.
    let exempt_schema = uid(&get(cluster.port, &format!("{FLOW_SCHEMAS}/exempt")).expect("exempt"));
    let exempt_level = uid(&get(cluster.port, &format!("{LEVELS}/exempt")).expect("exempt"));
    let response = Connection::connect(cluster.port)
        .unwrap()
        .send_json("GET", CMS, None)
        .unwrap();
    assert_eq!(response.header(SCHEMA_UID), [exempt_schema.as_str()]);
    assert_eq!(response.header(LEVEL_UID), [exempt_level.as_str()]);
    let quiet = user(cluster.port, "quiet-token")
        .send_json("GET", CMS, None)
        .unwrap();
    let global = uid(&get(cluster.port, &format!("{LEVELS}/global-default")).unwrap());
    assert_eq!(quiet.header(LEVEL_UID), [global.as_str()]);
}

#[test]
fn the_server_keeps_its_objects_unless_told_otherwise() {
    let cluster = cluster();
    let (kubectl, port) = (&cluster.kubectl, cluster.port);
    wait_for_bootstrap(kubectl);
    // Deleted mandatory objects come back, as new objects.
    let catch_all = uid(&get(port, &format!("{LEVELS}/catch-all")).unwrap());
    kubectl.ok(&["delete", "prioritylevelconfiguration", "catch-all"]);
    kubectl.ok(&["delete", "flowschema", "exempt"]);
    wait_for(Duration::from_secs(30), "catch-all to come back", || {
        let level = get(port, &format!("{LEVELS}/catch-all"))?;
        (uid(&level) != catch_all && get(port, &format!("{FLOW_SCHEMAS}/exempt")).is_some())
            .then_some(())
    });
    // An edited suggested level is set back...
    let shares = |port| {
        get(port, &format!("{LEVELS}/global-default")).unwrap()["spec"]["limited"]
            ["nominalConcurrencyShares"]
            .clone()
    };
    let patch = r#"{"spec":{"limited":{"nominalConcurrencyShares":99}}}"#;
    kubectl.ok(&[
        "patch",
        "prioritylevelconfiguration",
        "global-default",
        "--type=merge",
        "-p",
        patch,
    ]);
    wait_for(
        Duration::from_secs(30),
        "global-default to be set back",
        || (shares(port) == 20).then_some(()),
    );
    // ...unless annotated.
    let annotation = "apf.kubernetes.io/autoupdate-spec=false";
    kubectl.ok(&[
        "annotate",
        "--overwrite",
        "prioritylevelconfiguration",
        "global-default",
        annotation,
    ]);
    kubectl.ok(&[
        "patch",
        "prioritylevelconfiguration",
        "global-default",
        "--type=merge",
        "-p",
        patch,
    ]);
    // A pass of the server's loop after that: it brings back a deleted
    // mandatory schema, and leaves the annotated level alone.
    kubectl.ok(&["delete", "flowschema", "catch-all"]);
    wait_for(Duration::from_secs(30), "catch-all to come back", || {
        get(port, &format!("{FLOW_SCHEMAS}/catch-all"))
    });
    assert_eq!(shares(port), 99);
    // A schema naming a missing level says so.
    let dangling = json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
        "metadata": {"name": "lost"},
        "spec": {"priorityLevelConfiguration": {"name": "nowhere"}, "matchingPrecedence": 300,
                 "rules": [{"subjects": [{"kind": "User", "user": {"name": "quiet"}}],
                            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}});
    kubectl.ok_with_input(&["create", "-f", "-"], &dangling.to_string());
    let condition = wait_for(Duration::from_secs(30), "the Dangling condition", || {
        let schema = get(port, &format!("{FLOW_SCHEMAS}/lost"))?;
        let conditions = schema["status"]["conditions"].as_array()?.clone();
        conditions.into_iter().find(|c| c["type"] == "Dangling")
    });
    assert_eq!(
        (condition["status"].as_str(), condition["reason"].as_str()),
        (Some("True"), Some("NotFound"))
    );
    let row = table(&kubectl.ok(&["get", "flowschema", "lost"]));
    assert_eq!(row[1].last().map(String::as_str), Some("True"));
    // Bad configuration is refused with the field at fault.
    let broken = r#"{"spec":{"limited":{"limitResponse":{"queuing":{"handSize":200}}}}}"#;
    let refused = kubectl.fails(&[
        "patch",
        "prioritylevelconfiguration",
        "workload-low",
        "--type=merge",
        "-p",
        broken,
    ]);
    assert!(
        refused.contains("spec.limited.limitResponse.queuing.handSize"),
        "{refused}"
    );
}

/// A level of one seat with room for one waiting request, for `noisy`.
fn confine_noisy(port: u16) -> (String, String) {
    let mut admin = Connection::connect(port).unwrap();
    let level = json!({"metadata": {"name": "tenant"}, "spec": {"type": "Limited", "limited": {
        "nominalConcurrencyShares": 1, "lendablePercent": 0, "borrowingLimitPercent": 0,
        "limitResponse": {"type": "Queue", "queuing": {"queues": 1, "handSize": 1, "queueLengthLimit": 1}}}}});
    let (code, level) = admin.json("POST", LEVELS, Some(&level)).unwrap();
    assert_eq!(code, 201, "{level}");
    let schema = json!({"metadata": {"name": "noisy-tenant"}, "spec": {
        "priorityLevelConfiguration": {"name": "tenant"}, "matchingPrecedence": 500,
        "distinguisherMethod": {"type": "ByUser"},
        "rules": [{"subjects": [{"kind": "User", "user": {"name": "noisy"}}],
                   "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"], "clusterScope": true}]}]}});
    let (code, schema) = admin.json("POST", FLOW_SCHEMAS, Some(&schema)).unwrap();
    assert_eq!(code, 201, "{schema}");
    (uid(&schema), uid(&level))
}

#[track_caller]
fn assert_rejected(response: &Response, schema: &str, level: &str) {
    assert_eq!(response.status, 429, "{}", response.text());
    let retry: u64 = response.header("retry-after")[0].parse().expect("seconds");
    assert!((1..=32).contains(&retry), "{retry}");
    let status = response.json().expect("a Status");
    assert_eq!(
        (status["kind"].as_str(), status["reason"].as_str()),
        (Some("Status"), Some("TooManyRequests"))
    );
    assert_eq!(
        status["message"],
        "Too many requests, please try again later."
    );
    assert_eq!(response.header(SCHEMA_UID), [schema]);
    assert_eq!(response.header(LEVEL_UID), [level]);
}

#[test]
fn a_noisy_tenant_is_turned_away_while_others_are_served() {
    let cluster = cluster();
    let port = cluster.port;
    wait_for_bootstrap(&cluster.kubectl);
    let (schema, level) = confine_noisy(port);
    wait_for(
        Duration::from_secs(30),
        "the tenant level to be in force",
        || {
            let response = user(port, "noisy-token").send_json("GET", CMS, None).ok()?;
            (response.header(LEVEL_UID) == [level.as_str()]).then_some(())
        },
    );
    let mut admin = Connection::connect(port).unwrap();
    for i in 0..150 {
        let body =
            json!({"metadata": {"name": format!("c{i}")}, "data": {"d": "x".repeat(8 * 1024)}});
        let (code, answer) = admin.json("POST", CMS, Some(&body)).unwrap();
        assert_eq!(code, 201, "{answer}");
    }
    // 32 loops list everything until they have been turned away a few
    // times; meanwhile `quiet` and kubectl are served every time.
    let rejected = Arc::new(AtomicBool::new(false));
    let loops: Vec<_> = (0..32)
        .map(|_| {
            let (rejected, schema, level) = (rejected.clone(), schema.clone(), level.clone());
            std::thread::spawn(move || {
                let mut noisy = user(port, "noisy-token");
                let (mut served, mut refused) = (0, 0);
                for _ in 0..400 {
                    let response = noisy.send_json("GET", CMS, None).expect("a list");
                    if response.status == 429 {
                        assert_rejected(&response, &schema, &level);
                        rejected.store(true, Ordering::SeqCst);
                        refused += 1;
                    } else {
                        assert_eq!(response.status, 200, "{}", response.text());
                        served += 1;
                    }
                    if rejected.load(Ordering::SeqCst) && served + refused >= 20 {
                        break;
                    }
                }
                (served, refused)
            })
        })
        .collect();
    let mut quiet = user(port, "quiet-token");
    let mut quiet_served = 0;
    while !rejected.load(Ordering::SeqCst) || quiet_served < 20 {
        let response = quiet.send_json("GET", CMS, None).expect("a list");
        assert_eq!(response.status, 200, "{}", response.text());
        quiet_served += 1;
        if quiet_served % 10 == 0 {
            cluster.kubectl.ok(&["get", "configmaps", "-o", "name"]);
        }
        assert!(
            quiet_served < 2000,
            "the noisy tenant was never turned away"
        );
    }
    let outcomes: Vec<(u32, u32)> = loops
        .into_iter()
        .map(|l| l.join().expect("a loop"))
        .collect();
    let refused: u32 = outcomes.iter().map(|(_, r)| r).sum();
    let served: u32 = outcomes.iter().map(|(s, _)| s).sum();
    assert!(
        refused > 0 && served > 0,
        "served {served}, refused {refused}"
    );
    let metrics = admin.send("GET", "/metrics", &[], b"").unwrap().text();
    let series = "apiserver_flowcontrol_rejected_requests_total{priority_level=\"tenant\",flow_schema=\"noisy-tenant\",reason=\"queue-full\"}";
    let counted: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0);
    assert!(counted >= refused as f64, "{counted} < {refused}");
}
