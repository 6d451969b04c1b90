//! The resource types real charts and tutorials use beyond pods and
//! deployments (RBAC, Ingress, storage, Jobs, autoscaling, policies),
//! driven with kubectl 1.32 and its default validation on both backends:
//! a chart applied, listed with kubectl's columns, and deleted (the rules
//! of these types: `more_kinds_rules`).

use std::time::Duration;

use capstan_tests::apiserver::{ApiCluster, Backend, Kubectl};
use capstan_tests::kubectl::{table, without_age};
use capstan_tests::poll::wait_for;

/// What `helm template` of a typical web application renders.
const APP: &str = include_str!("fixtures/shop-chart.yaml");

const CREATED: [&str; 22] = [
    "serviceaccount/shop created",
    "role.rbac.authorization.k8s.io/shop-reader created",
    "rolebinding.rbac.authorization.k8s.io/shop-reader created",
    "clusterrole.rbac.authorization.k8s.io/shop-nodes created",
    "clusterrolebinding.rbac.authorization.k8s.io/shop-nodes created",
    "storageclass.storage.k8s.io/fast created",
    "persistentvolume/shop-pv created",
    "persistentvolumeclaim/shop-data created",
    "priorityclass.scheduling.k8s.io/shop-high created",
    "deployment.apps/shop created",
    "service/shop created",
    "ingressclass.networking.k8s.io/nginx created",
    "ingress.networking.k8s.io/shop created",
    "networkpolicy.networking.k8s.io/shop created",
    "poddisruptionbudget.policy/shop created",
    "horizontalpodautoscaler.autoscaling/shop created",
    "job.batch/shop-migrate created",
    "cronjob.batch/shop-report created",
    "endpointslice.discovery.k8s.io/shop-extra created",
    "podtemplate/shop-debug created",
    "limitrange/shop-limits created",
    "resourcequota/shop-quota created",
];

capstan_tests::on_both_backends!(a_chart_applies_lists_and_deletes);

fn a_chart_applies_lists_and_deletes(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let kubectl = &cluster.kubectl;
    let created = kubectl.ok_with_input(&["apply", "-f", "-"], APP);
    for line in CREATED {
        assert!(created.contains(line), "{line} in\n{created}");
    }
    let again = kubectl.ok_with_input(&["apply", "-f", "-"], APP);
    assert!(
        again.contains("job.batch/shop-migrate unchanged")
            && again.contains("role.rbac.authorization.k8s.io/shop-reader unchanged"),
        "{again}"
    );
    // The controller manager makes the Deployment's two pods and the
    // Job's one; the quota counts them (with the LimitRange's defaults)
    // once they exist.
    const USED: &str =
        r"jsonpath={.status.used.pods} {.status.used.requests\.cpu} {.status.used.limits\.memory}";
    wait_for(
        Duration::from_secs(60),
        "the workloads' pods in the quota",
        || {
            let used = kubectl.ok(&["get", "quota", "shop-quota", "-o", USED]);
            (used == "3 300m 768Mi").then_some(())
        },
    );
    check_columns(kubectl);

    let all = kubectl.ok(&["get", "all"]);
    for name in [
        "deployment.apps/shop",
        "service/shop",
        "job.batch/shop-migrate",
        "cronjob.batch/shop-report",
        "horizontalpodautoscaler.autoscaling/shop",
    ] {
        assert!(all.contains(name), "{name} in\n{all}");
    }

    let deleted = kubectl.ok_with_input(&["delete", "-f", "-"], APP);
    assert!(
        deleted.contains("job.batch \"shop-migrate\" deleted")
            && deleted.contains("clusterrole.rbac.authorization.k8s.io \"shop-nodes\" deleted"),
        "{deleted}"
    );
    let left = kubectl.ok(&[
        "get",
        "jobs,cronjobs,hpa,pdb,ing,netpol,roles,rolebindings,pvc,quota,limits,podtemplates,endpointslices",
        "-o",
        "name",
    ]);
    assert!(left.trim().is_empty(), "{left}");
    let cluster_left = kubectl.ok(&[
        "get",
        "sc,pv,pc,ingressclasses,clusterroles,clusterrolebindings",
        "-o",
        "name",
    ]);
    // What is left is the bootstrap RBAC policy and the system priority
    // classes, none of the chart's.
    let charts = [
        "clusterrole.rbac.authorization.k8s.io/shop-nodes",
        "clusterrolebinding.rbac.authorization.k8s.io/shop-nodes",
        "storageclass.storage.k8s.io/fast",
        "persistentvolume/shop-pv",
        "priorityclass.scheduling.k8s.io/shop-high",
        "ingressclass.networking.k8s.io/nginx",
    ];
    for line in cluster_left.lines() {
        assert!(
            !charts.contains(&line.trim()),
            "{line} is left:\n{cluster_left}"
        );
        assert!(
            line.contains("rbac.authorization.k8s.io/")
                || line.starts_with("priorityclass.scheduling.k8s.io/system-"),
            "{line} is left"
        );
    }
}

fn check_columns(kubectl: &Kubectl) {
    let expect = |args: &[&str], name: &str, header: &str, row: &str, age: Option<usize>| {
        let (h, r) = table(kubectl, args, name);
        assert_eq!(h, header, "kubectl get {args:?}");
        let r = age.map_or(r.clone(), |i| without_age(&r, i));
        assert_eq!(r, row, "kubectl get {args:?}");
    };
    // The job controller has started it: a DURATION, then the AGE.
    let (h, r) = table(kubectl, &["get", "jobs"], "shop-migrate");
    assert_eq!(h, "NAME STATUS COMPLETIONS DURATION AGE");
    let words: Vec<&str> = r.split(' ').collect();
    assert_eq!(words[..3], ["shop-migrate", "Running", "0/1"], "{r}");
    assert_eq!(words.len(), 5, "{r}");
    let (h, r) = table(kubectl, &["get", "jobs", "-o", "wide"], "shop-migrate");
    assert!(h.ends_with("AGE CONTAINERS IMAGES SELECTOR"), "{h}");
    assert!(
        r.contains("migrate shop/migrate:1.0 batch.kubernetes.io/controller-uid="),
        "{r}"
    );
    expect(
        &["get", "cj"],
        "shop-report",
        "NAME SCHEDULE TIMEZONE SUSPEND ACTIVE LAST SCHEDULE AGE",
        "shop-report 0 3 * * * <none> False 0 <none>",
        Some(10),
    );
    // The autoscaler reads its target's scale: REPLICAS becomes the
    // Deployment's count; TARGETS stays <unknown> until the pods report
    // usage, so only its target is checked.
    wait_for(
        Duration::from_secs(30),
        "the autoscaler to read its target",
        || {
            let (h, r) = table(kubectl, &["get", "hpa"], "shop");
            assert_eq!(h, "NAME REFERENCE TARGETS MINPODS MAXPODS REPLICAS AGE");
            let r = without_age(&r, 7);
            (r.starts_with("shop Deployment/shop cpu: ") && r.ends_with("/70% 2 10 2"))
                .then_some(())
        },
    );
    expect(
        &["get", "pdb"],
        "shop",
        "NAME MIN AVAILABLE MAX UNAVAILABLE ALLOWED DISRUPTIONS AGE",
        "shop 1 N/A 0",
        Some(4),
    );
    expect(
        &["get", "ing"],
        "shop",
        "NAME CLASS HOSTS ADDRESS PORTS AGE",
        "shop nginx shop.example.com 80, 443",
        Some(5),
    );
    expect(
        &["get", "ingressclass"],
        "nginx",
        "NAME CONTROLLER PARAMETERS AGE",
        "nginx k8s.io/ingress-nginx <none>",
        Some(3),
    );
    expect(
        &["get", "netpol"],
        "shop",
        "NAME POD-SELECTOR AGE",
        "shop app.kubernetes.io/name=shop",
        Some(2),
    );
    let (h, r) = table(kubectl, &["get", "roles"], "shop-reader");
    assert_eq!(h, "NAME CREATED AT");
    assert!(r.starts_with("shop-reader 20") && r.ends_with('Z'), "{r}");
    let (h, _) = table(kubectl, &["get", "clusterroles"], "shop-nodes");
    assert_eq!(h, "NAME CREATED AT");
    expect(
        &["get", "rolebindings", "-o", "wide"],
        "shop-reader",
        "NAME ROLE AGE USERS GROUPS SERVICEACCOUNTS",
        "shop-reader Role/shop-reader jane default/shop",
        Some(2),
    );
    expect(
        &["get", "clusterrolebindings"],
        "shop-nodes",
        "NAME ROLE AGE",
        "shop-nodes ClusterRole/shop-nodes",
        Some(2),
    );
    expect(
        &["get", "sc"],
        "fast",
        "NAME PROVISIONER RECLAIMPOLICY VOLUMEBINDINGMODE ALLOWVOLUMEEXPANSION AGE",
        "fast ebs.csi.aws.com Retain WaitForFirstConsumer true",
        Some(5),
    );
    kubectl.ok(&[
        "annotate",
        "sc",
        "fast",
        "storageclass.kubernetes.io/is-default-class=true",
    ]);
    let classes = kubectl.ok(&["get", "sc"]);
    assert!(
        classes.contains("fast (default)"),
        "the default class is marked: {classes}"
    );
    kubectl.ok(&[
        "annotate",
        "sc",
        "fast",
        "storageclass.kubernetes.io/is-default-class-",
    ]);
    expect(
        &["get", "pc"],
        "shop-high",
        "NAME VALUE GLOBAL-DEFAULT AGE PREEMPTIONPOLICY",
        "shop-high 100000 false PreemptLowerPriority",
        Some(3),
    );
    expect(
        &["get", "endpointslices"],
        "shop-extra",
        "NAME ADDRESSTYPE PORTS ENDPOINTS AGE",
        "shop-extra IPv4 80 10.1.0.5",
        Some(4),
    );
    expect(
        &["get", "pvc"],
        "shop-data",
        "NAME STATUS VOLUME CAPACITY ACCESS MODES STORAGECLASS VOLUMEATTRIBUTESCLASS AGE",
        "shop-data Pending fast <unset>",
        Some(4),
    );
    expect(&["get", "pv"], "shop-pv",
           "NAME CAPACITY ACCESS MODES RECLAIM POLICY STATUS CLAIM STORAGECLASS VOLUMEATTRIBUTESCLASS REASON AGE",
           "shop-pv 5Gi RWO Retain Pending fast <unset>", Some(7));
    expect(
        &["get", "podtemplates"],
        "shop-debug",
        "NAME CONTAINERS IMAGES POD LABELS",
        "shop-debug shell busybox:1.36 app=debug",
        None,
    );
    expect(
        &["get", "quota"],
        "shop-quota",
        "NAME REQUEST LIMIT AGE",
        "shop-quota pods: 3/20, requests.cpu: 300m/4 limits.memory: 768Mi/8Gi",
        Some(7),
    );
    let (h, _) = table(kubectl, &["get", "limits"], "shop-limits");
    assert_eq!(h, "NAME CREATED AT");

    // The Job got the labels kube generates from its uid.
    let labels = kubectl.ok(&[
        "get",
        "job",
        "shop-migrate",
        "-o",
        "jsonpath={.spec.template.metadata.labels}",
    ]);
    for key in [
        "batch.kubernetes.io/controller-uid",
        "controller-uid",
        "batch.kubernetes.io/job-name",
        "job-name",
    ] {
        assert!(labels.contains(&format!("\"{key}\"")), "{key} in {labels}");
    }
}
