//! The decision, as kube's Node authorizer makes it for a user
//! `system:node:<name>` in `system:nodes` (others get no opinion):
//! Secrets, ConfigMaps, PersistentVolumeClaims and PersistentVolumes are
//! read one by one and only when a pod bound to the node reaches them;
//! a ServiceAccount token only for an account such a pod runs as; pods
//! are read only when bound to the node (listed and watched with the
//! `spec.nodeName` field selector); its own Node and Lease only; the
//! rest is allowed as kube's `system:node` role allows it, and the
//! NodeRestriction admission plugin narrows the writes to the node's own
//! objects.

use crate::auth::{node_name, Attributes, Authorizer, Decision, PolicyRule};
use crate::object::selector::FieldSelector;

use super::feed::SharedGraph;
use super::graph::{Graph, Ref, RefKind};

/// Where nodes' heartbeat Leases live.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";

pub struct NodeAuthorizer {
    graph: SharedGraph,
    /// kube's `system:node` rules: what a node may do beyond the graph.
    rules: Vec<PolicyRule>,
}

impl NodeAuthorizer {
    pub fn new(graph: SharedGraph, rules: Vec<PolicyRule>) -> NodeAuthorizer {
        NodeAuthorizer { graph, rules }
    }

    fn by_rules(&self, asked: &Attributes) -> Decision {
        match self.rules.iter().any(|rule| rule.allows(asked)) {
            true => Decision::Allow,
            false => Decision::NoOpinion(String::new()),
        }
    }

    fn decide(&self, node: &str, asked: &Attributes) -> Decision {
        let graph = self.graph.read().unwrap_or_else(|e| e.into_inner());
        let referenced = |kind| read_referenced(&graph, node, kind, asked);
        match (asked.group, asked.resource, asked.subresource) {
            ("", "secrets", _) => referenced(RefKind::Secret),
            ("", "configmaps", _) => referenced(RefKind::ConfigMap),
            ("", "persistentvolumeclaims", _) => referenced(RefKind::Claim),
            ("", "persistentvolumes", _) => read_volume(&graph, node, asked),
            ("", "serviceaccounts", "token") => token(&graph, node, asked),
            ("", "pods", "") => match read_pod(&graph, node, asked) {
                Some(refused) => refused,
                None => self.by_rules(asked),
            },
            ("", "nodes", "") if is_read(asked.verb) => own(node, asked, "Node"),
            ("coordination.k8s.io", "leases", "") => match lease(node, asked) {
                Some(refused) => refused,
                None => self.by_rules(asked),
            },
            ("storage.k8s.io", "csinodes", "") if asked.verb != "create" => {
                match own(node, asked, "CSINode") {
                    Decision::Allow => self.by_rules(asked),
                    refused => refused,
                }
            }
            _ => self.by_rules(asked),
        }
    }
}

impl Authorizer for NodeAuthorizer {
    fn authorize(&self, asked: &Attributes) -> Decision {
        match node_name(asked.user) {
            Some(node) if asked.resource_request => self.decide(node, asked),
            Some(_) => self.by_rules(asked),
            None => Decision::NoOpinion(String::new()),
        }
    }
}

fn is_read(verb: &str) -> bool {
    matches!(verb, "get" | "list" | "watch")
}

fn no_relationship(node: &str) -> Decision {
    Decision::NoOpinion(format!(
        "no relationship found between node '{node}' and this object"
    ))
}

/// A read of one object (by name, or a list or watch pinned to a name)
/// that a pod bound to the node reaches.
fn read_referenced(graph: &Graph, node: &str, kind: RefKind, asked: &Attributes) -> Decision {
    if !is_read(asked.verb) {
        return Decision::NoOpinion("can only read resources of this type".into());
    }
    if !asked.subresource.is_empty() {
        return Decision::NoOpinion(format!("cannot read subresource {}", asked.subresource));
    }
    if asked.name.is_empty() {
        return Decision::NoOpinion("can only read individual resources of this type".into());
    }
    match graph.reaches(node, &Ref::new(kind, asked.namespace, asked.name)) {
        true => Decision::Allow,
        false => no_relationship(node),
    }
}

fn read_volume(graph: &Graph, node: &str, asked: &Attributes) -> Decision {
    if asked.verb != "get" || !asked.subresource.is_empty() || asked.name.is_empty() {
        return Decision::NoOpinion("can only get individual resources of this type".into());
    }
    match graph.volume_reached(node, asked.name) {
        true => Decision::Allow,
        false => no_relationship(node),
    }
}

/// A token for a ServiceAccount a pod bound to the node runs as.
fn token(graph: &Graph, node: &str, asked: &Attributes) -> Decision {
    if asked.verb != "create" || asked.name.is_empty() {
        return Decision::NoOpinion(
            "can only create tokens for individual service accounts".into(),
        );
    }
    let account = Ref::new(RefKind::ServiceAccount, asked.namespace, asked.name);
    match graph.reaches(node, &account) {
        true => Decision::Allow,
        false => no_relationship(node),
    }
}

/// Reads of pods: one bound to the node, or a list or watch selecting
/// `spec.nodeName=<node>`; None for the other verbs (the rules decide).
fn read_pod(graph: &Graph, node: &str, asked: &Attributes) -> Option<Decision> {
    if !is_read(asked.verb) {
        return None;
    }
    if !asked.name.is_empty() {
        return Some(match graph.pod_on(node, asked.namespace, asked.name) {
            true => Decision::Allow,
            false => no_relationship(node),
        });
    }
    match asked.field_selector.is_some_and(|s| selects_node(s, node)) {
        true => Some(Decision::Allow),
        false => Some(Decision::NoOpinion(
            "can only list/watch pods with spec.nodeName field selector".into(),
        )),
    }
}

/// Whether every object the selector passes is on `node`.
fn selects_node(selector: &FieldSelector, node: &str) -> bool {
    let terms = &selector.0;
    terms
        .iter()
        .any(|(field, equal, value)| field == "spec.nodeName" && *equal && value == node)
}

/// A read of the node's own object of `kind` (named, or pinned by name).
fn own(node: &str, asked: &Attributes, kind: &str) -> Decision {
    match asked.name == node {
        true => Decision::Allow,
        false => Decision::NoOpinion(format!(
            "node '{node}' cannot read '{}', only its own {kind} object",
            asked.name
        )),
    }
}

/// Leases: only in `kube-node-lease`, and (but to create) only its own.
fn lease(node: &str, asked: &Attributes) -> Option<Decision> {
    if asked.namespace != LEASE_NAMESPACE {
        return Some(Decision::NoOpinion(format!(
            "can only access leases in the {LEASE_NAMESPACE} namespace"
        )));
    }
    if asked.verb != "create" && asked.name != node {
        return Some(Decision::NoOpinion(
            "can only access node lease with the same name as the requesting node".into(),
        ));
    }
    None
}
