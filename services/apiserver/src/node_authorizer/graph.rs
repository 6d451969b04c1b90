//! What each node may reach, kept from watches as kube's node authorizer
//! keeps its graph: a pod bound to a node reaches the Secrets,
//! ConfigMaps, PersistentVolumeClaims and ServiceAccount it names; a
//! PersistentVolume is reached through the claim bound to it, and the
//! Secrets a volume names through the volume. Every change updates the
//! counts in place, so a decision is a few map lookups.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::object::meta;

/// The kinds of object a pod or a volume can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RefKind {
    Secret,
    ConfigMap,
    Claim,
    ServiceAccount,
}

/// One named object a pod or volume refers to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ref {
    pub kind: RefKind,
    pub namespace: String,
    pub name: String,
}

impl Ref {
    pub fn new(kind: RefKind, namespace: &str, name: &str) -> Ref {
        Ref {
            kind,
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

type Key = (String, String);

struct BoundPod {
    node: String,
    refs: Vec<Ref>,
}

#[derive(Default)]
struct Volume {
    claim: Option<Key>,
    secrets: Vec<Ref>,
}

/// The graph from nodes to what they may read.
#[derive(Default)]
pub struct Graph {
    pods: HashMap<Key, BoundPod>,
    /// For each object, how many pods of each node name it.
    reached: HashMap<Ref, HashMap<String, u32>>,
    volumes: HashMap<String, Volume>,
    /// For each Secret, the volumes that name it.
    volume_secrets: HashMap<Ref, HashSet<String>>,
}

fn key(object: &Value) -> Key {
    (
        meta::namespace(object).to_string(),
        meta::name(object).to_string(),
    )
}

impl Graph {
    /// Adds or updates a pod: only a pod bound to a node reaches anything.
    pub fn put_pod(&mut self, pod: &Value) {
        self.remove_pod(pod);
        let node = pod["spec"]["nodeName"].as_str().unwrap_or("");
        if node.is_empty() {
            return;
        }
        let refs = pod_refs(pod);
        for reference in &refs {
            let counts = self.reached.entry(reference.clone()).or_default();
            *counts.entry(node.to_string()).or_default() += 1;
        }
        let node = node.to_string();
        self.pods.insert(key(pod), BoundPod { node, refs });
    }

    pub fn remove_pod(&mut self, pod: &Value) {
        let Some(gone) = self.pods.remove(&key(pod)) else {
            return;
        };
        for reference in gone.refs {
            let Some(counts) = self.reached.get_mut(&reference) else {
                continue;
            };
            if let Some(count) = counts.get_mut(&gone.node) {
                *count -= 1;
                if *count == 0 {
                    counts.remove(&gone.node);
                }
            }
            if counts.is_empty() {
                self.reached.remove(&reference);
            }
        }
    }

    pub fn replace_pods(&mut self, pods: &[std::sync::Arc<Value>]) {
        self.pods.clear();
        self.reached.clear();
        for pod in pods {
            self.put_pod(pod);
        }
    }

    /// Adds or updates a PersistentVolume: its claim and its Secrets.
    pub fn put_volume(&mut self, volume: &Value) {
        self.remove_volume(volume);
        let name = meta::name(volume).to_string();
        let claim_ref = &volume["spec"]["claimRef"];
        let claim = claim_ref["name"].as_str().map(|claim| {
            let namespace = claim_ref["namespace"].as_str().unwrap_or("");
            (namespace.to_string(), claim.to_string())
        });
        let secrets = volume_secrets(volume);
        for secret in &secrets {
            let names = self.volume_secrets.entry(secret.clone()).or_default();
            names.insert(name.clone());
        }
        self.volumes.insert(name, Volume { claim, secrets });
    }

    pub fn remove_volume(&mut self, volume: &Value) {
        let name = meta::name(volume);
        let Some(gone) = self.volumes.remove(name) else {
            return;
        };
        for secret in gone.secrets {
            if let Some(names) = self.volume_secrets.get_mut(&secret) {
                names.remove(name);
                if names.is_empty() {
                    self.volume_secrets.remove(&secret);
                }
            }
        }
    }

    pub fn replace_volumes(&mut self, volumes: &[std::sync::Arc<Value>]) {
        self.volumes.clear();
        self.volume_secrets.clear();
        for volume in volumes {
            self.put_volume(volume);
        }
    }

    /// Whether pod `namespace/name` is bound to `node`.
    pub fn pod_on(&self, node: &str, namespace: &str, name: &str) -> bool {
        let key = (namespace.to_string(), name.to_string());
        self.pods.get(&key).is_some_and(|pod| pod.node == node)
    }

    /// Whether a pod bound to `node` names `object`, directly or (for a
    /// Secret) through a volume it claims.
    pub fn reaches(&self, node: &str, object: &Ref) -> bool {
        if self.named_by_pods(node, object) {
            return true;
        }
        object.kind == RefKind::Secret
            && self
                .volume_secrets
                .get(object)
                .is_some_and(|volumes| volumes.iter().any(|v| self.volume_reached(node, v)))
    }

    /// Whether a pod bound to `node` claims the PersistentVolume `name`.
    pub fn volume_reached(&self, node: &str, name: &str) -> bool {
        let claim = self.volumes.get(name).and_then(|v| v.claim.as_ref());
        claim.is_some_and(|(namespace, claim)| {
            self.named_by_pods(node, &Ref::new(RefKind::Claim, namespace, claim))
        })
    }

    fn named_by_pods(&self, node: &str, object: &Ref) -> bool {
        self.reached
            .get(object)
            .is_some_and(|nodes| nodes.contains_key(node))
    }
}

/// What a pod names, as kube's graph populator reads it.
fn pod_refs(pod: &Value) -> Vec<Ref> {
    let namespace = meta::namespace(pod);
    let spec = &pod["spec"];
    let mut refs = HashSet::new();
    let mut add = |kind, name: Option<&str>| {
        if let Some(name) = name.filter(|n| !n.is_empty()) {
            refs.insert(Ref::new(kind, namespace, name));
        }
    };
    add(RefKind::ServiceAccount, spec["serviceAccountName"].as_str());
    for secret in items(&spec["imagePullSecrets"]) {
        add(RefKind::Secret, secret["name"].as_str());
    }
    for volume in items(&spec["volumes"]) {
        add(RefKind::Secret, volume["secret"]["secretName"].as_str());
        add(RefKind::ConfigMap, volume["configMap"]["name"].as_str());
        let claim = volume["persistentVolumeClaim"]["claimName"].as_str();
        add(RefKind::Claim, claim);
        if volume["ephemeral"].is_object() {
            let generated = format!(
                "{}-{}",
                meta::name(pod),
                volume["name"].as_str().unwrap_or("")
            );
            add(RefKind::Claim, Some(&generated));
        }
        for source in items(&volume["projected"]["sources"]) {
            add(RefKind::Secret, source["secret"]["name"].as_str());
            add(RefKind::ConfigMap, source["configMap"]["name"].as_str());
        }
        add(RefKind::Secret, volume["azureFile"]["secretName"].as_str());
        // Volume plugins' own secretRef (cephfs, rbd, flexVolume, iscsi,
        // ...) and a CSI driver's publish secret.
        for (_, source) in volume.as_object().into_iter().flatten() {
            add(RefKind::Secret, source["secretRef"]["name"].as_str());
            add(
                RefKind::Secret,
                source["nodePublishSecretRef"]["name"].as_str(),
            );
        }
    }
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        for container in items(&spec[list]) {
            for env in items(&container["env"]) {
                add(
                    RefKind::Secret,
                    env["valueFrom"]["secretKeyRef"]["name"].as_str(),
                );
                add(
                    RefKind::ConfigMap,
                    env["valueFrom"]["configMapKeyRef"]["name"].as_str(),
                );
            }
            for from in items(&container["envFrom"]) {
                add(RefKind::Secret, from["secretRef"]["name"].as_str());
                add(RefKind::ConfigMap, from["configMapRef"]["name"].as_str());
            }
        }
    }
    refs.into_iter().collect()
}

/// The Secrets a PersistentVolume's source names (a CSI driver's
/// `*SecretRef`s, a plugin's `secretRef`), each with its namespace.
fn volume_secrets(volume: &Value) -> Vec<Ref> {
    let mut secrets = Vec::new();
    for (_, source) in volume["spec"].as_object().into_iter().flatten() {
        for (field, reference) in source.as_object().into_iter().flatten() {
            if !field.ends_with("SecretRef") && field != "secretRef" {
                continue;
            }
            let name = reference["name"].as_str().unwrap_or("");
            let namespace = reference["namespace"].as_str().unwrap_or("");
            if !name.is_empty() {
                secrets.push(Ref::new(RefKind::Secret, namespace, name));
            }
        }
    }
    secrets
}

fn items(list: &Value) -> impl Iterator<Item = &Value> {
    list.as_array().into_iter().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, node: &str, secret: &str) -> Value {
        json!({"metadata": {"namespace": "ns", "name": name},
            "spec": {"nodeName": node, "serviceAccountName": "sa",
                "volumes": [{"name": "v", "secret": {"secretName": secret}},
                            {"name": "data", "persistentVolumeClaim": {"claimName": "claim"}}],
                "containers": [{"name": "c",
                    "env": [{"name": "E", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}}]}]}})
    }

    #[test]
    fn a_node_reaches_what_its_pods_name_and_nothing_else() {
        let mut graph = Graph::default();
        graph.put_pod(&pod("a", "n1", "s1"));
        graph.put_pod(&pod("b", "n2", "s2"));
        let secret = |name| Ref::new(RefKind::Secret, "ns", name);
        assert!(graph.reaches("n1", &secret("s1")));
        assert!(!graph.reaches("n1", &secret("s2")));
        assert!(graph.reaches("n2", &secret("s2")));
        assert!(graph.reaches("n1", &Ref::new(RefKind::ConfigMap, "ns", "cm")));
        assert!(graph.reaches("n1", &Ref::new(RefKind::ServiceAccount, "ns", "sa")));
        assert!(!graph.reaches("n1", &Ref::new(RefKind::Secret, "other", "s1")));
        assert!(graph.pod_on("n1", "ns", "a") && !graph.pod_on("n1", "ns", "b"));

        graph.put_pod(&pod("a", "n1", "s3"));
        assert!(
            !graph.reaches("n1", &secret("s1")),
            "the old reference went"
        );
        graph.remove_pod(&pod("a", "n1", "s3"));
        assert!(!graph.reaches("n1", &secret("s3")));
        assert!(!graph.pod_on("n1", "ns", "a"));
        graph.put_pod(&json!({"metadata": {"namespace": "ns", "name": "c"},
            "spec": {"volumes": [{"name": "v", "secret": {"secretName": "s4"}}]}}));
        assert!(
            !graph.reaches("", &secret("s4")),
            "an unbound pod reaches nothing"
        );
    }

    #[test]
    fn volumes_are_reached_through_their_claims() {
        let mut graph = Graph::default();
        graph.put_pod(&pod("a", "n1", "s1"));
        graph.put_volume(&json!({"metadata": {"name": "pv"},
            "spec": {"claimRef": {"namespace": "ns", "name": "claim"},
                "csi": {"driver": "d", "volumeHandle": "h",
                    "nodePublishSecretRef": {"namespace": "vault", "name": "creds"}}}}));
        assert!(graph.volume_reached("n1", "pv"));
        assert!(!graph.volume_reached("n2", "pv"));
        let creds = Ref::new(RefKind::Secret, "vault", "creds");
        assert!(graph.reaches("n1", &creds));
        assert!(!graph.reaches("n2", &creds));
    }
}
