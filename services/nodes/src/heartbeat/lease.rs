//! The node Lease a lease-based kubelet renews (`kube-node-lease/<node>`,
//! held by the node's name, 40 s long, renewed every 10 s with up to 4%
//! jitter), owned by its Node so that deleting the Node deletes it.

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};

pub const NAMESPACE: &str = "kube-node-lease";
/// The kubelet's `nodeLeaseDurationSeconds` default.
pub const DURATION_SECONDS: i32 = 40;
/// A quarter of the duration, as the kubelet renews.
pub const RENEW_INTERVAL: Duration = Duration::from_secs(10);
/// The kubelet's `wait.JitterUntil` factor: each wait is 10 s to 10.4 s.
const JITTER: f64 = 0.04;

/// A fresh Lease for `node`, renewed `now`.
pub fn new_lease(node: &str, node_uid: Option<&str>, now: DateTime<Utc>) -> Lease {
    let blank = Lease {
        metadata: ObjectMeta {
            name: Some(node.to_string()),
            namespace: Some(NAMESPACE.to_string()),
            ..ObjectMeta::default()
        },
        spec: None,
    };
    renewed(&blank, node, node_uid, now)
}

/// `lease` renewed by `node` at `now` (and owned by its Node once the
/// Node's uid is known).
pub fn renewed(lease: &Lease, node: &str, node_uid: Option<&str>, now: DateTime<Utc>) -> Lease {
    let mut lease = lease.clone();
    // An update without managedFields keeps the live entries (the field
    // manager starts from them), so a renewal does not send them back:
    // most of a Lease's bytes, encoded here and decoded by the server
    // every 10 s for each node, for the same result.
    lease.metadata.managed_fields = None;
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    spec.holder_identity = Some(node.to_string());
    spec.lease_duration_seconds = Some(DURATION_SECONDS);
    spec.renew_time = Some(MicroTime(now));
    let owned = lease
        .metadata
        .owner_references
        .as_ref()
        .is_some_and(|o| !o.is_empty());
    if let (false, Some(uid)) = (owned, node_uid) {
        lease.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Node".into(),
            name: node.to_string(),
            uid: uid.to_string(),
            ..OwnerReference::default()
        }]);
    }
    lease
}

/// The wait before the next renewal; `unit` is a random number in [0, 1).
pub fn renew_after(unit: f64) -> Duration {
    RENEW_INTERVAL.mul_f64(1.0 + JITTER * unit.clamp(0.0, 1.0))
}

/// When a node's first renewal goes, spread over one interval so that the
/// renewals of many nodes started together do not come in a burst.
pub fn first_renewal_after(unit: f64) -> Duration {
    RENEW_INTERVAL.mul_f64(unit.clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_held_by_its_node_and_owned_once_the_node_is_known() {
        let now = Utc::now();
        let lease = new_lease("node-1", None, now);
        assert_eq!(lease.metadata.namespace.as_deref(), Some(NAMESPACE));
        let spec = lease.spec.clone().unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some("node-1"));
        assert_eq!(spec.lease_duration_seconds, Some(40));
        assert!(lease.metadata.owner_references.is_none());
        let later = now + chrono::TimeDelta::seconds(10);
        let mut held = lease.clone();
        held.metadata.managed_fields = Some(vec![Default::default()]);
        let renewed = renewed(&held, "node-1", Some("uid-1"), later);
        assert!(
            renewed.metadata.managed_fields.is_none(),
            "the server keeps them"
        );
        assert_eq!(renewed.spec.unwrap().renew_time, Some(MicroTime(later)));
        assert_eq!(renewed.metadata.owner_references.unwrap()[0].uid, "uid-1");
    }

    #[test]
    fn renewals_are_jittered_and_spread() {
        assert_eq!(renew_after(0.0), Duration::from_secs(10));
        assert_eq!(renew_after(1.0), Duration::from_millis(10_400));
        assert_eq!(first_renewal_after(0.5), Duration::from_secs(5));
    }
}
