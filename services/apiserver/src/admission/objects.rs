//! What plugins may read and write besides the request's object (kube's
//! listers and clients): the objects of a few types, from the watch
//! caches, or from the store itself when a cache may be behind. The
//! registry implements it; plugins only see this interface, so admission
//! stays below the registry.

use futures::future::BoxFuture;
use serde_json::Value;

/// A resource type by group and plural name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Resource {
    pub group: &'static str,
    pub resource: &'static str,
}

pub const NAMESPACES: Resource = Resource {
    group: "",
    resource: "namespaces",
};
pub const SERVICE_ACCOUNTS: Resource = Resource {
    group: "",
    resource: "serviceaccounts",
};
pub const LIMIT_RANGES: Resource = Resource {
    group: "",
    resource: "limitranges",
};
pub const VALIDATING_ADMISSION_POLICIES: Resource = Resource {
    group: "admissionregistration.k8s.io",
    resource: "validatingadmissionpolicies",
};
pub const VALIDATING_ADMISSION_POLICY_BINDINGS: Resource = Resource {
    group: "admissionregistration.k8s.io",
    resource: "validatingadmissionpolicybindings",
};
pub const PODS: Resource = Resource {
    group: "",
    resource: "pods",
};
pub const SECRETS: Resource = Resource {
    group: "",
    resource: "secrets",
};
pub const SERVICES: Resource = Resource {
    group: "",
    resource: "services",
};
pub const ENDPOINTS: Resource = Resource {
    group: "",
    resource: "endpoints",
};
pub const RESOURCE_QUOTAS: Resource = Resource {
    group: "",
    resource: "resourcequotas",
};
pub const PRIORITY_CLASSES: Resource = Resource {
    group: "scheduling.k8s.io",
    resource: "priorityclasses",
};
pub const STORAGE_CLASSES: Resource = Resource {
    group: "storage.k8s.io",
    resource: "storageclasses",
};

/// Why a lookup failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LookupError {
    /// The type is not served here.
    #[error("{0:?} is not served")]
    Unknown(Resource),
    /// The store or the cache could not answer.
    #[error("{0}")]
    Unavailable(String),
}

impl From<LookupError> for super::AdmissionError {
    fn from(err: LookupError) -> Self {
        super::AdmissionError::Unavailable(err.to_string())
    }
}

pub type Lookup<'a, T> = BoxFuture<'a, Result<T, LookupError>>;

/// How current a read must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// Whatever the watch cache holds (kube's listers).
    Cached,
    /// The store's current state (kube's live lookups).
    Current,
}

pub trait Objects: Send + Sync {
    /// One object (namespace empty for cluster-scoped types).
    fn get<'a>(
        &'a self,
        resource: Resource,
        namespace: &'a str,
        name: &'a str,
        freshness: Freshness,
    ) -> Lookup<'a, Option<Value>>;

    /// The objects of one namespace (all of a cluster-scoped type's when
    /// `namespace` is empty).
    fn list<'a>(
        &'a self,
        resource: Resource,
        namespace: &'a str,
        freshness: Freshness,
    ) -> Lookup<'a, Vec<Value>>;

    /// Writes `object` in place of the stored one only if that one is
    /// still at the object's `metadata.resourceVersion` (a compare-and-
    /// swap): false when someone wrote it since. Admission's own
    /// bookkeeping (quota usage); no admission runs on it.
    fn swap<'a>(&'a self, resource: Resource, object: &'a Value) -> Lookup<'a, bool>;

    /// The type served for `apiVersion` and `kind` (a policy's
    /// `paramKind`), if any.
    fn served_kind(&self, _api_version: &str, _kind: &str) -> Option<ServedKind> {
        None
    }
}

/// A kind's resource and whether its objects live in namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServedKind {
    pub resource: Resource,
    pub namespaced: bool,
}
