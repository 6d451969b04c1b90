//! What the nodes' identities may do. In kube the Node authorizer lets
//! `system:node:<name>` in `system:nodes` write its own Node, Lease, pods'
//! statuses and events, and NodeRestriction narrows it further. Against
//! an API server without a Node authorizer, the nodes would be refused
//! every write; then (and only then) the process grants `system:nodes`
//! kube's `system:node` ClusterRole through RBAC, as clusters did before
//! the Node authorizer, and says so in its log.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams, PostParams};
use kube::Api;

use super::fleet::{node_user, NODES_GROUP};
use crate::error::Error;
use crate::heartbeat::lease::NAMESPACE as LEASE_NAMESPACE;

/// kube's ClusterRole for kubelets, when RBAC alone authorizes them.
pub const ROLE: &str = "system:node";
/// The binding of that role to every node.
pub const BINDING: &str = "capstan:simulated-nodes";
const MANAGER: &str = "capstan-nodes";

/// The writes a node makes, as (verb, group, resource, subresource,
/// namespace); those on nodes and leases name the node's own object, as
/// a Node authorizer allows only those.
const NEEDED: [(&str, &str, &str, &str, &str); 4] = [
    ("create", "", "nodes", "", ""),
    ("patch", "", "nodes", "status", ""),
    (
        "update",
        "coordination.k8s.io",
        "leases",
        "",
        LEASE_NAMESPACE,
    ),
    ("patch", "", "pods", "status", "default"),
];

/// Makes sure `node` may write what a kubelet writes (see the module).
pub async fn ensure(client: &kube::Client, node: &str) -> Result<(), Error> {
    if allowed(client, node).await? {
        return Ok(());
    }
    tracing::warn!(
        role = ROLE,
        binding = BINDING,
        "the API server refuses node identities their writes (no Node authorizer): \
         binding kube's system:node ClusterRole to the system:nodes group"
    );
    let params = PatchParams::apply(MANAGER).force();
    Api::<ClusterRole>::all(client.clone())
        .patch(ROLE, &params, &Patch::Apply(role()))
        .await
        .map_err(Error::api(format!("apply ClusterRole {ROLE}")))?;
    Api::<ClusterRoleBinding>::all(client.clone())
        .patch(BINDING, &params, &Patch::Apply(binding()))
        .await
        .map_err(Error::api(format!("apply ClusterRoleBinding {BINDING}")))?;
    Ok(())
}

async fn allowed(client: &kube::Client, node: &str) -> Result<bool, Error> {
    let api = Api::<SubjectAccessReview>::all(client.clone());
    for (verb, group, resource, subresource, namespace) in NEEDED {
        let own = matches!(resource, "nodes" | "leases") && verb != "create";
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(node_user(node)),
                groups: Some(vec![NODES_GROUP.into(), "system:authenticated".into()]),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(verb.into()),
                    group: Some(group.into()),
                    resource: Some(resource.into()),
                    subresource: Some(subresource.into()),
                    namespace: Some(namespace.into()),
                    name: own.then(|| node.to_string()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let answer = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(Error::api("ask whether nodes may write their objects"))?;
        if !answer.status.is_some_and(|s| s.allowed) {
            return Ok(false);
        }
    }
    Ok(true)
}

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
    let strings = |list: &[&str]| list.iter().map(|s| s.to_string()).collect();
    PolicyRule {
        api_groups: Some(strings(groups)),
        resources: Some(strings(resources)),
        verbs: strings(verbs),
        ..PolicyRule::default()
    }
}

/// kube's bootstrap `system:node` rules, less what only volume plugins use.
fn role() -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(ROLE.into()),
            labels: Some(
                [(
                    "kubernetes.io/bootstrapping".to_string(),
                    "rbac-defaults".to_string(),
                )]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        rules: Some(vec![
            rule(&["authentication.k8s.io"], &["tokenreviews"], &["create"]),
            rule(
                &["authorization.k8s.io"],
                &["localsubjectaccessreviews", "subjectaccessreviews"],
                &["create"],
            ),
            rule(&[""], &["services"], &["get", "list", "watch"]),
            rule(
                &[""],
                &["nodes"],
                &["create", "get", "list", "watch", "patch", "update"],
            ),
            rule(&[""], &["nodes/status"], &["patch", "update"]),
            rule(
                &["", "events.k8s.io"],
                &["events"],
                &["create", "patch", "update"],
            ),
            rule(&[""], &["pods"], &["get", "list", "watch", "delete"]),
            rule(&[""], &["pods/status"], &["patch", "update"]),
            rule(&[""], &["pods/eviction"], &["create"]),
            rule(&[""], &["configmaps", "secrets"], &["get", "list", "watch"]),
            rule(
                &[""],
                &["persistentvolumeclaims", "persistentvolumes", "endpoints"],
                &["get"],
            ),
            rule(&[""], &["serviceaccounts/token"], &["create"]),
            rule(
                &["coordination.k8s.io"],
                &["leases"],
                &["create", "delete", "get", "patch", "update"],
            ),
            rule(
                &["certificates.k8s.io"],
                &["certificatesigningrequests"],
                &["create", "get", "list", "watch"],
            ),
            rule(
                &["node.k8s.io"],
                &["runtimeclasses"],
                &["get", "list", "watch"],
            ),
        ]),
        ..ClusterRole::default()
    }
}

fn binding() -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(BINDING.into()),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: ROLE.into(),
        },
        subjects: Some(vec![Subject {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Group".into(),
            name: NODES_GROUP.into(),
            namespace: None,
        }]),
    }
}
