//! The user a request acts as (Kubernetes' `user.Info`).

use std::collections::BTreeMap;

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

    /// A member of `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
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
