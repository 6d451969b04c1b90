//! What a plugin is told about a request (Kubernetes'
//! `admission.Attributes`): the operation, the object and the old one,
//! where it lives, whether it is a dry run, and who asks.

use serde_json::Value;

use crate::auth::UserInfo;

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
