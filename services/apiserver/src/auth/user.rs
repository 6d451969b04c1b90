//! The user a request acts as (Kubernetes' `user.Info`).

use std::collections::BTreeMap;

use serde_json::{json, Value};

pub const ANONYMOUS: &str = "system:anonymous";
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
pub const AUTHENTICATED: &str = "system:authenticated";
/// The superuser group: authorizers allow its members everything.
pub const MASTERS: &str = "system:masters";

/// Who a request acts as: a name, an optional uid, the groups it is in,
/// and what else the authenticator knows (a bound pod, a credential id).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// A request no authenticator recognised, when anonymous requests
    /// are allowed.
    pub fn anonymous() -> UserInfo {
        UserInfo::named(ANONYMOUS, &[UNAUTHENTICATED])
    }

    /// The API server's own writes (its controllers').
    pub fn server() -> UserInfo {
        UserInfo::named("system:apiserver", &[MASTERS])
    }

    /// `name` in `groups`.
    pub fn named(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..UserInfo::default()
        }
    }

    /// authentication.k8s.io/v1 UserInfo, as reviews, webhooks and
    /// admission policies see it (uid and extra only when set).
    pub fn to_json(&self) -> Value {
        let mut info = json!({"username": self.name, "groups": self.groups});
        if !self.uid.is_empty() {
            info["uid"] = json!(self.uid);
        }
        if !self.extra.is_empty() {
            info["extra"] = json!(self.extra);
        }
        info
    }

    /// A member of `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}

/// The group every node's (kubelet's) user is in.
pub const NODES_GROUP: &str = "system:nodes";

/// The node a user is (`system:node:<name>` in `system:nodes`), if any.
pub fn node_name(user: &UserInfo) -> Option<&str> {
    let name = user.name.strip_prefix("system:node:")?;
    (!name.is_empty() && user.in_group(NODES_GROUP)).then_some(name)
}

/// The user name of a service account.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// The groups of a service account's user.
pub fn service_account_groups(namespace: &str) -> Vec<String> {
    vec![
        "system:serviceaccounts".to_string(),
        format!("system:serviceaccounts:{namespace}"),
    ]
}
