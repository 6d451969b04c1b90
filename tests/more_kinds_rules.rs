//! The rules of the resource types of `more_kinds`' chart, with kubectl
//! 1.32 on both backends: immutable fields refused on update, kubectl's
//! generators (`create job`, `create cronjob`, ...) and discovery
//! (`api-resources`, `explain`).

use capstan_tests::apiserver::{ApiCluster, Backend, Kubectl};
use capstan_tests::kubectl::{table, without_age};

/// What `helm template` of a typical web application renders.
const APP: &str = include_str!("fixtures/shop-chart.yaml");

capstan_tests::on_both_backends!(immutable_fields_generators_and_discovery);

fn immutable_fields_generators_and_discovery(backend: Backend) {
    let cluster = ApiCluster::start_on(backend);
    let kubectl = &cluster.kubectl;
    kubectl.ok_with_input(&["apply", "-f", "-"], APP);

    let refused = kubectl.run_with_input(
        &["apply", "-f", "-"],
        &APP.replace(
            "kind: Role, name: shop-reader}",
            "kind: ClusterRole, name: shop-nodes}",
        ),
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "roleRef changed");
    assert!(
        stderr.contains("roleRef: Invalid value:") && stderr.contains("cannot change roleRef"),
        "{stderr}"
    );
    let refused = kubectl.run_with_input(
        &["apply", "-f", "-"],
        &APP.replace("type: gp3", "type: io2"),
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("parameters: Forbidden: updates to parameters are forbidden."),
        "{stderr}"
    );
    let refused = kubectl.run_with_input(
        &["apply", "-f", "-"],
        &APP.replace("value: 100000", "value: 200000"),
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("value: Forbidden: may not be changed in an update."),
        "{stderr}"
    );
    let refused = kubectl.run_with_input(
        &["apply", "-f", "-"],
        &APP.replace("shop/migrate:1.0", "shop/migrate:2.0"),
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("spec.template: Invalid value:") && stderr.contains("field is immutable"),
        "{stderr}"
    );

    let always = r#"
apiVersion: batch/v1
kind: Job
metadata: {name: forever}
spec:
  template:
    spec:
      containers: [{name: c, image: busybox}]
"#;
    let refused = kubectl.run_with_input(&["apply", "-f", "-"], always);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\""),
        "{stderr}"
    );
    let no_schedule = "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: never}\nspec:\n  jobTemplate: {spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}}}\n";
    let refused = kubectl.run_with_input(&["apply", "-f", "-"], no_schedule);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("spec.schedule: Required value"));

    generators(kubectl);
    discovery(kubectl);
}

fn generators(kubectl: &Kubectl) {
    let made = [
        (
            vec![
                "create",
                "job",
                "once",
                "--image=busybox:1.36",
                "--",
                "date",
            ],
            "job.batch/once created",
        ),
        (
            vec![
                "create",
                "cronjob",
                "tick",
                "--image=busybox:1.36",
                "--schedule=*/5 * * * *",
                "--",
                "date",
            ],
            "cronjob.batch/tick created",
        ),
        (
            vec!["create", "job", "from-cron", "--from=cronjob/tick"],
            "job.batch/from-cron created",
        ),
        (
            vec![
                "create",
                "quota",
                "small",
                "--hard=cpu=1,pods=2",
                "--scopes=BestEffort",
            ],
            "resourcequota/small created",
        ),
        (
            vec![
                "create",
                "pdb",
                "keep-one",
                "--selector=app=x",
                "--min-available=1",
            ],
            "poddisruptionbudget.policy/keep-one created",
        ),
        (
            vec![
                "create",
                "priorityclass",
                "urgent",
                "--value=1000",
                "--preemption-policy=Never",
            ],
            "priorityclass.scheduling.k8s.io/urgent created",
        ),
        (
            vec![
                "create",
                "role",
                "pod-reader",
                "--verb=get,list",
                "--resource=pods",
            ],
            "role.rbac.authorization.k8s.io/pod-reader created",
        ),
        (
            vec![
                "create",
                "rolebinding",
                "read-pods",
                "--role=pod-reader",
                "--user=jane",
                "--serviceaccount=default:shop",
            ],
            "rolebinding.rbac.authorization.k8s.io/read-pods created",
        ),
        (
            vec![
                "create",
                "clusterrole",
                "node-reader",
                "--verb=get",
                "--resource=nodes",
            ],
            "clusterrole.rbac.authorization.k8s.io/node-reader created",
        ),
        (
            vec![
                "create",
                "clusterrolebinding",
                "read-nodes",
                "--clusterrole=node-reader",
                "--group=ops",
            ],
            "clusterrolebinding.rbac.authorization.k8s.io/read-nodes created",
        ),
        (
            vec![
                "create",
                "ingress",
                "simple",
                "--class=nginx",
                "--rule=foo.example.com/bar=svc1:8080,tls=my-cert",
            ],
            "ingress.networking.k8s.io/simple created",
        ),
    ];
    for (args, line) in made {
        let out = kubectl.ok(&args);
        assert_eq!(out.trim(), line, "kubectl {args:?}");
    }
    let (_, row) = table(kubectl, &["get", "ing", "simple"], "simple");
    assert_eq!(without_age(&row, 5), "simple nginx foo.example.com 80, 443");
    let (_, row) = table(kubectl, &["get", "cj", "tick"], "tick");
    // ACTIVE counts the unfinished Jobs the CronJob controls: `from-cron`
    // (made from it above) until it finishes, and one more if a
    // five-minute mark fell while the test ran.
    let columns: Vec<&str> = row.split(' ').collect();
    assert_eq!(
        columns[..8],
        ["tick", "*/5", "*", "*", "*", "*", "<none>", "False"],
        "{row}"
    );
    assert!(["0", "1", "2"].contains(&columns[8]), "{row}");
    let (_, row) = table(
        kubectl,
        &["get", "rolebinding", "read-pods", "-o", "wide"],
        "read-pods",
    );
    assert_eq!(
        without_age(&row, 2),
        "read-pods Role/pod-reader jane default/shop"
    );
    let refused = kubectl.fails(&[
        "create",
        "clusterrolebinding",
        "bad",
        "--clusterrole=node-reader",
        "--serviceaccount=nons",
    ]);
    assert!(
        refused.contains("serviceaccount must be <namespace>:<name>"),
        "{refused}"
    );
}

fn discovery(kubectl: &Kubectl) {
    let resources = kubectl.ok(&["api-resources"]);
    let row = |name: &str| {
        resources
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|| panic!("no {name} in\n{resources}"))
    };
    for expected in [
        "persistentvolumeclaims pvc v1 true PersistentVolumeClaim",
        "persistentvolumes pv v1 false PersistentVolume",
        "podtemplates v1 true PodTemplate",
        "limitranges limits v1 true LimitRange",
        "resourcequotas quota v1 true ResourceQuota",
        "jobs batch/v1 true Job",
        "cronjobs cj batch/v1 true CronJob",
        "horizontalpodautoscalers hpa autoscaling/v2 true HorizontalPodAutoscaler",
        "poddisruptionbudgets pdb policy/v1 true PodDisruptionBudget",
        "ingresses ing networking.k8s.io/v1 true Ingress",
        "ingressclasses networking.k8s.io/v1 false IngressClass",
        "networkpolicies netpol networking.k8s.io/v1 true NetworkPolicy",
        "roles rbac.authorization.k8s.io/v1 true Role",
        "rolebindings rbac.authorization.k8s.io/v1 true RoleBinding",
        "clusterroles rbac.authorization.k8s.io/v1 false ClusterRole",
        "clusterrolebindings rbac.authorization.k8s.io/v1 false ClusterRoleBinding",
        "storageclasses sc storage.k8s.io/v1 false StorageClass",
        "priorityclasses pc scheduling.k8s.io/v1 false PriorityClass",
        "endpointslices discovery.k8s.io/v1 true EndpointSlice",
    ] {
        let name = expected.split(' ').next().unwrap();
        assert_eq!(row(name), expected);
    }
    let all = kubectl.ok(&["api-resources", "--categories=all", "-o", "name"]);
    for name in [
        "jobs.batch",
        "cronjobs.batch",
        "horizontalpodautoscalers.autoscaling",
    ] {
        assert!(all.lines().any(|l| l == name), "{name} in\n{all}");
    }
    let explained = kubectl.ok(&["explain", "cronjob.spec.schedule"]);
    assert!(
        explained.contains("KIND:       CronJob")
            && explained.contains("FIELD: schedule <string>")
            && explained.contains("Cron format"),
        "{explained}"
    );
    let explained = kubectl.ok(&[
        "explain",
        "hpa.spec.metrics",
        "--api-version=autoscaling/v2",
    ]);
    assert!(explained.contains("VERSION:    v2"), "{explained}");
}
