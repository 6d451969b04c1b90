//! What a plugin is told about a request (Kubernetes'
//! `admission.Attributes`): the operation, the object and the old one,
//! where it lives, whether it is a dry run, and who asks.

use serde_json::Value;

/// The operation being admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    /// As kube spells it (`CREATE`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// The user a request acts as (Kubernetes' `user.Info`), as the handler
/// chain's authentication and impersonation decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub groups: Vec<String>,
}

impl UserInfo {
    /// What the chain says today: no authentication is configured.
    pub fn anonymous() -> UserInfo {
        UserInfo {
            name: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
        }
    }

    /// The API server's own writes (its controllers').
    pub fn server() -> UserInfo {
        UserInfo {
            name: "system:apiserver".into(),
            groups: vec!["system:masters".into()],
        }
    }
}

impl Default for UserInfo {
    fn default() -> UserInfo {
        UserInfo::anonymous()
    }
}

/// One request as admission sees it. The object being admitted is passed
/// beside these (mutable to the mutating step).
#[derive(Debug, Clone, Copy)]
pub struct Attributes<'a> {
    pub operation: Operation,
    /// The stored object an update or delete starts from.
    pub old_object: Option<&'a Value>,
    pub namespace: &'a str,
    pub name: &'a str,
    pub group: &'a str,
    pub version: &'a str,
    pub resource: &'a str,
    /// `status`, `scale`, ...; empty for the object itself.
    pub subresource: &'a str,
    pub dry_run: bool,
    pub user: &'a UserInfo,
    /// Where plugins leave warnings and audit annotations.
    pub feedback: &'a super::Feedback,
}
