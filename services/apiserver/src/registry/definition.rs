//! What a kind declares as data: its names and scope as discovery shows
//! them, its subresources, and the parts of the generic flow that only
//! some kinds have (graceful or held deletion, expiry, values held alone
//! across the cluster, rules about who may write). The generic flow reads
//! these; it never asks which kind it serves.

use serde_json::Value;

use super::subresource::{Serve, Subresource};
use crate::auth::{Authorizer, UserInfo};
use crate::error::{ApiError, Target};
use crate::object::meta::NameRule;

#[derive(Debug, Clone)]
pub struct ResourceDef {
    pub group: &'static str,
    pub version: &'static str,
    /// Plural, lower-case: the URL segment and the storage key segment.
    pub resource: &'static str,
    pub kind: &'static str,
    pub singular: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    /// What the kind serves below its objects (see `subresource`): with
    /// `status`, the main resource ignores `.status` on writes and
    /// `/status` writes change nothing else; with `scale`, an
    /// autoscaling/v1 Scale over `spec.replicas`.
    pub subresources: &'static [Subresource],
    pub name_rule: NameRule,
    pub deletion: Deletion,
    /// Objects expire after the server's `--event-ttl` (kube's events).
    pub expires: bool,
    /// Values an object holds alone across the cluster (a service's
    /// cluster IPs); only kinds that have some take the claim step.
    pub unique: Option<&'static dyn UniqueValues>,
    /// Refuses a write its requester may not make because of what the
    /// object grants (RBAC's escalation prevention).
    pub write_check: Option<WriteCheck>,
}

impl ResourceDef {
    /// A namespaced kind with no subresources and no special parts.
    pub const fn new(
        group: &'static str,
        version: &'static str,
        resource: &'static str,
        kind: &'static str,
        singular: &'static str,
    ) -> ResourceDef {
        ResourceDef {
            group,
            version,
            resource,
            kind,
            singular,
            namespaced: true,
            short_names: &[],
            categories: &[],
            subresources: &[],
            name_rule: NameRule::Subdomain,
            deletion: Deletion::AT_ONCE,
            expires: false,
            unique: None,
            write_check: None,
        }
    }

    /// `v1` or `apps/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn target(&self, name: &str) -> Target {
        Target {
            group: self.group.into(),
            resource: self.resource.into(),
            name: name.into(),
        }
    }

    /// The subresource named `name`, if the kind serves one.
    pub fn subresource(&self, name: &str) -> Option<&'static Subresource> {
        self.subresources.iter().find(|s| s.name == name)
    }

    /// Has a `/status` subresource.
    pub fn has_status(&self) -> bool {
        self.subresources
            .iter()
            .any(|s| matches!(s.serve, Serve::Status))
    }

    /// Has a `/scale` subresource.
    pub fn has_scale(&self) -> bool {
        self.subresources
            .iter()
            .any(|s| matches!(s.serve, Serve::Scale))
    }

    pub fn verbs(&self) -> Vec<&'static str> {
        vec![
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
    }
}

/// How deleting an object goes besides its finalizers and the
/// propagation the request asks for.
#[derive(Debug, Clone, Copy)]
pub struct Deletion {
    /// Finalizers a delete adds, for the kind's own cleanup before the
    /// object goes (a CRD's instances).
    pub finalizers: &'static [&'static str],
    /// Graceful deletion (Kubernetes' `CheckGracefulDelete`): how many
    /// seconds a delete of the object waits before it goes (0: at once),
    /// given the grace period the request asked for.
    pub grace_period: Option<fn(&Value, Option<i64>) -> i64>,
    /// Objects of the kind hold the objects of every namespaced kind that
    /// names them as their namespace: a delete marks one, and its contents
    /// are deleted before it goes.
    pub holds_contents: bool,
}

impl Deletion {
    /// Nothing of the kind's own: the object goes at once unless its
    /// finalizers or the propagation asked for hold it.
    pub const AT_ONCE: Deletion = Deletion {
        finalizers: &[],
        grace_period: None,
        holds_contents: false,
    };
}

/// Values an object holds alone across the cluster: the store keeps one
/// claim key per value (see `storage::claims`), written with the object.
pub trait UniqueValues: Send + Sync {
    /// The values `obj` holds.
    fn claims(&self, obj: &Value) -> Vec<Claim>;

    /// Picks the values `obj` leaves to the server (at random, so a pick
    /// that turns out taken is redone by calling this again on the
    /// unpicked object), carrying over what `old` already holds.
    fn allocate(&self, obj: &mut Value, old: Option<&Value>);
}

impl std::fmt::Debug for dyn UniqueValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UniqueValues")
    }
}

/// One value an object holds alone, such as a service's cluster IP.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    /// The claim's name under the claims prefix: `serviceips/10.96.0.10`.
    pub name: String,
    /// Where the object holds the value, for the cause when it is taken.
    pub field: String,
    pub value: String,
    /// What the cause says when another object holds it.
    pub taken: &'static str,
}

/// Refuses a write of `obj` (`old`: the object it replaces, None on a
/// create) by its requester, the user and the authorizer that answers for
/// them; runs after validation, and not for the server's own writes.
pub type WriteCheck =
    fn(&Value, Option<&Value>, (&UserInfo, &dyn Authorizer)) -> Result<(), ApiError>;
