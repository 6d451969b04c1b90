//! `NodeRestriction`: a node (`system:node:<name>` in `system:nodes`)
//! writes only its own objects, as kube's plugin allows: its own Node
//! (not its taints once registered, and no label in the
//! `node-restriction.kubernetes.io/` namespace nor another
//! `kubernetes.io`/`k8s.io` label kubelets may not set), its own Lease
//! and CSINode, the status, eviction and deletion of pods bound to it,
//! mirror pods of its own that reference no other object, and tokens
//! only when bound to a pod of its own (by name and uid). Other users
//! pass.

use std::sync::Arc;

use serde_json::Value;

use crate::admission::objects::{Freshness, Objects, PODS};
use crate::admission::{AdmissionError, Admit, Attributes, Operation, Plugin};
use crate::auth::node_name;
use crate::object::meta;

const NAME: &str = "NodeRestriction";
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
const RESTRICTED_PREFIX: &str = "node-restriction.kubernetes.io/";
/// The `kubernetes.io` labels a kubelet may set on its Node.
const KUBELET_LABELS: &[&str] = &[
    "kubernetes.io/hostname",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
];
/// Label namespaces a kubelet may use freely.
const KUBELET_LABEL_NAMESPACES: &[&str] = &["kubelet.kubernetes.io", "node.kubernetes.io"];

/// Reads the pods a node evicts or binds a token to (kube's live `Get`).
pub struct NodeRestriction {
    objects: Arc<dyn Objects>,
}

type Check = Result<(), String>;

impl NodeRestriction {
    pub fn new(objects: Arc<dyn Objects>) -> NodeRestriction {
        NodeRestriction { objects }
    }

    /// The pod `name` of the request's namespace, as stored now; a 404
    /// when there is none, as kube answers.
    async fn pod(&self, a: &Attributes<'_>, name: &str) -> Result<Value, AdmissionError> {
        let found = self
            .objects
            .get(PODS, a.namespace, name, Freshness::Current);
        found.await?.ok_or_else(|| AdmissionError::NotFound {
            resource: "pods".into(),
            name: name.into(),
        })
    }

    /// A node evicts only pods bound to it.
    async fn eviction(&self, node: &str, a: &Attributes<'_>) -> Result<(), AdmissionError> {
        let pod = self.pod(a, a.name).await?;
        match bound_to(Some(&pod), node) {
            true => Ok(()),
            false => Err(denied(format!(
                "node {node} can only evict pods with spec.nodeName set to itself"
            ))),
        }
    }

    /// A node asks tokens only bound to a pod of its own, named with its
    /// uid, so a token never outlives the pod it was issued for.
    async fn token(
        &self,
        node: &str,
        a: &Attributes<'_>,
        request: Option<&Value>,
    ) -> Result<(), AdmissionError> {
        let reference = &request.unwrap_or(&Value::Null)["spec"]["boundObjectRef"];
        let name = reference["name"].as_str().unwrap_or("");
        let is_pod = reference["kind"] == "Pod" && reference["apiVersion"] == "v1";
        if !is_pod || name.is_empty() {
            return Err(denied("node requested token not bound to a pod"));
        }
        let Some(uid) = reference["uid"].as_str().filter(|u| !u.is_empty()) else {
            return Err(denied(
                "node requested token with a pod binding without a uid",
            ));
        };
        let pod = self.pod(a, name).await?;
        if meta::uid(&pod) != uid {
            return Err(denied(format!(
                "the UID in the bound object reference ({uid}) does not match the UID in record. \
                 The object might have been deleted and then recreated"
            )));
        }
        match bound_to(Some(&pod), node) {
            true => Ok(()),
            false => Err(denied(
                "node requested token bound to a pod scheduled on a different node",
            )),
        }
    }

    async fn admit(
        &self,
        node: &str,
        a: &Attributes<'_>,
        object: Option<&Value>,
    ) -> Result<(), AdmissionError> {
        match (a.operation, a.group, a.resource, a.subresource) {
            (Operation::Create, "", "pods", "eviction") => self.eviction(node, a).await,
            (Operation::Create, "", "serviceaccounts", "token") => {
                self.token(node, a, object).await
            }
            _ => check(node, a, object).map_err(denied),
        }
    }
}

fn denied(reason: impl Into<String>) -> AdmissionError {
    AdmissionError::denied(NAME, reason)
}

impl Plugin for NodeRestriction {
    fn name(&self) -> &str {
        NAME
    }

    fn validate<'a>(&'a self, a: &'a Attributes<'a>, object: Option<&'a Value>) -> Admit<'a> {
        Box::pin(async move {
            match node_name(a.user) {
                Some(node) => self.admit(node, a, object).await,
                None => Ok(()),
            }
        })
    }
}

fn check(node: &str, a: &Attributes, object: Option<&Value>) -> Check {
    match (a.group, a.resource) {
        ("", "pods") => pod(node, a, object),
        ("", "nodes") => node_object(node, a, object),
        ("coordination.k8s.io", "leases") | ("storage.k8s.io", "csinodes") => {
            own_name(node, a, a.resource)
        }
        _ => Ok(()),
    }
}

fn bound_to(pod: Option<&Value>, node: &str) -> bool {
    pod.is_some_and(|p| p["spec"]["nodeName"] == node)
}

fn pod(node: &str, a: &Attributes, object: Option<&Value>) -> Check {
    match (a.operation, a.subresource) {
        (Operation::Create, "") => mirror_pod(node, object.unwrap_or(&Value::Null)),
        (Operation::Delete, "") if !bound_to(a.old_object, node) => Err(format!(
            "node \"{node}\" can only delete pods with spec.nodeName set to itself"
        )),
        (Operation::Delete, "") => Ok(()),
        (Operation::Update, "status") if !bound_to(a.old_object, node) => Err(format!(
            "node \"{node}\" can only update pod status for pods with spec.nodeName set to itself"
        )),
        (Operation::Update, "status") => Ok(()),
        (operation, "") => Err(format!(
            "unexpected operation {:?}, node \"{node}\" can only create and delete mirror pods",
            operation.as_str()
        )),
        (_, subresource) => Err(format!(
            "unexpected pod subresource {subresource:?}, only 'status' and 'eviction' are allowed"
        )),
    }
}

/// A node creates only mirror pods of its own static pods: bound to it,
/// owned by its Node if by anything, naming no Secret, ConfigMap, claim
/// or ServiceAccount it could not otherwise read.
fn mirror_pod(node: &str, pod: &Value) -> Check {
    if pod["metadata"]["annotations"][MIRROR_ANNOTATION].is_null() {
        return Err(format!(
            "pod does not have \"{MIRROR_ANNOTATION}\" annotation, node \"{node}\" can only create mirror pods"
        ));
    }
    if pod["spec"]["nodeName"] != node {
        return Err(format!(
            "node \"{node}\" can only create pods with spec.nodeName set to itself"
        ));
    }
    let owners = pod["metadata"]["ownerReferences"].as_array();
    if let Some(owners) = owners.filter(|o| !o.is_empty()) {
        let own_node =
            |o: &Value| o["kind"] == "Node" && o["name"] == node && o["apiVersion"] == "v1";
        if owners.len() > 1 || !owners.iter().all(own_node) {
            return Err(format!(
                "node \"{node}\" can only create pods with an owner reference set to itself"
            ));
        }
    }
    if let Some(kind) = referenced_kind(pod) {
        return Err(format!(
            "node \"{node}\" can not create pods that reference {kind}"
        ));
    }
    Ok(())
}

/// The first kind of object a pod names that a mirror pod may not.
fn referenced_kind(pod: &Value) -> Option<&'static str> {
    let spec = &pod["spec"];
    if spec["serviceAccountName"]
        .as_str()
        .is_some_and(|s| !s.is_empty())
    {
        return Some("serviceaccounts");
    }
    let text = spec.to_string();
    let names = |fields: &[&str]| fields.iter().any(|f| text.contains(&format!("\"{f}\"")));
    if names(&["secret", "secretKeyRef", "secretRef", "imagePullSecrets"]) {
        return Some("secrets");
    }
    if names(&["configMap", "configMapKeyRef", "configMapRef"]) {
        return Some("configmaps");
    }
    if names(&["persistentVolumeClaim", "ephemeral"]) {
        return Some("persistentvolumeclaims");
    }
    None
}

fn own_name(node: &str, a: &Attributes, resource: &str) -> Check {
    match a.name == node {
        true => Ok(()),
        false => Err(format!(
            "node \"{node}\" is not allowed to modify {resource} \"{}\"",
            a.name
        )),
    }
}

fn node_object(node: &str, a: &Attributes, object: Option<&Value>) -> Check {
    let name = match a.operation {
        Operation::Create => object.map(meta::name).unwrap_or(a.name),
        _ => a.name,
    };
    if name != node {
        return Err(format!(
            "node \"{node}\" is not allowed to modify node \"{name}\""
        ));
    }
    let (Some(new), Operation::Create | Operation::Update) = (object, a.operation) else {
        return Ok(());
    };
    let old = a.old_object.unwrap_or(&Value::Null);
    let forbidden = forbidden_labels(new, old);
    if !forbidden.is_empty() {
        return Err(format!(
            "node \"{node}\" is not allowed to modify labels: {}",
            forbidden.join(", ")
        ));
    }
    if a.operation == Operation::Update && new["spec"]["taints"] != old["spec"]["taints"] {
        return Err(format!("node \"{node}\" is not allowed to modify taints"));
    }
    Ok(())
}

/// The labels `new` adds or changes from `old` that a kubelet may not set.
fn forbidden_labels(new: &Value, old: &Value) -> Vec<String> {
    let old_labels = &old["metadata"]["labels"];
    let changed = new["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(key, value)| old_labels.get(key.as_str()) != Some(*value));
    let mut removed: Vec<String> = old_labels
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(key, _)| new["metadata"]["labels"].get(key.as_str()).is_none())
        .map(|(key, _)| key.clone())
        .filter(|key| key.starts_with(RESTRICTED_PREFIX))
        .collect();
    let mut forbidden: Vec<String> = changed
        .map(|(key, _)| key.clone())
        .filter(|key| !kubelet_may_set(key))
        .collect();
    forbidden.append(&mut removed);
    forbidden.sort();
    forbidden
}

fn kubelet_may_set(key: &str) -> bool {
    let Some((namespace, _)) = key.split_once('/') else {
        return true;
    };
    if key.starts_with(RESTRICTED_PREFIX) {
        return false;
    }
    let kube_owned =
        |domain: &str| namespace == domain || namespace.ends_with(&format!(".{domain}"));
    if !kube_owned("kubernetes.io") && !kube_owned("k8s.io") {
        return true;
    }
    KUBELET_LABELS.contains(&key) || KUBELET_LABEL_NAMESPACES.contains(&namespace)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::plugins::testing::Memory;
    use crate::admission::Feedback;
    use crate::auth::UserInfo;
    use serde_json::json;

    fn attributes<'a>(
        user: &'a UserInfo,
        operation: Operation,
        resource: &'a str,
        subresource: &'a str,
        name: &'a str,
        old: Option<&'a Value>,
    ) -> Attributes<'a> {
        Attributes {
            operation,
            old_object: old,
            namespace: "",
            name,
            group: "",
            version: "v1",
            resource,
            subresource,
            dry_run: false,
            user,
            feedback: Box::leak(Box::<Feedback>::default()),
        }
    }

    fn node_user() -> UserInfo {
        UserInfo::named("system:node:a", &["system:nodes"])
    }

    #[test]
    fn a_node_changes_only_its_own_node_and_not_its_taints() {
        let user = node_user();
        let old = json!({"metadata": {"name": "a", "labels": {"kubernetes.io/hostname": "a"}},
            "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}});
        let update = |new: &Value, name| {
            let a = attributes(&user, Operation::Update, "nodes", "", name, Some(&old));
            check("a", &a, Some(new))
        };
        let mut relabelled = old.clone();
        relabelled["metadata"]["labels"]["tier"] = "x".into();
        relabelled["metadata"]["labels"]["topology.kubernetes.io/zone"] = "z".into();
        assert_eq!(update(&relabelled, "a"), Ok(()));
        assert!(update(&relabelled, "b")
            .unwrap_err()
            .contains("modify node \"b\""));
        let mut restricted = old.clone();
        restricted["metadata"]["labels"]["node-restriction.kubernetes.io/pool"] = "x".into();
        assert!(update(&restricted, "a")
            .unwrap_err()
            .contains("node-restriction.kubernetes.io/pool"));
        let mut role = old.clone();
        role["metadata"]["labels"]["node-role.kubernetes.io/master"] = "".into();
        assert!(update(&role, "a").is_err());
        let mut untainted = old.clone();
        untainted["spec"]["taints"] = json!([]);
        assert!(update(&untainted, "a").unwrap_err().contains("taints"));
    }

    #[test]
    fn a_node_touches_only_pods_bound_to_it_and_creates_only_plain_mirror_pods() {
        let user = node_user();
        let mine = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "a"}});
        let theirs = json!({"metadata": {"name": "q"}, "spec": {"nodeName": "b"}});
        let status = |old| attributes(&user, Operation::Update, "pods", "status", "p", Some(old));
        assert_eq!(check("a", &status(&mine), Some(&mine)), Ok(()));
        assert!(check("a", &status(&theirs), Some(&theirs)).is_err());
        let delete = attributes(&user, Operation::Delete, "pods", "", "q", Some(&theirs));
        assert!(check("a", &delete, None).is_err());
        let create = attributes(&user, Operation::Create, "pods", "", "p", None);
        assert!(check("a", &create, Some(&mine))
            .unwrap_err()
            .contains("mirror"));
        let mirror = json!({"metadata": {"name": "m", "annotations": {MIRROR_ANNOTATION: "x"}},
            "spec": {"nodeName": "a", "containers": [{"name": "c", "image": "i"}]}});
        assert_eq!(check("a", &create, Some(&mirror)), Ok(()));
        let mut secretive = mirror.clone();
        secretive["spec"]["volumes"] = json!([{"name": "v", "secret": {"secretName": "s"}}]);
        assert!(check("a", &create, Some(&secretive))
            .unwrap_err()
            .contains("secrets"));
        let anyone = UserInfo::named("alice", &[]);
        let theirs_status = attributes(
            &anyone,
            Operation::Update,
            "pods",
            "status",
            "q",
            Some(&theirs),
        );
        let plugin = NodeRestriction::new(Arc::new(Memory::default()));
        let admitted = futures::executor::block_on(plugin.validate(&theirs_status, Some(&theirs)));
        assert_eq!(admitted, Ok(()));
    }

    /// Pod `p` on node a and `q` on node b, in namespace `team`.
    fn plugin_with_pods() -> NodeRestriction {
        let memory = Memory::default();
        for (name, node) in [("p", "a"), ("q", "b")] {
            let pod = json!({"metadata": {"name": name, "namespace": "team", "uid": format!("uid-{name}")},
                "spec": {"nodeName": node}});
            memory.put(PODS, pod);
        }
        NodeRestriction::new(Arc::new(memory))
    }

    fn in_team(mut a: Attributes<'_>) -> Attributes<'_> {
        a.namespace = "team";
        a
    }

    #[test]
    fn a_node_evicts_only_its_own_pods() {
        let (user, plugin) = (node_user(), plugin_with_pods());
        let evict = |name| {
            let a = in_team(attributes(
                &user,
                Operation::Create,
                "pods",
                "eviction",
                name,
                None,
            ));
            futures::executor::block_on(plugin.validate(&a, Some(&json!({"kind": "Eviction"}))))
        };
        assert_eq!(evict("p"), Ok(()));
        let Err(AdmissionError::Denied(denial)) = evict("q") else {
            panic!("another node's pod evicted")
        };
        assert!(denial.reason.contains("can only evict pods"), "{denial:?}");
        assert!(matches!(
            evict("gone"),
            Err(AdmissionError::NotFound { .. })
        ));
    }

    #[test]
    fn a_node_asks_tokens_only_bound_to_its_own_pod_by_uid() {
        let (user, plugin) = (node_user(), plugin_with_pods());
        let ask = |reference: Value| {
            let a = attributes(
                &user,
                Operation::Create,
                "serviceaccounts",
                "token",
                "default",
                None,
            );
            let request = json!({"kind": "TokenRequest", "spec": {"boundObjectRef": reference}});
            match futures::executor::block_on(plugin.validate(&in_team(a), Some(&request))) {
                Ok(()) => String::new(),
                Err(AdmissionError::Denied(denial)) => denial.reason,
                Err(other) => format!("{other:?}"),
            }
        };
        let pod = |name: &str, uid: &str| json!({"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid});
        assert_eq!(ask(pod("p", "uid-p")), "");
        assert!(ask(Value::Null).contains("not bound to a pod"));
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "name": "s", "uid": "u"});
        assert!(ask(secret).contains("not bound to a pod"));
        assert!(ask(pod("p", "")).contains("without a uid"));
        assert!(ask(pod("p", "uid-old")).contains("does not match the UID"));
        assert!(ask(pod("q", "uid-q")).contains("scheduled on a different node"));
        assert!(ask(pod("gone", "u")).contains("NotFound"));
        let anyone = UserInfo::named("alice", &[]);
        let a = attributes(
            &anyone,
            Operation::Create,
            "serviceaccounts",
            "token",
            "default",
            None,
        );
        let unbound = futures::executor::block_on(plugin.validate(&a, Some(&json!({}))));
        assert_eq!(unbound, Ok(()), "only nodes are held to pods");
    }
}
