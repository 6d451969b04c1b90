//! What the engine is told about a request: who sends it, what it does,
//! and what its cost depends on. The chain fills this in from its own
//! request description; the engine never reads the HTTP request.

/// Who and what, as FlowSchema rules match them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestDigest {
    pub user: String,
    pub groups: Vec<String>,
    /// kube's verb: `get`, `list`, `watch`, `create`, `update`, `patch`,
    /// `delete`, `deletecollection`, ...; for a non-resource request the
    /// lower-case HTTP method.
    pub verb: String,
    pub target: Target,
}

/// A resource (with its namespace, empty for cluster-scoped ones) or a
/// non-resource path such as `/healthz`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Resource(ResourceTarget),
    NonResource { path: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResourceTarget {
    /// Empty for the core group.
    pub api_group: String,
    pub resource: String,
    pub subresource: Option<String>,
    /// Empty for a cluster-scoped request.
    pub namespace: String,
    /// The object's name, when the request names one.
    pub name: Option<String>,
}

/// What a list or watch costs depends on: how many objects the server
/// holds of the type (the caller's estimate; `None` when it has none, as
/// for an aggregated type) and how the request narrows them down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ListShape {
    pub object_count: Option<u64>,
    /// The `limit` parameter; `None` or 0 is no limit.
    pub limit: Option<u64>,
    /// A label or field selector is given.
    pub filtered: bool,
    /// Served from the watch cache rather than the store.
    pub from_cache: bool,
    /// A watch that asked for its initial events (`sendInitialEvents`).
    pub initial_events: bool,
}

impl RequestDigest {
    /// A request for `resource` in `namespace` (empty: cluster-scoped).
    pub fn resource(
        user: &str,
        groups: &[&str],
        verb: &str,
        api_group: &str,
        resource: &str,
        namespace: &str,
    ) -> Self {
        RequestDigest {
            user: user.to_string(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            verb: verb.to_string(),
            target: Target::Resource(ResourceTarget {
                api_group: api_group.to_string(),
                resource: resource.to_string(),
                namespace: namespace.to_string(),
                ..ResourceTarget::default()
            }),
        }
    }

    /// A request for a non-resource `path`.
    pub fn non_resource(user: &str, groups: &[&str], verb: &str, path: &str) -> Self {
        RequestDigest {
            user: user.to_string(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            verb: verb.to_string(),
            target: Target::NonResource {
                path: path.to_string(),
            },
        }
    }

    /// The namespace of a namespaced resource request.
    pub fn namespace(&self) -> &str {
        match &self.target {
            Target::Resource(r) => &r.namespace,
            Target::NonResource { .. } => "",
        }
    }
}
