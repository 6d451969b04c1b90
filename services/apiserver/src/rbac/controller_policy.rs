//! The bootstrap roles of kube-controller-manager and its controllers,
//! as kube ships them: `system:kube-controller-manager` (what the manager
//! itself needs: informers on everything, leader election, the
//! controllers' service accounts and their tokens) bound to the user of
//! that name, and one `system:controller:<account>` role per controller,
//! bound to the service account `kube-system/<account>` each controller
//! acts as under `--use-service-account-credentials`. A controller can
//! do what its role grants and nothing more.

use serde_json::{json, Value};

use super::bootstrap_objects::{cluster_role, events, metadata, named, rule};
use super::objects::GROUP;

/// The user kube-controller-manager authenticates as.
pub const CONTROLLER_MANAGER_USER: &str = "system:kube-controller-manager";

const ROLE_PREFIX: &str = "system:controller:";

const READ: &[&str] = &["get", "list", "watch"];
const LIST_WATCH: &[&str] = &["list", "watch"];
const UPDATE: &[&str] = &["update"];

const CORE: &str = "";
const APPS: &str = "apps";
const EXTENSIONS: &str = "extensions";
const BATCH: &str = "batch";
const POLICY: &str = "policy";
const COORDINATION: &str = "coordination.k8s.io";
const DISCOVERY: &str = "discovery.k8s.io";
const AUTOSCALING: &str = "autoscaling";
const STORAGE: &str = "storage.k8s.io";
const RBAC: &str = "rbac.authorization.k8s.io";
const CERTIFICATES: &str = "certificates.k8s.io";
const ADMISSION_REGISTRATION: &str = "admissionregistration.k8s.io";

fn manager_role() -> Value {
    cluster_role(
        CONTROLLER_MANAGER_USER,
        &[],
        vec![
            events(),
            rule(&["create"], &[COORDINATION], &["leases"]),
            named(
                &["get", "update"],
                &[COORDINATION],
                &["leases"],
                &["kube-controller-manager"],
            ),
            rule(&["create"], &[CORE], &["secrets", "serviceaccounts"]),
            rule(&["delete"], &[CORE], &["secrets"]),
            rule(
                &["get"],
                &[CORE],
                &["configmaps", "namespaces", "secrets", "serviceaccounts"],
            ),
            rule(UPDATE, &[CORE], &["secrets", "serviceaccounts"]),
            rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
            rule(
                &["create"],
                &["authorization.k8s.io"],
                &["subjectaccessreviews"],
            ),
            rule(LIST_WATCH, &["*"], &["*"]),
            rule(&["create"], &[CORE], &["serviceaccounts/token"]),
        ],
    )
}

/// Each controller's service account and its rules.
fn controllers() -> Vec<(&'static str, Vec<Value>)> {
    let mut all = workload_controllers();
    all.extend(cluster_controllers());
    all
}

fn workload_controllers() -> Vec<(&'static str, Vec<Value>)> {
    let pods_write = &["list", "watch", "create", "delete", "patch"];
    vec![
        (
            "replicaset-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update"],
                    &[APPS, EXTENSIONS],
                    &["replicasets"],
                ),
                rule(
                    UPDATE,
                    &[APPS, EXTENSIONS],
                    &["replicasets/status", "replicasets/finalizers"],
                ),
                rule(
                    &["list", "watch", "patch", "create", "delete"],
                    &[CORE],
                    &["pods"],
                ),
                events(),
            ],
        ),
        (
            "replication-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update"],
                    &[CORE],
                    &["replicationcontrollers"],
                ),
                rule(
                    UPDATE,
                    &[CORE],
                    &[
                        "replicationcontrollers/status",
                        "replicationcontrollers/finalizers",
                    ],
                ),
                rule(
                    &["list", "watch", "patch", "create", "delete"],
                    &[CORE],
                    &["pods"],
                ),
                events(),
            ],
        ),
        (
            "deployment-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update"],
                    &[EXTENSIONS, APPS],
                    &["deployments"],
                ),
                rule(
                    UPDATE,
                    &[EXTENSIONS, APPS],
                    &["deployments/status", "deployments/finalizers"],
                ),
                rule(
                    &[
                        "get", "list", "watch", "create", "update", "patch", "delete",
                    ],
                    &[APPS, EXTENSIONS],
                    &["replicasets"],
                ),
                rule(&["get", "list", "watch", "update"], &[CORE], &["pods"]),
                events(),
            ],
        ),
        (
            "statefulset-controller",
            vec![
                rule(LIST_WATCH, &[CORE], &["pods"]),
                rule(READ, &[APPS], &["statefulsets"]),
                rule(
                    UPDATE,
                    &[APPS],
                    &["statefulsets/status", "statefulsets/finalizers"],
                ),
                rule(
                    &["get", "create", "delete", "update", "patch"],
                    &[CORE],
                    &["pods"],
                ),
                rule(
                    &[
                        "get", "create", "delete", "update", "patch", "list", "watch",
                    ],
                    &[APPS],
                    &["controllerrevisions"],
                ),
                rule(
                    &["get", "create", "list", "watch"],
                    &[CORE],
                    &["persistentvolumeclaims"],
                ),
                rule(&["update", "delete"], &[CORE], &["persistentvolumeclaims"]),
                rule(UPDATE, &[CORE], &["pods/finalizers"]),
                events(),
            ],
        ),
        (
            "daemon-set-controller",
            vec![
                rule(READ, &[EXTENSIONS, APPS], &["daemonsets"]),
                rule(
                    UPDATE,
                    &[EXTENSIONS, APPS],
                    &["daemonsets/status", "daemonsets/finalizers"],
                ),
                rule(LIST_WATCH, &[CORE], &["nodes"]),
                rule(pods_write, &[CORE], &["pods"]),
                rule(&["create"], &[CORE], &["pods/binding"]),
                rule(
                    &[
                        "get", "list", "watch", "create", "delete", "update", "patch",
                    ],
                    &[APPS],
                    &["controllerrevisions"],
                ),
                events(),
            ],
        ),
        (
            "job-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update", "patch"],
                    &[BATCH],
                    &["jobs"],
                ),
                rule(UPDATE, &[BATCH], &["jobs/status", "jobs/finalizers"]),
                rule(pods_write, &[CORE], &["pods"]),
                events(),
            ],
        ),
        (
            "cronjob-controller",
            vec![
                rule(&["get", "list", "watch", "update"], &[BATCH], &["cronjobs"]),
                rule(
                    &[
                        "get", "list", "watch", "create", "update", "delete", "patch",
                    ],
                    &[BATCH],
                    &["jobs"],
                ),
                rule(
                    UPDATE,
                    &[BATCH],
                    &["cronjobs/status", "cronjobs/finalizers"],
                ),
                rule(&["list", "watch", "delete"], &[CORE], &["pods"]),
                events(),
            ],
        ),
        (
            "ttl-after-finished-controller",
            vec![
                rule(&["get", "list", "watch", "delete"], &[BATCH], &["jobs"]),
                events(),
            ],
        ),
        (
            "disruption-controller",
            vec![
                rule(READ, &[EXTENSIONS, APPS], &["deployments", "replicasets"]),
                rule(READ, &[CORE], &["replicationcontrollers"]),
                rule(READ, &[POLICY], &["poddisruptionbudgets"]),
                rule(READ, &[APPS], &["statefulsets"]),
                rule(UPDATE, &[POLICY], &["poddisruptionbudgets/status"]),
                rule(&["patch", "update"], &[CORE], &["pods/status"]),
                rule(&["get"], &["*"], &["*/scale"]),
                events(),
            ],
        ),
        (
            "horizontal-pod-autoscaler",
            vec![
                rule(READ, &[AUTOSCALING], &["horizontalpodautoscalers"]),
                rule(UPDATE, &[AUTOSCALING], &["horizontalpodautoscalers/status"]),
                rule(&["get", "update"], &["*"], &["*/scale"]),
                rule(LIST_WATCH, &[CORE], &["pods"]),
                rule(LIST_WATCH, &["metrics.k8s.io"], &["pods"]),
                rule(READ, &["custom.metrics.k8s.io"], &["*"]),
                rule(READ, &["external.metrics.k8s.io"], &["*"]),
                events(),
            ],
        ),
    ]
}

fn cluster_controllers() -> Vec<(&'static str, Vec<Value>)> {
    vec![
        (
            "generic-garbage-collector",
            vec![
                rule(
                    &["get", "list", "watch", "patch", "update", "delete"],
                    &["*"],
                    &["*"],
                ),
                events(),
            ],
        ),
        (
            "namespace-controller",
            vec![
                rule(
                    &["get", "list", "watch", "delete"],
                    &[CORE],
                    &["namespaces"],
                ),
                rule(
                    UPDATE,
                    &[CORE],
                    &["namespaces/finalize", "namespaces/status"],
                ),
                rule(
                    &["get", "list", "watch", "delete", "deletecollection"],
                    &["*"],
                    &["*"],
                ),
            ],
        ),
        (
            "resourcequota-controller",
            vec![
                rule(LIST_WATCH, &["*"], &["*"]),
                rule(UPDATE, &[CORE], &["resourcequotas/status"]),
                events(),
            ],
        ),
        (
            "service-account-controller",
            vec![rule(&["create"], &[CORE], &["serviceaccounts"]), events()],
        ),
        (
            "root-ca-cert-publisher",
            vec![
                rule(&["create", "update"], &[CORE], &["configmaps"]),
                events(),
            ],
        ),
        (
            "pod-garbage-collector",
            vec![
                rule(&["list", "watch", "delete"], &[CORE], &["pods"]),
                rule(READ, &[CORE], &["nodes"]),
                rule(&["patch"], &[CORE], &["pods/status"]),
            ],
        ),
        (
            "node-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update", "delete", "patch"],
                    &[CORE],
                    &["nodes"],
                ),
                rule(
                    &["patch", "update"],
                    &[CORE],
                    &["nodes/status", "pods/status"],
                ),
                rule(&["list", "watch", "get", "delete"], &[CORE], &["pods"]),
                events(),
            ],
        ),
        (
            "endpoint-controller",
            vec![
                rule(READ, &[CORE], &["services", "pods"]),
                rule(
                    &["get", "list", "watch", "create", "update", "delete"],
                    &[CORE],
                    &["endpoints"],
                ),
                rule(&["create"], &[CORE], &["endpoints/restricted"]),
                events(),
            ],
        ),
        (
            "endpointslice-controller",
            vec![
                rule(READ, &[CORE], &["services", "pods", "nodes"]),
                rule(UPDATE, &[CORE], &["services/finalizers"]),
                rule(
                    &["get", "list", "watch", "create", "update", "delete"],
                    &[DISCOVERY],
                    &["endpointslices"],
                ),
                events(),
            ],
        ),
        (
            "endpointslicemirroring-controller",
            vec![
                rule(READ, &[CORE], &["services", "endpoints"]),
                rule(
                    UPDATE,
                    &[CORE],
                    &["services/finalizers", "endpoints/finalizers"],
                ),
                rule(
                    &["get", "list", "watch", "create", "update", "delete"],
                    &[DISCOVERY],
                    &["endpointslices"],
                ),
                events(),
            ],
        ),
        (
            "clusterrole-aggregation-controller",
            vec![rule(
                &["escalate", "get", "list", "watch", "update", "patch"],
                &[RBAC],
                &["clusterroles"],
            )],
        ),
        (
            "ephemeral-volume-controller",
            vec![
                rule(READ, &[CORE], &["pods"]),
                rule(UPDATE, &[CORE], &["pods/finalizers"]),
                rule(
                    &["get", "list", "watch", "create"],
                    &[CORE],
                    &["persistentvolumeclaims"],
                ),
                events(),
            ],
        ),
        (
            "persistent-volume-binder",
            vec![
                rule(
                    &["get", "list", "watch", "update", "create", "delete"],
                    &[CORE],
                    &["persistentvolumes"],
                ),
                rule(
                    UPDATE,
                    &[CORE],
                    &["persistentvolumes/status", "persistentvolumeclaims/status"],
                ),
                rule(
                    &["get", "list", "watch", "update"],
                    &[CORE],
                    &["persistentvolumeclaims"],
                ),
                rule(
                    &["list", "watch", "get", "create", "delete"],
                    &[CORE],
                    &["pods"],
                ),
                rule(READ, &[STORAGE], &["storageclasses"]),
                rule(LIST_WATCH, &[CORE], &["nodes"]),
                rule(&["watch"], &[CORE], &["events"]),
                rule(&["get"], &[CORE], &["services"]),
                events(),
            ],
        ),
        (
            "pvc-protection-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update"],
                    &[CORE],
                    &["persistentvolumeclaims"],
                ),
                rule(READ, &[CORE], &["pods"]),
                events(),
            ],
        ),
        (
            "pv-protection-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update"],
                    &[CORE],
                    &["persistentvolumes"],
                ),
                events(),
            ],
        ),
        (
            "ttl-controller",
            vec![
                rule(&["update", "patch", "list", "watch"], &[CORE], &["nodes"]),
                events(),
            ],
        ),
        (
            "certificate-controller",
            vec![
                rule(
                    &["get", "list", "watch", "delete"],
                    &[CERTIFICATES],
                    &["certificatesigningrequests"],
                ),
                rule(
                    UPDATE,
                    &[CERTIFICATES],
                    &[
                        "certificatesigningrequests/status",
                        "certificatesigningrequests/approval",
                    ],
                ),
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["subjectaccessreviews"],
                ),
                events(),
            ],
        ),
        (
            "validatingadmissionpolicy-status-controller",
            vec![
                rule(
                    READ,
                    &[ADMISSION_REGISTRATION],
                    &["validatingadmissionpolicies"],
                ),
                rule(
                    &["get", "patch", "update"],
                    &[ADMISSION_REGISTRATION],
                    &["validatingadmissionpolicies/status"],
                ),
                events(),
            ],
        ),
    ]
}

pub fn cluster_roles() -> Vec<Value> {
    let mut roles = vec![manager_role()];
    for (account, rules) in controllers() {
        roles.push(cluster_role(&format!("{ROLE_PREFIX}{account}"), &[], rules));
    }
    roles
}

fn bind(role: &str, subjects: Vec<Value>) -> Value {
    json!({"apiVersion": format!("{GROUP}/v1"), "kind": "ClusterRoleBinding",
           "metadata": metadata(role, &[]),
           "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role},
           "subjects": subjects})
}

pub fn cluster_role_bindings() -> Vec<Value> {
    let user = json!({"apiGroup": GROUP, "kind": "User", "name": CONTROLLER_MANAGER_USER});
    let mut bindings = vec![bind(CONTROLLER_MANAGER_USER, vec![user])];
    for (account, _) in controllers() {
        let subject =
            json!({"kind": "ServiceAccount", "name": account, "namespace": "kube-system"});
        bindings.push(bind(&format!("{ROLE_PREFIX}{account}"), vec![subject]));
    }
    bindings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_controller_role_is_bound_to_its_service_account() {
        let roles = cluster_roles();
        let bindings = cluster_role_bindings();
        assert_eq!(roles.len(), bindings.len());
        let deployment = bindings
            .iter()
            .find(|b| b["metadata"]["name"] == "system:controller:deployment-controller")
            .unwrap();
        assert_eq!(deployment["subjects"][0]["kind"], "ServiceAccount");
        assert_eq!(deployment["subjects"][0]["namespace"], "kube-system");
        assert_eq!(deployment["subjects"][0]["name"], "deployment-controller");
        let manager = bindings
            .iter()
            .find(|b| b["metadata"]["name"] == CONTROLLER_MANAGER_USER)
            .unwrap();
        assert_eq!(manager["subjects"][0]["kind"], "User");
    }
}
