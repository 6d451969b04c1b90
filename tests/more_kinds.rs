//! The resource types real charts and tutorials use beyond pods and
//! deployments (RBAC, Ingress, storage, Jobs, autoscaling, policies),
//! driven with kubectl 1.32 and its default validation on both backends.

use capstan_tests::apiserver::{ApiCluster, Backend, Kubectl};

/// What `helm template` of a typical web application renders.
const APP: &str = r#"
apiVersion: v1
kind: ServiceAccount
metadata: {name: shop, labels: {app.kubernetes.io/name: shop}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: shop-reader}
rules:
- apiGroups: [""]
  resources: [configmaps, secrets]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: shop-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: shop-reader}
subjects:
- {kind: ServiceAccount, name: shop, namespace: default}
- {kind: User, name: jane}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: shop-nodes}
rules:
- apiGroups: [""]
  resources: [nodes]
  verbs: [get, list]
- nonResourceURLs: [/metrics]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: shop-nodes}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: shop-nodes}
subjects:
- {kind: ServiceAccount, name: shop, namespace: default}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: fast}
provisioner: ebs.csi.aws.com
parameters: {type: gp3}
reclaimPolicy: Retain
volumeBindingMode: WaitForFirstConsumer
allowVolumeExpansion: true
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: shop-pv}
spec:
  capacity: {storage: 5Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: fast
  hostPath: {path: /srv/shop}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: shop-data}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: fast
  resources: {requests: {storage: 1Gi}}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: shop-high}
value: 100000
globalDefault: false
description: Shop pods go first.
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: shop, labels: {app.kubernetes.io/name: shop}}
spec:
  replicas: 2
  selector: {matchLabels: {app.kubernetes.io/name: shop}}
  template:
    metadata: {labels: {app.kubernetes.io/name: shop}}
    spec:
      serviceAccountName: shop
      priorityClassName: shop-high
      containers:
      - name: web
        image: "nginx:1.27"
        ports: [{name: http, containerPort: 80}]
        volumeMounts: [{name: data, mountPath: /data}]
      volumes:
      - name: data
        persistentVolumeClaim: {claimName: shop-data}
---
apiVersion: v1
kind: Service
metadata: {name: shop}
spec:
  selector: {app.kubernetes.io/name: shop}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: nginx}
spec: {controller: k8s.io/ingress-nginx}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: shop
  annotations: {nginx.ingress.kubernetes.io/rewrite-target: /}
spec:
  ingressClassName: nginx
  tls: [{hosts: [shop.example.com], secretName: shop-tls}]
  rules:
  - host: shop.example.com
    http:
      paths:
      - path: /
        pathType: Prefix
        backend: {service: {name: shop, port: {name: http}}}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: shop}
spec:
  podSelector: {matchLabels: {app.kubernetes.io/name: shop}}
  policyTypes: [Ingress]
  ingress:
  - from: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ingress-nginx}}}]
    ports: [{protocol: TCP, port: 80}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: shop}
spec:
  minAvailable: 1
  selector: {matchLabels: {app.kubernetes.io/name: shop}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: shop}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: shop}
  minReplicas: 2
  maxReplicas: 10
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: shop-migrate, annotations: {helm.sh/hook: pre-upgrade}}
spec:
  backoffLimit: 2
  template:
    spec:
      restartPolicy: Never
      containers: [{name: migrate, image: "shop/migrate:1.0", args: [up]}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: shop-report}
spec:
  schedule: "0 3 * * *"
  concurrencyPolicy: Forbid
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{name: report, image: "shop/report:1.0"}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: shop-extra, labels: {kubernetes.io/service-name: shop}}
addressType: IPv4
ports: [{name: http, port: 80, protocol: TCP}]
endpoints:
- addresses: [10.1.0.5]
  conditions: {ready: true}
---
apiVersion: v1
kind: PodTemplate
metadata: {name: shop-debug}
template:
  metadata: {labels: {app: debug}}
  spec:
    containers: [{name: shell, image: "busybox:1.36"}]
---
apiVersion: v1
kind: LimitRange
metadata: {name: shop-limits}
spec:
  limits:
  - type: Container
    default: {cpu: 500m, memory: 256Mi}
    defaultRequest: {cpu: 100m, memory: 128Mi}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: shop-quota}
spec:
  hard: {pods: "20", requests.cpu: "4", limits.memory: 8Gi}
"#;

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

capstan_tests::on_both_backends!(
    a_chart_applies_lists_and_deletes,
    immutable_fields_generators_and_discovery,
);

/// The header and the row of `name` of `kubectl get`, words single-spaced.
fn table(kubectl: &Kubectl, args: &[&str], name: &str) -> (String, String) {
    let out = kubectl.ok(args);
    let squeeze = |l: &str| l.split_whitespace().collect::<Vec<_>>().join(" ");
    let header = squeeze(out.lines().next().unwrap_or(""));
    let row = out
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .map(squeeze)
        .unwrap_or_else(|| panic!("no {name} in\n{out}"));
    (header, row)
}

/// Drops the AGE cell (whatever the clock says) from a squeezed row.
fn without_age(row: &str, age_index: usize) -> String {
    let mut words: Vec<&str> = row.split(' ').collect();
    words.remove(age_index);
    words.join(" ")
}

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
    expect(
        &["get", "jobs"],
        "shop-migrate",
        "NAME STATUS COMPLETIONS DURATION AGE",
        "shop-migrate Running 0/1",
        Some(3),
    );
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
    expect(
        &["get", "hpa"],
        "shop",
        "NAME REFERENCE TARGETS MINPODS MAXPODS REPLICAS AGE",
        "shop Deployment/shop cpu: <unknown>/70% 2 10 0",
        Some(7),
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
        "shop-quota pods: 0/20, requests.cpu: 0/4 limits.memory: 0/8Gi",
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
    assert!(
        row.starts_with("tick */5 * * * * <none> False 0 <none>"),
        "{row}"
    );
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
