//! What the scheduler writes to the API, as a trait: the wiring implements
//! it over `capstan-client`, the benchmark and the tests over memory.

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use thiserror::Error;

#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum ApiError {
    #[error("not found: {0}")]
    NotFound(String),
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("{0}")]
    Other(String),
}

pub type ApiResult = BoxFuture<'static, Result<(), ApiError>>;

/// The identity of a pod a request is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl PodRef {
    pub fn of(pod: &Pod) -> PodRef {
        PodRef {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
        }
    }
}

/// A change to a pending pod's status: the PodScheduled condition and the
/// nominated node (`Some("")` clears it).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StatusPatch {
    /// (reason, message) of a PodScheduled=False condition.
    pub unschedulable: Option<(String, String)>,
    pub nominated_node_name: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// An Event about a pod (`kubectl describe pod` shows them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerEvent {
    pub regarding: PodRef,
    /// The other object involved (the preemptor, for a Preempted event).
    pub related: Option<PodRef>,
    pub event_type: EventType,
    pub reason: String,
    /// kube's action: Scheduling, Binding, Preempting.
    pub action: String,
    pub message: String,
}

pub trait SchedulerApi: Send + Sync + 'static {
    /// POST pods/binding.
    fn bind(&self, pod: &PodRef, node: &str) -> ApiResult;

    /// Patches the pod's status (the condition and nominatedNodeName).
    fn patch_status(&self, pod: &PodRef, patch: StatusPatch) -> ApiResult;

    /// Evicts a preemption victim as kube does: a DisruptionTarget condition
    /// (PreemptionByScheduler), then a graceful delete (preconditioned on its uid).
    fn preempt(&self, victim: &PodRef, message: &str) -> ApiResult;

    /// Records an Event; never blocks (the recorder buffers and may drop).
    fn record(&self, event: SchedulerEvent);
}
