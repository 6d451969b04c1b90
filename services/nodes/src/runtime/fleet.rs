//! The process's nodes and what each one knows: its identity on the API
//! (a client acting as `system:node:<name>`), whether it runs, its pod
//! CIDR and pod addresses, the pods it admitted and what they use, the
//! images it pulled, its last Lease and status.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use capstan_client::connect::Connection;
use capstan_client::events::EventRecorder;
use ipnet::Ipv4Net;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeStatus, Pod};
use parking_lot::Mutex;

use crate::error::Error;
use crate::node::cidr::PodAddresses;
use crate::node::template::NodeTemplate;
use crate::pod::admission::{self, host_ports, NodeFacts, Rejection, Usage};
use crate::pod::resources::pod_requests;
use crate::quantity::Amounts;

/// The group every node's identity is in.
pub const NODES_GROUP: &str = "system:nodes";

/// A node's user name, as kube's Node authorizer expects it.
pub fn node_user(name: &str) -> String {
    format!("system:node:{name}")
}

/// The nodes of this process, fixed at start.
pub struct Fleet {
    pub template: NodeTemplate,
    pub allocatable: Amounts,
    nodes: HashMap<String, Arc<SimNode>>,
    ordered: Vec<Arc<SimNode>>,
}

impl Fleet {
    /// `count` nodes shaped by `template`, each with its own identity on `connection`.
    pub fn new(
        template: NodeTemplate,
        count: usize,
        connection: &Connection,
    ) -> Result<Fleet, Error> {
        let mut ordered = Vec::with_capacity(count);
        for index in 0..count {
            let name = template.name(index);
            let client = connection.impersonating(&node_user(&name), &[NODES_GROUP])?;
            ordered.push(Arc::new(SimNode {
                labels: template.labels(index),
                name,
                index,
                client,
                running: AtomicBool::new(true),
                state: Mutex::new(NodeState::default()),
            }));
        }
        let nodes = ordered
            .iter()
            .map(|n| (n.name.clone(), n.clone()))
            .collect();
        Ok(Fleet {
            allocatable: template.allocatable(),
            template,
            nodes,
            ordered,
        })
    }

    pub fn get(&self, name: &str) -> Option<&Arc<SimNode>> {
        self.nodes.get(name)
    }

    pub fn all(&self) -> &[Arc<SimNode>] {
        &self.ordered
    }

    /// The node a pod is bound to, if it is one of ours.
    pub fn owner_of(&self, pod: &Pod) -> Option<&Arc<SimNode>> {
        let name = pod.spec.as_ref()?.node_name.as_deref()?;
        self.nodes.get(name)
    }
}

/// One simulated node.
pub struct SimNode {
    pub name: String,
    pub index: usize,
    /// Acts as `system:node:<name>` in `system:nodes`.
    pub client: kube::Client,
    /// The template's labels, until the Node object is known.
    labels: std::collections::BTreeMap<String, String>,
    running: AtomicBool,
    pub state: Mutex<NodeState>,
}

/// What a node keeps between its syncs.
#[derive(Default)]
pub struct NodeState {
    /// The Node object as last read or written.
    pub node: Option<Arc<Node>>,
    pub pod_cidr: Option<Ipv4Net>,
    addresses: Option<PodAddresses>,
    pub usage: Usage,
    admitted: HashMap<String, Admitted>,
    pub images: BTreeSet<String>,
    /// The Lease as last written.
    pub lease: Option<Lease>,
    /// The status as last reported.
    pub status: Option<NodeStatus>,
    recorder: Option<EventRecorder>,
}

struct Admitted {
    requests: Amounts,
    host_ports: Vec<(String, i32)>,
}

/// Whether a node runs a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Admitted now or earlier; `first` when now, so its warnings are told once.
    Admitted {
        first: bool,
    },
    Rejected(Rejection),
}

impl SimNode {
    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }

    /// Stops or starts the node's kubelet; returns whether that changed anything.
    pub fn set_running(&self, running: bool) -> bool {
        self.running.swap(running, Ordering::AcqRel) != running
    }

    pub fn uid(&self) -> Option<String> {
        self.state
            .lock()
            .node
            .as_ref()
            .and_then(|n| n.metadata.uid.clone())
    }

    /// Takes the pod CIDR the node registered with.
    pub fn set_pod_cidr(&self, cidr: Ipv4Net) {
        let mut state = self.state.lock();
        if state.pod_cidr != Some(cidr) {
            state.pod_cidr = Some(cidr);
            state.addresses = Some(PodAddresses::new(cidr));
        }
    }

    /// Admits `pod` as the kubelet does: a pod that already started here
    /// (the process restarted) is counted without a check, in the order
    /// the caller gives; a new one must fit beside the others.
    pub fn admit(&self, pod: &Pod, allocatable: &Amounts) -> Admission {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let mut state = self.state.lock();
        if state.admitted.contains_key(&uid) {
            return Admission::Admitted { first: false };
        }
        let Some(spec) = &pod.spec else {
            return Admission::Rejected(unexpected("the pod has no spec".into()));
        };
        let requests = match pod_requests(spec) {
            Ok(requests) => requests,
            Err(e) => return Admission::Rejected(unexpected(e.to_string())),
        };
        let started = pod.status.as_ref().is_some_and(|s| s.start_time.is_some());
        if !started {
            let labels = state
                .node
                .as_ref()
                .and_then(|n| n.metadata.labels.clone())
                .unwrap_or_else(|| self.labels.clone());
            let taints = state
                .node
                .as_ref()
                .and_then(|n| n.spec.as_ref()?.taints.clone())
                .unwrap_or_default();
            let facts = NodeFacts {
                name: &self.name,
                labels: &labels,
                taints: &taints,
                allocatable,
            };
            if let Err(rejection) = admission::admit(pod, &requests, &facts, &state.usage) {
                return Admission::Rejected(rejection);
            }
        }
        let ports = host_ports(spec);
        state.usage.add(&requests, &ports);
        state.images.extend(
            spec.containers
                .iter()
                .chain(spec.init_containers.iter().flatten())
                .filter_map(|c| c.image.clone()),
        );
        state.admitted.insert(
            uid,
            Admitted {
                requests,
                host_ports: ports,
            },
        );
        Admission::Admitted { first: true }
    }

    /// The pod's address (the one it has, or a new one); `None` when the
    /// node's CIDR is full or not known yet.
    pub fn pod_ip(&self, pod: &Pod) -> Option<String> {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let mut state = self.state.lock();
        let addresses = state.addresses.as_mut()?;
        let existing = pod.status.as_ref().and_then(|s| s.pod_ip.as_deref());
        if let Some(ip) = existing {
            if addresses.restore(uid, ip) {
                return Some(ip.to_string());
            }
        }
        addresses.assign(uid).map(|ip| ip.to_string())
    }

    /// Frees what a finished or deleted pod held.
    pub fn release(&self, pod_uid: &str) {
        let mut state = self.state.lock();
        if let Some(admitted) = state.admitted.remove(pod_uid) {
            state.usage.remove(&admitted.requests, &admitted.host_ports);
        }
        if let Some(addresses) = state.addresses.as_mut() {
            addresses.release(pod_uid);
        }
    }

    /// The node's event recorder (the kubelet's, with the node as host).
    pub fn recorder(&self) -> EventRecorder {
        let mut state = self.state.lock();
        state
            .recorder
            .get_or_insert_with(|| {
                EventRecorder::new(self.client.clone(), "kubelet", Some(&self.name))
            })
            .clone()
    }
}

fn unexpected(message: String) -> Rejection {
    Rejection {
        reason: "UnexpectedAdmissionError".into(),
        message,
    }
}

/// The fleet shared by the process's tasks.
pub type SharedFleet = Arc<Fleet>;
